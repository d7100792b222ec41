"""`mint.add`, `mint.sum`, `mint.cat`, ...: MindSpore 2.3+'s PyTorch-style functional API.

The same primitives as `ops`, with PyTorch's names and conventions: `dim`/`keepdim` instead of
`axis`/`keep_dims`, `mint.transpose(input, dim0, dim1)` swaps two dims (ops.transpose permutes),
`mint.gather(input, dim, index)` is the elementwise gather (ops.gather takes slices),
`mint.max(input, dim)` returns `(values, indices)` with Int64 indices, sizes may be varargs
(`mint.zeros(2, 3)`), and `add`/`sub` take `alpha`. Every function reaches the registry through
`ops` functional ops; nothing here defines an op.
"""
from __future__ import annotations

import builtins
import numbers

from ..common import dtype as mstype
from ..common.errors import OpTypeError, OpValueError
from ..common.tensor import Tensor
from ..ops import _check as _C
from ..ops import functional as F

_INT64 = mstype.int64


def _is_int(v):
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _size(op, size):
    """`(2, 3)`, `[2, 3]`, `2` or varargs `2, 3` -> a tuple of ints."""
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    if not builtins.all(_is_int(s) for s in size):
        raise OpTypeError(op, "'size' as ints or one tuple/list of ints", repr(size))
    return tuple(int(s) for s in size)


def _dim_attr(dim):
    """None / int / list / tuple (NumPy integers, a 1-d integer ndarray) -> the reduction attribute
    (() = every dim)."""
    if dim is None:
        return ()
    return _C.plain_ints(dim)


def _dim_or_none(dim):
    """As `_dim_attr`, with None for every dim (what amax/amin take)."""
    d = _dim_attr(dim)
    return None if type(d) is tuple and not d else d


def _then_cast(out, dtype):
    return F.cast(out, dtype) if dtype is not None else out


# ------------------------------------------------------------------------------------------------
# arithmetic
def _scaled(op, other, alpha):
    """alpha * other, for add/sub's `alpha` (a real number; 1 leaves `other` as it is)."""
    if not isinstance(alpha, numbers.Real):
        raise OpTypeError(op, "'alpha' to be a real number", f"{type(alpha).__name__} {alpha!r}"[:80])
    if alpha == 1:
        return other
    if isinstance(other, Tensor):
        return F.mul(other, alpha)
    if not isinstance(other, numbers.Real):
        raise OpTypeError(op, "'other' to be a Tensor or a real number", f"{type(other).__name__} {other!r}"[:80])
    return other * alpha


def add(input, other, *, alpha=1):
    """`mint.add(input, other, *, alpha=1)`: input + alpha * other."""
    return F.add(input, _scaled("add", other, alpha))


def sub(input, other, *, alpha=1):
    """`mint.sub(input, other, *, alpha=1)`: input - alpha * other."""
    return F.sub(input, _scaled("sub", other, alpha))


def mul(input, other):
    return F.mul(input, other)


def div(input, other, *, rounding_mode=None):
    """`mint.div(input, other, *, rounding_mode=None)`: true division, or rounded 'floor' / 'trunc'."""
    if rounding_mode is not None and not isinstance(rounding_mode, str):
        raise OpTypeError("div", "rounding_mode None, 'floor' or 'trunc'", f"{type(rounding_mode).__name__}")
    if rounding_mode is None:
        return F.div(input, other)
    if rounding_mode == "floor":
        return F.floor(F.div(input, other)) if _floating(input, other) else F.floor_divide(input, other)
    if rounding_mode == "trunc":
        q = F.div(input, other)
        t = F.where(F.less(q, 0), F.ceil(q), F.floor(q))
        return t if _floating(input, other) else F.cast(t, input.dtype if isinstance(input, Tensor) else other.dtype)
    raise OpValueError("div", "rounding_mode None, 'floor' or 'trunc'", repr(rounding_mode))


def _floating(*xs):
    return builtins.any(isinstance(x, Tensor) and x.dtype.is_floating for x in xs) or \
        builtins.any(isinstance(x, float) for x in xs)


divide = div
true_divide = F.div
multiply, subtract = mul, sub


def pow(input, exponent):
    """`mint.pow(input, exponent)`; a Python number as the base is allowed (2 ** t)."""
    if not isinstance(input, Tensor) and isinstance(exponent, Tensor):
        base = F.full_like(exponent, input, dtype=exponent.dtype if exponent.dtype.is_floating else mstype.float32)
        return F.pow(base, exponent)
    return F.pow(input, exponent)


def clamp(input, min=None, max=None):
    return F.clamp(input, min, max)


clip = clamp


def where(condition, input, other):
    return F.where(condition, input, other)


for _name in ("abs", "neg", "negative", "exp", "log", "sqrt", "rsqrt", "square", "reciprocal", "sin", "cos", "tanh",
              "sigmoid", "erf", "floor", "ceil", "round", "sign", "maximum", "minimum", "eq", "ne", "gt", "ge", "lt",
              "le", "equal", "not_equal", "greater", "greater_equal", "less", "less_equal", "logical_and",
              "logical_or", "logical_not", "logical_xor", "isfinite", "isnan", "isinf", "remainder", "floor_divide",
              "matmul", "bmm", "tile", "broadcast_to", "flip", "masked_fill", "stop_gradient"):
    globals()[_name] = getattr(F, _name)
absolute = abs          # noqa: F821 (defined by the loop above)

# more ops whose mint signature is the functional op's
SAME_AS_OPS = ("log1p", "expm1", "tan", "atan", "atan2", "arctan2", "asin", "acos", "sinh", "cosh", "asinh",
               "acosh", "atanh", "erfc", "erfinv", "exp2", "log2", "log10", "trunc", "frac", "mm", "outer", "dot",
               "addmm", "baddbmm", "masked_select", "meshgrid", "diag", "trace", "logaddexp", "xlogy",
               "nan_to_num", "roll", "isclose", "bincount", "einsum", "inverse", "nonzero")
for _name in SAME_AS_OPS:
    globals()[_name] = getattr(F, _name)


# ------------------------------------------------------------------------------------------------
# reductions (dim / keepdim / dtype)
def sum(input, dim=None, keepdim=False, *, dtype=None):
    """`mint.sum(input, dim=None, keepdim=False, *, dtype=None)`; integer sums are Int64."""
    return F.sum(input, dim, keepdim, dtype=dtype)


def mean(input, dim=None, keepdim=False, *, dtype=None):
    if dtype is not None:
        input = F.cast(input, dtype)
    return F.mean(input, dim, keepdim)


def prod(input, dim=None, keepdim=False, *, dtype=None):
    return _then_cast(F.prod(input, dim, keepdim), dtype)


def _reduce_extreme(op, fn, input, dim, keepdim, other):
    if isinstance(dim, Tensor) and other is None:       # mint.max(input, other)
        return (F.maximum if op == "max" else F.minimum)(input, dim)
    if other is not None:
        return (F.maximum if op == "max" else F.minimum)(input, other)
    if dim is None:
        return (F.amax if op == "max" else F.amin)(input)
    if not _is_int(dim):
        raise OpTypeError(op, "'dim' to be an int", f"{type(dim).__name__} {dim!r}")
    values, indices = fn(input, dim, keepdim)
    return values, F.cast(indices, _INT64)


def max(input, dim=None, keepdim=False, *, other=None):
    """`mint.max(input)` (0-d), `mint.max(input, dim, keepdim=False)` -> (values, Int64 indices),
    `mint.max(input, other)` (elementwise)."""
    return _reduce_extreme("max", F.max, input, dim, keepdim, other)


def min(input, dim=None, keepdim=False, *, other=None):
    """The mirror of `mint.max`."""
    return _reduce_extreme("min", F.min, input, dim, keepdim, other)


def amax(input, dim=(), keepdim=False):
    return F.amax(input, _dim_or_none(dim), keepdim)


def amin(input, dim=(), keepdim=False):
    return F.amin(input, _dim_or_none(dim), keepdim)


def argmax(input, dim=None, keepdim=False):
    """Int64 index of the first maximum (dim=None: into the flattened input)."""
    return F.argmax(input, dim, keepdim)


def argmin(input, dim=None, keepdim=False):
    return F.argmin(input, dim, keepdim)


def all(input, dim=None, keepdim=False):
    return F.all(input, dim, keepdim)


def any(input, dim=None, keepdim=False):
    return F.any(input, dim, keepdim)


def var(input, dim=None, *, correction=1, keepdim=False):
    """`mint.var(input, dim=None, *, correction=1, keepdim=False)`: Bessel-corrected by default."""
    return F.var(input, dim, correction, keepdim)


def std(input, dim=None, *, correction=1, keepdim=False):
    return F.std(input, dim, correction, keepdim)


def var_mean(input, dim=None, *, correction=1, keepdim=False):
    return F.var_mean(input, dim, correction, keepdim)


def std_mean(input, dim=None, *, correction=1, keepdim=False):
    return F.std_mean(input, dim, correction, keepdim)


def logsumexp(input, dim, keepdim=False):
    return F.logsumexp(input, dim, keepdim)


def cumsum(input, dim, dtype=None):
    return F.cumsum(input, dim, dtype)


def cumprod(input, dim, dtype=None):
    return F.cumprod(input, dim, dtype)


def norm(input, p="fro", dim=None, keepdim=False, *, dtype=None):
    fro = isinstance(p, str) and p == "fro"
    if fro and (dim is None or _is_int(dim)):
        return F.vector_norm(input, 2, dim, keepdim, dtype=dtype)
    return F.norm(input, "fro", dim, keepdim) if fro else F.vector_norm(input, p, dim, keepdim, dtype=dtype)


# ------------------------------------------------------------------------------------------------
# shapes, joins, splits, indexing
def cat(tensors, dim=0):
    return F.concat(tensors, dim)


concat = cat


def stack(tensors, dim=0):
    return F.stack(tensors, dim)


def split(tensor, split_size_or_sections, dim=0):
    return F.split(tensor, split_size_or_sections, dim)


def chunk(input, chunks, dim=0):
    return F.chunk(input, chunks, dim)


def transpose(input, dim0, dim1):
    """`mint.transpose(input, dim0, dim1)`: swap two dims (PyTorch's meaning, not ops.transpose's)."""
    if not isinstance(input, Tensor):
        raise OpTypeError("transpose", "'input' to be a Tensor", type(input).__name__)
    nd = len(input.shape)
    for name, d in (("dim0", dim0), ("dim1", dim1)):
        if not _is_int(d) or not -builtins.max(nd, 1) <= d < builtins.max(nd, 1):
            raise OpValueError("transpose", f"'{name}' an int in [{-nd}, {nd})", repr(d))
    if nd == 0:
        return input
    perm = list(range(nd))
    a, b = dim0 % nd, dim1 % nd
    perm[a], perm[b] = perm[b], perm[a]
    return F.transpose(input, tuple(perm))


swapaxes = transpose


def permute(input, dims):
    return F.permute(input, tuple(dims) if isinstance(dims, list) else dims)


def reshape(input, shape):
    return F.reshape(input, shape)


def flatten(input, start_dim=0, end_dim=-1):
    """`mint.flatten(input, start_dim=0, end_dim=-1)` (all dims by default, unlike ops.flatten)."""
    return F.flatten(input, start_dim=start_dim, end_dim=end_dim)


def squeeze(input, dim=None):
    return F.squeeze(input, dim)


def unsqueeze(input, dim):
    return F.unsqueeze(input, dim)


def narrow(input, dim, start, length):
    """`mint.narrow(input, dim, start, length)`: `length` entries of `dim` from `start`."""
    if not isinstance(input, Tensor):
        raise OpTypeError("narrow", "'input' to be a Tensor", type(input).__name__)
    nd = len(input.shape)
    if not _is_int(dim) or not -nd <= dim < nd:
        raise OpValueError("narrow", f"'dim' an int in [{-nd}, {nd})", repr(dim))
    n = input.shape[dim]
    if not _is_int(start) or not _is_int(length) or not -n <= start <= n or length < 0 or start % n + length > n:
        raise OpValueError("narrow", f"0 <= start, start + length <= {n} on dim {dim}", f"start {start}, length {length}")
    index = [slice(None)] * nd
    s = start % n if n else 0
    index[dim % nd] = slice(s, s + length)
    return F.getitem(input, tuple(index))


def unbind(input, dim=0):
    """`mint.unbind(input, dim=0)`: the tuple of slices along `dim` (the dim removed)."""
    if not isinstance(input, Tensor) or not len(input.shape):
        raise OpValueError("unbind", "a Tensor with at least 1 dim", repr(getattr(input, "shape", input)))
    nd = len(input.shape)
    if not _is_int(dim) or not -nd <= dim < nd:
        raise OpValueError("unbind", f"'dim' an int in [{-nd}, {nd})", repr(dim))
    return tuple(F.squeeze(p, dim % nd) for p in F.split(input, 1, dim))


def gather(input, dim, index):
    """`mint.gather(input, dim, index)`: out[i][j] = input[index[i][j]][j] (dim 0): elementwise."""
    return F.gather_elements(input, dim, index)


def index_select(input, dim, index):
    return F.index_select(input, dim, index)


def scatter(input, dim, index, src):
    return F.scatter(input, dim, index, src)


def tril(input, diagonal=0):
    return F.tril(input, diagonal)


def triu(input, diagonal=0):
    return F.triu(input, diagonal)


def repeat_interleave(input, repeats, dim=None):
    return F.repeat_interleave(input, repeats, dim)


def sort(input, *, dim=-1, descending=False, stable=False):
    """(values, Int64 indices). The order is always stable (`ops.sort` is), so `stable` changes nothing."""
    values, indices = F.sort(input, dim, descending)
    return values, F.cast(indices, _INT64)


def argsort(input, dim=-1, descending=False, stable=False):
    """Int64 indices; always a stable order (`ops.argsort` is), so `stable` changes nothing."""
    return F.cast(F.argsort(input, dim, descending), _INT64)


def topk(input, k, dim=-1, largest=True, sorted=True):
    """(values, Int64 indices) of the k largest (or smallest) along `dim`."""
    values, indices = F.topk(input, k, dim, largest, sorted)
    return values, F.cast(indices, _INT64)


def softmax(input, dim, *, dtype=None):
    return F.softmax(input, dim, dtype=dtype)


# ------------------------------------------------------------------------------------------------
# creation
def zeros(*size, dtype=None):
    return F.zeros(_size("zeros", size), mstype.float32 if dtype is None else dtype)


def ones(*size, dtype=None):
    return F.ones(_size("ones", size), mstype.float32 if dtype is None else dtype)


def full(size, fill_value, *, dtype=None):
    return F.full(_size("full", (size,)), fill_value, dtype=dtype)


def zeros_like(input, *, dtype=None):
    return F.zeros_like(input, dtype=dtype)


def ones_like(input, *, dtype=None):
    return F.ones_like(input, dtype=dtype)


def full_like(input, fill_value, *, dtype=None):
    return F.full_like(input, fill_value, dtype=dtype)


def arange(start=0, end=None, step=1, *, dtype=None):
    """Int64 for integer arguments, Float32 otherwise (PyTorch's rule)."""
    return F.arange(start, end, step, dtype=dtype)


def linspace(start, end, steps, *, dtype=None):
    return _then_cast(F.linspace(start, end, steps), dtype)


def eye(n, m=None, dtype=None):
    return F.eye(n, m, dtype)


def rand(*size, generator=None, dtype=None):
    """U[0, 1). `generator` is ignored: draws come from the global generator seeded by `ms.set_seed`."""
    return F.rand(*_size("rand", size), dtype=dtype)


def randn(*size, generator=None, dtype=None):
    """N(0, 1). `generator` is ignored: draws come from the global generator seeded by `ms.set_seed`."""
    return F.randn(*_size("randn", size), dtype=dtype)


__all__ = ["add", "sub", "mul", "div", "divide", "true_divide", "multiply", "subtract", "pow", "clamp", "clip",
           "where", "abs", "absolute", "neg", "negative", "exp", "log", "sqrt", "rsqrt", "square", "reciprocal", "sin",
           "cos", "tanh", "sigmoid", "erf", "floor", "ceil", "round", "sign", "maximum", "minimum", "eq", "ne", "gt",
           "ge", "lt", "le", "equal", "not_equal", "greater", "greater_equal", "less", "less_equal", "logical_and",
           "logical_or", "logical_not", "logical_xor", "isfinite", "isnan", "isinf", "remainder", "floor_divide",
           "matmul", "bmm", "tile", "broadcast_to", "flip", "masked_fill", "stop_gradient",
           "sum", "mean", "prod", "max", "min", "amax", "amin", "argmax", "argmin", "all", "any", "var", "std",
           "var_mean", "std_mean", "logsumexp", "cumsum", "cumprod", "norm", "cat", "concat", "stack", "split", "chunk",
           "transpose", "swapaxes", "permute", "reshape", "flatten", "squeeze", "unsqueeze", "narrow", "unbind",
           "gather", "index_select", "scatter", "tril", "triu", "repeat_interleave", "sort", "argsort", "topk",
           "softmax", "zeros", "ones", "full", "zeros_like", "ones_like", "full_like", "arange", "linspace", "eye",
           "rand", "randn"] + list(SAME_AS_OPS)
