"""Op table: the element-wise and margin losses (ops/prims/composite_losses.py and
`binary_cross_entropy` in loss_ops.py). cross_entropy, nll_loss, mse_loss and
binary_cross_entropy_with_logits have their entries in nn_ops.py.

References are written from the textbook / MindSpore-documented definitions, in float64, with
loops where the loss is defined per sample (multi_margin_loss, cosine_embedding_loss,
triplet_margin_loss), independently of the composites. Samples keep away from the kinks of the
hinge-type losses (|d| = beta, margin crossings), where finite differences are meaningless.
"""
import numpy as np

from ... import ops
from ...common import dtype as mstype
from ..opinfo import OpInfo, SampleInput, noncontig, rand, register

F32_64 = (mstype.float32, mstype.float64)
F16_32_64 = (mstype.float16, mstype.float32, mstype.float64)
HALF_TOLS = {mstype.float16: (5e-3, 5e-3), mstype.float32: (1e-5, 1e-5)}


def _reduce(loss, reduction):
    if reduction == "mean":
        return np.mean(loss)
    if reduction == "sum":
        return np.sum(loss)
    return loss


def _away_from(rng, shape, dtype, kinks, low=-3.0, high=3.0, gap=0.05):
    """Uniform values that keep at least `gap` from every kink."""
    x = rng.uniform(low, high, size=shape)
    for k in kinks:
        close = np.abs(x - k) < gap
        x = np.where(close, k + np.sign(x - k + 1e-12) * gap * 2, x)
    return x.astype(dtype)


def _signs(rng, shape, dtype):
    return np.where(rng.uniform(size=shape) < 0.5, -1.0, 1.0).astype(dtype)


# =================================================================================================
# l1_loss, smooth_l1_loss, huber_loss
def l1_ref(x, y, reduction="mean"):
    return _reduce(np.abs(x - y), reduction)


def _l1_samples(rng, dtype):
    y = rand(rng, (3, 4), dtype)
    yield SampleInput((y + _away_from(rng, (3, 4), dtype, [0.0]), y))
    yield SampleInput((_away_from(rng, (2, 3, 4), dtype, [0.0]), np.zeros(4, dtype)), {"reduction": "sum"},
                      desc="broadcast, sum")
    yield SampleInput((noncontig(_away_from(rng, (4, 3), dtype, [0.0])), np.zeros((4, 3), dtype), "none"),
                      desc="non-contiguous, none")
    yield SampleInput((np.array(1.5, dtype), np.array(-0.5, dtype)), desc="0-d")


def smooth_l1_ref(x, y, beta=1.0, reduction="none"):
    d = np.abs(x - y)
    loss = d if beta == 0 else np.where(d < beta, 0.5 * d * d / beta, d - 0.5 * beta)
    return _reduce(loss, reduction)


def _smooth_l1_samples(rng, dtype):
    z = np.zeros((3, 4), dtype)
    yield SampleInput((_away_from(rng, (3, 4), dtype, [-1.0, 1.0]), z), desc="default: beta 1, none")
    yield SampleInput((_away_from(rng, (3, 4), dtype, [-0.5, 0.5]), z, 0.5, "mean"), desc="beta 0.5, mean")
    yield SampleInput((_away_from(rng, (3, 4), dtype, [-2, 2, 0]), z), {"beta": 2, "reduction": "sum"},
                      desc="int beta, sum")
    yield SampleInput((_away_from(rng, (5,), dtype, [0.0]), np.zeros(5, dtype), 0.0, "sum"), desc="beta 0 = L1")
    yield SampleInput((noncontig(_away_from(rng, (4, 3), dtype, [-1, 1])), np.zeros((4, 3), dtype)),
                      desc="non-contiguous")
    yield SampleInput((np.array([30.0, -30.0], dtype), np.zeros(2, dtype), 1.0, "sum"), desc="far in the L1 branch")


def huber_ref(x, y, reduction="mean", delta=1.0):
    d = np.abs(x - y)
    return _reduce(np.where(d < delta, 0.5 * d * d, delta * (d - 0.5 * delta)), reduction)


def _huber_samples(rng, dtype):
    yield SampleInput((_away_from(rng, (3, 4), dtype, [-1, 1]), np.zeros((3, 4), dtype)))
    yield SampleInput((_away_from(rng, (2, 3), dtype, [-2, 2]), np.zeros(3, dtype), "sum", 2.0),
                      desc="broadcast, delta 2")
    yield SampleInput((_away_from(rng, (4,), dtype, [-0.5, 0.5]), np.zeros(4, dtype)),
                      {"reduction": "none", "delta": 0.5}, desc="none")
    yield SampleInput((np.array(0.3, dtype), np.array(-0.2, dtype)), desc="0-d")


# =================================================================================================
# binary_cross_entropy, kl_div, soft_margin_loss, multilabel_soft_margin_loss
def bce_ref(x, y, weight=None, reduction="mean"):
    loss = -(y * np.log(x) + (1 - y) * np.log(1 - x))
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


def _bce_samples(rng, dtype):
    def probs(shape):
        return rng.uniform(0.05, 0.95, shape).astype(dtype)
    yield SampleInput((probs((3, 4)), probs((3, 4))))
    yield SampleInput((probs((3, 4)), (rng.uniform(size=(3, 4)) < 0.5).astype(dtype), rand(rng, (3, 4), dtype, 0.5, 2)),
                      {"reduction": "sum"}, desc="hard labels, weight, sum")
    yield SampleInput((probs((2, 3)), probs((2, 3)), rand(rng, (3,), dtype, 0.5, 2), "none"), desc="broadcast weight")
    yield SampleInput((noncontig(probs((4, 3))), probs((4, 3))), desc="non-contiguous")
    yield SampleInput((np.array([1e-3, 0.998], dtype), np.array([0.0, 1.0], dtype)), {"reduction": "none"},
                      desc="near-saturated, right answers")


def kl_ref(logits, labels, reduction="mean"):
    loss = np.zeros_like(logits)
    pos = labels > 0
    loss[pos] = labels[pos] * (np.log(labels[pos]) - logits[pos])
    if reduction == "batchmean":
        return np.sum(loss) / logits.shape[0]
    return _reduce(loss, reduction)


def _kl_samples(rng, dtype):
    def logp(shape):
        z = rng.normal(size=shape)
        return (z - np.log(np.exp(z).sum(-1, keepdims=True))).astype(dtype)

    def probs(shape):
        p = rng.uniform(0.1, 1.0, shape)
        return (p / p.sum(-1, keepdims=True)).astype(dtype)
    for red in ("mean", "sum", "none", "batchmean"):
        yield SampleInput((logp((3, 4)), probs((3, 4)), red), desc=red, grad_args=(0,))
    with_zeros = probs((2, 5))
    with_zeros[0, 1] = with_zeros[1, 3] = 0.0
    yield SampleInput((logp((2, 5)), with_zeros), {"reduction": "batchmean"}, desc="zero labels count 0",
                      grad_args=(0,))
    yield SampleInput((np.array(-0.5, dtype), np.array(0.4, dtype)), desc="0-d", grad_args=(0,))
    yield SampleInput((noncontig(logp((4, 3))), probs((4, 3))), desc="non-contiguous", grad_args=(0,))


def soft_margin_ref(x, y, reduction="mean"):
    return _reduce(np.logaddexp(0.0, -y * x), reduction)


def _soft_margin_samples(rng, dtype):
    yield SampleInput((rand(rng, (3, 4), dtype), _signs(rng, (3, 4), dtype)))
    yield SampleInput((rand(rng, (5,), dtype), _signs(rng, (5,), dtype), "sum"))
    yield SampleInput((np.array([-40.0, 40.0, 0.0], dtype), np.array([1.0, 1.0, -1.0], dtype)), {"reduction": "none"},
                      desc="extreme margins")
    yield SampleInput((noncontig(rand(rng, (4, 3), dtype)), _signs(rng, (4, 3), dtype), "none"), desc="non-contiguous")


def multilabel_soft_margin_ref(x, target, weight=None, reduction="mean"):
    per = target * np.logaddexp(0.0, -x) + (1 - target) * np.logaddexp(0.0, x)
    if weight is not None:
        per = per * weight
    return _reduce(per.mean(axis=-1), reduction)


def _multilabel_samples(rng, dtype):
    t = (rng.uniform(size=(3, 4)) < 0.5).astype(dtype)
    yield SampleInput((rand(rng, (3, 4), dtype), t))
    yield SampleInput((rand(rng, (3, 4), dtype), t, rand(rng, (4,), dtype, 0.5, 2)), {"reduction": "none"},
                      desc="class weights, none")
    yield SampleInput((rand(rng, (4,), dtype), t[0], None, "sum"), desc="1-d input")
    yield SampleInput((np.array([[50.0, -50.0]], dtype), np.array([[0.0, 1.0]], dtype)), {"reduction": "none"},
                      desc="large logits stay finite")


# =================================================================================================
# margin losses
def margin_ranking_ref(x1, x2, target, margin=0.0, reduction="mean"):
    return _reduce(np.maximum(0.0, -target * (x1 - x2) + margin), reduction)


def _margin_ranking_samples(rng, dtype):
    def pair(shape, margin):
        x1 = rand(rng, shape, dtype)
        t = _signs(rng, shape, dtype)
        gap = _away_from(rng, shape, dtype, [margin], -2.0, 2.0)     # -t (x1 - x2) stays off -margin
        x2 = (x1 + t * gap).astype(dtype)
        return x1, x2, t
    yield SampleInput(pair((6,), 0.0))
    yield SampleInput(pair((2, 3), 0.5) + (0.5, "none"), desc="margin 0.5, none")
    x1, x2, t = pair((4,), 0.2)
    yield SampleInput((x1, x2, t), {"margin": 0.2, "reduction": "sum"}, desc="keywords, sum")


def hinge_embedding_ref(x, target, margin=1.0, reduction="mean"):
    loss = np.where(target > 0, x, 0.0) + np.where(target < 0, np.maximum(0.0, margin - x), 0.0)
    return _reduce(loss, reduction)


def _hinge_samples(rng, dtype):
    yield SampleInput((_away_from(rng, (3, 4), dtype, [1.0]), _signs(rng, (3, 4), dtype)), grad_args=(0,))
    yield SampleInput((_away_from(rng, (2, 3), dtype, [2.0]), _signs(rng, (3,), dtype), 2, "none"),
                      desc="broadcast targets, int margin", grad_args=(0,))
    yield SampleInput((_away_from(rng, (4,), dtype, [0.5]), np.array([1, -1, 0, -1], dtype), 0.5, "sum"),
                      desc="a zero target counts 0", grad_args=(0,))


def cosine_embedding_ref(x1, x2, target, margin=0.0, reduction="mean"):
    x1, x2 = np.moveaxis(x1, 1, -1), np.moveaxis(x2, 1, -1)
    out = np.zeros(target.shape)
    for idx in np.ndindex(*target.shape):
        a, b = x1[idx], x2[idx]
        cos = np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b))
        out[idx] = 1 - cos if target[idx] == 1 else max(0.0, cos - margin) if target[idx] == -1 else 0.0
    return _reduce(out, reduction)


def _cosine_samples(rng, dtype):
    yield SampleInput((rand(rng, (4, 3), dtype), rand(rng, (4, 3), dtype), _signs(rng, (4,), dtype), -0.9),
                      grad_args=(0, 1))
    yield SampleInput((rand(rng, (3, 5), dtype), rand(rng, (3, 5), dtype), np.array([1, 1, 1], dtype)),
                      {"reduction": "sum"}, desc="all similar", grad_args=(0, 1))
    yield SampleInput((rand(rng, (2, 3, 2), dtype), rand(rng, (2, 3, 2), dtype), np.array([[1, -1], [-1, 1]], np.int32),
                       -1.0, "none"), desc="3-d, int targets", grad_args=(0, 1))


def multi_margin_ref(x, target, p=1, margin=1, weight=None, reduction="mean"):
    n, c = x.shape
    out = np.zeros(n)
    for i in range(n):
        y = target[i]
        for j in range(c):
            if j != y:
                out[i] += max(0.0, margin - x[i, y] + x[i, j]) ** p * (1.0 if weight is None else weight[y])
        out[i] /= c
    return _reduce(out, reduction)


def _multi_margin_samples(rng, dtype):
    t = rng.integers(0, 4, 5)

    def scores(n, margin):
        """Scores whose hinge arguments margin - x_y + x_j all keep 0.05 away from the kink at 0."""
        while True:
            x = rng.uniform(-2, 2, (n, 4))
            hinge = margin - x[np.arange(n), t[:n]][:, None] + x
            if np.abs(hinge).min() > 0.05:
                return x.astype(dtype)
    yield SampleInput((scores(5, 1), t))
    yield SampleInput((scores(5, 2), t, 2, 2, rand(rng, (4,), dtype, 0.5, 2), "sum"), desc="p 2, weight, sum")
    yield SampleInput((scores(3, 1), t[:3].astype(np.int32)), {"reduction": "none"}, desc="int32 targets, none")


def gaussian_nll_ref(x, target, var, full=False, eps=1e-6, reduction="mean"):
    if var.shape != x.shape and x.shape[:-1] == var.shape:
        var = var[..., None]
    v = np.maximum(var, eps)
    loss = 0.5 * (np.log(v) + (x - target) ** 2 / v)
    if full:
        loss = loss + 0.5 * np.log(2 * np.pi)
    return _reduce(loss, reduction)


def _gaussian_samples(rng, dtype):
    yield SampleInput((rand(rng, (3, 4), dtype), rand(rng, (3, 4), dtype), rand(rng, (3, 4), dtype, 0.2, 2)))
    yield SampleInput((rand(rng, (3, 4), dtype), rand(rng, (3, 4), dtype), rand(rng, (3,), dtype, 0.2, 2), True),
                      {"reduction": "none"}, desc="one variance per sample, full")
    yield SampleInput((rand(rng, (2, 3), dtype), rand(rng, (2, 3), dtype), rand(rng, (1, 3), dtype, 0.2, 2)),
                      {"reduction": "sum"}, desc="broadcast variance")


def triplet_ref(a, pos, neg, margin=1.0, p=2, eps=1e-6, swap=False, reduction="mean"):
    out = np.zeros(a.shape[0])
    for i in range(a.shape[0]):
        d_ap = np.sum(np.abs(a[i] - pos[i] + eps) ** p) ** (1.0 / p)
        d_an = np.sum(np.abs(a[i] - neg[i] + eps) ** p) ** (1.0 / p)
        if swap:
            d_an = min(d_an, np.sum(np.abs(pos[i] - neg[i] + eps) ** p) ** (1.0 / p))
        out[i] = max(0.0, margin + d_ap - d_an)
    return _reduce(out, reduction)


def _triplet_samples(rng, dtype):
    a = rand(rng, (4, 3), dtype)
    yield SampleInput((a, a + rand(rng, (4, 3), dtype, -0.3, 0.3), rand(rng, (4, 3), dtype)), {"margin": 2.0})
    yield SampleInput((a, a + rand(rng, (4, 3), dtype, -0.3, 0.3), rand(rng, (4, 3), dtype)),
                      {"margin": 3.0, "p": 1, "reduction": "none"}, desc="p 1, none")
    yield SampleInput((a, rand(rng, (4, 3), dtype), rand(rng, (4, 3), dtype)),
                      {"margin": 5.0, "swap": True, "reduction": "sum"}, desc="swap")


register(
    OpInfo("l1_loss", ops.l1_loss, l1_ref, _l1_samples, dtypes=F16_32_64, tols=HALF_TOLS),
    OpInfo("smooth_l1_loss", ops.smooth_l1_loss, smooth_l1_ref, _smooth_l1_samples, dtypes=F16_32_64, tols=HALF_TOLS),
    OpInfo("huber_loss", ops.huber_loss, huber_ref, _huber_samples, dtypes=F16_32_64, tols=HALF_TOLS),
    OpInfo("binary_cross_entropy", ops.binary_cross_entropy, bce_ref, _bce_samples, dtypes=F16_32_64,
           tols={mstype.float16: (5e-3, 5e-3), mstype.float32: (1e-5, 1e-5)}, fd_eps=1e-7),
    OpInfo("kl_div", ops.kl_div, kl_ref, _kl_samples, dtypes=F16_32_64, tols=HALF_TOLS),
    OpInfo("soft_margin_loss", ops.soft_margin_loss, soft_margin_ref, _soft_margin_samples, tols=HALF_TOLS),
    OpInfo("multilabel_soft_margin_loss", ops.multilabel_soft_margin_loss, multilabel_soft_margin_ref,
           _multilabel_samples, tols=HALF_TOLS),
    OpInfo("margin_ranking_loss", ops.margin_ranking_loss, margin_ranking_ref, _margin_ranking_samples),
    OpInfo("hinge_embedding_loss", ops.hinge_embedding_loss, hinge_embedding_ref, _hinge_samples),
    OpInfo("cosine_embedding_loss", ops.cosine_embedding_loss, cosine_embedding_ref, _cosine_samples, tols=HALF_TOLS),
    OpInfo("multi_margin_loss", ops.multi_margin_loss, multi_margin_ref, _multi_margin_samples),
    OpInfo("gaussian_nll_loss", ops.gaussian_nll_loss, gaussian_nll_ref, _gaussian_samples, tols=HALF_TOLS),
    OpInfo("triplet_margin_loss", ops.triplet_margin_loss, triplet_ref, _triplet_samples, tols=HALF_TOLS),
)
