"""Rematerialize cheap residuals: recompute views and constants in the backward graph instead of
saving them from the forward graph.

Graph autodiff splits a graph into F(inputs) -> (outputs, residuals) and B(residuals, cotangents)
-> gradients (autodiff.build_split). Many residuals cost nothing to recompute: a transposed weight
(`W.T`, a view), a reshaped or transposed activation (a view of another residual), a `zeros_like`
(a constant of known shape). Passing them from F to B anyway costs one more output of F, one more
input of B and - in arena mode, where a called graph's outputs are copied into its caller's
buffers - real memory for what was a free view.

`rematerialize(forward, backward, n_out)` moves every residual whose producer is cheap (`is_cheap`:
a one-output view that is free on every device or a permutation - the primitive's `view` fact of
kind reinterpret, broadcast or permute - or an op with a `from_shape` fact) and whose own inputs
are available in B (F's inputs, other residuals, or cheap values themselves) into B, where it is
recomputed from those. Two more rules:

* a residual made by an op with a `from_shape` fact (`zeros_like`, `ones_like`) is made again in B
  from its shape alone by the primitive that fact names (`zeros` / `ones`), whatever its input
  (autodiff makes them for outputs of a multi-output op that get no cotangent);
* when two or more saved residuals are same-size views of ONE value F does not save (each of
  `matmul(h, wq)`, `matmul(h, wk)`, `matmul(h, wv)` saves its own `h.T` for the weight gradient),
  that value is saved once instead and the views are taken again in B: fewer, not larger, saved
  activations. Returns the new F (its outputs: the original
outputs, then the residuals still saved; nodes only needed by the moved ones removed) and the new
B, whose params are: the F inputs it now reads, the saved residuals, then the cotangents - plus
`sources`: for each B param before the cotangents, ("in", i) = F's input i, or ("out", j) = F's
output n_out + j.
"""
from __future__ import annotations

from ..ir import Graph, Node, Value

# view kinds recomputed in B (a slice is not: its input is bigger than what it saves)
_CHEAP_VIEWS = ("reinterpret", "broadcast", "permute")
# views that keep the element count: several of them of one unsaved value are replaced by that value
_SAME_SIZE_VIEWS = ("reinterpret", "permute")
_MAX_DEPTH = 16


def is_cheap(prim) -> bool:
    """Is a one-output node of `prim` recomputed in B rather than saved? A view of kind reinterpret,
    broadcast or permute, or a constant of known shape (`from_shape`: made from the aval alone)."""
    view = prim.view
    return (view is not None and view.kind in _CHEAP_VIEWS) or prim.from_shape is not None


def _same_size_view(prim) -> bool:
    return prim.view is not None and prim.view.kind in _SAME_SIZE_VIEWS


def rematerialize(forward: Graph, backward: Graph, n_out: int):
    params = {p.id: i for i, p in enumerate(forward.params)}
    residuals = forward.outputs[n_out:]
    res_ids = {r.id for r in residuals if isinstance(r, Value)}
    memo: dict = {}

    def cheap(v, depth=0):
        """Can v be recomputed in B from values B has?"""
        if v.id in memo:
            return memo[v.id]
        ok = False
        if v.kind == "node" and depth < _MAX_DEPTH:
            node = v.producer[0]
            if node.is_primitive and is_cheap(node.op) and len(node.outputs) == 1:
                ok = node.op.from_shape is not None or all(x.id in params or x.id in res_ids or cheap(x, depth + 1)
                                                    for x in node.inputs if isinstance(x, Value))
        memo[v.id] = ok
        return ok

    moved = {r.id for r in residuals if isinstance(r, Value) and r.id not in params and cheap(r)}
    kept = [r for r in residuals if isinstance(r, Value) and r.id not in params and r.id not in moved]
    # several saved views of ONE unsaved value (x.T for each of wq, wk, wv's weight gradients):
    # save that value once instead and take the views again in B
    by_root: dict = {}
    for r in kept:
        root = _view_root(r, params)
        if root is not None:
            by_root.setdefault(root.id, (root, []))[1].append(r)
    new_roots = []
    for root, views in by_root.values():
        if len(views) >= 2:
            new_roots.append(root)
            res_ids.add(root.id)
            memo.clear()                      # (cheap() answers may change now that root is saved)
            moved.update(v.id for v in views)
    if new_roots:
        kept = [r for r in kept if r.id not in moved] + new_roots
    kept_ids = {r.id for r in kept}
    n_res = len(residuals)
    old_res_params, douts = backward.params[:n_res], backward.params[n_res:]

    # B's new params: F inputs it reads (made on demand), the saved residuals (their old B params)
    in_params: dict = {}
    fmap: dict = {}                # F value id -> B value

    def in_param(i):
        p = in_params.get(i)
        if p is None:
            src = forward.params[i]
            p = in_params[i] = Value(src.aval, "param", name=src.name)
        return p

    for r, old in zip(residuals, old_res_params):
        if isinstance(r, Value) and r.id in kept_ids:
            fmap[r.id] = old
    for root in new_roots:
        fmap[root.id] = Value(root.aval, "param", name=root.name)

    def f_value(x):
        if not isinstance(x, Value):
            return x
        if x.id in params:
            return in_param(params[x.id])
        return fmap[x.id]

    # recompute the moved residuals (and the cheap values they need) at the start of B, in F's order
    needed: set = set()

    def need(v):
        if v.id in needed or v.id in params or v.id in kept_ids:
            return
        needed.add(v.id)
        node = v.producer[0]
        if node.is_primitive and node.op.from_shape is not None:
            return                            # made from its shape in B: its input is not needed
        for x in node.inputs:
            if isinstance(x, Value):
                need(x)

    for vid in moved:
        need(next(r for r in residuals if isinstance(r, Value) and r.id == vid))
    nodes = []
    for node in forward.nodes:
        if node.outputs and node.outputs[0].id in needed:
            if node.is_primitive and node.op.from_shape is not None:
                aval = node.outputs[0].aval
                nn = Node(_filled_prim(node.op), [], {"shape": aval.shape, "dtype": aval.dtype}, (), False,
                          node.source)
            else:
                nn = Node(node.op, [f_value(x) for x in node.inputs], node.attrs, (), node.multi, node.source)
            nn.outputs = (Value(node.outputs[0].aval, "node", producer=(nn, 0), name=node.outputs[0].name),)
            fmap[node.outputs[0].id] = nn.outputs[0]
            nodes.append(nn)

    # B's own nodes, with the old residual params replaced
    bmap = {}
    for r, old in zip(residuals, old_res_params):
        bmap[old.id] = f_value(r) if isinstance(r, Value) else r

    def b_value(x):
        return bmap.get(x.id, x) if isinstance(x, Value) else x

    for node in backward.nodes:
        nn = Node(node.op, [b_value(x) for x in node.inputs], node.attrs, (), node.multi, node.source)
        nn.outputs = tuple(Value(o.aval, "node", producer=(nn, i), name=o.name) for i, o in enumerate(node.outputs))
        for o, no in zip(node.outputs, nn.outputs):
            bmap[o.id] = no
        nodes.append(nn)

    order = sorted(in_params)
    sources = [("in", i) for i in order] + [("out", j) for j in range(len(kept))]
    b_params = [in_params[i] for i in order] + [fmap[r.id] for r in kept] + list(douts)
    used_captures = {x.id for n in nodes for x in n.inputs if isinstance(x, Value) and x.kind == "capture"}
    b_outputs = [b_value(o) for o in backward.outputs]
    used_captures |= {o.id for o in b_outputs if isinstance(o, Value) and o.kind == "capture"}
    captures = [c for c in list(backward.captures) + list(forward.captures) if c[0].id in used_captures]
    seen, uniq = set(), []
    for c in captures:
        if c[0].id not in seen:
            seen.add(c[0].id)
            uniq.append(c)
    new_b = Graph(backward.name, b_params, uniq, nodes, b_outputs, backward.source_fn)

    new_f = _dead_code_free(Graph(forward.name, forward.params, forward.captures, forward.nodes,
                                  list(forward.outputs[:n_out]) + kept, forward.source_fn))
    return new_f, new_b, sources


def _view_root(v, params):
    """The value `v` is a same-size view of (through a chain of views), if that value is a node
    output of F (not an input: inputs reach B anyway); else None."""
    root = None
    for _ in range(_MAX_DEPTH):
        if v.kind != "node":
            break
        node = v.producer[0]
        if not (node.is_primitive and _same_size_view(node.op) and len(node.outputs) == 1):
            break
        ins = [x for x in node.inputs if isinstance(x, Value)]
        if len(ins) != 1:
            break
        v = root = ins[0]
    if root is None or root.id in params or root.kind != "node":
        return None
    return root


def _filled_prim(like):
    from ...ops.primitive import get_primitive
    return get_primitive(like.from_shape)


def _dead_code_free(g: Graph) -> Graph:
    """g without the pure primitive nodes nothing reads (random ops, collectives and structural
    nodes stay)."""
    from ..passes.inline_control_flow import keeps_position
    live = {o.id for o in g.outputs if isinstance(o, Value)}
    keep = []
    for node in reversed(g.nodes):
        if (not node.is_primitive or keeps_position(node.op)
                or any(o.id in live for o in node.outputs)):
            keep.append(node)
            live.update(x.id for x in node.inputs if isinstance(x, Value))
    keep.reverse()
    caps = [c for c in g.captures if c[0].id in live]
    return Graph(g.name, g.params, caps, keep, g.outputs, g.source_fn)


__all__ = ["rematerialize", "is_cheap"]
