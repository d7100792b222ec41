"""The compile cache's key and the guards stored in an entry (the rule: guards/rule.py).

`call_token` is everything about one compile request that can be read before capturing - the
format and versions, the jit settings, and the function and arguments rendered by
guards/stable.py; `key_of` hashes it. What is only known once the capture ran (the environment
variables it read, the globals the ast mode's interpreted code read) is a *stored guard*:
`encode_guard` writes it into the entry, `decode_guards` checks it when the entry is loaded
(raising `Stale` when it no longer holds) and gives it back as a live in-memory guard.
"""
from __future__ import annotations

import hashlib
import json
import sys
import types

import numpy as np

from ..guards.code_reads import write_only_names
from ..guards.stable import _CONTAINERS, Uncacheable, _described_globals, _walking, stable_token

FORMAT = "minispore-graph-cache/2"


def call_token(jf, fn, args, kwargs):
    """The stable description of one compile request (hashed into the key); raises Uncacheable."""
    with _walking():
        return [FORMAT, _versions(), [jf.capture_mode, jf.jit_level, jf.fullgraph, stable_token(jf.options)],
                stable_token(fn), stable_token(list(args)), stable_token(dict(kwargs))]


def _versions():
    from ...common.version import __version__
    return [__version__, list(sys.version_info[:3]), np.__version__]


def key_of(token) -> str:
    # tokens are lists of str/int/float/bool/None (dict items already sorted): repr is deterministic
    return hashlib.sha256(repr(token).encode()).hexdigest()


# -- guards a capture mode adds: checked when an entry is loaded, and kept as the entry's guards ---------
class Stale(Exception):
    """The entry was valid when written but no longer matches this program (a global changed)."""


_MISSING_TOKEN = ["missing"]


def _keyed_globals(fn):
    """(id of globals dict, name) of the globals the key itself describes (those of `fn`'s code
    that _globals_token includes): their guard needs no separate check."""
    f = getattr(fn, "__func__", fn)
    values, _names, g = _described_globals(f)
    writes = write_only_names(f.__code__) if values else ()
    return {(id(g), n) for n, v in values if not isinstance(v, (types.ModuleType, type))
            and not (n in writes and isinstance(v, _CONTAINERS))}      # (a log: only its type is keyed)


def encode_guard(guard, fn):
    """One of `CaptureResult.guards` as JSON: the environment variables a capture read
    (`{"environ": [[name, value or null], ...], "names": ...}`), or the globals the ast mode's
    interpreted code read (`{"globals": [[module, name, token or "key"], ...]}`). Any other guard
    is a Python function the cache cannot describe: the graph is uncacheable."""
    import inspect
    from ..trace.environ_reads import EnvironGuard
    if isinstance(guard, EnvironGuard):
        return {"environ": [list(r) for r in guard.reads],
                "names": None if guard.names is None else list(guard.names)}
    if getattr(guard, "__name__", "") != "globals_read_by_interpreted_code":
        raise Uncacheable(f"a capture guard {getattr(guard, '__qualname__', guard)!r} the cache cannot describe")
    reads = inspect.getclosurevars(guard).nonlocals.get("reads")
    keyed = _keyed_globals(fn)
    out = []
    for g, name, tok in reads or ():
        module = g.get("__name__")
        if not isinstance(module, str) or getattr(sys.modules.get(module), "__dict__", None) is not g:
            raise Uncacheable(f"a global '{name}' of a namespace that is not an imported module")
        if (id(g), name) in keyed:
            out.append([module, name, "key"])          # already part of the key
        elif tok[0] == "written":
            out.append([module, name, "written"])      # a log the code only appends to
        else:
            try:
                out.append([module, name, _plain_token(g[name]) if name in g else _MISSING_TOKEN])
            except Uncacheable as e:
                raise Uncacheable(f"global '{module}.{name}' read by the graph's code: {e}") from None
    return {"globals": out}


def _plain_token(x):
    """stable_token(x) as JSON gives it back (tuples become lists), for comparing with a stored one."""
    with _walking():
        return json.loads(json.dumps(stable_token(x)))


def decode_guards(encoded):
    """The live guards of a stored entry; raises Stale when one no longer holds in this process."""
    from ..guards.globals_read import MISSING, globals_guard, guard_token
    from ..trace.environ_reads import EnvironGuard
    guards = []
    for enc in encoded:
        if "environ" in enc:
            reads = []
            for name, value in enc["environ"]:
                if not isinstance(name, str) or not (value is None or isinstance(value, str)):
                    raise ValueError(f"a malformed environment guard entry {name!r}: {value!r}")
                reads.append((name, value))
            names = enc.get("names")
            guard = EnvironGuard(reads, None if names is None else [str(n) for n in names])
            reason = guard.failure()
            if reason is not None:
                raise Stale(reason)
            guards.append(guard)
            continue
        live = []
        for module, name, tok in enc["globals"]:
            g = sys.modules[module].__dict__
            now = tok if tok in ("key", "written") else _plain_token(g[name]) if name in g else _MISSING_TOKEN
            if now != tok:
                raise Stale(f"global '{module}.{name}' changed")
            live.append((g, name, guard_token(g.get(name, MISSING), tok == "written")))
        guards.append(globals_guard(live))
    return guards


__all__ = ["FORMAT", "call_token", "key_of", "encode_guard", "decode_guards", "Stale"]
