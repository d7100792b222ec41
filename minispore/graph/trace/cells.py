"""How a capture meets Cells and jitted functions, without knowing `minispore.jit`.

A Cell called while a capture runs is inlined: its Python runs (or, in the ast mode, its
`construct` is interpreted) on tracers. A Cell that must run on the host (an optimizer) becomes a
host call of `HostCellCall(cell)`. GRAPH_MODE compiles a Cell's whole call as the function
`cell_body(cell, *args)`, so a capture mode that sees `req.fn is cell_body` knows argument 0 is
the Cell. All of that is defined here, below the capture modes, so that the modes, lazy_inline
and the compile cache (which stores host calls) can use it; jit.py, one layer up, builds on it.

A *jitted callable* (what `ms.jit` returns, plain or bound to an instance) is recognised by an
attribute of its type, `__minispore_jit__`, and says what it compiles with
`capture_target() -> (function, leading_args)`: a capture inlines `function(*leading_args, *args)`
instead of compiling a nested graph.
"""
from __future__ import annotations

JIT_MARK = "__minispore_jit__"


def run_cell_python(cell, args, kwargs):
    """Cell.__call__'s own body (hooks, mixed precision, custom bprop), without graph mode."""
    if cell.__dict__.get("_plain_call"):
        return cell.construct(*args, **kwargs)
    return cell._call_slow(args, kwargs)


def cell_body(cell, *args, **kwargs):
    """The function GRAPH_MODE compiles for a Cell: its call, the Cell being argument 0."""
    return run_cell_python(cell, args, kwargs)


class HostCellCall:
    """The function a host call runs for a Cell: its Python call, outside graph mode."""

    __slots__ = ("cell",)

    def __init__(self, cell):
        self.cell = cell

    def __call__(self, *args, **kwargs):
        return run_cell_python(self.cell, args, kwargs)


_jitted_types: dict = {}     # type -> bool: asked once per type (captures check every call they meet)


def is_jitted(obj) -> bool:
    """Is `obj` a jitted callable (its type carries `__minispore_jit__`)?"""
    t = type(obj)
    r = _jitted_types.get(t)
    if r is None:
        r = _jitted_types[t] = getattr(t, JIT_MARK, None) is not None
    return r


def jitted_target(obj):
    """`(function, leading_args)` a jitted callable compiles, or None when `obj` is not jitted."""
    if not is_jitted(obj):
        return None
    return obj.capture_target()


__all__ = ["run_cell_python", "cell_body", "HostCellCall", "is_jitted", "jitted_target", "JIT_MARK"]
