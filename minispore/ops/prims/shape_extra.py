"""More shape primitives: squeeze/expand_dims/flatten, concat/stack/split/chunk, tile,
repeat_interleave, flip, tril/triu and pad.

Ops that only relabel dimensions (squeeze, expand_dims, flatten, split pieces, flip) return NumPy
*views*, like reshape/transpose in `shape.py`. Every backward rule is the op's linear transpose
written with minispore ops: squeeze <-> reshape back, concat <-> split, split <-> concat,
tile -> sum over the repeats, pad -> crop (or fold the reflected borders back, for the other modes).
Names and argument order follow MindSpore 2.3's functional API.
"""
from __future__ import annotations

import numbers

import numpy as np

from ...common import dtype as mstype
from ...common.tensor import Tensor
from .. import _check as C
from .. import costs
from .. import sharding_rules as SR
from ..primitive import AbstractTensor, View, defprim
from .shape import reshape

__all__ = ["squeeze", "expand_dims", "unsqueeze", "flatten", "concat", "cat", "stack", "split", "chunk",
           "tile", "repeat_interleave", "flip", "tril", "triu", "pad"]

_TENSOR = (Tensor, AbstractTensor)


def _is_int(v):
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _back_to_shape(inputs, out, dout, **attrs):
    """Backward of any op that only reshapes: reshape the gradient back."""
    return (reshape(dout, tuple(inputs[0].shape)),)


# ------------------------------------------------------------------------------------------------
# squeeze / expand_dims / flatten
def _squeeze_infer(x, axis):
    C.tensor("squeeze", "input", x)
    shape = tuple(x.shape)
    if axis is None:
        return AbstractTensor(tuple(s for s in shape if s != 1), x.dtype)
    axes = C.axes("squeeze", axis, len(shape))
    if not shape:                   # a 0-d input: axis 0 / -1 name its one implicit size-1 dim
        return AbstractTensor((), x.dtype)
    for a in axes:
        if shape[a] != 1:
            raise C.OpValueError("squeeze", f"axis {a} to have size 1", f"size {shape[a]} (input shape {shape})")
    return AbstractTensor(tuple(s for i, s in enumerate(shape) if i not in axes), x.dtype)


def _squeeze_view(x, outs, attrs):
    """np.squeeze as a view; None for a 0-d input with an axis (NumPy has no axis to name there)."""
    try:
        return (np.squeeze(x, attrs["axis"]),)
    except ValueError:
        return None


_squeeze = defprim("squeeze", _squeeze_infer, lambda a, axis: np.squeeze(a, axis) if a.ndim else a.view(),
                   _back_to_shape, doc="remove size-1 dims (a view)", view=View("reinterpret", _squeeze_view),
                   cost=costs.free, sharding=SR.reshape)


def squeeze(input, axis=None):
    """`ops.squeeze(input, axis=None)`: remove the size-1 dims (all of them, or those in `axis`;
    naming a dim whose size is not 1 is an error, as in MindSpore)."""
    axis = C.plain_ints(axis)
    return _squeeze(input, axis=axis)


def _expand_dims_infer(x, axis):
    C.tensor("expand_dims", "input_x", x)
    nd = len(x.shape)
    if not _is_int(axis):
        raise C.OpTypeError("expand_dims", "'axis' to be an int", f"{type(axis).__name__} {axis!r}")
    if not -nd - 1 <= axis <= nd:
        raise C.OpIndexError("expand_dims", f"'axis' in [{-nd - 1}, {nd}]", f"{axis} for a {nd}-d input")
    a = axis % (nd + 1)
    shape = tuple(x.shape)
    return AbstractTensor(shape[:a] + (1,) + shape[a:], x.dtype)


_expand_dims = defprim("expand_dims", _expand_dims_infer,
                       lambda a, axis: np.expand_dims(a, axis), _back_to_shape, doc="insert a size-1 dim (a view)",
                       view=View("reinterpret", lambda x, outs, attrs: (np.expand_dims(x, attrs["axis"]),)),
                       cost=costs.free, sharding=SR.reshape)


def expand_dims(input_x, axis):
    """`ops.expand_dims(input_x, axis)`: insert a size-1 dim at `axis` (in [-ndim-1, ndim])."""
    return _expand_dims(input_x, axis=axis)


def unsqueeze(input, dim):
    """`ops.unsqueeze(input, dim)`: the same as expand_dims."""
    return _expand_dims(input, axis=dim)


def _flattened(shape, start_dim, end_dim):
    n = 1
    for s in shape[start_dim:end_dim + 1]:
        n *= s
    return tuple(shape[:start_dim]) + (n,) + tuple(shape[end_dim + 1:])


def _flatten_infer(x, start_dim, end_dim):
    C.tensor("flatten", "input", x)
    nd = len(x.shape)
    if not (_is_int(start_dim) and _is_int(end_dim) and 0 <= start_dim <= end_dim < nd):
        raise C.OpValueError("flatten", f"0 <= start_dim <= end_dim < {nd} (normalized)",
                             f"start_dim={start_dim!r}, end_dim={end_dim!r}")
    return AbstractTensor(_flattened(tuple(x.shape), start_dim, end_dim), x.dtype)


def _flatten_view(x, outs, attrs):
    """The kernel's reshape as a view, or None where NumPy must copy (x transposed)."""
    try:
        return (x.reshape(outs[0].shape, copy=False),)
    except ValueError:
        return None


_flatten = defprim("flatten", _flatten_infer,
                   lambda a, start_dim, end_dim: a.reshape(_flattened(a.shape, start_dim, end_dim)),
                   _back_to_shape, doc="merge dims start_dim..end_dim into one",
                   view=View("reinterpret", _flatten_view), cost=costs.free, sharding=SR.reshape)


def flatten(input, order='C', *, start_dim=1, end_dim=-1):
    """`ops.flatten(input, order='C', *, start_dim=1, end_dim=-1)` (MindSpore 2.3).

    Merges dims start_dim..end_dim. A 0-d or 1-d input gives a 1-d result; start_dim == end_dim
    returns `input` itself. order='F' flattens in column-major order (MindSpore reverses all dims
    first). Note that MindSpore's *Tensor method* `t.flatten()` defaults to start_dim=0.
    """
    C.tensor("flatten", "input", input)
    if not isinstance(order, str):
        raise C.OpTypeError("flatten", "'order' to be a string", type(order).__name__)
    if order not in ("C", "F"):
        raise C.OpValueError("flatten", "'order' to be 'C' or 'F'", repr(order))
    for name, v in (("start_dim", start_dim), ("end_dim", end_dim)):
        if not _is_int(v):
            raise C.OpTypeError("flatten", f"'{name}' to be an int", f"{type(v).__name__} {v!r}")
    nd = len(input.shape)
    if nd <= 1 and (order == "F" or (start_dim, end_dim) == (1, -1)):
        return reshape(input, (-1,))      # MindSpore returns before checking the (default) dims here
    n = max(nd, 1)
    for name, v in (("start_dim", start_dim), ("end_dim", end_dim)):
        if not -n <= v < n:
            raise C.OpValueError("flatten", f"'{name}' in [{-n}, {n - 1}]", f"{v} for a {nd}-d input")
    s, e = start_dim % n, end_dim % n
    if s > e:
        raise C.OpValueError("flatten", "start_dim <= end_dim (after normalizing negative dims)",
                             f"start_dim={start_dim}, end_dim={end_dim}")
    if nd <= 1:
        return reshape(input, (-1,))
    if order == "F":
        from .shape import transpose
        input = transpose(input, tuple(range(nd - 1, -1, -1)))
    if s == e:
        return input
    return _flatten(input, start_dim=s, end_dim=e)


# ------------------------------------------------------------------------------------------------
# concat / stack / split / chunk
def _tensor_list(op, tensors, arg="tensors"):
    if isinstance(tensors, _TENSOR) or not isinstance(tensors, (tuple, list)):
        raise C.OpTypeError(op, f"'{arg}' to be a tuple or list of Tensors", type(tensors).__name__)
    if len(tensors) == 0:
        raise C.OpValueError(op, f"at least one tensor in '{arg}'", "an empty sequence")
    for i, t in enumerate(tensors):
        if not isinstance(t, _TENSOR):
            raise C.OpTypeError(op, f"'{arg}' to hold only Tensors", f"{type(t).__name__} at position {i}")
    return tuple(tensors)


def _promote_all(tensors):
    dt = tensors[0].dtype
    for t in tensors[1:]:
        if t.dtype is not dt:
            dt = mstype.promote(dt, t.dtype)
    return dt


def _concat_infer(*tensors, axis):
    _tensor_list("concat", tensors)
    first = tuple(tensors[0].shape)
    nd = len(first)
    if nd == 0:
        raise C.OpValueError("concat", "tensors with at least 1 dimension", "a 0-d tensor")
    ax = C.axis("concat", axis, nd)
    total = 0
    for i, t in enumerate(tensors):
        s = tuple(t.shape)
        if len(s) != nd or s[:ax] != first[:ax] or s[ax + 1:] != first[ax + 1:]:
            raise C.OpValueError("concat", f"all shapes equal to {first} except along axis {ax}",
                                 f"shape {s} at position {i}")
        total += s[ax]
    return AbstractTensor(first[:ax] + (total,) + first[ax + 1:], _promote_all(tensors))


def _grads_per_input(pieces, inputs):
    """Cast each gradient piece back to its input's dtype; no gradient for integer inputs."""
    from .elementwise import cast
    out = []
    for g, x in zip(pieces, inputs):
        if not x.dtype.is_floating:
            out.append(None)
        else:
            out.append(cast(g, x.dtype) if g.dtype is not x.dtype else g)
    return tuple(out)


def _concat_bprop(inputs, out, dout, axis):
    ax = axis % len(out.shape)
    sizes = tuple(t.shape[ax] for t in inputs)
    pieces = _split(dout, sizes=sizes, axis=ax) if len(sizes) > 1 else (dout,)
    return _grads_per_input(pieces, inputs)


_concat = defprim("concat", _concat_infer, lambda *arrays, axis: np.concatenate(arrays, axis=axis),
                  _concat_bprop, doc="join tensors along an existing axis", cost=costs.data_movement, sharding=SR.concat)


def concat(tensors, axis=0):
    """`ops.concat(tensors, axis=0)`: join a tuple/list of tensors along `axis` (dtypes promote)."""
    tensors = _tensor_list("concat", tensors)
    return _concat(*tensors, axis=axis)


cat = concat


def _stack_infer(*tensors, axis):
    _tensor_list("stack", tensors)
    first = tuple(tensors[0].shape)
    for i, t in enumerate(tensors):
        if tuple(t.shape) != first:
            raise C.OpValueError("stack", f"all tensors of the same shape {first}", f"shape {tuple(t.shape)} "
                                 f"at position {i}")
    nd = len(first)
    if not _is_int(axis):
        raise C.OpTypeError("stack", "'axis' to be an int", f"{type(axis).__name__} {axis!r}")
    if not -nd - 1 <= axis <= nd:
        raise C.OpIndexError("stack", f"'axis' in [{-nd - 1}, {nd}]", str(axis))
    a = axis % (nd + 1)
    return AbstractTensor(first[:a] + (len(tensors),) + first[a:], _promote_all(tensors))


def _stack_bprop(inputs, out, dout, axis):
    ax = axis % len(out.shape)
    pieces = _split(dout, sizes=(1,) * len(inputs), axis=ax) if len(inputs) > 1 else (dout,)
    pieces = tuple(reshape(p, tuple(x.shape)) for p, x in zip(pieces, inputs))
    return _grads_per_input(pieces, inputs)


_stack = defprim("stack", _stack_infer, lambda *arrays, axis: np.stack(arrays, axis=axis), _stack_bprop,
                 doc="join same-shape tensors along a new axis", cost=costs.data_movement, sharding=SR.concat)


def stack(tensors, axis=0):
    """`ops.stack(tensors, axis=0)`: join same-shape tensors along a new axis."""
    tensors = _tensor_list("stack", tensors)
    return _stack(*tensors, axis=axis)


def _split_infer(x, sizes, axis):
    C.tensor("split", "tensor", x)
    shape = tuple(x.shape)
    ax = C.axis("split", axis, len(shape))
    if len(shape) == 0:
        raise C.OpValueError("split", "a tensor with at least 1 dimension", "a 0-d tensor")
    if sum(sizes) != shape[ax] or any(s < 0 for s in sizes):
        raise C.OpValueError("split", f"non-negative sections summing to {shape[ax]} (axis {ax} of {shape})",
                             repr(tuple(sizes)))
    return tuple(AbstractTensor(shape[:ax] + (s,) + shape[ax + 1:], x.dtype) for s in sizes)


def _split_kernel(a, sizes, axis):
    # basic slices: views, and ~8x cheaper than np.split's generic machinery (RoPE splits twice per
    # attention layer and direction)
    lead = (slice(None),) * (axis % a.ndim)
    pieces, start = [], 0
    for s in sizes:
        pieces.append(a[lead + (slice(start, start + s),)])
        start += s
    return tuple(pieces)


def _split_bprop(inputs, out, dout, sizes, axis):
    return (_concat(*dout, axis=axis),)


def _split_view(x, outs, attrs):
    """The kernel's pieces, one view per output (np.split of basic slices never copies)."""
    return tuple(np.split(x, np.cumsum(attrs["sizes"])[:-1], axis=attrs["axis"]))


_split = defprim("split", _split_infer, _split_kernel, _split_bprop, doc="cut a tensor into pieces (views)",
                 view=View("slice", _split_view), cost=costs.data_movement, sharding=SR.split)


def _split_sizes(op, n, split_size_or_sections):
    s = split_size_or_sections
    if _is_int(s):
        if s <= 0:
            raise C.OpValueError(op, "a positive split size", str(s))
        if n == 0:
            return (0,)
        return (s,) * (n // s) + ((n % s,) if n % s else ())
    if isinstance(s, (tuple, list)) and all(_is_int(v) for v in s):
        return tuple(int(v) for v in s)
    raise C.OpTypeError(op, "'split_size_or_sections' as an int or a tuple/list of ints", repr(s))


def split(tensor, split_size_or_sections, axis=0):
    """`ops.split(tensor, split_size_or_sections, axis=0)` -> tuple of views.

    An int gives pieces of that size (the last may be smaller); a tuple/list gives the sizes."""
    C.tensor("split", "tensor", tensor)
    ax = C.axis("split", axis, len(tensor.shape))
    if len(tensor.shape) == 0:
        raise C.OpValueError("split", "a tensor with at least 1 dimension", "a 0-d tensor")
    sizes = _split_sizes("split", tensor.shape[ax], split_size_or_sections)
    return _split(tensor, sizes=sizes, axis=ax)


def chunk(input, chunks, axis=0):
    """`ops.chunk(input, chunks, axis=0)`: split into `chunks` pieces of size ceil(n / chunks) (the last
    may be smaller, and there may be fewer pieces when n is small, as in MindSpore/PyTorch)."""
    C.tensor("chunk", "input", input)
    chunks = C.plain_ints(chunks)                 # (np.uint8(3) would do uint8 arithmetic below)
    if not _is_int(chunks):
        raise C.OpTypeError("chunk", "'chunks' to be an int", f"{type(chunks).__name__} {chunks!r}")
    if chunks <= 0:
        raise C.OpValueError("chunk", "'chunks' > 0", str(chunks))
    if len(input.shape) == 0:
        raise C.OpValueError("chunk", "a tensor with at least 1 dimension", "a 0-d tensor")
    ax = C.axis("chunk", axis, len(input.shape))
    n = input.shape[ax]
    size = -(-n // chunks)
    sizes = _split_sizes("chunk", n, size) if n else (0,)
    return _split(input, sizes=sizes, axis=ax)


# ------------------------------------------------------------------------------------------------
# tile / repeat_interleave
def _tile_reps(op, x_ndim, dims):
    if not isinstance(dims, (tuple, list)) or not all(_is_int(d) for d in dims):
        raise C.OpTypeError(op, "'dims' as a tuple of ints", repr(dims))
    if any(d < 0 for d in dims):
        raise C.OpValueError(op, "non-negative repeat counts in 'dims'", repr(tuple(dims)))
    return (1,) * (x_ndim - len(dims)) + tuple(int(d) for d in dims)


def _tile_infer(x, reps):
    C.tensor("tile", "input", x)
    reps = _tile_reps("tile", len(x.shape), reps)
    shape = (1,) * (len(reps) - len(x.shape)) + tuple(x.shape)
    return AbstractTensor(tuple(s * r for s, r in zip(shape, reps)), x.dtype)


def _tile_bprop(inputs, out, dout, reps):
    from .reduction import reduce_sum
    x = inputs[0]
    reps = _tile_reps("tile", len(x.shape), reps)
    shape = (1,) * (len(reps) - len(x.shape)) + tuple(x.shape)
    interleaved = tuple(v for r, s in zip(reps, shape) for v in (r, s))     # (r0, s0, r1, s1, ...)
    g = reduce_sum(reshape(dout, interleaved), tuple(range(0, 2 * len(reps), 2)))
    return (reshape(g, tuple(x.shape)),)


def _tile_kernel(a, reps):
    reps = (1,) * (a.ndim - len(reps)) + tuple(reps)
    shape = (1,) * (len(reps) - a.ndim) + a.shape
    out_shape = [s * r for s, r in zip(shape, reps)]
    C.output_fits("tile", out_shape, a.dtype)
    if 0 in out_shape:                  # (np.tile repeats dim by dim, so a later 0 comes too late)
        return np.empty(out_shape, a.dtype)
    return np.tile(a, reps)


_tile = defprim("tile", _tile_infer, _tile_kernel, _tile_bprop,
                doc="repeat the whole tensor along each dim", cost=costs.data_movement)


def tile(input, dims):
    """`ops.tile(input, dims)`: repeat `input` dims[i] times along dim i (shorter `dims` get leading
    1s; a longer one gives the input leading size-1 dims)."""
    dims = C.plain_ints(dims)
    return _tile(input, reps=dims)


def _repeat_infer(x, repeats, axis):
    C.tensor("repeat_interleave", "input", x)
    ax = C.axis("repeat_interleave", axis, len(x.shape))
    shape = list(x.shape)
    if len(shape) == 0:
        raise C.OpValueError("repeat_interleave", "a tensor with at least 1 dimension", "a 0-d tensor")
    if _is_int(repeats):
        if not 0 <= repeats < 2**63:
            raise C.OpValueError("repeat_interleave", "non-negative 'repeats' below 2**63", str(repeats))
        shape[ax] *= repeats
    else:
        if len(repeats) != shape[ax] or any(not 0 <= r < 2**63 for r in repeats):
            raise C.OpValueError("repeat_interleave", f"{shape[ax]} non-negative repeat counts "
                                 f"(one per entry of axis {ax})", repr(repeats))
        shape[ax] = sum(repeats)
    return AbstractTensor(tuple(shape), x.dtype)


def _repeat_bprop(inputs, out, dout, repeats, axis):
    return (_repeat_grad(dout, repeats=repeats, axis=axis, size=inputs[0].shape[axis]),)


def _repeat_grad_kernel(dout, repeats, axis, size):
    shape = list(dout.shape)
    if _is_int(repeats):              # (..., n*r, ...) -> (..., n, r, ...) summed over r
        shape[axis:axis + 1] = [size, repeats]
        return dout.reshape(shape).sum(axis=axis + 1)
    shape[axis] = size
    z = np.zeros(shape, dtype=dout.dtype)
    np.add.at(z, (slice(None),) * axis + (np.repeat(np.arange(size), repeats),), dout)
    return z


def _repeat_grad_infer(dout, repeats, axis, size):
    shape = list(dout.shape)
    shape[axis] = size
    return AbstractTensor(tuple(shape), dout.dtype)


def _repeat_kernel(a, repeats, axis):
    n = a.shape[axis] * repeats if _is_int(repeats) else sum(repeats)
    shape = a.shape[:axis] + (n,) + a.shape[axis + 1:]
    C.output_fits("repeat_interleave", shape, a.dtype)
    if a.size == 0:                     # nothing to repeat (NumPy would still loop over the repeats)
        return np.empty(shape, a.dtype)
    return np.repeat(a, repeats, axis=axis)


_repeat = defprim("repeat_interleave", _repeat_infer, _repeat_kernel,
                  _repeat_bprop, doc="repeat each entry along an axis", cost=costs.data_movement)
_repeat_grad = defprim("repeat_interleave_grad", _repeat_grad_infer, _repeat_grad_kernel,
                       lambda inputs, out, dout, repeats, axis, size: (_repeat(dout, repeats=repeats, axis=axis),),
                       doc="sum the gradient over each entry's repeats", cost=costs.data_movement)


def repeat_interleave(input, repeats, axis=None):
    """`ops.repeat_interleave(input, repeats, axis=None)`: repeat each entry along `axis` (`repeats` an
    int, or one count per entry as a list/1-D Tensor). axis=None works on the flattened input."""
    C.tensor("repeat_interleave", "input", input)
    if isinstance(repeats, Tensor):
        repeats = repeats.asnumpy().reshape(-1).tolist() if repeats.ndim else int(repeats)
    if isinstance(repeats, (tuple, list)):
        if not all(_is_int(r) for r in repeats):
            raise C.OpTypeError("repeat_interleave", "integer 'repeats'", repr(repeats))
        repeats = tuple(int(r) for r in repeats)
    elif not _is_int(repeats):
        raise C.OpTypeError("repeat_interleave", "'repeats' as an int, a list of ints or an integer Tensor",
                            f"{type(repeats).__name__} {repeats!r}")
    if axis is None:
        input = reshape(input, (-1,))
        axis = 0
    ax = C.axis("repeat_interleave", axis, len(input.shape))
    if isinstance(repeats, tuple) and len(repeats) == 1 and len(input.shape) and input.shape[ax] != 1:
        repeats = repeats[0]
    return _repeat(input, repeats=repeats, axis=ax)


# ------------------------------------------------------------------------------------------------
# flip / tril / triu
def _flip_infer(x, dims):
    C.tensor("flip", "input", x)
    if not isinstance(dims, tuple):
        raise C.OpTypeError("flip", "'dims' as a tuple or list of ints", type(dims).__name__)
    if not x.shape:                 # MindSpore's ReverseV2 rejects rank 0 whatever `dims` is
        raise C.OpValueError("flip", "an input with at least 1 dimension", "a 0-d tensor")
    C.axes("flip", dims, len(x.shape))
    return AbstractTensor(x.shape, x.dtype)


_flip = defprim("flip", _flip_infer, lambda a, dims: np.flip(a, dims),
                lambda inputs, out, dout, dims: (_flip(dout, dims=dims),), doc="reverse along dims (a view)",
                cost=costs.data_movement, sharding=SR.flip)


def flip(input, dims):
    """`ops.flip(input, dims)`: reverse the order of entries along each dim in `dims`."""
    dims = C.plain_ints(dims)
    if _is_int(dims):
        dims = (dims,)
    return _flip(input, dims=dims)


def _tri_infer(name):
    def infer(x, diagonal):
        C.tensor(name, "input", x)
        if len(x.shape) < 2:
            raise C.OpValueError(name, "an input with at least 2 dimensions", f"shape {tuple(x.shape)}")
        C.int_attr(name, "diagonal", diagonal)
        return AbstractTensor(x.shape, x.dtype)
    return infer


def _tri_k(a, diagonal):
    """The diagonal offset clamped to the matrix (any offset beyond it keeps all or nothing; NumPy
    needs one that fits a C long)."""
    return min(max(int(diagonal), -a.shape[-2]), a.shape[-1])


_tril = defprim("tril", _tri_infer("tril"), lambda a, diagonal: np.tril(a, _tri_k(a, diagonal)),
                lambda inputs, out, dout, diagonal: (_tril(dout, diagonal=diagonal),),
                doc="zero the entries above the diagonal", cost=costs.data_movement, sharding=SR.triangle)
_triu = defprim("triu", _tri_infer("triu"), lambda a, diagonal: np.triu(a, _tri_k(a, diagonal)),
                lambda inputs, out, dout, diagonal: (_triu(dout, diagonal=diagonal),),
                doc="zero the entries below the diagonal", cost=costs.data_movement, sharding=SR.triangle)


def tril(input, diagonal=0):
    """`ops.tril(input, diagonal=0)`: keep the lower triangle of the last two dims."""
    return _tril(input, diagonal=C.plain_ints(diagonal))


def triu(input, diagonal=0):
    """`ops.triu(input, diagonal=0)`: keep the upper triangle of the last two dims."""
    return _triu(input, diagonal=C.plain_ints(diagonal))


# ------------------------------------------------------------------------------------------------
# pad
_NP_MODE = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}


def _pad_pairs(padding, ndim):
    """MindSpore/PyTorch order (last dim first: left, right, then the dim before ...) -> per dim."""
    pairs = [(0, 0)] * ndim
    for i in range(len(padding) // 2):
        pairs[ndim - 1 - i] = (padding[2 * i], padding[2 * i + 1])
    return pairs


def _pad_infer(x, padding, mode, value):
    C.tensor("pad", "input_x", x)
    if not isinstance(padding, tuple) or not all(_is_int(p) for p in padding):
        raise C.OpTypeError("pad", "'padding' as a tuple or list of ints", repr(padding))
    nd = len(x.shape)
    if len(padding) % 2 or len(padding) // 2 > nd:
        raise C.OpValueError("pad", f"an even number of padding values, at most {2 * nd} for a {nd}-d input",
                             f"{len(padding)} values")
    C.one_of("pad", "mode", mode, ("constant", "reflect", "replicate", "circular"),
             "'mode' in ('constant', 'reflect', 'replicate', 'circular')")
    if value is not None and (mode != "constant" or not isinstance(value, numbers.Real)):
        raise C.OpValueError("pad", "'value' only as a number and only with mode='constant'",
                             f"value={value!r} with mode={mode!r}")
    C.number_fits("pad", "value", x.dtype, value)
    shape = []
    for d, (s, (lo, hi)) in enumerate(zip(x.shape, _pad_pairs(padding, nd))):
        if mode == "constant":
            if s + lo + hi < 0 or lo < -s or hi < -s:
                raise C.OpValueError("pad", f"padding that does not crop more than dim {d} holds ({s})",
                                     repr(padding))
        elif lo < 0 or hi < 0:
            raise C.OpValueError("pad", f"non-negative padding with mode={mode!r}", repr(padding))
        elif mode == "reflect" and (lo >= s or hi >= s):
            raise C.OpValueError("pad", f"reflect padding smaller than the dim size ({s} for dim {d})", repr(padding))
        elif mode == "replicate" and s == 0 and lo + hi > 0:
            raise C.OpValueError("pad", f"a non-empty dim {d} to replicate", "size 0")
        elif mode == "circular" and (lo > s or hi > s):
            raise C.OpValueError("pad", f"circular padding at most the dim size ({s} for dim {d})", repr(padding))
        shape.append(s + lo + hi)
    return AbstractTensor(tuple(shape), x.dtype)


def _pad_kernel(a, padding, mode, value):
    pairs = _pad_pairs(padding, a.ndim)
    if not pairs:                                   # a 0-d input with no padding (NumPy wants pairs)
        return a.copy()
    C.output_fits("pad", [s + lo + hi for s, (lo, hi) in zip(a.shape, pairs)], a.dtype)
    if mode == "constant":
        crop = tuple(slice(-lo if lo < 0 else 0, s + hi if hi < 0 else s) for s, (lo, hi) in zip(a.shape, pairs))
        return np.pad(a[crop], [(max(lo, 0), max(hi, 0)) for lo, hi in pairs], mode="constant",
                      constant_values=0 if value is None else value)
    return np.pad(a, pairs, mode=_NP_MODE[mode])


def _pad_bprop(inputs, out, dout, padding, mode, value):
    if mode == "constant":          # the transpose of padding is cropping (and of cropping, zero-padding)
        return (_pad(dout, padding=tuple(-p for p in padding), mode="constant", value=None),)
    return (_pad_grad(dout, padding=padding, mode=mode, shape=tuple(inputs[0].shape)),)


def _pad_grad_kernel(dout, padding, mode, shape):
    """Fold the reflected/replicated/wrapped borders back onto the entries they copy.

    Along one dim, padding is a gather by `src = np.pad(arange(n), (lo, hi), mode)`; its transpose is
    a scatter-add by the same `src`. The dims are independent, so fold them one after another."""
    g = dout
    for d, (n, (lo, hi)) in enumerate(zip(shape, _pad_pairs(padding, len(shape)))):
        if lo == 0 and hi == 0:
            continue
        src = np.pad(np.arange(n), (lo, hi), mode=_NP_MODE[mode])
        zshape = list(g.shape)
        zshape[d] = n
        z = np.zeros(zshape, dtype=dout.dtype)
        np.add.at(z, (slice(None),) * d + (src,), g)
        g = z
    return g


_pad = defprim("pad", _pad_infer, _pad_kernel, _pad_bprop, doc="pad (or, with negative constant pads, crop)",
               cost=costs.data_movement)
_pad_grad = defprim("pad_grad", lambda dout, padding, mode, shape: AbstractTensor(shape, dout.dtype),
                    _pad_grad_kernel,
                    lambda inputs, out, dout, padding, mode, shape: (_pad(dout, padding=padding, mode=mode,
                                                                          value=None),),
                    doc="transpose of reflect/replicate/circular padding", cost=costs.data_movement)


def pad(input_x, padding, mode='constant', value=None):
    """`ops.pad(input_x, padding, mode='constant', value=None)`.

    `padding` lists (left, right) pairs from the *last* dim backwards, as in MindSpore/PyTorch:
    (1, 2) pads the last dim, (1, 2, 3, 4) also the one before it. mode is 'constant' (fill with
    `value`, default 0; negative pads crop), 'reflect', 'replicate' or 'circular'."""
    if isinstance(padding, Tensor):
        if padding.dtype.kind not in ("int", "uint"):
            raise C.OpTypeError("pad", "'padding' as a tuple of ints or an integer Tensor", f"a {padding.dtype} Tensor")
        padding = tuple(padding.asnumpy().reshape(-1).tolist())
    padding = C.plain_ints(padding)                   # a list / 1-d integer ndarray -> a tuple
    return _pad(input_x, padding=padding, mode=mode, value=value)
