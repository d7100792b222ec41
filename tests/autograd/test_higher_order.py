"""Higher-order gradients, vjp/jvp, and gradients of composite functions against float64 oracles
(analytic NumPy formulas and central finite differences)."""
import numpy as np
import pytest

import minispore as ms
from minispore import ops
from minispore.common import grad_state


def t(v, dtype=np.float64):
    return ms.Tensor(np.asarray(v, dtype=dtype))


XS = np.array([-1.5, -0.2, 0.0, 0.7, 2.0])


def test_second_derivative_of_cube():
    d2 = ms.grad(ms.grad(lambda x: (x * x * x).sum()))(t(XS))
    np.testing.assert_allclose(d2.asnumpy(), 6 * XS, rtol=1e-12)


def test_third_derivative_of_cube_is_six():
    d1 = ms.grad(lambda x: (x ** 3).sum())
    d2 = ms.grad(lambda x: d1(x).sum())
    d3 = ms.grad(lambda x: d2(x).sum())
    np.testing.assert_allclose(d3(t(XS)).asnumpy(), np.full(5, 6.0), rtol=1e-12)


def test_second_and_fourth_derivative_of_sin():
    d1 = ms.grad(lambda x: ops.sin(x).sum())
    d2 = ms.grad(lambda x: d1(x).sum())
    d3 = ms.grad(lambda x: d2(x).sum())
    d4 = ms.grad(lambda x: d3(x).sum())
    np.testing.assert_allclose(d1(t(XS)).asnumpy(), np.cos(XS), rtol=1e-12)
    np.testing.assert_allclose(d2(t(XS)).asnumpy(), -np.sin(XS), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(d4(t(XS)).asnumpy(), np.sin(XS), rtol=1e-12, atol=1e-15)
    assert grad_state.depth == 0


def test_mixed_second_partial():
    # f = x^2 y^3: d/dy (df/dx) = 6 x y^2
    def dfdx(x, y):
        return ms.grad(lambda a, b: (a * a * b * b * b).sum())(x, y)
    h = ms.grad(lambda x, y: dfdx(x, y).sum(), grad_position=1)(t(2.0), t(3.0))
    assert float(h.asnumpy()) == pytest.approx(6 * 2 * 9)


def test_inner_gradient_value_is_usable_in_the_outer_function():
    # g(x) = x * f'(x) with f = x^3, so g = 3x^3 and g' = 9x^2
    inner = ms.grad(lambda x: (x ** 3).sum())
    g = ms.grad(lambda x: (x * inner(x)).sum())(t(XS))
    np.testing.assert_allclose(g.asnumpy(), 9 * XS ** 2, rtol=1e-12)


def test_value_and_grad_inside_grad():
    def outer(x):
        v, g = ms.value_and_grad(lambda a: (a * a * a).sum())(x)
        return v + g.sum()            # x^3 + 3x^2, derivative 3x^2 + 6x
    g = ms.grad(outer)(t(XS))
    np.testing.assert_allclose(g.asnumpy(), 3 * XS ** 2 + 6 * XS, rtol=1e-12)


def test_vjp_numbers():
    x = t([1.0, 2.0, 3.0])
    out, f_vjp = ops.vjp(lambda a: a * a * a, x)
    np.testing.assert_allclose(out.asnumpy(), [1.0, 8.0, 27.0])
    np.testing.assert_allclose(f_vjp(t([1.0, 1.0, 2.0])).asnumpy(), [3.0, 12.0, 54.0])
    # two inputs -> a tuple of gradients; the pullback can be called again
    out, f_vjp = ops.vjp(lambda a, b: a * b, x, t([4.0, 5.0, 6.0]))
    ga, gb = f_vjp(t([1.0, 1.0, 1.0]))
    np.testing.assert_allclose(ga.asnumpy(), [4.0, 5.0, 6.0])
    np.testing.assert_allclose(gb.asnumpy(), [1.0, 2.0, 3.0])
    ga2, _ = f_vjp(t([2.0, 0.0, 1.0]))
    np.testing.assert_allclose(ga2.asnumpy(), [8.0, 0.0, 6.0])


def test_jvp_numbers():
    out, tangent = ops.jvp(lambda a: a * a, t(2.0), t(1.0))
    assert (float(out.asnumpy()), float(tangent.asnumpy())) == (4.0, 4.0)
    # J v for f(a) = sin(a) * a, elementwise: (cos(a) a + sin(a)) v
    a0, v0 = np.array([0.3, -1.2, 2.5]), np.array([1.0, -2.0, 0.5])
    out, tangent = ops.jvp(lambda a: ops.sin(a) * a, t(a0), t(v0))
    np.testing.assert_allclose(out.asnumpy(), np.sin(a0) * a0, rtol=1e-12)
    np.testing.assert_allclose(tangent.asnumpy(), (np.cos(a0) * a0 + np.sin(a0)) * v0, rtol=1e-12)


def _central_diff(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        xp, xm = x.copy(), x.copy()
        xp[i] += eps
        xm[i] -= eps
        g[i] = (f(xp) - f(xm)) / (2 * eps)
    return g


def test_composite_function_matches_finite_differences():
    """A small MLP-like expression: loss = sum(tanh(x @ W + b) * exp(-x @ W) / (1 + (x@W)^2))."""
    rng = np.random.default_rng(0)
    x0 = rng.normal(size=(3, 4))
    w0 = rng.normal(size=(4, 2)) * 0.5
    b0 = rng.normal(size=(2,))

    def np_loss(x, w, b):
        h = x @ w
        return float((np.tanh(h + b) * np.exp(-h) / (1 + h * h)).sum())

    def ms_loss(x, w, b):
        h = ops.matmul(x, w)
        return (ops.tanh(h + b) * ops.exp(-h) / (1.0 + h * h)).sum()

    gx, gw, gb = ms.grad(ms_loss, grad_position=(0, 1, 2))(t(x0), t(w0), t(b0))
    np.testing.assert_allclose(gx.asnumpy(), _central_diff(lambda v: np_loss(v, w0, b0), x0), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gw.asnumpy(), _central_diff(lambda v: np_loss(x0, v, b0), w0), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gb.asnumpy(), _central_diff(lambda v: np_loss(x0, w0, v), b0), rtol=1e-6, atol=1e-8)


def test_hessian_vector_product_matches_finite_differences():
    """grad of <grad f, v> is H v; f = sum(exp(A x) ) with A fixed."""
    rng = np.random.default_rng(1)
    a0 = rng.normal(size=(3, 3)) * 0.3
    x0 = rng.normal(size=(3,))
    v0 = rng.normal(size=(3,))
    A = t(a0)

    def f(x):
        return ops.exp(ops.matmul(A, x)).sum()
    gf = ms.grad(f)
    hv = ms.grad(lambda x: (gf(x) * t(v0)).sum())(t(x0))

    def np_grad(x):
        return a0.T @ np.exp(a0 @ x)
    expected = _central_diff(lambda x: float(np_grad(x) @ v0), x0)
    np.testing.assert_allclose(hv.asnumpy(), expected, rtol=1e-6)
