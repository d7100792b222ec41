"""AdaMax, Adadelta, ASGD, Rprop, FTRL, ProximalAdagrad and the InverseDecay / NaturalExpDecay
schedules: several steps against float64 NumPy re-statements of the rules (and PyTorch's
Adadelta / Rprop, whose rules coincide), state names, and bad arguments."""
import math

import numpy as np
import pytest
import torch

import minispore as ms
from minispore import nn
from minispore.common.errors import MinisporeError, OpTypeError, OpValueError

W0 = np.array([[0.5, -0.3, 0.05], [0.2, -0.7, 1.1]])
GRADS = [np.array([[0.2, 0.4, -0.1], [-0.3, 0.05, 0.6]]) * s for s in (1.0, -0.5, 0.8, 1.2)]


def _run(make_opt, steps=4):
    p = ms.Parameter(ms.Tensor(W0.astype(np.float32)), name="w")
    opt = make_opt([p])
    for g in GRADS[:steps]:
        opt((ms.Tensor(g.astype(np.float32)),))
    return p.asnumpy(), opt


def _torch(make_opt, steps=4):
    p = torch.nn.Parameter(torch.tensor(W0))
    opt = make_opt([p])
    for g in GRADS[:steps]:
        p.grad = torch.tensor(g)
        opt.step()
    return p.detach().numpy()


def test_adamax_matches_reference_and_state_names():
    lr, b1, b2, eps = 0.01, 0.9, 0.999, 1e-8
    w, m, v = W0.copy(), np.zeros_like(W0), np.zeros_like(W0)
    for t, g in enumerate(GRADS, 1):
        m = b1 * m + (1 - b1) * g
        v = np.maximum(b2 * v, np.abs(g))
        w = w - lr / (1 - b1 ** t) * m / (v + eps)
    got, opt = _run(lambda p: nn.AdaMax(p, learning_rate=lr))
    np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-7)
    names = [p.name for p in opt.get_parameters()]
    assert {"beta1_power", "moment1.w", "moment2.w"} <= set(names)


def test_adadelta_matches_torch():
    got, _ = _run(lambda p: nn.Adadelta(p, learning_rate=0.5, rho=0.8, epsilon=1e-4))
    want = _torch(lambda p: torch.optim.Adadelta(p, lr=0.5, rho=0.8, eps=1e-4))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)


def test_rprop_matches_torch():
    got, opt = _run(lambda p: nn.Rprop(p, learning_rate=0.05, etas=(0.3, 1.5), step_sizes=(0.02, 0.06)))
    want = _torch(lambda p: torch.optim.Rprop(p, lr=0.05, etas=(0.3, 1.5), step_sizes=(0.02, 0.06)))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)
    assert {"prev.w", "step_size.w"} <= {p.name for p in opt.get_parameters()}


def test_asgd_matches_reference():
    lr, lambd, alpha, t0 = 0.05, 0.01, 0.5, 2.0
    w, ax, eta, mu = W0.copy(), np.zeros_like(W0), lr, 1.0
    for t, g in enumerate(GRADS, 1):
        w = w * (1 - lambd * eta) - eta * g
        ax = ax + (w - ax) * mu if mu != 1 else w.copy()
        eta = lr / (1 + lambd * lr * t) ** alpha
        mu = 1 / max(1, t - t0)
    got, opt = _run(lambda p: nn.ASGD(p, learning_rate=lr, lambd=lambd, alpha=alpha, t0=t0))
    np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-7)
    state = {p.name: p.asnumpy() for p in opt.get_parameters()}
    np.testing.assert_allclose(state["ax_.w"], ax, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(state["eta_w"], eta, rtol=1e-5)
    np.testing.assert_allclose(state["mu_w"], mu, rtol=1e-6)


@pytest.mark.parametrize("l1, l2, lr_power", [(0.0, 0.0, -0.5), (0.05, 0.1, -0.3)])
def test_ftrl_matches_reference(l1, l2, lr_power):
    lr, p = 0.2, -lr_power
    w, acc, lin = W0.copy(), np.full_like(W0, 0.1), np.zeros_like(W0)
    for g in GRADS:
        new = acc + g * g
        lin = lin + g - (new ** p - acc ** p) / lr * w
        w = np.where(np.abs(lin) > l1, (np.sign(lin) * l1 - lin) / (new ** p / lr + 2 * l2), 0.0)
        acc = new
    got, opt = _run(lambda prm: nn.FTRL(prm, learning_rate=lr, lr_power=lr_power, l1=l1, l2=l2))
    np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-7)
    assert {"moments.w", "linear.w"} <= {q.name for q in opt.get_parameters()}


def test_ftrl_decays_every_parameter():
    gamma = ms.Parameter(ms.Tensor(np.ones(2, np.float32)), name="norm.gamma")
    opt = nn.FTRL([gamma], learning_rate=0.1, weight_decay=0.5)
    assert opt.decay_flags == (True,)


def test_proximal_adagrad_matches_reference():
    lr, l1, l2 = 0.3, 0.05, 0.2
    w, acc = W0.copy(), np.full_like(W0, 0.1)
    for g in GRADS:
        acc = acc + g * g
        lr_t = lr / np.sqrt(acc)
        prox = w - lr_t * g
        w = np.sign(prox) * np.maximum(np.abs(prox) - lr_t * l1, 0) / (1 + lr_t * l2)
    got, _ = _run(lambda p: nn.ProximalAdagrad(p, learning_rate=lr, l1=l1, l2=l2))
    np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-7)


def test_weight_decay_spares_gamma_beta_in_adamax():
    beta = ms.Parameter(ms.Tensor(np.ones(2, np.float32)), name="norm.beta")
    opt = nn.AdaMax([beta], learning_rate=0.1, weight_decay=0.5)
    opt((ms.Tensor(np.zeros(2, np.float32)),))
    np.testing.assert_array_equal(beta.asnumpy(), [1.0, 1.0])


def test_schedules_match_formulas():
    for step in (0, 3, 7):
        s = ms.Tensor(np.array(step, np.int32))
        assert math.isclose(float(nn.InverseDecayLR(0.1, 0.9, 4)(s).asnumpy()), 0.1 / (1 + 0.9 * step / 4),
                            rel_tol=1e-6)
        assert math.isclose(float(nn.InverseDecayLR(0.1, 0.9, 4, True)(s).asnumpy()),
                            0.1 / (1 + 0.9 * (step // 4)), rel_tol=1e-6)
        assert math.isclose(float(nn.NaturalExpDecayLR(0.1, 0.3, 4)(s).asnumpy()), 0.1 * math.exp(-0.3 * step),
                            rel_tol=1e-6)
        assert math.isclose(float(nn.NaturalExpDecayLR(0.1, 0.3, 4, True)(s).asnumpy()),
                            0.1 * math.exp(-0.3 * (step // 4) * 4), rel_tol=1e-6)
    np.testing.assert_allclose(nn.inverse_decay_lr(0.1, 0.5, 6, 2, 1), [0.1, 0.1, 0.1 / 1.5, 0.1 / 1.5, 0.05, 0.05])
    np.testing.assert_allclose(nn.natural_exp_decay_lr(0.1, 0.5, 4, 1, 2, is_stair=True),
                               [0.1, 0.1, 0.1 * math.exp(-1.0), 0.1 * math.exp(-1.0)])


@pytest.mark.parametrize("make", [
    lambda p: nn.AdaMax(p, beta1=1.0), lambda p: nn.AdaMax(p, eps=0.0), lambda p: nn.Adadelta(p, rho=1.5),
    lambda p: nn.ASGD(p, lambd=1), lambda p: nn.Rprop(p, etas=(0.5, 0.9)), lambda p: nn.Rprop(p, etas=[0.5, 1.2]),
    lambda p: nn.Rprop(p, step_sizes=(1.0, 0.5)), lambda p: nn.FTRL(p, lr_power=0.5),
    lambda p: nn.FTRL(p, learning_rate=[0.1, 0.2]), lambda p: nn.ProximalAdagrad(p, l1=-0.1),
    lambda p: nn.InverseDecayLR(0.1, 0.9, 0), lambda p: nn.natural_exp_decay_lr(0.1, 0.5, 0, 1, 1),
])
def test_bad_arguments(make):
    p = [ms.Parameter(ms.Tensor(np.zeros(2, np.float32)), name="w")]
    with pytest.raises(MinisporeError) as e:
        make(p)
    assert isinstance(e.value, (OpValueError, OpTypeError)) and "For '" in str(e.value)
