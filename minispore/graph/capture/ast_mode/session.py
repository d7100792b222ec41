"""The ast mode's capture session: a trace session that knows about subgraphs and source lines.

The ast mode records primitives exactly as trace mode does (`TraceSession.execute`: the
primitive's own inference rule, a node, Tracers for the outputs, the autodiff tape when a gradient
is running). What it adds:

* **Regions.** The branches of a tensor `if` and the condition and body of a tensor `while` are
  captured as separate, *closed* subgraphs, each by a child session. When code inside a region
  uses a tensor that belongs to an enclosing session (an outer variable, a Parameter, a value
  computed before the `if`), the child *lifts* it: it becomes a parameter of the subgraph, and the
  outer value becomes an operand of the If/While node. Several regions of one node are closed
  together (`close_regions`) so they take the same parameters in the same order. Subgraphs never
  hold captures: Parameters read inside a branch are operands, captured once by the top graph.
* **Source lines.** Nodes are attributed to the line of the *interpreted* function being
  evaluated (the interpreter runs in minispore's own frames, so the trace mode's stack walk would
  name the jit caller instead).
* **Host calls** (JIT Fallback at run time) accept results of other host calls as arguments, and
  `print` is allowed even with fullgraph=True (MindSpore compiles print into a Print node).
"""
from __future__ import annotations

import os
import sys

from ....common.tensor import Tensor
from ....ops.primitive import AbstractTensor, set_executor
from ... import pytree
from ...ir import HOST_CALL, OPAQUE, Graph, Value
from ...trace.contract import capture_scope
from ...trace.session import CaptureError, HostResult, SymbolicArray, Tracer, TraceSession, _data_error, _is_internal

_HERE = os.path.dirname(os.path.abspath(__file__))
# frames of these files evaluate user code: an op called from them belongs to the interpreted line
_INTERPRETING = {os.path.join(_HERE, f) for f in ("interpreter.py", "expressions.py", "control_flow.py",
                                                  "fallback.py")}


class AstCaptureError(CaptureError):
    """capture_mode='ast' cannot compile this code (or fullgraph=True forbids the fallback)."""


def where(loc) -> str:
    return f"{loc[0]}:{loc[1]} in {loc[2]}" if loc else "<unknown>"


def unsupported(what, loc, hint="drop fullgraph=True to run it in Python (JIT Fallback)") -> AstCaptureError:
    """The fullgraph=True error for a construct: names it, the function, the file and the line."""
    return AstCaptureError("jit", "Python that capture_mode='ast' compiles into the graph (fullgraph=True)",
                           f"{what} in function '{loc[2]}'; {hint}", where=where(loc))


def is_symbolic(x) -> bool:
    return isinstance(x, Tensor) and type(x._data) is SymbolicArray


def is_dynamic_leaf(x) -> bool:
    """A value that exists only when the graph runs: a traced tensor or a host call's result."""
    return type(x) is HostResult or (isinstance(x, Tensor) and type(x._data) is SymbolicArray)


def contains_opaque(x) -> bool:
    t = type(x)
    if t is HostResult:
        return True
    if t is tuple or t is list:
        return any(contains_opaque(v) for v in x)
    if t is dict:
        return any(contains_opaque(v) for v in x.values())
    return False


def aval_of(x):
    if type(x) is HostResult:
        return OPAQUE
    return AbstractTensor(x.shape, x.dtype)


class AstSession(TraceSession):
    """One graph being captured by the ast mode (the top graph, or a region's subgraph)."""

    capture_mode = "ast"

    def __init__(self, name, fn, fullgraph, interp, parent=None):
        super().__init__(name, fn, fullgraph, parent=parent)
        self.interp = interp
        if parent is not None:
            self.notes = parent.notes     # notes (e.g. custom_bprop) belong to the whole capture
        self.explicit: list = []          # params bound on purpose (loop carry, backward operands)
        self.free: dict = {}              # key -> (outer object, param Value): free values used here
        self.defer_raise = False          # True in If branches: `raise` becomes the branch's outputs
        self.raise_info = None            # (exception, cause) of a deferred raise
        self._n_children = 0

    def child(self, kind) -> "AstSession":
        root = self
        while root.parent is not None:
            root = root.parent
        root._n_children += 1
        return AstSession(f"{root.name}.{kind}_{root._n_children - 1}", self.fn, self.fullgraph, self.interp, self)

    def _is_ancestor(self, session) -> bool:
        s = self.parent
        while s is not None:
            if s is session:
                return True
            s = s.parent
        return False

    # -- values -----------------------------------------------------------------------------------
    def value_of(self, x) -> Value:
        if type(x) is HostResult:
            if x.session is self:
                return x.value
            if not self._is_ancestor(x.session):
                raise CaptureError(f"{x.name} (host call)", "a value of this graph",
                                   "the result of a host call from another graph", where=where(self.location()))
            return self._lift_free(("v", x.value.id), x, OPAQUE)
        d = x._data
        if type(d) is SymbolicArray:
            if d.session is self:
                if type(x) is Tensor:
                    x.__class__ = Tracer          # a storage copy made by autodiff (see trace/session.py)
                return d.value
            if not self._is_ancestor(d.session):
                raise _data_error("jit", d.session)
            return self._lift_free(("v", d.value.id), x, d.value.aval)
        if self.parent is None:
            return super().value_of(x)              # a capture (read by reference at run time)
        return self._lift_free(("t", id(x)), x, AbstractTensor(x.shape, x.dtype))

    def _lift_free(self, key, obj, aval) -> Value:
        hit = self.free.get(key)
        if hit is None:
            hit = self.free[key] = (obj, Value(aval, "param", name=getattr(obj, "name", None)
                                                 if isinstance(obj, Tensor) and not is_symbolic(obj) else None))
        return hit[1]

    def bind(self, obj):
        """An explicit parameter standing for `obj` inside this region (not shared with lifting)."""
        p = Value(aval_of(obj), "param")
        self.explicit.append(p)
        return self.wrap(p, "carry")

    def wrap(self, value: Value, name="value"):
        """The Python object for a Value of this session: a Tracer, or a HostResult if opaque."""
        return HostResult(value, self, name) if value.aval is OPAQUE else Tracer.make(value, self)

    # -- recording ----------------------------------------------------------------------------------
    def location(self):
        return self.interp.location()

    def source(self):
        """The user line an op comes from: the interpreted line, unless Python user code that the
        interpreter called (a function it does not parse) is on the stack above it."""
        f = sys._getframe(2)
        while f is not None:
            c = f.f_code
            if c.co_filename in _INTERPRETING:
                return self.location()
            if not _is_internal(c):
                return (c.co_filename, f.f_lineno, c.co_name)
            f = f.f_back
        return self.location()

    def execute(self, prim, inputs, attrs):
        nodes = self.builder.nodes
        n0 = len(nodes)
        out = super().execute(prim, inputs, attrs)
        if len(nodes) > n0:
            nodes[-1].source = self.source()
        return out

    def host_call(self, fn, args, kwargs, name, allow_fullgraph=False, out_avals=None):
        """`fn(*args, **kwargs)` run in Python when the graph runs (a HOST_CALL node).

        Traced tensors and results of earlier host calls are passed by Slot; everything else
        (constants, Parameters, Cells) is kept in the template as the object itself."""
        loc = self.location()
        if self.fullgraph and not allow_fullgraph:
            raise unsupported(f"'{name}', a call that runs in Python when the graph runs", loc,
                              hint="drop fullgraph=True to allow it (JIT Fallback)")
        leaves, template = pytree.flatten_call(args, kwargs, is_leaf=is_dynamic_leaf)
        vals = [self.value_of(x) for x in leaves]
        avals = [OPAQUE] if out_avals is None else list(out_avals)
        node = self.builder.add_structural(HOST_CALL, vals, {"fn": fn, "template": template, "name": name},
                                           avals, source=loc)
        if out_avals is None:
            return HostResult(node.outputs[0], self, name)
        return tuple(self.wrap(v) for v in node.outputs)

    def run_cell(self, cell, args, kwargs):
        """Cell.__call__ during the capture (jit.cell_call asks the active session)."""
        return self.interp.call_cell(cell, args, kwargs)


class Region:
    """Capture one subgraph: `with region:` installs a child session as the recording target.

    Inside, the autodiff depth is 0 (a subgraph is closed: the If/While node as a whole is what
    an enclosing gradient sees, see control_flow.py) and `current_capture()` is the child, so
    host calls and Cells land in the subgraph.
    """

    def __init__(self, interp, kind, parent=None):
        self.interp = interp
        self.parent = parent if parent is not None else interp.session
        self.session = self.parent.child(kind)
        self._saved = []

    def __enter__(self):
        scope = capture_scope(self.session)
        scope.__enter__()
        self._saved.append((scope, set_executor(self.session.execute), self.interp.session))
        self.interp.session = self.session
        return self

    def __exit__(self, *exc):
        scope, executor, session = self._saved.pop()
        set_executor(executor)
        self.interp.session = session
        scope.__exit__(*exc)
        return False

    def bind(self, obj):
        return self.session.bind(obj)

    def value_of(self, x):
        return self.session.value_of(x) if is_dynamic_leaf(x) or isinstance(x, Tensor) else x


def close_regions(regions, outputs, passthrough=None):
    """Finish the subgraphs of one structural node. Returns (graphs, lifted outer objects).

    Each region's params are its explicit params followed by the union of every region's lifted
    values (a region that did not use one gets an unused parameter), so all of them accept the
    same operands: `explicit operands + lifted objects`. A While body (`passthrough`) also returns
    the lifted values unchanged: they are loop-invariant entries of the carry.
    """
    keys, objs, avals = [], {}, {}
    for r in regions:
        for k, (obj, p) in r.session.free.items():
            if k not in objs:
                keys.append(k)
                objs[k] = obj
                avals[k] = p.aval
    graphs = []
    for i, (r, outs) in enumerate(zip(regions, outputs)):
        s = r.session
        params = list(s.explicit)
        for k in keys:
            hit = s.free.get(k)
            params.append(hit[1] if hit is not None else Value(avals[k], "param"))
        outs = list(outs)
        if passthrough is not None and passthrough[i]:
            outs += params[len(s.explicit):]
        graphs.append(Graph(s.builder.name, params, [], s.builder.nodes, outs, s.fn))
        s.finished = True
    return graphs, [objs[k] for k in keys]


def tracked(x) -> bool:
    return isinstance(x, Tensor) and x._node is not None


__all__ = ["AstSession", "AstCaptureError", "Region", "close_regions", "unsupported", "where", "is_symbolic",
           "is_dynamic_leaf", "contains_opaque", "aval_of", "tracked"]
