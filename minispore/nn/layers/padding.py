"""Padding cells: `nn.Pad` (MindSpore's per-dim pairs) and the PyTorch-style `ConstantPad*d`,
`ZeroPad2d`, `ReflectionPad*d`, `ReplicationPad*d` (flat tuples, last dim first).

All of them are thin over the one padding primitive, `ops.pad`; what differs is how the padding is
written down and what each constructor accepts:

* `nn.Pad(paddings=((1, 1), (2, 2)), mode="CONSTANT")` lists (before, after) for the *leading* dims
  in order: ((1, 1), (2, 2)) on a 2-d input pads dim 0 by 1 and dim 1 by 2. Modes CONSTANT (zeros),
  REFLECT (mirror without repeating the edge: [1 2 3] -> 2 1 [1 2 3] ...) and SYMMETRIC (mirror
  repeating the edge: [1 2 3] -> 2 1 | 1 2 3 | 3 2).
* the `...Pad1d/2d/3d` cells take an int (same padding on every side) or a flat tuple
  (left, right, top, bottom, front, back), whose first pair pads the *last* dim.
"""
from __future__ import annotations

import numbers

from ...common.errors import OpTypeError, OpValueError
from ...ops import functional as F
from .. import _checks
from ..cell import Cell


def _is_int(v):
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


# -- nn.Pad ------------------------------------------------------------------------------------------

def _symmetric_pad(x, pairs):
    """SYMMETRIC mirror padding along each dim (the edge element repeats), by concatenating flipped
    slices; MindSpore requires each pad <= the dim size."""
    for d, (lo, hi) in enumerate(pairs):
        if lo == 0 and hi == 0:
            continue
        n = x.shape[d]
        parts = []
        if lo:
            parts.append(F.flip(F.narrow(x, d, 0, lo), (d,)))
        parts.append(x)
        if hi:
            parts.append(F.flip(F.narrow(x, d, n - hi, hi), (d,)))
        x = F.concat(parts, d)
    return x


class Pad(Cell):
    """`nn.Pad(paddings, mode="CONSTANT")`: pad the leading `len(paddings)` dims (at most 4) by the
    (before, after) pairs in `paddings`. See the module docstring for the three modes."""

    def __init__(self, paddings, mode="CONSTANT"):
        super().__init__()
        _checks.one_of("Pad", "mode", mode, ("CONSTANT", "REFLECT", "SYMMETRIC"))
        if not isinstance(paddings, tuple):
            raise OpTypeError("Pad", "'paddings' to be a tuple of (before, after) pairs", type(paddings).__name__)
        for item in paddings:
            if not isinstance(item, (tuple, list)) or len(item) != 2:
                raise OpValueError("Pad", "'paddings' of shape (n, 2)", repr(paddings))
            if not all(_is_int(v) for v in item):
                raise OpTypeError("Pad", "int entries in 'paddings'", repr(paddings))
        if len(paddings) > 4:
            raise OpValueError("Pad", "'paddings' for at most 4 dims", f"{len(paddings)} pairs")
        self.mode = mode
        self.paddings = tuple((int(a), int(b)) for a, b in paddings)

    def construct(self, x):
        _checks.tensor_input("Pad", x)
        nd = x.ndim
        if len(self.paddings) != nd:
            raise OpValueError("Pad", f"one (before, after) pair per input dim ({nd})", f"{len(self.paddings)} pairs")
        for d, (lo, hi) in enumerate(self.paddings):
            if lo < 0 or hi < 0:
                raise OpValueError("Pad", "non-negative paddings", repr(self.paddings))
            n = x.shape[d]
            if self.mode == "REFLECT" and (lo >= n or hi >= n):
                raise OpValueError("Pad", f"REFLECT paddings < the dim size ({n} for dim {d})", repr(self.paddings))
            if self.mode == "SYMMETRIC" and (lo > n or hi > n):
                raise OpValueError("Pad", f"SYMMETRIC paddings <= the dim size ({n} for dim {d})",
                                   repr(self.paddings))
        if self.mode == "SYMMETRIC":
            return _symmetric_pad(x, self.paddings)
        flat = tuple(v for pair in reversed(self.paddings) for v in pair)      # ops.pad: last dim first
        return F.pad(x, flat, mode="constant" if self.mode == "CONSTANT" else "reflect")

    def extend_repr(self):
        return f"paddings={self.paddings}, mode={self.mode}"


# -- ConstantPad1d/2d/3d, ZeroPad2d ----------------------------------------------------------------------

class _ConstantPadNd(Cell):
    """Shared constructor: an int pads every side of the last `dims` dims; a tuple of even length
    (at most 2 * dims; exactly 2 for ConstantPad1d) pads from the last dim backwards. Negative pads
    crop, as `ops.pad` does."""

    _dims = 1
    _exact = False

    def __init__(self, padding, value):
        super().__init__()
        name = type(self).__name__
        if _is_int(padding):
            padding = (int(padding),) * (2 * self._dims)
        elif isinstance(padding, tuple):
            if len(padding) % 2:
                raise OpValueError(name, "a 'padding' tuple of even length", f"length {len(padding)}")
            if self._exact and len(padding) != 2 * self._dims:
                raise OpValueError(name, f"a 'padding' tuple of length {2 * self._dims}", f"length {len(padding)}")
            if len(padding) > 2 * self._dims:
                raise OpValueError(name, f"a 'padding' tuple of length <= {2 * self._dims}", f"length {len(padding)}")
            if not all(_is_int(p) for p in padding):
                raise OpTypeError(name, "int entries in 'padding'", repr(padding))
        else:
            raise OpTypeError(name, "'padding' as an int or a tuple", type(padding).__name__)
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise OpTypeError(name, "'value' to be an int or a float", type(value).__name__)
        self.padding = tuple(int(p) for p in padding)
        self.value = value

    def construct(self, x):
        _checks.tensor_input(type(self).__name__, x)
        return F.pad(x, self.padding, mode="constant", value=self.value)

    def extend_repr(self):
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPadNd):
    """Pad the last dim with `value`: `ConstantPad1d((left, right), value)` or an int."""
    _dims, _exact = 1, True


class ConstantPad2d(_ConstantPadNd):
    """Pad the last two dims with `value`: (left, right, top, bottom)."""
    _dims = 2


class ConstantPad3d(_ConstantPadNd):
    """Pad the last three dims with `value`: (left, right, top, bottom, front, back)."""
    _dims = 3


class ZeroPad2d(_ConstantPadNd):
    """ConstantPad2d with value 0."""
    _dims = 2

    def __init__(self, padding):
        super().__init__(padding, 0)


# -- ReflectionPad*d / ReplicationPad*d --------------------------------------------------------------------

class _MirrorPadNd(Cell):
    """Shared constructor: an int or a flat tuple of ints (even length). `_mode` is the `ops.pad`
    mode; reflection also requires non-negative pads at construction (MindSpore checks the sign
    there for ReflectionPad, at call time for ReplicationPad)."""

    _dims = 1
    _mode = "reflect"

    def __init__(self, padding):
        super().__init__()
        name = type(self).__name__
        if _is_int(padding):
            padding = (int(padding),) * (2 * self._dims)
        if not isinstance(padding, tuple):
            raise OpTypeError(name, "'padding' as an int or a tuple", type(padding).__name__)
        if len(padding) % 2:
            raise OpValueError(name, "a 'padding' tuple of even length", f"length {len(padding)}")
        if not all(_is_int(p) for p in padding):
            raise OpTypeError(name, "int entries in 'padding'", repr(padding))
        if self._mode == "reflect" and not all(p >= 0 for p in padding):
            raise OpValueError(name, "'padding' entries >= 0", repr(padding))
        self.padding = tuple(int(p) for p in padding)

    def construct(self, x):
        name = type(self).__name__
        _checks.tensor_input(name, x)
        if not self.padding:
            return x
        if self._mode == "replicate":
            if x.ndim not in (self._dims + 1, self._dims + 2):
                raise OpValueError(name, f"a {self._dims + 1}-d or {self._dims + 2}-d input", f"shape {tuple(x.shape)}")
            if any(p < 0 for p in self.padding):
                raise OpValueError(name, "'padding' entries >= 0", repr(self.padding))
        return F.pad(x, self.padding, mode=self._mode)

    def extend_repr(self):
        return f"padding={self.padding}"


class ReflectionPad1d(_MirrorPadNd):
    """Mirror-pad the last dim without repeating the edge: (left, right)."""
    _dims, _mode = 1, "reflect"


class ReflectionPad2d(_MirrorPadNd):
    """Mirror-pad the last two dims: (left, right, top, bottom)."""
    _dims, _mode = 2, "reflect"


class ReflectionPad3d(_MirrorPadNd):
    """Mirror-pad the last three dims: (left, right, top, bottom, front, back)."""
    _dims, _mode = 3, "reflect"


class ReplicationPad1d(_MirrorPadNd):
    """Repeat the edge values of the last dim: (left, right), on a (C, W) or (N, C, W) input."""
    _dims, _mode = 1, "replicate"


class ReplicationPad2d(_MirrorPadNd):
    """Repeat the edge values of the last two dims, on a 3-d or 4-d input."""
    _dims, _mode = 2, "replicate"


class ReplicationPad3d(_MirrorPadNd):
    """Repeat the edge values of the last three dims, on a 4-d or 5-d input."""
    _dims, _mode = 3, "replicate"


__all__ = ["Pad", "ConstantPad1d", "ConstantPad2d", "ConstantPad3d", "ZeroPad2d", "ReflectionPad1d",
           "ReflectionPad2d", "ReflectionPad3d", "ReplicationPad1d", "ReplicationPad2d", "ReplicationPad3d"]
