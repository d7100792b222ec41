"""The standard layers, one concept per module."""
from .activation import (ELU, GELU, LeakyReLU, LogSoftmax, ReLU, ReLU6, SiLU, Sigmoid, Softmax, Softplus, Tanh,
                         get_activation)
from .basic import Flatten, Identity
from .conv import Conv2d
from .dense import Dense
from .dropout import Dropout
from .embedding import Embedding
from .normalization import LayerNorm, RMSNorm
from .pooling import AvgPool2d, MaxPool2d

__all__ = ["ELU", "GELU", "LeakyReLU", "LogSoftmax", "ReLU", "ReLU6", "SiLU", "Sigmoid", "Softmax", "Softplus",
           "Tanh", "get_activation", "Flatten", "Identity", "Conv2d", "Dense", "Dropout", "Embedding", "LayerNorm",
           "RMSNorm", "AvgPool2d", "MaxPool2d"]
