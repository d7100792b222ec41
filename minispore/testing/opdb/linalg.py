"""Op table: matmul and bmm."""
import numpy as np

from ... import ops
from ...common import dtype as mstype
from ..opinfo import OpInfo, SampleInput, noncontig, rand, register


def _matmul_samples(rng, dtype):
    yield SampleInput((rand(rng, (3, 4), dtype), rand(rng, (4, 5), dtype)))
    yield SampleInput((rand(rng, (2, 3, 4), dtype), rand(rng, (4, 5), dtype)), desc="batch x matrix")
    yield SampleInput((rand(rng, (2, 1, 3, 4), dtype), rand(rng, (3, 4, 2), dtype)), desc="broadcast batch")
    yield SampleInput((rand(rng, (4,), dtype), rand(rng, (4, 5), dtype)), desc="vector x matrix")
    yield SampleInput((rand(rng, (3, 4), dtype), rand(rng, (4,), dtype)), desc="matrix x vector")
    yield SampleInput((rand(rng, (4,), dtype), rand(rng, (4,), dtype)), desc="dot")
    yield SampleInput((noncontig(rand(rng, (3, 4), dtype)), noncontig(rand(rng, (4, 2), dtype))), desc="non-contiguous")


def _bmm_samples(rng, dtype):
    yield SampleInput((rand(rng, (2, 3, 4), dtype), rand(rng, (2, 4, 5), dtype)))


LIN = (mstype.float16, mstype.bfloat16, mstype.float32, mstype.float64)
register(
    OpInfo("matmul", ops.matmul, np.matmul, _matmul_samples, dtypes=LIN,
           tols={mstype.float16: (5e-3, 5e-3), mstype.bfloat16: (3e-2, 3e-2), mstype.float32: (1e-5, 1e-5)}),
    OpInfo("bmm", ops.bmm, np.matmul, _bmm_samples, dtypes=LIN,
           tols={mstype.float16: (5e-3, 5e-3), mstype.bfloat16: (3e-2, 3e-2), mstype.float32: (1e-5, 1e-5)}),
)
