"""`LambdaCallback(on_train_epoch_end=fn, ...)`: a callback made of plain functions, one per hook.

    LambdaCallback(on_train_step_end=lambda run_context: losses.append(
        run_context.original_args().net_outputs.asnumpy()))
"""
from __future__ import annotations

from ._callback import Callback

_NAMES = ("on_train_epoch_begin", "on_train_epoch_end", "on_train_step_begin", "on_train_step_end",
          "on_train_begin", "on_train_end", "on_eval_epoch_begin", "on_eval_epoch_end", "on_eval_step_begin",
          "on_eval_step_end", "on_eval_begin", "on_eval_end")


def _ignore(run_context):
    return None


class LambdaCallback(Callback):
    def __init__(self, on_train_epoch_begin=None, on_train_epoch_end=None, on_train_step_begin=None,
                 on_train_step_end=None, on_train_begin=None, on_train_end=None,
                 on_eval_epoch_begin=None, on_eval_epoch_end=None, on_eval_step_begin=None,
                 on_eval_step_end=None, on_eval_begin=None, on_eval_end=None):
        super().__init__()
        given = locals()
        for name in _NAMES:
            # an instance attribute shadows the class hook (and with it the 1.x fallback)
            setattr(self, name, given[name] or _ignore)
