"""`nn.Adam` (TensorFlow-style epsilon, bias correction folded into the step size) and
`nn.AdamWeightDecay` (decoupled weight decay, no bias correction), with MindSpore's update rules.

Adam, update t = 1, 2, ...:
    g = g + weight_decay * w                    (L2, parameters without 'beta'/'gamma')
    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * g^2
    lr_t = lr * sqrt(1 - beta2^t) / (1 - beta1^t)
    w = w - lr_t * m / (sqrt(v) + eps)          (eps on the *uncorrected* sqrt(v))
    nesterov: m in the last line is replaced by beta1 * m + (1 - beta1) * g
    amsgrad (ApplyAdamWithAmsgradV2): vhat = max(vhat, v), and sqrt(vhat) replaces sqrt(v)
beta1^t and beta2^t are the running float32 products `beta1_power *= beta1` (shape (), as MindSpore
keeps them), so a restored checkpoint continues the same sequence.
State: `moment1.<name>`, `moment2.<name>`, `beta1_power`, `beta2_power` (+ `vhat.<name>` with amsgrad).
`use_lazy=True` (LazyAdam: only the rows a sparse gradient touches are updated) and `use_offload=True`
(the update on the host) are accepted keyword arguments; with dense gradients on one host both
compute exactly the Adam update above, which is all minispore has.

AdamWeightDecay:
    m, v as above
    w = w - lr * (m / (sqrt(v) + eps) + weight_decay * w)
State: `adam_m.<name>`, `adam_v.<name>`. Note the default eps is 1e-6 here, 1e-8 for Adam.

Both updates run in the parameter's dtype (float32 for float32 weights, as MindSpore's kernels;
float32 for half-precision ones, rounded once when stored), in place without temporaries: the rules
are written out plainly in `_kernels.adam_reference` / `adam_weight_decay_reference`, and
`_kernels.adam` / `adam_weight_decay` compute exactly those numbers without temporaries.
"""
from __future__ import annotations

import math

import numpy as np

from ...common.errors import OpValueError
from ...common.tensor import Parameter, Tensor
from .. import _checks
from . import _kernels
from .optimizer import Optimizer, as_compute, flat_grad, flat_work, float_arg, work_array, write_back


def _check_betas(cell, beta1, beta2, eps):
    """MindSpore's `_check_param_value`: floats (not ints), betas in (0, 1), eps > 0."""
    b1 = float_arg(cell, "beta1", beta1, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    b2 = float_arg(cell, "beta2", beta2, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    e = float_arg(cell, "eps", eps, lo=0.0, lo_open=True)
    return b1, b2, e


def _moments(m_p, v_p, g, b1, b2):
    """m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2, in place. Returns the updated arrays."""
    m = work_array(m_p)
    v = work_array(v_p)
    g = as_compute(g, m)
    m *= b1
    m += (1.0 - b1) * g
    v *= b2
    v += (1.0 - b2) * (g * g)
    write_back(m_p, m)
    write_back(v_p, v)
    return m, v, g


class Adam(Optimizer):
    """`Adam(params, learning_rate=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, use_locking=False,
    use_nesterov=False, weight_decay=0.0, loss_scale=1.0, use_amsgrad=False, **kwargs)`, kwargs
    `use_lazy` / `use_offload` (bools).
    `use_locking` is checked and stored but changes nothing: it guards concurrent updates of a
    parameter, and minispore's eager updates never run concurrently."""

    def __init__(self, params, learning_rate=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, use_locking=False,
                 use_nesterov=False, weight_decay=0.0, loss_scale=1.0, use_amsgrad=False, **kwargs):
        super().__init__(learning_rate, params, weight_decay, loss_scale)
        unknown = sorted(set(kwargs) - {"use_lazy", "use_offload"})
        if unknown:
            raise OpValueError("Adam", "keyword arguments among ['use_lazy', 'use_offload']", f"{unknown}")
        use_lazy = _checks.boolean("Adam", "use_lazy", kwargs.get("use_lazy", False))
        use_offload = _checks.boolean("Adam", "use_offload", kwargs.get("use_offload", False))
        self.beta1, self.beta2, self.eps = _check_betas("Adam", beta1, beta2, eps)
        self.use_locking = _checks.boolean("Adam", "use_locking", use_locking)
        self.use_nesterov = _checks.boolean("Adam", "use_nesterov", use_nesterov)
        self.use_amsgrad = _checks.boolean("Adam", "use_amsgrad", use_amsgrad)
        if use_lazy and use_offload:
            raise OpValueError("Adam", "at most one of use_lazy and use_offload", "both True")
        if use_amsgrad and (use_lazy or use_offload):
            raise OpValueError("Adam", "use_amsgrad=False with use_lazy or use_offload", "use_amsgrad=True")
        self.use_lazy, self.use_offload = use_lazy, use_offload
        self.beta1_power = Parameter(Tensor(np.ones((), np.float32)), name="beta1_power", requires_grad=False)
        self.beta2_power = Parameter(Tensor(np.ones((), np.float32)), name="beta2_power", requires_grad=False)
        self.moment1 = self._state("moment1", "zeros")
        self.moment2 = self._state("moment2", "zeros")
        if use_amsgrad:
            self.vhat = self._state("vhat", "zeros")

    def _update(self, grads, lrs, t):
        b1, b2, eps = self.beta1, self.beta2, self.eps
        # running float32 products, as MindSpore's `beta1_power = beta1_power * beta1`
        b1p = np.float32(self.beta1_power._data) * np.float32(b1)
        b2p = np.float32(self.beta2_power._data) * np.float32(b2)
        write_back(self.beta1_power, np.asarray(b1p, np.float32))
        write_back(self.beta2_power, np.asarray(b2p, np.float32))
        # bias correction folded into one scalar step size (computed in double, rounded once)
        correction = math.sqrt(1.0 - float(b2p)) / (1.0 - float(b1p))
        vhats = self.vhat if self.use_amsgrad else [None] * len(self._params_seq)
        for p, g, lr, wd, m_p, v_p, vh_p in zip(self._params_seq, grads, lrs, self._decay, self.moment1,
                                                 self.moment2, vhats):
            w = flat_work(p)
            m, v = flat_work(m_p, w), flat_work(v_p, w)
            vh = flat_work(vh_p, w) if vh_p is not None else None
            # the rule itself: _kernels.adam_reference, computed in place (_kernels.adam)
            _kernels.adam(w.reshape(-1), m.reshape(-1), v.reshape(-1), flat_grad(g, w), b1=b1, b2=b2, eps=eps,
                          step_size=lr * correction, wd=wd, nesterov=self.use_nesterov,
                          vhat=None if vh is None else vh.reshape(-1))
            write_back(m_p, m)
            write_back(v_p, v)
            if vh is not None:
                write_back(vh_p, vh)
            write_back(p, w)


class AdamWeightDecay(Optimizer):
    """`AdamWeightDecay(params, learning_rate=1e-3, beta1=0.9, beta2=0.999, eps=1e-6, weight_decay=0.0)`."""

    def __init__(self, params, learning_rate=1e-3, beta1=0.9, beta2=0.999, eps=1e-6, weight_decay=0.0):
        super().__init__(learning_rate, params, weight_decay)
        self.beta1, self.beta2, self.eps = _check_betas("AdamWeightDecay", beta1, beta2, eps)
        self.moments1 = self._state("adam_m", "zeros")
        self.moments2 = self._state("adam_v", "zeros")

    def _update(self, grads, lrs, t):
        b1, b2, eps = self.beta1, self.beta2, self.eps
        for p, g, lr, wd, m_p, v_p in zip(self._params_seq, grads, lrs, self._decay, self.moments1, self.moments2):
            w = flat_work(p)
            m, v = flat_work(m_p, w), flat_work(v_p, w)
            # _kernels.adam_weight_decay_reference, computed in place without temporaries
            _kernels.adam_weight_decay(w.reshape(-1), m.reshape(-1), v.reshape(-1), flat_grad(g, w), b1=b1, b2=b2,
                                       eps=eps, lr=lr, wd=wd)
            write_back(m_p, m)
            write_back(v_p, v)
            write_back(p, w)
