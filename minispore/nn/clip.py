"""Gradient clipping by global norm (`ops.clip_by_global_norm`, MindSpore's `C.clip_by_global_norm`).

    global_norm = sqrt(sum_i ||x_i||^2)
    x_i <- x_i * clip_norm / max(global_norm, clip_norm)

so nothing changes while the global norm is at most `clip_norm`, and otherwise every tensor is
scaled by the same factor (the direction of the full gradient is kept). Written with minispore
ops, so it runs on any backend and is itself differentiable.
"""
from __future__ import annotations

import numbers

from ..common.errors import OpTypeError, OpValueError
from ..common.tensor import Tensor
from ..ops import functional as F


def sum_of_squares(xs):
    """sum_i ||x_i||^2 over the tensors `xs` (a 0-d Tensor, float32 or wider: half-precision
    tensors are squared in float32). The squared global norm before its square root: a
    distributed norm sums these over the ranks that hold different pieces of the model
    (llm/tensor_parallel.py `global_grad_norm`). None for an empty `xs`."""
    total = None
    for x in xs:
        x32 = x if x.dtype.kind == "float" and x.itemsize >= 4 else F.cast(x, "float32")
        sq = F.sum(x32 * x32)
        total = sq if total is None else total + sq
    return total


def _global_norm(xs):
    return F.sqrt(sum_of_squares(xs))


def clip_by_global_norm(x, clip_norm=1.0, use_norm=None):
    """Scale the tensors in `x` (a tuple/list) so their global L2 norm is at most `clip_norm`.

    `use_norm`: a precomputed global norm to use instead of computing it. Returns a tuple.
    """
    if isinstance(x, Tensor) or not isinstance(x, (tuple, list)):
        raise OpTypeError("clip_by_global_norm", "x as a tuple or list of Tensors", type(x).__name__)
    if not x:
        raise OpValueError("clip_by_global_norm", "at least one Tensor in x", "an empty sequence")
    for i, t in enumerate(x):
        if not isinstance(t, Tensor):
            raise OpTypeError("clip_by_global_norm", f"x[{i}] to be a Tensor", type(t).__name__)
        if not t.dtype.is_floating:
            raise OpTypeError("clip_by_global_norm", f"floating-point tensors, x[{i}]", str(t.dtype))
    if isinstance(clip_norm, Tensor):
        if clip_norm.size != 1:
            raise OpValueError("clip_by_global_norm", "clip_norm as a number or a one-element Tensor",
                               f"shape {tuple(clip_norm.shape)}")
        if float(clip_norm.item()) <= 0:
            raise OpValueError("clip_by_global_norm", "clip_norm > 0", repr(float(clip_norm.item())))
        clip = F.cast(F.reshape(clip_norm, ()), "float32")
    elif isinstance(clip_norm, numbers.Real) and not isinstance(clip_norm, bool):
        if clip_norm <= 0:
            raise OpValueError("clip_by_global_norm", "clip_norm > 0", repr(clip_norm))
        clip = float(clip_norm)
    else:
        raise OpTypeError("clip_by_global_norm", "clip_norm as a float or Tensor", type(clip_norm).__name__)

    if use_norm is None:
        norm = _global_norm(x)
    elif isinstance(use_norm, Tensor):
        # a float64 norm (of float64 gradients, e.g. a distributed one) keeps its precision
        norm = F.reshape(use_norm, ())
        if not (norm.dtype.is_floating and norm.dtype.itemsize >= 4):
            norm = F.cast(norm, "float32")
    elif isinstance(use_norm, numbers.Real) and not isinstance(use_norm, bool):
        norm = Tensor(float(use_norm))
    else:
        raise OpTypeError("clip_by_global_norm", "use_norm as None, a float or a Tensor", type(use_norm).__name__)
    limit = clip if isinstance(clip, Tensor) else Tensor(clip)
    scale = F.div(clip, F.maximum(norm, limit))
    return tuple(t * (scale if t.dtype is scale.dtype else F.cast(scale, t.dtype)) for t in x)
