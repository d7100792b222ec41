"""Multi-stream O0: the schedule respects every dependency, events are where branches join, and
results are bit-for-bit those of one stream (oracle: the single-stream O0 executor, with the
BLAS thread count each stream gets: a BLAS's thread count may change its rounding)."""
import numpy as np
import pytest

import minispore as ms
from minispore.common.errors import MinisporeError, OpValueError
from minispore.graph import streams
from minispore.graph.ir import GraphBuilder
from minispore.graph.run import O0Executor
from minispore.graph.streams import multi_stream, schedule_streams, set_multi_stream
from minispore.ops.primitive import AbstractTensor, Primitive, get_primitive

F32 = ms.float32


def _aval(shape):
    return AbstractTensor(shape, F32)


def diamond():
    """x -> (matmul a, matmul b) -> add: two independent branches joined by one node (big enough
    that a second stream pays for its event)."""
    N = 256
    b = GraphBuilder("diamond")
    x = b.param(_aval((N, N)))
    y = b.param(_aval((N, N)))
    mm, add, exp, sin = (get_primitive(n) for n in ("matmul", "add", "exp", "sin"))
    a = b.add_node(mm, (x, y), {}, _aval((N, N))).outputs[0]
    a = b.add_node(exp, (a,), {}, _aval((N, N))).outputs[0]
    c = b.add_node(mm, (y, x), {}, _aval((N, N))).outputs[0]
    c = b.add_node(sin, (c,), {}, _aval((N, N))).outputs[0]
    out = b.add_node(add, (a, c), {}, _aval((N, N))).outputs[0]
    return b.finish([out])


def random_dag(seed, n_nodes=40):
    """A random DAG of elementwise ops over a few (8, 8) inputs: many independent chains and joins."""
    rng = np.random.default_rng(seed)
    b = GraphBuilder(f"dag{seed}")
    vals = [b.param(_aval((8, 8))) for _ in range(3)]
    unary = [get_primitive(n) for n in ("exp", "sin", "cos", "tanh", "neg")]
    binary = [get_primitive(n) for n in ("add", "mul", "sub", "maximum")]
    for _ in range(n_nodes):
        if rng.random() < 0.5:
            p = unary[rng.integers(len(unary))]
            ins = (vals[rng.integers(len(vals))],)
        else:
            p = binary[rng.integers(len(binary))]
            ins = (vals[rng.integers(len(vals))], vals[rng.integers(len(vals))])
        vals.append(b.add_node(p, ins, {}, _aval((8, 8))).outputs[0])
    return b.finish([vals[-1], vals[-5], vals[len(vals) // 2]])


def happens_before(sched):
    """The partial order the schedule guarantees (stream order + events), as reachability sets."""
    n = len(sched.graph.nodes)
    before = [set() for _ in range(n)]
    for i in sched.order:                          # the global order is topological for both relations
        s = sched.stream_of[i]
        q = sched.queues[s]
        k = q.index(i)
        if k:
            before[i] |= before[q[k - 1]] | {q[k - 1]}
        for j in sched.waits[i]:
            before[i] |= before[j] | {j}
    return before


@pytest.mark.parametrize("n_streams", [2, 3])
@pytest.mark.parametrize("seed", range(6))
def test_schedule_respects_every_dependency(seed, n_streams):
    g = random_dag(seed)
    sched = schedule_streams(g, n_streams)
    assert sorted(sched.order) == list(range(len(g.nodes)))
    assert sorted(i for q in sched.queues for i in q) == list(range(len(g.nodes)))
    before = happens_before(sched)
    for i in range(len(g.nodes)):
        assert sched.deps[i] <= before[i], f"node {i} may run before one of its inputs"
        for j in sched.waits[i]:
            assert sched.stream_of[j] != sched.stream_of[i]          # events only across streams


def test_diamond_puts_branches_on_two_streams_with_one_event_at_the_join():
    g = diamond()
    sched = schedule_streams(g, 2)
    mm_a, _, mm_b, _, join = range(5)
    assert sched.stream_of[mm_a] != sched.stream_of[mm_b]
    assert sched.num_events == 1
    (waited,) = [j for i in range(5) for j in sched.waits[i]]
    assert sched.waits[join] == [waited] and sched.stream_of[waited] != sched.stream_of[join]
    assert sched.makespan_s < sched.serial_s
    assert "wait(#" in sched.describe()


def test_one_stream_keeps_program_order():
    g = random_dag(0)
    sched = schedule_streams(g, 1)
    assert sched.queues == [list(range(len(g.nodes)))] and sched.num_events == 0


@pytest.mark.parametrize("seed", range(4))
def test_results_equal_single_stream(seed):
    g = random_dag(seed, 60)
    rng = np.random.default_rng(seed)
    xs = [rng.standard_normal((8, 8)).astype(np.float32) for _ in range(3)]
    for n in (2, 3):
        with streams.blas_limit(n):
            want = O0Executor(g).run(*xs)
        got = O0Executor(g, n_streams=n).run(*xs)
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a, b)


def test_memory_constraints_hold_cross_stream_buffers():
    from minispore.graph import memory
    g = diamond()
    sched = schedule_streams(g, 2)
    order, hold = sched.memory_constraints()
    assert order == sched.order and len(hold) == 1
    (vid, step), = hold.items()
    p = memory.plan(g, schedule=order, hold_until=hold)
    assert p.buffer(vid).end >= step
    memory.check_plan(p)


def test_jit_graph_with_autodiff_and_dropout_same_results():
    """A jitted forward+backward with dropout: random ops keep program order on stream 0, so a
    seeded multi-stream run draws the same masks as a single-stream run."""
    from minispore.llm.config import LlamaConfig
    from minispore.llm.model import Llama
    ms.set_seed(0)
    model = Llama(LlamaConfig(vocab_size=65, dim=32, n_layers=2, n_heads=4, max_seq_len=16, dropout=0.1))
    model.set_train(True)
    weights = model.trainable_params()

    @ms.jit(capture_mode="trace")
    def step(t):
        return ms.value_and_grad(model.loss, None, weights)(t, t)

    t = ms.Tensor(np.random.default_rng(0).integers(0, 65, (2, 16)))
    ms.set_seed(1)
    with streams.blas_limit(2):
        loss1, g1 = step(t)
    exe = step.compile(t).executor
    assert isinstance(exe, O0Executor)
    assert any(n.op.name == "dropout" for n in exe.graph.nodes)
    with multi_stream(2):
        ms.set_seed(1)
        loss2, g2 = step(t)
    assert exe.schedule(2).num_events > 0
    assert loss1.asnumpy() == loss2.asnumpy()
    for a, b in zip(g1, g2):
        np.testing.assert_array_equal(a.asnumpy(), b.asnumpy())


def test_a_failing_kernel_on_a_worker_stream_is_reported():
    def bad_kernel(a):
        raise ValueError("boom")
    bad = Primitive("bad_op", lambda a: _aval(a.shape), bad_kernel)
    b = GraphBuilder("fails")
    x = b.param(_aval((16, 16)))
    mm = get_primitive("matmul")
    a = b.add_node(mm, (x, x), {}, _aval((16, 16))).outputs[0]
    c = b.add_node(bad, (x,), {}, _aval((16, 16))).outputs[0]
    out = b.add_node(get_primitive("add"), (a, c), {}, _aval((16, 16))).outputs[0]
    g = b.finish([out])
    ex = O0Executor(g, n_streams=2)
    with pytest.raises(MinisporeError, match="bad_op"):
        ex.run(np.ones((16, 16), np.float32))
    # the executor is still usable afterwards (no stream left waiting)
    with pytest.raises(MinisporeError, match="bad_op"):
        ex.run(np.ones((16, 16), np.float32))


def test_configuration(monkeypatch):
    monkeypatch.setattr(streams._config, "explicit", False)
    monkeypatch.setenv("MS_DEV_RUNTIME_CONF", "inline:true,multi_stream:true")
    assert streams.streams_in_use() == 2
    monkeypatch.setenv("MS_DEV_RUNTIME_CONF", "multi_stream:3")
    assert streams.streams_in_use() == 3
    monkeypatch.setenv("MS_DEV_RUNTIME_CONF", "multi_stream:group")
    assert streams.streams_in_use() == 1
    monkeypatch.setenv("MS_DEV_RUNTIME_CONF", "multi_stream:lots")
    with pytest.raises(OpValueError, match="MS_DEV_RUNTIME_CONF"):
        streams.streams_in_use()
    monkeypatch.delenv("MS_DEV_RUNTIME_CONF")
    with multi_stream(4):
        assert streams.streams_in_use() == 4
    assert streams.streams_in_use() == 1
    with pytest.raises(OpValueError, match="set_multi_stream"):
        set_multi_stream(0)
    with pytest.raises(OpValueError, match="schedule_streams"):
        schedule_streams(diamond(), 0)


def test_random_ops_keep_their_order_but_are_not_barriers():
    """Two dropout branches beside a matmul: the dropouts stay in program order (one generator),
    the matmul may run beside them; seeded results equal one stream's."""
    b = GraphBuilder("drops")
    x = b.param(_aval((256, 256)))
    drop, mm, add = get_primitive("dropout"), get_primitive("matmul"), get_primitive("add")
    mask = AbstractTensor((256, 256), ms.bool_)
    d1 = b.add_node(drop, (x, 0.5, None), {}, (_aval((256, 256)), mask)).outputs[0]
    m = b.add_node(mm, (x, x), {}, _aval((256, 256))).outputs[0]
    d2 = b.add_node(drop, (x, 0.5, None), {}, (_aval((256, 256)), mask)).outputs[0]
    s1 = b.add_node(add, (d1, d2), {}, _aval((256, 256))).outputs[0]
    out = b.add_node(add, (s1, m), {}, _aval((256, 256))).outputs[0]
    g = b.finish([out])
    sched = schedule_streams(g, 2)
    assert 0 in happens_before(sched)[2]               # the second draw after the first
    assert sched.stream_of[1] != sched.stream_of[0]    # the matmul beside the draws
    xs = np.random.default_rng(0).standard_normal((256, 256)).astype(np.float32)
    ms.set_seed(7)
    with streams.blas_limit(2):                        # the BLAS threads each of 2 streams gets
        want = O0Executor(g).run(xs)[0]
    ms.set_seed(7)
    got = O0Executor(g, n_streams=2).run(xs)[0]
    np.testing.assert_array_equal(got, want)
