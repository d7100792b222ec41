"""`mint.optim.SGD(params, lr, momentum=0, dampening=0, weight_decay=0, nesterov=False, *, maximize=False)`
with PyTorch's semantics (what MindSpore 2.10's mint.optim.SGD computes):

    g = grad + weight_decay * w                      (maximize: -grad)
    buf = g                             on the first step, then
    buf = momentum * buf + (1 - dampening) * g
    g = g + momentum * buf if nesterov else buf      (only when momentum != 0)
    w = w - lr * g

State Parameters: `momentum_buf.<name>` and `step_t` (int32, the number of steps taken).
"""
from __future__ import annotations

import numbers

import numpy as np

from ...common.errors import OpTypeError, OpValueError
from ...common.tensor import Parameter, ParameterTuple, Tensor
from ...nn.cell import Cell
from ...nn.optim import _kernels
from ...nn.optim.optimizer import flat_grad, flat_work, write_back
from .adamw import check_gradients, param_groups

_KEYS = ("lr", "momentum", "dampening", "weight_decay", "nesterov", "maximize")


def _check(group):
    for k in ("lr", "momentum", "dampening", "weight_decay"):
        v = group[k]
        if not isinstance(v, numbers.Real):
            raise OpTypeError("SGD", f"'{k}' to be a float", f"{type(v).__name__} {v!r}")
        if k != "dampening" and v < 0:
            raise OpValueError("SGD", f"'{k}' >= 0", repr(v))
    for k in ("nesterov", "maximize"):
        if not isinstance(group[k], bool):
            raise OpTypeError("SGD", f"'{k}' to be a bool", repr(group[k]))
    if group["nesterov"] and (group["momentum"] <= 0 or group["dampening"] != 0):
        raise OpValueError("SGD", "nesterov with momentum > 0 and dampening == 0",
                           f"momentum {group['momentum']}, dampening {group['dampening']}")


class SGD(Cell):
    jit_host_call = True        # graph mode: updates parameters in place on NumPy, as a host call (nn/cell.py)
    def __init__(self, params, lr, momentum=0, dampening=0, weight_decay=0, nesterov=False, *, maximize=False):
        super().__init__(auto_prefix=False)
        self.defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                             nesterov=nesterov, maximize=maximize)
        _check(self.defaults)
        self.param_groups, flat = param_groups("SGD", params, self.defaults, _KEYS, _check)
        self.parameters = ParameterTuple(flat)
        self._flat = flat
        self.momentum_buf = ParameterTuple(Parameter(np.zeros_like(p._data), name=f"momentum_buf.{p.name}",
                                                     requires_grad=False) for p in flat)
        self.step_t = Parameter(Tensor(np.zeros((), np.int32)), name="step_t", requires_grad=False)

    def construct(self, gradients):
        check_gradients("SGD", gradients, self._flat)
        first = int(self.step_t._data) == 0
        i = 0
        for group in self.param_groups:
            lr, mom, damp, wd = (float(group[k]) for k in ("lr", "momentum", "dampening", "weight_decay"))
            for p in group["params"]:
                w = flat_work(p)
                buf = flat_work(self.momentum_buf[i], w) if mom != 0 else None
                # _kernels.sgd_reference, computed in place without temporaries
                _kernels.sgd(w.reshape(-1), None if buf is None else buf.reshape(-1),
                             flat_grad(gradients[i]._data, w), lr=lr, momentum=mom, dampening=damp, wd=wd,
                             nesterov=group["nesterov"], first=first, maximize=group["maximize"])
                if buf is not None:
                    write_back(self.momentum_buf[i], buf)
                write_back(p, w)
                i += 1
        self.step_t._data[...] += 1
        return True

    def extend_repr(self):
        return f"groups={len(self.param_groups)}, parameters={len(self._flat)}"
