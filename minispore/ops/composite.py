"""`mindspore.ops.composite` (imported as `C` in the model zoo: `from mindspore.ops import composite
as C`): operations built from other operations rather than defined as primitives.

* `GradOperation`, re-exported from `minispore.autograd` (a higher layer, so looked up lazily the
  way `minispore.ops` does it);
* `clip_by_value`, `clip_by_global_norm` and the other functional ops MindSpore also lists here
  (`tensor_dot`, `dot`, `matmul`, `ones_like`, ...) — the very same functions as in `ops`;
* `MultitypeFuncGraph` and `HyperMap` / `Map`, the model zoo's way to apply a per-type function to
  every gradient:

      clip_grad = C.MultitypeFuncGraph("clip_grad")

      @clip_grad.register("Number", "Number", "Tensor")
      def _clip_grad(clip_type, clip_value, grad):
          return C.clip_by_value(grad, -clip_value, clip_value)

      grads = C.HyperMap()(F.partial(clip_grad, 1, 1.0), grads)

  MindSpore compiles these into the graph; minispore calls them as Python, which under `jit` runs
  while the graph is captured, so the ops they call are recorded like any others.
"""
from __future__ import annotations

import numbers

from ..common.errors import OpTypeError, OpValueError
from ..common.tensor import Tensor
from . import functional as _F

_REEXPORTED = ["clip_by_value", "tensor_dot", "dot", "matmul", "mm", "ones_like", "zeros_like", "normal",
               "uniform", "sequence_mask", "repeat_elements", "repeat_interleave", "count_nonzero", "cummin",
               "multinomial", "vecdot"]
for _name in _REEXPORTED:
    globals()[_name] = getattr(_F, _name)

_LATER = {"GradOperation": "minispore.autograd", "clip_by_global_norm": "minispore.nn.clip"}


def __getattr__(name):
    import importlib
    if name in _LATER:
        return getattr(importlib.import_module(_LATER[name]), name)
    raise AttributeError(f"module 'minispore.ops.composite' has no attribute '{name}'")


# ------------------------------------------------------------------------------------------------
# MultitypeFuncGraph: one name, several Python functions, chosen by the argument types
def _is_number(x):
    return isinstance(x, numbers.Number)            # bool counts, as MindSpore's Number


# MindSpore's type names as `register` accepts them -> a test of one argument
_TYPE_TESTS = {
    "Tensor": lambda x: isinstance(x, Tensor),      # a Parameter is a Tensor
    "Number": _is_number,
    "Int": lambda x: isinstance(x, numbers.Integral),
    "Float": lambda x: isinstance(x, float),
    "Bool": lambda x: isinstance(x, bool),
    "String": lambda x: isinstance(x, str),
    "Tuple": lambda x: isinstance(x, tuple),
    "List": lambda x: isinstance(x, list),
    "Dictionary": lambda x: isinstance(x, dict),
    "None": lambda x: x is None,
    "Function": lambda x: callable(x) and not isinstance(x, Tensor),
}


def _type_name(x):
    for name in ("Tensor", "Bool", "Int", "Float", "Number", "String", "Tuple", "List", "Dictionary", "None",
                 "Function"):
        if _TYPE_TESTS[name](x):
            return name
    return type(x).__name__


class MultitypeFuncGraph:
    """`MultitypeFuncGraph(name, read_value=False)`: register implementations per argument types
    (`@f.register("Number", "Tensor")`); a call runs the first registration whose types match."""

    def __init__(self, name, read_value=False):
        if not isinstance(name, str):
            raise OpTypeError("MultitypeFuncGraph", "'name' to be a str", f"{type(name).__name__} {name!r}")
        self.name = name
        self.read_value = read_value
        self.entries = []                 # [(type names, fn)] in registration order

    def register(self, *type_names):
        for t in type_names:
            if t not in _TYPE_TESTS:
                raise OpValueError("MultitypeFuncGraph", f"type names in {list(_TYPE_TESTS)}",
                                   f"{t!r} (registering '{self.name}')")

        def deco(fn):
            self.entries.append((type_names, fn))
            return fn
        return deco

    def __call__(self, *args):
        for types, fn in self.entries:
            if len(types) == len(args) and all(_TYPE_TESTS[t](a) for t, a in zip(types, args)):
                return fn(*args)
        have = [", ".join(t) for t, _ in self.entries]
        raise OpTypeError(self.name, f"arguments matching one registration of the MultitypeFuncGraph "
                                     f"({'; '.join(f'({h})' for h in have) or 'none registered'})",
                          f"({', '.join(_type_name(a) for a in args)})")

    def __repr__(self):
        return f"MultitypeFuncGraph<{self.name}, {len(self.entries)} registrations>"


# ------------------------------------------------------------------------------------------------
# HyperMap / Map: apply a function across (nested) tuples and lists
def _sequence_length(op, seqs):
    n = len(seqs[0])
    for s in seqs[1:]:
        if len(s) != n:
            # MindSpore 2.10 silently truncates to the shortest; a length mismatch is a bug in the
            # caller's gradients/parameters pairing, so minispore refuses it
            raise OpValueError(op, "sequences of one length", " and ".join(str(len(s)) for s in seqs))
    return n


def _is_seq(x):
    return isinstance(x, (tuple, list))


class HyperMap:
    """`HyperMap(ops=None, reverse=False)`: `hyper_map(fn, *seqs)` (or `HyperMap(fn)(*seqs)`)
    applies `fn` leaf by leaf, recursing into tuples and lists together; the result is a tuple
    of the same nesting. Leaves are everything that is not a tuple or list."""

    _recursive = True

    def __init__(self, ops=None, reverse=False):
        if ops is not None and not callable(ops):
            raise OpTypeError(type(self).__name__, "'ops' to be callable or None", type(ops).__name__)
        if not isinstance(reverse, bool):
            raise OpTypeError(type(self).__name__, "'reverse' to be a bool", type(reverse).__name__)
        self.ops = ops
        self.reverse = reverse

    def __call__(self, *args):
        fn, seqs = (self.ops, args) if self.ops is not None else (args[0] if args else None, args[1:])
        if not callable(fn):
            raise OpTypeError(type(self).__name__, "a function to apply as the first argument",
                              type(fn).__name__)
        if not seqs:
            raise OpValueError(type(self).__name__, "at least one argument to map over", "none")
        return self._map(fn, seqs)

    def _map(self, fn, seqs):
        if not any(_is_seq(s) for s in seqs):
            return fn(*seqs)
        if not all(_is_seq(s) for s in seqs):
            raise OpTypeError(type(self).__name__, "tuples/lists of one nesting in every argument",
                              ", ".join(type(s).__name__ for s in seqs))
        n = _sequence_length(type(self).__name__, seqs)
        order = range(n - 1, -1, -1) if self.reverse else range(n)
        out = [None] * n
        for i in order:
            items = tuple(s[i] for s in seqs)
            out[i] = self._map(fn, items) if self._recursive else fn(*items)
        return tuple(out)


class Map(HyperMap):
    """`Map(ops=None, reverse=False)`: like HyperMap, one level deep only (elements are passed to
    `fn` as they are, tuples included)."""

    _recursive = False


__all__ = ["GradOperation", "MultitypeFuncGraph", "HyperMap", "Map", "clip_by_global_norm"] + \
    [n for n in _REEXPORTED if n in globals()]
