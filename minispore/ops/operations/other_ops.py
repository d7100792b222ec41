"""Class-style operators with side effects or no computation: `Assign`, `AssignAdd`, `AssignSub`,
`Print`, `Depend`, `StopGradient`.

A side effect must happen when the program *runs*. In PyNative that is now; under `jit` the call
meets tensors that have no values yet (tracers), so it is recorded as a host call of the capture
session and runs each time the graph runs, in program order (the same mechanism that runs
optimizers inside a jitted training step). `ops` sits below the graph layer, so the session is
looked up lazily, only when a tracer shows up.
"""
from __future__ import annotations

import sys

import numpy as np

from ...common.errors import OpTypeError, OpValueError
from ...common.tensor import Parameter, Tensor
from .. import functional as F
from .base import Primitive, prim_attr_register


def _is_traced(x):
    return isinstance(x, Tensor) and type(x._data) is not np.ndarray


def _capture_session():
    """The active jit capture session (graph layer), or None outside a capture."""
    capture = sys.modules.get("minispore.graph.capture")
    return capture.current_capture() if capture is not None else None


def _run_or_record(name, fn, args):
    """Run `fn(*args)` now, or - when an argument is a traced tensor inside a capture - record it to
    run on the host each time the graph runs."""
    if any(_is_traced(a) for a in args):
        session = _capture_session()
        if session is not None:
            return session.host_call(fn, tuple(args), {}, name)
    return fn(*args)


# ------------------------------------------------------------------------------------------------
def _assign_now(op, variable, value):
    if isinstance(value, Tensor):
        data = value._data
    else:
        data = np.asarray(value)
    if tuple(data.shape) != tuple(variable._data.shape) and data.size != 1:
        raise OpValueError(op, f"a value of the variable's shape {tuple(variable.shape)}", f"shape {tuple(data.shape)}")
    a = variable._data
    if a.flags.writeable:
        np.copyto(a, np.broadcast_to(data, a.shape), casting="unsafe")
    else:
        variable._data = np.broadcast_to(data, a.shape).astype(a.dtype)
    variable._version += 1
    return variable


def _check_variable(op, variable):
    if not isinstance(variable, Parameter):
        raise OpTypeError(op, "'variable' to be a Parameter", type(variable).__name__)


class Assign(Primitive):
    """`Assign()(variable, value)`: write `value` into the Parameter `variable` (cast to its dtype)
    and return it. Not differentiable."""

    @prim_attr_register
    def __init__(self):
        self.add_prim_attr("side_effect_mem", True)

    def __call__(self, variable, value):
        _check_variable(self.name, variable)
        return _run_or_record(self.name, lambda v, x: _assign_now("Assign", v, x), (variable, value))


class AssignAdd(Primitive):
    """`AssignAdd()(variable, value)`: variable += value; returns the variable."""

    @prim_attr_register
    def __init__(self):
        self.add_prim_attr("side_effect_mem", True)

    def __call__(self, variable, value):
        _check_variable(self.name, variable)

        def run(v, x):
            return _assign_now("AssignAdd", v, v._data + (x._data if isinstance(x, Tensor) else x))
        return _run_or_record(self.name, run, (variable, value))


class AssignSub(Primitive):
    """`AssignSub()(variable, value)`: variable -= value; returns the variable."""

    @prim_attr_register
    def __init__(self):
        self.add_prim_attr("side_effect_mem", True)

    def __call__(self, variable, value):
        _check_variable(self.name, variable)

        def run(v, x):
            return _assign_now("AssignSub", v, v._data - (x._data if isinstance(x, Tensor) else x))
        return _run_or_record(self.name, run, (variable, value))


def _print_values(*args):
    for a in args:
        print(a if isinstance(a, (str, Tensor)) else repr(a))


class Print(Primitive):
    """`Print()(*inputs)`: print strings and tensors, one per line; returns None. Under jit the
    values are printed when the graph runs (a host call), not while it is captured."""

    @prim_attr_register
    def __init__(self):
        self.add_prim_attr("side_effect_io", True)

    def __call__(self, *args):
        for a in args:
            if not isinstance(a, (str, Tensor, int, float, bool, tuple, list)):
                raise OpTypeError(self.name, "strings, Tensors or Python scalars", type(a).__name__)
        _run_or_record(self.name, _print_values, args)
        return None


class Depend(Primitive):
    """`Depend()(value, expr)`: `value`, after `expr` (in minispore's program-ordered graphs the
    order already holds, so this only returns `value`)."""

    @prim_attr_register
    def __init__(self):
        pass

    def __call__(self, value, expr):
        return value


class StopGradient(Primitive):
    """`StopGradient()(x)`: x, with no gradient flowing back through it."""

    @prim_attr_register
    def __init__(self):
        pass

    def __call__(self, input):
        return F.stop_gradient(input)


__all__ = ["Assign", "AssignAdd", "AssignSub", "Print", "Depend", "StopGradient"]
