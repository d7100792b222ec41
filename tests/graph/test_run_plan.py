"""graph/run: the execution plan as data, the jit level table, and the strategies over one plan.

Oracles: the graph itself read value by value (which inputs are constants, who reads what on which
stream), NumPy float64 for results, and the heap run for the arena and the streams (bit-identical).
"""
import sys

import numpy as np
import pytest

import minispore as ms
from minispore.common import dtype as mstype
from minispore.graph import GraphBuilder, Value
from minispore.graph.run import (ArenaRun, ExecutionPlan, O0Executor, O1Executor, O2Executor, StreamRun,
                                 build_plan, run_plan)
from minispore.graph.run import levels as levels_module
from minispore.graph.streams import blas_limit, schedule_streams
from minispore.ops.primitive import AbstractTensor, get_primitive

F32 = mstype.float32
add, mul, exp, sin, matmul = (get_primitive(n) for n in ("add", "mul", "exp", "sin", "matmul"))
jit_module = sys.modules["minispore.jit"]


def A(*shape):
    return AbstractTensor(shape, F32)


def branchy():
    """Two chains from x joined by an add, constants on both, a capture; returns the sum and 3.0."""
    w = ms.Tensor(np.full((4, 4), 0.5, np.float32))
    b = GraphBuilder("branchy")
    x = b.param(A(4, 4))
    cw = b.capture(w)
    scaled = b.add_node(mul, [x, 0.25], {}, A(4, 4)).outputs[0]
    left = b.add_node(exp, [scaled], {}, A(4, 4)).outputs[0]
    left = b.add_node(add, [left, scaled], {}, A(4, 4)).outputs[0]           # `scaled`: two readers
    right = b.add_node(sin, [b.add_node(matmul, [x, cw], {}, A(4, 4)).outputs[0]], {}, A(4, 4)).outputs[0]
    out = b.add_node(add, [b.add_node(add, [left, right], {}, A(4, 4)).outputs[0], 1.5], {}, A(4, 4)).outputs[0]
    return b.finish([out, 3.0]), w


def oracle(x, w):
    x, w = x.astype(np.float64), w.astype(np.float64)
    return np.exp(x * 0.25) + x * 0.25 + np.sin(x @ w) + 1.5


def test_the_plan_lists_slots_constants_and_outputs_of_the_graph():
    g, w = branchy()
    plan = build_plan(g)
    assert isinstance(plan, ExecutionPlan) and plan.graph is g and len(plan.steps) == len(g.nodes)
    assert plan.n_params == 1 and plan.slot_of[g.params[0]] == 0
    assert [(plan.slot_value[s], t) for s, t in plan.capture_slots] == [(v.id, t) for v, t in g.captures]
    # the constants are exactly the non-Value inputs of the nodes, each in the slot its step reads
    want = [(i, x) for i, n in enumerate(g.nodes) for x in n.inputs if not isinstance(x, Value)]
    got = [(i, plan.template[s]) for i, st in enumerate(plan.steps) for s in st.ins if s in plan.constants]
    assert got == want == [(0, 0.25), (6, 1.5)]
    assert sorted(plan.constants.values()) == [0.25, 1.5]
    assert plan.slot_value[plan.out_slots[0]] == g.outputs[0].id
    x = np.random.default_rng(0).standard_normal((4, 4)).astype(np.float32)
    assert plan.out_slots[1] is None and plan.outputs[1] == 3.0     # a constant output is no slot
    out, three = run_plan(plan, [x])
    np.testing.assert_allclose(out, oracle(x, w.asnumpy()), rtol=1e-5)
    assert three == 3.0


def test_every_strategy_runs_the_same_plan_to_the_same_bits():
    g, w = branchy()
    x = np.random.default_rng(1).standard_normal((4, 4)).astype(np.float32)
    with blas_limit(2):
        want = O0Executor(g, arena=False).run(x)
    plan = build_plan(g)
    arena = ArenaRun(plan)
    streams = StreamRun(plan, schedule_streams(g, 2))
    got_arena = arena.run([x])
    got_streams = streams.run([x])
    for got in (got_arena, got_streams):
        np.testing.assert_array_equal(got[0], want[0])
    assert arena.arena.high_water == arena.memory_plan.peak_bytes and arena.unplanned_bytes == 0
    assert not arena.arena.owns(got_arena[0])   # the caller gets its own copy, not arena bytes


def test_multi_stream_frees_each_slot_once_by_its_last_reader():
    """Oracle: the readers of every node-output slot, from the graph; a slot read on one stream is
    freed by the step of that stream's queue that reads it last, one read on several is shared."""
    g, _ = branchy()
    plan = build_plan(g)
    sched = schedule_streams(g, 2)
    run = StreamRun(plan, sched)
    kept = {plan.slot_of[o] for o in g.outputs if isinstance(o, Value)}
    readers = {}
    for i, node in enumerate(g.nodes):
        for x in node.inputs:
            if isinstance(x, Value) and x.kind != "capture" and plan.slot_of[x] not in kept:   # x: a param
                readers.setdefault(plan.slot_of[x], set()).add(i)
    pos = {i: k for q in sched.queues for k, i in enumerate(q)}
    streams_of = [{sched.stream_of[r] for r in rs} for rs in readers.values()]
    assert any(len(st) > 1 for st in streams_of)                               # x: both chains
    assert any(len(st) == 1 and len(rs) > 1 for st, rs in zip(streams_of, readers.values()))   # scaled
    for s, rs in readers.items():
        freed_by = [i for i, st in enumerate(run.steps) if s in st.frees]
        shared_by = {i for i, sh in enumerate(run.shared) if s in sh}
        if len({sched.stream_of[r] for r in rs}) == 1:
            assert freed_by == [max(rs, key=pos.__getitem__)] and not shared_by
        else:
            assert freed_by == [] and shared_by == rs and run.counts[s] == len(rs)


def test_the_jit_levels_are_one_table_and_memory_optimize_level_picks_the_arena():
    assert levels_module._LEVELS == {"O0": O0Executor, "O1": O1Executor, "O2": O2Executor}
    g, _ = branchy()
    assert type(jit_module.make_executor(g, "O0")) is O0Executor
    assert jit_module.make_executor(g, "O0").arena is None
    ms.set_context(memory_optimize_level="O1")
    try:
        assert jit_module.make_executor(g, "O0").arena is not None
        assert O0Executor(g).arena is not None
        assert O0Executor(g, arena=False).arena is None
    finally:
        ms.set_context(memory_optimize_level="O0")


@pytest.mark.parametrize("level", ["O0", "O1", "O2"])
def test_a_failing_step_is_located_the_same_way_at_every_level(level):
    """One locate_error: the op, the user's line and the graph, whatever runs the plan."""
    def f(x, idx):
        return ms.ops.gather(x * 2.0, idx, 0)
    x = ms.Tensor(np.ones((3, 2), np.float32))
    jf = ms.jit(f, capture_mode="trace", jit_level=level)
    jf(x, ms.Tensor(np.array([0, 2])))
    with pytest.raises(ms.MinisporeError) as e:
        jf(x, ms.Tensor(np.array([0, 7])))
    assert "gather" in str(e.value) and "test_run_plan.py" in str(e.value) and "graph 'f'" in str(e.value)
