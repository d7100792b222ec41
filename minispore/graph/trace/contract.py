"""What every capture mode receives and returns, and which capture is running now.

The contract itself (what a mode must keep) is written out in capture/__init__.py. This module
holds its data types and the stack of active captures, and depends on nothing else in graph/:
the trace session, the modes (trace, ast_mode, bytecode) and the registry all build on it.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

from ...common import grad_state


@dataclass
class CaptureRequest:
    fn: object
    args: tuple
    kwargs: dict
    name: str
    fullgraph: bool = False
    jit_level: str = "O0"
    options: dict = field(default_factory=dict)


@dataclass
class GraphBreak:
    """Where and why a bytecode capture stopped: the code there runs eagerly."""
    reason: str
    filename: str
    lineno: int

    def __str__(self):
        return f"{self.filename}:{self.lineno}: {self.reason}"


@dataclass
class CaptureResult:
    graph: object                                   # the Graph to run (None if `runner` drives execution)
    out_template: object = None
    graphs: list = field(default_factory=list)      # every graph, for dump/explain
    breaks: list = field(default_factory=list)      # GraphBreak, in order
    runner: object = None                           # runner(args, kwargs) -> output, or None
    guards: list = field(default_factory=list)      # extra guards: (args, kwargs) -> None | reason
    mode: str = ""

    def __post_init__(self):
        if not self.graphs and self.graph is not None:
            self.graphs = [self.graph]


# -- the active capture --------------------------------------------------------------------------
_active: list = []
_listeners: list = []        # callables(active: bool), told when a capture starts or ends


def add_capture_listener(fn):
    """Call `fn(is_capturing())` whenever a capture starts or ends (jit keeps the Cell hook flag)."""
    _listeners.append(fn)


def is_capturing() -> bool:
    return bool(_active)


def current_capture():
    """The innermost active capture session (it implements `host_call`), or None."""
    return _active[-1] if _active else None


@contextlib.contextmanager
def capture_scope(session):
    """Run a capture: mark `session` active, and hide any enclosing PyNative gradient.

    An enclosing `grad` (depth > 0) must not record capture-time work on its tape; the depth is
    set to 0 for the capture and restored after. Gradients taken *inside* the captured function
    raise it again themselves and are recorded into the graph.
    """
    saved_depth, saved_needs = grad_state.depth, grad_state.needs_input_grad
    grad_state.depth, grad_state.needs_input_grad = 0, None
    _active.append(session)
    for fn in _listeners:
        fn(True)
    try:
        yield session
    finally:
        _active.pop()
        grad_state.depth, grad_state.needs_input_grad = saved_depth, saved_needs
        for fn in _listeners:
            fn(bool(_active))


__all__ = ["CaptureRequest", "CaptureResult", "GraphBreak", "is_capturing", "current_capture", "capture_scope",
           "add_capture_listener"]
