"""Fault recovery (issue 16, item 6): complete checkpoint sets, msrun --auto-restart, a rank
killed with SIGKILL mid-run, bit-identical resume, a 4 -> 2 resharded resume.

Oracles: hand-built sets whose damage is known (the selection tests); an uninterrupted 4-rank
run of the same worker (tests/parallel/recovery_worker.py) for the killed-and-restarted one (the
same world size: the same arithmetic, so equality is bit for bit, losses and final state); the
compile-cache counters of each start; the same uninterrupted run's global losses for the 2-rank
resume (float64, 1e-12: the mean of 2 half-batch gradients instead of 4 quarter-batch ones).

The MPI part starts three jobs in one module fixture (each job start costs seconds on 2 cores):
the uninterrupted 4-rank run, the 4-rank run under `msrun --auto-restart=1` whose rank 2 kills
itself in the middle of writing step 6's set (so that set has shards but no manifest), and the
2-rank resume from a copy of the uninterrupted run's sets with step 6's damaged. A fourth, tiny
job (no training) checks that a killed rank ends a job blocked in a barrier and is named, and that
--auto-restart gives up after N restarts with a non-zero status.
"""
import json
import os
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from minispore.common.errors import OpTypeError, OpValueError
from minispore.communication import launcher
from minispore.parallel.checkpoint_set import (MANIFEST_FILE, CheckpointSetWriter, IncompleteCheckpointSetError,
                                               latest_complete_set, list_checkpoint_sets, prune, rank_file_name,
                                               scan_checkpoint_sets, set_dir, verify_checkpoint_set,
                                               write_manifest)

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent / "communication"))
from mpi_harness import mpi_available, needs_mpi, run_job, run_mpi  # noqa: E402

WORKER = str(HERE / "recovery_worker.py")
PY = sys.executable
# one BLAS thread per rank: the split of a product among threads is not fixed when ranks compete
# for 2 cores (tests/parallel/test_resharded_resume.py measured a last-bit difference without it)
# and no hand-written C kernels: the compile cache keeps its kernels per rank beside the graphs
# (compile_cache_path/rank_<r>/kernel_meta), so the first start of the cached job would build
# them once per rank (tens of seconds on 2 cores); the NumPy kernels give every run the same path
ENV = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MINISPORE_NATIVE_KERNELS": "0"}
STEPS, EVERY, KILL_RANK, KILL_STEP = 8, 2, 2, 6


# ---------------------------------------------------------------------------------------------
# complete-set selection, on hand-made sets (no MPI)
def make_set(run_dir, step, world=4, strategy=True, state=None):
    """A set of `world` fake rank files (+ a strategy file) with its manifest, as commit writes it."""
    path = set_dir(run_dir, step)
    ranks, files = {}, {}
    for r in range(world):
        rel = rank_file_name(r)
        full = os.path.join(path, rel)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        Path(full).write_bytes(f"rank {r} of step {step}".encode() * 10)
        ranks[r] = rel
    rels = list(ranks.values())
    if strategy:
        Path(path, "strategy.json").write_text('{"parallel_layout_item": {}}')
        rels.append("strategy.json")
    import hashlib
    for rel in rels:
        data = Path(path, rel).read_bytes()
        files[rel] = (hashlib.sha256(data).hexdigest(), len(data))
    write_manifest(path, step, world, ranks, files, "strategy.json" if strategy else None,
                   state or {"sampler": {"batches_drawn": step}})
    return path


def test_the_newest_complete_set_is_chosen(tmp_path):
    for step in (2, 4, 6):
        make_set(tmp_path, step)
    found = latest_complete_set(tmp_path)
    assert found.step == 6 and found.world_size == 4
    assert found.rank_files == tuple(str(Path(tmp_path, f"step_00000006/rank_{r}/net{r}.ckpt")) for r in range(4))
    assert found.strategy_file.endswith("step_00000006/strategy.json")
    assert found.state == {"sampler": {"batches_drawn": 6}}
    assert [s for s, _ in list_checkpoint_sets(tmp_path)] == [2, 4, 6]


def test_a_set_without_its_manifest_is_never_chosen(tmp_path):
    make_set(tmp_path, 2)
    os.remove(os.path.join(make_set(tmp_path, 4), MANIFEST_FILE))
    assert latest_complete_set(tmp_path).step == 2
    (step, _, why), (older, _, ok) = scan_checkpoint_sets(tmp_path)
    assert step == 4 and "has no manifest.json" in why and older == 2 and ok.step == 2


def test_a_missing_shard_makes_the_set_incomplete(tmp_path):
    make_set(tmp_path, 2)
    os.remove(os.path.join(make_set(tmp_path, 4), rank_file_name(3)))
    assert latest_complete_set(tmp_path).step == 2
    with pytest.raises(IncompleteCheckpointSetError, match=r"lacks 'rank_3/net3.ckpt'.*a shard is missing"):
        verify_checkpoint_set(set_dir(tmp_path, 4))


def test_a_corrupt_shard_fails_its_hash(tmp_path):
    make_set(tmp_path, 2)
    shard = Path(make_set(tmp_path, 4), rank_file_name(1))
    data = bytearray(shard.read_bytes())
    data[7] ^= 0x01                                   # one flipped bit, same size
    shard.write_bytes(bytes(data))
    with pytest.raises(IncompleteCheckpointSetError, match=r"'rank_1/net1.ckpt' whose sha256 .* differs"):
        verify_checkpoint_set(set_dir(tmp_path, 4))
    assert latest_complete_set(tmp_path).step == 2
    shard.write_bytes(bytes(data[:-3]))               # truncated
    with pytest.raises(IncompleteCheckpointSetError, match="truncated or replaced"):
        verify_checkpoint_set(set_dir(tmp_path, 4))


def test_a_corrupt_strategy_file_fails_too(tmp_path):
    make_set(tmp_path, 2)
    Path(make_set(tmp_path, 4), "strategy.json").write_text('{"parallel_layout_item": {"x": 1}}')
    assert latest_complete_set(tmp_path).step == 2


def test_newer_incomplete_sets_are_passed_over_for_an_older_complete_one(tmp_path):
    make_set(tmp_path, 2)
    make_set(tmp_path, 4)
    os.remove(os.path.join(make_set(tmp_path, 6), MANIFEST_FILE))         # job died before the commit
    os.remove(os.path.join(make_set(tmp_path, 8), rank_file_name(0)))     # a shard lost
    os.makedirs(set_dir(tmp_path, 10))                                    # only just begun
    scan = scan_checkpoint_sets(tmp_path)
    assert [s for s, _, _ in scan] == [10, 8, 6, 4]                       # stops at the first complete
    assert latest_complete_set(tmp_path).step == 4
    assert latest_complete_set(tmp_path, max_step=3).step == 2


def test_an_edited_manifest_is_refused(tmp_path):
    path = make_set(tmp_path, 4)
    manifest = json.loads(Path(path, MANIFEST_FILE).read_text())
    manifest["state"]["sampler"]["batches_drawn"] = 5                      # resume at another data position
    Path(path, MANIFEST_FILE).write_text(json.dumps(manifest))
    with pytest.raises(IncompleteCheckpointSetError, match="does not match its manifest_sha256"):
        verify_checkpoint_set(path)
    make_set(tmp_path, 6)
    Path(set_dir(tmp_path, 6), MANIFEST_FILE).write_text("{not json")
    with pytest.raises(IncompleteCheckpointSetError, match="unreadable manifest.json"):
        verify_checkpoint_set(set_dir(tmp_path, 6))
    assert latest_complete_set(tmp_path) is None


def test_a_manifest_must_name_every_rank_and_stay_inside_the_set(tmp_path):
    path = make_set(tmp_path, 2, world=2)
    write_manifest(path, 2, 3, {0: rank_file_name(0), 1: rank_file_name(1)},
                   {rank_file_name(r): ("0" * 64, 1) for r in (0, 1)}, None, {})
    with pytest.raises(IncompleteCheckpointSetError, match=r"every rank of its world of 3 \(missing ranks \[2\]"):
        verify_checkpoint_set(path)
    outside = tmp_path / "elsewhere.ckpt"
    outside.write_bytes(b"x")
    write_manifest(path, 2, 1, {0: "../elsewhere.ckpt"}, {"../elsewhere.ckpt": ("0" * 64, 1)}, None, {})
    with pytest.raises(IncompleteCheckpointSetError, match="not a relative path inside the set"):
        verify_checkpoint_set(path)
    write_manifest(path, 3, 2, {0: rank_file_name(0), 1: rank_file_name(1)},
                   {rank_file_name(r): ("0" * 64, 1) for r in (0, 1)}, None, {})
    with pytest.raises(IncompleteCheckpointSetError, match="records step 3, but its directory is named for step 2"):
        verify_checkpoint_set(path)


def test_prune_keeps_the_newest_complete_sets(tmp_path):
    for step in (2, 4, 6, 8):
        make_set(tmp_path, step)
    os.remove(os.path.join(set_dir(tmp_path, 4), MANIFEST_FILE))
    make_set(tmp_path, 10)
    os.remove(os.path.join(set_dir(tmp_path, 10), MANIFEST_FILE))    # newer than every complete one: kept
    removed = prune(tmp_path, keep=2)
    assert sorted(os.path.basename(p) for p in removed) == ["step_00000002", "step_00000004"]
    assert [s for s, _ in list_checkpoint_sets(tmp_path)] == [6, 8, 10]
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".trash")]


def test_rewriting_a_step_removes_the_old_set_first(tmp_path):
    old = make_set(tmp_path, 4)
    writer = CheckpointSetWriter(tmp_path, 4)         # a world of one: no MPI needed
    assert not os.path.exists(os.path.join(old, MANIFEST_FILE))      # the old commit marker went first
    writer.write_rank_files({"w": np.arange(3.0)})
    writer.commit({"note": "new"})
    found = verify_checkpoint_set(old)
    assert found.world_size == 1 and found.state == {"note": "new"} and found.strategy_file is None


def test_single_process_resume_continues_bit_for_bit(tmp_path):
    import minispore as ms
    from minispore.common import context
    from minispore.parallel import recovery

    def build():
        ms.set_seed(3)
        net = ms.nn.SequentialCell(ms.nn.Dense(4, 8, dtype=ms.float64), ms.nn.Tanh(),
                                   ms.nn.Dense(8, 1, dtype=ms.float64))
        opt = ms.nn.Adam(net.trainable_params(), learning_rate=1e-2)
        grad = ms.value_and_grad(lambda x, y: ms.ops.mean((net(x) - y) ** 2), None, opt.parameters)
        return net, opt, grad

    def batch(k):
        g = np.random.default_rng(100 + k)
        return ms.Tensor(g.standard_normal((6, 4))), ms.Tensor(g.standard_normal((6, 1)))

    def train(net, opt, grad, steps, run_dir=None):
        losses = []
        for k in steps:
            # a random draw from the global RNG each step: the RNG must travel with the set
            noise = float(context.rng().standard_normal())
            loss, g = grad(*batch(k))
            opt(g)
            losses.append(float(loss.asnumpy()) + noise)
            if run_dir is not None and (k + 1) % 2 == 0:
                recovery.save_training_set(run_dir, k + 1, net, opt, state={"next": k + 1}, keep=2)
        return losses

    ms.set_seed(9)
    reference = train(*build(), range(6))
    ms.set_seed(9)
    net, opt, grad = build()
    train(net, opt, grad, range(4), tmp_path)       # "dies" after step 4 (sets 2 and 4 written)
    assert [s for s, _ in list_checkpoint_sets(tmp_path)] == [2, 4]
    ms.set_seed(12345)                              # another process: other weights, other RNG
    net2, opt2, grad2 = build()
    point = recovery.resume_training(tmp_path, net2, opt2)
    assert (point.step, point.state, point.resharded, point.saved_world_size) == (4, {"next": 4}, False, 1)
    assert train(net2, opt2, grad2, range(point.step, 6)) == reference[4:]


def test_resume_without_any_set_returns_none(tmp_path):
    import minispore as ms
    from minispore.parallel import recovery
    assert recovery.resume_training(tmp_path, ms.nn.Dense(2, 2)) is None


def test_bad_arguments_name_the_function(tmp_path):
    import minispore as ms
    from minispore.parallel import recovery
    with pytest.raises(OpValueError, match="For 'CheckpointSetWriter', expected 'step' as an int >= 0"):
        recovery.save_training_set(tmp_path, -1, ms.nn.Dense(2, 2))
    with pytest.raises(OpTypeError, match="For 'resume_training', expected 'run_dir' to be a path"):
        recovery.resume_training(3, ms.nn.Dense(2, 2))
    writer = CheckpointSetWriter(tmp_path, 2)
    with pytest.raises(OpValueError, match="write_rank_files before commit"):
        writer.commit()
    writer.write_rank_files({"w": np.zeros(2)})
    with pytest.raises(OpValueError, match="'keep' as None or an int >= 1"):
        writer.commit(keep=0)
    with pytest.raises(OpTypeError, match="'state' to be JSON-compatible"):
        writer.commit(state={"f": object()})


# ---------------------------------------------------------------------------------------------
# msrun's side, in process
def test_mpiexec_reports_of_a_killed_process_are_read():
    report = launcher.LauncherReport()
    for line in ["[0] step 1", "", "=" * 83, "=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES",
                 "=   RANK 2 PID 4242 RUNNING AT host", "=   KILLED BY SIGNAL: 9 (Killed)", "=" * 83]:
        report.feed(line)
    assert report.failed({}) == [(2, 4242, "killed by signal 9 (SIGKILL)")]
    older = launcher.LauncherReport()               # MPICH 3.x: no rank, the signal in the exit string
    for line in ["=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES", "=   PID 777 RUNNING AT host",
                 "=   EXIT CODE: 9", "YOUR APPLICATION TERMINATED WITH THE EXIT STRING: Killed (signal 9)"]:
        older.feed(line)
    assert older.failed({777: 1}) == [(1, 777, "killed by signal 9 (SIGKILL)")]
    exited = launcher.LauncherReport()
    for line in ["=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES", "=   RANK 0 PID 5 RUNNING AT h",
                 "=   EXIT CODE: 3"]:
        exited.feed(line)
    assert exited.failed({}) == [(0, 5, "exited with status 3")]


def test_dead_ranks_are_processes_gone_without_an_exit_marker(tmp_path):
    import subprocess
    gone, finished, raised = (subprocess.Popen([PY, "-c", "pass"]) for _ in range(3))
    for p in (gone, finished, raised):
        p.wait()
    for rank, pid in enumerate([os.getpid(), gone.pid, finished.pid, raised.pid]):
        (tmp_path / f"rank_{rank}.pid").write_text(f"{pid}\n")
    (tmp_path / "rank_2.exited").touch()                  # ended normally
    (tmp_path / "rank_3.failed").write_text("ValueError: x\n")   # reported its exception
    assert launcher.dead_ranks(str(tmp_path)) == [(1, gone.pid)]


def test_a_rank_records_its_pid_and_a_normal_exit(tmp_path):
    import subprocess
    # failure.py alone (its top level imports only the standard library): no minispore import
    failure_py = str(Path(launcher.__file__).with_name("failure.py"))
    code = ("import importlib.util, os, sys\n"
            f"spec = importlib.util.spec_from_file_location('failure', {failure_py!r})\n"
            "failure = importlib.util.module_from_spec(spec)\nspec.loader.exec_module(failure)\n"
            "failure.record_rank_process(int(sys.argv[1]))\nif sys.argv[2] == 'kill':\n"
            "    os.kill(os.getpid(), 9)\n")
    env = dict(os.environ, MINISPORE_FAILURE_DIR=str(tmp_path))
    for rank, how in ((0, "exit"), (1, "kill")):
        subprocess.run([PY, "-c", code, str(rank), how], env=env, timeout=60)
    pids = sorted(p.name for p in tmp_path.iterdir())
    assert pids == ["rank_0.exited", "rank_0.pid", "rank_1.pid"]        # the killed one left no marker


@pytest.mark.parametrize("argv, message", [
    (["--worker_num=2", "--auto-restart=-1", "JOB"], "--auto-restart >= 0"),
    (["--worker_num=2", "--auto_restart=1", "--join=False", "JOB"], "--join=True with --auto-restart"),
])
def test_auto_restart_arguments_are_checked(argv, message, tmp_path, capsys):
    job = tmp_path / "job.py"
    job.write_text("print('never runs')\n")
    assert launcher.main([str(job) if a == "JOB" else a for a in argv]) == 1
    err = capsys.readouterr().err
    assert err.startswith("msrun: error: For 'msrun'") and message in err


# ---------------------------------------------------------------------------------------------
# real jobs
_KILLS_RANK_1 = """
import os, signal, sys
from mpi4py import MPI
comm = MPI.COMM_WORLD
print(f"attempt {os.environ.get('MINISPORE_RESTART_ATTEMPT')}", flush=True)
if comm.Get_rank() == 1:
    os.kill(os.getpid(), signal.SIGKILL)        # no Python hook runs
comm.Barrier()                                  # rank 0 waits here for a rank that is gone
print("rank 0 passed the barrier", flush=True)
"""


@needs_mpi
def test_a_killed_rank_stops_the_job_is_named_and_restarts_give_up(tmp_path):
    job = tmp_path / "job.py"
    job.write_text(_KILLS_RANK_1)
    result = run_job([PY, "-m", "minispore", "run", "-n", "2", "--auto-restart", "1", str(job)],
                     timeout=120, cwd=tmp_path)
    assert result.returncode != 0
    assert "rank 0 passed the barrier" not in result.stdout
    assert result.stderr.count("msrun: rank 1 failed: killed by signal 9 (SIGKILL) (pid ") == 2, result.stderr
    assert "msrun: restarting the job (restart 1 of 1)" in result.stderr
    assert "msrun: the job failed 2 times (--auto-restart=1); giving up" in result.stderr
    assert "[0] attempt 0" in result.stdout and "[0] attempt 1" in result.stdout


def _results(out_dir, attempt, world):
    return [json.loads(Path(out_dir, f"attempt{attempt}_rank{r}.json").read_text()) for r in range(world)]


def _losses(res):
    return {int(k): v for k, v in res["losses"].items()}


@pytest.fixture(scope="module")
def jobs(tmp_path_factory):
    if not mpi_available():
        pytest.skip("needs the dist extra (mpi4py, mpich)")
    import time
    clock = time.monotonic()
    base = tmp_path_factory.mktemp("recovery")
    ref_run, ref_out = base / "ref_run", base / "ref_out"
    ref_out.mkdir()
    run_mpi(WORKER, 4, timeout=240, env=ENV, args=(ref_run, ref_out, "--steps", STEPS), check=True)
    print(f"\nuninterrupted 4-rank run: {time.monotonic() - clock:.1f} s")
    clock = time.monotonic()

    run, out, cache = base / "run", base / "out", base / "cache"
    out.mkdir()
    killed = run_job([PY, "-m", "minispore.communication.launcher", "--worker_num=4", "--auto-restart=1",
                      WORKER, str(run), str(out), "--steps", str(STEPS), "--cache", str(cache),
                      "--kill-rank", str(KILL_RANK), "--kill-step", str(KILL_STEP)],
                     timeout=240, env=ENV, cwd=base)
    print(f"killed + restarted 4-rank run: {time.monotonic() - clock:.1f} s")
    clock = time.monotonic()

    # 4 -> 2: the uninterrupted run's sets up to step 6, step 6's rank-1 shard damaged
    small, small_out = base / "small_run", base / "small_out"
    small_out.mkdir()
    small.mkdir()
    for s in (4, 6):
        shutil.copytree(set_dir(ref_run, s), set_dir(small, s))
    shard = Path(set_dir(small, 6), rank_file_name(1))
    os.chmod(shard, 0o600)
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0x40
    shard.write_bytes(bytes(data))
    run_mpi(WORKER, 2, timeout=150, env=ENV, args=(small, small_out, "--steps", STEPS), check=True)
    print(f"2-rank resharded resume: {time.monotonic() - clock:.1f} s")
    return {"ref": _results(ref_out, 0, 4), "killed": killed, "attempt0": out, "run": run,
            "resumed": _results(out, 1, 4), "ref_run": ref_run, "small": _results(small_out, 0, 2),
            "killed_json": json.loads(Path(out, "killed.json").read_text())}


@needs_mpi
def test_the_launcher_names_the_killed_rank_and_restarts(jobs):
    result = jobs["killed"]
    assert result.returncode == 0, result.stderr
    assert f"msrun: rank {KILL_RANK} failed: killed by signal 9 (SIGKILL) (pid " in result.stderr
    assert "msrun: restarting the job (restart 1 of 1)" in result.stderr
    assert jobs["killed_json"]["rank"] == KILL_RANK and jobs["killed_json"]["step"] == KILL_STEP


@needs_mpi
def test_the_restart_resumes_from_the_latest_complete_set(jobs):
    for res in jobs["resumed"]:
        assert res["attempt"] == 1 and res["resumed_from"] == KILL_STEP - EVERY and res["resharded"] is False
        # the set of the kill step has shards but no manifest: passed over
        assert [s for s, _ in res["skipped"]] == [KILL_STEP]
        assert "has no manifest.json" in res["skipped"][0][1]
    # the restarted job wrote step 6 again, committed, and pruned to the newest three
    assert [s for s, _ in list_checkpoint_sets(jobs["run"])] == [4, 6, 8]
    assert latest_complete_set(jobs["run"]).step == STEPS


@needs_mpi
def test_resumed_losses_and_state_are_bit_identical(jobs):
    first = _results(jobs["attempt0"], 0, 4)
    for r in range(4):
        ref = _losses(jobs["ref"][r])
        assert sorted(ref) == list(range(1, STEPS + 1))
        before = _losses(first[r])
        assert sorted(before) == list(range(1, KILL_STEP + 1))
        assert all(before[k] == ref[k] for k in before)             # the first start, up to the kill
        after = _losses(jobs["resumed"][r])
        assert sorted(after) == list(range(KILL_STEP - EVERY + 1, STEPS + 1))
        assert all(after[k] == ref[k] for k in after), (after, ref)  # bit for bit
        assert jobs["resumed"][r]["final_state_sha256"] == jobs["ref"][r]["final_state_sha256"]
    # and the final sets' files themselves: the same bytes (parameters, moments, RNG)
    a = json.loads(Path(set_dir(jobs["run"], STEPS), MANIFEST_FILE).read_text())["files"]
    b = json.loads(Path(set_dir(jobs["ref_run"], STEPS), MANIFEST_FILE).read_text())["files"]
    assert a == b


@needs_mpi
def test_restarted_ranks_load_the_compiled_step_from_the_cache(jobs):
    first = _results(jobs["attempt0"], 0, 4)
    for r in range(4):
        assert first[r]["cache"]["captures"] == 1 and first[r]["cache"]["stores"] == 1, first[r]["cache"]
        stats = jobs["resumed"][r]["cache"]
        assert stats["hits"] == 1 and stats["captures"] == 0, stats


@needs_mpi
def test_four_ranks_resume_on_two_through_resharding(jobs):
    ref = [_losses(res) for res in jobs["ref"]]
    small = [_losses(res) for res in jobs["small"]]
    for res in jobs["small"]:
        assert res["resumed_from"] == 4 and res["resharded"] is True and res["world"] == 2
        assert [s for s, _ in res["skipped"]] == [6] and "sha256" in res["skipped"][0][1]
    for step in range(5, STEPS + 1):
        want = np.mean([ref[r][step] for r in range(4)])              # global loss: mean of equal shards
        got = np.mean([small[r][step] for r in range(2)])
        assert abs(got - want) <= 1e-12 * abs(want), (step, got, want)
