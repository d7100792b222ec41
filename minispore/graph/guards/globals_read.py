"""The guard on the globals a capture's interpreted code read (the ast mode's `CaptureResult.guards`).

The ast mode notes every global its interpreted code reads (capture/ast_mode/interpreter.py);
after the capture, `guard_token` renders each value as the guard keeps it and `globals_guard`
builds the guard. The compile cache (compile_cache/key.py) rebuilds the same guard, with the same
two functions, for an entry it loads in a later process. Both build on this module, below them,
so the cache never imports the capture mode.
"""
from __future__ import annotations

from .contents import _MISSING as MISSING, content_token, describe_token


def guard_token(v, written=False):
    """What the globals guard compares: scalars by value, plain containers (lists, dicts, tuples,
    sets) by their contents - an in-place `table[0] = 10.0` must recompile - and other objects by
    identity (contents.py: content_token). A container the code only appends to (`written`)
    by identity: `("written", id)`."""
    return ("written", id(v)) if written else content_token(v)


def globals_guard(reads):
    """The guard on the globals interpreted code read: `reads` is [(globals dict, name, guard_token)].
    (The compile cache recognises it by its function name, `globals_read_by_interpreted_code`.)"""

    def globals_read_by_interpreted_code(args, kwargs):
        for g, name, tok in reads:
            now = g.get(name, MISSING)
            new = ("written", id(now)) if tok[0] == "written" else content_token(now)
            if new != tok:
                return f"global '{name}' changed: {describe_token(tok)} -> {describe_token(new)}"
        return None
    return globals_read_by_interpreted_code


__all__ = ["MISSING", "guard_token", "globals_guard"]
