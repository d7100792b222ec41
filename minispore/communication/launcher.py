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
* A rank killed by a signal (SIGKILL, the OOM killer, a segfault), which runs no Python hook:
  MPICH kills the other ranks within milliseconds, so the job always stops, but its report cannot
  say which rank died first: it names the lowest rank's PID ("BAD TERMINATION ... PID <rank 0's>
  ... EXIT CODE: 9", seen with the mpich wheel's MPICH 4 when rank 2 of 4 was SIGKILLed), and
  every rank then died of signal 9. So msrun watches the ranks' processes itself: each leaves a
  PID file, and an "exited" marker when it ends normally (failure.py); msrun opens a pidfd per
  rank (Linux >= 5.3: a descriptor that becomes readable the moment the process ends) and one
  thread notes the order in which they end. The first to end without its marker is the failed
  rank; its signal comes from mpiexec's per-rank exit codes (`-print-all-exitcodes`):
  "msrun: rank 2 failed: killed by signal 9 (SIGKILL)". msrun then stops the rest of the job
  itself, and runs mpiexec with `-disable-auto-cleanup`, with which MPICH kills the survivors a
  little later (at their next MPI call): measured on 2 busy cores, the first survivor ended 15-26
  ms after the killed rank in 5 of 5 runs, against 0-38 ms and two ties in 5 runs without it.
  Ranks seen ending at the same moment are all named. Once any failure is known the job gets
  FAILURE_GRACE_S seconds to end before msrun stops it, so no survivor can keep the job waiting.
* `--auto-restart=N` (`--auto_restart`): a job that fails is started again, the same command,
  up to N times; the workers see MINISPORE_RESTART_ATTEMPT=k (0 on the first run). msrun only
  restarts: continuing from the newest complete checkpoint is the script's part
  (`minispore.parallel.recovery.resume_training`), since a launcher below the training layers
  cannot know what a checkpoint is.
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
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from importlib import metadata

from ..common.errors import MissingExtraError, OpValueError
from .failure import FAILURE_DIR_VAR, PREFIXED_VAR, describe_exit, read_failures, read_rank_pids
from .runner import JOB_DIR_VAR, LOG_DIR_VAR

PROG = "msrun"
RESTART_ATTEMPT_VAR = "MINISPORE_RESTART_ATTEMPT"     # 0 on a job's first run, k on its k-th restart
# Seconds a job may take to stop once a failure is known (a rank's failure marker, or mpiexec's
# report of a dead process) before msrun stops it itself. MPICH kills the other ranks at once;
# this bounds the wait when it does not (another launcher, a rank stuck in the kernel).
FAILURE_GRACE_S = 30.0


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
    add_restart_args(parser)
    add_script_args(parser)


def add_restart_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--auto-restart", "--auto_restart", dest="auto_restart", type=int, default=0,
                        metavar="N", help="start a failed job again, up to N times (default 0); the "
                        f"script resumes from its checkpoints and sees {RESTART_ATTEMPT_VAR}")


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
    restarts = getattr(args, "auto_restart", 0)
    if restarts < 0:
        raise OpValueError(PROG, "--auto-restart >= 0 (restarts after a failure)", str(restarts))
    if restarts and not args.join:
        raise OpValueError(PROG, "--join=True with --auto-restart (msrun must wait for a job to see it fail)",
                           "--join=False")
    if not os.path.isfile(args.script):
        raise OpValueError(PROG, "a script file to run", f"{args.script!r} (no such file)")
    if importlib.util.find_spec("mpi4py") is None:
        raise MissingExtraError("mpi4py", "dist", "msrun (each rank joins the world with mpi4py)")
    return args.worker_num


def mpiexec_command(n: int, script: str, script_args=(), prefix_ranks: bool = True, watched: bool = False) -> list:
    """The mpiexec command line msrun runs (exposed for the docs and tests). `watched`: msrun
    waits for the job and stops it itself when a rank dies (see the module docstring)."""
    cmd = [find_mpiexec(), "-n", str(n)]
    if prefix_ranks:
        cmd.append("-prepend-rank")          # hydra: "[rank] " before every output line
    if watched:
        # hydra: leave the other ranks' cleanup to msrun when one dies; print every rank's exit code
        cmd += ["-disable-auto-cleanup", "-print-all-exitcodes"]
    return cmd + [sys.executable, "-m", "minispore.communication.runner", script, *script_args]


def launch(args) -> int:
    """Run the job `args` describes (parsed msrun or `minispore run` arguments); its exit status."""
    n = _check(args)
    env = dict(os.environ, MS_WORKER_NUM=str(n), MS_SCHED_HOST=str(args.master_addr),
               MS_SCHED_PORT=str(args.master_port))
    for var in (LOG_DIR_VAR, JOB_DIR_VAR, FAILURE_DIR_VAR, PREFIXED_VAR, RESTART_ATTEMPT_VAR):
        env.pop(var, None)
    if args.log_dir:
        os.makedirs(args.log_dir, exist_ok=True)
        env[LOG_DIR_VAR] = os.path.abspath(args.log_dir)
    else:
        env[PREFIXED_VAR] = "1"
    cmd = mpiexec_command(n, args.script, args.script_args, prefix_ranks=not args.log_dir, watched=args.join)
    if not args.join:
        proc = subprocess.Popen(cmd, env=env, start_new_session=True)
        print(f"{PROG}: started {n} workers (mpiexec pid {proc.pid}); not waiting (--join=False)"
              + (f"; logs in {args.log_dir}" if args.log_dir else ""), file=sys.stderr)
        return 0
    restarts = getattr(args, "auto_restart", 0)
    for attempt in range(restarts + 1):
        env[RESTART_ATTEMPT_VAR] = str(attempt)
        job_dir = tempfile.mkdtemp(prefix="msrun-")
        env[JOB_DIR_VAR] = env[FAILURE_DIR_VAR] = job_dir
        try:
            status = _run_and_report(cmd, env, n, job_dir, args)
        finally:
            shutil.rmtree(job_dir, ignore_errors=True)
        if status in (0, 130) or not restarts:          # done, interrupted, or no restarts asked for
            return status
        if attempt < restarts:
            print(f"{PROG}: restarting the job (restart {attempt + 1} of {restarts}): the script resumes "
                  "from its latest complete checkpoint", file=sys.stderr, flush=True)
    print(f"{PROG}: the job failed {restarts + 1} times (--auto-restart={restarts}); giving up",
          file=sys.stderr)
    return status


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


# mpiexec's (hydra's) report of a process that ended badly, as MPICH prints it:
#   =   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES
#   =   RANK 2 PID 4242 RUNNING AT host          (older versions: "PID 4242 RUNNING AT host")
#   =   KILLED BY SIGNAL: 9 (Killed)             (or "EXIT CODE: 3")
_BAD_TERMINATION = "BAD TERMINATION"
_REPORTED_PID = re.compile(r"(?:RANK\s+(\d+)\s+)?PID\s+(\d+)\s+RUNNING AT")
_REPORTED_SIGNAL = re.compile(r"KILLED BY SIGNAL:\s*(\d+)")
_REPORTED_CODE = re.compile(r"EXIT CODE:\s*(\d+)")
_REPORTED_STRING = re.compile(r"EXIT STRING:.*\(signal (\d+)\)")
# `mpiexec -print-all-exitcodes`: "[mpiexec@host] Exit codes: [host] 9,9,9,9", one number per
# rank in rank order (a signal's number for a process a signal ended)
_EXIT_CODES = re.compile(r"Exit codes: \[[^\]]*\] ([\d,\s]+)$")


class LauncherReport:
    """The processes mpiexec reported as ended badly, read line by line from its output:
    `events` is a list of {"rank", "pid", "signal", "code"} (None where not said), first first."""

    def __init__(self):
        self.events = []
        self.exit_codes = []               # from -print-all-exitcodes: one per rank, rank order
        self._lock = threading.Lock()
        self._current = None

    def feed(self, line: str) -> bool:
        """Read one line of mpiexec's output; True when it is msrun's own business (the exit-code
        line msrun asked for), not to be shown."""
        with self._lock:
            codes = _EXIT_CODES.search(line.rstrip())
            if codes:
                self.exit_codes += [int(c) for c in codes.group(1).replace(" ", "").split(",") if c]
                return True
            if _BAD_TERMINATION in line:
                self._current = {"rank": None, "pid": None, "signal": None, "code": None}
                self.events.append(self._current)
                return False
            event = self._current if self._current is not None else (self.events[-1] if self.events else None)
            if event is None:
                return False
            m = _REPORTED_PID.search(line)
            if m and event["pid"] is None:
                event["rank"] = int(m.group(1)) if m.group(1) is not None else None
                event["pid"] = int(m.group(2))
            for pattern, key in ((_REPORTED_SIGNAL, "signal"), (_REPORTED_STRING, "signal"), (_REPORTED_CODE, "code")):
                m = pattern.search(line)
                if m and event[key] is None:
                    event[key] = int(m.group(1))
            return False

    def failed(self, pid_to_rank: dict) -> list:
        """[(rank or None, pid, description)] of the reported processes."""
        with self._lock:
            events = [dict(e) for e in self.events if e["pid"] is not None]
        # the rank from the report itself (newer MPICH), else from the PID files the ranks left
        return [(e["rank"] if e["rank"] is not None else pid_to_rank.get(e["pid"]), e["pid"],
                 describe_exit(e["code"], e["signal"])) for e in events]


def _forward(source, sink, report: LauncherReport) -> None:
    """Copy mpiexec's output to ours line by line (unchanged), letting `report` read it."""
    raw_sink = getattr(sink, "buffer", None)
    for raw in iter(source.readline, b""):
        if report.feed(raw.decode("utf-8", "replace")):
            continue
        if raw_sink is not None:
            raw_sink.write(raw)
        else:
            sink.write(raw.decode("utf-8", "replace"))
        sink.flush()
    source.close()


def _is_gone(pid: int) -> bool:
    """Whether process `pid` has ended: no such process, or a zombie its parent (mpiexec's proxy)
    has not reaped yet (Linux /proc; elsewhere only the first)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (OSError, IndexError):
        return False


def dead_ranks(job_dir: str) -> list:
    """[(rank, pid)] of the ranks whose process is gone without having exited normally (no
    `rank_<r>.exited`) or reported an exception (`rank_<r>.failed`): killed by a signal, crashed."""
    out = []
    for pid, rank in sorted(read_rank_pids(job_dir).items(), key=lambda item: item[1]):
        if _is_gone(pid):                   # gone first, markers second: a marker precedes the exit
            if not any(os.path.exists(os.path.join(job_dir, f"rank_{rank}.{m}")) for m in ("exited", "failed")):
                out.append((rank, pid))
    return out


class RankWatch:
    """The order in which the ranks' processes end, from a pidfd per rank (see the module
    docstring), watched by one thread; where pidfds are missing (not Linux), `dead_ranks`
    polling. `abnormal()` gives the first ranks that ended without an exit marker."""

    def __init__(self, job_dir: str, n: int):
        self.job_dir, self.n = job_dir, n
        self.ended = []                    # [[rank, ...]] in the order seen (one poll: one batch)
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._fds = {}                     # pidfd -> rank
        self._known = set()
        self._use_pidfd = hasattr(os, "pidfd_open") and hasattr(select, "poll")
        if self._use_pidfd:
            self._poll = select.poll()
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()

    def _open_new(self) -> list:
        """pidfds for the PID files that appeared; ranks already gone when seen are returned."""
        gone = []
        for pid, rank in read_rank_pids(self.job_dir).items():
            if rank in self._known:
                continue
            self._known.add(rank)
            try:
                fd = os.pidfd_open(pid)
            except ProcessLookupError:
                gone.append(rank)
                continue
            except OSError:                # no pidfds here after all: fall back to polling
                self._known.discard(rank)
                self._use_pidfd = False
                return gone
            self._fds[fd] = rank
            self._poll.register(fd, select.POLLIN)
        return gone

    def _run(self) -> None:
        while not self._done.is_set() and self._use_pidfd:
            batch = self._open_new() if len(self._known) < self.n else []
            events = self._poll.poll(20 if len(self._known) < self.n else 100)
            for fd, _ in events:
                batch.append(self._fds.pop(fd))
                self._poll.unregister(fd)
                os.close(fd)
            if batch:
                with self._lock:
                    self.ended.append(sorted(batch))
        for fd in list(self._fds):
            os.close(fd)

    def _finished(self, rank) -> bool:
        return any(os.path.exists(os.path.join(self.job_dir, f"rank_{rank}.{m}")) for m in ("exited", "failed"))

    def abnormal(self) -> list:
        """[(rank, pid)]: the first ranks seen to end without an exit or failure marker (several
        only when their ends were seen at the same moment), [] while there is none."""
        pids = {rank: pid for pid, rank in read_rank_pids(self.job_dir).items()}
        if not self._use_pidfd:
            return dead_ranks(self.job_dir)
        with self._lock:
            batches = [list(b) for b in self.ended]
        for batch in batches:             # markers are written before the exit they announce
            bad = [r for r in batch if not self._finished(r)]
            if bad:
                return [(r, pids.get(r)) for r in bad]
        return []

    def close(self) -> None:
        self._done.set()
        if self._use_pidfd:
            self._thread.join(timeout=1)


def _how_it_ended(report: LauncherReport, rank: int, pid) -> str:
    """How a rank that left no exit marker ended, from mpiexec's per-rank exit codes (a signal's
    number for a process a signal ended: it did not exit normally, so the code is a signal) or
    its report of that PID."""
    codes = report.exit_codes
    if 0 <= rank < len(codes) and 0 < codes[rank] < 65:
        return describe_exit(signal_number=codes[rank])
    for _, reported_pid, how in report.failed({}):
        if reported_pid == pid:
            return how
    return "ended without exiting normally (killed by a signal, or crashed)"


def _stop(proc) -> None:
    proc.terminate()                      # hydra's mpiexec stops its ranks on SIGTERM
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _run_and_report(cmd, env, n, job_dir, args) -> int:
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    report = LauncherReport()
    pumps = [threading.Thread(target=_forward, args=(stream, sink, report), daemon=True)
             for stream, sink in ((proc.stdout, sys.stdout), (proc.stderr, sys.stderr))]
    for t in pumps:
        t.start()
    start = time.monotonic()
    timed_out = None
    stop_at = None                        # a failure is known: the job must have ended by then
    stopped_late = False
    dead = []                             # [(rank, pid)] found gone without an exit marker
    watch = RankWatch(job_dir, n)
    try:
        while True:
            try:
                status = proc.wait(timeout=0.1)
                break
            except subprocess.TimeoutExpired:
                pass
            now = time.monotonic()
            if not dead:
                dead = watch.abnormal()
                if dead:                        # the survivors would wait for it: stop them now
                    _stop(proc)
                    continue
            if stop_at is None:
                if read_failures(job_dir):      # a rank raised: its MPI_Abort ends the job
                    stop_at = now + FAILURE_GRACE_S
                elif report.failed({}):         # mpiexec saw a process die that left no PID file
                    stop_at = now + 1.0         # (during MPI_Init): nobody else will clean up
            elif now > stop_at and not stopped_late:
                stopped_late = True             # the failed job did not end by itself: stop it
                _stop(proc)
            if timed_out is None and time.monotonic() - start > args.cluster_time_out:
                if _marked(job_dir, "joined") != set(range(n)):   # the world never formed: stop the job
                    timed_out = _not_joined_message(job_dir, n, args.cluster_time_out)
                    _stop(proc)
                else:
                    timed_out = ""           # everyone joined: the time-out no longer applies
    except KeyboardInterrupt:
        proc.terminate()
        proc.wait()
        print(f"\n{PROG}: interrupted; the job was stopped", file=sys.stderr)
        return 130
    finally:
        for t in pumps:                       # the rest of what mpiexec printed, before our report
            t.join(timeout=5)
        watch.close()
    if not dead:
        dead = watch.abnormal()               # a rank that died as the job ended
    if stopped_late:
        print(f"{PROG}: the job did not end by itself after a rank failed; msrun stopped it", file=sys.stderr)
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
    for rank, pid in dead:                    # died without a Python hook
        how = _how_it_ended(report, rank, pid)
        where = f"; see {os.path.join(args.log_dir, f'worker_{rank}.log')}" if args.log_dir else ""
        others = ", ".join(str(r) for r, _ in dead if r != rank)
        together = f" (together with rank(s) {others})" if others else ""
        print(f"{PROG}: rank {rank} failed: {how} (pid {pid}{where}){together}; the other ranks were stopped "
              "and the job was aborted", file=sys.stderr)
    if dead:
        return status if status > 0 else 1
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
    add_restart_args(parser)
    add_script_args(parser)
    parser.set_defaults(local_worker_num=None, master_addr="127.0.0.1", master_port=8118, node_rank=-1, join=True)


def run_run(args) -> int:
    return launch(args)


if __name__ == "__main__":
    sys.exit(main())
