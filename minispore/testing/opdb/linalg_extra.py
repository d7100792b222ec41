"""Op table: mm, outer, addmm, dense, mv, addmv, addr, baddbmm, kron, cross, trace, diag (float64
references through NumPy's own matmul/outer/kron/cross/trace)."""
import numpy as np

from ... import ops
from ...common import dtype as mstype
from ..opinfo import OpInfo, SampleInput, noncontig, rand, register

F = (mstype.float32, mstype.float64)
F16 = (mstype.float16, mstype.float32, mstype.float64)
_TOLS = {mstype.float16: (5e-3, 5e-3), mstype.float32: (1e-5, 1e-5)}


def _mm_samples(rng, dtype):
    yield SampleInput((rand(rng, (3, 4), dtype), rand(rng, (4, 2), dtype)))
    yield SampleInput((noncontig(rand(rng, (3, 4), dtype)), rand(rng, (4, 5), dtype)), desc="non-contiguous")
    yield SampleInput((rand(rng, (0, 4), dtype), rand(rng, (4, 2), dtype)), desc="empty")


def _outer_samples(rng, dtype):
    yield SampleInput((rand(rng, (3,), dtype), rand(rng, (4,), dtype)))
    yield SampleInput((rand(rng, (2, 2), dtype), rand(rng, (3,), dtype)), desc="2-D input is flattened")
    yield SampleInput((rand(rng, (), dtype), rand(rng, (3,), dtype)), desc="0-d")


def _addmm_samples(rng, dtype):
    yield SampleInput((rand(rng, (3, 2), dtype), rand(rng, (3, 4), dtype), rand(rng, (4, 2), dtype)))
    yield SampleInput((rand(rng, (2,), dtype), rand(rng, (3, 4), dtype), rand(rng, (4, 2), dtype)),
                      {"beta": 0.5, "alpha": -2.0}, desc="broadcast input, beta/alpha")


def _addmm_ref(x, a, b, beta=1, alpha=1):
    return beta * x + alpha * (a @ b)


def _dense_samples(rng, dtype):
    yield SampleInput((rand(rng, (3, 4), dtype), rand(rng, (5, 4), dtype), rand(rng, (5,), dtype)))
    yield SampleInput((rand(rng, (2, 3, 4), dtype), rand(rng, (5, 4), dtype)), desc="3-D input, no bias")
    yield SampleInput((rand(rng, (3, 4), dtype), rand(rng, (4,), dtype)), desc="1-D weight")
    yield SampleInput((rand(rng, (4,), dtype), rand(rng, (5, 4), dtype), rand(rng, (5,), dtype)), desc="1-D input")


def _dense_ref(x, w, b=None):
    y = x @ w.T if w.ndim == 2 else x @ w
    return y if b is None else y + b


def _mv_samples(rng, dtype):
    yield SampleInput((rand(rng, (3, 4), dtype), rand(rng, (4,), dtype)))


def _addmv_samples(rng, dtype):
    yield SampleInput((rand(rng, (3,), dtype), rand(rng, (3, 4), dtype), rand(rng, (4,), dtype)),
                      {"beta": 2.0, "alpha": 0.5})


def _addr_samples(rng, dtype):
    yield SampleInput((rand(rng, (3, 4), dtype), rand(rng, (3,), dtype), rand(rng, (4,), dtype)),
                      {"beta": 0.5, "alpha": 3.0})


def _baddbmm_samples(rng, dtype):
    yield SampleInput((rand(rng, (2, 3, 2), dtype), rand(rng, (2, 3, 4), dtype), rand(rng, (2, 4, 2), dtype), 0.5, 2.0))


def _kron_samples(rng, dtype):
    yield SampleInput((rand(rng, (2, 3), dtype), rand(rng, (3, 2), dtype)))
    yield SampleInput((rand(rng, (2,), dtype), rand(rng, (3, 2), dtype)), desc="ranks differ")


def _cross_samples(rng, dtype):
    yield SampleInput((rand(rng, (4, 3), dtype), rand(rng, (4, 3), dtype)))
    yield SampleInput((rand(rng, (3, 5), dtype), rand(rng, (3, 5), dtype), 0), desc="dim 0")


def _cross_ref(a, b, dim=None):
    if dim is None:
        dim = next(i for i, s in enumerate(a.shape) if s == 3)
    return np.cross(a, b, axisa=dim, axisb=dim, axisc=dim)


def _trace_samples(rng, dtype):
    yield SampleInput((rand(rng, (3, 4), dtype),))
    yield SampleInput((noncontig(rand(rng, (4, 4), dtype)),), desc="non-contiguous")


def _diag_samples(rng, dtype):
    yield SampleInput((rand(rng, (3,), dtype),))
    yield SampleInput((rand(rng, (2, 3), dtype),), desc="rank 2 -> rank 4")


def _diag_ref(x):
    n = x.size
    return np.diag(x.reshape(-1)).reshape(x.shape + x.shape) if n else np.zeros(x.shape * 2)


register(
    OpInfo("mm", ops.mm, np.matmul, _mm_samples, dtypes=F16, tols=_TOLS),
    OpInfo("outer", ops.outer, lambda a, b: np.outer(a, b), _outer_samples, dtypes=F16, tols=_TOLS),
    OpInfo("addmm", ops.addmm, _addmm_ref, _addmm_samples, dtypes=F16, tols=_TOLS),
    OpInfo("dense", ops.dense, _dense_ref, _dense_samples, dtypes=F16, tols=_TOLS),
    OpInfo("mv", ops.mv, np.matmul, _mv_samples, dtypes=F, primitive="matmul"),
    OpInfo("addmv", ops.addmv, lambda x, m, v, beta=1, alpha=1: beta * x + alpha * (m @ v), _addmv_samples,
           dtypes=F, primitive="matmul"),
    OpInfo("addr", ops.addr, lambda x, a, b, beta=1, alpha=1: beta * x + alpha * np.outer(a, b), _addr_samples,
           dtypes=F, primitive="outer"),
    OpInfo("baddbmm", ops.baddbmm, lambda x, a, b, beta=1, alpha=1: beta * x + alpha * (a @ b), _baddbmm_samples,
           dtypes=F, primitive="bmm"),
    OpInfo("kron", ops.kron, np.kron, _kron_samples, dtypes=F, primitive="mul"),
    OpInfo("cross", ops.cross, _cross_ref, _cross_samples, dtypes=F16, tols=_TOLS),
    OpInfo("trace", ops.trace, np.trace, _trace_samples, dtypes=F16, tols=_TOLS),
    OpInfo("diag", ops.diag, _diag_ref, _diag_samples, dtypes=F16),
)
