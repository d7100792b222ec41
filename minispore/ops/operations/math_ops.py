"""Class-style math operators (MindSpore's `mindspore.ops.operations.math_ops`): elementwise
arithmetic, comparisons, reductions, matrix products.

Each class forwards to the registry primitive (or the functional op) that already defines the
operation; the constructor validates and binds attributes once, so a call costs one more Python
call than the functional form at most (`bench/bench_op_overhead.py` measures it).
"""
from __future__ import annotations

from ...common.errors import OpTypeError, OpValueError
from ...common.tensor import Tensor
from .. import _check as C
from .. import functional as F
from ..primitive import PRIMITIVES
from .base import Primitive, check_bool, prim_attr_register


def _no_attr_class(name, prim, arity, doc, module=__name__):
    """A class for an operator without attributes: `Name()(x)` / `Name()(x, y)` is `prim(x[, y])`.
    `prim` is bound in the closure, so a call is one Python frame plus the primitive's own."""
    if arity == 1:
        def __call__(self, input):
            return prim(input)
    else:
        def __call__(self, input, other):
            return prim(input, other)

    @prim_attr_register
    def __init__(self):
        pass

    cls = type(name, (Primitive,), {"__init__": __init__, "__call__": __call__, "__doc__": doc,
                                    "__module__": module})
    cls.__qualname__ = name
    return cls


P = PRIMITIVES

# -- binary arithmetic / comparison / logic: Name()(input, other), broadcasting, weak Python scalars
Add = _no_attr_class("Add", P["add"], 2, "`Add()(x, y)`: x + y (`ops.add`).")
Sub = _no_attr_class("Sub", P["sub"], 2, "`Sub()(x, y)`: x - y (`ops.sub`).")
Mul = _no_attr_class("Mul", P["mul"], 2, "`Mul()(x, y)`: x * y (`ops.mul`).")
Div = _no_attr_class("Div", P["div"], 2, "`Div()(x, y)`: true division; integer inputs give Float32 (`ops.div`).")
RealDiv = _no_attr_class("RealDiv", P["div"], 2,
                         "`RealDiv()(x, y)`: x / y for floating inputs (the same primitive as `Div`).")
Pow = _no_attr_class("Pow", P["pow"], 2, "`Pow()(x, y)`: x ** y (`ops.pow`).")
Maximum = _no_attr_class("Maximum", P["maximum"], 2, "`Maximum()(x, y)`: elementwise max (`ops.maximum`).")
Minimum = _no_attr_class("Minimum", P["minimum"], 2, "`Minimum()(x, y)`: elementwise min (`ops.minimum`).")
FloorDiv = _no_attr_class("FloorDiv", P["floor_div"], 2, "`FloorDiv()(x, y)`: floor(x / y) (`ops.floor_divide`).")
FloorMod = _no_attr_class("FloorMod", P["mod"], 2, "`FloorMod()(x, y)`: x - floor(x / y) * y (`ops.remainder`).")
Equal = _no_attr_class("Equal", P["equal"], 2, "`Equal()(x, y)`: Bool x == y.")
NotEqual = _no_attr_class("NotEqual", P["not_equal"], 2, "`NotEqual()(x, y)`: Bool x != y.")
Greater = _no_attr_class("Greater", P["greater"], 2, "`Greater()(x, y)`: Bool x > y.")
GreaterEqual = _no_attr_class("GreaterEqual", P["greater_equal"], 2, "`GreaterEqual()(x, y)`: Bool x >= y.")
Less = _no_attr_class("Less", P["less"], 2, "`Less()(x, y)`: Bool x < y.")
LessEqual = _no_attr_class("LessEqual", P["less_equal"], 2, "`LessEqual()(x, y)`: Bool x <= y.")
LogicalAnd = _no_attr_class("LogicalAnd", P["logical_and"], 2, "`LogicalAnd()(x, y)`: Bool x and y.")
LogicalOr = _no_attr_class("LogicalOr", P["logical_or"], 2, "`LogicalOr()(x, y)`: Bool x or y.")
LogicalXor = _no_attr_class("LogicalXor", P["logical_xor"], 2, "`LogicalXor()(x, y)`: Bool x xor y.")

# -- unary: Name()(input)
Neg = _no_attr_class("Neg", P["neg"], 1, "`Neg()(x)`: -x.")
Abs = _no_attr_class("Abs", P["abs"], 1, "`Abs()(x)`: |x|.")
Sign = _no_attr_class("Sign", P["sign"], 1, "`Sign()(x)`: -1, 0 or 1.")
Exp = _no_attr_class("Exp", P["exp"], 1, "`Exp()(x)`: e ** x.")
Log = _no_attr_class("Log", P["log"], 1, "`Log()(x)`: natural logarithm.")
Sqrt = _no_attr_class("Sqrt", P["sqrt"], 1, "`Sqrt()(x)`: square root (integer inputs give Float32).")
Rsqrt = _no_attr_class("Rsqrt", P["rsqrt"], 1, "`Rsqrt()(x)`: 1 / sqrt(x).")
Square = _no_attr_class("Square", P["square"], 1, "`Square()(x)`: x * x (keeps integer dtypes).")
Reciprocal = _no_attr_class("Reciprocal", P["reciprocal"], 1, "`Reciprocal()(x)`: 1 / x.")
Sin = _no_attr_class("Sin", P["sin"], 1, "`Sin()(x)`.")
Cos = _no_attr_class("Cos", P["cos"], 1, "`Cos()(x)`.")
Erf = _no_attr_class("Erf", P["erf"], 1, "`Erf()(x)`: the Gauss error function.")
Floor = _no_attr_class("Floor", P["floor"], 1, "`Floor()(x)`.")
Ceil = _no_attr_class("Ceil", P["ceil"], 1, "`Ceil()(x)`.")
Round = _no_attr_class("Round", P["round"], 1, "`Round()(x)`: to the nearest integer, halves to even.")
LogicalNot = _no_attr_class("LogicalNot", P["logical_not"], 1, "`LogicalNot()(x)`: Bool not x.")
IsNan = _no_attr_class("IsNan", P["isnan"], 1, "`IsNan()(x)`: Bool.")
IsInf = _no_attr_class("IsInf", P["isinf"], 1, "`IsInf()(x)`: Bool.")
IsFinite = _no_attr_class("IsFinite", P["isfinite"], 1, "`IsFinite()(x)`: Bool.")

# MindSpore class names -> the functional op they call
UNARY_FROM_OPS = {"Log1p": "log1p", "Expm1": "expm1", "Tan": "tan", "Sinh": "sinh", "Cosh": "cosh",
                  "Asin": "asin", "Acos": "acos", "Atan": "atan", "Asinh": "asinh", "Acosh": "acosh",
                  "Atanh": "atanh", "Erfc": "erfc", "Trunc": "trunc"}
# (MindSpore's Mod truncates toward zero: C's fmod)
BINARY_FROM_OPS = {"Atan2": "atan2", "Xlogy": "xlogy", "Mod": "fmod"}
for _cls, _fn in UNARY_FROM_OPS.items():
    globals()[_cls] = _no_attr_class(_cls, getattr(F, _fn), 1, f"`{_cls}()(x)`: `ops.{_fn}(x)`.")
for _cls, _fn in BINARY_FROM_OPS.items():
    globals()[_cls] = _no_attr_class(_cls, getattr(F, _fn), 2, f"`{_cls}()(x, y)`: `ops.{_fn}(x, y)`.")


class SquaredDifference(Primitive):
    """`SquaredDifference()(x, y)`: (x - y) ** 2."""

    @prim_attr_register
    def __init__(self):
        pass

    def __call__(self, x, y):
        d = _sub(x, y)
        return _mul(d, d)


class AddN(Primitive):
    """`AddN()((x1, x2, ...))`: the sum of a tuple/list of same-shape tensors."""

    @prim_attr_register
    def __init__(self):
        pass

    def __call__(self, inputs):
        if not isinstance(inputs, (tuple, list)) or not inputs:
            raise OpTypeError("AddN", "a non-empty tuple or list of Tensors", type(inputs).__name__)
        out = inputs[0]
        if not isinstance(out, Tensor):
            raise OpTypeError("AddN", "a tuple or list of Tensors", f"{type(out).__name__} {out!r}"[:60] + " at 0")
        for t in inputs[1:]:
            if not isinstance(t, Tensor) or t.shape != inputs[0].shape:
                raise OpValueError("AddN", f"tensors of one shape {tuple(inputs[0].shape)}",
                                   f"{type(t).__name__} of shape {getattr(t, 'shape', None)}")
            out = _add(out, t)
        return out


_add, _sub, _mul = P["add"], P["sub"], P["mul"]
_matmul, _cast = P["matmul"], P["cast"]


# ------------------------------------------------------------------------------------------------
# matrix products
class MatMul(Primitive):
    """`MatMul(transpose_a=False, transpose_b=False)(a, b)`: the product of two 2-D matrices,
    either transposed first (`MatMul(transpose_b=True)` is the usual `x @ W.T` of a dense layer)."""

    @prim_attr_register
    def __init__(self, transpose_a=False, transpose_b=False):
        check_bool(self.name, "transpose_a", transpose_a)
        check_bool(self.name, "transpose_b", transpose_b)
        self._ta, self._tb = transpose_a, transpose_b

    def __call__(self, input, mat2):
        if type(input) is Tensor and type(mat2) is Tensor:
            if input._data.ndim != 2 or mat2._data.ndim != 2:
                _two_d(self.name, input, mat2)
        elif isinstance(input, Tensor) and isinstance(mat2, Tensor):
            _two_d(self.name, input, mat2)
        if self._ta:
            input = _transpose(input, perm=(1, 0))
        if self._tb:
            mat2 = _transpose(mat2, perm=(1, 0))
        return _matmul(input, mat2)


def _two_d(op, a, b):
    if len(a.shape) != 2 or len(b.shape) != 2:
        raise OpValueError(op, "two 2-D inputs (use BatchMatMul for batches)",
                           f"shapes {tuple(a.shape)} and {tuple(b.shape)}")


_transpose = P["transpose"]


def _swap_last(t):
    n = len(t.shape)
    if n < 2:
        return t
    perm = tuple(range(n - 2)) + (n - 1, n - 2)
    return _transpose(t, perm=perm)


class BatchMatMul(Primitive):
    """`BatchMatMul(transpose_a=False, transpose_b=False)(x, y)`: matrix products over the leading
    (batch) dims, which broadcast; each operand's last two dims are swapped first if asked."""

    @prim_attr_register
    def __init__(self, transpose_a=False, transpose_b=False):
        check_bool(self.name, "transpose_a", transpose_a)
        check_bool(self.name, "transpose_b", transpose_b)
        self._ta, self._tb = transpose_a, transpose_b

    def __call__(self, x, y):
        for arg, t in (("x", x), ("y", y)):
            if not isinstance(t, Tensor):
                raise OpTypeError(self.name, f"'{arg}' to be a Tensor", type(t).__name__)
            if len(t.shape) < 2:
                raise OpValueError(self.name, f"'{arg}' with at least 2 dims", f"shape {tuple(t.shape)}")
        if self._ta:
            x = _swap_last(x)
        if self._tb:
            y = _swap_last(y)
        return _matmul(x, y)


# ------------------------------------------------------------------------------------------------
# reductions: Name(keep_dims=False)(x, axis=()), axis () meaning every axis
def _axis_arg(op, axis, allow_none=False):
    if axis is None and allow_none:
        return ()
    if isinstance(axis, list):
        axis = tuple(axis)
    if isinstance(axis, Tensor):
        if axis.dtype.kind not in ("int", "uint"):
            raise OpTypeError(op, "'axis' as an int, a tuple of ints or an integer Tensor", f"a {axis.dtype} Tensor")
        axis = tuple(axis.asnumpy().reshape(-1).tolist()) if len(axis.shape) else int(axis.asnumpy())
    axis = C.plain_ints(axis)                       # np.int64(0), np.array([0, 1]) -> 0, (0, 1)
    if isinstance(axis, bool) or not isinstance(axis, (int, tuple)):
        raise OpTypeError(op, "'axis' to be an int, a tuple or a list of ints", f"{type(axis).__name__} {axis!r}")
    return axis


class _Reduce(Primitive):
    """The shared shape of ReduceSum/Mean/Max/Min/Prod/All/Any. MindSpore keeps the input's dtype
    (ReduceSum of Int32 is Int32, ReduceMean of Int32 truncates); the registry ops widen integer
    sums to Int64 and means to Float32, so an integer result is cast back."""

    _prim = None
    _allow_none = False

    @prim_attr_register
    def __init__(self, keep_dims=False):
        check_bool(self.name, "keep_dims", keep_dims)
        self._kd = keep_dims

    def __call__(self, x, axis=()):
        ta = type(axis)
        if (ta is not tuple and ta is not int) or type(x) is not Tensor:
            return self._general_call(x, axis)
        out = self._prim(x, axis=axis, keep_dims=self._kd)
        if out._data.dtype is not x._data.dtype:          # (NumPy's dtypes are singletons)
            out = _cast(out, dtype=x.dtype)
        return out

    def _general_call(self, x, axis):
        """Lists, Tensors and None as axis; tracers and other non-plain tensors."""
        axis = _axis_arg(self.name, axis, self._allow_none)
        out = self._prim(x, axis=axis, keep_dims=self._kd)
        if isinstance(x, Tensor) and out.dtype is not x.dtype:
            out = _cast(out, dtype=x.dtype)
        return out


class ReduceSum(_Reduce):
    """`ReduceSum(keep_dims=False, skip_mode=False)(x, axis=())`: sum over `axis` (() = all axes;
    with skip_mode=True an empty axis returns x unchanged)."""

    _prim = P["reduce_sum"]

    @prim_attr_register
    def __init__(self, keep_dims=False, skip_mode=False):
        check_bool(self.name, "keep_dims", keep_dims)
        check_bool(self.name, "skip_mode", skip_mode)
        self._kd = keep_dims
        self._skip = skip_mode

    def __call__(self, x, axis=()):
        ta = type(axis)
        if ta is int and type(x) is Tensor:               # the common call, inlined (bench_op_overhead)
            out = _reduce_sum(x, axis=axis, keep_dims=self._kd)
            return out if out._data.dtype is x._data.dtype else _cast(out, dtype=x.dtype)
        if self._skip:
            spelled = C.plain_ints(axis)                  # (an empty axis, however spelled: (), [], an empty array)
            if type(spelled) is tuple and not spelled:
                return x
        return _Reduce.__call__(self, x, axis)


class ReduceMean(_Reduce):
    """`ReduceMean(keep_dims=False)(x, axis=())`: mean over `axis`."""
    _prim = P["reduce_mean"]


class ReduceMax(_Reduce):
    """`ReduceMax(keep_dims=False)(x, axis=())`: max over `axis` (tied maxima share the gradient)."""
    _prim = P["reduce_max"]


class ReduceMin(_Reduce):
    """`ReduceMin(keep_dims=False)(x, axis=())`: min over `axis`."""
    _prim = P["reduce_min"]


class ReduceProd(_Reduce):
    """`ReduceProd(keep_dims=False)(x, axis=())`: product over `axis`."""
    _prim = P["reduce_prod"]


class ReduceAll(_Reduce):
    """`ReduceAll(keep_dims=False)(x, axis=None)`: Bool, True where every element is."""
    _prim = P["reduce_all"]
    _allow_none = True

    def __call__(self, input, axis=None):
        return _Reduce.__call__(self, input, axis)


class ReduceAny(_Reduce):
    """`ReduceAny(keep_dims=False)(x, axis=())`: Bool, True where some element is."""
    _prim = P["reduce_any"]


class CumSum(Primitive):
    """`CumSum(exclusive=False, reverse=False)(input, axis)`: running sums along `axis`."""

    @prim_attr_register
    def __init__(self, exclusive=False, reverse=False):
        check_bool(self.name, "exclusive", exclusive)
        check_bool(self.name, "reverse", reverse)

    def __call__(self, input, axis):
        if isinstance(axis, bool) or not isinstance(axis, int):
            raise OpTypeError(self.name, "'axis' to be an int", f"{type(axis).__name__} {axis!r}")
        return _cumsum(input, axis=axis, exclusive=self.exclusive, reverse=self.reverse)


class CumProd(CumSum):
    """`CumProd(exclusive=False, reverse=False)(x, axis)`: running products along `axis`."""

    def __call__(self, x, axis):
        if isinstance(axis, bool) or not isinstance(axis, int):
            raise OpTypeError(self.name, "'axis' to be an int", f"{type(axis).__name__} {axis!r}")
        return _cumprod(x, axis=axis, exclusive=self.exclusive, reverse=self.reverse)


_cumsum, _cumprod = P["cumsum"], P["cumprod"]
_reduce_sum = P["reduce_sum"]


__all__ = ["Add", "Sub", "Mul", "Div", "RealDiv", "Pow", "Maximum", "Minimum", "FloorDiv", "FloorMod",
           "Equal", "NotEqual", "Greater", "GreaterEqual", "Less", "LessEqual", "LogicalAnd", "LogicalOr",
           "LogicalXor", "Neg", "Abs", "Sign", "Exp", "Log", "Sqrt", "Rsqrt", "Square", "Reciprocal", "Sin", "Cos",
           "Erf", "Floor", "Ceil", "Round", "LogicalNot", "IsNan", "IsInf", "IsFinite", "SquaredDifference", "AddN",
           "MatMul", "BatchMatMul", "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceAll",
           "ReduceAny", "CumSum", "CumProd"] + list(UNARY_FROM_OPS) + list(BINARY_FROM_OPS)
