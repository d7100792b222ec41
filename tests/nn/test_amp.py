"""Mixed precision (minispore.amp): dtypes at each amp level against what each level promises,
values against float16 NumPy computations, loss scaling (scale/unscale/adjust rules derived by
hand), the loss-scale training cell (an overflowing step is skipped; the scale really protects
float16 gradients from underflow), the managers and build_train_network, and bad input.

The differential suite (tests/fidelity/cases/amp.py) compares the same API with real MindSpore."""
import numpy as np
import pytest

import minispore as ms
from minispore import amp, nn, ops
from minispore.common.errors import MinisporeError, OpTypeError, OpValueError
from minispore.train import DynamicLossScaleManager, FixedLossScaleManager


class Net(nn.Cell):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Dense(4, 3)
        self.norm = nn.LayerNorm((3,))
        self.fc2 = nn.Dense(3, 2)

    def construct(self, x):
        return self.fc2(self.norm(self.fc1(x)))


def make_net(seed=0):
    net = Net()
    r = np.random.default_rng(seed)
    for p in net.get_parameters():
        p.set_data(ms.Tensor(r.uniform(-0.5, 0.5, size=p.shape).astype(np.float32)))
    return net


def x_data(seed=1):
    return ms.Tensor(np.random.default_rng(seed).uniform(-1, 1, size=(5, 4)).astype(np.float32))


def record_dtypes(net):
    """Input and output dtypes of every named sub-layer, via forward hooks."""
    seen = {}
    for name in ("fc1", "norm", "fc2"):
        cell = getattr(net, name)
        cell.register_forward_hook(lambda c, i, o, n=name: seen.__setitem__(n, (str(i[0].dtype), str(o.dtype))))
    return seen


def np_dense16(x, w, b):
    """A Dense layer computed in float16 as to_float(float16) does: inputs and weights rounded."""
    return (x.astype(np.float16) @ w.astype(np.float16).T + b.astype(np.float16)).astype(np.float16)


# -- auto_mixed_precision -------------------------------------------------------------------------

def test_o0_returns_the_network_untouched():
    net = make_net()
    assert amp.auto_mixed_precision(net, "O0") is net
    assert net(x_data()).dtype == ms.float32


def test_o1_white_list_runs_in_float16_with_float32_outputs():
    net = make_net()
    seen = record_dtypes(net)
    out = amp.auto_mixed_precision(net, "O1")(x_data())
    assert out.dtype == ms.float32
    # hooks registered before amp see the cell's own output: float16 for the white-listed Dense,
    # which amp's cast then brings back to float32 — so LayerNorm (not listed) gets float32
    assert seen["fc1"][1] == "Float16" and seen["norm"] == ("Float32", "Float32")
    assert all(p.dtype == ms.float32 for p in net.get_parameters())
    w = {p.name: p.asnumpy() for p in net.get_parameters()}
    h = np_dense16(x_data().asnumpy(), w["fc1.weight"], w["fc1.bias"]).astype(np.float32)
    np.testing.assert_allclose(net.fc1(x_data()).asnumpy(), h, rtol=1e-3, atol=1e-3)


def test_o2_keeps_layernorm_in_float32_and_names():
    net = make_net()
    names = [p.name for p in net.get_parameters()]
    seen = record_dtypes(net)
    wrapped = amp.auto_mixed_precision(net, "O2")
    out = wrapped(x_data())
    assert type(wrapped).__name__ == "_OutputTo32" and out.dtype == ms.float32
    assert seen["fc1"] == ("Float16", "Float16")
    assert seen["norm"] == ("Float32", "Float32")        # black list: float32 inside ...
    assert seen["fc2"][0] == "Float16"                   # ... and float16 again after it
    assert [p.name for p in wrapped.get_parameters()] == names
    assert wrapped.__dict__["_amp_level"] == "O2"


def test_o3_everything_in_float16():
    net = make_net()
    seen = record_dtypes(net)
    out = amp.auto_mixed_precision(net, "O3", dtype=ms.bfloat16)(x_data())
    assert out.dtype == ms.float32
    assert seen == {"fc1": ("BFloat16", "BFloat16"), "norm": ("BFloat16", "BFloat16"), "fc2": ("BFloat16", "BFloat16")}


def test_o2_gradients_reach_float32_parameters():
    net = make_net()
    wrapped = amp.auto_mixed_precision(net, "O2")
    params = net.trainable_params()
    _, grads = ms.value_and_grad(lambda x: wrapped(x).sum(), None, params)(x_data())
    assert all(g.dtype == ms.float32 for g in grads)
    # fp32 reference gradient of the last bias: d(sum)/d(b) = batch size per output
    np.testing.assert_allclose(grads[-1].asnumpy(), [5.0, 5.0])


class MatMulLike:
    """Stands in for a class-style primitive (an object held as a cell attribute and called)."""

    def __call__(self, a, b):
        return ops.matmul(a, b)


class WithPrim(nn.Cell):
    def __init__(self):
        super().__init__()
        self.mm = MatMulLike()

    def construct(self, a, b):
        return self.mm(a, b)


def test_custom_white_list_casts_primitive_attributes():
    a = np.random.default_rng(2).uniform(-1, 1, (3, 4)).astype(np.float32)
    b = np.random.default_rng(3).uniform(-1, 1, (4, 2)).astype(np.float32)
    cell = amp.custom_mixed_precision(WithPrim(), white_list=[MatMulLike])
    out = cell(ms.Tensor(a), ms.Tensor(b))
    assert out.dtype == ms.float32
    np.testing.assert_allclose(out.asnumpy(), (a.astype(np.float16) @ b.astype(np.float16)).astype(np.float32),
                               rtol=2e-3, atol=2e-3)
    assert not np.allclose(out.asnumpy(), a @ b, rtol=0, atol=1e-6)         # it really ran in float16


def test_white_and_black_lists():
    assert nn.Dense in amp.get_white_list() and nn.LayerNorm in amp.get_black_list()
    net = make_net()
    seen = record_dtypes(net)                   # (hooks on the layers themselves, before wrapping)
    amp.custom_mixed_precision(net, black_list=[nn.Dense])(x_data())
    assert seen["fc1"] == ("Float32", "Float32") and seen["norm"][0] == "Float16"


@pytest.mark.parametrize("call, err", [
    (lambda: amp.auto_mixed_precision(make_net(), "O4"), OpValueError),
    (lambda: amp.auto_mixed_precision(make_net(), "auto"), OpValueError),
    (lambda: amp.auto_mixed_precision(make_net(), "O2", dtype=ms.float32), OpValueError),
    (lambda: amp.auto_mixed_precision(lambda x: x, "O2"), OpTypeError),
    (lambda: make_net().to_float(ms.float64), OpValueError),
    (lambda: amp.custom_mixed_precision(make_net()), OpValueError),
    (lambda: amp.custom_mixed_precision(make_net(), black_list=["Dense"]), OpTypeError),
])
def test_bad_amp_input(call, err):
    with pytest.raises(err) as info:
        call()
    assert isinstance(info.value, MinisporeError)


# -- functional loss scaling -------------------------------------------------------------------------

def test_all_finite():
    ok = ms.Tensor(np.ones(3, np.float32))
    assert bool(amp.all_finite((ok, ok)).asnumpy()) is True
    assert bool(amp.all_finite([ok, ms.Tensor(np.array([np.nan], np.float16))]).asnumpy()) is False
    assert bool(amp.all_finite(ms.Tensor(np.array([-np.inf], np.float32))).asnumpy()) is False
    with pytest.raises(OpTypeError, match="all_finite"):
        amp.all_finite([ok, 3.0])


def test_dynamic_loss_scaler_rule():
    s = amp.DynamicLossScaler(1024, 2, 3)
    x = ms.Tensor(np.array([1.5, -2.0], np.float32))
    np.testing.assert_allclose(s.scale(x).asnumpy(), [1536.0, -2048.0])
    np.testing.assert_allclose(s.unscale((s.scale(x),))[0].asnumpy(), [1.5, -2.0])
    got = []
    for finite in [True, False, True, True, True, True]:
        assert s.adjust(ms.Tensor(finite)) is True
        got.append((float(s.scale_value.asnumpy()), int(s.counter.asnumpy())))
    # an overflow halves and resets the counter; 3 finite steps in a row double
    assert got == [(1024.0, 1), (512.0, 0), (512.0, 1), (512.0, 2), (1024.0, 0), (1024.0, 1)]
    floor = amp.DynamicLossScaler(1, 2, 3)
    floor.adjust(ms.Tensor(False))
    assert float(floor.scale_value.asnumpy()) == 1.0                    # never below 1


def test_static_loss_scaler_and_bad_values():
    s = amp.StaticLossScaler(8)
    assert s.adjust(ms.Tensor(True)) is False
    np.testing.assert_allclose(s.unscale(ms.Tensor(np.array([16.0], np.float32))).asnumpy(), [2.0])
    with pytest.raises(OpValueError):
        amp.StaticLossScaler(0.5)
    with pytest.raises(OpValueError):
        amp.DynamicLossScaler(16, 0, 10)


# -- update cells and the loss-scale training cell -----------------------------------------------------

def test_dynamic_update_cell_rule():
    cell = nn.DynamicLossScaleUpdateCell(8.0, 2, 2)
    scale = ms.Parameter(ms.Tensor(np.array(8.0, np.float32)), name="s")
    got = []
    for over in [False, False, False, True, True, False, False]:
        out = cell(scale, ms.Tensor(over))
        assert bool(out.asnumpy()) is over
        got.append(float(scale.asnumpy()))
    # grows when scale_window (2) iterations passed since the last overflow/growth
    assert got == [8.0, 16.0, 16.0, 8.0, 4.0, 4.0, 8.0]
    assert [p.name for p in cell.get_parameters()] == ["current_iterator_step", "last_overflow_iterator_step"]


def small_dense(seed=0):
    net = nn.Dense(4, 2)
    r = np.random.default_rng(seed)
    for p in net.get_parameters():
        p.set_data(ms.Tensor(r.uniform(-0.5, 0.5, size=p.shape).astype(np.float32)))
    return net


def test_loss_scale_cell_skips_overflowed_steps():
    net = small_dense()
    opt = nn.SGD(net.trainable_params(), 0.1)
    update = nn.DynamicLossScaleUpdateCell(2.0 ** 10, 2, 100)
    step = nn.TrainOneStepWithLossScaleCell(nn.WithLossCell(net, nn.MSELoss()), opt, scale_sense=update)
    x = np.ones((3, 4), np.float32)
    y = ms.Tensor(np.zeros((3, 2), np.float32))
    bad = x.copy()
    bad[0, 0] = np.inf
    w = net.weight.asnumpy().copy()
    loss, overflow, scale = step(ms.Tensor(bad), y)
    assert bool(overflow.asnumpy()) and not np.isfinite(float(loss.asnumpy()))
    np.testing.assert_array_equal(net.weight.asnumpy(), w)              # skipped
    assert int(opt.global_step.asnumpy()[0]) == 0
    assert float(scale.asnumpy()) == 512.0 and scale is step.scale_sense
    loss, overflow, _ = step(ms.Tensor(x), y)
    assert not bool(overflow.asnumpy()) and int(opt.global_step.asnumpy()[0]) == 1
    # the update used the unscaled gradient: compare with a plain TrainOneStepCell
    ref = small_dense()
    nn.TrainOneStepCell(nn.WithLossCell(ref, nn.MSELoss()), nn.SGD(ref.trainable_params(), 0.1))(ms.Tensor(x), y)
    np.testing.assert_allclose(net.weight.asnumpy(), ref.weight.asnumpy(), rtol=1e-6)


def test_loss_scale_protects_float16_gradients_from_underflow():
    # a float16 network whose true weight gradient (~1e-8) is below float16's smallest subnormal
    def run(scale):
        net = nn.Dense(2, 1, has_bias=False)
        net.weight.set_data(ms.Tensor(np.array([[1.0, 1.0]], np.float32)))
        net.to_float(ms.float16)
        opt = nn.SGD(net.trainable_params(), learning_rate=1e6)     # large, so the step shows in float32
        # the loss in float32 (as O2 does): its tiny gradient underflows when cast back to float16
        loss_fn = lambda out: ops.cast(out, ms.float32).sum() * 1e-8          # noqa: E731
        cell = nn.TrainOneStepWithLossScaleCell(_LossOf(net, loss_fn), opt,
                                                scale_sense=ms.Tensor(np.array(scale, np.float32)))
        cell(ms.Tensor(np.array([[1.0, 2.0]], np.float32)))
        return (1.0 - net.weight.asnumpy()[0]) / 1e6       # = the gradient
    np.testing.assert_array_equal(run(1.0), [0.0, 0.0])                    # underflowed
    np.testing.assert_allclose(run(2.0 ** 14), [1e-8, 2e-8], rtol=2e-2)     # kept (2**16 would overflow float16)


class _LossOf(nn.Cell):
    def __init__(self, net, fn):
        super().__init__(auto_prefix=False)
        self.net, self.fn = net, fn

    def construct(self, x):
        return self.fn(self.net(x))


def test_loss_scale_cell_bad_input_and_set_sense_scale():
    net = small_dense()
    wl = nn.WithLossCell(net, nn.MSELoss())
    opt = nn.SGD(net.trainable_params(), 0.1)
    with pytest.raises(OpTypeError, match="TrainOneStepWithLossScaleCell"):
        nn.TrainOneStepWithLossScaleCell(wl, opt, scale_sense=2.0)
    with pytest.raises(OpValueError, match="TrainOneStepWithLossScaleCell"):
        nn.TrainOneStepWithLossScaleCell(wl, opt, scale_sense=ms.Tensor(np.ones(2, np.float32)))
    cell = nn.TrainOneStepWithLossScaleCell(wl, opt, scale_sense=ms.Tensor(np.array([4.0], np.float32)))
    cell.set_sense_scale(ms.Tensor(np.array([16.0], np.float32)))
    assert float(cell.scale_sense.asnumpy()[0]) == 16.0
    with pytest.raises(OpTypeError):
        cell.set_sense_scale(3.0)


# -- managers and build_train_network --------------------------------------------------------------------

def test_managers():
    m = DynamicLossScaleManager(16, 2, 3)
    got = []
    for overflow in [False, False, True, False, False, False]:
        m.update_loss_scale(overflow)
        got.append(m.get_loss_scale())
    assert got == [16, 16, 8.0, 8.0, 8.0, 16.0]
    assert isinstance(m.get_update_cell(), nn.DynamicLossScaleUpdateCell) and m.get_drop_overflow_update()
    assert FixedLossScaleManager(64.0, drop_overflow_update=False).get_update_cell() is None
    cell = FixedLossScaleManager(64.0).get_update_cell()
    assert isinstance(cell, nn.FixedLossScaleUpdateCell) and cell.get_loss_scale() == 64.0
    many = DynamicLossScaleManager(2.0, 2, 10)
    many.bad_step_max = 2
    with pytest.raises(MinisporeError):
        for _ in range(3):
            many.update_loss_scale(True)
    with pytest.raises(OpValueError):
        DynamicLossScaleManager(0.5)
    with pytest.raises(OpValueError):
        FixedLossScaleManager(0)


def test_build_train_network_levels():
    x = ms.Tensor(np.random.default_rng(4).uniform(-1, 1, (3, 4)).astype(np.float32))
    y = ms.Tensor(np.zeros((3, 2), np.float32))
    net = small_dense()
    cell = amp.build_train_network(net, nn.Momentum(net.trainable_params(), 0.1, 0.9), nn.MSELoss(), level="O0")
    assert type(cell) is nn.TrainOneStepCell and cell.training
    assert cell(x, y).dtype == ms.float32
    # O2's default manager is dynamic: a loss-scale cell (MindSpore refuses this on CPU; minispore builds it)
    net = make_net()
    cell = amp.build_train_network(net, nn.Momentum(net.trainable_params(), 0.1, 0.9), nn.MSELoss(), level="O2")
    assert isinstance(cell, nn.TrainOneStepWithLossScaleCell)
    assert float(cell.scale_sense.asnumpy()) == 2.0 ** 24
    loss, overflow, _ = cell(x, y)
    assert loss.dtype == ms.float32 and bool(overflow.asnumpy()) in (True, False)
    # fixed scale without overflow check: a TrainOneStepCell with sens
    net = small_dense()
    cell = amp.build_train_network(net, nn.SGD(net.trainable_params(), 0.1, loss_scale=8.0), nn.MSELoss(), level="O3",
                                   loss_scale_manager=FixedLossScaleManager(8.0, False))
    assert type(cell) is nn.TrainOneStepCell and cell.sens == 8.0
    assert cell.network.__class__.__name__ == "WithLossCell" and cell.network._backbone is net


@pytest.mark.parametrize("kwargs, err", [
    (dict(level="O5"), OpValueError), (dict(level=2), OpTypeError), (dict(boost_level="O1"), OpValueError),
    (dict(keep_fp32=True), OpValueError), (dict(cast_model_type=ms.int32), OpTypeError),
    (dict(keep_batchnorm_fp32=1), OpTypeError), (dict(loss_scale_manager=4.0), OpTypeError),
])
def test_build_train_network_bad_input(kwargs, err):
    net = small_dense()
    with pytest.raises(err, match="build_train_network"):
        amp.build_train_network(net, nn.SGD(net.trainable_params()), nn.MSELoss(), **kwargs)
    with pytest.raises(OpTypeError, match="build_train_network"):
        amp.build_train_network(net, object(), nn.MSELoss())
