"""Tensor construction, dtype inference and the promotion table (MindSpore semantics)."""
import numpy as np
import pytest

import minispore as ms
from minispore import Tensor
from minispore.common import dtype as mstype
from minispore.common.errors import MinisporeError, OpTypeError, OpValueError


@pytest.mark.parametrize("data,expected", [
    ([1, 2], ms.int64), ([1.0], ms.float32), (1.0, ms.float32), (np.ones(2), ms.float64),
    (True, ms.bool_), (3, ms.int64), (np.ones(2, np.float16), ms.float16),
])
def test_default_dtype_inference(data, expected):
    assert Tensor(data).dtype is expected


def test_dtype_names():
    assert str(ms.float32) == "Float32"
    assert repr(ms.float32) == "mindspore.float32"
    assert str(ms.bfloat16) == "BFloat16"
    assert ms.dtype_to_nptype(ms.float16) is np.float16


@pytest.mark.parametrize("a,b,expected", [
    (ms.int32, ms.float16, ms.float16), (ms.float16, ms.bfloat16, ms.float32), (ms.uint8, ms.int8, ms.int16),
    (ms.bool_, ms.int8, ms.int8), (ms.int64, ms.float32, ms.float32), (ms.float32, ms.float64, ms.float64),
])
def test_promotion_table_is_symmetric(a, b, expected):
    assert mstype.promote(a, b) is expected
    assert mstype.promote(b, a) is expected


def test_scalars_are_weak():
    x16 = Tensor(np.ones(3, np.float16))
    assert (x16 + 1.5).dtype is ms.float16
    xi = Tensor(np.ones(3, np.int32))
    assert (xi + 2).dtype is ms.int32
    assert (xi + 0.5).dtype is ms.float32            # int tensor with a float scalar -> default float
    assert (xi / 2).dtype is ms.float32               # true division of ints gives Float32


def test_mixed_tensor_promotion_matches_table():
    a = Tensor(np.ones(2, np.int32))
    b = Tensor(np.ones(2, np.float16))
    assert (a * b).dtype is ms.float16
    c = Tensor(np.ones(2), ms.bfloat16)
    assert (b + c).dtype is ms.float32


def test_cast_truncates_toward_zero():
    t = Tensor([-2.5, -0.5, 0.5, 2.7]).astype(ms.int32)
    assert t.tolist() == [-2, 0, 0, 2]


def test_metadata_and_from_numpy_shares_memory():
    # (MindSpore: Tensor(ndarray) copies, ms.from_numpy shares; see tests/common/test_tensor_fidelity.py)
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = ms.from_numpy(a)
    assert t.shape == (2, 3) and t.ndim == 2 and t.size == 6 and t.dtype is ms.float32
    a[0, 0] = 42
    assert t.asnumpy()[0, 0] == 42
    assert t.T.shape == (3, 2)
    assert t.view(3, 2).shape == (3, 2) and np.shares_memory(t.view(3, 2).asnumpy(), a)
    assert t.reshape((6,)).shape == (6,)


def test_operators_match_numpy():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4,))
    ta, tb = Tensor(a), Tensor(b)
    np.testing.assert_allclose((ta + tb).asnumpy(), a + b)
    np.testing.assert_allclose((ta - tb).asnumpy(), a - b)
    np.testing.assert_allclose((2 - ta).asnumpy(), 2 - a)
    np.testing.assert_allclose((ta * tb).asnumpy(), a * b)
    np.testing.assert_allclose((1 / (ta + 10)).asnumpy(), 1 / (a + 10))
    np.testing.assert_allclose((ta @ tb).asnumpy(), a @ b)
    np.testing.assert_array_equal((ta > tb).asnumpy(), a > b)
    np.testing.assert_allclose((-ta).asnumpy(), -a)
    np.testing.assert_allclose(abs(ta).asnumpy(), np.abs(a))
    np.testing.assert_allclose((ta ** 2).asnumpy(), a ** 2)
    np.testing.assert_allclose(ta.sum(axis=1).asnumpy(), a.sum(axis=1))
    np.testing.assert_allclose(ta.mean().asnumpy(), a.mean())


def test_numpy_on_the_left_defers_to_tensor():
    t = Tensor(np.ones(3, np.float32))
    out = np.ones(3, np.float32) + t
    assert isinstance(out, Tensor)


def test_bad_construction():
    with pytest.raises(OpTypeError, match="Tensor"):
        Tensor({"a": 1})
    with pytest.raises(OpValueError, match="ragged"):
        Tensor([[1, 2], [3]])
    with pytest.raises(OpValueError, match="one element"):
        Tensor([1.0, 2.0]).item()
    with pytest.raises(OpTypeError):
        Tensor(np.array(["a", "b"]))


def test_error_message_names_op_expected_got_and_user_frame():
    with pytest.raises(OpValueError) as e:
        ms.ops.add(Tensor(np.ones((2, 3))), Tensor(np.ones((4,))))
    msg = str(e.value)
    assert "For 'add'" in msg and "broadcast" in msg and "(2, 3)" in msg and "(4,)" in msg
    assert "test_dtype_and_tensor.py" in msg          # where in the user's code
    assert isinstance(e.value, ValueError) and isinstance(e.value, MinisporeError)


def test_parameter_basics():
    p = ms.Parameter(Tensor(np.ones((2, 3), np.float32)), name="p")
    assert repr(p) == "Parameter (name=p, shape=(2, 3), dtype=Float32, requires_grad=True)"
    p.set_data(Tensor(np.zeros((2, 3), np.float32)))
    assert p.asnumpy().sum() == 0
    with pytest.raises(OpValueError, match="set_data"):
        p.set_data(Tensor(np.zeros((3, 3), np.float32)))


def test_context_and_seed():
    assert ms.get_context("mode") == ms.PYNATIVE_MODE
    ms.set_context(mode=ms.GRAPH_MODE)
    assert ms.get_context("mode") == ms.GRAPH_MODE
    ms.set_context(mode=ms.PYNATIVE_MODE)
    with pytest.raises(OpValueError, match="set_context"):
        ms.set_context(no_such_key=1)
    with pytest.raises(OpValueError, match="device_target"):
        ms.set_context(device_target="NoSuchDevice")
    assert ms.get_context("device_target") == "CPU"
    from minispore.common.context import rng
    ms.set_seed(7)
    a = rng().random(3)
    ms.set_seed(7)
    np.testing.assert_array_equal(a, rng().random(3))


def test_bfloat16_storage():
    t = Tensor([1.0, 2.5], dtype=ms.bfloat16)
    assert t.dtype is ms.bfloat16
    np.testing.assert_allclose((t * 2).astype(ms.float32).asnumpy(), [2.0, 5.0])
