"""The device plan: a compiled graph as a device backend runs it - launches over planned buffers.

A plugin that runs `jit` graphs on its device (values staying on the device from one kernel to
the next) needs the same decisions the core's own executors need: where every tensor lives, how
long it lives, which stream runs each kernel and which events join the streams. The core makes
them once (graph/run/device_plan_builder.py, from its ExecutionPlan, its memory planner and its
stream scheduler) and hands the result to the backend as plain data, so that a plugin

* **binds**: one device allocation per region (`region_bytes`), every buffer a DeviceTensor at its
  `offset`; constants copied in once;
* **launches**: per run, copy the inputs into the "inputs" region, issue `launches` in order
  (`device_kernel_for(launch.op)` on `launch.stream`, after `stream_wait_event` for each of its
  `waits`, recording an event after it when `signals`), synchronize, copy the outputs out;

and never reads the graph IR, the memory planner or the scheduler itself (the plugin contract in
.importlinter forbids minispore.graph to plugins).

    plan.launches       Launch per kernel, in issue order (a topological order; every stream's
                        queue follows it, so an event is recorded before anything waits for it)
    plan.buffers        PlannedBuffer per tensor: region, offset, size, shape, dtype, lifetime
    plan.inputs         the buffers of the graph params, then of the captures ("inputs" region)
    plan.constants      (buffer, host array) pairs, copied to the device once ("constants" region)
    plan.outputs        per graph output its buffer, or a Python constant
    plan.region_bytes   {"arena": ..., "inputs": ..., "constants": ...}: one allocation each
    plan.input_arrays(arrays)   the host arrays to copy into `plan.inputs` for one run
    plan.streams_in_use()       the stream count asked for now (MS_DEV_RUNTIME_CONF / set_multi_stream)
    plan.for_streams(n)         the plan for n streams (built once per count by the core)

**Lifetimes.** Every tensor a launch writes owns `size` bytes of the arena (device kernels write
contiguous outputs, so views are buffers of their own), live from launch `start` to launch `end`
(positions in `launches`, inclusive). Two arena buffers whose lifetimes overlap never share bytes.
On one stream, `end` is the buffer's last reader (graph outputs: the last launch). On several
streams the host only *issues* kernels and the streams run their queues in any relative order
unless an event links them, so `end` is extended until every launch issued later is ordered after
all the buffer's readers on the device (by stream order and events) - the builder's docstring says
how. A plugin that honours `waits` and reuses bytes only as the plan says is race-free.

**Buffers outside the arena** ("inputs", "constants") live for the whole run; a graph output that
is a param or a capture is one of `plan.inputs`.

## The hook (Backend.graph_executor)

    def graph_executor(self, plan: DevicePlan, jit_level: str = "O0"):
        return MyExecutor(plan, self, jit_level)      # .run(*arrays) -> list of host arrays

`jit` calls it when it compiles a graph while this backend is current, for every jit level:
the plan is always of the captured graph's primitives - O1's fusion generates host C kernels and
O2 one host Python function, neither of which a device runs - so the backend decides what the
level means on its device, and says so (the Ascend plugin runs O1/O2 kernel by kernel, as O0,
with a one-time warning). Return None to use the core's executor for the level instead (its
kernels are the eager ones, staged through host memory). Graphs a device plan cannot express
(control flow, host calls, Python objects as values) never reach the hook: the core runs them on
its own executor for the level, with a one-time warning. A backend that does not override
`graph_executor` costs nothing: no plan is built.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol

import numpy as np

from ..common.errors import MinisporeRuntimeError

ARENA, INPUTS, CONSTANTS = "arena", "inputs", "constants"      # PlannedBuffer.region
REGIONS = (ARENA, INPUTS, CONSTANTS)
DEVICE_ALIGNMENT = 512      # bytes per buffer, at least (aclnn wants 32-byte aligned data; 512 is
                            # what MindSpore's device allocator uses). Backend.device_alignment.


@dataclass(frozen=True, slots=True)
class PlannedBuffer:
    """One tensor's place on the device: `size` bytes at `offset` in `region`.

    `id`: its index in `DevicePlan.buffers`. `nbytes`: the tensor's exact bytes (`size` is that
    rounded up to the plan's alignment, and at least one alignment unit, so every buffer has an
    address of its own). `shape`, `dtype` (a minispore DType): a C-contiguous tensor. `start`,
    `end`: the launches (positions in `DevicePlan.launches`, inclusive) between which the bytes
    hold this tensor - for "inputs" and "constants" the whole run. `name`: the value's name, if any.
    """

    id: int
    region: str
    offset: int
    nbytes: int
    size: int
    shape: tuple
    dtype: Any
    start: int
    end: int
    name: str | None = None

    def __repr__(self):
        return (f"PlannedBuffer(#{self.id} {self.region}[{self.offset}:{self.offset + self.size}] "
                f"{self.shape} {self.dtype}, launches {self.start}..{self.end})")


@dataclass(frozen=True, slots=True)
class Launch:
    """One kernel launch: primitive `op` (named `primitive`) on `inputs` -> `outputs`.

    `inputs`: per operand a PlannedBuffer or the Python value itself (None, a scalar: what the
    device kernel receives as is). `outputs`: PlannedBuffers, written by the kernel. `attrs`: the
    primitive's attributes (read-only; pass `dict(attrs)` to kernels). `stream`: which of the plan's
    `n_streams` streams issues it. `waits`: positions of launches on OTHER streams whose events
    this launch's stream must wait for first. `signals`: record an event after this launch (some
    later launch waits for it). `node`: the node's index in the graph, `where`: its source line.
    """

    index: int
    primitive: str
    op: Any = field(repr=False, compare=False)
    inputs: tuple
    outputs: tuple
    attrs: MappingProxyType = field(repr=False)
    stream: int = 0
    waits: tuple = ()
    signals: bool = False
    node: int = 0
    where: str = ""


class PlanSource(Protocol):
    """What a DevicePlan asks the core for (graph/run/device_plan_builder.py implements it)."""

    def streams_in_use(self) -> int: ...

    def plan(self, n_streams: int) -> "DevicePlan": ...


@dataclass(frozen=True, eq=False)
class DevicePlan:
    """A graph planned for a device backend (see the module docstring).

    `name`: the graph's name. `launches`, `buffers`, `inputs`, `constants`, `outputs`,
    `region_bytes`: as in the module docstring. `n_params`: the first `n_params` of `inputs` are
    the call's arguments, the rest the captures (`captures`: their Tensors, read at every run).
    `n_streams`: the streams the launches use. `alignment`: of every offset and size.
    `source`: the core object behind `streams_in_use` / `for_streams`.
    """

    name: str
    launches: tuple
    buffers: tuple
    inputs: tuple
    constants: tuple
    outputs: tuple
    region_bytes: MappingProxyType
    n_params: int
    n_streams: int
    alignment: int
    captures: tuple = field(default=(), repr=False)
    source: Any = field(default=None, repr=False)

    # -- what a run needs -------------------------------------------------------------------------
    def input_arrays(self, arrays) -> list:
        """The host arrays to copy into `inputs` for one run: `arrays` (one per graph param), then
        each capture's current storage (a Parameter may have been given new data since the last run),
        each as a C-contiguous array of its buffer's dtype."""
        if len(arrays) != self.n_params:
            raise MinisporeRuntimeError(f"graph '{self.name}' takes {self.n_params} inputs, got {len(arrays)}")
        values = list(arrays) + [t._data for t in self.captures]
        return [np.asarray(a, dtype=b.dtype.np, order="C") for a, b in zip(values, self.inputs)]

    def streams_in_use(self) -> int:
        """The stream count asked for now (`set_multi_stream` / MS_DEV_RUNTIME_CONF, read at every run)."""
        return self.source.streams_in_use() if self.source is not None else self.n_streams

    def for_streams(self, n_streams: int) -> "DevicePlan":
        """This graph's plan on `n_streams` streams (the same inputs and constants - ids, regions and
        offsets - other launches' streams and waits, another arena layout). Built once per count."""
        if n_streams == self.n_streams:
            return self
        if self.source is None:
            raise MinisporeRuntimeError(f"the device plan of '{self.name}' has no source to replan it for "
                                        f"{n_streams} streams")
        return self.source.plan(n_streams)

    # -- facts for reports and tests --------------------------------------------------------------
    @property
    def arena_bytes(self) -> int:
        return self.region_bytes[ARENA]

    @property
    def no_reuse_bytes(self) -> int:
        """The arena every tensor would need if none shared bytes (what the plan's reuse saves from)."""
        return sum(b.size for b in self.buffers if b.region == ARENA)

    @property
    def num_events(self) -> int:
        """Stream waits per run (each on an event recorded by another stream)."""
        return sum(len(launch.waits) for launch in self.launches)

    def describe(self) -> str:
        """One line per launch: stream, primitive, buffers, waits."""
        lines = [f"device plan of '{self.name}': {len(self.launches)} launches on {self.n_streams} stream(s), "
                 f"arena {self.arena_bytes} bytes (no reuse: {self.no_reuse_bytes}), {self.num_events} events"]
        for launch in self.launches:
            ins = ", ".join(f"#{x.id}" if isinstance(x, PlannedBuffer) else repr(x) for x in launch.inputs)
            outs = ", ".join(f"#{b.id}" for b in launch.outputs)
            waits = "".join(f"  wait({j})" for j in launch.waits)
            lines.append(f"  {launch.index:>4} s{launch.stream} {launch.primitive}({ins}) -> {outs}{waits}"
                         f"{'  signal' if launch.signals else ''}")
        return "\n".join(lines)

    def __repr__(self):
        return (f"<DevicePlan '{self.name}': {len(self.launches)} launches, {len(self.buffers)} buffers, "
                f"{self.n_streams} stream(s), arena {self.arena_bytes} bytes>")


class DeviceGraphExecutor(Protocol):
    """What `Backend.graph_executor` returns: `run(*arrays)` -> one host value per graph output."""

    def run(self, *arrays) -> list: ...


__all__ = ["DevicePlan", "Launch", "PlannedBuffer", "PlanSource", "DeviceGraphExecutor", "ARENA", "INPUTS",
           "CONSTANTS", "REGIONS", "DEVICE_ALIGNMENT"]
