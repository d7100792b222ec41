"""Normalization layers: `nn.LayerNorm` (MindSpore signature, params `gamma`/`beta`),
`nn.RMSNorm` (param `weight`, as in the LLaMA-family models), `nn.BatchNorm1d/2d/3d`,
`nn.GroupNorm` and `nn.InstanceNorm2d`.

LayerNorm normalizes over the axes from `begin_norm_axis` to the end:
    y = (x - mean) / sqrt(var + epsilon) * gamma + beta      (biased variance, as everywhere)
`gamma`/`beta` have shape `normalized_shape` and line up with the axes from `begin_params_axis`.
RMSNorm skips the centering:  y = x / sqrt(mean(x^2) + eps) * weight.
"""
from __future__ import annotations

import numbers

import numpy as np

from ...common import dtype as mstype
from ...common.errors import OpTypeError, OpValueError
from ...common.initializer import initializer
from ...common.tensor import Parameter
from ...ops import functional as F
from ...ops.primitive import get_primitive
from ...ops.prims import norm_ops as _norm_ops
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


# =================================================================================================
# Batch normalization
class _RunningStatsUpdate(Cell):
    """Applies `running = (1 - factor) * running + factor * batch` to the running tensors.

    Why a Cell: inside a compiled graph (jit, GRAPH_MODE) a traced value cannot be written into a
    Parameter at trace time. A Cell marked `jit_host_call` runs as a host call instead: at graph run
    time, in program order, on the concrete batch statistics (optimizers update weights the same
    way). In PyNative the update simply runs now.
    """

    jit_host_call = True

    def construct(self, running_mean, running_var, batch_mean, batch_var, factor):
        _norm_ops.update_running_stats(running_mean, running_var, batch_mean, batch_var, factor)


_HOST_UPDATE = _RunningStatsUpdate()


def _update_running_stats(running_mean, running_var, batch_mean, batch_var, factor):
    # eager: the update itself, skipping the host-call Cell (_HOST_UPDATE, which graph capture needs
    # and which does the same update): ~3 µs less per training-mode BatchNorm call (measured, 64 channels)
    if type(batch_mean._data) is np.ndarray:
        _norm_ops.update_running_stats(running_mean, running_var, batch_mean, batch_var, factor)
    else:
        _HOST_UPDATE(running_mean, running_var, batch_mean, batch_var, factor)


_norm_ops.set_running_stats_updater(_update_running_stats)
_BATCH_NORM = get_primitive("batch_norm")


def _param(init, n, dtype, name, requires_grad=True):
    return Parameter(initializer(init, n, dtype=dtype), name=name, requires_grad=requires_grad)


class _BatchNorm(Cell):
    """What BatchNorm1d and BatchNorm2d share (MindSpore's `_BatchNorm`).

    Statistics are per channel (dim 1) over the batch and all positions. Which statistics:
    `use_batch_statistics=None` (default): the batch's in training (`set_train()`), the moving
    ones in eval; True: always the batch's (and the moving ones are updated); False: always the
    moving ones (never updated). Updating, MindSpore's momentum convention (momentum = weight of
    the old value; the batch variance is the unbiased one):
        moving_mean     = momentum * moving_mean     + (1 - momentum) * mean_batch
        moving_variance = momentum * moving_variance + (1 - momentum) * var_batch * n / (n - 1)
    Parameters, in this order: moving_mean, moving_variance (requires_grad=False; a standalone
    layer's are named 'mean' and 'variance', as MindSpore names them), gamma, beta (trainable when
    `affine`).
    """

    _ranks = (4,)

    def __init__(self, num_features, eps=1e-5, momentum=0.9, affine=True, gamma_init="ones", beta_init="zeros",
                 moving_mean_init="zeros", moving_var_init="ones", use_batch_statistics=None, data_format="NCHW",
                 dtype=mstype.float32):
        super().__init__()
        name = type(self).__name__
        if not isinstance(num_features, int) or isinstance(num_features, bool):
            raise OpTypeError(name, "'num_features' to be an int", f"{type(num_features).__name__} {num_features!r}")
        if num_features < 1:
            raise OpValueError(name, "'num_features' >= 1", repr(num_features))
        self.momentum = _checks.real(name, "momentum", momentum, lo=0.0, hi=1.0)
        self.eps = _checks.real(name, "eps", eps, lo=0.0)
        affine = _checks.boolean(name, "affine", affine)
        if data_format not in ("NCHW", "NHWC"):
            raise OpValueError(name, "data_format in ['NCHW', 'NHWC']", repr(data_format))
        if data_format == "NHWC":
            raise OpValueError(name, "data_format 'NCHW' (MindSpore supports 'NHWC' only on GPU)", repr(data_format))
        if use_batch_statistics is not None and not isinstance(use_batch_statistics, bool):
            raise OpValueError(name, "'use_batch_statistics' as a bool or None", repr(use_batch_statistics))
        self.num_features = num_features
        self.use_batch_statistics = use_batch_statistics
        self.format = data_format
        self.moving_mean = _param(moving_mean_init, num_features, dtype, "mean", requires_grad=False)
        self.moving_variance = _param(moving_var_init, num_features, dtype, "variance", requires_grad=False)
        self.gamma = _param(gamma_init, num_features, dtype, "gamma", requires_grad=affine)
        self.beta = _param(beta_init, num_features, dtype, "beta", requires_grad=affine)

    def _check_input(self, x):
        name = type(self).__name__
        _checks.tensor_input(name, x)
        if x.ndim not in self._ranks:
            want = " or ".join(str(r) for r in self._ranks)
            raise OpValueError(name, f"an input of rank {want}", f"shape {tuple(x.shape)}")
        if x.shape[1] != self.num_features:
            raise OpValueError(name, f"input channels (dim 1) equal to num_features ({self.num_features})",
                               f"shape {tuple(x.shape)}")

    def construct(self, x):
        self._check_input(x)
        use_batch = self.training if self.use_batch_statistics is None else self.use_batch_statistics
        if not use_batch:
            return _BATCH_NORM(x, self.gamma, self.beta, self.moving_mean, self.moving_variance, training=False,
                               eps=self.eps)
        y, mean, var = _BATCH_NORM(x, self.gamma, self.beta, None, None, training=True, eps=self.eps)
        _update_running_stats(self.moving_mean, self.moving_variance, mean, var, 1.0 - self.momentum)
        return y

    def extend_repr(self):
        return (f"num_features={self.num_features}, eps={self.eps}, momentum={self.momentum}, gamma={self.gamma}, "
                f"beta={self.beta}, moving_mean={self.moving_mean}, moving_variance={self.moving_variance}")


class BatchNorm1d(_BatchNorm):
    """`BatchNorm1d(num_features, eps=1e-5, momentum=0.9, affine=True, gamma_init='ones',
    beta_init='zeros', moving_mean_init='zeros', moving_var_init='ones', use_batch_statistics=None,
    data_format='NCHW', dtype=float32)`: input (N, C) or (N, C, L)."""

    _ranks = (2, 3)


class BatchNorm2d(_BatchNorm):
    """`BatchNorm2d(num_features, eps=1e-5, momentum=0.9, affine=True, ...)`: input (N, C, H, W)."""

    _ranks = (4,)


class BatchNorm3d(Cell):
    """`BatchNorm3d(num_features, eps=1e-5, momentum=0.9, affine=True, gamma_init='ones',
    beta_init='zeros', moving_mean_init='zeros', moving_var_init='ones', use_batch_statistics=None,
    dtype=float32)`: input (N, C, D, H, W).

    As in MindSpore, a wrapper around a BatchNorm2d child named `bn2d` (so its parameters are
    `bn2d.gamma`, ...) applied to the input viewed as (N, C, D*H, W)."""

    def __init__(self, num_features, eps=1e-5, momentum=0.9, affine=True, gamma_init="ones", beta_init="zeros",
                 moving_mean_init="zeros", moving_var_init="ones", use_batch_statistics=None, dtype=mstype.float32):
        super().__init__()
        self.bn2d = BatchNorm2d(num_features, eps, momentum, affine, gamma_init, beta_init, moving_mean_init,
                                moving_var_init, use_batch_statistics, "NCHW", dtype)

    def construct(self, x):
        _checks.tensor_input("BatchNorm3d", x)
        if x.ndim != 5:
            raise OpValueError("BatchNorm3d", "an input of rank 5 (N, C, D, H, W)", f"shape {tuple(x.shape)}")
        n, c, d, h, w = x.shape
        return F.reshape(self.bn2d(F.reshape(x, (n, c, d * h, w))), (n, c, d, h, w))


# =================================================================================================
# Group and instance normalization
def _float_eps(cell, eps):
    """MindSpore requires a Python float here (eps=1 is a TypeError)."""
    if not isinstance(eps, float):
        raise OpTypeError(cell, "'eps' to be a float", f"{type(eps).__name__} {eps!r}")
    return _checks.real(cell, "eps", eps, lo=0.0)


class GroupNorm(Cell):
    """`GroupNorm(num_groups, num_channels, eps=1e-5, affine=True, gamma_init='ones',
    beta_init='zeros', dtype=float32)`: the channels of an (N, C, ...) input split into groups,
    each (sample, group) normalized over its channels and positions, then per-channel gamma/beta."""

    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, gamma_init="ones", beta_init="zeros",
                 dtype=mstype.float32):
        super().__init__()
        self.num_groups = _checks.positive_int("GroupNorm", "num_groups", num_groups)
        self.num_channels = _checks.positive_int("GroupNorm", "num_channels", num_channels)
        if num_channels % num_groups:
            raise OpValueError("GroupNorm", f"num_channels divisible by num_groups ({num_groups})",
                               f"num_channels={num_channels}")
        self.eps = _float_eps("GroupNorm", eps)
        self.affine = _checks.boolean("GroupNorm", "affine", affine)
        self.gamma = _param(gamma_init, num_channels, dtype, "gamma", requires_grad=self.affine)
        self.beta = _param(beta_init, num_channels, dtype, "beta", requires_grad=self.affine)

    def construct(self, x):
        _checks.tensor_input("GroupNorm", x)
        if x.ndim < 2 or x.shape[1] != self.num_channels:
            raise OpValueError("GroupNorm", f"an (N, C, ...) input with C = num_channels ({self.num_channels})",
                               f"shape {tuple(x.shape)}")
        gamma, beta = self.gamma, self.beta
        if gamma.dtype is not x.dtype:
            gamma, beta = F.cast(gamma, x.dtype), F.cast(beta, x.dtype)
        return F.group_norm(x, self.num_groups, gamma, beta, self.eps)

    def extend_repr(self):
        return f"num_groups={self.num_groups}, num_channels={self.num_channels}"


class InstanceNorm2d(Cell):
    """`InstanceNorm2d(num_features, eps=1e-5, momentum=0.1, affine=True, gamma_init='ones',
    beta_init='zeros', dtype=float32)`: each (sample, channel) plane of an (N, C, H, W) input is
    normalized over its H*W positions, then per-channel gamma/beta (group_norm with C groups).

    MindSpore's parameters are kept (moving_mean / moving_variance, named 'mean' / 'variance'
    standalone, and `momentum`), but the output uses instance statistics in training and eval
    alike, and the moving statistics are not updated (MindSpore 2.10 has no CPU kernel for this
    layer to compare with; its GPU kernel's running averages are not part of the output)."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, gamma_init="ones", beta_init="zeros",
                 dtype=mstype.float32):
        super().__init__()
        if not isinstance(num_features, int) or isinstance(num_features, bool):
            raise OpTypeError("InstanceNorm2d", "'num_features' to be an int", repr(num_features))
        if num_features < 1:
            raise OpValueError("InstanceNorm2d", "'num_features' >= 1", repr(num_features))
        self.num_features = num_features
        self.eps = _float_eps("InstanceNorm2d", eps)
        if not isinstance(momentum, float):
            raise OpTypeError("InstanceNorm2d", "'momentum' to be a float", f"{type(momentum).__name__} {momentum!r}")
        self.momentum = _checks.real("InstanceNorm2d", "momentum", momentum, lo=0.0, hi=1.0)
        affine = _checks.boolean("InstanceNorm2d", "affine", affine)
        self.moving_mean = _param("zeros", num_features, dtype, "mean", requires_grad=False)
        self.moving_variance = _param("ones", num_features, dtype, "variance", requires_grad=False)
        self.gamma = _param(gamma_init, num_features, dtype, "gamma", requires_grad=affine)
        self.beta = _param(beta_init, num_features, dtype, "beta", requires_grad=affine)

    def construct(self, x):
        _checks.tensor_input("InstanceNorm2d", x)
        if x.ndim != 4 or x.shape[1] != self.num_features:
            raise OpValueError("InstanceNorm2d", f"an (N, C, H, W) input with C = num_features ({self.num_features})",
                               f"shape {tuple(x.shape)}")
        return F.group_norm(x, self.num_features, self.gamma, self.beta, self.eps)

    def extend_repr(self):
        return (f"num_features={self.num_features}, eps={self.eps}, momentum={self.momentum}, gamma={self.gamma}, "
                f"beta={self.beta}, moving_mean={self.moving_mean}, moving_variance={self.moving_variance}")
