"""Recurrent layers with MindSpore 2.10's API: `nn.RNN`, `nn.GRU`, `nn.LSTM` (multi-layer,
bidirectional, variable lengths) and the single-step `nn.RNNCell`, `nn.GRUCell`, `nn.LSTMCell`.

The equations (the PyTorch/cuDNN ones, which MindSpore uses; gate order as stacked in the weights):

    RNN:   h' = tanh(W_ih x + b_ih + W_hh h + b_hh)                 (or relu)
    LSTM:  i, f, g, o = split(W_ih x + b_ih + W_hh h + b_hh, 4)     gates i, f, o: sigmoid; g: tanh
           c' = f * c + i * g,   h' = o * tanh(c')
    GRU:   r, z, n from  gi = W_ih x + b_ih  and  gh = W_hh h + b_hh  split in 3
           r = sigmoid(gi_r + gh_r),  z = sigmoid(gi_z + gh_z),  n = tanh(gi_n + r * gh_n)
           h' = n + z * (h - n)

Everything is composed of existing ops (matmul, sigmoid, tanh, split, where, stack), so autodiff
works through the whole unrolled sequence. The input projection W_ih x + b_ih does not depend on
the recurrence: it is computed for all time steps in one (T*B, I) x (I, G) matmul before the loop,
so the loop only multiplies by W_hh.

Parameters are named as MindSpore names them — `weight_ih_l{k}`, `weight_hh_l{k}`, `bias_ih_l{k}`,
`bias_hh_l{k}`, with a `_reverse` suffix for the backward direction — and registered in MindSpore's
order (all input weights, then all hidden weights, then the two bias groups), so
`parameters_and_names()` and checkpoints line up with a MindSpore network. Shapes: weight_ih
(G, input_size) with G = gates * hidden_size (4 for LSTM, 3 for GRU, 1 for RNN), weight_hh
(G, hidden_size), biases (G,). Default initialization: U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)).
"""
from __future__ import annotations

import math

from ...common import dtype as mstype
from ...common.errors import OpTypeError, OpValueError
from ...common.initializer import Uniform, initializer
from ...common.tensor import Parameter
from ...ops import functional as F
from .. import _checks
from ..cell import Cell
from .dropout import Dropout

_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}
_STATE_DTYPES = (mstype.float16, mstype.float32)


# =================================================================================================
# one time step, given the input projection xw = W_ih x + b_ih (these are shared by layers and cells)
def _hidden_projection(h, w_hh_t, b_hh):
    gh = F.matmul(h, w_hh_t)
    return gh if b_hh is None else gh + b_hh


def _rnn_step(xw, h, w_hh_t, b_hh, relu):
    pre = xw + _hidden_projection(h, w_hh_t, b_hh)
    return F.relu(pre) if relu else F.tanh(pre)


def _lstm_step(xw, h, c, w_hh_t, b_hh):
    i, f, g, o = F.split(xw + _hidden_projection(h, w_hh_t, b_hh), h.shape[-1], 1)
    c = F.sigmoid(f) * c + F.sigmoid(i) * F.tanh(g)
    return F.sigmoid(o) * F.tanh(c), c


def _gru_step(xw, h, w_hh_t, b_hh):
    hidden = h.shape[-1]
    i_r, i_z, i_n = F.split(xw, hidden, 1)
    h_r, h_z, h_n = F.split(_hidden_projection(h, w_hh_t, b_hh), hidden, 1)
    r = F.sigmoid(i_r + h_r)
    z = F.sigmoid(i_z + h_z)
    n = F.tanh(i_n + r * h_n)
    return n + z * (h - n)


def _reverse_sequences(x, seq_length):
    """Reverse each sequence of x (T, B, ...) in time, within its own length: the backward direction
    of a bidirectional RNN. Without lengths this is a flip; with lengths, steps past a sequence's end
    stay where they are (MindSpore's ReverseSequence), done as one gather along time."""
    if seq_length is None:
        return F.flip(x, (0,))
    steps = x.shape[0]
    t = F.reshape(F.arange(0, steps, 1, dtype=seq_length.dtype), (steps, 1))
    lengths = F.reshape(seq_length, (1, -1))
    index = F.where(F.less(t, lengths), lengths - 1 - t, t)                       # (T, B)
    index = F.broadcast_to(F.reshape(index, tuple(index.shape) + (1,) * (len(x.shape) - 2)), tuple(x.shape))
    return F.gather_d(x, 0, index)


# =================================================================================================
class _RNNBase(Cell):
    """The shared machinery of RNN / GRU / LSTM (MindSpore's `_RNNBase`)."""

    def __init__(self, mode, input_size, hidden_size, num_layers=1, has_bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, dtype=mstype.float32):
        super().__init__()
        name = type(self).__name__
        self.input_size = _checks.positive_int(name, "input_size", input_size)
        self.hidden_size = _checks.positive_int(name, "hidden_size", hidden_size)
        self.num_layers = _checks.positive_int(name, "num_layers", num_layers)
        self.has_bias = _checks.boolean(name, "has_bias", has_bias)
        self.batch_first = _checks.boolean(name, "batch_first", batch_first)
        self.bidirectional = _checks.boolean(name, "bidirectional", bidirectional)
        if not isinstance(dropout, float) and not (isinstance(dropout, int) and not isinstance(dropout, bool)):
            raise OpTypeError(name, "'dropout' to be a float", f"{type(dropout).__name__} {dropout!r}")
        if not 0 <= dropout < 1:
            raise OpValueError(name, "'dropout' in [0, 1) (the probability of zeroing an element)", repr(dropout))
        self.mode = mode
        self.is_lstm = mode == "LSTM"
        self.dropout = float(dropout)
        self.dropout_op = Dropout(p=self.dropout)            # between layers, in training only
        self.num_directions = 2 if bidirectional else 1
        gate_size = _GATES[mode] * self.hidden_size
        init = Uniform(1 / math.sqrt(self.hidden_size))
        suffixes = [(layer, f"l{layer}" + ("_reverse" if d else ""))
                    for layer in range(self.num_layers) for d in range(self.num_directions)]
        # MindSpore's registration order: every weight_ih, then every weight_hh, then the biases
        groups = [("weight_ih", lambda layer: (gate_size, self._layer_input_size(layer))),
                  ("weight_hh", lambda layer: (gate_size, self.hidden_size))]
        if self.has_bias:
            groups += [("bias_ih", lambda layer: (gate_size,)), ("bias_hh", lambda layer: (gate_size,))]
        for group, shape_of in groups:
            for layer, suffix in suffixes:
                param_name = f"{group}_{suffix}"
                setattr(self, param_name, Parameter(initializer(init, shape_of(layer), dtype), name=param_name))

    def _layer_input_size(self, layer):
        return self.input_size if layer == 0 else self.hidden_size * self.num_directions

    def _weights(self, layer, direction):
        suffix = f"l{layer}" + ("_reverse" if direction else "")
        w_ih, w_hh = getattr(self, f"weight_ih_{suffix}"), getattr(self, f"weight_hh_{suffix}")
        if not self.has_bias:
            return w_ih, w_hh, None, None
        return w_ih, w_hh, getattr(self, f"bias_ih_{suffix}"), getattr(self, f"bias_hh_{suffix}")

    # ---------------------------------------------------------------------------------------------
    def _check_inputs(self, x, hx, seq_length):
        name = type(self).__name__
        _checks.tensor_input(name, x, "x")
        if len(x.shape) != 3:
            layout = "(batch, seq_len, input_size)" if self.batch_first else "(seq_len, batch, input_size)"
            raise OpValueError(name, f"'x' of shape {layout}", f"shape {tuple(x.shape)}")
        if x.dtype not in _STATE_DTYPES:
            raise OpTypeError(name, "'x' of dtype Float16 or Float32", str(x.dtype))
        if x.shape[-1] != self.input_size:
            raise OpValueError(name, f"'x' whose last dimension is input_size={self.input_size}",
                               f"shape {tuple(x.shape)}")
        batch = x.shape[0] if self.batch_first else x.shape[1]
        want = (self.num_layers * self.num_directions, batch, self.hidden_size)
        if hx is not None:
            states = hx
            if self.is_lstm:
                if not isinstance(hx, (tuple, list)) or len(hx) != 2:
                    raise OpTypeError(name, "'hx' as a tuple (h_0, c_0)", type(hx).__name__)
                names = ("hx[0]", "hx[1]")
            else:
                states, names = (hx,), ("hx",)
            for s_name, s in zip(names, states):
                _checks.tensor_input(name, s, s_name)
                if s.dtype != x.dtype:
                    raise OpTypeError(name, f"'{s_name}' of the same dtype as 'x' ({x.dtype})", str(s.dtype))
                if tuple(s.shape) != want:
                    raise OpValueError(name, f"'{s_name}' of shape (num_layers * num_directions, batch, "
                                             f"hidden_size) = {want}", f"shape {tuple(s.shape)}")
        if seq_length is not None:
            _checks.tensor_input(name, seq_length, "seq_length")
            if seq_length.dtype not in (mstype.int32, mstype.int64):
                raise OpTypeError(name, "'seq_length' of dtype Int32 or Int64", str(seq_length.dtype))
            if tuple(seq_length.shape) != (batch,):
                raise OpValueError(name, f"'seq_length' of shape (batch,) = ({batch},)",
                                   f"shape {tuple(seq_length.shape)}")
        return batch

    def _run_direction(self, x, h0, c0, mask, weights):
        """One layer, one direction, over x (T, B, I): returns (outputs (T, B, H), h_T, c_T)."""
        w_ih, w_hh, b_ih, b_hh = weights
        steps, batch = x.shape[0], x.shape[1]
        xw = F.matmul(F.reshape(x, (steps * batch, x.shape[2])), F.transpose(w_ih, (1, 0)))
        if b_ih is not None:
            if self.mode != "GRU":                       # both biases fold into the projection
                xw = xw + (b_ih + b_hh)
                b_hh = None
            else:                                        # GRU: b_hh stays inside r * (W_hh h + b_hh)
                xw = xw + b_ih
        xw_steps = F.split(F.reshape(xw, (steps, batch, -1)), 1, 0)
        masks = F.split(mask, 1, 0) if mask is not None else None
        w_hh_t = F.transpose(w_hh, (1, 0))
        h, c = h0, c0
        outputs = []
        for t in range(steps):
            xw_t = F.reshape(xw_steps[t], (batch, -1))
            if self.is_lstm:
                h_new, c_new = _lstm_step(xw_t, h, c, w_hh_t, b_hh)
            elif self.mode == "GRU":
                h_new, c_new = _gru_step(xw_t, h, w_hh_t, b_hh), None
            else:
                h_new, c_new = _rnn_step(xw_t, h, w_hh_t, b_hh, self.mode == "RNN_RELU"), None
            if masks is None:
                h, c = h_new, c_new
                outputs.append(h)
            else:                                        # past a sequence's end: keep the state, output 0
                m = F.reshape(masks[t], (batch, 1))
                h = F.where(m, h_new, h)
                if c is not None:
                    c = F.where(m, c_new, c)
                outputs.append(F.where(m, h_new, 0.0))
        return F.stack(outputs, 0), h, c

    def construct(self, x, hx=None, seq_length=None):
        batch = self._check_inputs(x, hx, seq_length)
        n_states = self.num_layers * self.num_directions
        if hx is None:
            shape = (n_states, batch, self.hidden_size)
            h0s = [F.zeros(shape[1:], x.dtype)] * n_states
            c0s = list(h0s) if self.is_lstm else [None] * n_states
        else:
            h_all, c_all = hx if self.is_lstm else (hx, None)
            h0s = [F.reshape(s, (batch, self.hidden_size)) for s in F.split(h_all, 1, 0)]
            c0s = [F.reshape(s, (batch, self.hidden_size)) for s in F.split(c_all, 1, 0)] if self.is_lstm \
                else [None] * n_states
        if self.batch_first:
            x = F.transpose(x, (1, 0, 2))
        mask = None
        if seq_length is not None:                       # mask[t, b] = t < seq_length[b]
            steps = x.shape[0]
            t = F.reshape(F.arange(0, steps, 1, dtype=seq_length.dtype), (steps, 1))
            mask = F.less(t, F.reshape(seq_length, (1, -1)))
        layer_input = x
        h_n, c_n = [], []
        for layer in range(self.num_layers):
            outs = []
            for direction in range(self.num_directions):
                k = layer * self.num_directions + direction
                inp = layer_input if direction == 0 else _reverse_sequences(layer_input, seq_length)
                out, h, c = self._run_direction(inp, h0s[k], c0s[k], mask, self._weights(layer, direction))
                outs.append(out if direction == 0 else _reverse_sequences(out, seq_length))
                h_n.append(h)
                c_n.append(c)
            output = outs[0] if len(outs) == 1 else F.concat(outs, 2)
            last = layer == self.num_layers - 1
            layer_input = self.dropout_op(output) if self.dropout and not last else output
        if self.batch_first:
            output = F.transpose(output, (1, 0, 2))
        h_n = F.stack(h_n, 0)
        if self.is_lstm:
            return output, (h_n, F.stack(c_n, 0))
        return output, h_n

    def extend_repr(self):
        s = f"input_size={self.input_size}, hidden_size={self.hidden_size}, num_layers={self.num_layers}"
        s += f", has_bias={self.has_bias}, batch_first={self.batch_first}, dropout={self.dropout}"
        return s + f", bidirectional={self.bidirectional}"


class RNN(_RNNBase):
    """`nn.RNN(input_size, hidden_size, num_layers=1, nonlinearity='tanh', has_bias=True,
    batch_first=False, dropout=0.0, bidirectional=False, dtype=mstype.float32)`.

    Call `rnn(x, hx=None, seq_length=None)` -> `(output, h_n)`: x (seq_len, batch, input_size)
    (or batch first), hx (num_layers * num_directions, batch, hidden_size), output
    (seq_len, batch, num_directions * hidden_size). `seq_length` (batch,) gives each sequence's
    length: later steps output 0 and leave the state unchanged."""

    def __init__(self, *args, **kwargs):
        nonlinearity = kwargs.pop("nonlinearity", "tanh")
        if nonlinearity not in ("tanh", "relu"):
            raise OpValueError("RNN", "'nonlinearity' in ['tanh', 'relu']", repr(nonlinearity))
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", *args, **kwargs)


class GRU(_RNNBase):
    """`nn.GRU(input_size, hidden_size, num_layers=1, has_bias=True, batch_first=False, dropout=0.0,
    bidirectional=False, dtype=mstype.float32)`; call `gru(x, hx=None, seq_length=None)` ->
    `(output, h_n)` (shapes as `nn.RNN`). Gates r, z, n, stacked in that order in the weights."""

    def __init__(self, *args, **kwargs):
        super().__init__("GRU", *args, **kwargs)


class LSTM(_RNNBase):
    """`nn.LSTM(input_size, hidden_size, num_layers=1, has_bias=True, batch_first=False, dropout=0.0,
    bidirectional=False, dtype=mstype.float32)`; call `lstm(x, hx=None, seq_length=None)` with
    hx = (h_0, c_0) -> `(output, (h_n, c_n))`. Gates i, f, g, o, stacked in that order."""

    def __init__(self, *args, **kwargs):
        super().__init__("LSTM", *args, **kwargs)


# =================================================================================================
# single-step cells
class _RNNCellBase(Cell):
    def __init__(self, input_size, hidden_size, has_bias, num_chunks, dtype=mstype.float32):
        super().__init__()
        name = type(self).__name__
        self.input_size = _checks.positive_int(name, "input_size", input_size)
        self.hidden_size = _checks.positive_int(name, "hidden_size", hidden_size)
        self.has_bias = _checks.boolean(name, "has_bias", has_bias)
        init = Uniform(1 / math.sqrt(self.hidden_size))
        gate_size = num_chunks * self.hidden_size
        self.weight_ih = Parameter(initializer(init, (gate_size, self.input_size), dtype), name="weight_ih")
        self.weight_hh = Parameter(initializer(init, (gate_size, self.hidden_size), dtype), name="weight_hh")
        if self.has_bias:
            self.bias_ih = Parameter(initializer(init, (gate_size,), dtype), name="bias_ih")
            self.bias_hh = Parameter(initializer(init, (gate_size,), dtype), name="bias_hh")
        else:
            self.bias_ih = self.bias_hh = None

    def _check(self, x, states):
        name = type(self).__name__
        _checks.tensor_input(name, x, "x")
        if len(x.shape) != 2 or x.shape[1] != self.input_size:
            raise OpValueError(name, f"'x' of shape (batch, input_size={self.input_size})", f"shape {tuple(x.shape)}")
        for s_name, s in states:
            _checks.tensor_input(name, s, s_name)
            for t_name, t in (("x", x), (s_name, s)):
                if t.dtype not in _STATE_DTYPES:
                    raise OpTypeError(name, f"'{t_name}' of dtype Float16 or Float32", str(t.dtype))
            if tuple(s.shape) != (x.shape[0], self.hidden_size):
                raise OpValueError(name, f"'{s_name}' of shape (batch, hidden_size) = {(x.shape[0], self.hidden_size)}",
                                   f"shape {tuple(s.shape)}")

    def _input_projection(self, x):
        xw = F.matmul(x, F.transpose(self.weight_ih, (1, 0)))
        return xw if self.bias_ih is None else xw + self.bias_ih

    def extend_repr(self):
        return f"input_size={self.input_size}, hidden_size={self.hidden_size}, has_bias={self.has_bias}"


class RNNCell(_RNNCellBase):
    """`nn.RNNCell(input_size, hidden_size, has_bias=True, nonlinearity='tanh', dtype=mstype.float32)`;
    `cell(x, hx)` -> h' for x (batch, input_size), hx (batch, hidden_size)."""

    def __init__(self, input_size, hidden_size, has_bias=True, nonlinearity="tanh", dtype=mstype.float32):
        super().__init__(input_size, hidden_size, has_bias, 1, dtype)
        if nonlinearity not in ("tanh", "relu"):
            raise OpValueError("RNNCell", "'nonlinearity' in ['tanh', 'relu']", repr(nonlinearity))
        self.nonlinearity = nonlinearity

    def construct(self, x, hx):
        self._check(x, [("hx", hx)])
        return _rnn_step(self._input_projection(x), hx, F.transpose(self.weight_hh, (1, 0)), self.bias_hh,
                         self.nonlinearity == "relu")


class LSTMCell(_RNNCellBase):
    """`nn.LSTMCell(input_size, hidden_size, has_bias=True, dtype=mstype.float32)`;
    `cell(x, (hx, cx))` -> (h', c')."""

    def __init__(self, input_size, hidden_size, has_bias=True, dtype=mstype.float32):
        super().__init__(input_size, hidden_size, has_bias, 4, dtype)

    def construct(self, x, hx):
        if not isinstance(hx, (tuple, list)) or len(hx) != 2:
            raise OpTypeError("LSTMCell", "'hx' as a tuple (hx, cx)", type(hx).__name__)
        self._check(x, [("hx[0]", hx[0]), ("hx[1]", hx[1])])
        return _lstm_step(self._input_projection(x), hx[0], hx[1], F.transpose(self.weight_hh, (1, 0)), self.bias_hh)


class GRUCell(_RNNCellBase):
    """`nn.GRUCell(input_size, hidden_size, has_bias=True, dtype=mstype.float32)`; `cell(x, hx)` -> h'."""

    def __init__(self, input_size, hidden_size, has_bias=True, dtype=mstype.float32):
        super().__init__(input_size, hidden_size, has_bias, 3, dtype)

    def construct(self, x, hx):
        self._check(x, [("hx", hx)])
        return _gru_step(self._input_projection(x), hx, F.transpose(self.weight_hh, (1, 0)), self.bias_hh)


__all__ = ["GRU", "GRUCell", "LSTM", "LSTMCell", "RNN", "RNNCell"]
