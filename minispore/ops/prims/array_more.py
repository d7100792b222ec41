"""The long tail of array manipulation in MindSpore 2.x's names: diagonal/diag_embed/diagflat,
take, rot90, index_add, index_fill, tensor_split/hsplit/vsplit/dsplit, strided_slice and slice,
select, sequence_mask, pixel_shuffle/pixel_unshuffle, atleast_1d/2d/3d, the
hstack/vstack/dstack/column_stack/row_stack family, ravel, repeat_elements, reverse, view_as,
range, logspace, cartesian_prod, combinations and block_diag.

Three new primitives: `diagonal` and its adjoint `diagonal_scatter` (which also is `diag_embed`),
each the other's backward rule, and `index_add` / `index_fill`. Everything else is a fixed
arrangement of existing primitives (reshape, transpose, flip, concat, getitem, gather, where),
written as that composite — its gradient is the composite's. MindSpore's input rules (checked on
the 2.10 CPU wheel) are followed: the stacking functions want one dtype (MindSpore's Concat kernel
fails on mixed dtypes), `hsplit`/`vsplit` want 2-D or more and `dsplit` 3-D or more, `range`
returns Int64 for integer arguments and Float32 otherwise.
"""
from __future__ import annotations

import builtins
import itertools
import math
import numbers

import numpy as np

from ...common import dtype as mstype
from ...common.tensor import Tensor
from .. import _check as C
from ..primitive import AbstractTensor, defprim
from .elementwise import _wanted, cast, less, sub, where
from .indexing import gather, getitem, index_select
from .reduction import reduce_sum
from .shape import reshape, transpose
from .shape_extra import concat, expand_dims, flip, pad, repeat_interleave, stack
from .shape_more import meshgrid

_INTS = ("int", "uint")


def _is_int(v):
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _int(op, arg, v):
    if isinstance(v, Tensor) and v.ndim == 0 and v.dtype.kind in _INTS:
        return int(v.asnumpy())
    return C.int_attr(op, arg, v)


# ------------------------------------------------------------------------------------------------
# diagonal and its adjoint
def _diag_dims(op, ndim, offset, dim1, dim2):
    C.int_attr(op, "offset", offset)
    d1, d2 = C.axis(op, dim1, ndim), C.axis(op, dim2, ndim)
    if d1 == d2:
        raise C.OpValueError(op, "'dim1' and 'dim2' to name different dimensions", f"{dim1} and {dim2}")
    return d1, d2


def _diag_len(n1, n2, offset):
    return max(0, min(n1, n2 - offset) if offset >= 0 else min(n1 + offset, n2))


def _diagonal_infer(x, offset=0, dim1=0, dim2=1):
    C.tensor("diagonal", "input", x)
    if len(x.shape) < 2:
        raise C.OpValueError("diagonal", "an input with at least 2 dimensions", f"shape {tuple(x.shape)}")
    d1, d2 = _diag_dims("diagonal", len(x.shape), offset, dim1, dim2)
    rest = tuple(s for i, s in enumerate(x.shape) if i not in (d1, d2))
    return AbstractTensor(rest + (_diag_len(x.shape[d1], x.shape[d2], offset),), x.dtype)


def _diagonal_kernel(a, offset=0, dim1=0, dim2=1):
    if offset >= a.shape[dim2] or -offset >= a.shape[dim1]:
        # an offset past the matrix has an empty diagonal; clamp it (NumPy takes a C int offset)
        offset = a.shape[dim2] if offset > 0 else -a.shape[dim1]
    return np.diagonal(a, offset, dim1, dim2).copy()


def _diagonal_bprop(inputs, out, dout, offset=0, dim1=0, dim2=1):
    return (diagonal_scatter(dout, tuple(inputs[0].shape), offset, dim1, dim2),)


_diagonal = defprim("diagonal", _diagonal_infer, _diagonal_kernel, _diagonal_bprop,
                    doc="a diagonal of the (dim1, dim2) matrices, as the last axis")


def _scatter_infer(d, shape, offset=0, dim1=0, dim2=1):
    C.tensor("diagonal_scatter", "input", d)
    shape = C.shape_arg("diagonal_scatter", shape)
    expect = _diagonal_infer(AbstractTensor(shape, d.dtype), offset, dim1, dim2)
    if tuple(d.shape) != expect.shape:
        raise C.OpValueError("diagonal_scatter", f"a diagonal of shape {expect.shape}", f"shape {tuple(d.shape)}")
    return AbstractTensor(shape, d.dtype)


def _scatter_kernel(d, shape, offset=0, dim1=0, dim2=1):
    C.output_fits("diagonal_scatter", shape, d.dtype)
    out = np.zeros(shape, dtype=d.dtype)
    nd = len(shape)
    d1, d2 = dim1 % nd, dim2 % nd
    view = np.moveaxis(out, (d1, d2), (-2, -1))          # a writable view of `out`
    n = d.shape[-1]
    i = np.arange(n) + (max(-offset, 0))
    j = np.arange(n) + (max(offset, 0))
    view[..., i, j] = d
    return out


def _scatter_bprop(inputs, out, dout, shape, offset=0, dim1=0, dim2=1):
    return (diagonal(dout, offset, dim1, dim2),)


_diagonal_scatter = defprim("diagonal_scatter", _scatter_infer, _scatter_kernel, _scatter_bprop,
                            doc="zeros of `shape` with the given diagonal (diagonal's adjoint)")


def diagonal(input, offset=0, dim1=0, dim2=1):
    """`ops.diagonal(input, offset=0, dim1=0, dim2=1)`: the `offset` diagonal of the matrices in dims
    (dim1, dim2), as a new last axis (offset > 0 above the main diagonal, < 0 below)."""
    return _diagonal(input, offset=C.plain_ints(offset), dim1=C.plain_ints(dim1), dim2=C.plain_ints(dim2))


def diagonal_scatter(input, shape, offset=0, dim1=0, dim2=1):
    """A zero tensor of `shape` whose (offset, dim1, dim2) diagonal is `input` (the backward of
    diagonal; minispore's helper, not a MindSpore name)."""
    return _diagonal_scatter(input, shape=tuple(shape), offset=offset, dim1=dim1, dim2=dim2)


def diag_embed(input, offset=0, dim1=-2, dim2=-1):
    """`ops.diag_embed(input, offset=0, dim1=-2, dim2=-1)`: matrices (in output dims dim1, dim2) whose
    `offset` diagonal is input's last axis, zeros elsewhere. The output has one more dimension."""
    C.tensor("diag_embed", "input", input)
    nd = len(input.shape) + 1
    offset = C.int_attr("diag_embed", "offset", offset)
    d1, d2 = _diag_dims("diag_embed", nd, offset, dim1, dim2)
    if len(input.shape) == 0:
        raise C.OpValueError("diag_embed", "an input with at least 1 dimension", "a 0-d tensor")
    n = input.shape[-1] + abs(offset)
    rest = list(input.shape[:-1])
    shape = []
    for k in builtins.range(nd):
        shape.append(n if k in (d1, d2) else rest.pop(0))
    return _diagonal_scatter(input, shape=tuple(shape), offset=offset, dim1=d1, dim2=d2)


def diagflat(input, offset=0):
    """`ops.diagflat(input, offset=0)`: the flattened input on the `offset` diagonal of a square
    matrix. A composite of reshape and diag_embed."""
    C.tensor("diagflat", "input", input)
    return diag_embed(reshape(input, (-1,)), offset, 0, 1)


# ------------------------------------------------------------------------------------------------
# take / rot90 (composites)
def take(input, index):
    """`ops.take(input, index)`: entries of the flattened input at `index` (an integer Tensor; the
    result has index's shape). A composite of reshape and gather. (MindSpore 2.10's CPU build has
    no Take kernel.)"""
    C.tensor("take", "input", input)
    C.integer("take", "index", index)
    n = int(np.prod(input.shape, dtype=np.int64))
    flat = reshape(input, (n,))
    return gather(flat, index, 0)


def rot90(input, k, dims):
    """`ops.rot90(input, k, dims)`: rotate by k * 90 degrees in the plane of `dims` (two dims), from
    the first toward the second. A composite of flip and transpose."""
    C.tensor("rot90", "input", input)
    k = C.int_attr("rot90", "k", k)
    if not isinstance(dims, (tuple, list)) or len(dims) != 2:
        raise C.OpValueError("rot90", "'dims' as two dimensions", repr(dims))
    nd = len(input.shape)
    if nd < 2:
        raise C.OpValueError("rot90", "an input with at least 2 dimensions", f"shape {tuple(input.shape)}")
    a, b = C.axis("rot90", dims[0], nd), C.axis("rot90", dims[1], nd)
    if a == b:
        raise C.OpValueError("rot90", "two different dims", repr(tuple(dims)))
    k %= 4
    if k == 0:
        return input
    if k == 2:
        return flip(input, (a, b))
    perm = list(builtins.range(nd))
    perm[a], perm[b] = perm[b], perm[a]
    if k == 1:
        return transpose(flip(input, (b,)), tuple(perm))
    return flip(transpose(input, tuple(perm)), (b,))


# ------------------------------------------------------------------------------------------------
# index_add / index_fill
def _index_along(op, x, index, axis, arg="index"):
    C.tensor(op, "x", x)
    C.integer(op, arg, index)
    if len(index.shape) > 1:
        raise C.OpValueError(op, f"a 0-d or 1-D '{arg}'", f"shape {tuple(index.shape)}")
    return C.axis(op, axis, len(x.shape))


def _index_add_infer(x, indices, y, axis=0):
    ax = _index_along("index_add", x, indices, axis, "indices")
    C.tensor("index_add", "y", y)
    if y.dtype is not x.dtype:
        raise C.OpTypeError("index_add", "'x' and 'y' of the same dtype", f"{x.dtype} and {y.dtype}")
    n = indices.shape[0] if indices.shape else 1
    want = tuple(x.shape[:ax]) + (n,) + tuple(x.shape[ax + 1:])
    if tuple(y.shape) != want:
        raise C.OpValueError("index_add", f"'y' of shape {want}", f"shape {tuple(y.shape)}")
    return AbstractTensor(x.shape, x.dtype)


def _check_bounds(op, idx, n):
    if idx.size and (idx.min() < -n or idx.max() >= n):
        raise C.OpIndexError(op, f"indices in [{-n}, {n})", f"{idx.min()}..{idx.max()}")


def _index_add_kernel(x, idx, y, axis=0):
    idx = np.asarray(idx).reshape(-1)
    _check_bounds("index_add", idx, x.shape[axis])
    out = x.copy()
    np.add.at(np.moveaxis(out, axis, 0), idx, np.moveaxis(y, axis, 0))     # repeats accumulate
    return out


def _index_add_bprop(inputs, out, dout, axis=0):
    x, idx, y = inputs
    gy = index_select(dout, axis, reshape(idx, (-1,))) if _wanted(inputs, 2) else None
    return (dout, None, gy)


_index_add = defprim("index_add", _index_add_infer, _index_add_kernel, _index_add_bprop,
                     doc="x with y added at `indices` along `axis` (repeats accumulate)")


def index_add(x, indices, y, axis, use_lock=True, check_index_bound=True):
    """`ops.index_add(x, indices, y, axis, use_lock=True, check_index_bound=True)`: x with the slices
    of `y` added at `indices` along `axis` (repeated indices accumulate). Returns a new tensor
    (MindSpore adds into its Parameter `x` in place as well); `use_lock` and
    `check_index_bound` are accepted, and bounds are always checked."""
    from .reduction_extra import bool_arg
    bool_arg("index_add", "use_lock", use_lock)
    bool_arg("index_add", "check_index_bound", check_index_bound)
    return _index_add(x, indices, y, axis=axis)


def _index_fill_infer(x, index, value, axis=0):
    _index_along("index_fill", x, index, axis)
    if C.is_tensor(value):
        if len(value.shape) != 0:
            raise C.OpValueError("index_fill", "a 0-d Tensor or a number as 'value'", f"shape {tuple(value.shape)}")
    elif not (isinstance(value, numbers.Real)):
        raise C.OpTypeError("index_fill", "'value' to be a number or a 0-d Tensor", type(value).__name__)
    return AbstractTensor(x.shape, x.dtype)


def _index_fill_kernel(x, idx, value, axis=0):
    idx = np.asarray(idx).reshape(-1)
    _check_bounds("index_fill", idx, x.shape[axis] if x.ndim else 1)
    out = x.copy()
    if out.ndim == 0:
        return np.asarray(value, dtype=x.dtype) if idx.size else out
    np.moveaxis(out, axis, 0)[idx] = value
    return out


def _index_fill_bprop(inputs, out, dout, axis=0):
    x, idx, value = inputs
    gx = index_fill(dout, axis, idx, 0.0)
    gv = None
    if isinstance(value, Tensor) and _wanted(inputs, 2):
        gv = cast(reduce_sum(sub(dout, gx)), value.dtype)
    return (gx, None, gv)


_index_fill = defprim("index_fill", _index_fill_infer, _index_fill_kernel, _index_fill_bprop,
                      doc="x with the slices at `index` along `axis` set to `value`")


def index_fill(x, axis, index, value):
    """`ops.index_fill(x, axis, index, value)`: x with the slices at `index` (a 0-d/1-D integer
    Tensor) along `axis` set to `value` (a number or 0-d Tensor). The gradient is 0 at the filled
    slices; a Tensor `value` gets the sum of the gradient there."""
    if isinstance(axis, Tensor):
        axis = _int("index_fill", "axis", axis)
    return _index_fill(x, index, value, axis=axis)


# ------------------------------------------------------------------------------------------------
# tensor_split / hsplit / vsplit / dsplit (composites over getitem)
def _split_points(op, n, indices_or_sections):
    if _is_int(indices_or_sections):
        k = int(indices_or_sections)
        if k <= 0:
            raise C.OpValueError(op, "a positive number of sections", repr(k))
        # (k sections is k output tensors, most of them empty when k > n: refuse an absurd k
        # before building a list of k sizes)
        C.output_fits(op, (k, _TENSOR_OVERHEAD_BYTES), np.uint8)
        q, r = divmod(n, k)
        sizes = [q + 1] * r + [q] * (k - r)
        return list(itertools.accumulate(sizes))[:-1]
    if isinstance(indices_or_sections, (tuple, list)) and all(_is_int(i) for i in indices_or_sections):
        return [int(i) for i in indices_or_sections]
    raise C.OpTypeError(op, "'indices_or_sections' as an int or a tuple/list of ints", repr(indices_or_sections))


_TENSOR_OVERHEAD_BYTES = 256          # (about what one small Tensor object costs in Python)


def _split_at(op, input, points, ax):
    n = input.shape[ax]
    bounds = [0] + [min(max(p if p >= 0 else p + n, 0), n) for p in points] + [n]
    pre = (builtins.slice(None),) * ax
    out = []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        out.append(getitem(input, pre + (builtins.slice(lo, max(lo, hi)),)))
    return tuple(out)


def tensor_split(input, indices_or_sections, axis=0):
    """`ops.tensor_split(input, indices_or_sections, axis=0)`: split into `k` nearly equal parts (the
    first n % k one longer) or at the given indices; returns a tuple."""
    C.tensor("tensor_split", "input", input)
    if len(input.shape) == 0:
        raise C.OpValueError("tensor_split", "an input with at least 1 dimension", "a 0-d tensor")
    ax = C.axis("tensor_split", axis, len(input.shape))
    return _split_at("tensor_split", input, _split_points("tensor_split", input.shape[ax], indices_or_sections), ax)


def _xsplit(op, input, indices_or_sections, ax, min_rank):
    C.tensor(op, "input", input)
    if len(input.shape) < min_rank:
        raise C.OpValueError(op, f"an input with at least {min_rank} dimensions", f"shape {tuple(input.shape)}")
    if _is_int(indices_or_sections) and indices_or_sections > 0 and input.shape[ax] % indices_or_sections:
        raise C.OpValueError(op, f"a number of sections dividing {input.shape[ax]}", repr(indices_or_sections))
    return tensor_split(input, indices_or_sections, ax)


def hsplit(input, indices_or_sections):
    """`ops.hsplit(input, indices_or_sections)`: tensor_split along axis 1 (2-D or more; an int must
    divide the size)."""
    return _xsplit("hsplit", input, indices_or_sections, 1, 2)


def vsplit(input, indices_or_sections):
    """`ops.vsplit(input, indices_or_sections)`: tensor_split along axis 0 (2-D or more)."""
    return _xsplit("vsplit", input, indices_or_sections, 0, 2)


def dsplit(input, indices_or_sections):
    """`ops.dsplit(input, indices_or_sections)`: tensor_split along axis 2 (3-D or more)."""
    return _xsplit("dsplit", input, indices_or_sections, 2, 3)


# ------------------------------------------------------------------------------------------------
# strided_slice / slice (composites over getitem)
def _int_tuple(op, arg, v):
    if not isinstance(v, (tuple, list)) or not all(_is_int(i) for i in v):
        raise C.OpTypeError(op, f"'{arg}' as a tuple of ints", repr(v))
    return tuple(int(i) for i in v)


def strided_slice(input_x, begin, end, strides, begin_mask=0, end_mask=0, ellipsis_mask=0, new_axis_mask=0,
                  shrink_axis_mask=0):
    """`ops.strided_slice(input_x, begin, end, strides, begin_mask=0, ...)`: the TensorFlow-style slice.
    Entry i of begin/end/strides is one index spec; bit i of `begin_mask`/`end_mask` ignores
    begin[i]/end[i] (the full range), of `ellipsis_mask` makes spec i a `...`, of `new_axis_mask` a
    new axis of size 1, of `shrink_axis_mask` an integer index begin[i] (the dim is dropped). Dims
    past the specs are taken whole. A composite over getitem."""
    op = "strided_slice"
    C.tensor(op, "input_x", input_x)
    begin, end, strides = (_int_tuple(op, a, v) for a, v in (("begin", begin), ("end", end), ("strides", strides)))
    if not len(begin) == len(end) == len(strides):
        raise C.OpValueError(op, "'begin', 'end' and 'strides' of one length",
                             f"lengths {len(begin)}, {len(end)}, {len(strides)}")
    masks = [C.int_attr(op, a, m, 0) for a, m in (("begin_mask", begin_mask), ("end_mask", end_mask),
                                                  ("ellipsis_mask", ellipsis_mask), ("new_axis_mask", new_axis_mask),
                                                  ("shrink_axis_mask", shrink_axis_mask))]
    bm, em, elm, nm, sm = masks
    if bin(elm).count("1") > 1:
        raise C.OpValueError(op, "at most one bit set in 'ellipsis_mask'", bin(elm))
    if any(s == 0 for s in strides):
        raise C.OpValueError(op, "non-zero strides", repr(strides))
    spec = []
    dim = 0
    for i, (b, e, s) in enumerate(zip(begin, end, strides)):
        bit = 1 << i
        if elm & bit:
            spec.append(Ellipsis)
            dim = None
        elif nm & bit:
            spec.append(None)
        elif sm & bit:
            if dim is not None and dim >= len(input_x.shape):
                raise C.OpIndexError(op, f"at most {len(input_x.shape)} index specs", f"{len(begin)}")
            spec.append(b)
            dim = None if dim is None else dim + 1
        else:
            spec.append(builtins.slice(None if bm & bit else b, None if em & bit else e, s))
            dim = None if dim is None else dim + 1
    if dim is not None and dim > len(input_x.shape):
        raise C.OpIndexError(op, f"at most {len(input_x.shape)} index specs", f"{dim}")
    return getitem(input_x, tuple(spec))


def slice(input_x, begin, size):
    """`ops.slice(input_x, begin, size)`: the block starting at `begin` with `size` entries per dim
    (-1: to the end). A composite over getitem."""
    op = "slice"
    C.tensor(op, "input_x", input_x)
    begin, size = _int_tuple(op, "begin", begin), _int_tuple(op, "size", size)
    nd = len(input_x.shape)
    if len(begin) != nd or len(size) != nd:
        raise C.OpValueError(op, f"'begin' and 'size' of length {nd} (input_x's rank)",
                             f"lengths {len(begin)} and {len(size)}")
    spec = []
    for b, s, n in zip(begin, size, input_x.shape):
        e = n if s == -1 else b + s
        if not (0 <= b <= n) or s < -1 or e > n:
            raise C.OpValueError(op, f"0 <= begin and begin + size <= {n}", f"begin {b}, size {s}")
        spec.append(builtins.slice(b, e))
    return getitem(input_x, tuple(spec))


# ------------------------------------------------------------------------------------------------
# select / sequence_mask (composites)
def select(condition, input, other):
    """`ops.select(condition, input, other)`: `input` where condition is True, else `other` (either may
    be a number). The same op as `ops.where`."""
    return where(condition, input, other)


def sequence_mask(lengths, maxlen=None):
    """`ops.sequence_mask(lengths, maxlen=None)`: Bool mask of shape lengths.shape + (maxlen,), True
    at positions < lengths[...]. maxlen=None uses max(lengths) (read eagerly). A composite of less
    over an arange."""
    C.integer("sequence_mask", "lengths", lengths)
    if maxlen is None:
        maxlen = int(lengths.asnumpy().max()) if lengths.size else 0
    maxlen = _int("sequence_mask", "maxlen", maxlen)
    if maxlen <= 0:
        raise C.OpValueError("sequence_mask", "a positive 'maxlen'", repr(maxlen))
    C.output_fits("sequence_mask", (maxlen,), lengths.dtype.np)             # the positions
    C.output_fits("sequence_mask", tuple(lengths.shape) + (maxlen,), np.bool_)
    positions = Tensor(np.arange(maxlen, dtype=lengths.dtype.np))
    return less(positions, expand_dims(lengths, -1))


# ------------------------------------------------------------------------------------------------
# pixel_shuffle / pixel_unshuffle (composites of reshape and transpose)
def pixel_shuffle(input, upscale_factor):
    """`ops.pixel_shuffle(input, upscale_factor)`: (*, C*r*r, H, W) -> (*, C, H*r, W*r)."""
    C.tensor("pixel_shuffle", "input", input)
    r = C.int_attr("pixel_shuffle", "upscale_factor", upscale_factor, 1)
    s = tuple(input.shape)
    if len(s) < 3 or s[-3] % (r * r):
        raise C.OpValueError("pixel_shuffle", f"an input of 3+ dims whose channels divide by {r * r}", f"shape {s}")
    lead, c, h, w = s[:-3], s[-3] // (r * r), s[-2], s[-1]
    n = len(lead)
    x = reshape(input, lead + (c, r, r, h, w))
    x = transpose(x, tuple(builtins.range(n)) + (n, n + 3, n + 1, n + 4, n + 2))
    return reshape(x, lead + (c, h * r, w * r))


def pixel_unshuffle(input, downscale_factor):
    """`ops.pixel_unshuffle(input, downscale_factor)`: (*, C, H*r, W*r) -> (*, C*r*r, H, W)."""
    C.tensor("pixel_unshuffle", "input", input)
    r = C.int_attr("pixel_unshuffle", "downscale_factor", downscale_factor, 1)
    s = tuple(input.shape)
    if len(s) < 3 or s[-2] % r or s[-1] % r:
        raise C.OpValueError("pixel_unshuffle", f"an input of 3+ dims whose height and width divide by {r}",
                             f"shape {s}")
    lead, c, h, w = s[:-3], s[-3], s[-2] // r, s[-1] // r
    n = len(lead)
    x = reshape(input, lead + (c, h, r, w, r))
    x = transpose(x, tuple(builtins.range(n)) + (n, n + 2, n + 4, n + 1, n + 3))
    return reshape(x, lead + (c * r * r, h, w))


# ------------------------------------------------------------------------------------------------
# atleast_nd and the stacking family (composites of reshape and concat)
def _atleast(op, inputs, nd):
    def one(t):
        C.tensor(op, "inputs", t)
        s = tuple(t.shape)
        if len(s) >= nd:
            return t
        if nd == 3:
            s = {0: (1, 1, 1), 1: (1,) + s + (1,), 2: s + (1,)}[len(s)]
        else:
            s = (1,) * (nd - len(s)) + s
        return reshape(t, s)
    if isinstance(inputs, (tuple, list)):
        return tuple(one(t) for t in inputs)
    return one(inputs)


def atleast_1d(inputs):
    """`ops.atleast_1d(inputs)`: a Tensor (or a tuple, for a list of them) with at least 1 dim."""
    return _atleast("atleast_1d", inputs, 1)


def atleast_2d(inputs):
    """`ops.atleast_2d(inputs)`: at least 2 dims (a vector becomes (1, n))."""
    return _atleast("atleast_2d", inputs, 2)


def atleast_3d(inputs):
    """`ops.atleast_3d(inputs)`: at least 3 dims ((n,) -> (1, n, 1), (m, n) -> (m, n, 1))."""
    return _atleast("atleast_3d", inputs, 3)


def _same_dtype_list(op, tensors):
    if isinstance(tensors, Tensor) or not isinstance(tensors, (tuple, list)) or not tensors:
        raise C.OpTypeError(op, "'tensors' as a non-empty tuple or list of Tensors", type(tensors).__name__)
    for i, t in enumerate(tensors):
        C.tensor(op, f"tensors[{i}]", t)
        if t.dtype is not tensors[0].dtype:
            raise C.OpTypeError(op, "tensors of one dtype", f"{tensors[0].dtype} and {t.dtype} (position {i})")
    return list(tensors)


def hstack(tensors):
    """`ops.hstack(tensors)`: concatenate along axis 1 (axis 0 for 1-D tensors)."""
    ts = [t if len(t.shape) else reshape(t, (1,)) for t in _same_dtype_list("hstack", tensors)]
    return concat(ts, 0 if len(ts[0].shape) == 1 else 1)


def vstack(inputs):
    """`ops.vstack(inputs)`: concatenate along axis 0 after atleast_2d (vectors become rows)."""
    return concat(list(atleast_2d(_same_dtype_list("vstack", inputs))), 0)


row_stack = vstack


def dstack(tensors):
    """`ops.dstack(tensors)`: concatenate along axis 2 after atleast_3d."""
    return concat(list(atleast_3d(_same_dtype_list("dstack", tensors))), 2)


def column_stack(tensors):
    """`ops.column_stack(tensors)`: 0-d/1-D tensors become columns (n, 1); concatenate along axis 1."""
    ts = _same_dtype_list("column_stack", tensors)
    ts = [reshape(t, (-1, 1)) if len(t.shape) < 2 else t for t in ts]
    return concat(ts, 1)


def ravel(input):
    """`ops.ravel(input)`: the flattened 1-D tensor (a reshape)."""
    C.tensor("ravel", "input", input)
    return reshape(input, (-1,))


def repeat_elements(x, rep, axis=0):
    """`ops.repeat_elements(x, rep, axis=0)`: repeat each entry `rep` times along `axis` (the
    repeat_interleave primitive)."""
    C.tensor("repeat_elements", "x", x)
    rep = C.int_attr("repeat_elements", "rep", rep, 1)
    C.axis("repeat_elements", axis, len(x.shape))
    return repeat_interleave(x, rep, axis)


def reverse(x, axis):
    """`ops.reverse(x, axis)`: x reversed along each dim in `axis` (the flip primitive)."""
    C.tensor("reverse", "x", x)
    if _is_int(axis):
        axis = (axis,)
    return flip(x, tuple(_int_tuple("reverse", "axis", axis)))


def view_as(input, other):
    """`ops.view_as(input, other)`: input reshaped to other's shape."""
    C.tensor("view_as", "input", input)
    C.tensor("view_as", "other", other)
    return reshape(input, tuple(other.shape))


# ------------------------------------------------------------------------------------------------
# range / logspace (creation from numbers)
def _number(op, arg, v):
    if isinstance(v, Tensor):
        if v.ndim != 0:
            raise C.OpValueError(op, f"a 0-d Tensor or a number as '{arg}'", f"shape {tuple(v.shape)}")
        return v.asnumpy().item()
    if not isinstance(v, numbers.Real) or isinstance(v, (bool, np.bool_)):
        raise C.OpTypeError(op, f"'{arg}' to be a number or a 0-d Tensor", f"{type(v).__name__} {v!r}")
    return v.item() if isinstance(v, np.generic) else v      # (Python arithmetic: no NumPy overflow)


def range(start, end, step, maxlen=1000000):
    """`ops.range(start, end, step, maxlen=1000000)`: [start, start + step, ...) up to `end`
    (exclusive). Int64 when all three are integers, else Float32 (as MindSpore 2.10 returns);
    more than `maxlen` entries is an error."""
    vals = [_number("range", a, v) for a, v in (("start", start), ("end", end), ("step", step))]
    maxlen = C.int_attr("range", "maxlen", maxlen, 1)
    s, e, d = vals
    try:
        finite = all(math.isfinite(v) for v in vals)
    except OverflowError:                            # (an int beyond the float range)
        finite = False
    if not finite:
        raise C.OpValueError("range", "finite 'start', 'end' and 'step'", f"start {s}, end {e}, step {d}")
    if d == 0:
        raise C.OpValueError("range", "a non-zero 'step'", repr(d))
    if (e - s) * d < 0:
        raise C.OpValueError("range", "'step' pointing from 'start' toward 'end'", f"start {s}, end {e}, step {d}")
    try:
        count = (e - s) / d
    except OverflowError:                            # (ints too large for a float quotient)
        count = math.inf
    if not math.isfinite(count):                     # (a tiny step overflows the count)
        raise C.OpValueError("range", f"at most maxlen={maxlen} entries", f"start {s}, end {e}, step {d}")
    n = max(0, math.ceil(count))
    if all(isinstance(v, numbers.Integral) for v in vals) and not all(
            -2**63 <= v < 2**63 for v in (s, d, s + d * max(n - 1, 0))):
        raise C.OpValueError("range", "integer values within the Int64 range", f"start {s}, end {e}, step {d}")
    if n > maxlen:
        raise C.OpValueError("range", f"at most maxlen={maxlen} entries", str(n))
    if all(isinstance(v, numbers.Integral) for v in vals):
        return Tensor(s + d * np.arange(n, dtype=np.int64))
    return Tensor((s + d * np.arange(n, dtype=np.float64)).astype(np.float32))


def logspace(start, end, steps, base=10, *, dtype=mstype.float32):
    """`ops.logspace(start, end, steps, base=10, *, dtype=float32)`: `steps` numbers base ** t for t
    evenly spaced in [start, end]. minispore also accepts Python numbers for start/end (MindSpore
    2.10 wants 0-d Tensors)."""
    s, e = _number("logspace", "start", start), _number("logspace", "end", end)
    try:
        s, e = float(s), float(e)                  # (an int beyond a float's range has no exponent)
    except OverflowError:
        raise C.OpValueError("logspace", "'start' and 'end' within the float range", f"start {s}, end {e}") from None
    steps = C.int_attr("logspace", "steps", steps, 0)
    base = C.int_attr("logspace", "base", base) if not isinstance(base, float) else base
    dt = mstype.as_dtype(dtype) if not isinstance(dtype, mstype.DType) else dtype
    C.output_fits("logspace", (steps,), np.float64)
    return Tensor(np.logspace(s, e, steps, base=base).astype(dt.np))


# ------------------------------------------------------------------------------------------------
# cartesian_prod / combinations / block_diag (composites)
def cartesian_prod(*inputs):
    """`ops.cartesian_prod(*inputs)`: all tuples of entries of the 1-D inputs, (prod n_i, k) (a
    single input comes back as is). A composite of meshgrid, reshape and stack."""
    if not inputs:
        raise C.OpValueError("cartesian_prod", "at least one 1-D Tensor", "none")
    for i, t in enumerate(inputs):
        C.tensor("cartesian_prod", f"inputs[{i}]", t)
        if len(t.shape) != 1:
            raise C.OpValueError("cartesian_prod", "1-D tensors", f"shape {tuple(t.shape)} at position {i}")
    if len(inputs) == 1:
        return inputs[0]
    grids = meshgrid(*inputs, indexing="ij")
    return stack([reshape(g, (-1,)) for g in grids], 1)


def combinations(input, r=2, with_replacement=False):
    """`ops.combinations(input, r=2, with_replacement=False)`: all length-r combinations of the
    entries of a 1-D input, in lexicographic order of positions, as rows (itertools' order). A
    composite: gather at the index table."""
    from .reduction_extra import bool_arg
    C.tensor("combinations", "input", input)
    if len(input.shape) != 1:
        raise C.OpValueError("combinations", "a 1-D input", f"shape {tuple(input.shape)}")
    r = C.int_attr("combinations", "r", r, 0)
    rep = bool_arg("combinations", "with_replacement", with_replacement)
    gen = itertools.combinations_with_replacement if rep else itertools.combinations
    if r == 0:
        raise C.OpValueError("combinations", "'r' >= 1", "0")
    n = input.shape[0]
    count = math.comb(n + r - 1, r) if rep else math.comb(n, r)
    # the table is count x r ints (itertools itself first allocates r-long buffers)
    C.output_fits("combinations", (count, r), np.int64)
    if count == 0:
        return reshape(getitem(input, builtins.slice(0, 0)), (0, r))
    idx = np.array(list(gen(builtins.range(input.shape[0]), r)), dtype=np.int64).reshape(-1, r)
    if idx.shape[0] == 0:
        return reshape(getitem(input, builtins.slice(0, 0)), (0, r))
    return gather(input, Tensor(idx), 0)


def block_diag(*inputs):
    """`ops.block_diag(*inputs)`: a block-diagonal matrix of 0-, 1- and 2-D tensors of one dtype (a
    vector is a 1 x n block, a number 1 x 1). A composite of pad and concat."""
    if not inputs:
        raise C.OpValueError("block_diag", "at least one Tensor", "none")
    ts = _same_dtype_list("block_diag", list(inputs))
    blocks = []
    for i, t in enumerate(ts):
        if len(t.shape) > 2:
            raise C.OpValueError("block_diag", "0-, 1- or 2-D tensors", f"shape {tuple(t.shape)} at position {i}")
        blocks.append(reshape(t, (1, 1) if len(t.shape) == 0 else (1, t.shape[0]) if len(t.shape) == 1 else t.shape))
    width = sum(b.shape[1] for b in blocks)
    rows, left = [], 0
    for b in blocks:
        w = b.shape[1]
        rows.append(pad(b, (left, width - left - w)))
        left += w
    return concat(rows, 0)


__all__ = ["diagonal", "diag_embed", "diagflat", "take", "rot90", "index_add", "index_fill", "tensor_split",
           "hsplit", "vsplit", "dsplit", "strided_slice", "slice", "select", "sequence_mask", "pixel_shuffle",
           "pixel_unshuffle", "atleast_1d", "atleast_2d", "atleast_3d", "hstack", "vstack", "row_stack", "dstack",
           "column_stack", "ravel", "repeat_elements", "reverse", "view_as", "range", "logspace", "cartesian_prod",
           "combinations", "block_diag"]
