"""`nn.FTRL` (MindSpore's ApplyFtrl): "follow the regularized leader", the online learner of sparse
click-through models; the L1 term drives small weights exactly to zero.

Per element, with accum starting at `initial_accum` and linear at 0 (p = -lr_power, 0.5 by default):
    g        = g + weight_decay * w             (EVERY parameter: FTRL does not spare gamma/beta)
    accum'   = accum + g^2
    linear   = linear + g - (accum'^p - accum^p) / lr * w
    w        = (sign(linear) * l1 - linear) / (accum'^p / lr + 2 * l2)   where |linear| > l1, else 0
    accum    = accum'
State: `moments.<name>` (the accumulator) and `linear.<name>`. The learning rate must be a fixed
float > 0 (no schedules, no group learning rates), as in MindSpore.
"""
from __future__ import annotations

import numpy as np

from ...common.errors import OpTypeError, OpValueError
from .. import _checks
from .optimizer import Optimizer, float_arg, weights_and_decayed_grad, work_array, write_back


class FTRL(Optimizer):
    """`FTRL(params, initial_accum=0.1, learning_rate=0.001, lr_power=-0.5, l1=0.0, l2=0.0,
    use_locking=False, loss_scale=1.0, weight_decay=0.0)`.
    `use_locking` is checked and stored but changes nothing: it guards concurrent updates of a
    parameter, and minispore's eager updates never run concurrently."""

    def __init__(self, params, initial_accum=0.1, learning_rate=0.001, lr_power=-0.5, l1=0.0, l2=0.0,
                 use_locking=False, loss_scale=1.0, weight_decay=0.0):
        super().__init__(learning_rate, params, weight_decay, loss_scale)
        if self.dynamic_lr or self.is_group_lr:
            raise OpValueError("FTRL", "a fixed learning rate (no schedule, no group learning rates)",
                               f"dynamic_lr={self.dynamic_lr}, group_lr={self.is_group_lr}")
        init = float_arg("FTRL", "initial_accum", initial_accum, lo=0.0)
        if not isinstance(learning_rate, float):
            raise OpTypeError("FTRL", "'learning_rate' to be a float", f"{type(learning_rate).__name__}")
        if learning_rate <= 0:
            raise OpValueError("FTRL", "'learning_rate' > 0", repr(learning_rate))
        self.lr_power = float_arg("FTRL", "lr_power", lr_power, hi=0.0)
        self.l1 = float_arg("FTRL", "l1", l1, lo=0.0)
        self.l2 = float_arg("FTRL", "l2", l2, lo=0.0)
        self.use_locking = _checks.boolean("FTRL", "use_locking", use_locking)
        self.lr = learning_rate
        if not self.is_group:          # MindSpore sets every decay flag for FTRL
            self._decay = tuple(self.weight_decay for _ in self._params_seq)
            self.decay_flags = tuple(True for _ in self._params_seq)
        self.moments = self._state("moments", init)
        self.linear = self._state("linear", "zeros")

    def _update(self, grads, lrs, t):
        power, l1, l2 = -self.lr_power, self.l1, self.l2
        for p, g, lr, wd, acc_p, lin_p in zip(self._params_seq, grads, lrs, self._decay, self.moments, self.linear):
            w, g = weights_and_decayed_grad(p, g, wd)
            accum = work_array(acc_p)
            new_accum = accum + g * g
            accum_pow, new_pow = np.power(accum, power), np.power(new_accum, power)
            linear = work_array(lin_p)
            linear += g - (new_pow - accum_pow) / lr * w
            write_back(lin_p, linear)
            quadratic = new_pow / lr + 2 * l2
            w = np.where(np.abs(linear) > l1, (np.sign(linear) * l1 - linear) / quadratic, 0.0).astype(w.dtype)
            write_back(acc_p, new_accum)
            write_back(p, w)
