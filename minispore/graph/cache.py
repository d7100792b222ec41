"""Guards and the compiled-graph cache.

A compiled graph is only valid for the assumptions made while capturing it. Each assumption is a
*guard* (TorchDynamo's word); a call may reuse a cached graph only when all of them hold:

* **tensor inputs**: shape and dtype of every tensor leaf of the arguments (TENSOR_MATCH);
* **Python constants** among the arguments: their values (ints, floats, bools, strings, None,
  dtypes; tuples/lists/dicts compared item by item) - they were baked into the graph;
* **objects** among the arguments (a Cell as `self`, a config object): identity in the key;
* **object state** (`StateGuard`): the plain scalar attributes of those objects, of the objects
  the function's closure/globals hold (one function deep: `grad_fn` -> `net`), and of every object
  in their dict attributes (a Cell's sub-cells), plus the identity of each sub-cell and Parameter:
  `net.set_train(False)`, a changed dropout rate or a replaced Parameter selects another graph.
  A `@lazy_inline` layer is guarded as one unit by the signature lazy_inline reads to share its
  subgraph (layer_state.py): checking it is O(1) while no Cell changes (the Cell state epoch,
  common/state_epoch.py), so a change made through the Cell API is always seen, but a write that
  bypasses it (`cell.__dict__[k] = v`) inside a lazy layer is not;
* **globals and closure variables** the function's code names: a Tensor or other object by
  identity (a rebound global gets a new graph), a Python scalar/string/tuple by value;
* **plain containers** (`_ContainerGroup`): lists, tuples, dicts and sets in those globals and
  closure variables, and lists, tuples and sets held by the guarded objects (`self.coeffs = [v]`)
  or their dict attributes, by their *contents* - `net.coeffs[0] = 3.0` or `TABLE["k"] = 3.0`
  between calls recompiles. Taken after the capture (a capture's own `log.append(...)` runs once
  and does not invalidate the graph); a container the code only appends to (`write_only_names`)
  and one of more than MAX_GUARDED_ITEMS elements are guarded by identity only, as are NumPy
  arrays (reading a large array on every call would cost more than the graph saves: keep arrays
  that change in Tensors, which graphs read by reference);
* **captured tensors**: each still has the shape and dtype it had at capture;
* whatever a capture mode adds (`CaptureResult.guards`): every mode guards the environment
  variables its capture read (capture/environ_reads.py), the ast and bytecode modes the globals
  their interpreted code read.

The cache holds several entries per function (one per guard set; entries with the same key are
tried in turn, so a cell toggled between train and eval keeps both graphs). A miss recompiles and logs the
reason on the `minispore.jit` logger (`logging.getLogger("minispore.jit")`, INFO), e.g.
"recompiling 'step' (test.py:10): argument tensor 0 shape (4, 8) -> (5, 8)". After
`RECOMPILE_LIMIT` compiles (8, as in TorchDynamo; env MINISPORE_JIT_RECOMPILE_LIMIT) the function
warns once and runs eagerly for guard sets it has not seen, instead of thrashing.
"""
from __future__ import annotations

import itertools
import logging
import operator
import os
import types

import numpy as np

from ..backend.registry import current_backend
from ..common.dtype import DType
from ..common.tensor import Tensor
from .ir import Slot
from .layer_state import LayerStateCheck, class_scalar_names, describe as describe_layer

logger = logging.getLogger("minispore.jit")
RECOMPILE_LIMIT = int(os.environ.get("MINISPORE_JIT_RECOMPILE_LIMIT", "8"))

_SCALARS = (bool, int, float, complex, str, bytes, type(None))
_SKIP_IDENTITY = (types.ModuleType, types.BuiltinFunctionType, type)
_FUNCTIONS = (types.FunctionType, types.MethodType, types.BuiltinFunctionType)


# -- object state ---------------------------------------------------------------------------------
_MAX_DICT = 256        # larger dicts (a dataset's index, a cache) are not walked
_DICT_OF = operator.attrgetter("__dict__")
_VALUES = operator.methodcaller("values")     # (an OrderedDict's own order, as iterating it gives keys)
_repeat = itertools.repeat


def _label_text(label):
    """Labels are built lazily as (parent label, key) pairs (a 32-layer model has ~1000 of them and
    only a failure message needs one as text): (("net", "layers"), "0") -> "net.layers.0"."""
    parts = []
    while type(label) is tuple:
        label, k = label
        parts.append(k)
    parts.append(label)
    return ".".join(map(str, reversed(parts)))


def _same(now, was):
    """The equality guards use (that of tuple comparison: identity, then `==`), never raising."""
    if now is was:
        return True
    try:
        return bool(now == was)
    except Exception:            # a scalar replaced by an array: certainly not the same
        return False


class _ResolvedCheck:
    """Scalar attributes of one object read through `getattr` (class attributes: `class C: pos = 0`,
    and scalars the capture created on the object): an instance attribute that later shadows the
    class's value, or a changed class attribute, fails the guard."""

    __slots__ = ("label", "obj", "keys", "vals")

    def __init__(self, label, obj, keys, vals):
        self.label, self.obj, self.keys, self.vals = label, obj, tuple(keys), tuple(vals)

    def failure(self):
        obj = self.obj
        for k, v in zip(self.keys, self.vals):
            now = getattr(obj, k, _MISSING)
            if now is not v and not (type(now) is type(v) and now == v):
                was = "<not set>" if v is _MISSING else repr(v)
                now = "<deleted>" if now is _MISSING else repr(now)
                return f"{_label_text(self.label)}.{k} changed: {was} -> {now}"
        return None

    def failed(self):
        return self.failure() is not None

    def explain(self, i):
        return self.failure()


class _ScalarGroup:
    """The scalar attributes of every object of one layout (every layer's attention cell, say),
    checked in one C-level pass: `map` an itemgetter over their `__dict__`s and compare the list
    with the values at compile time. `explain(i)` words what changed in the i-th object."""

    __slots__ = ("keys", "get", "dicts", "vals", "labels")

    def __init__(self, keys, get):
        self.keys, self.get = keys, get
        self.dicts, self.vals, self.labels = [], [], []

    def failed(self):
        try:
            return list(map(self.get, self.dicts)) != self.vals
        except Exception:            # a deleted attribute (KeyError), an array where a scalar was
            return True

    def explain(self, i, label=None):
        keys = self.keys
        vals = self.vals[i] if len(keys) > 1 else (self.vals[i],)
        return _explain_dict(self.labels[i] if label is None else label, self.dicts[i], keys, vals, (), ())


class _RegistryGroup:
    """Dict attributes (a cell's `_cells` / `_params`) with the same keys and member types: their
    scalar members by value and their object members (sub-cells, Parameters) by identity, checked
    in one C-level pass like `_ScalarGroup`."""

    __slots__ = ("lay", "dicts", "svals", "ids", "labels")

    def __init__(self, lay):
        self.lay = lay
        self.dicts, self.svals, self.ids, self.labels = [], [], [], []

    def failed(self):
        lay = self.lay
        try:
            if lay.sget is not None and list(map(lay.sget, self.dicts)) != self.svals:
                return True
            if lay.iget is not None:
                got = map(lay.iget, self.dicts)
                if lay.flat:
                    got = itertools.chain.from_iterable(got)
                return list(map(id, got)) != self.ids
        except Exception:
            return True
        return False

    def explain(self, i, label=None):
        lay = self.lay
        svals = ((self.svals[i] if len(lay.skeys) > 1 else (self.svals[i],)) if lay.skeys else ())
        n = len(lay.ikeys)
        return _explain_dict(self.labels[i] if label is None else label, self.dicts[i],
                             lay.skeys, svals, lay.ikeys, self.ids[i * n:(i + 1) * n])


def _explain_dict(label, d, skeys, svals, ikeys, ids):
    """The first thing that changed in dict `d` (in the order the fast check would meet it)."""
    for k in skeys:
        if k not in d:
            return f"{_label_text(label)}.{k} was deleted"
    for k, v in zip(skeys, svals):
        if not _same(d[k], v):
            return f"{_label_text(label)}.{k} changed: {v!r} -> {d[k]!r}"
    for k in ikeys:
        if k not in d:
            return f"{_label_text(label)}.{k} was deleted"
    for k, i in zip(ikeys, ids):
        if id(d[k]) != i:
            return f"{_label_text(label)}.{k} was replaced by another object"
    return None


# -- containers: guarded by what they hold -----------------------------------------------------------
MAX_GUARDED_ITEMS = 256    # elements a container may hold (nested ones included) to be guarded by contents


class _TooBig(Exception):
    pass


def _is_container(v) -> bool:
    t = type(v)
    return t is list or t is tuple or t is dict or t is set or t is frozenset


def _contents(v, budget, depth):
    t = type(v)
    if t in _SCALARS:
        return (t, v)
    if t is list or t is tuple or t is set or t is frozenset or (isinstance(v, tuple) and hasattr(v, "_fields")):
        budget[0] -= len(v)
        if budget[0] < 0 or depth > 16:
            raise _TooBig
        return (t, tuple([_contents(x, budget, depth + 1) for x in v]))
    if t is dict:
        budget[0] -= len(v)
        if budget[0] < 0 or depth > 16:
            raise _TooBig
        return (dict, tuple([(_contents(k, budget, depth + 1), _contents(x, budget, depth + 1))
                             for k, x in v.items()]))
    if isinstance(v, DType):
        return ("dtype", v.name)
    if isinstance(v, np.generic):
        return ("np", v.dtype.str, v.item())
    return ("id", id(v))


def content_token(v):
    """A hashable token of `v` for run-time guards: scalars by type and value, plain containers
    (list, tuple, dict, set, frozenset and namedtuples, nested) by their contents - in order, with
    each scalar's type, so `[1]` and `[1.0]` differ - and any other object by identity (Tensors,
    arrays, Cells; their state is guarded elsewhere). A container holding more than
    MAX_GUARDED_ITEMS elements is guarded by identity only: reading it in full on every call would
    cost more than the graph saves (the module docstring says so)."""
    t = type(v)
    if t in _SCALARS:
        return (t, v)
    if _is_container(v) or (isinstance(v, tuple) and hasattr(v, "_fields")):
        try:
            return _contents(v, [MAX_GUARDED_ITEMS], 0)
        except (_TooBig, RecursionError):
            return ("id", id(v))
    if isinstance(v, DType):
        return ("dtype", v.name)
    return ("id", id(v))


def describe_token(tok) -> str:
    """A content_token in words, for recompile messages."""
    if not isinstance(tok, tuple) or len(tok) < 2:
        return repr(tok)
    kind = tok[0]
    if kind == "id":
        return "<not set>" if tok[1] == id(_MISSING) else "an object"
    if kind == "dtype":
        return tok[1]
    if isinstance(kind, type) and kind in _SCALARS:
        return repr(tok[1])
    if kind is dict:
        return "{" + ", ".join(f"{describe_token(k)}: {describe_token(v)}" for k, v in tok[1]) + "}"
    if isinstance(kind, type) and issubclass(kind, (list, tuple, set, frozenset)):
        inner = ", ".join(describe_token(x) for x in tok[1])
        return {list: f"[{inner}]", set: "{" + inner + "}"}.get(kind, f"({inner})")
    return repr(tok)[:120]


def _immutable(tok) -> bool:
    """Whether the value a content token was taken of cannot change in place (a tuple of scalars
    and objects): then the same object means the same token."""
    kind = tok[0]
    if isinstance(kind, type) and issubclass(kind, (tuple, frozenset)):      # (namedtuples too)
        return all(map(_immutable, tok[1]))
    return not (kind is list or kind is dict or kind is set)


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


def _shallow(v):
    """What `_same_shallow` compares a container with: its members as they are now."""
    return (list(v), list(v.values())) if type(v) is dict else list(v)


def _same_shallow(v, copy) -> bool:
    """True when container `v` holds the very objects `copy` recorded, in the same order (C-level
    passes; for a flat container that means the same contents)."""
    if type(v) is dict:
        keys, values = copy
        return len(v) == len(keys) and all(map(operator.is_, v, keys)) and all(map(operator.is_, v.values(), values))
    return len(v) == len(copy) and all(map(operator.is_, v, copy))


class _ContainerGroup:
    """Plain containers the capture may have read - lists, tuples and sets held by the guarded
    objects or their dict attributes, and those in globals and closure variables (dicts too) -
    compared by their contents (`content_token`): `net.coeffs[0] = 3.0` or `TABLE["scale"] = 3.0`
    between calls recompiles.

    Each is read through its holder (the object's `__dict__` and the attribute name), so
    rebinding the attribute is seen too. Checking is C-level in the common case: one pass compares
    the identities of the values (an immutable one - a tuple - is then known unchanged), and each
    mutable one (a list, a dict, a set) is compared member by member by identity with a shallow
    copy; only when that differs, or when it nests further mutable containers, are contents
    compared. The snapshot is taken when the guard is built and again after the capture
    (`StateGuard.note_capture_writes`): a capture that appends to a list runs that side effect
    once, and the graph is reused until the list changes again."""

    __slots__ = ("holders", "keys", "labels", "ids", "toks", "mutable", "copies", "deep")

    def __init__(self):
        self.holders, self.keys, self.labels = [], [], []
        self.ids, self.toks, self.mutable, self.copies, self.deep = [], [], [], {}, set()

    def add(self, label, holder, key):
        self.holders.append(holder)
        self.keys.append(key)
        self.labels.append(label)

    @property
    def dicts(self):                 # (StateGuard._explain walks every group's entries by index)
        return self.holders

    def snapshot(self):
        vals = list(map(dict.get, self.holders, self.keys, _repeat(_MISSING)))
        self.ids = list(map(id, vals))
        self.toks = list(map(content_token, vals))
        self.mutable = [i for i, tok in enumerate(self.toks) if not _immutable(tok)]
        self.copies = {i: _shallow(vals[i]) for i in self.mutable if _is_container(vals[i])}
        # a list holding lists: member identities do not show a change inside them
        self.deep = {i for i in self.mutable
                     if i not in self.copies or not all(map(_immutable, _members(self.toks[i])))}

    def failed(self):
        vals = list(map(dict.get, self.holders, self.keys, _repeat(_MISSING)))
        if list(map(id, vals)) != self.ids:          # something was rebound: compare every value
            return list(map(content_token, vals)) != self.toks
        copies, deep = self.copies, self.deep
        for i in self.mutable:
            v = vals[i]
            if i in deep or not _same_shallow(v, copies[i]):
                if content_token(v) != self.toks[i]:
                    return True
                if i not in deep:
                    copies[i] = _shallow(v)              # equal again (`coeffs[0] = 2.0`): fast next time
        return False

    def explain(self, i, label=None):
        now = content_token(self.holders[i].get(self.keys[i], _MISSING))
        if now == self.toks[i]:
            return None
        return f"{_label_text(self.labels[i])}{_first_difference(self.toks[i], now)}"


def _members(tok):
    """The member tokens of a container's content token (keys and values for a dict)."""
    if tok[0] is dict:
        return [x for kv in tok[1] for x in kv]
    return tok[1] if len(tok) == 2 and type(tok[1]) is tuple else ()


_SEQUENCES = (list, tuple, set, frozenset)


def _first_difference(old, new, path=""):
    """Where two content tokens first differ, in words: "[0] changed: 2.0 -> 3.0"."""
    ko, kn = old[0], new[0]
    if ko is kn and ko is dict:
        okeys, nkeys = [k for k, _ in old[1]], [k for k, _ in new[1]]
        if okeys != nkeys:
            return (f"{path} keys changed: {', '.join(map(describe_token, okeys))} -> "
                    f"{', '.join(map(describe_token, nkeys))}")
        for (k, a), (_, b) in zip(old[1], new[1]):
            if a != b:
                return _first_difference(a, b, f"{path}[{describe_token(k)}]")
    elif ko is kn and isinstance(ko, type) and ko in _SEQUENCES:
        if len(old[1]) != len(new[1]):
            return f"{path} length changed: {len(old[1])} -> {len(new[1])}"
        for j, (a, b) in enumerate(zip(old[1], new[1])):
            if a != b:
                return _first_difference(a, b, f"{path}[{j}]")
    if ko == "id" and kn == "id":
        return f"{path} was replaced by another object"
    return f"{path} changed: {describe_token(old)} -> {describe_token(new)}"


def _class_scalars(names, instance_dict):
    """Scalar attributes an object reads from its class (first class of the MRO that defines each;
    `names` from `class_scalar_names`), unless its own `__dict__` shadows them."""
    keys, vals = [], []
    for k, owner in names:
        if k in instance_dict:
            continue
        v = vars(owner).get(k, _MISSING)
        if type(v) in _SCALARS or isinstance(v, DType):
            keys.append(k)
            vals.append(v)
    return keys, vals


def _getter(keys):
    """itemgetter of `keys` (a value for one key, a tuple for several), None for no keys."""
    return operator.itemgetter(*keys) if keys else None


def _tuple_getter(keys):
    """itemgetter of `keys` that always gives a tuple, None for no keys."""
    if not keys:
        return None
    g = operator.itemgetter(*keys)
    return g if len(keys) > 1 else (lambda d, _g=g: (_g(d),))


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
            if k.startswith("_jit"):
                continue
            if type(v) in _SCALARS or isinstance(v, DType):
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
            if not all(t in _SCALARS or issubclass(t, DType) for t in ts):
                return False
        if regs and not all(issubclass(t, dict) for t in set(map(type, regs))):
            return False
        if self.oget is not None:
            ts = set(map(type, itertools.chain.from_iterable(map(self.oget, ds))))
            if any(t in _SCALARS or issubclass(t, (DType, dict)) for t in ts):
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
            if type(v) in _SCALARS:
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


# a Cell's own dicts: changed through its API (which moves the state epoch) or walked as registries
_CELL_BOOKKEEPING = frozenset(("_params", "_cells", "_params_list", "_forward_hooks", "_forward_pre_hooks", "_flags"))


def _holds_containers(cell) -> bool:
    """Whether a cell or one of its sub-cells holds a plain container (a list, a tuple...)."""
    for _, c in cell.cells_and_names():
        for k, v in c.__dict__.items():
            if _is_container(v) and k not in _CELL_BOOKKEEPING:
                return True
    return False


class StateGuard:
    """Guards the Python state a trace may have read from objects: for each root object (a Cell
    passed as `self`, an object among the arguments, objects the function's closure/globals hold)
    the plain scalar attributes (`training`, a dropout rate, flags) and, through dict attributes
    (a Cell's `_cells` / `_params`), the same for every sub-object plus the identity of each member
    (a replaced Parameter or sub-cell recompiles).

    Built once at compile time, one level of the object tree at a time (breadth first): the
    objects of a level are sorted by layout (class and attribute names; `_ObjectLayout.fits`
    checks that each object's values have the kinds the layout expects) and each layout's objects
    are read with C-level `map`s, so a 32-layer model costs a few dozen Python steps per level
    rather than a dozen per cell. Checking is the same: one `map(itemgetter, dicts)` per layout,
    compared with the values at compile time. Only when one fails does `failure()` walk the
    objects depth first, as the cells nest, to word the first change
    ("net.layers.0.training changed: True -> False").
    """

    def __init__(self, roots):
        self._fast: list = []            # group checks: `failed()` is True when something changed
        self._objects: dict = {}         # object layout -> its _ScalarGroup
        self._registries: dict = {}      # registry layout -> its _RegistryGroup
        self._resolved: dict = {}        # id(object) -> _ResolvedCheck of its class attributes
        self._created: dict = {}         # id(object) -> _ResolvedCheck of attributes the capture created
        self._class_names: dict = {}     # class -> class_scalar_names (this build)
        self._layers: dict = {}          # id(lazy_inline cell) -> LayerStateCheck: guarded as one unit
        self._containers = _ContainerGroup()     # lists, tuples, dicts, sets: by contents
        # containers among the roots (globals and closure variables holding a list, a dict...)
        objects, held = [], set()
        for label, obj in roots:
            if _is_container(obj):
                if id(obj) not in held:
                    held.add(id(obj))
                    self._containers.add(label, {label: obj}, label)
            else:
                objects.append((label, obj))
        roots = objects
        # the roots, for the explanation walk: (label, id, __dict__) - not the objects themselves,
        # so a guard does not keep alive a Cell whose cache holds it
        self._roots = [(label, id(obj), getattr(obj, "__dict__", None)) for label, obj in roots]
        self._index = None               # (objects, registries): id(dict) -> (group, i), on demand
        # every walked object, its attribute names before the capture, its label (note_capture_writes)
        self._objs: list = []
        self._keys: list = []
        self._labels: list = []
        seen: set = set()
        labels, objs = [label for label, _ in roots], [obj for _, obj in roots]
        while objs:
            labels, objs = self._visit_level(labels, objs, seen)
        self._class_names = None
        if self._containers.holders:
            self._containers.snapshot()
            self._fast.append(self._containers)

    def _visit_level(self, labels, objs, seen):
        """Snapshot one level of objects; return the next level (their sub-objects)."""
        ids = list(map(id, objs))
        if len(set(ids)) != len(ids) or not seen.isdisjoint(ids):       # shared objects: snapshot once
            keep = []
            for i, oid in enumerate(ids):
                if oid not in seen:
                    seen.add(oid)
                    keep.append(i)
            labels, objs = [labels[i] for i in keep], [objs[i] for i in keep]
        else:
            seen.update(ids)
        dicts = list(map(getattr, objs, _repeat("__dict__"), _repeat(None)))
        if any(isinstance(d, dict) and "_lazy_inline" in d for d in dicts):
            labels, objs, dicts = self._guard_layers(labels, objs, dicts)
        if list(map(type, dicts)).count(dict) != len(dicts) or max(map(len, dicts), default=0) > _MAX_DICT:
            keep = [i for i, d in enumerate(dicts) if isinstance(d, dict) and len(d) <= _MAX_DICT]
            labels, objs, dicts = [labels[i] for i in keep], [objs[i] for i in keep], [dicts[i] for i in keep]
        if not objs:
            return [], []
        keys = list(map(tuple, dicts))
        classes = list(map(type, objs))
        lkeys = list(zip(classes, keys))
        lays = list(map(_OBJECT_LAYOUTS.get, lkeys))
        if None in lays:
            for i, lay in enumerate(lays):
                if lay is None:
                    # (looked up again: an earlier object of this level may have just made it)
                    lay = _OBJECT_LAYOUTS.get(lkeys[i])
                    if lay is None:
                        lay = _OBJECT_LAYOUTS[lkeys[i]] = _ObjectLayout(dicts[i])
                    lays[i] = lay
        self._objs += objs
        self._keys += keys
        self._labels += labels
        for cls in set(classes):
            names = self._class_names.get(cls)
            if names is None:
                names = self._class_names[cls] = class_scalar_names(cls)
            if names:                    # user classes with scalar class attributes (rare)
                for label, obj, d in zip(labels, objs, dicts):
                    if type(obj) is cls:
                        ckeys, cvals = _class_scalars(names, d)
                        if ckeys:
                            check = self._resolved[id(obj)] = _ResolvedCheck(label, obj, ckeys, cvals)
                            self._fast.append(check)
        reg_dicts, reg_labels = [], []
        for lay, ds, ls in _by_layout(lays, dicts, labels):
            self._snapshot_objects(lay, ds, ls, reg_dicts, reg_labels, exact=False)
        if reg_dicts and max(map(len, reg_dicts)) > _MAX_DICT:
            keep = [i for i, r in enumerate(reg_dicts) if len(r) <= _MAX_DICT]
            reg_dicts, reg_labels = [reg_dicts[i] for i in keep], [reg_labels[i] for i in keep]
        return self._visit_registries(reg_labels, reg_dicts)

    def _guard_layers(self, labels, objs, dicts):
        """@lazy_inline cells (transformer layers) are guarded as one unit each, by the signature
        lazy_inline itself reads to share their subgraph (layer_state.describe, remembered for the
        capture that follows): one walk per layer, and a check that is O(1) while no Cell changes.
        A layer holding state the Cell epoch cannot see (a plain object) is walked as usual."""
        from .lazy_inline import is_lazy
        keep = []
        for i, (obj, d) in enumerate(zip(objs, dicts)):
            if isinstance(d, dict) and "_lazy_inline" in d and is_lazy(obj):
                st = describe_layer(obj)
                # (a list attribute changes in place without the Cell API moving the epoch: a
                # layer holding one is walked, so its containers are guarded by contents)
                if st.structure is not None and not st.untracked and not _holds_containers(obj):
                    check = self._layers[id(obj)] = LayerStateCheck(_label_text(labels[i]), st)
                    self._fast.append(check)
                    continue
            keep.append(i)
        return [labels[i] for i in keep], [objs[i] for i in keep], [dicts[i] for i in keep]

    def _snapshot_objects(self, lay, ds, ls, reg_dicts, reg_labels, exact):
        """Snapshot the scalars of objects of one layout; collect their non-empty dict attributes."""
        svals = list(map(lay.sget, ds)) if lay.sget is not None else None
        regs = list(itertools.chain.from_iterable(map(lay.dget, ds))) if lay.dget is not None else None
        if not exact and not lay.fits(ds, svals, regs):
            # some objects hold other kinds of values under these names (a None that became a
            # Cell...): classify each by its value types instead
            tkeys = list(zip(map(tuple, ds), _value_types(ds)))
            exact_lays = [_EXACT_LAYOUTS.get(k) or _EXACT_LAYOUTS.setdefault(k, _ObjectLayout(d))
                          for k, d in zip(tkeys, ds)]
            for xlay, xds, xls in _by_layout(exact_lays, ds, ls):
                self._snapshot_objects(xlay, xds, xls, reg_dicts, reg_labels, exact=True)
            return
        if lay.okeys:
            add = self._containers.add
            for d, label in zip(ds, ls):
                for k in lay.okeys:
                    if _is_container(d[k]):
                        add((label, k), d, k)
        if svals is not None:
            g = self._objects.get(lay)
            if g is None:
                g = self._objects[lay] = _ScalarGroup(lay.skeys, lay.sget)
                self._fast.append(g)
            g.dicts += ds
            g.vals += svals
            g.labels += ls
        if regs and any(regs):           # (most of a cell's registries are empty: no hooks, no buffers...)
            n = len(lay.dkeys)
            if all(lay.private):
                # registry dicts (`_cells`, `_params`) read as attributes: `self.layers.0`
                labs = itertools.chain.from_iterable(map(_repeat, ls, _repeat(n)))
            else:
                labs = [label if private else (label, k) for label in ls for k, private in zip(lay.dkeys, lay.private)]
            reg_dicts += itertools.compress(regs, regs)
            reg_labels += itertools.compress(labs, regs)

    def _visit_registries(self, labels, dicts):
        """Snapshot dict attributes (member values and identities); return their sub-objects."""
        if not dicts:
            return [], []
        types_ = _value_types(dicts)
        rkeys = list(zip(map(tuple, dicts), types_))
        lays = list(map(_REGISTRY_LAYOUTS.get, rkeys))
        if None in lays:
            for i, lay in enumerate(lays):
                if lay is None:
                    lay = _REGISTRY_LAYOUTS.get(rkeys[i])      # (made by an earlier dict of this level?)
                    if lay is None:
                        lay = _RegistryLayout(dicts[i])
                        if all(map(_type_determined, types_[i])):   # else: classified for this dict only
                            _REGISTRY_LAYOUTS[rkeys[i]] = lay
                    lays[i] = lay
        next_labels, next_objs = [], []
        for lay, ds, ls in _by_layout(lays, dicts, labels):
            if lay.guarded:
                g = self._registries.get(lay)
                if g is None:
                    g = self._registries[lay] = _RegistryGroup(lay)
                    self._fast.append(g)
                g.dicts += ds
                g.labels += ls
                if lay.sget is not None:
                    g.svals += map(lay.sget, ds)
                if lay.iget is not None:
                    got = map(lay.iget, ds)
                    g.ids += map(id, itertools.chain.from_iterable(got) if lay.flat else got)
            for k, get in lay.walk:
                next_objs += map(get, ds)
                next_labels += zip(ls, _repeat(k))
            for k in lay.ckeys:
                for d, label in zip(ds, ls):
                    self._containers.add((label, k), d, k)
        return next_labels, next_objs

    def note_capture_writes(self):
        """Called after the capture: a scalar attribute the capture *created* on an object (it was
        not in the object's `__dict__` before) was a side effect of capturing, so the graph may
        have baked what the object looked like without it. Guard that it is still not set (an
        attribute shadowing a class attribute is already guarded through `getattr`).

        Containers are snapshotted again now: the graph holds what the capture read, and a side
        effect of the capture (`log.append(...)`) runs once - it must not fail the next call."""
        if self._containers.holders:
            self._containers.snapshot()
        objs, before = self._objs, self._keys
        if list(map(tuple, map(_DICT_OF, objs))) != before:     # usual case: no object gained a name
            for label, obj, keys in zip(self._labels, objs, before):
                d = obj.__dict__
                if tuple(d) == keys:
                    continue
                keys = set(keys)
                created = [k for k, v in d.items() if k not in keys
                           and not k.startswith("_jit") and (type(v) in _SCALARS or isinstance(v, DType))]
                resolved = self._resolved.get(id(obj))
                if created and resolved is not None:     # those already guarded via getattr
                    created = [k for k in created if k not in resolved.keys]
                if created:
                    check = _ResolvedCheck(label, obj, created, [_MISSING] * len(created))
                    self._fast.append(check)
                    self._created[id(obj)] = check
        self._objs = self._keys = self._labels = None   # not needed any more: do not keep them alive

    def failure(self):
        """None while the guarded state is as at compile time, else the first change, worded."""
        for g in self._fast:
            if g.failed():
                return self._explain()
        return None

    # -- wording a failure: the first change in depth-first order, as the cells nest ------------
    def _explain(self):
        if self._index is None:
            self._index = ({id(d): (g, i) for g in self._objects.values() for i, d in enumerate(g.dicts)},
                           {id(d): (g, i) for g in self._registries.values() for i, d in enumerate(g.dicts)})
        seen: dict = {}              # id(object) -> None, in depth-first order
        for label, oid, d in self._roots:
            reason = self._explain_object(label, oid, d, seen)
            if reason is not None:
                return reason
        for oid in seen:             # then the attributes the capture created, in the same order
            check = self._created.get(oid)
            reason = check.failure() if check is not None else None
            if reason is not None:
                return reason
        for g in self._fast:         # something the walk no longer reaches (a dict attribute rebound)
            for i in range(len(getattr(g, "dicts", (0,)))):
                reason = g.explain(i)
                if reason is not None:
                    return reason
        return None

    def _explain_object(self, label, oid, d, seen):
        if oid in seen:
            return None
        seen[oid] = None
        layer = self._layers.get(oid)
        if layer is not None:
            return layer.explain()
        if not isinstance(d, dict) or len(d) > _MAX_DICT:
            return None
        objects, registries = self._index
        check = self._resolved.get(oid)
        reason = check.failure() if check is not None else None
        if reason is not None:
            return reason
        for k, r in list(d.items()):
            hit = registries.get(id(r)) if isinstance(r, dict) and not k.startswith("_jit") else None
            if hit is None:
                continue
            g, i = hit
            rlabel = label if k.startswith("_") else f"{label}.{k}"
            reason = g.explain(i, rlabel)
            if reason is not None:
                return reason
            for mk, _ in g.lay.walk:
                m = r.get(mk, _MISSING)
                if m is not _MISSING:
                    reason = self._explain_object(f"{rlabel}.{mk}", id(m), getattr(m, "__dict__", None), seen)
                    if reason is not None:
                        return reason
        hit = objects.get(id(d))
        return hit[0].explain(hit[1], label) if hit is not None else None


def _value_types(dicts):
    """The types of each dict's values, as a tuple per dict (C-level: no Python step per dict)."""
    return list(map(tuple, map(map, _repeat(type), map(_VALUES, dicts))))


def _by_layout(lays, dicts, labels):
    """(layout, its dicts, their labels) for each distinct layout, in order of first appearance."""
    distinct = dict.fromkeys(lays)
    if len(distinct) == 1:
        yield lays[0], dicts, labels
        return
    for lay in distinct:
        sel = list(itertools.compress(range(len(lays)), map(operator.is_, lays, _repeat(lay))))
        yield lay, list(map(dicts.__getitem__, sel)), list(map(labels.__getitem__, sel))


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
        self.write_only = write_only_names(code) if code is not None else frozenset()

    def objects(self):
        """(label, value) of the globals and closure variables that hold objects or functions."""
        out = []
        for n in self.global_names:
            v = self.globals.get(n)
            if _is_stateful(v) or isinstance(v, _FUNCTIONS):
                out.append((n, v))
        for name, cell in self.closure:
            try:
                v = cell.cell_contents
            except ValueError:
                continue
            if _is_stateful(v) or isinstance(v, _FUNCTIONS):
                out.append((name, v))
        return out

    def containers(self):
        """(label, value) of the globals and closure variables that hold plain containers (a list,
        a dict...): StateGuard compares their contents, the key only their identity."""
        out, writes = [], self.write_only
        for n in self.global_names:
            v = self.globals.get(n)
            if _is_container(v) and n not in writes:
                out.append((n, v))
        for name, cell in self.closure:
            try:
                v = cell.cell_contents
            except ValueError:
                continue
            if _is_container(v) and name not in writes:
                out.append((name, v))
        return out

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
           "RECOMPILE_LIMIT", "logger"]
