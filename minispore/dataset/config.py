"""`mindspore.dataset.config`: the pipeline's global settings (seed, worker count, ...).

`set_seed(n)` fixes the random stream of every dataset iterator made afterwards (source shuffling,
`Dataset.shuffle`, random transforms): each new iterator starts from seed `n`, so two pipelines built
the same way give the same order. Until it is called, iterators draw their seed from minispore's
global RNG, which `ms.set_seed(n)` seeds (MindSpore's `ms.set_seed` sets the dataset seed too).
The worker/prefetch settings are stored and reported; minispore's pipeline runs in the calling thread.
"""
from __future__ import annotations

import numbers

from ..common.errors import OpTypeError, OpValueError

_settings = {"seed": None, "num_parallel_workers": 8, "prefetch_size": 16, "enable_shared_mem": True,
             "debug_mode": False}


def _uint32(op, value):
    if not isinstance(value, numbers.Integral) or isinstance(value, bool):
        raise OpTypeError(op, "an int", f"{type(value).__name__} {value!r}")
    if not 0 <= value <= 2 ** 32 - 1:
        raise OpValueError(op, "a value in [0, 2**32 - 1]", repr(value))
    return int(value)


def set_seed(seed):
    _settings["seed"] = _uint32("config.set_seed", seed)


def get_seed():
    """The seed set by `set_seed` (MindSpore reports its default seed, 5489, before that)."""
    return 5489 if _settings["seed"] is None else _settings["seed"]


def get_seed_if_set():
    return _settings["seed"]


def _positive_setting(name):
    def setter(value):
        value = _uint32(f"config.set_{name}", value)
        if value < 1:
            raise OpValueError(f"config.set_{name}", "a positive int", repr(value))
        _settings[name] = value
    setter.__name__ = f"set_{name}"

    def getter():
        return _settings[name]
    getter.__name__ = f"get_{name}"
    return setter, getter


set_num_parallel_workers, get_num_parallel_workers = _positive_setting("num_parallel_workers")
set_prefetch_size, get_prefetch_size = _positive_setting("prefetch_size")


def set_debug_mode(debug_mode_flag, debug_hook_list=None):
    if not isinstance(debug_mode_flag, bool):
        raise OpTypeError("config.set_debug_mode", "'debug_mode_flag' to be a bool", type(debug_mode_flag).__name__)
    _settings["debug_mode"] = debug_mode_flag


def get_debug_mode():
    return _settings["debug_mode"]


__all__ = ["set_seed", "get_seed", "set_num_parallel_workers", "get_num_parallel_workers", "set_prefetch_size",
           "get_prefetch_size", "set_debug_mode", "get_debug_mode"]
