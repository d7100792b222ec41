"""`TimeMonitor(data_size=None, data_time=False)`: print the epoch time and the time per step.

    Train epoch time: 322.586 ms, per step time: 107.529 ms

`data_size` (steps per epoch) is only a fallback: the step count comes from `cb_params.batch_num`.
With `data_time=True` it adds the average time spent waiting for data between steps
(" (data time: 1.234 ms)").
"""
from __future__ import annotations

import time

from ._callback import Callback
from ._checks import bool_arg, int_arg


class TimeMonitor(Callback):
    def __init__(self, data_size=None, data_time=False):
        super().__init__()
        if data_size is not None:
            int_arg("TimeMonitor", "data_size", data_size, 1)
        self.data_size = data_size
        self.data_time = bool_arg("TimeMonitor", "data_time", data_time)
        self.epoch_time = time.time()
        self.data_time_sum = 0.0
        self.data_time_start = 0.0

    def on_train_step_begin(self, run_context):
        if self.data_time:
            self.data_time_sum += time.time() - self.data_time_start

    def on_train_step_end(self, run_context):
        if self.data_time:
            self.data_time_start = time.time()

    def epoch_begin(self, run_context):
        self.epoch_time = time.time()
        if self.data_time:
            self.data_time_sum = 0.0
            self.data_time_start = time.time()

    def epoch_end(self, run_context):
        epoch_ms = (time.time() - self.epoch_time) * 1000
        cb_params = run_context.original_args()
        step_size = self.data_size
        batch_num = cb_params.get("batch_num")
        if isinstance(batch_num, int) and batch_num > 0:
            step_size = batch_num
        int_arg("TimeMonitor", "steps per epoch (data_size or cb_params.batch_num)", step_size, 1)
        line = "{} epoch time: {:5.3f} ms, per step time: {:5.3f} ms".format(
            cb_params.get("mode", "").title(), epoch_ms, epoch_ms / step_size)
        if self.data_time:
            line += " (data time: {:5.3f} ms)".format(self.data_time_sum * 1000 / step_size)
        print(line, flush=True)
