"""The Python state of a cell tree, as one hashable signature (used by lazy_inline and jit guards).

`describe(cell)` walks a cell and its sub-cells once and returns a `LayerState`:

* `own`: [(relative name, Tensor)] the tree owns: each cell's Parameters, then its other Tensor
  attributes, depth first;
* `structure`: a tuple that is equal for two trees exactly when their Python state would trace
  the same graph, as far as that state can tell: per cell its class and attribute layout, its plain
  attributes (`training`, a dropout rate, flags, tuples of them), dtypes by name, other attributes
  (functions, shared config objects) by identity, and the sub-cells' names. It is None when a cell
  has hooks or a custom `bprop` (such a tree is never shared as one subgraph);
* `epoch`: the Cell state epoch when it was read (common/state_epoch.py);
* `untracked`: True when part of the state can change without moving the epoch (a plain Python
  object held by a cell, a scalar class attribute of a user class).

lazy_inline needs the signature of every layer when it is called during a capture (two layers with
equal signatures share one subgraph), and jit's state guard needs the same facts before the
capture (a guard is a snapshot of the state a graph was traced with). Both ask `describe`, which
remembers the answer per cell while the epoch does not move: one walk per layer per compile.

`LayerStateCheck` is that snapshot as a guard: while the epoch is unchanged (and nothing in the
tree is untracked) it passes in O(1); otherwise it describes the tree again and compares, and names
the first difference ("layers.3.attention.attn_dropout.training changed: True -> False").
"""
from __future__ import annotations

import itertools
import operator
import types

from ..common.dtype import DType
from ..common.state_epoch import EPOCH
from ..common.tensor import Tensor

_SCALARS = (bool, int, float, complex, str, bytes, type(None))
# bookkeeping counters that change without changing what a cell computes
_SKIP_ATTRS = frozenset(("_hook_id", "_default_name_id", "_casting", "_attached", "_plain_call"))
_REGISTRIES = frozenset(("_params", "_cells", "_params_list", "_forward_hooks", "_forward_pre_hooks", "_flags"))
_IMMUTABLE_OBJECTS = (types.FunctionType, types.BuiltinFunctionType, types.ModuleType, type)


class LayerState:
    """`token` stands for `structure` in keys: equal structures get the same small int (hashing a
    ~45-element tuple again at every dictionary lookup would cost more than the lookup)."""

    __slots__ = ("cell", "own", "structure", "epoch", "untracked", "token")

    def __init__(self, cell, own, structure, epoch, untracked):
        self.cell, self.own, self.structure, self.epoch, self.untracked = cell, own, structure, epoch, untracked
        self.token = None if structure is None else _token_of(structure)

    def own_ids(self):
        return tuple([id(t) for _, t in self.own])


_TOKENS: dict = {}      # structure -> its token
_NEXT_TOKEN = itertools.count(1)        # never reused: a token always means one structure


def _token_of(structure):
    token = _TOKENS.get(structure)
    if token is None:
        if len(_TOKENS) > 4096:             # (a long-lived process: keep it bounded)
            _TOKENS.clear()
        token = _TOKENS[structure] = next(_NEXT_TOKEN)
    return token


# -- layouts: how to read the cells of one class with one set of attribute names and types ------------
class _Layout:
    """Built once per (class, attribute names, value types); applied to every cell of that layout
    with C-level getters (a model's layers share a handful of layouts)."""

    __slots__ = ("cls", "scalar_keys", "scalar_get", "dtype_keys", "tensor_keys", "other_keys", "untracked",
                 "class_scalars", "has_bprop", "__weakref__")

    def __init__(self, d, cls):
        self.cls = cls
        self.has_bprop = hasattr(cls, "bprop")
        scalars, dtypes, tensors, others = [], [], [], []
        untracked = False
        for k, v in d.items():
            tv = type(v)
            if k in _REGISTRIES or k in _SKIP_ATTRS or k.startswith("_jit"):
                continue
            if tv in _SCALARS:
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
        self.scalar_get = operator.itemgetter(*scalars) if len(scalars) > 1 else (
            (lambda dd, _k=scalars[0]: (dd[_k],)) if scalars else (lambda dd: ()))
        self.dtype_keys = tuple(dtypes)
        self.tensor_keys = tuple(tensors)
        self.other_keys = tuple(others)
        self.class_scalars = class_scalar_names(cls)
        self.untracked = untracked or bool(self.class_scalars)


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
            if k.startswith("__") or k.startswith("_jit") or k in seen:
                continue
            seen.add(k)
            if type(v) in _SCALARS or isinstance(v, DType):
                names.append((k, c))
    _CLASS_SCALARS[cls] = (sig, tuple(names))
    return _CLASS_SCALARS[cls][1]


_layouts: dict = {}     # (class, attribute names, attribute types) -> _Layout
_by_class: dict = {}    # class -> [(attribute names, attribute types, _Layout)]


def _layout_of(c, d):
    """The _Layout of cell `c` (its __dict__ `d`). A class has one or two layouts: comparing the
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
        lay = _layouts[lkey] = _Layout(d, tc)
    known = _by_class.setdefault(tc, [])
    if len(known) < 8:                  # (a class with many layouts falls back to the dict)
        known.append((keys, types_, lay))
    return lay


def _token(v):
    """A hashable stand-in for an attribute that is not a scalar, dtype or tensor: tuples/lists of
    constants by value, anything else by identity (a shared function or config object is equal
    for every layer that holds it; a per-layer object makes the layers differ)."""
    tv = type(v)
    if tv in _SCALARS:
        return v
    if tv is tuple or tv is list:
        return (tv.__name__, tuple([_token(x) for x in v]))
    if isinstance(v, DType):
        return ("dtype", v.name)
    return ("id", id(v))


# -- the walk -------------------------------------------------------------------------------------------
def _walk(cell):
    """(own, structure, untracked) in ONE depth-first walk (explicit stack, same order as recursion).

    Per cell the structure holds: its layout, its scalar values, its dtype names, its other
    attributes' tokens, its flags, its class attributes' values (user classes), then, for each
    sub-cell, the sub-cell's name followed by that sub-cell's part.

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
        lay = _layout_of(c, d)
        append(lay)           # the layout object stands for its key: one per key, hashed by identity
        append(lay.scalar_get(d))
        if lay.dtype_keys:
            for k in lay.dtype_keys:
                append(d[k].name)
        if lay.other_keys:
            for k in lay.other_keys:
                append(_token(d[k]))
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


_memo: dict = {}        # id(cell) -> LayerState, valid while the epoch has not moved


def describe(cell) -> LayerState:
    """The LayerState of `cell` now (remembered while the Cell state epoch does not move)."""
    e = EPOCH.value
    hit = _memo.get(id(cell))
    if hit is not None and hit.epoch == e and hit.cell is cell and not hit.untracked:
        return hit
    own, structure, untracked = _walk(cell)
    state = _memo[id(cell)] = LayerState(cell, own, structure, e, untracked)
    return state


def forget():
    """Drop the remembered states (end of a compile: they hold the cells alive)."""
    _memo.clear()


# -- as a guard -----------------------------------------------------------------------------------------
class LayerStateCheck:
    """A jit guard on one cell tree: its structure and the identity of the tensors it owns."""

    __slots__ = ("label", "cell", "structure", "ids", "epoch", "untracked")

    def __init__(self, label, state: LayerState):
        self.label, self.cell = label, state.cell
        self.structure, self.ids = state.structure, state.own_ids()
        self.epoch, self.untracked = state.epoch, state.untracked

    def failed(self):
        e = EPOCH.value
        if e == self.epoch and not self.untracked:
            return False                       # no Cell changed since the snapshot: O(1)
        now = describe(self.cell)
        if now.structure != self.structure or now.own_ids() != self.ids:
            return True
        self.epoch = e                         # unchanged after all: O(1) again until the next change
        return False

    def explain(self, _index=None):
        """The first difference, as a sentence; None when the tree is as in the snapshot."""
        if not self.failed():
            return None
        now = describe(self.cell)
        where = self.label
        if now.structure != self.structure:
            return _first_difference(where, self.cell, self.structure, now.structure)
        for i, (name, t) in enumerate(now.own):
            if i >= len(self.ids) or id(t) != self.ids[i]:
                return f"{where}.{name} was replaced by another object"
        return f"{where}: the tensors it owns changed"


def _first_difference(where, cell, old, new):
    """Name the attribute behind the first element where two structures of `cell` differ."""
    j = next((i for i, (a, b) in enumerate(zip(old, new)) if a != b), min(len(old), len(new)))
    # walk the tree again, counting elements as _walk emits them, to find the cell and attribute at j
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
        lay = _layout_of(c, d)
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


__all__ = ["LayerState", "LayerStateCheck", "describe", "forget", "class_scalar_names"]
