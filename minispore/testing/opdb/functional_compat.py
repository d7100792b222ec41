"""Op table: the older functional spellings (ops/prims/functional_compat.py) that compute
something: `tensor_dot` (transpose + reshape + matmul, checked against np.tensordot in float64
with finite-difference gradients) and `fill` (np.full)."""
import numpy as np

from ... import ops
from ...common import dtype as mstype
from ..opinfo import OpInfo, SampleInput, noncontig, rand, register

FLOATS = (mstype.float16, mstype.float32, mstype.float64)


def _tensor_dot_samples(rng, dtype):
    yield SampleInput((rand(rng, (2, 3), dtype), rand(rng, (3, 4), dtype), ((1,), (0,))))
    yield SampleInput((rand(rng, (2, 3, 4), dtype), rand(rng, (3, 4, 5), dtype), 2), desc="int axes")
    yield SampleInput((rand(rng, (2, 3), dtype), rand(rng, (2, 3), dtype), ((-1, 0), (1, 0))), desc="two pairs, negative")
    yield SampleInput((rand(rng, (2, 3), dtype), rand(rng, (4,), dtype), 0), desc="outer product")
    yield SampleInput((noncontig(rand(rng, (4, 3), dtype)), rand(rng, (4, 2), dtype), (0, 0)), desc="non-contiguous")


def _tensor_dot_ref(a, b, axes):
    if isinstance(axes, int):
        return np.tensordot(a, b, axes)
    return np.tensordot(a, b, (list(np.atleast_1d(axes[0])), list(np.atleast_1d(axes[1]))))


def _fill_op(shape, value, type=mstype.float32):
    return ops.fill(type, shape, value)


def _fill_samples(rng, dtype):
    yield SampleInput(((2, 3), 1.5))
    yield SampleInput(((), -2.0), desc="0-d")
    yield SampleInput(((4,), 2.7), {"type": mstype.int32}, desc="int32 truncates")


def _fill_ref(shape, value, type=mstype.float32):
    return np.full(shape, value, dtype=type.np)


register(
    OpInfo("tensor_dot", ops.tensor_dot, _tensor_dot_ref, _tensor_dot_samples, dtypes=FLOATS, primitive="matmul",
           tols={mstype.float16: (5e-3, 5e-3)}),
    OpInfo("fill", _fill_op, _fill_ref, _fill_samples, dtypes=(mstype.float32,), differentiable=False,
           primitive="full"),
)
