"""Three MindSpore-tutorial-style scripts (tests/fidelity/e2e/) run unchanged on minispore and their
losses match real MindSpore 2.10's step for step, starting from the initial checkpoint MindSpore
wrote (fixtures: tests/fixtures/mindspore/make_e2e_fixtures.py).

The scripts import `mindspore`; `python -m minispore.mindspore_compat script.py` makes those imports
resolve to minispore, so the file that ran on MindSpore is the file that runs here.
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
E2E = os.path.join(HERE, "e2e")
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "mindspore", "e2e")
DATA = os.path.join(ROOT, "minispore", "data", "tinyshakespeare.txt")
RTOL = 1e-4


def run_on_minispore(script, init, tmp_path, *extra):
    ckpt = tmp_path / "init.ckpt"
    shutil.copyfile(os.path.join(FIXTURES, init), ckpt)
    record = tmp_path / "record.json"
    cmd = [sys.executable, "-m", "minispore.mindspore_compat", os.path.join(E2E, script),
           "--init-ckpt", str(ckpt), "--record", str(record), *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=str(tmp_path))
    assert proc.returncode == 0, f"{script} failed on minispore:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    with open(record) as f:
        return json.load(f), proc.stdout


def expected(name):
    with open(os.path.join(FIXTURES, f"{name}.json")) as f:
        return json.load(f)


def assert_losses_match(got, want):
    got, want = np.array(got["losses"]), np.array(want["losses"])
    assert got.shape == want.shape == (20,)
    rel = np.abs(got - want) / np.abs(want)
    assert rel.max() <= RTOL, f"step {rel.argmax() + 1}: minispore {got[rel.argmax()]} vs MindSpore " \
                              f"{want[rel.argmax()]} (rel {rel.max():.2e}); all rel: {np.round(rel, 7)}"


def test_lenet_digits_model_train_matches_mindspore(tmp_path):
    got, stdout = run_on_minispore("lenet_digits.py", "lenet_init.ckpt", tmp_path)
    want = expected("lenet")
    assert_losses_match(got, want)
    assert "epoch: 1 step: 20, loss is" in stdout                # LossMonitor's MindSpore line
    assert abs(got["eval"]["accuracy"] - want["eval"]["accuracy"]) <= 1 / 384 + 1e-9


def test_resnet_cifar_matches_mindspore(tmp_path):
    sys.path.insert(0, E2E)
    import cifar_files
    data_dir = cifar_files.write_cifar10_bin(str(tmp_path / "cifar"))
    got, _ = run_on_minispore("resnet_cifar.py", "resnet_init.ckpt", tmp_path, "--data-dir", data_dir)
    assert_losses_match(got, expected("resnet"))


@pytest.mark.parametrize("mode", ["pynative", "jit"])
def test_nanogpt_matches_mindspore(tmp_path, mode):
    extra = ["--jit"] if mode == "jit" else []
    got, _ = run_on_minispore("nanogpt_shakespeare.py", "gpt_init.ckpt", tmp_path, "--data", DATA, *extra)
    assert_losses_match(got, expected("gpt_jit" if mode == "jit" else "gpt"))
