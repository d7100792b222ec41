"""`minispore.communication` (MindSpore's `mindspore.communication`): the process world and its groups.

    from minispore.communication import init, get_rank, get_group_size
    init()                                   # under msrun / mpiexec: this rank of N; else a world of one
    print(get_rank(), get_group_size())

`management` holds the group API (init, ranks, create_group ...); the MPI binding underneath is
minispore.common.process_groups, which the collective primitives' kernels (in ops) use too.
`launcher` is `msrun` (a console script) and `runner` the module every rank runs under it.
"""
from .management import (GlobalComm, HCCL_WORLD_COMM_GROUP, MCCL_WORLD_COMM_GROUP, NCCL_WORLD_COMM_GROUP,
                         create_group, destroy_group, get_group_rank_from_world_rank, get_group_size,
                         get_local_rank, get_local_rank_size, get_rank, get_world_rank_from_group_rank,
                         init, release)
from . import comm_func

__all__ = ["GlobalComm", "HCCL_WORLD_COMM_GROUP", "MCCL_WORLD_COMM_GROUP", "NCCL_WORLD_COMM_GROUP",
           "create_group", "destroy_group", "get_group_rank_from_world_rank", "get_group_size",
           "get_local_rank", "get_local_rank_size", "get_rank", "get_world_rank_from_group_rank",
           "init", "release", "comm_func"]
