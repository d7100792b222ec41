"""`nn.Optimizer`: the base of every optimizer (a Cell, as in MindSpore).

`optimizer(grads)` applies one update to `optimizer.parameters` in place. `grads` is the tuple
`value_and_grad(fn, None, optimizer.parameters)` returns: one gradient per parameter, same order.

What the base class does for every optimizer:

* **learning rate**: a float, a 0-d Tensor, a list/1-d Tensor (one value per step) or a
  `LearningRateSchedule` cell (called with the step). `get_lr()` gives the current value.
* **global_step**: an int32 Parameter of shape (1,), incremented after each update; a schedule is
  evaluated at it, so resuming from a checkpoint resumes the schedule.
* **parameter groups**: `parameters` may be a list of dicts `{'params': [...], 'weight_decay': wd,
  'lr': lr}` plus optionally `{'order_params': [...]}` giving the order of the flattened list.
  Without groups, `weight_decay` applies to every parameter whose name contains neither 'beta' nor
  'gamma' (MindSpore's rule, which spares LayerNorm's scale and shift).
* **loss_scale**: gradients are divided by it first (for a fixed loss scale in mixed precision).
* **state**: buffers such as Adam's moments are Parameters (requires_grad=False) registered on the
  optimizer under MindSpore's names (`moment1.dense.weight`), so `save_checkpoint(optimizer)` or
  of the TrainOneStepCell that holds it saves them.

Updates run directly on the NumPy arrays (an optimizer step is never differentiated), in float32
for half-precision parameters, and write back into each parameter's storage. The rules the
benchmarked models use (Adam, AdamWeightDecay, Momentum, SGD, and mint's AdamW/Adam/SGD) run as
the in-place kernels of `_kernels.py` (blockwise NumPy, or one C loop where a compiler exists),
each bit-identical to the plain formula written beside it (`flat_work` / `flat_grad` /
`write_back` below hand the kernels their arrays).
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from ...common.errors import OpTypeError, OpValueError
from ...common.tensor import Parameter, ParameterTuple, Tensor
from ..cell import Cell

_GROUP_KEYS = ("params", "lr", "weight_decay", "order_params", "grad_centralization")


class LearningRateSchedule(Cell):
    """Base of learning-rate schedules: `schedule(global_step) -> lr` (a float32 Tensor).

    Subclasses implement `_lr(step)` on a float64 NumPy array of steps; the schedule is a pure
    function of the step, which is what lets training resume exactly from a checkpoint.
    """

    jit_host_call = True      # graph mode: computes on NumPy, so it runs as a host call (nn/cell.py)

    def _lr(self, step: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def construct(self, global_step):
        step = np.asarray(global_step._data if isinstance(global_step, Tensor) else global_step, dtype=np.float64)
        return Tensor(np.asarray(self._lr(step), dtype=np.float32))

    def value_at(self, step: int) -> float:
        """The learning rate at `step` as a Python float (used by the optimizers)."""
        return float(self._lr(np.float64(step)))


class _IteratorLearningRate(LearningRateSchedule):
    """A list of per-step learning rates held as the Parameter `learning_rate` (shape (steps,))."""

    def __init__(self, values: np.ndarray, name: str):
        super().__init__()
        self.learning_rate = Parameter(Tensor(np.asarray(values, dtype=np.float32)), name=name, requires_grad=False)

    def _lr(self, step):
        table = self.learning_rate._data
        idx = np.asarray(step, dtype=np.int64)
        if np.any(idx >= table.shape[0]) or np.any(idx < 0):
            raise OpValueError("Optimizer", f"a step inside the learning-rate list (length {table.shape[0]})",
                               f"step {int(np.max(idx))}")
        return table[idx]


class _FixedLearningRate(LearningRateSchedule):
    """A constant learning rate (a Parameter) dressed as a schedule, for groups mixing fixed and
    dynamic learning rates."""

    def __init__(self, param: Parameter):
        super().__init__()
        self.learning_rate = param

    def _lr(self, step):
        return np.broadcast_to(self.learning_rate._data.astype(np.float64), np.shape(step))


def _is_real(v):
    """A finite real number. NaN and +-inf are never meaningful hyper-parameters, and a NaN slips
    through every range test (`nan < 0` is False), then turns every weight into NaN at the first
    step: refusing them here, at construction, is what every optimizer's checks build on."""
    return (isinstance(v, (numbers.Real, np.floating, np.integer)) and not isinstance(v, bool)
            and math.isfinite(v))


def float_arg(cell: str, name: str, v, lo=None, lo_open=False, hi=None, hi_open=False) -> float:
    """A hyper-parameter MindSpore requires to be a Python float (`validator.check_value_type(name,
    v, [float])`): `momentum=1` or `decay=True` is a type error there, so it is one here too.
    NaN and +-inf are refused whatever the range (see `_is_real`)."""
    if not isinstance(v, (float, np.floating)):
        raise OpTypeError(cell, f"'{name}' to be a float", f"{type(v).__name__} {v!r}")
    if not math.isfinite(v):
        raise OpValueError(cell, f"'{name}' as a finite float", repr(v))
    bad = ((lo is not None and (v < lo or (lo_open and v == lo)))
           or (hi is not None and (v > hi or (hi_open and v == hi))))
    if bad:
        rng = f"{'(' if lo_open else '['}{lo}, {hi if hi is not None else 'inf'}{')' if hi_open or hi is None else ']'}"
        raise OpValueError(cell, f"'{name}' in {rng}", repr(v))
    return float(v)


class Optimizer(Cell):
    """`Optimizer(learning_rate, parameters, weight_decay=0.0, loss_scale=1.0)`. See the module docstring."""

    jit_host_call = True      # graph mode: updates parameters in place on NumPy, as a host call (nn/cell.py)

    def __init__(self, learning_rate, parameters, weight_decay=0.0, loss_scale=1.0):
        super().__init__(auto_prefix=False)
        name = type(self).__name__
        parameters = self._check_param_list(parameters)
        if not _is_real(loss_scale) or loss_scale <= 0:
            raise OpValueError(name, "loss_scale > 0 (finite)", repr(loss_scale))
        self.loss_scale = float(loss_scale)
        weight_decay = self._check_weight_decay(weight_decay)
        self.dynamic_lr = False
        self.is_group = isinstance(parameters[0], dict)
        self.is_group_lr = False
        default_lr = self._preprocess_lr(learning_rate)

        if self.is_group:
            params, group_lr, group_wd = self._parse_groups(parameters, default_lr, weight_decay)
        else:
            params = parameters
            group_lr = None
            decay = [("beta" not in p.name and "gamma" not in p.name) for p in params]
            group_wd = [weight_decay if d else 0.0 for d in decay]

        self.global_step = Parameter(Tensor(np.zeros((1,), np.int32)), name="global_step", requires_grad=False)
        if self.is_group_lr:
            # one learning-rate holder per parameter (shared between the parameters of a group)
            built, holders = {}, []
            for key, lr in group_lr:
                if key not in built:
                    h = self._build_lr(lr, "learning_rate" if key == "default" else f"learning_rate_group_{key}")
                    if self.dynamic_lr and isinstance(h, Parameter):
                        h = _FixedLearningRate(h)       # so every group's lr is a schedule cell
                    built[key] = h
                holders.append(built[key])
            if self.dynamic_lr:
                from ..container import CellList
                self.learning_rate = CellList(_unique(holders), auto_prefix=False)
            else:
                self.learning_rate = ParameterTuple(_unique(holders))
            self._lr_holders = holders
        else:
            self.learning_rate = self._build_lr(default_lr, "learning_rate")
            self._lr_holders = None

        self.parameters = ParameterTuple(params)
        self._params_seq = list(params)
        self.weight_decay = tuple(group_wd) if self.is_group else weight_decay
        self._decay = tuple(float(w) for w in group_wd)          # per parameter, 0 = no decay
        # MindSpore: ungrouped, the flag is the name filter alone; grouped, "this group's wd > 0"
        self.decay_flags = tuple(w > 0 for w in self._decay) if self.is_group else tuple(decay)
        self.exec_weight_decay = any(self.decay_flags)

    # -- construction helpers -----------------------------------------------------------------
    def _check_param_list(self, parameters):
        name = type(self).__name__
        if parameters is None:
            raise OpValueError(name, "a list of Parameters (e.g. net.trainable_params())", "None")
        if isinstance(parameters, (Parameter, dict)):
            parameters = [parameters]
        try:
            parameters = list(parameters)
        except TypeError:
            raise OpTypeError(name, "an iterable of Parameters or of group dicts", type(parameters).__name__) from None
        if not parameters:
            raise OpValueError(name, "a non-empty parameter list", "an empty list")
        if not (all(isinstance(p, Parameter) for p in parameters) or all(isinstance(p, dict) for p in parameters)):
            kinds = sorted({type(p).__name__ for p in parameters})
            raise OpTypeError(name, "all elements Parameters, or all group dicts", f"elements of types {kinds}")
        if isinstance(parameters[0], Parameter):
            seen = set()
            for p in parameters:
                if id(p) in seen:
                    raise OpValueError(name, "each parameter once", f"'{p.name}' twice")
                seen.add(id(p))
        return parameters

    def _check_weight_decay(self, wd):
        if not _is_real(wd) or wd < 0:
            raise OpValueError(type(self).__name__, "weight_decay >= 0 (a finite float)", repr(wd))
        return float(wd)

    def _preprocess_lr(self, lr):
        """float -> float; 0-d Tensor -> float; list / 1-d Tensor / schedule -> dynamic."""
        name = type(self).__name__
        if isinstance(lr, (numbers.Real, np.floating, np.integer)) and not isinstance(lr, bool):
            if not math.isfinite(lr) or lr < 0:
                raise OpValueError(name, "learning_rate as a finite float >= 0", repr(lr))
            return float(lr)
        if isinstance(lr, Tensor) and lr.ndim == 0:
            if not math.isfinite(float(lr.item())) or float(lr.item()) < 0:
                raise OpValueError(name, "learning_rate as a finite float >= 0", repr(float(lr.item())))
            return float(lr.item())
        if isinstance(lr, LearningRateSchedule):
            self.dynamic_lr = True
            return lr
        if isinstance(lr, Tensor):
            if lr.ndim != 1:
                raise OpValueError(name, "a learning_rate Tensor of rank 0 or 1", f"rank {lr.ndim}")
            arr = np.asarray(lr._data, dtype=np.float32)
        elif isinstance(lr, (list, tuple, np.ndarray)):
            arr = np.asarray(lr, dtype=np.float32)
            if arr.ndim != 1:
                raise OpValueError(name, "a flat list of per-step learning rates", f"shape {arr.shape}")
        else:
            raise OpTypeError(name, "learning_rate as a float, Tensor, list or LearningRateSchedule",
                              type(lr).__name__)
        if arr.size == 0 or not np.all(np.isfinite(arr)) or np.any(arr < 0):
            raise OpValueError(name, "a non-empty list of finite learning rates >= 0", repr(arr.tolist()[:8]))
        self.dynamic_lr = True
        return arr

    def _build_lr(self, lr, name):
        if isinstance(lr, float):
            return Parameter(Tensor(np.float32(lr)), name=name, requires_grad=False)
        if isinstance(lr, np.ndarray):
            return _IteratorLearningRate(lr, name)
        return lr                                     # a LearningRateSchedule

    def _parse_groups(self, groups, default_lr, default_wd):
        name = type(self).__name__
        params, group_lr, group_wd, order = [], [], [], None
        seen = set()
        for g, group in enumerate(groups):
            bad = [k for k in group if k not in _GROUP_KEYS]
            if bad:
                raise OpValueError(name, f"group keys among {list(_GROUP_KEYS)}", f"{bad}")
            if "order_params" in group:
                if len(group) > 1:
                    raise OpValueError(name, "an 'order_params' dict with no other key", f"keys {sorted(group)}")
                order = list(group["order_params"])
                continue
            if "params" not in group:
                raise OpValueError(name, "a 'params' key in every group", f"keys {sorted(group)}")
            gparams = self._check_param_list(group["params"])
            if not all(isinstance(p, Parameter) for p in gparams):
                raise OpTypeError(name, "group 'params' to be Parameters", "group dicts")
            if "lr" in group:
                self.is_group_lr = True
                lr = self._preprocess_lr(group["lr"])
            else:
                lr = default_lr
            wd = self._check_weight_decay(group["weight_decay"]) if "weight_decay" in group else default_wd
            for p in gparams:
                if id(p) in seen:
                    raise OpValueError(name, "each parameter in one group only", f"'{p.name}' in two groups")
                seen.add(id(p))
                params.append(p)
                group_lr.append((g, lr))
                group_wd.append(wd)
        if order is not None:
            if len(order) != len(params) or {id(p) for p in order} != seen:
                raise OpValueError(name, "'order_params' listing exactly the grouped parameters",
                                   f"{len(order)} parameters for {len(params)} grouped")
            pos = {id(p): i for i, p in enumerate(params)}
            idx = [pos[id(p)] for p in order]
            params = [params[i] for i in idx]
            group_lr = [group_lr[i] for i in idx]
            group_wd = [group_wd[i] for i in idx]
        if not params:
            raise OpValueError(name, "at least one group with 'params'", "none")
        # groups sharing the default lr share one holder
        group_lr = [(g if lr is not default_lr else "default", lr) for g, lr in group_lr]
        return params, _share_holders(group_lr), group_wd

    def _state(self, prefix, init="zeros"):
        """One state buffer per parameter, named `<prefix>.<param name>` (MindSpore's
        `ParameterTuple.clone(prefix, init)`), same shape and dtype, not trainable.
        `init` is "zeros", "ones" or a number every element starts at (Adagrad-style
        accumulators start at their `accum` argument)."""
        if init == "zeros":
            make = np.zeros_like
        elif init == "ones":
            make = np.ones_like
        else:
            def make(like):
                return np.full_like(like, init)
        return ParameterTuple(Parameter(make(p._data), name=f"{prefix}.{p.name}", requires_grad=False)
                              for p in self._params_seq)

    # -- learning rate ----------------------------------------------------------------------------
    @property
    def current_step(self) -> int:
        """Updates applied so far (the value of `global_step`)."""
        return int(self.global_step._data[0])

    step = current_step          # the same number; `optimizer.step` reads it (it is not PyTorch's step())

    def _lr_values(self, step):
        """The learning rate of each parameter at `step` (Python floats)."""
        if self._lr_holders is None:
            v = _lr_value(self.learning_rate, step)
            return [v] * len(self._params_seq)
        cache = {}
        out = []
        for h in self._lr_holders:
            k = id(h)
            if k not in cache:
                cache[k] = _lr_value(h, step)
            out.append(cache[k])
        return out

    def get_lr(self):
        """The learning rate for the next update: a float32 Tensor, or a tuple of them (one per
        parameter) when groups have their own lr. (Unlike MindSpore's `get_lr`, reading it does
        not advance `global_step`; the update does.)"""
        vals = self._lr_values(self.current_step)
        if self._lr_holders is None:
            return Tensor(np.float32(vals[0]))
        return tuple(Tensor(np.float32(v)) for v in vals)

    def get_lr_parameter(self, param):
        """The learning-rate Parameter (or schedule) that applies to `param` (or a list of them)."""
        single = isinstance(param, Parameter)
        plist = [param] if single else list(param)
        ids = [id(p) for p in self._params_seq]
        out = []
        for p in plist:
            if id(p) not in ids:
                raise OpValueError("get_lr_parameter", "a parameter of this optimizer", f"'{getattr(p, 'name', p)}'")
            h = self.learning_rate if self._lr_holders is None else self._lr_holders[ids.index(id(p))]
            out.append(h.learning_rate if isinstance(h, (_IteratorLearningRate, _FixedLearningRate)) else h)
        return out[0] if single else out

    # -- the update ---------------------------------------------------------------------------------
    def _check_grads(self, gradients):
        name = type(self).__name__
        if isinstance(gradients, Tensor) or not isinstance(gradients, (tuple, list)):
            raise OpTypeError(name, "gradients as a tuple of Tensors (one per parameter)", type(gradients).__name__)
        n = len(self._params_seq)
        if len(gradients) != n:
            raise OpValueError(name, f"{n} gradients (one per parameter in optimizer.parameters)",
                               f"{len(gradients)}")
        arrays = []
        for p, g in zip(self._params_seq, gradients):
            if not isinstance(g, Tensor):
                raise OpTypeError(name, f"a Tensor gradient for '{p.name}'", type(g).__name__)
            if g.shape != p.shape:
                raise OpValueError(name, f"the gradient of '{p.name}' to have shape {tuple(p.shape)}",
                                   f"shape {tuple(g.shape)}")
            a = g._data
            if self.loss_scale != 1.0:
                a = a / np.asarray(self.loss_scale, dtype=a.dtype)
            arrays.append(a)
        return arrays

    def construct(self, gradients):
        grads = self._check_grads(gradients)
        step = self.current_step
        lrs = self._lr_values(step)
        self._update(grads, lrs, step + 1)
        self.global_step._data[0] = step + 1
        return True

    def _update(self, grads, lrs, t):
        """Apply the rule. `grads`: ndarrays aligned with `self._params_seq`; `lrs`: floats; `t`: the
        1-based number of this update."""
        raise NotImplementedError

    def extend_repr(self):
        return f"parameters={len(self._params_seq)}, step={self.current_step}"


# -- helpers shared by the rules ---------------------------------------------------------------------

def _lr_value(holder, step) -> float:
    if isinstance(holder, Parameter):
        return float(holder._data.reshape(()))
    return holder.value_at(step)


def _unique(items):
    out, seen = [], set()
    for x in items:
        if id(x) not in seen:
            seen.add(id(x))
            out.append(x)
    return out


def _share_holders(group_lr):
    """Collapse per-parameter (group key, lr) into (key, lr) with one lr object per key."""
    first = {}
    out = []
    for key, lr in group_lr:
        first.setdefault(key, lr)
        out.append((key, first[key]))
    return out


def work_array(p: Parameter) -> np.ndarray:
    """The parameter's values, in a dtype the update can be computed in (float32/float64), ready to
    be modified in place: the storage itself when it is writable float32/float64, else a copy
    (half-precision parameters are updated in float32 and rounded once by `write_back`)."""
    a = p._data
    if a.dtype == np.float32 or a.dtype == np.float64:
        return a if a.flags.writeable else a.copy()
    return a.astype(np.float32)


def write_back(p: Parameter, new: np.ndarray):
    """Store `new` into the parameter: in place when the storage allows (so views and optimizer
    references stay valid), and bump the version so a stale autodiff tape cannot use old values."""
    a = p._data
    if new is a:
        pass
    elif a.flags.writeable and a.shape == new.shape:
        np.copyto(a, new, casting="unsafe")
    else:
        p._data = new.astype(a.dtype)
    p._version += 1


def flat_work(p: Parameter, like: np.ndarray | None = None) -> np.ndarray:
    """`work_array(p)` made ready for the in-place kernels of `_kernels`: C-contiguous and in the
    dtype of `like` (the parameter's compute array, for state buffers), copying only when the
    storage is not already so. `.reshape(-1)` of the result is a view; `write_back(p, result)`
    stores it (a no-op copy-wise when it is the storage itself)."""
    a = work_array(p)
    if like is not None and a.dtype != like.dtype:
        a = a.astype(like.dtype)
    if not a.flags.c_contiguous:
        a = np.ascontiguousarray(a)
    return a


def flat_grad(g: np.ndarray, like: np.ndarray) -> np.ndarray:
    """The gradient as a flat array in `like`'s dtype (a view when it already is one)."""
    return as_compute(g, like).reshape(-1)


def as_compute(x: np.ndarray, like: np.ndarray) -> np.ndarray:
    """`x` in the dtype `like` is being computed in."""
    return x if x.dtype == like.dtype else x.astype(like.dtype)


def weights_and_decayed_grad(p: Parameter, g: np.ndarray, wd: float):
    """(w, g) for one parameter's update: `w = work_array(p)` and the gradient in w's dtype with the
    L2 term `wd * w` added when wd > 0 (MindSpore's `decay_weight`, applied before the rule itself,
    as most optimizers do)."""
    w = work_array(p)
    g = as_compute(g, w)
    if wd > 0:
        g = g + wd * w
    return w, g
