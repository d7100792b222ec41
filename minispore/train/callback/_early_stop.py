"""`EarlyStopping(monitor="eval_loss", min_delta=0, patience=0, verbose=False, mode="auto",
baseline=None, restore_best_weights=False)`: stop training when a monitored value stops improving.

At every epoch end it reads the monitored value: `"loss"` is the training loss (the network output);
any other name is looked up in `cb_params.eval_results`, which `Model.fit(valid_dataset=...)` fills
with the metrics plus `"eval_loss"`. `mode="auto"` treats losses and errors (loss, eval_loss, mae,
mse, perplexity, distances) as smaller-is-better and anything else as larger-is-better. An epoch
counts as an improvement when it beats the best by more than `min_delta`; after `patience` epochs
without one, training stops (MindSpore's counting: the wait counter is incremented before the check,
so `patience=0` and `patience=1` both stop after the first epoch without improvement — and
`patience=0` stops after the very first epoch). With `restore_best_weights` the best epoch's parameters
are copied back when stopping.
"""
from __future__ import annotations

import logging
import numbers

import numpy as np

from ...common.errors import OpTypeError, OpValueError
from ...common.tensor import Tensor
from ._callback import Callback, _handle_loss
from ._checks import bool_arg, int_arg

logger = logging.getLogger("minispore")

SMALLER_IS_BETTER = ("hausdorff_distance", "mae", "mse", "loss", "perplexity", "mean_surface_distance",
                     "root_mean_square_distance", "eval_loss")


def _number(op, name, value):
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise OpTypeError(op, f"'{name}' to be a float or int", f"{type(value).__name__} {value!r}")
    return value


class EarlyStopping(Callback):
    def __init__(self, monitor="eval_loss", min_delta=0, patience=0, verbose=False, mode="auto",
                 baseline=None, restore_best_weights=False):
        super().__init__()
        op = "EarlyStopping"
        if not isinstance(monitor, str):
            raise OpTypeError(op, "'monitor' to be a str", type(monitor).__name__)
        self.monitor = monitor
        self.min_delta = abs(_number(op, "min_delta", min_delta))
        self.patience = int_arg(op, "patience", patience, 0)
        self.verbose = bool_arg(op, "verbose", verbose)
        if mode not in ("auto", "min", "max"):
            raise OpValueError(op, "'mode' in ('auto', 'min', 'max')", repr(mode))
        self.mode = mode
        # (MindSpore 2.10 stores `min_delta` here by mistake; minispore keeps the documented baseline)
        self.baseline = _number(op, "baseline", baseline) if baseline is not None else None
        self.restore_best_weights = bool_arg(op, "restore_best_weights", restore_best_weights)
        self._smaller = mode == "min" or (mode == "auto" and monitor in SMALLER_IS_BETTER)
        self._reset()

    def _reset(self):
        self.wait = 0
        self.stopped_epoch = 0
        self.best = np.inf if self._smaller else -np.inf
        self.best_weights_param_dict = None

    def is_improvement(self, current, reference):
        if self._smaller:
            return bool(np.less(current, reference - self.min_delta))
        return bool(np.greater(current, reference + self.min_delta))

    def on_train_begin(self, run_context):
        self._reset()

    def on_train_epoch_end(self, run_context):
        cb_params = run_context.original_args()
        current = self._get_monitor_value(cb_params)
        if current is None:
            return
        network = cb_params.train_network
        if self.restore_best_weights and self.best_weights_param_dict is None:
            self.best_weights_param_dict = self._snapshot(network)
        self.wait += 1
        if self.is_improvement(current, self.best):
            self.best = current
            if self.restore_best_weights:
                self.best_weights_param_dict = self._snapshot(network)
            if self.baseline is None or self.is_improvement(current, self.baseline):
                self.wait = 0
        if self.wait >= self.patience:
            self.stopped_epoch = cb_params.get("cur_epoch_num")
            run_context.request_stop()
            if self.restore_best_weights and self.best_weights_param_dict is not None:
                if self.verbose:
                    print("Restoring model weights from the end of the best epoch.")
                params = network.parameters_dict()
                for name, value in self.best_weights_param_dict.items():
                    params[name].set_data(Tensor(value))

    def on_train_end(self, run_context):
        if self.stopped_epoch > 0 and self.verbose:
            print("Epoch %05d: early stopping" % self.stopped_epoch)

    @staticmethod
    def _snapshot(network):
        return {name: p.asnumpy().copy() for name, p in network.parameters_dict().items()}

    def _get_monitor_value(self, cb_params):
        candidates = {}
        if self.monitor == "loss":
            value = _handle_loss(cb_params.get("net_outputs"))
            if isinstance(value, Tensor):
                value = float(np.mean(value.asnumpy()))
        else:
            candidates = cb_params.get("eval_results", {}) or {}
            value = candidates.get(self.monitor)
        if value is None:
            logger.warning("Early stopping is conditioned on %s, which is not available. Available choices "
                           "are: %s", self.monitor, sorted({"loss", *candidates}))
            return None
        value = np.asarray(value)
        if value.shape != ():
            raise OpValueError("EarlyStopping", "a scalar monitored value", f"shape {value.shape}")
        # (MindSpore: `np.array(v) if v else None`, so a value of exactly 0 is treated as missing)
        return value if value else None
