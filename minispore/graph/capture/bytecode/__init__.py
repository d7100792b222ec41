"""capture_mode="bytecode": TorchDynamo in miniature - a symbolic interpreter over the function's
bytecode, with graph breaks where Python cannot be captured.

    @ms.jit(capture_mode="bytecode")
    def f(x):
        y = ops.relu(x) * 2           # graph 0
        print("y:", y)                # graph break: print runs eagerly, on the real y
        if y.sum() > 0:               # graph break: the branch is decided eagerly
            return y - 1              # graph 1 (then) ... captured when first taken
        return y + 1                  # graph 2 (else)

Supported CPython versions: 3.11 and 3.12 (instructions.py). On other versions the function runs
eagerly with a warning, or raises with `fullgraph=True`.

**Design.** There is no PEP 523 frame hook in pure Python, so `jit` drives the interpreter itself:

1. *Capture* (instructions.py). The decorated function's bytecode (`dis.get_instructions`) is
   run by a stack machine whose locals and stack hold ordinary Python values (constants, baked
   into the graph and guarded) and, for tensors, the trace mode's Tracers. Only the *top* frame is
   interpreted: a call into another Python function (a helper, a Cell, `value_and_grad(...)`)
   simply calls it with the Tracers, which records its ops exactly as trace mode does. This keeps
   the interpreter small, and still breaks where it must: a nested function that needs a tensor's
   value (`.asnumpy()`, an `if` on a tensor) raises the Tracer's CaptureError, and the *whole call*
   in the top frame becomes the graph break. (A `print` *inside* a nested function therefore runs
   once, at capture, on the Tracer - as in trace mode; a `print` in the top frame is a break.)

2. *Graph breaks* (breaks.py). An unsupported call or instruction - `print`, `.asnumpy()`,
   `.item()`, `float(t)`, a call into another library, a branch (`POP_JUMP_IF_*`) on a tensor, a
   tensor stored into an object attribute or a global - ends the segment *before* that
   instruction. The graph so far is finished; its outputs are the live tensors of the frame
   (locals, cells, stack), found by flattening the frame (frames.py).

3. *Segments and the runner* (segments.py, runner.py). At run time the runner executes
   `[graph 0, eager step 0, graph 1, eager step 1, ...]`: run a segment's graph, rebuild the
   frame from its outputs, execute the break instruction eagerly (the same interpreter on
   concrete values - `bool(cond)` picks the branch), then continue with the segment that resumes
   at the instruction reached. Continuations are captured *lazily*, the first time they are
   reached, from the concrete frame (its tensors become the new graph's params) and cached by
   (instruction, frame key): a branch captures the side taken, a tensor `while` loop reuses one
   segment per iteration. This replaces Dynamo's generated resume functions, which pure Python
   cannot make. Numbers produced by eager steps (`v = t.item()`) stay `Lazy` (values.py): a
   continuation specialises on one - and guards it - only if its code looks at it.

4. *Guards*: the jit cache guards the entry segment (argument shapes/dtypes, Python constants,
   globals and closures); `result.guards` adds the globals the interpreted bytecode read. Each
   continuation guards its own state key, the Lazy numbers it used and the globals it read; a
   failed guard captures again (up to a limit, then the rest runs eagerly).

5. *Whole-function fallbacks*: generators, coroutines, `try`/`except`/`finally`/`with` blocks and
   opcodes outside the interpreter's table cannot be resumed by this interpreter, so such a
   function runs eagerly as a whole (one graph break at the offending line; an error with
   `fullgraph=True`).

`minispore.graph.explain(jitted_f, *args)` lists the graphs and the breaks (reason, file:line).
At compile time it knows the entry segment and what follows a `print`; segments after a branch or
after a break whose result is used appear once a call has reached them. `fullgraph=True` turns
the first break into a `GraphBreakError` naming the line.

A function with no break compiles to one ordinary graph (no runner): the jit front door runs it
like a trace-mode graph, including graph autodiff under an enclosing gradient.

**Known limits** (each follows from interpreting only the top frame, and each is documented
behaviour rather than a silent difference):

* Python inside a *nested* call runs once, at capture (trace semantics): a `print` there prints
  the Tracer. On 3.11 a list comprehension is such a nested call (3.12 inlines it, so a `print`
  in it is a break). If a nested call is abandoned at a graph break (it needed a tensor's value),
  the Python side effects it made before that point happen again when it runs eagerly.
* Lists and dicts that live across a break are rebuilt: another object holding the same list
  sees what the captured code appended only as of capture time (graph mode's rule for side
  effects on outer objects). Tensors that a *nested* function stored in an object before a break
  are Tracers (using them raises the "escaped tracer" error); in the top frame, storing a tensor
  into an attribute, a global or a Parameter is itself a break, so those hold real tensors.
* A Python generator iterated across a break keeps its own hidden state and is not supported
  (tuples, lists, ranges, dicts, tensors and `zip`/`enumerate`/`map` over them are).
"""
from __future__ import annotations

import sys

from ...trace.contract import CaptureResult, GraphBreak
from ...trace.user_code import warn_user
from .breaks import BreakInfo, GraphBreakError
from .frames import const_token
from .instructions import SUPPORTED_VERSIONS, Return, _MISSING, version_supported
from .runner import CONTINUATION_LIMIT, Runner
from .segments import Target, capture_entry, make_segment

_warned: set = set()


class GlobalsReadGuard:
    """Guard: the globals the interpreted bytecode read still have the values (or identities) it saw."""

    def __init__(self, globals_dict, read: dict):
        self.globals = globals_dict
        self.tokens = {name: const_token(v) for name, v in read.items()}

    def __call__(self, args, kwargs):
        g = self.globals
        for name, tok in self.tokens.items():
            if const_token(g.get(name, _MISSING)) != tok:
                return f"global '{name}' read by the bytecode changed"
        return None


def _fullgraph_error(name, reason, filename, lineno, func):
    return GraphBreakError(f"jit({name})", "code that compiles into one graph (fullgraph=True)",
                           f"a graph break: {reason}; drop fullgraph=True to run that part eagerly",
                           where=f"{filename}:{lineno} in {func}")


def _eager(req, reason, filename, lineno, func):
    """The whole function runs eagerly (see the module docstring, point 5)."""
    if req.fullgraph:
        raise _fullgraph_error(req.name, reason, filename, lineno, func)
    key = (filename, lineno, reason)
    if key not in _warned:
        _warned.add(key)
        warn_user(f"jit: '{req.name}' runs eagerly: {reason} ({filename}:{lineno})")
    fn = req.fn

    def run_eagerly(args, kwargs):
        return fn(*args, **kwargs)

    return CaptureResult(graph=None, breaks=[GraphBreak(reason, filename, lineno)], runner=run_eagerly,
                         mode="bytecode")


def _code_location(fn):
    code = getattr(getattr(fn, "__func__", fn), "__code__", None)
    if code is None:
        return "<unknown>", 0, getattr(fn, "__name__", type(fn).__name__)
    return code.co_filename, code.co_firstlineno, code.co_name


def capture_bytecode(req) -> CaptureResult:
    """The 'bytecode' capture mode (see the module docstring)."""
    if not version_supported():
        versions = ", ".join(f"{a}.{b}" for a, b in SUPPORTED_VERSIONS)
        return _eager(req, f"capture_mode='bytecode' supports CPython {versions}, not "
                           f"{sys.version_info[0]}.{sys.version_info[1]}", *_code_location(req.fn))
    target = Target(req)
    info = target.info
    if info.unsupported is not None:
        reason, line = info.unsupported
        return _eager(req, reason, info.filename, line, info.name)
    interp, outcome, session, frame, params = capture_entry(target, req.args, req.kwargs)
    guards = [GlobalsReadGuard(info.globals, interp.globals_read)] if interp.globals_read else []
    if isinstance(outcome, Return):                  # no break: one ordinary graph
        graph, out_template = session.finish(outcome.value)
        return CaptureResult(graph=graph, out_template=out_template, guards=guards, mode="bytecode")
    if req.fullgraph:
        session.finished = True
        raise _fullgraph_error(req.name, outcome.reason, outcome.filename, outcome.lineno, info.name)
    entry = make_segment(target, 0, interp, outcome, session, frame, params)
    result = CaptureResult(graph=None, graphs=[], breaks=[], guards=guards, mode="bytecode")
    runner = Runner(target, entry, result)
    runner.speculate(entry, frame)
    result.runner = runner
    return result


__all__ = ["capture_bytecode", "GraphBreakError", "BreakInfo", "SUPPORTED_VERSIONS", "CONTINUATION_LIMIT",
           "GlobalsReadGuard"]
