"""Op table: the collectives in a world of one (all_reduce, all_gather, reduce_scatter, all_to_all,
all_to_all_v, broadcast).

In a single process every collective is the identity, so the NumPy reference is a copy. What the
entries check is everything around the communication: the inference rules on every dtype, 0-d and
non-contiguous inputs, the kernels' buffer handling, and - by float64 finite differences - that
each backward rule (a collective of the cotangent, MindSpore's rules) is the identity's gradient
here. The multi-rank numbers are tests/communication/test_collectives.py's (real MPI worlds).
"""
import numpy as np

from ...common import dtype as mstype
from ...ops.prims import comm as C
from ..opinfo import OpInfo, SampleInput, noncontig, positive, rand, register

FLOATS = (mstype.float16, mstype.bfloat16, mstype.float32, mstype.float64)
WORLD = C.WORLD


def _identity(a, **kwargs):
    return np.array(a, copy=True)


def _samples(with_0d=True):
    def samples(rng, dtype):
        yield SampleInput((rand(rng, (3, 4), dtype),))
        yield SampleInput((noncontig(rand(rng, (4, 3), dtype)),), desc="non-contiguous")
        yield SampleInput((rand(rng, (2, 3, 2), dtype),), desc="3-d")
        if with_0d:
            yield SampleInput((rand(rng, (), dtype),), desc="0-d")
    return samples


def _positive_samples(rng, dtype):
    yield SampleInput((positive(rng, (3, 4), dtype),))
    yield SampleInput((noncontig(positive(rng, (4, 3), dtype)),), desc="non-contiguous")


def _with(prim, **attrs):
    def op(x):
        return prim(x, **attrs)
    op.__name__ = prim.name
    return op


register(
    OpInfo("all_reduce", _with(C.all_reduce, op="sum", group=WORLD), _identity, _samples(), dtypes=FLOATS),
    OpInfo("all_reduce_max", _with(C.all_reduce, op="max", group=WORLD), _identity, _samples(), dtypes=FLOATS,
           primitive="all_reduce"),
    OpInfo("all_reduce_min", _with(C.all_reduce, op="min", group=WORLD), _identity, _samples(), dtypes=FLOATS,
           primitive="all_reduce"),
    OpInfo("all_reduce_prod", _with(C.all_reduce, op="prod", group=WORLD), _identity, _positive_samples,
           dtypes=FLOATS, primitive="all_reduce"),
    OpInfo("all_gather", _with(C.all_gather, group=WORLD), _identity, _samples(with_0d=False), dtypes=FLOATS),
    OpInfo("reduce_scatter", _with(C.reduce_scatter, op="sum", group=WORLD), _identity, _samples(with_0d=False),
           dtypes=FLOATS),
    OpInfo("all_to_all", _with(C.all_to_all, split_count=1, split_dim=-1, concat_dim=0, group=WORLD), _identity,
           _samples(with_0d=False), dtypes=FLOATS),
    OpInfo("broadcast", _with(C.broadcast, root_rank=0, group=WORLD), _identity, _samples(), dtypes=FLOATS),
)
