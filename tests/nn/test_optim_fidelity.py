"""The optimizers added for MindSpore fidelity (RMSProp, Adagrad, Lamb, Adam's amsgrad) against
independent float64 NumPy implementations of MindSpore's documented formulas (and torch where the
rules coincide), plus MindSpore's weight-decay filter, state names and argument checks.

The differential suite (tests/fidelity/cases/optim.py) compares against real MindSpore 2.10; the
cases MindSpore's CPU kernels cannot run (Lamb, Momentum's Nesterov, Adagrad update_slots=False)
are checked here against the formulas."""
import numpy as np
import pytest

import minispore as ms
from minispore import nn
from minispore.common.errors import MinisporeError, OpTypeError, OpValueError

STEPS = 4


def make_params(seed=0):
    """'ln.gamma' / 'ln.beta' are exempt from ungrouped weight decay (MindSpore's name filter)."""
    r = np.random.default_rng(seed)
    return [ms.Parameter(r.normal(size=(3, 4)).astype(np.float32), name="fc.weight"),
            ms.Parameter(r.normal(size=(4,)).astype(np.float32), name="ln.gamma"),
            ms.Parameter(r.normal(size=(4,)).astype(np.float32), name="ln.beta")]


WD_MASK = [1.0, 0.0, 0.0]


def grad_sequence(params, steps=STEPS, seed=1):
    r = np.random.default_rng(seed)
    return [[r.normal(size=p.shape).astype(np.float32) for p in params] for _ in range(steps)]


def run(opt, params, grads):
    for gs in grads:
        opt(tuple(ms.Tensor(g) for g in gs))
    return [p.asnumpy().astype(np.float64) for p in params]


def w0_of(params):
    return [p.asnumpy().astype(np.float64).copy() for p in params]


def check(got, want, rtol=2e-5, atol=2e-6):
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


# -- float64 references ---------------------------------------------------------------------------

def ref_rmsprop(w0, grads, lr, decay=0.9, momentum=0.0, eps=1e-10, centered=False, wd=0.0):
    ws = [w.copy() for w in w0]
    ms_ = [np.ones_like(w) for w in ws]           # mean_square starts at ONE in MindSpore
    mg = [np.zeros_like(w) for w in ws]
    mom = [np.zeros_like(w) for w in ws]
    for gs in grads:
        for i, g in enumerate(gs):
            g = g.astype(np.float64) + wd * WD_MASK[i] * ws[i]
            ms_[i] = decay * ms_[i] + (1 - decay) * g * g
            if centered:
                mg[i] = decay * mg[i] + (1 - decay) * g
                denom = np.sqrt(ms_[i] - mg[i] ** 2 + eps)
            else:
                denom = np.sqrt(ms_[i] + eps)
            mom[i] = momentum * mom[i] + lr * g / denom
            ws[i] = ws[i] - mom[i]
    return ws, ms_, mg, mom


def ref_adagrad(w0, grads, lr, accum=0.1, update_slots=True, wd=0.0):
    ws = [w.copy() for w in w0]
    acc = [np.full_like(w, accum) for w in ws]
    for gs in grads:
        for i, g in enumerate(gs):
            g = g.astype(np.float64) + wd * WD_MASK[i] * ws[i]
            if update_slots:
                acc[i] = acc[i] + g * g
            ws[i] = ws[i] - lr * g / np.sqrt(acc[i])
    return ws, acc


def ref_lamb(w0, grads, lr, b1=0.9, b2=0.999, eps=1e-6, wd=0.0, mask=WD_MASK):
    ws = [w.copy() for w in w0]
    m = [np.zeros_like(w) for w in ws]
    v = [np.zeros_like(w) for w in ws]
    for t, gs in enumerate(grads, start=1):
        for i, g in enumerate(gs):
            g = g.astype(np.float64)
            m[i] = b1 * m[i] + (1 - b1) * g
            v[i] = b2 * v[i] + (1 - b2) * g * g
            r = (m[i] / (1 - b1 ** t)) / (np.sqrt(v[i] / (1 - b2 ** t)) + eps)
            u = r + wd * mask[i] * ws[i]
            wn, un = np.linalg.norm(ws[i]), np.linalg.norm(u)
            trust = wn / un if wn > 0 and un > 0 else 1.0
            ws[i] = ws[i] - lr * trust * u
    return ws


def ref_amsgrad(w0, grads, lr, b1=0.9, b2=0.999, eps=1e-8):
    ws = [w.copy() for w in w0]
    m = [np.zeros_like(w) for w in ws]
    v = [np.zeros_like(w) for w in ws]
    vh = [np.zeros_like(w) for w in ws]
    for t, gs in enumerate(grads, start=1):
        lr_t = lr * np.sqrt(1 - b2 ** t) / (1 - b1 ** t)
        for i, g in enumerate(gs):
            g = g.astype(np.float64)
            m[i] = b1 * m[i] + (1 - b1) * g
            v[i] = b2 * v[i] + (1 - b2) * g * g
            vh[i] = np.maximum(vh[i], v[i])
            ws[i] = ws[i] - lr_t * m[i] / (np.sqrt(vh[i]) + eps)
    return ws, vh


# -- RMSProp ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kw", [dict(), dict(momentum=0.9, decay=0.8), dict(centered=True, momentum=0.5, epsilon=1e-6),
                                dict(weight_decay=0.1, loss_scale=8.0)])
def test_rmsprop_matches_reference(kw):
    params = make_params()
    w0, grads = w0_of(params), grad_sequence(params)
    scale = kw.get("loss_scale", 1.0)
    opt = nn.RMSProp(params, learning_rate=0.01, **kw)
    got = run(opt, params, [[g * np.float32(scale) for g in gs] for gs in grads])
    ref_kw = {k: v for k, v in kw.items() if k != "loss_scale"}
    if "epsilon" in ref_kw:
        ref_kw["eps"] = ref_kw.pop("epsilon")
    if "weight_decay" in ref_kw:
        ref_kw["wd"] = ref_kw.pop("weight_decay")
    ws, ms_, mg, mom = ref_rmsprop(w0, grads, 0.01, **ref_kw)
    check(got, ws)
    check([a.asnumpy() for a in opt.ms], ms_)
    check([a.asnumpy() for a in opt.moment], mom)
    if kw.get("centered"):
        check([a.asnumpy() for a in opt.mg], mg)


def test_rmsprop_defaults_and_state_names():
    opt = nn.RMSProp(make_params())
    assert (opt.decay, opt.momentum, opt.epsilon, opt.centered) == (0.9, 0.0, 1e-10, False)
    assert float(opt.get_lr().asnumpy()) == pytest.approx(0.1)
    names = list(opt.parameters_dict())
    assert "mean_square.fc.weight" in names and "moment.ln.beta" in names
    assert not any(n.startswith("mean_grad.") for n in names)
    assert np.all(opt.ms[0].asnumpy() == 1.0)          # mean_square starts at one
    centered = nn.RMSProp(make_params(), centered=True)
    assert "mean_grad.fc.weight" in centered.parameters_dict()


# -- Adagrad ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kw", [dict(), dict(accum=0.5), dict(update_slots=False), dict(weight_decay=0.2)])
def test_adagrad_matches_reference(kw):
    params = make_params()
    w0, grads = w0_of(params), grad_sequence(params)
    opt = nn.Adagrad(params, learning_rate=0.1, **kw)
    got = run(opt, params, grads)
    ref_kw = dict(kw)
    if "weight_decay" in ref_kw:
        ref_kw["wd"] = ref_kw.pop("weight_decay")
    ws, acc = ref_adagrad(w0, grads, 0.1, **ref_kw)
    check(got, ws)
    check([a.asnumpy() for a in opt.accum], acc)


def test_adagrad_matches_torch():
    torch = pytest.importorskip("torch")
    params = make_params()
    w0, grads = w0_of(params), grad_sequence(params)
    got = run(nn.Adagrad(params, accum=0.1, learning_rate=0.05), params, grads)
    tp = [torch.tensor(w, requires_grad=True) for w in w0]
    opt = torch.optim.Adagrad(tp, lr=0.05, initial_accumulator_value=0.1, eps=0.0)
    for gs in grads:
        for p, g in zip(tp, gs):
            p.grad = torch.tensor(g, dtype=torch.float64)
        opt.step()
    check(got, [p.detach().numpy() for p in tp])


def test_adagrad_defaults_and_state():
    opt = nn.Adagrad(make_params())
    assert float(opt.get_lr().asnumpy()) == pytest.approx(0.001)
    assert [p.name for p in opt.accum] == ["accum.fc.weight", "accum.ln.gamma", "accum.ln.beta"]
    np.testing.assert_allclose(opt.accum[0].asnumpy(), 0.1)


# -- Lamb ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kw", [dict(), dict(weight_decay=0.1), dict(beta1=0.8, beta2=0.99, eps=1e-4)])
def test_lamb_matches_reference(kw):
    params = make_params()
    w0, grads = w0_of(params), grad_sequence(params)
    opt = nn.Lamb(params, learning_rate=0.02, **kw)
    got = run(opt, params, grads)
    ref_kw = {("wd" if k == "weight_decay" else "b1" if k == "beta1" else "b2" if k == "beta2" else k): v
              for k, v in kw.items()}
    check(got, ref_lamb(w0, grads, 0.02, **ref_kw))
    assert [p.name for p in opt.moments1][0] == "lamb_m.fc.weight"
    assert [p.name for p in opt.moments2][0] == "lamb_v.fc.weight"
    assert int(opt.global_step.asnumpy()[0]) == STEPS


def test_lamb_trust_ratio_is_one_for_zero_weights():
    # ||w|| = 0: the step is plain lr * r (MindSpore's "1 when a norm is 0")
    p = ms.Parameter(np.zeros((3,), np.float32), name="w")
    g = np.array([1.0, -2.0, 0.5], np.float32)
    nn.Lamb([p], learning_rate=0.1)((ms.Tensor(g),))
    m, v = 0.1 * g.astype(np.float64), 0.001 * g.astype(np.float64) ** 2
    r = (m / 0.1) / (np.sqrt(v / 0.001) + 1e-6)
    np.testing.assert_allclose(p.asnumpy(), -0.1 * r, rtol=1e-5)


def test_lamb_groups_decay_every_member():
    params = make_params()
    w0, grads = w0_of(params), grad_sequence(params)
    got = run(nn.Lamb([{"params": params, "weight_decay": 0.05}], learning_rate=0.01), params, grads)
    check(got, ref_lamb(w0, grads, 0.01, wd=0.05, mask=[1.0, 1.0, 1.0]))


# -- Adam: amsgrad, kwargs, beta powers ---------------------------------------------------------------

def test_adam_amsgrad_matches_reference_and_torch():
    params = make_params()
    w0, grads = w0_of(params), grad_sequence(params)
    opt = nn.Adam(params, learning_rate=0.01, beta2=0.5, use_amsgrad=True)
    got = run(opt, params, grads)
    ws, vh = ref_amsgrad(w0, grads, 0.01, b2=0.5)
    check(got, ws)
    check([a.asnumpy() for a in opt.vhat], vh)
    assert [p.name for p in opt.vhat] == ["vhat.fc.weight", "vhat.ln.gamma", "vhat.ln.beta"]
    torch = pytest.importorskip("torch")
    tp = [torch.tensor(w, requires_grad=True) for w in w0]
    topt = torch.optim.Adam(tp, lr=0.01, betas=(0.9, 0.5), amsgrad=True)
    for gs in grads:
        for p, g in zip(tp, gs):
            p.grad = torch.tensor(g, dtype=torch.float64)
        topt.step()
    check(got, [p.detach().numpy() for p in tp], rtol=1e-4, atol=1e-5)   # (eps sits elsewhere in torch)


def test_adam_beta_powers_are_scalars_running_in_float32():
    opt = nn.Adam(make_params(), beta1=0.9, beta2=0.999)
    assert opt.beta1_power.shape == () and opt.beta2_power.shape == ()
    params = opt.parameters
    run(opt, params, grad_sequence(params, steps=3))
    want1 = np.float32(1.0)
    for _ in range(3):
        want1 = np.float32(want1 * np.float32(0.9))
    assert opt.beta1_power.asnumpy() == want1


def test_adam_keyword_arguments():
    # with dense gradients, LazyAdam and offloaded Adam are Adam
    grads = grad_sequence(make_params())
    ref = make_params()
    plain = run(nn.Adam(ref, learning_rate=0.01), ref, grads)
    for kw in (dict(use_lazy=True), dict(use_offload=True)):
        params = make_params()
        check(run(nn.Adam(params, learning_rate=0.01, **kw), params, grads), plain, rtol=0, atol=0)
    with pytest.raises(OpValueError, match="'Adam'.*use_lazy"):
        nn.Adam(make_params(), use_fast=True)
    with pytest.raises(OpValueError, match="'Adam'"):
        nn.Adam(make_params(), use_amsgrad=True, use_lazy=True)
    with pytest.raises(OpValueError, match="'Adam'"):
        nn.Adam(make_params(), use_lazy=True, use_offload=True)
    with pytest.raises(OpTypeError, match="'Adam'.*use_amsgrad"):
        nn.Adam(make_params(), use_amsgrad=1)


# -- weight-decay filter and groups -------------------------------------------------------------------

def test_sgd_filters_gamma_and_beta_from_weight_decay():
    params = make_params()
    w0 = w0_of(params)
    zero = [[np.zeros(p.shape, np.float32) for p in params]]
    opt = nn.SGD(params, learning_rate=0.5, weight_decay=0.1)
    assert opt.decay_flags == (True, False, False)
    got = run(opt, params, zero)
    np.testing.assert_allclose(got[0], w0[0] * (1 - 0.05), rtol=1e-6)       # decayed
    np.testing.assert_allclose(got[1], w0[1], rtol=0)                       # gamma: untouched
    np.testing.assert_allclose(got[2], w0[2], rtol=0)                       # beta: untouched
    # in a group, weight_decay applies to every member, gamma and beta included
    params = make_params()
    opt = nn.SGD([{"params": params, "weight_decay": 0.1}], learning_rate=0.5)
    assert opt.decay_flags == (True, True, True)
    got = run(opt, params, zero)
    check(got, [w * (1 - 0.05) for w in w0])


@pytest.mark.parametrize("make", [lambda p: nn.RMSProp(p, weight_decay=0.1), lambda p: nn.Adagrad(p, weight_decay=0.1),
                                  lambda p: nn.Lamb(p, 0.1, weight_decay=0.1)])
def test_every_optimizer_uses_the_name_filter(make):
    assert make(make_params()).decay_flags == (True, False, False)


def test_group_learning_rates_for_new_optimizers():
    params = make_params()
    w0, grads = w0_of(params), grad_sequence(params)
    opt = nn.RMSProp([{"params": params[:1], "lr": 0.05}, {"params": params[1:]}], learning_rate=0.01)
    got = run(opt, params, grads)
    a = ref_rmsprop(w0, grads, 0.05)[0]
    b = ref_rmsprop(w0, grads, 0.01)[0]
    check(got, [a[0], b[1], b[2]])
    lrs = opt.get_lr()
    assert isinstance(lrs, tuple) and [round(float(x.asnumpy()), 6) for x in lrs] == [0.05, 0.01, 0.01]


# -- argument checks (MindSpore wants Python floats for these hyper-parameters) -----------------------

@pytest.mark.parametrize("make, err, who", [
    (lambda p: nn.RMSProp(p, epsilon=0.0), OpValueError, "RMSProp"),
    (lambda p: nn.RMSProp(p, decay=-0.1), OpValueError, "RMSProp"),
    (lambda p: nn.RMSProp(p, momentum=1), OpTypeError, "RMSProp"),
    (lambda p: nn.RMSProp(p, centered=1), OpTypeError, "RMSProp"),
    (lambda p: nn.Adagrad(p, accum=-1.0), OpValueError, "Adagrad"),
    (lambda p: nn.Adagrad(p, accum=1), OpTypeError, "Adagrad"),
    (lambda p: nn.Adagrad(p, update_slots="yes"), OpTypeError, "Adagrad"),
    (lambda p: nn.Lamb(p, 0.1, beta1=1.0), OpValueError, "Lamb"),
    (lambda p: nn.Lamb(p, 0.1, eps=0), OpTypeError, "Lamb"),
    (lambda p: nn.Momentum(p, 0.1, 1), OpTypeError, "Momentum"),
    (lambda p: nn.Adam(p, beta1=1), OpTypeError, "Adam"),
])
def test_bad_hyper_parameters(make, err, who):
    with pytest.raises(err, match=f"'{who}'") as info:
        make(make_params())
    assert isinstance(info.value, MinisporeError)


def test_new_optimizers_check_gradients():
    opt = nn.RMSProp(make_params())
    with pytest.raises(OpValueError, match="'RMSProp'"):
        opt((ms.Tensor(np.zeros((3, 4), np.float32)),))
    with pytest.raises(OpTypeError, match="'Adagrad'"):
        nn.Adagrad(make_params())(ms.Tensor(np.zeros((3, 4), np.float32)))


def test_optimizer_state_survives_a_checkpoint(tmp_path):
    params = make_params()
    grads = grad_sequence(params)
    opt = nn.RMSProp(params, learning_rate=0.01, centered=True, momentum=0.5)
    run(opt, params, grads[:2])
    path = str(tmp_path / "opt.ckpt")
    ms.save_checkpoint(opt, path)
    fresh_params = make_params(seed=5)
    fresh = nn.RMSProp(fresh_params, learning_rate=0.01, centered=True, momentum=0.5)
    not_loaded, _ = ms.load_param_into_net(fresh, ms.load_checkpoint(path))
    assert not not_loaded
    run(opt, params, grads[2:])
    run(fresh, fresh_params, grads[2:])
    check([p.asnumpy() for p in fresh_params], [p.asnumpy() for p in params], rtol=1e-6, atol=1e-7)
