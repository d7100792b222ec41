"""The nn ops against PyTorch in float64: forward values, first gradients, and gradients of
gradients (which exercise the hand-written backward rules of the fused backward primitives)."""
import itertools

import numpy as np
import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

import minispore as ms  # noqa: E402
from minispore import Tensor, ops  # noqa: E402

pytestmark = pytest.mark.torch


# -------------------------------------------------------------------------------------------------
# helpers: run f on both sides with float64 inputs; compare outputs, VJPs and second-order VJPs
def _t(a, grad=False):
    t = torch.tensor(a)
    return t.requires_grad_(True) if grad else t


def _as_tuple(g):
    return g if isinstance(g, tuple) else (g,)      # (one grad_position's gradient comes back bare)


def _close(got, want, rtol=1e-9, atol=1e-10, what=""):
    np.testing.assert_allclose(np.asarray(got, dtype=np.float64), want.detach().numpy(), rtol=rtol, atol=atol,
                               err_msg=what)


def compare(ms_fn, torch_fn, arrays, wrt, seed=0, second_order=False, rtol=1e-9, atol=1e-10):
    """ms_fn / torch_fn take the same positional arrays (as Tensors). Checks the output, the VJP
    with a random cotangent for the inputs in `wrt`, and optionally the gradient of
    <VJP, random direction> (grad-of-grad)."""
    rng = np.random.default_rng(seed)
    out_ms = ms_fn(*[Tensor(a) for a in arrays])
    tin = [_t(a, grad=i in wrt and a.dtype.kind == "f") for i, a in enumerate(arrays)]
    out_t = torch_fn(*tin)
    _close(out_ms.asnumpy(), out_t, rtol, atol, "forward")
    cot = rng.standard_normal(out_t.shape)
    if np.isnan(out_ms.asnumpy()).any():
        return                                             # nan loss: the values above are the check

    def ms_scalar(*ts):
        return (ms_fn(*ts) * Tensor(cot)).sum()

    g_ms = _as_tuple(ms.grad(ms_scalar, grad_position=tuple(wrt))(*[Tensor(a) for a in arrays]))
    g_t = torch.autograd.grad((torch_fn(*tin) * _t(cot)).sum(), [tin[i] for i in wrt], create_graph=second_order)
    for i, (a, b) in enumerate(zip(g_ms, g_t)):
        _close(a.asnumpy(), b, rtol, atol, f"gradient of input {wrt[i]}")
    if not second_order:
        return
    dirs = [rng.standard_normal(arrays[i].shape) for i in wrt]

    def ms_inner(*ts):
        gs = _as_tuple(ms.grad(ms_scalar, grad_position=tuple(wrt))(*ts))
        total = None
        for g, d in zip(gs, dirs):
            term = (g * Tensor(d)).sum()
            total = term if total is None else total + term
        return total

    gg_ms = _as_tuple(ms.grad(ms_inner, grad_position=tuple(wrt))(*[Tensor(a) for a in arrays]))
    inner_t = sum((g * _t(d)).sum() for g, d in zip(g_t, dirs))
    gg_t = torch.autograd.grad(inner_t, [tin[i] for i in wrt], allow_unused=True)
    for i, (a, b) in enumerate(zip(gg_ms, gg_t)):
        b = torch.zeros(arrays[wrt[i]].shape, dtype=torch.float64) if b is None else b
        _close(a.asnumpy(), b, 1e-8, 1e-9, f"second-order gradient of input {wrt[i]}")


RNG = np.random.default_rng(2024)


def _rand(*shape, lo=-2.0, hi=2.0):
    return RNG.uniform(lo, hi, size=shape)


# -------------------------------------------------------------------------------------------------
# cross_entropy: every option combination, class-index and probability targets
SHAPES = [((6, 5), (6,)), ((5,), ()), ((3, 4, 2, 3), (3, 2, 3))]
INDEX_CASES = list(itertools.product(range(len(SHAPES)), [False, True], ["none", "mean", "sum"], [0.0, 0.25],
                                     ["default", "ignored rows", "ignore_index=1"]))


@pytest.mark.parametrize("shape_i,weighted,reduction,ls,ignore", INDEX_CASES)
def test_cross_entropy_class_indices(shape_i, weighted, reduction, ls, ignore):
    xs, ts = SHAPES[shape_i]
    n_classes = xs[1] if len(xs) > 1 else xs[0]
    x = _rand(*xs, lo=-3, hi=3)
    t = RNG.integers(0, n_classes, size=ts).astype(np.int64)
    ignore_index = -100
    if ignore == "ignored rows" and t.ndim:
        t.reshape(-1)[::3] = -100
    elif ignore == "ignore_index=1":
        ignore_index = 1
    w = RNG.uniform(0.3, 2.0, size=n_classes) if weighted else None
    arrays = [x, t] + ([w] if weighted else [])

    def ms_fn(x_, t_, w_=None):
        return ops.cross_entropy(x_, t_, w_, ignore_index, reduction, ls)

    def torch_fn(x_, t_, w_=None):
        return F.cross_entropy(x_, t_, weight=w_, ignore_index=ignore_index, reduction=reduction, label_smoothing=ls)

    compare(ms_fn, torch_fn, arrays, wrt=(0,), second_order=(shape_i == 0))


@pytest.mark.parametrize("shape_i,weighted,reduction,ls",
                         list(itertools.product(range(len(SHAPES)), [False, True], ["none", "mean", "sum"], [0.0, 0.3])))
def test_cross_entropy_probabilities(shape_i, weighted, reduction, ls):
    xs, _ = SHAPES[shape_i]
    cd = 1 if len(xs) > 1 else 0
    x = _rand(*xs, lo=-3, hi=3)
    e = np.exp(_rand(*xs))
    p = e / e.sum(axis=cd, keepdims=True)
    w = RNG.uniform(0.3, 2.0, size=xs[cd]) if weighted else None
    arrays = [x, p] + ([w] if weighted else [])

    def ms_fn(x_, p_, w_=None):
        return ops.cross_entropy(x_, p_, w_, reduction=reduction, label_smoothing=ls)

    def torch_fn(x_, p_, w_=None):
        return F.cross_entropy(x_, p_, weight=w_, reduction=reduction, label_smoothing=ls)

    compare(ms_fn, torch_fn, arrays, wrt=(0, 1), second_order=(shape_i != 1))


@pytest.mark.parametrize("weighted", [False, True])
def test_cross_entropy_all_ignored_mean_is_nan_like_torch(weighted):
    x = _rand(3, 4)
    t = np.full(3, -100, np.int64)
    w = np.ones(4) if weighted else None
    got = ops.cross_entropy(Tensor(x), Tensor(t), None if w is None else Tensor(w)).asnumpy()
    want = F.cross_entropy(_t(x), _t(t), weight=None if w is None else _t(w)).numpy()
    assert np.isnan(got) and np.isnan(want)
    got_sum = ops.cross_entropy(Tensor(x), Tensor(t), reduction="sum").asnumpy()
    assert got_sum == F.cross_entropy(_t(x), _t(t), reduction="sum").item() == 0.0


def test_cross_entropy_llm_shape():
    """The training case the fused kernel is for: 768 positions x 65 classes, float32 logits."""
    x = RNG.standard_normal((768, 65)).astype(np.float32) * 3
    t = RNG.integers(0, 65, size=768).astype(np.int64)
    loss, g = ms.value_and_grad(lambda a: ops.cross_entropy(a, Tensor(t)))(Tensor(x))
    xt = _t(x, grad=True)
    lt = F.cross_entropy(xt, _t(t))
    lt.backward()
    np.testing.assert_allclose(loss.asnumpy(), lt.item(), rtol=2e-6)
    np.testing.assert_allclose(g.asnumpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-8)


# -------------------------------------------------------------------------------------------------
# nll_loss
@pytest.mark.parametrize("weighted,reduction,ignore",
                         list(itertools.product([False, True], ["none", "mean", "sum"], [False, True])))
def test_nll_loss(weighted, reduction, ignore):
    x = np.log(RNG.dirichlet(np.ones(5), size=(4, 3)).transpose(0, 2, 1))        # (N, C, d) log-probabilities
    t = RNG.integers(0, 5, size=(4, 3)).astype(np.int64)
    if ignore:
        t[0, 1] = t[2, 2] = -100
    w = RNG.uniform(0.3, 2.0, size=5) if weighted else None
    arrays = [x, t] + ([w] if weighted else [])
    compare(lambda x_, t_, w_=None: ops.nll_loss(x_, t_, w_, reduction=reduction),
            lambda x_, t_, w_=None: F.nll_loss(x_, t_, weight=w_, reduction=reduction),
            arrays, wrt=(0,), second_order=True)


# -------------------------------------------------------------------------------------------------
# layer_norm, rms_norm, mse_loss, binary_cross_entropy_with_logits
@pytest.mark.parametrize("xs,ns,affine,eps", [
    ((4, 6), (6,), "both", 1e-5), ((2, 3, 4), (3, 4), "weight", 1e-3), ((5, 3), (3,), "none", 1e-5),
    ((3, 2, 5), (5,), "bias", 1e-2)])
def test_layer_norm(xs, ns, affine, eps):
    arrays = [_rand(*xs, lo=-1, hi=3)]
    if affine in ("both", "weight"):
        arrays.append(_rand(*ns))
    if affine in ("both", "bias"):
        arrays.append(_rand(*ns))

    def split(rest):
        if affine == "both":
            return rest
        if affine == "weight":
            return rest[0], None
        if affine == "bias":
            return None, rest[0]
        return None, None

    def ms_fn(x_, *rest):
        return ops.layer_norm(x_, ns, *split(rest), eps)

    def torch_fn(x_, *rest):
        w_, b_ = split(rest)
        if w_ is None and b_ is not None:      # torch's double backward needs a weight next to a bias
            w_ = torch.ones(ns, dtype=torch.float64)
        return F.layer_norm(x_, ns, w_, b_, eps)

    compare(ms_fn, torch_fn, arrays, wrt=tuple(range(len(arrays))), second_order=True)


@pytest.mark.parametrize("xs,gs", [((4, 6), (6,)), ((2, 3, 4), (3, 4))])
def test_rms_norm(xs, gs):
    compare(lambda x_, g_: ops.rms_norm(x_, g_, 1e-5)[0],
            lambda x_, g_: F.rms_norm(x_, gs, g_, 1e-5),
            [_rand(*xs), _rand(*gs)], wrt=(0, 1), second_order=True)


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_mse_loss(reduction):
    compare(lambda a, b: ops.mse_loss(a, b, reduction), lambda a, b: F.mse_loss(a, b, reduction=reduction),
            [_rand(3, 4), _rand(3, 4)], wrt=(0, 1), second_order=True)


@pytest.mark.parametrize("reduction,weighted,pos", list(itertools.product(["none", "mean", "sum"], [False, True],
                                                                         [False, True])))
def test_binary_cross_entropy_with_logits(reduction, weighted, pos):
    x = np.concatenate([_rand(3, 4, lo=-6, hi=6), np.array([[0.0, 25.0, -25.0, 0.5]])])
    y = RNG.uniform(0, 1, size=(4, 4))
    w = RNG.uniform(0.5, 2, size=(4, 4)) if weighted else None
    pw = RNG.uniform(0.5, 3, size=(4,)) if pos else None

    def ms_fn(x_, y_):
        return ops.binary_cross_entropy_with_logits(x_, y_, None if w is None else Tensor(w),
                                                    None if pw is None else Tensor(pw), reduction)

    def torch_fn(x_, y_):
        return F.binary_cross_entropy_with_logits(x_, y_, None if w is None else _t(w), reduction=reduction,
                                                  pos_weight=None if pw is None else _t(pw))

    compare(ms_fn, torch_fn, [x, y], wrt=(0, 1), second_order=True)


# -------------------------------------------------------------------------------------------------
# conv2d, max_pool2d, avg_pool2d
CONV_CASES = [
    # (x shape, w shape, minispore kwargs, torch kwargs, pre-padding (left, right, top, bottom) for torch)
    ((2, 3, 7, 7), (4, 3, 3, 3), {}, {}, None),
    ((2, 3, 7, 6), (4, 3, 3, 2), {"stride": 2}, {"stride": 2}, None),
    ((1, 2, 6, 6), (3, 2, 3, 3), {"pad_mode": "pad", "padding": 1}, {"padding": 1}, None),
    ((1, 2, 6, 7), (3, 2, 3, 3), {"pad_mode": "pad", "padding": (2, 1), "stride": (1, 2)},
     {"padding": (2, 1), "stride": (1, 2)}, None),
    ((1, 2, 6, 7), (3, 2, 3, 2), {"pad_mode": "pad", "padding": (1, 0, 2, 1)}, {}, (2, 1, 1, 0)),
    ((1, 2, 9, 9), (2, 2, 3, 3), {"dilation": 2}, {"dilation": 2}, None),
    ((1, 2, 9, 8), (2, 2, 2, 3), {"dilation": (2, 1), "stride": (2, 3), "pad_mode": "pad", "padding": 1},
     {"dilation": (2, 1), "stride": (2, 3), "padding": 1}, None),
    ((2, 4, 5, 5), (6, 2, 3, 3), {"groups": 2}, {"groups": 2}, None),
    ((1, 3, 5, 5), (6, 1, 3, 3), {"groups": 3, "pad_mode": "pad", "padding": 1}, {"groups": 3, "padding": 1}, None),
    ((1, 2, 6, 6), (3, 2, 4, 3), {"pad_mode": "same"}, {"padding": "same"}, None),
]


@pytest.mark.filterwarnings("ignore:Using padding='same'")         # torch's note on its own padding copy
@pytest.mark.parametrize("xs,ws,ms_kw,t_kw,prepad", CONV_CASES)
@pytest.mark.parametrize("bias", [False, True])
def test_conv2d(xs, ws, ms_kw, t_kw, prepad, bias):
    arrays = [_rand(*xs), _rand(*ws)] + ([_rand(ws[0])] if bias else [])

    def ms_fn(x_, w_, b_=None):
        return ops.conv2d(x_, w_, b_, **ms_kw)

    def torch_fn(x_, w_, b_=None):
        return F.conv2d(F.pad(x_, prepad) if prepad else x_, w_, b_, **t_kw)

    compare(ms_fn, torch_fn, arrays, wrt=tuple(range(len(arrays))), second_order=not bias)


POOL_CASES = [
    # kernel, stride, padding, dilation, ceil_mode
    (2, None, 0, 1, False), (3, 1, 1, 1, False), (3, 2, 1, 1, True), ((3, 2), (2, 1), (1, 0), 1, False),
    (2, 2, 0, 2, False), (3, 2, 0, (1, 2), True), (2, 3, 1, 1, True),
]


@pytest.mark.parametrize("kernel,stride,padding,dilation,ceil", POOL_CASES)
def test_max_pool2d(kernel, stride, padding, dilation, ceil):
    x = RNG.permutation(2 * 3 * 7 * 8).reshape(2, 3, 7, 8) * 0.01          # distinct values: unique argmax

    def ms_fn(x_):
        return ops.max_pool2d(x_, kernel, stride, padding, dilation, ceil_mode=ceil)

    def torch_fn(x_):
        return F.max_pool2d(x_, kernel, stride, padding, dilation, ceil_mode=ceil)

    compare(ms_fn, torch_fn, [x], wrt=(0,), second_order=True)
    _, idx = ops.max_pool2d(Tensor(x), kernel, stride, padding, dilation, True, ceil)
    _, tidx = F.max_pool2d(_t(x), kernel, stride, padding, dilation, ceil_mode=ceil, return_indices=True)
    np.testing.assert_array_equal(idx.asnumpy(), tidx.numpy())


@pytest.mark.parametrize("kernel,stride,padding,ceil,include_pad,divisor", [
    (2, 2, 0, False, True, 0), (3, 1, 1, False, False, 0), (3, 2, 1, True, True, 0), (3, 2, 1, True, False, 0),
    ((3, 2), (2, 1), (1, 1), False, True, 0), (2, 3, 1, True, True, 0), (3, 2, 1, False, True, 5),
])
def test_avg_pool2d(kernel, stride, padding, ceil, include_pad, divisor):
    x = _rand(2, 3, 7, 8)
    ms_pad = padding if isinstance(padding, int) else (padding[0], padding[0], padding[1], padding[1])

    def ms_fn(x_):
        return ops.avg_pool2d(x_, kernel, stride, ms_pad, ceil, include_pad, divisor)

    def torch_fn(x_):
        return F.avg_pool2d(x_, kernel, stride, padding, ceil, include_pad, divisor or None)

    compare(ms_fn, torch_fn, [x], wrt=(0,), second_order=True)
