"""Operators and methods of `Tensor`, attached here because they are ops (ops sit above Tensor).

`a + b` is `ops.add(a, b)`, `a @ b` is `ops.matmul(a, b)`, `t.sum()` is `ops.sum(t)`, and so on;
there is no second implementation anywhere.

Many MindSpore 2.x methods accept several call forms: a PyTorch-style one (`x.sum(dim, keepdim)`,
`x.max(dim)` giving `(values, indices)`, `x.transpose(dim0, dim1)`) and the older NumPy-style one
(`x.sum(axis, dtype, keepdims)`, `x.max(axis=1)` giving values only, `x.transpose(*axes)`).
MindSpore picks the first form whose parameter names and types fit the call; the `_overloads`
below do the same, in MindSpore's order, so a call means here what it means there (checked
against MindSpore 2.10 by tests/fidelity/cases/tensor.py).
"""
from __future__ import annotations

import functools
import numbers

import numpy as np

from ..common import dtype as mstype
from ..common.errors import OpTypeError, OpValueError
from ..common.tensor import Tensor, _wrap, from_numpy
from . import _check as C
from . import functional as F


def _host_operand(a):
    """A NumPy array operand (`ndarray + Tensor`) as a constant Tensor, without copying it."""
    return from_numpy(a) if a.dtype in mstype._BY_NP else Tensor(a)


def _binary(fn, reflected=False):
    if reflected:
        return lambda self, other: fn(_host_operand(other) if isinstance(other, np.ndarray) else other, self)
    return lambda self, other: fn(self, _host_operand(other) if isinstance(other, np.ndarray) else other)


_OPERATORS = {
    "__add__": _binary(F.add), "__radd__": _binary(F.add, True),
    "__sub__": _binary(F.sub), "__rsub__": _binary(F.sub, True),
    "__mul__": _binary(F.mul), "__rmul__": _binary(F.mul, True),
    "__truediv__": _binary(F.div), "__rtruediv__": _binary(F.div, True),
    "__floordiv__": _binary(F.floor_divide), "__rfloordiv__": _binary(F.floor_divide, True),
    "__mod__": _binary(F.remainder), "__rmod__": _binary(F.remainder, True),
    "__pow__": _binary(F.pow), "__rpow__": _binary(F.pow, True),
    "__matmul__": _binary(F.matmul), "__rmatmul__": _binary(F.matmul, True),
    "__eq__": _binary(F.equal), "__ne__": _binary(F.not_equal),
    "__lt__": _binary(F.less), "__le__": _binary(F.less_equal),
    "__gt__": _binary(F.greater), "__ge__": _binary(F.greater_equal),
    "__and__": _binary(F.logical_and), "__or__": _binary(F.logical_or), "__xor__": _binary(F.logical_xor),
    "__neg__": lambda self: F.neg(self),
    "__abs__": lambda self: F.abs(self),
    "__invert__": lambda self: F.logical_not(self),
    "__pos__": lambda self: self,
}

# Methods that are exactly the functional op with the tensor first. A name is attached only if the
# op exists (some are being added to ops/prims/ in parallel; they appear here once they land).
_SAME_NAME = ["abs", "exp", "log", "sqrt", "rsqrt", "square", "sin", "cos", "erf", "floor", "ceil", "round",
              "sign", "neg", "reciprocal", "isnan", "isinf", "isfinite", "matmul", "maximum", "minimum",
              "pow", "mul", "div", "equal", "broadcast_to",
              "relu", "sigmoid", "tanh", "softmax", "log_softmax", "logsumexp",
              "expand_dims", "unsqueeze", "tril", "triu", "index_select", "masked_fill", "topk",
              "repeat_interleave", "clamp", "clip", "norm", "scatter", "addmm", "cumprod",
              # comparison / arithmetic spellings
              "eq", "ne", "lt", "le", "gt", "ge", "greater", "greater_equal", "less", "less_equal",
              "not_equal", "logical_and", "logical_or", "logical_not", "logical_xor", "multiply", "divide",
              "subtract", "true_divide", "floor_divide", "remainder", "negative", "absolute",
              # ops added by issue 11 (ops/prims/): attached as soon as they exist
              "log1p", "expm1", "tan", "atan2", "arctan2", "mm", "outer", "median", "narrow", "unbind",
              "masked_select", "nonzero", "sinh", "cosh", "asin", "acos", "atan", "log2", "log10", "exp2",
              "erfc", "trunc", "frac", "fmod", "xlogy", "lerp", "addcmul", "addcdiv", "bmm", "dot", "inner",
              "trace", "diag", "diagonal", "cummax", "cummin", "nansum", "count_nonzero", "isclose",
              "allclose", "roll", "unique", "scatter_add", "index_add", "index_fill", "take", "rot90",
              "fliplr", "flipud", "hardshrink", "softsign", "logit", "nan_to_num", "bincount",
              "searchsorted", "float_power", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not",
              "fmax", "fmin", "hypot", "logaddexp", "copysign", "tensor_split", "hsplit", "vsplit"]
_SAME_NAME += ["acosh", "addmv", "addr", "aminmax", "arccos", "arccosh", "arcsin", "arcsinh", "arctan", "arctanh", "argwhere", "asinh", "atanh", "baddbmm", "bitwise_left_shift", "bitwise_right_shift", "cholesky", "cholesky_inverse", "cholesky_solve", "cross", "deg2rad", "det", "diagflat", "diff", "digamma", "dsplit", "erfinv", "gather_elements", "gather_nd", "gcd", "ger", "heaviside", "i0", "igamma", "igammac", "inverse", "invert", "is_complex", "is_floating_point", "isneginf", "isposinf", "lcm", "ldexp", "lgamma", "logaddexp2", "logcumsumexp", "logdet", "lstsq", "matrix_power", "nanmean", "positive", "qr", "rad2deg", "reverse", "sgn", "signbit", "sinc", "slogdet", "soft_shrink", "svd", "xdivy"]   # the linalg / special / bitwise long tail


# -- overload matching (MindSpore's rule: the first signature that fits the call wins) -------------

def _bind(args, kwargs, names, kwonly=()):
    """Bind positional `args` to `names` in order and keywords by name; None when the call does not
    fit (too many positionals, an unknown keyword, or one given twice)."""
    if len(args) > len(names):
        return None
    bound = dict(zip(names, args))
    for k, v in kwargs.items():
        if k in bound or (k not in names and k not in kwonly):
            return None
        bound[k] = v
    return bound


def _is_int(v):
    return isinstance(v, numbers.Integral) and not isinstance(v, (bool, np.bool_))


def _is_bool(v):
    return isinstance(v, (bool, np.bool_))


def _is_axes(v):
    """None, an int, or a tuple/list of ints (what `dim`/`axis` of a reduction may be)."""
    return v is None or _is_int(v) or (isinstance(v, (tuple, list)) and all(_is_int(a) for a in v))


def _int_seq(values):
    return isinstance(values, (tuple, list)) and all(_is_int(v) for v in values)


def _no_overload(name, args, kwargs, forms):
    shown = ", ".join([type(a).__name__ for a in args] + [f"{k}={type(v).__name__}" for k, v in kwargs.items()])
    return OpTypeError(f"Tensor.{name}", "one of the call forms " + "; ".join(f"{name}({f})" for f in forms),
                       f"{name}({shown})")


def _shape_args(name, args, kwargs, key="shape"):
    """`f(2, 3)`, `f((2, 3))`, `f([2, 3])` or `f(shape=(2, 3))` -> (2, 3): MindSpore's varargs forms."""
    if kwargs:
        if set(kwargs) != {key} or args:
            raise _no_overload(name, args, kwargs, [f"*{key}", f"{key}"])
        args = (kwargs[key],)
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        args = tuple(args[0])
    elif len(args) == 1 and isinstance(args[0], np.ndarray) and args[0].dtype.kind in "iu" and args[0].ndim == 1:
        args = tuple(args[0].tolist())              # a 1-d integer array stands for a tuple, as in ops
    elif len(args) == 1 and isinstance(args[0], Tensor) and args[0].dtype.kind in ("int", "uint"):
        args = tuple(args[0].asnumpy().reshape(-1).tolist())
    if not all(_is_int(a) or isinstance(a, Tensor) and a.size == 1 and a.dtype.kind in ("int", "uint")
               for a in args):
        raise OpTypeError(f"Tensor.{name}", f"'{key}' as ints or one tuple/list of ints",
                          repr(args)[:80])
    return tuple(int(a) for a in args)


# -- shape methods ---------------------------------------------------------------------------------

def _reshape(self, *shape, **kwargs):
    if len(shape) == 1 and type(shape[0]) is tuple and not kwargs:      # (the common case, fast)
        return F.reshape(self, shape[0])
    return F.reshape(self, _shape_args("reshape", shape, kwargs))


def _view(self, *shape, **kwargs):
    """`view(*shape)` reshapes; `view(dtype)` reinterprets the bytes as another dtype (as MindSpore)."""
    if len(shape) == 1 and not kwargs and isinstance(shape[0], mstype.DType):
        return _view_dtype(self, shape[0])
    return _reshape(self, *shape, **kwargs)


def _view_dtype(self, d):
    arr = self._data
    if not isinstance(arr, np.ndarray):
        raise OpTypeError("Tensor.view", "a concrete tensor for view(dtype) (a bit reinterpretation)",
                          "a symbolic tensor inside jit")
    if arr.ndim == 0 and d.itemsize != arr.itemsize or arr.ndim and (arr.shape[-1] * arr.itemsize) % d.itemsize:
        raise OpValueError("Tensor.view", f"a last dimension whose byte size divides by {d.itemsize} ({d})",
                           f"shape {arr.shape} of {self.dtype}")
    if arr.ndim == 0:
        return _wrap(arr.reshape(1).view(d.np).reshape(()))
    return _wrap(np.ascontiguousarray(arr).view(d.np))


def _transpose(self, *axes, **kwargs):
    """`transpose()` reverses the axes; `transpose(dim0, dim1)` swaps two (the PyTorch form,
    tried first by MindSpore); `transpose(*axes)` / `transpose(axes_tuple)` permutes."""
    if kwargs:
        b = _bind(axes, kwargs, ("dim0", "dim1"))
        if b is None or set(b) != {"dim0", "dim1"}:
            raise _no_overload("transpose", axes, kwargs, ["dim0, dim1", "*axes"])
        return _swapaxes(self, b["dim0"], b["dim1"])
    nd = self.ndim
    if not axes:
        return F.transpose(self, tuple(range(nd - 1, -1, -1)))
    if len(axes) == 2 and _is_int(axes[0]) and _is_int(axes[1]):
        return _swapaxes(self, axes[0], axes[1])
    if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
        axes = tuple(axes[0])
    if len(axes) != nd:
        raise OpValueError("Tensor.transpose", f"{nd} axes (one per dimension), or two dims to swap",
                           f"{len(axes)} axes {tuple(axes)}")
    return F.transpose(self, tuple(axes))


def _permute(self, *dims, **kwargs):
    return F.permute(self, _shape_args("permute", dims, kwargs, key="dims"))


def _normalized_dim(name, d, nd):
    if not _is_int(d):
        raise OpTypeError(f"Tensor.{name}", "an int dimension", type(d).__name__)
    if not -max(nd, 1) <= d < max(nd, 1):
        raise OpValueError(f"Tensor.{name}", f"a dimension in [{-max(nd, 1)}, {max(nd, 1)})", str(d))
    return d % max(nd, 1)


def _swapaxes(self, axis0, axis1):
    nd = self.ndim
    a, b = _normalized_dim("swapaxes", axis0, nd), _normalized_dim("swapaxes", axis1, nd)
    if nd == 0:                                   # dims 0 / -1 of a 0-d tensor: nothing to swap
        return F.transpose(self, ())
    perm = list(range(nd))
    perm[a], perm[b] = perm[b], perm[a]
    return F.transpose(self, tuple(perm))


def _dims_list(name, arg, v):
    """An int or a tuple/list (or 1-d integer ndarray) of ints -> a list of ints."""
    v = C.plain_ints(v)
    if _is_int(v):
        return [v]
    if not _int_seq(v):
        raise OpTypeError(f"Tensor.{name}", f"'{arg}' as an int or a tuple of ints", f"{type(v).__name__} {v!r}"[:80])
    return list(v)


def _moveaxis(self, source, destination):
    nd = self.ndim
    if nd == 0:                                   # (ops.moveaxis refuses a 0-d input by name)
        return F.moveaxis(self, source, destination)
    src = _dims_list("moveaxis", "source", source)
    dst = _dims_list("moveaxis", "destination", destination)
    if len(src) != len(dst):
        raise OpValueError("Tensor.moveaxis", "as many destination as source axes", f"{src} and {dst}")
    src = [_normalized_dim("moveaxis", s, nd) for s in src]
    dst = [_normalized_dim("moveaxis", d, nd) for d in dst]
    if len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise OpValueError("Tensor.moveaxis", "no dimension repeated in 'source' or in 'destination'",
                           f"{source!r} and {destination!r}"[:80])
    rest = [i for i in range(nd) if i not in src]
    perm = [None] * nd
    for s, d in zip(src, dst):
        perm[d] = s
    it = iter(rest)
    perm = [p if p is not None else next(it) for p in perm]
    return F.transpose(self, tuple(perm))


def _mT(self):
    if self.ndim < 2:
        raise OpValueError("Tensor.mT", "a tensor with at least 2 dimensions", f"{self.ndim}-D")
    return _swapaxes(self, -2, -1)


def _t(self):
    """`t()`: transpose of a matrix (a 0-D or 1-D tensor is returned as is)."""
    if self.ndim > 2:
        raise OpValueError("Tensor.t", "a tensor with at most 2 dimensions", f"{self.ndim}-D")
    return _swapaxes(self, 0, 1) if self.ndim == 2 else self


def _H(self):
    if self.ndim != 2:
        raise OpValueError("Tensor.H", "a 2-D tensor", f"{self.ndim}-D")
    return _swapaxes(self, 0, 1)              # (real dtypes only: the conjugate is the tensor itself)


def _expand(self, *size):
    """`expand(*size)` / `expand(size_tuple)` / `expand(size_tensor)`; -1 keeps that dimension."""
    target = _shape_args("expand", size, {}, key="size")
    shape = self.shape
    lead = len(target) - len(shape)
    if lead < 0:
        raise OpValueError("Tensor.expand", f"at least {len(shape)} sizes for a {len(shape)}-D tensor",
                           f"{len(target)} sizes {target}")
    full = tuple(shape[i - lead] if s == -1 and i >= lead else s for i, s in enumerate(target))
    return F.broadcast_to(self, full)


def _other_tensor(name, other):
    if not isinstance(other, Tensor):
        raise OpTypeError(f"Tensor.{name}", "'other' to be a Tensor", f"{type(other).__name__} {other!r}"[:80])
    return other


def _expand_as(self, other):
    return F.broadcast_to(self, tuple(_other_tensor("expand_as", other).shape))


def _view_as(self, other):
    return F.reshape(self, tuple(_other_tensor("view_as", other).shape))


def _tile(self, *dims, **kwargs):
    if kwargs:
        key = next(iter(kwargs))
        if len(kwargs) != 1 or key not in ("dims", "reps"):
            raise _no_overload("tile", dims, kwargs, ["dims", "reps"])
        return F.tile(self, _shape_args("tile", dims, kwargs, key=key))
    return F.tile(self, _shape_args("tile", dims, {}, key="dims"))


def _repeat(self, *repeats):
    """`repeat(*repeats)`: PyTorch's repeat (tile the whole tensor), MindSpore 2.x's Tensor.repeat.
    (MindSpore 2.10's CPU build refuses it: "'repeat' is not supported on this device".)"""
    reps = _shape_args("repeat", repeats, {}, key="repeats")
    if len(reps) < self.ndim:
        raise OpValueError("Tensor.repeat", f"at least {self.ndim} repeats (one per dimension)", str(reps))
    return F.tile(self, reps)


def _squeeze(self, axis=None):
    """`squeeze(axis=None)`; an axis whose size is not 1 is left alone (as MindSpore's Tensor method)."""
    if axis is None:
        return F.squeeze(self)
    nd = self.ndim
    if nd == 0:                                   # (ops.squeeze checks axis 0 / -1 of a 0-d tensor)
        return F.squeeze(self, axis)
    axes = _dims_list("squeeze", "axis", axis)
    keep = tuple(a for a in axes if self.shape[_normalized_dim("squeeze", a, nd)] == 1)
    if not keep:
        return F.reshape(self, self.shape)
    return F.squeeze(self, keep if len(keep) > 1 else keep[0])


def _flatten(self, *args, **kwargs):
    """`flatten(start_dim=0, end_dim=-1)`, or the older `flatten(order='C', *, start_dim, end_dim)`."""
    b = _bind(args, kwargs, ("start_dim", "end_dim"))
    if b is not None and all(_is_int(v) for v in b.values()):
        return F.flatten(self, "C", start_dim=b.get("start_dim", 0), end_dim=b.get("end_dim", -1))
    b = _bind(args, kwargs, ("order",), ("start_dim", "end_dim"))
    if b is None:
        raise _no_overload("flatten", args, kwargs, ["start_dim=0, end_dim=-1", "order='C', *, start_dim, end_dim"])
    return F.flatten(self, b.get("order", "C"), start_dim=b.get("start_dim", 0), end_dim=b.get("end_dim", -1))


def _dim_arg(name, args, kwargs, first, default=0):
    """`f(x, dim)` / `f(x, dim=...)` / `f(x, axis=...)` -> (first, dim): MindSpore accepts both spellings."""
    b = _bind(args, kwargs, (first, "dim")) or _bind(args, kwargs, (first, "axis"))
    if b is None or first not in b:
        raise _no_overload(name, args, kwargs, [f"{first}, dim={default}", f"{first}, axis={default}"])
    return b[first], b.get("dim", b.get("axis", default))


def _split(self, *args, **kwargs):
    if "split_size" in kwargs:
        kwargs["split_size_or_sections"] = kwargs.pop("split_size")
    sections, dim = _dim_arg("split", args, kwargs, "split_size_or_sections")
    return F.split(self, sections, dim)


def _chunk(self, *args, **kwargs):
    chunks, dim = _dim_arg("chunk", args, kwargs, "chunks")
    return F.chunk(self, chunks, dim)


def _flip(self, *args, **kwargs):
    b = _bind(args, kwargs, ("dims",))
    if b is None or "dims" not in b:
        raise _no_overload("flip", args, kwargs, ["dims"])
    return F.flip(self, b["dims"])


# -- reductions ------------------------------------------------------------------------------------

def _sum(self, *args, **kwargs):
    """`sum(dim=None, keepdim=False, *, dtype=None)`, else the older
    `sum(axis=None, dtype=None, keepdims=False, initial=None)` (MindSpore's order)."""
    if not args and not kwargs:
        return F.sum(self)
    b = _bind(args, kwargs, ("dim", "keepdim"), ("dtype",))
    if b is not None and _is_axes(_axes_value(b.get("dim"))) and _is_bool(b.get("keepdim", False)):
        return F.sum(self, _axes_value(b.get("dim")), bool(b.get("keepdim", False)), dtype=b.get("dtype"))
    b = _bind(args, kwargs, ("axis", "dtype", "keepdims", "initial"))
    if b is None or not _is_axes(b.get("axis")):
        raise _no_overload("sum", args, kwargs, ["dim=None, keepdim=False, *, dtype=None",
                                                 "axis=None, dtype=None, keepdims=False, initial=None"])
    dtype = b.get("dtype")
    out = F.sum(self, b.get("axis"), _flag(b.get("keepdims", False)),
                dtype=None if dtype is mstype.bool_ else dtype)
    if b.get("initial") is not None:
        out = out + b["initial"]
    return F.cast(out, mstype.bool_) if dtype is mstype.bool_ else out


def _axes_value(v):
    """A 0-D/1-D integer Tensor given as `dim` means its values (MindSpore accepts `sum(Tensor(1))`)."""
    if isinstance(v, Tensor) and v.dtype.is_integer:
        vals = v.asnumpy().reshape(-1).tolist()
        return vals[0] if v.ndim == 0 else tuple(vals)
    return v


def _mean(self, *args, **kwargs):
    """`mean(dim=None, keepdim=False, *, dtype=None)`, else `mean(axis=None, keep_dims=False)`."""
    if not args and not kwargs:
        return F.mean(self)
    b = _bind(args, kwargs, ("dim", "keepdim"), ("dtype",))
    if b is not None and _is_axes(b.get("dim")) and _is_bool(b.get("keepdim", False)):
        out = F.mean(self, b.get("dim"), bool(b.get("keepdim", False)))
        return F.cast(out, b["dtype"]) if b.get("dtype") is not None else out
    b = _bind(args, kwargs, ("axis", "keep_dims"))
    if b is None or not _is_axes(b.get("axis")):
        raise _no_overload("mean", args, kwargs, ["dim=None, keepdim=False, *, dtype=None",
                                                  "axis=None, keep_dims=False"])
    return F.mean(self, b.get("axis"), _flag(b.get("keep_dims", False)))


def _prod(self, *args, **kwargs):
    """`prod(dim=None, keepdim=False, dtype=None)`; one dim (MindSpore 2.10 refuses a tuple or `axis=`).
    Integer and bool inputs give Int64 (as MindSpore)."""
    b = _bind(args, kwargs, ("dim", "keepdim", "dtype"))
    if b is None or not (b.get("dim") is None or _is_int(b.get("dim"))) or not _is_bool(b.get("keepdim", False)):
        raise _no_overload("prod", args, kwargs, ["dim=None, keepdim=False, dtype=None"])
    x = self
    dtype = b.get("dtype")
    if dtype is None and x.dtype.kind in ("bool", "int", "uint") and x.dtype not in mstype._WIDE_UNSIGNED:
        dtype = mstype.int64
    if dtype is not None:
        x = F.cast(x, dtype)
    return F.prod(x, b.get("dim"), bool(b.get("keepdim", False)))


def _as_int64(t):
    return t if t.dtype is mstype.int64 else F.cast(t, mstype.int64)


def _extreme(name, values_fn, pair_fn):
    """`max`/`min`: `max()` -> value; `max(dim, keepdim=False)` -> (values, Int64 indices); else the
    NumPy-style `max(axis=None, keepdims=False, *, initial, where, return_indices)` -> values."""
    forms = ["", "dim, keepdim=False", "axis=None, keepdims=False, *, initial=None, where=None, return_indices=False"]

    def method(self, *args, **kwargs):
        if not args and not kwargs:
            return values_fn(self)
        b = _bind(args, kwargs, ("dim", "keepdim"))
        if b is not None and _is_int(b.get("dim")) and _is_bool(b.get("keepdim", False)):
            values, indices = pair_fn(self, b["dim"], bool(b.get("keepdim", False)))
            return values, _as_int64(indices)
        b = _bind(args, kwargs, ("axis", "keepdims"), ("initial", "where", "return_indices"))
        if b is None or not _is_axes(b.get("axis")):
            raise _no_overload(name, args, kwargs, forms)
        axis, keepdims = b.get("axis"), _flag(b.get("keepdims", False))
        return_indices = _flag(b.get("return_indices", False))
        if not isinstance(return_indices, bool):
            raise OpTypeError(f"Tensor.{name}", "'return_indices' to be a bool", type(return_indices).__name__)
        if return_indices:
            values, indices = pair_fn(self, axis, keepdims, initial=b.get("initial"), where=b.get("where"))
            return values, _as_int64(indices)
        if _is_int(axis) and b.get("initial") is None and b.get("where") is None:
            # MindSpore reduces one int axis with ArgMaxWithValue: at ties the whole gradient goes to
            # the first extreme (a reduction over all axes, or a tuple, shares it like amax does)
            return pair_fn(self, axis, keepdims)[0]
        return values_fn(self, axis, keepdims, initial=b.get("initial"), where=b.get("where"))
    method.__name__ = name
    return method


def _arg_extreme(name, fn, index_dtype, deprecated_axis_may_be_none):
    """`argmax`/`argmin(dim=None, keepdim=False)` or `(axis, keepdims)`. MindSpore 2.10 returns Int64
    from argmax and Int32 from argmin (both its functional ops and the methods)."""
    def method(self, *args, **kwargs):
        b = _bind(args, kwargs, ("dim", "keepdim"))
        if b is not None and (b.get("dim") is None or _is_int(b["dim"])) and _is_bool(b.get("keepdim", False)):
            axis, keep = b.get("dim"), b.get("keepdim", False)
        else:
            b = _bind(args, kwargs, ("axis", "keepdims"))
            ok = b is not None and (_is_int(b.get("axis")) or deprecated_axis_may_be_none and b.get("axis") is None)
            if not ok or not _is_bool(b.get("keepdims", False)):
                raise _no_overload(name, args, kwargs, ["dim=None, keepdim=False", "axis, keepdims=False"])
            axis, keep = b.get("axis"), b.get("keepdims", False)
        out = fn(self, axis, bool(keep) and axis is not None)
        return out if out.dtype is index_dtype else F.cast(out, index_dtype)
    method.__name__ = name
    return method


def _amax_amin(fn, name):
    def method(self, axis=None, keepdims=False, *, initial=None, where=None):
        return fn(self, axis, keepdims, initial=initial, where=where)
    method.__name__ = name
    return method


def _logical(fn, name):
    """`all`/`any(axis|dim=None, keep_dims|keepdim=False)`."""
    def method(self, *args, **kwargs):
        b = (_bind(args, kwargs, ("axis", "keep_dims")) or _bind(args, kwargs, ("dim", "keepdim"))
             or _bind(args, kwargs, ("axis", "keepdims")))
        if b is None:
            raise _no_overload(name, args, kwargs, ["axis=None, keep_dims=False", "dim=None, keepdim=False"])
        keep = b.get("keep_dims", b.get("keepdim", b.get("keepdims", False)))
        return fn(self, b.get("axis", b.get("dim")), _flag(keep))
    method.__name__ = name
    return method


def _moment(fn, name):
    """`std`/`var`: the NumPy-style `(axis=None, ddof=0, keepdims=False)`, or PyTorch's keywords
    `dim`, `correction` (default 1), `keepdim`."""
    def method(self, *args, **kwargs):
        if {"dim", "correction", "keepdim"} & set(kwargs):
            b = _bind(args, kwargs, ("dim",), ("correction", "keepdim"))
            if b is None:
                raise _no_overload(name, args, kwargs, ["dim=None, *, correction=1, keepdim=False"])
            return fn(self, b.get("dim"), _int_like(b.get("correction", 1)), _flag(b.get("keepdim", False)))
        b = _bind(args, kwargs, ("axis", "ddof", "keepdims"))
        if b is None:
            raise _no_overload(name, args, kwargs, ["axis=None, ddof=0, keepdims=False"])
        return fn(self, b.get("axis"), _int_like(b.get("ddof", 0)), _flag(b.get("keepdims", False)))
    method.__name__ = name
    return method


def _int_like(v):
    """A number truncated to int as these methods always did; anything else is left for the op to
    reject by name."""
    return int(v) if isinstance(v, numbers.Real) and not isinstance(v, bool) and v == v and abs(v) != float("inf") else v


def _flag(v):
    """An int or bool flag as a bool; anything else is left for the op to reject by name."""
    return bool(v) if isinstance(v, (numbers.Integral, np.bool_)) else v


def _cumsum(self, *args, **kwargs):
    """`cumsum(dim, *, dtype=None)` or `cumsum(axis=None, dtype=None)` (None flattens first)."""
    b = _bind(args, kwargs, ("dim",), ("dtype",)) or _bind(args, kwargs, ("axis", "dtype"))
    if b is None:
        raise _no_overload("cumsum", args, kwargs, ["dim, *, dtype=None", "axis=None, dtype=None"])
    axis = b.get("dim", b.get("axis"))
    x = F.reshape(self, (-1,)) if axis is None else self
    return F.cumsum(x, 0 if axis is None else axis, dtype=b.get("dtype"))


def _sort(self, *args, **kwargs):
    """`sort(dim=-1, descending=False, stable=False)` or `sort(axis=-1, descending=False)`."""
    b = _bind(args, kwargs, ("dim", "descending", "stable")) or _bind(args, kwargs, ("axis", "descending"))
    if b is None:
        raise _no_overload("sort", args, kwargs, ["dim=-1, descending=False, stable=False", "axis=-1, descending=False"])
    return F.sort(self, b.get("dim", b.get("axis", -1)), _flag(b.get("descending", False)))


def _argsort(self, *args, **kwargs):
    b = _bind(args, kwargs, ("dim", "descending", "stable")) or _bind(args, kwargs, ("axis", "descending"))
    if b is None:
        raise _no_overload("argsort", args, kwargs, ["dim=-1, descending=False, stable=False",
                                                     "axis=-1, descending=False"])
    return F.argsort(self, b.get("dim", b.get("axis", -1)), _flag(b.get("descending", False)))


def _gather(self, *args, **kwargs):
    """`gather(dim, index)` (PyTorch: elements along dim) or `gather(input_indices, axis, batch_dims=0)`."""
    b = _bind(args, kwargs, ("dim", "index"))
    if b is not None and _is_int(b.get("dim")) and isinstance(b.get("index"), Tensor):
        return F.gather_elements(self, b["dim"], b["index"])
    b = _bind(args, kwargs, ("input_indices", "axis", "batch_dims"))
    if b is None or "input_indices" not in b or "axis" not in b:
        raise _no_overload("gather", args, kwargs, ["dim, index", "input_indices, axis, batch_dims=0"])
    return F.gather(self, b["input_indices"], b["axis"], b.get("batch_dims", 0))


def _where(self, condition, y):
    """`x.where(condition, y)` is `ops.where(condition, x, y)` (the tensor is the "true" branch)."""
    return F.where(condition, self, y)


def _alpha_scaled(name, other, alpha):
    """alpha * other for `add`/`sub`'s `alpha` keyword (a real number; 1 leaves `other` alone)."""
    if not isinstance(alpha, numbers.Real):
        raise OpTypeError(f"Tensor.{name}", "'alpha' to be a real number", f"{type(alpha).__name__} {alpha!r}"[:80])
    if alpha == 1:
        return other
    if not isinstance(other, (Tensor, numbers.Real)):
        raise OpTypeError(f"Tensor.{name}", "'other' to be a Tensor or a real number",
                          f"{type(other).__name__} {other!r}"[:80])
    return other * alpha


def _add(self, other, *, alpha=1):
    return F.add(self, _alpha_scaled("add", other, alpha))


def _sub(self, other, *, alpha=1):
    return F.sub(self, _alpha_scaled("sub", other, alpha))


# -- creation / conversion -------------------------------------------------------------------------

def _cast_to(dtype):
    return lambda self: F.cast(self, dtype)


def _astype(self, dtype, copy=False):
    return F.cast(self, dtype)


def _to(self, *args, **kwargs):
    """`to(dtype)`, `to(device)`, `to(device, dtype)`, keywords device/dtype/non_blocking/copy.
    Everything lives on the host here, so a device only has to be a string."""
    dtype = kwargs.pop("dtype", None)
    device = kwargs.pop("device", None)
    kwargs.pop("non_blocking", None)
    kwargs.pop("copy", None)
    if kwargs:
        raise _no_overload("to", args, kwargs, ["dtype", "device=None, dtype=None, non_blocking=False, copy=False"])
    for a in args:
        if isinstance(a, str) and device is None and not _names_dtype(a):
            device = a
        elif dtype is None:
            dtype = a
        else:
            raise _no_overload("to", args, {}, ["dtype", "device, dtype"])
    if device is not None and not isinstance(device, str):
        raise OpTypeError("Tensor.to", "'device' as a string such as 'CPU'", type(device).__name__)
    return self if dtype is None else F.cast(self, dtype)


def _names_dtype(s):
    try:
        mstype.as_dtype(s)
        return True
    except TypeError:
        return False


def _type(self, dtype=None):
    """`type()` names the dtype ('Float32'); `type(dtype)` casts."""
    return str(self.dtype) if dtype is None else F.cast(self, dtype)


def _size_and_dtype(name, self, size, dtype):
    shape = (size,) if _is_int(size) else size
    if not _int_seq(shape):
        raise OpTypeError(f"Tensor.{name}", "'size' as an int or a tuple/list of ints", repr(size)[:60])
    if dtype is not None and not isinstance(dtype, mstype.DType):
        raise OpTypeError(f"Tensor.{name}", "'dtype' as a minispore dtype (sizes go in one tuple)",
                          type(dtype).__name__)
    return tuple(shape), self.dtype if dtype is None else dtype


def _new_ones(self, size, dtype=None):
    shape, dt = _size_and_dtype("new_ones", self, size, dtype)
    return F.ones(shape, dt)


def _new_zeros(self, size, dtype=None):
    shape, dt = _size_and_dtype("new_zeros", self, size, dtype)
    return F.zeros(shape, dt)


def _new_full(self, size, fill_value, *, dtype=None):
    shape, dt = _size_and_dtype("new_full", self, size, dtype)
    return F.full(shape, fill_value, dtype=dt)


def _new_empty(self, size, *, dtype=None, device=None):
    shape, dt = _size_and_dtype("new_empty", self, size, dtype)
    return F.zeros(shape, dt)                      # (contents are unspecified; zeros are one choice)


def _fill_(self, value):
    """In place: every element becomes `value` (a write, so autodiff sees the new version)."""
    F.setitem(self, Ellipsis, value)
    return self


def _inplace(name, method):
    """`x.add_(y)` is `x.add(y)` written back into `x` (one recorded write: the version bumps, and a
    gradient through the old value is refused as for any in-place write). Returns `x`."""
    @functools.wraps(method)                 # (the signature is the method's: same arguments)
    def fn(self, *args, **kwargs):
        F.setitem(self, Ellipsis, method(self, *args, **kwargs))
        return self
    fn.__name__ = fn.__qualname__ = name
    return fn


def _zero_(self):
    F.setitem(self, Ellipsis, 0)
    return self


def _contiguous(self):
    """`self` if already C-contiguous, else a row-major copy (recorded, so gradients flow)."""
    if self.is_contiguous():
        return self
    out = F.deepcopy(self)
    if isinstance(out._data, np.ndarray) and not out._data.flags.c_contiguous:
        out._data = np.array(out._data, order="C")   # (ops.deepcopy keeps the layout; nobody else holds it)
    return out


def _stride(self, dim=None):
    """Strides in elements (PyTorch/MindSpore `stride()`), unlike `.strides` in bytes."""
    strides = [s // self.itemsize for s in self.strides]
    if dim is not None and self.ndim == 0:
        raise OpValueError("Tensor.stride", "a tensor with dimensions for stride(dim)", "a 0-d tensor")
    return strides if dim is None else strides[_normalized_dim("stride", dim, self.ndim)]


def attach():
    for name, fn in _OPERATORS.items():
        setattr(Tensor, name, fn)
    for name in _SAME_NAME:
        fn = getattr(F, name, None)
        if fn is not None:
            setattr(Tensor, name, fn)
    methods = {
        # shape
        "reshape": _reshape, "view": _view, "transpose": _transpose, "permute": _permute,
        "swapaxes": _swapaxes, "swapdims": _swapaxes, "moveaxis": _moveaxis, "movedim": _moveaxis,
        "t": _t, "expand": _expand, "expand_as": _expand_as, "view_as": _view_as, "tile": _tile,
        "repeat": _repeat, "squeeze": _squeeze, "flatten": _flatten, "split": _split, "chunk": _chunk,
        "flip": _flip, "ravel": lambda self: F.reshape(self, (-1,)),
        # reductions
        "sum": _sum, "mean": _mean, "prod": _prod, "cumsum": _cumsum,
        "max": _extreme("max", F.amax, F.max), "min": _extreme("min", F.amin, F.min),
        "argmax": _arg_extreme("argmax", F.argmax, mstype.int64, False),
        "argmin": _arg_extreme("argmin", F.argmin, mstype.int32, True),
        "amax": _amax_amin(F.amax, "amax"), "amin": _amax_amin(F.amin, "amin"),
        "all": _logical(F.all, "all"), "any": _logical(F.any, "any"),
        "std": _moment(F.std, "std"), "var": _moment(F.var, "var"),
        "sort": _sort, "argsort": _argsort, "gather": _gather, "where": _where, "add": _add, "sub": _sub,
        # creation / conversion
        "copy": lambda self: F.deepcopy(self),          # recorded, so gradients flow through copies
        "clone": lambda self: F.deepcopy(self),
        "contiguous": _contiguous, "astype": _astype, "to": _to, "type": _type,
        "float": _cast_to(mstype.float32), "half": _cast_to(mstype.float16), "double": _cast_to(mstype.float64),
        "bfloat16": _cast_to(mstype.bfloat16), "int": _cast_to(mstype.int32), "long": _cast_to(mstype.int64),
        "short": _cast_to(mstype.int16), "byte": _cast_to(mstype.uint8), "bool": _cast_to(mstype.bool_),
        "new_ones": _new_ones, "new_zeros": _new_zeros, "new_full": _new_full, "new_empty": _new_empty,
        "fill_": _fill_, "zero_": _zero_, "stride": _stride,
        "ndimension": lambda self: self.ndim, "nelement": lambda self: self.size,
    }
    for name, fn in methods.items():
        setattr(Tensor, name, fn)
    for base in ("add", "sub", "mul", "div", "clamp", "masked_fill", "exp", "log", "sigmoid", "tanh", "floor",
                 "sign", "remainder", "floor_divide", "erfinv", "abs", "neg", "sqrt", "pow"):
        if hasattr(Tensor, base):
            setattr(Tensor, base + "_", _inplace(base + "_", getattr(Tensor, base)))
    Tensor.copy_ = lambda self, src: _fill_(self, src)
    Tensor.type_as = lambda self, other: F.cast(self, _other_tensor("type_as", other).dtype)
    Tensor.reshape_as = lambda self, other: F.reshape(self, _other_tensor("reshape_as", other).shape)
    Tensor.T = property(lambda self: F.transpose(self, tuple(range(self.ndim - 1, -1, -1))))
    Tensor.mT = property(_mT)
    Tensor.H = property(_H)
    Tensor.__getitem__ = lambda self, index: F.getitem(self, index)
    Tensor.__setitem__ = lambda self, index, value: F.setitem(self, index, value)


attach()
