"""`Accuracy(eval_type="classification")`: the fraction of correct predictions.

classification: a sample is correct when `argmax(y_pred, axis=1) == y` (y may be one-hot);
multilabel: when every label of the sample matches. `eval()` is correct / total over all updates.
"""
from __future__ import annotations

import numpy as np

from .metric import EvaluationBase, rearrange_inputs


class Accuracy(EvaluationBase):
    def __init__(self, eval_type="classification"):
        super().__init__(eval_type)
        self.clear()

    def clear(self):
        self._correct_num = 0
        self._total_num = 0
        self._class_num = 0

    @rearrange_inputs
    def update(self, *inputs):
        y_pred, y = self._checked_pred_and_true(inputs)
        if self._type == "classification":
            result = (np.equal(y_pred.argmax(axis=1), y) * 1).reshape(-1)
        else:
            last = y_pred.ndim - 1
            y_pred = y_pred.swapaxes(1, last).reshape(-1, self._class_num)
            y = y.swapaxes(1, last).reshape(-1, self._class_num)
            result = np.equal(y_pred, y).all(axis=1) * 1
        self._correct_num += result.sum()
        self._total_num += result.shape[0]

    def eval(self):
        self._check_not_empty(self._total_num)
        return self._correct_num / self._total_num
