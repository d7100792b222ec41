"""`nn.MaxPool2d` and `nn.AvgPool2d` with MindSpore's pad modes.

pad_mode 'valid': no padding. 'same': output = ceil(H / stride); the padding it needs is split
with the odd pixel at the bottom/right (TensorFlow's rule), and for average pooling the padded
zeros are not counted in the mean. 'pad': explicit `padding`.
Inputs are (N, C, H, W) or (C, H, W).
"""
from __future__ import annotations

import numbers

from ...common.errors import OpValueError
from ...ops import functional as F
from .. import _checks
from ..cell import Cell


def _same_pads(size, kernel, stride):
    out = -(-size // stride)
    total = max((out - 1) * stride + kernel - size, 0)
    return total // 2, total - total // 2


class _Pool2d(Cell):
    _name = "Pool2d"

    def __init__(self, kernel_size, stride, pad_mode, padding, ceil_mode):
        super().__init__()
        name = self._name
        self.kernel_size = _checks.int_pair(name, "kernel_size", kernel_size, allow_four=True)
        self.stride = _checks.int_pair(name, "stride", stride, allow_four=True)
        mode = pad_mode.lower() if isinstance(pad_mode, str) else pad_mode
        self.pad_mode = _checks.one_of(name, "pad_mode", mode, ("valid", "same", "pad"))
        if isinstance(padding, numbers.Integral) and not isinstance(padding, bool):
            pads = (int(padding),) * 4
        elif isinstance(padding, (tuple, list)) and len(padding) == 2:
            pads = (int(padding[0]),) * 2 + (int(padding[1]),) * 2
        elif isinstance(padding, (tuple, list)) and len(padding) == 4:
            pads = tuple(int(p) for p in padding)
        else:
            raise OpValueError(name, "padding as an int or a tuple of 2 or 4 ints", repr(padding))
        if any(p < 0 for p in pads):
            raise OpValueError(name, "padding >= 0", repr(padding))
        if self.pad_mode != "pad" and any(pads):
            raise OpValueError(name, "padding=0 unless pad_mode='pad'", f"padding={padding!r}, pad_mode={pad_mode!r}")
        self.padding = pads                      # (top, bottom, left, right)
        self.ceil_mode = bool(ceil_mode)

    def _prepare(self, x):
        _checks.tensor_input(self._name, x)
        if x.ndim not in (3, 4):
            raise OpValueError(self._name, "a (N, C, H, W) or (C, H, W) input", f"shape {tuple(x.shape)}")
        squeeze = x.ndim == 3
        if squeeze:
            x = F.reshape(x, (1,) + tuple(x.shape))
        if self.pad_mode == "same":
            pads = (_same_pads(x.shape[2], self.kernel_size[0], self.stride[0])
                    + _same_pads(x.shape[3], self.kernel_size[1], self.stride[1]))
        else:
            pads = self.padding
        return x, pads, squeeze

    @staticmethod
    def _finish(y, squeeze):
        return F.reshape(y, tuple(y.shape[1:])) if squeeze else y

    def extend_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, pad_mode={self.pad_mode.upper()}"


class MaxPool2d(_Pool2d):
    """`MaxPool2d(kernel_size=1, stride=1, pad_mode='valid', padding=0, dilation=1,
    return_indices=False, ceil_mode=False, data_format='NCHW')`."""

    _name = "MaxPool2d"

    def __init__(self, kernel_size=1, stride=1, pad_mode="valid", padding=0, dilation=1, return_indices=False,
                 ceil_mode=False, data_format="NCHW"):
        super().__init__(kernel_size, stride, pad_mode, padding, ceil_mode)
        self.dilation = _checks.int_pair("MaxPool2d", "dilation", dilation, allow_four=True)
        self.return_indices = _checks.boolean("MaxPool2d", "return_indices", return_indices)
        if data_format != "NCHW":
            raise OpValueError("MaxPool2d", "data_format 'NCHW'", repr(data_format))

    def construct(self, x):
        x, (t, b, l, r), squeeze = self._prepare(x)
        if t != b or l != r:
            if self.return_indices:
                raise OpValueError("MaxPool2d", "symmetric padding when return_indices=True",
                                   f"pads (top, bottom, left, right) = {(t, b, l, r)}")
            # uneven padding: pad with -inf explicitly (never the max), then pool without padding
            x = F.pad(x, (l, r, t, b), "constant", float("-inf"))
            t = b = l = r = 0
        out = F.max_pool2d(x, self.kernel_size, self.stride, (t, l), self.dilation, self.return_indices,
                           self.ceil_mode)
        if self.return_indices:
            return self._finish(out[0], squeeze), self._finish(out[1], squeeze)
        return self._finish(out, squeeze)


class AvgPool2d(_Pool2d):
    """`AvgPool2d(kernel_size=1, stride=1, pad_mode='valid', padding=0, ceil_mode=False,
    count_include_pad=True, divisor_override=None, data_format='NCHW')`."""

    _name = "AvgPool2d"

    def __init__(self, kernel_size=1, stride=1, pad_mode="valid", padding=0, ceil_mode=False,
                 count_include_pad=True, divisor_override=None, data_format="NCHW"):
        super().__init__(kernel_size, stride, pad_mode, padding, ceil_mode)
        self.count_include_pad = _checks.boolean("AvgPool2d", "count_include_pad", count_include_pad)
        self.divisor_override = divisor_override
        if data_format != "NCHW":
            raise OpValueError("AvgPool2d", "data_format 'NCHW'", repr(data_format))

    def construct(self, x):
        x, pads, squeeze = self._prepare(x)
        # 'same' averages only over real pixels (TensorFlow/MindSpore semantics)
        include = self.count_include_pad if self.pad_mode == "pad" else False
        out = F.avg_pool2d(x, self.kernel_size, self.stride, pads, self.ceil_mode, include,
                           self.divisor_override or 0)
        return self._finish(out, squeeze)
