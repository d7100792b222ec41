"""`minispore.mint`: PyTorch-style functional ops, mint.nn layers and mint.optim, checked against
NumPy float64 and (where installed) PyTorch, which mint follows."""
import numpy as np
import pytest

import minispore as ms
from minispore import mint
from minispore.common.errors import MinisporeError, OpValueError

RNG = np.random.default_rng(0)
X = RNG.standard_normal((3, 4)).astype(np.float32)


def T(a):
    return ms.Tensor(a)


def test_functional_conventions_against_numpy():
    x = T(X)
    x64 = X.astype(np.float64)
    np.testing.assert_allclose(mint.add(x, x, alpha=2).asnumpy(), 3 * x64, rtol=1e-6)
    np.testing.assert_allclose(mint.sub(x, 1.0, alpha=3).asnumpy(), x64 - 3, rtol=1e-6)
    np.testing.assert_allclose(mint.sum(x, 1, True).asnumpy(), x64.sum(1, keepdims=True), rtol=1e-5)
    assert mint.sum(T(np.arange(4, dtype=np.int32))).dtype == ms.int64
    np.testing.assert_allclose(mint.mean(x, dim=(0, 1)).asnumpy(), x64.mean(), rtol=1e-5)
    v, i = mint.max(x, 1)
    assert i.dtype == ms.int64 and np.array_equal(i.asnumpy(), X.argmax(1)) and np.allclose(v.asnumpy(), X.max(1))
    assert float(mint.max(x).asnumpy()) == X.max()
    np.testing.assert_array_equal(mint.max(x, T(np.zeros_like(X))).asnumpy(), np.maximum(X, 0))
    assert mint.transpose(T(np.zeros((2, 3, 4), np.float32)), 0, 2).shape == (4, 3, 2)
    assert mint.zeros(2, 3).shape == (2, 3) and mint.ones((4,)).shape == (4,)
    np.testing.assert_array_equal(mint.gather(x, 1, T(np.array([[0, 0], [1, 2], [3, 3]]))).asnumpy(),
                                  np.take_along_axis(X, np.array([[0, 0], [1, 2], [3, 3]]), 1))
    q = T(np.array([-3.0, -1.5, 2.5], np.float32))
    assert mint.div(q, 2, rounding_mode="floor").asnumpy().tolist() == [-2.0, -1.0, 1.0]
    assert mint.div(q, 2, rounding_mode="trunc").asnumpy().tolist() == [-1.0, -0.0, 1.0]
    np.testing.assert_array_equal(mint.narrow(x, 1, 1, 2).asnumpy(), X[:, 1:3])
    assert [t.shape for t in mint.unbind(x, 1)] == [(3,)] * 4
    s, idx = mint.sort(x, dim=0, descending=True)
    assert idx.dtype == ms.int64 and np.array_equal(s.asnumpy(), -np.sort(-X, 0))
    assert mint.topk(x, 2)[1].dtype == ms.int64


def test_bad_input_names_the_function():
    with pytest.raises(OpValueError, match="transpose"):
        mint.transpose(T(X), 0, 2)
    with pytest.raises(OpValueError, match="narrow"):
        mint.narrow(T(X), 1, 3, 2)
    with pytest.raises(OpValueError, match="div"):
        mint.div(T(X), 2, rounding_mode="round")
    with pytest.raises(MinisporeError):
        mint.cat((T(X), T(X[:, :2])), dim=0)


def test_nn_layers_parameter_names_and_forward():
    lin = mint.nn.Linear(4, 2)
    assert [(p.name, p.shape) for p in lin.get_parameters()] == [("weight", (2, 4)), ("bias", (2,))]
    w, b = lin.weight.asnumpy(), lin.bias.asnumpy()
    assert np.abs(w).max() <= 0.5 and np.abs(b).max() <= 0.5             # U(-1/sqrt(4), 1/sqrt(4))
    np.testing.assert_allclose(lin(T(X)).asnumpy(), X @ w.T + b, rtol=1e-5, atol=1e-6)
    emb = mint.nn.Embedding(5, 3, padding_idx=1)
    assert emb.weight.asnumpy()[1].tolist() == [0.0, 0.0, 0.0]
    ln = mint.nn.LayerNorm(4)
    x64 = X.astype(np.float64)
    np.testing.assert_allclose(ln(T(X)).asnumpy(), (x64 - x64.mean(1, keepdims=True)) / np.sqrt(x64.var(1, keepdims=True) + 1e-5),
                               rtol=1e-4, atol=1e-5)
    assert [p.name for p in mint.nn.BatchNorm2d(3).get_parameters()] == ["weight", "bias", "running_mean", "running_var",
                                                                          "num_batches_tracked"]


torch = pytest.importorskip("torch")


def test_batch_norm_follows_pytorch_momentum_convention():
    x = RNG.standard_normal((4, 3, 2, 2)).astype(np.float32)
    bn = mint.nn.BatchNorm2d(3)
    bn.set_train(True)                  # (a MindSpore Cell starts in eval mode; a torch Module in train mode)
    tb = torch.nn.BatchNorm2d(3)
    y = bn(T(x)).asnumpy()
    ty = tb(torch.tensor(x)).detach().numpy()
    np.testing.assert_allclose(y, ty, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(bn.running_mean.asnumpy(), tb.running_mean.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(bn.running_var.asnumpy(), tb.running_var.numpy(), rtol=1e-5, atol=1e-6)
    assert int(bn.num_batches_tracked.asnumpy()) == 1


@pytest.mark.parametrize("kind, kwargs", [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.1, weight_decay=0.01)),
    ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True, maximize=True)),
    ("Adam", dict(lr=0.05, weight_decay=0.1)),
    ("Adam", dict(lr=0.05, amsgrad=True)),
    ("AdamW", dict(lr=0.05, weight_decay=0.1)),
])
def test_optimizers_match_pytorch_over_three_steps(kind, kwargs):
    w0 = RNG.standard_normal((2, 3)).astype(np.float32)
    xs = RNG.standard_normal((4, 3)).astype(np.float32)
    p = ms.Parameter(T(w0.copy()), name="w")
    opt = getattr(mint.optim, kind)([p], **kwargs)
    tp = torch.tensor(w0.copy(), requires_grad=True)
    topt = getattr(torch.optim, kind)([tp], **kwargs)
    grad = ms.value_and_grad(lambda w: ((ms.ops.matmul(T(xs), w.T)) ** 2).mean(), None, [p])
    for _ in range(3):
        _, g = grad(p)
        opt(g)
        topt.zero_grad()
        ((torch.tensor(xs) @ tp.T) ** 2).mean().backward()
        topt.step()
    np.testing.assert_allclose(p.asnumpy(), tp.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_optimizer_state_names_and_bad_arguments():
    net = mint.nn.Linear(3, 2)
    assert [q.name for q in mint.optim.SGD(net.trainable_params(), lr=0.1, momentum=0.9).get_parameters()] == \
        ["weight", "bias", "momentum_buf.weight", "momentum_buf.bias", "step_t"]
    with pytest.raises(OpValueError, match="SGD"):
        mint.optim.SGD(net.trainable_params(), lr=0.1, nesterov=True)
    with pytest.raises(OpValueError, match="SGD"):
        mint.optim.SGD(net.trainable_params(), lr=-1.0)


def test_bad_input_to_mint_and_amp_helpers_raises_minispore_errors():
    import numpy as np
    import pytest
    import minispore as ms
    from minispore import amp, mint
    from minispore.common.errors import MinisporeError

    with pytest.raises(MinisporeError, match="glu"):
        mint.nn.functional.glu(ms.Tensor(np.ones((2, 3), np.float32)), dim=-1)       # odd size along dim
    with pytest.raises(MinisporeError):
        mint.nn.functional.one_hot([1, 2], 3)
    with pytest.raises(MinisporeError):
        amp.all_finite(3)
