"""The memory plan a graph runs with in an arena, memoised per graph.

A CALL node runs its callee inside a *workspace* of the caller's arena: scratch bytes live only
during that step, as many as the callee's own plan needs. So a graph's plan needs its callees'
plans first; `graph_plan` builds each once per graph (a lazy_inline layer graph is called from
every layer and planned once) and keeps it as long as the graph lives.
"""
from __future__ import annotations

import weakref

from ..ir import CALL
from .planner import plan as make_plan

_plans: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def graph_plan(graph):
    """The memory plan of `graph` with a workspace for each CALL (the callee's own arena), built
    once per graph. What the arena strategy (graph/run/arena.py), O2 and DryRun use."""
    p = _plans.get(graph)
    if p is None:
        p = _plans[graph] = make_plan(graph, workspaces=_call_workspaces(graph))
    return p


def _call_workspaces(graph):
    return {i: graph_plan(n.attrs["graph"]).peak_bytes for i, n in enumerate(graph.nodes) if n.op is CALL}


__all__ = ["graph_plan"]
