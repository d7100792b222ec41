"""How minispore values live in generated C: the C types, conversions and operand typing.

Which primitives fuse, and each one's C expression, is a fact of the primitive itself
(`Primitive.fusion`, a `FusionRule` of minispore/ops/c_expr.py, whose docstring says why the
expressions round exactly like the NumPy kernels). This module is the C side those expressions
are written against: a `CType` per dtype (`t.c`, `t.fn("exp")`, `t.lit(1.0)`), `convert` (NumPy's
casting rules in C) and `operand_types` (what each operand is converted to before an op).

Dtypes: float32 and float64 values, and bool values (comparison results, where-conditions).
Anything else (integers, float16) has no CType, which leaves the node unfused.
"""
from __future__ import annotations

import math

from ...common import dtype as mstype


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


def operand_types(rule, out_t: CType, in_types: list):
    """The CType each operand of a `FusionRule` is converted to before the op (`rule.operands`:
    see minispore/ops/c_expr.py)."""
    kind = rule.operands
    if kind == "out":
        return [out_t] * len(in_types)
    if kind == "bool":
        return [BOOL] * len(in_types)
    if kind == "asis":
        return list(in_types)
    if kind == "select":
        return [BOOL, out_t, out_t]
    # promote: the widest float type among the tensor operands (bool only if all are bool)
    ts = [t for t in in_types if t is not None]
    best = F64 if F64 in ts else F32 if F32 in ts else BOOL
    return [best] * len(in_types)


__all__ = ["CType", "F32", "F64", "BOOL", "CTYPES", "ctype_of", "convert", "operand_types"]
