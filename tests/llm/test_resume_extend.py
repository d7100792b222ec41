"""Extending a run: `minispore train --resume --max-iters N` after a shorter run trains to N with
the schedule the run started with (warmup and decay derived from the first --max-iters), and equals
a straight N-iteration run given that schedule explicitly, bit for bit (site/train-tiny-llama.md,
"Resuming and extending a run"). Flags left out on --resume keep the recorded values."""
import json
import math
import os

import numpy as np

from minispore.cli import main
from minispore.train.checkpoint_manager import CheckpointManager
from minispore.train.serialization import load_checkpoint
from minispore.llm.trainer import TrainConfig, train

# a tiny model and cadence; the schedule flags (--lr, --min-lr, --batch-size, ...) are the preset's
MODEL = ["--n-layers", "1", "--dim", "32", "--n-heads", "2", "--block-size", "16"]
CADENCE = ["--eval-interval", "3", "--eval-iters", "2", "--final-eval-iters", "2", "--no-progress", "--no-plot"]
SMALL = ["--batch-size", "4"]


def nanogpt_lr(it, lr=1e-3, min_lr=1e-4, warmup=0, decay=6):
    """nanoGPT's get_lr, written out independently of minispore's schedule."""
    if it < warmup:
        return lr * (it + 1) / (warmup + 1)
    if it > decay:
        return min_lr
    ratio = (it - warmup) / (decay - warmup)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (lr - min_lr)


def saved_tensors(out_dir):
    path = CheckpointManager(out_dir, create=False).latest()
    weights = load_checkpoint(os.path.join(path, "model.safetensors"), format="safetensors")
    return {n: p.asnumpy() for n, p in weights.items()}


def metrics(out_dir):
    return json.loads((out_dir / "metrics.json").read_text())


def test_resume_with_a_larger_max_iters_extends_the_run_with_its_recorded_schedule(tmp_path, capsys):
    a, b = tmp_path / "extended", tmp_path / "straight"
    # 6 iterations: --max-iters 6 derives lr_decay_iters=6 and warmup_iters=min(100, 6 // 10)=0
    assert main(["train", "--max-iters", "6", "--out", str(a), *MODEL, *SMALL, *CADENCE]) == 0
    # extend to 10, repeating nothing but --out and the cadence (the model and schedule are recorded)
    assert main(["train", "--resume", "--max-iters", "10", "--out", str(a), *CADENCE]) == 0
    m = metrics(a)
    assert m["iters"] == 10 and len(m["loss_history"]["train_loss"]) == 10
    assert m["config"]["dim"] == 32 and m["train_config"]["batch_size"] == 4
    assert (m["train_config"]["lr_decay_iters"], m["train_config"]["warmup_iters"]) == (6, 0)
    # the learning rates follow the recorded schedule: cosine over 6, then min_lr
    np.testing.assert_allclose(m["loss_history"]["lr"], [nanogpt_lr(i) for i in range(10)], rtol=1e-12)
    assert m["loss_history"]["lr"][7:] == [1e-4] * 3

    # ... which is what the docs say it equals: a straight run with those derived values given
    assert main(["train", "--max-iters", "10", "--lr-decay-iters", "6", "--warmup-iters", "0", "--out", str(b),
                 *MODEL, *SMALL, *CADENCE]) == 0
    s = metrics(b)
    assert m["loss_history"] == s["loss_history"]
    assert m["final_val_loss"] == s["final_val_loss"]
    sa, sb = saved_tensors(a), saved_tensors(b)
    assert sorted(sa) == sorted(sb)
    for name in sa:
        np.testing.assert_array_equal(sa[name], sb[name], err_msg=name)

    # a schedule flag that contradicts the recording is refused, naming the flag and the value
    capsys.readouterr()
    assert main(["train", "--resume", "--max-iters", "12", "--lr", "5e-4", "--out", str(a), *CADENCE]) == 1
    err = capsys.readouterr().err
    assert "--lr 0.0005" in err and "train.learning_rate=0.001" in err and "Traceback" not in err
    assert metrics(a)["iters"] == 10                                # nothing ran


def test_plain_resume_finishes_the_recorded_max_iters(tmp_path):
    """After a stop at iteration 3 of a `--max-iters 6` run, `--resume` alone trains to 6 (not to the
    preset's 2000) with the model and schedule of the run, as a straight 6-iteration run does."""
    from minispore.llm.cli_commands import add_train_args, configs_from_args
    import argparse
    parser = argparse.ArgumentParser()
    add_train_args(parser)
    straight = tmp_path / "straight"
    assert main(["train", "--max-iters", "6", "--out", str(straight), *MODEL, *SMALL, *CADENCE]) == 0

    stopped = tmp_path / "stopped"
    mc, tc = configs_from_args(parser.parse_args(["--max-iters", "6", "--out", str(stopped), *MODEL, *SMALL,
                                                  *CADENCE]))
    assert train(mc, tc, callback=lambda it, loss: it == 3)["iters"] == 3
    assert main(["train", "--resume", "--out", str(stopped), "--no-progress", "--no-plot"]) == 0
    m, s = metrics(stopped), metrics(straight)
    assert m["iters"] == 6
    assert m["loss_history"] == s["loss_history"]
    assert m["train_config"]["eval_interval"] == 3           # the recorded cadence, not the preset's 250


def test_python_api_extension_keeps_the_recorded_decay(tmp_path):
    """TrainConfig(resume=True) with lr_decay_iters=None ("the run's length") means the recorded decay
    length, as the CLI does."""
    base = dict(out_dir=str(tmp_path), batch_size=4, warmup_iters=1, eval_interval=3, eval_iters=2,
                final_eval_iters=2, ckpt_interval=3, progress=False, plot=False)
    from minispore.llm import LlamaConfig
    mc = LlamaConfig(vocab_size=65, dim=32, n_layers=1, n_heads=2, max_seq_len=16)
    train(mc, TrainConfig(max_iters=5, **base))
    m = train(mc, TrainConfig(max_iters=8, resume=True, **base))
    assert m["iters"] == 8 and m["train_config"]["lr_decay_iters"] == 5
    np.testing.assert_allclose(m["loss_history"]["lr"], [nanogpt_lr(i, warmup=1, decay=5) for i in range(8)],
                               rtol=1e-12)


def test_resume_with_max_iters_below_the_steps_done_is_refused(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", "--max-iters", "4", "--out", str(out), *MODEL, *SMALL, *CADENCE]) == 0
    capsys.readouterr()
    assert main(["train", "--resume", "--max-iters", "2", "--out", str(out), *CADENCE]) == 1
    err = capsys.readouterr().err.strip()
    assert "--max-iters" in err and ">= 4" in err and "got 2" in err and "\n" not in err
    assert metrics(out)["iters"] == 4


def test_resume_refuses_a_different_preset(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", "--max-iters", "2", "--out", str(out), *MODEL, *SMALL, *CADENCE]) == 0
    capsys.readouterr()
    assert main(["train", "--resume", "--preset", "shakespeare-small", "--out", str(out), *CADENCE]) == 1
    err = capsys.readouterr().err
    assert "--preset shakespeare-small" in err and "shakespeare-char" in err
    # naming the run's own preset is fine
    assert main(["train", "--resume", "--preset", "shakespeare-char", "--max-iters", "3", "--out", str(out),
                 *CADENCE]) == 0
    assert metrics(out)["iters"] == 3
