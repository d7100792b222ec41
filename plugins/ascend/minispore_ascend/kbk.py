"""The kernel-by-kernel (KBK) graph executor on an ACL stream: MindSpore's O0 on Ascend.

`jit` on `device_target="Ascend"` compiles a graph (minispore/graph/ir.py) and hands it here. Like
the CPU's O0Executor, building turns the graph into a plan of steps once; unlike it, values stay on
the device between kernels:

* **One arena.** Every intermediate and output tensor gets a fixed byte offset inside ONE
  `aclrtMalloc` allocation, laid out by minispore's memory planner (graph/memory: lifetimes from
  the schedule, the best of its greedy heuristics) - tensors whose lifetimes do not overlap share
  bytes. Views (reshape, transpose ...) are planned as buffers of their own: device kernels write
  contiguous outputs. Offsets are aligned to 512 bytes (aclnn wants 32-byte aligned data).
* **Inputs** (graph params, captured Parameters) are copied to the device at the start of each run
  (into a second, input arena); constant arrays in node inputs are copied once, at build.
* **Steps** call each primitive's device kernel (`backend.device_kernel_for`: the aclnn kernel, or
  a counted CPU fallback that synchronizes, stages through the host and copies back) on the
  executor's stream. Nothing synchronizes between kernels: the launch is all the host does.
* **The end** of a run synchronizes the stream once and copies the graph outputs to the host.
* **Several streams** (`MS_DEV_RUNTIME_CONF="multi_stream:2"` or `graph.streams.set_multi_stream(2)`,
  read at every run, as on the CPU): independent nodes run on n ACL streams with the core
  scheduler's assignment, an event recorded on the producer's stream and `aclrtStreamWaitEvent` on
  the consumer's exactly where a value crosses streams, and an arena plan whose lifetimes are
  extended so that no bytes are reused before every reader on every stream is done
  (kbk_streams.py explains why the issue order alone is not enough). `events_recorded` /
  `events_waited` count them.

Graphs with structural nodes (If/While/Call/HostCall) run on the CPU O0Executor instead, with a
one-time warning: their control flow needs values on the host.
"""
from __future__ import annotations

import warnings

import numpy as np

from minispore.backend.base import DeviceBuffer, DeviceTensor
from minispore.common.errors import MinisporeRuntimeError
from minispore.common.tensor import Tensor
from minispore.graph import memory
from minispore.graph.ir import OPAQUE, Value
from minispore.graph.streams import streams_in_use

ALIGN = 512
_warned: set = set()


class _ArenaBuffer(DeviceBuffer):
    __slots__ = ("ptr",)

    def __init__(self, ptr, nbytes):
        super().__init__(nbytes)
        self.ptr = ptr


def _nbytes(aval) -> int:
    n = 1
    for s in aval.shape:
        n *= s
    return n * aval.dtype.np.itemsize


def plan_graph(graph):
    """A MemoryPlan with every tensor node output owning its bytes, lifetimes from the schedule."""
    last = len(graph.nodes) - 1
    end = {}
    for i, node in enumerate(graph.nodes):
        for x in node.inputs:
            if isinstance(x, Value):
                end[x.id] = i
    outs = {o.id for o in graph.outputs if isinstance(o, Value)}
    bufs = []
    for i, node in enumerate(graph.nodes):
        for o in node.outputs:
            if o.aval is OPAQUE:
                continue
            nb = _nbytes(o.aval)
            e = last if o.id in outs else max(end.get(o.id, i), i)
            bufs.append(memory.Buffer(o.id, nb, max(memory.align(nb, ALIGN), ALIGN), i, e))
    return memory.plan_buffers(bufs, n_steps=len(graph.nodes))


class KBKExecutor:
    """Runs one graph kernel by kernel on the Ascend backend. See the module docstring."""

    def __init__(self, graph, backend, n_streams=None):
        self.graph = graph
        self.backend = backend
        self.fallback = None
        self.n_streams = n_streams      # None: follow set_multi_stream / MS_DEV_RUNTIME_CONF at every run
        self.events_recorded = 0        # multi-stream runs: events recorded / waited for, all runs together
        self.events_waited = 0
        self._multi: dict = {}          # stream count (> 1) -> kbk_streams.StreamLaunch
        if any(not n.is_primitive for n in graph.nodes):
            from minispore.graph.run import O0Executor
            if graph.name not in _warned:
                _warned.add(graph.name)
                warnings.warn(f"Ascend KBK: graph '{graph.name}' has control flow or host calls; it runs on the "
                              f"CPU O0 executor", stacklevel=2)
            self.fallback = O0Executor(graph)
            return
        self.plan = plan_graph(graph)
        self.arena_bytes = max(self.plan.peak_bytes, ALIGN)
        rt = backend.runtime
        self.arena = _ArenaBuffer(rt.malloc(self.arena_bytes), self.arena_bytes)    # the ONE aclrtMalloc
        self.stream = backend.create_stream()
        self._constants = []
        self._build()

    # -- build ---------------------------------------------------------------------------------------------
    def _build(self):
        g, b = self.graph, self.backend
        self._input_at: dict[int, DeviceTensor] = {}   # value id -> its place in the input arena
        inputs = list(g.params) + [v for v, _ in g.captures]
        in_offsets, off = [], 0
        for v in inputs:
            in_offsets.append(off)
            off += max(memory.align(_nbytes(v.aval), ALIGN), ALIGN)
        self.input_bytes = max(off, ALIGN)
        self._inputs = inputs
        self._in_offsets = in_offsets
        self.input_arena = _ArenaBuffer(b.runtime.malloc(self.input_bytes), self.input_bytes)
        for k, v in enumerate(inputs):
            self._input_at[v.id] = DeviceTensor(self.input_arena, v.aval.shape, v.aval.dtype, in_offsets[k])
        self._constant_at: dict[int, DeviceTensor] = {}  # id(constant) -> its device copy (shared by all plans)
        self._steps, self._outputs = self._bind(self.arena, self.plan)

    def _bind(self, arena, plan):
        """The steps (kernel, inputs, outputs, attrs, node) with every node output at its planned
        offset in `arena`, and the graph outputs' device tensors."""
        g, b = self.graph, self.backend
        where: dict[int, object] = dict(self._input_at)
        steps = []
        for node in g.nodes:
            outs = []
            for o in node.outputs:
                t = DeviceTensor(arena, o.aval.shape, o.aval.dtype, plan.offsets[o.id])
                where[o.id] = t
                outs.append(t)
            ins = []
            for x in node.inputs:
                if isinstance(x, Value):
                    ins.append(where[x.id])
                elif isinstance(x, (np.ndarray, Tensor)):
                    t = self._constant_at.get(id(x))
                    if t is None:
                        arr = x.asnumpy() if isinstance(x, Tensor) else x
                        t = self._constant_at[id(x)] = b.to_device(arr)
                        self._constants.append(t)
                    ins.append(t)
                else:
                    ins.append(x)
            steps.append((b.device_kernel_for(node.op), ins, outs, dict(node.attrs), node))
        return steps, [where[o.id] if isinstance(o, Value) else o for o in g.outputs]

    # -- run ------------------------------------------------------------------------------------------------
    def run(self, *arrays):
        if self.fallback is not None:
            return self.fallback.run(*arrays)
        b, g = self.backend, self.graph
        if len(arrays) != len(g.params):
            raise MinisporeRuntimeError(f"graph '{g.name}' takes {len(g.params)} inputs, got {len(arrays)}")
        values = list(arrays) + [t._data for _, t in g.captures]
        for v, off, a in zip(self._inputs, self._in_offsets, values):
            a = np.asarray(a, dtype=v.aval.dtype.np)
            if a.nbytes:
                b.copy_h2d(self.input_arena, a, offset=off)
        n = self.n_streams or streams_in_use()
        if n > 1:
            launch = self._multi.get(n)
            if launch is None:
                from .kbk_streams import StreamLaunch
                launch = self._multi[n] = StreamLaunch(self, n)
            launch.launch(self)
            outputs = launch.outputs
        else:
            stream = self.stream
            for step in self._steps:
                self._launch(step, stream)
            b.synchronize_stream(stream)
            outputs = self._outputs
        return [b.to_host(t) if isinstance(t, DeviceTensor) else t for t in outputs]

    @staticmethod
    def _launch(step, stream):
        kernel, ins, outs, attrs, node = step
        try:
            kernel(ins, outs, attrs, stream)
        except Exception as e:
            raise MinisporeRuntimeError(f"Ascend KBK: node '{node.op.name}' ({node.where()}) failed: {e}") from e

    @property
    def launches_per_run(self) -> int:
        return len(self._steps) if self.fallback is None else 0

    def close(self):
        """Give the arenas and the stream back (also done when the executor is collected)."""
        if self.fallback is not None or self.arena is None:
            return
        b = self.backend
        for launch in self._multi.values():
            launch.close(b)
        self._multi = {}
        b.synchronize_stream(self.stream)
        b.destroy_stream(self.stream)
        b.runtime.free(self.arena.ptr)
        b.runtime.free(self.input_arena.ptr)
        for t in self._constants:
            b.free(t.buffer)
        self.arena = None

    def __del__(self):
        try:
            self.close()
        except Exception:       # noqa: BLE001 - interpreter shutdown: the runtime may be gone
            pass
