"""Layers: parameter shapes/names/defaults, forward against NumPy (or PyTorch), gradients, bad input."""
import math

import numpy as np
import pytest

import minispore as ms
from minispore import nn
from minispore.common.errors import OpTypeError, OpValueError

rng = np.random.default_rng(0)


def T(a, dtype=np.float32):
    return ms.Tensor(np.asarray(a, dtype=dtype))


def names(cell):
    return [(n, tuple(p.shape)) for n, p in cell.parameters_and_names()]


# ------------------------------------------------------------------------------------------------
# Dense
def test_dense_params_defaults_and_forward():
    ms.set_seed(0)
    d = nn.Dense(30, 4)
    assert names(d) == [("weight", (4, 30)), ("bias", (4,))]
    bound = 1 / math.sqrt(30)                         # HeUniform(sqrt(5)) and the bias: U(-1/sqrt(in), ..)
    assert np.abs(d.weight.asnumpy()).max() <= bound and np.abs(d.bias.asnumpy()).max() <= bound
    assert np.abs(d.weight.asnumpy()).max() > 0.8 * bound
    x = rng.normal(size=(2, 5, 30)).astype(np.float32)           # (*, in) -> (*, out)
    y = d(T(x)).asnumpy()
    np.testing.assert_allclose(y, x @ d.weight.asnumpy().T + d.bias.asnumpy(), rtol=1e-5, atol=1e-6)
    assert nn.Dense(3, 4, has_bias=False).bias is None
    assert names(nn.Dense(3, 4, has_bias=False)) == [("weight", (4, 3))]


def test_dense_activation_init_and_dtype():
    d = nn.Dense(3, 2, weight_init="ones", bias_init="zeros", activation="relu")
    np.testing.assert_array_equal(d(T([[1, -5, 1]])).asnumpy(), [[0, 0]])
    d = nn.Dense(2, 2, weight_init=T(np.eye(2)), bias_init=1.5, dtype=ms.float64)
    assert d.bias.dtype == ms.float64
    np.testing.assert_allclose(d(ms.Tensor(np.array([[1.0, 2.0]]))).asnumpy(), [[2.5, 3.5]])


def test_dense_gradients_match_numpy():
    d = nn.Dense(3, 2)
    x = rng.normal(size=(4, 3)).astype(np.float32)
    loss, (gw, gb) = ms.value_and_grad(lambda a: (d(a) ** 2).sum(), None, d.trainable_params())(T(x))
    W, b = d.weight.asnumpy().astype(np.float64), d.bias.asnumpy().astype(np.float64)
    y = x @ W.T + b
    np.testing.assert_allclose(gw.asnumpy(), 2 * y.T @ x, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(gb.asnumpy(), 2 * y.sum(0), rtol=1e-4, atol=1e-5)


def test_dense_bad_input():
    d = nn.Dense(3, 2)
    with pytest.raises(OpValueError, match="'Dense'.*in_channels"):
        d(T(np.ones((4, 5))))
    with pytest.raises(OpValueError, match="'Dense'.*rank"):
        d(T(np.ones(3)))
    with pytest.raises(OpTypeError, match="'Dense'"):
        d(np.ones((4, 3)))
    with pytest.raises(OpValueError, match="'Dense'"):
        nn.Dense(0, 2)
    with pytest.raises(OpValueError, match="'Dense'.*weight_init"):
        nn.Dense(3, 2, weight_init=T(np.ones((3, 2))))
    with pytest.raises(OpValueError, match="initializer"):
        nn.Dense(3, 2, weight_init="not_an_init")
    with pytest.raises(OpValueError, match="'Dense'.*activation"):
        nn.Dense(3, 2, activation="swoosh")


# ------------------------------------------------------------------------------------------------
# Embedding
def test_embedding_lookup_grad_padding_one_hot():
    ms.set_seed(1)
    e = nn.Embedding(10, 4, padding_idx=3)
    assert names(e) == [("embedding_table", (10, 4))]
    table = e.embedding_table.asnumpy()
    assert (table[3] == 0).all() and table.std() == pytest.approx(0.01, rel=0.5)   # 'normal' = N(0, 0.01)
    ids = np.array([[1, 3, 1], [9, 0, 2]], np.int32)
    np.testing.assert_array_equal(e(ms.Tensor(ids)).asnumpy(), table[ids])
    (g,) = ms.grad(lambda i: e(i).sum(), None, e.trainable_params())(ms.Tensor(ids))
    counts = np.bincount(ids.ravel(), minlength=10)[:, None] * np.ones((1, 4))
    np.testing.assert_array_equal(g.asnumpy(), counts)          # padding row still gets gradient (MindSpore)
    e1 = nn.Embedding(10, 4, use_one_hot=True, embedding_table=T(table))
    np.testing.assert_allclose(e1(ms.Tensor(ids)).asnumpy(), table[ids], rtol=1e-6)
    with pytest.raises(OpTypeError, match="'Embedding'"):
        e(T([[1.0, 2.0]]))
    with pytest.raises(OpValueError, match="'Embedding'.*padding_idx"):
        nn.Embedding(5, 2, padding_idx=5)


# ------------------------------------------------------------------------------------------------
# LayerNorm / RMSNorm
def _ln_ref(x, axes, g, b, eps):
    x = x.astype(np.float64)
    mu = x.mean(axis=axes, keepdims=True)
    var = x.var(axis=axes, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * g + b


def test_layernorm_default_and_general_axes():
    ln = nn.LayerNorm((6,))
    assert names(ln) == [("gamma", (6,)), ("beta", (6,))]
    assert ln.epsilon == 1e-7
    ln.gamma.set_data(T(rng.normal(size=6)))
    ln.beta.set_data(T(rng.normal(size=6)))
    x = rng.normal(size=(2, 3, 6)).astype(np.float32)
    np.testing.assert_allclose(ln(T(x)).asnumpy(), _ln_ref(x, (-1,), ln.gamma.asnumpy(), ln.beta.asnumpy(), 1e-7),
                               rtol=1e-4, atol=1e-5)
    # normalize over (C, H, W) with per-W affine params
    ln2 = nn.LayerNorm((5,), begin_norm_axis=1, begin_params_axis=-1, epsilon=1e-5)
    ln2.gamma.set_data(T(rng.normal(size=5)))
    x = rng.normal(size=(2, 3, 4, 5)).astype(np.float32)
    np.testing.assert_allclose(ln2(T(x)).asnumpy(), _ln_ref(x, (1, 2, 3), ln2.gamma.asnumpy(), 0, 1e-5),
                               rtol=1e-4, atol=1e-5)
    with pytest.raises(OpTypeError, match="'LayerNorm'"):
        nn.LayerNorm(6)
    with pytest.raises(OpValueError, match="'LayerNorm'"):
        ln(T(np.ones((2, 5))))


def test_rmsnorm():
    r = nn.RMSNorm(8, eps=1e-6)
    assert names(r) == [("weight", (8,))] and (r.weight.asnumpy() == 1).all()
    r.weight.set_data(T(rng.normal(size=8)))
    x = rng.normal(size=(3, 8)).astype(np.float32)
    ref = x / np.sqrt((x.astype(np.float64) ** 2).mean(-1, keepdims=True) + 1e-6) * r.weight.asnumpy()
    np.testing.assert_allclose(r(T(x)).asnumpy(), ref, rtol=1e-5, atol=1e-6)
    with pytest.raises(OpValueError, match="'RMSNorm'"):
        r(T(np.ones((3, 4))))


# ------------------------------------------------------------------------------------------------
# Dropout
def test_dropout_train_eval_and_p_precedence():
    x = T(np.ones((200, 500)))
    d = nn.Dropout(keep_prob=0.9, p=0.25)                   # p wins
    assert d.p == 0.25 and d.keep_prob == 0.75
    assert d(x) is x                                         # eval mode (default): identity
    d.set_train()
    ms.set_seed(0)
    y = d(x).asnumpy()
    kept = y != 0
    assert kept.mean() == pytest.approx(0.75, abs=0.01)
    np.testing.assert_allclose(y[kept], 1 / 0.75, rtol=1e-6)
    dk = nn.Dropout(keep_prob=0.6).set_train()
    assert (dk(x).asnumpy() != 0).mean() == pytest.approx(0.6, abs=0.01)
    assert nn.Dropout(p=0.0).set_train()(x) is x
    with pytest.raises(OpValueError, match="'Dropout'"):
        nn.Dropout(p=1.0)
    with pytest.raises(OpValueError, match="'Dropout'"):
        nn.Dropout(keep_prob=0.0)


# ------------------------------------------------------------------------------------------------
# Conv2d / pooling
def test_conv2d_defaults_and_modes_match_torch():
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    c = nn.Conv2d(3, 4, 3)
    assert names(c) == [("weight", (4, 3, 3, 3))] and c.pad_mode == "same" and not c.has_bias
    assert np.abs(c.weight.asnumpy()).max() <= 1 / math.sqrt(27)
    x = rng.normal(size=(2, 3, 7, 7)).astype(np.float32)
    w = c.weight.asnumpy()
    y = c(T(x)).asnumpy()
    assert y.shape == (2, 4, 7, 7)
    np.testing.assert_allclose(y, F.conv2d(torch.tensor(x), torch.tensor(w), padding=1).numpy(), rtol=1e-4, atol=1e-5)
    # valid, strided, grouped, with bias
    c2 = nn.Conv2d(4, 6, (3, 2), stride=2, pad_mode="valid", group=2, has_bias=True)
    x2 = rng.normal(size=(1, 4, 9, 8)).astype(np.float32)
    ref = F.conv2d(torch.tensor(x2), torch.tensor(c2.weight.asnumpy()), torch.tensor(c2.bias.asnumpy()),
                   stride=2, groups=2).numpy()
    np.testing.assert_allclose(c2(T(x2)).asnumpy(), ref, rtol=1e-4, atol=1e-5)
    # explicit padding, dilation
    c3 = nn.Conv2d(3, 2, 3, pad_mode="pad", padding=2, dilation=2)
    ref = F.conv2d(torch.tensor(x), torch.tensor(c3.weight.asnumpy()), padding=2, dilation=2).numpy()
    np.testing.assert_allclose(c3(T(x)).asnumpy(), ref, rtol=1e-4, atol=1e-5)


def test_conv2d_bad_input():
    c = nn.Conv2d(3, 4, 3)
    with pytest.raises(OpValueError, match="'Conv2d'.*in_channels"):
        c(T(np.ones((1, 2, 5, 5))))
    with pytest.raises(OpValueError, match="'Conv2d'.*4-d"):
        c(T(np.ones((3, 5, 5))))
    with pytest.raises(OpValueError, match="'Conv2d'.*padding"):
        nn.Conv2d(3, 4, 3, padding=1)
    with pytest.raises(OpValueError, match="'Conv2d'.*group"):
        nn.Conv2d(3, 4, 3, group=2)


def _pool_ref(x, k, s, pads, fn, fill):
    n, c, h, w = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), pads[:2], pads[2:]), constant_values=fill)
    oh = (xp.shape[2] - k) // s + 1
    ow = (xp.shape[3] - k) // s + 1
    out = np.empty((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            out[:, :, i, j] = fn(xp[:, :, i * s:i * s + k, j * s:j * s + k])
    return out


def test_maxpool2d_modes():
    x = rng.normal(size=(2, 3, 7, 6)).astype(np.float32)
    mp = nn.MaxPool2d(kernel_size=2, stride=2)                        # valid
    np.testing.assert_array_equal(mp(T(x)).asnumpy(),
                                  _pool_ref(x, 2, 2, (0, 0, 0, 0), lambda a: a.max(axis=(2, 3)), 0))
    same = nn.MaxPool2d(kernel_size=2, stride=2, pad_mode="same")     # 7 -> 4 rows: one pad row at the bottom
    y = same(T(x)).asnumpy()
    assert y.shape == (2, 3, 4, 3)
    np.testing.assert_array_equal(y, _pool_ref(x, 2, 2, (0, 1, 0, 0), lambda a: a.max(axis=(2, 3)), -np.inf))
    same3 = nn.MaxPool2d(kernel_size=3, stride=1, pad_mode="same")
    np.testing.assert_array_equal(same3(T(x)).asnumpy(),
                                  _pool_ref(x, 3, 1, (1, 1, 1, 1), lambda a: a.max(axis=(2, 3)), -np.inf))
    g = ms.grad(lambda a: same(a).sum())(T(x)).asnumpy()
    assert g.sum() == pytest.approx(y.size) and set(np.unique(g)) <= {0.0, 1.0}
    assert same(T(x[0])).shape == (3, 4, 3)                          # (C, H, W) input
    with pytest.raises(OpValueError, match="'MaxPool2d'"):
        mp(T(np.ones((4, 4))))


def test_avgpool2d_same_excludes_padding():
    x = rng.normal(size=(1, 2, 5, 5)).astype(np.float32)
    ap = nn.AvgPool2d(kernel_size=3, stride=2, pad_mode="same")
    y = ap(T(x)).asnumpy()
    sums = _pool_ref(x, 3, 2, (1, 1, 1, 1), lambda a: a.sum(axis=(2, 3)), 0)
    counts = _pool_ref(np.ones_like(x), 3, 2, (1, 1, 1, 1), lambda a: a.sum(axis=(2, 3)), 0)
    np.testing.assert_allclose(y, sums / counts, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(nn.AvgPool2d(2, 2)(T(x)).asnumpy(),
                               _pool_ref(x, 2, 2, (0, 0, 0, 0), lambda a: a.mean(axis=(2, 3)), 0), rtol=1e-5)


# ------------------------------------------------------------------------------------------------
# Flatten / Identity / activations
def test_flatten_identity():
    x = T(np.arange(24).reshape(2, 3, 4))
    assert nn.Flatten()(x).shape == (2, 12)
    assert nn.Flatten(0, 1)(x).shape == (6, 4)
    assert nn.Identity()(x) is x
    with pytest.raises(OpValueError, match="'Flatten'"):
        nn.Flatten(2, 1)(x)


def test_activation_cells():
    from scipy.special import erf
    x = rng.normal(size=(3, 5)).astype(np.float32) * 3
    xd = x.astype(np.float64)
    cases = [
        (nn.ReLU(), np.maximum(xd, 0)),
        (nn.Sigmoid(), 1 / (1 + np.exp(-xd))),
        (nn.Tanh(), np.tanh(xd)),
        (nn.SiLU(), xd / (1 + np.exp(-xd))),
        (nn.GELU(), 0.5 * xd * (1 + np.tanh(np.sqrt(2 / np.pi) * (xd + 0.044715 * xd ** 3)))),
        (nn.GELU(approximate=False), 0.5 * xd * (1 + erf(xd / np.sqrt(2)))),
        (nn.Softmax(), np.exp(xd) / np.exp(xd).sum(-1, keepdims=True)),
        (nn.LogSoftmax(axis=0), xd - np.log(np.exp(xd).sum(0, keepdims=True))),
        (nn.LeakyReLU(0.1), np.where(xd > 0, xd, 0.1 * xd)),
    ]
    for cell, ref in cases:
        np.testing.assert_allclose(cell(T(x)).asnumpy(), ref, rtol=1e-5, atol=1e-6, err_msg=type(cell).__name__)
    assert isinstance(nn.get_activation("gelu"), nn.GELU)
