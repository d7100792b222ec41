"""Class-style collective operators (MindSpore's `mindspore.ops.operations.comm_ops`):
`AllReduce(op, group)(x)`, `AllGather(group)(x)`, `ReduceScatter(op, group)(x)`,
`AlltoAll(split_count, split_dim, concat_dim, group)(x)`, `Broadcast(root_rank, group)((x,))`,
`Send(sr_tag, dest_rank, group)(x)`, `Receive(sr_tag, src_rank, shape, dtype, group)(x)`.

Each class validates its attributes once and forwards to the collective primitive of
ops/prims/comm.py (inference, MPI kernel, backward rule). The group is checked at construction,
as MindSpore does: a class built for a group this process is not in fails there, not at the
first call. `ReduceOp` holds MindSpore's op names ("sum", "max", "min", "prod").
"""
from __future__ import annotations

from ...common import dtype as mstype
from ...common.errors import OpTypeError, OpValueError
from ...common.tensor import Tensor
from ..prims import comm as _comm
from .base import Primitive, check_int, check_int_tuple, prim_attr_register


class _ReduceOpNames:
    """MindSpore's reduction names for AllReduce / ReduceScatter: `ops.ReduceOp.SUM` is "sum".
    (One instance, not a class: it is a table of names, not an operator to construct.)"""
    SUM = "sum"
    MAX = "max"
    MIN = "min"
    PROD = "prod"

    def __repr__(self):
        return "ReduceOp(SUM='sum', MAX='max', MIN='min', PROD='prod')"


ReduceOp = _ReduceOpNames()


def _group(op, group):
    """The group's name, checked now (exists, this process is a member)."""
    return _comm.group_of(op, group).name


def _reduce(op, value):
    return _comm._reduce_op(op, value)


class AllReduce(Primitive):
    """`AllReduce(op='sum', group=GlobalComm.WORLD_COMM_GROUP)(x)`: every rank gets the reduction of
    all ranks' x. Differentiable (MindSpore's rules: ops/prims/comm.py)."""

    @prim_attr_register
    def __init__(self, op=ReduceOp.SUM, group=_comm.WORLD):
        self._op = _reduce(self.name, op)
        self._group = _group(self.name, group)

    def __call__(self, x):
        return _comm.all_reduce(x, op=self._op, group=self._group)


class AllGather(Primitive):
    """`AllGather(group)(x)`: the ranks' tensors concatenated along axis 0 in group-rank order."""

    @prim_attr_register
    def __init__(self, group=_comm.WORLD):
        self._group = _group(self.name, group)
        self.rank = _comm.group_of(self.name, group).rank
        self.rank_size = _comm.group_of(self.name, group).size

    def __call__(self, x):
        return _comm.all_gather(x, group=self._group)


class ReduceScatter(Primitive):
    """`ReduceScatter(op='sum', group)(x)`: reduce across ranks, rank r keeps block r of axis 0
    (the first dimension must divide by the group size)."""

    @prim_attr_register
    def __init__(self, op=ReduceOp.SUM, group=_comm.WORLD):
        self._op = _reduce(self.name, op)
        self._group = _group(self.name, group)
        self.rank_size = _comm.group_of(self.name, group).size

    def __call__(self, x):
        return _comm.reduce_scatter(x, op=self._op, group=self._group)


class AlltoAll(Primitive):
    """`AlltoAll(split_count, split_dim, concat_dim, group)(x)`: cut x into split_count (= group
    size) blocks along split_dim, send block j to rank j, concatenate what arrives along concat_dim."""

    @prim_attr_register
    def __init__(self, split_count, split_dim, concat_dim, group=_comm.WORLD):
        check_int(self.name, "split_count", split_count, minimum=1)
        check_int(self.name, "split_dim", split_dim)
        check_int(self.name, "concat_dim", concat_dim)
        self._group = _group(self.name, group)
        size = _comm.group_of(self.name, group).size
        if split_count != size:
            raise OpValueError(self.name, f"'split_count' equal to the group size {size}", repr(split_count))

    def __call__(self, x):
        return _comm.all_to_all(x, split_count=self.split_count, split_dim=self.split_dim,
                                concat_dim=self.concat_dim, group=self._group)


class Broadcast(Primitive):
    """`Broadcast(root_rank, group)(input_x)`: `input_x` is a tuple of tensors (MindSpore's form; a
    single Tensor is accepted too); returns a tuple with root_rank's tensors, on every rank.
    root_rank is a world rank."""

    @prim_attr_register
    def __init__(self, root_rank, group=_comm.WORLD):
        check_int(self.name, "root_rank", root_rank, minimum=0)
        self._group = _group(self.name, group)
        _comm._world_rank_in(self.name, "root_rank", _comm.group_of(self.name, group), root_rank)

    def __call__(self, input_x):
        xs = (input_x,) if isinstance(input_x, Tensor) else input_x
        if not isinstance(xs, (tuple, list)) or not all(isinstance(t, Tensor) for t in xs):
            raise OpTypeError(self.name, "'input_x' to be a tuple of Tensors", type(input_x).__name__)
        return tuple(_comm.broadcast(t, root_rank=self.root_rank, group=self._group) for t in xs)


class Send(Primitive):
    """`Send(sr_tag, dest_rank, group)(x)`: send x to the world rank dest_rank. Returns a 0-d
    placeholder (differentiating it receives x's gradient back from dest_rank, MindSpore's rule)."""

    @prim_attr_register
    def __init__(self, sr_tag, dest_rank, group=_comm.WORLD, group_back=_comm.WORLD):
        check_int(self.name, "sr_tag", sr_tag, minimum=0)
        check_int(self.name, "dest_rank", dest_rank, minimum=0)
        self._group = _group(self.name, group)

    def __call__(self, x):
        return _comm.send(x, dest_rank=self.dest_rank, sr_tag=self.sr_tag, group=self._group)


class Receive(Primitive):
    """`Receive(sr_tag, src_rank, shape, dtype, group)(x)`: a tensor of `shape`/`dtype` from the
    world rank src_rank. `x` is MindSpore's virtual input (any tensor); its gradient is zero, and
    differentiating the output sends the gradient back to src_rank."""

    @prim_attr_register
    def __init__(self, sr_tag, src_rank, shape, dtype, group=_comm.WORLD, group_back=_comm.WORLD):
        check_int(self.name, "sr_tag", sr_tag, minimum=0)
        check_int(self.name, "src_rank", src_rank, minimum=0)
        self._shape = check_int_tuple(self.name, "shape", shape, allow_int=False)
        if not isinstance(dtype, mstype.DType):
            raise OpTypeError(self.name, "'dtype' to be a mindspore dtype", f"{type(dtype).__name__} {dtype!r}")
        self._group = _group(self.name, group)

    def __call__(self, x=None):
        if x is None:
            x = Tensor(0.0, self.dtype)
        return _comm.receive(x, src_rank=self.src_rank, shape=self._shape, dtype=self.dtype,
                             sr_tag=self.sr_tag, group=self._group)


__all__ = ["ReduceOp", "AllReduce", "AllGather", "ReduceScatter", "AlltoAll", "Broadcast", "Send", "Receive"]
