"""Loss cells (MindSpore's `nn.*Loss`): each compares predictions with targets and reduces the
per-element loss with `reduction` = 'mean' (default) | 'sum' | 'none'.

Every cell is a thin wrapper over the functional loss of the same name (`ops.l1_loss`,
`ops.cross_entropy`, ...), with MindSpore 2.10's constructor arguments, defaults and argument checks
(checked against the real wheel). Two MindSpore conventions worth knowing:
* `SmoothL1Loss` and `SoftmaxCrossEntropyWithLogits` default to reduction='none';
* `LossBase.get_loss(x, weights)` reduces in float32 and casts back (what MindSpore does), so a
  user's own loss subclass behaves the same in float16.
"""
from __future__ import annotations

import math
import numbers

from ..common import dtype as mstype
from ..common.errors import OpTypeError, OpValueError
from ..common.tensor import Parameter, Tensor
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
        """Weight the element-wise loss `x` and reduce it as `reduction` says. Half-precision and
        integer losses are reduced in float32 and cast back, as MindSpore does (MindSpore also
        narrows float64 to float32 here; minispore keeps float64 exact)."""
        dt = x.dtype
        wide = dt not in (mstype.float32, mstype.float64)
        if wide:
            x = F.cast(x, mstype.float32)
        if not (isinstance(weights, (int, float)) and weights == 1.0):
            x = x * (F.cast(weights, x.dtype) if isinstance(weights, Tensor) else weights)
        if self.reduction == "mean":
            x = F.mean(x)
        elif self.reduction == "sum":
            x = F.sum(x)
        return F.cast(x, dt) if wide else x

    def extend_repr(self):
        return f"reduction={self.reduction}"


def _tensors(cell, **named):
    for name, t in named.items():
        _checks.tensor_input(cell, t, name)


def _broadcastable(cell, a_name, a, b_name, b):
    """Reject prediction/target shapes that do not broadcast, naming the cell. A plain shape check
    (no try/except around the computation), so `jit` captures the construct that calls it."""
    sa, sb = tuple(a.shape), tuple(b.shape)
    if sa == sb:
        return
    for x, y in zip(reversed(sa), reversed(sb)):
        if x != y and x != 1 and y != 1:
            raise OpValueError(cell, f"{a_name} and {b_name} whose shapes broadcast", f"{sa} and {sb}")


def _optional_weight(cell, name, weight, dtypes=None):
    if weight is None:
        return None
    if not isinstance(weight, Tensor):
        raise OpTypeError(cell, f"'{name}' as a Tensor or None", type(weight).__name__)
    if dtypes is not None and weight.dtype not in dtypes:
        raise OpTypeError(cell, f"'{name}' dtype in {[str(d) for d in dtypes]}", str(weight.dtype))
    return weight


# =================================================================================================
# regression
class MSELoss(LossBase):
    """`MSELoss(reduction='mean')`: (logits - labels)^2 (broadcasting), reduced."""

    def construct(self, logits, labels):
        _tensors("MSELoss", logits=logits, labels=labels)
        _broadcastable("MSELoss", "logits", logits, "labels", labels)
        return self.get_loss(F.square(logits - labels))


class RMSELoss(LossBase):
    """`RMSELoss()`: sqrt(mean((logits - label)^2)), always a scalar."""

    def __init__(self):
        super().__init__()
        self.MSELoss = MSELoss()

    def construct(self, logits, label):
        return F.sqrt(self.MSELoss(logits, label))


class MAELoss(LossBase):
    """`MAELoss(reduction='mean')`: |logits - label| (broadcasting), reduced."""

    def construct(self, logits, label):
        _tensors("MAELoss", logits=logits, labels=label)
        return self.get_loss(F.abs(logits - label))


class L1Loss(LossBase):
    """`L1Loss(reduction='mean')`: `ops.l1_loss` (|logits - labels|, broadcasting)."""

    def construct(self, logits, labels):
        return F.l1_loss(logits, labels, self.reduction)


class SmoothL1Loss(LossBase):
    """`SmoothL1Loss(beta=1.0, reduction='none')` (note the default): `ops.smooth_l1_loss`."""

    def __init__(self, beta=1.0, reduction="none"):
        super().__init__(reduction)
        if not isinstance(beta, numbers.Real) or isinstance(beta, bool):
            raise OpTypeError("SmoothL1Loss", "'beta' to be a number", f"{type(beta).__name__} {beta!r}")
        if beta < 0:
            raise OpValueError("SmoothL1Loss", "'beta' >= 0", repr(beta))
        self.beta = beta

    def construct(self, logits, labels):
        return F.smooth_l1_loss(logits, labels, self.beta, self.reduction)

    def extend_repr(self):
        return f"beta={self.beta}, reduction={self.reduction}"


class HuberLoss(LossBase):
    """`HuberLoss(reduction='mean', delta=1.0)`: `ops.huber_loss`."""

    def __init__(self, reduction="mean", delta=1.0):
        super().__init__(reduction)
        self.delta = delta

    def construct(self, logits, labels):
        return F.huber_loss(logits, labels, self.reduction, self.delta)


class GaussianNLLLoss(LossBase):
    """`GaussianNLLLoss(*, full=False, eps=1e-6, reduction='mean')`; call `(logits, labels, var)`."""

    def __init__(self, *, full=False, eps=1e-6, reduction="mean"):
        super().__init__(reduction)
        if not isinstance(eps, numbers.Real) or isinstance(eps, bool) or not eps > 0:
            raise OpValueError("GaussianNLLLoss", "'eps' > 0", repr(eps))
        self.full = _checks.boolean("GaussianNLLLoss", "full", full)
        self.eps = float(eps)

    def construct(self, logits, labels, var):
        return F.gaussian_nll_loss(logits, labels, var, self.full, self.eps, self.reduction)


class PoissonNLLLoss(LossBase):
    """`PoissonNLLLoss(log_input=True, full=False, eps=1e-08, reduction='mean')`.

    log_input: loss = exp(x) - target * x; otherwise x - target * log(x + eps). `full` adds the
    Stirling term target * log(target) - target + 0.5 * log(2 pi target) where target > 1."""

    def __init__(self, log_input=True, full=False, eps=1e-08, reduction="mean"):
        super().__init__(reduction)
        self.log_input = _checks.boolean("PoissonNLLLoss", "log_input", log_input)
        self.full = _checks.boolean("PoissonNLLLoss", "full", full)
        self.eps = _checks.real("PoissonNLLLoss", "eps", eps)

    def construct(self, input, target):
        _tensors("PoissonNLLLoss", input=input, target=target)
        if not input.dtype.is_floating:
            raise OpTypeError("PoissonNLLLoss", "'input' of a floating dtype", str(input.dtype))
        target = F.cast(target, input.dtype)
        if self.log_input:
            loss = F.exp(input) - target * input
        else:
            loss = input - target * F.log(input + self.eps)
        if self.full:
            t = F.maximum(target, self.eps)
            stirling = (t + 0.5) * F.log(t) - t + 0.5 * math.log(2 * math.pi)
            loss = loss + F.where(t > 1, stirling, 0.0)
        return self.get_loss(loss)


# =================================================================================================
# binary and margin classification
class BCELoss(LossBase):
    """`BCELoss(weight=None, reduction='mean')`: `ops.binary_cross_entropy` on probabilities."""

    def __init__(self, weight=None, reduction="mean"):
        super().__init__(reduction)
        self.weight = _optional_weight("BCELoss", "weight", weight)

    def construct(self, logits, labels):
        return F.binary_cross_entropy(logits, labels, self.weight, self.reduction)


class BCEWithLogitsLoss(LossBase):
    """`BCEWithLogitsLoss(reduction='mean', weight=None, pos_weight=None)` (MindSpore's argument
    order): `ops.binary_cross_entropy_with_logits`. The weights are constants, never Parameters."""

    def __init__(self, reduction="mean", weight=None, pos_weight=None):
        super().__init__(reduction)
        for name, w in (("weight", weight), ("pos_weight", pos_weight)):
            if isinstance(w, Parameter):
                raise OpTypeError("BCEWithLogitsLoss", f"'{name}' as a Tensor (not a Parameter) or None", "a Parameter")
        self.weight = _optional_weight("BCEWithLogitsLoss", "weight", weight)
        self.pos_weight = _optional_weight("BCEWithLogitsLoss", "pos_weight", pos_weight)

    def construct(self, input, target):
        _tensors("BCEWithLogitsLoss", input=input, target=target)
        return F.binary_cross_entropy_with_logits(input, target, self.weight, self.pos_weight, self.reduction)


class SoftMarginLoss(LossBase):
    """`SoftMarginLoss(reduction='mean')`: `ops.soft_margin_loss`, log(1 + exp(-y * x))."""

    def construct(self, logits, labels):
        return F.soft_margin_loss(logits, labels, self.reduction)


class MarginRankingLoss(LossBase):
    """`MarginRankingLoss(margin=0.0, reduction='mean')`; call `(input1, input2, target)`."""

    def __init__(self, margin=0.0, reduction="mean"):
        super().__init__(reduction)
        self.margin = margin

    def construct(self, input1, input2, target):
        return F.margin_ranking_loss(input1, input2, target, self.margin, self.reduction)


class HingeEmbeddingLoss(LossBase):
    """`HingeEmbeddingLoss(margin=1.0, reduction='mean')`: `ops.hinge_embedding_loss`."""

    def __init__(self, margin=1.0, reduction="mean"):
        super().__init__(reduction)
        if not isinstance(margin, (float, int)) or isinstance(margin, bool):
            raise OpTypeError("HingeEmbeddingLoss", "'margin' to be a float or an int",
                              f"{type(margin).__name__} {margin!r}")
        self.margin = margin

    def construct(self, logits, labels):
        return F.hinge_embedding_loss(logits, labels, self.margin, self.reduction)


class CosineEmbeddingLoss(LossBase):
    """`CosineEmbeddingLoss(margin=0.0, reduction='mean')` (margin a float in [-1, 1]);
    call `(logits_x1, logits_x2, labels)` with inputs of one shape and dtype."""

    def __init__(self, margin=0.0, reduction="mean"):
        super().__init__(reduction)
        if not isinstance(margin, float):
            raise OpTypeError("CosineEmbeddingLoss", "'margin' to be a float", f"{type(margin).__name__} {margin!r}")
        self.margin = _checks.real("CosineEmbeddingLoss", "margin", margin, lo=-1.0, hi=1.0)

    def construct(self, logits_x1, logits_x2, labels):
        _tensors("CosineEmbeddingLoss", logits_x1=logits_x1, logits_x2=logits_x2, labels=labels)
        if tuple(logits_x1.shape) != tuple(logits_x2.shape) or logits_x1.dtype != logits_x2.dtype:
            raise OpValueError("CosineEmbeddingLoss", "logits_x1 and logits_x2 of the same shape and dtype",
                               f"{tuple(logits_x1.shape)} {logits_x1.dtype} and "
                               f"{tuple(logits_x2.shape)} {logits_x2.dtype}")
        return F.cosine_embedding_loss(logits_x1, logits_x2, labels, self.margin, self.reduction)


class MultiMarginLoss(LossBase):
    """`MultiMarginLoss(p=1, margin=1.0, reduction='mean', weight=None)`; call `(x, target, weight=None)`
    (a weight given at construction wins). The multi-class hinge loss of `ops.multi_margin_loss`."""

    def __init__(self, p=1, margin=1.0, reduction="mean", weight=None):
        super().__init__(reduction)
        if not isinstance(p, int) or isinstance(p, bool) or p not in (1, 2):
            raise OpValueError("MultiMarginLoss", "'p' in {1, 2}", repr(p))
        self.p = p
        self.margin = _checks.real("MultiMarginLoss", "margin", margin)
        self.weight = _optional_weight("MultiMarginLoss", "weight", weight)

    def construct(self, x, target, weight=None):
        from ..ops.prims.composite_losses import _multi_margin
        _tensors("MultiMarginLoss", x=x, target=target)
        if self.weight is not None:
            weight = self.weight
        return _multi_margin("MultiMarginLoss", x, target, self.p, self.margin, weight, self.reduction)


class MultiLabelSoftMarginLoss(LossBase):
    """`MultiLabelSoftMarginLoss(weight=None, reduction='mean')`: `ops.multilabel_soft_margin_loss`."""

    def __init__(self, weight=None, reduction="mean"):
        super().__init__(reduction)
        self.weight = _optional_weight("MultiLabelSoftMarginLoss", "weight", weight)

    def construct(self, x, target):
        return F.multilabel_soft_margin_loss(x, target, self.weight, self.reduction)


class TripletMarginLoss(LossBase):
    """`TripletMarginLoss(p=2, swap=False, eps=1e-06, reduction='mean', margin=1.0)`; call
    `(x, positive, negative, margin=1.0)` (a margin other than 1.0 given at construction wins)."""

    def __init__(self, p=2, swap=False, eps=1e-06, reduction="mean", margin=1.0):
        super().__init__(reduction)
        self.p = p
        self.swap = _checks.boolean("TripletMarginLoss", "swap", swap)
        self.eps = eps
        self.margin = margin

    def construct(self, x, positive, negative, margin=1.0):
        if self.margin != 1.0:
            margin = self.margin
        return F.triplet_margin_loss(x, positive, negative, margin=margin, p=self.p, eps=self.eps, swap=self.swap,
                                     reduction=self.reduction)


# =================================================================================================
# multi-class classification and divergence
class KLDivLoss(LossBase):
    """`KLDivLoss(reduction='mean')`: `ops.kl_div` (logits are log-probabilities); reduction may also
    be 'batchmean' (the true KL divergence per sample)."""

    def __init__(self, reduction="mean"):
        super().__init__("mean")
        if reduction not in ("none", "mean", "batchmean", "sum"):
            raise OpValueError("KLDivLoss", "reduction in ['none', 'mean', 'batchmean', 'sum']", repr(reduction))
        self.reduction = reduction

    def construct(self, logits, labels):
        _tensors("KLDivLoss", logits=logits, labels=labels)
        return F.kl_div(logits, labels, self.reduction)


_WEIGHT_DTYPES = (mstype.float16, mstype.float32)


class CrossEntropyLoss(LossBase):
    """`CrossEntropyLoss(weight=None, ignore_index=-100, reduction='mean', label_smoothing=0.0)`.

    Logits (N, C) or (N, C, d1, ...); targets are class indices (N,) / (N, d1, ...) or class
    probabilities of the logits' shape. See `ops.cross_entropy`.
    """

    def __init__(self, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
        super().__init__(reduction)
        self.weight = _optional_weight("CrossEntropyLoss", "weight", weight, _WEIGHT_DTYPES)
        if not isinstance(ignore_index, int) or isinstance(ignore_index, bool):
            raise OpTypeError("CrossEntropyLoss", "'ignore_index' to be an int", repr(ignore_index))
        self.ignore_index = ignore_index
        self.label_smoothing = _checks.real("CrossEntropyLoss", "label_smoothing", label_smoothing, lo=0.0, hi=1.0)

    def construct(self, logits, labels):
        _tensors("CrossEntropyLoss", logits=logits, labels=labels)
        return F.cross_entropy(logits, labels, self.weight, self.ignore_index, self.reduction, self.label_smoothing)


class NLLLoss(LossBase):
    """`NLLLoss(weight=None, ignore_index=-100, reduction='mean')`: -logits[target], for log-probabilities."""

    def __init__(self, weight=None, ignore_index=-100, reduction="mean"):
        super().__init__(reduction)
        self.weight = _optional_weight("NLLLoss", "weight", weight, _WEIGHT_DTYPES)
        if not isinstance(ignore_index, int) or isinstance(ignore_index, bool):
            raise OpTypeError("NLLLoss", "'ignore_index' to be an int", repr(ignore_index))
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
        _checks.tensor_input("SoftmaxCrossEntropyWithLogits", labels, "labels")
        if logits.ndim != 2:
            raise OpValueError("SoftmaxCrossEntropyWithLogits", "logits of shape (N, C)",
                               f"shape {tuple(logits.shape)}")
        if self.sparse:
            return F.cross_entropy(logits, labels, None, -100, self.reduction, 0.0)
        if tuple(logits.shape) != tuple(labels.shape):
            raise OpValueError("SoftmaxCrossEntropyWithLogits", "logits and labels of the same shape",
                               f"{tuple(logits.shape)} and {tuple(labels.shape)}")
        per_row = -F.sum(F.cast(labels, logits.dtype) * F.log_softmax(logits, -1), -1)
        return self.get_loss(per_row)


__all__ = ["BCELoss", "BCEWithLogitsLoss", "CosineEmbeddingLoss", "CrossEntropyLoss", "GaussianNLLLoss",
           "HingeEmbeddingLoss", "HuberLoss", "KLDivLoss", "L1Loss", "LossBase", "MAELoss", "MSELoss",
           "MarginRankingLoss", "MultiLabelSoftMarginLoss", "MultiMarginLoss", "NLLLoss", "PoissonNLLLoss",
           "RMSELoss", "SmoothL1Loss", "SoftMarginLoss", "SoftmaxCrossEntropyWithLogits", "TripletMarginLoss"]
