"""The training loop: bit-exact resume (also after Ctrl-C), config checks on resume, outputs
(metrics.json, loss.png), the learning-rate schedule and weight-decay groups, and that it learns."""
import json
import os
import signal
import sys

import numpy as np
import pytest

import minispore as ms
from minispore.common.errors import MissingExtraError, OpTypeError, OpValueError
from minispore.llm import Llama, LlamaConfig
from minispore.train.checkpoint_manager import CheckpointManager, ConfigMismatchError
from minispore.train.serialization import CheckpointError, load_checkpoint
from minispore.llm.trainer import TrainConfig, build_optimizer, decay_groups, train

METRIC_KEYS = {"final_train_loss", "final_val_loss", "iters", "tokens", "wall_time_s", "tokens_per_s"}


def tiny_model(dropout=0.1, **kw):
    base = dict(vocab_size=65, dim=32, n_layers=2, n_heads=2, max_seq_len=16, dropout=dropout, multiple_of=16)
    base.update(kw)
    return LlamaConfig(**base)


def tiny_train(out_dir, **kw):
    base = dict(out_dir=str(out_dir), max_iters=10, lr_decay_iters=10, batch_size=4, warmup_iters=2,
                eval_interval=4, eval_iters=2, final_eval_iters=2, ckpt_interval=4, progress=False, plot=False)
    base.update(kw)
    return TrainConfig(**base)


def saved_tensors(out_dir):
    """{name: ndarray} of the latest checkpoint (network and optimizer state)."""
    path = CheckpointManager(out_dir, create=False).latest()
    weights = load_checkpoint(os.path.join(path, "model.safetensors"), format="safetensors")
    return {n: p.asnumpy() for n, p in weights.items()}


def assert_same_state(a, b):
    assert sorted(a) == sorted(b)
    for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)


# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dropout", [0.0, 0.1])
def test_resume_reproduces_a_straight_run_bit_for_bit(tmp_path, dropout):
    mc = tiny_model(dropout)
    straight = train(mc, tiny_train(tmp_path / "a"))
    half = train(mc, tiny_train(tmp_path / "b", max_iters=5))
    assert half["iters"] == 5
    resumed = train(mc, tiny_train(tmp_path / "b", resume=True))
    assert resumed["iters"] == 10
    # losses of every iteration, including those before the resume (kept in the checkpoint)
    assert resumed["loss_history"]["train_loss"] == straight["loss_history"]["train_loss"]
    assert resumed["loss_history"]["lr"] == straight["loss_history"]["lr"]
    assert resumed["final_val_loss"] == straight["final_val_loss"]
    assert_same_state(saved_tensors(tmp_path / "a"), saved_tensors(tmp_path / "b"))


def test_ctrl_c_stops_after_the_iteration_saves_and_resumes_exactly(tmp_path):
    mc = tiny_model(0.1)
    straight = train(mc, tiny_train(tmp_path / "a", max_iters=8, lr_decay_iters=8, ckpt_interval=100))

    def press_ctrl_c(it, loss):
        if it == 3:
            signal.raise_signal(signal.SIGINT)       # what Ctrl-C delivers

    stopped = train(mc, tiny_train(tmp_path / "b", max_iters=8, lr_decay_iters=8, ckpt_interval=100),
                    callback=press_ctrl_c)
    assert stopped["interrupted"] and stopped["iters"] == 3
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler     # handler restored
    manager = CheckpointManager(tmp_path / "b", create=False)
    assert [s for s, _ in manager.checkpoints()] == [3]
    resumed = train(mc, tiny_train(tmp_path / "b", max_iters=8, lr_decay_iters=8, ckpt_interval=100, resume=True))
    assert resumed["loss_history"]["train_loss"] == straight["loss_history"]["train_loss"]
    assert_same_state(saved_tensors(tmp_path / "a"), saved_tensors(tmp_path / "b"))


def test_callback_can_stop_training(tmp_path):
    m = train(tiny_model(), tiny_train(tmp_path, ckpt_interval=100), callback=lambda it, loss: it == 2)
    assert m["interrupted"] and m["iters"] == 2
    assert [s for s, _ in CheckpointManager(tmp_path, create=False).checkpoints()] == [2]


def test_second_ctrl_c_raises_keyboard_interrupt_and_keeps_last_checkpoint(tmp_path):
    def press_twice(it, loss):
        if it == 5:
            signal.raise_signal(signal.SIGINT)
            signal.raise_signal(signal.SIGINT)

    with pytest.raises(KeyboardInterrupt):
        train(tiny_model(), tiny_train(tmp_path), callback=press_twice)
    # the checkpoint of iteration 4 is complete and loadable
    manager = CheckpointManager(tmp_path, create=False)
    assert [s for s, _ in manager.checkpoints()] == [4]
    net = Llama(tiny_model())
    assert manager.load("latest", net, restore_rng=False)["step"] == 4
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


# ------------------------------------------------------------------------------------------------
def test_resume_with_a_different_model_names_the_mismatch(tmp_path):
    train(tiny_model(), tiny_train(tmp_path, max_iters=4, ckpt_interval=4))
    with pytest.raises(ConfigMismatchError, match=r"model\.n_layers=2.*n_layers=3"):
        train(tiny_model(n_layers=3), tiny_train(tmp_path, resume=True))
    with pytest.raises(ConfigMismatchError, match="learning_rate"):
        train(tiny_model(), tiny_train(tmp_path, resume=True, learning_rate=3e-3))


def test_resume_without_a_checkpoint_is_an_error(tmp_path):
    with pytest.raises(CheckpointError, match="no checkpoint"):
        train(tiny_model(), tiny_train(tmp_path, resume=True))


def test_an_overwriting_run_replaces_old_checkpoints(tmp_path):
    # without overwrite=True (or resume=True) the second run is refused: test_trainer_lost_work.py
    train(tiny_model(), tiny_train(tmp_path, max_iters=8))
    train(tiny_model(), tiny_train(tmp_path, max_iters=4, lr_decay_iters=4, overwrite=True))
    assert [s for s, _ in CheckpointManager(tmp_path, create=False).checkpoints()] == [4]


def test_metrics_json_and_loss_plot(tmp_path):
    pytest.importorskip("matplotlib")
    m = train(tiny_model(), tiny_train(tmp_path, plot=True))
    on_disk = json.loads((tmp_path / "metrics.json").read_text())
    assert METRIC_KEYS <= set(on_disk)
    assert on_disk["iters"] == 10 and on_disk["tokens"] == 10 * 4 * 16
    assert on_disk["final_val_loss"] == m["final_val_loss"]
    assert on_disk["tokens_per_s"] > 0 and on_disk["wall_time_s"] >= on_disk["train_time_s"] > 0
    assert len(on_disk["loss_history"]["train_loss"]) == 10
    assert on_disk["eval_history"]["iter"] == [0, 4, 8, 10]
    assert on_disk["eval_history"]["val_loss"][0] > 4.0            # ~ ln(65) before training
    png = (tmp_path / "loss.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000


def test_missing_matplotlib_names_the_plot_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)          # makes `import matplotlib` fail
    with pytest.raises(MissingExtraError, match=r"minispore\[plot\]"):
        train(tiny_model(), tiny_train(tmp_path, max_iters=2, plot=True))


# ------------------------------------------------------------------------------------------------
def test_learning_rate_follows_warmup_then_cosine(tmp_path):
    tc = tiny_train(tmp_path, max_iters=12, lr_decay_iters=10, warmup_iters=3, learning_rate=1e-3, min_lr=1e-4)
    lrs = train(tiny_model(), tc)["loss_history"]["lr"]
    expected = []
    for it in range(12):
        if it < 3:
            expected.append(1e-3 * (it + 1) / 4)
        elif it > 10:
            expected.append(1e-4)
        else:
            r = (it - 3) / (10 - 3)
            expected.append(1e-4 + 0.5 * (1 + np.cos(np.pi * r)) * (1e-3 - 1e-4))
    np.testing.assert_allclose(lrs, expected, rtol=1e-12)


@pytest.mark.parametrize("name", ["adamw", "adamweightdecay"])
def test_weight_decay_applies_to_matrices_only(name, tmp_path):
    net = Llama(tiny_model())
    decay, no_decay = decay_groups(net)
    assert {p.name for p in no_decay} == {n for n, _ in net.parameters_and_names() if n.endswith("norm.weight")}
    assert all(p.ndim == 2 for p in decay)
    opt, schedule = build_optimizer(net, tiny_train(tmp_path, optimizer=name, weight_decay=0.5))
    # a zero gradient: only weight decay moves parameters, and only the decayed ones
    before = {p.name: p.asnumpy().copy() for p in net.trainable_params()}
    opt(tuple(ms.ops.zeros_like(p) for p in opt.parameters))
    for p in net.trainable_params():
        moved = not np.array_equal(p.asnumpy(), before[p.name])
        assert moved == (p.ndim == 2), p.name


def test_training_reduces_the_loss(tmp_path):
    mc = LlamaConfig(vocab_size=65, dim=48, n_layers=2, n_heads=4, max_seq_len=32, dropout=0.0, multiple_of=16)
    tc = tiny_train(tmp_path, max_iters=80, lr_decay_iters=80, batch_size=8, warmup_iters=10, learning_rate=3e-3,
                    eval_interval=100, eval_iters=4, final_eval_iters=8, ckpt_interval=100)
    m = train(mc, tc)
    first = np.mean(m["loss_history"]["train_loss"][:5])
    assert first > 4.0                                   # ~ ln(65): uniform guessing
    assert m["final_val_loss"] < 3.3                     # character frequencies and common bigrams learned
    assert m["final_train_loss"] < first - 0.9


# ------------------------------------------------------------------------------------------------
def test_train_config_validation_and_presets():
    tc = TrainConfig.from_preset("shakespeare-char", max_iters=10, batch_size=None)
    assert tc.max_iters == 10 and tc.batch_size == 12 and tc.learning_rate == 1e-3 and tc.beta2 == 0.99
    assert tc.decay_iters == 2000                         # the preset's lr_decay_iters is kept
    with pytest.raises(OpValueError, match="max_iters"):
        TrainConfig(max_iters=0)
    with pytest.raises(OpValueError, match="optimizer"):
        TrainConfig(optimizer="sgd")
    with pytest.raises(OpValueError, match="lr_decay_iters"):
        TrainConfig(max_iters=50, warmup_iters=100)
    with pytest.raises(OpValueError, match="beta2"):
        TrainConfig(beta2=1.0)
    with pytest.raises(OpTypeError, match="train"):
        train({"dim": 32}, TrainConfig())
    with pytest.raises(OpValueError, match="vocab_size"):
        train(LlamaConfig(vocab_size=50, dim=32, n_layers=1, n_heads=2, max_seq_len=16),
              TrainConfig(max_iters=1, warmup_iters=0))
