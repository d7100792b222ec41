"""Op table: diagonal, diag_embed, diagflat, take, rot90, index_add, index_fill, tensor_split,
strided_slice, slice, pixel_shuffle/unshuffle, the stacking family, repeat_elements, reverse,
cartesian_prod, combinations, block_diag (NumPy references: np.diagonal, np.rot90, np.add.at,
np.array_split, basic slicing, np.hstack/vstack/dstack/column_stack, itertools)."""
import itertools

import numpy as np
import scipy.linalg

from ... import ops
from ...common import dtype as mstype
from ..opinfo import OpInfo, SampleInput, noncontig, rand, register

F = (mstype.float32, mstype.float64)
F16 = (mstype.float16, mstype.float32, mstype.float64)


def _diagonal_samples(rng, dtype):
    yield SampleInput((rand(rng, (3, 4), dtype),))
    yield SampleInput((rand(rng, (3, 4), dtype), 1), desc="offset 1")
    yield SampleInput((rand(rng, (2, 3, 4), dtype), -1, 1, 2), desc="batched, offset -1")
    yield SampleInput((noncontig(rand(rng, (4, 3), dtype)), 0, -1, 0), desc="non-contiguous, swapped dims")
    yield SampleInput((rand(rng, (2, 3), dtype), 5), desc="past the edge: empty")


def _diag_embed_ref(x, offset=0, dim1=-2, dim2=-1):
    n = x.shape[-1] + abs(offset)
    out = np.zeros(x.shape[:-1] + (n, n), dtype=x.dtype)
    for idx in np.ndindex(*x.shape[:-1]):
        out[idx] = np.diag(x[idx], offset)
    nd = x.ndim + 1
    return np.moveaxis(out, (-2, -1), (dim1 % nd, dim2 % nd))


def _diag_embed_samples(rng, dtype):
    yield SampleInput((rand(rng, (2, 3), dtype),))
    yield SampleInput((rand(rng, (2, 3), dtype), 1, 0, 2), desc="offset 1, dims (0, 2)")
    yield SampleInput((rand(rng, (4,), dtype), -2), desc="1-D, offset -2")


def _take_samples(rng, dtype):
    yield SampleInput((rand(rng, (3, 4), dtype), np.array([[0, 11], [5, 5]], dtype=np.int64)))
    yield SampleInput((rand(rng, (5,), dtype), np.array(2, dtype=np.int32)), desc="0-d index")


def _rot90_samples(rng, dtype):
    for k in (1, 2, 3, -1, 4):
        yield SampleInput((rand(rng, (2, 3), dtype), k, (0, 1)), desc=f"k={k}")
    yield SampleInput((rand(rng, (2, 3, 4), dtype), 1, (2, 0)), desc="3-D, dims (2, 0)")


def _index_add_samples(rng, dtype):
    yield SampleInput((rand(rng, (3, 4), dtype), np.array([0, 2, 0], dtype=np.int32), rand(rng, (3, 3), dtype), 1),
                      desc="repeated index accumulates")
    yield SampleInput((rand(rng, (4, 2), dtype), np.array([3, 1], dtype=np.int64), rand(rng, (2, 2), dtype), 0))


def _index_add_ref(x, idx, y, axis):
    out = x.copy()
    np.add.at(np.moveaxis(out, axis, 0), idx, np.moveaxis(y, axis, 0))
    return out


def _index_fill_samples(rng, dtype):
    yield SampleInput((rand(rng, (3, 4), dtype), 1, np.array([0, 2], dtype=np.int32), 9.0))
    yield SampleInput((rand(rng, (3, 4), dtype), 0, np.array([1], dtype=np.int32), np.array(-1.5, dtype=dtype)),
                      desc="0-d tensor value")


def _index_fill_ref(x, axis, idx, value):
    out = x.copy()
    np.moveaxis(out, axis, 0)[idx] = value
    return out


def _tsplit_samples(rng, dtype):
    yield SampleInput((rand(rng, (7, 2), dtype), 3))
    yield SampleInput((rand(rng, (2, 7), dtype), [1, 4]), {"axis": 1}, desc="indices")
    yield SampleInput((rand(rng, (5,), dtype), [2, 9]), desc="index past the end")


def _tsplit_ref(x, ios, axis=0):
    return tuple(np.array_split(x, ios, axis=axis))


def _ss_samples(rng, dtype):
    x = rand(rng, (2, 3, 4), dtype)
    yield SampleInput((x, (0, 1, 0), (2, 3, 4), (1, 1, 2)))
    yield SampleInput((x, (1, 0, 0), (2, 3, 4), (1, 1, 1)), {"shrink_axis_mask": 1}, desc="shrink")
    yield SampleInput((x, (1, 2, 3), (0, 0, 0), (-1, -1, -1)), desc="negative strides")
    yield SampleInput((x, (1, 1, 1), (2, 3, 4), (1, 1, 1)), {"begin_mask": 5, "end_mask": 2}, desc="masks")
    yield SampleInput((x, (0, 0), (1, 2), (1, 1)), {"new_axis_mask": 1}, desc="new axis")


def _ss_ref(x, begin, end, strides, begin_mask=0, end_mask=0, shrink_axis_mask=0, new_axis_mask=0):
    spec = []
    for i, (b, e, s) in enumerate(zip(begin, end, strides)):
        if new_axis_mask >> i & 1:
            spec.append(None)
        elif shrink_axis_mask >> i & 1:
            spec.append(b)
        else:
            spec.append(slice(None if begin_mask >> i & 1 else b, None if end_mask >> i & 1 else e, s))
    return x[tuple(spec)]


def _pixel_samples(rng, dtype):
    yield SampleInput((rand(rng, (2, 8, 2, 3), dtype), 2))
    yield SampleInput((rand(rng, (9, 1, 2), dtype), 3), desc="3-D")


def _pixel_shuffle_ref(x, r):
    *lead, c, h, w = x.shape
    y = x.reshape(*lead, c // (r * r), r, r, h, w)
    n = len(lead)
    y = np.transpose(y, tuple(range(n)) + (n, n + 3, n + 1, n + 4, n + 2))
    return y.reshape(*lead, c // (r * r), h * r, w * r)


def _unshuffle_samples(rng, dtype):
    yield SampleInput((rand(rng, (2, 2, 4, 6), dtype), 2))


def _unshuffle_ref(x, r):
    *lead, c, h, w = x.shape
    out = np.zeros((*lead, c * r * r, h // r, w // r), dtype=x.dtype)
    for ci in range(c):
        for i in range(r):
            for j in range(r):
                out[..., ci * r * r + i * r + j, :, :] = x[..., ci, i::r, j::r]
    return out


def _stack_samples(rng, dtype):
    # the tensors are passed as separate arguments (the table wraps top-level arrays only)
    yield SampleInput((rand(rng, (2, 3), dtype), rand(rng, (2, 3), dtype)))
    yield SampleInput((rand(rng, (3,), dtype), rand(rng, (3,), dtype)), desc="vectors")


def _bd_samples(rng, dtype):
    yield SampleInput((rand(rng, (2, 2), dtype), rand(rng, (3,), dtype), rand(rng, (), dtype), rand(rng, (1, 2), dtype)))


def _comb_ref(x, r=2, with_replacement=False):
    gen = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    return np.array([[x[i] for i in c] for c in gen(range(len(x)), r)], dtype=x.dtype).reshape(-1, r)


def _comb_samples(rng, dtype):
    yield SampleInput((rand(rng, (4,), dtype),))
    yield SampleInput((rand(rng, (3,), dtype), 2, True), desc="with replacement")
    yield SampleInput((rand(rng, (4,), dtype), 3), desc="r=3")


def _cart_samples(rng, dtype):
    yield SampleInput((rand(rng, (2,), dtype), rand(rng, (3,), dtype), rand(rng, (2,), dtype)))


def _cart_ref(*xs):
    return np.array(list(itertools.product(*xs)), dtype=xs[0].dtype)


register(
    OpInfo("diagonal", ops.diagonal, lambda x, o=0, a=0, b=1: np.diagonal(x, o, a, b), _diagonal_samples, dtypes=F16),
    OpInfo("diag_embed", ops.diag_embed, _diag_embed_ref, _diag_embed_samples, dtypes=F,
           primitive="diagonal_scatter"),
    OpInfo("diagflat", ops.diagflat, lambda x, offset=0: np.diagflat(x, offset),
           lambda rng, dt: [SampleInput((rand(rng, (2, 2), dt),)), SampleInput((rand(rng, (3,), dt), -1), desc="offset")],
           dtypes=F, primitive="diagonal_scatter"),
    OpInfo("take", ops.take, lambda x, i: np.take(x, i), _take_samples, dtypes=F, primitive="gather"),
    OpInfo("rot90", ops.rot90, lambda x, k, dims: np.rot90(x, k, dims), _rot90_samples, dtypes=F, primitive="flip"),
    OpInfo("index_add", ops.index_add, _index_add_ref, _index_add_samples, dtypes=F16),
    OpInfo("index_fill", ops.index_fill, _index_fill_ref, _index_fill_samples, dtypes=F16),
    OpInfo("tensor_split", ops.tensor_split, _tsplit_ref, _tsplit_samples, dtypes=F, primitive="getitem"),
    OpInfo("strided_slice", ops.strided_slice, _ss_ref, _ss_samples, dtypes=F, primitive="getitem"),
    OpInfo("slice", ops.slice, lambda x, b, s: x[tuple(slice(i, None if n == -1 else i + n) for i, n in zip(b, s))],
           lambda rng, dt: [SampleInput((rand(rng, (2, 3, 4), dt), (0, 1, 1), (1, 2, -1)))], dtypes=F,
           primitive="getitem"),
    OpInfo("pixel_shuffle", ops.pixel_shuffle, _pixel_shuffle_ref, _pixel_samples, dtypes=F, primitive="transpose"),
    OpInfo("pixel_unshuffle", ops.pixel_unshuffle, _unshuffle_ref, _unshuffle_samples, dtypes=F,
           primitive="transpose"),
    *[OpInfo(name, (lambda f: lambda *ts: f(list(ts)))(getattr(ops, name)),
             (lambda f: lambda *xs: f(xs))(getattr(np, name)), _stack_samples, dtypes=F, primitive="concat")
      for name in ("hstack", "vstack", "dstack", "column_stack")],
    OpInfo("repeat_elements", ops.repeat_elements, lambda x, r, axis=0: np.repeat(x, r, axis),
           lambda rng, dt: [SampleInput((rand(rng, (2, 3), dt), 2, 1)), SampleInput((rand(rng, (2, 3), dt), 3))],
           dtypes=F, primitive="repeat_interleave"),
    OpInfo("reverse", ops.reverse, lambda x, axis: np.flip(x, tuple(axis) if isinstance(axis, (list, tuple)) else axis),
           lambda rng, dt: [SampleInput((rand(rng, (2, 3, 4), dt), [0, 2])), SampleInput((rand(rng, (3,), dt), 0))],
           dtypes=F, primitive="flip"),
    OpInfo("cartesian_prod", ops.cartesian_prod, _cart_ref, _cart_samples, dtypes=F, primitive="stack"),
    OpInfo("combinations", ops.combinations, _comb_ref, _comb_samples, dtypes=F, primitive="gather"),
    OpInfo("block_diag", ops.block_diag, lambda *xs: scipy.linalg.block_diag(*[np.atleast_1d(x) for x in xs]),
           _bd_samples, dtypes=F, primitive="concat"),
)
