"""Arena execution: a compiled graph runs with every intermediate at its planned offset in one arena.

Oracle: the default O0 executor (heap buffers freed after their last use) on the same graph; the
arena run must give bit-identical results, measure exactly the planned peak, and keep nothing
outside the arena.
"""
import numpy as np
import pytest

import minispore as ms
from minispore.common import dtype as mstype
from minispore.graph import CALL, GraphBuilder, O0Executor, Value
from minispore.graph import memory
from minispore.llm.config import LlamaConfig
from minispore.llm.model import Llama
from minispore.ops.primitive import AbstractTensor, get_primitive

F32 = mstype.float32


def tiny_llama_step(n_layers=2, batch=2, seq=8):
    ms.set_seed(0)
    cfg = LlamaConfig(vocab_size=17, dim=16, n_layers=n_layers, n_heads=2, max_seq_len=seq, multiple_of=8)
    net = Llama(cfg)
    gf = ms.value_and_grad(net.loss, None, net.trainable_params())

    def step(x, y):
        return gf(x, y)

    rng = np.random.default_rng(1)
    x = ms.Tensor(rng.integers(0, 17, (batch, seq)).astype(np.int32))
    y = ms.Tensor(rng.integers(0, 17, (batch, seq)).astype(np.int32))
    return ms.jit(step, capture_mode="trace"), x, y


@pytest.fixture(scope="module")
def llama_graph():
    jf, x, y = tiny_llama_step()
    return jf.compile(x, y).graph, x, y


def flat(r):
    return [np.asarray(a) for a in r]


def test_arena_run_equals_the_heap_run_and_measures_the_planned_peak(llama_graph):
    g, x, y = llama_graph
    heap = O0Executor(g)
    arena = O0Executor(g, arena=True)
    want = flat(heap.run(x._data, y._data))
    got = flat(arena.run(x._data, y._data))
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)
    p = arena.memory_plan
    assert arena.arena.high_water == p.peak_bytes == arena.arena.nbytes
    assert arena.arena_run.unplanned_bytes == 0
    assert p.lower_bound_bytes <= p.peak_bytes <= 1.05 * p.lower_bound_bytes
    assert p.peak_bytes < p.no_reuse_bytes


def test_outputs_survive_the_next_run(llama_graph):
    g, x, y = llama_graph
    ex = O0Executor(g, arena=True)
    first = flat(ex.run(x._data, y._data))
    keep = [a.copy() for a in first]
    y2 = np.roll(y._data, 1)
    second = flat(ex.run(x._data, y2))
    for a, k in zip(first, keep):
        np.testing.assert_array_equal(a, k)           # returned arrays are not arena views
    assert not np.array_equal(first[0], second[0])


def test_saved_activations_live_until_their_backward_use(llama_graph):
    g, x, y = llama_graph
    ex = O0Executor(g, record_live=True)
    ex.run(x._data, y._data)
    p = memory.plan(g)
    owned = {b.value_id: b for b in p.owned()}
    step_of = {o.id: i for i, n in enumerate(g.nodes) for o in n.outputs}
    # the executor's trace after each step: every owned value it still holds is inside its interval
    for i, live in enumerate(ex.live_trace):
        for vid in live:
            if vid in owned:
                assert owned[vid].start <= i <= owned[vid].end
    # and some forward values are held across into the backward half of the graph
    n = len(g.nodes)
    long_lived = [b for b in owned.values() if b.kind == "node" and b.start < n // 3 and b.end > 2 * n // 3]
    assert long_lived
    # the lower bound covers what the executor keeps alive between steps
    sizes = {vid: b.size_bytes for vid, b in owned.items()}
    assert p.lower_bound_bytes >= max(sum(sizes.get(v, 0) for v in live) for live in ex.live_trace)
    assert step_of                                     # graph has node outputs


def test_memory_optimize_level_o1_runs_jitted_functions_in_an_arena():
    jf, x, y = tiny_llama_step(n_layers=1)
    want = jf(x, y)
    ms.set_context(memory_optimize_level="O1")
    try:
        jf2, _, _ = tiny_llama_step(n_layers=1)
        entry = jf2.compile(x, y)
        assert entry.executor.arena is not None
        got = jf2(x, y)
    finally:
        ms.set_context(memory_optimize_level="O0")
    np.testing.assert_array_equal(got[0].asnumpy(), want[0].asnumpy())
    for a, b in zip(got[1], want[1]):
        np.testing.assert_array_equal(a.asnumpy(), b.asnumpy())


def test_a_called_subgraph_runs_in_a_workspace_of_the_callers_arena():
    exp, add, mul, transpose = (get_primitive(n) for n in ("exp", "add", "mul", "transpose"))

    def nd(b, prim, inputs, **attrs):
        args = [v.aval if isinstance(v, Value) else v for v in inputs]
        return b.add_node(prim, inputs, attrs, prim.infer(*args, **attrs)).outputs[0]

    cb = GraphBuilder("layer")
    p0, w = cb.param(AbstractTensor((4, 4), F32)), cb.param(AbstractTensor((4, 4), F32))
    h = nd(cb, exp, [nd(cb, mul, [p0, w])])
    callee = cb.finish([nd(cb, add, [nd(cb, transpose, [h], perm=(1, 0)), p0])])

    b = GraphBuilder("outer")
    x = b.param(AbstractTensor((4, 4), F32))
    wt = ms.Tensor(np.full((4, 4), 0.5, np.float32))
    wv = b.capture(wt)
    v = x
    for _ in range(3):
        v = b.add_structural(CALL, [v, wv], {"graph": callee}, [AbstractTensor((4, 4), F32)]).outputs[0]
    g = b.finish([nd(b, exp, [v])])
    xs = np.linspace(-1, 1, 16, dtype=np.float32).reshape(4, 4)
    want = O0Executor(g).run(xs)[0]
    ex = O0Executor(g, arena=True)
    got = ex.run(xs)[0]
    np.testing.assert_array_equal(got, want)
    p = ex.memory_plan
    callee_peak = memory.graph_plan(callee).peak_bytes
    assert callee_peak > 0
    assert sum(1 for bb in p.buffers if bb.kind == "workspace") == 3
    assert all(bb.size_bytes == callee_peak for bb in p.buffers if bb.kind == "workspace")
    assert ex.arena.high_water == p.peak_bytes
