"""Issue 11's functional ops: MindSpore's gradients at ties and kinks (numbers measured on the
MindSpore 2.10 CPU wheel, pinned here), its result dtypes, and bad input raising minispore errors
that name the op (before any kernel runs)."""
import numpy as np
import pytest

import minispore as ms
from minispore import ops
from minispore.common.errors import OpIndexError, OpTypeError, OpValueError

KINKS = np.array([-1.0, 0.0, 0.5, 6.0, 7.0, 1.0, -2.0], np.float32)


def T(a, dtype=np.float32):
    return ms.Tensor(np.asarray(a, dtype=dtype))


def grad(fn, *args, pos=0):
    return ms.grad(fn, grad_position=pos)(*args)


def _np(t):
    return tuple(_np(x) for x in t) if isinstance(t, tuple) else t.asnumpy()


# ------------------------------------------------------------------------------------------------
# gradients at ties and kinks, as MindSpore 2.10 computes them
MINDSPORE_KINK_GRADS = {
    "relu": (ops.relu, [0, 0, 1, 1, 1, 1, 0]),
    "relu6": (ops.relu6, [0, 0, 1, 1, 0, 1, 0]),                        # passes at 6, stops at 0
    "hardtanh": (ops.hardtanh, [0.5, 1, 1, 0, 0, 0.5, 0]),               # halves on both bounds
    "hardtanh_0_6": (lambda x: ops.hardtanh(x, 0.0, 6.0), [0, 0.5, 1, 0.5, 0, 1, 0]),
    "abs": (ops.abs, [-1, 0, 1, 1, 1, 1, -1]),
    "leaky_relu": (lambda x: ops.leaky_relu(x, 0.1), [0.1, 0.55, 1, 1, 1, 1, 0.1]),
    "clamp": (lambda x: ops.clamp(x, 0.0, 1.0), [0, 1, 1, 0, 0, 1, 0]),   # bounds go to the input
    "hardswish": (ops.hardswish, [1 / 6, 0.5, 2 / 3, 1, 1, 5 / 6, -1 / 6]),
    "hardsigmoid": (ops.hardsigmoid, [1 / 6, 1 / 6, 1 / 6, 0, 0, 1 / 6, 1 / 6]),
    "selu_nonneg": (ops.selu, None),
    "softshrink": (ops.softshrink, [1, 0, 0, 1, 1, 1, 1]),
    "prelu": (lambda x: ops.prelu(x, T([0.25])), [0.25, 0.25, 1, 1, 1, 1, 0.25]),
    "trunc": (ops.trunc, [0] * 7),
    "frac": (ops.frac, [1] * 7),
}


@pytest.mark.parametrize("name", sorted(MINDSPORE_KINK_GRADS))
def test_gradient_at_kinks_matches_mindspore(name):
    fn, want = MINDSPORE_KINK_GRADS[name]
    if want is None:                        # selu: the linear branch at 0 (MindSpore's CPU is wrong below 0)
        g = grad(lambda a: fn(a).sum(), T([0.0, 1.0]))
        np.testing.assert_allclose(g.asnumpy(), [1.0507009873554805] * 2, rtol=1e-6)
        return
    g = grad(lambda a: fn(a).sum(), T(KINKS))
    np.testing.assert_allclose(g.asnumpy(), np.array(want, np.float32), rtol=1e-6, atol=1e-7)


def test_hardswish_slope_holds_on_the_closed_interval():
    g = grad(lambda a: ops.hardswish(a).sum(), T([-3.0, 3.0, -3.5, 3.5]))
    np.testing.assert_allclose(g.asnumpy(), [-0.5, 1.5, 0.0, 1.0])


def test_maximum_minimum_split_ties_evenly():
    x, y = T([1.0, 2.0, 3.0, 0.0, -1.0]), T([1.0, 1.0, 3.0, 0.0, 2.0])
    gx, gy = _np(grad(lambda a, b: ops.maximum(a, b).sum(), x, y, pos=(0, 1)))
    np.testing.assert_array_equal(gx, [0.5, 1, 0.5, 0.5, 0])
    np.testing.assert_array_equal(gy, [0.5, 0, 0.5, 0.5, 1])
    gx, gy = _np(grad(lambda a, b: ops.minimum(a, b).sum(), x, y, pos=(0, 1)))
    np.testing.assert_array_equal(gx, [0.5, 0, 0.5, 0.5, 1])
    np.testing.assert_array_equal(gy, [0.5, 1, 0.5, 0.5, 0])
    # a broadcast 0-d operand collects its halves: 0.5 (tie) + 1 + 1 from the three smaller entries
    gx, gy = _np(grad(lambda a, b: ops.maximum(a, b).sum(), x, T(1.0), pos=(0, 1)))
    np.testing.assert_array_equal(gx, [0.5, 1, 1, 0, 0])
    assert float(gy) == 2.5


def test_max_over_all_elements_shares_ties_but_along_an_axis_picks_the_first():
    t = T([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]])
    np.testing.assert_array_equal(grad(lambda a: ops.max(a)[0], t).asnumpy(), [[0, 0.5, 0.5], [0, 0, 0]])
    np.testing.assert_array_equal(grad(lambda a: ops.max(a, 1)[0].sum(), t).asnumpy(), [[0, 1, 0], [1, 0, 0]])
    np.testing.assert_allclose(grad(lambda a: ops.amax(a, 1).sum(), t).asnumpy(), [[0, 0.5, 0.5], [1 / 3] * 3])


def test_median_is_the_lower_one_and_its_stable_index():
    x = T([[3.0, 1.0, 2.0, 1.0], [0.0, 5.0, 5.0, 4.0], [2.0, 2.0, 7.0, 1.0]])
    v, i = ops.median(x)
    np.testing.assert_array_equal(v.asnumpy(), [1.0, 4.0, 2.0])
    np.testing.assert_array_equal(i.asnumpy(), [3, 3, 0])
    assert i.dtype == ms.int64
    g = grad(lambda a: ops.median(a, 0)[0].sum(), T([[1.0, 1.0], [1.0, 2.0], [1.0, 3.0]]))
    np.testing.assert_array_equal(g.asnumpy(), [[0, 0], [1, 1], [0, 0]])


def test_cummax_cummin_take_the_latest_index_and_mindsporess_dtypes():
    v, i = ops.cummax(T([[1.0, 3.0, 2.0, 3.0], [0.0, -1.0, 4.0, 4.0]]), 1)
    np.testing.assert_array_equal(i.asnumpy(), [[0, 1, 1, 3], [0, 0, 2, 3]])
    assert i.dtype == ms.int64
    _, j = ops.cummin(T([[1.0, 3.0, 0.0, 0.0]]), axis=1)
    np.testing.assert_array_equal(j.asnumpy(), [[0, 0, 2, 3]])
    assert j.dtype == ms.int32


# ------------------------------------------------------------------------------------------------
# values and dtypes
def test_div_rounding_modes_and_dtypes():
    a, b = T([-7, -3, 3, 7], np.int32), T([2, 2, -2, -2], np.int32)
    assert ops.div(a, b).dtype == ms.float32
    floor, trunc = ops.div(a, b, rounding_mode="floor"), ops.div(a, b, rounding_mode="trunc")
    assert floor.dtype == trunc.dtype == ms.int32
    np.testing.assert_array_equal(floor.asnumpy(), [-4, -2, -2, -4])
    np.testing.assert_array_equal(trunc.asnumpy(), [-3, -1, -1, -3])
    np.testing.assert_array_equal(ops.div(T([-7.5, 7.5]), 2.0, rounding_mode="trunc").asnumpy(), [-3.0, 3.0])


def test_where_with_scalar_operands():
    c = T([True, False], np.bool_)
    assert ops.where(c, 1.0, 0.0).dtype == ms.float32
    assert ops.where(c, 1, 0).dtype == ms.int64
    out = ops.where(c, T([3, 4], np.int32), 1.5)
    assert out.dtype == ms.float32
    np.testing.assert_array_equal(out.asnumpy(), [3.0, 1.5])


def test_interpolate_bilinear_half_pixel_and_align_corners_numbers():
    x = T(np.arange(12).reshape(1, 1, 3, 4))
    half = ops.interpolate(x, size=(5, 7), mode="bilinear").asnumpy()[0, 0]
    np.testing.assert_allclose(half[1, :3], [1.6, 1.957142857, 2.528571429], rtol=1e-6)   # MindSpore's numbers
    corners = ops.interpolate(x, size=(5, 7), mode="bilinear", align_corners=True).asnumpy()[0, 0]
    np.testing.assert_allclose(corners[:, 0], [0, 2, 4, 6, 8])
    np.testing.assert_allclose(corners[-1, -1], 11.0)
    near = ops.interpolate(x, size=(5, 7)).asnumpy()[0, 0]
    np.testing.assert_array_equal(near[:, 0], [0, 0, 4, 4, 8])


def test_shape_returns_a_tuple_and_nonzero_the_mindspore_layout():
    assert ops.shape(T(np.zeros((2, 3)))) == (2, 3)
    nz = ops.nonzero(T([0, 1, 0, 2], np.int32))
    assert nz.dtype == ms.int64 and nz.shape == (2, 1)
    rows, cols = ops.nonzero(T([[0.0, 2.0], [1.0, 0.0]]), as_tuple=True)
    np.testing.assert_array_equal(rows.asnumpy(), [0, 1])
    np.testing.assert_array_equal(cols.asnumpy(), [1, 0])


def test_unique_keeps_first_occurrence_order():
    out, inv = ops.unique(T([3, 1, 2, 1, 3], np.int32))
    np.testing.assert_array_equal(out.asnumpy(), [3, 1, 2])
    np.testing.assert_array_equal(inv.asnumpy(), [0, 1, 2, 1, 0])


def test_narrow_is_a_view():
    x = T(np.arange(12).reshape(3, 4))
    v = ops.narrow(x, 1, 1, 2)
    assert np.shares_memory(v.asnumpy(), x.asnumpy())


# ------------------------------------------------------------------------------------------------
# bad input: minispore errors naming the op
BAD = [
    ("log1p-int", lambda: ops.log1p(T([1, 2], np.int32)), OpTypeError, "log1p"),
    ("atan2-ints", lambda: ops.atan2(T([1], np.int32), T([1], np.int32)), OpTypeError, "atan2"),
    ("logaddexp-scalar", lambda: ops.logaddexp(T([1.0]), 2.0), OpTypeError, "logaddexp"),
    ("isclose-dtypes", lambda: ops.isclose(T([1.0]), T([1.0], np.float64)), OpTypeError, "isclose"),
    ("div-mode", lambda: ops.div(T([1.0]), T([1.0]), rounding_mode="up"), OpValueError, "div"),
    ("mish-int", lambda: ops.mish(T([1], np.int32)), OpTypeError, "mish"),
    ("celu-alpha", lambda: ops.celu(T([1.0]), 0.0), OpValueError, "celu"),
    ("prelu-weight", lambda: ops.prelu(T(np.ones((1, 2, 2))), T([0.1, 0.2, 0.3])), OpValueError, "prelu"),
    ("glu-odd", lambda: ops.glu(T(np.ones((1, 3)))), OpValueError, "glu"),
    ("mm-3d", lambda: ops.mm(T(np.ones((2, 2, 3))), T(np.ones((3, 4)))), OpValueError, "mm"),
    ("mm-dtypes", lambda: ops.mm(T(np.ones((2, 3))), T(np.ones((3, 4)), np.float64)), OpTypeError, "mm"),
    ("dense-shapes", lambda: ops.dense(T(np.ones((2, 3))), T(np.ones((4, 2)))), OpValueError, "dense"),
    ("addmm-input", lambda: ops.addmm(T(np.ones(5)), T(np.ones((2, 3))), T(np.ones((3, 4)))), OpValueError, "addmm"),
    ("cross-size", lambda: ops.cross(T(np.ones((2, 4))), T(np.ones((2, 4))), dim=1), OpValueError, "cross"),
    ("trace-1d", lambda: ops.trace(T([1.0, 2.0])), OpValueError, "trace"),
    ("narrow-length", lambda: ops.narrow(T(np.ones((3, 4))), 1, 3, 2), OpValueError, "narrow"),
    ("swapaxes-axis", lambda: ops.swapaxes(T(np.ones((2, 3))), 0, 2), OpIndexError, "swapaxes"),
    ("meshgrid-dtypes", lambda: ops.meshgrid(T([1], np.int32), T([1.0])), OpTypeError, "meshgrid"),
    ("roll-dims", lambda: ops.roll(T(np.ones((2, 3))), (1, 2), 0), OpValueError, "roll"),
    ("scatter_nd-range", lambda: ops.scatter_nd(T([[5]], np.int32), T([[1.0, 2.0]]), (4, 2)), OpIndexError,
     "scatter_nd"),
    ("tensor_scatter-shape", lambda: ops.tensor_scatter_add(T(np.ones((4, 2))), T([[0], [1]], np.int32),
                                                             T(np.ones((2, 3)))), OpValueError, "tensor_scatter_add"),
    ("gather_nd-float-index", lambda: ops.gather_nd(T(np.ones((2, 2))), T([[0.0]])), OpTypeError, "gather_nd"),
    ("masked_select-mask", lambda: ops.masked_select(T([1.0, 2.0]), T([1.0, 0.0])), OpTypeError, "masked_select"),
    ("nonzero-0d", lambda: ops.nonzero(T(1.0)), OpValueError, "nonzero"),
    ("median-f16", lambda: ops.median(T([1.0], np.float16)), OpTypeError, "median"),
    ("bincount-negative", lambda: ops.bincount(T([-1, 2], np.int32)), OpValueError, "bincount"),
    ("interpolate-scale", lambda: ops.interpolate(T(np.ones((1, 1, 2, 2))), scale_factor=2.0, mode="bilinear"),
     OpValueError, "interpolate"),
    ("interpolate-mode", lambda: ops.interpolate(T(np.ones((1, 2, 5))), size=4, mode="bilinear"), OpValueError,
     "interpolate"),
]


@pytest.mark.parametrize("name,call,err,op", BAD, ids=[b[0] for b in BAD])
def test_bad_input_raises_a_minispore_error_naming_the_op(name, call, err, op):
    with pytest.raises(err) as e:
        call()
    assert f"'{op}'" in str(e.value)
