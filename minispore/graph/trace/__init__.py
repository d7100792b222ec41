"""The trace: the building blocks every capture mode records a graph with (below the modes).

A capture mode (capture/: the mode table, the ast and bytecode modes) turns a Python function into
a Graph; what it records with lives here, one layer down, so that the modules the modes use -
autodiff, interpret, lazy_inline, the guards, the compile cache, DryRun - can use it too without
importing a mode. The contract a mode keeps is written out in capture/__init__.py.

* contract.py       CaptureRequest / CaptureResult / GraphBreak, the stack of active captures
                    (`is_capturing`, `current_capture`, `capture_scope`, `add_capture_listener`)
* user_code.py      `user_source()`, the user's file and line; `warn_user`
* cells.py          the Cell-call protocol (`run_cell_python`, `cell_body`, `HostCellCall`) and how
                    a jitted callable is recognised (`__minispore_jit__`, `jitted_target`)
* environ_reads.py  environment variables read during a capture, guarded
* session.py        `TraceSession` and `Tracer` (the building blocks, capture/__init__.py lists
                    them), and the trace mode itself, `capture_trace` (JAX's jit)

Each module imports only those above it in this list, never this package.
"""
from __future__ import annotations

from .contract import (CaptureRequest, CaptureResult, GraphBreak, add_capture_listener, capture_scope,
                       current_capture, is_capturing)
from .user_code import user_source, warn_user
from .session import (CaptureError, HostResult, SymbolicArray, TraceSession, Tracer, capture_trace, host_call,
                      unify_lifted)

__all__ = ["CaptureRequest", "CaptureResult", "GraphBreak", "add_capture_listener", "capture_scope",
           "current_capture", "is_capturing", "user_source", "warn_user", "CaptureError", "HostResult",
           "SymbolicArray", "TraceSession", "Tracer", "capture_trace", "host_call", "unify_lifted"]
