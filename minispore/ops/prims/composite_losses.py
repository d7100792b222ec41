"""Losses composed from a handful of elementwise ops: `mse_loss` and
`binary_cross_entropy_with_logits`.

No primitive of their own: the tape differentiates the ops they are made of, to any order. They
are not in a hot loop the way cross_entropy is, so a fused kernel would buy little.
"""
from __future__ import annotations

from .. import _check as C
from . import _nn_common as N
from .loss_ops import _reduction


def _reduce_loss(loss, reduction):
    from .reduction import mean, reduce_sum
    if reduction == "mean":
        return mean(loss)
    if reduction == "sum":
        return reduce_sum(loss)
    return loss


def mse_loss(input, target, reduction='mean'):
    """`ops.mse_loss(input, target, reduction='mean')`: (input - target)**2, broadcasting, reduced."""
    from .elementwise import square, sub
    N.floating("mse_loss", "input", input)
    N.tensor("mse_loss", "target", target)
    _reduction("mse_loss", reduction)
    C.broadcast("mse_loss", tuple(input.shape), tuple(target.shape))
    return _reduce_loss(square(sub(input, target)), reduction)


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


def binary_cross_entropy_with_logits(logits, label, weight=None, pos_weight=None, reduction='mean'):
    """`ops.binary_cross_entropy_with_logits(logits, label, weight=None, pos_weight=None, reduction='mean')`.

    loss = weight * ((1 - y) * x + (1 + (pos_weight - 1) * y) * log(1 + exp(-x))), computed
    stably; `weight` and `pos_weight` broadcast against `logits`.
    """
    from .elementwise import add, mul, neg, sub
    op = "binary_cross_entropy_with_logits"
    N.floating(op, "logits", logits)
    N.floating(op, "label", label)
    if tuple(label.shape) != tuple(logits.shape):
        raise C.OpValueError(op, f"'label' of the logits' shape {tuple(logits.shape)}", f"shape {tuple(label.shape)}")
    for name, t in (("weight", weight), ("pos_weight", pos_weight)):
        if t is not None:
            N.floating(op, name, t)
            if C.broadcast(op, tuple(t.shape), tuple(logits.shape)) != tuple(logits.shape):
                raise C.OpValueError(op, f"'{name}' that broadcasts to the logits' shape {tuple(logits.shape)}",
                                     f"shape {tuple(t.shape)}")
    _reduction(op, reduction)
    sp = _softplus_stable(neg(logits))                        # -log(sigmoid(x))
    log_weight = add(mul(sub(pos_weight, 1.0), label), 1.0) if pos_weight is not None else None
    loss = add(mul(sub(1.0, label), logits), mul(log_weight, sp) if log_weight is not None else sp)
    if weight is not None:
        loss = mul(loss, weight)
    return _reduce_loss(loss, reduction)


__all__ = ["binary_cross_entropy_with_logits", "mse_loss"]
