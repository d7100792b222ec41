"""Issue 12 §4: integer-like NumPy arguments work, and odd inputs give minispore errors.

NumPy integer scalars (`np.int64(0)`, what indexing an array gives) and 1-d integer arrays are
accepted wherever an int or a tuple of ints goes (axes, shapes, sizes); bools, floats and float
arrays are rejected with minispore messages. Edge inputs (0-d tensors, Bool tensors, a float
`steps`) either behave as MindSpore 2.10 does or raise a minispore Op*Error with its own message
-- never a raw NumPy exception, and never one wrapping NumPy's text.
"""
import numpy as np
import pytest

import minispore as ms
from minispore import Tensor, ops
from minispore.common.errors import OpIndexError, OpTypeError, OpValueError

X = np.arange(6, dtype=np.float32).reshape(2, 3)


def _own_message(err, op):
    """A minispore message naming the op, not NumPy's text passed through."""
    msg = str(err)
    assert f"For '{op}'" in msg
    for numpy_text in ("truth value", "ambiguous", "numpy", "ufunc", "AxisError", "modulo by zero",
                       "negative dimensions", "cannot convert float"):
        assert numpy_text not in msg, msg


# -- NumPy integers and integer arrays are ints and tuples of ints -------------------------------
@pytest.mark.parametrize("axis", [np.int64(0), np.int32(0), np.array(0)])
def test_sum_numpy_integer_axis(axis):
    np.testing.assert_array_equal(ops.sum(Tensor(X), axis).asnumpy(), X.sum(axis=0))


def test_sum_integer_array_axes_and_numpy_items():
    np.testing.assert_array_equal(ops.sum(Tensor(X), np.array([0, 1])).asnumpy(), X.sum())
    np.testing.assert_array_equal(ops.sum(Tensor(X), (np.int64(1),), keepdim=True).asnumpy(),
                                  X.sum(axis=1, keepdims=True))
    np.testing.assert_allclose(ops.mean(Tensor(X), np.int64(-1)).asnumpy(), X.mean(axis=-1))


@pytest.mark.parametrize("shape", [np.array([3, 2]), (np.int64(3), np.int64(2)), np.array([-1, 2])])
def test_reshape_integer_array_shape(shape):
    np.testing.assert_array_equal(ops.reshape(Tensor(X), shape).asnumpy(), X.reshape(3, 2))


def test_tensor_reshape_method_integer_array():
    np.testing.assert_array_equal(Tensor(X).reshape(np.array([3, 2])).asnumpy(), X.reshape(3, 2))


def test_other_axis_arguments_take_numpy_integers():
    x = Tensor(X)
    np.testing.assert_array_equal(ops.flip(x, np.array([1])).asnumpy(), X[:, ::-1])
    np.testing.assert_array_equal(ops.transpose(x, np.array([1, 0])).asnumpy(), X.T)
    np.testing.assert_array_equal(ops.squeeze(Tensor(X[None]), np.int64(0)).asnumpy(), X)
    np.testing.assert_array_equal(ops.tile(x, np.array([2, 1])).asnumpy(), np.tile(X, (2, 1)))
    idx = np.array([[2], [0]])
    np.testing.assert_array_equal(ops.gather_elements(x, np.int64(1), Tensor(idx)).asnumpy(),
                                  np.take_along_axis(X, idx, axis=1))
    np.testing.assert_allclose(ops.linspace(0, 1, np.int64(3)).asnumpy(), [0.0, 0.5, 1.0])


@pytest.mark.parametrize("bad", [0.0, True, np.bool_(True), np.array([0.0, 1.0]), np.array([True])])
def test_sum_rejects_bool_and_float_axes(bad):
    with pytest.raises(OpTypeError) as e:
        ops.sum(Tensor(X), bad)
    _own_message(e.value, "reduce_sum")


@pytest.mark.parametrize("bad", [np.array([3.0, 2.0]), (3.0, 2), (True, 6)])
def test_reshape_rejects_float_and_bool_shapes(bad):
    with pytest.raises(OpTypeError) as e:
        ops.reshape(Tensor(X), bad)
    _own_message(e.value, "reshape")


# -- the Tensor constructor and Tensor.item ------------------------------------------------------
def test_tensor_shape_with_minus_one_is_a_clear_error():
    with pytest.raises(OpValueError) as e:
        ms.Tensor(None, shape=(-1, 2))
    _own_message(e.value, "Tensor")
    with pytest.raises(OpTypeError) as e:
        ms.Tensor(None, shape=(2.0, 2))
    _own_message(e.value, "Tensor")


def test_tensor_shape_accepts_numpy_integers():
    t = ms.Tensor(None, shape=np.array([2, 3]), dtype=ms.float32)
    assert t.shape == (2, 3)
    np.testing.assert_array_equal(t.asnumpy(), np.zeros((2, 3)))
    assert ms.Tensor(X, shape=(np.int64(2), np.int64(3))).shape == (2, 3)


def test_item_index_out_of_range():
    t = Tensor(np.array([1.5, 2.5], np.float32))
    with pytest.raises(OpIndexError) as e:
        t.item(5)
    _own_message(e.value, "Tensor.item")
    with pytest.raises(OpIndexError):
        Tensor(X).item((0, 3))
    with pytest.raises(OpTypeError):
        t.item(1.0)
    assert t.item(np.int64(1)) == 2.5 and t.item(-2) == 1.5 and Tensor(X).item((1, 2)) == 5.0


# -- linspace with a non-integer steps Tensor ----------------------------------------------------
@pytest.mark.parametrize("steps", [Tensor(float("inf")), Tensor(float("nan")), Tensor(3.0),
                                   Tensor(np.array([2, 3]))])
def test_linspace_steps_tensor_must_be_one_integer(steps):
    with pytest.raises(OpTypeError) as e:
        ops.linspace(0, 1, steps)
    _own_message(e.value, "linspace")


def test_linspace_integer_steps_tensor():
    np.testing.assert_allclose(ops.linspace(0, 1, Tensor(np.int32(5))).asnumpy(), np.linspace(0, 1, 5))


# -- 0-d inputs (following MindSpore 2.10) -------------------------------------------------------
def test_gather_elements_0d_returns_the_element_and_its_gradient():
    x = Tensor(np.float32(1.5))
    for dim in (0, -1):
        out = ops.gather_elements(x, dim, Tensor(np.int64(0)))
        assert out.shape == () and out.item() == 1.5
    g = ms.grad(lambda t: ops.gather_elements(t, 0, Tensor(np.int64(0))) * 3.0)(x)
    assert g.shape == () and g.item() == 3.0
    with pytest.raises(OpIndexError) as e:
        ops.gather_elements(x, 0, Tensor(np.int64(1)))
    _own_message(e.value, "gather_elements")


def test_scatter_0d_is_rejected_as_in_mindspore():
    with pytest.raises(OpValueError) as e:
        ops.scatter(Tensor(np.float32(1.0)), 0, Tensor(np.int64(0)), Tensor(np.float32(2.0)))
    _own_message(e.value, "scatter")


@pytest.mark.parametrize("axis", [None, 0, -1, (0,)])
def test_squeeze_0d_named_axis(axis):
    out = ops.squeeze(Tensor(np.float32(2.0)), axis)
    assert out.shape == () and out.item() == 2.0


def test_squeeze_0d_axis_out_of_range():
    with pytest.raises(OpIndexError) as e:
        ops.squeeze(Tensor(np.float32(2.0)), 1)
    _own_message(e.value, "squeeze")


@pytest.mark.parametrize("dims", [(0,), (-1,), ()])
def test_flip_0d_is_rejected_as_in_mindspore(dims):
    with pytest.raises(OpValueError) as e:
        ops.flip(Tensor(np.float32(1.0)), dims)
    _own_message(e.value, "flip")


# -- Bool tensors have no negation or sign (MindSpore has no Bool kernel for Neg/Sign) ------------
@pytest.mark.parametrize("fn, op", [(lambda t: -t, "neg"), (ops.neg, "neg"), (ops.sign, "sign")])
def test_neg_and_sign_of_bool_are_clear_errors(fn, op):
    with pytest.raises(OpTypeError) as e:
        fn(Tensor(np.array([True, False])))
    _own_message(e.value, op)
    assert "logical_not" in str(e.value)


def test_neg_and_sign_of_numbers_unchanged():
    a = np.array([-2, 0, 3], np.int32)
    np.testing.assert_array_equal((-Tensor(a)).asnumpy(), -a)
    np.testing.assert_array_equal(ops.sign(Tensor(a.astype(np.float32))).asnumpy(), np.sign(a))
