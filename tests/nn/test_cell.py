"""nn.Cell: registration order and names, traversal, modes, hooks, to_float, repr, custom bprop."""
from collections import OrderedDict

import numpy as np
import pytest

import minispore as ms
from minispore import nn
from minispore.common.errors import MinisporeRuntimeError, OpTypeError, OpValueError


class Net(nn.Cell):
    """The reference net of mindspore_api.md §3."""

    def __init__(self):
        super().__init__()
        self.p = ms.Parameter(np.ones((2, 3), np.float32))
        self.sub = nn.SequentialCell([nn.Dense(3, 4), nn.ReLU(), nn.Dense(4, 2)])
        self.lst = nn.CellList([nn.Dense(2, 2)])

    def construct(self, x):
        x = self.sub(x)
        for c in self.lst:
            x = c(x)
        return x


def test_parameter_names_and_order_match_mindspore():
    net = Net()
    names = ['p', 'sub.0.weight', 'sub.0.bias', 'sub.2.weight', 'sub.2.bias', 'lst.0.weight', 'lst.0.bias']
    assert [n for n, _ in net.parameters_and_names()] == names
    assert [p.name for p in net.trainable_params()] == names          # .name is the dotted path too
    assert list(net.parameters_dict()) == names
    assert [n for n, _ in net.cells_and_names()] == ['', 'sub', 'sub.0', 'sub.1', 'sub.2', 'lst', 'lst.0']
    assert list(net.name_cells()) == ['sub', 'lst']
    assert [type(c).__name__ for c in net.cells()] == ['SequentialCell', 'CellList']
    assert [n for n, _ in net.parameters_and_names(expand=False)] == ['p']
    assert [n for n, _ in net.sub.parameters_and_names(name_prefix='sub')][:1] == ['sub.0.weight']


def test_nested_names_blocks_and_heads():
    class Block(nn.Cell):
        def __init__(self):
            super().__init__()
            self.norm = nn.LayerNorm((4,))
            self.proj = nn.Dense(4, 4)

    class Model(nn.Cell):
        def __init__(self):
            super().__init__()
            self.blocks = nn.CellList([Block(), Block()])
            self.head = nn.Dense(4, 3, has_bias=False)

    m = Model()
    names = [p.name for p in m.get_parameters()]
    assert names == ['blocks.0.norm.gamma', 'blocks.0.norm.beta', 'blocks.0.proj.weight', 'blocks.0.proj.bias',
                     'blocks.1.norm.gamma', 'blocks.1.norm.beta', 'blocks.1.proj.weight', 'blocks.1.proj.bias',
                     'head.weight']
    # appending to an attached CellList keeps the full prefix
    m.blocks.append(Block())
    assert m.blocks[2].proj.weight.name == 'blocks.2.proj.weight'
    assert len(m.blocks) == 3 and m.blocks[-1] is m.blocks[2]


def test_sequential_from_ordered_dict_and_slicing():
    seq = nn.SequentialCell(OrderedDict([("fc", nn.Dense(2, 3)), ("act", nn.Tanh())]))
    assert [p.name for p in seq.get_parameters()] == ['fc.weight', 'fc.bias']
    head = seq[:1]
    assert len(head) == 1 and head[0] is seq.fc
    assert seq.fc.weight.name == 'fc.weight'                       # slicing does not rename
    x = ms.Tensor(np.ones((1, 2), np.float32))
    np.testing.assert_allclose(seq(x).asnumpy(), np.tanh(seq.fc(x).asnumpy()), rtol=1e-6)


def test_untrainable_and_shared_parameters():
    class M(nn.Cell):
        def __init__(self):
            super().__init__()
            self.a = nn.Dense(2, 2)
            self.b = self.a                                        # shared child: listed once
            self.frozen = ms.Parameter(np.zeros(2, np.float32), requires_grad=False)

    m = M()
    assert [p.name for p in m.trainable_params()] == ['a.weight', 'a.bias']
    assert [p.name for p in m.untrainable_params()] == ['frozen']
    assert [n for n, _ in m.cells_and_names()] == ['', 'a']


def test_setattr_tensor_into_parameter_and_none():
    d = nn.Dense(2, 2)
    d.weight = ms.Tensor(np.full((2, 2), 3.0, np.float32))       # set_data on the existing Parameter
    assert isinstance(d.weight, ms.Parameter) and (d.weight.asnumpy() == 3).all()
    d.bias = None
    assert d.bias is None and [p.name for p in d.get_parameters()] == ['weight']
    with pytest.raises(OpTypeError, match="Dense"):
        d.weight = "abc"


def test_insert_param_and_errors():
    c = nn.Cell()
    c.insert_param_to_cell("w", ms.Parameter(np.ones(1, np.float32)))
    assert c.w.name == "w"
    with pytest.raises(OpValueError, match="insert_param_to_cell"):
        c.insert_param_to_cell("a.b", ms.Parameter(np.ones(1, np.float32)))
    with pytest.raises(OpTypeError, match="insert_param_to_cell"):
        c.insert_param_to_cell("t", ms.Tensor(np.ones(1, np.float32)))

    class NoInit(nn.Cell):
        def __init__(self):
            self.w = ms.Parameter(np.ones(1, np.float32))

    with pytest.raises(MinisporeRuntimeError, match="super"):
        NoInit()


def test_set_train_recursive_and_default_eval():
    net = nn.SequentialCell([nn.Dense(2, 2), nn.Dropout(p=0.5)])
    assert net.training is False and net[1].training is False
    assert net.set_train() is net
    assert net[1].training and net[0].training
    net.set_train(False)
    assert not net[1].training
    assert net.set_grad() is net


def test_forward_hooks():
    d = nn.Dense(2, 2)
    seen = []
    h1 = d.register_forward_pre_hook(lambda cell, inputs: (inputs[0] * 2,))
    h2 = d.register_forward_hook(lambda cell, inputs, out: seen.append(out.shape) or out + 1)
    x = ms.Tensor(np.ones((1, 2), np.float32))
    w, b = d.weight.asnumpy(), d.bias.asnumpy()
    np.testing.assert_allclose(d(x).asnumpy(), 2 * np.ones((1, 2)) @ w.T + b + 1, rtol=1e-5, atol=1e-6)
    assert seen == [(1, 2)]
    h1.remove()
    h2.remove()
    np.testing.assert_allclose(d(x).asnumpy(), np.ones((1, 2)) @ w.T + b, rtol=1e-5, atol=1e-6)


def test_to_float_runs_in_half_keeps_fp32_params_and_gradients():
    d = nn.Dense(3, 4)
    d.to_float(ms.float16)
    x = ms.Tensor(np.random.default_rng(0).normal(size=(2, 3)).astype(np.float32))
    y = d(x)
    assert y.dtype == ms.float16
    assert d.weight.dtype == ms.float32                            # master weights stay fp32
    ref = x.asnumpy().astype(np.float16) @ d.weight.asnumpy().astype(np.float16).T + d.bias.asnumpy().astype(np.float16)
    np.testing.assert_allclose(y.asnumpy().astype(np.float32), ref.astype(np.float32), rtol=2e-3, atol=2e-3)
    loss, grads = ms.value_and_grad(lambda a: d(a).astype(ms.float32).sum(), None, d.trainable_params())(x)
    assert grads[0].dtype == ms.float32 and grads[0].shape == (4, 3)
    np.testing.assert_allclose(grads[0].asnumpy(), np.tile(x.asnumpy().sum(0), (4, 1)), rtol=2e-3)


def test_repr_tree():
    net = nn.SequentialCell([nn.Dense(3, 4), nn.ReLU()])
    assert repr(net) == ("SequentialCell<\n  (0): Dense<input_channels=3, output_channels=4, has_bias=True>\n"
                         "  (1): ReLU<>\n  >")


class Times100Grad(nn.Cell):
    """The reference custom bprop: forward x*y, gradient (100 * dout, 0)."""

    def construct(self, x, y):
        return x * y

    def bprop(self, x, y, out, dout):
        return 100 * dout, 0


def test_custom_bprop_overrides_autodiff():
    x = ms.Tensor(np.array([2.0, 3.0], np.float32))
    y = ms.Tensor(np.array([5.0, 7.0], np.float32))
    cell = Times100Grad()
    np.testing.assert_allclose(cell(x, y).asnumpy(), [10, 21])
    gx, gy = ms.grad(lambda a, b: cell(a, b).sum(), grad_position=(0, 1))(x, y)
    np.testing.assert_allclose(gx.asnumpy(), [100, 100])
    np.testing.assert_allclose(gy.asnumpy(), [0, 0])
    # composed with ordinary ops on both sides (chain rule through the custom node)
    g = ms.grad(lambda a: (cell(a * 3, y) ** 2).sum())(x)
    out = 3 * x.asnumpy() * y.asnumpy()
    np.testing.assert_allclose(g.asnumpy(), 2 * out * 100 * 3, rtol=1e-6)


def test_custom_bprop_identity_output_and_second_order():
    class PassThrough(nn.Cell):
        def construct(self, x):
            return x                                               # the output aliases the input

        def bprop(self, x, out, dout):
            return (dout * x,)                                     # "gradient" x * dout, to be visible

    x = ms.Tensor(np.array([1.5, -2.0], np.float32))
    cell = PassThrough()
    g = ms.grad(lambda a: cell(a * 2).sum())(x)
    np.testing.assert_allclose(g.asnumpy(), 2 * (2 * x.asnumpy()), rtol=1e-6)
    # the bprop is itself differentiated: d/dx sum(2 * (2x)) = 4
    gg = ms.grad(lambda a: ms.grad(lambda b: cell(b * 2).sum())(a).sum())(x)
    np.testing.assert_allclose(gg.asnumpy(), [4, 4], rtol=1e-6)


def test_custom_bprop_not_used_without_gradient_and_wrong_arity():
    class Bad(nn.Cell):
        def construct(self, x):
            return x * 2

        def bprop(self, x, out, dout):
            return dout, dout

    x = ms.Tensor(np.ones(2, np.float32))
    np.testing.assert_allclose(Bad()(x).asnumpy(), [2, 2])
    with pytest.raises(OpValueError, match="Bad.bprop"):
        ms.grad(lambda a: Bad()(a).sum())(x)


def test_celllist_list_operations_and_varargs_sequential():
    lst = nn.CellList([nn.Dense(2, 2), nn.ReLU()])
    lst.insert(1, nn.Tanh())
    assert [type(c).__name__ for c in lst] == ["Dense", "Tanh", "ReLU"]
    assert list(lst._cells) == ["0", "1", "2"]
    del lst[0]
    assert [type(c).__name__ for c in lst] == ["Tanh", "ReLU"] and list(lst._cells) == ["0", "1"]
    lst[1] = nn.Sigmoid()
    lst += [nn.Dense(2, 3)]
    assert [type(c).__name__ for c in lst] == ["Tanh", "Sigmoid", "Dense"]
    assert lst[2].weight.name == "2.weight"
    with pytest.raises(IndexError, match="CellList"):
        lst[5]
    with pytest.raises(OpTypeError, match="CellList.append"):
        lst.append(3)
    seq = nn.SequentialCell(nn.Dense(2, 3), nn.ReLU())
    assert len(seq) == 2 and seq(ms.Tensor(np.ones((1, 2), np.float32))).shape == (1, 3)


def test_conv_and_dense_default_bias_bounds():
    ms.set_seed(0)
    c = nn.Conv2d(4, 64, 3, has_bias=True)
    bound = 1 / np.sqrt(4 * 9)
    b = c.bias.asnumpy()
    assert np.abs(b).max() <= bound and np.abs(b).max() > 0.7 * bound
