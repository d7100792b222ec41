"""The kernel-by-kernel (KBK) graph executor on ACL streams: MindSpore's O0 on Ascend.

`jit` on `device_target="Ascend"` compiles a graph and hands the plugin a DevicePlan
(`minispore.backend.device_plan`): launches over buffers whose offsets, lifetimes, stream
assignment and events the core planned. This executor only *binds* and *launches*:

* **Binding** (once per stream count): one raw `aclrtMalloc` per region of the plan - the arena
  (every intermediate and output at its planned offset; tensors whose lifetimes do not overlap
  share bytes), the inputs (graph params and captured Parameters) and the constants (copied in
  once) - and every buffer a DeviceTensor at its offset. The inputs and constants are the same
  for every stream count, so only the arena is per count. Each launch gets its primitive's device
  kernel (`backend.device_kernel_for`: the aclnn kernel, or a counted CPU fallback that
  synchronizes, stages through the host and copies back).
* **A run** copies the inputs in, issues every launch in the plan's order - for each, the
  `aclrtStreamWaitEvent`s it needs, the kernel on its stream, an event recorded after it if a
  later launch waits for it - then synchronizes every stream once and copies the outputs out.
  Nothing synchronizes between kernels: the launch is all the host does.
* **Several streams** (`MS_DEV_RUNTIME_CONF="multi_stream:2"` or `set_multi_stream(2)`, read at
  every run through `plan.streams_in_use()`): `plan.for_streams(n)` is the core's plan for n
  streams, whose arena lifetimes already account for streams running in any relative order
  between events (see minispore/graph/run/device_plan_builder.py). `events_recorded` /
  `events_waited` count the events.

Fault injection for tests: `MINISPORE_ASCEND_UNSAFE_SKIP_WAITS=1` records the events but skips the
waits (read at every run) - with the emulator's launch delay, a consumer then reads its input before
the other stream wrote it, which the tests show.
"""
from __future__ import annotations

import os

from minispore.backend.base import DeviceBuffer, DeviceTensor
from minispore.backend.device_plan import ARENA, CONSTANTS, INPUTS, PlannedBuffer
from minispore.common.errors import MinisporeRuntimeError


class _ArenaBuffer(DeviceBuffer):
    """One raw aclrtMalloc (not from the pool: the runtime itself checks every access to it)."""

    __slots__ = ("ptr",)

    def __init__(self, ptr, nbytes):
        super().__init__(nbytes)
        self.ptr = ptr


class _Bound:
    """A DevicePlan bound to device memory: its arena, streams, events and launch steps."""

    def __init__(self, ex, plan, tensors_outside_arena):
        b = ex.backend
        self.plan = plan
        self.arena = _ArenaBuffer(b.runtime.malloc(plan.region_bytes[ARENA]), plan.region_bytes[ARENA])
        tensors = dict(tensors_outside_arena)
        for buf in plan.buffers:
            if buf.region == ARENA:
                tensors[buf.id] = DeviceTensor(self.arena, buf.shape, buf.dtype, buf.offset)
        self.streams = [b.create_stream() for _ in range(plan.n_streams)]
        self.events = {launch.index: b.create_event() for launch in plan.launches if launch.signals}
        # (kernel, ins, outs, attrs, stream, waits, event, launch) per launch
        self.steps = []
        for launch in plan.launches:
            ins = [tensors[x.id] if isinstance(x, PlannedBuffer) else x for x in launch.inputs]
            outs = [tensors[o.id] for o in launch.outputs]
            self.steps.append((b.device_kernel_for(launch.op), ins, outs, dict(launch.attrs),
                               self.streams[launch.stream], [self.events[j] for j in launch.waits],
                               self.events.get(launch.index), launch))
        self.outputs = [tensors[o.id] if isinstance(o, PlannedBuffer) else o for o in plan.outputs]

    def close(self, backend):
        for s in self.streams:
            backend.synchronize_stream(s)
            backend.destroy_stream(s)
        for e in self.events.values():
            backend.destroy_event(e)
        backend.runtime.free(self.arena.ptr)
        self.streams, self.events = [], {}


class KBKExecutor:
    """Runs one DevicePlan kernel by kernel on the Ascend backend. See the module docstring.

    `plan`: the one-stream plan. `jit_level`: the level the graph was compiled at (O1/O2 run like
    O0 here: AscendBackend.graph_executor says why). `n_streams`: None follows the setting at
    every run. `plans`: {stream count: the DevicePlan bound for it}."""

    def __init__(self, plan, backend, jit_level: str = "O0", n_streams=None):
        self.plan = plan
        self.backend = backend
        self.jit_level = jit_level
        self.n_streams = n_streams
        self.events_recorded = 0        # multi-stream runs: events recorded / waited for, all runs together
        self.events_waited = 0
        rt = backend.runtime
        self.input_region = _ArenaBuffer(rt.malloc(plan.region_bytes[INPUTS]), plan.region_bytes[INPUTS])
        self.constant_region = _ArenaBuffer(rt.malloc(plan.region_bytes[CONSTANTS]), plan.region_bytes[CONSTANTS])
        regions = {INPUTS: self.input_region, CONSTANTS: self.constant_region}
        self._fixed = {b.id: DeviceTensor(regions[b.region], b.shape, b.dtype, b.offset)
                       for b in plan.buffers if b.region != ARENA}
        for buf, array in plan.constants:
            if array.nbytes:
                backend.copy_h2d(self.constant_region, array, offset=buf.offset)
        self._bound: dict = {1: _Bound(self, plan, self._fixed)}

    # -- run ------------------------------------------------------------------------------------------
    def run(self, *arrays):
        b, plan = self.backend, self.plan
        for buf, a in zip(plan.inputs, plan.input_arrays(arrays)):
            if a.nbytes:
                b.copy_h2d(self.input_region, a, offset=buf.offset)
        bound = self.bound(self.n_streams or plan.streams_in_use())
        skip_waits = bound.plan.n_streams > 1 and os.environ.get("MINISPORE_ASCEND_UNSAFE_SKIP_WAITS", "0") == "1"
        for kernel, ins, outs, attrs, stream, waits, event, launch in bound.steps:
            if waits and not skip_waits:
                for e in waits:
                    b.stream_wait_event(stream, e)
                self.events_waited += len(waits)
            try:
                kernel(ins, outs, attrs, stream)
            except Exception as e:
                raise MinisporeRuntimeError(f"Ascend KBK: node '{launch.primitive}' ({launch.where}) of graph "
                                            f"'{plan.name}' failed: {e}") from e
            if event is not None:
                b.record_event(event, stream)
                self.events_recorded += 1
        for s in bound.streams:
            b.synchronize_stream(s)
        return [b.to_host(t) if isinstance(t, DeviceTensor) else t for t in bound.outputs]

    def bound(self, n_streams: int) -> _Bound:
        """The plan for `n_streams` streams, bound (its arena allocated) the first time it is asked for."""
        got = self._bound.get(n_streams)
        if got is None:
            got = self._bound[n_streams] = _Bound(self, self.plan.for_streams(n_streams), self._fixed)
        return got

    @property
    def plans(self) -> dict:
        """{stream count: its DevicePlan}, for every count this executor has run with."""
        return {n: bound.plan for n, bound in self._bound.items()}

    @property
    def arena_bytes(self) -> int:
        """The one-stream arena: what the plan says, allocated with one aclrtMalloc."""
        return self._bound[1].arena.nbytes

    @property
    def launches_per_run(self) -> int:
        return len(self.plan.launches)

    def close(self):
        """Give the regions, the streams and the events back (also done when the executor is collected)."""
        if self.input_region is None:
            return
        b = self.backend
        for bound in self._bound.values():
            bound.close(b)
        self._bound = {}
        b.runtime.free(self.input_region.ptr)
        b.runtime.free(self.constant_region.ptr)
        self.input_region = None

    def __del__(self):
        try:
            self.close()
        except Exception:       # noqa: BLE001 - interpreter shutdown: the runtime may be gone
            pass
