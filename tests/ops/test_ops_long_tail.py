"""The long tail of functional ops (math_more, array_more, special, linalg_decomp, einsum_ops):
bad input raises minispore errors naming the op before any kernel runs, values against
independent references (NumPy, SciPy, PyTorch), and second-order gradients of the new bprops."""
import numpy as np
import pytest
import scipy.special as sp
import torch

import minispore as ms
from minispore import ops
from minispore.common.errors import OpIndexError, OpTypeError, OpValueError

T = ms.Tensor


def _f(*shape, seed=0, low=-1.0, high=1.0):
    return np.random.default_rng(seed).uniform(low, high, shape)


# ---------------------------------------------------------------------------------------------
# bad input: the error class and the op's name
BAD = [
    (OpTypeError, "bitwise_and", lambda: ops.bitwise_and(T(_f(3)), T(_f(3)))),
    (OpTypeError, "invert", lambda: ops.invert(T(np.array([True])))),
    (OpTypeError, "logit", lambda: ops.logit(T(np.array([1, 2], np.int32)))),
    (OpTypeError, "nan_to_num", lambda: ops.nan_to_num(T(_f(3)), nan="x")),
    (OpValueError, "bias_add", lambda: ops.bias_add(T(_f(2, 3)), T(_f(2)))),
    (OpValueError, "dot", lambda: ops.dot(T(_f(3, 4)), T(_f(3, 2)))),
    (OpValueError, "clip_by_value", lambda: ops.clip_by_value(T(_f(3)))),
    (OpIndexError, "logcumsumexp", lambda: ops.logcumsumexp(T(_f(3)), 2)),
    (OpValueError, "diagonal", lambda: ops.diagonal(T(_f(3, 3)), 0, 1, 1)),
    (OpValueError, "index_add", lambda: ops.index_add(T(_f(3, 4)), T(np.array([0])), T(_f(2, 4)), 0)),
    (OpIndexError, "index_fill", lambda: ops.index_fill(T(_f(3, 4)), 0, T(np.array([5], np.int32)), 1.0)),
    (OpValueError, "strided_slice", lambda: ops.strided_slice(T(_f(3, 4)), (0,), (1, 2), (1, 1))),
    (OpValueError, "pixel_shuffle", lambda: ops.pixel_shuffle(T(_f(1, 3, 2, 2)), 2)),
    (OpValueError, "dsplit", lambda: ops.dsplit(T(_f(2, 3)), 1)),
    (OpValueError, "range", lambda: ops.range(0, 10, -1)),
    (OpTypeError, "polygamma", lambda: ops.polygamma(1.5, T(_f(3)))),
    (OpTypeError, "igamma", lambda: ops.igamma(T(_f(3)), T(_f(3).astype(np.float32)))),
    (OpValueError, "inverse", lambda: ops.inverse(T(_f(2, 3)))),
    (OpValueError, "cholesky", lambda: ops.cholesky(T(np.array([[-1.0, 0.0], [0.0, 1.0]])))),
    (OpValueError, "qr", lambda: ops.qr(T(_f(3, 3)), "r")),
    (OpTypeError, "svd", lambda: ops.svd(T(_f(3, 3)), full_matrices=1)),
    (OpValueError, "einsum", lambda: ops.einsum("ij,jk->ik", T(_f(3, 4)), T(_f(3, 2)))),
    (OpValueError, "einsum", lambda: ops.einsum("ij->k", T(_f(3, 4)))),
    (OpTypeError, "einsum", lambda: ops.einsum("i,i", T(_f(3)), T(np.ones(3, np.int32)))),
]


@pytest.mark.parametrize("err,op,call", BAD, ids=[f"{b[1]}-{i}" for i, b in enumerate(BAD)])
def test_bad_input_names_the_op(err, op, call):
    with pytest.raises(err, match=f"For '{op}'"):
        call()


def test_singular_inverse_is_a_minispore_error():
    with pytest.raises(OpValueError, match="For 'inverse'"):
        ops.inverse(T(np.zeros((2, 2))))


# ---------------------------------------------------------------------------------------------
# values against independent references
def test_einsum_matches_torch_on_assorted_equations():
    rng = np.random.default_rng(3)
    cases = [("ij,jk->ik", (3, 4), (4, 5)), ("bij,bkj->bik", (2, 3, 4), (2, 5, 4)), ("i,j->ij", (3,), (2,)),
             ("...i,...i->...", (2, 3, 4), (3, 4)), ("ii", (4, 4)), ("ijk->kji", (2, 3, 4)), ("ab,ab", (3, 2), (3, 2))]
    for eq, *shapes in cases:
        arrs = [rng.standard_normal(s) for s in shapes]
        got = ops.einsum(eq, *[T(a) for a in arrs]).asnumpy()
        want = torch.einsum(eq, *[torch.tensor(a) for a in arrs]).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, err_msg=eq)


def test_einsum_gradient_matches_torch():
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((2, 3, 4)), rng.standard_normal((4, 5))
    ga, gb = ms.grad(lambda x, y: (ops.einsum("bij,jk->bk", x, y) ** 2).sum(), grad_position=(0, 1))(T(a), T(b))
    ta, tb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    (torch.einsum("bij,jk->bk", ta, tb) ** 2).sum().backward()
    np.testing.assert_allclose(ga.asnumpy(), ta.grad.numpy(), rtol=1e-10)
    np.testing.assert_allclose(gb.asnumpy(), tb.grad.numpy(), rtol=1e-10)


def test_special_functions_against_scipy():
    x = _f(6, low=0.2, high=3.0)
    np.testing.assert_allclose(ops.lgamma(T(x)).asnumpy(), sp.gammaln(x), rtol=1e-12)
    np.testing.assert_allclose(ops.polygamma(3, T(x)).asnumpy(), sp.polygamma(3, x), rtol=1e-10)
    np.testing.assert_allclose(ops.zeta(T(x + 1.5), T(x)).asnumpy(), sp.zeta(x + 1.5, x), rtol=1e-10)
    # the digamma gradient is trigamma; its own gradient is polygamma(2)
    g2 = ms.grad(lambda t: ms.grad(lambda u: ops.digamma(u).sum())(t).sum())(T(x))
    np.testing.assert_allclose(g2.asnumpy(), sp.polygamma(2, x), rtol=1e-10)


def test_det_and_inverse_second_order_against_torch():
    rng = np.random.default_rng(5)
    a = rng.standard_normal((3, 3)) + 3 * np.eye(3)
    g = ms.grad(lambda t: ms.grad(lambda u: ops.det(u))(t).sum())(T(a))
    ta = torch.tensor(a, requires_grad=True)
    (g1,) = torch.autograd.grad(torch.linalg.det(ta), ta, create_graph=True)
    (g2,) = torch.autograd.grad(g1.sum(), ta)
    np.testing.assert_allclose(g.asnumpy(), g2.numpy(), rtol=1e-9, atol=1e-12)


def test_cholesky_gradient_matches_torch():
    rng = np.random.default_rng(6)
    x = rng.standard_normal((3, 3))
    a = x @ x.T + 3 * np.eye(3)
    w = rng.standard_normal((3, 3))
    g = ms.grad(lambda t: (ops.cholesky(t) * T(w)).sum())(T(a))
    ta = torch.tensor(a, requires_grad=True)
    (torch.linalg.cholesky(ta) * torch.tensor(w)).sum().backward()
    # torch's gradient is symmetrized the same way (only A's symmetric part is meaningful)
    np.testing.assert_allclose(g.asnumpy(), ta.grad.numpy(), rtol=1e-9, atol=1e-12)


def test_svd_gradient_matches_torch():
    rng = np.random.default_rng(7)
    a = rng.standard_normal((4, 3))
    ws, wu = rng.standard_normal(3), rng.standard_normal((4, 3))

    def loss(t):
        s, u, v = ops.svd(t)
        return (s * T(ws)).sum() + ((u * u) * T(wu)).sum() + (v * v).sum()    # sign-invariant in u, v

    g = ms.grad(loss)(T(a))
    ta = torch.tensor(a, requires_grad=True)
    u, s, vh = torch.linalg.svd(ta, full_matrices=False)
    ((s * torch.tensor(ws)).sum() + ((u * u) * torch.tensor(wu)).sum() + (vh * vh).sum()).backward()
    np.testing.assert_allclose(g.asnumpy(), ta.grad.numpy(), rtol=1e-8, atol=1e-10)


def test_matrix_exp_against_series_and_its_gradient_twice():
    a = _f(3, 3, seed=8) * 0.5
    series = sum(np.linalg.matrix_power(a, k) / np.prod(np.arange(1, k + 1)) for k in range(30))
    np.testing.assert_allclose(ops.matrix_exp(T(a)).asnumpy(), series, rtol=1e-12)
    g = ms.grad(lambda t: ms.grad(lambda u: ops.matrix_exp(u).sum())(t).sum())(T(a))
    ta = torch.tensor(a, requires_grad=True)
    (g1,) = torch.autograd.grad(torch.linalg.matrix_exp(ta).sum(), ta, create_graph=True)
    (g2,) = torch.autograd.grad(g1.sum(), ta)
    np.testing.assert_allclose(g.asnumpy(), g2.numpy(), rtol=1e-8, atol=1e-10)


def test_logcumsumexp_large_inputs_stay_finite_in_both_directions():
    x = T(np.array([1000.0, 1001.0, 999.0]))
    y = ops.logcumsumexp(x, 0)
    np.testing.assert_allclose(y.asnumpy(), np.logaddexp.accumulate([1000.0, 1001.0, 999.0]), rtol=1e-14)
    g = ms.grad(lambda t: ops.logcumsumexp(t, 0).sum())(x)
    t = torch.tensor([1000.0, 1001.0, 999.0], dtype=torch.float64, requires_grad=True)
    torch.logcumsumexp(t, 0).sum().backward()
    assert np.all(np.isfinite(g.asnumpy()))
    np.testing.assert_allclose(g.asnumpy(), t.grad.numpy(), rtol=1e-12)


def test_diagonal_and_diag_embed_are_adjoint():
    rng = np.random.default_rng(9)
    x, d = rng.standard_normal((2, 4, 3)), rng.standard_normal((2, 2))
    # <diagonal(x), d> == <x, diagonal_scatter(d)> for offset 1 over dims (1, 2)
    lhs = np.sum(ops.diagonal(T(x), 1, 1, 2).asnumpy() * d)
    scattered = ms.grad(lambda t: (ops.diagonal(t, 1, 1, 2) * T(d)).sum())(T(x)).asnumpy()
    np.testing.assert_allclose(lhs, np.sum(x * scattered), rtol=1e-12)
    np.testing.assert_array_equal(ops.diag_embed(T(d), 1).asnumpy()[0], np.diag(d[0], 1))


def test_index_add_repeated_indices_accumulate_and_gradient_gathers():
    x, y = np.zeros((2, 3)), np.arange(6.0).reshape(2, 3)
    idx = T(np.array([1, 1, 0], np.int32))
    out = ops.index_add(T(x), idx, T(y), 1).asnumpy()
    np.testing.assert_array_equal(out, [[2.0, 1.0, 0.0], [5.0, 7.0, 0.0]])
    w = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    gy = ms.grad(lambda u: (ops.index_add(T(x), idx, u, 1) * T(w)).sum())(T(y)).asnumpy()
    np.testing.assert_array_equal(gy, [[2.0, 2.0, 1.0], [5.0, 5.0, 4.0]])


def test_result_dtypes_follow_mindspore():
    xi = T(np.arange(6, dtype=np.int32).reshape(2, 3))
    assert ops.float_power(xi, 2).dtype == ms.float64
    assert ops.trapz(xi).dtype == ms.float32
    assert ops.lgamma(xi).dtype == ms.float32
    assert ops.range(0, 5, 2).dtype == ms.int64
    assert ops.range(0, 1.0, 0.25).dtype == ms.float32
    assert ops.sequence_mask(T(np.array([1, 2], np.int32)), 3).dtype == ms.bool_
    assert ops.signbit(T(np.array([-0.0]))).asnumpy().tolist() == [False]      # MindSpore's rule
    assert isinstance(ops.clip_by_value([xi, xi], 1, 3), tuple)
