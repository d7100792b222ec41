"""Sliding-window geometry shared by conv2d and the 2-d pools (NCHW).

A window op reads, for every output position (oh, ow), the KH x KW input pixels at
    (oh * stride_h - pad_top + i * dilation_h,  ow * stride_w - pad_left + j * dilation_w).
`windows` exposes all of them at once as a strided *view* (no copy) of the padded input, and
`scatter_windows` is its adjoint (each window's values added back onto the pixels it read).
"""
from __future__ import annotations

import numbers

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .. import _check as C
from ._nn_common import tensor


def _is_int(v):
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def pair(op, name, v, minimum=1):
    """An int or a 1/2-tuple of ints -> (h, w), each >= minimum."""
    if _is_int(v):
        v = (v, v)
    elif isinstance(v, (tuple, list)) and len(v) in (1, 2) and all(_is_int(e) for e in v):
        v = (v[0], v[0]) if len(v) == 1 else tuple(v)
    else:
        raise C.OpTypeError(op, f"'{name}' as an int or a tuple of 2 ints", repr(v))
    if min(v) < minimum:
        raise C.OpValueError(op, f"'{name}' values >= {minimum}", repr(v))
    return int(v[0]), int(v[1])


def single(op, name, v, minimum):
    """An int or a 1-element tuple/list (MindSpore's forms for a 1-d conv/pool argument) -> int >=
    minimum. The 1-d ops (conv1d, avg_pool1d) run as their 2-d versions over (N, C, 1, L)."""
    if isinstance(v, (tuple, list)) and len(v) == 1:
        v = v[0]
    if not _is_int(v):
        raise C.OpTypeError(op, f"'{name}' as an int or a tuple of 1 int", repr(v))
    if v < minimum:
        raise C.OpValueError(op, f"'{name}' >= {minimum}", repr(v))
    return int(v)


def pads4(op, v):
    """Padding as an int, (h, w) or (top, bottom, left, right) -> (top, bottom, left, right)."""
    if _is_int(v):
        v = (v,) * 4
    elif isinstance(v, (tuple, list)) and len(v) in (1, 2, 4) and all(_is_int(e) for e in v):
        v = {1: lambda t: t * 4, 2: lambda t: (t[0], t[0], t[1], t[1]), 4: tuple}[len(v)](tuple(v))
    else:
        raise C.OpTypeError(op, "'padding' as an int or a tuple of 2 or 4 ints", repr(v))
    if min(v) < 0:
        raise C.OpValueError(op, "non-negative 'padding'", repr(v))
    return tuple(int(e) for e in v)


def check_nchw(op, arg, x):
    tensor(op, arg, x)
    if len(x.shape) != 4:
        raise C.OpValueError(op, f"'{arg}' of rank 4 (N, C, H, W)", f"shape {tuple(x.shape)}")


def out_size(op, size, kernel, stride, dilation, pad_lo, pad_hi, ceil_mode=False):
    """Output length along one axis (PyTorch's rule for ceil_mode: the last window must start
    inside the input or the leading padding)."""
    k_eff = (kernel - 1) * dilation + 1
    span = size + pad_lo + pad_hi - k_eff
    if span < 0:
        raise C.OpValueError(op, f"an input of at least {k_eff - pad_lo - pad_hi} along H and W "
                             f"(effective kernel {k_eff}, padding {pad_lo}+{pad_hi})", f"size {size}")
    n = -(-span // stride) + 1 if ceil_mode else span // stride + 1
    if ceil_mode and (n - 1) * stride >= size + pad_lo:
        n -= 1
    return n


def pad_for_windows(x, pads, out_hw, kernel, stride, dilation, value):
    """Pad x (N, C, H, W) by `pads` (top, bottom, left, right), plus whatever ceil_mode windows need
    beyond the bottom/right padding."""
    pt, pb, pl, pr = pads
    need_h = (out_hw[0] - 1) * stride[0] + (kernel[0] - 1) * dilation[0] + 1
    need_w = (out_hw[1] - 1) * stride[1] + (kernel[1] - 1) * dilation[1] + 1
    pb = max(pb, need_h - x.shape[2] - pt)
    pr = max(pr, need_w - x.shape[3] - pl)
    if pt == pb == pl == pr == 0:
        return x
    return np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)), constant_values=value)


def windows(xp, kernel, stride, dilation, out_hw):
    """View of the padded input as (N, C, OH, OW, KH, KW) windows."""
    kh, kw = kernel
    sh, sw = stride
    dh, dw = dilation
    oh, ow = out_hw
    v = sliding_window_view(xp, ((kh - 1) * dh + 1, (kw - 1) * dw + 1), axis=(2, 3))
    return v[:, :, :(oh - 1) * sh + 1:sh, :(ow - 1) * sw + 1:sw, ::dh, ::dw]


def scatter_windows(cols, padded_hw, stride, dilation):
    """Adjoint of `windows`: add cols (N, C, OH, OW, KH, KW) back onto a zero (N, C, *padded_hw).

    One strided add per kernel position (KH * KW of them); within one position the windows never
    overlap, so plain `+=` on a strided slice is exact.
    """
    n, c, oh, ow, kh, kw = cols.shape
    sh, sw = stride
    dh, dw = dilation
    out = np.zeros((n, c) + tuple(padded_hw), dtype=cols.dtype)
    for i in range(kh):
        for j in range(kw):
            out[:, :, i * dh:i * dh + (oh - 1) * sh + 1:sh, j * dw:j * dw + (ow - 1) * sw + 1:sw] += cols[:, :, :, :, i, j]
    return out


def crop(xp, pads, hw):
    pt, _, pl, _ = pads
    return xp[:, :, pt:pt + hw[0], pl:pl + hw[1]]
