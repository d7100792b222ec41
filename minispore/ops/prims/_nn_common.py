"""Small helpers shared by the nn family's modules (norm_ops, loss_ops, conv_ops, pool_ops, ...)."""
from __future__ import annotations

import numpy as np

from ...common.tensor import Tensor
from .._check import floating, tensor          # re-exported: the family checks through here

__all__ = ["compute_dtype", "floating", "needs_grad", "tensor"]


def needs_grad(t) -> bool:
    """Whether a backward rule must produce a gradient for input `t`: the tape only uses gradients
    of tensors it tracks (those with a node), so e.g. the gradient of a network's input image is
    skipped. Values that are not eager Tensors (graph capture) always get one."""
    if isinstance(t, Tensor):
        return t._node is not None
    return t is not None and hasattr(t, "shape")


def compute_dtype(a: np.ndarray):
    """float32 for half-precision inputs (their sums lose too much), else the input's dtype."""
    return np.dtype(np.float32) if a.dtype.itemsize < 4 else a.dtype
