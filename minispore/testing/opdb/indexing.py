"""Op table: getitem, setitem, gather, index_select, gather_elements, scatter, masked_fill, one_hot,
embedding.

getitem's reference is NumPy indexing itself; the gather/scatter references are explicit loops
over output positions, so they share no code path with the vectorized kernels. Samples repeat
indices on purpose: the gradient must then accumulate (np.add.at semantics)."""
import numpy as np

from ... import ops
from ...common import dtype as mstype
from ..opinfo import OpInfo, SampleInput, noncontig, rand, register

ALL = (mstype.float16, mstype.bfloat16, mstype.float32, mstype.float64)
F = (mstype.float32, mstype.float64)


# ------------------------------------------------------------------------------------------------
def _getitem_samples(rng, dtype):
    x = rand(rng, (3, 4, 5), dtype)
    mask = rng.random((3, 4)) > 0.5
    yield SampleInput((x, 1), desc="int")
    yield SampleInput((x, (slice(None), -1)), desc="negative int")
    yield SampleInput((x, (slice(1, None, 2), Ellipsis, slice(None, None, -2))), desc="steps, negative step")
    yield SampleInput((x, (None, 0, slice(None), None)), desc="None")
    yield SampleInput((x, (1, 2, 3)), desc="all ints -> 0-d view")
    yield SampleInput((rand(rng, (), dtype), ()), desc="0-d, empty index")
    yield SampleInput((rand(rng, (), dtype), None), desc="0-d, None")
    yield SampleInput((x, np.array([0, 2, 2, 0])), desc="repeated array index")
    yield SampleInput((x, (slice(None), [1, 0, 1], [0, 4, 4])), desc="adjacent advanced in the middle")
    yield SampleInput((x, ([0, 2], slice(None), [1, 3])), desc="separated advanced go first")
    yield SampleInput((x, (1, slice(None), [[0, 1], [4, 4]])), desc="int + 2-d array")
    yield SampleInput((x, mask), desc="bool mask")
    yield SampleInput((x, (Ellipsis, np.array([True, False, True, True, False]))), desc="mask after Ellipsis")
    yield SampleInput((x, (slice(0, 0),)), desc="empty slice")
    yield SampleInput((noncontig(rand(rng, (4, 6), dtype)), (slice(None, None, 2), [5, 0])), desc="non-contiguous")


def _setitem_op(x, value, index):
    y = x + 0                       # a tracked, non-view copy: setitem writes into y in place
    ops.setitem(y, index, value)
    return y


def _setitem_ref(x, value, index):
    y = np.array(x, copy=True)
    y[index] = value
    return y


def _setitem_samples(rng, dtype):
    x = rand(rng, (3, 4), dtype)
    yield SampleInput((x, rand(rng, (4,), dtype), 1), desc="row, value broadcast")
    yield SampleInput((x, 2.5, (slice(None), slice(1, 3))), desc="scalar value")
    yield SampleInput((x, rand(rng, (2, 1), dtype), [0, 2]), desc="array index")
    yield SampleInput((x, rand(rng, (), dtype), rng.random((3, 4)) > 0.5), desc="bool mask, 0-d value")
    yield SampleInput((x, rand(rng, (1, 2), dtype), (slice(None, None, -2), slice(3, 0, -2))),
                      desc="negative steps")
    yield SampleInput((noncontig(rand(rng, (4, 3), dtype)), rand(rng, (4,), dtype), (Ellipsis, 0)),
                      desc="non-contiguous")


# ------------------------------------------------------------------------------------------------
def _gather_ref(params, indices, axis, batch_dims=0):
    b = batch_dims
    ishape = indices.shape[b:]
    out = np.empty(params.shape[:axis] + ishape + params.shape[axis + 1:], dtype=params.dtype)
    for batch in np.ndindex(*params.shape[:b]):
        for pre in np.ndindex(*params.shape[b:axis]):
            for i in np.ndindex(*ishape):
                k = indices[batch + i]
                out[batch + pre + i] = params[batch + pre + (k,)]
    return out


def _gather_samples(rng, dtype):
    yield SampleInput((rand(rng, (5, 3), dtype), np.array([[0, 4], [2, 2]]), 0), desc="repeated indices")
    yield SampleInput((rand(rng, (3, 5), dtype), np.array([4, 0, 1, 4]), 1))
    yield SampleInput((rand(rng, (5, 3), dtype), np.array(2), 0), desc="0-d index")
    yield SampleInput((rand(rng, (2, 3, 4), dtype), rng.integers(0, 4, (2, 5)), 2), {"batch_dims": 1},
                      desc="batch_dims=1, dims between")
    yield SampleInput((rand(rng, (2, 4, 3), dtype), rng.integers(0, 4, (2, 5)), 1), {"batch_dims": 1},
                      desc="batch_dims=1 at axis")
    yield SampleInput((noncontig(rand(rng, (4, 3), dtype)), np.array([3, 3, 1]), -2), desc="non-contiguous")


def _index_select_samples(rng, dtype):
    yield SampleInput((rand(rng, (4, 3), dtype), 0, np.array([3, 0, 3])))
    yield SampleInput((rand(rng, (2, 5, 3), dtype), 1, np.array([4, 1])))
    yield SampleInput((noncontig(rand(rng, (4, 3), dtype)), -1, np.array([2, 2, 0, 1])), desc="non-contiguous")


def _gather_elements_ref(x, dim, index):
    out = np.empty(index.shape, dtype=x.dtype)
    for pos in np.ndindex(*index.shape):
        src = list(pos)
        src[dim] = index[pos]
        out[pos] = x[tuple(src)]
    return out


def _gather_elements_samples(rng, dtype):
    yield SampleInput((rand(rng, (3, 4), dtype), 0, rng.integers(0, 3, (5, 4))), desc="repeats")
    yield SampleInput((rand(rng, (3, 4), dtype), 1, rng.integers(-4, 4, (2, 3))), desc="smaller index, negatives")
    yield SampleInput((noncontig(rand(rng, (4, 3), dtype)), -1, rng.integers(0, 3, (4, 3))), desc="non-contiguous")


def _scatter_ref(x, axis, index, src):
    out = np.array(x, copy=True)
    for pos in np.ndindex(*index.shape):
        dst = list(pos)
        dst[axis] = index[pos]
        out[tuple(dst)] = src[pos] if isinstance(src, np.ndarray) else src
    return out


def _distinct_rows(rng, n, shape, axis):
    """An index tensor with distinct positions along `axis` (so which write wins is defined)."""
    idx = np.empty(shape, dtype=np.int64)
    moved = np.moveaxis(idx, axis, -1)
    for pos in np.ndindex(*moved.shape[:-1]):
        moved[pos] = rng.permutation(n)[:moved.shape[-1]]
    return idx


def _scatter_samples(rng, dtype):
    yield SampleInput((rand(rng, (4, 3), dtype), 0, _distinct_rows(rng, 4, (2, 3), 0), rand(rng, (2, 3), dtype)))
    yield SampleInput((rand(rng, (3, 5), dtype), 1, _distinct_rows(rng, 5, (2, 3), 1), rand(rng, (2, 3), dtype)),
                      desc="index smaller than input")
    yield SampleInput((noncontig(rand(rng, (4, 3), dtype)), -1, _distinct_rows(rng, 3, (4, 2), 1), 1.5),
                      desc="scalar src, non-contiguous")


def _masked_fill_samples(rng, dtype):
    yield SampleInput((rand(rng, (3, 4), dtype), rng.random((3, 4)) > 0.5, 0.5))
    yield SampleInput((rand(rng, (3, 4), dtype), rng.random((4,)) > 0.5, rand(rng, (), dtype)),
                      desc="broadcast mask, 0-d tensor value")
    yield SampleInput((rand(rng, (), dtype), np.array(True), -1.0), desc="0-d")
    yield SampleInput((noncontig(rand(rng, (4, 3), dtype)), rng.random((4, 1)) > 0.5, 2.0), desc="non-contiguous")
    # large enough for the branch-free select: a causal mask broadcast over (batch, heads, T, T)
    # filled with -inf (attention), and an irregular mask
    causal = np.triu(np.ones((24, 24), dtype=bool), 1)
    yield SampleInput((rand(rng, (2, 4, 24, 24), dtype), causal, -np.inf), desc="large, causal mask", grad_args=())
    yield SampleInput((rand(rng, (70, 80), dtype), rng.random((70, 80)) > 0.5, 0.0), desc="large, irregular mask",
                      grad_args=())


def _one_hot_ref(indices, depth, on_value=1, off_value=0, axis=-1):
    out = np.full(indices.shape + (depth,), off_value, dtype=np.float64)
    for pos in np.ndindex(*indices.shape):
        if 0 <= indices[pos] < depth:
            out[pos + (indices[pos],)] = on_value
    return np.moveaxis(out, -1, axis)


def _one_hot_samples(rng, dtype):
    yield SampleInput((np.array([0, 2, 1, 5, -1]), 3, np.array(1.0, dtype), np.array(0.0, dtype)),
                      desc="out-of-range rows are off")
    yield SampleInput((rng.integers(0, 4, (2, 3)), 4, np.array(2.0, dtype), np.array(-1.0, dtype)), {"axis": 0})
    yield SampleInput((np.array(1), 3, np.array(1.0, dtype), np.array(0.0, dtype)), desc="0-d indices")


def _embedding_samples(rng, dtype):
    yield SampleInput((np.array([[0, 2, 2], [4, 0, 1]]), rand(rng, (5, 3), dtype)), desc="repeated ids")
    yield SampleInput((np.array(3), rand(rng, (5, 2), dtype)), desc="0-d ids")
    yield SampleInput((np.array([1, 1, 1]), noncontig(rand(rng, (4, 3), dtype))), desc="non-contiguous")


register(
    OpInfo("getitem", ops.getitem, lambda x, index: x[index], _getitem_samples, dtypes=ALL),
    OpInfo("setitem", _setitem_op, _setitem_ref, _setitem_samples, dtypes=ALL),
    OpInfo("gather", ops.gather, _gather_ref, _gather_samples, dtypes=ALL),
    OpInfo("index_select", ops.index_select, lambda x, axis, index: np.take(x, index, axis), _index_select_samples,
           dtypes=F, primitive="gather"),
    OpInfo("gather_elements", ops.gather_elements, _gather_elements_ref, _gather_elements_samples, dtypes=ALL),
    OpInfo("gather_d", ops.gather_d, _gather_elements_ref, _gather_elements_samples, dtypes=F,
           primitive="gather_elements"),
    OpInfo("scatter", ops.scatter, _scatter_ref, _scatter_samples, dtypes=ALL),
    OpInfo("masked_fill", ops.masked_fill, lambda x, m, v: np.where(m, v, x), _masked_fill_samples, dtypes=ALL),
    OpInfo("one_hot", ops.one_hot, _one_hot_ref, _one_hot_samples, dtypes=ALL, differentiable=False),
    OpInfo("embedding", ops.embedding, lambda ids, w: w[ids], _embedding_samples, dtypes=ALL),
)
