"""Shape primitives: reshape, broadcast_to, transpose and friends.

Where NumPy can, kernels return *views* (no copy), like a strided framework would; the Tensor
front end keeps them as views too (`Tensor.view`, slicing).
"""
from __future__ import annotations

import numpy as np

from ...common import dtype as mstype
from ...common.tensor import Parameter, Tensor
from .. import _check as C
from .. import c_expr
from .. import costs
from .. import sharding_rules as SR
from ..primitive import AbstractTensor, View, defprim

_CONCRETE = frozenset((Tensor, Parameter))      # exact types whose `_data` is a real ndarray
_BY_NP = mstype._BY_NP                          # NumPy dtype -> minispore DType


def _resolve_shape(op, in_shape, shape):
    shape = C.shape_arg(op, shape)
    size = 1
    for s in in_shape:
        size *= s
    if shape.count(-1) > 1:
        raise C.OpValueError(op, "at most one -1 in the shape", repr(shape))
    known = 1
    for s in shape:
        if s != -1:
            if s < 0:
                raise C.OpValueError(op, "non-negative sizes (or one -1)", repr(shape))
            known *= s
    if -1 in shape:
        if known == 0 or size % known:
            raise C.OpValueError(op, f"a shape compatible with {size} elements (input shape {tuple(in_shape)})",
                                 repr(shape))
        shape = tuple(size // known if s == -1 else s for s in shape)
    elif known != size:
        raise C.OpValueError(op, f"a shape with {size} elements (input shape {tuple(in_shape)})", repr(shape))
    return shape


def _reshape_infer(x, shape):
    if type(x) in _CONCRETE and type(shape) is tuple:
        # PyNative fast path (a model reshapes ~35 times a step): a tuple of plain ints with at most
        # one -1 that fits the element count. Anything else takes the checked path below, which
        # gives the same result or the precise error.
        a = x._data
        known, free = 1, -1
        for i, s in enumerate(shape):
            if type(s) is not int:
                break
            if s >= 0:
                known *= s
            elif s == -1 and free < 0:
                free = i
            else:
                break
        else:
            size = a.size
            if free < 0 and known == size:
                return AbstractTensor(shape, _BY_NP[a.dtype])
            if free >= 0 and known and size % known == 0:
                return AbstractTensor(shape[:free] + (size // known,) + shape[free + 1:], _BY_NP[a.dtype])
    C.tensor("reshape", "input", x)
    return AbstractTensor(_resolve_shape("reshape", x.shape, shape), x.dtype)


def _reshape_view(x, outs, attrs):
    """The kernel's `a.reshape(shape)` as a view, or None where NumPy must copy (x transposed)."""
    try:
        return (x.reshape(outs[0].shape, copy=False),)
    except ValueError:
        return None


_reshape = defprim("reshape", _reshape_infer, lambda a, shape: a.reshape(shape),
                   lambda i, o, d, shape: (reshape(d, i[0].shape),), doc="same data, new shape",
                   fusion=c_expr.reads_input(), view=View("reinterpret", _reshape_view), cost=costs.free, sharding=SR.reshape)


def reshape(input, shape):
    """`input` with a new shape (one dimension may be -1)."""
    shape = C.plain_ints(shape)
    if isinstance(input, Tensor) and type(shape) is tuple and input.shape == shape:
        return input
    return _reshape(input, shape=shape)


def _broadcast_to_infer(x, shape):
    C.tensor("broadcast_to", "input", x)
    shape = C.shape_arg("broadcast_to", shape)
    if len(shape) < len(x.shape):
        raise C.OpValueError("broadcast_to", f"a target shape with at least {len(x.shape)} dims", repr(shape))
    lead = len(shape) - len(x.shape)
    # MindSpore: -1 means "keep the input's size there", so it is only meaningful where the input
    # has that dimension (the trailing len(x.shape) entries). A new leading dimension has no size
    # to keep: a -1 there (or any other negative entry) is an error, not a -1 left in the shape.
    for i, t in enumerate(shape):
        if t < -1 or (t == -1 and i < lead):
            raise C.OpValueError("broadcast_to", f"sizes >= 0, or -1 (keep the size) only in the last {len(x.shape)}"
                                 f" entries, where the {len(x.shape)}-d input has dims", f"{t} at index {i} of {shape}")
    full = list(shape)
    for i, s in enumerate(x.shape):
        t = shape[lead + i]
        if t == -1:
            full[lead + i] = s
        elif s != 1 and s != t:
            raise C.OpValueError("broadcast_to", f"a shape that {tuple(x.shape)} broadcasts to", repr(shape))
    return AbstractTensor(tuple(full), x.dtype)


def _broadcast_to_bprop(inputs, out, dout, shape):
    from .elementwise import sum_to
    return (sum_to(dout, inputs[0].shape),)


def _broadcast_to_kernel(a, shape):
    full = tuple(s if s != -1 else a.shape[i - (len(shape) - a.ndim)] for i, s in enumerate(shape))
    # (a view, but NumPy refuses sizes it cannot index, and anything using it would allocate it)
    C.output_fits("broadcast_to", full, a.dtype)
    return np.broadcast_to(a, full)


_broadcast_to = defprim("broadcast_to", _broadcast_to_infer, _broadcast_to_kernel,
                        _broadcast_to_bprop, doc="broadcast to a shape (a read-only view)", fusion=c_expr.reads_input(),
                        view=View("broadcast", lambda x, outs, attrs: (np.broadcast_to(x, outs[0].shape),)),
                        cost=costs.free, sharding=SR.broadcast_to)


def broadcast_to(input, shape):
    shape = C.plain_ints(shape)          # a list, a 1-d integer ndarray, NumPy integers -> a tuple of ints
    if type(shape) is int:
        shape = (shape,)
    if isinstance(input, Tensor) and type(shape) is tuple and input.shape == shape:
        return input
    return _broadcast_to(input, shape=shape)


def _transpose_infer(x, perm):
    if type(x) in _CONCRETE and type(perm) is tuple:
        # PyNative fast path (~170 transposes a step in a small transformer, most of them views in
        # backward rules): a permutation given as non-negative plain ints is checked by sorting it,
        # instead of normalizing each axis through the generic checks.
        a = x._data
        shape = a.shape
        if (len(perm) == len(shape) and all([type(p) is int for p in perm])
                and sorted(perm) == list(range(len(shape)))):
            return AbstractTensor([shape[p] for p in perm], _BY_NP[a.dtype])
    C.tensor("transpose", "input", x)
    if not isinstance(perm, (tuple, list)):
        raise C.OpTypeError("transpose", "'input_perm' as a tuple of ints (one per dimension)",
                            f"{type(perm).__name__} {perm!r}"[:80])
    perm = tuple(perm)
    if sorted(C.axis("transpose", p, len(x.shape)) for p in perm) != list(range(len(x.shape))):
        raise C.OpValueError("transpose", f"a permutation of {list(range(len(x.shape)))}", repr(perm))
    return AbstractTensor(tuple(x.shape[p] for p in perm), x.dtype)


def _transpose_bprop(inputs, out, dout, perm):
    n = len(perm)
    inv = [0] * n
    for i, p in enumerate(perm):
        inv[p % n] = i
    return (transpose(dout, tuple(inv)),)


_transpose = defprim("transpose", _transpose_infer, lambda a, perm: np.transpose(a, perm), _transpose_bprop,
                     doc="permute dimensions (a view)", fusion=c_expr.reads_input(),
                     view=View("permute", lambda x, outs, attrs: (np.transpose(x, attrs["perm"]),)),
                     cost=costs.permutation(lambda attrs: attrs.get("perm")), sharding=SR.transpose)


def transpose(input, input_perm):
    """`ops.transpose(input, input_perm)`: permute dimensions."""
    return _transpose(input, perm=C.plain_ints(input_perm))


def permute(input, dims):
    return transpose(input, dims)


__all__ = ['broadcast_to', 'permute', 'reshape', 'transpose']
