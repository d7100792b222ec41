"""Transpose folding (passes/transpose_folding.py, run by jit_level O1 and O2 before fusion).

Where the rewrite applies (`transpose(a @ b)` with a matrix transpose of a product nobody else
reads) the folded graph must compute the same numbers; where it must not (a permutation that moves
batch axes, a vector operand, a product read twice or returned) the graph must come back as it was.
Oracles: NumPy float64 (the products written out by hand), the unfolded graph run by O0, and
PyNative for whole training steps (losses and gradients at O1 and O2).
"""
import numpy as np
import pytest

import minispore as ms
from minispore import nn, ops
from minispore.graph import CALL, O0Executor, verify
from minispore.graph.codegen import build as B
from minispore.graph.ir import GraphBuilder
from minispore.graph.passes.fusion import fuse
from minispore.graph.passes.transpose_folding import fold_transposes, fold_transposes_here
from minispore.graph.run import O1Executor, O2Executor
from minispore.ops.primitive import AbstractTensor, get_primitive

F32, F64 = ms.float32, ms.float64
MATMUL, TRANSPOSE, ADD = get_primitive("matmul"), get_primitive("transpose"), get_primitive("add")

pytestmark = pytest.mark.usefixtures("kernel_cache")             # tests/graph/conftest.py


def at(*shape, dtype=F32):
    return AbstractTensor(shape, dtype)


def emit(b, prim, *inputs, **attrs):
    """One node of `prim`, its output aval from the primitive's own inference rule."""
    return b.add_node(prim, inputs, attrs, prim.infer(*[x.aval for x in inputs], **attrs)).outputs[0]


def rand(*shape, dtype=np.float32, seed=0):
    return np.random.default_rng(seed + len(shape)).standard_normal(shape).astype(dtype)


def ops_of(graph):
    return [n.op.name for n in graph.nodes]


def transposed_products(graph):
    """Transposes that read a matmul's output (what rule 1 removes)."""
    return [n for n in graph.nodes if n.op.name == "transpose" and n.inputs[0].kind == "node"
            and n.inputs[0].producer[0].op.name in ("matmul", "bmm")]


def run(graph, *arrays):
    return O0Executor(graph).run(*arrays)


def swap(n):
    return tuple(range(n - 2)) + (n - 1, n - 2)


# -- where the rewrite applies ------------------------------------------------------------------------------
def test_transpose_of_a_product_becomes_the_product_of_the_transposes():
    b = GraphBuilder("t")
    x, y = b.param(at(5, 3)), b.param(at(3, 4))
    out = emit(b, TRANSPOSE, emit(b, MATMUL, x, y), perm=(1, 0))
    g = b.finish([out])
    f = fold_transposes(g)
    verify(f)
    assert ops_of(g) == ["matmul", "transpose"]
    assert ops_of(f) == ["transpose", "transpose", "matmul"]        # y^T, x^T (views), y^T @ x^T
    assert not transposed_products(f)
    a, c = rand(5, 3), rand(3, 4)
    (got,) = run(f, a, c)
    assert got.shape == (4, 5) and got.flags.c_contiguous           # the GEMM wrote the wanted layout
    np.testing.assert_allclose(got, (a.astype(np.float64) @ c).T, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got, run(g, a, c)[0], rtol=1e-6, atol=1e-6)


def test_a_dense_layers_weight_gradient_reads_the_data_directly():
    """The backward of `x @ W^T`: `transpose(transpose(x) @ dy)` -> `dy^T @ x` (x^T undone)."""
    b = GraphBuilder("dense_grad")
    x, dy = b.param(at(8, 20)), b.param(at(8, 32))
    gw = emit(b, TRANSPOSE, emit(b, MATMUL, emit(b, TRANSPOSE, x, perm=(1, 0)), dy), perm=(1, 0))
    g = b.finish([gw])
    f = fold_transposes(g)
    verify(f)
    assert ops_of(f) == ["transpose", "matmul"]                     # dy^T, dy^T @ x: x's transpose is gone
    mm = f.nodes[1]
    assert mm.inputs[1] is x and mm.inputs[0].producer[0].inputs[0] is dy
    a, d = rand(8, 20), rand(8, 32)
    (got,) = run(f, a, d)
    np.testing.assert_allclose(got, d.astype(np.float64).T @ a, rtol=1e-5, atol=1e-5)


def test_batched_and_broadcast_products_fold_with_a_last_two_axes_swap():
    b = GraphBuilder("batched")
    x, y = b.param(at(2, 1, 3, 4)), b.param(at(5, 4, 6))            # batch dims broadcast to (2, 5)
    out = emit(b, TRANSPOSE, emit(b, MATMUL, x, y), perm=(0, 1, 3, 2))
    g = b.finish([out])
    f = fold_transposes(g)
    verify(f)
    assert not transposed_products(f) and ops_of(f).count("matmul") == 1
    a, c = rand(2, 1, 3, 4), rand(5, 4, 6)
    (got,) = run(f, a, c)
    want = np.swapaxes(np.matmul(a.astype(np.float64), c), -1, -2)
    assert got.shape == want.shape == (2, 5, 6, 3)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    # bmm is the same product
    b = GraphBuilder("bmm")
    x, y = b.param(at(3, 4, 5)), b.param(at(3, 5, 2))
    g = b.finish([emit(b, TRANSPOSE, emit(b, get_primitive("bmm"), x, y), perm=(0, -1, -2))])   # negative axes
    f = fold_transposes(g)
    verify(f)
    assert ops_of(f) == ["transpose", "transpose", "bmm"]
    a, c = rand(3, 4, 5), rand(3, 5, 2)
    np.testing.assert_allclose(run(f, a, c)[0], np.swapaxes(a.astype(np.float64) @ c, 1, 2), rtol=1e-5, atol=1e-5)


def test_a_transpose_read_twice_is_folded_once_for_both_readers():
    b = GraphBuilder("two_readers")
    x, y = b.param(at(4, 3)), b.param(at(3, 4))
    t = emit(b, TRANSPOSE, emit(b, MATMUL, x, y), perm=(1, 0))
    out = emit(b, ADD, emit(b, MATMUL, t, t), t)                    # t read by a matmul and an add
    g = b.finish([out, t])                                          # ... and returned
    f = fold_transposes(g)
    verify(f)
    assert not transposed_products(f)
    assert ops_of(f).count("matmul") == 2                           # the flipped product, and t @ t
    a, c = rand(4, 3), rand(3, 4)
    ref_t = (a.astype(np.float64) @ c).T
    got_out, got_t = run(f, a, c)
    np.testing.assert_allclose(got_t, ref_t, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got_out, ref_t @ ref_t + ref_t, rtol=1e-5, atol=1e-5)


def test_a_transpose_of_a_transposed_product_is_the_product():
    b = GraphBuilder("twice")
    x, y = b.param(at(5, 3)), b.param(at(3, 4))
    t1 = emit(b, TRANSPOSE, emit(b, MATMUL, x, y), perm=(1, 0))
    g = b.finish([emit(b, TRANSPOSE, t1, perm=(1, 0))])
    f = fold_transposes(g)
    verify(f)
    assert ops_of(f) == ["matmul"]                                  # flipped twice: x @ y again
    assert f.nodes[0].inputs == (x, y)
    a, c = rand(5, 3), rand(3, 4)
    np.testing.assert_allclose(run(f, a, c)[0], a.astype(np.float64) @ c, rtol=1e-5, atol=1e-5)


def test_mixed_dtypes_keep_the_promoted_dtype():
    b = GraphBuilder("mixed")
    x, y = b.param(at(4, 3)), b.param(at(3, 2, dtype=F64))
    g = b.finish([emit(b, TRANSPOSE, emit(b, MATMUL, x, y), perm=(1, 0))])
    f = fold_transposes(g)
    verify(f)                                                       # (inference re-run: float64 out)
    assert f.outputs[0].aval.dtype is F64 and not transposed_products(f)
    a, c = rand(4, 3), rand(3, 2, dtype=np.float64)
    (got,) = run(f, a, c)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, (a.astype(np.float64) @ c).T, rtol=1e-12)


# -- where it must not ----------------------------------------------------------------------------------------
def _unchanged(g):
    f = fold_transposes(g)
    assert f is g                                                   # the graph itself comes back
    return f


def test_permutations_that_move_batch_axes_are_not_matrix_transposes():
    b = GraphBuilder("heads")
    x, y = b.param(at(2, 3, 4, 5)), b.param(at(2, 3, 5, 6))
    p = emit(b, MATMUL, x, y)                                       # (2, 3, 4, 6)
    _unchanged(b.finish([emit(b, TRANSPOSE, p, perm=(0, 2, 1, 3))]))  # attention's head swap
    b = GraphBuilder("batch_to_end")
    x, y = b.param(at(2, 4, 5)), b.param(at(2, 5, 3))
    _unchanged(b.finish([emit(b, TRANSPOSE, emit(b, MATMUL, x, y), perm=(1, 2, 0))]))
    b = GraphBuilder("identity")
    x, y = b.param(at(4, 5)), b.param(at(5, 3))
    _unchanged(b.finish([emit(b, TRANSPOSE, emit(b, MATMUL, x, y), perm=(0, 1))]))


def test_vector_operands_are_not_folded():
    """`v @ Y` with v 1-D and Y a stack (B, k, n) is (B, n): its (1, 0) transpose swaps the batch
    axis with n - not the transpose of a matrix product."""
    b = GraphBuilder("vector")
    v, y = b.param(at(4)), b.param(at(3, 4, 5))
    _unchanged(b.finish([emit(b, TRANSPOSE, emit(b, MATMUL, v, y), perm=(1, 0))]))


def test_a_product_with_another_reader_or_returned_is_not_flipped():
    b = GraphBuilder("shared_product")
    x, y = b.param(at(4, 4)), b.param(at(4, 4))
    p = emit(b, MATMUL, x, y)
    t = emit(b, TRANSPOSE, p, perm=(1, 0))
    _unchanged(b.finish([emit(b, ADD, t, p)]))                      # flipping would run two GEMMs
    b = GraphBuilder("returned_product")
    x, y = b.param(at(4, 3)), b.param(at(3, 4))
    p = emit(b, MATMUL, x, y)
    _unchanged(b.finish([emit(b, TRANSPOSE, p, perm=(1, 0)), p]))


def test_other_transposes_and_dead_user_nodes_are_left_alone():
    b = GraphBuilder("others")
    x, w = b.param(at(4, 3)), b.param(at(5, 3))
    tt = emit(b, TRANSPOSE, emit(b, TRANSPOSE, w, perm=(1, 0)), perm=(1, 0))   # a view of a view: free
    emit(b, TRANSPOSE, x, perm=(1, 0))                              # nobody reads it: not this pass's
    _unchanged(b.finish([emit(b, MATMUL, x, emit(b, TRANSPOSE, tt, perm=(1, 0)))]))


# -- subgraphs and the O1 pipeline ----------------------------------------------------------------------------
def _call_graph():
    """A top level calling `sub` (which holds a foldable product) and adding a foldable one itself."""
    sb = GraphBuilder("sub")
    x, y = sb.param(at(4, 3)), sb.param(at(3, 4))
    sub = sb.finish([emit(sb, TRANSPOSE, emit(sb, MATMUL, x, y), perm=(1, 0))])
    b = GraphBuilder("top")
    x, y = b.param(at(4, 3)), b.param(at(3, 4))
    (c,) = b.add_structural(CALL, (x, y), {"graph": sub}, [at(4, 4)]).outputs
    top = emit(b, ADD, c, emit(b, TRANSPOSE, emit(b, MATMUL, x, y), perm=(1, 0)))
    return b.finish([top]), sub


def test_subgraphs_are_folded_by_fold_transposes_and_not_by_fold_transposes_here():
    g, sub = _call_graph()
    deep = fold_transposes(g)
    verify(deep)
    call = next(n for n in deep.nodes if n.op is CALL)
    assert not transposed_products(deep) and not transposed_products(call.attrs["graph"])
    here = fold_transposes_here(g)
    verify(here)
    call = next(n for n in here.nodes if n.op is CALL)
    assert not transposed_products(here) and call.attrs["graph"] is sub
    a, c = rand(4, 3), rand(3, 4)
    want = 2 * (a.astype(np.float64) @ c).T
    for graph in (g, deep, here):
        np.testing.assert_allclose(run(graph, a, c)[0], want, rtol=1e-5, atol=1e-5)


def test_fuse_prepares_every_graph_and_keeps_the_call_naming_the_original_callee():
    g, sub = _call_graph()
    result = fuse(g, prepare=fold_transposes_here)
    call = next(n for n in result.exec_graph.nodes if n.op is CALL)
    assert call.attrs["graph"] is sub                               # the executor's top level keeps it ...
    assert not transposed_products(result.exec_subgraphs[id(sub)])  # ... and runs the folded callee
    assert not transposed_products(result.exec_graph)
    full = result.graph
    verify(full)
    assert not transposed_products(next(n for n in full.nodes if n.op is CALL).attrs["graph"])
    a, c = rand(4, 3), rand(3, 4)
    want = 2 * (a.astype(np.float64) @ c).T
    for ex in (O1Executor(g), O1Executor(g, arena=True), O2Executor(g), O2Executor(g, arena=False)):
        np.testing.assert_allclose(ex.run(a, c)[0], want, rtol=1e-5, atol=1e-5)


def test_o1_and_o2_fold_and_o0_runs_the_graph_as_captured():
    b = GraphBuilder("levels")
    x, y = b.param(at(6, 5)), b.param(at(5, 7))
    g = b.finish([emit(b, TRANSPOSE, emit(b, MATMUL, x, y), perm=(1, 0))])
    assert O0Executor(g).graph is g
    for ex in (O1Executor(g), O1Executor(g, arena=True), O2Executor(g)):
        assert ex.source_graph is g and not transposed_products(ex.graph)
    a, c = rand(6, 5), rand(5, 7)
    want = (a.astype(np.float64) @ c).T
    for ex in (O1Executor(g, arena=True), O2Executor(g)):           # the arena's planned buffers too
        (got,) = ex.run(a, c)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    ex = O1Executor(g, arena=True)
    ex.run(a, c)
    assert ex.arena.high_water == ex.memory_plan.peak_bytes


def test_o1_folds_even_with_fusion_switched_off(monkeypatch):
    monkeypatch.setenv("MINISPORE_FUSION", "0")
    g, sub = _call_graph()
    ex = O1Executor(g)
    assert ex.fusion.unfused_reason == "MINISPORE_FUSION=0" and not ex.fusion.fused
    assert not transposed_products(ex.graph)
    assert not transposed_products(next(n for n in ex.graph.nodes if n.op is CALL).attrs["graph"])
    a, c = rand(4, 3), rand(3, 4)
    np.testing.assert_allclose(ex.run(a, c)[0], 2 * (a.astype(np.float64) @ c).T, rtol=1e-5, atol=1e-5)


# -- whole training steps: O1 and O2 against PyNative and float64 ---------------------------------------------
class _MLP(nn.Cell):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Dense(12, 16, has_bias=False)
        self.fc2 = nn.Dense(16, 5, has_bias=False)

    def construct(self, x):
        return 0.5 * ops.sum(self.fc2(ops.relu(self.fc1(x))) ** 2)


def _mlp_reference(x, w1, w2):
    """Loss and weight gradients of `0.5 * sum((relu(x @ w1^T) @ w2^T)^2)` in float64, by hand."""
    x, w1, w2 = (np.asarray(a, np.float64) for a in (x, w1, w2))
    pre = x @ w1.T
    h = np.maximum(pre, 0)
    y = h @ w2.T
    dh = (y @ w2) * (pre > 0)
    return 0.5 * np.sum(y * y), [dh.T @ x, y.T @ h]


@pytest.mark.parametrize("level", ["O0", "O1", "O2"])
def test_an_mlp_training_step_matches_pynative_and_float64(level):
    if level != "O0" and B.find_compiler() is None:
        pytest.skip("no C compiler")
    ms.set_seed(3)
    net = _MLP()
    params = net.trainable_params()
    gf = ms.value_and_grad(net, None, params)
    jf = ms.jit(gf, capture_mode="trace", jit_level=level)
    x = ms.Tensor(rand(9, 12, seed=5))
    loss, grads = jf(x)
    eager_loss, eager_grads = gf(x)
    ref_loss, ref_grads = _mlp_reference(x.asnumpy(), *(p.asnumpy() for p in params))
    np.testing.assert_allclose(loss.asnumpy(), eager_loss.asnumpy(), rtol=1e-5)
    np.testing.assert_allclose(loss.asnumpy(), ref_loss, rtol=1e-5)
    for g, e, r, p in zip(grads, eager_grads, ref_grads, params):
        assert g.shape == p.shape
        np.testing.assert_allclose(g.asnumpy(), e.asnumpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(g.asnumpy(), r, rtol=1e-4, atol=1e-5)
    graph = jf.compile(x).executor.graph
    if level == "O0":
        assert len(transposed_products(graph)) == 2                 # as captured: both weight gradients
    else:
        assert not transposed_products(graph)
        for g in grads:                                             # written by their GEMMs, not views
            assert g._data.flags.c_contiguous


@pytest.mark.parametrize("level", ["O1", "O2"])
def test_batched_attention_scores_gradients_match_pynative_and_float64(level):
    """`s = q @ k^T` per batch: the gradient of k is `transpose(q^T @ g)` batched - folded."""
    if B.find_compiler() is None:
        pytest.skip("no C compiler")

    def f(q, k, g):
        return ops.sum(ops.matmul(q, ops.transpose(k, (0, 2, 1))) * g)

    gf = ms.value_and_grad(f, grad_position=(0, 1))
    jf = ms.jit(gf, capture_mode="trace", jit_level=level)
    q, k, g = ms.Tensor(rand(3, 4, 6, seed=1)), ms.Tensor(rand(3, 4, 6, seed=2)), ms.Tensor(rand(3, 4, 4, seed=3))
    loss, (dq, dk) = jf(q, k, g)
    eager_loss, (eq, ek) = gf(q, k, g)
    q64, k64, g64 = (t.asnumpy().astype(np.float64) for t in (q, k, g))
    np.testing.assert_allclose(loss.asnumpy(), np.sum((q64 @ np.swapaxes(k64, 1, 2)) * g64), rtol=1e-5)
    np.testing.assert_allclose(dq.asnumpy(), g64 @ k64, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(dk.asnumpy(), np.swapaxes(g64, 1, 2) @ q64, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(dq.asnumpy(), eq.asnumpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(dk.asnumpy(), ek.asnumpy(), rtol=1e-5, atol=1e-6)
    assert not transposed_products(jf.compile(q, k, g).executor.graph)
