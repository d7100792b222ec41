"""Global context: execution mode, device target, seeded RNG.

`set_context(mode=PYNATIVE_MODE|GRAPH_MODE, device_target="CPU")`, `get_context(key)`, `set_seed(seed)`
follow MindSpore. The RNG (a NumPy Generator) lives here so it can be saved in checkpoints and so
that `set_seed` makes every random op (initializers, dropout, sampling) reproducible.
"""
from __future__ import annotations

import numpy as np

from .errors import OpValueError

GRAPH_MODE = 0
PYNATIVE_MODE = 1

_DEFAULTS = {
    "mode": PYNATIVE_MODE,
    "device_target": "CPU",
    "device_id": 0,
    "jit_level": "O0",
    "save_graphs": False,
    "deterministic": "OFF",
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


def rng() -> np.random.Generator:
    """The global generator. Every random op draws from it."""
    return _rng


def get_rng_state() -> dict:
    """JSON-serialisable RNG state, for checkpoints."""
    return _rng.bit_generator.state


def set_rng_state(state: dict):
    _rng.bit_generator.state = state
