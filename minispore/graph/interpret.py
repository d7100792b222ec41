"""Evaluate a graph by calling its ops through the *current* executor.

`interpret(graph, inputs)` walks the nodes in order and calls each primitive as Python code would
(`prim(*inputs, **attrs)`). What that does depends on the executor installed
(ops/primitive.py): eagerly it computes (a slow but obviously-correct reference for the O0
executor, used by the tests), and under a trace it re-records the graph - which is how graph
autodiff (autodiff.py) replays a compiled graph with the autodiff tape on.

`inputs` maps each param (and, optionally, capture) Value id to a Tensor; captures not in the map
read their Tensor. Structural ops: Call recurses; If/While evaluate their condition eagerly
(they cannot be re-traced: a trace has no data); HostCall calls its function, or re-records it
as a host call when a capture is active.
"""
from __future__ import annotations

from ..common.errors import MinisporeRuntimeError
from ..common.tensor import Tensor
from . import pytree
from .ir import CALL, HOST_CALL, IF, WHILE, Value


def interpret(graph, inputs: dict):
    env = dict(inputs)
    for v, t in graph.captures:
        env.setdefault(v.id, t)

    def get(x):
        return env[x.id] if isinstance(x, Value) else x

    for node in graph.nodes:
        args = [get(x) for x in node.inputs]
        if node.is_primitive:
            out = node.op(*args, **node.attrs)
            outs = out if node.multi else (out,)
        elif node.op is CALL:
            outs = _call(node.attrs["graph"], args)
        elif node.op is HOST_CALL:
            outs = (_host(node, args),)
        elif node.op is IF:
            cond = args[0]
            if isinstance(cond, Tensor):
                cond = bool(cond)          # raises under a trace: If cannot be re-traced
            outs = _call(node.attrs["then_graph" if cond else "else_graph"], args[1:])
        elif node.op is WHILE:
            carry = args
            while bool(_call(node.attrs["cond_graph"], carry)[0]):
                carry = _call(node.attrs["body_graph"], carry)
            outs = tuple(carry)
        else:
            raise MinisporeRuntimeError(f"interpret: unknown op {node.op!r}")
        for v, o in zip(node.outputs, outs):
            env[v.id] = o
    return [get(o) for o in graph.outputs]


def _call(graph, args):
    return tuple(interpret(graph, {p.id: a for p, a in zip(graph.params, args)}))


def _host(node, args):
    from .trace.contract import current_capture
    call_args, call_kwargs = pytree.fill(node.attrs["template"], args)
    session = current_capture()
    if session is not None:
        return session.host_call(node.attrs["fn"], call_args, call_kwargs, node.attrs.get("name", "host"))
    return node.attrs["fn"](*call_args, **call_kwargs)


__all__ = ["interpret"]
