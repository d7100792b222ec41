"""The core's side of the device-plan API: a graph's ExecutionPlan lowered to a DevicePlan.

A backend that runs graphs on its device (`Backend.graph_executor`) gets a
`minispore.backend.device_plan.DevicePlan`: launches over buffers at planned offsets, with
lifetimes, streams and events decided here, from what the core already has:

* **slots and steps** from the ExecutionPlan (plan.py): every param, capture, constant and node
  output has a slot; every node is a step with its input and output slots. Each tensor slot
  becomes a PlannedBuffer - params and captures in the "inputs" region (copied in at every run),
  array constants in the "constants" region (copied once, one buffer per distinct constant), node
  outputs in the "arena". Python values among the inputs (None, scalars) stay in the launch as is.
* **lifetimes**: on one stream, the ExecutionPlan's `frees` - a node output dies after its last
  reader (after its own step when nothing reads it); graph outputs live to the end. Every tensor
  owns its bytes: device kernels write contiguous outputs, so a view (reshape, transpose ...) is a
  buffer of its own, not an alias as in the host arena (graph/memory's view rule follows NumPy's
  strides, which a device kernel does not have).
* **offsets**: graph/memory's planner (`plan_buffers`: the best of its greedy heuristics) over
  those intervals, at the backend's alignment.
* **streams** (n > 1): the core scheduler's assignment and events (graph/streams.py
  `schedule_streams`); launches follow its global issue order, and lifetimes are extended so that
  bytes are reused only when the device - not just the host's issue order - has finished with them:

  On the CPU a buffer is freed by the host after its readers ran, so the scheduler's
  `memory_constraints()` (issue order + `hold_until`) is enough. A device's host only *issues*
  kernels, and two streams run their queues in any relative order unless an event links them: a
  kernel issued after the last reader may still run before it. So, with `reach[i]` = the nodes
  certainly finished on the device before node i starts (its stream's earlier nodes and, through
  each event it waits for, everything before the awaited node - transitively), a buffer touched
  by the nodes A (its producer and readers) lives in the issue order until the last position whose
  node is not yet ordered after every node of A. Any node issued later is ordered after all of A
  by stream order and events, so the planner's interval rule (reuse only after `end`) becomes a
  device-side guarantee. No extra events are added; the price is less reuse between branches that
  run concurrently - exactly the memory that concurrency needs anyway.

`device_executor(graph, jit_level)` is what `make_executor` calls (graph/run/levels.py): None when
the current backend runs no graphs itself or the graph cannot be lowered (control flow, host
calls, Python objects as values: a one-time warning says the core's executor runs it), else the
backend's executor for the plan.
"""
from __future__ import annotations

import warnings
from types import MappingProxyType

import numpy as np

from ...backend.base import Backend
from ...backend.device_plan import ARENA, CONSTANTS, DEVICE_ALIGNMENT, INPUTS, DevicePlan, Launch, PlannedBuffer
from ...common.dtype import from_numpy_dtype
from ...common.errors import OpValueError
from ...common.tensor import Tensor
from ..ir import OPAQUE
from ..memory import Buffer, align, plan_buffers
from ..streams import schedule_streams, streams_in_use
from .plan import build_plan

_warned: set = set()


# -- can this graph be lowered? -------------------------------------------------------------------
def lowering_obstacle(graph) -> str | None:
    """Why `graph` cannot become a DevicePlan, or None: only primitives on tensors can."""
    for node in graph.nodes:
        if not node.is_primitive:
            return f"has control flow or host calls ({node.op.name} at {node.where()})"
        if any(o.aval is OPAQUE for o in node.outputs):
            return f"passes Python objects between nodes ('{node.op.name}' at {node.where()})"
    if any(p.aval is OPAQUE for p in graph.params):
        return "takes Python objects as inputs"
    return None


def runs_graphs(backend) -> bool:
    """Does `backend` override `graph_executor` (else no plan is built: the core runs the graph)?"""
    return type(backend).graph_executor is not Backend.graph_executor


def device_executor(graph, jit_level: str, backend=None):
    """The current backend's executor for `graph` at `jit_level`, or None for the core's own
    (see the module docstring)."""
    if backend is None:
        from ...backend.registry import current_backend
        backend = current_backend()
    if not runs_graphs(backend):
        return None
    obstacle = lowering_obstacle(graph)
    if obstacle is not None:
        key = (backend.name, graph.name, jit_level)
        if key not in _warned:
            _warned.add(key)
            warnings.warn(f"{backend.name}: graph '{graph.name}' {obstacle}; it runs on the core's {jit_level} "
                          f"executor, its kernels staged through host memory", RuntimeWarning, stacklevel=3)
        return None
    alignment = getattr(backend, "device_alignment", DEVICE_ALIGNMENT)
    return backend.graph_executor(DevicePlanner(graph, alignment).plan(1), jit_level)


# -- the builder ------------------------------------------------------------------------------------
class DevicePlanner:
    """Builds the DevicePlans of one graph: the inputs' and constants' buffers once, then per stream
    count the launches and the arena (cached). It is the plans' `source` (PlanSource)."""

    def __init__(self, graph, alignment: int = DEVICE_ALIGNMENT):
        self.graph = graph
        self.alignment = alignment
        obstacle = lowering_obstacle(graph)
        if obstacle is not None:
            raise OpValueError("DevicePlanner", "a graph of primitives on tensors", f"graph '{graph.name}', which "
                               f"{obstacle}")
        self.exec_plan = build_plan(graph)
        self._plans: dict = {}
        self._place_inputs_and_constants()

    def streams_in_use(self) -> int:
        return streams_in_use()

    def plan(self, n_streams: int) -> DevicePlan:
        p = self._plans.get(n_streams)
        if p is None:
            p = self._plans[n_streams] = self._build(n_streams)
        return p

    # -- the regions that do not depend on the streams ----------------------------------------------
    def _size(self, nbytes):
        return max(align(nbytes, self.alignment), self.alignment)

    def _place_inputs_and_constants(self):
        ep, g = self.exec_plan, self.graph
        last = max(len(ep.steps) - 1, 0)
        self.fixed: list = []                       # the PlannedBuffers of inputs and constants (ids 0..)
        self.buffer_of_slot: dict = {}              # slot -> PlannedBuffer (inputs and constants)
        off = 0
        for v in list(g.params) + [v for v, _ in g.captures]:
            nb = v.aval.nbytes
            b = PlannedBuffer(len(self.fixed), INPUTS, off, nb, self._size(nb), v.aval.shape, v.aval.dtype,
                              0, last, v.name)
            self.fixed.append(b)
            self.buffer_of_slot[ep.slot_of[v]] = b
            off += b.size
        self.inputs = tuple(self.fixed)
        self.input_bytes = max(off, self.alignment)
        self.constants: list = []                   # (buffer, host array)
        by_object: dict = {}                        # id(constant) -> its buffer (one copy per object)
        off = 0
        for slot, c in ep.constants.items():
            if not isinstance(c, (np.ndarray, Tensor)):
                continue                            # a Python value: passed to the kernel as is
            b = by_object.get(id(c))
            if b is None:
                arr = c.asnumpy() if isinstance(c, Tensor) else c
                dt = c.dtype if isinstance(c, Tensor) else from_numpy_dtype(arr.dtype)
                arr = np.asarray(arr, order="C")
                b = by_object[id(c)] = PlannedBuffer(len(self.fixed), CONSTANTS, off, arr.nbytes,
                                                     self._size(arr.nbytes), arr.shape, dt, 0, last)
                self.fixed.append(b)
                self.constants.append((b, arr))
                off += b.size
            self.buffer_of_slot[slot] = b
        self.constant_bytes = max(off, self.alignment)

    # -- one stream count -------------------------------------------------------------------------------
    def _build(self, n_streams: int) -> DevicePlan:
        ep = self.exec_plan
        steps = ep.steps
        if n_streams == 1:
            order = list(range(len(steps)))
            stream_of, waits, signals = None, None, set()
            ends = self._ends_one_stream()
        else:
            sched = schedule_streams(self.graph, n_streams)
            order, stream_of, waits = sched.order, sched.stream_of, sched.waits
            signals = {j for w in waits for j in w}
            ends = self._ends_on_streams(sched)
        pos = {node: k for k, node in enumerate(order)}

        # every node output owns `size` bytes of the arena from its producer to `ends[slot]`
        outs = []                                  # (slot, Value, nbytes, start)
        for i, step in enumerate(steps):
            for s, o in zip(step.outs, step.node.outputs):
                outs.append((s, o, o.aval.nbytes, pos[i]))
        mem = plan_buffers([Buffer(s, nb, self._size(nb), start, ends[s]) for s, _, nb, start in outs],
                           n_steps=len(order))
        buffers = list(self.fixed)
        slot_buffer = dict(self.buffer_of_slot)
        for s, o, nb, start in outs:
            b = PlannedBuffer(len(buffers), ARENA, mem.offsets[s], nb, self._size(nb), o.aval.shape, o.aval.dtype,
                              start, ends[s], o.name)
            buffers.append(b)
            slot_buffer[s] = b

        template = ep.template
        launches = []
        for k, i in enumerate(order):
            step = steps[i]
            node = step.node
            ins = tuple(slot_buffer[s] if s in slot_buffer else template[s] for s in step.ins)
            launches.append(Launch(k, node.op.name, node.op, ins, tuple(slot_buffer[s] for s in step.outs),
                                   MappingProxyType(dict(step.attrs)),
                                   0 if stream_of is None else stream_of[i],
                                   () if waits is None else tuple(pos[j] for j in waits[i]),
                                   i in signals, i, node.where()))
        outputs = tuple(slot_buffer[s] if s is not None else c for s, c in zip(ep.out_slots, ep.outputs))
        regions = MappingProxyType({ARENA: max(mem.peak_bytes, self.alignment), INPUTS: self.input_bytes,
                                    CONSTANTS: self.constant_bytes})
        return DevicePlan(self.graph.name, tuple(launches), tuple(buffers), self.inputs, tuple(self.constants),
                          outputs, regions, ep.n_params, n_streams, self.alignment,
                          tuple(t for _, t in ep.capture_slots), self)

    def _ends_one_stream(self) -> dict:
        """{node output slot: last step that needs it}: the ExecutionPlan's frees (graph outputs,
        never freed, live to the last step)."""
        steps = self.exec_plan.steps
        last = len(steps) - 1
        ends = {s: last for step in steps for s in step.outs}
        for i, step in enumerate(steps):
            for s in step.frees:
                if s in ends:
                    ends[s] = i
        return ends

    def _ends_on_streams(self, sched) -> dict:
        """{node output slot: last issue position before which its bytes may not be reused} on
        `sched`'s streams (the module docstring, "streams")."""
        steps = self.exec_plan.steps
        pos = {node: k for k, node in enumerate(sched.order)}
        unordered = _last_unordered(sched, happens_before(sched), pos)
        last = len(sched.order) - 1
        keep = {s for s in self.exec_plan.out_slots if s is not None}
        touched: dict = {}                         # node output slot -> the nodes that produce or read it
        for i, step in enumerate(steps):
            for s in step.outs:
                touched[s] = {i}
        for i, step in enumerate(steps):
            for s in step.ins:
                if s in touched:
                    touched[s].add(i)
        return {s: last if s in keep else max(unordered[a] for a in nodes) for s, nodes in touched.items()}


def happens_before(schedule) -> list:
    """`reach[i]`: a bitmask (a Python int) of the nodes that have finished on the device before
    node i starts, i included: the nodes earlier on i's stream and, for every event i's stream
    waits for, everything that finished before the awaited node - transitively."""
    reach = [0] * len(schedule.stream_of)
    last_on = [None] * schedule.n_streams
    for i in schedule.order:
        s = schedule.stream_of[i]
        r = 1 << i
        if last_on[s] is not None:
            r |= reach[last_on[s]]
        for j in schedule.waits[i]:
            r |= reach[j]
        reach[i] = r
        last_on[s] = i
    return reach


def _last_unordered(schedule, reach, pos) -> list:
    """For each node a: the last issue position of a node that is NOT ordered after a on the device.
    On every stream the nodes ordered after a form a suffix of its queue (streams run in order), so
    a binary search per stream finds where that suffix starts."""
    out = [0] * len(schedule.stream_of)
    for a in range(len(out)):
        bit = 1 << a
        last = pos[a]
        for q in schedule.queues:
            lo, hi = 0, len(q)                     # first index whose node is ordered after a
            while lo < hi:
                mid = (lo + hi) // 2
                if reach[q[mid]] & bit:
                    hi = mid
                else:
                    lo = mid + 1
            if lo > 0:
                last = max(last, pos[q[lo - 1]])
        out[a] = last
    return out


def build_device_plan(graph, n_streams: int = 1, alignment: int = DEVICE_ALIGNMENT) -> DevicePlan:
    """The DevicePlan of `graph` on `n_streams` streams (tests, tools; jit goes through `device_executor`)."""
    return DevicePlanner(graph, alignment).plan(n_streams)


__all__ = ["DevicePlanner", "build_device_plan", "device_executor", "lowering_obstacle", "runs_graphs",
           "happens_before"]
