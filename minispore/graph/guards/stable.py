"""The process-independent rendering of what a graph depends on: `stable_token`, hashed into the
compile cache's key (graph/compile_cache/key.py).

It describes the same facts the in-memory guards compare (guards/rule.py says which), in a form
equal in every process for the same program: values instead of identities, a Cell as the walk of
guards/walk.py sees it (layouts, plain attributes, sub-cells) with its parameters' names, shapes
and dtypes, functions by their code and the globals they name, NumPy arrays by a SHA-256 of their
bytes. What cannot be described so raises `Uncacheable` (the graph is then compiled in memory
only). Computed once per compile, never per call.
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
import hashlib
import logging
import math
import os
import pathlib
import re
import sys
import types
import uuid

import numpy as np

from ...common.dtype import DType
from ...common.tensor import Parameter, Tensor
from ..ir import Slot
from .code_reads import code_names, write_only_names
from .rule import CONTAINERS, JSON_SCALARS
from .walk import layout_of, subcells


class Uncacheable(Exception):
    """This graph or call cannot be stored safely (an attribute or object the format cannot express)."""


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

_CONTAINERS = CONTAINERS
_VALUE_TYPES = (complex, range, pathlib.PurePath, decimal.Decimal, fractions.Fraction, datetime.date,
                datetime.time, datetime.timedelta, uuid.UUID)
_SCALARS = JSON_SCALARS          # (a complex number is one of the _VALUE_TYPES: JSON cannot hold it)
_SCALAR_SET = frozenset(_SCALARS)


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
    writes = write_only_names(code) if code is not None and not framework else ()
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


def _is_framework(code) -> bool:
    # (user_code.py imports only common/: the one answer to "whose code is it", below every mode)
    from ..trace.user_code import _is_internal
    return _is_internal(code)


def _described_globals(f):
    """(name, value) of the globals `f`'s code names (nested functions included) that the key
    describes: all but modules and classes, which are described by the attributes the code names."""
    code = getattr(f, "__code__", None)
    g = getattr(f, "__globals__", None)
    if code is None or g is None:
        return [], (), {}
    names = code_names(code, set())
    return [(n, g[n]) for n in sorted(names) if n in g], names, g


def _globals_token(f, depth, seen):
    out = []
    values, names, _g = _described_globals(f)
    # a container the code only appends to (`LOG.append(...)`) cannot have shaped the graph: its
    # contents are left out (else a log filled by an earlier call would change the key)
    writes = write_only_names(f.__code__) if values else ()
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
    """Every sub-cell's layout (guards/walk.py: class, attribute names - `_layout_digest`) and
    `_class_token`, plain attribute values, every other attribute (dtypes, tensors, containers,
    arrays, configs, functions, plain objects, jit's own: `stable_token`), its flags, and the
    names, shapes and dtypes of its parameters, in the cells' own attribute order. A cell met
    again (through another closure) is described once per token: `["same", n]`."""
    memo = _walk.cells
    k = memo.get(id(cell))
    if k is not None:
        return ["same", k]
    memo[id(cell)] = len(memo)
    parts, classes = [], []
    for name, c in subcells(cell):
        d = c.__dict__
        if d.get("_forward_hooks") or d.get("_forward_pre_hooks"):
            raise Uncacheable(f"cell '{name or type(c).__name__}' has forward hooks (Python functions)")
        tc = type(c)
        if tc not in _walk.classes:
            classes.append(_class_token(tc))
        lay = layout_of(c, d)
        digest = lay.stable_digest or _layout_digest(lay)
        attrs = [lay.scalar_get(d)]
        for k in lay.dtype_keys + lay.tensor_keys + lay.other_keys + lay.jit_keys:
            try:
                attrs.append((k, stable_token(d[k], _ATTR_DEPTH, seen)))
            except Uncacheable as e:
                raise Uncacheable(f"attribute '{name + '.' if name else ''}{k}' of a {tc.__qualname__}: {e}") from None
        flags = d.get("_flags")
        if flags:
            attrs.append(("_flags", stable_token(dict(flags), _ATTR_DEPTH, seen)))
        params = [(k, p._data.shape, p.dtype.name, p.requires_grad)
                  for k, p in d["_params"].items() if p is not None]
        parts.append((name, digest, attrs, params))
    return ["cell", parts, classes]


def _layout_digest(lay):
    """A layout's process-independent name in 32 hex digits: its class (module, name, construct's
    code hash) and attribute names by kind. The key is a hash of the token's repr, and a long model
    repeats the same few layouts per layer, so spelling them out each time made the repr the
    costliest part of computing the key. Computed once per layout."""
    cls = lay.cls
    construct = getattr(cls, "construct", None)
    code = getattr(getattr(construct, "fn", construct), "__code__", None)
    class_id = (cls.__module__, cls.__qualname__, code_hash(code) if code is not None else "")
    names = (lay.scalar_keys, lay.dtype_keys + lay.tensor_keys + lay.other_keys + lay.jit_keys)
    lay.stable_digest = hashlib.sha256(repr((class_id,) + names).encode()).hexdigest()[:32]
    return lay.stable_digest


__all__ = ["stable_token", "code_hash", "Uncacheable", "MAX_KEY_ITEMS", "MAX_KEY_ARRAY_BYTES", "OBJECT_DEPTH"]
