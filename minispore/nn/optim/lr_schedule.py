"""Learning-rate schedules (MindSpore's `nn.learning_rate_schedule`): Cells mapping the global
step to a learning rate. Pass one as `learning_rate=` to any optimizer; it is evaluated at the
optimizer's `global_step` before each update.

    WarmUpLR(learning_rate, warmup_steps)           lr * min(step, warmup_steps) / warmup_steps
    CosineDecayLR(min_lr, max_lr, decay_steps)      min_lr + (max_lr - min_lr)(1 + cos(pi p)) / 2,
                                                    p = min(step, decay_steps) / decay_steps
    PolynomialDecayLR(learning_rate, end_learning_rate, decay_steps, power, update_decay_steps=False)
                                                    (lr - end)(1 - p)^power + end
    ExponentialDecayLR(learning_rate, decay_rate, decay_steps, is_stair=False)
                                                    lr * decay_rate^(step / decay_steps)
    WarmupCosineDecayLR(max_lr, min_lr, warmup_steps, decay_steps)
                                                    nanoGPT's schedule (not in MindSpore), below
"""
from __future__ import annotations

import math

import numpy as np

from ...common.errors import OpValueError
from .. import _checks
from .optimizer import LearningRateSchedule


class WarmUpLR(LearningRateSchedule):
    """Linear warm-up from 0 to `learning_rate` over `warmup_steps`, then constant."""

    def __init__(self, learning_rate, warmup_steps):
        super().__init__()
        self.learning_rate = _checks.real("WarmUpLR", "learning_rate", learning_rate, lo=0.0)
        self.warmup_steps = _checks.positive_int("WarmUpLR", "warmup_steps", warmup_steps)

    def _lr(self, step):
        return self.learning_rate * np.minimum(step, self.warmup_steps) / self.warmup_steps


class CosineDecayLR(LearningRateSchedule):
    """Half a cosine from `max_lr` (step 0) to `min_lr` (step `decay_steps`), then `min_lr`."""

    def __init__(self, min_lr, max_lr, decay_steps):
        super().__init__()
        self.min_lr = _checks.real("CosineDecayLR", "min_lr", min_lr, lo=0.0)
        self.max_lr = _checks.real("CosineDecayLR", "max_lr", max_lr, lo=0.0)
        if self.min_lr >= self.max_lr:
            raise OpValueError("CosineDecayLR", "min_lr < max_lr", f"min_lr={min_lr}, max_lr={max_lr}")
        self.decay_steps = _checks.positive_int("CosineDecayLR", "decay_steps", decay_steps)

    def _lr(self, step):
        p = np.minimum(step, self.decay_steps) / self.decay_steps
        return self.min_lr + 0.5 * (self.max_lr - self.min_lr) * (1.0 + np.cos(math.pi * p))


class PolynomialDecayLR(LearningRateSchedule):
    """(lr - end) * (1 - p)^power + end, p = min(step, decay_steps) / decay_steps. With
    `update_decay_steps=True` the period restarts: decay_steps * ceil(step / decay_steps)."""

    def __init__(self, learning_rate, end_learning_rate, decay_steps, power, update_decay_steps=False):
        super().__init__()
        self.learning_rate = _checks.real("PolynomialDecayLR", "learning_rate", learning_rate, lo=0.0)
        self.end_learning_rate = _checks.real("PolynomialDecayLR", "end_learning_rate", end_learning_rate, lo=0.0)
        self.decay_steps = _checks.positive_int("PolynomialDecayLR", "decay_steps", decay_steps)
        self.power = _checks.real("PolynomialDecayLR", "power", power, lo=0.0, lo_open=True)
        self.update_decay_steps = _checks.boolean("PolynomialDecayLR", "update_decay_steps", update_decay_steps)

    def _lr(self, step):
        if self.update_decay_steps:
            period = self.decay_steps * np.maximum(np.ceil(step / self.decay_steps), 1.0)
            p = step / period
        else:
            p = np.minimum(step, self.decay_steps) / self.decay_steps
        return (self.learning_rate - self.end_learning_rate) * (1.0 - p) ** self.power + self.end_learning_rate


class ExponentialDecayLR(LearningRateSchedule):
    """lr * decay_rate^(step / decay_steps) (the exponent floored when `is_stair`)."""

    def __init__(self, learning_rate, decay_rate, decay_steps, is_stair=False):
        super().__init__()
        self.learning_rate = _checks.real("ExponentialDecayLR", "learning_rate", learning_rate, lo=0.0)
        self.decay_rate = _checks.real("ExponentialDecayLR", "decay_rate", decay_rate, lo=0.0, lo_open=True)
        self.decay_steps = _checks.positive_int("ExponentialDecayLR", "decay_steps", decay_steps)
        self.is_stair = _checks.boolean("ExponentialDecayLR", "is_stair", is_stair)

    def _lr(self, step):
        e = step / self.decay_steps
        if self.is_stair:
            e = np.floor(e)
        return self.learning_rate * self.decay_rate ** e


class WarmupCosineDecayLR(LearningRateSchedule):
    """nanoGPT's `get_lr(it)`: linear warm-up, cosine decay to `min_lr`, then `min_lr`.

        step <  warmup_steps:           max_lr * (step + 1) / (warmup_steps + 1)
        step >  decay_steps:            min_lr
        otherwise, r = (step - warmup_steps) / (decay_steps - warmup_steps):
                                        min_lr + (max_lr - min_lr) * (1 + cos(pi r)) / 2

    `decay_steps` is the step at which `min_lr` is reached (nanoGPT's `lr_decay_iters`).
    """

    def __init__(self, max_lr, min_lr, warmup_steps, decay_steps):
        super().__init__()
        self.max_lr = _checks.real("WarmupCosineDecayLR", "max_lr", max_lr, lo=0.0)
        self.min_lr = _checks.real("WarmupCosineDecayLR", "min_lr", min_lr, lo=0.0)
        self.warmup_steps = _checks.non_negative_int("WarmupCosineDecayLR", "warmup_steps", warmup_steps)
        self.decay_steps = _checks.positive_int("WarmupCosineDecayLR", "decay_steps", decay_steps)
        if self.decay_steps <= self.warmup_steps:
            raise OpValueError("WarmupCosineDecayLR", "decay_steps > warmup_steps",
                               f"warmup_steps={warmup_steps}, decay_steps={decay_steps}")

    def _lr(self, step):
        step = np.asarray(step, dtype=np.float64)
        warm = self.max_lr * (step + 1.0) / (self.warmup_steps + 1.0)
        r = np.clip((step - self.warmup_steps) / (self.decay_steps - self.warmup_steps), 0.0, 1.0)
        cos = self.min_lr + 0.5 * (1.0 + np.cos(math.pi * r)) * (self.max_lr - self.min_lr)
        out = np.where(step < self.warmup_steps, warm, np.where(step > self.decay_steps, self.min_lr, cos))
        return out if out.ndim else out[()]

    def extend_repr(self):
        return (f"max_lr={self.max_lr}, min_lr={self.min_lr}, warmup_steps={self.warmup_steps}, "
                f"decay_steps={self.decay_steps}")


def _decay_inputs(cell, learning_rate, decay_rate, decay_steps, is_stair):
    """MindSpore's `_check_inputs`: positive float rates, a positive int step count, a bool."""
    return (_checks.real(cell, "learning_rate", learning_rate, lo=0.0, lo_open=True),
            _checks.real(cell, "decay_rate", decay_rate, lo=0.0, lo_open=True),
            _checks.positive_int(cell, "decay_steps", decay_steps),
            _checks.boolean(cell, "is_stair", is_stair))


class InverseDecayLR(LearningRateSchedule):
    """lr / (1 + decay_rate * step / decay_steps) (the ratio step / decay_steps floored when `is_stair`)."""

    def __init__(self, learning_rate, decay_rate, decay_steps, is_stair=False):
        super().__init__()
        self.learning_rate, self.decay_rate, self.decay_steps, self.is_stair = _decay_inputs(
            "InverseDecayLR", learning_rate, decay_rate, decay_steps, is_stair)

    def _lr(self, step):
        p = step / self.decay_steps
        if self.is_stair:
            p = np.floor(p)
        return self.learning_rate / (1 + self.decay_rate * p)


class NaturalExpDecayLR(LearningRateSchedule):
    """lr * exp(-decay_rate * step). Note, as in MindSpore 2.10: without `is_stair` the step is NOT
    divided by decay_steps; with it, the step is rounded down to a multiple of decay_steps."""

    def __init__(self, learning_rate, decay_rate, decay_steps, is_stair=False):
        super().__init__()
        self.learning_rate, self.decay_rate, self.decay_steps, self.is_stair = _decay_inputs(
            "NaturalExpDecayLR", learning_rate, decay_rate, decay_steps, is_stair)

    def _lr(self, step):
        p = np.floor(step / self.decay_steps) * self.decay_steps if self.is_stair else step
        return self.learning_rate * np.exp(-self.decay_rate * p)
