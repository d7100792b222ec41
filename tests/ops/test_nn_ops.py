"""Behaviour of the nn ops that the op table cannot express: dropout's randomness and mask replay,
dtypes of mixed-precision outputs, and gradients of gradients through whole small networks."""
import numpy as np
import pytest

import minispore as ms
from minispore import Tensor, ops
from minispore.common import context
from minispore.common.errors import OpValueError


# -------------------------------------------------------------------------------------------------
# dropout
def test_dropout_drops_about_p_and_rescales_the_rest():
    ms.set_seed(0)
    x = np.ones((200, 500), np.float32)
    y = ops.dropout(Tensor(x), p=0.3).asnumpy()
    kept = y != 0
    assert abs(kept.mean() - 0.7) < 0.005                 # 100,000 draws: std of the mean ~0.0015
    np.testing.assert_allclose(y[kept], 1 / 0.7, rtol=1e-6)


def test_dropout_backward_replays_the_forward_mask():
    x = Tensor(np.random.default_rng(0).standard_normal((30, 40)))
    ms.set_seed(1)
    mask = ops.dropout(x, 0.5).asnumpy() != 0              # the mask this seed draws first
    ms.set_seed(1)
    out, g = ms.value_and_grad(lambda t: (ops.dropout(t, 0.5) * 3.0).sum())(x)
    assert 0.4 < mask.mean() < 0.6
    np.testing.assert_array_equal(g.asnumpy(), np.where(mask, 3.0 * 2.0, 0.0))
    np.testing.assert_allclose(out.asnumpy(), 3.0 * 2.0 * x.asnumpy()[mask].sum())


def test_dropout_gradient_of_gradient_is_zero_and_finite():
    ms.set_seed(2)
    x = Tensor(np.random.default_rng(1).standard_normal((5, 6)))

    def first(t):
        return ms.grad(lambda u: (ops.dropout(u, 0.4) * u).sum())(t).sum()

    gg = ms.grad(first)(x).asnumpy()
    # d/dx sum(mask*x*x/(1-p)) = 2*mask*x/(1-p): its gradient (summed) is 2*mask/(1-p)
    assert set(np.unique(np.round(gg, 12))) <= {0.0, round(2 / 0.6, 12)}


def test_dropout_seeds_are_reproducible_and_streams_advance():
    x = Tensor(np.ones((8, 8), np.float32))
    ms.set_seed(7)
    a1, a2 = ops.dropout(x, 0.5).asnumpy(), ops.dropout(x, 0.5).asnumpy()
    ms.set_seed(7)
    b1, b2 = ops.dropout(x, 0.5).asnumpy(), ops.dropout(x, 0.5).asnumpy()
    np.testing.assert_array_equal(a1, b1)
    np.testing.assert_array_equal(a2, b2)
    assert (a1 != a2).any()                                # the global stream advanced
    ms.set_seed(7)
    s1, s2 = ops.dropout(x, 0.5, seed=3).asnumpy(), ops.dropout(x, 0.5, seed=3).asnumpy()
    assert (s1 != s2).any() and (s1 != a1).any()           # an op seed has its own advancing stream
    ms.set_seed(7)
    np.testing.assert_array_equal(ops.dropout(x, 0.5, seed=3).asnumpy(), s1)


def test_dropout_identity_cases_and_p_one():
    x = Tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    assert ops.dropout(x, 0.5, training=False) is x
    assert ops.dropout(x, 0.0) is x
    with pytest.raises(OpValueError, match="dropout"):      # MindSpore: keep_prob = 1 - p must be > 0
        ops.dropout(x, 1.0)
    x4 = Tensor(np.ones((2, 3, 2, 2), np.float32))
    state = context.get_rng_state()
    np.testing.assert_array_equal(ops.dropout2d(x4, 1.0).asnumpy(), np.zeros((2, 3, 2, 2)))
    assert context.get_rng_state() != state                # p=1 still draws (keeps streams aligned)


# -------------------------------------------------------------------------------------------------
# mixed precision
def test_half_precision_inputs_are_normalized_in_float32():
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((4, 64)) * 50 + 1000).astype(np.float16)   # large mean: float16 sums would drift
    y = ops.layer_norm(Tensor(x), (64,)).asnumpy()
    xf = x.astype(np.float64)
    want = (xf - xf.mean(-1, keepdims=True)) / np.sqrt(xf.var(-1, keepdims=True) + 1e-5)
    assert y.dtype == np.float16
    np.testing.assert_allclose(y.astype(np.float64), want, atol=4e-3)
    y2, rstd = ops.rms_norm(Tensor(x), Tensor(np.ones(64, np.float16)))
    assert y2.dtype == ms.float16 and rstd.dtype == ms.float32         # MindSpore: rstd is float32
    np.testing.assert_allclose(rstd.asnumpy()[:, 0], 1 / np.sqrt((xf ** 2).mean(-1) + 1e-6), rtol=1e-5)


def test_cross_entropy_float16_logits_match_float64():
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((32, 10)) * 4).astype(np.float16)
    t = rng.integers(0, 10, 32)
    got = ops.cross_entropy(Tensor(x), Tensor(t), label_smoothing=0.1)
    want = ops.cross_entropy(Tensor(x.astype(np.float64)), Tensor(t), label_smoothing=0.1)
    assert got.dtype == ms.float16
    np.testing.assert_allclose(float(got.asnumpy()), float(want.asnumpy()), rtol=2e-3)


# -------------------------------------------------------------------------------------------------
# a small LeNet-style network through every op of the family: second-order gradients
def test_lenet_block_hessian_vector_product_matches_finite_differences():
    """Gradient of <grad(loss), v> w.r.t. the conv weight, against central differences of grad(loss)."""
    rng = np.random.default_rng(3)
    x = Tensor(rng.standard_normal((2, 1, 8, 8)))
    t = Tensor(np.array([1, 3]))
    w2 = Tensor(rng.standard_normal((4 * 2 * 2, 5)) * 0.3)

    def loss(w):
        h = ops.conv2d(x, w, pad_mode="same")                       # (2, 4, 8, 8)
        h = ops.max_pool2d(h, 2)                                     # (2, 4, 4, 4)
        h = ops.avg_pool2d(h, 2, 2)                                  # (2, 4, 2, 2)
        h = ops.layer_norm(h.reshape((2, 16)), (16,))
        return ops.cross_entropy(ops.matmul(h, w2), t, label_smoothing=0.1)

    w = rng.standard_normal((4, 1, 3, 3))
    v = rng.standard_normal(w.shape)
    grad = ms.grad(loss)
    hvp = ms.grad(lambda u: (grad(u) * Tensor(v)).sum())(Tensor(w)).asnumpy()
    eps = 1e-5
    fd = (grad(Tensor(w + eps * v)).asnumpy() - grad(Tensor(w - eps * v)).asnumpy()) / (2 * eps)
    np.testing.assert_allclose(hvp, fd, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_cross_entropy_gradient_is_softmax_minus_one_hot(reduction):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((6, 7))
    t = rng.integers(0, 7, 6)
    g = ms.grad(lambda a: ops.cross_entropy(a, Tensor(t), reduction=reduction).sum())(Tensor(x)).asnumpy()
    p = np.exp(x - x.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    want = p - np.eye(7)[t]
    np.testing.assert_allclose(g, want / 6 if reduction == "mean" else want, rtol=1e-12, atol=1e-14)
