"""Op table: narrow, swapaxes, moveaxis, t, flipud/fliplr, unbind, meshgrid, roll, diff. References
are NumPy's own view functions (np.swapaxes, np.moveaxis, np.roll, np.diff, np.meshgrid)."""
import numpy as np

from ... import ops
from ...common import dtype as mstype
from ..opinfo import OpInfo, SampleInput, noncontig, rand, register

ALL = (mstype.float16, mstype.bfloat16, mstype.float32, mstype.float64)


def _narrow_samples(rng, dtype):
    yield SampleInput((rand(rng, (3, 5), dtype), 1, 1, 3))
    yield SampleInput((rand(rng, (4, 2, 3), dtype), -3, 0, 4), desc="negative axis, whole")
    yield SampleInput((noncontig(rand(rng, (4, 5), dtype)), 0, 2, 2), desc="non-contiguous")


def _narrow_ref(x, axis, start, length):
    return np.take(x, np.arange(start, start + length), axis=axis)


def _swap_samples(rng, dtype):
    yield SampleInput((rand(rng, (2, 3, 4), dtype), 0, 2))
    yield SampleInput((rand(rng, (2, 3), dtype), -1, 0), desc="negative axis")


def _move_samples(rng, dtype):
    yield SampleInput((rand(rng, (2, 3, 4), dtype), 0, -1))
    yield SampleInput((rand(rng, (2, 3, 4), dtype), (0, 1), (2, 0)), desc="tuples")


def _t_samples(rng, dtype):
    yield SampleInput((rand(rng, (2, 3), dtype),))
    yield SampleInput((rand(rng, (3,), dtype),), desc="1-D unchanged")


def _flip_samples(rng, dtype):
    yield SampleInput((rand(rng, (3, 4), dtype),))


def _unbind_samples(rng, dtype):
    yield SampleInput((rand(rng, (3, 4), dtype),))
    yield SampleInput((rand(rng, (2, 3, 4), dtype), -1), desc="last dim")


def _meshgrid_op(*xs, indexing="xy"):
    return ops.meshgrid(*xs, indexing=indexing)


def _meshgrid_samples(rng, dtype):
    yield SampleInput((rand(rng, (3,), dtype), rand(rng, (4,), dtype)))
    yield SampleInput((rand(rng, (3,), dtype), rand(rng, (4,), dtype), rand(rng, (2,), dtype)), {"indexing": "ij"},
                      desc="three inputs, ij")
    yield SampleInput((rand(rng, (2,), dtype), rand(rng, (3,), dtype), rand(rng, (4,), dtype)), desc="three, xy")


def _roll_samples(rng, dtype):
    yield SampleInput((rand(rng, (3, 4), dtype), 1, 1))
    yield SampleInput((rand(rng, (3, 4), dtype), (2, -1), (0, 1)), desc="two dims")
    yield SampleInput((rand(rng, (3, 4), dtype), 5), desc="flattened")


def _roll_ref(x, shifts, dims=None):
    return np.roll(x, shifts, axis=dims)


def _diff_samples(rng, dtype):
    yield SampleInput((rand(rng, (3, 5), dtype),))
    yield SampleInput((rand(rng, (4, 3), dtype), 2, 0), desc="n=2, axis 0")
    yield SampleInput((rand(rng, (4,), dtype), 1, -1, rand(rng, (2,), dtype), rand(rng, (1,), dtype)),
                      desc="prepend and append")


def _diff_ref(x, n=1, axis=-1, prepend=None, append=None):
    kw = {}
    if prepend is not None:
        kw["prepend"] = prepend
    if append is not None:
        kw["append"] = append
    return np.diff(x, n=n, axis=axis, **kw)


register(
    OpInfo("narrow", ops.narrow, _narrow_ref, _narrow_samples, dtypes=ALL, primitive="getitem"),
    OpInfo("swapaxes", ops.swapaxes, np.swapaxes, _swap_samples, dtypes=ALL, primitive="transpose"),
    OpInfo("moveaxis", ops.moveaxis, np.moveaxis, _move_samples, dtypes=ALL, primitive="transpose"),
    OpInfo("t", ops.t, lambda x: x.T, _t_samples, dtypes=ALL, primitive="transpose"),
    OpInfo("flipud", ops.flipud, np.flipud, _flip_samples, dtypes=ALL, primitive="flip"),
    OpInfo("fliplr", ops.fliplr, np.fliplr, _flip_samples, dtypes=ALL, primitive="flip"),
    OpInfo("unbind", ops.unbind, lambda x, dim=0: tuple(np.moveaxis(x, dim, 0)), _unbind_samples, dtypes=ALL,
           primitive="getitem"),
    OpInfo("meshgrid", _meshgrid_op, lambda *xs, indexing="xy": tuple(np.meshgrid(*xs, indexing=indexing)),
           _meshgrid_samples, dtypes=ALL, primitive="broadcast_to"),
    OpInfo("roll", ops.roll, _roll_ref, _roll_samples, dtypes=ALL),
    OpInfo("diff", ops.diff, _diff_ref, _diff_samples, dtypes=(mstype.float32, mstype.float64), primitive="sub"),
)
