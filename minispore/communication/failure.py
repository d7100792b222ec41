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
"""
from __future__ import annotations

import os
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
    if process_groups.world().size <= 1 or sys.excepthook is report_and_abort:
        return
    _previous_hook = sys.excepthook
    sys.excepthook = report_and_abort


def uninstall_abort_on_exception() -> None:
    global _previous_hook
    if sys.excepthook is report_and_abort:
        sys.excepthook = _previous_hook or sys.__excepthook__
    _previous_hook = None


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
