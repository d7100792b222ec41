"""Several streams: which nodes of a graph may run at the same time, and on which stream.

A *stream* is an in-order queue of kernels (CUDA streams, Ascend streams): kernels on one stream
run one after another, kernels on different streams may overlap, and an *event* recorded after a
kernel on one stream lets another stream wait for it. MindSpore 2.3's O0/O1 use this to overlap
communication with computation. On the CPU backend a stream is a worker thread: NumPy releases
the GIL inside its kernels (BLAS matmuls, large ufunc loops), so two threads really compute at
once. Results are bit-for-bit those of one stream with the same BLAS thread count (see
`blas_limit`): every kernel is deterministic and reads the same inputs; only *when* it runs
changes.

This module decides; graph/run/multi_stream.py runs the decision on the CPU (and the Ascend
plugin's KBK executor on ACL streams):

1. **The scheduler** (`schedule_streams(graph, n)`): list scheduling by critical path, as in HEFT
   (Topcuoglu et al., IEEE TPDS 2002). Each node gets an estimated cost (a roofline of its FLOPs
   and bytes, costs.py); its *rank* is the longest cost path from it to the end of the
   graph. Repeatedly take the ready node of highest rank and put it on the stream where it can
   start earliest (a stream is free when its last kernel ends; waiting on another stream's result
   costs a small event latency, so a node tends to stay with its producer). Host calls and
   control-flow nodes are barriers that keep their place in program order and run on stream 0
   (a host call may rebind parameters); random ops keep program order among themselves (they
   draw from one generator, so seeded runs give the numbers of one stream).
2. **Events** (`StreamSchedule.waits`): a node waits for a producer on another stream only if no
   earlier node of its own stream already waited for that producer or a later node of that
   stream (streams run in order, so the later wait implies the earlier one). The printout
   (`schedule.describe()`) shows every stream's queue and every wait.
3. **BLAS threads** (`blas_limit(n)`): during a run each stream's BLAS gets cores / n threads
   (threadpoolctl), so the streams do not oversubscribe the cores.

Enabling it (MindSpore spells this `MS_DEV_RUNTIME_CONF="multi_stream:..."`):

    export MS_DEV_RUNTIME_CONF="multi_stream:2"        # or: multi_stream:true (= 2 streams)
    minispore.graph.streams.set_multi_stream(2)         # the same from Python; 1 or False = off
    with minispore.graph.streams.multi_stream(2): ...   # for a block

The setting is read on every run, so it applies to graphs already compiled. In MindSpore the
values `true`/`false`/`group` choose separate communication streams; a single CPU device has no
communication, so here `true` means two compute streams, `false`/`group` one, and an integer N
gives N streams. Multi-stream runs allocate their buffers from the heap: the arena plan
(`set_context(memory_optimize_level="O1")`) is for one stream - a multi-stream plan needs the
constraints `schedule.memory_constraints()` gives the planner (`hold_until`), which O0 does not
use yet.
"""
from __future__ import annotations

import heapq
import os

from ..common.errors import OpValueError
from .ir import Value

# -- configuration ------------------------------------------------------------------------------------


def _parse_runtime_conf(text: str):
    """The stream count MS_DEV_RUNTIME_CONF asks for ("key:value,key:value"), or None."""
    for item in (text or "").split(","):
        key, _, value = item.partition(":")
        if key.strip() != "multi_stream":
            continue
        v = value.strip().lower()
        if v == "true":
            return 2
        if v in ("false", "group", ""):
            return 1
        if v.isdigit() and int(v) >= 1:
            return int(v)
        raise OpValueError("MS_DEV_RUNTIME_CONF", "multi_stream:true|false|group|<number of streams>",
                           f"multi_stream:{value}")
    return None


class _Config:
    n_streams = 1
    explicit = False          # set_multi_stream was called: the environment no longer applies


_config = _Config()


def set_multi_stream(n=2):
    """Run O0 graphs on `n` streams (True = 2, False/1 = one stream, None = back to the
    MS_DEV_RUNTIME_CONF environment variable). Returns the previous stream count."""
    old = streams_in_use()
    if n is None:
        _config.explicit = False
        return old
    if isinstance(n, bool):
        n = 2 if n else 1
    if not isinstance(n, int) or n < 1:
        raise OpValueError("set_multi_stream", "a stream count >= 1 (or True/False/None)", repr(n))
    _config.n_streams, _config.explicit = n, True
    return old


def streams_in_use() -> int:
    """How many streams O0 graphs run on now."""
    if _config.explicit:
        return _config.n_streams
    return _parse_runtime_conf(os.environ.get("MS_DEV_RUNTIME_CONF", "")) or 1


class multi_stream:
    """`with multi_stream(2): ...` runs O0 graphs on 2 streams inside the block."""

    def __init__(self, n=2):
        self.n = n

    def __enter__(self):
        self._saved = (_config.n_streams, _config.explicit)
        set_multi_stream(self.n)
        return self

    def __exit__(self, *exc):
        _config.n_streams, _config.explicit = self._saved
        return False


# -- the scheduler ------------------------------------------------------------------------------------

EVENT_COST_S = 30e-6           # modelled cost of a cross-stream wait: waking a thread blocked on an event


def _barrier(node) -> bool:
    """Host calls and control flow keep their place in program order against EVERY node: a host
    call may run arbitrary Python (an optimizer rebinding a Parameter's storage)."""
    return not node.is_primitive


def _random(node) -> bool:
    """Random ops keep program order among themselves: they draw from one generator, so the order
    of the draws - not the stream - decides the numbers. Collectives join that chain: every rank
    must issue them in the same order, or two ranks wait on different collectives forever."""
    return node.is_primitive and (node.op.random or node.op.collective)


def _estimate_costs(graph):
    """Seconds per node from a fixed, machine-independent roofline (50 GFLOP/s, 10 GB/s, 2 us):
    only the ratios matter to the scheduler, and fixed numbers keep schedules reproducible."""
    from .costs import graph_costs
    out = []
    for node, c in zip(graph.nodes, graph_costs(graph)):
        if not node.is_primitive:
            out.append(1e-5)
        elif c.kind == "view":
            out.append(1e-7)
        else:
            out.append(max(c.flops / 50e9, c.bytes / 10e9) + 2e-6)
    return out


class StreamSchedule:
    """Which stream runs each node, in which order, and which events it waits for.

    `stream_of[i]`: stream of node i. `queues[s]`: node indices stream s issues, in order.
    `waits[i]`: nodes on OTHER streams node i waits for (their events). `order`: the global
    issue order (a topological order; every stream's queue follows it). `deps[i]`: all nodes i
    must follow (data dependencies + the program-order constraints of side-effecting nodes).
    `makespan_s`: the scheduler's estimate of the run time (vs `serial_s` on one stream).
    """

    def __init__(self, graph, n_streams, stream_of, queues, waits, order, deps, costs, makespan):
        self.graph = graph
        self._index = {id(node): i for i, node in enumerate(graph.nodes)}
        self.n_streams = n_streams
        self.stream_of = stream_of
        self.queues = queues
        self.waits = waits
        self.order = order
        self.deps = deps
        self.costs = costs
        self.makespan_s = makespan
        self.serial_s = sum(costs)

    @property
    def num_events(self) -> int:
        return sum(len(w) for w in self.waits)

    def memory_constraints(self):
        """`(schedule, hold_until)` for graph/memory's planner: the global issue order, and for each
        value read on another stream than its producer's, the step (in that order) of the last
        reader - its bytes must not be reused before that reader has finished."""
        pos = {n: k for k, n in enumerate(self.order)}
        hold = {}
        for i, node in enumerate(self.graph.nodes):
            for x in node.inputs:
                if isinstance(x, Value) and x.kind == "node":
                    producer = x.producer[0]
                    p = self._index[id(producer)]
                    if self.stream_of[p] != self.stream_of[i]:
                        hold[x.id] = max(hold.get(x.id, 0), pos[i])
        return list(self.order), hold

    def describe(self) -> str:
        """One line per node, grouped by stream, with the events each waits for."""
        g = self.graph
        lines = [f"schedule of '{g.name}' on {self.n_streams} streams: {len(g.nodes)} nodes, {self.num_events} "
                 f"events; estimated {self.makespan_s * 1e3:.3f} ms vs {self.serial_s * 1e3:.3f} ms on one stream"]
        for s, q in enumerate(self.queues):
            lines.append(f"stream {s}: {len(q)} nodes")
            for i in q:
                w = "".join(f"  wait(#{j} on stream {self.stream_of[j]})" for j in self.waits[i])
                lines.append(f"  #{i:<4} {g.nodes[i].op.name}{w}")
        return "\n".join(lines)

    def __repr__(self):
        return (f"<StreamSchedule '{self.graph.name}': {self.n_streams} streams, "
                f"{[len(q) for q in self.queues]} nodes, {self.num_events} events>")


def schedule_streams(graph, n_streams: int, costs=None) -> StreamSchedule:
    """Assign the top-level nodes of `graph` to `n_streams` streams (see the module docstring)."""
    if not isinstance(n_streams, int) or n_streams < 1:
        raise OpValueError("schedule_streams", "a stream count >= 1", repr(n_streams))
    nodes = graph.nodes
    n = len(nodes)
    index = {id(node): i for i, node in enumerate(nodes)}
    costs = list(costs) if costs is not None else _estimate_costs(graph)

    # dependencies: data, plus program order around side-effecting nodes
    deps = [set() for _ in range(n)]
    last_barrier = last_random = None
    since_barrier = []                     # nodes issued after the last barrier
    for i, node in enumerate(nodes):
        for x in node.inputs:
            if isinstance(x, Value) and x.kind == "node":
                deps[i].add(index[id(x.producer[0])])
        if last_barrier is not None:
            deps[i].add(last_barrier)      # nothing moves above a barrier ...
        if _barrier(node):
            deps[i].update(since_barrier)  # ... and a barrier waits for everything before it
            last_barrier, since_barrier = i, []
        else:
            since_barrier.append(i)
        if _random(node):
            if last_random is not None:
                deps[i].add(last_random)   # random draws in program order
            last_random = i
    succs = [[] for _ in range(n)]
    for i in range(n):
        for d in deps[i]:
            succs[d].append(i)

    # upward rank: the longest cost path from a node to the end of the graph
    rank = [0.0] * n
    for i in range(n - 1, -1, -1):
        rank[i] = costs[i] + max((rank[s] for s in succs[i]), default=0.0)

    stream_of = [0] * n
    finish = [0.0] * n
    free_at = [0.0] * n_streams
    queues = [[] for _ in range(n_streams)]
    order = []
    missing = [len(d) for d in deps]
    ready = [(-rank[i], i) for i in range(n) if missing[i] == 0]
    heapq.heapify(ready)
    while ready:
        _, i = heapq.heappop(ready)
        if n_streams == 1 or _barrier(nodes[i]):
            candidates = (0,)
        else:
            candidates = range(n_streams)
        best, best_start = 0, None
        for s in candidates:
            start = free_at[s]
            for d in deps[i]:
                t = finish[d] + (EVENT_COST_S if stream_of[d] != s else 0.0)
                if t > start:
                    start = t
            if best_start is None or start < best_start - 1e-12:
                best, best_start = s, start
        stream_of[i] = best
        finish[i] = best_start + costs[i]
        free_at[best] = finish[i]
        queues[best].append(i)
        order.append(i)
        for s in succs[i]:
            missing[s] -= 1
            if missing[s] == 0:
                heapq.heappush(ready, (-rank[s], s))
    if n_streams == 1:                      # one stream: keep program order exactly
        queues = [list(range(n))]
        order = list(range(n))

    # events: wait only for what this stream has not already synchronised with
    qpos = {}
    for s, q in enumerate(queues):
        for k, i in enumerate(q):
            qpos[i] = k
    waits = [[] for _ in range(n)]
    synced = [[-1] * n_streams for _ in range(n_streams)]   # synced[s][t]: last position of t seen by s
    for s, q in enumerate(queues):
        for i in q:
            latest = {}
            for d in deps[i]:
                t = stream_of[d]
                if t != s and qpos[d] > latest.get(t, (-1, None))[0]:
                    latest[t] = (qpos[d], d)
            for t, (p, d) in sorted(latest.items()):
                if p > synced[s][t]:
                    waits[i].append(d)
                    synced[s][t] = p
    # (synchronisation through a third stream is not tracked: the rule never drops a needed wait,
    # it may keep a redundant one)
    return StreamSchedule(graph, n_streams, stream_of, queues, waits, order, deps, costs, max(finish, default=0.0))


# -- BLAS threads per stream ----------------------------------------------------------------------------

_blas = [None]                   # threadpoolctl's controller, made on first use (NumPy is loaded by then)


def blas_limit(n_streams):
    """A context manager giving NumPy's BLAS cores / n_streams threads (what each stream gets during
    a multi-stream run). BLAS otherwise starts as many threads as cores in EVERY stream;
    oversubscribed BLAS threads spin waiting for each other and a matmul can get ten times slower.

    A BLAS's thread count can change the order of its floating-point sums, so compare a
    multi-stream run bit for bit with a one-stream run made inside `blas_limit(n_streams)`."""
    import contextlib
    try:
        if _blas[0] is None:
            from threadpoolctl import ThreadpoolController
            _blas[0] = ThreadpoolController()
        per_stream = max(1, (os.cpu_count() or 1) // n_streams)
        libs = _blas[0].select(user_api="blas")
        if any(lib.num_threads > per_stream for lib in libs.lib_controllers):
            return libs.limit(limits=per_stream)
    except Exception:                   # noqa: BLE001 - threadpoolctl missing or unusable: run as is
        pass
    return contextlib.nullcontext()


__all__ = ["StreamSchedule", "schedule_streams", "EVENT_COST_S", "blas_limit", "set_multi_stream", "streams_in_use",
           "multi_stream"]
