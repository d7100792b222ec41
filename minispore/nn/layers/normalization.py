"""Normalization layers: `nn.LayerNorm` (MindSpore signature, params `gamma`/`beta`) and
`nn.RMSNorm` (param `weight`, as in the LLaMA-family models).

LayerNorm normalizes over the axes from `begin_norm_axis` to the end:
    y = (x - mean) / sqrt(var + epsilon) * gamma + beta      (biased variance, as everywhere)
`gamma`/`beta` have shape `normalized_shape` and line up with the axes from `begin_params_axis`.
RMSNorm skips the centering:  y = x / sqrt(mean(x^2) + eps) * weight.
"""
from __future__ import annotations

import numbers

from ...common import dtype as mstype
from ...common.errors import OpTypeError, OpValueError
from ...common.initializer import initializer
from ...common.tensor import Parameter
from ...ops import functional as F
from .. import _checks
from ..cell import Cell


class LayerNorm(Cell):
    """`LayerNorm(normalized_shape, begin_norm_axis=-1, begin_params_axis=-1, gamma_init='ones',
    beta_init='zeros', epsilon=1e-7, dtype=mstype.float32)`; `normalized_shape` is a tuple/list."""

    def __init__(self, normalized_shape, begin_norm_axis=-1, begin_params_axis=-1, gamma_init="ones",
                 beta_init="zeros", epsilon=1e-7, dtype=mstype.float32):
        super().__init__()
        if not isinstance(normalized_shape, (tuple, list)):
            raise OpTypeError("LayerNorm", "normalized_shape as a tuple or list (e.g. (768,))",
                              f"{type(normalized_shape).__name__} {normalized_shape!r}")
        if not normalized_shape:
            raise OpValueError("LayerNorm", "a non-empty normalized_shape", repr(normalized_shape))
        self.normalized_shape = tuple(_checks.positive_int("LayerNorm", "normalized_shape", s)
                                      for s in normalized_shape)
        for name, v in (("begin_norm_axis", begin_norm_axis), ("begin_params_axis", begin_params_axis)):
            if not isinstance(v, numbers.Integral) or isinstance(v, bool):
                raise OpTypeError("LayerNorm", f"'{name}' to be an int", repr(v))
        self.begin_norm_axis = int(begin_norm_axis)
        self.begin_params_axis = int(begin_params_axis)
        self.epsilon = _checks.real("LayerNorm", "epsilon", epsilon, lo=0.0)
        self.gamma = Parameter(initializer(gamma_init, self.normalized_shape, dtype), name="gamma")
        self.beta = Parameter(initializer(beta_init, self.normalized_shape, dtype), name="beta")

    def _axes(self, ndim):
        norm = self.begin_norm_axis + ndim if self.begin_norm_axis < 0 else self.begin_norm_axis
        par = self.begin_params_axis + ndim if self.begin_params_axis < 0 else self.begin_params_axis
        if not (0 <= norm < ndim and 0 <= par < ndim):
            raise OpValueError("LayerNorm", f"begin_norm_axis and begin_params_axis in [{-ndim}, {ndim}) for a "
                               f"{ndim}-d input", f"{self.begin_norm_axis} and {self.begin_params_axis}")
        return norm, par

    def construct(self, x):
        _checks.tensor_input("LayerNorm", x)
        norm, par = self._axes(x.ndim)
        if tuple(x.shape[par:]) != self.normalized_shape:
            raise OpValueError("LayerNorm", f"input dims from begin_params_axis equal to normalized_shape "
                               f"{self.normalized_shape}", f"shape {tuple(x.shape)}")
        if norm == par:
            # the common case: one fused op over the trailing `normalized_shape` dims
            return F.layer_norm(x, self.normalized_shape, self.gamma, self.beta, self.epsilon)
        # normalization and affine axes differ: compose from basic ops
        axes = tuple(range(norm, x.ndim))
        mean = F.mean(x, axes, True)
        centered = x - mean
        var = F.mean(centered * centered, axes, True)
        return centered * F.rsqrt(var + self.epsilon) * self.gamma + self.beta

    def extend_repr(self):
        return (f"normalized_shape={self.normalized_shape}, begin_norm_axis={self.begin_norm_axis}, "
                f"begin_params_axis={self.begin_params_axis}, gamma={self.gamma}, beta={self.beta}")


class RMSNorm(Cell):
    """`RMSNorm(hidden_size, eps=1e-6, dtype=mstype.float32)`: y = x / rms(x) * weight over the last axis."""

    def __init__(self, hidden_size, eps=1e-6, dtype=mstype.float32):
        super().__init__()
        self.hidden_size = _checks.positive_int("RMSNorm", "hidden_size", hidden_size)
        self.eps = _checks.real("RMSNorm", "eps", eps, lo=0.0)
        self.weight = Parameter(initializer("ones", (self.hidden_size,), dtype), name="weight")

    def construct(self, x):
        _checks.tensor_input("RMSNorm", x)
        if x.ndim < 1 or x.shape[-1] != self.hidden_size:
            raise OpValueError("RMSNorm", f"an input whose last dimension is hidden_size ({self.hidden_size})",
                               f"shape {tuple(x.shape)}")
        return F.rms_norm(x, self.weight, self.eps)[0]

    def extend_repr(self):
        return f"hidden_size={self.hidden_size}, eps={self.eps}"
