"""Class-style random operators: `UniformReal(seed, seed2)(shape)`, `StandardNormal(seed, seed2)(shape)`,
`UniformInt(seed, seed2)(shape, minval, maxval)`, over the functional `ops.uniform` /
`ops.standard_normal` (one sampling primitive each).

Seeds, as in MindSpore: with seed = seed2 = 0 an op draws from the global generator (`ms.set_seed`
makes it reproducible). With a non-zero seed the instance owns a reproducible *stream*: call k
of an instance built with (seed, seed2) always returns the same numbers, and successive calls
differ (minispore derives call k's op-level seed from (seed, seed2, k)).
"""
from __future__ import annotations

from ...common import dtype as mstype
from ...common.errors import OpTypeError, OpValueError
from ...common.tensor import Tensor
from .. import functional as F
from .base import Primitive, check_int, prim_attr_register

_MIX = 1_000_003


class _Random(Primitive):
    @prim_attr_register
    def __init__(self, seed=0, seed2=0):
        check_int(self.name, "seed", seed, minimum=0)
        check_int(self.name, "seed2", seed2, minimum=0)
        self._calls = 0

    def _next_seed(self):
        """None (the global generator) for seeds (0, 0); else the op-level seed of this call."""
        if not (self.seed or self.seed2):
            return None
        self._calls += 1
        return ((self.seed * _MIX + self.seed2) * _MIX + self._calls) % (2 ** 63)

    def _shape(self, shape):
        if isinstance(shape, Tensor):
            if shape.dtype.kind != "int" or shape.ndim != 1:
                raise OpTypeError(self.name, "'shape' as a tuple of ints or a 1-D integer Tensor",
                                  f"a {shape.dtype} Tensor of shape {tuple(shape.shape)}")
            shape = tuple(int(s) for s in shape.asnumpy())
        if not isinstance(shape, tuple) or not all(isinstance(s, int) and not isinstance(s, bool) for s in shape):
            raise OpTypeError(self.name, "'shape' as a tuple of ints", f"{type(shape).__name__} {shape!r}")
        if any(s < 0 for s in shape):
            raise OpValueError(self.name, "non-negative sizes in 'shape'", repr(shape))
        return shape


class UniformReal(_Random):
    """`UniformReal(seed=0, seed2=0)(shape)`: Float32 samples in [0, 1)."""

    def __call__(self, shape):
        return F.uniform(self._shape(shape), 0.0, 1.0, seed=self._next_seed(), dtype=mstype.float32)


class StandardNormal(_Random):
    """`StandardNormal(seed=0, seed2=0)(shape)`: Float32 samples of N(0, 1)."""

    def __call__(self, shape):
        return F.standard_normal(self._shape(shape), seed=self._next_seed())


class UniformInt(_Random):
    """`UniformInt(seed=0, seed2=0)(shape, minval, maxval)`: Int32 samples in [minval, maxval);
    the bounds are 0-d Int32 Tensors, as MindSpore requires."""

    def __call__(self, shape, minval, maxval):
        bounds = []
        for arg, v in (("minval", minval), ("maxval", maxval)):
            if not isinstance(v, Tensor) or v.dtype is not mstype.int32 or v.size != 1:
                raise OpTypeError(self.name, f"'{arg}' to be a one-element Int32 Tensor",
                                  f"{type(v).__name__} {getattr(v, 'dtype', v)}")
            bounds.append(int(v.item()))
        if bounds[0] >= bounds[1]:
            raise OpValueError(self.name, "minval < maxval", f"minval={bounds[0]}, maxval={bounds[1]}")
        return F.uniform(self._shape(shape), bounds[0], bounds[1], seed=self._next_seed(), dtype=mstype.int32)


__all__ = ["UniformReal", "StandardNormal", "UniformInt"]
