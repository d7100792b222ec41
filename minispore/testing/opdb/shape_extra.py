"""Op table: squeeze, expand_dims/unsqueeze, flatten, concat, stack, split, chunk, tile,
repeat_interleave, flip, tril/triu, pad.

References are written with plain NumPy (np.squeeze, np.concatenate, np.pad, ...), independently of
the kernels; pad's reference builds the padded array by explicit index arithmetic."""
import numpy as np

from ... import ops
from ...common import dtype as mstype
from ..opinfo import OpInfo, SampleInput, noncontig, rand, register

ALL = (mstype.float16, mstype.bfloat16, mstype.float32, mstype.float64)
F = (mstype.float32, mstype.float64)


def _squeeze_samples(rng, dtype):
    yield SampleInput((rand(rng, (1, 3, 1, 2), dtype),), desc="all size-1 dims")
    yield SampleInput((rand(rng, (1, 3, 1, 2), dtype),), {"axis": 2})
    yield SampleInput((rand(rng, (1, 3, 1, 2), dtype),), {"axis": (0, -2)})
    yield SampleInput((rand(rng, (), dtype),), desc="0-d")
    yield SampleInput((noncontig(rand(rng, (3, 1), dtype)),), {"axis": 1}, desc="non-contiguous")


def _squeeze_ref(a, axis=None):
    return np.squeeze(a, axis)


def _expand_samples(rng, dtype):
    yield SampleInput((rand(rng, (3, 4), dtype), 0))
    yield SampleInput((rand(rng, (3, 4), dtype), -1))
    yield SampleInput((rand(rng, (3, 4), dtype), 1))
    yield SampleInput((rand(rng, (), dtype), 0), desc="0-d")
    yield SampleInput((noncontig(rand(rng, (4, 3), dtype)), -2), desc="non-contiguous")


def _flatten_samples(rng, dtype):
    yield SampleInput((rand(rng, (2, 3, 4), dtype),), desc="default start_dim=1")
    yield SampleInput((rand(rng, (2, 3, 4, 5), dtype),), {"start_dim": 1, "end_dim": 2})
    yield SampleInput((rand(rng, (2, 3, 4), dtype),), {"start_dim": 0})
    yield SampleInput((rand(rng, (2, 3, 4), dtype), "F"), desc="column-major")
    yield SampleInput((rand(rng, (2, 3, 4), dtype),), {"start_dim": -2, "end_dim": -2}, desc="nothing to merge")
    yield SampleInput((rand(rng, (), dtype),), desc="0-d -> 1-d")
    yield SampleInput((noncontig(rand(rng, (4, 3), dtype)),), {"start_dim": 0}, desc="non-contiguous (copies)")


def _flatten_ref(a, order="C", start_dim=1, end_dim=-1):
    if a.ndim <= 1:
        return a.reshape(-1)
    if order == "F":
        a = a.T
    s, e = start_dim % a.ndim, end_dim % a.ndim
    return a.reshape(a.shape[:s] + (-1,) + a.shape[e + 1:])


def _concat_samples(rng, dtype):
    yield SampleInput((rand(rng, (2, 3), dtype), rand(rng, (4, 3), dtype)), {"axis": 0})
    yield SampleInput((rand(rng, (2, 3), dtype), rand(rng, (2, 1), dtype), rand(rng, (2, 2), dtype)), {"axis": -1})
    yield SampleInput((noncontig(rand(rng, (3, 2), dtype)), rand(rng, (3, 2), dtype)), {"axis": 1},
                      desc="non-contiguous")
    yield SampleInput((rand(rng, (3,), dtype),), {"axis": 0}, desc="one tensor")
    yield SampleInput((rand(rng, (2, 0), dtype), rand(rng, (2, 2), dtype)), {"axis": 1}, desc="empty piece")


def _stack_samples(rng, dtype):
    yield SampleInput((rand(rng, (2, 3), dtype), rand(rng, (2, 3), dtype)), {"axis": 0})
    yield SampleInput((rand(rng, (2, 3), dtype), rand(rng, (2, 3), dtype), rand(rng, (2, 3), dtype)), {"axis": -1})
    yield SampleInput((rand(rng, (), dtype), rand(rng, (), dtype)), {"axis": 0}, desc="0-d")
    yield SampleInput((noncontig(rand(rng, (3, 2), dtype)), rand(rng, (3, 2), dtype)), {"axis": 1},
                      desc="non-contiguous")


def _split_samples(rng, dtype):
    yield SampleInput((rand(rng, (6, 2), dtype), 2))
    yield SampleInput((rand(rng, (7, 2), dtype), 3), desc="last piece smaller")
    yield SampleInput((rand(rng, (2, 6), dtype), (1, 0, 5)), {"axis": 1}, desc="sections with an empty piece")
    yield SampleInput((noncontig(rand(rng, (4, 5), dtype)), [2, 3]), {"axis": -1}, desc="non-contiguous")


def _split_ref(a, s, axis=0):
    n = a.shape[axis]
    if isinstance(s, int):
        s = [s] * (n // s) + ([n % s] if n % s else [])
    return tuple(np.split(a, np.cumsum(s)[:-1], axis=axis))


def _chunk_samples(rng, dtype):
    yield SampleInput((rand(rng, (6, 2), dtype), 3))
    yield SampleInput((rand(rng, (5, 2), dtype), 2), desc="uneven")
    yield SampleInput((rand(rng, (2, 3), dtype), 5), {"axis": 1}, desc="fewer pieces than asked")


def _chunk_ref(a, chunks, axis=0):
    n = a.shape[axis]
    size = -(-n // chunks)
    return tuple(np.take(a, np.arange(i, min(i + size, n)), axis=axis) for i in range(0, n, size))


def _tile_samples(rng, dtype):
    yield SampleInput((rand(rng, (2, 3), dtype), (2, 3)))
    yield SampleInput((rand(rng, (2, 3), dtype), (2,)), desc="short dims")
    yield SampleInput((rand(rng, (3,), dtype), (2, 1, 2)), desc="long dims")
    yield SampleInput((rand(rng, (), dtype), (3,)), desc="0-d")
    yield SampleInput((noncontig(rand(rng, (3, 2), dtype)), (1, 2)), desc="non-contiguous")


def _repeat_samples(rng, dtype):
    yield SampleInput((rand(rng, (2, 3), dtype), 2), desc="flattened")
    yield SampleInput((rand(rng, (2, 3), dtype), 3), {"axis": 1})
    yield SampleInput((rand(rng, (2, 3), dtype), [1, 0, 2]), {"axis": 1}, desc="per-entry counts")
    yield SampleInput((noncontig(rand(rng, (3, 2), dtype)), [2, 1, 3]), {"axis": 0}, desc="non-contiguous")


def _repeat_ref(a, repeats, axis=None):
    if axis is None:
        a, axis = a.reshape(-1), 0
    out = []
    reps = [repeats] * a.shape[axis] if isinstance(repeats, int) else repeats
    for i, r in enumerate(reps):
        out += [np.take(a, [i], axis=axis)] * r
    return np.concatenate(out, axis=axis)


def _flip_samples(rng, dtype):
    yield SampleInput((rand(rng, (2, 3, 4), dtype), (0, 2)))
    yield SampleInput((rand(rng, (5,), dtype), (-1,)))
    yield SampleInput((noncontig(rand(rng, (3, 4), dtype)), [1]), desc="non-contiguous")


def _flip_ref(a, dims):
    idx = [slice(None)] * a.ndim
    for d in dims:
        idx[d] = slice(None, None, -1)
    return a[tuple(idx)]


def _tri_samples(rng, dtype):
    yield SampleInput((rand(rng, (4, 4), dtype),))
    yield SampleInput((rand(rng, (3, 5), dtype),), {"diagonal": 1})
    yield SampleInput((rand(rng, (2, 4, 3), dtype),), {"diagonal": -1}, desc="batched")
    yield SampleInput((noncontig(rand(rng, (4, 3), dtype)),), {"diagonal": 2}, desc="non-contiguous")


def _tri_ref(lower):
    def ref(a, diagonal=0):
        r, c = np.indices(a.shape[-2:])
        keep = (c - r <= diagonal) if lower else (c - r >= diagonal)
        return np.where(keep, a, 0)
    return ref


def _pad_samples(rng, dtype):
    yield SampleInput((rand(rng, (2, 3), dtype), (1, 2)))
    yield SampleInput((rand(rng, (2, 3, 4), dtype), (1, 0, 2, 1)), {"value": 1.5}, desc="two dims, value")
    yield SampleInput((rand(rng, (3, 5), dtype), (-1, 2, 1, -2)), desc="negative pads crop")
    yield SampleInput((rand(rng, (2, 4, 5), dtype), (2, 3, 1, 2)), {"mode": "reflect"})
    yield SampleInput((rand(rng, (2, 3, 4), dtype), (3, 1, 0, 2)), {"mode": "replicate"})
    yield SampleInput((rand(rng, (2, 3, 4), dtype), (4, 2, 1, 3)), {"mode": "circular"})
    yield SampleInput((noncontig(rand(rng, (4, 3), dtype)), (1, 1)), {"mode": "reflect"}, desc="non-contiguous")


def _pad_ref(a, padding, mode="constant", value=None):
    """Each output entry reads input entry src(i) per dim (or is the fill value), by index arithmetic."""
    out = a
    for i in range(len(padding) // 2):
        d = a.ndim - 1 - i
        lo, hi = padding[2 * i], padding[2 * i + 1]
        if lo == 0 and hi == 0:
            continue
        n = out.shape[d]
        pos = np.arange(-lo, n + hi)                      # source position of each output entry
        if mode == "constant":
            inside = (pos >= 0) & (pos < n)
            taken = np.take(out, np.clip(pos, 0, n - 1), axis=d)
            shape = [1] * out.ndim
            shape[d] = len(pos)
            out = np.where(inside.reshape(shape), taken, 0.0 if value is None else value)
            continue
        if mode == "reflect":
            period = 2 * (n - 1)
            m = np.mod(pos, period)
            src = np.where(m < n, m, period - m)
        elif mode == "replicate":
            src = np.clip(pos, 0, n - 1)
        else:
            src = np.mod(pos, n)
        out = np.take(out, src, axis=d)
    return out


register(
    OpInfo("squeeze", ops.squeeze, _squeeze_ref, _squeeze_samples, dtypes=ALL),
    OpInfo("expand_dims", ops.expand_dims, np.expand_dims, _expand_samples, dtypes=ALL),
    OpInfo("unsqueeze", ops.unsqueeze, np.expand_dims, _expand_samples, dtypes=F, primitive="expand_dims"),
    OpInfo("flatten", ops.flatten, _flatten_ref, _flatten_samples, dtypes=ALL),
    OpInfo("concat", lambda *ts, axis=0: ops.concat(ts, axis), lambda *a, axis=0: np.concatenate(a, axis),
           _concat_samples, dtypes=ALL),
    OpInfo("cat", lambda *ts, axis=0: ops.cat(list(ts), axis), lambda *a, axis=0: np.concatenate(a, axis),
           _concat_samples, dtypes=F, primitive="concat"),
    OpInfo("stack", lambda *ts, axis=0: ops.stack(ts, axis), lambda *a, axis=0: np.stack(a, axis),
           _stack_samples, dtypes=ALL),
    OpInfo("split", ops.split, _split_ref, _split_samples, dtypes=ALL),
    OpInfo("chunk", ops.chunk, _chunk_ref, _chunk_samples, dtypes=F, primitive="split"),
    OpInfo("tile", ops.tile, np.tile, _tile_samples, dtypes=ALL),
    OpInfo("repeat_interleave", ops.repeat_interleave, _repeat_ref, _repeat_samples, dtypes=ALL),
    OpInfo("flip", ops.flip, _flip_ref, _flip_samples, dtypes=ALL),
    OpInfo("tril", ops.tril, _tri_ref(True), _tri_samples, dtypes=ALL),
    OpInfo("triu", ops.triu, _tri_ref(False), _tri_samples, dtypes=ALL),
    OpInfo("pad", ops.pad, _pad_ref, _pad_samples, dtypes=ALL),
)
