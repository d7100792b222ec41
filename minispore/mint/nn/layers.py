"""`mint.nn` layers with PyTorch's constructor arguments and parameter names (`weight`, `bias`,
`running_mean`, `running_var`), computed with the same `ops` primitives as `minispore.nn`.

Initialization follows MindSpore 2.10's mint (which follows PyTorch): Linear and Conv2d weights
U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (HeUniform with a = sqrt(5)), biases the same bound;
Embedding N(0, 1) with the padding row zeroed; LayerNorm/GroupNorm/BatchNorm ones and zeros.

Accepted for signature compatibility but ignored: `inplace` (activations and Dropout always return a
new tensor) and Embedding's `sparse` (the weight gradient is always dense).
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from ...common import dtype as mstype
from ...common.errors import OpTypeError, OpValueError
from ...common.initializer import HeUniform, Normal, Uniform, initializer
from ...common.tensor import Parameter, Tensor
from ...nn.cell import Cell
from ...ops import functional as F
from . import functional as MF


def _positive(op, arg, v):
    if not isinstance(v, numbers.Integral) or isinstance(v, bool) or v <= 0:
        raise OpValueError(op, f"'{arg}' a positive int", repr(v))
    return int(v)


def _bool(op, arg, v):
    if not isinstance(v, bool):
        raise OpTypeError(op, f"'{arg}' to be a bool", f"{type(v).__name__} {v!r}")
    return v


def _real(op, arg, v):
    if not isinstance(v, numbers.Real) or isinstance(v, bool):
        raise OpTypeError(op, f"'{arg}' to be a float", f"{type(v).__name__} {v!r}")
    return float(v)


def _pair(op, arg, v):
    if isinstance(v, numbers.Integral) and not isinstance(v, bool):
        return (int(v), int(v))
    if isinstance(v, (tuple, list)) and len(v) == 2 and all(isinstance(a, numbers.Integral) for a in v):
        return (int(v[0]), int(v[1]))
    raise OpValueError(op, f"'{arg}' an int or a pair of ints", repr(v))


class Linear(Cell):
    """`Linear(in_features, out_features, bias=True, weight_init=None, bias_init=None, dtype=None)`:
    y = x @ weight.T + bias, weight (out_features, in_features)."""

    def __init__(self, in_features, out_features, bias=True, weight_init=None, bias_init=None, dtype=None):
        super().__init__()
        self.in_features = _positive("Linear", "in_features", in_features)
        self.out_features = _positive("Linear", "out_features", out_features)
        dtype = dtype or mstype.float32
        self.weight = Parameter(initializer(weight_init or HeUniform(math.sqrt(5)), [out_features, in_features], dtype),
                                name="weight")
        self.bias = None
        if _bool("Linear", "bias", bias):
            self.bias = Parameter(initializer(bias_init or Uniform(1 / math.sqrt(in_features)), [out_features], dtype),
                                  name="bias")

    def construct(self, input):
        if not isinstance(input, Tensor) or not len(input.shape) or input.shape[-1] != self.in_features:
            raise OpValueError("Linear", f"an input of shape (*, {self.in_features})",
                               repr(getattr(input, "shape", type(input).__name__)))
        return MF.linear(input, self.weight, self.bias)

    def extend_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Conv2d(Cell):
    """`Conv2d(in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
    bias=True, padding_mode='zeros', dtype=None)`; weight (out, in / groups, kh, kw)."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", dtype=None):
        super().__init__()
        self.in_channels = _positive("Conv2d", "in_channels", in_channels)
        self.out_channels = _positive("Conv2d", "out_channels", out_channels)
        self.groups = _positive("Conv2d", "groups", groups)
        if in_channels % groups or out_channels % groups:
            raise OpValueError("Conv2d", "in_channels and out_channels divisible by groups",
                               f"{in_channels}, {out_channels} with groups={groups}")
        self.kernel_size = _pair("Conv2d", "kernel_size", kernel_size)
        self.stride = _pair("Conv2d", "stride", stride)
        self.dilation = _pair("Conv2d", "dilation", dilation)
        self.padding = padding if isinstance(padding, str) else _pair("Conv2d", "padding", padding)
        if padding_mode != "zeros":
            raise OpValueError("Conv2d", "padding_mode 'zeros' (the others are not implemented)", repr(padding_mode))
        dtype = dtype or mstype.float32
        fan_in = in_channels // groups * self.kernel_size[0] * self.kernel_size[1]
        self.weight = Parameter(initializer(HeUniform(math.sqrt(5)), [out_channels, in_channels // groups,
                                                                      *self.kernel_size], dtype), name="weight")
        self.bias = Parameter(initializer(Uniform(1 / math.sqrt(fan_in)), [out_channels], dtype), name="bias") \
            if _bool("Conv2d", "bias", bias) else None

    def construct(self, input):
        return MF.conv2d(input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)


class LayerNorm(Cell):
    """`LayerNorm(normalized_shape, eps=1e-5, elementwise_affine=True, bias=True, dtype=None)`."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True, dtype=None):
        super().__init__()
        if isinstance(normalized_shape, numbers.Integral):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(_positive("LayerNorm", "normalized_shape", n) for n in normalized_shape)
        self.eps = float(eps)
        dtype = dtype or mstype.float32
        self.weight = self.bias = None
        if _bool("LayerNorm", "elementwise_affine", elementwise_affine):
            self.weight = Parameter(initializer("ones", list(self.normalized_shape), dtype), name="weight")
            if bias:
                self.bias = Parameter(initializer("zeros", list(self.normalized_shape), dtype), name="bias")

    def construct(self, input):
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)


class GroupNorm(Cell):
    """`GroupNorm(num_groups, num_channels, eps=1e-5, affine=True, dtype=None)`."""

    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, dtype=None):
        super().__init__()
        self.num_groups = _positive("GroupNorm", "num_groups", num_groups)
        self.num_channels = _positive("GroupNorm", "num_channels", num_channels)
        if num_channels % num_groups:
            raise OpValueError("GroupNorm", "num_channels divisible by num_groups", f"{num_channels}, {num_groups}")
        self.eps = float(eps)
        dtype = dtype or mstype.float32
        self.weight = self.bias = None
        if _bool("GroupNorm", "affine", affine):
            self.weight = Parameter(initializer("ones", [num_channels], dtype), name="weight")
            self.bias = Parameter(initializer("zeros", [num_channels], dtype), name="bias")

    def construct(self, input):
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)


class _BatchNorm(Cell):
    """PyTorch-style batch norm: `momentum=0.1` weighs the *new* batch statistic
    (running = (1 - momentum) * running + momentum * batch; MindSpore's nn.BatchNorm uses the
    complement, 0.9), parameters `weight`, `bias`, `running_mean`, `running_var`, `num_batches_tracked`."""

    _ranks = ()

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, dtype=None):
        super().__init__()
        n = self.num_features = _positive(type(self).__name__, "num_features", num_features)
        self.eps, self.momentum = float(eps), float(momentum)
        self.affine, self.track_running_stats = _bool(type(self).__name__, "affine", affine), track_running_stats
        dtype = dtype or mstype.float32
        self.weight = Parameter(initializer("ones", [n], dtype), name="weight", requires_grad=affine)
        self.bias = Parameter(initializer("zeros", [n], dtype), name="bias", requires_grad=affine)
        self.running_mean = Parameter(initializer("zeros", [n], dtype), name="running_mean", requires_grad=False)
        self.running_var = Parameter(initializer("ones", [n], dtype), name="running_var", requires_grad=False)
        self.num_batches_tracked = Parameter(Tensor(np.zeros((), np.int64)), name="num_batches_tracked",
                                             requires_grad=False)

    def construct(self, input):
        if not isinstance(input, Tensor) or len(input.shape) not in self._ranks or input.shape[1] != self.num_features:
            raise OpValueError(type(self).__name__, f"a {'/'.join(map(str, self._ranks))}-d input with "
                               f"{self.num_features} channels in dim 1", repr(getattr(input, "shape", input)))
        training = self.training or not self.track_running_stats
        if training and self.track_running_stats:
            self.num_batches_tracked._data[...] += 1
        return F.batch_norm(input, self.running_mean, self.running_var, self.weight, self.bias, training,
                            self.momentum, self.eps)


class BatchNorm1d(_BatchNorm):
    _ranks = (2, 3)


class BatchNorm2d(_BatchNorm):
    _ranks = (4,)


class BatchNorm3d(_BatchNorm):
    _ranks = (5,)


class Embedding(Cell):
    """`Embedding(num_embeddings, embedding_dim, padding_idx=None, max_norm=None, norm_type=2.0,
    scale_grad_by_freq=False, sparse=False, _weight=None, _freeze=False, dtype=None)`; weight N(0, 1)."""

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None, norm_type=2.0,
                 scale_grad_by_freq=False, sparse=False, _weight=None, _freeze=False, dtype=None):
        super().__init__()
        self.num_embeddings = _positive("Embedding", "num_embeddings", num_embeddings)
        self.embedding_dim = _positive("Embedding", "embedding_dim", embedding_dim)
        if padding_idx is not None:
            if not isinstance(padding_idx, int) or not -num_embeddings <= padding_idx < num_embeddings:
                raise OpValueError("Embedding", f"padding_idx in [{-num_embeddings}, {num_embeddings})", repr(padding_idx))
            padding_idx %= num_embeddings
        self.padding_idx, self.max_norm, self.norm_type = padding_idx, max_norm, norm_type
        self.scale_grad_by_freq = scale_grad_by_freq
        dtype = dtype or mstype.float32
        w = _weight if _weight is not None else initializer(Normal(1.0), [num_embeddings, embedding_dim], dtype)
        if padding_idx is not None and _weight is None:
            w = Tensor(np.asarray(w.asnumpy()))
            w._data[padding_idx] = 0
        self.weight = Parameter(w, name="weight", requires_grad=not _freeze)

    def construct(self, input):
        return F.embedding(input, self.weight, self.padding_idx, self.max_norm, self.norm_type, self.scale_grad_by_freq)


class Dropout(Cell):
    """`Dropout(p=0.5, inplace=False)`: zero with probability p (and scale by 1/(1-p)) in training."""

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if not isinstance(p, numbers.Real) or isinstance(p, bool) or not 0 <= p <= 1:
            raise OpValueError("Dropout", "p in [0, 1]", repr(p))
        self.p = float(p)

    def construct(self, input):
        return F.dropout(input, self.p, self.training)


def _activation(name, fn, doc):
    def construct(self, input):
        return fn(input)
    return type(name, (Cell,), {"construct": construct, "__doc__": doc, "__module__": __name__, "__qualname__": name})


ReLU = _activation("ReLU", F.relu, "`ReLU()`: max(x, 0).")
Sigmoid = _activation("Sigmoid", F.sigmoid, "`Sigmoid()`.")
Tanh = _activation("Tanh", F.tanh, "`Tanh()`.")
ACTIVATIONS_FROM_OPS = {"Mish": "mish", "SELU": "selu", "LogSigmoid": "logsigmoid", "Hardswish": "hardswish",
                        "Hardsigmoid": "hardsigmoid"}
for _cls, _fn in ACTIVATIONS_FROM_OPS.items():
    globals()[_cls] = _activation(_cls, getattr(F, _fn), f"`{_cls}()`: `ops.{_fn}`.")


class ReLU6(Cell):
    def __init__(self, inplace=False):
        super().__init__()

    def construct(self, input):
        return F.relu6(input)


class SiLU(ReLU6):
    def construct(self, input):
        return F.silu(input)


class GELU(Cell):
    """`GELU(approximate='none')` ('tanh' for the tanh approximation)."""

    def __init__(self, approximate="none"):
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise OpValueError("GELU", "approximate 'none' or 'tanh'", repr(approximate))
        self.approximate = approximate

    def construct(self, input):
        return F.gelu(input, self.approximate)


class ELU(Cell):
    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha = _real("ELU", "alpha", alpha)

    def construct(self, input):
        return F.elu(input, self.alpha)


class Hardtanh(Cell):
    def __init__(self, min_val=-1.0, max_val=1.0, inplace=False):
        super().__init__()
        self.min_val, self.max_val = _real("Hardtanh", "min_val", min_val), _real("Hardtanh", "max_val", max_val)

    def construct(self, input):
        return F.hardtanh(input, self.min_val, self.max_val)


class Softmax(Cell):
    """`Softmax(dim=None)` (None: the last dim)."""

    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def construct(self, input):
        return MF.softmax(input, self.dim)


class LogSoftmax(Softmax):
    def construct(self, input):
        return MF.log_softmax(input, self.dim)


class Identity(Cell):
    def __init__(self, *args, **kwargs):
        super().__init__()

    def construct(self, input):
        return input


class Flatten(Cell):
    """`Flatten(start_dim=1, end_dim=-1)`."""

    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def construct(self, input):
        return F.flatten(input, start_dim=self.start_dim, end_dim=self.end_dim)


class MaxPool2d(Cell):
    def __init__(self, kernel_size=1, stride=None, padding=0, dilation=1, return_indices=False, ceil_mode=False):
        super().__init__()
        self.args = (kernel_size, stride, padding, dilation, ceil_mode, return_indices)

    def construct(self, input):
        return MF.max_pool2d(input, *self.args)


class AvgPool2d(Cell):
    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
                 divisor_override=None):
        super().__init__()
        self.args = (kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)

    def construct(self, input):
        return MF.avg_pool2d(input, *self.args)


class AdaptiveAvgPool2d(Cell):
    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def construct(self, input):
        return F.adaptive_avg_pool2d(input, self.output_size)


# -- losses ----------------------------------------------------------------------------------------
class _Loss(Cell):
    def __init__(self, reduction="mean"):
        super().__init__()
        if reduction not in ("mean", "sum", "none"):
            raise OpValueError(type(self).__name__, "reduction 'mean', 'sum' or 'none'", repr(reduction))
        self.reduction = reduction


class MSELoss(_Loss):
    def construct(self, input, target):
        return MF.mse_loss(input, target, self.reduction)


class L1Loss(_Loss):
    def construct(self, input, target):
        return MF.l1_loss(input, target, self.reduction)


class SmoothL1Loss(_Loss):
    def __init__(self, reduction="mean", beta=1.0):
        super().__init__(reduction)
        self.beta = beta

    def construct(self, input, target):
        return MF.smooth_l1_loss(input, target, self.reduction, self.beta)


class CrossEntropyLoss(_Loss):
    def __init__(self, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
        super().__init__(reduction)
        self.weight, self.ignore_index, self.label_smoothing = weight, ignore_index, label_smoothing

    def construct(self, input, target):
        return MF.cross_entropy(input, target, self.weight, self.ignore_index, self.reduction, self.label_smoothing)


class NLLLoss(_Loss):
    def __init__(self, weight=None, ignore_index=-100, reduction="mean"):
        super().__init__(reduction)
        self.weight, self.ignore_index = weight, ignore_index

    def construct(self, input, target):
        return MF.nll_loss(input, target, self.weight, self.ignore_index, self.reduction)


class BCEWithLogitsLoss(_Loss):
    def __init__(self, weight=None, reduction="mean", pos_weight=None):
        super().__init__(reduction)
        self.weight, self.pos_weight = weight, pos_weight

    def construct(self, input, target):
        return MF.binary_cross_entropy_with_logits(input, target, self.weight, self.reduction, self.pos_weight)


class BCELoss(_Loss):
    def __init__(self, weight=None, reduction="mean"):
        super().__init__(reduction)
        self.weight = weight

    def construct(self, input, target):
        return MF.binary_cross_entropy(input, target, self.weight, self.reduction)


class KLDivLoss(Cell):
    def __init__(self, reduction="mean", log_target=False):
        super().__init__()
        self.reduction, self.log_target = reduction, log_target

    def construct(self, input, target):
        return MF.kl_div(input, target, self.reduction, self.log_target)


__all__ = ["Linear", "Conv2d", "LayerNorm", "GroupNorm", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "Embedding",
           "Dropout", "ReLU", "Sigmoid", "Tanh", "ReLU6", "SiLU", "GELU", "ELU", "Hardtanh", "Softmax", "LogSoftmax",
           "Identity", "Flatten", "MaxPool2d", "AvgPool2d", "AdaptiveAvgPool2d", "MSELoss", "L1Loss", "SmoothL1Loss",
           "CrossEntropyLoss", "NLLLoss", "BCEWithLogitsLoss", "BCELoss", "KLDivLoss"] + list(ACTIVATIONS_FROM_OPS)
