"""The model-zoo spellings added for user scripts: index dtypes of argmin/max/min, assign and its
jit behaviour, fill/tensor_dot/dtype and the F aliases, ops.composite (GradOperation, HyperMap,
MultitypeFuncGraph), mindspore.context, Cell.phase, and the class-style Conv2D / MaxPool /
AvgPool / SmoothL1Loss / L2Loss / UniformReal / StandardNormal / UniformInt. Numbers are checked
against NumPy float64 references (and values read from MindSpore 2.10 where noted)."""
import importlib

import numpy as np
import pytest

import minispore as ms
from minispore import nn, ops
from minispore.common.errors import OpIndexError, OpTypeError, OpValueError

F = importlib.import_module("minispore.ops.functional")
C = importlib.import_module("minispore.ops.composite")


def T(a, dtype=np.float32):
    return ms.Tensor(np.asarray(a, dtype))


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)


# -- index dtypes (MindSpore 2.10) ---------------------------------------------------------------
def test_argmin_is_int32_argmax_int64_and_max_min_indices_int64():
    x = T(_rand(3, 5))
    assert ops.argmin(x, 1).dtype is ms.int32 and ops.argmin(x).dtype is ms.int32
    assert ops.argmin(x, 1, keepdims=True).shape == (3, 1)
    assert ops.argmin(x, keepdims=True).shape == ()          # axis=None ignores keepdims
    assert ops.argmax(x, 1).dtype is ms.int64
    np.testing.assert_array_equal(ops.argmin(x, 1).asnumpy(), np.argmin(x.asnumpy(), 1))
    for v, i in (ops.max(x, axis=1), ops.min(x, 0, keepdims=True), ops.max(x)):
        assert i.dtype is ms.int64
    assert ops.min(x)[1].item() == np.argmin(x.asnumpy())


# -- assign --------------------------------------------------------------------------------------
def test_assign_family_writes_in_place_and_bumps_version():
    q = ms.Parameter(T([1.0, 2.0]), name="q")
    buf, v0 = q._data, q._version
    r = ops.assign(q, T([7.0, 8.0]))
    assert r is q and q._data is buf and q._version == v0 + 1
    ops.assign_add(q, T([1, 1], np.int32))                  # Int32 into Float32: converts
    ops.assign_sub(q, T([0.5, 0.25]))
    np.testing.assert_allclose(q.asnumpy(), [7.5, 8.75])
    assert q.dtype is ms.float32
    s = ms.Parameter(T(1.0), name="s")
    ops.assign_add(s, 2.0)                                  # a Python scalar only for a 0-d variable
    assert s.item() == 3.0


@pytest.mark.parametrize("call, cls, what", [
    (lambda q: ops.assign(q, T([1.0, 2.0, 3.0])), OpValueError, "shape"),
    (lambda q: ops.assign_add(q, T([1.0])), OpValueError, "shape"),        # no broadcasting
    (lambda q: ops.assign_sub(q, 1.0), OpValueError, "shape"),
    (lambda q: ops.assign(q, T([1.0, 2.0], np.float64)), OpTypeError, "widening"),
    (lambda q: ops.assign(T([1.0, 2.0]), T([1.0, 2.0])), OpTypeError, "Parameter"),
    (lambda q: ops.assign(q, "x"), OpTypeError, "Tensor or a number"),
])
def test_assign_rejects_bad_input_before_writing(call, cls, what):
    q = ms.Parameter(T([1.0, 2.0]), name="q")
    with pytest.raises(cls, match=what) as e:
        call(q)
    assert "Assign" in str(e.value)
    np.testing.assert_array_equal(q.asnumpy(), [1.0, 2.0])


def test_assign_under_jit_runs_each_call_in_program_order():
    # the numbers MindSpore 2.10 gives for the same program
    q = ms.Parameter(T([1.0, 1.0]), name="q")

    @ms.jit
    def f(x):
        ops.assign(q, x)
        y = q * 2
        ops.assign_add(q, x)
        return y

    x = T([3.0, 4.0])
    for _ in range(2):
        np.testing.assert_allclose(f(x).asnumpy(), [6.0, 8.0])
        np.testing.assert_allclose(q.asnumpy(), [6.0, 8.0])


def test_assign_add_counter_in_graph_mode_cell():
    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.c = ms.Parameter(T([0.0]), name="c")

        def construct(self, x):
            ops.assign_add(self.c, ops.ones((1,), ms.float32))
            return x * self.c

    n, x = Net(), T([3.0, 4.0])
    ms.set_context(mode=ms.GRAPH_MODE)
    try:
        outs = [n(x).asnumpy().tolist() for _ in range(3)]
    finally:
        ms.set_context(mode=ms.PYNATIVE_MODE)
    assert outs == [[3.0, 4.0], [6.0, 8.0], [9.0, 12.0]] and n.c.item() == 3.0


# -- fill / dtype / tensor_dot / F aliases -------------------------------------------------------
def test_fill_dtype_and_conversion():
    a = ops.fill(ms.int32, (2, 2), 2.7)
    assert a.dtype is ms.int32 and a.asnumpy().tolist() == [[2, 2], [2, 2]]
    assert ops.fill(ms.float32, (), T(1.5)).shape == ()
    assert ops.Fill()(ms.bool_, (2,), 1).asnumpy().tolist() == [True, True]
    with pytest.raises(OpTypeError, match="fill"):
        ops.fill("float32", (2,), 1.0)
    with pytest.raises(OpTypeError, match="fill"):
        ops.fill(ms.float32, (2,), "a")


def test_tensor_dot_matches_numpy_and_its_gradient():
    a, b = _rand(2, 3, 4), _rand(4, 3, 5, seed=1)
    got = ops.tensor_dot(T(a), T(b), ((1, 2), (1, 0)))
    np.testing.assert_allclose(got.asnumpy(), np.tensordot(a.astype(np.float64), b, ((1, 2), (1, 0))), rtol=1e-5)
    g = ms.grad(lambda x: ops.tensor_dot(x, T(b), ((1, 2), (1, 0))).sum())(T(a))
    # d/dx sum(tensordot) = the contracted b summed over its free axis, laid out like x
    np.testing.assert_allclose(g.asnumpy(), np.broadcast_to(b.sum(2).T[None], a.shape), rtol=1e-5)
    m = T(np.arange(6).reshape(2, 3))
    assert ops.tensor_dot(m, m.T, 1).asnumpy().tolist() == [[5.0, 14.0], [14.0, 50.0]]  # MindSpore's


@pytest.mark.parametrize("axes, cls", [(((0,), (0, 1)), OpValueError), (((0,), (1,)), OpValueError),
                                       (3, OpValueError), ("x", OpTypeError), (((0,), (5,)), OpIndexError)])
def test_tensor_dot_bad_axes(axes, cls):
    x = T(_rand(2, 3))
    with pytest.raises(cls, match="tensor_dot"):
        ops.tensor_dot(x, x, axes)


def test_tensor_dot_refuses_mixed_dtypes():
    with pytest.raises(OpTypeError, match="tensor_dot"):
        ops.tensor_dot(T(_rand(2, 3)), T(_rand(3, 2), np.float16), 1)


def test_functional_aliases_and_helpers():
    x, y = T([1.0, 2.0]), T([3.0, 5.0])
    assert F.tensor_add is ops.add and F.tensor_gt is ops.greater
    np.testing.assert_allclose(F.tensor_sub(y, x).asnumpy(), [2.0, 3.0])
    assert F.depend(x * 2, y).asnumpy().tolist() == [2.0, 4.0]
    np.testing.assert_allclose(F.partial(ops.mul, x)(y).asnumpy(), [3.0, 10.0])
    assert ops.dtype(x) is ms.float32
    assert F.scalar_to_tensor(3, ms.int32).dtype is ms.int32
    t = F.tuple_to_array((1, 2.5))                 # the first element decides: Int32
    assert t.dtype is ms.int32 and t.asnumpy().tolist() == [1, 2]
    assert F.tuple_to_array((1.0, 2.0)).dtype is ms.float32
    with pytest.raises(OpTypeError, match="dtype"):
        ops.dtype(3)
    with pytest.raises(OpTypeError, match="partial"):
        F.partial(3)


# -- ops.composite ---------------------------------------------------------------------------------
def test_multitype_func_graph_and_hyper_map():
    f = C.MultitypeFuncGraph("f")

    @f.register("Number", "Tensor")
    def _scale(a, t):
        return t * a

    @f.register("Tensor", "Tensor")
    def _add(a, t):
        return t + a

    t = T([1.0, 2.0])
    assert f(3, t).asnumpy().tolist() == [3.0, 6.0] and f(t, t).asnumpy().tolist() == [2.0, 4.0]
    out = C.HyperMap()(F.partial(f, 2), [t, (t,)])      # recurses into nested sequences
    assert isinstance(out, tuple) and out[1][0].asnumpy().tolist() == [2.0, 4.0]
    assert C.HyperMap(f)((1, t), (t, t))[1].asnumpy().tolist() == [2.0, 4.0]
    assert C.Map()(len, ((1, 2), (3,))) == (2, 1)       # one level only
    with pytest.raises(OpTypeError, match="f"):
        f("s", t)
    with pytest.raises(OpValueError, match="HyperMap"):
        C.HyperMap()(f, (1, 2), (t,))
    with pytest.raises(OpValueError, match="MultitypeFuncGraph"):
        f.register("Complex")


def test_composite_grad_operation_and_clip():
    d = nn.Dense(3, 2)
    x = T(_rand(2, 3))
    gw, gb = C.GradOperation(get_by_list=True)(d, ms.ParameterTuple(d.trainable_params()))(x)
    np.testing.assert_allclose(gw.asnumpy(), np.tile(x.asnumpy().sum(0), (2, 1)), rtol=1e-6)
    np.testing.assert_allclose(gb.asnumpy(), [2.0, 2.0])
    np.testing.assert_allclose(C.clip_by_value(x, -0.2, 0.2).asnumpy(), np.clip(x.asnumpy(), -0.2, 0.2))


# -- context / common.parameter / Cell.phase ----------------------------------------------------------
def test_context_module_and_auto_parallel_settings():
    context = importlib.import_module("minispore.context")
    assert context.GRAPH_MODE == ms.GRAPH_MODE and context.get_context("mode") == ms.get_context("mode")
    assert context.get_auto_parallel_context("parallel_mode") == context.ParallelMode.STAND_ALONE
    try:
        context.set_auto_parallel_context(parallel_mode=context.ParallelMode.DATA_PARALLEL, gradients_mean=True)
        assert ms.get_auto_parallel_context("gradients_mean") is True
        with pytest.raises(OpValueError, match="set_auto_parallel_context"):
            context.set_auto_parallel_context(parallel_mode="everything", device_num=2)
        assert context.get_auto_parallel_context("device_num") == 1      # nothing stored on error
        with pytest.raises(OpValueError, match="get_auto_parallel_context"):
            context.get_auto_parallel_context("bogus")
    finally:
        context.reset_auto_parallel_context()
    assert context.get_auto_parallel_context("gradients_mean") is False


def test_common_parameter_module():
    mod = importlib.import_module("minispore.common.parameter")
    assert mod.Parameter is ms.Parameter and mod.ParameterTuple is ms.ParameterTuple


def test_cell_phase_follows_set_train_on_that_cell_only():
    net = nn.SequentialCell(nn.Dense(2, 2))
    assert net.phase == "train"
    net.set_train(False)
    assert net.phase == "predict" and net[0].phase == "train"
    net.phase = "eval"
    assert net.phase == "eval"
    with pytest.raises(OpTypeError, match="phase"):
        net.phase = 1


# -- class-style primitives ------------------------------------------------------------------------
def _conv_ref(x, w, stride, pads):
    x = np.pad(x.astype(np.float64), ((0, 0), (0, 0), pads[:2], pads[2:]))
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    oh, ow = (h - kh) // stride + 1, (wd - kw) // stride + 1
    out = np.zeros((n, o, oh, ow))
    for i in range(oh):
        for j in range(ow):
            patch = x[:, :, i * stride:i * stride + kh, j * stride:j * stride + kw]
            out[:, :, i, j] = np.einsum("nchw,ochw->no", patch, w)
    return out


def test_conv2d_class_pad_modes_against_a_naive_reference():
    x, w = _rand(1, 2, 5, 5), _rand(3, 2, 3, 3, seed=1)
    same = ops.Conv2D(out_channel=3, kernel_size=3, pad_mode="same")(T(x), T(w))
    np.testing.assert_allclose(same.asnumpy(), _conv_ref(x, w, 1, (1, 1, 1, 1)), rtol=1e-5, atol=1e-6)
    pad = ops.Conv2D(3, 3, pad_mode="pad", pad=(1, 0, 1, 0), stride=2)(T(x), T(w))
    np.testing.assert_allclose(pad.asnumpy(), _conv_ref(x, w, 2, (1, 0, 1, 0)), rtol=1e-5, atol=1e-6)
    even = ops.Conv2D(3, 3, pad_mode="same", stride=2)(T(_rand(1, 2, 6, 6)), T(w))   # odd pad at bottom/right
    np.testing.assert_allclose(even.asnumpy(), _conv_ref(_rand(1, 2, 6, 6), w, 2, (0, 1, 0, 1)), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("make", [lambda: ops.Conv2D(3, 3, pad=1), lambda: ops.Conv2D(3, 3, mode=2),
                                  lambda: ops.Conv2D(0, 3), lambda: ops.Conv2D(3, 3, pad_mode="full"),
                                  lambda: ops.MaxPool(0, 2), lambda: ops.MaxPool(2, 2, pad_mode="pad"),
                                  lambda: ops.AvgPool(2, data_format="NHWC"),
                                  lambda: ops.SmoothL1Loss(beta=0.0), lambda: ops.SmoothL1Loss(reduction="x"),
                                  lambda: ops.UniformReal(seed=-1)])
def test_class_primitives_reject_bad_attributes_at_construction(make):
    with pytest.raises((OpTypeError, OpValueError)):
        make()


def test_conv2d_rejects_a_weight_of_the_wrong_shape():
    with pytest.raises(OpValueError, match="Conv2D"):
        ops.Conv2D(4, 3)(T(_rand(1, 2, 5, 5)), T(_rand(3, 2, 3, 3)))


def test_max_and_avg_pool_classes():
    x = _rand(1, 2, 5, 5)
    mp = ops.MaxPool(kernel_size=2, strides=2)(T(x)).asnumpy()
    np.testing.assert_array_equal(mp, x[:, :, :4, :4].reshape(1, 2, 2, 2, 2, 2).max((3, 5)))
    ms_same = ops.MaxPool(3, 2, pad_mode="SAME")(T(x)).asnumpy()    # pads 1 on each side, -inf
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-np.inf)
    ref = np.array([[xp[:, :, 2 * i:2 * i + 3, 2 * j:2 * j + 3].max((2, 3)) for j in range(3)] for i in range(3)])
    np.testing.assert_array_equal(ms_same, ref.transpose(2, 3, 0, 1))
    ap = ops.AvgPool(kernel_size=2, strides=2, pad_mode="same")(T(x)).asnumpy()   # pads bottom/right, not counted
    assert ap.shape == (1, 2, 3, 3)
    np.testing.assert_allclose(ap[0, 0, 2, 2], x[0, 0, 4, 4], rtol=1e-6)
    np.testing.assert_allclose(ap[0, 1, 0, 0], x[0, 1, :2, :2].mean(), rtol=1e-6)
    with pytest.raises(OpValueError, match="MaxPool"):
        ops.MaxPool(2, 2)(T(x[0]))


def test_smooth_l1_and_l2_loss_classes():
    a, b = _rand(2, 3), _rand(2, 3, seed=1)
    d = np.abs(a.astype(np.float64) - b)
    ref = np.where(d < 0.5, 0.5 * d * d / 0.5, d - 0.25)
    np.testing.assert_allclose(ops.SmoothL1Loss(beta=0.5)(T(a), T(b)).asnumpy(), ref, rtol=1e-5)
    np.testing.assert_allclose(ops.SmoothL1Loss(reduction="sum")(T(a), T(b)).asnumpy(),
                               np.where(d < 1, 0.5 * d * d, d - 0.5).sum(), rtol=1e-5)
    l2 = ops.L2Loss()(T(a))
    assert l2.shape == () and l2.dtype is ms.float32
    np.testing.assert_allclose(l2.asnumpy(), (a.astype(np.float64) ** 2).sum() / 2, rtol=1e-6)
    assert ops.L2Loss()(T([1.0, 1.0, 1.0], np.float16)).dtype is ms.float16
    with pytest.raises(OpTypeError, match="L2Loss"):
        ops.L2Loss()(T([1, 2], np.int32))


def test_random_classes_seed_streams_and_ranges():
    u1, u2 = ops.UniformReal(seed=2), ops.UniformReal(seed=2)
    a, b = u1((2, 3)), u1((2, 3))
    assert a.dtype is ms.float32 and a.shape == (2, 3)
    assert not np.array_equal(a.asnumpy(), b.asnumpy())                  # successive calls differ
    np.testing.assert_array_equal(u2((2, 3)).asnumpy(), a.asnumpy())     # same seeds: same stream
    assert ((a.asnumpy() >= 0) & (a.asnumpy() < 1)).all()
    n = ops.StandardNormal(seed=3)((4000,)).asnumpy()
    assert abs(n.mean()) < 0.1 and abs(n.std() - 1) < 0.1
    k = ops.UniformInt(seed=1)((500,), T(1, np.int32), T(5, np.int32))
    assert k.dtype is ms.int32 and set(np.unique(k.asnumpy())) == {1, 2, 3, 4}
    with pytest.raises(OpTypeError, match="UniformInt"):
        ops.UniformInt()((3,), 1, 5)
    with pytest.raises(OpValueError, match="UniformReal"):
        ops.UniformReal()((2, -1))
    assert ops.Eye()(2, 3, ms.float32).asnumpy().tolist() == [[1, 0, 0], [0, 1, 0]]


# -- losses capture under jit ------------------------------------------------------------------------
@pytest.mark.parametrize("make, args", [
    (lambda: nn.MSELoss(), lambda: (T(_rand(4, 3)), T(_rand(4, 3, seed=1)))),
    (lambda: nn.L1Loss(), lambda: (T(_rand(4, 3)), T(_rand(4, 3, seed=1)))),
    (lambda: nn.CrossEntropyLoss(), lambda: (T(_rand(4, 3)), T([1, 0, 2, 1], np.int32))),
])
def test_loss_cells_capture_under_jit(make, args):
    cell, a = make(), args()
    eager = cell(*a).asnumpy()
    np.testing.assert_allclose(ms.jit(lambda *x: cell(*x))(*a).asnumpy(), eager, rtol=1e-6)


def test_mse_loss_reports_shapes_that_do_not_broadcast():
    with pytest.raises(OpValueError, match="MSELoss"):
        nn.MSELoss()(T(_rand(4, 3)), T(_rand(4, 2)))
