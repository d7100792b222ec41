"""`mindspore.mint`: PyTorch-style functional names and arguments (dim/keepdim, alpha, (values,
indices) with Int64 indices), mint.nn layers (parameter names, shapes), mint.nn.functional and
mint.optim steps. Only what MindSpore 2.10 runs on CPU has a case (many mint kernels are
Ascend-only there: mint.arange, full, zeros_like, argmax, sort, cumsum, var, stack, mm, ...)."""
import numpy as np

from msdiff import case, fill_params, rand, sub


def _x(ms, *shape, seed=0):
    return ms.Tensor(rand(*shape, seed=seed))


def _mint(ms):
    return sub(ms, "mint")


@case("mint/add_sub_alpha")
def _(ms):
    m = _mint(ms)
    x, y = _x(ms, 2, 3), _x(ms, 2, 3, seed=1)
    return m.add(x, y, alpha=2), m.sub(x, y, alpha=0.5), m.add(x, 2), m.mul(x, 3)


@case("mint/div_rounding_modes")
def _(ms):
    m = _mint(ms)
    x = ms.Tensor(np.array([-3.0, -1.5, 0.5, 2.5, 7.0], np.float32))
    return m.div(x, 2), m.div(x, 2, rounding_mode="floor"), m.div(x, 2, rounding_mode="trunc")


@case("mint/div_int_is_float")
def _(ms):
    return _mint(ms).div(ms.Tensor(np.arange(6, dtype=np.int32)), 4)


@case("mint/sum_dim_keepdim_dtype")
def _(ms):
    m = _mint(ms)
    x = _x(ms, 2, 3, 4)
    return m.sum(x), m.sum(x, 1, True), m.sum(x, dim=(0, 2)), m.sum(x, dim=0, dtype=ms.float64)


@case("mint/sum_int32_is_int64")
def _(ms):
    return _mint(ms).sum(ms.Tensor(np.arange(6, dtype=np.int32).reshape(2, 3)), dim=0)


@case("mint/mean_dim_tuple_keepdim")
def _(ms):
    m = _mint(ms)
    x = _x(ms, 2, 3, 4)
    return m.mean(x), m.mean(x, dim=1), m.mean(x, (0, 2), keepdim=True)


@case("mint/max_min_overloads")
def _(ms):
    m = _mint(ms)
    x, y = _x(ms, 3, 4), _x(ms, 3, 4, seed=1)
    return m.max(x), m.max(x, 1), m.max(x, dim=0, keepdim=True), m.max(x, y), m.min(x, 1)


@case("mint/prod_all_any")
def _(ms):
    m = _mint(ms)
    x = _x(ms, 2, 3)
    return m.prod(x), m.prod(x, 1, True), m.all(x > -0.5), m.any(x > 0.5, 1)


@case("mint/matmul_bmm")
def _(ms):
    m = _mint(ms)
    return m.matmul(_x(ms, 2, 3, 4), _x(ms, 4, 5, seed=1)), m.bmm(_x(ms, 2, 3, 4), _x(ms, 2, 4, 2, seed=2))


@case("mint/cat_split_chunk")
def _(ms):
    m = _mint(ms)
    a, b = _x(ms, 2, 3), _x(ms, 2, 3, seed=1)
    x = _x(ms, 2, 5)
    return m.cat((a, b), dim=1), m.cat([a, b]), m.split(x, 2, dim=1), m.split(x, [1, 4], dim=1), m.chunk(x, 2, dim=1)


@case("mint/transpose_swaps_two_dims_permute")
def _(ms):
    m = _mint(ms)
    x = _x(ms, 2, 3, 4)
    return m.transpose(x, 0, 2), m.transpose(x, -1, 1), m.permute(x, (2, 0, 1)), m.swapaxes(x, 0, 1)


@case("mint/reshape_flatten_squeeze_unsqueeze")
def _(ms):
    m = _mint(ms)
    x = _x(ms, 2, 3, 4)
    return (m.reshape(x, (4, -1)), m.flatten(x), m.flatten(x, 1), m.squeeze(_x(ms, 2, 1, 3), 1),
            m.unsqueeze(x, 0).shape)


@case("mint/zeros_ones_eye")
def _(ms):
    m = _mint(ms)
    return m.zeros((2, 3)), m.zeros((2,), dtype=ms.int32), m.ones(3), m.eye(2, 3)


@case("mint/where_clamp")
def _(ms):
    m = _mint(ms)
    x, y = _x(ms, 2, 3), _x(ms, 2, 3, seed=1)
    return (m.where(x > 0, x, y), m.where(x > 0, x, 0.0), m.clamp(x, -0.5, 0.5), m.clamp(x, min=0.0),
            m.clamp(x, ms.Tensor(np.array([-0.2, 0.0, 0.2], np.float32))))


@case("mint/softmax_dim")
def _(ms):
    m = _mint(ms)
    x = _x(ms, 3, 4)
    return m.softmax(x, 1), m.softmax(x, dim=0)


@case("mint/unary_math", rtol=1e-5, atol=1e-6)
def _(ms):
    m = _mint(ms)
    x = _x(ms, 2, 3)
    p = ms.Tensor(rand(2, 3, low=0.5, high=2.0))
    return (m.abs(x), m.exp(x), m.sqrt(p), m.rsqrt(p), m.neg(x), m.square(x), m.erf(x), m.tanh(x), m.sigmoid(x),
            m.round(x * 3), m.log1p(p))


@case("mint/pow_and_scalar_base")
def _(ms):
    m = _mint(ms)
    x = ms.Tensor(rand(2, 3, low=0.5, high=2.0))
    return m.pow(x, 2), m.pow(2, x)


@case("mint/comparisons_and_logic")
def _(ms):
    m = _mint(ms)
    x, y = _x(ms, 2, 3), _x(ms, 2, 3, seed=1)
    return m.eq(x, x), m.maximum(x, y), m.logical_and(x > 0, y > 0), m.isfinite(x), m.remainder(x * 4, 1.5)


@case("mint/gather_is_elementwise")
def _(ms):
    return _mint(ms).gather(_x(ms, 2, 3), 1, ms.Tensor(np.array([[0, 0], [1, 2]], np.int64)))


@case("mint/tile_flip_broadcast_to")
def _(ms):
    m = _mint(ms)
    x = _x(ms, 2, 3)
    return m.tile(x, (2,)), m.flip(x, (0, 1)), m.broadcast_to(x, (2, 2, 3))


@case("mint/scatter_narrow_unbind")
def _(ms):
    m = _mint(ms)
    x = _x(ms, 2, 3)
    z = m.zeros((2, 3))
    return (m.scatter(z, 1, ms.Tensor(np.array([[0], [2]], np.int64)), ms.Tensor(np.ones((2, 1), np.float32))),
            m.narrow(x, 1, 1, 2), m.unbind(x, 1))


@case("mint/masked_select_nonzero_meshgrid")
def _(ms):
    m = _mint(ms)
    x = _x(ms, 2, 3)
    a, b = ms.Tensor(np.array([1.0, 2.0], np.float32)), ms.Tensor(np.array([1.0, 2.0, 3.0], np.float32))
    return m.masked_select(x, x > 0), m.nonzero(x > 0), m.meshgrid(a, b, indexing="ij")


@case("mint/transpose_bad_dim", raises=True)
def _(ms):
    return _mint(ms).transpose(_x(ms, 2, 3), 0, 2)


@case("mint/cat_mismatched", raises=True)
def _(ms):
    return _mint(ms).cat((_x(ms, 2, 3), _x(ms, 3, 4)), dim=1)


@case("mint/narrow_out_of_range", raises=True)
def _(ms):
    return _mint(ms).narrow(_x(ms, 2, 3), 1, 2, 3)


# -- mint.nn.functional -----------------------------------------------------------------------------------
def _F(ms):
    return sub(ms, "mint.nn.functional")


@case("mint/functional_activations", rtol=1e-5, atol=1e-6)
def _(ms):
    F = _F(ms)
    x = _x(ms, 2, 3) * 3
    return F.relu(x), F.silu(x), F.softmax(x, dim=1), F.softplus(x), F.tanh(x), F.sigmoid(x), F.hardswish(x)


@case("mint/functional_glu")
def _(ms):
    return _F(ms).glu(_x(ms, 2, 4))


@case("mint/functional_linear")
def _(ms):
    F = _F(ms)
    return F.linear(_x(ms, 2, 3), _x(ms, 4, 3, seed=1), _x(ms, 4, seed=2)), F.linear(_x(ms, 2, 3), _x(ms, 4, 3, seed=1))


@case("mint/functional_losses", rtol=1e-5, atol=1e-6)
def _(ms):
    F = _F(ms)
    x = _x(ms, 2, 3)
    t = ms.Tensor(rand(2, 3, seed=3, low=0.0, high=1.0))
    return (F.binary_cross_entropy_with_logits(x, t), F.binary_cross_entropy(F.sigmoid(x), t),
            F.binary_cross_entropy_with_logits(x, t, reduction="sum"), F.smooth_l1_loss(x, t),
            F.smooth_l1_loss(x, t, reduction="none", beta=0.5))


@case("mint/functional_dropout_eval_identity")
def _(ms):
    x = _x(ms, 2, 3)
    return _F(ms).dropout(x, 0.5, training=False)


@case("mint/functional_interpolate_nearest")
def _(ms):
    x = ms.Tensor(np.arange(4, dtype=np.float32).reshape(1, 1, 2, 2))
    return _F(ms).interpolate(x, scale_factor=2.0)


@case("mint/functional_group_norm", rtol=1e-5, atol=1e-5)
def _(ms):
    return _F(ms).group_norm(_x(ms, 2, 4, 3), 2)


# -- mint.nn layers ---------------------------------------------------------------------------------------
@case("mint/nn_parameter_names")
def _(ms):
    nn = sub(ms, "mint.nn")
    nets = [nn.Linear(3, 4), nn.Linear(3, 4, bias=False), nn.Conv2d(2, 3, 3), nn.LayerNorm(4),
            nn.LayerNorm((2, 4), elementwise_affine=False), nn.Embedding(5, 3), nn.BatchNorm2d(3), nn.GroupNorm(2, 4)]
    return [[(p.name, tuple(p.shape), p.requires_grad) for p in n.get_parameters()] for n in nets]


@case("mint/nn_linear_forward_and_grad", rtol=1e-5, atol=1e-6)
def _(ms):
    nn = sub(ms, "mint.nn")
    net = fill_params(ms, nn.Linear(3, 4), seed=1)
    x = _x(ms, 2, 3)

    def loss(x):
        return net(x).sum()
    grads = ms.value_and_grad(lambda x: net(x).sum(), None, net.trainable_params())(x)
    return net(x), grads


@case("mint/nn_embedding_padding_row_zero")
def _(ms):
    e = sub(ms, "mint.nn").Embedding(5, 3, padding_idx=0)
    return e.weight[0], e.weight.shape


@case("mint/nn_activation_cells")
def _(ms):
    nn = sub(ms, "mint.nn")
    x = _x(ms, 2, 3) * 3
    return nn.ReLU()(x), nn.Softmax(dim=1)(x), nn.Flatten()(_x(ms, 2, 3, 4)).shape, nn.GELU().approximate if hasattr(nn.GELU(), "approximate") else "none"


@case("mint/nn_dropout_eval_and_loss_bce", rtol=1e-5)
def _(ms):
    nn = sub(ms, "mint.nn")
    d = nn.Dropout(0.5)
    d.set_train(False)
    x = _x(ms, 2, 3)
    t = ms.Tensor(rand(2, 3, seed=3, low=0.0, high=1.0))
    return d(x), nn.BCEWithLogitsLoss()(x, t), nn.SmoothL1Loss()(x, t)


# -- mint.optim -------------------------------------------------------------------------------------------
# (No optimizer-step cases: MindSpore 2.10's CPU wheel has no AdamW/Adam kernel for mint.optim, and its
# mint.optim.SGD leaves the loss unchanged from the second step on; minispore follows PyTorch's rule.)
def _train(ms, make_opt, steps=3):
    nn = sub(ms, "mint.nn")
    net = fill_params(ms, nn.Linear(3, 2), seed=4)
    opt = make_opt(net.trainable_params())
    x = _x(ms, 4, 3, seed=5)
    t = _x(ms, 4, 2, seed=6)

    def loss_fn(x, t):
        d = net(x) - t
        return (d * d).mean()
    grad_fn = ms.value_and_grad(loss_fn, None, opt.parameters)
    losses = []
    for _ in range(steps):
        loss, grads = grad_fn(x, t)
        opt(grads)
        losses.append(float(loss.asnumpy()))
    return losses, net.weight, net.bias


@case("mint/optim_state_parameter_names")
def _(ms):
    optim = sub(ms, "mint.optim")
    net = sub(ms, "mint.nn").Linear(3, 2)
    return [p.name for p in optim.AdamW(net.trainable_params()).get_parameters()]
