"""`Model`: MindSpore's high-level training API — `train`, `eval`, `predict`, `fit`.

    model = Model(net, loss_fn=nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean"),
                  optimizer=nn.Momentum(net.trainable_params(), 0.01, 0.9), metrics={"accuracy"})
    model.train(2, train_ds, callbacks=[LossMonitor()])      # epochs, a dataset of (data, label) batches
    model.eval(test_ds)                                      # {"accuracy": 0.97}
    model.predict(Tensor(x))                                 # the network's output

What it builds, as MindSpore does:

* the train network: with an optimizer, `amp.build_train_network(network, optimizer, loss_fn,
  level=amp_level, ...)` — for "O0" that is `TrainOneStepCell(WithLossCell(network, loss_fn),
  optimizer)`; other levels cast the network and may add loss scaling
  (`TrainOneStepWithLossScaleCell`). Without an optimizer but with a loss, `WithLossCell`; with
  neither, the network itself (it must then do a whole step);
* the eval network (only when `metrics` is given): `eval_network`, or `WithEvalCell(network,
  loss_fn)` returning `(loss, outputs, label)`; `eval_indexes` (default [0, 1, 2] for the built one)
  says where the loss, the outputs and the label are: the `Loss` metric gets the loss, every other
  metric `update(outputs, label)`;
* the predict network: `network`.

The training loop (`_train_process`) runs the callbacks' hooks in MindSpore's order and fills
`cb_params` with MindSpore's keys (see `callback/_callback.py`). Every step is
`train_network(*batch)` on one batch from `dataset.create_tuple_iterator()`. `dataset_sink_mode=True`
is accepted and, as on MindSpore's CPU backend, silently runs the normal (non-sink) loop.
"""
from __future__ import annotations

import copy
import itertools
import logging
import numbers

import numpy as np

from ..amp import build_train_network           # amp sits below train (ARCHITECTURE.md §2)
from ..common.errors import MinisporeRuntimeError, OpTypeError, OpValueError
from ..common.tensor import Tensor
from ..ops._check import int_attr
from .callback import Callback, RunContext, TimeMonitor, _CallbackManager, _InternalCallbackParam
from .callback import __all__ as _INTERNAL_CALLBACKS
from .metrics import Loss, get_metric_fn, get_metrics

_MODEL_TOKENS = itertools.count(1)      # see Model._check_reuse_dataset

logger = logging.getLogger("minispore")

_AMP_LEVELS = ("O0", "O1", "O2", "O3", "auto")
_KWARGS = ("loss_scale_manager", "keep_batchnorm_fp32", "boost_config_dict", "acc_level")
_OLD_HOOKS = {"begin", "end", "epoch_begin", "epoch_end", "step_begin", "step_end"}


def _as_tuple(inputs):
    return (inputs,) if isinstance(inputs, Tensor) else tuple(inputs)



def _bool(op, name, value):
    if not isinstance(value, bool):
        raise OpTypeError(op, f"'{name}' to be a bool", f"{type(value).__name__} {value!r}")
    return value


def _check_dataset(op, dataset, name):
    if not (callable(getattr(dataset, "create_tuple_iterator", None))
            and callable(getattr(dataset, "get_dataset_size", None))):
        raise OpTypeError(op, f"'{name}' to be a mindspore.dataset Dataset (e.g. GeneratorDataset(...).batch(n))",
                          type(dataset).__name__)


def _is_cell(obj):
    return callable(getattr(obj, "parameters_and_names", None)) and callable(getattr(obj, "set_train", None))


class Model:
    """See the module docstring. Arguments are MindSpore's; `boost_level` other than "O0" (Ascend
    boost) and parallel modes are not implemented."""

    def __init__(self, network, loss_fn=None, optimizer=None, metrics=None, eval_network=None, eval_indexes=None,
                 amp_level="O0", boost_level="O0", **kwargs):
        op = "Model"
        if not _is_cell(network):
            raise OpTypeError(op, "'network' to be a Cell", type(network).__name__)
        for key in kwargs:
            if key not in _KWARGS:
                raise OpValueError(op, f"keyword arguments among {list(_KWARGS)}", repr(key))
        if amp_level not in _AMP_LEVELS:
            raise OpValueError(op, f"'amp_level' in {_AMP_LEVELS}", repr(amp_level))
        if optimizer is None and amp_level != "O0":
            raise OpValueError(op, "an 'optimizer' when amp_level is not 'O0' (mixed precision builds the "
                               "train network around it)", f"optimizer=None, amp_level={amp_level!r}")
        if boost_level not in ("O0", "O1", "O2"):
            raise OpValueError(op, "'boost_level' in ('O0', 'O1', 'O2')", repr(boost_level))
        if boost_level != "O0":
            logger.warning("Model: boost_level=%r (Ascend boost mode) is not implemented; training as 'O0'.",
                           boost_level)
        self._network = network
        self._loss_fn = loss_fn
        self._optimizer = optimizer
        self._amp_level = amp_level
        self._boost_level = boost_level
        self._keep_bn_fp32 = kwargs.get("keep_batchnorm_fp32")
        self._loss_scale_manager = kwargs.get("loss_scale_manager")
        self._loss_scale_manager_set = "loss_scale_manager" in kwargs
        self._metrics = metrics
        self._eval_network = eval_network
        self._eval_indexes = None
        self._train_network = self._build_train_network()
        self._build_eval_network(metrics, eval_network, eval_indexes)
        self._predict_network = network
        self._current_epoch_num = 0
        self._current_step_num = 0
        self._backbone_is_train = True
        self.batch_num = -1

    # -- building the networks ---------------------------------------------------------------------
    def _build_train_network(self):
        network = self._network
        if self._loss_scale_manager is not None and self._optimizer is None:
            raise OpValueError("Model", "an 'optimizer' when 'loss_scale_manager' is set", "optimizer=None")
        if self._optimizer is not None:
            amp_config = {}
            if self._loss_scale_manager_set:
                amp_config["loss_scale_manager"] = self._loss_scale_manager
            if self._keep_bn_fp32 is not None:
                amp_config["keep_batchnorm_fp32"] = self._keep_bn_fp32
            return build_train_network(network, self._optimizer, self._loss_fn, level=self._amp_level, **amp_config)
        if self._loss_fn is not None:
            from ..nn import WithLossCell
            return WithLossCell(network, self._loss_fn)
        return network

    def _build_eval_network(self, metrics, eval_network, eval_indexes):
        self._metric_fns = get_metrics(metrics)
        if not self._metric_fns:
            return
        if eval_network is not None:
            if eval_indexes is not None and not (isinstance(eval_indexes, list) and len(eval_indexes) == 3):
                raise OpValueError("Model", "'eval_indexes' as None or a list of 3 ints (loss, outputs, label)",
                                   repr(eval_indexes))
            self._eval_network = eval_network
            self._eval_indexes = eval_indexes
            return
        if self._loss_fn is None:
            raise OpValueError("Model", "'eval_network' or 'loss_fn' when 'metrics' is set (the evaluation "
                               "network is built from network and loss_fn)", "neither")
        from ..nn import WithEvalCell
        self._eval_network = WithEvalCell(self._network, self._loss_fn, self._amp_level in ("O2", "O3", "auto"))
        self._eval_indexes = [0, 1, 2]

    @property
    def train_network(self):
        return self._train_network

    @property
    def eval_network(self):
        return self._eval_network

    @property
    def predict_network(self):
        return self._predict_network

    # -- metrics -------------------------------------------------------------------------------------
    def _clear_metrics(self):
        for metric in self._metric_fns.values():
            metric.clear()

    def _update_metrics(self, outputs):
        if isinstance(outputs, Tensor):
            outputs = (outputs,)
        if not isinstance(outputs, tuple):
            raise OpValueError("Model.eval", "the eval network to return a Tensor or a tuple",
                               type(outputs).__name__)
        if self._eval_indexes is not None and len(outputs) < 3:
            raise OpValueError("Model.eval", "the eval network to return (loss, outputs, label) (>= 3 values)",
                               f"{len(outputs)} values")
        for metric in self._metric_fns.values():
            if self._eval_indexes is None:
                metric.update(*outputs)
            elif isinstance(metric, Loss):
                metric.update(outputs[self._eval_indexes[0]])
            else:
                metric.update(outputs[self._eval_indexes[1]], outputs[self._eval_indexes[2]])

    def _get_metrics(self):
        return {name: metric.eval() for name, metric in self._metric_fns.items()}

    # -- modes ----------------------------------------------------------------------------------
    def _check_network_mode(self, network, is_train):
        if self._backbone_is_train != is_train:
            network.set_train(is_train)
            self._backbone_is_train = is_train
        if not is_train:
            network.set_grad(False)
        return network

    def _prepare(self, network, is_train):
        network.set_train(is_train)
        network.phase = "train" if is_train else "eval"
        self._backbone_is_train = is_train

    @staticmethod
    def _transform_callbacks(callbacks):
        if callbacks is None:
            return []
        if isinstance(callbacks, Callback):
            return [callbacks]
        if isinstance(callbacks, (list, tuple)):
            return list(callbacks)
        raise OpTypeError("Model.train", "'callbacks' as a Callback or a list of Callback", type(callbacks).__name__)

    @staticmethod
    def _check_methods_for_custom_callbacks(callbacks, mode):
        """A user callback overriding the 1.x hook names: a warning in train/eval, an error in fit
        (MindSpore's rule: fit also runs evaluations, where the old names would be ambiguous)."""
        for cb in callbacks if isinstance(callbacks, (list, tuple)) else [callbacks]:
            name = type(cb).__name__
            if name in _INTERNAL_CALLBACKS:
                continue
            old = set(type(cb).__dict__) & _OLD_HOOKS
            if not old:
                continue
            if mode in ("train", "eval"):
                logger.warning("For %s callback, %s methods may not be supported in later version, use methods "
                               "prefixed with 'on_train' or 'on_eval' instead.", name, sorted(old))
            else:
                raise OpValueError("Model.fit", "callbacks with on_train_*/on_eval_* methods",
                                   f"{name} defining {sorted(old)}")

    def _check_reuse_dataset(self, dataset):
        # MindSpore stores hash(self), an address a later Model can reuse once this one is freed;
        # a token drawn once per Model is never reused, so the refusal does not depend on the GC
        token = self.__dict__.setdefault("_owner_token", next(_MODEL_TOKENS))
        owner = getattr(dataset, "__model_hash__", None)
        if owner is None:
            try:
                dataset.__model_hash__ = token
            except AttributeError:
                return
        elif owner != token:
            raise MinisporeRuntimeError("Model.train: the dataset object was already used by another Model's "
                                        "train(); create a new dataset")

    # -- training -----------------------------------------------------------------------------------
    def _check_train_args(self, op, epoch, train_dataset, dataset_sink_mode, sink_size, initial_epoch):
        _bool(op, "dataset_sink_mode", dataset_sink_mode)
        if not isinstance(sink_size, numbers.Integral) or isinstance(sink_size, bool):
            raise OpTypeError(op, "'sink_size' to be an int", type(sink_size).__name__)
        epoch = int_attr(op, "epoch", epoch, 1)
        initial_epoch = int_attr(op, "initial_epoch", initial_epoch, 0)
        if initial_epoch >= epoch:
            raise OpValueError(op, "'epoch' > 'initial_epoch'", f"epoch={epoch}, initial_epoch={initial_epoch}")
        _check_dataset(op, train_dataset, "train_dataset")
        if train_dataset.get_dataset_size() == 0:
            raise OpValueError(op, "a dataset with at least one batch", "an empty dataset")
        if sink_size < -1 or sink_size == 0:
            raise OpValueError(op, "'sink_size' as -1 or a positive int", repr(sink_size))
        return epoch, initial_epoch

    def train(self, epoch, train_dataset, callbacks=None, dataset_sink_mode=False, sink_size=-1, initial_epoch=0):
        """Train for epochs `initial_epoch+1 .. epoch` over `train_dataset` (rows `(data, label)` when
        the Model has a `loss_fn`, otherwise whatever the train network takes)."""
        epoch, initial_epoch = self._check_train_args("Model.train", epoch, train_dataset, dataset_sink_mode,
                                                      sink_size, initial_epoch)
        if callbacks:
            self._check_methods_for_custom_callbacks(callbacks, "train")
        self._train(epoch, train_dataset, callbacks, initial_epoch, valid_infos=(None, 1, False))

    def fit(self, epoch, train_dataset, valid_dataset=None, valid_frequency=1, callbacks=None,
            dataset_sink_mode=False, valid_dataset_sink_mode=False, sink_size=-1, initial_epoch=0):
        """`train`, plus an evaluation on `valid_dataset` every `valid_frequency` epochs (an int, or a
        list of epoch numbers). The metrics reach the callbacks as `cb_params.metrics` and, with
        "eval_loss", as `cb_params.eval_results` (what EarlyStopping monitors)."""
        op = "Model.fit"
        _bool(op, "valid_dataset_sink_mode", valid_dataset_sink_mode)
        epoch, initial_epoch = self._check_train_args(op, epoch, train_dataset, dataset_sink_mode, sink_size,
                                                      initial_epoch)
        if isinstance(valid_frequency, bool) or not isinstance(valid_frequency, (int, list)):
            raise OpTypeError(op, "'valid_frequency' to be an int or a list of epochs", type(valid_frequency).__name__)
        if valid_dataset is not None:
            _check_dataset(op, valid_dataset, "valid_dataset")
            if not self._metric_fns:
                raise OpValueError(op, "'metrics' given to Model when 'valid_dataset' is set", "metrics=None")
        if callbacks:
            self._check_methods_for_custom_callbacks(callbacks, "fit")
        self._train(epoch, train_dataset, callbacks, initial_epoch,
                    valid_infos=(valid_dataset, valid_frequency, valid_dataset_sink_mode))

    def _train(self, epoch, train_dataset, callbacks, initial_epoch, valid_infos):
        cb_params = _InternalCallbackParam()
        cb_params.cur_step_num = 0
        cb_params.train_network = self._train_network
        cb_params.epoch_num = epoch - initial_epoch
        cb_params.batch_num = train_dataset.get_dataset_size()
        self.batch_num = cb_params.batch_num
        cb_params.mode = "train"
        cb_params.loss_fn = self._loss_fn
        cb_params.optimizer = self._optimizer
        cb_params.parallel_mode = "stand_alone"
        cb_params.device_number = 1
        cb_params.train_dataset = train_dataset
        cb_params.list_callback = self._transform_callbacks(callbacks)
        cb_params.train_dataset_element = None
        cb_params.network = self._network
        cb_params.last_save_ckpt_step = None
        cb_params.latest_ckpt_file = None
        cb_params.loss_scale_mananger = self._loss_scale_manager     # (sic: MindSpore's key)
        cb_params.initial_step = None
        with _CallbackManager(cb_params.list_callback) as list_callback:
            self._check_reuse_dataset(train_dataset)
            # dataset_sink_mode=True: MindSpore's CPU backend runs this same loop (no device queue)
            self._train_process(epoch, train_dataset, list_callback, cb_params, initial_epoch, valid_infos)

    def _train_process(self, epoch, train_dataset, list_callback, cb_params, initial_epoch, valid_infos):
        network = self._train_network
        self._prepare(network, True)
        batches = train_dataset.create_tuple_iterator(num_epochs=epoch - initial_epoch)
        cb_params.dataset_sink_mode = False
        run_context = RunContext(cb_params)
        list_callback.on_train_begin(run_context)
        for i in range(initial_epoch, epoch):
            cb_params.cur_epoch_num = i + 1
            self._current_epoch_num = cb_params.cur_epoch_num
            self._current_step_num = 0
            list_callback.on_train_epoch_begin(run_context)
            for element in batches:
                element = _as_tuple(element)
                n_columns = len(element)
                if self._loss_fn is not None and n_columns != 2:
                    raise OpValueError("Model.train", "a train_dataset of 2 columns (data, label) when loss_fn "
                                       "is given", f"{n_columns} columns")
                cb_params.cur_step_num += 1
                self._current_step_num = int((cb_params.cur_step_num - 1) % cb_params.batch_num + 1)
                cb_params.train_dataset_element = element
                list_callback.on_train_step_begin(run_context)
                self._check_network_mode(network, True)
                outputs = network(*element)
                cb_params.net_outputs = outputs
                lsm = self._loss_scale_manager
                if lsm is not None and lsm.get_drop_overflow_update():
                    # a loss-scale cell returns (loss, overflow, scale): let the manager adapt the scale
                    lsm.update_loss_scale(bool(np.all(outputs[1].asnumpy())))
                list_callback.on_train_step_end(run_context)
                if run_context.get_stop_requested():
                    break
            self._eval_during_train(valid_infos, cb_params, list_callback)
            list_callback.on_train_epoch_end(run_context)
            cb_params.pop("metrics", None)
            cb_params.pop("eval_results", None)
            if run_context.get_stop_requested():
                break
        list_callback.on_train_end(run_context)

    @staticmethod
    def _should_eval(epoch, frequency):
        return epoch % frequency == 0 if isinstance(frequency, int) else epoch in frequency

    def _eval_during_train(self, valid_infos, cb_params, list_callback):
        valid_dataset, valid_frequency, _ = valid_infos
        if valid_dataset is None or not self._should_eval(cb_params.cur_epoch_num, valid_frequency):
            return
        saved = {k: cb_params.get(k) for k in ("cur_step_num", "batch_num", "dataset_sink_mode", "net_outputs")}
        # MindSpore's built-in callbacks (LossMonitor, ModelCheckpoint, ...) are train-only, except TimeMonitor
        eval_callbacks = [cb for cb in list_callback._callbacks
                          if type(cb).__name__ not in _INTERNAL_CALLBACKS or isinstance(cb, TimeMonitor)]
        self._eval_in_fit(valid_dataset, eval_callbacks, cb_params)
        cb_params.mode = "train"
        cb_params.update(saved)
        self._prepare(self._train_network, True)

    def _eval_in_fit(self, valid_dataset, callbacks, cb_params):
        cb_params.eval_network = self._eval_network
        cb_params.valid_dataset = valid_dataset
        cb_params.batch_num = valid_dataset.get_dataset_size()
        cb_params.mode = "eval"
        cb_params.cur_step_num = 0
        self._clear_metrics()
        with _CallbackManager(callbacks) as list_callback:
            return self._eval_process(valid_dataset, list_callback, cb_params, add_eval_loss=True)

    # -- evaluation and prediction ------------------------------------------------------------------
    def eval(self, valid_dataset, callbacks=None, dataset_sink_mode=False):
        """Run the eval network over `valid_dataset` and return `{metric name: value}`."""
        op = "Model.eval"
        _bool(op, "dataset_sink_mode", dataset_sink_mode)
        if not self._metric_fns:
            raise OpValueError(op, "'metrics' given to Model (e.g. metrics={'accuracy'})", "metrics=None")
        _check_dataset(op, valid_dataset, "valid_dataset")
        if callbacks:
            self._check_methods_for_custom_callbacks(callbacks, "eval")
        cb_params = _InternalCallbackParam()
        cb_params.eval_network = self._eval_network
        cb_params.valid_dataset = valid_dataset
        cb_params.batch_num = valid_dataset.get_dataset_size()
        cb_params.mode = "eval"
        cb_params.cur_step_num = 0
        cb_params.list_callback = self._transform_callbacks(callbacks)
        cb_params.network = self._network
        self._clear_metrics()
        with _CallbackManager(cb_params.list_callback) as list_callback:
            return self._eval_process(valid_dataset, list_callback, cb_params)

    def _eval_process(self, valid_dataset, list_callback, cb_params, add_eval_loss=False):
        run_context = RunContext(cb_params)
        cb_params.dataset_sink_mode = False
        list_callback.on_eval_begin(run_context)
        network = self._eval_network
        self._prepare(network, False)
        eval_loss = get_metric_fn("loss") if add_eval_loss else None
        list_callback.on_eval_epoch_begin(run_context)
        for element in valid_dataset.create_tuple_iterator(num_epochs=1):
            cb_params.cur_step_num += 1
            element = _as_tuple(element)
            cb_params.eval_dataset_element = element
            list_callback.on_eval_step_begin(run_context)
            self._check_network_mode(network, False)
            outputs = network(*element)
            cb_params.net_outputs = outputs
            list_callback.on_eval_step_end(run_context)
            self._update_metrics(outputs)
            if eval_loss is not None:
                eval_loss.update(outputs[self._eval_indexes[0]])
            if run_context.get_stop_requested():
                break
        list_callback.on_eval_epoch_end(run_context)
        metrics = self._get_metrics()
        cb_params.metrics = metrics
        if eval_loss is not None:
            cb_params.eval_results = copy.deepcopy(metrics)
            cb_params.eval_results["eval_loss"] = eval_loss.eval()
        list_callback.on_eval_end(run_context)
        return metrics

    def predict(self, *predict_data, backend=None, config=None):
        """The predict network (the bare `network`) in inference mode on `predict_data`."""
        op = "Model.predict"
        if backend not in ("lite", None):
            raise OpValueError(op, "'backend' to be 'lite' or None", repr(backend))
        if backend == "lite":
            logger.warning("Model.predict: backend='lite' (MindSpore Lite) is not available; using the network.")
        for item in predict_data:
            if item is None:
                continue
            if isinstance(item, Tensor):
                if item.size == 0:
                    raise OpValueError(op, "non-empty input tensors", f"a Tensor of shape {item.shape}")
                continue
            if not isinstance(item, (int, float, str)):
                raise OpTypeError(op, "inputs as Tensor, None, int, float or str", type(item).__name__)
        self._check_network_mode(self._predict_network, False)
        return self._predict_network(*predict_data)


__all__ = ["Model"]
