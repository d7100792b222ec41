"""Graph autodiff for a compiled function called under a PyNative gradient.

Two ways a jitted function meets autodiff:

1. `jit(value_and_grad(f))` (or `grad` inside a jitted function): the gradient runs *inside* the
   capture, so its forward ops and the backward rules' ops are recorded into one graph by the
   tracing executor (trace/session.py). Nothing here is involved.

2. `value_and_grad(jitted_f)(x)`, or a GRAPH_MODE Cell called by `value_and_grad(net, ...)`: the
   compiled graph runs while an outer PyNative gradient records its tape. Then the graph must
   appear on the tape as ONE node with a backward rule. This module builds that rule, from the
   same per-primitive backward rules, as graphs:

   * **FB** - replay the forward graph `G` under a trace with the tape on (interpret.py), the
     tracked inputs as leaves; then run the tape's backward pass on tracers with fresh cotangent
     params `douts`. Result: one graph `FB(inputs, tracked captures, douts) -> (outs, grads)`.
   * **split** (JAX's partial evaluation, by data dependence): nodes that do not depend on any
     `dout` form the forward graph `F(inputs, tracked captures) -> (outs, residuals)`; the rest
     form the backward graph `B(residuals, douts) -> grads`. *Residuals* are the forward values
     the backward needs (activations, dropout masks, softmax outputs ...): F returns them, the
     tape node holds them until backward, then B consumes them and they are freed.

   At run time the call runs F (not G), records one tape node whose backward rule runs B, and the
   outer gradient proceeds as usual. Splits are cached per compiled graph and per pattern of which
   inputs are tracked.

Limitations (documented, handled by running the function eagerly so the tape records it op by op):
gradients of gradients through a jitted function (`grad_state.depth > 1`), graphs holding
If/While nodes (their backward is not implemented yet), and graphs that inlined a Cell with a
user-defined `bprop` (its rule, not its ops' rules, must be used: `Graph.notes["custom_bprop"]`).
"""
from __future__ import annotations

from ..common import grad_state
from ..common.tensor import Tensor, _wrap
from .run import O0Executor
from .interpret import interpret
from .ir import IF, OPAQUE, WHILE, Graph, Node, Value


def tracked_masks(graph, leaves):
    """Which tensor arguments and which captures carry an outer gradient's tape node."""
    ml = tuple(t._node is not None for t in leaves)
    mc = tuple(t._node is not None for _, t in graph.captures)
    return ml, mc


def differentiable(graph) -> bool:
    """Can the split be built? Not through If/While (no backward rule yet), and not for graphs
    that inlined a Cell with a user-defined bprop (that rule must be used, not the ops' rules)."""
    if any(g.notes.get("custom_bprop") for g in graph.all_graphs()):
        return False
    return not any(n.op is IF or n.op is WHILE for g in graph.all_graphs() for n in g.nodes)


class GraphSplit:
    """F and B for one graph and one tracked pattern (see the module docstring)."""

    def __init__(self, forward: Graph, backward: Graph, n_out: int, diff_outputs: list, grad_present: list):
        self.forward = forward
        self.backward = backward
        self.n_out = n_out                    # F's first n_out outputs are G's outputs
        self.diff_outputs = diff_outputs      # indices of G outputs that receive a cotangent
        self.grad_present = grad_present      # per tracked input: does B return a gradient for it
        self.forward_exec = O0Executor(forward)
        self.backward_exec = O0Executor(backward)


def build_split(graph: Graph, ml, mc) -> GraphSplit:
    from ..autograd import tape
    from .trace.session import TraceSession

    session = TraceSession(graph.name + "_grad", graph.source_fn)
    b = session.builder
    env, leaves = {}, []
    for p, tracked in zip(graph.params, ml):
        tr = session.param(p.aval, p.name)
        env[p.id] = tr
        if tracked:
            leaves.append(tr)
    for (v, t), tracked in zip(graph.captures, mc):
        if tracked:                           # a tracked capture becomes an explicit input of F
            tr = session.param(v.aval, v.name)
            env[v.id] = tr
            leaves.append(tr)
    n_fwd_params = len(b.params)

    with session.running():
        try:
            for tr in leaves:
                tr._node = tape.Node(None, (), {}, tr, ())
            leaf_nodes = [tr._node for tr in leaves]
            grad_state.depth += 1
            try:
                outs = interpret(graph, env)
            finally:
                grad_state.depth -= 1
            diff = [i for i, o in enumerate(outs)
                    if isinstance(o, Tensor) and o._node is not None and o.dtype.is_floating]
            douts = [session.param(outs[i]) for i in diff]
            grads, order = tape.backward([outs[i] for i in diff], douts, leaf_nodes)
            tape.release(order)
        finally:
            for tr in leaves:
                tr._node = None
    session.finished = True

    def out_value(o):
        if isinstance(o, Tensor):
            return session.value_of(o)
        if hasattr(o, "value") and isinstance(o.value, Value):     # a HostResult
            return o.value
        return o

    fwd_outs = [out_value(o) for o in outs]
    grad_vals = [session.value_of(g) if g is not None else None for g in grads]
    dout_ids = {p.id for p in b.params[n_fwd_params:]}
    return _split(graph.name, b, n_fwd_params, dout_ids, fwd_outs, grad_vals, diff, graph.source_fn)


def _split(name, b, n_fwd_params, dout_ids, fwd_outs, grad_vals, diff, source_fn) -> GraphSplit:
    # 1. which values depend on a cotangent
    dep = set(dout_ids)
    f_nodes, b_nodes = [], []
    for node in b.nodes:
        if any(isinstance(x, Value) and x.id in dep for x in node.inputs):
            b_nodes.append(node)
            dep.update(o.id for o in node.outputs)
        else:
            f_nodes.append(node)

    # 2. residuals: forward-side values the backward side reads (or returns as a gradient)
    residuals, seen = [], set()

    def need(x):
        if isinstance(x, Value) and x.id not in dep and x.kind != "capture" and x.id not in seen:
            seen.add(x.id)
            residuals.append(x)

    for node in b_nodes:
        for x in node.inputs:
            need(x)
    for g in grad_vals:
        need(g)

    captures = b.captures
    f_capture_ids = {x.id for n in f_nodes for x in n.inputs if isinstance(x, Value) and x.kind == "capture"}
    f_capture_ids |= {o.id for o in fwd_outs if isinstance(o, Value) and o.kind == "capture"}
    forward = Graph(name + "_forward", b.params[:n_fwd_params], [c for c in captures if c[0].id in f_capture_ids],
                    f_nodes, list(fwd_outs) + residuals, source_fn)

    # 3. the backward graph gets fresh params for the residuals and the cotangents
    vmap = {}
    b_params = []
    for r in residuals:
        p = Value(r.aval, "param", name=r.name)
        vmap[r.id] = p
        b_params.append(p)
    for p in b.params[n_fwd_params:]:
        q = Value(p.aval, "param", name=p.name)
        vmap[p.id] = q
        b_params.append(q)

    def m(x):
        return vmap.get(x.id, x) if isinstance(x, Value) else x

    new_nodes = []
    for node in b_nodes:
        nn = Node(node.op, [m(x) for x in node.inputs], node.attrs, (), node.multi, node.source)
        nn.outputs = tuple(Value(o.aval, "node", producer=(nn, i)) for i, o in enumerate(node.outputs))
        for o, no in zip(node.outputs, nn.outputs):
            vmap[o.id] = no
        new_nodes.append(nn)
    b_capture_ids = {x.id for n in new_nodes for x in n.inputs if isinstance(x, Value) and x.kind == "capture"}
    b_capture_ids |= {g.id for g in grad_vals if isinstance(g, Value) and g.kind == "capture"}
    backward = Graph(name + "_backward", b_params, [c for c in captures if c[0].id in b_capture_ids],
                     new_nodes, [m(g) for g in grad_vals], source_fn)
    return GraphSplit(forward, backward, len(fwd_outs), diff, [g is not None for g in grad_vals])


class GraphVJP:
    """The tape's 'primitive' for one call of a compiled graph: its backward rule runs B."""

    __slots__ = ("split", "residuals", "name")

    def __init__(self, split, residuals, name):
        self.split = split
        self.residuals = residuals
        self.name = f"graph:{name}"

    def bprop(self, inputs, out, dout):
        douts = [d._data for d in dout]
        res = self.residuals
        self.residuals = None                  # a graph call is differentiated once; free them after
        grads = self.split.backward_exec.run(*res, *douts)
        return tuple(_wrap(g) if g is not None else None for g in grads)


def run_with_tape(entry, leaves):
    """Run a compiled graph as one node of the enclosing PyNative tape. Returns the flat outputs
    (Tensors / objects / constants, aligned with the graph's outputs), or None when the caller
    must run the function eagerly instead (see the module docstring)."""
    graph = entry.graph
    ml, mc = tracked_masks(graph, leaves)
    if not any(ml) and not any(mc):
        return _plain(entry, leaves)
    if grad_state.depth > 1 or not differentiable(graph):
        return None
    key = (ml, mc)
    split = entry.grad_splits.get(key)
    if split is None:
        split = build_split(graph, ml, mc)
        entry.grad_splits[key] = split
    tracked = [t for t, m in zip(leaves, ml) if m] + [t for (_, t), m in zip(graph.captures, mc) if m]
    arrays = [t._data for t in leaves] + [t._data for t in tracked[sum(ml):]]
    results = split.forward_exec.run(*arrays)
    outs, residuals = results[:split.n_out], results[split.n_out:]
    flat = _wrap_outputs(graph, outs)
    diff_tensors = tuple(flat[i] for i in split.diff_outputs)
    if diff_tensors:
        # every differentiable output needs its own Tensor object (the tape keys cotangents by object)
        seen = set()
        fresh = []
        for i, t in zip(split.diff_outputs, diff_tensors):
            if id(t) in seen:
                t = _wrap(t._data)
                flat[i] = t
            seen.add(id(t))
            fresh.append(t)
        grad_state.record(GraphVJP(split, residuals, graph.name), tuple(tracked), {}, tuple(fresh))
    return flat


def _wrap_outputs(graph, outs):
    flat = []
    for o, r in zip(graph.outputs, outs):
        if isinstance(o, Value) and o.aval is not OPAQUE:
            flat.append(_wrap(r))
        else:
            flat.append(r)
    return flat


def _plain(entry, leaves):
    return _wrap_outputs(entry.graph, entry.executor.run(*[t._data for t in leaves]))


__all__ = ["run_with_tape", "build_split", "GraphSplit", "GraphVJP", "tracked_masks"]
