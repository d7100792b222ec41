"""Op table: gather_nd, scatter_nd, tensor_scatter_{update,add,sub,mul,div,max,min}, masked_select.
References are explicit loops over index tuples (no shared code with the fancy-indexing kernels);
samples repeat index tuples where the op's gradient must then accumulate."""
import numpy as np

from ... import ops
from ...common import dtype as mstype
from ..opinfo import OpInfo, SampleInput, rand, register

F = (mstype.float32, mstype.float64)
ALL = (mstype.float16, mstype.float32, mstype.float64)


def _gather_nd_ref(x, idx):
    k = idx.shape[-1]
    flat = idx.reshape(-1, k)
    out = np.stack([x[tuple(row)] for row in flat]) if flat.size else np.zeros((0,) + x.shape[k:])
    return out.reshape(idx.shape[:-1] + x.shape[k:])


def _gather_nd_samples(rng, dtype):
    x = rand(rng, (3, 4), dtype)
    yield SampleInput((x, np.array([[0, 1], [2, 3], [0, 1]], np.int32)), desc="elements, repeated")
    yield SampleInput((x, np.array([[2], [0]], np.int64)), desc="rows")
    yield SampleInput((rand(rng, (2, 3, 4), dtype), np.array([[[1, 2]], [[0, 0]]], np.int32)), desc="batched tuples")


def _scatter_nd_ref(idx, upd, shape):
    out = np.zeros(shape, dtype=np.float64)
    k = idx.shape[-1]
    for row, u in zip(idx.reshape(-1, k), upd.reshape((-1,) + tuple(shape[k:]))):
        out[tuple(row)] += u
    return out


def _scatter_nd_samples(rng, dtype):
    yield SampleInput((np.array([[0], [2], [0]], np.int32), rand(rng, (3, 2), dtype), (4, 2)), desc="rows, repeated",
                      grad_args=(1,))
    yield SampleInput((np.array([[0, 1], [2, 0]], np.int64), rand(rng, (2,), dtype), (3, 2)), desc="elements",
                      grad_args=(1,))


def _ts_ref(reduction):
    fn = {"update": lambda a, u: u, "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
          "max": np.maximum, "min": np.minimum}[reduction]

    def ref(x, idx, upd):
        out = x.astype(np.float64).copy()
        k = idx.shape[-1]
        for row, u in zip(idx.reshape(-1, k), upd.reshape((-1,) + x.shape[k:])):
            out[tuple(row)] = fn(out[tuple(row)], u)
        return out
    return ref


def _ts_samples(reduction):
    def samples(rng, dtype):
        x = rand(rng, (4, 3), dtype, 0.5, 2.0)
        unique_rows = np.array([[2], [0]], np.int32)
        yield SampleInput((x, unique_rows, rand(rng, (2, 3), dtype, 0.5, 2.0)), desc="rows", grad_args=(0, 2))
        yield SampleInput((x, np.array([[1, 2], [3, 0]], np.int64), rand(rng, (2,), dtype, 0.5, 2.0)),
                          desc="elements", grad_args=(0, 2))
        if reduction in ("add", "sub"):
            yield SampleInput((x, np.array([[1], [1], [3]], np.int32), rand(rng, (3, 3), dtype)), desc="repeated rows",
                              grad_args=(0, 2))
    return samples


def _masked_select_samples(rng, dtype):
    yield SampleInput((rand(rng, (3, 4), dtype), rng.random((3, 4)) > 0.5), grad_args=(0,))
    yield SampleInput((rand(rng, (3, 4), dtype), np.array([True, False, True, True])), desc="mask broadcasts",
                      grad_args=(0,))
    yield SampleInput((rand(rng, (4,), dtype), rng.random((2, 4)) > 0.5), desc="input broadcasts", grad_args=(0,))


def _masked_select_ref(x, m):
    xb, mb = np.broadcast_arrays(x, m)
    return xb[mb]


register(
    OpInfo("gather_nd", ops.gather_nd, _gather_nd_ref, _gather_nd_samples, dtypes=ALL),
    OpInfo("scatter_nd", ops.scatter_nd, _scatter_nd_ref, _scatter_nd_samples, dtypes=ALL),
    *[OpInfo(f"tensor_scatter_{r}", getattr(ops, f"tensor_scatter_{r}"), _ts_ref(r), _ts_samples(r), dtypes=F,
             primitive="tensor_scatter") for r in ("update", "add", "sub", "mul", "div", "max", "min")],
    OpInfo("masked_select", ops.masked_select, _masked_select_ref, _masked_select_samples, dtypes=ALL,
           primitive="getitem"),
)
