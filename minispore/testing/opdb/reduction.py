"""Op table: sum and mean."""
import numpy as np

from ... import ops
from ...common import dtype as mstype
from ..opinfo import OpInfo, SampleInput, noncontig, rand, register


def _reduce_samples(dim_kw, keep_kw):
    def samples(rng, dtype):
        yield SampleInput((rand(rng, (3, 4), dtype),))
        yield SampleInput((rand(rng, (), dtype),), desc="0-d")
        yield SampleInput((rand(rng, (2, 3, 4), dtype),), {dim_kw: 1})
        yield SampleInput((rand(rng, (2, 3, 4), dtype),), {dim_kw: (0, 2), keep_kw: True})
        yield SampleInput((rand(rng, (2, 3, 4), dtype),), {dim_kw: -1, keep_kw: True})
        yield SampleInput((noncontig(rand(rng, (4, 5), dtype)),), {dim_kw: 0}, desc="non-contiguous")
    return samples


def _np_reduce(fn, dim_kw, keep_kw):
    def ref(a, **kw):
        axis = kw.get(dim_kw)
        return fn(a, axis=tuple(axis) if isinstance(axis, (list, tuple)) else axis, keepdims=kw.get(keep_kw, False))
    return ref


register(
    OpInfo("sum", ops.sum, _np_reduce(np.sum, "dim", "keepdim"), _reduce_samples("dim", "keepdim"),
           dtypes=(mstype.float16, mstype.float32, mstype.float64), tols={mstype.float16: (5e-3, 5e-3)},
           primitive="reduce_sum"),
    OpInfo("mean", ops.mean, _np_reduce(np.mean, "axis", "keep_dims"), _reduce_samples("axis", "keep_dims"),
           dtypes=(mstype.float16, mstype.float32, mstype.float64), primitive="reduce_mean"),
)
