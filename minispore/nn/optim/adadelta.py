"""`nn.Adadelta` (MindSpore's ApplyAdadelta): step sizes from running averages of squared gradients
and of squared updates, so the units of the update match the weights.

Per element, with both accumulators starting at 0:
    g            = g + weight_decay * w         (parameters without 'beta'/'gamma' in their name)
    accum        = rho * accum + (1 - rho) * g^2
    update       = sqrt(accum_update + epsilon) * g / sqrt(accum + epsilon)
    accum_update = rho * accum_update + (1 - rho) * update^2
    w            = w - lr * update
State: `accum.<name>`, `accum_update.<name>`. Defaults: learning_rate=1.0, rho=0.9, epsilon=1e-6.
"""
from __future__ import annotations

import numpy as np

from .optimizer import Optimizer, float_arg, weights_and_decayed_grad, work_array, write_back


class Adadelta(Optimizer):
    """`Adadelta(params, learning_rate=1.0, rho=0.9, epsilon=1e-06, loss_scale=1.0, weight_decay=0.0)`."""

    def __init__(self, params, learning_rate=1.0, rho=0.9, epsilon=1e-06, loss_scale=1.0, weight_decay=0.0):
        super().__init__(learning_rate, params, weight_decay, loss_scale)
        self.rho = float_arg("Adadelta", "rho", rho, lo=0.0, hi=1.0)
        self.epsilon = float_arg("Adadelta", "epsilon", epsilon, lo=0.0)
        self.accum = self._state("accum", "zeros")
        self.accum_update = self._state("accum_update", "zeros")

    def _update(self, grads, lrs, t):
        rho, eps = self.rho, self.epsilon
        for p, g, lr, wd, a_p, u_p in zip(self._params_seq, grads, lrs, self._decay, self.accum, self.accum_update):
            w, g = weights_and_decayed_grad(p, g, wd)
            accum = work_array(a_p)
            accum *= rho
            accum += (1 - rho) * g * g
            write_back(a_p, accum)
            accum_update = work_array(u_p)
            update = np.sqrt(accum_update + eps) * g / np.sqrt(accum + eps)
            accum_update *= rho
            accum_update += (1 - rho) * update * update
            write_back(u_p, accum_update)
            w -= lr * update
            write_back(p, w)
