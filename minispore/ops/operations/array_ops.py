"""Class-style array operators (MindSpore's `mindspore.ops.operations.array_ops`): shapes, joins and
splits, indexing, creation, casts, arg-reductions.

Constructor arguments are attributes (validated here, once); call arguments are the tensors and
per-call values (`Transpose()(x, perm)`, `Concat(axis)((a, b))`). Every call reaches the registry
primitive that defines the op, directly or through the functional op of the same name.
"""
from __future__ import annotations

import inspect

from ...common import dtype as mstype
from ...common.errors import OpTypeError, OpValueError
from ...common.tensor import Tensor
from .. import functional as F
from ..primitive import PRIMITIVES as P
from .base import (Primitive, check_bool, check_dtype, check_int, check_int_tuple, prim_attr_register)

_transpose, _reshape, _expand_dims, _cast = P["transpose"], P["reshape"], P["expand_dims"], P["cast"]
_squeeze, _argmax, _argmin = P["squeeze"], P["argmax"], P["argmin"]
_max_with_value, _min_with_value = P["argmax_with_value"], P["argmin_with_value"]


def _tensor(op, arg, x):
    if not isinstance(x, Tensor):
        raise OpTypeError(op, f"'{arg}' to be a Tensor", type(x).__name__)
    return x


class _NoAttr(Primitive):
    """A primitive without constructor attributes."""

    @prim_attr_register
    def __init__(self):
        pass


# ------------------------------------------------------------------------------------------------
# shape and metadata
class Transpose(_NoAttr):
    """`Transpose()(input, input_perm)`: permute the dims (`input_perm` a tuple of ints)."""

    def __call__(self, input, input_perm):
        if type(input_perm) is not tuple:
            input_perm = check_int_tuple(self.name, "input_perm", input_perm, allow_int=False)
        return _transpose(input, perm=input_perm)


class Reshape(_NoAttr):
    """`Reshape()(input, shape)`: same data, new shape (one -1 is inferred)."""

    def __call__(self, input, shape):
        return F.reshape(input, shape)


class Shape(_NoAttr):
    """`Shape()(x)`: the shape as a tuple of Python ints."""

    def __call__(self, input_x):
        return tuple(_tensor(self.name, "input_x", input_x).shape)


class DType(_NoAttr):
    """`DType()(x)`: the dtype object (ms.float32 ...)."""

    def __call__(self, input_x):
        return _tensor(self.name, "input_x", input_x).dtype


class Size(_NoAttr):
    """`Size()(x)`: the number of elements, a Python int."""

    def __call__(self, input_x):
        return int(_tensor(self.name, "input_x", input_x).size)


class Rank(_NoAttr):
    """`Rank()(x)`: the number of dims, a Python int."""

    def __call__(self, input_x):
        return len(_tensor(self.name, "input_x", input_x).shape)


class ExpandDims(_NoAttr):
    """`ExpandDims()(input_x, axis)`: insert a size-1 dim at `axis`."""

    def __call__(self, input_x, axis):
        return _expand_dims(input_x, axis=axis)


class Squeeze(Primitive):
    """`Squeeze(axis=())(input)`: drop the size-1 dims (all of them, or those in `axis`)."""

    @prim_attr_register
    def __init__(self, axis=()):
        self.add_prim_attr("axis", check_int_tuple(self.name, "axis", axis))
        self._axis = self.axis if self.axis else None

    def __call__(self, input):
        return _squeeze(input, axis=self._axis)


class Flatten(_NoAttr):
    """`Flatten()(input_x)`: keep dim 0, merge the rest: (N, ...) -> (N, prod(...))."""

    def __call__(self, input_x):
        _tensor(self.name, "input_x", input_x)
        if len(input_x.shape) == 0:
            raise OpValueError(self.name, "an input with at least 1 dim", "a 0-d tensor")
        return _reshape(input_x, shape=(input_x.shape[0], -1) if input_x.shape[0] else (0, 0))


class BroadcastTo(Primitive):
    """`BroadcastTo(shape)(input)`: broadcast to `shape` (-1 keeps that dim)."""

    @prim_attr_register
    def __init__(self, shape):
        self.add_prim_attr("shape", check_int_tuple(self.name, "shape", shape, allow_int=False))

    def __call__(self, input):
        return F.broadcast_to(input, self.shape)


class Tile(_NoAttr):
    """`Tile()(input, dims)`: repeat the input dims[i] times along dim i."""

    def __call__(self, input, dims):
        return F.tile(input, check_int_tuple(self.name, "dims", dims, allow_int=False))


class Cast(_NoAttr):
    """`Cast()(input_x, dtype)`: convert to `dtype`."""

    def __call__(self, input_x, dtype):
        check_dtype(self.name, "dtype", dtype)
        return F.cast(input_x, dtype)


class Identity(_NoAttr):
    """`Identity()(x)`: a copy of x."""

    def __call__(self, input_x):
        return F.deepcopy(_tensor(self.name, "input_x", input_x))


# ------------------------------------------------------------------------------------------------
# joins and splits
class Concat(Primitive):
    """`Concat(axis=0)(tensors)`: join a tuple/list of tensors along `axis`."""

    @prim_attr_register
    def __init__(self, axis=0):
        check_int(self.name, "axis", axis)

    def __call__(self, tensors):
        return F.concat(tensors, self.axis)


class Stack(Primitive):
    """`Stack(axis=0)(tensors)`: join same-shape tensors along a new axis."""

    @prim_attr_register
    def __init__(self, axis=0):
        check_int(self.name, "axis", axis)

    def __call__(self, tensors):
        return F.stack(tensors, self.axis)


class Unstack(Primitive):
    """`Unstack(axis=0, num=None)(x)`: the tuple of slices along `axis` (that dim removed)."""

    @prim_attr_register
    def __init__(self, axis=0, num=None):
        check_int(self.name, "axis", axis)
        if num is not None:
            check_int(self.name, "num", num, minimum=1)

    def __call__(self, input_x):
        _tensor(self.name, "input_x", input_x)
        nd = len(input_x.shape)
        if not -nd <= self.axis < max(nd, 1) or nd == 0:
            raise OpValueError(self.name, f"'axis' in [{-nd}, {nd}) for a {nd}-d input", str(self.axis))
        ax = self.axis % nd
        n = input_x.shape[ax]
        if self.num is not None and self.num != n:
            raise OpValueError(self.name, f"'num' equal to the size of dim {ax} ({n})", str(self.num))
        return tuple(_squeeze(p, axis=(ax,)) for p in F.split(input_x, 1, ax))


class Split(Primitive):
    """`Split(axis=0, output_num=1)(input_x)`: `output_num` equal pieces along `axis` (the size must
    divide evenly)."""

    @prim_attr_register
    def __init__(self, axis=0, output_num=1):
        check_int(self.name, "axis", axis)
        check_int(self.name, "output_num", output_num, minimum=1)

    def __call__(self, input_x):
        _tensor(self.name, "input_x", input_x)
        nd = len(input_x.shape)
        if nd == 0 or not -nd <= self.axis < nd:
            raise OpValueError(self.name, f"'axis' in [{-nd}, {nd}) for a {nd}-d input", str(self.axis))
        n = input_x.shape[self.axis]
        if n % self.output_num:
            raise OpValueError(self.name, f"dim {self.axis} (size {n}) divisible by output_num={self.output_num}",
                               f"shape {tuple(input_x.shape)}")
        return tuple(F.split(input_x, n // self.output_num, self.axis))


# ------------------------------------------------------------------------------------------------
# indexing and selection
class Gather(Primitive):
    """`Gather(batch_dims=0)(input_params, input_indices, axis)`: slices at `input_indices` along `axis`."""

    @prim_attr_register
    def __init__(self, batch_dims=0):
        check_int(self.name, "batch_dims", batch_dims)

    def __call__(self, input_params, input_indices, axis):
        return F.gather(input_params, input_indices, axis, self.batch_dims)


class GatherD(_NoAttr):
    """`GatherD()(x, dim, index)`: out[i][j] = x[index[i][j]][j] (dim 0), elementwise gather."""

    def __call__(self, x, dim, index):
        return F.gather_d(x, dim, index)


class Select(_NoAttr):
    """`Select()(condition, x, y)`: x where condition, else y."""

    def __call__(self, condition, input, other):
        return F.where(condition, input, other)


class MaskedFill(_NoAttr):
    """`MaskedFill()(input, mask, value)`: `value` where `mask` is True."""

    def __call__(self, input_x, mask, value):
        return F.masked_fill(input_x, mask, value)


class StridedSlice(Primitive):
    """`StridedSlice(begin_mask=0, end_mask=0, ellipsis_mask=0, new_axis_mask=0, shrink_axis_mask=0)
    (input_x, begin, end, strides)`: `x[begin:end:strides]` per dim. Bit i of a mask changes entry i:
    begin_mask/end_mask ignore begin[i]/end[i] (the full range), ellipsis_mask makes it `...`,
    new_axis_mask inserts a size-1 dim, shrink_axis_mask takes index begin[i] and drops the dim.
    The slice is built once per call and handed to the indexing primitive (`Tensor.__getitem__`)."""

    @prim_attr_register
    def __init__(self, begin_mask=0, end_mask=0, ellipsis_mask=0, new_axis_mask=0, shrink_axis_mask=0):
        for arg in ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask"):
            check_int(self.name, arg, getattr(self, arg), minimum=0)
        if bin(ellipsis_mask).count("1") > 1:
            raise OpValueError(self.name, "at most one bit set in 'ellipsis_mask'", bin(ellipsis_mask))

    def __call__(self, input_x, begin, end, strides):
        _tensor(self.name, "input_x", input_x)
        begin = check_int_tuple(self.name, "begin", begin, allow_int=False)
        end = check_int_tuple(self.name, "end", end, allow_int=False)
        strides = check_int_tuple(self.name, "strides", strides, allow_int=False)
        if not len(begin) == len(end) == len(strides):
            raise OpValueError(self.name, "'begin', 'end' and 'strides' of one length",
                               f"lengths {len(begin)}, {len(end)}, {len(strides)}")
        if 0 in strides:
            raise OpValueError(self.name, "non-zero 'strides'", str(strides))
        index = []
        for i, (b, e, s) in enumerate(zip(begin, end, strides)):
            bit = 1 << i
            if self.ellipsis_mask & bit:
                index.append(Ellipsis)
            elif self.new_axis_mask & bit:
                index.append(None)
            elif self.shrink_axis_mask & bit:
                index.append(b)
            else:
                index.append(slice(None if self.begin_mask & bit else b, None if self.end_mask & bit else e, s))
        return F.getitem(input_x, tuple(index))


class Slice(_NoAttr):
    """`Slice()(input, begin, size)`: the block starting at `begin` with `size` (-1: to the end)."""

    def __call__(self, input, begin, size):
        _tensor(self.name, "input", input)
        begin = check_int_tuple(self.name, "begin", begin, allow_int=False)
        size = check_int_tuple(self.name, "size", size, allow_int=False)
        if not len(begin) == len(size) == len(input.shape):
            raise OpValueError(self.name, f"'begin' and 'size' with one entry per dim ({len(input.shape)})",
                               f"{begin} and {size}")
        index = []
        for b, s, n in zip(begin, size, input.shape):
            if not 0 <= b <= n or (s != -1 and (s < 0 or b + s > n)):
                raise OpValueError(self.name, f"begin/size inside a dim of size {n}", f"begin {b}, size {s}")
            index.append(slice(b, n if s == -1 else b + s))
        return F.getitem(input, tuple(index))


class Tril(Primitive):
    """`Tril(diagonal=0)(x)`: the lower triangle of the last two dims."""

    @prim_attr_register
    def __init__(self, diagonal=0):
        check_int(self.name, "diagonal", diagonal)

    def __call__(self, input):
        return F.tril(input, self.diagonal)


class Triu(Tril):
    """`Triu(diagonal=0)(x)`: the upper triangle of the last two dims."""

    def __call__(self, input):
        return F.triu(input, self.diagonal)


# ------------------------------------------------------------------------------------------------
# creation
class Fill(_NoAttr):
    """`Fill()(type, shape, value)`: a tensor of `shape` filled with `value`, of dtype `type`."""

    def __call__(self, type, shape, value):
        return F.fill(type, shape, value)


class Ones(_NoAttr):
    """`Ones()(shape, dtype=None)`: ones (Float32 by default); `shape` an int or a tuple."""

    def __call__(self, shape, dtype=None):
        return F.ones(check_int_tuple(self.name, "shape", shape), mstype.float32 if dtype is None else dtype)


class Zeros(_NoAttr):
    """`Zeros()(shape, dtype=None)`: zeros (Float32 by default)."""

    def __call__(self, size, dtype=None):
        return F.zeros(check_int_tuple(self.name, "size", size), mstype.float32 if dtype is None else dtype)


class OnesLike(_NoAttr):
    """`OnesLike()(x)`: ones of x's shape and dtype."""

    def __call__(self, input_x):
        return F.ones_like(input_x)


class ZerosLike(_NoAttr):
    """`ZerosLike()(x)`: zeros of x's shape and dtype."""

    def __call__(self, input_x):
        return F.zeros_like(input_x)


class Eye(_NoAttr):
    """`Eye()(n, m, t)`: an n x m identity of dtype t."""

    def __call__(self, n, m, t):
        check_int(self.name, "n", n, minimum=0)
        check_int(self.name, "m", m, minimum=0)
        return F.eye(n, m, check_dtype(self.name, "t", t))


class OneHot(Primitive):
    """`OneHot(axis=-1)(indices, depth, on_value, off_value)`: `on_value` at each index, `off_value`
    elsewhere, the new dim at `axis`."""

    @prim_attr_register
    def __init__(self, axis=-1):
        check_int(self.name, "axis", axis, minimum=-1)

    def __call__(self, indices, depth, on_value, off_value):
        check_int(self.name, "depth", depth, minimum=0)
        return F.one_hot(indices, depth, on_value, off_value, self.axis)


# ------------------------------------------------------------------------------------------------
# arg-reductions, sorting
_INDEX_TYPES = (mstype.int32, mstype.int64)


class Argmax(Primitive):
    """`Argmax(axis=-1, output_type=ms.int32)(x)`: index of the first maximum along `axis`."""

    _prim = _argmax

    @prim_attr_register
    def __init__(self, axis=-1, output_type=mstype.int32):
        check_int(self.name, "axis", axis)
        check_dtype(self.name, "output_type", output_type, _INDEX_TYPES)

    def __call__(self, input_x):
        _tensor(self.name, "input_x", input_x)
        idx = self._prim(input_x, axis=self.axis, keep_dims=False)
        return _cast(idx, dtype=self.output_type) if idx.dtype is not self.output_type else idx


class Argmin(Argmax):
    """`Argmin(axis=-1, output_type=ms.int32)(x)`: index of the first minimum along `axis`."""
    _prim = _argmin


class ArgMaxWithValue(Primitive):
    """`ArgMaxWithValue(axis=0, keep_dims=False)(input)` -> `(index, value)` (index Int64, and in
    that order: MindSpore's, the reverse of `ops.max`). The gradient of the value flows to the index."""

    _prim = _max_with_value

    @prim_attr_register
    def __init__(self, axis=0, keep_dims=False):
        check_int(self.name, "axis", axis)
        check_bool(self.name, "keep_dims", keep_dims)

    def __call__(self, input):
        _tensor(self.name, "input", input)
        value, index = self._prim(input, axis=self.axis, keep_dims=self.keep_dims)
        return _cast(index, dtype=mstype.int64), value


class ArgMinWithValue(ArgMaxWithValue):
    """`ArgMinWithValue(axis=0, keep_dims=False)(input)` -> `(index, value)`."""
    _prim = _min_with_value


class TopK(Primitive):
    """`TopK(sorted=True)(input_x, k)` -> (values, indices) of the k largest along the last dim."""

    @prim_attr_register
    def __init__(self, sorted=True):
        check_bool(self.name, "sorted", sorted)

    def __call__(self, input_x, k):
        return F.topk(input_x, k, None, True, self.sorted)


class Sort(Primitive):
    """`Sort(axis=-1, descending=False)(x)` -> (values, indices)."""

    @prim_attr_register
    def __init__(self, axis=-1, descending=False):
        check_int(self.name, "axis", axis)
        check_bool(self.name, "descending", descending)

    def __call__(self, x):
        return F.sort(x, self.axis, self.descending)


# Pass-through classes: `Name()(*args)` is `ops.name(*args)`.
PASS_THROUGH = {"GatherNd": "gather_nd", "ScatterNd": "scatter_nd", "TensorScatterUpdate": "tensor_scatter_update",
                "TensorScatterAdd": "tensor_scatter_add", "MaskedSelect": "masked_select", "NonZero": "nonzero",
                "Unique": "unique"}


def _pass_through(fn, cls_name):
    def __call__(self, *args, **kwargs):
        return fn(*args, **kwargs)
    # the call takes what the functional op takes (so help() and introspection show the inputs)
    sig = inspect.signature(fn)
    self_param = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    __call__.__signature__ = sig.replace(parameters=[self_param, *sig.parameters.values()])
    return type(cls_name, (_NoAttr,), {"__call__": __call__, "__module__": __name__, "__qualname__": cls_name,
                                       "__doc__": f"`{cls_name}()(*inputs)`: `ops.{fn.__name__}(*inputs)`."})


for _cls, _fn in PASS_THROUGH.items():
    globals()[_cls] = _pass_through(getattr(F, _fn), _cls)


__all__ = ["Transpose", "Reshape", "Shape", "DType", "Size", "Rank", "ExpandDims", "Squeeze", "Flatten", "BroadcastTo",
           "Tile", "Cast", "Identity", "Concat", "Stack", "Unstack", "Split", "Gather", "GatherD", "Select", "MaskedFill",
           "StridedSlice", "Slice", "Tril", "Triu", "Fill", "Ones", "Zeros", "OnesLike", "ZerosLike", "Eye", "OneHot",
           "Argmax", "Argmin", "ArgMaxWithValue", "ArgMinWithValue", "TopK", "Sort"] + list(PASS_THROUGH)
