"""Loss cells (MindSpore's `nn.*Loss`): each compares predictions with targets and reduces the
per-element loss with `reduction` = 'mean' (default) | 'sum' | 'none'.

The classification losses delegate to the fused ops (`ops.cross_entropy`, `ops.nll_loss`), which
compute log-softmax and the pick in one stable kernel; the regression losses are a line each.
"""
from __future__ import annotations

from ..common.errors import OpTypeError, OpValueError
from ..common.tensor import Tensor
from ..ops import functional as F
from . import _checks
from .cell import Cell

_REDUCTIONS = ("mean", "sum", "none")


class LossBase(Cell):
    """Base of the losses: holds `reduction` and offers `get_loss(x, weights=1.0)`."""

    def __init__(self, reduction="mean"):
        super().__init__()
        if reduction not in _REDUCTIONS:
            raise OpValueError(type(self).__name__, f"reduction in {list(_REDUCTIONS)}", repr(reduction))
        self.reduction = reduction

    def get_loss(self, x, weights=1.0):
        """Weight the element-wise loss `x` and reduce it as `reduction` says."""
        if not (isinstance(weights, (int, float)) and weights == 1.0):
            x = x * weights
        if self.reduction == "mean":
            return F.mean(x)
        if self.reduction == "sum":
            return F.sum(x)
        return x

    def extend_repr(self):
        return f"reduction={self.reduction}"


def _same_shape(cell, logits, labels):
    _checks.tensor_input(cell, logits, "logits")
    _checks.tensor_input(cell, labels, "labels")
    if tuple(logits.shape) != tuple(labels.shape):
        raise OpValueError(cell, "logits and labels of the same shape",
                           f"{tuple(logits.shape)} and {tuple(labels.shape)}")


class MSELoss(LossBase):
    """(logits - labels)^2, reduced."""

    def construct(self, logits, labels):
        _same_shape("MSELoss", logits, labels)
        diff = logits - labels
        return self.get_loss(diff * diff)


class L1Loss(LossBase):
    """|logits - labels|, reduced."""

    def construct(self, logits, labels):
        _same_shape("L1Loss", logits, labels)
        return self.get_loss(F.abs(logits - labels))


class CrossEntropyLoss(LossBase):
    """`CrossEntropyLoss(weight=None, ignore_index=-100, reduction='mean', label_smoothing=0.0)`.

    Logits (N, C) or (N, C, d1, ...); targets are class indices (N,) / (N, d1, ...) or class
    probabilities of the logits' shape. See `ops.cross_entropy`.
    """

    def __init__(self, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
        super().__init__(reduction)
        if weight is not None and not isinstance(weight, Tensor):
            raise OpTypeError("CrossEntropyLoss", "weight as a Tensor or None", type(weight).__name__)
        self.weight = weight
        self.ignore_index = ignore_index
        self.label_smoothing = _checks.real("CrossEntropyLoss", "label_smoothing", label_smoothing, lo=0.0, hi=1.0)

    def construct(self, logits, labels):
        return F.cross_entropy(logits, labels, self.weight, self.ignore_index, self.reduction, self.label_smoothing)


class NLLLoss(LossBase):
    """`NLLLoss(weight=None, ignore_index=-100, reduction='mean')`: -logits[target], for log-probabilities."""

    def __init__(self, weight=None, ignore_index=-100, reduction="mean"):
        super().__init__(reduction)
        if weight is not None and not isinstance(weight, Tensor):
            raise OpTypeError("NLLLoss", "weight as a Tensor or None", type(weight).__name__)
        self.weight = weight
        self.ignore_index = ignore_index

    def construct(self, logits, labels):
        return F.nll_loss(logits, labels, self.weight, self.ignore_index, self.reduction)


class SoftmaxCrossEntropyWithLogits(LossBase):
    """`SoftmaxCrossEntropyWithLogits(sparse=False, reduction='none')` (MindSpore's classic loss).

    `sparse=True`: labels are class indices (N,); otherwise one-hot/probability rows (N, C).
    """

    def __init__(self, sparse=False, reduction="none"):
        super().__init__(reduction)
        self.sparse = _checks.boolean("SoftmaxCrossEntropyWithLogits", "sparse", sparse)

    def construct(self, logits, labels):
        _checks.tensor_input("SoftmaxCrossEntropyWithLogits", logits, "logits")
        if logits.ndim != 2:
            raise OpValueError("SoftmaxCrossEntropyWithLogits", "logits of shape (N, C)",
                               f"shape {tuple(logits.shape)}")
        if self.sparse:
            return F.cross_entropy(logits, labels, None, -100, self.reduction, 0.0)
        _same_shape("SoftmaxCrossEntropyWithLogits", logits, labels)
        per_row = -F.sum(F.cast(labels, logits.dtype) * F.log_softmax(logits, -1), -1)
        return self.get_loss(per_row)
