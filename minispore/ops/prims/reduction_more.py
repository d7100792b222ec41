"""More reductions and scans, in MindSpore 2.x's names: median, cummax/cummin, count_nonzero,
nansum, searchsorted, bincount.

MindSpore's conventions, checked on the 2.10 CPU wheel:

* `median(input, axis=-1, keepdims=False)` returns (values, Int64 indices); for an even count it
  is the *lower* median, and among equal values the index is the one a stable sort puts in the
  middle. The gradient goes to that index only.
* `cummax` / `cummin` return (values, indices) where the index is the *latest* position holding
  the running extreme (ties move it forward). cummax's indices are Int64 and cummin's Int32 —
  MindSpore's own inconsistency, reproduced.
* `count_nonzero` counts in Int32 by default; `bincount` returns Float32 counts.
"""
from __future__ import annotations

import numbers

import numpy as np

from ...common import dtype as mstype
from ...common.tensor import Tensor
from .. import _check as C
from .. import sharding_rules as SR
from ..primitive import AbstractTensor, defprim
from .elementwise import cast, isnan, not_equal, where, zeros_like
from .reduction import expand_reduced, reduce_sum, reduced_shape
from .sorting import scatter_add_along_axis

_MEDIAN_DTYPES = (mstype.int16, mstype.int32, mstype.int64, mstype.float32, mstype.float64)


def _int(op, arg, v):
    if not isinstance(v, numbers.Integral) or isinstance(v, bool):
        raise C.OpTypeError(op, f"'{arg}' to be an int", f"{type(v).__name__} {v!r}")
    return int(v)


def _bool(op, arg, v):
    if not isinstance(v, bool):
        raise C.OpTypeError(op, f"'{arg}' to be a bool", f"{type(v).__name__} {v!r}")
    return v


# ------------------------------------------------------------------------------------------------
# median
def _median_infer(x, axis=-1, keep_dims=False):
    C.tensor("median", "input", x)
    C.dtype_in("median", "input", x, _MEDIAN_DTYPES)
    n = len(x.shape)
    ax = C.axis("median", axis, n)
    if n and x.shape[ax] == 0:
        raise C.OpValueError("median", "a non-empty axis", f"input shape {tuple(x.shape)}")
    shape = reduced_shape(x.shape, (ax,), keep_dims) if n else ()
    return AbstractTensor(shape, x.dtype), AbstractTensor(shape, mstype.int64)


def _median_kernel(a, axis=-1, keep_dims=False):
    if a.ndim == 0:
        return a.copy(), np.zeros((), np.int64)
    ax = axis % a.ndim
    order = np.argsort(a, axis=ax, kind="stable")
    mid = np.take(order, [(a.shape[ax] - 1) // 2], axis=ax)          # the lower median's position
    values = np.take_along_axis(a, mid, axis=ax)
    if not keep_dims:
        mid, values = np.squeeze(mid, ax), np.squeeze(values, ax)
    return values, mid.astype(np.int64)


def _median_bprop(inputs, out, dout, axis=-1, keep_dims=False):
    x = inputs[0]
    if len(x.shape) == 0:
        return (dout[0],)
    ax = axis % len(x.shape)
    g = expand_reduced(dout[0], x.shape, ax, keep_dims)
    idx = expand_reduced(out[1], x.shape, ax, keep_dims)
    return (scatter_add_along_axis(g, idx, ax, x.shape[ax]),)


_median = defprim("median", _median_infer, _median_kernel, _median_bprop,
                  doc="(lower median, its index) along an axis", sharding=SR.reduce_unsplit)


def median(input, axis=-1, keepdims=False):
    """`ops.median(input, axis=-1, keepdims=False)` -> (values, indices).

    The lower median along `axis` (for an even count, the smaller of the two middle values) and
    its Int64 index. Float32/Float64/Int16/Int32/Int64 inputs, as MindSpore."""
    return _median(input, axis=_int("median", "axis", axis), keep_dims=_bool("median", "keepdims", keepdims))


# ------------------------------------------------------------------------------------------------
# cummax / cummin
def _cum_extreme_infer(name, index_dtype):
    def infer(x, axis=0):
        C.tensor(name, "input", x)
        if x.dtype is mstype.bool_:
            raise C.OpTypeError(name, "'input' with a numeric dtype", str(x.dtype))
        if len(x.shape) == 0:
            raise C.OpValueError(name, "an input of rank >= 1", "a 0-d tensor")
        C.axis(name, axis, len(x.shape))
        return AbstractTensor(x.shape, x.dtype), AbstractTensor(x.shape, index_dtype)
    return infer


def _cum_extreme_kernel(better_or_tie):
    def kernel(a, axis=0):
        x = np.moveaxis(a, axis, -1)
        vals = np.empty_like(x)
        idx = np.empty(x.shape, dtype=np.int64)
        if x.shape[-1] == 0:                       # nothing along the axis: empty results
            return np.moveaxis(vals, -1, axis), np.moveaxis(idx, -1, axis)
        best, at = x[..., 0].copy(), np.zeros(x.shape[:-1], dtype=np.int64)
        for i in range(x.shape[-1]):               # one vectorized step per position on the axis
            take = better_or_tie(x[..., i], best) | np.isnan(x[..., i]) if x.dtype.kind == "f" else \
                better_or_tie(x[..., i], best)
            best = np.where(take, x[..., i], best)
            at = np.where(take, i, at)
            vals[..., i], idx[..., i] = best, at
        return np.moveaxis(vals, -1, axis), np.moveaxis(idx, -1, axis)
    return kernel


def _cum_extreme_bprop(inputs, out, dout, axis=0):
    x = inputs[0]
    ax = axis % len(x.shape)
    return (scatter_add_along_axis(dout[0], cast(out[1], mstype.int64), ax, x.shape[ax]),)


_cummax = defprim("cummax", _cum_extreme_infer("cummax", mstype.int64), _cum_extreme_kernel(np.greater_equal),
                  _cum_extreme_bprop, doc="running maximum along an axis, with the latest index of it",
                  sharding=SR.scan)
_cummin = defprim("cummin", _cum_extreme_infer("cummin", mstype.int32), _cum_extreme_kernel(np.less_equal),
                  _cum_extreme_bprop, doc="running minimum along an axis, with the latest index of it",
                  sharding=SR.scan)


def cummax(input, axis):
    """`ops.cummax(input, axis)` -> (values, indices): the running maximum along `axis` and, for each
    position, the latest index where it was reached (Int64)."""
    return _cummax(input, axis=_int("cummax", "axis", axis))


def cummin(input, axis):
    """`ops.cummin(input, axis)` -> (values, indices): the running minimum; indices are Int32, as in
    MindSpore 2.10 (cummax's are Int64)."""
    return _cummin(input, axis=_int("cummin", "axis", axis))


# ------------------------------------------------------------------------------------------------
# count_nonzero / nansum (compositions)
def _axis_tuple(op, axis, ndim):
    axis = C.plain_ints(axis)
    if axis is None or (type(axis) is tuple and not axis):
        return tuple(range(ndim))
    return C.axes(op, axis, ndim)


def count_nonzero(x, axis=(), keep_dims=False, dtype=mstype.int32):
    """`ops.count_nonzero(x, axis=(), keep_dims=False, dtype=mindspore.int32)`: how many elements
    along `axis` (() = all) are not zero, counted in `dtype`."""
    C.tensor("count_nonzero", "x", x)
    axes = _axis_tuple("count_nonzero", axis, len(x.shape))
    dt = mstype.as_dtype(dtype)
    return cast(reduce_sum(cast(not_equal(x, 0), mstype.int64), axes, keep_dims=_bool("count_nonzero", "keep_dims",
                                                                                    keep_dims)), dt)


def nansum(input, axis=None, keepdims=False, *, dtype=None):
    """`ops.nansum(input, axis=None, keepdims=False, *, dtype=None)`: sum treating NaN as zero."""
    C.tensor("nansum", "input", input)
    axes = _axis_tuple("nansum", axis, len(input.shape))
    x = where(isnan(input), zeros_like(input), input) if input.dtype.is_floating else input
    out = reduce_sum(x, axes, keep_dims=_bool("nansum", "keepdims", keepdims))
    return cast(out, dtype) if dtype is not None else out


# ------------------------------------------------------------------------------------------------
# searchsorted
def _searchsorted_infer(seq, values, right=False, out_dtype=mstype.int64):
    C.tensor("searchsorted", "sorted_sequence", seq)
    C.tensor("searchsorted", "values", values)
    if len(seq.shape) == 0:
        raise C.OpValueError("searchsorted", "a 'sorted_sequence' of rank >= 1", "a 0-d tensor")
    if len(seq.shape) > 1 and tuple(seq.shape[:-1]) != tuple(values.shape[:-1]):
        raise C.OpValueError("searchsorted", "'sorted_sequence' and 'values' with the same leading dims",
                             f"shapes {tuple(seq.shape)} and {tuple(values.shape)}")
    return AbstractTensor(values.shape, out_dtype)


def _searchsorted_kernel(seq, values, right=False, out_dtype=mstype.int64):
    side = "right" if right else "left"
    if seq.ndim == 1:
        return np.searchsorted(seq, values, side=side)
    rows = int(np.prod(seq.shape[:-1], dtype=np.int64))          # (explicit: -1 is ambiguous for size 0)
    rows_s, rows_v = seq.reshape(rows, seq.shape[-1]), values.reshape(rows, values.shape[-1])
    if rows_s.shape[0] == 0:                      # no rows: no insertion points
        return np.zeros(values.shape, np.int64)
    out = np.stack([np.searchsorted(s, v, side=side) for s, v in zip(rows_s, rows_v)])
    return out.reshape(values.shape)


_searchsorted = defprim("searchsorted", _searchsorted_infer, _searchsorted_kernel, None,
                        doc="insertion points of values into a sorted sequence")


def searchsorted(sorted_sequence, values, *, out_int32=False, right=False, side=None, sorter=None):
    """`ops.searchsorted(sorted_sequence, values, *, out_int32=False, right=False, side=None,
    sorter=None)`: for each value, the index where it would be inserted to keep the (last dim of)
    sorted_sequence sorted; `right=True` / side='right' puts it after equal entries. Int64 indices
    (Int32 with out_int32=True). `sorter` (indices that sort the sequence) is applied first."""
    C.one_of("searchsorted", "side", side, (None, "left", "right"), "'side' to be None, 'left' or 'right'")
    if side is not None:
        if right and side == "left":
            raise C.OpValueError("searchsorted", "'side' consistent with 'right'", "right=True, side='left'")
        right = side == "right"
    if sorter is not None:
        from .sorting import gather_along_axis
        C.tensor("searchsorted", "sorter", sorter)
        C.tensor("searchsorted", "sorted_sequence", sorted_sequence)
        if len(sorted_sequence.shape) == 0:
            raise C.OpValueError("searchsorted", "a 'sorted_sequence' of rank >= 1", "a 0-d tensor")
        C.integer("searchsorted", "sorter", sorter)
        if tuple(sorter.shape) != tuple(sorted_sequence.shape):
            raise C.OpValueError("searchsorted", f"a 'sorter' of the sequence's shape {tuple(sorted_sequence.shape)}",
                                 f"shape {tuple(sorter.shape)}")
        n = sorted_sequence.shape[-1]
        s = sorter.asnumpy()
        if s.size and (int(s.min()) < 0 or int(s.max()) >= n):
            raise C.OpIndexError("searchsorted", f"'sorter' values in [0, {n})",
                                 str(int(s.min()) if int(s.min()) < 0 else int(s.max())))
        sorted_sequence = gather_along_axis(sorted_sequence, sorter, len(sorted_sequence.shape) - 1)
    return _searchsorted(sorted_sequence, values, right=_bool("searchsorted", "right", right),
                         out_dtype=mstype.int32 if _bool("searchsorted", "out_int32", out_int32) else mstype.int64)


# ------------------------------------------------------------------------------------------------
# bincount (the output length depends on the values: eager)
def bincount(input, weights=None, minlength=0):
    """`ops.bincount(input, weights=None, minlength=0)`: how often each value 0..max occurs in the
    1-D non-negative integer `input` (summing `weights` instead of 1s when given), at least
    `minlength` long. Float32 result, as MindSpore. Not differentiable."""
    C.integer("bincount", "input", input)
    if not isinstance(input, Tensor):
        raise C.OpTypeError("bincount", "a concrete Tensor 'input'", type(input).__name__)
    if len(input.shape) != 1:
        raise C.OpValueError("bincount", "a 1-D 'input'", f"shape {tuple(input.shape)}")
    minlength = _int("bincount", "minlength", minlength)
    if minlength < 0:
        raise C.OpValueError("bincount", "'minlength' >= 0", repr(minlength))
    a = input.asnumpy()
    if a.size and a.min() < 0:
        raise C.OpValueError("bincount", "non-negative 'input' values", str(int(a.min())))
    w = None
    if weights is not None:
        C.tensor("bincount", "weights", weights)
        if tuple(weights.shape) != tuple(input.shape):
            raise C.OpValueError("bincount", f"'weights' of input's shape {tuple(input.shape)}",
                                 f"shape {tuple(weights.shape)}")
        w = weights.asnumpy().astype(np.float64)
    # one bin per value up to the largest: refuse a huge largest value before NumPy sizes the output
    # (np.bincount of a value near 2**63 overflows that size and corrupts the heap)
    n_bins = max(int(a.max()) + 1 if a.size else 0, minlength)
    C.output_fits("bincount", (n_bins,), np.float64)
    return Tensor(np.bincount(a, weights=w, minlength=minlength).astype(np.float32))


__all__ = ["bincount", "count_nonzero", "cummax", "cummin", "median", "nansum", "searchsorted"]
