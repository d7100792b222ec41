"""Mixed precision as MindSpore 2.10 does it: which dtypes flow through a network after
`amp.auto_mixed_precision` at each level, `Cell.to_float`, loss scalers and managers,
`nn.TrainOneStepWithLossScaleCell` with its update cells (including an overflowing step, which
must be skipped and must shrink the scale), and `amp.build_train_network`.

MindSpore's CPU backend cannot run TrainOneStepWithLossScaleCell's own overflow check ("Unsupported
op [NPUGetFloatStatusV2] on CPU"). The cases subclass it and override the documented hook
`get_overflow_status` with `amp.all_finite` (which is also what minispore's default does), so the
rest of the step — scaling, unscaling, skipping, updating the scale — is compared.
Low-precision values are compared at float16 tolerance (both frameworks round at slightly
different points); the dtypes are compared exactly.
"""
import numpy as np

import msdiff
from msdiff import case, sub

F16_TOL = dict(rtol=3e-3, atol=3e-3)


def _net(ms, seed=1):
    nn, ops = ms.nn, ms.ops

    class Net(nn.Cell):
        """Dense -> LayerNorm -> ReLU -> Dense, then exp and a class-style MatMul; records the dtype
        of every intermediate in `seen` (a plain list attribute)."""

        def __init__(self):
            super().__init__()
            self.fc1 = nn.Dense(4, 3)
            self.norm = nn.LayerNorm((3,))
            self.act = nn.ReLU()
            self.fc2 = nn.Dense(3, 2)
            self.seen = []

        def construct(self, x):
            h = self.fc1(x)
            n = self.norm(h)
            a = self.act(n)
            o = self.fc2(a)
            e = ops.exp(o)
            self.seen = [str(t.dtype) for t in (h, n, a, o, e)]
            return o, e

    return msdiff.fill_params(ms, Net(), seed=seed, scale=0.5)


def _x(ms):
    return ms.Tensor(msdiff.rand(3, 4, seed=5))


def _seen(cell):
    return [c.seen for _, c in cell.cells_and_names() if isinstance(getattr(c, "seen", None), list)][0]


def _level(ms, level, dtype=None):
    amp = sub(ms, "amp")
    net = _net(ms)
    kw = {} if dtype is None else {"dtype": dtype}
    wrapped = amp.auto_mixed_precision(net, level, **kw)
    o, e = wrapped(_x(ms))
    return {"out": o, "exp": e, "seen": _seen(wrapped),
            "params": [(p.name, str(p.dtype)) for p in wrapped.get_parameters()],
            "same_object": wrapped is net}


@case("amp/level_O0")
def _(ms):
    return _level(ms, "O0")


@case("amp/level_O1", **F16_TOL)
def _(ms):
    # (MindSpore's O1 rewrites the network's source, which needs its class importable at module
    # level: a SequentialCell of built-in layers is)
    amp, nn = sub(ms, "amp"), ms.nn
    net = msdiff.fill_params(ms, nn.SequentialCell([nn.Dense(4, 3), nn.LayerNorm((3,)), nn.ReLU(), nn.Dense(3, 2)]),
                             seed=1, scale=0.5)
    wrapped = amp.auto_mixed_precision(net, "O1")
    out = wrapped(_x(ms))
    return out, [(p.name, str(p.dtype)) for p in wrapped.get_parameters()]


@case("amp/level_O2", **F16_TOL)
def _(ms):
    return _level(ms, "O2")


@case("amp/level_O3", **F16_TOL)
def _(ms):
    return _level(ms, "O3")


@case("amp/level_O3_default_level_is_O0")
def _(ms):
    amp = sub(ms, "amp")
    net = _net(ms)
    return amp.auto_mixed_precision(net) is net


@case("amp/level_O2_grads_are_float32", **F16_TOL)
def _(ms):
    amp = sub(ms, "amp")
    net = _net(ms)
    wrapped = amp.auto_mixed_precision(net, "O2")
    params = net.trainable_params()

    def loss(x):
        o, _ = wrapped(x)
        return o.sum()

    value, grads = ms.value_and_grad(loss, None, params)(_x(ms))
    return value, {p.name: g for p, g in zip(params, grads)}


@case("amp/to_float_fp16", **F16_TOL)
def _(ms):
    net = _net(ms)
    same = net.to_float(ms.float16) is net
    o, e = net(_x(ms))
    return same, o, e, net.seen, [str(p.dtype) for p in net.get_parameters()]


@case("amp/to_float_child_only")
def _(ms):
    # to_float on the last layer only: its float32 input is cast to float16 on the way in
    net = _net(ms)
    net.fc2.to_float(ms.float16)
    o, e = net(_x(ms))
    return net.seen, str(o.dtype), str(e.dtype)


@case("amp/to_float_float64", raises=True)
def _(ms):
    return _net(ms).to_float(ms.float64)


@case("amp/bad_level", raises=True)
def _(ms):
    return sub(ms, "amp").auto_mixed_precision(_net(ms), "O4")


@case("amp/bad_dtype", raises=True)
def _(ms):
    return sub(ms, "amp").auto_mixed_precision(_net(ms), "O2", dtype=ms.float32)


@case("amp/not_a_cell", raises=True)
def _(ms):
    return sub(ms, "amp").auto_mixed_precision(lambda x: x, "O2")


# -- functional loss scaling ---------------------------------------------------------------------

@case("amp/all_finite")
def _(ms):
    amp = sub(ms, "amp")
    good = ms.Tensor(np.ones((2, 2), np.float32))
    inf = ms.Tensor(np.array([1.0, np.inf], np.float32))
    nan = ms.Tensor(np.array([np.nan], np.float16))
    return amp.all_finite((good, good)), amp.all_finite((good, inf)), amp.all_finite([nan])


@case("amp/dynamic_loss_scaler")
def _(ms):
    amp = sub(ms, "amp")
    scaler = amp.DynamicLossScaler(1024, 2, 3)
    x = ms.Tensor(msdiff.rand(2, 2, seed=3))
    scaled = scaler.scale((x, x * 2))
    unscaled = scaler.unscale(scaled)
    history = []
    for finite in [True, False, True, True, True, True, True]:
        scaler.adjust(ms.Tensor(finite))
        history.append((scaler.scale_value.asnumpy().copy(), scaler.counter.asnumpy().copy()))
    return scaled, unscaled, history


@case("amp/static_loss_scaler")
def _(ms):
    amp = sub(ms, "amp")
    scaler = amp.StaticLossScaler(8)
    x = ms.Tensor(msdiff.rand(3, seed=4))
    return scaler.scale(x), scaler.unscale((x,)), scaler.adjust(ms.Tensor(False)), scaler.scale_value


@case("amp/dynamic_loss_scaler_bad_scale", raises=True)
def _(ms):
    return sub(ms, "amp").DynamicLossScaler(0.5, 2, 10)


# -- loss-scale training cell ---------------------------------------------------------------------

def _step_class(ms):
    amp = sub(ms, "amp")

    class Step(ms.nn.TrainOneStepWithLossScaleCell):
        def get_overflow_status(self, status, compute_output):
            return ms.ops.logical_not(amp.all_finite(compute_output))

    return Step


def _dense(ms):
    net = ms.nn.Dense(4, 2)
    return msdiff.fill_params(ms, net, seed=2, scale=0.5)


def _batches(ms):
    x = msdiff.rand(3, 4, seed=11)
    bad = x.copy()
    bad[0, 0] = np.inf
    y = ms.Tensor(msdiff.rand(3, 2, seed=12))
    return ms.Tensor(x), ms.Tensor(bad), y


def _train(ms, step, net, order):
    x, bad, y = _batches(ms)
    out = []
    for name in order:
        loss, overflow, scale = step(x if name == "ok" else bad, y)
        out.append((loss, overflow, scale.asnumpy().copy(), net.weight.asnumpy().copy()))
    return out


@case("amp/loss_scale_cell_dynamic", rtol=1e-5, atol=1e-5)
def _(ms):
    net = _dense(ms)
    update = ms.nn.DynamicLossScaleUpdateCell(loss_scale_value=2.0 ** 10, scale_factor=2, scale_window=2)
    step = _step_class(ms)(ms.nn.WithLossCell(net, ms.nn.MSELoss()), ms.nn.SGD(net.trainable_params(), 0.1),
                           scale_sense=update)
    out = _train(ms, step, net, ["ok", "ok", "bad", "ok", "ok", "ok"])
    return out, update.cur_iter, update.last_overflow_iter


@case("amp/loss_scale_cell_dynamic_momentum", rtol=1e-5, atol=1e-5)
def _(ms):
    net = _dense(ms)
    update = ms.nn.DynamicLossScaleUpdateCell(2.0 ** 4, 4, 1)
    step = _step_class(ms)(ms.nn.WithLossCell(net, ms.nn.MSELoss()),
                           ms.nn.Momentum(net.trainable_params(), 0.05, 0.9), scale_sense=update)
    out = _train(ms, step, net, ["bad", "bad", "ok", "ok", "bad"])
    return out, {p.name: p for p in step.optimizer.get_parameters()}


@case("amp/loss_scale_cell_fixed_update_cell", rtol=1e-5, atol=1e-5)
def _(ms):
    net = _dense(ms)
    step = _step_class(ms)(ms.nn.WithLossCell(net, ms.nn.MSELoss()), ms.nn.SGD(net.trainable_params(), 0.1),
                           scale_sense=ms.nn.FixedLossScaleUpdateCell(128.0))
    return _train(ms, step, net, ["ok", "bad", "ok"])


@case("amp/loss_scale_cell_tensor_sense", rtol=1e-5, atol=1e-5)
def _(ms):
    net = _dense(ms)
    step = _step_class(ms)(ms.nn.WithLossCell(net, ms.nn.MSELoss()), ms.nn.Adam(net.trainable_params(), 0.01),
                           scale_sense=ms.Tensor(np.array(64.0, np.float32)))
    first = _train(ms, step, net, ["ok", "bad"])
    step.set_sense_scale(ms.Tensor(np.array(8.0, np.float32)))
    return first, _train(ms, step, net, ["ok"])


@case("amp/loss_scale_cell_parameter_names")
def _(ms):
    net = _dense(ms)
    step = _step_class(ms)(ms.nn.WithLossCell(net, ms.nn.MSELoss()), ms.nn.SGD(net.trainable_params(), 0.1),
                           scale_sense=ms.nn.DynamicLossScaleUpdateCell(1024.0, 2, 100))
    return [(p.name, tuple(p.shape), str(p.dtype)) for p in step.get_parameters()]


@case("amp/loss_scale_cell_bad_sense_shape", raises=True)
def _(ms):
    net = _dense(ms)
    return ms.nn.TrainOneStepWithLossScaleCell(ms.nn.WithLossCell(net, ms.nn.MSELoss()),
                                               ms.nn.SGD(net.trainable_params(), 0.1),
                                               scale_sense=ms.Tensor(np.ones((2,), np.float32)))


@case("amp/loss_scale_cell_bad_sense_type", raises=True)
def _(ms):
    net = _dense(ms)
    return ms.nn.TrainOneStepWithLossScaleCell(ms.nn.WithLossCell(net, ms.nn.MSELoss()),
                                               ms.nn.SGD(net.trainable_params(), 0.1), scale_sense=128.0)


@case("amp/dynamic_update_cell_alone")
def _(ms):
    cell = ms.nn.DynamicLossScaleUpdateCell(8.0, 2, 2)
    scale = ms.Parameter(ms.Tensor(np.array(8.0, np.float32)), name="s")
    out = []
    for over in [False, False, False, True, True, False, False]:
        cell(scale, ms.Tensor(over))
        out.append(float(scale.asnumpy()))
    return out, cell.get_loss_scale()


# -- loss-scale managers --------------------------------------------------------------------------

@case("amp/dynamic_manager_updates")
def _(ms):
    train = sub(ms, "train")
    m = train.DynamicLossScaleManager(2 ** 4, 2, 3)
    out = [m.get_loss_scale(), m.get_drop_overflow_update(), type(m.get_update_cell()).__name__]
    for overflow in [False, False, True, False, False, False, True]:
        m.update_loss_scale(overflow)
        out.append(m.get_loss_scale())
    return out


@case("amp/fixed_manager")
def _(ms):
    train = sub(ms, "train")
    keep = train.FixedLossScaleManager(256.0, drop_overflow_update=False)
    drop = train.FixedLossScaleManager()
    return (keep.get_loss_scale(), keep.get_drop_overflow_update(), keep.get_update_cell(),
            drop.get_loss_scale(), type(drop.get_update_cell()).__name__, drop.get_update_cell().get_loss_scale())


@case("amp/manager_update_cell_in_train_cell", rtol=1e-5, atol=1e-5)
def _(ms):
    train = sub(ms, "train")
    net = _dense(ms)
    manager = train.DynamicLossScaleManager(init_loss_scale=2.0 ** 8, scale_factor=2, scale_window=2)
    step = _step_class(ms)(ms.nn.WithLossCell(net, ms.nn.MSELoss()), ms.nn.SGD(net.trainable_params(), 0.1),
                           scale_sense=manager.get_update_cell())
    return _train(ms, step, net, ["ok", "ok", "bad", "ok"])


@case("amp/fixed_manager_bad_scale", raises=True)
def _(ms):
    return sub(ms, "train").FixedLossScaleManager(0.5)


# -- build_train_network ---------------------------------------------------------------------------

def _build(ms, level, **kwargs):
    amp = sub(ms, "amp")
    net = _dense(ms)
    opt_kw = kwargs.pop("opt_kw", {})
    cell = amp.build_train_network(net, ms.nn.Momentum(net.trainable_params(), 0.1, 0.9, **opt_kw),
                                   ms.nn.MSELoss(), level=level, **kwargs)
    x, _, y = _batches(ms)
    losses = [cell(x, y) for _ in range(3)]
    return type(cell).__name__, cell.training, losses, net.weight, net.bias


@case("amp/build_train_network_O0", rtol=1e-5, atol=1e-6)
def _(ms):
    return _build(ms, "O0")


@case("amp/build_train_network_O1", **F16_TOL)
def _(ms):
    return _build(ms, "O1")


@case("amp/build_train_network_O3", **F16_TOL)
def _(ms):
    return _build(ms, "O3")


@case("amp/build_train_network_O2_fixed_manager", **F16_TOL)
def _(ms):
    train = sub(ms, "train")
    return _build(ms, "O2", loss_scale_manager=train.FixedLossScaleManager(64.0, drop_overflow_update=False),
                  opt_kw={"loss_scale": 64.0})


@case("amp/build_train_network_O3_cast_fp32", rtol=1e-5, atol=1e-6)
def _(ms):
    # cast_model_type=float32 overrides O3's float16: the network stays float32
    return _build(ms, "O3", cast_model_type=ms.float32)


@case("amp/build_train_network_sens_from_manager")
def _(ms):
    amp, train = sub(ms, "amp"), sub(ms, "train")
    net = _dense(ms)
    cell = amp.build_train_network(net, ms.nn.SGD(net.trainable_params(), 0.1, loss_scale=32.0), ms.nn.MSELoss(),
                                   level="O0", loss_scale_manager=train.FixedLossScaleManager(32.0, False))
    return cell.sens


@case("amp/build_train_network_bad_level", raises=True)
def _(ms):
    net = _dense(ms)
    return sub(ms, "amp").build_train_network(net, ms.nn.SGD(net.trainable_params()), ms.nn.MSELoss(), level="O5")


@case("amp/build_train_network_bad_kwarg", raises=True)
def _(ms):
    net = _dense(ms)
    return sub(ms, "amp").build_train_network(net, ms.nn.SGD(net.trainable_params()), ms.nn.MSELoss(),
                                              level="O2", keep_fp32=True)


@case("amp/build_train_network_not_optimizer", raises=True)
def _(ms):
    net = _dense(ms)
    return sub(ms, "amp").build_train_network(net, object(), ms.nn.MSELoss())
