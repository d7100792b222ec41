"""The IR verifier: checks the invariants every pass and executor relies on.

1. SSA: every Value is defined exactly once (a param, a capture, or one node output) and before
   its first use; graph outputs are defined Values or constants.
2. Types: re-running each primitive's inference rule on its input avals gives exactly the node's
   output avals (shape and dtype), so no pass can silently change a value's type.
3. Structure: subgraph signatures agree with the node that holds them (If branches take the
   operands and return the outputs; While's cond takes the carry and returns one element, its body
   maps the carry to itself; Call's callee takes the arguments and returns the outputs).

Subgraphs are verified recursively; they are closed (they may not use a Value of an enclosing
graph). `verify(graph)` returns None or raises `GraphVerifyError` naming the graph, the node and
the user's source line.
"""
from __future__ import annotations

from ..common.errors import MinisporeRuntimeError
from ..ops.primitive import AbstractTensor
from .ir import CALL, HOST_CALL, IF, OPAQUE, WHILE, Graph, Value, template_slots
from .printer import format_aval


class GraphVerifyError(MinisporeRuntimeError):
    """A graph breaks an IR invariant (a bug in a capture mode or a pass, not in user code)."""


def _fail(graph, node, msg):
    where = f" (node '{node.op.name}' from {node.where()})" if node is not None else ""
    raise GraphVerifyError(f"graph '{graph.name}' is invalid: {msg}{where}")


def _avals_equal(a, b):
    if isinstance(a, AbstractTensor) and isinstance(b, AbstractTensor):
        return a.shape == b.shape and a.dtype is b.dtype
    return a is b


def _avals_match(got, want):
    """Two aval sequences agree element by element. A plain loop with an identity fast path: a
    lazy_inline model checks every layer's Call signature, tens of avals each, often the very
    same AbstractTensor objects."""
    if len(got) != len(want):
        return False
    for a, b in zip(got, want):
        if a is not b and not _avals_equal(a, b):
            return False
    return True


def _sig(avals):
    return "(" + ", ".join(format_aval(a) for a in avals) + ")"


def _check_signature(graph, node, sub, in_avals, out_avals, what):
    if not isinstance(sub, Graph):
        _fail(graph, node, f"{what} must be a Graph, got {type(sub).__name__}")
    got_in = sub.param_avals
    if not _avals_match(got_in, in_avals):
        _fail(graph, node, f"{what} '{sub.name}' takes {_sig(got_in)} but is given {_sig(in_avals)}")
    if out_avals is not None:
        got_out = [o.aval if isinstance(o, Value) else None for o in sub.outputs]
        if not _avals_match(got_out, out_avals):
            _fail(graph, node, f"{what} '{sub.name}' returns {_sig(got_out)}, expected {_sig(out_avals)}")


def _is_scalar_condition(aval):
    return isinstance(aval, AbstractTensor) and aval.size == 1


def _input_aval(x):
    return x.aval if isinstance(x, Value) else x


def _check_primitive(graph, node):
    args = [x.aval if isinstance(x, Value) else x for x in node.inputs]
    for x in node.inputs:
        if isinstance(x, Value) and x.aval is OPAQUE:
            _fail(graph, node, "a primitive cannot take an opaque Python value (a host call result) as input")
    try:
        avals = node.op.infer(*args, **node.attrs)
    except Exception as e:                  # noqa: BLE001 - report any inference failure as invalid IR
        _fail(graph, node, f"inference rejects the node's inputs: {e}")
    avals = avals if type(avals) is tuple else (avals,)
    if len(avals) != len(node.outputs):
        _fail(graph, node, f"inference gives {len(avals)} outputs, the node has {len(node.outputs)}")
    for i, (a, o) in enumerate(zip(avals, node.outputs)):
        if not _avals_equal(a, o.aval):
            _fail(graph, node, f"output {i} is recorded as {format_aval(o.aval)} but inference gives {format_aval(a)}")


def _check_structural(graph, node):
    op = node.op
    out_avals = [o.aval for o in node.outputs]
    ins = [x.aval if type(x) is Value else _input_aval(x) for x in node.inputs]
    if op is IF:
        if not node.inputs:
            _fail(graph, node, "If needs a condition input")
        cond = node.inputs[0]
        if isinstance(cond, Value):
            if not _is_scalar_condition(cond.aval):
                _fail(graph, node, f"If's condition must have one element, got {format_aval(cond.aval)}")
        elif not isinstance(cond, bool):
            _fail(graph, node, f"If's condition must be a tensor Value or a bool, got {cond!r}")
        for key in ("then_graph", "else_graph"):
            _check_signature(graph, node, node.attrs.get(key), ins[1:], out_avals, f"If.{key}")
    elif op is WHILE:
        cond_g, body_g = node.attrs.get("cond_graph"), node.attrs.get("body_graph")
        _check_signature(graph, node, cond_g, ins, None, "While.cond_graph")
        if len(cond_g.outputs) != 1 or not isinstance(cond_g.outputs[0], Value) \
                or not _is_scalar_condition(cond_g.outputs[0].aval):
            _fail(graph, node, f"While.cond_graph '{cond_g.name}' must return one one-element tensor")
        _check_signature(graph, node, body_g, ins, ins, "While.body_graph")
        if not all(_avals_equal(a, b) for a, b in zip(ins, out_avals)) or len(ins) != len(out_avals):
            _fail(graph, node, f"While's outputs {_sig(out_avals)} must equal its carry {_sig(ins)}")
    elif op is CALL:
        _check_signature(graph, node, node.attrs.get("graph"), ins, out_avals, "Call.graph")
    elif op is HOST_CALL:
        if not callable(node.attrs.get("fn")):
            _fail(graph, node, "HostCall needs a callable 'fn' attribute")
        _check_template(graph, node, node.attrs.get("template"), len(node.inputs))
    else:
        _fail(graph, node, f"unknown op {op!r}")
    for sub in node.subgraphs():
        if id(sub) not in _verified:         # a subgraph called N times (a lazy_inline layer) is checked once
            verify(sub)


_callee_avals: dict = {}    # id(callee) -> (callee, param avals, output avals), during one top-level verify


def _callee_signature(sub):
    """A callee's param avals and output avals (None for an output that is a constant), listed once
    per top-level verify however many Call nodes name it (a lazy_inline layer graph is called from
    every layer; the graphs cannot change while verify runs)."""
    hit = _callee_avals.get(id(sub))
    if hit is None or hit[0] is not sub:
        hit = _callee_avals[id(sub)] = (sub, sub.param_avals,
                                        [o.aval if isinstance(o, Value) else None for o in sub.outputs])
    return hit


def _check_call(graph, node, all_values):
    """A Call node: the callee takes the node's inputs and returns its outputs. The common case -
    every input a Value, the avals equal - is one list comparison each way (AbstractTensor's `==`
    is `_avals_equal`: same shape, same dtype object; other avals compare by identity); anything
    else goes through `_check_signature`, which finds the first mismatch and reports it."""
    sub = node.attrs.get("graph")
    if not (all_values and type(sub) is Graph):
        _check_structural(graph, node)
        return
    _, param_avals, out_avals = _callee_signature(sub)
    if [x.aval for x in node.inputs] != param_avals or [o.aval for o in node.outputs] != out_avals:
        _check_structural(graph, node)
        return
    for extra in node.attrs.values():       # the callee (and any other graph attribute), checked once
        if isinstance(extra, Graph) and id(extra) not in _verified:
            verify(extra)


def _check_template(graph, node, template, n_inputs):
    seen = set(template_slots(template))
    if seen != set(range(n_inputs)):
        _fail(graph, node, f"HostCall template uses slots {sorted(seen)} for {n_inputs} inputs")


_verified: set = set()      # ids of the subgraphs checked during the current top-level verify (shared ones once)


def verify(graph: Graph) -> None:
    """Check `graph` (and its subgraphs); raise GraphVerifyError on the first broken invariant."""
    top = not _verified
    _verified.add(id(graph))
    try:
        _verify(graph)
    finally:
        if top:
            _verified.clear()
            _callee_avals.clear()


def _verify(graph: Graph) -> None:
    # The loops below run once per value of the graph (a 32-layer lazy_inline model has thousands):
    # the common case is tested inline, and `define` (which reports the errors) runs only when it fails.
    # (Plain loops on purpose: on CPython 3.11 they beat chains of C-level map/set passes, which
    # read every value's attributes once per pass - measured about 2x on lazy_inline Call nodes.)
    defined: set[int] = set()
    add = defined.add

    def define(v, node=None):
        if not isinstance(v, Value):
            _fail(graph, node, f"expected a Value, got {type(v).__name__}")
        if v.id in defined:
            _fail(graph, node, f"value #{v.id} is defined twice")
        add(v.id)

    for p in graph.params:
        if p.kind != "param":
            _fail(graph, None, f"param #{p.id} has kind '{p.kind}'")
        define(p)
    for v, t in graph.captures:
        aval = v.aval
        if v.kind != "capture" or v.producer is not t:
            _fail(graph, None, f"capture #{v.id} does not refer to its tensor")
        if tuple(t.shape) != aval.shape or t.dtype is not aval.dtype:
            _fail(graph, None, f"capture '{v.name or v.id}' was {format_aval(aval)} but the tensor is now "
                               f"{format_aval(AbstractTensor(t.shape, t.dtype))}")
        if v.__class__ is not Value or v.id in defined:
            define(v)                   # reports the error (not a Value / defined twice)
        add(v.id)
    for node in graph.nodes:
        all_values = True
        for x in node.inputs:
            if x.__class__ is Value:
                if x.id not in defined:
                    _fail(graph, node, f"uses value #{x.id} before it is defined (or from another graph)")
            else:
                all_values = False
                if isinstance(x, Value) and x.id not in defined:
                    _fail(graph, node, f"uses value #{x.id} before it is defined (or from another graph)")
        op = node.op
        if op is CALL:
            _check_call(graph, node, all_values)
        elif node.is_primitive:
            _check_primitive(graph, node)
        else:
            _check_structural(graph, node)
        for i, o in enumerate(node.outputs):
            if o.__class__ is not Value or o.kind != "node" or o.producer != (node, i) or o.id in defined:
                prod = o.producer
                if o.kind != "node" or prod != (node, i):
                    _fail(graph, node, f"output {i} does not point back to its node")
                define(o, node)         # reports the error (not a Value / defined twice)
            add(o.id)
    for o in graph.outputs:
        if (o.__class__ is Value or isinstance(o, Value)) and o.id not in defined:
            _fail(graph, None, f"returns value #{o.id}, which is not defined in this graph")


__all__ = ["verify", "GraphVerifyError"]
