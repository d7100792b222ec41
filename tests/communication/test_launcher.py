"""msrun / `minispore run` (minispore/communication/launcher.py) and the rank-failure path
(runner.py, failure.py). Every job is bounded by the harness's timeout: a hang fails the test."""
import os
import re
import sys
import time
from pathlib import Path

import pytest

from minispore.common.errors import MissingExtraError
from minispore.communication import launcher

from mpi_harness import mpiexec_path, per_rank_lines, run_job, run_mpi

PY = sys.executable

_HELLO = """
import sys
from minispore.communication import init, get_rank, get_group_size
init()
print(f"hello from {get_rank()} of {get_group_size()} args={sys.argv[1:]} name={__name__}", flush=True)
"""

# rank 1 raises while rank 0 waits for it in a collective: without the abort, rank 0 waits forever
_RANK_1_RAISES = """
from mpi4py import MPI
from minispore.communication import init, get_rank
init()
if get_rank() == 1:
    raise ZeroDivisionError("rank one divides by zero")
MPI.COMM_WORLD.Barrier()
print("rank 0 passed the barrier", flush=True)
"""


def _script(tmp_path, text, name="job.py"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def _msrun(*args):
    return [PY, "-m", "minispore.communication.launcher", *args]


# ---------------------------------------------------------------------------------------------
# in-process: argument checks and finding mpiexec (no job started)
def test_mpiexec_is_the_wheels_beside_this_python():
    assert launcher.find_mpiexec() == mpiexec_path()


def test_missing_mpiexec_names_the_dist_extra(monkeypatch, tmp_path):
    from importlib import metadata

    def no_dist(name):
        raise metadata.PackageNotFoundError(name)
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    monkeypatch.setattr(metadata, "distribution", no_dist)
    with pytest.raises(MissingExtraError, match=r"minispore\[dist\]"):
        launcher.find_mpiexec()


def test_mpiexec_found_through_the_mpich_distribution(monkeypatch, tmp_path):
    # a Python outside the venv (no bin/mpiexec beside it): the mpich wheel's file list says where
    real = mpiexec_path()
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    assert os.path.samefile(launcher.find_mpiexec(), real)


@pytest.mark.parametrize("argv, message", [
    (["--worker_num=4", "--local_worker_num=2", "JOB"], "--local_worker_num equal to --worker_num"),
    (["--worker_num=0", "JOB"], "--worker_num >= 1"),
    (["--worker_num=2", "--node_rank=1", "JOB"], "--node_rank -1 or 0"),
    (["--worker_num=2", "--cluster_time_out=0", "JOB"], "--cluster_time_out > 0"),
    (["--worker_num=2", "missing_script.py"], "no such file"),
])
def test_msrun_rejects_bad_arguments_with_one_line(argv, message, tmp_path, capsys):
    job = _script(tmp_path, "print('never runs')\n")
    status = launcher.main([job if a == "JOB" else a for a in argv])
    err = capsys.readouterr().err
    assert status == 1
    assert err.startswith("msrun: error: For 'msrun'") and message in err
    assert "(at " not in err and err.count("\n") == 1


def test_msrun_join_takes_true_or_false(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        launcher.main(["--join=maybe", _script(tmp_path, "")])
    assert e.value.code == 2 and "expected True or False" in capsys.readouterr().err


def test_mpiexec_command_runs_the_runner_module():
    cmd = launcher.mpiexec_command(3, "train.py", ["--lr", "1"])
    assert cmd[:4] == [mpiexec_path(), "-n", "3", "-prepend-rank"]
    assert cmd[4:] == [PY, "-m", "minispore.communication.runner", "train.py", "--lr", "1"]
    assert "-prepend-rank" not in launcher.mpiexec_command(3, "train.py", prefix_ranks=False)


# ---------------------------------------------------------------------------------------------
# real jobs
def test_msrun_two_workers_print_to_the_console_with_rank_prefixes(tmp_path):
    result = run_job(_msrun("--worker_num=2", "--local_worker_num=2", _script(tmp_path, _HELLO),
                            "--epochs", "1"), timeout=60, check=True, cwd=tmp_path)
    lines = per_rank_lines(result.stdout)
    assert lines == {r: [f"hello from {r} of 2 args=['--epochs', '1'] name=__main__"] for r in (0, 1)}


def test_msrun_log_dir_writes_worker_logs(tmp_path):
    msrun = Path(PY).parent / "msrun"                         # the console script of setup.cfg
    assert msrun.exists(), "reinstall minispore (pip install -e .) to get the msrun console script"
    logs = tmp_path / "logs"
    result = run_job([str(msrun), "--worker_num=2", "--local_worker_num=2", f"--log_dir={logs}",
                      "--master_port=9000", _script(tmp_path, _HELLO + _MS_ENV)], timeout=60, check=True,
                     cwd=tmp_path)
    assert "hello" not in result.stdout + result.stderr        # the ranks wrote to their logs
    assert sorted(p.name for p in logs.iterdir()) == ["worker_0.log", "worker_1.log"]
    for r in (0, 1):
        text = (logs / f"worker_{r}.log").read_text().splitlines()
        assert text == [f"hello from {r} of 2 args=[] name=__main__", "MS_WORKER_NUM=2 MS_SCHED_PORT=9000"]


_MS_ENV = """
import os
print(f"MS_WORKER_NUM={os.environ['MS_WORKER_NUM']} MS_SCHED_PORT={os.environ['MS_SCHED_PORT']}", flush=True)
"""


def test_minispore_run_is_an_alias(tmp_path):
    result = run_job([PY, "-m", "minispore", "run", "-n", "2", _script(tmp_path, _HELLO), "--lr", "0.1"],
                     timeout=60, check=True, cwd=tmp_path)
    lines = per_rank_lines(result.stdout)
    assert lines == {r: [f"hello from {r} of 2 args=['--lr', '0.1'] name=__main__"] for r in (0, 1)}


def test_a_failing_rank_ends_the_msrun_job_and_is_named(tmp_path):
    job = _script(tmp_path, _RANK_1_RAISES)
    result = run_job(_msrun("--worker_num=2", "--local_worker_num=2", job), timeout=60, cwd=tmp_path)
    assert result.returncode != 0
    assert "rank 0 passed the barrier" not in result.stdout
    err = per_rank_lines(result.stderr)[1]
    # the traceback starts at the script (not the runner), every line tagged by the launcher
    assert err[0] == "Traceback (most recent call last):"
    assert err[1].startswith(f'  File "{job}", line 6')
    assert "ZeroDivisionError: rank one divides by zero" in err
    assert "minispore: rank 1 raised ZeroDivisionError; aborting the job (MPI_Abort)" in err
    assert ("msrun: rank 1 failed: ZeroDivisionError: rank one divides by zero (traceback above); "
            "the job was aborted") in result.stderr


def test_a_failing_rank_with_log_dir_points_at_its_log(tmp_path):
    logs = tmp_path / "logs"
    result = run_job(_msrun("--worker_num=2", f"--log_dir={logs}", _script(tmp_path, _RANK_1_RAISES)),
                     timeout=60, cwd=tmp_path)
    assert result.returncode != 0
    assert f"msrun: rank 1 failed: ZeroDivisionError: rank one divides by zero (see {logs}/worker_1.log)" \
        in result.stderr
    log = (logs / "worker_1.log").read_text()
    assert "[rank 1] ZeroDivisionError: rank one divides by zero" in log     # no launcher prefix here


def test_a_rank_exiting_non_zero_ends_the_job_with_its_status(tmp_path):
    job = _script(tmp_path, """
import sys
from mpi4py import MPI
if MPI.COMM_WORLD.Get_rank() == 0:
    sys.exit(3)
MPI.COMM_WORLD.Barrier()
""")
    result = run_job(_msrun("--worker_num=2", job), timeout=60, cwd=tmp_path)
    assert result.returncode == 3
    assert "msrun: rank 0 failed: exited with status 3" in result.stderr


def test_a_failing_rank_under_plain_mpiexec_aborts_after_init():
    # no msrun: communication.init() installs the same hook
    result = run_mpi(_RANK_1_RAISES, 2, timeout=60)
    assert result.returncode != 0
    assert "rank 0 passed the barrier" not in result.stdout
    assert "[rank 1] ZeroDivisionError: rank one divides by zero" in result.stderr
    assert "[rank 1] minispore: rank 1 raised ZeroDivisionError; aborting the job (MPI_Abort)" in result.stderr


def test_cluster_time_out_names_a_worker_that_never_started(tmp_path):
    # rank 1's interpreter stalls before the runner starts (a sitecustomize module runs first)
    stall = tmp_path / "stall"
    stall.mkdir()
    (stall / "sitecustomize.py").write_text(
        "import os, time\nif os.environ.get('PMI_RANK') == '1':\n    time.sleep(120)\n")
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(stall), os.environ.get("PYTHONPATH")]))}
    result = run_job(_msrun("--worker_num=2", "--cluster_time_out=2", _script(tmp_path, _HELLO)),
                     timeout=60, env=env, cwd=tmp_path)
    assert result.returncode == 1
    # rank 1 never starts; rank 0 may or may not have started in 2 s on a busy machine
    assert re.search(r"msrun: the world did not form within --cluster_time_out=2 s: rank\(s\) (0, )?1 "
                     r"never started; the job was stopped", result.stderr), result.stderr
    assert "hello" not in result.stdout


def test_msrun_without_join_returns_while_the_job_runs(tmp_path, capsys):
    # the workers wait for a "go" file msrun's caller creates only after msrun returned: had msrun
    # waited for them (join), it would never return
    logs, go = tmp_path / "logs", tmp_path / "go"
    job = _script(tmp_path, f"""
import os, time
from minispore.communication import init, get_rank
init()
deadline = time.monotonic() + 60
while not os.path.exists({str(go)!r}) and time.monotonic() < deadline:
    time.sleep(0.05)
open({str(tmp_path / "done")!r} + str(get_rank()), "w").close()
""")
    status = launcher.main(["--worker_num=2", "--join=False", f"--log_dir={logs}", job])
    assert status == 0 and "not waiting (--join=False)" in capsys.readouterr().err
    assert not any((tmp_path / f"done{r}").exists() for r in (0, 1))
    go.touch()
    deadline = time.monotonic() + 60
    while not all((tmp_path / f"done{r}").exists() for r in (0, 1)):
        assert time.monotonic() < deadline, "the detached workers did not finish within 60 s"
        time.sleep(0.1)
