"""minispore's user-facing errors.

Every error names the op, what was expected, what was got, and where in the *user's* code the
call came from (the first stack frame outside the minispore package). They subclass the matching
built-in so `except ValueError` keeps working.
"""
from __future__ import annotations

import os
import sys

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def user_frame() -> str:
    """'file.py:LINE in func' of the innermost frame that is not minispore's own code."""
    f = sys._getframe(1)
    while f is not None:
        fn = f.f_code.co_filename
        # skip minispore's own frames and generated dunder methods (a dataclass __init__ is '<string>')
        generated = fn.startswith("<") and f.f_code.co_name.startswith("__")
        if not generated and not os.path.abspath(fn).startswith(_PKG_DIR + os.sep):
            return f"{fn}:{f.f_lineno} in {f.f_code.co_name}"
        f = f.f_back
    return "<minispore internals>"


class MinisporeError(Exception):
    """Base of all minispore errors."""


class _OpErrorMixin:
    def __init__(self, op: str, expected: str, got: str, where: str | None = None):
        self.op, self.expected, self.got = op, expected, got
        self.where = where if where is not None else user_frame()
        super().__init__(f"For '{op}', expected {expected}, but got {got}. (at {self.where})")


class OpValueError(_OpErrorMixin, MinisporeError, ValueError):
    """Bad value or shape given to an op."""


class OpTypeError(_OpErrorMixin, MinisporeError, TypeError):
    """Bad type or dtype given to an op."""


class OpIndexError(_OpErrorMixin, MinisporeError, IndexError):
    """Index out of range."""


class MinisporeRuntimeError(MinisporeError, RuntimeError):
    """Runtime failure inside minispore (autodiff, checkpoints, backends)."""


class MissingExtraError(MinisporeError, ImportError):
    """An optional dependency is missing; names the extra to install."""

    def __init__(self, module: str, extra: str, feature: str):
        super().__init__(f"{feature} needs the optional package '{module}'. "
                         f"Install it with: pip install 'minispore[{extra}]'")


def require(module: str, extra: str, feature: str):
    """Import an optional dependency or raise MissingExtraError naming the extra."""
    import importlib
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise MissingExtraError(module, extra, feature) from e
