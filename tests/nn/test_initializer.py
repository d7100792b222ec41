"""Initializers: formulas for the spread (fan-in/fan-out), reproducibility, names, lazy tensors."""
import math

import numpy as np
import pytest

import minispore as ms
from minispore.common import initializer as I
from minispore.common.errors import OpTypeError, OpValueError

N = 200_000      # samples for the statistical checks: std error of a variance estimate ~ 0.3%


def draw(init, shape, dtype=ms.float32):
    return I.initializer(init, shape, dtype).asnumpy().astype(np.float64)


def test_fan_in_fan_out():
    assert I._calculate_fan_in_and_fan_out((4, 3)) == (3, 4)
    assert I._calculate_fan_in_and_fan_out((8, 3, 5, 5)) == (75, 200)
    with pytest.raises(OpValueError, match="initializer"):
        I._calculate_fan_in_and_fan_out((7,))


def test_gain_table():
    assert I.calculate_gain("linear") == 1.0
    assert I.calculate_gain("relu") == pytest.approx(math.sqrt(2))
    assert I.calculate_gain("tanh") == pytest.approx(5 / 3)
    assert I.calculate_gain("leaky_relu", math.sqrt(5)) == pytest.approx(math.sqrt(2 / 6))
    assert I.calculate_gain("leaky_relu") == pytest.approx(math.sqrt(2 / (1 + 0.01 ** 2)))
    with pytest.raises(OpValueError, match="calculate_gain"):
        I.calculate_gain("swishy")


def test_he_uniform_bound_and_variance():
    ms.set_seed(1)
    shape = (N // 100, 100)                      # fan_in = 100
    x = draw(I.HeUniform(), shape)               # leaky_relu with slope 0: gain sqrt(2)
    bound = math.sqrt(2) * math.sqrt(3 / 100)
    assert x.max() <= bound and x.min() >= -bound
    assert x.max() > 0.99 * bound and x.min() < -0.99 * bound
    assert x.var() == pytest.approx(bound ** 2 / 3, rel=0.02)
    # mode='fan_out' uses the first dim times the receptive field
    y = draw(I.HeUniform(mode="fan_out", nonlinearity="relu"), (50, 4, 3, 3))
    assert np.abs(y).max() <= math.sqrt(2) * math.sqrt(3 / (50 * 9)) + 1e-7


def test_he_uniform_sqrt5_is_one_over_sqrt_fan_in():
    ms.set_seed(2)
    x = draw(I.HeUniform(math.sqrt(5)), (N // 64, 64))
    assert np.abs(x).max() == pytest.approx(1 / 8, rel=1e-3)


def test_he_normal_xavier_stats():
    ms.set_seed(3)
    x = draw(I.HeNormal(nonlinearity="relu"), (N // 50, 50))
    assert x.std() == pytest.approx(math.sqrt(2 / 50), rel=0.02)
    assert abs(x.mean()) < 0.01 * x.std() * 10
    x = draw(I.XavierUniform(gain=2.0), (N // 30, 30))
    b = 2.0 * math.sqrt(6 / (30 + N // 30))
    assert np.abs(x).max() <= b and np.abs(x).max() > 0.99 * b
    x = draw(I.XavierNormal(), (N // 40, 40, 1, 1))
    assert x.std() == pytest.approx(math.sqrt(2 / (40 + N // 40)), rel=0.02)


def test_normal_uniform_truncated():
    ms.set_seed(4)
    x = draw(I.Normal(sigma=0.5, mean=1.0), (N,))
    assert x.mean() == pytest.approx(1.0, abs=0.01) and x.std() == pytest.approx(0.5, rel=0.02)
    x = draw("normal", (N,))
    assert x.std() == pytest.approx(0.01, rel=0.02)             # MindSpore's default sigma
    x = draw(I.Uniform(0.3), (N,))
    assert np.abs(x).max() <= 0.3 and x.var() == pytest.approx(0.09 / 3, rel=0.02)
    assert np.abs(draw("uniform", (1000,))).max() <= 0.07
    x = draw(I.TruncatedNormal(sigma=1.0, a=-1.0, b=2.0), (N,))
    assert x.min() >= -1.0 and x.max() <= 2.0
    # mean of N(0,1) truncated to [a, b]: (phi(a) - phi(b)) / (Phi(b) - Phi(a))
    pdf = lambda z: math.exp(-z * z / 2) / math.sqrt(2 * math.pi)          # noqa: E731
    cdf = lambda z: 0.5 * (1 + math.erf(z / math.sqrt(2)))                  # noqa: E731
    expect = (pdf(-1) - pdf(2)) / (cdf(2) - cdf(-1))
    assert x.mean() == pytest.approx(expect, abs=0.01)


def test_constants_and_names():
    assert (draw("zeros", (2, 3)) == 0).all() and (draw("ones", (2,)) == 1).all()
    assert (draw(I.Constant(2.5), (3,)) == 2.5).all() and (draw(7, (2,)) == 7).all()
    assert I.initializer(0, [1], ms.int32).dtype == ms.int32
    for name, cls in [("xavier_uniform", I.XavierUniform), ("he_uniform", I.HeUniform), ("he_normal", I.HeNormal),
                      ("truncatedNormal", I.TruncatedNormal), ("XavierNormal", I.XavierNormal)]:
        assert isinstance(I.initializer(name, (2, 2)).init, cls)
    with pytest.raises(OpValueError, match="initializer.*an initializer name"):
        I.initializer("glorot_magic", (2, 2))
    with pytest.raises(OpTypeError, match="initializer"):
        I.initializer([1, 2], (2,))
    with pytest.raises(OpValueError, match="initializer"):
        I.initializer(ms.Tensor(np.zeros((2, 2), np.float32)), (3, 2))
    with pytest.raises(OpValueError, match="Normal"):
        I.Normal(sigma=-1)


def test_seed_reproducible_and_lazy():
    ms.set_seed(123)
    a = I.initializer(I.Normal(0.02), (4, 5))
    assert a.has_init and a.shape == (4, 5) and a.dtype == ms.float32     # nothing drawn yet
    a = a.asnumpy().copy()
    ms.set_seed(123)
    b = I.initializer(I.Normal(0.02), (4, 5)).asnumpy()
    np.testing.assert_array_equal(a, b)
    p = ms.Parameter(I.initializer("he_uniform", (3, 4), ms.float16), name="w")
    assert p.dtype == ms.float16 and p.shape == (3, 4)
    t = ms.Tensor(shape=(2, 3), dtype=ms.float64, init=I.One())
    assert t.dtype == ms.float64 and (t.asnumpy() == 1).all()
    # set_data accepts an initializer result (a common MindSpore idiom)
    p.set_data(I.initializer("zeros", p.shape, p.dtype))
    assert (p.asnumpy() == 0).all()
