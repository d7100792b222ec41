"""Pooling layers with MindSpore's signatures and pad modes: `nn.MaxPool2d`, `nn.AvgPool2d`,
`nn.MaxPool1d`, `nn.AvgPool1d`, `nn.AdaptiveAvgPool2d`, `nn.AdaptiveMaxPool2d`.

pad_mode 'valid': no padding. 'same': output = ceil(L / stride); the padding it needs is split
with the odd element at the bottom/right (TensorFlow's rule); max pooling pads with -inf and
average pooling does not count the padded elements. 'pad': explicit symmetric `padding` (zeros for
average pooling, -inf for max pooling), and only then may `dilation`, `return_indices` and
`ceil_mode` (max pooling) take non-default values - MindSpore rejects them otherwise.
The 1-d pools run the 2-d primitives on the input viewed as (N, C, 1, L).
Inputs are batched (N, C, ...) or unbatched (C, ...).
"""
from __future__ import annotations

import numbers

from ...common.errors import OpTypeError, OpValueError
from ...ops import functional as F
from ...ops.prims.pool_ops import _output_size
from .. import _checks
from ..cell import Cell


def _is_int(v):
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _same_pads(size, kernel, stride):
    out = -(-size // stride)
    total = max((out - 1) * stride + kernel - size, 0)
    return total // 2, total - total // 2


def _positive(cell, name, v, nd):
    """kernel_size / stride: a positive int or a tuple of nd (or 1) positive ints -> nd-tuple."""
    if _is_int(v) and v > 0:
        return (int(v),) * nd
    if isinstance(v, tuple) and len(v) in (1, nd) and all(_is_int(e) and e > 0 for e in v):
        return tuple(int(e) for e in v) * (nd if len(v) == 1 else 1)
    if nd == 2 and isinstance(v, tuple) and len(v) == 4 and all(_is_int(e) and e > 0 for e in v):
        return (int(v[2]), int(v[3]))                # MindSpore's (1, 1, h, w) form
    if not _is_int(v) and not isinstance(v, tuple):
        raise OpTypeError(cell, f"'{name}' as an int or a tuple", f"{type(v).__name__} {v!r}")
    raise OpValueError(cell, f"'{name}' as a positive int or a tuple of {nd} positive ints", repr(v))


def _symmetric(cell, name, v, nd, minimum=0):
    """padding / dilation in 'pad' mode: an int or a tuple of 1 or nd ints -> nd-tuple."""
    if _is_int(v):
        v = (v,)
    if not isinstance(v, (tuple, list)) or not all(_is_int(e) for e in v):
        raise OpTypeError(cell, f"'{name}' as an int or a tuple of ints", repr(v))
    if len(v) not in (1, nd):
        raise OpValueError(cell, f"'{name}' as an int or a tuple of 1{'' if nd == 1 else f' or {nd}'} ints", repr(v))
    if min(v) < minimum:
        raise OpValueError(cell, f"'{name}' values >= {minimum}", repr(v))
    return tuple(int(e) for e in v) * (nd if len(v) == 1 else 1)


class _Pool(Cell):
    """kernel_size, stride and pad_mode, checked as MindSpore's _PoolNd checks them."""

    _nd = 2

    def __init__(self, kernel_size, stride, pad_mode, data_format="NCHW"):
        super().__init__()
        name = type(self).__name__
        if not isinstance(pad_mode, str):
            raise OpTypeError(name, "'pad_mode' to be a str", type(pad_mode).__name__)
        self.pad_mode = _checks.one_of(name, "pad_mode", pad_mode.upper(), ("VALID", "SAME", "PAD"))
        if data_format not in ("NCHW", "NHWC"):
            raise OpValueError(name, "data_format in ['NCHW', 'NHWC']", repr(data_format))
        if data_format == "NHWC":
            raise OpValueError(name, "data_format 'NCHW' (MindSpore supports 'NHWC' only on GPU)", repr(data_format))
        self.format = data_format
        if self._nd == 1:                              # MaxPool1d / AvgPool1d: plain ints
            for arg, v in (("kernel_size", kernel_size), ("stride", stride)):
                if not _is_int(v):
                    raise OpTypeError(name, f"'{arg}' to be an int", f"{type(v).__name__} {v!r}")
        self.kernel_size = _positive(name, "kernel_size", kernel_size, self._nd)
        self.stride = _positive(name, "stride", stride, self._nd)

    def _batched(self, x):
        """x as (N, C, H, W) (1-d pools: (N, C, 1, L)) and how to undo that on the output."""
        name = type(self).__name__
        _checks.tensor_input(name, x)
        ranks = (self._nd + 1, self._nd + 2)
        if x.ndim not in ranks:
            raise OpValueError(name, f"an input of rank {ranks[0]} or {ranks[1]}", f"shape {tuple(x.shape)}")
        shape = tuple(x.shape)
        full = shape if x.ndim == ranks[1] else (1,) + shape
        if self._nd == 1:
            full = full[:2] + (1,) + full[2:]
        return F.reshape(x, full) if full != shape else x, shape

    @staticmethod
    def _restore(y, in_shape, nd):
        """Undo `_batched` on an output (N, C, OH, OW)."""
        out = tuple(y.shape[2:]) if nd == 2 else (y.shape[3],)
        want = tuple(in_shape[:-nd]) + out
        return F.reshape(y, want) if want != tuple(y.shape) else y

    def _same(self, x):
        """(top, bottom, left, right) for 'same' on a 4-d x."""
        kh, kw = (1, self.kernel_size[0]) if self._nd == 1 else self.kernel_size
        sh, sw = (1, self.stride[0]) if self._nd == 1 else self.stride
        return _same_pads(x.shape[2], kh, sh) + _same_pads(x.shape[3], kw, sw)

    def _k2(self, v, fill=1):
        """A per-axis tuple for the 2-d primitive: 1-d pools add the dummy H axis (value `fill`)."""
        return (fill,) + v if self._nd == 1 else v

    def extend_repr(self):
        k = self.kernel_size[0] if self._nd == 1 else self.kernel_size
        s = self.stride[0] if self._nd == 1 else self.stride
        return f"kernel_size={k}, stride={s}, pad_mode={self.pad_mode}"


class _MaxPool(_Pool):
    def __init__(self, kernel_size, stride, pad_mode, padding, dilation, return_indices, ceil_mode,
                 data_format="NCHW"):
        super().__init__(kernel_size, stride, pad_mode, data_format)
        name = type(self).__name__
        self.return_indices = _checks.boolean(name, "return_indices", return_indices)
        self.ceil_mode = _checks.boolean(name, "ceil_mode", ceil_mode)
        if self.pad_mode == "PAD":
            self.padding = _symmetric(name, "padding", padding, self._nd)
            self.dilation = _symmetric(name, "dilation", dilation, self._nd, minimum=1)
        else:
            if padding != 0 or dilation != 1 or return_indices or ceil_mode:
                raise OpValueError(name, "padding, dilation, return_indices and ceil_mode left at their defaults "
                                   "unless pad_mode='pad'", f"pad_mode={pad_mode!r}")
            self.padding, self.dilation = (0,) * self._nd, (1,) * self._nd

    def construct(self, x):
        x4, shape = self._batched(x)
        if self.pad_mode == "PAD":
            out = F.max_pool2d(x4, self._k2(self.kernel_size), self._k2(self.stride), self._k2(self.padding, 0),
                               self._k2(self.dilation), self.return_indices, self.ceil_mode)
            if self.return_indices:
                return self._restore(out[0], shape, self._nd), self._restore(out[1], shape, self._nd)
            return self._restore(out, shape, self._nd)
        if self.pad_mode == "SAME":
            t, b, l, r = self._same(x4)
            if t or b or l or r:
                # TensorFlow's 'same' may pad unevenly: pad with -inf (never the max) explicitly
                x4 = F.pad(x4, (l, r, t, b), "constant", float("-inf"))
        out = F.max_pool2d(x4, self._k2(self.kernel_size), self._k2(self.stride))
        return self._restore(out, shape, self._nd)


class MaxPool2d(_MaxPool):
    """`MaxPool2d(kernel_size=1, stride=1, pad_mode='valid', padding=0, dilation=1,
    return_indices=False, ceil_mode=False, data_format='NCHW')`; input (N, C, H, W) or (C, H, W).
    With return_indices (pad_mode='pad'), also the argmax: Int64 flat indices into each H*W plane."""

    _nd = 2

    def __init__(self, kernel_size=1, stride=1, pad_mode="valid", padding=0, dilation=1, return_indices=False,
                 ceil_mode=False, data_format="NCHW"):
        super().__init__(kernel_size, stride, pad_mode, padding, dilation, return_indices, ceil_mode, data_format)


class MaxPool1d(_MaxPool):
    """`MaxPool1d(kernel_size=1, stride=1, pad_mode='valid', padding=0, dilation=1,
    return_indices=False, ceil_mode=False)`; input (N, C, L) or (C, L)."""

    _nd = 1

    def __init__(self, kernel_size=1, stride=1, pad_mode="valid", padding=0, dilation=1, return_indices=False,
                 ceil_mode=False):
        super().__init__(kernel_size, stride, pad_mode, padding, dilation, return_indices, ceil_mode)


class _AvgPool(_Pool):
    def __init__(self, kernel_size, stride, pad_mode, padding, ceil_mode, count_include_pad, divisor_override,
                 data_format="NCHW"):
        super().__init__(kernel_size, stride, pad_mode, data_format)
        name = type(self).__name__
        self.ceil_mode = _checks.boolean(name, "ceil_mode", ceil_mode)
        self.count_include_pad = _checks.boolean(name, "count_include_pad", count_include_pad)
        if divisor_override is not None and (not _is_int(divisor_override) or divisor_override <= 0):
            raise OpValueError(name, "'divisor_override' > 0 (or None)", repr(divisor_override))
        self.divisor_override = divisor_override
        self.padding = _symmetric(name, "padding", padding, self._nd)
        if self.pad_mode != "PAD" and any(self.padding):
            raise OpValueError(name, "padding=0 unless pad_mode='pad'", f"padding={padding!r}, pad_mode={pad_mode!r}")

    def construct(self, x):
        x4, shape = self._batched(x)
        if self.pad_mode == "SAME":
            pads = self._same(x4)
            include = False                    # 'same' averages only over real elements (TensorFlow)
        else:
            p = self._k2(self.padding, 0)
            pads = (p[0], p[0], p[1], p[1])
            include = self.count_include_pad
        out = F.avg_pool2d(x4, self._k2(self.kernel_size), self._k2(self.stride), pads, self.ceil_mode, include,
                           self.divisor_override or 0)
        return self._restore(out, shape, self._nd)


class AvgPool2d(_AvgPool):
    """`AvgPool2d(kernel_size=1, stride=1, pad_mode='valid', padding=0, ceil_mode=False,
    count_include_pad=True, divisor_override=None, data_format='NCHW')`; input (N, C, H, W) or (C, H, W)."""

    _nd = 2

    def __init__(self, kernel_size=1, stride=1, pad_mode="valid", padding=0, ceil_mode=False,
                 count_include_pad=True, divisor_override=None, data_format="NCHW"):
        super().__init__(kernel_size, stride, pad_mode, padding, ceil_mode, count_include_pad, divisor_override,
                         data_format)


class AvgPool1d(_AvgPool):
    """`AvgPool1d(kernel_size=1, stride=1, pad_mode='valid', padding=0, ceil_mode=False,
    count_include_pad=True)`; input (N, C, L) or (C, L)."""

    _nd = 1

    def __init__(self, kernel_size=1, stride=1, pad_mode="valid", padding=0, ceil_mode=False,
                 count_include_pad=True):
        super().__init__(kernel_size, stride, pad_mode, padding, ceil_mode, count_include_pad, None)


class AdaptiveAvgPool2d(Cell):
    """`AdaptiveAvgPool2d(output_size)`: average pooling to a fixed (OH, OW) output, input
    (N, C, H, W) or (C, H, W); output_size an int or a tuple whose None entries keep the input size.
    `AdaptiveAvgPool2d(1)` is global average pooling (ResNet's head)."""

    def __init__(self, output_size):
        super().__init__()
        _output_size("AdaptiveAvgPool2d", output_size, (1, 1))          # checks the form now
        self.output_size = output_size

    def construct(self, input):
        return F.adaptive_avg_pool2d(input, self.output_size)

    def extend_repr(self):
        return f"output_size={self.output_size}"


class AdaptiveMaxPool2d(Cell):
    """`AdaptiveMaxPool2d(output_size, return_indices=False)`: max pooling to a fixed output size
    (windows as AdaptiveAvgPool2d's); with return_indices, also the Int64 argmax."""

    def __init__(self, output_size, return_indices=False):
        super().__init__()
        _output_size("AdaptiveMaxPool2d", output_size, (1, 1))
        self.output_size = output_size
        self.return_indices = _checks.boolean("AdaptiveMaxPool2d", "return_indices", return_indices)

    def construct(self, input):
        return F.adaptive_max_pool2d(input, self.output_size, self.return_indices)

    def extend_repr(self):
        return f"output_size={self.output_size}, return_indices={self.return_indices}"
