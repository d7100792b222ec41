"""Transpose folding (jit_level O1 and O2): give matrix products their operands transposed for free,
and never transpose a product's result.

A graph captured from `value_and_grad` of a Dense layer (`y = x @ W^T`) computes the weight's
gradient the way the chain rule writes it - the gradient of `W^T` is `x^T @ dy`, and the
gradient of `W` is its transpose:

    before                                              after
    %8  = transpose(%2) {perm=(1, 0)} : f32[20,32]      %8  = transpose(%2) {perm=(1, 0)} : f32[20,32]
    %9  = matmul(%0, %8) : f32[8,32]                    %9  = matmul(%0, %8) : f32[8,32]
    ...                                                 ...
    %39 = transpose(%0) {perm=(1, 0)} : f32[20,8]       %39 = transpose(%36) {perm=(1, 0)} : f32[32,8]
    %40 = matmul(%39, %36) : f32[20,32]                 %40 = matmul(%39, %0) : f32[32,20]
    %41 = transpose(%40) {perm=(1, 0)} : f32[32,20]     return ..., %40, ...
    return ..., %41, ...

Transposes are free in NumPy *as views*: `np.transpose` only swaps strides, and a GEMM reads an operand
transposed in place (BLAS's trans_a / trans_b: np.matmul passes a transposed 2-D operand to sgemm
as is; the cost model says the same, `costs.matrix_unit(takes_transposed=True)`). But a transposed
*result* is a strided view that somebody materialises later: the optimizer flattens each gradient
(`reshape(-1)` of a transposed 1024x1024 matrix is a 4 MB strided copy, ~7 ms on one core - more
than the GEMM that made it), the arena copies a returned view out, a reshape copies it. Writing
the product the other way round, `(a @ b)^T = b^T @ a^T`, makes the GEMM write the wanted layout
directly; its operands become transposes, which are views again.

The rules (primitive names: this pass runs on the graph the capture modes build):

1. `transpose(matmul(a, b), swap-last-two)` -> `matmul(transpose(b), transpose(a))`, when
   - both operands have rank >= 2 (no vector promotion: a 1-D operand's transpose is meaningless),
     batch dims included - `(a @ b)^T = b^T @ a^T` holds for every matrix of a stack, and
     broadcast batch dims broadcast the same way;
   - the permutation swaps exactly the last two axes (a transpose that moves batch axes, e.g.
     attention's (0, 2, 1, 3), is not a matrix transpose and stays);
   - the product has no other reader (then the old GEMM would still have to run: two GEMMs
     instead of one GEMM and a view) and is not a graph output.
   `bmm` is treated like matmul (the same kernel, rank >= 3).
2. The new operand transposes compose with transposes already there: `transpose(transpose(x,
   q), p)` is emitted as `transpose(x, q o p)`, or as `x` itself when that is the identity (the
   `x^T` of the example: the gradient's `transpose(%0)` undone). Transposes elsewhere are left as
   they are - a transpose of a transpose is a view of a view, free, and rewriting its readers
   would rebuild the graph below it (a lazy_inline top level's Call nodes among them).
3. Nodes left without readers by 1 (the old product, an operand's transpose) are dropped; no
   other node is removed (dead-code elimination of user code is control-flow inlining's job).
   The flipped product runs where the old product ran, so its operands are freed as early.

Numerics: `b^T @ a^T` is the same sum of the same products as `(a @ b)^T`, but BLAS may block it
differently, so results agree to rounding, not bit for bit (tests/graph/test_transpose_folding.py
compares with PyNative and a float64 reference).

`fold_transposes(graph)` folds every graph and subgraph (a subgraph held by several nodes, a
lazy_inline layer, once); `fold_transposes_here(graph)` only the graph's own nodes. The IR is
never mutated: unchanged nodes are shared with the input graph, and the input graph itself comes
back when nothing folds. O1 and O2 run this pass as operator fusion's first step
(`fuse(graph, prepare=fold_transposes_here)` in graph/run/o1.py and run/o2.py: fusion visits each
subgraph once and keeps a lazy_inline top level's Call nodes); O0 runs the graph as captured.
"""
from __future__ import annotations

from ...ops.primitive import AbstractTensor, get_primitive, interned_aval
from ..ir import Graph, Node, Value

_PRODUCTS = ("matmul", "bmm")          # primitives with `(a @ b)^T == b^T @ a^T` (rank >= 2 operands)
_DROPPABLE = ("transpose", "matmul", "bmm")  # pure nodes this pass may leave unread


def fold_transposes(graph: Graph, subgraphs: bool = True) -> Graph:
    """`graph` with its transposes folded (see the module docstring); `graph` itself if none folds.
    `subgraphs=False`: this graph's own nodes only - its If/While/Call nodes keep naming the
    subgraphs they named (`fold_transposes_here`)."""
    return _fold(graph, {}, subgraphs)


def fold_transposes_here(graph: Graph) -> Graph:
    """`fold_transposes(graph, subgraphs=False)`: the form operator fusion runs as its `prepare`
    step (passes/fusion.py `fuse(graph, prepare=...)`, from run/o1.py and run/o2.py). Fusion visits
    every subgraph once itself, and a lazy_inline top level whose callee is folded must keep its
    Call nodes (FusionResult.exec_graph), so each graph is folded on its own."""
    return _fold(graph, {}, False)


def _fold(graph, memo, deep):
    new = memo.get(id(graph))
    if new is None:
        new = memo[id(graph)] = _GraphFolder(graph, memo, deep).run()
    return new


def _tensor(x) -> bool:
    return isinstance(x, Value) and isinstance(x.aval, AbstractTensor)


def _perm(node):
    """The normalised permutation of a transpose node on a tensor Value, else None."""
    if not (node.is_primitive and node.op.name == "transpose" and len(node.inputs) == 1
            and _tensor(node.inputs[0]) and set(node.attrs) == {"perm"}):
        return None
    n = len(node.inputs[0].aval.shape)
    try:
        perm = tuple(int(p) % n for p in node.attrs["perm"]) if n else ()
    except (TypeError, ValueError):
        return None
    return perm if sorted(perm) == list(range(n)) else None


def _swaps_last_two(perm) -> bool:
    n = len(perm)
    return n >= 2 and perm == tuple(range(n - 2)) + (n - 1, n - 2)


def _swap_last_two(v):
    """The permutation swapping the last two axes of tensor Value `v` (rank >= 2; an operand may
    have fewer batch dims than the product, which broadcasts them)."""
    n = len(v.aval.shape)
    return tuple(range(n - 2)) + (n - 1, n - 2)


def _use_counts(graph) -> dict:
    """Value id -> how many node inputs and graph outputs read it."""
    uses: dict = {}
    for node in graph.nodes:
        for x in node.inputs:
            if isinstance(x, Value):
                uses[x.id] = uses.get(x.id, 0) + 1
    for o in graph.outputs:
        if isinstance(o, Value):
            uses[o.id] = uses.get(o.id, 0) + 1
    return uses


class _GraphFolder:
    """Rewrites one graph's nodes in order. `vmap`: original Value -> the Value that replaces it."""

    def __init__(self, graph, memo, deep):
        self.graph = graph
        self.memo = memo
        self.deep = deep                   # fold the subgraphs of If/While/Call nodes too
        self.uses = _use_counts(graph)
        self.returned = {o.id for o in graph.outputs if isinstance(o, Value)}
        self.vmap: dict = {}
        self.nodes: list = []
        self.changed = False

    def run(self) -> Graph:
        if not self.deep and not any(_perm(n) is not None for n in self.graph.nodes):
            return self.graph              # (the common subgraph: nothing to look at)
        flip_at = self._products_to_flip()
        for node in self.graph.nodes:
            t = flip_at.get(id(node))
            if t is not None:
                self._flip(node, t)
            elif node.outputs and node.outputs[0] in self.vmap:
                continue                   # a transpose whose product was flipped where it ran
            elif not self._fold_transpose(node):
                self._keep(node)
        if not self.changed:
            return self.graph
        outputs = [self.vmap.get(o, o) if isinstance(o, Value) else o for o in self.graph.outputs]
        g = self.graph
        out = Graph(g.name, g.params, g.captures, _drop_unread(self.nodes, outputs, self._unread_before()), outputs,
                    g.source_fn)
        out.notes = dict(g.notes)
        return out

    def _unread_before(self) -> set:
        """Ids of the original nodes' outputs that nothing read before this pass."""
        return {o.id for node in self.graph.nodes for o in node.outputs if o.id not in self.uses}

    def _products_to_flip(self) -> dict:
        """id(product node) -> the transpose node rule 1 turns it into. The flipped product runs
        where the product ran (not where its transpose was, often at the graph's end: the
        backward's weight gradients are returned last), so its operands are freed as early."""
        flip_at = {}
        for node in self.graph.nodes:
            perm = _perm(node)
            if perm is None or not _swaps_last_two(perm) or node.inputs[0].kind != "node":
                continue
            producer = node.inputs[0].producer[0]
            if self._product_to_flip(producer, node.inputs[0]):
                flip_at[id(producer)] = node
        return flip_at

    # -- the rules -----------------------------------------------------------------------------------
    def _fold_transpose(self, node) -> bool:
        """Rule 1 for a transpose of a product this pass made (`transpose(transpose(a @ b))`: the
        inner one was flipped where its product ran, `_products_to_flip`); False: keep the node."""
        perm = _perm(node)
        if perm is None or not _swaps_last_two(perm):
            return False
        src = self.vmap.get(node.inputs[0], node.inputs[0])
        if src is node.inputs[0] or src.kind != "node":
            return False
        producer = src.producer[0]
        if not self._product_to_flip(producer, node.inputs[0]):
            return False
        self._flip(producer, node)
        return True

    def _flip(self, product, transpose):
        """Rule 1: `transpose(a @ b)` becomes `b^T @ a^T` (a, b: the product's current inputs)."""
        a, b = (self.vmap.get(x, x) for x in product.inputs)
        out = transpose.outputs[0]
        self.vmap[out] = self._emit(product.op, (self._transposed(b, _swap_last_two(b), product),
                                                 self._transposed(a, _swap_last_two(a), product)),
                                    product.attrs, out.aval, product.source, out.name)

    def _product_to_flip(self, producer, original) -> bool:
        """Rule 1's conditions on the product `producer` whose output `original` is transposed."""
        if not (producer.is_primitive and producer.op.name in _PRODUCTS and not producer.multi
                and not producer.attrs and len(producer.inputs) == 2):
            return False
        a, b = producer.inputs
        if not (_tensor(a) and _tensor(b) and len(a.aval.shape) >= 2 and len(b.aval.shape) >= 2):
            return False
        # the one reader is this transpose (the original graph's count: a second reader, or being
        # returned, would keep the old product alive)
        return self.uses.get(original.id, 0) == 1 and original.id not in self.returned

    def _transposed(self, v, perm, near):
        """A Value holding `transpose(v, perm)`: v's own base when v is a transpose that `perm`
        undoes, a composed transpose of it, or a new transpose node (a view, free for the GEMM)."""
        producer = v.producer[0] if v.kind == "node" else None
        inner = _perm(producer) if producer is not None else None
        if inner is not None:
            base = producer.inputs[0]
            composed = tuple(inner[p] for p in perm)
            if composed == tuple(range(len(composed))):
                return base
            v, perm = base, composed
        shape = v.aval.shape
        aval = interned_aval(tuple(shape[p] for p in perm), v.aval.dtype)
        return self._emit(get_primitive("transpose"), (v,), {"perm": perm}, aval, near.source)

    # -- building ------------------------------------------------------------------------------------
    def _emit(self, op, inputs, attrs, aval, source, name=None) -> Value:
        node = Node(op, inputs, dict(attrs), (), False, source)
        node.outputs = (Value(aval, "node", producer=(node, 0), name=name),)
        self.nodes.append(node)
        self.changed = True
        return node.outputs[0]

    def _keep(self, old):
        """`old`, shared when its inputs and subgraphs stay the same, else a copy reading the new
        inputs (new output Values: the IR is SSA and never mutated)."""
        vmap = self.vmap
        inputs = [vmap.get(x, x) if isinstance(x, Value) else x for x in old.inputs]
        attrs = old.attrs
        for k, v in old.attrs.items() if self.deep else ():
            if isinstance(v, Graph):
                folded = _fold(v, self.memo, True)
                if folded is not v:
                    if attrs is old.attrs:
                        attrs = dict(old.attrs)
                    attrs[k] = folded
        if attrs is old.attrs and all(a is b for a, b in zip(inputs, old.inputs)):
            self.nodes.append(old)
            return
        node = Node(old.op, inputs, attrs, (), old.multi, old.source)
        node.outputs = tuple(Value(o.aval, "node", producer=(node, k), name=o.name)
                             for k, o in enumerate(old.outputs))
        for o, n in zip(old.outputs, node.outputs):
            vmap[o] = n
        self.nodes.append(node)
        self.changed = True


def _drop_unread(nodes, outputs, unread_before):
    """`nodes` without the transposes and products nothing reads any more (rule 3) - except those
    nothing read before the pass either (`unread_before`): user code's dead nodes are not this
    pass's to remove."""
    read = {o.id for o in outputs if isinstance(o, Value)}
    kept = []
    for node in reversed(nodes):
        out = node.outputs[0] if node.outputs else None
        if (node.is_primitive and node.op.name in _DROPPABLE and not node.multi and out.id not in read
                and out.id not in unread_before):
            continue
        kept.append(node)
        for x in node.inputs:
            if isinstance(x, Value):
                read.add(x.id)
    kept.reverse()
    return kept


__all__ = ["fold_transposes", "fold_transposes_here"]
