"""Op table: interpolate (nearest, linear, bilinear with and without align_corners). The reference
samples every output point directly from the coordinate formulas (a loop per output pixel), not
through the weight matrices the kernel uses."""
import numpy as np

from ... import ops
from ...common import dtype as mstype
from ..opinfo import OpInfo, SampleInput, noncontig, rand, register


def _src(o, n_in, n_out, mode, align_corners):
    if mode == "nearest":
        return min(int(np.floor(o * n_in / n_out)), n_in - 1)
    if align_corners:
        return o * (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
    return max((o + 0.5) * n_in / n_out - 0.5, 0.0)


def _linear_1d(row, s):
    lo = min(int(np.floor(s)), len(row) - 1)
    hi = min(lo + 1, len(row) - 1)
    return row[lo] * (1 - (s - lo)) + row[hi] * (s - lo)


def _ref(x, size=None, scale_factor=None, mode="nearest", align_corners=None, recompute_scale_factor=None):
    if size is None:
        size = tuple(int(np.floor(n * s)) for n, s in zip(x.shape[2:], scale_factor))
    size = (size,) * (x.ndim - 2) if isinstance(size, int) else tuple(size)
    out = np.zeros(x.shape[:2] + size)
    for idx in np.ndindex(*size):
        srcs = [_src(o, n, m, mode, align_corners) for o, n, m in zip(idx, x.shape[2:], size)]
        if mode == "nearest":
            out[(...,) + idx] = x[(...,) + tuple(srcs)]
        elif len(srcs) == 1:
            out[(...,) + idx] = np.apply_along_axis(_linear_1d, -1, x, srcs[0])
        else:
            rows = np.apply_along_axis(_linear_1d, -1, x, srcs[1])           # along W first
            out[(...,) + idx] = np.apply_along_axis(_linear_1d, -1, rows, srcs[0])
    return out


def _samples(rng, dtype):
    x4 = rand(rng, (2, 2, 3, 4), dtype)
    x3 = rand(rng, (1, 2, 5), dtype)
    yield SampleInput((x4, (5, 7)), {"mode": "nearest"}, desc="nearest up")
    yield SampleInput((x4, (2, 3)), {"mode": "nearest"}, desc="nearest down")
    yield SampleInput((x4, (5, 7)), {"mode": "bilinear"}, desc="bilinear half-pixel")
    yield SampleInput((x4, (5, 7)), {"mode": "bilinear", "align_corners": True}, desc="bilinear align_corners")
    yield SampleInput((noncontig(rand(rng, (1, 1, 6, 6), dtype)), (4, 3)), {"mode": "bilinear"},
                      desc="bilinear down, non-contiguous")
    yield SampleInput((x4,), {"scale_factor": (1.7, 0.6), "mode": "bilinear", "recompute_scale_factor": True},
                      desc="scale_factor")
    yield SampleInput((x3, 8), {"mode": "linear"}, desc="linear")
    yield SampleInput((x3, 8), {"mode": "linear", "align_corners": True}, desc="linear align_corners")
    yield SampleInput((x3, 8), desc="nearest 3-D")


register(
    OpInfo("interpolate", ops.interpolate, _ref, _samples,
           dtypes=(mstype.float16, mstype.float32, mstype.float64),
           tols={mstype.float16: (3e-3, 3e-3), mstype.float32: (1e-5, 1e-5)}),
)
