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
from .adadelta import Adadelta
from .adamax import AdaMax
from .asgd import ASGD
from .ftrl import FTRL
from .proximal_adagrad import ProximalAdagrad
from .rprop import Rprop

__all__ = ["Adagrad", "Adam", "AdamWeightDecay", "Lamb", "RMSProp", "SGD", "Momentum", "Optimizer", "LearningRateSchedule", "CosineDecayLR",
           "ExponentialDecayLR", "PolynomialDecayLR", "WarmUpLR", "WarmupCosineDecayLR", "cosine_decay_lr",
           "exponential_decay_lr", "piecewise_constant_lr", "polynomial_decay_lr", "warmup_lr"]
__all__ += ["AdaMax", "Adadelta", "ASGD", "FTRL", "ProximalAdagrad", "Rprop"]
from .dynamic_lr import inverse_decay_lr, natural_exp_decay_lr
from .lr_schedule import InverseDecayLR, NaturalExpDecayLR
__all__ += ["InverseDecayLR", "NaturalExpDecayLR", "inverse_decay_lr", "natural_exp_decay_lr"]
