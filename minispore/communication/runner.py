"""The program every rank of an `msrun` job runs: `python -m minispore.communication.runner script.py args...`.

It does for each rank what MindSpore's msrun does around a worker, then runs the script as
`python script.py args...` would (`__name__ == "__main__"`, `sys.argv`, the script's folder first
on sys.path):

1. With `msrun --log_dir=DIR`, it sends the rank's stdout and stderr to DIR/worker_<rank>.log
   (MindSpore's file names), at the file-descriptor level so output from C code lands there too.
2. It joins the MPI world (importing mpi4py runs MPI_Init) and tells msrun so, by creating
   `rank_<r>.started` before and `rank_<r>.joined` after in the job folder msrun made
   (MINISPORE_MSRUN_DIR): that is how msrun's `--cluster_time_out` names a worker that never
   started or never joined. (MPI_Init returns on no rank until all have reached it.)
3. It installs the rank-failure hook (failure.py): an uncaught exception prints the traceback
   tagged with the rank and aborts the whole job (MPI_Abort) instead of leaving the other ranks
   waiting in a collective. `sys.exit(n)` with n != 0 does the same with status n.

Plain `mpiexec -n N python script.py` works too; then step 3 happens at `communication.init()`.
"""
from __future__ import annotations

import os
import runpy
import sys

LOG_DIR_VAR = "MINISPORE_LOG_DIR"
JOB_DIR_VAR = "MINISPORE_MSRUN_DIR"


def _launcher_rank():
    """This process's rank as the launcher's environment says (before MPI_Init): MPICH's hydra
    sets PMI_RANK, Open MPI OMPI_COMM_WORLD_RANK, Slurm SLURM_PROCID."""
    for var in ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID"):
        if var in os.environ:
            return int(os.environ[var])
    return None


def redirect_output(log_dir: str, rank: int) -> str:
    """Point fds 1 and 2 (and so sys.stdout/sys.stderr, print, C libraries) at worker_<rank>.log."""
    os.makedirs(log_dir, exist_ok=True)
    path = os.path.join(log_dir, f"worker_{rank}.log")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    _line_buffered_streams()
    return path


def _line_buffered_streams() -> None:
    """sys.stdout/sys.stderr that write whole lines, one write per line: the launcher's "[rank] "
    prefix is added per chunk it reads, so an unbuffered stream (PYTHONUNBUFFERED) printing
    `print("a", 1)` piece by piece would get a prefix before every piece."""
    sys.stdout.flush()
    sys.stderr.flush()
    sys.stdout = open(1, "w", buffering=1, closefd=False, encoding=sys.stdout.encoding,
                      errors=sys.stdout.errors)
    sys.stderr = open(2, "w", buffering=1, closefd=False, encoding=sys.stderr.encoding,
                      errors="backslashreplace")


def _abort_on_exit_status(code, rank) -> None:
    """A rank leaving with a non-zero status ends the job too (others may be waiting on it)."""
    from mpi4py import MPI
    if MPI.COMM_WORLD.Get_size() > 1:
        from .failure import rank_tag
        sys.stderr.write(f"{rank_tag(rank)}minispore: rank {rank} exited with status {code}; "
                         f"aborting the job (MPI_Abort)\n")
        sys.stderr.flush()
        from .failure import _write_marker
        _write_marker(rank, f"exited with status {code}")
        MPI.COMM_WORLD.Abort(code if isinstance(code, int) else 1)


def main(argv=None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv:
        sys.exit("usage: python -m minispore.communication.runner script.py [args...]")
    script, script_args = argv[0], argv[1:]
    log_dir = os.environ.get(LOG_DIR_VAR)
    early_rank = _launcher_rank()
    if log_dir and early_rank is not None:
        redirect_output(log_dir, early_rank)
    job_dir = os.environ.get(JOB_DIR_VAR)
    if job_dir and early_rank is not None:
        open(os.path.join(job_dir, f"rank_{early_rank}.started"), "w").close()
    from mpi4py import MPI                   # MPI_Init: this process joins the world
    rank = MPI.COMM_WORLD.Get_rank()
    if log_dir and early_rank is None:
        redirect_output(log_dir, rank)
    if job_dir:
        open(os.path.join(job_dir, f"rank_{rank}.joined"), "w").close()
    from .failure import install_abort_on_exception
    install_abort_on_exception()
    sys.argv = [script, *script_args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    if not log_dir:
        _line_buffered_streams()
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        if e.code not in (None, 0):
            if isinstance(e.code, str):      # sys.exit("message"): Python prints it, status 1
                sys.stderr.write(f"{e.code}\n")
            _abort_on_exit_status(e.code if isinstance(e.code, int) else 1, rank)
        raise
    except BaseException as e:               # report from the script's first frame, not the runner's
        sys.excepthook(type(e), e, _from_script(e.__traceback__, script))
        sys.exit(1)


def _from_script(tb, script):
    """The traceback `tb` without the runner's and runpy's frames above the script's own."""
    first = tb
    while first is not None and first.tb_frame.f_code.co_filename != script:
        first = first.tb_next
    return first or tb


if __name__ == "__main__":
    main()
