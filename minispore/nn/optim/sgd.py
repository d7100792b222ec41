"""`nn.SGD` (stochastic gradient descent with optional momentum, dampening and Nesterov) and
`nn.Momentum` (MindSpore's ApplyMomentum).

SGD, per element (MindSpore's SGD kernel, which is also PyTorch's `torch.optim.SGD`):
    g = g + weight_decay * w                (parameters without 'beta'/'gamma' in their name, as for
                                             every MindSpore optimizer; in groups, the group's value)
    if momentum > 0:
        v = g                               on the first update (state `stat` is 1)
        v = momentum * v + (1 - dampening) * g   afterwards
        g = g + momentum * v  if nesterov  else  v
    w = w - lr * g
State: `accum.<name>` (v), `stat.<name>` (1 until the first update) and the Parameter `momentum`.

Momentum:
    g = g + weight_decay * w                (parameters without 'beta'/'gamma' in their name)
    v = momentum * v + g
    w = w - lr * v                          (nesterov: w = w - lr * (g + momentum * v))
State: `moments.<name>` and the Parameter `momentum`.

Both run in the parameter's dtype, in place without temporaries: `_kernels.sgd` / `momentum` compute
exactly the plain `_kernels.sgd_reference` / `momentum_reference`.
"""
from __future__ import annotations

import numpy as np

from ...common.errors import OpValueError
from ...common.tensor import Parameter, Tensor
from .. import _checks
from . import _kernels
from .optimizer import Optimizer, flat_grad, flat_work, float_arg, write_back


class SGD(Optimizer):
    """`SGD(params, learning_rate=0.1, momentum=0.0, dampening=0.0, weight_decay=0.0,
    nesterov=False, loss_scale=1.0)`."""

    def __init__(self, params, learning_rate=0.1, momentum=0.0, dampening=0.0, weight_decay=0.0,
                 nesterov=False, loss_scale=1.0):
        super().__init__(learning_rate, params, weight_decay, loss_scale)
        momentum = _checks.real("SGD", "momentum", momentum, lo=0.0)
        dampening = _checks.real("SGD", "dampening", dampening, lo=0.0)
        self.nesterov = _checks.boolean("SGD", "nesterov", nesterov)
        if nesterov and (momentum <= 0.0 or dampening != 0.0):
            raise OpValueError("SGD", "momentum > 0 and dampening == 0 when nesterov=True",
                               f"momentum={momentum}, dampening={dampening}")
        self.dampening = dampening
        self.momentum = Parameter(Tensor(np.float32(momentum)), name="momentum", requires_grad=False)
        self.accum = self._state("accum", "zeros")
        self.stat = self._state("stat", "ones")

    def _update(self, grads, lrs, t):
        mom = float(self.momentum._data)
        damp = self.dampening
        for p, g, lr, wd, acc_p, stat_p in zip(self._params_seq, grads, lrs, self._decay, self.accum, self.stat):
            w = flat_work(p)
            acc = flat_work(acc_p, w) if mom > 0 else None
            first = mom > 0 and stat_p._data.reshape(-1)[:1].sum() > 0   # stat is 1 until the first update
            # _kernels.sgd_reference, computed in place without temporaries
            _kernels.sgd(w.reshape(-1), None if acc is None else acc.reshape(-1), flat_grad(g, w), lr=lr,
                         momentum=mom, dampening=damp, wd=wd, nesterov=self.nesterov, first=first)
            if acc is not None:
                write_back(acc_p, acc)
            if first:
                stat_p._data[...] = 0
                stat_p._version += 1
            write_back(p, w)


class Momentum(Optimizer):
    """`Momentum(params, learning_rate, momentum, weight_decay=0.0, loss_scale=1.0, use_nesterov=False)`."""

    def __init__(self, params, learning_rate, momentum, weight_decay=0.0, loss_scale=1.0, use_nesterov=False):
        super().__init__(learning_rate, params, weight_decay, loss_scale)
        momentum = float_arg("Momentum", "momentum", momentum, lo=0.0)     # MindSpore: a float, not an int
        self.use_nesterov = _checks.boolean("Momentum", "use_nesterov", use_nesterov)
        self.momentum = Parameter(Tensor(np.float32(momentum)), name="momentum", requires_grad=False)
        self.moments = self._state("moments", "zeros")

    def _update(self, grads, lrs, t):
        mom = float(self.momentum._data)
        for p, g, lr, wd, v_p in zip(self._params_seq, grads, lrs, self._decay, self.moments):
            w = flat_work(p)
            v = flat_work(v_p, w)
            # _kernels.momentum_reference, computed in place without temporaries
            _kernels.momentum(w.reshape(-1), v.reshape(-1), flat_grad(g, w), lr=lr, momentum=mom, wd=wd,
                              nesterov=self.use_nesterov)
            write_back(v_p, v)
            write_back(p, w)
