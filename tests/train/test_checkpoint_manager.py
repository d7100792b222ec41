"""CheckpointManager: complete training state, atomic saves that survive crashes and Ctrl-C,
validated loads, config comparison, and bit-exact resume of a (toy) training loop."""
import hashlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import minispore as ms
from minispore.common import context
from minispore.common.errors import OpTypeError, OpValueError
from minispore.dataset import BatchSampler
from minispore.train import (CheckpointError, CheckpointManager, ConfigMismatchError, check_config,
                             deferred_interrupt, load_checkpoint)
from minispore.train import checkpoint_manager as cm


class FakeNet:
    """Duck-typed Cell (the manager only needs parameters_and_names())."""

    def __init__(self, scale=1.0, shape=(4, 3)):
        self.w = ms.Parameter(np.full(shape, scale, np.float32), name="layer.w")
        self.b = ms.Parameter(np.zeros(shape[1], np.float32), name="layer.b")

    def parameters_and_names(self):
        return [("layer.w", self.w), ("layer.b", self.b)]


class FakeMomentum:
    """Duck-typed optimizer Cell: reaches the net's Parameters (as MindSpore optimizers do) and owns
    one momentum buffer per parameter plus a step counter, named like MindSpore's."""

    def __init__(self, net):
        self.params = [net.w, net.b]
        self.moments = [ms.Parameter(np.zeros(p.shape, np.float32), name=f"moments.{p.name}") for p in self.params]
        self.global_step = ms.Parameter(np.array(0, np.int32), name="global_step")

    def parameters_and_names(self):
        return ([(p.name, p) for p in self.params] + [(m.name, m) for m in self.moments]
                + [("global_step", self.global_step)])

    def step(self, grads, lr=0.1):
        for p, m, g in zip(self.params, self.moments, grads):
            m.set_data(ms.Tensor(0.9 * m.asnumpy() + g))
            p.set_data(ms.Tensor(p.asnumpy() - np.float32(lr) * m.asnumpy()))
        self.global_step.set_data(ms.Tensor(self.global_step.asnumpy() + 1))


def _train(net, opt, sampler, steps):
    """A toy loop that uses everything a real one does: sampled batches, the global RNG, the
    optimizer state. Returns the per-step 'losses'."""
    losses = []
    for _ in range(steps):
        x, y = sampler.next_batch()
        noise = context.rng().standard_normal(net.w.shape).astype(np.float32)
        gw = np.float32(x.mean() - y.mean()) + 0.01 * noise + 0.1 * net.w.asnumpy()
        gb = np.full(net.b.shape, np.float32(y[:, -1].mean() / 100), np.float32)
        opt.step([gw, gb])
        losses.append(float((net.w.asnumpy() ** 2).sum()))
    return losses


DATA = np.arange(500, dtype=np.int64) % 37


def _setup(seed=0):
    ms.set_seed(seed)
    net = FakeNet()
    return net, FakeMomentum(net), BatchSampler(DATA, batch_size=4, block_size=8, seed=seed + 1)


def _state(net, opt):
    return {n: p.asnumpy().copy() for n, p in opt.parameters_and_names()}


# ------------------------------------------------------------------------------------------ round trip
def test_training_2n_straight_equals_n_then_resume_n_bit_for_bit(tmp_path):
    net, opt, sampler = _setup()
    straight = _train(net, opt, sampler, 10)
    expected = _state(net, opt)

    net, opt, sampler = _setup()
    first = _train(net, opt, sampler, 5)
    CheckpointManager(tmp_path).save(5, net, opt, {"losses": first}, config={"lr": 0.1}, sampler=sampler)
    _train(net, opt, sampler, 3)                                   # diverge, then come back

    ms.set_seed(999)                                               # a fresh process would start elsewhere
    net2 = FakeNet(scale=-3.0)
    opt2 = FakeMomentum(net2)
    sampler2 = BatchSampler(DATA, batch_size=4, block_size=8, seed=12345)
    extra = CheckpointManager(tmp_path).load("latest", net2, opt2, config={"lr": 0.1}, sampler=sampler2)
    assert extra == {"losses": first, "step": 5}
    resumed = first + _train(net2, opt2, sampler2, 5)
    assert resumed == straight                                     # float equality: bit for bit
    for name, value in _state(net2, opt2).items():
        assert value.tobytes() == expected[name].tobytes(), name
    assert int(opt2.global_step.asnumpy()) == 10


def test_layout_state_json_and_mindspore_names(tmp_path):
    net, opt, sampler = _setup()
    mgr = CheckpointManager(tmp_path / "out")
    path = mgr.save(7, net, opt, {"best_val": np.float32(1.5)}, config={"model": {"n_layers": 4}}, sampler=sampler)
    assert path == str(tmp_path / "out" / "ckpt-000007")
    assert sorted(os.listdir(tmp_path / "out")) == ["ckpt-000007", "latest"]
    assert sorted(os.listdir(path)) == ["model.safetensors", "state.json"]
    assert open(tmp_path / "out" / "latest").read() == "ckpt-000007\n"
    state = json.load(open(os.path.join(path, "state.json")))
    assert state["step"] == 7 and state["minispore_version"] == ms.__version__
    assert state["config"] == {"model": {"n_layers": 4}} and state["extra_state"] == {"best_val": 1.5}
    assert state["model_sha256"] == hashlib.sha256(open(os.path.join(path, "model.safetensors"), "rb").read()).hexdigest()
    assert state["net_params"] == ["layer.w", "layer.b"]
    assert state["optimizer_params"] == ["moments.layer.w", "moments.layer.b", "global_step"]
    assert state["tensors"]["global_step"] == {"dtype": "Int32", "shape": []}
    assert state["sampler_state"] == json.loads(json.dumps(sampler.state_dict()))
    assert state["rng_state"] == json.loads(json.dumps(context.get_rng_state()))
    # the weights file is an ordinary MindSpore-style checkpoint
    d = load_checkpoint(os.path.join(path, "model.safetensors"), crc_check=True, format="safetensors")
    assert sorted(d) == ["global_step", "layer.b", "layer.w", "moments.layer.b", "moments.layer.w"]


def test_keep_prunes_old_checkpoints_and_resave_replaces(tmp_path):
    net, opt, _ = _setup()
    mgr = CheckpointManager(tmp_path, keep=2)
    for step in range(1, 6):
        net.w.set_data(ms.Tensor(np.full((4, 3), step, np.float32)))
        mgr.save(step, net, opt)
    assert [s for s, _ in mgr.checkpoints()] == [4, 5]
    assert sorted(os.listdir(tmp_path)) == ["ckpt-000004", "ckpt-000005", "latest"]
    net.w.set_data(ms.Tensor(np.full((4, 3), 50, np.float32)))
    mgr.save(5, net, opt)                                          # same step again: replaced
    net2 = FakeNet()
    assert mgr.load("latest", net2)["step"] == 5
    np.testing.assert_array_equal(net2.w.asnumpy(), 50)
    assert mgr.load(4, net2)["step"] == 4                          # by step number
    np.testing.assert_array_equal(net2.w.asnumpy(), 4)
    assert CheckpointManager(tmp_path / "all", keep=None).keep is None
    with pytest.raises(OpValueError):
        CheckpointManager(tmp_path, keep=0)


# ------------------------------------------------------------------------------------------ crash safety
@pytest.mark.parametrize("resave", [False, True], ids=["new-step", "same-step"])
def test_a_crash_at_any_file_operation_leaves_a_loadable_latest(tmp_path, monkeypatch, resave):
    """Fail the k-th file-system call of a save, for every k: `latest` is always the old or the new
    checkpoint, complete, and the next save cleans up and succeeds. `same-step` re-saves step 1
    (which must move the old directory aside and back on failure)."""
    import builtins
    calls = ("replace", "rename", "fsync", "mkdir", "chmod", "remove", "open")
    new_step, new_value = (1, 10) if resave else (2, 2)

    def loaded(path):
        net = FakeNet()
        step = CheckpointManager(os.path.dirname(path)).load(path, net, restore_rng=False)["step"]
        values = np.unique(net.w.asnumpy())
        assert len(values) == 1, path
        return step, int(values[0])

    def run(k, d):
        """Save step 1, then save `new_step` with the k-th file-system call failing (k=0: none
        fails). Returns (number of calls the save made, whether it raised)."""
        mgr = CheckpointManager(d)
        net, opt, _ = _setup()
        net.w.set_data(ms.Tensor(np.full((4, 3), 1, np.float32)))
        mgr.save(1, net, opt)
        net.w.set_data(ms.Tensor(np.full((4, 3), new_value, np.float32)))
        count = [0]

        def failing(real):
            def f(*a, **kw):
                count[0] += 1
                if count[0] == k:
                    raise OSError(5, f"injected failure at call {k}")
                return real(*a, **kw)
            return f

        for name in calls:
            target = builtins if name == "open" else os
            monkeypatch.setattr(target, name, failing(getattr(target, name)))
        try:
            mgr.save(new_step, net, opt)
            crashed = False
        except (OSError, CheckpointError):
            crashed = True
        finally:
            monkeypatch.undo()
        latest = mgr.latest()
        assert latest is not None
        got = loaded(latest)                                       # complete, consistent, loadable
        assert got in ((1, 1), (new_step, new_value)) and (crashed or got == (new_step, new_value))
        if crashed:
            net.w.set_data(ms.Tensor(np.full((4, 3), 3, np.float32)))
            mgr.save(3, net, opt)                                  # recovers and cleans leftovers
            assert not [n for n in os.listdir(d) if n.startswith(".")]
            assert loaded(mgr.latest()) == (3, 3)
            assert loaded(mgr.path_for(1)) in ((1, 1), (1, new_value))   # step 1 was never lost
        return count[0], crashed

    total, crashed = run(0, tmp_path / "dry")
    assert not crashed and total > 10                              # the save really has that many steps
    outcomes = [run(k, tmp_path / f"run{k}")[1] for k in range(1, total + 1)]
    assert sum(outcomes) > total // 2                              # most injected failures do abort the save


_CHILD = textwrap.dedent("""
    import os, sys, time
    import numpy as np
    import minispore as ms
    from minispore.train import CheckpointManager, deferred_interrupt, atomic_io

    class Net:
        def __init__(self):
            self.w = ms.Parameter(np.zeros((256, 256), np.float32), name="w")
        def parameters_and_names(self):
            return [("w", self.w)]

    mode, out = sys.argv[1], sys.argv[2]
    real_write = atomic_io.atomic_write_bytes
    if mode == "sigint":                      # a slow disk: the interrupt lands in the middle of a save
        def slow_write(path, data, mode=0o400):
            if path.endswith(".safetensors"):
                print("in-save", flush=True)
                time.sleep(0.5)
            return real_write(path, data, mode)
        atomic_io.atomic_write_bytes = slow_write
        import minispore.train.serialization as ser
        ser.atomic_write_bytes = slow_write
    mgr, net = CheckpointManager(out, keep=2), Net()
    step = 0
    try:
        while True:
            step += 1
            net.w.set_data(ms.Tensor(np.full((256, 256), step, np.float32)))
            with deferred_interrupt():
                mgr.save(step, net)
            print("saved", step, flush=True)
    except KeyboardInterrupt:
        print("interrupted after", step, flush=True)
        sys.exit(130)
""")


def _spawn(tmp_path, mode):
    script = tmp_path / "child.py"
    script.write_text(_CHILD)
    return subprocess.Popen([sys.executable, str(script), mode, str(tmp_path / "out")], stdout=subprocess.PIPE,
                            text=True, cwd=str(tmp_path))


def test_sigkill_mid_save_never_breaks_latest(tmp_path):
    proc = _spawn(tmp_path, "kill")
    try:
        saved = 0
        while saved < 4:                       # let it get going, then kill it wherever it is
            line = proc.stdout.readline()
            assert line, "child exited early"
            if line.startswith("saved"):
                saved += 1
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        proc.kill()
        proc.stdout.close()
    mgr = CheckpointManager(tmp_path / "out")
    latest = mgr.latest()
    net_w = ms.Parameter(np.zeros((256, 256), np.float32), name="w")

    class Net:
        def parameters_and_names(self):
            return [("w", net_w)]

    step = mgr.load("latest", Net(), restore_rng=False)["step"]
    assert step >= 4 and np.all(net_w.asnumpy() == step)
    assert latest.endswith(f"ckpt-{step:06d}")


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_ctrl_c_during_save_finishes_the_save_then_stops(tmp_path):
    proc = _spawn(tmp_path, "sigint")
    try:
        lines = []
        while True:
            line = proc.stdout.readline()
            assert line, f"child exited early: {lines}"
            lines.append(line.strip())
            if line.startswith("in-save") and any(x.startswith("saved") for x in lines):
                break
        in_progress = sum(x.startswith("saved") for x in lines) + 1
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130
    assert f"interrupted after {in_progress}" in rest
    assert f"saved {in_progress}" not in rest                      # the loop stopped right after the save
    mgr = CheckpointManager(tmp_path / "out")
    assert mgr.latest().endswith(f"ckpt-{in_progress:06d}")        # the interrupted save completed


def test_deferred_interrupt_in_process():
    done = []
    with pytest.raises(KeyboardInterrupt):
        with deferred_interrupt():
            signal.raise_signal(signal.SIGINT)
            done.append("body finished")
    assert done == ["body finished"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    with pytest.raises(KeyboardInterrupt):                         # a second Ctrl-C aborts at once
        with deferred_interrupt():
            signal.raise_signal(signal.SIGINT)
            signal.raise_signal(signal.SIGINT)
            done.append("not reached")
    assert done == ["body finished"]
    with deferred_interrupt():                                     # no signal: nothing happens
        done.append("quiet")
    with pytest.raises(ValueError, match="boom"):                  # the body's own error wins
        with deferred_interrupt():
            signal.raise_signal(signal.SIGINT)
            raise ValueError("boom")
    result = []
    t = threading.Thread(target=lambda: result.append(_run_in_thread()))
    t.start()
    t.join()
    assert result == ["ok"]


def _run_in_thread():
    with deferred_interrupt():                                     # not the main thread: a no-op
        return "ok"


# ------------------------------------------------------------------------------------------ validated loads
def test_config_mismatch_names_the_fields(tmp_path):
    net, opt, _ = _setup()
    mgr = CheckpointManager(tmp_path)
    saved = {"model": {"n_layers": 4, "dim": 128}, "max_iters": 2000, "eval_interval": 250}
    mgr.save(1, net, opt, config=saved)
    before = net.w.asnumpy().copy()
    net.w.set_data(ms.Tensor(before + 1))
    current = {"model": {"n_layers": 6, "dim": 128}, "max_iters": 4000, "eval_interval": 250}
    with pytest.raises(ConfigMismatchError) as info:
        mgr.load("latest", net, opt, config=current)
    msg = str(info.value)
    assert "checkpoint was trained with model.n_layers=4, current config has model.n_layers=6" in msg
    assert "max_iters=2000" in msg and "dim" not in msg
    np.testing.assert_array_equal(net.w.asnumpy(), before + 1)    # nothing was loaded
    mgr.load("latest", net, opt, config={**current, "model": saved["model"]}, ignore_config=("max_iters",))
    np.testing.assert_array_equal(net.w.asnumpy(), before)


def test_check_config_rules():
    from dataclasses import dataclass

    @dataclass
    class Cfg:
        n_layers: int = 4
        shape: tuple = (1, 2)

    check_config(Cfg(), {"n_layers": 4, "shape": [1, 2]})         # dataclass vs dict, tuple vs list
    with pytest.raises(ConfigMismatchError, match="checkpoint was trained with n_layers=4, current config "
                                                  "has n_layers=6"):
        check_config(Cfg(), Cfg(n_layers=6))
    with pytest.raises(ConfigMismatchError, match="current config has no field 'shape'"):
        check_config(Cfg(), {"n_layers": 4})
    with pytest.raises(ConfigMismatchError, match="checkpoint config has no field 'extra'"):
        check_config({"a": 1}, {"a": 1, "extra": True})
    with pytest.raises(ConfigMismatchError, match="a=1, current config has a=True"):
        check_config({"a": 1}, {"a": True})                        # 1 == True in Python, not here
    check_config({"train": {"lr": 1e-3, "iters": 5}}, {"train": {"lr": 1e-3, "iters": 9}}, ignore=("train.iters",))
    check_config({"train": {"lr": 1}}, {"train": {"lr": 2}}, ignore=("train",))


def test_model_mismatch_is_reported_before_anything_changes(tmp_path):
    net, opt, sampler = _setup()
    mgr = CheckpointManager(tmp_path)
    mgr.save(1, net, opt, sampler=sampler)
    wrong_shape = FakeNet(shape=(4, 5))
    with pytest.raises(CheckpointError, match=r"'layer.w' is Float32\[4, 3\] in the checkpoint but "
                                              r"Float32\[4, 5\] in the current model"):
        mgr.load("latest", wrong_shape)

    class Bigger(FakeNet):
        def __init__(self):
            super().__init__(scale=5.0)
            self.extra = ms.Parameter(np.zeros(2, np.float32), name="layer.extra")

        def parameters_and_names(self):
            return super().parameters_and_names() + [("layer.extra", self.extra)]

    bigger = Bigger()
    with pytest.raises(CheckpointError, match=r"current net has parameters the checkpoint lacks \(layer.extra\)"):
        mgr.load("latest", bigger)
    np.testing.assert_array_equal(bigger.w.asnumpy(), 5.0)
    rng_before = context.get_rng_state()
    sampler_before = sampler.state_dict()
    mgr2 = CheckpointManager(tmp_path / "noopt")
    mgr2.save(1, net)                                              # no optimizer state saved
    with pytest.raises(CheckpointError, match="checkpoint lacks"):
        mgr2.load("latest", net, opt)
    assert context.get_rng_state() == rng_before and sampler.state_dict() == sampler_before
    with pytest.raises(CheckpointError, match="no sampler state"):
        mgr2.load("latest", net, sampler=sampler)
    other = BatchSampler(DATA, batch_size=5, block_size=8, seed=0)
    with pytest.raises(OpValueError, match="batch_size=4"):
        mgr.load("latest", net, opt, sampler=other)


def test_tampered_files_are_rejected(tmp_path):
    net, opt, _ = _setup()
    mgr = CheckpointManager(tmp_path)
    path = mgr.save(3, net, opt)
    model = os.path.join(path, "model.safetensors")
    os.chmod(model, 0o600)
    raw = bytearray(open(model, "rb").read())
    raw[-1] ^= 1
    open(model, "wb").write(bytes(raw))
    with pytest.raises(CheckpointError, match="does not match the sha256"):
        mgr.load("latest", net, opt)
    state_path = os.path.join(path, "state.json")
    os.chmod(state_path, 0o600)
    open(state_path, "w").write("{ not json")
    with pytest.raises(CheckpointError, match="is not valid JSON"):
        mgr.load("latest", net, opt)
    open(state_path, "w").write(json.dumps({"step": 3}))
    with pytest.raises(CheckpointError, match="lacks a valid 'format_version'"):
        mgr.load("latest", net, opt)
    with pytest.raises(CheckpointError, match="holds no complete checkpoint"):
        CheckpointManager(tmp_path / "empty").load("latest", net)


def test_latest_pointer_is_never_followed_outside_the_directory(tmp_path):
    net, opt, _ = _setup()
    mgr = CheckpointManager(tmp_path / "out")
    mgr.save(1, net, opt)
    mgr.save(2, net, opt)
    evil = tmp_path / "evil"
    CheckpointManager(evil).save(99, net, opt)
    open(tmp_path / "out" / "latest", "w").write("../evil/ckpt-000099\n")
    assert mgr.latest() == str(tmp_path / "out" / "ckpt-000002")   # falls back to the newest real one
    os.remove(tmp_path / "out" / "latest")
    assert mgr.latest() == str(tmp_path / "out" / "ckpt-000002")
    assert cm.find_checkpoint(tmp_path / "out") == str(tmp_path / "out" / "ckpt-000002")
    assert cm.read_state(tmp_path / "out" / "ckpt-000001")["step"] == 1


def test_extra_state_conversions_and_errors(tmp_path):
    net, opt, _ = _setup()
    mgr = CheckpointManager(tmp_path)
    mgr.save(2, net, opt, {"arr": np.arange(3), "f": np.float64(0.5), "t": (1, 2), "nested": {"k": [np.int8(3)]}})
    assert mgr.load("latest", net) == {"arr": [0, 1, 2], "f": 0.5, "t": [1, 2], "nested": {"k": [3]}, "step": 2}
    with pytest.raises(OpTypeError, match=r"extra_state\['bad'\]\[1\]"):
        mgr.save(3, net, opt, {"bad": [1, object()]})
    with pytest.raises(OpValueError, match="step"):
        mgr.save(3, net, opt, {"step": 4})
    with pytest.raises(OpValueError, match="'step' as an int"):
        mgr.save(-1, net, opt)
    with pytest.raises(OpTypeError, match="'net' to be a Cell"):
        mgr.save(3, object(), opt)
    assert [s for s, _ in mgr.checkpoints()] == [2]                # failed saves wrote nothing
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".")]
