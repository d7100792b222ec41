"""Expressions for the ast mode's interpreter (a mixin of `Interpreter`, see interpreter.py).

Every expression is evaluated now, at compile time, on Python values and traced tensors:
operators go through `Interpreter.apply` (so `x.asnumpy()`, `float(x)` or an operand computed at
run time become host calls - JIT Fallback - instead of failing); `a if c else b` on a tensor `c`
is an If node; `and` / `or` / `not` / comparison chains on tensors become logical ops (their
Python short-circuit needs a truth value that exists only at run time); comprehensions are
unrolled; f-strings that show tensors are formatted when the graph runs.
"""
from __future__ import annotations

import ast
import operator

from ....common import dtype as mstype
from ....common.tensor import Tensor
from ...trace.session import HostResult
from . import control_flow
from .frames import Frame, InterpretedFunction
from .session import AstCaptureError, is_dynamic_leaf, unsupported, where
from .signals import MISSING


# -- operator tables ----------------------------------------------------------------------------------
BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
          ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
          ast.MatMult: operator.matmul, ast.LShift: operator.lshift, ast.RShift: operator.rshift,
          ast.BitOr: operator.or_, ast.BitXor: operator.xor, ast.BitAnd: operator.and_}
INPLACE = {ast.Add: operator.iadd, ast.Sub: operator.isub, ast.Mult: operator.imul, ast.Div: operator.itruediv,
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
SYMBOL = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
          ast.Pow: "**", ast.MatMult: "@", ast.LShift: "<<", ast.RShift: ">>", ast.BitOr: "|", ast.BitXor: "^",
          ast.BitAnd: "&", ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
          ast.In: "in", ast.NotIn: "not in", ast.USub: "-", ast.UAdd: "+", ast.Invert: "~"}


def _as_bool_tensor(x):
    from ....ops import functional as F
    return x if x.dtype is mstype.bool_ else F.cast(x, mstype.bool_)


class Expressions:
    """The `e_<NodeType>` evaluators; `eval` dispatches on the node type."""

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
                out.extend(v if not isinstance(v, Tensor) else [v[i] for i in range(rows(v))])
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
        return self.apply(BINOPS[op], (left, right), what=SYMBOL[op])

    def e_UnaryOp(self, node, frame):
        v = self.eval(node.operand, frame)
        if isinstance(node.op, ast.Not):
            if isinstance(v, Tensor):
                from ....ops import functional as F
                return F.logical_not(_as_bool_tensor(v))
            if type(v) is HostResult:
                return self.runtime_call(operator.not_, (v,), {}, "not")
            return not v
        return self.apply(_UNARY[type(node.op)], (v,), what=SYMBOL[type(node.op)])

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
                r = self.apply(_CMP[t], (left, right), what=SYMBOL[t])
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
                args.extend(v if not isinstance(v, Tensor) else [v[i] for i in range(rows(v))])
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
            items = iter(it) if not isinstance(it, Tensor) else (it[k] for k in range(rows(it)))
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

def rows(t):
    """How many rows iterating over a tensor gives (its first axis)."""
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



_EXPR = {getattr(ast, name[2:]): getattr(Expressions, name) for name in dir(Expressions) if name.startswith("e_")}

__all__ = ["Expressions", "BINOPS", "INPLACE", "SYMBOL"]
