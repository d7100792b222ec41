"""The harness itself: a job past its timeout fails the test with every rank's output, and no
rank outlives it."""
import os
from pathlib import Path

import pytest

from mpi_harness import per_rank_lines, run_mpi

_HANG = """
import sys, time
from mpi4py import MPI
print(f"rank {MPI.COMM_WORLD.Get_rank()} is waiting", flush=True)
print(f"rank {MPI.COMM_WORLD.Get_rank()} on stderr", file=sys.stderr, flush=True)
time.sleep(600)
"""


def _processes_running(marker: str) -> list:
    alive = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in cmdline:
            alive.append((pid, cmdline))
    return alive


def test_a_hanging_job_fails_the_test_with_every_ranks_output(tmp_path):
    script = tmp_path / "hang_forever.py"
    script.write_text(_HANG)
    with pytest.raises(pytest.fail.Exception) as failure:
        run_mpi(str(script), 2, timeout=8)
    message = str(failure.value)
    assert "did not finish within 8 s" in message
    for r in (0, 1):
        assert f"rank {r} is waiting" in message and f"rank {r} on stderr" in message
    assert _processes_running(str(script)) == []             # mpiexec and both ranks were killed


def test_source_text_arguments_and_prefixes():
    result = run_mpi("""
        import sys
        from mpi4py import MPI
        print(MPI.COMM_WORLD.Get_rank(), sys.argv[1:])
    """, 2, args=("--x", 3), check=True, prefix_ranks=True)
    assert per_rank_lines(result.stdout) == {0: ["0 ['--x', '3']"], 1: ["1 ['--x', '3']"]}


def test_check_fails_the_test_on_a_non_zero_exit():
    with pytest.raises(pytest.fail.Exception, match="exited with status 4"):
        run_mpi("import sys; sys.exit(4)", 1, check=True)
