"""`nn.AdaMax` (MindSpore's ApplyAdaMax): Adam with the infinity norm in place of the second moment.

Per element, with beta1_power = beta1^t (t = 1, 2, ...):
    g  = g + weight_decay * w                   (parameters without 'beta'/'gamma' in their name)
    m  = beta1 * m + (1 - beta1) * g
    v  = max(beta2 * v, |g|)
    w  = w - lr / (1 - beta1_power) * m / (v + eps)
State: `beta1_power` (shape (1,)), `moment1.<name>`, `moment2.<name>`.
"""
from __future__ import annotations

import numpy as np

from ...common.tensor import Parameter, Tensor
from .optimizer import Optimizer, float_arg, weights_and_decayed_grad, work_array, write_back


class AdaMax(Optimizer):
    """`AdaMax(params, learning_rate=0.001, beta1=0.9, beta2=0.999, eps=1e-08, weight_decay=0.0, loss_scale=1.0)`."""

    def __init__(self, params, learning_rate=0.001, beta1=0.9, beta2=0.999, eps=1e-08, weight_decay=0.0,
                 loss_scale=1.0):
        super().__init__(learning_rate, params, weight_decay, loss_scale)
        self.beta1 = float_arg("AdaMax", "beta1", beta1, lo=0.0, lo_open=True, hi=1.0, hi_open=True)
        self.beta2 = float_arg("AdaMax", "beta2", beta2, lo=0.0, lo_open=True, hi=1.0, hi_open=True)
        self.eps = float_arg("AdaMax", "eps", eps, lo=0.0, lo_open=True)
        self.beta1_power = Parameter(Tensor(np.ones((1,), np.float32)), name="beta1_power", requires_grad=False)
        self.moment1 = self._state("moment1", "zeros")
        self.moment2 = self._state("moment2", "zeros")

    def _update(self, grads, lrs, t):
        b1, b2, eps = np.float32(self.beta1), np.float32(self.beta2), np.float32(self.eps)
        self.beta1_power._data[...] = self.beta1_power._data * b1          # float32, as MindSpore keeps it
        bias = 1.0 - self.beta1_power._data[0]
        for p, g, lr, wd, m_p, v_p in zip(self._params_seq, grads, lrs, self._decay, self.moment1, self.moment2):
            w, g = weights_and_decayed_grad(p, g, wd)
            m = work_array(m_p)
            m *= b1
            m += (1 - b1) * g
            write_back(m_p, m)
            v = np.maximum(b2 * work_array(v_p), np.abs(g))
            write_back(v_p, v)
            w -= (lr / bias) * m / (v + eps)
            write_back(p, w)
