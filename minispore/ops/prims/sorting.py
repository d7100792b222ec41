"""Sorting primitives: sort, topk, argsort — and the gather/scatter pair their gradients use.

MindSpore signatures: `ops.sort(input_x, axis=-1, descending=False)` and
`ops.topk(input, k, dim=None, largest=True, sorted=True)` return (values, indices) with Int32
indices; `ops.argsort(input, axis=-1, descending=False)` returns the Int32 indices.

Orders are stable: equal elements keep their original order (so of two equal values the one with
the lower index comes first, in descending order too, as MindSpore documents for topk). NaN sorts
as the largest value.

Gradients: the values are a permutation (or a selection) of the input along the axis, so the
gradient is scattered back to the source positions through the indices. `gather_along_axis` and
`scatter_add_along_axis` are each other's backward rule, which makes every order of gradient work.
(`ops.max`/`ops.min` use the same pair.)
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from ...common import dtype as mstype
from .. import _check as C
from .. import costs
from .. import sharding_rules as SR
from ..primitive import AbstractTensor, defprim
from .activation import upcast_half

INDEX_DTYPE = mstype.int32       # MindSpore's Sort / TopK return Int32 indices


# ------------------------------------------------------------------------------------------------
# gather / scatter-add along one axis (gradient plumbing; indices have the shape of the result)
def _check_index_pair(op, x, idx, axis):
    C.tensor(op, "input", x)
    C.integer(op, "indices", idx)
    if len(idx.shape) != len(x.shape):
        raise C.OpValueError(op, f"'indices' with the input's rank {len(x.shape)}", f"rank {len(idx.shape)}")
    return C.axis(op, axis, len(x.shape))


def _gather_infer(x, idx, axis=0):
    ax = _check_index_pair("gather_along_axis", x, idx, axis)
    for i, (s, t) in enumerate(zip(x.shape, idx.shape)):
        if i != ax and s != t:
            raise C.OpValueError("gather_along_axis", f"'indices' shape equal to the input's except on axis {ax}",
                                 f"input {tuple(x.shape)}, indices {tuple(idx.shape)}")
    return AbstractTensor(idx.shape, x.dtype)


def _gather_kernel(a, idx, axis=0):
    return np.take_along_axis(a, idx, axis=axis)


def _gather_bprop(inputs, out, dout, axis=0):
    x, idx = inputs
    return scatter_add_along_axis(dout, idx, axis, x.shape[axis]), None


def _scatter_infer(src, idx, axis=0, size=0):
    ax = _check_index_pair("scatter_add_along_axis", src, idx, axis)
    if tuple(src.shape) != tuple(idx.shape):
        raise C.OpValueError("scatter_add_along_axis", "'indices' with the shape of the source",
                             f"source {tuple(src.shape)}, indices {tuple(idx.shape)}")
    C.int_attr("scatter_add_along_axis", "size", size, minimum=0)
    shape = list(src.shape)
    shape[ax] = size
    return AbstractTensor(tuple(shape), src.dtype)


def _scatter_kernel(src, idx, axis=0, size=0):
    data = upcast_half(src)
    shape = list(src.shape)
    shape[axis] = size
    out = np.zeros(shape, dtype=data.dtype)
    where = list(np.indices(idx.shape, sparse=True))   # broadcasting coordinates of every element
    where[axis] = idx
    np.add.at(out, tuple(where), data)                   # add, not assign: repeated indices accumulate
    return out


def _scatter_bprop(inputs, out, dout, axis=0, size=0):
    _, idx = inputs
    return gather_along_axis(dout, idx, axis), None


_gather = defprim("gather_along_axis", _gather_infer, _gather_kernel, _gather_bprop,
                  doc="out[..., i, ...] = x[..., idx[..., i, ...], ...] along one axis", cost=costs.gather)
_scatter = defprim("scatter_add_along_axis", _scatter_infer, _scatter_kernel, _scatter_bprop,
                   doc="zeros of `size` along the axis, with src added at idx", cost=costs.data_movement)


def gather_along_axis(x, indices, axis):
    """Pick `x` values along `axis` at `indices` (NumPy's take_along_axis)."""
    return _gather(x, indices, axis=axis)


def scatter_add_along_axis(src, indices, axis, size):
    """The adjoint of gather_along_axis: a zero tensor `size` long on `axis`, `src` added at `indices`."""
    return _scatter(src, indices, axis=axis, size=size)


# ------------------------------------------------------------------------------------------------
# stable orderings
def stable_order(a, axis, descending):
    """Indices that sort `a` along `axis`; ties keep the original order in both directions.

    Descending: sort the reversed array ascending (stable), reverse the result and map positions
    back — a plain `argsort(-a)` would overflow for the smallest integer and break for unsigned."""
    a = upcast_half(a)
    if not descending:
        return np.argsort(a, axis=axis, kind="stable")
    order = np.argsort(np.flip(a, axis), axis=axis, kind="stable")
    return a.shape[axis] - 1 - np.flip(order, axis)


def _sortable(op, x):
    C.tensor(op, "input", x)
    return x


def _values_bprop(inputs, out, dout, axis=-1, **attrs):
    x = inputs[0]
    ax = axis % len(x.shape)
    return (scatter_add_along_axis(dout[0], out[1], ax, x.shape[ax]),)


# ------------------------------------------------------------------------------------------------
# sort
def _sort_cost(ins, outs, attrs):
    """n log2 n comparisons per sorted row of n (the last axis), at least one per element."""
    x = ins[0]
    n = x.shape[-1] if x.shape else 1
    return {"flops": int(costs.size_of(x) * max(1.0, math.log2(max(n, 2)))), **costs.traffic(ins, outs)}


def _sort_infer(x, axis=-1, descending=False):
    _sortable("sort", x)
    if len(x.shape) == 0:
        raise C.OpValueError("sort", "an input with at least 1 dimension", "a 0-d tensor")
    C.axis("sort", axis, len(x.shape))
    return AbstractTensor(x.shape, x.dtype), AbstractTensor(x.shape, INDEX_DTYPE)


def _sort_kernel(a, axis=-1, descending=False):
    idx = stable_order(a, axis, descending)
    return np.take_along_axis(a, idx, axis=axis), idx


def _sort_bprop(inputs, out, dout, axis=-1, descending=False):
    return _values_bprop(inputs, out, dout, axis)


_sort = defprim("sort", _sort_infer, _sort_kernel, _sort_bprop, doc="(sorted values, Int32 source indices)",
                cost=_sort_cost, sharding=SR.rowwise)


def sort(input_x, axis=-1, descending=False):
    """`ops.sort(input_x, axis=-1, descending=False)` -> (values, indices), indices Int32.

    Stable in both directions; the gradient of the values goes back to the source positions."""
    return _sort(input_x, axis=axis, descending=C.bool_attr("sort", "descending", descending))


def argsort(input, axis=-1, descending=False):
    """`ops.argsort(input, axis=-1, descending=False)`: the Int32 indices that sort `input`."""
    return _sort(input, axis=axis, descending=C.bool_attr("argsort", "descending", descending))[1]


# ------------------------------------------------------------------------------------------------
# topk
def _topk_infer(x, k=1, axis=-1, largest=True, sorted=True):
    _sortable("topk", x)
    if len(x.shape) == 0:
        raise C.OpValueError("topk", "an input with at least 1 dimension", "a 0-d tensor")
    ax = C.axis("topk", axis, len(x.shape))
    k = C.int_attr("topk", "k", k, minimum=0)
    if k > x.shape[ax]:
        raise C.OpValueError("topk", f"'k' <= the size of dim {ax} ({x.shape[ax]})", repr(k))
    shape = tuple(k if i == ax else s for i, s in enumerate(x.shape))
    return AbstractTensor(shape, x.dtype), AbstractTensor(shape, INDEX_DTYPE)


def _topk_kernel(a, k=1, axis=-1, largest=True, sorted=True):
    # a full stable sort keeps ties in index order (argpartition would not); sorted=False is
    # allowed to return any order, and returning the sorted one is the predictable choice.
    idx = np.take(stable_order(a, axis, largest), np.arange(k), axis=axis)
    return np.take_along_axis(a, idx, axis=axis), idx


def _topk_bprop(inputs, out, dout, k=1, axis=-1, largest=True, sorted=True):
    return _values_bprop(inputs, out, dout, axis)


_topk = defprim("topk", _topk_infer, _topk_kernel, _topk_bprop, doc="(k largest/smallest values, Int32 indices)",
                cost=_sort_cost, sharding=SR.rowwise)


def topk(input, k, dim=None, largest=True, sorted=True):
    """`ops.topk(input, k, dim=None, largest=True, sorted=True)` -> (values, indices), indices Int32.

    dim=None means the last dimension. Of equal values the lower index comes first. The gradient
    of the values goes back to the positions they were taken from."""
    if isinstance(k, bool) or not isinstance(k, numbers.Integral):
        raise C.OpTypeError("topk", "'k' to be an int", f"{type(k).__name__} {k!r}")
    return _topk(input, k=int(k), axis=-1 if dim is None else dim,
                 largest=C.bool_attr("topk", "largest", largest), sorted=C.bool_attr("topk", "sorted", sorted))


__all__ = ["argsort", "sort", "topk"]
