"""Op table: the ops behind the standard layers (batch_norm, group_norm, conv1d, conv_transpose2d,
avg_pool1d, the adaptive pools, dropout2d) and their backward primitives.

References are written from the definitions with plain loops, independently of the kernels; the
fused backward primitives are checked against complex-step VJPs of the forward references, and
their finite-difference checks verify the hand-written second-order rules.
"""
import numpy as np

from ... import ops
from ...common import context
from ...common import dtype as mstype
from ...common.tensor import Tensor
from ...ops.primitive import get_primitive
from ..opinfo import OpInfo, SampleInput, noncontig, positive, rand, register
from .nn_ops import complex_step_vjp, conv2d_ref, distinct

F16_32_64 = (mstype.float16, mstype.float32, mstype.float64)


# =================================================================================================
# batch_norm
def _channel_shape(x):
    return (1, x.shape[1]) + (1,) * (x.ndim - 2)


def _bn_axes(x):
    return (0,) + tuple(range(2, x.ndim))


def bn_train_ref(x, weight=None, bias=None, eps=1e-5):
    """Batch statistics per channel (biased variance), then the affine map."""
    axes = _bn_axes(x)
    mu = x.mean(axis=axes, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=axes, keepdims=True)
    y = (x - mu) / np.sqrt(var + eps)
    if weight is not None:
        y = y * weight.reshape(_channel_shape(x))
    if bias is not None:
        y = y + bias.reshape(_channel_shape(x))
    return y


def bn_eval_ref(x, running_mean, running_var, weight, bias, training=False, momentum=0.1, eps=1e-5):
    cs = _channel_shape(x)
    y = (x - running_mean.reshape(cs)) / np.sqrt(running_var.reshape(cs) + eps)
    return y * weight.reshape(cs) + bias.reshape(cs)


def _bn_eval_samples(rng, dtype):
    c = 3
    def stats():
        return rand(rng, (c,), dtype), positive(rng, (c,), dtype), rand(rng, (c,), dtype), rand(rng, (c,), dtype)
    yield SampleInput((rand(rng, (4, c, 2, 3), dtype),) + stats())
    yield SampleInput((rand(rng, (5, c), dtype),) + stats(), {"eps": 1e-2}, desc="2-d input")
    yield SampleInput((rand(rng, (2, c, 4), dtype),) + stats(), desc="3-d input")
    yield SampleInput((noncontig(rand(rng, (2, c, 3, 2), dtype)),) + stats(), desc="non-contiguous")
    yield SampleInput((rand(rng, (1, c, 1, 2, 2), dtype),) + stats(), desc="5-d input")


def _bn_train_op(x, weight=None, bias=None, eps=1e-5):
    # fresh running statistics per call: the op updates them in place
    c = x.shape[1]
    rm, rv = Tensor(np.zeros(c, np.float32)), Tensor(np.ones(c, np.float32))
    return ops.batch_norm(x, rm, rv, weight, bias, training=True, eps=eps)


def _bn_train_samples(rng, dtype):
    yield SampleInput((rand(rng, (4, 3, 2, 2), dtype), rand(rng, (3,), dtype), rand(rng, (3,), dtype)))
    yield SampleInput((rand(rng, (6, 2), dtype), rand(rng, (2,), dtype), rand(rng, (2,), dtype)), {"eps": 1e-3},
                      desc="2-d input")
    yield SampleInput((rand(rng, (3, 2, 5), dtype), None, rand(rng, (2,), dtype)), desc="3-d, no weight")
    yield SampleInput((rand(rng, (2, 2, 3, 3), dtype, 50.0, 60.0), rand(rng, (2,), dtype), None),
                      desc="large offset, no bias")
    yield SampleInput((noncontig(rand(rng, (3, 2, 2, 2), dtype)), rand(rng, (2,), dtype), rand(rng, (2,), dtype)),
                      desc="non-contiguous")


def _bn_running_op(x, running_mean, running_var, momentum):
    rm, rv = Tensor(running_mean.asnumpy()), Tensor(running_var.asnumpy())
    ops.batch_norm(x, rm, rv, None, None, training=True, momentum=momentum)
    return rm, rv


def _bn_running_ref(x, running_mean, running_var, momentum):
    axes = _bn_axes(x)
    n = x.size // x.shape[1]
    mu = x.mean(axis=axes)
    var = ((x - mu.reshape(_channel_shape(x))) ** 2).sum(axis=axes) / (n - 1)      # unbiased
    return (1 - momentum) * running_mean + momentum * mu, (1 - momentum) * running_var + momentum * var


def _bn_running_samples(rng, dtype):
    yield SampleInput((rand(rng, (4, 3, 2, 2), dtype), rand(rng, (3,), dtype), positive(rng, (3,), dtype), 0.1))
    yield SampleInput((rand(rng, (5, 2), dtype, 0, 4), rand(rng, (2,), dtype), positive(rng, (2,), dtype), 0.7),
                      desc="2-d input")


def _bn_grad_op(dy, x, w, eps=1e-5):
    return get_primitive("batch_norm_grad")(dy, x, w, eps=eps)


def _bn_grad_ref(dy, x, w, eps=1e-5):
    c = x.shape[1]
    wr = w if w is not None else np.ones(c)
    dx, dw = complex_step_vjp(lambda x_, w_: bn_train_ref(x_, w_, None, eps), (x, wr), (0, 1), (dy,))
    return dx, dw, dy.sum(axis=_bn_axes(x))


def _bn_grad_samples(rng, dtype):
    yield SampleInput((rand(rng, (3, 2, 2, 2), dtype), rand(rng, (3, 2, 2, 2), dtype), rand(rng, (2,), dtype)))
    yield SampleInput((rand(rng, (4, 3), dtype), rand(rng, (4, 3), dtype), rand(rng, (3,), dtype)), {"eps": 1e-2},
                      desc="2-d")
    yield SampleInput((rand(rng, (2, 2, 3), dtype), rand(rng, (2, 2, 3), dtype), None), desc="no weight")


# =================================================================================================
# group_norm
def group_norm_ref(x, num_groups, weight=None, bias=None, eps=1e-5):
    n, c = x.shape[:2]
    xg = x.reshape(n, num_groups, -1)
    mu = xg.mean(axis=2, keepdims=True)
    var = ((xg - mu) ** 2).mean(axis=2, keepdims=True)
    y = ((xg - mu) / np.sqrt(var + eps)).reshape(x.shape)
    if weight is not None:
        y = y * weight.reshape(_channel_shape(x))
    if bias is not None:
        y = y + bias.reshape(_channel_shape(x))
    return y


def _gn_samples(rng, dtype):
    yield SampleInput((rand(rng, (2, 4, 3, 2), dtype), 2, rand(rng, (4,), dtype), rand(rng, (4,), dtype)))
    yield SampleInput((rand(rng, (3, 6), dtype), 3, rand(rng, (6,), dtype), rand(rng, (6,), dtype)), desc="2-d")
    yield SampleInput((rand(rng, (2, 4, 5), dtype), 4), {"eps": 1e-3}, desc="instance norm (groups = C), no affine")
    yield SampleInput((rand(rng, (2, 3, 2, 2), dtype), 1, rand(rng, (3,), dtype)), desc="one group, weight only")
    yield SampleInput((noncontig(rand(rng, (2, 4, 2, 2), dtype)), 2, rand(rng, (4,), dtype), None),
                      desc="non-contiguous")


def _gn_grad_op(dy, x, w, num_groups, eps=1e-5):
    return get_primitive("group_norm_grad")(dy, x, w, num_groups=num_groups, eps=eps)


def _gn_grad_ref(dy, x, w, num_groups, eps=1e-5):
    wr = w if w is not None else np.ones(x.shape[1])
    dx, dw = complex_step_vjp(lambda x_, w_: group_norm_ref(x_, num_groups, w_, None, eps), (x, wr), (0, 1), (dy,))
    return dx, dw, dy.sum(axis=_bn_axes(x))


def _gn_grad_samples(rng, dtype):
    yield SampleInput((rand(rng, (2, 4, 2), dtype), rand(rng, (2, 4, 2), dtype), rand(rng, (4,), dtype), 2))
    yield SampleInput((rand(rng, (2, 3, 2, 2), dtype), rand(rng, (2, 3, 2, 2), dtype), None, 3), {"eps": 1e-2},
                      desc="no weight, groups = C")


# =================================================================================================
# conv1d, conv_transpose2d
def conv1d_ref(x, w, b=None, stride=1, pad_mode="valid", padding=0, dilation=1, groups=1):
    out = conv2d_ref(x[:, :, None, :], w[:, :, None, :], b, (1, stride), pad_mode, (0, 0, padding, padding),
                     (1, dilation), groups)
    return out[:, :, 0, :]


def _conv1d_samples(rng, dtype):
    yield SampleInput((rand(rng, (2, 3, 8), dtype), rand(rng, (4, 3, 3), dtype)))
    yield SampleInput((rand(rng, (2, 3, 8), dtype), rand(rng, (4, 3, 3), dtype), rand(rng, (4,), dtype)),
                      {"stride": 2, "pad_mode": "same"}, desc="bias, same, stride 2")
    yield SampleInput((rand(rng, (1, 4, 9), dtype), rand(rng, (2, 2, 2), dtype)),
                      {"pad_mode": "pad", "padding": 1, "dilation": 2, "groups": 2}, desc="pad, dilation, groups")
    yield SampleInput((noncontig(rand(rng, (2, 2, 6), dtype)), rand(rng, (3, 2, 2), dtype)), desc="non-contiguous")


def conv_transpose2d_ref(x, w, b=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """Scatter definition: input pixel (i, j) adds w[c, o, u, v] * x at output (i*s - p + u*d, j*s - p + v*d)."""
    def two(v):
        return (v, v) if isinstance(v, int) else tuple(v)
    (sh, sw), (ph, pw), (oph, opw), (dh, dw) = two(stride), two(padding), two(output_padding), two(dilation)
    n, cin, h, wd = x.shape
    _, cg, kh, kw = w.shape
    oh = (h - 1) * sh - 2 * ph + dh * (kh - 1) + oph + 1
    ow = (wd - 1) * sw - 2 * pw + dw * (kw - 1) + opw + 1
    out = np.zeros((n, cg * groups, oh, ow), dtype=np.result_type(x, w))
    per = cin // groups
    for c in range(cin):
        g = c // per
        for o in range(cg):
            for i in range(h):
                for j in range(wd):
                    for u in range(kh):
                        for v in range(kw):
                            r, q = i * sh - ph + u * dh, j * sw - pw + v * dw
                            if 0 <= r < oh and 0 <= q < ow:
                                out[:, g * cg + o, r, q] += w[c, o, u, v] * x[:, c, i, j]
    if b is not None:
        out = out + b.reshape(1, -1, 1, 1)
    return out


def _conv_t_samples(rng, dtype):
    yield SampleInput((rand(rng, (2, 3, 3, 3), dtype), rand(rng, (3, 2, 3, 3), dtype)))
    yield SampleInput((rand(rng, (1, 2, 3, 2), dtype), rand(rng, (2, 3, 3, 2), dtype), rand(rng, (3,), dtype)),
                      {"stride": 2, "padding": 1, "output_padding": 1}, desc="stride 2, padding, output_padding, bias")
    yield SampleInput((rand(rng, (1, 4, 3, 3), dtype), rand(rng, (4, 1, 2, 2), dtype)),
                      {"groups": 2, "dilation": 2, "stride": (1, 2)}, desc="groups, dilation, rect stride")
    yield SampleInput((noncontig(rand(rng, (1, 2, 3, 3), dtype)), rand(rng, (2, 2, 2, 2), dtype)),
                      desc="non-contiguous")


# =================================================================================================
# pools
def avg_pool1d_ref(x, kernel_size=1, stride=1, padding=0, ceil_mode=False, count_include_pad=True):
    from .nn_ops import avg_pool2d_ref
    return avg_pool2d_ref(x[:, :, None, :], (1, kernel_size), (1, stride), (0, 0, padding, padding), ceil_mode,
                          count_include_pad)[:, :, 0, :]


def _avg_pool1d_samples(rng, dtype):
    yield SampleInput((rand(rng, (2, 3, 8), dtype), 2, 2))
    yield SampleInput((rand(rng, (1, 2, 9), dtype), 3, 2, 1), {"count_include_pad": False}, desc="pad, exclude pad")
    yield SampleInput((rand(rng, (1, 2, 8), dtype), 3, 2), {"ceil_mode": True}, desc="ceil_mode")
    yield SampleInput((noncontig(rand(rng, (2, 2, 6), dtype)), 3, 1, 1), desc="non-contiguous, pad")


def _windows_1d(size, out):
    return [((i * size) // out, -((-(i + 1) * size) // out)) for i in range(out)]


def adaptive_avg_pool2d_ref(x, output_size):
    oh, ow = (output_size, output_size) if isinstance(output_size, int) else output_size
    h, w = x.shape[-2:]
    oh, ow = oh or h, ow or w
    out = np.zeros(x.shape[:-2] + (oh, ow), dtype=x.dtype)
    for i, (r0, r1) in enumerate(_windows_1d(h, oh)):
        for j, (c0, c1) in enumerate(_windows_1d(w, ow)):
            out[..., i, j] = x[..., r0:r1, c0:c1].mean(axis=(-2, -1))
    return out


def adaptive_max_pool2d_ref(x, output_size, return_indices=False):
    oh, ow = (output_size, output_size) if isinstance(output_size, int) else output_size
    h, w = x.shape[-2:]
    oh, ow = oh or h, ow or w
    y = np.zeros(x.shape[:-2] + (oh, ow))
    idx = np.zeros(x.shape[:-2] + (oh, ow), np.int64)
    for lead in np.ndindex(*x.shape[:-2]):
        for i, (r0, r1) in enumerate(_windows_1d(h, oh)):
            for j, (c0, c1) in enumerate(_windows_1d(w, ow)):
                best, where = -np.inf, -1
                for r in range(r0, r1):
                    for q in range(c0, c1):
                        if x[lead + (r, q)] > best or where < 0:
                            best, where = x[lead + (r, q)], r * w + q
                y[lead + (i, j)], idx[lead + (i, j)] = best, where
    return (y, idx) if return_indices else y


def _adaptive_avg_samples(rng, dtype):
    yield SampleInput((rand(rng, (2, 3, 4, 4), dtype), 1), desc="global (ResNet head)")
    yield SampleInput((rand(rng, (1, 2, 7, 5), dtype), (3, 2)), desc="overlapping windows")
    yield SampleInput((rand(rng, (2, 5, 6), dtype), (None, 4)), desc="3-d input, None keeps H")
    yield SampleInput((noncontig(rand(rng, (1, 2, 6, 4), dtype)), (3, 4)), desc="non-contiguous")


def _adaptive_max_samples(rng, dtype):
    yield SampleInput((distinct(rng, (2, 2, 5, 5), dtype), 2), {"return_indices": True})
    yield SampleInput((distinct(rng, (1, 2, 7, 5), dtype), (3, 2)), {"return_indices": True}, desc="overlapping")
    yield SampleInput((distinct(rng, (2, 4, 3), dtype), (1, None)), desc="3-d input")


def _adaptive_avg_grad_op(dy, x_shape):
    return get_primitive("adaptive_avg_pool2d_grad")(dy, x_shape=x_shape)


def _adaptive_avg_grad_ref(dy, x_shape):
    return complex_step_vjp(lambda x_: adaptive_avg_pool2d_ref(x_, dy.shape[-2:]), (np.zeros(x_shape),), (0,),
                            (dy,), h=1.0)[0]


def _adaptive_avg_grad_samples(rng, dtype):
    yield SampleInput((rand(rng, (1, 2, 3, 2), dtype), (1, 2, 7, 5)))
    yield SampleInput((rand(rng, (2, 1, 1), dtype), (2, 4, 3)), desc="3-d, global")


# =================================================================================================
# dropout2d: random, so the op re-seeds and the reference states the documented RNG contract
def _seeded_dropout2d(x, p):
    context.set_seed(1234)
    return ops.dropout2d(x, p)


def _dropout2d_ref(x, p):
    keep = np.random.default_rng(1234).random(x.shape[:2] + (1, 1), dtype=np.float32) >= p
    return np.where(keep, x / (1.0 - p), 0.0)


def _dropout2d_samples(rng, dtype):
    yield SampleInput((rand(rng, (4, 6, 2, 2), dtype), 0.5))
    yield SampleInput((noncontig(rand(rng, (3, 4, 2, 3), dtype)), 0.25), desc="non-contiguous")


# =================================================================================================
register(
    OpInfo("batch_norm", ops.batch_norm, bn_eval_ref, _bn_eval_samples, dtypes=F16_32_64,
           tols={mstype.float16: (5e-3, 5e-3), mstype.float32: (1e-5, 1e-5)},
           notes="training=False: the running statistics are used (and differentiated)"),
    OpInfo("batch_norm_train", _bn_train_op, bn_train_ref, _bn_train_samples, dtypes=F16_32_64,
           tols={mstype.float16: (5e-3, 5e-3), mstype.float32: (2e-5, 2e-5)}, primitive="batch_norm",
           grad_tol=(1e-5, 1e-5), notes="training=True: batch statistics"),
    OpInfo("batch_norm_running_stats", _bn_running_op, _bn_running_ref, _bn_running_samples, differentiable=False,
           supports_bad_input=False, primitive="batch_norm",
           notes="running = (1 - momentum) * running + momentum * batch (unbiased variance), in place"),
    OpInfo("batch_norm_grad", _bn_grad_op, _bn_grad_ref, _bn_grad_samples,
           tols={mstype.float32: (1e-4, 1e-5), mstype.float64: (1e-7, 1e-8)}, primitive="batch_norm_grad"),
    OpInfo("group_norm", ops.group_norm, group_norm_ref, _gn_samples, dtypes=F16_32_64,
           tols={mstype.float16: (5e-3, 5e-3), mstype.float32: (1e-5, 2e-5)}),
    OpInfo("group_norm_grad", _gn_grad_op, _gn_grad_ref, _gn_grad_samples,
           tols={mstype.float32: (1e-4, 1e-5), mstype.float64: (1e-7, 1e-8)}, primitive="group_norm_grad"),
    OpInfo("conv1d", ops.conv1d, conv1d_ref, _conv1d_samples, dtypes=F16_32_64,
           tols={mstype.float16: (1e-2, 1e-2), mstype.float32: (1e-5, 1e-5)}, primitive="conv2d"),
    OpInfo("conv_transpose2d", ops.conv_transpose2d, conv_transpose2d_ref, _conv_t_samples, dtypes=F16_32_64,
           tols={mstype.float16: (1e-2, 1e-2), mstype.float32: (1e-5, 1e-5)}, primitive="conv2d_backprop_input"),
    OpInfo("avg_pool1d", ops.avg_pool1d, avg_pool1d_ref, _avg_pool1d_samples, dtypes=F16_32_64,
           tols={mstype.float16: (5e-3, 5e-3)}, primitive="avg_pool2d"),
    OpInfo("adaptive_avg_pool2d", ops.adaptive_avg_pool2d, adaptive_avg_pool2d_ref, _adaptive_avg_samples,
           dtypes=F16_32_64, tols={mstype.float16: (5e-3, 5e-3)}),
    OpInfo("adaptive_avg_pool2d_grad", _adaptive_avg_grad_op, _adaptive_avg_grad_ref, _adaptive_avg_grad_samples,
           primitive="adaptive_avg_pool2d_grad"),
    OpInfo("adaptive_max_pool2d", ops.adaptive_max_pool2d, adaptive_max_pool2d_ref, _adaptive_max_samples,
           dtypes=F16_32_64, grad_output=0),
    OpInfo("dropout2d", _seeded_dropout2d, _dropout2d_ref, _dropout2d_samples, primitive="dropout",
           notes="random: the op re-seeds the global RNG; the reference states the RNG contract"),
)
