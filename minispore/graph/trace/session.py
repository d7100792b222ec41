"""Trace capture: run the function once with *tracers* and record every primitive it calls.

This is JAX's `jit`: a tracer is a Tensor with a shape and a dtype but no data. Calling a
primitive hands it to the current executor (ops/primitive.py); during a trace that is
`TraceSession.execute`, which runs the primitive's own inference rule (so a bad shape is rejected
now, at compile time, with the same message PyNative gives), appends a Node, and returns tracers
for the outputs. Everything else in the function is ordinary Python that runs once, now:

* **Python control flow is specialised.** `if n > 2:` on a Python int picks a branch at trace
  time; the branch is part of the graph and the value of `n` is guarded by the cache. A branch on
  a *tensor's value* (`if x.sum() > 0:`), `.asnumpy()`, `.item()`, `float(x)` need data the trace
  does not have: they raise `CaptureError` naming the line and suggesting capture_mode='ast'
  (tensor if/while become graph control flow) or 'bytecode' (that code runs eagerly).
* **Tensors the function reads but does not receive** (a Cell's Parameters, globals, closures,
  constant tables built during the trace) become *captures*: the graph keeps a reference to the
  Tensor and reads its storage whenever it runs, so optimizer updates are seen.
* **Side effects** (print, appending to a list, `x[i] = v` into a captured tensor) happen once,
  at trace time. `x[i] = v` on a *tracer* is functional: it records a `setitem` node and rebinds
  the Python variable `x` to the new value (other views of the old value do not change).
* **Gradients**: while a `grad`/`value_and_grad` inside the traced function runs its forward pass,
  each primitive is also put on the autodiff tape (exactly as the eager executor does); the tape's
  backward pass then calls backward rules - written in minispore ops - on tracers, which records
  the backward ops into the same graph. One forward+backward graph, from the same rules.
* **Host calls**: Cells that must run eagerly (optimizers, which update NumPy arrays in place)
  become HOST_CALL nodes: they run at graph run time, in program order, on concrete tensors.

How a tracer is built: a `Tracer` is a Tensor whose storage `_data` is a `SymbolicArray` (shape,
dtype and the IR Value, no numbers). Code that copies storage (`_wrap(x._data)`, as the autodiff
tape does) therefore makes another tensor of the same Value; the executor upgrades such plain
Tensors to Tracers when it meets them. Reading the numbers of a SymbolicArray raises CaptureError.
"""
from __future__ import annotations

import contextlib

from ...common import grad_state
from ...common.errors import MinisporeError, OpTypeError
from ...common.tensor import Tensor
from ...ops.primitive import AbstractTensor, Shaped, set_executor
from .. import pytree
from ..ir import HOST_CALL, OPAQUE, GraphBuilder, Slot, Value
from .contract import CaptureResult, capture_scope, current_capture
from .user_code import _is_internal, user_source  # noqa: F401  (_is_internal: the modes' and the cache's test)

_HINT = ("use capture_mode='ast' (tensor if/while become graph control flow) or capture_mode='bytecode' "
         "(that code runs eagerly at a graph break), or express it with ops (ops.where, ops.select)")


# what to suggest in each mode (the ast mode already compiles tensor if/while: only a break helps)
_HINTS = {"trace": _HINT,
          "ast": "return the value from the function and use it outside, use capture_mode='bytecode' (that code "
                 "runs eagerly at a graph break), or express it with ops (ops.where, ops.select)"}


class CaptureError(OpTypeError):
    """Something in a captured function needs a value that exists only when the graph runs."""


def _where(src):
    return f"{src[0]}:{src[1]} in {src[2]}" if src else "<minispore internals>"


# -- symbolic storage -------------------------------------------------------------------------------
def _data_error(what, session):
    src = user_source(3)
    if session is not None and session.finished:
        got = (f"a tensor that escaped from the trace of '{session.name}' (it was stored outside the function "
               f"while tracing, so it has no data); return it from the function instead")
    else:
        name = session.name if session is not None else "?"
        mode = getattr(session, "capture_mode", "trace")
        got = (f"a tensor traced by jit(capture_mode='{mode}') in '{name}': its values exist only when the "
               f"compiled graph runs. Python code that needs them cannot be traced; {_HINTS.get(mode, _HINT)}")
    return CaptureError(what, "a tensor with concrete values", got, where=_where(src))


class SymbolicArray(Shaped):
    """Stands where a Tracer's ndarray would be: shape and dtype, the IR Value, no numbers."""

    __slots__ = ("value", "shape", "dtype", "mdtype", "session")

    def __init__(self, value: Value, session):
        aval = value.aval
        self.value = value
        self.shape = aval.shape
        self.mdtype = mdtype = aval.dtype
        self.dtype = mdtype.np
        self.session = session

    @property
    def itemsize(self):
        return self.dtype.itemsize

    @property
    def nbytes(self):
        return self.size * self.dtype.itemsize

    def __array__(self, *args, **kwargs):
        raise _data_error("numpy.asarray", self.session)

    def __getattr__(self, name):               # any other ndarray attribute needs the data
        raise _data_error(f"ndarray.{name}", self.session)

    def __bool__(self):
        raise _data_error("Tensor.__bool__", self.session)

    def __float__(self):
        raise _data_error("float", self.session)

    def __int__(self):
        raise _data_error("int", self.session)

    def __index__(self):
        raise _data_error("index", self.session)

    def __iter__(self):
        raise _data_error("iter", self.session)

    def __getitem__(self, key):
        raise _data_error("ndarray.__getitem__", self.session)

    def __setitem__(self, key, value):
        raise _data_error("ndarray.__setitem__", self.session)

    def __repr__(self):
        return f"SymbolicArray(shape={self.shape}, dtype={self.dtype})"


def _arith_error(name):
    def method(self, *args):
        raise _data_error(f"ndarray.{name}", self.session)
    return method


for _name in ("add", "radd", "sub", "rsub", "mul", "rmul", "truediv", "rtruediv", "floordiv", "rfloordiv",
              "mod", "pow", "rpow", "matmul", "rmatmul", "neg", "abs", "lt", "le", "gt", "ge", "eq", "ne",
              "iadd", "isub", "imul", "itruediv"):
    setattr(SymbolicArray, f"__{_name}__", _arith_error(f"__{_name}__"))
SymbolicArray.__hash__ = object.__hash__


class Tracer(Tensor):
    """A Tensor under trace capture: shape and dtype, an IR Value, no data (see module docstring)."""

    __slots__ = ()

    @staticmethod
    def make(value: Value, session) -> "Tracer":
        t = object.__new__(Tracer)
        t._data = SymbolicArray(value, session)
        t._node = None
        t._version = 0
        return t

    @property
    def value(self) -> Value:
        return self._data.value

    @property
    def shape(self):
        return self._data.shape

    @property
    def dtype(self):
        return self._data.mdtype

    @property
    def ndim(self):
        return len(self._data.shape)

    @property
    def size(self):
        return self._data.size

    def _no_data(self, what):
        return _data_error(what, self._data.session)

    def asnumpy(self):
        raise self._no_data("Tensor.asnumpy")

    def numpy(self):
        raise self._no_data("Tensor.numpy")

    def item(self, index=None):
        raise self._no_data("Tensor.item")

    def tolist(self):
        raise self._no_data("Tensor.tolist")

    def __array__(self, dtype=None, copy=None):
        raise self._no_data("numpy.asarray")

    def __bool__(self):
        raise self._no_data("Tensor.__bool__")

    def __float__(self):
        raise self._no_data("float")

    def __int__(self):
        raise self._no_data("int")

    def __index__(self):
        raise self._no_data("Tensor.__index__")

    @property
    def strides(self):
        raise self._no_data("Tensor.strides")

    def is_contiguous(self):
        raise self._no_data("Tensor.is_contiguous")

    def __reduce__(self):
        raise self._no_data("pickle")

    def __repr__(self):
        v = self._data.value
        return f"Tracer(shape={list(self.shape)}, dtype={self.dtype}, value=#{v.id} in '{self._data.session.name}')"

    __str__ = __repr__

    def copy(self):
        # values are immutable in the graph: a copy is the same Value in a new Python object, so
        # an in-place write into the copy rebinds only the copy
        return Tracer.make(self._data.value, self._data.session)

    def __copy__(self):
        return self.copy()

    def __deepcopy__(self, memo):
        return self.copy()

    def __setitem__(self, index, value):
        """`x[index] = value` during a trace: a functional update (see the module docstring).

        Recorded like PyNative's in-place write when a gradient is being taken: a snapshot object
        takes over the old tape node, `x` gets the setitem node, and x's version is bumped so a
        recorded op that used the old value refuses to backpropagate - the same rules as eager.
        """
        from ...ops.prims._indexspec import normalize
        from ...ops.prims.indexing import _as_value, _hand_over_node, _setitem
        spec, tensors = normalize("setitem", self.shape, index)
        value = _as_value(value)
        old = Tracer.make(self._data.value, self._data.session)
        old._node, old._version = self._node, self._version
        if self._node is not None:
            _hand_over_node(self._node, self, old)
        new = _setitem(old, value, *tensors, spec=spec)
        self._data = new._data
        self._version += 1
        self._node = new._node
        if new._node is not None:
            new._node.outputs = self


def unify_lifted(parts):
    """Give subgraphs traced separately (If's two branches) the same params.

    `parts` is a list of `(child_session, graph)`. Each graph keeps its explicit params first (a
    While carry), then gets one param per value lifted by ANY of the children, in one common
    order (an unused param where it did not lift that value). Returns the outer Values: the extra
    operands of the structural node, after its explicit ones.
    """
    order, seen = [], set()
    for child, _ in parts:
        for outer, _p in child.lifted:
            if outer.id not in seen:
                seen.add(outer.id)
                order.append(outer)
    for child, graph in parts:
        mine = {outer.id: p for outer, p in child.lifted}
        lifted_ids = {p.id for p in mine.values()}
        explicit = [p for p in graph.params if p.id not in lifted_ids]
        graph.params = explicit + [mine.get(o.id) or Value(o.aval, "param", name=o.name) for o in order]
    return order


class HostResult:
    """What a host call returns during a trace: a Python object that exists only at run time.

    It may be returned from the function (the caller gets the real object) or passed to another
    host call; graph ops and Python code cannot look inside it during the trace.
    """

    __slots__ = ("value", "session", "name")

    def __init__(self, value, session, name):
        self.value, self.session, self.name = value, session, name

    def __bool__(self):
        raise CaptureError(f"{self.name} (host call)", "a value known at compile time",
                           "the result of a call that runs only when the graph runs", where=_where(user_source()))

    def __repr__(self):
        return f"<result of host call {self.name}, known when the graph runs>"


# -- the tracing executor -----------------------------------------------------------------------
class TraceSession:
    """One trace: a GraphBuilder plus the executor installed while Python code runs.

    The trace mode uses it once per function; the ast and bytecode modes reuse it to evaluate the
    tensor code they meet (ops called on tracers are recorded by `execute`). Its API:

    * `param(aval_or_tensor, name=None) -> Tracer`   a new graph input
    * `with session.running(): ...`                  install the executor (and capture_scope)
    * `session.finish(out) -> (Graph, out_template)` flatten the result, close the graph
    * `with session.subgraph(name) as child: ...`    trace a closed subgraph (an If branch, a
      While body, a callee): tracers of the enclosing sessions used inside it are *lifted* into
      params of the child automatically; `child.lifted` lists `(outer Value, child param)` pairs,
      so the operands of the structural node are `[outer for outer, _ in child.lifted]`.
    """

    capture_mode = "trace"     # named in errors; the ast and bytecode sessions override it

    def __init__(self, name, fn, fullgraph=False, parent=None):
        self.name = name
        self.fn = fn
        self.fullgraph = fullgraph
        self.parent = parent
        # graphs are named like the function, without the '<locals>' path of nested definitions
        self.builder = GraphBuilder(name.rsplit("<locals>.", 1)[-1], fn)
        self.finished = False
        self.notes: dict = {}             # copied to Graph.notes by finish()
        self.lifted: list = []            # (outer Value, param Value) for values lifted from enclosing sessions
        self._lifted_ids: dict = {}
        self._storage: dict = {}          # id(captured tensor) -> (tensor, its storage at capture)

    # -- building ------------------------------------------------------------------------------
    def param(self, aval, name=None) -> "Tracer":
        """A new graph input (from an AbstractTensor or a Tensor's shape and dtype)."""
        if not isinstance(aval, AbstractTensor):
            aval = AbstractTensor(aval.shape, aval.dtype)
        return Tracer.make(self.builder.param(aval, name), self)

    @contextlib.contextmanager
    def running(self):
        """Run Python code with this session's executor installed (restored afterwards)."""
        with capture_scope(self):
            saved = set_executor(self.execute)
            try:
                yield self
            finally:
                set_executor(saved)

    @contextlib.contextmanager
    def subgraph(self, name):
        """Trace a closed subgraph; see the class docstring."""
        child = TraceSession(name, self.fn, self.fullgraph, parent=self)
        child.capture_mode = self.capture_mode
        try:
            with child.running():
                yield child
        finally:
            child.finished = True

    def emit(self, op, inputs, attrs, out_avals):
        """Record a structural node (If/While/Call) whose inputs are tracers, tensors or constants;
        returns one Tracer per output."""
        vals = [self.value_of(x) if isinstance(x, Tensor) else x for x in inputs]
        node = self.builder.add_structural(op, vals, attrs, out_avals, source=user_source())
        return tuple(Tracer.make(v, self) for v in node.outputs)

    def finish(self, out):
        """`(Graph, out_template)` for the function's result `out`; the session is closed."""
        try:
            flat, template = self.output_values(out)
        finally:
            self.finished = True
        graph = self.builder.finish(flat)
        graph.notes.update(self.notes)
        return graph, template

    # the value of a tensor met during the trace
    def value_of(self, x) -> Value:
        d = x._data
        if type(d) is SymbolicArray:
            if d.session is not self:
                return self._lift(x, d)
            if type(x) is Tensor:
                x.__class__ = Tracer         # a storage copy made by autodiff (same layout): see docstring
            return d.value
        if id(x) not in self._storage:
            self._storage[id(x)] = (x, d)
        return self.builder.capture(x)

    def _lift(self, x, d):
        """A tracer of an enclosing session used in this subgraph becomes a param of it."""
        owner = self.parent
        while owner is not None and owner is not d.session:
            owner = owner.parent
        if owner is None or d.session.finished:
            raise _data_error("jit", d.session)
        v = self._lifted_ids.get(d.value.id)
        if v is None:
            if self.parent is not d.session:         # lift through the intermediate sessions too
                outer = self.parent._lift(x, d)
            else:
                outer = d.value
            v = self.builder.param(d.value.aval, d.value.name)
            self._lifted_ids[d.value.id] = v
            self.lifted.append((outer, v))
        return v

    def restore_captured_storage(self):
        """A captured tensor must keep real storage. `param.set_data(traced value)` (or assigning a
        traced value to a Cell's parameter attribute) would leave it pointing at a tracer: undo that
        and say why (in trace mode, parameters are updated by optimizers, which run as host calls)."""
        bad = []
        for t, data in self._storage.values():
            if type(t._data) is SymbolicArray:
                t._data = data
                bad.append(getattr(t, "name", None) or f"tensor of shape {tuple(t.shape)}")
        return bad

    def execute(self, prim, inputs, attrs):
        """The executor installed during the trace (the contract of ops/primitive.py)."""
        vals = []
        for x in inputs:
            if isinstance(x, Tensor):
                vals.append(self.value_of(x))
            elif type(x) is HostResult:
                raise CaptureError(prim.name, "tensor inputs", f"the result of host call {x.name}, which exists "
                                   f"only at run time (in trace mode graph ops cannot consume it)",
                                   where=_where(user_source()))
            else:
                vals.append(x)
        try:
            avals = prim.infer(*inputs, **attrs) if attrs else prim.infer(*inputs)
        except MinisporeError:
            raise
        except Exception as e:            # noqa: BLE001 - same safety net as the eager executor
            from ...backend.dispatch import _wrap_error
            raise _wrap_error(prim, inputs, attrs, e, "shape/dtype inference") from e
        node = self.builder.add_node(prim, vals, dict(attrs), avals, source=user_source())
        if node.multi:
            outs = tuple([Tracer.make(v, self) for v in node.outputs])
        else:
            outs = Tracer.make(node.outputs[0], self)
        if grad_state.depth and prim.bprop is not None:
            for x in inputs:
                if isinstance(x, Tensor) and x._node is not None:
                    grad_state.record(prim, inputs, attrs, outs)
                    break
        return outs

    def host_call(self, fn, args, kwargs, name):
        """Record `fn(*args, **kwargs)` to run eagerly when the graph runs (a HOST_CALL node)."""
        src = user_source()
        if self.fullgraph:
            raise CaptureError(name, "code that compiles into the graph (fullgraph=True)",
                               f"'{name}', which runs on the host at run time (JIT Fallback); "
                               f"drop fullgraph=True to allow it", where=_where(src))
        # a traced tensor and an earlier host call's result are both run-time values: they become
        # node inputs (Slots in the template), so the call sees what the graph computed, not the
        # compile-time placeholder
        leaves, template = pytree.flatten_call(args, kwargs, is_leaf=_is_run_time_value)
        vals = [self._host_result_value(t) if type(t) is HostResult else self.value_of(t) for t in leaves]
        node = self.builder.add_structural(HOST_CALL, vals, {"fn": fn, "template": template, "name": name},
                                           [OPAQUE], source=src)
        return HostResult(node.outputs[0], self, name)

    def _host_result_value(self, r) -> Value:
        if r.session is not self:
            raise CaptureError(f"{r.name} (host call)", "a value of the graph being traced",
                               "the result of a host call recorded in another graph", where=_where(user_source()))
        return r.value

    # outputs
    def output_values(self, out):
        """Flatten the function's result into graph outputs and a template."""
        leaves, template = pytree.flatten(out, leaf_types=(Tensor, HostResult))
        value_of = self.value_of
        # (a training step returns hundreds of gradients: one comprehension, no per-leaf appends)
        flat = [x.value if isinstance(x, HostResult) else value_of(x) for x in leaves]
        _check_constants(template, self.name)
        return flat, template


def _is_symbolic(x):
    return isinstance(x, Tensor) and type(x._data) is SymbolicArray


def _is_run_time_value(x):
    return type(x) is HostResult or _is_symbolic(x)


_CONST_TYPES = (bool, int, float, complex, str, bytes, type(None), type(Ellipsis), slice)


def _check_constants(template, name, path="output"):
    """A jitted function may return Tensors, Python scalars/strings/None and tuples/lists/dicts
    of them. Anything else (a NumPy array, an arbitrary object) is refused clearly."""
    from ...common.dtype import DType
    if isinstance(template, Slot):
        return
    if isinstance(template, (tuple, list)):
        for i, x in enumerate(template):
            if type(x) is not Slot:          # (a step returns hundreds of gradients: skip the call)
                _check_constants(x, name, f"{path}[{i}]")
        return
    if isinstance(template, dict):
        for k, x in template.items():
            _check_constants(x, name, f"{path}[{k!r}]")
        return
    if isinstance(template, _CONST_TYPES) or isinstance(template, DType):
        return
    import numpy as np
    if isinstance(template, np.generic):
        return
    raise OpTypeError(f"jit({name})", "outputs made of Tensors, Python scalars, strings, None, and "
                      "tuples/lists/dicts of them", f"{type(template).__name__} at {path}")


def capture_trace(req) -> CaptureResult:
    """The 'trace' capture mode (see the module docstring)."""
    session = TraceSession(req.name, req.fn, req.fullgraph)
    leaves, template = pytree.flatten_call(req.args, req.kwargs)
    tracers = [session.param(t) for t in leaves]
    args, kwargs = pytree.fill(template, tracers)
    try:
        with session.running():
            try:
                out = req.fn(*args, **kwargs)
            finally:
                overwritten = session.restore_captured_storage()
            if overwritten:
                raise CaptureError("set_data", "captured tensors (Parameters) to keep their storage during a trace",
                                   f"a traced value assigned to {', '.join(overwritten)}; the assignment was undone. "
                                   f"Update parameters with an optimizer (it runs as a host call) or return the "
                                   f"new value and assign it outside the jitted function", where=_where(user_source()))
            graph, out_template = session.finish(out)
    finally:
        session.finished = True          # tracers kept beyond this point are "escaped"
    return CaptureResult(graph=graph, out_template=out_template, mode="trace")


def host_call(fn, args, kwargs, name):
    """Record a host call in the active capture (used by the Cell hook for optimizers)."""
    return current_capture().host_call(fn, args, kwargs, name)


__all__ = ["Tracer", "SymbolicArray", "CaptureError", "HostResult", "TraceSession", "capture_trace",
           "unify_lifted", "user_source", "host_call"]
