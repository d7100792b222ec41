"""Activation cells: thin wrappers over the activation ops, so they can sit in a SequentialCell.

`get_activation('relu')` builds one from its name (what `nn.Dense(..., activation='relu')` uses).
"""
from __future__ import annotations

import numbers

import numpy as np

from ...common import dtype as mstype
from ...common.context import rng
from ...common.errors import OpTypeError, OpValueError
from ...common.tensor import Parameter, Tensor
from ...ops import functional as F
from .. import _checks
from ..cell import Cell


class ReLU(Cell):
    """max(x, 0)."""

    def construct(self, x):
        return F.relu(x)


class ReLU6(Cell):
    """min(max(x, 0), 6)."""

    def construct(self, x):
        return F.relu6(x)


class LeakyReLU(Cell):
    """x where x > 0, alpha * x elsewhere."""

    def __init__(self, alpha=0.2):
        super().__init__()
        self.alpha = _checks.real("LeakyReLU", "alpha", alpha)

    def construct(self, x):
        return F.leaky_relu(x, self.alpha)

    def extend_repr(self):
        return f"alpha={self.alpha}"


class ELU(Cell):
    """x where x > 0, alpha * (exp(x) - 1) elsewhere."""

    def __init__(self, alpha=1.0):
        super().__init__()
        self.alpha = _checks.real("ELU", "alpha", alpha)

    def construct(self, x):
        return F.elu(x, self.alpha)


class GELU(Cell):
    """Gaussian error linear unit. `approximate=True` (MindSpore's default) uses the tanh form
    0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))); False uses the exact x * Phi(x)."""

    def __init__(self, approximate=True):
        super().__init__()
        self.approximate = _checks.boolean("GELU", "approximate", approximate)

    def construct(self, x):
        return F.gelu(x, approximate="tanh" if self.approximate else "none")

    def extend_repr(self):
        return f"approximate={self.approximate}"


class SiLU(Cell):
    """x * sigmoid(x) (also called swish)."""

    def construct(self, x):
        return F.silu(x)


class Sigmoid(Cell):
    """1 / (1 + exp(-x))."""

    def construct(self, x):
        return F.sigmoid(x)


class Tanh(Cell):
    def construct(self, x):
        return F.tanh(x)


class Softplus(Cell):
    """log(1 + exp(beta x)) / beta (linear above `threshold` for stability)."""

    def __init__(self, beta=1.0, threshold=20.0):
        super().__init__()
        self.beta = _checks.real("Softplus", "beta", beta)
        self.threshold = _checks.real("Softplus", "threshold", threshold)

    def construct(self, x):
        return F.softplus(x, self.beta, self.threshold)


class Softmax(Cell):
    """exp(x) / sum(exp(x)) along `axis`."""

    def __init__(self, axis=-1):
        super().__init__()
        self.axis = axis

    def construct(self, x):
        return F.softmax(x, self.axis)

    def extend_repr(self):
        return f"axis={self.axis}"


class LogSoftmax(Cell):
    """log(softmax(x)) along `axis`, computed stably."""

    def __init__(self, axis=-1):
        super().__init__()
        self.axis = axis

    def construct(self, x):
        return F.log_softmax(x, self.axis)

    def extend_repr(self):
        return f"axis={self.axis}"


# -- the long tail: one-liners over minispore.ops, with MindSpore 2.10's constructor arguments ----------

class Mish(Cell):
    """x * tanh(softplus(x))."""

    def construct(self, x):
        return F.mish(x)


class SeLU(Cell):
    """scale * (x if x > 0 else alpha * (exp(x) - 1)), with the self-normalising constants
    alpha ~ 1.6733 and scale ~ 1.0507."""

    def construct(self, x):
        return F.selu(x)


class HSwish(Cell):
    """Hard swish: x * relu6(x + 3) / 6 (MobileNetV3)."""

    def construct(self, x):
        return F.hardswish(x)


class HSigmoid(Cell):
    """Hard sigmoid: relu6(x + 3) / 6."""

    def construct(self, x):
        return F.hardsigmoid(x)


class LogSigmoid(Cell):
    """log(sigmoid(x)) = -softplus(-x), computed stably."""

    def construct(self, x):
        return F.logsigmoid(x)


class Softsign(Cell):
    """x / (1 + |x|)."""

    def construct(self, x):
        return F.softsign(x)


class Tanhshrink(Cell):
    """x - tanh(x)."""

    def construct(self, x):
        return F.tanhshrink(x)


class Hardtanh(Cell):
    """x clipped to [min_val, max_val]. MindSpore checks only `min_val < max_val` here."""

    def __init__(self, min_val=-1.0, max_val=1.0):
        super().__init__()
        self.min_val = _checks.real("Hardtanh", "min_val", min_val)
        self.max_val = _checks.real("Hardtanh", "max_val", max_val)
        if self.min_val >= self.max_val:
            raise OpValueError("Hardtanh", "min_val < max_val", f"min_val={min_val}, max_val={max_val}")

    def construct(self, x):
        return F.hardtanh(x, self.min_val, self.max_val)

    def extend_repr(self):
        return f"min_val={self.min_val}, max_val={self.max_val}"


def _lambd(cell, lambd):
    """MindSpore's SoftShrink/HShrink primitives take a float lambd >= 0 (an int is a type error)."""
    if not isinstance(lambd, float):
        raise OpTypeError(cell, "'lambd' to be a float", f"{type(lambd).__name__} {lambd!r}")
    if lambd < 0:
        raise OpValueError(cell, "'lambd' >= 0", repr(lambd))
    return lambd


class SoftShrink(Cell):
    """x - lambd where x > lambd, x + lambd where x < -lambd, 0 in between."""

    def __init__(self, lambd=0.5):
        super().__init__()
        self.lambd = _lambd("SoftShrink", lambd)

    def construct(self, input):
        return F.softshrink(input, self.lambd)


class HShrink(Cell):
    """x where |x| > lambd, 0 elsewhere."""

    def __init__(self, lambd=0.5):
        super().__init__()
        self.lambd = _lambd("HShrink", lambd)

    def construct(self, input):
        return F.hardshrink(input, self.lambd)


class Softmin(Cell):
    """softmax(-x) along `axis`."""

    def __init__(self, axis=-1):
        super().__init__()
        if not isinstance(axis, (numbers.Integral, tuple)) or isinstance(axis, bool):
            raise OpTypeError("Softmin", "'axis' to be an int or a tuple of ints", f"{type(axis).__name__} {axis!r}")
        self.axis = axis

    def construct(self, x):
        return F.softmin(x, self.axis)


class Softmax2d(Cell):
    """softmax over the channel dim (-3) of a (C, H, W) or (N, C, H, W) input."""

    def construct(self, x):
        _checks.tensor_input("Softmax2d", x)
        if x.ndim not in (3, 4):
            raise OpValueError("Softmax2d", "a 3-d or 4-d input", f"shape {tuple(x.shape)}")
        return F.softmax(x, -3)


class CELU(Cell):
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1)); alpha must be a float != 0."""

    def __init__(self, alpha=1.0):
        super().__init__()
        if not isinstance(alpha, float):
            raise OpTypeError("CELU", "'alpha' to be a float", f"{type(alpha).__name__} {alpha!r}")
        if alpha == 0:
            raise OpValueError("CELU", "'alpha' != 0", repr(alpha))
        self.alpha = alpha

    def construct(self, x):
        return F.celu(x, self.alpha)


class GLU(Cell):
    """a * sigmoid(b), where a and b are the two halves of x along `axis`."""

    def __init__(self, axis=-1):
        super().__init__()
        if not isinstance(axis, numbers.Integral) or isinstance(axis, bool):
            raise OpTypeError("GLU", "'axis' to be an int", f"{type(axis).__name__} {axis!r}")
        self.dim = int(axis)

    def construct(self, x):
        return F.glu(x, self.dim)


class Threshold(Cell):
    """x where x > threshold, `value` elsewhere (both required, as in MindSpore)."""

    def __init__(self, threshold, value):
        super().__init__()
        self.threshold = _checks.real("Threshold", "threshold", threshold)
        self.value = _checks.real("Threshold", "value", value)

    def construct(self, input_x):
        return F.threshold(input_x, self.threshold, self.value)


class RReLU(Cell):
    """Randomized leaky ReLU: x where x >= 0, a * x elsewhere with a ~ U(lower, upper) drawn afresh
    per element on every call. MindSpore 2.10 samples in training AND inference (its construct has no
    training branch); so does minispore. With lower == upper it is a deterministic leaky ReLU."""

    def __init__(self, lower=1 / 8, upper=1 / 3):
        super().__init__()
        for name, v in (("upper", upper), ("lower", lower)):
            if not isinstance(v, (int, float)) or isinstance(v, bool):
                raise OpTypeError("RReLU", f"'{name}' to be a float or an int", f"{type(v).__name__} {v!r}")
        if lower > upper:
            raise OpValueError("RReLU", "'upper' >= 'lower'", f"upper={upper}, lower={lower}")
        self.lower, self.upper = float(lower), float(upper)

    def construct(self, x):
        _checks.tensor_input("RReLU", x)
        slopes = rng().uniform(self.lower, self.upper, size=tuple(x.shape)).astype(np.float32)
        # MindSpore's mask from sign(x): +1 keeps positives, slope scales negatives, 0 stays 0
        sign = F.sign(x)
        mask = F.clamp(sign, 0.0, None) - F.clamp(sign, None, 0.0) * F.cast(Tensor(slopes), x.dtype)
        return F.mul(mask, x)


class PReLU(Cell):
    """x where x > 0, w[c] * x elsewhere, with a learnable slope per channel (dim 1) or one shared.

    `channel` (default 1) is the length of `w`; `w` (default 0.25) a float, a list of `channel`
    floats or a float16/float32 1-d Tensor. The Parameter is created with the name 'a' (as in
    MindSpore); once the cell is a child it is renamed from its attribute path, so in a network
    (and in a checkpoint) it reads `<prefix>.w`, as MindSpore 2.10 gives too."""

    def __init__(self, channel=1, w=0.25):
        super().__init__()
        channel = _checks.positive_int("PReLU", "channel", channel)
        if isinstance(w, (float, np.float32)):
            data = Tensor(np.full((channel,), w, np.float32))
        elif isinstance(w, list):
            if len(w) != channel:
                raise OpValueError("PReLU", f"a 'w' list of length channel={channel}", f"length {len(w)}")
            if not all(isinstance(v, (float, np.float32)) for v in w):
                raise OpValueError("PReLU", "float elements in the 'w' list", repr(w))
            data = Tensor(np.asarray(w, np.float32))
        elif isinstance(w, Tensor):
            if w.dtype not in (mstype.float16, mstype.float32):
                raise OpValueError("PReLU", "a float16 or float32 'w' Tensor", str(w.dtype))
            if w.ndim != 1 or w.shape[0] != channel:
                raise OpValueError("PReLU", f"a 1-d 'w' Tensor of length channel={channel}", f"shape {tuple(w.shape)}")
            data = w
        else:
            raise OpTypeError("PReLU", "'w' as a float, a list or a Tensor", type(w).__name__)
        self.w = Parameter(data, name="a")

    def construct(self, x):
        return F.prelu(x, F.cast(self.w, x.dtype))


_ACTIVATIONS = {
    "relu": ReLU, "relu6": ReLU6, "leakyrelu": LeakyReLU, "elu": ELU, "gelu": GELU, "silu": SiLU,
    "sigmoid": Sigmoid, "tanh": Tanh, "softplus": Softplus, "softmax": Softmax, "logsoftmax": LogSoftmax,
    "softmin": Softmin, "softmax2d": Softmax2d, "rrelu": RReLU, "tanhshrink": Tanhshrink, "hardtanh": Hardtanh,
    "softsign": Softsign, "prelu": PReLU, "hswish": HSwish, "hsigmoid": HSigmoid, "logsigmoid": LogSigmoid,
    "softshrink": SoftShrink, "hshrink": HShrink, "mish": Mish,
}


def get_activation(name, prim_name=None):
    """The activation cell called `name` ('relu', 'gelu', ...); None for None."""
    if name is None:
        return None
    key = name.lower() if isinstance(name, str) else name
    if key not in _ACTIVATIONS:
        raise OpValueError(prim_name or "get_activation", f"an activation name in {sorted(_ACTIVATIONS)}", repr(name))
    return _ACTIVATIONS[key]()
