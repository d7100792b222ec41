"""The process world and its named groups: minispore's one binding to MPI (mpi4py).

Why this lives in `common`, the bottom layer: the collective primitives' CPU kernels (in `ops`)
need the MPI communicator of a group, and `minispore.communication` (above `ops`, since its
`comm_func` wraps those primitives) manages the groups. Both reach the same table here, so
neither layer imports the other.

A group is a set of world ranks with an MPI communicator over exactly those ranks. Without a
launcher (plain `python script.py`) or without mpi4py installed, the world has one rank and no
communicator: every collective over a one-rank group is the identity, so a distributed script
also runs as a single process.

MindSpore names the world group after the backend (`hccl_world_group` on Ascend,
`nccl_world_group` on GPU, `mccl_world_group` on CPU); all three name minispore's one world.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from .errors import MinisporeRuntimeError, OpValueError

HCCL_WORLD_COMM_GROUP = "hccl_world_group"
NCCL_WORLD_COMM_GROUP = "nccl_world_group"
MCCL_WORLD_COMM_GROUP = "mccl_world_group"
WORLD_NAMES = (HCCL_WORLD_COMM_GROUP, NCCL_WORLD_COMM_GROUP, MCCL_WORLD_COMM_GROUP)

# Environment variables a launcher sets. MPICH's hydra sets PMI_RANK/PMI_SIZE; Open MPI sets
# OMPI_COMM_WORLD_*; Slurm's srun sets SLURM_PROCID. Seeing one means "started by a launcher".
_LAUNCHER_VARS = ("PMI_RANK", "PMI_SIZE", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID")


@dataclass(frozen=True)
class Group:
    """A named set of world ranks. `comm` is the mpi4py communicator (None for a one-rank world
    without MPI); `rank` is this process's rank inside the group (None if it is not a member)."""
    name: str
    ranks: tuple          # world ranks, in group-rank order
    comm: object | None   # mpi4py.MPI.Comm over exactly `ranks` (None: single process, no MPI)
    rank: int | None

    @property
    def size(self) -> int:
        return len(self.ranks)

    def group_rank_of(self, world_rank: int) -> int:
        if world_rank not in self.ranks:
            raise OpValueError("get_group_rank_from_world_rank",
                               f"a world rank in group '{self.name}' {list(self.ranks)}",
                               str(world_rank))
        return self.ranks.index(world_rank)


_groups: dict[str, Group] = {}
_world: Group | None = None


def launched_by_mpi() -> bool:
    """True when a launcher (mpiexec, msrun, srun) started this process."""
    return any(v in os.environ for v in _LAUNCHER_VARS)


def _mpi():
    """mpi4py.MPI, or None when the `dist` extra is not installed."""
    try:
        from mpi4py import MPI
    except ImportError:
        return None
    return MPI


def init_world() -> Group:
    """Create the world group once (idempotent). Under a launcher without mpi4py installed this
    is an error: silently running N independent copies would train N different models."""
    global _world
    if _world is not None:
        return _world
    mpi = _mpi()
    if mpi is None:
        if launched_by_mpi() and int(os.environ.get("PMI_SIZE", "1")) > 1:
            from .errors import MissingExtraError
            raise MissingExtraError("mpi4py", "dist", "A multi-process run (mpiexec/msrun)")
        _world = Group(HCCL_WORLD_COMM_GROUP, (0,), None, 0)
    else:
        comm = mpi.COMM_WORLD
        _world = Group(HCCL_WORLD_COMM_GROUP, tuple(range(comm.Get_size())), comm, comm.Get_rank())
    for name in WORLD_NAMES:
        _groups[name] = _world
    return _world


def is_initialized() -> bool:
    return _world is not None


def world() -> Group:
    """The world group, created on first use (so a collective works without an explicit init())."""
    return _world if _world is not None else init_world()


def get(name: str | None = None) -> Group:
    """The group called `name` (None or any world name: the world)."""
    if name is None or name in WORLD_NAMES:
        return world()
    world()
    if name not in _groups:
        raise OpValueError("communication", f"a group created with create_group (known: "
                           f"{sorted(g for g in _groups if g not in WORLD_NAMES)})", repr(name))
    return _groups[name]


def create(name: str, ranks) -> Group:
    """Create group `name` over world `ranks`. Collective over the world: every rank must call it
    with the same arguments (as MPI_Comm_create_group requires of the members, and MindSpore's
    create_group of all ranks)."""
    w = world()
    ranks = tuple(int(r) for r in ranks)
    if not isinstance(name, str) or not name or name in WORLD_NAMES:
        raise OpValueError("create_group", "a new, non-empty group name other than the world's",
                           repr(name))
    if name in _groups:
        raise OpValueError("create_group", f"a name not in use ('{name}' already exists)", repr(name))
    if len(set(ranks)) != len(ranks) or not ranks or any(not 0 <= r < w.size for r in ranks):
        raise OpValueError("create_group", f"distinct world ranks in [0, {w.size})", str(list(ranks)))
    me = w.rank if w.rank in ranks else None
    comm = None
    if w.comm is not None:
        mpi = _mpi()
        sub = w.comm.Create_group(w.comm.Get_group().Incl(list(ranks))) if me is not None else None
        # Comm.Create_group is collective over the members only; the barrier keeps non-members
        # from racing ahead into a later collective on the world.
        w.comm.Barrier()
        comm = sub if sub is not None and sub != mpi.COMM_NULL else None
    group = Group(name, ranks, comm, None if me is None else ranks.index(me))
    _groups[name] = group
    return group


def ensure(name: str, ranks, op: str) -> str:
    """Group `name` over world `ranks`, created unless it exists; returns the name. Collective like
    `create`: every rank decides the same way from the same arguments, so every rank takes part
    in the same creates. An existing group of that name over other ranks is an error of `op`."""
    world()
    existing = _groups.get(name)
    if existing is None:
        create(name, ranks)
    elif existing.ranks != tuple(int(r) for r in ranks):
        raise OpValueError(op, f"group '{name}' over world ranks {list(ranks)}", f"ranks {list(existing.ranks)}")
    return name


def destroy(name: str) -> None:
    if name in WORLD_NAMES:
        raise OpValueError("destroy_group", "a group created with create_group", repr(name))
    group = _groups.pop(name, None)
    if group is None:
        raise OpValueError("destroy_group", "an existing group", repr(name))
    if group.comm is not None:
        group.comm.Free()


def release() -> None:
    """Forget every group (MPI itself is finalized by mpi4py at exit)."""
    global _world
    for name, group in list(_groups.items()):
        if name not in WORLD_NAMES and group.comm is not None:
            group.comm.Free()
    _groups.clear()
    _world = None


def require_member(group: Group, op: str) -> int:
    """This process's rank in `group`, or a clear error if it is not a member."""
    if group.rank is None:
        raise MinisporeRuntimeError(
            f"For '{op}', expected this process (world rank {world().rank}) to be a member of "
            f"group '{group.name}' {list(group.ranks)}, but it is not.")
    return group.rank
