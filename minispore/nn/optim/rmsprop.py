"""`nn.RMSProp` (MindSpore's ApplyRMSProp / ApplyCenteredRMSProp).

Per element, with ms ("mean square") starting at ONE and mom ("moment") at zero:
    g   = g + weight_decay * w                  (parameters without 'beta'/'gamma' in their name)
    ms  = decay * ms + (1 - decay) * g^2
    mom = momentum * mom + lr * g / sqrt(ms + epsilon)
    w   = w - mom
Centered (`centered=True`) also keeps the mean gradient mg (starting at zero) and divides by an
estimate of the gradient's variance instead of its second moment:
    mg  = decay * mg + (1 - decay) * g
    mom = momentum * mom + lr * g / sqrt(ms - mg^2 + epsilon)
Note epsilon is inside the square root (PyTorch adds eps outside it), and ms starts at 1, not 0, so
the first steps are small rather than sign-like.

State: `mean_square.<name>`, `moment.<name>` and, centered, `mean_grad.<name>`.
Defaults and names are MindSpore 2.10's: `decay=0.9, momentum=0.0, epsilon=1e-10, learning_rate=0.1`.
"""
from __future__ import annotations

import numpy as np

from .. import _checks
from .optimizer import Optimizer, float_arg, weights_and_decayed_grad, work_array, write_back


class RMSProp(Optimizer):
    """`RMSProp(params, learning_rate=0.1, decay=0.9, momentum=0.0, epsilon=1e-10, use_locking=False,
    centered=False, loss_scale=1.0, weight_decay=0.0)`.
    `use_locking` is checked and stored but changes nothing: it guards concurrent updates of a
    parameter, and minispore's eager updates never run concurrently."""

    def __init__(self, params, learning_rate=0.1, decay=0.9, momentum=0.0, epsilon=1e-10, use_locking=False,
                 centered=False, loss_scale=1.0, weight_decay=0.0):
        super().__init__(learning_rate, params, weight_decay, loss_scale)
        self.decay = float_arg("RMSProp", "decay", decay, lo=0.0)
        self.momentum = float_arg("RMSProp", "momentum", momentum, lo=0.0)
        self.epsilon = float_arg("RMSProp", "epsilon", epsilon, lo=0.0, lo_open=True)
        self.use_locking = _checks.boolean("RMSProp", "use_locking", use_locking)
        self.centered = _checks.boolean("RMSProp", "centered", centered)
        if self.centered:
            self.mg = self._state("mean_grad", "zeros")
        self.ms = self._state("mean_square", "ones")
        self.moment = self._state("moment", "zeros")

    def _update(self, grads, lrs, t):
        rho, mom_c, eps = self.decay, self.momentum, self.epsilon
        mgs = self.mg if self.centered else [None] * len(self._params_seq)
        for p, g, lr, wd, mg_p, ms_p, mom_p in zip(self._params_seq, grads, lrs, self._decay, mgs, self.ms,
                                                    self.moment):
            w, g = weights_and_decayed_grad(p, g, wd)
            ms = work_array(ms_p)
            ms *= rho
            ms += (1.0 - rho) * (g * g)
            write_back(ms_p, ms)
            if mg_p is not None:
                mg = work_array(mg_p)
                mg *= rho
                mg += (1.0 - rho) * g
                write_back(mg_p, mg)
                denom = np.sqrt(ms - mg * mg + eps)
            else:
                denom = np.sqrt(ms + eps)
            mom = work_array(mom_p)
            mom *= mom_c
            mom += lr * g / denom
            write_back(mom_p, mom)
            w -= mom
            write_back(p, w)
