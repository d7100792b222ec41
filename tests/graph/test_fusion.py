"""Operator fusion (jit_level O1): fused kernels equal the unfused graph, groups form where they
should and never where they must not, the IR dump shows them, and every fallback works (no
compiler, a kernel that does not compile, a corrupted or unwritable cache).

Oracle: the same captured graph run unfused by the O0 executor (NumPy kernels), and float64
NumPy formulas written here. "Relative" error is max|fused - unfused| / max|unfused| per output.
Kernels are compiled once per test session into a temporary cache directory (few modules: each
test puts all its cases into one graph).
"""
import os
import warnings

import numpy as np
import pytest

import minispore as ms
from minispore import nn, ops
from minispore.common.errors import MinisporeRuntimeError
from minispore.graph.codegen import build as B
from minispore.graph.run import O0Executor, O1Executor
from minispore.graph.passes import fusion
from minispore.graph.passes.fusion import FusedPrimitive, fuse
from minispore.graph.printer import format_graph
from minispore.graph.verify import verify
from minispore.ops.c_expr import FusionRule
from minispore.ops.primitive import get_primitive


pytestmark = pytest.mark.usefixtures("kernel_cache")     # tests/graph/conftest.py


needs_cc = pytest.mark.skipif(B.find_compiler() is None, reason="no C compiler")


def capture(fn, *args):
    return ms.jit(fn, capture_mode="trace").compile(*args).graph


def arrays(*tensors):
    return [t._data for t in tensors]


def rel_err(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    scale = np.max(np.abs(b[np.isfinite(b)]), initial=0.0)
    both_nan = np.isnan(a) & np.isnan(b)
    same_inf = np.isinf(a) & (a == b)
    with np.errstate(invalid="ignore"):
        diff = np.where(both_nan | same_inf, 0.0, np.abs(a - b))
    return float(np.max(diff, initial=0.0) / max(scale, 1e-30))


def check_fused(fn, *tensors, tol=1e-6, min_groups=1):
    """Capture fn, fuse it, check it verifies and that fused == unfused; returns the FusionResult."""
    g = capture(fn, *tensors)
    r = fuse(g)
    assert r.unfused_reason is None, r.unfused_reason
    assert len(r.fused) >= min_groups, format_graph(r.graph)
    verify(r.graph)
    want = O0Executor(g).run(*arrays(*tensors))
    got = O0Executor(r.graph).run(*arrays(*tensors))
    for w, o in zip(want, got):
        assert np.asarray(o).dtype == np.asarray(w).dtype
        assert np.asarray(o).shape == np.asarray(w).shape
        assert rel_err(o, w) <= tol, (rel_err(o, w), format_graph(r.graph))
    return r


def fused_nodes(graph):
    return [n for n in graph.nodes if isinstance(n.op, FusedPrimitive)]


def T32(*shape, seed=0, scale=1.0, positive=False):
    a = np.random.default_rng(seed).standard_normal(shape) * scale
    if positive:
        a = np.abs(a) + 0.1
    return ms.Tensor(a.astype(np.float32))


# -- every rule of the table ------------------------------------------------------------------------
def _all_ops(x, y, p):
    """One graph using every fusible rule (x, y: any floats; p: positive)."""
    outs = []
    for f in (ops.neg, ops.abs, ops.sign, ops.square, ops.tanh, ops.exp, ops.sin, ops.cos, ops.erf, ops.floor,
              ops.ceil, ops.round, ops.relu, ops.sigmoid, ops.silu):
        outs.append(f(x) * 1.5 + y)
    for f in (ops.sqrt, ops.rsqrt, ops.log, ops.reciprocal):
        outs.append(f(p) - y * 0.5)
    outs.append(ops.add(x, y) * ops.sub(x, y) / ops.add(p, 1.0))
    outs.append(ops.maximum(x, y) - ops.minimum(x, 0.25) + 1.0)
    outs.append(ops.pow(p, 2) + ops.pow(p, 3.0) + ops.pow(p, 0.5) + ops.pow(p, y) + ops.pow(x, 1))
    cond = ops.logical_or(ops.logical_and(ops.greater(x, y), ops.less_equal(y, 0.5)),
                          ops.logical_xor(ops.equal(x, 0.0), ops.not_equal(y, 1.0)))
    outs.append(ops.where(ops.logical_not(cond), x * 2.0, y - 1.0))
    outs.append(ops.where(ops.greater_equal(x, 0.0), x, ops.zeros_like(x)) + ops.ones_like(y))
    outs.append(ops.cast(ops.cast(x, ms.float64) * 3.0, ms.float32) + ops.cast(ops.less(x, y), ms.float32))
    outs.append(ops.leaky_relu(x, 0.1) + ops.elu(x, 0.7) + ops.hardtanh(x, -0.5, 0.8) * 2.0)
    outs.append(ops.softplus(x * 3.0, beta=2.0, threshold=4.0) + 0.5 * ops.clamp(x, -0.3, 0.4) + ops.clamp(y, x, None))
    outs.append(ops.gelu(x, approximate="tanh") + ops.gelu(y, approximate="none") * 2.0)
    outs.append(ops.stop_gradient(x * y) + ops.deepcopy(x) * 3.0)
    return tuple(outs)


@needs_cc
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_every_table_rule_matches_the_unfused_kernels(dtype):
    rng = np.random.default_rng(1)
    x = ms.Tensor((rng.standard_normal((6, 33)) * 2).astype(dtype))
    y = ms.Tensor(rng.standard_normal((6, 33)).astype(dtype))
    p = ms.Tensor((np.abs(rng.standard_normal((6, 33))) + 0.1).astype(dtype))
    r = check_fused(_all_ops, x, y, p, tol=1e-6 if dtype == np.float32 else 1e-13, min_groups=10)
    # every rule of the table appears in some fused node (or is a constant-shaped helper)
    fused_ops = {m for prim in r.fused for m in prim.members}
    assert {"sigmoid", "silu", "gelu", "erf", "where", "cast", "clamp", "softplus", "pow"} <= fused_ops


@needs_cc
@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")
def test_silu_grad_and_special_values():
    from minispore.ops.prims.activation import _silu_grad
    x = np.array([[-np.inf, -1e30, -3.0, -0.0, 0.0, 1e-8, 2.0, 88.0, np.inf, np.nan, 1.0, -1.0]], np.float32)
    t = ms.Tensor(x)
    d = T32(1, 12, seed=3)

    def f(x, d):
        return (_silu_grad(x, d) * 1.0 + 0.0, ops.isnan(x * 2.0), ops.isinf(x + 1.0), ops.isfinite(x - 1.0),
                ops.relu(x) * 1.0, ops.sign(x) + 0.0, ops.maximum(x, d) + 0.0, ops.sigmoid(x) + 0.0)

    r = check_fused(f, t, d)
    got = O0Executor(r.graph).run(x, d._data)
    np.testing.assert_array_equal(got[1], np.isnan(x * 2))
    np.testing.assert_array_equal(got[2], np.isinf(x + 1))
    np.testing.assert_array_equal(got[3], np.isfinite(x - 1))
    assert np.isnan(got[4][0, 9]) and np.isnan(got[6][0, 9])        # NaN propagates like np.maximum


# -- random graphs of elementwise chains ------------------------------------------------------------------
_UNARY = [ops.tanh, ops.sigmoid, ops.neg, ops.square, lambda a: ops.exp(ops.neg(ops.abs(a))), ops.silu,
          lambda a: a * 0.5, lambda a: 1.0 - a, ops.relu, lambda a: ops.gelu(a, approximate="tanh")]
_BINARY = [ops.add, ops.sub, ops.mul, lambda a, b: a / (ops.abs(b) + 1.0), ops.maximum, ops.minimum,
           lambda a, b: ops.where(ops.greater(a, b), a, b * 0.5)]


def _random_chain(rng, leaves, length):
    vals = list(leaves)
    for _ in range(length):
        if rng.random() < 0.45:
            vals.append(_UNARY[rng.integers(len(_UNARY))](vals[rng.integers(len(vals))]))
        else:
            a, b = vals[rng.integers(len(vals))], vals[rng.integers(len(vals))]
            vals.append(_BINARY[rng.integers(len(_BINARY))](a, b))
    return vals[-1], vals[len(leaves) + rng.integers(length)]       # the end, and one intermediate


@needs_cc
def test_random_elementwise_chains_with_broadcasting():
    """Twelve seeded random chains (broadcast operands: a row, a column, a scalar tensor, 0-d), all in
    one graph so one module is compiled; each chain's outputs equal the unfused graph's."""
    shapes = [(5, 7), (1, 7), (5, 1), (), (7,)]
    tensors = [T32(*s, seed=i) for i, s in enumerate(shapes)]

    def f(*ts):
        rng = np.random.default_rng(123)
        outs = []
        for _ in range(12):
            end, mid = _random_chain(rng, ts, int(rng.integers(3, 12)))
            outs += [end, mid]
        return tuple(outs)

    r = check_fused(f, *tensors, min_groups=5)
    assert any(len(n.op.members) >= 4 for n in fused_nodes(r.graph))


# -- reductions --------------------------------------------------------------------------------------------
def softmax_ops(x):
    e = ops.exp(x - ops.amax(x, -1, keepdims=True))
    return e / ops.reduce_sum(e, -1, keep_dims=True)


def rms_norm_ops(x, w):
    return x * ops.rsqrt(ops.mean(x * x, -1, keep_dims=True) + 1e-6) * w


def layer_norm_ops(x, w, b):
    mu = ops.mean(x, -1, keep_dims=True)
    xc = x - mu
    var = ops.mean(xc * xc, -1, keep_dims=True)
    return xc * ops.rsqrt(var + 1e-5) * w + b


def cross_entropy_pieces(logits, onehot):
    m = ops.amax(logits, -1, keepdims=True)
    lse = ops.log(ops.reduce_sum(ops.exp(logits - m), -1, keep_dims=True)) + m
    return ops.mean(ops.reduce_sum((lse - logits) * onehot, -1))     # keep_dims=False row values


@needs_cc
def test_reduction_groups_match_and_fuse_into_one_kernel():
    x = T32(6, 3, 40, seed=1, scale=3.0)
    w, b = T32(40, seed=2), T32(40, seed=3)
    onehot = ms.Tensor(np.eye(40, dtype=np.float32)[np.random.default_rng(0).integers(0, 40, (6, 3))])

    def f(x, w, b, onehot):
        return (softmax_ops(x), rms_norm_ops(x, w), layer_norm_ops(x, w, b), cross_entropy_pieces(x, onehot),
                ops.reduce_sum(ops.exp(x * 0.1), (1, 2), keep_dims=False) * 2.0)     # two trailing axes

    r = check_fused(f, x, w, b, onehot)
    red = [n for n in fused_nodes(r.graph) if n.op.name.startswith("fused_reduce")]
    assert len(red) >= 4
    # float64 oracle for the normalizations
    x64, w64, b64 = (t.asnumpy().astype(np.float64) for t in (x, w, b))
    got = O0Executor(r.graph).run(*arrays(x, w, b, onehot))
    e = np.exp(x64 - x64.max(-1, keepdims=True))
    np.testing.assert_allclose(got[0], e / e.sum(-1, keepdims=True), rtol=2e-6, atol=1e-7)
    np.testing.assert_allclose(got[1], x64 / np.sqrt((x64 ** 2).mean(-1, keepdims=True) + 1e-6) * w64,
                               rtol=2e-5, atol=1e-6)
    xc = x64 - x64.mean(-1, keepdims=True)
    np.testing.assert_allclose(got[2], xc / np.sqrt((xc ** 2).mean(-1, keepdims=True) + 1e-5) * w64 + b64,
                               rtol=2e-5, atol=1e-5)


@needs_cc
def test_softmax_is_one_kernel_reading_its_input_once():
    x = T32(8, 50, seed=4)
    r = check_fused(softmax_ops, x)
    nodes = fused_nodes(r.graph)
    assert len(r.graph.nodes) == 1 and len(nodes) == 1
    assert nodes[0].op.members == ["reduce_max", "sub", "exp", "reduce_sum", "div"]
    assert len(nodes[0].inputs) == 1
    src = nodes[0].op.c_source
    assert src.count("o0[r * 50L + c] =") == 1            # the output is written once per element
    assert src.count("expf(") == 1 and "s2[c] = v2;" in src  # exp is kept for the last pass, not redone


@needs_cc
def test_long_rows_recompute_instead_of_keeping_a_row_buffer():
    x = T32(2, 5000, seed=6)                               # 20 KB rows: over the row-buffer limit
    r = check_fused(softmax_ops, x)
    src = fused_nodes(r.graph)[0].op.c_source
    assert "kept for a later pass" not in src and src.count("expf(") == 2


@needs_cc
def test_max_reduction_propagates_nan_and_handles_all_minus_inf_rows():
    x = np.random.default_rng(0).standard_normal((4, 9)).astype(np.float32)
    x[1, 3] = np.nan
    x[2, :] = -np.inf
    t = ms.Tensor(x)

    def f(x):
        return ops.amax(x * 1.0, -1, keepdims=True) + 0.0, ops.amin(x + 0.0, -1, keepdims=False) * 1.0

    r = check_fused(f, t)
    mx, mn = O0Executor(r.graph).run(x)
    assert np.isnan(mx[1, 0]) and mx[2, 0] == -np.inf and np.isnan(mn[1])
    np.testing.assert_array_equal(mx[[0, 3], 0], x[[0, 3]].max(-1))


# -- gradients: forward and backward chains fuse --------------------------------------------------------------
@needs_cc
def test_value_and_grad_graph_fuses_backward_chains_and_matches_pynative():
    def make():
        ms.set_seed(0)
        net = nn.SequentialCell(nn.Dense(8, 16), nn.GELU(approximate=True), nn.Dense(16, 16), nn.SiLU(),
                                nn.Dense(16, 4))

        def loss_fn(x, y):
            return ops.mean(ops.square(net(x) - y))
        return ms.value_and_grad(loss_fn, None, net.trainable_params())

    x, y = T32(5, 8, seed=1), T32(5, 4, seed=2)
    ref_loss, ref_grads = make()(x, y)
    step = ms.jit(make(), capture_mode="trace", jit_level="O1")
    loss, grads = step(x, y)
    assert rel_err(loss.asnumpy(), ref_loss.asnumpy()) <= 1e-6
    for g, rg in zip(grads, ref_grads):
        assert rel_err(g.asnumpy(), rg.asnumpy()) <= 1e-6
    ex = step.compile(x, y).executor
    assert isinstance(ex, O1Executor)
    members = [n.op.members for n in fused_nodes(ex.graph)]
    # GELU's derivative (tanh, 1 - t^2 ...) is a backward chain: it fused
    assert any("tanh" in m and "sub" in m for m in members), members
    assert any("silu" in m for m in members)


# -- the IR dump ----------------------------------------------------------------------------------------------
@needs_cc
def test_dump_lists_fused_groups_with_member_ops():
    def f(x, y):
        return ops.exp(x * y + 1.0)

    r = fuse(capture(f, T32(3, 4), T32(3, 4, seed=1)))
    text = format_graph(r.graph)
    assert "= fused_elementwise_0{mul,add,exp}(%0, %1) : f32[3,4]" in text
    assert "mul(" not in text.replace("{mul", "")


# -- what must not fuse ------------------------------------------------------------------------------------
@needs_cc
def test_no_group_closes_a_cycle_through_an_unfused_node():
    w = T32(6, 6, seed=5)

    def f(x):
        a = ops.exp(x * 0.5)
        m = ops.matmul(a, w)             # depends on a, outside any group
        return ops.tanh(a + m) * 2.0      # cannot join a's group (it would run before and after matmul)

    r = check_fused(f, T32(6, 6))
    order = [n.op.name for n in r.graph.nodes]
    assert order.index("matmul") > 0 and order.index("matmul") < len(order) - 1
    first = r.graph.nodes[0].op
    assert isinstance(first, FusedPrimitive) and "tanh" not in first.members


@needs_cc
def test_groups_do_not_cross_random_ops_or_host_calls():
    def f(x):
        a = x * 2.0 + 1.0
        b = ops.dropout(a, p=0.5)
        return b * 3.0 + a, ops.dropout(b * 2.0, p=0.25) - 1.0

    x = T32(4, 4)
    g = capture(f, x)
    r = fuse(g)
    verify(r.graph)
    names = [n.op.name for n in r.graph.nodes]
    drops = [i for i, n in enumerate(names) if n == "dropout"]
    assert drops
    for n in r.graph.nodes:
        if isinstance(n.op, FusedPrimitive):
            assert "dropout" not in n.op.members
    # the random ops keep their order relative to each other
    assert [n.op.name for n in r.graph.nodes if n.op.name == "dropout"] == \
           [n.op.name for n in g.nodes if n.op.name == "dropout"]


def test_unsupported_dtypes_and_single_ops_stay_unfused():
    xi = ms.Tensor(np.arange(12, dtype=np.int32).reshape(3, 4))
    xf = T32(3, 4)

    def f(a, b):
        return (a * 2 + 1) * 3, ops.exp(b)          # int32 chain; a lone exp

    g = capture(f, xi, xf)
    r = fuse(g)
    assert not r.fused and r.graph is g


# -- layout at run time -----------------------------------------------------------------------------------
@needs_cc
def test_non_contiguous_and_scalar_inputs():
    def f(x, s):
        return ops.transpose(x, (1, 0)) * s + 1.0, ops.exp(x[:, ::2] * 2.0) - s

    x = T32(6, 8)
    s = ms.Tensor(np.float32(0.5))
    check_fused(f, x, s)


@needs_cc
def test_views_read_by_strides_join_the_group_that_reads_them():
    """reshape/broadcast_to/transpose whose only reader is a group join it: the kernel reads the
    view's input with the view's strides (no copy); a view that something else reads stays out."""
    w = T32(8, 6, seed=3)

    def f(x, b):
        t = ops.transpose(x, (0, 2, 1, 3))                 # read only by the chain: joins it
        y = ops.exp(t * 0.5) + ops.broadcast_to(ops.reshape(b, (1, 1, 1, 6)), (2, 4, 3, 6))
        u = ops.transpose(x, (0, 1, 3, 2))                 # also read by a matmul: stays out
        return y, ops.tanh(u * 2.0) - 1.0, ops.matmul(ops.reshape(u, (24, 6)), w.T)

    r = check_fused(f, T32(2, 3, 4, 6), T32(6, seed=1))
    nodes = fused_nodes(r.graph)
    first = [n for n in nodes if "exp" in n.op.members][0].op
    assert first.members[0] == "transpose" and "broadcast_to" in first.members
    assert first.spec.inputs[0].strides == (72, 6, 24, 1)           # (2,4,3,6) read through x's buffer
    second = [n for n in nodes if "tanh" in n.op.members][0].op
    assert "transpose" not in second.members
    assert sum(n.op.name == "transpose" for n in r.graph.nodes) >= 1


@needs_cc
def test_a_wrong_sized_input_is_an_error_not_a_crash():
    r = fuse(capture(lambda x, y: ops.exp(x * y + 1.0), T32(3, 4), T32(3, 4, seed=1)))
    k = fused_nodes(r.graph)[0].op
    with pytest.raises(MinisporeRuntimeError, match="fused_elementwise_0"):
        k.kernel(np.ones((3, 4), np.float32), np.ones((2, 4), np.float32))
    # the reference (unfused) implementation of the same node agrees with the kernel
    a, b = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    np.testing.assert_allclose(k.kernel(a, b), k.impl(a, b), rtol=1e-6)


# -- fallbacks ---------------------------------------------------------------------------------------------------
def test_no_compiler_runs_unfused_and_warns_once(monkeypatch, tmp_path):
    monkeypatch.setenv("CC", str(tmp_path / "no-such-compiler"))
    monkeypatch.setenv("MINISPORE_CACHE_DIR", str(tmp_path / "empty-cache"))
    monkeypatch.setattr(fusion, "_warned", set())
    B.clear_memory_cache()
    x, y = T32(3, 5), T32(3, 5, seed=1)

    def f(x, y):
        return ops.tanh(x * y - 0.25)

    with pytest.warns(RuntimeWarning, match="no C compiler"):
        ex = O1Executor(capture(f, x, y))
    assert not ex.fusion.fused and "no C compiler" in ex.fusion.unfused_reason
    np.testing.assert_allclose(ex.run(*arrays(x, y))[0], np.tanh(x.asnumpy() * y.asnumpy() - 0.25), rtol=1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("error")               # said once: not again
        O1Executor(capture(lambda a, b: ops.exp(a + b * 2.0), x, y))
    B.clear_memory_cache()


@needs_cc
def test_a_kernel_that_fails_to_compile_falls_back_to_its_unfused_group(monkeypatch):
    cos = get_primitive("cos")
    good = cos.fusion
    monkeypatch.setattr(cos, "fusion", FusionRule(lambda a, t, at, raw: f"cos({a[0]} +* broken)"))

    def f(x, y):
        return ops.cos(x * y) + 1.0, ops.sin(x - y) * 2.0

    x, y = T32(3, 5), T32(3, 5, seed=1)
    g = capture(f, x, y)
    with pytest.warns(RuntimeWarning, match="1 fused kernel.*failed to compile") as rec:
        r = fuse(g)
    assert len([w for w in rec if "failed to compile" in str(w.message)]) == 1
    assert len(r.fused) == 1 and "sin" in r.fused[0].members          # the other group still fused
    assert "cos" in [n.op.name for n in r.graph.nodes]
    want = O0Executor(g).run(*arrays(x, y))
    got = O0Executor(r.graph).run(*arrays(x, y))
    for w_, o in zip(want, got):
        assert rel_err(o, w_) <= 1e-6
    assert cos.fusion is not good


def test_fusion_can_be_switched_off(monkeypatch):
    monkeypatch.setenv("MINISPORE_FUSION", "0")
    g = capture(lambda x: ops.exp(x * 2.0 + 1.0), T32(2, 2))
    assert fuse(g).graph is g


# -- the on-disk kernel cache ----------------------------------------------------------------------------------
def _one_kernel_module():
    spec_graph = capture(lambda x: ops.sigmoid(x * 3.0 - 0.125), T32(7, 3))
    plans, _ = fusion.find_groups(spec_graph)
    p = plans[0]
    return {p.symbol: (p.c_source, fusion.declaration(p.symbol, p.spec))}, p


@needs_cc
def test_second_build_loads_from_disk_without_the_compiler(monkeypatch, tmp_path):
    monkeypatch.setenv("MINISPORE_CACHE_DIR", str(tmp_path))
    kernels, plan = _one_kernel_module()
    B.clear_memory_cache()
    n0 = B.STATS.compiles
    m1 = B.build(kernels)
    assert B.STATS.compiles == n0 + 1
    B.clear_memory_cache()                       # a new process would start like this
    hits = B.STATS.disk_hits
    m2 = B.build(kernels)
    assert B.STATS.compiles == n0 + 1 and B.STATS.disk_hits == hits + 1
    assert m2.path == m1.path and os.path.exists(m1.path[:-len(B.EXT_SUFFIX)] + ".c")
    B.clear_memory_cache()


@needs_cc
def test_a_corrupted_cached_module_is_detected_and_rebuilt(monkeypatch, tmp_path):
    monkeypatch.setenv("MINISPORE_CACHE_DIR", str(tmp_path))
    kernels, plan = _one_kernel_module()
    B.clear_memory_cache()
    m1 = B.build(kernels)
    with open(m1.path, "r+b") as f:             # flip bytes in the middle of the shared object
        f.seek(os.path.getsize(m1.path) // 2)
        f.write(b"\x00garbage\xff" * 8)
    B.clear_memory_cache()
    n0, rebuilt = B.STATS.compiles, B.STATS.rebuilt
    with pytest.warns(RuntimeWarning, match="corrupted"):
        m2 = B.build(kernels)
    assert B.STATS.compiles == n0 + 1 and B.STATS.rebuilt == rebuilt + 1
    B.clear_memory_cache()
    n1 = B.STATS.compiles
    B.build(kernels)                            # the rebuilt entry is trusted again
    assert B.STATS.compiles == n1
    assert m2.path == m1.path
    B.clear_memory_cache()


def test_an_unwritable_cache_directory_is_reported_and_bypassed(monkeypatch, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("MINISPORE_CACHE_DIR", str(blocker))
    monkeypatch.setattr(B, "_warned", set())
    with pytest.warns(RuntimeWarning, match="not writable"):
        d = B.cache_dir()
    assert os.path.isdir(d) and not d.startswith(str(blocker))


def test_with_the_compile_cache_on_kernels_live_in_its_kernel_meta_folder(monkeypatch, tmp_path):
    monkeypatch.delenv("MINISPORE_CACHE_DIR", raising=False)
    monkeypatch.setenv("RANK_ID", "3")
    old = (ms.get_context("enable_compile_cache"), ms.get_context("compile_cache_path"))
    ms.set_context(enable_compile_cache=True, compile_cache_path=str(tmp_path / "cache.ms"))
    try:
        assert B.cache_dir() == str(tmp_path / "cache.ms" / "rank_3" / "kernel_meta")
    finally:
        ms.set_context(enable_compile_cache=old[0], compile_cache_path=old[1])
    assert B.cache_dir() != str(tmp_path / "cache.ms" / "rank_3" / "kernel_meta")
