"""Optimizers, learning-rate schedules and per-step learning-rate lists."""
from .adam import Adam, AdamWeightDecay
from .dynamic_lr import (cosine_decay_lr, exponential_decay_lr, piecewise_constant_lr, polynomial_decay_lr,
                         warmup_lr)
from .lr_schedule import (CosineDecayLR, ExponentialDecayLR, PolynomialDecayLR, WarmUpLR, WarmupCosineDecayLR)
from .optimizer import LearningRateSchedule, Optimizer
from .sgd import SGD, Momentum

__all__ = ["Adam", "AdamWeightDecay", "SGD", "Momentum", "Optimizer", "LearningRateSchedule", "CosineDecayLR",
           "ExponentialDecayLR", "PolynomialDecayLR", "WarmUpLR", "WarmupCosineDecayLR", "cosine_decay_lr",
           "exponential_decay_lr", "piecewise_constant_lr", "polynomial_decay_lr", "warmup_lr"]
