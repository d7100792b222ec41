"""N-d scatter/gather and data-dependent selections, in MindSpore 2.x's names: gather_nd,
scatter_nd, tensor_scatter_update/add/sub/mul/div/max/min, masked_select, nonzero, argwhere, unique.

**Index tuples.** `indices` has shape (..., K): each row is a K-tuple addressing input[i0, ..., iK-1]
(a whole slice when K < rank). `updates` then has shape indices.shape[:-1] + input.shape[K:].
Index values must lie in [0, size) (MindSpore rejects negative ones here); inference sees only
shapes, so the kernels check the values and raise OpIndexError.

**Pairs of transposes.** gather_nd and scatter_nd (a scatter into zeros that *adds* repeated
indices, as MindSpore's ScatterNd does) are each other's backward rule; the tensor_scatter family
reuses both. For max/min, the gradient goes to whichever of input/updates produced the output
value, shared evenly among ties (MindSpore's "possible replacement" rule).

**Data-dependent shapes.** nonzero/argwhere/unique have an output size that depends on the values,
so they run eagerly on the data and return constant (non-differentiable) index tensors;
masked_select turns the mask into such indices and then selects with `getitem`, so it is
differentiable like any advanced index.
"""
from __future__ import annotations

import numpy as np

from ...common import dtype as mstype
from ...common.tensor import Tensor
from .. import _check as C
from ..primitive import AbstractTensor, defprim
from .elementwise import div, equal, mul, neg, where, zeros_like, cast
from .indexing import getitem
from .shape import broadcast_to, reshape

_REDUCTIONS = ("update", "add", "sub", "mul", "div", "max", "min")


def _index_tensor(op, indices):
    C.tensor(op, "indices", indices)
    if indices.dtype not in (mstype.int32, mstype.int64):
        raise C.OpTypeError(op, "'indices' of dtype Int32 or Int64", str(indices.dtype))
    if len(indices.shape) == 0:
        raise C.OpValueError(op, "'indices' of rank >= 1 (index tuples along the last dim)", "a 0-d tensor")
    return indices


def _slice_shape(op, indices, target_shape):
    """indices.shape[:-1] + target_shape[K:], after checking K <= rank."""
    k = indices.shape[-1]
    if k > len(target_shape):
        raise C.OpValueError(op, f"index tuples of length <= the rank of the target ({len(target_shape)})",
                             f"length {k} (indices shape {tuple(indices.shape)})")
    return tuple(indices.shape[:-1]) + tuple(target_shape[k:])


def _check_values(op, idx, shape):
    """Every index tuple inside `shape` (values are data: checked in the kernel)."""
    if idx.size == 0:
        return
    k = idx.shape[-1]
    flat = idx.reshape(-1, k)
    bad = (flat < 0) | (flat >= np.asarray(shape[:k]))
    if bad.any():
        row = flat[np.argmax(bad.any(axis=1))]
        raise C.OpIndexError(op, f"index tuples within the shape {tuple(shape[:k])}", str(tuple(int(v) for v in row)))


def _tuple_index(idx):
    """The NumPy index of a (..., K) array of index tuples."""
    return tuple(np.moveaxis(idx, -1, 0))


# ------------------------------------------------------------------------------------------------
# gather_nd / scatter_nd
def _gather_nd_infer(x, indices):
    C.tensor("gather_nd", "input_x", x)
    _index_tensor("gather_nd", indices)
    return AbstractTensor(_slice_shape("gather_nd", indices, x.shape), x.dtype)


def _gather_nd_kernel(a, idx):
    _check_values("gather_nd", idx, a.shape)
    return a[_tuple_index(idx)]


def _gather_nd_bprop(inputs, out, dout):
    x, idx = inputs
    return _scatter_nd(idx, dout, shape=tuple(x.shape)), None


_gather_nd = defprim("gather_nd", _gather_nd_infer, _gather_nd_kernel, _gather_nd_bprop,
                     doc="input[indices[..., 0], ..., indices[..., K-1]]")


def gather_nd(input_x, indices):
    """`ops.gather_nd(input_x, indices)`: the elements (or slices) of input_x addressed by the
    index tuples along the last dim of `indices`."""
    return _gather_nd(input_x, indices)


def _scatter_nd_infer(indices, updates, shape):
    _index_tensor("scatter_nd", indices)
    C.tensor("scatter_nd", "updates", updates)
    if any(s < 0 for s in shape):
        raise C.OpValueError("scatter_nd", "a shape of non-negative sizes", repr(shape))
    want = _slice_shape("scatter_nd", indices, shape)
    if tuple(updates.shape) != want:
        raise C.OpValueError("scatter_nd", f"'updates' of shape indices.shape[:-1] + shape[K:] = {want}",
                             f"shape {tuple(updates.shape)}")
    return AbstractTensor(shape, updates.dtype)


def _scatter_nd_kernel(idx, upd, shape):
    _check_values("scatter_nd", idx, shape)
    out = np.zeros(shape, dtype=upd.dtype)
    np.add.at(out, _tuple_index(idx), upd)            # repeated index tuples add up
    return out


def _scatter_nd_bprop(inputs, out, dout, shape):
    idx = inputs[0]
    return None, _gather_nd(dout, idx)


_scatter_nd = defprim("scatter_nd", _scatter_nd_infer, _scatter_nd_kernel, _scatter_nd_bprop,
                      doc="zeros(shape) with updates added at the index tuples")


def scatter_nd(indices, updates, shape):
    """`ops.scatter_nd(indices, updates, shape)`: a zero tensor of `shape` (a tuple) with `updates`
    added at the index tuples (repeated tuples accumulate)."""
    if not isinstance(shape, tuple):
        raise C.OpTypeError("scatter_nd", "'shape' to be a tuple of ints", type(shape).__name__)
    return _scatter_nd(indices, updates, shape=C.shape_arg("scatter_nd", shape))


# ------------------------------------------------------------------------------------------------
# tensor_scatter_{update, add, sub, mul, div, max, min}
def _tensor_scatter_infer(x, indices, updates, reduction="update"):
    op = f"tensor_scatter_{reduction}"
    C.tensor(op, "input_x", x)
    _index_tensor(op, indices)
    C.tensor(op, "updates", updates)
    if updates.dtype is not x.dtype:
        raise C.OpTypeError(op, f"'updates' of input_x's dtype {x.dtype}", str(updates.dtype))
    want = _slice_shape(op, indices, x.shape)
    if tuple(updates.shape) != want:
        raise C.OpValueError(op, f"'updates' of shape indices.shape[:-1] + input_x.shape[K:] = {want}",
                             f"shape {tuple(updates.shape)}")
    if reduction in ("sub", "mul", "div", "max", "min") and x.dtype is mstype.bool_:
        raise C.OpTypeError(op, "a numeric 'input_x'", str(x.dtype))
    return AbstractTensor(x.shape, x.dtype)


_UFUNC = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide, "max": np.maximum,
          "min": np.minimum}


def _tensor_scatter_kernel(a, idx, upd, reduction="update"):
    _check_values(f"tensor_scatter_{reduction}", idx, a.shape)
    out = a.copy()
    where_ = _tuple_index(idx)
    if reduction == "update":
        out[where_] = upd                              # a repeated tuple: the last update wins
    else:
        with np.errstate(divide="ignore", invalid="ignore"):
            _UFUNC[reduction].at(out, where_, upd)     # repeated tuples apply one after another
    return out


def _tensor_scatter_bprop(inputs, out, dout, reduction="update"):
    x, idx, upd = inputs
    if reduction == "add":
        return dout, None, _gather_nd(dout, idx)
    if reduction == "sub":
        return dout, None, neg(_gather_nd(dout, idx))
    if reduction == "update":
        return _tensor_scatter(dout, idx, zeros_like(upd), reduction="update"), None, _gather_nd(dout, idx)
    if reduction == "mul":                             # out = x * u at the written positions
        gx = _tensor_scatter(dout, idx, upd, reduction="mul")
        gu = _gather_nd(mul(dout, x), idx)
        return gx, None, gu
    if reduction == "div":                             # out = x / u
        gx = _tensor_scatter(dout, idx, upd, reduction="div")
        gu = neg(div(_gather_nd(mul(dout, out), idx), upd))
        return gx, None, gu
    # max / min: whoever equals the output gets the gradient, ties share it evenly
    x_won = cast(equal(x, out), dout.dtype)
    u_won = cast(equal(upd, _gather_nd(out, idx)), dout.dtype)
    count = _tensor_scatter(x_won, idx, u_won, reduction="add")
    share = where(equal(count, 0), zeros_like(dout), div(dout, count))
    return mul(share, x_won), None, mul(_gather_nd(share, idx), u_won)


_tensor_scatter = defprim("tensor_scatter", _tensor_scatter_infer, _tensor_scatter_kernel, _tensor_scatter_bprop,
                          doc="a copy of input_x with updates combined in at the index tuples")


def _tensor_scatter_fn(reduction, doc):
    def fn(input_x, indices, updates):
        return _tensor_scatter(input_x, indices, updates, reduction=reduction)
    fn.__name__ = fn.__qualname__ = f"tensor_scatter_{reduction}"
    fn.__doc__ = (f"`ops.tensor_scatter_{reduction}(input_x, indices, updates)`: a copy of input_x where "
                  f"each index tuple's element (or slice) becomes {doc}.")
    return fn


tensor_scatter_add = _tensor_scatter_fn("add", "itself plus the update (repeated tuples add up)")
tensor_scatter_sub = _tensor_scatter_fn("sub", "itself minus the update")
tensor_scatter_mul = _tensor_scatter_fn("mul", "itself times the update")
tensor_scatter_div = _tensor_scatter_fn("div", "itself divided by the update")
tensor_scatter_max = _tensor_scatter_fn("max", "the larger of itself and the update")
tensor_scatter_min = _tensor_scatter_fn("min", "the smaller of itself and the update")


def tensor_scatter_update(input_x, indices, updates):
    """`ops.tensor_scatter_update(input_x, indices, updates)`: a copy of input_x with the elements
    (or slices) at the index tuples replaced by `updates` (for a repeated tuple the last wins)."""
    return _tensor_scatter(input_x, indices, updates, reduction="update")


# ------------------------------------------------------------------------------------------------
# data-dependent: masked_select, nonzero, argwhere, unique
def masked_select(input, mask):
    """`ops.masked_select(input, mask)`: the 1-D tensor of input's elements where the Bool `mask` is
    True (the two broadcast together first), in row-major order. Differentiable in input."""
    C.tensor("masked_select", "input", input)
    C.tensor("masked_select", "mask", mask)
    if mask.dtype is not mstype.bool_:
        raise C.OpTypeError("masked_select", "'mask' of dtype Bool", str(mask.dtype))
    shape = C.broadcast("masked_select", tuple(input.shape), tuple(mask.shape))
    x = broadcast_to(input, shape) if tuple(input.shape) != shape else input
    m = np.broadcast_to(mask.asnumpy(), shape)
    if len(shape) == 0:
        x = reshape(x, (1,))
        m = m.reshape((1,))
    return getitem(x, Tensor(np.ascontiguousarray(m)))


def _concrete(op, x):
    C.tensor(op, "input", x)
    if not isinstance(x, Tensor):
        raise C.OpTypeError(op, "a concrete Tensor (the output size depends on the values)", type(x).__name__)
    return x.asnumpy()


def nonzero(input, *, as_tuple=False):
    """`ops.nonzero(input, *, as_tuple=False)`: the coordinates of the non-zero elements as an Int64
    tensor of shape (N, rank), row-major; with as_tuple=True, a tuple of rank 1-D tensors (one per
    dim). A 0-d input is rejected, as in MindSpore."""
    a = _concrete("nonzero", input)
    if a.ndim == 0:
        raise C.OpValueError("nonzero", "an input of rank >= 1", "a 0-d tensor")
    coords = np.nonzero(a)
    if C.bool_attr("nonzero", "as_tuple", as_tuple):
        return tuple(Tensor(c.astype(np.int64)) for c in coords)
    return Tensor(np.stack(coords, axis=1).astype(np.int64))


def argwhere(input):
    """`ops.argwhere(input)`: `nonzero(input)` — the (N, rank) Int64 coordinates of non-zero elements."""
    a = _concrete("argwhere", input)
    if a.ndim == 0:
        raise C.OpValueError("argwhere", "an input of rank >= 1", "a 0-d tensor")
    return Tensor(np.argwhere(a).astype(np.int64))


def unique(input):
    """`ops.unique(input)` -> (output, inverse): the distinct values of the flattened input in order
    of first occurrence (as MindSpore's CPU kernel returns them, not sorted), and for every input
    element the Int32 position of its value in `output` (shaped like input). Not differentiable."""
    a = _concrete("unique", input)
    flat = a.reshape(-1)
    values, first, inverse = np.unique(flat, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")             # sorted uniques -> first-occurrence order
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    return Tensor(values[order].astype(a.dtype)), Tensor(rank[inverse.reshape(-1)].reshape(a.shape).astype(np.int32))


__all__ = ["argwhere", "gather_nd", "masked_select", "nonzero", "scatter_nd", "tensor_scatter_add",
           "tensor_scatter_div", "tensor_scatter_max", "tensor_scatter_min", "tensor_scatter_mul",
           "tensor_scatter_sub", "tensor_scatter_update", "unique"]
