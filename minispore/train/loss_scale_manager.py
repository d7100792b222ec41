"""Loss-scale managers (`mindspore.train.FixedLossScaleManager` / `DynamicLossScaleManager`), the
objects `Model(..., loss_scale_manager=...)` and `amp.build_train_network` take.

A manager holds the *policy*; `get_update_cell()` turns it into the Cell the training step runs
(`nn.DynamicLossScaleUpdateCell` / `nn.FixedLossScaleUpdateCell`, or None when there is nothing to
update and overflowed steps are not dropped). `update_loss_scale(overflow)` applies the same
policy on the host, for a hand-written loop.

* `FixedLossScaleManager(loss_scale=128.0, drop_overflow_update=True)`: a constant scale. With
  drop_overflow_update=True, the step checks gradients for inf/nan and skips the update on
  overflow (via a FixedLossScaleUpdateCell); with False there is no check (`get_update_cell()` is
  None) and the scale is handed to the TrainOneStepCell as `sens` — the optimizer must then be
  built with the same `loss_scale` to divide it out again.
* `DynamicLossScaleManager(init_loss_scale=2**24, scale_factor=2, scale_window=2000)`: on an
  overflow the scale is divided by scale_factor (not below 1) and the step is skipped; after
  every scale_window steps without overflow it is multiplied by scale_factor.
"""
from __future__ import annotations

import numbers

from ..common.errors import MinisporeRuntimeError, OpTypeError, OpValueError

__all__ = ["LossScaleManager", "FixedLossScaleManager", "DynamicLossScaleManager"]


class LossScaleManager:
    """Base class: `get_loss_scale()`, `update_loss_scale(overflow)`, `get_update_cell()`."""

    def get_loss_scale(self):
        """The current loss scale."""

    def update_loss_scale(self, overflow):
        """Adjust the scale after a step (`overflow`: whether its gradients had inf/nan)."""

    def get_update_cell(self):
        """The Cell a TrainOneStepWithLossScaleCell runs to update the scale, or None."""


def _real(who, name, v):
    if not isinstance(v, numbers.Real) or isinstance(v, bool):
        raise OpTypeError(who, f"{name} as a number", type(v).__name__)
    return v


class FixedLossScaleManager(LossScaleManager):
    """`FixedLossScaleManager(loss_scale=128.0, drop_overflow_update=True)`."""

    def __init__(self, loss_scale=128.0, drop_overflow_update=True):
        if _real("FixedLossScaleManager", "loss_scale", loss_scale) < 1:
            raise OpValueError("FixedLossScaleManager", "loss_scale >= 1", repr(loss_scale))
        self._loss_scale = loss_scale
        self._drop_overflow_update = drop_overflow_update

    def get_loss_scale(self):
        return self._loss_scale

    def get_drop_overflow_update(self):
        """Whether a step whose gradients overflow is skipped."""
        return self._drop_overflow_update

    def update_loss_scale(self, overflow):
        """A fixed scale never changes."""

    def get_update_cell(self):
        if not self._drop_overflow_update:
            return None
        from ..nn import FixedLossScaleUpdateCell
        return FixedLossScaleUpdateCell(self._loss_scale)


class DynamicLossScaleManager(LossScaleManager):
    """`DynamicLossScaleManager(init_loss_scale=2**24, scale_factor=2, scale_window=2000)`."""

    def __init__(self, init_loss_scale=2 ** 24, scale_factor=2, scale_window=2000):
        who = "DynamicLossScaleManager"
        if _real(who, "init_loss_scale", init_loss_scale) < 1.0:
            raise OpValueError(who, "init_loss_scale >= 1", repr(init_loss_scale))
        if not isinstance(scale_window, numbers.Integral) or isinstance(scale_window, bool) or scale_window <= 0:
            raise OpValueError(who, "scale_window as a positive int", repr(scale_window))
        if _real(who, "scale_factor", scale_factor) <= 0:
            raise OpValueError(who, "scale_factor > 0", repr(scale_factor))
        self.loss_scale = init_loss_scale
        self.scale_window = scale_window
        self.scale_factor = scale_factor
        self.increase_ratio = scale_factor
        self.decrease_ratio = 1 / scale_factor
        self.cur_iter = 1
        self.last_overflow_iter = 0
        self.bad_step_max = 1000
        self.bad_step = 0

    def get_loss_scale(self):
        return self.loss_scale

    def update_loss_scale(self, overflow):
        """MindSpore's host-side rule: halve (by decrease_ratio, not below 1) on overflow; multiply
        by increase_ratio whenever the steps since the last overflow are a multiple of
        scale_window. More than bad_step_max overflows in a row is an error."""
        if overflow:
            self.loss_scale = max(self.loss_scale * self.decrease_ratio, 1)
            self.last_overflow_iter = self.cur_iter
            self.bad_step += 1
        else:
            if (self.cur_iter - self.last_overflow_iter) % self.scale_window == 0:
                self.loss_scale *= self.increase_ratio
            self.bad_step = 0
        if self.bad_step > self.bad_step_max:
            raise MinisporeRuntimeError(f"Dynamic loss scale: {self.bad_step} overflows in a row, more than "
                                        f"bad_step_max={self.bad_step_max}")
        self.cur_iter += 1

    def get_drop_overflow_update(self):
        """Always True: an overflowed step is skipped."""
        return True

    def get_update_cell(self):
        from ..nn import DynamicLossScaleUpdateCell
        return DynamicLossScaleUpdateCell(self.loss_scale, self.scale_factor, self.scale_window)
