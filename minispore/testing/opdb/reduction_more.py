"""Op table: median, cummax, cummin, nansum, count_nonzero, searchsorted. References: sorting by
hand for the median (a stable argsort's middle), loops for the running extremes."""
import numpy as np

from ... import ops
from ...common import dtype as mstype
from ..opinfo import OpInfo, SampleInput, noncontig, rand, register

F = (mstype.float32, mstype.float64)


def _median_ref(x, axis=-1, keepdims=False):
    if x.ndim == 0:
        return x, np.array(0, np.int64)
    order = np.argsort(x, axis=axis, kind="stable")
    k = (x.shape[axis] - 1) // 2
    idx = np.take(order, [k], axis=axis)
    vals = np.take_along_axis(x, idx, axis=axis)
    if not keepdims:
        idx, vals = np.squeeze(idx, axis), np.squeeze(vals, axis)
    return vals, idx.astype(np.int64)


def _distinct(rng, shape, dtype):
    return (rng.permutation(int(np.prod(shape))).reshape(shape) * 0.25 - 1).astype(dtype)


def _median_samples(rng, dtype):
    yield SampleInput((_distinct(rng, (3, 5), dtype),))
    yield SampleInput((_distinct(rng, (4, 3), dtype), 0, True), desc="axis 0, even count, keepdims")
    yield SampleInput((np.array([[3.0, 1.0, 2.0, 1.0], [2.0, 2.0, 7.0, 1.0]], dtype),), desc="ties", grad_args=())
    yield SampleInput((np.array(2.5, dtype),), desc="0-d")
    yield SampleInput((noncontig(_distinct(rng, (4, 3), dtype)),), desc="non-contiguous")


def _median_int_samples(rng, dtype):
    yield SampleInput((np.array([[3, 1, 2], [5, 5, 4]], dtype),))


def _cum_ref(better):
    def ref(x, axis):
        xm = np.moveaxis(x, axis, -1)
        vals, idx = np.empty_like(xm), np.empty(xm.shape, np.int64)
        for pos in np.ndindex(*xm.shape[:-1]):
            best, at = xm[pos][0], 0
            for i, v in enumerate(xm[pos]):
                if better(v, best):
                    best, at = v, i
                vals[pos][i], idx[pos][i] = best, at
        return np.moveaxis(vals, -1, axis), np.moveaxis(idx, -1, axis)
    return ref


def _cum_samples(rng, dtype):
    yield SampleInput((_distinct(rng, (3, 5), dtype), 1))
    yield SampleInput((_distinct(rng, (4, 3), dtype), 0), desc="axis 0")
    yield SampleInput((np.array([[1.0, 3.0, 2.0, 3.0], [0.0, -1.0, 4.0, 4.0]], dtype), 1), desc="ties: latest index",
                      grad_args=())


def _nansum_samples(rng, dtype):
    x = rand(rng, (3, 4), dtype)
    x[0, 1] = x[2, 3] = np.nan
    yield SampleInput((x,))
    yield SampleInput((x, 1, True), desc="axis, keepdims")


def _count_samples(rng, dtype):
    x = np.where(rng.random((3, 4)) > 0.5, rand(rng, (3, 4), dtype), 0).astype(dtype)
    yield SampleInput((x,))
    yield SampleInput((x, 1), desc="axis")
    yield SampleInput((x, (0, 1), True), desc="all axes, keep_dims")


def _count_ref(x, axis=(), keep_dims=False):
    ax = None if axis == () else axis
    return np.count_nonzero(x, axis=ax, keepdims=keep_dims).astype(np.int32)


def _searchsorted_samples(rng, dtype):
    seq = np.sort(rand(rng, (6,), dtype))
    vals = rand(rng, (2, 3), dtype)
    vals[0, 0] = seq[2]
    yield SampleInput((seq, vals))
    yield SampleInput((seq, vals), {"right": True}, desc="right")
    yield SampleInput((np.sort(rand(rng, (2, 5), dtype), -1), rand(rng, (2, 3), dtype)), desc="row-wise")


def _searchsorted_ref(seq, vals, right=False):
    side = "right" if right else "left"
    if seq.ndim == 1:
        return np.searchsorted(seq, vals, side=side).astype(np.int64)
    return np.stack([np.searchsorted(s, v, side=side) for s, v in zip(seq, vals)]).astype(np.int64)


register(
    OpInfo("median", ops.median, _median_ref, _median_samples, dtypes=F, grad_output=0),
    OpInfo("median_int", ops.median, _median_ref, _median_int_samples, dtypes=(mstype.int32, mstype.int64),
           differentiable=False, primitive="median"),
    OpInfo("cummax", ops.cummax, _cum_ref(lambda v, b: v >= b), _cum_samples, dtypes=F, grad_output=0),
    OpInfo("cummin", ops.cummin, _cum_ref(lambda v, b: v <= b), _cum_samples, dtypes=F, grad_output=0),
    OpInfo("nansum", ops.nansum, lambda x, axis=None, keepdims=False: np.nansum(x, axis=axis, keepdims=keepdims),
           _nansum_samples, dtypes=F, primitive="reduce_sum"),
    OpInfo("count_nonzero", ops.count_nonzero, _count_ref, _count_samples, dtypes=F, differentiable=False,
           primitive="reduce_sum"),
    OpInfo("searchsorted", ops.searchsorted, _searchsorted_ref, _searchsorted_samples, dtypes=F,
           differentiable=False),
)
