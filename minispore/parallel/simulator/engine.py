"""The discrete-event core: tasks on in-order streams, their dependencies, and the timeline.

A **stream** is an in-order queue, as on an accelerator (a CUDA stream, an Ascend stream): the
tasks of one stream run one after another in the order they were queued, tasks on different
streams may run at the same time. Each rank has a compute stream and a communication stream
(MindSpore's O0/O1 put collectives on their own stream for exactly this reason). A **dependency**
("task B waits for task A") is an event recorded after A and waited for before B, on any stream
of any rank.

With in-order streams and fixed durations the schedule needs no search: a task starts as soon as
the task before it on its stream and every task it depends on have ended,

    start(t) = max(end(previous task on t's stream), max over d in deps(t) of end(d))
    end(t)   = start(t) + duration(t)

which is the longest path through the graph whose edges are the stream orders and the
dependencies. `simulate` computes it in one pass over a topological order (Kahn's algorithm); a
cycle (a task waiting, through its stream, for a task queued after it: a deadlock on a real
device) is reported with the tasks involved.

What the timeline reports:

* **makespan**: the end of the last task minus the start of the first;
* **busy time** per stream: the sum of its tasks' durations;
* **hidden communication**: of each communication task, the part of its interval during which
  the *same rank's* compute stream is busy, summed and divided by the total communication time.
  One copy of a tensor-parallel layer hides nothing (every collective sits between two dependent
  GEMMs); that is the fraction multi-copy parallelism raises.
"""
from __future__ import annotations

import heapq
from collections import defaultdict
from dataclasses import dataclass, field

from ...common.errors import OpTypeError, OpValueError

COMPUTE, COMM = "compute", "comm"
POLICIES = ("in_order", "ready_first")


def is_comm(stream) -> bool:
    """A communication stream: "comm", or one of several lanes "comm.1", "comm.2" ... (a measured run
    with collectives in flight at once, measured.replay(..., concurrent_comm=True))."""
    return stream == COMM or stream.startswith(COMM + ".")


@dataclass
class Task:
    """One kernel or one collective: where it runs (`rank`, `stream`), how long it takes
    (`duration`, seconds), what it waits for (`deps`: task ids), and labels for reports:
    `kind` (gemm, dw, vector, attention, all_gather, reduce_scatter, ...), `copy` (which
    multi-copy slice, or None), `phase` (forward, backward, ...)."""

    id: int
    name: str
    rank: int
    stream: str
    duration: float
    deps: tuple
    kind: str
    copy: object = None
    phase: str = ""
    start: float = 0.0
    end: float = 0.0


class TaskGraph:
    """Tasks in queue order: `add` appends a task to the end of its (rank, stream) queue."""

    def __init__(self):
        self.tasks: list = []

    def add(self, name, stream, duration, deps=(), *, rank=0, kind="compute", copy=None, phase="") -> int:
        """Queue a task on `stream` of `rank` after every task already queued there; returns its id."""
        if not isinstance(stream, str) or not stream:
            raise OpTypeError("TaskGraph.add", "stream as a non-empty string ('compute', 'comm', ...)",
                              repr(stream))
        if isinstance(duration, bool) or not isinstance(duration, (int, float)) or not duration >= 0:
            raise OpValueError("TaskGraph.add", f"a duration >= 0 seconds for task {name!r}", repr(duration))
        if isinstance(rank, bool) or not isinstance(rank, int) or rank < 0:
            raise OpValueError("TaskGraph.add", "rank as an int >= 0", repr(rank))
        deps = tuple(d for d in deps if d is not None)
        for d in deps:
            if isinstance(d, bool) or not isinstance(d, int) or not 0 <= d < len(self.tasks):
                raise OpValueError("TaskGraph.add", f"dependencies of {name!r} as ids of tasks already added "
                                   f"(0..{len(self.tasks) - 1})", repr(d))
        tid = len(self.tasks)
        self.tasks.append(Task(tid, str(name), rank, stream, float(duration), deps, kind, copy, phase))
        return tid

    def add_dependency(self, task, depends_on):
        """Make `task` also wait for `depends_on` (which may have been added later: a pipeline's
        backward waits for a later stage)."""
        for t in (task, depends_on):
            if isinstance(t, bool) or not isinstance(t, int) or not 0 <= t < len(self.tasks):
                raise OpValueError("TaskGraph.add_dependency", f"a task id in 0..{len(self.tasks) - 1}", repr(t))
        self.tasks[task].deps = self.tasks[task].deps + (depends_on,)

    def __len__(self):
        return len(self.tasks)

    def __getitem__(self, i) -> Task:
        return self.tasks[i]


def simulate(graph: TaskGraph, policy: str = "in_order") -> "Timeline":
    """Start and end times of every task; returns a `Timeline`. `policy` "in_order": every stream
    runs its queue in order (the module docstring); "ready_first": a free stream starts the first
    queued task whose dependencies are done (`_simulate_ready_first`)."""
    if not isinstance(graph, TaskGraph):
        raise OpTypeError("simulate", "a TaskGraph", type(graph).__name__)
    if policy not in POLICIES:
        raise OpValueError("simulate", f"policy among {POLICIES}", repr(policy))
    tasks = graph.tasks
    if policy == "ready_first":
        return _simulate_ready_first(tasks)
    n = len(tasks)
    preds = [list(t.deps) for t in tasks]
    last_on = {}
    for t in tasks:                         # the stream order is an edge too
        key = (t.rank, t.stream)
        if key in last_on:
            preds[t.id].append(last_on[key])
        last_on[key] = t.id
    succs = [[] for _ in range(n)]
    missing = [0] * n
    for i, ps in enumerate(preds):
        missing[i] = len(ps)
        for p in ps:
            succs[p].append(i)
    ready = [i for i in range(n) if missing[i] == 0]
    done = 0
    while ready:
        i = ready.pop()
        t = tasks[i]
        t.start = max((tasks[p].end for p in preds[i]), default=0.0)
        t.end = t.start + t.duration
        done += 1
        for s in succs[i]:
            missing[s] -= 1
            if missing[s] == 0:
                ready.append(s)
    if done < n:
        stuck = [tasks[i].name for i in range(n) if missing[i] > 0][:6]
        raise OpValueError("simulate", "dependencies without a cycle through the in-order streams (a cycle is a "
                           "deadlock)", f"{n - done} tasks never ready, e.g. {stuck}")
    return Timeline(list(tasks))


def _simulate_ready_first(tasks):
    """The "ready_first" policy: whenever a stream is free it starts the FIRST task of its queue
    (queue order = priority) whose dependencies have all finished - the rule of
    minispore/parallel/multi_copy.py's TwoStreamSchedule (post every collective whose input is
    ready; run the first compute task whose inputs exist). A discrete-event loop over task ends."""
    queues = {}
    for t in tasks:
        queues.setdefault((t.rank, t.stream), []).append(t.id)
    missing = [len(t.deps) for t in tasks]
    succs = [[] for _ in tasks]
    for t in tasks:
        for d in t.deps:
            succs[d].append(t.id)
    free_at = dict.fromkeys(queues, 0.0)
    running, now, left = [], 0.0, len(tasks)
    while left:
        for key, q in queues.items():
            if not q or free_at[key] > now:
                continue
            for k, tid in enumerate(q):
                if not missing[tid]:
                    t = tasks[tid]
                    t.start, t.end = now, now + t.duration
                    free_at[key] = t.end
                    heapq.heappush(running, (t.end, tid))
                    del q[k]
                    break
        if not running:
            stuck = [tasks[q[0]].name for q in queues.values() if q][:6]
            raise OpValueError("simulate", "dependencies that some order of the streams can satisfy",
                               f"{left} tasks never ready, e.g. {stuck}")
        now = running[0][0]
        while running and running[0][0] <= now:          # everything ending at this instant
            for s in succs[heapq.heappop(running)[1]]:
                missing[s] -= 1
            left -= 1
    return Timeline(list(tasks))


def _union(intervals):
    """Merge [start, end) intervals into disjoint sorted ones."""
    out = []
    for s, e in sorted(intervals):
        if e <= s:
            continue
        if out and s <= out[-1][1]:
            if e > out[-1][1]:
                out[-1][1] = e
        else:
            out.append([s, e])
    return out


def _overlap(start, end, merged) -> float:
    """Length of [start, end) covered by the disjoint sorted intervals `merged`."""
    total = 0.0
    for s, e in merged:
        if e <= start:
            continue
        if s >= end:
            break
        total += min(e, end) - max(s, start)
    return total


@dataclass
class Timeline:
    """The simulated (or measured) schedule: every task with its start and end."""

    tasks: list
    _compute_union: dict = field(default_factory=dict, repr=False)

    def select(self, phase=None, rank=None):
        return [t for t in self.tasks if (phase is None or t.phase == phase) and (rank is None or t.rank == rank)]

    def makespan(self, phase=None) -> float:
        ts = self.select(phase)
        if not ts:
            return 0.0
        return max(t.end for t in ts) - min(t.start for t in ts)

    def busy(self) -> dict:
        """{(rank, stream): seconds the stream runs a task}."""
        out = defaultdict(float)
        for t in self.tasks:
            out[(t.rank, t.stream)] += t.duration
        return dict(out)

    def comm_time(self, phase=None) -> float:
        return sum(t.duration for t in self.select(phase) if is_comm(t.stream))

    def compute_time(self, phase=None) -> float:
        return sum(t.duration for t in self.select(phase) if t.stream == COMPUTE)

    def _compute_intervals(self, rank):
        if rank not in self._compute_union:
            self._compute_union[rank] = _union(
                [t.start, t.end] for t in self.tasks if t.rank == rank and t.stream == COMPUTE)
        return self._compute_union[rank]

    def hidden_comm_time(self, phase=None) -> float:
        """Seconds of communication during which the same rank's compute stream is busy."""
        return sum(_overlap(t.start, t.end, self._compute_intervals(t.rank))
                   for t in self.select(phase) if is_comm(t.stream))

    def hidden_fraction(self, phase=None) -> float:
        """hidden communication / all communication (of `phase`, or of everything); 0 without any."""
        total = self.comm_time(phase)
        return self.hidden_comm_time(phase) / total if total > 0 else 0.0

    def exposed_comm_time(self, phase=None) -> float:
        return self.comm_time(phase) - self.hidden_comm_time(phase)

    def phases(self) -> list:
        seen = []
        for t in self.tasks:
            if t.phase not in seen:
                seen.append(t.phase)
        return seen

    def summary(self) -> dict:
        """Plain numbers for reports and JSON: makespan, busy time per stream, hidden fraction,
        each overall and per phase."""
        out = {"makespan_s": self.makespan(), "comm_s": self.comm_time(), "compute_s": self.compute_time(),
               "hidden_fraction": self.hidden_fraction(),
               "busy_s": {f"rank{r}/{s}": v for (r, s), v in sorted(self.busy().items())}, "phases": {}}
        for ph in self.phases():
            out["phases"][ph or "-"] = {"makespan_s": self.makespan(ph), "comm_s": self.comm_time(ph),
                                        "compute_s": self.compute_time(ph),
                                        "hidden_fraction": self.hidden_fraction(ph)}
        return out

    def to_records(self) -> list:
        """The timeline as a list of dicts {rank, stream, name, copy, kind, phase, start, end}
        (the measured timelines' format)."""
        return [{"rank": t.rank, "stream": t.stream, "name": t.name, "copy": t.copy, "kind": t.kind,
                 "phase": t.phase, "start": t.start, "end": t.end} for t in self.tasks]


__all__ = ["COMPUTE", "COMM", "POLICIES", "is_comm", "Task", "TaskGraph", "simulate", "Timeline"]
