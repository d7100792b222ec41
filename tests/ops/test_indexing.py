"""Tensor indexing semantics: views, in-place writes, and how writes interact with autodiff.
Gradients are checked against hand-derived values and, where PyTorch has the same op, PyTorch."""
import numpy as np
import pytest

import minispore as ms
from minispore import MinisporeRuntimeError, Parameter, Tensor, ops

torch = pytest.importorskip("torch")


def _t(a):
    return Tensor(np.asarray(a, dtype=np.float64))


# ------------------------------------------------------------------------------------------------
# views
def test_basic_indexing_returns_views_and_advanced_indexing_copies():
    base = np.arange(24.0).reshape(2, 3, 4)
    x = ms.from_numpy(base)                        # shares base (Tensor(base) copies, as MindSpore)
    assert np.shares_memory(x[1:, ::2].asnumpy(), base)
    assert np.shares_memory(x[..., None, -1].asnumpy(), base)
    assert np.shares_memory(x[0, 1, 2].asnumpy(), base)          # even an all-int index: a 0-d view
    assert x[0, 1, 2].shape == ()
    assert not np.shares_memory(x[[0, 1]].asnumpy(), base)
    assert not np.shares_memory(x[x > 3].asnumpy(), base)


def test_writes_to_the_base_show_in_views_and_back():
    x = Tensor(np.zeros((3, 4), np.float32))
    row = x[1]
    col = x[:, 2]
    x[1, 2] = 7.0
    assert row.asnumpy()[2] == 7.0 and col.asnumpy()[1] == 7.0
    row[0] = -1.0                                  # a write through a view changes the base
    assert x.asnumpy()[1, 0] == -1.0


def test_setitem_bumps_the_version_casts_the_value_and_returns_the_tensor():
    x = Tensor(np.zeros(4, np.int32))
    v = x._version
    out = ops.setitem(x, slice(1, 3), 2.7)         # float into an int tensor truncates, as NumPy does
    assert out is x and x._version == v + 1
    np.testing.assert_array_equal(x.asnumpy(), [0, 2, 2, 0])
    assert x.dtype == ms.int32
    x[Tensor(np.array([True, False, False, True]))] = Tensor(np.array([5, 6]))
    np.testing.assert_array_equal(x.asnumpy(), [5, 2, 2, 6])


def test_tensor_indices_from_ops_and_iteration():
    x = Tensor(np.array([[3.0, 1.0], [0.0, 5.0]], np.float32))
    i = Tensor(np.array([1, 0]))
    np.testing.assert_array_equal(x[i].asnumpy(), [[0, 5], [3, 1]])
    np.testing.assert_array_equal(x[Tensor(1)].asnumpy(), [0, 5])     # 0-d int tensor acts as an int
    rows = [r.asnumpy().tolist() for r in x]
    assert rows == [[3.0, 1.0], [0.0, 5.0]]


# ------------------------------------------------------------------------------------------------
# in-place writes under autodiff
def test_setitem_gradient_for_the_old_value_and_the_value():
    x0, v0 = np.array([1.0, 2.0, 3.0, 4.0]), np.array([10.0, 20.0])

    def f(x, v):
        y = ops.exp(x)             # exp's backward reads its output: it must see the OLD values
        y[1:3] = v * 2
        return (y * y).sum()

    gx, gv = ms.grad(f, (0, 1))(_t(x0), _t(v0))
    # L = sum over kept i of exp(x_i)^2 + sum_j (2 v_j)^2. (PyTorch refuses this program: its exp
    # saved the output that the write changed; minispore keeps the old output in the snapshot.)
    np.testing.assert_allclose(gx.asnumpy(), 2 * np.exp(x0) ** 2 * np.array([1, 0, 0, 1]), rtol=1e-12)
    np.testing.assert_allclose(gv.asnumpy(), 8 * v0, rtol=1e-12)


def test_setitem_with_advanced_index_and_broadcast_value_matches_torch():
    x0 = np.random.default_rng(0).standard_normal((4, 3))
    v0 = np.random.default_rng(1).standard_normal((1, 3))      # broadcast over the 2 picked rows

    def f(x, v):
        y = x * 3
        y[[0, 2]] = v
        y[-1, ::2] = ops.sin(x[0, :2])
        return (y ** 2).sum()

    gx, gv = ms.grad(f, (0, 1))(_t(x0), _t(v0))
    xt = torch.tensor(x0, requires_grad=True)
    vt = torch.tensor(v0, requires_grad=True)
    y = xt * 3
    y[[0, 2]] = vt
    y[-1, ::2] = torch.sin(xt[0, :2])
    (y ** 2).sum().backward()
    np.testing.assert_allclose(gx.asnumpy(), xt.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(gv.asnumpy(), vt.grad.numpy(), rtol=1e-12)


def test_setitem_into_an_untracked_tensor_tracks_the_value():
    def f(v):
        buf = Tensor(np.zeros((2, 3)))
        buf[1] = v
        return (buf * Tensor(np.arange(6.0).reshape(2, 3))).sum()

    g = ms.grad(f)(_t([1.0, 1.0, 1.0]))
    np.testing.assert_allclose(g.asnumpy(), [3.0, 4.0, 5.0])


def test_write_into_a_differentiated_input_and_a_parameter():
    def f(x):
        x[0] = 5.0                 # the overwritten entry gets no gradient
        return (x * x).sum()

    arg = _t([1.0, 2.0, 3.0])
    np.testing.assert_allclose(ms.grad(f)(arg).asnumpy(), [0.0, 4.0, 6.0])
    np.testing.assert_allclose(arg.asnumpy(), [5.0, 2.0, 3.0])     # the write is real (in place)

    w = Parameter(Tensor(np.array([1.0, 2.0, 3.0])), name="w")

    def loss():
        w[2] = 0.0
        return (w * w).sum()

    (gw,) = ms.grad(loss, grad_position=None, weights=[w])()
    np.testing.assert_allclose(gw.asnumpy(), [2.0, 4.0, 0.0])
    assert w._node is None


def test_write_into_a_view_of_a_tracked_tensor_is_refused():
    def f(x):
        y = x * 1
        v = y[1:]
        v[0] = 3.0
        return y.sum()

    with pytest.raises(MinisporeRuntimeError, match="view"):
        ms.grad(f)(_t([1.0, 2.0, 3.0]))


def test_overwriting_a_value_that_an_op_already_used_is_caught_in_backward():
    def f(x):
        y = x * 1
        z = y * y                  # mul's backward needs the old y
        y[0] = 0.0
        return z.sum()

    with pytest.raises(MinisporeRuntimeError, match="modified in place"):
        ms.grad(f)(_t([1.0, 2.0]))

    def g(x):
        y = x * 1
        y[:, 0] = ops.sin(y[:, 0])    # the tape checks every input's version, even getitem's
        return y.sum()

    with pytest.raises(MinisporeRuntimeError, match="modified in place"):
        ms.grad(g)(_t([[1.0, 2.0]]))


def test_without_a_gradient_nothing_is_recorded():
    x = _t([1.0, 2.0])
    x[0] = 3.0
    assert x._node is None


# ------------------------------------------------------------------------------------------------
# higher order
def test_second_derivative_through_repeated_getitem():
    x0 = np.array([1.0, -2.0, 0.5, 3.0])

    def f(x):
        return (x[[0, 0, 2]] ** 3).sum()

    gg = ms.grad(ms.grad(f))(_t(x0))
    np.testing.assert_allclose(gg.asnumpy(), 6 * x0 * np.array([2, 0, 1, 0]))


def test_second_derivative_through_setitem():
    def f(x):
        y = x ** 2
        y[1] = x[0] ** 3           # y = [x0^2, x0^3, x2^2]
        return y.sum()

    gg = ms.grad(ms.grad(f))(_t([2.0, 5.0, 3.0]))
    # d/dx of the gradient [2x0 + 3x0^2, 0, 2x2] -> [2 + 6x0, 0, 2]
    np.testing.assert_allclose(gg.asnumpy(), [14.0, 0.0, 2.0])


# ------------------------------------------------------------------------------------------------
# gather family vs PyTorch
def test_gather_elements_and_scatter_match_torch():
    rng = np.random.default_rng(0)
    x0 = rng.standard_normal((3, 5))
    index = rng.integers(0, 3, (4, 5))
    w = rng.standard_normal((4, 5))
    g = ms.grad(lambda x: (ops.gather_elements(x, 0, Tensor(index)) * Tensor(w)).sum())(_t(x0))
    xt = torch.tensor(x0, requires_grad=True)
    (torch.gather(xt, 0, torch.tensor(index)) * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(g.asnumpy(), xt.grad.numpy(), rtol=1e-12)

    index = np.argsort(rng.random((3, 5)), axis=1)[:, :2]        # distinct columns per row
    src = rng.standard_normal((3, 2))
    out = ops.scatter(_t(x0), 1, Tensor(index), _t(src))
    ref = torch.tensor(x0).scatter(1, torch.tensor(index), torch.tensor(src))
    np.testing.assert_allclose(out.asnumpy(), ref.numpy())


# ------------------------------------------------------------------------------------------------
# embedding vs PyTorch
@pytest.mark.parametrize("padding_idx,scale", [(None, False), (2, False), (-1, True), (None, True)])
def test_embedding_weight_gradient_matches_torch(padding_idx, scale):
    rng = np.random.default_rng(0)
    w0 = rng.standard_normal((6, 4))
    ids = np.array([[0, 2, 2, 5], [1, 5, 5, 5]])
    dout = rng.standard_normal((2, 4, 4))

    def f(w):
        out = ops.embedding(Tensor(ids), w, padding_idx=padding_idx, scale_grad_by_freq=scale)
        return (out * Tensor(dout)).sum()

    g = ms.grad(f)(_t(w0))
    wt = torch.tensor(w0, requires_grad=True)
    out = torch.nn.functional.embedding(torch.tensor(ids), wt, padding_idx=padding_idx, scale_grad_by_freq=scale)
    (out * torch.tensor(dout)).sum().backward()
    np.testing.assert_allclose(g.asnumpy(), wt.grad.numpy(), rtol=1e-12)


def test_embedding_max_norm_renormalizes_rows_in_place_like_torch():
    rng = np.random.default_rng(3)
    w0 = rng.standard_normal((5, 3)) * 3
    ids = np.array([0, 3, 3])
    w = Parameter(Tensor(w0.copy()), name="table")
    out = ops.embedding(Tensor(ids), w, max_norm=1.0)
    wt = torch.tensor(w0.copy())
    ref = torch.nn.functional.embedding(torch.tensor(ids), wt, max_norm=1.0)
    np.testing.assert_allclose(out.asnumpy(), ref.numpy(), rtol=1e-12)
    np.testing.assert_allclose(w.asnumpy(), wt.numpy(), rtol=1e-12)
    assert np.allclose(w.asnumpy()[[1, 2, 4]], w0[[1, 2, 4]])     # rows not looked up are untouched


def test_embedding_second_order_with_padding():
    # d/dw of <grad_w(L), v> where grad_w is the scatter-add: the double-backward must apply the
    # padding mask too (checked against torch's double backward)
    rng = np.random.default_rng(5)
    w0 = rng.standard_normal((4, 2))
    ids = np.array([0, 1, 1, 3])

    def inner(w):
        return (ops.embedding(Tensor(ids), w, padding_idx=1) ** 2).sum()

    gg = ms.grad(lambda w: (ms.grad(inner)(w) ** 2).sum())(_t(w0))
    wt = torch.tensor(w0, requires_grad=True)
    (g,) = torch.autograd.grad((torch.nn.functional.embedding(torch.tensor(ids), wt, padding_idx=1) ** 2).sum(),
                               wt, create_graph=True)
    (g ** 2).sum().backward()
    np.testing.assert_allclose(gg.asnumpy(), wt.grad.numpy(), rtol=1e-12)


def test_one_hot_default_dtype_and_axis():
    out = ops.one_hot(Tensor(np.array([1, 0])), 3)
    assert out.dtype == ms.int64
    np.testing.assert_array_equal(out.asnumpy(), [[0, 1, 0], [1, 0, 0]])
    out = ops.one_hot(Tensor(np.array([1, 0])), 3, 1.0, 0.0, axis=0)
    assert out.dtype == ms.float32 and out.shape == (3, 2)
