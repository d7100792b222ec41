"""`minispore train` / `minispore generate` end to end (in-process, on a tiny model)."""
import json

import pytest

from minispore.cli import main
from minispore.llm.cli_commands import configs_from_args

TINY = ["--n-layers", "1", "--dim", "32", "--n-heads", "2", "--block-size", "16", "--batch-size", "4",
        "--eval-interval", "3", "--eval-iters", "2", "--final-eval-iters", "2", "--no-progress", "--no-plot"]


def parse_train(argv):
    import argparse
    from minispore.llm.cli_commands import add_train_args
    p = argparse.ArgumentParser()
    add_train_args(p)
    return p.parse_args(argv)


def test_defaults_are_the_nanogpt_cpu_recipe():
    mc, tc = configs_from_args(parse_train([]))
    assert (mc.n_layers, mc.n_heads, mc.dim, mc.max_seq_len, mc.dropout) == (4, 4, 128, 64, 0.0)
    assert (tc.max_iters, tc.batch_size, tc.learning_rate, tc.min_lr, tc.warmup_iters, tc.decay_iters) == \
        (2000, 12, 1e-3, 1e-4, 100, 2000)
    assert (tc.beta2, tc.weight_decay, tc.grad_clip, tc.eval_interval, tc.optimizer) == (0.99, 0.1, 1.0, 250, "adamw")
    assert tc.out_dir == "out/shakespeare-char" and not tc.resume


def test_max_iters_sets_the_decay_and_shortens_warmup():
    _, tc = configs_from_args(parse_train(["--max-iters", "200"]))
    assert tc.decay_iters == 200 and tc.warmup_iters == 20
    _, tc = configs_from_args(parse_train(["--max-iters", "200", "--lr-decay-iters", "400", "--warmup-iters", "7"]))
    assert tc.decay_iters == 400 and tc.warmup_iters == 7
    mc, _ = configs_from_args(parse_train(["--n-heads", "8", "--dim", "64"]))
    assert mc.n_heads == mc.n_kv_heads == 8


def test_train_then_generate(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", "--max-iters", "6", "--out", str(out), *TINY]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["iters"] == 6 and metrics["config"]["n_layers"] == 1
    printed = capsys.readouterr().out
    assert "val loss" in printed and "ms/iteration" in printed

    assert main(["generate", "--ckpt", str(out), "--prompt", "ROMEO:", "--max-new-tokens", "40", "--seed", "3"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("ROMEO:") and len(text.rstrip("\n")) >= 40
    # the same seed gives the same text; --no-cache gives the same text too
    assert main(["generate", "--ckpt", str(out), "--prompt", "ROMEO:", "--max-new-tokens", "40", "--seed", "3",
                 "--no-cache"]) == 0
    assert capsys.readouterr().out == text
    # the paged KV cache gives the same text; the new sampling flags and stop strings work
    assert main(["generate", "--ckpt", str(out), "--prompt", "ROMEO:", "--max-new-tokens", "40", "--seed", "3",
                 "--kv-cache", "paged", "--block-size", "4"]) == 0
    assert capsys.readouterr().out == text
    stop = text[10:12]
    assert main(["generate", "--ckpt", str(out), "--prompt", "ROMEO:", "--max-new-tokens", "40", "--seed", "3",
                 "--stop", stop, "--stop", "\\n\\n"]) == 0
    cut = text[6:]
    cut = cut[:min(i for i in (cut.find(stop), cut.find("\n\n"), len(cut)) if i >= 0)]
    assert capsys.readouterr().out == "ROMEO:" + cut + ("" if cut.endswith("\n") else "\n")
    assert main(["generate", "--ckpt", str(out), "--prompt", "ROMEO:", "--max-new-tokens", "20", "--top-p", "0.5",
                 "--repetition-penalty", "1.3", "--temperature", "1.0"]) == 0
    assert len(capsys.readouterr().out.rstrip("\n")) >= 20
    assert main(["generate", "--ckpt", str(out), "--top-p", "1.5"]) == 1
    assert "top_p" in capsys.readouterr().err

    # continue the run: more iterations, same schedule
    assert main(["train", "--max-iters", "9", "--lr-decay-iters", "6", "--out", str(out), "--resume", *TINY]) == 0
    assert json.loads((out / "metrics.json").read_text())["iters"] == 9


def test_cli_errors_are_one_clear_line(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", "--max-iters", "3", "--out", str(out), "--warmup-iters", "0", *TINY]) == 0
    capsys.readouterr()
    # a prompt with characters outside the vocabulary
    assert main(["generate", "--ckpt", str(out), "--prompt", "naïve ☃"]) == 1
    err = capsys.readouterr().err
    assert "generate" in err and "☃" in err and "Traceback" not in err
    # no checkpoint there
    assert main(["generate", "--ckpt", str(tmp_path / "nowhere")]) == 1
    assert "does not exist" in capsys.readouterr().err
    # resuming with another model shape names the field
    assert main(["train", "--max-iters", "3", "--out", str(out), "--resume", *TINY[:-2], "--dim", "48",
                 "--no-progress"]) == 1
    assert "model.dim" in capsys.readouterr().err
    # bad hyper-parameter
    assert main(["train", "--max-iters", "0", "--out", str(out)]) == 1
    assert "max_iters" in capsys.readouterr().err


@pytest.mark.slow
def test_the_default_run_reaches_nanogpt_quality(tmp_path):
    """The README's main job: 2000 iterations of shakespeare-char (several minutes)."""
    assert main(["train", "--out", str(tmp_path), "--no-progress"]) == 0
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["iters"] == 2000 and metrics["final_val_loss"] <= 1.95
    assert (tmp_path / "loss.png").stat().st_size > 10000
