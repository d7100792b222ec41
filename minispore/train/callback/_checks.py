"""Argument checks shared by the callbacks (MindSpore's Validator.check_* in minispore errors)."""
from __future__ import annotations

import numbers

from ...common.errors import OpTypeError, OpValueError


def int_arg(op: str, name: str, value, minimum: int = 0):
    if not isinstance(value, numbers.Integral) or isinstance(value, bool):
        raise OpTypeError(op, f"'{name}' to be an int", f"{type(value).__name__} {value!r}")
    if value < minimum:
        raise OpValueError(op, f"'{name}' >= {minimum}", repr(value))
    return int(value)


def bool_arg(op: str, name: str, value):
    if not isinstance(value, bool):
        raise OpTypeError(op, f"'{name}' to be a bool", f"{type(value).__name__} {value!r}")
    return value
