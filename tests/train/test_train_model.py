"""mindspore.train.Model, its callbacks and metrics, checked against independent NumPy computations
(the MindSpore-vs-minispore comparison lives in tests/fidelity/cases/train_api.py)."""
import contextlib
import io
import os
import re

import numpy as np
import pytest

import minispore as ms
from minispore import nn
from minispore.common.errors import MinisporeError, OpTypeError, OpValueError
from minispore.dataset import GeneratorDataset, NumpySlicesDataset
from minispore.train import (Accuracy, Callback, CheckpointConfig, EarlyStopping, F1, History, LambdaCallback, Loss,
                             LossMonitor, MAE, MSE, Model, ModelCheckpoint, Precision, ProgressBar, Recall,
                             TimeMonitor, Top1CategoricalAccuracy, TopKCategoricalAccuracy)

N, D, C, B = 10, 4, 3, 4


def _data(seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(N, D)).astype(np.float32), rng.integers(0, C, N).astype(np.int32)


def _ds(seed=0, batch=B):
    x, y = _data(seed)
    return NumpySlicesDataset((x, y), ["data", "label"], shuffle=False).batch(batch)


def _net(seed=1):
    net = nn.Dense(D, C)
    rng = np.random.default_rng(seed)
    net.weight.set_data(ms.Tensor(rng.uniform(-0.5, 0.5, (C, D)).astype(np.float32)))
    net.bias.set_data(ms.Tensor(rng.uniform(-0.5, 0.5, (C,)).astype(np.float32)))
    return net


def _model(lr=0.1, momentum=0.9, metrics=None, net=None):
    net = net or _net()
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    opt = nn.Momentum(net.trainable_params(), learning_rate=lr, momentum=momentum)
    return net, Model(net, loss, opt, metrics=metrics)


class Recorder(Callback):
    def __init__(self):
        self.losses, self.steps = [], []

    def on_train_step_end(self, run_context):
        cb = run_context.original_args()
        self.losses.append(float(cb.net_outputs.asnumpy()))
        self.steps.append((cb.cur_epoch_num, cb.cur_step_num))


def _numpy_training(epochs, lr=0.1, momentum=0.9):
    """The same Dense + softmax cross-entropy + Momentum run in float64 NumPy: the oracle."""
    rng = np.random.default_rng(1)
    w = rng.uniform(-0.5, 0.5, (C, D)).astype(np.float32).astype(np.float64)
    b = rng.uniform(-0.5, 0.5, (C,)).astype(np.float32).astype(np.float64)
    vw, vb = np.zeros_like(w), np.zeros_like(b)
    x_all, y_all = _data()
    losses = []
    for _ in range(epochs):
        for s in range(0, N, B):
            x, y = x_all[s:s + B].astype(np.float64), y_all[s:s + B]
            logits = x @ w.T + b
            z = logits - logits.max(1, keepdims=True)
            p = np.exp(z) / np.exp(z).sum(1, keepdims=True)
            losses.append(-np.log(p[np.arange(len(y)), y]).mean())
            g = p.copy()
            g[np.arange(len(y)), y] -= 1
            g /= len(y)
            gw, gb = g.T @ x, g.sum(0)
            vw, vb = momentum * vw + gw, momentum * vb + gb       # MindSpore's Momentum: v = m*v + g; p -= lr*v
            w, b = w - lr * vw, b - lr * vb
    return np.array(losses), w, b


def _printed(fn):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        fn()
    return out.getvalue()


# -- training ---------------------------------------------------------------------------------------
def test_train_losses_and_parameters_match_a_numpy_loop():
    rec = Recorder()
    net, model = _model()
    model.train(3, _ds(), callbacks=[rec])
    losses, w, b = _numpy_training(3)
    np.testing.assert_allclose(rec.losses, losses, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(net.weight.asnumpy(), w, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(net.bias.asnumpy(), b, rtol=1e-4, atol=1e-5)
    assert rec.steps == [(e, s) for e in (1, 2, 3) for s in range((e - 1) * 3 + 1, e * 3 + 1)]
    assert type(model.train_network).__name__ == "TrainOneStepCell"


def test_sink_mode_true_is_the_same_loop_on_cpu():
    a, b = Recorder(), Recorder()
    _model()[1].train(2, _ds(), callbacks=a, dataset_sink_mode=False)
    _model()[1].train(2, _ds(), callbacks=b, dataset_sink_mode=True)
    assert a.losses == b.losses and a.steps == b.steps


def test_generator_dataset_works_as_train_data():
    x, y = _data()
    rec = Recorder()
    ds = GeneratorDataset(lambda: ((x[i], y[i]) for i in range(N)), ["data", "label"]).batch(B)
    _model()[1].train(1, ds, callbacks=[rec])
    np.testing.assert_allclose(rec.losses, _numpy_training(1)[0], rtol=1e-5, atol=1e-6)


def test_initial_epoch_and_request_stop():
    class StopAt(Callback):
        def on_train_step_end(self, run_context):
            if run_context.original_args().cur_step_num == 4:
                run_context.request_stop()
    rec = Recorder()
    _model()[1].train(5, _ds(), callbacks=[rec, StopAt()], initial_epoch=2)
    assert rec.steps == [(3, 1), (3, 2), (3, 3), (4, 4)]


def test_hook_order_and_old_names():
    calls = []

    class Both(Callback):
        def begin(self, rc):
            calls.append("begin")

        def on_train_epoch_begin(self, rc):
            calls.append("epoch_begin")

        def step_begin(self, rc):
            calls.append("step_begin")

        def on_train_step_end(self, rc):
            calls.append("step_end")

        def epoch_end(self, rc):
            calls.append("epoch_end")

        def end(self, rc):
            calls.append("end")
    _model()[1].train(1, _ds(batch=5), callbacks=Both())
    assert calls == ["begin", "epoch_begin", "step_begin", "step_end", "step_begin", "step_end", "epoch_end", "end"]


def test_lambda_callback_and_history():
    ends = []
    hist = History()
    rec = Recorder()
    _model()[1].train(2, _ds(), callbacks=[rec, hist, LambdaCallback(
        on_train_epoch_end=lambda rc: ends.append(rc.original_args().cur_epoch_num))])
    assert ends == [1, 2] and hist.epoch == {"epoch": [1, 2]}
    np.testing.assert_allclose(hist.history["net_output"], [rec.losses[2], rec.losses[5]], rtol=1e-6)


# -- LossMonitor / TimeMonitor / ProgressBar ------------------------------------------------------
def test_loss_monitor_prints_mindspore_lines():
    rec = Recorder()
    text = _printed(lambda: _model()[1].train(2, _ds(), callbacks=[rec, LossMonitor(2)]))
    lines = text.splitlines()
    assert [ln.rsplit(" ", 1)[0] for ln in lines] == ["epoch: 1 step: 2, loss is", "epoch: 2 step: 1, loss is",
                                                      "epoch: 2 step: 3, loss is"]
    assert [float(ln.rsplit(" ", 1)[1]) for ln in lines] == [rec.losses[1], rec.losses[3], rec.losses[5]]
    # the printed number is the float32 loss's float64 repr
    assert lines[0].rsplit(" ", 1)[1] == repr(float(np.float32(rec.losses[1])))


def test_loss_monitor_stops_on_nan():
    x, y = _data()
    x[0, 0] = np.nan
    ds = NumpySlicesDataset((x, y), ["data", "label"], shuffle=False).batch(B)
    with pytest.raises(OpValueError, match="LossMonitor"):
        _printed(lambda: _model()[1].train(1, ds, callbacks=[LossMonitor()]))


def test_time_monitor_line():
    text = _printed(lambda: _model()[1].train(1, _ds(), callbacks=[TimeMonitor()]))
    assert re.fullmatch(r"Train epoch time: \d+\.\d{3} ms, per step time: \d+\.\d{3} ms\n", text)


def test_progress_bar_counts_steps():
    out = io.StringIO()
    _model()[1].train(2, _ds(), callbacks=[ProgressBar(file=out)])
    text = out.getvalue()
    assert "epoch 1/2" in text and "epoch 2/2" in text and "3/3" in text and "loss=" in text


# -- ModelCheckpoint ------------------------------------------------------------------------------
def test_checkpoint_names_keep_max_and_contents(tmp_path):
    net, model = _model()
    ck = ModelCheckpoint("lenet", str(tmp_path), CheckpointConfig(save_checkpoint_steps=2, keep_checkpoint_max=2))
    model.train(2, _ds(), callbacks=[ck])
    assert sorted(os.listdir(tmp_path)) == ["lenet-2_1.ckpt", "lenet-2_3.ckpt"]   # 1_2 removed (keep 2)
    assert ck.latest_ckpt_file_name == str(tmp_path / "lenet-2_3.ckpt")
    params = ms.load_checkpoint(ck.latest_ckpt_file_name)
    np.testing.assert_array_equal(params["weight"].asnumpy(), net.weight.asnumpy())
    assert {"moments.weight", "moments.bias", "learning_rate"} <= set(params)


def test_checkpoint_end_save_prefix_numbering_and_append_info(tmp_path):
    cfg = CheckpointConfig(save_checkpoint_steps=2, append_info=["epoch_num", "step_num", {"tag": 7}])
    _model()[1].train(1, _ds(), callbacks=[ModelCheckpoint("m", str(tmp_path), cfg)])
    _model()[1].train(1, _ds(), callbacks=[ModelCheckpoint("m", str(tmp_path), cfg)])
    assert sorted(os.listdir(tmp_path)) == ["m-1_2.ckpt", "m-1_3.ckpt", "m_1-1_2.ckpt", "m_1-1_3.ckpt"]
    params = ms.load_checkpoint(str(tmp_path / "m-1_3.ckpt"))
    assert int(params["epoch_num"].asnumpy()) == 1 and int(params["step_num"].asnumpy()) == 3
    assert int(params["tag"].asnumpy()) == 7


# -- eval / predict / fit / EarlyStopping ------------------------------------------------------------
def test_eval_metrics_match_numpy():
    net, model = _model(metrics={"acc": Accuracy(), "loss": Loss(), "top2": TopKCategoricalAccuracy(2)})
    x, y = _data(5)
    logits = x.astype(np.float64) @ net.weight.asnumpy().T.astype(np.float64) + net.bias.asnumpy()
    got = model.eval(_ds(5, batch=5))
    assert got["acc"] == np.mean(logits.argmax(1) == y)
    top2 = np.argsort(-logits, axis=1)[:, :2]
    assert got["top2"] == np.mean([y[i] in top2[i] for i in range(N)])
    z = logits - logits.max(1, keepdims=True)
    nll = -(z[np.arange(N), y] - np.log(np.exp(z).sum(1)))
    np.testing.assert_allclose(got["loss"], np.mean([nll[:5].mean(), nll[5:].mean()]), rtol=1e-5)
    np.testing.assert_allclose(model.predict(ms.Tensor(x)).asnumpy(), logits, rtol=1e-5, atol=1e-6)


def test_fit_validates_and_early_stopping_restores_best(capsys):
    seen = []

    class Look(Callback):
        def on_train_epoch_end(self, rc):
            seen.append(dict(rc.original_args().eval_results))
    net, model = _model(lr=5.0, momentum=0.0, metrics={"loss"})     # a big step: the loss gets worse
    stop = EarlyStopping(monitor="eval_loss", patience=1, restore_best_weights=True)
    model.fit(6, _ds(), valid_dataset=_ds(), callbacks=[Look(), stop, LossMonitor(100)])
    losses = [s["eval_loss"] for s in seen]
    best = int(np.argmin(losses))
    assert stop.stopped_epoch == len(seen) and len(seen) < 6 and best == len(seen) - 2
    assert "Eval result: epoch 1, metrics: {'loss': " in capsys.readouterr().out
    fresh = Model(net, nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean"), metrics={"loss"})
    np.testing.assert_allclose(fresh.eval(_ds())["loss"], losses[best], rtol=1e-5)


def test_fit_refuses_old_style_callbacks():
    class Old(Callback):
        def step_end(self, rc):
            pass
    net, model = _model(metrics={"acc"})
    with pytest.raises(OpValueError, match="Model.fit"):
        model.fit(1, _ds(), valid_dataset=_ds(), callbacks=[Old()])


# -- metrics on fixed data ------------------------------------------------------------------------------
LOGITS = np.array([[0.2, 0.5, 0.3], [0.6, 0.1, 0.3], [0.1, 0.2, 0.7], [0.3, 0.4, 0.3], [0.9, 0.05, 0.05]])
LABELS = np.array([1, 0, 1, 2, 0])


def test_accuracy_precision_recall_f1_against_counts():
    pred = LOGITS.argmax(1)
    assert Accuracy()(LOGITS, LABELS) == np.mean(pred == LABELS)
    for cls in range(3):
        tp = np.sum((pred == cls) & (LABELS == cls))
        p = tp / max(np.sum(pred == cls), 1)
        r = tp / max(np.sum(LABELS == cls), 1)
        assert Precision()(LOGITS, LABELS)[cls] == pytest.approx(p)
        assert Recall()(LOGITS, LABELS)[cls] == pytest.approx(r)
        assert F1()(LOGITS, LABELS)[cls] == pytest.approx(0 if p + r == 0 else 2 * p * r / (p + r))
    assert Top1CategoricalAccuracy()(LOGITS, LABELS) == Accuracy()(LOGITS, LABELS)


def test_mae_mse_loss_accumulate_over_updates():
    a, b = np.arange(6.0).reshape(3, 2), np.ones((3, 2))
    mae, mse, loss = MAE(), MSE(), Loss()
    for m in (mae, mse):
        m.update(ms.Tensor(a.astype(np.float32)), ms.Tensor(b.astype(np.float32)))
        m.update(a[:1].tolist(), b[:1].tolist())
    assert mae.eval() == pytest.approx((np.abs(a - b).sum() + np.abs(a[:1] - b[:1]).sum()) / 4)
    assert mse.eval() == pytest.approx((((a - b) ** 2).sum() + ((a[:1] - b[:1]) ** 2).sum()) / 4)
    loss.update(ms.Tensor(np.float32(1.0)))
    loss.update(np.array([2.0, 4.0]))
    assert loss.eval() == pytest.approx(2.0)


# -- bad input ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("make, words", [
    (lambda: Model("not a cell"), "Model"),
    (lambda: Model(_net(), amp_level="O7"), "amp_level"),
    (lambda: Model(_net(), amp_level="O2"), "optimizer"),
    (lambda: Model(_net(), metrics={"acc"}), "eval_network"),
    (lambda: Model(_net(), metrics=["acc"]), "metrics"),
    (lambda: _model()[1].train(0, _ds()), "epoch"),
    (lambda: _model()[1].train(True, _ds()), "epoch"),
    (lambda: _model()[1].train(1, [1, 2, 3]), "train_dataset"),
    (lambda: _model()[1].train(1, _ds(), callbacks=[print]), "callbacks"),
    (lambda: _model()[1].train(1, _ds(), dataset_sink_mode=1), "dataset_sink_mode"),
    (lambda: _model()[1].eval(_ds()), "metrics"),
    (lambda: Accuracy().eval(), "Accuracy.eval"),
    (lambda: Accuracy("regression"), "eval_type"),
    (lambda: Accuracy().update(np.zeros((2, 3)), np.zeros((3,))), "Accuracy.update"),
    (lambda: MAE().update(np.zeros(2)), "MAE.update"),
    (lambda: LossMonitor(1.5), "per_print_times"),
    (lambda: CheckpointConfig(save_checkpoint_steps=0, keep_checkpoint_max=0), "CheckpointConfig"),
    (lambda: ModelCheckpoint(prefix="a/b"), "prefix"),
    (lambda: EarlyStopping(mode="best"), "mode"),
])
def test_bad_input_raises_minispore_errors(make, words):
    with pytest.raises(MinisporeError) as err:
        make()
    assert words in str(err.value)


def test_a_dataset_trained_by_one_model_is_refused_by_another():
    ds = _ds()
    _model()[1].train(1, ds)
    _, other = _model()
    with pytest.raises(MinisporeError, match="another Model"):
        other.train(1, ds)
    assert isinstance(OpTypeError("a", "b", "c"), TypeError)
