"""Recurrent layers against MindSpore 2.10: parameter names/shapes/order, outputs and final states
of nn.LSTM / nn.GRU / nn.RNN (layers, directions, batch_first, explicit states, seq_length), the
single-step cells, gradients, and bad input. Weights come from `fill_params` (random initializers
differ between the frameworks)."""
import numpy as np

from msdiff import case, fill_params, param_names, rand


def X(ms, *shape, seed=0):
    return ms.Tensor(rand(*shape, seed=seed))


def _net(ms, cls, *args, seed=3, **kwargs):
    net = getattr(ms.nn, cls)(*args, **kwargs)
    fill_params(ms, net, seed=seed, scale=0.5)
    net.set_train(False)
    return net


@case("rnn/param_names_lstm_bidirectional_2_layers")
def _(ms):
    return param_names(ms.nn.LSTM(3, 4, num_layers=2, bidirectional=True))


@case("rnn/param_names_gru_no_bias_and_rnn")
def _(ms):
    return param_names(ms.nn.GRU(3, 5, has_bias=False)), param_names(ms.nn.RNN(2, 3, num_layers=2))


@case("rnn/param_names_cells_and_nested")
def _(ms):
    class Net(ms.nn.Cell):
        def __init__(self):
            super().__init__()
            self.rnn = ms.nn.LSTM(3, 4, bidirectional=True)
            self.fc = ms.nn.Dense(8, 2)

        def construct(self, x):
            return self.fc(self.rnn(x)[0])
    return (param_names(ms.nn.LSTMCell(3, 4)), param_names(ms.nn.GRUCell(3, 4)),
            param_names(ms.nn.RNNCell(3, 4, has_bias=False, nonlinearity="relu")), param_names(Net()))


@case("rnn/lstm_default_state")
def _(ms):
    out, (h, c) = _net(ms, "LSTM", 3, 4)(X(ms, 5, 2, 3, seed=1))
    return out, h, c


@case("rnn/lstm_explicit_state_batch_first")
def _(ms):
    net = _net(ms, "LSTM", 3, 4, batch_first=True)
    h0, c0 = X(ms, 1, 2, 4, seed=2), X(ms, 1, 2, 4, seed=3)
    out, (h, c) = net(X(ms, 2, 5, 3, seed=1), (h0, c0))
    return out, h, c


@case("rnn/lstm_2_layers_bidirectional")
def _(ms):
    out, (h, c) = _net(ms, "LSTM", 3, 4, num_layers=2, bidirectional=True)(X(ms, 4, 2, 3, seed=1))
    return out, h, c


@case("rnn/lstm_seq_length")
def _(ms):
    net = _net(ms, "LSTM", 3, 4, num_layers=2)
    out, (h, c) = net(X(ms, 5, 3, 3, seed=1), seq_length=ms.Tensor(np.array([5, 2, 3], np.int32)))
    return out, h, c


@case("rnn/gru_default_and_state")
def _(ms):
    net = _net(ms, "GRU", 3, 4, num_layers=2)
    x = X(ms, 5, 2, 3, seed=1)
    return net(x), net(x, X(ms, 2, 2, 4, seed=2))


@case("rnn/gru_bidirectional_batch_first_no_bias")
def _(ms):
    return _net(ms, "GRU", 3, 4, bidirectional=True, batch_first=True, has_bias=False)(X(ms, 2, 4, 3, seed=1))


@case("rnn/gru_bidirectional_seq_length")
def _(ms):
    net = _net(ms, "GRU", 3, 4, bidirectional=True)
    return net(X(ms, 4, 3, 3, seed=1), None, ms.Tensor(np.array([4, 1, 3], np.int64)))


@case("rnn/rnn_tanh_and_relu")
def _(ms):
    x = X(ms, 4, 2, 3, seed=1)
    return _net(ms, "RNN", 3, 4)(x), _net(ms, "RNN", 3, 4, num_layers=2, nonlinearity="relu")(x)


@case("rnn/eval_mode_ignores_dropout")
def _(ms):
    return _net(ms, "LSTM", 3, 4, num_layers=2, dropout=0.5)(X(ms, 3, 2, 3, seed=1))


@case("rnn/cells_one_step")
def _(ms):
    x, h, c = X(ms, 2, 3, seed=1), X(ms, 2, 4, seed=2), X(ms, 2, 4, seed=3)
    lstm = _net(ms, "LSTMCell", 3, 4)
    gru = _net(ms, "GRUCell", 3, 4)
    rnn = _net(ms, "RNNCell", 3, 4, nonlinearity="relu")
    return lstm(x, (h, c)), gru(x, h), rnn(x, h)


@case("rnn/lstm_grad_weights_and_input")
def _(ms):
    net = _net(ms, "LSTM", 3, 4)
    x = X(ms, 4, 2, 3, seed=1)

    def loss(inp):
        out, (h, c) = net(inp)
        return (out * out).sum() + h.sum() + c.sum()
    return ms.value_and_grad(loss, 0, net.trainable_params())(x)


@case("rnn/gru_grad_bidirectional")
def _(ms):
    net = _net(ms, "GRU", 3, 4, bidirectional=True)
    x = X(ms, 3, 2, 3, seed=1)
    return ms.grad(lambda inp: net(inp)[0].sum(), None, net.trainable_params())(x)


@case("rnn/lstm_cell_grad")
def _(ms):
    cell = _net(ms, "LSTMCell", 3, 4)
    x, h, c = X(ms, 2, 3, seed=1), X(ms, 2, 4, seed=2), X(ms, 2, 4, seed=3)

    def loss(a, b, d):
        hy, cy = cell(a, (b, d))
        return (hy * cy).sum()
    return ms.grad(loss, grad_position=(0, 1, 2))(x, h, c)


@case("rnn/bad_dropout", raises=True)
def _(ms):
    return ms.nn.LSTM(3, 4, dropout=1.0)


@case("rnn/bad_hidden_size", raises=True)
def _(ms):
    return ms.nn.GRU(3, 0)


@case("rnn/bad_nonlinearity", raises=True)
def _(ms):
    return ms.nn.RNN(3, 4, nonlinearity="sigmoid")


@case("rnn/bad_hx_dtype", raises=True)
def _(ms):
    net = ms.nn.GRU(3, 4)
    return net(X(ms, 2, 1, 3), ms.Tensor(np.zeros((1, 1, 4), np.float64)))


@case("rnn/bad_seq_length_dtype", raises=True)
def _(ms):
    net = ms.nn.LSTM(3, 4)
    return net(X(ms, 2, 2, 3), seq_length=ms.Tensor(np.array([2.0, 1.0], np.float32)))
