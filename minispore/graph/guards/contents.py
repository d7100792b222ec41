"""Plain containers guarded by what they hold: content tokens and the container group.

`content_token(v)` is the in-memory rendering of a value by contents (guards/rule.py: plain
containers up to MAX_GUARDED_ITEMS elements, scalars by type and value, anything else by
identity); `_ContainerGroup` checks a set of containers on every call, C-level in the common case.
"""
from __future__ import annotations

import itertools
import operator

import numpy as np

from ...common.dtype import DType
from .rule import MAX_GUARDED_ITEMS, SCALARS as _SCALARS

_repeat = itertools.repeat
_MISSING = object()          # an attribute or variable that is not set (one sentinel for every guard)


def _label_text(label):
    """Labels are built lazily as (parent label, key) pairs (a 32-layer model has ~1000 of them and
    only a failure message needs one as text): (("net", "layers"), "0") -> "net.layers.0"."""
    parts = []
    while type(label) is tuple:
        label, k = label
        parts.append(k)
    parts.append(label)
    return ".".join(map(str, reversed(parts)))


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
