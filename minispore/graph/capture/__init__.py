"""Capture modes: how a Python function becomes a Graph. The registry and the shared contract.

A capture mode is ONE function, registered under a name:

    from minispore.graph.capture import register_capture_mode, CaptureResult
    register_capture_mode("ast", capture_ast)          # minispore.jit re-exports this

    def capture_ast(req: CaptureRequest) -> CaptureResult: ...

`CaptureRequest` carries the function, the call's args/kwargs (real Tensors: read only their
shapes/dtypes), a display name, `fullgraph` (True = anything that cannot be captured is an error
naming the line, MindSpore's STRICT syntax level) and the jit options.

The contract a mode must keep (the jit front door, the cache and the executors rely on it):

* **Params**: `result.graph.params` correspond one to one, in order, to the tensor leaves of
  `pytree.flatten_call(args, kwargs)`; every other argument is a Python constant the cache guards.
* **Outputs**: `result.graph.outputs` are flat; `result.out_template` (see pytree.py) rebuilds
  the function's return value from them. A graph output that is a Value with a tensor aval comes
  back as a Tensor; an OPAQUE value (a host call's result) as the Python object; constants as is.
* **Captures**: tensors the function reads but does not receive become graph captures
  (`GraphBuilder.capture`), read by reference at run time.
* **Autodiff**: record each primitive with `grad_state.record(...)` while `grad_state.depth > 0`
  and an input is tracked (as the eager executor does), so `grad` inside a captured function
  builds the backward part of the same graph. `capture_scope()` resets the depth to 0 during
  capture, so an enclosing PyNative gradient never sees capture-time tracers.
* **Nesting**: while a capture runs (`is_capturing()`), jitted functions and GRAPH_MODE Cells
  called from it are inlined, and Cells that must run on the host (optimizers) call
  `current_capture().host_call(fn, args, kwargs, name)`: a mode's session object implements it
  (emit a HOST_CALL node, or a graph break).
* **Graph breaks** (bytecode): list them in `result.breaks` and set `result.runner`, a callable
  `runner(args, kwargs) -> output` that takes over execution (run the graphs, and the eager parts
  between them). `result.graphs` lists every graph for `dump`/`explain`; `result.guards` adds
  mode-specific guards: callables `(args, kwargs) -> None | reason string`.

Until a mode is registered, asking for it falls back to "trace" with a one-time warning.

Building blocks (capture/trace.py) so a mode only handles what is new to it:

* `TraceSession(name, fn, fullgraph)`: `param(aval_or_tensor)` makes graph inputs (Tracers);
  `with session.running():` installs its executor, so tensor code - ops, Cells, `grad` - called on
  tracers records nodes (with source lines, inference at compile time, autodiff recording, host
  calls); `session.emit(IF | WHILE | CALL, inputs, attrs, out_avals)` adds a structural node and
  returns tracers for its outputs; `session.finish(out) -> (Graph, out_template)`.
* `with session.subgraph(name) as child:` traces a closed subgraph (an If branch, a While
  cond/body, a callee); tracers of enclosing sessions used inside are lifted into child params
  (`child.lifted`); `unify_lifted([(child, graph), ...])` gives sibling subgraphs one param list
  and returns the extra operands for the node. `CaptureError` (a TypeError) is the error for code
  that cannot be captured; `user_source()` finds the user's file and line.
* ir.GraphBuilder for graphs built without running Python; verify.verify checks any graph;
  interpret.interpret evaluates one op by op (for compile-time constant folding, tests).
"""
from __future__ import annotations

import contextlib
import warnings
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


_MODES: dict = {}
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


def warn_user(message, category=RuntimeWarning):
    """warnings.warn, attributed to the innermost frame of the user's code (not minispore's)."""
    from .trace import user_source
    src = user_source(2)
    if src is None:
        warnings.warn(message, category, stacklevel=2)
    else:
        warnings.warn_explicit(message, category, src[0], src[1], module=src[2])


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


__all__ = ["CaptureRequest", "CaptureResult", "GraphBreak", "register_capture_mode", "get_capture_mode",
           "registered_capture_modes", "is_capturing", "current_capture", "capture_scope", "add_capture_listener",
           "warn_user"]


from .environ_reads import recorded as _environ_recorded  # noqa: E402
from .trace import capture_trace as _capture_trace  # noqa: E402  (the built-in mode)

register_capture_mode("trace", _capture_trace)
from . import bytecode as _bytecode  # noqa: E402,F401  (bytecode helper) registers capture_mode="bytecode"

# (ast helper) the 'ast' mode, MindSpore's default: parses the source (capture/ast_mode/)
from .ast_mode import capture_ast as _capture_ast  # noqa: E402

register_capture_mode("ast", _capture_ast)
