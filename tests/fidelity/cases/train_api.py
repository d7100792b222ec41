"""The training API: Model.train/eval/predict/fit, callbacks (LossMonitor's printed lines,
ModelCheckpoint's file names, cb_params), and the metric classes on fixed data."""
import contextlib
import io
import os
import re
import tempfile

import numpy as np

from msdiff import case, fill_params, rand, sub

N_ROWS, N_IN, N_CLASSES, BATCH = 10, 4, 3, 4


def _data(seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(N_ROWS, N_IN)).astype(np.float32)
    y = rng.integers(0, N_CLASSES, N_ROWS).astype(np.int32)
    return x, y


def _dataset(ms, batch=BATCH, seed=0, **kw):
    x, y = _data(seed)
    ds = sub(ms, "dataset").NumpySlicesDataset((x, y), column_names=["data", "label"], shuffle=False)
    return ds.batch(batch, **kw)


def _model(ms, metrics=None, lr=0.1, **kw):
    net = fill_params(ms, ms.nn.Dense(N_IN, N_CLASSES), seed=1, scale=0.5)
    loss = ms.nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    opt = ms.nn.Momentum(net.trainable_params(), learning_rate=lr, momentum=0.9)
    return net, sub(ms, "train").Model(net, loss_fn=loss, optimizer=opt, metrics=metrics, **kw)


def _recorder(ms, log):
    """A callback recording (epoch, step, loss) at every step end."""
    train = sub(ms, "train")

    class Record(train.Callback):
        def on_train_step_end(self, run_context):
            cb = run_context.original_args()
            log.append((cb.cur_epoch_num, cb.cur_step_num, float(cb.net_outputs.asnumpy())))
    return Record()


def _printed(fn):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        fn()
    return out.getvalue()


def _loss_lines(text):
    """LossMonitor lines as (text before the number, the loss as a float): the format must match
    exactly, the number to float32 precision."""
    found = []
    for line in text.splitlines():
        m = re.fullmatch(r"(epoch: \d+ step: \d+, loss is )(\S+)", line)
        if m:
            found.append((m.group(1), float(m.group(2))))
    return found


# -- Model.train ---------------------------------------------------------------------------------------
@case("train_api/train_losses_two_epochs", rtol=1e-4, atol=1e-5)
def _(ms):
    log = []
    _, model = _model(ms)
    model.train(2, _dataset(ms), callbacks=[_recorder(ms, log)])
    return [(e, s) for e, s, _ in log], np.array([l for _, _, l in log], np.float32)


@case("train_api/train_updates_parameters", rtol=1e-4, atol=1e-5)
def _(ms):
    net, model = _model(ms)
    model.train(2, _dataset(ms))
    return net.weight, net.bias


@case("train_api/train_sink_mode_true_runs_like_false_on_cpu", rtol=1e-4, atol=1e-5)
def _(ms):
    log = []
    _, model = _model(ms)
    model.train(1, _dataset(ms), callbacks=[_recorder(ms, log)], dataset_sink_mode=True)
    return np.array([l for _, _, l in log], np.float32)


@case("train_api/train_graph_mode_losses", rtol=1e-4, atol=1e-5)
def _(ms):
    ms.set_context(mode=ms.GRAPH_MODE)
    try:
        log = []
        _, model = _model(ms)
        model.train(1, _dataset(ms), callbacks=[_recorder(ms, log)])
        return np.array([l for _, _, l in log], np.float32)
    finally:
        ms.set_context(mode=ms.PYNATIVE_MODE)


@case("train_api/top_level_and_nn_aliases")
def _(ms):
    return (ms.Model is sub(ms, "train").Model, ms.LossMonitor is sub(ms, "train").LossMonitor,
            ms.nn.Accuracy is sub(ms, "train").Accuracy, ms.nn.Loss is sub(ms, "train").Loss)


@case("train_api/train_drop_remainder_steps")
def _(ms):
    log = []
    _, model = _model(ms)
    model.train(2, _dataset(ms, drop_remainder=True), callbacks=[_recorder(ms, log)])
    return [(e, s) for e, s, _ in log]


@case("train_api/train_initial_epoch")
def _(ms):
    log = []
    _, model = _model(ms)
    model.train(3, _dataset(ms), callbacks=[_recorder(ms, log)], initial_epoch=1)
    return [(e, s) for e, s, _ in log]


@case("train_api/train_with_loss_inside_network", rtol=1e-4, atol=1e-5)
def _(ms):
    """No loss_fn: the network is WithLossCell already; Model wraps it in TrainOneStepCell."""
    net = fill_params(ms, ms.nn.Dense(N_IN, N_CLASSES), seed=1, scale=0.5)
    with_loss = ms.nn.WithLossCell(net, ms.nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean"))
    opt = ms.nn.SGD(net.trainable_params(), learning_rate=0.5)
    model = sub(ms, "train").Model(with_loss, optimizer=opt)
    log = []
    model.train(1, _dataset(ms), callbacks=[_recorder(ms, log)])
    return type(model.train_network).__name__, np.array([l for _, _, l in log], np.float32), net.bias


@case("train_api/cb_params_keys_and_counters")
def _(ms):
    train = sub(ms, "train")
    seen = {}

    class Look(train.Callback):
        def on_train_begin(self, run_context):
            cb = run_context.original_args()
            seen["begin_keys"] = sorted(cb.keys())
            seen["epoch_num"] = cb.epoch_num
            seen["batch_num"] = cb.batch_num
            seen["mode"] = cb.mode
            seen["sink"] = cb.dataset_sink_mode
            seen["train_network"] = type(cb.train_network).__name__

        def on_train_epoch_end(self, run_context):
            cb = run_context.original_args()
            seen.setdefault("epoch_ends", []).append((cb.cur_epoch_num, cb.cur_step_num))
            seen["end_keys"] = sorted(cb.keys())

    _, model = _model(ms)
    model.train(2, _dataset(ms), callbacks=Look())
    return seen


@case("train_api/old_style_hook_names_still_called")
def _(ms):
    train = sub(ms, "train")
    calls = []

    class Old(train.Callback):
        def begin(self, run_context):
            calls.append("begin")

        def epoch_end(self, run_context):
            calls.append("epoch_end")

        def step_end(self, run_context):
            calls.append("step_end")

        def end(self, run_context):
            calls.append("end")

    _, model = _model(ms)
    model.train(1, _dataset(ms), callbacks=[Old()])
    return calls


@case("train_api/request_stop_after_step_two")
def _(ms):
    train = sub(ms, "train")
    log, epochs = [], []

    class Stop(train.Callback):
        def on_train_step_end(self, run_context):
            if run_context.original_args().cur_step_num == 2:
                run_context.request_stop()

        def on_train_epoch_end(self, run_context):
            epochs.append(run_context.original_args().cur_epoch_num)

    _, model = _model(ms)
    model.train(3, _dataset(ms), callbacks=[_recorder(ms, log), Stop()])
    return [(e, s) for e, s, _ in log], epochs


@case("train_api/lambda_callback_and_history", rtol=1e-4, atol=1e-5)
def _(ms):
    train = sub(ms, "train")
    ends = []
    history = train.History()
    lam = train.LambdaCallback(on_train_epoch_end=lambda rc: ends.append(rc.original_args().cur_epoch_num))
    _, model = _model(ms)
    model.train(2, _dataset(ms), callbacks=[lam, history])
    return ends, history.epoch, [float(v) for v in history.history["net_output"]], sorted(history.history)


# -- LossMonitor / TimeMonitor output -------------------------------------------------------------
@case("train_api/loss_monitor_lines", rtol=1e-4, atol=1e-5)
def _(ms):
    _, model = _model(ms)
    text = _printed(lambda: model.train(2, _dataset(ms), callbacks=[sub(ms, "train").LossMonitor()]))
    return _loss_lines(text), len(text.splitlines())


@case("train_api/loss_monitor_per_print_times_2", rtol=1e-4, atol=1e-5)
def _(ms):
    _, model = _model(ms)
    text = _printed(lambda: model.train(2, _dataset(ms), callbacks=[sub(ms, "train").LossMonitor(2)]))
    return _loss_lines(text)


@case("train_api/time_monitor_line_format")
def _(ms):
    _, model = _model(ms)
    text = _printed(lambda: model.train(2, _dataset(ms), callbacks=[sub(ms, "train").TimeMonitor()]))
    pattern = r"Train epoch time: \d+\.\d{3} ms, per step time: \d+\.\d{3} ms"
    return [bool(re.fullmatch(pattern, line.strip())) for line in text.splitlines()]


# -- ModelCheckpoint ---------------------------------------------------------------------------------
@case("train_api/checkpoint_file_names_every_2_steps")
def _(ms):
    train = sub(ms, "train")
    with tempfile.TemporaryDirectory() as tmp:
        _, model = _model(ms)
        ck = train.ModelCheckpoint(prefix="lenet", directory=tmp,
                                   config=train.CheckpointConfig(save_checkpoint_steps=2, keep_checkpoint_max=10))
        model.train(2, _dataset(ms), callbacks=[ck])
        return sorted(os.listdir(tmp)), os.path.basename(ck.latest_ckpt_file_name)


@case("train_api/checkpoint_final_step_saved_at_end")
def _(ms):
    train = sub(ms, "train")
    with tempfile.TemporaryDirectory() as tmp:
        _, model = _model(ms)
        ck = train.ModelCheckpoint(prefix="net", directory=tmp, config=train.CheckpointConfig(save_checkpoint_steps=2))
        model.train(1, _dataset(ms), callbacks=ck)
        return sorted(os.listdir(tmp))


@case("train_api/checkpoint_keep_max_and_default_prefix")
def _(ms):
    train = sub(ms, "train")
    with tempfile.TemporaryDirectory() as tmp:
        _, model = _model(ms)
        ck = train.ModelCheckpoint(directory=tmp, config=train.CheckpointConfig(keep_checkpoint_max=2))
        model.train(2, _dataset(ms), callbacks=[ck])
        return sorted(os.listdir(tmp))


@case("train_api/checkpoint_prefix_taken_gets_a_number")
def _(ms):
    train = sub(ms, "train")
    with tempfile.TemporaryDirectory() as tmp:
        _, model = _model(ms)
        model.train(1, _dataset(ms), callbacks=[train.ModelCheckpoint(prefix="run", directory=tmp)])
        model.train(1, _dataset(ms), callbacks=[train.ModelCheckpoint(prefix="run", directory=tmp)])
        return sorted(os.listdir(tmp))


@case("train_api/checkpoint_contents_and_reload", rtol=1e-4, atol=1e-5)
def _(ms):
    train = sub(ms, "train")
    with tempfile.TemporaryDirectory() as tmp:
        net, model = _model(ms)
        ck = train.ModelCheckpoint(prefix="m", directory=tmp, config=train.CheckpointConfig(save_checkpoint_steps=3))
        model.train(1, _dataset(ms), callbacks=[ck])
        params = ms.load_checkpoint(ck.latest_ckpt_file_name)
        fresh = fill_params(ms, ms.nn.Dense(N_IN, N_CLASSES), seed=7)
        not_loaded = ms.load_param_into_net(fresh, params)
        return sorted(params), fresh.weight, net.weight, not_loaded[0]


# -- eval / predict / fit ---------------------------------------------------------------------------
@case("train_api/eval_accuracy_after_training", rtol=1e-6)
def _(ms):
    _, model = _model(ms, metrics={"accuracy"})
    model.train(2, _dataset(ms))
    return model.eval(_dataset(ms))


@case("train_api/eval_acc_and_loss_before_training", rtol=1e-5)
def _(ms):
    _, model = _model(ms, metrics={"acc", "loss"})
    return model.eval(_dataset(ms, batch=3)), type(model.eval_network).__name__


@case("train_api/eval_metric_dict_objects", rtol=1e-5)
def _(ms):
    train = sub(ms, "train")
    _, model = _model(ms, metrics={"top1": train.Top1CategoricalAccuracy(), "mse_like": train.Loss()})
    return model.eval(_dataset(ms))


@case("train_api/eval_custom_network_and_indexes", rtol=1e-5)
def _(ms):
    """An eval network returning (outputs, label, loss): eval_indexes=[2, 0, 1] points the metrics at them."""
    train = sub(ms, "train")
    net = fill_params(ms, ms.nn.Dense(N_IN, N_CLASSES), seed=1, scale=0.5)
    loss_fn = ms.nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")

    class Eval(ms.nn.Cell):
        def __init__(self):
            super().__init__()
            self.net = net

        def construct(self, x, y):
            out = self.net(x)
            return out, y, loss_fn(out, y)

    model = train.Model(net, loss_fn=loss_fn, metrics={"acc", "loss"}, eval_network=Eval(), eval_indexes=[2, 0, 1])
    return model.eval(_dataset(ms))


@case("train_api/predict_output", rtol=1e-5, atol=1e-6)
def _(ms):
    _, model = _model(ms)
    x, _ = _data()
    return model.predict(ms.Tensor(x[:3]))


@case("train_api/fit_with_validation_prints_eval_result", rtol=1e-4, atol=1e-5)
def _(ms):
    train = sub(ms, "train")
    _, model = _model(ms, metrics={"acc"})
    text = _printed(lambda: model.fit(2, _dataset(ms), valid_dataset=_dataset(ms, seed=3),
                                      callbacks=[train.LossMonitor(3)]))
    evals = [line for line in text.splitlines() if line.startswith("Eval result")]
    return _loss_lines(text), [re.sub(r"[0-9.]+}", "X}", e) for e in evals]


@case("train_api/early_stopping_on_flat_accuracy")
def _(ms):
    train = sub(ms, "train")
    log = []
    _, model = _model(ms, metrics={"acc"}, lr=0.0)
    stop = train.EarlyStopping(monitor="acc", patience=1)
    model.fit(5, _dataset(ms), valid_dataset=_dataset(ms), callbacks=[_recorder(ms, log), stop])
    return sorted({e for e, _, _ in log}), stop.stopped_epoch, stop.wait


# -- metrics on fixed data -------------------------------------------------------------------------
_LOGITS = np.array([[0.2, 0.5, 0.3], [0.6, 0.1, 0.3], [0.1, 0.2, 0.7], [0.3, 0.4, 0.3], [0.9, 0.05, 0.05]],
                   np.float32)
_LABELS = np.array([1, 0, 1, 2, 0], np.int32)


@case("train_api/metric_accuracy_sparse_and_onehot")
def _(ms):
    train = sub(ms, "train")
    acc = train.Accuracy()
    acc.clear()
    acc.update(ms.Tensor(_LOGITS), ms.Tensor(_LABELS))
    first = acc.eval()
    acc.update(ms.Tensor(_LOGITS[:2]), ms.Tensor(np.eye(3, dtype=np.float32)[[2, 0]]))
    return first, acc.eval()


@case("train_api/metric_accuracy_multilabel")
def _(ms):
    acc = sub(ms, "train").Accuracy("multilabel")
    y_pred = np.array([[1, 0, 1], [0, 1, 1], [1, 1, 0]], np.float32)
    y = np.array([[1, 0, 1], [0, 0, 1], [1, 1, 0]], np.float32)
    acc.update(ms.Tensor(y_pred), ms.Tensor(y))
    return acc.eval()


@case("train_api/metric_topk")
def _(ms):
    train = sub(ms, "train")
    logits = rand(6, 7, seed=4)
    labels = np.array([0, 3, 6, 1, 2, 5], np.int32)
    out = []
    for metric in (train.Top1CategoricalAccuracy(), train.Top5CategoricalAccuracy(), train.TopKCategoricalAccuracy(3)):
        metric.update(ms.Tensor(logits), ms.Tensor(labels))
        out.append(metric.eval())
    return out


@case("train_api/metric_mae_mse")
def _(ms):
    train = sub(ms, "train")
    y_pred, y = rand(4, 3, seed=5), rand(4, 3, seed=6)
    mae, mse = train.MAE(), train.MSE()
    mae.update(ms.Tensor(y_pred), ms.Tensor(y))
    mse.update(ms.Tensor(y_pred), ms.Tensor(y))
    mse.update(ms.Tensor(y_pred[:2]), ms.Tensor(y[:2] * 2))
    return mae.eval(), mse.eval()


@case("train_api/metric_loss_average_over_updates")
def _(ms):
    loss = sub(ms, "train").Loss()
    loss.update(ms.Tensor(np.array(0.5, np.float32)))
    loss.update(ms.Tensor(np.array([1.0, 2.0], np.float32)))
    return loss.eval()


@case("train_api/metric_precision_recall_f1")
def _(ms):
    train = sub(ms, "train")
    out = []
    for metric in (train.Precision(), train.Recall(), train.F1()):
        metric.update(ms.Tensor(_LOGITS), ms.Tensor(_LABELS))
        out.append((metric.eval(), metric.eval(average=True)))
    return out


@case("train_api/metric_set_indexes_and_call")
def _(ms):
    train = sub(ms, "train")
    mae = train.MAE().set_indexes([0, 2])
    x = ms.Tensor(np.array([[0.1, 0.2, 0.6, 0.9], [0.1, 0.2, 0.6, 0.9]], np.float32))
    y = ms.Tensor(np.full((2, 4), 0.1, np.float32))
    y2 = ms.Tensor(np.array([[0.1, 0.25, 0.7, 0.9], [0.1, 0.25, 0.7, 0.9]], np.float32))
    mae.update(x, y, y2)
    return mae.eval(), mae.indexes, train.Accuracy()(ms.Tensor(_LOGITS), ms.Tensor(_LABELS))


@case("train_api/metric_names")
def _(ms):
    train = sub(ms, "train")
    wanted = ["acc", "accuracy", "loss", "mae", "mse", "precision", "recall", "F1", "top_1_accuracy",
              "top_5_accuracy", "topk"]
    return [name in train.names() for name in wanted], type(train.get_metric_fn("acc")).__name__


# -- bad input --------------------------------------------------------------------------------------
@case("train_api/train_epoch_zero", raises=True)
def _(ms):
    _, model = _model(ms)
    model.train(0, _dataset(ms))


@case("train_api/train_initial_epoch_not_below_epoch", raises=True)
def _(ms):
    _, model = _model(ms)
    model.train(2, _dataset(ms), initial_epoch=2)


@case("train_api/eval_without_metrics", raises=True)
def _(ms):
    _, model = _model(ms)
    model.eval(_dataset(ms))


@case("train_api/metrics_without_loss_or_eval_network", raises=True)
def _(ms):
    net = ms.nn.Dense(N_IN, N_CLASSES)
    sub(ms, "train").Model(net, metrics={"acc"})


@case("train_api/train_three_columns_with_loss_fn", raises=True)
def _(ms):
    x, y = _data()
    ds = sub(ms, "dataset").NumpySlicesDataset((x, y, y), ["a", "b", "c"], shuffle=False).batch(4)
    _, model = _model(ms)
    model.train(1, ds)


@case("train_api/accuracy_eval_before_update", raises=True)
def _(ms):
    sub(ms, "train").Accuracy().eval()


@case("train_api/topk_k_zero", raises=True)
def _(ms):
    sub(ms, "train").TopKCategoricalAccuracy(0)


@case("train_api/loss_monitor_negative", raises=True)
def _(ms):
    sub(ms, "train").LossMonitor(-1)


@case("train_api/checkpoint_config_all_zero", raises=True)
def _(ms):
    sub(ms, "train").CheckpointConfig(save_checkpoint_steps=0, keep_checkpoint_max=0)


@case("train_api/model_unknown_kwarg", raises=True)
def _(ms):
    _model(ms, unknown_option=True)


# -- mixed precision through Model ------------------------------------------------------------------
@case("train_api/amp_o3_losses", rtol=2e-2, atol=2e-3)
def _(ms):
    log = []
    _, model = _model(ms, amp_level="O3")
    model.train(1, _dataset(ms), callbacks=[_recorder(ms, log)])
    return type(model.train_network).__name__, np.array([l for _, _, l in log], np.float32)


@case("train_api/fixed_loss_scale_manager_losses", rtol=1e-4, atol=1e-5)
def _(ms):
    log = []
    manager = sub(ms, "train").FixedLossScaleManager(128.0, drop_overflow_update=False)
    net, model = _model(ms, loss_scale_manager=manager)
    model.train(1, _dataset(ms), callbacks=[_recorder(ms, log)])
    return np.array([l for _, _, l in log], np.float32), net.bias

