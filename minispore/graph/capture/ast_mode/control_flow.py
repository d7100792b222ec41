"""Control flow on tensor values: If and While nodes (and the gradient of If).

**`if` on a tensor** (`if x.sum() > 0:`, `y = a if c else b`). Both branches are interpreted, each
in its own Region (session.py) with a private copy of the variables, and become the closed
subgraphs `then_graph` / `else_graph` of one If node:

* the branches' *operands* are the outer values they read (lifted: variables, Parameters);
* the node's *outputs* are the variables either branch assigns. Per variable both branches must
  agree: the same tensor shape and dtype, or the same Python constant (kept as a constant). Two
  different Python numbers, or a number against a tensor, are turned into tensors (MindSpore makes
  them graph variables too); anything else is an error naming the variable and the line. A variable
  assigned on one path only is undefined after the `if` (reading it is an error).
* `return` inside a branch: the statements after the `if` (to the end of the function) are moved
  into both branches, so each branch ends the function and the node's outputs are the return value.
* `raise` inside a branch runs when the graph runs (the branch's outputs come from the host call
  that raises, so both branches still have the same types).
* `break`/`continue` leaving a tensor branch, and `return` inside a loop (or anywhere the code after
  it cannot simply be moved into the branches), set *exit flags* instead (loop_exits.py): the
  branches' outputs include the flags, and `guard` runs the code the exit skips under an If on them.

**`while` on a tensor**: the variables the body assigns (and that exist before the loop) are the
loop *carry*; the condition and the body become `cond_graph` / `body_graph` of a While node. A
carried Python number that the body changes becomes a 0-d tensor (int64 / float32 / bool) and the
loop is captured again. Every carried tensor must keep its shape and dtype. Variables first
assigned inside the body are undefined after the loop. With break/return in the body, the loop's
break flag and the frame's return flag and value are carried too, and the condition becomes
`cond and not broke and not returned`.

**Gradients.** An If node inside a gradient is one tape entry (`IfVJP`). Its backward is another
If node on the same condition whose branches are the *backward graphs of the two branches*: each is
built by replaying the branch graph with the tape on and running the same per-primitive backward
rules (rematerialisation: the branch's forward ops run again inside the backward branch). Host
calls whose results nothing uses (`print`) are not replayed. Branches that draw random numbers are
refused (a replay would draw different numbers). The gradient of a While node is not implemented:
a gradient that reaches one raises a clear error.
"""
from __future__ import annotations

import contextlib
import numbers

import numpy as np

from ....autograd import tape
from ....common import dtype as mstype
from ....common import grad_state
from ....common.tensor import Tensor
from ... import pytree
from ...ir import CALL, HOST_CALL, IF, OPAQUE, WHILE, Slot, Value
from ...printer import format_aval
from ...trace.session import HostResult
from .session import AstCaptureError, Region, aval_of, close_regions, is_symbolic, tracked, where
from . import loop_exits
from .loop_exits import RET, RETVAL
from .signals import MAYBE, MISSING, PENDING, RAISED, RETURN, Undefined
from .source import assigned_names, contains_loop_exit, contains_return, subscript_assigned_names

RETURN_LABEL = "return value"
_WILD = object()             # the value of a branch that raised: it takes the other branch's types


def _F():
    from ....ops import functional as F
    return F


def check_condition(cond, loc, what):
    size = 1
    for s in cond.shape:
        size *= s
    if size != 1:
        raise AstCaptureError(what, f"a condition tensor with one element for `{what}` on a tensor value",
                              f"shape {tuple(cond.shape)}; use .any() or .all()", where=where(loc))


# -- if -------------------------------------------------------------------------------------------------
class _Branch:
    __slots__ = ("values", "raised")

    def __init__(self, values, raised=None):
        self.values, self.raised = values, raised


def tensor_if(interp, stmt, frame, cond, cont):
    """`if <tensor>:` as an If node. Returns None, or RETURN when the branches end the function."""
    loc = frame.loc(stmt.lineno)
    check_condition(cond, loc, "if")
    body, orelse = stmt.body, stmt.orelse
    returning = contains_return(body) or contains_return(orelse)
    if contains_loop_exit(body) or contains_loop_exit(orelse) or (returning and cont is None):
        # an exit whose continuation is not "the rest of the function": exit flags (loop_exits.py)
        return tensor_branches(interp, frame, cond, (lambda: interp.exec_block(body, frame, None),
                                                     lambda: interp.exec_block(orelse, frame, None)),
                               loc, subscript_assigned_names(body + orelse))
    if returning:
        rest = [s for block in cont for s in block]
        blocks, labels = (body + rest, orelse + rest), [RETURN_LABEL]
    else:
        blocks, labels = (body, orelse), assigned_names(body + orelse)
    copies = subscript_assigned_names(body + orelse)
    regions, branches = [], []
    for kind, stmts in zip(("then", "else"), blocks):
        r = Region(interp, kind)
        r.session.defer_raise = True
        branches.append(_run_branch(interp, frame, r, stmts, labels, returning, copies))
        regions.append(r)
    merged = _merge_and_emit(interp, cond, regions, branches, labels, loc)
    if returning:
        frame.return_value = merged[RETURN_LABEL]
        return RETURN
    for name, v in merged.items():
        frame.env[name] = v
    if branches[0].raised is not None and branches[1].raised is not None:
        return RAISED
    return None


def tensor_ifexp(interp, node, frame, cond):
    """`a if <tensor> else b` as an If node with one output."""
    loc = frame.loc(node.lineno)
    check_condition(cond, loc, "if")
    regions, branches = [], []
    for kind, expr in (("then", node.body), ("else", node.orelse)):
        r = Region(interp, kind)
        with r:
            value = interp.eval(expr, frame)
        regions.append(r)
        branches.append(_Branch({RETURN_LABEL: value}))
    return _merge_and_emit(interp, cond, regions, branches, [RETURN_LABEL], loc)[RETURN_LABEL]


def _run_branch(interp, frame, region, stmts, labels, returning, copies):
    saved_env, saved_ret = frame.env, frame.return_value
    env = dict(saved_env)
    for n in copies:                       # `x[i] = v` in a branch must not rebind the outer x
        v = env.get(n)
        if is_symbolic(v):
            env[n] = interp.private_copy(v)
    frame.env, frame.return_value = env, None
    try:
        with region:
            sig = interp.exec_block(stmts, frame, () if returning else None)
            if returning and sig is MAYBE:         # a loop inside returned on some paths only
                sig = finish_function(interp, frame, frame.loc())
        ret = frame.return_value
    finally:
        frame.env, frame.return_value = saved_env, saved_ret
    raised = None
    if sig is RAISED:
        raised = region.session.raise_info or (RuntimeError("unreachable: an inner branch raised"), None)
    values = {RETURN_LABEL: ret} if returning else {n: env.get(n, MISSING) for n in labels}
    return _Branch(values, raised)


def tensor_branches(interp, frame, cond, runs, loc, copies=()):
    """An If node whose two branches are `runs` (callables returning a statement signal), run in
    private copies of the frame's variables. Its outputs are every variable either branch changed,
    exit flags included (a static exit at a branch's end becomes flags). Returns MAYBE (the caller
    resolves the flags), or RAISED when both branches raise."""
    loop_exits.ensure_retval(frame)
    saved_env, saved_ret = frame.env, frame.return_value
    regions, envs, raised = [], [], []
    for kind, run in zip(("then", "else"), runs):
        r = Region(interp, kind)
        r.session.defer_raise = True
        env = dict(saved_env)
        for n in copies:                       # `x[i] = v` in a branch must not rebind the outer x
            if is_symbolic(env.get(n)):
                env[n] = interp.private_copy(env[n])
        frame.env, frame.return_value = env, None
        try:
            with r:
                sig = loop_exits.to_flags(frame, run())
        finally:
            frame.env, frame.return_value = saved_env, saved_ret
        regions.append(r)
        envs.append(env)
        raised.append(r.session.raise_info or (RuntimeError("unreachable: an inner branch raised"), None)
                      if sig is RAISED else None)
    labels = {}
    for env in envs:
        for n, v in env.items():
            if v is not saved_env.get(n, MISSING):
                labels[n] = None
        for n in saved_env:
            if n not in env:                   # deleted in a branch
                labels[n] = None
    branches = [_Branch({n: env.get(n, MISSING) for n in labels}, rz) for env, rz in zip(envs, raised)]
    merged = _merge_and_emit(interp, cond, regions, branches, list(labels), loc, lenient=True)
    for n, v in merged.items():
        frame.env[n] = v
    if raised[0] is not None and raised[1] is not None:
        return RAISED
    return MAYBE


def guard(interp, frame, names, run, loc):
    """Run `run()` only on the paths where none of the exit flags `names` is set: an If node on
    `flag or flag ...` whose true branch does nothing. Inside `run` the flags are False (constants),
    and in the true branch a single flag is known to be True, so merges stay constant where they can."""
    flags = loop_exits.pending(frame, names)
    F = _F()
    cond = frame.env[flags[0]]
    for n in flags[1:]:
        cond = F.logical_or(cond, frame.env[n])

    def skipped():
        if len(flags) == 1:
            frame.env[flags[0]] = True
        return None

    def taken():
        for n in flags:
            frame.env[n] = False
        return run()

    return tensor_branches(interp, frame, cond, (skipped, taken), loc)


def finish_function(interp, frame, loc):
    """The end of a function body that returned on some paths only (MAYBE): the other paths fall off
    the end and return None, as in Python. Returns RETURN with the merged return value."""
    def falls_off():
        frame.return_value = None
        return RETURN

    guard(interp, frame, [RET], falls_off, loc)
    sig = loop_exits.resolve(frame)
    assert sig is RETURN, sig
    return sig


def _merge_and_emit(interp, cond, regions, branches, labels, loc, lenient=False):
    """Pair each label's values of the two branches, emit the If node, return {label: merged}.
    `lenient` (the Ifs of exit flags): a variable undefined on one path, or holding different
    Python objects (no tensors) on the two paths, becomes undefined instead of an error now: it
    is an error only if the code reads it later."""
    entries, sides, avals = [], ([], []), []
    for label in labels:
        a, b = (_WILD if br.raised is not None else br.values.get(label, MISSING) for br in branches)
        if a is MISSING or b is MISSING or (a is _WILD and b is _WILD):
            if a is MISSING and b is MISSING:
                continue
            entries.append((label, Undefined(label, f"is assigned on only one path of the `if` on a tensor "
                                                    f"value at line {loc[1]}"), 0))
            continue
        if lenient and (type(a) is Undefined or type(b) is Undefined):
            entries.append((label, a if type(a) is Undefined else b, 0))
            continue
        try:
            template, pairs = _pair(regions, label, a, b, loc)
        except AstCaptureError:
            if not lenient or _holds_tensor(a) or _holds_tensor(b):
                raise
            entries.append((label, Undefined(label, f"holds different Python values on the paths that a "
                                                    f"break/continue/return under the tensor condition at line "
                                                    f"{loc[1]} separates"), 0))
            continue
        for x, y in pairs:
            sides[0].append(x)
            sides[1].append(y)
            avals.append(aval_of(y if x is _WILD else x))
        entries.append((label, template, len(pairs)))

    outs = []
    for r, br, side in zip(regions, branches, sides):
        with r:
            if br.raised is not None:
                exc, cause = br.raised
                from .fallback import runtime_raise
                vals = r.session.host_call(runtime_raise, (exc, cause), {}, "raise", allow_fullgraph=True,
                                           out_avals=avals)
                outs.append([r.session.value_of(v) for v in vals])
            else:
                outs.append([r.value_of(x) for x in side])
    graphs, lifted = close_regions(regions, outs)
    results = emit_if(interp, cond, [interp.original(o) for o in lifted], graphs[0], graphs[1], loc)
    merged, k = {}, 0
    for label, template, n in entries:
        if type(template) is Undefined:
            merged[label] = template
            continue
        merged[label] = pytree.fill(template, results[k:k + n])
        k += n
    return merged


def _is_leaf(x):
    return isinstance(x, Tensor) or type(x) is HostResult


def _holds_tensor(x) -> bool:
    return x is not _WILD and bool(pytree.flatten(x, is_leaf=_is_leaf)[0])


def _is_number(x):
    return isinstance(x, (bool, numbers.Number, np.bool_)) and not isinstance(x, (complex, Tensor))


def number_dtype(*values):
    if all(isinstance(v, (bool, np.bool_)) for v in values):
        return mstype.bool_
    if any(isinstance(v, (float, np.floating)) for v in values):
        return mstype.float32
    return mstype.int64


def _pair(regions, label, a, b, loc):
    """The common structure of one variable in both branches: (template, [(leaf_a, leaf_b)])."""
    if a is PENDING or b is PENDING:
        if a is b:
            return a, []
        # a return value on one path only: the other path's value is never used (its return flag
        # is False there), so any value of the same type fills it
        if a is PENDING:
            a = _filler(regions[0], b, loc)
        else:
            b = _filler(regions[1], a, loc)
    if a is _WILD or b is _WILD:
        other = b if a is _WILD else a
        leaves, template = pytree.flatten(other, is_leaf=_is_leaf)
        return template, [(_WILD, x) if a is _WILD else (x, _WILD) for x in leaves]
    if _is_number(a) and _is_number(b) and type(a) is type(b) and a == b:
        return a, []
    a, b = _unify_numbers(regions, a, b)
    la, ta = pytree.flatten(a, is_leaf=_is_leaf)
    lb, tb = pytree.flatten(b, is_leaf=_is_leaf)
    ok = _same_template(ta, tb) and all(
        (type(x) is HostResult and type(y) is HostResult)
        or (isinstance(x, Tensor) and isinstance(y, Tensor) and tuple(x.shape) == tuple(y.shape)
            and x.dtype is y.dtype) for x, y in zip(la, lb))
    if not ok:
        what = "the return value" if label == RETURN_LABEL else loop_exits.display_name(label)
        raise AstCaptureError("if", f"{what} to have the same type, shape and dtype in both branches of an `if` "
                              f"on a tensor value", f"{_describe(a)} in the true branch and {_describe(b)} in the "
                              f"false branch", where=where(loc))
    return ta, list(zip(la, lb))


def _unify_numbers(regions, a, b):
    """Numbers that differ between the branches (also inside tuples, lists and dicts) become 0-d
    tensors; a number against a tensor becomes a tensor like it (MindSpore makes them variables)."""
    F = _F()
    if type(a) is type(b) and isinstance(a, (tuple, list)) and len(a) == len(b):
        pairs = [_unify_numbers(regions, x, y) for x, y in zip(a, b)]
        return type(a)(x for x, _ in pairs), type(b)(y for _, y in pairs)
    if type(a) is dict and type(b) is dict and list(a) == list(b):
        pairs = {k: _unify_numbers(regions, a[k], b[k]) for k in a}
        return {k: v[0] for k, v in pairs.items()}, {k: v[1] for k, v in pairs.items()}
    if _is_number(a) and _is_number(b):
        if type(a) is type(b) and a == b:
            return a, b
        dt = number_dtype(a, b)
        with regions[0]:
            a = F.full((), a, dtype=dt)
        with regions[1]:
            b = F.full((), b, dtype=dt)
    elif isinstance(a, Tensor) and _is_number(b):
        with regions[1]:
            b = F.full(tuple(a.shape), b, dtype=a.dtype)
    elif _is_number(a) and isinstance(b, Tensor):
        with regions[0]:
            a = F.full(tuple(b.shape), a, dtype=b.dtype)
    return a, b


def _filler(region, like, loc):
    """A value with the structure, shapes and dtypes of `like` (zeros), built in `region` (or in the
    session recording now): the return value of a path that has not returned."""
    F = _F()
    leaves, template = pytree.flatten(like, is_leaf=_is_leaf)
    out = []
    with region if region is not None else contextlib.nullcontext():
        for x in leaves:
            if type(x) is HostResult:
                raise AstCaptureError("return", "return values that are tensors or Python constants when a "
                                      "return happens under a tensor condition",
                                      "a Python value computed at run time", where=where(loc))
            out.append(F.zeros(tuple(x.shape), x.dtype))
    return pytree.fill(template, out)


def _same_template(x, y) -> bool:
    if type(x) is Slot:
        return type(y) is Slot
    if type(x) is not type(y):
        return False
    if isinstance(x, (tuple, list)):
        return len(x) == len(y) and all(_same_template(a, b) for a, b in zip(x, y))
    if isinstance(x, dict):
        return list(x) == list(y) and all(_same_template(x[k], y[k]) for k in x)
    if x is y:
        return True
    try:
        r = x == y
        return bool(r) if isinstance(r, (bool, np.bool_)) else bool(np.all(r))
    except Exception:  # noqa: BLE001 - incomparable objects: identity decided above
        return False


def _describe(x) -> str:
    if isinstance(x, Tensor):
        return f"a tensor {format_aval(aval_of(x))}"
    if type(x) is HostResult:
        return "a Python value computed at run time"
    if isinstance(x, (tuple, list)):
        inner = ", ".join(_describe(v) for v in x)
        return f"({inner})" if isinstance(x, tuple) else f"[{inner}]"
    text = repr(x)
    return (text if len(text) <= 40 else text[:37] + "...") + f" ({type(x).__name__})"


def emit_if(interp, cond, operands, then_g, else_g, loc):
    """Append an If node to the current session; record it on the tape inside a gradient."""
    s = interp.session
    cond_v = s.value_of(cond) if isinstance(cond, Tensor) or type(cond) is HostResult else bool(cond)
    vals = [s.value_of(o) if _is_leaf(o) else o for o in operands]
    out_avals = [o.aval for o in then_g.outputs]
    node = s.builder.add_structural(IF, [cond_v, *vals], {"then_graph": then_g, "else_graph": else_g},
                                    out_avals, source=loc)
    results = [s.wrap(v, "if") for v in node.outputs]
    if grad_state.depth > 0 and any(tracked(o) for o in operands):
        idx = [i for i, r in enumerate(results) if isinstance(r, Tensor)]
        if idx:
            grad_state.record(IfVJP(interp, then_g, else_g, idx, loc), (cond,) + tuple(operands), {},
                              tuple(results[i] for i in idx))
    return results


class IfVJP:
    """The tape entry of an If node: its backward is an If node over the branches' backward graphs."""

    name = "If"

    def __init__(self, interp, then_g, else_g, out_idx, loc):
        self.interp, self.then_g, self.else_g, self.out_idx, self.loc = interp, then_g, else_g, out_idx, loc

    def bprop(self, inputs, out, dout):
        cond, operands = inputs[0], inputs[1:]
        need = [isinstance(x, Tensor) and x._node is not None and x.dtype.is_floating for x in operands]
        if not any(need):
            return (None,) * len(inputs)
        interp = self.interp
        saved = interp.loc_override
        interp.loc_override = self.loc
        try:
            regions, outs = [], []
            for g in (self.then_g, self.else_g):
                r = Region(interp, "grad")
                with r:
                    ps = [r.bind(x) for x in operands]
                    ds = [r.bind(d) for d in dout]
                    grads = _branch_gradient(interp, g, ps, ds, self.out_idx, need, self.loc)
                    outs.append([r.value_of(gr) for gr in grads])
                regions.append(r)
            graphs, lifted = close_regions(regions, outs)
            res = emit_if(interp, cond, list(operands) + list(dout) + lifted, graphs[0], graphs[1], self.loc)
        finally:
            interp.loc_override = saved
        it = iter(res)
        return (None,) + tuple(next(it) if n else None for n in need)


def _branch_gradient(interp, g, ps, ds, out_idx, need, loc):
    from ...passes.inline_control_flow import draws_random
    if draws_random(g):
        raise AstCaptureError("if", "branches without random ops when differentiating an `if` on a tensor value",
                              f"random ops in '{g.name}' (the backward recomputes the branch and would draw "
                              f"different numbers); move the random op before the `if`", where=where(loc))
    leaves = [p for p, n in zip(ps, need) if n]
    for p in leaves:
        p._node = tape.Node(None, (), {}, p, ())
    grad_state.depth += 1
    try:
        outs = replay(interp, g, ps, for_gradient=True)
    finally:
        grad_state.depth -= 1
    pairs = [(outs[i], d) for i, d in zip(out_idx, ds)
             if isinstance(outs[i], Tensor) and outs[i]._node is not None and outs[i].dtype.is_floating]
    if pairs:
        grads, order = tape.backward([o for o, _ in pairs], [d for _, d in pairs], [p._node for p in leaves])
        tape.release(order)
    else:
        grads = [None] * len(leaves)
    for p in leaves:
        p._node = None
    F = _F()
    result = []
    for gr, p in zip(grads, leaves):
        if gr is None:
            gr = F.zeros_like(p)
        elif gr.dtype is not p.dtype:
            gr = F.cast(gr, p.dtype)
        result.append(gr)
    return result


def _used_ids(g):
    used = {o.id for o in g.outputs if isinstance(o, Value)}
    for node in g.nodes:
        used.update(x.id for x in node.inputs if isinstance(x, Value))
    return used


def replay(interp, g, args, for_gradient=False):
    """Evaluate graph `g` on `args` in the current session, op by op (so the tape can record it).

    Structural nodes are re-emitted with the same subgraphs. With `for_gradient`, host calls whose
    results nothing uses (print) are skipped: the forward already ran them."""
    env = {p.id: a for p, a in zip(g.params, args)}
    for v, t in g.captures:
        env[v.id] = t
    used = _used_ids(g) if for_gradient else None
    s = interp.session
    saved = interp.loc_override
    try:
        for node in g.nodes:
            ins = [env[x.id] if isinstance(x, Value) else x for x in node.inputs]
            interp.loc_override = node.source or saved
            if node.is_primitive:
                out = node.op(*ins, **node.attrs)
                outs = out if node.multi else (out,)
            elif node.op is IF:
                outs = emit_if(interp, ins[0], ins[1:], node.attrs["then_graph"], node.attrs["else_graph"],
                               node.source)
            elif node.op is WHILE:
                outs = emit_while(interp, ins, node.attrs["cond_graph"], node.attrs["body_graph"], node.source)
            elif node.op is CALL:
                outs = replay(interp, node.attrs["graph"], ins, for_gradient)
            else:
                assert node.op is HOST_CALL
                opaque = all(o.aval is OPAQUE for o in node.outputs)
                if for_gradient and opaque and not any(o.id in used for o in node.outputs):
                    continue
                a, k = pytree.fill(node.attrs["template"], ins)
                name = node.attrs.get("name", "host")
                if len(node.outputs) == 1 and opaque:
                    outs = (s.host_call(node.attrs["fn"], a, k, name, allow_fullgraph=True),)
                else:
                    outs = s.host_call(node.attrs["fn"], a, k, name, allow_fullgraph=True,
                                       out_avals=[o.aval for o in node.outputs])
            for v, o in zip(node.outputs, outs):
                env[v.id] = o
    finally:
        interp.loc_override = saved
    return [env[o.id] if isinstance(o, Value) else o for o in g.outputs]


# -- while ----------------------------------------------------------------------------------------------
def emit_while(interp, carry, cond_g, body_g, loc):
    s = interp.session
    vals = [s.value_of(c) for c in carry]
    node = s.builder.add_structural(WHILE, vals, {"cond_graph": cond_g, "body_graph": body_g},
                                    [v.aval for v in vals], source=loc)
    results = [s.wrap(v, "while") for v in node.outputs]
    if grad_state.depth > 0 and any(tracked(c) for c in carry):
        outs = tuple(r for r in results if isinstance(r, Tensor))
        if outs:
            grad_state.record(WhileVJP(loc), tuple(carry), {}, outs)
    return results


class WhileVJP:
    """The tape entry of a While node: differentiating through it is not supported (clear error)."""

    name = "While"

    def __init__(self, loc):
        self.loc = loc

    def bprop(self, inputs, out, dout):
        raise AstCaptureError("while", "no gradient flowing through a `while` loop on a tensor value (capture_mode"
                              "='ast' does not differentiate While nodes)", "a gradient that reaches the loop; "
                              "use a for loop over a constant range (it is unrolled), or ops.stop_gradient on "
                              "the loop's inputs", where=where(self.loc))


def tensor_while(interp, stmt, frame, first_cond):
    """The rest of `while <tensor>:` as a While node (see the module docstring)."""
    loc = frame.loc(stmt.lineno)
    check_condition(first_cond, loc, "while")
    body = stmt.body
    loop = frame.loops[-1]                    # s_While entered the loop (its exit flags)
    names = assigned_names(body)
    flags = []                                # exit flags carried by the loop
    if contains_loop_exit(body) or loop_exits.pending(frame, [loop.brk]):
        flags.append(loop.brk)
    if contains_return(body) or loop_exits.pending(frame, [RET]):
        loop_exits.ensure_retval(frame)
        flags += [RET, RETVAL]
    carried = [n for n in names if n in frame.env and type(frame.env[n]) is not Undefined] + flags
    promote = set()
    F = _F()
    while True:
        init, specs = {}, {}                  # specs: name -> (template, tensor leaves) of carried values
        for n in carried:
            v = frame.env[n]
            if n in promote and not _is_leaf(v):
                v = frame.env[n] = F.full((), v, dtype=number_dtype(v))
            init[n] = v
            leaves, template = pytree.flatten(v, is_leaf=_is_leaf)
            if leaves:
                specs[n] = (template, leaves)
        dyn = [n for n in carried if n in specs]

        body_r = Region(interp, "body")
        env = dict(frame.env)
        with body_r:
            for n in dyn:
                template, leaves = specs[n]
                env[n] = pytree.fill(template, [body_r.bind(x) for x in leaves])
        for n in (loop.brk, loop.cont, RET):
            env[n] = False                         # the body runs only while no exit has happened
        _run_in(interp, frame, body_r, env, body)
        env.pop(loop.cont, None)                   # `continue` ends with the iteration
        retry = False
        for n in carried:
            if n in dyn:
                continue
            nv = env.get(n, MISSING)
            if _same_template(nv, init[n]) and type(nv) is type(init[n]):
                continue                              # unchanged: a loop-invariant constant
            if init[n] is PENDING and nv is not MISSING:
                frame.env[n] = _filler(None, nv, loc)
                retry = True                          # a first return value: carry one of its type
                continue
            if _is_number(init[n]) and (_is_number(nv) or isinstance(nv, Tensor)):
                promote.add(n)
                retry = True
                continue
            raise AstCaptureError("while", f"loop variable '{n}' to stay the same Python value, or be a number "
                                  f"or tensor, in a `while` loop on a tensor value",
                                  f"{_describe(init[n])} before the loop and {_describe(nv)} after one iteration",
                                  where=where(loc))
        if retry:
            continue
        body_outs = []
        with body_r:
            for n in dyn:
                iv, nv = init[n], env.get(n, MISSING)
                if isinstance(iv, Tensor) and _is_number(nv):
                    nv = F.full(tuple(iv.shape), nv, dtype=iv.dtype)
                template, leaves = specs[n]
                new_leaves, new_template = pytree.flatten(nv, is_leaf=_is_leaf)
                same = _same_template(template, new_template) and len(leaves) == len(new_leaves) and all(
                    (type(a) is HostResult and type(b) is HostResult) or (
                        isinstance(a, Tensor) and isinstance(b, Tensor) and tuple(a.shape) == tuple(b.shape)
                        and a.dtype is b.dtype) for a, b in zip(leaves, new_leaves))
                if not same:
                    raise AstCaptureError("while", f"loop variable '{n}' to keep its type, shape and dtype in a "
                                          f"`while` loop on a tensor value", f"{_describe(iv)} before the loop and "
                                          f"{_describe(nv)} after one iteration", where=where(loc))
                body_outs += [body_r.value_of(x) for x in new_leaves]

        cond_r = Region(interp, "cond")
        env = dict(frame.env)
        with cond_r:
            for n in dyn:
                template, leaves = specs[n]
                env[n] = pytree.fill(template, [cond_r.bind(x) for x in leaves])
        saved_env = frame.env
        frame.env = env
        try:
            with cond_r:
                c = interp.eval(stmt.test, frame)
        finally:
            frame.env = saved_env
        if not isinstance(c, Tensor):
            raise AstCaptureError("while", "a loop condition that stays a tensor inside the loop",
                                  f"{_describe(c)}", where=where(loc))
        check_condition(c, loc, "while")
        exited = [env[n] for n in (loop.brk, RET) if n in dyn]
        if exited:                                 # `cond and not broke and not returned`
            with cond_r:
                stop = exited[0]
                for e in exited[1:]:
                    stop = F.logical_or(stop, e)
                c = F.logical_and(F.cast(c, mstype.bool_), F.logical_not(stop))
        cond_out = cond_r.value_of(c)
        break

    graphs, lifted = close_regions([cond_r, body_r], [[cond_out], body_outs], passthrough=(False, True))
    carry = [x for n in dyn for x in specs[n][1]]
    results = emit_while(interp, carry + [interp.original(o) for o in lifted], graphs[0], graphs[1], loc)
    k = 0
    for n in dyn:
        template, leaves = specs[n]
        frame.env[n] = pytree.fill(template, results[k:k + len(leaves)])
        k += len(leaves)
    for n in names:
        if n not in carried:
            frame.env[n] = Undefined(n, f"is first assigned inside the `while` loop on a tensor value at line "
                                        f"{loc[1]} (define it before the loop)")


def _run_in(interp, frame, region, env, stmts):
    saved_env, saved_ret = frame.env, frame.return_value
    frame.env = env
    try:
        with region:
            sig = loop_exits.to_flags(frame, interp.exec_block(stmts, frame, None))
    finally:
        frame.env, frame.return_value = saved_env, saved_ret
    return sig


__all__ = ["tensor_if", "tensor_ifexp", "tensor_while", "tensor_branches", "guard", "finish_function", "emit_if",
           "emit_while", "replay", "IfVJP", "WhileVJP", "check_condition", "number_dtype"]
