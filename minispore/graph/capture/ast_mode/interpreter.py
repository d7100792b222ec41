"""The ast mode's interpreter: evaluates a function's AST with traced tensors as values.

Python values stay Python values and are computed now, at compile time (they are *constants*:
shapes, flags, loop counters, Cells, tuples). Tensors are the trace mode's Tracers, so every op,
Cell or method called on them is recorded as in trace mode. What the interpreter does itself is
everything the trace mode cannot: control flow on tensor values (control_flow.py), and code that
cannot be compiled (fallback.py). Statement by statement:

=====================  ===============================================================================
`if c:`                c a Python value: only the taken branch is interpreted (control-flow inline).
                       c a tensor: both branches become subgraphs of an If node (control_flow.py).
`while c:`             iterates in Python while c is a Python value; once c is a tensor, the rest of
                       the loop becomes a While node (carry = the variables the body assigns).
`for x in it:`         unrolled over a Python iterable (range, tuple, list, CellList, dict, zip...)
                       or over the first axis of a tensor; break/continue/else work.
`return`               ends the function; inside a tensor `if` the code after the `if` is moved into
                       both branches, so both end in a return (see control_flow.py).
def / lambda           an interpreted closure (tensor control flow inside it works too).
print(...)             a host call that prints when the graph runs (MindSpore's Print).
try, with, class, ...  unsupported: fullgraph=True raises naming the line; otherwise fallback.py runs
                       the statement in Python, at compile time if its inputs are constants, else at
                       run time (HOST_CALL, JIT Fallback).
=====================  ===============================================================================

Calls: functions of the user's code (and every Cell's construct) are interpreted; library functions
(minispore's ops and utilities, NumPy, the standard library) are called. A library function that is
handed a user function (`value_and_grad(f)`, `map(f, xs)`) or holds one in its closure gets a proxy
that calls back into the interpreter, so control flow inside `f` still compiles. A call whose
evaluation needs tensor data (`x.asnumpy()`, `float(x)`, `np.sin(x)`) or consumes a run-time
Python value becomes a host call (fallback at run time), or an error with fullgraph=True.
"""
from __future__ import annotations

import ast
import builtins
import functools
import inspect
import operator
import types

from ....common import dtype as mstype
from ....common.errors import MinisporeError
from ....common.tensor import Tensor
from ..trace import CaptureError, HostResult, user_source
from . import control_flow, fallback
from .session import (AstCaptureError, is_dynamic_leaf, unsupported, where)
from .signals import BREAK, CONTINUE, MISSING, RAISED, RETURN, Undefined
from .source import _find_generator, is_user_code, parse_function

MAX_UNROLL = 100_000          # iterations of one unrolled loop before giving up (a runaway loop)



# -- frames -------------------------------------------------------------------------------------------
class Frame:
    """The variables of one interpreted call (or comprehension), and where it is in the source."""

    __slots__ = ("fn_name", "filename", "globals", "env", "parent", "closure", "lineno", "return_value",
                 "global_names", "nonlocal_names", "func", "first_arg", "user")

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

    def loc(self, lineno=None):
        return (self.filename, self.lineno if lineno is None else lineno, self.fn_name)

    def has_local(self, name) -> bool:
        f = self
        while f is not None:
            if name in f.env or (f.closure is not None and name in f.closure):
                return True
            f = f.parent
        return False


def _interp_name(fn):
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or type(fn).__name__


# -- interpreted closures ---------------------------------------------------------------------------
class InterpretedFunction:
    """A `def` or `lambda` evaluated inside a captured function: calling it interprets its body."""

    def __init__(self, interp, node, frame, defaults, kw_defaults, name):
        self._interp = interp
        self._node = node
        self._frame = frame
        self.__name__ = self.__qualname__ = name
        self.__doc__ = ast.get_docstring(node) if not isinstance(node, ast.Lambda) else None
        self.__signature__ = _signature_of(node.args, defaults, kw_defaults)

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


def _signature_of(a, defaults, kw_defaults):
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


def _invoke(fn, args, kwargs):
    """What a run-time host call of `fn(*args, **kwargs)` runs (fn may itself be a run-time value)."""
    return fn(*args, **kwargs)


def _invoke_method(obj, name, args, kwargs):
    return getattr(obj, name)(*args, **kwargs)


# -- operator tables ----------------------------------------------------------------------------------
_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
           ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
           ast.MatMult: operator.matmul, ast.LShift: operator.lshift, ast.RShift: operator.rshift,
           ast.BitOr: operator.or_, ast.BitXor: operator.xor, ast.BitAnd: operator.and_}
_INPLACE = {ast.Add: operator.iadd, ast.Sub: operator.isub, ast.Mult: operator.imul, ast.Div: operator.itruediv,
            ast.FloorDiv: operator.ifloordiv, ast.Mod: operator.imod, ast.Pow: operator.ipow,
            ast.MatMult: operator.imatmul, ast.LShift: operator.ilshift, ast.RShift: operator.irshift,
            ast.BitOr: operator.ior, ast.BitXor: operator.ixor, ast.BitAnd: operator.iand}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Invert: operator.invert}


def _in(a, b):
    return a in b


def _not_in(a, b):
    return a not in b


_CMP = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
        ast.Gt: operator.gt, ast.GtE: operator.ge, ast.Is: operator.is_, ast.IsNot: operator.is_not,
        ast.In: _in, ast.NotIn: _not_in}
_SYMBOL = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
           ast.Pow: "**", ast.MatMult: "@", ast.LShift: "<<", ast.RShift: ">>", ast.BitOr: "|", ast.BitXor: "^",
           ast.BitAnd: "&", ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
           ast.In: "in", ast.NotIn: "not in", ast.USub: "-", ast.UAdd: "+", ast.Invert: "~"}


def _contains_opaque(x) -> bool:
    t = type(x)
    if t is HostResult:
        return True
    if t is tuple or t is list:
        return any(_contains_opaque(v) for v in x)
    if t is dict:
        return any(_contains_opaque(v) for v in x.values())
    return False


def _as_bool_tensor(x):
    from ....ops import functional as F
    return x if x.dtype is mstype.bool_ else F.cast(x, mstype.bool_)


_SCALARS = (bool, int, float, complex, str, bytes, type(None))


def _token(v):
    t = type(v)
    if t in _SCALARS:
        return (t, v)
    if isinstance(v, mstype.DType):
        return ("dtype", v.name)
    if t is tuple and all(type(x) in _SCALARS for x in v):
        return (tuple, v)
    return ("id", id(v))


# -- the interpreter ------------------------------------------------------------------------------------
class Interpreter:
    """Evaluates interpreted functions for one capture (see the module docstring)."""

    def __init__(self, name, fullgraph):
        self.name = name
        self.fullgraph = fullgraph
        self.session = None              # the session recording now (the top graph or a region)
        self.frames: list[Frame] = []
        self.active = True
        self.loc_override = None         # set while replaying a graph (backward of an If)
        self.global_reads: dict = {}
        self._clones: dict = {}          # id(tracer copy made for a branch) -> (copy, original)
        self._outer_where = None

    # -- where are we ---------------------------------------------------------------------------------
    def location(self):
        if self.loc_override is not None:
            return self.loc_override
        for f in reversed(self.frames):           # the innermost line of the user's code, as in trace mode
            if f.user:
                return (f.filename, f.lineno, f.fn_name)
        return user_source(3) or ("<unknown>", 0, self.name)

    def original(self, x):
        """The tensor object a branch-private copy stands for (the one the autodiff tape knows)."""
        hit = self._clones.get(id(x))
        return hit[1] if hit is not None and hit[0] is x else x

    def private_copy(self, x):
        """A copy of a traced tensor that `x[i] = v` inside a branch may rebind without touching x."""
        from ..trace import Tracer
        c = Tracer.make(x._data.value, x._data.session)
        self._clones[id(c)] = (c, self.original(x))
        return c

    # -- guards -----------------------------------------------------------------------------------------
    def note_global(self, g, name, value):
        if isinstance(value, types.ModuleType):
            return
        key = (id(g), name)
        if key not in self.global_reads:
            self.global_reads[key] = (g, name, _token(value))

    def guards(self) -> list:
        reads = list(self.global_reads.values())
        if not reads:
            return []

        def globals_read_by_interpreted_code(args, kwargs):
            for g, name, tok in reads:
                new = _token(g.get(name, MISSING))
                if new != tok:
                    old = repr(tok[1]) if tok[0] != "id" else "an object"
                    val = repr(new[1]) if new[0] != "id" else "another object"
                    return f"global '{name}' changed: {old} -> {val}"
            return None
        return [globals_read_by_interpreted_code]

    # -- names --------------------------------------------------------------------------------------------
    def lookup(self, name, frame):
        v = self.lookup_raw(name, frame)
        if type(v) is Undefined:
            raise AstCaptureError(name, "a variable defined on every path to this line",
                                  f"'{name}', which {v.why}", where=where(frame.loc()))
        return v

    def lookup_raw(self, name, frame):
        f = frame
        if frame.global_names and name in frame.global_names:
            v = frame.env.get(name, MISSING)          # a tensor written to the global in this call
            if v is not MISSING:
                return v
        else:
            while f is not None:
                v = f.env.get(name, MISSING)
                if v is not MISSING:
                    return v
                if f.closure is not None and name in f.closure:
                    try:
                        return f.closure[name].cell_contents
                    except ValueError:
                        raise NameError(f"free variable '{name}' referenced before assignment") from None
                f = f.parent
        g = frame.globals
        v = g.get(name, MISSING)
        if v is not MISSING:
            if frame.user:                             # library code's globals are not guarded
                self.note_global(g, name, v)
            return v
        b = g.get("__builtins__", builtins)
        b = b if isinstance(b, dict) else b.__dict__
        if name in b:
            return b[name]
        raise NameError(f"name '{name}' is not defined (at {where(frame.loc())})")

    def assign_name(self, name, value, frame):
        if frame.global_names and name in frame.global_names:
            fallback.write_global(self, frame, name, value)
            return
        if frame.nonlocal_names and name in frame.nonlocal_names:
            f = frame.parent
            while f is not None:
                if name in f.env:
                    f.env[name] = value
                    return
                if f.closure is not None and name in f.closure:
                    f.closure[name].cell_contents = value
                    return
                f = f.parent
        frame.env[name] = value

    # -- calls --------------------------------------------------------------------------------------------
    def call(self, fn, args, kwargs=None):
        """Call `fn` from interpreted code (see the module docstring for what is interpreted)."""
        kwargs = kwargs or {}
        t = type(fn)
        if t is InterpretedFunction:
            return fn(*args, **kwargs)
        if t is types.FunctionType:
            if is_user_code(fn.__code__):
                parsed = parse_function(fn.__code__)
                if parsed is not None:
                    return self.call_parsed(fn, parsed, tuple(args), kwargs)
            return self.apply(self._rebind(fn), self._proxy_args(args), self._proxy_kwargs(kwargs))
        if t is types.MethodType:
            f = fn.__func__
            if type(f) is InterpretedFunction or (type(f) is types.FunctionType and is_user_code(f.__code__)
                                                   and parse_function(f.__code__) is not None):
                return self.call(f, (fn.__self__,) + tuple(args), kwargs)
            return self.apply(fn, self._proxy_args(args), self._proxy_kwargs(kwargs))
        if fn is builtins.print:
            self.session.host_call(builtins.print, tuple(args), kwargs, "print", allow_fullgraph=True)
            return None
        if fn is builtins.super and not args:
            return self._zero_arg_super()
        jit_fn, bound_jit = _jit_types()
        if t is jit_fn:                          # a jitted function called here is inlined
            return self.call(fn.fn, args, kwargs)
        if t is bound_jit:
            return self.call(fn.jf.fn, (fn.obj,) + tuple(args), kwargs)
        if t is functools.partial:
            return self.call(fn.func, tuple(fn.args) + tuple(args), {**fn.keywords, **kwargs})
        if t is HostResult:
            return self.runtime_call(fn, args, kwargs)
        call = getattr(t, "__call__", None)           # an instance of a user class with __call__
        if type(call) is types.FunctionType and is_user_code(call.__code__) and not isinstance(fn, type) \
                and not hasattr(fn, "construct"):
            return self.call(call, (fn,) + tuple(args), kwargs)
        return self.apply(fn, self._proxy_args(args), self._proxy_kwargs(kwargs))

    def apply(self, fn, args, kwargs=None, what=None):
        """Run `fn(*args, **kwargs)` now (compile time); if it needs tensor data, or an argument is
        a run-time Python value, run it when the graph runs instead (JIT Fallback)."""
        kwargs = kwargs or {}
        if type(fn) is HostResult or _contains_opaque(args) or _contains_opaque(kwargs):
            return self.runtime_call(fn, args, kwargs, what)
        nodes = self.session.builder.nodes
        n0 = len(nodes)
        try:
            return fn(*args, **kwargs)
        except AstCaptureError:
            raise
        except CaptureError as e:
            owner = getattr(fn, "__self__", None)
            label = what or (f"Tensor.{fn.__name__}" if isinstance(owner, Tensor) else _interp_name(fn))
            if self.session.fullgraph:
                raise unsupported(f"'{label}', which needs the values of a tensor at compile time",
                                  self.location(), hint="tensor values exist only when the graph runs; drop "
                                  "fullgraph=True to run it in Python at run time (JIT Fallback), or "
                                  "express it with ops") from e
            del nodes[n0:]
            return self.runtime_call(fn, args, kwargs, what)

    def runtime_call(self, fn, args, kwargs, what=None):
        owner = getattr(fn, "__self__", None)
        if is_dynamic_leaf(owner):          # `x.asnumpy()` on a traced x: call the method of the run-time x
            return self.session.host_call(_invoke_method, (owner, fn.__name__, tuple(args), dict(kwargs)), {},
                                          what or fn.__name__)
        return self.session.host_call(_invoke, (fn, tuple(args), dict(kwargs)), {}, what or _interp_name(fn))

    def call_parsed(self, fn, parsed, args, kwargs):
        """Interpret a Python function of the user's code (or a Cell's construct)."""
        if parsed.generator_node is not None or isinstance(parsed.node, ast.AsyncFunctionDef):
            node = parsed.generator_node or parsed.node
            kind = "statement 'AsyncFunctionDef'" if node is parsed.node else f"expression '{type(node).__name__}'"
            if self.session.fullgraph:
                raise unsupported(f"Unsupported {kind}", (parsed.filename, node.lineno, parsed.name))
            return self.apply(fn, args, kwargs)
        sig = _signature(fn)
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"{fn.__qualname__}(): {e} (at {where((parsed.filename, parsed.node.lineno, parsed.name))})") \
                from None
        bound.apply_defaults()
        code = fn.__code__
        closure = dict(zip(code.co_freevars, fn.__closure__)) if fn.__closure__ else None
        frame = Frame(parsed.name, parsed.filename, fn.__globals__, dict(bound.arguments), closure=closure,
                      func=fn, first_arg=args[0] if args else None, lineno=parsed.node.lineno,
                      user=is_user_code(code))
        return self.run_frame(frame, parsed.node)

    def call_interpreted(self, f, args, kwargs):
        try:
            bound = f.__signature__.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"{f.__name__}(): {e} (at {where(f._frame.loc(f._node.lineno))})") from None
        bound.apply_defaults()
        parent = f._frame
        frame = Frame(f.__name__, parent.filename, parent.globals, dict(bound.arguments), parent=parent,
                      func=parent.func, first_arg=args[0] if args else None, lineno=f._node.lineno,
                      user=parent.user)
        return self.run_frame(frame, f._node)

    def run_frame(self, frame, node):
        self.frames.append(frame)
        try:
            if isinstance(node, ast.Lambda):
                return self.eval(node.body, frame)
            self.exec_block(node.body, frame, ())
            return frame.return_value
        finally:
            self.frames.pop()

    def call_cell(self, cell, args, kwargs):
        """A Cell called during the capture: interpret its construct (plain calls), or run its
        Python (__call__ with hooks, mixed precision or a custom bprop)."""
        from ....jit import JitFunction, _run_cell_python
        if cell.__dict__.get("_plain_call"):
            construct = type(cell).construct
            if isinstance(construct, JitFunction):
                construct = construct.fn
            if type(construct) is types.FunctionType:
                parsed = parse_function(construct.__code__)
                if parsed is not None:
                    return self.call_parsed(construct, parsed, (cell,) + tuple(args), kwargs)
        return _run_cell_python(cell, tuple(args), kwargs)

    def _zero_arg_super(self):
        frame = self.frames[-1]
        while frame.func is None and frame.parent is not None:
            frame = frame.parent
        fn = frame.func
        code = getattr(fn, "__code__", None)
        if code is None or "__class__" not in code.co_freevars or frame.first_arg is None:
            raise RuntimeError(f"super(): no arguments (at {where(frame.loc())})")
        cls = fn.__closure__[code.co_freevars.index("__class__")].cell_contents
        return super(cls, frame.first_arg)

    # user functions handed to library code ------------------------------------------------------------
    def _proxy(self, v):
        t = type(v)
        if t is types.FunctionType:
            target = v
        elif t is types.MethodType and type(v.__func__) is types.FunctionType:
            target = v.__func__
        else:
            return v
        if not is_user_code(target.__code__) or parse_function(target.__code__) is None:
            return v
        interp = self

        @functools.wraps(v)
        def interpreted(*args, **kwargs):
            if not interp.active:
                return v(*args, **kwargs)
            return interp.call(v, args, kwargs)
        return interpreted

    def _proxy_args(self, args):
        return tuple(self._proxy(a) for a in args)

    def _proxy_kwargs(self, kwargs):
        return {k: self._proxy(v) for k, v in kwargs.items()} if kwargs else kwargs

    def _rebind(self, fn):
        """A minispore function whose closure holds user functions (the wrapper `value_and_grad(f)`
        returns): a copy whose closure holds proxies, so `f` is interpreted when it calls it."""
        cells = fn.__closure__
        if not cells:
            return fn
        new_cells, changed = [], False
        for c in cells:
            try:
                v = c.cell_contents
            except ValueError:
                new_cells.append(c)
                continue
            p = self._proxy(v)
            if p is not v:
                new_cells.append(types.CellType(p))
                changed = True
            else:
                new_cells.append(c)
        if not changed:
            return fn
        g = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, tuple(new_cells))
        g.__kwdefaults__ = fn.__kwdefaults__
        g.__dict__.update(fn.__dict__)
        g.__qualname__ = fn.__qualname__
        return g

    # -- statements ----------------------------------------------------------------------------------------
    def exec_block(self, stmts, frame, cont):
        """Run a statement list. `cont` (tail position only, else None) lists the blocks that follow
        it up to the end of the function: a tensor `if` containing a return moves them into its
        branches. Returns None or a signal (BREAK, CONTINUE, RETURN, RAISED)."""
        for k, stmt in enumerate(stmts):
            frame.lineno = stmt.lineno
            if type(stmt) is ast.If:
                sig = self._guarded(self.exec_if, stmt, frame,
                                    ((stmts[k + 1:],) + cont) if cont is not None else None)
            else:
                handler = _STMT.get(type(stmt))
                if handler is None:
                    sig = self._guarded(fallback.run_statement, self, frame, stmt)
                else:
                    sig = self._guarded(handler, self, stmt, frame)
            if sig is not None:
                return sig
        return None

    def _guarded(self, fn, *args):
        """Run one statement; point any error at the interpreted line."""
        try:
            return fn(*args)
        except MinisporeError as e:
            raise self._relocated(e) from None
        except Exception as e:  # noqa: BLE001 - annotate, never swallow
            self._annotate(e)
            raise

    def _relocated(self, e):
        if getattr(e, "_ast_located", False) or not hasattr(e, "op") or not hasattr(e, "expected"):
            return e
        e._ast_located = True
        if self._outer_where is None or e.where != self._outer_where:
            return e
        try:
            new = type(e)(e.op, e.expected, e.got, where=where(self.location()))
        except Exception:  # noqa: BLE001 - an unusual subclass: keep the original
            return e
        new._ast_located = True
        return new.with_traceback(e.__traceback__)

    def _annotate(self, e):
        if getattr(e, "_ast_located", False):
            return
        try:
            e._ast_located = True
            if hasattr(e, "add_note"):
                e.add_note(f"(while jit capture_mode='ast' compiled '{self.name}', at {where(self.location())})")
        except Exception:  # noqa: BLE001 - exceptions that refuse attributes
            pass

    def exec_if(self, stmt, frame, cont):
        cond = self.eval(stmt.test, frame)
        frame.lineno = stmt.lineno
        if isinstance(cond, Tensor):
            return control_flow.tensor_if(self, stmt, frame, cond, cont)
        if type(cond) is HostResult:
            return fallback.run_statement(self, frame, stmt, subst=("test", cond), what="an `if` on a value "
                                          "computed in Python at run time")
        return self.exec_block(stmt.body if cond else stmt.orelse, frame, cont)

    def s_Expr(self, stmt, frame):
        if isinstance(stmt.value, ast.Constant):
            return None                                  # a docstring or a bare constant
        self.eval(stmt.value, frame)
        return None

    def s_Pass(self, stmt, frame):
        return None

    def s_Return(self, stmt, frame):
        frame.return_value = self.eval(stmt.value, frame) if stmt.value is not None else None
        return RETURN

    def s_Break(self, stmt, frame):
        return BREAK

    def s_Continue(self, stmt, frame):
        return CONTINUE

    def s_Assign(self, stmt, frame):
        value = self.eval(stmt.value, frame)
        for target in stmt.targets:
            self.assign(target, value, frame)
        return None

    def s_AnnAssign(self, stmt, frame):
        if stmt.value is not None:
            self.assign(stmt.target, self.eval(stmt.value, frame), frame)
        return None

    def s_AugAssign(self, stmt, frame):
        op = type(stmt.op)
        rhs = self.eval(stmt.value, frame)
        target = stmt.target
        if isinstance(target, ast.Name):
            cur = self.lookup(target.id, frame)
            self.assign_name(target.id, self._augment(op, cur, rhs), frame)
        elif isinstance(target, ast.Subscript):
            obj = self.eval(target.value, frame)
            idx = self.eval(target.slice, frame)
            cur = self.apply(operator.getitem, (obj, idx), what="[]")
            self.setitem(obj, idx, self._augment(op, cur, rhs), frame)
        elif isinstance(target, ast.Attribute):
            obj = self.eval(target.value, frame)
            cur = self.apply(getattr, (obj, target.attr), what=f".{target.attr}")
            self.setattr(obj, target.attr, self._augment(op, cur, rhs))
        return None

    def _augment(self, op, cur, rhs):
        # tensors: `x += y` is `x = x + y` (values in a graph are immutable); lists etc. keep iadd
        fn = _BINOPS[op] if isinstance(cur, Tensor) or type(cur) is HostResult else _INPLACE[op]
        return self.apply(fn, (cur, rhs), what=_SYMBOL[op] + "=")

    def s_Delete(self, stmt, frame):
        for t in stmt.targets:
            if isinstance(t, ast.Name):
                if t.id not in frame.env:
                    raise NameError(f"name '{t.id}' is not defined (at {where(frame.loc())})")
                del frame.env[t.id]
            elif isinstance(t, ast.Subscript):
                self.apply(operator.delitem, (self.eval(t.value, frame), self.eval(t.slice, frame)), what="del")
            elif isinstance(t, ast.Attribute):
                self.apply(delattr, (self.eval(t.value, frame), t.attr), what="del")
            else:
                self.assign_delete_tuple(t, frame)
        return None

    def assign_delete_tuple(self, t, frame):
        for e in t.elts:
            self.s_Delete(ast.Delete(targets=[e]), frame)

    def s_Global(self, stmt, frame):
        return fallback.declare(self, frame, stmt, "global_names")

    def s_Nonlocal(self, stmt, frame):
        return fallback.declare(self, frame, stmt, "nonlocal_names")

    def s_Import(self, stmt, frame):
        return fallback.run_statement(self, frame, stmt, allow_fullgraph=True)

    s_ImportFrom = s_Import

    def s_Assert(self, stmt, frame):
        test = self.eval(stmt.test, frame)
        if isinstance(test, Tensor) or type(test) is HostResult:
            msg = self.eval(stmt.msg, frame) if stmt.msg is not None else None
            self.session.host_call(fallback.runtime_assert, (test, msg), {}, "assert")
            return None
        if not test:
            raise AssertionError(self.eval(stmt.msg, frame)) if stmt.msg is not None else AssertionError()
        return None

    def s_Raise(self, stmt, frame):
        if stmt.exc is None:
            return fallback.run_statement(self, frame, stmt)
        exc = self.eval(stmt.exc, frame)
        cause = self.eval(stmt.cause, frame) if stmt.cause is not None else None
        session = self.session
        if session.parent is None and not is_dynamic_leaf(exc) and not is_dynamic_leaf(cause):
            if isinstance(exc, type):
                exc = exc()
            raise exc from cause                         # reached at compile time: a compile-time error
        if session.defer_raise:
            session.raise_info = (exc, cause)            # a branch of an If: control_flow emits it
        else:                                            # raise when the graph runs, here
            session.host_call(fallback.runtime_raise, (exc, cause), {}, "raise", allow_fullgraph=True)
        return RAISED

    def s_FunctionDef(self, stmt, frame):
        if parse_generator(stmt):
            gen = stmt if isinstance(stmt, ast.AsyncFunctionDef) else _find_generator(stmt)
            kind = "statement 'AsyncFunctionDef'" if gen is stmt else f"expression '{type(gen).__name__}'"
            return fallback.run_statement(self, frame, stmt, what=f"Unsupported {kind}")
        defaults = [self.eval(d, frame) for d in stmt.args.defaults]
        kw_defaults = [self.eval(d, frame) if d is not None else MISSING for d in stmt.args.kw_defaults]
        fn = InterpretedFunction(self, stmt, frame, defaults, kw_defaults, stmt.name)
        for dec in reversed(stmt.decorator_list):
            fn = self.call(self.eval(dec, frame), (fn,))
        self.assign_name(stmt.name, fn, frame)
        return None

    def s_For(self, stmt, frame):
        it = self.eval(stmt.iter, frame)
        frame.lineno = stmt.lineno
        if type(it) is HostResult:
            return fallback.run_statement(self, frame, stmt, subst=("iter", it),
                                          what="a for loop over a value computed in Python at run time")
        if isinstance(it, Tensor):
            if len(it.shape) == 0:
                raise TypeError(f"iteration over a 0-d tensor (at {where(frame.loc())})")
            items = (it[i] for i in range(it.shape[0]))
        else:
            items = iter(it)
        n = 0
        for item in items:
            n += 1
            if n > MAX_UNROLL:
                raise AstCaptureError("for", f"a loop of at most {MAX_UNROLL} iterations to unroll",
                                      "more (an endless iterator?)", where=where(frame.loc(stmt.lineno)))
            self.assign(stmt.target, item, frame)
            sig = self.exec_block(stmt.body, frame, None)
            if sig is BREAK:
                return None
            if sig is RETURN or sig is RAISED:
                return sig
        return self.exec_block(stmt.orelse, frame, None)

    def s_While(self, stmt, frame):
        n = 0
        while True:
            cond = self.eval(stmt.test, frame)
            frame.lineno = stmt.lineno
            if isinstance(cond, Tensor):
                control_flow.tensor_while(self, stmt, frame, cond)
                return self.exec_block(stmt.orelse, frame, None)
            if type(cond) is HostResult:
                return fallback.run_statement(self, frame, stmt, what="a while loop on a value computed in "
                                              "Python at run time")
            if not cond:
                return self.exec_block(stmt.orelse, frame, None)
            n += 1
            if n > MAX_UNROLL:
                raise AstCaptureError("while", f"a loop on Python values of at most {MAX_UNROLL} iterations "
                                      f"(it is unrolled at compile time)", "more (an endless loop?)",
                                      where=where(frame.loc(stmt.lineno)))
            sig = self.exec_block(stmt.body, frame, None)
            if sig is BREAK:
                return None
            if sig is RETURN or sig is RAISED:
                return sig

    # -- assignment ------------------------------------------------------------------------------------
    def assign(self, target, value, frame):
        t = type(target)
        if t is ast.Name:
            self.assign_name(target.id, value, frame)
        elif t is ast.Tuple or t is ast.List:
            self.unpack(target.elts, value, frame)
        elif t is ast.Subscript:
            self.setitem(self.eval(target.value, frame), self.eval(target.slice, frame), value, frame)
        elif t is ast.Attribute:
            self.setattr(self.eval(target.value, frame), target.attr, value)
        else:
            raise AstCaptureError("assignment", "a name, tuple, subscript or attribute target",
                                  type(target).__name__, where=where(frame.loc()))

    def unpack(self, elts, value, frame):
        star = [i for i, e in enumerate(elts) if isinstance(e, ast.Starred)]
        if type(value) is HostResult:
            if star:
                raise AstCaptureError("unpacking", "a value known at compile time for starred unpacking",
                                      "a value computed in Python at run time", where=where(frame.loc()))
            items = [self.runtime_call(operator.getitem, (value, i), {}, "unpack") for i in range(len(elts))]
        else:
            items = list(value) if not isinstance(value, Tensor) else [value[i] for i in range(_len(value))]
        if star:
            s = star[0]
            n_after = len(elts) - s - 1
            if len(items) < len(elts) - 1:
                raise ValueError(f"not enough values to unpack (expected at least {len(elts) - 1}, got {len(items)})")
            items = items[:s] + [list(items[s:len(items) - n_after])] + items[len(items) - n_after:]
            elts = [e.value if isinstance(e, ast.Starred) else e for e in elts]
        if len(items) != len(elts):
            raise ValueError(f"{'too many' if len(items) > len(elts) else 'not enough'} values to unpack "
                             f"(expected {len(elts)}, got {len(items)})")
        for e, v in zip(elts, items):
            self.assign(e, v, frame)

    def setitem(self, obj, idx, value, frame):
        if type(obj) is HostResult or _contains_opaque(idx) or type(value) is HostResult:
            self.runtime_call(operator.setitem, (obj, idx, value), {}, "[]=")
            return
        obj[idx] = value          # a traced tensor records setitem and rebinds itself (trace.py)

    def setattr(self, obj, name, value):
        if type(obj) is HostResult:
            self.runtime_call(setattr, (obj, name, value), {}, f".{name}=")
            return
        setattr(obj, name, value)

    # -- expressions -------------------------------------------------------------------------------------
    def eval(self, node, frame):
        handler = _EXPR.get(type(node))
        if handler is None:
            raise unsupported(f"Unsupported expression '{type(node).__name__}'", frame.loc(node.lineno),
                              hint="rewrite it; the ast mode cannot fall back inside an expression")
        return handler(self, node, frame)

    def e_Constant(self, node, frame):
        return node.value

    def e_Name(self, node, frame):
        return self.lookup(node.id, frame)

    def e_Attribute(self, node, frame):
        obj = self.eval(node.value, frame)
        return self.apply(getattr, (obj, node.attr), what=f".{node.attr}")

    def e_Subscript(self, node, frame):
        obj = self.eval(node.value, frame)
        idx = self.eval(node.slice, frame)
        return self.apply(operator.getitem, (obj, idx), what="[]")

    def e_Slice(self, node, frame):
        ev = self.eval
        return slice(ev(node.lower, frame) if node.lower is not None else None,
                     ev(node.upper, frame) if node.upper is not None else None,
                     ev(node.step, frame) if node.step is not None else None)

    def _elements(self, elts, frame):
        out = []
        for e in elts:
            if isinstance(e, ast.Starred):
                v = self.eval(e.value, frame)
                if type(v) is HostResult:
                    raise AstCaptureError("*", "a value known at compile time to unpack",
                                          "a value computed in Python at run time", where=where(frame.loc()))
                out.extend(v if not isinstance(v, Tensor) else [v[i] for i in range(_len(v))])
            else:
                out.append(self.eval(e, frame))
        return out

    def e_Tuple(self, node, frame):
        return tuple(self._elements(node.elts, frame))

    def e_List(self, node, frame):
        return self._elements(node.elts, frame)

    def e_Set(self, node, frame):
        return set(self._elements(node.elts, frame))

    def e_Dict(self, node, frame):
        out = {}
        for k, v in zip(node.keys, node.values):
            if k is None:
                out.update(self.eval(v, frame))
            else:
                out[self.eval(k, frame)] = self.eval(v, frame)
        return out

    def e_BinOp(self, node, frame):
        left = self.eval(node.left, frame)
        right = self.eval(node.right, frame)
        frame.lineno = node.lineno
        op = type(node.op)
        return self.apply(_BINOPS[op], (left, right), what=_SYMBOL[op])

    def e_UnaryOp(self, node, frame):
        v = self.eval(node.operand, frame)
        if isinstance(node.op, ast.Not):
            if isinstance(v, Tensor):
                from ....ops import functional as F
                return F.logical_not(_as_bool_tensor(v))
            if type(v) is HostResult:
                return self.runtime_call(operator.not_, (v,), {}, "not")
            return not v
        return self.apply(_UNARY[type(node.op)], (v,), what=_SYMBOL[type(node.op)])

    def e_BoolOp(self, node, frame):
        is_and = isinstance(node.op, ast.And)
        dynamic = []
        v = None
        for e in node.values:
            v = self.eval(e, frame)
            if isinstance(v, Tensor) or type(v) is HostResult:
                dynamic.append(v)
                continue
            if is_and and not v:                 # a false constant decides an `and`
                return v if not dynamic else False
            if not is_and and v:                 # a true constant decides an `or`
                return v if not dynamic else True
        if not dynamic:
            return v
        if len(dynamic) == 1 and dynamic[0] is v:
            return v                             # `flag and x` -> x, as in Python
        if any(type(d) is HostResult for d in dynamic):
            return self.runtime_call(_all if is_and else _any, (tuple(dynamic),), {}, "and" if is_and else "or")
        from ....ops import functional as F
        combine = F.logical_and if is_and else F.logical_or
        acc = _as_bool_tensor(dynamic[0])
        for d in dynamic[1:]:
            acc = combine(acc, _as_bool_tensor(d))
        return acc

    def e_Compare(self, node, frame):
        left = self.eval(node.left, frame)
        results = []
        for op, comp in zip(node.ops, node.comparators):
            right = self.eval(comp, frame)
            frame.lineno = node.lineno
            t = type(op)
            if t is ast.Is or t is ast.IsNot:
                r = _CMP[t](left, right)
            else:
                r = self.apply(_CMP[t], (left, right), what=_SYMBOL[t])
            if len(node.ops) == 1:
                return r
            if not (isinstance(r, Tensor) or type(r) is HostResult) and not r:
                return r
            results.append(r)
            left = right
        dynamic = [r for r in results if isinstance(r, Tensor) or type(r) is HostResult]
        if not dynamic:
            return results[-1]
        if any(type(d) is HostResult for d in dynamic):
            return self.runtime_call(_all, (tuple(dynamic),), {}, "comparison chain")
        from ....ops import functional as F
        acc = _as_bool_tensor(dynamic[0])
        for d in dynamic[1:]:
            acc = F.logical_and(acc, _as_bool_tensor(d))
        return acc

    def e_Call(self, node, frame):
        fn = self.eval(node.func, frame)
        args = []
        for a in node.args:
            if isinstance(a, ast.Starred):
                v = self.eval(a.value, frame)
                if type(v) is HostResult:
                    raise AstCaptureError("*args", "a value known at compile time to unpack",
                                          "a value computed in Python at run time", where=where(frame.loc()))
                args.extend(v if not isinstance(v, Tensor) else [v[i] for i in range(_len(v))])
            else:
                args.append(self.eval(a, frame))
        kwargs = {}
        for kw in node.keywords:
            v = self.eval(kw.value, frame)
            if kw.arg is None:
                kwargs.update(v)
            else:
                kwargs[kw.arg] = v
        frame.lineno = node.lineno
        return self.call(fn, tuple(args), kwargs)

    def e_IfExp(self, node, frame):
        cond = self.eval(node.test, frame)
        if isinstance(cond, Tensor):
            return control_flow.tensor_ifexp(self, node, frame, cond)
        if type(cond) is HostResult:
            a, b = self.eval(node.body, frame), self.eval(node.orelse, frame)
            return self.runtime_call(_choose, (cond, a, b), {}, "if-else expression")
        return self.eval(node.body if cond else node.orelse, frame)

    def e_Lambda(self, node, frame):
        defaults = [self.eval(d, frame) for d in node.args.defaults]
        kw_defaults = [self.eval(d, frame) if d is not None else MISSING for d in node.args.kw_defaults]
        return InterpretedFunction(self, node, frame, defaults, kw_defaults, "<lambda>")

    def e_NamedExpr(self, node, frame):
        value = self.eval(node.value, frame)
        self.assign_name(node.target.id, value, frame)
        return value

    def e_JoinedStr(self, node, frame):
        parts = []
        for v in node.values:
            if isinstance(v, ast.Constant):
                parts.append(v.value)
            else:
                spec = self.eval(v.format_spec, frame) if v.format_spec is not None else ""
                parts.append((self.eval(v.value, frame), v.conversion, spec))
        if any(type(p) is tuple and (is_dynamic_leaf(p[0]) or is_dynamic_leaf(p[2])) for p in parts):
            return self.runtime_call(_format_parts, (parts,), {}, "f-string")
        return _format_parts(parts)

    def e_FormattedValue(self, node, frame):
        spec = self.eval(node.format_spec, frame) if node.format_spec is not None else ""
        return _format_parts([(self.eval(node.value, frame), node.conversion, spec)])

    def _comprehension(self, node, frame, emit):
        scope = Frame(frame.fn_name, frame.filename, frame.globals, {}, parent=frame, lineno=frame.lineno,
                      user=frame.user)
        gens = node.generators

        def loop(i):
            g = gens[i]
            it = self.eval(g.iter, frame if i == 0 else scope)
            if type(it) is HostResult:
                raise AstCaptureError("comprehension", "an iterable known at compile time",
                                      "a value computed in Python at run time", where=where(frame.loc(node.lineno)))
            items = iter(it) if not isinstance(it, Tensor) else (it[k] for k in range(_len(it)))
            for item in items:
                self.assign(g.target, item, scope)
                ok = True
                for cond in g.ifs:
                    c = self.eval(cond, scope)
                    if isinstance(c, Tensor) or type(c) is HostResult:
                        raise AstCaptureError("comprehension", "an `if` filter known at compile time",
                                              "a filter on a tensor value (the number of results would depend "
                                              "on data)", where=where(frame.loc(node.lineno)))
                    if not c:
                        ok = False
                        break
                if not ok:
                    continue
                if i + 1 < len(gens):
                    loop(i + 1)
                else:
                    emit(scope)
        loop(0)

    def e_ListComp(self, node, frame):
        out = []
        self._comprehension(node, frame, lambda s: out.append(self.eval(node.elt, s)))
        return out

    def e_SetComp(self, node, frame):
        return set(self.e_ListComp(node, frame))

    def e_GeneratorExp(self, node, frame):
        return iter(self.e_ListComp(node, frame))

    def e_DictComp(self, node, frame):
        out = {}

        def emit(s):
            out[self.eval(node.key, s)] = self.eval(node.value, s)
        self._comprehension(node, frame, emit)
        return out


def parse_generator(stmt) -> bool:
    return isinstance(stmt, ast.AsyncFunctionDef) or _find_generator(stmt) is not None


def _len(t):
    if len(t.shape) == 0:
        raise TypeError("iteration over a 0-d tensor")
    return t.shape[0]


def _all(values):
    return all(bool(v) for v in values)


def _any(values):
    return any(bool(v) for v in values)


def _choose(cond, a, b):
    return a if cond else b


def _format_parts(parts):
    out = []
    for p in parts:
        if type(p) is str:
            out.append(p)
            continue
        value, conversion, spec = p
        if conversion == ord("r"):
            value = repr(value)
        elif conversion == ord("s"):
            value = str(value)
        elif conversion == ord("a"):
            value = ascii(value)
        out.append(format(value, spec))
    return "".join(out)


_signatures: dict = {}


def _signature(fn):
    sig = _signatures.get(fn)
    if sig is None:
        sig = _signatures[fn] = inspect.signature(fn, follow_wrapped=False)
    return sig


_JIT_TYPES = None


def _jit_types():
    global _JIT_TYPES
    if _JIT_TYPES is None:
        from ....jit import JitFunction, _BoundJit
        _JIT_TYPES = (JitFunction, _BoundJit)
    return _JIT_TYPES


_STMT = {}
_EXPR = {}
for _name in dir(Interpreter):
    if _name.startswith("s_"):
        _STMT[getattr(ast, _name[2:])] = getattr(Interpreter, _name)
    elif _name.startswith("e_"):
        _EXPR[getattr(ast, _name[2:])] = getattr(Interpreter, _name)

__all__ = ["Interpreter", "Frame", "InterpretedFunction", "Undefined", "BREAK", "CONTINUE", "RETURN", "RAISED",
           "MAX_UNROLL"]
