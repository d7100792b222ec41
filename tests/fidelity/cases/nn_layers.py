"""Differential cases: the standard layers (BatchNorm, GroupNorm, Conv1d, Conv2dTranspose, the 1-d
and adaptive pools, Dropout2d, Flatten/Identity, Conv2d/Dense defaults) and their functional ops,
in train and eval mode, with moving statistics, gradients and parameter names, as MindSpore 2.10
(CPU) gives them."""
import numpy as np

from msdiff import case, fill_params, param_names, rand

GRAD_TOL = dict(rtol=1e-4, atol=1e-5)


def T(ms, a):
    return ms.Tensor(np.asarray(a, dtype=np.float32))


def _wrap(ms, layer, name="layer"):
    """The layer as the child of a network (names become 'layer.gamma', ...), as scripts build it."""
    class Net(ms.nn.Cell):
        def __init__(self):
            super().__init__()
            setattr(self, name, layer)

        def construct(self, x):
            return getattr(self, name)(x)
    return Net()


def _weighted_sum_grads(ms, net, x, out_shape, seed=7, wrt_input=True):
    """value and gradients of sum(net(x) * w) for a fixed w: w.r.t. the input and the trainable params."""
    w = T(ms, rand(*out_shape, seed=seed))
    params = net.trainable_params()

    def loss(x_):
        return (net(x_) * w).sum()

    fn = ms.value_and_grad(loss, 0 if wrt_input else None, params)
    return fn(x)


def _bn_net(ms, cls, c, seed=1, **kw):
    net = _wrap(ms, getattr(ms.nn, cls)(c, **kw), "bn")
    return fill_params(ms, net, seed)


# =================================================================================================
# BatchNorm2d
@case("nn_layers/bn2d_train_forward_and_moving_stats")
def _(ms):
    bn = ms.nn.BatchNorm2d(3)
    bn.set_train(True)
    y = bn(T(ms, rand(4, 3, 2, 2, seed=0)))
    return y, bn.moving_mean, bn.moving_variance


@case("nn_layers/bn2d_moving_stats_after_3_steps")
def _(ms):
    net = _bn_net(ms, "BatchNorm2d", 3)
    net.set_train()
    for s in range(3):
        net(T(ms, rand(5, 3, 3, 2, seed=10 + s, low=-2.0, high=3.0)))
    return net.bn.moving_mean, net.bn.moving_variance


@case("nn_layers/bn2d_eval_uses_moving_stats")
def _(ms):
    net = _bn_net(ms, "BatchNorm2d", 3, seed=2)
    net.set_train(False)
    return net(T(ms, rand(2, 3, 4, 4, seed=1)))


@case("nn_layers/bn2d_fresh_cell_is_in_eval_mode")
def _(ms):
    bn = ms.nn.BatchNorm2d(2)
    y = bn(T(ms, rand(3, 2, 2, 2, seed=3)))
    return y, bn.moving_mean, bn.training


@case("nn_layers/bn2d_train_then_eval")
def _(ms):
    net = _bn_net(ms, "BatchNorm2d", 4)
    net.set_train(True)
    net(T(ms, rand(6, 4, 2, 3, seed=4, low=0.0, high=2.0)))
    net(T(ms, rand(6, 4, 2, 3, seed=5, low=0.0, high=2.0)))
    net.set_train(False)
    return net(T(ms, rand(2, 4, 2, 3, seed=6)))


@case("nn_layers/bn2d_momentum_0_5")
def _(ms):
    net = _bn_net(ms, "BatchNorm2d", 3, momentum=0.5)
    net.set_train(True)
    y = net(T(ms, rand(4, 3, 2, 2, seed=7)))
    return y, net.bn.moving_mean, net.bn.moving_variance


@case("nn_layers/bn2d_use_batch_statistics_true_in_eval")
def _(ms):
    net = _bn_net(ms, "BatchNorm2d", 3, use_batch_statistics=True)
    net.set_train(False)
    y = net(T(ms, rand(4, 3, 2, 2, seed=8)))
    return y, net.bn.moving_mean, net.bn.moving_variance


@case("nn_layers/bn2d_use_batch_statistics_false_in_train")
def _(ms):
    net = _bn_net(ms, "BatchNorm2d", 3, use_batch_statistics=False)
    net.set_train(True)
    y = net(T(ms, rand(4, 3, 2, 2, seed=9)))
    return y, net.bn.moving_mean, net.bn.moving_variance


@case("nn_layers/bn2d_inits_and_eps")
def _(ms):
    bn = ms.nn.BatchNorm2d(3, eps=1e-3, gamma_init="zeros", beta_init="ones", moving_mean_init="ones",
                           moving_var_init="zeros")
    y_eval = bn(T(ms, rand(2, 3, 2, 2, seed=10)))
    bn2 = ms.nn.BatchNorm2d(3, eps=0.5, gamma_init=2.0, beta_init=-1.0)
    bn2.set_train()
    return y_eval, bn2(T(ms, rand(2, 3, 2, 2, seed=11))), bn.gamma, bn.beta


@case("nn_layers/bn2d_param_names_standalone")
def _(ms):
    bn = ms.nn.BatchNorm2d(3)
    return param_names(bn), [p.requires_grad for p in bn.get_parameters()]


@case("nn_layers/bn2d_param_names_in_network")
def _(ms):
    nn = ms.nn

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 4, 3)
            self.bn1 = nn.BatchNorm2d(4)
            self.features = nn.SequentialCell([nn.Conv2d(4, 4, 1, has_bias=True), nn.BatchNorm2d(4, affine=False)])

        def construct(self, x):
            return self.features(self.bn1(self.conv1(x)))
    net = Net()
    return (param_names(net), [p.name for p in net.trainable_params()],
            [p.requires_grad for p in net.get_parameters()])


@case("nn_layers/bn2d_grads_train", **GRAD_TOL)
def _(ms):
    net = _bn_net(ms, "BatchNorm2d", 3)
    net.set_train(True)
    return _weighted_sum_grads(ms, net, T(ms, rand(4, 3, 3, 3, seed=12)), (4, 3, 3, 3))


@case("nn_layers/bn2d_grads_eval", **GRAD_TOL)
def _(ms):
    net = _bn_net(ms, "BatchNorm2d", 3, seed=3)
    net.set_train(False)
    return _weighted_sum_grads(ms, net, T(ms, rand(2, 3, 2, 2, seed=13)), (2, 3, 2, 2))


@case("nn_layers/bn2d_affine_false_grads", **GRAD_TOL)
def _(ms):
    net = _bn_net(ms, "BatchNorm2d", 2, affine=False)
    net.set_train(True)
    value, (gx, gp) = _weighted_sum_grads(ms, net, T(ms, rand(3, 2, 2, 2, seed=14)), (3, 2, 2, 2))
    return value, gx, len(gp)


@case("nn_layers/bn2d_conv_relu_block_train_step", **GRAD_TOL)
def _(ms):
    nn = ms.nn

    class Block(nn.Cell):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(2, 4, 3, stride=2)
            self.bn = nn.BatchNorm2d(4)
            self.relu = nn.ReLU()

        def construct(self, x):
            return self.relu(self.bn(self.conv(x)))
    net = fill_params(ms, Block(), seed=4, scale=0.5)
    net.set_train()
    value, grads = _weighted_sum_grads(ms, net, T(ms, rand(2, 2, 6, 6, seed=15)), (2, 4, 3, 3), wrt_input=False)
    return value, grads, net.bn.moving_mean, net.bn.moving_variance


# =================================================================================================
# BatchNorm1d / BatchNorm3d
@case("nn_layers/bn1d_2d_input_train")
def _(ms):
    net = _bn_net(ms, "BatchNorm1d", 3)
    net.set_train()
    y = net(T(ms, rand(5, 3, seed=16)))
    return y, net.bn.moving_mean, net.bn.moving_variance


@case("nn_layers/bn1d_3d_input_train_and_eval")
def _(ms):
    net = _bn_net(ms, "BatchNorm1d", 3)
    net.set_train()
    y = net(T(ms, rand(4, 3, 5, seed=17)))
    net.set_train(False)
    return y, net(T(ms, rand(2, 3, 5, seed=18))), net.bn.moving_variance


@case("nn_layers/bn1d_grads_train", **GRAD_TOL)
def _(ms):
    net = _bn_net(ms, "BatchNorm1d", 4)
    net.set_train()
    return _weighted_sum_grads(ms, net, T(ms, rand(6, 4, seed=19)), (6, 4))


@case("nn_layers/bn3d_train_forward_stats_and_names")
def _(ms):
    net = _bn_net(ms, "BatchNorm3d", 2)
    net.set_train()
    y = net(T(ms, rand(2, 2, 3, 2, 2, seed=20)))
    return y, param_names(net), net.bn.bn2d.moving_mean, net.bn.bn2d.moving_variance


@case("nn_layers/bn3d_eval_and_grads", **GRAD_TOL)
def _(ms):
    net = _bn_net(ms, "BatchNorm3d", 2, seed=5)
    net.set_train(False)
    return _weighted_sum_grads(ms, net, T(ms, rand(2, 2, 2, 2, 3, seed=21)), (2, 2, 2, 2, 3))


@case("nn_layers/bn_bad_num_features_zero", raises=True)
def _(ms):
    return ms.nn.BatchNorm2d(0)


@case("nn_layers/bn_bad_num_features_float", raises=True)
def _(ms):
    return ms.nn.BatchNorm2d(3.0)


@case("nn_layers/bn_bad_momentum", raises=True)
def _(ms):
    return ms.nn.BatchNorm2d(3, momentum=1.5)


@case("nn_layers/bn_bad_use_batch_statistics", raises=True)
def _(ms):
    return ms.nn.BatchNorm1d(3, use_batch_statistics=1)


@case("nn_layers/bn_nhwc_is_gpu_only", raises=True)
def _(ms):
    return ms.nn.BatchNorm2d(3, data_format="NHWC")


@case("nn_layers/bn2d_bad_input_rank", raises=True)
def _(ms):
    bn = ms.nn.BatchNorm2d(3)
    return bn(T(ms, rand(2, 3, 4, seed=0)))


@case("nn_layers/bn1d_bad_input_rank", raises=True)
def _(ms):
    bn = ms.nn.BatchNorm1d(3)
    return bn(T(ms, rand(2, 3, 4, 4, seed=0)))


# =================================================================================================
# ops.batch_norm (functional momentum: running = (1 - momentum) * running + momentum * batch)
@case("nn_layers/ops_batch_norm_training_updates_running")
def _(ms):
    rm = ms.Parameter(T(ms, [0.1, -0.2, 0.3]), name="rm")
    rv = ms.Parameter(T(ms, [1.0, 2.0, 0.5]), name="rv")
    w, b = T(ms, [1.0, 0.5, 2.0]), T(ms, [0.0, 0.1, -0.1])
    y = ms.ops.batch_norm(T(ms, rand(4, 3, 2, 2, seed=22)), rm, rv, w, b, training=True)
    return y, rm, rv


@case("nn_layers/ops_batch_norm_momentum_keyword_and_eval")
def _(ms):
    rm = ms.Parameter(T(ms, [0.0, 0.0]), name="rm")
    rv = ms.Parameter(T(ms, [1.0, 1.0]), name="rv")
    w, b = T(ms, [1.0, 1.0]), T(ms, [0.0, 0.0])
    x = T(ms, rand(3, 2, 4, seed=23, low=0.0, high=4.0))
    y1 = ms.ops.batch_norm(x, rm, rv, w, b, training=True, momentum=0.3, eps=1e-3)
    y2 = ms.ops.batch_norm(x, rm, rv, w, b)
    return y1, y2, rm, rv


@case("nn_layers/ops_batch_norm_2d_input")
def _(ms):
    rm = ms.Parameter(T(ms, [0.0, 0.0, 0.0]), name="rm")
    rv = ms.Parameter(T(ms, [1.0, 1.0, 1.0]), name="rv")
    y = ms.ops.batch_norm(T(ms, rand(5, 3, seed=24)), rm, rv, T(ms, [1.0, 2.0, 3.0]), T(ms, [0.0, 0.0, 1.0]), True)
    return y, rm, rv


# =================================================================================================
# GroupNorm
@case("nn_layers/groupnorm_forward_4d")
def _(ms):
    gn = fill_params(ms, _wrap(ms, ms.nn.GroupNorm(2, 4), "gn"), seed=6)
    return gn(T(ms, rand(2, 4, 3, 3, seed=25)))


@case("nn_layers/groupnorm_2d_3d_5d_inputs")
def _(ms):
    gn = ms.nn.GroupNorm(3, 6, eps=1e-3)
    return (gn(T(ms, rand(2, 6, seed=26))), gn(T(ms, rand(2, 6, 5, seed=27))),
            gn(T(ms, rand(1, 6, 2, 2, 2, seed=28))))


@case("nn_layers/groupnorm_grads", **GRAD_TOL)
def _(ms):
    net = fill_params(ms, _wrap(ms, ms.nn.GroupNorm(2, 6), "gn"), seed=7)
    return _weighted_sum_grads(ms, net, T(ms, rand(2, 6, 2, 3, seed=29)), (2, 6, 2, 3))


@case("nn_layers/groupnorm_params")
def _(ms):
    net = _wrap(ms, ms.nn.GroupNorm(1, 3, affine=False), "gn")
    return param_names(net), [p.name for p in net.trainable_params()]


@case("nn_layers/ops_group_norm")
def _(ms):
    x = T(ms, rand(2, 4, 3, seed=30))
    return ms.ops.group_norm(x, 2), ms.ops.group_norm(x, 4, T(ms, [1.0, 2.0, 0.5, 1.0]), T(ms, [0.0, 1.0, 0.0, -1.0]),
                                                      eps=1e-2)


@case("nn_layers/groupnorm_bad_groups", raises=True)
def _(ms):
    return ms.nn.GroupNorm(3, 4)


@case("nn_layers/groupnorm_bad_eps_type", raises=True)
def _(ms):
    return ms.nn.GroupNorm(2, 4, eps=1)


# =================================================================================================
# Conv1d
def _conv1d(ms, x_shape=(2, 3, 9), seed=8, **kw):
    args = dict(in_channels=3, out_channels=4, kernel_size=3)
    args.update(kw)
    net = fill_params(ms, _wrap(ms, ms.nn.Conv1d(**args), "conv"), seed=seed, scale=0.5)
    return net, T(ms, rand(*x_shape, seed=31))


@case("nn_layers/conv1d_default_same")
def _(ms):
    net, x = _conv1d(ms)
    return net(x), param_names(net)


@case("nn_layers/conv1d_valid_stride2_bias")
def _(ms):
    net, x = _conv1d(ms, pad_mode="valid", stride=2, has_bias=True)
    return net(x), param_names(net)


@case("nn_layers/conv1d_pad_dilation")
def _(ms):
    net, x = _conv1d(ms, pad_mode="pad", padding=2, dilation=2)
    return net(x)


@case("nn_layers/conv1d_same_stride2_group")
def _(ms):
    net, x = _conv1d(ms, x_shape=(1, 3, 10), out_channels=6, group=3, stride=2)
    return net(x), param_names(net)


@case("nn_layers/conv1d_grads", **GRAD_TOL)
def _(ms):
    net, x = _conv1d(ms, has_bias=True, pad_mode="pad", padding=1, stride=2)
    return _weighted_sum_grads(ms, net, x, (2, 4, 5))


@case("nn_layers/ops_conv1d_modes")
def _(ms):
    x = T(ms, rand(2, 3, 8, seed=32))
    w = T(ms, rand(4, 3, 3, seed=33))
    b = T(ms, rand(4, seed=34))
    return (ms.ops.conv1d(x, w), ms.ops.conv1d(x, w, b, pad_mode="same", stride=2),
            ms.ops.conv1d(x, w, pad_mode="pad", padding=1, dilation=2))


@case("nn_layers/conv1d_padding_tuple_rejected", raises=True)
def _(ms):
    return ms.nn.Conv1d(3, 4, 3, pad_mode="pad", padding=(1, 2))


@case("nn_layers/ops_conv1d_padding_needs_pad_mode", raises=True)
def _(ms):
    return ms.ops.conv1d(T(ms, rand(1, 3, 8, seed=0)), T(ms, rand(4, 3, 3, seed=1)), padding=1)


# =================================================================================================
# Conv2dTranspose
def _deconv(ms, x_shape=(2, 3, 4, 4), seed=9, **kw):
    args = dict(in_channels=3, out_channels=4, kernel_size=3)
    args.update(kw)
    net = fill_params(ms, _wrap(ms, ms.nn.Conv2dTranspose(**args), "deconv"), seed=seed, scale=0.5)
    return net, T(ms, rand(*x_shape, seed=35))


@case("nn_layers/deconv_same_stride1")
def _(ms):
    net, x = _deconv(ms)
    return net(x), param_names(net)


@case("nn_layers/deconv_same_stride2")
def _(ms):
    net, x = _deconv(ms, stride=2)
    return net(x)


@case("nn_layers/deconv_valid_stride2_bias")
def _(ms):
    net, x = _deconv(ms, stride=2, pad_mode="valid", has_bias=True)
    return net(x), param_names(net)


@case("nn_layers/deconv_pad_asymmetric")
def _(ms):
    net, x = _deconv(ms, pad_mode="pad", padding=(1, 0, 2, 1), kernel_size=(3, 2))
    return net(x)


@case("nn_layers/deconv_pad_output_padding_bias")
def _(ms):
    net, x = _deconv(ms, pad_mode="pad", padding=1, stride=2, output_padding=1, has_bias=True)
    return net(x)


@case("nn_layers/deconv_dilation_and_group")
def _(ms):
    net, x = _deconv(ms, out_channels=6, group=3, dilation=2, pad_mode="valid")
    return net(x), param_names(net)


@case("nn_layers/deconv_valid_kernel_smaller_than_stride")
def _(ms):
    net, x = _deconv(ms, kernel_size=2, stride=3, pad_mode="valid")
    return net(x)


@case("nn_layers/deconv_grads", **GRAD_TOL)
def _(ms):
    net, x = _deconv(ms, x_shape=(1, 3, 3, 3), stride=2, has_bias=True)
    return _weighted_sum_grads(ms, net, x, (1, 4, 6, 6))


@case("nn_layers/deconv_output_padding_needs_pad_mode", raises=True)
def _(ms):
    net, x = _deconv(ms, stride=2, output_padding=1)
    return net(x)


# =================================================================================================
# Conv2d and Dense defaults (pad_mode 'same', no bias for Conv2d; names weight / bias)
@case("nn_layers/conv2d_defaults_and_names")
def _(ms):
    conv = ms.nn.Conv2d(3, 2, 3)
    net = fill_params(ms, _wrap(ms, ms.nn.Conv2d(3, 2, 3, has_bias=True), "conv"), seed=10)
    x = T(ms, rand(1, 3, 5, 5, seed=36))
    return param_names(conv), conv.pad_mode, conv(x).shape, param_names(net), net(x)


@case("nn_layers/conv2d_group_dilation_pad")
def _(ms):
    net = fill_params(ms, _wrap(ms, ms.nn.Conv2d(4, 4, 3, stride=2, pad_mode="pad", padding=(1, 0, 1, 2), dilation=2,
                                                 group=2), "conv"), seed=11)
    return net(T(ms, rand(1, 4, 7, 7, seed=37)))


@case("nn_layers/dense_names")
def _(ms):
    return param_names(ms.nn.Dense(3, 2)), param_names(_wrap(ms, ms.nn.Dense(3, 2, has_bias=False), "fc"))


# =================================================================================================
# pools
@case("nn_layers/maxpool1d_modes")
def _(ms):
    x = T(ms, rand(2, 3, 9, seed=38))
    nn = ms.nn
    return (nn.MaxPool1d()(x), nn.MaxPool1d(3, 2)(x), nn.MaxPool1d(4, 2, pad_mode="same")(x),
            nn.MaxPool1d(3, 2, pad_mode="pad", padding=1, return_indices=True)(x),
            nn.MaxPool1d(3, 1, pad_mode="pad", padding=1, dilation=2)(x),
            nn.MaxPool1d(2, 2)(T(ms, rand(3, 7, seed=39))))


@case("nn_layers/maxpool1d_ceil_mode_needs_pad_mode", raises=True)
def _(ms):
    return ms.nn.MaxPool1d(3, 2, ceil_mode=True)


@case("nn_layers/avgpool1d_modes")
def _(ms):
    x = T(ms, rand(2, 3, 9, seed=40))
    nn = ms.nn
    return (nn.AvgPool1d()(x), nn.AvgPool1d(3, 2)(x), nn.AvgPool1d(4, 2, pad_mode="same")(x),
            nn.AvgPool1d(3, 2, pad_mode="pad", padding=1)(x),
            nn.AvgPool1d(3, 2, pad_mode="pad", padding=1, count_include_pad=False)(x),
            nn.AvgPool1d(3, 2, ceil_mode=True)(x), nn.AvgPool1d(9, 1)(x), nn.AvgPool1d(2, 3)(T(ms, rand(3, 8, seed=41))))


@case("nn_layers/ops_avg_pool1d")
def _(ms):
    x = T(ms, rand(2, 3, 9, seed=42))
    return (ms.ops.avg_pool1d(x, 3), ms.ops.avg_pool1d(x, 3, 2, 1),
            ms.ops.avg_pool1d(x, kernel_size=3, stride=2, padding=1, count_include_pad=False),
            ms.ops.avg_pool1d(x, 2, 2, ceil_mode=True))


@case("nn_layers/pool1d_grads", **GRAD_TOL)
def _(ms):
    nn = ms.nn
    x = T(ms, rand(2, 2, 8, seed=43))
    _, gmax = ms.value_and_grad(lambda a: (nn.MaxPool1d(3, 2, pad_mode="same")(a) * T(ms, rand(2, 2, 4, seed=1))).sum())(x)
    _, gavg = ms.value_and_grad(lambda a: (nn.AvgPool1d(3, 2, pad_mode="pad", padding=1)(a)
                                           * T(ms, rand(2, 2, 4, seed=2))).sum())(x)
    return gmax, gavg


@case("nn_layers/maxpool2d_avgpool2d_same_and_pad")
def _(ms):
    nn = ms.nn
    x = T(ms, rand(2, 3, 7, 6, seed=44))
    return (nn.MaxPool2d(3, 2, pad_mode="same")(x), nn.AvgPool2d(3, 2, pad_mode="same")(x),
            nn.MaxPool2d(3, 2, pad_mode="pad", padding=1, return_indices=True)(x),
            nn.AvgPool2d(3, 2, pad_mode="pad", padding=(1, 0), count_include_pad=False)(x),
            nn.AvgPool2d(2, 2, ceil_mode=True)(x), nn.MaxPool2d(2, 2)(T(ms, rand(3, 4, 4, seed=45))))


@case("nn_layers/maxpool2d_return_indices_needs_pad_mode", raises=True)
def _(ms):
    return ms.nn.MaxPool2d(2, 2, return_indices=True)


@case("nn_layers/adaptive_avg_pool2d_sizes")
def _(ms):
    nn = ms.nn
    x = T(ms, rand(2, 3, 7, 5, seed=46))
    return (nn.AdaptiveAvgPool2d(1)(x), nn.AdaptiveAvgPool2d((1, 1))(x), nn.AdaptiveAvgPool2d((3, 2))(x),
            nn.AdaptiveAvgPool2d((None, 2))(x), nn.AdaptiveAvgPool2d((4, 3))(x),
            nn.AdaptiveAvgPool2d(2)(T(ms, rand(3, 6, 4, seed=47))))


@case("nn_layers/ops_adaptive_avg_pool2d")
def _(ms):
    x = T(ms, rand(1, 2, 5, 8, seed=48))
    return ms.ops.adaptive_avg_pool2d(x, (2, 3)), ms.ops.adaptive_avg_pool2d(x, 4)


@case("nn_layers/adaptive_max_pool2d_with_indices")
def _(ms):
    x = T(ms, rand(2, 3, 7, 5, seed=49))
    return (ms.nn.AdaptiveMaxPool2d((3, 2), return_indices=True)(x), ms.nn.AdaptiveMaxPool2d(1)(x),
            ms.ops.adaptive_max_pool2d(x, (2, None)))


@case("nn_layers/adaptive_pool_grads", **GRAD_TOL)
def _(ms):
    x = T(ms, rand(1, 2, 5, 7, seed=50))
    _, ga = ms.value_and_grad(lambda a: (ms.nn.AdaptiveAvgPool2d((3, 2))(a) * T(ms, rand(1, 2, 3, 2, seed=3))).sum())(x)
    _, gm = ms.value_and_grad(lambda a: (ms.nn.AdaptiveMaxPool2d((2, 3))(a) * T(ms, rand(1, 2, 2, 3, seed=4))).sum())(x)
    return ga, gm


@case("nn_layers/global_avg_pool_head_grads", **GRAD_TOL)
def _(ms):
    nn = ms.nn

    class Head(nn.Cell):
        def __init__(self):
            super().__init__()
            self.pool = nn.AdaptiveAvgPool2d((1, 1))
            self.flatten = nn.Flatten()
            self.fc = nn.Dense(4, 3)

        def construct(self, x):
            return self.fc(self.flatten(self.pool(x)))
    net = fill_params(ms, Head(), seed=12)
    return _weighted_sum_grads(ms, net, T(ms, rand(2, 4, 3, 3, seed=51)), (2, 3))


# =================================================================================================
# Dropout2d (random masks differ between frameworks: compare the structure, not the mask)
@case("nn_layers/dropout2d_eval_is_identity")
def _(ms):
    d = ms.nn.Dropout2d(0.5)
    x = T(ms, rand(2, 3, 2, 2, seed=52))
    return d(x)


@case("nn_layers/dropout2d_train_drops_whole_channels")
def _(ms):
    d = ms.nn.Dropout2d(0.5)
    d.set_train()
    y = d(T(ms, np.ones((4, 8, 3, 3)))).asnumpy()
    planes = y.reshape(32, 9)
    constant = bool(np.all(planes == planes[:, :1]))
    values = sorted(set(np.unique(y).tolist()) | {0.0, 2.0})
    return constant, values, y.shape


@case("nn_layers/ops_dropout2d_p0_and_eval")
def _(ms):
    x = T(ms, rand(1, 2, 2, 2, seed=53))
    return ms.ops.dropout2d(x, 0.0), ms.ops.dropout2d(x, 0.7, training=False)


@case("nn_layers/dropout2d_p_must_be_float", raises=True)
def _(ms):
    return ms.nn.Dropout2d(1)


@case("nn_layers/dropout2d_p_out_of_range", raises=True)
def _(ms):
    return ms.nn.Dropout2d(-0.1)


@case("nn_layers/dropout2d_rank3_input", raises=True)
def _(ms):
    d = ms.nn.Dropout2d(0.5)
    d.set_train()
    return d(T(ms, rand(2, 3, 4, seed=0))).asnumpy()


# =================================================================================================
# Flatten / Identity
@case("nn_layers/flatten_and_identity")
def _(ms):
    x = T(ms, rand(2, 3, 2, 2, seed=54))
    nn = ms.nn
    return (nn.Flatten()(x), nn.Flatten(start_dim=0)(x), nn.Flatten(2)(x), nn.Flatten(1, 2)(x), nn.Identity()(x))
