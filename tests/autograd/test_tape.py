"""The PyNative tape: accumulation, deep chains, memory release, in-place safety, multi-output
nodes, broadcasting, and the `grad_state.depth` bookkeeping."""
import gc
import weakref

import numpy as np
import pytest

import minispore as ms
from minispore import ops
from minispore.autograd import tape
from minispore.common import dtype as mstype
from minispore.common import grad_state
from minispore.common.errors import MinisporeRuntimeError
from minispore.ops.primitive import AbstractTensor, Primitive


def t(v, dtype=np.float32):
    return ms.Tensor(np.asarray(v, dtype=dtype))


def test_using_a_tensor_twice_accumulates():
    def fn(a):
        b = a + a
        c = b + b
        return c
    assert float(ms.grad(fn)(t(1.5)).asnumpy()) == 4.0


def test_diamond_and_reuse_accumulate_like_float64_reference():
    # f = sum(a*b + a*a + b), with a used three times and b twice
    a0 = np.array([0.5, -1.0, 2.0])
    b0 = np.array([3.0, 0.25, -2.0])

    def fn(a, b):
        return (a * b + a * a + b).sum()
    ga, gb = ms.grad(fn, grad_position=(0, 1))(t(a0, np.float64), t(b0, np.float64))
    np.testing.assert_allclose(ga.asnumpy(), b0 + 2 * a0, rtol=1e-12)
    np.testing.assert_allclose(gb.asnumpy(), a0 + 1.0, rtol=1e-12)


def test_the_same_tensor_returned_twice_counts_twice():
    gx = ms.grad(lambda a: (a * 2.0, a * 2.0))(t(1.0))
    assert float(gx.asnumpy()) == 4.0
    y = t(5.0)
    gy = ms.grad(lambda a: ((a * 1.0),) * 2)(y)      # literally the same output tensor twice
    assert float(gy.asnumpy()) == 2.0


def test_broadcast_gradients_are_summed_back_to_each_shape():
    a0 = np.arange(3.0).reshape(3, 1)
    b0 = np.arange(4.0).reshape(1, 4) + 1.0
    ga, gb = ms.grad(lambda a, b: (a * b).sum(), grad_position=(0, 1))(t(a0, np.float64), t(b0, np.float64))
    assert ga.shape == (3, 1) and gb.shape == (1, 4)
    np.testing.assert_allclose(ga.asnumpy(), np.broadcast_to(b0, (3, 4)).sum(1, keepdims=True))
    np.testing.assert_allclose(gb.asnumpy(), np.broadcast_to(a0, (3, 4)).sum(0, keepdims=True))
    # rank broadcasting: a (4,) bias added to a (2, 3, 4) tensor
    gbias = ms.grad(lambda bias, x: (x + bias).sum())(t(np.zeros(4)), t(np.ones((2, 3, 4))))
    np.testing.assert_array_equal(gbias.asnumpy(), [6.0, 6.0, 6.0, 6.0])


def test_scalar_operands_get_no_gradient_but_scale_correctly():
    g = ms.grad(lambda a: (3.0 - a) * 2.0 + 1.0 / a)(t(2.0, np.float64))
    assert float(g.asnumpy()) == pytest.approx(-2.0 - 0.25)


def test_ten_thousand_op_chain_works_with_the_iterative_toposort():
    n = 10_000

    def fn(a):
        y = a
        for _ in range(n):
            y = y * 1.0001
        return y
    g = ms.grad(fn)(t(1.0, np.float64))
    assert float(g.asnumpy()) == pytest.approx(1.0001 ** n, rel=1e-9)


def test_ten_thousand_op_chain_is_freed_after_grad():
    """Every intermediate is released once the gradient is returned (the tensor <-> node
    reference cycles are broken explicitly, so no garbage collection is needed)."""
    refs = []

    def fn(a):
        y = a
        for i in range(10_000):
            y = y + 1.0
            if i % 1000 == 0:
                refs.append(weakref.ref(y))
        return y.sum()
    gc.collect()
    gc.disable()
    try:
        g = ms.grad(fn)(t(np.zeros(8)))
        assert all(r() is None for r in refs), "intermediates are still alive after grad returned"
    finally:
        gc.enable()
    np.testing.assert_array_equal(g.asnumpy(), np.ones(8))


def test_no_tape_outside_a_gradient():
    a = t([1.0, 2.0])
    b = a * 2.0 + 1.0
    assert b._node is None and grad_state.depth == 0


def test_tape_nodes_only_on_tracked_values_inside_grad():
    seen = {}
    const = t([5.0])

    def fn(a):
        seen["const_expr"] = const * 2.0              # depends on no tracked input: no node
        seen["tracked"] = a * 2.0
        return seen["tracked"].sum()
    ms.grad(fn)(t([1.0]))
    assert seen["const_expr"]._node is None
    # the tape was released when the outermost gradient finished
    assert seen["tracked"]._node is None


def test_in_place_write_after_use_raises_the_version_error():
    def fn(a):
        b = a * 1.0
        c = b * b              # saves b for the backward of mul
        b[0] = 100.0           # ... then overwrites it
        return c.sum()
    with pytest.raises(MinisporeRuntimeError, match="modified in place"):
        ms.grad(fn)(t([1.0, 2.0]))
    assert grad_state.depth == 0


def test_set_data_on_a_used_parameter_raises_the_version_error():
    w = ms.Parameter(t([1.0, 2.0]), name="w")

    def fn(x):
        y = (w * x).sum()
        w.set_data(t([0.0, 0.0]))
        return y
    with pytest.raises(MinisporeRuntimeError, match="'mul'"):
        ms.grad(fn, grad_position=None, weights=[w])(t([3.0, 4.0]))
    assert w._node is None and grad_state.depth == 0


def test_in_place_write_before_use_is_fine():
    def fn(a):
        b = a * 1.0
        b[0] = 0.0             # written before anything saved it
        return (b * b).sum()
    g = ms.grad(fn)(t([3.0, 2.0]))
    # b[0] no longer depends on a[0]; d/da1 of b1^2 = 2*a1 = 4
    np.testing.assert_allclose(g.asnumpy(), [0.0, 4.0])


def test_exception_inside_fn_leaves_depth_at_zero_and_weights_clean():
    w = ms.Parameter(t([1.0]), name="w")

    def bad(x):
        _ = w * x
        raise KeyError("boom")
    for g in (ms.grad(bad), ms.value_and_grad(bad), ms.grad(bad, grad_position=None, weights=[w])):
        with pytest.raises(KeyError):
            g(t([1.0]))
        assert grad_state.depth == 0
        assert w._node is None
    with pytest.raises(KeyError):
        ops.vjp(bad, t([1.0]))
    assert grad_state.depth == 0
    # bad input inside fn (a minispore error) also leaves the state clean
    with pytest.raises(ms.OpValueError):
        ms.grad(lambda x: (x + t(np.ones(3))).sum())(t(np.ones(2)))
    assert grad_state.depth == 0
    assert float(ms.grad(lambda x: x * x)(t(3.0)).asnumpy()) == 6.0     # and grad still works


def _two_output_primitive():
    """A private (unregistered) primitive with two outputs: (2x, x^2)."""
    def infer(x):
        return AbstractTensor(x.shape, x.dtype), AbstractTensor(x.shape, x.dtype)

    def impl(a):
        return 2 * a, a * a

    def bprop(inputs, out, dout):
        d_double, d_square = dout
        return (d_double * 2.0 + d_square * (inputs[0] * 2.0),)
    return Primitive("test_double_and_square", infer, impl, bprop)


def test_multi_output_node_gets_zero_cotangent_for_unused_outputs():
    prim = _two_output_primitive()
    x = t([1.0, 3.0])
    g_first = ms.grad(lambda a: prim(a)[0].sum())(x)
    g_second = ms.grad(lambda a: prim(a)[1].sum())(x)
    g_both = ms.grad(lambda a: prim(a))(x)
    np.testing.assert_allclose(g_first.asnumpy(), [2.0, 2.0])
    np.testing.assert_allclose(g_second.asnumpy(), [2.0, 6.0])
    np.testing.assert_allclose(g_both.asnumpy(), [4.0, 8.0])


def test_float16_gradient_keeps_its_dtype():
    x = t([1.0, 2.0], np.float16)
    g = ms.grad(lambda a: (a * a).sum())(x)
    assert g.dtype == mstype.float16
    np.testing.assert_allclose(g.asnumpy().astype(np.float64), [2.0, 4.0])


def test_backward_low_level_api_matches_grad():
    grad_state.depth += 1
    try:
        x = tape.make_leaf(t([1.0, 2.0], np.float64))
        y = (x * x * x).sum()
    finally:
        grad_state.depth -= 1
    (gx,), order = tape.backward([y], [ops.ones_like(y)], [x._node])
    tape.release(order)
    np.testing.assert_allclose(gx.asnumpy(), [3.0, 12.0])
    assert y._node is None


def _probe_primitive(seen):
    """A private binary primitive (x * y) whose backward rule records what the tape told it."""
    def infer(x, y):
        return AbstractTensor(x.shape, x.dtype)

    def bprop(inputs, out, dout):
        seen.append((grad_state.wants_grad(inputs, 0), grad_state.wants_grad(inputs, 1)))
        x, y = inputs
        return dout * y, dout * x
    return Primitive("test_probe_mul", infer, lambda a, b: a * b, bprop)


def test_backward_rules_are_told_which_inputs_are_untracked():
    seen = []
    prim = _probe_primitive(seen)
    const = t([2.0, 3.0])
    g = ms.grad(lambda a: prim(a, const).sum())(t([5.0, 7.0]))
    np.testing.assert_array_equal(g.asnumpy(), [2.0, 3.0])
    assert seen == [(True, False)]
    seen.clear()
    ms.grad(lambda a, b: prim(a, b).sum(), grad_position=(0, 1))(t([5.0]), t([1.0]))
    assert seen == [(True, True)]
    # outside the tape (a direct call, as graph-mode autodiff would make) everything is wanted
    assert grad_state.needs_input_grad is None
    seen.clear()
    prim.bprop((const, const), const, const)
    assert seen == [(True, True)]


def test_skipped_constant_gradients_do_not_change_results():
    """x * table, x / table, table - x, where(mask, x, table), x + mask: constants get no gradient
    computed, and the tracked input's gradient matches the float64 formulas."""
    x0 = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -3.0]])
    table0 = np.array([2.0, -4.0, 0.5])
    cond0 = np.array([True, False, True])
    table, cond = t(table0, np.float64), ms.Tensor(cond0)

    def fn(x):
        return (x * table + x / table + (table - x) * x + ops.where(cond, x, table) * x
                + ops.maximum(x, table) + x ** table[0:1]).sum()
    g = ms.grad(fn)(t(x0, np.float64))
    expected = (table0 + 1 / table0 + (table0 - 2 * x0) + np.where(cond0, 2 * x0, table0)
                + (x0 >= table0) + 2 * x0)
    np.testing.assert_allclose(g.asnumpy(), expected, rtol=1e-12)


def test_inner_gradient_still_computes_what_an_outer_gradient_tracks():
    # d/dy of sum(d/dx sum(x * y)) = d/dy sum(y) = 1: the inner backward must compute the
    # gradient wrt x even though only the outer gradient tracks y
    x0, y0 = t([1.0, 2.0, 3.0]), t([4.0, 5.0, 6.0])
    gy = ms.grad(lambda y: ms.grad(lambda x: (x * y).sum())(x0).sum())(y0)
    np.testing.assert_array_equal(gy.asnumpy(), [1.0, 1.0, 1.0])
    gx = ms.grad(lambda x: ms.grad(lambda y: (x * x * y).sum())(y0).sum())(x0)
    np.testing.assert_array_equal(gx.asnumpy(), [2.0, 4.0, 6.0])
