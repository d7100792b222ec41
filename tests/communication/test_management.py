"""minispore.communication's management API: a world of one in this process, and real MPI worlds
of 2 and 4 ranks started with mpiexec (tests/communication/mpi_harness.py)."""
import json
import sys

import pytest

import minispore as ms
from minispore import communication as comm
from minispore.common import process_groups
from minispore.common.errors import MinisporeRuntimeError, OpTypeError, OpValueError
from minispore.communication import failure

from mpi_harness import run_mpi


@pytest.fixture(autouse=True)
def fresh_world():
    comm.release()
    yield
    comm.release()


# ---------------------------------------------------------------------------------------------
# a world of one (no launcher)
def test_world_constants_are_mindspores_names():
    assert comm.HCCL_WORLD_COMM_GROUP == "hccl_world_group"
    assert comm.NCCL_WORLD_COMM_GROUP == "nccl_world_group"
    assert comm.MCCL_WORLD_COMM_GROUP == "mccl_world_group"


def test_init_without_launcher_is_a_world_of_one():
    assert not comm.GlobalComm.INITED
    comm.init()
    assert comm.GlobalComm.INITED
    # the context's device target is CPU: MindSpore's automatic choice is "mccl"
    assert comm.GlobalComm.BACKEND == "mccl"
    assert comm.GlobalComm.WORLD_COMM_GROUP == comm.MCCL_WORLD_COMM_GROUP
    for group in (comm.HCCL_WORLD_COMM_GROUP, comm.NCCL_WORLD_COMM_GROUP, comm.MCCL_WORLD_COMM_GROUP):
        assert comm.get_rank(group) == 0
        assert comm.get_group_size(group) == 1
        assert comm.get_local_rank(group) == 0
        assert comm.get_local_rank_size(group) == 1
    assert (comm.get_rank(), comm.get_group_size()) == (0, 1)
    # a single process has nobody waiting on it: Python's own excepthook stays
    assert sys.excepthook is not failure.report_and_abort


@pytest.mark.parametrize("backend, world", [("hccl", "hccl_world_group"), ("nccl", "nccl_world_group"),
                                            ("mccl", "mccl_world_group")])
def test_init_backend_names_pick_the_world_group_name(backend, world):
    comm.init(backend)
    assert comm.GlobalComm.BACKEND == backend
    assert comm.GlobalComm.WORLD_COMM_GROUP == world
    assert comm.get_group_size(world) == 1


def test_init_rejects_unknown_backends():
    with pytest.raises(OpValueError, match="For 'init'.*'gloo'"):
        comm.init("gloo")
    with pytest.raises(OpTypeError, match="For 'init'"):
        comm.init(3)
    assert not comm.GlobalComm.INITED


def test_getters_work_before_init():
    # MindSpore raises before init(); minispore answers for the world it would join
    assert comm.get_rank() == 0 and comm.get_group_size() == 1
    assert comm.get_local_rank_size() == 1                   # runs init() (the host split is collective)
    assert comm.GlobalComm.INITED


def test_groups_in_a_world_of_one():
    comm.init()
    comm.create_group("solo", [0])
    assert comm.get_rank("solo") == 0
    assert comm.get_group_size("solo") == 1
    assert comm.get_local_rank("solo") == 0 and comm.get_local_rank_size("solo") == 1
    assert comm.get_group_rank_from_world_rank(0, "solo") == 0
    assert comm.get_world_rank_from_group_rank("solo", 0) == 0
    assert process_groups.get("solo").ranks == (0,)
    comm.destroy_group("solo")
    with pytest.raises(OpValueError, match="For 'get_rank'.*'solo'"):
        comm.get_rank("solo")
    comm.create_group("solo", [0])                           # the name is free again
    assert comm.get_group_size("solo") == 1


def test_group_errors_name_the_function():
    comm.init()
    comm.create_group("g", [0])
    cases = [
        (OpValueError, "create_group", lambda: comm.create_group("g", [0])),            # name in use
        (OpValueError, "create_group", lambda: comm.create_group("h", [1])),            # no rank 1
        (OpValueError, "create_group", lambda: comm.create_group("h", [0, 0])),         # duplicates
        (OpValueError, "create_group", lambda: comm.create_group("h", [])),
        (OpValueError, "create_group", lambda: comm.create_group(comm.HCCL_WORLD_COMM_GROUP, [0])),
        (OpTypeError, "create_group", lambda: comm.create_group(5, [0])),
        (OpTypeError, "create_group", lambda: comm.create_group("h", 0)),
        (OpTypeError, "create_group", lambda: comm.create_group("h", [0.0])),
        (OpTypeError, "create_group", lambda: comm.create_group("h", [0], options=3)),
        (OpValueError, "destroy_group", lambda: comm.destroy_group("nope")),
        (OpValueError, "destroy_group", lambda: comm.destroy_group(comm.HCCL_WORLD_COMM_GROUP)),
        (OpTypeError, "destroy_group", lambda: comm.destroy_group(None)),
        (OpValueError, "get_rank", lambda: comm.get_rank("nope")),
        (OpTypeError, "get_rank", lambda: comm.get_rank(0)),
        (OpValueError, "get_group_size", lambda: comm.get_group_size("nope")),
        (OpValueError, "get_local_rank", lambda: comm.get_local_rank("nope")),
        (OpValueError, "get_group_rank_from_world_rank", lambda: comm.get_group_rank_from_world_rank(3, "g")),
        (OpTypeError, "get_group_rank_from_world_rank", lambda: comm.get_group_rank_from_world_rank("0", "g")),
        (OpValueError, "get_world_rank_from_group_rank", lambda: comm.get_world_rank_from_group_rank("g", 1)),
        (OpValueError, "get_world_rank_from_group_rank", lambda: comm.get_world_rank_from_group_rank("g", -1)),
        (OpTypeError, "get_world_rank_from_group_rank", lambda: comm.get_world_rank_from_group_rank("g", True)),
    ]
    for error, name, call in cases:
        with pytest.raises(error, match=f"For '{name}'"):
            call()


def test_release_forgets_groups_and_init_state():
    comm.init("nccl")
    comm.create_group("g", [0])
    comm.release()
    assert not comm.GlobalComm.INITED
    assert comm.GlobalComm.BACKEND == "undefined"
    assert comm.GlobalComm.WORLD_COMM_GROUP == comm.HCCL_WORLD_COMM_GROUP
    with pytest.raises(OpValueError, match="get_group_size"):
        comm.get_group_size("g")


def test_reachable_as_minispore_and_mindspore_communication():
    assert ms.communication is comm
    from minispore import mindspore_compat
    mindspore_compat.install()
    try:
        import mindspore.communication as ms_comm
        from mindspore.communication import get_rank, init
        assert ms_comm is comm and get_rank is comm.get_rank and init is comm.init
    finally:
        mindspore_compat.uninstall()


# ---------------------------------------------------------------------------------------------
# real worlds: mpiexec -n 2 and -n 4, one job each; every rank prints what it saw as JSON
_RANKS_SCRIPT = r'''
import json
from minispore import communication as comm
from minispore.common import process_groups
from minispore.common.errors import MinisporeRuntimeError, OpValueError

comm.init()
r, n = comm.get_rank(), comm.get_group_size()
evens, backwards = list(range(0, n, 2)), list(range(n))[::-1]
comm.create_group("even", evens)
comm.create_group("backwards", backwards)
seen = {"rank": r, "size": n, "local_rank": comm.get_local_rank(), "local_size": comm.get_local_rank_size(),
        "backend": comm.GlobalComm.BACKEND, "hook": __import__("sys").excepthook.__name__,
        "backwards_rank": comm.get_rank("backwards"), "backwards_size": comm.get_group_size("backwards"),
        "backwards_local_rank": comm.get_local_rank("backwards"),
        "even_size": comm.get_group_size("even"),
        "world_of_backwards": [comm.get_world_rank_from_group_rank("backwards", i) for i in range(n)],
        "backwards_of_world": [comm.get_group_rank_from_world_rank(w, "backwards") for w in range(n)],
        "world_of_even": [comm.get_world_rank_from_group_rank("even", i) for i in range(len(evens))]}
# the groups' communicators are real MPI communicators over exactly their members
seen["backwards_sum"] = process_groups.get("backwards").comm.allreduce(r)
seen["backwards_comm_rank"] = process_groups.get("backwards").comm.Get_rank()
try:
    seen["even_rank"] = comm.get_rank("even")
    seen["even_local_size"] = comm.get_local_rank_size("even")
    seen["even_sum"] = process_groups.get("even").comm.allreduce(r)
except MinisporeRuntimeError as e:
    seen["even_rank"] = "not a member: " + str(e)
try:
    comm.get_group_rank_from_world_rank(1, "even")
except OpValueError as e:
    seen["odd_in_even"] = str(e)
try:
    comm.create_group("beyond", [0, n])
except OpValueError as e:
    seen["beyond"] = str(e)
comm.destroy_group("even")
try:
    comm.get_group_size("even")
except OpValueError as e:
    seen["destroyed"] = str(e)
# rank 0 prints everyone's findings as one line (ranks printing at once would interleave)
everyone = process_groups.world().comm.gather(seen, root=0)
if r == 0:
    print("RESULT " + json.dumps(everyone), flush=True)
'''


def _results(stdout):
    rows = [json.loads(line[len("RESULT "):]) for line in stdout.splitlines() if line.startswith("RESULT ")]
    assert len(rows) == 1, stdout
    return {row["rank"]: row for row in rows[0]}


@pytest.mark.parametrize("n", [2, 4])
def test_ranks_groups_and_conversions_under_mpiexec(n):
    result = run_mpi(_RANKS_SCRIPT, n, timeout=60, check=True)
    seen = _results(result.stdout)
    assert sorted(seen) == list(range(n)), result.stdout + result.stderr
    evens = list(range(0, n, 2))
    for r, row in seen.items():
        assert row["size"] == n and row["backend"] == "mccl"
        assert row["hook"] == "report_and_abort"             # init() armed the rank-failure hook
        # one host: the local view is the world's, and a group's local ranks follow its order
        assert (row["local_rank"], row["local_size"]) == (r, n)
        assert row["backwards_local_rank"] == n - 1 - r
        assert (row["backwards_rank"], row["backwards_size"]) == (n - 1 - r, n)
        assert row["backwards_comm_rank"] == n - 1 - r
        assert row["backwards_sum"] == sum(range(n))
        assert row["world_of_backwards"] == list(range(n))[::-1]
        assert row["backwards_of_world"] == [n - 1 - w for w in range(n)]
        assert row["even_size"] == len(evens) and row["world_of_even"] == evens
        if r in evens:
            assert row["even_rank"] == evens.index(r)
            assert row["even_local_size"] == len(evens)
            assert row["even_sum"] == sum(evens)
        else:
            assert row["even_rank"].startswith("not a member") and "'even'" in row["even_rank"]
            assert f"world rank {r}" in row["even_rank"]
        assert "For 'get_group_rank_from_world_rank'" in row["odd_in_even"]
        assert "For 'create_group'" in row["beyond"] and f"[0, {n})" in row["beyond"]
        assert "For 'get_group_size'" in row["destroyed"] and "'even'" in row["destroyed"]
