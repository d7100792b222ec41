"""Creation primitives: zeros, ones, full, full_like, arange, linspace, eye.

These have no tensor inputs (full_like reads only its input's shape and dtype), so their inference
rules take attributes only: the output shape and dtype are known before anything runs, which is
what lets graph capture and DryRun plan their memory. None is differentiable. Default dtypes
follow MindSpore 2.3: Float32 for zeros/ones/eye/linspace; full and arange infer Int64 or Float32
(Bool for full) from their Python arguments.

(`zeros_like` / `ones_like` live in elementwise.py, because backward rules use them.)
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from ...common import dtype as mstype
from ...common.tensor import Tensor
from .. import _check as C
from .. import costs
from .. import sharding_rules as SR
from ..primitive import AbstractTensor, defprim



__all__ = ["zeros", "ones", "full", "full_like", "arange", "linspace", "eye"]


def _size_arg(op, size):
    """A shape given as an int, a tuple/list of ints, or a 1-D integer Tensor."""
    if isinstance(size, Tensor):
        if size.dtype.kind not in ("int", "uint") or size.ndim > 1:
            raise C.OpTypeError(op, "a shape as an int, a tuple of ints or a 1-D integer Tensor",
                                f"a {size.dtype} Tensor of shape {size.shape}")
        size = tuple(int(s) for s in size.asnumpy().reshape(-1))
    shape = C.shape_arg(op, size)
    if any(s < 0 for s in shape):
        raise C.OpValueError(op, "non-negative sizes", repr(shape))
    return shape


def _dtype_arg(op, dtype, default):
    if dtype is None:
        return default
    try:
        return mstype.as_dtype(dtype)
    except TypeError:
        raise C.OpTypeError(op, "'dtype' as a minispore dtype such as ms.float32", repr(dtype)) from None


def _number(op, arg, v):
    """A Python number from a number or a one-element Tensor (MindSpore accepts both)."""
    if isinstance(v, Tensor):
        if v.size != 1:
            raise C.OpValueError(op, f"'{arg}' as a number or a one-element Tensor", f"shape {v.shape}")
        return v.item()
    if isinstance(v, (numbers.Real, np.generic)) and not isinstance(v, complex):
        return v.item() if isinstance(v, np.generic) else v
    raise C.OpTypeError(op, f"'{arg}' to be a number", f"{type(v).__name__} {v!r}")


# ------------------------------------------------------------------------------------------------
def _filled_infer(name):
    def infer(shape, dtype, **_):
        return AbstractTensor(_size_arg(name, shape), mstype.as_dtype(dtype))
    return infer


def _zeros_kernel(shape, dtype):
    C.output_fits("zeros", shape, dtype)
    return np.zeros(shape, dtype=dtype.np)


def _ones_kernel(shape, dtype):
    C.output_fits("ones", shape, dtype)
    return np.ones(shape, dtype=dtype.np)


def _full_kernel(shape, dtype, fill_value):
    C.output_fits("full", shape, dtype)
    if dtype is mstype.bool_:
        fill_value = bool(fill_value)              # (any int is a truth value; NumPy wants one in Int64)
    return np.full(shape, fill_value, dtype=dtype.np)


_zeros = defprim("zeros", _filled_infer("zeros"), _zeros_kernel, doc="a tensor of zeros", cost=costs.data_movement)
_ones = defprim("ones", _filled_infer("ones"), _ones_kernel, doc="a tensor of ones", cost=costs.data_movement)
_full = defprim("full", _filled_infer("full"), _full_kernel, doc="a tensor filled with one value",
                cost=costs.data_movement)


def zeros(size, dtype=None):
    """`ops.zeros(size, dtype=None)`: zeros of shape `size` (Float32 by default)."""
    return _zeros(shape=_size_arg("zeros", size), dtype=_dtype_arg("zeros", dtype, mstype.float32))


def ones(shape, dtype=None):
    """`ops.ones(shape, dtype=None)`: ones of `shape` (Float32 by default)."""
    return _ones(shape=_size_arg("ones", shape), dtype=_dtype_arg("ones", dtype, mstype.float32))


def full(size, fill_value, *, dtype=None):
    """`ops.full(size, fill_value, *, dtype=None)`: the dtype defaults to the fill value's
    (bool -> Bool, int -> Int64, float -> Float32, a Tensor -> its dtype)."""
    default = fill_value.dtype if isinstance(fill_value, Tensor) else None
    value = _number("full", "fill_value", fill_value)
    dt = _dtype_arg("full", dtype, default or mstype.scalar_dtype(value))
    _fill_fits("full", dt, value)
    return _full(shape=_size_arg("full", size), dtype=dt, fill_value=value)


def _fill_fits(op, dtype, value):
    """An int fill value must fit an integer dtype: MindSpore would wrap it (-1 as UInt8 is 255),
    NumPy refuses with OverflowError; minispore says so (as Tensor(300, ms.uint8) does)."""
    if dtype.kind not in ("int", "uint") or isinstance(value, bool):
        return
    if isinstance(value, float) and not math.isfinite(value):
        raise C.OpValueError(op, f"a finite 'fill_value' for an integer dtype ({dtype})", repr(value))
    if isinstance(value, int):
        info = np.iinfo(dtype.np)
        if not info.min <= value <= info.max:
            raise C.OpValueError(op, f"'fill_value' within the range of {dtype} [{info.min}, {info.max}]",
                                 repr(value))


def _full_like_infer(x, fill_value, dtype):
    C.tensor("full_like", "input", x)
    out_dtype = x.dtype if dtype is None else dtype
    _fill_fits("full_like", out_dtype, fill_value)
    return AbstractTensor(x.shape, out_dtype)


def _full_like_kernel(a, fill_value, dtype):
    np_dtype = a.dtype if dtype is None else dtype.np
    if np_dtype == np.bool_:
        fill_value = bool(fill_value)              # (any int is a truth value; NumPy wants one in Int64)
    return np.full(a.shape, fill_value, dtype=np_dtype)


_full_like = defprim("full_like", _full_like_infer, _full_like_kernel,
                     doc="a tensor shaped like the input, filled with one value", cost=costs.data_movement,
                     sharding=SR.shape_only)


def full_like(input, fill_value, *, dtype=None):
    """`ops.full_like(input, fill_value, *, dtype=None)`: input's shape and (by default) dtype."""
    value = _number("full_like", "fill_value", fill_value)
    return _full_like(input, fill_value=value, dtype=_dtype_arg("full_like", dtype, None))


# ------------------------------------------------------------------------------------------------
def _arange_len(start, end, step):
    if isinstance(start, int) and isinstance(end, int) and isinstance(step, int):
        return max(0, -((start - end) // step))          # exact ceil((end - start) / step)
    return max(0, math.ceil((end - start) / step))


def _as_float_ok(v):
    try:
        float(v)
        return True
    except OverflowError:
        return False


def _finite_quotient(a, b):
    try:
        return math.isfinite(a / b)
    except OverflowError:
        return False


def _arange_infer(start, end, step, dtype):
    shown = f"start={start}, end={end}, step={step}"
    if not all(_as_float_ok(v) for v in (start, end, step)):
        raise C.OpValueError("arange", "'start', 'end' and 'step' within the float range", shown[:200])
    if not all(math.isfinite(v) for v in (start, end, step) if isinstance(v, float)):
        raise C.OpValueError("arange", "finite 'start', 'end' and 'step'", shown)
    if step == 0:
        raise C.OpValueError("arange", "a non-zero 'step'", "0")
    if (step > 0 and start >= end) or (step < 0 and start <= end):
        raise C.OpValueError("arange", "start < end for step > 0 (start > end for step < 0)", shown)
    if not isinstance(step, int) and not _finite_quotient(end - start, step):
        raise C.OpValueError("arange", "a finite number of values (a step not vanishingly small)", shown)
    n = _arange_len(start, end, step)
    if isinstance(start, int) and isinstance(step, int) and not all(
            -2**63 <= v < 2**63 for v in (start, step, start + step * (n - 1))):
        # (the kernel computes start + step * k exactly in Int64)
        raise C.OpValueError("arange", "integer values within the Int64 range", shown)
    return AbstractTensor((n,), dtype)


def _arange_kernel(start, end, step, dtype):
    n = _arange_len(start, end, step)
    C.output_fits("arange", (n,), dtype)
    exact_ints = all(isinstance(v, int) for v in (start, step))
    # integers stay exact in int64; anything else is computed in float64 and rounded once
    k = np.arange(n, dtype=np.int64 if exact_ints else np.float64)
    return (start + step * k).astype(dtype.np)


_arange = defprim("arange", _arange_infer, _arange_kernel, doc="evenly spaced values in [start, end)",
                  cost=costs.data_movement)


def arange(start=0, end=None, step=1, *, dtype=None):
    """`ops.arange(start=0, end=None, step=1, *, dtype=None)`: values start, start+step, ... < end.

    With one argument it is the end. dtype defaults to Float32 if any argument is a float, else
    Int64. As in MindSpore, an empty range (start >= end for a positive step) is an error."""
    if end is None:
        start, end = 0, start
    start = _number("arange", "start", start)
    end = _number("arange", "end", end)
    step = _number("arange", "step", step)
    if dtype is None:
        dtype = mstype.float32 if any(isinstance(v, float) for v in (start, end, step)) else mstype.int64
    return _arange(start=start, end=end, step=step, dtype=_dtype_arg("arange", dtype, None))


def _linspace_infer(start, end, steps):
    C.int_attr("linspace", "steps", steps, minimum=1)
    return AbstractTensor((steps,), mstype.float32)


def _linspace_kernel(start, end, steps):
    C.output_fits("linspace", (steps,), np.float64)
    return np.linspace(start, end, steps, dtype=np.float64)


_linspace = defprim("linspace", _linspace_infer, _linspace_kernel,
                    doc="`steps` evenly spaced values from start to end inclusive", cost=costs.data_movement)


def linspace(start, end, steps):
    """`ops.linspace(start, end, steps)`: `steps` evenly spaced Float32 values from start to end."""
    if isinstance(steps, Tensor):
        # MindSpore takes a 0-d int32/int64 Tensor here; a float one (inf, nan, 2.5) has no count
        if steps.size != 1 or steps.dtype.kind not in ("int", "uint"):
            raise C.OpTypeError("linspace", "'steps' to be an int or a one-element integer Tensor",
                                f"Tensor(shape={tuple(steps.shape)}, dtype={steps.dtype})")
        steps = int(steps.item())
    else:
        steps = C.plain_ints(steps)
    return _linspace(start=float(_number("linspace", "start", start)), end=float(_number("linspace", "end", end)),
                     steps=steps)


def _eye_infer(n, m, dtype):
    C.int_attr("eye", "n", n, minimum=0)
    C.int_attr("eye", "m", m, minimum=0)
    return AbstractTensor((n, m), dtype)


def _eye_kernel(n, m, dtype):
    C.output_fits("eye", (n, m), dtype)
    return np.eye(n, m, dtype=dtype.np)


_eye = defprim("eye", _eye_infer, _eye_kernel, doc="identity matrix", cost=costs.data_movement)


def eye(n, m=None, dtype=None):
    """`ops.eye(n, m=None, dtype=None)`: an n x m matrix with ones on the diagonal (Float32)."""
    n = C.plain_ints(n)
    return _eye(n=n, m=n if m is None else C.plain_ints(m), dtype=_dtype_arg("eye", dtype, mstype.float32))
