"""`nn.Rprop`: resilient backpropagation — each weight has its own step size, grown by etaplus while
the gradient keeps its sign and shrunk by etaminus when it flips; only the gradient's sign is used.

Per element (step sizes start at the learning rate on the first update, prev at 0):
    s         = sign(g * prev):  +1 -> etaplus, -1 -> etaminus, 0 -> 1
    step_size = clip(step_size * s, step_sizes[0], step_sizes[1])
    g'        = 0 where the sign flipped (s == etaminus), else g
    w         = w - sign(g') * step_size;   prev = g'
State: `prev.<name>`, `step_size.<name>`. No loss_scale argument (MindSpore's Rprop has none).
"""
from __future__ import annotations

import numbers

import numpy as np

from ...common.errors import OpTypeError, OpValueError
from .optimizer import Optimizer, float_arg, weights_and_decayed_grad, work_array, write_back


class Rprop(Optimizer):
    """`Rprop(params, learning_rate=0.1, etas=(0.5, 1.2), step_sizes=(1e-6, 50.0), weight_decay=0.0)`."""

    def __init__(self, params, learning_rate=0.1, etas=(0.5, 1.2), step_sizes=(1e-6, 50.0), weight_decay=0.0):
        super().__init__(learning_rate, params, weight_decay)
        for name, v in (("etas", etas), ("step_sizes", step_sizes)):
            if not isinstance(v, tuple):
                raise OpTypeError("Rprop", f"'{name}' to be a tuple", type(v).__name__)
            if len(v) != 2:
                raise OpValueError("Rprop", f"'{name}' of length 2", f"length {len(v)}")
        if step_sizes[0] > step_sizes[1]:
            raise OpValueError("Rprop", "step_sizes[0] <= step_sizes[1]", repr(step_sizes))
        if not isinstance(etas[0], numbers.Real) or not 0.0 < etas[0] < 1.0:
            raise OpValueError("Rprop", "etaminus (etas[0]) in (0, 1)", repr(etas[0]))
        self.etaplus = float_arg("Rprop", "etaplus", etas[1])
        if self.etaplus <= 1.0:
            raise OpValueError("Rprop", "etaplus (etas[1]) > 1.0", repr(etas[1]))
        self.etaminus = float(etas[0])
        self.step_size_min = float_arg("Rprop", "min_step_sizes", step_sizes[0])
        self.step_size_max = float_arg("Rprop", "max_step_sizes", step_sizes[1])
        self.prev = self._state("prev", "zeros")
        self.step_size = self._state("step_size", "zeros")

    def _update(self, grads, lrs, t):
        for p, g, lr, wd, prev_p, step_p in zip(self._params_seq, grads, lrs, self._decay, self.prev,
                                                self.step_size):
            w, g = weights_and_decayed_grad(p, g, wd)
            dt = w.dtype.type
            step = np.full_like(w, lr) if t == 1 else work_array(step_p).astype(w.dtype)
            s = np.sign(g * work_array(prev_p))
            factor = np.where(s > 0, dt(self.etaplus), np.where(s < 0, dt(self.etaminus), dt(1.0)))
            step = np.clip(step * factor, self.step_size_min, self.step_size_max).astype(w.dtype)
            g_used = np.where(factor == dt(self.etaminus), dt(0.0), g)
            w -= np.sign(g_used) * step
            write_back(p, w)
            write_back(prev_p, g_used)
            write_back(step_p, step)
