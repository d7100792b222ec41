"""`nn.Lamb` (Layer-wise Adaptive Moments for Batch training, You et al. 2019), as MindSpore's
docstring states it.

Update t = 1, 2, ... (t is `global_step` after it is incremented):
    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * g^2
    r = (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps)
    u = r + weight_decay * w                    (parameters without 'beta'/'gamma' in their name)
    trust = ||w|| / ||u||                       (1 when either norm is 0)
    w = w - lr * trust * u
The trust ratio is one number per parameter tensor: each layer's step is rescaled to the size of
its weights, which is what lets LAMB train with very large batches.

State: `lamb_m.<name>`, `lamb_v.<name>`. No loss_scale argument (as MindSpore). MindSpore 2.10 has
no CPU kernel for it ("Unsupported op [Lamb] on CPU"); this follows the documented formula.
"""
from __future__ import annotations

import numpy as np

from .adam import _check_betas, _moments
from .optimizer import Optimizer, as_compute, work_array, write_back


class Lamb(Optimizer):
    """`Lamb(params, learning_rate, beta1=0.9, beta2=0.999, eps=1e-6, weight_decay=0.0)`."""

    def __init__(self, params, learning_rate, beta1=0.9, beta2=0.999, eps=1e-6, weight_decay=0.0):
        super().__init__(learning_rate, params, weight_decay)
        self.beta1, self.beta2, self.eps = _check_betas("Lamb", beta1, beta2, eps)
        self.moments1 = self._state("lamb_m", "zeros")
        self.moments2 = self._state("lamb_v", "zeros")

    def _update(self, grads, lrs, t):
        b1, b2, eps = self.beta1, self.beta2, self.eps
        c1, c2 = 1.0 - b1 ** t, 1.0 - b2 ** t
        for p, g, lr, wd, m_p, v_p in zip(self._params_seq, grads, lrs, self._decay, self.moments1, self.moments2):
            w = work_array(p)
            m, v, _ = _moments(m_p, v_p, as_compute(g, w), b1, b2)
            update = (m / c1) / (np.sqrt(v / c2) + eps)
            if wd > 0:
                update = update + wd * w
            w_norm = float(np.sqrt(np.sum(np.square(w, dtype=np.float64))))
            u_norm = float(np.sqrt(np.sum(np.square(update, dtype=np.float64))))
            trust = w_norm / u_norm if w_norm > 0 and u_norm > 0 else 1.0
            w -= (lr * trust) * update
            write_back(p, w)
