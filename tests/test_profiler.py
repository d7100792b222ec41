"""minispore.Profiler: PyNative calls and graph nodes (per stream) recorded; the Chrome trace is
valid and consistent (events nest, follow their dependencies); the summary adds up."""
import csv
import json

import numpy as np
import pytest

import minispore as ms
from minispore import ops
from minispore.backend.dispatch import eager_execute
from minispore.common.errors import MinisporeRuntimeError, OpTypeError, OpValueError
from minispore.graph.run import profiling_sink
from minispore.graph.streams import multi_stream
from minispore.ops import primitive


def _tensor(shape, seed=0):
    return ms.Tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


@ms.jit(capture_mode="trace")
def branches(x, y):
    a = ops.exp(ops.matmul(x, y))
    b = ops.sin(ops.matmul(y, x))
    return ops.matmul(a + b, x)


def test_pynative_calls_are_recorded_and_executor_restored(tmp_path):
    x, y = _tensor((8, 8)), _tensor((8, 8), 1)
    with ms.Profiler(output_path=str(tmp_path)) as prof:
        z = x + y
        z = ops.exp(z) * y
        z = ops.exp(z) + x
    assert primitive.get_executor() is eager_execute and profiling_sink() is None
    stats = {r["op"]: r["calls"] for r in prof.op_stats()}
    assert stats == {"add": 2, "exp": 2, "mul": 1}
    assert all(e[1] == "pynative" and e[2] == 0 for e in prof.events)
    x + y                                          # after stop: not recorded
    assert sum(r["calls"] for r in prof.op_stats()) == 5


def test_chrome_trace_is_valid_nested_and_ordered(tmp_path):
    x, y = _tensor((64, 64)), _tensor((64, 64), 1)
    branches(x, y)                                  # compile outside the profile
    prof = ms.Profiler(output_path=str(tmp_path))
    with multi_stream(2):
        for _ in range(3):
            branches(x, y)
    ops.relu(x)
    out_dir = prof.analyse()
    with open(f"{out_dir}/trace_view.json") as f:
        trace = json.load(f)
    events = trace["traceEvents"]
    meta = [e for e in events if e["ph"] == "M"]
    spans = [e for e in events if e["ph"] == "X"]
    assert {m["args"]["name"] for m in meta if m["name"] == "thread_name"} >= {"PyNative (host)", "graph stream 0",
                                                                                 "graph stream 1"}
    for e in spans:
        assert set(e) >= {"name", "cat", "ph", "ts", "dur", "pid", "tid"}
        assert e["dur"] >= 0 and isinstance(e["ts"], float)
    runs = [e for e in spans if e["cat"] == "graph_run"]
    nodes = [e for e in spans if e["cat"] == "graph"]
    assert len(runs) == 3 and len(nodes) == 3 * 6
    eps = 1e-3                                     # us: the trace rounds ns to floats
    # every node lies inside one graph run
    for n in nodes:
        assert any(r["ts"] - eps <= n["ts"] and n["ts"] + n["dur"] <= r["ts"] + r["dur"] + eps for r in runs)
    # on each track, events are nested or disjoint (a stream runs one kernel at a time)
    by_tid = {}
    for e in spans:
        by_tid.setdefault(e["tid"], []).append(e)
    for evs in by_tid.values():
        evs.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack = []
        for e in evs:
            while stack and stack[-1]["ts"] + stack[-1]["dur"] <= e["ts"] + eps:
                stack.pop()
            if stack:
                assert e["ts"] + e["dur"] <= stack[-1]["ts"] + stack[-1]["dur"] + eps, "partial overlap"
            stack.append(e)
    # a node starts after every node it depends on has ended (the events work)
    sched = branches.compile(x, y).executor.schedule(2)
    for r in runs:
        mine = {n["args"]["node"]: n for n in nodes if r["ts"] - eps <= n["ts"] <= r["ts"] + r["dur"] + eps}
        assert len(mine) == 6
        for i, n in mine.items():
            for d in sched.deps[i]:
                assert mine[d]["ts"] + mine[d]["dur"] <= n["ts"] + eps
            assert n["tid"] == sched.stream_of[i] + 1
    assert [e["name"] for e in spans if e["cat"] == "pynative"] == ["relu"]


def test_summary_totals_are_consistent(tmp_path):
    x, y = _tensor((32, 32)), _tensor((32, 32), 1)
    branches(x, y)
    with ms.Profiler(output_path=str(tmp_path)) as prof:
        branches(x, y)
        for _ in range(4):
            x = ops.tanh(x @ y)
    stats = prof.op_stats()
    ops_events = [e for e in prof.events if e[1] != "graph_run"]
    assert sum(r["calls"] for r in stats) == len(ops_events) == 6 + 8
    total_us = sum((e[4] - e[3]) / 1e3 for e in ops_events)
    assert sum(r["total_us"] for r in stats) == pytest.approx(total_us)
    assert sum(r["ratio"] for r in stats) == pytest.approx(1.0)
    assert [r["total_us"] for r in stats] == sorted((r["total_us"] for r in stats), reverse=True)
    for r in stats:
        assert r["min_us"] <= r["avg_us"] <= r["max_us"]
        assert r["avg_us"] == pytest.approx(r["total_us"] / r["calls"])
    assert {r["op"]: r["calls"] for r in stats}["matmul"] == 3 + 4
    with open(tmp_path / "profiler" / "op_statistic.csv") as f:
        rows = list(csv.DictReader(f))
    assert sum(int(r["Count"]) for r in rows) == 14
    text = (tmp_path / "profiler" / "op_summary.txt").read_text()
    assert text.splitlines()[-2].split()[:2] == ["total", "14"]
    assert json.loads(prof.op_analyse("matmul"))["matmul"]["calls"] == 7
    with pytest.raises(OpValueError, match="op_analyse"):
        prof.op_analyse("conv2d")


def test_start_stop_and_arguments(tmp_path):
    prof = ms.Profiler(output_path=str(tmp_path), start_profile=False)
    ops.exp(_tensor((2,)))
    assert prof.events == []
    prof.start()
    with pytest.raises(MinisporeRuntimeError, match="already"):
        prof.start()
    ops.exp(_tensor((2,)))
    prof.stop()
    with pytest.raises(MinisporeRuntimeError, match="not recording"):
        prof.stop()
    assert [e[0] for e in prof.events] == ["exp"]
    quiet = ms.Profiler(output_path=str(tmp_path), op_time=False, profiler_level=None, aicore_metrics=0)
    ops.exp(_tensor((2,)))
    quiet.stop()
    assert quiet.events == []
    with pytest.raises(OpValueError, match="Profiler"):
        ms.Profiler(output_path=str(tmp_path), sample_rate=10)
    with pytest.raises(OpTypeError, match="Profiler"):
        ms.Profiler(output_path=3)
    with ms.Profiler(output_path=str(tmp_path), with_stack=True, profile_memory=True) as p:
        ops.exp(_tensor((4,)))
    (ev,) = p.events
    assert ev[5]["output_bytes"] == 16 and ev[5]["source"].endswith(".py:" + ev[5]["source"].rsplit(":", 1)[1])
