"""The fast paths of the transformer activations (minispore/ops/prims/activation.py) against their
plain versions and independent float64 oracles.

* exact GELU forward: the float32 fast path (a rational approximation in float64 blocks) within
  1 ulp of x Phi(x) computed in float64 with scipy's erfc, on a dense grid through both tails,
  the special values, non-contiguous and multi-block inputs; equal to the plain reference function
  the kernel keeps (`_gelu_erf_reference`);
* its fused backward `gelu_grad` (Phi recovered from the forward's output): against the float64
  derivative Phi(x) + x phi(x), finite differences of ops.gelu, and second order (grad of grad);
* softmax / softmax_grad on attention-shaped inputs with an additive causal (-inf) mask: against
  the plain two-line NumPy formulas, and finite differences.
"""
import math

import numpy as np
import pytest
import scipy.special

import minispore as ms
from minispore import ops
from minispore.common.errors import OpValueError
from minispore.ops.prims import activation as A

_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def _gelu64(x):
    """x Phi(x) in float64: the textbook formula (erfc keeps the negative tail's relative accuracy)."""
    d = np.asarray(x, np.float64)
    return 0.5 * d * scipy.special.erfc(-d / math.sqrt(2.0))


def _dgelu64(x):
    d = np.asarray(x, np.float64)
    return 0.5 * scipy.special.erfc(-d / math.sqrt(2.0)) + d * np.exp(-0.5 * d * d) * _INV_SQRT_2PI


def _ulps(got, want):
    """|got - want| in units of the float32 spacing at want (normal results only)."""
    w32 = want.astype(np.float32)
    return np.abs(got.astype(np.float64) - want) / np.spacing(np.abs(w32)).astype(np.float64)


# -- GELU forward ----------------------------------------------------------------------------------
def test_fast_gelu_is_within_one_ulp_on_a_dense_grid_through_both_tails():
    x = np.concatenate([np.linspace(-14.0, 7.0, 1_000_001, dtype=np.float32),
                        -np.logspace(-38, 1.15, 20_000, dtype=np.float32),     # tiny to -14
                        np.logspace(-38, 1.0, 20_000, dtype=np.float32)])
    got = A._gelu_erf_f32(x)
    want = _gelu64(x)
    assert got.dtype == np.float32
    normal = np.abs(want) >= np.finfo(np.float32).tiny
    assert normal.sum() > 900_000
    assert _ulps(got[normal], want[normal]).max() <= 1.0
    # results below float32's smallest normal (x < -13.2): correct to the denormal spacing
    assert np.abs(got[~normal] - want[~normal]).max() <= 1.5 * 2.0 ** -149


def test_fast_gelu_special_values():
    x = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 1e-45, -1e-45, 30.0, -30.0, 3e38, -3e38], np.float32)
    got = A._gelu_erf_f32(np.tile(x, 400))[:x.size]               # (large enough for the fast path)
    want = np.array([np.inf, 0.0, np.nan, 0.0, 0.0, 0.0, -1e-45, 30.0, 0.0, 3e38, 0.0], np.float32)
    # (at x = -1e-45 the exact result is just under half the smallest denormal: 0 or -1e-45)
    np.testing.assert_allclose(got, want, rtol=0, atol=2.0 ** -149)
    np.testing.assert_allclose(A._gelu_erf_reference(x), want, rtol=0, atol=2.0 ** -149)


@pytest.mark.parametrize("shape", [(3, 16384 * 2 + 5), (7, 300), (A._GELU_BLOCK,)])
def test_fast_gelu_equals_its_plain_reference(shape):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(shape) * 3).astype(np.float32)
    np.testing.assert_allclose(A._gelu_erf_f32(x), A._gelu_erf_reference(x), rtol=1.2e-7, atol=1e-44)
    nc = x[:, ::2] if x.ndim == 2 else x[::3]                     # non-contiguous
    np.testing.assert_allclose(A._gelu_erf_f32(nc), A._gelu_erf_reference(nc), rtol=1.2e-7, atol=1e-44)
    assert A._gelu_erf_f32(nc).shape == nc.shape


@pytest.mark.parametrize("dtype, rtol", [(np.float32, 1.2e-7), (np.float64, 1e-13)])   # (erfc of a rounded x / sqrt 2)
@pytest.mark.parametrize("size", [50, 10_000])
def test_gelu_op_matches_float64_oracle(dtype, rtol, size):
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((2, size)) * 2.5).astype(dtype)
    for arr in (x, x[:, ::2], x.T):
        got = ops.gelu(ms.Tensor(arr), approximate="none").asnumpy()
        assert got.dtype == dtype
        np.testing.assert_allclose(got, _gelu64(arr), rtol=rtol, atol=1e-37)


# -- GELU backward ---------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype, rtol, atol", [(np.float32, 2e-6, 2e-7), (np.float64, 1e-12, 1e-15)])
def test_gelu_grad_kernel_matches_the_float64_derivative(dtype, rtol, atol):
    rng = np.random.default_rng(2)
    x = np.concatenate([np.linspace(-14, 8, 40_001), rng.standard_normal(9_999) * 3]).astype(dtype)
    g = rng.standard_normal(x.size).astype(dtype)
    for xs, gs in ((x, g), (x[::2], g[1::2])):                      # contiguous and strided
        got = A._gelu_grad_kernel(xs, A._gelu_kernel(xs), gs)
        assert got.dtype == dtype
        np.testing.assert_allclose(got, gs * _dgelu64(xs), rtol=rtol, atol=atol)
    # and the plain reference backward agrees with the oracle too
    np.testing.assert_allclose(A._gelu_grad_reference(x, g), g * _dgelu64(x), rtol=1e-12, atol=1e-15)


def test_gelu_grad_special_values():
    x = np.array([0.0, -0.0, 1e-30, -1e-30, np.inf, -np.inf, np.nan, 50.0, -50.0], np.float32)
    got = A._gelu_grad_kernel(x, A._gelu_kernel(x), np.ones_like(x))
    np.testing.assert_array_equal(got, np.array([0.5, 0.5, 0.5, 0.5, 1.0, 0.0, np.nan, 1.0, 0.0], np.float32))


def test_gelu_gradient_matches_finite_differences_and_uses_the_fused_backward():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 5)) * 2.5
    g = rng.standard_normal((4, 5))
    G = ms.Tensor(g)

    def f(a):
        return (ops.gelu(a) * G).sum()

    got = ms.grad(f)(ms.Tensor(x)).asnumpy()
    h = 1e-6
    fd = (_gelu64(x + h) - _gelu64(x - h)) / (2 * h) * g
    np.testing.assert_allclose(got, fd, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(got, g * _dgelu64(x), rtol=1e-13, atol=1e-15)
    # float32 through the fast path (large input)
    x32 = (rng.standard_normal((8, 1024)) * 2).astype(np.float32)
    got32 = ms.grad(lambda a: ops.gelu(a).sum())(ms.Tensor(x32)).asnumpy()
    np.testing.assert_allclose(got32, _dgelu64(x32), rtol=2e-6, atol=2e-7)


def test_gelu_second_derivative():
    """grad of grad: gelu''(x) = phi(x) (2 - x^2), through gelu_grad's own backward."""
    x = np.linspace(-4.0, 4.0, 17)

    def d1(a):
        return ms.grad(lambda b: ops.gelu(b).sum())(a).sum()

    got = ms.grad(d1)(ms.Tensor(x)).asnumpy()
    want = np.exp(-0.5 * x * x) * _INV_SQRT_2PI * (2 - x * x)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
    h = 1e-5
    fd = (_dgelu64(x + h) - _dgelu64(x - h)) / (2 * h)
    np.testing.assert_allclose(got, fd, rtol=1e-6, atol=1e-9)


def test_gelu_grad_rejects_bad_input():
    x = ms.Tensor(np.zeros((2, 3), np.float32))
    with pytest.raises(OpValueError, match="gelu_grad"):
        A._gelu_grad(x, x, ms.Tensor(np.zeros((3, 2), np.float32)))
    with pytest.raises(OpValueError, match="gelu_grad"):
        A._gelu_grad(x, ms.Tensor(np.zeros((2,), np.float32)), x)
    with pytest.raises(Exception, match="gelu"):
        ops.gelu(x, approximate="erf")


# -- masked softmax ----------------------------------------------------------------------------------
def _causal_logits(dtype, b=3, h=2, t=16, seed=4):
    rng = np.random.default_rng(seed)
    att = rng.standard_normal((b, h, t, t)) * 3
    att = att + np.triu(np.full((t, t), -np.inf), 1)
    return att.astype(dtype)


def _softmax_plain(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


@pytest.mark.parametrize("dtype, rtol", [(np.float32, 2e-6), (np.float64, 1e-14)])
def test_masked_softmax_forward_and_backward_equal_the_plain_formulas(dtype, rtol):
    att = _causal_logits(dtype, t=64)
    want = _softmax_plain(att.astype(np.float64))
    for a in (att, att.transpose(0, 1, 3, 2).copy().transpose(0, 1, 3, 2)):   # and a non-contiguous view
        y = A._softmax_kernel(a)
        np.testing.assert_allclose(y, want, rtol=rtol, atol=1e-30)
        assert (y[..., np.triu_indices(64, 1)[0], np.triu_indices(64, 1)[1]] == 0).all()
    y = A._softmax_kernel(att)
    g = np.random.default_rng(5).standard_normal(att.shape).astype(dtype)
    plain = y * (g - (g * y).sum(-1, keepdims=True))
    np.testing.assert_allclose(A._softmax_grad_kernel(y, g), plain, rtol=rtol * 10, atol=rtol * 1e-2)
    np.testing.assert_allclose(A._softmax_grad_kernel(y[:, :, ::2], g[:, :, ::2]), plain[:, :, ::2],
                               rtol=rtol * 10, atol=rtol * 1e-2)


def test_masked_softmax_gradient_matches_finite_differences():
    att = _causal_logits(np.float64, b=1, h=1, t=5)
    mask = ms.Tensor(np.triu(np.full((5, 5), -np.inf), 1))
    w = np.random.default_rng(6).standard_normal(att.shape)
    raw = np.where(np.isfinite(att), att, 0.0)

    def f(a):
        return (ops.softmax(a + mask, axis=-1) * ms.Tensor(w)).sum()

    got = ms.grad(f)(ms.Tensor(raw)).asnumpy()
    m = np.triu(np.full((5, 5), -np.inf), 1)
    fd = np.zeros_like(raw)
    h = 1e-6
    for idx in np.ndindex(raw.shape):
        up, dn = raw.copy(), raw.copy()
        up[idx] += h
        dn[idx] -= h
        fd[idx] = ((_softmax_plain(up + m) * w).sum() - (_softmax_plain(dn + m) * w).sum()) / (2 * h)
    np.testing.assert_allclose(got, fd, rtol=1e-6, atol=1e-9)
    assert (got[..., np.triu_indices(5, 1)[0], np.triu_indices(5, 1)[1]] == 0).all()
