"""The command line's bad inputs: each is one clear line on stderr with exit status 1 (or argparse's
usage and one line with status 2), checked before any work, never a traceback.

In process (fast) except the two cases that depend on how the process starts: the launcher's
"(at .../bin/minispore:8 ...)" location and MINISPORE_DEVICE_TARGET read at import."""
import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import textwrap
import tracemalloc

import pytest

import minispore as ms
from minispore.cli import main
from minispore.common.errors import OpValueError
from minispore.train.checkpoint_manager import CheckpointManager
from minispore.llm.trainer import TrainConfig

TINY = ["--n-layers", "1", "--dim", "32", "--n-heads", "2", "--block-size", "16", "--batch-size", "4",
        "--max-iters", "2", "--eval-iters", "1", "--final-eval-iters", "1", "--no-progress", "--no-plot"]


def one_error_line(capsys, *must_contain):
    """stderr of the last command: exactly one line, no traceback, containing every string given."""
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err and "(at " not in err, err
    for text in must_contain:
        assert text in err, err
    return err


def usage_error(capsys, argv, *must_contain):
    """argparse's exit status 2, with the command's usage and an error line containing the strings."""
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    for text in must_contain:
        assert text in err, err
    return err


@contextlib.contextmanager
def unwritable_dir(path):
    """`path` as a directory no process can create files in, or skip: permission bits do not stop
    root, so as root the directory is also made immutable (chattr +i) where the file system allows."""
    path.mkdir(exist_ok=True)
    os.chmod(path, 0o555)
    immutable = False
    try:
        if _can_create_in(path) and shutil.which("chattr"):
            immutable = subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode == 0
        if _can_create_in(path):
            pytest.skip("cannot make a directory unwritable here (root without chattr)")
        yield path
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(path)], capture_output=True)
        os.chmod(path, 0o755)


def _can_create_in(path):
    try:
        (path / ".probe").write_text("")
    except OSError:
        return False
    os.remove(path / ".probe")
    return True


# ------------------------------------------------------------------------------------------------
# train --out
def test_out_that_is_a_file_a_device_or_empty(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)               # (the current code would train into out/ for --out "")
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    assert main(["train", "--out", str(notes), *TINY]) == 1
    one_error_line(capsys, "--out", str(notes), "is a regular file of 9 bytes, not a directory")
    assert notes.read_text() == "my notes\n"
    assert main(["train", "--out", os.devnull, *TINY]) == 1
    one_error_line(capsys, "--out", "is a character device, not a directory")
    usage_error(capsys, ["train", "--out", "", *TINY], "usage: minispore train",
                "argument --out: expected a path, got an empty string")
    assert not (tmp_path / "out").exists()


def test_out_that_cannot_be_written(tmp_path, capsys):
    with unwritable_dir(tmp_path / "locked") as locked:
        assert main(["train", "--out", str(locked / "run"), *TINY]) == 1
        one_error_line(capsys, "--out", "cannot be created")
        assert main(["train", "--out", str(locked), *TINY]) == 1
        one_error_line(capsys, "--out", "is not writable")


def test_resume_into_a_read_only_run_directory_fails_before_training(tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["train", "--out", str(run), *TINY, "--lr-decay-iters", "4"]) == 0
    capsys.readouterr()
    before = CheckpointManager(run, create=False).checkpoints()
    with unwritable_dir(run):
        # (the flags repeated, so that the check is the only reason to refuse)
        assert main(["train", "--resume", "--out", str(run), *TINY, "--lr-decay-iters", "4", "--max-iters", "4"]) == 1
        one_error_line(capsys, str(run), "is not writable")
    assert CheckpointManager(run, create=False).checkpoints() == before
    assert json.loads((run / "metrics.json").read_text())["iters"] == 2


# ------------------------------------------------------------------------------------------------
# train: flags
def test_negative_threads_is_a_usage_error(tmp_path, capsys):
    usage_error(capsys, ["train", "--threads", "-1", "--out", str(tmp_path / "run"), *TINY],
                "usage: minispore train", "argument --threads: expected an integer >= 0, got -1")
    assert not (tmp_path / "run").exists()


def test_min_lr_above_lr(tmp_path, capsys):
    assert main(["train", "--lr", "1e-3", "--min-lr", "1e-2", "--out", str(tmp_path / "run"), *TINY]) == 1
    one_error_line(capsys, "--min-lr 0.01 above --lr 0.001")
    assert main(["train", "--min-lr", "5e-3", "--out", str(tmp_path / "run"), *TINY]) == 1   # the preset's lr
    one_error_line(capsys, "--min-lr 0.005 above --lr 0.001")
    assert not (tmp_path / "run").exists()
    with pytest.raises(OpValueError, match="min_lr=0.01 above learning_rate=0.001"):
        TrainConfig(learning_rate=1e-3, min_lr=1e-2)


def test_mistyped_flags_and_commands_get_the_command_usage_and_a_suggestion(capsys):
    err = usage_error(capsys, ["train", "--max-itres", "5"], "unrecognized arguments: --max-itres 5",
                      "did you mean --max-iters?")
    assert err.startswith("usage: minispore train ")               # the command's usage, not the top level's
    usage_error(capsys, ["train", "--lr-dacay-iters=100"], "did you mean --lr-decay-iters?")
    usage_error(capsys, ["generate", "--ckpt", "x", "--temprature", "0"], "usage: minispore generate",
                "did you mean --temperature?")
    usage_error(capsys, ["dryrun", "--sq", "10"], "usage: minispore dryrun", "did you mean --seq?")
    usage_error(capsys, ["trian", "--max-iters", "5"], "invalid choice: 'trian'", "did you mean train?")


def test_sizes_too_large_are_refused_up_front(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("MINISPORE_MEMORY_LIMIT", "2G")
    out = tmp_path / "run"
    assert main(["train", "--batch-size", "10000000", "--out", str(out), "--no-progress", "--no-plot"]) == 1
    one_error_line(capsys, "--batch-size 10000000", "Nothing was allocated", "MINISPORE_MEMORY_LIMIT")
    assert main(["train", "--block-size", "100000000", "--out", str(out), "--no-progress", "--no-plot"]) == 1
    one_error_line(capsys, "--block-size 100000000", "Nothing was allocated")
    assert not out.exists()


# ------------------------------------------------------------------------------------------------
# dryrun
def test_dryrun_huge_seq_is_refused_before_anything_is_built(capsys):
    assert main(["dryrun", "--seq", str(10**12)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    err = captured.err.strip()
    assert "\n" not in err and "--seq 1000000000000" in err and "rotary-embedding tables" in err


def test_dryrun_estimate_matches_what_dryrun_allocates():
    """The estimate behind the --seq check against tracemalloc's peak of a real DryRun (NumPy
    reports its allocations to tracemalloc); the long sequence makes the rotary tables dominate."""
    from minispore.common import dtype as mstype
    from minispore.llm.config import get_preset
    from minispore.llm.dryrun_command import dryrun_host_bytes
    with contextlib.redirect_stdout(io.StringIO()):
        main(["dryrun", "--model", "shakespeare-char", "--seq", "32"])          # imports, calibration
    for dtype, seq in (("float32", 40000), ("bfloat16", 40000)):
        tracemalloc.start()
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                assert main(["dryrun", "--model", "shakespeare-char", "--seq", str(seq), "--dtype", dtype]) == 0
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        cfg = get_preset("shakespeare-char").model
        cfg.max_seq_len = seq
        estimate = dryrun_host_bytes(cfg, mstype.as_dtype(dtype))
        assert estimate == pytest.approx(peak, rel=0.1), (dtype, estimate, peak)


def test_dryrun_output_files_are_checked_before_the_report(tmp_path, capsys):
    missing = tmp_path / "no" / "such" / "dir"
    assert main(["dryrun", "--model", "shakespeare-char", "--plot", str(missing / "mem.png")]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""                                       # no report printed first
    assert "--plot" in captured.err and "does not exist" in captured.err and "\n" not in captured.err.strip()
    assert main(["dryrun", "--model", "shakespeare-char", "--json", str(missing / "r.json")]) == 1
    assert capsys.readouterr().out == ""
    assert main(["dryrun", "--model", "shakespeare-char", "--json", str(tmp_path)]) == 1
    one_error_line(capsys, "--json", "which is a directory")
    pytest.importorskip("matplotlib")
    assert main(["dryrun", "--model", "shakespeare-char", "--plot", str(tmp_path / "mem.nosuchformat")]) == 1
    one_error_line(capsys, "--plot", "extension")


# ------------------------------------------------------------------------------------------------
# generate --ckpt
def test_generate_ckpt_that_is_not_a_checkpoint_says_what_it_is(tmp_path, capsys):
    notes = tmp_path / "notes.txt"
    notes.write_text("ROMEO: hello\n")
    assert main(["generate", "--ckpt", str(notes)]) == 1
    one_error_line(capsys, "is a text file of 13 bytes, not a training checkpoint", "minispore train --out DIR")

    weights = tmp_path / "net.safetensors"                          # weights only, no config or tokenizer
    ms.save_checkpoint(ms.nn.Dense(2, 3), str(weights), format="safetensors")
    assert main(["generate", "--ckpt", str(weights)]) == 1
    one_error_line(capsys, "is a safetensors file of", "(weights only)", "minispore train")

    empty_dir = tmp_path / "empty"
    empty_dir.mkdir()
    assert main(["generate", "--ckpt", str(empty_dir)]) == 1
    one_error_line(capsys, "is a directory that holds no checkpoint", "minispore train")
    assert main(["generate", "--ckpt", os.devnull]) == 1
    one_error_line(capsys, "is a character device", "minispore train")


# ------------------------------------------------------------------------------------------------
# how the process starts (subprocess)
def _console_script():
    exe = os.path.join(os.path.dirname(sys.executable), "minispore")
    return [exe] if os.path.exists(exe) else [sys.executable, "-m", "minispore"]


def test_errors_from_the_console_script_carry_no_launcher_location(tmp_path):
    r = subprocess.run(_console_script() + ["train", "--max-iters", "0", "--out", str(tmp_path / "run")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1
    err = r.stderr.strip()
    assert err.startswith("minispore train: error: For 'TrainConfig', expected 'max_iters' as an int >= 1")
    assert "\n" not in err and "(at " not in err and "bin/minispore" not in err and "runpy" not in err


def test_a_mistyped_device_target_variable_does_not_break_import(tmp_path):
    code = textwrap.dedent(f"""
        import json, sys, io, contextlib
        import minispore as ms                      # must not raise
        from minispore.backend import registry
        from minispore import cli
        out = {{"found": registry.available_backends(), "info": cli.info_dict()["device_target_error"]}}
        try:
            ms.ops.add(ms.Tensor([1.0]), 1.0)
        except ms.MinisporeError as e:
            out["op"] = f"{{type(e).__name__}}: {{e}}"
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            out["train_rc"] = cli.main(["train", "--out", {str(tmp_path / "run")!r}, *{TINY!r}])
        out["train_err"] = err.getvalue()
        ms.set_context(device_target="CPU")          # choosing a backend in code replaces the variable
        out["after"] = ms.ops.add(ms.Tensor([1.0]), 1.0).asnumpy().tolist()
        print(json.dumps(out))
    """)
    env = {**os.environ, "MINISPORE_DEVICE_TARGET": "Ascned"}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.splitlines()[-1])
    for message in (out["op"], out["info"], out["train_err"]):
        assert "MINISPORE_DEVICE_TARGET='Ascned' names no backend" in message
        assert f"the backends found are {', '.join(out['found'])}" in message
    assert out["op"].startswith("BackendUnavailableError: Backend 'Ascned' is not available")
    if "Ascend" in out["found"]:
        assert "did you mean 'Ascend'?" in out["op"]
    assert out["train_rc"] == 1 and out["train_err"].count("\n") == 1 and "Traceback" not in out["train_err"]
    assert out["after"] == [2.0]
