"""MindSpore's auto-parallel context: `set_auto_parallel_context(**kw)`, `get_auto_parallel_context(key)`,
`reset_auto_parallel_context()` and the `ParallelMode` names.

Why it lives in `common`: the training cells of `nn` (TrainOneStepCell inserts a
DistributedGradReducer when `parallel_mode` is data_parallel or hybrid_parallel) and the reducer
itself (its bucket sizes come from `comm_fusion`) read it, and `nn` must not import the top-level
`minispore.context` facade. `minispore.context` and `minispore` re-export these functions.

Every key MindSpore documents for 2.3-2.10 is stored; every value is validated (type and range)
before any of a call's values is stored, so a bad call changes nothing. Two keys follow MindSpore's
"not set by the user" rule: `device_num` and `global_rank` report the world's size and this
process's rank once communication is initialized (`communication.init()`), unless the user set
them; before that they report their defaults (1 and 0).

Which keys change how minispore computes today: `parallel_mode` (data_parallel/hybrid_parallel make
TrainOneStepCell and Model insert the gradient reducer), `gradients_mean`, `device_num` (the mean's
degree) and `comm_fusion` / `all_reduce_fusion_config` (the reducer's buckets), and
`enable_parallel_optimizer` / `parallel_optimizer_config` (level, threshold: TrainOneStepCell inserts
nn/optim/parallel_optimizer.py's ZeRO ParallelOptimizer in data-parallel mode). The others are
recorded for the features that read them (semi-auto parallel, optimizer parallel, pipelines).
"""
from __future__ import annotations

import numbers

from .errors import OpTypeError, OpValueError

_SET, _GET = "set_auto_parallel_context", "get_auto_parallel_context"


class ParallelMode:
    """MindSpore's parallel-mode names (strings)."""
    STAND_ALONE = "stand_alone"
    DATA_PARALLEL = "data_parallel"
    HYBRID_PARALLEL = "hybrid_parallel"
    SEMI_AUTO_PARALLEL = "semi_auto_parallel"
    AUTO_PARALLEL = "auto_parallel"
    MODE_LIST = [STAND_ALONE, DATA_PARALLEL, HYBRID_PARALLEL, SEMI_AUTO_PARALLEL, AUTO_PARALLEL]


# ---- validators: (key, value) -> the value to store, or an Op*Error naming the key -------------

def _is_int(v) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _bool(key, v):
    if not isinstance(v, bool):
        raise OpTypeError(_SET, f"'{key}' to be a bool", f"{type(v).__name__} {v!r}")
    return v


def _int_in(lo, hi):
    def check(key, v):
        if not _is_int(v):
            raise OpTypeError(_SET, f"'{key}' to be an int", f"{type(v).__name__} {v!r}")
        if not lo <= v <= hi:
            raise OpValueError(_SET, f"'{key}' in [{lo}, {hi}]", repr(v))
        return int(v)
    return check


def _one_of(*choices):
    def check(key, v):
        if v not in choices:
            raise OpValueError(_SET, f"'{key}' in {list(choices)}", repr(v))
        return v
    return check


def _str(key, v):
    if not isinstance(v, str):
        raise OpTypeError(_SET, f"'{key}' to be a str", f"{type(v).__name__} {v!r}")
    return v


def _index_list(key, v):
    """all_reduce_fusion_config: strictly increasing parameter indices where a new bucket starts."""
    if not isinstance(v, (list, tuple)) or not all(_is_int(i) and i >= 0 for i in v):
        raise OpTypeError(_SET, f"'{key}' to be a list of non-negative ints (parameter indices)", repr(v))
    if any(b <= a for a, b in zip(v, v[1:])):
        raise OpValueError(_SET, f"'{key}' strictly increasing", repr(v))
    return [int(i) for i in v]


_FUSION_MODES = ("auto", "size", "index")


def _fusion_entry(key, name, entry):
    """One comm_fusion entry: {"mode": "auto"} (64 MB buckets), {"mode": "size", "config": MB},
    or {"mode": "index", "config": [indices]} (allreduce only, like all_reduce_fusion_config)."""
    if not isinstance(entry, dict):
        raise OpTypeError(_SET, f"'{key}[\"{name}\"]' to be a dict with 'mode' and 'config'",
                          type(entry).__name__)
    unknown = set(entry) - {"mode", "config"}
    if unknown:
        raise OpValueError(_SET, f"'{key}[\"{name}\"]' keys 'mode' and 'config'", repr(sorted(unknown)))
    mode = entry.get("mode", "auto")
    if mode not in _FUSION_MODES:
        raise OpValueError(_SET, f"'{key}[\"{name}\"][\"mode\"]' in {list(_FUSION_MODES)}", repr(mode))
    config = entry.get("config")
    if mode == "size":
        if isinstance(config, bool) or not isinstance(config, numbers.Real) or not config > 0:
            raise OpValueError(_SET, f"'{key}[\"{name}\"][\"config\"]' a bucket size in MB > 0 for "
                               f"mode 'size'", repr(config))
        config = float(config)
    elif mode == "index":
        if name != "allreduce":
            raise OpValueError(_SET, f"mode 'index' only for '{key}[\"allreduce\"]'", repr(name))
        config = _index_list(f"{key}[\"allreduce\"][\"config\"]", config)
    elif config is not None:
        raise OpValueError(_SET, f"no 'config' for mode 'auto' in '{key}[\"{name}\"]'", repr(config))
    return {"mode": mode, "config": config}


def _comm_fusion(key, v):
    if not isinstance(v, dict):
        raise OpTypeError(_SET, f"'{key}' to be a dict", type(v).__name__)
    out = {}
    for name, entry in v.items():
        if name == "openstate":
            out[name] = _bool(f"{key}[\"openstate\"]", entry)
        elif name in ("allreduce", "allgather", "reducescatter"):
            out[name] = _fusion_entry(key, name, entry)
        else:
            raise OpValueError(_SET, f"'{key}' keys in ['openstate', 'allreduce', 'allgather', "
                               f"'reducescatter']", repr(name))
    return out


def _dict_of(allowed: dict):
    """A dict whose keys are in `allowed` (key -> validator)."""
    def check(key, v):
        if not isinstance(v, dict):
            raise OpTypeError(_SET, f"'{key}' to be a dict", type(v).__name__)
        out = {}
        for k, value in v.items():
            if k not in allowed:
                raise OpValueError(_SET, f"'{key}' keys in {sorted(allowed)}", repr(k))
            out[k] = allowed[k](f"{key}[\"{k}\"]", value)
        return out
    return check


def _shard_size(key, v):
    if not _is_int(v) or not (v == -1 or v > 0):
        raise OpValueError(_SET, f"'{key}' -1 (all ranks) or a positive int", repr(v))
    return int(v)


def _non_negative(key, v):
    if isinstance(v, bool) or not isinstance(v, numbers.Real) or v < 0:
        raise OpValueError(_SET, f"'{key}' a number >= 0", repr(v))
    return v


_parallel_optimizer_config = _dict_of({
    "optimizer_level": _one_of("level1", "level2", "level3"),
    "parallel_optimizer_threshold": _non_negative,         # KB
    "optimizer_weight_shard_size": _shard_size,
    "gradient_accumulation_shard": _bool,
})

_strategy_ckpt_config = _dict_of({
    "load_file": _str, "save_file": _str, "only_trainable_params": _bool,
})

_pipeline_config = _dict_of({
    "pipeline_interleave": _bool,
    "pipeline_scheduler": _one_of("gpipe", "1f1b", "seqpipe", "seqvpp", "seqsmartvpp", "zero_bubble_v"),
})


def _dataset_strategy(key, v):
    """'data_parallel' (each rank reads its slice, ≡ full_batch=False), 'full_batch', or one
    strategy per dataset output: a tuple of tuples of positive split counts."""
    if v in ("data_parallel", "full_batch"):
        return v
    if isinstance(v, tuple) and v and all(
            isinstance(s, tuple) and all(_is_int(d) and d > 0 for d in s) for s in v):
        return v
    raise OpValueError(_SET, f"'{key}' 'data_parallel', 'full_batch' or a tuple of per-input "
                       f"strategies (tuples of positive ints)", repr(v))


# key -> (default, validator); MindSpore's defaults
_KEYS = {
    "parallel_mode": (ParallelMode.STAND_ALONE, _one_of(*ParallelMode.MODE_LIST)),
    "device_num": (1, _int_in(1, 4096)),
    "global_rank": (0, _int_in(0, 4095)),
    "gradients_mean": (False, _bool),
    "gradient_fp32_sync": (True, _bool),
    "loss_repeated_mean": (True, _bool),
    "parameter_broadcast": (False, _bool),
    "full_batch": (False, _bool),
    "dataset_strategy": ("data_parallel", _dataset_strategy),
    "search_mode": ("recursive_programming",
                    _one_of("recursive_programming", "sharding_propagation", "dynamic_programming")),
    "auto_parallel_search_mode": ("recursive_programming",
                                  _one_of("recursive_programming", "sharding_propagation",
                                          "dynamic_programming")),
    "comm_fusion": ({"openstate": True, "allreduce": {"mode": "auto", "config": None}}, _comm_fusion),
    "all_reduce_fusion_config": ([], _index_list),
    "enable_parallel_optimizer": (False, _bool),
    "parallel_optimizer_config": ({}, _parallel_optimizer_config),
    "enable_alltoall": (False, _bool),
    "force_fp32_communication": (False, _bool),
    "strategy_ckpt_config": ({"load_file": "", "save_file": "", "only_trainable_params": True},
                             _strategy_ckpt_config),
    "strategy_ckpt_load_file": ("", _str),
    "strategy_ckpt_save_file": ("", _str),
    "group_ckpt_save_file": ("", _str),
    "pipeline_stages": (1, _int_in(1, 4096)),
    "pipeline_result_broadcast": (False, _bool),
    "pipeline_config": ({"pipeline_interleave": False, "pipeline_scheduler": "1f1b"}, _pipeline_config),
    "auto_pipeline": (False, _bool),
}

_values: dict = {}
_user_set: set = set()     # keys the user set since the last reset (device_num/global_rank rule)


def _fresh(v):
    """A copy of a default, so a caller mutating what get returned cannot change the default."""
    if isinstance(v, dict):
        return {k: _fresh(x) for k, x in v.items()}
    if isinstance(v, list):
        return list(v)
    return v


def reset_auto_parallel_context():
    """Every auto-parallel setting back to its default."""
    _values.clear()
    _values.update({k: _fresh(d) for k, (d, _) in _KEYS.items()})
    _user_set.clear()


reset_auto_parallel_context()


def _known(op, key):
    if key not in _KEYS:
        raise OpValueError(op, f"a key in {sorted(_KEYS)}", repr(key))


def set_auto_parallel_context(**kwargs):
    """Validate and record auto-parallel settings (every value is checked before any is stored).

    `comm_fusion` is merged per communication kind (setting "allreduce" keeps "openstate"), as
    MindSpore's context does; `strategy_ckpt_config` and `parallel_optimizer_config` are merged
    over their current values likewise.
    """
    checked = {}
    for key, value in kwargs.items():
        _known(_SET, key)
        checked[key] = _KEYS[key][1](key, value)
    if "dataset_strategy" in checked and "full_batch" in checked:
        fb = checked["dataset_strategy"] == "full_batch"
        if checked["full_batch"] != fb:
            raise OpValueError(_SET, "'full_batch' and 'dataset_strategy' that agree",
                               f"full_batch={checked['full_batch']}, "
                               f"dataset_strategy={checked['dataset_strategy']!r}")
    for key in ("comm_fusion", "strategy_ckpt_config", "parallel_optimizer_config", "pipeline_config"):
        if key in checked:
            checked[key] = {**_values[key], **checked[key]}
    _values.update(checked)
    _user_set.update(checked)
    # the two spellings of the same settings stay in step
    if "full_batch" in checked and "dataset_strategy" not in checked:
        _values["dataset_strategy"] = "full_batch" if checked["full_batch"] else "data_parallel"
    if "dataset_strategy" in checked and "full_batch" not in checked:
        _values["full_batch"] = checked["dataset_strategy"] == "full_batch"
    if "search_mode" in checked:
        _values["auto_parallel_search_mode"] = checked["search_mode"]
    if "strategy_ckpt_save_file" in checked:
        _values["strategy_ckpt_config"]["save_file"] = checked["strategy_ckpt_save_file"]
    if "strategy_ckpt_load_file" in checked:
        _values["strategy_ckpt_config"]["load_file"] = checked["strategy_ckpt_load_file"]


def get_auto_parallel_context(attr_key):
    """The value of one auto-parallel setting (see the module docstring for device_num/global_rank)."""
    _known(_GET, attr_key)
    if attr_key in ("device_num", "global_rank") and attr_key not in _user_set:
        from . import process_groups
        if process_groups.is_initialized():
            w = process_groups.world()
            return w.size if attr_key == "device_num" else w.rank
    return _fresh(_values[attr_key])


def is_data_parallel() -> bool:
    """True when parallel_mode asks the training cells for a gradient all-reduce (MindSpore inserts
    DistributedGradReducer for data_parallel and hybrid_parallel)."""
    return _values["parallel_mode"] in (ParallelMode.DATA_PARALLEL, ParallelMode.HYBRID_PARALLEL)


__all__ = ["ParallelMode", "set_auto_parallel_context", "get_auto_parallel_context",
           "reset_auto_parallel_context"]
