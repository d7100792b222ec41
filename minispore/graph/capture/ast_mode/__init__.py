"""capture_mode="ast" (MindSpore's default, "PSJit"): compile a function from its source.

    @ms.jit                                   # capture_mode="ast"
    def f(x, n):
        if x.sum() > 0:                       # a tensor condition -> an If node
            y = x * 2
        else:
            y = -x
        for i in range(n):                    # a Python constant -> unrolled (n is guarded)
            y = y + i
        while y.max() < 100:                  # a tensor condition -> a While node
            y = y * 2
            if y.min() < -5:                  # an exit under a tensor condition -> exit flags
                break
        return y

How (read in this order):

* source.py        the function's AST (inspect.getsource + textwrap.dedent + ast.parse), with the
                   real file's line numbers; which code is parsed and which is merely called.
* interpreter.py   an abstract interpreter over the AST: Python values are computed at compile time
                   (constants), tensors are the trace mode's Tracers (ops, Cells and methods are
                   recorded exactly as in trace mode), statements are handled one by one; calls.
* expressions.py   the expression half of the interpreter; frames.py: variables, interpreted closures.
* control_flow.py  `if`/`while` on tensor values -> If/While nodes with closed subgraphs; the
                   gradient of If.
* loop_exits.py    break/continue/return under a tensor condition: exit flags, and the code an
                   exit skips runs under an If on them (control_flow.guard).
* fallback.py      what is not compiled runs as Python (JIT Fallback), at compile time or run time;
                   with fullgraph=True it is an error naming the construct, function, file and line.
* session.py       the capture session (trace session + regions for subgraphs + source lines).

After capture, graph/passes/inline_control_flow.py folds constant conditions and inlines the If
nodes they decide (and Call nodes). The result honours the capture contract (capture/__init__.py):
params are the tensor leaves of the arguments, Python arguments and the globals/closure values
the code read are guarded, Parameters are captures read by reference, gradients taken inside the
function are part of the graph.

Differences from MindSpore worth knowing: Python side effects outside `print` (appending to a list,
setting attributes) happen once, at compile time; a value computed by fallback code at run time is
an opaque Python object that graph ops cannot consume; While nodes are not differentiable.

Supported Python versions: 3.9 to 3.13 (the `ast` node types used are stable across them; tested on
3.11). Newer syntax (`match`, `try/except*`, type aliases) is treated as unsupported statements.
"""
from __future__ import annotations

from ....common.errors import user_frame
from ....ops.primitive import AbstractTensor, set_executor
from ... import pytree
from ...ir import CALL, IF, WHILE
from ...trace.cells import cell_body
from ...trace.contract import CaptureResult, capture_scope
from ...trace.session import Tracer
from .interpreter import Interpreter, MAX_UNROLL
from .session import AstCaptureError, AstSession, where

INLINE_OPTION = "inline_control_flow"      # CaptureRequest.options key: False keeps the raw If nodes


def capture_ast(req) -> CaptureResult:
    """The 'ast' capture mode (see the module docstring)."""
    interp = Interpreter(req.name, req.fullgraph)
    session = AstSession(req.name, req.fn, req.fullgraph, interp)
    interp.session = session
    interp._outer_where = user_frame()
    leaves, template = pytree.flatten_call(req.args, req.kwargs)
    tracers = [Tracer.make(session.builder.param(AbstractTensor(t.shape, t.dtype)), session) for t in leaves]
    args, kwargs = pytree.fill(template, tracers)
    try:
        with capture_scope(session):
            saved = set_executor(session.execute)
            try:
                if req.fn is cell_body:                   # GRAPH_MODE compiles a Cell's call
                    out = interp.call_cell(args[0], args[1:], kwargs)
                else:
                    out = interp.call(req.fn, tuple(args), kwargs)
            finally:
                set_executor(saved)
                overwritten = session.restore_captured_storage()
            if overwritten:
                raise AstCaptureError("set_data", "captured tensors (Parameters) to keep their storage during "
                                      "capture", f"a traced value assigned to {', '.join(overwritten)}; the "
                                      f"assignment was undone. Update parameters with an optimizer (it runs as "
                                      f"a host call) or return the new value", where=where(interp.location()))
            graph, out_template = session.finish(out)
    finally:
        session.finished = True
        interp.active = False
    if req.options.get(INLINE_OPTION, True) and _has_control_flow(graph):
        from ...passes.inline_control_flow import inline_control_flow
        graph = inline_control_flow(graph)
    return CaptureResult(graph=graph, out_template=out_template, guards=interp.guards(), mode="ast")


def _has_control_flow(graph) -> bool:
    return any(n.op is IF or n.op is CALL or n.op is WHILE for g in graph.all_graphs() for n in g.nodes)


__all__ = ["capture_ast", "AstCaptureError", "MAX_UNROLL", "INLINE_OPTION"]
