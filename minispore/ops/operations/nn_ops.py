"""Class-style neural-network operators (MindSpore's `mindspore.ops.operations.nn_ops`):
activations, softmax, normalization, losses, dropout, bias add.

Where MindSpore's class returns more than its functional counterpart (`LayerNorm` returns
`(y, mean, variance)`, `SoftmaxCrossEntropyWithLogits` returns `(loss, dlogits)`, `Dropout`
returns `(output, mask)`), the extra outputs are computed with the same minispore ops, so every
output is differentiable and nothing is defined twice.
"""
from __future__ import annotations

from ...common.errors import OpTypeError, OpValueError
from ...common.tensor import Tensor
from .. import functional as F
from ..primitive import PRIMITIVES as P
from .base import Primitive, check_bool, check_float, check_int, check_int_tuple, check_one_of, prim_attr_register
from .math_ops import _no_attr_class

_relu, _sigmoid, _tanh, _softmax, _log_softmax = P["relu"], P["sigmoid"], P["tanh"], P["softmax"], P["log_softmax"]
_gelu, _mul, _add, _sub = P["gelu"], P["mul"], P["add"], P["sub"]

ReLU = _no_attr_class("ReLU", _relu, 1, "`ReLU()(x)`: max(x, 0).", __name__)
Sigmoid = _no_attr_class("Sigmoid", _sigmoid, 1, "`Sigmoid()(x)`: 1 / (1 + exp(-x)).", __name__)
Tanh = _no_attr_class("Tanh", _tanh, 1, "`Tanh()(x)`.", __name__)
ReLU6 = _no_attr_class("ReLU6", F.relu6, 1, "`ReLU6()(x)`: min(max(x, 0), 6).", __name__)

# one-input activations: the class is the functional op
UNARY_FROM_OPS = {"HSwish": "hardswish", "HSigmoid": "hardsigmoid", "Mish": "mish", "SeLU": "selu",
                  "LogSigmoid": "logsigmoid", "Softsign": "softsign"}
for _cls, _fn in UNARY_FROM_OPS.items():
    globals()[_cls] = _no_attr_class(_cls, getattr(F, _fn), 1, f"`{_cls}()(x)`: `ops.{_fn}(x)`.", __name__)


class GeLU(Primitive):
    """`GeLU()(x)`: MindSpore's class computes the tanh approximation,
    0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (`ops.gelu(x, approximate='tanh')`)."""

    @prim_attr_register
    def __init__(self):
        pass

    def __call__(self, input):
        return _gelu(input, approximate="tanh")


class FastGeLU(Primitive):
    """`FastGeLU()(x)`: x * sigmoid(1.702 x)."""

    @prim_attr_register
    def __init__(self):
        pass

    def __call__(self, input):
        return _mul(input, _sigmoid(_mul(input, 1.702)))


def _softmax_axis(op, axis):
    if isinstance(axis, (tuple, list)):
        if len(axis) != 1:
            raise OpValueError(op, "'axis' as one int (or a tuple of one int)", repr(axis))
        axis = axis[0]
    return (check_int(op, "axis", axis),)


class Softmax(Primitive):
    """`Softmax(axis=-1)(x)`: exp(x) / sum(exp(x)) along `axis` (stable)."""

    @prim_attr_register
    def __init__(self, axis=-1):
        self.add_prim_attr("axis", _softmax_axis(self.name, axis))
        self._ax = self.axis[0]

    def __call__(self, input):
        return _softmax(input, axis=self._ax)


class LogSoftmax(Primitive):
    """`LogSoftmax(axis=-1)(logits)`: logits - logsumexp(logits) along `axis`."""

    @prim_attr_register
    def __init__(self, axis=-1):
        check_int(self.name, "axis", axis)

    def __call__(self, logits):
        return _log_softmax(logits, axis=self.axis)


class Elu(Primitive):
    """`Elu(alpha=1.0)(x)`: x where positive, alpha * (exp(x) - 1) elsewhere."""

    @prim_attr_register
    def __init__(self, alpha=1.0):
        check_float(self.name, "alpha", alpha)

    def __call__(self, input_x):
        return F.elu(input_x, self.alpha)


class Softplus(Primitive):
    """`Softplus()(x)`: log(1 + exp(x))."""

    @prim_attr_register
    def __init__(self):
        pass

    def __call__(self, input):
        return F.softplus(input)


class BiasAdd(Primitive):
    """`BiasAdd(data_format='NCHW')(input_x, bias)`: add a 1-D bias along the channel dim (dim 1
    for NCHW/NCDHW, the last dim for NHWC)."""

    @prim_attr_register
    def __init__(self, data_format="NCHW"):
        check_one_of(self.name, "data_format", data_format, ("NCHW", "NHWC", "NCDHW"))

    def __call__(self, input_x, bias):
        for arg, t in (("input_x", input_x), ("bias", bias)):
            if not isinstance(t, Tensor):
                raise OpTypeError(self.name, f"'{arg}' to be a Tensor", type(t).__name__)
        nd = len(input_x.shape)
        if nd < 2 or len(bias.shape) != 1:
            raise OpValueError(self.name, "an input with at least 2 dims and a 1-D bias",
                               f"shapes {tuple(input_x.shape)} and {tuple(bias.shape)}")
        ch = nd - 1 if self.data_format == "NHWC" else 1
        if input_x.shape[ch] != bias.shape[0]:
            raise OpValueError(self.name, f"a bias of length {input_x.shape[ch]} (the channel dim)",
                               f"length {bias.shape[0]}")
        if ch != nd - 1:
            bias = F.reshape(bias, (bias.shape[0],) + (1,) * (nd - 1 - ch))
        return _add(input_x, bias)


class L2Normalize(Primitive):
    """`L2Normalize(axis=0, epsilon=1e-4)(x)`: x / sqrt(max(sum(x^2, axis), epsilon))."""

    @prim_attr_register
    def __init__(self, axis=0, epsilon=1e-4):
        self.add_prim_attr("axis", check_int_tuple(self.name, "axis", axis))
        check_float(self.name, "epsilon", epsilon, lo=0.0, lo_open=True)

    def __call__(self, x):
        ss = F.reduce_sum(_mul(x, x), self.axis, True)
        return F.div(x, F.sqrt(F.maximum(ss, self.epsilon)))


# ------------------------------------------------------------------------------------------------
# normalization
class LayerNorm(Primitive):
    """`LayerNorm(begin_norm_axis=1, begin_params_axis=1, epsilon=1e-7)(input_x, gamma, beta)`
    -> `(y, mean, variance)`: normalize over dims begin_norm_axis..., scale by gamma and shift by
    beta (of shape input_x.shape[begin_params_axis:]). mean and variance (biased) keep the
    normalized dims as size 1. (MindSpore 2.10 on CPU returns the variance as the third output.)"""

    @prim_attr_register
    def __init__(self, begin_norm_axis=1, begin_params_axis=1, epsilon=1e-7):
        check_int(self.name, "begin_norm_axis", begin_norm_axis)
        check_int(self.name, "begin_params_axis", begin_params_axis)
        check_float(self.name, "epsilon", epsilon, lo=0.0)

    def __call__(self, input_x, gamma, beta):
        for arg, t in (("input_x", input_x), ("gamma", gamma), ("beta", beta)):
            if not isinstance(t, Tensor):
                raise OpTypeError(self.name, f"'{arg}' to be a Tensor", type(t).__name__)
        nd = len(input_x.shape)
        bna, bpa = self.begin_norm_axis, self.begin_params_axis
        if not -nd <= bna < nd or not -nd <= bpa < nd:
            raise OpValueError(self.name, f"begin_norm_axis and begin_params_axis in [{-nd}, {nd})",
                               f"{bna} and {bpa} for a {nd}-d input")
        bna, bpa = bna % nd, bpa % nd
        norm_shape = tuple(input_x.shape[bna:])
        param_shape = tuple(input_x.shape[bpa:])
        if tuple(gamma.shape) != param_shape or tuple(beta.shape) != param_shape:
            raise OpValueError(self.name, f"gamma and beta of shape {param_shape}",
                               f"{tuple(gamma.shape)} and {tuple(beta.shape)}")
        if param_shape == norm_shape:
            y = F.layer_norm(input_x, norm_shape, gamma, beta, self.epsilon)
        else:
            y = _add(_mul(F.layer_norm(input_x, norm_shape, None, None, self.epsilon), gamma), beta)
        axes = tuple(range(bna, nd))
        mean = F.reduce_mean(input_x, axes, True)
        variance = P["reduce_var"](input_x, axis=axes, ddof=0, keep_dims=True)
        return y, mean, variance


# ------------------------------------------------------------------------------------------------
# losses
def _logits_labels(op, logits, labels):
    for arg, t in (("logits", logits), ("labels", labels)):
        if not isinstance(t, Tensor):
            raise OpTypeError(op, f"'{arg}' to be a Tensor", type(t).__name__)
    if len(logits.shape) != 2:
        raise OpValueError(op, "2-D logits (batch, classes)", f"shape {tuple(logits.shape)}")


class SoftmaxCrossEntropyWithLogits(Primitive):
    """`SoftmaxCrossEntropyWithLogits()(logits, labels)` -> `(loss, dlogits)` for dense (one-hot or
    soft) labels: loss[i] = -sum_j labels[i, j] log softmax(logits)[i, j]; dlogits = softmax - labels."""

    @prim_attr_register
    def __init__(self):
        pass

    def __call__(self, logits, labels):
        _logits_labels(self.name, logits, labels)
        if tuple(labels.shape) != tuple(logits.shape):
            raise OpValueError(self.name, f"labels of the logits' shape {tuple(logits.shape)}",
                               f"shape {tuple(labels.shape)}")
        logp = _log_softmax(logits, axis=-1)
        loss = F.neg(F.reduce_sum(_mul(labels, logp), -1))
        return loss, _sub(F.exp(logp), labels)


class SparseSoftmaxCrossEntropyWithLogits(Primitive):
    """`SparseSoftmaxCrossEntropyWithLogits(is_grad=False)(logits, labels)`: the mean cross entropy
    of integer class labels (a 0-d tensor); with is_grad=True, its gradient with respect to the
    logits, (softmax - one_hot(labels)) / batch."""

    @prim_attr_register
    def __init__(self, is_grad=False):
        check_bool(self.name, "is_grad", is_grad)
        self.add_prim_attr("sens", 1.0)

    def __call__(self, logits, labels):
        _logits_labels(self.name, logits, labels)
        if len(labels.shape) != 1 or labels.shape[0] != logits.shape[0] or labels.dtype.kind not in ("int", "uint"):
            raise OpValueError(self.name, f"integer labels of shape ({logits.shape[0]},)",
                               f"{labels.dtype} of shape {tuple(labels.shape)}")
        if not self.is_grad:
            return F.cross_entropy(logits, labels, reduction="mean")
        onehot = F.one_hot(labels, logits.shape[1], 1.0, 0.0)
        return F.div(_sub(_softmax(logits, axis=-1), F.cast(onehot, logits.dtype)), float(logits.shape[0]))


class SigmoidCrossEntropyWithLogits(Primitive):
    """`SigmoidCrossEntropyWithLogits()(logits, label)`: elementwise binary cross entropy of logits."""

    @prim_attr_register
    def __init__(self):
        pass

    def __call__(self, logits, label):
        return F.binary_cross_entropy_with_logits(logits, label, None, None, "none")


class BCEWithLogitsLoss(Primitive):
    """`BCEWithLogitsLoss(reduction='mean')(logits, label, weight, pos_weight)`."""

    @prim_attr_register
    def __init__(self, reduction="mean"):
        check_one_of(self.name, "reduction", reduction, ("mean", "sum", "none"))

    def __call__(self, input, target, weight=None, posWeight=None):
        return F.binary_cross_entropy_with_logits(input, target, weight, posWeight, self.reduction)


# ------------------------------------------------------------------------------------------------
class Dropout(Primitive):
    """`Dropout(keep_prob=0.5, Seed0=0, Seed1=0)(x)` -> `(output, mask)`: each element is kept with
    probability keep_prob (and scaled by 1/keep_prob); mask (x's dtype) is 1 where kept. Seeds
    of 0 draw from the global generator (`ms.set_seed`)."""

    @prim_attr_register
    def __init__(self, keep_prob=0.5, Seed0=0, Seed1=0):
        check_float(self.name, "keep_prob", keep_prob, lo=0.0, hi=1.0, lo_open=True)
        check_int(self.name, "Seed0", Seed0, minimum=0)
        check_int(self.name, "Seed1", Seed1, minimum=0)
        self._seed = None if Seed0 == 0 and Seed1 == 0 else int(Seed0) * 1000003 + int(Seed1)

    def __call__(self, x):
        if not isinstance(x, Tensor) or not x.dtype.is_floating:
            raise OpTypeError(self.name, "a floating-point Tensor", f"{type(x).__name__} {getattr(x, 'dtype', '')}")
        if self.keep_prob == 1.0:
            return x, F.ones_like(x)
        y, keep = P["dropout"](x, p=1.0 - self.keep_prob, seed=self._seed)
        return y, F.cast(keep, x.dtype)


class Pad(Primitive):
    """`Pad(paddings)(x)`: zero padding, `paddings` one (before, after) pair per dim."""

    @prim_attr_register
    def __init__(self, paddings):
        ok = isinstance(paddings, (tuple, list)) and all(
            isinstance(p, (tuple, list)) and len(p) == 2 and all(isinstance(v, int) and v >= 0 for v in p)
            for p in paddings)
        if not ok:
            raise OpTypeError(self.name, "'paddings' as a tuple of (before, after) pairs of non-negative ints",
                              repr(paddings))
        self.add_prim_attr("paddings", tuple(tuple(p) for p in paddings))

    def __call__(self, x):
        if not isinstance(x, Tensor) or len(x.shape) != len(self.paddings):
            raise OpValueError(self.name, f"a Tensor with {len(self.paddings)} dims (one per paddings pair)",
                               f"shape {getattr(x, 'shape', type(x).__name__)}")
        flat = []
        for before, after in reversed(self.paddings):
            flat += [before, after]
        return F.pad(x, tuple(flat))


__all__ = ["ReLU", "Sigmoid", "Tanh", "ReLU6", "GeLU", "FastGeLU", "Softmax", "LogSoftmax", "Elu", "Softplus",
           "BiasAdd", "L2Normalize", "LayerNorm", "SoftmaxCrossEntropyWithLogits", "SparseSoftmaxCrossEntropyWithLogits",
           "SigmoidCrossEntropyWithLogits", "BCEWithLogitsLoss", "Dropout", "Pad"] + list(UNARY_FROM_OPS)
