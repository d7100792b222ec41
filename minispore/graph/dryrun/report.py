"""Analyse a captured graph and report: memory, FLOPs, predicted time, and whether it fits.

Memory has two parts:

* **static** - graph inputs, parameters, optimizer state and constant tables: memory the caller
  owns for the whole step (captures and params are never planned by the arena);
* **dynamic** - every tensor a node produces (activations, saved activations, gradients,
  temporaries), placed in one arena by the SOMAS-style planner (graph/memory). Its *lower bound*
  is the most bytes alive at any one step; the arena the planner finds is at least that, and the
  difference is fragmentation.

MindSpore's DryRun prints the two totals; so do we (1 M = 1 MiB, rounded up):

    Used peak memory usage (without fragments): <static + lower bound> M
    Actual peak memory usage (with fragments):  <static + planned arena> M

The arena number is exactly what `O0Executor(graph, arena=True)` measures when the same graph
runs (tests/graph/test_dryrun.py checks it on graphs that fit in this machine).

Time: each node's roofline time on the device profile (devices.py), summed in schedule order (one
stream: O0 runs kernel by kernel).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np

from ..ir import OPAQUE, Value
from ..costs import consumers_of, node_cost
from .devices import GiB, MiB

ROLES = ("input", "parameter", "frozen parameter", "optimizer state", "constant")


@dataclass
class NodeRecord:
    """One node of the analysed graph."""
    index: int
    op: str
    phase: str                 # forward / backward / optimizer
    source: str                # file:line of the user code that created it
    shapes: str                # output shapes, for tables
    out_bytes: int             # bytes the node's outputs own (0 for views and in-place updates)
    flops: int
    bytes_moved: int
    matmul_flops: int          # the part of `flops` done in matrix products
    kind: str                  # matmul / vector / view / host
    time_s: float              # roofline time on the device
    bound: str                 # "compute" or "memory" (which side of the roofline)
    live_bytes: int            # static + dynamic bytes live while this node runs


def _fmt_bytes(n) -> str:
    n = float(n)
    for unit, size in (("GiB", GiB), ("MiB", MiB), ("KiB", 1024)):
        if abs(n) >= size:
            return f"{n / size:.2f} {unit}"
    return f"{int(n)} B"


def _fmt_time(s) -> str:
    if s >= 1:
        return f"{s:.3f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.3f} ms"
    return f"{s * 1e6:.1f} us"


def _fmt_flops(f) -> str:
    for unit, size in (("PFLOP", 1e15), ("TFLOP", 1e12), ("GFLOP", 1e9), ("MFLOP", 1e6)):
        if f >= size:
            return f"{f / size:.3f} {unit}"
    return f"{int(f)} FLOP"


def _fmt_count(n) -> str:
    for unit, size in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return str(n)


def _op_family(name) -> str:
    """Table rows: O1's fused kernels (`fused_elementwise_3{mul,add}`) are counted together."""
    if name.startswith("fused_"):
        return name.split("{", 1)[0].rstrip("0123456789").rstrip("_") + " (O1)"
    return name


def _mib_ceil(n) -> int:
    return int(math.ceil(n / MiB))


def _short_source(node) -> str:
    if node.source is None:
        return ""
    f, line, _fn = node.source
    return f"{f.rsplit('/', 1)[-1]}:{line}"


def _shape_str(aval) -> str:
    if aval is OPAQUE:
        return "py"
    return f"{aval.dtype.name.lower()}{list(aval.shape)}"


class DryRunReport:
    """The result of `minispore.dryrun(...)`. `str(report)` is the full text report.

    Main attributes: `used_peak_bytes`, `actual_peak_bytes` (the two MindSpore lines, in bytes),
    `static_bytes` and `static` (by role), `plan` (the MemoryPlan of the dynamic part),
    `total_flops`, `step_time_s`, `nodes` (NodeRecord per node), `fits`, `dominant` (what fills
    memory at the peak), `device`, `graph`, `num_params`.
    """

    def __init__(self, cap, device, plan, name, compile_s):
        self.capture = cap
        self.graph = cap.graph
        self.device = device
        self.plan = plan
        self.name = name
        self.compile_s = compile_s
        self.train = cap.train
        self.num_params = cap.n_params
        g = self.graph

        # static memory, by role
        self.static = {r: 0 for r in ROLES}
        self._static_items = []               # (role, name, bytes)
        for p in g.params:
            if isinstance(p, Value) and p.aval is not OPAQUE:
                nb = p.aval.size * p.aval.dtype.np.itemsize
                self.static["input"] += nb
                self._static_items.append(("input", p.name or f"input %{p.id}", nb))
        for v, t in g.captures:
            nb = v.aval.size * v.aval.dtype.np.itemsize
            role = cap.roles.get(v.id, "constant")
            self.static[role] += nb
            self._static_items.append((role, v.name or getattr(t, "name", None) or "constant", nb))
        self.static_bytes = sum(self.static.values())

        # dynamic memory: the planner
        self.arena_bytes = plan.peak_bytes
        self.lower_bound_bytes = plan.lower_bound_bytes
        self.no_reuse_bytes = plan.no_reuse_bytes
        self.used_peak_bytes = self.static_bytes + self.lower_bound_bytes
        self.actual_peak_bytes = self.static_bytes + self.arena_bytes
        live = plan.live_bytes_per_step()
        self.timeline = [int(x) + self.static_bytes for x in live]
        self.peak_step = int(np.argmax(live)) if len(live) else 0

        # per node: cost, roofline time, bytes owned
        owned = {b.value_id: b.size_bytes for b in plan.owned()}
        users = consumers_of(g)
        self.nodes = []
        for i, node in enumerate(g.nodes):
            c = node_cost(node, users)
            t, compute, memory = _roofline(device, node, c)
            self.nodes.append(NodeRecord(
                index=i, op=node.op.name, phase=cap.phase_of(i), source=_short_source(node),
                shapes=", ".join(_shape_str(o.aval) for o in node.outputs),
                out_bytes=sum(owned.get(o.id, 0) for o in node.outputs), flops=c.flops, bytes_moved=c.bytes,
                matmul_flops=c.matmul_flops, kind=c.kind, time_s=t, bound="compute" if compute >= memory else "memory",
                live_bytes=self.timeline[i] if i < len(self.timeline) else self.static_bytes))
        self.total_flops = sum(n.flops for n in self.nodes)
        self.matmul_flops = sum(n.matmul_flops for n in self.nodes)
        self.bytes_moved = sum(n.bytes_moved for n in self.nodes)
        self.step_time_s = sum(n.time_s for n in self.nodes)
        kernels = sum(1 for n in self.nodes if n.kind in ("matmul", "vector"))
        self.launch_time_s = kernels * device.launch_s
        self.phase_time_s = {}
        for n in self.nodes:
            self.phase_time_s[n.phase] = self.phase_time_s.get(n.phase, 0.0) + n.time_s
        self.fits = self.actual_peak_bytes <= device.usable_bytes
        self.dominant = self._dominant()

    # -- what fills memory at the peak -----------------------------------------------------------
    def _dominant(self, top=8):
        """Groups of tensors alive at the peak step, largest first: [(label, bytes, count)]."""
        groups: dict = {}

        def add(label, nb):
            b, c = groups.get(label, (0, 0))
            groups[label] = (b + nb, c + 1)

        for role, name, nb in self._static_items:
            if role == "optimizer state":
                add("optimizer state (AdamW moments exp_avg, exp_avg_sq)", nb)
            elif role in ("parameter", "frozen parameter"):
                add(f"{role}s", nb)
            elif role == "input":
                add("inputs", nb)
            else:
                add("constant tables", nb)
        step = self.peak_step
        producer = {}
        for i, node in enumerate(self.graph.nodes):
            for o in node.outputs:
                producer[o.id] = (i, node)
        # a gradient is often a view (the transpose of a weight-gradient matmul): count its owner
        grad_owners = {self.plan.alias_of.get(vid, vid) for vid in self.capture.grad_of}
        fwd_end = self.capture.phases[0] if self.capture.phases else None
        for b in self.plan.owned():
            if not (b.start <= step <= b.end) or b.kind == "workspace":
                continue
            if b.value_id in grad_owners:
                add("gradients", b.size_bytes)
                continue
            i, node = producer.get(b.value_id, (None, None))
            what = node.op.name if node is not None else "?"
            aval = next((o.aval for o in node.outputs if o.id == b.value_id), None) if node else None
            shape = _shape_str(aval) if aval is not None else ""
            if fwd_end is not None and i is not None and i >= fwd_end:
                # made by the backward pass: its source line is the caller's, not the model's
                add(f"backward temporary: {what} {shape}", b.size_bytes)
                continue
            saved = fwd_end is not None and b.start < fwd_end <= step
            kind = "saved activation" if saved else "activation/temporary"
            add(f"{kind}: {what} {shape} (at {_short_source(node) if node else '?'})", b.size_bytes)
        ranked = sorted(groups.items(), key=lambda kv: -kv[1][0])
        return [(label, nb, n) for label, (nb, n) in ranked[:top]]

    # -- views ------------------------------------------------------------------------------------
    def mindspore_lines(self) -> str:
        """The two lines MindSpore's DryRun logs (sizes in M = MiB)."""
        return (f"Used peak memory usage (without fragments): {_mib_ceil(self.used_peak_bytes)}M\n"
                f"Actual peak memory usage (with fragments): {_mib_ceil(self.actual_peak_bytes)}M")

    def op_table(self, top=15) -> list:
        """Per primitive: [(op, calls, flops, bytes moved, bytes allocated, time)] by time, largest first."""
        rows: dict = {}
        for n in self.nodes:
            r = rows.setdefault(_op_family(n.op), [0, 0, 0, 0, 0.0])
            r[0] += 1
            r[1] += n.flops
            r[2] += n.bytes_moved
            r[3] += n.out_bytes
            r[4] += n.time_s
        out = sorted(((op, *r) for op, r in rows.items()), key=lambda r: -r[5])
        return out[:top] if top else out

    def fit_message(self) -> str:
        d = self.device
        if self.fits:
            return (f"Fits on {d.display_name}: {_fmt_bytes(self.actual_peak_bytes)} of "
                    f"{_fmt_bytes(d.usable_bytes)} usable ({100 * self.actual_peak_bytes / d.usable_bytes:.1f}%).")
        lines = [f"Does NOT fit on {d.display_name}: needs {_fmt_bytes(self.actual_peak_bytes)}, "
                 f"{_fmt_bytes(d.usable_bytes)} usable ({self.actual_peak_bytes / d.usable_bytes:.2f}x).",
                 f"What dominates at the peak (node {self.peak_step}, {self.nodes[self.peak_step].op if self.nodes else ''} "
                 f"in the {self.nodes[self.peak_step].phase if self.nodes else ''} pass):"]
        for label, nb, n in self.dominant:
            lines.append(f"  {_fmt_bytes(nb):>12}  {100 * nb / self.actual_peak_bytes:5.1f}%  {label}"
                         f"{f'  x{n}' if n > 1 else ''}")
        return "\n".join(lines)

    def summary(self) -> str:
        d = self.device
        lines = [f"DryRun of '{self.name}' ({'training step: forward + backward + AdamW' if self.train else 'forward'})"
                 f" on {d.display_name}",
                 f"  graph: {len(self.graph.nodes)} nodes, {_fmt_count(self.num_params)} parameters "
                 f"({self.num_params:,}), compiled in {self.compile_s:.2f} s without running a kernel",
                 self.mindspore_lines(),
                 "  memory: " + ", ".join(f"{r}s {_fmt_bytes(b)}" if r != "optimizer state" else f"{r} {_fmt_bytes(b)}"
                                          for r, b in self.static.items() if b),
                 f"          activations + gradients + temporaries (arena): {_fmt_bytes(self.arena_bytes)} "
                 f"(lower bound {_fmt_bytes(self.lower_bound_bytes)}, no reuse {_fmt_bytes(self.no_reuse_bytes)}, "
                 f"planner '{self.plan.heuristic}')",
                 f"  FLOPs: {_fmt_flops(self.total_flops)} ({_fmt_flops(self.matmul_flops)} in matmuls), "
                 f"{_fmt_bytes(self.bytes_moved)} moved",
                 f"  predicted step time: {_fmt_time(self.step_time_s)} "
                 f"({', '.join(f'{p} {_fmt_time(t)}' for p, t in self.phase_time_s.items())}; "
                 f"kernel launches {_fmt_time(self.launch_time_s)})",
                 f"  roofline utilisation: {100 * self.mfu():.1f}% of the device's matmul peak "
                 f"({_fmt_flops(d.peak_flops('matmul', _dominant_dtype(self.graph, self.nodes)))}/s)",
                 "  " + self.fit_message().replace("\n", "\n  ")]
        return "\n".join(lines)

    def mfu(self) -> float:
        """FLOPs / (time * matmul peak of the dominant dtype): the model-FLOPs utilisation the
        prediction implies (how close to the matmul peak the whole step runs)."""
        if not self.step_time_s:
            return 0.0
        dt = _dominant_dtype(self.graph, self.nodes)
        return self.total_flops / (self.step_time_s * self.device.peak_flops("matmul", dt))

    def table(self, top=15) -> str:
        """The per-op table: calls, FLOPs, bytes moved, bytes allocated, predicted time."""
        rows = self.op_table(top)
        w = max([22] + [len(r[0]) + 2 for r in rows])
        head = f"{'op':<{w}}{'calls':>7}{'FLOPs':>16}{'moved':>13}{'allocated':>13}{'time':>13}{'%time':>7}"
        lines = [head, "-" * len(head)]
        total = self.step_time_s or 1.0
        for op, calls, flops, moved, alloc, t in rows:
            lines.append(f"{op:<{w}}{calls:>7}{_fmt_flops(flops):>16}{_fmt_bytes(moved):>13}{_fmt_bytes(alloc):>13}"
                         f"{_fmt_time(t):>13}{100 * t / total:>6.1f}%")
        return "\n".join(lines)

    def __str__(self):
        return self.summary() + "\n\nPer op (top by predicted time):\n" + self.table()

    __repr__ = __str__

    def _repr_pretty_(self, p, cycle):             # IPython shows the text report
        p.text(str(self))

    def to_dict(self, include_nodes: bool = False) -> dict:
        """A deterministic, JSON-serialisable summary (no timings of this run). `include_nodes`
        adds one record per node (op, phase, source, output bytes, live bytes, FLOPs, time)."""
        d = {
            "name": self.name, "train": self.train, "device": self.device.name,
            "num_nodes": len(self.graph.nodes), "num_params": self.num_params,
            "static_bytes": dict(self.static), "arena_bytes": self.arena_bytes,
            "lower_bound_bytes": self.lower_bound_bytes, "no_reuse_bytes": self.no_reuse_bytes,
            "used_peak_bytes": self.used_peak_bytes, "actual_peak_bytes": self.actual_peak_bytes,
            "used_peak_M": _mib_ceil(self.used_peak_bytes), "actual_peak_M": _mib_ceil(self.actual_peak_bytes),
            "total_flops": self.total_flops, "matmul_flops": self.matmul_flops, "bytes_moved": self.bytes_moved,
            "step_time_s": self.step_time_s, "fits": self.fits, "peak_step": self.peak_step,
            "dominant": [{"what": label, "bytes": nb, "count": n} for label, nb, n in self.dominant],
            "ops": [{"op": op, "calls": c, "flops": f, "bytes_moved": m, "bytes_allocated": a, "time_s": t}
                    for op, c, f, m, a, t in self.op_table(0)],
        }
        if include_nodes:
            d["nodes"] = [dict(vars(n)) for n in self.nodes]
        return d

    def to_json(self, path=None, indent=1, include_nodes: bool = False) -> str:
        s = json.dumps(self.to_dict(include_nodes), indent=indent, sort_keys=True)
        if path is not None:
            with open(path, "w") as f:
                f.write(s + "\n")
        return s

    def plot(self, path=None, ax=None):
        """The live-memory timeline (plot.py); returns the matplotlib Figure."""
        from .plot import plot_timeline
        return plot_timeline(self, path, ax)


def _roofline(device, node, cost):
    """(time, compute time, memory time) of one node; a CALL is the sum of its callee's nodes."""
    from ..ir import CALL
    if node.op is CALL:
        callee = node.attrs["graph"]
        users = consumers_of(callee)
        t = comp = mem = 0.0
        for n in callee.nodes:
            a, b, c = _roofline(device, n, node_cost(n, users))
            t, comp, mem = t + a, comp + b, mem + c
        return t, comp, mem
    dt = _compute_dtype(node)
    compute = device.compute_time(cost, dt) if cost.kind in ("matmul", "vector") else 0.0
    return device.node_time(cost, dt), compute, cost.bytes / device.mem_bw


def _compute_dtype(node) -> str:
    for o in node.outputs:
        if o.aval is not OPAQUE and o.aval.dtype.kind == "float":
            return o.aval.dtype.name.lower()
    for x in node.inputs:
        if isinstance(x, Value) and x.aval is not OPAQUE and x.aval.dtype.kind == "float":
            return x.aval.dtype.name.lower()
    return "float32"


def _dominant_dtype(graph, records) -> str:
    """The compute dtype most of the matrix-unit nodes (cost kind 'matmul') run in."""
    best, n = "float32", -1
    counts: dict = {}
    for node, rec in zip(graph.nodes, records):
        if node.is_primitive and rec.kind == "matmul":
            d = _compute_dtype(node)
            counts[d] = counts.get(d, 0) + 1
    for d, c in counts.items():
        if c > n:
            best, n = d, c
    return best


__all__ = ["DryRunReport", "NodeRecord"]
