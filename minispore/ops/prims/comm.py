"""Collective communication as primitives: all_reduce, all_gather, reduce_scatter, all_to_all,
all_to_all_v, broadcast, send and receive (MindSpore's AllReduce, AllGather, ReduceScatter,
AlltoAll, AlltoAllV, Broadcast, Send, Receive).

Why collectives are primitives like `add`: then they have an inference rule (shapes are checked
before any process waits on another), a backward rule written with collectives (so a
tensor-parallel layer differentiates like any other), a cost (the bytes a ring algorithm sends,
for DryRun), and they become graph nodes under `jit`. Their one extra fact is `collective=True`:
every rank of the group must issue the same collectives in the same order, so graph passes keep
them in program order and never drop, fold or recompute them (ops/primitive.py).

The kernels are MPI calls on contiguous NumPy buffers through the group's mpi4py communicator
(common/process_groups.py, minispore's one binding to MPI): Allreduce, Allgather,
Reduce_scatter_block, Alltoall(v), Bcast, Send/Recv. A one-rank group (or a world without MPI)
makes every collective an identity copy. Each operation is written once as a *start* function
that posts the MPI call (blocking, or non-blocking for `comm_func`'s `async_op=True`) and returns
a `Pending` whose `wait()` finishes it; the blocking kernel is `start(...).wait()`.

Data that is only moved (gather, all-to-all, broadcast, send) travels as raw bytes, so every
dtype works (bool, bfloat16). Reductions need MPI to understand the numbers: Float16 and BFloat16
are reduced in Float32 and rounded back once (more accurate than a half-precision ring, which
rounds at every step); Bool is refused (MindSpore's collectives reduce numbers only).

Ranks given by the user (`root_rank`, `dest_rank`, `src_rank`) are WORLD ranks, as in MindSpore's
Broadcast/Send/Receive and torch.distributed; they are translated to ranks inside the group here.

Traffic accounting. `comm_bytes()` returns, per primitive, the calls made by this process, the
bytes of the send buffers it handed to MPI ("payload": half floats are reduced widened, so twice
their size) and the bytes a ring algorithm sends from this rank for the tensors ("ring", in the
tensor's own dtype). MPICH chooses its own algorithm per message size (recursive
doubling, Rabenseifner ...), so the wire bytes are not observable from here; the ring numbers are
the model DryRun predicts with (`cost` facts below), evaluated on the buffers that really ran, so
a DryRun/instrumented mismatch exposes a wrong shape, dtype or call count. Ring bytes per rank
(n = bytes of this rank's input, p = group size, summed over the group's ranks in brackets):

    all_reduce      2(p-1)/p * n   [2(p-1) n]   reduce-scatter ring, then all-gather ring
    all_gather      (p-1) * n      [p(p-1) n]   every block travels p-1 hops
    reduce_scatter  (p-1)/p * n    [(p-1) n]
    all_to_all      (p-1)/p * n    [(p-1) n]    every block but the own one, sent directly
    broadcast       n, 0 for the chain's last rank   [(p-1) n]   a pipelined chain from the root
    send / receive  n / 0
"""
from __future__ import annotations

import numbers

import numpy as np

from ...common import dtype as mstype
from ...common import process_groups as pg
from ...common.errors import OpTypeError, OpValueError
from .. import _check as C
from ..primitive import AbstractTensor, defprim

OPS = ("sum", "max", "min", "prod")
WORLD = pg.HCCL_WORLD_COMM_GROUP

# -------------------------------------------------------------------------------------------------
# traffic accounting (per process, resettable)
_traffic: dict = {}


def _count(name, payload, ring):
    t = _traffic.get(name)
    if t is None:
        t = _traffic[name] = {"calls": 0, "payload": 0, "ring": 0}
    t["calls"] += 1
    t["payload"] += int(payload)
    t["ring"] += int(ring)


def comm_bytes() -> dict:
    """{primitive name: {"calls", "payload", "ring"}} for this process since the last reset."""
    return {k: dict(v) for k, v in _traffic.items()}


def reset_comm_bytes() -> None:
    _traffic.clear()


def ring_bytes_all_reduce(nelem, itemsize, p, rank):
    """Bytes rank `rank` sends in a ring all-reduce of `nelem` elements: the buffer is cut into p
    chunks (sizes as np.array_split); p-1 steps of reduce-scatter send every chunk but chunk
    (rank+1) % p, p-1 steps of all-gather every chunk but chunk (rank+2) % p. Summed over the
    ranks: exactly 2 (p-1) n."""
    if p == 1:
        return 0
    base, extra = divmod(nelem, p)
    chunk = [base + (1 if k < extra else 0) for k in range(p)]
    return (2 * nelem - chunk[(rank + 1) % p] - chunk[(rank + 2) % p]) * itemsize


# -------------------------------------------------------------------------------------------------
# groups
def group_of(op, group):
    """The Group called `group`, with errors that name the op: unknown group, or a group this
    process is not a member of."""
    if group is not None and not isinstance(group, str):
        raise OpTypeError(op, "'group' to be a str (a group name)", f"{type(group).__name__} {group!r}")
    try:
        g = pg.get(group)
    except OpValueError as e:
        raise OpValueError(op, f"'group' to be the world group or one made by create_group "
                               f"({e.expected.split('(', 1)[-1].rstrip(')')})", repr(group)) from None
    if g.rank is None:
        raise OpValueError(op, f"a group this process (world rank {pg.world().rank}) belongs to",
                           f"group '{g.name}' of world ranks {list(g.ranks)}")
    return g


def _world_rank_in(op, arg, g, rank):
    """Group rank of the WORLD rank `rank`, which must be in `g`."""
    if not isinstance(rank, numbers.Integral) or isinstance(rank, bool):
        raise OpTypeError(op, f"'{arg}' to be an int (a world rank)", f"{type(rank).__name__} {rank!r}")
    if rank not in g.ranks:
        raise OpValueError(op, f"'{arg}' to be a world rank in group '{g.name}' {list(g.ranks)}", repr(rank))
    return g.ranks.index(rank)


def _reduce_op(op, value):
    if not isinstance(value, str) or value.lower() not in OPS:
        raise OpValueError(op, f"'op' in {list(OPS)}", repr(value))
    return value.lower()


def _numeric(op, x):
    C.tensor(op, "input", x)
    if x.dtype is mstype.bool_:
        raise OpTypeError(op, "a numeric dtype to reduce (Bool tensors cannot be summed/maxed across ranks)",
                          str(x.dtype))
    return x


def _at_least_1d(op, x):
    C.tensor(op, "input", x)
    if len(x.shape) == 0:
        raise OpValueError(op, "an input of rank >= 1 (ranks' blocks are joined along axis 0)", "a 0-d tensor")
    return x


# -------------------------------------------------------------------------------------------------
# MPI plumbing
class Pending:
    """A posted collective: `wait()` completes its MPI request (if any), runs the step that turns
    the receive buffer into the result, and returns the result (an ndarray). Idempotent."""

    __slots__ = ("_request", "_finish", "_result", "_done")

    def __init__(self, request, finish):
        self._request, self._finish, self._result, self._done = request, finish, None, False

    def test(self) -> bool:
        """True if the communication finished (without blocking)."""
        if self._done or self._request is None:
            return True
        return bool(self._request.Test())

    def wait(self):
        if not self._done:
            if self._request is not None:
                self._request.Wait()
            self._result = self._finish()
            self._done = True
            self._finish = self._request = None
        return self._result


def _post(comm, name, nonblocking, *args, **kwargs):
    """comm.<name>(...) or its non-blocking twin comm.I<name>(...) (mpi4py: Allreduce/Iallreduce,
    Reduce_scatter_block/Ireduce_scatter_block, Bcast/Ibcast, Send/Isend ...); the request or None."""
    if nonblocking:
        return getattr(comm, "I" + name[0].lower() + name[1:])(*args, **kwargs)
    getattr(comm, name)(*args, **kwargs)
    return None


def _bytes(a):
    """The bytes of `a` as a contiguous 1-D uint8 array (a view when `a` is contiguous)."""
    return np.ascontiguousarray(a).reshape(-1).view(np.uint8)


def _mpi_op(name):
    from mpi4py import MPI
    return {"sum": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN, "prod": MPI.PROD}[name]


_HALF = (np.dtype(np.float16), np.dtype(mstype.bfloat16.np))


def _reducible(a):
    """A contiguous buffer MPI can reduce: half-precision floats widened to float32."""
    if a.dtype in _HALF:
        return np.ascontiguousarray(a, dtype=np.float32), a.dtype
    return np.ascontiguousarray(a), a.dtype


def _done(value):
    return Pending(None, lambda: value)


# -------------------------------------------------------------------------------------------------
# start functions: post the MPI call, return a Pending
def start_all_reduce(x, op="sum", group=WORLD, nonblocking=False):
    g = group_of("AllReduce", group)
    if g.size == 1 or g.comm is None:
        _count("all_reduce", 0, 0)
        return _done(np.array(x, copy=True))
    send, dtype = _reducible(x)
    _count("all_reduce", send.nbytes, ring_bytes_all_reduce(x.size, x.itemsize, g.size, g.rank))
    recv = np.empty_like(send)
    req = _post(g.comm, "Allreduce", nonblocking, send, recv, op=_mpi_op(op.lower()))
    # (reshape: np.ascontiguousarray makes a 0-d input 1-d; the sum keeps the input's shape)
    return Pending(req, lambda: recv.astype(dtype, copy=False).reshape(x.shape))


def start_all_gather(x, group=WORLD, nonblocking=False):
    g = group_of("AllGather", group)
    p = g.size
    _count("all_gather", x.nbytes if p > 1 else 0, (p - 1) * x.nbytes)
    out_shape = (p * x.shape[0],) + tuple(x.shape[1:])
    if p == 1 or g.comm is None:
        return _done(np.array(x, copy=True))
    send = _bytes(x)
    recv = np.empty(p * send.size, np.uint8)
    req = _post(g.comm, "Allgather", nonblocking, send, recv)
    return Pending(req, lambda: recv.view(x.dtype).reshape(out_shape))


def start_reduce_scatter(x, op="sum", group=WORLD, nonblocking=False):
    g = group_of("ReduceScatter", group)
    p = g.size
    out_shape = (x.shape[0] // p,) + tuple(x.shape[1:])
    if p == 1 or g.comm is None:
        _count("reduce_scatter", 0, 0)
        return _done(np.array(x, copy=True))
    send, dtype = _reducible(x)
    _count("reduce_scatter", send.nbytes, (p - 1) * (x.nbytes // p))
    recv = np.empty(out_shape, send.dtype)
    req = _post(g.comm, "Reduce_scatter_block", nonblocking, send, recv, op=_mpi_op(op.lower()))
    return Pending(req, lambda: recv.astype(dtype, copy=False))


def start_all_to_all(x, split_count, split_dim, concat_dim, group=WORLD, nonblocking=False):
    """Cut `x` into p blocks along split_dim, send block j to group rank j, join the p received
    blocks (in rank order) along concat_dim."""
    g = group_of("AlltoAll", group)
    p = g.size
    _count("all_to_all", x.nbytes if p > 1 else 0, (p - 1) * (x.nbytes // p))
    if p == 1 or g.comm is None:
        return _done(np.array(x, copy=True))
    # block j = x[..., j*s:(j+1)*s, ...] along split_dim: move that axis first, cut it into (p, s)
    moved = np.moveaxis(x, split_dim, 0)
    blocks = np.ascontiguousarray(moved.reshape((p, moved.shape[0] // p) + moved.shape[1:]))
    recv = np.empty_like(blocks)
    req = _post(g.comm, "Alltoall", nonblocking, _bytes(blocks), recv.reshape(-1).view(np.uint8))

    def finish():
        parts = [np.moveaxis(recv[i], 0, split_dim) for i in range(p)]
        return np.concatenate(parts, axis=concat_dim)
    return Pending(req, finish)


def start_all_to_all_v(x, send_splits, recv_splits, group=WORLD, nonblocking=False):
    """Rows send_splits[j] of `x` (axis 0, in order) go to group rank j; recv_splits[i] rows come
    from rank i and are joined in rank order."""
    g = group_of("AlltoAllV", group)
    p = g.size
    row = x.nbytes // x.shape[0] if x.shape[0] else int(np.prod(x.shape[1:], dtype=np.int64)) * x.itemsize
    _count("all_to_all_v", x.nbytes if p > 1 else 0, (sum(send_splits) - send_splits[g.rank]) * row)
    out_shape = (sum(recv_splits),) + tuple(x.shape[1:])
    if p == 1 or g.comm is None:
        return _done(np.array(x, copy=True))
    scounts = [s * row for s in send_splits]
    rcounts = [r * row for r in recv_splits]
    sdispl = np.concatenate([[0], np.cumsum(scounts)[:-1]]).astype(np.int64).tolist()
    rdispl = np.concatenate([[0], np.cumsum(rcounts)[:-1]]).astype(np.int64).tolist()
    recv = np.empty(sum(rcounts), np.uint8)
    req = _post(g.comm, "Alltoallv", nonblocking, [_bytes(x), (scounts, sdispl)], [recv, (rcounts, rdispl)])
    return Pending(req, lambda: recv.view(x.dtype).reshape(out_shape))


def start_broadcast(x, root_rank, group=WORLD, nonblocking=False):
    g = group_of("Broadcast", group)
    p = g.size
    root = g.ranks.index(root_rank)
    chain_pos = (g.rank - root) % p
    _count("broadcast", x.nbytes if (p > 1 and g.rank == root) else 0, x.nbytes if chain_pos < p - 1 else 0)
    if p == 1 or g.comm is None:
        return _done(np.array(x, copy=True))
    buf = np.array(x, copy=True, order="C")
    req = _post(g.comm, "Bcast", nonblocking, buf.reshape(-1).view(np.uint8), root=root)
    return Pending(req, lambda: buf)


def start_send(x, dest_rank, sr_tag=0, group=WORLD, nonblocking=False):
    g = group_of("Send", group)
    _count("send", x.nbytes, x.nbytes)
    buf = _bytes(x)
    req = _post(g.comm, "Send", nonblocking, buf, dest=g.ranks.index(dest_rank), tag=sr_tag)
    return Pending(req, lambda: buf)         # (the buffer stays alive until the send completes)


def start_receive(src_rank, shape, dtype, sr_tag=0, group=WORLD, nonblocking=False):
    g = group_of("Receive", group)
    _count("receive", 0, 0)
    out = np.empty(shape, dtype.np)
    req = _post(g.comm, "Recv", nonblocking, out.reshape(-1).view(np.uint8),
                source=g.ranks.index(src_rank), tag=sr_tag)
    return Pending(req, lambda: out)


def barrier(group=WORLD, nonblocking=False):
    g = group_of("Barrier", group)
    if g.size == 1 or g.comm is None:
        return _done(None)
    return Pending(_post(g.comm, "Barrier", nonblocking), lambda: None)


# -------------------------------------------------------------------------------------------------
# cost facts: memory traffic as data movement, plus the communication (`comm_bytes` per rank on
# average, `comm_bytes_total` over the group's ranks: exact integers, see the module docstring)
def _comm_cost(total_of, reduces=False):
    """A collective's cost: its input read and output written once, a reduction's one FLOP per
    element, and the ring bytes `total_of(n, p)` summed over the p ranks (n: input bytes)."""
    def rule(ins, outs, attrs):
        x = ins[0]
        p = pg.get(attrs.get("group")).size
        total = total_of(x.nbytes, p) if p > 1 else 0
        return {"flops": x.size if reduces and p > 1 else 0, "kind": "vector",
                "bytes_read": x.nbytes, "bytes_written": sum(o.nbytes for o in outs),
                "comm_bytes_total": int(total), "comm_bytes": total / p}
    return rule


_COST_ALL_REDUCE = _comm_cost(lambda n, p: 2 * (p - 1) * n, reduces=True)
_COST_ALL_GATHER = _comm_cost(lambda n, p: p * (p - 1) * n)
_COST_REDUCE_SCATTER = _comm_cost(lambda n, p: (p - 1) * n, reduces=True)
_COST_MOVE = _comm_cost(lambda n, p: (p - 1) * n)                # all_to_all, broadcast


def _cost_all_to_all_v(ins, outs, attrs):
    x = ins[0]
    row = (x.nbytes // x.shape[0]) if x.shape[0] else 0
    # every rank's own share stays home; this rank's sends are known, the others' are not: the
    # per-rank figure is this rank's (the instrumented number), the total assumes symmetric splits
    g = pg.get(attrs.get("group"))
    mine = (sum(attrs["send_splits"]) - attrs["send_splits"][g.rank or 0]) * row
    return {"flops": 0, "kind": "vector", "bytes_read": x.nbytes, "bytes_written": sum(o.nbytes for o in outs),
            "comm_bytes_total": mine * g.size, "comm_bytes": mine}


def _cost_p2p(sending):
    def rule(ins, outs, attrs):
        n = ins[0].nbytes if sending else 0
        return {"flops": 0, "kind": "vector", "bytes_read": ins[0].nbytes if sending else 0,
                "bytes_written": sum(o.nbytes for o in outs), "comm_bytes_total": n, "comm_bytes": n}
    return rule


# -------------------------------------------------------------------------------------------------
# the primitives
def _all_reduce_infer(x, *, op="sum", group=WORLD):
    _numeric("AllReduce", x)
    _reduce_op("AllReduce", op)
    group_of("AllReduce", group)
    return AbstractTensor(x.shape, x.dtype)


def _all_reduce_bprop(inputs, out, dout, *, op="sum", group=WORLD):
    """MindSpore's rule (grad_comm_ops.get_bprop_all_reduce): sum -> all_reduce(sum) of dout;
    max/min -> all_reduce(sum) of dout, kept where this rank's x equals the result (every rank
    holding the extreme gets the whole gradient, ties included); prod -> all_reduce(sum)(dout *
    out) / x."""
    from .elementwise import cast, div, equal, mul
    x, op = inputs[0], op.lower()
    if op == "sum":
        return (all_reduce(dout, op="sum", group=group),)
    if op == "prod":
        return (div(all_reduce(mul(dout, out), op="sum", group=group), x),)
    g = all_reduce(dout, op="sum", group=group)
    return (mul(g, cast(equal(x, out), g.dtype)),)


all_reduce = defprim(
    "all_reduce", _all_reduce_infer,
    lambda x, op="sum", group=WORLD: start_all_reduce(x, op, group).wait(),
    _all_reduce_bprop, cost=_COST_ALL_REDUCE, collective=True,
    doc="reduce (sum/max/min/prod) a tensor across the ranks of a group; every rank gets the result")


def _all_gather_infer(x, *, group=WORLD):
    _at_least_1d("AllGather", x)
    g = group_of("AllGather", group)
    return AbstractTensor((g.size * x.shape[0],) + tuple(x.shape[1:]), x.dtype)


def _all_gather_bprop(inputs, out, dout, *, group=WORLD):
    """MindSpore's rule: the gradient of a gather is the sum-reduce-scatter of dout (each rank's
    block receives the gradients every rank computed for it)."""
    return (reduce_scatter(dout, op="sum", group=group),)


all_gather = defprim(
    "all_gather", _all_gather_infer, lambda x, group=WORLD: start_all_gather(x, group).wait(),
    _all_gather_bprop, cost=_COST_ALL_GATHER, collective=True,
    doc="concatenate every rank's tensor along axis 0, in group-rank order")


def _reduce_scatter_infer(x, *, op="sum", group=WORLD):
    _numeric("ReduceScatter", x)
    _at_least_1d("ReduceScatter", x)
    _reduce_op("ReduceScatter", op)
    g = group_of("ReduceScatter", group)
    if x.shape[0] % g.size:
        raise OpValueError("ReduceScatter", f"the first dimension divisible by the group size {g.size}",
                           f"shape {tuple(x.shape)}")
    return AbstractTensor((x.shape[0] // g.size,) + tuple(x.shape[1:]), x.dtype)


def _reduce_scatter_bprop(inputs, out, dout, *, op="sum", group=WORLD):
    """MindSpore's rule: all_gather of dout; like MindSpore, only for op='sum'."""
    if op.lower() != "sum":
        raise OpValueError("ReduceScatter", "op='sum' to differentiate (MindSpore's bprop supports only SUM)",
                           repr(op))
    return (all_gather(dout, group=group),)


reduce_scatter = defprim(
    "reduce_scatter", _reduce_scatter_infer,
    lambda x, op="sum", group=WORLD: start_reduce_scatter(x, op, group).wait(),
    _reduce_scatter_bprop, cost=_COST_REDUCE_SCATTER, collective=True,
    doc="reduce across ranks, then rank r keeps block r of axis 0")


def _all_to_all_infer(x, *, split_count, split_dim, concat_dim, group=WORLD):
    op = "AlltoAll"
    C.tensor(op, "input", x)
    g = group_of(op, group)
    for arg, v in (("split_count", split_count), ("split_dim", split_dim), ("concat_dim", concat_dim)):
        if not isinstance(v, numbers.Integral) or isinstance(v, bool):
            raise OpTypeError(op, f"'{arg}' to be an int", f"{type(v).__name__} {v!r}")
    if split_count != g.size:
        raise OpValueError(op, f"'split_count' equal to the group size {g.size}", repr(split_count))
    nd = len(x.shape)
    if nd == 0:
        raise OpValueError(op, "an input of rank >= 1", "a 0-d tensor")
    sd, cd = C.axis(op, split_dim, nd), C.axis(op, concat_dim, nd)
    if x.shape[sd] % split_count:
        raise OpValueError(op, f"input dimension {sd} divisible by split_count {split_count}",
                           f"shape {tuple(x.shape)}")
    shape = list(x.shape)
    shape[sd] //= split_count
    shape[cd] *= split_count
    return AbstractTensor(tuple(shape), x.dtype)


def _all_to_all_kernel(x, split_count, split_dim, concat_dim, group=WORLD):
    nd = x.ndim
    return start_all_to_all(x, split_count, split_dim % nd, concat_dim % nd, group).wait()


def _all_to_all_bprop(inputs, out, dout, *, split_count, split_dim, concat_dim, group=WORLD):
    """MindSpore's rule: all_to_all of dout with split_dim and concat_dim swapped."""
    return (all_to_all(dout, split_count=split_count, split_dim=concat_dim, concat_dim=split_dim, group=group),)


all_to_all = defprim(
    "all_to_all", _all_to_all_infer, _all_to_all_kernel, _all_to_all_bprop, cost=_COST_MOVE, collective=True,
    doc="cut along split_dim, send block j to rank j, join the received blocks along concat_dim")


def _splits(op, arg, v, p):
    if not isinstance(v, tuple) or len(v) != p or not all(
            isinstance(s, numbers.Integral) and not isinstance(s, bool) and s >= 0 for s in v):
        raise OpValueError(op, f"'{arg}' to be a tuple of {p} non-negative ints (one per rank)", repr(v))
    return v


def _all_to_all_v_infer(x, *, send_splits, recv_splits, group=WORLD):
    op = "AlltoAllV"
    _at_least_1d(op, x)
    g = group_of(op, group)
    _splits(op, "send_splits", send_splits, g.size)
    _splits(op, "recv_splits", recv_splits, g.size)
    if sum(send_splits) != x.shape[0]:
        raise OpValueError(op, f"'send_splits' summing to the input's first dimension {x.shape[0]}",
                           repr(send_splits))
    return AbstractTensor((sum(recv_splits),) + tuple(x.shape[1:]), x.dtype)


def _all_to_all_v_bprop(inputs, out, dout, *, send_splits, recv_splits, group=WORLD):
    """The rows travel back the way they came: the same exchange with the splits swapped."""
    return (all_to_all_v(dout, send_splits=recv_splits, recv_splits=send_splits, group=group),)


all_to_all_v = defprim(
    "all_to_all_v", _all_to_all_v_infer,
    lambda x, send_splits, recv_splits, group=WORLD: start_all_to_all_v(x, send_splits, recv_splits, group).wait(),
    _all_to_all_v_bprop, cost=_cost_all_to_all_v, collective=True,
    doc="all-to-all along axis 0 with per-rank row counts")


def _broadcast_infer(x, *, root_rank, group=WORLD):
    C.tensor("Broadcast", "input", x)
    _world_rank_in("Broadcast", "root_rank", group_of("Broadcast", group), root_rank)
    return AbstractTensor(x.shape, x.dtype)


def _broadcast_bprop(inputs, out, dout, *, root_rank, group=WORLD):
    """Every rank's output is the root's input, so the root's gradient is the sum of every rank's
    dout and the other ranks' inputs get zero. (MindSpore's Broadcast bprop returns dout itself on
    every rank; minispore returns the true gradient - it equals MindSpore's at the root when only
    the root's output is used.)"""
    from .elementwise import zeros_like
    g = all_reduce(dout, op="sum", group=group)
    return (g if pg.world().rank == root_rank else zeros_like(g),)


broadcast = defprim(
    "broadcast", _broadcast_infer,
    lambda x, root_rank, group=WORLD: start_broadcast(x, root_rank, group).wait(),
    _broadcast_bprop, cost=_COST_MOVE, collective=True,
    doc="every rank gets the tensor of root_rank (a world rank)")


def _p2p_peer(op, arg, g, rank):
    r = _world_rank_in(op, arg, g, rank)
    if r == g.rank:
        raise OpValueError(op, f"'{arg}' to be another rank than this process's ({pg.world().rank})", repr(rank))
    return r


def _tag(op, sr_tag):
    if not isinstance(sr_tag, numbers.Integral) or isinstance(sr_tag, bool) or sr_tag < 0:
        raise OpValueError(op, "'sr_tag' to be a non-negative int", repr(sr_tag))


def _send_infer(x, *, dest_rank, sr_tag=0, group=WORLD):
    C.tensor("Send", "input", x)
    _tag("Send", sr_tag)
    _p2p_peer("Send", "dest_rank", group_of("Send", group), dest_rank)
    return AbstractTensor((), x.dtype)


def _send_kernel(x, dest_rank, sr_tag=0, group=WORLD):
    start_send(x, dest_rank, sr_tag, group).wait()
    return np.zeros((), x.dtype)


def _send_bprop(inputs, out, dout, *, dest_rank, sr_tag=0, group=WORLD):
    """MindSpore's rule: the gradient of what was sent comes back from the receiver (whose
    Receive bprop sends it), received here with the input's shape and dtype."""
    x = inputs[0]
    return (receive(dout, src_rank=dest_rank, shape=tuple(x.shape), dtype=x.dtype, sr_tag=sr_tag, group=group),)


send = defprim(
    "send", _send_infer, _send_kernel, _send_bprop, cost=_cost_p2p(True), collective=True,
    doc="send a tensor to dest_rank (a world rank); the output is a 0-d placeholder that orders it")


def _receive_infer(x, *, src_rank, shape, dtype, sr_tag=0, group=WORLD):
    C.tensor("Receive", "input", x)
    _tag("Receive", sr_tag)
    _p2p_peer("Receive", "src_rank", group_of("Receive", group), src_rank)
    if not isinstance(dtype, mstype.DType):
        raise OpTypeError("Receive", "'dtype' to be a mindspore dtype", f"{type(dtype).__name__} {dtype!r}")
    return AbstractTensor(C.shape_arg("Receive", shape), dtype)


def _receive_kernel(x, src_rank, shape, dtype, sr_tag=0, group=WORLD):
    return start_receive(src_rank, tuple(shape), dtype, sr_tag, group).wait()


def _receive_bprop(inputs, out, dout, *, src_rank, shape, dtype, sr_tag=0, group=WORLD):
    """MindSpore's rule: send dout back to the sender (its Send bprop receives it); the virtual
    input gets zero. The send's placeholder output is unused: its `collective` fact keeps it."""
    from .elementwise import add, cast, mul, zeros_like
    x = inputs[0]
    placeholder = send(dout, dest_rank=src_rank, sr_tag=sr_tag, group=group)
    # zeros_like(x), tied to the send so even an executor that prunes by data flow runs it
    return (add(zeros_like(x), cast(mul(placeholder, 0), x.dtype)),)


receive = defprim(
    "receive", _receive_infer, _receive_kernel, _receive_bprop, cost=_cost_p2p(False), collective=True,
    doc="receive a tensor of `shape`/`dtype` from src_rank (a world rank); the input is a virtual "
        "placeholder (MindSpore's), whose gradient is zero")


__all__ = []     # the functional forms live in minispore.communication.comm_func (MindSpore's place)
