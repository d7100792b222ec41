"""WithLossCell / WithEvalCell / TrainOneStepCell."""
import numpy as np
import pytest

import minispore as ms
from minispore import nn
from minispore.common.errors import OpTypeError

rng = np.random.default_rng(0)


def make(seed=0):
    ms.set_seed(seed)
    return nn.SequentialCell([nn.Dense(3, 4), nn.ReLU(), nn.Dense(4, 2)])


def data():
    return ms.Tensor(rng.normal(size=(6, 3)).astype(np.float32)), ms.Tensor(rng.normal(size=(6, 2)).astype(np.float32))


def test_with_loss_cell_keeps_names():
    net = make()
    wl = nn.WithLossCell(net, nn.MSELoss())
    assert [p.name for p in wl.trainable_params()] == ["0.weight", "0.bias", "2.weight", "2.bias"]
    assert wl.backbone_network is net
    x, t = data()
    assert float(wl(x, t).asnumpy()) == pytest.approx(float(nn.MSELoss()(net(x), t).asnumpy()))
    loss, out, label = nn.WithEvalCell(net, nn.MSELoss())(x, t)
    assert out.shape == (6, 2) and label is t


def test_train_one_step_equals_manual_loop_and_sens():
    x, t = data()
    a, b = make(), make()
    opt_a = nn.SGD(a.trainable_params(), 0.1, momentum=0.9)
    opt_b = nn.SGD(b.trainable_params(), 0.1, momentum=0.9)
    train = nn.TrainOneStepCell(nn.WithLossCell(a, nn.MSELoss()), opt_a)
    grad_fn = ms.value_and_grad(lambda u, v: nn.MSELoss()(b(u), v), None, opt_b.parameters)
    for _ in range(3):
        la = train(x, t)
        lb, g = grad_fn(x, t)
        opt_b(g)
        assert float(la.asnumpy()) == pytest.approx(float(lb.asnumpy()), rel=1e-6)
    for pa, pb in zip(a.trainable_params(), b.trainable_params()):
        np.testing.assert_allclose(pa.asnumpy(), pb.asnumpy(), rtol=1e-6)
    # the train cell lists network weights then optimizer state, with MindSpore's names
    names = list(train.parameters_dict())
    assert names[:4] == ["0.weight", "0.bias", "2.weight", "2.bias"]
    assert {"global_step", "learning_rate", "momentum", "accum.0.weight", "stat.2.bias"} <= set(names)

    # sens scales the gradients; return_grad hands them back
    c = make()
    opt_c = nn.SGD(c.trainable_params(), 0.1)
    w_before = c.trainable_params()[0].asnumpy().copy()
    loss, grads = nn.TrainOneStepCell(nn.WithLossCell(c, nn.MSELoss()), opt_c, sens=2.0, return_grad=True)(x, t)
    d = make()                                                   # same seed: same initial weights as c
    _, g1 = ms.value_and_grad(lambda u, v: nn.MSELoss()(d(u), v), None, d.trainable_params())(x, t)
    assert list(grads) == [p.name for p in c.trainable_params()]      # MindSpore: {name: gradient}
    g0 = grads[c.trainable_params()[0].name]
    np.testing.assert_allclose(g0.asnumpy(), 2 * g1[0].asnumpy(), rtol=1e-5)
    np.testing.assert_allclose(c.trainable_params()[0].asnumpy(), w_before - 0.1 * g0.asnumpy(), rtol=1e-5)


def test_bad_input():
    with pytest.raises(OpTypeError, match="WithLossCell"):
        nn.WithLossCell(lambda x: x, nn.MSELoss())
    with pytest.raises(OpTypeError, match="TrainOneStepCell"):
        nn.TrainOneStepCell(make(), object())
