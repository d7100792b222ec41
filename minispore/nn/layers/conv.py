"""`nn.Conv2d`: 2-d convolution (cross-correlation) over NCHW images, MindSpore 2.3 signature.

`Conv2d(in_channels, out_channels, kernel_size, stride=1, pad_mode='same', padding=0, dilation=1,
group=1, has_bias=False, weight_init=None, bias_init=None, data_format='NCHW', dtype=float32)`.
Weight (out_channels, in_channels / group, kh, kw). Note MindSpore's defaults: pad_mode 'same'
(output size ceil(H / stride)) and no bias. Default init: HeUniform(sqrt(5)) weight, and bias
U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with fan_in = in_channels / group * kh * kw.
"""
from __future__ import annotations

import math
import numbers

from ...common import dtype as mstype
from ...common.errors import OpValueError
from ...common.initializer import HeUniform, Uniform, _calculate_fan_in_and_fan_out, initializer
from ...common.tensor import Parameter, Tensor
from ...ops import functional as F
from .. import _checks
from ..cell import Cell


def _padding(cell, padding):
    if isinstance(padding, numbers.Integral) and not isinstance(padding, bool):
        if padding < 0:
            raise OpValueError(cell, "padding >= 0", repr(padding))
        return int(padding)
    if isinstance(padding, (tuple, list)) and len(padding) in (2, 4) and all(
            isinstance(p, numbers.Integral) and p >= 0 for p in padding):
        return tuple(int(p) for p in padding)
    raise OpValueError(cell, "padding as an int or a tuple of 2 or 4 non-negative ints", repr(padding))


class Conv2d(Cell):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, pad_mode="same", padding=0, dilation=1,
                 group=1, has_bias=False, weight_init=None, bias_init=None, data_format="NCHW",
                 dtype=mstype.float32):
        super().__init__()
        name = "Conv2d"
        self.in_channels = _checks.positive_int(name, "in_channels", in_channels)
        self.out_channels = _checks.positive_int(name, "out_channels", out_channels)
        self.kernel_size = _checks.int_pair(name, "kernel_size", kernel_size)
        self.stride = _checks.int_pair(name, "stride", stride, allow_four=True)
        self.dilation = _checks.int_pair(name, "dilation", dilation, allow_four=True)
        self.pad_mode = _checks.one_of(name, "pad_mode", pad_mode.lower() if isinstance(pad_mode, str) else pad_mode,
                                       ("same", "valid", "pad"))
        self.padding = _padding(name, padding)
        if self.pad_mode != "pad" and self.padding not in (0, (0, 0), (0, 0, 0, 0)):
            raise OpValueError(name, "padding=0 unless pad_mode='pad'", f"padding={padding!r}, pad_mode={pad_mode!r}")
        self.group = _checks.positive_int(name, "group", group)
        if self.in_channels % self.group or self.out_channels % self.group:
            raise OpValueError(name, f"in_channels and out_channels divisible by group ({group})",
                               f"in_channels={in_channels}, out_channels={out_channels}")
        if data_format != "NCHW":
            raise OpValueError(name, "data_format 'NCHW' (the only layout minispore implements)", repr(data_format))
        self.data_format = data_format
        self.has_bias = _checks.boolean(name, "has_bias", has_bias)
        shape = (self.out_channels, self.in_channels // self.group) + self.kernel_size
        if isinstance(weight_init, Tensor) and tuple(weight_init.shape) != shape:
            raise OpValueError(name, f"weight_init of shape {shape}", f"shape {tuple(weight_init.shape)}")
        if weight_init is None:
            weight_init = HeUniform(math.sqrt(5))
        self.weight = Parameter(initializer(weight_init, shape, dtype), name="weight")
        self.bias = None
        if self.has_bias:
            if bias_init is None:
                fan_in, _ = _calculate_fan_in_and_fan_out(shape)
                bias_init = Uniform(1 / math.sqrt(fan_in))
            self.bias = Parameter(initializer(bias_init, [self.out_channels], dtype), name="bias")

    def construct(self, x):
        _checks.tensor_input("Conv2d", x)
        if x.ndim != 4:
            raise OpValueError("Conv2d", "a 4-d NCHW input", f"shape {tuple(x.shape)}")
        if x.shape[1] != self.in_channels:
            raise OpValueError("Conv2d", f"input channels (dim 1) equal to in_channels ({self.in_channels})",
                               f"shape {tuple(x.shape)}")
        return F.conv2d(x, self.weight, self.bias if self.has_bias else None, self.stride, self.pad_mode,
                        self.padding, self.dilation, self.group)

    def extend_repr(self):
        return (f"input_channels={self.in_channels}, output_channels={self.out_channels}, "
                f"kernel_size={self.kernel_size}, stride={self.stride}, pad_mode={self.pad_mode}, "
                f"padding={self.padding}, dilation={self.dilation}, group={self.group}, "
                f"has_bias={self.has_bias}, weight_init={self.weight.name}, bias_init="
                f"{self.bias.name if self.bias is not None else None}, format={self.data_format}")
