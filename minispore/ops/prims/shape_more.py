"""More shape ops, in MindSpore 2.x's names: narrow, swapaxes/swapdims, moveaxis/movedim, t, shape,
unbind/unstack, meshgrid, roll, diff, flipud/fliplr, tril_indices/triu_indices.

Most are *views* built from the view primitives that already exist (a slice through `getitem`, a
permutation through `transpose`), so `narrow(x, ...)` shares memory with x exactly as `x[:, 1:3]`
does and gets the same backward rule; their own job is MindSpore's argument checking, done before
any primitive runs. `roll` is a primitive of its own (a copy; its backward rolls the other way).
`ops.shape(x)` is not an op on data at all: it returns the Python tuple, as in MindSpore.
"""
from __future__ import annotations

import numbers

import numpy as np

from ...common import dtype as mstype
from ...common.tensor import Tensor
from .. import _check as C
from ..primitive import AbstractTensor, defprim
from .elementwise import sub
from .indexing import getitem
from .shape import broadcast_to, reshape, transpose
from .shape_extra import concat, flip


def _int(op, arg, v):
    if not isinstance(v, numbers.Integral) or isinstance(v, bool):
        raise C.OpTypeError(op, f"'{arg}' to be an int", f"{type(v).__name__} {v!r}")
    return int(v)


def _along(ndim, ax, index):
    """An index tuple that applies `index` to dim `ax` and keeps the others whole."""
    return (slice(None),) * ax + (index,)


# ------------------------------------------------------------------------------------------------
# narrow / swapaxes / moveaxis / t
def narrow(input, axis, start, length):
    """`ops.narrow(input, axis, start, length)`: the view input[..., start:start+length, ...] along
    `axis`. As in MindSpore, start is in [0, size) and length in [1, size - start]."""
    C.tensor("narrow", "input", input)
    ax = C.axis("narrow", _int("narrow", "axis", axis), len(input.shape))
    if len(input.shape) == 0:
        raise C.OpValueError("narrow", "an input of rank >= 1", "a 0-d tensor")
    size = input.shape[ax]
    start, length = _int("narrow", "start", start), _int("narrow", "length", length)
    if not 0 <= start < size:
        raise C.OpValueError("narrow", f"'start' in [0, {size})", repr(start))
    if not 1 <= length <= size - start:
        raise C.OpValueError("narrow", f"'length' in [1, {size - start}] (start={start}, size={size})", repr(length))
    return getitem(input, _along(len(input.shape), ax, slice(start, start + length)))


def swapaxes(input, axis0, axis1):
    """`ops.swapaxes(input, axis0, axis1)`: the view with two dims exchanged."""
    C.tensor("swapaxes", "input", input)
    n = len(input.shape)
    if n == 0:
        raise C.OpValueError("swapaxes", "an input of rank >= 1", "a 0-d tensor")
    a = C.axis("swapaxes", axis0, n)
    b = C.axis("swapaxes", axis1, n)
    perm = list(range(n))
    perm[a], perm[b] = perm[b], perm[a]
    return transpose(input, tuple(perm))


def swapdims(input, dim0, dim1):
    """`ops.swapdims(input, dim0, dim1)`: `swapaxes` under PyTorch's argument names."""
    return swapaxes(input, dim0, dim1)


def _dims(op, arg, v, ndim):
    dims = (v,) if isinstance(v, numbers.Integral) and not isinstance(v, bool) else v
    if not isinstance(dims, (tuple, list)):
        raise C.OpTypeError(op, f"'{arg}' to be an int or a tuple of ints", f"{type(v).__name__} {v!r}")
    out = tuple(C.axis(op, d, ndim) for d in dims)
    if len(set(out)) != len(out):
        raise C.OpValueError(op, f"distinct dims in '{arg}'", repr(v))
    return out


def moveaxis(x, source, destination):
    """`ops.moveaxis(x, source, destination)`: move dims to new positions (the others keep their
    order); a view."""
    C.tensor("moveaxis", "x", x)
    n = len(x.shape)
    if n == 0:
        raise C.OpValueError("moveaxis", "an input of rank >= 1", "a 0-d tensor")
    src = _dims("moveaxis", "source", source, n)
    dst = _dims("moveaxis", "destination", destination, n)
    if len(src) != len(dst):
        raise C.OpValueError("moveaxis", "'source' and 'destination' of the same length",
                             f"{source!r} and {destination!r}")
    rest = [d for d in range(n) if d not in src]
    perm = [None] * n
    for s, d in zip(src, dst):
        perm[d] = s
    it = iter(rest)
    perm = tuple(p if p is not None else next(it) for p in perm)
    return transpose(x, perm)


movedim = moveaxis


def t(input):
    """`ops.t(input)`: the transpose of a matrix (a 1-D input is returned as is)."""
    C.tensor("t", "input", input)
    if len(input.shape) > 2:
        raise C.OpValueError("t", "an input of rank <= 2", f"shape {tuple(input.shape)}")
    return transpose(input, (1, 0)) if len(input.shape) == 2 else input


def flipud(input):
    """`ops.flipud(input)`: reverse dim 0 (rank >= 1)."""
    C.tensor("flipud", "input", input)
    if len(input.shape) < 1:
        raise C.OpValueError("flipud", "an input of rank >= 1", "a 0-d tensor")
    return flip(input, (0,))


def fliplr(input):
    """`ops.fliplr(input)`: reverse dim 1 (rank >= 2)."""
    C.tensor("fliplr", "input", input)
    if len(input.shape) < 2:
        raise C.OpValueError("fliplr", "an input of rank >= 2", f"shape {tuple(input.shape)}")
    return flip(input, (1,))


# ------------------------------------------------------------------------------------------------
# shape / unbind / meshgrid
def shape(input_x):
    """`ops.shape(input_x)`: the shape as a Python tuple of ints (not a Tensor), as in MindSpore."""
    C.tensor("shape", "input_x", input_x)
    return tuple(input_x.shape)


def unbind(input, dim=0):
    """`ops.unbind(input, dim=0)`: the tuple of views input.select(dim, i) for every i."""
    C.tensor("unbind", "input", input)
    if len(input.shape) == 0:
        raise C.OpValueError("unbind", "an input of rank >= 1", "a 0-d tensor")
    ax = C.axis("unbind", _int("unbind", "dim", dim), len(input.shape))
    return tuple(getitem(input, _along(len(input.shape), ax, i)) for i in range(input.shape[ax]))


def unstack(input_x, axis=0):
    """`ops.unstack(input_x, axis=0)`: `unbind` under its older MindSpore name."""
    C.tensor("unstack", "input_x", input_x)
    if len(input_x.shape) == 0:
        raise C.OpValueError("unstack", "an input of rank >= 1", "a 0-d tensor")
    return unbind(input_x, C.axis("unstack", axis, len(input_x.shape)))


def meshgrid(*inputs, indexing="xy"):
    """`ops.meshgrid(*inputs, indexing='xy')`: coordinate grids from 1-D tensors of one dtype.

    'ij': output k varies along dim k (shape (n0, n1, ...)); 'xy' (the default, NumPy's): the first
    two dims are swapped, so for two inputs the outputs have shape (n1, n0). Each output is a
    broadcast of its input (differentiable)."""
    C.one_of("meshgrid", "indexing", indexing, ("xy", "ij"), "'indexing' to be 'xy' or 'ij'")
    if not inputs:
        raise C.OpValueError("meshgrid", "at least one input tensor", "none")
    for i, x in enumerate(inputs):
        C.tensor("meshgrid", f"inputs[{i}]", x)
        if len(x.shape) != 1:
            raise C.OpValueError("meshgrid", "1-D input tensors", f"inputs[{i}] of shape {tuple(x.shape)}")
        if x.dtype is not inputs[0].dtype:
            raise C.OpTypeError("meshgrid", "inputs of one dtype", f"{inputs[0].dtype} and {x.dtype}")
    sizes = [x.shape[0] for x in inputs]
    n = len(inputs)
    out_shape = list(sizes)
    order = list(range(n))
    if indexing == "xy" and n >= 2:
        out_shape[0], out_shape[1] = out_shape[1], out_shape[0]
        order[0], order[1] = 1, 0              # input k lies along output dim order[k]
    grids = []
    for k, x in enumerate(inputs):
        view = [1] * n
        view[order[k]] = sizes[k]
        grids.append(broadcast_to(reshape(x, tuple(view)), tuple(out_shape)))
    return tuple(grids)


# ------------------------------------------------------------------------------------------------
# roll
def _roll_infer(x, shifts=(), dims=None):
    C.tensor("roll", "input", x)
    n = len(x.shape)
    if dims is not None:
        for d in dims:
            C.axis("roll", d, n)
        if len(dims) != len(shifts):
            raise C.OpValueError("roll", "'shifts' and 'dims' of the same length", f"{shifts!r} and {dims!r}")
    elif len(shifts) != 1:
        raise C.OpValueError("roll", "one shift when 'dims' is None", repr(shifts))
    return AbstractTensor(x.shape, x.dtype)


def _roll_kernel(a, shifts=(), dims=None):
    # shifts are reduced modulo the size first (NumPy takes C-long shifts; a 0-d tensor has nothing
    # to roll)
    if a.ndim == 0 or a.size == 0:
        return a.copy()
    if dims is None:
        return np.roll(a, shifts[0] % a.size)       # over the flattened input, shape kept
    return np.roll(a, tuple(s % a.shape[d] for s, d in zip(shifts, dims)), axis=dims)


def _roll_bprop(inputs, out, dout, shifts=(), dims=None):
    return (_roll(dout, shifts=tuple(-s for s in shifts), dims=dims),)


_roll = defprim("roll", _roll_infer, _roll_kernel, _roll_bprop, doc="shift elements cyclically along dims")


def _int_tuple(op, arg, v):
    vals = (v,) if isinstance(v, numbers.Integral) and not isinstance(v, bool) else v
    if not isinstance(vals, (tuple, list)) or not all(isinstance(s, numbers.Integral) and not isinstance(s, bool)
                                                      for s in vals):
        raise C.OpTypeError(op, f"'{arg}' to be an int or a tuple of ints", f"{type(v).__name__} {v!r}")
    return tuple(int(s) for s in vals)


def roll(input, shifts, dims=None):
    """`ops.roll(input, shifts, dims=None)`: elements shifted cyclically by `shifts` along `dims`
    (None: over the flattened input, shape kept). (MindSpore 2.10's CPU wheel has no Roll kernel;
    minispore follows its documented semantics.)"""
    return _roll(input, shifts=_int_tuple("roll", "shifts", shifts),
                 dims=None if dims is None else _int_tuple("roll", "dims", dims))


# ------------------------------------------------------------------------------------------------
# diff
def diff(x, n=1, axis=-1, prepend=None, append=None):
    """`ops.diff(x, n=1, axis=-1, prepend=None, append=None)`: x[i+1] - x[i] along `axis`, n times,
    after joining `prepend`/`append` (Tensors) before/after x. Bool inputs are rejected."""
    C.tensor("diff", "x", x)
    if x.dtype is mstype.bool_:
        raise C.OpTypeError("diff", "'x' with a numeric dtype", str(x.dtype))
    if len(x.shape) == 0:
        raise C.OpValueError("diff", "an input of rank >= 1", "a 0-d tensor")
    n = _int("diff", "n", n)
    if n < 1:
        raise C.OpValueError("diff", "'n' >= 1", repr(n))
    ax = C.axis("diff", _int("diff", "axis", axis), len(x.shape))
    parts = []
    for arg, extra in (("prepend", prepend), ("append", append)):
        if extra is not None:
            C.tensor("diff", arg, extra)
    if prepend is not None:
        parts.append(prepend)
    parts.append(x)
    if append is not None:
        parts.append(append)
    y = concat(parts, ax) if len(parts) > 1 else x
    nd = len(y.shape)
    for _ in range(n):
        size = y.shape[ax]
        if size == 0:
            break
        y = sub(getitem(y, _along(nd, ax, slice(1, size))), getitem(y, _along(nd, ax, slice(0, size - 1))))
    return y


# ------------------------------------------------------------------------------------------------
# tril_indices / triu_indices (constants: not ops on data)
def _indices(op, fn, row, col, offset, dtype):
    row, col, offset = _int(op, "row", row), _int(op, "col", col), _int(op, "offset", offset)
    if row < 0 or col < 0:
        raise C.OpValueError(op, "'row' and 'col' >= 0", f"row={row}, col={col}")
    if row * col > 2 ** 31:
        raise C.OpValueError(op, "row * col <= 2**31", f"row={row}, col={col}")
    dt = mstype.as_dtype(dtype)
    if dt not in (mstype.int32, mstype.int64):
        raise C.OpTypeError(op, "'dtype' Int32 or Int64", str(dt))
    if row == 0 or col == 0:
        return Tensor(np.zeros((2, 0), dt.np))
    C.output_fits(op, (row, col), np.bool_)          # (NumPy builds a row x col mask first)
    return Tensor(np.stack(fn(row, offset, col)).astype(dt.np).reshape(2, -1))


def tril_indices(row, col, offset=0, *, dtype=mstype.int64):
    """`ops.tril_indices(row, col, offset=0, *, dtype=int64)`: the (2, N) coordinates of the lower
    triangle of a row x col matrix (diagonal `offset` included), row-major."""
    return _indices("tril_indices", np.tril_indices, row, col, offset, dtype)


def triu_indices(row, col, offset=0, *, dtype=mstype.int64):
    """`ops.triu_indices(row, col, offset=0, *, dtype=int64)`: the upper-triangle coordinates."""
    return _indices("triu_indices", np.triu_indices, row, col, offset, dtype)


__all__ = ["diff", "fliplr", "flipud", "meshgrid", "moveaxis", "movedim", "narrow", "roll", "shape", "swapaxes",
           "swapdims", "t", "tril_indices", "triu_indices", "unbind", "unstack"]
