"""Activation cells: thin wrappers over the activation ops, so they can sit in a SequentialCell.

`get_activation('relu')` builds one from its name (what `nn.Dense(..., activation='relu')` uses).
"""
from __future__ import annotations

from ...common.errors import OpValueError
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


_ACTIVATIONS = {
    "relu": ReLU, "relu6": ReLU6, "leakyrelu": LeakyReLU, "elu": ELU, "gelu": GELU, "silu": SiLU,
    "sigmoid": Sigmoid, "tanh": Tanh, "softplus": Softplus, "softmax": Softmax, "logsoftmax": LogSoftmax,
}


def get_activation(name, prim_name=None):
    """The activation cell called `name` ('relu', 'gelu', ...); None for None."""
    if name is None:
        return None
    key = name.lower() if isinstance(name, str) else name
    if key not in _ACTIVATIONS:
        raise OpValueError(prim_name or "get_activation", f"an activation name in {sorted(_ACTIVATIONS)}", repr(name))
    return _ACTIVATIONS[key]()
