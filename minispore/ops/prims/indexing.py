"""Indexing primitives: `x[index]`, `x[index] = value`, gather/scatter, masked_fill, one_hot, embedding.

**How an index reaches a primitive.** `Tensor.__getitem__` calls `getitem(x, index)`, which splits the
Python index into a hashable *spec* (ints, `Slice`s, None, Ellipsis, and `IndexInput(k)` markers)
and a tuple of integer *index tensors* (see `_indexspec`). The primitive is then called as
`getitem(x, *index_tensors, spec=spec)`: index tensors are ordinary inputs (data, not constants),
the spec is a plain attribute. Bool masks become their `nonzero()` coordinates before the call, so
the output shape of the primitive always follows from input shapes alone.

**Views.** With only ints/slices/None/Ellipsis ("basic" indexing), the kernel returns a NumPy view:
the result shares memory with `x`, as in NumPy and PyTorch. Array ("advanced") indices copy.

**Gradients.** `getitem`'s backward scatters the incoming gradient into zeros of x's shape with
`np.add.at` semantics, so an element picked twice (`x[[0, 0]]`) gets both contributions. That
scatter is itself a primitive (`getitem_grad`) whose backward is `getitem` again, so gradients of
gradients work.

**In-place writes.** `setitem(x, index, value)` writes into x's NumPy buffer (every view of x sees
the change) and bumps `x._version`, so a recorded op that used the old value refuses to
backpropagate. While a gradient is being recorded, the write is also put on the tape: a snapshot
tensor takes over x's old tape node (and a copy of the old data, which that node's backward may
read as its output), and x gets a new node of the pure `setitem` primitive with inputs
`(snapshot, value, *index_tensors)`. Its backward: the old value gets `dout` with the written
region zeroed, `value` gets `dout[index]` summed to its shape. Writing into a *view* of another
tracked tensor is refused, because the base tensor's tape node would silently go stale.
Limitations: a view made with NumPy outside minispore (`Tensor(t.asnumpy()[0])`) is not detected;
a write through a view bumps the view's `_version`, not its base's (Tensor has no shared version
counter); and because the tape checks the version of *every* input of a recorded op, reading a
tensor and then writing into it (`y[:, 0] = f(y[:, 0])`) is refused at backward time, even though
getitem's backward does not need y's values — build such updates out of place (concat, where).
"""
from __future__ import annotations

import numbers

import numpy as np

from ...common import dtype as mstype
from ...common import grad_state
from ...common.errors import MinisporeRuntimeError
from ...common.tensor import Tensor, _wrap
from .. import _check as C
from .. import costs
from .. import sharding_rules as SR
from ..primitive import AbstractTensor, View, defprim
from .elementwise import select_kernel
from ._indexspec import IndexInput, is_basic, normalize, result_shape, to_numpy, value_fits

__all__ = ["getitem", "setitem", "gather", "gather_elements", "gather_d", "index_select", "scatter",
           "masked_fill", "one_hot", "embedding"]

_TENSOR = (Tensor, AbstractTensor)


def _int_indices(op, arg, x):
    C.tensor(op, arg, x)
    if x.dtype.kind not in ("int", "uint"):
        raise C.OpTypeError(op, f"'{arg}' to have an integer dtype", str(x.dtype))
    return x


def _check_range(op, arr, size, allow_negative, what="index"):
    """Value check for index data (inference sees shapes only, so kernels check the values)."""
    if arr.size == 0:
        return
    lo, hi = int(arr.min()), int(arr.max())
    low = -size if allow_negative else 0
    if lo < low or hi >= size:
        bad = lo if lo < low else hi
        raise C.OpIndexError(op, f"{what} values in [{low}, {size})", str(bad))


def _scatter_add_along(shape, axis, indices, values):
    """zeros(shape) with `values` added at `indices` along `axis` (np.add.at semantics: repeated
    indices accumulate), where values.shape = shape[:axis] + indices.shape + shape[axis+1:].

    np.add.at with an index array on the first axis of a 2-D array goes through NumPy's slow
    generic path (~7 ns per element); on a flat array with one flat index per element it takes
    NumPy's fast 1-D path, 3-6x faster at every table size (embedding gradient, vocab 65 and
    32000), and it adds the same numbers in the same order, so results are bit-identical.
    """
    z = np.zeros(shape, dtype=values.dtype)
    if values.size == 0:
        return z
    n = shape[axis]
    pre = int(np.prod(shape[:axis], dtype=np.int64))
    post = int(np.prod(shape[axis + 1:], dtype=np.int64))
    ids = indices.reshape(-1).astype(np.intp, copy=False)
    if ids.min() < 0:                            # negative indices count from the end, as in np.add.at
        ids = ids % n
    flat = (ids[:, None] * post + np.arange(post)).reshape(-1)          # (ids, post), row-major
    if pre != 1:
        flat = (np.arange(pre)[:, None] * (n * post) + flat).reshape(-1)
    np.add.at(z.reshape(-1), flat, values.reshape(-1))
    return z


# ------------------------------------------------------------------------------------------------
# getitem
def _getitem_infer(x, *index_tensors, spec):
    C.tensor("getitem", "input", x)
    for t in index_tensors:
        _int_indices("getitem", "index", t)
    return AbstractTensor(result_shape("getitem", x.shape, spec, [t.shape for t in index_tensors]), x.dtype)


def _index_out_of_range(op, shape, spec, arrays):
    """The error for an index value outside its dim, found by walking the spec (which dim each
    entry indexes) rather than passing NumPy's message on. Inference sees only index *shapes*, so
    the kernel is where a value can be found out of range."""
    n_indexing = sum(1 for e in spec if e is not None and e is not Ellipsis)
    dim = 0
    for e in spec:
        if e is Ellipsis:
            dim += len(shape) - n_indexing
            continue
        if e is None:
            continue
        if dim < len(shape):
            n = shape[dim]
            values = arrays[e.position] if type(e) is IndexInput else (e if type(e) is int else None)
            if values is not None:
                arr = np.asarray(values)
                if arr.size and (int(arr.min()) < -n or int(arr.max()) >= n):
                    bad = int(arr.min()) if int(arr.min()) < -n else int(arr.max())
                    return C.OpIndexError(op, f"index values in [{-n}, {n}) for dim {dim} (of size {n}) of a "
                                          f"tensor of shape {tuple(shape)}", str(bad))
        dim += 1
    return C.OpIndexError(op, f"index values within the shape {tuple(shape)}", "an index outside it")


def _getitem_kernel(a, *index_arrays, spec):
    if not index_arrays:
        return a[to_numpy(spec, ())]            # a view
    try:
        return a[to_numpy(spec, index_arrays)]
    except IndexError:
        raise _index_out_of_range("getitem", a.shape, spec, index_arrays) from None


def _getitem_bprop(inputs, out, dout, spec):
    x, idx = inputs[0], inputs[1:]
    return (_getitem_grad(dout, *idx, spec=spec, shape=tuple(x.shape)),) + (None,) * len(idx)


def _getitem_grad_infer(dout, *index_tensors, spec, shape):
    C.tensor("getitem_grad", "dout", dout)
    return AbstractTensor(shape, dout.dtype)


def _getitem_grad_kernel(dout, *index_arrays, spec, shape):
    z = np.zeros(shape, dtype=dout.dtype)
    if is_basic(spec):
        z[to_numpy(spec, ())] = dout            # a basic index never repeats an element
    else:
        np.add.at(z, to_numpy(spec, index_arrays), dout)    # repeated indices accumulate
    return z


def _getitem_grad_bprop(inputs, out, dout, spec, shape):
    idx = inputs[1:]
    return (_getitem(dout, *idx, spec=spec),) + (None,) * len(idx)


def _getitem_view(x, outs, attrs):
    """x[index] as a view for a basic index (no index tensors) and a result with dims; None for an
    array index (NumPy gathers into new memory) or a 0-d result."""
    spec = attrs["spec"]
    if not is_basic(spec) or not outs[0].shape:
        return None
    try:
        r = x[to_numpy(spec, ())]
    except IndexError:
        return None
    return (r,) if isinstance(r, np.ndarray) else None


_getitem = defprim("getitem", _getitem_infer, _getitem_kernel, _getitem_bprop,
                   doc="x[index]; basic indices give a view", view=View("slice", _getitem_view), cost=costs.gather,
                   sharding=SR.getitem)
_getitem_grad = defprim("getitem_grad", _getitem_grad_infer, _getitem_grad_kernel, _getitem_grad_bprop,
                        doc="scatter-add a getitem gradient into zeros (np.add.at)", cost=costs.data_movement,
                        sharding=SR.getitem_grad)


def getitem(x, index):
    """`x[index]` with NumPy semantics: ints, slices (any step), None, Ellipsis, bool masks and
    integer Tensor/list/ndarray indices, or a tuple of these. Basic indices return a view."""
    if not isinstance(x, _TENSOR):
        raise C.OpTypeError("getitem", "'input' to be a Tensor", type(x).__name__)
    spec, tensors = normalize("getitem", x.shape, index)
    return _getitem(x, *tensors, spec=spec)


# ------------------------------------------------------------------------------------------------
# setitem: a pure primitive (out = old with the region replaced) that the in-place write records
def _setitem_infer(x, value, *index_tensors, spec):
    C.tensor("setitem", "input", x)
    C.tensor_or_scalar("setitem", "value", value)
    C.number_fits("setitem", "value", x.dtype, value)
    for t in index_tensors:
        _int_indices("setitem", "index", t)
    region = result_shape("setitem", x.shape, spec, [t.shape for t in index_tensors])
    if isinstance(value, _TENSOR) and not value_fits(region, value.shape):
        raise C.OpValueError("setitem", f"a value that broadcasts to the indexed region of shape {region}",
                             f"a value of shape {tuple(value.shape)}")
    return AbstractTensor(x.shape, x.dtype)


def _write(a, value, index_arrays, spec):
    """x[index] = value on an ndarray, with minispore errors."""
    if a.dtype == np.bool_ and isinstance(value, numbers.Number):
        value = bool(value)                     # (any number has a truth value; NumPy wants one in Int64)
    try:
        a[to_numpy(spec, index_arrays)] = value
    except IndexError:
        raise _index_out_of_range("setitem", a.shape, spec, index_arrays) from None


def _setitem_kernel(a, value, *index_arrays, spec):
    out = a.copy()
    _write(out, value, index_arrays, spec)
    return out


def _setitem_bprop(inputs, out, dout, spec):
    from .elementwise import cast, sum_to
    from .shape import reshape
    old, value, idx = inputs[0], inputs[1], inputs[2:]
    g_old = _setitem(dout, 0, *idx, spec=spec) if old._node is not None else None
    g_value = None
    if isinstance(value, Tensor) and value.dtype.is_floating:
        g = _getitem(dout, *idx, spec=spec)
        vs = tuple(value.shape)
        core = vs[len(vs) - len(g.shape):] if len(vs) > len(g.shape) else vs     # drop extra leading 1s
        g = sum_to(g, core)
        if core != vs:
            g = reshape(g, vs)
        g_value = cast(g, value.dtype) if g.dtype is not value.dtype else g
    return (g_old, g_value) + (None,) * len(idx)


_setitem = defprim("setitem", _setitem_infer, _setitem_kernel, _setitem_bprop,
                   doc="a copy of x with x[index] replaced by value (the in-place write records this)",
                   cost=costs.data_movement)


def _view_of_tracked(x):
    """True when x was produced by a recorded op from a tracked tensor it shares memory with."""
    node = x._node
    if node is None or node.prim is None or node.prim is _setitem or node.inputs is None:
        return False
    for inp in node.inputs:
        if isinstance(inp, Tensor) and inp is not x and inp._node is not None \
                and np.may_share_memory(inp._data, x._data):
            return True
    return False


def _hand_over_node(node, x, snapshot):
    """Make `snapshot` the output of x's old tape node, so the gradient for x's *old* value reaches
    that node (backward looks cotangents up by the node's output tensors)."""
    snapshot._node = node
    outs = node.outputs
    if type(outs) is tuple:
        node.outputs = tuple(snapshot if o is x else o for o in outs)
    else:
        node.outputs = snapshot


def _as_value(value):
    if isinstance(value, Tensor) or (isinstance(value, numbers.Number) and not isinstance(value, complex)):
        return value
    if isinstance(value, (list, tuple, np.ndarray, np.generic)):
        return Tensor(value)
    raise C.OpTypeError("setitem", "'value' to be a Tensor, a number, or a list/ndarray of numbers",
                        type(value).__name__)


def setitem(x, index, value):
    """`x[index] = value`, in place (views of x see it; `x._version` is bumped). Returns x.

    `value` (a number or Tensor) is cast to x's dtype and must broadcast to the indexed region.
    Under gradient recording the write is recorded too (see the module docstring).
    """
    if not isinstance(x, Tensor):
        raise C.OpTypeError("setitem", "'input' to be a Tensor", type(x).__name__)
    spec, tensors = normalize("setitem", x.shape, index)
    value = _as_value(value)
    _setitem.infer(x, value, *tensors, spec=spec)        # every shape/type error before any write
    if not x._data.flags.writeable:
        raise C.OpValueError("setitem", "a writable tensor", "a read-only view (e.g. from broadcast_to); "
                             "copy it first")
    v_tracked = isinstance(value, Tensor) and value._node is not None
    recording = grad_state.depth > 0 and (x._node is not None or v_tracked)
    if recording and _view_of_tracked(x):
        raise MinisporeRuntimeError(
            "For 'setitem', an in-place write into a view of another tensor that is being "
            "differentiated is not supported: the base tensor's gradient would be wrong. "
            "Write into a tensor that owns its memory (the result of an op, e.g. `t = t * 1`; "
            "`t.copy()` is not recorded) or build the value out of place (ops.where, ops.masked_fill).")
    old_node = x._node
    snapshot = None
    if recording:
        # the old value, for the old node's backward (it may read its output); untracked: shape only
        snapshot = _wrap(x._data.copy() if old_node is not None else x._data)
    vdata = value._data if isinstance(value, Tensor) else value
    _write(x._data, vdata, tuple(t._data for t in tensors), spec)
    x._version += 1
    if recording:
        if old_node is not None:
            _hand_over_node(old_node, x, snapshot)
        grad_state.record(_setitem, (snapshot, value) + tuple(tensors), {"spec": spec}, x)
    return x


# ------------------------------------------------------------------------------------------------
# gather (MindSpore's Gather: a take along one axis, with optional batch dims)
def _gather_check(op, params, indices, axis, batch_dims):
    C.tensor(op, "input_params", params)
    if len(params.shape) == 0:
        raise C.OpValueError(op, "'input_params' with at least 1 dimension", "a 0-d tensor")
    _int_indices(op, "input_indices", indices)
    ax = C.axis(op, axis, len(params.shape))
    b = C.int_attr(op, "batch_dims", batch_dims, minimum=0)
    if b > len(indices.shape) or b > ax:
        raise C.OpValueError(op, f"'batch_dims' <= rank of indices ({len(indices.shape)}) and <= axis ({ax})",
                             str(batch_dims))
    if tuple(params.shape[:b]) != tuple(indices.shape[:b]):
        raise C.OpValueError(op, f"the first {b} dims of params and indices to match (batch_dims)",
                             f"{tuple(params.shape)} and {tuple(indices.shape)}")
    return ax, b


def _gather_infer(params, indices, axis, batch_dims):
    ax, b = _gather_check("gather", params, indices, axis, batch_dims)
    ps = tuple(params.shape)
    return AbstractTensor(ps[:ax] + tuple(indices.shape[b:]) + ps[ax + 1:], params.dtype)


def _batched_index(pshape, indices, axis, b):
    """(index tuple, perm) so that params[index].transpose(perm) is the batched gather.

    The batch aranges and `indices` are advanced indices separated by the slices of the dims between
    the batch dims and `axis`, so NumPy puts their dims first: B + I + pre + post. `perm` moves
    `pre` back in front of I."""
    nb, ni = b, indices.ndim - b
    batch = [np.arange(pshape[d]).reshape((-1,) + (1,) * (nb - d - 1 + ni)) for d in range(nb)]
    index = tuple(batch) + (slice(None),) * (axis - b) + (indices,)
    npre, npost = axis - b, len(pshape) - axis - 1
    order = list(range(nb))                                           # B
    order += list(range(nb + ni, nb + ni + npre))                     # pre
    order += list(range(nb, nb + ni))                                 # I
    order += list(range(nb + ni + npre, nb + ni + npre + npost))      # post
    return index, tuple(order)


def _gather_kernel(params, indices, axis, batch_dims):
    axis %= params.ndim
    _check_range("gather", indices, params.shape[axis], allow_negative=False)
    if batch_dims == 0:
        return np.take(params, indices, axis=axis)
    index, perm = _batched_index(params.shape, indices, axis, batch_dims)
    return params[index].transpose(perm)


def _gather_bprop(inputs, out, dout, axis, batch_dims):
    params, indices = inputs
    return (_gather_grad(dout, indices, axis=axis, batch_dims=batch_dims, shape=tuple(params.shape)), None)


def _gather_grad_infer(dout, indices, axis, batch_dims, shape):
    return AbstractTensor(shape, dout.dtype)


def _gather_grad_kernel(dout, indices, axis, batch_dims, shape):
    axis %= len(shape)
    if batch_dims == 0:
        return _scatter_add_along(shape, axis, indices, dout)
    z = np.zeros(shape, dtype=dout.dtype)
    index, perm = _batched_index(shape, indices, axis, batch_dims)
    np.add.at(z, index, dout.transpose(np.argsort(perm)))
    return z


def _gather_grad_bprop(inputs, out, dout, axis, batch_dims, shape):
    return (_gather(dout, inputs[1], axis=axis, batch_dims=batch_dims), None)


_gather = defprim("gather", _gather_infer, _gather_kernel, _gather_bprop,
                  doc="take slices of params along axis at indices (MindSpore Gather)", cost=costs.gather, sharding=SR.gather)
_gather_grad = defprim("gather_grad", _gather_grad_infer, _gather_grad_kernel, _gather_grad_bprop,
                       doc="scatter-add a gather gradient back into params' shape", cost=costs.data_movement,
                       sharding=SR.gather_grad)


def gather(input_params, input_indices, axis, batch_dims=0):
    """`ops.gather(input_params, input_indices, axis, batch_dims=0)`: slices of `input_params` along
    `axis` at `input_indices` (values in [0, shape[axis])). Output shape:
    params.shape[:axis] + indices.shape[batch_dims:] + params.shape[axis + 1:]."""
    if isinstance(axis, Tensor):
        axis = int(axis)
    return _gather(input_params, input_indices, axis=axis, batch_dims=batch_dims)


def index_select(input, axis, index):
    """`ops.index_select(input, axis, index)`: the entries of `input` along `axis` at the 1-D `index`."""
    C.tensor("index_select", "input", input)
    _int_indices("index_select", "index", index)
    if len(index.shape) != 1:
        raise C.OpValueError("index_select", "a 1-D 'index'", f"shape {tuple(index.shape)}")
    C.axis("index_select", axis, len(input.shape))
    return _gather(input, index, axis=axis, batch_dims=0)


# ------------------------------------------------------------------------------------------------
# gather_elements (torch.gather) and scatter (its transpose with overwrite)
def _elements_check(op, x, dim, index, x_arg="input"):
    C.tensor(op, x_arg, x)
    _int_indices(op, "index", index)
    d = C.axis(op, dim, len(x.shape))
    if len(index.shape) != len(x.shape):
        raise C.OpValueError(op, f"'index' with the same rank as '{x_arg}' ({len(x.shape)})",
                             f"rank {len(index.shape)}")
    for i, (si, sx) in enumerate(zip(index.shape, x.shape)):
        if i != d and si > sx:
            raise C.OpValueError(op, f"index.shape[{i}] <= {x_arg}.shape[{i}] for dims other than {d}",
                                 f"index shape {tuple(index.shape)} for {x_arg} shape {tuple(x.shape)}")
    return d


def _region(index_shape, dim):
    """Slices restricting an array to index's extent in every dim except `dim`."""
    return tuple(slice(None) if i == dim else slice(0, s) for i, s in enumerate(index_shape))


def _elements_grid(index, dim):
    """A full NumPy index tuple addressing x[..., index[...], ...] elementwise (for np.add.at)."""
    nd = index.ndim
    grid = [np.arange(s).reshape((1,) * i + (-1,) + (1,) * (nd - i - 1)) for i, s in enumerate(index.shape)]
    grid[dim] = index
    return tuple(grid)


def _gather_elements_infer(x, dim, index):
    _elements_check("gather_elements", x, dim, index)
    return AbstractTensor(index.shape, x.dtype)


def _gather_elements_kernel(x, index, dim):
    if x.ndim == 0:                 # 0-d: the one element, addressed as index 0 (or -1) of a 1-vector
        return _gather_elements_kernel(x.reshape(1), index.reshape(1), 0).reshape(())
    dim %= x.ndim
    _check_range("gather_elements", index, x.shape[dim], allow_negative=True)
    return np.take_along_axis(x[_region(index.shape, dim)], index, axis=dim)


def _gather_elements_bprop(inputs, out, dout, dim):
    x, index = inputs
    return (_gather_elements_grad(dout, index, dim=dim, shape=tuple(x.shape)), None)


def _gather_elements_grad_kernel(dout, index, dim, shape):
    if not shape:
        return _gather_elements_grad_kernel(dout.reshape(1), index.reshape(1), 0, (1,)).reshape(())
    dim %= len(shape)
    z = np.zeros(shape, dtype=dout.dtype)
    np.add.at(z, _elements_grid(index, dim), dout)
    return z


_gather_elements = defprim("gather_elements", lambda x, index, dim: _gather_elements_infer(x, dim, index),
                           _gather_elements_kernel, _gather_elements_bprop,
                           doc="out[i][j] = x[index[i][j]][j] along dim (torch.gather)", cost=costs.gather)
_gather_elements_grad = defprim(
    "gather_elements_grad", lambda dout, index, dim, shape: AbstractTensor(shape, dout.dtype),
    _gather_elements_grad_kernel,
    lambda inputs, out, dout, dim, shape: (_gather_elements(dout, inputs[1], dim=dim), None),
    doc="scatter-add a gather_elements gradient back into x's shape", cost=costs.data_movement)


def gather_elements(input, dim, index):
    """`ops.gather_elements(input, dim, index)`: `out[i][j] = input[index[i][j]][j]` for dim=0, etc.
    `index` has input's rank; its other dims may be smaller than input's."""
    return _gather_elements(input, index, dim=C.plain_ints(dim))


def gather_d(x, dim, index):
    """`ops.gather_d(x, dim, index)`: the same as gather_elements."""
    return _gather_elements(x, index, dim=C.plain_ints(dim))


def _scatter_infer(x, index, src, axis):
    if isinstance(x, _TENSOR) and not x.shape:      # as MindSpore's Scatter kernel: rank >= 1
        raise C.OpValueError("scatter", "'input' with at least 1 dimension", "a 0-d tensor")
    _elements_check("scatter", x, axis, index)
    C.tensor_or_scalar("scatter", "src", src)
    if isinstance(src, _TENSOR) and tuple(src.shape) != tuple(index.shape):
        raise C.OpValueError("scatter", f"'src' with the shape of 'index' {tuple(index.shape)}",
                             f"shape {tuple(src.shape)}")
    return AbstractTensor(x.shape, x.dtype)


def _scatter_kernel(x, index, src, axis):
    axis %= x.ndim
    _check_range("scatter", index, x.shape[axis], allow_negative=True)
    out = x.copy()
    np.put_along_axis(out[_region(index.shape, axis)], index, src, axis=axis)    # writes through the view
    return out


def _scatter_bprop(inputs, out, dout, axis):
    from .elementwise import cast
    x, index, src = inputs
    gx = _scatter(dout, index, 0, axis=axis)                 # overwritten entries get no gradient
    gs = None
    if isinstance(src, Tensor) and src.dtype.is_floating:
        gs = _gather_elements(dout, index, dim=axis)
        if gs.dtype is not src.dtype:
            gs = cast(gs, src.dtype)
    return gx, None, gs


_scatter = defprim("scatter", _scatter_infer, _scatter_kernel, _scatter_bprop,
                   doc="a copy of input with input[..index..] = src along axis (TensorScatterElements)",
                   cost=costs.data_movement)


def scatter(input, axis, index, src):
    """`ops.scatter(input, axis, index, src)`: a copy of `input` with, for axis=0,
    `out[index[i][j]][j] = src[i][j]`. `src` has index's shape (or is a number). With repeated
    positions, which write wins is unspecified (as in MindSpore)."""
    return _scatter(input, index, src, axis=C.plain_ints(axis))


# ------------------------------------------------------------------------------------------------
# masked_fill
def _masked_fill_infer(x, mask, value):
    C.tensor("masked_fill", "input_x", x)
    C.tensor("masked_fill", "mask", mask)
    if mask.dtype is not mstype.bool_:
        raise C.OpTypeError("masked_fill", "'mask' of dtype Bool", str(mask.dtype))
    C.tensor_or_scalar("masked_fill", "value", value)
    shape = C.broadcast("masked_fill", x.shape, mask.shape)
    if isinstance(value, _TENSOR):
        if len(value.shape) != 0:
            raise C.OpValueError("masked_fill", "'value' as a number or a 0-d Tensor", f"shape {tuple(value.shape)}")
    elif type(value) is int and not -2**63 <= value < 2**64:
        # (NumPy converts the value to an array first, as Int64 or UInt64)
        raise C.OpValueError("masked_fill", "an int 'value' within [-2**63, 2**64)", repr(value))
    return AbstractTensor(shape, x.dtype)


def _masked_fill_kernel(x, mask, value):
    # the branch-free select (see elementwise.select_kernel): same bits as np.where, 2-10x faster
    return select_kernel(mask, np.asarray(value).astype(x.dtype), x)


def _masked_fill_bprop(inputs, out, dout):
    from .elementwise import cast, sum_to, where, zeros_like
    from .reduction import reduce_sum
    x, mask, value = inputs
    zero = zeros_like(dout)
    gx = sum_to(where(mask, zero, dout), x.shape)
    gv = None
    if isinstance(value, Tensor) and value.dtype.is_floating:
        gv = reduce_sum(where(mask, dout, zero))
        if gv.dtype is not value.dtype:
            gv = cast(gv, value.dtype)
    return gx, None, gv


_masked_fill = defprim("masked_fill", _masked_fill_infer, _masked_fill_kernel, _masked_fill_bprop,
                       doc="value where mask is True, else input", cost=costs.ELEMENTWISE, sharding=SR.elementwise)


def masked_fill(input_x, mask, value):
    """`ops.masked_fill(input_x, mask, value)`: `value` (number or 0-d Tensor) where the bool `mask`
    (broadcast against input_x) is True, else input_x."""
    return _masked_fill(input_x, mask, value)


# ------------------------------------------------------------------------------------------------
# one_hot
def _scalar_value_dtype(op, arg, v):
    if isinstance(v, _TENSOR):
        if len(v.shape) != 0:
            raise C.OpValueError(op, f"'{arg}' as a number or a 0-d Tensor", f"shape {tuple(v.shape)}")
        return v.dtype
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise C.OpTypeError(op, f"'{arg}' as an int, a float or a 0-d Tensor", f"{type(v).__name__} {v!r}")
    if type(v) is int and not -2**63 <= v < 2**63:
        raise C.OpValueError(op, f"an int '{arg}' within the Int64 range", repr(v))
    return mstype.scalar_dtype(v)


def _one_hot_infer(indices, on_value, off_value, depth, axis):
    _int_indices("one_hot", "indices", indices)
    C.int_attr("one_hot", "depth", depth, minimum=0)
    dt = _scalar_value_dtype("one_hot", "on_value", on_value)
    _scalar_value_dtype("one_hot", "off_value", off_value)
    nd = len(indices.shape)
    if not isinstance(axis, numbers.Integral) or isinstance(axis, bool) or not -1 <= axis <= nd:
        raise C.OpValueError("one_hot", f"'axis' in [-1, {nd}]", repr(axis))
    shape = list(indices.shape)
    shape.insert(nd if axis == -1 else axis, depth)
    return AbstractTensor(tuple(shape), dt)


def _one_hot_kernel(indices, on_value, off_value, depth, axis):
    C.output_fits("one_hot", (depth,), np.int64)                    # np.arange(depth)
    C.output_fits("one_hot", indices.shape + (depth,), np.float64)
    hot = indices[..., None] == np.arange(depth)       # out-of-range indices give an all-off row
    out = np.where(hot, np.asarray(on_value), np.asarray(off_value))
    if axis != -1:
        out = np.moveaxis(out, -1, axis)
    return out


_one_hot = defprim("one_hot", _one_hot_infer, _one_hot_kernel, None, doc="one-hot encoding", cost=costs.data_movement,
                   sharding=SR.one_hot)


def one_hot(indices, depth, on_value=1, off_value=0, axis=-1):
    """`ops.one_hot(indices, depth, on_value=1, off_value=0, axis=-1)`: the output has on_value's dtype
    (a Python int gives Int64, a float Float32); indices outside [0, depth) give an all-off row."""
    return _one_hot(indices, on_value, off_value, depth=C.plain_ints(depth), axis=C.plain_ints(axis))


# ------------------------------------------------------------------------------------------------
# embedding
def _embedding_infer(ids, weight, padding_idx, scale_grad_by_freq):
    _int_indices("embedding", "input", ids)
    C.tensor("embedding", "weight", weight)
    if len(weight.shape) != 2:
        raise C.OpValueError("embedding", "a 2-D 'weight' (num_embeddings, embedding_dim)",
                             f"shape {tuple(weight.shape)}")
    return AbstractTensor(tuple(ids.shape) + (weight.shape[1],), weight.dtype)


def _embedding_kernel(ids, weight, padding_idx, scale_grad_by_freq):
    _check_range("embedding", ids, weight.shape[0], allow_negative=False, what="input")
    return np.take(weight, ids, axis=0)


def _token_weights(ids, num_weights, padding_idx, scale_grad_by_freq, dtype):
    """Per-token factor of the weight gradient: 0 at padding_idx, 1/count with scale_grad_by_freq."""
    w = np.ones(ids.shape, dtype=dtype)
    if scale_grad_by_freq:
        counts = np.bincount(ids.ravel(), minlength=num_weights)
        w = w / counts[ids]
    if padding_idx is not None:
        w = np.where(ids == padding_idx, 0, w)
    return w.astype(dtype)


def _embedding_bprop(inputs, out, dout, padding_idx, scale_grad_by_freq):
    ids, weight = inputs
    return None, _embedding_grad(dout, ids, num_weights=weight.shape[0], padding_idx=padding_idx,
                                 scale_grad_by_freq=scale_grad_by_freq)


def _embedding_grad_infer(dout, ids, num_weights, padding_idx, scale_grad_by_freq):
    return AbstractTensor((num_weights, dout.shape[-1]), dout.dtype)


def _embedding_grad_kernel(dout, ids, num_weights, padding_idx, scale_grad_by_freq):
    d = dout.shape[-1]
    flat_ids = ids.reshape(-1)
    g = dout.reshape(-1, d)
    if scale_grad_by_freq or padding_idx is not None:
        g = g * _token_weights(flat_ids, num_weights, padding_idx, scale_grad_by_freq, dout.dtype)[:, None]
    return _scatter_add_along((num_weights, d), 0, flat_ids, g)


def _embedding_grad_bprop(inputs, out, dout, num_weights, padding_idx, scale_grad_by_freq):
    from .elementwise import mul
    ids = inputs[1]
    g = _embedding(ids, dout, padding_idx=padding_idx, scale_grad_by_freq=scale_grad_by_freq)
    if scale_grad_by_freq or padding_idx is not None:
        w = _token_weights(ids.asnumpy(), num_weights, padding_idx, scale_grad_by_freq, dout.dtype.np)
        g = mul(g, _wrap(w[..., None]))
    return g, None


_embedding = defprim("embedding", _embedding_infer, _embedding_kernel, _embedding_bprop,
                     doc="rows of weight at input ids", cost=costs.gather, sharding=SR.embedding)
_embedding_grad = defprim("embedding_grad", _embedding_grad_infer, _embedding_grad_kernel, _embedding_grad_bprop,
                          doc="scatter-add token gradients into the embedding table",
                          cost=costs.per_input_element(1, index=0), sharding=SR.embedding_grad)


def _renorm_rows(op, ids, weight, max_norm, norm_type):
    """max_norm: rescale, in place and outside autodiff, the looked-up rows whose norm exceeds it."""
    C.float_attr(op, "max_norm", max_norm, lo=0.0)
    C.float_attr(op, "norm_type", norm_type)
    w = weight._data
    rows = np.unique(ids._data)
    _check_range(op, rows, w.shape[0], allow_negative=False, what="input")
    norms = np.linalg.norm(w[rows].astype(np.float64), ord=norm_type, axis=1)
    big = norms > max_norm
    if np.any(big):
        r = rows[big]
        w[r] = (w[r] * (max_norm / (norms[big] + 1e-7))[:, None]).astype(w.dtype)
        weight._version += 1


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False):
    """`ops.embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
    scale_grad_by_freq=False)`: `weight[input]`.

    The gradient for `weight` is a scatter-add of the output gradient (rows used twice get both);
    the row `padding_idx` gets none; `scale_grad_by_freq` divides each token's contribution by its
    count in `input`; `max_norm` renormalizes the looked-up rows of `weight` in place first.
    """
    _embedding_infer(input, weight, None, False)
    if padding_idx is not None:
        n = weight.shape[0]
        padding_idx = C.int_attr("embedding", "padding_idx", padding_idx)
        if not -n <= padding_idx < n:
            raise C.OpValueError("embedding", f"'padding_idx' in [{-n}, {n})", str(padding_idx))
        padding_idx %= n
    if max_norm is not None:
        _renorm_rows("embedding", input, weight, max_norm, norm_type)
    return _embedding(input, weight, padding_idx=padding_idx, scale_grad_by_freq=bool(scale_grad_by_freq))
