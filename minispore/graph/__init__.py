"""Graph mode: one IR, capture modes, verification, execution (ARCHITECTURE.md §3).

Read in this order:

* ir.py          Value / Node / Graph (SSA, shapes and dtypes on every value), structural ops
                 (If, While, Call, HostCall), GraphBuilder
* printer.py     the text form (`format_graph`); `dump`
* verify.py      the invariants (SSA, types re-inferred, subgraph signatures)
* pytree.py      how call arguments and results flatten into graph inputs/outputs
* trace/         what every capture records a graph with: the contract's types and the stack of
                 active captures, TraceSession and Tracer (and the trace mode), how a capture
                 meets Cells and jitted functions (trace/cells.py: graph/ never imports
                 minispore.jit)
* capture/       how Python becomes a graph: the modes `trace`, `ast` and `bytecode`, listed in
                 capture/registry.py (`register_capture_mode` adds more); the contract is in
                 capture/__init__.py
* streams.py     which nodes may run at once on several streams (the scheduler)
* run/           how a graph runs: its plan (slots, steps, frees), the one step loop, and the
                 strategies over them - heap, arena (memory/), several streams, O1 (passes/fusion
                 first), O2 (one generated function); run/__init__.py has the reading order
* guards/        what a graph may depend on, written once (guards/rule.py), the one walk of a
                 Cell tree, StateGuard, the remembered layer signatures, and the stable rendering
                 used for on-disk keys
* cache.py       the in-memory compiled-graph cache over those guards (recompile reasons, limit)
* lazy_inline.py one shared subgraph per repeated layer (@lazy_inline); the layer signatures it
                 shares by are guards/layer_state.py
* compile_cache/ graphs stored on disk for a later process: key.py, serialize.py, files.py
* passes/        graph-to-graph rewrites (control-flow inlining, fusion for O1)
* codegen/       C code for fused groups and O2's generated function
* memory/        lifetimes, the SOMAS-style planner, rematerialisation
* dryrun/        compile without running: predicted memory, communication and time
* interpret.py   evaluate a graph through the current executor
* costs.py       FLOPs and bytes per node (DryRun's reports, the stream scheduler's estimates)
* cache_settings.py  where compiled graphs and kernels live on disk
* autodiff.py    a compiled graph as one node of a PyNative tape (forward/backward split)
* explain.py     `dump(fn, *args)` and `explain(fn, *args)`

The public front door is `minispore.jit` (jit.py, one layer up).
"""
from .ir import (CALL, HOST_CALL, IF, OPAQUE, WHILE, Graph, GraphBuilder, Node, Slot, Value)
from .printer import GraphText, format_graph
from .verify import GraphVerifyError, verify
from .run import O0Executor
from .capture import (CaptureRequest, CaptureResult, GraphBreak, register_capture_mode,
                      registered_capture_modes)
from .trace import CaptureError, Tracer
from .capture.bytecode import GraphBreakError
from .interpret import interpret
from .explain import ExplainOutput, dump, explain

__all__ = ["Graph", "GraphBuilder", "Node", "Value", "Slot", "IF", "WHILE", "CALL", "HOST_CALL", "OPAQUE",
           "format_graph", "GraphText", "verify", "GraphVerifyError", "O0Executor", "CaptureRequest",
           "CaptureResult", "GraphBreak", "register_capture_mode", "registered_capture_modes", "CaptureError",
           "GraphBreakError", "Tracer", "interpret", "dump", "explain", "ExplainOutput"]
