"""The older functional spellings model-zoo code still uses, mostly through `from mindspore.ops
import functional as F`: `F.tensor_add`, `F.fill(type, shape, value)`, `F.dtype(x)`,
`F.tensor_dot(x1, x2, axes)`, `F.partial`, `F.scalar_to_tensor`, `F.tuple_to_array`.

None of them defines an op of its own: each checks MindSpore's arguments and calls the primitive
that already computes it (`tensor_add` *is* `add`; `tensor_dot` is a transpose, a reshape and
one matmul), so gradients and jit come with those primitives.
"""
from __future__ import annotations

import functools
import math
import numbers

import numpy as np

from ...common import dtype as mstype
from ...common.tensor import Tensor
from .. import _check as C
from .creation import _fill_fits, _full, _number, _size_arg
from .elementwise import add, div, floor_divide, greater, greater_equal, less, less_equal, mul, pow, sub
from .linalg import matmul
from .math_extra import floor_mod
from .shape import reshape, transpose

# MindSpore 1.x names of the arithmetic and comparison primitives: the same functions
tensor_add, tensor_sub, tensor_mul, tensor_pow = add, sub, mul, pow
tensor_div = div                # (MindSpore's RealDiv; on integer tensors MindSpore 2.10's CPU
                                #  kernel truncates and keeps Int32, minispore divides truly)
tensor_floordiv, tensor_mod = floor_divide, floor_mod
tensor_gt, tensor_ge, tensor_lt, tensor_le = greater, greater_equal, less, less_equal


# ------------------------------------------------------------------------------------------------
def fill(type, shape, value):
    """`ops.fill(type, shape, value)`: a tensor of `shape` (a tuple of ints or a 1-D integer Tensor)
    and dtype `type`, every element `value` (a number or a one-element Tensor, converted to `type`
    as a cast would: 2.7 into Int32 is 2)."""
    if not isinstance(type, mstype.DType):
        raise C.OpTypeError("fill", "'type' to be a mindspore dtype (ms.float32, ...)",
                            f"{type.__class__.__name__} {type!r}")
    return _full(shape=_size_arg("fill", shape), dtype=type, fill_value=_cast_value(type, _number("fill", "value", value)))


def _cast_value(dtype, value):
    """`value` converted to `dtype` as a cast does: floats truncate toward zero into integers, and
    integers wrap around (two's complement) into a narrower integer dtype, 255 into Int8 is -1
    (NumPy's np.full refuses both). NaN and inf have no integer value: a clear error."""
    if dtype.kind == "bool":
        return bool(value)
    if dtype.kind not in ("int", "uint") or isinstance(value, bool):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise C.OpValueError("fill", f"a finite 'value' for an integer dtype ({dtype})", repr(value))
        value = int(value)
    info = np.iinfo(dtype.np)
    span = int(info.max) - int(info.min) + 1
    return (int(value) - int(info.min)) % span + int(info.min)


def dtype(input):
    """`ops.dtype(input)`: the tensor's dtype (`ms.float32`, ...), a Python value."""
    C.tensor("dtype", "input", input)
    return input.dtype


def scalar_to_tensor(input_x, dtype=mstype.float32):
    """`ops.scalar_to_tensor(input_x, dtype=ms.float32)`: a 0-d tensor holding the number."""
    if isinstance(input_x, bool) or not isinstance(input_x, numbers.Real):
        raise C.OpTypeError("scalar_to_tensor", "'input_x' to be an int or a float",
                            f"{input_x.__class__.__name__} {input_x!r}")
    if not isinstance(dtype, mstype.DType):
        raise C.OpTypeError("scalar_to_tensor", "'dtype' to be a mindspore dtype", repr(dtype))
    _fill_fits("scalar_to_tensor", dtype, input_x)
    return _full(shape=(), dtype=dtype, fill_value=input_x)


def tuple_to_array(input_x):
    """`ops.tuple_to_array(input_x)`: a 1-D tensor from a tuple of numbers. As MindSpore: Int32 when
    the first element is an int, Float32 when it is a float (the others are converted to that)."""
    if not isinstance(input_x, tuple) or not input_x or \
            not all(isinstance(v, numbers.Real) and not isinstance(v, bool) for v in input_x):
        raise C.OpTypeError("tuple_to_array", "'input_x' to be a non-empty tuple of ints or floats", repr(input_x))
    dt = mstype.int32 if isinstance(input_x[0], numbers.Integral) else mstype.float32
    return Tensor(np.array(input_x).astype(dt.np), dt)


def partial(func, *args):
    """`ops.partial(func, *args)`: `func` with its first arguments bound (functools.partial)."""
    if not callable(func):
        raise C.OpTypeError("partial", "'func' to be callable", func.__class__.__name__)
    return functools.partial(func, *args)


# ------------------------------------------------------------------------------------------------
# tensor_dot
def _axis_list(x):
    if isinstance(x, numbers.Integral) and not isinstance(x, bool):
        return [int(x)]
    if isinstance(x, (tuple, list)) and all(isinstance(a, numbers.Integral) and not isinstance(a, bool) for a in x):
        return [int(a) for a in x]
    return None


def _tensor_dot_axes(axes, n1, n2):
    """MindSpore's `axes` forms -> (axes of x1, axes of x2), non-negative: an int n (the last n
    dims of x1 with the first n of x2), or a pair of ints / of int sequences."""
    if isinstance(axes, numbers.Integral) and not isinstance(axes, bool):
        n = int(axes)
        if not 0 <= n <= min(n1, n2):
            raise C.OpValueError("tensor_dot", f"an int 'axes' in [0, {min(n1, n2)}] (the ranks are {n1} and {n2})",
                                 repr(axes))
        return list(range(n1 - n, n1)), list(range(n))
    pair = [_axis_list(a) for a in axes] if isinstance(axes, (tuple, list)) and len(axes) == 2 else None
    if pair is None or None in pair:
        raise C.OpTypeError("tensor_dot", "'axes' as an int, or a pair of ints or of int tuples",
                            f"{axes.__class__.__name__} {axes!r}")
    if len(pair[0]) != len(pair[1]):
        raise C.OpValueError("tensor_dot", "the two entries of 'axes' to have one length", repr(axes))
    if (pair[0] and n1 == 0) or (pair[1] and n2 == 0):      # (C.axis lets a 0-d tensor name axis 0)
        raise C.OpValueError("tensor_dot", "'axes' naming dims the inputs have", f"axes {axes!r} with ranks {n1} and {n2}")
    a1 = [C.axis("tensor_dot", a, n1) for a in pair[0]]
    a2 = [C.axis("tensor_dot", a, n2) for a in pair[1]]
    if len(set(a1)) != len(a1) or len(set(a2)) != len(a2):
        raise C.OpValueError("tensor_dot", "no axis repeated within an entry of 'axes'", repr(axes))
    return a1, a2


def tensor_dot(x1, x2, axes):
    """`ops.tensor_dot(x1, x2, axes)`: sum over the paired axes (`np.tensordot`). The free axes of
    x1 come first, then those of x2. Both inputs must have one dtype (MindSpore's MatMul)."""
    C.tensor("tensor_dot", "x1", x1)
    C.tensor("tensor_dot", "x2", x2)
    if x1.dtype is not x2.dtype:
        raise C.OpTypeError("tensor_dot", "x1 and x2 of one dtype", f"{x1.dtype} and {x2.dtype}")
    s1, s2 = tuple(x1.shape), tuple(x2.shape)
    a1, a2 = _tensor_dot_axes(axes, len(s1), len(s2))
    for i, j in zip(a1, a2):
        if s1[i] != s2[j]:
            raise C.OpValueError("tensor_dot", f"x1 dim {i} and x2 dim {j} of one size",
                                 f"shapes {s1} and {s2}, axes {axes!r}")
    free1 = [i for i in range(len(s1)) if i not in a1]
    free2 = [j for j in range(len(s2)) if j not in a2]
    m, k, n = (math.prod(s1[i] for i in free1), math.prod(s1[i] for i in a1), math.prod(s2[j] for j in free2))
    left = reshape(transpose(x1, tuple(free1 + a1)), (m, k))
    right = reshape(transpose(x2, tuple(a2 + free2)), (k, n))
    return reshape(matmul(left, right), tuple(s1[i] for i in free1) + tuple(s2[j] for j in free2))


__all__ = ["tensor_add", "tensor_sub", "tensor_mul", "tensor_div", "tensor_pow", "tensor_floordiv", "tensor_mod",
           "tensor_gt", "tensor_ge", "tensor_lt", "tensor_le", "fill", "dtype", "scalar_to_tensor", "tuple_to_array",
           "partial", "tensor_dot"]
