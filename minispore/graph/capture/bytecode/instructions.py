"""The bytecode interpreter: a stack machine over `dis.get_instructions(fn)`.

Supported CPython versions: **3.11 and 3.12** (`SUPPORTED_VERSIONS`). Bytecode changes with
every minor version (3.11 added PRECALL/KW_NAMES and zero-cost exceptions, 3.12 inlined
comprehensions and added LOAD_SUPER_ATTR, BINARY_SLICE, END_FOR, RETURN_CONST...); each opcode
below is written against the documented semantics of both. On another version the capture refuses
with a clear message (bytecode/__init__.py falls back to eager execution, or raises when
fullgraph=True).

One `Interpreter` class runs in two modes on the same handlers:

* **symbolic** (while capturing, `session` set): tensors in the frame are Tracers, so every op,
  method or Cell call on them is recorded into the session's graph. Before each instruction the
  stack is snapshotted; if the instruction cannot be captured (a `NeedsBreak` from a handler, or
  a `CaptureError` from a Tracer), the snapshot and the graph builder are rolled back and `run`
  returns a `BreakInfo`: the graph ends *before* that instruction.
* **concrete** (the runner's eager steps and eager fallbacks): the same instructions on real
  values, which is just Python - `bool(tensor)` decides a branch, `print` prints.

Which functions it can run: plain Python functions (not generators or coroutines) with no
`try`/`except`/`finally`/`with` blocks (their handlers would need the exception table) and only
opcodes from the table below. `CodeInfo` checks this once per code object by walking the
instructions reachable from the start; a function that fails the check runs eagerly as a whole
(reported as one graph break at the offending line).
"""
from __future__ import annotations

import builtins
import dis
import inspect
import operator
import sys
import types

import numpy as np

from ....common.errors import MinisporeError, user_frame
from ....common.tensor import Tensor
from ...trace.session import CaptureError, Tracer
from .breaks import BreakInfo, NeedsBreak, call_break_reason, describe_capture_error, has_symbolic, is_symbolic
from .frames import Frame
from .values import NULL, Lazy, SeqIter

SUPPORTED_VERSIONS = ((3, 11), (3, 12))
PY = sys.version_info[:2]


def version_supported() -> bool:
    return PY in SUPPORTED_VERSIONS


def _nb_function(name):
    base = name[3:]
    inplace = base.startswith("INPLACE_")
    base = base.replace("INPLACE_", "")
    fn = {"ADD": "add", "AND": "and_", "FLOOR_DIVIDE": "floordiv", "LSHIFT": "lshift", "MATRIX_MULTIPLY": "matmul",
          "MULTIPLY": "mul", "REMAINDER": "mod", "OR": "or_", "POWER": "pow", "RSHIFT": "rshift",
          "SUBTRACT": "sub", "TRUE_DIVIDE": "truediv", "XOR": "xor"}[base]
    return getattr(operator, "i" + fn.rstrip("_") if inplace else fn)


_BINARY_OPS = [_nb_function(name) for name, _ in getattr(dis, "_nb_ops", [])]
_COMPARE = {"<": operator.lt, "<=": operator.le, "==": operator.eq, "!=": operator.ne, ">": operator.gt,
            ">=": operator.ge}
_GENERATOR_FLAGS = (inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR
                    | inspect.CO_ITERABLE_COROUTINE)
_JUMPS = set(dis.hasjrel) | set(dis.hasjabs)
_ENDS = {"RETURN_VALUE", "RETURN_CONST", "RAISE_VARARGS", "RERAISE", "JUMP_FORWARD", "JUMP_BACKWARD",
         "JUMP_BACKWARD_NO_INTERRUPT", "JUMP"}
_INTRINSICS = {"INTRINSIC_LIST_TO_TUPLE", "INTRINSIC_UNARY_POSITIVE"}
_DICT_VIEWS = (type({}.keys()), type({}.values()), type({}.items()))


class Return:
    """What a RETURN handler hands back to the run loop."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


# -- per code object -----------------------------------------------------------------------------------
class CodeInfo:
    """A function's instructions, line numbers and closure, and whether the interpreter can run it."""

    def __init__(self, fn):
        code = fn.__code__
        self.fn = fn
        self.code = code
        self.name = code.co_qualname if hasattr(code, "co_qualname") else code.co_name
        self.filename = code.co_filename
        self.instructions = list(dis.get_instructions(code))
        self.index = {ins.offset: i for i, ins in enumerate(self.instructions)}
        lines, last = [], code.co_firstlineno
        for ins in self.instructions:
            ln = ins.positions.lineno if ins.positions is not None else None
            if ln is not None:
                last = ln
            lines.append(last)
        self.lines = lines
        self.cellvars = code.co_cellvars
        self.free_cells = dict(zip(code.co_freevars, fn.__closure__ or ()))
        self.globals = fn.__globals__
        b = self.globals.get("__builtins__", builtins)
        self.builtins = b if isinstance(b, dict) else b.__dict__
        self._signature = None
        self.unsupported = self._check()            # None, or (reason, lineno)

    @property
    def signature(self):
        if self._signature is None:
            self._signature = inspect.signature(self.fn, follow_wrapped=False)
        return self._signature

    def target(self, ins) -> int:
        """Instruction index a jump goes to."""
        return self.index[ins.argval]

    def _check(self):
        code = self.code
        if code.co_flags & _GENERATOR_FLAGS:
            return "generator and coroutine functions are not supported by the bytecode capture", code.co_firstlineno
        parse = getattr(dis, "_parse_exception_table", None)
        for entry in (parse(code) if parse is not None else ()):
            i = self.index.get(entry.target)
            if i is not None and self.instructions[i].opname == "PUSH_EXC_INFO":
                j = self.index.get(entry.start, 0)
                if j > 0 and self.instructions[j - 1].opname == "NOP":       # the `try:` line itself
                    j -= 1
                return ("try/except/finally/with (exception handling) is not supported by the bytecode capture",
                        self.lines[j])
        seen, todo = set(), [0]
        while todo:
            i = todo.pop()
            if i in seen or i >= len(self.instructions):
                continue
            seen.add(i)
            ins = self.instructions[i]
            if ins.opname not in Interpreter.HANDLERS or (
                    ins.opname == "CALL_INTRINSIC_1" and ins.argrepr not in _INTRINSICS) or (
                    ins.opname == "RAISE_VARARGS" and ins.arg == 0):
                return f"instruction {ins.opname} is not supported by the bytecode capture", self.lines[i]
            if ins.opcode in _JUMPS:
                t = self.index[ins.argval]
                todo.append(t)
                if self.instructions[t].opname == "END_FOR":
                    todo.append(t + 1)
            if ins.opname not in _ENDS:
                todo.append(i + 1)
        return None


def code_info(fn) -> CodeInfo:
    """The CodeInfo of a plain function (made per compile: cheap next to the capture itself)."""
    return CodeInfo(fn)


class _TracerMethod:
    """`Tensor.<name>` for a Tracer: Tracer overrides some Tensor methods (asnumpy, copy...), but
    the function left on the stack at a graph break is called at run time on a concrete Tensor, so
    it must dispatch on the object it gets, not on the class seen at capture."""

    __slots__ = ("name",)
    _cache: dict = {}

    def __new__(cls, name):
        m = cls._cache.get(name)
        if m is None:
            m = cls._cache[name] = object.__new__(cls)
            m.name = name
        return m

    def __call__(self, obj, *args, **kwargs):
        return getattr(obj, self.name)(*args, **kwargs)

    def __repr__(self):
        return f"Tensor.{self.name}"


def _load_method(obj, name):
    """CPython's method load: `(function, obj)` when `name` is a plain method found on the type
    (so no bound-method object hides `obj` - a tensor - from the frame state), else `(NULL, attr)`."""
    tp = type(obj)
    if tp is Tracer and name in Tracer.__dict__:
        return _TracerMethod(name), obj
    if tp.__getattribute__ is object.__getattribute__:
        for klass in tp.__mro__:
            d = klass.__dict__
            if name in d:
                descr = d[name]
                if type(descr) in (types.FunctionType, types.MethodDescriptorType, types.WrapperDescriptorType):
                    try:
                        inst = object.__getattribute__(obj, "__dict__")
                    except AttributeError:
                        inst = None
                    if inst is None or name not in inst:
                        return descr, obj
                break
    return NULL, getattr(obj, name)


def make_iter(v):
    """GET_ITER: a SeqIter (visible position) over anything with a length, else CPython's iterator."""
    t = type(v)
    if t is SeqIter:
        return v
    if t is tuple or t is list or t is range:
        return SeqIter(v)
    if isinstance(v, Tensor):
        return SeqIter(tuple(v))
    if t is dict or t in _DICT_VIEWS or t is set or t is frozenset or t is str or t is bytes:
        return SeqIter(tuple(v))
    if hasattr(t, "__len__") and not hasattr(t, "__next__") and (hasattr(t, "__iter__") or hasattr(t, "__getitem__")):
        return SeqIter(tuple(v))
    return iter(v)


def _sized(x) -> bool:
    return hasattr(type(x), "__len__") and not hasattr(type(x), "__next__")


# -- the interpreter --------------------------------------------------------------------------------
class Interpreter:
    """Runs one frame of `info`'s function from instruction `pc`. See the module docstring."""

    HANDLERS: dict = {}

    def __init__(self, info: CodeInfo, frame: Frame, pc: int = 0, session=None, outer_where=None):
        self.info = info
        self.f = frame
        self.stack = frame.stack
        self.pc = pc
        self.session = session
        self.symbolic = session is not None
        self.used: dict = {}              # Lazy slot -> value the segment specialised on
        self.globals_read: dict = {}      # global name -> value read (or _MISSING)
        self.outer_where = outer_where
        self.ins = None

    # -- running ------------------------------------------------------------------------------------
    def run(self):
        """Concrete mode: run to the function's return and give its value."""
        handlers, instrs = self.HANDLERS, self.info.instructions
        try:
            while True:
                ins = instrs[self.pc]
                self.pc += 1
                r = handlers[ins.opname](self, ins)
                if r is not None:
                    return r.value
        except MinisporeError as e:
            raise self._relocate(e, self.pc - 1) from None

    def step(self):
        """Concrete mode: run one instruction. Returns a `Return` if it returned."""
        ins = self.info.instructions[self.pc]
        self.pc += 1
        try:
            return self.HANDLERS[ins.opname](self, ins)
        except MinisporeError as e:
            raise self._relocate(e, self.pc - 1) from None

    def run_symbolic(self):
        """Symbolic mode: run until a return (`Return`) or a graph break (`BreakInfo`)."""
        handlers, instrs = self.HANDLERS, self.info.instructions
        builder = self.session.builder
        stack, frame = self.stack, self.f
        while True:
            i = self.pc
            ins = self.ins = instrs[i]
            snap, kw = stack[:], frame.kw_names
            n_nodes, n_caps = len(builder.nodes), len(builder.captures)
            self.pc = i + 1
            try:
                r = handlers[ins.opname](self, ins)
                if r is not None:
                    return r
                if ins.opname in _CALLS and self.session.restore_captured_storage():
                    raise NeedsBreak("a tensor computed in the graph was assigned into a captured tensor "
                                     "(Parameter.set_data or similar): runs eagerly")
                continue
            except NeedsBreak as e:
                reason = e.reason
            except CaptureError as e:
                reason = describe_capture_error(e, self._callee(ins, snap), self.outer_where)
            except MinisporeError as e:
                raise self._relocate(e, i) from None
            # roll back to just before the instruction: it will run eagerly
            stack[:] = snap
            frame.kw_names = kw
            self.pc = i
            builder.truncate(n_nodes, n_caps)
            nxt = instrs[i + 1].opname if i + 1 < len(instrs) else None
            is_call = ins.opname in ("CALL", "CALL_FUNCTION_EX")
            return BreakInfo(i, ins.offset, ins.opname, reason, self.info.filename, self.info.lines[i],
                             pop_after=is_call and nxt == "POP_TOP", argc=ins.arg or 0)

    def where(self):
        """(filename, lineno, function) of the instruction being interpreted."""
        i = max(self.pc - 1, 0)
        return (self.info.filename, self.info.lines[i], self.info.name)

    def _relocate(self, e, i):
        """An op called by this frame rejected its input: point the error at this frame's line (it
        names the first Python frame outside minispore, which is the jitted function's caller)."""
        outer = self.outer_where if self.outer_where is not None else user_frame()
        if getattr(e, "where", None) is not None and e.where == outer and hasattr(e, "op"):
            try:
                return type(e)(e.op, e.expected, e.got, where=f"{self.info.filename}:{self.info.lines[i]} in "
                                                                f"{self.info.name}")
            except TypeError:
                return e
        return e

    def _callee(self, ins, snap):
        if ins.opname == "CALL":
            n = ins.arg
            if len(snap) >= n + 2:
                a, b = snap[-n - 2], snap[-n - 1]
                return b if a is NULL else a
        return None

    # -- stack helpers -----------------------------------------------------------------------------
    def use(self, v):
        """The value of v for code that looks at it: a Lazy number becomes a guarded constant."""
        t = type(v)
        if t is Lazy:
            x = v.value
            if type(x) is np.ndarray:
                raise NeedsBreak("a NumPy array computed at run time (by an eager step) is used: "
                                 "this runs eagerly too")
            self.used[v.slot] = x
            return x
        if t is tuple and self.symbolic:
            for x in v:
                tx = type(x)
                if tx is Lazy or tx is tuple:
                    return tuple([self.use(y) for y in v])
        return v

    def pop(self):
        v = self.stack.pop()
        return self.use(v) if self.symbolic else v

    def popn(self, n):
        """The top n values, deepest first (used)."""
        if n == 0:
            return []
        st = self.stack
        items = st[len(st) - n:]
        del st[len(st) - n:]
        return [self.use(x) for x in items] if self.symbolic else items

    def truth(self, v, what):
        v = self.use(v)
        if self.symbolic and is_symbolic(v):
            raise NeedsBreak(f"{what} on a tensor value: the condition is evaluated eagerly and capture "
                             f"resumes on the side taken")
        return bool(v)

    def _jump(self, ins):
        t = self.info.target(ins)
        self.pc = t

    # -- globals --------------------------------------------------------------------------------------
    def load_global(self, name):
        g = self.info.globals
        if name in g:
            v = g[name]
            if self.symbolic:
                self.globals_read[name] = v
            return v
        if self.symbolic:
            self.globals_read[name] = _MISSING
        try:
            return self.info.builtins[name]
        except KeyError:
            raise NameError(f"name '{name}' is not defined") from None

    # -- calls ---------------------------------------------------------------------------------------
    def call(self, fn, args, kwargs):
        fn = self.use(fn)
        special = self._special_call(fn, args, kwargs)
        if special is not _NOT_SPECIAL:
            return special
        if self.symbolic:
            reason = call_break_reason(fn, args, kwargs)
            if reason is not None:
                raise NeedsBreak(reason)
            args = [self.use(a) for a in args]
            kwargs = {k: self.use(v) for k, v in kwargs.items()} if kwargs else kwargs
        return fn(*args, **kwargs)

    def _special_call(self, fn, args, kwargs):
        """Builtins that look at the calling frame, or whose results should stay visible."""
        if fn is super and not args and not kwargs:
            return super(self._class_cell(), self._first_arg())
        if (fn is locals or fn is vars) and not args and not kwargs:
            return self._locals_dict()
        if fn is globals and not args:
            return self.info.globals
        if fn is dir and not args:
            return sorted(self._locals_dict())
        if fn is iter and len(args) == 1 and not kwargs:
            return make_iter(self.use(args[0]))
        if id(fn) in _ITER_BUILTINS and args and not kwargs:
            items = [self.use(a) for a in args]
            seqs = items[1:] if fn is map or fn is filter else items[:1] if fn is enumerate or fn is reversed else items
            if all(_sized(s) for s in seqs):
                if self.symbolic and (fn is map or fn is filter) and items[0] is not None:
                    reason = call_break_reason(items[0], list(seqs), {})
                    if reason is not None:
                        raise NeedsBreak(reason)
                return SeqIter(list(fn(*items)))
        return _NOT_SPECIAL

    def _class_cell(self):
        cell = self.f.cells.get("__class__")
        if cell is None:
            raise RuntimeError("super(): __class__ cell not found")
        return cell.cell_contents

    def _first_arg(self):
        code = self.info.code
        if code.co_argcount == 0:
            raise RuntimeError("super(): no arguments")
        name = code.co_varnames[0]
        if name in self.f.locals:
            return self.use(self.f.locals[name])
        return self.f.cells[name].cell_contents

    def _locals_dict(self):
        d = {k: self.use(v) for k, v in self.f.locals.items() if v is not NULL}
        for name in self.info.cellvars:
            cell = self.f.cells.get(name)
            if cell is not None:
                try:
                    d[name] = cell.cell_contents
                except ValueError:
                    pass
        return d

    # ================================================================================================
    # Handlers, one per opname (3.11 and 3.12). Each gets the dis.Instruction.
    # ================================================================================================
    def op_NOP(self, ins):
        pass

    op_RESUME = op_EXTENDED_ARG = op_PRECALL = op_NOP

    def op_MAKE_CELL(self, ins):
        v = self.f.locals.pop(ins.argval, NULL)
        self.f.cells[ins.argval] = types.CellType() if v is NULL else types.CellType(self.use(v))

    def op_COPY_FREE_VARS(self, ins):
        self.f.cells.update(self.info.free_cells)

    def op_PUSH_NULL(self, ins):
        self.stack.append(NULL)

    def op_KW_NAMES(self, ins):
        self.f.kw_names = self.info.code.co_consts[ins.arg]

    # -- locals, constants, globals, cells ----------------------------------------------------------
    def op_LOAD_FAST(self, ins):
        try:
            self.stack.append(self.f.locals[ins.argval])
        except KeyError:
            raise UnboundLocalError(f"cannot access local variable '{ins.argval}' where it is not "
                                    f"associated with a value") from None

    op_LOAD_FAST_CHECK = op_LOAD_FAST

    def op_LOAD_FAST_AND_CLEAR(self, ins):
        self.stack.append(self.f.locals.pop(ins.argval, NULL))

    def op_STORE_FAST(self, ins):
        v = self.stack.pop()
        if v is NULL:
            self.f.locals.pop(ins.argval, None)
        else:
            self.f.locals[ins.argval] = v

    def op_DELETE_FAST(self, ins):
        try:
            del self.f.locals[ins.argval]
        except KeyError:
            raise UnboundLocalError(f"cannot access local variable '{ins.argval}' where it is not "
                                    f"associated with a value") from None

    def op_LOAD_CONST(self, ins):
        self.stack.append(ins.argval)

    def op_RETURN_VALUE(self, ins):
        return Return(self.stack.pop())

    def op_RETURN_CONST(self, ins):
        return Return(ins.argval)

    def op_LOAD_GLOBAL(self, ins):
        if ins.arg & 1:
            self.stack.append(NULL)
        self.stack.append(self.load_global(ins.argval))

    def op_STORE_GLOBAL(self, ins):
        if self.symbolic:
            raise NeedsBreak(f"assignment to global '{ins.argval}': runs eagerly, each time the function runs")
        self.info.globals[ins.argval] = self.stack.pop()

    def op_DELETE_GLOBAL(self, ins):
        if self.symbolic:
            raise NeedsBreak(f"deleting global '{ins.argval}': runs eagerly, each time the function runs")
        del self.info.globals[ins.argval]

    def op_LOAD_DEREF(self, ins):
        try:
            self.stack.append(self.f.cells[ins.argval].cell_contents)
        except ValueError:
            raise NameError(f"cannot access free variable '{ins.argval}' where it is not associated with "
                            f"a value in enclosing scope") from None

    def op_STORE_DEREF(self, ins):
        v = self.pop()
        if self.symbolic and ins.argval in self.info.free_cells and has_symbolic((v,)):
            raise NeedsBreak(f"a tensor assigned to nonlocal variable '{ins.argval}' of the enclosing "
                             f"function: runs eagerly so it holds a concrete tensor")
        self.f.cells[ins.argval].cell_contents = v

    def op_DELETE_DEREF(self, ins):
        del self.f.cells[ins.argval].cell_contents

    def op_LOAD_CLOSURE(self, ins):
        self.stack.append(self.f.cells[ins.argval])

    # -- attributes ------------------------------------------------------------------------------------
    def op_LOAD_ATTR(self, ins):
        obj = self.pop()
        if PY >= (3, 12) and ins.arg & 1:
            self.stack.extend(_load_method(obj, ins.argval))
        else:
            self.stack.append(getattr(obj, ins.argval))

    def op_LOAD_METHOD(self, ins):
        self.stack.extend(_load_method(self.pop(), ins.argval))

    def op_LOAD_SUPER_ATTR(self, ins):
        obj, cls, sup = self.pop(), self.pop(), self.pop()
        attr = getattr(sup(cls, obj), ins.argval)
        if ins.arg & 1:
            self.stack.append(NULL)
        self.stack.append(attr)

    def op_STORE_ATTR(self, ins):
        obj, v = self.pop(), self.pop()
        if self.symbolic and has_symbolic((v,)):
            raise NeedsBreak(f"a tensor stored in attribute '{ins.argval}' of a {type(obj).__name__} object: "
                             f"runs eagerly so the attribute holds a concrete tensor")
        setattr(obj, ins.argval, v)

    def op_DELETE_ATTR(self, ins):
        delattr(self.pop(), ins.argval)

    # -- operators ---------------------------------------------------------------------------------------
    def op_BINARY_OP(self, ins):
        b = self.pop()
        a = self.pop()
        self.stack.append(_BINARY_OPS[ins.arg](a, b))

    def _container(self):
        c = self.stack.pop()
        return c if type(c) is tuple else self.use(c)       # an item of a tuple may stay Lazy

    def op_BINARY_SUBSCR(self, ins):
        k = self.pop()
        c = self._container()
        self.stack.append(c[k])

    def _check_store_into(self, c):
        if self.symbolic and isinstance(c, Tensor) and not is_symbolic(c):
            raise NeedsBreak("in-place write into a tensor that is not a graph value (a Parameter, global or "
                             "constant): runs eagerly")

    def op_STORE_SUBSCR(self, ins):
        k, c, v = self.pop(), self.pop(), self.pop()
        self._check_store_into(c)
        c[k] = v

    def op_DELETE_SUBSCR(self, ins):
        k, c = self.pop(), self.pop()
        del c[k]

    def op_BINARY_SLICE(self, ins):
        end, start = self.pop(), self.pop()
        c = self._container()
        self.stack.append(c[start:end])

    def op_STORE_SLICE(self, ins):
        end, start, c, v = self.pop(), self.pop(), self.pop(), self.pop()
        self._check_store_into(c)
        c[start:end] = v

    def op_BUILD_SLICE(self, ins):
        self.stack.append(slice(*self.popn(ins.arg)))

    def op_UNARY_NEGATIVE(self, ins):
        self.stack.append(-self.pop())

    def op_UNARY_POSITIVE(self, ins):
        self.stack.append(+self.pop())

    def op_UNARY_INVERT(self, ins):
        self.stack.append(~self.pop())

    def op_UNARY_NOT(self, ins):
        self.stack.append(not self.truth(self.stack.pop(), "`not`"))

    def op_CALL_INTRINSIC_1(self, ins):
        v = self.pop()
        if ins.argrepr == "INTRINSIC_LIST_TO_TUPLE":
            self.stack.append(tuple(v))
        elif ins.argrepr == "INTRINSIC_UNARY_POSITIVE":
            self.stack.append(+v)
        else:
            raise RuntimeError(f"bytecode capture: unsupported intrinsic {ins.argrepr}")

    def op_COMPARE_OP(self, ins):
        b = self.pop()
        a = self.pop()
        self.stack.append(_COMPARE[ins.argval](a, b))

    def op_IS_OP(self, ins):
        b = self.pop()
        a = self.pop()
        self.stack.append((a is not b) if ins.arg else (a is b))

    def op_CONTAINS_OP(self, ins):
        b = self.pop()
        a = self.pop()
        self.stack.append((a not in b) if ins.arg else (a in b))

    # -- stack shuffles ----------------------------------------------------------------------------------
    def op_POP_TOP(self, ins):
        self.stack.pop()

    def op_COPY(self, ins):
        self.stack.append(self.stack[-ins.arg])

    def op_SWAP(self, ins):
        st, n = self.stack, ins.arg
        st[-1], st[-n] = st[-n], st[-1]

    def op_END_FOR(self, ins):
        del self.stack[-2:]

    # -- building --------------------------------------------------------------------------------------
    def op_BUILD_TUPLE(self, ins):
        n, st = ins.arg, self.stack
        items = tuple(st[len(st) - n:]) if n else ()          # Lazy items stay Lazy (a move)
        del st[len(st) - n:]
        st.append(items)

    def op_BUILD_LIST(self, ins):
        self.stack.append(self.popn(ins.arg))

    def op_BUILD_SET(self, ins):
        self.stack.append(set(self.popn(ins.arg)))

    def op_BUILD_MAP(self, ins):
        items = self.popn(2 * ins.arg)
        self.stack.append(dict(zip(items[::2], items[1::2])))

    def op_BUILD_CONST_KEY_MAP(self, ins):
        keys = self.pop()
        values = self.popn(ins.arg)
        self.stack.append(dict(zip(keys, values)))

    def op_BUILD_STRING(self, ins):
        self.stack.append("".join(self.popn(ins.arg)))

    def op_LIST_APPEND(self, ins):
        v = self.pop()
        self.stack[-ins.arg].append(v)

    def op_SET_ADD(self, ins):
        v = self.pop()
        self.stack[-ins.arg].add(v)

    def op_MAP_ADD(self, ins):
        v = self.pop()
        k = self.pop()
        self.stack[-ins.arg][k] = v

    def op_LIST_EXTEND(self, ins):
        v = self.pop()
        self.stack[-ins.arg].extend(v)

    def op_SET_UPDATE(self, ins):
        v = self.pop()
        self.stack[-ins.arg].update(v)

    def op_DICT_UPDATE(self, ins):
        v = self.pop()
        self.stack[-ins.arg].update(v)

    def op_DICT_MERGE(self, ins):
        v = self.pop()
        d = self.stack[-ins.arg]
        for k in v:
            if k in d:
                raise TypeError(f"got multiple values for keyword argument '{k}'")
        d.update(v)

    def op_LIST_TO_TUPLE(self, ins):
        self.stack.append(tuple(self.pop()))

    def op_UNPACK_SEQUENCE(self, ins):
        seq = self._container()
        items = tuple(seq)
        if len(items) != ins.arg:
            if len(items) > ins.arg:
                raise ValueError(f"too many values to unpack (expected {ins.arg})")
            raise ValueError(f"not enough values to unpack (expected {ins.arg}, got {len(items)})")
        self.stack.extend(reversed(items))

    def op_UNPACK_EX(self, ins):
        before, after = ins.arg & 0xFF, ins.arg >> 8
        items = list(self._container())
        if len(items) < before + after:
            raise ValueError(f"not enough values to unpack (expected at least {before + after}, got {len(items)})")
        stop = len(items) - after
        out = items[:before] + [[self.use(x) for x in items[before:stop]]] + items[stop:]
        self.stack.extend(reversed(out))

    def op_FORMAT_VALUE(self, ins):
        spec = self.pop() if ins.arg & 4 else ""
        v = self.pop()
        if self.symbolic and is_symbolic(v):
            raise NeedsBreak("formatting a tensor (f-string) needs its values")
        conv = ins.arg & 3
        if conv == 1:
            v = str(v)
        elif conv == 2:
            v = repr(v)
        elif conv == 3:
            v = ascii(v)
        self.stack.append(format(v, spec))

    # -- iteration ---------------------------------------------------------------------------------------
    def op_GET_ITER(self, ins):
        self.stack.append(make_iter(self.pop()))

    def op_FOR_ITER(self, ins):
        it = self.stack[-1]
        if type(it) is SeqIter:
            i = it.index
            if i < len(it.seq):
                it.index = i + 1
                self.stack.append(it.seq[i])
                return None
        else:
            try:
                self.stack.append(next(it))
                return None
            except StopIteration:
                pass
        self.stack.pop()
        t = self.info.target(ins)
        if self.info.instructions[t].opname == "END_FOR":      # 3.12: exhaustion skips END_FOR
            t += 1
        self.pc = t
        return None

    # -- jumps ---------------------------------------------------------------------------------------------
    def op_JUMP_FORWARD(self, ins):
        self._jump(ins)

    op_JUMP_BACKWARD = op_JUMP_BACKWARD_NO_INTERRUPT = op_JUMP = op_JUMP_FORWARD

    def op_POP_JUMP_IF_TRUE(self, ins):
        if self.truth(self.stack.pop(), "a branch (`if`/`while`)"):
            self._jump(ins)

    def op_POP_JUMP_IF_FALSE(self, ins):
        if not self.truth(self.stack.pop(), "a branch (`if`/`while`)"):
            self._jump(ins)

    def op_POP_JUMP_IF_NONE(self, ins):
        v = self.stack.pop()
        if type(v) is not Lazy and v is None:
            self._jump(ins)

    def op_POP_JUMP_IF_NOT_NONE(self, ins):
        v = self.stack.pop()
        if type(v) is Lazy or v is not None:
            self._jump(ins)

    op_POP_JUMP_FORWARD_IF_TRUE = op_POP_JUMP_BACKWARD_IF_TRUE = op_POP_JUMP_IF_TRUE
    op_POP_JUMP_FORWARD_IF_FALSE = op_POP_JUMP_BACKWARD_IF_FALSE = op_POP_JUMP_IF_FALSE
    op_POP_JUMP_FORWARD_IF_NONE = op_POP_JUMP_BACKWARD_IF_NONE = op_POP_JUMP_IF_NONE
    op_POP_JUMP_FORWARD_IF_NOT_NONE = op_POP_JUMP_BACKWARD_IF_NOT_NONE = op_POP_JUMP_IF_NOT_NONE

    def op_JUMP_IF_TRUE_OR_POP(self, ins):
        if self.truth(self.stack[-1], "`or`"):
            self._jump(ins)
        else:
            self.stack.pop()

    def op_JUMP_IF_FALSE_OR_POP(self, ins):
        if not self.truth(self.stack[-1], "`and`"):
            self._jump(ins)
        else:
            self.stack.pop()

    # -- calls and functions -------------------------------------------------------------------------------
    def op_CALL(self, ins):
        argc, st = ins.arg, self.stack
        kw = self.f.kw_names or ()
        self.f.kw_names = None
        args = st[len(st) - argc:] if argc else []
        a, b = st[-argc - 2], st[-argc - 1]
        del st[len(st) - argc - 2:]
        if a is NULL:
            fn, pos = b, args
        else:
            fn, pos = a, [b] + args
        kwargs = {}
        if kw:
            n = len(kw)
            kwargs = dict(zip(kw, pos[len(pos) - n:]))
            pos = pos[:len(pos) - n]
        st.append(self.call(fn, pos, kwargs))

    def op_CALL_FUNCTION_EX(self, ins):
        kwargs = dict(self.pop()) if ins.arg & 1 else {}
        args = list(self.pop())
        fn = self.stack.pop()
        if self.stack and self.stack[-1] is NULL:
            self.stack.pop()
        self.stack.append(self.call(fn, args, kwargs))

    def op_MAKE_FUNCTION(self, ins):
        code = self.stack.pop()
        flags = ins.arg
        closure = self.stack.pop() if flags & 8 else None
        annotations = self.pop() if flags & 4 else None
        kwdefaults = self.pop() if flags & 2 else None
        defaults = self.pop() if flags & 1 else None
        fn = types.FunctionType(code, self.info.globals, code.co_name, defaults, closure)
        fn.__qualname__ = getattr(code, "co_qualname", code.co_name)
        if kwdefaults:
            fn.__kwdefaults__ = kwdefaults
        if annotations:
            fn.__annotations__ = (dict(zip(annotations[::2], annotations[1::2]))
                                  if isinstance(annotations, tuple) else annotations)
        self.stack.append(fn)

    def op_RAISE_VARARGS(self, ins):
        if ins.arg == 2:
            cause = self.pop()
            raise self.pop() from cause
        raise self.pop()

    def op_LOAD_ASSERTION_ERROR(self, ins):
        self.stack.append(AssertionError)

    def op_IMPORT_NAME(self, ins):
        fromlist = self.pop()
        level = self.pop()
        self.stack.append(__import__(ins.argval, self.info.globals, None, fromlist, level))

    def op_IMPORT_FROM(self, ins):
        module = self.stack[-1]
        try:
            self.stack.append(getattr(module, ins.argval))
        except AttributeError:
            name = f"{module.__name__}.{ins.argval}"
            if name in sys.modules:
                self.stack.append(sys.modules[name])
            else:
                raise ImportError(f"cannot import name '{ins.argval}' from '{module.__name__}'") from None


_CALLS = ("CALL", "CALL_FUNCTION_EX")
_ITER_BUILTINS = {id(f) for f in (zip, enumerate, reversed, map, filter)}
_MISSING = object()
_NOT_SPECIAL = object()
Interpreter.HANDLERS = {name[3:]: fn for name, fn in vars(Interpreter).items() if name.startswith("op_")}
RUN_SYMBOLIC_CODE = Interpreter.run_symbolic.__code__

__all__ = ["Interpreter", "CodeInfo", "code_info", "SUPPORTED_VERSIONS", "version_supported", "Return", "make_iter",
           "RUN_SYMBOLIC_CODE"]
