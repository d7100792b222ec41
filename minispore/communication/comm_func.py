"""`minispore.communication.comm_func` (MindSpore's `mindspore.communication.comm_func`): the
collectives as functions.

    from minispore.communication import init, comm_func
    init()
    total, _ = comm_func.all_reduce(x)                         # (Tensor, None): every rank's sum
    out, handle = comm_func.all_reduce(x, async_op=True)       # MPI_Iallreduce is now in flight
    ...                                                        # compute something else meanwhile
    handle.wait()                                              # now `out` holds the sum

The synchronous forms call the collective primitives (ops/prims/comm.py), so they are
differentiable and become graph nodes under `jit`, exactly like `ops.AllReduce()`. With
`async_op=True` a function posts the MPI non-blocking call (Iallreduce, Iallgather,
Ireduce_scatter_block, Ialltoall(v), Ibcast, Isend/Irecv) and returns a `CommHandle`; the
returned Tensor holds the result once `handle.wait()` returned (reading it earlier gives
unspecified values, as in MindSpore). Asynchronous calls are not recorded for autodiff: they are
for moving data you do not differentiate through (bucketed gradient all-reduce). Inside a `jit`
capture an async call runs as the synchronous graph node and returns a handle that is already
complete (a graph executes its nodes in schedule order).

Return values follow MindSpore 2.4/2.5's comm_func: `all_reduce`, `all_gather_into_tensor`,
`reduce_scatter_tensor`, `all_to_all_single_with_output_shape` return `(Tensor, CommHandle or
None)`; `broadcast` and `recv` return the Tensor (`broadcast(..., async_op=True)`, a minispore
extension, returns `(Tensor, CommHandle)`); `isend` a CommHandle; `irecv` `(Tensor, CommHandle)`;
`batch_isend_irecv` the tuple of results (a 0-d placeholder for each send). The in-place forms of
`mindspore.ops.communication` / `mint.distributed` - `all_gather_into_tensor(output, input)`,
`reduce_scatter_tensor(output, input)`, `all_to_all_single(output, input)` with a Tensor `output`
- write into `output` and return only the CommHandle (None when synchronous); they are not
differentiable (an in-place write).

Ranks (`src`, `dst`, `peer`) are world ranks, as in MindSpore. `group=None` is the world.
"""
from __future__ import annotations

import numbers

import numpy as np

from ..common.errors import OpTypeError, OpValueError
from ..common.tensor import Tensor
from ..ops.prims import comm as _c
from ..ops.operations.comm_ops import ReduceOp
from ..ops.prims.state_ops import is_traced


class CommHandle:
    """The handle of an asynchronous collective. `wait()` blocks until the communication finished
    and the result tensors hold their values; `is_completed()` asks without blocking."""

    def __init__(self, pendings=(), outputs=()):
        self._pendings = list(pendings)
        self._outputs = list(outputs)       # Tensor (filled at wait) or None, one per pending

    def is_completed(self) -> bool:
        return all(p.test() for p in self._pendings)

    def wait(self):
        for p, out in zip(self._pendings, self._outputs):
            result = p.wait()
            if out is not None and result is not None:
                _fill(out, result)
        self._pendings, self._outputs = [], []

    def __repr__(self):
        return f"CommHandle(pending={len(self._pendings)})"


def _fill(out, result):
    """Give the output Tensor its result (its placeholder buffer had the right shape and dtype)."""
    np.copyto(out._data, np.asarray(result).reshape(out._data.shape), casting="unsafe")
    out._version += 1


def _tensor(op, arg, x):
    if not isinstance(x, Tensor):
        raise OpTypeError(op, f"'{arg}' to be a Tensor", type(x).__name__)
    return x


def _async_flag(op, async_op):
    if not isinstance(async_op, bool):
        raise OpTypeError(op, "'async_op' to be a bool", f"{type(async_op).__name__} {async_op!r}")
    return async_op


def _placeholder(aval):
    return Tensor(np.empty(aval.shape, aval.dtype.np))


def _run(prim, start, x, attrs, async_op, op):
    """Synchronous: the primitive (differentiable, a graph node under jit). Asynchronous: check
    with the primitive's inference, post the non-blocking MPI call, return (output, handle)."""
    if not _async_flag(op, async_op) or is_traced(x):
        out = prim(x, **attrs)
        return out, (CommHandle() if async_op else None)
    aval = prim.infer(x, **attrs)
    out = _placeholder(aval)
    pending = start(x._data, **attrs, nonblocking=True)
    return out, CommHandle([pending], [out])


def _write_into(op, output, result):
    """The in-place forms: `output` must have the result's shape and dtype."""
    _tensor(op, "output_tensor", output)
    if tuple(output.shape) != tuple(result.shape) or output.dtype is not result.dtype:
        raise OpValueError(op, f"'output_tensor' of shape {tuple(result.shape)} and dtype {result.dtype}",
                           f"shape {tuple(output.shape)} and dtype {output.dtype}")


def _in_place(op, prim, start, output, x, attrs, async_op):
    aval = prim.infer(x, **attrs)
    _write_into(op, output, aval)
    if _async_flag(op, async_op):
        return CommHandle([start(x._data, **attrs, nonblocking=True)], [output])
    _fill(output, prim(x, **attrs)._data)
    return None


# -------------------------------------------------------------------------------------------------
def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduce `tensor` (op: 'sum', 'max', 'min', 'prod') over the group; every rank gets the
    result. Returns (Tensor, CommHandle or None)."""
    _tensor("all_reduce", "tensor", tensor)
    return _run(_c.all_reduce, _c.start_all_reduce, tensor, {"op": op, "group": _name(group)}, async_op, "all_reduce")


def _all_gather_func(tensor, group=None, async_op=False):
    _tensor("all_gather_into_tensor", "tensor", tensor)
    return _run(_c.all_gather, _c.start_all_gather, tensor, {"group": _name(group)}, async_op,
                "all_gather_into_tensor")


def _all_gather_in_place(output_tensor, input_tensor, group=None, async_op=False):
    _tensor("all_gather_into_tensor", "input_tensor", input_tensor)
    return _in_place("all_gather_into_tensor", _c.all_gather, _c.start_all_gather, output_tensor, input_tensor,
                     {"group": _name(group)}, async_op)


def _second_is_tensor(args, kwargs, name):
    return (len(args) > 1 and isinstance(args[1], Tensor)) or name in kwargs


def all_gather_into_tensor(*args, **kwargs):
    """The group's tensors concatenated along axis 0 (group-rank order). Two forms:

    * `all_gather_into_tensor(tensor, group=None, async_op=False)` (comm_func): returns (Tensor,
      CommHandle or None); differentiable.
    * `all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False)`
      (ops.communication / mint.distributed): writes into output_tensor (its shape and dtype must
      be the result's) and returns the CommHandle (None when synchronous)."""
    if _second_is_tensor(args, kwargs, "input_tensor"):
        return _all_gather_in_place(*args, **kwargs)
    return _all_gather_func(*args, **kwargs)


def _reduce_scatter_func(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    _tensor("reduce_scatter_tensor", "tensor", tensor)
    return _run(_c.reduce_scatter, _c.start_reduce_scatter, tensor, {"op": op, "group": _name(group)},
                async_op, "reduce_scatter_tensor")


def _reduce_scatter_in_place(output_tensor, input_tensor, op=ReduceOp.SUM, group=None, async_op=False):
    _tensor("reduce_scatter_tensor", "input_tensor", input_tensor)
    return _in_place("reduce_scatter_tensor", _c.reduce_scatter, _c.start_reduce_scatter, output_tensor,
                     input_tensor, {"op": op, "group": _name(group)}, async_op)


def reduce_scatter_tensor(*args, **kwargs):
    """Reduce over the group (op: 'sum', 'max', 'min', 'prod'), then rank r keeps block r of
    axis 0 (dimension 0 must divide by the group size). Two forms:

    * `reduce_scatter_tensor(tensor, op='sum', group=None, async_op=False)` (comm_func): returns
      (Tensor, CommHandle or None); differentiable for op='sum'.
    * `reduce_scatter_tensor(output_tensor, input_tensor, op='sum', group=None, async_op=False)`:
      writes into output_tensor, returns the CommHandle (None when synchronous)."""
    if _second_is_tensor(args, kwargs, "input_tensor"):
        return _reduce_scatter_in_place(*args, **kwargs)
    return _reduce_scatter_func(*args, **kwargs)


def _split_sizes(op, arg, sizes, total, p):
    if sizes is None:
        if total % p:
            raise OpValueError(op, f"dimension 0 ({total}) divisible by the group size {p} when "
                                   f"'{arg}' is None", f"{total}")
        return (total // p,) * p
    if not isinstance(sizes, (tuple, list)) or not all(
            isinstance(s, numbers.Integral) and not isinstance(s, bool) and s >= 0 for s in sizes):
        raise OpTypeError(op, f"'{arg}' to be a tuple/list of non-negative ints", repr(sizes))
    sizes = tuple(int(s) for s in sizes)
    if len(sizes) != p or sum(sizes) != total:
        raise OpValueError(op, f"'{arg}' with {p} entries summing to {total}", repr(sizes))
    return sizes


def all_to_all_single_with_output_shape(output_shape, tensor, output_split_sizes=None, input_split_sizes=None,
                                        group=None, async_op=False):
    """Rows of `tensor` (axis 0) cut by input_split_sizes go to ranks 0..p-1; the rows received
    (output_split_sizes from each rank) are joined into a tensor of `output_shape`. Sizes None:
    equal splits. Returns (Tensor, CommHandle or None). Differentiable (the rows travel back)."""
    op = "all_to_all_single_with_output_shape"
    _tensor(op, "tensor", tensor)
    if isinstance(output_shape, Tensor):
        output_shape = tuple(int(s) for s in output_shape.asnumpy().reshape(-1))
    if not isinstance(output_shape, (tuple, list)):
        raise OpTypeError(op, "'output_shape' to be a tuple of ints or a Tensor", type(output_shape).__name__)
    output_shape = tuple(output_shape)
    if len(tensor.shape) == 0 or output_shape[1:] != tuple(tensor.shape[1:]):
        raise OpValueError(op, f"'output_shape' {output_shape} to match the input's trailing dimensions",
                           f"input shape {tuple(tensor.shape)}")
    p = _c.group_of(op, _name(group)).size
    attrs = {"send_splits": _split_sizes(op, "input_split_sizes", input_split_sizes, tensor.shape[0], p),
             "recv_splits": _split_sizes(op, "output_split_sizes", output_split_sizes, output_shape[0], p),
             "group": _name(group)}
    return _run(_c.all_to_all_v, _c.start_all_to_all_v, tensor, attrs, async_op, op)


def all_to_all_single(output, input, output_split_sizes=None, input_split_sizes=None, group=None,
                      async_op=False):
    """`mindspore.ops.communication.all_to_all_single`: `output` a Tensor (written in place; returns
    the CommHandle or None) or a shape (returns (Tensor, CommHandle or None))."""
    if isinstance(output, Tensor):
        op = "all_to_all_single"
        _tensor(op, "input", input)
        p = _c.group_of(op, _name(group)).size
        attrs = {"send_splits": _split_sizes(op, "input_split_sizes", input_split_sizes, input.shape[0], p),
                 "recv_splits": _split_sizes(op, "output_split_sizes", output_split_sizes, output.shape[0], p),
                 "group": _name(group)}
        return _in_place(op, _c.all_to_all_v, _c.start_all_to_all_v, output, input, attrs, async_op)
    return all_to_all_single_with_output_shape(output, input, output_split_sizes, input_split_sizes, group, async_op)


def broadcast(tensor, src=0, group=None, async_op=False):
    """Every rank gets the tensor of world rank `src`. Returns the Tensor ((Tensor, CommHandle)
    with async_op=True)."""
    _tensor("broadcast", "tensor", tensor)
    out, handle = _run(_c.broadcast, _c.start_broadcast, tensor, {"root_rank": src, "group": _name(group)},
                       async_op, "broadcast")
    return (out, handle) if async_op else out


def barrier(group=None):
    """Block until every rank of the group reached the barrier."""
    _c.barrier(_name(group)).wait()


def _peer_attrs(op, peer_arg, peer, tag, group):
    if not isinstance(tag, numbers.Integral) or isinstance(tag, bool) or tag < 0:
        raise OpValueError(op, "'tag' to be a non-negative int", repr(tag))
    return {peer_arg: peer, "sr_tag": int(tag), "group": _name(group)}


def send(tensor, dst=0, group=None, tag=0):
    """Send `tensor` to world rank `dst` (blocks until the buffer may be reused). Returns None."""
    _tensor("send", "tensor", tensor)
    _c.send(tensor, **_peer_attrs("send", "dest_rank", dst, tag, group))


def recv(tensor, src=0, group=None, tag=0):
    """Receive from world rank `src` a tensor of `tensor`'s shape and dtype; returns it (`tensor`
    is only the template, as in MindSpore's comm_func)."""
    _tensor("recv", "tensor", tensor)
    return _c.receive(tensor, shape=tuple(tensor.shape), dtype=tensor.dtype,
                      **_peer_attrs("recv", "src_rank", src, tag, group))


def isend(tensor, dst=0, group=None, tag=0):
    """Start sending `tensor` to world rank `dst`; returns a CommHandle (wait before changing it)."""
    _tensor("isend", "tensor", tensor)
    attrs = _peer_attrs("isend", "dest_rank", dst, tag, group)
    _c.send.infer(tensor, **attrs)
    return CommHandle([_c.start_send(tensor._data, attrs["dest_rank"], attrs["sr_tag"], attrs["group"], True)], [None])


def irecv(tensor, src=0, group=None, tag=0):
    """Start receiving from world rank `src` a tensor like `tensor`; returns (Tensor, CommHandle):
    the Tensor holds the data after `wait()`."""
    _tensor("irecv", "tensor", tensor)
    attrs = _peer_attrs("irecv", "src_rank", src, tag, group)
    aval = _c.receive.infer(tensor, shape=tuple(tensor.shape), dtype=tensor.dtype, **attrs)
    out = _placeholder(aval)
    pending = _c.start_receive(attrs["src_rank"], aval.shape, aval.dtype, attrs["sr_tag"], attrs["group"], True)
    return out, CommHandle([pending], [out])


class P2POp:
    """One point-to-point operation for `batch_isend_irecv`: `P2POp('isend' | 'irecv' (or the
    functions isend / irecv), tensor, peer, group=None, tag=0)`; peer is a world rank."""

    def __init__(self, op, tensor, peer, group=None, tag=0):
        if op is isend or op is irecv:
            op = op.__name__
        if op not in ("isend", "irecv"):
            raise OpValueError("P2POp", "op 'isend' or 'irecv' (or the functions isend / irecv)", repr(op))
        _tensor("P2POp", "tensor", tensor)
        self.op, self.tensor, self.peer, self.group, self.tag = op, tensor, peer, group, tag


def batch_isend_irecv(p2p_op_list):
    """Post every P2POp at once (so a ring exchange cannot deadlock), wait for all, and return the
    tuple of results in list order: the received Tensor for an irecv, a 0-d placeholder for an isend."""
    if not isinstance(p2p_op_list, (list, tuple)) or not p2p_op_list or \
            not all(isinstance(o, P2POp) for o in p2p_op_list):
        raise OpTypeError("batch_isend_irecv", "a non-empty list of P2POp", repr(p2p_op_list))
    if len({_name(o.group) for o in p2p_op_list}) != 1:
        raise OpValueError("batch_isend_irecv", "every P2POp in one group",
                           str([o.group for o in p2p_op_list]))
    results, handles = [], []
    for o in p2p_op_list:
        if o.op == "isend":
            handles.append(isend(o.tensor, o.peer, o.group, o.tag))
            results.append(Tensor(np.zeros((), o.tensor.dtype.np)))
        else:
            out, h = irecv(o.tensor, o.peer, o.group, o.tag)
            handles.append(h)
            results.append(out)
    for h in handles:
        h.wait()
    return tuple(results)


def _name(group):
    """None -> the world group's name (groups are attributes of the primitives: plain strings)."""
    if group is None:
        return _c.WORLD
    if not isinstance(group, str):
        raise OpTypeError("communication", "'group' to be a str (a group name)", f"{type(group).__name__} {group!r}")
    return group


__all__ = ["CommHandle", "P2POp", "ReduceOp", "all_reduce", "all_gather_into_tensor", "reduce_scatter_tensor",
           "all_to_all_single", "all_to_all_single_with_output_shape", "broadcast", "barrier", "send", "recv",
           "isend", "irecv", "batch_isend_irecv"]
