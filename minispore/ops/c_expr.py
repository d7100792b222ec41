"""Fusion facts: how an op is written inside a generated C loop (`Primitive.fusion`, jit_level O1).

A primitive is fusible when its value at one element depends only on its inputs at that same
(broadcast) element - elementwise arithmetic, comparisons, `where`, `cast`, activations - or when
it is a reduction whose per-row result a loop can accumulate (`reduce_sum/mean/max/min`). Its
definition then carries a `FusionRule` saying how to write it as a C expression of its operands'
expressions, e.g. at `mul`'s defprim:

    fusion=binary("*")          # emit(["x3", "((float)0.5)"], t, attrs, raw) -> "(x3 * ((float)0.5))"

The operator-fusion pass (graph/passes/fusion.py) and the C generator (graph/codegen/) read only
these facts: adding a fusible op touches its own definition and nothing else.

**Why fused code gives the same numbers as the NumPy kernels.** The expressions are written to
round exactly as the CPU reference kernels do, one operation at a time, in the same order:
`0.5 * x * (1 + tanh(...))` is `((0.5*x) * (1+tanh(...)))` as NumPy evaluates it, contraction into
fused multiply-adds is disabled (codegen/build.py passes `-ffp-contract=off`), and Python scalars
enter as `(float)<the double>`, which is how NumPy 2 converts a weak scalar for a float32 array.
NaN propagates as NumPy's does (`nan_max`: C's fmax would drop it), and the sigmoid is the same
overflow-free formula as the kernel. Only transcendental functions (exp, tanh, erf ...) can
differ in the last bits (glibc's vector math vs NumPy's own SIMD loops): a few ulp.

**The emit contract.** `emit(a, t, attrs, raw)` gets the operands' C expressions `a` (already
converted as `operands` says; None for a None constant), the output C type `t`, the node's attrs
and `raw` (the Python constant of each operand, or None for a tensor operand). `t` is duck-typed
(codegen/c_types.py's CType): `t.c` is the C type ("float"), `t.fn("exp")` the libm function for
it ("expf"), `t.lit(1.0)` a Python scalar as a C constant of that type ("((float)1.0)").

Operand typing (`FusionRule.operands`):

* "out"     every operand is converted to the op's output type before the op (arithmetic);
* "promote" operands are converted to their promoted type (comparisons: float32 vs float64);
* "bool"    operands are truth values (`x != 0`) (logical ops);
* "select"  condition as a truth value, the two branches in the output type;
* "asis"    the operand's own type (cast, isnan ...).

Dtypes: generated kernels handle float32 and float64 values, and bool values (comparison
results, where-conditions); anything else (integers, float16) leaves the node unfused.
"""
from __future__ import annotations


class FusionRule:
    """How operator fusion may inline one primitive (see the module docstring).

    * `emit`        the C expression (None for a reduction, which the generator accumulates);
    * `operands`    how operands are typed before the op ("out", "promote", "bool", "select", "asis");
    * `out_bool`    the output is bool whatever the inputs (comparisons, logic, isnan ...);
    * `float_only`  every tensor operand and the output must be float32/float64; otherwise any dtype
                    the generator handles (the output keeps the node's own dtype: cast, where, views);
    * `uses`        the operand indices the expression reads (None: all; `()` for `zeros_like`,
                    whose input only gives the shape);
    * `reduce`      for a reduction, how a row accumulates: "sum", "mean", "max" or "min" (sums
                    accumulate in double: NumPy sums float32 pairwise, a double accumulator is at
                    least as accurate, so the two agree to rounding; max/min propagate NaN);
    * `free`        the op only re-reads memory (a copy, a view, a gradient barrier): not work worth a
                    kernel of its own, never the start of a group - the fused loop reads its input
                    directly, by the strides its `Primitive.view` describes;
    * `one_tensor`  fusible only with exactly one tensor operand (its value is input 0's, or its
                    shape: views, casts, `ones_like`).
    """

    __slots__ = ("emit", "operands", "out_bool", "float_only", "uses", "reduce", "free", "one_tensor")
    OPERANDS = ("out", "promote", "bool", "select", "asis")
    REDUCE = ("sum", "mean", "max", "min")

    def __init__(self, emit=None, operands="out", out_bool=False, float_only=True, uses=None, *, reduce=None,
                 free=False, one_tensor=False):
        if operands not in self.OPERANDS:
            raise ValueError(f"FusionRule operands must be one of {self.OPERANDS}, got {operands!r}")
        if (emit is None) == (reduce is None):
            raise ValueError("a FusionRule has either a C expression (emit) or a reduction kind (reduce)")
        if reduce is not None and reduce not in self.REDUCE:
            raise ValueError(f"FusionRule reduce must be one of {self.REDUCE}, got {reduce!r}")
        self.emit, self.operands, self.out_bool, self.float_only = emit, operands, out_bool, float_only
        self.uses = uses
        self.reduce, self.free, self.one_tensor = reduce, free, one_tensor

    def __repr__(self):
        return f"FusionRule(reduce={self.reduce!r})" if self.reduce else f"FusionRule(operands={self.operands!r})"


# -- constructors for the common shapes of rule --------------------------------------------------------
def rule(emit, **kw) -> FusionRule:
    """A rule whose C expression is `emit(a, t, attrs, raw)` (keywords: see `FusionRule`)."""
    return FusionRule(emit, **kw)


def binary(c_op: str, **kw) -> FusionRule:
    """`(a0 <c_op> a1)`: C's own operator (`+`, `*`, `<` ...) on the two converted operands."""
    return FusionRule(lambda a, t, at, raw: f"({a[0]} {c_op} {a[1]})", **kw)


def libm(fn: str, **kw) -> FusionRule:
    """`fn(a0)` with the libm function of the output type (`expf` for float32, `exp` for float64)."""
    return FusionRule(lambda a, t, at, raw: f"{t.fn(fn)}({a[0]})", **kw)


def compare(c_op: str) -> FusionRule:
    """A comparison: operands in their promoted type, a bool result."""
    return binary(c_op, operands="promote", out_bool=True, float_only=False)


def reduction(kind: str) -> FusionRule:
    """A reduction over trailing axes accumulated as `kind` ("sum", "mean", "max", "min")."""
    return FusionRule(reduce=kind)


def reads_input() -> FusionRule:
    """An op whose value is its input's (a copy, a gradient barrier, a view): any dtype, free."""
    return FusionRule(lambda a, t, at, raw: a[0], float_only=False, free=True, one_tensor=True)


def constant(value) -> FusionRule:
    """A constant shaped like the input (`zeros_like`): the input is never read."""
    return FusionRule(lambda a, t, at, raw: t.lit(value), float_only=False, uses=(), one_tensor=True)


# -- shared emitters ---------------------------------------------------------------------------------------
def nan_max(a: str, b: str) -> str:
    """np.maximum: NaN in either operand propagates (C's fmax would drop it)."""
    return f"((({a}) >= ({b}) || ({a}) != ({a})) ? ({a}) : ({b}))"


def nan_min(a: str, b: str) -> str:
    """np.minimum: NaN in either operand propagates."""
    return f"((({a}) <= ({b}) || ({a}) != ({a})) ? ({a}) : ({b}))"


def sigmoid(t, x: str) -> str:
    """As activation._sigmoid_np: e = exp(-|x|); (x >= 0 ? 1 : e) / (1 + e) - never overflows."""
    e = f"{t.fn('exp')}(-{t.fn('fabs')}({x}))"
    return f"((({x}) >= 0 ? {t.lit(1.0)} : {e}) / ({t.lit(1.0)} + {e}))"


# libm functions the expressions call that glibc's vector math library (libmvec) has vector
# versions of, with their number of arguments: the generated source declares them `omp declare
# simd`, so loops calling them vectorize (codegen/build.py). A new expression calling another
# libmvec function lists it here.
VECTOR_MATH = {"exp": 1, "log": 1, "tanh": 1, "erf": 1, "erfc": 1, "expm1": 1, "log1p": 1, "sin": 1, "cos": 1,
               "pow": 2}


__all__ = ["FusionRule", "rule", "binary", "libm", "compare", "reduction", "reads_input", "constant", "nan_max",
           "nan_min", "sigmoid", "VECTOR_MATH"]
