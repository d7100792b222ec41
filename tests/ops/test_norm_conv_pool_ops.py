"""batch_norm, group_norm, conv1d, conv_transpose2d, avg_pool1d, the adaptive pools and dropout2d
against PyTorch (forward and gradients, float64), plus bad input. The op table (opdb/nn_layer_ops.py)
checks the same ops against NumPy references and finite differences."""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import minispore as ms
from minispore import ops
from minispore.common.errors import OpTypeError, OpValueError

rng = np.random.default_rng(0)


def T(a):
    return ms.Tensor(np.asarray(a))


def _grads(fn, *arrays):
    """minispore value and gradients of sum(fn(*tensors) * w) w.r.t. every array (float64)."""
    ts = [T(a) for a in arrays]
    out = fn(*ts)
    w = rng.uniform(-1, 1, out.shape)
    val, g = ms.value_and_grad(lambda *a: (fn(*a) * T(w)).sum(), tuple(range(len(ts))))(*ts)
    g = g if isinstance(g, tuple) else (g,)            # (one position: MindSpore returns a bare Tensor)
    return out.asnumpy(), [x.asnumpy() for x in g], w


def _torch_grads(fn, w, *arrays):
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    out = fn(*ts)
    (out * torch.tensor(w)).sum().backward()
    return out.detach().numpy(), [t.grad.numpy() for t in ts]


# ------------------------------------------------------------------------------------------------
# batch_norm
@pytest.mark.parametrize("shape", [(6, 3), (4, 3, 5), (3, 3, 2, 4), (2, 3, 2, 2, 2)])
def test_batch_norm_training_matches_torch_and_updates_running_stats(shape):
    x = rng.uniform(-2, 3, shape)
    w, b = rng.uniform(0.5, 1.5, 3), rng.uniform(-1, 1, 3)
    rm, rv = T(np.array([0.1, -0.2, 0.3])), T(np.array([1.0, 2.0, 0.5]))
    y, (gx, gw, gb), wt = _grads(lambda a, c, d: ops.batch_norm(a, T(np.zeros(3)), T(np.ones(3)), c, d, True), x, w, b)
    ty, (tgx, tgw, tgb) = _torch_grads(lambda a, c, d: TF.batch_norm(a, None, None, c, d, True), wt, x, w, b)
    for got, want in ((y, ty), (gx, tgx), (gw, tgw), (gb, tgb)):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-10)
    # running statistics: the functional (PyTorch) momentum convention, unbiased variance
    trm, trv = torch.tensor([0.1, -0.2, 0.3], dtype=torch.float64), torch.tensor([1.0, 2.0, 0.5], dtype=torch.float64)
    ops.batch_norm(T(x), rm, rv, T(w), T(b), training=True, momentum=0.3)
    TF.batch_norm(torch.tensor(x), trm, trv, torch.tensor(w), torch.tensor(b), True, momentum=0.3)
    np.testing.assert_allclose(rm.asnumpy(), trm.numpy(), rtol=1e-12)
    np.testing.assert_allclose(rv.asnumpy(), trv.numpy(), rtol=1e-12)


def test_batch_norm_eval_matches_torch_with_grads_of_running_stats():
    x = rng.uniform(-1, 1, (4, 2, 3))
    rm, rv, w, b = rng.uniform(-1, 1, 2), rng.uniform(0.5, 2, 2), rng.uniform(0.5, 2, 2), rng.uniform(-1, 1, 2)
    y, grads, wt = _grads(lambda *a: ops.batch_norm(*a, eps=1e-3), x, rm, rv, w, b)
    # (PyTorch's batch_norm does not differentiate the running statistics: write the eval formula out)
    ty, tgrads = _torch_grads(lambda a, m, v, c, d: (a - m[:, None]) / torch.sqrt(v[:, None] + 1e-3) * c[:, None]
                              + d[:, None], wt, x, rm, rv, w, b)
    np.testing.assert_allclose(y, ty, rtol=1e-12)
    for g, tg in zip(grads, tgrads):
        np.testing.assert_allclose(g, tg, rtol=1e-9, atol=1e-12)


def test_batch_norm_second_order_matches_torch():
    x = rng.uniform(-1, 1, (3, 2, 2))
    w = rng.uniform(0.5, 1.5, 2)
    wt = rng.uniform(-1, 1, (3, 2, 2))

    def first(a, c):
        return ms.grad(lambda a_, c_: (ops.batch_norm(a_, T(np.zeros(2)), T(np.ones(2)), c_, None, True) * T(wt)).sum(),
                       (0, 1))(a, c)

    g2 = ms.grad(lambda a, c: (first(a, c)[0] ** 2).sum() + (first(a, c)[1] ** 3).sum(), (0, 1))(T(x), T(w))
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    y = (TF.batch_norm(tx, None, None, tw, None, True) * torch.tensor(wt)).sum()
    ga, gc = torch.autograd.grad(y, (tx, tw), create_graph=True)
    tg2 = torch.autograd.grad((ga ** 2).sum() + (gc ** 3).sum(), (tx, tw))
    for g, tg in zip(g2, tg2):
        np.testing.assert_allclose(g.asnumpy(), tg.numpy(), rtol=1e-8, atol=1e-10)


def test_batch_norm_float16_input_normalizes_in_float32():
    x = rng.uniform(-1, 1, (8, 2, 3)).astype(np.float16)
    y = ops.batch_norm(T(x), T(np.zeros(2, np.float32)), T(np.ones(2, np.float32)), None, None, True)
    assert y.dtype == ms.float16
    ref = TF.batch_norm(torch.tensor(x.astype(np.float64)), None, None, None, None, True).numpy()
    np.testing.assert_allclose(y.asnumpy().astype(np.float64), ref, atol=3e-3)


# ------------------------------------------------------------------------------------------------
# group_norm
@pytest.mark.parametrize("shape,groups", [((2, 6, 3, 2), 3), ((3, 4), 2), ((2, 4, 5), 4), ((1, 3, 2, 2, 2), 1)])
def test_group_norm_matches_torch(shape, groups):
    c = shape[1]
    x, w, b = rng.uniform(-2, 2, shape), rng.uniform(0.5, 1.5, c), rng.uniform(-1, 1, c)
    y, grads, wt = _grads(lambda a, c_, d: ops.group_norm(a, groups, c_, d, eps=1e-4), x, w, b)
    ty, tgrads = _torch_grads(lambda a, c_, d: TF.group_norm(a, groups, c_, d, eps=1e-4), wt, x, w, b)
    np.testing.assert_allclose(y, ty, rtol=1e-10, atol=1e-12)
    for g, tg in zip(grads, tgrads):
        np.testing.assert_allclose(g, tg, rtol=1e-8, atol=1e-10)


# ------------------------------------------------------------------------------------------------
# conv1d, conv_transpose2d
@pytest.mark.parametrize("kw,tkw", [({}, {}), ({"stride": 2, "pad_mode": "pad", "padding": 2, "dilation": 2},
                                             {"stride": 2, "padding": 2, "dilation": 2}),
                                    ({"groups": 2, "pad_mode": "same"}, {"groups": 2, "padding": "same"})])
def test_conv1d_matches_torch(kw, tkw):
    x, w, b = rng.uniform(-1, 1, (2, 4, 9)), rng.uniform(-1, 1, (6, 4 // kw.get("groups", 1), 3)), rng.uniform(-1, 1, 6)
    y, grads, wt = _grads(lambda a, c, d: ops.conv1d(a, c, d, **kw), x, w, b)
    ty, tgrads = _torch_grads(lambda a, c, d: TF.conv1d(a, c, d, **tkw), wt, x, w, b)
    np.testing.assert_allclose(y, ty, rtol=1e-10, atol=1e-12)
    for g, tg in zip(grads, tgrads):
        np.testing.assert_allclose(g, tg, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("kw", [{}, {"stride": 2, "padding": 1, "output_padding": 1},
                                {"stride": (2, 3), "padding": (0, 1), "output_padding": (1, 2), "dilation": 2},
                                {"groups": 2, "stride": 2}])
def test_conv_transpose2d_matches_torch(kw):
    g = kw.get("groups", 1)
    x, w, b = rng.uniform(-1, 1, (2, 4, 3, 4)), rng.uniform(-1, 1, (4, 6 // g, 3, 2)), rng.uniform(-1, 1, 6)
    y, grads, wt = _grads(lambda a, c, d: ops.conv_transpose2d(a, c, d, **kw), x, w, b)
    ty, tgrads = _torch_grads(lambda a, c, d: TF.conv_transpose2d(a, c, d, **kw), wt, x, w, b)
    np.testing.assert_allclose(y, ty, rtol=1e-10, atol=1e-12)
    for gr, tg in zip(grads, tgrads):
        np.testing.assert_allclose(gr, tg, rtol=1e-10, atol=1e-12)


# ------------------------------------------------------------------------------------------------
# pools
def test_avg_pool1d_matches_torch():
    x = rng.uniform(-1, 1, (2, 3, 9))
    assert ops.avg_pool1d(T(x), 3).shape == (2, 3, 7)            # MindSpore's stride default is 1 (PyTorch's: kernel)
    for args, kw in (((3, 1), {}), ((3, 2, 1), {"count_include_pad": False}), ((2, 2), {"ceil_mode": True})):
        y, (gx,), wt = _grads(lambda a: ops.avg_pool1d(a, *args, **kw), x)
        ty, (tgx,) = _torch_grads(lambda a: TF.avg_pool1d(a, *args, **kw), wt, x)
        np.testing.assert_allclose(y, ty, rtol=1e-12)
        np.testing.assert_allclose(gx, tgx, rtol=1e-12)


@pytest.mark.parametrize("shape,out", [((2, 3, 7, 5), (3, 2)), ((2, 3, 6, 6), 1), ((3, 5, 8), (4, 3)),
                                       ((1, 2, 4, 9), (4, None))])
def test_adaptive_pools_match_torch(shape, out):
    x = rng.permutation(np.prod(shape)).reshape(shape) * 0.01        # distinct values: one max per window
    tout = out if not isinstance(out, tuple) else tuple(shape[-2 + i] if v is None else v for i, v in enumerate(out))
    y, (gx,), wt = _grads(lambda a: ops.adaptive_avg_pool2d(a, out), x)
    ty, (tgx,) = _torch_grads(lambda a: TF.adaptive_avg_pool2d(a, tout), wt, x)
    np.testing.assert_allclose(y, ty, rtol=1e-12)
    np.testing.assert_allclose(gx, tgx, rtol=1e-12)
    (ym, idx) = ops.adaptive_max_pool2d(T(x), out, return_indices=True)
    tym, tidx = TF.adaptive_max_pool2d(torch.tensor(x), tout, return_indices=True)
    np.testing.assert_array_equal(ym.asnumpy(), tym.numpy())
    np.testing.assert_array_equal(idx.asnumpy(), tidx.numpy())
    assert idx.dtype == ms.int64
    _, (gm,), wt = _grads(lambda a: ops.adaptive_max_pool2d(a, out), x)
    _, (tgm,) = _torch_grads(lambda a: TF.adaptive_max_pool2d(a, tout), wt, x)
    np.testing.assert_allclose(gm, tgm, rtol=1e-12)


# ------------------------------------------------------------------------------------------------
# dropout2d
def test_dropout2d_drops_whole_channels_reproducibly_and_its_gradient_is_the_mask():
    x = rng.uniform(1, 2, (8, 16, 3, 3))
    ms.set_seed(3)
    y = ops.dropout2d(T(x), 0.25).asnumpy()
    ms.set_seed(3)
    y2 = ops.dropout2d(T(x), 0.25).asnumpy()
    np.testing.assert_array_equal(y, y2)
    kept = (y != 0).reshape(8, 16, 9)
    assert np.all(kept.all(-1) | ~kept.any(-1))                   # each plane all kept or all dropped
    np.testing.assert_allclose(y[y != 0], (x / 0.75)[y != 0])
    assert 0.1 < 1 - kept[..., 0].mean() < 0.4                     # about p of the 128 planes dropped
    ms.set_seed(3)
    gx = ms.grad(lambda a: ops.dropout2d(a, 0.25).sum())(T(x))
    gx = gx[0] if isinstance(gx, tuple) else gx
    np.testing.assert_allclose(gx.asnumpy(), np.where(y != 0, 1 / 0.75, 0.0))
    np.testing.assert_array_equal(ops.dropout2d(T(x), 0.5, training=False).asnumpy(), x)


# ------------------------------------------------------------------------------------------------
# bad input: a minispore error naming the op, before any kernel runs
def z(*shape):
    return T(np.zeros(shape, np.float32))


BAD = [
    ("batch_norm", OpValueError, lambda: ops.batch_norm(z(4), z(4), z(4), None, None)),
    ("batch_norm", OpValueError, lambda: ops.batch_norm(z(2, 3, 2), z(2), z(3), z(3), z(3))),
    ("batch_norm", OpTypeError, lambda: ops.batch_norm(z(2, 3), z(3), z(3), z(3), z(3), training=1)),
    ("batch_norm", OpValueError, lambda: ops.batch_norm(z(1, 3), z(3), z(3), z(3), z(3), training=True)),
    ("batch_norm", OpTypeError, lambda: ops.batch_norm(T(np.zeros((2, 3), np.int32)), z(3), z(3), z(3), z(3))),
    ("group_norm", OpValueError, lambda: ops.group_norm(z(2, 6, 2), 4)),
    ("group_norm", OpValueError, lambda: ops.group_norm(z(2, 6, 2), 3, z(5))),
    ("conv1d", OpValueError, lambda: ops.conv1d(z(2, 3, 4, 4), z(2, 3, 3))),
    ("conv1d", OpTypeError, lambda: ops.conv1d(z(2, 3, 8), z(2, 3, 3), pad_mode="pad", padding=(1, 2))),
    ("conv_transpose2d", OpValueError, lambda: ops.conv_transpose2d(z(1, 2, 3, 3), z(2, 2, 3, 3), output_padding=1)),
    ("conv_transpose2d", OpValueError, lambda: ops.conv_transpose2d(z(1, 3, 3, 3), z(2, 2, 3, 3))),
    ("avg_pool1d", OpValueError, lambda: ops.avg_pool1d(z(2, 3), 2)),
    ("adaptive_avg_pool2d", OpValueError, lambda: ops.adaptive_avg_pool2d(z(2, 3), 1)),
    ("adaptive_avg_pool2d", OpTypeError, lambda: ops.adaptive_avg_pool2d(z(1, 2, 3, 3), (1, 2, 3))),
    ("adaptive_max_pool2d", OpValueError, lambda: ops.adaptive_max_pool2d(z(1, 2, 3, 3), 0)),
    ("dropout2d", OpValueError, lambda: ops.dropout2d(z(2, 3, 4))),
    ("dropout2d", OpValueError, lambda: ops.dropout2d(z(2, 3, 4, 4), 1.5)),
]


@pytest.mark.parametrize("op,err,call", BAD, ids=[f"{b[0]}-{i}" for i, b in enumerate(BAD)])
def test_bad_input_raises_minispore_error_naming_the_op(op, err, call):
    with pytest.raises(err, match=f"For '{op}'"):
        call()
