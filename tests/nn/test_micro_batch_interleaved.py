"""nn.MicroBatchInterleaved (coarse multi-copy): the batch cut into copies along dimension 0, the
network run per copy, the outputs combined so that value and gradients equal the unsplit network's
(float64; the oracle is the same network called on the whole batch, and a NumPy mean)."""
import numpy as np
import pytest

import minispore as ms
from minispore import nn
from minispore.common.errors import OpTypeError, OpValueError
from minispore.ops import functional as F


def mlp():
    ms.set_seed(0)
    net = nn.SequentialCell([nn.Dense(5, 7), nn.Tanh(), nn.Dense(7, 3)])
    for p in net.get_parameters():
        p.set_dtype(ms.float64)
    return net


def data(n, seed=0):
    rng = np.random.default_rng(seed)
    return ms.Tensor(rng.standard_normal((n, 5))), ms.Tensor(rng.standard_normal((n, 3)))


@pytest.mark.parametrize("n,k", [(8, 2), (7, 2), (9, 4), (5, 5), (6, 1)])
def test_mean_loss_value_and_gradients_equal_the_whole_batch(n, k):
    net = nn.WithLossCell(mlp(), nn.MSELoss())
    wrapped = nn.MicroBatchInterleaved(net, interleave_num=k)
    x, y = data(n)
    params = net.trainable_params()
    la, ga = ms.value_and_grad(net, None, params)(x, y)
    lb, gb = ms.value_and_grad(wrapped, None, params)(x, y)
    # an independent oracle for the value: the NumPy mean of the squared errors
    pred = net.backbone_network(x).asnumpy()
    assert float(lb.asnumpy()) == pytest.approx(np.mean((pred - y.asnumpy()) ** 2), rel=1e-13)
    assert float(lb.asnumpy()) == pytest.approx(float(la.asnumpy()), rel=1e-13)
    for p, a, b in zip(params, ga, gb):
        np.testing.assert_allclose(b.asnumpy(), a.asnumpy(), rtol=1e-12, atol=1e-15, err_msg=p.name)
    assert [p.name for p in wrapped.trainable_params()] == [p.name for p in params]     # names unchanged


def test_batch_outputs_are_concatenated_and_shared_arguments_reach_every_copy():
    class Scaled(nn.Cell):
        def __init__(self):
            super().__init__()
            self.body = mlp()

        def construct(self, x, scale, bias):
            out = self.body(x) * scale + bias
            return out, F.mean(out)                          # a batch output and a 0-d one

    net = Scaled()
    wrapped = nn.MicroBatchInterleaved(net, 3)
    x, _ = data(7)
    scale, bias = ms.Tensor(np.float64(2.0)), 0.5            # a 0-d Tensor and a Python number: not split
    out_a, mean_a = net(x, scale, bias)
    out_b, mean_b = wrapped(x, scale, bias)
    np.testing.assert_allclose(out_b.asnumpy(), out_a.asnumpy(), rtol=1e-14)
    assert float(mean_b.asnumpy()) == pytest.approx(float(mean_a.asnumpy()), rel=1e-13)
    g = ms.grad(lambda t: F.sum(wrapped(t, scale, bias)[0] ** 2))(x)
    g_ref = ms.grad(lambda t: F.sum(net(t, scale, bias)[0] ** 2))(x)
    np.testing.assert_allclose(g.asnumpy(), g_ref.asnumpy(), rtol=1e-12)


def test_bad_arguments_name_the_op():
    with pytest.raises(OpTypeError, match="MicroBatchInterleaved.*network as a Cell"):
        nn.MicroBatchInterleaved(lambda x: x)
    for bad in (0, 2.0, True):
        with pytest.raises(OpValueError, match="MicroBatchInterleaved.*interleave_num"):
            nn.MicroBatchInterleaved(mlp(), bad)
    wrapped = nn.MicroBatchInterleaved(nn.WithLossCell(mlp(), nn.MSELoss()), 4)
    x, y = data(3)
    with pytest.raises(OpValueError, match="MicroBatchInterleaved.*at least interleave_num \\(4\\) rows.*3 rows"):
        wrapped(x, y)
    with pytest.raises(OpValueError, match="MicroBatchInterleaved.*same dimension 0"):
        wrapped(data(8)[0], data(6)[1])
    with pytest.raises(OpValueError, match="MicroBatchInterleaved.*batch dimension"):
        nn.MicroBatchInterleaved(mlp(), 2)(ms.Tensor(np.float64(1.0)))

    class Listy(nn.Cell):
        def construct(self, x):
            return [x]

    with pytest.raises(OpTypeError, match="MicroBatchInterleaved.*return Tensors"):
        nn.MicroBatchInterleaved(Listy(), 2)(data(4)[0])
    assert "interleave_num=4" in repr(wrapped)
