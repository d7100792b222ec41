"""From a Python function to its AST, and the static facts about statements the interpreter needs.

* `parse_function(code)` reads the source of a code object (`inspect.getsourcelines`, dedented,
  `ast.parse`), finds its `def` (or its `lambda`) and shifts line numbers to the real file, so every
  message and every IR node names the user's line. Results are cached per code object.
* `is_user_code(code)` decides what the ast mode parses: code outside the minispore package and
  outside the standard library / site-packages (third-party libraries are called, not compiled:
  MindSpore's `MS_JIT_IGNORE_MODULES` idea). Cell.construct methods are parsed wherever they live.
* The scans (`assigned_names`, `loaded_names`, `contains_return`, `contains_loop_exit`) never look
  inside nested functions, lambdas or classes: those are other scopes.
"""
from __future__ import annotations

import ast
import inspect
import os
import sysconfig
import textwrap

from ....common.errors import _PKG_DIR


class ParsedFunction:
    """A function's AST: `node` is the FunctionDef or Lambda, with line numbers of the real file."""

    __slots__ = ("node", "filename", "name", "is_lambda", "generator_node")

    def __init__(self, node, filename, name):
        self.node = node
        self.filename = filename
        self.name = name
        self.is_lambda = isinstance(node, ast.Lambda)
        self.generator_node = None if self.is_lambda else find_generator(node)

    @property
    def body(self):
        return self.node.body


_parsed: dict = {}
_library_dirs = None


def _libraries():
    global _library_dirs
    if _library_dirs is None:
        paths = sysconfig.get_paths()
        dirs = {os.path.abspath(paths[k]) for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
        _library_dirs = tuple(d + os.sep for d in dirs)
    return _library_dirs


_user_code: dict = {}


def is_user_code(code) -> bool:
    """True for code the ast mode should parse rather than call (see the module docstring)."""
    r = _user_code.get(code)
    if r is None:
        f = code.co_filename
        if f.startswith("<") and not f.startswith("<ipython"):
            r = False
        else:
            path = os.path.abspath(f)
            r = not path.startswith(_PKG_DIR + os.sep) and not path.startswith(_libraries())
        _user_code[code] = r
    return r


def _parse_snippet(src):
    """Parse a piece of source that may be indented; returns (module, line offset) or None."""
    try:
        return ast.parse(textwrap.dedent(src)), 0
    except SyntaxError:
        pass
    try:                                     # e.g. a docstring line less indented than the code
        tree = ast.parse("if 1:\n" + src)
        return ast.Module(body=tree.body[0].body, type_ignores=[]), -1
    except SyntaxError:
        return None


def parse_function(code):
    """The ParsedFunction for a code object, or None when its source is not available/parsable."""
    if code in _parsed:
        return _parsed[code]
    result = None
    try:
        lines, start = inspect.getsourcelines(code)
    except (OSError, TypeError, IndexError):
        lines = None
    if lines:
        parsed = _parse_snippet("".join(lines))
        if parsed is not None:
            tree, shift = parsed
            ast.increment_lineno(tree, start - 1 + shift)
            node = _find(tree, code)
            if node is not None:
                result = ParsedFunction(node, code.co_filename, code.co_name)
    _parsed[code] = result
    return result


def _find(tree, code):
    if code.co_name == "<lambda>":
        argnames = list(code.co_varnames[:code.co_argcount + code.co_kwonlyargcount])
        found = [n for n in ast.walk(tree) if isinstance(n, ast.Lambda) and n.lineno == code.co_firstlineno
                 and [a.arg for a in n.args.posonlyargs + n.args.args + n.args.kwonlyargs] == argnames]
        return found[0] if len(found) == 1 else None      # ambiguous: several lambdas on the line
    for n in tree.body:
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == code.co_name:
            return n
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == code.co_name:
            return n
    return None


# -- scans ------------------------------------------------------------------------------------------
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def _walk_scope(nodes):
    """ast.walk over `nodes` that does not enter nested scopes (their own names are still seen)."""
    stack = list(nodes)
    while stack:
        n = stack.pop()
        yield n
        for child in ast.iter_child_nodes(n):
            if isinstance(child, _SCOPES):
                yield child                         # the def/class name is bound here; skip its body
                if not isinstance(child, ast.Lambda):
                    stack.extend(child.decorator_list)
                continue
            if isinstance(child, _COMPREHENSIONS):      # its targets are its own scope's names
                continue
            stack.append(child)


def find_generator(fn_node):
    for n in _walk_scope(fn_node.body):
        if isinstance(n, (ast.Yield, ast.YieldFrom, ast.Await)):
            return n
    return None


def assigned_names(stmts) -> list:
    """Names a block (re)binds, in first-seen order: assignment targets, loop targets, `x[i] = v`
    bases (the tensor `x` is rebound functionally), defs, imports, `except ... as e`."""
    out = {}
    for n in _walk_scope(stmts):
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            out[n.id] = None
        elif isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Store):
            base = n.value
            while isinstance(base, ast.Subscript):
                base = base.value
            if isinstance(base, ast.Name):
                out[base.id] = None
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out[n.name] = None
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            for a in n.names:
                out[(a.asname or a.name).split(".")[0]] = None
        elif isinstance(n, ast.ExceptHandler) and n.name:
            out[n.name] = None
    return list(out)


def subscript_assigned_names(stmts) -> set:
    out = set()
    for n in _walk_scope(stmts):
        if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Store):
            base = n.value
            while isinstance(base, ast.Subscript):
                base = base.value
            if isinstance(base, ast.Name):
                out.add(base.id)
    return out


def loaded_names(node) -> list:
    """Every name read anywhere inside `node`, nested scopes included (their free variables)."""
    out = {}
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            out[n.id] = None
    return list(out)


def contains_return(stmts) -> bool:
    return any(isinstance(n, ast.Return) for n in _walk_scope(stmts))


def contains_loop_exit(stmts) -> bool:
    """A break/continue that leaves this block (not one belonging to a loop inside it)."""
    stack = list(stmts)
    while stack:
        n = stack.pop()
        if isinstance(n, (ast.Break, ast.Continue)):
            return True
        if isinstance(n, _SCOPES):
            continue
        if isinstance(n, (ast.For, ast.AsyncFor, ast.While)):
            stack.extend(n.orelse)                  # the loop's own body owns its breaks
            continue
        stack.extend(ast.iter_child_nodes(n))
    return False


__all__ = ["ParsedFunction", "parse_function", "is_user_code", "assigned_names", "subscript_assigned_names",
           "loaded_names", "contains_return", "contains_loop_exit"]
