"""Op table: reshape, broadcast_to, transpose."""
import numpy as np

from ... import ops
from ...common import dtype as mstype
from ..opinfo import OpInfo, SampleInput, noncontig, rand, register

ALL = (mstype.float16, mstype.bfloat16, mstype.float32, mstype.float64)


def _reshape_samples(rng, dtype):
    yield SampleInput((rand(rng, (3, 4), dtype), (4, 3)))
    yield SampleInput((rand(rng, (2, 3, 4), dtype), (-1, 4)), desc="-1")
    yield SampleInput((rand(rng, (), dtype), (1, 1)), desc="0-d")
    yield SampleInput((noncontig(rand(rng, (4, 3), dtype)), (12,)), desc="non-contiguous")


def _bcast_samples(rng, dtype):
    yield SampleInput((rand(rng, (3, 1), dtype), (2, 3, 4)))
    yield SampleInput((rand(rng, (), dtype), (2, 2)), desc="0-d")


def _transpose_samples(rng, dtype):
    yield SampleInput((rand(rng, (2, 3, 4), dtype), (2, 0, 1)))
    yield SampleInput((rand(rng, (3, 4), dtype), (1, 0)))
    yield SampleInput((noncontig(rand(rng, (4, 3), dtype)), (-1, 0)), desc="negative axis, non-contiguous")


register(
    OpInfo("reshape", ops.reshape, lambda a, s: a.reshape(s), _reshape_samples, dtypes=ALL),
    OpInfo("broadcast_to", ops.broadcast_to, lambda a, s: np.broadcast_to(a, s), _bcast_samples, dtypes=ALL),
    OpInfo("transpose", ops.transpose, lambda a, p: np.transpose(a, p), _transpose_samples, dtypes=ALL),
)
