"""The long tail of elementwise and small-reduction math in MindSpore 2.x's names: addcmul/addcdiv,
logit, nan_to_num, float_power, the bitwise ops and invert, fmax/fmin, positive/sgn/signbit,
isneginf/isposinf, gcd/lcm/ldexp, clip_by_value/clip_by_norm, cosine_similarity, logcumsumexp,
aminmax, nanmean, trapz, bias_add, dot/inner/vecdot, and the Python-valued queries
(is_tensor, is_floating_point, is_complex, numel, rank, size).

Dtype rules are MindSpore 2.10's on CPU (checked op by op): `float_power` always computes in
Float64; the bitwise ops take bool/integer tensors (Python ints are weak scalars); `invert` takes
integers only; `logit`, `nan_to_num`, `isneginf`/`isposinf`, `logcumsumexp`, `nanmean` take
floating tensors only; `trapz` of integers gives Float32.

Where an op is a fixed arrangement of existing primitives it is written as that composite (the
docstring says so), so its gradient is the composite's; new primitives carry their own bprop in
minispore ops.
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from ...common import dtype as mstype
from ...common.tensor import Tensor
from .. import _check as C
from .. import sharding_rules as SR
from ..primitive import AbstractTensor, defprim
from .activation import clamp, upcast_half
from .elementwise import (_binary_infer, _grad_for, _unary_infer, _wanted, add, cast, div, equal, exp, greater,
                          isinf, isnan, less, log, logical_and, logical_not, logical_or, maximum, mul, sign, sqrt,
                          sub, where, zeros_like)
from .linalg import matmul
from .reduction import reduce_sum
from .reduction_extra import amax, amin, bool_arg, vector_norm
from .reduction_more import nansum
from .shape import reshape
from .shape_extra import stack

_INTS = ("int", "uint")


def _is_int(v):
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _is_real(v):
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def _float_tensor(op, arg, x):
    C.tensor(op, arg, x)
    if not x.dtype.is_floating:
        raise C.OpTypeError(op, f"'{arg}' to have a floating dtype (Float16, BFloat16, Float32, Float64)",
                            str(x.dtype))
    return x


# ------------------------------------------------------------------------------------------------
# addcmul / addcdiv (composites)
def _addc_check(op, input, tensor1, tensor2, value, floating):
    for arg, t in (("input", input), ("tensor1", tensor1), ("tensor2", tensor2)):
        (_float_tensor if floating else C.tensor)(op, arg, t)
        if t.dtype is mstype.bool_:
            raise C.OpTypeError(op, f"'{arg}' with a numeric dtype", str(t.dtype))
    if not (C.is_tensor(value) or _is_real(value)):
        raise C.OpTypeError(op, "'value' to be a number or a Tensor", type(value).__name__)
    C.broadcast(op, input.shape, tensor1.shape, tensor2.shape, *([value.shape] if C.is_tensor(value) else []))


def addcmul(input, tensor1, tensor2, value=1):
    """`ops.addcmul(input, tensor1, tensor2, value=1)`: input + value * tensor1 * tensor2
    (broadcasting; `value` a number or a Tensor). A composite of mul and add."""
    _addc_check("addcmul", input, tensor1, tensor2, value, floating=False)
    return add(input, mul(mul(tensor1, tensor2), value))


def addcdiv(input, tensor1, tensor2, value=1):
    """`ops.addcdiv(input, tensor1, tensor2, value=1)`: input + value * tensor1 / tensor2, floating
    inputs (MindSpore's CPU kernel rejects Int32). A composite of div, mul and add."""
    _addc_check("addcdiv", input, tensor1, tensor2, value, floating=True)
    return add(input, mul(div(tensor1, tensor2), value))


# ------------------------------------------------------------------------------------------------
# logit (composite)
def logit(input, eps=None):
    """`ops.logit(input, eps=None)`: log(x / (1 - x)), with x clamped to [eps, 1 - eps] first when
    `eps` is given (so 0 and 1 give finite values). A composite of clamp, div and log; the clamp
    makes the gradient 0 outside [eps, 1 - eps], as in MindSpore."""
    _float_tensor("logit", "input", input)
    x = input
    if eps is not None:
        eps = C.float_attr("logit", "eps", eps, 0.0, 1.0)
        x = clamp(x, eps, 1.0 - eps)
    return log(div(x, sub(1.0, x)))


# ------------------------------------------------------------------------------------------------
# nan_to_num
def _n2n_infer(x, nan=0.0, posinf=None, neginf=None):
    _float_tensor("nan_to_num", "input", x)
    for arg, v in (("nan", nan), ("posinf", posinf), ("neginf", neginf)):
        if v is not None and not _is_real(v):
            raise C.OpTypeError("nan_to_num", f"'{arg}' to be a float or None", f"{type(v).__name__} {v!r}")
    return AbstractTensor(x.shape, x.dtype)


def _n2n_kernel(a, nan=0.0, posinf=None, neginf=None):
    finfo = np.finfo(np.float32 if a.dtype == mstype.bfloat16.np else a.dtype)
    big = float(finfo.max)
    return np.nan_to_num(a, nan=nan, posinf=big if posinf is None else posinf,
                         neginf=-big if neginf is None else neginf)


def _n2n_bprop(inputs, out, dout, nan=0.0, posinf=None, neginf=None):
    finite = logical_not(logical_or(isnan(inputs[0]), isinf(inputs[0])))
    return (where(finite, dout, zeros_like(dout)),)


_nan_to_num = defprim("nan_to_num", _n2n_infer, _n2n_kernel, _n2n_bprop,
                      doc="NaN and infinities replaced by finite numbers", sharding=SR.pointwise)


def nan_to_num(input, nan=None, posinf=None, neginf=None):
    """`ops.nan_to_num(input, nan=None, posinf=None, neginf=None)`: NaN -> `nan` (0.0 by default),
    +inf -> `posinf` (the dtype's largest finite value by default), -inf -> `neginf` (the most
    negative). Floating inputs only. The gradient passes where the input is finite, 0 elsewhere."""
    return _nan_to_num(input, nan=0.0 if nan is None else nan, posinf=posinf, neginf=neginf)


# ------------------------------------------------------------------------------------------------
# float_power (composite)
def float_power(input, exponent):
    """`ops.float_power(input, exponent)`: input ** exponent computed in Float64 (the result is
    always Float64, as in MindSpore). Either operand may be a Python number. A composite of cast
    and pow."""
    if not C.is_tensor(input) and not C.is_tensor(exponent):
        raise C.OpTypeError("float_power", "at least one Tensor operand",
                            f"{type(input).__name__} and {type(exponent).__name__}")
    C.tensor_or_scalar("float_power", "input", input)
    C.tensor_or_scalar("float_power", "exponent", exponent)
    from .elementwise import pow as _pow
    x = cast(input, mstype.float64) if C.is_tensor(input) else float(input)
    y = cast(exponent, mstype.float64) if C.is_tensor(exponent) else float(exponent)
    return _pow(x, y)


# ------------------------------------------------------------------------------------------------
# bitwise
def _bitwise_infer(name, allow_bool=True):
    base = _binary_infer(name)

    def infer(x, y):
        out = base(x, y)
        for arg, t in (("input", x), ("other", y)):
            if C.is_tensor(t):
                ok = t.dtype.kind in _INTS or (allow_bool and t.dtype is mstype.bool_)
                if not ok:
                    raise C.OpTypeError(name, f"'{arg}' with an integer{' or Bool' if allow_bool else ''} dtype",
                                        str(t.dtype))
            elif not _is_int(t) and not (allow_bool and isinstance(t, bool)):
                raise C.OpTypeError(name, f"'{arg}' to be a Tensor or an int", f"{type(t).__name__} {t!r}")
        return out
    return infer


def _shift_kernel(fn):
    def kernel(a, b):
        a = np.asarray(a)
        b = np.asarray(b, dtype=a.dtype) if not isinstance(b, np.ndarray) else b
        return fn(a, b)
    return kernel


_bitwise_and = defprim("bitwise_and", _bitwise_infer("bitwise_and"), np.bitwise_and, doc="x & y", sharding=SR.elementwise)
_bitwise_or = defprim("bitwise_or", _bitwise_infer("bitwise_or"), np.bitwise_or, doc="x | y", sharding=SR.elementwise)
_bitwise_xor = defprim("bitwise_xor", _bitwise_infer("bitwise_xor"), np.bitwise_xor, doc="x ^ y", sharding=SR.elementwise)
_left_shift = defprim("bitwise_left_shift", _bitwise_infer("bitwise_left_shift", allow_bool=False),
                      _shift_kernel(np.left_shift), doc="x << y", sharding=SR.elementwise)
_right_shift = defprim("bitwise_right_shift", _bitwise_infer("bitwise_right_shift", allow_bool=False),
                       _shift_kernel(np.right_shift), doc="x >> y (arithmetic for signed integers)",
                       sharding=SR.elementwise)


def _int_like_infer(name):
    def infer(x):
        C.integer(name, "x", x)
        return AbstractTensor(x.shape, x.dtype)
    return infer


_invert = defprim("invert", _int_like_infer("invert"), np.invert, doc="~x (bitwise not)", sharding=SR.pointwise)


def bitwise_and(input, other):
    """`ops.bitwise_and(input, other)`: elementwise AND of bool/integer tensors (not differentiable)."""
    return _bitwise_and(input, other)


def bitwise_or(input, other):
    """`ops.bitwise_or(input, other)`: elementwise OR of bool/integer tensors."""
    return _bitwise_or(input, other)


def bitwise_xor(input, other):
    """`ops.bitwise_xor(input, other)`: elementwise XOR of bool/integer tensors."""
    return _bitwise_xor(input, other)


def bitwise_left_shift(input, other):
    """`ops.bitwise_left_shift(input, other)`: input << other (integers; either may be an int)."""
    return _left_shift(input, other)


def bitwise_right_shift(input, other):
    """`ops.bitwise_right_shift(input, other)`: input >> other (integers; arithmetic shift)."""
    return _right_shift(input, other)


def invert(x):
    """`ops.invert(x)`: bitwise NOT of an integer tensor (~x = -x - 1; Bool is rejected, as in
    MindSpore — use logical_not)."""
    return _invert(x)


# ------------------------------------------------------------------------------------------------
# fmax / fmin: maximum/minimum that ignore NaN
def _fmaxmin_infer(name):
    base = _binary_infer(name)

    def infer(x, y):
        C.tensor(name, "input", x)
        C.tensor(name, "other", y)
        for arg, t in (("input", x), ("other", y)):
            if t.dtype is mstype.bool_:
                raise C.OpTypeError(name, f"'{arg}' with a numeric dtype", str(t.dtype))
        return base(x, y)
    return infer


def _fmaxmin_bprop(pick_x):
    def bprop(inputs, out, dout):
        x, y = inputs
        x_wins = logical_or(pick_x(x, y), isnan(y))
        y_wins = logical_or(pick_x(y, x), logical_and(isnan(x), logical_not(isnan(y))))
        tie = logical_and(equal(x, y), logical_not(isnan(x)))
        half = mul(dout, 0.5)
        zero = zeros_like(dout)
        gx = where(tie, half, where(x_wins, dout, zero))
        gy = where(tie, half, where(y_wins, dout, zero))
        return (_grad_for(x, gx) if _wanted(inputs, 0) else None,
                _grad_for(y, gy) if _wanted(inputs, 1) else None)
    return bprop


_fmax = defprim("fmax", _fmaxmin_infer("fmax"), np.fmax, _fmaxmin_bprop(greater), doc="maximum ignoring NaN",
               sharding=SR.elementwise)
_fmin = defprim("fmin", _fmaxmin_infer("fmin"), np.fmin, _fmaxmin_bprop(less), doc="minimum ignoring NaN",
               sharding=SR.elementwise)


def fmax(input, other):
    """`ops.fmax(input, other)`: elementwise maximum where a NaN loses to a number (NaN only when
    both are NaN). Ties split the gradient 0.5/0.5, as `maximum` does."""
    return _fmax(input, other)


def fmin(input, other):
    """`ops.fmin(input, other)`: elementwise minimum where a NaN loses to a number."""
    return _fmin(input, other)


# ------------------------------------------------------------------------------------------------
# sign-like queries
def positive(input):
    """`ops.positive(input)`: the input itself (+x), returned as is."""
    C.tensor("positive", "input", input)
    return input


def sgn(input):
    """`ops.sgn(input)`: the sign of a real tensor (-1, 0 or 1), i.e. `ops.sign` (minispore has no
    complex dtypes, where sgn would be x / |x|)."""
    C.tensor("sgn", "input", input)
    return sign(input)


_signbit = defprim("signbit", _unary_infer("signbit", out_dtype=mstype.bool_),
                   lambda a: np.less(a, 0), doc="True where x < 0 (MindSpore's rule: -0.0 is False)",
                   sharding=SR.pointwise)
_isneginf = defprim("isneginf", _unary_infer("isneginf", float_only=True, out_dtype=mstype.bool_),
                    lambda a: np.isneginf(upcast_half(a)), doc="x == -inf", sharding=SR.pointwise)
_isposinf = defprim("isposinf", _unary_infer("isposinf", float_only=True, out_dtype=mstype.bool_),
                    lambda a: np.isposinf(upcast_half(a)), doc="x == +inf", sharding=SR.pointwise)


def signbit(input):
    """`ops.signbit(input)`: Bool, True where input < 0. MindSpore 2.10 reports False for -0.0 (NumPy
    and PyTorch say True, reading the bit itself); minispore follows MindSpore."""
    return _signbit(input)


def isneginf(input):
    """`ops.isneginf(input)`: Bool, True at -inf (floating inputs only, as in MindSpore)."""
    return _isneginf(input)


def isposinf(input):
    """`ops.isposinf(input)`: Bool, True at +inf (floating inputs only)."""
    return _isposinf(input)


# ------------------------------------------------------------------------------------------------
# gcd / lcm / ldexp
def _int_binary_infer(name):
    base = _binary_infer(name)

    def infer(x, y):
        C.integer(name, "input", x)
        C.integer(name, "other", y)
        return base(x, y)
    return infer


_gcd = defprim("gcd", _int_binary_infer("gcd"), np.gcd, doc="greatest common divisor", sharding=SR.elementwise)
_lcm = defprim("lcm", _int_binary_infer("lcm"), np.lcm, doc="least common multiple", sharding=SR.elementwise)


def gcd(input, other):
    """`ops.gcd(input, other)`: elementwise greatest common divisor of integer tensors."""
    return _gcd(input, other)


def lcm(input, other):
    """`ops.lcm(input, other)`: elementwise least common multiple of integer tensors."""
    return _lcm(input, other)


def ldexp(x, other):
    """`ops.ldexp(x, other)`: x * 2 ** other, both Tensors (broadcasting). A composite of pow and
    mul."""
    C.tensor("ldexp", "x", x)
    C.tensor("ldexp", "other", other)
    from .elementwise import pow as _pow
    return mul(x, _pow(2.0, cast(other, mstype.float32 if x.dtype.kind != "float" else x.dtype)))


# ------------------------------------------------------------------------------------------------
# clipping (composites)
def _int_bound(v, dtype):
    """A float bound for an integer tensor, truncated; inf saturates to the dtype's extreme (NaN has
    no integer value)."""
    if not isinstance(v, float):
        return v
    if v != v:
        raise C.OpValueError("clip_by_value", f"a bound that is a number (not NaN) for a {dtype} tensor", repr(v))
    if v in (math.inf, -math.inf):
        info = np.iinfo(dtype.np)
        return int(info.max) if v > 0 else int(info.min)
    return int(v)


def _clip_one(x, lo, hi):
    C.tensor("clip_by_value", "x", x)
    for arg, v in (("clip_value_min", lo), ("clip_value_max", hi)):
        if v is not None and not C.is_tensor(v) and not _is_real(v):
            raise C.OpTypeError("clip_by_value", f"'{arg}' to be a number, a Tensor or None", type(v).__name__)
    if x.dtype.kind in _INTS:          # float bounds on an integer tensor are truncated, as in MindSpore
        lo, hi = _int_bound(lo, x.dtype), _int_bound(hi, x.dtype)
    return clamp(x, lo, hi)


def clip_by_value(x, clip_value_min=None, clip_value_max=None):
    """`ops.clip_by_value(x, clip_value_min=None, clip_value_max=None)`: clamp to [min, max]; `x`
    may be a Tensor or a list/tuple of Tensors (each clipped; returned as a tuple, as MindSpore
    does). A composite over clamp."""
    if clip_value_min is None and clip_value_max is None:
        raise C.OpValueError("clip_by_value", "at least one of 'clip_value_min' and 'clip_value_max'", "both None")
    if isinstance(x, (list, tuple)):
        return tuple(_clip_one(t, clip_value_min, clip_value_max) for t in x)
    return _clip_one(x, clip_value_min, clip_value_max)


def clip_by_norm(x, max_norm, norm_type=2.0, error_if_nonfinite=False):
    """`ops.clip_by_norm(x, max_norm, norm_type=2.0, error_if_nonfinite=False)`: scale `x` (a Tensor
    or a list/tuple of Tensors, which share one total norm) so that its `norm_type`-norm is at most
    `max_norm`: x * min(1, max_norm / (total_norm + 1e-6)); a list comes back as a tuple. A
    composite over vector_norm. (MindSpore 2.10 computes (sum x ** p) ** (1/p) without absolute
    values, so for odd p and negative entries its result differs; minispore uses the true p-norm.)"""
    many = isinstance(x, (list, tuple))
    tensors = list(x) if many else [x]
    if not tensors:
        raise C.OpValueError("clip_by_norm", "at least one Tensor", "an empty list")
    for t in tensors:
        _float_tensor("clip_by_norm", "x", t)
    max_norm = C.float_attr("clip_by_norm", "max_norm", max_norm)
    norm_type = C.float_attr("clip_by_norm", "norm_type", norm_type)
    bool_arg("clip_by_norm", "error_if_nonfinite", error_if_nonfinite)
    norms = stack([vector_norm(t, norm_type) for t in tensors])
    total = vector_norm(norms, norm_type)
    if error_if_nonfinite and not np.isfinite(float(total.asnumpy())):
        raise C.OpValueError("clip_by_norm", "a finite total norm (error_if_nonfinite=True)", str(total.asnumpy()))
    coef = clamp(div(max_norm, add(total, 1e-6)), None, 1.0)
    out = [mul(t, cast(coef, t.dtype)) for t in tensors]
    return tuple(out) if many else out[0]


# ------------------------------------------------------------------------------------------------
# cosine_similarity (composite)
def cosine_similarity(x1, x2, dim=1, eps=1e-08):
    """`ops.cosine_similarity(x1, x2, dim=1, eps=1e-08)`: sum(x1 * x2, dim) / max(|x1| * |x2|, eps)
    along `dim` (inputs broadcast). A composite of mul, reduce_sum, sqrt and maximum."""
    _float_tensor("cosine_similarity", "x1", x1)
    _float_tensor("cosine_similarity", "x2", x2)
    shape = C.broadcast("cosine_similarity", x1.shape, x2.shape)
    ax = C.axis("cosine_similarity", dim, len(shape))
    eps = C.float_attr("cosine_similarity", "eps", eps)
    num = reduce_sum(mul(x1, x2), ax)
    n1 = reduce_sum(mul(x1, x1), ax)
    n2 = reduce_sum(mul(x2, x2), ax)
    return div(num, sqrt(maximum(mul(n1, n2), eps * eps)))


# ------------------------------------------------------------------------------------------------
# logcumsumexp
def _lcse_infer(x, axis):
    _float_tensor("logcumsumexp", "input", x)
    C.axis("logcumsumexp", axis, len(x.shape))
    return AbstractTensor(x.shape, x.dtype)


def _lcse_kernel(a, axis):
    x = upcast_half(a)
    if x.ndim == 0:
        return x.copy()
    with np.errstate(over="ignore", invalid="ignore"):
        return np.logaddexp.accumulate(x, axis=axis % x.ndim)


def _lcse_bprop(inputs, out, dout, axis):
    # d out_j / d x_i = exp(x_i - out_j) for i <= j, so dx_i = sum_{j >= i} dout_j exp(x_i - out_j):
    # a reversed cumulative sum of dout * exp(-out), times exp(x). Both exponentials are shifted
    # by out's largest value along the axis, so large inputs do not overflow.
    from .reduction_extra import cumsum_op
    x = inputs[0]
    if len(x.shape) == 0:
        return (dout,)
    ax = axis % len(x.shape)
    top = amax(out, ax, True)
    w = mul(dout, exp(sub(top, out)))
    rev = cumsum_op(w, ax, reverse=True)
    return (mul(rev, exp(sub(x, top))),)


_logcumsumexp = defprim("logcumsumexp", _lcse_infer, _lcse_kernel, _lcse_bprop,
                        doc="log of the cumulative sum of exp(x), computed stably", sharding=SR.scan)


def logcumsumexp(input, axis):
    """`ops.logcumsumexp(input, axis)`: y_i = log(exp(x_0) + ... + exp(x_i)) along `axis`, computed
    with logaddexp (no overflow for large inputs). Floating inputs only."""
    return _logcumsumexp(input, axis=axis)


# ------------------------------------------------------------------------------------------------
# aminmax / nanmean / trapz (composites)
def aminmax(input, *, axis=0, keepdims=False):
    """`ops.aminmax(input, *, axis=0, keepdims=False)`: (amin, amax) along `axis` (axis=None
    reduces everything). A composite of amin and amax."""
    C.tensor("aminmax", "input", input)
    if axis is not None:
        C.axis("aminmax", axis, len(input.shape))
    bool_arg("aminmax", "keepdims", keepdims)
    return amin(input, axis, keepdims), amax(input, axis, keepdims)


def nanmean(input, axis=None, keepdims=False, *, dtype=None):
    """`ops.nanmean(input, axis=None, keepdims=False, *, dtype=None)`: the mean of the non-NaN
    entries (floating inputs only). A composite: nansum / count of non-NaN entries."""
    _float_tensor("nanmean", "input", input)
    bool_arg("nanmean", "keepdims", keepdims)
    total = nansum(input, axis, keepdims)
    count = reduce_sum(cast(logical_not(isnan(input)), input.dtype), () if axis is None else axis, keepdims)
    out = div(total, count)
    return cast(out, dtype) if dtype is not None else out


def trapz(y, x=None, *, dx=1.0, dim=-1):
    """`ops.trapz(y, x=None, *, dx=1.0, dim=-1)`: the trapezoidal rule along `dim`, with sample
    points `x` (a 1-D Tensor of y's length along dim, or one of y's shape) or spacing `dx`. Integer
    `y` gives Float32. A composite of narrow, add, mul and reduce_sum."""
    from .shape_more import narrow
    C.tensor("trapz", "y", y)
    if y.dtype.kind not in ("float",):
        if y.dtype is mstype.bool_:
            raise C.OpTypeError("trapz", "'y' with a numeric dtype", str(y.dtype))
        y = cast(y, mstype.float32)
    nd = len(y.shape)
    ax = C.axis("trapz", dim, nd)
    n = y.shape[ax] if nd else 0
    if nd == 0:
        raise C.OpValueError("trapz", "'y' with at least 1 dimension", "a 0-d tensor")
    mid = mul(add(narrow(y, ax, 1, n - 1), narrow(y, ax, 0, n - 1)), 0.5) if n > 1 else None
    if x is None:
        dx = C.float_attr("trapz", "dx", dx)
        return mul(reduce_sum(mid, ax), dx) if mid is not None else reduce_sum(mul(y, 0.0), ax)
    C.tensor("trapz", "x", x)
    if len(x.shape) == 1:
        if x.shape[0] != n:
            raise C.OpValueError("trapz", f"a 1-D 'x' of length {n} (y's size along dim)", f"shape {tuple(x.shape)}")
        steps = sub(narrow(x, 0, 1, n - 1), narrow(x, 0, 0, n - 1))
        steps = reshape(steps, (n - 1,) + (1,) * (nd - 1 - ax))
    else:
        if tuple(x.shape) != tuple(y.shape):
            raise C.OpValueError("trapz", f"'x' 1-D or of y's shape {tuple(y.shape)}", f"shape {tuple(x.shape)}")
        steps = sub(narrow(x, ax, 1, n - 1), narrow(x, ax, 0, n - 1))
    steps = cast(steps, y.dtype)
    if mid is None:
        return reduce_sum(mul(y, 0.0), ax)
    return reduce_sum(mul(mid, steps), ax)


# ------------------------------------------------------------------------------------------------
# bias_add (composite)
def bias_add(input_x, bias):
    """`ops.bias_add(input_x, bias)`: add a 1-D `bias` along the channel axis (axis 1, NCHW) of an
    input with 2 to 5 dimensions; dtypes must agree. A composite of reshape and add."""
    C.tensor("bias_add", "input_x", input_x)
    C.tensor("bias_add", "bias", bias)
    nd = len(input_x.shape)
    if not 2 <= nd <= 5:
        raise C.OpValueError("bias_add", "'input_x' with 2 to 5 dimensions", f"shape {tuple(input_x.shape)}")
    if len(bias.shape) != 1 or bias.shape[0] != input_x.shape[1]:
        raise C.OpValueError("bias_add", f"a 1-D 'bias' of length {input_x.shape[1]} (input_x's channels)",
                             f"shape {tuple(bias.shape)}")
    if bias.dtype is not input_x.dtype:
        raise C.OpTypeError("bias_add", "'input_x' and 'bias' of the same dtype", f"{input_x.dtype} and {bias.dtype}")
    return add(input_x, reshape(bias, (bias.shape[0],) + (1,) * (nd - 2)))


# ------------------------------------------------------------------------------------------------
# dot / inner / vecdot (composites over matmul)
def _same_dtype(op, x, y):
    if x.dtype is not y.dtype:
        raise C.OpTypeError(op, "'input' and 'other' of the same dtype", f"{x.dtype} and {y.dtype}")


def dot(input, other):
    """`ops.dot(input, other)`: NumPy's dot for tensors of rank >= 2: contract input's last axis with
    other's second-to-last; the result's shape is input.shape[:-1] + other.shape[:-2] +
    other.shape[-1:]. Floating inputs of one dtype (MindSpore rejects 1-D and integer inputs). A
    composite of reshape, transpose and matmul."""
    from .shape import transpose
    _float_tensor("dot", "input", input)
    _float_tensor("dot", "other", other)
    _same_dtype("dot", input, other)
    xs, ys = tuple(input.shape), tuple(other.shape)
    if len(xs) < 2 or len(ys) < 2:
        raise C.OpValueError("dot", "inputs with at least 2 dimensions", f"shapes {xs} and {ys}")
    if xs[-1] != ys[-2]:
        raise C.OpValueError("dot", f"input's last dimension ({xs[-1]}) to equal other's second-to-last "
                             f"({ys[-2]})", f"shapes {xs} and {ys}")
    k = xs[-1]
    a = reshape(input, (-1, k)) if len(xs) != 2 else input
    perm = tuple(i for i in range(len(ys)) if i != len(ys) - 2) + (len(ys) - 2,)
    b = reshape(transpose(other, perm), (-1, k))          # (prod(other without k), k)
    out = matmul(a, transpose(b, (1, 0)))
    return reshape(out, xs[:-1] + ys[:-2] + ys[-1:])


def inner(input, other):
    """`ops.inner(input, other)`: the sum over the last axes of both inputs (shape input.shape[:-1] +
    other.shape[:-1]); a 0-d operand multiplies instead. One dtype for both. A composite of reshape
    and matmul."""
    C.tensor("inner", "input", input)
    C.tensor("inner", "other", other)
    _same_dtype("inner", input, other)
    xs, ys = tuple(input.shape), tuple(other.shape)
    if not xs or not ys:
        return mul(input, other)
    if xs[-1] != ys[-1]:
        raise C.OpValueError("inner", f"equal last dimensions", f"shapes {xs} and {ys}")
    k = xs[-1]
    from .shape import transpose
    out = matmul(reshape(input, (-1, k)), transpose(reshape(other, (-1, k)), (1, 0)))
    return reshape(out, xs[:-1] + ys[:-1])


def vecdot(x, y, *, axis=-1):
    """`ops.vecdot(x, y, *, axis=-1)`: sum(x * y, axis) with broadcasting (real inputs). A composite
    of mul and reduce_sum."""
    C.tensor("vecdot", "x", x)
    C.tensor("vecdot", "y", y)
    shape = C.broadcast("vecdot", x.shape, y.shape)
    ax = C.axis("vecdot", axis, len(shape))
    return reduce_sum(mul(x, y), ax)


# ------------------------------------------------------------------------------------------------
# Python-valued queries
def is_tensor(obj):
    """`ops.is_tensor(obj)`: True for a minispore Tensor (or Parameter)."""
    return isinstance(obj, Tensor)


def is_floating_point(input):
    """`ops.is_floating_point(input)`: Python bool, True for Float16/BFloat16/Float32/Float64."""
    C.tensor("is_floating_point", "input", input)
    return bool(input.dtype.is_floating)


def is_complex(input):
    """`ops.is_complex(input)`: always False (minispore has no complex dtypes)."""
    C.tensor("is_complex", "input", input)
    return False


def numel(input):
    """`ops.numel(input)`: the number of elements, a Python int."""
    C.tensor("numel", "input", input)
    return int(np.prod(input.shape, dtype=np.int64))


def size(input_x):
    """`ops.size(input_x)`: the number of elements, a Python int (same as numel)."""
    C.tensor("size", "input_x", input_x)
    return int(np.prod(input_x.shape, dtype=np.int64))


def rank(input_x):
    """`ops.rank(input_x)`: the number of dimensions, a Python int."""
    C.tensor("rank", "input_x", input_x)
    return len(input_x.shape)


__all__ = ["addcmul", "addcdiv", "logit", "nan_to_num", "float_power", "bitwise_and", "bitwise_or",
           "bitwise_xor", "bitwise_left_shift", "bitwise_right_shift", "invert", "fmax", "fmin", "positive",
           "sgn", "signbit", "isneginf", "isposinf", "gcd", "lcm", "ldexp", "clip_by_value", "clip_by_norm",
           "cosine_similarity", "logcumsumexp", "aminmax", "nanmean", "trapz", "bias_add", "dot", "inner",
           "vecdot", "is_tensor", "is_floating_point", "is_complex", "numel", "size", "rank"]
