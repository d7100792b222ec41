"""More elementwise math, in MindSpore 2.x's names: log1p/expm1, the trigonometric and hyperbolic
functions and their inverses, log2/log10/exp2, trunc/frac, sinc, and the binary atan2, logaddexp,
xlogy, hypot, fmod, copysign, heaviside, xdivy, lerp, isclose.

Dtype rules are MindSpore's (checked against the 2.10 CPU wheel): the transcendental functions
accept floating inputs only (MindSpore rejects Int32/Int64/Bool there; minispore raises a clear
OpTypeError instead of a kernel-selection failure), except `exp2`, which turns integers and bools
into Float32. `trunc` and `fmod` keep integer dtypes; `copysign` of integers is Float32.

Kernels compute float16/bfloat16 in float32 and round once (see activation.upcast_half). Backward
rules are written with minispore ops, so gradients of gradients work.
"""
from __future__ import annotations

import math

import numpy as np
import scipy.special

from ...common import dtype as mstype
from ...common.tensor import Tensor
from .. import _check as C
from .. import sharding_rules as SR
from ..primitive import AbstractTensor, defprim
from .activation import upcast_half
from .elementwise import floor_divide as _floor_divide, remainder as _remainder
from .elementwise import (_binary_infer, _grad_for, _unary_infer, _wanted, add, cos, div, equal, exp, log,
                          logical_not, mul, neg, rsqrt, sign, square, sub, where, zeros_like)

_LN2 = math.log(2.0)
_LN10 = math.log(10.0)


def _half_safe(fn):
    """The NumPy function on float32 copies of half-precision arrays, with FP warnings silenced
    (log of 0, acosh below 1 and friends give inf/nan by design, as in MindSpore)."""
    def kernel(*arrays):
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return fn(*[upcast_half(a) if isinstance(a, np.ndarray) else _as_number(a) for a in arrays])
    return kernel


def _as_number(v):
    """A Python int beyond Int64 as the float it stands for (a float-valued op's weak scalar; NumPy
    would make it an object array, which its math functions refuse)."""
    return float(v) if type(v) is int and not -2**63 <= v < 2**63 else v


def _float_unary(name, fn, bprop, doc):
    """A unary op on floating tensors only (integer/bool inputs raise, as in MindSpore on CPU)."""
    return defprim(name, _unary_infer(name, float_only=True), _half_safe(fn), bprop, doc=doc, sharding=SR.pointwise)


# ------------------------------------------------------------------------------------------------
# unary: logs and exponentials
_log1p = _float_unary("log1p", np.log1p, lambda i, o, d: (div(d, add(i[0], 1.0)),), "log(1 + x), exact near 0")
_expm1 = _float_unary("expm1", np.expm1, lambda i, o, d: (mul(d, add(o, 1.0)),), "exp(x) - 1, exact near 0")
_log2 = _float_unary("log2", np.log2, lambda i, o, d: (div(d, mul(i[0], _LN2)),), "base-2 logarithm")
_log10 = _float_unary("log10", np.log10, lambda i, o, d: (div(d, mul(i[0], _LN10)),), "base-10 logarithm")
_exp2 = defprim("exp2", _unary_infer("exp2", float_only=True, int_to_float=True), _half_safe(np.exp2),
                lambda i, o, d: (mul(d, mul(o, _LN2)),), doc="2 ** x (integers and bools give Float32)",
                sharding=SR.pointwise)


def log1p(input):
    """`ops.log1p(input)`: log(1 + input), accurate for tiny inputs (floating inputs only)."""
    return _log1p(input)


def expm1(input):
    """`ops.expm1(input)`: exp(input) - 1, accurate for tiny inputs (floating inputs only)."""
    return _expm1(input)


def log2(input):
    return _log2(input)


def log10(input):
    return _log10(input)


def exp2(input):
    """`ops.exp2(input)`: 2 ** input; integer and bool inputs give Float32, as in MindSpore."""
    return _exp2(input)


# ------------------------------------------------------------------------------------------------
# unary: trigonometric and hyperbolic
def _one_minus_sq(x):
    return sub(1.0, square(x))


_tan = _float_unary("tan", np.tan, lambda i, o, d: (mul(d, add(square(o), 1.0)),), "tangent")
_asin = _float_unary("asin", np.arcsin, lambda i, o, d: (mul(d, rsqrt(_one_minus_sq(i[0]))),), "inverse sine")
_acos = _float_unary("acos", np.arccos, lambda i, o, d: (neg(mul(d, rsqrt(_one_minus_sq(i[0])))),), "inverse cosine")
_atan = _float_unary("atan", np.arctan, lambda i, o, d: (div(d, add(square(i[0]), 1.0)),), "inverse tangent")
_sinh = _float_unary("sinh", np.sinh, lambda i, o, d: (mul(d, cosh(i[0])),), "hyperbolic sine")
_cosh = _float_unary("cosh", np.cosh, lambda i, o, d: (mul(d, sinh(i[0])),), "hyperbolic cosine")
_asinh = _float_unary("asinh", np.arcsinh, lambda i, o, d: (mul(d, rsqrt(add(square(i[0]), 1.0))),),
                      "inverse hyperbolic sine")
_acosh = _float_unary("acosh", np.arccosh, lambda i, o, d: (mul(d, rsqrt(sub(square(i[0]), 1.0))),),
                      "inverse hyperbolic cosine")
_atanh = _float_unary("atanh", np.arctanh, lambda i, o, d: (div(d, _one_minus_sq(i[0])),),
                      "inverse hyperbolic tangent")


def _sinc_np(a):
    return np.sinc(a)                     # NumPy's sinc is the normalized one: sin(pi x) / (pi x)


def _sinc_bprop(inputs, out, dout):
    # d/dx sin(pi x)/(pi x) = (cos(pi x) - sinc(x)) / x, which tends to 0 at x = 0
    x = inputs[0]
    nonzero = logical_not(equal(x, 0))
    safe_x = where(nonzero, x, 1.0)
    slope = div(sub(cos(mul(x, math.pi)), out), safe_x)
    return (where(nonzero, mul(dout, slope), zeros_like(dout)),)


_sinc = _float_unary("sinc", _sinc_np, _sinc_bprop, "sin(pi x) / (pi x), 1 at 0")


_erfc = _float_unary("erfc", scipy.special.erfc,
                     lambda i, o, d: (mul(d, mul(exp(neg(square(i[0]))), -2.0 / math.sqrt(math.pi))),),
                     "1 - erf(x), accurate in the far tail")


def erfc(input):
    """`ops.erfc(input)`: the complementary error function 1 - erf(input)."""
    return _erfc(input)


def tan(input):
    return _tan(input)


def asin(input):
    return _asin(input)


def acos(input):
    return _acos(input)


def atan(input):
    return _atan(input)


def sinh(input):
    return _sinh(input)


def cosh(input):
    return _cosh(input)


def asinh(input):
    return _asinh(input)


def acosh(input):
    return _acosh(input)


def atanh(input):
    return _atanh(input)


def sinc(input):
    """`ops.sinc(input)`: the normalized sinc, sin(pi x) / (pi x), with sinc(0) = 1."""
    return _sinc(input)


def deg2rad(x):
    """`ops.deg2rad(x)`: degrees to radians (floating inputs)."""
    C.floating("deg2rad", "x", x)
    return mul(x, math.pi / 180.0)


def rad2deg(x):
    """`ops.rad2deg(x)`: radians to degrees (floating inputs)."""
    C.floating("rad2deg", "x", x)
    return mul(x, 180.0 / math.pi)


# ------------------------------------------------------------------------------------------------
# unary: rounding toward zero and the fractional part
def _numeric_infer(name):
    def infer(x):
        C.tensor(name, "input", x)
        if x.dtype is mstype.bool_:
            raise C.OpTypeError(name, "'input' with a numeric dtype", str(x.dtype))
        return AbstractTensor(x.shape, x.dtype)
    return infer


def _trunc_kernel(a):
    return np.trunc(a) if a.dtype.kind == "f" or a.dtype == mstype.bfloat16.np else a.copy()


def _frac_kernel(a):
    if a.dtype.kind in "iu":
        return np.zeros_like(a)
    x = upcast_half(a)
    return x - np.trunc(x)


_trunc = defprim("trunc", _numeric_infer("trunc"), _trunc_kernel, lambda i, o, d: (zeros_like(d),),
                 doc="round toward zero (integers unchanged)", sharding=SR.pointwise)
_frac = defprim("frac", _numeric_infer("frac"), _frac_kernel, lambda i, o, d: (d,),
                doc="x - trunc(x), with the sign of x", sharding=SR.pointwise)


def trunc(input):
    """`ops.trunc(input)`: rounded toward zero; integer inputs are returned unchanged (same dtype).
    The gradient is 0 (a step function), as in MindSpore."""
    return _trunc(input)


def frac(x):
    """`ops.frac(x)`: x - trunc(x) (the sign follows x); gradient 1, as in MindSpore."""
    return _frac(x)


# ------------------------------------------------------------------------------------------------
# binary
def _float_binary_infer(name, tensors_only=False, same_kind=False):
    """Broadcast + promote like add, but the result must be floating (int op int is rejected, as
    MindSpore's CPU kernels do). `tensors_only`: both operands must be Tensors (logaddexp);
    `same_kind`: both Tensors must already be floating (logaddexp rejects float op int)."""
    base = _binary_infer(name)

    def infer(x, y):
        if tensors_only:
            C.tensor(name, "input", x)
            C.tensor(name, "other", y)
        out = base(x, y)
        if same_kind:
            for arg, t in (("input", x), ("other", y)):
                if C.is_tensor(t) and not t.dtype.is_floating:
                    raise C.OpTypeError(name, f"'{arg}' to have a floating dtype", str(t.dtype))
        if not out.dtype.is_floating:
            raise C.OpTypeError(name, "at least one floating-point operand",
                                f"{_dtype_name(x)} and {_dtype_name(y)}")
        return out
    return infer


def _dtype_name(v):
    return str(v.dtype) if C.is_tensor(v) else type(v).__name__


def _sq(v):
    return square(v) if isinstance(v, Tensor) else v * v


def _atan2_bprop(inputs, out, dout):
    x, y = inputs
    r2 = add(_sq(x), _sq(y))
    return (_grad_for(x, mul(dout, div(y, r2))) if _wanted(inputs, 0) else None,
            _grad_for(y, neg(mul(dout, div(x, r2)))) if _wanted(inputs, 1) else None)


def _logaddexp_bprop(inputs, out, dout):
    x, y = inputs
    return (_grad_for(x, mul(dout, exp(sub(x, out)))) if _wanted(inputs, 0) else None,
            _grad_for(y, mul(dout, exp(sub(y, out)))) if _wanted(inputs, 1) else None)


def _logaddexp2_bprop(inputs, out, dout):
    from .elementwise import pow as _pow
    x, y = inputs
    return (_grad_for(x, mul(dout, _pow(2.0, sub(x, out)))) if _wanted(inputs, 0) else None,
            _grad_for(y, mul(dout, _pow(2.0, sub(y, out)))) if _wanted(inputs, 1) else None)


def _xlogy_kernel(a, b):
    # 0 wherever x == 0, even if log(y) is -inf or nan (MindSpore's documented rule; its 2.10 CPU
    # kernel gives nan for 0 * log(0) — see the fidelity notes)
    return np.where(np.asarray(a) == 0, 0.0, np.asarray(a) * np.log(b))


def _xlogy_bprop(inputs, out, dout):
    x, y = inputs
    gx = gy = None
    if _wanted(inputs, 0):
        nonzero_x = logical_not(equal(x, 0))
        log_y = log(y) if isinstance(y, Tensor) else (math.log(y) if y > 0 else math.nan)
        gx = _grad_for(x, where(nonzero_x, mul(dout, log_y), zeros_like(dout)))
    if _wanted(inputs, 1):
        gy = _grad_for(y, mul(dout, div(x, y)))
    return gx, gy


def _hypot_bprop(inputs, out, dout):
    x, y = inputs
    return (_grad_for(x, mul(dout, div(x, out))) if _wanted(inputs, 0) else None,
            _grad_for(y, mul(dout, div(y, out))) if _wanted(inputs, 1) else None)


def _fmod_kernel(a, b):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.fmod(a, b)


def _fmod_bprop(inputs, out, dout):
    # fmod(x, y) = x - trunc(x / y) * y
    x, y = inputs
    gy = None
    if _wanted(inputs, 1):
        gy = _grad_for(y, neg(mul(dout, trunc(div(x, y)))))
    return (_grad_for(x, dout) if _wanted(inputs, 0) else None, gy)


def _copysign_bprop(inputs, out, dout):
    # |x| with y's sign: d/dx = sign(x) * sign(out) (0 at x == 0), nothing flows to y
    x = inputs[0]
    return (_grad_for(x, mul(dout, mul(sign(x), sign(out)))) if _wanted(inputs, 0) else None, None)


def _xdivy_kernel(a, b):
    return np.where(np.asarray(a) == 0, 0.0, np.true_divide(a, b))


def _xdivy_bprop(inputs, out, dout):
    x, y = inputs
    nonzero_x = logical_not(equal(x, 0)) if isinstance(x, Tensor) else (x != 0)
    zero = zeros_like(dout)
    gx = _grad_for(x, where(nonzero_x, div(dout, y), zero)) if _wanted(inputs, 0) else None
    gy = _grad_for(y, neg(mul(dout, div(out, y)))) if _wanted(inputs, 1) else None
    return gx, gy


def _heaviside_infer(x, values):
    C.tensor("heaviside", "input", x)
    C.tensor("heaviside", "values", values)
    if x.dtype is not values.dtype:
        raise C.OpTypeError("heaviside", "'input' and 'values' of the same dtype", f"{x.dtype} and {values.dtype}")
    if x.dtype is mstype.bool_:
        raise C.OpTypeError("heaviside", "numeric inputs", str(x.dtype))
    return AbstractTensor(C.broadcast("heaviside", x.shape, values.shape), x.dtype)


_atan2 = defprim("atan2", _float_binary_infer("atan2"), _half_safe(np.arctan2), _atan2_bprop,
                 doc="angle of the point (other, input)", sharding=SR.elementwise)
_logaddexp = defprim("logaddexp", _float_binary_infer("logaddexp", tensors_only=True, same_kind=True),
                     _half_safe(np.logaddexp), _logaddexp_bprop, doc="log(exp(x) + exp(y)), stably",
                     sharding=SR.elementwise)
_logaddexp2 = defprim("logaddexp2", _float_binary_infer("logaddexp2", tensors_only=True, same_kind=True),
                      _half_safe(np.logaddexp2), _logaddexp2_bprop, doc="log2(2**x + 2**y), stably",
                      sharding=SR.elementwise)
_xlogy = defprim("xlogy", _float_binary_infer("xlogy"), _half_safe(_xlogy_kernel), _xlogy_bprop,
                 doc="x * log(y), 0 where x == 0", sharding=SR.elementwise)
_hypot = defprim("hypot", _float_binary_infer("hypot"), _half_safe(np.hypot), _hypot_bprop,
                 doc="sqrt(x**2 + y**2) without overflow", sharding=SR.elementwise)
_fmod = defprim("fmod", _binary_infer("fmod"), _fmod_kernel, _fmod_bprop,
                doc="remainder of truncated division (the sign of x)", sharding=SR.elementwise)
_copysign = defprim("copysign", _binary_infer("copysign", float_result=True), _half_safe(np.copysign),
                    _copysign_bprop, doc="|x| with the sign of y", sharding=SR.elementwise)
_xdivy = defprim("xdivy", _float_binary_infer("xdivy"), _half_safe(_xdivy_kernel), _xdivy_bprop,
                 doc="x / y, 0 where x == 0", sharding=SR.elementwise)
_heaviside = defprim("heaviside", _heaviside_infer, lambda a, v: np.where(a == 0, v, (a > 0).astype(a.dtype)),
                     None, doc="step function: 0 below 0, `values` at 0, 1 above",
                     sharding=SR.elementwise)


def atan2(input, other):
    """`ops.atan2(input, other)`: the angle of (other, input) in (-pi, pi]; at least one floating
    operand (two integer tensors are rejected, as in MindSpore)."""
    return _atan2(input, other)


def logaddexp(input, other):
    """`ops.logaddexp(input, other)`: log(exp(input) + exp(other)) without overflow. Both operands
    must be floating Tensors (MindSpore rejects Python numbers and integer tensors here)."""
    return _logaddexp(input, other)


def logaddexp2(input, other):
    """`ops.logaddexp2(input, other)`: log2(2**input + 2**other), floating Tensors only."""
    return _logaddexp2(input, other)


def xlogy(input, other):
    """`ops.xlogy(input, other)`: input * log(other), defined as 0 where input == 0."""
    return _xlogy(input, other)


def hypot(input, other):
    return _hypot(input, other)


def fmod(input, other):
    """`ops.fmod(input, other)`: input - trunc(input / other) * other (sign of input; integers stay
    integers). Compare `ops.remainder`, whose result has the sign of other."""
    return _fmod(input, other)


def copysign(x, other):
    """`ops.copysign(x, other)`: |x| with the sign of other; integer inputs give Float32."""
    return _copysign(x, other)


def xdivy(x, y):
    """`ops.xdivy(x, y)`: x / y, defined as 0 where x == 0."""
    return _xdivy(x, y)


def heaviside(input, values):
    """`ops.heaviside(input, values)`: 0 where input < 0, `values` where input == 0, 1 where > 0.
    Both Tensors of one dtype (as MindSpore requires); not differentiable."""
    return _heaviside(input, values)


# ------------------------------------------------------------------------------------------------
# lerp and isclose
def _lerp_infer(x, end, weight):
    C.floating("lerp", "input", x)
    C.floating("lerp", "end", end)
    C.tensor_or_scalar("lerp", "weight", weight)
    if x.dtype is not end.dtype:
        raise C.OpTypeError("lerp", "'input' and 'end' of the same dtype", f"{x.dtype} and {end.dtype}")
    shapes = [x.shape, end.shape] + ([weight.shape] if C.is_tensor(weight) else [])
    if C.is_tensor(weight) and weight.dtype is not x.dtype:
        raise C.OpTypeError("lerp", f"'weight' of input's dtype {x.dtype}", str(weight.dtype))
    return AbstractTensor(C.broadcast("lerp", *shapes), x.dtype)


def _lerp_kernel(a, b, w):
    return upcast_half(a) + w * (upcast_half(b) - upcast_half(a))


def _lerp_bprop(inputs, out, dout):
    x, end, w = inputs
    one_minus_w = sub(1.0, w) if isinstance(w, Tensor) else 1.0 - w
    gx = _grad_for(x, mul(dout, one_minus_w)) if _wanted(inputs, 0) else None
    gend = _grad_for(end, mul(dout, w)) if _wanted(inputs, 1) else None
    gw = _grad_for(w, mul(dout, sub(end, x))) if _wanted(inputs, 2) else None
    return gx, gend, gw


_lerp = defprim("lerp", _lerp_infer, _lerp_kernel, _lerp_bprop, doc="input + weight * (end - input)",
                sharding=SR.elementwise)


def lerp(input, end, weight):
    """`ops.lerp(input, end, weight)`: input + weight * (end - input); weight a Tensor or a float."""
    if isinstance(weight, bool):
        raise C.OpTypeError("lerp", "'weight' to be a Tensor or a float", "bool")
    return _lerp(input, end, weight)


def _isclose_infer(x, y, rtol=1e-5, atol=1e-8, equal_nan=False):
    C.tensor("isclose", "input", x)
    C.tensor("isclose", "other", y)
    if x.dtype is not y.dtype:
        raise C.OpTypeError("isclose", "'input' and 'other' of the same dtype", f"{x.dtype} and {y.dtype}")
    return AbstractTensor(C.broadcast("isclose", x.shape, y.shape), mstype.bool_)


def _isclose_kernel(a, b, rtol=1e-5, atol=1e-8, equal_nan=False):
    a, b = upcast_half(a), upcast_half(b)
    if a.dtype.kind in "iub":
        a, b = a.astype(np.float64), b.astype(np.float64)
    with np.errstate(invalid="ignore"):
        finite = np.isfinite(a) & np.isfinite(b)
        close = np.where(finite, np.abs(a - b) <= atol + rtol * np.abs(b), a == b)   # inf only equals inf
    if equal_nan:
        close |= np.isnan(a) & np.isnan(b)
    return close


_isclose = defprim("isclose", _isclose_infer, _isclose_kernel, None, doc="|x - y| <= atol + rtol * |y|",
                   sharding=SR.elementwise)


def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """`ops.isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False)`: elementwise
    |input - other| <= atol + rtol * |other| (equal infinities are close; NaNs only with equal_nan)."""
    rtol = C.float_attr("isclose", "rtol", rtol, lo=0.0)
    atol = C.float_attr("isclose", "atol", atol, lo=0.0)
    if not isinstance(equal_nan, bool):
        raise C.OpTypeError("isclose", "'equal_nan' to be a bool", type(equal_nan).__name__)
    return _isclose(input, other, rtol=rtol, atol=atol, equal_nan=equal_nan)


# MindSpore's aliases
arcsin, arccos, arctan, arctan2 = asin, acos, atan, atan2
arcsinh, arccosh, arctanh = asinh, acosh, atanh
truncate_mod = fmod
floor_div = floordiv = _floor_divide      # x // y (rounded down), MindSpore's spellings
floor_mod = floormod = _remainder         # x - floor(x / y) * y (the sign of y)

__all__ = ["acos", "acosh", "arccos", "arccosh", "arcsin", "arcsinh", "arctan", "arctan2", "arctanh", "asin",
           "asinh", "atan", "atan2", "atanh", "copysign", "cosh", "deg2rad", "erfc", "exp2", "expm1", "floor_div",
           "floor_mod", "floordiv", "floormod", "fmod", "frac", "heaviside", "hypot", "isclose", "lerp", "log10",
           "log1p", "log2", "logaddexp", "logaddexp2", "rad2deg", "sinc", "sinh", "tan", "trunc", "truncate_mod",
           "xdivy", "xlogy"]
