"""`nn.Adagrad` (MindSpore's ApplyAdagrad).

Per element, with the accumulator starting at `accum` (default 0.1, which also keeps the first
division finite):
    g     = g + weight_decay * w                (parameters without 'beta'/'gamma' in their name)
    accum = accum + g^2                         (only when update_slots=True)
    w     = w - lr * g / sqrt(accum)
There is no epsilon: the initial accumulator plays its role.

State: `accum.<name>`. Defaults are MindSpore 2.10's: `accum=0.1, learning_rate=0.001, update_slots=True`.
"""
from __future__ import annotations

import numpy as np

from .. import _checks
from .optimizer import Optimizer, float_arg, weights_and_decayed_grad, work_array, write_back


class Adagrad(Optimizer):
    """`Adagrad(params, accum=0.1, learning_rate=0.001, update_slots=True, loss_scale=1.0, weight_decay=0.0)`."""

    def __init__(self, params, accum=0.1, learning_rate=0.001, update_slots=True, loss_scale=1.0, weight_decay=0.0):
        super().__init__(learning_rate, params, weight_decay, loss_scale)
        init = float_arg("Adagrad", "accum", accum, lo=0.0)
        self.update_slots = _checks.boolean("Adagrad", "update_slots", update_slots)
        self.accum = self._state("accum", init)

    def _update(self, grads, lrs, t):
        for p, g, lr, wd, acc_p in zip(self._params_seq, grads, lrs, self._decay, self.accum):
            w, g = weights_and_decayed_grad(p, g, wd)
            acc = work_array(acc_p)
            if self.update_slots:
                acc += g * g
                write_back(acc_p, acc)
            w -= lr * g / np.sqrt(acc)
            write_back(p, w)
