"""Property-based checks (hypothesis): reductions over random shapes / axes / keepdims, and binary
elementwise ops over random broadcast-compatible shapes, against NumPy float64.

Arrays include non-contiguous views (a transposed copy transposed back), since kernels must not
assume C order.
"""
import warnings

import numpy as np
import scipy.special
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from minispore import Tensor, ops

SETTINGS = settings(max_examples=30, deadline=None)
FINITE = st.floats(-8, 8, allow_nan=False, allow_infinity=False, width=64)


@st.composite
def arrays_and_axes(draw, min_dims=0, min_side=1):
    """A float64 array (maybe a non-contiguous view), an axis spec valid for it, and keepdims."""
    shape = draw(hnp.array_shapes(min_dims=min_dims, max_dims=4, min_side=min_side, max_side=5))
    a = draw(hnp.arrays(np.float64, shape, elements=FINITE))
    if a.ndim >= 2 and draw(st.booleans()):
        a = np.ascontiguousarray(np.swapaxes(a, -1, -2)).swapaxes(-1, -2)
    nd = a.ndim
    if nd == 0:
        axis = None
    else:
        kind = draw(st.sampled_from(["none", "int", "tuple"]))
        if kind == "none":
            axis = None
        elif kind == "int":
            axis = draw(st.integers(-nd, nd - 1))
        else:
            axes = draw(st.lists(st.integers(0, nd - 1), min_size=1, max_size=nd, unique=True))
            # mix in negative spellings of the same axes
            axis = tuple(ax - nd if draw(st.booleans()) else ax for ax in axes)
    return a, axis, draw(st.booleans())


@SETTINGS
@given(arrays_and_axes())
def test_sum_matches_numpy(case):
    a, axis, keep = case
    got = ops.sum(Tensor(a), axis, keep).asnumpy()
    np.testing.assert_allclose(got, np.sum(a, axis=axis, keepdims=keep), rtol=1e-12, atol=1e-12)


@SETTINGS
@given(arrays_and_axes())
def test_mean_matches_numpy(case):
    a, axis, keep = case
    got = ops.mean(Tensor(a), axis, keep).asnumpy()
    np.testing.assert_allclose(got, np.mean(a, axis=axis, keepdims=keep), rtol=1e-12, atol=1e-12)


@SETTINGS
@given(arrays_and_axes())
def test_amax_amin_match_numpy(case):
    a, axis, keep = case
    np.testing.assert_array_equal(ops.amax(Tensor(a), axis, keep).asnumpy(), np.amax(a, axis=axis, keepdims=keep))
    np.testing.assert_array_equal(ops.amin(Tensor(a), axis, keep).asnumpy(), np.amin(a, axis=axis, keepdims=keep))


@SETTINGS
@given(arrays_and_axes(min_dims=1))
def test_max_with_indices_matches_numpy(case):
    a, axis, keep = case
    if isinstance(axis, tuple):
        axis = axis[0]
    vals, idx = ops.max(Tensor(a), axis, keep)
    if axis is None:
        np.testing.assert_array_equal(vals.asnumpy(), np.max(a))
        assert idx.item() == np.argmax(a)
    else:
        np.testing.assert_array_equal(vals.asnumpy(), np.max(a, axis=axis, keepdims=keep))
        np.testing.assert_array_equal(idx.asnumpy(), np.argmax(a, axis=axis, keepdims=keep))


@SETTINGS
@given(arrays_and_axes(), st.sampled_from([0, 1]))
def test_var_matches_numpy(case, ddof):
    a, axis, keep = case
    got = ops.var(Tensor(a), axis, ddof, keep).asnumpy()
    with warnings.catch_warnings():      # ddof=1 over one element: inf/nan in both, NumPy also warns
        warnings.simplefilter("ignore", RuntimeWarning)
        want = np.var(a, axis=axis, ddof=ddof, keepdims=keep)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)


@SETTINGS
@given(arrays_and_axes(min_dims=1))
def test_logsumexp_matches_scipy(case):
    a, axis, keep = case
    axis = () if axis is None else axis            # ops.logsumexp takes the axes explicitly; () = all
    got = ops.logsumexp(Tensor(a), axis, keep).asnumpy()
    want = scipy.special.logsumexp(a, axis=None if axis == () else axis, keepdims=keep)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@SETTINGS
@given(arrays_and_axes(min_dims=1))
def test_logsumexp_is_shift_invariant(case):
    """logsumexp(x + c) = logsumexp(x) + c even for a shift that would overflow exp."""
    a, axis, keep = case
    axis = () if axis is None else axis
    base = ops.logsumexp(Tensor(a), axis, keep).asnumpy()
    shifted = ops.logsumexp(Tensor(a + 5e3), axis, keep).asnumpy()
    np.testing.assert_allclose(shifted - 5e3, base, atol=1e-9)


@SETTINGS
@given(arrays_and_axes(min_dims=1))
def test_cumsum_matches_numpy(case):
    a, axis, _ = case
    axis = 0 if axis is None else (axis[0] if isinstance(axis, tuple) else axis)
    np.testing.assert_allclose(ops.cumsum(Tensor(a), axis).asnumpy(), np.cumsum(a, axis=axis), rtol=1e-12,
                               atol=1e-12)


@SETTINGS
@given(arrays_and_axes(min_dims=1))
def test_sum_gradient_is_broadcast_cotangent(case):
    """d sum(x) / dx is the output cotangent broadcast back over the reduced axes."""
    a, axis, keep = case
    out_shape = np.sum(a, axis=axis, keepdims=keep).shape
    w = np.arange(1.0, 1.0 + np.prod(out_shape, dtype=int)).reshape(out_shape)
    g = ops.grad(lambda t: (ops.sum(t, axis, keep) * Tensor(w)).sum())(Tensor(a)).asnumpy()
    kept_shape = np.sum(a, axis=axis, keepdims=True).shape      # the reduced axes as size-1 dims
    want = np.broadcast_to(w.reshape(kept_shape), a.shape)
    np.testing.assert_array_equal(g, want)


# ------------------------------------------------------------------------------------------------
# binary elementwise ops under broadcasting
BINARY = {
    "add": (ops.add, np.add),
    "sub": (ops.sub, np.subtract),
    "mul": (ops.mul, np.multiply),
    "div": (ops.div, np.true_divide),
    "maximum": (ops.maximum, np.maximum),
    "minimum": (ops.minimum, np.minimum),
    "pow": (ops.pow, np.power),
    "less": (ops.less, np.less),
    "equal": (ops.equal, np.equal),
}


@st.composite
def broadcast_pair(draw):
    shapes = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=4, max_side=4)).input_shapes
    a = draw(hnp.arrays(np.float64, shapes[0], elements=FINITE))
    b = draw(hnp.arrays(np.float64, shapes[1], elements=st.floats(0.25, 4, width=64)))  # safe divisor / exponent
    if a.ndim >= 2 and draw(st.booleans()):
        a = np.ascontiguousarray(np.swapaxes(a, -1, -2)).swapaxes(-1, -2)
    return a, b


@SETTINGS
@given(broadcast_pair(), st.sampled_from(sorted(BINARY)), st.booleans())
def test_binary_broadcasting_matches_numpy(pair, name, swap):
    a, b = pair
    if name == "pow":
        a = np.asarray(np.abs(a) + 0.5)          # real powers need a positive base (keep 0-d an array)
    if swap and name not in ("pow", "div"):
        a, b = b, a
    ms_fn, np_fn = BINARY[name]
    got = ms_fn(Tensor(a), Tensor(b)).asnumpy()
    want = np_fn(a, b)
    assert got.shape == want.shape
    if want.dtype == np.bool_:
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@SETTINGS
@given(broadcast_pair())
def test_broadcast_gradients_are_summed_back(pair):
    """The gradient of sum(w * a * b) w.r.t. each operand is w * other, summed over the axes that
    broadcasting expanded — and it has the operand's own shape."""
    a, b = pair
    out_shape = np.broadcast_shapes(a.shape, b.shape)
    w = np.linspace(-1, 1, int(np.prod(out_shape, dtype=int))).reshape(out_shape)
    ga, gb = ops.grad(lambda x, y: (x * y * Tensor(w)).sum(), grad_position=(0, 1))(Tensor(a), Tensor(b))

    def sum_to(g, shape):
        lead = g.ndim - len(shape)
        g = g.sum(axis=tuple(range(lead))) if lead else g
        return g.sum(axis=tuple(i for i, s in enumerate(shape) if s == 1), keepdims=True).reshape(shape)

    assert ga.shape == a.shape and gb.shape == b.shape
    np.testing.assert_allclose(ga.asnumpy(), sum_to(w * np.broadcast_to(b, out_shape), a.shape), rtol=1e-12,
                               atol=1e-12)
    np.testing.assert_allclose(gb.asnumpy(), sum_to(w * np.broadcast_to(a, out_shape), b.shape), rtol=1e-12,
                               atol=1e-12)
