"""The step loop: run a plan's steps over an environment ("kernel by kernel").

`run_steps(plan, steps, env, check)` is the ONE loop every interpreted run goes through: the
default heap run (`run_plan`, below), the arena (arena.py: the same loop over steps whose kernels
write into planned buffers) and each stream of a multi-stream run (multi_stream.py: the same
loop, one step at a time, between the stream's event waits). Per step it

1. calls the step's kernel on the arrays in its input slots - no shape inference (done at
   capture), no Tensor objects, no autodiff tape;
2. *conforms* each result to its inferred dtype as PyNative does (`conform`; with
   `MINISPORE_CHECK_KERNELS=1` it checks the shape too);
3. on failure, raises the error `locate_error` makes: op, user source line, graph;
4. clears the step's `frees` slots, so NumPy frees a buffer as soon as its last reader ran (when
   the last view of it goes too).

Structural steps: If runs the branch its condition picks, While runs cond/body until the
condition is false, Call runs the callee's plan, HostCall calls a Python function on concrete
Tensors (JIT Fallback) and then reloads the captures (the host code may have given a Parameter new
storage - an optimizer's `set_data`). Random primitives draw from the global generator inside
their kernels, at run time: every run draws fresh numbers, in PyNative's order.

The heap run: every result is a new NumPy array, freed after its last reader. Graph outputs are
kept; params and captures are the caller's; a run returns one entry per graph output - an array, a
host call's Python object, or the constant itself. `live` (a list) receives, after each step, the
set of Value ids still held (the executor's `record_live`, for tests and memory checks).
"""
from __future__ import annotations

import os

import numpy as np

from ...common.errors import MinisporeError, MinisporeRuntimeError, OpIndexError, OpTypeError, OpValueError
from ...common.tensor import Tensor, _wrap
from ..ir import OPAQUE, Slot
from .plan import CALL_STEP, IF_STEP, PRIM, WHILE_STEP


def check_kernels() -> bool:
    """MINISPORE_CHECK_KERNELS=1: check every kernel's result shape against inference (read per run)."""
    return os.environ.get("MINISPORE_CHECK_KERNELS", "0") == "1"


def run_plan(plan, arrays, live=None) -> list:
    """Run `plan` on the heap: one array per graph param in, one entry per graph output out."""
    env = plan.new_env(arrays)
    run_steps(plan, plan.steps, env, check_kernels(), live)
    return plan.results(env)


def run_steps(plan, steps, env, check, live=None):
    """Run `steps` (the plan's, or a strategy's copies of them) over `env`. See the module docstring."""
    graph = plan.graph
    if live is not None:
        slot_value = plan.slot_value
    for step in steps:
        try:
            if step.kind == PRIM:
                ins, attrs = step.ins, step.attrs
                n = len(ins)
                # one- and two-input kernels without attributes are most nodes: called directly,
                # which saves building an argument list per step (plain: fn(*[env[i] for i in ins], **attrs))
                if n == 2:
                    r = step.fn(env[ins[0]], env[ins[1]], **attrs) if attrs else step.fn(env[ins[0]], env[ins[1]])
                elif n == 1:
                    r = step.fn(env[ins[0]], **attrs) if attrs else step.fn(env[ins[0]])
                else:
                    r = step.fn(*[env[i] for i in ins], **attrs)
                outs = step.outs
                if len(outs) == 1 and not step.node.multi:
                    # an ndarray of the inferred dtype needs no conform call (the plain version:
                    # always `conform(r, aval, node, check)`); dtypes are singletons, so `is` is exact
                    if type(r) is not np.ndarray or r.dtype is not step.npdt[0] or check:
                        r = conform(r, step.node.outputs[0].aval, step.node, check)
                    env[outs[0]] = r
                else:
                    for s, a, o in zip(outs, r, step.node.outputs):
                        env[s] = conform(a, o.aval, step.node, check)
            else:
                _run_structural(plan, step, env)
        except Exception as e:         # noqa: BLE001 - a kernel failed: report it with its line
            err = locate_error(step.node, graph, e)
            if err is e:
                raise
            raise err from e
        for s in step.frees:
            env[s] = None
        if live is not None:
            live.append({slot_value[i] for i, v in enumerate(env) if v is not None and i in slot_value})


def _run_structural(plan, step, env):
    kind = step.kind
    args = [env[i] for i in step.ins]
    if kind == IF_STEP:
        cond, operands = args[0], args[1:]
        results = run_plan(step.sub[0] if truth(cond) else step.sub[1], operands)
    elif kind == WHILE_STEP:
        cond_plan, body_plan = step.sub
        carry = args
        while truth(run_plan(cond_plan, carry)[0]):
            carry = run_plan(body_plan, carry)
        results = carry
    elif kind == CALL_STEP:
        results = run_plan(step.sub, args) if step.fn is None else step.fn(*args)
    else:
        results = _host_step(plan, step, args)
        plan.load_captures(env)             # Python code ran: a Parameter may have new storage
    if step.place is not None:
        results = step.place(results)
    for s, r, o in zip(step.outs, results, step.node.outputs):
        env[s] = r if o.aval is OPAQUE else conform(r, o.aval, step.node, False)


def truth(cond) -> bool:
    """An If/While condition as a Python bool (a 0-d or one-element array, or a bool)."""
    return bool(np.asarray(cond).reshape(())) if not isinstance(cond, bool) else cond


def _host_step(plan, step, args):
    """Run a HostCall step's Python function (JIT Fallback) on Tensors made from the arrays."""
    call_args, call_kwargs = host_arguments(step.sub, args)
    try:
        result = step.fn(*call_args, **call_kwargs)
    except Exception as e:             # noqa: BLE001
        # the user's Python raised (a `raise ValueError(...)` in a tensor branch, a failing
        # fallback): it propagates as is, as in PyNative and MindSpore, with a note saying where
        # the graph ran it; enclosing graphs (If/While/Call) pass it on unchanged
        if not getattr(e, "_graph_located", False):
            try:
                e._graph_located = True
                e.add_note(f"(raised by Python run from the compiled graph '{plan.graph.name}', "
                           f"{step.node.where()})")
            except (AttributeError, TypeError):
                pass
        raise
    return host_results(step.node, result)


def host_arguments(template, args):
    """A host call's (args, kwargs): its template filled with Tensors made from the arrays."""
    return fill_template(template, [_wrap(a) if isinstance(a, np.ndarray) else a for a in args])


def host_results(node, result):
    """A host function's result as one entry per node output: arrays for Tensors (an opaque
    output is the Python object itself)."""
    outs = node.outputs
    if len(outs) == 1 and outs[0].aval is OPAQUE:
        return (result,)
    results = result if isinstance(result, (tuple, list)) else (result,)
    return tuple(r._data if isinstance(r, Tensor) else r for r in results)


def fill_template(template, args):
    """A host call's (args, kwargs) with every `Slot(i)` of its template replaced by `args[i]`."""
    if isinstance(template, Slot):
        return args[template.index]
    if isinstance(template, tuple):
        return tuple(fill_template(t, args) for t in template)
    if isinstance(template, list):
        return [fill_template(t, args) for t in template]
    if isinstance(template, dict):
        return {k: fill_template(v, args) for k, v in template.items()}
    return template


# -- results and errors: the one conform and the one locate_error of every executor ------------------
def conform(arr, aval, node, check):
    """`arr` as an ndarray of the inferred dtype (as PyNative casts kernel results); with `check`,
    also the inferred shape, or a MinisporeRuntimeError naming the op."""
    if type(arr) is not np.ndarray:
        arr = np.asarray(arr)
    npdt = aval.dtype.np
    if arr.dtype != npdt:
        arr = arr.astype(npdt)
    if check and arr.shape != aval.shape:
        raise MinisporeRuntimeError(f"kernel for '{node.op.name}' returned shape {arr.shape}, "
                                    f"inference said {aval.shape} (at {node.where()})")
    return arr


def locate_error(node, graph, e):
    """The exception to raise when `node` of `graph` failed with `e`: `e` itself when it already
    says where (an inner graph located it, or it is the user's own exception from a host call,
    which propagates unchanged), else a minispore error naming the op, the source line and the
    graph. Every executor (the step loop, several streams, O2's generated code) reports failures
    through this one function."""
    if getattr(e, "_graph_located", False):
        return e
    err = _runtime_error(node, graph, e)
    err._graph_located = True
    return err


def _runtime_error(node, graph, err):
    """A kernel failed at run time: say which node, of which graph, from which line."""
    where = f"{node.where()}, graph '{graph.name}'"
    if isinstance(err, MinisporeError):
        if hasattr(err, "op"):
            cls = type(err)
            return cls(err.op, err.expected, err.got, where=where)
        return err
    cls = (OpTypeError if isinstance(err, TypeError) else OpIndexError if isinstance(err, IndexError)
           else OpValueError if isinstance(err, ValueError) else None)
    if cls is None:
        return MinisporeRuntimeError(f"For '{node.op.name}', the kernel failed at run time: "
                                     f"{type(err).__name__}: {err} (at {where})")
    return cls(node.op.name, f"inputs its kernel accepts ({type(err).__name__}: {err})",
               "values that fail at run time", where=where)


__all__ = ["run_plan", "run_steps", "conform", "locate_error", "host_arguments", "host_results", "fill_template",
           "truth", "check_kernels"]
