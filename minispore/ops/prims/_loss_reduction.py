"""The `reduction` argument every loss takes ('none' | 'mean' | 'sum'): its check and its rule.

Shared by the losses with primitives of their own (loss_ops.py) and those composed from other ops
(composite_losses.py); kept apart from both so that neither imports the other.
"""
from __future__ import annotations

from ...common import dtype as mstype
from .. import _check as C

REDUCTIONS = ("none", "mean", "sum")


def check_reduction(op, reduction):
    """`reduction` if it is one of REDUCTIONS, else an OpValueError naming `op`."""
    return C.one_of(op, "reduction", reduction, REDUCTIONS, f"'reduction' in {list(REDUCTIONS)}")


def reduce_loss(loss, reduction):
    """Reduce an element-wise loss: 'mean' | 'sum' | 'none'.

    As MindSpore's `_get_loss`: float16/bfloat16 (and integer) losses are reduced in float32 and
    cast back to their own dtype, so a mean over many elements does not lose the low bits."""
    from .elementwise import cast
    from .reduction import mean, reduce_sum
    if reduction == "none":
        return loss
    dt = loss.dtype
    wide = dt not in (mstype.float32, mstype.float64)
    x = cast(loss, mstype.float32) if wide else loss
    x = mean(x) if reduction == "mean" else reduce_sum(x)
    return cast(x, dt) if wide else x
