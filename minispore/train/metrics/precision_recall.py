"""`Precision`, `Recall` (eval_type "classification" or "multilabel"), `Fbeta(beta)` and `F1()`:
per-class scores as MindSpore computes them.

For classification the prediction is `argmax(y_pred, axis=1)`; both it and y become one-hot rows,
and per class: precision = TP / predicted positives, recall = TP / actual positives,
F-beta = (1 + beta²)·TP / (beta²·actual + predicted). A tiny epsilon (`sys.float_info.min`) in the
denominator makes an empty class score 0 instead of NaN. `eval(average=False)` returns the per-class
array; `eval(average=True)` its mean.
"""
from __future__ import annotations

import numbers
import sys

import numpy as np

from ...common.errors import OpTypeError, OpValueError
from .metric import EvaluationBase, Metric, _labels_from_onehot, rearrange_inputs


def _check_average(op, average):
    if not isinstance(average, bool):
        raise OpTypeError(op, "'average' to be a bool", type(average).__name__)


def _one_hot_pair(op, y_pred, y, class_num):
    """Classification inputs as one-hot (N, C) rows: (prediction, truth)."""
    if y.max() + 1 > class_num:
        raise OpValueError(op, f"labels below the number of predicted classes ({class_num})",
                           f"label {y.max()}")
    truth = np.eye(class_num)[y.reshape(-1).astype(np.int64)]
    pred = np.eye(class_num)[y_pred.argmax(axis=1).reshape(-1)]
    return pred, truth


class _PrecisionRecall(EvaluationBase):
    """Shared by Precision and Recall; `_denominator(pred, truth)` is what TP is divided by."""

    def __init__(self, eval_type="classification"):
        super().__init__(eval_type)
        self.eps = sys.float_info.min
        self.clear()

    def clear(self):
        self._class_num = 0
        if self._type == "multilabel":
            self._true_positives = np.empty(0)
            self._denominators = np.empty(0)
            self._ratio_sum = 0
            self._count = 0
        else:
            self._true_positives = 0
            self._denominators = 0

    @staticmethod
    def _denominator(pred, truth):
        raise NotImplementedError

    @rearrange_inputs
    def update(self, *inputs):
        y_pred, y = self._checked_pred_and_true(inputs)
        if self._type == "classification":
            y_pred, y = _one_hot_pair(f"{type(self).__name__}.update", y_pred, y, self._class_num)
        else:
            y_pred = y_pred.swapaxes(1, 0).reshape(self._class_num, -1)
            y = y.swapaxes(1, 0).reshape(self._class_num, -1)
        denominator = self._denominator(y_pred, y)
        true_positives = (y * y_pred).sum(axis=0)
        if self._type == "multilabel":
            self._ratio_sum += np.sum(true_positives / (denominator + self.eps))
            self._count += len(denominator)
            self._true_positives = np.concatenate((self._true_positives, true_positives), axis=0)
            self._denominators = np.concatenate((self._denominators, denominator), axis=0)
        else:
            self._true_positives = self._true_positives + true_positives
            self._denominators = self._denominators + denominator

    def eval(self, average=False):
        if self._class_num == 0:
            self._check_not_empty(0)
        _check_average(f"{type(self).__name__}.eval", average)
        result = self._true_positives / (self._denominators + self.eps)
        if average:
            if self._type == "multilabel":
                result = self._ratio_sum / (self._count + self.eps)
            return result.mean()
        return result


class Precision(_PrecisionRecall):
    @staticmethod
    def _denominator(pred, truth):
        return pred.sum(axis=0)


class Recall(_PrecisionRecall):
    @staticmethod
    def _denominator(pred, truth):
        return truth.sum(axis=0)


class Fbeta(Metric):
    def __init__(self, beta):
        super().__init__()
        if not isinstance(beta, numbers.Real) or isinstance(beta, bool) or not beta > 0:
            raise OpValueError("Fbeta", "'beta' > 0", repr(beta))
        self.eps = sys.float_info.min
        self.beta = beta
        self.clear()

    def clear(self):
        self._true_positives = 0
        self._actual_positives = 0
        self._positives = 0
        self._class_num = 0

    @rearrange_inputs
    def update(self, *inputs):
        y_pred, y = self._pred_and_true(inputs)
        y = _labels_from_onehot(y_pred, y)
        EvaluationBase._check_class_num(self, y_pred)
        y_pred, y = _one_hot_pair(f"{type(self).__name__}.update", y_pred, y, self._class_num)
        self._positives = self._positives + y_pred.sum(axis=0)
        self._actual_positives = self._actual_positives + y.sum(axis=0)
        self._true_positives = self._true_positives + (y * y_pred).sum(axis=0)

    def eval(self, average=False):
        _check_average(f"{type(self).__name__}.eval", average)
        if self._class_num == 0:
            self._check_not_empty(0)
        b2 = self.beta ** 2
        fbeta = (1.0 + b2) * self._true_positives / (b2 * self._actual_positives + self._positives + self.eps)
        return fbeta.mean() if average else fbeta


class F1(Fbeta):
    def __init__(self):
        super().__init__(1.0)
