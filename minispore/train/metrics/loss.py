"""`Loss()`: the average of the loss over `update` calls (one call per batch: batches are weighted
equally, whatever their size). A 1-D loss is first averaged over its elements."""
from __future__ import annotations

import numpy as np

from ...common.errors import OpValueError
from .metric import Metric, rearrange_inputs


class Loss(Metric):
    def __init__(self):
        super().__init__()
        self.clear()

    def clear(self):
        self._sum_loss = 0
        self._total_num = 0

    @rearrange_inputs
    def update(self, *inputs):
        self._check_num_inputs(inputs, 1, "(the loss)")
        loss = self._convert_data(inputs[0])
        if loss.ndim == 0:
            loss = loss.reshape(1)
        if loss.ndim != 1:
            raise OpValueError("Loss.update", "a 0-d or 1-d loss", f"shape {loss.shape}")
        # (float64 accumulation: MindSpore's NumPy 1.x promotes `0 + float32 scalar` to float64)
        self._sum_loss += np.float64(loss.mean(-1))
        self._total_num += 1

    def eval(self):
        self._check_not_empty(self._total_num)
        return self._sum_loss / self._total_num
