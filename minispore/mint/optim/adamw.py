"""`mint.optim.AdamW` with PyTorch's `torch.optim.AdamW` semantics.

`AdamW(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, *,
maximize=False)`; `params` is an iterable of Parameters or of group dicts (`{'params': [...],
'weight_decay': 0.0, 'lr': ...}`), kept in `param_groups` as in PyTorch (changing
`group['lr']` between steps changes the learning rate).

Update t = 1, 2, ... (decoupled weight decay, bias-corrected moments, eps outside the sqrt):
    w = w * (1 - lr * weight_decay)
    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * g^2                 (amsgrad: v_max = max(v_max, v), use v_max)
    w = w - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
Compare `nn.AdamWeightDecay` (no bias correction, decay scaled by lr inside the step) and
`nn.Adam` (eps added before the bias correction).

State Parameters: `exp_avg.<name>`, `exp_avg_sq.<name>` (and `max_exp_avg_sq.<name>` with
amsgrad), and `state_step` (int32, the number of updates taken).

The update runs in the parameter's dtype (float32 weights: all in float32, as PyTorch), in place
without temporaries: `nn.optim._kernels.torch_adam` computes exactly `torch_adam_reference`.
"""
from __future__ import annotations

import numbers

import numpy as np

from ...common.errors import OpTypeError, OpValueError
from ...common.tensor import Parameter, ParameterTuple, Tensor
from ...nn.cell import Cell
from ...nn.optim import _kernels
from ...nn.optim.optimizer import flat_grad, flat_work, write_back

_DEFAULT_KEYS = ("lr", "betas", "eps", "weight_decay", "amsgrad", "maximize")


def _real(name, v, lo=None, lo_open=False, hi=None, hi_open=False):
    if not isinstance(v, numbers.Real) or isinstance(v, bool):
        raise OpTypeError("AdamW", f"'{name}' to be a float", f"{type(v).__name__} {v!r}")
    if (lo is not None and (v < lo or (lo_open and v == lo))) or (hi is not None and (v > hi or (hi_open and v == hi))):
        raise OpValueError("AdamW", f"'{name}' in {'(' if lo_open else '['}{lo}, {hi}{')' if hi_open else ']'}",
                           repr(v))
    return float(v)


def _check_group(group):
    _real("lr", group["lr"], lo=0.0)
    _real("eps", group["eps"], lo=0.0)
    _real("weight_decay", group["weight_decay"], lo=0.0)
    betas = group["betas"]
    if not isinstance(betas, (tuple, list)) or len(betas) != 2:
        raise OpValueError("AdamW", "betas as a pair (beta1, beta2)", repr(betas))
    _real("betas[0]", betas[0], lo=0.0, hi=1.0, hi_open=True)
    _real("betas[1]", betas[1], lo=0.0, hi=1.0, hi_open=True)


def param_groups(op, params, defaults, keys, check):
    """PyTorch's `params` argument (Parameters, or group dicts with per-group settings) -> the list of
    group dicts (defaults filled in, each checked) and the flat parameter list, in order. Shared by
    mint.optim's AdamW, Adam and SGD."""
    if isinstance(params, Parameter):
        params = [params]
    try:
        params = list(params)
    except TypeError:
        raise OpTypeError(op, "params as an iterable of Parameters or group dicts", type(params).__name__) from None
    if not params:
        raise OpValueError(op, "a non-empty parameter list", "an empty list")
    groups = params if isinstance(params[0], dict) else [{"params": params}]
    out, seen, flat = [], set(), []
    for group in groups:
        if not isinstance(group, dict) or "params" not in group:
            raise OpTypeError(op, "group dicts with a 'params' key", type(group).__name__)
        g = {k: v for k, v in group.items()}
        g["params"] = list(g["params"]) if not isinstance(g["params"], Parameter) else [g["params"]]
        unknown = [k for k in g if k != "params" and k not in keys]
        if unknown:
            raise OpValueError(op, f"group keys among {['params', *keys]}", repr(unknown))
        for k, v in defaults.items():
            g.setdefault(k, v)
        check(g)
        for p in g["params"]:
            if not isinstance(p, Parameter):
                raise OpTypeError(op, "Parameters in 'params'", type(p).__name__)
            if id(p) in seen:
                raise OpValueError(op, "each parameter in one group only", f"'{p.name}' twice")
            seen.add(id(p))
            flat.append(p)
        out.append(g)
    return out, flat


def check_gradients(op, gradients, flat):
    if isinstance(gradients, Tensor) or not isinstance(gradients, (tuple, list)):
        raise OpTypeError(op, "gradients as a tuple of Tensors (one per parameter)", type(gradients).__name__)
    if len(gradients) != len(flat):
        raise OpValueError(op, f"{len(flat)} gradients (one per parameter)", str(len(gradients)))
    for p, g in zip(flat, gradients):
        if not isinstance(g, Tensor) or g.shape != p.shape:
            raise OpValueError(op, f"a gradient of shape {tuple(p.shape)} for '{p.name}'",
                               f"{type(g).__name__} of shape {getattr(g, 'shape', None)}")


class AdamW(Cell):
    jit_host_call = True        # graph mode: updates parameters in place on NumPy, as a host call (nn/cell.py)
    _decoupled = True           # weight decay applied to the weights (AdamW), not added to the gradient (Adam)

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, *,
                 maximize=False):
        super().__init__(auto_prefix=False)
        defaults = dict(lr=lr, betas=tuple(betas) if isinstance(betas, (tuple, list)) else betas, eps=eps,
                        weight_decay=weight_decay, amsgrad=bool(amsgrad), maximize=bool(maximize))
        _check_group(defaults)
        self.defaults = defaults
        self.param_groups, flat = param_groups(type(self).__name__, params, defaults, _DEFAULT_KEYS, _check_group)
        self.parameters = ParameterTuple(flat)
        self._flat = flat
        self.exp_avg = self._state("exp_avg")
        self.exp_avg_sq = self._state("exp_avg_sq")
        self._amsgrad = any(g["amsgrad"] for g in self.param_groups)
        self.max_exp_avg_sq = self._state("max_exp_avg_sq") if self._amsgrad else None
        self.state_step = Parameter(Tensor(np.zeros((), np.int32)), name="state_step", requires_grad=False)

    def _state(self, prefix):
        return ParameterTuple(Parameter(np.zeros_like(p._data), name=f"{prefix}.{p.name}", requires_grad=False)
                              for p in self._flat)

    def construct(self, gradients):
        check_gradients(type(self).__name__, gradients, self._flat)
        t = int(self.state_step._data) + 1
        i = 0
        for group in self.param_groups:
            kw = dict(b1=float(group["betas"][0]), b2=float(group["betas"][1]), eps=float(group["eps"]),
                      lr=float(group["lr"]), t=t, wd=float(group["weight_decay"]), decoupled=self._decoupled,
                      maximize=group["maximize"])
            for p in group["params"]:
                w = flat_work(p)
                m, v = flat_work(self.exp_avg[i], w), flat_work(self.exp_avg_sq[i], w)
                vmax = flat_work(self.max_exp_avg_sq[i], w) if group["amsgrad"] else None
                # _kernels.torch_adam_reference, computed in place without temporaries
                _kernels.torch_adam(w.reshape(-1), m.reshape(-1), v.reshape(-1), flat_grad(gradients[i]._data, w),
                                    vmax=None if vmax is None else vmax.reshape(-1), **kw)
                write_back(self.exp_avg[i], m)
                write_back(self.exp_avg_sq[i], v)
                if vmax is not None:
                    write_back(self.max_exp_avg_sq[i], vmax)
                write_back(p, w)
                i += 1
        self.state_step._data[...] = t
        return True

    def extend_repr(self):
        return f"groups={len(self.param_groups)}, parameters={len(self._flat)}"


class Adam(AdamW):
    """`mint.optim.Adam(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False, *,
    maximize=False)`: PyTorch's Adam; weight decay is an L2 term added to the gradient (g + wd * w)
    before the moments, unlike AdamW's decoupled decay. Same state Parameters as AdamW."""

    _decoupled = False

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False, *,
                 maximize=False):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize)
