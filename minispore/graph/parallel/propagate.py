"""Sharding propagation: a TensorLayout for every value of a graph, from the user's strategies and
each primitive's sharding rule (ops/sharding_rules.py).

One forward walk over the nodes, in program order. Every node is handed its inputs' layouts and
answers, through its primitive's `sharding` fact, the layouts it will consume them in (`requires`:
the compiler must redistribute first where they differ, partition.py) and its outputs' layouts.

Where layouts start:

* graph inputs are whole on every rank ("full_batch": each rank is handed the global batch; a
  strategy that splits it makes the partitioned graph slice it locally, no communication);
* captured Parameters take the layout of the first sharded op that reads them (MindSpore's
  semi-auto: a weight is stored the way its op's strategy splits it) - so a Parameter is sliced
  where it lives, never moved at run time; a Parameter no strategy reads is replicated;
* with `search_mode="sharding_propagation"` a layout also flows BACKWARD from a sharded op's
  argument to the Parameter it was computed from through unannotated layout-preserving ops
  (casts, pointwise ops, transposes): `w.T` fed to a sharded MatMul slices `w`, not its transpose.

Where layouts are forced:

* the arguments of a sharded op call (a `ShardRegion`, strategies.py) are consumed in the layouts
  its in_strategy gives, whatever they arrived in; its outputs are redistributed to the layouts
  of its out_strategy, when it has one (a MatMul's partial sum reduce-scattered instead of
  all-reduced, say);
* a primitive without a sharding rule (and every collective the user wrote) consumes its inputs
  whole and settled, and its outputs are whole: correct for any op, at the price of the gathers
  (the pass records a note naming the op);
* If/While/Call nodes run on whole values; a host call (an optimizer in a training step) gets
  each gradient in its Parameter's layout (so the optimizer updates the shard it holds) and every
  other tensor whole;
* the graph's outputs are returned whole (settled and gathered) on every rank.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ...ops import sharding_rules as rules
from ...ops.primitive import Primitive
from ...ops.sharding import ShardingResult, TensorLayout
from ..ir import HOST_CALL, OPAQUE, Value, template_slots
from .strategies import StageDevices, parameter_plan_of, region_outputs, region_requirements, single_layout


def _is_tensor_value(x) -> bool:
    return isinstance(x, Value) and x.aval is not OPAQUE and hasattr(x.aval, "shape")


@dataclass
class NodePlan:
    """How one node is partitioned: its inputs' layouts as they arrive (`given`), the layouts it
    consumes them in (`required`), its outputs' layouts, and the rule's answer (None for nodes
    without a rule)."""

    node: object
    given: list
    required: list
    outputs: list
    result: ShardingResult | None = None
    rule: str = ""
    forced: list = field(default_factory=list)      # (output index, layout an out_strategy asks for)


@dataclass
class Propagation:
    """Every value's layout (`layouts`: value id -> TensorLayout), one NodePlan per node, the
    layouts of the captures, the graph outputs' required layouts and notes for the user."""

    stage: StageDevices
    layouts: dict
    plans: list
    capture_layouts: dict
    output_required: list
    notes: list = field(default_factory=list)


# the rules through which a layout may flow backward unchanged (or permuted, for transpose)
_TRANSPARENT = (rules.pointwise, rules.linear_pointwise, rules.cast)


def _backward_seed(value, layout, captures, assigned):
    """Follow `value` back through transparent single-tensor-input nodes to a capture; give it
    the layout that reaches `layout` after them."""
    v, lay = value, layout
    for _ in range(64):
        if v.kind == "capture":
            if v.id in captures and v.id not in assigned:
                assigned[v.id] = lay.settled()
            return
        if v.kind != "node":
            return
        node = v.producer[0]
        if not isinstance(node.op, Primitive) or node.multi:
            return
        tins = [x for x in node.inputs if _is_tensor_value(x)]
        if len(tins) != 1:
            return
        if node.op.sharding in _TRANSPARENT:
            v = tins[0]
        elif node.op.sharding is rules.transpose:
            perm = tuple(p % lay.ndim for p in node.attrs["perm"])
            inv = [0] * len(perm)
            for i, p in enumerate(perm):
                inv[p] = i
            lay = lay.with_map(tuple(lay.tensor_map[inv[d]] for d in range(lay.ndim)))
            v = tins[0]
        else:
            return


def _optimizer_layouts(node, capture_by_tensor):
    """For a host call of an optimizer Cell on a tuple of gradients: {input index: its Parameter's
    layout}; {} for any other host call."""
    fn = node.attrs.get("fn")
    cell = getattr(fn, "cell", None)
    params = getattr(cell, "parameters", None)
    if params is None:
        return {}
    params = list(params)
    slots = template_slots(node.attrs.get("template", ()))
    if len(slots) != len(params):
        return {}
    out = {}
    for slot, p in zip(slots, params):
        lay = capture_by_tensor.get(id(p))
        if lay is not None:
            out[slot] = lay
    return out


def propagate(graph, stage: StageDevices, search_mode: str = "") -> Propagation:
    """Layouts for every value of `graph` (see the module docstring)."""
    notes: list = []
    regions = [r for r in graph.notes.get("shard_regions", ()) if r.in_strategy is not None]
    top = {id(n) for n in graph.nodes}
    region_req: dict = {}                   # id(node) -> {value id: layout}
    ordered_reqs = []
    forced: dict = {}                       # value id -> the layout an out_strategy gives it
    for r in regions:
        if not any(id(n) in top for n in r.nodes):
            continue
        for vid, lay in region_outputs(stage, r).items():
            forced.setdefault(vid, lay)
        req = region_requirements(stage, r)
        ordered_reqs.append((r, req))
        for n in r.nodes:                   # (inner regions come first: their requirements win)
            merged = region_req.setdefault(id(n), {})
            for k, lay in req.items():
                merged.setdefault(k, lay)
    captures = {v.id: v for v, _ in graph.captures}
    # captured Parameters: the layout of the first strategy that reads them (module docstring)
    assigned: dict = {}
    for v, t in graph.captures:             # parameter_plan of ms.shard / Cell.shard comes first
        planned = parameter_plan_of(t)
        if planned is not None and hasattr(v.aval, "shape"):
            assigned[v.id] = single_layout(stage, planned, tuple(v.aval.shape), getattr(t, "name", "parameter"))
    for r, req in ordered_reqs:
        for v in r.arg_values:
            if v is None or v.id not in req:
                continue
            if v.kind == "capture" and v.id not in assigned:
                assigned[v.id] = req[v.id]
            elif v.kind == "node" and search_mode == "sharding_propagation":
                _backward_seed(v, req[v.id], captures, assigned)
    layouts: dict = {}
    for p in graph.params:
        if _is_tensor_value(p):
            layouts[p.id] = stage.replicated(len(p.aval.shape))
    capture_layouts = {}
    capture_by_tensor = {}
    for v, t in graph.captures:
        lay = assigned.get(v.id) or stage.replicated(len(v.aval.shape))
        layouts[v.id] = capture_layouts[v.id] = lay
        capture_by_tensor[id(t)] = lay
    plans = []
    unruled = set()
    for node in graph.nodes:
        given = [layouts.get(x.id) if _is_tensor_value(x) else None for x in node.inputs]
        req_here = region_req.get(id(node), {})
        consumed = [req_here.get(x.id, g) if isinstance(x, Value) else g for x, g in zip(node.inputs, given)]
        if isinstance(node.op, Primitive) and node.name == "reshard" and consumed[0] is not None:
            want = stage.layout(node.attrs["device_matrix"], node.attrs["tensor_map"], "reshard")
            want.local_shape(node.inputs[0].aval.shape, op="reshard")
            plans.append(NodePlan(node, given, [want], [want], None, "reshard"))
        elif node.op is HOST_CALL:
            opt = _optimizer_layouts(node, capture_by_tensor)
            required = [(opt.get(i) or stage.replicated(g.ndim)) if g is not None else None
                        for i, g in enumerate(given)]
            outs = [stage.replicated(len(o.aval.shape)) if _is_tensor_value(o) else None for o in node.outputs]
            plans.append(NodePlan(node, given, required, outs, None, "host call"))
        elif not isinstance(node.op, Primitive):
            required = [stage.replicated(g.ndim) if g is not None else None for g in given]
            outs = [stage.replicated(len(o.aval.shape)) if _is_tensor_value(o) else None for o in node.outputs]
            plans.append(NodePlan(node, given, required, outs, None, f"{node.name}: whole values"))
            if node.name not in unruled:
                unruled.add(node.name)
                notes.append(f"{node.name} nodes run on whole (replicated) values")
        else:
            rule = node.op.sharding
            has_tensor = any(g is not None for g in consumed)
            if not has_tensor:
                outs = [stage.replicated(len(o.aval.shape)) if _is_tensor_value(o) else None for o in node.outputs]
                plans.append(NodePlan(node, given, list(consumed), outs, None, "no tensor input: whole"))
            elif rule is None or node.op.collective:
                required = [stage.replicated(g.ndim) if g is not None else None for g in consumed]
                outs = [stage.replicated(len(o.aval.shape)) if _is_tensor_value(o) else None for o in node.outputs]
                plans.append(NodePlan(node, given, required, outs, None, "no sharding rule: whole"))
                if node.name not in unruled and any(g is not None and not g.is_replicated() for g in consumed):
                    unruled.add(node.name)
                    notes.append(f"'{node.name}' has no sharding rule: its inputs are gathered whole (replicated)")
            else:
                ins = [x.aval if _is_tensor_value(x) else (None if isinstance(x, Value) else x) for x in node.inputs]
                outs_av = tuple(o.aval for o in node.outputs)
                res = rule(node.name, ins, outs_av, consumed, node.attrs)
                required = list(res.requires) if res.requires is not None else list(consumed)
                outs = list(res.out_layouts)
                if len(outs) == 1 and len(node.outputs) > 1:
                    outs = outs * len(node.outputs)
                if res.note and res.note not in notes:
                    notes.append(f"{node.name}: {res.note}")
                plans.append(NodePlan(node, given, required, outs, res, getattr(rule, "__name__", "rule")))
        for i, (o, lay) in enumerate(zip(node.outputs, plans[-1].outputs)):
            if o.id in forced and lay is not None:        # out_strategy: consumers see its layout
                plans[-1].forced.append((i, forced[o.id]))
                lay = forced[o.id]
            if lay is not None:
                layouts[o.id] = lay
    output_required = [stage.replicated(len(o.aval.shape)) if _is_tensor_value(o) else None for o in graph.outputs]
    return Propagation(stage, layouts, plans, capture_layouts, output_required, notes)


def describe(layout: TensorLayout | None) -> str:
    """A short text form for dumps: the split counts and the tensor map (and partial axes)."""
    if layout is None:
        return ""
    p = f" partial{list(layout.partial)}" if layout.partial else ""
    return f"{list(layout.split_counts())} map{list(layout.tensor_map)}{p}"


__all__ = ["propagate", "Propagation", "NodePlan", "describe"]
