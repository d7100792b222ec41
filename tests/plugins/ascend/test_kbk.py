"""Graph mode O0 on the device (the KBK executor) equals PyNative on the device, on one ACL stream
and on several (events where values cross streams). The plans themselves - the arena layout safe
across streams included - are the core's: test_device_plan.py."""
import numpy as np

import minispore as ms
from minispore import ops
from minispore_ascend.kbk import KBKExecutor


def mlp(x, w1, w2, g):
    h = ops.silu(ops.matmul(x, w1))
    h = h * g
    s = ops.softmax(ops.matmul(h, w2), -1)
    return ops.sum(ops.transpose(s, (1, 0)) * 2.0 + 1.0, 1), ops.reshape(s, (-1,))


def test_graph_o0_on_device_equals_pynative_on_device(on_ascend):
    r = np.random.default_rng(0)
    args = [ms.Tensor(r.standard_normal(s).astype(np.float32)) for s in ((4, 8), (8, 16), (16, 5))]
    args.append(ms.Tensor(np.ones(16, np.float32)))
    eager = [t.asnumpy() for t in mlp(*args)]
    jf = ms.jit(mlp, capture_mode="trace")
    launches = on_ascend.launches
    graph_out = [t.asnumpy() for t in jf(*args)]
    assert on_ascend.launches > launches
    for a, b in zip(graph_out, eager):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    assert all(isinstance(e.executor, KBKExecutor) for e in _entries(jf)) and _entries(jf)


def test_kbk_arena_is_one_allocation_laid_out_by_the_plan(ascend):
    r = np.random.default_rng(1)
    x = r.standard_normal((6, 6)).astype(np.float32)

    def f(x):
        a = ops.exp(x)
        b = ops.mul(a, a)          # a dies after this: its bytes can be reused
        c = ops.add(b, 1.0)
        return ops.matmul(c, c)

    ms.set_context(device_target="Ascend")
    try:
        jf = ms.jit(f, capture_mode="trace")
        out = jf(ms.Tensor(x)).asnumpy()
    finally:
        ms.set_context(device_target="CPU")
    c = np.exp(x) ** 2 + 1
    np.testing.assert_allclose(out, c @ c, rtol=1e-5)
    (entry,) = _entries(jf)
    ex = entry.executor
    assert isinstance(ex, KBKExecutor)
    plan = ex.plan                                   # the core's DevicePlan: the executor only binds it
    arena = [b for b in plan.buffers if b.region == "arena"]
    assert len(arena) == 4 and ex.launches_per_run == 4
    assert ex.arena_bytes == plan.arena_bytes == max(max(b.offset + b.size for b in arena), 512)
    assert plan.arena_bytes < plan.no_reuse_bytes    # exp(x)'s bytes are reused after mul read it


def _entries(jf):
    cache = jf.cache()
    for attr in ("entries", "_entries"):
        got = getattr(cache, attr, None)
        if got is not None:
            vals = got.values() if isinstance(got, dict) else got
            out = []
            for v in vals:
                out.extend(v if isinstance(v, (list, tuple)) else [v])
            return out
    return []


# -- several ACL streams ------------------------------------------------------------------------------------

def branches(x, w, y, v):
    """Two matmul chains joined by an add. Branch a is ONE big matmul (long by the scheduler's cost
    model, one launch); branch b is a small matmul and eight cheap kernels (short by the model, nine
    launches). The scheduler puts b on its own stream and the add after a, so the add's stream must
    wait for b's - and with 30 ms per launch, b finishes ~200 ms after the add would otherwise run."""
    a = ops.matmul(x, w)
    b = ops.matmul(y, v)
    for _ in range(4):
        b = ops.exp(ops.mul(b, 0.01))
    return ops.add(a, b)


def _branch_args():
    r = np.random.default_rng(2)
    return [ms.Tensor(r.standard_normal(s).astype(np.float32) * k)
            for s, k in (((64, 512), 1.0), ((512, 64), 0.05), ((64, 8), 1.0), ((8, 64), 1.0))]


def _branch_oracle(args):
    x, w, y, v = (t.asnumpy().astype(np.float64) for t in args)
    b = y @ v
    for _ in range(4):
        b = np.exp(b * 0.01)
    return x @ w + b


def _executor(jf):
    (entry,) = _entries(jf)
    return entry.executor


def test_kbk_on_two_streams_equals_one_stream_and_pynative(on_ascend, slow_launches):
    from minispore.graph.streams import multi_stream
    args = _branch_args()
    eager = branches(*args).asnumpy()
    jf = ms.jit(branches, capture_mode="trace")
    one = jf(*args).asnumpy()
    with multi_stream(2):
        two = jf(*args).asnumpy()
    ex = _executor(jf)
    plan = ex.plans[2]
    by_node = {launch.node: launch for launch in plan.launches}
    add = len(plan.launches) - 1
    assert by_node[0].stream != by_node[1].stream                # the two chains run on different streams
    assert [plan.launches[j].node for j in by_node[add].waits] == [add - 1]   # the add waits for chain b, once
    assert ex.events_recorded == ex.events_waited == plan.num_events == 1
    np.testing.assert_array_equal(two, one)
    np.testing.assert_allclose(two, eager, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(two, _branch_oracle(args), rtol=1e-4, atol=1e-5)
    with multi_stream(2):                                        # a second run reuses streams, events, arena
        np.testing.assert_array_equal(jf(*args).asnumpy(), one)
    assert ex.events_recorded == ex.events_waited == 2


def test_dropping_the_stream_waits_gives_wrong_results(on_ascend, slow_launches, monkeypatch):
    """Fault injection: with the waits skipped (events still recorded) the add runs ~60 ms into the
    run, while chain b's last kernel lands after ~270 ms: the add reads b's buffer before it is
    written. The same run with the waits is right - so the events are what makes it right."""
    from minispore.graph.streams import multi_stream
    args = _branch_args()
    expected = _branch_oracle(args)
    jf = ms.jit(branches, capture_mode="trace")
    monkeypatch.setenv("MINISPORE_ASCEND_UNSAFE_SKIP_WAITS", "1")
    with multi_stream(2):
        bad = jf(*args).asnumpy()
    ex = _executor(jf)
    assert (ex.events_recorded, ex.events_waited) == (1, 0)
    assert not np.allclose(bad, expected, rtol=1e-3, atol=1e-3)
    monkeypatch.delenv("MINISPORE_ASCEND_UNSAFE_SKIP_WAITS")
    with multi_stream(2):
        good = jf(*args).asnumpy()
    assert (ex.events_recorded, ex.events_waited) == (2, 1)
    np.testing.assert_allclose(good, expected, rtol=1e-4, atol=1e-5)


def fan(x, w1, w2, w3):
    """Three branches read x (a value produced on one stream, read on the others) and keep going
    after the fork; pairwise joins at the end."""
    h = ops.exp(ops.mul(x, 0.1))
    a = ops.silu(ops.matmul(h, w1))
    b = ops.softmax(ops.matmul(h, w2), -1)
    c = ops.exp(ops.mul(ops.matmul(h, w3), 0.1))
    a = ops.matmul(a, w1)
    return ops.add(ops.add(a, b), c), ops.mul(b, c)


def test_kbk_streams_follow_ms_dev_runtime_conf(on_ascend, monkeypatch):
    r = np.random.default_rng(3)
    args = [ms.Tensor(r.standard_normal(s).astype(np.float32)) for s in ((64, 256), (256, 256), (256, 256), (256, 256))]
    eager = [t.asnumpy() for t in fan(*args)]
    jf = ms.jit(fan, capture_mode="trace")
    one = [t.asnumpy() for t in jf(*args)]
    for n in (2, 3):
        monkeypatch.setenv("MS_DEV_RUNTIME_CONF", f"multi_stream:{n}")
        got = [t.asnumpy() for t in jf(*args)]
        for g, o, e in zip(got, one, eager):
            np.testing.assert_array_equal(g, o)
            np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)
    ex = _executor(jf)
    assert set(ex.plans) == {1, 2, 3}
    assert all(len({launch.stream for launch in ex.plans[n].launches}) > 1 for n in (2, 3))
    assert ex.events_recorded == sum(sum(launch.signals for launch in ex.plans[n].launches) for n in (2, 3))
    assert ex.events_waited == sum(ex.plans[n].num_events for n in (2, 3))
