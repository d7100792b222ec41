"""`TopKCategoricalAccuracy(k)`, `Top1CategoricalAccuracy()`, `Top5CategoricalAccuracy()`: a sample
is correct when its label is among the k highest scores (ties broken by `np.argsort(-y_pred)`)."""
from __future__ import annotations

import numbers

import numpy as np

from ...common.errors import OpTypeError, OpValueError
from .metric import Metric, _labels_from_onehot, rearrange_inputs


class TopKCategoricalAccuracy(Metric):
    def __init__(self, k):
        super().__init__()
        if not isinstance(k, numbers.Integral) or isinstance(k, bool):
            raise OpTypeError("TopKCategoricalAccuracy", "'k' to be an int", type(k).__name__)
        if k < 1:
            raise OpValueError("TopKCategoricalAccuracy", "'k' >= 1", repr(k))
        self.k = int(k)
        self.clear()

    def clear(self):
        self._correct_num = 0
        self._samples_num = 0

    @rearrange_inputs
    def update(self, *inputs):
        y_pred, y = self._pred_and_true(inputs)
        y = _labels_from_onehot(y_pred, y)
        indices = np.argsort(-y_pred, axis=1)[:, :self.k]
        repeated_y = y.reshape(-1, 1).repeat(self.k, axis=1)
        self._correct_num += np.equal(indices, repeated_y).sum(axis=1).sum()
        self._samples_num += repeated_y.shape[0]

    def eval(self):
        self._check_not_empty(self._samples_num)
        return self._correct_num / self._samples_num


class Top1CategoricalAccuracy(TopKCategoricalAccuracy):
    def __init__(self):
        super().__init__(1)


class Top5CategoricalAccuracy(TopKCategoricalAccuracy):
    def __init__(self):
        super().__init__(5)
