"""The one walk of a Cell tree (every cell's layout, then its state, depth first), and every layout
by which the guards read objects' attributes: each attribute is classified here, once per layout.

A Cell tree's Python state is read by these clients, all through this module:

* lazy_inline's layer signature and jit's guard on it (guards/layer_state.py: `describe`), which
  compare `signature` in memory - in O(1) while the Cell state epoch has not moved;
* the compile cache's key (guards/stable.py), which renders the same per-cell facts in a form that
  is equal across processes (names, classes, shapes and dtypes instead of identities), visiting
  the cells in the walk's order (`subcells`);
* the recompile messages, which walk again with the same layouts to name what changed;
* jit's StateGuard (guards/state.py), which snapshots any object a graph may have read level by
  level and checks each level with C-level maps: it reads objects by the `_ObjectLayout` and
  `_RegistryLayout` at the end of this module (they say where its classification differs), and a
  `@lazy_inline` layer by the walk's signature (`holds_containers` tells when it cannot).

A *layout* (`Layout`) is how to read the cells of one class with one set of attribute names and
value types; it classifies each attribute once (by the rule of guards/rule.py) and is then
applied to every such cell with C-level getters (a model's layers share a handful of layouts).

`walk(cell)` gives (own, signature, untracked) in one pass:

* `own`: [(relative name, Tensor)] the tree owns: each cell's Parameters, then its other Tensor
  attributes, depth first;
* `signature`: a tuple that is equal for two trees exactly when their Python state would trace
  the same graph, as far as that state can tell. Per cell: its layout (class and attribute
  layout), its plain attribute values (`training`, a dropout rate, flags, tuples of them), dtypes
  by name, other attributes (functions, shared config objects) by identity, its flags, its user
  class's scalar class attributes, then each sub-cell's name followed by that sub-cell's part.
  None when a cell has hooks or a custom `bprop` (such a tree is never shared as one subgraph);
* `untracked`: True when part of the state can change without moving the Cell state epoch (a
  plain Python object held by a cell, a scalar class attribute of a user class).
"""
from __future__ import annotations

import itertools
import operator
import types

import numpy as np

from ...common.dtype import DType
from ...common.tensor import Tensor
from .contents import _is_container
from .rule import CELL_BOOKKEEPING, CONTAINERS, SCALARS, VOLATILE_ATTRS, is_jit_private

_IMMUTABLE_OBJECTS = (types.FunctionType, types.BuiltinFunctionType, types.ModuleType, type)


def tuple_getter(keys):
    """A getter of `keys` from a dict that always gives a tuple (empty for no keys)."""
    if not keys:
        return lambda d: ()
    if len(keys) == 1:
        k = keys[0]
        return lambda d, _k=k: (d[_k],)
    return operator.itemgetter(*keys)


class Layout:
    """Built once per (class, attribute names, value types). The attributes by kind: plain values
    (`scalar_keys`, read in one C-level pass by `scalar_get`), dtypes, Tensors, other objects, and
    jit's own (`jit_keys`: skipped in memory, described on disk); the registries and volatile
    counters of guards/rule.py are not attributes. `stable_digest` is filled in by guards/stable.py
    (the layout's process-independent name, computed once)."""

    __slots__ = ("cls", "scalar_keys", "scalar_get", "dtype_keys", "tensor_keys", "other_keys", "jit_keys",
                 "untracked", "holds_containers", "class_scalars", "has_bprop", "stable_digest", "__weakref__")

    def __init__(self, d, cls):
        self.cls = cls
        self.has_bprop = hasattr(cls, "bprop")
        scalars, dtypes, tensors, others, jits = [], [], [], [], []
        untracked = containers = False
        for k, v in d.items():
            if k in CELL_BOOKKEEPING:
                continue
            if type(v) in CONTAINERS:
                containers = True
            if k in VOLATILE_ATTRS:
                continue
            if is_jit_private(k):
                jits.append(k)
                continue
            tv = type(v)
            if tv in SCALARS:
                scalars.append(k)
            elif isinstance(v, Tensor):
                tensors.append(k)
            elif isinstance(v, DType):
                dtypes.append(k)
            else:
                others.append(k)
                if _mutable_object(v):
                    untracked = True
        self.scalar_keys = tuple(scalars)
        self.scalar_get = tuple_getter(self.scalar_keys)
        self.dtype_keys = tuple(dtypes)
        self.tensor_keys = tuple(tensors)
        self.other_keys = tuple(others)
        self.jit_keys = tuple(jits)
        self.class_scalars = class_scalar_names(cls)
        self.untracked = untracked or bool(self.class_scalars)
        # a plain list, tuple, dict or set among the attributes (jit's own included): it changes in
        # place without moving the Cell state epoch, so StateGuard guards such a tree by contents
        self.holds_containers = containers
        self.stable_digest = None


def _mutable_object(v):
    """A plain Python object whose attributes may change without any Cell API call."""
    if isinstance(v, (tuple, list)):
        return any(_mutable_object(x) for x in v)
    return hasattr(v, "__dict__") and not isinstance(v, (Tensor, _IMMUTABLE_OBJECTS))


_CLASS_SCALARS: dict = {}      # class -> (signature, ((name, owner class), ...))


def class_scalar_names(cls):
    """((name, owner class), ...) of the scalar class attributes instances of `cls` read, for user
    classes only (minispore's own class attributes are constants of the library). Cached per class
    (every cell of a 32-layer model would otherwise walk the same MRO again); the entry is rebuilt
    when any class in the MRO gains or loses an attribute. Shared with jit's StateGuard."""
    mro = cls.__mro__
    sig = tuple(len(vars(c)) for c in mro)
    hit = _CLASS_SCALARS.get(cls)
    if hit is not None and hit[0] == sig:
        return hit[1]
    names, seen = [], set()
    for c in mro:
        if c is object or getattr(c, "__module__", "").partition(".")[0] in ("minispore", "builtins"):
            continue
        for k, v in vars(c).items():
            if k.startswith("__") or is_jit_private(k) or k in seen:
                continue
            seen.add(k)
            if type(v) in SCALARS or isinstance(v, DType):
                names.append((k, c))
    _CLASS_SCALARS[cls] = (sig, tuple(names))
    return _CLASS_SCALARS[cls][1]


_layouts: dict = {}     # (class, attribute names, attribute types) -> Layout
_by_class: dict = {}    # class -> [(attribute names, attribute types, Layout)]


def layout_of(c, d):
    """The Layout of cell `c` (its __dict__ `d`). A class has one or two layouts: comparing the
    names and types tuples with those few directly is cheaper than hashing them into a dict key
    (this runs for every sub-cell of every layer)."""
    tc = type(c)
    keys, types_ = tuple(d), tuple(map(type, d.values()))
    known = _by_class.get(tc)
    if known is not None:
        for k, t, lay in known:
            if k == keys and t == types_:
                return lay
    lkey = (tc, keys, types_)
    lay = _layouts.get(lkey)
    if lay is None:
        lay = _layouts[lkey] = Layout(d, tc)
    known = _by_class.setdefault(tc, [])
    if len(known) < 8:                  # (a class with many layouts falls back to the dict)
        known.append((keys, types_, lay))
    return lay


def identity_token(v):
    """A hashable stand-in for an attribute that is not a scalar, dtype or tensor: tuples/lists of
    constants by value, anything else by identity (a shared function or config object is equal
    for every layer that holds it; a per-layer object makes the layers differ)."""
    tv = type(v)
    if tv in SCALARS:
        return v
    if tv is tuple or tv is list:
        return (tv.__name__, tuple([identity_token(x) for x in v]))
    if isinstance(v, DType):
        return ("dtype", v.name)
    return ("id", id(v))


def walk(cell):
    """(own, signature, untracked) in ONE depth-first walk (explicit stack, same order as recursion;
    see the module docstring).

    This runs once per layer per compile over every sub-cell, on a model just built (its cells'
    dicts are cold in the CPU caches), so the common cell - no hooks, no custom bprop, a layout
    seen before - takes the shortest path: `_plain_call` (Cell keeps it False whenever hooks,
    to_float or a bprop are in play) stands for the hook/bprop checks."""
    own, sig, seen = [], [], set()
    append, own_append, seen_add = sig.append, own.append, seen.add
    untracked = False
    stack = [(cell, "")]
    pop, push = stack.pop, stack.append
    while stack:
        c, prefix = pop()
        if prefix is None:                     # a sub-cell's attribute name, in walk order
            append(c)
            continue
        d = c.__dict__
        if not d.get("_plain_call") and (d.get("_forward_hooks") or d.get("_forward_pre_hooks")
                                         or hasattr(type(c), "bprop")):
            return own, None, True
        lay = layout_of(c, d)
        append(lay)           # the layout object stands for its key: one per key, hashed by identity
        append(lay.scalar_get(d))
        if lay.dtype_keys:
            for k in lay.dtype_keys:
                append(d[k].name)
        if lay.other_keys:
            for k in lay.other_keys:
                append(identity_token(d[k]))
        flags = d.get("_flags")
        if flags:
            append(tuple(flags.items()))
        if lay.untracked:
            untracked = True
            for k, owner in lay.class_scalars:
                append((k, d[k] if k in d else vars(owner).get(k)))
        if lay.tensor_keys:
            for k in lay.tensor_keys:
                v = d[k]
                if id(v) not in seen:
                    seen_add(id(v))
                    own_append((prefix + k, v))
        params = d["_params"]
        if params:
            for k, p in params.items():
                if p is not None and id(p) not in seen:
                    seen_add(id(p))
                    own_append((prefix + k, p))
        cells = d["_cells"]
        if cells:
            # pushed in reverse so they pop in order; each name is recorded before its subtree
            for k, sub in reversed(cells.items()):
                if sub is not None:
                    push((sub, f"{prefix}{k}."))
                push((k, None))
    return own, tuple(sig), untracked


def subcells(cell):
    """(relative name, cell) of `cell` and each sub-cell below it, depth first in attribute order,
    a cell reached twice (shared by two parents) only the first time. The order of `walk`, for the
    clients that describe each cell once (guards/stable.py's key)."""
    stack, visited = [("", cell)], set()
    while stack:
        name, c = stack.pop()
        if id(c) in visited:
            continue
        visited.add(id(c))
        yield name, c
        prefix = name + "." if name else ""
        for k, sub in reversed(c.__dict__["_cells"].items()):
            if sub is not None:
                stack.append((prefix + k, sub))


def holds_containers(signature) -> bool:
    """Whether a tree with this `walk` signature holds a plain container in some cell (read off
    the layouts in the signature: the layout is keyed by the attributes' types)."""
    return any(lay.holds_containers for lay in signature if type(lay) is Layout)


def first_difference(where, cell, old, new):
    """Name the attribute behind the first element where two signatures of `cell` differ."""
    j = next((i for i, (a, b) in enumerate(zip(old, new)) if a != b), min(len(old), len(new)))
    # walk the tree again, counting elements as walk() emits them, to find the cell and attribute at j
    pos = 0
    stack = [(cell, "")]
    while stack:
        c, prefix = stack.pop()
        if type(c) is str:
            if pos == j:
                return f"{where}: the sub-cells changed near '{prefix or c}'"
            pos += 1
            continue
        d = c.__dict__
        lay = layout_of(c, d)
        path = f"{where}.{prefix}".rstrip(".")
        if pos == j:
            return f"{path}: its attributes changed (names or types)"
        pos += 1
        if pos == j:
            olds = old[j] if j < len(old) else ()
            news = new[j] if j < len(new) else ()
            for k, a, b in zip(lay.scalar_keys, olds, news):
                if a != b or type(a) is not type(b):
                    return f"{path}.{k} changed: {a!r} -> {b!r}"
            return f"{path}: a plain attribute changed"
        pos += 1
        for k in lay.dtype_keys + lay.other_keys:
            if pos == j:
                return f"{path}.{k} changed or was replaced by another object"
            pos += 1
        if d.get("_flags"):
            if pos == j:
                return f"{path}: its flags changed"
            pos += 1
        if lay.untracked:
            for k, _owner in lay.class_scalars:
                if pos == j:
                    a, b = old[j][1] if j < len(old) else None, new[j][1] if j < len(new) else None
                    return f"{path}.{k} changed: {a!r} -> {b!r}"
                pos += 1
        for k, sub in reversed(d["_cells"].items()):
            if sub is not None:
                stack.append((sub, f"{prefix}{k}."))
            stack.append((k, None))
    return f"{where}: its Python state changed"


# -- the layouts of any object, read level by level by StateGuard (guards/state.py) -------------------
# StateGuard reads more than a Cell tree: any object a graph may have read (a config object, a
# closure's object), whose dict attributes are read as registries. Its classification differs from
# `Layout`'s where the guard needs it: dtypes count as scalars, dict attributes are registries (a
# Cell's `_cells` and `_params` among them), and the volatile attributes of guards/rule.py are
# guarded too (`_hook_id` and `_plain_call` are how a registered hook fails the guard: hook
# functions themselves are not state).
_SKIP_IDENTITY = (types.ModuleType, types.BuiltinFunctionType, type)
_FUNCTIONS = (types.FunctionType, types.MethodType, types.BuiltinFunctionType)


def _getter(keys):
    """itemgetter of `keys` (a value for one key, a tuple for several), None for no keys."""
    return operator.itemgetter(*keys) if keys else None


def _tuple_getter(keys):
    """`tuple_getter(keys)`, None for no keys (a layout with nothing of that kind to read)."""
    return tuple_getter(keys) if keys else None


def _is_stateful(v):
    return hasattr(v, "__dict__") and not isinstance(v, (Tensor, np.ndarray, _FUNCTIONS, _SKIP_IDENTITY))


_TYPE_DETERMINED: dict = {}    # type -> whether `_is_stateful` / isinstance depend on the type only


def _type_determined(tp):
    """True when classifying a value (`isinstance`, `hasattr(v, "__dict__")`) depends only on its
    type - so a layout keyed by value types may be reused. Not for proxies that fake `__class__`,
    customize attribute lookup, or answer `__dict__` from `__getattr__`."""
    r = _TYPE_DETERMINED.get(tp)
    if r is None:
        mro = getattr(tp, "__mro__", ())
        r = (type(tp) is type and tp.__getattribute__ is object.__getattribute__
             and not any("__class__" in vars(c) for c in mro if c is not object)
             and (any("__dict__" in vars(c) for c in mro) or not hasattr(tp, "__getattr__")))
        _TYPE_DETERMINED[tp] = r
    return r


class _ObjectLayout:
    """What StateGuard reads from objects of one class with given attribute names: the scalar
    attribute names (and an itemgetter of them), the dict attributes (`dget` gives them as a
    tuple; `private` says, per dict, whether it is private - its members are read as the object's
    own attributes, `self.layers.0` - or public, `self.table.key`) and the other attributes
    (`oget`). Made from one object; `fits` checks that other objects' values have the same kinds."""

    __slots__ = ("skeys", "sget", "dkeys", "dget", "private", "oget", "okeys")

    def __init__(self, d):
        skeys, dkeys, okeys = [], [], []
        for k, v in d.items():
            if is_jit_private(k):
                continue
            if type(v) in SCALARS or isinstance(v, DType):
                skeys.append(k)
            elif isinstance(v, dict):
                dkeys.append(k)
            else:
                okeys.append(k)
        self.skeys, self.sget = tuple(skeys), _getter(skeys)
        self.dkeys, self.dget = tuple(dkeys), _tuple_getter(dkeys)
        self.private = tuple(k.startswith("_") for k in dkeys)
        self.oget = _tuple_getter(okeys)
        # where containers may be (a list, a tuple, a set: checked per object, `fits` does not
        # look at these kinds); containers inside dict attributes are found by _RegistryLayout
        self.okeys = tuple(okeys)

    def fits(self, ds, svals, regs):
        """Whether objects with these `__dict__`s (and scalar values / dict attributes already
        read) hold a scalar at each scalar name, a dict at each dict name and neither elsewhere -
        checked on the set of their types, so without a Python step per object."""
        if self.sget is not None:
            ts = set(map(type, itertools.chain.from_iterable(svals) if len(self.skeys) > 1 else svals))
            if not all(t in SCALARS or issubclass(t, DType) for t in ts):
                return False
        if regs and not all(issubclass(t, dict) for t in set(map(type, regs))):
            return False
        if self.oget is not None:
            ts = set(map(type, itertools.chain.from_iterable(map(self.oget, ds))))
            if any(t in SCALARS or issubclass(t, (DType, dict)) for t in ts):
                return False
        return True


class _RegistryLayout:
    """What StateGuard reads from a dict attribute with given keys and value types: scalar members
    (by value), object members (by identity) and, of those, the ones to walk into (not Tensors):
    ((key, an itemgetter of it), ...)."""

    __slots__ = ("skeys", "sget", "ikeys", "iget", "flat", "guarded", "walk", "ckeys")

    def __init__(self, d):
        skeys, ikeys, walk, ckeys = [], [], [], []
        for k, v in d.items():
            if type(v) in SCALARS:
                skeys.append(k)
            elif isinstance(v, Tensor) or _is_stateful(v):
                ikeys.append(k)
                if not isinstance(v, Tensor):
                    walk.append((k, operator.itemgetter(k)))
            elif _is_container(v):
                ckeys.append(k)              # guarded by contents (_ContainerGroup)
        self.skeys, self.sget = tuple(skeys), _getter(skeys)
        self.ikeys, self.iget = tuple(ikeys), _getter(ikeys)
        self.flat = len(ikeys) > 1           # iget gives a tuple of members, not one member
        self.guarded = bool(skeys or ikeys)
        self.walk = tuple(walk)
        self.ckeys = tuple(ckeys)


# What the guard reads depends only on (class, attribute names, kinds of values), and a model's
# cells share a few layouts (every layer's attention is alike): each attribute is classified once
# per layout, not once per cell.
_OBJECT_LAYOUTS: dict = {}     # (class, attribute names) -> _ObjectLayout (its kinds checked per use)
_EXACT_LAYOUTS: dict = {}      # (attribute names, value types) -> _ObjectLayout
_REGISTRY_LAYOUTS: dict = {}   # (keys, value types) -> _RegistryLayout


_VALUES = operator.methodcaller("values")     # (an OrderedDict's own order, as iterating it gives keys)


def _value_types(dicts):
    """The types of each dict's values, as a tuple per dict (C-level: no Python step per dict)."""
    return list(map(tuple, map(map, itertools.repeat(type), map(_VALUES, dicts))))


__all__ = ["Layout", "layout_of", "walk", "subcells", "holds_containers", "first_difference",
           "class_scalar_names", "identity_token", "tuple_getter"]
