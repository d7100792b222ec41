"""Creation ops: MindSpore's default dtypes and argument forms, and bad input.
(Values are checked against NumPy references in the op table, minispore/testing/opdb/creation.py.)"""
import numpy as np
import pytest

import minispore as ms
from minispore import OpTypeError, OpValueError, Tensor, ops


def test_default_dtypes_follow_mindspore():
    assert ops.zeros((2, 3)).dtype == ms.float32
    assert ops.ones(4).dtype == ms.float32
    assert ops.eye(3).dtype == ms.float32
    assert ops.linspace(0, 1, 3).dtype == ms.float32
    assert ops.full((2,), 3).dtype == ms.int64
    assert ops.full((2,), 3.0).dtype == ms.float32
    assert ops.full((2,), True).dtype == ms.bool_
    assert ops.full((2,), Tensor(np.array(2, np.int32))).dtype == ms.int32
    assert ops.arange(5).dtype == ms.int64
    assert ops.arange(0, 1, 0.5).dtype == ms.float32
    assert ops.full_like(Tensor(np.ones(2, np.float16)), 7).dtype == ms.float16


def test_argument_forms():
    assert ops.zeros(Tensor(np.array([2, 3]))).shape == (2, 3)          # a shape Tensor
    assert ops.ones([2, 1], ms.int32).dtype == ms.int32
    np.testing.assert_array_equal(ops.arange(Tensor(3)).asnumpy(), [0, 1, 2])
    np.testing.assert_array_equal(ops.arange(1, 10, 4).asnumpy(), [1, 5, 9])
    np.testing.assert_allclose(ops.arange(1.0, 0.0, -0.25).asnumpy(), [1.0, 0.75, 0.5, 0.25])
    np.testing.assert_array_equal(ops.eye(2, 3, ms.int64).asnumpy(), [[1, 0, 0], [0, 1, 0]])
    np.testing.assert_array_equal(ops.full((2, 2), 1.5, dtype=ms.float64).asnumpy(), np.full((2, 2), 1.5))


def test_created_tensors_are_not_tracked():
    def f(x):
        return (x * ops.ones((3,))).sum() + ops.zeros(()).sum()

    np.testing.assert_allclose(ms.grad(f)(Tensor(np.array([1.0, 2.0, 3.0], np.float32))).asnumpy(), [1, 1, 1])


CASES = [
    ("zeros", OpValueError, lambda: ops.zeros((2, -1))),
    ("zeros", OpTypeError, lambda: ops.zeros("2")),
    ("ones", OpTypeError, lambda: ops.ones((2.0, 3))),
    ("ones", OpTypeError, lambda: ops.ones(Tensor(np.array([2.0])))),
    ("full", OpTypeError, lambda: ops.full((2,), "x")),
    ("full", OpValueError, lambda: ops.full((2,), Tensor(np.ones(2)))),
    ("full_like", OpTypeError, lambda: ops.full_like(np.ones(2), 1)),
    ("arange", OpValueError, lambda: ops.arange(0, 5, 0)),
    ("arange", OpValueError, lambda: ops.arange(5, 0)),                # empty range for a positive step
    ("arange", OpValueError, lambda: ops.arange(0, 5, -1)),
    ("arange", OpTypeError, lambda: ops.arange("5")),
    ("linspace", OpValueError, lambda: ops.linspace(0, 1, 0)),
    ("linspace", OpTypeError, lambda: ops.linspace(0, 1, 2.5)),
    ("eye", OpValueError, lambda: ops.eye(-1)),
    ("eye", OpTypeError, lambda: ops.eye(2.0)),
    ("zeros", OpTypeError, lambda: ops.zeros((2,), "complex64")),
    ("arange", OpTypeError, lambda: ops.arange(3, dtype="float128")),
]


@pytest.mark.parametrize("op,err,call", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_bad_input(op, err, call):
    with pytest.raises(err) as info:
        call()
    assert f"For '{op}'" in str(info.value)
