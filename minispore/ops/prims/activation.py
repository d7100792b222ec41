"""Activation primitives: relu, gelu, silu, sigmoid, tanh, softplus, leaky_relu, elu, hardtanh/relu6,
softmax, log_softmax and clamp/clip.

MindSpore's functional names and argument order (`ops.gelu(input, approximate='none')`,
`ops.softplus(input, beta=1, threshold=20)`, `ops.softmax(input, axis=-1, *, dtype=None)`, ...).

Each is one primitive with its own NumPy kernel, so the forward pass is one vectorized call and
never overflows where the math does not: sigmoid's exp(-x) can only overflow to inf, where
1 / (1 + inf) = 0 is the right limit, softplus never exponentiates a large positive number,
softmax/log_softmax subtract the row maximum first. Each
backward rule is written in minispore ops (usually from the saved output, e.g. sigmoid' = y(1-y)),
so grad-of-grad works. silu, the exact gelu, softmax and log_softmax (on a transformer's hot path) have a
fused backward primitive instead (`silu_grad`, `gelu_grad`, `softmax_grad`, `log_softmax_grad`: one NumPy kernel
rather than 4-7 eager ops), whose own backward rules are written in ops (as norm_ops.py does for
layer_norm_grad).

float16/bfloat16 inputs are computed in float32 and rounded once (NumPy has few half-precision
kernels and ml_dtypes' bfloat16 has fewer); the executor casts the result back to the input dtype.
"""
from __future__ import annotations

import math
import numbers

import numpy as np
import scipy.special

from ...common import dtype as mstype
from ...common.grad_state import wants_grad
from ...common.tensor import Parameter, Tensor
from .. import _check as C
from .. import c_expr
from .. import costs
from .. import sharding_rules as SR
from ..primitive import AbstractTensor, defprim
from . import _native_kernels
from .elementwise import (add, cast, equal, erf, exp, greater, greater_equal, less, less_equal, logical_and,
                          logical_or, minimum, mul, neg, select_kernel, square, sub, sum_to, where, zeros_like)
from .reduction import reduce_sum

_CONCRETE = frozenset((Tensor, Parameter))      # exact types whose `_data` is a real ndarray
_HALF = (np.dtype(np.float16), mstype.bfloat16.np)


def upcast_half(a):
    """float16/bfloat16 arrays as float32 (exact); anything else unchanged."""
    return a.astype(np.float32) if a.dtype in _HALF else a


# ------------------------------------------------------------------------------------------------
# inference
def _float_unary_infer(name):
    """Elementwise on a floating tensor; same shape and dtype."""
    def infer(x, **attrs):
        C.floating(name, "input", x)
        return AbstractTensor(x.shape, x.dtype)
    return infer


def _numeric_unary_infer(name):
    """Elementwise on any non-bool tensor (relu, hardtanh keep integer dtypes)."""
    def infer(x, **attrs):
        C.tensor(name, "input", x)
        if x.dtype is mstype.bool_:
            raise C.OpTypeError(name, "'input' with a numeric dtype", str(x.dtype))
        return AbstractTensor(x.shape, x.dtype)
    return infer


def _real_arg(op, arg, v):
    """A Python real number (not bool) for a scalar attribute."""
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise C.OpTypeError(op, f"'{arg}' to be a float", f"{type(v).__name__} {v!r}")
    return float(v)


# ------------------------------------------------------------------------------------------------
# relu / leaky_relu / elu
def _relu_kernel(a):
    return np.maximum(a, a.dtype.type(0))


def _relu_bprop(inputs, out, dout):
    """dx = dout where x > 0, else 0 (the plain rule: `where(greater(x, 0), dout, zeros_like(dout))`).

    PyNative runs it as one fused primitive (`relu_grad`: one kernel, one dispatch, two fresh
    arrays instead of three ops and five). Under graph capture (jit) the three fusible ops are
    recorded instead, which jit_level O1 fuses into one generated loop."""
    x = inputs[0]
    if type(x) in _CONCRETE and type(dout) in _CONCRETE:
        return (_relu_grad(x, dout),)
    return (where(greater(x, 0), dout, zeros_like(dout)),)


def _relu_grad_infer(x, dout):
    C.tensor("relu_grad", "x", x)
    C.tensor("relu_grad", "dout", dout)
    if tuple(dout.shape) != tuple(x.shape) or dout.dtype is not x.dtype:
        raise C.OpValueError("relu_grad", f"'dout' of x's shape {tuple(x.shape)} and dtype {x.dtype}",
                             f"shape {tuple(dout.shape)} and dtype {dout.dtype}")
    return AbstractTensor(x.shape, x.dtype)


_INT_OF_SIZE = {2: np.int16, 4: np.int32, 8: np.int64}


def _relu_grad_kernel(x, dout):
    """np.where(x > 0, dout, 0), bit-identical, without np.where's data-dependent branch per element
    (a ReLU mask is random: about half the branches mispredict, ~5x the cost of this).

    m = -(x > 0) as an integer of dout's width is all-one bits where x > 0 and zero bits elsewhere,
    so `dout_bits & m` is dout's bits where x > 0 and +0.0 elsewhere (as `select_kernel` does for
    two arrays, with y = 0 the xors drop out)."""
    bits = _INT_OF_SIZE.get(dout.dtype.itemsize) if dout.dtype.kind == "f" else None
    mask = np.greater(x, 0)
    if bits is None or type(dout) is not np.ndarray or type(mask) is not np.ndarray or dout.shape != mask.shape:
        return np.where(mask, dout, dout.dtype.type(0))
    m = mask.view(np.int8).astype(bits)         # 0 / 1
    np.negative(m, out=m)                       # 0 / all ones
    return np.bitwise_and(dout.view(bits), m, out=m).view(dout.dtype)


def _relu_grad_bprop(inputs, out, dout):
    """relu_grad is linear in dout with a mask that is constant almost everywhere in x: d dout =
    relu_grad(x, a), d x = 0."""
    x, _ = inputs
    return None, _relu_grad(x, dout)


_relu_grad = defprim("relu_grad", _relu_grad_infer, _relu_grad_kernel, _relu_grad_bprop,
                     doc="relu's backward: dout where x > 0, else 0", cost=costs.per_output_element(1),
                     sharding=SR.elementwise)


_relu = defprim("relu", _numeric_unary_infer("relu"), _relu_kernel, _relu_bprop, doc="max(x, 0)",
                fusion=c_expr.rule(lambda a, t, at, raw: c_expr.nan_max(a[0], t.lit(0))), cost=costs.ELEMENTWISE, sharding=SR.pointwise)


def relu(input):
    """`ops.relu(input)`: max(input, 0). Gradient 0 at input == 0 (as in MindSpore and PyTorch)."""
    return _relu(input)


def _leaky_relu_kernel(a, alpha=0.2):
    a = upcast_half(a)
    return select_kernel(a > 0, a, a * alpha)      # np.where without the branch per element


def _leaky_relu_bprop(inputs, out, dout, alpha=0.2):
    """1 where x > 0, alpha where x < 0 and (1 + alpha) / 2 at x == 0: MindSpore computes
    leaky_relu as maximum(x, alpha * x), whose gradient splits a tie evenly."""
    x = inputs[0]
    at_kink = where(equal(x, 0), mul(dout, (1.0 + alpha) / 2), mul(dout, alpha))
    return (where(greater(x, 0), dout, at_kink),)


def _leaky_relu_c(a, t, at, raw):
    x = a[0]
    return f"(({x}) > 0 ? ({x}) : ({x} * {t.lit(at.get('alpha', 0.2))}))"


_leaky_relu = defprim("leaky_relu", _float_unary_infer("leaky_relu"), _leaky_relu_kernel, _leaky_relu_bprop,
                      doc="x if x > 0 else alpha * x", fusion=c_expr.rule(_leaky_relu_c),
                      cost=costs.per_output_element(2), sharding=SR.pointwise)


def leaky_relu(input, alpha=0.2):
    """`ops.leaky_relu(input, alpha=0.2)`: input where positive, alpha * input elsewhere."""
    return _leaky_relu(input, alpha=_real_arg("leaky_relu", "alpha", alpha))


def _elu_kernel(a, alpha=1.0):
    a = upcast_half(a)
    # expm1 only of the non-positive part: exp of a large positive x would overflow in the
    # branch the select throws away anyway.
    return select_kernel(a > 0, a, alpha * np.expm1(np.minimum(a, 0)))


def _elu_bprop(inputs, out, dout, alpha=1.0):
    x = inputs[0]
    # d/dx alpha*(e^x - 1) = alpha*e^x; min(x, 0) keeps the unused branch finite (no 0 * inf in
    # second-order gradients).
    neg_branch = mul(dout, mul(exp(minimum(x, 0.0)), alpha))
    return (where(greater(x, 0), dout, neg_branch),)


def _elu_c(a, t, at, raw):
    """x > 0 ? x : alpha * expm1(min(x, 0)), as _elu_kernel."""
    x = a[0]
    return f"(({x}) > 0 ? ({x}) : ({t.lit(at.get('alpha', 1.0))} * {t.fn('expm1')}({c_expr.nan_min(x, t.lit(0))})))"


_elu = defprim("elu", _float_unary_infer("elu"), _elu_kernel, _elu_bprop, doc="x if x > 0 else alpha*(exp(x)-1)",
               fusion=c_expr.rule(_elu_c), cost=costs.per_output_element(3), sharding=SR.pointwise)


def elu(input_x, alpha=1.0):
    """`ops.elu(input_x, alpha=1.0)`: input where positive, alpha * (exp(input) - 1) elsewhere."""
    return _elu(input_x, alpha=_real_arg("elu", "alpha", alpha))


# ------------------------------------------------------------------------------------------------
# hardtanh / relu6
def _hardtanh_infer(x, min_val=-1.0, max_val=1.0):
    _numeric_unary_infer("hardtanh")(x)
    if min_val > max_val:
        raise C.OpValueError("hardtanh", "'min_val' <= 'max_val'", f"min_val={min_val}, max_val={max_val}")
    return AbstractTensor(x.shape, x.dtype)


def _hardtanh_kernel(a, min_val=-1.0, max_val=1.0):
    return np.clip(a, min_val, max_val)


def _hardtanh_bprop(inputs, out, dout, min_val=-1.0, max_val=1.0):
    """1 strictly inside (min_val, max_val), 0 outside, 1/2 on either bound: MindSpore's hardtanh
    is maximum(minimum(x, max_val), min_val), and maximum/minimum split a tie evenly."""
    x = inputs[0]
    inside = logical_and(greater(x, min_val), less(x, max_val))
    on_bound = logical_or(equal(x, min_val), equal(x, max_val))
    zero = zeros_like(dout)
    if min_val == max_val:             # both ties at once: a quarter of the gradient gets through
        return (where(on_bound, mul(dout, 0.25), zero),)
    return (where(inside, dout, where(on_bound, mul(dout, 0.5), zero)),)


def _hardtanh_c(a, t, at, raw):
    """min(max(x, min_val), max_val), NaN-propagating as the kernel's np.clip."""
    lo, hi = t.lit(at.get("min_val", -1.0)), t.lit(at.get("max_val", 1.0))
    return c_expr.nan_min(c_expr.nan_max(a[0], lo), hi)


_hardtanh = defprim("hardtanh", _hardtanh_infer, _hardtanh_kernel, _hardtanh_bprop,
                    doc="clip to [min_val, max_val]", fusion=c_expr.rule(_hardtanh_c), cost=costs.ELEMENTWISE, sharding=SR.pointwise)


def hardtanh(input, min_val=-1.0, max_val=1.0):
    """`ops.hardtanh(input, min_val=-1.0, max_val=1.0)`: input clipped to [min_val, max_val].

    The gradient is 1 strictly inside the interval, 0 outside and 1/2 on the edges (MindSpore)."""
    return _hardtanh(input, min_val=_real_arg("hardtanh", "min_val", min_val),
                     max_val=_real_arg("hardtanh", "max_val", max_val))


def _relu6_kernel(a):
    return np.clip(a, a.dtype.type(0), a.dtype.type(6))


def _relu6_bprop(inputs, out, dout):
    """1 on (0, 6], 0 elsewhere: MindSpore's ReLU6Grad passes the gradient at x == 6 and stops it
    at x == 0 (unlike hardtanh(x, 0, 6), which halves it on both bounds)."""
    x = inputs[0]
    return (where(logical_and(greater(x, 0), less_equal(x, 6)), dout, zeros_like(dout)),)


_relu6 = defprim("relu6", _float_unary_infer("relu6"), _relu6_kernel, _relu6_bprop, doc="min(max(x, 0), 6)", sharding=SR.pointwise)


def relu6(x):
    """`ops.relu6(x)`: min(max(x, 0), 6), for floating inputs (MindSpore rejects integers)."""
    return _relu6(x)


# ------------------------------------------------------------------------------------------------
# sigmoid / tanh / silu / softplus
def _one_plus_exp_neg(x):
    """1 + exp(-x) of a float32/float64 array, as a new array.

    exp(-x) overflows to inf for very negative x (x < -88.7 in float32); 1/inf = 0 and x/inf = -0
    are then the right limits of sigmoid and silu (the true values are below the smallest normal
    float, and `scipy.special.expit` returns 0 there too), so the overflow is expected and silenced.
    """
    with np.errstate(over="ignore"):
        d = np.negative(x)
        np.exp(d, out=d)
    d += 1.0
    return d


# Below this many elements `scipy.special.expit` (one ufunc call) is the faster sigmoid: the
# vectorized passes below win on large arrays but cost a few microseconds of fixed overhead.
_EXPIT_MAX_SIZE = 2048


def _sigmoid_np(x):
    """sigmoid(x) = 1 / (1 + exp(-x)) as a new array, within ~1.5 ulp wherever it is a normal float.

    On large arrays this is four in-place NumPy passes, because `scipy.special.expit` is several
    times slower there (it is not vectorized); small ones (and 0-d) go to expit."""
    if x.size < _EXPIT_MAX_SIZE:
        return scipy.special.expit(x)
    d = _one_plus_exp_neg(x)
    return np.reciprocal(d, out=d)


def _sigmoid_kernel(a):
    return _sigmoid_np(upcast_half(a))


def _sigmoid_bprop(inputs, out, dout):
    return (mul(dout, mul(out, sub(1.0, out))),)


_sigmoid = defprim("sigmoid", _float_unary_infer("sigmoid"), _sigmoid_kernel, _sigmoid_bprop,
                   doc="1 / (1 + exp(-x))", fusion=c_expr.rule(lambda a, t, at, raw: c_expr.sigmoid(t, a[0])),
                   cost=costs.per_output_element(3), sharding=SR.pointwise)


def sigmoid(input):
    """`ops.sigmoid(input)`: 1 / (1 + exp(-input)), stable for large |input|."""
    return _sigmoid(input)


def _tanh_kernel(a):
    return np.tanh(upcast_half(a))


def _tanh_bprop(inputs, out, dout):
    return (mul(dout, sub(1.0, square(out))),)


_tanh = defprim("tanh", _float_unary_infer("tanh"), _tanh_kernel, _tanh_bprop, doc="hyperbolic tangent",
               fusion=c_expr.libm("tanh"), cost=costs.ELEMENTWISE, sharding=SR.pointwise)


def tanh(input):
    """`ops.tanh(input)`."""
    return _tanh(input)


def _silu_kernel(a):
    x = upcast_half(a)
    if x.size < _EXPIT_MAX_SIZE:
        return x * scipy.special.expit(x)
    d = _one_plus_exp_neg(x)
    return np.divide(x, d, out=d)              # x * sigmoid(x) = x / (1 + exp(-x)): one pass fewer


def _silu_bprop(inputs, out, dout):
    # one fused primitive (one sigmoid and a few in-place passes) instead of ~7 eager ops
    return (_silu_grad(inputs[0], dout),)


def _silu_grad_infer(x, dout):
    C.floating("silu_grad", "x", x)
    C.floating("silu_grad", "dout", dout)
    if tuple(dout.shape) != tuple(x.shape):
        raise C.OpValueError("silu_grad", f"'dout' of x's shape {tuple(x.shape)}", f"shape {tuple(dout.shape)}")
    return AbstractTensor(x.shape, mstype.promote(x.dtype, dout.dtype))


def _silu_grad_kernel(x, dout):
    """dout * silu'(x), with silu'(x) = d/dx x*s(x) = s + x*s*(1-s) = s * (1 + x*(1 - s))."""
    x = upcast_half(x)
    s = _sigmoid_np(x)
    d = np.subtract(1.0, s, dtype=s.dtype)
    d *= x
    d += 1.0
    d *= s
    d *= upcast_half(dout)
    return d


def _silu_grad_bprop(inputs, out, dout):
    """Backward of the fused backward (grad-of-grad), in ops. With g = dout * h(x),
    h = s (1 + x (1 - s)):  d dout = a * h(x) = silu_grad(x, a),  and
    d x = a * dout * h'(x),  h'(x) = s (1 - s) (2 + x (1 - 2 s))."""
    x, g = inputs
    a = dout
    gx = gg = None
    if wants_grad(inputs, 0):
        s = sigmoid(x)
        h1 = mul(mul(s, sub(1.0, s)), add(2.0, mul(x, sub(1.0, mul(s, 2.0)))))
        gx = mul(mul(a, g), h1)
    if wants_grad(inputs, 1):
        gg = _silu_grad(x, a)
    return gx, gg


_silu = defprim("silu", _float_unary_infer("silu"), _silu_kernel, _silu_bprop, doc="x * sigmoid(x)",
               fusion=c_expr.rule(lambda a, t, at, raw: f"({c_expr.sigmoid(t, a[0])} * {a[0]})"),
               cost=costs.per_output_element(4), sharding=SR.pointwise)


def _silu_grad_c(a, t, at, raw):
    """dout * silu'(x) = ((((1 - s) * x) + 1) * s) * dout, s = sigmoid(x) (as _silu_grad_kernel)."""
    s, one = c_expr.sigmoid(t, a[0]), t.lit(1.0)
    return f"((((({one} - {s}) * {a[0]}) + {one}) * {s}) * {a[1]})"


_silu_grad = defprim("silu_grad", _silu_grad_infer, _silu_grad_kernel, _silu_grad_bprop,
                     doc="fused backward of silu: dout * silu'(x)", fusion=c_expr.rule(_silu_grad_c),
                     cost=costs.per_output_element(6), sharding=SR.elementwise)


def silu(x):
    """`ops.silu(x)`: x * sigmoid(x) (also called swish)."""
    return _silu(x)


def _softplus_infer(x, beta=1.0, threshold=20.0):
    C.floating("softplus", "input", x)
    if beta == 0:
        raise C.OpValueError("softplus", "a non-zero 'beta'", repr(beta))
    return AbstractTensor(x.shape, x.dtype)


def _softplus_kernel(a, beta=1.0, threshold=20.0):
    x = upcast_half(a)
    bx = x * beta
    # log(1 + e^t) = max(t, 0) + log1p(e^-|t|): the exponent is never positive, so no overflow
    soft = (np.maximum(bx, 0) + np.log1p(np.exp(-np.abs(bx)))) / beta
    return select_kernel(bx > threshold, x, soft)  # linear above the threshold, as MindSpore/PyTorch


def _softplus_bprop(inputs, out, dout, beta=1.0, threshold=20.0):
    x = inputs[0]
    bx = mul(x, beta)
    return (where(greater(bx, threshold), dout, mul(dout, sigmoid(bx))),)


def _softplus_c(a, t, at, raw):
    """As _softplus_kernel: max(bx, 0) + log1p(exp(-|bx|)), over beta; x itself above the threshold."""
    beta, threshold = at.get("beta", 1.0), at.get("threshold", 20.0)
    bx = f"({a[0]} * {t.lit(beta)})"
    soft = f"(({c_expr.nan_max(bx, t.lit(0))} + {t.fn('log1p')}({t.fn('exp')}(-{t.fn('fabs')}({bx})))) / {t.lit(beta)})"
    return f"(({bx} > {t.lit(threshold)}) ? ({a[0]}) : {soft})"


_softplus = defprim("softplus", _softplus_infer, _softplus_kernel, _softplus_bprop,
                    doc="log(1 + exp(beta*x)) / beta, linear above threshold", fusion=c_expr.rule(_softplus_c),
                    cost=costs.per_output_element(3), sharding=SR.pointwise)


def softplus(input, beta=1, threshold=20):
    """`ops.softplus(input, beta=1, threshold=20)`: log(1 + exp(beta*input)) / beta.

    Where beta*input > threshold the result is `input` itself (the curve is linear there to
    float precision). Stable for any input: nothing large is ever exponentiated."""
    return _softplus(input, beta=_real_arg("softplus", "beta", beta),
                     threshold=_real_arg("softplus", "threshold", threshold))


# ------------------------------------------------------------------------------------------------
# gelu
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_LOG_INV_SQRT_2PI = math.log(_INV_SQRT_2PI)
_GELU_CUBIC = 0.044715


def _gelu_infer(x, approximate="none"):
    C.floating("gelu", "input", x)
    C.one_of("gelu", "approximate", approximate, ("none", "tanh"), "'approximate' to be 'none' or 'tanh'")
    return AbstractTensor(x.shape, x.dtype)


# The exact GELU x Phi(x) is written  relu(x) - |x| Phi(-|x|):  for x >= 0 that is x - x (1 - Phi(x)),
# for x < 0 it is x Phi(x), and Phi(-|x|) = 0.5 erfc(|x| / sqrt 2) is never near 1, so neither branch
# cancels (1 + erf(x / sqrt 2) would round to 0 in the far-negative tail). |x| is capped at 40, where
# Phi(-|x|) is 0 in float64: gelu(+inf) = +inf and gelu(-inf) = 0 instead of -inf * 0 = NaN.
_GELU_CAP = 40.0


def _gelu_erf_reference(x):
    """The plain exact GELU: relu(x) - |x| Phi(-|x|) with scipy's erfc, in float64, rounded once to
    x's dtype. The kernel of float64 inputs and of small float32 ones, and the reference the fast
    float32 path is tested against (tests/ops/test_fast_activation.py)."""
    d = x.astype(np.float64, copy=False)
    a = np.minimum(np.abs(d), _GELU_CAP)
    r = np.maximum(d, 0.0) - a * (0.5 * scipy.special.erfc(a * math.sqrt(0.5)))
    return r.astype(x.dtype, copy=False)


# The fast float32 path. scipy's erfc is a scalar (cephes) loop, ~10x slower than NumPy's SIMD
# ufuncs on activation-sized arrays, and NumPy has no erf of its own. So Phi(-a) (a = |x| >= 0) is
#     Phi(-a) = exp(-a^2 / 2) * P(a) / Q(a),   P of degree 4, Q of degree 5 (monic),
# a rational fit of 0.5 erfcx(a / sqrt 2) with relative error <= 5.2e-9 on [0, 13.5] (beyond, the
# result is below float32's smallest normal; P/Q ~ 0.39895 / a there, the true asymptote
# 1 / (a sqrt(2 pi))). All coefficients are positive, so Horner's rule is stable. It is evaluated in
# float64 - a^2 is then exact and exp(-a^2/2) accurate; in float32 the rounding of a^2 alone costs
# ~a^2/2 ulp and Horner's roundings ~4 ulp - and rounded to float32 once: within 1 ulp of the
# float64 reference. The work goes in blocks of _GELU_BLOCK elements through preallocated buffers:
# a block's float64 temporaries stay in the L2 cache, and no pass allocates (fresh megabyte-sized
# temporaries cost more in page faults than the arithmetic).
_GELU_P = (49.411225388039085, 43.10122450499333, 17.950793957758684, 3.962616590024569, 0.39894775240130886)
_GELU_Q = (98.82245027115468, 165.051392683293, 118.18190175712664, 45.97991496474657, 9.933519107557414)
_GELU_BLOCK = 16384
_GELU_FAST_MIN_SIZE = 2048      # below this the reference (one scipy call) is as fast


def _gelu_erf_f32(x):
    """The exact GELU of a float32 array, as _gelu_erf_reference computes it (to 1 ulp), about twice
    as fast (27 NumPy passes over each block; half of them float64 multiplies)."""
    flat = np.ascontiguousarray(x).reshape(-1)
    out = np.empty(flat.shape, np.float32)
    n = min(flat.size, _GELU_BLOCK)
    a_buf, e_buf, p_buf, q_buf = (np.empty(n, np.float64) for _ in range(4))
    r_buf = np.empty(n, np.float32)
    for i in range(0, flat.size, _GELU_BLOCK):
        xs = flat[i:i + _GELU_BLOCK]
        m = xs.size
        a, e, p, q = a_buf[:m], e_buf[:m], p_buf[:m], q_buf[:m]
        np.abs(xs, out=a)
        np.minimum(a, _GELU_CAP, out=a)                 # (NaN stays NaN)
        np.square(a, out=e)
        e *= -0.5
        np.exp(e, out=e)                                # exp(-a^2 / 2)
        np.multiply(a, _GELU_P[4], out=p)               # P(a)
        for c in _GELU_P[3:0:-1]:
            p += c
            p *= a
        p += _GELU_P[0]
        np.add(a, _GELU_Q[4], out=q)                    # Q(a), monic
        for c in _GELU_Q[3::-1]:
            q *= a
            q += c
        p *= e
        p /= q                                          # Phi(-a)
        p *= a                                          # |x| Phi(-|x|) <= relu(x) / 2 where x >= 0, so
        o = out[i:i + m]                                # rounding it to float32 before the subtraction
        np.copyto(r_buf[:m], p, casting="same_kind")    # keeps the result within 1 ulp
        np.maximum(xs, 0.0, out=o)                      # relu(x), in float32
        o -= r_buf[:m]
    return out.reshape(x.shape)


def _gelu_kernel(a, approximate="none"):
    x = upcast_half(a)
    if approximate == "tanh":
        return 0.5 * x * (1.0 + np.tanh(_SQRT_2_OVER_PI * (x + _GELU_CUBIC * x * x * x)))
    # the C loop (_native_kernels.gelu_erf: float32/float64, contiguous): one pass in double instead
    # of _gelu_erf_f32's 27 NumPy passes per block (~5x faster), within 1 ulp of the reference
    fast = _native_kernels.gelu_erf(x)
    if fast is not None:
        return fast
    if x.dtype == np.float32 and x.size >= _GELU_FAST_MIN_SIZE:
        return _gelu_erf_f32(x)
    return _gelu_erf_reference(x)


def _gelu_bprop(inputs, out, dout, approximate="none"):
    x = inputs[0]
    if approximate == "tanh":
        x2 = square(x)
        t = tanh(mul(add(x, mul(mul(x2, x), _GELU_CUBIC)), _SQRT_2_OVER_PI))
        du = mul(add(1.0, mul(x2, 3.0 * _GELU_CUBIC)), _SQRT_2_OVER_PI)
        # d/dx 0.5 x (1 + tanh u) = 0.5 (1 + t) + 0.5 x (1 - t^2) u'
        d = add(mul(add(1.0, t), 0.5), mul(mul(mul(x, sub(1.0, square(t))), du), 0.5))
        return (mul(dout, d),)
    # d/dx x Phi(x) = Phi(x) + x phi(x): one fused primitive instead of ~10 eager ops
    return (_gelu_grad(x, out, dout),)


def _gelu_c(a, t, at, raw):
    """The same formulas as _gelu_kernel: tanh's in the same evaluation order; the exact one as
    _gelu_erf_reference, in the output type with libm's erfc (in float32 that rounds |x| / sqrt 2,
    a few ulp in the negative tail; computing in double would stop the loop vectorizing)."""
    x = a[0]
    if at.get("approximate", "none") == "tanh":
        # 0.5 * x * (1.0 + tanh(sqrt(2/pi) * (x + 0.044715 * x * x * x)))
        inner = f"({t.lit(math.sqrt(2.0 / math.pi))} * ({x} + ((({t.lit(0.044715)} * {x}) * {x}) * {x})))"
        return f"(({t.lit(0.5)} * {x}) * ({t.lit(1.0)} + {t.fn('tanh')}({inner})))"
    # relu(x) - a * (0.5 * erfc(a * sqrt(0.5))),  a = min(|x|, 40)
    ab = c_expr.nan_min(f"{t.fn('fabs')}({x})", t.lit(_GELU_CAP))
    cdf = f"({t.lit(0.5)} * {t.fn('erfc')}({ab} * {t.lit(math.sqrt(0.5))}))"
    return f"({c_expr.nan_max(x, t.lit(0.0))} - ({ab} * {cdf}))"


_gelu = defprim("gelu", _gelu_infer, _gelu_kernel, _gelu_bprop, doc="Gaussian error linear unit",
                fusion=c_expr.rule(_gelu_c), cost=costs.per_output_element(8), sharding=SR.pointwise)


def _gelu_grad_infer(x, y, dout):
    for name, v in (("x", x), ("y", y), ("dout", dout)):
        C.floating("gelu_grad", name, v)
        if tuple(v.shape) != tuple(x.shape):
            raise C.OpValueError("gelu_grad", f"'{name}' of x's shape {tuple(x.shape)}", f"shape {tuple(v.shape)}")
    return AbstractTensor(x.shape, mstype.promote(x.dtype, dout.dtype))


def _gelu_grad_reference(x, dout):
    """The plain backward: dout * (Phi(x) + x phi(x)), Phi through scipy's erfc, in float64."""
    d = x.astype(np.float64)
    pdf = np.exp(-0.5 * d * d) * _INV_SQRT_2PI
    return dout * (0.5 * scipy.special.erfc(-d * math.sqrt(0.5)) + d * pdf)


def _gelu_grad_kernel(x, y, dout):
    """dout * gelu'(x): the C loop where it applies (_native_kernels.gelu_erf_grad: float32/float64,
    one dtype, contiguous; Phi and phi from one exp in double, one pass instead of ~12 NumPy passes
    per block, ~2x faster), else the NumPy kernel below."""
    xs, gs = upcast_half(x), upcast_half(dout)
    fast = _native_kernels.gelu_erf_grad(xs, gs)
    if fast is not None:
        return fast
    return _gelu_grad_numpy(x, y, dout)


def _gelu_grad_numpy(x, y, dout):
    """dout * gelu'(x) = dout * (Phi(x) + x phi(x)), from x and the forward's output y = x Phi(x).

    Phi(x) = y / x is recovered from y instead of computed again (the forward's rational
    approximation would double the work); where |x| <= 1e-15 (float32; 1e-100 float64) Phi(x) is
    0.5 to the dtype's precision. x is clamped to +-40 - Phi and x phi(x) are constant to the last bit
    beyond - so +-inf give the limits 1 and 0 rather than inf/inf and inf * 0. In blocks with
    preallocated buffers, as the forward."""
    x, y, g = upcast_half(x), upcast_half(y), upcast_half(dout)
    wt = np.result_type(x, g)
    tiny = 1e-30 if wt == np.float32 else 1e-200      # (of x^2)
    fx, fy, fg = (np.ascontiguousarray(v).reshape(-1) for v in (x, y, g))
    out = np.empty(fx.shape, wt)
    n = min(fx.size, _GELU_BLOCK)
    xc_buf, s_buf, c_buf = (np.empty(n, wt) for _ in range(3))
    ok_buf = np.empty(n, bool)
    for i in range(0, fx.size, _GELU_BLOCK):
        xs, ys = fx[i:i + _GELU_BLOCK], fy[i:i + _GELU_BLOCK]
        m = xs.size
        xc, s, cdf, ok = xc_buf[:m], s_buf[:m], c_buf[:m], ok_buf[:m]
        np.maximum(xs, -_GELU_CAP, out=xc)              # (np.clip: the same, with Python overhead)
        np.minimum(xc, _GELU_CAP, out=xc)
        np.multiply(xc, xc, out=s)
        np.greater(s, tiny, out=ok)
        s *= -0.5
        s += _LOG_INV_SQRT_2PI
        np.exp(s, out=s)
        s *= xc                                         # x phi(x)
        np.minimum(ys, _GELU_CAP, out=cdf)              # y's value where x is clamped (gelu(x) = x there)
        np.divide(cdf, xc, out=cdf, where=ok)           # Phi(x) = y / x ...
        np.copyto(cdf, 0.5, where=~ok)                  # ... and 0.5 at x ~ 0 (NaN x: 0.5 + NaN)
        cdf += s
        np.multiply(cdf, fg[i:i + m], out=out[i:i + m])
    return out.reshape(x.shape)


def _gelu_grad_bprop(inputs, out, dout):
    """Backward of the fused backward (grad-of-grad), in ops. z = g gelu'(x), gelu''(x) = phi(x) (2 - x^2),
    so for a cotangent a:  d x = a g phi(x) (2 - x^2)  and  d g = a gelu'(x) = gelu_grad(x, y, a).
    y stands for gelu(x) (the kernel reads Phi from it), not an independent input: no gradient."""
    x, y, g = inputs
    a = dout
    gx = gg = None
    if wants_grad(inputs, 0):
        x2 = square(x)
        pdf = mul(exp(mul(x2, -0.5)), _INV_SQRT_2PI)
        gx = mul(mul(a, g), mul(pdf, sub(2.0, x2)))
    if wants_grad(inputs, 2):
        gg = _gelu_grad(x, y, a)
    return gx, None, gg


def _gelu_grad_c(a, t, at, raw):
    """dout * (0.5 erfc(-x / sqrt 2) + xc phi(xc)), xc = x clamped to +-40: Phi from libm's erfc
    rather than from y (the kernel's y / x); the two agree to a few ulp."""
    x, g = a[0], a[2]
    xc = c_expr.nan_max(c_expr.nan_min(x, t.lit(_GELU_CAP)), t.lit(-_GELU_CAP))
    cdf = f"({t.lit(0.5)} * {t.fn('erfc')}((-{x}) * {t.lit(math.sqrt(0.5))}))"
    xpdf = f"({xc} * {t.fn('exp')}(((({xc} * {xc}) * {t.lit(-0.5)}) + {t.lit(_LOG_INV_SQRT_2PI)})))"
    return f"(({cdf} + {xpdf}) * {g})"


_gelu_grad = defprim("gelu_grad", _gelu_grad_infer, _gelu_grad_kernel, _gelu_grad_bprop,
                     doc="fused backward of the exact gelu: dout * (Phi(x) + x phi(x)), from x and y = gelu(x)",
                     fusion=c_expr.rule(_gelu_grad_c, uses=(0, 2)), cost=costs.per_output_element(8),
                     sharding=SR.elementwise)


def gelu(input, approximate="none"):
    """`ops.gelu(input, approximate='none')`.

    'none': x * Phi(x) with Phi the standard normal CDF (to 1 ulp in float32, through a fast
    rational approximation of erfc - one C loop where a compiler exists, else blocked NumPy;
    libm's or scipy's erfc for float64).
    'tanh': 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), the BERT/GPT-2 approximation."""
    return _gelu(input, approximate=approximate)


# ------------------------------------------------------------------------------------------------
# softmax / log_softmax
def _softmax_infer(name):
    def infer(x, axis=-1):
        C.floating(name, "input", x)
        C.axis(name, axis, len(x.shape))
        return AbstractTensor(x.shape, x.dtype)
    return infer


# Row-wise helpers for the softmax family. NumPy reduces along a short contiguous last axis one
# row at a time (a call of its inner loop per row), so on attention-shaped inputs (thousands of
# rows of 64) `np.max(x, -1)` and `np.sum(x, -1)` spend most of their time in per-row overhead.
# `argmax` and `einsum` have tight loops for exactly this case; they give the same values.
_ROW_MAX_FAST = 4096      # up to this row length argmax + gather beats np.max (measured, float32/64)
_ROW_MAX_MIN_SIZE = 4096  # ... on arrays at least this big (take_along_axis has a fixed cost)
_ROW_SUM_FAST = 1024      # einsum sums sequentially: keep rows short enough that it is as accurate


def _last_axis_rows(x, axis, limit):
    """Is `axis` the contiguous last axis of x, with rows no longer than `limit`?"""
    return x.ndim > 0 and axis in (-1, x.ndim - 1) and x.shape[-1] <= limit and x.strides[-1] == x.itemsize


def _row_max(x, axis):
    """max along `axis`, keepdims (NaN if the row has one, like np.max)."""
    if x.size >= _ROW_MAX_MIN_SIZE and _last_axis_rows(x, axis, _ROW_MAX_FAST):
        return np.take_along_axis(x, np.argmax(x, axis=-1, keepdims=True), axis=-1)
    return np.max(x, axis=axis, keepdims=True)


def _row_sum(x, axis):
    """sum along `axis`, keepdims."""
    if _last_axis_rows(x, axis, _ROW_SUM_FAST):
        return np.einsum("...i->...", x)[..., None]
    return np.sum(x, axis=axis, keepdims=True)


def _row_dot(x, y, axis):
    """sum(x * y) along `axis`, keepdims, without materializing x * y where possible."""
    if _last_axis_rows(x, axis, _ROW_SUM_FAST) and _last_axis_rows(y, axis, _ROW_SUM_FAST):
        return np.einsum("...i,...i->...", x, y)[..., None]
    return np.sum(x * y, axis=axis, keepdims=True)


def _shifted(x, axis):
    """x minus its maximum along `axis`, as a new array (a row that is all -inf is left unshifted,
    not NaN'd)."""
    m = _row_max(x, axis)
    if not np.isfinite(m).all():          # rare: fix only then (the common path allocates nothing extra)
        m = np.where(np.isfinite(m), m, 0)
    return np.subtract(x, m)


def _softmax_kernel(a, axis=-1):
    x = upcast_half(a)
    if x.ndim == 0:
        return _softmax_kernel(x.reshape(1)).reshape(())
    if x.size == 0:
        return x.copy()
    if axis in (-1, x.ndim - 1):
        # the C loop (_native_kernels.softmax_rows: float32/float64, contiguous): each row read
        # once for its max, once for exp + sum, once to divide - no per-row NumPy reductions
        fast = _native_kernels.softmax_rows(x)
        if fast is not None:
            return fast
    return _softmax_numpy(x, axis)


def _softmax_numpy(x, axis):
    """The plain softmax of a non-empty array: shift by the row max, exp, divide by the row sum."""
    e = _shifted(x, axis)
    np.exp(e, out=e)                      # every exponent <= 0: no overflow
    e /= _row_sum(e, axis)
    return e


def _softmax_bprop(inputs, out, dout, axis=-1):
    return (_softmax_grad(out, dout, axis=axis),)


def _output_grad_infer(name):
    """Inference of a fused backward that takes (forward output y, its cotangent dout, axis)."""
    def infer(y, dout, axis=-1):
        C.floating(name, "y", y)
        C.floating(name, "dout", dout)
        C.axis(name, axis, len(y.shape))
        if tuple(dout.shape) != tuple(y.shape):
            raise C.OpValueError(name, f"'dout' of y's shape {tuple(y.shape)}", f"shape {tuple(dout.shape)}")
        return AbstractTensor(y.shape, mstype.promote(y.dtype, dout.dtype))
    return infer


_softmax_grad_infer = _output_grad_infer("softmax_grad")


def _softmax_grad_kernel(y, dout, axis=-1):
    """dx = y * (g - sum(g * y)) along `axis`, from the softmax output y and its cotangent g."""
    y, g = upcast_half(y), upcast_half(dout)
    if y.ndim == 0:
        return _softmax_grad_kernel(y.reshape(1), g.reshape(1)).reshape(())
    if axis in (-1, y.ndim - 1):
        # the C loop (_native_kernels.softmax_grad_rows): the row's dot product and the update in
        # one pass each, the dot accumulated in double - no einsum call, no temporary
        fast = _native_kernels.softmax_grad_rows(y, g)
        if fast is not None:
            return fast
    return _softmax_grad_numpy(y, g, axis)


def _softmax_grad_numpy(y, g, axis):
    """The plain backward: y * (g - sum(g * y)) along `axis` (y not 0-d)."""
    dx = np.subtract(g, _row_dot(g, y, axis))
    dx *= y
    return dx


def _softmax_grad_bprop(inputs, out, dout, axis=-1):
    """Backward of the fused backward (grad-of-grad), in ops. z = y * (g - <g, y>), so for a
    cotangent a:  d g = y * (a - <a, y>) = softmax_grad(y, a)  and
    d y = a * (g - <g, y>) - g * <a, y>."""
    y, g = inputs
    a = dout
    gy = gg = None
    if wants_grad(inputs, 0):
        gy = sub(mul(a, sub(g, reduce_sum(mul(g, y), axis, keep_dims=True))),
                 mul(g, reduce_sum(mul(a, y), axis, keep_dims=True)))
    if wants_grad(inputs, 1):
        gg = _softmax_grad(y, a, axis=axis)
    return gy, gg


def _log_softmax_kernel(a, axis=-1):
    x = upcast_half(a)
    if x.ndim == 0:
        return _log_softmax_kernel(x.reshape(1)).reshape(())
    if x.size == 0:
        return x.copy()
    s = _shifted(x, axis)
    lse = _row_sum(np.exp(s), axis)
    np.log(lse, out=lse)
    s -= lse
    return s


def _log_softmax_bprop(inputs, out, dout, axis=-1):
    return (_log_softmax_grad(out, dout, axis=axis),)


_log_softmax_grad_infer = _output_grad_infer("log_softmax_grad")


def _log_softmax_grad_kernel(y, dout, axis=-1):
    """dx = g - exp(y) * sum(g) along `axis`, from the log_softmax output y and its cotangent g."""
    y, g = upcast_half(y), upcast_half(dout)
    if y.ndim == 0:
        return _log_softmax_grad_kernel(y.reshape(1), g.reshape(1)).reshape(())
    p = np.exp(y)                               # softmax, recovered from its log
    p *= _row_sum(g, axis)
    return np.subtract(g, p, out=p)


def _log_softmax_grad_bprop(inputs, out, dout, axis=-1):
    """Backward of the fused backward (grad-of-grad), in ops. z = g - exp(y) * sum(g), so for a
    cotangent a:  d g = a - sum(a * exp(y))  and  d y = -a * exp(y) * sum(g)."""
    y, g = inputs
    a = dout
    ay = mul(a, exp(y))
    gy = neg(mul(ay, reduce_sum(g, axis, keep_dims=True))) if wants_grad(inputs, 0) else None
    gg = sub(a, reduce_sum(ay, axis, keep_dims=True)) if wants_grad(inputs, 1) else None
    return gy, gg


_softmax = defprim("softmax", _softmax_infer("softmax"), _softmax_kernel, _softmax_bprop,
                   doc="exp(x) / sum(exp(x)) along an axis", cost=costs.per_output_element(5), sharding=SR.softmax)
_softmax_grad = defprim("softmax_grad", _softmax_grad_infer, _softmax_grad_kernel, _softmax_grad_bprop,
                        doc="fused backward of softmax: y * (dout - sum(dout * y))", cost=costs.per_output_element(4),
                        sharding=SR.rowwise_pair)
_log_softmax = defprim("log_softmax", _softmax_infer("log_softmax"), _log_softmax_kernel, _log_softmax_bprop,
                       doc="x - logsumexp(x) along an axis", cost=costs.per_output_element(5), sharding=SR.softmax)
_log_softmax_grad = defprim("log_softmax_grad", _log_softmax_grad_infer, _log_softmax_grad_kernel,
                            _log_softmax_grad_bprop, doc="fused backward of log_softmax: dout - exp(y) * sum(dout)",
                            sharding=SR.rowwise_pair)


def _int_axis(op, axis):
    if isinstance(axis, (tuple, list)):
        if len(axis) != 1:
            raise C.OpValueError(op, "one axis", repr(axis))
        axis = axis[0]
    return axis


def softmax(input, axis=-1, *, dtype=None):
    """`ops.softmax(input, axis=-1, *, dtype=None)`; `dtype` casts the input first.

    Stable for any logits (the row maximum is subtracted before exponentiating)."""
    if dtype is not None:
        input = cast(C.tensor("softmax", "input", input), dtype)
    return _softmax(input, axis=_int_axis("softmax", axis))


def log_softmax(logits, axis=-1):
    """`ops.log_softmax(logits, axis=-1)`: logits - logsumexp(logits), computed stably."""
    return _log_softmax(logits, axis=_int_axis("log_softmax", axis))


# ------------------------------------------------------------------------------------------------
# clamp / clip
def _bound_check(arg, v):
    if v is None or C.is_tensor(v):
        return
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise C.OpTypeError("clamp", f"'{arg}' to be a Tensor, a real number or None", type(v).__name__)


def _clamp_infer(x, lo, hi):
    C.tensor("clamp", "input", x)
    if x.dtype is mstype.bool_:
        raise C.OpTypeError("clamp", "'input' with a numeric dtype", str(x.dtype))
    _bound_check("min", lo)
    _bound_check("max", hi)
    if lo is None and hi is None:
        raise C.OpValueError("clamp", "at least one of 'min' and 'max' to be given", "both None")
    shapes = [x.shape] + [b.shape for b in (lo, hi) if C.is_tensor(b)]
    shape = C.broadcast("clamp", *shapes) if len(shapes) > 1 else x.shape
    return AbstractTensor(shape, x.dtype)       # the input's dtype, as MindSpore


def _in_range(x, bound):
    """A Python int bound for an integer input, saturated to its dtype's range (the result is the
    same for any bound beyond the range; NumPy refuses an int it cannot convert)."""
    if type(bound) is int and x.dtype.kind in "iu":
        info = np.iinfo(x.dtype)
        return min(max(bound, int(info.min)), int(info.max))
    return bound


def _clamp_kernel(x, lo, hi):
    out = x
    lo, hi = _in_range(x, lo), _in_range(x, hi)
    if lo is not None:
        out = np.maximum(out, lo)
    if hi is not None:
        out = np.minimum(out, hi)               # min > max gives max, as NumPy and PyTorch
    return out


def _clamp_bprop(inputs, out, dout):
    x, lo, hi = inputs
    zero = zeros_like(dout)
    # out = min(max(x, lo), hi): decide which operand each output element came from
    from_x = greater_equal(x, lo) if lo is not None else None
    if hi is not None:
        candidate = x if lo is None else where(from_x, x, lo)       # max(x, lo), ties to x
        below_hi = less_equal(candidate, hi)
        from_x = below_hi if from_x is None else logical_and(from_x, below_hi)
    gx = sum_to(where(from_x, dout, zero), x.shape)
    glo = ghi = None
    if isinstance(lo, Tensor):
        from_lo = less(x, lo) if hi is None else logical_and(less(x, lo), less_equal(lo, hi))
        glo = sum_to(where(from_lo, dout, zero), lo.shape)
    if isinstance(hi, Tensor):
        above = greater(x, hi) if lo is None else greater(where(greater_equal(x, lo), x, lo), hi)
        ghi = sum_to(where(above, dout, zero), hi.shape)
    return gx, glo, ghi


def _clamp_c(a, t, at, raw):
    """max then min, each NaN-propagating as np.maximum/np.minimum; a None bound is skipped."""
    out = a[0]
    if a[1] is not None:
        out = c_expr.nan_max(out, a[1])
    if a[2] is not None:
        out = c_expr.nan_min(out, a[2])
    return out


_clamp = defprim("clamp", _clamp_infer, _clamp_kernel, _clamp_bprop, doc="min(max(x, min), max)",
                 fusion=c_expr.rule(_clamp_c), cost=costs.ELEMENTWISE, sharding=SR.elementwise)


def clamp(input, min=None, max=None):
    """`ops.clamp(input, min=None, max=None)`: min(max(input, min), max).

    `min`/`max` may be numbers or Tensors that broadcast against `input`; at least one is needed.
    The result keeps `input`'s dtype. Where min > max the result is max. Gradients flow to
    whichever operand the output element came from (ties at the bounds go to `input`)."""
    return _clamp(input, min, max)


clip = clamp


__all__ = ["clamp", "clip", "elu", "gelu", "hardtanh", "leaky_relu", "log_softmax", "relu", "relu6", "sigmoid",
           "silu", "softmax", "softplus", "tanh"]
