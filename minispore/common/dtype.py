"""minispore dtypes: thin named wrappers around NumPy dtypes, plus the one promotion table.

`str(ms.float32) == "Float32"` and `repr(ms.float32) == "mindspore.float32"`, as in MindSpore.
bfloat16 comes from ml_dtypes, which registers it as a real NumPy dtype.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np


class DType:
    """A named element type. `np` is the NumPy dtype that stores it."""

    __slots__ = ("name", "np", "kind", "rank", "itemsize")

    def __init__(self, name: str, np_dtype, kind: str, rank: int):
        self.name = name                # MindSpore-style name, e.g. "Float32"
        self.np = np.dtype(np_dtype)
        self.kind = kind                # "bool" | "int" | "uint" | "float"
        self.rank = rank                # position in the promotion lattice (see promote)
        self.itemsize = self.np.itemsize

    @property
    def is_floating(self) -> bool:
        return self.kind == "float"

    @property
    def is_integer(self) -> bool:
        return self.kind in ("int", "uint")

    def __str__(self):
        return self.name

    def __repr__(self):
        return "mindspore." + _PY_NAMES[self.name]

    def __reduce__(self):               # pickle/deepcopy as the singleton
        return (dtype_from_name, (self.name,))


bool_ = DType("Bool", np.bool_, "bool", 0)
uint8 = DType("UInt8", np.uint8, "uint", 1)
int8 = DType("Int8", np.int8, "int", 2)
int16 = DType("Int16", np.int16, "int", 3)
int32 = DType("Int32", np.int32, "int", 4)
int64 = DType("Int64", np.int64, "int", 5)
float16 = DType("Float16", np.float16, "float", 6)
bfloat16 = DType("BFloat16", ml_dtypes.bfloat16, "float", 6)
float32 = DType("Float32", np.float32, "float", 7)
float64 = DType("Float64", np.float64, "float", 8)
# The wide unsigned types sit outside the lattice: MindSpore converts them implicitly only with
# Bool and with themselves (UInt16 + Int32 is a TypeError), so their rank is never compared.
uint16 = DType("UInt16", np.uint16, "uint", -1)
uint32 = DType("UInt32", np.uint32, "uint", -1)
uint64 = DType("UInt64", np.uint64, "uint", -1)

ALL_DTYPES = (bool_, uint8, uint16, uint32, uint64, int8, int16, int32, int64, float16, bfloat16, float32, float64)
FLOAT_DTYPES = (float16, bfloat16, float32, float64)
INT_DTYPES = (uint8, uint16, uint32, uint64, int8, int16, int32, int64)
_WIDE_UNSIGNED = frozenset((uint16, uint32, uint64))

# aliases MindSpore also exports
half, single, double = float16, float32, float64

_PY_NAMES = {d.name: n for n, d in {
    "bool_": bool_, "uint8": uint8, "uint16": uint16, "uint32": uint32, "uint64": uint64,
    "int8": int8, "int16": int16, "int32": int32, "int64": int64,
    "float16": float16, "bfloat16": bfloat16, "float32": float32, "float64": float64}.items()}
_BY_NAME = {d.name: d for d in ALL_DTYPES}
_BY_NP = {d.np: d for d in ALL_DTYPES}


def dtype_from_name(name: str) -> DType:
    return _BY_NAME[name]


def from_numpy_dtype(np_dtype) -> DType:
    """The minispore dtype stored as `np_dtype`. Raises TypeError for unsupported NumPy dtypes."""
    d = _BY_NP.get(np.dtype(np_dtype))
    if d is None:
        from .errors import OpTypeError
        raise OpTypeError("Tensor", "a NumPy dtype minispore supports "
                          f"({', '.join(str(x) for x in ALL_DTYPES)})", f"numpy dtype {np.dtype(np_dtype)}")
    return d


def dtype_to_nptype(d: DType):
    return d.np.type


def as_dtype(x) -> DType:
    """Accept a DType, a NumPy dtype/type, or a MindSpore-style name ('float32' / 'Float32')."""
    if isinstance(x, DType):
        return x
    if isinstance(x, str):
        if x in _BY_NAME:
            return _BY_NAME[x]
        for d in ALL_DTYPES:
            if _PY_NAMES[d.name] == x:
                return d
    from .errors import OpTypeError
    if x is None or isinstance(x, (bool, int, float, tuple, list)) or hasattr(x, "_data"):
        raise OpTypeError("dtype", "a minispore dtype such as ms.float32", repr(x)[:80])
    try:
        return from_numpy_dtype(np.dtype(x))
    except (TypeError, ValueError):
        pass
    raise OpTypeError("dtype", "a minispore dtype such as ms.float32", repr(x)[:80])


def promote(a: DType, b: DType, op: str = "implicit type conversion") -> DType:
    """The one promotion table (MindSpore 2.10's).

    bool < uint8 < int8 < int16 < int32 < int64 < {float16, bfloat16} < float32 < float64;
    uint8 with int8 gives int16; float16 with bfloat16 gives float32. UInt16/UInt32/UInt64 convert
    only with Bool (and themselves): any other pair raises, as in MindSpore, rather than computing
    in one type and reporting another.
    """
    if a is b:
        return a
    if a in _WIDE_UNSIGNED or b in _WIDE_UNSIGNED:
        if a is bool_:
            return b
        if b is bool_:
            return a
        from .errors import OpTypeError
        raise OpTypeError(op, "dtypes MindSpore converts implicitly (UInt16/UInt32/UInt64 mix only with "
                          "Bool or themselves; cast one operand first)", f"{a} and {b}")
    if {a, b} == {float16, bfloat16}:
        return float32
    if {a, b} == {uint8, int8}:
        return int16
    return a if a.rank > b.rank else b


def promote_scalar(t: DType, scalar) -> DType:
    """A Python scalar is 'weak': it never widens a tensor of its own kind.

    int tensor with a float scalar becomes float32 (the default float); bool tensor with an int
    scalar becomes int64.
    """
    if isinstance(scalar, bool):
        return t
    if isinstance(scalar, int):
        return int64 if t is bool_ else t
    if isinstance(scalar, float):
        return t if t.kind == "float" else float32
    return t


def scalar_dtype(value) -> DType:
    """Default dtype of a Python scalar made into a tensor (MindSpore: 3 -> Int64, 1.0 -> Float32)."""
    if isinstance(value, (bool, np.bool_)):
        return bool_
    if isinstance(value, (int, np.integer)):
        return int64
    return float32
