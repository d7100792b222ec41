"""Node costs: how many FLOPs a node does and how many bytes it moves, from shapes alone.

DryRun never runs a kernel, so everything it predicts about time comes from these numbers per
node, fed into a roofline (dryrun/devices.py): a node takes `max(flops / peak_flops, bytes / bandwidth)`.

Every number comes from the primitive itself: its `cost` fact (`defprim(..., cost=rule)`,
ops/primitive.py), a rule `rule(in_avals, out_avals, attrs) -> dict` built from the constructors
in ops/costs.py, whose docstring states the modelling conventions (what an `exp` costs, why a
view moves nothing ...). A primitive without one costs one FLOP per output element, bytes =
inputs read + outputs written. This module knows no primitive by name; it adds only what needs
the graph around a node:

* a transpose whose output is its input with the last two axes swapped (its cost says
  "transposed_operand") moves nothing when every consumer reads transposed operands in place
  (their costs say "takes_transposed": a GEMM's trans_a / trans_b) - no copy is ever made;
* a fused kernel of jit_level O1 (passes/fusion.py) costs its members' FLOPs but only its own
  bytes: one read of each input, one write of each output;
* a called subgraph (lazy_inline's CALL) costs the sum of its nodes.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ops import costs as rules
from .ir import CALL, Value

# -- per-node cost -------------------------------------------------------------------------------------

@dataclass
class NodeCost:
    """What one node costs. `matmul_flops` of its `flops` run on the device's matrix unit (tensor
    cores, Ascend's cube unit, BLAS on a CPU), the rest on the vector unit. `kind`: 'matmul' (mostly
    matrix work), 'vector', 'view' (free) or 'host' (a host call: not modelled)."""
    flops: int
    bytes_read: int
    bytes_written: int
    kind: str
    matmul_flops: int = -1        # FLOPs done by the matrix unit (-1: all of them if kind is 'matmul')

    def __post_init__(self):
        if self.matmul_flops < 0:
            self.matmul_flops = self.flops if self.kind == "matmul" else 0

    @property
    def bytes(self) -> int:
        return self.bytes_read + self.bytes_written


def _aval_of(x):
    return x.aval if isinstance(x, Value) else x


def _rule_cost(node) -> dict:
    """The node's primitive cost fact applied to its avals (the default rule where it has none)."""
    ins = [_aval_of(x) for x in node.inputs]
    outs = [o.aval for o in node.outputs]
    rule = getattr(node.op, "cost", None) or rules.ELEMENTWISE
    c = rule(ins, outs, node.attrs)
    if "bytes_read" not in c or "bytes_written" not in c:
        c = {**rules.traffic(ins, outs), **c}
    return c


def _reads_transposed_in_place(node) -> bool:
    return node.is_primitive and bool(_rule_cost(node).get("takes_transposed"))


def node_cost(node, consumers=None) -> NodeCost:
    """The cost of one node. `consumers` (value id -> list of consuming nodes) enables the
    transposed-operand rule; without it every transpose is a copy."""
    if not node.is_primitive:
        if node.op is CALL:                 # a called subgraph (lazy_inline): the sum of its nodes
            parts = graph_costs(node.attrs["graph"])
            flops = sum(c.flops for c in parts)
            kind = "matmul" if any(c.kind == "matmul" for c in parts) else "vector"
            return NodeCost(flops, sum(c.bytes_read for c in parts), sum(c.bytes_written for c in parts), kind,
                            sum(c.matmul_flops for c in parts))
        return NodeCost(0, 0, 0, "host")   # host calls, If/While: not modelled

    members = getattr(node.op, "nodes", None)
    if members is not None and hasattr(node.op, "members"):
        # a fused kernel (O1, passes/fusion.py): its members' arithmetic, but its OWN bytes - it
        # reads each input once and writes each output once, which is the point of fusing
        traffic = rules.traffic([_aval_of(x) for x in node.inputs], [o.aval for o in node.outputs])
        member_users = consumers_of_nodes(members)
        flops = sum(node_cost(m, member_users).flops for m in members)
        return NodeCost(flops, traffic["bytes_read"], traffic["bytes_written"], "vector")

    c = _rule_cost(node)
    kind = c.get("kind", "vector")
    if kind == "view":
        return NodeCost(0, 0, 0, "view")
    if c.get("transposed_operand") and consumers is not None:
        users = consumers.get(node.outputs[0].id, [])
        if users and all(_reads_transposed_in_place(u) for u in users):
            return NodeCost(0, 0, 0, "view")
    return NodeCost(int(c.get("flops", 0)), int(c["bytes_read"]), int(c["bytes_written"]), kind,
                    int(c.get("matmul_flops", -1)))


def consumers_of(graph) -> dict:
    """value id -> the nodes that read it (for the transposed-operand rule)."""
    return consumers_of_nodes(graph.nodes)


def consumers_of_nodes(nodes) -> dict:
    users: dict = {}
    for node in nodes:
        for x in node.inputs:
            if isinstance(x, Value):
                users.setdefault(x.id, []).append(node)
    return users


def graph_costs(graph) -> list:
    """One NodeCost per node of `graph` (top level), in order."""
    users = consumers_of(graph)
    return [node_cost(n, users) for n in graph.nodes]


__all__ = ["NodeCost", "node_cost", "graph_costs", "consumers_of"]
