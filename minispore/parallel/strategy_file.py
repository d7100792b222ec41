"""Strategy files: the record of how every parameter was sharded, in MindSpore's JSON form.

MindSpore writes one with `set_auto_parallel_context(strategy_ckpt_config={"save_file": path})`;
a path ending in `.json` gives this JSON (its other spelling is a protobuf file, which minispore
does not write). The fields are those of MindSpore's `StrategyCheckpointInfo::to_json`:

    {
      "current_stage": 0,
      "parallel_strategy_item": {"<op name>": {"stage": 0, "parallel_strategy": [[2, 1], [1, 2]]}},
      "parallel_layout_item": {
        "dense.weight": {
          "dev_matrix": [2, 2],          # the device matrix
          "tensor_map": [0, -1],         # per dim: device-matrix axis counted from the right, -1 = whole
          "tensor_shape": [8, 4],        # the global (unsharded) shape
          "field": 0,                    # embedding-field split (MindSpore's field_size; 0 here)
          "opt_weight_shard_step": 0,    # optimizer-parallel (ZeRO) sharding of this weight
          "opt_weight_shard_size": 0     #   (0 = none)
          # "param_split_shape"/"indices_offset": uneven (manual) splits, only when used
        }}}

Optimizer parallel (ZeRO, `opt_weight_shard_step` m > 0 and `opt_weight_shard_size` k > 1, -1
meaning "all the replicas"): each model-parallel piece is cut once more along dim 0 among k ranks
that held copies of it. MindSpore (`_construct_tensor_layout_for_opt_shard`) rewrites such a layout
as device matrix `[repeat, k, *splits]` with the k axis splitting the rows *inside* each dim-0
piece; `opt_shard_layout` builds the same thing as a minispore Layout (dim 0 split over the pair
(its model-parallel axis, the k axis)), so the checkpoint tools need no special case.

One extension, for a dimension split over several axes (`Layout(...)(("dp", "mp"), "None")`):
its tensor_map entry is a list of axis numbers, major first (`[[1, 0], -1]`). MindSpore's own files
only ever hold one number per dim; a file without multi-axis dims is exactly MindSpore's format.

`tensor_parallel_layouts(net, data_parallel)` derives the layouts of a Megatron-style dp x tp net
(parallel/megatron.py's layers name the axis each parameter is split on), ready for
`save_strategy_file`.

`build_searched_strategy(file)` returns `{param_name: ParallelLayouts}` objects with the attribute
shape of MindSpore's protobuf message (`layout.dev_matrix[0].dim`, `layout.tensor_map[0].dim`, ...),
which is what `merge_sliced_parameter` and MindSpore user code read.
"""
from __future__ import annotations

import json
import math
import numbers
import os

from ..common.errors import OpTypeError, OpValueError
from ..common import untrusted_files
from ..train.atomic_io import atomic_write_bytes
from .layout import Layout, check_shape

MAX_STRATEGY_BYTES = 64 * 1024 * 1024      # a strategy file is metadata: far smaller than this


class _Dims:
    """One repeated field of the protobuf message (`.dim`, a list of numbers)."""
    __slots__ = ("dim",)

    def __init__(self, dim):
        self.dim = list(dim)

    def __repr__(self):
        return f"dim: {self.dim}"


class ParallelLayouts:
    """One parameter's layout in a strategy file (MindSpore's `ParallelLayouts` protobuf message:
    `dev_matrix[0].dim`, `tensor_map[0].dim`, `param_split_shape[0].dim`, `indices_offset[0].dim`,
    `field`, `opt_weight_shard_step`, `opt_weight_shard_size`), plus minispore's `tensor_shape`
    and `layout` (the `Layout` it describes)."""

    def __init__(self, dev_matrix, tensor_map, tensor_shape, field=0, opt_weight_shard_step=0,
                 opt_weight_shard_size=0, param_split_shape=(), indices_offset=()):
        self.dev_matrix = [_Dims(dev_matrix)]
        self.tensor_map = [_Dims(tensor_map)]
        self.param_split_shape = [_Dims(param_split_shape)]
        self.indices_offset = [_Dims(indices_offset)]
        self.field = int(field)
        self.opt_weight_shard_step = int(opt_weight_shard_step)
        self.opt_weight_shard_size = int(opt_weight_shard_size)
        self.tensor_shape = tuple(tensor_shape)
        self.layout = opt_shard_layout(tuple(dev_matrix), list(tensor_map), self.tensor_shape,
                                       self.opt_weight_shard_step, self.opt_weight_shard_size)

    def __repr__(self):
        return (f"ParallelLayouts(dev_matrix={self.dev_matrix[0].dim}, tensor_map={self.tensor_map[0].dim}, "
                f"tensor_shape={list(self.tensor_shape)})")


def opt_shard_layout(dev_matrix, tensor_map, tensor_shape, opt_weight_shard_step=0, opt_weight_shard_size=0,
                     op: str = "opt_shard_layout") -> Layout:
    """The Layout of the pieces ranks hold of a parameter with optimizer-parallel sharding.

    Without it (step 0, or size 0 or 1) this is just the layout of `dev_matrix`/`tensor_map`.
    With it, following MindSpore's `_construct_tensor_layout_for_opt_shard`: `splits` = the
    per-dim split counts, whose product must equal the step m; k = size (-1: devices / m); the
    devices become `[repeat, k, *splits]` (C order: the model-parallel pieces vary fastest, then
    the optimizer-shard index, then the repeats), and dim 0 is split over (its split axis, k).
    """
    base = Layout.from_tensor_map(tuple(dev_matrix), list(tensor_map))
    step, size = int(opt_weight_shard_step), int(opt_weight_shard_size)
    if step == 0 or size in (0, 1):
        return base
    if any(isinstance(e, tuple) for e in base.tensor_map):
        raise OpValueError(op, "optimizer-parallel sharding of a layout with one axis per dim",
                           f"tensor_map {base.tensor_map}")
    splits = list(base.dim_splits())
    if not splits:
        raise OpValueError(op, "optimizer-parallel sharding of a tensor with at least one dim", "a 0-d tensor")
    if math.prod(splits) != step:
        raise OpValueError(op, f"opt_weight_shard_step equal to the model-parallel split count {math.prod(splits)} "
                           f"(splits {tuple(splits)})", str(step))
    devices = math.prod(base.device_matrix)
    if size == -1:
        size = devices // step
    if size < 1 or devices % (step * size):
        raise OpValueError(op, f"opt_weight_shard_size dividing the {devices // step} copies of each piece",
                           str(opt_weight_shard_size))
    repeat = devices // (step * size)
    ndim = len(splits)
    dims = [-1 if v == 1 else ndim - 1 - i for i, v in enumerate(splits)]
    dims[0] = ndim if dims[0] == -1 else (dims[0], ndim)      # the k axis is numbered ndim (from the right)
    matrix = ([repeat] if repeat > 1 else []) + [size] + splits
    layout = Layout.from_tensor_map(tuple(matrix), dims)
    check_shape(op, layout, tuple(tensor_shape), "the parameter")
    return layout


def _layout_item(op: str, name: str, global_shape, layout: Layout, opt_size: int = 0) -> dict:
    if not isinstance(layout, Layout):
        raise OpTypeError(op, f"the layout of '{name}' to be a minispore.parallel.Layout",
                          type(layout).__name__)
    shape = check_shape(op, layout, global_shape, f"parameter '{name}'")
    if layout.rank_list != list(range(layout.device_num)):
        raise OpValueError(op, f"'{name}' on ranks 0..n-1 (a strategy file records a stage's layouts over its "
                           "own device matrix)", f"rank_list {layout.rank_list}")
    return {"dev_matrix": list(layout.device_matrix),
            "tensor_map": [list(e) if isinstance(e, tuple) else e for e in layout.tensor_map],
            "tensor_shape": list(shape),
            "field": 0, "opt_weight_shard_step": math.prod(layout.dim_splits()) if opt_size else 0,
            "opt_weight_shard_size": opt_size}


def build_strategy(param_layouts: dict, current_stage: int = 0, op_strategies: dict | None = None) -> dict:
    """The strategy-file dict of `{param_name: (global_shape, Layout)}`; a third element
    `(global_shape, Layout, k)` records optimizer-parallel sharding over k copies (-1: all).

    `op_strategies` (optional) fills "parallel_strategy_item": `{op_name: strategy tuples}` as given
    to `Primitive.shard`. Every layout must cover the same number of devices (one stage)."""
    op = "build_strategy"
    if not isinstance(param_layouts, dict) or not param_layouts:
        raise OpTypeError(op, "'param_layouts' to be a non-empty dict {name: (global_shape, Layout)}",
                          type(param_layouts).__name__)
    if isinstance(current_stage, bool) or not isinstance(current_stage, numbers.Integral) or current_stage < 0:
        raise OpValueError(op, "'current_stage' as an int >= 0", repr(current_stage))
    items, devices = {}, None
    for name, value in param_layouts.items():
        if not isinstance(name, str) or not name:
            raise OpTypeError(op, "parameter names to be non-empty str", repr(name))
        if not (isinstance(value, tuple) and len(value) in (2, 3)):
            raise OpTypeError(op, f"the value of '{name}' to be (global_shape, Layout) or (global_shape, Layout, "
                              "opt_weight_shard_size)", repr(value))
        opt = value[2] if len(value) == 3 else 0
        if isinstance(opt, bool) or not isinstance(opt, int) or opt < -1:
            raise OpValueError(op, f"the opt_weight_shard_size of '{name}' as an int >= -1", repr(opt))
        item = _layout_item(op, name, value[0], value[1], opt)
        if opt:      # the same checks a reader makes
            opt_shard_layout(item["dev_matrix"], item["tensor_map"], item["tensor_shape"],
                             item["opt_weight_shard_step"], opt, op)
        n = math.prod(item["dev_matrix"])
        if devices is None:
            devices = (n, name)
        elif n != devices[0]:
            raise OpValueError(op, f"every layout over the same number of devices ('{devices[1]}' uses {devices[0]})",
                               f"'{name}' over {n}")
        items[name] = item
    strategies = {}
    for node, stra in (op_strategies or {}).items():
        strategies[str(node)] = {"stage": int(current_stage),
                                 "parallel_strategy": [[int(s) for s in dims] for dims in stra]}
    return {"current_stage": int(current_stage), "parallel_strategy_item": strategies,
            "parallel_layout_item": items}


def save_strategy_file(strategy_file, param_layouts: dict, current_stage: int = 0,
                       op_strategies: dict | None = None) -> str:
    """Write `build_strategy(...)` as JSON to `strategy_file` (which must end with `.json`),
    atomically: a reader never sees half a file. Returns the path written."""
    op = "save_strategy_file"
    path = _check_json_path(op, strategy_file)
    data = json.dumps(build_strategy(param_layouts, current_stage, op_strategies), indent=1).encode("utf-8")
    parent = os.path.dirname(os.path.realpath(path))
    if not os.path.isdir(parent):
        raise OpValueError(op, "a strategy file in an existing directory", f"'{path}' (no directory '{parent}')")
    atomic_write_bytes(path, data, mode=None)
    return path


def _check_json_path(op, strategy_file) -> str:
    if not isinstance(strategy_file, (str, os.PathLike)):
        raise OpTypeError(op, "the strategy file as a str path", type(strategy_file).__name__)
    path = os.fspath(strategy_file)
    if not path.endswith(".json"):
        raise OpValueError(op, "a strategy file ending with '.json' (minispore reads and writes MindSpore's JSON "
                           "strategy files; the protobuf spelling is not implemented)", f"'{path}'")
    return path


def _read_json(op: str, path: str) -> dict:
    try:
        content = untrusted_files.read_json(path, "strategy file", max_bytes=MAX_STRATEGY_BYTES)
    except untrusted_files.UntrustedFileError as e:
        raise OpValueError(op, f"a readable JSON strategy file ({e.expected})", f"'{path}': {e.got}") from None
    if not isinstance(content, dict):
        raise OpValueError(op, "a JSON object at the top of the strategy file", f"'{path}': {type(content).__name__}")
    return content


def _ints(op, path, name, field, value, nested_ok=False) -> list:
    def ok(v):
        return isinstance(v, int) and not isinstance(v, bool)
    if not isinstance(value, list) or not all(
            ok(v) or (nested_ok and isinstance(v, list) and v and all(ok(w) for w in v)) for v in value):
        raise OpValueError(op, f"'{field}' of '{name}' as a list of ints", f"{value!r:.80} in '{path}'")
    return value


def load_strategy_file(strategy_file) -> dict:
    """`{param_name: ParallelLayouts}` of a JSON strategy file, every entry validated: the tensor
    map against the device matrix and the shape against the layout."""
    op = "build_searched_strategy"
    path = _check_json_path(op, strategy_file)
    content = _read_json(op, path)
    items = content.get("parallel_layout_item")
    if not isinstance(items, dict) or not items:
        raise OpValueError(op, "a strategy file with a non-empty 'parallel_layout_item' (the sliced parameters)",
                           f"'{path}' without one")
    out, devices = {}, None
    for name, item in items.items():
        if not isinstance(item, dict):
            raise OpValueError(op, f"the layout of '{name}' as a JSON object", f"{type(item).__name__} in '{path}'")
        for key in ("dev_matrix", "tensor_map", "tensor_shape"):
            if key not in item:
                raise OpValueError(op, f"the field '{key}' in the layout of '{name}'", f"'{path}' without it")
        dev = _ints(op, path, name, "dev_matrix", item["dev_matrix"])
        tmap = _ints(op, path, name, "tensor_map", item["tensor_map"], nested_ok=True)
        shape = _ints(op, path, name, "tensor_shape", item["tensor_shape"])
        extra = {k: item.get(k, 0) for k in ("field", "opt_weight_shard_step", "opt_weight_shard_size")}
        for k, v in extra.items():
            if not isinstance(v, int) or isinstance(v, bool):
                raise OpValueError(op, f"'{k}' of '{name}' as an int", f"{v!r} in '{path}'")
        if extra["field"] not in (0, -1):
            raise OpValueError(op, f"'{name}' without a field split (field 0)", f"field={extra['field']} in '{path}'")
        split = item.get("param_split_shape", [])
        offset = item.get("indices_offset", [])
        if split or offset:
            raise OpValueError(op, f"'{name}' split evenly (no 'param_split_shape'/'indices_offset': uneven manual "
                               "splits are not supported)", f"param_split_shape={split!r} in '{path}'")
        try:
            pl = ParallelLayouts(dev, tmap, shape, **extra)
            check_shape(op, pl.layout, tuple(shape), f"parameter '{name}'")
        except OpValueError as e:
            raise OpValueError(op, f"a consistent layout for '{name}' in '{path}'", str(e)) from None
        n = math.prod(dev)
        if devices is None:
            devices = (n, name)
        elif n != devices[0]:
            raise OpValueError(op, f"one device count per strategy file ('{devices[1]}' uses {devices[0]})",
                               f"'{name}' uses {n} in '{path}' (pipeline-stage files are not supported)")
        out[name] = pl
    return out


def build_searched_strategy(strategy_filename) -> dict:
    """`mindspore.build_searched_strategy(strategy_filename)`: `{param_name: ParallelLayouts}`."""
    return load_strategy_file(strategy_filename)


def layouts_of(strategy) -> dict:
    """`{name: (global_shape, Layout)}` of a strategy: a file path, `build_searched_strategy`'s
    dict, or such a dict already; None (unsharded) gives {}."""
    if strategy is None:
        return {}
    if isinstance(strategy, (str, os.PathLike)):
        strategy = load_strategy_file(strategy)
    if not isinstance(strategy, dict):
        raise OpTypeError("layouts_of", "a strategy file path or a {name: ParallelLayouts} dict",
                          type(strategy).__name__)
    out = {}
    for name, v in strategy.items():
        if isinstance(v, ParallelLayouts):
            out[name] = (v.tensor_shape, v.layout)
        elif isinstance(v, tuple) and len(v) == 2 and isinstance(v[1], Layout):
            out[name] = (tuple(v[0]), v[1])
        else:
            raise OpTypeError("layouts_of", f"the strategy of '{name}' as ParallelLayouts or (shape, Layout)",
                              type(v).__name__)
    return out


def tensor_parallel_layouts(net, data_parallel: int = 1, op: str = "tensor_parallel_layouts") -> dict:
    """`{name: (global_shape, Layout)}` of every parameter of a Megatron-style tensor-parallel net
    (the layers of parallel/megatron.py: a layer class lists in `tensor_parallel_axes` which axis of
    the full parameter each of its parameters is a block of), replicated over `data_parallel`
    copies: what `save_strategy_file` records for a dp x tp run.

    The device matrix is `(data_parallel, tp)` with aliases ("dp", "tp"): C order makes the tensor-
    parallel index vary fastest, rank = tp_index + tp * dp_index, the numbering of a dp x tp run
    whose TP groups are consecutive ranks. A split parameter maps its split axis to "tp", every other
    dim (and every replicated parameter, a norm weight) to "None". A plain net (no parallel layers)
    gives all-replicated layouts over `data_parallel` ranks. Uneven splits (a vocabulary that does
    not divide by tp) cannot be written as a Layout and are refused."""
    if isinstance(data_parallel, bool) or not isinstance(data_parallel, numbers.Integral) or data_parallel < 1:
        raise OpValueError(op, "'data_parallel' as an int >= 1", repr(data_parallel))
    split, tp = {}, 1
    for _, cell in net.cells_and_names():
        for attr, axis in getattr(type(cell), "tensor_parallel_axes", {}).items():
            p = getattr(cell, attr, None)
            if p is None:
                continue
            sizes = list(cell.split_sizes)
            if len(set(sizes)) != 1:
                raise OpValueError(op, f"'{p.name}' split evenly over the tensor-parallel ranks (a Layout cuts "
                                   "equal blocks)", f"blocks of {sizes} along axis {axis}")
            if tp not in (1, len(sizes)):
                raise OpValueError(op, "one tensor-parallel size for the whole net", f"{tp} and {len(sizes)}")
            tp = len(sizes)
            split[id(p)] = (axis, sum(sizes))
    layout = Layout((int(data_parallel), tp), ("dp", "tp"))
    out = {}
    for name, p in net.parameters_and_names():
        shape = list(p.shape)
        aliases = ["None"] * len(shape)
        if id(p) in split:
            axis, full = split[id(p)]
            shape[axis] = full
            aliases[axis] = "tp"
        out[p.name] = (tuple(shape), layout(*aliases))
    return out


def device_num_of(strategy_layouts: dict) -> int:
    """How many ranks a strategy's layouts cover (1 for an unsharded / None strategy)."""
    if not strategy_layouts:
        return 1
    return next(iter(strategy_layouts.values()))[1].device_num
