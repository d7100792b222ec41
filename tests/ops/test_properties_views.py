"""Property-based tests (hypothesis) of views and indexing against NumPy as the oracle.

* chains of basic indexing / reshape / transpose give NumPy's values, and share memory with the
  base exactly when NumPy's result does;
* writing through a view changes the base where NumPy says it should;
* gradients through getitem equal a naive np.add.at scatter (repeated indices accumulate) and
  float64 central finite differences.
"""
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import minispore as ms
from minispore import Tensor, ops

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

shapes = hnp.array_shapes(min_dims=2, max_dims=4, min_side=1, max_side=5)


def _base(shape):
    return np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape) + 0.5


@st.composite
def view_chains(draw):
    """A base shape and a list of view steps: ('index', idx) | ('transpose', perm) | ('reshape', shape)."""
    shape = draw(shapes)
    steps, cur = [], shape
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["index", "transpose", "reshape"]))
        if kind == "index" and len(cur) >= 2:
            idx = draw(hnp.basic_indices(cur, allow_newaxis=True, allow_ellipsis=True))
            cur = np.empty(cur)[idx].shape
        elif kind == "transpose" and len(cur) >= 1:
            perm = tuple(draw(st.permutations(range(len(cur)))))
            cur = tuple(cur[p] for p in perm)
        else:
            # reshape to another shape of the same size
            size = int(np.prod(cur))
            new = draw(st.sampled_from([(size,), (1, size), tuple(reversed(cur)), tuple(cur) + (1,)]))
            steps.append(("reshape", new))
            cur = new
            continue
        steps.append((kind, idx if kind == "index" else perm))
    return shape, steps


def _apply_np(a, steps):
    for kind, arg in steps:
        if kind == "index":
            r = a[arg]
            if not isinstance(r, np.ndarray):
                # all-int index: NumPy returns a detached scalar, minispore (like PyTorch) a 0-d
                # view; NumPy gives that view too when the index ends with an Ellipsis
                r = a[(arg if isinstance(arg, tuple) else (arg,)) + (Ellipsis,)]
            a = r
        elif kind == "transpose":
            a = np.transpose(a, arg)
        else:
            a = a.reshape(arg)
    return a


def _apply_ms(t, steps):
    for kind, arg in steps:
        if kind == "index":
            t = t[arg]
        elif kind == "transpose":
            t = ops.transpose(t, arg)
        else:
            t = ops.reshape(t, arg)
    return t


@SETTINGS
@given(view_chains())
def test_view_chains_match_numpy_and_share_memory(chain):
    shape, steps = chain
    base = _base(shape)
    expected = _apply_np(base, steps)
    t = Tensor(base)
    got = _apply_ms(t, steps)
    assert got.shape == expected.shape
    np.testing.assert_array_equal(got.asnumpy(), expected)
    # memory is shared exactly when NumPy's own chain shares it (reshape of a strided view copies)
    assert np.shares_memory(got.asnumpy(), t.asnumpy()) == np.shares_memory(expected, base)


@SETTINGS
@given(shapes.flatmap(lambda s: st.tuples(st.just(s), hnp.basic_indices(s, allow_newaxis=True))))
def test_basic_slices_are_views(case):
    shape, idx = case
    base = _base(shape)
    t = ms.from_numpy(base)                        # shares base (Tensor(base) copies, as MindSpore)
    v = t[idx]
    if v.size:
        assert np.shares_memory(v.asnumpy(), base), f"x[{idx!r}] should be a view"


@SETTINGS
@given(shapes.flatmap(lambda s: st.tuples(st.just(s), hnp.basic_indices(s, allow_newaxis=True))),
       st.floats(-100, 100, allow_nan=False))
def test_setitem_through_a_view_changes_the_base(case, value):
    shape, idx = case
    base_np = _base(shape)
    t = Tensor(base_np.copy())
    version = t._version
    view = t[idx]
    view[...] = value                      # a write through the view ...
    expected = base_np.copy()
    expected[idx] = value                  # ... is a write into the base region, as in NumPy
    np.testing.assert_array_equal(t.asnumpy(), expected)
    assert view._version == version + 1


@SETTINGS
@given(shapes.flatmap(lambda s: st.tuples(st.just(s), hnp.basic_indices(s, allow_newaxis=True))))
def test_setitem_on_base_is_seen_by_views(case):
    shape, idx = case
    t = Tensor(_base(shape))
    view = t[idx]
    t[...] = -1.0
    assert np.all(view.asnumpy() == -1.0)


@st.composite
def advanced_cases(draw):
    """A shape and an index mixing basic items with integer arrays (repeats allowed) or a bool mask."""
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4))
    kind = draw(st.sampled_from(["int_arrays", "mask", "mixed"]))
    if kind == "mask":
        k = draw(st.integers(1, len(shape)))
        mask = draw(hnp.arrays(np.bool_, shape[:k]))
        return shape, mask
    if kind == "int_arrays":
        idx = draw(hnp.integer_array_indices(shape, result_shape=hnp.array_shapes(min_dims=1, max_dims=2,
                                                                                   max_side=4)))
        return shape, idx
    # one integer array at a random position, slices elsewhere
    pos = draw(st.integers(0, len(shape) - 1))
    items = []
    for d, n in enumerate(shape):
        if d == pos:
            items.append(draw(hnp.arrays(np.int64, st.integers(1, 5), elements=st.integers(-n, n - 1))))
        else:
            items.append(draw(st.slices(n)))
    return shape, tuple(items)


@SETTINGS
@given(advanced_cases())
def test_getitem_matches_numpy(case):
    shape, idx = case
    base = _base(shape)
    got = Tensor(base)[idx]
    np.testing.assert_array_equal(got.asnumpy(), base[idx])


def _weights_for(out_shape, seed=0):
    return np.random.default_rng(seed).standard_normal(out_shape)


@SETTINGS
@given(advanced_cases())
def test_getitem_gradient_is_a_scatter_add(case):
    shape, idx = case
    base = _base(shape)
    w = _weights_for(base[idx].shape)
    g = ms.grad(lambda x: (x[idx] * Tensor(w)).sum())(Tensor(base))
    expected = np.zeros(shape)
    np.add.at(expected, idx, w)                   # the naive reference: accumulate every pick
    np.testing.assert_allclose(g.asnumpy(), expected, rtol=1e-12, atol=1e-12)


@settings(max_examples=25, deadline=None)
@given(advanced_cases())
def test_getitem_gradient_matches_finite_differences(case):
    shape, idx = case
    x0 = np.random.default_rng(1).standard_normal(shape)
    w = _weights_for(x0[idx].shape, seed=2)

    def loss_np(a):
        return float(np.sum(np.sin(a[idx]) * w))

    g = ms.grad(lambda x: (ops.sin(x[idx]) * Tensor(w)).sum())(Tensor(x0)).asnumpy()
    eps = 1e-6
    num = np.zeros(shape)
    for pos in np.ndindex(*shape):
        p, m = x0.copy(), x0.copy()
        p[pos] += eps
        m[pos] -= eps
        num[pos] = (loss_np(p) - loss_np(m)) / (2 * eps)
    np.testing.assert_allclose(g, num, rtol=1e-6, atol=1e-8)
