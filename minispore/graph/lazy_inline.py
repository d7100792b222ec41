"""`lazy_inline`: capture a repeated Cell ONCE and call it as a subgraph (MindSpore's `@lazy_inline`).

    class Block(nn.Cell):
        @ms.lazy_inline
        def __init__(self, cfg):
            super().__init__()
            ...

By default a captured graph is flat: every call of every cell is traced again and inlined, so a
32-layer transformer costs eight times the capture (and verification, and executor building) of a
4-layer one. MindSpore's answer (mindspore_api.md §5): mark the repeated cell's `__init__` with
`@lazy_inline`; identical instances then share ONE compiled subgraph, called once per layer.

How it works here, during a capture (trace, or the ast/bytecode modes' trace sessions):

1. A call of a lazy cell computes a *reuse key*: the cell tree's structure (layer_state.py: sub-cells'
   classes and attribute layouts, plain attributes such as `training` or a dropout rate, tuples by
   value, functions and shared objects by identity), the shapes/dtypes of its own tensors, and the
   call's guards (tensor argument shapes/dtypes, Python constants). The structure is read once per
   layer per compile: jit's state guard reads it before the capture (a lazy cell is guarded as one
   unit) and `describe` remembers it while no Cell changes (the Cell state epoch).
2. The first call with a key captures `construct` into a closed subgraph whose params are the
   call's tensor arguments followed by the cell's *own tensors* (its Parameters and Tensor
   attributes): while it is traced, each of those tensors temporarily holds a symbolic param, so
   the subgraph reads "this layer's weights" as inputs rather than capturing one layer's weights.
3. Every call emits one CALL node: the arguments plus that instance's own tensors.
4. Under a gradient (value_and_grad traced into the same graph), the subgraph is split once, as
   graph autodiff splits any graph (autodiff.build_split): forward F(inputs) -> (outputs,
   residuals) and backward B(residuals, output cotangents) -> input gradients. Each call emits
   CALL(F) and records one tape node whose backward rule emits CALL(B), so the backward pass is a
   chain of CALLs too. The residuals (saved activations) are ordinary values of the outer graph.

So capture, verification and executor building happen once per distinct layer, and compile time
stops growing with depth (the outer graph grows by a couple of nodes per layer).

`policy=None` (default) keeps the CALLs; `policy="front"` inlines them after capture (fast capture,
flat graph for later passes). `lazy_inline_enabled(False)` (a context manager) turns the feature
off, e.g. to compare outputs with a plain compilation.

Limits (the same spirit as MindSpore's: the cell must be reusable): tensors a lazy cell reads must
be its call arguments or its own tensors; constant tensors it builds while running are shared by
all instances (they are equal for identical cells). Cells with forward hooks, a custom `bprop`,
host calls or anything that cannot be captured are simply inlined as usual.
"""
from __future__ import annotations

import contextlib
import functools
import itertools
import logging
import operator

from ..common import grad_state
from ..common.dtype import DType
from ..common.errors import OpTypeError, OpValueError
from ..common.tensor import Tensor
from ..ops.primitive import AbstractTensor, interned_aval
from . import pytree
from .ir import CALL, Graph, Node, Slot, Value
from .trace.cells import run_cell_python
from .trace.session import CaptureError, TraceSession, Tracer, user_source
from .guards.rule import SCALARS as _SCALARS      # the one definition of a plain constant
from .guards.layer_state import describe, forget

logger = logging.getLogger("minispore.jit")

_POLICIES = (None, "front")


class _Switch:
    enabled = True


_SWITCH = _Switch()


@contextlib.contextmanager
def lazy_inline_enabled(flag: bool = True):
    """Turn lazy_inline on or off for the captures run inside the block."""
    saved = _SWITCH.enabled
    _SWITCH.enabled = bool(flag)
    try:
        yield
    finally:
        _SWITCH.enabled = saved


def lazy_inline(fn=None, attrs=None, policy=None):
    """Decorate a Cell's `__init__` so its instances are compiled once as a reusable subgraph.

    `lazy_inline(fn=None, attrs=None, policy=None)` (MindSpore 2.3): `attrs` is accepted for
    compatibility (a str or a list/tuple of str: names of init arguments MindSpore records);
    `policy` is None (call the shared subgraph) or "front" (capture once, then inline).
    """
    if attrs is not None and not isinstance(attrs, str) and not (
            isinstance(attrs, (list, tuple)) and all(isinstance(a, str) for a in attrs)):
        raise OpTypeError("lazy_inline", "attrs as None, a str or a list/tuple of str", type(attrs).__name__)
    if policy not in _POLICIES:
        raise OpValueError("lazy_inline", "policy None or 'front'", repr(policy))
    if fn is None:
        return lambda f: lazy_inline(f, attrs=attrs, policy=policy)
    if not callable(fn) or getattr(fn, "__name__", "") != "__init__":
        raise OpTypeError("lazy_inline", "a Cell's __init__ method to decorate",
                          getattr(fn, "__qualname__", type(fn).__name__))

    @functools.wraps(fn)
    def __init__(self, *args, **kwargs):
        fn(self, *args, **kwargs)
        if not hasattr(self, "cells_and_names"):
            raise OpTypeError("lazy_inline", "__init__ of a Cell subclass", type(self).__name__)
        # set after the whole __init__ chain ran: a subclass' decorated __init__ wins
        self.__dict__["_lazy_inline"] = policy or "none"

    __init__.__minispore_lazy_inline__ = True
    return __init__


def is_lazy(cell) -> bool:
    return _SWITCH.enabled and "_lazy_inline" in getattr(cell, "__dict__", {})


# -- the per-capture template cache --------------------------------------------------------------
class _Template:
    """One captured lazy cell: its subgraph G and, per tracked-input pattern, the F/B split."""

    __slots__ = ("graph", "out_avals", "out_template", "splits", "policy")

    def __init__(self, graph, out_template, policy):
        self.graph = graph
        self.out_avals = tuple(graph.output_avals)
        self.out_template = out_template
        self.splits = {}
        self.policy = policy


_templates: dict = {}          # reuse key -> _Template, or None (this key cannot be reused)
_UNSEEN = object()


def _on_capture(active: bool):
    if not active:
        _templates.clear()      # templates hold tracers' graphs; they live for one top-level capture
        forget()                # remembered layer states hold cells: they live for one compile


# -- what identifies "the same layer": layer_state.describe (also read by jit's state guard) --------------
def own_tensors(cell):
    """[(relative name, Tensor)] the cell owns: its Parameters and its cells' Tensor attributes."""
    return describe(cell).own


class _NotConstant(Exception):
    pass


def _const_key(t):
    """A hashable key for the constant parts of a call's template; objects are refused (their
    identity differs per call, so the call cannot share a subgraph)."""
    tt = type(t)
    if tt is Slot:
        return t.index
    if tt in _SCALARS:
        return (tt, t)
    if tt is tuple or tt is list:
        return (tt, tuple(map(_const_key, t)))
    if tt is dict:
        return (tt, tuple((k, _const_key(v)) for k, v in t.items()))
    if isinstance(t, DType):
        return ("dtype", t.name)
    raise _NotConstant


_SECOND = operator.itemgetter(1)


def _reuse_key(cell, template, leaves, structure, own):
    if structure is None:
        return None
    try:
        consts = _const_key(template)
    except _NotConstant:
        return None
    # storage shape/dtype (an ndarray, or a tracer's SymbolicArray): cheaper than Tensor.shape
    avals = tuple([(t._data.shape, t._data.dtype) for t in leaves])
    owned = tuple([(t._data.shape, t._data.dtype) for _, t in own])
    return (structure, consts, avals, owned)


# -- capture of the shared subgraph ---------------------------------------------------------------
def _capture_template(cell, args_template, leaves, own):
    """Capture `cell(*args)` as a closed graph G(tensor args..., own tensors...) -> outputs."""
    from .verify import verify

    sub = TraceSession(f"{type(cell).__name__}_lazy", type(cell).construct)
    arg_tracers = [sub.param(interned_aval(t.shape, t.dtype)) for t in leaves]
    swapped = []
    try:
        for name, t in own:
            tr = sub.param(interned_aval(t.shape, t.dtype), getattr(t, "name", None) or name)
            swapped.append((t, t._data, t.__class__))
            t._data = tr._data
        args, kwargs = pytree.fill(args_template, arg_tracers)
        with sub.running():
            out = run_cell_python(cell, args, kwargs)
            graph, out_template = sub.finish(out)
    finally:
        for t, data, cls in swapped:
            t._data = data
            t.__class__ = cls
        sub.finished = True
    for o in graph.outputs:
        if not isinstance(o, Value) or not isinstance(o.aval, AbstractTensor):
            return None              # a lazy cell must return tensors only
    if any(n.op.name == "HostCall" for n in graph.nodes if not n.is_primitive):
        return None
    own_ids = {id(t) for _, t in own}
    reachable = _tensors_in_containers(cell)
    for _v, t in graph.captures:
        if id(t) in reachable and id(t) not in own_ids:
            return None              # a per-instance tensor in a list/dict attribute: not shareable
    verify(graph)
    return graph, out_template


def _tensors_in_containers(cell):
    ids = set()
    for _, c in cell.cells_and_names():
        for v in c.__dict__.values():
            if isinstance(v, (list, tuple)):
                ids.update(id(x) for x in v if isinstance(x, Tensor))
            elif isinstance(v, dict) and v is not c.__dict__.get("_params"):
                ids.update(id(x) for x in v.values() if isinstance(x, Tensor))
    return ids


# -- the call ---------------------------------------------------------------------------------------------
def call_cell(session, cell, args, kwargs):
    """Emit a lazy cell's call into `session` (the jit Cell hook calls this during a capture).
    Returns the call's outputs, or NotImplemented to inline the cell as usual."""
    if not isinstance(session, TraceSession):
        return NotImplemented
    leaves, template = pytree.flatten_call(args, kwargs)
    state = describe(cell)       # (usually remembered from the state guard's walk before the capture)
    own = state.own
    key = _reuse_key(cell, template, leaves, state.token, own)
    if key is None:
        return NotImplemented
    tmpl = _templates.get(key, _UNSEEN)        # one lookup: hashing the key is a per-layer cost
    if tmpl is _UNSEEN:
        try:
            captured = _capture_template(cell, template, leaves, own)
        except CaptureError:
            captured = None
        if captured is None:
            logger.info("lazy_inline: '%s' cannot be shared as a subgraph; inlining it", type(cell).__name__)
            _templates[key] = None
            return NotImplemented
        tmpl = _templates[key] = _Template(captured[0], captured[1], cell.__dict__["_lazy_inline"])
    if tmpl is None:
        return NotImplemented
    inputs = leaves + list(map(_SECOND, own))
    source = user_source()
    if grad_state.depth and (mask := tuple([t._node is not None for t in inputs])) and any(mask):
        outs = _call_with_grad(session, tmpl, inputs, mask, source)
        if outs is NotImplemented:
            return NotImplemented
    else:
        node = _emit(session, tmpl.graph, tmpl.out_avals, inputs, tmpl.policy, source)
        outs = _tracers(session, node.outputs)
    return pytree.fill(tmpl.out_template, outs)


def _emit(session, graph, out_avals, inputs, policy, source):
    """Append CALL(graph) to the capture; inputs are Tensors (tracers, captured tensors) or Values
    of this capture (residuals kept as Values: they never need a Tracer)."""
    value_of = session.value_of
    vals = [x if type(x) is Value else value_of(x) for x in inputs]
    return _emit_values(session, graph, out_avals, vals, policy, source)


def _emit_values(session, graph, out_avals, vals, policy, source):
    """`_emit` with every input already a Value of this capture."""
    return session.builder.add_structural(CALL, vals, {"graph": graph, "lazy_inline": policy}, out_avals, source)


def _tracers(session, values):
    make = Tracer.make
    return [make(v, session) for v in values]


class _Split:
    """F and B of one lazy subgraph for one pattern of tracked inputs (built once).

    `forward`  F(inputs) -> (outputs, residuals saved for B)
    `backward` B(saved inputs and residuals, output cotangents) -> the gradients that exist
               (absent ones dropped); views and constants among the residuals are recomputed
               inside B instead of being saved (memory/remat.py)
    `sources`  for each B param before the cotangents: ("in", i) - the call's input i (a weight,
               the layer input: passed straight from the caller) - or ("out", j) - F's output
               n_out + j
    """

    __slots__ = ("forward", "backward", "n_out", "diff_outputs", "present", "sources", "f_avals", "b_avals",
                 "residual_index", "diff_index", "n_present")


def _split(tmpl, mask):
    s = tmpl.splits.get(mask)
    if s is not None:
        return s
    from .autodiff import build_split
    from .memory.remat import rematerialize
    g = tmpl.graph
    split = build_split(g, mask, tuple(False for _ in g.captures))
    # views and constants among the residuals are recomputed in B, not saved (memory/remat.py)
    forward, bwd, sources = rematerialize(split.forward, split.backward, split.n_out)
    s = _Split()
    s.forward = forward
    s.backward = Graph(bwd.name, bwd.params, bwd.captures, bwd.nodes, [o for o in bwd.outputs if o is not None],
                       bwd.source_fn)
    s.f_avals, s.b_avals = tuple(s.forward.output_avals), tuple(s.backward.output_avals)
    s.present = [o is not None for o in bwd.outputs]
    s.n_out, s.diff_outputs, s.sources = split.n_out, split.diff_outputs, sources
    # what every call reads, computed once: the residuals as indices into (inputs + F's outputs)
    n_in = len(mask)
    s.residual_index = tuple(i if where == "in" else n_in + s.n_out + i for where, i in sources)
    s.diff_index = tuple(s.diff_outputs)
    s.n_present = sum(s.present)
    tmpl.splits[mask] = s
    return s


class LazyCallVJP:
    """The tape's 'primitive' for one lazy call: its backward rule emits CALL(B) into the capture."""

    __slots__ = ("session", "split", "residuals", "name", "policy", "source")

    def __init__(self, session, split, residuals, name, policy, source):
        self.session, self.split, self.residuals = session, split, residuals
        self.name, self.policy, self.source = f"lazy:{name}", policy, source

    def bprop(self, inputs, out, dout):
        s = self.split
        douts = list(dout) if isinstance(dout, tuple) else [dout]
        node = _emit(self.session, s.backward, s.b_avals, self.residuals + douts, self.policy, self.source)
        self.residuals = None              # differentiated once: let the values go
        grads = _tracers(self.session, node.outputs)
        if s.n_present == len(s.present):
            return tuple(grads)            # every input has a gradient (the usual layer)
        it = iter(grads)
        return tuple([next(it) if p else None for p in s.present])


def _call_with_grad(session, tmpl, inputs, mask, source):
    """`inputs`: the call's Tensors; `mask`: which of them are tracked (at least one)."""
    s = _split(tmpl, mask)
    vals = list(map(session.value_of, inputs))
    node = _emit_values(session, s.forward, s.f_avals, vals, tmpl.policy, source)
    n_out = s.n_out
    f_outs = node.outputs
    outs = _tracers(session, f_outs[:n_out])
    # saved inputs are kept as their Values (looked up once, above), not looked up again in B;
    # residual_index points into inputs + F's outputs (see _split)
    vals_and_outs = vals + list(f_outs)
    residuals = [vals_and_outs[i] for i in s.residual_index]
    if s.diff_index:
        diff = tuple([outs[i] for i in s.diff_index])
        tracked = tuple(itertools.compress(inputs, mask))
        grad_state.record(LazyCallVJP(session, s, residuals, tmpl.graph.name, tmpl.policy, source), tracked, {}, diff)
    return outs


# -- policy="front": inline the calls after capture -------------------------------------------------
def inline_front(graph) -> Graph:
    """Inline (recursively) every CALL emitted by a lazy cell with policy "front"."""
    if not any(n.op is CALL and n.attrs.get("lazy_inline") == "front" for n in graph.nodes):
        return graph
    nodes, vmap = [], {}

    def m(x):
        return vmap.get(x.id, x) if isinstance(x, Value) else x

    captures = list(graph.captures)
    cap_ids = {id(t): v for v, t in captures}
    for node in graph.nodes:
        if node.op is CALL and node.attrs.get("lazy_inline") == "front":
            callee = inline_front(node.attrs["graph"])
            local = {p.id: m(x) for p, x in zip(callee.params, node.inputs)}
            for v, t in callee.captures:
                outer = cap_ids.get(id(t))
                if outer is None:
                    outer = Value(v.aval, "capture", producer=t, name=v.name)
                    captures.append((outer, t))
                    cap_ids[id(t)] = outer
                local[v.id] = outer
            for cn in callee.nodes:
                nn_ = Node(cn.op, [local.get(x.id, x) if isinstance(x, Value) else x for x in cn.inputs],
                           cn.attrs, (), cn.multi, cn.source)
                nn_.outputs = tuple(Value(o.aval, "node", producer=(nn_, i), name=o.name)
                                    for i, o in enumerate(cn.outputs))
                for o, no in zip(cn.outputs, nn_.outputs):
                    local[o.id] = no
                nodes.append(nn_)
            for o, r in zip(node.outputs, callee.outputs):
                vmap[o.id] = local.get(r.id, r) if isinstance(r, Value) else r
        else:
            nn_ = Node(node.op, [m(x) for x in node.inputs], node.attrs, (), node.multi, node.source)
            nn_.outputs = tuple(Value(o.aval, "node", producer=(nn_, i), name=o.name)
                                for i, o in enumerate(node.outputs))
            for o, no in zip(node.outputs, nn_.outputs):
                vmap[o.id] = no
            nodes.append(nn_)
    out = Graph(graph.name, graph.params, captures, nodes, [m(o) for o in graph.outputs], graph.source_fn)
    out.notes.update(graph.notes)
    return out


def finish_capture(result):
    """Post-capture hook (jit._compile): apply policy "front" to the captured graph."""
    if result.graph is not None and result.runner is None:
        g = inline_front(result.graph)
        if g is not result.graph:
            result.graphs = [g if x is result.graph else x for x in result.graphs]
            result.graph = g
    return result


def _install():
    from .trace.contract import add_capture_listener
    add_capture_listener(_on_capture)


_install()

__all__ = ["lazy_inline", "lazy_inline_enabled", "is_lazy", "call_cell", "own_tensors", "inline_front",
           "finish_capture", "LazyCallVJP"]
