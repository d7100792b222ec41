"""nn.LSTM / nn.GRU / nn.RNN and the single-step cells: MindSpore's parameter names and order,
outputs, final states and gradients against PyTorch with the same weights (MindSpore's layouts are
PyTorch's: gate order i, f, g, o and r, z, n), variable sequence lengths against running each
sequence alone, and bad input."""
import numpy as np
import pytest

import minispore as ms
from minispore import nn
from minispore.common.errors import MinisporeError, OpTypeError, OpValueError

try:
    import torch
except ImportError:                   # the comparisons are skipped without the 'torch' extra
    torch = None
needs_torch = pytest.mark.skipif(torch is None, reason="needs PyTorch")

rng = np.random.default_rng(0)


def T(a, dtype=np.float32):
    return ms.Tensor(np.asarray(a, dtype))


def _torch_twin(net, torch_cls, *args, **kwargs):
    """The PyTorch layer with the minispore layer's weights (the names are the same)."""
    twin = torch_cls(*args, **kwargs)
    twin.load_state_dict({name: torch.tensor(p.asnumpy()) for name, p in net.parameters_and_names()})
    return twin


def test_parameter_names_and_order_are_mindspores():
    lstm = nn.LSTM(3, 4, num_layers=2, bidirectional=True)
    names = [(n, tuple(p.shape)) for n, p in lstm.parameters_and_names()]
    want = []
    for group, shape in (("weight_ih", None), ("weight_hh", (16, 4)), ("bias_ih", (16,)), ("bias_hh", (16,))):
        for layer in range(2):
            for suffix in ("", "_reverse"):
                want.append((f"{group}_l{layer}{suffix}", shape or (16, 3 if layer == 0 else 8)))
    assert names == want
    assert [n for n, _ in nn.GRU(3, 5, has_bias=False).parameters_and_names()] == ["weight_ih_l0", "weight_hh_l0"]
    assert [(n, tuple(p.shape)) for n, p in nn.GRUCell(3, 5).parameters_and_names()] == [
        ("weight_ih", (15, 3)), ("weight_hh", (15, 5)), ("bias_ih", (15,)), ("bias_hh", (15,))]

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.rnn = nn.RNN(2, 3)

    assert [p.name for p in Net().get_parameters()] == ["rnn.weight_ih_l0", "rnn.weight_hh_l0", "rnn.bias_ih_l0",
                                                        "rnn.bias_hh_l0"]


def test_default_initialization_is_uniform_in_one_over_sqrt_hidden():
    w = nn.LSTM(3, 16).weight_hh_l0.asnumpy()
    assert np.abs(w).max() <= 0.25 and np.abs(w).max() > 0.2


CONFIGS = [dict(num_layers=1), dict(num_layers=2, bidirectional=True), dict(batch_first=True, has_bias=False),
           dict(num_layers=2, batch_first=True, bidirectional=True)]


def _torch_kwargs(cfg):
    k = dict(cfg)
    if "has_bias" in k:
        k["bias"] = k.pop("has_bias")
    return k


@pytest.mark.torch
@needs_torch
@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN_tanh", "RNN_relu"])
@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()))
def test_matches_torch_forward_and_backward(kind, cfg):
    name, _, nonlin = kind.partition("_")
    extra = {"nonlinearity": nonlin} if nonlin else {}
    net = getattr(nn, name)(3, 4, **cfg, **extra)
    twin = _torch_twin(net, getattr(torch.nn, name), 3, 4, **_torch_kwargs(cfg), **extra)
    dirs = 2 if cfg.get("bidirectional") else 1
    n_states = cfg.get("num_layers", 1) * dirs
    x = rng.standard_normal((2, 5, 3) if cfg.get("batch_first") else (5, 2, 3)).astype(np.float32)
    h0 = rng.standard_normal((n_states, 2, 4)).astype(np.float32)
    c0 = rng.standard_normal((n_states, 2, 4)).astype(np.float32)
    hx = (T(h0), T(c0)) if name == "LSTM" else T(h0)
    out, state = net(T(x), hx)
    tx = torch.tensor(x, requires_grad=True)
    t_out, t_state = twin(tx, (torch.tensor(h0), torch.tensor(c0)) if name == "LSTM" else torch.tensor(h0))
    np.testing.assert_allclose(out.asnumpy(), t_out.detach().numpy(), rtol=1e-5, atol=1e-6)
    states, t_states = (state, t_state) if name == "LSTM" else ((state,), (t_state,))
    for s, ts in zip(states, t_states):
        np.testing.assert_allclose(s.asnumpy(), ts.detach().numpy(), rtol=1e-5, atol=1e-6)

    weights = rng.standard_normal(out.shape).astype(np.float32)
    params = net.trainable_params()

    def loss(inp):
        o, st = net(inp, hx)
        h = st[0] if name == "LSTM" else st
        return (o * T(weights)).sum() + h.sum()
    gx, gw = ms.grad(loss, 0, params)(T(x))
    t_h = t_state[0] if name == "LSTM" else t_state
    ((t_out * torch.tensor(weights)).sum() + t_h.sum()).backward()
    np.testing.assert_allclose(gx.asnumpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-5)
    t_params = dict(twin.named_parameters())
    for p, g in zip(params, gw):
        np.testing.assert_allclose(g.asnumpy(), t_params[p.name].grad.numpy(), rtol=1e-4, atol=1e-5,
                                   err_msg=p.name)


@pytest.mark.torch
@needs_torch
@pytest.mark.parametrize("name", ["LSTMCell", "GRUCell", "RNNCell"])
def test_cells_match_torch(name):
    cell = getattr(nn, name)(3, 4)
    twin = _torch_twin(cell, getattr(torch.nn, name), 3, 4)
    x, h, c = (rng.standard_normal(s).astype(np.float32) for s in ((2, 3), (2, 4), (2, 4)))
    if name == "LSTMCell":
        hy, cy = cell(T(x), (T(h), T(c)))
        th, tc = twin(torch.tensor(x), (torch.tensor(h), torch.tensor(c)))
        np.testing.assert_allclose(cy.asnumpy(), tc.detach().numpy(), rtol=1e-5, atol=1e-6)
    else:
        hy, th = cell(T(x), T(h)), twin(torch.tensor(x), torch.tensor(h))
    np.testing.assert_allclose(hy.asnumpy(), th.detach().numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["LSTM", "GRU"])
def test_seq_length_equals_running_each_sequence_alone(name):
    net = getattr(nn, name)(3, 4, num_layers=2, bidirectional=True)
    x = rng.standard_normal((5, 3, 3)).astype(np.float32)
    lengths = [5, 2, 3]
    out, state = net(T(x), seq_length=ms.Tensor(np.array(lengths, np.int32)))
    h_n = (state[0] if name == "LSTM" else state).asnumpy()
    for b, n in enumerate(lengths):
        alone_out, alone_state = net(T(x[:n, b:b + 1]))
        alone_h = (alone_state[0] if name == "LSTM" else alone_state).asnumpy()
        np.testing.assert_allclose(out.asnumpy()[:n, b], alone_out.asnumpy()[:, 0], rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(out.asnumpy()[n:, b], 0.0)           # past the end: zeros
        np.testing.assert_allclose(h_n[:, b], alone_h[:, 0], rtol=1e-5, atol=1e-6)


def test_dropout_between_layers_only_in_training():
    net = nn.GRU(3, 4, num_layers=2, dropout=0.5)
    x = T(rng.standard_normal((4, 2, 3)))
    net.set_train(False)
    a, b = net(x)[0].asnumpy(), net(x)[0].asnumpy()
    np.testing.assert_array_equal(a, b)
    net.set_train(True)
    ms.set_seed(1)
    c = net(x)[0].asnumpy()
    assert not np.allclose(a, c)
    single = nn.GRU(3, 4, dropout=0.5)           # one layer: nothing to drop between
    single.set_train(True)
    np.testing.assert_array_equal(single(x)[0].asnumpy(), single(x)[0].asnumpy())


def test_default_state_is_zeros():
    net = nn.LSTM(3, 4)
    x = T(rng.standard_normal((3, 2, 3)))
    zeros = T(np.zeros((1, 2, 4)))
    np.testing.assert_array_equal(net(x)[0].asnumpy(), net(x, (zeros, zeros))[0].asnumpy())


BAD = [
    (lambda: nn.LSTM(3, 4, dropout=1.0), OpValueError, "LSTM"),
    (lambda: nn.LSTM(3, 4, dropout="0.1"), OpTypeError, "LSTM"),
    (lambda: nn.GRU(0, 4), OpValueError, "GRU"),
    (lambda: nn.GRU(3, 4, bidirectional=1), OpTypeError, "GRU"),
    (lambda: nn.RNN(3, 4, nonlinearity="sigmoid"), OpValueError, "RNN"),
    (lambda: nn.RNNCell(3, 4, nonlinearity="gelu"), OpValueError, "RNNCell"),
    (lambda: nn.LSTM(3, 4)(T(np.zeros((2, 3)))), OpValueError, "LSTM"),
    (lambda: nn.LSTM(3, 4)(T(np.zeros((2, 1, 5)))), OpValueError, "LSTM"),
    (lambda: nn.LSTM(3, 4)(T(np.zeros((2, 1, 3))), T(np.zeros((1, 1, 4)))), OpTypeError, "LSTM"),
    (lambda: nn.GRU(3, 4)(T(np.zeros((2, 1, 3))), T(np.zeros((2, 1, 4)))), OpValueError, "GRU"),
    (lambda: nn.GRU(3, 4)(T(np.zeros((2, 1, 3))), T(np.zeros((1, 1, 4)), np.float16)), OpTypeError, "GRU"),
    (lambda: nn.GRU(3, 4)(T(np.zeros((2, 1, 3)), np.float64)), OpTypeError, "GRU"),
    (lambda: nn.GRU(3, 4)(T(np.zeros((2, 2, 3))), None, T([2.0, 1.0])), OpTypeError, "GRU"),
    (lambda: nn.GRU(3, 4)(T(np.zeros((2, 2, 3))), None, ms.Tensor(np.array([2, 1, 1]))), OpValueError, "GRU"),
    (lambda: nn.LSTMCell(3, 4)(T(np.zeros((2, 3))), T(np.zeros((2, 4)))), OpTypeError, "LSTMCell"),
    (lambda: nn.GRUCell(3, 4)(T(np.zeros((2, 3))), T(np.zeros((3, 4)))), OpValueError, "GRUCell"),
]


@pytest.mark.parametrize("call,err,op", BAD, ids=[f"{b[2]}-{i}" for i, b in enumerate(BAD)])
def test_bad_input_raises_a_minispore_error_naming_the_layer(call, err, op):
    with pytest.raises(err, match=f"'{op}'") as info:
        call()
    assert isinstance(info.value, MinisporeError)
