"""Whole-graph sink (jit_level O2): one generated function per graph gives the same numbers as O0
and PyNative - on an MLP training step with the optimizer inside (a host call), on the tiny
LLaMA's loss and gradients, on control flow (If/While/Call get generated control flow), inside
a memory-planned arena - and reports kernel errors like O0 does.

Oracles: PyNative (eager NumPy kernels) and the O0 executor on the same captured graph. Fused
kernels round like NumPy except transcendental functions (a few ulp), hence the 1e-6 relative
tolerance where fusion is on.
"""

import numpy as np
import pytest

import minispore as ms
from minispore import nn, ops
from minispore.common.errors import MinisporeError, MinisporeRuntimeError
from minispore.graph.codegen import build as B
from minispore.graph.ir import CALL, IF, WHILE, GraphBuilder, Value
from minispore.graph.run import O0Executor, O1Executor, O2Executor
from minispore.graph.passes.fusion import FusedPrimitive, fuse
from minispore.graph.verify import verify
from minispore.ops.primitive import get_primitive


pytestmark = pytest.mark.usefixtures("kernel_cache")     # tests/graph/conftest.py


needs_cc = pytest.mark.skipif(B.find_compiler() is None, reason="no C compiler")


def rel_err(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.max(np.abs(a - b), initial=0.0) / max(np.max(np.abs(b), initial=0.0), 1e-30))


def T32(*shape, seed=0, scale=1.0):
    return ms.Tensor((np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32))


# -- an MLP training step, optimizer included ---------------------------------------------------------
def make_mlp_step(jit_level=None):
    ms.set_seed(0)
    net = nn.SequentialCell(nn.Dense(6, 16), nn.GELU(approximate=True), nn.Dense(16, 16), nn.Tanh(),
                            nn.Dense(16, 3))
    opt = nn.Adam(net.trainable_params(), learning_rate=1e-2)

    def loss_fn(x, y):
        return ops.mean(ops.square(net(x) - y))

    grad_fn = ms.value_and_grad(loss_fn, None, opt.parameters)

    def step(x, y):
        loss, grads = grad_fn(x, y)
        opt(grads)                       # in a graph: a host call, in program order
        return loss

    if jit_level is not None:
        step = ms.jit(step, capture_mode="trace", jit_level=jit_level)
    return net, step


@needs_cc
def test_mlp_training_step_is_the_same_at_every_level():
    x, y = T32(8, 6, seed=1), T32(8, 3, seed=2)
    runs = {}
    for level in (None, "O0", "O1", "O2"):
        net, step = make_mlp_step(level)
        losses = [float(step(x, y).asnumpy()) for _ in range(4)]
        runs[level] = (losses, [p.asnumpy().copy() for p in net.trainable_params()])
    ref_losses, ref_params = runs[None]
    assert ref_losses[-1] < ref_losses[0]                   # it trains
    for level in ("O0", "O1", "O2"):
        losses, params = runs[level]
        tol = 0.0 if level == "O0" else 1e-6
        for a, b in zip(losses, ref_losses):
            assert abs(a - b) <= tol * abs(b) + 1e-12, (level, losses, ref_losses)
        for p, q in zip(params, ref_params):
            # weights after Adam steps: a few float32 ulps apart even at O0 (the update divides by
            # sqrt(v): a mostly cancelled gradient's last bit reaches the weight); losses stay exact
            assert rel_err(p, q) <= max(tol, 5e-7), level
    _, step = make_mlp_step("O2")
    ex = step.compile(x, y).executor
    assert isinstance(ex, O2Executor)
    assert "HostCall" not in ex.source and "_h" in ex.source          # the optimizer: a direct call
    assert any(isinstance(n.op, FusedPrimitive) for n in ex.graph.nodes)


# -- the tiny LLaMA ----------------------------------------------------------------------------------
def _tiny_llama():
    from minispore.llm import Llama, LlamaConfig
    cfg = LlamaConfig(vocab_size=11, dim=16, n_layers=2, n_heads=4, n_kv_heads=2, max_seq_len=8, dropout=0.0,
                      multiple_of=8, tie_embeddings=False)
    ms.set_seed(0)
    return cfg, Llama(cfg)


@needs_cc
def test_tiny_llama_loss_and_gradients_at_every_level():
    pytest.importorskip("minispore.llm")
    cfg, model = _tiny_llama()
    rng = np.random.default_rng(0)
    x = ms.Tensor(rng.integers(0, cfg.vocab_size, (2, 8)).astype(np.int64))
    y = ms.Tensor(rng.integers(0, cfg.vocab_size, (2, 8)).astype(np.int64))
    params = model.trainable_params()
    grad_fn = ms.value_and_grad(model.loss, None, params)
    ref_loss, ref_grads = grad_fn(x, y)
    for level in ("O0", "O1", "O2"):
        jf = ms.jit(grad_fn, capture_mode="trace", jit_level=level)
        loss, grads = jf(x, y)
        assert rel_err(loss.asnumpy(), ref_loss.asnumpy()) <= 1e-6, level
        for g, rg, p in zip(grads, ref_grads, params):
            assert rel_err(g.asnumpy(), rg.asnumpy()) <= 2e-6, (level, p.name)
    # the O2 graph without the arena (values as Python locals) gives the same numbers
    heap = O2Executor(jf.compile(x, y).graph, arena=False).run(x._data, y._data)
    assert rel_err(heap[0], ref_loss.asnumpy()) <= 1e-6
    for g, rg in zip(heap[1:], ref_grads):
        assert rel_err(g, rg.asnumpy()) <= 2e-6


# -- control flow gets generated control flow -----------------------------------------------------------
F32 = ms.float32


def _node(b, name, *inputs, **attrs):
    prim = get_primitive(name)
    avals = prim.infer(*[x.aval if isinstance(x, Value) else x for x in inputs], **attrs)
    return b.add_node(prim, list(inputs), attrs, avals).outputs[0]


def _aval(shape, dtype=F32):
    from minispore.ops.primitive import AbstractTensor
    return AbstractTensor(shape, dtype)


def control_flow_graph():
    """main(x: f32[4,6], c: f32[]):
         t = If(c > 0, x): then exp(x*2)+1, else tanh(x-1)*3
         (u, i) = While(t, 0.0): cond i < 3; body (u*0.5 + 0.125, i + 1)
         return Call(sig)(u, x) where sig(a, b) = sigmoid(a*b + 1), and i"""
    def sub(name, n_in, body):
        b = GraphBuilder(name)
        ps = [b.param(a) for a in n_in]
        return b.finish(body(b, *ps))

    x_aval, s_aval = _aval((4, 6)), _aval(())
    then_g = sub("then", [x_aval], lambda b, x: [_node(b, "add", _node(b, "exp", _node(b, "mul", x, 2.0)), 1.0)])
    else_g = sub("else", [x_aval], lambda b, x: [_node(b, "mul", _node(b, "tanh", _node(b, "sub", x, 1.0)), 3.0)])
    cond_g = sub("cond", [x_aval, s_aval], lambda b, u, i: [_node(b, "less", i, 3.0)])
    body_g = sub("body", [x_aval, s_aval], lambda b, u, i: [_node(b, "add", _node(b, "mul", u, 0.5), 0.125),
                                                            _node(b, "add", i, 1.0)])
    callee = sub("sig", [x_aval, x_aval],
                 lambda b, a, c: [_node(b, "sigmoid", _node(b, "add", _node(b, "mul", a, c), 1.0))])
    b = GraphBuilder("main")
    x, c = b.param(x_aval), b.param(s_aval)
    cond = _node(b, "greater", c, 0.0)
    t = b.add_structural(IF, [cond, x], {"then_graph": then_g, "else_graph": else_g}, [x_aval]).outputs[0]
    zero = _node(b, "mul", c, 0.0)
    u, i = b.add_structural(WHILE, [t, zero], {"cond_graph": cond_g, "body_graph": body_g}, [x_aval, s_aval]).outputs
    out = b.add_structural(CALL, [u, x], {"graph": callee}, [x_aval]).outputs[0]
    g = b.finish([out, i])
    verify(g)
    return g


def _inputs(c):
    return [T32(4, 6, seed=3)._data, np.array(1.0 if c else -1.0, np.float32)]


@needs_cc
def test_control_flow_subgraphs_are_fused_and_sunk():
    g = control_flow_graph()
    r = fuse(g)
    verify(r.graph)
    inner = [n for sub in r.graph.all_graphs()[1:] for n in sub.nodes if isinstance(n.op, FusedPrimitive)]
    assert len(inner) >= 3                                 # then, else, body, callee chains
    for ex in (O2Executor(g), O2Executor(g, arena=False)):
        assert "if _truth(" in ex.source and "while _truth(" in ex.source
        for c in (True, False):
            want = O0Executor(g).run(*_inputs(c))
            got = ex.run(*_inputs(c))
            assert float(got[1]) == 3.0
            assert rel_err(got[0], want[0]) <= 1e-6
            np.testing.assert_allclose(O1Executor(g).run(*_inputs(c))[0], want[0], rtol=1e-6)


def test_captures_are_reread_after_a_host_call_that_rebinds_them():
    """A host call may give a Parameter new storage (set_data): kernels after it must read the new
    data - including fused kernels, whose pointers O2 takes once per run."""
    p = ms.Parameter(T32(3, 4, seed=7), name="p")
    new = T32(3, 4, seed=8)

    def rebind(x):
        p.set_data(new)
        return 0

    b = GraphBuilder("main")
    x = b.param(_aval((3, 4)))
    pv = b.capture(p)
    before = _node(b, "add", _node(b, "exp", _node(b, "mul", pv, 0.5)), x)
    from minispore.graph.ir import HOST_CALL, OPAQUE, Slot
    b.add_structural(HOST_CALL, [x], {"fn": rebind, "template": ((Slot(0),), {}), "name": "rebind"}, [OPAQUE])
    after = _node(b, "add", _node(b, "exp", _node(b, "mul", pv, 0.5)), x)
    g = b.finish([before, after])
    verify(g)
    xs = T32(3, 4, seed=9)._data
    old = p.asnumpy().copy()
    for ex in (O2Executor(g), O2Executor(g, arena=False)):
        p.set_data(ms.Tensor(old))
        got = ex.run(xs)
        np.testing.assert_allclose(got[0], np.exp(old * 0.5) + xs, rtol=1e-6)
        np.testing.assert_allclose(got[1], np.exp(new.asnumpy() * 0.5) + xs, rtol=1e-6)


# -- the generated function ------------------------------------------------------------------------------
def chain(a, b):
    for _ in range(100):
        a = a * b
        a = a + b
    return ops.matmul(a, b) * 0.5, a


@needs_cc
def test_dispatch_bound_chain_is_one_kernel_and_matches_pynative():
    a, b = T32(8, 8, seed=1, scale=0.1), T32(8, 8, seed=2, scale=0.1)
    want = chain(a, b)
    f = ms.jit(chain, capture_mode="trace", jit_level="O2")
    got = f(a, b)
    for w, o in zip(want, got):
        assert rel_err(o.asnumpy(), w.asnumpy()) <= 1e-6
    ex = f.compile(a, b).executor
    kinds = [n.op.name.split("{")[0] for n in ex.graph.nodes]
    assert kinds == ["fused_elementwise_0", "matmul", "mul"]
    body = ex.source
    assert body.count("# fused_elementwise_0") == 1 and "for " not in body      # no interpreter loop
    assert ex.run is ex._fn                                                  # one call per step


def test_o2_without_fusion_runs_every_kernel_in_order(monkeypatch):
    monkeypatch.setenv("MINISPORE_FUSION", "0")
    a, b = T32(3, 3, seed=1, scale=0.1), T32(3, 3, seed=2, scale=0.1)
    g = ms.jit(chain, capture_mode="trace").compile(a, b).graph
    ex = O2Executor(g)
    assert ex.source.count("# mul") == 101 and ex.source.count("# add") == 100
    for w, o in zip(O0Executor(g).run(a._data, b._data), ex.run(a._data, b._data)):
        np.testing.assert_array_equal(o, w)


@needs_cc
def test_arena_mode_writes_into_planned_buffers_and_copies_outputs_out():
    def f(x, w):
        h = ops.tanh(ops.matmul(x, w) * 0.5 + 1.0)
        return ops.exp(h - 1.0) * 2.0, ops.reduce_sum(h * h, -1, keep_dims=True)

    x, w = T32(16, 8, seed=1), T32(8, 8, seed=2)
    g = ms.jit(f, capture_mode="trace").compile(x, w).graph
    ex = O2Executor(g)                                      # the default: pre-planned buffers
    assert ex.memory_plan is not None and ex.arena is not None
    want = O0Executor(g).run(x._data, w._data)
    first = ex.run(x._data, w._data)
    second = ex.run((x * 2.0)._data, w._data)              # reuses the arena: first results untouched
    for a, b in zip(first, want):
        assert rel_err(a, b) <= 1e-6
    assert not np.shares_memory(first[0], second[0])
    assert ex.arena.high_water <= ex.memory_plan.peak_bytes
    assert "_b_v" in ex.source and "_p_v" in ex.source        # planned buffers and their pointers
    assert "_into0(_b_v0" in ex.source                      # matmul writes into its buffer (its `into` fact)
    heap = O2Executor(g, arena=False)
    assert heap.memory_plan is None and "_b_v" not in heap.source
    for a, b in zip(heap.run(x._data, w._data), want):
        assert rel_err(a, b) <= 1e-6


def test_kernel_errors_name_the_op_and_the_source_line(monkeypatch):
    monkeypatch.setenv("MINISPORE_FUSION", "0")

    def f(x, i):
        return ops.gather(x, i, 0) * 2.0

    x = T32(4, 3)
    i = ms.Tensor(np.array([0, 1], np.int64))
    g = ms.jit(f, capture_mode="trace").compile(x, i).graph
    bad = np.array([0, 9], np.int64)                        # out of range: fails only at run time
    with pytest.raises(MinisporeError) as e0:
        O0Executor(g).run(x._data, bad)
    with pytest.raises(MinisporeError) as e2:
        O2Executor(g).run(x._data, bad)
    assert type(e2.value) is type(e0.value)
    assert "gather" in str(e2.value) and "test_o2.py" in str(e2.value)
    with pytest.raises(MinisporeRuntimeError, match="takes 2 inputs, got 1"):
        O2Executor(g).run(x._data)
