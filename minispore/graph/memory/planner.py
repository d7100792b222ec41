"""The planner: run every heuristic, keep the smallest arena, verify it, report the numbers.

MindSpore's SOMAS and XLA's `ChooseBestHeapAlgorithm` both run a *portfolio*: the problem is
NP-complete and no single greedy order wins on every graph, but each is cheap, so try them all.
The winner is checked by `check_plan` before anyone uses it: a wrong offset would silently corrupt
activations, so the verifier is independent of the heuristics (a sweep over time, comparing
address ranges of buffers alive together).

Numbers a plan reports (the same as MindSpore's DryRun lines):

* `peak_bytes`         the arena size: max(offset + size)      "Actual peak memory (with fragments)"
* `lower_bound_bytes`  max over steps of the live bytes         "Used peak memory (without fragments)"
                       (no placement can beat it: those bytes are all needed at that step)
* `no_reuse_bytes`     the sum of all buffer sizes (what an arena without reuse would need)
* `fragmentation`      peak / lower bound - 1
"""
from __future__ import annotations

import numpy as np

from ...common.errors import OpTypeError, OpValueError
from .heuristics import HEURISTICS, live_bytes, place
from .lifetimes import DEFAULT_ALIGNMENT, Buffer, lifetimes


class PlanError(RuntimeError):
    """A plan puts two buffers that are alive at the same time on overlapping bytes."""


class MemoryPlan:
    """Offsets of every owning buffer in one arena, and the plan's statistics (see module docstring)."""

    def __init__(self, buffers, offsets, heuristic, results, n_steps):
        self.buffers = list(buffers)
        self.offsets: dict = offsets
        self.sizes = {b.value_id: b.size_bytes for b in self.buffers if b.alias_of is None and b.kind != "external_view"}
        self.alias_of = {b.value_id: b.alias_of for b in self.buffers if b.alias_of is not None}
        self._by_id = {b.value_id: b for b in self.buffers}
        self.heuristic = heuristic
        self.results = dict(results)
        self.n_steps = n_steps
        owned = [b for b in self.buffers if b.value_id in self.sizes]
        self.peak_bytes = max((offsets[b.value_id] + b.size_bytes for b in owned), default=0)
        self.no_reuse_bytes = sum(b.size_bytes for b in owned)
        live = self.live_bytes_per_step()
        self.lower_bound_bytes = int(live.max()) if len(live) else 0
        self.fragmentation = self.peak_bytes / self.lower_bound_bytes - 1 if self.lower_bound_bytes else 0.0

    def owned(self):
        """The buffers that own memory (aliases and views of graph inputs excluded)."""
        return [b for b in self.buffers if b.value_id in self.sizes]

    def live_bytes_per_step(self):
        """Bytes live at each step: the memory timeline (its maximum is the lower bound)."""
        owned = self.owned()
        if not owned or not self.n_steps:
            return np.zeros(self.n_steps, dtype=np.int64)
        size = np.array([b.size_bytes for b in owned], dtype=np.int64)
        start = np.array([b.start for b in owned], dtype=np.int64)
        end = np.array([b.end for b in owned], dtype=np.int64)
        return live_bytes(size, start, end, self.n_steps)

    def buffer(self, value):
        vid = value.id if hasattr(value, "id") else value
        return self._by_id[vid]

    def offset(self, value) -> int:
        """Arena offset of a Value (or value id); a view's offset is its owner's plus its own offset."""
        b = self.buffer(value)
        if b.alias_of is None:
            return self.offsets[b.value_id]
        return self.offsets[b.alias_of] + b.byte_offset

    def nbytes(self, value) -> int:
        return self.buffer(value).nbytes

    def summary(self) -> dict:
        return {"peak_bytes": self.peak_bytes, "lower_bound_bytes": self.lower_bound_bytes,
                "no_reuse_bytes": self.no_reuse_bytes, "fragmentation": self.fragmentation,
                "heuristic": self.heuristic, "results": dict(self.results), "buffers": len(self.sizes)}

    def __repr__(self):
        return (f"MemoryPlan(peak={self.peak_bytes}, lower_bound={self.lower_bound_bytes}, "
                f"no_reuse={self.no_reuse_bytes}, fragmentation={self.fragmentation:.4f}, "
                f"heuristic={self.heuristic!r}, buffers={len(self.sizes)})")


def plan_buffers(buffers, heuristics=HEURISTICS, n_steps=None) -> MemoryPlan:
    """Plan any list of Buffers (only those that own memory are placed): run each heuristic in
    `heuristics`, keep the smallest peak (the first listed wins a tie), verify it."""
    if isinstance(heuristics, str) or not hasattr(heuristics, "__iter__"):
        raise OpTypeError("memory.plan", "heuristics as a list of names", type(heuristics).__name__)
    heuristics = tuple(heuristics)
    if not heuristics:
        raise OpValueError("memory.plan", f"at least one heuristic of {list(HEURISTICS)}", "none")
    for h in heuristics:
        if h not in HEURISTICS:
            raise OpValueError("memory.plan", f"heuristics among {list(HEURISTICS)}", repr(h))
    buffers = list(buffers)
    for b in buffers:
        if not isinstance(b, Buffer):
            raise OpTypeError("memory.plan", "a list of Buffer", type(b).__name__)
    owned = [b for b in buffers if b.alias_of is None and b.kind != "external_view"]
    for b in owned:
        if b.start > b.end or b.start < 0 or b.size_bytes < 0:
            raise OpValueError("memory.plan", "buffers with 0 <= start <= end and size >= 0", repr(b))
    size = np.array([b.size_bytes for b in owned], dtype=np.int64)
    start = np.array([b.start for b in owned], dtype=np.int64)
    end = np.array([b.end for b in owned], dtype=np.int64)
    if n_steps is None:
        n_steps = int(max((b.end for b in buffers), default=-1)) + 1
    best, best_peak, results = None, None, {}
    for h in heuristics:
        offs = place(h, size, start, end)
        peak = int((offs + size).max()) if len(owned) else 0
        results[h] = peak
        if best_peak is None or peak < best_peak:
            best, best_peak = (h, offs), peak
    name, offs = best
    offsets = {b.value_id: int(o) for b, o in zip(owned, offs)}
    p = MemoryPlan(buffers, offsets, name, results, n_steps)
    check_plan(p)
    return p


def plan(graph, heuristics=HEURISTICS, schedule=None, alignment: int = DEFAULT_ALIGNMENT, hold_until=None,
         workspaces=None) -> MemoryPlan:
    """Lifetimes of `graph`'s values (lifetimes.py), then `plan_buffers`."""
    bufs = lifetimes(graph, schedule=schedule, alignment=alignment, hold_until=hold_until, workspaces=workspaces)
    n_steps = len(graph.nodes)
    return plan_buffers(bufs, heuristics, n_steps=n_steps)


def check_plan(p: MemoryPlan) -> None:
    """Raise PlanError if two owning buffers of plan `p` overlap both in time and in address."""
    check_offsets(p.owned(), p.offsets)


def check_offsets(buffers, offsets) -> None:
    """The verifier behind `check_plan`, for any buffers and {value_id: offset}.

    Independent of the heuristics: sort the buffers by start step; each one is compared with every
    earlier-starting buffer still alive when it starts (vectorised per buffer)."""
    owned = [b for b in buffers if b.size_bytes > 0 and b.alias_of is None]
    if not owned:
        return
    start = np.array([b.start for b in owned], dtype=np.int64)
    end = np.array([b.end for b in owned], dtype=np.int64)
    lo = np.array([offsets[b.value_id] for b in owned], dtype=np.int64)
    hi = lo + np.array([b.size_bytes for b in owned], dtype=np.int64)
    if (lo < 0).any():
        b = owned[int(np.flatnonzero(lo < 0)[0])]
        raise PlanError(f"buffer {b.value_id} has a negative offset")
    order = np.argsort(start, kind="stable")
    start, end, lo, hi = start[order], end[order], lo[order], hi[order]
    for j in range(len(owned)):
        # earlier-starting buffers still alive at start[j]
        k = np.flatnonzero((end[:j] >= start[j]) & (lo[:j] < hi[j]) & (hi[:j] > lo[j]))
        if len(k):
            a, b = owned[order[k[0]]], owned[order[j]]
            raise PlanError(f"buffers {a.value_id} [{a.start}, {a.end}] at [{offsets[a.value_id]}, "
                            f"{offsets[a.value_id] + a.size_bytes}) and {b.value_id} [{b.start}, {b.end}] at "
                            f"[{offsets[b.value_id]}, {offsets[b.value_id] + b.size_bytes}) overlap in time and "
                            f"in address")


__all__ = ["MemoryPlan", "PlanError", "plan", "plan_buffers", "check_plan", "check_offsets"]
