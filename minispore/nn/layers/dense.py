"""`nn.Dense`: the fully connected layer  y = activation(x @ W^T + b).

The weight has shape (out_channels, in_channels), as in MindSpore and PyTorch. Default
initialization (MindSpore >= 2.3): W ~ HeUniform(sqrt(5)), i.e. U(-1/sqrt(in), 1/sqrt(in)), and
b ~ U(-1/sqrt(in), 1/sqrt(in)).
"""
from __future__ import annotations

import math

import numpy as np

from ...common import dtype as mstype
from ...common.errors import OpTypeError, OpValueError
from ...common.initializer import HeUniform, Uniform, initializer
from ...common.tensor import Parameter, Tensor
from ...ops import functional as F
from .. import _checks
from ..cell import Cell
from .activation import get_activation


class Dense(Cell):
    """`Dense(in_channels, out_channels, weight_init=None, bias_init=None, has_bias=True,
    activation=None, dtype=mstype.float32)`. Input (*, in_channels) -> output (*, out_channels)."""

    def __init__(self, in_channels, out_channels, weight_init=None, bias_init=None, has_bias=True,
                 activation=None, dtype=mstype.float32):
        super().__init__()
        self.in_channels = _checks.positive_int("Dense", "in_channels", in_channels)
        self.out_channels = _checks.positive_int("Dense", "out_channels", out_channels)
        self.has_bias = _checks.boolean("Dense", "has_bias", has_bias)
        if isinstance(weight_init, Tensor) and tuple(weight_init.shape) != (out_channels, in_channels):
            raise OpValueError("Dense", f"weight_init of shape (out_channels, in_channels) = "
                               f"{(out_channels, in_channels)}", f"shape {tuple(weight_init.shape)}")
        if weight_init is None:
            weight_init = HeUniform(math.sqrt(5))
        self.weight = Parameter(initializer(weight_init, [out_channels, in_channels], dtype), name="weight")
        self.bias = None
        if self.has_bias:
            if isinstance(bias_init, Tensor) and tuple(bias_init.shape) != (out_channels,):
                raise OpValueError("Dense", f"bias_init of shape ({out_channels},)", f"shape {tuple(bias_init.shape)}")
            if bias_init is None:
                bias_init = Uniform(scale=1 / math.sqrt(in_channels))
            self.bias = Parameter(initializer(bias_init, [out_channels], dtype), name="bias")
        if isinstance(activation, str):
            activation = get_activation(activation, "Dense")
        elif activation is not None and not isinstance(activation, Cell) and not callable(activation):
            raise OpTypeError("Dense", "activation as a str, a Cell or None", type(activation).__name__)
        self.activation = activation
        self.activation_flag = activation is not None

    def construct(self, x):
        _checks.tensor_input("Dense", x)
        shape = x.shape
        if len(shape) < 2:
            raise OpValueError("Dense", "an input of rank >= 2, shape (*, in_channels)", f"shape {tuple(shape)}")
        if shape[-1] != self.in_channels:
            raise OpValueError("Dense", f"the input's last dimension to equal in_channels ({self.in_channels})",
                               f"shape {tuple(shape)}")
        if len(shape) != 2:
            x = F.reshape(x, (-1, shape[-1]))       # one 2-D GEMM, not a batch of them
        w, b = self.weight, self.bias
        if type(x._data) is np.ndarray and x.dtype is w.dtype and (b is None or b.dtype is w.dtype):
            # PyNative: one primitive - the GEMM with the bias added into its output, and a backward
            # of two GEMMs and one reduction (one dispatch and one (rows, out) array fewer each way)
            y = F.dense(x, w, b)
        else:
            # the plain version (same values): what graph capture records, so that jit_level O1
            # fuses the bias add into the elementwise op that follows (a GEMM epilogue), and what
            # mixed dtypes need (matmul promotes them; dense takes one dtype)
            y = F.matmul(x, F.transpose(w, (1, 0)))
            if self.has_bias:
                y = y + b
        if self.activation_flag:
            y = self.activation(y)
        if len(shape) != 2:
            y = F.reshape(y, tuple(shape[:-1]) + (self.out_channels,))
        return y

    def extend_repr(self):
        s = f"input_channels={self.in_channels}, output_channels={self.out_channels}"
        if self.has_bias:
            s += f", has_bias={self.has_bias}"
        if self.activation_flag:
            s += f", activation={self.activation}"
        return s
