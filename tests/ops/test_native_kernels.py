"""The PyNative C fast paths (minispore/ops/prims/_native_kernels.py) against their plain NumPy
versions and independent float64 oracles, plus the switch and the no-compiler fallback.

Oracles: the exact GELU and its derivative from `math.erfc` in float64 (not the scipy erfc the
plain kernels use); softmax and LayerNorm from their textbook float64 formulas. Gradients:
central finite differences in float64 through the ops (`ms.grad`), with a spy that the C
backward really ran. Odd inputs: empty, one element, 0-d, non-contiguous and broadcast views
(which take the plain path and must give the same numbers), mixed and half precision.

Tolerances, and why:
* GELU float32: <= 1 ulp of the float32 value (the C loop computes in double with a rational
  fit of relative error 5.2e-9 and an exp good to 1e-12, then rounds once: measured 0.58 ulp);
  plus one denormal step (2^-149) in the far negative tail, where results are subnormal.
* GELU float64: rtol 1e-13. Any float64 evaluation rounds |x| / sqrt 2 (relative 1.1e-16), which
  moves erfc(t) by a relative 2 t^2 * 1.1e-16: up to 3e-14 at |x| = 16.
* gelu_grad float32: 1 ulp + 4e-9 * |dout| absolute: the fit's 5.2e-9 relative error of
  Phi(-|x|) <= 0.5 is an absolute error <= 2.6e-9 of gelu'(x), visible in ulps only near the zero
  of gelu' (x ~ -0.75), where the value itself is tiny.
* softmax float32: rtol 4e-6 against float64: x - max(x) is rounded to float32 before exp (as the
  plain kernel does), a relative error of up to |x - max| * 6e-8 in exp (rows here span ~40).
* LayerNorm float32: (x - mean) * rstd * w + b rounds a few times in float32: atol 4e-6 for
  values of size ~10.
"""
import math
import warnings

import numpy as np
import pytest

import minispore as ms
from minispore import ops
from minispore.common import native_build
from minispore.nn.optim import _native as optim_native
from minispore.ops.prims import _native_kernels as NK
from minispore.ops.prims import activation as A
from minispore.ops.prims import norm_ops as N

HAVE_C = NK.LIBRARY.get() is not None
needs_c = pytest.mark.skipif(not HAVE_C, reason="no C compiler, or MINISPORE_NATIVE_KERNELS=0")

_erfc = np.vectorize(math.erfc, otypes=[np.float64])
_SQRT_HALF = math.sqrt(0.5)


def _gelu_math(x):
    d = np.asarray(x, np.float64)
    return 0.5 * d * _erfc(-d * _SQRT_HALF)


def _dgelu_math(x):
    d = np.asarray(x, np.float64)
    return 0.5 * _erfc(-d * _SQRT_HALF) + d * np.exp(-0.5 * d * d) / math.sqrt(2.0 * math.pi)


def _ulp32(want):
    return np.spacing(np.abs(np.asarray(want, np.float64).astype(np.float32))).astype(np.float64)


def _grid32():
    """Dense through both tails (the float32 result is subnormal below about -13.5), the region
    of gelu'(x) = 0 (x ~ -0.75), and tiny values."""
    parts = [np.linspace(-16, 16, 64001), np.linspace(-0.8, -0.7, 4001), np.geomspace(1e-30, 1e-3, 200)]
    g = np.concatenate(parts + [-p for p in parts[2:]])
    return g.astype(np.float32)


def _softmax64(x, axis=-1):
    d = np.asarray(x, np.float64)
    e = np.exp(d - d.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def _layer_norm64(x, w, b, k, eps):
    d = np.asarray(x, np.float64)
    axes = tuple(range(d.ndim - k, d.ndim))
    mu = d.mean(axes, keepdims=True)
    r = 1.0 / np.sqrt(d.var(axes, keepdims=True) + eps)
    y = (d - mu) * r
    if w is not None:
        y = y * w
    if b is not None:
        y = y + b
    return y, mu, r


# -- GELU forward ----------------------------------------------------------------------------------------
def test_the_c_source_uses_activations_gelu_constants():
    assert NK.GELU_P == A._GELU_P and NK.GELU_Q == A._GELU_Q and NK.GELU_CAP == A._GELU_CAP


@needs_c
def test_fast_gelu_float32_is_within_one_ulp_of_math_erf():
    x = _grid32()
    got = NK.gelu_erf(x)
    assert got is not None and got.dtype == np.float32
    want = _gelu_math(x)
    err = np.abs(got.astype(np.float64) - want)
    assert np.all(err <= _ulp32(want) + 2.0 ** -149), np.max(err / (_ulp32(want) + 2.0 ** -149))


@needs_c
def test_fast_gelu_float64_matches_math_erfc():
    x = np.concatenate([np.linspace(-16, 16, 20001), np.geomspace(1e-300, 1, 50), -np.geomspace(1e-300, 1, 50)])
    got = NK.gelu_erf(x)
    np.testing.assert_allclose(got, _gelu_math(x), rtol=1e-13, atol=1e-300)


@needs_c
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fast_gelu_equals_the_plain_kernels(dtype):
    x = (np.random.default_rng(0).standard_normal((37, 129)) * 4).astype(dtype)
    fast = NK.gelu_erf(x)
    assert fast.shape == x.shape and fast.dtype == x.dtype
    if dtype == np.float32:
        # both within 1 ulp of the truth, computed the same way in double: at most 1 ulp apart
        np.testing.assert_allclose(fast, A._gelu_erf_f32(x), rtol=1.2e-7, atol=1e-44)
        np.testing.assert_allclose(fast, A._gelu_erf_reference(x), rtol=1.2e-7, atol=1e-44)
    else:
        np.testing.assert_allclose(fast, A._gelu_erf_reference(x), rtol=1e-13, atol=1e-300)
    np.testing.assert_array_equal(A._gelu_kernel(x), fast)          # the op's kernel takes the fast path


@needs_c
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fast_gelu_special_values(dtype):
    big = np.finfo(dtype).max
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 40.0, -40.0, 1e-30, -1e-30, big, -big, 50.0, -50.0], dtype)
    got = NK.gelu_erf(x)
    want = np.array([0.0, 0.0, np.inf, 0.0, np.nan, 40.0, 0.0, 5e-31, -5e-31, big, 0.0, 50.0, 0.0], dtype)
    np.testing.assert_allclose(got, want, rtol=2e-7, atol=1e-45)
    np.testing.assert_allclose(got, A._gelu_erf_reference(x), rtol=2e-7, atol=1e-45)


# -- GELU backward ---------------------------------------------------------------------------------------
@needs_c
def test_fast_gelu_grad_float32_against_the_math_derivative():
    x = _grid32()
    g = np.random.default_rng(1).uniform(-3, 3, x.shape).astype(np.float32)
    got = NK.gelu_erf_grad(x, g)
    assert got is not None and got.dtype == np.float32
    want = g.astype(np.float64) * _dgelu_math(x)
    err = np.abs(got.astype(np.float64) - want)
    assert np.all(err <= _ulp32(want) + 4e-9 * np.abs(g)), np.max(err - _ulp32(want))
    # the plain float32 kernel (Phi from y / x, in float32) agrees to its own accuracy (~1.5e-7 * |g|)
    plain = A._gelu_grad_numpy(x, A._gelu_erf_reference(x), g)
    assert np.all(np.abs(plain.astype(np.float64) - got) <= 3e-7 * np.abs(g) + 1e-30)


@needs_c
def test_fast_gelu_grad_float64_against_the_math_derivative():
    x = np.linspace(-16, 16, 20001)
    g = np.random.default_rng(2).uniform(-3, 3, x.shape)
    np.testing.assert_allclose(NK.gelu_erf_grad(x, g), g * _dgelu_math(x), rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(NK.gelu_erf_grad(x, g), A._gelu_grad_numpy(x, A._gelu_erf_reference(x), g),
                               rtol=1e-12, atol=1e-14)


@needs_c
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fast_gelu_grad_special_values(dtype):
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 40.0, -40.0, 1e-30, -1e-30], dtype)
    got = NK.gelu_erf_grad(x, np.ones_like(x))
    np.testing.assert_array_equal(got, np.array([0.5, 0.5, 1.0, 0.0, np.nan, 1.0, 0.0, 0.5, 0.5], dtype))


@needs_c
def test_gelu_gradient_through_the_op_matches_finite_differences_and_runs_the_c_backward(monkeypatch):
    calls = []
    real = NK.gelu_erf_grad

    def spy(x, dout):
        out = real(x, dout)
        calls.append(out is not None)
        return out

    monkeypatch.setattr(NK, "gelu_erf_grad", spy)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((6, 7)) * 2.5
    g = rng.standard_normal((6, 7))
    got = ms.grad(lambda a: (ops.gelu(a) * ms.Tensor(g)).sum())(ms.Tensor(x)).asnumpy()
    h = 1e-6
    fd = (_gelu_math(x + h) - _gelu_math(x - h)) / (2 * h) * g
    np.testing.assert_allclose(got, fd, rtol=1e-7, atol=1e-9)
    assert calls == [True]


# -- GELU: shapes and layouts that take the plain path -------------------------------------------------------
@needs_c
def test_gelu_odd_shapes_and_layouts():
    rng = np.random.default_rng(4)
    base = (rng.standard_normal((6, 10)) * 3).astype(np.float32)
    for x in (np.zeros((0, 3), np.float32), np.float32(0.7).reshape(()), np.array([-1.5], np.float32)):
        got = A._gelu_kernel(x)
        assert got.shape == x.shape and got.dtype == np.float32
        np.testing.assert_allclose(got, _gelu_math(x), rtol=1.2e-7, atol=1e-44)
    frozen = base.copy()
    frozen.setflags(write=False)                                # read-only but contiguous: still fast
    np.testing.assert_array_equal(NK.gelu_erf(frozen), NK.gelu_erf(base))
    strided = base[:, ::3]
    bcast = np.broadcast_to(base[0], (4, 10))
    for view in (strided, bcast, base.T):
        assert NK.gelu_erf(view) is None                        # not C-contiguous: the plain path
        np.testing.assert_allclose(A._gelu_kernel(view), _gelu_math(view), rtol=1.2e-7, atol=1e-44)
        assert A._gelu_kernel(view).shape == view.shape
    # backward: one strided or broadcast operand, mixed dtypes -> plain, same numbers
    y = A._gelu_kernel(base)
    assert NK.gelu_erf_grad(base, np.ones((1, 10), np.float32)) is None          # shapes differ
    g_b = np.broadcast_to(np.float32(2.0), base.shape)
    assert NK.gelu_erf_grad(base, g_b) is None
    np.testing.assert_allclose(A._gelu_grad_kernel(base, y, g_b), 2 * _dgelu_math(base), rtol=3e-7, atol=1e-7)
    g64 = np.ones(base.shape)
    assert NK.gelu_erf_grad(base, g64) is None
    mixed = A._gelu_grad_kernel(base, y, g64)
    assert mixed.dtype == np.float64
    np.testing.assert_allclose(mixed, _dgelu_math(base), rtol=3e-7, atol=1e-7)
    empty = np.zeros((0, 4), np.float32)
    assert A._gelu_grad_kernel(empty, empty, empty).shape == (0, 4)
    # float16 is upcast to float32 first, then takes the fast path
    h = base.astype(np.float16)
    np.testing.assert_allclose(A._gelu_kernel(h), _gelu_math(h.astype(np.float32)), rtol=1.2e-7, atol=1e-44)


# -- softmax ---------------------------------------------------------------------------------------------
@needs_c
@pytest.mark.parametrize("dtype, rtol", [(np.float32, 4e-6), (np.float64, 1e-13)])
def test_fast_softmax_against_float64_and_the_plain_kernel(dtype, rtol):
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((3, 4, 17, 33)) * 5).astype(dtype)
    x[..., 1:, :][..., np.triu(np.ones((16, 33), bool), 1)] = -np.inf       # an additive causal mask
    fast = NK.softmax_rows(x)
    assert fast is not None and fast.dtype == dtype
    np.testing.assert_allclose(fast, _softmax64(x), rtol=rtol, atol=1e-30)
    np.testing.assert_allclose(fast, A._softmax_numpy(x, -1), rtol=rtol, atol=1e-30)
    np.testing.assert_array_equal(A._softmax_kernel(x, axis=-1), fast)
    np.testing.assert_array_equal(A._softmax_kernel(x, axis=3), fast)


@needs_c
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fast_softmax_special_rows_equal_the_plain_kernel(dtype):
    x = np.array([[0.0, 1.0, 2.0],
                  [-np.inf, -np.inf, -np.inf],         # all masked: 0/0 = NaN, as the plain kernel
                  [np.inf, 1.0, 0.0],                  # an infinite max: shifted by 0, inf/inf = NaN
                  [np.nan, 1.0, 0.0],                  # NaN: the whole row
                  [-np.inf, 5.0, -np.inf],
                  [1e30, 0.0, -1e30]], dtype)
    with np.errstate(invalid="ignore"):
        plain = A._softmax_numpy(x, -1)
    # the same NaNs, infinities and zeros; finite values to rounding (the sums differ in order)
    np.testing.assert_allclose(NK.softmax_rows(x), plain, rtol=4 * np.finfo(dtype).eps, atol=0)


@needs_c
def test_softmax_odd_shapes_and_layouts():
    rng = np.random.default_rng(6)
    x = rng.standard_normal((5, 8)).astype(np.float32)
    np.testing.assert_array_equal(A._softmax_kernel(x[:, :1]), np.ones((5, 1), np.float32))       # rows of one
    assert A._softmax_kernel(np.float32(3.0).reshape(())).shape == ()
    assert A._softmax_kernel(np.zeros((0, 4), np.float32)).shape == (0, 4)
    assert A._softmax_kernel(np.zeros((4, 0), np.float32)).shape == (4, 0)
    for view in (x[:, ::2], np.broadcast_to(x[0], (3, 8)), x.T):
        assert NK.softmax_rows(view) is None
        np.testing.assert_allclose(A._softmax_kernel(view), _softmax64(view), rtol=4e-6)
    np.testing.assert_allclose(A._softmax_kernel(x, axis=0), _softmax64(x, 0), rtol=4e-6)   # another axis: plain


@needs_c
@pytest.mark.parametrize("dtype, atol", [(np.float32, 5e-7), (np.float64, 1e-15)])
def test_fast_softmax_grad_against_float64_and_the_plain_kernel(dtype, atol):
    rng = np.random.default_rng(7)
    y = _softmax64(rng.standard_normal((40, 65)) * 3).astype(dtype)
    g = rng.standard_normal(y.shape).astype(dtype)
    fast = NK.softmax_grad_rows(y, g)
    y64, g64 = y.astype(np.float64), g.astype(np.float64)
    np.testing.assert_allclose(fast, y64 * (g64 - (g64 * y64).sum(-1, keepdims=True)), rtol=0, atol=atol)
    np.testing.assert_allclose(fast, A._softmax_grad_numpy(y, g, -1), rtol=0, atol=2 * atol)
    np.testing.assert_array_equal(A._softmax_grad_kernel(y, g), fast)
    assert NK.softmax_grad_rows(y[:, ::2], g[:, ::2]) is None
    assert NK.softmax_grad_rows(y, g.astype(np.float64 if dtype == np.float32 else np.float32)) is None


@needs_c
def test_softmax_gradient_through_the_op_matches_finite_differences():
    rng = np.random.default_rng(8)
    x = rng.standard_normal((4, 9)) * 2
    w = rng.standard_normal((4, 9))
    got = ms.grad(lambda a: (ops.softmax(a, axis=-1) * ms.Tensor(w)).sum())(ms.Tensor(x)).asnumpy()
    h = 1e-6
    fd = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = h
        fd[i] = ((_softmax64(x + e) * w).sum() - (_softmax64(x - e) * w).sum()) / (2 * h)
    np.testing.assert_allclose(got, fd, rtol=1e-6, atol=1e-9)


# -- LayerNorm -------------------------------------------------------------------------------------------
@needs_c
@pytest.mark.parametrize("dtype, atol", [(np.float32, 4e-6), (np.float64, 1e-13)])
@pytest.mark.parametrize("affine", ["both", "weight", "bias", "none"])
def test_fast_layer_norm_against_float64_and_the_plain_kernel(dtype, atol, affine):
    rng = np.random.default_rng(9)
    x = (rng.standard_normal((7, 3, 4, 5)) * 3 + 2).astype(dtype)
    w = rng.standard_normal((4, 5)).astype(dtype) if affine in ("both", "weight") else None
    b = rng.standard_normal((4, 5)).astype(dtype) if affine in ("both", "bias") else None
    y, mean, rstd = N._layer_norm_kernel(x, w, b, (4, 5), 1e-5)
    y64, mu64, r64 = _layer_norm64(x, w, b, 2, 1e-5)
    assert y.shape == x.shape and mean.shape == rstd.shape == (7, 3, 1, 1)
    np.testing.assert_allclose(y, y64, rtol=0, atol=atol)
    np.testing.assert_allclose(mean, mu64, rtol=0, atol=atol)
    np.testing.assert_allclose(rstd, r64, rtol=4 * np.finfo(dtype).eps)
    py, pm, pr = N._layer_norm_numpy(x, w, b, (4, 5), 1e-5)
    np.testing.assert_allclose(y, py, rtol=0, atol=atol)
    np.testing.assert_allclose(rstd, pr, rtol=4 * np.finfo(dtype).eps)
    assert NK.layer_norm_rows(x.reshape(21, 20), None if w is None else w.reshape(-1),
                              None if b is None else b.reshape(-1), 1e-5) is not None

    dy = rng.standard_normal(x.shape).astype(dtype)
    dx, dw, db = N._layer_norm_grad_kernel(dy, x, w, mean, rstd, normalized_shape=(4, 5), eps=1e-5)
    rows = lambda a: a.reshape(21, 20).astype(np.float64)        # noqa: E731
    rdx, rdw, rdb = N._layer_norm_grad_reference(rows(dy), rows(x), None if w is None else w.reshape(-1), 1e-5)
    np.testing.assert_allclose(dx.reshape(21, 20), rdx, rtol=0, atol=atol)
    np.testing.assert_allclose(dw.reshape(-1), rdw, rtol=0, atol=atol * 10)     # sums of 21 products ~10
    np.testing.assert_allclose(db.reshape(-1), rdb, rtol=0, atol=atol * 10)
    pdx, pdw, pdb = N._layer_norm_grad_numpy(dy, x, w, mean, rstd, normalized_shape=(4, 5), eps=1e-5)
    np.testing.assert_allclose(dx, pdx, rtol=0, atol=atol)
    np.testing.assert_allclose(dw, pdw, rtol=0, atol=atol * 10)


@needs_c
def test_layer_norm_odd_shapes_and_layouts():
    rng = np.random.default_rng(10)
    one = np.array([[3.0]], np.float32)                 # n = 1: variance 0, y = bias
    y, mean, rstd = N._layer_norm_kernel(one, None, np.array([0.25], np.float32), (1,), 1e-5)
    np.testing.assert_allclose(y, [[0.25]])
    np.testing.assert_allclose(rstd, [[1 / math.sqrt(1e-5)]], rtol=1e-6)
    empty = np.zeros((0, 6), np.float32)
    assert [a.shape for a in N._layer_norm_kernel(empty, None, None, (6,), 1e-5)] == [(0, 6), (0, 1), (0, 1)]
    x = rng.standard_normal((6, 8)).astype(np.float32)
    w = rng.standard_normal(8).astype(np.float32)
    for view in (np.asfortranarray(x), np.broadcast_to(x[0], (6, 8))):
        assert NK.layer_norm_rows(view, w, None, 1e-5) is None
        got = N._layer_norm_kernel(view, w, None, (8,), 1e-5)[0]
        np.testing.assert_allclose(got, _layer_norm64(view, w, None, 1, 1e-5)[0], rtol=0, atol=4e-6)
    assert NK.layer_norm_rows(x, w.astype(np.float64), None, 1e-5) is None                  # mixed dtypes
    assert NK.layer_norm_rows(x, w[::-1], None, 1e-5) is None                                # a strided weight
    # the backward without saved statistics (the op table's direct calls) takes the plain path
    dy = rng.standard_normal(x.shape).astype(np.float32)
    _, m, r = N._layer_norm_kernel(x, w, None, (8,), 1e-5)
    with_stats = N._layer_norm_grad_kernel(dy, x, w, m, r, normalized_shape=(8,), eps=1e-5)
    without = N._layer_norm_grad_kernel(dy, x, w, normalized_shape=(8,), eps=1e-5)
    for a, b in zip(with_stats, without):
        np.testing.assert_allclose(a, b, rtol=0, atol=2e-6)


@needs_c
def test_layer_norm_gradient_through_the_op_matches_finite_differences():
    rng = np.random.default_rng(11)
    x, w, b = rng.standard_normal((3, 6)), rng.standard_normal(6), rng.standard_normal(6)
    c = rng.standard_normal((3, 6))
    C = ms.Tensor(c)

    def f(a, wt, bs):
        return (ops.layer_norm(a, (6,), wt, bs, 1e-5) * C).sum()

    got = ms.grad(f, grad_position=(0, 1, 2))(ms.Tensor(x), ms.Tensor(w), ms.Tensor(b))

    def f64(a, wt, bs):
        return (_layer_norm64(a, wt, bs, 1, 1e-5)[0] * c).sum()

    h = 1e-6
    for k, (arg, g) in enumerate(zip((x, w, b), got)):
        fd = np.zeros_like(arg)
        for i in np.ndindex(arg.shape):
            e = np.zeros_like(arg)
            e[i] = h
            args_p = [x, w, b]
            args_m = [x, w, b]
            args_p[k], args_m[k] = arg + e, arg - e
            fd[i] = (f64(*args_p) - f64(*args_m)) / (2 * h)
        np.testing.assert_allclose(g.asnumpy(), fd, rtol=1e-6, atol=1e-8)


# -- RMSNorm ---------------------------------------------------------------------------------------------
def _rms_norm64(x, w, k, eps):
    d = np.asarray(x, np.float64)
    axes = tuple(range(d.ndim - k, d.ndim))
    r = 1.0 / np.sqrt((d * d).mean(axes, keepdims=True) + eps)
    return d * r * w, r


def _rms_norm_grad64(dy, drstd, x, w, k, eps):
    """The chain rule of L = <dy, y> + <drstd, r>, y = x r w, r = (mean(x^2) + eps)^(-1/2), in
    float64: dL/dx = dy w r + (sum(dy x w) + drstd) dr/dx with dr/dx = -r^3 x / n;
    dL/dw = sum over rows of dy x r."""
    d, g = np.asarray(x, np.float64), np.asarray(dy, np.float64)
    axes = tuple(range(d.ndim - k, d.ndim))
    n = int(np.prod(d.shape[d.ndim - k:]))
    _, r = _rms_norm64(d, w, k, eps)
    back = (g * d * w).sum(axes, keepdims=True) + np.asarray(drstd, np.float64)
    dx = g * w * r + back * (-(r ** 3) * d / n)
    dw = (g * d * r).sum(tuple(range(d.ndim - k)))
    return dx, dw


def _plain_rms_norm(monkeypatch, fn, *args, **kw):
    """Run a norm_ops kernel with the C loops off (what MINISPORE_NATIVE_KERNELS=0 does)."""
    with monkeypatch.context() as mp:
        mp.setattr(NK, "rms_norm_rows", lambda *a, **k: None)
        mp.setattr(NK, "rms_norm_grad_rows", lambda *a, **k: None)
        return fn(*args, **kw)


@needs_c
@pytest.mark.parametrize("dtype, atol", [(np.float32, 4e-6), (np.float64, 1e-13)])
def test_fast_rms_norm_against_float64_and_the_plain_kernel(dtype, atol, monkeypatch):
    rng = np.random.default_rng(12)
    x = (rng.standard_normal((7, 3, 4, 5)) * 3 + 1).astype(dtype)
    w = rng.standard_normal((4, 5)).astype(dtype)
    assert NK.rms_norm_rows(x.reshape(21, 20), w.reshape(-1), 1e-6) is not None      # the C loop applies
    y, rstd = N._rms_norm_kernel(x, w, 1e-6)
    y64, r64 = _rms_norm64(x, w, 2, 1e-6)
    assert y.shape == x.shape and rstd.shape == (7, 3, 1, 1)
    np.testing.assert_allclose(y, y64, rtol=0, atol=atol)
    np.testing.assert_allclose(rstd, r64, rtol=4 * np.finfo(dtype).eps)
    py, pr = _plain_rms_norm(monkeypatch, N._rms_norm_kernel, x, w, 1e-6)
    np.testing.assert_allclose(y, py, rtol=0, atol=atol)
    np.testing.assert_allclose(rstd, pr, rtol=4 * np.finfo(dtype).eps)

    dy = rng.standard_normal(x.shape).astype(dtype)
    drstd = rng.standard_normal(rstd.shape).astype(dtype)
    dx, dw = N._rms_norm_grad_kernel(dy, drstd, x, w, 1e-6)
    rdx, rdw = _rms_norm_grad64(dy, drstd, x, w, 2, 1e-6)
    np.testing.assert_allclose(dx, rdx, rtol=0, atol=atol)
    np.testing.assert_allclose(dw, rdw, rtol=0, atol=atol * 10)                  # sums of 21 products
    pdx, pdw = _plain_rms_norm(monkeypatch, N._rms_norm_grad_kernel, dy, drstd, x, w, 1e-6)
    np.testing.assert_allclose(dx, pdx, rtol=0, atol=atol)
    np.testing.assert_allclose(dw, pdw, rtol=0, atol=atol * 10)


def test_rms_norm_odd_shapes_and_layouts():
    """Views, mixed dtypes and half precision take the plain path with the same numbers."""
    rng = np.random.default_rng(13)
    x = rng.standard_normal((6, 16)).astype(np.float32)
    w = rng.standard_normal(8).astype(np.float32)
    view = x[:, ::2]                                            # a strided row view: reshape copies
    np.testing.assert_allclose(N._rms_norm_kernel(view, w, 1e-6)[0], _rms_norm64(view, w, 1, 1e-6)[0],
                               rtol=0, atol=4e-6)
    assert NK.rms_norm_rows(view, w, 1e-6) is None                                   # not contiguous
    assert NK.rms_norm_rows(x[:, :8].copy(), w.astype(np.float64), 1e-6) is None     # mixed dtypes
    assert NK.rms_norm_rows(x[:, :8].copy(), w[::-1], 1e-6) is None                  # a strided weight
    h = x.astype(np.float16)
    y, r = N._rms_norm_kernel(h, np.ones(16, np.float16), 1e-6)                     # float16: computed in float32
    np.testing.assert_allclose(y.astype(np.float64), _rms_norm64(h, 1.0, 1, 1e-6)[0], rtol=2e-3, atol=2e-3)


@needs_c
def test_rms_norm_gradient_through_the_op_matches_finite_differences_and_runs_the_c_backward(monkeypatch):
    rng = np.random.default_rng(14)
    x, w = rng.standard_normal((3, 6)), rng.standard_normal(6)
    c = rng.standard_normal((3, 6))
    C = ms.Tensor(c)
    calls = []
    real = NK.rms_norm_grad_rows
    monkeypatch.setattr(NK, "rms_norm_grad_rows", lambda *a: calls.append(1) or real(*a))

    def f(a, wt):
        y, rstd = ops.rms_norm(a, wt, 1e-6)
        return (y * C).sum() + (rstd * 0.5).sum()

    got = ms.grad(f, grad_position=(0, 1))(ms.Tensor(x), ms.Tensor(w))
    assert calls, "the C backward did not run"

    def f64(a, wt):
        y, r = _rms_norm64(a, wt, 1, 1e-6)
        return (y * c).sum() + (r * 0.5).sum()

    h = 1e-6
    for k, (arg, g) in enumerate(zip((x, w), got)):
        fd = np.zeros_like(arg)
        for i in np.ndindex(arg.shape):
            e = np.zeros_like(arg)
            e[i] = h
            args_p, args_m = [x, w], [x, w]
            args_p[k], args_m[k] = arg + e, arg - e
            fd[i] = (f64(*args_p) - f64(*args_m)) / (2 * h)
        np.testing.assert_allclose(g.asnumpy(), fd, rtol=1e-6, atol=1e-8)


# -- the switch and the fallback -------------------------------------------------------------------------
_TINY = "void ms_tiny_twice(const double *x, double *o, int64_t n) { for (int64_t i = 0; i < n; i++) o[i] = 2 * x[i]; }"


def test_minispore_native_kernels_0_turns_every_hand_written_kernel_off(monkeypatch):
    monkeypatch.setenv("MINISPORE_NATIVE_KERNELS", "0")
    lib = native_build.NativeLibrary("switch test kernels", _TINY,
                                     ["void ms_tiny_twice(const double *, double *, int64_t);"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")                  # switched off on purpose: nothing to warn about
        assert lib.get() is None
    monkeypatch.setattr(NK, "LIBRARY", native_build.NativeLibrary("PyNative kernels", NK.SOURCE, NK._CDEFS))
    x = np.linspace(-3, 3, 11).astype(np.float32)
    assert NK.gelu_erf(x) is None and NK.softmax_rows(x) is None
    assert NK.rms_norm_rows(x.reshape(1, -1), x, 1e-6) is None
    np.testing.assert_allclose(A._gelu_kernel(x), _gelu_math(x), rtol=1.2e-7)        # the plain path
    monkeypatch.setitem(optim_native._state, "tried", False)
    monkeypatch.setitem(optim_native._state, "mod", None)
    assert optim_native.lib() is None                   # the optimizers' C rules obey it too


def test_minispore_native_optim_0_still_turns_the_optimizer_kernels_off(monkeypatch):
    monkeypatch.delenv("MINISPORE_NATIVE_KERNELS", raising=False)
    monkeypatch.setenv("MINISPORE_NATIVE_OPTIM", "0")
    monkeypatch.setitem(optim_native._state, "tried", False)
    monkeypatch.setitem(optim_native._state, "mod", None)
    assert optim_native.lib() is None


def test_without_a_compiler_the_kernels_fall_back_to_numpy_and_say_so_once(monkeypatch, tmp_path):
    monkeypatch.delenv("MINISPORE_NATIVE_KERNELS", raising=False)
    monkeypatch.setenv("CC", str(tmp_path / "no-such-compiler"))
    monkeypatch.setenv("MINISPORE_CACHE_DIR", str(tmp_path / "empty-cache"))
    monkeypatch.setattr(native_build, "_warned", set())
    native_build.clear_memory_cache()
    lib = native_build.NativeLibrary("PyNative kernels", NK.SOURCE, NK._CDEFS)
    monkeypatch.setattr(NK, "LIBRARY", lib)
    x = np.linspace(-3, 3, 11).astype(np.float32)
    with pytest.warns(RuntimeWarning, match="run their NumPy kernels.*no C compiler"):
        assert NK.gelu_erf(x) is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")                  # said once: not again, not for a second library either
        assert NK.gelu_erf_grad(x, x) is None
        assert native_build.NativeLibrary("PyNative kernels", NK.SOURCE, NK._CDEFS).get() is None
        np.testing.assert_allclose(A._gelu_kernel(x), _gelu_math(x), rtol=1.2e-7)
    native_build.clear_memory_cache()
