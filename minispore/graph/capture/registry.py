"""The table of capture modes: name -> `fn(CaptureRequest) -> CaptureResult`.

The built-in modes are listed here, in one place, by importing them: the modes themselves never
import this module (they build on graph/trace/), so registering is an explicit step and
not a side effect of import order. `register_capture_mode(name, fn)` adds or replaces one
(`minispore.jit` re-exports it for users' own modes).
"""
from __future__ import annotations

from .ast_mode import capture_ast
from .bytecode import capture_bytecode
from ..trace.environ_reads import recorded as _environ_recorded
from ..trace.session import capture_trace
from ..trace.user_code import warn_user

_MODES: dict = {"trace": capture_trace, "bytecode": capture_bytecode, "ast": capture_ast}
_warned_fallback: set = set()


def register_capture_mode(name: str, fn):
    """Make `jit(capture_mode=name)` use `fn(CaptureRequest) -> CaptureResult`."""
    if not callable(fn):
        raise TypeError(f"register_capture_mode: expected a callable for '{name}', got {type(fn).__name__}")
    _MODES[name] = fn


def registered_capture_modes() -> list:
    return sorted(_MODES)


def get_capture_mode(name: str):
    """The capture function for `name`; an unregistered mode falls back to trace (warned once).

    Whatever the mode, the function returned records the environment variables the capture reads
    and adds a guard on them to the result (environ_reads.py): a graph never silently keeps a
    value read from `os.environ` after it changed, in this process or (compile cache) another."""
    fn = _MODES.get(name)
    if fn is None:
        if name not in _warned_fallback:
            _warned_fallback.add(name)
            warn_user(f"jit: capture_mode='{name}' is not available yet in this minispore build; "
                      f"using capture_mode='trace' (Python control flow is specialised at compile time)")
        fn, name = _MODES["trace"], "trace"
    return _environ_recorded(fn), name


__all__ = ["register_capture_mode", "registered_capture_modes", "get_capture_mode"]
