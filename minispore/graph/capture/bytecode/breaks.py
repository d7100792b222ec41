"""Graph breaks: which calls and instructions the bytecode capture leaves to eager execution, and why.

The interpreter asks `call_break_reason(fn, args, kwargs)` before every `CALL` while it captures.
The answer is None (call it now: the call is traced into the graph, or is pure Python that can be
evaluated at compile time) or a *reason*, and the call becomes a graph break:

* **side effects the graph cannot hold**: `print`, `input`, `open`, `exec`/`eval`,
  `breakpoint`... run when the function runs, every time, on real values;
* **calls into other libraries**: a function from a package that is neither minispore, nor the
  user's own code, nor a pure module (math, operator, numpy outside numpy.random, functools...):
  with a tensor argument it cannot be traced; without one it may have side effects (`time.time()`,
  `random.random()`, a logger), so it runs eagerly too;
* **formatting a tensor** (`str(t)`, `f"{t}"`, `"{}".format(t)`): it needs the values;
* **writing a graph value into a Parameter** (`p.set_data(y)`): the Parameter must get real data.

Everything else is called with the frame's values - Tracers for tensors - exactly as trace mode
does: minispore ops and Cells are recorded, user functions run their Python once. If such a call
needs a tensor's *value* after all (`.asnumpy()`, `.item()`, `float(t)`, a nested `if` on a
tensor), the Tracer raises `CaptureError`; the interpreter catches it, forgets the nodes the call
had recorded, and makes the whole call a graph break. The same happens for an `if`/`while` on a
tensor in the interpreted function itself (`POP_JUMP_IF_*`).

`BreakInfo` is where a break happened (instruction, line, reason); `GraphBreakError` is what
`jit(fullgraph=True)` raises instead of breaking.
"""
from __future__ import annotations

import builtins
import functools
import os
import sysconfig
import types

from ....common.errors import _PKG_DIR
from ....common.tensor import Parameter, Tensor
from ...trace.contract import GraphBreak
from ...trace.session import CaptureError, HostResult, SymbolicArray


class GraphBreakError(CaptureError):
    """`jit(..., capture_mode="bytecode", fullgraph=True)` met code that would break the graph."""


class NeedsBreak(Exception):
    """Raised inside the interpreter: the current instruction must run eagerly."""

    def __init__(self, reason):
        super().__init__(reason)
        self.reason = reason


class BreakInfo:
    """A graph break: the instruction (index into the code's instruction list), its line, the
    reason, and `pop_after` (a call whose result is discarded: the eager step also pops it)."""

    __slots__ = ("index", "offset", "opname", "reason", "filename", "lineno", "pop_after", "argc")

    def __init__(self, index, offset, opname, reason, filename, lineno, pop_after=False, argc=0):
        self.index, self.offset, self.opname, self.reason = index, offset, opname, reason
        self.filename, self.lineno, self.pop_after, self.argc = filename, lineno, pop_after, argc

    def graph_break(self) -> GraphBreak:
        return GraphBreak(self.reason, self.filename, self.lineno)

    def __repr__(self):
        return f"BreakInfo({self.filename}:{self.lineno} {self.opname}: {self.reason})"


def is_symbolic(x) -> bool:
    """A tensor with no values yet (a Tracer), or a host call's run-time result."""
    return (isinstance(x, Tensor) and type(x._data) is SymbolicArray) or type(x) is HostResult


def has_symbolic(args, kwargs=None) -> bool:
    """Any symbolic value among the arguments, or one level inside tuples/lists/dicts."""
    for a in list(args) + (list(kwargs.values()) if kwargs else []):
        if is_symbolic(a):
            return True
        t = type(a)
        if t is tuple or t is list:
            if any(is_symbolic(x) for x in a):
                return True
        elif t is dict:
            if any(is_symbolic(x) for x in a.values()):
                return True
    return False


# -- who owns a callable ---------------------------------------------------------------------------
_LIB_DIRS = tuple(sorted({os.path.realpath(p) + os.sep for k, p in sysconfig.get_paths().items()
                          if k in ("stdlib", "platstdlib", "purelib", "platlib")}))
_PKG_PREFIX = os.path.realpath(_PKG_DIR) + os.sep

# builtins that run Python side effects: always at run time
_SIDE_EFFECTS = {id(f) for f in (builtins.print, builtins.input, builtins.open, builtins.exec, builtins.eval,
                                   builtins.compile, builtins.breakpoint, builtins.help)}
# builtins that only look at, pack or route values (tensors included)
_ROUTING = {id(f) for f in (len, isinstance, issubclass, type, id, callable, getattr, hasattr, tuple, list, dict, set,
                             frozenset, range, slice, zip, enumerate, reversed, map, filter, iter, next, sum, min,
                             max, abs, pow, divmod, round, sorted, any, all, super, object, int, float, bool,
                             complex, hash)}
# builtins that format their arguments (a tensor's text needs its values)
_FORMATTING = {id(f) for f in (str, repr, format, ascii)}
# pure modules: calls with constant arguments are evaluated at compile time
_PURE_MODULES = {"math", "cmath", "operator", "_operator", "numpy", "functools", "_functools", "itertools",
                 "collections", "_collections", "string", "re", "typing", "dataclasses", "copy", "enum",
                 "numbers", "fractions", "decimal", "statistics", "ml_dtypes", "abc", "types", "inspect",
                 "builtins", "keyword", "textwrap", "json"}
_IMPURE_MODULES = ("numpy.random",)
_WRITES_STORAGE = {id(Parameter.set_data)}          # methods that store a tensor's data into another tensor
_CONTAINER_TYPES = (list, dict, tuple, set, frozenset, int, float, bool, complex, type(None), range, slice)


def _code_file(fn):
    code = getattr(fn, "__code__", None)
    return os.path.realpath(code.co_filename) if code is not None else None


def _module_of(fn) -> str:
    """The module a callable comes from ('' if unknown)."""
    owner = getattr(fn, "__self__", None)
    if owner is not None and not isinstance(owner, types.ModuleType) and type(fn) is types.BuiltinMethodType:
        return getattr(type(owner), "__module__", "") or ""
    mod = getattr(fn, "__module__", None)
    if mod is None:
        mod = getattr(type(fn), "__module__", "")
    return mod or ""


def _is_pure(mod: str) -> bool:
    if any(mod == m or mod.startswith(m + ".") for m in _IMPURE_MODULES):
        return False
    return mod.split(".")[0] in _PURE_MODULES


def _name(fn) -> str:
    n = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or type(fn).__name__
    mod = _module_of(fn)
    return f"{mod}.{n}" if mod and mod != "builtins" else n


def _owner(fn):
    """'minispore', 'user', 'builtin' or 'library'."""
    if isinstance(fn, functools.partial):
        return _owner(fn.func)
    if isinstance(fn, types.MethodType):
        fn = fn.__func__
    path = _code_file(fn)
    if path is None and not isinstance(fn, (types.BuiltinFunctionType, types.BuiltinMethodType,
                                            types.MethodDescriptorType, types.WrapperDescriptorType,
                                            types.MethodWrapperType, types.ClassMethodDescriptorType, type)):
        call = getattr(type(fn), "__call__", None)           # a callable object: who wrote its __call__?
        path = _code_file(call)
        if path is None:
            mod = getattr(type(fn), "__module__", "") or ""
            return "minispore" if mod.startswith("minispore") else "library"
    if isinstance(fn, type):
        mod = fn.__module__ or ""
        if mod == "builtins":
            return "builtin"
        if mod.startswith("minispore"):
            return "minispore"
        init = fn.__dict__.get("__init__") or fn.__dict__.get("__new__")
        path = _code_file(init) if init is not None else None
        if path is None:
            import sys
            m = sys.modules.get(mod)
            path = os.path.realpath(getattr(m, "__file__", "") or "") if m is not None else ""
    if path is None:
        mod = _module_of(fn)
        if mod.startswith("minispore"):
            return "minispore"
        return "builtin" if mod in ("builtins", "") else "library"
    if path.startswith(_PKG_PREFIX):
        return "minispore"
    if path.startswith(_LIB_DIRS):
        return "library"
    return "user"


def call_break_reason(fn, args, kwargs):
    """None if `fn(*args, **kwargs)` may run now, during capture; else why it must run eagerly."""
    if id(fn) in _SIDE_EFFECTS:
        return f"{fn.__name__}() is a Python side effect: it runs eagerly each time the function runs"
    if id(getattr(fn, "__func__", fn)) in _WRITES_STORAGE and has_symbolic(args, kwargs):
        return ("a tensor computed in the graph is written into a Parameter (set_data): runs eagerly, so the "
                "Parameter gets concrete data")
    owner = _owner(fn)
    if owner in ("minispore", "user"):
        return None
    sym = has_symbolic(args, kwargs)
    if owner == "builtin":
        if id(fn) in _ROUTING:
            return None
        if id(fn) in _FORMATTING:
            return f"{fn.__name__}() of a tensor needs its values" if sym else None
        if fn is setattr or fn is delattr:
            return f"{fn.__name__}() with a tensor: the attribute must hold a concrete tensor" if sym else None
        objclass = getattr(fn, "__objclass__", None) or type(getattr(fn, "__self__", None))
        if objclass in _CONTAINER_TYPES:        # list.append, dict.get, int.bit_length ...
            return None
        if objclass in (str, bytes):
            return f"{_name(fn)}() formats a tensor, which needs its values" if sym else None
        if not sym and _is_pure(_module_of(fn)):
            return None
        mod = _module_of(fn)
        if sym:
            return f"{_name(fn)}() is not a graph op: it cannot take a tensor with no values"
        return f"call to {_name(fn)} from '{mod or 'builtins'}' (side effects unknown): it runs eagerly"
    mod = _module_of(fn) or "?"
    lib = mod.split(".")[0]
    if sym:
        return f"call to {_name(fn)} from library '{lib}' with a tensor argument (not a graph op)"
    if _is_pure(mod):
        return None
    return f"call to {_name(fn)} from library '{lib}' (side effects unknown): it runs eagerly"


def describe_capture_error(e, callee=None, outer_where=None) -> str:
    """A break reason from the CaptureError a Tracer raised while running an instruction (for a
    call: inside the callee)."""
    what = getattr(e, "op", None) or str(e)
    need = "needs the values of a tensor, which exist only when the graph runs"
    if getattr(e, "expected", None) != "a tensor with concrete values":       # not about data: say what it is
        return f"{what}: expected {e.expected}, but got {e.got}" if hasattr(e, "expected") else str(e)
    if callee is None:
        return f"{what} {need}"
    name = repr(callee) if type(callee).__name__ == "_TracerMethod" else _name(callee)
    if name == what or name.endswith("." + what) or what.endswith("." + name):
        return f"{what}() {need}"
    msg = f"call to {name}: {what} {need}"
    where = getattr(e, "where", None)
    if where and where != outer_where and "minispore internals" not in where:
        msg += f" (at {where})"
    return msg


__all__ = ["GraphBreakError", "NeedsBreak", "BreakInfo", "call_break_reason", "describe_capture_error",
           "is_symbolic", "has_symbolic"]
