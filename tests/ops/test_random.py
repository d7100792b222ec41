"""Random ops: reproducible under ms.set_seed, the right distributions, and bad input.

Distribution checks use a fixed seed and many samples, so they are deterministic; the tolerances
are several standard errors wide."""
import numpy as np
import pytest

import minispore as ms
from minispore import OpTypeError, OpValueError, Tensor, ops

DRAWS = {
    "rand": lambda: ops.rand(3, 4),
    "randn": lambda: ops.randn((3, 4)),
    "rand_like": lambda: ops.rand_like(Tensor(np.zeros(5, np.float32))),
    "randn_like": lambda: ops.randn_like(Tensor(np.zeros(5, np.float32))),
    "uniform": lambda: ops.uniform((5,), Tensor(-1.0), Tensor(2.0)),
    "uniform_int": lambda: ops.uniform((5,), Tensor(np.array(0, np.int32)), Tensor(np.array(9, np.int32)),
                                       dtype=ms.int32),
    "standard_normal": lambda: ops.standard_normal((2, 3)),
    "normal": lambda: ops.normal((4,), Tensor(np.array([0.0, 10.0], np.float32)).reshape(2, 1), 2.0),
    "randint": lambda: ops.randint(0, 100, (6,)),
    "multinomial": lambda: ops.multinomial(Tensor(np.array([[0.2, 0.3, 0.5], [1, 0, 1]], np.float32)), 6),
    "multinomial_no_replacement": lambda: ops.multinomial(Tensor(np.ones((2, 10), np.float32)), 4, False),
}


@pytest.mark.parametrize("name", list(DRAWS))
def test_set_seed_makes_every_random_op_reproducible(name):
    draw = DRAWS[name]
    ms.set_seed(123)
    a = draw().asnumpy().copy()
    b = draw().asnumpy().copy()
    ms.set_seed(123)
    np.testing.assert_array_equal(draw().asnumpy(), a)
    np.testing.assert_array_equal(draw().asnumpy(), b)
    assert not np.array_equal(a, b) or a.size <= 2     # the stream moves on between calls


def test_rng_state_round_trip():
    ms.set_seed(5)
    ops.rand(3)
    state = ms.get_rng_state()
    a = ops.randn(4).asnumpy().copy()
    ms.set_rng_state(state)
    np.testing.assert_array_equal(ops.randn(4).asnumpy(), a)


def test_op_seed_repeats_and_does_not_advance_the_shared_stream():
    ms.set_seed(9)
    a = ops.rand(5, seed=3).asnumpy().copy()
    np.testing.assert_array_equal(ops.rand(5, seed=3).asnumpy(), a)
    assert not np.array_equal(ops.rand(5, seed=4).asnumpy(), a)
    after_seeded = ops.rand(5).asnumpy().copy()
    ms.set_seed(9)
    np.testing.assert_array_equal(ops.rand(5).asnumpy(), after_seeded)


def test_uniform_and_normal_moments():
    ms.set_seed(0)
    n = 200_000
    u = ops.rand(n).asnumpy().astype(np.float64)
    assert u.min() >= 0 and u.max() < 1
    assert abs(u.mean() - 0.5) < 0.005 and abs(u.var() - 1 / 12) < 0.002
    z = ops.randn(n).asnumpy().astype(np.float64)
    assert abs(z.mean()) < 0.01 and abs(z.std() - 1) < 0.01
    s = ops.normal((n, 2), Tensor(np.array([-3.0, 4.0], np.float32)), Tensor(np.array([0.5, 2.0], np.float32)))
    s = s.asnumpy().astype(np.float64)
    np.testing.assert_allclose(s.mean(axis=0), [-3.0, 4.0], atol=0.02)
    np.testing.assert_allclose(s.std(axis=0), [0.5, 2.0], rtol=0.01)
    v = ops.uniform((n,), Tensor(-2.0), Tensor(6.0)).asnumpy()
    assert v.min() >= -2 and v.max() < 6 and abs(v.mean() - 2.0) < 0.03


def test_short_float_uniform_stays_below_one():
    ms.set_seed(1)
    b = ops.rand(100_000, dtype=ms.bfloat16).asnumpy().astype(np.float32)
    assert b.max() < 1.0 and b.min() >= 0.0


def test_randint_covers_its_range():
    ms.set_seed(2)
    r = ops.randint(-3, 4, (10_000,)).asnumpy()
    assert r.dtype == np.int64
    assert set(np.unique(r).tolist()) == set(range(-3, 4))


def test_multinomial_with_replacement_matches_the_probabilities():
    ms.set_seed(3)
    w = np.array([[1.0, 0.0, 3.0, 6.0], [0.0, 5.0, 5.0, 0.0]], np.float32)     # unnormalized rows
    s = ops.multinomial(Tensor(w), 50_000).asnumpy()
    assert s.shape == (2, 50_000) and s.dtype == np.int64
    for row in range(2):
        freq = np.bincount(s[row], minlength=4) / s.shape[1]
        np.testing.assert_allclose(freq, w[row] / w[row].sum(), atol=0.01)
        assert np.all(freq[w[row] == 0] == 0)          # zero-probability categories never drawn


def test_multinomial_without_replacement():
    ms.set_seed(4)
    p = np.array([0.1, 0.0, 0.2, 0.7], np.float32)
    firsts = []
    for _ in range(4000):
        s = ops.multinomial(Tensor(p), 3, replacement=False).asnumpy()
        assert len(set(s.tolist())) == 3 and 1 not in s
        firsts.append(s[0])
    # the first draw of a without-replacement sample follows p itself
    np.testing.assert_allclose(np.bincount(firsts, minlength=4) / 4000, p, atol=0.03)


def test_random_outputs_are_not_tracked():
    def f(x):
        return (x * ops.rand(3)).sum()

    ms.set_seed(0)
    r = ops.rand(3).asnumpy().copy()
    ms.set_seed(0)
    np.testing.assert_allclose(ms.grad(f)(Tensor(np.ones(3, np.float32))).asnumpy(), r)


CASES = [
    ("rand", OpValueError, lambda: ops.rand(2, -1)),
    ("rand", OpTypeError, lambda: ops.rand(3, dtype=ms.int32)),
    ("randn", OpValueError, lambda: ops.randn(3, seed=-1)),
    ("randint", OpValueError, lambda: ops.randint(5, 5, (2,))),
    ("randint", OpTypeError, lambda: ops.randint(0.5, 5, (2,))),
    ("randint", OpTypeError, lambda: ops.randint(0, 5, (2,), dtype="complex64")),
    ("uniform", OpValueError, lambda: ops.uniform((2,), Tensor(3.0), Tensor(1.0))),
    ("uniform", OpValueError, lambda: ops.uniform((2, 3), Tensor(np.zeros(2)), Tensor(1.0))),
    ("normal", OpValueError, lambda: ops.normal((2,), 0.0, -1.0)),
    ("multinomial", OpTypeError, lambda: ops.multinomial(Tensor(np.array([1, 2])), 1)),
    ("multinomial", OpValueError, lambda: ops.multinomial(Tensor(np.ones((2, 2, 2), np.float32)), 1)),
    ("multinomial", OpValueError, lambda: ops.multinomial(Tensor(np.array([0.5, -0.1], np.float32)), 1)),
    ("multinomial", OpValueError, lambda: ops.multinomial(Tensor(np.zeros(3, np.float32)), 1)),
    ("multinomial", OpValueError, lambda: ops.multinomial(Tensor(np.ones(3, np.float32)), 4, False)),
    ("multinomial", OpValueError, lambda: ops.multinomial(Tensor(np.array([1, 0, 0], np.float32)), 2, False)),
    ("multinomial", OpValueError, lambda: ops.multinomial(Tensor(np.ones(3, np.float32)), 0)),
    ("multinomial", OpTypeError, lambda: ops.multinomial(np.ones(3), 1)),
]


@pytest.mark.parametrize("op,err,call", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_bad_input(op, err, call):
    with pytest.raises(err) as info:
        call()
    assert f"For '{op}'" in str(info.value)
