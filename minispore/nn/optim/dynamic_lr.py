"""Precomputed learning-rate lists (MindSpore's `nn.dynamic_lr`): each returns a Python list with
one learning rate per step, to pass as `learning_rate=` to an optimizer.

The epoch-based helpers compute `current_epoch = floor(step / step_per_epoch)` and evaluate the
schedule at that epoch, so the rate changes once per epoch.
"""
from __future__ import annotations

import math

from ...common.errors import OpValueError
from .. import _checks


def _common(who, total_step, step_per_epoch, epoch_name, epoch):
    _checks.positive_int(who, "total_step", total_step)
    _checks.positive_int(who, "step_per_epoch", step_per_epoch)
    _checks.positive_int(who, epoch_name, epoch)


def piecewise_constant_lr(milestone, learning_rates):
    """`learning_rates[i]` for the steps before `milestone[i]` (strictly increasing step counts)."""
    if not isinstance(milestone, (list, tuple)) or not isinstance(learning_rates, (list, tuple)):
        raise OpValueError("piecewise_constant_lr", "milestone and learning_rates as lists",
                           f"{type(milestone).__name__} and {type(learning_rates).__name__}")
    if len(milestone) != len(learning_rates):
        raise OpValueError("piecewise_constant_lr", "milestone and learning_rates of the same length",
                           f"{len(milestone)} and {len(learning_rates)}")
    last = 0
    out = []
    for m, lr in zip(milestone, learning_rates):
        m = _checks.positive_int("piecewise_constant_lr", "milestone", m)
        if m <= last:
            raise OpValueError("piecewise_constant_lr", "strictly increasing milestones", repr(list(milestone)))
        _checks.real("piecewise_constant_lr", "learning_rates", lr, lo=0.0)
        out += [float(lr)] * (m - last)
        last = m
    return out


def exponential_decay_lr(learning_rate, decay_rate, total_step, step_per_epoch, decay_epoch, is_stair=False):
    """lr * decay_rate^(epoch / decay_epoch) (exponent floored if `is_stair`)."""
    _common("exponential_decay_lr", total_step, step_per_epoch, "decay_epoch", decay_epoch)
    lr0 = _checks.real("exponential_decay_lr", "learning_rate", learning_rate, lo=0.0)
    rate = _checks.real("exponential_decay_lr", "decay_rate", decay_rate, lo=0.0, lo_open=True)
    out = []
    for i in range(total_step):
        e = math.floor(i / step_per_epoch) / decay_epoch
        out.append(lr0 * rate ** (math.floor(e) if is_stair else e))
    return out


def cosine_decay_lr(min_lr, max_lr, total_step, step_per_epoch, decay_epoch):
    """min_lr + (max_lr - min_lr)(1 + cos(pi * epoch / decay_epoch)) / 2, epoch capped at decay_epoch."""
    _common("cosine_decay_lr", total_step, step_per_epoch, "decay_epoch", decay_epoch)
    lo = _checks.real("cosine_decay_lr", "min_lr", min_lr, lo=0.0)
    hi = _checks.real("cosine_decay_lr", "max_lr", max_lr, lo=0.0)
    if lo >= hi:
        raise OpValueError("cosine_decay_lr", "min_lr < max_lr", f"min_lr={min_lr}, max_lr={max_lr}")
    out = []
    for i in range(total_step):
        epoch = min(math.floor(i / step_per_epoch), decay_epoch)
        out.append(lo + 0.5 * (hi - lo) * (1.0 + math.cos(math.pi * epoch / decay_epoch)))
    return out


def polynomial_decay_lr(learning_rate, end_learning_rate, total_step, step_per_epoch, decay_epoch, power,
                        update_decay_epoch=False):
    """(lr - end)(1 - epoch / decay_epoch)^power + end; with `update_decay_epoch` the period is
    stretched to the next multiple of decay_epoch past the current epoch instead of capping."""
    _common("polynomial_decay_lr", total_step, step_per_epoch, "decay_epoch", decay_epoch)
    lr0 = _checks.real("polynomial_decay_lr", "learning_rate", learning_rate, lo=0.0)
    end = _checks.real("polynomial_decay_lr", "end_learning_rate", end_learning_rate, lo=0.0)
    power = _checks.real("polynomial_decay_lr", "power", power, lo=0.0, lo_open=True)
    out = []
    period = decay_epoch
    for i in range(total_step):
        epoch = math.floor(i / step_per_epoch)
        if update_decay_epoch:
            # MindSpore carries the stretched period forward from step to step
            period = period * max(math.ceil(epoch / period), 1)
        else:
            epoch = min(epoch, decay_epoch)
        out.append((lr0 - end) * (1.0 - epoch / period) ** power + end)
    return out


def warmup_lr(learning_rate, total_step, step_per_epoch, warmup_epoch):
    """lr * min(epoch, warmup_epoch) / warmup_epoch: a linear warm-up by epochs (0 in epoch 0)."""
    _common("warmup_lr", total_step, step_per_epoch, "warmup_epoch", warmup_epoch)
    lr0 = _checks.real("warmup_lr", "learning_rate", learning_rate, lo=0.0)
    return [lr0 * min(math.floor(i / step_per_epoch), warmup_epoch) / warmup_epoch for i in range(total_step)]


def inverse_decay_lr(learning_rate, decay_rate, total_step, step_per_epoch, decay_epoch, is_stair=False):
    """lr / (1 + decay_rate * epoch / decay_epoch), the ratio floored if `is_stair`."""
    _common("inverse_decay_lr", total_step, step_per_epoch, "decay_epoch", decay_epoch)
    lr0 = _checks.real("inverse_decay_lr", "learning_rate", learning_rate, lo=0.0, lo_open=True)
    rate = _checks.real("inverse_decay_lr", "decay_rate", decay_rate, lo=0.0, lo_open=True)
    _checks.boolean("inverse_decay_lr", "is_stair", is_stair)
    out = []
    for i in range(total_step):
        epoch = math.floor(i / step_per_epoch)
        out.append(lr0 / (1 + rate * (math.floor(epoch / decay_epoch) if is_stair else epoch / decay_epoch)))
    return out


def natural_exp_decay_lr(learning_rate, decay_rate, total_step, step_per_epoch, decay_epoch, is_stair=False):
    """lr * e^(-decay_rate * epoch), the epoch rounded down to a multiple of decay_epoch if `is_stair`
    (without it, decay_epoch plays no part — as in MindSpore)."""
    _common("natural_exp_decay_lr", total_step, step_per_epoch, "decay_epoch", decay_epoch)
    lr0 = _checks.real("natural_exp_decay_lr", "learning_rate", learning_rate, lo=0.0, lo_open=True)
    rate = _checks.real("natural_exp_decay_lr", "decay_rate", decay_rate, lo=0.0, lo_open=True)
    _checks.boolean("natural_exp_decay_lr", "is_stair", is_stair)
    out = []
    for i in range(total_step):
        epoch = math.floor(i / step_per_epoch)
        if is_stair:
            epoch = math.floor(epoch / decay_epoch) * decay_epoch
        out.append(lr0 * math.e ** (-rate * epoch))
    return out
