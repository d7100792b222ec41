"""`ops.interpolate`: resize the spatial dims of (N, C, L) or (N, C, H, W) tensors by nearest or
(bi)linear sampling, with MindSpore 2.10's exact conventions (checked against its CPU wheel):

* 'nearest' (3-D or 4-D): output index o reads input index floor(o * in / out) (the legacy
  PyTorch rule, not 'nearest-exact'); `align_corners` may not be given.
* 'linear' (3-D) / 'bilinear' (4-D): with align_corners=False (the default) the half-pixel rule
  src = (o + 0.5) * in / out - 0.5, clamped below at 0; with align_corners=True
  src = o * (in - 1) / (out - 1), so the corner pixels line up exactly.
* exactly one of `size` and `scale_factor`; a scale factor (a float, or one per spatial dim) is
  only accepted with recompute_scale_factor=True, and the output size is then floor(in * scale)
  (at least 1), sampled with the recomputed scale in / out. (MindSpore 2.10 raises otherwise.)
* floating inputs only.

Both modes are linear maps applied separately along each spatial dim: output = W_h @ x @ W_w^T
with a small (out, in) weight matrix per dim (one 1 per row for nearest, two weights summing to 1
for linear). The kernel applies them with NumPy; the backward applies their transposes with
minispore's matmul, so it is differentiable again.
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from ...common.tensor import Tensor
from .. import _check as C
from .. import sharding_rules as SR
from ..primitive import AbstractTensor, defprim
from .activation import upcast_half
from .linalg import matmul, swap_last

_MODES = {"nearest": (3, 4), "linear": (3,), "bilinear": (4,)}
_NOT_YET = ("bicubic", "area", "nearest-exact", "trilinear")


def sample_matrix(n_in, n_out, mode, align_corners):
    """The (n_out, n_in) float64 matrix that resamples one dim of length n_in to n_out."""
    w = np.zeros((n_out, n_in))
    o = np.arange(n_out)
    if mode == "nearest":
        src = np.minimum((o * n_in) // n_out, n_in - 1)
        w[o, src] = 1.0
        return w
    if align_corners:
        src = o * ((n_in - 1) / (n_out - 1)) if n_out > 1 else np.zeros(n_out)
    else:
        src = np.maximum((o + 0.5) * (n_in / n_out) - 0.5, 0.0)
    lo = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
    hi = np.minimum(lo + 1, n_in - 1)
    frac = src - lo
    np.add.at(w, (o, lo), 1.0 - frac)
    np.add.at(w, (o, hi), frac)
    return w


def _infer(x, size=(), mode="nearest", align_corners=False):
    C.floating("interpolate", "input", x)
    if len(x.shape) not in _MODES[mode]:
        raise C.OpValueError("interpolate", f"a {' or '.join(f'{d}-D' for d in _MODES[mode])} input for mode '{mode}'",
                             f"shape {tuple(x.shape)}")
    return AbstractTensor(tuple(x.shape[:2]) + tuple(size), x.dtype)


def _matrices(x_shape, size, mode, align_corners, dtype=np.float64):
    return [sample_matrix(n_in, n_out, mode, align_corners).astype(dtype)
            for n_in, n_out in zip(x_shape[2:], size)]


def _kernel(a, size=(), mode="nearest", align_corners=False):
    C.output_fits("interpolate", a.shape[:2] + tuple(size), np.float64)
    for n_in, n_out in zip(a.shape[2:], size):        # (the dense sampling matrices come first)
        C.output_fits("interpolate", (n_out, n_in), np.float64)
    x = upcast_half(a)
    mats = _matrices(a.shape, size, mode, align_corners, x.dtype)
    if len(mats) == 1:
        return np.einsum("ncl,ol->nco", x, mats[0])
    return np.einsum("oh,nchw,pw->ncop", mats[0], x, mats[1], optimize=True)


def _bprop(inputs, out, dout, size=(), mode="nearest", align_corners=False):
    x = inputs[0]
    mats = [Tensor(m) for m in _matrices(x.shape, size, mode, align_corners, x.dtype.np)]
    if len(mats) == 1:
        return (matmul(dout, mats[0]),)                             # (n, c, out) @ (out, in)
    return (matmul(matmul(swap_last(mats[0]), dout), mats[1]),)     # W_h^T @ g @ W_w


_interpolate = defprim("interpolate", _infer, _kernel, _bprop, doc="nearest / (bi)linear resize of spatial dims",
                        sharding=SR.planewise)


def _spatial(op_arg, v, n, kind):
    """`v` as a tuple of n positive ints (size) or n positive floats (scale_factor)."""
    vals = v if isinstance(v, (tuple, list)) else (v,) * n
    if len(vals) != n:
        raise C.OpValueError("interpolate", f"'{op_arg}' with one entry per spatial dim ({n})", repr(v))
    for s in vals:
        ok = (isinstance(s, numbers.Integral) if kind is int else isinstance(s, float)) and not isinstance(s, bool)
        if not ok:
            raise C.OpTypeError("interpolate", f"'{op_arg}' entries of type {kind.__name__}",
                                f"{type(s).__name__} {s!r}")
        if s <= 0:
            raise C.OpValueError("interpolate", f"'{op_arg}' entries > 0", repr(s))
    return tuple(kind(s) for s in vals)


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None):
    """`ops.interpolate(input, size=None, scale_factor=None, mode='nearest', align_corners=None,
    recompute_scale_factor=None)`: resize the spatial dims (see the module docstring for the exact
    sampling rules). Modes: 'nearest' (3-D/4-D), 'linear' (3-D), 'bilinear' (4-D)."""
    C.tensor("interpolate", "input", input)
    if not isinstance(mode, str):
        raise C.OpTypeError("interpolate", "'mode' to be a string", type(mode).__name__)
    if mode in _NOT_YET:
        raise C.OpValueError("interpolate", "mode 'nearest', 'linear' or 'bilinear' (minispore has no "
                             f"'{mode}' yet)", repr(mode))
    C.one_of("interpolate", "mode", mode, tuple(_MODES), "'mode' in ['nearest', 'linear', 'bilinear']")
    ndim = len(input.shape)
    if ndim not in _MODES[mode]:
        raise C.OpValueError("interpolate", f"a {' or '.join(f'{d}-D' for d in _MODES[mode])} input for mode '{mode}'",
                             f"shape {tuple(input.shape)}")
    n = ndim - 2
    if mode == "nearest" and align_corners is not None:
        raise C.OpValueError("interpolate", "no 'align_corners' with mode 'nearest'", repr(align_corners))
    if align_corners is not None and not isinstance(align_corners, bool):
        raise C.OpTypeError("interpolate", "'align_corners' to be a bool or None", type(align_corners).__name__)
    if (size is None) == (scale_factor is None):
        raise C.OpValueError("interpolate", "exactly one of 'size' and 'scale_factor'",
                             "both None" if size is None else "both given")
    if size is not None:
        out = _spatial("size", size, n, int)
    else:
        scales = _spatial("scale_factor", scale_factor, n, float)
        if recompute_scale_factor is not True:
            raise C.OpValueError("interpolate", "recompute_scale_factor=True with 'scale_factor' (as MindSpore 2.10)",
                                 repr(recompute_scale_factor))
        out = tuple(max(int(math.floor(s_in * s)), 1) for s_in, s in zip(input.shape[2:], scales))
    return _interpolate(input, size=out, mode=mode, align_corners=bool(align_corners))


upsample = interpolate

__all__ = ["interpolate", "upsample"]
