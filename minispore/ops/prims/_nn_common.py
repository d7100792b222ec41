"""Small helpers shared by the nn family's modules (norm_ops, loss_ops, conv_ops, pool_ops, ...)."""
from __future__ import annotations

import numpy as np

from ...common import dtype as mstype
from ...common.tensor import Tensor
from .. import _check as C


def tensor(op: str, arg: str, x):
    """Like `_check.tensor`, but a NumPy array (which also has .shape and .dtype) is refused too."""
    C.tensor(op, arg, x)
    if not isinstance(x.dtype, mstype.DType):
        raise C.OpTypeError(op, f"'{arg}' to be a Tensor", type(x).__name__)
    return x


def floating(op: str, arg: str, x):
    tensor(op, arg, x)
    return C.floating(op, arg, x)


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
