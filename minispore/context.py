"""`mindspore.context` (`from mindspore import context; context.set_context(mode=context.GRAPH_MODE)`),
the spelling older MindSpore scripts use for what 2.x also exposes at the top level.

The execution context itself lives in `minispore.common.context`; this module re-exports it and
adds MindSpore's *auto-parallel* context: `ParallelMode` and `set/get/reset_auto_parallel_context`.
minispore runs on one device, so these settings are validated and recorded (a training script
that reads `get_auto_parallel_context("parallel_mode")` to decide whether to average gradients
sees 'stand_alone' and takes the single-device path, exactly as on one MindSpore device); no
setting changes how minispore computes.
"""
from __future__ import annotations

import numbers

from .common.context import GRAPH_MODE, PYNATIVE_MODE, get_context, set_context
from .common.errors import OpTypeError, OpValueError


class ParallelMode:
    """MindSpore's parallel-mode names (strings)."""
    STAND_ALONE = "stand_alone"
    DATA_PARALLEL = "data_parallel"
    HYBRID_PARALLEL = "hybrid_parallel"
    SEMI_AUTO_PARALLEL = "semi_auto_parallel"
    AUTO_PARALLEL = "auto_parallel"
    MODE_LIST = [STAND_ALONE, DATA_PARALLEL, HYBRID_PARALLEL, SEMI_AUTO_PARALLEL, AUTO_PARALLEL]


# key -> (default, check); MindSpore 2.10's defaults on one device
def _bool(key, v):
    if not isinstance(v, bool):
        raise OpTypeError("set_auto_parallel_context", f"'{key}' to be a bool", f"{type(v).__name__} {v!r}")
    return v


def _positive_int(key, v):
    if not isinstance(v, numbers.Integral) or isinstance(v, bool):
        raise OpTypeError("set_auto_parallel_context", f"'{key}' to be an int", f"{type(v).__name__} {v!r}")
    if v < 1:
        raise OpValueError("set_auto_parallel_context", f"'{key}' >= 1", repr(v))
    return int(v)


def _rank(key, v):
    if not isinstance(v, numbers.Integral) or isinstance(v, bool) or v < 0:
        raise OpValueError("set_auto_parallel_context", f"'{key}' to be an int >= 0", repr(v))
    return int(v)


def _parallel_mode(key, v):
    if v not in ParallelMode.MODE_LIST:
        raise OpValueError("set_auto_parallel_context", f"'{key}' in {ParallelMode.MODE_LIST}", repr(v))
    return v


def _search_mode(key, v):
    modes = ("recursive_programming", "sharding_propagation", "dynamic_programming")
    if v not in modes:
        raise OpValueError("set_auto_parallel_context", f"'{key}' in {list(modes)}", repr(v))
    return v


_AUTO_PARALLEL = {
    "parallel_mode": (ParallelMode.STAND_ALONE, _parallel_mode),
    "gradients_mean": (False, _bool),
    "device_num": (1, _positive_int),
    "global_rank": (0, _rank),
    "gradient_fp32_sync": (True, _bool),
    "parameter_broadcast": (False, _bool),
    "full_batch": (False, _bool),
    "enable_parallel_optimizer": (False, _bool),
    "pipeline_stages": (1, _positive_int),
    "search_mode": ("recursive_programming", _search_mode),
}
_auto_parallel = {k: d for k, (d, _) in _AUTO_PARALLEL.items()}


def _known(op, key):
    if key not in _AUTO_PARALLEL:
        raise OpValueError(op, f"a key in {sorted(_AUTO_PARALLEL)}", repr(key))


def set_auto_parallel_context(**kwargs):
    """Validate and record auto-parallel settings (all checked before any is stored)."""
    checked = {}
    for key, value in kwargs.items():
        _known("set_auto_parallel_context", key)
        checked[key] = _AUTO_PARALLEL[key][1](key, value)
    _auto_parallel.update(checked)


def get_auto_parallel_context(attr_key):
    _known("get_auto_parallel_context", attr_key)
    return _auto_parallel[attr_key]


def reset_auto_parallel_context():
    """Every auto-parallel setting back to its default."""
    _auto_parallel.update({k: d for k, (d, _) in _AUTO_PARALLEL.items()})


__all__ = ["GRAPH_MODE", "PYNATIVE_MODE", "set_context", "get_context", "ParallelMode",
           "set_auto_parallel_context", "get_auto_parallel_context", "reset_auto_parallel_context"]
