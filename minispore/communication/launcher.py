"""`msrun`: MindSpore's launcher, on MPI.

    msrun --worker_num=4 --local_worker_num=4 train.py --epochs 1
    msrun --worker_num=2 --local_worker_num=2 --log_dir=logs train.py     # logs/worker_0.log, worker_1.log
    minispore run -n 4 train.py                                          # the same, shorter

MindSpore's msrun starts a scheduler process and N workers that find each other over TCP
(master_addr:master_port). minispore's world is MPI's, so msrun is a thin wrapper over the
`mpiexec` of the mpich wheel (the `dist` extra): it runs

    mpiexec -n N python -m minispore.communication.runner script.py args...

and adds what MindSpore's launcher gives a user:

* `--log_dir=DIR`: each rank's output goes to DIR/worker_<rank>.log, as MindSpore writes it;
  without it the ranks print to this console, each line prefixed with its rank ("[1] ...").
* A rank that raises ends the whole job (runner.py installs failure.py's hook: traceback tagged
  with the rank, then MPI_Abort), and msrun then says which rank failed and why, and exits with
  a non-zero status.
* `--cluster_time_out=S`: a worker that has not joined the world (finished MPI_Init) S seconds
  after the start ends the job with a message naming the missing ranks.
* `--join`: True (minispore's default) waits for the job and reports its outcome; False starts it
  and returns at once (MindSpore's default; the workers keep running, best with --log_dir).

One host per msrun: --worker_num must equal --local_worker_num. MindSpore starts one msrun per
node (`--node_rank`); an MPI job over several hosts is started once, by the site's launcher
(`mpiexec -n 8 -f hostfile python train.py`, or Slurm's `srun`), and the same script runs there
unchanged. --master_addr/--master_port are passed to the workers as MindSpore's MS_SCHED_HOST /
MS_SCHED_PORT; MPI's own launcher picks its ports itself.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from importlib import metadata

from ..common.errors import MissingExtraError, OpValueError
from .failure import FAILURE_DIR_VAR, PREFIXED_VAR, read_failures
from .runner import JOB_DIR_VAR, LOG_DIR_VAR

PROG = "msrun"


def find_mpiexec() -> str:
    """The mpich wheel's mpiexec: next to this Python (a venv's bin/), else from the installed
    `mpich` distribution's file list. Missing: an error naming the `dist` extra."""
    beside = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    if os.path.isfile(beside) and os.access(beside, os.X_OK):
        return beside
    try:
        for f in metadata.distribution("mpich").files or ():
            if f.name == "mpiexec" and f.parent.name == "bin":
                path = str(f.locate())
                if os.access(path, os.X_OK):
                    return path
    except metadata.PackageNotFoundError:
        pass
    raise MissingExtraError("mpich", "dist", "msrun (its mpiexec)")


def _bool(text: str) -> bool:
    value = text.strip().lower()
    if value in ("true", "1", "yes"):
        return True
    if value in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected True or False, got {text!r}")


def add_msrun_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--worker_num", type=int, default=8,
                        help="number of worker processes in the job (MindSpore's default: 8)")
    parser.add_argument("--local_worker_num", type=int, default=None,
                        help="workers on this host (default: --worker_num); must equal --worker_num")
    parser.add_argument("--master_addr", default="127.0.0.1",
                        help="scheduler address, passed to the workers as MS_SCHED_HOST")
    parser.add_argument("--master_port", type=int, default=8118,
                        help="scheduler port, passed to the workers as MS_SCHED_PORT")
    parser.add_argument("--node_rank", type=int, default=-1,
                        help="this host's index (one host per msrun: only -1 or 0)")
    parser.add_argument("--log_dir", default=None,
                        help="write each rank's output to LOG_DIR/worker_<rank>.log (default: the console)")
    parser.add_argument("--join", type=_bool, default=True, metavar="{True,False}",
                        help="wait for the job and report how it ended (default True)")
    parser.add_argument("--cluster_time_out", type=float, default=600,
                        help="seconds the workers may take to join the world (default 600)")
    add_script_args(parser)


def add_script_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("script", help="the Python script every rank runs")
    parser.add_argument("script_args", nargs=argparse.REMAINDER, help="the script's own arguments")


def _check(args) -> int:
    local = args.worker_num if args.local_worker_num is None else args.local_worker_num
    if args.worker_num < 1:
        raise OpValueError(PROG, "--worker_num >= 1", str(args.worker_num))
    if local != args.worker_num:
        raise OpValueError(PROG, f"--local_worker_num equal to --worker_num (one host per msrun; for "
                           f"several hosts start `mpiexec -n {args.worker_num} -f HOSTFILE python "
                           f"{args.script}` or srun)", f"{local} local of {args.worker_num}")
    if args.node_rank not in (-1, 0):
        raise OpValueError(PROG, "--node_rank -1 or 0 (one host per msrun)", str(args.node_rank))
    if args.cluster_time_out <= 0:
        raise OpValueError(PROG, "--cluster_time_out > 0 seconds", str(args.cluster_time_out))
    if not os.path.isfile(args.script):
        raise OpValueError(PROG, "a script file to run", f"{args.script!r} (no such file)")
    if importlib.util.find_spec("mpi4py") is None:
        raise MissingExtraError("mpi4py", "dist", "msrun (each rank joins the world with mpi4py)")
    return args.worker_num


def mpiexec_command(n: int, script: str, script_args=(), prefix_ranks: bool = True) -> list:
    """The mpiexec command line msrun runs (exposed for the docs and tests)."""
    cmd = [find_mpiexec(), "-n", str(n)]
    if prefix_ranks:
        cmd.append("-prepend-rank")          # hydra: "[rank] " before every output line
    return cmd + [sys.executable, "-m", "minispore.communication.runner", script, *script_args]


def launch(args) -> int:
    """Run the job `args` describes (parsed msrun or `minispore run` arguments); its exit status."""
    n = _check(args)
    env = dict(os.environ, MS_WORKER_NUM=str(n), MS_SCHED_HOST=str(args.master_addr),
               MS_SCHED_PORT=str(args.master_port))
    for var in (LOG_DIR_VAR, JOB_DIR_VAR, FAILURE_DIR_VAR, PREFIXED_VAR):
        env.pop(var, None)
    if args.log_dir:
        os.makedirs(args.log_dir, exist_ok=True)
        env[LOG_DIR_VAR] = os.path.abspath(args.log_dir)
    else:
        env[PREFIXED_VAR] = "1"
    cmd = mpiexec_command(n, args.script, args.script_args, prefix_ranks=not args.log_dir)
    if not args.join:
        proc = subprocess.Popen(cmd, env=env, start_new_session=True)
        print(f"{PROG}: started {n} workers (mpiexec pid {proc.pid}); not waiting (--join=False)"
              + (f"; logs in {args.log_dir}" if args.log_dir else ""), file=sys.stderr)
        return 0
    job_dir = tempfile.mkdtemp(prefix="msrun-")
    env[JOB_DIR_VAR] = env[FAILURE_DIR_VAR] = job_dir
    try:
        return _run_and_report(cmd, env, n, job_dir, args)
    finally:
        shutil.rmtree(job_dir, ignore_errors=True)


def _marked(job_dir: str, what: str) -> set:
    """Ranks that left a `rank_<r>.<what>` marker in the job folder (runner.py writes them)."""
    suffix = "." + what
    return {int(name[5:-len(suffix)]) for name in os.listdir(job_dir)
            if name.startswith("rank_") and name.endswith(suffix) and name[5:-len(suffix)].isdigit()}


def _not_joined_message(job_dir: str, n: int, limit: float) -> str:
    everyone = set(range(n))
    not_started = sorted(everyone - _marked(job_dir, "started"))
    not_joined = sorted(everyone - _marked(job_dir, "joined"))
    ranks = lambda rs: ", ".join(map(str, rs))            # noqa: E731
    why = (f"rank(s) {ranks(not_started)} never started" if not_started
           else f"rank(s) {ranks(not_joined)} did not finish MPI_Init")
    return f"the world did not form within --cluster_time_out={limit:g} s: {why}; the job was stopped"


def _run_and_report(cmd, env, n, job_dir, args) -> int:
    proc = subprocess.Popen(cmd, env=env)
    start = time.monotonic()
    timed_out = None
    try:
        while True:
            try:
                status = proc.wait(timeout=0.2)
                break
            except subprocess.TimeoutExpired:
                pass
            if timed_out is None and time.monotonic() - start > args.cluster_time_out:
                if _marked(job_dir, "joined") != set(range(n)):   # the world never formed: stop the job
                    timed_out = _not_joined_message(job_dir, n, args.cluster_time_out)
                    proc.terminate()
                    try:
                        proc.wait(timeout=10)
                    except subprocess.TimeoutExpired:
                        proc.kill()
                else:
                    timed_out = ""           # everyone joined: the time-out no longer applies
    except KeyboardInterrupt:
        proc.terminate()
        proc.wait()
        print(f"\n{PROG}: interrupted; the job was stopped", file=sys.stderr)
        return 130
    if timed_out:
        print(f"{PROG}: {timed_out}", file=sys.stderr)
        return 1
    failures = read_failures(job_dir)
    if failures:
        where = (lambda r: f"see {os.path.join(args.log_dir, f'worker_{r}.log')}") if args.log_dir \
            else (lambda r: "traceback above")
        for rank, summary in sorted(failures.items()):
            print(f"{PROG}: rank {rank} failed: {summary} ({where(rank)}); the job was aborted",
                  file=sys.stderr)
        return status or 1
    if status != 0:
        print(f"{PROG}: the job failed (mpiexec exit status {status})"
              + (f"; logs in {args.log_dir}" if args.log_dir else ""), file=sys.stderr)
    return status


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description="Launch a script on several processes (MindSpore's msrun, on MPI).")
    add_msrun_args(parser)
    return parser


# "(at file:line in func)": where a minispore error came from. From the command line that place
# is the launcher itself, which says nothing (minispore/cli.py strips it the same way; cli sits
# above this layer, so the pattern is repeated rather than imported).
_LOCATION = re.compile(r" ?\(at (?:[^()\n]*?:\d+ in [^()\n]*|<minispore internals>)\)")


def _print_error(error) -> None:
    print(f"{PROG}: error: {_LOCATION.sub('', str(error)).strip()}", file=sys.stderr)


def main(argv=None) -> int:
    """Entry point of the `msrun` console script."""
    from ..common.errors import MinisporeError
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    try:
        return launch(args)
    except MinisporeError as e:
        _print_error(e)
        return 1


# `minispore run -n N script.py args...` (registered in minispore/cli.py's LAZY_COMMANDS)
def add_run_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-n", "--worker_num", type=int, default=1, help="number of processes (default 1)")
    parser.add_argument("--log_dir", default=None, help="write each rank's output to LOG_DIR/worker_<rank>.log")
    parser.add_argument("--cluster_time_out", type=float, default=600,
                        help="seconds the workers may take to join the world (default 600)")
    add_script_args(parser)
    parser.set_defaults(local_worker_num=None, master_addr="127.0.0.1", master_port=8118, node_rank=-1, join=True)


def run_run(args) -> int:
    return launch(args)


if __name__ == "__main__":
    sys.exit(main())
