"""Losses, functional and nn cells, against MindSpore 2.10: every reduction, weights, keyword
forms, gradients (`ms.grad`), and bad input.

Left out, because MindSpore 2.10's CPU wheel is wrong or incomplete there (see the final report):
`ops.soft_margin_loss` / `nn.SoftMarginLoss` and `ops.triplet_margin_loss` (no CPU kernel),
`binary_cross_entropy` with a weight that only broadcasts or with 0-d inputs (the CPU kernel reads
the weight without broadcasting, and doubles 0-d losses), kl_div's gradient at negative labels.
"""
import numpy as np

from msdiff import case, rand


def T(ms, a, dtype=np.float32):
    return ms.Tensor(np.asarray(a, dtype))


def _probs(*shape, seed=0):
    return rand(*shape, seed=seed, low=0.05, high=0.95)


def _logp(*shape, seed=0):
    z = rand(*shape, seed=seed, low=-2, high=2).astype(np.float64)
    return (z - np.log(np.exp(z).sum(-1, keepdims=True))).astype(np.float32)


def _dist(*shape, seed=0):
    p = rand(*shape, seed=seed, low=0.1, high=1.0).astype(np.float64)
    return (p / p.sum(-1, keepdims=True)).astype(np.float32)


def _signs(*shape, seed=0):
    return np.where(rand(*shape, seed=seed) < 0, -1.0, 1.0).astype(np.float32)


# =================================================================================================
# l1_loss / smooth_l1_loss / huber_loss / mse_loss
@case("losses/l1_loss_default_mean")
def _(ms):
    return ms.ops.l1_loss(T(ms, rand(3, 4, seed=1)), T(ms, rand(3, 4, seed=2)))


@case("losses/l1_loss_broadcast_sum_and_none_f16")
def _(ms):
    a, b = T(ms, rand(2, 3, seed=1)), T(ms, rand(3, seed=2))
    h = ms.ops.l1_loss(T(ms, rand(2, 3, seed=3), np.float16), T(ms, rand(2, 3, seed=4), np.float16), reduction="none")
    return ms.ops.l1_loss(a, b, reduction="sum"), h


@case("losses/l1_loss_grad")
def _(ms):
    return ms.grad(lambda x, y: ms.ops.l1_loss(x, y), grad_position=(0, 1))(T(ms, rand(3, 4, seed=1)),
                                                                          T(ms, rand(3, 4, seed=2)))


@case("losses/smooth_l1_default_none")
def _(ms):
    return ms.ops.smooth_l1_loss(T(ms, [0.0, 0.5, 1.0, 2.0, -3.0]), T(ms, np.zeros(5)))


@case("losses/smooth_l1_beta_mean_sum")
def _(ms):
    x, y = T(ms, rand(3, 4, seed=1, low=-2, high=2)), T(ms, rand(3, 4, seed=2))
    return (ms.ops.smooth_l1_loss(x, y, 0.5, "mean"), ms.ops.smooth_l1_loss(x, y, beta=2, reduction="sum"),
            ms.ops.smooth_l1_loss(ms.ops.cast(x, ms.float64), ms.ops.cast(y, ms.float64), reduction="sum"))


@case("losses/smooth_l1_grad")
def _(ms):
    f = lambda x, y: ms.ops.smooth_l1_loss(x, y, 0.7, "mean")     # noqa: E731
    return ms.grad(f, grad_position=(0, 1))(T(ms, rand(3, 4, seed=1, low=-2, high=2)), T(ms, rand(3, 4, seed=2)))


@case("losses/huber_reductions")
def _(ms):
    x, y = T(ms, rand(3, 4, seed=1, low=-3, high=3)), T(ms, rand(3, 4, seed=2))
    return (ms.ops.huber_loss(x, y), ms.ops.huber_loss(x, y, "sum", 2.0),
            ms.ops.huber_loss(x, T(ms, rand(4, seed=3)), reduction="none", delta=0.5))


@case("losses/huber_grad")
def _(ms):
    return ms.grad(lambda x: ms.ops.huber_loss(x, T(ms, np.zeros((3, 4))), "mean", 1.5))(
        T(ms, rand(3, 4, seed=1, low=-3, high=3)))


@case("losses/mse_loss_broadcast_and_f64")
def _(ms):
    x = T(ms, rand(2, 3, seed=1))
    return (ms.ops.mse_loss(x, T(ms, rand(3, seed=2))),
            ms.ops.mse_loss(ms.ops.cast(x, ms.float64), T(ms, rand(2, 3, seed=3), np.float64), reduction="none"))


# =================================================================================================
# binary_cross_entropy / binary_cross_entropy_with_logits
@case("losses/bce_reductions")
def _(ms):
    x, y = T(ms, _probs(3, 4, seed=1)), T(ms, _probs(3, 4, seed=2))
    w = T(ms, rand(3, 4, seed=3, low=0.5, high=2.0))
    return (ms.ops.binary_cross_entropy(x, y), ms.ops.binary_cross_entropy(x, y, w, "none"),
            ms.ops.binary_cross_entropy(x, y, weight=w, reduction="sum"))


@case("losses/bce_saturated_is_clamped")
def _(ms):
    x, y = T(ms, [0.0, 1.0, 0.5, 1e-8]), T(ms, [1.0, 0.0, 0.3, 0.0])
    return (ms.ops.binary_cross_entropy(x, y, reduction="none"),
            ms.grad(lambda a: ms.ops.binary_cross_entropy(a, y, reduction="sum"))(x))


@case("losses/bce_grad_logits_and_labels")
def _(ms):
    w = T(ms, rand(3, 4, seed=3, low=0.5, high=2.0))
    f = lambda a, b: ms.ops.binary_cross_entropy(a, b, w)     # noqa: E731
    return ms.grad(f, grad_position=(0, 1))(T(ms, _probs(3, 4, seed=1)), T(ms, _probs(3, 4, seed=2)))


@case("losses/bce_with_logits_forms")
def _(ms):
    x, y = T(ms, rand(2, 3, seed=1, low=-3, high=3)), T(ms, _probs(2, 3, seed=2))
    return (ms.ops.binary_cross_entropy_with_logits(x, y),
            ms.ops.binary_cross_entropy_with_logits(input=x, target=y, reduction="none"),
            ms.ops.binary_cross_entropy_with_logits(x, y, T(ms, [1.0, 2.0, 0.5]), T(ms, [[2.0], [0.5]]), "sum"))


@case("losses/bce_with_logits_grad")
def _(ms):
    w, pw = T(ms, [1.0, 2.0, 0.5]), T(ms, [2.0, 1.0, 0.5])
    f = lambda a, b: ms.ops.binary_cross_entropy_with_logits(a, b, w, pw)     # noqa: E731
    return ms.grad(f, grad_position=(0, 1))(T(ms, rand(2, 3, seed=1, low=-3, high=3)), T(ms, _probs(2, 3, seed=2)))


# =================================================================================================
# kl_div
@case("losses/kl_div_every_reduction")
def _(ms):
    lp, t = T(ms, _logp(3, 4, seed=1)), T(ms, _dist(3, 4, seed=2))
    return tuple(ms.ops.kl_div(lp, t, r) for r in ("mean", "sum", "none", "batchmean"))


@case("losses/kl_div_zero_labels_and_grad")
def _(ms):
    t = _dist(2, 5, seed=2)
    t[0, 1] = t[1, 3] = 0.0
    lp = T(ms, _logp(2, 5, seed=1))
    return (ms.ops.kl_div(lp, T(ms, t), "none"),
            ms.grad(lambda a: ms.ops.kl_div(a, T(ms, t), "batchmean"))(lp))


# =================================================================================================
# margin losses
@case("losses/margin_ranking")
def _(ms):
    a, b, t = T(ms, rand(6, seed=1)), T(ms, rand(6, seed=2)), T(ms, _signs(6, seed=3))
    g = ms.grad(lambda x1, x2: ms.ops.margin_ranking_loss(x1, x2, t, 0.3), grad_position=(0, 1))(a, b)
    return ms.ops.margin_ranking_loss(a, b, t), ms.ops.margin_ranking_loss(a, b, t, 0.5, "none"), g


@case("losses/cosine_embedding")
def _(ms):
    a, b = T(ms, rand(4, 3, seed=1)), T(ms, rand(4, 3, seed=2))
    t = T(ms, [1, -1, 1, -1])
    g = ms.grad(lambda x1, x2: ms.ops.cosine_embedding_loss(x1, x2, t, -0.5), grad_position=(0, 1))(a, b)
    return (ms.ops.cosine_embedding_loss(a, b, t), ms.ops.cosine_embedding_loss(a, b, t, 0.2, "none"),
            ms.ops.cosine_embedding_loss(a, b, T(ms, [1, -1, 1, -1], np.int32), margin=-1, reduction="sum"), g)


@case("losses/hinge_embedding")
def _(ms):
    x, t = T(ms, rand(3, 4, seed=1, low=-2, high=2)), T(ms, _signs(3, 4, seed=2))
    g = ms.grad(lambda a: ms.ops.hinge_embedding_loss(a, t, 1.5))(x)
    return (ms.ops.hinge_embedding_loss(x, t), ms.ops.hinge_embedding_loss(x, t, 2, "none"),
            ms.ops.hinge_embedding_loss(x, T(ms, _signs(4, seed=3)), margin=0.5, reduction="sum"), g)


@case("losses/multi_margin")
def _(ms):
    x, t = T(ms, rand(5, 4, seed=1, low=-2, high=2)), ms.Tensor(np.array([0, 3, 1, 2, 3], np.int64))
    w = T(ms, [1.0, 2.0, 0.5, 1.5])
    g = ms.grad(lambda a: ms.ops.multi_margin_loss(a, t, margin=2))(x)
    return (ms.ops.multi_margin_loss(x, t), ms.ops.multi_margin_loss(x, t, p=2, margin=2, weight=w, reduction="sum"),
            ms.ops.multi_margin_loss(x, t, reduction="none"), g)


@case("losses/multilabel_soft_margin")
def _(ms):
    x, t = T(ms, rand(3, 4, seed=1, low=-3, high=3)), T(ms, (rand(3, 4, seed=2) > 0).astype(np.float32))
    w = T(ms, [1.0, 2.0, 0.5, 1.5])
    g = ms.grad(lambda a: ms.ops.multilabel_soft_margin_loss(a, t, w))(x)
    return (ms.ops.multilabel_soft_margin_loss(x, t), ms.ops.multilabel_soft_margin_loss(x, t, w, "none"), g)


@case("losses/gaussian_nll")
def _(ms):
    x, y = T(ms, rand(3, 4, seed=1)), T(ms, rand(3, 4, seed=2))
    var = T(ms, rand(3, 4, seed=3, low=0.2, high=2.0))
    g = ms.grad(lambda a, v: ms.ops.gaussian_nll_loss(a, y, v), grad_position=(0, 1))(x, var)
    return (ms.ops.gaussian_nll_loss(x, y, var), ms.ops.gaussian_nll_loss(x, y, var, True, 1e-6, "none"),
            ms.ops.gaussian_nll_loss(x, y, T(ms, rand(3, seed=4, low=0.2, high=2.0)), reduction="sum"), g)


# =================================================================================================
# cross_entropy / nll_loss, the options
@case("losses/cross_entropy_options")
def _(ms):
    x = T(ms, rand(6, 5, seed=1, low=-2, high=2))
    t = ms.Tensor(np.array([0, 4, 2, -100, 1, 3], np.int32))
    w = T(ms, [0.5, 1.0, 2.0, 1.5, 1.0])
    return (ms.ops.cross_entropy(x, t), ms.ops.cross_entropy(x, t, w, label_smoothing=0.1),
            ms.ops.cross_entropy(x, t, w, reduction="sum"), ms.ops.cross_entropy(x, t, reduction="none"),
            ms.ops.cross_entropy(x, ms.Tensor(np.array([0, 4, 2, 2, 1, 3], np.int64)), ignore_index=2))


@case("losses/cross_entropy_probabilities_and_nd")
def _(ms):
    x = T(ms, rand(4, 3, seed=1, low=-2, high=2))
    p = T(ms, _dist(4, 3, seed=2))
    x4 = T(ms, rand(2, 3, 2, 2, seed=3, low=-2, high=2))
    t4 = ms.Tensor(np.array([[[0, 1], [2, 2]], [[1, 0], [0, 2]]], np.int32))
    return (ms.ops.cross_entropy(x, p), ms.ops.cross_entropy(x, p, label_smoothing=0.2, reduction="sum"),
            ms.ops.cross_entropy(x4, t4, reduction="none"), ms.ops.cross_entropy(x4, t4))


@case("losses/cross_entropy_grad_and_f16")
def _(ms):
    x = T(ms, rand(4, 5, seed=1, low=-2, high=2))
    t = ms.Tensor(np.array([1, 0, 4, 2], np.int32))
    w = T(ms, [0.5, 1.0, 2.0, 1.5, 1.0])
    g = ms.grad(lambda a: ms.ops.cross_entropy(a, t, w, label_smoothing=0.1))(x)
    return g, ms.ops.cross_entropy(ms.ops.cast(x, ms.float16), t)


@case("losses/nll_loss_options")
def _(ms):
    lp = T(ms, _logp(5, 4, seed=1))
    t = ms.Tensor(np.array([1, 3, 0, -100, 2], np.int32))
    w = T(ms, [1.0, 2.0, 0.5, 1.5])
    x3 = T(ms, rand(2, 3, 4, seed=2))
    t3 = ms.Tensor(np.array([[0, 1, 2, 1], [2, 2, 0, 1]], np.int32))
    g = ms.grad(lambda a: ms.ops.nll_loss(a, t, w, label_smoothing=0.2))(lp)
    return (ms.ops.nll_loss(lp, t), ms.ops.nll_loss(lp, t, w, reduction="sum"),
            ms.ops.nll_loss(x3, t3, reduction="none"), g)


# =================================================================================================
# nn cells
@case("losses/nn_regression_cells")
def _(ms):
    nn = ms.nn
    x, y = T(ms, rand(3, 4, seed=1, low=-2, high=2)), T(ms, rand(3, 4, seed=2))
    return (nn.L1Loss()(x, y), nn.L1Loss("none")(x, y), nn.MSELoss("sum")(x, y), nn.SmoothL1Loss()(x, y),
            nn.SmoothL1Loss(beta=0.5, reduction="mean")(x, y), nn.HuberLoss(delta=0.5)(x, y),
            nn.HuberLoss("sum")(x, y), nn.RMSELoss()(x, y), nn.MAELoss("sum")(x, y))


@case("losses/nn_bce_cells")
def _(ms):
    nn = ms.nn
    x, y = T(ms, _probs(2, 3, seed=1)), T(ms, _probs(2, 3, seed=2))
    w = T(ms, rand(2, 3, seed=3, low=0.5, high=2.0))
    z = T(ms, rand(2, 3, seed=4, low=-3, high=3))
    return (nn.BCELoss()(x, y), nn.BCELoss(weight=w, reduction="none")(x, y), nn.BCEWithLogitsLoss()(z, y),
            nn.BCEWithLogitsLoss("sum", T(ms, [1.0, 2.0, 0.5]), T(ms, [2.0, 1.0, 1.0]))(z, y))


@case("losses/nn_kl_div_cell")
def _(ms):
    lp, t = T(ms, _logp(3, 4, seed=1)), T(ms, _dist(3, 4, seed=2))
    return tuple(ms.nn.KLDivLoss(r)(lp, t) for r in ("mean", "batchmean", "sum", "none"))


@case("losses/nn_classification_cells")
def _(ms):
    nn = ms.nn
    x = T(ms, rand(4, 5, seed=1, low=-2, high=2))
    t = ms.Tensor(np.array([1, 0, 4, 2], np.int32))
    w = T(ms, [0.5, 1.0, 2.0, 1.5, 1.0])
    return (nn.CrossEntropyLoss()(x, t), nn.CrossEntropyLoss(weight=w, label_smoothing=0.2)(x, t),
            nn.CrossEntropyLoss(reduction="none", ignore_index=4)(x, t),
            nn.NLLLoss(w, reduction="sum")(ms.ops.log_softmax(x, 1), t))


@case("losses/nn_softmax_cross_entropy_with_logits")
def _(ms):
    nn = ms.nn
    x = T(ms, rand(4, 5, seed=1, low=-2, high=2))
    t = ms.Tensor(np.array([1, 0, 4, 2], np.int32))
    onehot = T(ms, np.eye(5)[[1, 0, 4, 2]])
    return (nn.SoftmaxCrossEntropyWithLogits()(x, onehot),
            nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")(x, t),
            nn.SoftmaxCrossEntropyWithLogits(sparse=True)(x, t),
            nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="sum")(x, t),
            nn.SoftmaxCrossEntropyWithLogits(reduction="mean")(x, T(ms, _dist(4, 5, seed=3))))


@case("losses/nn_margin_cells")
def _(ms):
    nn = ms.nn
    x = T(ms, rand(5, 4, seed=1, low=-2, high=2))
    t = ms.Tensor(np.array([0, 3, 1, 2, 3], np.int64))
    a, b = T(ms, rand(4, 3, seed=2)), T(ms, rand(4, 3, seed=3))
    s = T(ms, [1, -1, -1, 1])
    return (nn.MultiMarginLoss()(x, t), nn.MultiMarginLoss(p=2, margin=1.5, reduction="none")(x, t),
            nn.MultiMarginLoss(weight=T(ms, [1.0, 2.0, 0.5, 1.5]))(x, t),
            nn.MarginRankingLoss(0.2)(a[:, 0], b[:, 0], s), nn.CosineEmbeddingLoss(0.1, "none")(a, b, s),
            nn.HingeEmbeddingLoss(1.5)(x, T(ms, _signs(5, 4, seed=4))),
            nn.MultiLabelSoftMarginLoss(reduction="sum")(x, T(ms, (rand(5, 4, seed=5) > 0).astype(np.float32))))


@case("losses/nn_likelihood_cells")
def _(ms):
    nn = ms.nn
    x, y = T(ms, rand(3, 4, seed=1)), T(ms, rand(3, 4, seed=2, low=0, high=3))
    var = T(ms, rand(3, 4, seed=3, low=0.2, high=2.0))
    pos = T(ms, rand(3, 4, seed=4, low=0.1, high=2.0))
    return (nn.GaussianNLLLoss()(x, y, var), nn.GaussianNLLLoss(full=True, reduction="sum")(x, y, var),
            nn.PoissonNLLLoss()(x, y), nn.PoissonNLLLoss(log_input=False, full=True, reduction="none")(pos, y))


@case("losses/nn_loss_value_and_grad_of_network")
def _(ms):
    nn = ms.nn
    net = nn.Dense(4, 3)
    ms_fill = __import__("msdiff").fill_params
    ms_fill(ms, net, seed=7, scale=0.5)
    loss_fn = nn.CrossEntropyLoss(label_smoothing=0.1)
    x, t = T(ms, rand(5, 4, seed=1)), ms.Tensor(np.array([0, 2, 1, 1, 0], np.int32))

    def forward(a, b):
        return loss_fn(net(a), b)
    loss, grads = ms.value_and_grad(forward, None, net.trainable_params())(x, t)
    return loss, grads


@case("losses/nn_bce_logits_cell_grad")
def _(ms):
    loss_fn = ms.nn.BCEWithLogitsLoss(pos_weight=T(ms, [2.0, 1.0, 0.5]))
    y = T(ms, _probs(2, 3, seed=2))
    return ms.grad(lambda z: loss_fn(z, y))(T(ms, rand(2, 3, seed=1, low=-3, high=3)))


# =================================================================================================
# bad input
@case("losses/l1_loss_bad_reduction", raises=True)
def _(ms):
    return ms.ops.l1_loss(T(ms, rand(3)), T(ms, rand(3)), "avg")


@case("losses/smooth_l1_shape_mismatch", raises=True)
def _(ms):
    return ms.ops.smooth_l1_loss(T(ms, rand(2, 2)), T(ms, rand(2)))


@case("losses/smooth_l1_negative_beta", raises=True)
def _(ms):
    return ms.ops.smooth_l1_loss(T(ms, rand(3)), T(ms, rand(3)), -1.0)


@case("losses/bce_probability_above_one", raises=True)
def _(ms):
    return ms.ops.binary_cross_entropy(T(ms, [1.5, 0.5]), T(ms, [0.0, 1.0]))


@case("losses/bce_shape_mismatch", raises=True)
def _(ms):
    return ms.ops.binary_cross_entropy(T(ms, _probs(2, 2)), T(ms, _probs(2)))


@case("losses/bce_int_input", raises=True)
def _(ms):
    return ms.ops.binary_cross_entropy(T(ms, [0, 1], np.int32), T(ms, [0, 1], np.int32))


@case("losses/kl_div_bad_reduction", raises=True)
def _(ms):
    return ms.ops.kl_div(T(ms, _logp(2, 3)), T(ms, _dist(2, 3)), "avg")


@case("losses/kl_div_shape_mismatch", raises=True)
def _(ms):
    return ms.ops.kl_div(T(ms, _logp(2, 3)), T(ms, _dist(3)))


@case("losses/huber_delta_zero", raises=True)
def _(ms):
    return ms.ops.huber_loss(T(ms, rand(3)), T(ms, rand(3)), "mean", 0.0)


@case("losses/margin_ranking_int_margin", raises=True)
def _(ms):
    return ms.ops.margin_ranking_loss(T(ms, rand(3)), T(ms, rand(3)), T(ms, [1, -1, 1]), 1)


@case("losses/cosine_embedding_margin_out_of_range", raises=True)
def _(ms):
    return ms.ops.cosine_embedding_loss(T(ms, rand(2, 3)), T(ms, rand(2, 3)), T(ms, [1, -1]), 2.0)


@case("losses/cosine_embedding_target_shape", raises=True)
def _(ms):
    return ms.ops.cosine_embedding_loss(T(ms, rand(2, 3)), T(ms, rand(2, 3)), T(ms, [1, -1, 1]))


@case("losses/multi_margin_p3", raises=True)
def _(ms):
    return ms.ops.multi_margin_loss(T(ms, rand(2, 3)), ms.Tensor(np.array([0, 1], np.int64)), p=3)


@case("losses/multi_margin_float_margin", raises=True)
def _(ms):
    return ms.ops.multi_margin_loss(T(ms, rand(2, 3)), ms.Tensor(np.array([0, 1], np.int64)), margin=1.5)


@case("losses/multi_margin_1d_input", raises=True)
def _(ms):
    return ms.ops.multi_margin_loss(T(ms, rand(3)), ms.Tensor(np.array(1, np.int64)))


@case("losses/hinge_embedding_int_targets", raises=True)
def _(ms):
    return ms.ops.hinge_embedding_loss(T(ms, rand(2, 2)), T(ms, [[1, -1], [-1, 1]], np.int32))


@case("losses/gaussian_nll_int_eps", raises=True)
def _(ms):
    return ms.ops.gaussian_nll_loss(T(ms, rand(3)), T(ms, rand(3)), T(ms, rand(3, low=0.5, high=1)), eps=1)


@case("losses/bce_with_logits_target_shape", raises=True)
def _(ms):
    return ms.ops.binary_cross_entropy_with_logits(T(ms, rand(2, 3)), T(ms, _probs(3)))


@case("losses/cross_entropy_int_input", raises=True)
def _(ms):
    return ms.ops.cross_entropy(T(ms, [[1, 2]], np.int32), ms.Tensor(np.array([1], np.int32)))


@case("losses/cross_entropy_target_out_of_range", raises=True)
def _(ms):
    return ms.ops.cross_entropy(T(ms, rand(3, 4)), ms.Tensor(np.array([1, 4, 0], np.int32)))


@case("losses/nn_loss_bad_reduction", raises=True)
def _(ms):
    return ms.nn.SmoothL1Loss(reduction="avg")


@case("losses/nn_cosine_embedding_int_margin", raises=True)
def _(ms):
    return ms.nn.CosineEmbeddingLoss(margin=1)


@case("losses/nn_cross_entropy_label_smoothing_above_one", raises=True)
def _(ms):
    return ms.nn.CrossEntropyLoss(label_smoothing=1.5)
