"""`LossMonitor(per_print_times=1)`: print the loss every `per_print_times` steps, as MindSpore does.

    epoch: 1 step: 1, loss is 2.3025851249694824

The step is the step within the epoch; the loss is the mean of the train network's output as a
Python float (`float(np.mean(loss))`, so a float32 loss prints with float64 `repr` digits, as in
MindSpore). Printing is counted over all steps: with `per_print_times=2` and 3 steps per epoch,
lines appear at global steps 2, 4, 6 ("epoch: 1 step: 2", "epoch: 2 step: 1", "epoch: 2 step: 3").
A NaN or infinite loss stops training with a ValueError. After an evaluation during `Model.fit`,
the epoch end prints "Eval result: epoch N, metrics: {...}".
"""
from __future__ import annotations

import numpy as np

from ...common.errors import OpValueError
from ._callback import Callback, _handle_loss
from ._checks import int_arg


class LossMonitor(Callback):
    def __init__(self, per_print_times=1):
        super().__init__()
        self._per_print_times = int_arg("LossMonitor", "per_print_times", per_print_times, 0)
        self._last_print_time = 0

    def step_end(self, run_context):
        cb_params = run_context.original_args()
        cur_epoch_num = cb_params.get("cur_epoch_num", 1)
        loss = _handle_loss(cb_params.net_outputs)
        cur_step_in_epoch = (cb_params.cur_step_num - 1) % cb_params.batch_num + 1
        if isinstance(loss, float) and (np.isnan(loss) or np.isinf(loss)):
            raise OpValueError("LossMonitor", "a finite loss (training cannot continue)",
                               f"loss {loss} in epoch: {cur_epoch_num} step: {cur_step_in_epoch}")
        # a resumed run may count steps from below the last printed one
        while self._per_print_times != 0 and cb_params.cur_step_num <= self._last_print_time:
            self._last_print_time -= max(self._per_print_times,
                                         cb_params.batch_num if cb_params.get("dataset_sink_mode") else 1)
        if self._per_print_times != 0 and cb_params.cur_step_num - self._last_print_time >= self._per_print_times:
            self._last_print_time = cb_params.cur_step_num
            print("epoch: %s step: %s, loss is %s" % (cur_epoch_num, cur_step_in_epoch, loss), flush=True)

    def on_train_epoch_end(self, run_context):
        cb_params = run_context.original_args()
        metrics = cb_params.get("metrics")
        if metrics:
            # NumPy scalars print as plain numbers (as under the NumPy 1.x MindSpore runs on)
            shown = {k: v.item() if isinstance(v, np.generic) else v for k, v in metrics.items()}
            print("Eval result: epoch %d, metrics: %s" % (cb_params.cur_epoch_num, shown))
