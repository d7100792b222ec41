"""Op table: the neural-network family (norms, losses, dropout, conv2d, pools) and its backward
primitives.

References are written from the definitions with plain loops, independently of the kernels. The
fused backward primitives (`layer_norm_grad`, `cross_entropy_grad`, ...) have entries of their own:
their forward is checked against the vector-Jacobian product of the *forward reference*, computed by
complex-step differentiation (exact to rounding: d/dx f = Im f(x + ih) / h), and their finite-
difference gradient check is what verifies the hand-written grad-of-grad rules.
"""
import numpy as np

from ... import ops
from ...common import context
from ...common import dtype as mstype
from ...ops.primitive import get_primitive
from ..opinfo import OpInfo, SampleInput, noncontig, rand, register

F32_64 = (mstype.float32, mstype.float64)
F16_32_64 = (mstype.float16, mstype.float32, mstype.float64)


# =================================================================================================
# helpers
def complex_step_vjp(f, args, wrt, cotangents, h=1e-20):
    """Gradients of sum_i <cotangents[i], f(*args)[i]> w.r.t. args[k] for k in `wrt`.

    `f` must be complex-analytic in those args (no abs/max/comparisons on them)."""
    grads = []
    for k in wrt:
        x = np.asarray(args[k], dtype=np.float64)
        g = np.zeros(x.shape)
        for idx in np.ndindex(*x.shape):
            xc = x.astype(np.complex128)
            xc[idx] += 1j * h
            outs = f(*[xc if i == k else a for i, a in enumerate(args)])
            outs = outs if isinstance(outs, tuple) else (outs,)
            g[idx] = sum(np.sum(np.imag(o) * c) for o, c in zip(outs, cotangents)) / h
        grads.append(g)
    return grads


def distinct(rng, shape, dtype, spacing=0.05):
    """Values with no two closer than `spacing` (max-pool windows then have a clear winner)."""
    n = int(np.prod(shape))
    return ((rng.permutation(n) - n / 2) * spacing).reshape(shape).astype(dtype)


def _int_targets(rng, shape, n_classes):
    return rng.integers(0, n_classes, size=shape).astype(np.int64)


def _probs(rng, shape, dtype, axis):
    e = np.exp(rng.uniform(-1, 1, size=shape))
    return (e / e.sum(axis=axis, keepdims=True)).astype(dtype)


# =================================================================================================
# layer_norm, rms_norm
def layer_norm_ref(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    normalized_shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    axes = tuple(range(x.ndim - len(normalized_shape), x.ndim))
    mu = x.mean(axis=axes, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=axes, keepdims=True)
    y = (x - mu) / np.sqrt(var + eps)
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y


def _layer_norm_samples(rng, dtype):
    yield SampleInput((rand(rng, (3, 5), dtype), (5,), rand(rng, (5,), dtype), rand(rng, (5,), dtype)))
    yield SampleInput((rand(rng, (2, 3, 4), dtype), (3, 4), rand(rng, (3, 4), dtype)), desc="2 normalized dims, no bias")
    yield SampleInput((rand(rng, (4, 6), dtype), 6), desc="no affine, int normalized_shape")
    yield SampleInput((rand(rng, (6,), dtype), (6,), None, rand(rng, (6,), dtype)), {"eps": 1e-3}, desc="1-d, bias only")
    yield SampleInput((noncontig(rand(rng, (5, 4), dtype)), (4,), rand(rng, (4,), dtype), rand(rng, (4,), dtype)),
                      desc="non-contiguous")
    yield SampleInput((rand(rng, (3, 4), dtype, 50.0, 60.0), (4,)), desc="large offset (cancellation)")
    yield SampleInput((rand(rng, (0, 4), dtype), (4,), rand(rng, (4,), dtype)), desc="no rows")


def _layer_norm_grad_op(dy, x, w, normalized_shape, eps=1e-5):
    return get_primitive("layer_norm_grad")(dy, x, w, normalized_shape=normalized_shape, eps=eps)


def _layer_norm_grad_ref(dy, x, w, normalized_shape, eps=1e-5):
    lead = tuple(range(x.ndim - len(normalized_shape)))
    wr = w if w is not None else np.ones(normalized_shape)
    dx, dw = complex_step_vjp(lambda x_, w_: layer_norm_ref(x_, normalized_shape, w_, None, eps), (x, wr), (0, 1), (dy,))
    return dx, dw, dy.sum(axis=lead)


def _layer_norm_grad_samples(rng, dtype):
    yield SampleInput((rand(rng, (3, 4), dtype), rand(rng, (3, 4), dtype), rand(rng, (4,), dtype), (4,)))
    yield SampleInput((rand(rng, (2, 2, 3), dtype), rand(rng, (2, 2, 3), dtype), rand(rng, (2, 3), dtype), (2, 3)),
                      {"eps": 1e-2}, desc="2 normalized dims")
    yield SampleInput((rand(rng, (2, 5), dtype), rand(rng, (2, 5), dtype), None, (5,)), desc="no weight")


def rms_norm_ref(x, gamma, epsilon=1e-6):
    axes = tuple(range(x.ndim - gamma.ndim, x.ndim))
    rstd = 1.0 / np.sqrt((x * x).mean(axis=axes, keepdims=True) + epsilon)
    return x * rstd * gamma, rstd


def _rms_norm_samples(rng, dtype):
    yield SampleInput((rand(rng, (3, 5), dtype), rand(rng, (5,), dtype)))
    yield SampleInput((rand(rng, (2, 3, 4), dtype), rand(rng, (4,), dtype)), {"epsilon": 1e-3}, desc="3-d")
    yield SampleInput((rand(rng, (2, 3, 4), dtype), rand(rng, (3, 4), dtype)), desc="2-d gamma")
    yield SampleInput((noncontig(rand(rng, (4, 3), dtype)), rand(rng, (3,), dtype)), desc="non-contiguous")
    yield SampleInput((rand(rng, (5,), dtype), rand(rng, (5,), dtype)), desc="1-d")


def _rms_norm_grad_op(dy, drstd, x, gamma, epsilon=1e-6):
    return get_primitive("rms_norm_grad")(dy, drstd, x, gamma, epsilon=epsilon)


def _rms_norm_grad_ref(dy, drstd, x, gamma, epsilon=1e-6):
    return tuple(complex_step_vjp(lambda x_, g_: rms_norm_ref(x_, g_, epsilon), (x, gamma), (0, 1), (dy, drstd)))


def _rms_norm_grad_samples(rng, dtype):
    yield SampleInput((rand(rng, (3, 4), dtype), rand(rng, (3, 1), dtype), rand(rng, (3, 4), dtype),
                       rand(rng, (4,), dtype)))
    yield SampleInput((rand(rng, (2, 2, 3), dtype), rand(rng, (2, 1, 1), dtype), rand(rng, (2, 2, 3), dtype),
                       rand(rng, (2, 3), dtype)), {"epsilon": 1e-2}, desc="2-d gamma")


# =================================================================================================
# cross_entropy, nll_loss
def _rows_last(a, ndim_x):
    """Class axis last, positions flattened: (M, C)."""
    if ndim_x == 1:
        return a.reshape(1, -1)
    return np.moveaxis(a, 1, -1).reshape(-1, a.shape[1])


def _log_softmax_ref(x):
    cd = 1 if x.ndim >= 2 else 0
    shift = np.max(np.real(x), axis=cd, keepdims=True)          # a constant: keeps complex steps exact
    return x - shift - np.log(np.sum(np.exp(x - shift), axis=cd, keepdims=True))


def nll_loss_ref(logp, target, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    """PyTorch's definitions, one position at a time."""
    n_classes = logp.shape[1 if logp.ndim >= 2 else 0]
    lp = _rows_last(logp, logp.ndim)
    t = np.asarray(target).reshape(-1)
    w = np.ones(n_classes) if weight is None else weight
    ls = label_smoothing
    losses, nll_sum, smooth_sum, denom = [], 0.0, 0.0, 0.0
    for m in range(lp.shape[0]):
        if t[m] == ignore_index:
            losses.append(0.0 * lp[m, 0])
            continue
        nll = -w[t[m]] * lp[m, t[m]]
        smooth = -np.sum(w * lp[m])
        losses.append((1 - ls) * nll + ls / n_classes * smooth)
        nll_sum, smooth_sum, denom = nll_sum + nll, smooth_sum + smooth, denom + w[t[m]]
    if reduction == "none":
        return np.array(losses).reshape(np.shape(target))
    if reduction == "sum":
        return np.sum(np.array(losses)) if losses else np.float64(0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (1 - ls) * nll_sum / np.float64(denom) + ls / n_classes * smooth_sum / np.float64(denom)


def cross_entropy_ref(x, target, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    logp = _log_softmax_ref(x)
    if np.asarray(target).dtype.kind in "iu":
        return nll_loss_ref(logp, target, weight, ignore_index, reduction, label_smoothing)
    n_classes = x.shape[1 if x.ndim >= 2 else 0]
    tp = _rows_last(target, x.ndim) * (1 - label_smoothing) + label_smoothing / n_classes
    w = np.ones(n_classes) if weight is None else weight
    per = -np.sum(_rows_last(logp, x.ndim) * tp * w, axis=1)
    if reduction == "none":
        return per.reshape(x.shape[:1] + x.shape[2:] if x.ndim >= 2 else ())
    return per.sum() if reduction == "sum" else per.sum() / per.shape[0]


def _loss_index_samples(rng, dtype, logits=True):
    make = (lambda s: rand(rng, s, dtype, -3, 3)) if logits else \
        (lambda s: np.log(_probs(rng, s, np.float64, 1 if len(s) >= 2 else 0)).astype(dtype))
    t = _int_targets(rng, (6,), 5)
    yield SampleInput((make((6, 5)), t))
    t_ign = t.copy()
    t_ign[[1, 4]] = -100
    yield SampleInput((make((6, 5)), t_ign), desc="ignore_index rows")
    yield SampleInput((make((6, 5)), t, None, 2), desc="ignore_index=2")
    w = rand(rng, (5,), dtype, 0.2, 2.0)
    yield SampleInput((make((6, 5)), t_ign, w), desc="weights + ignored rows, mean", grad_args=(0,))
    yield SampleInput((make((6, 5)), t_ign, w, -100, "sum", 0.2), desc="weights + smoothing, sum", grad_args=(0,))
    yield SampleInput((make((6, 5)), t_ign, w), {"reduction": "none", "label_smoothing": 0.1}, desc="none",
                      grad_args=(0,))
    yield SampleInput((make((6, 5)), t, None), {"label_smoothing": 0.3}, desc="smoothing, mean")
    yield SampleInput((make((5,)), np.array(3)), desc="(C,) input, 0-d target")
    yield SampleInput((make((2, 4, 3, 2)), _int_targets(rng, (2, 3, 2), 4), rand(rng, (4,), dtype, 0.5, 1.5)),
                      {"label_smoothing": 0.1}, desc="(N, C, d1, d2)", grad_args=(0,))
    yield SampleInput((make((2, 4, 3)), _int_targets(rng, (2, 3), 4)), {"reduction": "none"}, desc="(N, C, d) none")
    yield SampleInput((noncontig(make((5, 6))), _int_targets(rng, (5,), 6)), desc="non-contiguous")
    yield SampleInput((make((3, 4)), np.full(3, -100, np.int64)), desc="all ignored: mean is nan", grad_args=())
    yield SampleInput((make((3, 4)), np.full(3, -100, np.int64)), {"reduction": "sum"}, desc="all ignored, sum")
    yield SampleInput((make((0, 4)), np.zeros(0, np.int64)), {"reduction": "none"}, desc="empty batch, none")
    yield SampleInput((make((0, 4)), np.zeros(0, np.int64)), {"reduction": "sum"}, desc="empty batch, sum")


def _ce_samples(rng, dtype):
    yield from _loss_index_samples(rng, dtype)
    yield SampleInput((rand(rng, (4, 5), dtype, -30, 30), _int_targets(rng, (4,), 5)), desc="large logits")
    yield SampleInput((rand(rng, (4, 5), dtype), _probs(rng, (4, 5), dtype, 1)), desc="probability targets")
    yield SampleInput((rand(rng, (4, 5), dtype), _probs(rng, (4, 5), dtype, 1), rand(rng, (5,), dtype, 0.5, 1.5)),
                      {"label_smoothing": 0.2, "reduction": "sum"}, desc="probabilities + weights + smoothing",
                      grad_args=(0, 1))
    yield SampleInput((rand(rng, (2, 3, 2, 2), dtype), _probs(rng, (2, 3, 2, 2), dtype, 1)),
                      {"reduction": "none", "label_smoothing": 0.1}, desc="probabilities, (N, C, d1, d2)")
    yield SampleInput((rand(rng, (2, 3, 2), dtype), _probs(rng, (2, 3, 2), dtype, 1)), desc="probabilities, mean, (N, C, d)")


def _nll_samples(rng, dtype):
    yield from _loss_index_samples(rng, dtype, logits=False)


def _ce_grad_op(dout, x, target, weight=None, **attrs):
    attrs = {"ignore_index": -100, "reduction": "mean", "label_smoothing": 0.0, **attrs}
    return get_primitive("cross_entropy_grad")(dout, x, target, weight, **attrs)


def _ce_grad_ref(dout, x, target, weight=None, **attrs):
    wrt = (0, 1) if np.asarray(target).dtype.kind == "f" else (0,)
    grads = complex_step_vjp(lambda x_, t_: cross_entropy_ref(x_, t_, weight, **attrs), (x, target), wrt, (dout,))
    return grads[0], _log_softmax_ref(x)


def _ce_grad_samples(rng, dtype):
    t = _int_targets(rng, (4,), 5)
    t[2] = -100
    w = rand(rng, (5,), dtype, 0.5, 1.5)
    yield SampleInput((rand(rng, (), dtype), rand(rng, (4, 5), dtype), t, w), {"label_smoothing": 0.2},
                      desc="index targets, weights, smoothing, mean", grad_args=(0, 1))
    yield SampleInput((rand(rng, (4,), dtype), rand(rng, (4, 5), dtype), t), {"reduction": "none"}, desc="none")
    yield SampleInput((rand(rng, (2, 2), dtype), rand(rng, (2, 3, 2), dtype), _int_targets(rng, (2, 2), 3)),
                      {"reduction": "none", "label_smoothing": 0.1}, desc="(N, C, d), none")
    yield SampleInput((rand(rng, (), dtype), rand(rng, (3, 4), dtype), _probs(rng, (3, 4), dtype, 1), w[:4]),
                      {"label_smoothing": 0.1}, desc="probability targets, mean", grad_args=(0, 1, 2))
    yield SampleInput((rand(rng, (3,), dtype), rand(rng, (3, 4), dtype), _probs(rng, (3, 4), dtype, 1)),
                      {"reduction": "none"}, desc="probability targets, none")


def _nll_grad_op(dout, target, weight, input_shape, **attrs):
    attrs = {"ignore_index": -100, "reduction": "mean", "label_smoothing": 0.0, **attrs}
    return get_primitive("nll_loss_grad")(dout, target, weight, input_shape=input_shape, **attrs)


def _nll_grad_ref(dout, target, weight, input_shape, **attrs):
    logp0 = np.zeros(input_shape)            # the loss is linear in logp: any point will do
    return complex_step_vjp(lambda lp: nll_loss_ref(lp, target, weight, **attrs), (logp0,), (0,), (dout,))[0]


def _nll_grad_samples(rng, dtype):
    t = _int_targets(rng, (4,), 5)
    t[0] = -100
    yield SampleInput((rand(rng, (), dtype), t, rand(rng, (5,), dtype, 0.5, 1.5), (4, 5)), {"label_smoothing": 0.2},
                      grad_args=(0,))
    yield SampleInput((rand(rng, (2, 3), dtype), _int_targets(rng, (2, 3), 4), None, (2, 4, 3)), {"reduction": "none"},
                      desc="(N, C, d), none")


# =================================================================================================
# mse_loss, binary_cross_entropy_with_logits
def mse_loss_ref(x, y, reduction="mean"):
    d = (x - y) ** 2
    return d.mean() if reduction == "mean" else d.sum() if reduction == "sum" else d


def _mse_samples(rng, dtype):
    yield SampleInput((rand(rng, (3, 4), dtype), rand(rng, (3, 4), dtype)))
    yield SampleInput((rand(rng, (3, 4), dtype), rand(rng, (4,), dtype)), {"reduction": "sum"}, desc="broadcast, sum")
    yield SampleInput((rand(rng, (2, 3), dtype), rand(rng, (2, 3), dtype)), {"reduction": "none"}, desc="none")
    yield SampleInput((rand(rng, (), dtype), rand(rng, (), dtype)), desc="0-d")


def bce_with_logits_ref(x, y, weight=None, pos_weight=None, reduction="mean"):
    def log_sigmoid(z):
        return -np.logaddexp(0.0, -z)
    pw = 1.0 if pos_weight is None else pos_weight
    loss = -(pw * y * log_sigmoid(x) + (1 - y) * log_sigmoid(-x))
    if weight is not None:
        loss = loss * weight
    return loss.mean() if reduction == "mean" else loss.sum() if reduction == "sum" else loss


def _bce_samples(rng, dtype):
    y = rng.uniform(0, 1, (3, 4)).astype(dtype)
    yield SampleInput((rand(rng, (3, 4), dtype, -4, 4), y))
    yield SampleInput((rand(rng, (3, 4), dtype, -4, 4), y, rand(rng, (3, 4), dtype, 0.5, 2),
                       rand(rng, (4,), dtype, 0.5, 3)), {"reduction": "none"}, desc="weight + pos_weight, none")
    yield SampleInput((rand(rng, (3, 4), dtype, -4, 4), y, None, rand(rng, (4,), dtype, 0.5, 3), "sum"),
                      desc="pos_weight, sum")
    yield SampleInput((np.array([[-30.0, -8.0, 0.0, 8.0], [30.0, 0.0, -0.5, 0.5]], dtype), y[:2]),
                      desc="extreme and zero logits")


# =================================================================================================
# dropout: random, so the op re-seeds and the reference states the documented RNG contract
def _seeded_dropout(x, p):
    context.set_seed(1234)
    return ops.dropout(x, p)


def _dropout_ref(x, p):
    keep = np.random.default_rng(1234).random(x.shape, dtype=np.float32) >= p
    return np.where(keep, x / (1.0 - p), 0.0)


def _dropout_samples(rng, dtype):
    yield SampleInput((rand(rng, (4, 5), dtype), 0.5))
    yield SampleInput((rand(rng, (3, 2, 4), dtype), 0.1), desc="p=0.1")
    yield SampleInput((noncontig(rand(rng, (4, 3), dtype)), 0.3), desc="non-contiguous")


# =================================================================================================
# conv2d and its backward primitives
def _conv_pads(x_hw, w_hw, stride, pad_mode, padding, dilation):
    if pad_mode == "same":
        pads = []
        for size, k, s, d in zip(x_hw, w_hw, stride, dilation):
            out = -(-size // s)
            total = max((out - 1) * s + (k - 1) * d + 1 - size, 0)
            pads += [total // 2, total - total // 2]
        return tuple(pads)
    if isinstance(padding, int):
        return (padding,) * 4
    return (padding[0], padding[0], padding[1], padding[1]) if len(padding) == 2 else tuple(padding)


def conv2d_ref(x, w, b=None, stride=1, pad_mode="valid", padding=0, dilation=1, groups=1):
    """Direct definition: out[n, o] = sum_{c, i, j} w[o, c, i, j] * x_pad[n, g*Cg + c, shifted by (i, j)]."""
    stride = (stride, stride) if isinstance(stride, int) else tuple(stride)
    dilation = (dilation, dilation) if isinstance(dilation, int) else tuple(dilation)
    pt, pb, pl, pr = _conv_pads(x.shape[2:], w.shape[2:], stride, pad_mode, padding, dilation)
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    n, cout, (cg, kh, kw) = x.shape[0], w.shape[0], w.shape[1:]
    oh = (xp.shape[2] - (kh - 1) * dilation[0] - 1) // stride[0] + 1
    ow = (xp.shape[3] - (kw - 1) * dilation[1] - 1) // stride[1] + 1
    out = np.zeros((n, cout, oh, ow), dtype=np.result_type(x, w))
    per_group = cout // groups
    for o in range(cout):
        g = o // per_group
        for c in range(cg):
            for i in range(kh):
                for j in range(kw):
                    r0, c0 = i * dilation[0], j * dilation[1]
                    patch = xp[:, g * cg + c, r0:r0 + (oh - 1) * stride[0] + 1:stride[0],
                               c0:c0 + (ow - 1) * stride[1] + 1:stride[1]]
                    out[:, o] += w[o, c, i, j] * patch
    if b is not None:
        out = out + b.reshape(1, -1, 1, 1)
    return out


def _conv_samples(rng, dtype):
    yield SampleInput((rand(rng, (2, 3, 6, 6), dtype), rand(rng, (4, 3, 3, 3), dtype)))
    yield SampleInput((rand(rng, (2, 3, 6, 6), dtype), rand(rng, (4, 3, 3, 3), dtype), rand(rng, (4,), dtype)),
                      {"stride": 2}, desc="bias, stride 2")
    yield SampleInput((rand(rng, (1, 2, 5, 7), dtype), rand(rng, (3, 2, 2, 3), dtype)),
                      {"pad_mode": "pad", "padding": (1, 0, 2, 1), "stride": (2, 1)}, desc="asymmetric pad, rect")
    yield SampleInput((rand(rng, (1, 2, 5, 6), dtype), rand(rng, (2, 2, 3, 3), dtype)),
                      {"pad_mode": "same", "stride": 2}, desc="same, stride 2")
    yield SampleInput((rand(rng, (1, 2, 7, 7), dtype), rand(rng, (2, 2, 3, 2), dtype)),
                      {"dilation": 2, "pad_mode": "pad", "padding": 1}, desc="dilation 2")
    yield SampleInput((rand(rng, (2, 4, 5, 5), dtype), rand(rng, (6, 2, 3, 3), dtype)), {"groups": 2}, desc="groups 2")
    yield SampleInput((rand(rng, (1, 3, 5, 5), dtype), rand(rng, (3, 1, 3, 3), dtype)),
                      {"groups": 3, "pad_mode": "same"}, desc="depthwise")
    yield SampleInput((noncontig(rand(rng, (1, 2, 5, 5), dtype)), noncontig(rand(rng, (2, 2, 2, 2), dtype))),
                      desc="non-contiguous")
    yield SampleInput((rand(rng, (0, 2, 4, 4), dtype), rand(rng, (3, 2, 2, 2), dtype)), desc="empty batch")


def _conv_prim_attrs(kw):
    return {"stride": kw.get("stride", (1, 1)), "pads": kw.get("pads", (0, 0, 0, 0)),
            "dilation": kw.get("dilation", (1, 1)), "groups": kw.get("groups", 1)}


def _conv_ref_from_attrs(x, w, attrs):
    return conv2d_ref(x, w, None, attrs["stride"], "pad", attrs["pads"], attrs["dilation"], attrs["groups"])


# conv2d and avg_pool2d are linear in the differentiated input, so the complex step is exact for any
# step size and at any point: h = 1 at zero.
def _bp_input_op(dy, w, x_shape, **kw):
    return get_primitive("conv2d_backprop_input")(dy, w, x_shape=x_shape, **_conv_prim_attrs(kw))


def _bp_input_ref(dy, w, x_shape, **kw):
    attrs = _conv_prim_attrs(kw)
    return complex_step_vjp(lambda x_: _conv_ref_from_attrs(x_, w, attrs), (np.zeros(x_shape),), (0,), (dy,), h=1.0)[0]


def _bp_filter_op(dy, x, w_shape, **kw):
    return get_primitive("conv2d_backprop_filter")(dy, x, w_shape=w_shape, **_conv_prim_attrs(kw))


def _bp_filter_ref(dy, x, w_shape, **kw):
    attrs = _conv_prim_attrs(kw)
    return complex_step_vjp(lambda w_: _conv_ref_from_attrs(x, w_, attrs), (np.zeros(w_shape),), (0,), (dy,), h=1.0)[0]


def _bp_samples(which):
    cases = [((1, 2, 5, 5), (3, 2, 3, 3), {}),
             ((2, 2, 6, 5), (2, 1, 2, 2), {"stride": (2, 2), "pads": (1, 0, 0, 1), "groups": 2}),
             ((1, 1, 7, 6), (2, 1, 2, 3), {"dilation": (2, 1), "stride": (1, 2)})]

    def samples(rng, dtype):
        for xs, ws, kw in cases:
            a = _conv_prim_attrs(kw)
            ys = (xs[0], ws[0]) + tuple(_pool_out(xs[2 + i], ws[2 + i], a["stride"][i], a["dilation"][i],
                                                  a["pads"][2 * i], a["pads"][2 * i + 1], False) for i in range(2))
            other = rand(rng, ws, dtype) if which == "input" else rand(rng, xs, dtype)
            yield SampleInput((rand(rng, ys, dtype), other, xs if which == "input" else ws), kw)
    return samples


# =================================================================================================
# pools
def _pool_out(size, k, s, d, lo, hi, ceil):
    span = size + lo + hi - (k - 1) * d - 1
    n = -(-span // s) + 1 if ceil else span // s + 1
    if ceil and (n - 1) * s >= size + lo:
        n -= 1
    return n


def max_pool2d_ref(x, kernel_size, stride=None, padding=0, dilation=1, return_indices=False, ceil_mode=False):
    """Loop over every output and every in-range kernel tap; first maximum wins (PyTorch)."""
    kh, kw = (kernel_size, kernel_size) if isinstance(kernel_size, int) else kernel_size
    sh, sw = (kh, kw) if stride is None else (stride, stride) if isinstance(stride, int) else stride
    ph, pw = (padding, padding) if isinstance(padding, int) else padding
    dh, dw = (dilation, dilation) if isinstance(dilation, int) else dilation
    n, c, h, w = x.shape
    oh, ow = _pool_out(h, kh, sh, dh, ph, ph, ceil_mode), _pool_out(w, kw, sw, dw, pw, pw, ceil_mode)
    y = np.zeros((n, c, oh, ow))
    idx = np.zeros((n, c, oh, ow), dtype=np.int64)
    for a in range(n):
        for b in range(c):
            for i in range(oh):
                for j in range(ow):
                    best, where = -np.inf, -1
                    for u in range(kh):
                        for v in range(kw):
                            r, q = i * sh - ph + u * dh, j * sw - pw + v * dw
                            if 0 <= r < h and 0 <= q < w and (x[a, b, r, q] > best or where < 0):
                                best, where = x[a, b, r, q], r * w + q
                    y[a, b, i, j], idx[a, b, i, j] = best, where
    return (y, idx) if return_indices else y


def _max_pool_samples(rng, dtype):
    yield SampleInput((distinct(rng, (2, 3, 6, 6), dtype), 2), desc="2x2 stride 2 (LeNet)")
    yield SampleInput((distinct(rng, (1, 2, 5, 5), dtype), 3, 1), desc="3x3 stride 1, overlapping")
    yield SampleInput((distinct(rng, (1, 2, 5, 6), dtype), (3, 2), (2, 1), (1, 1)), {"return_indices": True},
                      desc="padding, indices")
    yield SampleInput((distinct(rng, (1, 1, 7, 7), dtype), 2), {"dilation": 2, "stride": 2}, desc="dilation 2")
    yield SampleInput((distinct(rng, (1, 2, 5, 5), dtype), 2), {"ceil_mode": True, "return_indices": True},
                      desc="ceil_mode")
    yield SampleInput((noncontig(distinct(rng, (1, 1, 4, 4), dtype)), 2), desc="non-contiguous")


def _max_pool_grad_op(dy, argmax, x_shape):
    return get_primitive("max_pool2d_grad")(dy, argmax, x_shape=x_shape)


def _max_pool_grad_ref(dy, argmax, x_shape):
    dx = np.zeros(x_shape)
    for a, b, i, j in np.ndindex(*dy.shape):
        dx[a, b].flat[argmax[a, b, i, j]] += dy[a, b, i, j]
    return dx


def _max_pool_grad_grad_op(a, argmax):
    return get_primitive("max_pool2d_grad_grad")(a, argmax)


def _max_pool_grad_grad_ref(a, argmax):
    out = np.zeros(argmax.shape)
    for n, c, i, j in np.ndindex(*argmax.shape):
        out[n, c, i, j] = a[n, c].flat[argmax[n, c, i, j]]
    return out


def _argmax_cases(rng):
    for xs, args in (((1, 2, 5, 5), (3, 1)), ((2, 1, 6, 6), (2,)), ((1, 1, 5, 6), ((3, 2), (2, 1), (1, 1)))):
        yield xs, max_pool2d_ref(distinct(rng, xs, np.float64), *args, return_indices=True)[1]


def _max_pool_grad_samples(rng, dtype):
    for xs, idx in _argmax_cases(rng):
        yield SampleInput((rand(rng, idx.shape, dtype), idx, xs))


def _max_pool_grad_grad_samples(rng, dtype):
    for xs, idx in _argmax_cases(rng):
        yield SampleInput((rand(rng, xs, dtype), idx))


def avg_pool2d_ref(x, kernel_size=1, stride=1, padding=0, ceil_mode=False, count_include_pad=True,
                   divisor_override=0):
    kh, kw = (kernel_size, kernel_size) if isinstance(kernel_size, int) else kernel_size
    sh, sw = (stride, stride) if isinstance(stride, int) else stride
    pt, pb, pl, pr = (padding,) * 4 if isinstance(padding, int) else padding
    n, c, h, w = x.shape
    oh, ow = _pool_out(h, kh, sh, 1, pt, pb, ceil_mode), _pool_out(w, kw, sw, 1, pl, pr, ceil_mode)
    y = np.zeros((n, c, oh, ow), dtype=x.dtype)
    for i in range(oh):
        for j in range(ow):
            r0, c0 = i * sh - pt, j * sw - pl
            r1, c1 = min(r0 + kh, h + pb), min(c0 + kw, w + pr)
            padded_count = (r1 - r0) * (c1 - c0)
            r0c, c0c, r1c, c1c = max(r0, 0), max(c0, 0), min(r1, h), min(c1, w)
            total = x[:, :, r0c:r1c, c0c:c1c].sum(axis=(2, 3))
            div = divisor_override or (padded_count if count_include_pad else (r1c - r0c) * (c1c - c0c))
            y[:, :, i, j] = total / div
    return y


def _avg_pool_samples(rng, dtype):
    yield SampleInput((rand(rng, (2, 3, 6, 6), dtype), 2, 2), desc="2x2 stride 2 (LeNet)")
    yield SampleInput((rand(rng, (1, 2, 5, 5), dtype), 3, 1, 1), {"count_include_pad": False},
                      desc="3x3, pad 1, exclude pad")
    yield SampleInput((rand(rng, (1, 2, 5, 5), dtype), 3, 2, 1), desc="pad 1, include pad")
    yield SampleInput((rand(rng, (1, 2, 6, 7), dtype), (3, 2), (2, 2), (1, 0, 0, 1)), {"ceil_mode": True},
                      desc="ceil_mode, asymmetric pad")
    yield SampleInput((rand(rng, (1, 2, 5, 5), dtype), 2, 2, 1), {"ceil_mode": True, "count_include_pad": False},
                      desc="ceil_mode, exclude pad")
    yield SampleInput((rand(rng, (1, 1, 4, 4), dtype), 2, 1), {"divisor_override": 3}, desc="divisor_override")
    yield SampleInput((noncontig(rand(rng, (1, 1, 4, 6), dtype)), 2, 2), desc="non-contiguous")


def _avg_pool_grad_op(dy, x_shape, kernel, stride, pads, ceil_mode=False, count_include_pad=True, divisor_override=0):
    return get_primitive("avg_pool2d_grad")(dy, x_shape=x_shape, kernel=kernel, stride=stride, pads=pads,
                                            ceil_mode=ceil_mode, count_include_pad=count_include_pad,
                                            divisor_override=divisor_override)


def _avg_pool_grad_ref(dy, x_shape, kernel, stride, pads, **kw):
    return complex_step_vjp(lambda x_: avg_pool2d_ref(x_, kernel, stride, pads, **kw), (np.zeros(x_shape),), (0,),
                            (dy,), h=1.0)[0]


def _avg_pool_grad_samples(rng, dtype):
    yield SampleInput((rand(rng, (1, 2, 3, 3), dtype), (1, 2, 6, 6), (2, 2), (2, 2), (0, 0, 0, 0)))
    yield SampleInput((rand(rng, (1, 1, 3, 3), dtype), (1, 1, 5, 5), (3, 3), (2, 2), (1, 1, 1, 1)),
                      {"count_include_pad": False}, desc="pad, exclude pad")
    yield SampleInput((rand(rng, (1, 1, 3, 3), dtype), (1, 1, 6, 5), (3, 2), (2, 2), (1, 0, 0, 1)),
                      {"ceil_mode": True}, desc="ceil_mode")


# =================================================================================================
register(
    OpInfo("layer_norm", ops.layer_norm, layer_norm_ref, _layer_norm_samples, dtypes=F16_32_64,
           tols={mstype.float16: (5e-3, 5e-3), mstype.float32: (1e-5, 2e-5)}),
    OpInfo("layer_norm_grad", _layer_norm_grad_op, _layer_norm_grad_ref, _layer_norm_grad_samples,
           tols={mstype.float32: (1e-4, 1e-5), mstype.float64: (1e-7, 1e-8)}, primitive="layer_norm_grad"),
    OpInfo("rms_norm", ops.rms_norm, rms_norm_ref, _rms_norm_samples, dtypes=F16_32_64,
           tols={mstype.float16: (5e-3, 5e-3)}),
    OpInfo("rms_norm_grad", _rms_norm_grad_op, _rms_norm_grad_ref, _rms_norm_grad_samples,
           tols={mstype.float32: (1e-4, 1e-5), mstype.float64: (1e-7, 1e-8)}, primitive="rms_norm_grad"),
    OpInfo("cross_entropy", ops.cross_entropy, cross_entropy_ref, _ce_samples, dtypes=F16_32_64,
           tols={mstype.float16: (5e-3, 5e-3), mstype.float32: (1e-5, 1e-5)}),
    OpInfo("cross_entropy_grad", _ce_grad_op, _ce_grad_ref, _ce_grad_samples,
           tols={mstype.float32: (1e-5, 1e-6), mstype.float64: (1e-7, 1e-9)}, primitive="cross_entropy_grad"),
    OpInfo("nll_loss", ops.nll_loss, nll_loss_ref, _nll_samples),
    OpInfo("nll_loss_grad", _nll_grad_op, _nll_grad_ref, _nll_grad_samples, primitive="nll_loss_grad"),
    OpInfo("mse_loss", ops.mse_loss, mse_loss_ref, _mse_samples, dtypes=F16_32_64,
           tols={mstype.float16: (5e-3, 5e-3)}),
    OpInfo("binary_cross_entropy_with_logits", ops.binary_cross_entropy_with_logits, bce_with_logits_ref,
           _bce_samples, tols={mstype.float32: (1e-5, 1e-5)}),
    OpInfo("dropout", _seeded_dropout, _dropout_ref, _dropout_samples, grad_output=0,
           notes="random: the op re-seeds the global RNG; the reference states the RNG contract"),
    OpInfo("conv2d", ops.conv2d, conv2d_ref, _conv_samples, dtypes=F16_32_64,
           tols={mstype.float16: (1e-2, 1e-2), mstype.float32: (1e-5, 1e-5)}),
    OpInfo("conv2d_backprop_input", _bp_input_op, _bp_input_ref, _bp_samples("input"),
           tols={mstype.float32: (1e-5, 1e-5)}, primitive="conv2d_backprop_input"),
    OpInfo("conv2d_backprop_filter", _bp_filter_op, _bp_filter_ref, _bp_samples("filter"),
           tols={mstype.float32: (1e-5, 1e-5)}, primitive="conv2d_backprop_filter"),
    OpInfo("max_pool2d", ops.max_pool2d, max_pool2d_ref, _max_pool_samples, dtypes=F16_32_64, grad_output=0),
    OpInfo("max_pool2d_grad", _max_pool_grad_op, _max_pool_grad_ref, _max_pool_grad_samples,
           primitive="max_pool2d_grad"),
    OpInfo("max_pool2d_grad_grad", _max_pool_grad_grad_op, _max_pool_grad_grad_ref, _max_pool_grad_grad_samples,
           primitive="max_pool2d_grad_grad"),
    OpInfo("avg_pool2d", ops.avg_pool2d, avg_pool2d_ref, _avg_pool_samples, dtypes=F16_32_64,
           tols={mstype.float16: (5e-3, 5e-3)}),
    OpInfo("avg_pool2d_grad", _avg_pool_grad_op, _avg_pool_grad_ref, _avg_pool_grad_samples,
           primitive="avg_pool2d_grad"),
)
