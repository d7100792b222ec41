"""`mindspore.common.parameter`: where model-zoo scripts import `Parameter` and `ParameterTuple`
from (`from mindspore.common.parameter import Parameter`). Both are defined in common/tensor.py
next to Tensor; this module only names them under MindSpore's path."""
from .tensor import Parameter, ParameterTuple

__all__ = ["Parameter", "ParameterTuple"]
