"""What a rank does when it raises: print the traceback tagged with its rank, then end the whole job.

Why: in an MPI job the other ranks are usually blocked in a collective waiting for the one that
failed. If that rank simply exits, they wait forever (a hang, not an error). MPI's answer is
`MPI_Abort`, which tells the launcher to kill every process of the job. `mpi4py` offers the same
through `python -m mpi4py script.py`; minispore does it itself so that the traceback says which
rank raised, and so that `msrun` can tell the user which rank failed:

    [rank 1] Traceback (most recent call last):
    [rank 1]   File "train.py", line 12, in <module>
    [rank 1] ZeroDivisionError: division by zero
    [rank 1] minispore: rank 1 raised ZeroDivisionError; aborting the job (MPI_Abort)

The hook is installed by `communication.init()` and by the runner `msrun` starts every rank with
(communication/runner.py), so a script that never calls init() is covered under msrun too.

When `msrun` started the job it sets MINISPORE_FAILURE_DIR; the failing rank also writes
`rank_<r>.failed` there (its exception's last line), which is how msrun names the rank afterwards.

A rank can also die without running any Python at all: SIGKILL (the kernel's OOM killer, `kill
-9`, a node going away) or a crash in C code. No hook runs then, so msrun watches from the
outside: every rank records `rank_<r>.pid` in the same folder when the hook is installed, and
`rank_<r>.exited` when its interpreter exits normally (`record_rank_process`). A recorded process
that is gone with neither marker died abnormally; the first such one is the failed rank: msrun
names it, stops the rest of the job (which would otherwise wait for it in their next collective)
and takes its signal from mpiexec's per-rank exit codes (launcher.py says why mpiexec's own
report cannot name the rank). `read_rank_pids` reads the PID files back and `describe_exit`
words how a process ended.
"""
from __future__ import annotations

import atexit
import os
import signal
import sys
import traceback

FAILURE_DIR_VAR = "MINISPORE_FAILURE_DIR"
# Set by msrun when the launcher already prefixes every output line with the rank ("[1] ...").
PREFIXED_VAR = "MINISPORE_OUTPUT_PREFIXED"

_previous_hook = None


def _world_rank() -> int:
    from ..common import process_groups
    return process_groups.world().rank


def report_and_abort(exc_type, exc, tb) -> None:
    """sys.excepthook for a rank of a multi-process job (see the module docstring)."""
    try:
        rank = _world_rank()
    except Exception:                      # the failure may be MPI's own: still tag what we can
        rank = int(os.environ.get("PMI_RANK", "-1"))
    tag = rank_tag(rank)
    lines = "".join(traceback.format_exception(exc_type, exc, tb)).rstrip("\n").splitlines()
    lines.append(f"minispore: rank {rank} raised {exc_type.__name__}; aborting the job (MPI_Abort)")
    sys.stderr.write("".join(tag + line + "\n" for line in lines))
    sys.stderr.flush()
    sys.stdout.flush()
    _write_marker(rank, traceback.format_exception_only(exc_type, exc)[-1].strip())
    from mpi4py import MPI
    MPI.COMM_WORLD.Abort(1)


def rank_tag(rank: int) -> str:
    """"[rank r] " before each line of a report, unless the launcher prefixes lines already."""
    return "" if os.environ.get(PREFIXED_VAR) else f"[rank {rank}] "


def _write_marker(rank: int, summary: str) -> None:
    folder = os.environ.get(FAILURE_DIR_VAR)
    if not folder:
        return
    try:
        with open(os.path.join(folder, f"rank_{rank}.failed"), "w") as f:
            f.write(summary + "\n")
    except OSError:                        # the report on stderr is what matters; never mask it
        pass


def install_abort_on_exception() -> None:
    """Install `report_and_abort` as sys.excepthook (idempotent). Only for a job of several
    ranks: a single process has nobody waiting on it, and Python's own report is the right one."""
    global _previous_hook
    from ..common import process_groups
    world = process_groups.world()
    record_rank_process(world.rank)
    if world.size <= 1 or sys.excepthook is report_and_abort:
        return
    _previous_hook = sys.excepthook
    sys.excepthook = report_and_abort


def uninstall_abort_on_exception() -> None:
    global _previous_hook
    if sys.excepthook is report_and_abort:
        sys.excepthook = _previous_hook or sys.__excepthook__
    _previous_hook = None


_recorded = None


def record_rank_process(rank: int) -> None:
    """In an msrun job (MINISPORE_FAILURE_DIR set; nothing otherwise): write this process's id to
    `rank_<r>.pid`, and register an exit handler that writes `rank_<r>.exited` when the
    interpreter ends normally. msrun tells a rank that died (SIGKILL, a crash) from one that
    finished by the second file (see the module docstring). Idempotent."""
    global _recorded
    folder = os.environ.get(FAILURE_DIR_VAR)
    if not folder or rank is None or _recorded == (folder, rank):
        return
    try:
        with open(os.path.join(folder, f"rank_{rank}.pid"), "w") as f:
            f.write(f"{os.getpid()}\n")
    except OSError:                        # a missing PID file only makes a report less precise
        return
    if _recorded is None:
        atexit.register(_mark_exited)
    _recorded = (folder, rank)


def _mark_exited() -> None:
    if _recorded is None:
        return
    folder, rank = _recorded
    try:
        open(os.path.join(folder, f"rank_{rank}.exited"), "w").close()
    except OSError:
        pass


def read_rank_pids(folder: str) -> dict[int, int]:
    """{pid: rank} of the `rank_<r>.pid` files in `folder` (for msrun)."""
    found = {}
    for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else ():
        if name.startswith("rank_") and name.endswith(".pid"):
            try:
                rank = int(name[len("rank_"):-len(".pid")])
                with open(os.path.join(folder, name)) as f:
                    found[int(f.read().strip())] = rank
            except (ValueError, OSError):
                continue
    return found


def describe_exit(code: int | None = None, signal_number: int | None = None) -> str:
    """"killed by signal 9 (SIGKILL)" or "exited with status 3": how a process ended."""
    if signal_number is not None:
        try:
            name = signal.Signals(signal_number).name
        except ValueError:
            name = "unknown signal"
        return f"killed by signal {signal_number} ({name})"
    return f"exited with status {code}"


def read_failures(folder: str) -> dict[int, str]:
    """The ranks that reported a failure in `folder` (for msrun): {rank: exception summary}."""
    found = {}
    for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else ():
        if name.startswith("rank_") and name.endswith(".failed"):
            try:
                rank = int(name[len("rank_"):-len(".failed")])
                with open(os.path.join(folder, name)) as f:
                    found[rank] = f.read().strip()
            except (ValueError, OSError):
                continue
    return found
