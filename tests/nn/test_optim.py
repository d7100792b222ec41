"""Optimizers: every update rule against an independent float64 NumPy re-implementation, and
against torch.optim where the rules coincide; state names, groups, learning-rate forms, bad input."""
import numpy as np
import pytest

import minispore as ms
from minispore import nn
from minispore.common.errors import OpTypeError, OpValueError
from minispore.mint.optim import AdamW

STEPS = 4


def make_params(seed=0):
    """Three parameters; 'ln.gamma' is exempt from default weight decay (MindSpore's name rule)."""
    r = np.random.default_rng(seed)
    return [ms.Parameter(r.normal(size=(3, 4)).astype(np.float32), name="fc.weight"),
            ms.Parameter(r.normal(size=(4,)).astype(np.float32), name="fc.bias"),
            ms.Parameter(r.normal(size=(4,)).astype(np.float32) + 1, name="ln.gamma")]


def grad_sequence(params, steps=STEPS, seed=1):
    r = np.random.default_rng(seed)
    return [[r.normal(size=p.shape).astype(np.float32) for p in params] for _ in range(steps)]


def run(opt, params, grads):
    for gs in grads:
        opt(tuple(ms.Tensor(g) for g in gs))
    return [p.asnumpy().astype(np.float64) for p in params]


def check(got, want, rtol=2e-5, atol=2e-6):
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


# ------------------------------------------------------------------------------------------------
# float64 references, written from the formulas in mindspore_api.md §8.1
def ref_sgd(w0, grads, lr, momentum=0.0, dampening=0.0, wd_per_param=(0.0, 0.0, 0.0), nesterov=False):
    ws = [w.astype(np.float64).copy() for w in w0]
    v = [None] * len(ws)
    for gs in grads:
        for i, g in enumerate(gs):
            g = g.astype(np.float64) + wd_per_param[i] * ws[i]
            if momentum > 0:
                v[i] = g.copy() if v[i] is None else momentum * v[i] + (1 - dampening) * g
                g = g + momentum * v[i] if nesterov else v[i]
            ws[i] = ws[i] - lr * g
    return ws


def ref_momentum(w0, grads, lr, momentum, wd_per_param, nesterov=False):
    ws = [w.astype(np.float64).copy() for w in w0]
    v = [np.zeros_like(w) for w in ws]
    for gs in grads:
        for i, g in enumerate(gs):
            g = g.astype(np.float64) + wd_per_param[i] * ws[i]
            v[i] = momentum * v[i] + g
            ws[i] = ws[i] - lr * (g + momentum * v[i] if nesterov else v[i])
    return ws


def ref_adam(w0, grads, lrs, b1=0.9, b2=0.999, eps=1e-8, wd_per_param=None, nesterov=False):
    ws = [w.astype(np.float64).copy() for w in w0]
    m = [np.zeros_like(w) for w in ws]
    v = [np.zeros_like(w) for w in ws]
    for t, gs in enumerate(grads, start=1):
        lr_t = lrs[t - 1] * np.sqrt(1 - b2 ** t) / (1 - b1 ** t)
        for i, g in enumerate(gs):
            g = g.astype(np.float64) + (wd_per_param[i] if wd_per_param else 0.0) * ws[i]
            m[i] = b1 * m[i] + (1 - b1) * g
            v[i] = b2 * v[i] + (1 - b2) * g * g
            num = b1 * m[i] + (1 - b1) * g if nesterov else m[i]
            ws[i] = ws[i] - lr_t * num / (np.sqrt(v[i]) + eps)
    return ws


def ref_adam_weight_decay(w0, grads, lr, wd_per_param, b1=0.9, b2=0.999, eps=1e-6):
    ws = [w.astype(np.float64).copy() for w in w0]
    m = [np.zeros_like(w) for w in ws]
    v = [np.zeros_like(w) for w in ws]
    for gs in grads:
        for i, g in enumerate(gs):
            g = g.astype(np.float64)
            m[i] = b1 * m[i] + (1 - b1) * g
            v[i] = b2 * v[i] + (1 - b2) * g * g
            ws[i] = ws[i] - lr * (m[i] / (np.sqrt(v[i]) + eps) + wd_per_param[i] * ws[i])
    return ws


def init_values(params):
    return [p.asnumpy().copy() for p in params]


# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kw", [dict(), dict(momentum=0.9), dict(momentum=0.8, dampening=0.3, weight_decay=0.05),
                                dict(momentum=0.9, nesterov=True, weight_decay=0.01)])
def test_sgd_matches_reference(kw):
    params = make_params()
    w0, grads = init_values(params), grad_sequence(params)
    opt = nn.SGD(params, learning_rate=0.1, **kw)
    wd = kw.get("weight_decay", 0.0)
    assert opt.decay_flags == (True, True, False)              # 'ln.gamma' is not decayed (MindSpore's filter)
    want = ref_sgd(w0, grads, 0.1, kw.get("momentum", 0.0), kw.get("dampening", 0.0), [wd, wd, 0.0],
                   kw.get("nesterov", False))
    check(run(opt, params, grads), want)


@pytest.mark.parametrize("nesterov", [False, True])
def test_momentum_matches_reference_and_skips_gamma_decay(nesterov):
    params = make_params()
    w0, grads = init_values(params), grad_sequence(params)
    opt = nn.Momentum(params, learning_rate=0.05, momentum=0.9, weight_decay=0.1, use_nesterov=nesterov)
    assert opt.decay_flags == (True, True, False)
    want = ref_momentum(w0, grads, 0.05, 0.9, [0.1, 0.1, 0.0], nesterov)
    check(run(opt, params, grads), want)


@pytest.mark.parametrize("nesterov", [False, True])
def test_adam_matches_reference(nesterov):
    params = make_params()
    w0, grads = init_values(params), grad_sequence(params)
    opt = nn.Adam(params, learning_rate=0.01, weight_decay=0.02, use_nesterov=nesterov)
    want = ref_adam(w0, grads, [0.01] * STEPS, wd_per_param=[0.02, 0.02, 0.0], nesterov=nesterov)
    check(run(opt, params, grads), want)
    np.testing.assert_allclose(opt.beta1_power.asnumpy(), [0.9 ** STEPS], rtol=1e-6)
    assert opt.global_step.asnumpy().tolist() == [STEPS] and opt.global_step.dtype == ms.int32


def test_adam_weight_decay_matches_reference():
    params = make_params()
    w0, grads = init_values(params), grad_sequence(params)
    opt = nn.AdamWeightDecay(params, learning_rate=0.01, weight_decay=0.1)
    assert opt.eps == 1e-6
    check(run(opt, params, grads), ref_adam_weight_decay(w0, grads, 0.01, [0.1, 0.1, 0.0]))


def test_loss_scale_divides_gradients():
    params = make_params()
    w0, grads = init_values(params), grad_sequence(params)
    opt = nn.Momentum(params, 0.1, 0.9, loss_scale=128.0)
    scaled = [[g * 128.0 for g in gs] for gs in grads]
    check(run(opt, params, scaled), ref_momentum(w0, grads, 0.1, 0.9, [0, 0, 0]))


# ------------------------------------------------------------------------------------------------
# torch.optim where the rules are the same
def _torch_run(torch, opt_cls, w0, grads, **kw):
    tp = [torch.nn.Parameter(torch.tensor(w, dtype=torch.float64)) for w in w0]
    opt = opt_cls(tp, **kw)
    for gs in grads:
        for p, g in zip(tp, gs):
            p.grad = torch.tensor(g, dtype=torch.float64)
        opt.step()
    return [p.detach().numpy() for p in tp]


def test_sgd_and_adam_match_torch():
    torch = pytest.importorskip("torch")
    params = make_params()
    w0, grads = init_values(params), grad_sequence(params)
    group = [{"params": params, "weight_decay": 0.03}]           # grouped: gamma is decayed as well
    got = run(nn.SGD(group, 0.1, momentum=0.7, dampening=0.2), params, grads)
    check(got, _torch_run(torch, torch.optim.SGD, w0, grads, lr=0.1, momentum=0.7, dampening=0.2, weight_decay=0.03))
    # Adam: same rule up to where eps sits (eps vs eps*sqrt(1-beta2^t)), negligible for eps=1e-8.
    params = make_params()
    group = [{"params": params, "weight_decay": 0.02}]           # grouped: gamma is decayed as well
    got = run(nn.Adam(group, learning_rate=0.01), params, grads)
    check(got, _torch_run(torch, torch.optim.Adam, w0, grads, lr=0.01, weight_decay=0.02), rtol=1e-5)


@pytest.mark.parametrize("kw", [dict(), dict(weight_decay=0.1, amsgrad=True), dict(betas=(0.8, 0.99), eps=1e-6,
                                                                                      maximize=True)])
def test_mint_adamw_matches_torch(kw):
    torch = pytest.importorskip("torch")
    params = make_params()
    w0, grads = init_values(params), grad_sequence(params)
    opt = AdamW(params, lr=0.01, **kw)
    got = run(opt, params, grads)
    check(got, _torch_run(torch, torch.optim.AdamW, w0, grads, lr=0.01, **kw))
    names = list(opt.parameters_dict())
    assert "exp_avg.fc.weight" in names and "exp_avg_sq.ln.gamma" in names and "state_step" in names
    assert ("max_exp_avg_sq.fc.bias" in names) == kw.get("amsgrad", False)
    assert int(opt.state_step.asnumpy()) == STEPS


def test_mint_adamw_groups_and_bad_input():
    params = make_params()
    opt = AdamW([{"params": params[:2]}, {"params": params[2:], "weight_decay": 0.0, "lr": 0.5}])
    assert opt.param_groups[1]["lr"] == 0.5 and opt.param_groups[0]["weight_decay"] == 1e-2
    with pytest.raises(OpValueError, match="'AdamW'"):
        opt((ms.Tensor(np.zeros((3, 4), np.float32)),))
    with pytest.raises(OpValueError, match="'AdamW'"):
        AdamW(params, lr=-1.0)
    with pytest.raises(OpValueError, match="'AdamW'"):
        AdamW(params, betas=(0.9, 1.0))


# ------------------------------------------------------------------------------------------------
# state, names, groups, learning rates
def test_state_parameter_names():
    params = make_params()
    adam = nn.Adam(params)
    names = list(adam.parameters_dict())
    for want in ["global_step", "learning_rate", "beta1_power", "beta2_power", "moment1.fc.weight",
                 "moment2.ln.gamma", "fc.weight"]:
        assert want in names
    assert all(not p.requires_grad for p in adam.moment1)
    assert adam.trainable_params() == params                   # state is not trainable
    assert "adam_m.fc.bias" in nn.AdamWeightDecay(params).parameters_dict()
    assert "moments.fc.bias" in nn.Momentum(params, 0.1, 0.9).parameters_dict()
    sgd = nn.SGD(params, momentum=0.9)
    assert {"accum.fc.bias", "stat.fc.bias", "momentum"} <= set(sgd.parameters_dict())


def test_groups_weight_decay_lr_and_order():
    params = make_params()
    w0, grads = init_values(params), grad_sequence(params)
    groups = [{"params": [params[0]], "weight_decay": 0.1},
              {"params": params[1:], "weight_decay": 0.0, "lr": 0.02},
              {"order_params": params}]
    opt = nn.AdamWeightDecay(groups, learning_rate=0.01)
    assert opt.is_group and opt.is_group_lr and opt.decay_flags == (True, False, False)
    assert [p.name for p in opt.parameters] == ["fc.weight", "fc.bias", "ln.gamma"]
    got = run(opt, params, grads)
    # the first parameter at lr 0.01 with decay, the others at lr 0.02 without
    want_a = ref_adam_weight_decay(w0, grads, 0.01, [0.1, 0.0, 0.0])
    want_b = ref_adam_weight_decay(w0, grads, 0.02, [0.1, 0.0, 0.0])
    check(got, [want_a[0], want_b[1], want_b[2]])
    lr = opt.get_lr()
    assert [float(v.asnumpy()) for v in lr] == pytest.approx([0.01, 0.02, 0.02])
    assert "learning_rate_group_1" in opt.parameters_dict()
    # order_params reorders the flattened list
    opt2 = nn.SGD([{"params": params[1:]}, {"params": params[:1]}, {"order_params": params}], 0.1)
    assert [p.name for p in opt2.parameters] == ["fc.weight", "fc.bias", "ln.gamma"]


def test_dynamic_learning_rates():
    params = make_params()
    w0, grads = init_values(params), grad_sequence(params)
    lrs = [0.1, 0.05, 0.02, 0.01]
    opt = nn.Adam(params, learning_rate=lrs)
    assert float(opt.get_lr().asnumpy()) == pytest.approx(0.1)
    check(run(opt, params, grads), ref_adam(w0, grads, lrs))
    with pytest.raises(OpValueError, match="learning-rate list"):
        opt(tuple(ms.Tensor(g) for g in grads[0]))               # step 4 is past the list
    # a schedule cell, evaluated at global_step
    params = make_params()
    sched = nn.WarmupCosineDecayLR(max_lr=0.1, min_lr=0.01, warmup_steps=2, decay_steps=10)
    opt = nn.Adam(params, learning_rate=sched)
    want_lrs = [sched.value_at(s) for s in range(STEPS)]
    assert want_lrs[0] == pytest.approx(0.1 / 3)
    check(run(opt, params, grads), ref_adam(w0, grads, want_lrs))
    assert float(opt.get_lr().asnumpy()) == pytest.approx(sched.value_at(STEPS))
    # a 0-d Tensor learning rate is a fixed rate
    assert float(nn.SGD(make_params(), ms.Tensor(0.3)).get_lr().asnumpy()) == pytest.approx(0.3)


def test_half_precision_parameters_update_in_float32():
    p = ms.Parameter(np.ones(4, np.float16), name="h")
    opt = nn.SGD([p], learning_rate=0.1)
    opt((ms.Tensor(np.full(4, 0.5, np.float16)),))
    assert p.dtype == ms.float16
    np.testing.assert_allclose(p.asnumpy().astype(np.float32), 0.95, rtol=1e-3)


def test_bad_input():
    params = make_params()
    with pytest.raises(OpValueError, match="'SGD'.*learning_rate"):
        nn.SGD(params, learning_rate=-0.1)
    with pytest.raises(OpValueError, match="'Adam'.*weight_decay"):
        nn.Adam(params, weight_decay=-1.0)
    with pytest.raises(OpValueError, match="'Adam'.*non-empty"):
        nn.Adam([])
    with pytest.raises(OpTypeError, match="'Adam'"):
        nn.Adam([params[0], "x"])
    with pytest.raises(OpValueError, match="'SGD'.*nesterov"):
        nn.SGD(params, momentum=0.9, dampening=0.1, nesterov=True)
    with pytest.raises(OpValueError, match="'Momentum'.*group keys"):
        nn.Momentum([{"params": params, "momentum": 0.5}], 0.1, 0.9)
    with pytest.raises(OpValueError, match="'Adam'.*beta1"):
        nn.Adam(params, beta1=1.0)
    with pytest.raises(OpTypeError, match="'Adam'.*learning_rate"):
        nn.Adam(params, learning_rate="fast")
    opt = nn.Adam(params)
    with pytest.raises(OpValueError, match=r"'Adam'.*3 gradients"):
        opt((ms.Tensor(np.zeros((3, 4), np.float32)),))
    with pytest.raises(OpValueError, match="'Adam'.*fc.bias"):
        opt((ms.Tensor(np.zeros((3, 4), np.float32)), ms.Tensor(np.zeros(5, np.float32)),
             ms.Tensor(np.zeros(4, np.float32))))
    with pytest.raises(OpTypeError, match="'Adam'"):
        opt(ms.Tensor(np.zeros(3, np.float32)))
