"""Capturing one *segment*: the bytecode from an instruction to the next graph break (or the return).

A segment is captured from a frame state (frames.py) whose tensor leaves become the graph's params
(as Tracers of a fresh `BytecodeSession`) and whose number leaves become `Lazy` values. The
interpreter runs symbolically until it returns or breaks; then the frame (or the return value) is
flattened again and every leaf gets a *source* for run time:

* `("out", i)`  - output i of the segment's graph (a tensor computed by the segment, or a host
  call's result);
* `("in", j)`   - input leaf j, passed through unchanged (a tensor the segment did not touch, a
  Lazy number): no graph output, and the same Tensor object comes out, so an enclosing gradient
  still sees it;
* `("obj", x)`  - a concrete object that was made or read during capture (a Parameter loaded
  into a local, a tensor constant): kept by reference, as trace mode keeps captures.

The runner rebuilds the frame from those sources after running the graph, runs the break
instruction eagerly, and looks for the segment that continues from there (runner.py).

A segment also records what it assumed: the `Lazy` numbers it looked at (`used`) and the globals
it read, with their values. `Segment.guards_hold` checks them before the segment is reused.
"""
from __future__ import annotations

import sys
import types

from ....common.errors import user_frame
from ....common.tensor import Tensor
from ....ops.primitive import AbstractTensor
from ... import pytree
from ...run.levels import make_executor
from ...trace.cells import cell_body, is_jitted
from ...trace.environ_reads import EnvironGuard, recording
from ...trace.session import HostResult, TraceSession, _is_internal
from .breaks import is_symbolic
from .frames import Frame, const_token, fill_state, flatten_state, flatten_value
from .instructions import RUN_SYMBOLIC_CODE, Interpreter, Return, _MISSING, code_info
from .values import Lazy


class BytecodeSession(TraceSession):
    """A trace session whose nodes recorded straight from the interpreted function's bytecode are
    attributed to that function's line (there is no Python frame for it to find)."""

    capture_mode = "bytecode"

    def __init__(self, name, fn, fullgraph=False):
        super().__init__(name, fn, fullgraph)
        self.interp = None

    def execute(self, prim, inputs, attrs):
        n = len(self.builder.nodes)
        outs = super().execute(prim, inputs, attrs)
        self._locate(n)
        return outs

    def host_call(self, fn, args, kwargs, name):
        n = len(self.builder.nodes)
        r = super().host_call(fn, args, kwargs, name)
        self._locate(n)
        return r

    def _locate(self, n):
        interp, nodes = self.interp, self.builder.nodes
        if interp is None or n == len(nodes):
            return
        f = sys._getframe(2)
        while f is not None:
            code = f.f_code
            if code is RUN_SYMBOLIC_CODE:          # called by the interpreter itself, not by a nested function
                src = interp.where()
                for node in nodes[n:]:
                    node.source = src
                return
            if not _is_internal(code):
                return
            f = f.f_back


def _call_through(__callable, /, *args, **kwargs):
    """The top frame for callables that are not plain functions (partials, callable objects)."""
    return __callable(*args, **kwargs)


class Target:
    """The function whose bytecode is interpreted, how a jit call's arguments bind to it, and the
    capture settings. Methods are unbound (`self` becomes argument 0); a GRAPH_MODE Cell call is
    its `construct`; other callables go through `_call_through`."""

    def __init__(self, req):
        fn, prefix = self._resolve(req.fn, req.args)
        self.fn = fn
        self.prefix = prefix
        self.name = req.name
        self.source_fn = req.fn
        self.fullgraph = req.fullgraph
        self.jit_level = req.jit_level
        self.info = code_info(fn)

    @staticmethod
    def _resolve(fn, args):
        if isinstance(fn, types.MethodType) and isinstance(fn.__func__, types.FunctionType):
            return fn.__func__, (fn.__self__,)
        if fn is cell_body and args:                             # GRAPH_MODE compiles a Cell's call
            cell = args[0]
            construct = getattr(type(cell), "construct", None)
            if is_jitted(construct):                                 # a @jit-decorated construct
                construct = construct.capture_target()[0]
            if cell.__dict__.get("_plain_call") and isinstance(construct, types.FunctionType):
                return construct, ()
        if isinstance(fn, types.FunctionType):
            return fn, ()
        return _call_through, (fn,)

    def entry_frame(self, args, kwargs):
        bound = self.info.signature.bind(*self.prefix, *args, **kwargs)
        bound.apply_defaults()
        return Frame(dict(bound.arguments), dict(self.info.free_cells), [], None)


class Segment:
    """One captured segment (see the module docstring)."""

    def __init__(self, target, start, graph, param_leaves, sources, out_template, brk, used, globals_read):
        self.start = start                       # instruction index it starts at
        self.graph = graph                       # Graph, or None when it computes nothing
        self.param_leaves = param_leaves         # input leaf index of each graph param
        self.sources = sources                   # per output leaf: ("out", i) | ("in", j) | ("obj", x)
        self.out_template = out_template         # frame template at the break, or return-value template
        self.brk = brk                           # BreakInfo, or None when the segment returns
        self.used = used                         # {leaf index: token} of Lazy numbers it specialised on
        self.globals_read = globals_read         # {name: token}
        self.globals = target.info.globals
        self.environ = None                      # EnvironGuard: variables a continuation's capture read
        self.grad_splits: dict = {}              # graph/autodiff.py caches its splits here
        self.executor = None
        if graph is not None:
            self.executor = make_executor(graph, target.jit_level)

    @property
    def returns(self) -> bool:
        return self.brk is None

    def guards_hold(self, leaves) -> bool:
        for j, tok in self.used.items():
            if const_token(leaves[j]) != tok:
                return False
        g = self.globals
        for name, tok in self.globals_read.items():
            if const_token(g.get(name, _MISSING)) != tok:
                return False
        return self.environ is None or self.environ.failure() is None


def _aval(t):
    return AbstractTensor(tuple(t.shape), t.dtype)


def _run(target, session, frame, pc):
    # errors raised by ops called straight from the interpreted code name the caller's line (there
    # is no Python frame for the interpreted function): the interpreter re-points them
    outer_where = user_frame()
    interp = Interpreter(target.info, frame, pc, session=session, outer_where=outer_where)
    session.interp = interp
    with session.running():
        outcome = interp.run_symbolic()
    return interp, outcome


def capture_entry(target, args, kwargs):
    """Capture from the function's first instruction. Returns `(interp, outcome, session)`; the
    caller turns a return into a plain CaptureResult and a break into a Segment."""
    session = BytecodeSession(target.name, target.source_fn, target.fullgraph)
    leaves, template = pytree.flatten_call(args, kwargs)
    tracers = [session.param(_aval(t)) for t in leaves]
    a, kw = pytree.fill(template, tracers)
    frame = target.entry_frame(a, kw)
    try:
        interp, outcome = _run(target, session, frame, 0)
    except BaseException:
        session.finished = True
        raise
    return interp, outcome, session, frame, list(range(len(leaves)))


def capture_continuation(target, pc, template, leaves):
    """Capture from instruction `pc`, for a frame with this template and these leaves (concrete
    values, or - when speculating at compile time - the previous segment's Tracers)."""
    return capture_continuation_with_frame(target, pc, template, leaves)[0]


def capture_continuation_with_frame(target, pc, template, leaves):
    """`capture_continuation`, plus the symbolic frame at its end (for speculation)."""
    session = BytecodeSession(f"{target.name}@{target.info.lines[pc]}", target.source_fn, target.fullgraph)
    values, param_leaves = [], []
    for j, x in enumerate(leaves):
        if isinstance(x, Tensor):
            values.append(session.param(_aval(x)))
            param_leaves.append(j)
        else:
            values.append(Lazy(x, j))
    frame = fill_state(template, values, target.info.free_cells)
    # (a continuation is captured at run time, outside the jit's capture call: it records the
    # environment variables it reads itself - graph/trace/environ_reads.py)
    with recording() as rec:
        try:
            interp, outcome = _run(target, session, frame, pc)
        except BaseException:
            session.finished = True
            raise
        seg = make_segment(target, pc, interp, outcome, session, frame, param_leaves)
    seg.environ = EnvironGuard.from_recorder(rec)
    return seg, frame


def make_segment(target, start, interp, outcome, session, frame, param_leaves) -> Segment:
    """Finish a capture: outputs, sources and the rebuild template (see the module docstring)."""
    if isinstance(outcome, Return):
        template, out_leaves = flatten_value(outcome.value)
        brk = None
    else:
        template, out_leaves = flatten_state(frame, target.info.cellvars, lazy_numbers=False)
        brk = outcome
    builder = session.builder
    param_pos = {v.id: param_leaves[i] for i, v in enumerate(builder.params)}
    sources, outputs, out_ids = [], [], {}
    for x in out_leaves:
        if type(x) is Lazy:
            sources.append(("in", x.slot))
        elif is_symbolic(x):
            v = x.value if type(x) is HostResult else session.value_of(x)
            if v.id in param_pos:
                sources.append(("in", param_pos[v.id]))
            else:
                k = out_ids.get(v.id)
                if k is None:
                    k = out_ids[v.id] = len(outputs)
                    outputs.append(v)
                sources.append(("out", k))
        else:
            sources.append(("obj", x))
    session.finished = True
    graph = None
    if builder.nodes:
        graph = builder.finish(outputs)
        graph.notes.update(session.notes)
    used = {j: const_token(v) for j, v in interp.used.items()}
    globals_read = {n: const_token(v) for n, v in interp.globals_read.items()}
    return Segment(target, start, graph, param_leaves, sources, template, brk, used, globals_read)


__all__ = ["BytecodeSession", "Target", "Segment", "capture_entry", "capture_continuation",
           "capture_continuation_with_frame", "make_segment"]
