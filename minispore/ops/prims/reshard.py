"""Two primitives of semi-auto parallel: `shard_slice` (a rank keeps its piece of one dim) and
`reshard` (MindSpore's `ms.reshard`: "this value must have this layout here").

* `shard_slice(x, dim=d, parts=p, index=g)` is the local step of a redistribution: a value that is
  whole along `dim` on a group of p ranks becomes split, rank g of the group keeping piece g. No
  communication; its backward rule puts the gradient back in place among zeros (the other ranks'
  pieces are their own gradients' business).
* `reshard(x, device_matrix=..., tensor_map=...)` is the identity on values. In graph mode under
  `semi_auto_parallel` the compiler pass (graph/parallel/propagate.py) reads its layout and
  redistributes `x` to it; in PyNative, and in a world of one, it does nothing. The layout is
  kept as two tuples (device matrix, tensor map in MindSpore's convention) so the node's
  attributes stay plain values.
"""
from __future__ import annotations

import numbers

from ...common.errors import OpTypeError, OpValueError
from .. import _check as C
from ..primitive import AbstractTensor, defprim


def _int(op, arg, v):
    if not isinstance(v, numbers.Integral) or isinstance(v, bool):
        raise OpTypeError(op, f"'{arg}' to be an int", f"{type(v).__name__} {v!r}")
    return int(v)


def _shard_slice_infer(x, *, dim, parts, index):
    op = "shard_slice"
    C.tensor(op, "input", x)
    nd = len(x.shape)
    d = C.axis(op, _int(op, "dim", dim), nd)
    p, g = _int(op, "parts", parts), _int(op, "index", index)
    if p < 1 or not 0 <= g < p:
        raise OpValueError(op, "parts >= 1 and 0 <= index < parts", f"parts={p}, index={g}")
    if x.shape[d] % p:
        raise OpValueError(op, f"dim {d} (size {x.shape[d]}) divisible by parts={p}", f"shape {tuple(x.shape)}")
    shape = list(x.shape)
    shape[d] //= p
    return AbstractTensor(tuple(shape), x.dtype)


def _shard_slice_impl(x, dim, parts, index):
    d = dim % x.ndim
    k = x.shape[d] // parts
    return x[(slice(None),) * d + (slice(index * k, (index + 1) * k),)]


def _shard_slice_bprop(inputs, out, dout, *, dim, parts, index):
    from .shape_extra import pad
    x = inputs[0]
    d = dim % len(x.shape)
    k = x.shape[d] // parts
    widths = [0] * (2 * len(x.shape))
    # ops.pad lists (before, after) pairs from the LAST dim backwards
    j = 2 * (len(x.shape) - 1 - d)
    widths[j], widths[j + 1] = index * k, (parts - 1 - index) * k
    return (pad(dout, tuple(widths)),)


shard_slice = defprim("shard_slice", _shard_slice_infer, _shard_slice_impl, _shard_slice_bprop,
                      doc="a rank's piece `index` of `parts` along `dim` (semi-auto parallel's local slice)")


def _reshard_infer(x, *, device_matrix, tensor_map):
    op = "reshard"
    C.tensor(op, "tensor", x)
    if len(tensor_map) != len(x.shape):
        raise OpValueError(op, f"a layout with one tensor-map entry per dim of the tensor (rank {len(x.shape)})",
                           f"tensor_map {tensor_map}")
    return AbstractTensor(x.shape, x.dtype)


reshard_prim = defprim("reshard", _reshard_infer, lambda x, device_matrix, tensor_map: x,
                       lambda inputs, out, dout, device_matrix, tensor_map: (dout,),
                       doc="identity; in semi-auto graph mode the value is redistributed to the layout")


def reshard(tensor, layout):
    """`ms.reshard(tensor, layout)`: ask for `tensor` to have `layout` (an `ms.Layout` called with
    one alias per dim, e.g. `Layout((2, 2), ("dp", "mp"))("dp", "None")`) at this point of a graph.
    The identity on values: in GRAPH_MODE / jit under `semi_auto_parallel` the compiler pass
    inserts the redistribution to the layout; in PyNative and in a world of one nothing moves."""
    dm, tm = getattr(layout, "device_matrix", None), getattr(layout, "tensor_map", None)
    if dm is None or tm is None:
        raise OpTypeError("reshard", "a Layout called with one alias per tensor dim (ms.Layout(...)(...))",
                          f"{type(layout).__name__} {layout!r}")
    tm = tuple(tuple(e) if isinstance(e, (tuple, list)) else int(e) for e in tm)
    return reshard_prim(tensor, device_matrix=tuple(int(s) for s in dm), tensor_map=tm)


__all__ = ["shard_slice", "reshard"]
