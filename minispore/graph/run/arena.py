"""The arena strategy: a plan run with every intermediate inside one arena at its planned offset
(`O0Executor(graph, arena=True)`, or `set_context(memory_optimize_level="O1")` for jitted
functions). Offsets come from the SOMAS planner (graph/memory, `memory.graph_plan`).

Kernels return new arrays (NumPy allocates them); each result is copied into its planned arena
buffer right away (one `np.copyto`, which also casts to the inferred dtype) and the heap array is
dropped, so between steps every intermediate lives in the arena. What is copied where is decided
once, when the strategy is built, by giving it its own copies of the plan's steps (the step loop,
loop.py, is the same):

* a primitive step's kernel is composed with the *placement* of its outputs, a structural step's
  results pass through its `place` hook:
  - an *owning* output is copied into `arena.view(offset, shape, dtype)` (that view is made once
    and reused by every run: the arena never moves);
  - a *view* (reshape/transpose/... of an arena tensor): the kernel's result already points into
    its owner's bytes - checked by address; if NumPy copied after all, the result stays on the
    heap and is counted in `unplanned_bytes` (warned once) rather than trusted;
  - a view of a graph input or capture is left as the kernel made it (the caller's memory);
  - an *in-place* output is expected at its owner's address, copied there otherwise;
* a Call step runs its callee's plan inside a window of this arena (a *workspace* of the call's
  step), and its outputs are then placed like any others.

Graph outputs that point into the arena are copied out on return (the next run reuses the arena;
the caller keeps its results). `arena.high_water` measures the bytes actually used: after a run it
equals `memory_plan.peak_bytes` (the tests check it, and DryRun's prediction is this number).
"""
from __future__ import annotations

import warnings
from functools import partial

import numpy as np

from ...common.errors import MinisporeRuntimeError
from ..ir import OPAQUE, Value
from ..memory.arena import Arena
from ..memory.call_plans import graph_plan
from .loop import check_kernels, conform, run_steps
from .plan import CALL_STEP, PRIM, rebind


class ArenaRun:
    """`plan` run inside one arena (see the module docstring). `memory_plan`: the offsets;
    `arena`: the Arena; `steps`: the plan's steps with placement bound; `unplanned_bytes`: bytes a
    kernel produced outside the arena because NumPy copied where a view was planned (0 in practice).
    `callee=True`: a Call's callee, whose caller copies its outputs."""

    def __init__(self, plan, arena: Arena | None = None, memory_plan=None, callee: bool = False):
        self.plan = plan
        self.memory_plan = memory_plan if memory_plan is not None else graph_plan(plan.graph)
        self.arena = arena if arena is not None else Arena(self.memory_plan.peak_bytes)
        self.unplanned_bytes = 0
        self._warned = False
        self._base = self.arena.buffer.__array_interface__["data"][0]
        self.steps = [self._bind(i, step) for i, step in enumerate(plan.steps)]
        by_id = self.memory_plan._by_id
        self.copy_out = []
        for o in plan.outputs:
            b = by_id.get(o.id) if isinstance(o, Value) else None
            self.copy_out.append(b is not None and b.kind != "external_view" and not callee)
        self.arena.reset_measure()         # (building made views; the measure starts with the first run)

    # -- running ----------------------------------------------------------------------------------------
    def run(self, arrays, live=None) -> list:
        plan = self.plan
        env = plan.new_env(arrays)
        run_steps(plan, self.steps, env, check_kernels(), live)
        return [(env[s].copy() if cp and isinstance(env[s], np.ndarray) else env[s]) if s is not None else c
                for s, c, cp in zip(plan.out_slots, plan.outputs, self.copy_out)]

    def call(self, *arrays):
        """Run as a Call's callee (the caller's step calls this with the call's arguments)."""
        return self.run(arrays)

    # -- building: where each output goes ---------------------------------------------------------------
    def _bind(self, i, step):
        node = step.node
        if step.kind == PRIM and len(step.outs) == 1 and not node.multi:
            # most steps: one output (the general case below without its list of placers)
            place = self._placer(node.outputs[0], node)
            if place is None:
                return step                # not planned (a view of a graph input): the plan's step
            return rebind(step, fn=partial(_placed_kernel, step.fn, place))
        placers = [self._placer(o, node) for o in node.outputs]
        fn = step.fn
        if step.kind == CALL_STEP:
            callee_plan = graph_plan(step.sub.graph)
            window = self.arena.sub(self.memory_plan.offsets[("workspace", i)], callee_plan.peak_bytes)
            fn = ArenaRun(step.sub, window, callee_plan, callee=True).call
        elif not any(placers):
            return step                    # nothing planned (opaque or external outputs): the plan's step
        if step.kind == PRIM:
            return rebind(step, fn=partial(_placed_kernel_multi, fn, placers))
        return rebind(step, fn=fn, place=partial(_placed_results, placers))

    def _placer(self, o, node):
        """`place(result) -> what the slot holds` for output `o`, or None where the step loop's
        own handling is right (an opaque value, an unplanned one, a view of a graph input).
        (Placers and placing kernels are `partial`s of module functions: two small objects per
        step instead of a closure and its cells - a plan of thousands of steps binds faster.)"""
        p = self.memory_plan
        b = p._by_id.get(o.id)
        if b is None or o.aval is OPAQUE or b.kind == "external_view":
            return None
        shape, dtype = o.aval.shape, o.aval.dtype.np
        if b.alias_of is None:
            off = p.offsets[b.value_id]
            return partial(_own, self.arena.view(off, shape, dtype), off + b.size_bytes, self.arena, node)
        off = p.offset(o)
        owner = p.buffer(b.alias_of)
        top = p.offsets[owner.value_id] + owner.size_bytes
        if b.kind == "inplace":
            dst = self.arena.view(off, shape, dtype)
            return partial(_inplace, dst, dst.__array_interface__["data"][0], top, self.arena)
        return partial(_view, self._base + off, top, o.aval, node, self)

    def _unplanned(self, node, arr):
        self.unplanned_bytes += arr.nbytes
        if not self._warned:
            self._warned = True
            warnings.warn(f"memory plan: '{node.op.name}' (at {node.where()}) was planned as a view but NumPy "
                          f"copied; its result lives outside the arena", RuntimeWarning, stacklevel=4)


def _own(dst, top, arena, node, r):
    """An owning output: copy the result into its planned buffer `dst` (casting to its dtype)."""
    if type(r) is not np.ndarray:
        r = np.asarray(r)
    if r.shape != dst.shape:               # copyto would broadcast: say what the kernel did
        raise MinisporeRuntimeError(f"kernel for '{node.op.name}' returned shape {r.shape}, "
                                    f"inference said {dst.shape} (at {node.where()})")
    np.copyto(dst, r, casting="unsafe")
    if top > arena.high_water:
        arena._touch(top)
    return dst


def _inplace(dst, address, top, arena, r):
    """An in-place kernel's output: at its owner's address already, or copied there."""
    if not (type(r) is np.ndarray and r.__array_interface__["data"][0] == address):
        np.copyto(dst, r, casting="unsafe")
    if top > arena.high_water:
        arena._touch(top)
    return dst


def _view(address, top, aval, node, run, r):
    """A planned view: the kernel's result points into its owner's bytes (checked by address), or
    NumPy copied after all and the result stays on the heap, counted as unplanned."""
    if type(r) is np.ndarray and r.__array_interface__["data"][0] == address:
        if top > run.arena.high_water:
            run.arena._touch(top)
        return r
    r = conform(r, aval, node, False)
    run._unplanned(node, r)
    return r


def _placed_kernel(kernel, place, *args, **attrs):
    return place(kernel(*args, **attrs))


def _placed_kernel_multi(kernel, placers, *args, **attrs):
    return tuple(p(r) if p is not None else r for p, r in zip(placers, kernel(*args, **attrs)))


def _placed_results(placers, results):
    return [p(r) if p is not None else r for p, r in zip(placers, results)]


__all__ = ["ArenaRun"]
