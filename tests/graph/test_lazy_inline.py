"""@lazy_inline: a repeated Cell is captured once and called as a shared CALL subgraph.

Oracle: the same model compiled without lazy_inline (every layer inlined), and PyNative; losses
and every gradient must agree. Structure checks: the callee graphs are shared Graph objects and the
top-level graph grows by a constant number of nodes per layer.
"""
import contextlib

import numpy as np
import pytest

import minispore as ms
from minispore import nn
from minispore.common.errors import OpTypeError, OpValueError
from minispore.graph import CALL, O0Executor
from minispore.graph.lazy_inline import lazy_inline_enabled
from minispore.llm import model as llama_model
from minispore.llm.config import LlamaConfig
from minispore.ops import functional as F


class LazyBlock(llama_model.TransformerBlock):
    @ms.lazy_inline
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)


@contextlib.contextmanager
def lazy_blocks(on=True):
    saved = llama_model.TransformerBlock
    if on:
        llama_model.TransformerBlock = LazyBlock
    try:
        yield
    finally:
        llama_model.TransformerBlock = saved


def llama(n_layers, lazy, seed=0):
    cfg = LlamaConfig(vocab_size=17, dim=16, n_layers=n_layers, n_heads=2, max_seq_len=8, multiple_of=8)
    ms.set_seed(seed)
    with lazy_blocks(lazy):
        return llama_model.Llama(cfg)


def tokens(seed=1):
    rng = np.random.default_rng(seed)
    return (ms.Tensor(rng.integers(0, 17, (2, 8)).astype(np.int32)),
            ms.Tensor(rng.integers(0, 17, (2, 8)).astype(np.int32)))


def train_step(net, **jit_kw):
    gf = ms.value_and_grad(net.loss, None, net.trainable_params())

    def step(x, y):
        return gf(x, y)
    return ms.jit(step, capture_mode="trace", **jit_kw), gf


def calls(graph):
    return [n for n in graph.nodes if n.op is CALL]


def test_training_step_equals_the_inlined_compilation_and_pynative():
    x, y = tokens()
    lazy_jf, lazy_gf = train_step(llama(3, lazy=True))
    flat_jf, _ = train_step(llama(3, lazy=False))
    loss_l, grads_l = lazy_jf(x, y)
    loss_f, grads_f = flat_jf(x, y)
    loss_p, grads_p = lazy_gf(x, y)                     # PyNative: the lazy cell runs as Python
    assert float(loss_l.asnumpy()) == float(loss_f.asnumpy())
    np.testing.assert_allclose(loss_l.asnumpy(), loss_p.asnumpy(), rtol=1e-6)
    assert len(grads_l) == len(grads_f) == len(grads_p)
    for a, b, c in zip(grads_l, grads_f, grads_p):
        np.testing.assert_allclose(a.asnumpy(), b.asnumpy(), rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(a.asnumpy(), c.asnumpy(), rtol=1e-5, atol=1e-6)


def test_one_shared_forward_and_backward_subgraph_for_all_layers():
    x, y = tokens()
    jf, _ = train_step(llama(4, lazy=True))
    g = jf.compile(x, y).graph
    cs = calls(g)
    assert len(cs) == 8                                   # one forward and one backward CALL per layer
    callees = {id(n.attrs["graph"]) for n in cs}
    assert len(callees) == 2                              # ... of the same two graphs
    fwd = cs[0].attrs["graph"]
    # every call passes that layer's own weights (captures of the outer graph)
    weight_sets = [tuple(v.id for v in n.inputs if v.kind == "capture") for n in cs if n.attrs["graph"] is fwd]
    assert len(set(weight_sets)) == 4


def test_top_level_graph_grows_by_a_constant_per_layer():
    x, y = tokens()
    sizes = {}
    for n in (2, 4, 8):
        jf, _ = train_step(llama(n, lazy=True))
        sizes[n] = len(jf.compile(x, y).graph.nodes)
    assert sizes[8] - sizes[4] == 2 * (sizes[4] - sizes[2])
    assert (sizes[4] - sizes[2]) / 2 <= 3                  # CALL(F), CALL(B) and at most one more per layer
    flat, _ = train_step(llama(2, lazy=False))
    assert len(flat.compile(x, y).graph.nodes) > sizes[8]


def test_forward_only_compilation_calls_one_subgraph_per_layer():
    x, _ = tokens()
    net_l, net_f = llama(3, lazy=True), llama(3, lazy=False)
    fl = ms.jit(lambda t: net_l(t), capture_mode="trace")
    ff = ms.jit(lambda t: net_f(t), capture_mode="trace")
    np.testing.assert_array_equal(fl(x).asnumpy(), ff(x).asnumpy())
    g = fl.compile(x).graph
    assert len(calls(g)) == 3 and len({id(n.attrs["graph"]) for n in calls(g)}) == 1


class Scale(nn.Cell):
    """A toy lazy cell: y = tanh(x @ w) * scale (scale is a plain attribute: part of the structure)."""

    @ms.lazy_inline
    def __init__(self, n, scale, seed):
        super().__init__()
        self.scale = scale
        rng = np.random.default_rng(seed)
        self.w = ms.Parameter(ms.Tensor(rng.normal(size=(n, n)).astype(np.float32)), name=f"w{seed}")

    def construct(self, x):
        return F.tanh(F.matmul(x, self.w)) * self.scale


class Stack(nn.Cell):
    def __init__(self, scales):
        super().__init__()
        self.blocks = nn.CellList([Scale(4, s, i) for i, s in enumerate(scales)])

    def construct(self, x):
        for b in self.blocks:
            x = b(x)
        return x


def test_cells_that_differ_in_plain_attributes_get_their_own_subgraph():
    net = Stack([0.5, 0.5, 2.0, 0.5])
    x = ms.Tensor(np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4))
    want = net(x).asnumpy()                               # PyNative
    jf = ms.jit(lambda t: net(t), capture_mode="trace")
    np.testing.assert_allclose(jf(x).asnumpy(), want, rtol=1e-6)
    cs = calls(jf.compile(x).graph)
    assert len(cs) == 4
    assert len({id(n.attrs["graph"]) for n in cs}) == 2   # scale 0.5 (three cells) and scale 2.0


def test_gradients_through_the_toy_stack_match_pynative():
    net = Stack([0.5, 1.5, 0.5])
    x = ms.Tensor(np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4))
    gf = ms.value_and_grad(lambda t: net(t).sum(), 0, net.trainable_params())
    jf = ms.jit(lambda t: gf(t), capture_mode="trace")
    (v1, (gx1, gw1)), (v2, (gx2, gw2)) = jf(x), gf(x)
    np.testing.assert_allclose(v1.asnumpy(), v2.asnumpy(), rtol=1e-6)
    np.testing.assert_allclose(gx1.asnumpy(), gx2.asnumpy(), rtol=1e-5, atol=1e-7)
    for a, b in zip(gw1, gw2):
        np.testing.assert_allclose(a.asnumpy(), b.asnumpy(), rtol=1e-5, atol=1e-7)


def test_policy_front_inlines_after_capture():
    class FrontScale(Scale):
        @ms.lazy_inline(policy="front")
        def __init__(self, n, scale, seed):
            super().__init__(n, scale, seed)

    class FrontStack(Stack):
        def __init__(self):
            nn.Cell.__init__(self)
            self.blocks = nn.CellList([FrontScale(4, 0.5, i) for i in range(3)])

    net = FrontStack()
    x = ms.Tensor(np.ones((2, 4), np.float32))
    jf = ms.jit(lambda t: net(t), capture_mode="trace")
    np.testing.assert_allclose(jf(x).asnumpy(), net(x).asnumpy(), rtol=1e-6)
    g = jf.compile(x).graph
    assert not calls(g) and sum(1 for n in g.nodes if n.op.name == "matmul") == 3


def test_switch_off_and_hooks_fall_back_to_inlining():
    net = Stack([0.5, 0.5])
    x = ms.Tensor(np.ones((2, 4), np.float32))
    with lazy_inline_enabled(False):
        jf = ms.jit(lambda t: net(t), capture_mode="trace")
        assert not calls(jf.compile(x).graph)
    net2 = Stack([0.5, 0.5])
    net2.blocks[0].register_forward_hook(lambda cell, args, out: out * 2)
    jf2 = ms.jit(lambda t: net2(t), capture_mode="trace")
    np.testing.assert_allclose(jf2(x).asnumpy(), net2(x).asnumpy(), rtol=1e-6)
    assert len(calls(jf2.compile(x).graph)) == 1          # the hooked block is inlined, the other shared


def test_arena_execution_of_a_lazy_training_graph():
    x, y = tokens()
    jf, _ = train_step(llama(2, lazy=True))
    g = jf.compile(x, y).graph
    want = O0Executor(g).run(x._data, y._data)
    ex = O0Executor(g, arena=True)
    got = ex.run(x._data, y._data)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
    assert ex.arena.high_water == ex.memory_plan.peak_bytes


def test_bad_input():
    with pytest.raises(OpValueError, match="lazy_inline"):
        ms.lazy_inline(policy="back")
    with pytest.raises(OpTypeError, match="lazy_inline"):
        ms.lazy_inline(attrs=3)
    with pytest.raises(OpTypeError, match="lazy_inline"):
        ms.lazy_inline(lambda self: None)                  # not an __init__

    class NotACell:
        @ms.lazy_inline
        def __init__(self):
            pass
    with pytest.raises(OpTypeError, match="lazy_inline"):
        NotACell()


@pytest.mark.parametrize("capture_mode", ["ast", "bytecode"])
def test_other_capture_modes_keep_the_shared_calls_and_agree(capture_mode):
    """The ast mode's control-flow inlining pass must not expand a lazy layer's CALLs again."""
    x, y = tokens()
    net = llama(3, lazy=True)
    gf = ms.value_and_grad(net.loss, None, net.trainable_params())

    def step(a, b):
        return gf(a, b)
    jf = ms.jit(step, capture_mode=capture_mode)
    entry = jf.compile(x, y)
    flat_jf, _ = train_step(llama(3, lazy=False))
    loss, grads = jf(x, y)
    loss_f, grads_f = flat_jf(x, y)
    if entry.graph is not None and capture_mode == "ast":
        assert len(calls(entry.graph)) == 6          # one forward and one backward CALL per layer
        assert len({id(n.attrs["graph"]) for n in calls(entry.graph)}) == 2
    np.testing.assert_allclose(loss.asnumpy(), loss_f.asnumpy(), rtol=1e-6)
    for a, b in zip(grads, grads_f):
        np.testing.assert_allclose(a.asnumpy(), b.asnumpy(), rtol=1e-5, atol=1e-6)


def test_state_changes_inside_a_lazy_layer_recompile_with_a_precise_reason():
    """jit guards a lazy layer as one unit (layer_state): a change through the Cell API anywhere in
    it is seen, named, and compiled again - and the new graph reflects it."""
    x, y = tokens()
    net = llama(3, lazy=True)
    net.set_train(True)
    jf, gf = train_step(net)
    jf(x, y)
    jf(x, y)
    assert jf.cache().compiles == 1                  # unchanged state: the O(1) guard passes
    net.layers[1].attention.resid_dropout.set_train(False)
    jf(x, y)
    assert jf.cache().compiles == 2
    assert jf.cache().recompile_reasons[-1].endswith(
        "layers.1.attention.resid_dropout.training changed: True -> False")
    # a replaced weight in one layer (a second jitted step, so the reason is about this change only)
    jf2, _ = train_step(net)
    jf2(x, y)
    w = net.layers[2].feed_forward.w2.weight
    net.layers[2].feed_forward.w2.weight = ms.Parameter(ms.Tensor(w.asnumpy() * 0), name=w.name)
    jf2(x, y)
    assert jf2.cache().compiles == 2
    assert jf2.cache().recompile_reasons[-1].endswith("layers.2.feed_forward.w2.weight was replaced by another object")
    net.set_train(False)
    ref_loss, _ = train_step(net)[1](x, y)           # PyNative on the current state
    loss, _ = jf(x, y)
    np.testing.assert_allclose(loss.asnumpy(), ref_loss.asnumpy(), rtol=1e-6)
