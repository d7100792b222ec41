"""Operators and methods of `Tensor`, attached here because they are ops (ops sit above Tensor).

`a + b` is `ops.add(a, b)`, `a @ b` is `ops.matmul(a, b)`, `t.sum()` is `ops.sum(t)`, and so on;
there is no second implementation anywhere.
"""
from __future__ import annotations

import numpy as np

from ..common.tensor import Tensor
from . import functional as F


def _binary(fn, reflected=False):
    # a NumPy array operand (`ndarray + Tensor`) is taken as a constant Tensor
    if reflected:
        return lambda self, other: fn(Tensor(other) if isinstance(other, np.ndarray) else other, self)
    return lambda self, other: fn(self, Tensor(other) if isinstance(other, np.ndarray) else other)


_OPERATORS = {
    "__add__": _binary(F.add), "__radd__": _binary(F.add, True),
    "__sub__": _binary(F.sub), "__rsub__": _binary(F.sub, True),
    "__mul__": _binary(F.mul), "__rmul__": _binary(F.mul, True),
    "__truediv__": _binary(F.div), "__rtruediv__": _binary(F.div, True),
    "__floordiv__": _binary(F.floor_divide), "__rfloordiv__": _binary(F.floor_divide, True),
    "__mod__": _binary(F.remainder), "__rmod__": _binary(F.remainder, True),
    "__pow__": _binary(F.pow), "__rpow__": _binary(F.pow, True),
    "__matmul__": _binary(F.matmul), "__rmatmul__": _binary(F.matmul, True),
    "__eq__": _binary(F.equal), "__ne__": _binary(F.not_equal),
    "__lt__": _binary(F.less), "__le__": _binary(F.less_equal),
    "__gt__": _binary(F.greater), "__ge__": _binary(F.greater_equal),
    "__and__": _binary(F.logical_and), "__or__": _binary(F.logical_or), "__xor__": _binary(F.logical_xor),
    "__neg__": lambda self: F.neg(self),
    "__abs__": lambda self: F.abs(self),
    "__invert__": lambda self: F.logical_not(self),
    "__pos__": lambda self: self,
}

# methods that are exactly the functional op with the tensor first
_SAME_NAME = ["abs", "exp", "log", "sqrt", "rsqrt", "square", "sin", "cos", "erf", "floor", "ceil", "round",
              "sign", "neg", "reciprocal", "isnan", "isinf", "isfinite", "matmul", "maximum", "minimum",
              "pow", "add", "sub", "mul", "div", "equal", "transpose", "permute", "broadcast_to",
              "relu", "sigmoid", "tanh", "softmax", "log_softmax", "cumsum", "argmax", "argmin", "logsumexp",
              "var", "std", "prod", "all", "any", "squeeze", "expand_dims", "unsqueeze", "flatten", "tril", "triu",
              "gather", "index_select", "masked_fill", "topk", "sort", "argsort", "split", "chunk", "tile",
              "repeat_interleave", "flip", "clamp", "clip", "where", "norm", "scatter", "amax", "amin", "addmm"]


def _reshape(self, *shape):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    return F.reshape(self, shape)


def _sum(self, axis=None, dtype=None, keepdims=False, initial=None):
    out = F.sum(self, axis, keepdims, dtype=dtype)
    return out + initial if initial is not None else out


def _mean(self, axis=None, keep_dims=False):
    return F.mean(self, axis, keep_dims)


def _T(self):
    return F.transpose(self, tuple(range(self.ndim - 1, -1, -1)))


def _max(self, axis=None, keepdims=False, *, initial=None, where=None, return_indices=False):
    """`Tensor.max` returns values only (MindSpore); `return_indices=True` gives (values, indices)."""
    if return_indices:
        return F.max(self, axis, keepdims, initial=initial, where=where)
    return F.amax(self, axis, keepdims, initial=initial, where=where)


def _min(self, axis=None, keepdims=False, *, initial=None, where=None, return_indices=False):
    if return_indices:
        return F.min(self, axis, keepdims, initial=initial, where=where)
    return F.amin(self, axis, keepdims, initial=initial, where=where)


def _argmax(self, axis=None, keepdims=False):
    return F.argmax(self, axis, keepdims)          # Tensor.argmax spells it axis/keepdims


def _cumsum(self, axis=None, dtype=None):
    x = F.reshape(self, (-1,)) if axis is None else self   # axis=None flattens, as in MindSpore
    return F.cumsum(x, 0 if axis is None else axis, dtype=dtype)


def attach():
    for name, fn in _OPERATORS.items():
        setattr(Tensor, name, fn)
    for name in _SAME_NAME:
        fn = getattr(F, name, None)
        if fn is not None:
            setattr(Tensor, name, fn)
    Tensor.copy = lambda self: F.deepcopy(self)          # recorded, so gradients flow through copies
    Tensor.flatten = lambda self, order="C", *, start_dim=0, end_dim=-1: F.flatten(
        self, order, start_dim=start_dim, end_dim=end_dim)   # the method's start_dim is 0 (MindSpore)
    Tensor.reshape = _reshape
    Tensor.view = _reshape           # NumPy reshape returns a view whenever the layout allows
    Tensor.sum = _sum
    Tensor.mean = _mean
    Tensor.T = property(_T)
    Tensor.astype = lambda self, dtype: F.cast(self, dtype)
    Tensor.to = Tensor.astype
    Tensor.float = lambda self: F.cast(self, "float32")
    Tensor.int = lambda self: F.cast(self, "int32")
    Tensor.long = lambda self: F.cast(self, "int64")
    Tensor.bool = lambda self: F.cast(self, "bool_")
    Tensor.half = lambda self: F.cast(self, "float16")
    if hasattr(F, "argmax"):
        Tensor.argmax = _argmax
    if hasattr(F, "cumsum"):
        Tensor.cumsum = _cumsum
    if hasattr(F, "amax"):
        Tensor.max = _max
        Tensor.min = _min
    if hasattr(F, "getitem"):
        Tensor.__getitem__ = lambda self, index: F.getitem(self, index)
    if hasattr(F, "setitem"):
        Tensor.__setitem__ = lambda self, index, value: F.setitem(self, index, value)


attach()
