"""Op table: zeros, ones, full, full_like, arange, linspace, eye (forward only: nothing to
differentiate). The dtype under test is passed as the op's `dtype` argument."""
import numpy as np

from ... import ops
from ...common import dtype as mstype
from ..opinfo import OpInfo, SampleInput, noncontig, rand, register

ALL = (mstype.float16, mstype.bfloat16, mstype.float32, mstype.float64, mstype.int32, mstype.int64)


def _ms(dtype):
    return mstype.from_numpy_dtype(dtype)


def _filled_samples(rng, dtype):
    d = _ms(dtype)
    yield SampleInput(((2, 3),), {"dtype": d})
    yield SampleInput((4,), {"dtype": d}, desc="int size")
    yield SampleInput(((),), {"dtype": d}, desc="0-d")
    yield SampleInput(([2, 0, 3],), {"dtype": d}, desc="list size, empty")


def _full_samples(rng, dtype):
    d = _ms(dtype)
    yield SampleInput(((2, 3), 7), {"dtype": d})
    yield SampleInput(((), 3), {"dtype": d}, desc="0-d")


def _full_like_samples(rng, dtype):
    d = _ms(dtype)
    yield SampleInput((rand(rng, (2, 3), np.float32), 5), {"dtype": d})
    yield SampleInput((noncontig(rand(rng, (3, 2), np.float32)), -2), {"dtype": d}, desc="non-contiguous input")


def _arange_samples(rng, dtype):
    d = _ms(dtype)
    yield SampleInput((5,), {"dtype": d}, desc="end only")
    yield SampleInput((2, 11, 3), {"dtype": d})
    yield SampleInput((10, -3, -4), {"dtype": d}, desc="negative step")
    if d.is_floating:
        yield SampleInput((0.5, 2.0, 0.25), {"dtype": d}, desc="float step")


def _arange_ref(start, end=None, step=1, dtype=None):
    if end is None:
        start, end = 0, start
    vals, v = [], start
    while (step > 0 and v < end) or (step < 0 and v > end):
        vals.append(v)
        v = start + step * len(vals)
    return np.array(vals, dtype=np.float64 if dtype.is_floating else np.int64)


def _eye_samples(rng, dtype):
    d = _ms(dtype)
    yield SampleInput((3,), {"dtype": d})
    yield SampleInput((2, 4), {"dtype": d}, desc="rectangular")
    yield SampleInput((0,), {"dtype": d}, desc="empty")


def _eye_ref(n, m=None, dtype=None):
    m = n if m is None else m
    return np.array([[1.0 if i == j else 0.0 for j in range(m)] for i in range(n)]).reshape(n, m)


def _linspace_samples(rng, dtype):
    yield SampleInput((0.0, 1.0, 5))
    yield SampleInput((-2, 3, 1), desc="one step")
    yield SampleInput((3.0, -1.5, 4), desc="decreasing")


def _linspace_ref(start, end, steps):
    if steps == 1:
        return np.array([start], dtype=np.float64)
    return np.array([start + (end - start) * i / (steps - 1) for i in range(steps)])


def _size_of(size):
    return (size,) if isinstance(size, int) else tuple(size)


def _filled_ref(value):
    def ref(size, dtype=None):
        return np.full(_size_of(size), value, dtype=np.float64 if dtype.is_floating else np.int64)
    return ref


def _full_ref(size, fill_value, dtype=None):
    return np.full(_size_of(size), fill_value, dtype=np.float64 if dtype.is_floating else np.int64)


def _full_like_ref(x, fill_value, dtype=None):
    return np.full(x.shape, fill_value, dtype=np.float64 if dtype.is_floating else np.int64)


register(
    OpInfo("zeros", ops.zeros, _filled_ref(0), _filled_samples, dtypes=ALL, differentiable=False),
    OpInfo("ones", ops.ones, _filled_ref(1), _filled_samples, dtypes=ALL, differentiable=False),
    OpInfo("full", ops.full, _full_ref, _full_samples, dtypes=ALL, differentiable=False),
    OpInfo("full_like", ops.full_like, _full_like_ref, _full_like_samples, dtypes=ALL, differentiable=False),
    OpInfo("arange", ops.arange, _arange_ref, _arange_samples, dtypes=ALL, differentiable=False),
    OpInfo("linspace", ops.linspace, _linspace_ref, _linspace_samples, dtypes=(mstype.float32,),
           differentiable=False),
    OpInfo("eye", ops.eye, _eye_ref, _eye_samples, dtypes=ALL, differentiable=False),
)
