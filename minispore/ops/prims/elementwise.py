"""Elementwise arithmetic, math and comparison primitives.

Binary ops broadcast NumPy-style and promote with the one table in `common.dtype`; a Python scalar
operand is 'weak' (it never widens the tensor's dtype). Backward rules reduce the incoming gradient
back to each operand's shape (`sum_to`), since broadcasting copied it.
"""
from __future__ import annotations

import numpy as np
import scipy.special

from ...common import dtype as mstype
from ...common.grad_state import wants_grad
from ...common.tensor import Parameter, Tensor
from .. import _check as C
from .. import c_expr
from .. import costs
from .. import sharding_rules as SR
from ..primitive import PRIMITIVES, AbstractTensor, defprim

_TENSOR = (Tensor, AbstractTensor)
_CONCRETE = frozenset((Tensor, Parameter))      # exact types whose `_data` is a real ndarray


# ------------------------------------------------------------------------------------------------
# inference helpers
def _binary_infer(name, out_dtype=None, float_result=False, numeric_only=False):
    """Broadcast shapes and promote dtypes. An int scalar operand of an op whose result keeps an
    integer dtype must fit that dtype (see C.int_scalar_fits); comparisons and float-result ops
    take any int. `numeric_only`: Bool with Bool has no answer (MindSpore has no Bool Sub kernel)."""
    promote, promote_scalar, by_np, float32 = mstype.promote, mstype.promote_scalar, mstype._BY_NP, mstype.float32
    int_result = out_dtype is None and not float_result
    fits = C.int_scalar_fits

    def infer(x, y):
        tx, ty = type(x), type(y)
        if tx in _CONCRETE and (ty in _CONCRETE or ty is float or ty is int):
            # Hot path of every binary op in PyNative (~1/3 of its per-op cost was here): read the
            # storage arrays directly instead of through the .shape/.dtype properties (~50 ns per
            # read), skip broadcasting/promotion when shapes/dtypes already agree, and accept a
            # plain Python float/int operand without the generic checks (bool is excluded: its
            # type is `bool`). Exact types only, so a Tensor subclass (e.g. a graph-capture
            # tracer) and every other case take the generic path below, with the same result.
            xa = x._data
            xd = by_np[xa.dtype]
            if ty is float or ty is int:
                shape, dt = xa.shape, promote_scalar(xd, y)
                if ty is int and int_result and dt.kind != "float":
                    fits(name, dt, y)
            else:
                ya = y._data
                xs, ys, yd = xa.shape, ya.shape, by_np[ya.dtype]
                shape = xs if xs == ys else C.broadcast(name, xs, ys)
                dt = xd if xd is yd else promote(xd, yd)
            if float_result and dt.kind != "float":
                dt = float32
            if numeric_only and dt.kind == "bool":
                _refuse_bool(name)
            return AbstractTensor(shape, out_dtype or dt)
        xt, yt = isinstance(x, _TENSOR), isinstance(y, _TENSOR)
        if xt and yt:
            xs, ys, xd, yd = x.shape, y.shape, x.dtype, y.dtype
            shape = xs if xs == ys else C.broadcast(name, xs, ys)
            dt = xd if xd is yd else promote(xd, yd)
        elif xt:
            C.tensor_or_scalar(name, "other", y)
            shape, dt = x.shape, promote_scalar(x.dtype, y)
            if int_result:
                fits(name, dt, y)
        elif yt:
            C.tensor_or_scalar(name, "input", x)
            shape, dt = y.shape, promote_scalar(y.dtype, x)
            if int_result:
                fits(name, dt, x)
        else:
            raise C.OpTypeError(name, "at least one Tensor operand",
                                f"{type(x).__name__} and {type(y).__name__}")
        if float_result and dt.kind != "float":
            dt = float32
        if numeric_only and dt.kind == "bool":
            _refuse_bool(name)
        return AbstractTensor(shape, out_dtype or dt)
    return infer


def _refuse_bool(name):
    raise C.OpTypeError(name, "numeric (integer or floating-point) operands; Bool with Bool has no "
                        "difference (use logical_xor, or cast to an integer dtype first)", "Bool and Bool")


def _unary_infer(name, float_only=False, out_dtype=None, int_to_float=False, numeric_only=False):
    by_np = mstype._BY_NP

    def infer(x):
        if type(x) in _CONCRETE:           # PyNative fast path (see _binary_infer)
            a = x._data
            shape, dt = a.shape, by_np[a.dtype]
        elif isinstance(x, _TENSOR):
            shape, dt = x.shape, x.dtype
        else:
            raise C.OpTypeError(name, "'input' to be a Tensor", type(x).__name__)
        if float_only and dt.kind != "float":
            if int_to_float:
                dt = mstype.float32
            else:
                raise C.OpTypeError(name, "a floating-point input", str(dt))
        if numeric_only and dt is mstype.bool_:
            # MindSpore has no Bool kernel for these (and -True has no Bool answer): say so here,
            # rather than letting NumPy's "boolean negative is not supported" surface.
            raise C.OpTypeError(name, "a numeric (integer or floating-point) input; use "
                                "logical_not for Bool tensors", str(dt))
        return AbstractTensor(shape, out_dtype or dt)
    return infer


# ------------------------------------------------------------------------------------------------
# backward helpers (written in minispore ops so they are differentiable themselves)
def sum_to(g, shape):
    """Sum a broadcast gradient back down to `shape`.

    It calls the `reduce_sum` and `reshape` primitives through the registry, by name, instead of
    importing the reduction and shape families: those import this one (reduce_mean's gradient
    divides, broadcast_to's gradient is this function), and the gradient of a broadcast is a sum
    while the gradient of a sum is a broadcast, so importing them here would join the three
    families in one import cycle. Elementwise is the bottom of the three; the two primitives exist
    by the time a gradient is taken (`minispore.ops` defines every family when it is imported)."""
    shape = tuple(shape)
    if g.shape == shape:
        return g
    lead = len(g.shape) - len(shape)
    axes = tuple(range(lead)) + tuple(i + lead for i, s in enumerate(shape) if s == 1 and g.shape[i + lead] != 1)
    r = PRIMITIVES["reduce_sum"](g, axis=axes, keep_dims=True) if axes else g
    return PRIMITIVES["reshape"](r, shape=shape) if r.shape != shape else r


def _shape(x):
    return x.shape if isinstance(x, Tensor) else ()


def _grad_for(x, g):
    """Gradient for an operand: None for Python scalars, else summed to its shape."""
    if type(x) in _CONCRETE and type(g) in _CONCRETE:
        # every binary backward calls this twice: compare the arrays' shapes directly (no
        # property calls) and return g untouched when nothing was broadcast (the common case)
        shape = x._data.shape
        return g if g._data.shape == shape else sum_to(g, shape)
    if not isinstance(x, Tensor):
        return None
    return sum_to(g, x.shape)


def _wanted(inputs, i):
    """Should a backward rule compute input i's gradient? Not for Python scalars, and not for a
    tensor the tape will discard (an untracked constant: a RoPE table, a mask, the data), which
    saves e.g. a full multiply plus a reduction per `x * table` (see grad_state.wants_grad)."""
    return isinstance(inputs[i], Tensor) and wants_grad(inputs, i)


# ------------------------------------------------------------------------------------------------
# binary arithmetic
def _add_bprop(inputs, out, dout):
    x, y = inputs
    return (_grad_for(x, dout) if _wanted(inputs, 0) else None,
            _grad_for(y, dout) if _wanted(inputs, 1) else None)


def _sub_bprop(inputs, out, dout):
    x, y = inputs
    return (_grad_for(x, dout) if _wanted(inputs, 0) else None,
            _grad_for(y, neg(dout)) if _wanted(inputs, 1) else None)


def _mul_bprop(inputs, out, dout):
    x, y = inputs
    return (_grad_for(x, mul(dout, y)) if _wanted(inputs, 0) else None,
            _grad_for(y, mul(dout, x)) if _wanted(inputs, 1) else None)


def _div_bprop(inputs, out, dout):
    x, y = inputs
    gx = _grad_for(x, div(dout, y)) if _wanted(inputs, 0) else None
    gy = _grad_for(y, neg(mul(dout, div(out, y)))) if _wanted(inputs, 1) else None
    return gx, gy


def _div_kernel(a, b):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.true_divide(a, b)


def _is_integral(v):
    return v.dtype.kind in "biu" if isinstance(v, np.ndarray) else isinstance(v, (int, np.integer, np.bool_))


def _pow_kernel(a, b):
    # NumPy refuses integers to negative integer powers; compute those in float (the executor
    # casts back to the inferred integer dtype, as MindSpore's integer Pow truncates)
    if _is_integral(a) and _is_integral(b) and np.any(np.asarray(b) < 0):
        return np.power(np.asarray(a, dtype=np.float32), b)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.power(a, b)


def _pow_bprop(inputs, out, dout):
    x, y = inputs
    gx = gy = None
    if _wanted(inputs, 0):
        ym1 = sub(y, 1) if isinstance(y, Tensor) else y - 1
        gx = _grad_for(x, mul(dout, mul(y, pow(x, ym1))))
    if _wanted(inputs, 1):
        safe_log = log(where(greater(x, 0), x, ones_like(x))) if isinstance(x, Tensor) else float(np.log(x))
        gy = _grad_for(y, mul(dout, mul(out, safe_log)))
    return gx, gy


def _maxmin_bprop(x_wins):
    """maximum/minimum: the gradient goes to the operand that won; at a tie (x == y) each operand
    gets half of it, as MindSpore's MaximumGrad/MinimumGrad do (so maximum(x, y) + minimum(x, y)
    = x + y has gradient exactly 1 for both, ties included)."""
    def bprop(inputs, out, dout):
        x, y = inputs
        zero = zeros_like(dout)
        half = where(equal(x, y), mul(dout, 0.5), zero)
        win = x_wins(x, y)
        return (_grad_for(x, where(win, dout, half)) if _wanted(inputs, 0) else None,
                _grad_for(y, where(x_wins(y, x), dout, half)) if _wanted(inputs, 1) else None)
    return bprop


def _floor_div_kernel(a, b):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.floor_divide(a, b)


def _mod_kernel(a, b):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.mod(a, b)


_add = defprim("add", _binary_infer("add"), np.add, _add_bprop, doc="x + y",
               fusion=c_expr.binary("+"), cost=costs.ELEMENTWISE, sharding=SR.elementwise_sum)
_sub = defprim("sub", _binary_infer("sub", numeric_only=True), np.subtract, _sub_bprop, doc="x - y",
               fusion=c_expr.binary("-"), cost=costs.ELEMENTWISE, sharding=SR.elementwise_sum)
_mul = defprim("mul", _binary_infer("mul"), np.multiply, _mul_bprop, doc="x * y",
               fusion=c_expr.binary("*"), cost=costs.ELEMENTWISE, sharding=SR.elementwise_product)
_div = defprim("div", _binary_infer("div", float_result=True), _div_kernel, _div_bprop, doc="x / y (true division)",
               fusion=c_expr.binary("/"), cost=costs.ELEMENTWISE, sharding=SR.elementwise_quotient)


def _pow_c(a, t, at, raw):
    """Exact special cases for constant exponents (x*x is the correctly rounded square, as powf is
    not guaranteed to be); any other exponent goes through libm's pow, as NumPy's loop does."""
    e = raw[1]
    if e is not None and not isinstance(e, bool):
        if e == 2:
            return f"({a[0]} * {a[0]})"
        if e == 1:
            return f"({a[0]})"
        if e == 0.5:
            return f"{t.fn('sqrt')}({a[0]})"
    return f"{t.fn('pow')}({a[0]}, {a[1]})"


_pow = defprim("pow", _binary_infer("pow"), _pow_kernel, _pow_bprop, doc="x ** y",
               fusion=c_expr.rule(_pow_c), cost=costs.ELEMENTWISE, sharding=SR.elementwise)
_maximum = defprim("maximum", _binary_infer("maximum"), np.maximum,
                   _maxmin_bprop(lambda x, y: greater(x, y)), doc="elementwise max",
                   fusion=c_expr.rule(lambda a, t, at, raw: c_expr.nan_max(a[0], a[1])), cost=costs.ELEMENTWISE, sharding=SR.elementwise)
_minimum = defprim("minimum", _binary_infer("minimum"), np.minimum,
                   _maxmin_bprop(lambda x, y: less(x, y)), doc="elementwise min",
                   fusion=c_expr.rule(lambda a, t, at, raw: c_expr.nan_min(a[0], a[1])), cost=costs.ELEMENTWISE, sharding=SR.elementwise)
_floor_div = defprim("floor_div", _binary_infer("floor_div"), _floor_div_kernel, None, doc="x // y",
                     cost=costs.ELEMENTWISE, sharding=SR.elementwise)
_mod = defprim("mod", _binary_infer("mod"), _mod_kernel, None, doc="x % y (sign of y)", cost=costs.ELEMENTWISE, sharding=SR.elementwise)


def add(input, other):
    """`input + other`, broadcasting."""
    return _add(input, other)


def sub(input, other):
    return _sub(input, other)


def mul(input, other):
    return _mul(input, other)


def _truncate_div_kernel(a, b):
    with np.errstate(divide="ignore", invalid="ignore"):
        if np.result_type(a, b).kind == "f":
            return np.trunc(np.true_divide(a, b))
        # integers, exactly: floor division, moved up by one where it rounded a negative
        # quotient down (a non-zero remainder and operands of opposite signs)
        q = np.floor_divide(a, b)
        q += ((a - q * b) != 0) & ((np.asarray(a) < 0) != (np.asarray(b) < 0))
        return q


_truncate_div = defprim("truncate_div", _binary_infer("truncate_div"), _truncate_div_kernel, None,
                        doc="x / y rounded toward zero (integers stay integers)", sharding=SR.elementwise)

_ROUNDING_MODES = (None, "floor", "trunc")


def div(input, other, *, rounding_mode=None):
    """`ops.div(input, other, *, rounding_mode=None)`.

    None: true division (integer inputs give Float32). 'floor': rounded down, 'trunc': rounded
    toward zero; both keep the promoted dtype (int / int stays int) and, as in MindSpore, have a
    zero gradient (their result is piecewise constant)."""
    if rounding_mode is None:
        return _div(input, other)
    if not isinstance(rounding_mode, str):
        raise C.OpTypeError("div", "'rounding_mode' to be None, 'floor' or 'trunc'",
                            f"{type(rounding_mode).__name__} {rounding_mode!r}"[:80])
    if rounding_mode == "floor":
        return _floor_div(input, other)
    if rounding_mode == "trunc":
        return _truncate_div(input, other)
    raise C.OpValueError("div", "'rounding_mode' to be None, 'floor' or 'trunc'", repr(rounding_mode))


def truncate_div(x, y):
    """`ops.truncate_div(x, y)`: x / y rounded toward zero."""
    return _truncate_div(x, y)


def pow(input, exponent):
    return _pow(input, exponent)


def maximum(input, other):
    return _maximum(input, other)


def minimum(input, other):
    return _minimum(input, other)


def floor_divide(input, other):
    return _floor_div(input, other)


def remainder(input, other):
    return _mod(input, other)


subtract, multiply, divide, true_divide = sub, mul, div, div


# ------------------------------------------------------------------------------------------------
# comparisons and logic (not differentiable)
def _compare(fn):
    """NumPy compares an integer array with any Python int (NumPy 2 handles ints beyond the dtype),
    but a Bool array only with one that fits Int64: such an int is compared against the Bool values
    as integers (0 and 1)."""
    def kernel(a, b):
        if type(b) is int and not -2**63 <= b < 2**63 and a.dtype == np.bool_:
            a = a.astype(np.int64)
        elif type(a) is int and not -2**63 <= a < 2**63 and b.dtype == np.bool_:
            b = b.astype(np.int64)
        return fn(a, b)
    return kernel


def _logical(fn):
    """A logical op reads only the truth of a Python scalar operand, so take it as a bool (NumPy
    would first convert it to the tensor's dtype, and refuse an int beyond Int64)."""
    def kernel(a, b):
        return fn(a if isinstance(a, np.ndarray) else bool(a), b if isinstance(b, np.ndarray) else bool(b))
    return kernel


def _cmp(name, fn, fusion=None):
    return defprim(name, _binary_infer(name, out_dtype=mstype.bool_), fn, None, doc=f"elementwise {name}",
                   fusion=fusion, cost=costs.ELEMENTWISE, sharding=SR.elementwise)


_eq = _cmp("equal", _compare(np.equal), c_expr.compare("=="))
_ne = _cmp("not_equal", _compare(np.not_equal), c_expr.compare("!="))
_lt = _cmp("less", _compare(np.less), c_expr.compare("<"))
_le = _cmp("less_equal", _compare(np.less_equal), c_expr.compare("<="))
_gt = _cmp("greater", _compare(np.greater), c_expr.compare(">"))
_ge = _cmp("greater_equal", _compare(np.greater_equal), c_expr.compare(">="))
_TRUTHS = dict(operands="bool", out_bool=True, float_only=False)     # logic reads truth values
_and = _cmp("logical_and", _logical(np.logical_and), c_expr.binary("&&", **_TRUTHS))
_or = _cmp("logical_or", _logical(np.logical_or), c_expr.binary("||", **_TRUTHS))
_xor = _cmp("logical_xor", _logical(np.logical_xor), c_expr.binary("!=", **_TRUTHS))
_not = defprim("logical_not", _unary_infer("logical_not", out_dtype=mstype.bool_), np.logical_not, None,
               fusion=c_expr.rule(lambda a, t, at, raw: f"(!{a[0]})", **_TRUTHS), cost=costs.ELEMENTWISE, sharding=SR.pointwise)


def equal(input, other):
    return _eq(input, other)


def not_equal(input, other):
    return _ne(input, other)


def less(input, other):
    return _lt(input, other)


def less_equal(input, other):
    return _le(input, other)


def greater(input, other):
    return _gt(input, other)


def greater_equal(input, other):
    return _ge(input, other)


def logical_and(input, other):
    return _and(input, other)


def logical_or(input, other):
    return _or(input, other)


def logical_xor(input, other):
    return _xor(input, other)


def logical_not(input):
    return _not(input)


eq, ne, lt, le, gt, ge = equal, not_equal, less, less_equal, greater, greater_equal


# ------------------------------------------------------------------------------------------------
# unary math
def _unary(name, kernel, bprop, float_only=False, int_to_float=False, numeric_only=False, doc="", fusion=None,
           sharding=SR.pointwise):
    return defprim(name, _unary_infer(name, float_only=float_only, int_to_float=int_to_float,
                                      numeric_only=numeric_only),
                   kernel, bprop, doc=doc, fusion=fusion, cost=costs.ELEMENTWISE, sharding=sharding)


def _quiet(fn):
    def k(a):
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return fn(a)
    return k


_neg = _unary("neg", np.negative, lambda i, o, d: (neg(d),), numeric_only=True, doc="-x",
              fusion=c_expr.rule(lambda a, t, at, raw: f"(-{a[0]})"), sharding=SR.linear_pointwise)
_abs = _unary("abs", np.abs, lambda i, o, d: (mul(d, sign(i[0])),), doc="|x|", fusion=c_expr.libm("fabs"))


def _sign_c(a, t, at, raw):
    """np.sign: 1, -1, 0 (the zero's own sign), NaN for NaN."""
    x = a[0]
    return f"(({x}) > 0 ? {t.lit(1)} : (({x}) < 0 ? {t.lit(-1)} : (({x}) == 0 ? {t.lit(0)} : ({x}))))"


_sign = _unary("sign", np.sign, None, numeric_only=True, doc="sign(x)", fusion=c_expr.rule(_sign_c))
_exp = _unary("exp", _quiet(np.exp), lambda i, o, d: (mul(d, o),), float_only=True, int_to_float=True,
              fusion=c_expr.libm("exp"))
_log = _unary("log", _quiet(np.log), lambda i, o, d: (div(d, i[0]),), float_only=True, int_to_float=True,
              fusion=c_expr.libm("log"))
_sqrt = _unary("sqrt", _quiet(np.sqrt), lambda i, o, d: (div(d, mul(o, 2.0)),), float_only=True, int_to_float=True,
               fusion=c_expr.libm("sqrt"))
_rsqrt = _unary("rsqrt", _quiet(lambda a: 1.0 / np.sqrt(a)),
                lambda i, o, d: (mul(d, mul(pow(o, 3), -0.5)),), float_only=True, int_to_float=True,
                fusion=c_expr.rule(lambda a, t, at, raw: f"({t.lit(1.0)} / {t.fn('sqrt')}({a[0]}))"))
_square = _unary("square", np.square, lambda i, o, d: (mul(d, mul(i[0], 2)),),
                 fusion=c_expr.rule(lambda a, t, at, raw: f"({a[0]} * {a[0]})"))
_reciprocal = _unary("reciprocal", _quiet(np.reciprocal),
                     lambda i, o, d: (neg(mul(d, mul(o, o))),), float_only=True, int_to_float=True,
                     fusion=c_expr.rule(lambda a, t, at, raw: f"({t.lit(1.0)} / {a[0]})"))
_sin = _unary("sin", np.sin, lambda i, o, d: (mul(d, cos(i[0])),), float_only=True, int_to_float=True,
              fusion=c_expr.libm("sin"))
_cos = _unary("cos", np.cos, lambda i, o, d: (neg(mul(d, sin(i[0]))),), float_only=True, int_to_float=True,
              fusion=c_expr.libm("cos"))
_erf = _unary("erf", scipy.special.erf,
              lambda i, o, d: (mul(d, mul(exp(neg(square(i[0]))), 2.0 / np.sqrt(np.pi))),),
              float_only=True, int_to_float=True, fusion=c_expr.libm("erf"))
_floor = _unary("floor", np.floor, lambda i, o, d: (zeros_like(d),), fusion=c_expr.libm("floor"))
_ceil = _unary("ceil", np.ceil, lambda i, o, d: (zeros_like(d),), fusion=c_expr.libm("ceil"))
_round = _unary("round", np.round, lambda i, o, d: (zeros_like(d),),
                fusion=c_expr.libm("rint"))           # half to even, as np.round
_isnan = defprim("isnan", _unary_infer("isnan", out_dtype=mstype.bool_), np.isnan, None,
                 fusion=c_expr.rule(lambda a, t, at, raw: f"({a[0]} != {a[0]})", operands="asis", out_bool=True),
                 cost=costs.ELEMENTWISE, sharding=SR.pointwise)
_isinf = defprim("isinf", _unary_infer("isinf", out_dtype=mstype.bool_), np.isinf, None,
                 fusion=c_expr.rule(lambda a, t, at, raw: f"isinf({a[0]})", operands="asis", out_bool=True),
                 cost=costs.ELEMENTWISE, sharding=SR.pointwise)
_isfinite = defprim("isfinite", _unary_infer("isfinite", out_dtype=mstype.bool_), np.isfinite, None,
                    fusion=c_expr.rule(lambda a, t, at, raw: f"isfinite({a[0]})", operands="asis", out_bool=True),
                    cost=costs.ELEMENTWISE, sharding=SR.pointwise)


def neg(input):
    return _neg(input)


def abs(input):
    return _abs(input)


def sign(input):
    return _sign(input)


def exp(input):
    return _exp(input)


def log(input):
    return _log(input)


def sqrt(input):
    return _sqrt(input)


def rsqrt(input):
    return _rsqrt(input)


def square(input):
    return _square(input)


def reciprocal(input):
    return _reciprocal(input)


def sin(input):
    return _sin(input)


def cos(input):
    return _cos(input)


def erf(input):
    return _erf(input)


def floor(input):
    return _floor(input)


def ceil(input):
    return _ceil(input)


def round(input):
    return _round(input)


def isnan(input):
    return _isnan(input)


def isinf(input):
    return _isinf(input)


def isfinite(input):
    return _isfinite(input)


negative, absolute = neg, abs


# ------------------------------------------------------------------------------------------------
# select
def _where_infer(condition, x, y):
    C.tensor("where", "condition", condition)
    if condition.dtype is not mstype.bool_:
        raise C.OpTypeError("where", "'condition' of dtype Bool", str(condition.dtype))
    xy = _binary_infer("where")(x, y)
    return AbstractTensor(C.broadcast("where", condition.shape, xy.shape), xy.dtype)


def _where_bprop(inputs, out, dout):
    c, x, y = inputs
    zero = zeros_like(dout)
    return (None,
            _grad_for(x, where(c, dout, zero)) if _wanted(inputs, 1) else None,
            _grad_for(y, where(c, zero, dout)) if _wanted(inputs, 2) else None)


# Same-width unsigned integer views for the bitwise select below, by item size.
_BITS = {2: np.uint16, 4: np.uint32, 8: np.uint64}
_SELECT_MIN_SIZE = 4096        # below this np.where's fixed cost is lower than five NumPy calls


def select_kernel(c, x, y):
    """np.where(c, x, y), bit-identical, but without a data-dependent branch per element.

    np.where picks each element with a branch, and when the mask is irregular (a ReLU's gradient
    mask, dropout, random data) the CPU mispredicts about half of them: ~1 ms for 270k floats,
    ~20x the cost of an add. For two arrays of one dtype the select is done instead on the raw
    bits, where it is pure arithmetic: with m = all-one bits where c is True and zero bits
    elsewhere,  out = y ^ ((x ^ y) & m)  is x's bits where c holds and y's bits elsewhere (NaN
    payloads, -0.0 and infinities included). Everything else (scalars, mixed dtypes, 1-byte
    dtypes, small arrays) goes to np.where.
    """
    if (type(x) is np.ndarray and type(y) is np.ndarray
            and (x.size >= _SELECT_MIN_SIZE or y.size >= _SELECT_MIN_SIZE or c.size >= _SELECT_MIN_SIZE)
            and x.dtype == y.dtype and x.dtype.itemsize in _BITS and type(c) is np.ndarray and c.dtype == np.bool_):
        bits = _BITS[x.dtype.itemsize]
        m = c.astype(bits)
        np.negative(m, out=m)                   # True -> all ones (unsigned wrap-around), False -> 0
        yb = y.view(bits)
        out = np.bitwise_xor(x.view(bits), yb)
        if out.shape == m.shape:
            out &= m
        else:
            out = np.bitwise_and(out, m)       # the mask broadcasts to a larger shape
        out ^= yb
        return out.view(x.dtype)
    return np.where(c, x, y)


_where = defprim("where", _where_infer, select_kernel, _where_bprop, doc="condition ? x : y",
                 fusion=c_expr.rule(lambda a, t, at, raw: f"({a[0]} ? {a[1]} : {a[2]})", operands="select",
                                    float_only=False), cost=costs.ELEMENTWISE, sharding=SR.elementwise)


def where(condition, input, other):
    """`ops.where(condition, input, other)`: `input` where `condition` is True, else `other`
    (broadcasting). Either operand may be a Python number (`ops.where(mask, 1.0, x)`); with two
    numbers the result is Float32 if either is a float, else Int64, as in MindSpore."""
    x, y = input, other
    if not isinstance(x, Tensor) and not isinstance(y, Tensor) and C.is_tensor(condition):
        C.tensor_or_scalar("where", "input", x)
        C.tensor_or_scalar("where", "other", y)
        both_int = isinstance(x, int) and isinstance(y, int)
        x = Tensor(np.asarray(x, dtype=np.int64 if both_int else np.float32))
    return _where(condition, x, y)


# ------------------------------------------------------------------------------------------------
# dtype cast and gradient blocking
def _cast_infer(x, dtype):
    C.tensor("cast", "input", x)
    return AbstractTensor(x.shape, mstype.as_dtype(dtype))


def _cast_kernel(a, dtype):
    d = mstype.as_dtype(dtype).np
    if a.dtype.kind == "f" and d.kind in "iu":
        with np.errstate(invalid="ignore"):
            return np.trunc(a).astype(d)           # float -> int truncates toward zero
    return a.astype(d)


def _cast_bprop(inputs, out, dout, dtype):
    x = inputs[0]
    if not x.dtype.is_floating:
        return (None,)
    return (cast(dout, x.dtype),)


_cast = defprim("cast", _cast_infer, _cast_kernel, _cast_bprop, doc="convert dtype",
                # (fused, the operand conversion is the cast)
                fusion=c_expr.rule(lambda a, t, at, raw: a[0], operands="asis", float_only=False, one_tensor=True),
                cost=costs.data_movement, sharding=SR.cast)


def cast(input, dtype):
    """`input` converted to `dtype` (float -> int truncates toward zero)."""
    dtype = mstype.as_dtype(dtype)
    if isinstance(input, Tensor) and input.dtype is dtype and input._node is None:
        return input
    return _cast(input, dtype=dtype)


_stop_gradient = defprim("stop_gradient", _unary_infer("stop_gradient"), lambda a: a, None,
                         doc="identity whose output never carries a gradient", fusion=c_expr.reads_input(),
                         cost=costs.free, sharding=SR.linear_pointwise)


def stop_gradient(value):
    """The value, cut off from autodiff: nothing flows back through it."""
    if isinstance(value, (tuple, list)):
        return type(value)(stop_gradient(v) for v in value)
    return _stop_gradient(value)


_copy = defprim("copy", _unary_infer("copy"), np.copy, lambda i, o, d: (d,),
                doc="a new tensor with its own storage (differentiable, unlike a NumPy copy)",
                fusion=c_expr.reads_input(),
                cost=costs.data_movement, sharding=SR.linear_pointwise)


def deepcopy(input_x):
    """`ops.deepcopy(input_x)`: copy into new storage; gradients flow through it."""
    return _copy(input_x)


# zeros_like / ones_like are used by backward rules, so they live here
def _like_infer(name):
    def infer(x, dtype=None):
        C.tensor(name, "input", x)
        return AbstractTensor(x.shape, mstype.as_dtype(dtype) if dtype is not None else x.dtype)
    return infer


_zeros_like = defprim("zeros_like", _like_infer("zeros_like"),
                      lambda a, dtype=None: np.zeros(a.shape, dtype=mstype.as_dtype(dtype).np if dtype else a.dtype),
                      from_shape="zeros", fusion=c_expr.constant(0), cost=costs.data_movement, sharding=SR.shape_only)
_ones_like = defprim("ones_like", _like_infer("ones_like"),
                     lambda a, dtype=None: np.ones(a.shape, dtype=mstype.as_dtype(dtype).np if dtype else a.dtype),
                     from_shape="ones", fusion=c_expr.constant(1), cost=costs.data_movement, sharding=SR.shape_only)


def zeros_like(input, *, dtype=None):
    return _zeros_like(input, dtype=dtype)


def ones_like(input, *, dtype=None):
    return _ones_like(input, dtype=dtype)


__all__ = ['abs', 'absolute', 'add', 'cast', 'ceil', 'cos', 'deepcopy', 'div', 'truncate_div', 'divide', 'eq', 'equal', 'erf', 'exp', 'floor', 'floor_divide', 'ge', 'greater', 'greater_equal', 'gt', 'isfinite', 'isinf', 'isnan', 'le', 'less', 'less_equal', 'log', 'logical_and', 'logical_not', 'logical_or', 'logical_xor', 'lt', 'maximum', 'minimum', 'mul', 'multiply', 'ne', 'neg', 'negative', 'not_equal', 'ones_like', 'pow', 'reciprocal', 'remainder', 'round', 'rsqrt', 'sign', 'sin', 'sqrt', 'square', 'stop_gradient', 'sub', 'subtract', 'true_divide', 'where', 'zeros_like']
