"""Graph mode O0 on the device (the KBK executor) equals PyNative on the device, on one ACL stream
and on several (events where values cross streams; an arena plan safe across streams)."""
import numpy as np

import minispore as ms
from minispore.graph.ir import Value
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
    entries = [e for e in _entries(jf)]
    ex = entries[0].executor
    assert isinstance(ex, KBKExecutor)
    memory_check = ex.plan
    assert ex.arena_bytes == max(memory_check.peak_bytes, 512) < memory_check.no_reuse_bytes


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
    launch = ex._multi[2]
    sched = launch.schedule
    add = len(sched.stream_of) - 1
    assert sched.stream_of[0] != sched.stream_of[1]              # the two chains run on different streams
    assert sched.waits[add] == [add - 1]                         # the add waits for the end of chain b, once
    assert ex.events_recorded == ex.events_waited == sched.num_events == 1
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
    assert set(ex._multi) == {2, 3}
    assert all(len(set(ex._multi[n].schedule.stream_of)) > 1 for n in (2, 3))
    assert ex.events_recorded == sum(len({j for w in ex._multi[n].schedule.waits for j in w}) for n in (2, 3))
    assert ex.events_waited == sum(ex._multi[n].schedule.num_events for n in (2, 3))


def _device_order(sched):
    """The oracle for 'finished before' on the device, independent of kbk_streams: a path in the
    graph of stream-order edges (consecutive nodes of one queue) and event edges (awaited -> waiter)."""
    n = len(sched.stream_of)
    succ = [set() for _ in range(n)]
    for q in sched.queues:
        for a, b in zip(q, q[1:]):
            succ[a].add(b)
    for i, ws in enumerate(sched.waits):
        for j in ws:
            succ[j].add(i)
    after = []
    for a in range(n):
        seen, todo = set(), list(succ[a])
        while todo:
            x = todo.pop()
            if x not in seen:
                seen.add(x)
                todo.extend(succ[x])
        after.append(seen)
    return after


def test_multi_stream_arena_reuses_bytes_only_after_every_reader_on_every_stream(on_ascend):
    """For every two tensors that share arena bytes, the later one's producer is ordered ON THE
    DEVICE (stream order + events) after the earlier one's producer and all its readers. The plan
    made from the issue order alone (the scheduler's hold_until) breaks this for this graph: a
    kernel issued later on another stream may run earlier."""
    from minispore.graph.streams import schedule_streams
    from minispore_ascend.kbk import ALIGN, _nbytes
    from minispore_ascend.kbk_streams import plan_for_streams
    r = np.random.default_rng(4)
    args = [ms.Tensor(r.standard_normal(s).astype(np.float32)) for s in ((64, 256), (256, 256), (256, 256), (256, 256))]
    jf = ms.jit(fan, capture_mode="trace")
    jf(*args)
    graph = _executor(jf).graph
    for n in (2, 3):
        sched = schedule_streams(graph, n)
        after = _device_order(sched)
        touch, producer = {}, {}
        for i, node in enumerate(graph.nodes):
            for o in node.outputs:
                producer[o.id] = i
                touch.setdefault(o.id, {i})
            for x in node.inputs:
                if isinstance(x, Value) and x.kind == "node":
                    touch[x.id].add(i)

        def unsafe_pairs(plan):
            bad = []
            ids = list(plan.offsets)
            for p in ids:
                for q in ids:
                    if p == q:
                        continue
                    lo = max(plan.offsets[p], plan.offsets[q])
                    hi = min(plan.offsets[p] + plan.sizes[p], plan.offsets[q] + plan.sizes[q])
                    if lo >= hi:
                        continue                         # no shared bytes
                    first, second = (p, q) if plan.buffer(p).start < plan.buffer(q).start else (q, p)
                    if not all(producer[second] in after[a] for a in touch[first]):
                        bad.append((first, second))
            return bad

        plan = plan_for_streams(graph, sched, _nbytes, ALIGN)
        assert unsafe_pairs(plan) == []
        assert plan.peak_bytes < plan.no_reuse_bytes             # it still reuses memory
        if n == 2:
            order, hold = sched.memory_constraints()
            naive = memory_plan_from_issue_order(graph, order, hold)
            assert unsafe_pairs(naive) != []


def memory_plan_from_issue_order(graph, order, hold):
    """What the CPU's constraints alone give: lifetimes over the issue order, extended by hold_until."""
    from minispore.graph import memory
    from minispore.graph.ir import OPAQUE
    from minispore_ascend.kbk import ALIGN, _nbytes
    pos = {i: k for k, i in enumerate(order)}
    end = {}
    for i, node in enumerate(graph.nodes):
        for x in node.inputs:
            if isinstance(x, Value):
                end[x.id] = max(end.get(x.id, 0), pos[i])
    outs = {o.id for o in graph.outputs if isinstance(o, Value)}
    bufs = []
    for i, node in enumerate(graph.nodes):
        for o in node.outputs:
            if o.aval is OPAQUE:
                continue
            nb = _nbytes(o.aval)
            e = len(order) - 1 if o.id in outs else max(end.get(o.id, pos[i]), hold.get(o.id, 0), pos[i])
            bufs.append(memory.Buffer(o.id, nb, max(memory.align(nb, ALIGN), ALIGN), pos[i], e))
    return memory.plan_buffers(bufs, n_steps=len(order))
