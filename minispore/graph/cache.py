"""Guards and the compiled-graph cache.

A compiled graph is only valid for the assumptions made while capturing it. Each assumption is a
*guard* (TorchDynamo's word); a call may reuse a cached graph only when all of them hold. The rule
of what a graph may depend on, in memory and on disk, is written once in guards/rule.py (with the
definitions every walker shares); these are its in-memory guards:

* **tensor inputs**: shape and dtype of every tensor leaf of the arguments (TENSOR_MATCH);
* **Python constants** among the arguments: their values (ints, floats, bools, strings, None,
  dtypes; tuples/lists/dicts compared item by item) - they were baked into the graph;
* **objects** among the arguments (a Cell as `self`, a config object): identity in the key;
* **object state** (`StateGuard`, guards/state.py): the plain scalar attributes of those objects, of the objects
  the function's closure/globals hold (one function deep: `grad_fn` -> `net`), and of every object
  in their dict attributes (a Cell's sub-cells), plus the identity of each sub-cell and Parameter:
  `net.set_train(False)`, a changed dropout rate or a replaced Parameter selects another graph.
  A `@lazy_inline` layer is guarded as one unit by the signature lazy_inline reads to share its
  subgraph (guards/layer_state.py): checking it is O(1) while no Cell changes (the Cell state epoch,
  common/state_epoch.py), so a change made through the Cell API is always seen, but a write that
  bypasses it (`cell.__dict__[k] = v`) inside a lazy layer is not;
* **globals and closure variables** the function's code names: a Tensor or other object by
  identity (a rebound global gets a new graph), a Python scalar/string/tuple by value;
* **plain containers** (`_ContainerGroup`, guards/contents.py): lists, tuples, dicts and sets in those globals and
  closure variables, and lists, tuples and sets held by the guarded objects (`self.coeffs = [v]`)
  or their dict attributes, by their *contents* - `net.coeffs[0] = 3.0` or `TABLE["k"] = 3.0`
  between calls recompiles. Taken after the capture (a capture's own `log.append(...)` runs once
  and does not invalidate the graph); a container the code only appends to (`write_only_names`)
  and one of more than MAX_GUARDED_ITEMS elements are guarded by identity only, as are NumPy
  arrays (reading a large array on every call would cost more than the graph saves: keep arrays
  that change in Tensors, which graphs read by reference);
* **captured tensors**: each still has the shape and dtype it had at capture;
* whatever a capture mode adds (`CaptureResult.guards`): every mode guards the environment
  variables its capture read (trace/environ_reads.py), the ast and bytecode modes the globals
  their interpreted code read.

The cache holds several entries per function (one per guard set; entries with the same key are
tried in turn, so a cell toggled between train and eval keeps both graphs). A miss recompiles and logs the
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

from ..backend.registry import current_backend
from ..common.dtype import DType
from ..common.tensor import Tensor
from .ir import Slot
from .guards.code_reads import code_names as _code_names, write_only_names
from .guards.contents import _MISSING, MAX_GUARDED_ITEMS, _is_container
from .guards.contents import content_token, describe_token  # noqa: F401 - (re-exported: the ast mode's guards)
from .guards.rule import SCALARS as _SCALARS
from .guards.state import StateGuard
from .guards.walk import _FUNCTIONS, _SKIP_IDENTITY, _is_stateful

logger = logging.getLogger("minispore.jit")
RECOMPILE_LIMIT = int(os.environ.get("MINISPORE_JIT_RECOMPILE_LIMIT", "8"))

def state_roots(template, globals_guard):
    """The objects whose state a trace may read: object arguments, then closure/global objects
    (and, one function deep, the objects *their* closures hold: `grad_fn` -> `net`)."""
    roots = []

    def from_template(t, path):
        if isinstance(t, (tuple, list)):
            for i, x in enumerate(t):
                from_template(x, f"{path}[{i}]")
        elif isinstance(t, dict):
            for k, x in t.items():
                from_template(x, f"{path}[{k!r}]")
        elif _is_stateful(t) and not isinstance(t, Slot):
            roots.append((path, t))

    args, kwargs = template
    for i, a in enumerate(args):
        from_template(a, "self" if i == 0 and hasattr(a, "construct") else f"args[{i}]")
    for k, v in kwargs.items():
        from_template(v, k)
    if globals_guard is not None:
        for label, v in globals_guard.objects():
            _closure_roots(label, v, roots, depth=3)
        roots += globals_guard.containers()
    return roots


def _closure_roots(label, v, roots, depth):
    """Add `v` if it is an object; if it is a function, the objects it reaches: at every layer of
    wrapping (a `value_and_grad` wrapper, then the function it wraps via `__wrapped__`, a
    partial's function, a bound method's `self`) its closure variables and the globals its code
    names. So a jitted step calling a global `grad_fn = value_and_grad(forward)` guards the `net`
    that `forward` reads, and `net.set_train(False)` selects another graph."""
    if _is_stateful(v) or _is_container(v):
        roots.append((label, v))
        return
    if depth <= 0 or not callable(v) or isinstance(v, _SKIP_IDENTITY):
        return
    for f in _wrapper_chain(v):
        if isinstance(f, types.MethodType):
            if _is_stateful(f.__self__):
                roots.append((f"{label}.__self__", f.__self__))
            continue
        code = getattr(f, "__code__", None)
        if code is None:
            continue
        writes = write_only_names(code)
        for name, cell in zip(code.co_freevars, getattr(f, "__closure__", None) or ()):
            try:
                v = cell.cell_contents
            except ValueError:
                continue
            if not (name in writes and _is_container(v)):
                _closure_roots(name, v, roots, depth - 1)
        if getattr(f, "__module__", None) and f.__module__.partition(".")[0] == "minispore":
            continue         # minispore's own wrappers: only their closure (the user's function) counts
        g = getattr(f, "__globals__", None) or {}
        for name in sorted(_code_names(code, set())):
            x = g.get(name, _MISSING)
            if x is not v and (_is_stateful(x) or isinstance(x, _FUNCTIONS)
                               or (_is_container(x) and name not in writes)):
                _closure_roots(name, x, roots, depth - 1)


def _wrapper_chain(fn):
    """fn, then each function it wraps (bound method, functools.partial, `__wrapped__`)."""
    chain, seen = [], set()
    while fn is not None and id(fn) not in seen:
        seen.add(id(fn))
        chain.append(fn)
        if isinstance(fn, types.MethodType):
            fn = fn.__func__
        elif hasattr(fn, "func") and hasattr(fn, "args") and hasattr(fn, "keywords"):   # functools.partial
            fn = fn.func
        else:
            fn = getattr(fn, "__wrapped__", None)
    return chain


# -- turning arguments into hashable guard tokens -------------------------------------------------------
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
    return ("id", id(x))            # objects: identity here, their state in StateGuard


def _readable(tok) -> str:
    """A guard token back in Python-like text, for recompile messages."""
    if tok is _NOT_GIVEN:
        return "<not given>"
    if isinstance(tok, tuple) and len(tok) == 2 and isinstance(tok[0], type):
        return repr(tok[1])
    if isinstance(tok, tuple) and tok:
        kind = tok[0]
        if kind == "tensor":
            return "a Tensor"
        if kind == "id":
            return f"object at {tok[1]:#x}"
        if kind == "dtype":
            return tok[1]
        if kind in ("tuple", "list") or (isinstance(kind, str) and len(tok) == 2 and isinstance(tok[1], tuple)):
            inner = ", ".join(_readable(x) for x in tok[1])
            return f"[{inner}]" if kind == "list" else f"({inner})"
        if kind == "dict":
            return "{" + ", ".join(f"{k!r}: {_readable(v)}" for k, v in tok[1]) + "}"
    return repr(tok)[:120]


_NOT_GIVEN = object()


def _diff_arguments(old, new):
    """First difference between the constant parts of two calls' (args, kwargs)."""
    (oa, ok), (na, nk) = old[1], new[1]
    oa, na = oa[1], na[1]
    if len(oa) != len(na):
        return f"number of positional arguments {len(oa)} -> {len(na)}"
    for i, (a, b) in enumerate(zip(oa, na)):
        if a != b:
            return f"argument {i} changed: {_readable(a)} -> {_readable(b)}"
    od, nd = dict(ok[1]), dict(nk[1])
    for k in sorted(set(od) | set(nd)):
        a, b = od.get(k, _NOT_GIVEN), nd.get(k, _NOT_GIVEN)
        if a != b:
            return f"keyword argument '{k}' changed: {_readable(a)} -> {_readable(b)}"
    return "arguments changed"


# -- globals and closures -------------------------------------------------------------------------
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
        self.write_only = write_only_names(code) if code is not None else frozenset()

    def _bound(self):
        """(name, value) of every global the code names and every closure cell that is filled."""
        for n in self.global_names:
            yield n, self.globals.get(n)
        for name, cell in self.closure:
            try:
                yield name, cell.cell_contents
            except ValueError:                   # a cell not assigned yet
                continue

    def objects(self):
        """(label, value) of the globals and closure variables that hold objects or functions."""
        return [(n, v) for n, v in self._bound() if _is_stateful(v) or isinstance(v, _FUNCTIONS)]

    def containers(self):
        """(label, value) of the globals and closure variables that hold plain containers (a list,
        a dict...): StateGuard compares their contents, the key only their identity."""
        writes = self.write_only
        return [(n, v) for n, v in self._bound() if _is_container(v) and n not in writes]

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
    guards = tuple(globals_guard.tokens()) if globals_guard else ()
    # executors bind each primitive's kernel of the backend current at compile time, so the backend
    # is a guard too: set_context(device_target=...) recompiles for the new device
    guards += (("context", "device_target", current_backend().name),)
    return (constant_token(template), avals, guards)


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
                return f"{x[0]} '{x[1]}' changed: {_readable(x[2])} -> {_readable(y[2])}"
        return "the set of globals changed"
    if t0 != t1:
        return _diff_arguments(t0, t1)
    return "guards changed"


class CacheEntry:
    """One compiled version of a function: its key, capture result and executor."""

    def __init__(self, key, result, executor, compile_seconds, state=None, phases=None):
        self.key = key
        # seconds per compile phase: "state guard", "capture", "verify", "passes + executor" (and
        # "cache lookup" / "cache load" / "cache store" with the compile cache on)
        self.phases = dict(phases or {})
        self.state = state
        self.result = result
        self.executor = executor
        self.compile_seconds = compile_seconds
        self.graph = result.graph
        # (the capture avals recorded what the tensors were when captured: verify() checked them)
        self.captures = [(t, v.aval.shape, v.aval.dtype) for g in result.graphs for v, t in g.captures]
        self.grad_splits: dict = {}          # autodiff.py caches forward/backward splits here
        self.hits = 0

    def check(self, args, kwargs):
        """None if the entry's extra guards hold, else the reason they do not."""
        for t, shape, dt in self.captures:
            if tuple(t.shape) != shape or t.dtype is not dt:
                name = getattr(t, "name", "tensor")
                return f"captured tensor '{name}' changed to {tuple(t.shape)} {t.dtype} (was {shape} {dt})"
        if self.state is not None:
            reason = self.state.failure()
            if reason:
                return reason
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
        """(entry or None, reason for a miss or None). Several entries may share a key (they
        differ in object state, e.g. a cell in train and in eval mode): the first that passes."""
        entries = self.entries.get(key)
        if not entries:
            if self.last_key is None:
                return None, None
            return None, explain_miss(self.last_key, key)
        reason = None
        for entry in entries:
            reason = entry.check(args, kwargs)
            if reason is None:
                entry.hits += 1
                return entry, None
        return None, reason

    def can_compile(self) -> bool:
        return self.compiles < RECOMPILE_LIMIT

    def note_compile(self, key, entry, reason):
        if self.compiles and reason:
            msg = f"recompiling '{self.name}' ({self.where}): {reason}"
            self.recompile_reasons.append(reason)
            logger.info(msg)
        self.compiles += 1
        self.entries.setdefault(key, []).insert(0, entry)
        self.last_key = key


__all__ = ["GraphCache", "CacheEntry", "GlobalsGuard", "StateGuard", "state_roots", "call_key", "explain_miss",
           "content_token", "describe_token", "write_only_names", "MAX_GUARDED_ITEMS",
           "RECOMPILE_LIMIT", "logger"]
