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

Where things are. The modes' shared building blocks are one layer down, in graph/trace/ (so the
modules the modes use - autodiff, interpret, lazy_inline, the guards, the compile cache, DryRun -
can use them without importing a mode); this package holds the modes that build on them:

* ../trace/contract.py  CaptureRequest / CaptureResult / GraphBreak, the stack of active captures
                  (`is_capturing`, `current_capture`, `capture_scope`, `add_capture_listener`)
* ../trace/user_code.py, cells.py, environ_reads.py   the user's file and line; the Cell-call
                  protocol; environment variables read during a capture, guarded
* ../trace/session.py  TraceSession and Tracer, and the trace mode (`capture_trace`)
* ast_mode/, bytecode/   the other two built-in modes
* registry.py     the mode table: the built-in modes are listed there explicitly;
                  `register_capture_mode` / `get_capture_mode`

Building blocks (graph/trace/session.py) so a mode only handles what is new to it:

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

from ..trace.contract import (CaptureRequest, CaptureResult, GraphBreak, add_capture_listener, capture_scope,
                       current_capture, is_capturing)
from ..trace.user_code import user_source, warn_user
from .registry import get_capture_mode, register_capture_mode, registered_capture_modes

__all__ = ["CaptureRequest", "CaptureResult", "GraphBreak", "register_capture_mode", "get_capture_mode",
           "registered_capture_modes", "is_capturing", "current_capture", "capture_scope", "add_capture_listener",
           "warn_user", "user_source"]
