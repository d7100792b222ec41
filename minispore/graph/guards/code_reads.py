"""Which globals and closure variables a function's code reads, and which it only writes to.

Both the in-memory guards (graph/cache.py: the globals guard, the container guard) and the disk
key (guards/stable.py: the globals a function's description includes) ask these questions of the
same code objects, so they are answered once, here.
"""
from __future__ import annotations

import types


def code_names(code, out):
    """Add to the set `out` every name `code` and its nested functions' code refer to (globals,
    attributes); returns `out`."""
    out.update(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            code_names(c, out)
    return out


# methods that change a container and give back nothing of what it holds (they return None)
_MUTATORS = frozenset(("append", "extend", "insert", "add", "update", "clear", "discard",
                       "appendleft", "extendleft"))
_LOADS = frozenset(("LOAD_GLOBAL", "LOAD_DEREF", "LOAD_NAME", "LOAD_CLASSDEREF"))
_write_only: dict = {}         # code object -> frozenset of names


def write_only_names(code) -> frozenset:
    """The global and closure names `code` (nested functions included) only ever uses as
    `name.append(...)`, `name.update(...)` and the like: a log the function writes to. What such a
    container holds cannot have shaped the graph, so it is guarded by identity only - appending to
    it from eager code must not invalidate compiled graphs."""
    hit = _write_only.get(code)
    if hit is None:
        import dis
        uses: dict = {}
        stack = [code]
        while stack:
            c = stack.pop()
            stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
            ins = [i for i in dis.get_instructions(c) if i.opname not in ("CACHE", "EXTENDED_ARG")]
            for j, i in enumerate(ins):
                if i.opname in _LOADS:
                    nxt = ins[j + 1] if j + 1 < len(ins) else None
                    ok = nxt is not None and nxt.opname in ("LOAD_METHOD", "LOAD_ATTR") and nxt.argval in _MUTATORS
                    uses[i.argval] = uses.get(i.argval, True) and ok
        hit = _write_only[code] = frozenset(n for n, ok in uses.items() if ok)
    return hit


__all__ = ["code_names", "write_only_names"]
