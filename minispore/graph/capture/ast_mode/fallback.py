"""JIT Fallback: statements the ast mode does not compile run as Python.

MindSpore's rule (mindspore_api.md §1.4): unsupported Python is evaluated by the Python interpreter,
at compile time when its inputs are constants and at run time otherwise. Here a statement such as
`try`, `with`, `class`, `match`, a generator `def`, or an `if`/`for` over a value that only exists at
run time, is handled as follows:

* `fullgraph=True` (STRICT): an error naming the construct, the function, the file and the line,
  e.g. "Unsupported statement 'Try'".
* Otherwise the statement is compiled, unchanged, into a small Python function whose parameters
  are the variables it reads and which returns the variables it assigns (`locals()`); `return`,
  `break` and `continue` inside it are turned into tagged results so the interpreter can act on them.
  - If none of its inputs is a traced tensor or a run-time value, the function runs *now*, at
    compile time (the statement's effects are baked into the graph; tensor ops it calls are traced).
  - Otherwise it becomes a HOST_CALL node that runs it when the graph runs, on concrete tensors.
    The variables it assigns become run-time Python values: they can be returned, printed, or given
    to other fallback code, but graph ops cannot consume them (an op that tries falls back too).

`global` / `nonlocal` declarations are also fallback (errors under fullgraph): a write to a global
happens at compile time for a constant, and at run time (a host call) for a tensor.
"""
from __future__ import annotations

import ast
import copy

from ...trace.session import CaptureError
from .session import AstCaptureError, is_dynamic_leaf, unsupported, where
from .signals import BREAK, CONTINUE, RETURN, Undefined
from .source import assigned_names, loaded_names

_FN_NAME = "__minispore_fallback__"


class _ExitRewriter(ast.NodeTransformer):
    """`return v` -> `return ('return', v, locals())`; a break/continue leaving the statement ->
    `return ('break', None, locals())`. Nested scopes and inner loops keep their own."""

    def __init__(self):
        self.loops = 0

    def _skip(self, node):
        return node

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = visit_Lambda = _skip

    def _loop(self, node):
        self.loops += 1
        node.body = [self.visit(s) for s in node.body]
        self.loops -= 1
        node.orelse = [self.visit(s) for s in node.orelse]
        return node

    visit_For = visit_While = visit_AsyncFor = _loop

    @staticmethod
    def _tagged(tag, value):
        return ast.Return(value=ast.Tuple(elts=[ast.Constant(tag), value or ast.Constant(None),
                                                ast.Call(func=ast.Name("locals", ast.Load()), args=[],
                                                         keywords=[])], ctx=ast.Load()))

    def visit_Return(self, node):
        return ast.copy_location(self._tagged("return", node.value), node)

    def visit_Break(self, node):
        return node if self.loops else ast.copy_location(self._tagged("break", None), node)

    def visit_Continue(self, node):
        return node if self.loops else ast.copy_location(self._tagged("continue", None), node)


_compiled: dict = {}


def _compile(stmt, names, filename, globals_):
    key = (id(stmt), tuple(names), id(globals_))
    hit = _compiled.get(key)
    if hit is not None and hit[0] is stmt:
        return hit[1]
    module = ast.parse(f"def {_FN_NAME}({', '.join(names)}):\n    pass\n    return ('end', None, locals())")
    fdef = module.body[0]
    body = _ExitRewriter().visit(copy.deepcopy(stmt))
    for n in ast.walk(fdef):
        if hasattr(n, "lineno"):
            n.lineno = n.end_lineno = stmt.lineno
            n.col_offset = n.end_col_offset = 0
    fdef.body = [body, fdef.body[1]]
    ast.fix_missing_locations(module)
    code = compile(module, filename, "exec")
    namespace = {}
    exec(code, globals_, namespace)                   # noqa: S102 - the user's own statement
    fn = namespace[_FN_NAME]
    _compiled[key] = (stmt, fn)
    return fn


def _contains_dynamic(x) -> bool:
    if is_dynamic_leaf(x):
        return True
    t = type(x)
    if t is tuple or t is list:
        return any(_contains_dynamic(v) for v in x)
    if t is dict:
        return any(_contains_dynamic(v) for v in x.values())
    return False


class _Unbound:
    """What a variable holds when the fallback statement that may assign it did not (at run time)."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"<unbound: the statement did not assign '{self.name}'>"


def _pick(result, name):
    """At run time: one variable out of a fallback statement's result."""
    return result[2].get(name, _Unbound(name))


def runtime_raise(exc, cause=None):
    """At run time: a `raise` on a path chosen by a tensor condition."""
    if isinstance(exc, type):
        exc = exc()
    raise exc from cause


def runtime_assert(test, msg=None):
    if not test:
        raise AssertionError(msg) if msg is not None else AssertionError()


def run_statement(interp, frame, stmt, subst=None, what=None, allow_fullgraph=False):
    """Run `stmt` as Python (see the module docstring). `subst=(field, value)` replaces one field of
    the statement (an `if`'s test, a `for`'s iterable) by a value already computed."""
    loc = frame.loc(stmt.lineno)
    label = what or f"Unsupported statement '{type(stmt).__name__}'"
    if interp.session.fullgraph and not allow_fullgraph:
        raise unsupported(label, loc)
    inputs = {}
    run = stmt
    if subst is not None:
        field, value = subst
        run = _substituted_copy(stmt, field)
        inputs["__ms_value__"] = value
    for n in loaded_names(run):
        if n != "__ms_value__" and frame.has_local(n):
            v = interp.lookup_raw(n, frame)
            if type(v) is not Undefined:
                inputs[n] = v
    outs = assigned_names([stmt])
    fn = _compile(run, list(inputs), frame.filename, frame.globals)
    values = list(inputs.values())
    if not any(_contains_dynamic(v) for v in values):
        nodes = interp.session.builder.nodes
        n0 = len(nodes)
        try:
            result = fn(*values)
        except AstCaptureError:
            raise
        except CaptureError:
            del nodes[n0:]               # it needs tensor values after all: run it when the graph runs
        else:
            return _apply(interp, frame, result, outs)
    from .source import contains_loop_exit, contains_return
    body = [stmt]
    if contains_return(body) or (contains_loop_exit(body) and not isinstance(stmt, (ast.For, ast.While))):
        raise AstCaptureError("jit", "return/break/continue only in statements that run at compile time",
                              f"one inside {label.lower() if what else type(stmt).__name__}, which must run in "
                              f"Python when the graph runs (its inputs are tensors)", where=where(loc))
    name = f"{type(stmt).__name__} (line {stmt.lineno})"
    result = interp.session.host_call(fn, tuple(values), {}, name)
    for n in outs:
        interp.assign_name(n, interp.session.host_call(_pick, (result, n), {}, f"{n} = ({name})"), frame)
    return None


_substituted: dict = {}


def _substituted_copy(stmt, field):
    """`stmt` with one field replaced by the name `__ms_value__` (one copy per statement, so the
    compiled function is cached across calls)."""
    hit = _substituted.get((id(stmt), field))
    if hit is not None and hit[0] is stmt:
        return hit[1]
    run = copy.copy(stmt)
    setattr(run, field, ast.copy_location(ast.Name("__ms_value__", ast.Load()), getattr(stmt, field)))
    _substituted[(id(stmt), field)] = (stmt, run)
    return run


def _apply(interp, frame, result, outs):
    tag, value, local_vars = result
    for n in outs:
        if n in local_vars:
            interp.assign_name(n, local_vars[n], frame)
    if tag == "return":
        frame.return_value = value
        return RETURN
    if tag == "break":
        return BREAK
    if tag == "continue":
        return CONTINUE
    return None


def declare(interp, frame, stmt, kind):
    """`global x` / `nonlocal x`: allowed as fallback (writes happen at compile time)."""
    if interp.session.fullgraph:
        raise unsupported(f"Unsupported statement '{type(stmt).__name__}'", frame.loc(stmt.lineno))
    names = getattr(frame, kind)
    if names is None:
        names = set()
        setattr(frame, kind, names)
    names.update(stmt.names)
    return None


def write_global(interp, frame, name, value):
    """`x = value` after `global x`: now for a constant, when the graph runs for a tensor."""
    if _contains_dynamic(value):
        interp.session.host_call(frame.globals.__setitem__, (name, value), {}, f"global {name} =")
        frame.env[name] = value            # later reads in this function see the graph value
        return
    frame.globals[name] = value
    frame.env.pop(name, None)


__all__ = ["run_statement", "declare", "write_global", "runtime_raise", "runtime_assert"]
