"""`mint.nn.functional`: PyTorch-style functional layers and losses (`F.relu`, `F.linear`,
`F.cross_entropy`, ...) over the same `ops` primitives. Argument names follow MindSpore 2.10's mint
(`dim`, `negative_slope`, `p`/`training` for dropout, `(left, right, ...)` padding).

`inplace=True` is accepted for signature compatibility but ignored: every function returns a new
tensor and leaves `input` unchanged (an in-place write would break the autodiff tape's saved inputs)."""
from __future__ import annotations

from ...common.errors import OpTypeError, OpValueError
from ...common.tensor import Tensor
from ...ops import _check as _C
from ...ops import functional as F


def relu(input, inplace=False):
    return F.relu(input)


def relu6(input, inplace=False):
    return F.relu6(input)


def gelu(input, approximate="none"):
    return F.gelu(input, approximate)


def silu(input, inplace=False):
    return F.silu(input)


def sigmoid(input):
    return F.sigmoid(input)


def tanh(input):
    return F.tanh(input)


def elu(input, alpha=1.0, inplace=False):
    return F.elu(input, alpha)


def leaky_relu(input, negative_slope=0.01):
    return F.leaky_relu(input, negative_slope)


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    return F.hardtanh(input, min_val, max_val)


def softplus(input, beta=1, threshold=20):
    return F.softplus(input, beta, threshold)


def softmax(input, dim=None, dtype=None):
    return F.softmax(input, -1 if dim is None else dim, dtype=dtype)


def log_softmax(input, dim=None, *, dtype=None):
    if dtype is not None:
        input = F.cast(input, dtype)
    return F.log_softmax(input, -1 if dim is None else dim)


def glu(input, dim=-1):
    """`F.glu(input, dim=-1)`: a * sigmoid(b) for the two halves of `dim`."""
    return F.glu(input, dim)


def linear(input, weight, bias=None):
    """`F.linear(input, weight, bias=None)`: input @ weight.T + bias (weight (out, in))."""
    if not isinstance(weight, Tensor) or len(weight.shape) not in (1, 2):
        raise OpValueError("linear", "a 1-D or 2-D weight (out_features, in_features)",
                           repr(getattr(weight, "shape", type(weight).__name__)))
    y = F.matmul(input, F.transpose(weight, (1, 0)) if len(weight.shape) == 2 else weight)
    return F.add(y, bias) if bias is not None else y


def dropout(input, p=0.5, training=True, inplace=False):
    return F.dropout(input, p, training)


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False):
    return F.embedding(input, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq)


def one_hot(tensor, num_classes=-1):
    """Int64 one-hot rows; num_classes=-1 means max(tensor) + 1."""
    if not isinstance(tensor, Tensor):
        raise OpTypeError("one_hot", "'tensor' to be a Tensor", type(tensor).__name__)
    num_classes = _C.plain_ints(num_classes)
    if type(num_classes) is int and num_classes == -1:
        if tensor.dtype.kind not in ("int", "uint"):
            raise OpTypeError("one_hot", "'tensor' of class indices with an integer dtype", str(tensor.dtype))
        num_classes = int(tensor.asnumpy().max()) + 1 if tensor.size else 0
    return F.one_hot(tensor, num_classes, 1, 0)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    return F.layer_norm(input, normalized_shape, weight, bias, eps)


def normalize(input, p=2.0, dim=1, eps=1e-12):
    """`F.normalize(input, p=2.0, dim=1, eps=1e-12)`: input / max(||input||_p over dim, eps)."""
    n = F.vector_norm(input, p, dim, True)
    return F.div(input, F.maximum(n, eps))


def pad(input, pad, mode="constant", value=None):
    return F.pad(input, pad, mode, value)             # (ops.pad checks `pad`: a tuple/list of ints)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """`F.conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1)`; padding an
    int, a pair, 'valid' or 'same'."""
    if isinstance(padding, str):
        if padding not in ("valid", "same"):
            raise OpValueError("conv2d", "padding 'valid', 'same', an int or a pair", repr(padding))
        return F.conv2d(input, weight, bias, stride, padding, 0, dilation, groups)
    return F.conv2d(input, weight, bias, stride, "pad", padding, dilation, groups)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    return F.max_pool2d(input, kernel_size, stride, padding, dilation, return_indices, ceil_mode)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    return F.avg_pool2d(input, kernel_size, kernel_size if stride is None else stride, padding, ceil_mode,
                        count_include_pad, 0 if divisor_override is None else divisor_override)


# -- losses ----------------------------------------------------------------------------------------
def _reduction(op, reduction):
    return _C.one_of(op, "reduction", reduction, ("mean", "sum", "none"), "reduction 'mean', 'sum' or 'none'")


def cross_entropy(input, target, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    return F.cross_entropy(input, target, weight, ignore_index, reduction, label_smoothing)


def nll_loss(input, target, weight=None, ignore_index=-100, reduction="mean"):
    return F.nll_loss(input, target, weight, ignore_index, reduction)


def mse_loss(input, target, reduction="mean"):
    return F.mse_loss(input, target, _reduction("mse_loss", reduction))


def l1_loss(input, target, reduction="mean"):
    return F.l1_loss(input, target, _reduction("l1_loss", reduction))


def binary_cross_entropy_with_logits(input, target, weight=None, reduction="mean", pos_weight=None):
    return F.binary_cross_entropy_with_logits(input, target, weight, pos_weight,
                                              _reduction("binary_cross_entropy_with_logits", reduction))


def smooth_l1_loss(input, target, reduction="mean", beta=1.0):
    """0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta (mint's default reduction is 'mean')."""
    return F.smooth_l1_loss(input, target, beta, _reduction("smooth_l1_loss", reduction))


def binary_cross_entropy(input, target, weight=None, reduction="mean"):
    """-(t log p + (1 - t) log(1 - p)) of probabilities `input`."""
    return F.binary_cross_entropy(input, target, weight, _reduction("binary_cross_entropy", reduction))


def kl_div(input, target, reduction="mean", log_target=False):
    """target * (log target - input), `input` log-probabilities; log_target=True means `target`
    holds log-probabilities too. reduction 'batchmean' divides the sum by the batch size."""
    _C.one_of("kl_div", "reduction", reduction, ("mean", "sum", "none", "batchmean"),
              "reduction 'mean', 'sum', 'none' or 'batchmean'")
    if log_target:
        loss = F.mul(F.exp(target), F.sub(target, input))
        if reduction == "batchmean":
            return F.div(F.sum(loss), float(input.shape[0]) if len(input.shape) else 1.0)
        return loss if reduction == "none" else (F.mean(loss) if reduction == "mean" else F.sum(loss))
    return F.kl_div(input, target, reduction)


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None, recompute_scale_factor=None):
    """`F.interpolate(...)`: mint accepts `scale_factor` alone (the output size is floor(in * scale),
    the kernel's scales recomputed from it)."""
    if scale_factor is not None and recompute_scale_factor is None:
        recompute_scale_factor = True
    return F.interpolate(input, size, scale_factor, mode, align_corners, recompute_scale_factor)


# the same signature as the functional op
SAME_AS_OPS = ("hardswish", "hardsigmoid", "mish", "selu", "logsigmoid", "softshrink", "hardshrink", "prelu",
               "adaptive_avg_pool2d", "batch_norm", "group_norm", "pixel_shuffle")
for _name in SAME_AS_OPS:
    globals()[_name] = getattr(F, _name)

__all__ = ["relu", "relu6", "gelu", "silu", "sigmoid", "tanh", "elu", "leaky_relu", "hardtanh", "softplus", "softmax",
           "log_softmax", "glu", "linear", "dropout", "embedding", "one_hot", "layer_norm", "normalize", "pad",
           "conv2d", "max_pool2d", "avg_pool2d", "cross_entropy", "nll_loss", "mse_loss", "l1_loss",
           "binary_cross_entropy_with_logits", "smooth_l1_loss", "binary_cross_entropy", "kl_div", "interpolate"] + list(SAME_AS_OPS)
