"""Op table: activations (relu, gelu, silu, sigmoid, tanh, softplus, leaky_relu, elu, hardtanh, relu6,
softmax, log_softmax, clamp) and the fused backward primitives silu_grad, softmax_grad and
log_softmax_grad (checked against vector-Jacobian products computed independently: complex-step
derivatives, explicit Jacobians).

References are written with NumPy/SciPy float64 independently of the kernels (e.g. gelu through
`scipy.special.ndtr`, softplus through `np.logaddexp`, softmax through `scipy.special.softmax`).
Samples keep random values away from kinks (relu at 0, hardtanh at its bounds), where a finite
difference straddling the kink would not be a derivative, and include extreme values where an
unstable formula would overflow.
"""
import numpy as np
import scipy.special

from ... import ops
from ...common import dtype as mstype
from ...ops.primitive import get_primitive
from ..opinfo import OpInfo, SampleInput, noncontig, rand, register

F16 = (mstype.float16, mstype.bfloat16, mstype.float32, mstype.float64)


def _away_from(arr, points, gap=0.02):
    """Move values within `gap` of any kink point `gap` further away (keeps samples smooth)."""
    arr = arr.copy()
    for p in points:
        near = np.abs(arr.astype(np.float64) - p) < gap
        arr[near] = (arr[near].astype(np.float64) + np.where(arr[near] >= p, gap, -gap)).astype(arr.dtype)
    return arr


def _unary_samples(kinks=(), extremes=None, low=-3.0, high=3.0):
    def samples(rng, dtype):
        def r(shape):
            return _away_from(rand(rng, shape, dtype, low, high), kinks)
        yield SampleInput((r(()),), desc="0-d")
        yield SampleInput((r((5,)),))
        yield SampleInput((r((3, 4)),))
        yield SampleInput((noncontig(r((4, 3))),), desc="non-contiguous")
        yield SampleInput((r((2, 0, 3)),), desc="empty")
        if extremes is not None:
            yield SampleInput((np.array(extremes, dtype=dtype),), desc="extreme values")
    return samples


_EXTREMES = [-50.0, -20.0, -0.75, 0.5, 20.0, 50.0]


def _ref_gelu(x, approximate="none"):
    if approximate == "tanh":
        return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
    return x * scipy.special.ndtr(x)


def _gelu_samples(rng, dtype):
    yield from _unary_samples(extremes=_EXTREMES)(rng, dtype)
    yield SampleInput((rand(rng, (3, 4), dtype, -4, 4),), {"approximate": "tanh"}, desc="tanh")
    yield SampleInput((np.array(_EXTREMES, dtype=dtype),), {"approximate": "tanh"}, desc="tanh extremes")


def _ref_softplus(x, beta=1, threshold=20):
    bx = beta * x
    return np.where(bx > threshold, x, np.logaddexp(0.0, bx) / beta)


def _softplus_samples(rng, dtype):
    # +-50 on both sides of the default threshold (20 itself is a seam: linear above, log1p below)
    yield from _unary_samples(extremes=[-50.0, -25.0, -0.75, 0.5, 25.0, 50.0])(rng, dtype)
    yield SampleInput((rand(rng, (3, 4), dtype, -3, 3),), {"beta": 2, "threshold": 4.0}, desc="beta, threshold")
    # beta*x on both sides of a small threshold (but not on it)
    yield SampleInput((np.array([-2.0, 0.9, 1.1, 3.0], dtype=dtype),), {"beta": 1.0, "threshold": 1.0},
                      desc="across threshold")


def _leaky_samples(rng, dtype):
    yield from _unary_samples(kinks=(0.0,), extremes=_EXTREMES)(rng, dtype)
    yield SampleInput((_away_from(rand(rng, (3, 4), dtype, -3, 3), (0.0,)),), {"alpha": 0.05}, desc="alpha")


def _elu_samples(rng, dtype):
    yield from _unary_samples(kinks=(0.0,), extremes=_EXTREMES)(rng, dtype)
    yield SampleInput((_away_from(rand(rng, (3, 4), dtype, -3, 3), (0.0,)),), {"alpha": 0.5}, desc="alpha")


def _hardtanh_samples(rng, dtype):
    yield from _unary_samples(kinks=(-1.0, 1.0))(rng, dtype)
    yield SampleInput((_away_from(rand(rng, (3, 4), dtype, -3, 3), (-0.5, 2.0)),),
                      {"min_val": -0.5, "max_val": 2.0}, desc="bounds")


def _softmax_samples(rng, dtype):
    yield SampleInput((rand(rng, (3, 4), dtype),))
    yield SampleInput((rand(rng, (5,), dtype),), desc="1-d")
    yield SampleInput((rand(rng, (2, 3, 4), dtype),), {"axis": 1})
    yield SampleInput((rand(rng, (2, 3, 4), dtype),), {"axis": 0})
    yield SampleInput((noncontig(rand(rng, (4, 3), dtype)),), {"axis": 0}, desc="non-contiguous")
    yield SampleInput((rand(rng, (), dtype),), desc="0-d")
    # e^(1e4) overflows every float type; the kernel must subtract the row maximum first
    yield SampleInput((np.array([[1e4, -1e4, 0.0, 9999.0], [-1e4, -9999.0, -1e4, -9998.5]], dtype=dtype),),
                      desc="large logits")
    # an attention-shaped input with a causal -inf mask (the kernels' fast row-wise path), and rows
    # longer than the fast path's limit (the generic reduction)
    causal = np.triu(np.full((5, 5), -np.inf), 1).astype(dtype)
    yield SampleInput((rand(rng, (2, 2, 5, 5), dtype) + causal,), desc="causal -inf mask", grad_args=())
    yield SampleInput((rand(rng, (2, 2, 5, 5), dtype),), desc="4-d, last axis")
    yield SampleInput((rand(rng, (2, 1500), dtype, -8, 8),), desc="long rows", grad_args=())
    yield SampleInput((rand(rng, (3, 4), dtype)[:, ::2],), desc="strided last axis")


def _silu_grad_op(x, dout):
    return get_primitive("silu_grad")(x, dout)


def _silu_grad_ref(x, dout):
    # silu'(x) by complex-step differentiation of x * sigmoid(x) (exact to rounding), independent
    # of the kernel's closed form
    h = 1e-20
    z = x + 1j * h
    return dout * np.imag(z / (1 + np.exp(-z))) / h


def _silu_grad_samples(rng, dtype):
    yield SampleInput((rand(rng, (3, 4), dtype, -4, 4), rand(rng, (3, 4), dtype)))
    yield SampleInput((rand(rng, (), dtype), rand(rng, (), dtype)), desc="0-d")
    yield SampleInput((noncontig(rand(rng, (4, 3), dtype, -4, 4)), rand(rng, (4, 3), dtype)), desc="non-contiguous")
    yield SampleInput((np.array(_EXTREMES, dtype=dtype), rand(rng, (len(_EXTREMES),), dtype)), desc="extreme values")


def _softmax_grad_op(y, dout, axis=-1):
    return get_primitive("softmax_grad")(y, dout, axis=axis)


def _softmax_grad_ref(y, dout, axis=-1):
    # the vector-Jacobian product row by row through the explicit Jacobian diag(y) - y y^T
    if y.ndim == 0:
        return _softmax_grad_ref(y.reshape(1), dout.reshape(1)).reshape(())
    yr, gr = np.moveaxis(y, axis, -1), np.moveaxis(dout, axis, -1)
    out = np.empty_like(yr)
    for idx in np.ndindex(*yr.shape[:-1]):
        v = yr[idx]
        out[idx] = (np.diag(v) - np.outer(v, v)).T @ gr[idx]
    return np.moveaxis(out, -1, axis)


def _softmax_grad_samples(rng, dtype):
    def probs(shape, axis=-1):
        return scipy.special.softmax(rand(rng, shape, np.float64), axis=axis).astype(dtype)
    yield SampleInput((probs((3, 4)), rand(rng, (3, 4), dtype)))
    yield SampleInput((probs((2, 3, 4), 1), rand(rng, (2, 3, 4), dtype)), {"axis": 1}, desc="axis 1")
    yield SampleInput((noncontig(probs((4, 3), 0)), rand(rng, (4, 3), dtype)), {"axis": 0}, desc="non-contiguous")
    yield SampleInput((np.ones((), dtype), rand(rng, (), dtype)), desc="0-d")
    yield SampleInput((rand(rng, (2, 5), dtype, 0, 1), rand(rng, (2, 5), dtype)), desc="any y (not normalized)")


def _log_softmax_grad_op(y, dout, axis=-1):
    return get_primitive("log_softmax_grad")(y, dout, axis=axis)


def _log_softmax_grad_ref(y, dout, axis=-1):
    # the vector-Jacobian product through the explicit Jacobian of log_softmax, I - 1 p^T (p = e^y)
    if y.ndim == 0:
        return _log_softmax_grad_ref(y.reshape(1), dout.reshape(1)).reshape(())
    yr, gr = np.moveaxis(y, axis, -1), np.moveaxis(dout, axis, -1)
    out = np.empty_like(yr)
    for idx in np.ndindex(*yr.shape[:-1]):
        p = np.exp(yr[idx])
        out[idx] = (np.eye(p.size) - np.outer(np.ones(p.size), p)).T @ gr[idx]
    return np.moveaxis(out, -1, axis)


def _log_softmax_grad_samples(rng, dtype):
    def logp(shape, axis=-1):
        return scipy.special.log_softmax(rand(rng, shape, np.float64), axis=axis).astype(dtype)
    yield SampleInput((logp((3, 4)), rand(rng, (3, 4), dtype)))
    yield SampleInput((logp((2, 3, 4), 1), rand(rng, (2, 3, 4), dtype)), {"axis": 1}, desc="axis 1")
    yield SampleInput((noncontig(logp((4, 3), 0)), rand(rng, (4, 3), dtype)), {"axis": 0}, desc="non-contiguous")
    yield SampleInput((np.zeros((), dtype), rand(rng, (), dtype)), desc="0-d")


def _clamp_samples(rng, dtype):
    x = _away_from(rand(rng, (3, 4), dtype), (-0.5, 0.7))
    yield SampleInput((x, -0.5, 0.7), desc="scalar bounds")
    yield SampleInput((x, -0.5, None), desc="min only")
    yield SampleInput((x, None, 0.7), desc="max only")
    yield SampleInput((_away_from(rand(rng, (), dtype), (0.0, 1.0)), 0.0, 1.0), desc="0-d")
    yield SampleInput((noncontig(_away_from(rand(rng, (4, 3), dtype), (0.0, 1.0))), 0.0, 1.0),
                      desc="non-contiguous")
    # tensor bounds that broadcast against the input (and the output grows to the broadcast shape)
    lo = rand(rng, (4,), dtype, -1.5, -0.2)
    hi = rand(rng, (3, 1), dtype, 0.2, 1.5)
    xb = rand(rng, (3, 4), dtype, -2, 2)
    for b in np.concatenate([lo, hi.ravel()]):
        xb = _away_from(xb, (float(b),))
    yield SampleInput((xb, lo, hi), desc="tensor bounds, broadcast")
    yield SampleInput((rand(rng, (4,), dtype, -2, 2), None, rand(rng, (3, 1), dtype, -0.5, 0.5)),
                      desc="broadcast grows the output", grad_args=())
    yield SampleInput((x, 1.0, -1.0), desc="min > max gives max", grad_args=())


def _clamp_int_samples(rng, dtype):
    yield SampleInput((np.arange(-5, 7, dtype=dtype).reshape(3, 4), -2, 3))


def _ref_clamp(x, lo, hi):
    out = x if lo is None else np.maximum(x, lo)
    return out if hi is None else np.minimum(out, hi)


def _relu_int_samples(rng, dtype):
    yield SampleInput((np.arange(-6, 6, dtype=dtype).reshape(3, 4),))


register(
    OpInfo("relu", ops.relu, lambda x: np.maximum(x, 0), _unary_samples(kinks=(0.0,), extremes=_EXTREMES),
           dtypes=F16),
    OpInfo("relu_int", ops.relu, lambda x: np.maximum(x, 0), _relu_int_samples, dtypes=(mstype.int32, mstype.int64),
           differentiable=False, primitive="relu"),
    OpInfo("gelu", ops.gelu, _ref_gelu, _gelu_samples, dtypes=F16),
    OpInfo("silu", ops.silu, lambda x: x / (1 + np.exp(-x)), _unary_samples(extremes=_EXTREMES), dtypes=F16),
    OpInfo("sigmoid", ops.sigmoid, lambda x: 1 / (1 + np.exp(-x)),
           _unary_samples(extremes=_EXTREMES + [-700.0, 700.0]), dtypes=F16),
    OpInfo("tanh", ops.tanh, np.tanh, _unary_samples(extremes=_EXTREMES), dtypes=F16),
    OpInfo("softplus", ops.softplus, _ref_softplus, _softplus_samples, dtypes=F16),
    OpInfo("leaky_relu", ops.leaky_relu, lambda x, alpha=0.2: np.where(x > 0, x, alpha * x), _leaky_samples,
           dtypes=F16),
    OpInfo("elu", ops.elu, lambda x, alpha=1.0: np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0))),
           _elu_samples, dtypes=F16),
    OpInfo("hardtanh", ops.hardtanh, lambda x, min_val=-1.0, max_val=1.0: np.clip(x, min_val, max_val),
           _hardtanh_samples, dtypes=F16),
    OpInfo("relu6", ops.relu6, lambda x: np.clip(x, 0, 6), _unary_samples(kinks=(0.0, 6.0), low=-3, high=9),
           dtypes=F16),
    OpInfo("softmax", ops.softmax, lambda x, axis=-1: scipy.special.softmax(x, axis=axis), _softmax_samples,
           dtypes=F16),
    # log-probabilities of 1e4-sized logits are ~-2e4, so finite differences lose ~1e-6 absolute
    OpInfo("log_softmax", ops.log_softmax, lambda x, axis=-1: scipy.special.log_softmax(x, axis=axis),
           _softmax_samples, dtypes=F16, grad_tol=(1e-5, 1e-5)),
    # the fused backward primitives of silu, softmax and log_softmax: forward against the vector-Jacobian
    # product, and a finite-difference check of their hand-written grad-of-grad rules
    OpInfo("silu_grad", _silu_grad_op, _silu_grad_ref, _silu_grad_samples, dtypes=F16,
           tols={mstype.float32: (1e-5, 1e-6), mstype.float64: (1e-7, 1e-9)}, primitive="silu_grad"),
    OpInfo("softmax_grad", _softmax_grad_op, _softmax_grad_ref, _softmax_grad_samples, dtypes=F16,
           primitive="softmax_grad"),
    OpInfo("log_softmax_grad", _log_softmax_grad_op, _log_softmax_grad_ref, _log_softmax_grad_samples, dtypes=F16,
           primitive="log_softmax_grad"),
    OpInfo("clamp", ops.clamp, _ref_clamp, _clamp_samples, dtypes=F16),
    OpInfo("clamp_int", ops.clamp, _ref_clamp, _clamp_int_samples, dtypes=(mstype.int32,), differentiable=False,
           primitive="clamp"),
)
