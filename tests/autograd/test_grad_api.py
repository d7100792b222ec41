"""MindSpore's gradient API semantics (mindspore_api.md §2), checked with exact numbers.

The running example is the one MindSpore documents: x = 2, y = 3,
f(x, y) = (x*x*y, x + y) and g(x, y) = sum(x*x*y), so dg/dx = 2xy = 12 and dg/dy = x^2 = 4.
"""
import numpy as np
import pytest

import minispore as ms
from minispore import ops
from minispore.common.errors import OpTypeError, OpValueError


def t(v, dtype=np.float32):
    return ms.Tensor(np.asarray(v, dtype=dtype))


def g_fn(x, y):
    return (x * x * y).sum()


def f_two_outputs(x, y):
    return x * x * y, x + y


X, Y = t(2.0), t(3.0)


def val(a):
    return float(a.asnumpy())


# ---------------------------------------------------------------------------------------------
# grad_position
def test_default_position_is_input_0():
    assert val(ms.grad(g_fn)(X, Y)) == 12.0


def test_position_tuple_gives_a_tuple():
    gx, gy = ms.grad(g_fn, grad_position=(0, 1))(X, Y)
    assert (val(gx), val(gy)) == (12.0, 4.0)


def test_position_1_and_negative_position_refused():
    # MindSpore 2.10: "grad_position must be >= 0" (and lists are refused: int or tuple only)
    assert val(ms.grad(g_fn, grad_position=1)(X, Y)) == 4.0
    with pytest.raises(OpValueError, match="grad_position"):
        ms.grad(g_fn, grad_position=-1)(X, Y)
    with pytest.raises(OpTypeError, match="grad_position"):
        ms.grad(g_fn, grad_position=[0, 1])(X, Y)


def test_single_element_tuple_position_is_bare():
    # MindSpore 2.10 unwraps a tuple of one position: grad(f, grad_position=(1,)) returns a Tensor
    out = ms.grad(g_fn, grad_position=(1,))(X, Y)
    assert not isinstance(out, tuple) and val(out) == 4.0


def test_gradient_has_the_input_shape_and_dtype():
    x = t(np.arange(6).reshape(2, 3), np.float64)
    gx = ms.grad(lambda a: (a * a).sum())(x)
    assert gx.shape == (2, 3) and gx.dtype == ms.float64
    np.testing.assert_array_equal(gx.asnumpy(), 2 * np.arange(6).reshape(2, 3))


def test_input_not_used_gets_zeros():
    gx, gy = ms.grad(lambda a, b: (a * 3.0).sum(), grad_position=(0, 1))(X, t([1.0, 2.0]))
    assert val(gx) == 3.0
    np.testing.assert_array_equal(gy.asnumpy(), [0.0, 0.0])


def test_non_tensor_at_a_grad_position_is_rejected():
    with pytest.raises(OpTypeError, match="'grad'"):
        ms.grad(lambda a, b: a * b, grad_position=1)(X, 3.0)


def test_bad_positions_are_rejected():
    with pytest.raises(OpValueError, match="'grad'"):
        ms.grad(g_fn, grad_position=2)(X, Y)
    with pytest.raises(OpTypeError, match="'grad'"):
        ms.grad(g_fn, grad_position=(0, "1"))(X, Y)
    with pytest.raises(OpValueError, match="'grad'"):
        ms.grad(g_fn, grad_position=None)


# ---------------------------------------------------------------------------------------------
# several outputs, has_aux
def test_several_outputs_without_aux_differentiate_their_sum():
    # d/dx (x*x*y + x + y) = 2xy + 1 = 13
    assert val(ms.grad(f_two_outputs)(X, Y)) == 13.0
    gx, gy = ms.grad(f_two_outputs, grad_position=(0, 1))(X, Y)
    assert (val(gx), val(gy)) == (13.0, 5.0)


def test_has_aux_differentiates_output_0_only():
    grads, aux = ms.grad(f_two_outputs, has_aux=True)(X, Y)
    assert val(grads) == 12.0
    assert isinstance(aux, tuple) and len(aux) == 1 and val(aux[0]) == 5.0


def test_value_and_grad_has_aux_shapes():
    (out0, aux), grads = ms.value_and_grad(f_two_outputs, grad_position=(0, 1), has_aux=True)(X, Y)
    assert (val(out0), val(aux)) == (12.0, 5.0)
    assert [val(g) for g in grads] == [12.0, 4.0]


def test_has_aux_with_three_outputs_keeps_all_aux():
    def fn(x):
        return x * x, x + 1.0, x * 10.0
    grads, aux = ms.grad(fn, has_aux=True)(X)
    assert val(grads) == 4.0 and [val(a) for a in aux] == [3.0, 20.0]


def test_has_aux_needs_a_tuple():
    with pytest.raises(OpValueError, match="has_aux"):
        ms.grad(lambda x: x * x, has_aux=True)(X)


def test_value_and_grad_returns_the_value():
    v, gx = ms.value_and_grad(g_fn)(X, Y)
    assert (val(v), val(gx)) == (12.0, 12.0)
    # the returned value is detached: it carries no tape node
    assert v._node is None


# ---------------------------------------------------------------------------------------------
# weights
@pytest.fixture
def net():
    """A two-parameter 'network' as a closure: loss = sum((w1 * x + b) ** 2)."""
    w1 = ms.Parameter(t([1.0, -2.0]), name="w1")
    b = ms.Parameter(t([0.5, 0.25]), name="b")

    def fn(x):
        return ((w1 * x + b) ** 2).sum()
    return fn, (w1, b)


def _net_grads(x):
    w1, b = np.array([1.0, -2.0]), np.array([0.5, 0.25])
    r = w1 * x + b
    return 2 * r * w1, 2 * r * x, 2 * r            # d/dx, d/dw1, d/db


def test_weights_only(net):
    fn, params = net
    x = t([3.0, 4.0])
    gw1, gb = ms.grad(fn, grad_position=None, weights=params)(x)
    _, ew1, eb = _net_grads(np.array([3.0, 4.0]))
    np.testing.assert_allclose(gw1.asnumpy(), ew1, rtol=1e-6)
    np.testing.assert_allclose(gb.asnumpy(), eb, rtol=1e-6)


def test_value_and_grad_weights_with_and_without_inputs(net):
    fn, params = net
    x = t([3.0, 4.0])
    ex, ew1, eb = _net_grads(np.array([3.0, 4.0]))
    loss, (gw1, gb) = ms.value_and_grad(fn, grad_position=None, weights=params)(x)
    np.testing.assert_allclose(val(loss), ((np.array([1, -2]) * [3, 4] + [0.5, 0.25]) ** 2).sum(), rtol=1e-6)
    loss2, (gx, (gw1b, gbb)) = ms.value_and_grad(fn, grad_position=0, weights=params)(x)
    np.testing.assert_allclose(gx.asnumpy(), ex, rtol=1e-6)
    np.testing.assert_allclose(gw1b.asnumpy(), ew1, rtol=1e-6)
    np.testing.assert_allclose(gbb.asnumpy(), eb, rtol=1e-6)
    assert val(loss2) == val(loss)


def test_unused_weight_gets_zeros_and_weights_keep_no_node(net):
    fn, params = net
    unused = ms.Parameter(t([7.0, 7.0, 7.0]), name="unused")
    grads = ms.grad(fn, grad_position=None, weights=list(params) + [unused])(t([1.0, 1.0]))
    np.testing.assert_array_equal(grads[2].asnumpy(), [0.0, 0.0, 0.0])
    assert all(p._node is None for p in list(params) + [unused])


def test_return_ids(net):
    fn, params = net
    x = t([3.0, 4.0])
    ex, ew1, eb = _net_grads(np.array([3.0, 4.0]))
    (pos, gx), ((n1, gw1), (n2, gb)) = ms.grad(fn, grad_position=0, weights=params, return_ids=True)(x)
    assert (pos, n1, n2) == (0, "w1", "b")
    np.testing.assert_allclose(gx.asnumpy(), ex, rtol=1e-6)
    np.testing.assert_allclose(gb.asnumpy(), eb, rtol=1e-6)
    ((p0, g0), (p1, g1)) = ms.grad(g_fn, grad_position=(0, 1), return_ids=True)(X, Y)
    assert (p0, val(g0), p1, val(g1)) == (0, 12.0, 1, 4.0)


# ---------------------------------------------------------------------------------------------
# sens_param, GradOperation
def test_sens_param_scales_the_gradient():
    assert val(ms.grad(lambda a: a * 3.0, sens_param=True)(X, t(10.0))) == 30.0
    # a Python number works too (it becomes a tensor of the output's dtype)
    assert val(ops.GradOperation(sens_param=True)(lambda a: a * 3.0)(X, 10.0)) == 30.0


def test_sens_param_with_a_vector_cotangent():
    x = t([1.0, 2.0, 3.0])
    gx = ms.grad(lambda a: a * a, sens_param=True)(x, t([1.0, 0.0, -1.0]))
    np.testing.assert_array_equal(gx.asnumpy(), [2.0, 0.0, -6.0])


def test_sens_param_one_per_output():
    gx = ms.grad(f_two_outputs, sens_param=True)(X, Y, (t(1.0), t(2.0)))
    assert val(gx) == 12.0 + 2.0
    with pytest.raises(OpValueError, match="sensitivit"):
        ms.grad(f_two_outputs, sens_param=True)(X, Y, (t(1.0),))


def test_gradoperation_default_get_all_get_by_list(net):
    assert val(ops.GradOperation()(g_fn)(X, Y)) == 12.0
    gx, gy = ops.GradOperation(get_all=True)(g_fn)(X, Y)
    assert (val(gx), val(gy)) == (12.0, 4.0)
    fn, params = net
    x = t([3.0, 4.0])
    ex, ew1, eb = _net_grads(np.array([3.0, 4.0]))
    gw1, gb = ops.GradOperation(get_by_list=True)(fn, params)(x)
    np.testing.assert_allclose(gw1.asnumpy(), ew1, rtol=1e-6)
    (gxs, gws) = ops.GradOperation(get_all=True, get_by_list=True)(fn, params)(x)
    np.testing.assert_allclose(gxs[0].asnumpy(), ex, rtol=1e-6)
    np.testing.assert_allclose(gws[1].asnumpy(), eb, rtol=1e-6)
    with pytest.raises(OpValueError, match="GradOperation"):
        ops.GradOperation(get_by_list=True)(fn)


# ---------------------------------------------------------------------------------------------
# stop_gradient
def test_stop_gradient_blocks_one_term():
    def fn(a, b):
        return ops.stop_gradient(a * b) + a * b
    ga, gb = ms.grad(fn, grad_position=(0, 1))(X, Y)
    assert (val(ga), val(gb)) == (3.0, 2.0)


def test_stop_gradient_of_everything_gives_zeros():
    ga = ms.grad(lambda a: ops.stop_gradient(a * a))(X)
    assert val(ga) == 0.0
    a, b = ops.stop_gradient((X, Y))
    assert val(a) == 2.0 and val(b) == 3.0
