"""grad / value_and_grad return structures as MindSpore 2.10 has them (also compared against the
real wheel by tests/fidelity/cases/autodiff.py); gradients checked against closed forms."""
import numpy as np
import pytest

import minispore as ms
from minispore import nn
from minispore.common.errors import OpTypeError, OpValueError

A = np.array([1.0, 2.0, 3.0], np.float32)
B = np.array([4.0, -5.0, 6.0], np.float32)


def xy():
    return ms.Tensor(A), ms.Tensor(B)


def dot(a, b):
    return (a * b).sum()


class Net(nn.Cell):
    def __init__(self):
        super().__init__()
        self.w = ms.Parameter(ms.Tensor(np.array([0.5, -1.0, 2.0], np.float32)), name="w")
        self.b = ms.Parameter(ms.Tensor(np.array([0.1], np.float32)), name="b")

    def construct(self, a):
        return (a * self.w * self.w).sum() + self.b.sum() * 3


def test_tuple_of_one_position_is_bare_for_grad_and_value_and_grad():
    x, y = xy()
    g = ms.grad(dot, grad_position=(1,))(x, y)
    assert isinstance(g, ms.Tensor)
    np.testing.assert_array_equal(g.asnumpy(), A)
    v, g = ms.value_and_grad(dot, grad_position=(0,))(x, y)
    assert float(v) == pytest.approx(float(A @ B)) and isinstance(g, ms.Tensor)
    g, aux = ms.grad(lambda a, b: (dot(a, b), a + b), grad_position=(0,), has_aux=True)(x, y)
    assert isinstance(g, ms.Tensor) and isinstance(aux, tuple) and len(aux) == 1


def test_longer_tuples_stay_tuples():
    x, y = xy()
    gx, gy = ms.grad(dot, grad_position=(0, 1))(x, y)
    np.testing.assert_array_equal(gx.asnumpy(), B)
    np.testing.assert_array_equal(gy.asnumpy(), A)


def test_one_parameter_as_weights_gives_a_bare_gradient():
    net, (x, _) = Net(), xy()
    w = net.w.asnumpy().copy()
    g = ms.grad(net, grad_position=None, weights=net.w)(x)
    assert isinstance(g, ms.Tensor)
    np.testing.assert_allclose(g.asnumpy(), 2 * A * w)
    gx, gb = ms.grad(net, grad_position=0, weights=net.b)(x)
    np.testing.assert_allclose(gx.asnumpy(), w * w)
    np.testing.assert_allclose(gb.asnumpy(), [3.0])
    gw, gb = ms.grad(net, grad_position=None, weights=net.trainable_params())(x)   # a list: a tuple
    np.testing.assert_allclose(gb.asnumpy(), [3.0])


def test_return_ids_pairs_positions_and_names():
    net, (x, _) = Net(), xy()
    (p, gx), ((n1, _), (n2, gb)) = ms.grad(net, 0, net.trainable_params(), return_ids=True)(x)
    assert (p, n1, n2) == (0, "w", "b")
    np.testing.assert_allclose(gb.asnumpy(), [3.0])


def test_positions_refused_like_mindspore():
    x, y = xy()
    with pytest.raises(OpTypeError, match="'grad'"):
        ms.grad(dot, grad_position=[0])(x, y)
    with pytest.raises(OpValueError, match="'grad'"):
        ms.grad(dot, grad_position=-1)(x, y)
    with pytest.raises(OpValueError, match="'grad'"):
        ms.value_and_grad(dot, grad_position=(0, 2))(x, y)
    with pytest.raises(OpValueError, match="has_aux"):
        ms.grad(lambda a: (a * a).sum(), has_aux=True)(x)


def test_the_input_object_itself_is_differentiated_even_when_captured():
    # MindSpore tracks the object: a closure using the same tensor counts, and one object at two
    # positions gets the full gradient at both (d/dx sum(x*x) = 2x)
    x, _ = xy()
    np.testing.assert_allclose(ms.grad(lambda a: (a * x).sum())(x).asnumpy(), 2 * A)
    g0, g1 = ms.grad(dot, grad_position=(0, 1))(x, x)
    np.testing.assert_allclose(g0.asnumpy(), 2 * A)
    np.testing.assert_allclose(g1.asnumpy(), 2 * A)
    assert x._node is None                           # put back afterwards


def test_gradient_has_the_input_dtype():
    g = ms.grad(lambda a: a.sum())(ms.Tensor(np.array([1, 2], np.int32)))
    assert g.dtype is ms.int32 and g.asnumpy().tolist() == [1, 1]
    g = ms.grad(lambda a: (a * a).sum())(ms.Tensor(np.array([1.0, 3.0], np.float16)))
    assert g.dtype is ms.float16 and g.asnumpy().tolist() == [2.0, 6.0]


def test_grad_of_grad_still_works_with_in_place_leaves():
    x, _ = xy()
    g2 = ms.grad(ms.grad(lambda a: (a ** 3).sum()))(x)
    np.testing.assert_allclose(g2.asnumpy(), 6 * A)
    # the inner gradient of a function closing over the outer input
    outer = ms.grad(lambda a: (ms.grad(lambda b: (b * a * a).sum())(a) * a).sum())(x)
    # inner: d/db sum(b a^2) with b is a -> the same object -> 3a^2; outer: d/da sum(3a^3) = 9a^2
    np.testing.assert_allclose(outer.asnumpy(), 9 * A ** 2, rtol=1e-6)


def test_grad_operation_get_all_keeps_a_tuple_of_one():
    x, _ = xy()
    g = ms.ops.GradOperation(get_all=True)(lambda a: (a * a).sum())(x)
    assert isinstance(g, tuple) and len(g) == 1
    np.testing.assert_allclose(g[0].asnumpy(), 2 * A)
