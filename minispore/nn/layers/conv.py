"""`nn.Conv2d`, `nn.Conv1d` and `nn.Conv2dTranspose` with MindSpore 2.3 signatures and parameters.

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
from ...common.errors import OpTypeError, OpValueError
from ...common.initializer import HeUniform, Uniform, _calculate_fan_in_and_fan_out, initializer
from ...common.tensor import Parameter, Tensor
from ...ops import functional as F
from ...ops._check import int_attr
from ...ops.prims.conv_ops import _same_pads, conv_transpose
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


def _weight_and_bias(cell, shape, weight_init, bias_init, has_bias, dtype):
    """MindSpore's _Conv parameters: weight HeUniform(sqrt(5)) by default, bias U(+-1/sqrt(fan_in))
    with fan_in from the weight's shape[1:] (for a transposed conv: out_channels / group * kernel)."""
    if isinstance(weight_init, Tensor) and tuple(weight_init.shape) != tuple(shape):
        raise OpValueError(type(cell).__name__, f"weight_init of shape {tuple(shape)}", f"shape {tuple(weight_init.shape)}")
    cell.weight = Parameter(initializer(HeUniform(math.sqrt(5)) if weight_init is None else weight_init, shape, dtype),
                            name="weight")
    cell.bias = None
    if has_bias:
        if bias_init is None:
            fan_in, _ = _calculate_fan_in_and_fan_out(shape)
            bias_init = Uniform(1 / math.sqrt(fan_in))
        cell.bias = Parameter(initializer(bias_init, [cell.out_channels], dtype),
                              name="bias")



def _channels_and_group(cell, in_channels, out_channels, group):
    cin = _checks.positive_int(cell, "in_channels", in_channels)
    cout = _checks.positive_int(cell, "out_channels", out_channels)
    group = _checks.positive_int(cell, "group", group)
    if cin % group or cout % group:
        raise OpValueError(cell, f"in_channels and out_channels divisible by group ({group})",
                           f"in_channels={in_channels}, out_channels={out_channels}")
    return cin, cout, group


class Conv1d(Cell):
    """`Conv1d(in_channels, out_channels, kernel_size, stride=1, pad_mode='same', padding=0,
    dilation=1, group=1, has_bias=False, weight_init=None, bias_init=None, dtype=float32)`.

    Input (N, C_in, L). As in MindSpore, the weight is 4-d, (out_channels, in_channels / group,
    1, kernel_size), and the layer is a Conv2d over the input viewed as (N, C_in, 1, L); kernel_size,
    stride, padding (both ends, pad_mode='pad') and dilation are plain ints.
    """

    _transposed = False

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, pad_mode="same", padding=0, dilation=1,
                 group=1, has_bias=False, weight_init=None, bias_init=None, dtype=mstype.float32):
        super().__init__()
        name = "Conv1d"
        k = int_attr(name, "kernel_size", kernel_size, 1)
        s = int_attr(name, "stride", stride, 1)
        p = int_attr(name, "padding", padding, 0)
        d = int_attr(name, "dilation", dilation, 1)
        self.in_channels, self.out_channels, self.group = _channels_and_group(name, in_channels, out_channels, group)
        self.pad_mode = _checks.one_of(name, "pad_mode", pad_mode, ("valid", "same", "pad"))
        if self.pad_mode != "pad" and p:
            raise OpValueError(name, "padding=0 unless pad_mode='pad'", f"padding={padding!r}, pad_mode={pad_mode!r}")
        self.kernel_size, self.stride, self.dilation = (1, k), (1, s), (1, d)
        self.padding = (0, 0, p, p)
        self.has_bias = _checks.boolean(name, "has_bias", has_bias)
        if isinstance(weight_init, Tensor) and weight_init.ndim == 3:        # (out, in / group, k) -> 4-d
            weight_init = F.expand_dims(weight_init, 2)
        _weight_and_bias(self, (self.out_channels, self.in_channels // self.group, 1, k), weight_init, bias_init,
                         self.has_bias, dtype)

    def construct(self, x):
        _checks.tensor_input("Conv1d", x)
        if x.ndim != 3 or x.shape[1] != self.in_channels:
            raise OpValueError("Conv1d", f"an (N, C_in, L) input with C_in = in_channels ({self.in_channels})",
                               f"shape {tuple(x.shape)}")
        n, c, length = x.shape
        y = F.conv2d(F.reshape(x, (n, c, 1, length)), self.weight, self.bias, self.stride, self.pad_mode,
                     self.padding, self.dilation, self.group)
        return F.reshape(y, (n, self.out_channels, y.shape[3]))

    def extend_repr(self):
        return (f"input_channels={self.in_channels}, output_channels={self.out_channels}, "
                f"kernel_size={self.kernel_size}, stride={self.stride}, pad_mode={self.pad_mode}, "
                f"padding={self.padding}, dilation={self.dilation}, group={self.group}, has_bias={self.has_bias}")


def _deconv_length(mode, size, kernel, stride, dilation, pads):
    """MindSpore's output length of a transposed convolution per pad_mode."""
    k_eff = (kernel - 1) * dilation + 1
    if mode == "valid":
        return size * stride + max(k_eff - stride, 0)
    if mode == "same":
        return size * stride
    return size * stride - pads + k_eff - stride


class Conv2dTranspose(Cell):
    """`Conv2dTranspose(in_channels, out_channels, kernel_size, stride=1, pad_mode='same', padding=0,
    output_padding=0, dilation=1, group=1, has_bias=False, weight_init=None, bias_init=None,
    dtype=float32)`: the transposed ("de-") convolution, the input gradient of a Conv2d.

    Weight (in_channels, out_channels / group, kh, kw). Output size per axis (L the input's):
    'same' L * stride; 'valid' L * stride + max(k_eff - stride, 0); 'pad'
    L * stride - (pad_lo + pad_hi) + k_eff - stride, with k_eff = dilation * (k - 1) + 1.
    `output_padding` (pad_mode='pad' only, < max(stride, dilation)) appends that many rows/columns
    of zeros at the bottom/right of the result, after the bias, as MindSpore does.
    """

    _transposed = True

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, pad_mode="same", padding=0, output_padding=0,
                 dilation=1, group=1, has_bias=False, weight_init=None, bias_init=None, dtype=mstype.float32):
        super().__init__()
        name = "Conv2dTranspose"
        self.in_channels, self.out_channels, self.group = _channels_and_group(name, in_channels, out_channels, group)
        self.kernel_size = _checks.int_pair(name, "kernel_size", kernel_size)
        self.stride = _checks.int_pair(name, "stride", stride)
        self.dilation = _checks.int_pair(name, "dilation", dilation)
        self.pad_mode = _checks.one_of(name, "pad_mode", pad_mode, ("valid", "same", "pad"))
        if isinstance(padding, numbers.Integral) and not isinstance(padding, bool) and padding >= 0:
            self.padding = (int(padding),) * 4
        elif isinstance(padding, tuple) and len(padding) == 4 and all(
                isinstance(p, numbers.Integral) and not isinstance(p, bool) and p >= 0 for p in padding):
            self.padding = tuple(int(p) for p in padding)
        else:
            raise OpValueError(name, "padding as a non-negative int or a tuple of 4 (top, bottom, left, right)",
                               repr(padding))
        if self.pad_mode != "pad" and any(self.padding):
            raise OpValueError(name, "padding=0 unless pad_mode='pad'", f"padding={padding!r}, pad_mode={pad_mode!r}")
        if isinstance(output_padding, numbers.Integral) and not isinstance(output_padding, bool):
            self.output_padding = (int(output_padding),) * 2
        elif isinstance(output_padding, tuple) and len(output_padding) == 2 and all(
                isinstance(p, numbers.Integral) for p in output_padding):
            self.output_padding = tuple(int(p) for p in output_padding)
        else:
            raise OpTypeError(name, "output_padding as an int or a tuple of 2 ints", repr(output_padding))
        self.has_bias = _checks.boolean(name, "has_bias", has_bias)
        _weight_and_bias(self, (self.in_channels, self.out_channels // self.group) + self.kernel_size, weight_init,
                         bias_init, self.has_bias, dtype)

    def _check_output_padding(self):
        name = "Conv2dTranspose"
        for i, axis in enumerate("hw"):
            op = self.output_padding[i]
            if op < 0 or op >= max(self.stride[i], self.dilation[i]):
                raise OpValueError(name, f"output_padding[{i}] in [0, max(stride_{axis}, dilation_{axis}))",
                                   repr(self.output_padding))
        if self.pad_mode != "pad" and any(self.output_padding):
            raise OpValueError(name, "output_padding=0 unless pad_mode='pad'", f"output_padding={self.output_padding}")

    def construct(self, x):
        name = "Conv2dTranspose"
        _checks.tensor_input(name, x)
        if x.ndim != 4 or x.shape[1] != self.in_channels:
            raise OpValueError(name, f"an (N, C_in, H, W) input with C_in = in_channels ({self.in_channels})",
                               f"shape {tuple(x.shape)}")
        self._check_output_padding()
        pt, pb, pl, pr = self.padding
        out_hw = tuple(_deconv_length(self.pad_mode, x.shape[2 + i], self.kernel_size[i], self.stride[i],
                                      self.dilation[i], (pt + pb, pl + pr)[i]) for i in range(2))
        if self.pad_mode == "same":
            pads = tuple(p for i in range(2) for p in _same_pads(out_hw[i], self.kernel_size[i], self.stride[i],
                                                                  self.dilation[i]))
        else:
            pads = self.padding
        y = conv_transpose(name, x, self.weight, out_hw, self.stride, pads, self.dilation, self.group)
        if self.has_bias:
            y = y + F.reshape(self.bias, (1, self.out_channels, 1, 1))
        oph, opw = self.output_padding
        if oph or opw:
            y = F.pad(y, (0, opw, 0, oph))
        return y

    def extend_repr(self):
        return (f"input_channels={self.in_channels}, output_channels={self.out_channels}, "
                f"kernel_size={self.kernel_size}, stride={self.stride}, pad_mode={self.pad_mode}, "
                f"padding={self.padding}, dilation={self.dilation}, group={self.group}, has_bias={self.has_bias}")
