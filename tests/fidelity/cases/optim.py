"""Optimizers after 3 steps, as MindSpore 2.10 computes them: every update rule on a small network
(Dense -> LayerNorm -> Dense, so `norm.gamma` / `norm.beta` exercise the weight-decay filter) with
deterministic weights and fixed gradients; optimizer state names and values (they are what a
checkpoint stores); parameter groups; dynamic learning rates; loss_scale; full training steps.

Left out, because MindSpore 2.10's CPU kernels get them wrong or lack them (tests/nn/test_optim_fidelity.py
checks minispore against the documented formulas instead):
* nn.Lamb updates: no CPU kernel ("Unsupported op [Lamb] on CPU");
* Momentum(use_nesterov=True): the CPU ApplyMomentum kernel ignores the flag (plain momentum);
* Adagrad(update_slots=False): the CPU ApplyAdagrad kernel ignores the flag (accum still grows).
"""
import numpy as np

import msdiff
from msdiff import case


_net = msdiff.dense_norm_dense


def _grads(ms, params, step, scale=1.0):
    return tuple(ms.Tensor(msdiff.rand(*p.shape, seed=100 + 10 * step + i) * np.float32(scale))
                 for i, p in enumerate(params))


def _run(ms, make_opt, steps=3, scale=1.0, state=False):
    """Build the net, the optimizer `make_opt(params)`, apply `steps` fixed gradients; return the
    parameters (and, with state=True, every optimizer parameter) by name."""
    net = _net(ms)
    params = net.trainable_params()
    opt = make_opt(params)
    for step in range(steps):
        opt(_grads(ms, params, step, scale))
    out = {p.name: p for p in params}
    if state:
        return out, {p.name: p for p in opt.get_parameters() if p.name not in out}
    return out


def _names(opt):
    return [(p.name, tuple(p.shape), str(p.dtype)) for p in opt.get_parameters()]


# -- SGD -----------------------------------------------------------------------------------------

@case("optim/sgd_plain")
def _(ms):
    return _run(ms, lambda p: ms.nn.SGD(p, learning_rate=0.1))


@case("optim/sgd_default_lr")
def _(ms):
    return _run(ms, lambda p: ms.nn.SGD(p))


@case("optim/sgd_momentum")
def _(ms):
    return _run(ms, lambda p: ms.nn.SGD(p, learning_rate=0.05, momentum=0.9), state=True)


@case("optim/sgd_momentum_dampening")
def _(ms):
    return _run(ms, lambda p: ms.nn.SGD(p, learning_rate=0.05, momentum=0.9, dampening=0.3))


@case("optim/sgd_nesterov")
def _(ms):
    return _run(ms, lambda p: ms.nn.SGD(p, learning_rate=0.05, momentum=0.8, nesterov=True))


@case("optim/sgd_weight_decay_filters_gamma_beta")
def _(ms):
    return _run(ms, lambda p: ms.nn.SGD(p, learning_rate=0.1, weight_decay=0.5))


@case("optim/sgd_weight_decay_loss_scale")
def _(ms):
    return _run(ms, lambda p: ms.nn.SGD(p, learning_rate=0.1, momentum=0.5, weight_decay=0.1, loss_scale=64.0),
                scale=64.0)


# -- Momentum ------------------------------------------------------------------------------------

@case("optim/momentum")
def _(ms):
    return _run(ms, lambda p: ms.nn.Momentum(p, learning_rate=0.1, momentum=0.9), state=True)


@case("optim/momentum_weight_decay")
def _(ms):
    # (use_nesterov=True is left out: MindSpore 2.10's CPU ApplyMomentum kernel ignores it and
    # computes plain momentum; minispore follows the documented Nesterov formula)
    return _run(ms, lambda p: ms.nn.Momentum(p, 0.1, 0.9, weight_decay=0.05))


@case("optim/momentum_loss_scale")
def _(ms):
    return _run(ms, lambda p: ms.nn.Momentum(p, 0.1, 0.9, loss_scale=128.0), scale=128.0)


# -- Adam ----------------------------------------------------------------------------------------

@case("optim/adam_default")
def _(ms):
    return _run(ms, lambda p: ms.nn.Adam(p), state=True)


@case("optim/adam_lr_betas", rtol=1e-4)
def _(ms):
    return _run(ms, lambda p: ms.nn.Adam(p, learning_rate=0.01, beta1=0.8, beta2=0.9, eps=1e-6))


@case("optim/adam_nesterov", rtol=1e-4)
def _(ms):
    return _run(ms, lambda p: ms.nn.Adam(p, learning_rate=0.01, use_nesterov=True))


@case("optim/adam_amsgrad", rtol=1e-4)
def _(ms):
    return _run(ms, lambda p: ms.nn.Adam(p, learning_rate=0.01, beta2=0.5, use_amsgrad=True), state=True)


@case("optim/adam_weight_decay", rtol=1e-4)
def _(ms):
    return _run(ms, lambda p: ms.nn.Adam(p, learning_rate=0.01, weight_decay=0.3))


@case("optim/adam_loss_scale", rtol=1e-4)
def _(ms):
    return _run(ms, lambda p: ms.nn.Adam(p, learning_rate=0.01, loss_scale=1024.0), scale=1024.0)


@case("optim/adam_use_lazy_dense_grads", rtol=1e-4)
def _(ms):
    return _run(ms, lambda p: ms.nn.Adam(p, learning_rate=0.01, use_lazy=True))


@case("optim/adam_bad_kwarg", raises=True)
def _(ms):
    net = _net(ms)
    return ms.nn.Adam(net.trainable_params(), use_fast=True)


# -- AdamWeightDecay -----------------------------------------------------------------------------

@case("optim/adamw_default", rtol=1e-4)
def _(ms):
    return _run(ms, lambda p: ms.nn.AdamWeightDecay(p, learning_rate=0.01), state=True)


@case("optim/adamw_weight_decay", rtol=1e-4)
def _(ms):
    return _run(ms, lambda p: ms.nn.AdamWeightDecay(p, learning_rate=0.01, weight_decay=0.1, beta2=0.95))


# -- RMSProp -------------------------------------------------------------------------------------

@case("optim/rmsprop_default", rtol=1e-4)
def _(ms):
    return _run(ms, lambda p: ms.nn.RMSProp(p), state=True)


@case("optim/rmsprop_momentum", rtol=1e-4)
def _(ms):
    return _run(ms, lambda p: ms.nn.RMSProp(p, learning_rate=0.01, momentum=0.9, decay=0.8))


@case("optim/rmsprop_centered", rtol=1e-4)
def _(ms):
    return _run(ms, lambda p: ms.nn.RMSProp(p, learning_rate=0.01, momentum=0.5, centered=True,
                                            epsilon=1e-6), state=True)


@case("optim/rmsprop_weight_decay_loss_scale", rtol=1e-4)
def _(ms):
    return _run(ms, lambda p: ms.nn.RMSProp(p, learning_rate=0.01, weight_decay=0.1, loss_scale=8.0),
                scale=8.0)


@case("optim/rmsprop_bad_epsilon", raises=True)
def _(ms):
    return ms.nn.RMSProp(_net(ms).trainable_params(), epsilon=0.0)


# -- Adagrad -------------------------------------------------------------------------------------

@case("optim/adagrad_default", rtol=1e-4)
def _(ms):
    return _run(ms, lambda p: ms.nn.Adagrad(p), state=True)


@case("optim/adagrad_accum_lr", rtol=1e-4)
def _(ms):
    return _run(ms, lambda p: ms.nn.Adagrad(p, accum=0.5, learning_rate=0.1), state=True)


@case("optim/adagrad_weight_decay", rtol=1e-4)
def _(ms):
    return _run(ms, lambda p: ms.nn.Adagrad(p, learning_rate=0.1, weight_decay=0.2, loss_scale=4.0), scale=4.0)


@case("optim/adagrad_bad_accum", raises=True)
def _(ms):
    return ms.nn.Adagrad(_net(ms).trainable_params(), accum=-1.0)


# -- state names (what a checkpoint of the optimizer holds) ---------------------------------------

@case("optim/state_names")
def _(ms):
    nn = ms.nn
    out = {}
    for name, make in [("sgd", lambda p: nn.SGD(p, momentum=0.9)), ("momentum", lambda p: nn.Momentum(p, 0.1, 0.9)),
                       ("adam", lambda p: nn.Adam(p)), ("amsgrad", lambda p: nn.Adam(p, use_amsgrad=True)),
                       ("adamw", lambda p: nn.AdamWeightDecay(p)), ("rmsprop", lambda p: nn.RMSProp(p)),
                       ("rmsprop_centered", lambda p: nn.RMSProp(p, centered=True)),
                       ("adagrad", lambda p: nn.Adagrad(p)), ("lamb", lambda p: nn.Lamb(p, 0.1))]:
        out[name] = _names(make(_net(ms).trainable_params()))
    return out


@case("optim/state_names_groups")
def _(ms):
    net = _net(ms)
    fc = [p for p in net.trainable_params() if "fc" in p.name]
    norm = [p for p in net.trainable_params() if "norm" in p.name]
    opt = ms.nn.Adam([{"params": fc, "lr": 0.01}, {"params": norm, "lr": 0.1}])
    return _names(opt)


# -- parameter groups ----------------------------------------------------------------------------

@case("optim/groups_lr_weight_decay_order", rtol=1e-4)
def _(ms):
    net = _net(ms)
    params = net.trainable_params()
    fc1 = [p for p in params if p.name.startswith("fc1")]
    rest = [p for p in params if not p.name.startswith("fc1")]
    opt = ms.nn.Momentum([{"params": fc1, "weight_decay": 0.1, "lr": 0.05}, {"params": rest},
                          {"order_params": params}], learning_rate=0.1, momentum=0.9)
    for step in range(3):
        opt(_grads(ms, params, step))
    return {p.name: p for p in params}, [p.name for p in opt.parameters]


@case("optim/groups_weight_decay_applies_to_gamma")
def _(ms):
    # in a group, weight_decay applies to every parameter of the group, gamma/beta included
    net = _net(ms)
    params = net.trainable_params()
    opt = ms.nn.SGD([{"params": params, "weight_decay": 0.5}], learning_rate=0.1)
    for step in range(3):
        opt(_grads(ms, params, step))
    return {p.name: p for p in params}


@case("optim/groups_adam_get_lr", rtol=1e-4)
def _(ms):
    net = _net(ms)
    params = net.trainable_params()
    fc = [p for p in params if "fc" in p.name]
    norm = [p for p in params if "norm" in p.name]
    opt = ms.nn.Adam([{"params": fc, "lr": 0.01}, {"params": norm, "lr": 0.1, "weight_decay": 0.2}],
                     learning_rate=0.5)
    for step in range(3):
        opt(_grads(ms, opt.parameters, step))
    return {p.name: p for p in params}, opt.get_lr()


@case("optim/groups_rmsprop_dynamic_lr", rtol=1e-4)
def _(ms):
    net = _net(ms)
    params = net.trainable_params()
    fc = [p for p in params if "fc" in p.name]
    norm = [p for p in params if "norm" in p.name]
    opt = ms.nn.RMSProp([{"params": fc, "lr": [0.01, 0.02, 0.03, 0.04]}, {"params": norm}],
                        learning_rate=0.005)
    for step in range(3):
        opt(_grads(ms, opt.parameters, step))
    return {p.name: p for p in params}, opt.get_lr()


# -- dynamic learning rates ----------------------------------------------------------------------

@case("optim/lr_list")
def _(ms):
    net = _net(ms)
    params = net.trainable_params()
    opt = ms.nn.SGD(params, learning_rate=[0.1, 0.05, 0.01, 0.005])
    lrs = []
    for step in range(3):
        lrs.append(opt.get_lr())
        opt(_grads(ms, params, step))
    return {p.name: p for p in params}, lrs, opt.get_lr(), opt.global_step


@case("optim/lr_tensor_1d")
def _(ms):
    lr = ms.Tensor(np.array([0.2, 0.1, 0.05], np.float32))
    return _run(ms, lambda p: ms.nn.Momentum(p, lr, 0.9))


@case("optim/lr_tensor_0d")
def _(ms):
    lr = ms.Tensor(np.array(0.2, np.float32))
    return _run(ms, lambda p: ms.nn.SGD(p, learning_rate=lr))


@case("optim/lr_schedule_exponential", rtol=1e-4, atol=1e-5)
def _(ms):
    net = _net(ms)
    params = net.trainable_params()
    sched = ms.nn.ExponentialDecayLR(0.1, 0.5, 2)
    opt = ms.nn.Adam(params, learning_rate=sched)
    lrs = []
    for step in range(3):
        lrs.append(opt.get_lr())
        opt(_grads(ms, params, step))
    return {p.name: p for p in params}, lrs


@case("optim/lr_schedule_cosine", rtol=1e-4)
def _(ms):
    sched = ms.nn.CosineDecayLR(0.01, 0.1, 4)
    return _run(ms, lambda p: ms.nn.SGD(p, learning_rate=sched, momentum=0.9))


@case("optim/lr_int_and_weight_decay_int")
def _(ms):
    return _run(ms, lambda p: ms.nn.SGD(p, learning_rate=1, weight_decay=1))


@case("optim/get_lr_fixed")
def _(ms):
    opt = ms.nn.Momentum(_net(ms).trainable_params(), 0.25, 0.9)
    return opt.get_lr(), opt.global_step


@case("optim/get_lr_parameter")
def _(ms):
    net = _net(ms)
    params = net.trainable_params()
    opt = ms.nn.SGD([{"params": params[:2], "lr": 0.5}, {"params": params[2:]}], learning_rate=0.1)
    got = opt.get_lr_parameter(params[0]), opt.get_lr_parameter(params[3])
    return [(p.name, p) for p in got]


# -- whole training steps --------------------------------------------------------------------------

def _data():
    x = msdiff.rand(5, 4, seed=7)
    y = msdiff.rand(5, 2, seed=8)
    return x, y


@case("optim/value_and_grad_adam_losses", rtol=1e-4)
def _(ms):
    net = _net(ms)
    loss_fn = ms.nn.MSELoss()
    opt = ms.nn.Adam(net.trainable_params(), learning_rate=0.01)

    def forward(x, y):
        return loss_fn(net(x), y)

    grad_fn = ms.value_and_grad(forward, None, opt.parameters)
    x, y = (ms.Tensor(a) for a in _data())
    losses = []
    for _ in range(3):
        loss, grads = grad_fn(x, y)
        opt(grads)
        losses.append(loss)
    return losses, {p.name: p for p in net.trainable_params()}


@case("optim/train_one_step_momentum", rtol=1e-4)
def _(ms):
    net = _net(ms)
    opt = ms.nn.Momentum(net.trainable_params(), 0.1, 0.9, weight_decay=0.01)
    step = ms.nn.TrainOneStepCell(ms.nn.WithLossCell(net, ms.nn.MSELoss()), opt)
    step.set_train()
    x, y = (ms.Tensor(a) for a in _data())
    losses = [step(x, y) for _ in range(3)]
    return losses, {p.name: p for p in net.trainable_params()}


@case("optim/train_one_step_sens", rtol=1e-4)
def _(ms):
    net = _net(ms)
    opt = ms.nn.SGD(net.trainable_params(), 0.1)
    step = ms.nn.TrainOneStepCell(ms.nn.WithLossCell(net, ms.nn.MSELoss()), opt, sens=2.0)
    x, y = (ms.Tensor(a) for a in _data())
    losses = [step(x, y) for _ in range(3)]
    return losses, {p.name: p for p in net.trainable_params()}


@case("optim/train_one_step_rmsprop_dynamic_lr", rtol=1e-4)
def _(ms):
    net = _net(ms)
    opt = ms.nn.RMSProp(net.trainable_params(), learning_rate=ms.nn.PolynomialDecayLR(0.01, 0.001, 3, 1.0),
                        centered=True)
    step = ms.nn.TrainOneStepCell(ms.nn.WithLossCell(net, ms.nn.MSELoss()), opt)
    x, y = (ms.Tensor(a) for a in _data())
    losses = [step(x, y) for _ in range(3)]
    return losses, {p.name: p for p in net.trainable_params()}


@case("optim/train_one_step_sens_zero", raises=True)
def _(ms):
    net = _net(ms)
    return ms.nn.TrainOneStepCell(ms.nn.WithLossCell(net, ms.nn.MSELoss()), ms.nn.SGD(net.trainable_params()),
                                  sens=0.0)


# -- bad input -----------------------------------------------------------------------------------

@case("optim/sgd_nesterov_without_momentum", raises=True)
def _(ms):
    return ms.nn.SGD(_net(ms).trainable_params(), momentum=0.0, nesterov=True)


@case("optim/adam_beta1_one", raises=True)
def _(ms):
    return ms.nn.Adam(_net(ms).trainable_params(), beta1=1.0)


@case("optim/negative_lr", raises=True)
def _(ms):
    return ms.nn.Momentum(_net(ms).trainable_params(), -0.1, 0.9)


@case("optim/group_unknown_key", raises=True)
def _(ms):
    return ms.nn.SGD([{"params": _net(ms).trainable_params(), "momentum": 0.9}])


@case("optim/momentum_int_momentum", raises=True)
def _(ms):
    return ms.nn.Momentum(_net(ms).trainable_params(), 0.1, 1)


# -- gradient wrapper cells ------------------------------------------------------------------------

@case("optim/train_one_step_return_grad", rtol=1e-4)
def _(ms):
    net = _net(ms)
    step = ms.nn.TrainOneStepCell(ms.nn.WithLossCell(net, ms.nn.MSELoss()), ms.nn.SGD(net.trainable_params(), 0.1),
                                  return_grad=True)
    x, y = (ms.Tensor(a) for a in _data())
    loss, grads = step(x, y)
    return loss, grads


@case("optim/with_grad_cell", rtol=1e-4)
def _(ms):
    net = _net(ms)
    x, y = (ms.Tensor(a) for a in _data())
    plain = ms.nn.WithGradCell(net, ms.nn.MSELoss())(x, y)
    sens = ms.nn.WithGradCell(net, ms.nn.MSELoss(), sens=ms.Tensor(np.array(3.0, np.float32)))(x, y)
    return plain, sens


@case("optim/forward_value_and_grad", rtol=1e-4)
def _(ms):
    net = _net(ms)
    x, y = (ms.Tensor(a) for a in _data())
    with_loss = ms.nn.WithLossCell(net, ms.nn.MSELoss())
    cell = ms.nn.ForwardValueAndGrad(with_loss, weights=net.trainable_params(), get_by_list=True, sens_param=True)
    loss, grads = cell(x, y, ms.Tensor(np.array(2.0, np.float32)))
    inputs_loss, input_grads = ms.nn.ForwardValueAndGrad(with_loss, get_all=True)(x, y)
    return loss, grads, inputs_loss, input_grads
