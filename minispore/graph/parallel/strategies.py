"""Reading the user's shard strategies into TensorLayouts on the stage's device matrix.

Where a strategy comes from. `ops.MatMul().shard(((2, 1), (1, 1)))` records the strategy in the
class-style op's `attrs` (ops/operations/base.py) and makes the op's class a "sharded" subclass.
A class-style op is not a graph node: its `__call__` emits one or more primitive nodes (MatMul
with `transpose_b` is a transpose and a matmul). So the strategy is attached to the *call*: while
a graph is being captured, the sharded `__call__` goes through `strategy_scope` (installed in
base.py's `STRATEGY_SCOPE` hook, since ops/ cannot import graph/), which records a `ShardRegion` in
the capture's notes (`Graph.notes["shard_regions"]`): the op's name, its strategies, the graph
Values of its arguments and the nodes it emitted. The kernels' attrs are never changed.

How a strategy becomes layouts (MindSpore's convention). An op's strategy tuple names the split
count of every dimension of every input; the op's *device matrix* is its distinct dimensions'
split counts (a MatMul ((a, b), (b, c)) has [a, b, c]; an elementwise op the counts of its output
dims), with the devices the strategy leaves over as a leading "repeat" axis (the value is
replicated along it): ((2, 1), (1, 1)) on 4 devices is device matrix [2, 2, 1, 1], ranks 0 and 2
holding rows 0-3, ranks 1 and 3 rows 4-7. Tensor maps count device-matrix axes from the right.

One device matrix for the whole stage. The sharding rules (ops/sharding_rules.py) need every
layout of a graph on ONE device matrix, while MindSpore gives every op its own. `StageDevices`
uses the prime factors of the device count, e.g. (2, 2) for 4 devices; each op's device matrix
is laid over those factors in rank order (its last dim on the smallest factors), so an op axis of
size 4 becomes the pair of stage axes (1, 0) and ranks keep exactly MindSpore's coordinates. An op
whose device matrix cannot be laid over the factors in that order (3 x 2 on a 2 x 3 stage) is an
error naming the op.

`ms.Layout` strategies are duck-typed (`.device_matrix` and `.tensor_map`; graph/ cannot import
parallel/), converted axis by axis the same way.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field

from ...common.errors import OpTypeError, OpValueError
from ...ops.prims.reshard import reshard                  # noqa: F401  (ms.reshard, exported from here)
from ...ops.sharding import NOT_SPLIT, TensorLayout


# ------------------------------------------------------------------------------------------------
# the stage's device matrix
def _prime_factors(n: int) -> tuple:
    out, p = [], 2
    while n > 1:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    return tuple(sorted(out, reverse=True))


class StageDevices:
    """The device matrix every layout of a graph uses: the prime factors of `device_num`, largest
    first (axis 0, counted from the right as everywhere, is the smallest factor)."""

    def __init__(self, device_num: int):
        if not isinstance(device_num, int) or device_num < 1:
            raise OpValueError("semi_auto_parallel", "a positive device_num", repr(device_num))
        self.device_num = device_num
        self.device_matrix = _prime_factors(device_num) or (1,)

    def axis_size(self, axis):
        return self.device_matrix[len(self.device_matrix) - 1 - axis]

    def replicated(self, ndim) -> TensorLayout:
        return TensorLayout.replicated(self.device_matrix, ndim)

    def axes_for(self, op_matrix, op="semi_auto_parallel") -> list:
        """For an op's device matrix (sizes left to right, product = device_num), the stage axes each
        of its entries covers (major first), laid over the stage's factors from the right."""
        op_matrix = tuple(int(s) for s in op_matrix)
        total = 1
        for s in op_matrix:
            total *= s
        if total != self.device_num:
            raise OpValueError(op, f"a device matrix of {self.device_num} devices", f"{op_matrix} ({total} devices)")
        out, axis = [], 0
        n_axes = len(self.device_matrix)
        for s in reversed(op_matrix):
            taken, prod = [], 1
            while prod < s:
                if axis >= n_axes:
                    break
                prod *= self.axis_size(axis)
                taken.append(axis)
                axis += 1
            if prod != s:
                raise OpValueError(op, f"a device matrix whose entries, from the right, are products of the stage's "
                                   f"device factors {self.device_matrix} in order", repr(op_matrix))
            out.append(tuple(reversed(taken)))         # major first
        return list(reversed(out))

    def layout(self, op_matrix, tensor_map, op="semi_auto_parallel") -> TensorLayout:
        """A TensorLayout on the stage from a map over an op's device matrix (axes from the right)."""
        cover = self.axes_for(op_matrix, op)
        n = len(op_matrix)
        entries = []
        for e in tensor_map:
            axes = e if isinstance(e, (tuple, list)) else ((e,) if e != NOT_SPLIT else ())
            stage_axes = []
            for a in axes:
                if a == NOT_SPLIT:
                    continue
                if not 0 <= a < n:
                    raise OpValueError(op, f"tensor-map axes in [0, {n}) for the device matrix {tuple(op_matrix)}",
                                       repr(tuple(tensor_map)))
                stage_axes.extend(cover[n - 1 - a])
            entries.append(tuple(stage_axes) if stage_axes else NOT_SPLIT)
        return TensorLayout(self.device_matrix, tuple(entries))


# ------------------------------------------------------------------------------------------------
# strategies recorded during capture
@dataclass
class ShardRegion:
    """One sharded op call seen during capture: its strategies, its argument Values (None for
    non-tensor arguments), the graph nodes it emitted, its output Values."""

    op: str
    in_strategy: tuple
    out_strategy: tuple | None
    attrs: dict
    arg_values: list
    nodes: list
    out_values: list = field(default_factory=list)

    @property
    def node_ids(self):
        return {id(n) for n in self.nodes}


_local = threading.local()


def record_call(name, in_strategy, out_strategy, attrs, call, args, kwargs):
    """Run `call(*args, **kwargs)`; inside a capture, record it as a ShardRegion of the capture's
    notes (its argument Values, the nodes it emitted, its output Values)."""
    from ..capture import current_capture
    from ...common.tensor import Tensor
    session = current_capture()
    if session is None or not hasattr(session, "value_of"):
        return call(*args, **kwargs)
    builder = session.builder
    vals = [session.value_of(a) if isinstance(a, Tensor) else None for a in args]
    n0 = len(builder.nodes)
    out = call(*args, **kwargs)
    outs = out if isinstance(out, (tuple, list)) else (out,)
    out_vals = [session.value_of(o) if isinstance(o, Tensor) else None for o in outs]
    region = ShardRegion(name, in_strategy, out_strategy, dict(attrs), vals, list(builder.nodes[n0:]), out_vals)
    session.notes.setdefault("shard_regions", []).append(region)
    return out


def strategy_scope(prim, call, args, kwargs):
    """base.py's hook around a sharded class-style op's call (see the module docstring)."""
    return record_call(prim.name, prim.attrs.get("in_strategy"), prim.attrs.get("out_strategy"), prim.attrs,
                       lambda *a, **k: call(prim, *a, **k), args, kwargs)


def install():
    """Route sharded class-style ops through `strategy_scope` (idempotent)."""
    from ...ops.operations import base
    if getattr(base, "STRATEGY_SCOPE", None) is not None:
        base.STRATEGY_SCOPE[0] = strategy_scope


# ------------------------------------------------------------------------------------------------
# the user API: ms.shard(fn, ...), Cell.shard(...), parameter plans
FUNCTION = "__function__"            # the attrs mark of a function / Cell region: one device matrix per input

# id(Parameter) -> (weak reference, strategy or Layout): a parameter_plan entry
_PARAMETER_PLANS: dict = {}


def _check_user_strategy(op, what, strategy, allow_none=False):
    if strategy is None and allow_none:
        return None
    if not isinstance(strategy, tuple):
        raise OpTypeError(op, f"'{what}' to be a tuple (one strategy tuple or Layout per input)",
                          f"{type(strategy).__name__} {strategy!r}")
    for s in strategy:
        if s is None or _is_layout(s):
            continue
        if not isinstance(s, tuple) or not all(isinstance(c, int) and not isinstance(c, bool) and c >= 1 for c in s):
            raise OpTypeError(op, f"each entry of '{what}' to be a tuple of positive ints, a Layout or None",
                              repr(s))
    return strategy


def plan_parameter(param, strategy):
    """Store `param` split by `strategy` (a tuple of split counts or a Layout) when a semi-auto
    graph captures it: what `parameter_plan` of ms.shard / Cell.shard does."""
    import weakref
    _check_user_strategy("shard", "parameter_plan", (strategy,))
    _PARAMETER_PLANS[id(param)] = (weakref.ref(param), strategy)


def parameter_plan_of(param):
    hit = _PARAMETER_PLANS.get(id(param))
    if hit is None or hit[0]() is not param:
        return None
    return hit[1]


def _apply_parameter_plan(op, cell, parameter_plan):
    if parameter_plan is None:
        return
    if not isinstance(parameter_plan, dict):
        raise OpTypeError(op, "'parameter_plan' to be a dict {parameter name: strategy or Layout}",
                          type(parameter_plan).__name__)
    params = dict(cell.parameters_and_names()) if cell is not None else {}
    for name, strategy in parameter_plan.items():
        p = params.get(name)
        if p is None:
            raise OpValueError(op, f"'parameter_plan' names among the cell's parameters {sorted(params)}", repr(name))
        plan_parameter(p, strategy)


def shard_cell(cell, in_strategy, out_strategy=None, parameter_plan=None):
    """`Cell.shard`: the cell's call, inside a semi-auto graph, takes its inputs in `in_strategy`
    (one split-count tuple or Layout per tensor input; None leaves an input as it comes) and the
    ops inside follow by sharding propagation; `parameter_plan` {name: strategy} stores those
    parameters split. `out_strategy` is recorded (the pass returns graph outputs whole)."""
    _check_user_strategy("Cell.shard", "in_strategy", in_strategy)
    _check_user_strategy("Cell.shard", "out_strategy", out_strategy, allow_none=True)
    _apply_parameter_plan("Cell.shard", cell, parameter_plan)
    cell.__dict__["_shard_strategy"] = (in_strategy, out_strategy)
    return cell


def sharded_cell_call(cell, args, kwargs, call):
    """jit.cell_call's capture branch for a cell with Cell.shard: record the region (once: the
    cell's own call inside `call` is not recorded again). `call` is jit's cell_call again, which
    would find the strategy and come back here: while the region runs the strategy is taken off
    the cell, so `call` goes on to the ordinary path (inlining the cell's construct)."""
    active = getattr(_local, "cells", None)
    if active is None:
        active = _local.cells = set()
    if id(cell) in active:
        return call()
    strategy = cell.__dict__.pop("_shard_strategy")
    in_s, out_s = strategy
    active.add(id(cell))
    try:
        return record_call(type(cell).__name__, in_s, out_s, {FUNCTION: True}, lambda *a, **k: call(), args, kwargs)
    finally:
        active.discard(id(cell))
        cell.__dict__["_shard_strategy"] = strategy


def shard(fn, in_strategy, out_strategy=None, parameter_plan=None, device="Ascend", level=0):
    """`ms.shard(fn, in_strategy, out_strategy=None, parameter_plan=None)`: `fn` (a function or a
    Cell) called inside a semi-auto graph takes its tensor inputs in `in_strategy` (one split-count
    tuple, Layout or None per input); the ops inside follow by sharding propagation. A Cell is
    sharded in place (Cell.shard) and returned; a function comes back wrapped. Outside semi-auto
    graph mode the wrapper just calls `fn`."""
    if hasattr(fn, "cells_and_names") and hasattr(fn, "construct"):
        return shard_cell(fn, in_strategy, out_strategy, parameter_plan)
    if not callable(fn):
        raise OpTypeError("shard", "a function or a Cell", type(fn).__name__)
    _check_user_strategy("shard", "in_strategy", in_strategy)
    _check_user_strategy("shard", "out_strategy", out_strategy, allow_none=True)
    if parameter_plan is not None:
        raise OpValueError("shard", "parameter_plan only with a Cell (its parameters are named there)",
                           "a parameter_plan for a function")
    import functools

    @functools.wraps(fn)
    def sharded(*args, **kwargs):
        return record_call(getattr(fn, "__name__", "function"), in_strategy, out_strategy, {FUNCTION: True},
                           fn, args, kwargs)

    return sharded


# ------------------------------------------------------------------------------------------------
# strategy -> layouts
def _is_layout(s) -> bool:
    return hasattr(s, "device_matrix") and hasattr(s, "tensor_map")


_MATMULS = ("MatMul", "BatchMatMul")


def _op_dims(op, attrs, shapes, strategy):
    """The op's dimension variables: (sizes, per-input tuple of variable index per dim)."""
    tensors = [i for i, s in enumerate(shapes) if s is not None]
    if op in _MATMULS and len(tensors) >= 2:
        a, b = strategy[tensors[0]], strategy[tensors[1]]
        ta, tb = bool(attrs.get("transpose_a", False)), bool(attrs.get("transpose_b", False))
        nb = max(len(a), len(b)) - 2
        # variables: batch dims, m, k, n
        bat = list(range(nb))
        m, k, n = nb, nb + 1, nb + 2
        sizes = [1] * (nb + 3)

        def dims_of(st, first):
            lead = len(st) - 2
            batch = bat[nb - lead:] if lead else []
            if first:
                last2 = (k, m) if ta else (m, k)
            else:
                last2 = (n, k) if tb else (k, n)
            return tuple(batch) + last2

        maps = [None] * len(shapes)
        maps[tensors[0]] = dims_of(a, True)
        maps[tensors[1]] = dims_of(b, False)
        for extra in tensors[2:]:           # a bias: right-aligned to the output (batch, m, n)
            out_vars = bat + [m, n]
            maps[extra] = tuple(out_vars[len(out_vars) - len(strategy[extra]):])
        for i in tensors:
            for v, c in zip(maps[i], strategy[i]):
                if sizes[v] not in (1, c) and c != 1:
                    raise OpValueError(op, "in_strategy entries that agree on shared dimensions",
                                       f"{c} and {sizes[v]} in {strategy}")
                sizes[v] = max(sizes[v], c)
        return sizes, maps
    if op in ("Gather", "GatherV2", "Embedding", "EmbeddingLookup"):
        sizes, maps, base = [], [None] * len(shapes), 0
        for i in tensors:
            maps[i] = tuple(range(base, base + len(strategy[i])))
            sizes.extend(strategy[i])
            base += len(strategy[i])
        return sizes, maps
    # default: broadcasting, right-aligned to the longest input
    nd = max(len(strategy[i]) for i in tensors)
    sizes = [1] * nd
    maps = [None] * len(shapes)
    for i in tensors:
        st = strategy[i]
        off = nd - len(st)
        maps[i] = tuple(range(off, nd))
        for j, c in enumerate(st):
            v = off + j
            if c != 1 and sizes[v] not in (1, c):
                raise OpValueError(op, "in_strategy entries that agree on broadcast dimensions",
                                   f"{c} and {sizes[v]} in {strategy}")
            if c != 1:
                sizes[v] = c
    return sizes, maps


def strategy_layouts(stage: StageDevices, op: str, attrs: dict, shapes, strategy) -> list:
    """One TensorLayout (None for a non-tensor argument) per argument of a sharded op call, from
    its in_strategy: split-count tuples (MindSpore's device matrix plus a leading repeat axis) or
    ms.Layout-like objects. `shapes` has the arguments' global shapes (None for non-tensors)."""
    tensors = [i for i, s in enumerate(shapes) if s is not None]
    strategy = tuple(strategy)
    if attrs.get(FUNCTION) and len(strategy) == len(shapes) and len(tensors) != len(shapes):
        strategy = tuple(s for s, shp in zip(strategy, shapes) if shp is not None)   # one entry per argument
    if len(strategy) != len(tensors):
        raise OpValueError(op, f"one in_strategy entry per tensor input ({len(tensors)})", repr(strategy))
    full = [None] * len(shapes)
    for i, s in zip(tensors, strategy):
        full[i] = s
    out = [None] * len(shapes)
    if attrs.get(FUNCTION):                # a function / Cell: every input on its own device matrix
        for i in tensors:
            out[i] = single_layout(stage, full[i], shapes[i], op)
        return out
    if any(_is_layout(s) for s in strategy):
        for i in tensors:
            s = full[i]
            if not _is_layout(s):
                raise OpValueError(op, "in_strategy entries that are all Layouts or all tuples", repr(strategy))
            out[i] = stage.layout(tuple(s.device_matrix), tuple(s.tensor_map), op)
            out[i].local_shape(shapes[i], op=op)
        return out
    for i in tensors:
        if len(full[i]) != len(shapes[i]):
            raise OpValueError(op, f"in_strategy[{tensors.index(i)}] with one entry per dimension of input "
                               f"{i} (shape {tuple(shapes[i])})", repr(full[i]))
    sizes, maps = _op_dims(op, attrs, shapes, full)
    used = 1
    for s in sizes:
        used *= s
    if stage.device_num % used:
        raise OpValueError(op, f"a strategy whose split counts multiply to a divisor of the {stage.device_num} devices",
                           f"{strategy} ({used} blocks)")
    repeat = stage.device_num // used
    nv = len(sizes)
    op_matrix = (repeat,) + tuple(sizes)
    for i in tensors:
        tm = tuple((nv - 1 - v) if sizes[v] > 1 and c > 1 else NOT_SPLIT for v, c in zip(maps[i], full[i]))
        out[i] = stage.layout(op_matrix, tm, op)
        out[i].local_shape(shapes[i], op=op)
    return out


def single_layout(stage: StageDevices, strategy, shape, op="shard"):
    """One tensor's layout from its own strategy: a Layout, None (whole), or split counts on the
    device matrix (repeat, *counts) - MindSpore's rule for a strategy with no op around it."""
    if strategy is None:
        return stage.replicated(len(shape))
    if _is_layout(strategy):
        lay = stage.layout(tuple(strategy.device_matrix), tuple(strategy.tensor_map), op)
    else:
        strategy = tuple(strategy)
        if len(strategy) != len(shape):
            raise OpValueError(op, f"a strategy with one entry per dimension of the shape {tuple(shape)}",
                               repr(strategy))
        used = 1
        for c in strategy:
            used *= c
        if stage.device_num % used:
            raise OpValueError(op, f"split counts multiplying to a divisor of the {stage.device_num} devices",
                               repr(strategy))
        nd = len(strategy)
        tm = tuple(nd - 1 - d if c > 1 else NOT_SPLIT for d, c in enumerate(strategy))
        lay = stage.layout((stage.device_num // used,) + strategy, tm, op)
    lay.local_shape(shape, op=op)
    return lay


def region_outputs(stage: StageDevices, region: ShardRegion) -> dict:
    """{output value id: the layout out_strategy gives it} (each output's split counts on its own
    device matrix, the repeat axis leading: `single_layout`); {} without an out_strategy."""
    if region.out_strategy is None:
        return {}
    vals = [v for v in region.out_values if v is not None]
    if len(region.out_strategy) != len(vals):
        raise OpValueError(region.op, f"one out_strategy entry per tensor output ({len(vals)})",
                           repr(region.out_strategy))
    return {v.id: single_layout(stage, s, tuple(v.aval.shape), region.op) for v, s in zip(vals, region.out_strategy)}


def region_requirements(stage: StageDevices, region: ShardRegion) -> dict:
    """{value id: the layout the strategy asks for that argument}."""
    shapes = [tuple(v.aval.shape) if v is not None and hasattr(v.aval, "shape") else None for v in region.arg_values]
    lays = strategy_layouts(stage, region.op, region.attrs, shapes, region.in_strategy)
    return {v.id: lay for v, lay in zip(region.arg_values, lays) if v is not None and lay is not None}



__all__ = ["StageDevices", "ShardRegion", "strategy_scope", "record_call", "install", "strategy_layouts",
           "single_layout", "region_requirements", "region_outputs", "shard", "reshard", "shard_cell", "sharded_cell_call", "plan_parameter",
           "parameter_plan_of"]
