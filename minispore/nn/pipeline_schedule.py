"""Pipeline schedules as data, and a tiny discrete-event timer over them.

Pipeline parallelism cuts a network into `p` stages, one per device, and the batch into `m`
micro-batches. Stage i's forward of micro-batch j (F) needs stage i-1's forward of j; its
backward (B) needs stage i+1's backward of j. *Which order* each device runs its F and B actions
in is the schedule, and the schedule alone decides the two numbers that matter (Narayanan et al.
2021, "Efficient Large-Scale Language Model Training on GPU Clusters Using Megatron-LM", §2.2):

* the **bubble**: time devices sit idle while the pipeline fills and drains. With a forward
  taking t_f and a backward t_b per micro-batch per stage, the ideal step is m (t_f + t_b) and
  the bubble adds (p - 1)(t_f + t_b), so

        bubble fraction = t_bubble / t_ideal = (p - 1) / m              (GPipe and 1F1B alike)
        bubble fraction = (p - 1) / (v m)              (interleaved 1F1B with v chunks per device)

* the **activation memory**: a micro-batch's saved activations (its autodiff tape) live from its
  F to its B. The number of micro-batches *in flight* on stage i is

        GPipe             m                 (all forwards, then all backwards)
        1F1B              min(p - i, m)     (warm-up p-i-1 forwards, then one F one B, cool-down)
        interleaved 1F1B  min(2(p-i-1) + (v-1) p + 1, v m)   chunk-tapes of 1/v of a stage each,
                          so stage 0 holds p (1 + (p-1)/(p v)) stages' worth (Korthikanti §4.3).

This module writes each schedule as a pure function returning, for every device, its ordered
list of `Action(kind, microbatch, chunk)` (kind "F" or "B"; `chunk` is the *virtual stage*
0 .. p v - 1, which runs on device chunk mod p: Megatron's and MindSpore's interleaved
placement). The MPI executor (nn/pipeline.py) walks exactly these lists, so the schedule is
testable without MPI, and `simulate` replays them with uniform durations to give the bubble and
the in-flight peak per device. The timer lets an action start as soon as its device is free and
its inputs exist (communication time `t_comm` per hop, 0 by default), i.e. it runs the same
dependency rule the executor's blocking receives impose.

GPipe: Huang et al. 2019. 1F1B ("PipeDream-Flush"): Narayanan et al. 2021 (PipeDream-2BW paper).
Interleaved 1F1B: Megatron-LM's `forward_backward_pipelining_with_interleaving` (warm-up
2(p-i-1) + (v-1)p forwards on device i; micro-batches in groups of p per chunk, so m must be a
multiple of p). MindSpore's names: `pipeline_config={"pipeline_scheduler": "gpipe" | "1f1b",
"pipeline_interleave": bool}`.
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import NamedTuple

from ..common.errors import OpTypeError, OpValueError

SCHEDULERS = ("gpipe", "1f1b")


class Action(NamedTuple):
    """One unit of pipeline work: kind "F" (forward) or "B" (backward) of `microbatch` through
    virtual stage `chunk` (run by device chunk mod p)."""
    kind: str
    microbatch: int
    chunk: int


def _positive(op, name, v):
    if not isinstance(v, numbers.Integral) or isinstance(v, bool):
        raise OpTypeError(op, f"'{name}' to be an int", f"{type(v).__name__} {v!r}")
    if v < 1:
        raise OpValueError(op, f"'{name}' >= 1", repr(v))
    return int(v)


def gpipe(p: int, m: int) -> list:
    """GPipe: every device runs all m forwards, then all m backwards (in micro-batch order)."""
    p, m = _positive("gpipe", "p", p), _positive("gpipe", "m", m)
    return [[Action("F", j, i) for j in range(m)] + [Action("B", j, i) for j in range(m)] for i in range(p)]


def one_f_one_b(p: int, m: int) -> list:
    """1F1B (PipeDream-Flush): device i runs w = min(p-i-1, m) warm-up forwards, then alternates
    one forward and one backward, then runs the remaining backwards (cool-down)."""
    p, m = _positive("1f1b", "p", p), _positive("1f1b", "m", m)
    out = []
    for i in range(p):
        w = min(p - i - 1, m)
        acts = [Action("F", j, i) for j in range(w)]
        for k in range(m - w):
            acts += [Action("F", w + k, i), Action("B", k, i)]
        acts += [Action("B", j, i) for j in range(m - w, m)]
        out.append(acts)
    return out


def interleaved_1f1b(p: int, m: int, v: int) -> list:
    """Interleaved 1F1B with v virtual stages (chunks) per device, Megatron-LM's order.

    Device d's k-th forward is micro-batch (k // (p v)) p + k % p through its chunk
    (k % (p v)) // p, i.e. virtual stage chunk*p + d; its k-th backward the same micro-batch
    through its chunks in reverse. Warm-up 2(p-d-1) + (v-1)p forwards, then 1F1B, then cool-down.
    m must be a multiple of p (micro-batches travel in groups of p)."""
    op = "interleaved_1f1b"
    p, m, v = _positive(op, "p", p), _positive(op, "m", m), _positive(op, "v", v)
    if m % p:
        raise OpValueError(op, f"the number of micro-batches m a multiple of the pipeline stages p={p} "
                               "(interleaved micro-batches travel in groups of p)", f"m={m}")
    total = m * v

    def mb(k):
        return (k // (p * v)) * p + k % p

    def local_chunk(k, forward):
        c = (k % (p * v)) // p
        return c if forward else v - 1 - c

    out = []
    for d in range(p):
        warm = min(2 * (p - d - 1) + (v - 1) * p, total)
        fwd = [Action("F", mb(k), local_chunk(k, True) * p + d) for k in range(total)]
        bwd = [Action("B", mb(k), local_chunk(k, False) * p + d) for k in range(total)]
        acts = fwd[:warm]
        for k in range(total - warm):
            acts += [fwd[warm + k], bwd[k]]
        acts += bwd[total - warm:]
        out.append(acts)
    return out


def make_schedule(scheduler: str, p: int, m: int, v: int = 1) -> list:
    """The per-device action lists for `scheduler` ("gpipe" or "1f1b"; v > 1: interleaved 1F1B)."""
    if scheduler not in SCHEDULERS:
        raise OpValueError("pipeline schedule", f"'pipeline_scheduler' in {list(SCHEDULERS)}", repr(scheduler))
    v = _positive("pipeline schedule", "v", v)
    if v > 1:
        if scheduler != "1f1b":
            raise OpValueError("pipeline schedule", "pipeline_scheduler '1f1b' with pipeline_interleave "
                                                    "(interleaving is a 1F1B schedule)", repr(scheduler))
        return interleaved_1f1b(p, m, v)
    return gpipe(p, m) if scheduler == "gpipe" else one_f_one_b(p, m)


# ---- closed forms -------------------------------------------------------------------------------

def bubble_fraction_formula(p: int, m: int, v: int = 1) -> float:
    """(p - 1) / (v m): the bubble over the ideal step time m (t_f + t_b)."""
    return (p - 1) / (v * m)


def peak_in_flight_formula(scheduler: str, p: int, m: int, stage: int, v: int = 1) -> int:
    """Saved micro-batch tapes on device `stage` at the schedule's peak (chunk-tapes when v > 1)."""
    if v > 1:
        return min(2 * (p - stage - 1) + (v - 1) * p + 1, v * m)
    return m if scheduler == "gpipe" else min(p - stage, m)


# ---- the discrete-event timer -------------------------------------------------------------------

@dataclass
class Timeline:
    """What `simulate` found. `spans[d]` lists (action, start, end) in device d's order."""
    spans: list
    makespan: float
    ideal: float                 # m (t_f + t_b): one device's compute
    bubble_fraction: float       # (makespan - ideal) / ideal
    peak_in_flight: list         # per device
    busy: list                   # compute time per device

    def idle_fraction(self, device: int) -> float:
        """Idle time of one device over its compute time (equal to bubble_fraction when every
        device has the same work)."""
        return (self.makespan - self.busy[device]) / self.busy[device]


def _layout(schedule):
    """(p, number of chunks, m) of a schedule, checking that every device runs each of its
    (micro-batch, chunk) pairs exactly once forward and once backward, forward first."""
    op = "simulate"
    if not isinstance(schedule, (list, tuple)) or not schedule:
        raise OpTypeError(op, "a schedule: one list of Actions per device", type(schedule).__name__)
    p = len(schedule)
    chunks = 1 + max((a.chunk for acts in schedule for a in acts), default=-1)
    mbs = 1 + max((a.microbatch for acts in schedule for a in acts), default=-1)
    if chunks % p:
        raise OpValueError(op, f"a number of chunks divisible by the {p} devices", str(chunks))
    for d, acts in enumerate(schedule):
        seen_f, seen_b = set(), set()
        for a in acts:
            if a.kind not in ("F", "B") or a.chunk % p != d:
                raise OpValueError(op, f"device {d} to run F/B actions of its own chunks (chunk mod {p} = {d})",
                                   repr(a))
            key = (a.microbatch, a.chunk)
            if a.kind == "F":
                if key in seen_f:
                    raise OpValueError(op, "each forward once", repr(a))
                seen_f.add(key)
            else:
                if key not in seen_f or key in seen_b:
                    raise OpValueError(op, "each backward once, after its forward on the same device", repr(a))
                seen_b.add(key)
        want = {(j, c) for j in range(mbs) for c in range(d, chunks, p)}
        if seen_f != want or seen_b != want:
            raise OpValueError(op, f"device {d} to run every micro-batch 0..{mbs - 1} through each of its chunks",
                               f"{len(seen_f)} forwards and {len(seen_b)} backwards")
    return p, chunks, mbs


def peak_in_flight(schedule) -> list:
    """Per device, the most micro-batch tapes alive at once (+1 at each F, -1 at each B): it
    depends only on the order, not on the durations."""
    peaks = []
    for acts in schedule:
        live = peak = 0
        for a in acts:
            live += 1 if a.kind == "F" else -1
            peak = max(peak, live)
        peaks.append(peak)
    return peaks


def simulate(schedule, t_f: float = 1.0, t_b: float = 1.0, t_comm: float = 0.0) -> Timeline:
    """Replay `schedule` with uniform durations: a forward of one micro-batch through a whole
    stage takes t_f, a backward t_b (a chunk of an interleaved stage takes t_f / v, t_b / v), a
    message between devices t_comm. Each device runs its list in order; an action starts when
    the device is free and its input exists. A schedule that can never finish (a device waits
    for something that waits for it) is an error."""
    p, chunks, m = _layout(schedule)
    v = chunks // p
    dur = {"F": t_f / v, "B": t_b / v}
    last = chunks - 1
    done = {}                                   # (kind, mb, chunk) -> finish time
    free = [0.0] * p
    pos = [0] * p
    spans = [[] for _ in range(p)]

    def ready_at(a):
        """When `a`'s inputs exist, or None if they do not yet."""
        if a.kind == "F":
            if a.chunk == 0:
                return 0.0
            t = done.get(("F", a.microbatch, a.chunk - 1))
            return None if t is None else t + t_comm
        t = done.get(("F", a.microbatch, a.chunk))
        if t is None:
            return None
        if a.chunk == last:
            return t
        u = done.get(("B", a.microbatch, a.chunk + 1))
        return None if u is None else max(t, u + t_comm)

    remaining = sum(len(acts) for acts in schedule)
    while remaining:
        progressed = False
        for d in range(p):
            acts = schedule[d]
            while pos[d] < len(acts):
                a = acts[pos[d]]
                r = ready_at(a)
                if r is None:
                    break
                start = max(free[d], r)
                end = start + dur[a.kind]
                done[(a.kind, a.microbatch, a.chunk)] = end
                spans[d].append((a, start, end))
                free[d] = end
                pos[d] += 1
                remaining -= 1
                progressed = True
        if not progressed:
            waiting = {d: schedule[d][pos[d]] for d in range(p) if pos[d] < len(schedule[d])}
            raise OpValueError("simulate", "a schedule without a deadlock", f"every device waits: {waiting}")
    makespan = max(free)
    ideal = m * (t_f + t_b)
    busy = [sum(e - s for _, s, e in spans[d]) for d in range(p)]
    return Timeline(spans, makespan, ideal, (makespan - ideal) / ideal, peak_in_flight(schedule), busy)


__all__ = ["Action", "SCHEDULERS", "gpipe", "one_f_one_b", "interleaved_1f1b", "make_schedule", "simulate",
           "Timeline", "peak_in_flight", "bubble_fraction_formula", "peak_in_flight_formula"]
