"""Training with loss scaling: `nn.TrainOneStepWithLossScaleCell` and the cells that update the scale.

One step of `TrainOneStepWithLossScaleCell(network, optimizer, scale_sense)(*inputs)`:

    loss  = network(*inputs)
    grads = d(loss)/d(weights) with the output cotangent `scale` (not 1): the backward pass runs
            on the scaled loss, so small float16 gradients do not underflow
    grads = grads / scale
    overflow = some gradient has inf/nan               (get_overflow_status)
    overflow = update_cell(scale_sense, overflow)       (process_loss_scale; may change the scale)
    if not overflow: optimizer(grads)                   (an overflowed step is skipped)
    return loss, overflow, scale_sense

`scale_sense` is a Cell (`DynamicLossScaleUpdateCell` / `FixedLossScaleUpdateCell`, whose
`get_loss_scale()` gives the initial value) or a Tensor of shape () or (1,) for a fixed scale you
change yourself with `set_sense_scale`. The scale lives in the Parameter `scale_sense` of the
training cell (so it is checkpointed); the third output is that Parameter, i.e. it shows the
scale *after* this step's update.

The update cells mutate their state in place, so they compute with NumPy on the host (in graph
mode they run as host calls, like optimizers: `jit_host_call = True`).

On MindSpore 2.10's CPU backend the default overflow check fails ("Unsupported op
[NPUGetFloatStatusV2] on CPU"); minispore checks the values themselves everywhere, with
`all_finite` below (public as `mindspore.amp.all_finite`; defined here because nn sits below amp
in the layering, ARCHITECTURE.md §2, and minispore.amp re-exports it).
"""
from __future__ import annotations

import numbers

import numpy as np

from ..common.errors import OpTypeError, OpValueError
from ..common.tensor import Parameter, Tensor
from .cell import Cell
from .wrap import TrainOneStepCell


def all_finite(inputs):
    """True (a bool Tensor of shape ()) when every element of every Tensor in `inputs` is finite."""
    from ..ops import functional as F
    if not isinstance(inputs, (Tensor, tuple, list)):
        raise OpTypeError("all_finite", "a Tensor or a tuple/list of Tensors", type(inputs).__name__)
    tensors = [inputs] if isinstance(inputs, Tensor) else list(inputs)
    for t in tensors:
        if not isinstance(t, Tensor):
            raise OpTypeError("all_finite", "a Tensor or a tuple/list of Tensors", type(t).__name__)
    ok = None
    for t in tensors:
        fin = F.isfinite(t).all()
        ok = fin if ok is None else F.logical_and(ok, fin)
    return ok if ok is not None else Tensor(np.array(True))


def _flag(x) -> bool:
    return bool(np.asarray(x._data if isinstance(x, Tensor) else x).reshape(-1)[0])


class DynamicLossScaleUpdateCell(Cell):
    """`DynamicLossScaleUpdateCell(loss_scale_value, scale_factor, scale_window)`.

    `cell(loss_scale, overflow)` updates the Parameter `loss_scale` in place and returns `overflow`:
    on overflow the scale is divided by scale_factor (not below 1); when `scale_window` steps have
    passed since the last overflow (or the last increase) without one, it is multiplied by
    scale_factor. State: `current_iterator_step` (starts at 1) and `last_overflow_iterator_step`.
    """

    jit_host_call = True

    def __init__(self, loss_scale_value, scale_factor, scale_window):
        super().__init__()
        for name, v in (("loss_scale_value", loss_scale_value), ("scale_factor", scale_factor)):
            if not isinstance(v, numbers.Real) or isinstance(v, bool) or v <= 0:
                raise OpValueError("DynamicLossScaleUpdateCell", f"{name} as a positive number", repr(v))
        if not isinstance(scale_window, numbers.Integral) or isinstance(scale_window, bool) or scale_window <= 0:
            raise OpValueError("DynamicLossScaleUpdateCell", "scale_window as a positive int", repr(scale_window))
        self.loss_scale_value = loss_scale_value
        self.scale_factor = float(scale_factor)
        self.scale_window = int(scale_window)
        self.cur_iter = Parameter(Tensor(np.array(1, np.int32)), name="current_iterator_step", requires_grad=False)
        self.last_overflow_iter = Parameter(Tensor(np.array(0, np.int32)), name="last_overflow_iterator_step",
                                            requires_grad=False)

    def get_loss_scale(self):
        return self.loss_scale_value

    def construct(self, loss_scale, overflow):
        if not isinstance(loss_scale, Parameter):
            raise OpTypeError("DynamicLossScaleUpdateCell", "loss_scale as the Parameter to update",
                              type(loss_scale).__name__)
        over = _flag(overflow)
        scale = np.float32(loss_scale._data.reshape(-1)[0])
        factor = np.float32(self.scale_factor)
        cur, last = int(self.cur_iter._data), int(self.last_overflow_iter._data)
        if over:
            scale = max(np.float32(scale / factor), np.float32(1.0))
        should_inc = self.scale_window <= cur - last
        if over or should_inc:
            last = cur
        if should_inc and not over:
            scale = np.float32(scale * factor)
        loss_scale.set_data(Tensor(np.full(loss_scale.shape, scale, np.float32)))
        self.last_overflow_iter.set_data(Tensor(np.array(last, np.int32)))
        self.cur_iter.set_data(Tensor(np.array(cur + 1, np.int32)))
        return overflow


class FixedLossScaleUpdateCell(Cell):
    """`FixedLossScaleUpdateCell(loss_scale_value)`: the scale never changes; `cell(scale, overflow)`
    returns `overflow`, so the training cell still skips overflowed steps."""

    jit_host_call = True

    def __init__(self, loss_scale_value):
        super().__init__()
        if not isinstance(loss_scale_value, numbers.Real) or isinstance(loss_scale_value, bool):
            raise OpTypeError("FixedLossScaleUpdateCell", "loss_scale_value as a number",
                              type(loss_scale_value).__name__)
        self.loss_scale_value = loss_scale_value

    def get_loss_scale(self):
        return self.loss_scale_value

    def construct(self, _, overflow):
        return overflow


class TrainOneStepWithLossScaleCell(TrainOneStepCell):
    """`TrainOneStepWithLossScaleCell(network, optimizer, scale_sense)`; returns
    `(loss, overflow, scaling_sens)`. See the module docstring."""

    def __init__(self, network, optimizer, scale_sense):
        super().__init__(network, optimizer, sens=None)
        self.loss_scaling_manager = None
        if isinstance(scale_sense, Cell):
            if not hasattr(scale_sense, "get_loss_scale"):
                raise OpTypeError("TrainOneStepWithLossScaleCell", "an update cell with get_loss_scale()",
                                  type(scale_sense).__name__)
            self.loss_scaling_manager = scale_sense
            self.scale_sense = Parameter(Tensor(np.array(scale_sense.get_loss_scale(), np.float32)),
                                         name="scale_sense", requires_grad=False)
        elif isinstance(scale_sense, Tensor):
            if tuple(scale_sense.shape) not in ((), (1,)):
                raise OpValueError("TrainOneStepWithLossScaleCell", "scale_sense of shape () or (1,)",
                                   f"shape {tuple(scale_sense.shape)}")
            self.scale_sense = Parameter(scale_sense, name="scale_sense", requires_grad=False)
        else:
            raise OpTypeError("TrainOneStepWithLossScaleCell", "scale_sense as a Cell or a Tensor",
                              type(scale_sense).__name__)
        from ..autograd import GradOperation
        self.grad = GradOperation(get_by_list=True, sens_param=True)

    def construct(self, *inputs):
        from ..ops import functional as F
        loss = self.network(*inputs)
        scaling_sens = self.scale_sense
        status = Tensor(np.zeros((8,), np.int32))        # (a float-status buffer on Ascend; unused here)
        sens = F.ones_like(loss) * F.cast(scaling_sens.reshape(()), loss.dtype)
        grads = self.grad(self.network, self.weights)(*inputs, sens)
        inv = F.reciprocal(scaling_sens.reshape(()))
        grads = tuple(g * F.cast(inv, g.dtype) for g in grads)
        grads = self.grad_reducer(grads)
        cond = self.get_overflow_status(status, grads)
        overflow = self.process_loss_scale(cond)
        if not _flag(overflow):
            self.optimizer(grads)
        return loss, cond, scaling_sens

    def set_sense_scale(self, sens):
        """Set the loss scale (a Tensor)."""
        if not isinstance(sens, Tensor):
            raise OpTypeError("TrainOneStepWithLossScaleCell", "sens as a Tensor", type(sens).__name__)
        self.scale_sense.set_data(sens)

    def start_overflow_check(self, pre_cond, compute_input):
        """Prepare an overflow check before `compute_input` is computed. Devices with a float-status
        register clear it here; minispore checks the values themselves, so it returns both as they are."""
        return pre_cond, compute_input

    def get_overflow_status(self, status, compute_output):
        """A bool Tensor: True when some element of `compute_output` (the gradients) is inf or nan.
        `status` (a device's float-status register in MindSpore) is unused: the values are checked."""
        from ..ops import functional as F
        return F.logical_not(all_finite(compute_output))

    def process_loss_scale(self, overflow):
        """Run the update cell (which may change `scale_sense`); returns whether to skip the step."""
        if self.loss_scaling_manager is not None:
            return self.loss_scaling_manager(self.scale_sense, overflow)
        return overflow
