"""Image resizing as OpenCV's `cv::resize` computes it (MindSpore's CPU `vision.Resize` calls it).

Bilinear (`INTER_LINEAR`) maps output pixel centres to the input with half-pixel alignment,
`src = (dst + 0.5) * (in_size / out_size) - 0.5`, clamped to the image, and mixes the two neighbours
on each axis with weights `1 - frac` and `frac` — first along x, then along y (see `_linear_taps`
for OpenCV's border detail). There is no
antialiasing: shrinking by more than 2x skips pixels, as OpenCV does.

For uint8 images OpenCV works in fixed point: each weight becomes an integer out of 2048
(`INTER_RESIZE_COEF_BITS = 11`); the horizontal pass keeps exact int32 sums, and the vertical pass is
OpenCV's SIMD kernel (`VResizeLinearVec_32s8u`): `((b0 * (S0 >> 4)) >> 16) + ((b1 * (S1 >> 4)) >> 16)`,
then `(v + 2) >> 2`. Reproducing those roundings makes the uint8 results equal to MindSpore's (the
tests check it); the float path computes in float32 like OpenCV's.

Nearest (`INTER_NEAREST`) takes `src = floor(dst * in_size / out_size)` (no half-pixel shift).
"""
from __future__ import annotations

import numpy as np

COEF_BITS = 11
COEF_SCALE = 1 << COEF_BITS


def _linear_taps(in_size: int, out_size: int, clamp_weights: bool):
    """For each output index: the two source indices and their weights (1 - frac, frac), float32.

    OpenCV treats the axes differently at the border: along x a position outside the image is
    moved onto the edge pixel (weight 1 on it); along y the weights stay as computed and only the
    row indices are clamped (so both taps read the edge row). In exact arithmetic the two agree;
    in the uint8 fixed-point rounding they do not, and MindSpore's results show OpenCV's choice.
    """
    scale = in_size / out_size
    f = ((np.arange(out_size) + 0.5) * scale - 0.5).astype(np.float32)
    left = np.floor(f).astype(np.int64)
    frac = (f - left).astype(np.float32)
    if clamp_weights:
        low = left < 0
        frac[low], left[low] = 0.0, 0
        high = left >= in_size - 1
        frac[high], left[high] = 0.0, in_size - 1
    right = np.clip(left + 1, 0, in_size - 1)
    left = np.clip(left, 0, in_size - 1)
    return left, right, (np.float32(1.0) - frac).astype(np.float32), frac


def _fixed(w):
    """OpenCV's saturate_cast<short>(w * 2048): round half to even."""
    return np.rint(w.astype(np.float32) * np.float32(COEF_SCALE)).astype(np.int64)


def resize_linear(img: np.ndarray, out_h: int, out_w: int) -> np.ndarray:
    """Bilinear resize of an (H, W) or (H, W, C) image to (out_h, out_w[, C])."""
    in_h, in_w = img.shape[:2]
    if (in_h, in_w) == (out_h, out_w):
        return img.copy()
    x0, x1, ax0, ax1 = _linear_taps(in_w, out_w, clamp_weights=True)
    y0, y1, by0, by1 = _linear_taps(in_h, out_h, clamp_weights=False)
    expand = (slice(None),) + (None,) * (img.ndim - 2)       # weights broadcast over channels
    if img.dtype == np.uint8:
        src = img.astype(np.int64)
        wx0, wx1 = _fixed(ax0)[expand], _fixed(ax1)[expand]
        rows = src[:, x0] * wx0 + src[:, x1] * wx1             # exact int sums, value * 2048
        wy0, wy1 = _fixed(by0)[(slice(None), None) + expand[1:]], _fixed(by1)[(slice(None), None) + expand[1:]]
        top, bottom = rows[y0] >> 4, rows[y1] >> 4
        v = ((wy0 * top) >> 16) + ((wy1 * bottom) >> 16)
        return np.clip((v + 2) >> 2, 0, 255).astype(np.uint8)
    work = img.astype(np.float32) if img.dtype != np.float64 else img
    wx0, wx1 = ax0[expand].astype(work.dtype), ax1[expand].astype(work.dtype)
    rows = work[:, x0] * wx0 + work[:, x1] * wx1
    wy0 = by0[(slice(None), None) + expand[1:]].astype(work.dtype)
    wy1 = by1[(slice(None), None) + expand[1:]].astype(work.dtype)
    out = rows[y0] * wy0 + rows[y1] * wy1
    return _back_to(out, img.dtype)


def resize_nearest(img: np.ndarray, out_h: int, out_w: int) -> np.ndarray:
    in_h, in_w = img.shape[:2]
    ys = np.minimum(np.floor(np.arange(out_h) * (in_h / out_h)).astype(np.int64), in_h - 1)
    xs = np.minimum(np.floor(np.arange(out_w) * (in_w / out_w)).astype(np.int64), in_w - 1)
    return img[ys][:, xs].copy()


def _back_to(out, dtype):
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        return np.clip(np.rint(out), info.min, info.max).astype(dtype)
    return out.astype(dtype)
