"""`nn.Flatten`, `nn.Identity` and the small shape/math cells of MindSpore's nn.layer.basic and
nn.layer.math (Unflatten, PixelShuffle/Unshuffle, Upsample, Roll, Tril/Triu, OneHot, MatMul, Norm,
Moments, Range), each a thin cell over minispore.ops."""
from __future__ import annotations

import numbers

import numpy as np

from ...common import dtype as mstype
from ...common.errors import OpTypeError, OpValueError
from ...common.tensor import Tensor
from ...ops import functional as F
from .. import _checks
from ..cell import Cell


class Flatten(Cell):
    """Merge the dims `start_dim..end_dim` into one: (N, C, H, W) -> (N, C*H*W) by default."""

    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        for name, v in (("start_dim", start_dim), ("end_dim", end_dim)):
            if not isinstance(v, numbers.Integral) or isinstance(v, bool):
                raise OpTypeError("Flatten", f"'{name}' to be an int", repr(v))
        self.start_dim, self.end_dim = int(start_dim), int(end_dim)

    def construct(self, x):
        _checks.tensor_input("Flatten", x)
        shape = tuple(x.shape)
        n = max(len(shape), 1)
        s = self.start_dim + n if self.start_dim < 0 else self.start_dim
        e = self.end_dim + n if self.end_dim < 0 else self.end_dim
        if not (0 <= s < n and 0 <= e < n) or s > e:
            raise OpValueError("Flatten",
                               f"0 <= start_dim <= end_dim < {n} (after wrapping) for a {len(shape)}-d input",
                               f"start_dim={self.start_dim}, end_dim={self.end_dim}")
        if not shape:
            return F.reshape(x, (1,))
        merged = 1
        for d in shape[s:e + 1]:
            merged *= d
        return F.reshape(x, shape[:s] + (merged,) + shape[e + 1:])

    def extend_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Identity(Cell):
    """Returns its input unchanged (a placeholder, e.g. the gradient reducer of a single device).
    Like MindSpore's (and PyTorch's), it accepts and ignores any constructor arguments, so it can
    stand in for the layer it replaces."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def construct(self, x):
        return x


# -- shape cells ----------------------------------------------------------------------------------------

def _is_int(v):
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


class Unflatten(Cell):
    """Split dim `axis` into `unflattened_size`: Unflatten(1, (2, 5)) maps (2, 10, 5) -> (2, 2, 5, 5).
    (MindSpore 2.10 still calls the argument `axis`; it becomes `dim` after 2.9's warning.)"""

    def __init__(self, axis, unflattened_size):
        super().__init__()
        if not _is_int(axis):
            raise OpTypeError("Unflatten", "'axis' to be an int", f"{type(axis).__name__} {axis!r}")
        if not isinstance(unflattened_size, (list, tuple)):
            raise OpTypeError("Unflatten", "'unflattened_size' as a tuple or list of ints",
                              type(unflattened_size).__name__)
        self.axis = int(axis)
        self.unflattened_size = tuple(unflattened_size)

    def construct(self, input_x):
        _checks.tensor_input("Unflatten", input_x)
        shape = tuple(input_x.shape)
        n = len(shape)
        if not -n <= self.axis < n:
            raise OpValueError("Unflatten", f"'axis' in [{-n}, {n})", repr(self.axis))
        # MindSpore slices `shape[:axis] + size + shape[axis + 1:]` literally (axis -1 keeps nothing after)
        tail = shape[self.axis + 1:] if self.axis != -1 else ()
        new_shape = shape[:self.axis] + self.unflattened_size + tail
        return F.reshape(input_x, new_shape)

    def extend_repr(self):
        return f"axis={self.axis}, unflattened_size={self.unflattened_size}"


def _check_factor(cell, name, v):
    if not _is_int(v):
        raise OpTypeError(cell, f"'{name}' to be an int", f"{type(v).__name__} {v!r}")
    if v <= 0:
        raise OpValueError(cell, f"'{name}' > 0", repr(v))
    return int(v)


class PixelShuffle(Cell):
    """(*, C * r^2, H, W) -> (*, C, H * r, W * r): the sub-pixel rearrangement of ESPCN upsampling.
    Channel c * r^2 + i * r + j lands at output pixel (h * r + i, w * r + j) of channel c."""

    def __init__(self, upscale_factor):
        super().__init__()
        self.upscale_factor = _check_factor("PixelShuffle", "upscale_factor", upscale_factor)

    def construct(self, input):
        _checks.tensor_input("PixelShuffle", input, "input")
        r = self.upscale_factor
        shape = tuple(input.shape)
        if len(shape) < 3:
            raise OpValueError("PixelShuffle", "an input of rank >= 3", f"shape {shape}")
        *lead, c, h, w = shape
        if c % (r * r):
            raise OpValueError("PixelShuffle", f"channels divisible by upscale_factor^2 = {r * r}", f"{c}")
        k = len(lead)
        x = F.reshape(input, tuple(lead) + (c // (r * r), r, r, h, w))
        x = F.transpose(x, tuple(range(k)) + (k, k + 3, k + 1, k + 4, k + 2))
        return F.reshape(x, tuple(lead) + (c // (r * r), h * r, w * r))


class PixelUnshuffle(Cell):
    """(*, C, H * r, W * r) -> (*, C * r^2, H, W): the inverse of PixelShuffle."""

    def __init__(self, downscale_factor):
        super().__init__()
        self.downscale_factor = _check_factor("PixelUnshuffle", "downscale_factor", downscale_factor)

    def construct(self, input):
        _checks.tensor_input("PixelUnshuffle", input, "input")
        r = self.downscale_factor
        shape = tuple(input.shape)
        if len(shape) < 3:
            raise OpValueError("PixelUnshuffle", "an input of rank >= 3", f"shape {shape}")
        *lead, c, h, w = shape
        if h % r or w % r:
            raise OpValueError("PixelUnshuffle", f"height and width divisible by downscale_factor={r}", f"{h}x{w}")
        k = len(lead)
        x = F.reshape(input, tuple(lead) + (c, h // r, r, w // r, r))
        x = F.transpose(x, tuple(range(k)) + (k, k + 2, k + 4, k + 1, k + 3))
        return F.reshape(x, tuple(lead) + (c * r * r, h // r, w // r))


class Upsample(Cell):
    """`nn.Upsample(size=None, scale_factor=None, mode='nearest', align_corners=None,
    recompute_scale_factor=None)`: `ops.interpolate` with the arguments fixed at construction."""

    def __init__(self, size=None, scale_factor=None, mode="nearest", align_corners=None, recompute_scale_factor=None):
        super().__init__()
        self.size = size
        self.scale_factor = scale_factor
        self.mode = mode
        self.align_corners = align_corners
        self.recompute_scale_factor = recompute_scale_factor

    def construct(self, x):
        return F.interpolate(x, self.size, self.scale_factor, self.mode, self.align_corners,
                             self.recompute_scale_factor)


class Roll(Cell):
    """`nn.Roll(shift, axis)`: roll by `shift[i]` along `axis[i]` (ints or equal-length lists)."""

    def __init__(self, shift, axis):
        super().__init__()
        for name, v in (("shift", shift), ("axis", axis)):
            if not isinstance(v, (int, tuple, list)) or isinstance(v, bool):
                raise OpTypeError("Roll", f"'{name}' as an int, tuple or list", type(v).__name__)
        shift = list(shift) if isinstance(shift, (tuple, list)) else [shift]
        axis = list(axis) if isinstance(axis, (tuple, list)) else [axis]
        if len(shift) != len(axis):
            raise OpValueError("Roll", "'shift' and 'axis' of the same length", f"{len(shift)} and {len(axis)}")
        if not all(_is_int(v) for v in shift + axis):
            raise OpTypeError("Roll", "int entries in 'shift' and 'axis'", f"shift={shift}, axis={axis}")
        self.shift, self.axis = tuple(shift), tuple(axis)

    def construct(self, input_x):
        _checks.tensor_input("Roll", input_x)
        n = input_x.ndim
        for a in self.axis:
            if not -n <= a < n:
                raise OpValueError("Roll", f"'axis' entries in [{-n}, {n})", repr(a))
        return F.roll(input_x, self.shift, self.axis)


class Tril(Cell):
    """`nn.Tril()(x, k=0)`: zero the entries above the k-th diagonal of the last two dims."""

    def construct(self, x, k=0):
        return F.tril(x, k)


class Triu(Cell):
    """`nn.Triu()(x, k=0)`: zero the entries below the k-th diagonal of the last two dims."""

    def construct(self, x, k=0):
        return F.triu(x, k)


class OneHot(Cell):
    """`nn.OneHot(axis=-1, depth=1, on_value=1.0, off_value=0.0, dtype=float32)`: a one-hot
    encoding of integer indices along a new dim `axis`, in `dtype`."""

    def __init__(self, axis=-1, depth=1, on_value=1.0, off_value=0.0, dtype=mstype.float32):
        super().__init__()
        if not _is_int(axis):
            raise OpTypeError("OneHot", "'axis' to be an int", f"{type(axis).__name__} {axis!r}")
        if axis < -1:
            raise OpValueError("OneHot", "'axis' >= -1", repr(axis))
        self.axis = int(axis)
        self.depth = _checks.non_negative_int("OneHot", "depth", depth)
        self.on_value, self.off_value, self.dtype = on_value, off_value, dtype

    def construct(self, indices):
        on = Tensor(self.on_value, self.dtype)
        off = Tensor(self.off_value, self.dtype)
        return F.one_hot(indices, self.depth, on, off, self.axis)


class MatMul(Cell):
    """`nn.MatMul(transpose_x1=False, transpose_x2=False)` (deprecated in MindSpore for
    ops.matmul): a matmul with optional transposes of the last two dims, broadcasting batch dims."""

    def __init__(self, transpose_x1=False, transpose_x2=False):
        super().__init__()
        self.transpose_x1 = _checks.boolean("MatMul", "transpose_x1", transpose_x1)
        self.transpose_x2 = _checks.boolean("MatMul", "transpose_x2", transpose_x2)

    def construct(self, x1, x2):
        _checks.tensor_input("MatMul", x1, "x1")
        _checks.tensor_input("MatMul", x2, "x2")
        if self.transpose_x1 and x1.ndim >= 2:
            x1 = F.swapaxes(x1, -1, -2)
        if self.transpose_x2 and x2.ndim >= 2:
            x2 = F.swapaxes(x2, -1, -2)
        k1 = x1.shape[-1]
        k2 = x2.shape[0] if x2.ndim == 1 else x2.shape[-2]
        if k1 != k2:
            raise OpValueError("MatMul", "the columns of x1 to equal the rows of x2",
                               f"{k1} and {k2} (shapes {tuple(x1.shape)}, {tuple(x2.shape)})")
        return F.matmul(x1, x2)


class Norm(Cell):
    """`nn.Norm(axis=(), keep_dims=False)`: sqrt(sum(x^2)) over `axis` (() = every dim)."""

    def __init__(self, axis=(), keep_dims=False):
        super().__init__()
        self.keep_dims = _checks.boolean("Norm", "keep_dims", keep_dims)
        if not (_is_int(axis) or (isinstance(axis, tuple) and all(_is_int(a) for a in axis))):
            raise OpTypeError("Norm", "'axis' as an int or a tuple of ints", repr(axis))
        self.axis = axis

    def construct(self, x):
        return F.sqrt(F.reduce_sum(F.square(x), self.axis, self.keep_dims))

    def extend_repr(self):
        return f"axis={self.axis}, keep_dims={self.keep_dims}"


class Moments(Cell):
    """`nn.Moments(axis=None, keep_dims=None)` -> (mean, variance) over `axis` (None = every dim),
    the population variance. The variance is taken around a stop-gradient mean, as MindSpore does;
    the two are mathematically the same gradient since d var / d mean = 0."""

    def __init__(self, axis=None, keep_dims=None):
        super().__init__()
        axis = () if axis is None else axis
        if not (_is_int(axis) or (isinstance(axis, tuple) and all(_is_int(a) for a in axis))):
            raise OpTypeError("Moments", "'axis' as an int or a tuple of ints", repr(axis))
        self.axis = axis
        self.keep_dims = _checks.boolean("Moments", "keep_dims", False if keep_dims is None else keep_dims)

    def construct(self, x):
        _checks.tensor_input("Moments", x)
        if x.dtype not in (mstype.float16, mstype.float32):
            raise OpTypeError("Moments", "a float16 or float32 input", str(x.dtype))
        half = x.dtype == mstype.float16
        if half:
            x = F.cast(x, mstype.float32)
        mean = F.reduce_mean(x, self.axis, True)
        variance = F.reduce_mean(F.square(F.sub(x, F.stop_gradient(mean))), self.axis, True)
        if not self.keep_dims:
            axes = self.axis if isinstance(self.axis, tuple) else (self.axis,)
            axes = axes or tuple(range(x.ndim))
            mean, variance = F.squeeze(mean, axes), F.squeeze(variance, axes)
        if half:
            mean, variance = F.cast(mean, mstype.float16), F.cast(variance, mstype.float16)
        return mean, variance


class Range(Cell):
    """`nn.Range(start, limit=None, delta=1)()`: the constant np.arange(start, limit, delta),
    Float32 when any argument is a float, else Int32 (computed once, at construction)."""

    def __init__(self, start, limit=None, delta=1):
        super().__init__()
        if delta == 0:
            raise OpValueError("Range", "'delta' != 0", repr(delta))
        data = np.arange(start, limit, delta)
        dtype = mstype.float32 if data.dtype == np.float64 else mstype.int32
        self.result_tensor = Tensor(data, dtype)

    def construct(self):
        return self.result_tensor
