"""Losses composed from existing primitives (elementwise ops, reductions, gather_d, vector_norm).

Each function validates its arguments first (shapes, dtypes, `reduction`, margins: every bad input
raises a minispore error before any kernel runs), then builds the loss from ops the tape already
differentiates, to any order. None of them has a primitive of its own, for one reason: a loss is
evaluated once per training step on a (batch, ...) tensor, a chain of a few elementwise ops. A fused
kernel would save a few temporaries, at the price of a second, hand-written copy of the math and of
its backward. (`binary_cross_entropy` is the exception, in loss_ops.py: MindSpore's kernel clamps
its logarithms *and* defines a gradient through the clamp, which a composite cannot reproduce.)

Semantics follow MindSpore 2.10 (checked against the real wheel): argument names and order,
defaults (`smooth_l1_loss` reduces with 'none'), which shapes broadcast, which dtypes are accepted,
and the reduction rule of MindSpore's `_get_loss`: half-precision losses are averaged in float32
and cast back.
"""
from __future__ import annotations

import math
import numbers

from ...common import dtype as mstype
from .. import _check as C
from . import _nn_common as N
from ._loss_reduction import check_reduction, reduce_loss

# =================================================================================================
# shared pieces


def _real(op, name, v):
    if not isinstance(v, numbers.Real) or isinstance(v, bool):
        raise C.OpTypeError(op, f"'{name}' to be a number", f"{type(v).__name__} {v!r}")
    return float(v)


def _same_shape(op, a_name, a, b_name, b):
    if tuple(a.shape) != tuple(b.shape):
        raise C.OpValueError(op, f"'{b_name}' of the same shape as '{a_name}' {tuple(a.shape)}",
                             f"shape {tuple(b.shape)}")


def _same_dtype(op, a_name, a, b_name, b):
    if a.dtype != b.dtype:
        raise C.OpTypeError(op, f"'{b_name}' of the same dtype as '{a_name}' ({a.dtype})", str(b.dtype))


def _softplus_stable(z):
    """log(1 + exp(z)) without overflow, and with finite derivatives of every order.

    Both branches are evaluated (that is how `where` works), so each branch is fed an argument on
    which it cannot overflow: otherwise the unused branch's inf would turn into nan in the backward.
    """
    from .elementwise import add, exp, greater, log, neg, where
    pos = greater(z, 0.0)
    z_pos = where(pos, z, 0.0)
    z_neg = where(pos, 0.0, z)
    return where(pos, add(z_pos, log(add(exp(neg(z_pos)), 1.0))), log(add(exp(z_neg), 1.0)))


# =================================================================================================
# regression losses
def mse_loss(input, target, reduction='mean'):
    """`ops.mse_loss(input, target, reduction='mean')`: (input - target)**2, broadcasting, reduced.

    Composite (square and sub): two elementwise ops, nothing for a fused kernel to save."""
    from .elementwise import square, sub
    N.floating("mse_loss", "input", input)
    N.tensor("mse_loss", "target", target)
    check_reduction("mse_loss", reduction)
    C.broadcast("mse_loss", tuple(input.shape), tuple(target.shape))
    return reduce_loss(square(sub(input, target)), reduction)


def l1_loss(input, target, reduction='mean'):
    """`ops.l1_loss(input, target, reduction='mean')`: |input - target|, broadcasting, reduced.

    Composite (abs and sub). Integer inputs work as in MindSpore: the loss keeps the integer dtype
    (a 'mean' is computed in float32 and cast back). The gradient at input == target is 0."""
    from .elementwise import abs as abs_, sub
    op = "l1_loss"
    N.tensor(op, "input", input)
    N.tensor(op, "target", target)
    check_reduction(op, reduction)
    C.broadcast(op, tuple(input.shape), tuple(target.shape))
    return reduce_loss(abs_(sub(input, target)), reduction)


def smooth_l1_loss(input, target, beta=1.0, reduction='none'):
    """`ops.smooth_l1_loss(input, target, beta=1.0, reduction='none')` (note MindSpore's default
    reduction, 'none'):  0.5 * d**2 / beta where |d| < beta, else |d| - 0.5 * beta, d = input - target.

    `input` and `target` must have the same shape (no broadcasting, as MindSpore's kernel); beta >= 0,
    and beta = 0 is the L1 loss. Composite (abs, square, where): the two branches meet with equal
    value and slope at |d| = beta, so autodiff through `where` is exact."""
    from .elementwise import abs as abs_, less, mul, square, sub, where
    op = "smooth_l1_loss"
    N.floating(op, "input", input)
    N.floating(op, "target", target)
    _same_shape(op, "input", input, "target", target)
    beta = _real(op, "beta", beta)
    if beta < 0:
        raise C.OpValueError(op, "'beta' >= 0", repr(beta))
    check_reduction(op, reduction)
    d = sub(input, target)
    ad = abs_(d)
    if beta == 0.0:
        return reduce_loss(ad, reduction)
    loss = where(less(ad, beta), mul(square(d), 0.5 / beta), sub(ad, 0.5 * beta))
    return reduce_loss(loss, reduction)


def huber_loss(input, target, reduction='mean', delta=1.0):
    """`ops.huber_loss(input, target, reduction='mean', delta=1.0)`:
    0.5 * d**2 where |d| < delta, else delta * (|d| - 0.5 * delta). Broadcasts; delta > 0.

    (smooth_l1_loss with beta = delta, times delta.) Composite, as smooth_l1_loss."""
    from .elementwise import abs as abs_, less, mul, square, sub, where
    op = "huber_loss"
    N.tensor(op, "input", input)
    N.tensor(op, "target", target)
    delta = _real(op, "delta", delta)
    if not delta > 0:
        raise C.OpValueError(op, "'delta' > 0", repr(delta))
    check_reduction(op, reduction)
    C.broadcast(op, tuple(input.shape), tuple(target.shape))
    z = abs_(sub(input, target))
    loss = where(less(z, delta), mul(square(z), 0.5), mul(sub(z, 0.5 * delta), delta))
    return reduce_loss(loss, reduction)


def gaussian_nll_loss(x, target, var, full=False, eps=1e-6, reduction='mean'):
    """`ops.gaussian_nll_loss(x, target, var, full=False, eps=1e-6, reduction='mean')`:
    0.5 * (log(max(var, eps)) + (x - target)**2 / max(var, eps)) (+ 0.5 * log(2 pi) if `full`).

    `var` may lack the last axis of `x` (one variance per sample) or broadcast against it. As in
    MindSpore, variances below `eps` are clamped (not rejected), and get no gradient there.
    Composite (maximum, log, square, div)."""
    from .elementwise import add, div, log, maximum, mul, square, sub
    from .shape_extra import expand_dims
    op = "gaussian_nll_loss"
    N.floating(op, "x", x)
    N.floating(op, "target", target)
    N.floating(op, "var", var)
    if not isinstance(full, bool):
        raise C.OpTypeError(op, "'full' to be a bool", f"{type(full).__name__} {full!r}")
    if not isinstance(eps, float) or not eps > 0:
        raise C.OpValueError(op, "'eps' as a positive float", repr(eps))
    check_reduction(op, reduction)
    if tuple(x.shape) != tuple(var.shape) and len(x.shape) >= 1 and tuple(x.shape[:-1]) == tuple(var.shape):
        var = expand_dims(var, -1)
    C.broadcast(op, tuple(x.shape), tuple(target.shape), tuple(var.shape))
    v = maximum(var, eps)
    loss = mul(add(log(v), div(square(sub(x, target)), v)), 0.5)
    if full:
        loss = add(loss, 0.5 * math.log(2 * math.pi))
    return reduce_loss(loss, reduction)


# =================================================================================================
# binary / margin classification losses
def binary_cross_entropy_with_logits(input, target, weight=None, pos_weight=None, reduction='mean'):
    """`ops.binary_cross_entropy_with_logits(input, target, weight=None, pos_weight=None, reduction='mean')`.

    loss = weight * ((1 - y) * x + (1 + (pos_weight - 1) * y) * log(1 + exp(-x))), computed
    stably; `target` has the input's shape; `weight` and `pos_weight` broadcast against it.
    Composite (a stable softplus and a few elementwise ops); both `input` and `target` get gradients.
    """
    from .elementwise import add, mul, neg, sub
    op = "binary_cross_entropy_with_logits"
    N.floating(op, "logits", input)
    N.floating(op, "label", target)
    if tuple(target.shape) != tuple(input.shape):
        raise C.OpValueError(op, f"'label' of the logits' shape {tuple(input.shape)}", f"shape {tuple(target.shape)}")
    for name, t in (("weight", weight), ("pos_weight", pos_weight)):
        if t is not None:
            N.floating(op, name, t)
            if C.broadcast(op, tuple(t.shape), tuple(input.shape)) != tuple(input.shape):
                raise C.OpValueError(op, f"'{name}' that broadcasts to the logits' shape {tuple(input.shape)}",
                                     f"shape {tuple(t.shape)}")
    check_reduction(op, reduction)
    sp = _softplus_stable(neg(input))                        # -log(sigmoid(x))
    log_weight = add(mul(sub(pos_weight, 1.0), target), 1.0) if pos_weight is not None else None
    loss = add(mul(sub(1.0, target), input), mul(log_weight, sp) if log_weight is not None else sp)
    if weight is not None:
        loss = mul(loss, weight)
    return reduce_loss(loss, reduction)


def soft_margin_loss(input, target, reduction='mean'):
    """`ops.soft_margin_loss(input, target, reduction='mean')`: log(1 + exp(-target * input)),
    targets +1 / -1, same shapes. Composite (a stable softplus of one product).

    (MindSpore 2.10's CPU wheel has no kernel for this op; the semantics are its documented formula,
    which is also PyTorch's.)"""
    from .elementwise import mul, neg
    op = "soft_margin_loss"
    N.floating(op, "input", input)
    N.floating(op, "target", target)
    _same_shape(op, "input", input, "target", target)
    check_reduction(op, reduction)
    return reduce_loss(_softplus_stable(neg(mul(target, input))), reduction)


def margin_ranking_loss(input1, input2, target, margin=0.0, reduction='mean'):
    """`ops.margin_ranking_loss(input1, input2, target, margin=0.0, reduction='mean')`:
    max(0, -target * (input1 - input2) + margin), broadcasting. `margin` must be a float and the three
    tensors share one dtype (both as MindSpore). Composite (sub, mul, clamp)."""
    from .activation import clamp
    from .elementwise import add, mul, neg, sub
    op = "margin_ranking_loss"
    if not isinstance(margin, float):
        raise C.OpTypeError(op, "'margin' to be a float", f"{type(margin).__name__} {margin!r}")
    for name, t in (("input1", input1), ("input2", input2), ("target", target)):
        N.tensor(op, name, t)
    _same_dtype(op, "input1", input1, "input2", input2)
    _same_dtype(op, "input1", input1, "target", target)
    C.broadcast(op, tuple(input1.shape), tuple(input2.shape), tuple(target.shape))
    check_reduction(op, reduction)
    x = add(mul(neg(target), sub(input1, input2)), margin)
    return reduce_loss(clamp(x, min=0.0), reduction)


def hinge_embedding_loss(inputs, targets, margin=1.0, reduction='mean'):
    """`ops.hinge_embedding_loss(inputs, targets, margin=1.0, reduction='mean')`:
    x where target > 0, max(0, margin - x) where target < 0 (0 where target == 0), broadcasting.

    Written as MindSpore writes it, with masks: (t > 0) * x + max(0, (t < 0) * (margin - x)).
    Composite (comparisons, mul, clamp)."""
    from .activation import clamp
    from .elementwise import add, cast, greater, less, mul, sub
    op = "hinge_embedding_loss"
    if not isinstance(margin, (float, int)) or isinstance(margin, bool):
        raise C.OpTypeError(op, "'margin' to be a float or an int", f"{type(margin).__name__} {margin!r}")
    check_reduction(op, reduction)
    N.floating(op, "inputs", inputs)
    N.floating(op, "targets", targets)
    C.broadcast(op, tuple(inputs.shape), tuple(targets.shape))
    pos = cast(greater(targets, 0), inputs.dtype)
    neg = cast(less(targets, 0), inputs.dtype)
    loss = add(mul(pos, inputs), clamp(mul(neg, sub(float(margin), inputs)), min=0.0))
    return reduce_loss(loss, reduction)


def cosine_embedding_loss(input1, input2, target, margin=0.0, reduction='mean'):
    """`ops.cosine_embedding_loss(input1, input2, target, margin=0.0, reduction='mean')`.

    cos = <x1, x2> / (|x1| |x2|) along axis 1; the loss is 1 - cos where target == 1 and
    max(0, cos - margin) where target == -1 (0 for other targets). `target` has the inputs' shape
    without axis 1; margin in [-1, 1]. Integer inputs are computed in float32 (as MindSpore).
    Composite (reductions along axis 1, sqrt, where). A zero vector gives nan, as in MindSpore."""
    from .elementwise import add, cast, div, equal, maximum, mul, sqrt, square, sub, where
    from .reduction import reduce_sum
    op = "cosine_embedding_loss"
    for name, t in (("input1", input1), ("input2", input2), ("target", target)):
        N.tensor(op, name, t)
    _same_dtype(op, "input1", input1, "input2", input2)
    if len(input1.shape) < 2:
        raise C.OpValueError(op, "'input1' of rank >= 2 (N, D, ...), the cosine is taken along axis 1",
                             f"shape {tuple(input1.shape)}")
    C.broadcast(op, tuple(input1.shape), tuple(input2.shape))
    want = tuple(input1.shape[:1]) + tuple(input1.shape[2:])
    if tuple(target.shape) != want:
        raise C.OpValueError(op, f"'target' of shape {want} ('input1' without axis 1)", f"shape {tuple(target.shape)}")
    margin = _real(op, "margin", margin)
    if not -1.0 <= margin <= 1.0:
        raise C.OpValueError(op, "'margin' in [-1, 1]", repr(margin))
    check_reduction(op, reduction)
    if not input1.dtype.is_floating:
        input1, input2 = cast(input1, mstype.float32), cast(input2, mstype.float32)
    dot = reduce_sum(mul(input1, input2), 1)
    denom = mul(sqrt(reduce_sum(square(input1), 1)), sqrt(reduce_sum(square(input2), 1)))
    cos = div(dot, denom)
    pos_part = where(equal(target, 1), sub(1.0, cos), 0.0)
    neg_part = where(equal(target, -1), maximum(sub(cos, margin), 0.0), 0.0)
    return reduce_loss(add(pos_part, neg_part), reduction)


def multilabel_soft_margin_loss(input, target, weight=None, reduction='mean'):
    """`ops.multilabel_soft_margin_loss(input, target, weight=None, reduction='mean')`:
    per sample, the mean over classes (last axis) of
    weight * (target * log(1 + exp(-x)) + (1 - target) * log(1 + exp(x))), then reduced.

    Composite (a stable softplus, mean over the class axis). Stable for large |x|, where MindSpore's
    kernel-free formula overflows to inf in float32."""
    from .elementwise import add, cast, mul, neg, sub
    from .reduction import mean
    op = "multilabel_soft_margin_loss"
    N.floating(op, "input", input)
    N.tensor(op, "target", target)
    if len(input.shape) == 0:
        raise C.OpValueError(op, "'input' of shape (C,) or (N, C)", "a 0-d tensor")
    C.broadcast(op, tuple(input.shape), tuple(target.shape))
    if weight is not None:
        N.floating(op, "weight", weight)
        C.broadcast(op, tuple(input.shape), tuple(weight.shape))
    check_reduction(op, reduction)
    if target.dtype != input.dtype:
        target = cast(target, input.dtype)
    loss = add(mul(target, _softplus_stable(neg(input))), mul(sub(1.0, target), _softplus_stable(input)))
    if weight is not None:
        loss = mul(loss, weight)
    return reduce_loss(mean(loss, -1), reduction)


def multi_margin_loss(input, target, p=1, margin=1, weight=None, reduction='mean'):
    """`ops.multi_margin_loss(input, target, p=1, margin=1, weight=None, reduction='mean')`:
    the multi-class hinge loss. For sample i with class y = target[i] and C classes,

        loss_i = sum_{j != y} w[y] * max(0, margin - x[i, y] + x[i, j]) ** p / C

    `input` (N, C) float, `target` (N,) class indices, p in {1, 2}, `margin` an int (as MindSpore's
    functional form; nn.MultiMarginLoss takes a float). Composite (gather_d, relu, one_hot mask):
    the picked score x[i, y] is one gather, the rest elementwise."""
    op = "multi_margin_loss"
    if not isinstance(margin, int) or isinstance(margin, bool):
        raise C.OpTypeError(op, "'margin' to be an int", f"{type(margin).__name__} {margin!r}")
    return _multi_margin(op, input, target, p, float(margin), weight, reduction)


def _multi_margin(op, input, target, p, margin, weight, reduction):
    from .activation import relu
    from .elementwise import add, cast, mul, square, sub
    from .indexing import gather, gather_d, one_hot
    from .reduction import reduce_sum
    from .shape_extra import expand_dims
    if not isinstance(p, int) or isinstance(p, bool) or p not in (1, 2):
        raise C.OpValueError(op, "'p' in {1, 2}", repr(p))
    N.floating(op, "input", input)
    C.integer(op, "target", target)
    if len(input.shape) != 2:
        raise C.OpValueError(op, "'input' of shape (N, C)", f"shape {tuple(input.shape)}")
    n, n_classes = input.shape
    if tuple(target.shape) != (n,):
        raise C.OpValueError(op, f"'target' of shape ({n},)", f"shape {tuple(target.shape)}")
    if weight is not None:
        N.floating(op, "weight", weight)
        if tuple(weight.shape) != (n_classes,):
            raise C.OpValueError(op, f"'weight' of shape ({n_classes},)", f"shape {tuple(weight.shape)}")
    check_reduction(op, reduction)
    idx = expand_dims(target, 1)
    picked = gather_d(input, 1, idx)                                   # x[i, y_i], shape (N, 1)
    hinge = relu(add(sub(input, picked), margin))
    if p == 2:
        hinge = square(hinge)
    others = sub(1.0, cast(one_hot(target, n_classes, 1.0, 0.0), input.dtype))   # drop j == y_i
    per = reduce_sum(mul(hinge, others), 1)
    if weight is not None:
        per = mul(per, gather(weight, target, 0))
    return reduce_loss(mul(per, 1.0 / n_classes), reduction)


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-06, swap=False, reduction='mean'):
    """`ops.triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-06, swap=False,
    reduction='mean')`:  max(0, margin + d(a, p) - d(a, n)), d(u, v) = ||u - v + eps||_p along the
    feature axis (1). With `swap`, d(a, n) is replaced by min(d(a, n), d(p, n)).

    Inputs are (N, D) of one dtype; `margin` a number or a 0-d tensor. Composite (vector_norm,
    clamp). (MindSpore 2.10's CPU wheel has no kernel for this op; the semantics are its documented
    formula, which is also PyTorch's.)"""
    from .activation import clamp
    from .elementwise import add, minimum, sub
    from .reduction_extra import vector_norm
    op = "triplet_margin_loss"
    for name, t in (("anchor", anchor), ("positive", positive), ("negative", negative)):
        N.floating(op, name, t)
        if len(t.shape) != 2:
            raise C.OpValueError(op, f"'{name}' of shape (N, D)", f"shape {tuple(t.shape)}")
    _same_shape(op, "anchor", anchor, "positive", positive)
    _same_shape(op, "anchor", anchor, "negative", negative)
    _same_dtype(op, "anchor", anchor, "positive", positive)
    _same_dtype(op, "anchor", anchor, "negative", negative)
    if C.is_tensor(margin):
        if len(margin.shape) != 0:
            raise C.OpValueError(op, "'margin' as a number or a 0-d tensor", f"shape {tuple(margin.shape)}")
    else:
        margin = _real(op, "margin", margin)
    if not isinstance(p, numbers.Real) or isinstance(p, bool) or not p > 0:
        raise C.OpValueError(op, "'p' > 0", repr(p))
    eps = _real(op, "eps", eps)
    if not isinstance(swap, bool):
        raise C.OpTypeError(op, "'swap' to be a bool", f"{type(swap).__name__} {swap!r}")
    check_reduction(op, reduction)

    def dist(u, v):
        return vector_norm(add(sub(u, v), eps), ord=p, axis=1)

    d_pos = dist(anchor, positive)
    d_neg = dist(anchor, negative)
    if swap:
        d_neg = minimum(d_neg, dist(positive, negative))
    return reduce_loss(clamp(add(sub(d_pos, d_neg), margin), min=0.0), reduction)


# =================================================================================================
# divergence
_KL_REDUCTIONS = ("none", "mean", "batchmean", "sum")


def kl_div(logits, labels, reduction='mean'):
    """`ops.kl_div(logits, labels, reduction='mean')`: labels * (log(labels) - logits), where
    `logits` are log-probabilities and `labels` probabilities; elements with labels <= 0 count 0.

    reduction: 'none' | 'mean' (over all elements) | 'sum' | 'batchmean' (sum / shape[0], the
    true KL divergence per sample). Same shapes and dtypes. As in MindSpore, `labels` get no gradient
    (MindSpore's KLDivLoss backward returns zeros for them); only `logits` are differentiated.
    Composite (log, where, mul): the safe log(where(labels > 0, labels, 1)) keeps 0 * log 0 at 0
    without a nan in the backward."""
    from .elementwise import div, greater, log, mul, stop_gradient, sub, where
    op = "kl_div"
    C.one_of(op, "reduction", reduction, _KL_REDUCTIONS, f"'reduction' in {list(_KL_REDUCTIONS)}")
    N.floating(op, "logits", logits)
    N.floating(op, "labels", labels)
    _same_shape(op, "logits", logits, "labels", labels)
    _same_dtype(op, "logits", logits, "labels", labels)
    if reduction == "batchmean" and len(logits.shape) == 0:
        raise C.OpValueError(op, "'logits' with a batch axis for reduction='batchmean'", "a 0-d tensor")
    t = stop_gradient(labels)
    pos = greater(t, 0.0)
    loss = where(pos, mul(t, sub(log(where(pos, t, 1.0)), logits)), 0.0)
    if reduction == "batchmean":
        return div(reduce_loss(loss, "sum"), float(logits.shape[0]))
    return reduce_loss(loss, reduction)


__all__ = ["binary_cross_entropy_with_logits", "cosine_embedding_loss", "gaussian_nll_loss", "hinge_embedding_loss",
           "huber_loss", "kl_div", "l1_loss", "margin_ranking_loss", "mse_loss", "multi_margin_loss",
           "multilabel_soft_margin_loss", "smooth_l1_loss", "soft_margin_loss", "triplet_margin_loss"]
