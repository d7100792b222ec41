"""The fast optimizer kernels (minispore/nn/optim/_kernels.py) equal their plain reference forms
bit for bit, over several steps, in float32 and float64, on arrays spanning several blocks; and
the optimizers built on them equal the same optimizers run on the reference forms (weight decay,
amsgrad, nesterov, maximize, loss scale, half-precision weights, the loss-scale overflow skip, jit).
Agreement with independent float64 formulas and with torch.optim is checked in test_optim*.py."""
import numpy as np
import pytest

import minispore as ms
from minispore import nn
from minispore.mint import optim as mint_optim
from minispore.nn.optim import _kernels as K
from minispore.nn.optim import _native

STEPS = 4
SIZES = (2 * K.BLOCK + 37, 5, 0)    # several blocks and a short tail; tiny; empty


@pytest.fixture(params=["c", "numpy"])
def path(request, monkeypatch):
    """Each fast kernel has two implementations with the same numbers: the C loop (`_native`, when
    a compiler exists) and the blockwise NumPy loop. "numpy" forces the second."""
    if request.param == "numpy":
        monkeypatch.setitem(_native._state, "tried", True)
        monkeypatch.setitem(_native._state, "mod", None)
    elif _native.lib() is None:
        pytest.skip("no C compiler: the C kernels do not build")
    return request.param


def test_c_kernels_build_where_a_compiler_exists():
    import os
    from minispore.graph.codegen import build as B
    if B.find_compiler() is None or "0" in (os.environ.get("MINISPORE_NATIVE_OPTIM"),
                                            os.environ.get("MINISPORE_NATIVE_KERNELS")):
        pytest.skip("no C compiler, or the C kernels are switched off")
    assert _native.lib() is not None
    assert K._c_kernel("adam", *[np.zeros(3, np.float32)] * 4)[0] is not None
    assert K._c_kernel("adam", np.zeros(3, np.float16))[0] is None                     # no half kernels
    assert K._c_kernel("adam", np.zeros(3, np.float32), np.zeros(6, np.float32)[::2])[0] is None  # strided


def _arrays(n, dtype, k, seed):
    r = np.random.default_rng(seed)
    return [r.standard_normal(n).astype(dtype) for _ in range(k)]


def _run_pair(fast, ref, n, dtype, n_state, kw_of_step, seed=0, nonneg_state=()):
    """Run `fast` and `ref` side by side for STEPS updates from the same start; every array must be
    bit-identical after every step."""
    w0, *state0 = _arrays(n, dtype, 1 + n_state, seed)
    for i in nonneg_state:
        state0[i] = np.abs(state0[i])              # second moments are >= 0
    a = [w0.copy()] + [s.copy() for s in state0]
    b = [w0.copy()] + [s.copy() for s in state0]
    r = np.random.default_rng(seed + 1)
    for t in range(1, STEPS + 1):
        g = (r.standard_normal(n) * 0.1).astype(dtype)
        g_copy = g.copy()
        fast(*a, g, **kw_of_step(t))
        ref(*b, g, **kw_of_step(t))
        np.testing.assert_array_equal(g, g_copy)   # the gradient is only read
        for x, y in zip(a, b):
            assert x.dtype == dtype
            np.testing.assert_array_equal(x, y)
    assert n == 0 or not np.array_equal(a[0], w0)  # the weights did move


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("wd,nesterov,amsgrad", [(0.0, False, False), (0.03, False, False),
                                                 (0.0, True, False), (0.02, False, True), (0.01, True, True)])
def test_adam_kernel_equals_reference(path, dtype, n, wd, nesterov, amsgrad):
    def kw(t):
        return dict(b1=0.9, b2=0.999, eps=1e-8, step_size=1e-3 * np.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t),
                    wd=wd, nesterov=nesterov)

    def call(kernel):
        def f(w, m, v, vh, g, **k):
            kernel(w, m, v, g, vhat=vh if amsgrad else None, **k)
        return f
    _run_pair(call(K.adam), call(K.adam_reference), n, dtype, 3, kw, nonneg_state=(1, 2))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("wd", [0.0, 0.1])
def test_adam_weight_decay_kernel_equals_reference(path, dtype, n, wd):
    def kw(t):
        return dict(b1=0.9, b2=0.99, eps=1e-6, lr=1e-3 * t, wd=wd)
    _run_pair(K.adam_weight_decay, K.adam_weight_decay_reference, n, dtype, 2, kw, nonneg_state=(1,))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("wd,decoupled,maximize,amsgrad", [(0.01, True, False, False), (0.0, True, False, False),
                                                           (0.05, False, False, False), (0.01, True, True, True),
                                                           (0.02, False, True, True)])
def test_torch_adam_kernel_equals_reference(path, dtype, n, wd, decoupled, maximize, amsgrad):
    def kw(t):
        return dict(b1=0.9, b2=0.99, eps=1e-8, lr=2e-3, t=t, wd=wd, decoupled=decoupled, maximize=maximize)

    def call(kernel):
        def f(w, m, v, vm, g, **k):
            kernel(w, m, v, g, vmax=vm if amsgrad else None, **k)
        return f
    _run_pair(call(K.torch_adam), call(K.torch_adam_reference), n, dtype, 3, kw, nonneg_state=(1, 2))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("wd,nesterov", [(0.0, False), (0.01, False), (0.02, True)])
def test_momentum_kernel_equals_reference(path, dtype, n, wd, nesterov):
    def kw(t):
        return dict(lr=0.05, momentum=0.9, wd=wd, nesterov=nesterov)
    _run_pair(K.momentum, K.momentum_reference, n, dtype, 1, kw)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("mom,damp,wd,nesterov,maximize", [
    (0.0, 0.0, 0.0, False, False), (0.0, 0.0, 0.01, False, True), (0.9, 0.0, 0.0, False, False),
    (0.7, 0.2, 0.03, False, False), (0.9, 0.0, 0.01, True, True)])
def test_sgd_kernel_equals_reference(path, dtype, n, mom, damp, wd, nesterov, maximize):
    def kw(t):
        return dict(lr=0.1, momentum=mom, dampening=damp, wd=wd, nesterov=nesterov, first=t == 1, maximize=maximize)
    _run_pair(K.sgd, K.sgd_reference, n, dtype, 1, kw)


# -- the optimizers: the fast kernels against the same optimizer running the reference forms -----

RULES = ("adam", "adam_weight_decay", "torch_adam", "momentum", "sgd")


def _use_reference(monkeypatch):
    for name in RULES:
        monkeypatch.setattr(K, name, getattr(K, name + "_reference"))


def _params(dtype=np.float32, seed=0):
    r = np.random.default_rng(seed)
    big = 2 * K.BLOCK // 64 + 3            # (big, 64): more than two blocks
    return [ms.Parameter(r.normal(size=(big, 64)).astype(dtype), name="fc.weight"),
            ms.Parameter(r.normal(size=(64,)).astype(dtype), name="fc.bias"),
            ms.Parameter((r.normal(size=(64,)) + 1).astype(dtype), name="ln.gamma")]


def _train(make_opt, dtype=np.float32, steps=STEPS):
    params = _params(dtype)
    opt = make_opt(params)
    r = np.random.default_rng(7)
    versions = [p._version for p in params]
    for _ in range(steps):
        opt(tuple(ms.Tensor((r.normal(size=p.shape) * 0.1).astype(dtype)) for p in params))
    assert all(p._version > v for p, v in zip(params, versions))      # a stale tape cannot use old values
    return [p.asnumpy() for p in params] + [s.asnumpy() for s in opt.get_parameters() if s.name not in
                                            {p.name for p in params}]


OPTIMIZERS = {
    "adam": lambda ps: nn.Adam(ps, learning_rate=1e-2),
    "adam_wd_nesterov": lambda ps: nn.Adam(ps, learning_rate=1e-2, weight_decay=0.05, use_nesterov=True),
    "adam_amsgrad_loss_scale": lambda ps: nn.Adam(ps, learning_rate=1e-2, use_amsgrad=True, loss_scale=128.0),
    "adam_groups": lambda ps: nn.Adam([{"params": ps[:1], "weight_decay": 0.1, "lr": 0.02}, {"params": ps[1:]}],
                                      learning_rate=1e-2),
    "adam_weight_decay": lambda ps: nn.AdamWeightDecay(ps, learning_rate=1e-2, beta2=0.99, weight_decay=0.1),
    "momentum": lambda ps: nn.Momentum(ps, 0.05, 0.9, weight_decay=0.01),
    "momentum_nesterov_loss_scale": lambda ps: nn.Momentum(ps, 0.05, 0.9, use_nesterov=True, loss_scale=8.0),
    "sgd": lambda ps: nn.SGD(ps, learning_rate=0.1, momentum=0.7, dampening=0.2, weight_decay=0.03),
    "sgd_nesterov": lambda ps: nn.SGD(ps, learning_rate=0.1, momentum=0.9, nesterov=True),
    "mint_adamw": lambda ps: mint_optim.AdamW(ps, lr=1e-2, betas=(0.9, 0.99), weight_decay=0.1),
    "mint_adamw_amsgrad_max": lambda ps: mint_optim.AdamW(ps, lr=1e-2, amsgrad=True, maximize=True),
    "mint_adam_l2": lambda ps: mint_optim.Adam([{"params": ps[:2], "weight_decay": 0.02}, {"params": ps[2:]}],
                                               lr=1e-2),
    "mint_sgd": lambda ps: mint_optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.01, nesterov=True),
    "mint_sgd_plain_max": lambda ps: mint_optim.SGD(ps, lr=0.1, maximize=True),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_optimizer_fast_path_equals_reference(monkeypatch, path, name, dtype):
    fast = _train(OPTIMIZERS[name], dtype)
    _use_reference(monkeypatch)
    ref = _train(OPTIMIZERS[name], dtype)
    assert len(fast) == len(ref)
    for a, b in zip(fast, ref):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)


def test_float32_weights_are_updated_in_float32():
    """nn.Adam once computed its step in float64 (a NumPy float64 step size promoted the float32
    arrays). The rule is float32 throughout, as MindSpore's kernel: one step equals a float32
    evaluation of the formula and differs from the float64 one by float32 rounding only."""
    w0 = np.linspace(-1, 1, 4096, dtype=np.float32)
    g = np.cos(np.arange(4096, dtype=np.float32)).astype(np.float32)
    p = ms.Parameter(w0.copy(), name="w")
    nn.Adam([p], learning_rate=0.1)((ms.Tensor(g),))
    f = np.float32
    m = f(0.1) * g
    v = f(0.001) * (g * g)
    b2p, b1p = f(1) * f(0.999), f(1) * f(0.9)
    step = f(0.1 * np.sqrt(1.0 - float(b2p)) / (1.0 - float(b1p)))
    np.testing.assert_array_equal(p.asnumpy(), w0 - step * m / (np.sqrt(v) + f(1e-8)))
    g64 = g.astype(np.float64)
    w64 = w0.astype(np.float64) - 0.1 * np.sqrt(1 - 0.999) / 0.1 * (0.1 * g64) / (np.sqrt(0.001 * g64 ** 2) + 1e-8)
    np.testing.assert_allclose(p.asnumpy(), w64, rtol=0, atol=2e-6)


def test_half_precision_weights_use_float32_then_round_once(monkeypatch):
    from minispore.common import dtype as mstype

    def run():
        p = ms.Parameter(ms.Tensor(np.linspace(-1, 1, 300, dtype=np.float32)).astype(mstype.float16), name="w")
        opt = nn.Adam([p], learning_rate=1e-2)
        for k in range(3):
            opt((ms.Tensor(np.full(300, 0.1 * (k + 1), np.float16)),))
        assert p.dtype == mstype.float16 and opt.moment1[0].dtype == mstype.float16
        return p.asnumpy(), opt.moment1[0].asnumpy(), opt.moment2[0].asnumpy()
    fast = run()
    _use_reference(monkeypatch)
    for a, b in zip(fast, run()):
        np.testing.assert_array_equal(a, b)


def test_non_contiguous_parameter_storage_is_updated_in_place():
    """A parameter whose storage is a transposed (non-C-contiguous) array: the kernels work on a
    contiguous copy and the result lands in the original storage (views of it see the update)."""
    base = np.arange(12, dtype=np.float32).reshape(3, 4)
    p = ms.Parameter(np.zeros((4, 3), np.float32), name="w")
    p._data = base.T
    q = ms.Parameter(base.T.copy(), name="w2")
    g = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)
    nn.Momentum([p], 0.1, 0.9)((ms.Tensor(g),))
    nn.Momentum([q], 0.1, 0.9)((ms.Tensor(g),))
    assert p._data.base is base or p._data is base.T or np.shares_memory(p._data, base)
    np.testing.assert_array_equal(base.T, q.asnumpy())
    np.testing.assert_array_equal(base.T, np.arange(12, dtype=np.float32).reshape(3, 4).T - np.float32(0.1) * g)


def test_loss_scale_overflow_skips_the_update_then_continues_exactly():
    """TrainOneStepWithLossScaleCell skips the optimizer on an overflowed step: weights and every
    state buffer (moments, beta powers, global_step) stay as they were, and the next good step is
    the same as on an optimizer that never saw the bad batch."""
    def make():
        ms.set_seed(0)
        net = nn.Dense(4, 3)
        loss = nn.WithLossCell(net, nn.MSELoss())
        opt = nn.Adam(net.trainable_params(), learning_rate=1e-2)
        manager = nn.DynamicLossScaleUpdateCell(loss_scale_value=2.0 ** 10, scale_factor=2, scale_window=100)
        return net, opt, nn.TrainOneStepWithLossScaleCell(loss, opt, scale_sense=manager)
    x = ms.Tensor(np.ones((2, 4), np.float32))
    y = ms.Tensor(np.zeros((2, 3), np.float32))
    bad = ms.Tensor(np.full((2, 4), np.inf, np.float32))
    net_a, opt_a, step_a = make()
    net_b, opt_b, step_b = make()
    before = {p.name: p.asnumpy().copy() for p in opt_a.get_parameters()}
    _, overflow, _ = step_a(bad, y)
    assert bool(overflow.asnumpy() if hasattr(overflow, "asnumpy") else overflow)
    for p in opt_a.get_parameters():
        np.testing.assert_array_equal(p.asnumpy(), before[p.name])
    for _ in range(2):
        step_a(x, y)
        step_b(x, y)
    for pa, pb in zip(opt_a.get_parameters(), opt_b.get_parameters()):
        np.testing.assert_array_equal(pa.asnumpy(), pb.asnumpy())


@pytest.mark.parametrize("make_opt", [lambda ps: nn.Adam(ps, learning_rate=1e-2),
                                      lambda ps: mint_optim.AdamW(ps, lr=1e-2)], ids=["nn.Adam", "mint.AdamW"])
def test_jitted_step_with_fast_optimizer_equals_pynative(make_opt):
    """The optimizer is a host call of the jitted step; the weights it updates in place are the
    graph's parameters at the next run."""
    def build():
        ms.set_seed(0)
        net = nn.Dense(8, 4)
        opt = make_opt(net.trainable_params())
        loss_fn = nn.MSELoss()
        grad_fn = ms.value_and_grad(lambda x, y: loss_fn(net(x), y), None, opt.parameters)

        def step(x, y):
            loss, grads = grad_fn(x, y)
            opt(grads)
            return loss
        return net, step
    r = np.random.default_rng(0)
    x = ms.Tensor(r.normal(size=(5, 8)).astype(np.float32))
    y = ms.Tensor(r.normal(size=(5, 4)).astype(np.float32))
    net_e, step_e = build()
    net_g, step_g = build()
    jstep = ms.jit(step_g, capture_mode="trace")
    for _ in range(3):
        np.testing.assert_array_equal(jstep(x, y).asnumpy(), step_e(x, y).asnumpy())
    for pe, pg in zip(net_e.trainable_params(), net_g.trainable_params()):
        np.testing.assert_array_equal(pg.asnumpy(), pe.asnumpy())
