"""The MindSpore-style layers: BatchNorm1d/2d/3d (moving statistics, use_batch_statistics, names,
jit), GroupNorm, InstanceNorm2d, Conv1d, Conv2dTranspose, the 1-d and adaptive pools, Dropout2d,
against NumPy float64 and the numbers / shapes MindSpore 2.10 gives (the differential suite,
tests/fidelity/cases/nn_layers.py, compares with its goldens)."""
import numpy as np
import pytest

import minispore as ms
from minispore import nn
from minispore.common.errors import OpTypeError, OpValueError

rng = np.random.default_rng(0)


def T(a):
    return ms.Tensor(np.asarray(a, dtype=np.float32))


def names(cell):
    return [(p.name, tuple(p.shape), p.requires_grad) for p in cell.get_parameters()]


class Holder(nn.Cell):
    def __init__(self, layer):
        super().__init__()
        self.bn = layer

    def construct(self, x):
        return self.bn(x)


# ------------------------------------------------------------------------------------------------
# BatchNorm
def test_batchnorm_parameter_names_as_mindspore():
    assert names(nn.BatchNorm2d(3)) == [("mean", (3,), False), ("variance", (3,), False), ("gamma", (3,), True),
                                        ("beta", (3,), True)]
    assert names(Holder(nn.BatchNorm2d(2, affine=False))) == [
        ("bn.moving_mean", (2,), False), ("bn.moving_variance", (2,), False), ("bn.gamma", (2,), False),
        ("bn.beta", (2,), False)]
    assert [n for n, _, _ in names(Holder(nn.BatchNorm3d(2)))] == [
        "bn.bn2d.moving_mean", "bn.bn2d.moving_variance", "bn.bn2d.gamma", "bn.bn2d.beta"]


def test_batchnorm_moving_statistics_follow_mindspore_momentum_convention():
    bn = nn.BatchNorm2d(3, momentum=0.8)
    bn.set_train()
    mean, var = np.zeros(3), np.ones(3)
    for step in range(3):
        x = rng.uniform(-1, 3, (4, 3, 2, 5)).astype(np.float32)
        y = bn(T(x)).asnumpy()
        mu, vb = x.mean((0, 2, 3)), x.var((0, 2, 3))
        ref = (x - mu[None, :, None, None]) / np.sqrt(vb[None, :, None, None] + 1e-5)     # biased for the output
        np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-5)
        mean = 0.8 * mean + 0.2 * mu
        var = 0.8 * var + 0.2 * x.var((0, 2, 3), ddof=1)                                   # unbiased for the average
    np.testing.assert_allclose(bn.moving_mean.asnumpy(), mean, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(bn.moving_variance.asnumpy(), var, rtol=1e-5)
    bn.set_train(False)                                  # eval: the moving statistics
    x = rng.uniform(-1, 1, (2, 3, 2, 2)).astype(np.float32)
    ref = (x - mean[None, :, None, None]) / np.sqrt(var[None, :, None, None] + 1e-5)
    np.testing.assert_allclose(bn(T(x)).asnumpy(), ref, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("ubs,train,uses_batch", [(None, True, True), (None, False, False), (True, False, True),
                                                  (False, True, False)])
def test_use_batch_statistics(ubs, train, uses_batch):
    bn = nn.BatchNorm1d(2, use_batch_statistics=ubs)
    bn.set_train(train)
    x = rng.uniform(1, 3, (6, 2)).astype(np.float32)
    y = bn(T(x)).asnumpy()
    if uses_batch:
        np.testing.assert_allclose(y.mean(0), 0, atol=1e-5)
        assert np.all(bn.moving_mean.asnumpy() != 0)                 # and the moving statistics moved
    else:
        np.testing.assert_allclose(y, x / np.sqrt(1 + 1e-5), rtol=1e-6)
        np.testing.assert_array_equal(bn.moving_mean.asnumpy(), 0)


def test_batchnorm_gradients_against_finite_differences():
    bn = nn.BatchNorm1d(2)
    bn.set_train()
    x = rng.uniform(-1, 1, (5, 2, 3))
    w = rng.uniform(-1, 1, (5, 2, 3))
    bn.gamma.set_data(T([1.5, 0.5]))

    def loss(a):
        return (bn(a) * ms.Tensor(w)).sum()
    _, (gx, (gg, gb)) = ms.value_and_grad(loss, 0, bn.trainable_params())(ms.Tensor(x))

    def f(a):
        mu, v = a.mean((0, 2), keepdims=True), a.var((0, 2), keepdims=True)
        return (((a - mu) / np.sqrt(v + 1e-5) * np.array([1.5, 0.5])[None, :, None]) * w).sum()
    num = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        d = np.zeros_like(x)
        d[i] = 1e-6
        num[i] = (f(x + d) - f(x - d)) / 2e-6
    np.testing.assert_allclose(gx.asnumpy(), num, rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(gb.asnumpy(), w.sum((0, 2)), rtol=1e-5)


@pytest.mark.parametrize("mode", ["trace", "ast"])
def test_batchnorm_moving_statistics_update_under_jit(mode):
    x = T(rng.uniform(-1, 1, (4, 3, 2, 2)))
    eager, jitted = nn.BatchNorm2d(3), nn.BatchNorm2d(3)
    eager.set_train()
    jitted.set_train()
    step = ms.jit(ms.value_and_grad(lambda a: jitted(a).sum(), None, jitted.trainable_params()), capture_mode=mode)
    for _ in range(2):
        eager(x)
        step(x)
    np.testing.assert_allclose(jitted.moving_mean.asnumpy(), eager.moving_mean.asnumpy(), rtol=1e-6)
    np.testing.assert_allclose(jitted.moving_variance.asnumpy(), eager.moving_variance.asnumpy(), rtol=1e-6)
    assert np.any(eager.moving_mean.asnumpy() != 0)


@pytest.mark.parametrize("make,err", [(lambda: nn.BatchNorm2d(0), OpValueError), (lambda: nn.BatchNorm2d(2.0), OpTypeError),
                                      (lambda: nn.BatchNorm2d(2, momentum=-0.1), OpValueError),
                                      (lambda: nn.BatchNorm2d(2, use_batch_statistics="yes"), OpValueError),
                                      (lambda: nn.BatchNorm2d(2, data_format="NHWC"), OpValueError),
                                      (lambda: nn.GroupNorm(4, 6), OpValueError), (lambda: nn.GroupNorm(2, 4, eps=1), OpTypeError),
                                      (lambda: nn.InstanceNorm2d(3, momentum=1), OpTypeError),
                                      (lambda: nn.Dropout2d(1), OpTypeError), (lambda: nn.Dropout2d(1.5), OpValueError),
                                      (lambda: nn.Conv1d(3, 4, (3,)), OpTypeError),
                                      (lambda: nn.Conv2dTranspose(3, 4, 3, padding=1), OpValueError),
                                      (lambda: nn.MaxPool1d(3, 2, ceil_mode=True), OpValueError),
                                      (lambda: nn.MaxPool2d(2, return_indices=True), OpValueError),
                                      (lambda: nn.AvgPool2d(2, pad_mode="pad", padding=(1, 1, 1, 1)), OpValueError),
                                      (lambda: nn.AdaptiveAvgPool2d((1, 2, 3)), OpTypeError)])
def test_bad_constructor_arguments(make, err):
    with pytest.raises(err):
        make()


@pytest.mark.parametrize("layer,x", [(nn.BatchNorm2d(3), (2, 3, 4)), (nn.BatchNorm1d(3), (2, 3, 2, 2)),
                                     (nn.BatchNorm2d(3), (2, 4, 2, 2)), (nn.BatchNorm3d(3), (2, 3, 2, 2)),
                                     (nn.GroupNorm(1, 3), (2, 4, 2)), (nn.Conv1d(3, 2, 3), (2, 3, 4, 4)),
                                     (nn.Conv2dTranspose(3, 2, 3), (2, 4, 3, 3)), (nn.MaxPool1d(2), (2, 3, 4, 4))])
def test_bad_input_shapes_name_the_layer(layer, x):
    with pytest.raises(OpValueError, match=f"For '{type(layer).__name__}'"):
        layer(T(np.zeros(x)))


# ------------------------------------------------------------------------------------------------
# GroupNorm / InstanceNorm2d
def test_groupnorm_and_instancenorm_against_numpy():
    x = rng.uniform(-2, 2, (2, 6, 3, 2)).astype(np.float32)
    gn = nn.GroupNorm(3, 6)
    gn.gamma.set_data(T(np.arange(1, 7)))
    g = x.reshape(2, 3, -1)
    ref = ((g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + 1e-5)).reshape(x.shape)
    np.testing.assert_allclose(gn(T(x)).asnumpy(), ref * np.arange(1, 7)[None, :, None, None], rtol=1e-4, atol=1e-5)
    inn = nn.InstanceNorm2d(6)
    assert [n for n, _, _ in names(inn)] == ["mean", "variance", "gamma", "beta"]
    i = x.reshape(2, 6, -1)
    ref = ((i - i.mean(-1, keepdims=True)) / np.sqrt(i.var(-1, keepdims=True) + 1e-5)).reshape(x.shape)
    for train in (True, False):
        inn.set_train(train)
        np.testing.assert_allclose(inn(T(x)).asnumpy(), ref, rtol=1e-4, atol=1e-5)


# ------------------------------------------------------------------------------------------------
# Conv1d / Conv2dTranspose
def test_conv1d_weight_is_4d_and_matches_a_direct_convolution():
    conv = nn.Conv1d(2, 3, 3, pad_mode="pad", padding=1, stride=2, has_bias=True)
    assert names(conv) == [("weight", (3, 2, 1, 3), True), ("bias", (3,), True)]
    x = rng.uniform(-1, 1, (2, 2, 7)).astype(np.float32)
    w, b = conv.weight.asnumpy()[:, :, 0, :], conv.bias.asnumpy()
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1)))
    ref = np.stack([np.einsum("nck,ock->no", xp[:, :, 2 * t:2 * t + 3], w) for t in range(4)], -1) + b[None, :, None]
    np.testing.assert_allclose(conv(T(x)).asnumpy(), ref, rtol=1e-5, atol=1e-6)
    assert nn.Conv1d(2, 3, 3)(T(x)).shape == (2, 3, 7)                      # default pad_mode 'same'


@pytest.mark.parametrize("kw,out", [({}, (5, 5)), ({"stride": 2}, (10, 10)), ({"stride": 2, "pad_mode": "valid"}, (11, 11)),
                                    ({"pad_mode": "pad", "padding": (1, 0, 2, 1)}, (6, 4)),
                                    ({"stride": 2, "pad_mode": "pad", "padding": 1}, (9, 9)),
                                    ({"dilation": 2, "pad_mode": "valid"}, (9, 9)), ({"stride": 3}, (15, 15)),
                                    ({"kernel_size": 2, "stride": 3, "pad_mode": "valid"}, (15, 15))])
def test_conv2dtranspose_output_sizes_as_mindspore(kw, out):
    args = {"in_channels": 3, "out_channels": 4, "kernel_size": 3, **kw}
    layer = nn.Conv2dTranspose(**args)
    assert layer.weight.shape == (3, 4) + layer.kernel_size
    assert layer(T(np.ones((2, 3, 5, 5)))).shape == (2, 4) + out


def test_conv2dtranspose_output_padding_appends_zeros_after_the_bias():
    x = T(rng.uniform(-1, 1, (1, 2, 3, 3)))
    layer = nn.Conv2dTranspose(2, 3, 3, stride=2, pad_mode="pad", padding=1, output_padding=1, has_bias=True,
                               bias_init="ones")
    plain = nn.Conv2dTranspose(2, 3, 3, stride=2, pad_mode="pad", padding=1, has_bias=True, bias_init="ones",
                               weight_init=ms.Tensor(layer.weight.asnumpy()))
    y = layer(x).asnumpy()
    assert y.shape == (1, 3, 6, 6)
    np.testing.assert_array_equal(y[:, :, 5, :], 0)                  # zeros, not the bias
    np.testing.assert_array_equal(y[:, :, :, 5], 0)
    np.testing.assert_allclose(y[:, :, :5, :5], plain(x).asnumpy(), rtol=1e-6)


# ------------------------------------------------------------------------------------------------
# pools and Dropout2d
def test_pool1d_layers_against_numpy():
    x = rng.uniform(-1, 1, (2, 3, 9)).astype(np.float32)
    np.testing.assert_allclose(nn.MaxPool1d(3, 2)(T(x)).asnumpy(),
                               np.stack([x[..., 2 * t:2 * t + 3].max(-1) for t in range(4)], -1))
    np.testing.assert_allclose(nn.AvgPool1d(3, 2)(T(x)).asnumpy(),
                               np.stack([x[..., 2 * t:2 * t + 3].mean(-1) for t in range(4)], -1), rtol=1e-6)
    y, idx = nn.MaxPool1d(3, 2, pad_mode="pad", padding=1, return_indices=True)(T(x))
    assert y.shape == idx.shape == (2, 3, 5) and idx.dtype == ms.int64
    np.testing.assert_array_equal(np.take_along_axis(x, idx.asnumpy(), -1), y.asnumpy())
    assert nn.AvgPool1d(4, 2, pad_mode="same")(T(x[0])).shape == (3, 5)      # unbatched (C, L)


def test_adaptive_avg_pool_is_global_mean_and_windows_overlap():
    x = rng.uniform(-1, 1, (2, 3, 7, 5)).astype(np.float32)
    np.testing.assert_allclose(nn.AdaptiveAvgPool2d(1)(T(x)).asnumpy(), x.mean((2, 3), keepdims=True), rtol=1e-5)
    y = nn.AdaptiveAvgPool2d((3, 2))(T(x)).asnumpy()
    # rows [0, 3), [2, 5), [4, 7); columns [0, 3), [2, 5)
    np.testing.assert_allclose(y[..., 1, 1], x[..., 2:5, 2:5].mean((-2, -1)), rtol=1e-5)
    y, idx = nn.AdaptiveMaxPool2d((3, 2), return_indices=True)(T(x))
    np.testing.assert_allclose(y.asnumpy()[..., 2, 0], x[..., 4:7, 0:3].max((-2, -1)))


def test_dropout2d_layer_train_and_eval():
    d = nn.Dropout2d(0.5)
    x = T(np.ones((4, 8, 2, 2)))
    np.testing.assert_array_equal(d(x).asnumpy(), 1)                # eval (the default): identity
    d.set_train()
    y = d(x).asnumpy()
    assert set(np.unique(y)) <= {0.0, 2.0} and np.all(y == y[:, :, :1, :1])
