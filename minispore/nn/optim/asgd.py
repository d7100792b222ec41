"""`nn.ASGD`: averaged stochastic gradient descent (Polyak-Ruppert averaging), as MindSpore 2.10
writes it. Per parameter, at step t = 1, 2, ... (eta starts at the learning rate, mu at 1):
    g   = g + weight_decay * w                  (parameters without 'beta'/'gamma' in their name)
    w   = w * (1 - lambd * eta) - eta * g
    ax  = ax + (w - ax) * mu    if mu != 1,  else  ax = w
    eta = lr / (1 + lambd * lr * t) ** alpha
    mu  = 1 / max(1, t - t0)
`ax` is the running average of the weights (what one evaluates with); training uses `w`.
State names are MindSpore's: `mu_<name>`, `eta_<name>` (0-d) and `ax_.<name>`.
No loss_scale argument (MindSpore's ASGD has none).
"""
from __future__ import annotations

import numpy as np

from ...common.tensor import Parameter, ParameterTuple, Tensor
from .optimizer import Optimizer, as_compute, float_arg, work_array, write_back


class ASGD(Optimizer):
    """`ASGD(params, learning_rate=0.1, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0.0)`."""

    def __init__(self, params, learning_rate=0.1, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0.0):
        super().__init__(learning_rate, params, weight_decay)
        self.lambd = float_arg("ASGD", "lambd", lambd)
        self.alpha = float_arg("ASGD", "alpha", alpha)
        self.t0 = float_arg("ASGD", "t0", t0)
        self.mu = ParameterTuple(Parameter(Tensor(np.float32(1.0)), name=f"mu_{p.name}", requires_grad=False)
                                 for p in self._params_seq)
        self.eta = ParameterTuple(Parameter(Tensor(np.float32(0.0)), name=f"eta_{p.name}", requires_grad=False)
                                  for p in self._params_seq)
        self.ax = self._state("ax_", "zeros")

    def _update(self, grads, lrs, t):
        lambd, alpha = np.float32(self.lambd), np.float32(self.alpha)
        for p, g, lr, wd, mu_p, eta_p, ax_p in zip(self._params_seq, grads, lrs, self._decay, self.mu, self.eta,
                                                  self.ax):
            lr32 = np.float32(lr)
            if t == 1:
                eta_p._data[...] = lr32
            eta = eta_p._data.astype(np.float32)
            w = work_array(p).astype(np.float32)
            g = as_compute(g, w)
            if wd > 0:
                g = g + np.float32(wd) * w
            w = w * (np.float32(1.0) - lambd * eta) - eta * g
            write_back(p, w)
            mu = mu_p._data.astype(np.float32)
            if mu != 1:
                write_back(ax_p, work_array(ax_p) + (w - work_array(ax_p)) * mu)
            else:
                write_back(ax_p, p._data.copy())
            step = np.float32(t)
            eta_p._data[...] = lr32 / np.power(np.float32(1.0) + lambd * lr32 * step, alpha)
            mu_p._data[...] = np.float32(1.0) / np.maximum(np.float32(1.0), step - np.float32(self.t0))
            eta_p._version += 1
            mu_p._version += 1
