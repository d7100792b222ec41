"""The fusible primitives and their C expressions: THE table operator fusion (O1) reads.

A primitive is fusible when its value at one element depends only on its inputs at that same
(broadcast) element - elementwise arithmetic, comparisons, `where`, `cast`, activations - or when
it is a reduction whose per-row result a loop can accumulate (`reduce_sum/mean/max/min`). Each
entry says how to write the op as a C expression of its operands' expressions:

    RULES["mul"].emit(["x3", "((float)0.5)"], t, attrs, raw)  ->  "(x3 * ((float)0.5))"

The expressions are written to round exactly as the CPU reference kernels (NumPy) do, one
operation at a time, in the same order: `0.5 * x * (1 + tanh(...))` is `((0.5*x) * (1+tanh(...)))`
as NumPy evaluates it, contraction into fused multiply-adds is disabled (build.py passes
`-ffp-contract=off`), and Python scalars enter as `(float)<the double>`, which is how NumPy 2
converts a weak scalar for a float32 array. Only transcendental functions (exp, tanh, erf ...)
can differ in the last bits (glibc's vector math vs NumPy's own SIMD loops): a few ulp.

Operand typing (`Rule.operands`):

* "out"     every operand is converted to the op's output type before the op (arithmetic);
* "promote" operands are converted to their promoted type (comparisons: float32 vs float64);
* "bool"    operands are truth values (`x != 0`) (logical ops);
* "where"   condition as a truth value, the two branches in the output type;
* "asis"    the operand's own type (cast, isnan ...).

Dtypes: float32 and float64 values, and bool values (comparison results, where-conditions).
Anything else (integers, float16) leaves the node unfused: the fusion pass asks `fusible(node)`.
"""
from __future__ import annotations

import math

from ...common import dtype as mstype


# -- C types ---------------------------------------------------------------------------------------
class CType:
    """How one minispore dtype lives in generated C: the C type, the libm suffix ("f" for float)."""

    __slots__ = ("dtype", "c", "suffix", "is_float")

    def __init__(self, dtype, c, suffix):
        self.dtype, self.c, self.suffix = dtype, c, suffix
        self.is_float = suffix is not None

    def fn(self, name: str) -> str:
        """The libm function for this type: `fn("exp")` is `expf` for float32, `exp` for float64."""
        return name + self.suffix

    def lit(self, value) -> str:
        """A Python scalar as a C constant of this type (NumPy's conversion: through the double)."""
        if not self.is_float:
            return "1" if value else "0"
        v = float(value)
        if math.isnan(v):
            return f"(({self.c})NAN)"
        if math.isinf(v):
            return f"(({self.c})INFINITY)" if v > 0 else f"(-({self.c})INFINITY)"
        return f"(({self.c}){v!r})"

    def __repr__(self):
        return f"CType({self.c})"


F32 = CType(mstype.float32, "float", "f")
F64 = CType(mstype.float64, "double", "")
BOOL = CType(mstype.bool_, "unsigned char", None)
CTYPES = {mstype.float32: F32, mstype.float64: F64, mstype.bool_: BOOL}


def ctype_of(dtype):
    """The CType of a minispore dtype, or None when generated kernels do not handle it."""
    return CTYPES.get(dtype)


def convert(expr: str, src: CType, dst: CType) -> str:
    """`expr` of type `src` as a value of type `dst` (NumPy's casting rules)."""
    if src is dst:
        return expr
    if dst is BOOL:
        return f"({expr} != 0)"            # NaN is truthy, as bool(np.nan)
    return f"(({dst.c}){expr})"


# -- the rules -------------------------------------------------------------------------------------
class Rule:
    """How to emit one fusible primitive. `emit(a, t, attrs, raw)` gets the operands' C
    expressions `a` (already converted as `operands` says; None for a None constant), the output
    CType `t`, the node's attrs and `raw` (the Python constant of each operand, or None for a
    tensor operand). `out_bool`: the output is bool whatever the inputs. `float_only`: every
    tensor operand and the output must be float32/float64."""

    __slots__ = ("emit", "operands", "out_bool", "float_only", "uses")

    def __init__(self, emit, operands="out", out_bool=False, float_only=True, uses=None):
        self.emit, self.operands, self.out_bool, self.float_only = emit, operands, out_bool, float_only
        self.uses = uses                    # operand indices the expression reads (None: all)


RULES: dict[str, Rule] = {}


def _rule(name, **kw):
    def register(emit):
        RULES[name] = Rule(emit, **kw)
        return emit
    return register


def _max(a, b):
    """np.maximum: NaN in either operand propagates (C's fmax would drop it)."""
    return f"((({a}) >= ({b}) || ({a}) != ({a})) ? ({a}) : ({b}))"


def _min(a, b):
    return f"((({a}) <= ({b}) || ({a}) != ({a})) ? ({a}) : ({b}))"


def _sigmoid(t, x):
    """As activation._sigmoid_np: e = exp(-|x|); (x >= 0 ? 1 : e) / (1 + e) - never overflows."""
    e = f"{t.fn('exp')}(-{t.fn('fabs')}({x}))"
    return f"((({x}) >= 0 ? {t.lit(1.0)} : {e}) / ({t.lit(1.0)} + {e}))"


# binary arithmetic: both operands in the output type
_rule("add")(lambda a, t, at, raw: f"({a[0]} + {a[1]})")
_rule("sub")(lambda a, t, at, raw: f"({a[0]} - {a[1]})")
_rule("mul")(lambda a, t, at, raw: f"({a[0]} * {a[1]})")
_rule("div")(lambda a, t, at, raw: f"({a[0]} / {a[1]})")
_rule("maximum")(lambda a, t, at, raw: _max(a[0], a[1]))
_rule("minimum")(lambda a, t, at, raw: _min(a[0], a[1]))


@_rule("pow")
def _pow(a, t, at, raw):
    e = raw[1]
    # exact special cases for constant exponents (x*x is the correctly rounded square, as powf is not
    # guaranteed to be); any other exponent goes through libm's pow, as NumPy's loop does
    if e is not None and not isinstance(e, bool):
        if e == 2:
            return f"({a[0]} * {a[0]})"
        if e == 1:
            return f"({a[0]})"
        if e == 0.5:
            return f"{t.fn('sqrt')}({a[0]})"
    return f"{t.fn('pow')}({a[0]}, {a[1]})"


# unary math on floats
_rule("neg")(lambda a, t, at, raw: f"(-{a[0]})")
_rule("abs")(lambda a, t, at, raw: f"{t.fn('fabs')}({a[0]})")
_rule("sign")(lambda a, t, at, raw: f"(({a[0]}) > 0 ? {t.lit(1)} : (({a[0]}) < 0 ? {t.lit(-1)} : "
                                    f"(({a[0]}) == 0 ? {t.lit(0)} : ({a[0]}))))")
_rule("square")(lambda a, t, at, raw: f"({a[0]} * {a[0]})")
_rule("reciprocal")(lambda a, t, at, raw: f"({t.lit(1.0)} / {a[0]})")
_rule("sqrt")(lambda a, t, at, raw: f"{t.fn('sqrt')}({a[0]})")
_rule("rsqrt")(lambda a, t, at, raw: f"({t.lit(1.0)} / {t.fn('sqrt')}({a[0]}))")
_rule("exp")(lambda a, t, at, raw: f"{t.fn('exp')}({a[0]})")
_rule("log")(lambda a, t, at, raw: f"{t.fn('log')}({a[0]})")
_rule("sin")(lambda a, t, at, raw: f"{t.fn('sin')}({a[0]})")
_rule("cos")(lambda a, t, at, raw: f"{t.fn('cos')}({a[0]})")
_rule("erf")(lambda a, t, at, raw: f"{t.fn('erf')}({a[0]})")
_rule("tanh")(lambda a, t, at, raw: f"{t.fn('tanh')}({a[0]})")
_rule("floor")(lambda a, t, at, raw: f"{t.fn('floor')}({a[0]})")
_rule("ceil")(lambda a, t, at, raw: f"{t.fn('ceil')}({a[0]})")
_rule("round")(lambda a, t, at, raw: f"{t.fn('rint')}({a[0]})")     # half to even, as np.round

# identities: a copy, a gradient barrier, and reads through a view (the fused loop broadcasts,
# reinterprets and transposes by strides)
for _name in ("copy", "stop_gradient", "broadcast_to", "reshape", "transpose"):
    _rule(_name, float_only=False)(lambda a, t, at, raw: a[0])

# constants shaped like their input (the input is never read)
_rule("zeros_like", float_only=False, uses=())(lambda a, t, at, raw: t.lit(0))
_rule("ones_like", float_only=False, uses=())(lambda a, t, at, raw: t.lit(1))

# comparisons and logic: bool results
for _name, _op in (("equal", "=="), ("not_equal", "!="), ("less", "<"), ("less_equal", "<="),
                   ("greater", ">"), ("greater_equal", ">=")):
    _rule(_name, operands="promote", out_bool=True, float_only=False)(
        lambda a, t, at, raw, _op=_op: f"({a[0]} {_op} {a[1]})")
_rule("logical_and", operands="bool", out_bool=True, float_only=False)(lambda a, t, at, raw: f"({a[0]} && {a[1]})")
_rule("logical_or", operands="bool", out_bool=True, float_only=False)(lambda a, t, at, raw: f"({a[0]} || {a[1]})")
_rule("logical_xor", operands="bool", out_bool=True, float_only=False)(lambda a, t, at, raw: f"({a[0]} != {a[1]})")
_rule("logical_not", operands="bool", out_bool=True, float_only=False)(lambda a, t, at, raw: f"(!{a[0]})")
_rule("isnan", operands="asis", out_bool=True)(lambda a, t, at, raw: f"({a[0]} != {a[0]})")
_rule("isinf", operands="asis", out_bool=True)(lambda a, t, at, raw: f"isinf({a[0]})")
_rule("isfinite", operands="asis", out_bool=True)(lambda a, t, at, raw: f"isfinite({a[0]})")

# select and convert
_rule("where", operands="where", float_only=False)(lambda a, t, at, raw: f"({a[0]} ? {a[1]} : {a[2]})")
_rule("cast", operands="asis", float_only=False)(lambda a, t, at, raw: a[0])     # convert() does the work

# activations (same formulas, same evaluation order as minispore/ops/prims/activation.py)
_rule("relu")(lambda a, t, at, raw: _max(a[0], t.lit(0)))
_rule("sigmoid")(lambda a, t, at, raw: _sigmoid(t, a[0]))
_rule("silu")(lambda a, t, at, raw: f"({_sigmoid(t, a[0])} * {a[0]})")
# dout * silu'(x) = ((((1 - s) * x) + 1) * s) * dout, s = sigmoid(x)  (activation._silu_grad_kernel)
_rule("silu_grad")(lambda a, t, at, raw: f"((((({t.lit(1.0)} - {_sigmoid(t, a[0])}) * {a[0]}) + {t.lit(1.0)}) * "
                                         f"{_sigmoid(t, a[0])}) * {a[1]})")
_rule("leaky_relu")(lambda a, t, at, raw: f"(({a[0]}) > 0 ? ({a[0]}) : ({a[0]} * {t.lit(at.get('alpha', 0.2))}))")
_rule("elu")(lambda a, t, at, raw: f"(({a[0]}) > 0 ? ({a[0]}) : ({t.lit(at.get('alpha', 1.0))} * "
                                   f"{t.fn('expm1')}({_min(a[0], t.lit(0))})))")
_rule("hardtanh")(lambda a, t, at, raw: _min(_max(a[0], t.lit(at.get("min_val", -1.0))), t.lit(at.get("max_val", 1.0))))


@_rule("clamp")
def _clamp(a, t, at, raw):
    out = a[0]
    if a[1] is not None:
        out = _max(out, a[1])
    if a[2] is not None:
        out = _min(out, a[2])
    return out


@_rule("softplus")
def _softplus(a, t, at, raw):
    beta, threshold = at.get("beta", 1.0), at.get("threshold", 20.0)
    bx = f"({a[0]} * {t.lit(beta)})"
    soft = f"(({_max(bx, t.lit(0))} + {t.fn('log1p')}({t.fn('exp')}(-{t.fn('fabs')}({bx})))) / {t.lit(beta)})"
    return f"(({bx} > {t.lit(threshold)}) ? ({a[0]}) : {soft})"


@_rule("gelu")
def _gelu(a, t, at, raw):
    x = a[0]
    if at.get("approximate", "none") == "tanh":
        # 0.5 * x * (1.0 + tanh(sqrt(2/pi) * (x + 0.044715 * x * x * x)))
        inner = f"({t.lit(math.sqrt(2.0 / math.pi))} * ({x} + ((({t.lit(0.044715)} * {x}) * {x}) * {x})))"
        return f"(({t.lit(0.5)} * {x}) * ({t.lit(1.0)} + {t.fn('tanh')}({inner})))"
    # 0.5 * x * erfc(-x / sqrt(2))
    return f"(({t.lit(0.5)} * {x}) * {t.fn('erfc')}((-{x}) / {t.lit(math.sqrt(2.0))}))"


# -- reductions ------------------------------------------------------------------------------------
# name -> how a row accumulates: ("sum"|"mean"|"max"|"min"). Sums accumulate in double (NumPy sums
# float32 pairwise; a double accumulator is at least as accurate, so the two agree to rounding).
REDUCTIONS = {"reduce_sum": "sum", "reduce_mean": "mean", "reduce_max": "max", "reduce_min": "min"}

# libm functions that glibc's libmvec has vector versions of (declared `omp declare simd` in the
# generated source so loops calling them vectorize)
VECTOR_MATH = ("exp", "log", "tanh", "erf", "erfc", "expm1", "log1p", "sin", "cos", "pow")

# ops that only re-read memory (the fusion pass does not count them as work worth a kernel)
FREE_OPS = frozenset(("copy", "stop_gradient", "broadcast_to", "reshape", "transpose"))


def operand_types(rule: Rule, out_t: CType, in_types: list):
    """The CType each operand is converted to before the op (see the module docstring)."""
    kind = rule.operands
    if kind == "out":
        return [out_t] * len(in_types)
    if kind == "bool":
        return [BOOL] * len(in_types)
    if kind == "asis":
        return list(in_types)
    if kind == "where":
        return [BOOL, out_t, out_t]
    # promote: the widest float type among the tensor operands (bool only if all are bool)
    ts = [t for t in in_types if t is not None]
    best = F64 if F64 in ts else F32 if F32 in ts else BOOL
    return [best] * len(in_types)


__all__ = ["CType", "F32", "F64", "BOOL", "CTYPES", "ctype_of", "convert", "Rule", "RULES", "REDUCTIONS",
           "VECTOR_MATH", "FREE_OPS", "operand_types"]
