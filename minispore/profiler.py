"""`minispore.Profiler`: where the time goes, op by op, stream by stream.

    prof = ms.Profiler(output_path="./data")      # starts recording (start_profile=True)
    train_step(...)                               # PyNative ops and compiled graphs alike
    prof.analyse()                                # stop, write the files, print nothing
    print(prof.summary())                         # top ops by total time

    with ms.Profiler(output_path="./data") as prof:   # the same, as a block
        ...

MindSpore's `Profiler(**kwargs)` collects device traces (Ascend/GPU) and MindSpore Insight shows
them; ours records on the host with `time.perf_counter_ns` what minispore itself runs:

* **PyNative**: every primitive call, by wrapping the executor that primitives are handed to
  (ops/primitive.py `set_executor`): one event per call, named after the primitive, on the
  "PyNative (host)" track. The time includes the op's inference and dispatch, not only its kernel.
* **Graphs** (jit, GRAPH_MODE) run at O0 or O1: one event per node on the track of the stream
  that ran it (graph/run/multi_stream.py), inside one event for the whole graph run. Other
  executors can report through `minispore.graph.run.profiling_sink()`.

`analyse()` writes into `<output_path>/profiler/`:

* `trace_view.json` - the Chrome trace format (open chrome://tracing or https://ui.perfetto.dev,
  "Load"): complete events (`"ph": "X"`, microseconds), one track (tid) per stream;
* `op_statistic.csv` - MindSpore's name for the per-op table: op, calls, total/avg/min/max time
  (us), share of the total;
* `op_summary.txt` - the same table as text (`prof.summary()`).

Accepted MindSpore arguments: `output_path`, `op_time` (False records nothing), `start_profile`,
`with_stack` (adds each PyNative op's user source line to its event), `profile_memory` (adds
output bytes to each event); the Ascend/GPU-only ones (profiler_level, aicore_metrics,
profile_communication, parallel_strategy, l2_cache, hbm_ddr, pcie, sync_enable, data_process,
timeline_limit, profile_framework, data_simplification, ...) are accepted and have no effect on
the CPU backend.
"""
from __future__ import annotations

import csv
import json
import os
import time

from .common.errors import MinisporeRuntimeError, OpTypeError, OpValueError
from .graph.run import profiling
from .ops import primitive

_DEVICE_ONLY_ARGS = frozenset({
    "profiler_level", "aicore_metrics", "profile_communication", "parallel_strategy", "l2_cache", "hbm_ddr",
    "pcie", "sync_enable", "data_process", "timeline_limit", "profile_framework", "data_simplification",
    "activities", "schedule", "on_trace_ready", "record_shapes", "mstx", "host_sys", "sys_io", "sys_interconnection",
    "export_type", "analyse_flag", "rank_id", "env_enable", "profiler_path"})

PYNATIVE_TID = 0               # the PyNative track; graph stream s is tid s + 1


class _Recorder:
    """The sink graph executors report to (profiling.profiling_sink()) and the PyNative wrapper writes
    into. Appending to a list is atomic under the GIL, so streams on other threads need no lock."""

    def __init__(self):
        self.events = []          # (name, category, tid, t0_ns, t1_ns, args)

    def record(self, name, category, stream, t0, t1, args=None):
        self.events.append((name, category, stream + 1, t0, t1, args))


class Profiler:
    """Record per-op (PyNative) and per-node (graph, per stream) timings; see the module docstring."""

    def __init__(self, output_path="./data", *, op_time=True, start_profile=True, with_stack=False,
                 profile_memory=False, **kwargs):
        unknown = sorted(k for k in kwargs if k not in _DEVICE_ONLY_ARGS)
        if unknown:
            raise OpValueError("Profiler", "keyword arguments among output_path, op_time, start_profile, "
                               "with_stack, profile_memory (or MindSpore's device-only ones)",
                               f"unknown {unknown}")
        if not isinstance(output_path, (str, os.PathLike)):
            raise OpTypeError("Profiler", "output_path as a path string", type(output_path).__name__)
        for name, v in (("op_time", op_time), ("start_profile", start_profile), ("with_stack", with_stack),
                        ("profile_memory", profile_memory)):
            if not isinstance(v, bool):
                raise OpTypeError("Profiler", f"{name} as a bool", type(v).__name__)
        self.output_path = os.fspath(output_path)
        self.op_time = op_time
        self.with_stack = with_stack
        self.profile_memory = profile_memory
        self._recorder = _Recorder()
        self._running = False
        self._saved_sink = None
        self._saved_executor = None
        self._wrapper = None
        self._t_origin = None
        if start_profile:
            self.start()

    # -- recording --------------------------------------------------------------------------------
    @property
    def events(self) -> list:
        """The raw events: (name, category, tid, start_ns, end_ns, args) tuples."""
        return list(self._recorder.events)

    def start(self):
        """Start recording (MindSpore's `Profiler.start`)."""
        if self._running:
            raise MinisporeRuntimeError("Profiler.start: this profiler is already recording")
        if not self.op_time:
            self._running = True
            return
        if self._t_origin is None:
            self._t_origin = time.perf_counter_ns()
        self._saved_sink = profiling.set_profiling_sink(self._recorder)
        self._wrapper = _pynative_wrapper(primitive.get_executor(), self._recorder, self.with_stack,
                                          self.profile_memory)
        self._saved_executor = primitive.set_executor(self._wrapper)
        self._running = True

    def stop(self):
        """Stop recording (MindSpore's `Profiler.stop`); the events are kept."""
        if not self._running:
            raise MinisporeRuntimeError("Profiler.stop: this profiler is not recording (call start() first)")
        self._running = False
        if not self.op_time:
            return
        profiling.set_profiling_sink(self._saved_sink)
        self._wrapper.active = False             # if someone wrapped us in turn, pass through from now on
        if primitive.get_executor() is self._wrapper:
            primitive.set_executor(self._saved_executor)

    def __enter__(self):
        if not self._running:
            self.start()
        return self

    def __exit__(self, *exc):
        if self._running:
            self.stop()
        self.analyse()
        return False

    # -- results ----------------------------------------------------------------------------------
    def op_stats(self) -> list:
        """Per op name (graph nodes and PyNative calls together): dicts with op, calls, total_us,
        avg_us, min_us, max_us, ratio (share of all op time), sorted by total time."""
        rows: dict = {}
        for name, cat, _tid, t0, t1, _args in self._recorder.events:
            if cat == "graph_run":
                continue
            d = (t1 - t0) / 1e3
            r = rows.get(name)
            if r is None:
                rows[name] = [1, d, d, d]
            else:
                r[0] += 1
                r[1] += d
                r[2] = min(r[2], d)
                r[3] = max(r[3], d)
        total = sum(r[1] for r in rows.values()) or 1.0
        out = [{"op": k, "calls": c, "total_us": t, "avg_us": t / c, "min_us": lo, "max_us": hi, "ratio": t / total}
               for k, (c, t, lo, hi) in rows.items()]
        out.sort(key=lambda r: (-r["total_us"], r["op"]))
        return out

    def summary(self, top=15) -> str:
        """The top ops by total time, as a text table (with the totals of ALL ops on the last line)."""
        stats = self.op_stats()
        shown = stats[:top] if top else stats
        w = max([24] + [len(r["op"]) + 2 for r in shown])
        head = f"{'op':<{w}}{'calls':>8}{'total (ms)':>13}{'avg (us)':>12}{'min (us)':>11}{'max (us)':>11}{'%':>7}"
        lines = [head, "-" * len(head)]
        for r in shown:
            lines.append(f"{r['op']:<{w}}{r['calls']:>8}{r['total_us'] / 1e3:>13.3f}{r['avg_us']:>12.1f}"
                         f"{r['min_us']:>11.1f}{r['max_us']:>11.1f}{100 * r['ratio']:>6.1f}%")
        n = sum(r["calls"] for r in stats)
        total = sum(r["total_us"] for r in stats)
        if top and len(stats) > top:
            lines.append(f"... {len(stats) - top} more ops")
        lines.append(f"{'total':<{w}}{n:>8}{total / 1e3:>13.3f}")
        graph_runs = sum(1 for e in self._recorder.events if e[1] == "graph_run")
        if graph_runs:
            lines.append(f"({graph_runs} graph runs; graph nodes and PyNative calls are counted together)")
        return "\n".join(lines)

    def chrome_trace(self) -> dict:
        """The events in the Chrome trace format (a dict ready for json.dump)."""
        origin = self._t_origin or 0
        pid = os.getpid()
        tids = sorted({e[2] for e in self._recorder.events} | {PYNATIVE_TID})
        meta = [{"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": "minispore (CPU)"}}]
        for tid in tids:
            label = "PyNative (host)" if tid == PYNATIVE_TID else f"graph stream {tid - 1}"
            meta.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": label}})
            meta.append({"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid, "args": {"sort_index": tid}})
        events = []
        for name, cat, tid, t0, t1, args in sorted(self._recorder.events, key=lambda e: (e[3], -e[4])):
            ev = {"name": name, "cat": cat, "ph": "X", "pid": pid, "tid": tid,
                  "ts": (t0 - origin) / 1e3, "dur": (t1 - t0) / 1e3}
            if args:
                ev["args"] = dict(args)
            events.append(ev)
        return {"traceEvents": meta + events, "displayTimeUnit": "ms",
                "otherData": {"producer": "minispore.Profiler", "clock": "time.perf_counter_ns"}}

    def analyse(self, offline_path=None, pretty=False, step_list=None, mode="sync"):
        """Stop recording if needed and write trace_view.json, op_statistic.csv and op_summary.txt into
        `<output_path>/profiler/` (MindSpore's `analyse`; its other arguments are accepted). Returns
        that directory."""
        if self._running:
            self.stop()
        out = os.path.join(offline_path or self.output_path, "profiler")
        try:
            os.makedirs(out, exist_ok=True)
            with open(os.path.join(out, "trace_view.json"), "w") as f:
                json.dump(self.chrome_trace(), f, indent=1 if pretty else None)
            with open(os.path.join(out, "op_statistic.csv"), "w", newline="") as f:
                w = csv.writer(f)
                w.writerow(["Op Type", "Count", "Total Time(us)", "Avg Time(us)", "Min Time(us)", "Max Time(us)",
                            "Ratio(%)"])
                for r in self.op_stats():
                    w.writerow([r["op"], r["calls"], f"{r['total_us']:.3f}", f"{r['avg_us']:.3f}",
                                f"{r['min_us']:.3f}", f"{r['max_us']:.3f}", f"{100 * r['ratio']:.3f}"])
            with open(os.path.join(out, "op_summary.txt"), "w") as f:
                f.write(self.summary(top=0) + "\n")
        except OSError as e:
            raise MinisporeRuntimeError(f"Profiler.analyse: cannot write the results to '{out}': {e}") from None
        return out

    def op_analyse(self, op_name, device_id=None) -> str:
        """Statistics of one op (or a list of ops) as a JSON string (MindSpore's `op_analyse`)."""
        names = [op_name] if isinstance(op_name, str) else list(op_name)
        stats = {r["op"]: r for r in self.op_stats()}
        missing = [n for n in names if n not in stats]
        if missing:
            raise OpValueError("Profiler.op_analyse", f"ops that were recorded ({sorted(stats)[:10]} ...)",
                               f"{missing}")
        return json.dumps({n: stats[n] for n in names}, indent=1)


def _pynative_wrapper(inner, recorder, with_stack, profile_memory):
    """An executor that times each primitive call and hands it to `inner` (the eager executor)."""
    clock = time.perf_counter_ns
    events = recorder.events

    def profiled(prim, inputs, attrs):
        if not profiled.active:
            return inner(prim, inputs, attrs)
        t0 = clock()
        out = inner(prim, inputs, attrs)
        t1 = clock()
        args = None
        if with_stack or profile_memory:
            args = {}
            if with_stack:
                from .graph.trace.session import user_source
                src = user_source(2)
                if src is not None:
                    args["source"] = f"{src[0]}:{src[1]}"
            if profile_memory:
                outs = out if isinstance(out, tuple) else (out,)
                args["output_bytes"] = sum(getattr(o, "nbytes", 0) for o in outs)
        events.append((prim.name, "pynative", PYNATIVE_TID, t0, t1, args))
        return out

    profiled.active = True
    return profiled


__all__ = ["Profiler"]
