"""More reductions: amax/amin, max/min with indices, argmax/argmin, prod, var/std, logsumexp,
cumsum/cumprod, all/any and norm.

MindSpore's functional names and argument order (which are not uniform — `ops.argmax(input, dim,
keepdim)` but `ops.argmin(input, axis, keepdims)`, `ops.logsumexp(input, axis, keep_dims)`); each
docstring gives the exact signature.

Gradient conventions:

* `amax`/`amin` split the gradient evenly between tied extreme elements (MindSpore's ReduceMax rule);
* `max`/`min` (which also return indices) send it only to the returned index (ArgMaxWithValue's);
* `prod` is exact even when the input contains zeros (products of the other elements are built
  from exclusive cumulative products, never by dividing by x); `cumprod`'s rule does divide by x,
  so it is exact only for non-zero inputs.
"""
from __future__ import annotations

import builtins
import math
import numbers
import warnings

import numpy as np

from ...common import dtype as mstype
from .. import _check as C
from .. import c_expr
from .. import costs
from .. import sharding_rules as SR
from ..primitive import AbstractTensor, defprim
from .activation import upcast_half
from .elementwise import abs, cast, div, equal, exp, maximum, minimum, mul, pow, sign, sub, where, zeros_like
from .reduction import expand_reduced, reduce_mean, reduce_sum, reduced_shape
from .shape import broadcast_to, reshape, transpose
from .sorting import scatter_add_along_axis

INDEX_DTYPE_WITH_VALUE = mstype.int64      # ops.max/min indices (MindSpore 2.10: Int64)
ARG_INDEX_DTYPE = mstype.int64             # ops.argmax (MindSpore: Int64)
ARGMIN_INDEX_DTYPE = mstype.int32          # ops.argmin: MindSpore 2.10 runs P.Argmin, whose default
                                           # output_type is Int32 (a 0-d input gives Int64 0)


# ------------------------------------------------------------------------------------------------
# shared argument handling
def bool_arg(op, arg, v):
    """A Python bool attribute (MindSpore raises TypeError for anything else)."""
    if not isinstance(v, (bool, np.bool_)):
        raise C.OpTypeError(op, f"'{arg}' to be a bool", f"{type(v).__name__} {v!r}")
    return bool(v)


def _axis_attr(axis):
    """None / int / list / tuple -> the attribute form inference and kernels read (() = all axes)."""
    return () if axis is None else C.plain_ints(axis)


def _np_axes(axis, ndim):
    """Attribute axis -> a tuple NumPy accepts (() means every axis; a 0-d input has none)."""
    if axis == () or axis is None or ndim == 0:
        return tuple(range(ndim))
    return axis if isinstance(axis, tuple) else (axis,)


def _axes_of(op, axis, ndim):
    """Validated, normalized, sorted axes; a 0-d input has none to reduce (axis 0/-1 is accepted)."""
    axes = C.axes(op, axis, ndim)
    return axes if ndim else ()


def _count(shape, axes):
    n = 1
    for a in axes:
        n *= shape[a]
    return n


def _broadcast_back(g, x_shape, axis, keep_dims):
    """A reduced gradient re-expanded to the input shape."""
    return broadcast_to(expand_reduced(g, x_shape, axis, keep_dims), x_shape)


def _numeric(op, x):
    C.tensor(op, "input", x)
    if x.dtype is mstype.bool_:
        raise C.OpTypeError(op, "'input' with a numeric dtype", str(x.dtype))
    return x


# ------------------------------------------------------------------------------------------------
# amax / amin (values only; ties share the gradient)
def _extreme_infer(name):
    def infer(x, axis=(), keep_dims=False, initial=None):
        _numeric(name, x)
        axes = _axes_of(name, axis, len(x.shape))
        if initial is None and builtins.any(x.shape[a] == 0 for a in axes):
            raise C.OpValueError(name, "a non-empty reduced axis, or 'initial'", f"input shape {tuple(x.shape)}")
        if initial is not None:
            if isinstance(initial, (bool, np.bool_)) or not isinstance(initial, numbers.Real):
                raise C.OpTypeError(name, "'initial' to be a number", f"{type(initial).__name__} {initial!r}"[:80])
            C.number_fits(name, "initial", x.dtype, initial)
        return AbstractTensor(reduced_shape(x.shape, axes, keep_dims), x.dtype)
    return infer


def _extreme_kernel(fn):
    def kernel(a, axis=(), keep_dims=False, initial=None):
        kw = {} if initial is None else {"initial": initial}
        return fn(a, axis=_np_axes(axis, a.ndim), keepdims=keep_dims, **kw)
    return kernel


def _extreme_bprop(inputs, out, dout, axis=(), keep_dims=False, initial=None):
    x = inputs[0]
    y = _broadcast_back(out, x.shape, axis, keep_dims)
    hit = cast(equal(x, y), x.dtype)
    # elements equal to the extreme share the gradient; if `initial` won, nobody gets any
    n = maximum(reduce_sum(hit, _np_axes(axis, len(x.shape)), keep_dims=True), 1.0)
    g = div(expand_reduced(dout, x.shape, axis, keep_dims), n)
    return (mul(hit, g),)


_amax = defprim("reduce_max", _extreme_infer("amax"), _extreme_kernel(np.amax), _extreme_bprop, doc="maximum over axes",
                fusion=c_expr.reduction("max"), cost=costs.per_input_element(1), sharding=SR.reduce_unsplit)
_amin = defprim("reduce_min", _extreme_infer("amin"), _extreme_kernel(np.amin), _extreme_bprop, doc="minimum over axes",
                fusion=c_expr.reduction("min"), cost=costs.per_input_element(1), sharding=SR.reduce_unsplit)


def _masked_input(op, input, initial, where_mask):
    if initial is not None and (isinstance(initial, bool) or not isinstance(initial, numbers.Real)):
        raise C.OpTypeError(op, "'initial' to be a real number or None", type(initial).__name__)
    if where_mask is None:
        return input
    if initial is None:
        raise C.OpValueError(op, "'initial' when 'where' is given (it fills the excluded positions)", "None")
    return where(where_mask, input, initial)


def amax(input, axis=None, keepdims=False, *, initial=None, where=None):
    """`ops.amax(input, axis=None, keepdims=False, *, initial=None, where=None)`: maximum over axes.

    `initial` is a lower bound on the result (needed for empty reductions); `where` (bool,
    broadcastable) excludes positions, which then count as `initial`. Tied maxima share the gradient."""
    x = _masked_input("amax", input, initial, where)
    return _amax(x, axis=_axis_attr(axis), keep_dims=bool_arg("amax", "keepdims", keepdims), initial=initial)


def amin(input, axis=None, keepdims=False, *, initial=None, where=None):
    """`ops.amin(input, axis=None, keepdims=False, *, initial=None, where=None)`: minimum over axes."""
    x = _masked_input("amin", input, initial, where)
    return _amin(x, axis=_axis_attr(axis), keep_dims=bool_arg("amin", "keepdims", keepdims), initial=initial)


# ------------------------------------------------------------------------------------------------
# max / min with indices
def _with_value_infer(name):
    def infer(x, axis=0, keep_dims=False):
        _numeric(name, x)
        ax = C.axis(name, axis, len(x.shape))
        if len(x.shape) == 0 or x.shape[ax] == 0:
            raise C.OpValueError(name, "a non-empty axis to reduce", f"input shape {tuple(x.shape)}")
        shape = reduced_shape(x.shape, (ax,), keep_dims)
        return AbstractTensor(shape, x.dtype), AbstractTensor(shape, INDEX_DTYPE_WITH_VALUE)
    return infer


def _with_value_kernel(argfn):
    def kernel(a, axis=0, keep_dims=False):
        idx = argfn(a, axis=axis, keepdims=True)          # the first extreme, as MindSpore
        vals = np.take_along_axis(a, idx, axis=axis)
        if not keep_dims:
            idx, vals = np.squeeze(idx, axis), np.squeeze(vals, axis)
        return vals, idx
    return kernel


def _with_value_bprop(inputs, out, dout, axis=0, keep_dims=False):
    x = inputs[0]
    ax = axis % len(x.shape)
    g = expand_reduced(dout[0], x.shape, ax, keep_dims)
    idx = expand_reduced(out[1], x.shape, ax, keep_dims)
    return (scatter_add_along_axis(g, idx, ax, x.shape[ax]),)


_max_with_value = defprim("argmax_with_value", _with_value_infer("max"), _with_value_kernel(np.argmax),
                          _with_value_bprop, doc="(max, index of the first max) along an axis",
                          cost=costs.per_input_element(1), sharding=SR.reduce_unsplit)
_min_with_value = defprim("argmin_with_value", _with_value_infer("min"), _with_value_kernel(np.argmin),
                          _with_value_bprop, doc="(min, index of the first min) along an axis",
                          cost=costs.per_input_element(1), sharding=SR.reduce_unsplit)


def _with_value(op, prim, input, axis, keepdims, initial, where_mask):
    C.tensor(op, "input", input)
    keepdims = bool_arg(op, "keepdims", keepdims)
    x = _masked_input(op, input, initial, where_mask)
    if initial is not None:
        x = (maximum if op == "max" else minimum)(x, initial)
    if axis is not None:
        if isinstance(axis, bool) or not isinstance(axis, numbers.Integral):
            raise C.OpTypeError(op, "'axis' to be an int or None", f"{type(axis).__name__} {axis!r}")
        if len(x.shape):
            return prim(x, axis=int(axis), keep_dims=keepdims)
        C.axis(op, axis, 0)                    # a 0-d input: axis 0 or -1, treated as axis=None
    # every element: reduce the flattened input; 0-d results (keepdims does not apply). The value
    # comes from amax/amin, so tied extremes share its gradient as in MindSpore (which reduces
    # with ReduceMax here); the index is that of the first extreme.
    _, index = prim(reshape(x, (-1,)) if len(x.shape) != 1 else x, axis=0, keep_dims=False)
    value = (_amax if op == "max" else _amin)(x, axis=(), keep_dims=False)
    return value, index


def max(input, axis=None, keepdims=False, *, initial=None, where=None):
    """`ops.max(input, axis=None, keepdims=False, *, initial=None, where=None)` -> (values, indices).

    Indices are Int64 (as MindSpore 2.10) and point at the first maximum. Along an axis
    the gradient flows only to that position; with axis=None tied maxima share it evenly (both as
    MindSpore). With axis=None the maximum of all elements is returned as 0-d
    tensors and `keepdims` is ignored, as in MindSpore; the index is the position in the
    flattened input (MindSpore 2.3 documents a fixed 0 there — minispore returns the real one).
    `initial` is a lower bound on the values; `where` (bool) replaces excluded positions by it."""
    return _with_value("max", _max_with_value, input, axis, keepdims, initial, where)


def min(input, axis=None, keepdims=False, *, initial=None, where=None):
    """`ops.min(input, axis=None, keepdims=False, *, initial=None, where=None)` -> (values, indices).

    The mirror of `ops.max`; `initial` is an upper bound on the values."""
    return _with_value("min", _min_with_value, input, axis, keepdims, initial, where)


# ------------------------------------------------------------------------------------------------
# argmax / argmin (indices only, Int64, not differentiable)
def _arg_infer(name, index_dtype):
    def infer(x, axis=None, keep_dims=False):
        C.tensor(name, "input", x)
        if axis is None:
            if 0 in x.shape:
                raise C.OpValueError(name, "a non-empty input", f"shape {tuple(x.shape)}")
            return AbstractTensor((), index_dtype)
        ax = C.axis(name, axis, len(x.shape))
        if len(x.shape) and x.shape[ax] == 0:
            raise C.OpValueError(name, "a non-empty axis to reduce", f"input shape {tuple(x.shape)}")
        return AbstractTensor(reduced_shape(x.shape, (ax,), keep_dims) if len(x.shape) else (), index_dtype)
    return infer


def _arg_kernel(fn):
    def kernel(a, axis=None, keep_dims=False):
        if axis is None or a.ndim == 0:
            return np.asarray(fn(a))                        # flat index (0 for a 0-d input)
        return fn(a, axis=axis, keepdims=keep_dims)
    return kernel


_argmax = defprim("argmax", _arg_infer("argmax", ARG_INDEX_DTYPE), _arg_kernel(np.argmax), None, doc="index of the first maximum",
                  cost=costs.per_input_element(1), sharding=SR.reduce_unsplit)
_argmin = defprim("argmin", _arg_infer("argmin", ARGMIN_INDEX_DTYPE), _arg_kernel(np.argmin), None, doc="index of the first minimum",
                  cost=costs.per_input_element(1), sharding=SR.reduce_unsplit)


def argmax(input, dim=None, keepdim=False):
    """`ops.argmax(input, dim=None, keepdim=False)`: Int64 index of the first maximum.

    dim=None: the index into the flattened input (keepdim is ignored)."""
    return _argmax(input, axis=dim, keep_dims=bool_arg("argmax", "keepdim", keepdim))


def argmin(input, axis=None, keepdims=False):
    """`ops.argmin(input, axis=None, keepdims=False)`: Int32 index of the first minimum (MindSpore
    2.10's dtype, unlike argmax's Int64; a 0-d input gives an Int64 0, as there).

    (MindSpore spells this one `axis`/`keepdims`, unlike argmax's `dim`/`keepdim`; with axis=None
    the index is into the flattened input and keepdims is ignored.)"""
    out = _argmin(input, axis=axis, keep_dims=bool_arg("argmin", "keepdims", keepdims) and axis is not None)
    return cast(out, mstype.int64) if len(out.shape) == 0 and len(input.shape) == 0 else out


# ------------------------------------------------------------------------------------------------
# cumsum / cumprod (with MindSpore's `exclusive` and `reverse` attributes)
def _cum_infer(name):
    def infer(x, axis=0, exclusive=False, reverse=False):
        C.tensor(name, "input", x)
        if len(x.shape) == 0:
            raise C.OpValueError(name, "an input with at least 1 dimension", "a 0-d tensor")
        C.axis(name, axis, len(x.shape))
        dt = mstype.int64 if x.dtype is mstype.bool_ else x.dtype
        return AbstractTensor(x.shape, dt)
    return infer


def _cum_kernel(fn, identity):
    def kernel(a, axis=0, exclusive=False, reverse=False):
        x = np.moveaxis(upcast_half(a), axis, -1)           # a view: work on the last axis
        if reverse:
            x = x[..., ::-1]
        c = fn(x, axis=-1, dtype=np.int64 if a.dtype == np.bool_ else None)
        if exclusive:                                       # shift right by one, fill with identity
            shifted = np.full_like(c, identity)
            shifted[..., 1:] = c[..., :-1]
            c = shifted
        if reverse:
            c = c[..., ::-1]
        return np.moveaxis(c, -1, axis)
    return kernel


def _cumsum_bprop(inputs, out, dout, axis=0, exclusive=False, reverse=False):
    # y_i = sum_{j<=i} x_j  =>  dx_j = sum_{i>=j} g_i: the same cumsum run the other way
    return (cumsum_op(dout, axis=axis, exclusive=exclusive, reverse=not reverse),)


def _cumprod_bprop(inputs, out, dout, axis=0, exclusive=False, reverse=False):
    # dy_i/dx_j = y_i / x_j for the j that y_i includes  =>  dx_j = (sum over those i of g_i y_i) / x_j.
    # Exact for non-zero x (prod's gradient does not use this rule, so it stays exact at zeros).
    x = inputs[0]
    return (div(cumsum_op(mul(dout, out), axis=axis, exclusive=exclusive, reverse=not reverse), x),)


_cumsum = defprim("cumsum", _cum_infer("cumsum"), _cum_kernel(np.cumsum, 0), _cumsum_bprop,
                  doc="cumulative sum along an axis", cost=costs.ELEMENTWISE, sharding=SR.scan)
_cumprod = defprim("cumprod", _cum_infer("cumprod"), _cum_kernel(np.cumprod, 1), _cumprod_bprop,
                   doc="cumulative product along an axis", cost=costs.ELEMENTWISE, sharding=SR.scan)


def cumsum_op(x, axis, exclusive=False, reverse=False):
    """The CumSum primitive with MindSpore's `exclusive` (drop the current element) and `reverse`
    (accumulate from the end) attributes."""
    return _cumsum(x, axis=axis, exclusive=bool_arg("cumsum", "exclusive", exclusive),
                   reverse=bool_arg("cumsum", "reverse", reverse))


def cumprod_op(x, axis, exclusive=False, reverse=False):
    """The CumProd primitive (see cumsum_op for the attributes)."""
    return _cumprod(x, axis=axis, exclusive=bool_arg("cumprod", "exclusive", exclusive),
                    reverse=bool_arg("cumprod", "reverse", reverse))


def cumsum(x, axis, dtype=None):
    """`ops.cumsum(x, axis, dtype=None)`: y_i = x_0 + ... + x_i along `axis`; `dtype` casts first."""
    if dtype is not None:
        x = cast(C.tensor("cumsum", "x", x), dtype)
    return cumsum_op(x, axis)


def cumprod(input, dim, dtype=None):
    """`ops.cumprod(input, dim, dtype=None)`: y_i = x_0 * ... * x_i along `dim`."""
    if dtype is not None:
        input = cast(C.tensor("cumprod", "input", input), dtype)
    return cumprod_op(input, dim)


# ------------------------------------------------------------------------------------------------
# prod
def _prod_infer(x, axis=(), keep_dims=False):
    C.tensor("prod", "input", x)
    axes = _axes_of("prod", axis, len(x.shape))
    dt = mstype.int64 if x.dtype is mstype.bool_ else x.dtype
    return AbstractTensor(reduced_shape(x.shape, axes, keep_dims), dt)


def _prod_kernel(a, axis=(), keep_dims=False):
    x = upcast_half(a)
    return np.prod(x, axis=_np_axes(axis, a.ndim), keepdims=keep_dims,
                   dtype=np.int64 if a.dtype == np.bool_ else None)


def _prod_bprop(inputs, out, dout, axis=(), keep_dims=False):
    """d prod / d x_j = product of the other elements = (exclusive cumprod from the left) *
    (exclusive cumprod from the right). Reduced axes are first moved last and flattened into one."""
    x = inputs[0]
    nd = len(x.shape)
    axes = _axes_of("prod", axis, nd)
    kept = tuple(i for i in range(nd) if i not in axes)
    perm = kept + axes
    xt = transpose(x, perm) if perm != tuple(range(nd)) else x
    flat = reshape(xt, tuple(x.shape[i] for i in kept) + (_count(x.shape, axes),))
    last = len(kept)
    others = mul(cumprod_op(flat, last, exclusive=True), cumprod_op(flat, last, exclusive=True, reverse=True))
    others = reshape(others, xt.shape)
    if perm != tuple(range(nd)):
        inv = [0] * nd
        for i, p in enumerate(perm):
            inv[p] = i
        others = transpose(others, tuple(inv))
    return (mul(others, _broadcast_back(dout, x.shape, axis, keep_dims)),)


_prod = defprim("reduce_prod", _prod_infer, _prod_kernel, _prod_bprop, doc="product over axes",
                cost=costs.per_input_element(1), sharding=SR.reduce_unsplit)


def prod(input, axis=None, keep_dims=False):
    """`ops.prod(input, axis=None, keep_dims=False)`: product over `axis` (None = all).

    The gradient is exact when the input contains zeros."""
    return _prod(input, axis=_axis_attr(axis), keep_dims=bool_arg("prod", "keep_dims", keep_dims))


# ------------------------------------------------------------------------------------------------
# var / std
def _moment_infer(name):
    def infer(x, axis=(), ddof=0, keep_dims=False):
        _numeric(name, x)
        axes = _axes_of(name, axis, len(x.shape))
        dt = x.dtype if x.dtype.is_floating else mstype.float32
        return AbstractTensor(reduced_shape(x.shape, axes, keep_dims), dt)
    return infer


def _var_kernel(a, axis=(), ddof=0, keep_dims=False):
    x = upcast_half(a)
    if x.dtype.kind in "iu":
        x = x.astype(np.float32)
    axes = _np_axes(axis, a.ndim)
    if _count(a.shape, axes) > ddof:
        return np.var(x, axis=axes, ddof=ddof, keepdims=keep_dims)
    with warnings.catch_warnings():            # N - ddof <= 0 gives inf/nan, as NumPy, without a warning
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.var(x, axis=axes, ddof=ddof, keepdims=keep_dims)


def _std_kernel(a, axis=(), ddof=0, keep_dims=False):
    return np.sqrt(_var_kernel(a, axis, ddof, keep_dims))


def _centered(x, axis):
    return sub(x, reduce_mean(x, _np_axes(axis, len(x.shape)), keep_dims=True))


def _var_bprop(inputs, out, dout, axis=(), ddof=0, keep_dims=False):
    # var = sum((x - mean)^2) / (N - ddof)  =>  dx = 2 (x - mean) / (N - ddof) * g
    x = inputs[0]
    n = _count(x.shape, _axes_of("var", axis, len(x.shape))) - ddof
    g = expand_reduced(dout, x.shape, axis, keep_dims)
    return (mul(_centered(x, axis), mul(g, 2.0 / n if n else math.inf)),)


def _std_bprop(inputs, out, dout, axis=(), ddof=0, keep_dims=False):
    # std = sqrt(var)  =>  dx = (x - mean) / ((N - ddof) std) * g
    x = inputs[0]
    n = _count(x.shape, _axes_of("std", axis, len(x.shape))) - ddof
    g = div(expand_reduced(dout, x.shape, axis, keep_dims), expand_reduced(out, x.shape, axis, keep_dims))
    return (mul(_centered(x, axis), mul(g, 1.0 / n if n else math.inf)),)


_var = defprim("reduce_var", _moment_infer("var"), _var_kernel, _var_bprop, doc="variance over axes",
               cost=costs.per_input_element(3), sharding=SR.reduce_unsplit)
_std = defprim("reduce_std", _moment_infer("std"), _std_kernel, _std_bprop, doc="standard deviation over axes",
               cost=costs.per_input_element(3), sharding=SR.reduce_unsplit)


def _ddof_arg(op, ddof):
    if isinstance(ddof, (bool, np.bool_)):
        return int(ddof)                       # MindSpore accepts a bool: True = unbiased (ddof=1)
    ddof = C.int_attr(op, "ddof", ddof, minimum=0)
    if ddof >= 2**63:                          # (NumPy takes a C long; any ddof >= N gives inf/nan anyway)
        raise C.OpValueError(op, "'ddof' below 2**63", repr(ddof))
    return ddof


def var(input, axis=None, ddof=0, keepdims=False):
    """`ops.var(input, axis=None, ddof=0, keepdims=False)`: mean of squared deviations, divided by
    N - ddof instead of N (`ddof=True` means 1). Integer inputs give Float32."""
    return _var(input, axis=_axis_attr(axis), ddof=_ddof_arg("var", ddof),
                keep_dims=bool_arg("var", "keepdims", keepdims))


def std(input, axis=None, ddof=0, keepdims=False):
    """`ops.std(input, axis=None, ddof=0, keepdims=False)`: sqrt of `ops.var`."""
    return _std(input, axis=_axis_attr(axis), ddof=_ddof_arg("std", ddof),
                keep_dims=bool_arg("std", "keepdims", keepdims))


def var_mean(input, axis=None, ddof=0, keepdims=False):
    """`ops.var_mean(...)` -> (var, mean) over the same axes."""
    return var(input, axis, ddof, keepdims), reduce_mean(input, _axis_attr(axis), keepdims)


def std_mean(input, axis=None, ddof=0, keepdims=False):
    """`ops.std_mean(...)` -> (std, mean) over the same axes."""
    return std(input, axis, ddof, keepdims), reduce_mean(input, _axis_attr(axis), keepdims)


# ------------------------------------------------------------------------------------------------
# logsumexp
def _logsumexp_infer(x, axis=(), keep_dims=False):
    _numeric("logsumexp", x)
    axes = _axes_of("logsumexp", axis, len(x.shape))
    dt = x.dtype if x.dtype.is_floating else mstype.float32
    return AbstractTensor(reduced_shape(x.shape, axes, keep_dims), dt)


def _logsumexp_kernel(a, axis=(), keep_dims=False):
    x = upcast_half(a)
    if x.dtype.kind in "iu":
        x = x.astype(np.float32)
    axes = _np_axes(axis, a.ndim)
    if x.size == 0 or builtins.any(x.shape[i] == 0 for i in axes):
        with np.errstate(divide="ignore"):
            return np.log(np.sum(np.exp(x), axis=axes, keepdims=keep_dims))   # log(0) = -inf
    m = np.max(x, axis=axes, keepdims=True)
    if np.isfinite(m).all():
        # the largest term is exp(0) = 1: no overflow, and the log never sees 0
        s = np.log(np.sum(np.exp(x - m), axis=axes, keepdims=True)) + m
    else:                                                   # rows of all -inf (or holding +inf)
        m = np.where(np.isfinite(m), m, 0)
        with np.errstate(divide="ignore", invalid="ignore"):
            s = np.log(np.sum(np.exp(x - m), axis=axes, keepdims=True)) + m
    return s if keep_dims else np.squeeze(s, axis=axes)


def _logsumexp_bprop(inputs, out, dout, axis=(), keep_dims=False):
    # d/dx log sum exp(x) = exp(x - lse) = softmax(x)
    x = inputs[0]
    lse = expand_reduced(out, x.shape, axis, keep_dims)
    return (mul(exp(sub(x, lse)), expand_reduced(dout, x.shape, axis, keep_dims)),)


_logsumexp = defprim("logsumexp", _logsumexp_infer, _logsumexp_kernel, _logsumexp_bprop,
                     doc="log(sum(exp(x))) over axes, stable", cost=costs.per_input_element(4), sharding=SR.reduce_unsplit)


def logsumexp(input, axis, keep_dims=False):
    """`ops.logsumexp(input, axis, keep_dims=False)`: log(sum(exp(input))) over `axis`, computed as
    max + log(sum(exp(input - max))) so large inputs do not overflow."""
    return _logsumexp(input, axis=_axis_attr(axis), keep_dims=bool_arg("logsumexp", "keep_dims", keep_dims))


# ------------------------------------------------------------------------------------------------
# all / any
def _logic_infer(name):
    def infer(x, axis=(), keep_dims=False):
        C.tensor(name, "input", x)
        axes = _axes_of(name, axis, len(x.shape))
        return AbstractTensor(reduced_shape(x.shape, axes, keep_dims), mstype.bool_)
    return infer


def _logic_kernel(fn):
    def kernel(a, axis=(), keep_dims=False):
        return fn(a, axis=_np_axes(axis, a.ndim), keepdims=keep_dims)
    return kernel


_all = defprim("reduce_all", _logic_infer("all"), _logic_kernel(np.all), None, doc="logical and over axes",
               cost=costs.per_input_element(1), sharding=SR.reduce_unsplit)
_any = defprim("reduce_any", _logic_infer("any"), _logic_kernel(np.any), None, doc="logical or over axes",
               cost=costs.per_input_element(1), sharding=SR.reduce_unsplit)


def all(input, axis=None, keep_dims=False):
    """`ops.all(input, axis=None, keep_dims=False)`: True where every element (non-zero) is True."""
    return _all(input, axis=_axis_attr(axis), keep_dims=bool_arg("all", "keep_dims", keep_dims))


def any(input, axis=None, keep_dims=False):
    """`ops.any(input, axis=None, keep_dims=False)`: True where some element is True (non-zero)."""
    return _any(input, axis=_axis_attr(axis), keep_dims=bool_arg("any", "keep_dims", keep_dims))


# ------------------------------------------------------------------------------------------------
# vector p-norms (one primitive); matrix norms are composed from it and amax/amin
def _vnorm_infer(x, ord=2.0, axis=(), keep_dims=False):
    C.floating("norm", "input", x)
    axes = _axes_of("norm", axis, len(x.shape))
    return AbstractTensor(reduced_shape(x.shape, axes, keep_dims), x.dtype)


def _vnorm_kernel(a, ord=2.0, axis=(), keep_dims=False):
    x = np.abs(upcast_half(a))
    axes = _np_axes(axis, a.ndim)
    kw = dict(axis=axes, keepdims=keep_dims)
    if ord == 2:
        return np.sqrt(np.sum(x * x, **kw))
    if ord == 1:
        return np.sum(x, **kw)
    if ord == math.inf:
        return np.max(x, initial=0, **kw)
    if ord == -math.inf:
        return np.min(x, initial=math.inf, **kw)
    if ord == 0:
        return np.sum(x != 0, dtype=x.dtype, **kw)
    with np.errstate(divide="ignore"):
        return np.sum(x ** ord, **kw) ** (1.0 / ord)


def _vnorm_bprop(inputs, out, dout, ord=2.0, axis=(), keep_dims=False):
    x = inputs[0]
    g = expand_reduced(dout, x.shape, axis, keep_dims)
    if ord == 0:
        return (zeros_like(x),)
    if ord == 1:
        return (mul(sign(x), g),)
    n = expand_reduced(out, x.shape, axis, keep_dims)
    if ord in (math.inf, -math.inf):           # ties for the extreme |x| share the gradient
        hit = cast(equal(abs(x), n), x.dtype)
        count = reduce_sum(hit, _np_axes(axis, len(x.shape)), keep_dims=True)
        return (mul(mul(sign(x), hit), div(g, maximum(count, 1.0))),)
    safe_n = where(equal(n, 0.0), 1.0, n)      # the zero vector: subgradient 0 (x is 0 there)
    if ord == 2:
        return (mul(div(x, safe_n), g),)
    # d/dx (sum |x|^p)^(1/p) = sign(x) |x|^(p-1) / n^(p-1)
    return (mul(mul(sign(x), div(pow(abs(x), ord - 1.0), pow(safe_n, ord - 1.0))), g),)


_vector_norm = defprim("vector_norm", _vnorm_infer, _vnorm_kernel, _vnorm_bprop, doc="vector p-norm over axes",
                       cost=costs.per_input_element(2), sharding=SR.reduce_unsplit)


def _ord_arg(op, ord):
    if isinstance(ord, bool) or not isinstance(ord, numbers.Real):
        raise C.OpValueError(op, "a vector 'ord': a real number, inf or -inf", repr(ord))
    return float(ord)


def vector_norm(x, ord=2, axis=None, keepdims=False, *, dtype=None):
    """`ops.vector_norm(x, ord=2, axis=None, keepdims=False, *, dtype=None)`.

    ord: 2 (Euclidean), inf (max |x|), -inf (min |x|), 0 (count of non-zeros), any other real p
    (sum |x|^p)^(1/p). axis=None flattens."""
    if dtype is not None:
        x = cast(C.tensor("norm", "input", x), dtype)
    return _vector_norm(x, ord=_ord_arg("norm", ord), axis=_axis_attr(axis),
                        keep_dims=bool_arg("norm", "keepdims", keepdims))


_MATRIX_ORDS = ("fro", math.inf, -math.inf, 1, -1)


def matrix_norm(A, ord="fro", axis=(-2, -1), keepdims=False, *, dtype=None):
    """`ops.matrix_norm(A, ord='fro', axis=(-2, -1), keepdims=False, *, dtype=None)`.

    ord: 'fro' (Frobenius), inf / -inf (max / min absolute row sum), 1 / -1 (max / min absolute
    column sum). The singular-value norms ('nuc', 2, -2) need an SVD primitive minispore does not
    have yet, and are rejected with a clear error."""
    C.tensor("norm", "A", A)
    if dtype is not None:
        A = cast(A, dtype)
    if not isinstance(axis, (tuple, list)) or len(axis) != 2:
        raise C.OpValueError("norm", "a matrix 'dim' of two axes", repr(axis))
    nd = len(A.shape)
    r, c = C.axis("norm", axis[0], nd), C.axis("norm", axis[1], nd)
    if r == c:
        raise C.OpValueError("norm", "two different matrix axes", repr(tuple(axis)))
    if ord in ("nuc", 2, -2) and not isinstance(ord, bool):
        raise C.OpValueError("norm", "a matrix 'ord' in ('fro', inf, -inf, 1, -1) (the singular-value norms "
                             "need an SVD, which minispore does not have yet)", repr(ord))
    if isinstance(ord, bool) or ord not in _MATRIX_ORDS:
        raise C.OpValueError("norm", "a matrix 'ord' in ('fro', 'nuc', inf, -inf, 1, -1, 2, -2)", repr(ord))
    keepdims = bool_arg("norm", "keepdims", keepdims)
    if ord == "fro":
        return _vector_norm(A, ord=2.0, axis=(r, c), keep_dims=keepdims)
    # inf: max over rows of the absolute row sums (sum over columns); 1: the transpose
    summed, reduce_over = (c, r) if ord in (math.inf, -math.inf) else (r, c)
    sums = reduce_sum(abs(A), summed, keep_dims=True)
    pick = amax if ord > 0 else amin
    out = pick(sums, axis=reduce_over, keepdims=True)
    if not keepdims:
        out = reshape(out, tuple(s for i, s in enumerate(A.shape) if i not in (r, c)))
    return out


def norm(A, ord=None, dim=None, keepdim=False, *, dtype=None):
    """`ops.norm(A, ord=None, dim=None, keepdim=False, *, dtype=None)`.

    * ord=None: the 2-norm of the flattened input (dim=None), of vectors along an int `dim`, or the
      Frobenius norm over a 2-tuple `dim`.
    * dim an int (or None with a 1-D input): a vector norm, see `vector_norm`.
    * dim a 2-tuple (or None with a 2-D input): a matrix norm, see `matrix_norm`.
    """
    C.tensor("norm", "A", A)
    dim = C.plain_ints(dim)
    if isinstance(dim, tuple) and len(dim) == 1:
        dim = dim[0]
    if ord is None:
        if isinstance(dim, tuple) and len(dim) != 2:
            raise C.OpValueError("norm", "'dim' as None, an int, or a 2-tuple", repr(dim))
        return vector_norm(A, 2, dim, keepdim, dtype=dtype)
    if dim is None:
        if len(A.shape) == 1:
            return vector_norm(A, ord, None, keepdim, dtype=dtype)
        if len(A.shape) == 2:
            return matrix_norm(A, ord, (0, 1), keepdim, dtype=dtype)
        raise C.OpValueError("norm", "a 1-D or 2-D input when 'ord' is given and 'dim' is None",
                             f"a {len(A.shape)}-D input")
    if isinstance(dim, tuple):
        return matrix_norm(A, ord, dim, keepdim, dtype=dtype)
    if isinstance(ord, str):
        raise C.OpValueError("norm", "a numeric 'ord' for a vector norm", repr(ord))
    return vector_norm(A, ord, dim, keepdim, dtype=dtype)


__all__ = ["all", "amax", "amin", "any", "argmax", "argmin", "cumprod", "cumsum", "logsumexp", "matrix_norm",
           "max", "min", "norm", "prod", "std", "std_mean", "var", "var_mean", "vector_norm"]
