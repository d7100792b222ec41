"""The reliability report (bench/bench_reliability.py, issue 12) and the harness behind it.

Two kinds of tests:

* the harness itself: each failure category is produced on purpose (a trainer that ignores
  SIGTERM, one that prints a traceback, one that leaves an unloadable checkpoint, a reference run
  with one flipped bit, a loader that changes a weight or fails half-way) and must be classified
  as that category - a harness that reports "all clean" for everything would fail here; the
  mutants must be reproducible and must really change the checkpoint;
* the report: a quick run (one trial of each kill/signal kind, 60 mutants, 300 op calls) in the
  fast suite, and the full one (20 trials of each kind, 2,000 mutants, 5,000 op calls) under
  `--runslow`; both must meet the target - no raw traceback, hang, wrong result or lost run.
"""
import hashlib
import json
import os
import stat
import sys
import textwrap

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from bench.reliability import load_worker, mutants, outcomes as oc, signal_trials   # noqa: E402
from bench.reliability.report import run_report                                     # noqa: E402
from bench.reliability.train_runs import final_state                                 # noqa: E402

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals, FIFOs and symlinks")


@pytest.fixture(scope="module")
def base_run(tmp_path_factory):
    """A real run written by the trainer (in-process: cheaper than the CLI)."""
    from minispore.llm import LlamaConfig
    from minispore.llm.trainer import TrainConfig, train
    out = tmp_path_factory.mktemp("base") / "run"
    train(LlamaConfig(vocab_size=65, dim=32, n_layers=1, n_heads=2, max_seq_len=16, dropout=0.1, multiple_of=16),
          TrainConfig(out_dir=str(out), max_iters=6, lr_decay_iters=6, batch_size=4, warmup_iters=1, eval_interval=100,
                      eval_iters=1, final_eval_iters=1, ckpt_interval=3, progress=False, plot=False))
    return str(out)


def tree(path) -> dict:
    """{relative path: what is there} - bytes' sha256, a link target, or the file type - never
    opening a FIFO or reading a sparse file of gigabytes."""
    out = {}
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            p = os.path.join(root, name)
            st = os.lstat(p)
            rel = os.path.relpath(p, path)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(p))
            elif stat.S_ISREG(st.st_mode):
                if st.st_size > 64 << 20:
                    out[rel] = ("sparse", st.st_size)
                else:
                    out[rel] = ("file", hashlib.sha256(open(p, "rb").read()).hexdigest())
            else:
                out[rel] = ("node", stat.S_IFMT(st.st_mode))
    return out


# ------------------------------------------------------------------------------------------------
# the mutants
def test_the_schedule_has_exactly_n_mutants_in_the_stated_shares():
    for n in (7, 100, 2000, 2001):
        kinds = mutants.schedule(n)
        assert len(kinds) == n
        for kind, share in mutants.KIND_SHARES.items():
            assert abs(kinds.count(kind) - n * share) < 1, (n, kind)
    first = mutants.schedule(2000)[:len(mutants.KIND_SHARES)]
    assert sorted(first) == sorted(mutants.KIND_SHARES)          # a short run already sees every kind


def test_every_mutant_changes_the_checkpoint_and_is_reproducible(base_run, tmp_path):
    outside = tmp_path / "outside"
    (outside / "pristine").mkdir(parents=True)
    ckpt = mutants.ckpt_dir(base_run)
    for name in (mutants.MODEL, mutants.STATE):
        (outside / "pristine" / name).write_bytes(open(os.path.join(ckpt, name), "rb").read())
    (outside / "pristine" / mutants.LATEST).write_bytes(open(os.path.join(base_run, "latest"), "rb").read())
    pristine = tmp_path / "pristine-run"
    mutants.copy_run(base_run, str(pristine))
    original = tree(pristine)
    kinds = mutants.schedule(160)
    for index in range(0, 160, 3):
        a, b = tmp_path / "a", tmp_path / "b"
        made = []
        for d in (a, b):
            mutants.copy_run(base_run, str(d))
            made.append(mutants.make_mutant(index, kinds[index], 7, str(d), str(outside)))
        assert made[0] == made[1]
        assert tree(a) == tree(b), made[0]                       # same seed and index: same mutant
        assert tree(a) != original, made[0]                      # and it changed something
        assert made[0].path in mutants.PATHS_FOR[kinds[index]]


def test_a_resigned_hostile_header_passes_the_recorded_sha256(base_run, tmp_path):
    """Re-signing is what lets a hostile header reach the parser: the sha256 in state.json must
    then be the sha256 of the new weights file."""
    outside = tmp_path / "outside"
    (outside / "pristine").mkdir(parents=True)
    run = tmp_path / "run"
    kinds = mutants.schedule(400)
    for index in [i for i, k in enumerate(kinds) if k == "hostile safetensors header"][:20]:
        mutants.copy_run(base_run, str(run))
        m = mutants.make_mutant(index, kinds[index], 3, str(run), str(outside))
        ckpt = mutants.ckpt_dir(str(run))
        state = json.load(open(os.path.join(ckpt, mutants.STATE)))
        digest = hashlib.sha256(open(os.path.join(ckpt, mutants.MODEL), "rb").read()).hexdigest()
        assert (state["model_sha256"] == digest) == m.what.endswith("re-signed"), m.what
        if "state_sha256" in state:          # format 2: state.json's checksum of itself, as documented,
            body = {k: v for k, v in state.items() if k != "state_sha256"}      # holds either way
            canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=True)
            assert state["state_sha256"] == hashlib.sha256(canonical.encode("ascii")).hexdigest(), m.what


# ------------------------------------------------------------------------------------------------
# the checkpoint-load classifier, with the loading path replaced by one that misbehaves on purpose
@pytest.fixture
def loader(base_run, tmp_path):
    return load_worker.Loader(base_run, str(tmp_path / "scratch"), seed=0)


def _first(kind, path):
    kinds = mutants.schedule(400)
    return next(i for i, k in enumerate(kinds) if k == kind
                and mutants.PATHS_FOR[k][i % len(mutants.PATHS_FOR[k])] == path)


def test_the_pristine_checkpoint_loads_as_ok_through_every_path(loader, monkeypatch):
    # a "mutation" that changes nothing: the classifier must see every value equal to the original
    monkeypatch.setattr(mutants, "make_mutant", lambda index, kind, seed, run_dir, outside:
                        mutants.Mutant(index, kind, "nothing", mutants.PATHS_FOR[kind][index % 3]))
    for index in range(3):
        r = loader.run_one(index, "file system")
        assert r["outcome"] == oc.OK, r


def test_a_load_that_returns_a_changed_weight_is_a_wrong_result(loader, monkeypatch):
    real = loader._load

    def corrupting(path):
        got = real(path)
        p = loader.params[0]
        data = p.asnumpy().copy()
        data.reshape(-1)[0] += 1.0
        from minispore.common.tensor import Tensor
        p.set_data(Tensor(data))
        return got

    monkeypatch.setattr(mutants, "make_mutant", lambda index, kind, seed, run_dir, outside:
                        mutants.Mutant(index, kind, "nothing", "manager"))
    monkeypatch.setattr(loader, "_load", corrupting)
    r = loader.run_one(0, "file system")
    assert r["outcome"] == oc.WRONG and "1 parameters differ" in r["detail"], r


def test_a_failed_load_that_changed_the_model_is_a_wrong_result(loader, monkeypatch):
    from minispore.common.tensor import Tensor
    from minispore.train.serialization import CheckpointError

    def half_way(path):
        loader.params[0].set_data(Tensor(np.ones(loader.params[0].shape, np.float32)))
        raise CheckpointError("load", "x", "is damaged")

    monkeypatch.setattr(loader, "_load", half_way)
    r = loader.run_one(_first("truncate weights", "manager"), "truncate weights")
    assert r["outcome"] == oc.WRONG and "changed 1 parameters" in r["detail"], r


def test_a_non_minispore_exception_is_raw_and_a_slow_load_a_hang(loader, monkeypatch):
    import time

    def raw(path):
        return {}["missing key"]

    monkeypatch.setattr(loader, "_load", raw)
    r = loader.run_one(_first("truncate weights", "generate"), "truncate weights")
    assert r["outcome"] == oc.RAW and r["detail"].startswith("KeyError"), r
    monkeypatch.setattr(load_worker, "LOAD_TIMEOUT_S", 0.3)
    monkeypatch.setattr(loader, "_load", lambda path: time.sleep(5))
    r = loader.run_one(_first("truncate weights", "generate"), "truncate weights")
    assert r["outcome"] == oc.HANG, r
    assert os.path.isdir(r["kept"])                              # the failing mutant is kept


def test_a_real_truncated_checkpoint_is_refused_cleanly(loader):
    r = loader.run_one(_first("truncate weights", "manager"), "truncate weights")
    assert r["outcome"] == oc.CLEAN and "CheckpointError" in r["detail"], r


# ------------------------------------------------------------------------------------------------
# the kill/signal classifier, with the trainer replaced by scripts that misbehave on purpose
FAKE_TRAINER = textwrap.dedent("""
    import os, signal, sys, time
    out, behaviour = sys.argv[1], sys.argv[2]
    os.makedirs(os.path.join(out, "ckpt-000003"), exist_ok=True)
    for name in ("model.safetensors", "state.json"):
        open(os.path.join(out, "ckpt-000003", name), "wb").write(b"not a checkpoint")
    open(os.path.join(out, "latest"), "w").write("ckpt-000003\\n")
    def on_term(signum, frame):
        if behaviour == "traceback":
            sys.stderr.write("Traceback (most recent call last):\\n  File 'x'\\nValueError: boom\\n")
        sys.exit(128 + signum)
    signal.signal(signal.SIGTERM, signal.SIG_IGN if behaviour == "ignore" else on_term)
    while True:
        time.sleep(0.05)
""")


def _fake(monkeypatch, tmp_path, behaviour):
    script = tmp_path / "fake_train.py"
    script.write_text(FAKE_TRAINER)
    monkeypatch.setattr(signal_trials, "train_command",
                        lambda out, n, interval, resume=False: [sys.executable, str(script), str(out), behaviour])
    monkeypatch.setattr(signal_trials, "STOP_TIMEOUT_S", 3)
    monkeypatch.setattr(signal_trials, "DELAY_S", (0.0, 0.01))


@pytest.mark.parametrize("behaviour, outcome", [("ignore", oc.HANG), ("traceback", oc.RAW), ("exit", oc.LOST)])
def test_a_misbehaving_trainer_is_classified(monkeypatch, tmp_path, behaviour, outcome):
    _fake(monkeypatch, tmp_path, behaviour)
    r = signal_trials.run_trial("SIGTERM", 0, 0, str(tmp_path / "work"), str(tmp_path / "no-reference"))
    assert r["outcome"] == outcome, r


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    work = tmp_path_factory.mktemp("signals")
    from bench.reliability.train_runs import reference_run
    reference_run(str(work), signal_trials.MAX_ITERS, signal_trials.RESUME_INTERVAL)
    return str(work / f"reference-{signal_trials.MAX_ITERS}")


def test_a_resumed_run_that_differs_by_one_bit_is_a_wrong_result(reference, tmp_path):
    # a copy of the reference whose final checkpoint has one weight off by one ulp
    import shutil
    ref = tmp_path / "reference"
    shutil.copytree(reference, ref)
    ckpt = ref / f"ckpt-{signal_trials.MAX_ITERS:06d}"
    from safetensors.numpy import load_file, save_file
    tensors = load_file(str(ckpt / "model.safetensors"))
    name = sorted(n for n in tensors if n.startswith("layers."))[0]
    flat = tensors[name].reshape(-1).view(np.uint32)
    flat[0] ^= 1
    os.chmod(ckpt / "model.safetensors", 0o600)
    save_file(tensors, str(ckpt / "model.safetensors"))
    assert final_state(str(ref), signal_trials.MAX_ITERS)[0][name].tobytes() != \
        final_state(reference, signal_trials.MAX_ITERS)[0][name].tobytes()
    r = signal_trials.run_trial("SIGTERM", 0, 0, str(tmp_path / "work"), str(ref))
    assert r["outcome"] == oc.WRONG and name in r["example"], r


# ------------------------------------------------------------------------------------------------
# the report
def _check_report(report, trials, n_mutants, op_calls):
    families = {f.name: f for f in report["families"]}
    assert list(families) == [*signal_trials.KINDS, "checkpoint mutation fuzz", "op fuzz"]
    for kind in signal_trials.KINDS:
        assert families[kind].trials == trials
    assert families["checkpoint mutation fuzz"].trials == n_mutants
    assert sum(sum(c.values()) for c in report["mutants_by_kind"].values()) == n_mutants
    assert families["op fuzz"].trials >= op_calls
    for line in ("| trial family | trials |", "| **total** |"):
        assert line in report["markdown"]
    failed = sum(f.failures() for f in report["families"])
    assert failed == 0, report["markdown"]


def test_the_quick_report_meets_the_target(tmp_path):
    report = run_report(str(tmp_path), trials=1, mutants=60, op_calls=300, seed=1, jobs=1)
    _check_report(report, 1, 60, 300)


@pytest.mark.slow
def test_the_full_report_meets_the_target(tmp_path):
    report = run_report(str(tmp_path), trials=20, mutants=2000, op_calls=5000, seed=0, jobs=2)
    print(report["markdown"])
    _check_report(report, 20, 2000, 5000)
