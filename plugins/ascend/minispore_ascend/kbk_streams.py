"""KBK on several ACL streams: independent nodes overlap, events where values cross streams.

Switched on like the CPU's multi-stream O0 (minispore/graph/streams.py), and read at every run:

    export MS_DEV_RUNTIME_CONF="multi_stream:2"      # or set_multi_stream(2) / with multi_stream(2):

Three decisions, each taken once per stream count when the executor first runs with it:

1. **Which stream runs each node** is the core scheduler's (`graph.streams.schedule_streams`:
   critical-path list scheduling). The executor launches the nodes in the schedule's global issue
   order, which is a topological order, so an event is always recorded before any stream waits on it.
2. **Events.** After node j the executor records j's event on j's stream only if some node waits for
   j (`schedule.waits`); before node i it issues `aclrtStreamWaitEvent(stream(i), event(j))` for each
   j in `schedule.waits[i]` - the producers on OTHER streams that i's stream has not already waited
   for. The host never blocks in the middle of a run; the end of the run synchronizes every stream.
3. **The arena layout** (`plan_for_streams`). One aclrtMalloc holds every intermediate, and two
   tensors may share bytes only if, ON THE DEVICE, everything that touches the first (its producer
   and every reader, on any stream) has finished before the producer of the second starts. The
   scheduler's `memory_constraints()` (order + `hold_until`: keep a value read on another stream
   alive until its last reader's place in the issue order) is what the planner needs on the CPU,
   where a buffer is freed by the host after its readers ran. It is NOT enough here: the host only
   *issues* kernels, and two streams run their queues in any relative order unless an event links
   them - a kernel issued after the last reader may still run before it. So each buffer's lifetime
   is extended conservatively, from the events themselves: with `reach[i]` = the nodes that
   certainly finished before node i starts (its stream's earlier nodes, plus, through each wait,
   everything before the awaited node - transitively), a buffer touched by nodes A lives in the
   issue order until the last position whose node is not yet ordered after every node of A. Any node
   issued later is ordered after all of A by the stream order and the events, so the planner's
   interval rule (reuse only after `end`) becomes a device-side guarantee. No extra events are
   added; the price is less reuse between branches that run concurrently (their buffers stay live
   until the branches join), which is exactly the memory that concurrency needs anyway.

Fault injection for tests: `MINISPORE_ASCEND_UNSAFE_SKIP_WAITS=1` records the events but skips the
waits (read at every run) - with the emulator's launch delay, a consumer then reads its input before
the other stream wrote it, which the tests show.
"""
from __future__ import annotations

import os

from minispore.graph import memory
from minispore.graph.ir import OPAQUE, Value
from minispore.graph.streams import schedule_streams


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


def _last_unordered(schedule, reach, pos):
    """For each node a: the last issue position of a node that is NOT ordered after a on the device.
    On every stream the nodes ordered after a form a suffix of its queue (streams run in order), so
    a binary search per stream finds where that suffix starts."""
    n = len(schedule.stream_of)
    out = [0] * n
    for a in range(n):
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


def plan_for_streams(graph, schedule, nbytes_of, alignment: int):
    """The arena plan for running `graph` on `schedule`'s streams (see the module docstring, 3).
    Steps are positions in the schedule's issue order; every tensor output owns its bytes."""
    order, hold = schedule.memory_constraints()
    pos = {node: k for k, node in enumerate(order)}
    reach = happens_before(schedule)
    unordered = _last_unordered(schedule, reach, pos)
    last = len(order) - 1
    touched: dict = {}                             # value id -> nodes that read it (+ its producer, below)
    for i, node in enumerate(graph.nodes):
        for x in node.inputs:
            if isinstance(x, Value) and x.kind == "node":
                touched.setdefault(x.id, set()).add(i)
    outs = {o.id for o in graph.outputs if isinstance(o, Value)}
    bufs = []
    for i, node in enumerate(graph.nodes):
        for o in node.outputs:
            if o.aval is OPAQUE:
                continue
            if o.id in outs:
                end = last                         # read by the host after the final synchronize
            else:
                nodes = touched.get(o.id, set()) | {i}
                end = max(max(unordered[a] for a in nodes), hold.get(o.id, 0))
            nb = nbytes_of(o.aval)
            bufs.append(memory.Buffer(o.id, nb, max(memory.align(nb, alignment), alignment), pos[i], end))
    return memory.plan_buffers(bufs, n_steps=len(order))


class StreamLaunch:
    """Everything one stream count needs: schedule, arena + plan, streams, events, bound steps.
    Built by KBKExecutor (kbk.py) the first time it runs with that count."""

    def __init__(self, ex, n_streams: int):
        from .kbk import ALIGN, _ArenaBuffer, _nbytes
        b = ex.backend
        self.schedule = schedule_streams(ex.graph, n_streams)
        self.plan = plan_for_streams(ex.graph, self.schedule, _nbytes, ALIGN)
        self.arena_bytes = max(self.plan.peak_bytes, ALIGN)
        self.arena = _ArenaBuffer(b.runtime.malloc(self.arena_bytes), self.arena_bytes)
        self.streams = [b.create_stream() for _ in range(n_streams)]
        self.steps, self.outputs = ex._bind(self.arena, self.plan)
        signals = sorted({j for w in self.schedule.waits for j in w})
        self.events = {j: b.create_event() for j in signals}

    def launch(self, ex):
        """Issue one run's kernels, events and waits; synchronize every stream at the end."""
        b, sched = ex.backend, self.schedule
        skip_waits = os.environ.get("MINISPORE_ASCEND_UNSAFE_SKIP_WAITS", "0") == "1"
        streams, events, steps = self.streams, self.events, self.steps
        stream_of, waits = sched.stream_of, sched.waits
        for i in sched.order:
            s = streams[stream_of[i]]
            for j in waits[i]:
                if not skip_waits:
                    b.stream_wait_event(s, events[j])
                    ex.events_waited += 1
            ex._launch(steps[i], s)
            ev = events.get(i)
            if ev is not None:
                b.record_event(ev, s)
                ex.events_recorded += 1
        for s in streams:
            b.synchronize_stream(s)

    def close(self, backend):
        for s in self.streams:
            backend.synchronize_stream(s)
            backend.destroy_stream(s)
        for e in self.events.values():
            backend.destroy_event(e)
        backend.runtime.free(self.arena.ptr)
        self.streams, self.events = [], {}
