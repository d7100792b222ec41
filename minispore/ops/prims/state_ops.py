"""Ops with side effects: `assign`, `assign_add`, `assign_sub` (write into a Parameter in place),
`depend` and `print_`.

These are not primitives of the registry: a registry op computes a new tensor from its inputs,
while these change (or print) an existing one. What they share with primitives is the rule that
input is checked before anything happens.

A side effect must happen when the program *runs*. In PyNative that is now; under `jit` the call
meets tensors without values yet (tracers), so it is recorded as a host call of the capture session
and runs each time the graph runs, in program order (the mechanism that runs an optimizer inside a
jitted training step). `ops` sits below the graph layer, so the session is looked up lazily, only
when a tracer shows up.

MindSpore's rules, checked against 2.10: the value must have the variable's shape exactly (no
broadcasting, a Python scalar only for a 0-d variable), and its dtype must convert to the
variable's without widening it (an Int32 value into a Float32 Parameter is fine; Float64 into
Float32 is refused). The variable must be a Parameter.
"""
from __future__ import annotations

import numbers
import sys

import numpy as np

from ...common import dtype as mstype
from ...common.tensor import Parameter, Tensor
from .. import _check as C


def is_traced(x):
    """A tensor that is a placeholder of a graph being captured (its values do not exist yet)."""
    return isinstance(x, Tensor) and type(x._data) is not np.ndarray


def _capture_session():
    """The active jit capture session (graph layer), or None outside a capture."""
    capture = sys.modules.get("minispore.graph.capture")
    return capture.current_capture() if capture is not None else None


def run_or_record(name, fn, args):
    """Run `fn(*args)` now, or - when an argument is a traced tensor inside a capture - record it
    to run on the host each time the graph runs."""
    if any(is_traced(a) for a in args):
        session = _capture_session()
        if session is not None:
            return session.host_call(fn, tuple(args), {}, name)
    return fn(*args)


# ------------------------------------------------------------------------------------------------
# assign / assign_add / assign_sub
def _check_assign(op, variable, value):
    """Everything MindSpore checks, from shapes and dtypes only (so it also runs on tracers)."""
    if not isinstance(variable, Parameter):
        # (MindSpore's PyNative also writes into a plain Tensor; minispore keeps in-place writes to
        #  Parameters, whose buffers no autodiff record or view shares)
        raise C.OpTypeError(op, "'variable' to be a Parameter", type(variable).__name__)
    if isinstance(value, Tensor):
        shape, dt = tuple(value.shape), value.dtype
    elif isinstance(value, (numbers.Number, np.generic)) and not isinstance(value, complex):
        shape, dt = (), mstype.promote_scalar(variable.dtype, value)
    else:
        raise C.OpTypeError(op, "'value' to be a Tensor or a number", type(value).__name__)
    if shape != tuple(variable.shape):
        raise C.OpValueError(op, f"'value' of the variable's shape {tuple(variable.shape)}", f"shape {shape}")
    if dt is not variable.dtype and mstype.promote(variable.dtype, dt, op) is not variable.dtype:
        raise C.OpTypeError(op, f"a 'value' dtype that converts to the variable's {variable.dtype} without "
                                f"widening it", str(dt))


def _write(variable, data):
    """Copy `data` into the variable's buffer (cast to its dtype) and bump its version, so a
    saved-for-backward check and compiled graphs see that it changed."""
    a = variable._data
    if a.flags.writeable:
        np.copyto(a, data, casting="unsafe")
    else:                       # a read-only buffer (e.g. a broadcast view): give it its own
        variable._data = np.array(data, dtype=a.dtype)
    variable._version += 1
    return variable


def _values(value):
    return value._data if isinstance(value, Tensor) else value


def _assign_now(variable, value):
    return _write(variable, _values(value))


def _assign_add_now(variable, value):
    return _write(variable, variable._data + _values(value))


def _assign_sub_now(variable, value):
    return _write(variable, variable._data - _values(value))


def assign(variable, value):
    """`ops.assign(variable, value)`: write `value` into the Parameter `variable` in place (cast to
    its dtype); returns the variable. Not differentiable."""
    _check_assign("Assign", variable, value)
    return run_or_record("Assign", _assign_now, (variable, value))


def assign_add(variable, value):
    """`ops.assign_add(variable, value)`: variable += value, in place; returns the variable."""
    _check_assign("AssignAdd", variable, value)
    return run_or_record("AssignAdd", _assign_add_now, (variable, value))


def assign_sub(variable, value):
    """`ops.assign_sub(variable, value)`: variable -= value, in place; returns the variable."""
    _check_assign("AssignSub", variable, value)
    return run_or_record("AssignSub", _assign_sub_now, (variable, value))


# ------------------------------------------------------------------------------------------------
# depend / print_
def depend(value, expr):
    """`ops.depend(value, expr)`: `value`, to be computed after `expr`. MindSpore needs it to order
    side effects in a graph; minispore's graphs keep program order, so only `value` is returned."""
    return value


def _print_values(*args):
    for a in args:
        print(a if isinstance(a, (str, Tensor)) else repr(a))


def print_(*input_x):
    """`ops.print_(*input_x)`: print strings, tensors and Python scalars, one per line; returns None.
    Under jit the values are printed when the graph runs, not while it is captured."""
    for a in input_x:
        if not isinstance(a, (str, Tensor, numbers.Number, tuple, list)):
            raise C.OpTypeError("Print", "strings, Tensors or Python scalars", type(a).__name__)
    run_or_record("Print", _print_values, input_x)
    return None


__all__ = ["assign", "assign_add", "assign_sub", "depend", "print_"]
