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
                       or over the first axis of a tensor; break/continue/else work, also under a
                       tensor condition (exit flags: loop_exits.py).
`return`               ends the function; inside a tensor `if` the code after the `if` is moved into
                       both branches, so both end in a return (see control_flow.py); inside a loop
                       it sets exit flags (loop_exits.py).
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

from ....common.errors import MinisporeError
from ....common.tensor import Tensor
from ...trace.cells import is_jitted, jitted_target, run_cell_python
from ...guards.code_reads import write_only_names
from ...guards.globals_read import globals_guard, guard_token   # (the compile cache rebuilds the guard)
from ...trace.session import CaptureError, HostResult, user_source
from . import control_flow, fallback, loop_exits
from .expressions import BINOPS, INPLACE, SYMBOL, Expressions, rows
from .frames import Frame, InterpretedFunction
from .session import AstCaptureError, contains_opaque, is_dynamic_leaf, unsupported, where
from .signals import BREAK, CONTINUE, MAYBE, MISSING, RAISED, RETURN, Undefined
from .source import find_generator, is_user_code, parse_function

MAX_UNROLL = 100_000          # iterations of one unrolled loop before giving up (a runaway loop)


def _interp_name(fn):
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or type(fn).__name__


def _invoke(fn, args, kwargs):
    """What a run-time host call of `fn(*args, **kwargs)` runs (fn may itself be a run-time value)."""
    return fn(*args, **kwargs)


def _invoke_method(obj, name, args, kwargs):
    return getattr(obj, name)(*args, **kwargs)


# -- the interpreter ------------------------------------------------------------------------------------
class Interpreter(Expressions):
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
        from ...trace.session import Tracer
        c = Tracer.make(x._data.value, x._data.session)
        self._clones[id(c)] = (c, self.original(x))
        return c

    # -- guards -----------------------------------------------------------------------------------------
    def note_global(self, g, name, value, frame=None):
        if isinstance(value, types.ModuleType):
            return
        key = (id(g), name)
        # a container the code only appends to (`LOG.append(...)`): its contents did not shape the
        # graph, it is guarded by identity (graph/cache.py: write_only_names)
        f = frame
        while f is not None and f.func is None:
            f = f.parent
        code = getattr(getattr(f, "func", None), "__code__", None)
        written = code is not None and name in write_only_names(code)
        hit = self.global_reads.get(key)
        if hit is None:
            self.global_reads[key] = (g, name, value, written)
        elif hit[3] and not written:        # (the value first read is the one the guard keeps)
            self.global_reads[key] = (g, name, hit[2], False)

    def guards(self) -> list:
        # tokens taken now, after the capture: a container by what it holds once the capture is
        # done (a capture that appends to a list runs its side effect once; it must not fail its
        # own guard on the next call), a scalar by the value read (immutable: the same thing)
        reads = [(g, name, guard_token(v, written)) for g, name, v, written in self.global_reads.values()]
        if not reads:
            return []
        return [globals_guard(reads)]

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
                self.note_global(g, name, v, frame)
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
        jitted = jitted_target(fn)
        if jitted is not None:                   # a jitted function called here is inlined
            return self.call(jitted[0], jitted[1] + tuple(args), kwargs)
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
        if type(fn) is HostResult or contains_opaque(args) or contains_opaque(kwargs):
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
            if self.exec_block(node.body, frame, ()) is MAYBE:     # returned on some paths only
                control_flow.finish_function(self, frame, frame.loc())
            return frame.return_value
        finally:
            self.frames.pop()

    def call_cell(self, cell, args, kwargs):
        """A Cell called during the capture: interpret its construct (plain calls), or run its
        Python (__call__ with hooks, mixed precision or a custom bprop)."""
        if cell.__dict__.get("_plain_call"):
            construct = type(cell).construct
            if is_jitted(construct):                             # a @jit-decorated construct
                construct = construct.capture_target()[0]
            if type(construct) is types.FunctionType:
                parsed = parse_function(construct.__code__)
                if parsed is not None:
                    return self.call_parsed(construct, parsed, (cell,) + tuple(args), kwargs)
        return run_cell_python(cell, tuple(args), kwargs)

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
        branches. Returns None or a signal (BREAK, CONTINUE, RETURN, RAISED, MAYBE).

        After a statement that may have exited under a tensor condition (MAYBE), the rest of the
        block runs under a guard: only on the paths where no exit flag is set (loop_exits.py)."""
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
            if sig is MAYBE:
                sig = loop_exits.resolve(frame)
                if sig is MAYBE and k + 1 < len(stmts):
                    rest = stmts[k + 1:]
                    self._guarded(control_flow.guard, self, frame, loop_exits.flag_names(frame),
                                  lambda: self.exec_block(rest, frame, None), frame.loc(rest[0].lineno))
                    return loop_exits.resolve(frame)
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
        fn = BINOPS[op] if isinstance(cur, Tensor) or type(cur) is HostResult else INPLACE[op]
        return self.apply(fn, (cur, rhs), what=SYMBOL[op] + "=")

    def s_Delete(self, stmt, frame):
        targets = list(stmt.targets)
        while targets:
            t = targets.pop(0)
            if isinstance(t, ast.Name):
                if t.id not in frame.env:
                    raise NameError(f"name '{t.id}' is not defined (at {where(frame.loc())})")
                del frame.env[t.id]
            elif isinstance(t, ast.Subscript):
                self.apply(operator.delitem, (self.eval(t.value, frame), self.eval(t.slice, frame)), what="del")
            elif isinstance(t, ast.Attribute):
                self.apply(delattr, (self.eval(t.value, frame), t.attr), what="del")
            else:                                   # del (a, b)
                targets[:0] = t.elts
        return None

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
        gen = stmt if isinstance(stmt, ast.AsyncFunctionDef) else find_generator(stmt)
        if gen is not None:
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
        loop = loop_exits.enter_loop(frame)
        try:
            n = 0
            for item in items:
                n += 1
                if n > MAX_UNROLL:
                    raise AstCaptureError("for", f"a loop of at most {MAX_UNROLL} iterations to unroll",
                                          "more (an endless iterator?)", where=where(frame.loc(stmt.lineno)))

                def iteration(item=item):
                    self.assign(stmt.target, item, frame)
                    return self.exec_block(stmt.body, frame, None)
                sig = self._loop_iteration(frame, loop, iteration, stmt)
                if sig is BREAK:
                    return self._after_loop(frame)
                if sig is RETURN or sig is RAISED:
                    return sig
        finally:
            broke = loop_exits.leave_loop(frame, loop)
        return self._loop_else(frame, broke, stmt)

    def _loop_iteration(self, frame, loop, iteration, stmt):
        """One iteration of an unrolled loop; once a break or return flag is a tensor (an exit under
        a tensor condition), it runs under a guard, on the paths that have not exited."""
        if loop_exits.pending(frame, (loop.brk, loop_exits.RET)):
            self._guarded(control_flow.guard, self, frame, (loop.brk, loop_exits.RET), iteration,
                          frame.loc(stmt.lineno))
            sig = MAYBE
        else:
            sig = iteration()
        return loop_exits.end_iteration(frame, loop, sig)

    @staticmethod
    def _after_loop(frame):
        """The signal of a finished loop for the code after it: MAYBE while the return flag is a tensor."""
        return MAYBE if loop_exits.pending(frame, (loop_exits.RET,)) else None

    def _loop_else(self, frame, broke, stmt):
        """The loop ran out without a static break: its `else:` runs on the paths that neither broke
        nor returned. (The loop's flags are gone by now: a break inside `else` is the outer loop's.)"""
        if broke is True or not stmt.orelse:
            return self._after_loop(frame)
        if isinstance(broke, Tensor) or loop_exits.pending(frame, (loop_exits.RET,)):
            frame.env[loop_exits.BROKE] = broke
            try:
                self._guarded(control_flow.guard, self, frame, (loop_exits.BROKE, loop_exits.RET),
                              lambda: self.exec_block(stmt.orelse, frame, None), frame.loc(stmt.orelse[0].lineno))
            finally:
                frame.env.pop(loop_exits.BROKE, None)
            return loop_exits.resolve(frame)
        return self.exec_block(stmt.orelse, frame, None)

    def s_While(self, stmt, frame):
        loop = loop_exits.enter_loop(frame)
        try:
            n = 0
            while True:
                cond = self.eval(stmt.test, frame)
                frame.lineno = stmt.lineno
                if isinstance(cond, Tensor):
                    control_flow.tensor_while(self, stmt, frame, cond)
                    break
                if type(cond) is HostResult:
                    if loop_exits.pending(frame, (loop.brk, loop_exits.RET)):
                        raise AstCaptureError("while", "a loop condition known at compile time, or a tensor, "
                                              "after a break/return under a tensor condition", "a value computed "
                                              "in Python at run time", where=where(frame.loc(stmt.lineno)))
                    return fallback.run_statement(self, frame, stmt, what="a while loop on a value computed in "
                                                  "Python at run time")
                if not cond:
                    break
                n += 1
                if n > MAX_UNROLL:
                    raise AstCaptureError("while", f"a loop on Python values of at most {MAX_UNROLL} iterations "
                                          f"(it is unrolled at compile time)", "more (an endless loop?)",
                                          where=where(frame.loc(stmt.lineno)))
                sig = self._loop_iteration(frame, loop, lambda: self.exec_block(stmt.body, frame, None), stmt)
                if sig is BREAK:
                    return self._after_loop(frame)
                if sig is RETURN or sig is RAISED:
                    return sig
        finally:
            broke = loop_exits.leave_loop(frame, loop)
        return self._loop_else(frame, broke, stmt)

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
            items = list(value) if not isinstance(value, Tensor) else [value[i] for i in range(rows(value))]
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
        if type(obj) is HostResult or contains_opaque(idx) or type(value) is HostResult:
            self.runtime_call(operator.setitem, (obj, idx, value), {}, "[]=")
            return
        obj[idx] = value          # a traced tensor records setitem and rebinds itself (trace/session.py)

    def setattr(self, obj, name, value):
        if type(obj) is HostResult:
            self.runtime_call(setattr, (obj, name, value), {}, f".{name}=")
            return
        setattr(obj, name, value)


_signatures: dict = {}


def _signature(fn):
    sig = _signatures.get(fn)
    if sig is None:
        sig = _signatures[fn] = inspect.signature(fn, follow_wrapped=False)
    return sig


_STMT = {getattr(ast, name[2:]): getattr(Interpreter, name) for name in dir(Interpreter) if name.startswith("s_")}

__all__ = ["Interpreter", "Frame", "InterpretedFunction", "Undefined", "BREAK", "CONTINUE", "RETURN", "RAISED",
           "MAX_UNROLL"]
