"""Class-style convolution, pooling and loss operators as the model zoo calls them:
`Conv2D(out_channel, kernel_size, ...)(x, weight)`, `MaxPool(kernel_size, strides, pad_mode)(x)`,
`AvgPool(...)`, `SmoothL1Loss(beta, reduction)(logits, labels)`, `L2Loss()(x)`.

Each validates MindSpore's constructor attributes once and calls the functional op (`ops.conv2d`,
`ops.max_pool2d`, `ops.avg_pool2d`, `ops.smooth_l1_loss`), so the kernels and gradients are those
primitives'. MindSpore's spellings are kept: `pad_mode` in any case ('same' / 'SAME'), `kernel_size`
and `strides` as an int, a pair or the 4-tuple (1, 1, h, w); `pad` for Conv2D as an int or
(top, bottom, left, right).

pad_mode 'same' gives ceil(size / stride) outputs; the padding it needs is split with the odd
element at the bottom/right (TensorFlow's rule, MindSpore's too). Max pooling pads with -inf;
average pooling divides by the number of real elements in each window.
"""
from __future__ import annotations

import numbers

from ...common import dtype as mstype
from ...common.errors import OpTypeError, OpValueError
from ...common.tensor import Tensor
from .. import functional as F
from .base import Primitive, check_float, check_int, check_one_of, prim_attr_register


def _is_int(v):
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _pair(op, arg, v, allow_four=True):
    """An int, a pair, or MindSpore's (1, 1, h, w) -> (h, w) of positive ints."""
    if _is_int(v):
        v = (v, v)
    if isinstance(v, (tuple, list)) and all(_is_int(e) for e in v):
        if len(v) == 2:
            out = tuple(int(e) for e in v)
        elif len(v) == 4 and allow_four:
            out = (int(v[2]), int(v[3]))
        else:
            out = None
        if out is not None and min(out) > 0:
            return out
        raise OpValueError(op, f"'{arg}' as a positive int, a pair of them{' or (1, 1, h, w)' if allow_four else ''}",
                           repr(v))
    raise OpTypeError(op, f"'{arg}' to be an int or a tuple of ints", f"{type(v).__name__} {v!r}")


def _same_pads(size, kernel, stride, dilation=1):
    out = -(-size // stride)
    total = max((out - 1) * stride + (kernel - 1) * dilation + 1 - size, 0)
    return total // 2, total - total // 2


def _pad_mode(op, v, allowed):
    if not isinstance(v, str):
        raise OpTypeError(op, "'pad_mode' to be a str", f"{type(v).__name__} {v!r}")
    return check_one_of(op, "pad_mode", v.lower(), allowed)


def _nchw(op, x):
    if not isinstance(x, Tensor):
        raise OpTypeError(op, "'x' to be a Tensor", type(x).__name__)
    if x.ndim != 4:
        raise OpValueError(op, "a 4-d (N, C, H, W) input", f"shape {tuple(x.shape)}")


def _data_format(op, v):
    check_one_of(op, "data_format", v, ("NCHW", "NHWC"))
    if v == "NHWC":
        raise OpValueError(op, "data_format 'NCHW' (MindSpore runs 'NHWC' only on GPU)", repr(v))


# ------------------------------------------------------------------------------------------------
class Conv2D(Primitive):
    """`Conv2D(out_channel, kernel_size, mode=1, pad_mode='valid', pad=0, stride=1, dilation=1,
    group=1, data_format='NCHW')(x, weight)`: 2-D cross-correlation, no bias. `weight` is
    (out_channel, C / group, kh, kw)."""

    @prim_attr_register
    def __init__(self, out_channel, kernel_size, mode=1, pad_mode="valid", pad=0, stride=1, dilation=1, group=1,
                 data_format="NCHW"):
        op = self.name
        check_int(op, "out_channel", out_channel, minimum=1)
        self._kernel = _pair(op, "kernel_size", kernel_size, allow_four=False)
        if mode != 1:
            raise OpValueError(op, "'mode' = 1", repr(mode))
        self._pad_mode = _pad_mode(op, pad_mode, ("valid", "same", "pad"))
        if _is_int(pad):
            pads = (int(pad),) * 4
        elif isinstance(pad, (tuple, list)) and len(pad) == 4 and all(_is_int(p) for p in pad):
            pads = tuple(int(p) for p in pad)
        else:
            raise OpTypeError(op, "'pad' as an int or a tuple of 4 ints (top, bottom, left, right)", repr(pad))
        if min(pads) < 0:
            raise OpValueError(op, "'pad' values >= 0", repr(pad))
        if self._pad_mode != "pad" and any(pads):
            raise OpValueError(op, "'pad' zero unless pad_mode='pad'", f"pad={pad!r}, pad_mode={pad_mode!r}")
        self._pads = pads
        self._stride = _pair(op, "stride", stride)
        self._dilation = _pair(op, "dilation", dilation)
        check_int(op, "group", group, minimum=1)
        if out_channel % group:
            raise OpValueError(op, f"'out_channel' divisible by 'group' ({group})", repr(out_channel))
        _data_format(op, data_format)

    def __call__(self, x, weight):
        op = self.name
        _nchw(op, x)
        if not isinstance(weight, Tensor) or weight.ndim != 4:
            raise OpValueError(op, "a 4-d weight (out_channel, C / group, kh, kw)",
                               f"{type(weight).__name__} of shape {getattr(weight, 'shape', None)}")
        want = (self.out_channel, x.shape[1] // self.group) + self._kernel
        if tuple(weight.shape) != want or x.shape[1] % self.group:
            raise OpValueError(op, f"a weight of shape {want} for {x.shape[1]} input channels, group {self.group}",
                               f"shape {tuple(weight.shape)}")
        if self._pad_mode == "same":
            kh, kw = self._kernel
            (sh, sw), (dh, dw) = self._stride, self._dilation
            pads = _same_pads(x.shape[2], kh, sh, dh) + _same_pads(x.shape[3], kw, sw, dw)
        else:
            pads = self._pads
        return F.conv2d(x, weight, None, self._stride, "pad" if any(pads) else "valid",
                        pads if any(pads) else 0, self._dilation, self.group)


class _Pool(Primitive):
    """kernel_size / strides / pad_mode ('valid' | 'same') / data_format, as MindSpore's _Pool."""

    @prim_attr_register
    def __init__(self, kernel_size=1, strides=1, pad_mode="valid", data_format="NCHW"):
        op = self.name
        self._kernel = _pair(op, "kernel_size", kernel_size)
        self._stride = _pair(op, "strides", strides)
        self._pad_mode = _pad_mode(op, pad_mode, ("valid", "same"))
        _data_format(op, data_format)

    def _same(self, x):
        (kh, kw), (sh, sw) = self._kernel, self._stride
        return _same_pads(x.shape[2], kh, sh) + _same_pads(x.shape[3], kw, sw)


class MaxPool(_Pool):
    """`MaxPool(kernel_size=1, strides=1, pad_mode='valid', data_format='NCHW')(x)`: the maximum of
    each window of a 4-d input."""

    def __call__(self, x):
        _nchw(self.name, x)
        if self._pad_mode == "same":
            t, b, l, r = self._same(x)
            if t or b or l or r:          # -inf is never the maximum, so padding cannot win
                x = F.pad(x, (l, r, t, b), "constant", float("-inf"))
        return F.max_pool2d(x, self._kernel, self._stride)


class AvgPool(_Pool):
    """`AvgPool(kernel_size=1, strides=1, pad_mode='valid', data_format='NCHW')(x)`: the mean of
    each window; with 'same', of the real (unpadded) elements of each window."""

    def __call__(self, x):
        _nchw(self.name, x)
        pads = self._same(x) if self._pad_mode == "same" else 0
        return F.avg_pool2d(x, self._kernel, self._stride, pads, False, False, 0)


# ------------------------------------------------------------------------------------------------
class SmoothL1Loss(Primitive):
    """`SmoothL1Loss(beta=1.0, reduction='none')(logits, labels)`: 0.5 d^2 / beta where |d| < beta,
    |d| - 0.5 beta elsewhere (d = logits - labels)."""

    @prim_attr_register
    def __init__(self, beta=1.0, reduction="none"):
        check_float(self.name, "beta", beta, lo=0.0, lo_open=True)
        check_one_of(self.name, "reduction", reduction, ("none", "mean", "sum"))

    def __call__(self, logits, labels):
        return F.smooth_l1_loss(logits, labels, float(self.beta), self.reduction)


class L2Loss(Primitive):
    """`L2Loss()(x)`: sum(x ** 2) / 2, a 0-d tensor of x's (floating) dtype."""

    @prim_attr_register
    def __init__(self):
        pass

    def __call__(self, x):
        if not isinstance(x, Tensor):
            raise OpTypeError(self.name, "'x' to be a Tensor", type(x).__name__)
        if x.dtype not in (mstype.float16, mstype.float32, mstype.float64):
            raise OpTypeError(self.name, "'x' of dtype Float16, Float32 or Float64", str(x.dtype))
        return F.sum(F.square(x)) * 0.5


__all__ = ["Conv2D", "MaxPool", "AvgPool", "SmoothL1Loss", "L2Loss"]
