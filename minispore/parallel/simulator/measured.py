"""Measured timelines: record one from a real MPI run, and replay it through the simulator.

A measured timeline is a list of dicts ``{rank, stream, name, copy, start, end}`` (seconds of
`time.perf_counter()`, one clock for every process of the machine), the format of the
multi-copy layer's timeline (`minispore/parallel/multi_copy.py`) and of `TimelineRecorder` below.
For a collective posted with `async_op=True` (`minispore/communication/comm_func.py`), `start` is
when it was posted and `end` when its `wait()` returned: without MPICH's asynchronous progress
thread, MPI moves the data only inside MPI calls, so that interval is what the rank saw.

Two uses:

* `replay(records, depends)` rebuilds the task graph from the records - stream order from the
  start times, dependencies from `depends` (name -> names it waits for) - with the measured
  durations, and simulates it. If the dependency structure is right, the replayed makespan is the
  measured one up to the host's gaps between tasks (Python between two kernels), which the
  records do not contain: a check of the engine and of the structure on real data.
* `timeline_from_records(records)` wraps the records as a `Timeline`, so the measured run gets the
  same report (hidden fraction, Gantt chart) as a simulated one.
"""
from __future__ import annotations

import time

from ...common.errors import OpTypeError, OpValueError
from .engine import COMM, Task, TaskGraph, Timeline, is_comm, simulate

_FIELDS = ("rank", "stream", "name", "start", "end")


def _check(records):
    if not isinstance(records, (list, tuple)) or not records:
        raise OpTypeError("replay", "a non-empty list of timeline dicts {rank, stream, name, copy, start, end}",
                          type(records).__name__)
    for r in records:
        if not isinstance(r, dict) or any(f not in r for f in _FIELDS):
            raise OpValueError("replay", f"timeline dicts with the keys {_FIELDS}", repr(r)[:120])
        if r["end"] < r["start"]:
            raise OpValueError("replay", "end >= start in every record", repr(r)[:120])


def timeline_from_records(records) -> Timeline:
    """The measured records as a Timeline (times relative to the earliest start)."""
    _check(records)
    t0 = min(r["start"] for r in records)
    tasks = []
    for i, r in enumerate(sorted(records, key=lambda r: (r["start"], r["end"]))):
        t = Task(i, r["name"], int(r["rank"]), r["stream"], r["end"] - r["start"], (), r.get("kind", r["stream"]),
                 r.get("copy"), r.get("phase", ""))
        t.start, t.end = r["start"] - t0, r["end"] - t0
        tasks.append(t)
    return Timeline(tasks)


def replay(records, depends=None, *, concurrent_comm=False) -> Timeline:
    """Simulate the measured tasks with their measured durations (see the module docstring).
    `depends`: {name: [names on the same rank it waits for]} or a function record -> names.
    `concurrent_comm`: the run had several collectives in flight at once (MPI progresses every
    posted request; multi_copy.py posts each collective as soon as its input is ready), so each
    goes on the first communication lane ("comm", "comm.1", ...) free at its post time instead of
    queueing behind the previous one."""
    _check(records)
    ordered = sorted(records, key=lambda r: (r["start"], r["end"]))
    if concurrent_comm:
        ordered = _on_lanes(ordered)
    g = TaskGraph()
    ids = {}
    for r in ordered:
        names = depends(r) if callable(depends) else (depends or {}).get(r["name"], ())
        deps = []
        for n in names:
            key = (int(r["rank"]), n)
            if key not in ids:
                raise OpValueError("replay", f"dependencies of {r['name']!r} among the tasks that started before it "
                                   f"on rank {r['rank']}", repr(n))
            deps.append(ids[key])
        ids[(int(r["rank"]), r["name"])] = g.add(r["name"], r["stream"], r["end"] - r["start"], deps,
                                                rank=int(r["rank"]), kind=r.get("kind", r["stream"]),
                                                copy=r.get("copy"), phase=r.get("phase", ""))
    return simulate(g)


def with_unique_names(records) -> list:
    """Copies of the records whose names are unique per rank (the n-th repeat of a name, e.g. one
    per layer, becomes 'name#n'), as `replay` keys tasks by (rank, name)."""
    seen, out = {}, []
    for r in sorted(records, key=lambda r: (r["start"], r["end"])):
        key = (r["rank"], r["name"])
        k = seen.get(key, 0)
        seen[key] = k + 1
        out.append({**r, "name": r["name"] if k == 0 else f"{r['name']}#{k}"})
    return out


def host_order_depends(records):
    """Dependencies read off a timeline whose tasks one host thread issued (a rank's Python loop
    posting non-blocking collectives, as multi_copy.py's scheduler does): a compute task waits for
    every collective whose wait() returned before it started, a collective for the compute task
    that ended last before it was posted. For `replay(records, host_order_depends(records))`."""
    _check(records)
    by_rank = {}
    for r in records:
        by_rank.setdefault(int(r["rank"]), []).append(r)

    def depends(rec):
        mine = by_rank[int(rec["rank"])]
        if is_comm(rec["stream"]):
            before = [r for r in mine if not is_comm(r["stream"]) and r["end"] <= rec["start"]]
            return [max(before, key=lambda r: r["end"])["name"]] if before else []
        return [r["name"] for r in mine if is_comm(r["stream"]) and r["end"] <= rec["start"]]
    return depends


def _on_lanes(ordered):
    lanes, out = {}, []                         # rank -> end of the last record on each lane
    for r in ordered:
        if not is_comm(r["stream"]):
            out.append(r)
            continue
        ends = lanes.setdefault(r["rank"], [])
        lane = next((i for i, e in enumerate(ends) if e <= r["start"]), len(ends))
        if lane == len(ends):
            ends.append(r["end"])
        ends[lane] = r["end"]
        out.append({**r, "stream": COMM if lane == 0 else f"{COMM}.{lane}"})
    return out


def measured_makespan(records, rank=None) -> float:
    rs = [r for r in records if rank is None or r["rank"] == rank]
    return max(r["end"] for r in rs) - min(r["start"] for r in rs)


class TimelineRecorder:
    """Collects timeline records on one rank: `with rec.task("gemm0", "compute"): ...` times a
    block; `rec.posted(name)` / `rec.completed(name)` bracket an asynchronous collective."""

    def __init__(self, rank=0, clock=time.perf_counter):
        self.rank, self.clock = rank, clock
        self.records: list = []
        self._open: dict = {}

    class _Block:
        def __init__(self, rec, name, stream, copy, kind):
            self.rec, self.name, self.stream, self.copy, self.kind = rec, name, stream, copy, kind

        def __enter__(self):
            self.start = self.rec.clock()
            return self

        def __exit__(self, *exc):
            self.rec.records.append({"rank": self.rec.rank, "stream": self.stream, "name": self.name,
                                     "copy": self.copy, "kind": self.kind, "start": self.start,
                                     "end": self.rec.clock()})
            return False

    def task(self, name, stream="compute", copy=None, kind=None):
        return self._Block(self, name, stream, copy, kind or stream)

    def posted(self, name, copy=None, kind="all_reduce"):
        self._open[name] = (self.clock(), copy, kind)

    def completed(self, name):
        start, copy, kind = self._open.pop(name)
        self.records.append({"rank": self.rank, "stream": COMM, "name": name, "copy": copy, "kind": kind,
                             "start": start, "end": self.clock()})


__all__ = ["replay", "with_unique_names", "host_order_depends", "timeline_from_records", "measured_makespan",
           "TimelineRecorder"]
