"""Graph mode O0 on the device (the KBK executor) equals PyNative on the device."""
import warnings

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
    from minispore.graph.capture import trace
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
