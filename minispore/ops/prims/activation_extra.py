"""More activations, in MindSpore 2.x's functional names: hardswish, hardsigmoid, mish, selu, celu,
logsigmoid, softsign, tanhshrink, softshrink, hardshrink, threshold, prelu, glu, softmin.

Gradients at the kinks are MindSpore's (checked against the 2.10 CPU wheel with `ms.grad`):
hardswish's slope x/3 + 1/2 holds on the closed interval [-3, 3] (so -1/2 at -3 and 3/2 at 3),
hardsigmoid's 1/6 only on the open interval (-3, 3); selu takes its linear branch at 0; prelu its
negative branch; softshrink, hardshrink and threshold pass the gradient only strictly outside the
dead zone.

Integer inputs: hardswish, hardsigmoid and selu accept them and keep the integer dtype (the value
is computed in floating point and truncated toward zero), tanhshrink turns them into Float32; the
rest take floating inputs only. All as MindSpore does.
"""
from __future__ import annotations

import numbers

import numpy as np

from ...common import dtype as mstype
from .. import _check as C
from .. import sharding_rules as SR
from ..primitive import AbstractTensor, defprim
from .activation import _real_arg, sigmoid, softmax, softplus, tanh, upcast_half
from .elementwise import (abs, add, div, exp, greater, greater_equal, less, less_equal, logical_and, mul, neg,
                          square, sub, sum_to, where, zeros_like)

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def _float_infer(name):
    def infer(x, **attrs):
        C.floating(name, "input", x)
        return AbstractTensor(x.shape, x.dtype)
    return infer


def _numeric_infer(name, int_result=None):
    """Any non-bool tensor; integers keep their dtype, or become `int_result` if given."""
    def infer(x, **attrs):
        C.tensor(name, "input", x)
        if x.dtype is mstype.bool_:
            raise C.OpTypeError(name, "'input' with a numeric dtype", str(x.dtype))
        dt = x.dtype if x.dtype.is_floating or int_result is None else int_result
        return AbstractTensor(x.shape, dt)
    return infer


def _as_float(a):
    """float32 for half precision, float64 for integers (their result is truncated back), else a."""
    if a.dtype.kind in "iu":
        return a.astype(np.float64)
    return upcast_half(a)


def _mask_grad(mask, dout):
    return where(mask, dout, zeros_like(dout))


# ------------------------------------------------------------------------------------------------
# hardswish / hardsigmoid
def _hardswish_kernel(a):
    x = _as_float(a)
    return x * np.clip(x + 3.0, 0.0, 6.0) / 6.0


def _hardswish_bprop(inputs, out, dout):
    x = inputs[0]
    inside = logical_and(greater_equal(x, -3.0), less_equal(x, 3.0))       # closed, as MindSpore
    outside = _mask_grad(greater(x, 3.0), dout)
    return (where(inside, mul(dout, add(div(x, 3.0), 0.5)), outside),)


def _hardsigmoid_kernel(a):
    x = _as_float(a)
    return np.clip(x + 3.0, 0.0, 6.0) / 6.0


def _hardsigmoid_bprop(inputs, out, dout):
    x = inputs[0]
    return (_mask_grad(logical_and(greater(x, -3.0), less(x, 3.0)), mul(dout, 1.0 / 6.0)),)


_hardswish = defprim("hardswish", _numeric_infer("hardswish"), _hardswish_kernel, _hardswish_bprop,
                     doc="x * relu6(x + 3) / 6", sharding=SR.pointwise)
_hardsigmoid = defprim("hardsigmoid", _numeric_infer("hardsigmoid"), _hardsigmoid_kernel, _hardsigmoid_bprop,
                       doc="relu6(x + 3) / 6", sharding=SR.pointwise)


def hardswish(input):
    """`ops.hardswish(input)`: input * relu6(input + 3) / 6 (MobileNetV3)."""
    return _hardswish(input)


def hardsigmoid(input):
    """`ops.hardsigmoid(input)`: relu6(input + 3) / 6, a piecewise-linear sigmoid."""
    return _hardsigmoid(input)


# ------------------------------------------------------------------------------------------------
# mish / selu / celu
def _softplus_np(x):
    return np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x)))      # never exponentiates a large positive


def _mish_kernel(a):
    x = upcast_half(a)
    return x * np.tanh(_softplus_np(x))


def _mish_bprop(inputs, out, dout):
    # d/dx x tanh(sp(x)) = tanh(sp) + x (1 - tanh(sp)^2) sigmoid(x)
    x = inputs[0]
    t = tanh(softplus(x))
    return (mul(dout, add(t, mul(mul(x, sub(1.0, square(t))), sigmoid(x)))),)


def _selu_kernel(a):
    x = _as_float(a)
    with np.errstate(over="ignore"):
        return _SELU_SCALE * np.where(x > 0, x, _SELU_ALPHA * np.expm1(np.minimum(x, 0)))


def _selu_bprop(inputs, out, dout):
    x = inputs[0]
    neg_branch = mul(exp(where(less(x, 0.0), x, 0.0)), _SELU_SCALE * _SELU_ALPHA)
    return (mul(dout, where(greater_equal(x, 0.0), _SELU_SCALE, neg_branch)),)


def _celu_infer(x, alpha=1.0):
    C.floating("celu", "x", x)
    if alpha == 0:
        raise C.OpValueError("celu", "a non-zero 'alpha'", repr(alpha))
    return AbstractTensor(x.shape, x.dtype)


def _celu_kernel(a, alpha=1.0):
    x = upcast_half(a)
    return np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0) / alpha))


def _celu_bprop(inputs, out, dout, alpha=1.0):
    x = inputs[0]
    neg_branch = exp(div(where(less(x, 0.0), x, 0.0), alpha))
    return (mul(dout, where(greater(x, 0.0), 1.0, neg_branch)),)


_mish = defprim("mish", _float_infer("mish"), _mish_kernel, _mish_bprop, doc="x * tanh(softplus(x))",
                sharding=SR.pointwise)
_selu = defprim("selu", _numeric_infer("selu"), _selu_kernel, _selu_bprop,
                doc="scale * (x if x > 0 else alpha * (exp(x) - 1))", sharding=SR.pointwise)
_celu = defprim("celu", _celu_infer, _celu_kernel, _celu_bprop, doc="x if x > 0 else alpha * (exp(x/alpha) - 1)",
                sharding=SR.pointwise)


def mish(x):
    """`ops.mish(x)`: x * tanh(softplus(x)), floating inputs."""
    return _mish(x)


def selu(input_x):
    """`ops.selu(input_x)`: scale * elu(x, alpha) with the self-normalizing constants
    (alpha ~ 1.6733, scale ~ 1.0507)."""
    return _selu(input_x)


def celu(x, alpha=1.0):
    """`ops.celu(x, alpha=1.0)`: max(0, x) + min(0, alpha * (exp(x / alpha) - 1)); alpha != 0."""
    return _celu(x, alpha=_real_arg("celu", "alpha", alpha))


# ------------------------------------------------------------------------------------------------
# logsigmoid / softsign / tanhshrink
def _logsigmoid_kernel(a):
    return -_softplus_np(-upcast_half(a))       # log(sigmoid(x)) = -softplus(-x), stable both ways


def _softsign_kernel(a):
    x = upcast_half(a)
    return x / (1.0 + np.abs(x))


def _tanhshrink_kernel(a):
    x = upcast_half(a) if a.dtype.kind not in "iu" else a.astype(np.float32)
    return x - np.tanh(x)


_logsigmoid = defprim("logsigmoid", _float_infer("logsigmoid"), _logsigmoid_kernel,
                      lambda i, o, d: (mul(d, sigmoid(neg(i[0]))),), doc="log(sigmoid(x))",
                      sharding=SR.pointwise)
_softsign = defprim("softsign", _float_infer("softsign"), _softsign_kernel,
                    lambda i, o, d: (div(d, square(add(abs(i[0]), 1.0))),), doc="x / (1 + |x|)",
                    sharding=SR.pointwise)
_tanhshrink = defprim("tanhshrink", _numeric_infer("tanhshrink", int_result=mstype.float32), _tanhshrink_kernel,
                      lambda i, o, d: (mul(d, square(tanh(i[0]))),), doc="x - tanh(x)",
                      sharding=SR.pointwise)


def logsigmoid(x):
    """`ops.logsigmoid(x)`: log(1 / (1 + exp(-x))), computed without overflow."""
    return _logsigmoid(x)


def softsign(x):
    return _softsign(x)


def tanhshrink(input):
    """`ops.tanhshrink(input)`: input - tanh(input); integer inputs give Float32."""
    return _tanhshrink(input)


# ------------------------------------------------------------------------------------------------
# softshrink / hardshrink / threshold
def _shrink_infer(name):
    def infer(x, lambd=0.5):
        C.floating(name, "input", x)
        if lambd < 0:
            raise C.OpValueError(name, "'lambd' >= 0", repr(lambd))
        return AbstractTensor(x.shape, x.dtype)
    return infer


def _softshrink_kernel(a, lambd=0.5):
    x = upcast_half(a)
    return np.where(x > lambd, x - lambd, np.where(x < -lambd, x + lambd, 0.0)).astype(x.dtype)


def _hardshrink_kernel(a, lambd=0.5):
    x = upcast_half(a)
    return np.where(np.abs(x) > lambd, x, 0.0).astype(x.dtype)


def _shrink_bprop(inputs, out, dout, lambd=0.5):
    x = inputs[0]
    return (_mask_grad(greater(abs(x), lambd), dout),)


_softshrink = defprim("softshrink", _shrink_infer("softshrink"), _softshrink_kernel, _shrink_bprop,
                      doc="x - lambd*sign(x) outside [-lambd, lambd], else 0", sharding=SR.pointwise)
_hardshrink = defprim("hardshrink", _shrink_infer("hardshrink"), _hardshrink_kernel, _shrink_bprop,
                      doc="x outside [-lambd, lambd], else 0", sharding=SR.pointwise)


def softshrink(input, lambd=0.5):
    """`ops.softshrink(input, lambd=0.5)`: input shrunk toward 0 by lambd (0 inside the band)."""
    return _softshrink(input, lambd=_real_arg("softshrink", "lambd", lambd))


def hardshrink(input, lambd=0.5):
    """`ops.hardshrink(input, lambd=0.5)`: input where |input| > lambd, else 0."""
    return _hardshrink(input, lambd=_real_arg("hardshrink", "lambd", lambd))


soft_shrink = softshrink


def _threshold_kernel(a, thr=0.0, value=0.0):
    x = upcast_half(a)
    return np.where(x > thr, x, value).astype(x.dtype)


def _threshold_bprop(inputs, out, dout, thr=0.0, value=0.0):
    return (_mask_grad(greater(inputs[0], thr), dout),)


_threshold = defprim("threshold", _float_infer("threshold"), _threshold_kernel, _threshold_bprop,
                     doc="x where x > thr, else value", sharding=SR.pointwise)


def threshold(input, thr, value):
    """`ops.threshold(input, thr, value)`: input where input > thr, else `value`."""
    return _threshold(input, thr=_real_arg("threshold", "thr", thr), value=_real_arg("threshold", "value", value))


# ------------------------------------------------------------------------------------------------
# prelu (a learnable slope per channel)
def _prelu_infer(x, w):
    C.floating("prelu", "input", x)
    C.floating("prelu", "weight", w)
    if len(w.shape) > 1:
        raise C.OpValueError("prelu", "a 1-D (or 0-d) 'weight'", f"shape {tuple(w.shape)}")
    channels = x.shape[1] if len(x.shape) >= 2 else 1
    n = w.shape[0] if len(w.shape) == 1 else 1
    if n not in (1, channels):
        raise C.OpValueError("prelu", f"'weight' of length 1 or the number of channels ({channels})",
                             f"length {n} for input shape {tuple(x.shape)}")
    return AbstractTensor(x.shape, x.dtype)


def _channel_shape(weight_shape, ndim):
    """The shape that makes a (C,) weight broadcast over dim 1 of an ndim-d input: (1, C, 1, ...);
    () for one shared slope or a 0-d/1-d input."""
    n = weight_shape[0] if len(weight_shape) else 1
    return () if ndim < 2 or n == 1 else (1, n) + (1,) * (ndim - 2)


def _prelu_kernel(a, w):
    x = upcast_half(a)
    return np.where(x > 0, x, upcast_half(w).reshape(_channel_shape(w.shape, x.ndim)) * x)


def _prelu_bprop(inputs, out, dout):
    from .shape import reshape
    x, w = inputs
    positive = greater(x, 0.0)
    wv = reshape(w, _channel_shape(w.shape, len(x.shape)))
    gx = where(positive, dout, mul(dout, wv))
    gw_full = where(positive, zeros_like(dout), mul(dout, x))
    gw = sum_to(gw_full, wv.shape) if len(wv.shape) else _sum_all(gw_full)
    return gx, reshape(gw, w.shape)


def _sum_all(t):
    from .reduction import reduce_sum
    return reduce_sum(t, tuple(range(len(t.shape))), keep_dims=False)


_prelu = defprim("prelu", _prelu_infer, _prelu_kernel, _prelu_bprop, doc="x if x > 0 else weight[c] * x")


def prelu(input, weight):
    """`ops.prelu(input, weight)`: input where positive, weight * input elsewhere, with one slope per
    channel (dim 1; `weight` of length C or 1). At 0 the gradient takes the negative branch."""
    return _prelu(input, weight)


# ------------------------------------------------------------------------------------------------
# glu / softmin (compositions of primitives)
def glu(x, axis=-1):
    """`ops.glu(x, axis=-1)`: a * sigmoid(b), where a and b are the two halves of x along `axis`
    (whose size must be even)."""
    from .shape_extra import split
    C.floating("glu", "x", x)
    if not isinstance(axis, numbers.Integral) or isinstance(axis, bool):
        raise C.OpTypeError("glu", "'axis' to be an int", f"{type(axis).__name__} {axis!r}")
    ax = C.axis("glu", axis, len(x.shape))
    if len(x.shape) == 0 or x.shape[ax] % 2:
        raise C.OpValueError("glu", "an even size along 'axis'", f"shape {tuple(x.shape)}, axis {axis}")
    if x.shape[ax] == 0:                           # two empty halves: an empty result of x's shape
        return mul(x, sigmoid(x))
    a, b = split(x, x.shape[ax] // 2, ax)
    return mul(a, sigmoid(b))


def softmin(x, axis=-1, *, dtype=None):
    """`ops.softmin(x, axis=-1, *, dtype=None)`: softmax(-x) along `axis`."""
    C.tensor("softmin", "x", x)
    return softmax(neg(x), axis, dtype=dtype)


__all__ = ["celu", "glu", "hardshrink", "hardsigmoid", "hardswish", "logsigmoid", "mish", "prelu", "selu",
           "soft_shrink", "softmin", "softshrink", "softsign", "tanhshrink", "threshold"]
