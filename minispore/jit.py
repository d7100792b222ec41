"""`minispore.jit`, `JitConfig` and graph mode for Cells: the front door to graph execution.

    @ms.jit                                   # capture_mode="ast", jit_level="O0"
    def step(x, y): ...

    @ms.jit(capture_mode="trace", jit_level="O0", fullgraph=False)
    def f(x): ...

    class Net(nn.Cell):
        @ms.jit
        def construct(self, x): ...           # per-instance graph cache

    ms.set_context(mode=ms.GRAPH_MODE)        # every Cell call compiles `construct`
    net.set_jit_config(ms.JitConfig(jit_level="O0", capture_mode="trace"))

What happens on a call (MindSpore 2.3+ semantics; ARCHITECTURE.md §6 follows it file by file):

1. While another function is being captured, a jitted function is simply inlined into it.
2. The call's guards (graph/cache.py: tensor shapes/dtypes, Python constants, globals...) select a
   cached compiled graph; on a miss the function is captured by its capture mode
   (graph/capture), verified (graph/verify.py), dumped if `MS_DEV_SAVE_GRAPHS=1` or
   `MINISPORE_DUMP_IR=1`, and given an executor for its `jit_level`. Misses after the first are
   logged with their reason on `logging.getLogger("minispore.jit")`.
3. The graph runs. If an enclosing PyNative gradient is recording (`value_and_grad(jitted)`), it
   runs as one tape node whose backward is itself a graph (graph/autodiff.py).

Extension points (one call each):

* `register_capture_mode(name, fn)` - `fn(CaptureRequest) -> CaptureResult` (graph/capture).
  graph/capture/registry.py registers the three built-in modes, "trace", "ast" and "bytecode";
  re-registering a name replaces its function (ARCHITECTURE.md §7).
* `register_jit_level(name, factory)` - `factory(graph) -> executor` with `.run(*arrays)`. The
  built-in levels, all in one table (graph/run/levels.py, with `make_executor`), are graph/run's
  O0Executor (kernel by kernel), O1Executor (after operator fusion) and O2Executor (one generated
  function); on O0 a device backend may run the graph itself (`Backend.graph_executor`).

What jit.py itself holds: the decorator (JitFunction, and its bound form), the compile step,
JitConfig, and the GRAPH_MODE hook for Cells (`cell_call`). The Cell-call protocol a capture uses
(`run_cell_python`, `cell_body`, `HostCellCall`) and the jitted-callable mark (`__minispore_jit__`,
`capture_target()`) live in graph/trace/cells.py, so graph/ never imports this module.

Graph-mode semantics that differ from PyNative (each is a test in tests/graph/test_semantics.py):
Python side effects (print, list.append, global writes) run once, at capture; Python constants
(arguments, globals, Cell attributes) are baked in and guarded; `x[i] = v` on a traced tensor
rebinds `x` (other views of the old value are not updated); random ops draw fresh numbers on every
run; optimizers (which update NumPy arrays in place) run as host calls in program order;
`MS_JIT=0` runs everything eagerly.
"""
from __future__ import annotations

import functools
import os
import sys
import time
import weakref

from .common import context, grad_state
from .common.errors import OpTypeError, OpValueError
from .common.tensor import _wrap
from .graph import autodiff, pytree
from .graph.cache import CacheEntry, GlobalsGuard, GraphCache, StateGuard, call_key, state_roots
from .graph.capture import (CaptureRequest, CaptureResult, GraphBreak, add_capture_listener, current_capture,
                            get_capture_mode, is_capturing, register_capture_mode, registered_capture_modes,
                            warn_user)
from .graph.trace import session as _trace
from .graph.capture.bytecode import GraphBreakError                 # what fullgraph=True raises at a break
from .graph.trace.cells import HostCellCall, cell_body, run_cell_python
from .graph.run.levels import make_executor, register_jit_level      # the one table of jit levels
from .graph.ir import OPAQUE, Value
from .graph.printer import dump_enabled, format_graph
from .graph.verify import verify
from .graph import compile_cache as _ccache                       # graphs stored on disk across processes
from .graph.guards.layer_state import forget as _forget_layer_states
from .graph import lazy_inline as _lazy
from .graph.lazy_inline import finish_capture as _lazy_finish     # applies @lazy_inline(policy="front")
from .graph.parallel import partition as _semi_auto                # semi_auto_parallel's compiler pass
from .graph.parallel import strategies as _strategies

CAPTURE_MODES = ("ast", "bytecode", "trace")
JIT_LEVELS = ("O0", "O1", "O2")
_KNOWN_OPTIONS = {"exec_order": ("bfs", "dfs"), "infer_boost": ("on", "off"),
                  "disable_format_transform": (True, False), "auto_offload": ("weight", "activation", "all"),
                  "recompile_limit": None}

_warned: set = set()


def _warn_once(key, msg):
    if key not in _warned:
        _warned.add(key)
        warn_user(msg)


def _jit_disabled() -> bool:
    return os.environ.get("MS_JIT", "1") == "0"


# -- the decorator ------------------------------------------------------------------------------------
def _check_args(capture_mode, jit_level, dynamic, fullgraph, backend, options):
    if capture_mode not in CAPTURE_MODES:
        raise OpValueError("jit", f"capture_mode in {list(CAPTURE_MODES)}", repr(capture_mode))
    if jit_level not in JIT_LEVELS:
        raise OpValueError("jit", f"jit_level in {list(JIT_LEVELS)}", repr(jit_level))
    if dynamic not in (0, 1) or isinstance(dynamic, bool):
        raise OpValueError("jit", "dynamic=0 (static shapes) or 1", repr(dynamic))
    if not isinstance(fullgraph, bool):
        raise OpTypeError("jit", "fullgraph as a bool", type(fullgraph).__name__)
    if backend not in ("", "ms_backend", "GE"):
        raise OpValueError("jit", "backend '' / 'ms_backend' (or the deprecated 'GE')", repr(backend))
    for k, v in options.items():
        if k not in _KNOWN_OPTIONS:
            raise OpValueError("jit", f"options among {sorted(_KNOWN_OPTIONS)}", repr(k))
        allowed = _KNOWN_OPTIONS[k]
        if allowed is not None and v not in allowed:
            raise OpValueError("jit", f"{k} in {list(allowed)}", repr(v))
    if dynamic == 1:
        _warn_once("dynamic", "jit: dynamic=1 is accepted but shapes are still specialised: each new input "
                              "shape compiles a new graph (guarded by the cache)")
    if backend == "GE":
        _warn_once("GE", "jit: backend='GE' is deprecated in MindSpore and runs as 'ms_backend' here")


def jit(function=None, *, capture_mode="ast", jit_level="O0", dynamic=0, fullgraph=False, backend="",
        **options):
    """Compile `function` into a graph on first call (MindSpore 2.3+ `jit`; see module docstring).

    `capture_mode`: "ast" | "bytecode" | "trace". `jit_level`: "O0" | "O1" | "O2".
    `fullgraph=True`: everything must compile (MindSpore's STRICT syntax level); host calls and
    graph breaks become errors. `dynamic`: 0 or 1 (shapes are specialised either way).
    `backend`: "" or "ms_backend". Options: exec_order, infer_boost, disable_format_transform,
    auto_offload (accepted; no effect on CPU), recompile_limit.
    """
    _check_args(capture_mode, jit_level, dynamic, fullgraph, backend, options)
    if function is None:
        return lambda fn: jit(fn, capture_mode=capture_mode, jit_level=jit_level, dynamic=dynamic,
                              fullgraph=fullgraph, backend=backend, **options)
    if isinstance(function, JitFunction):
        function = function.fn
    if not callable(function):
        raise OpTypeError("jit", "a function or method to compile", type(function).__name__)
    if hasattr(function, "construct") and hasattr(function, "cells_and_names"):
        # a Cell instance: compile its call, with the cell as a guarded argument (its state counts)
        return _BoundJit(_cell_jit_function(function, capture_mode, jit_level, fullgraph, dynamic, backend,
                                            options), function)
    return JitFunction(function, capture_mode, jit_level, dynamic, fullgraph, backend, options)


class JitFunction:
    """A function compiled on call. Use as a function or as a method (per-instance cache)."""

    def __init__(self, fn, capture_mode="ast", jit_level="O0", dynamic=0, fullgraph=False, backend="",
                 options=None, name=None):
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.capture_mode = capture_mode
        self.jit_level = jit_level
        self.dynamic = dynamic
        self.fullgraph = fullgraph
        self.backend = backend
        self.options = dict(options or {})
        self.name = name or getattr(fn, "__qualname__", getattr(fn, "__name__", type(fn).__name__))
        code = getattr(getattr(fn, "__func__", fn), "__code__", None)
        self.where = f"{code.co_filename}:{code.co_firstlineno}" if code is not None else "?"
        self._globals = GlobalsGuard(fn)
        self._cache = None
        self._instance_caches = weakref.WeakKeyDictionary()
        self._id_caches: dict = {}

    # `__minispore_jit__` marks a jitted callable (graph/trace/cells.py): graph.dump/explain reuse
    # its settings, and a capture that calls it inlines `capture_target()` instead
    @property
    def __minispore_jit__(self):
        return self

    def capture_target(self):
        """`(function, leading_args)`: what a capture inlines when it calls this jitted function."""
        return self.fn, ()

    def cache(self, instance=None) -> GraphCache:
        """The graph cache (for a method: of one bound instance)."""
        if instance is None:
            if self._cache is None:
                self._cache = GraphCache(self.name, self.where)
            return self._cache
        try:
            c = self._instance_caches.get(instance)
            if c is None:
                c = self._instance_caches[instance] = GraphCache(self.name, self.where)
        except TypeError:             # not weak-referenceable: keyed by id (lives as long as the function)
            c = self._id_caches.setdefault(id(instance), GraphCache(self.name, self.where))
        return c

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return _BoundJit(self, obj)

    def __call__(self, *args, **kwargs):
        return _call(self, self.fn, self.cache(), args, kwargs)

    def compile(self, *args, **kwargs) -> CacheEntry:
        """Compile (or find in the cache) the graph for these arguments without running it."""
        return _lookup_or_compile(self, self.fn, self.cache(), args, kwargs)[0]

    def __repr__(self):
        return f"<jit {self.name} capture_mode={self.capture_mode} jit_level={self.jit_level}>"


class _BoundJit:
    """A jitted method bound to an instance: `self` is argument 0 (guarded by identity and state)."""

    __slots__ = ("jf", "obj")

    def __init__(self, jf, obj):
        self.jf, self.obj = jf, obj

    def __call__(self, *args, **kwargs):
        return _call(self.jf, self.jf.fn, self.jf.cache(self.obj), (self.obj,) + args, kwargs)

    def compile(self, *args, **kwargs):
        return _lookup_or_compile(self.jf, self.jf.fn, self.jf.cache(self.obj), (self.obj,) + args, kwargs)[0]

    @property
    def __minispore_jit__(self):
        return self

    def capture_target(self):
        return self.jf.fn, (self.obj,)

    @property
    def name(self):
        return self.jf.name


def _lookup_or_compile(jf, fn, cache, args, kwargs):
    leaves, template = pytree.flatten_call(args, kwargs)
    key = call_key(template, leaves, jf._globals)
    entry, reason = cache.lookup(key, args, kwargs)
    if entry is None:
        limit = jf.options.get("recompile_limit")
        if not cache.can_compile() if limit is None else cache.compiles >= limit:
            if not cache.exhausted_warned:
                cache.exhausted_warned = True
                warn_user(f"jit: '{jf.name}' ({jf.where}) was recompiled {cache.compiles} times (last reason: "
                          f"{reason}); running it eagerly for new guard values from now on")
            return None, leaves
        entry = _compile(jf, fn, cache, key, args, kwargs, reason)
    return entry, leaves


def _call(jf, fn, cache, args, kwargs):
    if _jit_disabled() or is_capturing():
        return fn(*args, **kwargs)            # MS_JIT=0, or inlined into the graph being captured
    entry, leaves = _lookup_or_compile(jf, fn, cache, args, kwargs)
    if entry is None:
        return fn(*args, **kwargs)
    result = entry.result
    if result.runner is not None:
        return result.runner(args, kwargs)
    if grad_state.depth:
        if "semi_auto_plan" in entry.graph.notes:
            raise OpValueError(jf.name, "under semi_auto_parallel, the gradient taken inside the compiled graph "
                               "(jit the whole training step, or TrainOneStepCell in GRAPH_MODE)",
                               "a partitioned graph differentiated from PyNative (value_and_grad of a jitted "
                               "function)")
        flat = autodiff.run_with_tape(entry, leaves)
        if flat is None:                     # higher-order gradient or control flow: run eagerly
            return fn(*args, **kwargs)
    else:
        flat = _wrap_flat(entry.graph, entry.executor.run(*[t._data for t in leaves]))
    return pytree.fill(result.out_template, flat)


def _wrap_flat(graph, outs):
    return [_wrap(r) if isinstance(o, Value) and o.aval is not OPAQUE else r for o, r in zip(graph.outputs, outs)]


def _compile(jf, fn, cache, key, args, kwargs, reason):
    clock = time.perf_counter
    t0 = clock()
    # the object state the capture will read, snapshotted BEFORE it runs (a trace may itself change
    # state, e.g. a cache position: that side effect happens only now, so the next call must not
    # match a snapshot taken after it)
    _, template = pytree.flatten_call(args, kwargs)
    state = StateGuard(state_roots(template, jf._globals), _lazy.is_lazy)
    phases = {"state guard": clock() - t0}      # where compile time goes (CacheEntry.phases)
    capture, mode = get_capture_mode(jf.capture_mode)
    req = CaptureRequest(fn, tuple(args), dict(kwargs), jf.name, jf.fullgraph, jf.jit_level, jf.options)
    # compile cache (set_context(enable_compile_cache=True)): a graph an earlier process stored on
    # disk skips capture and verification
    t = clock()
    cached, ckey = _ccache.load(jf, fn, args, kwargs) if _ccache.enabled() else (None, None)
    if cached is not None:
        result = cached                    # checked by the cache (checksums, versions, sources, paths)
        phases["cache load"] = clock() - t
    else:
        if ckey is not None:
            phases["cache lookup"] = clock() - t
        t = clock()
        with _semi_auto.global_shapes_during_capture():    # (sliced Parameters show their global shape)
            result = capture(req)
        if not isinstance(result, CaptureResult):
            raise TypeError(f"capture mode '{mode}' returned {type(result).__name__}, not a CaptureResult")
        result = _lazy_finish(result)       # lazy_inline policy="front": inline the shared layer CALLs now
        state.note_capture_writes()         # scalars the capture created on objects are guarded too
        t1 = clock()
        with _semi_auto.global_shapes_during_capture():
            for g in result.graphs:
                verify(g)
        t2 = clock()
        phases["capture"], phases["verify"] = t1 - t, t2 - t1
        _ccache.count_capture()
        if ckey is not None:
            _ccache.store(jf, fn, args, kwargs, result, ckey)
            phases["cache store"] = clock() - t2
    _forget_layer_states()                  # (the guard's walk remembered them for the capture only)
    executor = None
    t = clock()
    # semi_auto_parallel on several ranks: this rank's graph (graph/parallel/partition.py); the
    # Parameters it captures become this rank's shards
    result = _semi_auto.partition_capture(result)
    if result.graph is not None and result.runner is None:
        executor = make_executor(result.graph, jf.jit_level)
    phases["passes + executor"] = clock() - t
    entry = CacheEntry(key, result, executor, clock() - t0, state, phases)
    cache.note_compile(key, entry, reason)
    if dump_enabled():
        for g in result.graphs:
            print(f"# minispore IR: '{jf.name}' ({jf.where}), capture_mode={mode}, jit_level={jf.jit_level}\n"
                  f"{format_graph(g)}", file=sys.stderr)
    return entry


# -- JitConfig and graph mode for Cells ----------------------------------------------------------------
class JitConfig:
    """`JitConfig(jit_level="O1", exc_mode="auto", jit_syntax_level="", debug_level="RELEASE",
    infer_boost="off", **kwargs)` (MindSpore 2.3; 2.10 changed the jit_level default to "").

    Attach with `Cell.set_jit_config(cfg)`; GRAPH_MODE then compiles that cell with these settings.
    `jit_syntax_level="STRICT"` means fullgraph=True. Extra kwargs: `capture_mode` ("ast" default).
    """

    def __init__(self, jit_level="O1", exc_mode="auto", jit_syntax_level="", debug_level="RELEASE",
                 infer_boost="off", **kwargs):
        if jit_level not in ("",) + JIT_LEVELS:
            raise OpValueError("JitConfig", f"jit_level in {['', *JIT_LEVELS]}", repr(jit_level))
        if exc_mode not in ("auto", "sink", "no_sink"):
            raise OpValueError("JitConfig", "exc_mode in ['auto', 'sink', 'no_sink']", repr(exc_mode))
        if jit_syntax_level not in ("", "STRICT", "LAX"):
            raise OpValueError("JitConfig", "jit_syntax_level in ['', 'STRICT', 'LAX']", repr(jit_syntax_level))
        if debug_level not in ("RELEASE", "DEBUG"):
            raise OpValueError("JitConfig", "debug_level in ['RELEASE', 'DEBUG']", repr(debug_level))
        if infer_boost not in ("on", "off"):
            raise OpValueError("JitConfig", "infer_boost in ['on', 'off']", repr(infer_boost))
        capture_mode = kwargs.pop("capture_mode", "ast")
        if capture_mode not in CAPTURE_MODES:
            raise OpValueError("JitConfig", f"capture_mode in {list(CAPTURE_MODES)}", repr(capture_mode))
        self.jit_level = jit_level
        self.exc_mode = exc_mode
        self.jit_syntax_level = jit_syntax_level
        self.debug_level = debug_level
        self.infer_boost = infer_boost
        self.capture_mode = capture_mode
        self.jit_config_dict = {"jit_level": jit_level, "exc_mode": exc_mode, "jit_syntax_level": jit_syntax_level,
                                "debug_level": debug_level, "infer_boost": infer_boost,
                                "capture_mode": capture_mode, **kwargs}

    def jit_options(self) -> dict:
        """The `jit(...)` keyword arguments this config stands for."""
        return {"capture_mode": self.capture_mode, "jit_level": self.jit_level or "O0",
                "fullgraph": self.jit_syntax_level == "STRICT"}

    def __repr__(self):
        return f"JitConfig({self.jit_config_dict})"


class _CellHookState:
    """Read by `Cell.__call__` on every call: one attribute, True in GRAPH_MODE or during a capture."""
    enabled = False


CELL_HOOK = _CellHookState()


def _refresh_hook():
    CELL_HOOK.enabled = context.get_context("mode") == context.GRAPH_MODE or is_capturing()


@context.on_context_change
def _on_mode_change(key, value):
    if key == "mode":
        _refresh_hook()


def cell_call(cell, args, kwargs, host=False):
    """What `Cell.__call__` does when CELL_HOOK.enabled (see nn/cell.py).

    * inside a capture: run the cell's Python (it is inlined into the graph), or - for cells that
      must run on the host, such as optimizers - record a host call;
    * in GRAPH_MODE: compile the cell's call into a graph (per cell instance, with the cell's
      JitConfig; capture_mode "ast" by default) and run it.
    """
    session = current_capture()
    if session is not None:
        if "_shard_strategy" in cell.__dict__ and not host:     # Cell.shard: a strategy region
            return _strategies.sharded_cell_call(cell, args, kwargs, lambda: cell_call(cell, args, kwargs, host))
        if host:
            return session.host_call(HostCellCall(cell), args, kwargs, type(cell).__name__)
        if hasattr(type(cell), "bprop"):
            # a user-defined backward rule: graph autodiff from outside must not differentiate its ops
            notes = getattr(session, "notes", None)
            if notes is not None:
                notes.setdefault("custom_bprop", []).append(type(cell).__name__)
        if "_lazy_inline" in cell.__dict__:             # @lazy_inline: every instance calls one shared subgraph
            if _lazy.is_lazy(cell):
                out = _lazy.call_cell(session, cell, args, kwargs)
                if out is not NotImplemented:
                    return out
        run_cell = getattr(session, "run_cell", None)   # the ast mode interprets construct itself (no Python run)
        if run_cell is not None:
            return run_cell(cell, args, kwargs)
        return run_cell_python(cell, args, kwargs)
    if host or _jit_disabled() or context.get_context("mode") != context.GRAPH_MODE or hasattr(type(cell), "bprop"):
        # (a cell with its own bprop runs as Python, so PyNative's tape uses that rule; its
        # sub-cells are still compiled)
        return run_cell_python(cell, args, kwargs)
    cfg = cell.__dict__.get("_jit_config")
    opts = cfg.jit_options() if cfg is not None else {"capture_mode": "ast", "jit_level": "O0", "fullgraph": False}
    jf, jf_opts = _CELL_GRAPHS.get(cell, (None, None))
    if jf is None or jf_opts != opts:
        jf = _cell_jit_function(cell, opts["capture_mode"], opts["jit_level"], opts["fullgraph"])
        _CELL_GRAPHS[cell] = (jf, opts)
    return jf(cell, *args, **kwargs)


# GRAPH_MODE's compiled function per cell, kept outside the cell (so copying or pickling a cell
# never copies graphs that capture the original's parameters)
_CELL_GRAPHS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def cell_graph_function(cell):
    """The JitFunction GRAPH_MODE compiled for `cell` (None before its first call in GRAPH_MODE)."""
    return _CELL_GRAPHS.get(cell, (None, None))[0]


def _cell_jit_function(cell, capture_mode, jit_level, fullgraph, dynamic=0, backend="", options=None):
    """A JitFunction compiling `cell(*args)` (hooks and all), the cell being argument 0."""
    construct = type(cell).construct
    construct = getattr(construct, "fn", construct)          # a @jit-decorated construct
    jf = JitFunction(cell_body, capture_mode, jit_level, dynamic, fullgraph, backend, options,
                     name=f"{type(cell).__name__}.construct")
    code = getattr(construct, "__code__", None)
    if code is not None:
        jf.where = f"{code.co_filename}:{code.co_firstlineno}"
    jf._globals = GlobalsGuard(construct)
    return jf


def set_cell_jit_config(cell, jit_config):
    if not isinstance(jit_config, JitConfig):
        raise OpTypeError("set_jit_config", "a JitConfig", type(jit_config).__name__)
    cell.__dict__["_jit_config"] = jit_config


# keep the hook flag in sync with captures (they start and stop in graph/capture)
def _capture_hook(active: bool):
    _refresh_hook()


add_capture_listener(_capture_hook)
_refresh_hook()
_strategies.install()                 # sharded ops record their strategies while a graph is captured

CaptureError = _trace.CaptureError

__all__ = ["jit", "JitConfig", "JitFunction", "register_capture_mode", "register_jit_level",
           "registered_capture_modes", "CaptureRequest", "CaptureResult", "GraphBreak", "CaptureError",
           "GraphBreakError", "make_executor", "cell_call", "cell_graph_function", "CELL_HOOK"]
