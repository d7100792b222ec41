"""Control-flow inlining: If nodes whose condition is known at compile time, and Call nodes,
are replaced by the nodes of the subgraph they run (MindSpore's "control-flow inline").

The ast capture mode already specialises `if` on *Python* values (only the taken branch is
interpreted). What reaches this pass are If nodes whose condition is a tensor computed only from
constants - `if ops.ones(()) > 0:`, a shape-derived flag built with ops - and Call nodes. Steps:

1. **Constant folding**: a primitive node whose inputs are all compile-time constants (Python values
   in the node, or outputs of nodes folded before it) is evaluated now with its CPU kernel. Random
   primitives are never folded (they must draw at run time), and outputs larger than
   `MAX_FOLD_ELEMENTS` are not kept (folding is for conditions and small shape arithmetic).
   Captures are never constants: a Parameter or a captured tensor is read when the graph runs.
2. **Inline**: an If node whose condition folded to a value, or is a Python bool, becomes the nodes of
   the branch it takes (cloned, with the branch's parameters replaced by the node's operands); a Call
   node becomes the nodes of its callee, except the Calls of `@lazy_inline` layers, which stay calls
   of their one shared subgraph. Subgraphs of the remaining If/While/Call nodes are processed too.
3. **Dead-code elimination**: nodes whose outputs nothing uses are dropped - unless they have effects
   (host calls, random primitives, or control flow containing them). The folded condition's own
   nodes usually go here. Params are kept (the graph's signature does not change); unused captures
   are dropped.
"""
from __future__ import annotations

import numpy as np

from ..ir import CALL, HOST_CALL, IF, WHILE, Graph, Node, Value

MAX_FOLD_ELEMENTS = 4096


def is_random(prim) -> bool:
    """Does this primitive draw random numbers (its kernel reads the global generator)? Its `random`
    fact (ops/primitive.py) says so."""
    return prim.random


def keeps_position(prim) -> bool:
    """Must this primitive run where the program puts it, even if nothing reads its output? Random
    draws (the generator's order decides the numbers) and collectives (every rank of a group must
    issue the same ones in the same order) do: their `random` / `collective` facts say so."""
    return prim.random or prim.collective


def draws_random(graph) -> bool:
    return any(n.is_primitive and is_random(n.op) for g in graph.all_graphs() for n in g.nodes)


def _has_effects(node) -> bool:
    if node.op is HOST_CALL:
        return True
    if node.is_primitive:
        return keeps_position(node.op)
    return any(n.op is HOST_CALL or (n.is_primitive and keeps_position(n.op))
               for sub in node.subgraphs() for g in sub.all_graphs() for n in g.nodes)


class _Inliner:
    def __init__(self, graph, memo):
        self.graph = graph
        self.memo = memo                      # id(subgraph) -> processed subgraph (shared stays shared)
        self.nodes: list = []
        self.captures = list(graph.captures)
        self._capture_of = {id(t): v for v, t in graph.captures}
        self.consts: dict = {}                # new Value id -> folded numpy value

    def capture(self, v, t):
        hit = self._capture_of.get(id(t))
        if hit is None:
            hit = Value(v.aval, "capture", producer=t, name=v.name)
            self._capture_of[id(t)] = hit
            self.captures.append((hit, t))
        return hit

    def known(self, x):
        """The truth value of an If condition if it is known at compile time, else None."""
        if isinstance(x, Value):
            c = self.consts.get(x.id)
            if c is None or np.size(c) != 1:
                return None
            return bool(np.asarray(c).reshape(()))
        if isinstance(x, (bool, np.bool_, int, float)):
            return bool(x)
        return None

    def process(self, g, env):
        for v, t in g.captures:
            if v.id not in env:
                env[v.id] = self.capture(v, t)
        for node in g.nodes:
            ins = [env[x.id] if isinstance(x, Value) else x for x in node.inputs]
            if node.op is CALL and "lazy_inline" not in node.attrs:
                sub = node.attrs["graph"]
                outs = self.process(sub, {p.id: a for p, a in zip(sub.params, ins)})
            elif node.op is IF and self.known(ins[0]) is not None:
                sub = node.attrs["then_graph" if self.known(ins[0]) else "else_graph"]
                outs = self.process(sub, {p.id: a for p, a in zip(sub.params, ins[1:])})
            else:
                outs = self.clone(node, ins)
            for v, o in zip(node.outputs, outs):
                env[v.id] = o
        return [env[o.id] if isinstance(o, Value) else o for o in g.outputs]

    def clone(self, node, ins):
        attrs = node.attrs
        changed = len(ins) != len(node.inputs) or any(a is not b for a, b in zip(ins, node.inputs))
        # a @lazy_inline layer's CALL stays a CALL of ONE shared callee (processed once, via memo):
        # inlining it here would undo what lazy_inline is for
        if node.op is IF or node.op is WHILE or node.op is CALL:
            attrs = dict(attrs)
            for k, v in attrs.items():
                if isinstance(v, Graph):
                    attrs[k] = _inline(v, self.memo)
                    changed = changed or attrs[k] is not v
        if not changed:
            # nothing to rewrite: the node itself goes into the result (a graph without foldable
            # control flow - a lazy_inline model's top level - comes back as it was, see _inline)
            self.nodes.append(node)
            if node.is_primitive:
                self.fold(node)
            return node.outputs
        new = Node(node.op, ins, attrs, (), node.multi, node.source)
        new.outputs = tuple(Value(o.aval, "node", producer=(new, i), name=o.name) for i, o in enumerate(node.outputs))
        self.nodes.append(new)
        if node.is_primitive:
            self.fold(new)
        return new.outputs

    def fold(self, node):
        if keeps_position(node.op) or sum(o.aval.size for o in node.outputs) > MAX_FOLD_ELEMENTS:
            return
        args = []
        for x in node.inputs:
            if isinstance(x, Value):
                c = self.consts.get(x.id)
                if c is None:
                    return
                args.append(c)
            else:
                args.append(x)
        try:
            r = node.op.impl(*args, **node.attrs)
        except Exception:  # noqa: BLE001 - not foldable: it will run (and report) at run time
            return
        results = r if node.multi else (r,)
        for o, a in zip(node.outputs, results):
            self.consts[o.id] = np.asarray(a).astype(o.aval.dtype.np, copy=False)


def _dce(nodes, outputs):
    live = {o.id for o in outputs if isinstance(o, Value)}
    kept = []
    for node in reversed(nodes):
        if any(o.id in live for o in node.outputs) or _has_effects(node):
            kept.append(node)
            live.update(x.id for x in node.inputs if isinstance(x, Value))
    kept.reverse()
    return kept, live


def _inline(graph, memo):
    hit = memo.get(id(graph))
    if hit is not None and hit[0] is graph:
        return hit[1]
    r = _Inliner(graph, memo)
    env = {p.id: p for p in graph.params}
    for v, _ in graph.captures:
        env[v.id] = v
    outputs = r.process(graph, env)
    nodes, live = _dce(r.nodes, outputs)
    captures = [(v, t) for v, t in r.captures if v.id in live]
    if (len(nodes) == len(graph.nodes) and all(a is b for a, b in zip(nodes, graph.nodes))
            and len(captures) == len(graph.captures) and all(a is b for a, b in zip(outputs, graph.outputs))):
        memo[id(graph)] = (graph, graph)      # unchanged: shared callees stay the same objects
        return graph
    new = Graph(graph.name, graph.params, captures, nodes, outputs, graph.source_fn)
    new.notes.update(getattr(graph, "notes", {}))
    memo[id(graph)] = (graph, new)
    return new


def inline_control_flow(graph: Graph) -> Graph:
    """The graph with constant-condition If nodes and Call nodes inlined (see the module docstring)."""
    return _inline(graph, {})


fold_constants_and_inline = inline_control_flow

__all__ = ["inline_control_flow", "fold_constants_and_inline", "is_random", "keeps_position", "draws_random",
           "MAX_FOLD_ELEMENTS"]
