"""The compile cache: captured graphs stored on disk, so a later process skips capture.

    ms.set_context(enable_compile_cache=True, compile_cache_path="./cache.ms")
    # or, with lower priority (MindSpore's variables): MS_COMPILER_CACHE_ENABLE=1 MS_COMPILER_CACHE_PATH=...

Entries live in `<path>/rank_<RANK_ID>/graph_cache/` (MindSpore's layout; RANK_ID defaults to 0):
`<key>.json` (a header line, then the graph) and, when the graph holds constant tensors,
`<key>.bin` (their raw bytes; dtype, shape and offset of each are in the JSON).

**The rule.** A second process must never get the first process's numbers. Every value a captured
graph depends on is therefore, in this order of preference, (1) *in the key*, (2) *a guard stored
in the entry and checked when it is loaded*, or (3) a reason to *refuse to cache* the graph
(counted as `uncacheable` and logged with the reason) - never trusted. Concretely:

1. **The key** is a SHA-256 of everything that can be read before capturing (`call_token`):
   * the minispore, Python and NumPy versions and this file format's version; the jit settings
     (capture mode, jit level, fullgraph, options);
   * the call's arguments: tensor shapes and dtypes (their values are read by reference when the
     graph runs), Python constants by type and value;
   * the function: its code (bytecode, constants and names, nested functions included), defaults,
     closure variables, and every global its code names (`_globals_token`); of a container the
     code only appends to (`log.append(...)`, cache.write_only_names) just its type. Functions
     reached that way are described the same way, so a `value_and_grad` wrapper leads to the loss
     and a helper to the globals *it* names. Of a global module, the attributes the code names
     (`config.SCALE`); of a global class, its attributes the code names (`Config.SCALE`);
   * objects by their state, not their identity: a Cell as every sub-cell's class, plain
     attributes, every other attribute (containers, arrays, configs, functions, plain objects) and
     its parameters' names, shapes and dtypes, plus each user Cell class's class attributes and
     methods (code, defaults, closures and the globals they name: a helper method reading a
     global); any other object as its class and its `__dict__`, all of it;
   * **contents, not sizes**: lists, tuples, dicts and sets element by element, in order, and NumPy
     arrays by a SHA-256 of their bytes whatever their size (hashing runs at about a GB/s, once per
     compile).
   Functions of the standard library and installed packages are described by name (their code is
   fixed by the environment); minispore's own by the version, plus their closures.
2. **Guards stored in the entry**, for what is only known once the capture ran; a load that finds
   one no longer holds counts the entry *stale* (recaptured and rewritten) and a loaded entry keeps
   them as its in-memory guards:
   * the environment variables read while capturing (`os.environ[...]`, `.get`, `os.getenv`, `in`),
     recorded by every capture mode (capture/environ_reads.py) as `{"environ": [[name, value or
     null], ...]}`;
   * the globals the ast mode's interpreted code read (`{"globals": [[module, name, token]]}`),
     those the key already describes marked "key", and containers the code only appends to
     (`log.append(...)`: their contents cannot have shaped the graph) marked "written";
   * the SHA-256 of every source file the graph's nodes came from (the model's files).
3. **Uncacheable**: a graph with breaks (bytecode), a guard the format cannot express (another
   mode's Python callable), an attribute or object of a type with no description (no `__dict__`:
   a lock, a random generator, an array of Python objects), objects nested more than
   `OBJECT_DEPTH` levels below the call, more than `MAX_KEY_ITEMS` container elements or
   `MAX_KEY_ARRAY_BYTES` of arrays in one key, a source file that is not a regular file.
   Such a function still runs, compiled in memory, every time.

Known limits (what no key or guard here sees; keep such reads out of captured code): the values
of a *tensor* read as Python numbers during the capture (`float(param.asnumpy()[0])` on a
Parameter - tensors are in the key by shape and dtype, their values change with training and the
graph reads them by reference), `os.environb`, and C code calling getenv().

**Format** (safe, no code): JSON. Primitives are stored by NAME and looked up in the registry;
attributes are encoded explicitly by type (a JSON array is a tuple, `{"l": [...]}` a list, `{"dt": "Float32"}` a dtype,
`{"sl": [0, 4, 1]}` a slice ...) - an attribute of any other type makes the graph uncacheable, it is
never pickled. Captured tensors are stored as *paths* from the call's arguments, globals and
closures (`closure gf -> closure fn -> self -> param layers.0.attention.wq.weight`), resolved
again in the new process, so Parameters are shared as before; constant tensors built during the
capture (RoPE tables, masks) are stored as raw bytes in the .bin file.

**Never trusted**: a load checks the format and versions, the key, the SHA-256 of the payload and
of the .bin, the source files, the guards, every primitive name, and that each captured tensor's
path leads to a tensor of the recorded shape and dtype. Every file is opened as a regular file of
bounded size only (common/untrusted_files.py): an entry that is a FIFO, a device, a directory, or
larger than `MAX_ENTRY_BYTES`, is corrupt - never a read that blocks. Any failure - or a JSON
error, a truncated file - counts as *stale* or *corrupt*, is logged on
`logging.getLogger("minispore.jit")`, and the function is captured again and the entry rewritten
(through a fresh temporary file and a rename). A cache directory that cannot be written is
reported once (a RuntimeWarning) and bypassed.

Counters (`stats()`): hits, misses, stores, stale, corrupt, uncacheable, captures (real captures
run by jit while the cache is on) - the tests count captures in a second process with them.
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import datetime
import decimal
import enum
import fractions
import functools
import gc
import hashlib
import json
import logging
import math
import operator
import os
import pathlib
import re
import sys
import tempfile
import types
import uuid
import warnings

import numpy as np

from ..common import context
from ..common.dtype import DType
from ..common.tensor import Parameter, Tensor
from ..common.untrusted_files import UntrustedFileError, read_bytes
from ..ops.primitive import PRIMITIVES, AbstractTensor
from .ir import CALL, HOST_CALL, IF, OPAQUE, WHILE, Graph, Node, Slot, Value

logger = logging.getLogger("minispore.jit")
FORMAT = "minispore-graph-cache/2"
_STRUCTURAL = {op.name: op for op in (IF, WHILE, CALL, HOST_CALL)}
_SCALARS = (bool, int, float, str, bytes, type(None))

_stats = {"hits": 0, "misses": 0, "stores": 0, "stale": 0, "corrupt": 0, "uncacheable": 0, "captures": 0}
_unwritable: set = set()


def stats() -> dict:
    """A copy of the counters (see the module docstring)."""
    return dict(_stats)


def reset_stats():
    for k in _stats:
        _stats[k] = 0


class Uncacheable(Exception):
    """This graph or call cannot be stored safely (an attribute or object the format cannot express)."""


# -- settings -------------------------------------------------------------------------------------------
def enabled() -> bool:
    if context.get_context("enable_compile_cache"):
        return True
    return os.environ.get("MS_COMPILER_CACHE_ENABLE", "0") == "1"


def cache_dir() -> str:
    path = context.get_context("compile_cache_path") or os.environ.get("MS_COMPILER_CACHE_PATH", "") or "cache.ms"
    rank = os.environ.get("RANK_ID", "0")
    return os.path.join(os.fspath(path), f"rank_{rank}", "graph_cache")


# -- stable tokens: what a call depends on, identical across processes ---------------------------------
_code_hashes: dict = {}


def code_hash(code) -> str:
    """SHA-256 of a code object: bytecode, constants (nested code included), names."""
    h = _code_hashes.get(code)
    if h is None:
        m = hashlib.sha256()
        m.update(code.co_code)
        m.update(repr((code.co_name, code.co_names, code.co_varnames, code.co_freevars)).encode())
        for c in code.co_consts:
            m.update(code_hash(c).encode() if isinstance(c, types.CodeType) else repr(c).encode())
        h = _code_hashes[code] = m.hexdigest()
    return h


def _is_cell(x) -> bool:
    return hasattr(x, "cells_and_names") and hasattr(x, "construct")


# How much one key may describe. A key is computed once per compile (never per call), so these are
# generous; past them the call is refused (uncacheable, logged) rather than described in part.
MAX_KEY_ITEMS = 1 << 20              # elements of lists, tuples, dicts and sets walked for one key
MAX_KEY_ARRAY_BYTES = 1 << 30        # bytes of NumPy arrays hashed for one key
OBJECT_DEPTH = 8                     # levels of objects (functions, plain objects) below the call
_ATTR_DEPTH = 4                      # levels of objects below a Cell attribute

_CONTAINERS = (list, tuple, dict, set, frozenset)
_VALUE_TYPES = (complex, range, pathlib.PurePath, decimal.Decimal, fractions.Fraction, datetime.date,
                datetime.time, datetime.timedelta, uuid.UUID)
_SCALAR_SET = frozenset(_SCALARS)
# a Cell's registries: their members are the sub-cells, Parameters and hooks the walk describes itself
_CELL_REGISTRIES = frozenset(("_params", "_cells", "_params_list", "_forward_hooks", "_forward_pre_hooks"))
_VOLATILE = frozenset(("_hook_id", "_default_name_id", "_casting"))


class _Walk:
    """What one key computation has spent and met: container items, array bytes, arrays already
    hashed (id -> (array, token)), cells and classes already described (id -> number)."""

    __slots__ = ("items", "array_bytes", "arrays", "cells", "classes")

    def __init__(self):
        self.items = 0
        self.array_bytes = 0
        self.arrays: dict = {}
        self.cells: dict = {}
        self.classes: dict = {}


_walk = None


@contextlib.contextmanager
def _walking():
    global _walk
    outer, _walk = _walk, _Walk()
    try:
        yield _walk
    except RecursionError:
        raise Uncacheable("a value nested too deeply to describe") from None
    except Uncacheable:
        raise
    except Exception as e:          # noqa: BLE001 - an object whose attributes raise: not described
        raise Uncacheable(f"describing a value raised {type(e).__name__}: {e}") from None
    finally:
        _walk = outer


def _spend_items(n):
    _walk.items += n
    if _walk.items > MAX_KEY_ITEMS:
        raise Uncacheable(f"containers with more than {MAX_KEY_ITEMS:,} elements in all")


def _array_token(a):
    """Shape, dtype and the SHA-256 of the contents - of every array, whatever its size (hashing
    runs at about a GB/s, and only when a key is computed)."""
    if a.dtype.hasobject:
        raise Uncacheable("a NumPy array of Python objects")
    hit = _walk.arrays.get(id(a))
    if hit is not None and hit[0] is a:
        return hit[1]
    _walk.array_bytes += a.nbytes
    if _walk.array_bytes > MAX_KEY_ARRAY_BYTES:
        raise Uncacheable(f"NumPy arrays of more than {MAX_KEY_ARRAY_BYTES:,} bytes in all")
    flat = np.ascontiguousarray(a).reshape(-1)
    digest = hashlib.sha256(flat.view(np.uint8) if flat.size else b"").hexdigest()
    tok = ["ndarray", list(a.shape), a.dtype.str, digest]
    _walk.arrays[id(a)] = (a, tok)
    return tok


def _float(v):
    return v if math.isfinite(v) else repr(v)


def stable_token(x, depth: int = OBJECT_DEPTH, seen=None):
    """A JSON-able description of `x` that is the same in every process for the same program and
    differs whenever `x` could make a captured graph differ (see the module docstring: the key)."""
    if _walk is None:
        with _walking():
            return stable_token(x, depth, seen)
    t = type(x)
    if t in _SCALARS:
        return [t.__name__, _float(x) if t is float else x.hex() if t is bytes else x]
    if isinstance(x, DType):
        return ["dtype", x.name]
    if isinstance(x, Tensor):
        return ["tensor", list(x.shape), x.dtype.name, isinstance(x, Parameter),
                bool(getattr(x, "requires_grad", False))]
    if isinstance(x, np.ndarray):
        return _array_token(x)
    if isinstance(x, np.generic):
        v = x.item()
        return ["npscalar", x.dtype.str, _float(v) if isinstance(v, float) else v if type(v) in _SCALARS else repr(v)]
    if isinstance(x, np.dtype):
        return ["npdtype", x.str]
    if isinstance(x, np.ufunc):
        return ["ufunc", x.__name__]
    if isinstance(x, Slot):
        return ["slot", x.index]
    if t is slice:
        return ["slice", stable_token(x.start), stable_token(x.stop), stable_token(x.step)]
    if x is Ellipsis:
        return ["ellipsis"]
    if isinstance(x, types.ModuleType):
        return ["module", x.__name__]
    if isinstance(x, type):
        return ["class", x.__module__, x.__qualname__]
    if isinstance(x, logging.Logger):
        return ["logger", x.name]        # (its handlers and level do not change numbers)
    if isinstance(x, enum.Enum):
        return ["enum", type(x).__module__, type(x).__qualname__, x.name, stable_token(x.value, depth, seen)]
    if isinstance(x, _VALUE_TYPES):
        # immutable values of the standard library whose repr says everything (a Path, a Decimal...)
        return ["value", t.__module__, t.__qualname__, repr(x)]
    if isinstance(x, re.Pattern):
        return ["regex", x.pattern, x.flags]
    if seen is None:
        seen = {}
    if id(x) in seen:
        return ["cycle", seen[id(x)]]    # the enclosing value so many levels up the path
    if t is list or t is tuple:
        kinds = set(map(type, x))
        if kinds <= _SCALAR_SET:
            # only plain scalars (the common case: `coeffs = [2.0, 1.0]`): repr is exact and fast
            _spend_items(len(x))
            return [t.__name__, "scalars", repr(x)]
    if isinstance(x, _CONTAINERS):
        # containers do not count against `depth` (their size is bounded by MAX_KEY_ITEMS); their
        # order is kept (a dict or set iterated in the graph's code gives a different graph in
        # another order; equal programs build them in the same order)
        inner = {**seen, id(x): len(seen)}
        _spend_items(len(x))
        if isinstance(x, dict):
            items = [[stable_token(k, depth, inner), stable_token(v, depth, inner)] for k, v in x.items()]
        else:
            items = [stable_token(v, depth, inner) for v in x]
        tok = [t.__name__ if t in _CONTAINERS else f"{t.__module__}.{t.__qualname__}", items]
        if t not in _CONTAINERS:
            # a subclass (a namedtuple, an OrderedDict, a defaultdict...): its own attributes too
            extra = getattr(x, "__dict__", None)
            if extra:
                tok.append(stable_token(dict(extra), depth - 1, inner))
            if isinstance(x, collections.defaultdict):
                tok.append(stable_token(x.default_factory, depth - 1, inner))
        return tok
    if _is_cell(x):
        return _cell_token(x, seen)          # (described once per key, whatever the depth)
    if depth < 0:
        raise Uncacheable(f"a {t.__module__}.{t.__qualname__} more than {OBJECT_DEPTH} objects below the call "
                          f"(too deep to describe)")
    seen = {**seen, id(x): len(seen)}
    if hasattr(x, "__minispore_jit__"):
        jf, obj = getattr(x, "jf", x), getattr(x, "obj", None)       # a JitFunction, or one bound to obj
        return ["jit", stable_token(getattr(jf, "fn", None), depth - 1, seen), getattr(jf, "capture_mode", None),
                getattr(jf, "jit_level", None), stable_token(obj, depth - 1, seen)]
    if isinstance(x, types.MethodType):
        return ["method", stable_token(x.__self__, depth, seen), _function_token(x.__func__, depth, seen)]
    if isinstance(x, functools.partial):
        return ["partial", stable_token(x.func, depth - 1, seen), stable_token(list(x.args), depth - 1, seen),
                stable_token(dict(x.keywords), depth - 1, seen)]
    if isinstance(x, types.FunctionType):
        return _function_token(x, depth, seen)
    if isinstance(x, types.BuiltinFunctionType):
        owner = getattr(x, "__self__", None)         # a bound builtin method (`log.append`): whose
        return ["builtin", getattr(x, "__module__", None), x.__qualname__,
                None if owner is None or isinstance(owner, types.ModuleType) else stable_token(owner, depth - 1, seen)]
    if hasattr(x, "__dict__") or dataclasses.is_dataclass(x):
        d = vars(x) if hasattr(x, "__dict__") else {f.name: getattr(x, f.name) for f in dataclasses.fields(x)}
        items = []
        for k, v in d.items():
            try:
                items.append([k, stable_token(v, depth - 1, seen)])
            except Uncacheable as e:
                raise Uncacheable(f"attribute '{k}' of a {t.__qualname__}: {e}") from None
        # (and what its class holds: a class attribute `scale = 2.0`, the methods and their globals)
        return ["object", t.__module__, t.__qualname__, items, _class_token(t)]
    raise Uncacheable(f"an argument or global of type {t.__module__}.{t.__qualname__}")


# -- whose code is it: the user's (described), minispore's or an installed library's (versioned) ------------
def _library_dirs():
    import sysconfig
    dirs = set()
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        p = sysconfig.get_paths().get(key)
        if p:
            dirs.add(os.path.realpath(p) + os.sep)
    return tuple(sorted(dirs))


_LIBRARY_DIRS = _library_dirs()
_library_files: dict = {}


def _is_library_file(filename) -> bool:
    """Code of the standard library or an installed package (described by name: it does not
    change between two runs of the same environment; NumPy's version is in the key)."""
    r = _library_files.get(filename)
    if r is None:
        r = _library_files[filename] = bool(filename) and (
            filename.startswith("<") or os.path.realpath(filename).startswith(_LIBRARY_DIRS))
    return r


def _is_user_module(m) -> bool:
    name = getattr(m, "__name__", "") or ""
    if name.partition(".")[0] == "minispore" or name in sys.builtin_module_names:
        return False
    f = getattr(m, "__file__", None)
    return bool(f) and not _is_library_file(f)


def _function_token(f, depth, seen):
    """Name, code hash, closure, defaults and referenced globals of a function. minispore's own
    framework functions (autograd wrappers, jit...) are covered by the version in the key: only
    their closures (which hold the user's function and weights) are described; a library's
    functions by name only."""
    code = getattr(f, "__code__", None)
    if code is not None and _is_library_file(code.co_filename):
        return ["libfunction", getattr(f, "__module__", None), getattr(f, "__qualname__", None)]
    framework = code is not None and _is_framework(code)
    tok = ["function", getattr(f, "__module__", None), getattr(f, "__qualname__", None),
           code_hash(code) if code is not None and not framework else None]
    cells = getattr(f, "__closure__", None) or ()
    names = code.co_freevars if code is not None else ()
    writes = _write_only_names(code) if code is not None and not framework else ()
    closure = []
    for name, c in zip(names, cells):
        try:
            v = c.cell_contents
        except ValueError:
            continue
        if name in writes and isinstance(v, _CONTAINERS):
            closure.append([name, "written", type(v).__name__])     # a log: see _globals_token
            continue
        try:
            closure.append([name, stable_token(v, depth - 1, seen)])
        except Uncacheable as e:
            raise Uncacheable(f"closure variable '{name}' of {tok[2]}: {e}") from None
    tok.append(closure)
    tok.append(stable_token(list(f.__defaults__ or ()), depth - 1, seen))
    tok.append(stable_token(dict(getattr(f, "__kwdefaults__", None) or {}), depth - 1, seen))
    if not framework:
        tok.append(_globals_token(f, depth - 1, seen))
    return tok


def _write_only_names(code):
    from .cache import write_only_names
    return write_only_names(code)


def _is_framework(code) -> bool:
    from .capture.trace import _is_internal
    return _is_internal(code)


def _described_globals(f):
    """(name, value) of the globals `f`'s code names (nested functions included) that the key
    describes: all but modules and classes, which are described by the attributes the code names."""
    code = getattr(f, "__code__", None)
    g = getattr(f, "__globals__", None)
    if code is None or g is None:
        return [], (), {}
    from .cache import _code_names
    names = _code_names(code, set())
    return [(n, g[n]) for n in sorted(names) if n in g], names, g


def _globals_token(f, depth, seen):
    out = []
    values, names, _g = _described_globals(f)
    # a container the code only appends to (`LOG.append(...)`) cannot have shaped the graph: its
    # contents are left out (else a log filled by an earlier call would change the key)
    writes = _write_only_names(f.__code__) if values else ()
    for n, v in values:
        if n in writes and isinstance(v, _CONTAINERS):
            out.append([n, "written", type(v).__name__])
            continue
        try:
            if isinstance(v, types.ModuleType):
                if _is_user_module(v):
                    # `config.SCALE`, `helpers.scale(x)`: the module's attributes the code names
                    md = vars(v)
                    attrs = [[a, stable_token(md[a], depth, seen)] for a in sorted(names & md.keys())
                             if not isinstance(md[a], types.ModuleType)]
                    out.append([n, "module", v.__name__, attrs])
                continue
            if isinstance(v, type):
                out.append([n, _class_attrs_token(v, names, depth, seen)])
                continue
            out.append([n, stable_token(v, depth, seen)])
        except Uncacheable as e:
            raise Uncacheable(f"global '{n}' of {getattr(f, '__qualname__', '?')}: {e}") from None
    return out


def _user_classes(cls):
    """The classes of `cls`'s MRO whose code is the user's (not minispore's, a library's or builtins)."""
    out = []
    for c in cls.__mro__:
        mod = sys.modules.get(getattr(c, "__module__", ""))
        if c is object or mod is None or not _is_user_module(mod):
            continue
        out.append(c)
    return out


_SLOT_DESCRIPTORS = (types.MemberDescriptorType, types.GetSetDescriptorType)


def _class_member(v):
    """The function behind a class attribute (staticmethod/classmethod/property unwrapped), or v."""
    if isinstance(v, (staticmethod, classmethod)):
        return v.__func__
    if isinstance(v, property):
        return [v.fget, v.fset]
    return v


def _class_attrs_token(cls, names, depth, seen):
    """A class named by code (`Config.SCALE`, `Helper.scale(x)`): the attributes of its user
    classes the code names."""
    tok = ["class", cls.__module__, cls.__qualname__]
    for c in _user_classes(cls):
        for a in sorted(names & vars(c).keys()):
            if not a.startswith("__") and a != "_abc_impl" and not isinstance(vars(c)[a], _SLOT_DESCRIPTORS):
                tok.append([c.__qualname__, a, stable_token(_class_member(vars(c)[a]), depth, seen)])
    return tok


def _class_token(cls):
    """Everything of a Cell's (or another object's) class its instances' graphs may read besides
    the instance: each user class of its MRO, with its plain class attributes (`scale = 2.0`) and
    its methods (code, defaults, closures and the globals they name: a helper method reading a
    global list). Classes of minispore, the standard library and installed packages: by name."""
    k = _walk.classes.get(cls)
    if k is not None:
        return ["same-class", k]
    _walk.classes[cls] = len(_walk.classes)
    parts = []
    for c in _user_classes(cls):
        members = []
        for a, v in vars(c).items():
            if (a.startswith("__") and a != "__call__") or a == "_abc_impl" or isinstance(v, _SLOT_DESCRIPTORS):
                continue            # (Python's own bookkeeping: slots, the abc registry)
            v = _class_member(v)
            try:
                members.append([a, stable_token(v, _ATTR_DEPTH)])
            except Uncacheable as e:
                raise Uncacheable(f"class attribute '{c.__qualname__}.{a}': {e}") from None
        parts.append([c.__module__, c.__qualname__, members])
    return ["class", cls.__module__, cls.__qualname__, parts]


def _cell_token(cell, seen):
    """Every sub-cell's class (its layout, and `_class_token`), plain attributes, and every other
    attribute (containers, arrays, configs, functions, plain objects: `stable_token`), the names,
    shapes and dtypes of its parameters, in the cells' own attribute order. A cell met again
    (through another closure) is described once per token: `["same", n]`."""
    memo = _walk.cells
    k = memo.get(id(cell))
    if k is not None:
        return ["same", k]
    memo[id(cell)] = len(memo)
    parts, classes = [], []
    stack, visited = [("", cell)], set()
    while stack:
        name, c = stack.pop()
        if id(c) in visited:
            continue
        visited.add(id(c))
        d = c.__dict__
        if d.get("_forward_hooks") or d.get("_forward_pre_hooks"):
            raise Uncacheable(f"cell '{name or type(c).__name__}' has forward hooks (Python functions)")
        tc = type(c)
        if tc not in _walk.classes:
            classes.append(_class_token(tc))
        lkey = (tc, tuple(d), tuple(map(type, d.values())))
        lay = _cell_layouts.get(lkey)
        if lay is None:
            lay = _cell_layouts[lkey] = _CellLayout(d, tc)
        attrs = [lay.scalar_get(d)]
        for k in lay.other_keys:
            try:
                attrs.append((k, stable_token(d[k], _ATTR_DEPTH, seen)))
            except Uncacheable as e:
                raise Uncacheable(f"attribute '{name + '.' if name else ''}{k}' of a {tc.__qualname__}: {e}") from None
        params = [(k, p._data.shape, p.dtype.name, p.requires_grad)
                  for k, p in d["_params"].items() if p is not None]
        parts.append((name, lay.digest, attrs, params))
        prefix = name + "." if name else ""
        for k, sub in reversed(d["_cells"].items()):
            if sub is not None:
                stack.append((prefix + k, sub))
    return ["cell", parts, classes]


_cell_layouts: dict = {}        # (class, attribute names, attribute types) -> _CellLayout


class _CellLayout:
    """How to describe cells of one layout (class, attribute names and value types): which keys
    hold plain values (read with one C-level itemgetter) and which hold anything else (described
    one by one with stable_token); plus the class's identity (module, name, construct's code
    hash). Built from the first such cell; a model's cells share a handful of layouts. Only the
    registries (`_params`, `_cells`... described by the walk itself) and bookkeeping counters
    are left out: every other attribute is part of the key."""

    __slots__ = ("scalar_keys", "scalar_get", "other_keys", "class_id", "digest")

    def __init__(self, d, cls):
        scalars, others = [], []
        for k, v in d.items():
            if k in _VOLATILE or k in _CELL_REGISTRIES:
                continue
            if type(v) in _SCALARS:
                scalars.append(k)
            else:
                others.append(k)
        self.scalar_keys = tuple(scalars)
        getter = operator.itemgetter(*scalars) if scalars else None
        self.scalar_get = (lambda dd: ()) if not scalars else (
            (lambda dd, _g=getter: (_g(dd),)) if len(scalars) == 1 else getter)
        self.other_keys = tuple(others)
        construct = getattr(cls, "construct", None)
        code = getattr(getattr(construct, "fn", construct), "__code__", None)
        self.class_id = (cls.__module__, cls.__qualname__, code_hash(code) if code is not None else "")
        # what the token says about every cell of this layout (class identity and attribute names)
        # in 32 hex digits: the key is a hash of the token's repr, and a long model repeats the
        # same few layouts per layer, so spelling them out each time made the repr the costliest
        # part of computing the key
        self.digest = hashlib.sha256(repr((self.class_id, self.scalar_keys, self.other_keys)).encode()).hexdigest()[:32]


def call_token(jf, fn, args, kwargs):
    """The stable description of one compile request (hashed into the key); raises Uncacheable."""
    with _walking():
        return [FORMAT, _versions(), [jf.capture_mode, jf.jit_level, jf.fullgraph, stable_token(jf.options)],
                stable_token(fn), stable_token(list(args)), stable_token(dict(kwargs))]


def _versions():
    from .. import __version__
    return [__version__, list(sys.version_info[:3]), np.__version__]


def key_of(token) -> str:
    # tokens are lists of str/int/float/bool/None (dict items already sorted): repr is deterministic
    return hashlib.sha256(repr(token).encode()).hexdigest()


# -- capture paths: where a captured tensor lives, in terms the next process can follow ---------------------
def _roots(fn, args, kwargs):
    yield [["fn"]], fn
    for i, a in enumerate(args):
        yield [["arg", i]], a
    for k, v in kwargs.items():
        yield [["kwarg", k]], v


def _children(x):
    """(step, child) pairs to search for tensors below x."""
    if _is_cell(x):
        for name, p in x.parameters_and_names():
            yield ["param", name], p
        for name, c in x.cells_and_names():
            for k, v in c.__dict__.items():
                if isinstance(v, Tensor) or (isinstance(v, (list, tuple)) and v and isinstance(v[0], Tensor)):
                    yield ["attr", f"{name}.{k}" if name else k], v
        return
    if isinstance(x, (list, tuple)):
        for i, v in enumerate(x):
            yield ["item", i], v
    elif isinstance(x, dict):
        for k, v in x.items():
            if isinstance(k, str):
                yield ["key", k], v
    elif isinstance(x, types.MethodType):
        yield ["self"], x.__self__
        yield ["func"], x.__func__
    elif isinstance(x, functools.partial):
        yield ["pfunc"], x.func
        for i, v in enumerate(x.args):
            yield ["parg", i], v
    elif isinstance(x, types.FunctionType):
        code = x.__code__
        for name, c in zip(code.co_freevars, x.__closure__ or ()):
            try:
                yield ["closure", name], c.cell_contents
            except ValueError:
                pass
        g = x.__globals__
        for n in sorted(code.co_names):
            v = g.get(n)
            if v is not None and not isinstance(v, (types.ModuleType, type)) and (
                    isinstance(v, (Tensor, types.FunctionType)) or _is_cell(v)):
                yield ["global", n], v
    elif hasattr(x, "__minispore_jit__") and hasattr(x, "fn"):
        yield ["jitfn"], x.fn


def tensor_paths(fn, args, kwargs, max_depth=8) -> dict:
    """{id(tensor): path} for every tensor reachable from the call (breadth first: shortest paths)."""
    found, seen = {}, set()
    frontier = list(_roots(fn, args, kwargs))
    for _ in range(max_depth):
        nxt = []
        for path, x in frontier:
            if id(x) in seen:
                continue
            seen.add(id(x))
            if isinstance(x, Tensor):
                found.setdefault(id(x), path)
                continue
            for step, child in _children(x):
                nxt.append((path + [step], child))
        frontier = nxt
        if not frontier:
            break
    return found


def _step(x, step):
    kind = step[0]
    if kind == "arg":
        return x[0][step[1]]
    if kind == "kwarg":
        return x[1][step[1]]
    if kind == "param":
        for name, p in x.parameters_and_names():
            if name == step[1]:
                return p
        raise KeyError(step[1])
    if kind == "attr":
        obj, _, attr = step[1].rpartition(".")
        c = x
        for part in obj.split(".") if obj else ():
            c = c._cells[part]
        return c.__dict__[attr]
    if kind == "item":
        return x[step[1]]
    if kind == "key":
        return x[step[1]]
    if kind == "self":
        return x.__self__
    if kind == "func":
        return x.__func__
    if kind == "pfunc":
        return x.func
    if kind == "parg":
        return x.args[step[1]]
    if kind == "closure":
        code = x.__code__
        return x.__closure__[code.co_freevars.index(step[1])].cell_contents
    if kind == "global":
        return x.__globals__[step[1]]
    if kind == "jitfn":
        return x.fn
    raise KeyError(kind)


def resolve(path, fn, args, kwargs):
    head = path[0]
    if head[0] == "fn":
        x = fn
    elif head[0] == "arg":
        x = args[head[1]]
    else:
        x = kwargs[head[1]]
    for step in path[1:]:
        x = _step(x, step)
    return x


# -- encoding values and graphs ---------------------------------------------------------------------------
def _indexspec_types():
    from ..ops.prims._indexspec import IndexInput, Slice
    return {"Slice": Slice, "IndexInput": IndexInput}


def encode(x, graphs):
    """One attribute / template value as JSON (see the module docstring); Graphs by index."""
    t = type(x)
    if x is None or t is bool or t is int or t is str:
        return x
    if t is float:
        return x if math.isfinite(x) else {"f": repr(x)}
    if t is tuple:
        return [encode(v, graphs) for v in x]          # JSON arrays are tuples (the common case)
    if t is list:
        return {"l": [encode(v, graphs) for v in x]}
    if t is dict:
        return {"d": [[encode(k, graphs), encode(v, graphs)] for k, v in x.items()]}
    if isinstance(x, DType):
        return {"dt": x.name}
    if t is Slot:
        return {"slot": x.index}
    if t is slice:
        return {"sl": [encode(x.start, graphs), encode(x.stop, graphs), encode(x.step, graphs)]}
    if x is Ellipsis:
        return {"el": 1}
    if isinstance(x, np.generic):
        v = x.item()
        return {"ng": [x.dtype.str, v if not isinstance(v, float) or math.isfinite(v) else repr(v)]}
    if isinstance(x, np.dtype):
        return {"npdt": x.str}
    if isinstance(x, Graph):
        return {"g": graphs(x)}
    name = t.__name__
    if name in _indexspec_types() and t is _indexspec_types()[name]:
        return {"nt": name, "v": [encode(v, graphs) for v in x]}
    raise Uncacheable(f"an attribute of type {t.__module__}.{t.__qualname__}")


_PLAIN = frozenset((int, float, str, bool, type(None)))


def decode(x, graphs):
    t = type(x)
    if t is list:
        return tuple([v if type(v) in _PLAIN else decode(v, graphs) for v in x])
    if t is not dict:
        return x
    if "l" in x:
        return [decode(v, graphs) for v in x["l"]]
    if "d" in x:
        return {decode(k, graphs): decode(v, graphs) for k, v in x["d"]}
    if "f" in x:
        return float(x["f"])
    if "dt" in x:
        from ..common.dtype import as_dtype
        return as_dtype(x["dt"])
    if "slot" in x:
        return Slot(x["slot"])
    if "sl" in x:
        return slice(*(decode(v, graphs) for v in x["sl"]))
    if "el" in x:
        return Ellipsis
    if "ng" in x:
        dt, v = x["ng"]
        return np.dtype(dt).type(float(v) if isinstance(v, str) else v)
    if "npdt" in x:
        return np.dtype(x["npdt"])
    if "g" in x:
        return graphs[x["g"]]
    if "nt" in x:
        return _indexspec_types()[x["nt"]](*(decode(v, graphs) for v in x["v"]))
    raise ValueError(f"unknown encoded value {x!r}")


def _aval_json(aval):
    if aval is OPAQUE:
        return "py"
    return [list(aval.shape), aval.dtype.name]


def encode_result(result, fn, args, kwargs):
    """(payload dict, constant arrays, source files) for a CaptureResult; raises Uncacheable."""
    if result.runner is not None or result.breaks or result.graph is None:
        raise Uncacheable("a capture with graph breaks")
    guards = [_encode_guard(g, fn) for g in result.guards]
    paths = None
    graph_index: dict = {}
    graph_list: list = []
    captures: list = []           # shared table: {"path": [...]} | {"const": k} | {"cell": path}
    cap_index: dict = {}          # id(tensor) -> index in captures
    consts: list = []
    files: set = set()
    avals: list = []
    aval_index: dict = {}

    def aval_ref(a):
        j = json.dumps(_aval_json(a))
        k = aval_index.get(j)
        if k is None:
            k = aval_index[j] = len(avals)
            avals.append(_aval_json(a))
        return k

    def capture_ref(t):
        nonlocal paths
        k = cap_index.get(id(t))
        if k is not None:
            return k
        if paths is None:
            paths = tensor_paths(fn, args, kwargs)
        p = paths.get(id(t))
        if p is not None:
            entry = {"path": p}
        elif isinstance(t, Parameter):
            raise Uncacheable(f"Parameter '{t.name}' is not reachable from the call's arguments, globals or closures")
        else:
            entry = {"const": len(consts)}
            consts.append(np.array(t._data, order="C"))       # (ascontiguousarray would make 0-d 1-d)
        k = cap_index[id(t)] = len(captures)
        captures.append(entry)
        return k

    def host_fn(fnobj):
        from ..jit import _HostCellCall
        if isinstance(fnobj, _HostCellCall):
            nonlocal paths
            if paths is None:
                paths = tensor_paths(fn, args, kwargs)
            p = _object_path(fnobj.cell, fn, args, kwargs)
            if p is None:
                raise Uncacheable("a host call on a cell that is not reachable from the call")
            return {"hostcell": p}
        raise Uncacheable(f"a host call of {getattr(fnobj, '__qualname__', type(fnobj).__name__)}")

    def gref(g):
        k = graph_index.get(id(g))
        if k is None:
            k = graph_index[id(g)] = len(graph_list)
            graph_list.append(None)
            graph_list[k] = enc_graph(g)
        return k

    src_index: dict = {}
    src_table: list = []

    def src_ref(src):
        if src is None:
            return -1
        k = src_index.get(src)
        if k is None:
            k = src_index[src] = len(src_table)
            src_table.append(list(src))
            files.add(src[0])
        return k

    def enc_graph(g):
        # values are numbered in definition order (params, captures, node outputs): a node's
        # inputs refer to those numbers, and decoding just appends to a list
        ids = {}
        for v in g.params:
            ids[v.id] = len(ids)
        params = [[aval_ref(p.aval), p.name] for p in g.params]
        for v, _t in g.captures:
            ids[v.id] = len(ids)
        caps = [[aval_ref(v.aval), v.name, capture_ref(t)] for v, t in g.captures]
        nodes = []
        for n in g.nodes:
            ins = [ids[x.id] if isinstance(x, Value) else {"c": encode(x, gref)} for x in n.inputs]
            if n.is_primitive:
                op = n.op.name
                if PRIMITIVES.get(op) is not n.op:
                    raise Uncacheable(f"primitive '{op}' is not in the registry (a generated kernel)")
                attrs = {k: encode(v, gref) for k, v in n.attrs.items()}
            else:
                op = "#" + n.op.name
                attrs = {}
                for k, v in n.attrs.items():
                    if n.op is HOST_CALL and k == "fn":
                        attrs[k] = host_fn(v)
                    else:
                        attrs[k] = encode(v, gref)
            for o in n.outputs:
                ids[o.id] = len(ids)
            nodes.append([op, ins, attrs or 0, [aval_ref(o.aval) for o in n.outputs], int(n.multi),
                          src_ref(n.source)])
        outputs = [ids[o.id] if isinstance(o, Value) else {"c": encode(o, gref)} for o in g.outputs]
        return {"name": g.name, "params": params, "captures": caps, "nodes": nodes, "outputs": outputs,
                "notes": encode(dict(g.notes), gref)}

    top = gref(result.graph)
    payload = {"graphs": graph_list, "top": top, "avals": avals, "captures": captures, "sources": src_table,
               "guards": guards,
               "out_template": encode(result.out_template, gref), "mode": result.mode}
    code = getattr(getattr(fn, "__func__", fn), "__code__", None)
    if code is not None:
        files.add(code.co_filename)
    return payload, consts, sorted(f for f in files if os.path.isfile(f))


def _object_path(obj, fn, args, kwargs, max_depth=6):
    seen, frontier = set(), list(_roots(fn, args, kwargs))
    for _ in range(max_depth):
        nxt = []
        for path, x in frontier:
            if x is obj:
                return path
            if id(x) in seen or isinstance(x, Tensor):
                continue
            seen.add(id(x))
            for step, child in _children(x):
                nxt.append((path + [step], child))
            if _is_cell(x):
                for name, c in x.cells_and_names():
                    if name:
                        nxt.append((path + [["cell", name]], c))
        frontier = nxt
    return None


def decode_result(payload, consts, fn, args, kwargs):
    """Rebuild the CaptureResult; raises ValueError/KeyError/... on anything inconsistent."""
    from ..jit import _HostCellCall
    from .capture import CaptureResult
    avals = []
    for a in payload["avals"]:
        if a == "py":
            avals.append(OPAQUE)
        else:
            from ..common.dtype import as_dtype
            avals.append(AbstractTensor(tuple(a[0]), as_dtype(a[1])))
    tensors = []
    for c in payload["captures"]:
        if "path" in c:
            t = resolve(c["path"], fn, args, kwargs)
            if not isinstance(t, Tensor):
                raise ValueError(f"capture path {c['path']} leads to {type(t).__name__}, not a Tensor")
        else:
            from ..common.tensor import _wrap
            t = _wrap(consts[c["const"]])
        tensors.append(t)
    graphs: list = [None] * len(payload["graphs"])

    sources = [(f, line, name) for f, line, name in payload["sources"]]
    sub = None

    def build(k):
        if graphs[k] is not None:
            return graphs[k]
        gj = payload["graphs"][k]
        env = []
        params = []
        for a, name in gj["params"]:
            v = Value(avals[a], "param", name=name)
            env.append(v)
            params.append(v)
        caps = []
        for a, name, ti in gj["captures"]:
            t = tensors[ti]
            aval = avals[a]
            if tuple(t.shape) != aval.shape or t.dtype is not aval.dtype:
                raise ValueError(f"captured tensor '{name}' is now {tuple(t.shape)} {t.dtype}, was {aval}")
            v = Value(aval, "capture", producer=t, name=name)
            env.append(v)
            caps.append((v, t))
        nodes = []
        append, extend = nodes.append, env.extend
        for op, ins, attrs, outs, multi, src in gj["nodes"]:
            inputs = tuple([env[x] if type(x) is int else decode(x["c"], sub) for x in ins])
            if op[0] == "#":
                prim = _STRUCTURAL[op[1:]]
                dattrs = {}
                for ak, av in attrs.items():
                    if ak == "fn" and prim is HOST_CALL:
                        dattrs[ak] = _HostCellCall(_resolve_object(av["hostcell"], fn, args, kwargs))
                    else:
                        dattrs[ak] = decode(av, sub)
            else:
                prim = PRIMITIVES[op]
                dattrs = {ak: (av if type(av) in _PLAIN else decode(av, sub)) for ak, av in attrs.items()} \
                    if attrs else {}
            node = Node(prim, inputs, dattrs, (), multi == 1, sources[src] if src >= 0 else None)
            if len(outs) == 1:
                node.outputs = outv = (Value(avals[outs[0]], "node", (node, 0)),)
            else:
                node.outputs = outv = tuple([Value(avals[a], "node", (node, j)) for j, a in enumerate(outs)])
            extend(outv)
            append(node)
        outputs = [env[x] if type(x) is int else decode(x["c"], sub) for x in gj["outputs"]]
        g = Graph(gj["name"], params, caps, nodes, outputs, fn)
        g.notes.update(decode(gj["notes"], sub))
        graphs[k] = g
        return g

    sub = _SubGraphs(build)
    guards = _decode_guards(payload.get("guards", []))
    top = build(payload["top"])
    out_template = decode(payload["out_template"], sub)
    return CaptureResult(graph=top, out_template=out_template, guards=guards, mode=payload["mode"])


# -- guards a capture mode adds: checked when an entry is loaded, and kept as the entry's guards ---------
class Stale(Exception):
    """The entry was valid when written but no longer matches this program (a global changed)."""


_MISSING_TOKEN = ["missing"]


def _keyed_globals(fn):
    """(id of globals dict, name) of the globals the key itself describes (those of `fn`'s code
    that _globals_token includes): their guard needs no separate check."""
    f = getattr(fn, "__func__", fn)
    values, _names, g = _described_globals(f)
    writes = _write_only_names(f.__code__) if values else ()
    return {(id(g), n) for n, v in values if not isinstance(v, (types.ModuleType, type))
            and not (n in writes and isinstance(v, _CONTAINERS))}      # (a log: only its type is keyed)


def _encode_guard(guard, fn):
    """One of `CaptureResult.guards` as JSON: the environment variables a capture read
    (`{"environ": [[name, value or null], ...], "names": ...}`), or the globals the ast mode's
    interpreted code read (`{"globals": [[module, name, token or "key"], ...]}`). Any other guard
    is a Python function the cache cannot describe: the graph is uncacheable."""
    import inspect
    from .capture.environ_reads import EnvironGuard
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


def _decode_guards(encoded):
    """The live guards of a stored entry; raises Stale when one no longer holds in this process."""
    from .capture.ast_mode.interpreter import globals_guard, guard_token
    from .capture.ast_mode.signals import MISSING
    from .capture.environ_reads import EnvironGuard
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


class _SubGraphs:
    """`graphs[k]` for decode(): builds subgraph k on first use."""

    __slots__ = ("build",)

    def __init__(self, build):
        self.build = build

    def __getitem__(self, k):
        return self.build(k)


def _resolve_object(path, fn, args, kwargs):
    head = path[0]
    x = fn if head[0] == "fn" else args[head[1]] if head[0] == "arg" else kwargs[head[1]]
    for step in path[1:]:
        if step[0] == "cell":
            for name, c in x.cells_and_names():
                if name == step[1]:
                    x = c
                    break
            else:
                raise KeyError(step[1])
        else:
            x = _step(x, step)
    return x


# -- files ------------------------------------------------------------------------------------------------
# Every file the cache reads is opened with untrusted_files: only a regular file, never more than
# it may hold. An entry that is a FIFO, a device, a directory or a symlink to one - or that is
# larger than any entry - counts as corrupt (logged, captured again): a read never blocks.
MAX_ENTRY_BYTES = 1 << 30            # a <key>.json: a very large model's graph is tens of MB
MAX_SOURCE_BYTES = 64 << 20          # a model source file whose hash an entry records


def _file_sha(path) -> str:
    """SHA-256 of a source file; UntrustedFileError when it is missing, not a regular file or
    too large."""
    return hashlib.sha256(read_bytes(path, "a source file of a compile-cache entry", MAX_SOURCE_BYTES)).hexdigest()


def _atomic_write(path, data: bytes):
    """Write `path` as a whole: a fresh temporary file in the same directory (mkstemp: O_EXCL, so a
    FIFO or a symlink planted under a predictable name is never opened), then a rename."""
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=os.path.basename(path) + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _warn_unwritable(d, err):
    if d not in _unwritable:
        _unwritable.add(d)
        warnings.warn(f"compile cache: the directory '{d}' cannot be written ({type(err).__name__}: {err}); "
                      f"compiling without the cache", RuntimeWarning, stacklevel=4)


def store(jf, fn, args, kwargs, result, key=None):
    """Write `result` for this call; False (and a log line) when it cannot be stored."""
    d = cache_dir()
    if d in _unwritable:
        return False
    try:
        key = key or key_of(call_token(jf, fn, args, kwargs))
        payload, consts, files = encode_result(result, fn, args, kwargs)
    except Uncacheable as e:
        _stats["uncacheable"] += 1
        logger.info("compile cache: '%s' is not cached: %s", jf.name, e)
        return False
    # constant tensors: one raw binary file, each array's dtype/shape/offset in the payload
    blob, table = bytearray(), []
    for a in consts:
        off = len(blob)
        blob += a.tobytes()
        blob += b"\0" * (-len(blob) % 64)
        table.append([a.dtype.str, list(a.shape), off])
    payload["consts"] = table
    body = json.dumps(payload, separators=(",", ":"), allow_nan=False).encode()
    try:
        sources = {f: _file_sha(f) for f in files}
    except UntrustedFileError as e:
        _stats["uncacheable"] += 1
        logger.info("compile cache: '%s' is not cached: %s", jf.name, e)
        return False
    header = {"format": FORMAT, "versions": _versions(), "key": key, "name": jf.name,
              "sources": sources,
              "payload_sha256": hashlib.sha256(body).hexdigest(),
              "consts_sha256": hashlib.sha256(blob).hexdigest() if blob else None,
              "consts_bytes": len(blob)}
    try:
        os.makedirs(d, exist_ok=True)
        if blob:
            _atomic_write(os.path.join(d, key + ".bin"), bytes(blob))
        # one JSON header line, then the JSON payload (checksummed as bytes)
        _atomic_write(os.path.join(d, key + ".json"), json.dumps(header).encode() + b"\n" + body)
    except (IsADirectoryError, NotADirectoryError) as e:
        if os.path.isdir(d):
            # a directory where this one entry's file belongs: this entry is not stored, the rest
            # of the cache still works
            logger.warning("compile cache: cannot store '%s' (%s: %s)", jf.name, type(e).__name__, e)
            return False
        _warn_unwritable(d, e)
        return False
    except OSError as e:
        _warn_unwritable(d, e)
        return False
    _stats["stores"] += 1
    logger.info("compile cache: stored '%s' (%s)", jf.name, key[:12])
    return True


def load(jf, fn, args, kwargs):
    """(CaptureResult or None, key). None on a miss, or on a stale/corrupt entry (counted and logged)."""
    try:
        key = key_of(call_token(jf, fn, args, kwargs))
    except Uncacheable as e:
        _stats["uncacheable"] += 1
        logger.info("compile cache: '%s' is not cached: %s", jf.name, e)
        return None, None
    d = cache_dir()
    path = os.path.join(d, key + ".json")
    if not os.path.lexists(path):
        _stats["misses"] += 1          # (a path that is not a directory: store() reports it, once)
        return None, key
    try:
        raw = read_bytes(path, "a compile-cache entry", MAX_ENTRY_BYTES)
    except UntrustedFileError as e:    # a FIFO, a device, a directory, a dangling link, too large
        if e.got == "nothing at that path" and not os.path.lexists(path):
            _stats["misses"] += 1      # (removed meanwhile)
            return None, key
        _stats["corrupt"] += 1
        logger.warning("compile cache: corrupt entry for '%s': %s; recompiling", jf.name, e)
        return None, key
    try:
        head, sep, body = raw.partition(b"\n")
        if not sep:
            raise ValueError("the file is truncated (no payload)")
        header = json.loads(head)
        problem = _check_header(header, key, body)
        if problem:
            _stats["stale"] += 1
            logger.info("compile cache: stale entry for '%s' (%s); recompiling", jf.name, problem)
            return None, key
        blob = b""
        if header.get("consts_sha256"):
            size = header.get("consts_bytes")
            if type(size) is not int or size < 0:
                raise ValueError("the header does not say how large the constants file is")
            blob = bytearray(read_bytes(os.path.join(d, key + ".bin"), "a compile-cache constants file", size))
            if hashlib.sha256(blob).hexdigest() != header["consts_sha256"]:
                raise ValueError("the constants file does not match its checksum")
        paused = gc.isenabled()
        gc.disable()                   # decoding makes thousands of small objects: no GC passes meanwhile
        try:
            payload = json.loads(body)
            consts = [np.frombuffer(blob, dtype=np.dtype(dt), count=int(np.prod(shape)), offset=off).reshape(shape)
                      for dt, shape, off in payload["consts"]]
            result = decode_result(payload, consts, fn, args, kwargs)
        finally:
            if paused:
                gc.enable()
    except Stale as e:
        _stats["stale"] += 1
        logger.info("compile cache: stale entry for '%s' (%s); recompiling", jf.name, e)
        return None, key
    except Exception as e:             # noqa: BLE001 - any failure means: do not trust it, rebuild
        _stats["corrupt"] += 1
        logger.warning("compile cache: corrupt entry '%s' for '%s' (%s: %s); recompiling",
                       path, jf.name, type(e).__name__, e)
        return None, key
    _stats["hits"] += 1
    logger.info("compile cache: loaded '%s' from %s (capture skipped)", jf.name, path)
    return result, key


def _check_header(header, key, body: bytes):
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        return "unknown format"
    if header.get("versions") != _versions():
        return f"written by versions {header.get('versions')}, running {_versions()}"
    if header.get("key") != key:
        return "key mismatch"
    if hashlib.sha256(body).hexdigest() != header.get("payload_sha256"):
        raise ValueError("the payload does not match its checksum")
    for f, sha in header.get("sources", {}).items():
        try:
            if _file_sha(f) != sha:
                return f"source file '{f}' changed"
        except UntrustedFileError as e:
            return f"source file '{f}' cannot be read as before ({e.got})"
    return None


def count_capture():
    _stats["captures"] += 1


__all__ = ["enabled", "cache_dir", "load", "store", "stats", "reset_stats", "stable_token", "call_token", "key_of",
           "encode_result", "decode_result", "tensor_paths", "resolve", "Uncacheable", "FORMAT"]
