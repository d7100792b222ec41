"""Autodiff return structures as MindSpore 2.10 has them: `grad` / `value_and_grad` with
grad_position (int, tuple, a tuple of one -> bare), weights (a list -> tuple, one Parameter -> bare),
has_aux, return_ids, sens_param, `GradOperation(get_all, get_by_list, sens_param)`, and gradients
through Tensor methods.

Left out (MindSpore 2.10 CPU quirks, see the report): a grad_position naming a non-Tensor argument
returns `()` there (minispore raises), and indexing a tensor with an int inside `grad` after some
view methods raises there ("Only support integers ... but got 0").
"""
import numpy as np

from msdiff import case, fill_params, rand


def XY(ms):
    return ms.Tensor(np.array([1.0, 2.0, 3.0], np.float32)), ms.Tensor(np.array([4.0, 5.0, 6.0], np.float32))


def dot(a, b):
    return (a * b).sum()


def net_of(ms):
    class Net(ms.nn.Cell):
        def __init__(self):
            super().__init__()
            self.w = ms.Parameter(ms.Tensor(np.array([0.5, -1.0, 2.0], np.float32)), name="w")
            self.b = ms.Parameter(ms.Tensor(np.array([0.1], np.float32)), name="b")

        def construct(self, a):
            return (a * self.w * self.w).sum() + self.b.sum() * 3

    return Net()


# -- grad_position ------------------------------------------------------------------------------------

@case("autodiff/grad_default_position_is_first_input")
def _(ms):
    x, y = XY(ms)
    return ms.grad(dot)(x, y), ms.grad(dot, grad_position=1)(x, y)


@case("autodiff/grad_position_tuple_of_one_is_bare")
def _(ms):
    x, y = XY(ms)
    return ms.grad(dot, grad_position=(0,))(x, y), ms.ops.grad(dot, grad_position=(1,))(x, y)


@case("autodiff/grad_position_tuple")
def _(ms):
    x, y = XY(ms)
    return ms.grad(dot, grad_position=(0, 1))(x, y), ms.grad(dot, grad_position=(1, 0))(x, y)


@case("autodiff/grad_position_list_raises", raises=True)
def _(ms):
    x, y = XY(ms)
    return ms.grad(dot, grad_position=[0, 1])(x, y)


@case("autodiff/grad_position_negative_raises", raises=True)
def _(ms):
    x, y = XY(ms)
    return ms.grad(dot, grad_position=-1)(x, y)


@case("autodiff/grad_position_out_of_range_raises", raises=True)
def _(ms):
    x, y = XY(ms)
    return ms.grad(dot, grad_position=2)(x, y)


@case("autodiff/nothing_to_differentiate_raises", raises=True)
def _(ms):
    x, y = XY(ms)
    return ms.grad(dot, grad_position=None)(x, y)


@case("autodiff/value_and_grad_positions")
def _(ms):
    x, y = XY(ms)
    return (ms.value_and_grad(dot)(x, y), ms.value_and_grad(dot, grad_position=(0,))(x, y),
            ms.value_and_grad(dot, grad_position=(0, 1))(x, y))


# -- several outputs, has_aux -----------------------------------------------------------------------------

@case("autodiff/several_outputs_differentiate_their_sum")
def _(ms):
    x, y = XY(ms)
    f = lambda a, b: (a * b, a + b)  # noqa: E731
    return ms.grad(f)(x, y), ms.value_and_grad(f)(x, y), ms.grad(f, grad_position=(0, 1))(x, y)


@case("autodiff/has_aux_grad")
def _(ms):
    x, y = XY(ms)
    f = lambda a, b: (a * b, a + b)  # noqa: E731
    return ms.grad(f, has_aux=True)(x, y), ms.grad(f, grad_position=(0,), has_aux=True)(x, y)


@case("autodiff/has_aux_value_and_grad")
def _(ms):
    x, y = XY(ms)
    f = lambda a, b: ((a * b).sum(), a + b, a - b)  # noqa: E731
    return ms.value_and_grad(f, has_aux=True)(x, y), ms.grad(f, has_aux=True)(x, y), \
        ms.value_and_grad(f, grad_position=(0, 1), has_aux=True)(x, y)


@case("autodiff/has_aux_list_aux_kept")
def _(ms):
    x, y = XY(ms)
    return ms.grad(lambda a, b: ((a * b).sum(), [a + b]), has_aux=True)(x, y)


@case("autodiff/has_aux_single_output_raises", raises=True)
def _(ms):
    x, _ = XY(ms)
    return ms.grad(lambda a: (a * a).sum(), has_aux=True)(x)


# -- weights --------------------------------------------------------------------------------------------

@case("autodiff/weights_only")
def _(ms):
    x, _ = XY(ms)
    net = net_of(ms)
    return ms.grad(net, grad_position=None, weights=net.trainable_params())(x)


@case("autodiff/weights_and_inputs")
def _(ms):
    x, _ = XY(ms)
    net = net_of(ms)
    ws = net.trainable_params()
    return ms.grad(net, grad_position=0, weights=ws)(x), ms.grad(net, grad_position=(0,), weights=ws)(x)


@case("autodiff/one_parameter_as_weights_is_bare")
def _(ms):
    x, _ = XY(ms)
    net = net_of(ms)
    return ms.grad(net, grad_position=None, weights=net.w)(x), ms.grad(net, grad_position=0, weights=net.b)(x)


@case("autodiff/value_and_grad_weights")
def _(ms):
    x, _ = XY(ms)
    net = net_of(ms)
    ws = net.trainable_params()
    return (ms.value_and_grad(net, grad_position=None, weights=ws)(x),
            ms.value_and_grad(net, grad_position=0, weights=ws)(x))


@case("autodiff/return_ids")
def _(ms):
    x, y = XY(ms)
    net = net_of(ms)
    ws = net.trainable_params()
    return (ms.grad(net, grad_position=None, weights=ws, return_ids=True)(x),
            ms.grad(dot, grad_position=(0, 1), return_ids=True)(x, y),
            ms.grad(dot, grad_position=0, return_ids=True)(x, y),
            ms.grad(net, grad_position=0, weights=ws, return_ids=True)(x))


@case("autodiff/dense_net_with_loss_names_and_grads")
def _(ms):
    nn = ms.nn
    net = fill_params(ms, nn.Dense(3, 2), seed=1)
    loss_fn = nn.MSELoss()
    x = ms.Tensor(rand(4, 3, seed=2))
    t = ms.Tensor(rand(4, 2, seed=3))
    fwd = lambda a, b: loss_fn(net(a), b)  # noqa: E731
    loss, grads = ms.value_and_grad(fwd, None, net.trainable_params())(x, t)
    return loss, grads, [p.name for p in net.trainable_params()]


# -- sens_param, GradOperation ----------------------------------------------------------------------------

@case("autodiff/sens_param")
def _(ms):
    x, _ = XY(ms)
    s = ms.Tensor(np.array([1.0, 10.0, 100.0], np.float32))
    ones = ms.Tensor(np.ones(3, np.float32))
    return (ms.grad(lambda a: a * 2, sens_param=True)(x, s),
            ms.grad(lambda a: a * 2, grad_position=(0,), sens_param=True)(x, s),
            ms.value_and_grad(lambda a: a * 2, sens_param=True)(x, s),
            ms.grad(lambda a: (a * 2, a * 3), sens_param=True)(x, (ones, ones)))


@case("autodiff/non_scalar_output_uses_ones")
def _(ms):
    x, _ = XY(ms)
    return ms.grad(lambda a: a * a * 2)(x)


@case("autodiff/grad_operation_forms")
def _(ms):
    x, y = XY(ms)
    G = ms.ops.GradOperation
    s = ms.Tensor(np.array([1.0, 10.0, 100.0], np.float32))
    return (G()(dot)(x, y), G(get_all=True)(dot)(x, y), G(get_all=True)(lambda a: (a * a).sum())(x),
            G(sens_param=True)(lambda a: a * 2)(x, s), G()(lambda a, b: (a * b, a + b))(x, y))


@case("autodiff/grad_operation_with_parameters")
def _(ms):
    x, _ = XY(ms)
    net = net_of(ms)
    G = ms.ops.GradOperation
    ws = ms.ParameterTuple(net.trainable_params())
    return G(get_by_list=True)(net, ws)(x), G(get_all=True, get_by_list=True)(net, ws)(x)


# -- values of gradients --------------------------------------------------------------------------------

@case("autodiff/unused_input_gets_zeros")
def _(ms):
    x, y = XY(ms)
    return ms.grad(lambda a, b: (a * a).sum(), grad_position=(0, 1))(x, y)


@case("autodiff/gradient_has_the_input_dtype")
def _(ms):
    return (ms.grad(lambda a: a.sum())(ms.Tensor(np.array([1, 2], np.int32))),
            ms.grad(lambda a: (a * a).sum())(ms.Tensor(np.array([1.0, 2.0], np.float64))),
            ms.grad(lambda a: (a * a).sum())(ms.Tensor(np.array([1.0, 2.0], np.float16))))


@case("autodiff/grad_of_grad_and_stop_gradient")
def _(ms):
    x, _ = XY(ms)
    g2 = ms.grad(ms.grad(lambda a: (a ** 3).sum()))(x)
    s = ms.grad(lambda a: ms.ops.stop_gradient(a) * a)(ms.Tensor(np.array(2.0, np.float32)))
    return g2, s


@case("autodiff/grad_through_shape_methods")
def _(ms):
    m = ms.Tensor(rand(2, 3, seed=4))
    w = ms.Tensor(rand(3, 2, seed=5))
    c = ms.Tensor(rand(2, 3, 4, seed=6))
    return (ms.grad(lambda a: (a.transpose(1, 0) * w).sum())(m),
            ms.grad(lambda a: (a.view(3, 2) * w).sum())(m),
            ms.grad(lambda a: (a.permute(2, 0, 1) * c.permute(2, 0, 1)).sum())(c),
            ms.grad(lambda a: (a.reshape(-1) * c.reshape(24)).sum())(c),
            ms.grad(lambda a: (a.expand(2, 3) * m).sum())(ms.Tensor(np.ones((1, 3), np.float32))))


@case("autodiff/grad_through_reduction_methods")
def _(ms):
    m = ms.Tensor(rand(2, 3, seed=7))
    return (ms.grad(lambda a: (a.mean(axis=0) * a.sum(1, keepdim=True)).sum())(m),
            ms.grad(lambda a: a.prod())(ms.Tensor(np.array([1.0, 2.0, 3.0], np.float32))),
            ms.grad(lambda a: a.max(1)[0].sum())(m),
            ms.grad(lambda a: a.min(axis=0).sum())(m))


@case("autodiff/max_ties_split_but_max_dim_picks_one")
def _(ms):
    t = ms.Tensor(np.array([1.0, 3.0, 3.0], np.float32))
    return ms.grad(lambda a: a.max())(t), ms.grad(lambda a: a.max(0)[0])(t)
