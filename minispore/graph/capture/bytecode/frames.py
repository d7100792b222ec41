"""Frames, and how a frame's state is cut into *leaves* and a *template* at a graph break.

A `Frame` is what CPython keeps for a running function: its fast locals, its cells, its value
stack (and, between `KW_NAMES` and `CALL`, the pending keyword names). The interpreter keeps
locals by *name* (dis gives names on every instruction, in 3.11 and 3.12 alike).

At a graph break the frame is all the runner needs to continue: it is flattened into

* **leaves**: the Tensors (concrete ones, or Tracers while capturing), run-time Python objects
  produced by host calls, and - directly in a local or on the stack - Python numbers and NumPy
  arrays (results of eager steps such as `.item()` / `.asnumpy()`: they become `Lazy`, see
  values.py); a captured segment's graph takes the tensor leaves as params;
* a **template**: everything else, kept as it is (tuples, lists and dicts are rebuilt around their
  leaves, a list or dict met twice stays one object; cells keep their identity, so closures made
  in the frame still see them). Constants in the template are compared by value when they are
  Python values (ints, strings, dtypes, ranges...), by identity otherwise (modules, functions,
  Cells, objects).

`state_key(template, leaves)` turns the pair into a hashable key: the shape of the template, the
constants' tokens, the tensor leaves' shapes and dtypes. Numbers in leaves are not in the key (a
segment guards the ones it uses). Two frames with equal keys can run the same captured segment.

Lists and dicts are *rebuilt* at each break: an object outside the frame that holds the same
list does not see what the captured code appended to it (graph mode's rule for Python side
effects, as in trace mode).
"""
from __future__ import annotations

import numpy as np

from ....common.dtype import DType
from ....common.tensor import Tensor
from ...ir import Slot
from ...trace.session import HostResult
from .values import NULL, UNBOUND, Lazy, SeqIter

_NUMBERS = (int, float, bool, complex)
_VALUES = (int, bool, complex, str, bytes, type(None), type(Ellipsis), type(NotImplemented))


class Frame:
    """The state of one interpreted function call (see the module docstring)."""

    __slots__ = ("locals", "cells", "stack", "kw_names")

    def __init__(self, local_vars=None, cells=None, stack=None, kw_names=None):
        self.locals = local_vars if local_vars is not None else {}
        self.cells = cells if cells is not None else {}
        self.stack = stack if stack is not None else []
        self.kw_names = kw_names

    def __repr__(self):
        return f"Frame(locals={sorted(self.locals)}, cells={sorted(self.cells)}, stack depth {len(self.stack)})"


def is_leaf(x) -> bool:
    """Tensors and host-call results: values that a graph produces or consumes."""
    return isinstance(x, Tensor) or type(x) is HostResult


def is_number(x) -> bool:
    return type(x) in _NUMBERS or isinstance(x, (np.number, np.bool_))


def const_token(x):
    """A hashable token: by value for Python values, by identity for everything else."""
    t = type(x)
    if t is float:
        return (float, repr(x))                  # repr: nan == nan, and -0.0 != 0.0
    if t in _VALUES:
        return (t, x)
    if t is tuple:
        return (tuple, tuple(const_token(v) for v in x))
    if isinstance(x, DType):
        return ("dtype", x.name)
    if t is range or t is slice:
        return (t.__name__, const_token(x.start), const_token(x.stop), const_token(x.step))
    if isinstance(x, np.generic):
        return ("np", x.dtype.str, repr(x.item()))
    if t is frozenset:
        return (frozenset, frozenset(const_token(v) for v in x))
    return ("id", id(x))


# -- flatten ---------------------------------------------------------------------------------------
class _Flattener:
    def __init__(self, lazy_numbers: bool):
        self.leaves: list = []
        self.memo: dict = {}           # id(list or dict) -> its index among mutable containers
        self.keep: list = []           # keeps memoised containers alive while ids are in use
        self.lazy_numbers = lazy_numbers

    def leaf(self, x):
        self.leaves.append(x)
        return Slot(len(self.leaves) - 1)

    def top(self, x):
        """A value directly in a local or on the stack (or in a tuple there): numbers may be Lazy."""
        return self.walk(x, True)

    def walk(self, x, lazy_ok=False):
        t = type(x)
        if is_leaf(x) or t is Lazy:
            return self.leaf(x)
        if lazy_ok and self.lazy_numbers and (t in _NUMBERS or t is np.ndarray or isinstance(x, (np.number, np.bool_))):
            return self.leaf(x)
        if t is tuple:
            return ("t", tuple([self.walk(v, lazy_ok) for v in x]))
        if t is list or t is dict:
            k = self.memo.get(id(x))
            if k is not None:
                return ("a", k)
            k = self.memo[id(x)] = len(self.memo)
            self.keep.append(x)
            if t is list:
                return ("l", k, tuple([self.walk(v) for v in x]))
            return ("d", k, tuple([(key, self.walk(v)) for key, v in x.items()]))
        if isinstance(x, tuple) and hasattr(x, "_fields"):
            return ("nt", t, tuple([self.walk(v) for v in x]))
        if t is SeqIter:
            return ("i", self.walk(x.seq), x.index)
        return ("c", x)


def flatten_state(frame: Frame, own_cells, lazy_numbers=True):
    """`(template, leaves)` of a frame. `own_cells`: the names of the frame's own cell variables
    (free variables belong to the enclosing function and are not part of the state)."""
    f = _Flattener(lazy_numbers)
    loc = tuple((name, f.top(frame.locals[name])) for name in sorted(frame.locals))
    cells = []
    for name in own_cells:
        cell = frame.cells.get(name)
        if cell is None:
            continue
        try:
            contents = cell.cell_contents
        except ValueError:
            cells.append((name, cell, UNBOUND))
            continue
        cells.append((name, cell, f.walk(contents)))     # closures read cells: never Lazy
    stack = tuple(f.top(v) for v in frame.stack)
    return ("frame", loc, tuple(cells), stack, frame.kw_names), f.leaves


def flatten_value(value, lazy_numbers=False):
    """`(template, leaves)` of one value (a function's return value)."""
    f = _Flattener(lazy_numbers)
    return f.top(value), f.leaves


# -- keys ------------------------------------------------------------------------------------------
def leaf_token(x):
    if isinstance(x, Tensor):
        return ("T", tuple(x.shape), x.dtype.name)
    if type(x) is Lazy:
        x = x.value
    if is_number(x):
        return ("S",)
    if type(x) is np.ndarray:
        return ("A",)
    return ("H",)


def _key(t):
    if type(t) is Slot:
        return t.index
    tag = t[0]
    if tag == "c":
        return ("c", const_token(t[1]))
    if tag == "t" or tag == "nt":
        return (tag, t[1] if tag == "nt" else None, tuple(_key(v) for v in t[-1]))
    if tag == "l":
        return ("l", t[1], tuple(_key(v) for v in t[2]))
    if tag == "d":
        return ("d", t[1], tuple((const_token(k), _key(v)) for k, v in t[2]))
    if tag == "a":
        return t
    if tag == "i":
        return ("i", _key(t[1]), t[2])
    raise AssertionError(f"bad template {t!r}")


def state_key(template, leaves):
    """A hashable key: equal keys mean one captured segment fits both states."""
    if template[0] == "frame":
        _, loc, cells, stack, kw = template
        body = (tuple((n, _key(v)) for n, v in loc),
                tuple((n, v if v is UNBOUND else _key(v)) for n, _, v in cells),
                tuple(_key(v) for v in stack), kw)
    else:
        body = _key(template)
    return body, tuple(leaf_token(x) for x in leaves)


# -- fill ------------------------------------------------------------------------------------------
def _fill(t, values, memo):
    if type(t) is Slot:
        return values[t.index]
    tag = t[0]
    if tag == "c":
        return t[1]
    if tag == "t":
        return tuple([_fill(v, values, memo) for v in t[1]])
    if tag == "l":
        out = memo[t[1]] = []
        out.extend(_fill(v, values, memo) for v in t[2])
        return out
    if tag == "d":
        out = memo[t[1]] = {}
        for k, v in t[2]:
            out[k] = _fill(v, values, memo)
        return out
    if tag == "a":
        return memo[t[1]]
    if tag == "nt":
        return t[1](*[_fill(v, values, memo) for v in t[2]])
    if tag == "i":
        return SeqIter(_fill(t[1], values, memo), t[2])
    raise AssertionError(f"bad template {t!r}")


def fill_state(template, values, free_cells) -> Frame:
    """The frame a template describes, with `values[i]` for leaf i. `free_cells`: the function's
    closure cells by name (they are shared with the enclosing function, not part of the state)."""
    _, loc, cells, stack, kw = template
    memo: dict = {}
    frame = Frame({n: _fill(v, values, memo) for n, v in loc}, dict(free_cells),
                  [_fill(v, values, memo) for v in stack], kw)
    for name, cell, v in cells:
        if v is UNBOUND:
            try:
                del cell.cell_contents
            except ValueError:
                pass
        else:
            cell.cell_contents = _fill(v, values, memo)
        frame.cells[name] = cell
    return frame


def fill_value(template, values):
    return _fill(template, values, {})


def map_leaves(template, fn):
    """Apply fn to every Slot of a template (used to renumber leaves)."""
    if type(template) is Slot:
        return fn(template)
    if not isinstance(template, tuple):
        return template
    tag = template[0]
    if tag == "frame":
        _, loc, cells, stack, kw = template
        return ("frame", tuple((n, map_leaves(v, fn)) for n, v in loc),
                tuple((n, c, v if v is UNBOUND else map_leaves(v, fn)) for n, c, v in cells),
                tuple(map_leaves(v, fn) for v in stack), kw)
    if tag == "c" or tag == "a":
        return template
    if tag == "t":
        return ("t", tuple(map_leaves(v, fn) for v in template[1]))
    if tag == "l":
        return ("l", template[1], tuple(map_leaves(v, fn) for v in template[2]))
    if tag == "d":
        return ("d", template[1], tuple((k, map_leaves(v, fn)) for k, v in template[2]))
    if tag == "nt":
        return ("nt", template[1], tuple(map_leaves(v, fn) for v in template[2]))
    if tag == "i":
        return ("i", map_leaves(template[1], fn), template[2])
    raise AssertionError(f"bad template {template!r}")


__all__ = ["Frame", "flatten_state", "flatten_value", "fill_state", "fill_value", "state_key", "const_token",
           "map_leaves", "is_leaf", "is_number", "NULL", "UNBOUND"]
