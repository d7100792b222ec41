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

1. A call of a lazy cell computes a *reuse key*: the cell's class, its structure (sub-cells'
   classes, their plain attributes such as `training`, a dropout rate), the shapes/dtypes of its
   parameters, and the call's guards (tensor argument shapes/dtypes, Python constants).
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
import logging

from ..common import grad_state
from ..common.dtype import DType
from ..common.errors import OpTypeError, OpValueError
from ..common.tensor import Tensor
from ..ops.primitive import AbstractTensor
from . import pytree
from .cache import constant_token
from .ir import CALL, Graph, Node, Value

logger = logging.getLogger("minispore.jit")

_SCALARS = (bool, int, float, str, type(None))
_SKIP_ATTRS = frozenset(("_hook_id", "_default_name_id", "_casting"))
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

    __slots__ = ("graph", "out_template", "n_args", "splits", "policy")

    def __init__(self, graph, out_template, n_args, policy):
        self.graph = graph
        self.out_template = out_template
        self.n_args = n_args
        self.splits = {}
        self.policy = policy


_templates: dict = {}          # reuse key -> _Template, or None (this key cannot be reused)
_capture_depth = [0]


def _on_capture(active: bool):
    if not active:
        _templates.clear()      # templates hold tracers' graphs; they live for one top-level capture


# -- what identifies "the same layer" -------------------------------------------------------------------
def own_tensors(cell):
    """[(relative name, Tensor)] the cell owns: its Parameters, then Tensor attributes of its cells."""
    out = list(cell.parameters_and_names())
    seen = {id(t) for _, t in out}
    for name, c in cell.cells_and_names():
        for k, v in c.__dict__.items():
            if isinstance(v, Tensor) and id(v) not in seen:
                seen.add(id(v))
                out.append((f"{name}.{k}" if name else k, v))
    return out


def _structure(cell):
    """The cell tree's classes and plain attributes; None if a cell has hooks or a custom bprop."""
    sig = []
    for name, c in cell.cells_and_names():
        d = c.__dict__
        if d.get("_forward_hooks") or d.get("_forward_pre_hooks") or hasattr(type(c), "bprop"):
            return None
        attrs = tuple(sorted(((k, v) for k, v in d.items() if k not in _SKIP_ATTRS and type(v) in _SCALARS),
                             key=lambda kv: kv[0]))
        dts = tuple(sorted((k, v.name) for k, v in d.items() if isinstance(v, DType)))
        sig.append((name, type(c).__module__, type(c).__qualname__, attrs, dts))
    return tuple(sig)


def _reuse_key(cell, template, leaves, own):
    structure = _structure(cell)
    if structure is None:
        return None
    try:
        consts = constant_token(template)
    except TypeError:
        return None
    if any(tok[0] == "id" for tok in _id_tokens(consts)):
        return None                  # an object argument: its identity differs per call
    avals = tuple((tuple(t.shape), t.dtype.name) for t in leaves)
    owned = tuple((n, tuple(t.shape), t.dtype.name) for n, t in own)
    return (structure, consts, avals, owned)


def _id_tokens(tok):
    if isinstance(tok, tuple):
        if len(tok) == 2 and tok[0] == "id":
            yield tok
        else:
            for x in tok:
                yield from _id_tokens(x)


# -- capture of the shared subgraph ---------------------------------------------------------------
def _capture_template(cell, args_template, leaves, own):
    """Capture `cell(*args)` as a closed graph G(tensor args..., own tensors...) -> outputs."""
    from ..jit import _run_cell_python
    from .capture.trace import TraceSession
    from .verify import verify

    sub = TraceSession(f"{type(cell).__name__}_lazy", type(cell).construct)
    arg_tracers = [sub.param(AbstractTensor(t.shape, t.dtype)) for t in leaves]
    swapped = []
    try:
        for name, t in own:
            tr = sub.param(AbstractTensor(t.shape, t.dtype), getattr(t, "name", None) or name)
            swapped.append((t, t._data, t.__class__))
            t._data = tr._data
        args, kwargs = pytree.fill(args_template, arg_tracers)
        with sub.running():
            out = _run_cell_python(cell, args, kwargs)
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
    from .capture.trace import CaptureError, TraceSession
    if not isinstance(session, TraceSession):
        return NotImplemented
    leaves, template = pytree.flatten_call(args, kwargs)
    own = own_tensors(cell)
    key = _reuse_key(cell, template, leaves, own)
    if key is None:
        return NotImplemented
    key = (type(cell), key)
    if key not in _templates:
        try:
            captured = _capture_template(cell, template, leaves, own)
        except CaptureError:
            captured = None
        if captured is None:
            logger.info("lazy_inline: '%s' cannot be shared as a subgraph; inlining it", type(cell).__name__)
            _templates[key] = None
            return NotImplemented
        _templates[key] = _Template(captured[0], captured[1], len(leaves), cell.__dict__["_lazy_inline"])
    tmpl = _templates[key]
    if tmpl is None:
        return NotImplemented
    inputs = list(leaves) + [t for _, t in own]
    g = tmpl.graph
    if grad_state.depth and any(isinstance(t, Tensor) and t._node is not None for t in inputs):
        outs = _call_with_grad(session, tmpl, inputs)
        if outs is NotImplemented:
            return NotImplemented
    else:
        outs = session.emit(CALL, inputs, {"graph": g, "lazy_inline": tmpl.policy}, g.output_avals)
    return pytree.fill(tmpl.out_template, list(outs))


def _split(tmpl, mask):
    """F and B (without absent gradients) for one pattern of tracked inputs, built once."""
    from .autodiff import build_split
    s = tmpl.splits.get(mask)
    if s is None:
        g = tmpl.graph
        split = build_split(g, mask, tuple(False for _ in g.captures))
        bwd = split.backward
        present = [o is not None for o in bwd.outputs]
        backward = Graph(bwd.name, bwd.params, bwd.captures, bwd.nodes, [o for o in bwd.outputs if o is not None],
                         bwd.source_fn)
        s = tmpl.splits[mask] = (split, backward, present)
    return s


class LazyCallVJP:
    """The tape's 'primitive' for one lazy call: its backward rule emits CALL(B) into the capture."""

    __slots__ = ("session", "backward", "residuals", "present", "name", "policy")

    def __init__(self, session, backward, residuals, present, name, policy):
        self.session, self.backward, self.residuals = session, backward, residuals
        self.present, self.name, self.policy = present, f"lazy:{name}", policy

    def bprop(self, inputs, out, dout):
        douts = list(dout) if isinstance(dout, tuple) else [dout]
        grads = self.session.emit(CALL, list(self.residuals) + douts, {"graph": self.backward,
                                                                        "lazy_inline": self.policy},
                                  self.backward.output_avals)
        it = iter(grads)
        return tuple(next(it) if p else None for p in self.present)


def _call_with_grad(session, tmpl, inputs):
    g = tmpl.graph
    mask = tuple(isinstance(t, Tensor) and t._node is not None for t in inputs)
    split, backward, present = _split(tmpl, mask)
    fwd = split.forward
    if any(not isinstance(o, Value) for o in fwd.outputs):
        return NotImplemented
    results = session.emit(CALL, inputs, {"graph": fwd, "lazy_inline": tmpl.policy}, fwd.output_avals)
    outs, residuals = list(results[:split.n_out]), results[split.n_out:]
    tracked = tuple(t for t, m in zip(inputs, mask) if m)
    diff = [outs[i] for i in split.diff_outputs]
    if diff:
        grad_state.record(LazyCallVJP(session, backward, residuals, present, g.name, tmpl.policy), tracked, {},
                          tuple(diff))
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
    from .capture import add_capture_listener
    add_capture_listener(_on_capture)


_install()

__all__ = ["lazy_inline", "lazy_inline_enabled", "is_lazy", "call_cell", "own_tensors", "inline_front",
           "finish_capture", "LazyCallVJP"]
