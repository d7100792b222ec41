"""No lost training runs (issue 12, "Lost work"): a directory that holds a run is never replaced
unless asked (`--resume` continues it, `--overwrite` replaces it), and SIGTERM / SIGHUP -- what a
scheduler or a closed terminal sends -- save a checkpoint and stop like Ctrl-C does, with a second
signal during that save held until the checkpoint is complete."""
import hashlib
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from minispore.cli import main
from minispore.common.errors import MinisporeError, OpValueError
from minispore.llm import Llama
from minispore.llm.cli_commands import load_for_generation
from minispore.train.checkpoint_manager import CheckpointManager
from minispore.llm.trainer import ExistingRunError, TrainConfig, _StopSignals, train


def tiny_model(**kw):                    # as in test_trainer.py
    from minispore.llm import LlamaConfig
    base = dict(vocab_size=65, dim=32, n_layers=2, n_heads=2, max_seq_len=16, dropout=0.1, multiple_of=16)
    base.update(kw)
    return LlamaConfig(**base)


def tiny_train(out_dir, **kw):
    base = dict(out_dir=str(out_dir), max_iters=10, lr_decay_iters=10, batch_size=4, warmup_iters=2,
                eval_interval=4, eval_iters=2, final_eval_iters=2, ckpt_interval=4, progress=False, plot=False)
    base.update(kw)
    return TrainConfig(**base)

TINY = ["--n-layers", "1", "--dim", "32", "--n-heads", "2", "--block-size", "16", "--batch-size", "4",
        "--eval-iters", "2", "--final-eval-iters", "2", "--no-progress", "--no-plot"]


def snapshot(directory):
    """{relative path: sha256} of every file under `directory`."""
    out = {}
    for root, _, files in os.walk(directory):
        for name in files:
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                out[os.path.relpath(path, directory)] = hashlib.sha256(f.read()).hexdigest()
    return out


def steps(directory):
    return [s for s, _ in CheckpointManager(directory, create=False).checkpoints()]


# ------------------------------------------------------------------------------------------------
def test_a_second_run_without_resume_or_overwrite_is_refused_and_the_run_kept(tmp_path):
    train(tiny_model(), tiny_train(tmp_path, max_iters=8))
    before = snapshot(tmp_path)
    assert "metrics.json" in before and steps(tmp_path) == [4, 8]
    with pytest.raises(ExistingRunError, match=r"already holds a run \(2 checkpoints, metrics.json\).*--resume.*"
                                               r"--overwrite") as info:
        train(tiny_model(), tiny_train(tmp_path, max_iters=4, lr_decay_iters=4))
    assert isinstance(info.value, MinisporeError) and info.value.out_dir == str(tmp_path)
    assert snapshot(tmp_path) == before                                  # not one byte changed


def test_the_cli_refuses_an_existing_run_in_one_line(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", "--max-iters", "3", "--out", str(out), *TINY]) == 0
    before = snapshot(out)
    capsys.readouterr()
    assert main(["train", "--max-iters", "3", "--out", str(out), *TINY]) == 1
    err = capsys.readouterr().err
    assert "already holds a run" in err and "--overwrite" in err and "Traceback" not in err
    assert snapshot(out) == before
    # only metrics.json left (checkpoints deleted by hand) is still a run
    for _, path in CheckpointManager(out, create=False).checkpoints():
        import shutil
        shutil.rmtree(path)
    os.remove(out / "latest")
    with pytest.raises(ExistingRunError, match=r"\(metrics.json\)"):
        train(tiny_model(), tiny_train(out, max_iters=4, lr_decay_iters=4))


def test_overwrite_replaces_the_earlier_run(tmp_path, capsys):
    train(tiny_model(), tiny_train(tmp_path, max_iters=8))
    (tmp_path / "notes.txt").write_text("mine")                          # not the run's: stays
    m = train(tiny_model(), tiny_train(tmp_path, max_iters=4, lr_decay_iters=4, overwrite=True))
    assert steps(tmp_path) == [4] and m["iters"] == 4 and not m["interrupted"]
    assert json.loads((tmp_path / "metrics.json").read_text())["iters"] == 4
    assert (tmp_path / "notes.txt").read_text() == "mine"
    assert "--overwrite: deleted the earlier run" in capsys.readouterr().err
    # the CLI flag; and it cannot be combined with --resume
    out = tmp_path / "cli"
    assert main(["train", "--max-iters", "3", "--out", str(out), *TINY]) == 0
    assert main(["train", "--max-iters", "6", "--out", str(out), "--overwrite", *TINY]) == 0
    assert steps(out) == [6]
    with pytest.raises(SystemExit):
        main(["train", "--out", str(out), "--overwrite", "--resume", *TINY])
    with pytest.raises(OpValueError, match="resume.*overwrite"):
        TrainConfig(resume=True, overwrite=True)


# ------------------------------------------------------------------------------------------------
@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize("signame", ["SIGTERM", "SIGHUP"])
def test_sigterm_and_sighup_save_a_checkpoint_and_exit_non_zero(tmp_path, signame):
    out = tmp_path / "run"
    # a run far too long to finish: only the signal ends it; a checkpoint every 3 iterations, so
    # the signal often lands in a save as well
    cmd = [sys.executable, "-m", "minispore", "train", "--out", str(out), *TINY, "--max-iters", "100000",
           "--ckpt-interval", "3", "--eval-interval", "100000"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not os.path.exists(out / "latest"):                       # training is under way
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "no checkpoint after 60 s"
            time.sleep(0.05)
        proc.send_signal(getattr(signal, signame))
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
    signum = int(getattr(signal, signame))
    assert proc.returncode == 128 + signum, stderr                         # non-zero, and says which signal
    assert f"{signame}: stopping after this iteration" in stderr
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["interrupted"] and metrics["stop_signal"] == signame
    # `latest` is the checkpoint of the very iteration the run stopped at, and it loads
    model, _ = load_for_generation(str(out))
    state = CheckpointManager(out, create=False).load("latest", Llama(model.config), restore_rng=False)
    assert state["step"] == metrics["iters"] >= 3
    assert "(interrupted)" in stdout


def test_a_second_signal_during_the_save_waits_for_the_checkpoint(tmp_path, monkeypatch):
    """Two Ctrl-Cs while checkpoint 4 is being written: the save completes, then the run stops."""
    real_save = CheckpointManager.save

    def save_with_two_signals(self, step, *args, **kwargs):
        if step == 4:
            signal.raise_signal(signal.SIGINT)
            signal.raise_signal(signal.SIGINT)
        return real_save(self, step, *args, **kwargs)

    monkeypatch.setattr(CheckpointManager, "save", save_with_two_signals)
    with pytest.raises(KeyboardInterrupt):
        train(tiny_model(), tiny_train(tmp_path))
    assert steps(tmp_path) == [4]                                        # the save in progress finished
    net = Llama(tiny_model())
    assert CheckpointManager(tmp_path, create=False).load("latest", net, restore_rng=False)["step"] == 4
    for s in (signal.SIGINT, signal.SIGTERM):                            # handlers restored
        assert signal.getsignal(s) is (signal.default_int_handler if s == signal.SIGINT else signal.SIG_DFL)


def test_stop_signals_hold_everything_during_a_save():
    stop = _StopSignals()
    with stop:
        with stop.saving():
            signal.raise_signal(signal.SIGTERM)                          # held: nothing happens yet
            assert stop.requested is None
        assert stop.requested == signal.SIGTERM                          # handled after the save
        with pytest.raises(KeyboardInterrupt):                           # a further one: stop now
            with stop.saving():
                signal.raise_signal(signal.SIGTERM)
                done = "body finished"
        assert done == "body finished"
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
