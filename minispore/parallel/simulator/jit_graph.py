"""A real captured graph as simulator tasks: every node a task, collectives on the comm stream.

`graph_tasks(graph, cost, group_size)` walks a `minispore.graph.ir.Graph` (from `ms.jit`, or
DryRun's `capture`, which gives the forward/backward phases too) in program order:

* a node whose primitive has the `collective` fact (all_reduce, all_gather, reduce_scatter,
  all_to_all, broadcast, send, receive: `minispore/ops/prims/comm.py`) becomes a task on the
  rank's communication stream, timed by the alpha-beta model over `group_size` ranks;
* every other primitive node becomes a task on the compute stream, timed by the roofline of its
  FLOPs and bytes (`minispore/graph/costs.py`, the numbers DryRun uses); views cost nothing;
* a node waits for the producers of its inputs.

Both streams are in-order queues in the graph's node order, as O0 issues them; the graph-level
stream assignment (`minispore/graph/streams.py`) schedules several *compute* streams by critical
path and keeps collectives in program order - the same order the communication stream keeps here.

A graph captured in a one-process world has one-rank collectives (an all-gather's output is its
input); `group_size` says how many ranks the simulated group has, and the payload follows the
per-rank shapes in the graph: an all-gather gathers `group_size` times its input, a
reduce-scatter and an all-reduce reduce their input.
"""
from __future__ import annotations

from ...common.errors import OpTypeError, OpValueError
from ...graph.costs import graph_costs
from ...graph.ir import Graph, Value
from .engine import COMM, COMPUTE, TaskGraph

_KIND = {"all_reduce": "all_reduce", "all_gather": "all_gather", "reduce_scatter": "reduce_scatter",
         "all_to_all": "all_to_all", "all_to_all_v": "all_to_all", "broadcast": "broadcast", "send": "send",
         "receive": "receive"}


def _float_dtype(node) -> str:
    for v in list(node.outputs) + [x for x in node.inputs if isinstance(x, Value)]:
        dt = getattr(getattr(v, "aval", None), "dtype", None)
        if dt is not None and getattr(dt, "kind", "") == "float":
            return dt.name.lower()
    return "float32"


def _nbytes(x) -> int:
    return int(getattr(getattr(x, "aval", x), "nbytes", 0) or 0)


def graph_tasks(graph, cost, group_size, *, rank=0, phase_of=None, graph_out=None) -> TaskGraph:
    """Tasks for the top-level nodes of `graph` (see the module docstring). `phase_of(i)` names
    node i's phase (DryRun's `Capture.phase_of`); returns the TaskGraph (`graph_out` if given)."""
    if not isinstance(graph, Graph):
        raise OpTypeError("graph_tasks", "a minispore.graph.ir.Graph (jit's or DryRun's capture().graph)",
                          type(graph).__name__)
    if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size < 1:
        raise OpValueError("graph_tasks", "group_size as an int >= 1", repr(group_size))
    g = graph_out if graph_out is not None else TaskGraph()
    task_of = {}                                    # id(node) -> task id
    costs = graph_costs(graph)
    for i, (node, c) in enumerate(zip(graph.nodes, costs)):
        deps = sorted({task_of[id(x.producer[0])] for x in node.inputs
                       if isinstance(x, Value) and x.kind == "node" and id(x.producer[0]) in task_of})
        phase = phase_of(i) if phase_of is not None else ""
        name = f"#{i} {node.op.name}"
        if node.is_primitive and getattr(node.op, "collective", False):
            kind = _KIND.get(node.op.name, "all_reduce")
            x = node.inputs[0] if node.inputs else None
            if kind == "all_gather":
                payload = group_size * _nbytes(x)
            elif kind == "receive":
                payload = sum(_nbytes(o) for o in node.outputs)
            else:
                payload = _nbytes(x)
            dur = cost.collective(kind, payload, group_size)
            task_of[id(node)] = g.add(name, COMM, dur, deps, rank=rank, kind=kind, phase=phase)
            continue
        if not node.is_primitive or c.kind in ("view", "host"):
            dur, kind = 0.0, "view"
        else:
            dur = cost.kernel(matmul_flops=c.matmul_flops, vector_flops=c.flops - c.matmul_flops,
                              bytes_moved=c.bytes, dtype=_float_dtype(node))
            kind = "gemm" if c.kind == "matmul" else "vector"
        task_of[id(node)] = g.add(name, COMPUTE, dur, deps, rank=rank, kind=kind, phase=phase)
    return g


__all__ = ["graph_tasks"]
