"""Class-style operators with side effects or no computation: `Assign`, `AssignAdd`, `AssignSub`,
`Print`, `Depend`, `StopGradient`.

Each is a thin class over the functional op in `ops/prims/state_ops.py` (`ops.assign`, ...), which
explains how a side effect runs in PyNative and under `jit`.
"""
from __future__ import annotations

from .. import functional as F
from ..prims import state_ops
from .base import Primitive, prim_attr_register


class Assign(Primitive):
    """`Assign()(variable, value)`: write `value` into the Parameter `variable` (cast to its dtype)
    and return it (`ops.assign`). Not differentiable."""

    @prim_attr_register
    def __init__(self):
        self.add_prim_attr("side_effect_mem", True)

    def __call__(self, variable, value):
        return state_ops.assign(variable, value)


class AssignAdd(Primitive):
    """`AssignAdd()(variable, value)`: variable += value; returns the variable (`ops.assign_add`)."""

    @prim_attr_register
    def __init__(self):
        self.add_prim_attr("side_effect_mem", True)

    def __call__(self, variable, value):
        return state_ops.assign_add(variable, value)


class AssignSub(Primitive):
    """`AssignSub()(variable, value)`: variable -= value; returns the variable (`ops.assign_sub`)."""

    @prim_attr_register
    def __init__(self):
        self.add_prim_attr("side_effect_mem", True)

    def __call__(self, variable, value):
        return state_ops.assign_sub(variable, value)


class Print(Primitive):
    """`Print()(*inputs)`: print strings and tensors, one per line; returns None (`ops.print_`).
    Under jit the values are printed when the graph runs (a host call), not while it is captured."""

    @prim_attr_register
    def __init__(self):
        self.add_prim_attr("side_effect_io", True)

    def __call__(self, *args):
        return state_ops.print_(*args)


class Depend(Primitive):
    """`Depend()(value, expr)`: `value`, after `expr` (in minispore's program-ordered graphs the
    order already holds, so this only returns `value`)."""

    @prim_attr_register
    def __init__(self):
        pass

    def __call__(self, value, expr):
        return state_ops.depend(value, expr)


class StopGradient(Primitive):
    """`StopGradient()(x)`: x, with no gradient flowing back through it."""

    @prim_attr_register
    def __init__(self):
        pass

    def __call__(self, input):
        return F.stop_gradient(input)


__all__ = ["Assign", "AssignAdd", "AssignSub", "Print", "Depend", "StopGradient"]
