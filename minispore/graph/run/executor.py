"""The O0 executor: a graph's plan, built once, and the strategy each run uses.

    ex = O0Executor(graph)                 # jit_level "O0" builds exactly this
    outputs = ex.run(*arrays)              # one array per graph param -> one entry per output

Building plans the graph (plan.py). Each run then picks how to go through the plan:

* **several streams** (`n_streams`, else `set_multi_stream` / MS_DEV_RUNTIME_CONF, read at every
  run) or a running Profiler: multi_stream.py, from the heap;
* else the **arena** when the executor was built with one (`arena=True`, or `arena=None` and
  `set_context(memory_optimize_level="O1")` - this is the one place that reads that setting):
  arena.py, every intermediate at its planned offset;
* else the **heap** (loop.py `run_plan`): every intermediate a NumPy array freed after its last
  reader.

All three go through the same step loop, so results are bit-for-bit the same (multi-stream: with
the BLAS thread count each stream gets, `streams.blas_limit`). O1 (o1.py) is this executor on the
fused graph; O2 (o2.py) generates one function from the same plan instead of interpreting it.
`record_live=True` keeps, for tests and memory checks, the set of live value ids after each step
of the last heap or arena run (`live_trace`).
"""
from __future__ import annotations

from ...common import context
from ..streams import StreamSchedule, schedule_streams, streams_in_use
from .arena import ArenaRun
from .loop import run_plan
from .multi_stream import StreamRun
from .plan import build_plan
from .profiling import _sink


def arena_requested() -> bool:
    """Does `set_context(memory_optimize_level="O1")` ask jitted graphs to run in an arena?"""
    return context.get_context("memory_optimize_level") == "O1"


class O0Executor:
    """Runs one graph kernel by kernel. See the module docstring.

    `plan`: the ExecutionPlan. `arena_run`: the arena strategy (None: heap). `memory_plan`,
    `arena`: its MemoryPlan and Arena (None without). `subgraphs={id(g): g2}` plans g2 wherever a
    node names g (O1's fused callees)."""

    def __init__(self, graph, record_live: bool = False, arena=None, subgraphs=None, n_streams=None):
        self.plan = build_plan(graph, subgraphs)
        self.record_live = record_live
        self.live_trace: list[set] = []
        self.n_streams = n_streams          # None: follow set_multi_stream / MS_DEV_RUNTIME_CONF
        if arena is None:
            arena = arena_requested()
        self.arena_run = ArenaRun(self.plan) if arena else None
        self._schedules: dict = {}
        self._stream_runs: dict = {}

    @property
    def graph(self):
        """The graph this executor runs."""
        return self.plan.graph

    @property
    def memory_plan(self):
        """The MemoryPlan of the arena strategy, else None."""
        return self.arena_run.memory_plan if self.arena_run is not None else None

    @property
    def arena(self):
        """The Arena of the arena strategy, else None."""
        return self.arena_run.arena if self.arena_run is not None else None

    def schedule(self, n_streams=None) -> StreamSchedule:
        """The stream schedule for `n_streams` (default: the current setting), built once per count."""
        n = n_streams or self.n_streams or streams_in_use()
        s = self._schedules.get(n)
        if s is None:
            s = self._schedules[n] = schedule_streams(self.graph, n)
        return s

    def run(self, *arrays):
        sink = _sink.active
        n = self.n_streams or streams_in_use()
        if n > 1 or sink is not None:
            runner = self._stream_runs.get(n)
            if runner is None:
                runner = self._stream_runs[n] = StreamRun(self.plan, self.schedule(n))
            return runner.run(arrays, sink)
        live = None
        if self.record_live:
            live = self.live_trace = []
        if self.arena_run is not None:
            return self.arena_run.run(arrays, live)
        return run_plan(self.plan, arrays, live)

    def __repr__(self):
        mode = "arena" if self.arena_run is not None else "heap"
        return f"<{type(self).__name__} '{self.graph.name}': {len(self.plan.steps)} steps, {mode}>"


__all__ = ["O0Executor", "arena_requested"]
