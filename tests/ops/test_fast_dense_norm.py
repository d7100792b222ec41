"""The fast paths of LayerNorm, Dense and ReLU's backward (issue 14) against their plain versions.

Each fast kernel is checked against an independent float64 NumPy reference written from the
definition, in float32 and float64, and the gradients against central finite differences in
float64:

* layer_norm: the forward's saved statistics (mean, rstd), the rearranged backward kernel (with
  and without the saved statistics) against `_layer_norm_grad_reference` and against the textbook
  formula, inputs far from zero (the two-pass variance), grad-of-grad through the saved statistics;
* dense: the in-place bias add, the `into` variant O2 uses, the backward's layouts (dW comes out
  in the weight's own C order), nn.Dense against the plain matmul + transpose + add composition;
* relu_grad: bit-identical to np.where(x > 0, dout, 0) (NaN, infinities, -0.0), PyNative equal to
  the graph-captured composition.
"""
from __future__ import annotations

import numpy as np
import pytest

import minispore as ms
from minispore import Tensor, nn, ops
from minispore.common.errors import OpValueError
from minispore.ops.primitive import get_primitive
from minispore.ops.prims import activation as A
from minispore.ops.prims import linalg_extra as L
from minispore.ops.prims import norm_ops as NO

DTYPES = [np.float32, np.float64]
TOL = {np.float32: dict(rtol=2e-5, atol=2e-5), np.float64: dict(rtol=1e-11, atol=1e-11)}


def _ln_ref64(x, w, b, eps):
    """LayerNorm over the last axis, float64, straight from the definition."""
    x = x.astype(np.float64)
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    y = (x - mean) / np.sqrt(var + eps)
    if w is not None:
        y = y * w.astype(np.float64)
    if b is not None:
        y = y + b.astype(np.float64)
    return y, mean, 1.0 / np.sqrt(var + eps)


def _numeric_grad(f, arrays, i, h=1e-6):
    """Central differences of the scalar f(*arrays) with respect to arrays[i] (float64)."""
    a = arrays[i]
    g = np.zeros_like(a)
    it = np.nditer(a, flags=["multi_index"])
    for _ in it:
        idx = it.multi_index
        old = a[idx]
        a[idx] = old + h
        fp = f(*arrays)
        a[idx] = old - h
        fm = f(*arrays)
        a[idx] = old
        g[idx] = (fp - fm) / (2 * h)
    return g


# -------------------------------------------------------------------------------------------------
# layer_norm
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm_forward_and_saved_statistics(dtype, affine):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((3, 5, 16)) * 2 + 1).astype(dtype)
    w = rng.standard_normal(16).astype(dtype) if affine else None
    b = rng.standard_normal(16).astype(dtype) if affine else None
    y, mean, rstd = NO._layer_norm_kernel(x, w, b, (16,), 1e-5)
    ry, rmean, rrstd = _ln_ref64(x, w, b, 1e-5)
    np.testing.assert_allclose(y, ry, **TOL[dtype])
    assert mean.shape == rstd.shape == (3, 5, 1)
    np.testing.assert_allclose(mean, rmean, **TOL[dtype])
    np.testing.assert_allclose(rstd, rrstd, **TOL[dtype])
    # the public op returns y alone, of the input's dtype
    out = ops.layer_norm(Tensor(x), (16,), None if w is None else Tensor(w), None if b is None else Tensor(b))
    assert out.dtype == ms.float32 if dtype is np.float32 else out.dtype == ms.float64
    np.testing.assert_allclose(out.asnumpy(), ry, **TOL[dtype])


def test_layer_norm_two_pass_variance_far_from_zero():
    # x = 100 + noise of std 0.1 in float32: E[x^2] - E[x]^2 would be off by ~1e4 * 6e-8 = 6e-4,
    # 6% of the variance (0.01); the centred two-pass variance keeps y to float32's mean error
    rng = np.random.default_rng(1)
    x = (100.0 + 0.1 * rng.standard_normal((8, 64))).astype(np.float32)
    y = ops.layer_norm(Tensor(x), (64,), eps=1e-6).asnumpy()
    ry, _, _ = _ln_ref64(x, None, None, 1e-6)
    np.testing.assert_allclose(y, ry, rtol=0, atol=2e-3)


def test_layer_norm_multi_dim_normalized_shape_and_noncontiguous_input():
    rng = np.random.default_rng(2)
    base = rng.standard_normal((4, 6, 3))
    x = np.transpose(base, (1, 0, 2))                     # (6, 4, 3), not C-contiguous
    w, b = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    y = ops.layer_norm(Tensor(x), (4, 3), Tensor(w), Tensor(b)).asnumpy()
    ry, _, _ = _ln_ref64(x.reshape(6, 12), w.reshape(-1), b.reshape(-1), 1e-5)
    np.testing.assert_allclose(y, ry.reshape(6, 4, 3), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("saved", [True, False])
def test_layer_norm_grad_kernel_equals_the_plain_backward(dtype, affine, saved):
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((7, 24)) * 3 - 2).astype(dtype)
    dy = rng.standard_normal((7, 24)).astype(dtype)
    w = rng.standard_normal(24).astype(dtype) if affine else None
    stats = NO._layer_norm_kernel(x, w, None, (24,), 1e-5)[1:] if saved else ()
    dx, dw, db = NO._layer_norm_grad_kernel(dy, x, w, *stats, normalized_shape=(24,), eps=1e-5)
    w64 = None if w is None else w.astype(np.float64)
    rdx, rdw, rdb = NO._layer_norm_grad_reference(dy.astype(np.float64), x.astype(np.float64), w64, 1e-5)
    np.testing.assert_allclose(dx, rdx, **TOL[dtype])
    np.testing.assert_allclose(dw, rdw, **TOL[dtype])
    np.testing.assert_allclose(db, rdb, **TOL[dtype])
    # and the reference is the textbook formula, checked by finite differences below


def test_layer_norm_gradients_by_finite_differences():
    rng = np.random.default_rng(4)
    x, w, b = rng.standard_normal((2, 3, 5)), rng.standard_normal(5), rng.standard_normal(5)
    c = rng.standard_normal((2, 3, 5))

    def loss(x, w, b):
        return float((_ln_ref64(x, w, b, 1e-5)[0] * c).sum())

    f = lambda X, W, B: (ops.layer_norm(X, (5,), W, B, 1e-5) * Tensor(c)).sum()      # noqa: E731
    got = ms.grad(f, (0, 1, 2))(Tensor(x), Tensor(w), Tensor(b))
    for i, g in enumerate(got):
        np.testing.assert_allclose(g.asnumpy(), _numeric_grad(loss, [x.copy(), w.copy(), b.copy()], i),
                                   rtol=1e-6, atol=1e-7)


def test_layer_norm_grad_of_grad_by_finite_differences():
    # the first backward reads the saved mean/rstd; its own backward must still differentiate
    # through them (they are functions of x)
    rng = np.random.default_rng(5)
    x, w = rng.standard_normal((3, 6)), rng.standard_normal(6)
    c, d = rng.standard_normal((3, 6)), rng.standard_normal((3, 6))

    def first(X, W):
        return ms.grad(lambda X_, W_: (ops.layer_norm(X_, (6,), W_) * Tensor(c)).sum(), (0,))(X, W)[0]

    def second_loss(X, W):
        return (first(X, W) * Tensor(d)).sum()

    got_x, got_w = ms.grad(second_loss, (0, 1))(Tensor(x), Tensor(w))
    num = lambda x_, w_: float(second_loss(Tensor(x_), Tensor(w_)).asnumpy())      # noqa: E731
    np.testing.assert_allclose(got_x.asnumpy(), _numeric_grad(num, [x.copy(), w.copy()], 0, 1e-5), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_w.asnumpy(), _numeric_grad(num, [x.copy(), w.copy()], 1, 1e-5), rtol=1e-5, atol=1e-6)


def test_layer_norm_grad_rejects_mismatched_statistics():
    P = get_primitive("layer_norm_grad")
    x = Tensor(np.ones((2, 4), np.float32))
    with pytest.raises(OpValueError, match="layer_norm_grad"):
        P(x, x, None, Tensor(np.ones((2, 1), np.float32)), normalized_shape=(4,), eps=1e-5)    # mean without rstd
    with pytest.raises(OpValueError, match="layer_norm_grad.*'rstd' of shape"):
        P(x, x, None, Tensor(np.ones((2, 1), np.float32)), Tensor(np.ones((4,), np.float32)),
          normalized_shape=(4,), eps=1e-5)


def test_nn_layernorm_trains_like_the_reference():
    rng = np.random.default_rng(6)
    ln = nn.LayerNorm((8,), epsilon=1e-5)
    x = rng.standard_normal((4, 8)).astype(np.float32)
    y = ln(Tensor(x)).asnumpy()
    np.testing.assert_allclose(y, _ln_ref64(x, None, None, 1e-5)[0], rtol=1e-5, atol=1e-5)


# -------------------------------------------------------------------------------------------------
# dense
def _dense_plain(x, w, b):
    y = x.astype(np.float64) @ w.astype(np.float64).T
    return y if b is None else y + b.astype(np.float64)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("xshape", [(6, 5), (2, 3, 5), (5,)])
@pytest.mark.parametrize("bias", [True, False])
def test_dense_kernel_and_into_equal_the_plain_product(dtype, xshape, bias):
    rng = np.random.default_rng(7)
    x, w = rng.standard_normal(xshape).astype(dtype), rng.standard_normal((4, 5)).astype(dtype)
    b = rng.standard_normal(4).astype(dtype) if bias else None
    want = _dense_plain(x, w, b)
    np.testing.assert_allclose(L._dense_kernel(x, w, b), want, **TOL[dtype])
    out = np.full(want.shape, np.nan, dtype)
    L._dense_into(out, x, w, b)
    np.testing.assert_allclose(out, want, **TOL[dtype])
    got = ops.dense(Tensor(x), Tensor(w), None if b is None else Tensor(b))
    np.testing.assert_allclose(got.asnumpy(), want, **TOL[dtype])


def test_dense_gradients_by_finite_differences_and_layouts():
    rng = np.random.default_rng(8)
    x, w, b = rng.standard_normal((2, 3, 5)), rng.standard_normal((4, 5)), rng.standard_normal(4)
    c = rng.standard_normal((2, 3, 4))

    def loss(x, w, b):
        return float((_dense_plain(x, w, b) * c).sum())

    f = lambda X, W, B: (ops.dense(X, W, B) * Tensor(c)).sum()      # noqa: E731
    got = ms.grad(f, (0, 1, 2))(Tensor(x), Tensor(w), Tensor(b))
    for i, g in enumerate(got):
        np.testing.assert_allclose(g.asnumpy(), _numeric_grad(loss, [x.copy(), w.copy(), b.copy()], i),
                                   rtol=1e-7, atol=1e-8)
    # dW comes out in the weight's own layout (no transposed view for the optimizer to read)
    assert got[1].asnumpy().flags.c_contiguous


@pytest.mark.parametrize("dtype", DTYPES)
def test_nn_dense_equals_matmul_transpose_add(dtype):
    ms.set_seed(0)
    mstype = ms.float32 if dtype is np.float32 else ms.float64
    layer = nn.Dense(5, 3, dtype=mstype)
    x = np.random.default_rng(9).standard_normal((4, 2, 5)).astype(dtype)

    def plain(X):
        y = ops.matmul(ops.reshape(X, (-1, 5)), ops.transpose(layer.weight, (1, 0))) + layer.bias
        return ops.reshape(y, (4, 2, 3))

    c = Tensor(np.random.default_rng(10).standard_normal((4, 2, 3)).astype(dtype))
    fast = ms.value_and_grad(lambda X: (layer(X) * c).sum(), 0, layer.trainable_params())(Tensor(x))
    slow = ms.value_and_grad(lambda X: (plain(X) * c).sum(), 0, layer.trainable_params())(Tensor(x))
    np.testing.assert_allclose(fast[0].asnumpy(), slow[0].asnumpy(), **TOL[dtype])
    for a, b in zip([fast[1][0]] + list(fast[1][1]), [slow[1][0]] + list(slow[1][1])):
        np.testing.assert_allclose(a.asnumpy(), b.asnumpy(), **TOL[dtype])


def test_dense_skips_the_data_gradient(monkeypatch):
    # the first layer's input is data: its gradient (a whole GEMM) is not computed
    P = get_primitive("matmul")
    calls = []
    kernel = P.kernel
    monkeypatch.setattr(P, "kernel", lambda a, b: calls.append(a.shape) or kernel(a, b))
    ms.set_seed(0)
    layer = nn.Dense(5, 3)
    x = Tensor(np.ones((4, 5), np.float32))
    ms.value_and_grad(lambda X: layer(X).sum(), None, layer.trainable_params())(x)
    assert len(calls) == 2                      # forward, dW (no dx)
    calls.clear()
    ms.value_and_grad(lambda X: layer(X).sum(), 0, layer.trainable_params())(x)
    assert len(calls) == 3                      # forward, dx, dW


# -------------------------------------------------------------------------------------------------
# relu_grad
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_relu_grad_is_bit_identical_to_where(dtype):
    rng = np.random.default_rng(11)
    x = rng.standard_normal(1000).astype(dtype)
    x[:6] = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30]
    d = rng.standard_normal(1000).astype(dtype)
    d[6:12] = [np.nan, np.inf, -np.inf, -0.0, 0.0, np.nan]
    got = A._relu_grad_kernel(x, d)
    want = np.where(x > 0, d, dtype(0))
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


def test_relu_backward_pynative_equals_graph_composition():
    rng = np.random.default_rng(12)
    x = rng.standard_normal((16, 32)).astype(np.float32)
    c = Tensor(rng.standard_normal((16, 32)).astype(np.float32))
    f = lambda X: (ops.relu(X) * c).sum()      # noqa: E731
    eager = ms.grad(f)(Tensor(x)).asnumpy()
    for level in ("O0", "O1"):
        jitted = ms.jit(ms.grad(f), capture_mode="trace", jit_level=level)(Tensor(x)).asnumpy()
        np.testing.assert_array_equal(eager, jitted)
    np.testing.assert_array_equal(eager, np.where(x > 0, c.asnumpy(), 0))


def test_relu_grad_of_grad():
    # relu_grad is linear in dout: d/d(dout) <relu_grad(x, dout), a> = relu_grad(x, a)
    rng = np.random.default_rng(13)
    x, a = rng.standard_normal((5, 4)), rng.standard_normal((5, 4))
    X = Tensor(x)

    def inner(D):
        return (A._relu_grad(X, D) * Tensor(a)).sum()

    g = ms.grad(inner)(Tensor(rng.standard_normal((5, 4))))
    np.testing.assert_array_equal(g.asnumpy(), np.where(x > 0, a, 0.0))


def test_relu_grad_rejects_mismatched_shapes():
    with pytest.raises(OpValueError, match="relu_grad"):
        A._relu_grad(Tensor(np.ones((2, 3), np.float32)), Tensor(np.ones((3, 2), np.float32)))
