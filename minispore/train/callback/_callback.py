"""The callback protocol of `Model.train` / `Model.eval`: `Callback`, `RunContext`, the parameter bag.

`Model` calls hooks in this order (MindSpore's):

    on_train_begin
      on_train_epoch_begin
        on_train_step_begin   (one training step: train_network(*batch))   on_train_step_end
        ...
      on_train_epoch_end
      ...
    on_train_end

and `on_eval_begin / on_eval_epoch_begin / on_eval_step_begin / on_eval_step_end / on_eval_epoch_end /
on_eval_end` during `Model.eval`. Each hook gets a `RunContext`; `run_context.original_args()` is the
parameter bag (`cb_params`): a dict whose keys are also attributes (`cb_params.cur_step_num`). Its
keys are MindSpore's: `cur_epoch_num`, `cur_step_num` (counted over all epochs), `batch_num` (steps
per epoch), `epoch_num`, `net_outputs` (what the train network returned: the loss), `train_network`,
`network`, `optimizer`, `loss_fn`, `train_dataset`, `mode` ("train" / "eval"), `dataset_sink_mode`,
and after an evaluation `metrics`.

MindSpore 1.x named the hooks `begin / epoch_begin / step_begin / step_end / epoch_end / end`. The
new `on_train_*` and `on_eval_*` hooks call those old ones by default, so a callback written either
way works (LossMonitor itself still overrides `step_end`).
"""
from __future__ import annotations

from contextlib import ExitStack

import numpy as np

from ...common.errors import OpTypeError
from ...common.tensor import Tensor


class Callback:
    """Base class: override the hooks you need; every hook takes a `RunContext`."""

    def __enter__(self):
        return self

    def __exit__(self, *err):
        return None

    # -- the 1.x hook names (the defaults of the new ones below) ----------------------------------
    def begin(self, run_context):
        """Called once before the first epoch (train and eval)."""

    def epoch_begin(self, run_context):
        """Called before each epoch."""

    def epoch_end(self, run_context):
        """Called after each epoch."""

    def step_begin(self, run_context):
        """Called before each step."""

    def step_end(self, run_context):
        """Called after each step."""

    def end(self, run_context):
        """Called once after the last epoch."""

    # -- the 2.x hook names ------------------------------------------------------------------------
    def on_train_begin(self, run_context):
        self.begin(run_context)

    def on_train_epoch_begin(self, run_context):
        self.epoch_begin(run_context)

    def on_train_epoch_end(self, run_context):
        self.epoch_end(run_context)

    def on_train_step_begin(self, run_context):
        self.step_begin(run_context)

    def on_train_step_end(self, run_context):
        self.step_end(run_context)

    def on_train_end(self, run_context):
        self.end(run_context)

    def on_eval_begin(self, run_context):
        self.begin(run_context)

    def on_eval_epoch_begin(self, run_context):
        self.epoch_begin(run_context)

    def on_eval_epoch_end(self, run_context):
        self.epoch_end(run_context)

    def on_eval_step_begin(self, run_context):
        self.step_begin(run_context)

    def on_eval_step_end(self, run_context):
        self.step_end(run_context)

    def on_eval_end(self, run_context):
        self.end(run_context)


_HOOKS = ("begin", "epoch_begin", "epoch_end", "step_begin", "step_end", "end",
          "on_train_begin", "on_train_epoch_begin", "on_train_epoch_end", "on_train_step_begin",
          "on_train_step_end", "on_train_end", "on_eval_begin", "on_eval_epoch_begin", "on_eval_epoch_end",
          "on_eval_step_begin", "on_eval_step_end", "on_eval_end")


class CallbackManager(Callback):
    """Several callbacks seen as one: each hook calls the callbacks' hooks in list order.

    Used as a context manager (`with CallbackManager(cbs) as cb:`), it enters every callback first
    (a callback may acquire resources in `__enter__`, e.g. a progress bar) and exits them all at the end.
    """

    def __init__(self, callbacks):
        self._callbacks, self._stack = [], None
        if isinstance(callbacks, Callback):
            self._callbacks.append(callbacks)
        elif isinstance(callbacks, (list, tuple)):
            for cb in callbacks:
                if not isinstance(cb, Callback):
                    raise OpTypeError("Model.train", "'callbacks' as a Callback or a list of Callback",
                                      f"a list containing {type(cb).__name__}")
                self._callbacks.append(cb)
        elif callbacks is not None:
            raise OpTypeError("Model.train", "'callbacks' as a Callback or a list of Callback",
                              type(callbacks).__name__)

    def __enter__(self):
        if self._stack is None:
            self._stack = ExitStack().__enter__()
            entered = []
            for cb in self._callbacks:
                target = self._stack.enter_context(cb)
                entered.append(target if isinstance(target, Callback) else cb)
            self._callbacks = entered
        return self

    def __exit__(self, *err):
        stack, self._stack = self._stack, None
        return stack.__exit__(*err) if stack is not None else None


def _fan_out(hook):
    def call(self, run_context):
        for cb in self._callbacks:
            getattr(cb, hook)(run_context)
    call.__name__ = hook
    call.__doc__ = f"Call `{hook}` of every callback, in order."
    return call


for _hook in _HOOKS:
    setattr(CallbackManager, _hook, _fan_out(_hook))


class InternalCallbackParam(dict):
    """The `cb_params` bag: a dict whose keys read and write as attributes."""

    def __getattr__(self, key):
        try:
            return self[key]
        except KeyError:
            raise AttributeError(f"cb_params has no attribute '{key}' (keys: {sorted(self)})") from None

    def __setattr__(self, key, value):
        self[key] = value


class RunContext:
    """What a hook receives: `original_args()` (the cb_params) and `request_stop()`.

    `request_stop()` makes `Model.train` finish the current step, then end training (the epoch-end
    and train-end hooks still run).
    """

    def __init__(self, original_args):
        if not isinstance(original_args, dict):
            raise OpTypeError("RunContext", "'original_args' to be a dict", type(original_args).__name__)
        self._original_args = original_args
        self._stop_requested = False

    def original_args(self):
        return self._original_args

    def request_stop(self):
        self._stop_requested = True

    def get_stop_requested(self):
        return self._stop_requested


def _handle_loss(loss):
    """The loss value a monitor prints: a Python float for a Tensor (its mean), the first element of
    a tuple (e.g. the loss of a loss-scale cell's `(loss, overflow, scale)`)."""
    if isinstance(loss, (tuple, list)):
        if loss and isinstance(loss[0], Tensor):
            loss = loss[0]
    elif isinstance(loss, Tensor):
        loss = float(np.mean(loss.asnumpy()))
    return loss
