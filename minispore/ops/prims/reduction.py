"""Reduction primitives: sum, mean, and friends.

MindSpore's functional names and argument order: `ops.sum(input, dim=None, keepdim=False)`,
`ops.mean(input, axis=None, keep_dims=False)`, `ops.reduce_sum`... Backward rules broadcast the
incoming gradient back over the reduced axes.
"""
from __future__ import annotations

import warnings

import numpy as np

from ...common import dtype as mstype
from .. import _check as C
from .. import c_expr
from .. import costs
from .. import sharding_rules as SR
from ..primitive import AbstractTensor, defprim


def reduced_shape(shape, axes, keep_dims):
    if keep_dims:
        return tuple(1 if i in axes else s for i, s in enumerate(shape))
    return tuple(s for i, s in enumerate(shape) if i not in axes)


def _reduce_infer(name, float_result=False, int_to_int64=False):
    def infer(x, axis=(), keep_dims=False):
        C.tensor(name, "input", x)
        if keep_dims is not False and keep_dims is not True:
            C.bool_attr(name, "keep_dims", keep_dims)
        axes = C.axes(name, axis, len(x.shape))
        dt = x.dtype
        if float_result and dt.kind != "float":
            dt = mstype.float32
        if int_to_int64 and dt.kind in ("bool", "int", "uint"):
            dt = mstype.int64
        return AbstractTensor(reduced_shape(x.shape, axes, keep_dims), dt)
    return infer


def expand_reduced(g, x_shape, axis, keep_dims):
    """Reshape a reduced gradient so it broadcasts against the input (re-insert reduced axes)."""
    from .shape import reshape
    axes = C.axes("reduce", axis, len(x_shape))
    if not keep_dims:
        g = reshape(g, reduced_shape(x_shape, axes, True))
    return g


def _sum_kernel(a, axis=(), keep_dims=False):
    axes = tuple(range(a.ndim)) if axis is None or axis == () or a.ndim == 0 else axis
    out_dtype = np.int64 if a.dtype.kind in "biu" else None
    return np.sum(a, axis=axes, keepdims=keep_dims, dtype=out_dtype)


def _sum_bprop(inputs, out, dout, axis=(), keep_dims=False):
    from .shape import broadcast_to
    x = inputs[0]
    return (broadcast_to(expand_reduced(dout, x.shape, axis, keep_dims), x.shape),)


def _mean_kernel(a, axis=(), keep_dims=False):
    axes = tuple(range(a.ndim)) if axis is None or axis == () or a.ndim == 0 else axis
    dtype = np.float32 if a.dtype.kind in "biu" else None
    if a.size == 0:                       # the mean of an empty slice is nan, quietly (like PyTorch)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return np.mean(a, axis=axes, keepdims=keep_dims, dtype=dtype)
    return np.mean(a, axis=axes, keepdims=keep_dims, dtype=dtype)


def _mean_bprop(inputs, out, dout, axis=(), keep_dims=False):
    from .elementwise import div
    from .shape import broadcast_to
    x = inputs[0]
    axes = C.axes("mean", axis, len(x.shape))
    n = 1
    for a in axes:
        n *= x.shape[a]
    return (broadcast_to(div(expand_reduced(dout, x.shape, axis, keep_dims), float(n)), x.shape),)


_sum = defprim("reduce_sum", _reduce_infer("reduce_sum", int_to_int64=True), _sum_kernel, _sum_bprop,
               doc="sum over axes", fusion=c_expr.reduction("sum"), cost=costs.per_input_element(1), sharding=SR.reduce_sum)
_mean = defprim("reduce_mean", _reduce_infer("reduce_mean", float_result=True), _mean_kernel, _mean_bprop,
                doc="mean over axes", fusion=c_expr.reduction("mean"), cost=costs.per_input_element(1), sharding=SR.reduce_mean)


def _norm_axis(axis):
    """None / int / list / tuple (NumPy integers too) -> the attribute form (() = all axes)."""
    return () if axis is None else C.plain_ints(axis)


def reduce_sum(input, axis=(), keep_dims=False):
    """Sum over `axis` (None or () = all axes). Integer/bool inputs sum to Int64."""
    return _sum(input, axis=_norm_axis(axis), keep_dims=C.bool_attr("reduce_sum", "keep_dims", keep_dims))


def sum(input, dim=None, keepdim=False, *, dtype=None):
    """`ops.sum(input, dim=None, keepdim=False, *, dtype=None)`."""
    from .elementwise import cast
    out = _sum(input, axis=_norm_axis(dim), keep_dims=C.bool_attr("sum", "keepdim", keepdim))
    return cast(out, dtype) if dtype is not None else out


def reduce_mean(input, axis=(), keep_dims=False):
    return _mean(input, axis=_norm_axis(axis), keep_dims=C.bool_attr("reduce_mean", "keep_dims", keep_dims))


def mean(input, axis=None, keep_dims=False):
    """`ops.mean(input, axis=None, keep_dims=False)`; integer inputs give Float32."""
    return _mean(input, axis=_norm_axis(axis), keep_dims=C.bool_attr("mean", "keep_dims", keep_dims))


__all__ = ['mean', 'reduce_mean', 'reduce_sum', 'sum']
