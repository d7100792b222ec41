"""Frames (the variables of one interpreted call) and interpreted closures (`def`/`lambda`
evaluated inside a captured function)."""
from __future__ import annotations

import ast
import inspect
import types

from .session import AstCaptureError, where
from .signals import MISSING


# -- frames -------------------------------------------------------------------------------------------
class Frame:
    """The variables of one interpreted call (or comprehension), and where it is in the source."""

    __slots__ = ("fn_name", "filename", "globals", "env", "parent", "closure", "lineno", "return_value",
                 "global_names", "nonlocal_names", "func", "first_arg", "user", "loops")

    def __init__(self, fn_name, filename, globals_, env, parent=None, closure=None, func=None, first_arg=None,
                 lineno=0, user=True):
        self.fn_name = fn_name
        self.filename = filename
        self.globals = globals_
        self.env = env
        self.parent = parent
        self.closure = closure
        self.lineno = lineno
        self.return_value = None
        self.global_names = None
        self.nonlocal_names = None
        self.func = func
        self.first_arg = first_arg
        self.user = user                  # user code (not a library Cell's construct): names IR lines
        self.loops = []                   # the exit flags of the loops running now, innermost last

    def loc(self, lineno=None):
        return (self.filename, self.lineno if lineno is None else lineno, self.fn_name)

    def has_local(self, name) -> bool:
        f = self
        while f is not None:
            if name in f.env or (f.closure is not None and name in f.closure):
                return True
            f = f.parent
        return False


# -- interpreted closures ---------------------------------------------------------------------------
class InterpretedFunction:
    """A `def` or `lambda` evaluated inside a captured function: calling it interprets its body."""

    def __init__(self, interp, node, frame, defaults, kw_defaults, name):
        self._interp = interp
        self._node = node
        self._frame = frame
        self.__name__ = self.__qualname__ = name
        self.__doc__ = ast.get_docstring(node) if not isinstance(node, ast.Lambda) else None
        self.__signature__ = signature_of(node.args, defaults, kw_defaults)

    def __call__(self, *args, **kwargs):
        if not self._interp.active:
            raise AstCaptureError(self.__name__, "to be called while the function that defines it is captured",
                                  "a call after the capture ended (a function defined inside a jitted function "
                                  "cannot be kept and called later)", where=where(self._frame.loc(self._node.lineno)))
        return self._interp.call_interpreted(self, args, kwargs)

    def __get__(self, obj, objtype=None):
        return self if obj is None else types.MethodType(self, obj)

    def __repr__(self):
        return f"<function {self.__name__} (interpreted by jit capture_mode='ast')>"


def signature_of(a, defaults, kw_defaults):
    P = inspect.Parameter
    params = []
    positional = a.posonlyargs + a.args
    first_default = len(positional) - len(defaults)
    for i, arg in enumerate(positional):
        kind = P.POSITIONAL_ONLY if i < len(a.posonlyargs) else P.POSITIONAL_OR_KEYWORD
        default = defaults[i - first_default] if i >= first_default else P.empty
        params.append(P(arg.arg, kind, default=default))
    if a.vararg:
        params.append(P(a.vararg.arg, P.VAR_POSITIONAL))
    for arg, d in zip(a.kwonlyargs, kw_defaults):
        params.append(P(arg.arg, P.KEYWORD_ONLY, default=P.empty if d is MISSING else d))
    if a.kwarg:
        params.append(P(a.kwarg.arg, P.VAR_KEYWORD))
    return inspect.Signature(params)


__all__ = ["Frame", "InterpretedFunction", "signature_of"]
