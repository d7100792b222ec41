"""Running `minispore train` as a child process, as a user does, and reading what it leaves.

The trials need a run that is cheap to start and interrupt, yet does everything a real one does:
the tiniest model the CLI accepts (1 layer, 32 wide, context 16, batch 4) with dropout on (so a
resumed run is bit-exact only if the random state is restored too), checkpoints every few
iterations, evaluation only at the start and the end.

Checkpoint contents are read back with the `safetensors` package, not with minispore, so the
comparison of a resumed run with an uninterrupted one does not trust the code under test.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

TINY_FLAGS = ["--n-layers", "1", "--dim", "32", "--n-heads", "2", "--block-size", "16", "--batch-size", "4",
              "--dropout", "0.1", "--eval-iters", "1", "--final-eval-iters", "1", "--eval-interval", "100000",
              "--no-progress", "--no-plot"]
TRACEBACK = "Traceback (most recent call last)"


def train_command(out_dir, max_iters: int, ckpt_interval: int, resume: bool = False) -> list[str]:
    cmd = [sys.executable, "-m", "minispore", "train", "--out", str(out_dir), "--max-iters", str(max_iters),
           "--ckpt-interval", str(ckpt_interval), *TINY_FLAGS]
    return cmd + ["--resume"] if resume else cmd


def child_env() -> dict:
    """The environment of a child run: this one, with unbuffered output (a killed child's last
    lines are then in its log) and the BLAS single-threaded (trials may run side by side)."""
    return {**os.environ, "PYTHONUNBUFFERED": "1", "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}


class Child:
    """A child process whose stdout and stderr go to files (a pipe nobody reads could block it)."""

    def __init__(self, cmd, log_prefix):
        self.cmd = cmd
        self.out_path, self.err_path = f"{log_prefix}.stdout", f"{log_prefix}.stderr"
        self._out = open(self.out_path, "wb")
        self._err = open(self.err_path, "wb")
        # run in the trial's folder, so `python -m minispore` is the installed package, never a
        # `minispore/` folder that happens to be in the current directory
        self.proc = subprocess.Popen(cmd, stdout=self._out, stderr=self._err, stdin=subprocess.DEVNULL,
                                     env=child_env(), cwd=os.path.dirname(os.path.abspath(log_prefix)))
        self.hung = False

    def send(self, signum):
        if self.proc.poll() is None:
            self.proc.send_signal(signum)

    def wait(self, timeout: float) -> int | None:
        """The exit status (negative: killed by that signal), or None after killing a hung child."""
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.hung = True
            self.proc.kill()
            self.proc.wait()
            return None
        finally:
            if self.proc.poll() is not None:
                self._out.close()
                self._err.close()

    def stderr(self) -> str:
        with open(self.err_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def stdout(self) -> str:
        with open(self.out_path, "rb") as f:
            return f.read().decode("utf-8", "replace")


def run(cmd, log_prefix, timeout: float):
    """Run `cmd` to the end: (exit status or None if it hung, stderr text)."""
    child = Child(cmd, log_prefix)
    rc = child.wait(timeout)
    return rc, child.stderr()


def wait_for(predicate, child: Child, timeout: float, poll: float = 0.01) -> bool:
    """Poll until `predicate()` holds (True), the child exits or `timeout` passes (False)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        if child.proc.poll() is not None:
            return predicate()
        time.sleep(poll)
    return False


def checkpoint_tensors(ckpt_dir) -> dict:
    """{name: ndarray} of a checkpoint's model.safetensors, read by the safetensors package."""
    from safetensors.numpy import load_file
    return load_file(os.path.join(ckpt_dir, "model.safetensors"))


def checkpoint_state(ckpt_dir) -> dict:
    with open(os.path.join(ckpt_dir, "state.json"), encoding="utf-8") as f:
        return json.load(f)


def bit_equal(a: dict, b: dict) -> list[str]:
    """Names whose arrays differ in any bit (or exist on one side only); [] when identical."""
    diff = sorted(set(a) ^ set(b))
    for name in sorted(set(a) & set(b)):
        x, y = a[name], b[name]
        if x.dtype != y.dtype or x.shape != y.shape or x.tobytes() != y.tobytes():
            diff.append(name)
    return diff


def final_state(run_dir, step: int):
    """(tensors, loss history) of checkpoint `step` of a run: what must match bit for bit."""
    ckpt = os.path.join(run_dir, f"ckpt-{step:06d}")
    state = checkpoint_state(ckpt)
    return checkpoint_tensors(ckpt), state["extra_state"].get("history")


def reference_run(work_dir, max_iters: int, ckpt_interval: int, timeout: float = 300):
    """An uninterrupted run of `max_iters` iterations: (tensors, history) of its final checkpoint."""
    out = os.path.join(work_dir, f"reference-{max_iters}")
    rc, err = run(train_command(out, max_iters, ckpt_interval), out, timeout)
    if rc != 0:
        raise RuntimeError(f"the uninterrupted reference run failed (exit status {rc}):\n{err[-3000:]}")
    return final_state(out, max_iters)


def describe_status(rc) -> str:
    if rc is None:
        return "hung"
    if rc < 0:
        return f"killed by {signal.Signals(-rc).name}"
    return f"exit status {rc}"


def last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


__all__ = ["TINY_FLAGS", "TRACEBACK", "train_command", "Child", "run", "wait_for", "checkpoint_tensors",
           "checkpoint_state", "bit_equal", "final_state", "reference_run", "describe_status", "last_line"]
