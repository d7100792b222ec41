"""The semi-auto parallel pass: one rank's graph from the global graph, its strategies and the
sharding rules.

    plan = plan_semi_auto(graph, device_num=4, rank=1)       # no MPI needed
    plan.graph            # rank 1's graph: local shapes, collectives as nodes
    plan.comms            # [Comm(kind, group, bytes, ...)] in program order
    plan.parameters       # {name: (Parameter, global shape, TensorLayout)}

Steps (MindSpore's semi-auto pipeline, on minispore's IR):

1. strategies (strategies.py): the sharded class-style op calls recorded during capture become
   the layouts their arguments must have;
2. propagation (propagate.py): one forward walk gives every value a layout, and every node the
   layouts it consumes its inputs in (its primitive's sharding rule, ops/sharding_rules.py);
3. rewriting (this module), node by node: where a value arrives in another layout than its
   consumer requires, the cheapest redistribution (graph/parallel/redistribution.py: a shortest
   path by bytes over all_reduce / reduce_scatter / all_gather / all_to_all / local slices) is
   inserted as nodes - the collectives of ops/prims/comm.py, over named process groups - and a
   redistributed value is reused by every later consumer asking for the same layout. The node
   itself then runs on local blocks: its output avals are the local shapes, its attributes the
   rule's `local_attrs` (a reshape's target shape), a `scale` multiplies its outputs (a mean over
   a split dim), a `MaskedLookup` turns a lookup into the masked local lookup;
4. Parameters are stored as the rank's shard: `plan.slices` lists (Parameter, layout) and
   `apply_parameter_slices` replaces each one's data by its block (the full shape and layout are
   kept for each Parameter: `sliced_layout(param)`, for checkpoints and the strategy file).
   Graph inputs follow MindSpore's full_batch semantics: every rank is handed the GLOBAL batch
   and the graph slices it where a strategy splits it (a local `shard_slice`, no communication).
   Graph outputs come back whole on every rank.

Gradients. The pass runs on the graph jit captured. For a training step (`TrainOneStepCell` in
GRAPH_MODE, or `value_and_grad` + optimizer inside a jitted function) that graph already holds the
backward: graph capture records the backward rules' ops (trace/session.py), so the pass partitions
the *joint* forward-and-backward graph like any other program, with the same rules. That is exact
by construction - the rank graphs compute the global step's numbers - and needs no special
gradient convention: a replicated weight's gradient comes out as a partial sum (the batch was
split) and is all-reduced because the optimizer's host call requires it in the weight's layout,
which is MindSpore's data-parallel gradient AllReduce falling out of the rules. The optimizer
(a host call) updates the shards in place; its state (moments ...) is sliced like its Parameter.
A jitted forward differentiated from PyNative (`value_and_grad(jitted)`) is not partitioned
jointly: jit refuses it under semi_auto_parallel (see `check_not_taped`).
"""
from __future__ import annotations

import json
import logging
import os
import weakref
from dataclasses import dataclass, field

import numpy as np

from ...common.errors import OpValueError
from ...ops.primitive import PRIMITIVES, Primitive, interned_aval
from ...ops.prims import comm as _comm                # noqa: F401  (registers the collectives)
from ...ops.prims import reshard as _reshard          # noqa: F401  (registers shard_slice / reshard)
from ...ops.sharding import TensorLayout, local_block
from ..ir import OPAQUE, Graph, Node, Value
from .propagate import Propagation, describe, propagate
from .redistribution import groups_for, group_name, layout_after, plan_redistribution
from .strategies import StageDevices

P = PRIMITIVES


@dataclass(frozen=True)
class Comm:
    """One inserted collective: its kind, group (name), the bytes this rank sends (ring model,
    redistribution.py), the global shape moved and the layouts it moved between."""

    kind: str
    group: str
    bytes: int
    shape: tuple
    src: TensorLayout
    dst: TensorLayout


@dataclass
class SemiAutoPlan:
    """What `plan_semi_auto` returns (see the module docstring)."""

    graph: Graph
    comms: list
    propagation: Propagation
    slices: list                    # (tensor, global shape, layout) for the captured tensors to slice
    parameters: dict                # name -> (tensor, global shape, layout)
    notes: list = field(default_factory=list)
    op_strategies: list = field(default_factory=list)     # (op name, in_strategy) per sharded call

    def comm_table(self):
        """[(kind, bytes)] of the communicating steps, in program order (what the tests compare)."""
        return [(c.kind, c.bytes) for c in self.comms]


def _is_tensor(v) -> bool:
    return isinstance(v, Value) and v.aval is not OPAQUE and hasattr(v.aval, "shape")


class _Rewriter:
    """Builds one rank's graph from the global graph and its Propagation (module docstring,
    step 3): `run()` walks the nodes in order, emitting redistributions and local nodes."""

    def __init__(self, graph, prop: Propagation, rank: int, create_groups: bool):
        self.g = graph
        self.prop = prop
        self.stage = prop.stage
        self.dm = prop.stage.device_matrix
        self.rank = rank
        self.create_groups = create_groups
        self.nodes: list = []
        self.comms: list = []
        self.env: dict = {}            # old value id -> new Value (in its own layout)
        self.moved: dict = {}          # (old value id, layout) -> new Value
        self.value_layouts: dict = {}  # id(new Value) -> its TensorLayout (for the IR dump)
        self.source = None

    # -- emitting nodes
    def emit(self, op, inputs, attrs, avals, multi=None):
        multi = isinstance(avals, tuple) if multi is None else multi
        node = Node(op, inputs, attrs, (), multi, self.source)
        outs = avals if multi else (avals,)
        node.outputs = tuple(Value(a, "node", producer=(node, i)) for i, a in enumerate(outs))
        self.nodes.append(node)
        return node

    def prim(self, name, inputs, attrs=None):
        """Emit registry primitive `name` (its output aval by its own inference rule)."""
        prim = P[name]
        attrs = dict(attrs or {})
        ins = [x.aval if isinstance(x, Value) else x for x in inputs]
        aval = prim.infer(*ins, **attrs)
        node = self.emit(prim, inputs, attrs, aval)
        return node.outputs if isinstance(aval, tuple) else node.outputs[0]

    def group(self, axes):
        if self.create_groups:
            return group_name(self.dm, axes, self.rank)
        ranks = groups_for(self.dm, axes, self.rank)
        return "ranks" + "_".join(map(str, ranks))

    def _move_dim(self, x, src, dst):
        nd = len(x.aval.shape)
        perm = list(range(nd))
        perm.insert(dst, perm.pop(src))
        return self.prim("transpose", [x], {"perm": tuple(perm)})

    # -- redistribution
    def redistribute(self, old: Value, src: TensorLayout, dst: TensorLayout) -> Value:
        x = self.env[old.id]
        if src == dst:
            return x
        key = (old.id, dst)
        hit = self.moved.get(key)
        if hit is not None:
            return hit
        shape = tuple(old.aval.shape)
        itemsize = int(old.aval.dtype.itemsize) if hasattr(old.aval.dtype, "itemsize") else \
            np.dtype(old.aval.dtype.np).itemsize
        steps = plan_redistribution(shape, itemsize, src, dst)
        lay = src
        for step in steps:
            lay = layout_after(lay, step)
            p = 1
            for a in step.axes:
                p *= self.stage.axis_size(a)
            members = groups_for(self.dm, step.axes, self.rank)
            g = members.index(self.rank)
            if step.communicates:
                group = self.group(step.axes)
                self.comms.append(Comm(step.kind, group, step.bytes_per_rank, shape, src, dst))
            local = list(x.aval.shape)
            dt = x.aval.dtype
            if step.kind == "all_reduce":
                # (a 0-d value travels as shape (1,): comm.py's buffer helper, np.ascontiguousarray,
                # returns 0-d arrays as 1-d)
                y = self.prim("reshape", [x], {"shape": (1,)}) if not local else x
                y = self.emit(P["all_reduce"], [y], {"op": "sum", "group": group},
                              interned_aval(local or [1], dt)).outputs[0]
                x = self.prim("reshape", [y], {"shape": ()}) if not local else y
            elif step.kind == "all_gather":
                y = self._move_dim(x, step.dim, 0) if step.dim else x
                ys = list(y.aval.shape)
                ys[0] *= p
                y = self.emit(P["all_gather"], [y], {"group": group}, interned_aval(ys, dt)).outputs[0]
                x = self._move_dim(y, 0, step.dim) if step.dim else y
            elif step.kind == "reduce_scatter":
                y = self._move_dim(x, step.dim, 0) if step.dim else x
                ys = list(y.aval.shape)
                ys[0] //= p
                y = self.emit(P["reduce_scatter"], [y], {"op": "sum", "group": group}, interned_aval(ys, dt)).outputs[0]
                x = self._move_dim(y, 0, step.dim) if step.dim else y
            elif step.kind == "all_to_all":
                local[step.dim2] //= p
                local[step.dim] *= p
                x = self.emit(P["all_to_all"], [x], {"split_count": p, "split_dim": step.dim2,
                                                      "concat_dim": step.dim, "group": group},
                              interned_aval(local, dt)).outputs[0]
            elif step.kind == "slice":
                x = self.prim("shard_slice", [x], {"dim": step.dim, "parts": p, "index": g})
            else:                                   # to_partial: coordinate 0 keeps the value
                if g != 0:
                    x = self.prim("zeros_like", [x])
            self.value_layouts[id(x)] = lay
        self.moved[key] = x
        return x

    # -- the walk
    def run(self) -> Graph:
        g, prop, stage = self.g, self.prop, self.stage
        params = []
        for p in g.params:
            q = Value(p.aval, "param", name=p.name)
            self.env[p.id] = q
            params.append(q)
        captures = []
        self.slices = []
        for v, t in g.captures:
            lay = prop.capture_layouts[v.id]
            if hasattr(v.aval, "shape") and not lay.is_replicated():
                aval = interned_aval(lay.local_shape(v.aval.shape, op="semi_auto_parallel"), v.aval.dtype)
                self.slices.append((t, tuple(v.aval.shape), lay))
            else:
                aval = v.aval
            q = Value(aval, "capture", producer=t, name=v.name)
            self.env[v.id] = q
            captures.append((q, t))
        for plan in prop.plans:
            node = plan.node
            self.source = node.source
            inputs = []
            for x, have, need in zip(node.inputs, plan.given, plan.required):
                if isinstance(x, Value):
                    if have is not None and need is not None:
                        inputs.append(self.redistribute(x, have, need))
                    else:
                        inputs.append(self.env[x.id])
                else:
                    inputs.append(x)
            if not isinstance(node.op, Primitive):
                nn = Node(node.op, inputs, node.attrs, (), node.multi, node.source)
                nn.outputs = tuple(Value(o.aval, "node", producer=(nn, i), name=o.name)
                                   for i, o in enumerate(node.outputs))
                self.nodes.append(nn)
                outs = list(nn.outputs)
            else:
                outs = self._primitive(node, plan, inputs)
            for o, q in zip(node.outputs, outs):
                self.env[o.id] = q
            for i, want in plan.forced:          # out_strategy: redistribute right after the node
                o = node.outputs[i]
                self.env[o.id] = self.redistribute(o, plan.outputs[i], want)
        outputs = []
        for o, need in zip(g.outputs, prop.output_required):
            if isinstance(o, Value) and need is not None:
                outputs.append(self.redistribute(o, prop.layouts[o.id], need))
            elif isinstance(o, Value):
                outputs.append(self.env[o.id])
            else:
                outputs.append(o)
        new = Graph(g.name, params, captures, self.nodes, outputs, g.source_fn)
        new.notes.update({k: v for k, v in g.notes.items() if k != "shard_regions"})
        for old_id, q in self.env.items():
            if isinstance(q, Value) and old_id in prop.layouts:
                self.value_layouts.setdefault(id(q), prop.layouts[old_id])
        new.notes["semi_auto"] = {"device_matrix": stage.device_matrix, "rank": self.rank,
                                  "layouts": dict(self.value_layouts),
                                  "layout_text": {k: describe(v) for k, v in self.value_layouts.items()}}
        return new

    def _primitive(self, node, plan, inputs):
        res = plan.result
        attrs = dict(node.attrs)
        if res is not None and res.local_attrs:
            attrs.update(res.local_attrs)
        avals = []
        for o, lay in zip(node.outputs, plan.outputs):
            if lay is not None and hasattr(o.aval, "shape"):
                avals.append(interned_aval(lay.local_shape(o.aval.shape, op=node.name), o.aval.dtype))
            else:
                avals.append(o.aval)
        if res is not None and res.lookup is not None:
            outs = [self._masked_lookup(node, plan, inputs, attrs, avals[0])]
        else:
            nn = self.emit(node.op, inputs, attrs, tuple(avals) if node.multi else avals[0], node.multi)
            outs = list(nn.outputs)
        if res is not None and res.scale != 1.0:
            outs = [self.prim("mul", [q, float(res.scale)]) if _is_tensor(q) and q.aval.dtype.is_floating else q
                    for q in outs]
        return outs

    def _masked_lookup(self, node, plan, inputs, attrs, out_aval):
        """where(valid, op(table, clip(ids - start, 0, n - 1)), 0): rows this rank does not hold
        give zeros, so the output is a partial sum over the table's axes (ops/sharding.py)."""
        lk = plan.result.lookup
        table_old = node.inputs[lk.table]
        lay_t = plan.required[lk.table]
        n = lay_t.local_shape(table_old.aval.shape, op=node.name)[lk.axis]
        start = lay_t.block_index(self.rank, lk.axis) * n
        ids = inputs[lk.indices]
        shifted = self.prim("sub", [ids, start]) if start else ids
        clipped = self.prim("clamp", [shifted, 0, n - 1])
        args = list(inputs)
        args[lk.indices] = clipped
        looked = self.emit(node.op, args, attrs, out_aval).outputs[0]
        valid = self.prim("logical_and", [self.prim("greater_equal", [shifted, 0]), self.prim("less", [shifted, n])])
        mask = self.prim("cast", [valid], {"dtype": out_aval.dtype})
        # the ids' dims sit where the lookup puts them in the output (MaskedLookup.mask_shape)
        shape = lk.mask_shape(ids.aval.shape, len(table_old.aval.shape))
        mask = self.prim("reshape", [mask], {"shape": shape})
        return self.prim("mul", [looked, mask])


def _check_subgraph_captures(graph, slices):
    """Subgraphs (If/While branches, Call: lazy_inline layers) run on whole values: a Parameter
    stored sliced must not be read inside one (it would see its shard where it expects the whole)."""
    sliced = {id(t) for t, _, _ in slices} | {k for k, (ref, _, _) in _SLICED.items() if ref() is not None}
    for sub in graph.all_graphs()[1:]:
        for v, t in sub.captures:
            if id(t) in sliced:
                raise OpValueError("semi_auto_parallel", "sliced Parameters read outside control flow and "
                                   "lazy_inline subgraphs (those run on whole values)",
                                   f"'{v.name or 'tensor'}' read inside subgraph '{sub.name}'")


def plan_semi_auto(graph: Graph, device_num: int, rank: int, search_mode: str = "",
                   create_groups: bool = False) -> SemiAutoPlan:
    """Partition `graph` for `rank` of `device_num` (see the module docstring). Pure planning: no
    data moves, no MPI unless `create_groups` (then the collectives' named groups are created, a
    collective call every rank must make in the same order - the pass does, in program order)."""
    if not isinstance(rank, int) or not 0 <= rank < device_num:
        raise OpValueError("semi_auto_parallel", f"a rank in [0, {device_num})", repr(rank))
    stage = StageDevices(device_num)
    prop = propagate(graph, stage, search_mode)
    rw = _Rewriter(graph, prop, rank, create_groups)
    new = rw.run()
    _check_subgraph_captures(graph, rw.slices)
    params = {}
    for t, shape, lay in rw.slices:
        params[getattr(t, "name", f"tensor_{id(t)}")] = (t, shape, lay)
    for v, t in graph.captures:
        name = getattr(t, "name", None)
        if name is not None and name not in params and hasattr(t, "requires_grad"):
            params[name] = (t, tuple(v.aval.shape), prop.capture_layouts[v.id])
    ops = [(r.op, tuple(r.in_strategy)) for r in graph.notes.get("shard_regions", ()) if r.in_strategy is not None]
    return SemiAutoPlan(new, rw.comms, prop, rw.slices, params, list(prop.notes), ops)


# ------------------------------------------------------------------------------------------------
# applying a plan to the process's tensors
# id(tensor) -> (weak reference, global shape, layout) of every tensor the pass sliced (Parameters
# have __slots__, and a Tensor's == is elementwise, so no WeakKeyDictionary)
_SLICED: dict = {}


def sliced_layout(tensor):
    """`(global shape, TensorLayout)` of a tensor the semi-auto pass replaced by this rank's
    shard, None for a tensor it did not slice (for checkpoints, strategy files, gathering)."""
    hit = _SLICED.get(id(tensor))
    if hit is None or hit[0]() is not tensor:
        return None
    return hit[1], hit[2]


def _slice_tensor(t, shape, layout, rank):
    have = sliced_layout(t)
    if have is not None:
        if have == (shape, layout):
            return
        raise OpValueError("semi_auto_parallel", f"'{getattr(t, 'name', 'tensor')}' sliced once, under one layout",
                           f"{have[1]} then {layout}")
    t._data = np.ascontiguousarray(local_block(t._data, layout, rank))
    _SLICED[id(t)] = (weakref.ref(t), shape, layout)
    if hasattr(t, "_version"):
        t._version += 1


def apply_parameter_slices(plan: SemiAutoPlan, rank: int) -> None:
    """Replace each sliced captured tensor's data by this rank's block; an optimizer's state that
    mirrors a sliced Parameter (moments, accumulators: same global shape, aligned with
    `optimizer.parameters`) is sliced the same way."""
    sliced = {}
    for t, shape, lay in plan.slices:
        _slice_tensor(t, shape, lay, rank)
        sliced[id(t)] = (shape, lay)
    from ..ir import HOST_CALL
    for node in plan.graph.nodes:
        if node.op is not HOST_CALL:
            continue
        cell = getattr(node.attrs.get("fn"), "cell", None)
        params = getattr(cell, "parameters", None)
        if params is None:
            continue
        params = list(params)
        for value in list(vars(cell).values()):
            if isinstance(value, (tuple, list)) and len(value) == len(params) and value is not params:
                for p, s in zip(params, value):
                    info = sliced.get(id(p))
                    if info is not None and hasattr(s, "_data") and s is not p \
                            and tuple(s.shape) == info[0]:
                        _slice_tensor(s, info[0], info[1], rank)


def strategy_json(plan: SemiAutoPlan) -> dict:
    """Every parameter's layout in MindSpore's strategy-file JSON (the schema of
    parallel/strategy_file.py, written here because graph/ cannot import parallel/)."""
    items = {}
    for name, (t, shape, lay) in sorted(plan.parameters.items()):
        tm = [list(e) if isinstance(e, tuple) else e for e in lay.tensor_map]
        items[name] = {"dev_matrix": list(lay.device_matrix), "tensor_map": tm, "tensor_shape": list(shape),
                       "field": 0, "opt_weight_shard_step": 0, "opt_weight_shard_size": 0}
    strategies = {}
    for i, (op, strategy) in enumerate(plan.op_strategies):
        if all(isinstance(s, tuple) for s in strategy):
            strategies[f"{op}-op{i}"] = {"stage": 0, "parallel_strategy": [list(s) for s in strategy]}
    return {"current_stage": 0, "parallel_strategy_item": strategies, "parallel_layout_item": items}


def save_strategy_file(plan: SemiAutoPlan, path: str) -> None:
    """Write `strategy_json(plan)` to `path` (a `.json` file; its folder is created)."""
    if not str(path).endswith(".json"):
        raise OpValueError("strategy_ckpt_config", "a save_file ending with '.json'", repr(path))
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"       # every rank writes the same record: never a half-written file
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(strategy_json(plan), f, indent=1)
    os.replace(tmp, path)


# ------------------------------------------------------------------------------------------------
# the jit hook
def semi_auto_active() -> bool:
    """Is `parallel_mode` semi_auto_parallel (or auto_parallel) with a world of more than one rank?"""
    from ...common import auto_parallel_context as apc
    from ...common import process_groups as pg
    mode = apc.get_auto_parallel_context("parallel_mode")
    if mode not in ("semi_auto_parallel", "auto_parallel"):
        return False
    return pg.world().size > 1


_warned_full_batch: list = []


def partition_capture(result):
    """What jit does with a fresh capture under semi-auto parallel (minispore/jit.py `_compile`):
    partition its graph for this rank, slice the Parameters it captures, write the strategy file
    when `strategy_ckpt_config["save_file"]` is set; returns the CaptureResult to compile (the
    same object when semi-auto parallel is off)."""
    if result.graph is None or result.runner is not None or not semi_auto_active():
        return result
    import dataclasses
    from ...common import auto_parallel_context as apc
    from ...common import process_groups as pg
    world = pg.world()
    search = apc.get_auto_parallel_context("search_mode")
    plan = plan_semi_auto(result.graph, world.size, world.rank,
                          search_mode="sharding_propagation" if search == "sharding_propagation" else "",
                          create_groups=True)
    apply_parameter_slices(plan, world.rank)
    from ..verify import verify
    verify(plan.graph)                    # (the collectives' groups exist now: every node is checked)
    save = (apc.get_auto_parallel_context("strategy_ckpt_config") or {}).get("save_file", "")
    if save:
        save_strategy_file(plan, save)
    plan.graph.notes["semi_auto_plan"] = plan
    log = logging.getLogger("minispore.parallel")
    for note in plan.notes:
        log.info("semi_auto_parallel: %s", note)
    if not apc.get_auto_parallel_context("full_batch") and not _warned_full_batch:
        _warned_full_batch.append(True)
        log.warning("semi_auto_parallel: every graph input is taken as the GLOBAL batch (full_batch=True "
                    "semantics: each rank is handed the whole batch and the graph slices it); feed every "
                    "rank the same batch, or set_auto_parallel_context(full_batch=True) to say so")
    graphs = [plan.graph if g is result.graph else g for g in result.graphs]
    return dataclasses.replace(result, graph=plan.graph, graphs=graphs)


class global_shapes_during_capture:
    """While jit captures a graph under semi-auto parallel, the Parameters an earlier compile
    already sliced show their GLOBAL shape again (a zero-copy broadcast view standing in for their
    data: a capture reads shapes, not values), so a recompile (a new input shape) traces the global
    program like the first compile did; their shards are put back afterwards."""

    def __enter__(self):
        self.saved = []
        if not _SLICED or not semi_auto_active():
            return self
        for ref, shape, _ in list(_SLICED.values()):
            t = ref()
            if t is not None and tuple(t._data.shape) != tuple(shape):
                self.saved.append((t, t._data))
                t._data = np.broadcast_to(np.zeros((), dtype=t._data.dtype), shape)
        return self

    def __exit__(self, *exc):
        for t, data in self.saved:
            t._data = data
        self.saved = []
        return False


def plan_function(fn, *args, device_num: int, rank: int = 0, search_mode: str = "", **kwargs) -> SemiAutoPlan:
    """Capture `fn(*args, **kwargs)` as jit would and plan it for `rank` of
    `device_num` devices, in this one process: the partitioned graph (`format_graph(plan.graph)`
    shows the inserted collectives and every value's layout) and its communication table, for any
    world size. (Under semi_auto_parallel on a real MPI world, `ms.graph.dump(ms.jit(fn), *args)`
    shows the graph jit partitioned for this rank.)"""
    from ..capture import CaptureRequest, get_capture_mode
    jitted = getattr(fn, "__minispore_jit__", None)
    if jitted is not None:                   # a jitted function: its own capture mode and cache
        entry = jitted.compile(*args, **kwargs)
        if entry is None:
            raise OpValueError("plan_function", "a function under its recompile limit", f"'{jitted.name}'")
        result = entry.result
    else:                                    # jit's default capture mode
        capture, _ = get_capture_mode("ast")
        name = getattr(fn, "__qualname__", getattr(fn, "__name__", type(fn).__name__))
        result = capture(CaptureRequest(fn, tuple(args), dict(kwargs), name))
    if result.graph is None:
        raise OpValueError("plan_function", "a function that compiles to one graph", "a graph break / runner")
    graph = result.graph
    if "semi_auto_plan" in graph.notes:      # already partitioned by jit: its plan
        return graph.notes["semi_auto_plan"]
    return plan_semi_auto(graph, device_num, rank, search_mode=search_mode)


__all__ = ["plan_semi_auto", "plan_function", "semi_auto_active", "partition_capture",
           "global_shapes_during_capture", "SemiAutoPlan", "Comm", "apply_parameter_slices",
           "sliced_layout", "strategy_json", "save_strategy_file"]
