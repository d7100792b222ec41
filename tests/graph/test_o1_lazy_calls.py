"""O1 on lazy_inline graphs: the shared callees are fused once and the top level is not rebuilt.

The O1 executor plans `FusionResult.exec_graph`: the input graph with only its fused groups (and
their readers) replaced, whose Call nodes still name the original callee, run as the fused one
(`exec_subgraphs`). `FusionResult.graph` - the fused graph proper, with Call nodes naming the fused
callees - is built when first read. Oracles: O0 and PyNative (losses and every gradient), the
fused graph's own kernels (the plan must run exactly the nodes of `graph`), and `verify`.
"""
import numpy as np
import pytest

import minispore as ms
from minispore import nn
from minispore.graph import CALL, IF, O0Executor, verify
from minispore.graph.codegen import build as B
from minispore.graph.run import O1Executor
from minispore.graph.passes.fusion import FusedPrimitive
from minispore.graph.printer import format_graph
from minispore.llm import model as llama_model
from minispore.llm.config import LlamaConfig
from minispore.ops import functional as F

pytestmark = [pytest.mark.usefixtures("kernel_cache"),          # tests/graph/conftest.py
              pytest.mark.skipif(B.find_compiler() is None, reason="no C compiler")]


class LazyBlock(llama_model.TransformerBlock):
    @ms.lazy_inline
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)


def llama(n_layers, seed=0):
    """A small LLaMA whose blocks are lazy_inline (captured once, called per layer)."""
    cfg = LlamaConfig(vocab_size=17, dim=16, n_layers=n_layers, n_heads=2, max_seq_len=8, multiple_of=8)
    ms.set_seed(seed)
    saved, llama_model.TransformerBlock = llama_model.TransformerBlock, LazyBlock
    try:
        return llama_model.Llama(cfg)
    finally:
        llama_model.TransformerBlock = saved


def tokens(seed=1):
    rng = np.random.default_rng(seed)
    return (ms.Tensor(rng.integers(0, 17, (2, 8)).astype(np.int32)),
            ms.Tensor(rng.integers(0, 17, (2, 8)).astype(np.int32)))


def train_step(net, jit_level):
    gf = ms.value_and_grad(net.loss, None, net.trainable_params())

    def step(x, y):
        return gf(x, y)
    return ms.jit(step, capture_mode="trace", jit_level=jit_level), gf


def fused_count(graph):
    return sum(isinstance(n.op, FusedPrimitive) for n in graph.nodes)


def call_steps(ex):
    return [s for s in ex.plan.steps if s.node.op is CALL]


def assert_close_lists(got, want, rtol=1e-5, atol=1e-6):
    assert len(got) == len(want)
    for a, b in zip(got, want):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=atol)


def flat(out):
    loss, grads = out
    return [loss.asnumpy()] + [g.asnumpy() for g in grads]


# -- a lazy LLaMA training step ----------------------------------------------------------------------------
def test_lazy_llama_training_step_at_o1_equals_o0_and_pynative():
    x, y = tokens()
    net = llama(3)
    o1, gf = train_step(net, jit_level="O1")
    o0, _ = train_step(net, jit_level="O0")
    got, ref, eager = flat(o1(x, y)), flat(o0(x, y)), flat(gf(x, y))
    assert len(got) == 1 + len(net.trainable_params())
    assert_close_lists(got, ref)
    assert_close_lists(got, eager)


def test_the_calls_run_the_fused_callees_and_the_top_level_is_not_rebuilt():
    x, y = tokens()
    jf, _ = train_step(llama(4, ), jit_level="O1")
    ex = jf.compile(x, y).executor
    assert isinstance(ex, O1Executor)
    src, fusion = ex.source_graph, ex.fusion
    # this model's top level has no fusion group: the executor plans the captured graph's own nodes,
    # every Call node among them. (Changed with transpose folding, passes/transpose_folding.py, which
    # O1 runs first: it was `exec_graph is src`; now the tied head's weight gradient
    # `transpose(h^T @ dy)` becomes `dy^T @ h` - a new product, its operand's transpose, and the add
    # of the two weight gradients reading it - and the rest of the top level is shared.)
    assert fused_count(fusion.exec_graph) == 0
    src_nodes = {id(n) for n in src.nodes}
    assert sorted(n.op.name for n in fusion.exec_graph.nodes if id(n) not in src_nodes) == ["add", "matmul",
                                                                                            "transpose"]
    assert all(id(n) in src_nodes for n in fusion.exec_graph.nodes if n.op is CALL)
    steps = call_steps(ex)
    assert len(steps) == 8                                   # CALL(F) and CALL(B) per layer
    callees = {id(s.node.attrs["graph"]) for s in steps}
    assert len(callees) == 2
    runs = {id(s.sub) for s in steps}
    assert len(runs) == 2                                    # one executor per shared callee
    for s in steps:
        original = s.node.attrs["graph"]
        fused = fusion.exec_subgraphs[id(original)]
        assert s.sub.graph is fused                          # ... running the fused callee
        assert fused.notes["fused_from"] is original
        assert fused_count(fused) > 0 and fused_count(original) == 0
        assert len(fused.nodes) < len(original.nodes)


def test_the_fused_graph_names_the_fused_callees_and_matches_the_plan():
    x, y = tokens()
    jf, _ = train_step(llama(2, ), jit_level="O1")
    ex = jf.compile(x, y).executor
    full, plan = ex.graph, ex.fusion.exec_graph
    assert full is ex.fusion.graph and full is not plan
    verify(full)
    verify(plan)
    assert len(full.nodes) == len(plan.nodes) == len(ex.plan.steps)
    for a, b in zip(full.nodes, plan.nodes):                 # the same kernels, in the same order
        assert a.op is b.op
        if a.op is CALL:
            assert a.attrs["graph"] is ex.fusion.exec_subgraphs[id(b.attrs["graph"])]
    text = format_graph(full)                                # the IR dump shows the callees' groups
    assert "fused_" in text and "@LazyBlock_lazy_forward" in text
    # the fused graph runs on its own (O0 plan of it) with the same results as the executor
    args = (x._data, y._data)
    assert_close_lists(O0Executor(full).run(*args), ex.run(*args), rtol=0, atol=0)


def test_arena_record_live_and_multi_stream_o1_agree():
    x, y = tokens()
    jf, _ = train_step(llama(2, ), jit_level="O0")
    g = jf.compile(x, y).graph
    args = (x._data, y._data)
    want = O1Executor(g).run(*args)
    arena = O1Executor(g, arena=True)
    assert arena.plan.graph is arena.graph                   # arena plans the fused graph itself
    assert_close_lists(arena.run(*args), want, rtol=0, atol=0)
    assert arena.arena.high_water == arena.memory_plan.peak_bytes
    live = O1Executor(g, record_live=True)
    assert_close_lists(live.run(*args), want, rtol=0, atol=0)
    graph_ids = {v.id for n in live.graph.nodes for v in n.outputs}
    assert live.live_trace and all(ids <= graph_ids | {v.id for v in live.graph.params}
                                   | {v.id for v, _ in live.graph.captures} for ids in live.live_trace)
    streams = O1Executor(g, arena=False, n_streams=2)
    assert_close_lists(streams.run(*args), want, rtol=0, atol=0)
    assert streams.schedule().graph is streams.graph


# -- an outer elementwise chain around the Calls ---------------------------------------------------------------
class Block(nn.Cell):
    @ms.lazy_inline
    def __init__(self, n, seed):
        super().__init__()
        rng = np.random.default_rng(seed)
        self.w = ms.Parameter(ms.Tensor(rng.normal(size=(n, n)).astype(np.float32) / 2), name=f"w{seed}")

    def construct(self, x):
        return F.tanh(F.matmul(x, self.w)) * 0.5 + x


class Net(nn.Cell):
    def __init__(self, n_blocks, lead=True):
        super().__init__()
        self.blocks = nn.CellList([Block(8, i) for i in range(n_blocks)])
        self.lead = lead

    def construct(self, x):
        h = F.exp(x * 0.5 + 1.0) - x if self.lead else x * 0.5     # fusible before the calls ...
        for b in self.blocks:
            h = b(h)
        return F.sigmoid(h * h + 0.25) * 3.0                  # ... and after


def test_an_outer_chain_around_the_calls_is_still_fused():
    net = Net(3)
    x = ms.Tensor(np.linspace(-1, 1, 32, dtype=np.float32).reshape(4, 8))
    gf = ms.value_and_grad(lambda t: net(t).sum(), 0, net.trainable_params())
    eager = gf(x)
    outs = {}
    for level in ("O0", "O1"):
        jf = ms.jit(lambda t: gf(t), capture_mode="trace", jit_level=level)
        v, (gx, gw) = jf(x)
        outs[level] = [v.asnumpy(), gx.asnumpy()] + [w.asnumpy() for w in gw]
        if level == "O1":
            ex = jf.compile(x).executor
    v, (gx, gw) = eager
    want = [v.asnumpy(), gx.asnumpy()] + [w.asnumpy() for w in gw]
    assert_close_lists(outs["O1"], outs["O0"])
    assert_close_lists(outs["O1"], want)

    plan, full = ex.fusion.exec_graph, ex.graph
    assert fused_count(plan) >= 2 and fused_count(full) == fused_count(plan)
    members = [n.op.members for n in plan.nodes if isinstance(n.op, FusedPrimitive)]
    assert any("exp" in m and "sub" in m for m in members), members
    assert any("sigmoid" in m for m in members), members
    verify(plan)
    verify(full)
    # the Calls read the fused chain's value, so the plan has new Call nodes - naming the original
    # callees, run as the fused ones
    plan_calls = [n for n in plan.nodes if n.op is CALL]
    assert len(plan_calls) == 6
    assert all(id(n.attrs["graph"]) in ex.fusion.exec_subgraphs for n in plan_calls)
    for s in call_steps(ex):
        assert s.sub.graph is ex.fusion.exec_subgraphs[id(s.node.attrs["graph"])]


def test_nodes_before_the_first_group_are_shared_with_the_captured_graph():
    net = Net(3, lead=False)
    x = ms.Tensor(np.linspace(-1, 1, 32, dtype=np.float32).reshape(4, 8))
    jf = ms.jit(lambda t: net(t), capture_mode="trace", jit_level="O1")
    np.testing.assert_allclose(jf(x).asnumpy(), net(x).asnumpy(), rtol=1e-5, atol=1e-6)
    ex = jf.compile(x).executor
    src, plan = ex.source_graph, ex.fusion.exec_graph
    assert fused_count(plan) == 1 and plan is not src
    verify(plan)
    shared = {id(n) for n in src.nodes}
    calls = [n for n in plan.nodes if n.op is CALL]
    assert len(calls) == 3 and all(id(n) in shared for n in calls)          # kept as captured
    assert not any(id(n) in shared for n in ex.graph.nodes if n.op is CALL)  # (the fused graph's: new)


# -- If subgraphs too ------------------------------------------------------------------------------------------
def test_if_branches_run_fused():
    def f(x):
        if x.sum() > 0:
            y = F.exp(x * 2.0 + 1.0) * x
        else:
            y = F.sin(x - 1.0) * 3.0 + x
        return y * 2.0

    for v in ([0.5, 1.0, -0.25], [-1.0, -2.0, 0.5]):
        x = ms.Tensor(np.array(v, dtype=np.float32))
        o1 = ms.jit(f, capture_mode="ast", jit_level="O1")
        o0 = ms.jit(f, capture_mode="ast", jit_level="O0")
        np.testing.assert_allclose(o1(x).asnumpy(), o0(x).asnumpy(), rtol=1e-6)
        np.testing.assert_allclose(o1(x).asnumpy(), f(x).asnumpy(), rtol=1e-6)
    ex = o1.compile(x).executor
    ifs = [s for s in ex.plan.steps if s.node.op is IF]
    if not ifs:
        pytest.skip("the If was inlined by the capture")
    then_x, else_x = ifs[0].sub
    assert then_x.graph is ex.fusion.exec_subgraphs[id(ifs[0].node.attrs["then_graph"])]
    assert fused_count(then_x.graph) == 1 and fused_count(else_x.graph) == 1
