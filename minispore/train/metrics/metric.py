"""`Metric`: the base of evaluation metrics — `clear()`, `update(*inputs)`, `eval()` (MindSpore's API).

    acc = Accuracy()
    acc.clear()
    acc.update(logits, labels)          # Tensors, ndarrays or lists; called once per batch
    acc.eval()                          # 0.75 (a NumPy float64, as MindSpore returns)

`Model.eval` calls `update(outputs, labels)` for each batch (and `update(loss)` for the `Loss`
metric) and returns `{name: metric.eval()}`. `set_indexes([2, 1])` makes `update` pick its inputs
from positions 2 and 1 of what it is given (for an eval network returning `(loss, logits, label)`),
through the `rearrange_inputs` decorator on `update`. Metrics compute in NumPy on the host, outside
the autodiff tape, as MindSpore's do.
"""
from __future__ import annotations

import functools

import numpy as np

from ...common.errors import OpTypeError, OpValueError
from ...common.tensor import Tensor

EVAL_TYPES = ("classification", "multilabel")


def rearrange_inputs(func):
    """Decorate `update(self, *inputs)` so `self.indexes` (if set) picks and orders its inputs."""
    @functools.wraps(func)
    def wrapper(self, *inputs):
        indexes = self.indexes
        inputs = inputs if not indexes else [inputs[i] for i in indexes]
        return func(self, *inputs)
    return wrapper


class Metric:
    """Base class. Subclasses override `clear`, `update` and `eval`."""

    def __init__(self):
        self._indexes = None

    def _convert_data(self, data):
        if isinstance(data, Tensor):
            return data.asnumpy()
        if isinstance(data, list):
            return np.array(data)
        if isinstance(data, np.ndarray):
            return data
        raise OpTypeError(f"{type(self).__name__}.update", "inputs as Tensor, list or numpy.ndarray",
                          type(data).__name__)

    @property
    def indexes(self):
        return getattr(self, "_indexes", None)

    def set_indexes(self, indexes):
        if not isinstance(indexes, list) or not all(isinstance(i, int) for i in indexes):
            raise OpValueError(f"{type(self).__name__}.set_indexes", "'indexes' as a list of int", repr(indexes))
        self._indexes = indexes
        return self

    def __call__(self, *inputs):
        """One-shot evaluation: clear, update with these inputs, eval."""
        self.clear()
        self.update(*inputs)
        return self.eval()

    def clear(self):
        raise NotImplementedError(f"{type(self).__name__} must define clear()")

    def update(self, *inputs):
        raise NotImplementedError(f"{type(self).__name__} must define update()")

    def eval(self):
        raise NotImplementedError(f"{type(self).__name__} must define eval()")

    # shared checks ---------------------------------------------------------------------------------
    def _check_num_inputs(self, inputs, n, what="(predicted value, true value)"):
        if len(inputs) != n:
            raise OpValueError(f"{type(self).__name__}.update", f"{n} input(s) {what}", f"{len(inputs)}")

    def _pred_and_true(self, inputs):
        """`update(y_pred, y)`'s two inputs as ndarrays (every two-input metric starts this way)."""
        self._check_num_inputs(inputs, 2)
        return self._convert_data(inputs[0]), self._convert_data(inputs[1])

    def _check_not_empty(self, count):
        if count == 0:
            raise OpValueError(f"{type(self).__name__}.eval", "update() called with samples before eval()",
                               "no samples")


class EvaluationBase(Metric):
    """A metric over class predictions: `eval_type` "classification" (y_pred (N, C, ...) scores, y
    (N, ...) class ids or (N, C, ...) one-hot) or "multilabel" (y_pred and y both (N, C, ...) of 0/1)."""

    def __init__(self, eval_type):
        super().__init__()
        if eval_type not in EVAL_TYPES:
            raise OpValueError(type(self).__name__, f"'eval_type' in {EVAL_TYPES}", repr(eval_type))
        self._type = eval_type

    def _check_shape(self, y_pred, y):
        op = f"{type(self).__name__}.update"
        if self._type == "classification":
            if y_pred.ndim != y.ndim + 1:
                raise OpValueError(op, "y_pred with one more dimension (the classes) than y",
                                   f"y_pred shape {y_pred.shape}, y shape {y.shape}")
            if y.shape != (y_pred.shape[0],) + y_pred.shape[2:]:
                raise OpValueError(op, "y shape equal to y_pred shape without axis 1",
                                   f"y_pred shape {y_pred.shape}, y shape {y.shape}")
        elif y_pred.shape != y.shape:
            raise OpValueError(op, "y_pred and y of one shape (multilabel)",
                               f"y_pred shape {y_pred.shape}, y shape {y.shape}")

    def _check_value(self, y_pred, y):
        if self._type != "classification" and not (np.equal(y_pred ** 2, y_pred).all()
                                                   and np.equal(y ** 2, y).all()):
            raise OpValueError(f"{type(self).__name__}.update", "multilabel y_pred and y of 0s and 1s",
                               "other values")

    def _checked_pred_and_true(self, inputs):
        """`update`'s (y_pred, y) as ndarrays, one-hot y turned into class ids (classification),
        with shape, 0/1 values (multilabel) and class count checked against earlier updates."""
        y_pred, y = self._pred_and_true(inputs)
        if self._type == "classification":
            y = _labels_from_onehot(y_pred, y)
        self._check_shape(y_pred, y)
        self._check_value(y_pred, y)
        self._check_class_num(y_pred)
        return y_pred, y

    def _check_class_num(self, y_pred):
        if self._class_num == 0:
            self._class_num = y_pred.shape[1]
        elif y_pred.shape[1] != self._class_num:
            raise OpValueError(f"{type(self).__name__}.update",
                               f"{self._class_num} classes (as in the earlier updates)",
                               f"y_pred with {y_pred.shape[1]} classes")


def _check_onehot_data(data):
    """True when `data` (N, C, ...) is one-hot along axis 1."""
    if data.ndim > 1 and np.equal(data ** 2, data).all():
        shp = (data.shape[0],) + data.shape[2:]
        if np.equal(np.ones(shp), data.sum(axis=1)).all():
            return True
    return False


def _labels_from_onehot(y_pred, y):
    """y as class ids: a one-hot y (same rank as the scores y_pred) becomes `argmax(y, axis=1)`;
    class ids pass through unchanged."""
    if y_pred.ndim == y.ndim and _check_onehot_data(y):
        return y.argmax(axis=1)
    return y
