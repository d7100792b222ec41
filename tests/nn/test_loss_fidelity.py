"""The MindSpore-2.10 loss family (functional + nn cells): values and gradients against PyTorch
(same formulas where MindSpore documents PyTorch's), MindSpore's own conventions where they differ
(clamped BCE gradient, kl_div's label gradient, smooth_l1's 'none' default, float32 reductions of
half-precision losses), and bad input."""
import numpy as np
import pytest

import minispore as ms
from minispore import nn, ops
from minispore.common.errors import MinisporeError, OpIndexError, OpTypeError, OpValueError

rng = np.random.default_rng(0)


def T(a, dtype=np.float32):
    return ms.Tensor(np.asarray(a, dtype))


def _rand(*shape, low=-2.0, high=2.0):
    return rng.uniform(low, high, shape).astype(np.float32)


def _signs(*shape):
    return np.where(rng.uniform(size=shape) < 0.5, -1.0, 1.0).astype(np.float32)


# =================================================================================================
# against PyTorch: value and gradient of every input that has one
try:
    import torch
    TF = torch.nn.functional
except ImportError:                   # the comparisons below are skipped without the 'torch' extra
    torch = TF = None
needs_torch = pytest.mark.skipif(torch is None, reason="needs PyTorch")


def _both(ms_fn, torch_fn, arrays, grad_of=(0,), rtol=1e-5, atol=1e-6):
    ms_args = [T(a) if a.dtype.kind == "f" else ms.Tensor(a) for a in arrays]
    t_args = [torch.tensor(a, dtype=torch.float64 if a.dtype.kind == "f" else torch.int64,
                           requires_grad=(i in grad_of)) for i, a in enumerate(arrays)]
    got = ms_fn(*ms_args)
    want = torch_fn(*t_args)
    np.testing.assert_allclose(got.asnumpy(), want.detach().numpy(), rtol=rtol, atol=atol)
    if grad_of:
        weights = rng.standard_normal(tuple(want.shape))
        gs = ms.grad(lambda *a: (ms_fn(*a) * T(weights)).sum(), grad_position=tuple(grad_of))(*ms_args)
        gs = gs if isinstance(gs, tuple) else (gs,)
        (want * torch.tensor(weights)).sum().backward()
        for g, i in zip(gs, grad_of):
            np.testing.assert_allclose(g.asnumpy(), t_args[i].grad.numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.torch
@needs_torch
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_regression_losses_match_torch(reduction):
    x, y = _rand(3, 4, low=-3, high=3), _rand(3, 4)
    _both(lambda a, b: ops.l1_loss(a, b, reduction), lambda a, b: TF.l1_loss(a, b, reduction=reduction), [x, y], (0, 1))
    _both(lambda a, b: ops.smooth_l1_loss(a, b, 0.7, reduction),
          lambda a, b: TF.smooth_l1_loss(a, b, reduction=reduction, beta=0.7), [x, y], (0, 1))
    _both(lambda a, b: ops.huber_loss(a, b, reduction, 1.5),
          lambda a, b: TF.huber_loss(a, b, reduction=reduction, delta=1.5), [x, y], (0, 1))
    var = _rand(3, 4, low=0.2, high=2.0)
    _both(lambda a, b, v: ops.gaussian_nll_loss(a, b, v, True, reduction=reduction),
          lambda a, b, v: TF.gaussian_nll_loss(a, b, v, full=True, reduction=reduction), [x, y, var], (0, 1, 2))


@pytest.mark.torch
@needs_torch
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_binary_losses_match_torch(reduction):
    p, y, w = _rand(3, 4, low=0.05, high=0.95), _rand(3, 4, low=0, high=1), _rand(3, 4, low=0.5, high=2)
    _both(lambda a, b, c: ops.binary_cross_entropy(a, b, c, reduction),
          lambda a, b, c: TF.binary_cross_entropy(a, b, c, reduction=reduction), [p, y, w], (0, 1))
    z, pw = _rand(3, 4, low=-4, high=4), _rand(4, low=0.5, high=3)
    _both(lambda a, b, c, d: ops.binary_cross_entropy_with_logits(a, b, c, d, reduction),
          lambda a, b, c, d: TF.binary_cross_entropy_with_logits(a, b, c, reduction=reduction, pos_weight=d),
          [z, y, w, pw], (0, 1))
    s = _signs(3, 4)
    _both(lambda a, b: ops.soft_margin_loss(a, b, reduction), lambda a, b: TF.soft_margin_loss(a, b, reduction=reduction),
          [z, s], (0,))
    t = (rng.uniform(size=(3, 4)) < 0.5).astype(np.float32)
    cw = _rand(4, low=0.5, high=2)
    _both(lambda a, b, c: ops.multilabel_soft_margin_loss(a, b, c, reduction),
          lambda a, b, c: TF.multilabel_soft_margin_loss(a, b, c, reduction=reduction), [z, t, cw], (0,))


@pytest.mark.torch
@needs_torch
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_margin_losses_match_torch(reduction):
    x1, x2, s = _rand(6), _rand(6), _signs(6)
    _both(lambda a, b, c: ops.margin_ranking_loss(a, b, c, 0.3, reduction),
          lambda a, b, c: TF.margin_ranking_loss(a, b, c, margin=0.3, reduction=reduction), [x1, x2, s], (0, 1, 2))
    h = _rand(3, 4)
    hs = _signs(3, 4)
    _both(lambda a, b: ops.hinge_embedding_loss(a, b, 1.5, reduction),
          lambda a, b: TF.hinge_embedding_loss(a, b, margin=1.5, reduction=reduction), [h, hs], (0,))
    a, b = _rand(4, 3), _rand(4, 3)
    cs = _signs(4)
    _both(lambda u, v, c: ops.cosine_embedding_loss(u, v, c, -0.2, reduction),
          lambda u, v, c: TF.cosine_embedding_loss(u, v, c, margin=-0.2, reduction=reduction), [a, b, cs], (0, 1))
    sc, tgt, w = _rand(5, 4), rng.integers(0, 4, 5), _rand(4, low=0.5, high=2)
    _both(lambda u, c, v: ops.multi_margin_loss(u, c, 2, 2, v, reduction),
          lambda u, c, v: TF.multi_margin_loss(u, c, p=2, margin=2, weight=v, reduction=reduction), [sc, tgt, w], (0,))
    an, po, ne = _rand(4, 3), _rand(4, 3), _rand(4, 3)
    for p, swap in ((2, False), (1, True)):
        _both(lambda u, v, q: ops.triplet_margin_loss(u, v, q, 2.0, p, swap=swap, reduction=reduction),
              lambda u, v, q: TF.triplet_margin_loss(u, v, q, margin=2.0, p=p, swap=swap, reduction=reduction),
              [an, po, ne], (0, 1, 2))


@pytest.mark.torch
@needs_torch
@pytest.mark.filterwarnings("ignore:reduction. 'mean' divides")
@pytest.mark.parametrize("reduction", ["mean", "sum", "none", "batchmean"])
def test_kl_div_matches_torch_and_gives_labels_no_gradient(reduction):
    z = rng.standard_normal((3, 4))
    lp = (z - np.log(np.exp(z).sum(-1, keepdims=True))).astype(np.float32)
    t = rng.uniform(0.1, 1, (3, 4)).astype(np.float32)
    t[0, 2] = 0.0
    _both(lambda a, b: ops.kl_div(a, b, reduction), lambda a, b: TF.kl_div(a, b, reduction=reduction), [lp, t], (0,))
    g_labels = ms.grad(lambda a, b: ops.kl_div(a, b, reduction).sum(), grad_position=1)(T(lp), T(t))
    np.testing.assert_array_equal(g_labels.asnumpy(), np.zeros((3, 4)))     # MindSpore's KLDivLoss backward


# =================================================================================================
# MindSpore's own conventions
def test_bce_clamps_logs_and_keeps_the_analytic_gradient():
    x, y = T([0.0, 1.0, 0.5]), T([1.0, 0.0, 0.3])
    np.testing.assert_allclose(ops.binary_cross_entropy(x, y, reduction="none").asnumpy(),
                               [-np.log(1e-12), -np.log(1e-12), -0.3 * np.log(0.5) - 0.7 * np.log(0.5)], rtol=1e-6)
    g = ms.grad(lambda a: ops.binary_cross_entropy(a, y, reduction="sum"))(x).asnumpy()
    np.testing.assert_allclose(g, [-1e12, 1e12, 0.2 / 0.25], rtol=1e-6)      # (x - y) / max(x(1-x), 1e-12)


def test_smooth_l1_defaults_and_beta_zero_is_l1():
    x, y = T([0.0, 0.5, 1.0, 2.0, -3.0]), T(np.zeros(5))
    np.testing.assert_allclose(ops.smooth_l1_loss(x, y).asnumpy(), [0.0, 0.125, 0.5, 1.5, 2.5])   # 'none'
    assert nn.SmoothL1Loss()(x, y).shape == (5,)
    assert ops.smooth_l1_loss(x, y, 0.0, "sum").asnumpy() == pytest.approx(6.5)


def test_half_precision_losses_reduce_in_float32():
    x = T(np.full(4096, 0.1), np.float16)
    y = T(np.zeros(4096), np.float16)
    out = ops.l1_loss(x, y, "sum")
    assert out.dtype == ms.float16
    assert float(out.asnumpy()) == pytest.approx(4096 * float(np.float16(0.1)), rel=1e-3)
    assert nn.MAELoss("sum")(x, y).asnumpy() == pytest.approx(409.5, rel=1e-3)


def test_integer_l1_loss_keeps_the_integer_dtype():
    out = ops.l1_loss(T([1, 2], np.int32), T([0, 5], np.int32))
    assert out.dtype == ms.int32 and int(out.asnumpy()) == 2


def test_stable_where_the_naive_formula_overflows():
    big = T([[100.0, -100.0]])
    np.testing.assert_allclose(ops.multilabel_soft_margin_loss(big, T([[0.0, 1.0]]), reduction="none").asnumpy(), [100.0])
    np.testing.assert_allclose(ops.soft_margin_loss(T([-100.0]), T([1.0]), "none").asnumpy(), [100.0])


def test_gaussian_nll_clamps_small_variances_and_accepts_one_per_sample():
    x, y = T([[1.0, 2.0]]), T([[0.0, 0.0]])
    tiny = ops.gaussian_nll_loss(x, y, T([[-1.0, 1e-9]]), reduction="none").asnumpy()
    np.testing.assert_allclose(tiny, 0.5 * (np.log(1e-6) + np.array([[1.0, 4.0]]) / 1e-6), rtol=1e-5)
    per_sample = ops.gaussian_nll_loss(x, y, T([2.0]), reduction="none").asnumpy()
    np.testing.assert_allclose(per_sample, 0.5 * (np.log(2.0) + np.array([[1.0, 4.0]]) / 2.0), rtol=1e-6)


@pytest.mark.torch
@needs_torch
def test_poisson_nll_loss_cell():
    x, y = _rand(3, 4), _rand(3, 4, low=0, high=3)
    want = TF.poisson_nll_loss(torch.tensor(x), torch.tensor(y), log_input=True).item()
    assert nn.PoissonNLLLoss()(T(x), T(y)).asnumpy() == pytest.approx(want, rel=1e-5)
    pos = _rand(3, 4, low=0.1, high=2)
    got = nn.PoissonNLLLoss(log_input=False, full=True, reduction="none")(T(pos), T(y)).asnumpy()
    want = TF.poisson_nll_loss(torch.tensor(pos), torch.tensor(y), log_input=False, full=True, reduction="none")
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-6)


def test_cells_wrap_the_functional_losses():
    x, y = _rand(3, 4), _rand(3, 4)
    p, q = _rand(3, 4, low=0.1, high=0.9), _rand(3, 4, low=0.1, high=0.9)
    w = _rand(3, 4, low=0.5, high=2)
    pairs = [
        (nn.L1Loss("sum")(T(x), T(y)), ops.l1_loss(T(x), T(y), "sum")),
        (nn.HuberLoss("none", 0.5)(T(x), T(y)), ops.huber_loss(T(x), T(y), "none", 0.5)),
        (nn.BCELoss(T(w))(T(p), T(q)), ops.binary_cross_entropy(T(p), T(q), T(w))),
        (nn.BCEWithLogitsLoss("sum", T(w))(T(x), T(q)), ops.binary_cross_entropy_with_logits(T(x), T(q), T(w),
                                                                                            reduction="sum")),
        (nn.KLDivLoss("batchmean")(T(x), T(q)), ops.kl_div(T(x), T(q), "batchmean")),
        (nn.RMSELoss()(T(x), T(y)), ops.sqrt(ops.mse_loss(T(x), T(y)))),
        (nn.TripletMarginLoss(margin=2.0)(T(x), T(y), T(p)), ops.triplet_margin_loss(T(x), T(y), T(p), 2.0)),
    ]
    for got, want in pairs:
        np.testing.assert_allclose(got.asnumpy(), want.asnumpy(), rtol=1e-6)


def test_softmax_cross_entropy_with_logits_sparse_reductions():
    z = _rand(4, 5)
    t = np.array([1, 0, 4, 2])
    lsm = z.astype(np.float64) - np.log(np.exp(z.astype(np.float64)).sum(-1, keepdims=True))
    per = -lsm[np.arange(4), t]
    sparse = ms.Tensor(t.astype(np.int32))
    np.testing.assert_allclose(nn.SoftmaxCrossEntropyWithLogits(sparse=True)(T(z), sparse).asnumpy(), per, rtol=1e-5)
    assert nn.SoftmaxCrossEntropyWithLogits(True, "sum")(T(z), sparse).asnumpy() == pytest.approx(per.sum(), rel=1e-5)
    assert nn.SoftmaxCrossEntropyWithLogits(True, "mean")(T(z), sparse).asnumpy() == pytest.approx(per.mean(), rel=1e-5)


@pytest.mark.torch
@needs_torch
def test_multi_margin_cell_takes_float_margin_and_call_weight():
    x, t = _rand(5, 4), rng.integers(0, 4, 5)
    w = _rand(4, low=0.5, high=2)
    want = TF.multi_margin_loss(torch.tensor(x), torch.tensor(t), margin=1.5, weight=torch.tensor(w)).item()
    assert nn.MultiMarginLoss(margin=1.5)(T(x), ms.Tensor(t), T(w)).asnumpy() == pytest.approx(want, rel=1e-5)
    assert nn.MultiMarginLoss(margin=1.5, weight=T(w))(T(x), ms.Tensor(t)).asnumpy() == pytest.approx(want, rel=1e-5)


# =================================================================================================
# bad input: a minispore error naming the op, before any kernel runs
X = T(np.full((2, 3), 0.5))
BAD = [
    (lambda: ops.l1_loss(X, X, "avg"), OpValueError, "l1_loss"),
    (lambda: ops.l1_loss([1.0], X), OpTypeError, "l1_loss"),
    (lambda: ops.smooth_l1_loss(X, T(np.ones(3))), OpValueError, "smooth_l1_loss"),
    (lambda: ops.smooth_l1_loss(X, X, -0.5), OpValueError, "smooth_l1_loss"),
    (lambda: ops.smooth_l1_loss(T([1, 2], np.int32), T([1, 2], np.int32)), OpTypeError, "smooth_l1_loss"),
    (lambda: ops.huber_loss(X, X, delta=0), OpValueError, "huber_loss"),
    (lambda: ops.binary_cross_entropy(T([1.5, 0.5]), T([0.0, 1.0])), OpValueError, "binary_cross_entropy"),
    (lambda: ops.binary_cross_entropy(X, T(np.ones(3))), OpValueError, "binary_cross_entropy"),
    (lambda: ops.binary_cross_entropy(X, T(np.ones((2, 3)), np.float16)), OpTypeError, "binary_cross_entropy"),
    (lambda: ops.binary_cross_entropy(X, X, T(np.ones((2, 2)))), OpValueError, "binary_cross_entropy"),
    (lambda: ops.kl_div(X, X, "average"), OpValueError, "kl_div"),
    (lambda: ops.kl_div(X, T(np.ones(3))), OpValueError, "kl_div"),
    (lambda: ops.kl_div(T(0.5), T(0.5), "batchmean"), OpValueError, "kl_div"),
    (lambda: ops.margin_ranking_loss(X, X, X, 1), OpTypeError, "margin_ranking_loss"),
    (lambda: ops.margin_ranking_loss(X, X, T(np.ones((2, 3)), np.int32)), OpTypeError, "margin_ranking_loss"),
    (lambda: ops.cosine_embedding_loss(X, X, T([1.0, -1.0]), 1.5), OpValueError, "cosine_embedding_loss"),
    (lambda: ops.cosine_embedding_loss(X, X, T([1.0, -1.0, 1.0])), OpValueError, "cosine_embedding_loss"),
    (lambda: ops.hinge_embedding_loss(X, X, "1"), OpTypeError, "hinge_embedding_loss"),
    (lambda: ops.multi_margin_loss(X, ms.Tensor(np.array([0, 1])), p=3), OpValueError, "multi_margin_loss"),
    (lambda: ops.multi_margin_loss(X, ms.Tensor(np.array([0, 1])), margin=1.0), OpTypeError, "multi_margin_loss"),
    (lambda: ops.multi_margin_loss(X, T([0.0, 1.0])), OpTypeError, "multi_margin_loss"),
    (lambda: ops.multi_margin_loss(X, ms.Tensor(np.array([0, 1])), weight=T(np.ones(2))), OpValueError,
     "multi_margin_loss"),
    (lambda: ops.gaussian_nll_loss(X, X, X, eps=0.0), OpValueError, "gaussian_nll_loss"),
    (lambda: ops.gaussian_nll_loss(X, X, X, full=1), OpTypeError, "gaussian_nll_loss"),
    (lambda: ops.triplet_margin_loss(X, X, T(np.ones((3, 3)))), OpValueError, "triplet_margin_loss"),
    (lambda: ops.triplet_margin_loss(X[0], X[0], X[0]), OpValueError, "triplet_margin_loss"),
    (lambda: ops.soft_margin_loss(X, T(np.ones(3))), OpValueError, "soft_margin_loss"),
    (lambda: ops.multilabel_soft_margin_loss(T(0.5), T(1.0)), OpValueError, "multilabel_soft_margin_loss"),
    (lambda: nn.SmoothL1Loss(beta=-1.0), OpValueError, "SmoothL1Loss"),
    (lambda: nn.CosineEmbeddingLoss(margin=1), OpTypeError, "CosineEmbeddingLoss"),
    (lambda: nn.KLDivLoss("avg"), OpValueError, "KLDivLoss"),
    (lambda: nn.BCEWithLogitsLoss(weight=ms.Parameter(T(np.ones(3)), name="w")), OpTypeError, "BCEWithLogitsLoss"),
    (lambda: nn.MultiMarginLoss(p=3), OpValueError, "MultiMarginLoss"),
    (lambda: nn.NLLLoss(weight=T(np.ones(3), np.float64)), OpTypeError, "NLLLoss"),
    (lambda: nn.GaussianNLLLoss(eps=0.0), OpValueError, "GaussianNLLLoss"),
    (lambda: nn.HingeEmbeddingLoss(margin="1"), OpTypeError, "HingeEmbeddingLoss"),
]


@pytest.mark.parametrize("call,err,op", BAD, ids=[f"{b[2]}-{i}" for i, b in enumerate(BAD)])
def test_bad_input_raises_a_minispore_error_naming_the_op(call, err, op):
    with pytest.raises(err, match=f"'{op}'") as info:
        call()
    assert isinstance(info.value, MinisporeError)


def test_multi_margin_target_out_of_range_is_an_index_error():
    with pytest.raises(OpIndexError):
        ops.multi_margin_loss(X, ms.Tensor(np.array([0, 3])))
