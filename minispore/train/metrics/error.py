"""`MAE()` and `MSE()`: mean absolute / squared error per sample.

`update(y_pred, y)` adds `sum(|y - y_pred|)` (or squared) over all elements and counts `y.shape[0]`
samples; `eval()` divides, so for (N, D) inputs the result is the per-sample *sum* over D averaged
over N (MindSpore's definition, not the element mean).
"""
from __future__ import annotations

import numpy as np

from ...common.errors import OpValueError
from .metric import Metric, rearrange_inputs


class _ErrorMetric(Metric):
    def __init__(self):
        super().__init__()
        self.clear()

    def clear(self):
        self._error_sum = 0
        self._samples_num = 0

    @staticmethod
    def _error(diff):
        raise NotImplementedError

    @rearrange_inputs
    def update(self, *inputs):
        y_pred, y = self._pred_and_true(inputs)
        if y.size != y_pred.size:          # y is reshaped to y_pred's shape, as MindSpore does
            raise OpValueError(f"{type(self).__name__}.update", "y with as many elements as y_pred",
                               f"y_pred shape {y_pred.shape}, y shape {y.shape}")
        # (float64 accumulation: MindSpore's NumPy 1.x promotes `0 + float32 scalar` to float64)
        self._error_sum += np.float64(self._error(y.reshape(y_pred.shape) - y_pred).sum())
        self._samples_num += y.shape[0]

    def eval(self):
        self._check_not_empty(self._samples_num)
        return self._error_sum / self._samples_num


class MAE(_ErrorMetric):
    _error = staticmethod(np.abs)


class MSE(_ErrorMetric):
    _error = staticmethod(np.square)
