"""`nn.ProximalAdagrad` (MindSpore's ApplyProximalAdagrad): an Adagrad step followed by the proximal
operator of l1 * |w| + l2 / 2 * w^2 (soft-thresholding then shrinking), which yields sparse weights.

Per element, with accum starting at `accum` (default 0.1):
    g      = g + weight_decay * w               (parameters without 'beta'/'gamma' in their name)
    accum  = accum + g^2
    lr_t   = lr / sqrt(accum)                   (the per-element Adagrad step size)
    prox   = w - lr_t * g
    w      = sign(prox) * max(|prox| - lr_t * l1, 0) / (1 + lr_t * l2)
The shrinkage uses the adaptive lr_t, as MindSpore 2.10's CPU kernel (and TensorFlow's) compute it;
MindSpore's docstring writes the plain `lr` there, which the kernel does not do.
State: `accum.<name>`.
"""
from __future__ import annotations

import numpy as np

from .. import _checks
from .optimizer import Optimizer, float_arg, weights_and_decayed_grad, work_array, write_back


class ProximalAdagrad(Optimizer):
    """`ProximalAdagrad(params, accum=0.1, learning_rate=0.001, l1=0.0, l2=0.0, use_locking=False,
    loss_scale=1.0, weight_decay=0.0)`.
    `use_locking` is checked and stored but changes nothing: it guards concurrent updates of a
    parameter, and minispore's eager updates never run concurrently."""

    def __init__(self, params, accum=0.1, learning_rate=0.001, l1=0.0, l2=0.0, use_locking=False, loss_scale=1.0,
                 weight_decay=0.0):
        super().__init__(learning_rate, params, weight_decay, loss_scale)
        init = float_arg("ProximalAdagrad", "accum", accum, lo=0.0)
        self.l1 = float_arg("ProximalAdagrad", "l1", l1, lo=0.0)
        self.l2 = float_arg("ProximalAdagrad", "l2", l2, lo=0.0)
        self.use_locking = _checks.boolean("ProximalAdagrad", "use_locking", use_locking)
        self.accum = self._state("accum", init)

    def _update(self, grads, lrs, t):
        for p, g, lr, wd, acc_p in zip(self._params_seq, grads, lrs, self._decay, self.accum):
            w, g = weights_and_decayed_grad(p, g, wd)
            accum = work_array(acc_p)
            accum += g * g
            write_back(acc_p, accum)
            lr_t = lr / np.sqrt(accum)
            prox = w - lr_t * g
            w = (np.sign(prox) * np.maximum(np.abs(prox) - lr_t * self.l1, 0.0) / (1.0 + lr_t * self.l2)).astype(w.dtype)
            write_back(p, w)
