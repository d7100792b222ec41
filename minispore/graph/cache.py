"""Guards and the compiled-graph cache.

A compiled graph is only valid for the assumptions made while capturing it. Each assumption is a
*guard* (TorchDynamo's word); a call may reuse a cached graph only when all of them hold:

* **tensor inputs**: shape and dtype of every tensor leaf of the arguments (TENSOR_MATCH);
* **Python constants** among the arguments: their values (ints, floats, bools, strings, None,
  dtypes; tuples/lists/dicts compared item by item) - they were baked into the graph;
* **objects** among the arguments (a Cell as `self`, a config object): identity, plus the values of
  their plain scalar attributes and those of the objects held in their dict attributes (a Cell's
  sub-cells): `cell.set_train(False)` or a changed dropout rate recompiles;
* **globals and closure variables** the function's code names: a Tensor or other object by
  identity (a rebound global gets a new graph), a Python scalar/string/tuple by value;
* **captured tensors**: each still has the shape and dtype it had at capture;
* whatever a capture mode adds (`CaptureResult.guards`).

The cache holds several entries per function (one per guard set). A miss recompiles and logs the
reason on the `minispore.jit` logger (`logging.getLogger("minispore.jit")`, INFO), e.g.
"recompiling 'step' (test.py:10): argument tensor 0 shape (4, 8) -> (5, 8)". After
`RECOMPILE_LIMIT` compiles (8, as in TorchDynamo; env MINISPORE_JIT_RECOMPILE_LIMIT) the function
warns once and runs eagerly for guard sets it has not seen, instead of thrashing.
"""
from __future__ import annotations

import logging
import os
import types

import numpy as np

from ..common.dtype import DType
from ..common.tensor import Tensor
from .ir import Slot

logger = logging.getLogger("minispore.jit")
RECOMPILE_LIMIT = int(os.environ.get("MINISPORE_JIT_RECOMPILE_LIMIT", "8"))

_SCALARS = (bool, int, float, complex, str, bytes, type(None))
_SKIP_IDENTITY = (types.ModuleType, types.BuiltinFunctionType, type)
_FUNCTIONS = (types.FunctionType, types.MethodType, types.BuiltinFunctionType)


# -- turning arguments into hashable guard tokens -------------------------------------------------------
def object_state(obj, _seen=None):
    """Identity plus plain scalar attributes of `obj` and of objects in its dict attributes."""
    seen = _seen if _seen is not None else set()
    if id(obj) in seen:
        return ("seen", id(obj))
    seen.add(id(obj))
    d = getattr(obj, "__dict__", None)
    if d is None:
        return ("id", id(obj))
    items = []
    for k, v in d.items():
        if k.startswith("_jit"):
            continue
        tv = type(v)
        if tv in _SCALARS or isinstance(v, DType):
            items.append((k, v))
        elif isinstance(v, dict):
            # a Cell's children live in `_cells` (an OrderedDict): their state matters too
            for kk, vv in v.items():
                if type(vv) in _SCALARS:
                    items.append((k, kk, vv))
                elif hasattr(vv, "__dict__") and not isinstance(vv, (Tensor, _FUNCTIONS, _SKIP_IDENTITY)):
                    items.append((k, kk, object_state(vv, seen)))
    return ("obj", id(obj), tuple(items))


def constant_token(x):
    """A hashable stand-in for one non-tensor leaf of the arguments."""
    t = type(x)
    if t in _SCALARS:
        return (t, x)
    if isinstance(x, DType):
        return ("dtype", x.name)
    if isinstance(x, np.generic):
        return ("np", x.dtype.str, x.item())
    if t is Slot:
        return ("tensor", x.index)
    if t is tuple or t is list:
        return (t.__name__, tuple(constant_token(v) for v in x))
    if t is dict:
        return ("dict", tuple((k, constant_token(v)) for k, v in x.items()))
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        return (t.__name__, tuple(constant_token(v) for v in x))
    if t is slice:
        return ("slice", x.start, x.stop, x.step)
    if isinstance(x, _SKIP_IDENTITY) or callable(x) and not hasattr(x, "construct"):
        return ("id", id(x))
    return object_state(x)


def _describe_token(tok) -> str:
    if isinstance(tok, tuple) and len(tok) == 2 and isinstance(tok[0], type):
        return repr(tok[1])
    if isinstance(tok, tuple) and tok and tok[0] == "obj":
        return f"object state {tok[2]!r}"[:120]
    if isinstance(tok, tuple) and tok and tok[0] == "id":
        return f"object id {tok[1]:#x}"
    return repr(tok)[:120]


# -- globals and closures -------------------------------------------------------------------------
def _code_names(code, out):
    out.update(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            _code_names(c, out)
    return out


def _unwrap(fn):
    while True:
        if isinstance(fn, types.MethodType):
            fn = fn.__func__
        elif hasattr(fn, "func") and hasattr(fn, "args") and hasattr(fn, "keywords"):   # functools.partial
            fn = fn.func
        elif hasattr(fn, "__wrapped__"):
            fn = fn.__wrapped__
        else:
            return fn


class GlobalsGuard:
    """The globals and closure variables a function's code refers to, read at each call."""

    def __init__(self, fn):
        f = _unwrap(fn)
        code = getattr(f, "__code__", None)
        self.globals = getattr(f, "__globals__", {})
        names = sorted(_code_names(code, set())) if code is not None else []
        self.global_names = [n for n in names if n in self.globals
                             and not isinstance(self.globals[n], types.ModuleType)]
        cells = getattr(f, "__closure__", None) or ()
        free = code.co_freevars if code is not None else ()
        self.closure = list(zip(free, cells))

    def tokens(self):
        g = self.globals
        out = [("global", n, _value_token(g.get(n, _MISSING))) for n in self.global_names]
        for name, cell in self.closure:
            try:
                v = cell.cell_contents
            except ValueError:
                v = _MISSING
            out.append(("closure", name, _value_token(v)))
        return tuple(out)


_MISSING = object()


def _value_token(v):
    t = type(v)
    if t in _SCALARS:
        return (t, v)
    if isinstance(v, DType):
        return ("dtype", v.name)
    if t is tuple and all(type(x) in _SCALARS for x in v):
        return (tuple, v)
    return ("id", id(v))           # Tensors, functions, Cells, containers: identity


# -- keys, diffs and entries -------------------------------------------------------------------------
def call_key(template, leaves, globals_guard):
    avals = tuple((tuple(t.shape), t.dtype.name) for t in leaves)
    return (constant_token(template), avals, globals_guard.tokens() if globals_guard else ())


def _first_diff(old, new, path):
    if old == new:
        return None
    if isinstance(old, tuple) and isinstance(new, tuple) and len(old) == len(new) and old and new \
            and not (len(old) == 2 and isinstance(old[0], type)):
        for i, (a, b) in enumerate(zip(old, new)):
            d = _first_diff(a, b, path + [i])
            if d is not None:
                return d
    return path, old, new


def explain_miss(old_key, new_key) -> str:
    """A one-line reason why `new_key` did not match `old_key`."""
    (t0, a0, g0), (t1, a1, g1) = old_key, new_key
    if a0 != a1:
        if len(a0) != len(a1):
            return f"number of tensor arguments {len(a0)} -> {len(a1)}"
        for i, ((s0, d0), (s1, d1)) in enumerate(zip(a0, a1)):
            if s0 != s1:
                return f"argument tensor {i} shape {s0} -> {s1}"
            if d0 != d1:
                return f"argument tensor {i} dtype {d0} -> {d1}"
    if g0 != g1:
        for x, y in zip(g0, g1):
            if x != y:
                return f"{x[0]} '{x[1]}' changed: {_describe_token(x[2])} -> {_describe_token(y[2])}"
        return "the set of globals changed"
    d = _first_diff(t0, t1, [])
    if d is not None:
        _, a, b = d
        return f"Python argument changed: {_describe_token(a)} -> {_describe_token(b)}"
    return "guards changed"


class CacheEntry:
    """One compiled version of a function: its key, capture result and executor."""

    def __init__(self, key, result, executor, compile_seconds):
        self.key = key
        self.result = result
        self.executor = executor
        self.compile_seconds = compile_seconds
        self.graph = result.graph
        self.captures = [(t, tuple(t.shape), t.dtype) for g in result.graphs for _, t in g.captures]
        self.grad_splits: dict = {}          # autodiff.py caches forward/backward splits here
        self.hits = 0

    def check(self, args, kwargs):
        """None if the entry's extra guards hold, else the reason they do not."""
        for t, shape, dt in self.captures:
            if tuple(t.shape) != shape or t.dtype is not dt:
                name = getattr(t, "name", "tensor")
                return f"captured tensor '{name}' changed to {tuple(t.shape)} {t.dtype} (was {shape} {dt})"
        for g in self.result.guards:
            reason = g(args, kwargs)
            if reason:
                return reason
        return None


class GraphCache:
    """The compiled versions of one function (for one bound instance, for methods)."""

    def __init__(self, name, where=""):
        self.name = name
        self.where = where
        self.entries: dict = {}
        self.last_key = None
        self.compiles = 0
        self.exhausted_warned = False
        self.recompile_reasons: list[str] = []

    def lookup(self, key, args, kwargs):
        """(entry or None, reason for a miss or None)."""
        entry = self.entries.get(key)
        if entry is None:
            if self.last_key is None:
                return None, None
            return None, explain_miss(self.last_key, key)
        reason = entry.check(args, kwargs)
        if reason is not None:
            del self.entries[key]
            return None, reason
        entry.hits += 1
        return entry, None

    def can_compile(self) -> bool:
        return self.compiles < RECOMPILE_LIMIT

    def note_compile(self, key, entry, reason):
        if self.compiles and reason:
            msg = f"recompiling '{self.name}' ({self.where}): {reason}"
            self.recompile_reasons.append(reason)
            logger.info(msg)
        self.compiles += 1
        self.entries[key] = entry
        self.last_key = key


__all__ = ["GraphCache", "CacheEntry", "GlobalsGuard", "call_key", "explain_miss", "object_state",
           "RECOMPILE_LIMIT", "logger"]
