"""`mindspore.dataset.transforms`: general transforms for `Dataset.map` (and eager calls).

    ds = ds.map(transforms.TypeCast(ms.int32), input_columns="label")
    ds = ds.map(transforms.Compose([vision.Rescale(1 / 255, 0), vision.HWC2CHW()]), input_columns="image")

Each transform is a callable on NumPy arrays (one argument per input column) returning an array
(or a tuple for several output columns), as MindSpore's are.
"""
from __future__ import annotations

import numbers

import numpy as np

from ...common import dtype as mstype
from ...common.errors import OpTypeError, OpValueError
from ...common.tensor import Tensor
from ._random import RandomTransform


def _array(op, x):
    if isinstance(x, Tensor):
        return x.asnumpy()
    arr = np.asarray(x)
    if arr.dtype == object:
        raise OpTypeError(op, "a numeric array (or Tensor)", type(x).__name__)
    return arr


def _numpy_dtype(op, data_type):
    """A MindSpore dtype (ms.int32) or a NumPy dtype (np.float32) as a NumPy dtype."""
    if isinstance(data_type, mstype.DType):
        return np.dtype(mstype.dtype_to_nptype(data_type))
    try:
        dt = np.dtype(data_type)
    except TypeError:
        raise OpTypeError(op, "'data_type' as a mindspore dtype or a numpy dtype", repr(data_type)) from None
    if dt.kind not in "biuf":
        raise OpTypeError(op, "'data_type' as a numeric or bool dtype", str(dt))
    return dt


class TypeCast:
    """`TypeCast(data_type)`: cast to a dtype (`ms.int32` or `np.float32`)."""

    def __init__(self, data_type):
        self.data_type = data_type
        self._dtype = _numpy_dtype("TypeCast", data_type)

    def __call__(self, x):
        return _array("TypeCast", x).astype(self._dtype)


class OneHot:
    """`OneHot(num_classes, smoothing_rate=0.0)`: class ids -> one-hot rows (a new last axis), in the
    input's integer dtype; with label smoothing, float32 rows of `smoothing_rate / num_classes` and
    `1 - smoothing_rate + smoothing_rate / num_classes`."""

    def __init__(self, num_classes, smoothing_rate=0.0):
        op = "OneHot"
        if not isinstance(num_classes, numbers.Integral) or isinstance(num_classes, bool) or num_classes < 1:
            raise OpValueError(op, "'num_classes' as a positive int", repr(num_classes))
        if not isinstance(smoothing_rate, numbers.Real) or not 0.0 <= smoothing_rate <= 1.0:
            raise OpValueError(op, "'smoothing_rate' in [0, 1]", repr(smoothing_rate))
        self.num_classes, self.smoothing_rate = int(num_classes), float(smoothing_rate)

    def __call__(self, label):
        op = "OneHot"
        label = _array(op, label)
        if label.dtype.kind not in "iu":
            raise OpTypeError(op, "integer class ids", f"dtype {label.dtype}")
        if label.size and (label.min() < 0 or label.max() >= self.num_classes):
            raise OpValueError(op, f"class ids in [0, {self.num_classes})", f"values in [{label.min()}, {label.max()}]")
        eye = np.eye(self.num_classes, dtype=label.dtype)[label]
        if self.smoothing_rate == 0.0:
            return eye
        r, k = self.smoothing_rate, self.num_classes
        return (eye.astype(np.float32) * (1.0 - r) + r / k).astype(np.float32)


class Compose:
    """`Compose(transforms)`: apply a list of transforms in order (tuple results feed the next one's
    arguments)."""

    def __init__(self, transforms):
        if not isinstance(transforms, (list, tuple)) or not transforms or not all(callable(t) for t in transforms):
            raise OpTypeError("Compose", "'transforms' as a non-empty list of callables", repr(transforms)[:80])
        self.transforms = list(transforms)
        self._is_random = any(getattr(t, "_is_random", False) for t in self.transforms)

    def _run(self, rng, columns):
        for t in self.transforms:
            if rng is not None and getattr(t, "_is_random", False):
                columns = t._call_with_rng(rng, *columns)
            else:
                columns = t(*columns)
            if not isinstance(columns, tuple):
                columns = (columns,)
        return columns[0] if len(columns) == 1 else columns

    def __call__(self, *columns):
        return self._run(None, columns)

    def _call_with_rng(self, rng, *columns):
        return self._run(rng, columns)


class Duplicate:
    """`Duplicate()`: one column in, two equal columns out (use `output_columns=[a, b]` in map)."""

    def __call__(self, x):
        x = _array("Duplicate", x)
        return x, x.copy()


class Fill:
    """`Fill(fill_value)`: an array of the input's shape and dtype, every element `fill_value`."""

    def __init__(self, fill_value):
        if not isinstance(fill_value, (numbers.Number, bool)):
            raise OpTypeError("Fill", "'fill_value' as a number or bool", type(fill_value).__name__)
        self.fill_value = fill_value

    def __call__(self, x):
        x = _array("Fill", x)
        return np.full_like(x, self.fill_value)


class RandomApply(RandomTransform):
    """`RandomApply(transforms, prob=0.5)`: apply the whole list with probability `prob`."""

    def __init__(self, transforms, prob=0.5):
        self.compose = Compose(transforms)
        if not isinstance(prob, numbers.Real) or not 0.0 <= prob <= 1.0:
            raise OpValueError("RandomApply", "'prob' in [0, 1]", repr(prob))
        self.prob = float(prob)

    def _call_with_rng(self, rng, *columns):
        if rng.random() < self.prob:
            return self.compose._call_with_rng(rng, *columns)
        return columns[0] if len(columns) == 1 else columns


class RandomChoice(RandomTransform):
    """`RandomChoice(transforms)`: apply one transform of the list, chosen uniformly."""

    def __init__(self, transforms):
        self.compose = Compose(transforms)

    def _call_with_rng(self, rng, *columns):
        t = self.compose.transforms[int(rng.integers(len(self.compose.transforms)))]
        return Compose([t])._call_with_rng(rng, *columns)


__all__ = ["TypeCast", "OneHot", "Compose", "Duplicate", "Fill", "RandomApply", "RandomChoice"]
