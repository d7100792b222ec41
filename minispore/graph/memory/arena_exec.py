"""Arena mode for the O0 executor: run a graph's plan of steps with every intermediate inside one
arena at its planned offset (`O0Executor(graph, arena=True)`, or
`set_context(memory_optimize_level="O1")` for jitted functions).

Kernels return new arrays (NumPy allocates them); each result is copied into its planned arena
slot right away (one `np.copyto`, which also casts to the inferred dtype), and the heap array is
dropped, so between steps every intermediate lives in the arena. What is copied where is decided
once, when the executor is built:

* an *owning* output: copied into `arena.view(offset, shape, dtype)` (that view is made once and
  reused by every run: the arena never moves);
* a *view* (reshape/transpose/... of an arena tensor): the kernel's result already points into its
  owner's bytes - checked by address; if NumPy copied after all, the result stays on the heap and
  is counted in `unplanned_bytes` (warned once) rather than trusted;
* a view of a graph input or capture: left as the kernel made it (the caller's memory);
* an *in-place* output: expected at its owner's address, copied there otherwise;
* a CALL: the callee has its own plan and runs inside a window of this arena (a *workspace* of
  the call's step), then its outputs are copied into this graph's slots; If/While/host calls run
  as in O0 and their results are copied into their slots.

`arena.high_water` measures the bytes actually used: after a run it equals `plan.peak_bytes`
(tests check it, and DryRun's prediction is this number).
"""
from __future__ import annotations

import warnings
import weakref

import numpy as np

from ...common.errors import MinisporeRuntimeError
from ..ir import CALL, OPAQUE, Value
from .arena import Arena
from .planner import plan as make_plan

_OWN, _VIEW, _EXTERNAL, _INPLACE, _KEEP = range(5)
_plans: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def graph_plan(graph):
    """The memory plan of `graph` with a workspace for each CALL (the callee's own arena), built
    once per graph (a lazy_inline layer is called many times, planned once)."""
    p = _plans.get(graph)
    if p is None:
        p = make_plan(graph, workspaces=_call_workspaces(graph))
        _plans[graph] = p
    return p


_callee_plan = graph_plan


def _call_workspaces(graph):
    return {i: _callee_plan(n.attrs["graph"]).peak_bytes for i, n in enumerate(graph.nodes) if n.op is CALL}


class ArenaState:
    """What the arena run of one executor needs: the plan, the arena, per-step output handling."""

    def __init__(self, ex, arena: Arena | None = None, memory_plan=None, callee=False):
        from ..executor import O0Executor
        self.ex = ex
        self.plan = memory_plan if memory_plan is not None else _callee_plan(ex.graph)
        self.arena = arena if arena is not None else Arena(self.plan.peak_bytes)
        self.unplanned_bytes = 0
        self._warned = False
        p, arena = self.plan, self.arena
        base = arena.buffer.__array_interface__["data"][0]
        self.handlers = []          # per step: tuple of (mode, dst view or expected address, top)
        self.calls = {}             # step index -> ArenaState of the callee, inside a window
        for i, step in enumerate(ex._steps):
            hs = []
            for o in step.node.outputs:
                if o.aval is OPAQUE or o.id not in p._by_id:
                    hs.append((_KEEP, None, 0))
                    continue
                b = p.buffer(o)
                if b.kind == "external_view":
                    hs.append((_EXTERNAL, None, 0))
                elif b.alias_of is None:
                    off = p.offsets[b.value_id]
                    dst = arena.view(off, o.aval.shape, o.aval.dtype.np)
                    hs.append((_OWN, dst, off + b.size_bytes))
                else:
                    off = p.offset(o)
                    owner = p.buffer(b.alias_of)
                    top = p.offsets[owner.value_id] + owner.size_bytes
                    if b.kind == "inplace":
                        hs.append((_INPLACE, arena.view(off, o.aval.shape, o.aval.dtype.np), top))
                    else:
                        hs.append((_VIEW, base + off, top))
            self.handlers.append(tuple(hs))
            if step.node.op is CALL:
                callee = step.node.attrs["graph"]
                ws = p.offsets[("workspace", i)]
                cp = _callee_plan(callee)
                sub_ex = step.sub if isinstance(step.sub, O0Executor) else O0Executor(callee)
                self.calls[i] = ArenaState(sub_ex, arena.sub(ws, cp.peak_bytes), cp, callee=True)
        # graph outputs that point into the arena are copied out on return (the next run reuses
        # the arena; the caller keeps its results). A callee's outputs are copied by its caller.
        self.copy_out = []
        for o in ex._outputs:
            b = p._by_id.get(o.id) if isinstance(o, Value) else None
            self.copy_out.append(b is not None and b.kind != "external_view" and not callee)
        arena.reset_measure()

    # -- running ----------------------------------------------------------------------------------------
    def run(self, arrays):
        from ..executor import _PRIM, _conform, _check_kernels, locate_error
        ex = self.ex
        if len(arrays) != ex._n_params:
            raise MinisporeRuntimeError(f"graph '{ex.graph.name}' takes {ex._n_params} inputs, got {len(arrays)}")
        env = ex._template[:]
        env[:ex._n_params] = arrays
        ex._load_captures(env)
        check = _check_kernels()
        record = ex.record_live
        if record:
            ex.live_trace = []
        arena = self.arena
        for i, step in enumerate(ex._steps):
            try:
                if step.kind == _PRIM:
                    ins = step.ins
                    r = step.fn(*[env[j] for j in ins], **step.attrs)
                    results = r if step.node.multi else (r,)
                elif step.node.op is CALL:
                    results = self.calls[i].run([env[j] for j in step.ins])
                else:
                    ex._run_structural(step, env)
                    results = [env[s] for s in step.outs]
                for s, r, h, o in zip(step.outs, results, self.handlers[i], step.node.outputs):
                    mode = h[0]
                    if mode == _OWN:
                        dst = h[1]
                        if type(r) is not np.ndarray:
                            r = np.asarray(r)
                        if r.shape != dst.shape:
                            raise MinisporeRuntimeError(f"kernel for '{step.node.op.name}' returned shape {r.shape}, "
                                                        f"inference said {dst.shape} (at {step.node.where()})")
                        np.copyto(dst, r, casting="unsafe")
                        env[s] = dst
                        if h[2] > arena.high_water:
                            arena._touch(h[2])
                    elif mode == _VIEW:
                        if type(r) is np.ndarray and r.__array_interface__["data"][0] == h[1]:
                            env[s] = r
                            if h[2] > arena.high_water:
                                arena._touch(h[2])
                        else:
                            env[s] = _conform(r, o.aval, step.node, check)
                            self._unplanned(step.node, env[s])
                    elif mode == _INPLACE:
                        dst = h[1]
                        if not (type(r) is np.ndarray and r.__array_interface__["data"][0]
                                == dst.__array_interface__["data"][0]):
                            np.copyto(dst, r, casting="unsafe")
                        env[s] = dst
                        if h[2] > arena.high_water:
                            arena._touch(h[2])
                    elif mode == _EXTERNAL:
                        env[s] = _conform(r, o.aval, step.node, check)
                    else:
                        env[s] = r if o.aval is OPAQUE else _conform(r, o.aval, step.node, check)
            except Exception as e:         # noqa: BLE001 - a kernel failed: report it with its line
                err = locate_error(step.node, ex.graph, e)
                if err is e:
                    raise
                raise err from e
            for s in step.frees:
                env[s] = None
            if record:
                ex.live_trace.append({ex._slot_value[k] for k, v in enumerate(env)
                                      if v is not None and k in ex._slot_value})
        return [(env[s].copy() if cp and isinstance(env[s], np.ndarray) else env[s]) if s is not None else c
                for s, c, cp in zip(ex._out_slots, ex._outputs, self.copy_out)]

    def _unplanned(self, node, arr):
        self.unplanned_bytes += arr.nbytes
        if not self._warned:
            self._warned = True
            warnings.warn(f"memory plan: '{node.op.name}' (at {node.where()}) was planned as a view but NumPy "
                          f"copied; its result lives outside the arena", RuntimeWarning, stacklevel=3)


def attach_arena(ex):
    """Arena state for an O0Executor (called by `O0Executor(graph, arena=True)`)."""
    return ArenaState(ex)


__all__ = ["ArenaState", "attach_arena", "graph_plan"]
