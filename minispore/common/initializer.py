"""Parameter initializers (MindSpore's `mindspore.common.initializer`).

An `Initializer` is a recipe: "draw from N(0, 0.02)", "He-uniform for this fan-in", "all ones".
It knows nothing about a shape until it is asked to `generate(shape, dtype)` an array.

`initializer(init, shape, dtype)` pairs a recipe with a shape and dtype and returns a Tensor whose
data is drawn the first time anything reads it (MindSpore defers initialization the same way, so
that a huge model can be described before memory is spent on it). Every random draw comes from
`minispore.common.context.rng()`, so `ms.set_seed(s)` makes a model's initial weights reproducible.

The fan-based rules (Xavier/Glorot, He/Kaiming) scale the spread of the weights by the number of
inputs (`fan_in`) and/or outputs (`fan_out`) of a unit, so that activations and gradients keep
roughly unit variance from layer to layer:

    XavierUniform   U(-b, b),  b = gain * sqrt(6 / (fan_in + fan_out))
    XavierNormal    N(0, s),   s = gain * sqrt(2 / (fan_in + fan_out))
    HeUniform       U(-b, b),  b = gain * sqrt(3 / fan)      fan = fan_in or fan_out (mode)
    HeNormal        N(0, s),   s = gain / sqrt(fan)

For a weight of shape (out, in, *kernel), fan_in = in * prod(kernel), fan_out = out * prod(kernel).
"""
from __future__ import annotations

import math
import numbers

import numpy as np
import scipy.special

from . import dtype as mstype
from .context import rng
from .errors import OpTypeError, OpValueError
from .tensor import Tensor

__all__ = ["Initializer", "initializer", "Zero", "One", "Constant", "Normal", "Uniform", "TruncatedNormal",
           "XavierUniform", "XavierNormal", "HeUniform", "HeNormal", "calculate_gain",
           "_calculate_fan_in_and_fan_out", "_calculate_correct_fan"]

# ------------------------------------------------------------------------------------------------
# fan and gain (same formulas as MindSpore and PyTorch)


def _calculate_fan_in_and_fan_out(shape, who="initializer"):
    """(fan_in, fan_out) of a weight of shape (out, in, *receptive_field)."""
    shape = tuple(shape)
    if len(shape) < 2:
        raise OpValueError(who, "a shape with at least 2 dimensions to compute fan_in and fan_out",
                           f"shape {shape}")
    receptive = 1
    for s in shape[2:]:
        receptive *= s
    return shape[1] * receptive, shape[0] * receptive


def _calculate_correct_fan(shape, mode, who="initializer"):
    mode = mode.lower() if isinstance(mode, str) else mode
    if mode not in ("fan_in", "fan_out"):
        raise OpValueError(who, "mode 'fan_in' or 'fan_out'", repr(mode))
    fan_in, fan_out = _calculate_fan_in_and_fan_out(shape, who)
    return fan_in if mode == "fan_in" else fan_out


_LINEAR_GAIN = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                "conv_transpose3d", "sigmoid")


def calculate_gain(nonlinearity, param=None):
    """The recommended gain for a nonlinearity (PyTorch's/MindSpore's table).

    linear/conv/sigmoid -> 1, tanh -> 5/3, relu -> sqrt(2), selu -> 3/4,
    leaky_relu(slope) -> sqrt(2 / (1 + slope^2)) (slope defaults to 0.01).
    """
    if nonlinearity in _LINEAR_GAIN:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "selu":
        return 3.0 / 4
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif isinstance(param, numbers.Real) and not isinstance(param, bool):
            slope = float(param)
        else:
            raise OpTypeError("calculate_gain", "negative_slope as a number", repr(param))
        return math.sqrt(2.0 / (1 + slope ** 2))
    known = list(_LINEAR_GAIN) + ["tanh", "relu", "selu", "leaky_relu"]
    raise OpValueError("calculate_gain", f"a nonlinearity in {known}", repr(nonlinearity))


# ------------------------------------------------------------------------------------------------
# the recipes


class Initializer:
    """Base class. Subclasses implement `_sample(shape) -> float64 ndarray` (or override `generate`)."""

    def __init__(self, **kwargs):
        self._kwargs = kwargs

    def generate(self, shape, dtype=mstype.float32) -> np.ndarray:
        """A new array of `shape` and `dtype` drawn from this recipe."""
        shape = _check_shape(type(self).__name__, shape)
        d = mstype.as_dtype(dtype)
        return np.asarray(self._sample(shape)).astype(d.np, copy=False)

    def _sample(self, shape):
        raise NotImplementedError

    def __call__(self, arr: np.ndarray):
        """MindSpore's Initializer fills an array in place: `init(arr)`."""
        arr[...] = self._sample(arr.shape)
        return arr

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self._kwargs.items())
        return f"{type(self).__name__}({args})"


class Zero(Initializer):
    """All zeros (`'zeros'`)."""

    def generate(self, shape, dtype=mstype.float32):
        return np.zeros(_check_shape("Zero", shape), dtype=mstype.as_dtype(dtype).np)

    def _sample(self, shape):
        return np.zeros(shape)


class One(Initializer):
    """All ones (`'ones'`)."""

    def generate(self, shape, dtype=mstype.float32):
        return np.ones(_check_shape("One", shape), dtype=mstype.as_dtype(dtype).np)

    def _sample(self, shape):
        return np.ones(shape)


class Constant(Initializer):
    """Every element equal to `value`."""

    def __init__(self, value):
        if not isinstance(value, (numbers.Number, np.number)) or isinstance(value, complex):
            raise OpTypeError("Constant", "value as a real number", type(value).__name__)
        super().__init__(value=value)
        self.value = value

    def generate(self, shape, dtype=mstype.float32):
        return np.full(_check_shape("Constant", shape), self.value, dtype=mstype.as_dtype(dtype).np)

    def _sample(self, shape):
        return np.full(shape, self.value, dtype=np.float64)


class Normal(Initializer):
    """N(mean, sigma^2). MindSpore's default `'normal'` has sigma=0.01."""

    def __init__(self, sigma=0.01, mean=0.0):
        _check_nonneg("Normal", "sigma", sigma)
        super().__init__(sigma=sigma, mean=mean)
        self.sigma, self.mean = float(sigma), float(mean)

    def _sample(self, shape):
        return rng().normal(self.mean, self.sigma, size=shape)


class Uniform(Initializer):
    """U(-scale, scale)."""

    def __init__(self, scale=0.07):
        _check_nonneg("Uniform", "scale", scale)
        super().__init__(scale=scale)
        self.scale = float(scale)

    def _sample(self, shape):
        return rng().uniform(-self.scale, self.scale, size=shape)


class TruncatedNormal(Initializer):
    """N(mean, sigma^2) restricted to [a, b] (absolute bounds, as in MindSpore 2.x).

    Drawn by inverting the normal CDF on the slice of [0, 1] that maps into [a, b], so every sample
    is exact (no rejection loop) and the result is the true truncated distribution.
    """

    def __init__(self, sigma=0.01, mean=0.0, a=-2.0, b=2.0):
        _check_nonneg("TruncatedNormal", "sigma", sigma)
        if not a < b:
            raise OpValueError("TruncatedNormal", "a < b", f"a={a}, b={b}")
        super().__init__(sigma=sigma, mean=mean, a=a, b=b)
        self.sigma, self.mean, self.a, self.b = float(sigma), float(mean), float(a), float(b)

    def _sample(self, shape):
        if self.sigma == 0:
            return np.full(shape, min(max(self.mean, self.a), self.b))
        lo = scipy.special.ndtr((self.a - self.mean) / self.sigma)
        hi = scipy.special.ndtr((self.b - self.mean) / self.sigma)
        u = rng().uniform(lo, hi, size=shape)
        x = self.mean + self.sigma * scipy.special.ndtri(u)
        return np.clip(x, self.a, self.b)


class XavierUniform(Initializer):
    """Glorot uniform: U(-b, b), b = gain * sqrt(6 / (fan_in + fan_out))."""

    def __init__(self, gain=1):
        super().__init__(gain=gain)
        self.gain = float(gain)

    def _sample(self, shape):
        fan_in, fan_out = _calculate_fan_in_and_fan_out(shape, "XavierUniform")
        bound = self.gain * math.sqrt(6.0 / (fan_in + fan_out))
        return rng().uniform(-bound, bound, size=shape)


class XavierNormal(Initializer):
    """Glorot normal: N(0, s^2), s = gain * sqrt(2 / (fan_in + fan_out))."""

    def __init__(self, gain=1):
        super().__init__(gain=gain)
        self.gain = float(gain)

    def _sample(self, shape):
        fan_in, fan_out = _calculate_fan_in_and_fan_out(shape, "XavierNormal")
        std = self.gain * math.sqrt(2.0 / (fan_in + fan_out))
        return rng().normal(0.0, std, size=shape)


class HeUniform(Initializer):
    """Kaiming uniform: U(-b, b), b = gain * sqrt(3 / fan), gain = calculate_gain(nonlinearity, slope).

    `HeUniform(math.sqrt(5))` (leaky_relu with slope sqrt(5)) gives b = 1/sqrt(fan_in): the default
    of `nn.Dense` and `nn.Conv2d`, same as PyTorch's Linear/Conv.
    """

    def __init__(self, negative_slope=0, mode="fan_in", nonlinearity="leaky_relu"):
        _calculate_correct_fan((1, 1), mode, "HeUniform")          # validate mode now
        self.gain = calculate_gain(nonlinearity, negative_slope)
        super().__init__(negative_slope=negative_slope, mode=mode, nonlinearity=nonlinearity)
        self.mode = mode

    def _sample(self, shape):
        fan = _calculate_correct_fan(shape, self.mode, "HeUniform")
        bound = math.sqrt(3.0) * self.gain / math.sqrt(fan)
        return rng().uniform(-bound, bound, size=shape)


class HeNormal(Initializer):
    """Kaiming normal: N(0, s^2), s = gain / sqrt(fan)."""

    def __init__(self, negative_slope=0, mode="fan_in", nonlinearity="leaky_relu"):
        _calculate_correct_fan((1, 1), mode, "HeNormal")
        self.gain = calculate_gain(nonlinearity, negative_slope)
        super().__init__(negative_slope=negative_slope, mode=mode, nonlinearity=nonlinearity)
        self.mode = mode

    def _sample(self, shape):
        fan = _calculate_correct_fan(shape, self.mode, "HeNormal")
        return rng().normal(0.0, self.gain / math.sqrt(fan), size=shape)


# names accepted as strings: the lower-case class name plus MindSpore's aliases
_ALIASES = {
    "zero": Zero, "zeros": Zero, "one": One, "ones": One, "constant": Constant,
    "normal": Normal, "uniform": Uniform, "truncatednormal": TruncatedNormal, "truncated_normal": TruncatedNormal,
    "xavieruniform": XavierUniform, "xavier_uniform": XavierUniform,
    "xaviernormal": XavierNormal, "xavier_normal": XavierNormal,
    "heuniform": HeUniform, "he_uniform": HeUniform, "henormal": HeNormal, "he_normal": HeNormal,
}


def _check_shape(who, shape):
    if isinstance(shape, numbers.Integral):
        shape = (int(shape),)
    try:
        shape = tuple(int(s) for s in shape)
    except TypeError:
        raise OpTypeError(who, "shape as an int or a sequence of ints", repr(shape)) from None
    if any(s < 0 for s in shape):
        raise OpValueError(who, "non-negative sizes in shape", repr(shape))
    return shape


def _check_nonneg(who, name, v):
    if not isinstance(v, numbers.Real) or isinstance(v, bool) or v < 0:
        raise OpValueError(who, f"'{name}' as a non-negative number", repr(v))


def _as_initializer(init) -> Initializer:
    if isinstance(init, Initializer):
        return init
    if isinstance(init, str):
        cls = _ALIASES.get(init.lower())
        if cls is None:
            raise OpValueError("initializer", f"an initializer name in {sorted(_ALIASES)}", repr(init))
        if cls is Constant:
            raise OpValueError("initializer", "a value for 'constant' (use Constant(value) or a number)", "'constant'")
        return cls()
    if isinstance(init, (numbers.Number, np.number)) and not isinstance(init, (bool, complex)):
        return Constant(init)
    raise OpTypeError("initializer", "init as a Tensor, str, Initializer or number", type(init).__name__)


# ------------------------------------------------------------------------------------------------
# the lazily initialized tensor


class InitTensor(Tensor):
    """A Tensor that draws its data from `init` the first time the data is read.

    `shape`, `dtype` and `has_init` are known without drawing. Anything that reads `_data` (an op,
    `asnumpy()`, `Parameter(...)`) draws it once; after that it is an ordinary Tensor.
    """

    __slots__ = ("init", "_init_shape", "_init_dtype")

    def _get_data(self):
        try:
            return Tensor._data.__get__(self)
        except AttributeError:
            arr = self.init.generate(self._init_shape, self._init_dtype)
            Tensor._data.__set__(self, arr)
            self.init = None
            return arr

    def _set_data(self, arr):
        Tensor._data.__set__(self, arr)
        self.init = None

    _data = property(_get_data, _set_data)

    @property
    def has_init(self) -> bool:
        """True until the data has been drawn."""
        return self.init is not None

    @property
    def shape(self):
        return self._init_shape if self.init is not None else self._data.shape

    @property
    def dtype(self):
        return self._init_dtype if self.init is not None else mstype._BY_NP[self._data.dtype]

    @property
    def ndim(self):
        return len(self.shape)

    def init_data(self) -> Tensor:
        """Draw the data now (MindSpore's `Tensor.init_data`) and return the tensor."""
        self._get_data()
        return self

    def generate_for_parameter(self) -> np.ndarray:
        return self._data

    def __repr__(self):
        if self.init is not None:
            return f"Tensor(shape={list(self._init_shape)}, dtype={self._init_dtype}, init={self.init!r})"
        return super().__repr__()


def initializer(init, shape=None, dtype=mstype.float32) -> Tensor:
    """A Tensor of `shape` and `dtype` initialized by `init` (drawn on first use).

    `init` may be an `Initializer`, a name (`'normal'`, `'zeros'`, `'he_uniform'`, ...), a number
    (a constant), or a Tensor (returned as is after its shape is checked).
    """
    if isinstance(init, Tensor):
        if shape is not None and tuple(_check_shape("initializer", shape)) != tuple(init.shape):
            raise OpValueError("initializer", f"an init Tensor of shape {tuple(shape)}", f"shape {tuple(init.shape)}")
        return init
    recipe = _as_initializer(init)
    if shape is None:
        raise OpValueError("initializer", "a shape when init is not a Tensor", "shape=None")
    t = InitTensor.__new__(InitTensor)
    t._node = None
    t._version = 0
    t.init = recipe
    t._init_shape = _check_shape("initializer", shape)
    t._init_dtype = mstype.as_dtype(dtype)
    return t
