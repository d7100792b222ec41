"""Global context: execution mode, device target, seeded RNG.

`set_context(mode=PYNATIVE_MODE|GRAPH_MODE, device_target="CPU")`, `get_context(key)`, `set_seed(seed)`
follow MindSpore. The RNG (a NumPy Generator) lives here so it can be saved in checkpoints and so
that `set_seed` makes every random op (initializers, dropout, sampling) reproducible.
"""
from __future__ import annotations

import os

import numpy as np

from .errors import OpTypeError, OpValueError

GRAPH_MODE = 0
PYNATIVE_MODE = 1

_DEFAULTS = {
    "mode": PYNATIVE_MODE,
    "device_target": "CPU",
    "device_id": 0,
    "jit_level": "O0",
    "save_graphs": False,
    "deterministic": "OFF",
    # "O0": buffers freed after their last use (performance first); "O1": SOMAS,
    # every intermediate of a compiled graph at a planned offset in one arena (memory first)
    "memory_optimize_level": "O0",
    # compiled graphs stored on disk and reused by later processes
    # (graph/compile_cache/); env MS_COMPILER_CACHE_ENABLE=1 / MS_COMPILER_CACHE_PATH, lower priority
    "enable_compile_cache": False,
    "compile_cache_path": "",
}
_context = dict(_DEFAULTS)
_listeners = []   # callables(key, value) run after a key changes (e.g. the backend registry)


def set_context(**kwargs):
    """Set context keys. Unknown keys and bad values raise a clear error."""
    for key, value in kwargs.items():
        if key not in _context:
            raise OpValueError("set_context", f"one of {sorted(_context)}", f"unknown key '{key}'")
        if key == "mode" and value not in (GRAPH_MODE, PYNATIVE_MODE):
            raise OpValueError("set_context", "mode GRAPH_MODE (0) or PYNATIVE_MODE (1)", repr(value))
        if key == "device_target" and not isinstance(value, str):
            raise OpValueError("set_context", "device_target as a string such as 'CPU'", repr(value))
        if key == "memory_optimize_level" and value not in ("O0", "O1"):
            raise OpValueError("set_context", "memory_optimize_level 'O0' or 'O1'", repr(value))
        if key == "enable_compile_cache" and not isinstance(value, bool):
            raise OpValueError("set_context", "enable_compile_cache as a bool", repr(value))
        if key == "compile_cache_path" and not isinstance(value, (str, os.PathLike)):
            raise OpValueError("set_context", "compile_cache_path as a path string", repr(value))
    old = dict(_context)
    _context.update(kwargs)
    try:
        for key, value in kwargs.items():
            for fn in _listeners:
                fn(key, value)
    except Exception:
        _context.clear()
        _context.update(old)
        raise


def get_context(key: str):
    if key not in _context:
        raise OpValueError("get_context", f"one of {sorted(_context)}", f"unknown key '{key}'")
    return _context[key]


def set_device(device_target, device_id=None):
    """MindSpore 2.6+'s spelling of `set_context(device_target=..., device_id=...)`."""
    if not isinstance(device_target, str):
        raise OpTypeError("set_device", "device_target as a string such as 'CPU'", repr(device_target))
    if device_id is not None and (not isinstance(device_id, int) or isinstance(device_id, bool) or device_id < 0):
        raise OpValueError("set_device", "device_id as a non-negative int", repr(device_id))
    set_context(device_target=device_target, **({} if device_id is None else {"device_id": device_id}))


def set_deterministic(deterministic):
    """MindSpore 2.6+'s `set_deterministic(bool)` (the context key `deterministic`: 'ON'/'OFF').
    minispore's CPU kernels are deterministic either way; the setting is kept for scripts that read it."""
    if not isinstance(deterministic, bool):
        raise OpTypeError("set_deterministic", "a bool", repr(deterministic))
    set_context(deterministic="ON" if deterministic else "OFF")


def on_context_change(fn):
    _listeners.append(fn)
    return fn


# ---------------------------------------------------------------------------------------------
# Random numbers
_seed = None
_rng = np.random.default_rng()


def set_seed(seed: int):
    """Seed every random op in minispore (MindSpore's `set_seed`)."""
    global _seed, _rng
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0:
        raise OpValueError("set_seed", "a non-negative int", repr(seed))
    _seed = int(seed)
    _rng = np.random.default_rng(_seed)


def get_seed():
    return _seed


_manual_seed = None


def manual_seed(seed: int):
    """Seed the random generator (MindSpore 2.6+'s `manual_seed`; unlike `set_seed` it leaves
    `get_seed()` as it was, as MindSpore does)."""
    global _rng, _manual_seed
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0:
        raise OpValueError("manual_seed", "a non-negative int", repr(seed))
    _manual_seed = int(seed)
    _rng = np.random.default_rng(_manual_seed)


def initial_seed():
    """The seed given to `manual_seed` (or `set_seed`), None if neither was called."""
    return _manual_seed if _manual_seed is not None else _seed


def seed():
    """Seed the generator from fresh entropy and return that seed (MindSpore's `seed()`)."""
    new = int(np.random.SeedSequence().entropy % (2 ** 63))
    manual_seed(new)
    return new


def rng() -> np.random.Generator:
    """The global generator. Every random op draws from it."""
    return _rng


def get_rng_state() -> dict:
    """JSON-serialisable RNG state, for checkpoints."""
    return _rng.bit_generator.state


def set_rng_state(state: dict):
    _rng.bit_generator.state = state
