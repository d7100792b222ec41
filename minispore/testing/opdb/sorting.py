"""Op table: sort, argsort, topk, and the gather/scatter pair their gradients are built from.

References order with `np.argsort(kind="stable")` of the (negated, for descending) input, an
independent route from the kernels' reverse-and-flip. Samples with exact ties check the tie order
(lower index first) forward only: a finite difference across a tie measures an average of two
orderings, not a derivative.
"""
import numpy as np

from ... import ops
from ...common import dtype as mstype
from ...ops.prims.sorting import gather_along_axis, scatter_add_along_axis
from ..opinfo import OpInfo, SampleInput, noncontig, rand, register

F16 = (mstype.float16, mstype.bfloat16, mstype.float32, mstype.float64)


def _order(a, axis, descending):
    return np.argsort(-a if descending else a, axis=axis, kind="stable")


def _ref_sort(a, axis=-1, descending=False):
    idx = _order(a, axis, descending)
    return np.take_along_axis(a, idx, axis=axis), idx


def _ref_argsort(a, axis=-1, descending=False):
    return _order(a, axis, descending)


def _ref_topk(a, k, dim=None, largest=True, sorted=True):
    axis = -1 if dim is None else dim
    idx = np.take(_order(a, axis, largest), np.arange(k), axis=axis)
    return np.take_along_axis(a, idx, axis=axis), idx


def _ties(dtype):
    return np.array([[3, 1, 3, 2, 1], [0, 0, 5, 5, -1]], dtype=dtype)


def _sort_samples(rng, dtype):
    yield SampleInput((rand(rng, (3, 5), dtype),))
    yield SampleInput((rand(rng, (3, 5), dtype),), {"descending": True})
    yield SampleInput((rand(rng, (4, 3), dtype),), {"axis": 0})
    yield SampleInput((rand(rng, (2, 3, 4), dtype),), {"axis": 1, "descending": True})
    yield SampleInput((rand(rng, (6,), dtype),), desc="1-d")
    yield SampleInput((noncontig(rand(rng, (4, 5), dtype)),), {"axis": 0}, desc="non-contiguous")
    yield SampleInput((_ties(dtype),), desc="ties keep index order", grad_args=())
    yield SampleInput((_ties(dtype),), {"descending": True}, desc="ties, descending", grad_args=())


def _int_sort_samples(rng, dtype):
    yield SampleInput((_ties(dtype),))
    yield SampleInput((_ties(dtype),), {"descending": True})
    yield SampleInput((rng.integers(-5, 5, (4, 6)).astype(dtype),), {"axis": 0, "descending": True})


def _topk_samples(rng, dtype):
    yield SampleInput((rand(rng, (3, 5), dtype), 2))
    yield SampleInput((rand(rng, (3, 5), dtype), 2), {"largest": False})
    yield SampleInput((rand(rng, (4, 3), dtype), 3), {"dim": 0})
    yield SampleInput((rand(rng, (2, 3, 4), dtype), 1), {"dim": 1})
    yield SampleInput((rand(rng, (6,), dtype), 6), desc="k = n")
    yield SampleInput((rand(rng, (3, 5), dtype), 0), desc="k = 0")
    yield SampleInput((noncontig(rand(rng, (4, 5), dtype)), 2), {"dim": 0, "sorted": False}, desc="non-contiguous")
    yield SampleInput((_ties(dtype), 3), desc="ties: lower index first", grad_args=())
    yield SampleInput((_ties(dtype), 3), {"largest": False}, desc="ties, smallest", grad_args=())


def _int_topk_samples(rng, dtype):
    yield SampleInput((_ties(dtype), 3))
    yield SampleInput((_ties(dtype), 2), {"largest": False})


def _gather_samples(rng, dtype):
    x = rand(rng, (3, 5), dtype)
    yield SampleInput((x, rng.integers(0, 5, (3, 4)), 1), grad_args=(0,))
    yield SampleInput((x, rng.integers(0, 3, (6, 5)), 0), desc="repeated indices", grad_args=(0,))
    yield SampleInput((noncontig(rand(rng, (4, 3), dtype)), rng.integers(0, 3, (4, 2)), -1),
                      desc="non-contiguous", grad_args=(0,))


def _ref_gather(x, idx, axis):
    out = np.empty(idx.shape, dtype=x.dtype)
    for pos in np.ndindex(*idx.shape):
        src = list(pos)
        src[axis] = idx[pos]
        out[pos] = x[tuple(src)]
    return out


def _scatter_samples(rng, dtype):
    yield SampleInput((rand(rng, (3, 4), dtype), rng.integers(0, 6, (3, 4)), 1, 6), grad_args=(0,))
    yield SampleInput((rand(rng, (5, 2), dtype), rng.integers(0, 2, (5, 2)), 0, 2), desc="repeated indices add",
                      grad_args=(0,))


def _ref_scatter(src, idx, axis, size):
    shape = list(src.shape)
    shape[axis] = size
    out = np.zeros(shape)
    for pos in np.ndindex(*src.shape):
        dst = list(pos)
        dst[axis] = idx[pos]
        out[tuple(dst)] += src[pos]
    return out


register(
    OpInfo("sort", ops.sort, _ref_sort, _sort_samples, dtypes=F16),
    OpInfo("sort_int", ops.sort, _ref_sort, _int_sort_samples, dtypes=(mstype.int32, mstype.int64),
           differentiable=False, primitive="sort"),
    OpInfo("argsort", ops.argsort, _ref_argsort, _sort_samples, dtypes=F16, differentiable=False,
           primitive="sort"),
    OpInfo("topk", ops.topk, _ref_topk, _topk_samples, dtypes=F16),
    OpInfo("topk_int", ops.topk, _ref_topk, _int_topk_samples, dtypes=(mstype.int32,), differentiable=False,
           primitive="topk"),
    OpInfo("gather_along_axis", gather_along_axis, _ref_gather, _gather_samples),
    OpInfo("scatter_add_along_axis", scatter_add_along_axis, _ref_scatter, _scatter_samples),
)
