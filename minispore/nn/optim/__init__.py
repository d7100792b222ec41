"""Optimizers, learning-rate schedules and per-step learning-rate lists."""
from .adagrad import Adagrad
from .adam import Adam, AdamWeightDecay
from .dynamic_lr import (cosine_decay_lr, exponential_decay_lr, piecewise_constant_lr, polynomial_decay_lr,
                         warmup_lr)
from .lr_schedule import (CosineDecayLR, ExponentialDecayLR, PolynomialDecayLR, WarmUpLR, WarmupCosineDecayLR)
from .lamb import Lamb
from .optimizer import LearningRateSchedule, Optimizer
from .rmsprop import RMSProp
from .sgd import SGD, Momentum

__all__ = ["Adagrad", "Adam", "AdamWeightDecay", "Lamb", "RMSProp", "SGD", "Momentum", "Optimizer", "LearningRateSchedule", "CosineDecayLR",
           "ExponentialDecayLR", "PolynomialDecayLR", "WarmUpLR", "WarmupCosineDecayLR", "cosine_decay_lr",
           "exponential_decay_lr", "piecewise_constant_lr", "polynomial_decay_lr", "warmup_lr"]
