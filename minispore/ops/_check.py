"""Validation helpers shared by inference rules. Each raises a minispore error naming the op."""
from __future__ import annotations

import math
import numbers

import numpy as np

from ..common import dtype as mstype
from ..common.errors import OpIndexError, OpTypeError, OpValueError
from ..common.memory_limit import MemoryLimitError, check_fits
from ..common.tensor import Tensor
from .primitive import AbstractTensor

TENSOR_TYPES = (Tensor, AbstractTensor)


def is_tensor(x) -> bool:
    """True for Tensors and AbstractTensors (what inference rules read). NumPy arrays are not
    tensors: they must be wrapped in `Tensor` first."""
    return isinstance(x, TENSOR_TYPES)


def tensor(op: str, arg: str, x):
    if not isinstance(x, TENSOR_TYPES):
        raise OpTypeError(op, f"'{arg}' to be a Tensor", type(x).__name__)
    return x


def tensor_or_scalar(op: str, arg: str, x):
    if is_tensor(x) or (isinstance(x, numbers.Number) and not isinstance(x, complex)):
        return x
    raise OpTypeError(op, f"'{arg}' to be a Tensor or a real number", type(x).__name__)


def floating(op: str, arg: str, x):
    tensor(op, arg, x)
    if not x.dtype.is_floating:
        raise OpTypeError(op, f"'{arg}' to have a floating dtype (Float16, BFloat16, Float32, Float64)",
                          str(x.dtype))
    return x


def dtype_in(op: str, arg: str, x, allowed):
    if x.dtype not in allowed:
        raise OpTypeError(op, f"'{arg}' dtype in {[str(d) for d in allowed]}", str(x.dtype))
    return x


def integer(op: str, arg: str, x):
    tensor(op, arg, x)
    if x.dtype.kind not in ("int", "uint"):
        raise OpTypeError(op, f"'{arg}' to have an integer dtype", str(x.dtype))
    return x


def plain_ints(v):
    """Integer-like attribute values in the plain Python form inference rules and kernels read.

    MindSpore accepts NumPy integer scalars (`np.int64(0)`, what indexing a NumPy array gives)
    wherever it accepts an int, and minispore also takes a 1-d integer ndarray wherever a tuple of
    ints goes (axes, shapes, sizes). Kernels compare attributes with `==` and test them for
    truth, which NumPy values answer elementwise, so functional wrappers pass their int/tuple
    arguments through here before they become attributes: np.integer -> int, a list or 1-d integer
    ndarray -> a tuple (its NumPy-integer items -> int), np.bool_ -> bool (still a bool, so int
    checks keep rejecting it). Anything else (bools, floats, float arrays, strings) comes back
    unchanged for the validation helpers below to reject by name.
    """
    t = type(v)
    if t is int or v is None:                       # the common case costs one type check
        return v
    if t is tuple or t is list:
        if all(type(a) is int for a in v):
            return v if t is tuple else tuple(v)
        return tuple(int(a) if isinstance(a, np.integer) else bool(a) if isinstance(a, np.bool_) else a
                     for a in v)
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.bool_):
        return bool(v)
    if isinstance(v, np.ndarray) and v.dtype.kind in "iu" and v.ndim <= 1:
        return v.tolist() if v.ndim == 0 else tuple(v.tolist())
    return v


def int_attr(op: str, arg: str, v, minimum=None):
    v = plain_ints(v)
    if not isinstance(v, numbers.Integral) or isinstance(v, bool):
        raise OpTypeError(op, f"'{arg}' to be an int", f"{type(v).__name__} {v!r}")
    if minimum is not None and v < minimum:
        raise OpValueError(op, f"'{arg}' >= {minimum}", repr(v))
    return int(v)


def bool_attr(op: str, arg: str, v) -> bool:
    """A flag (keep_dims, descending ...): a bool or np.bool_, returned as a Python bool. Ints are
    refused as in MindSpore (`keep_dims=1` is a TypeError there)."""
    if v is True or v is False:
        return v
    if isinstance(v, np.bool_):
        return bool(v)
    raise OpTypeError(op, f"'{arg}' to be a bool", f"{type(v).__name__} {v!r}"[:80])


def float_attr(op: str, arg: str, v, lo=None, hi=None):
    """A real number; with bounds it must lie in [lo, hi], which NaN never does (NaN compares
    False with everything, so the plain range test alone would let it through)."""
    if not isinstance(v, numbers.Real) or isinstance(v, (bool, np.bool_)):
        raise OpTypeError(op, f"'{arg}' to be a float", f"{type(v).__name__} {v!r}")
    if (lo is not None or hi is not None) and v != v:
        raise OpValueError(op, f"'{arg}' in [{lo}, {hi}] (a number, not NaN)", repr(v))
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        raise OpValueError(op, f"'{arg}' in [{lo}, {hi}]", repr(v))
    return float(v)


def one_of(op: str, arg: str, v, allowed, expected=None):
    """`v` must be one of `allowed` (strings, numbers, None). The type is checked first: an ndarray
    would answer `in` elementwise (and raise NumPy's "truth value ... is ambiguous")."""
    if not (v is None or isinstance(v, (str, numbers.Number))) or v not in allowed:
        raise OpValueError(op, expected or f"'{arg}' in {tuple(allowed)}", repr(v)[:80])
    return v


def int_scalar_fits(op: str, dtype, value):
    """A Python int operand of an integer-dtype op must be representable in that dtype: scalars
    are weak (`uint8_tensor + 300` stays UInt8), and NumPy refuses to convert an int that does not
    fit (OverflowError), so say it here, in terms of the op. Other values pass unchanged."""
    if type(value) is int and dtype.kind in ("int", "uint", "bool"):
        info = np.iinfo(np.int64 if dtype.kind == "bool" else dtype.np)
        if not info.min <= value <= info.max:
            raise OpValueError(op, f"a Python int within the range of {dtype if dtype.kind != 'bool' else 'Int64'} "
                               f"[{info.min}, {info.max}] (a scalar takes the tensor's dtype)", repr(value))
    return value


def number_fits(op: str, arg: str, dtype, value):
    """A Python number that becomes an element of an integer tensor (a value written by setitem, a
    pad value, an initial value) must have a value there: finite, and within the dtype's range.
    NumPy refuses otherwise; MindSpore would wrap around, which hides bugs, so minispore refuses
    as `Tensor(300, ms.uint8)` does. Tensors, bools and non-integer dtypes pass."""
    if dtype.kind not in ("int", "uint") or isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        return value
    if not isinstance(value, numbers.Integral) and not math.isfinite(value):
        raise OpValueError(op, f"a finite '{arg}' for a {dtype} tensor", repr(value))
    info = np.iinfo(dtype.np)
    if not info.min <= value <= info.max:
        raise OpValueError(op, f"'{arg}' within the range of {dtype} [{info.min}, {info.max}]", repr(value))
    return value


# Below this many bytes an output is not worth a look at the memory limit (reading it costs a file read).
_SMALL_OUTPUT_BYTES = 1 << 26


def output_fits(op: str, shape, dtype) -> None:
    """Called by a kernel before it allocates an output whose size comes from its arguments
    (zeros(shape), tile(reps), pad(widths) ...): refuse a size beyond the memory limit with a
    minispore MemoryLimitError before NumPy tries (and fails with a raw MemoryError or
    "array is too big"). Inference cannot do this: DryRun infers models larger than the host."""
    n = math.prod(shape)
    itemsize = np.dtype(getattr(dtype, "np", dtype)).itemsize
    if n == 0 and math.prod(s for s in shape if s) * itemsize >= _ADDRESSABLE_BYTES:
        # an empty array still has to be described: NumPy refuses dims whose product overflows
        raise OpValueError(op, "an output whose non-zero dims multiply to fewer than 2**62 bytes",
                           f"shape {tuple(shape)}")
    if n * itemsize > _SMALL_OUTPUT_BYTES:
        what = f"For '{op}', an output of shape {tuple(shape)}"
        if n * itemsize >= _ADDRESSABLE_BYTES:       # (whatever the limit says, even with it off)
            raise MemoryLimitError(what, n * itemsize, _ADDRESSABLE_BYTES, "bytes any array can address")
        check_fits(n * itemsize, what)


# NumPy sizes arrays in signed 64-bit bytes; beyond this a size overflows (np.bincount of a value
# near 2**63 even corrupts the heap), so it is refused even when the memory limit is switched off.
_ADDRESSABLE_BYTES = 1 << 62


def axis(op: str, ax, ndim: int) -> int:
    """Normalize one axis into [0, ndim). NumPy integers count as ints; bools do not."""
    ax = plain_ints(ax)
    if not isinstance(ax, numbers.Integral) or isinstance(ax, bool):
        raise OpTypeError(op, "'axis' to be an int", f"{type(ax).__name__} {ax!r}")
    n = max(ndim, 1)
    if not -n <= ax < n:
        raise OpIndexError(op, f"'axis' in [{-n}, {n})", f"{ax} for a {ndim}-d input")
    return int(ax) % n


def axes(op: str, ax, ndim: int) -> tuple:
    """Normalize None / int / sequence of ints (or a 1-d integer ndarray) into a sorted tuple of
    axes (None = all)."""
    ax = plain_ints(ax)
    if ax is None or (isinstance(ax, (tuple, list)) and len(ax) == 0):
        return tuple(range(ndim))
    if isinstance(ax, (tuple, list)):
        out = tuple(axis(op, a, ndim) for a in ax)
        if len(set(out)) != len(out):
            raise OpValueError(op, "distinct axes", repr(tuple(ax)))
        return tuple(sorted(out))
    return (axis(op, ax, ndim),)


def shape_arg(op: str, shape) -> tuple:
    """A shape as a tuple of Python ints: an int, a tuple/list of ints or a 1-d integer ndarray
    (NumPy integer items allowed); bools and floats are rejected."""
    shape = plain_ints(shape)
    if isinstance(shape, numbers.Integral) and not isinstance(shape, bool):
        return (int(shape),)
    if not isinstance(shape, (tuple, list)) or not all(
            isinstance(s, numbers.Integral) and not isinstance(s, bool) for s in shape):
        raise OpTypeError(op, "a shape as a tuple of ints", repr(shape))
    return tuple(int(s) for s in shape)


def broadcast(op: str, *shapes) -> tuple:
    """NumPy broadcasting of shapes, with a minispore error on mismatch."""
    if len(shapes) == 2 and shapes[0] == shapes[1]:
        return shapes[0]
    ndim = max(len(s) for s in shapes)
    out = []
    for i in range(-ndim, 0):
        dim = 1
        for s in shapes:
            d = s[i] if -i <= len(s) else 1
            if d != 1:
                if dim != 1 and d != dim:
                    raise OpValueError(op, "input shapes that broadcast together",
                                       " and ".join(str(tuple(s)) for s in shapes))
                dim = d
        out.append(dim)
    return tuple(out)


def result_dtype(op: str, *xs) -> mstype.DType:
    """Promote the dtypes of tensor inputs; Python scalars are weak (see dtype.promote_scalar)."""
    d = None
    for x in xs:
        if is_tensor(x):
            d = x.dtype if d is None else mstype.promote(d, x.dtype)
    if d is None:
        d = mstype.float32
    for x in xs:
        if not is_tensor(x):
            d = mstype.promote_scalar(d, x)
    return d


def out(shape, dtype) -> AbstractTensor:
    return AbstractTensor(shape, dtype)
