"""MindSpore's communication management API: init, ranks, sizes and groups.

    init()                                   # join the world the launcher (msrun/mpiexec) started
    get_rank(), get_group_size()             # this process's rank, the number of processes
    create_group("dp0", [0, 2])              # a named subset of world ranks, with its communicator
    get_rank("dp0")                          # this process's rank inside it

The world and groups live in minispore.common.process_groups (the one binding to MPI, shared with
the collective primitives). This module adds MindSpore's names, argument checks, the per-host
("local") view, and the rank-failure hook.

Differences from MindSpore, on purpose:
* One engine, MPI, serves all three backend names: `init("hccl")`, `init("nccl")` and
  `init("mccl")` all join the same MPI world; the backend name only picks which world-group name
  `GlobalComm.WORLD_COMM_GROUP` reports. All three world names denote that one world.
* Without a launcher every function works as a world of one (rank 0 of 1); MindSpore raises
  "not initialized" before init(). The getters also work before init() (they create the world on
  first use), so a distributed script runs unchanged as a single process.
* create_group/destroy_group are collective over the world: every rank calls them with the same
  arguments (MindSpore asks the same of its scripts).
"""
from __future__ import annotations

from ..common import process_groups
from ..common.errors import OpTypeError, OpValueError
from ..common.process_groups import HCCL_WORLD_COMM_GROUP, MCCL_WORLD_COMM_GROUP, NCCL_WORLD_COMM_GROUP
from .failure import install_abort_on_exception

_BACKEND_WORLDS = {"hccl": HCCL_WORLD_COMM_GROUP, "nccl": NCCL_WORLD_COMM_GROUP, "mccl": MCCL_WORLD_COMM_GROUP}
# MindSpore's automatic choice: the backend of the device the context targets
_DEVICE_BACKENDS = {"Ascend": "hccl", "GPU": "nccl", "CPU": "mccl"}


class GlobalComm:
    """MindSpore's record of the communication state: the backend init() chose, the name of the
    world group for that backend, and whether init() has run."""
    BACKEND = "undefined"
    WORLD_COMM_GROUP = HCCL_WORLD_COMM_GROUP
    INITED = False


# The ranks on this host (world ranks, ascending), computed by init() for the world it saw.
# Keyed by the world Group object so a release() + init() recomputes it.
_host = {"world": None, "ranks": ()}


def init(backend_name=None):
    """Join the process world (`mindspore.communication.init`).

    backend_name: None (the device target's backend: CPU -> "mccl", GPU -> "nccl", Ascend ->
    "hccl"), "hccl", "nccl" or "mccl". Under a launcher this is collective: every rank calls it.
    It also installs the rank-failure hook (communication/failure.py) for jobs of several ranks."""
    if backend_name is None:
        from ..common.context import get_context
        backend_name = _DEVICE_BACKENDS.get(get_context("device_target"), "mccl")
    if not isinstance(backend_name, str):
        raise OpTypeError("init", "backend_name as a str: None, 'hccl', 'nccl' or 'mccl'", repr(backend_name))
    if backend_name not in _BACKEND_WORLDS:
        raise OpValueError("init", "backend_name None, 'hccl', 'nccl' or 'mccl' (all run on MPI)",
                           repr(backend_name))
    world = process_groups.init_world()
    _host_ranks(world)
    GlobalComm.BACKEND = backend_name
    GlobalComm.WORLD_COMM_GROUP = _BACKEND_WORLDS[backend_name]
    GlobalComm.INITED = True
    install_abort_on_exception()


def _host_ranks(world) -> tuple:
    """World ranks that share this host. MPI's COMM_TYPE_SHARED split puts the processes that can
    share memory (one node) in one communicator; gathering their world ranks gives the host's list.
    Collective over the world (init() calls it on every rank)."""
    if _host["world"] is not world:
        if world.comm is None:
            ranks = (world.rank,)
        else:
            from mpi4py import MPI
            node = world.comm.Split_type(MPI.COMM_TYPE_SHARED, key=world.rank)
            ranks = tuple(sorted(node.allgather(world.rank)))
            node.Free()
        _host.update(world=world, ranks=ranks)
    return _host["ranks"]


def _group(group, op):
    if not isinstance(group, str):
        raise OpTypeError(op, "group as a str (a world group name or a name given to create_group)",
                          f"{type(group).__name__} {group!r}")
    try:
        return process_groups.get(group)
    except OpValueError as e:                # name the public function, not the binding
        raise OpValueError(op, f"group {group!r} to exist: a world group "
                           f"({HCCL_WORLD_COMM_GROUP!r} ...) or one made by create_group",
                           "an unknown group name") from e


def _int(value, op, what):
    if isinstance(value, bool) or not isinstance(value, int):
        raise OpTypeError(op, f"{what} as an int", f"{type(value).__name__} {value!r}")
    return value


def get_rank(group=GlobalComm.WORLD_COMM_GROUP) -> int:
    """This process's rank in `group` (its world rank for a world group). A process that is not a
    member of `group` gets an error."""
    g = _group(group, "get_rank")
    return process_groups.require_member(g, "get_rank")


def get_group_size(group=GlobalComm.WORLD_COMM_GROUP) -> int:
    """The number of ranks in `group`."""
    return _group(group, "get_group_size").size


def _local_members(group, op):
    g = _group(group, op)
    process_groups.require_member(g, op)
    if not GlobalComm.INITED:                # the host split is collective: init() runs it on every rank
        init()
    host = set(_host_ranks(process_groups.world()))
    return [r for r in g.ranks if r in host]


def get_local_rank(group=GlobalComm.WORLD_COMM_GROUP) -> int:
    """This process's rank among the members of `group` on this host (0 .. local size - 1)."""
    members = _local_members(group, "get_local_rank")
    return members.index(process_groups.world().rank)


def get_local_rank_size(group=GlobalComm.WORLD_COMM_GROUP) -> int:
    """How many members of `group` run on this host."""
    return len(_local_members(group, "get_local_rank_size"))


def create_group(group, rank_ids, options=None) -> None:
    """Create the group `group` over the world ranks `rank_ids` (group rank i is rank_ids[i]).

    Collective over the world: every rank calls it with the same arguments, members or not.
    `options` is MindSpore's GroupOptions (HCCL buffer settings); MPI has no such knobs, so only
    its type is checked (None or a dict)."""
    if not isinstance(group, str):
        raise OpTypeError("create_group", "group as a str", f"{type(group).__name__} {group!r}")
    if not isinstance(rank_ids, (list, tuple)):
        raise OpTypeError("create_group", "rank_ids as a list of world ranks",
                          f"{type(rank_ids).__name__} {rank_ids!r}")
    for r in rank_ids:
        _int(r, "create_group", "every rank id")
    if options is not None and not isinstance(options, dict):
        raise OpTypeError("create_group", "options as None or a dict", f"{type(options).__name__}")
    process_groups.create(group, rank_ids)


def destroy_group(group) -> None:
    """Destroy a group made by create_group (the world groups cannot be destroyed)."""
    if not isinstance(group, str):
        raise OpTypeError("destroy_group", "group as a str", f"{type(group).__name__} {group!r}")
    process_groups.destroy(group)


def get_group_rank_from_world_rank(world_rank_id, group) -> int:
    """The rank that world rank `world_rank_id` has inside `group` (any process may ask)."""
    _int(world_rank_id, "get_group_rank_from_world_rank", "world_rank_id")
    g = _group(group, "get_group_rank_from_world_rank")
    return g.group_rank_of(world_rank_id)


def get_world_rank_from_group_rank(group, group_rank_id) -> int:
    """The world rank of the process with rank `group_rank_id` inside `group`."""
    g = _group(group, "get_world_rank_from_group_rank")
    _int(group_rank_id, "get_world_rank_from_group_rank", "group_rank_id")
    if not 0 <= group_rank_id < g.size:
        raise OpValueError("get_world_rank_from_group_rank",
                           f"group_rank_id in [0, {g.size}) for group {group!r}", str(group_rank_id))
    return g.ranks[group_rank_id]


def release() -> None:
    """Free every group and forget the world (`mindspore.communication.release`); a later init()
    or getter joins it again. The rank-failure hook stays: a rank that raises after release()
    must still end the job."""
    process_groups.release()
    _host.update(world=None, ranks=())
    GlobalComm.BACKEND = "undefined"
    GlobalComm.WORLD_COMM_GROUP = HCCL_WORLD_COMM_GROUP
    GlobalComm.INITED = False
