"""Run a script on N MPI processes from a test: `run_mpi(script, n, timeout=60, args=())`.

    from mpi_harness import run_mpi

    def test_two_ranks_agree():
        result = run_mpi('''
            from minispore.communication import init, get_rank
            init()
            print("rank", get_rank())
        ''', n=2, check=True)
        assert sorted(result.stdout.split("\\n")[:2]) == ...

`script` is a path to a .py file or the source text itself (dedented and written to a temporary
file). The job runs under the mpich wheel's mpiexec next to this Python (the `dist` extra; the
test is skipped when it is missing) as `mpiexec -n N python script args...`, and its
`subprocess.CompletedProcess` (text stdout and stderr) comes back.

Always bounded: past `timeout` seconds the whole job is stopped (SIGTERM to mpiexec, which stops
its ranks; then SIGKILL to anything of the job still alive) and the test FAILS, showing what every
rank printed so far: a hang in a collective is a bug, not a slow test. `check=True` also fails the test, with the output, when
the job exits non-zero.

`prefix_ranks=True` asks mpiexec to put "[rank] " before every output line (hydra's
-prepend-rank), for tests that parse each rank's lines; `per_rank_lines(text)` splits them.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest


def mpiexec_path() -> str:
    """The mpiexec of the mpich wheel (the `dist` extra), or skip the calling test."""
    pytest.importorskip("mpi4py", reason="the 'dist' extra (mpi4py, mpich) is not installed")
    path = Path(sys.executable).parent / "mpiexec"
    if not path.exists():
        pytest.skip("no mpiexec next to this Python: install the 'dist' extra (mpi4py, mpich)")
    return str(path)


def mpi_available() -> bool:
    """Whether the `dist` extra is installed (mpi4py, and the mpich wheel's mpiexec next to this Python)."""
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return False
    return (Path(sys.executable).parent / "mpiexec").exists()


needs_mpi = pytest.mark.skipif(not mpi_available(), reason="needs the dist extra (mpi4py, mpich)")


def rank_results(worker, n, out_dir, args, timeout, env=None) -> list:
    """Run the worker script on `n` ranks (bounded, `check=True`); each rank writes
    `out_dir/rank_<r>.json`: those dicts, in rank order."""
    run_mpi(str(worker), n, timeout=timeout, args=args, check=True, env=env)
    return [json.loads((Path(out_dir) / f"rank_{r}.json").read_text()) for r in range(n)]


def _script_file(script, folder) -> str:
    text = str(script)
    if "\n" not in text and text.endswith(".py"):
        if not Path(text).is_file():
            raise FileNotFoundError(text)
        return text
    path = Path(folder) / "mpi_script.py"
    path.write_text(textwrap.dedent(text))
    return str(path)


def run_mpi(script, n, timeout=60, args=(), *, check=False, env=None, prefix_ranks=False, cwd=None):
    """Run `script` (a .py path or source text) on `n` processes; see the module docstring."""
    mpiexec = mpiexec_path()
    with tempfile.TemporaryDirectory(prefix="mpi-test-") as folder:
        path = _script_file(script, folder)
        cmd = [mpiexec, "-n", str(n), *(["-prepend-rank"] if prefix_ranks else []),
               sys.executable, path, *map(str, args)]
        env = dict(env or {})
        if prefix_ranks:       # hydra prefixes each chunk it reads: buffered ranks write whole lines
            env["PYTHONUNBUFFERED"] = ""
        return run_job(cmd, timeout, check=check, env=env, cwd=cwd or folder)


def run_job(cmd, timeout=60, *, check=False, env=None, cwd=None):
    """Run a launcher command line (mpiexec, msrun, `minispore run`) with run_mpi's guarantees:
    bounded by `timeout` (the job is killed and the test fails with its output), optional check."""
    full_env = dict(os.environ, **(env or {}))
    if "PYTHONUNBUFFERED" not in (env or {}):
        full_env["PYTHONUNBUFFERED"] = "1"              # a killed job still shows what it printed
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=full_env, cwd=cwd, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        out, err = _stop_job(proc)
        pytest.fail(f"MPI job did not finish within {timeout} s (killed): {' '.join(cmd)}\n"
                    f"--- stdout (all ranks) ---\n{out}\n--- stderr (all ranks) ---\n{err}")
    result = subprocess.CompletedProcess(cmd, proc.returncode, out, err)
    if check and result.returncode != 0:
        pytest.fail(f"MPI job exited with status {result.returncode}: {' '.join(cmd)}\n"
                    f"--- stdout (all ranks) ---\n{out}\n--- stderr (all ranks) ---\n{err}")
    return result


def _descendants(pid: int) -> list[int]:
    """Every process below `pid` (Linux /proc). hydra's proxies put the ranks in process groups
    of their own, so killing mpiexec's group alone would leave ranks running."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), ()):
            found.append(child)
            todo.append(child)
    return found


def _stop_job(proc):
    """End a timed-out job and everything it started; return what it printed."""
    below = _descendants(proc.pid)
    proc.terminate()                                   # hydra's mpiexec stops its ranks on SIGTERM
    try:
        return proc.communicate(timeout=5)
    except subprocess.TimeoutExpired:
        pass
    finally:
        for pid in below + _descendants(proc.pid):      # whatever survived: SIGKILL
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    return proc.communicate()


def per_rank_lines(text) -> dict[int, list[str]]:
    """{rank: its lines} from output prefixed with "[rank] " (prefix_ranks=True or msrun)."""
    lines: dict[int, list[str]] = {}
    for line in text.splitlines():
        if line.startswith("[") and "] " in line:
            head, rest = line[1:].split("] ", 1)
            if head.isdigit():
                lines.setdefault(int(head), []).append(rest)
    return lines
