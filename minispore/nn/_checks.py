"""Argument checks shared by the layers. Each raises a minispore error naming the cell."""
from __future__ import annotations

import math
import numbers

from ..common.errors import OpTypeError, OpValueError
from ..common.tensor import Tensor


def positive_int(cell: str, name: str, v) -> int:
    if not isinstance(v, numbers.Integral) or isinstance(v, bool):
        raise OpTypeError(cell, f"'{name}' to be an int", f"{type(v).__name__} {v!r}")
    if v <= 0:
        raise OpValueError(cell, f"'{name}' > 0", repr(v))
    return int(v)


def non_negative_int(cell: str, name: str, v) -> int:
    if not isinstance(v, numbers.Integral) or isinstance(v, bool):
        raise OpTypeError(cell, f"'{name}' to be an int", f"{type(v).__name__} {v!r}")
    if v < 0:
        raise OpValueError(cell, f"'{name}' >= 0", repr(v))
    return int(v)


def boolean(cell: str, name: str, v) -> bool:
    if not isinstance(v, bool):
        raise OpTypeError(cell, f"'{name}' to be a bool", f"{type(v).__name__} {v!r}")
    return v


def real(cell: str, name: str, v, lo=None, hi=None, lo_open=False, hi_open=False) -> float:
    """A real hyper-parameter, optionally within [lo, hi] (ends open on request).

    NaN is always refused: it fails no comparison, so it would pass every range test and then
    poison every number computed from it. +-inf is refused when the argument has a range (a
    probability, an epsilon, a learning rate); unbounded ones (Hardtanh's min_val) may be infinite.
    """
    if not isinstance(v, numbers.Real) or isinstance(v, bool):
        raise OpTypeError(cell, f"'{name}' to be a float", f"{type(v).__name__} {v!r}")
    if math.isnan(v) or (math.isinf(v) and (lo is not None or hi is not None)):
        raise OpValueError(cell, f"'{name}' as a finite float", repr(v))
    bad = ((lo is not None and (v < lo or (lo_open and v == lo)))
           or (hi is not None and (v > hi or (hi_open and v == hi))))
    if bad:
        lb = "(" if lo_open else "["
        rb = ")" if hi_open else "]"
        raise OpValueError(cell, f"'{name}' in {lb}{lo}, {hi}{rb}", repr(v))
    return float(v)


def one_of(cell: str, name: str, v, allowed):
    if v not in allowed:
        raise OpValueError(cell, f"'{name}' in {list(allowed)}", repr(v))
    return v


def int_pair(cell: str, name: str, v, allow_four=False) -> tuple:
    """An int or a tuple of 2 positive ints -> (h, w)."""
    if isinstance(v, numbers.Integral) and not isinstance(v, bool):
        if v <= 0:
            raise OpValueError(cell, f"'{name}' > 0", repr(v))
        return (int(v), int(v))
    if isinstance(v, (tuple, list)) and len(v) == 2 and all(isinstance(a, numbers.Integral) and a > 0 for a in v):
        return (int(v[0]), int(v[1]))
    if allow_four and isinstance(v, (tuple, list)) and len(v) == 4 and all(isinstance(a, numbers.Integral) and a > 0
                                                                           for a in v):
        return (int(v[2]), int(v[3]))        # MindSpore's (1, 1, h, w) form
    raise OpValueError(cell, f"'{name}' as a positive int or a tuple of 2 positive ints", repr(v))


def tensor_input(cell: str, x, name="x") -> Tensor:
    if not isinstance(x, Tensor):
        raise OpTypeError(cell, f"input '{name}' to be a Tensor", type(x).__name__)
    return x
