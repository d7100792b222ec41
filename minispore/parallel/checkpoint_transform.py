"""Distributed checkpoints: merge, split and reshard per-rank checkpoint files, offline.

A sharded run saves one checkpoint per rank (`rank_0/net0.ckpt`, `rank_1/net1.ckpt`, ...) plus the
strategy file that says how each parameter was cut (`strategy_file`). Everything here is pure file
work with NumPy -- no MPI, no network -- so a checkpoint saved as tp2 x dp2 can be turned into the
files a tp4, a dp4 or a single-process run loads, on any machine:

    ms.transform_checkpoints("ckpt_src", "ckpt_dst", "net", "src_strategy.json", "dst_strategy.json")
    ms.transform_checkpoint_by_rank(3, {r: f"ckpt_src/rank_{r}/net{r}.ckpt" for r in ...}, "net3.ckpt", src, dst)
    ms.parallel.rank_list_for_transform(3, src, dst)     # which source files rank 3 needs
    ms.merge_sliced_parameter([slice0, slice1, ...], strategy)
    ms.load_distributed_checkpoint(net, [rank files...], predict_strategy=None, train_strategy_filename=src)
    ms.unified_safetensors("ckpt_src", src, "merged")    # one file of full parameters

    # a training run: each rank saves its shards, its optimizer state and the RNG ...
    save_checkpoint(training_state_dict(net, optimizer), f"ckpt_src/rank_{r}/net{r}.ckpt")
    # ... and a run of another layout resumes it (after transform_checkpoints / _by_rank, or from
    # load_distributed_checkpoint(..., return_param_dict=True)):
    load_training_state(ms.load_checkpoint(f"ckpt_dst/rank_{r}/net{r}.ckpt"), net, optimizer)

How every entry of a checkpoint moves (`_plan_entry`):

* **sharded**: its name, or the name after a dotted prefix (`moment1.fc.weight`, `adam_m.fc.weight`:
  optimizer state is named `<state>.<param>` and is shaped like the parameter, so it shards like
  it), has a layout in the source strategy. Its pieces are assembled into the full array
  (`layout.assemble`: every piece present, replicas bit-identical) and cut again by the
  destination layout (`layout.shard_of`); no layout on one side means "whole on every rank".
* **whole** (no layout: `global_step`, `beta1_power`, an RNG state saved as a string, the learning
  rate, ...): destination rank r copies it from source rank `r % n_src` (MindSpore's rule), or from
  the lowest source rank given when that file is not needed.

Nothing is written until everything has been read and checked: missing rank files, entries whose
shape disagrees with the strategy, replicas that differ, strategies that disagree about a
parameter's global shape -- all raise before the first file is written, and each file is written
atomically (`save_checkpoint`), so a failed transform leaves no half file behind.
"""
from __future__ import annotations

import glob
import json
import logging
import numbers
import os

import numpy as np

from ..common.errors import OpTypeError, OpValueError
from ..common.tensor import Parameter, Tensor
from ..train.atomic_io import atomic_write_bytes
from ..train.serialization import load_param_into_net, read_checkpoint_items, save_checkpoint
from .layout import Layout, assemble, check_shape, replica_groups, shard_of, shard_shape, slice_bounds
from .strategy_file import ParallelLayouts, device_num_of, layouts_of

logger = logging.getLogger("minispore")

FORMATS = ("ckpt", "safetensors")
UNIFIED_FILE = "model.safetensors"
NAME_MAP_FILE = "param_name_map.json"


# ---------------------------------------------------------------------------------------------------
# small checks
def _check_rank(op, rank, n, what="rank_id") -> int:
    if isinstance(rank, bool) or not isinstance(rank, (numbers.Integral, np.integer)):
        raise OpTypeError(op, f"'{what}' to be an int", f"{type(rank).__name__} {rank!r}")
    if not 0 <= int(rank) < n:
        raise OpValueError(op, f"'{what}' in [0, {n}) (the destination strategy has {n} ranks)", str(rank))
    return int(rank)


def _format_of(op, path) -> str:
    for fmt in FORMATS:
        if os.fspath(path).endswith("." + fmt):
            return fmt
    raise OpValueError(op, "a checkpoint file name ending with '.ckpt' or '.safetensors'", f"'{path}'")


def _check_output_format(op, fmt) -> str:
    if fmt not in FORMATS:
        raise OpValueError(op, "'output_format' to be 'ckpt' or 'safetensors'", repr(fmt))
    return fmt


def _read(op, path) -> dict:
    """{name: ndarray | str} of one rank's checkpoint file (file order kept)."""
    if not isinstance(path, (str, os.PathLike)):
        raise OpTypeError(op, "checkpoint file names as str", type(path).__name__)
    return dict(read_checkpoint_items(path, format=_format_of(op, path), op=op))


def _lookup(name, layouts: dict):
    """(strategy name, global shape, Layout) for a checkpoint entry, or None when it has no layout:
    the exact name first, then the name without leading dotted prefixes (optimizer state)."""
    if name in layouts:
        return (name,) + layouts[name]
    parts = name.split(".")
    for i in range(1, len(parts)):
        key = ".".join(parts[i:])
        if key in layouts:
            return (key,) + layouts[key]
    return None


def _same_global_shape(op, name, src, dst):
    if src is not None and dst is not None and tuple(src[1]) != tuple(dst[1]):
        raise OpValueError(op, f"the same global shape for '{name}' in the source and destination strategies",
                           f"{tuple(src[1])} (source '{src[0]}') and {tuple(dst[1])} (destination '{dst[0]}')")


# ---------------------------------------------------------------------------------------------------
# the core: read pieces, check, build the destination entries
def _source_pieces(op, name, src_info, values: dict) -> dict:
    """{src_rank: piece} of a sharded entry, each piece checked against the strategy's shape."""
    key, shape, layout = src_info
    members = set(layout.rank_list)
    expected = shard_shape(layout, shape)
    pieces = {}
    for r, v in values.items():
        if r not in members:
            continue
        if isinstance(v, str):
            raise OpValueError(op, f"a tensor for '{name}' (the strategy shards it like '{key}')",
                               f"a string on rank {r}")
        if tuple(v.shape) != expected:
            raise OpValueError(op, f"'{name}' on rank {r} of shape {expected}: its piece of the global shape "
                               f"{tuple(shape)} under the strategy of '{key}' ({layout.tensor_map} over "
                               f"{layout.device_matrix})", f"shape {tuple(v.shape)}")
        pieces[r] = v
    if not pieces:
        raise OpValueError(op, f"'{name}' in the checkpoint files of its ranks {layout.rank_list}",
                           f"it only in ranks {sorted(values)}")
    if len({p.dtype for p in pieces.values()}) != 1:
        raise OpValueError(op, f"one dtype for every piece of '{name}'",
                           ", ".join(f"rank {r}: {p.dtype}" for r, p in sorted(pieces.items())))
    return pieces


def _region(op, name, src_info, pieces: dict, want, checked: set) -> np.ndarray:
    """The region `want` ((start, stop) per dim) of a sharded entry, copied from the source pieces
    that overlap it. Each overlapping piece must come from at least one of its holders, and holders
    of one piece must agree bit for bit (the same checks as `layout.assemble`, on just the pieces
    this region needs: transform_checkpoint_by_rank reads only those files). `checked` remembers
    the replica groups already compared, so each is compared once per entry, not once per rank."""
    _, shape, layout = src_info
    out = np.empty(tuple(b - a for a, b in want), dtype=next(iter(pieces.values())).dtype)
    for g, group in enumerate(replica_groups(layout)):
        have = slice_bounds(layout, shape, group[0])
        lo = [max(a, c) for (a, _), (c, _) in zip(have, want)]
        hi = [min(b, d) for (_, b), (_, d) in zip(have, want)]
        if any(l >= h for l, h in zip(lo, hi)) and out.size:
            continue                                     # this piece lies outside the region
        given = [r for r in group if r in pieces]
        if not given:
            raise OpValueError(op, f"every needed piece of '{name}': the piece held by ranks {group}",
                               f"none of them (read ranks {sorted(pieces)})")
        first = pieces[given[0]]
        if g not in checked:
            for r in given[1:]:
                if first.tobytes() != pieces[r].tobytes():
                    raise OpValueError(op, f"identical replicas of '{name}' on ranks {given}",
                                       f"rank {r} differs from rank {given[0]}")
            checked.add(g)
        if not out.size:
            continue
        src_sl = tuple(slice(l - a, h - a) for l, h, (a, _) in zip(lo, hi, have))
        dst_sl = tuple(slice(l - c, h - c) for l, h, (c, _) in zip(lo, hi, want))
        out[dst_sl] = first[src_sl]
    return out


def _pick(values: dict, dst_rank: int, n_src: int):
    """Which source copy a destination rank takes for an entry without a source layout."""
    preferred = dst_rank % n_src
    return values[preferred] if preferred in values else values[min(values)]


def _transform(op, rank_items: dict, src_layouts: dict, dst_layouts: dict, dst_ranks, n_src: int,
               require_every_rank: bool = False) -> dict:
    """{dst_rank: [(name, value)]} from {src_rank: {name: value}}; raises before returning on any
    inconsistency, so callers write only after everything has been checked."""
    names = []
    seen = set()
    for r in sorted(rank_items):
        for n in rank_items[r]:
            if n not in seen:
                seen.add(n)
                names.append(n)
    out = {r: [] for r in dst_ranks}
    for name in names:
        values = {r: items[name] for r, items in rank_items.items() if name in items}
        if require_every_rank and len(values) != len(rank_items):
            missing = sorted(set(rank_items) - set(values))
            raise OpValueError(op, f"'{name}' in every rank's file (merge_with_redundancy=True; pass False for "
                               "files saved with remove_redundancy)", f"it missing on ranks {missing}")
        src = _lookup(name, src_layouts)
        dst = _lookup(name, dst_layouts)
        if src is not None:                  # sharded in the source: copy each rank's region
            _same_global_shape(op, name, src, dst)
            pieces = _source_pieces(op, name, src, values)
            checked = set()
            for r in dst_ranks:
                want = (slice_bounds(dst[2], src[1], r) if dst is not None
                        else tuple((0, s) for s in src[1]))
                out[r].append((name, _region(op, name, src, pieces, want, checked)))
            continue
        for r in dst_ranks:                  # whole in the source: pick a copy, cut it if needed
            value = _pick(values, r, n_src)
            if dst is not None:
                if isinstance(value, str):
                    raise OpValueError(op, f"a tensor for '{name}' (the destination strategy shards it like "
                                       f"'{dst[0]}')", "a string")
                if tuple(value.shape) != tuple(dst[1]):
                    raise OpValueError(op, f"'{name}' of the global shape {tuple(dst[1])} the destination strategy "
                                       f"gives '{dst[0]}'", f"shape {tuple(value.shape)}")
                value = shard_of(value, dst[2], r)
            out[r].append((name, value))
    return out


def _needed_ranks(rank_id: int, src_layouts: dict, dst_layouts: dict, n_src: int) -> list:
    """The source ranks whose files destination `rank_id` needs: rank `rank_id % n_src`, which
    supplies the entries without a layout, and for each parameter one holder of every source
    piece that overlaps the destination piece (that same rank when it holds one, so as few files
    as possible are read; else the lowest holder)."""
    own = rank_id % n_src
    needed = {own}
    for name, (shape, layout) in src_layouts.items():
        dst = _lookup(name, dst_layouts)
        if dst is not None:
            _same_global_shape("rank_list_for_transform", name, (name, shape, layout), dst)
            want = slice_bounds(dst[2], shape, rank_id) if rank_id in dst[2].rank_list else None
        else:
            want = tuple((0, s) for s in shape)
        if want is None:
            continue
        for group in replica_groups(layout):
            have = slice_bounds(layout, shape, group[0])
            # overlapping intervals (a zero-size dim overlaps trivially: every piece is empty)
            if all((a < d and c < b) or a == b == c == d for (a, b), (c, d) in zip(have, want)):
                needed.add(own if own in group else min(group))
    return sorted(needed)


def _strategies(op, src_strategy_file, dst_strategy_file):
    src = layouts_of(src_strategy_file)
    dst = layouts_of(dst_strategy_file)
    return src, dst, device_num_of(src), device_num_of(dst)


def rank_list_for_transform(rank_id, src_strategy_file=None, dst_strategy_file=None) -> list:
    """`mindspore.parallel.rank_list_for_transform`: the source ranks whose checkpoint files the
    destination rank `rank_id` needs (None strategy = unsharded, one rank)."""
    op = "rank_list_for_transform"
    src, dst, n_src, n_dst = _strategies(op, src_strategy_file, dst_strategy_file)
    rank_id = _check_rank(op, rank_id, n_dst)
    return _needed_ranks(rank_id, src, dst, n_src)


def transform_checkpoint_by_rank(rank_id, checkpoint_files_map, save_checkpoint_file_name,
                                 src_strategy_file=None, dst_strategy_file=None):
    """`mindspore.transform_checkpoint_by_rank`: write the checkpoint of destination rank `rank_id`.

    Args:
        rank_id: the destination rank.
        checkpoint_files_map: `{src_rank: checkpoint file}`; must hold at least the ranks
            `rank_list_for_transform` names.
        save_checkpoint_file_name: the file to write (`.ckpt` or `.safetensors` picks the format).
        src_strategy_file, dst_strategy_file: the strategies (None: unsharded).
    """
    op = "transform_checkpoint_by_rank"
    if not isinstance(checkpoint_files_map, dict) or not checkpoint_files_map:
        raise OpTypeError(op, "'checkpoint_files_map' to be a non-empty dict {src_rank: file}",
                          type(checkpoint_files_map).__name__)
    if not isinstance(save_checkpoint_file_name, (str, os.PathLike)):
        raise OpTypeError(op, "'save_checkpoint_file_name' to be a str", type(save_checkpoint_file_name).__name__)
    out_format = _format_of(op, save_checkpoint_file_name)
    src, dst, n_src, n_dst = _strategies(op, src_strategy_file, dst_strategy_file)
    rank_id = _check_rank(op, rank_id, n_dst)
    for r in checkpoint_files_map:
        _check_rank(op, r, n_src, "the source ranks of checkpoint_files_map")
    needed = _needed_ranks(rank_id, src, dst, n_src)
    missing = [r for r in needed if r not in checkpoint_files_map]
    if missing:
        raise OpValueError(op, f"the checkpoint files of source ranks {needed} (rank {rank_id} needs them)",
                           f"'checkpoint_files_map' without ranks {missing}")
    rank_items = {r: _read(op, checkpoint_files_map[r]) for r in needed}
    items = _transform(op, rank_items, src, dst, [rank_id], n_src)[rank_id]
    save_checkpoint(dict(items), save_checkpoint_file_name, format=out_format)


def _rank_dirs(op, src_checkpoints_dir) -> dict:
    """{rank: the checkpoint file of rank_<rank>/} (MindSpore: the last file in sorted order)."""
    if not isinstance(src_checkpoints_dir, (str, os.PathLike)) or not os.path.isdir(src_checkpoints_dir):
        raise OpValueError(op, "'src_checkpoints_dir' to be an existing directory", repr(src_checkpoints_dir))
    files = {}
    for entry in sorted(os.listdir(src_checkpoints_dir)):
        path = os.path.join(src_checkpoints_dir, entry)
        if not (entry.startswith("rank_") and entry[5:].isdigit() and os.path.isdir(path)):
            continue
        found = (sorted(glob.glob(os.path.join(path, "*.ckpt")))
                 or sorted(glob.glob(os.path.join(path, "*.safetensors"))))
        found = [f for f in found if os.path.isfile(f)]
        if not found:
            continue
        if len(found) > 1:
            logger.warning("%s: %s holds %d checkpoint files; using the last in sorted order, %s",
                           op, path, len(found), os.path.basename(found[-1]))
        files[int(entry[5:])] = found[-1]
    return files


def transform_checkpoints(src_checkpoints_dir, dst_checkpoints_dir, ckpt_prefix, src_strategy_file=None,
                          dst_strategy_file=None, process_num=1, output_format="ckpt"):
    """`mindspore.transform_checkpoints`: reshard a whole distributed checkpoint.

    Args:
        src_checkpoints_dir: holds `rank_0/`, `rank_1/`, ... each with that rank's checkpoint
            (`*.ckpt`, else `*.safetensors`; the last in sorted order if several).
        dst_checkpoints_dir: receives `rank_<r>/<ckpt_prefix><r>.<output_format>` for every
            destination rank r (created if needed).
        ckpt_prefix: the prefix of the written file names.
        src_strategy_file, dst_strategy_file: the strategies (None: unsharded, one rank).
        process_num: accepted for MindSpore compatibility (an int >= 1); minispore transforms in
            this process.
        output_format: "ckpt" or "safetensors".
    """
    op = "transform_checkpoints"
    if not isinstance(ckpt_prefix, str):
        raise OpTypeError(op, "'ckpt_prefix' to be a str", type(ckpt_prefix).__name__)
    if isinstance(process_num, bool) or not isinstance(process_num, numbers.Integral) or process_num < 1:
        raise OpValueError(op, "'process_num' as an int >= 1", repr(process_num))
    output_format = _check_output_format(op, output_format)
    if not isinstance(dst_checkpoints_dir, (str, os.PathLike)):
        raise OpTypeError(op, "'dst_checkpoints_dir' to be a str", type(dst_checkpoints_dir).__name__)
    src, dst, n_src, n_dst = _strategies(op, src_strategy_file, dst_strategy_file)
    files = _rank_dirs(op, src_checkpoints_dir)
    needed = {r: _needed_ranks(r, src, dst, n_src) for r in range(n_dst)}
    all_needed = sorted(set().union(*needed.values()))
    missing = [r for r in all_needed if r not in files]
    if missing:
        raise OpValueError(op, f"a checkpoint file for each source rank in {all_needed} under "
                           f"'{src_checkpoints_dir}' (rank_<i>/*.ckpt)", f"none for ranks {missing}")
    extra = sorted(r for r in files if r >= n_src)
    if extra:       # e.g. a data-parallel run saved on every rank, transformed with no source strategy
        logger.warning("%s: the source strategy covers %d rank(s); ignoring rank_%s ... in %s", op, n_src,
                       extra[0], src_checkpoints_dir)
    rank_items = {r: _read(op, files[r]) for r in all_needed}
    # every destination rank is computed (and so checked) before the first file is written
    outputs = _transform(op, rank_items, src, dst, list(range(n_dst)), n_src)
    for r in range(n_dst):
        directory = os.path.join(os.fspath(dst_checkpoints_dir), f"rank_{r}")
        os.makedirs(directory, exist_ok=True)
        save_checkpoint(dict(outputs[r]), os.path.join(directory, f"{ckpt_prefix}{r}.{output_format}"),
                        format=output_format)


# ---------------------------------------------------------------------------------------------------
# the training state a rank saves: its shards, its optimizer's state, the RNG
RNG_STATE_KEY = "rng_state"


def training_state_dict(net, optimizer=None, include_rng=True) -> dict:
    """`{name: ndarray | str}`: what one rank of a sharded training run saves so that a run of
    ANOTHER layout can resume it exactly (pass it to `save_checkpoint`, one file per rank).

    * the net's parameters (this rank's shards, under the full model's names);
    * the optimizer's own state Parameters - AdamW's `exp_avg.<param>` / `exp_avg_sq.<param>`
      moments, MindSpore's `adam_m.<param>`, the step counters (`state_step`, `global_step`) -
      but not the net's parameters it also reaches. A moment is shaped like its parameter, and
      the checkpoint tools shard `<state>.<param>` by `<param>`'s layout (`_lookup`), so the
      moments are resharded with the weights; the 0-d counters are copied whole;
    * with `include_rng`, the global RNG state as a JSON string under "rng_state": every rank of
      a minispore run draws from the same seeded generator (same batches, same dropout masks), so
      whole-copy is right; `load_training_state` restores it.
    """
    from ..common import context
    op = "training_state_dict"
    items, seen = {}, set()
    for owner, cell in (("net", net), ("optimizer", optimizer)):
        if cell is None:
            continue
        if not hasattr(cell, "parameters_and_names"):
            raise OpTypeError(op, f"'{owner}' to be a Cell", type(cell).__name__)
        for _, p in cell.parameters_and_names():
            if id(p) in seen:
                continue
            seen.add(id(p))
            if p.name in items:
                raise OpValueError(op, "unique Parameter names across the net and the optimizer",
                                   f"'{p.name}' twice")
            items[p.name] = p.asnumpy()
    if include_rng:
        if RNG_STATE_KEY in items:
            raise OpValueError(op, f"no Parameter named '{RNG_STATE_KEY}' (the key of the RNG state)", "one")
        items[RNG_STATE_KEY] = json.dumps(context.get_rng_state())
    return items


def load_training_state(param_dict, net, optimizer=None, restore_rng=True, strict_load=True):
    """Load what `training_state_dict` saved (then resharded by `transform_checkpoints`,
    `transform_checkpoint_by_rank` or `load_distributed_checkpoint(..., return_param_dict=True)`)
    into `net` and `optimizer`, and restore the global RNG. `param_dict` maps names to Parameters
    / arrays / strings (a loaded checkpoint). Every net and optimizer Parameter must get a value
    (a resumed run that silently kept fresh moments would not be the same run): otherwise
    nothing is changed and OpValueError names the missing entries."""
    from ..common import context
    op = "load_training_state"
    if not isinstance(param_dict, dict):
        raise OpTypeError(op, "'param_dict' to be a dict {name: Parameter | ndarray | str}", type(param_dict).__name__)
    tensors = {}
    for name, v in param_dict.items():
        if isinstance(v, str):
            continue
        tensors[name] = v if isinstance(v, Tensor) else Parameter(Tensor(np.asarray(v)), name=name)
    rng = param_dict.get(RNG_STATE_KEY) if restore_rng else None
    if restore_rng:
        if not isinstance(rng, str):
            raise OpValueError(op, f"an '{RNG_STATE_KEY}' string in the checkpoint (restore_rng=True)",
                               "none" if rng is None else type(rng).__name__)
        try:
            state = json.loads(rng)
            type(context.rng().bit_generator)().state = state        # validate before changing anything
        except (ValueError, TypeError, KeyError) as e:
            raise OpValueError(op, "a usable RNG state in the checkpoint", f"{e}") from None
    cells = [c for c in (net, optimizer) if c is not None]
    missing = []
    for cell in cells:
        for _, p in cell.parameters_and_names():
            if p.name not in tensors:
                missing.append(p.name)
    if strict_load and missing:
        raise OpValueError(op, "a value for every net and optimizer Parameter",
                           f"none for {sorted(set(missing))[:6]}{' ...' if len(set(missing)) > 6 else ''}")
    for cell in cells:
        load_param_into_net(cell, tensors, strict_load=False)
    if restore_rng:
        context.set_rng_state(state)


def _layout_for_merge(op, name, strategy, sliced: list):
    entry = strategy.get(name) if isinstance(strategy, dict) else None
    if entry is None:
        raise OpValueError(op, f"'{name}' in 'strategy' (the parameter's slice strategy)",
                           f"a strategy with {sorted(strategy)[:5]}...")
    if isinstance(entry, ParallelLayouts):
        layout, known = entry.layout, entry.tensor_shape
    elif isinstance(entry, Layout):
        layout, known = entry, None
    elif isinstance(entry, tuple) and len(entry) == 2 and isinstance(entry[1], Layout):
        known, layout = tuple(entry[0]), entry[1]
    else:
        raise OpTypeError(op, f"the strategy of '{name}' as ParallelLayouts, Layout or (shape, Layout)",
                          type(entry).__name__)
    piece = tuple(sliced[0].shape)
    splits = layout.dim_splits()
    if len(piece) != len(splits):
        raise OpValueError(op, f"slices of '{name}' of rank {len(splits)} (its tensor map {layout.tensor_map})",
                           f"shape {piece}")
    shape = tuple(p * s for p, s in zip(piece, splits))
    if known is not None and tuple(known) != shape:
        raise OpValueError(op, f"slices of '{name}' of shape {shard_shape(layout, known)} (global {tuple(known)})",
                           f"shape {piece}")
    return layout, shape


def merge_sliced_parameter(sliced_parameters, strategy=None):
    """`mindspore.merge_sliced_parameter`: one Parameter from its slices, one per rank in rank order.

    Without `strategy` the slices are concatenated along axis 0. With `strategy` (the dict of
    `build_searched_strategy`, or `{name: Layout | (shape, Layout)}`) they are put back by the
    parameter's layout; repeated slices must be identical."""
    op = "merge_sliced_parameter"
    if not isinstance(sliced_parameters, (list, tuple)) or not sliced_parameters:
        raise OpTypeError(op, "'sliced_parameters' to be a non-empty list of Parameters",
                          type(sliced_parameters).__name__)
    for p in sliced_parameters:
        if not isinstance(p, Parameter):
            raise OpTypeError(op, "every item of 'sliced_parameters' to be a Parameter", type(p).__name__)
    first = sliced_parameters[0]
    for p in sliced_parameters[1:]:
        if p.name != first.name:
            raise OpValueError(op, f"slices of one parameter (all named '{first.name}')", f"a slice named '{p.name}'")
        if p.dtype != first.dtype:
            raise OpValueError(op, f"slices of one dtype ({first.dtype})", f"{p.dtype} in a slice of '{p.name}'")
    arrays = [p.asnumpy() for p in sliced_parameters]
    if strategy is None:
        if any(a.ndim == 0 for a in arrays):
            raise OpValueError(op, "slices with at least one dimension to concatenate along axis 0",
                               f"a 0-d slice of '{first.name}'")
        try:
            full = np.concatenate(arrays, axis=0)
        except ValueError:
            raise OpValueError(op, f"slices of '{first.name}' equal in every dim but axis 0",
                               ", ".join(str(a.shape) for a in arrays)) from None
    else:
        if not isinstance(strategy, dict):
            raise OpTypeError(op, "'strategy' to be None or a dict {name: layout}", type(strategy).__name__)
        layout, shape = _layout_for_merge(op, first.name, strategy, arrays)
        if len(arrays) != layout.device_num:
            raise OpValueError(op, f"{layout.device_num} slices of '{first.name}' (one per rank of its layout)",
                               f"{len(arrays)}")
        full = assemble(dict(zip(layout.rank_list, arrays)), layout, shape, first.name)
    return Parameter(Tensor(full), name=first.name, requires_grad=first.requires_grad)


# ---------------------------------------------------------------------------------------------------
def _predict_layouts(op, predict_strategy) -> dict:
    """{name: (global shape or None, Layout)} of load_distributed_checkpoint's predict_strategy."""
    if predict_strategy is None:
        return {}
    if isinstance(predict_strategy, (str, os.PathLike)):
        return layouts_of(predict_strategy)
    if not isinstance(predict_strategy, dict):
        raise OpTypeError(op, "'predict_strategy' to be None, a strategy file or a dict {name: layout}",
                          type(predict_strategy).__name__)
    out = {}
    for name, v in predict_strategy.items():
        if isinstance(v, ParallelLayouts):
            out[name] = (v.tensor_shape, v.layout)
        elif isinstance(v, Layout):
            out[name] = (None, v)
        elif isinstance(v, tuple) and len(v) == 2 and isinstance(v[1], Layout):
            out[name] = (tuple(v[0]), v[1])
        elif isinstance(v, (list, tuple)) and len(v) >= 2:     # MindSpore's [dev_matrix, tensor_map, ...]
            out[name] = (None, Layout.from_tensor_map(tuple(v[0]), list(v[1])))
        else:
            raise OpTypeError(op, f"the predict strategy of '{name}' as a Layout, (shape, Layout) or "
                              "[dev_matrix, tensor_map, ...]", f"{type(v).__name__} {v!r:.60}")
    return out


def _unified_items(op, unified_dir) -> dict:
    """{name: full array} of the files `unified_safetensors` wrote."""
    if not os.path.isdir(unified_dir):
        raise OpValueError(op, "'unified_safetensors_dir' to be an existing directory", repr(unified_dir))
    paths = sorted(glob.glob(os.path.join(unified_dir, "*.safetensors")))
    if not paths:
        raise OpValueError(op, "safetensors files in 'unified_safetensors_dir'", f"none in '{unified_dir}'")
    items = {}
    for path in paths:
        for name, value in _read(op, path).items():
            if name in items:
                raise OpValueError(op, "each parameter in one unified file", f"'{name}' twice in '{unified_dir}'")
            items[name] = value
    return items


def load_distributed_checkpoint(network, checkpoint_filenames=None, predict_strategy=None,
                                train_strategy_filename=None, strict_load=False, dec_key=None,
                                dec_mode="AES-GCM", format="ckpt", unified_safetensors_dir=None,
                                dst_safetensors_dir=None, rank_id=None, output_format="safetensors",
                                name_map=None, max_process_num=64, return_param_dict=False):
    """`mindspore.load_distributed_checkpoint`: load a distributed checkpoint into `network`.

    Args:
        network: the Cell to load into (its Parameters must have this rank's shapes).
        checkpoint_filenames: the training run's checkpoint files, one per training rank, in rank order.
        predict_strategy: how `network` is sharded on this process: None (it holds full,
            unsharded parameters: the single-process case), a strategy file, or `{name: Layout |
            (shape, Layout) | [dev_matrix, tensor_map, ...]}`; parameters not listed are whole.
        train_strategy_filename: the training strategy file (None: the files are unsharded).
        strict_load: passed to `load_param_into_net`.
        unified_safetensors_dir: instead of `checkpoint_filenames`, the directory
            `unified_safetensors` wrote (full parameters); needs format="safetensors".
        rank_id: this process's rank in `predict_strategy` (default: the world rank, 0 alone).
        name_map: `{name in the checkpoint: name in the network}` renames entries on load.
        return_param_dict: return the `{name: Parameter}` dict that was loaded.
        dec_key/dec_mode, dst_safetensors_dir, output_format, max_process_num: MindSpore's
            encryption and "write sliced files instead" options; dec_key and dst_safetensors_dir
            must be None (not implemented).
    """
    op = "load_distributed_checkpoint"
    if format not in FORMATS:
        raise OpValueError(op, "'format' to be 'ckpt' or 'safetensors'", repr(format))
    if dec_key is not None:
        raise OpValueError(op, "no decryption key (checkpoint encryption is not implemented)", "a key")
    if dst_safetensors_dir is not None:
        raise OpValueError(op, "dst_safetensors_dir=None (writing sliced files is transform_checkpoints' job)",
                           repr(dst_safetensors_dir))
    if name_map is not None and not isinstance(name_map, dict):
        raise OpTypeError(op, "'name_map' to be None or a dict {checkpoint name: network name}",
                          type(name_map).__name__)
    predict = _predict_layouts(op, predict_strategy)
    if rank_id is None:
        from ..common import process_groups
        rank_id = process_groups.world().rank if process_groups.is_initialized() else 0
    if predict:
        rank_id = _check_rank(op, rank_id, device_num_of({k: v for k, v in predict.items()}))

    if unified_safetensors_dir is not None:
        if format != "safetensors":
            raise OpValueError(op, "format='safetensors' with 'unified_safetensors_dir'", repr(format))
        fulls = _unified_items(op, unified_safetensors_dir)
    else:
        if not isinstance(checkpoint_filenames, (list, tuple)) or not checkpoint_filenames:
            raise OpTypeError(op, "'checkpoint_filenames' to be a non-empty list of files, one per training rank",
                              type(checkpoint_filenames).__name__)
        train = layouts_of(train_strategy_filename)
        n_train = device_num_of(train)
        if len(checkpoint_filenames) != n_train:
            raise OpValueError(op, f"{n_train} checkpoint files (one per rank of the training strategy)",
                               f"{len(checkpoint_filenames)}")
        for f in checkpoint_filenames:
            if _format_of(op, f) != format:
                raise OpValueError(op, f"checkpoint files in the format '{format}'", f"'{f}'")
        rank_items = {r: _read(op, f) for r, f in enumerate(checkpoint_filenames)}
        fulls = dict(_transform(op, rank_items, train, {}, [rank_id % n_train], n_train)[rank_id % n_train])

    param_dict = {}
    for name, value in fulls.items():
        name = name_map.get(name, name) if name_map else name
        info = _lookup(name, {k: v for k, v in predict.items()})
        if info is not None and not isinstance(value, str):
            key, shape, layout = info
            if shape is not None and tuple(shape) != tuple(value.shape):
                raise OpValueError(op, f"'{name}' of the global shape {tuple(shape)} in 'predict_strategy'",
                                   f"shape {tuple(value.shape)} in the checkpoint")
            check_shape(op, layout, value.shape, f"parameter '{name}'")
            value = shard_of(value, layout, rank_id)
        param_dict[name] = value if isinstance(value, str) else Parameter(Tensor(value), name=name)
    if network is not None:
        load_param_into_net(network, param_dict, strict_load)
    return param_dict if return_param_dict else None


def unified_safetensors(src_dir, src_strategy_file, dst_dir, merge_with_redundancy=True, file_suffix=None,
                        max_process_num=64, choice_func=None, split_dst_file=()):
    """`mindspore.unified_safetensors`: merge every rank's safetensors into full parameters.

    Reads `src_dir/rank_<i>/*.safetensors` (those ending with `<file_suffix>.safetensors` if
    given) for every rank of `src_strategy_file` and writes `dst_dir/model.safetensors` plus
    `param_name_map.json` (`{name: file}`), which `load_distributed_checkpoint(...,
    unified_safetensors_dir=dst_dir, format="safetensors")` reads. `merge_with_redundancy=False`
    accepts files saved with remove_redundancy (each piece on at least one rank, not on all).
    `choice_func(name)` returns False to drop an entry, True to keep it, or a str to rename it.
    `split_dst_file=(k, n)` writes only the k-th (1-based) of n interleaved shares of the
    parameters, to `model-<k>-of-<n>.safetensors`, so several machines can share the work.
    """
    op = "unified_safetensors"
    if not isinstance(merge_with_redundancy, bool):
        raise OpTypeError(op, "'merge_with_redundancy' to be a bool", type(merge_with_redundancy).__name__)
    if file_suffix is not None and not isinstance(file_suffix, str):
        raise OpTypeError(op, "'file_suffix' to be None or a str", type(file_suffix).__name__)
    if choice_func is not None and not callable(choice_func):
        raise OpTypeError(op, "'choice_func' to be a callable", type(choice_func).__name__)
    if split_dst_file and not (isinstance(split_dst_file, tuple) and len(split_dst_file) == 2
                               and all(isinstance(v, int) for v in split_dst_file)
                               and 1 <= split_dst_file[0] <= split_dst_file[1]):
        raise OpValueError(op, "'split_dst_file' as () or (k, n) with 1 <= k <= n", repr(split_dst_file))
    if not isinstance(dst_dir, (str, os.PathLike)):
        raise OpTypeError(op, "'dst_dir' to be a str", type(dst_dir).__name__)
    src = layouts_of(src_strategy_file)
    n_src = device_num_of(src)
    if not isinstance(src_dir, (str, os.PathLike)) or not os.path.isdir(src_dir):
        raise OpValueError(op, "'src_dir' to be an existing directory", repr(src_dir))
    pattern = "*" + (file_suffix or "") + ".safetensors"
    rank_items = {}
    for r in range(n_src):
        found = sorted(glob.glob(os.path.join(src_dir, f"rank_{r}", pattern)))
        if not found:
            raise OpValueError(op, f"a safetensors file ({pattern}) for each of the {n_src} source ranks",
                               f"none in '{os.path.join(src_dir, f'rank_{r}')}'")
        items = {}
        for path in found:
            items.update(_read(op, path))
        rank_items[r] = items
    fulls = _transform(op, rank_items, src, {}, [0], n_src, require_every_rank=merge_with_redundancy)[0]
    chosen = []
    for name, value in fulls:
        keep = True if choice_func is None else choice_func(name)
        if isinstance(keep, str):
            name = keep
        elif not isinstance(keep, (bool, np.bool_)):
            raise OpTypeError(op, "choice_func to return a bool or a str", type(keep).__name__)
        elif not keep:
            continue
        chosen.append((name, value))
    file_name = UNIFIED_FILE
    if split_dst_file:
        k, n = split_dst_file
        chosen = chosen[k - 1::n]
        file_name = f"model-{k}-of-{n}.safetensors"
    os.makedirs(os.fspath(dst_dir), exist_ok=True)
    save_checkpoint(dict(chosen), os.path.join(os.fspath(dst_dir), file_name), format="safetensors")
    if not split_dst_file:
        atomic_write_bytes(os.path.join(os.fspath(dst_dir), NAME_MAP_FILE),
                           json.dumps({n: file_name for n, _ in chosen}, indent=1).encode("utf-8"), mode=None)
