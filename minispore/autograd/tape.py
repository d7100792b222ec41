"""The PyNative autodiff tape.

While a gradient is being computed (`grad_state.depth > 0`) every differentiable primitive whose
inputs include a tracked tensor leaves a `Node` on its outputs: the primitive, its inputs and
attributes, its outputs, and the inputs' versions at that moment. `backward` walks those nodes in
reverse topological order (iteratively: a 10,000-op chain is fine) and calls each primitive's
backward rule. Because backward rules are written in minispore ops, running them while an outer
gradient is recording records them too: that is all higher-order gradients need.
"""
from __future__ import annotations

from ..common import grad_state
from ..common.errors import MinisporeRuntimeError
from ..common.tensor import Tensor, _wrap


class Node:
    """One recorded primitive application (or a leaf, when `prim` is None)."""

    __slots__ = ("prim", "inputs", "attrs", "outputs", "versions")

    def __init__(self, prim, inputs, attrs, outputs, versions):
        self.prim = prim
        self.inputs = inputs
        self.attrs = attrs
        self.outputs = outputs
        self.versions = versions

    def __repr__(self):
        return f"Node({self.prim.name if self.prim is not None else 'leaf'})"


def record(prim, inputs, attrs, outputs):
    # Runs once per differentiable op inside a gradient: kept to one Node and one versions tuple.
    if len(inputs) == 2:            # binary ops dominate; skip the generic comprehension
        x, y = inputs
        versions = (x._version if isinstance(x, Tensor) else 0, y._version if isinstance(y, Tensor) else 0)
    else:
        versions = tuple([x._version if isinstance(x, Tensor) else 0 for x in inputs])
    node = Node(prim, inputs, attrs, outputs, versions)
    if type(outputs) is tuple:
        for o in outputs:
            o._node = node
    else:
        outputs._node = node
    return node


grad_state.record = record


class _Identity:
    """Pseudo-primitive linking an inner gradient's leaf to the outer gradient's graph."""

    name = "identity"

    @staticmethod
    def bprop(inputs, out, dout):
        return (dout,)


IDENTITY = _Identity()


def make_leaf_node(x: Tensor, owner: Tensor) -> Node:
    """A leaf for `owner` (which shares x's data). If x is tracked by an outer gradient, the leaf is
    an identity node on x so gradients flow on to the outer computation."""
    if x._node is not None and grad_state.depth > 1:
        return Node(IDENTITY, (x,), {}, owner, (x._version,))
    return Node(None, (), {}, owner, ())


def make_leaf(x: Tensor) -> Tensor:
    t = _wrap(x._data)
    t._node = make_leaf_node(x, t)
    return t


# Marker pushed under a node's inputs on the DFS stack: when it is popped again, every input
# has been emitted, so the node below it comes next in the order. (A marker object avoids
# allocating a `(node, expanded)` tuple per visit; this loop runs once per recorded op.)
_EMIT = object()


def _toposort(roots, stop_nodes):
    """Nodes reachable from `roots` (tensors), inputs before users; does not expand `stop_nodes`.

    Iterative depth-first search (never recursion: a 10,000-op chain must not hit Python's
    recursion limit). Nodes hash by identity, so they go into `visited` directly.
    """
    order, visited = [], set()
    stack = [r._node for r in roots if isinstance(r, Tensor) and r._node is not None]
    pop, push = stack.pop, stack.append
    while stack:
        node = pop()
        if node is _EMIT:
            order.append(pop())
            continue
        if node in visited:
            continue
        visited.add(node)
        if node.prim is None or id(node) in stop_nodes:
            order.append(node)
            continue
        push(node)
        push(_EMIT)
        for x in node.inputs:
            if isinstance(x, Tensor):
                n = x._node
                if n is not None and n not in visited:
                    push(n)
    return order


def _zeros_like(t):
    from ..ops import functional as F
    return F.zeros_like(t)


def _check_versions(node):
    """Refuse to differentiate through a value that was overwritten in place after it was used."""
    for x, v in zip(node.inputs, node.versions):
        if isinstance(x, Tensor) and x._version != v:
            raise MinisporeRuntimeError(
                f"autodiff: an input of '{node.prim.name}' was modified in place (by __setitem__ or "
                f"set_data) after it was used; its gradient would be wrong. Copy the tensor "
                f"(`t.copy()`) before writing to it.")


def backward(outputs, douts, target_nodes):
    """Gradients of sum(<output_i, dout_i>) with respect to each leaf node in `target_nodes`.

    Returns a list aligned with `target_nodes` (None where no gradient reached the leaf), and the
    node order (for `release`).

    `grads` maps id(tensor) -> accumulated cotangent; `keep` holds each such tensor so its id
    cannot be reused while the walk runs. A gradient reaching a tensor twice is summed with `+`
    (a minispore op, so it is itself recorded under an outer gradient).
    """
    stop = {id(n): n for n in target_nodes}
    order = _toposort(outputs, stop)
    grads, keep = {}, {}
    for o, d in zip(outputs, douts):
        if isinstance(o, Tensor) and o._node is not None and d is not None:
            k = id(o)
            if k in grads:
                grads[k] = grads[k] + d
            else:
                grads[k] = d
                keep[k] = o

    pop_grad = grads.pop
    hooks = _hooks_for_this_backward() if _ready_hooks else None
    walk = reversed(order) if hooks is None else _walk_firing_ready(order, stop, target_nodes, grads, hooks)
    for node in walk:
        prim = node.prim
        if prim is None or id(node) in stop:
            continue
        outs = node.outputs
        if type(outs) is tuple:
            douts_n = [pop_grad(id(o), None) for o in outs]
            if all([d is None for d in douts_n]):
                continue
            dout = tuple([d if d is not None else _zeros_like(o) for d, o in zip(douts_n, outs)])
        else:
            dout = pop_grad(id(outs), None)
            if dout is None:
                continue
        # One pass over the inputs: refuse values overwritten in place since they were saved,
        # and note which inputs are tracked. The gradient of an untracked input (a constant
        # table, a mask, the data) would be discarded below, so the rule is told it may skip it.
        inputs = node.inputs
        needs = []
        for x, v in zip(inputs, node.versions):
            if isinstance(x, Tensor):
                if x._version != v:
                    _check_versions(node)       # raises with the full message
                needs.append(x._node is not None)
            else:
                needs.append(False)
        saved_needs = grad_state.needs_input_grad
        grad_state.needs_input_grad = (inputs, needs)
        try:
            attrs = node.attrs
            in_grads = prim.bprop(inputs, outs, dout, **attrs) if attrs else prim.bprop(inputs, outs, dout)
        finally:
            grad_state.needs_input_grad = saved_needs
        for x, g in zip(inputs, in_grads):
            if g is not None and isinstance(x, Tensor) and x._node is not None:
                k = id(x)
                prev = grads.get(k)
                if prev is None:
                    grads[k] = g
                    keep[k] = x
                else:
                    grads[k] = prev + g

    result = {}
    for k, g in grads.items():
        n = keep[k]._node
        if n is not None and id(n) in stop:
            result[id(n)] = g if id(n) not in result else result[id(n)] + g
    return [result.get(id(n)) for n in target_nodes], order


# ---- gradient-ready hooks ------------------------------------------------------------------
# A data-parallel reducer overlaps communication with backward (as PyTorch DDP's reducer does):
# it starts the all-reduce of a gradient bucket as soon as every gradient in it is final, while
# the walk goes on computing the gradients of earlier layers. For that it needs to hear, during
# `backward`, the moment a leaf's gradient can no longer change. That moment is known exactly
# from the node order: a leaf's gradient is final once the walk has passed the last node (in walk
# order) that has the leaf among its inputs. `_walk_firing_ready` wraps the walk and, before it
# hands out the next node, calls the hooks for the leaves whose last consumer was the node just
# processed; leaves no node consumed (or that got no gradient) are reported when the walk ends.
#
# Cost: when no hook is registered, `backward` runs the very same loop over `reversed(order)`
# (one list-truthiness test per call). A hook fires only for the backward of the gradient level
# it was registered at (`grad_state.depth` then equals the depth `backward` runs at): a gradient
# taken inside the forward pass (a gradient penalty, grad of grad) does not trigger it.

_ready_hooks = []        # [(callback(leaf_tensor, grad_or_None), depth)]


class GradReadyHook:
    """Handle of a registered gradient-ready callback; `remove()` or use it as a context manager."""

    __slots__ = ("_entry",)

    def __init__(self, entry):
        self._entry = entry

    def remove(self):
        try:
            _ready_hooks.remove(self._entry)
        except ValueError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def register_grad_ready_hook(callback) -> GradReadyHook:
    """Call `callback(tensor, grad)` during the next backward passes of gradients taken at the
    current nesting depth, once for every differentiated tensor (a Parameter in `weights`, or an
    input at `grad_position`), at the moment its gradient is final. `grad` is the raw accumulated
    gradient (before grad's cast to the tensor's dtype), or None if none reached the tensor."""
    entry = (callback, grad_state.depth)
    _ready_hooks.append(entry)
    return GradReadyHook(entry)


def _hooks_for_this_backward():
    d = grad_state.depth
    hooks = [cb for cb, depth in _ready_hooks if depth == d]
    return hooks or None


def _walk_firing_ready(order, stop, target_nodes, grads, hooks):
    """Yield `reversed(order)`; call the hooks for each target leaf as soon as its gradient is final."""
    n = len(order)
    targets = {}                         # id(leaf tensor) -> leaf tensor
    for leaf in target_nodes:
        t = leaf.outputs
        if isinstance(t, Tensor):
            targets[id(t)] = t
    last_use = {}                        # id(leaf tensor) -> walk position of its last consumer
    for pos in range(n):
        node = order[n - 1 - pos]
        if node.prim is None or id(node) in stop:
            continue
        for x in node.inputs:
            if isinstance(x, Tensor) and id(x) in targets:
                last_use[id(x)] = pos
    ready_after = {}                     # walk position -> leaves final once it is processed
    for k, pos in last_use.items():
        ready_after.setdefault(pos, []).append(targets[k])
    fired = set()

    def fire(leaves):
        for t in leaves:
            fired.add(id(t))
            g = grads.get(id(t))
            for cb in hooks:
                cb(t, g)

    for pos in range(n):
        yield order[n - 1 - pos]
        leaves = ready_after.get(pos)
        if leaves:
            fire(leaves)
    fire([t for k, t in targets.items() if k not in fired])


def release(order):
    """Break the tensor <-> node cycles of a finished outermost gradient so memory is freed now."""
    for node in order:
        outs = node.outputs
        if type(outs) is tuple:
            for o in outs:
                o._node = None
        elif outs is not None:
            outs._node = None
        node.inputs = node.outputs = None
