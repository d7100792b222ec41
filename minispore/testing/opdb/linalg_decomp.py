"""Op table: det, slogdet, logdet, inverse, pinv, cholesky (+ inverse, solve), qr, svd, lstsq,
matrix_power, matrix_exp. References are NumPy/SciPy float64 calls. Decompositions whose outputs
have a sign freedom (qr, svd) are checked through sign-independent functions of their outputs
(Q R, |Q|, s, U diag(s) V^T); the Cholesky family is fed A A^T + n I so finite differences stay
on symmetric positive-definite matrices."""
import numpy as np
import scipy.linalg

from ... import ops
from ...common import dtype as mstype
from ..opinfo import OpInfo, SampleInput, rand, register

F = (mstype.float32, mstype.float64)
_TOLS = {mstype.float32: (1e-4, 1e-4)}


def _well_conditioned(rng, shape, dtype):
    n = shape[-1]
    return (rand(rng, shape, dtype, -1, 1) + 3 * np.eye(n, dtype=dtype)).astype(dtype)


def _square_samples(rng, dtype):
    yield SampleInput((_well_conditioned(rng, (3, 3), dtype),))
    yield SampleInput((_well_conditioned(rng, (2, 4, 4), dtype),), desc="batched")
    yield SampleInput((-_well_conditioned(rng, (2, 2), dtype),), desc="sign flip")


def _spd(x):
    return x @ np.swapaxes(x, -1, -2) + x.shape[-1] * np.eye(x.shape[-1])


def _spd_ms(x):
    return ops.matmul(x, ops.swapaxes(x, -1, -2)) + ops.eye(x.shape[-1], dtype=x.dtype) * float(x.shape[-1])


def _chol_samples(rng, dtype):
    yield SampleInput((rand(rng, (3, 3), dtype),))
    yield SampleInput((rand(rng, (2, 3, 3), dtype),), desc="batched")
    yield SampleInput((rand(rng, (3, 3), dtype), True), desc="upper")


def _chol_ref(x, upper=False):
    lo = np.linalg.cholesky(_spd(x))
    return np.swapaxes(lo, -1, -2) if upper else lo


def _chol_solve_samples(rng, dtype):
    yield SampleInput((rand(rng, (3, 2), dtype), rand(rng, (3, 3), dtype)))
    yield SampleInput((rand(rng, (3, 1), dtype), rand(rng, (3, 3), dtype), True), desc="upper")


def _chol_solve_op(b, x, upper=False):
    return ops.cholesky_solve(b, ops.cholesky(_spd_ms(x), upper), upper)


def _chol_inv_op(x, upper=False):
    return ops.cholesky_inverse(ops.cholesky(_spd_ms(x), upper), upper)


def _rect_samples(rng, dtype):
    yield SampleInput((rand(rng, (4, 3), dtype),))
    yield SampleInput((rand(rng, (2, 3, 3), dtype),), desc="batched square")


def _pinv_samples(rng, dtype):
    yield SampleInput((rand(rng, (4, 3), dtype),))
    yield SampleInput((rand(rng, (2, 4), dtype),), desc="wide")
    yield SampleInput((rand(rng, (2, 3, 3), dtype) + 2 * np.eye(3, dtype=dtype),), desc="batched")


def _qr_op(x, mode="reduced"):
    q, r = ops.qr(x, mode)
    return ops.matmul(q, r), ops.abs(q), ops.abs(r)


def _qr_ref(x, mode="reduced"):
    q, r = np.linalg.qr(x, mode=mode)
    return q @ r, np.abs(q), np.abs(r)


def _svd_op(x, full_matrices=False):
    s, u, v = ops.svd(x, full_matrices=full_matrices)
    k = s.shape[-1]
    uk = u if u.shape[-1] == k else u[..., :k]
    vk = v if v.shape[-1] == k else v[..., :k]
    return s, ops.matmul(uk * ops.expand_dims(s, -2), ops.swapaxes(vk, -1, -2)), ops.abs(u), ops.abs(v)


def _svd_ref(x, full_matrices=False):
    u, s, vh = np.linalg.svd(x, full_matrices=full_matrices)
    return s, x, np.abs(u), np.abs(np.swapaxes(vh, -1, -2))


def _svd_samples(rng, dtype):
    yield SampleInput((rand(rng, (4, 3), dtype),))
    yield SampleInput((rand(rng, (3, 4), dtype),), desc="wide")
    yield SampleInput((rand(rng, (2, 3, 3), dtype),), desc="batched")


def _svd_vals_op(x):
    return ops.svd(x, compute_uv=False)


def _mpow_samples(rng, dtype):
    for n in (0, 1, 3, -2):
        yield SampleInput((_well_conditioned(rng, (3, 3), dtype) / 3, n), desc=f"n={n}")


def _mexp_samples(rng, dtype):
    yield SampleInput((rand(rng, (3, 3), dtype, -1, 1),))
    yield SampleInput((rand(rng, (2, 2, 2), dtype, -1, 1),), desc="batched")


def _lstsq_samples(rng, dtype):
    yield SampleInput((rand(rng, (5, 3), dtype), rand(rng, (5, 2), dtype)))


register(
    OpInfo("det", ops.det, np.linalg.det, _square_samples, dtypes=F, tols=_TOLS),
    OpInfo("slogdet", ops.slogdet, lambda a: tuple(np.linalg.slogdet(a)), _square_samples, dtypes=F, tols=_TOLS,
           grad_output=1),
    OpInfo("logdet", ops.logdet, lambda a: np.log(np.linalg.det(a)),
           lambda rng, dt: [SampleInput((_well_conditioned(rng, (3, 3), dt),))], dtypes=F, tols=_TOLS,
           primitive="slogdet"),
    OpInfo("inverse", ops.inverse, np.linalg.inv, _square_samples, dtypes=F, tols=_TOLS),
    OpInfo("pinv", ops.pinv, np.linalg.pinv, _pinv_samples, dtypes=F, tols=_TOLS),
    OpInfo("cholesky", lambda x, upper=False: ops.cholesky(_spd_ms(x), upper), _chol_ref, _chol_samples, dtypes=F,
           tols=_TOLS),
    OpInfo("cholesky_solve", _chol_solve_op, lambda b, x, upper=False: np.linalg.solve(_spd(x), b),
           _chol_solve_samples, dtypes=F, tols=_TOLS, primitive="inverse"),
    OpInfo("cholesky_inverse", _chol_inv_op, lambda x, upper=False: np.linalg.inv(_spd(x)),
           lambda rng, dt: [SampleInput((rand(rng, (3, 3), dt),)), SampleInput((rand(rng, (3, 3), dt), True))],
           dtypes=F, tols=_TOLS, primitive="inverse"),
    OpInfo("qr", _qr_op, _qr_ref, _rect_samples, dtypes=F, tols=_TOLS),
    OpInfo("qr_complete", lambda x: _qr_op(x, "complete"), lambda x: _qr_ref(x, "complete"),
           lambda rng, dt: [SampleInput((rand(rng, (3, 3), dt),))], dtypes=F, tols=_TOLS, primitive="qr"),
    OpInfo("svd", _svd_op, _svd_ref, _svd_samples, dtypes=F, tols=_TOLS),
    # full_matrices: the extra columns of U are any orthonormal completion (no gradient), so only
    # s and the reconstruction from the first k columns are compared
    OpInfo("svd_full", lambda x: _svd_op(x, True)[:2], lambda x: _svd_ref(x, True)[:2],
           lambda rng, dt: [SampleInput((rand(rng, (4, 3), dt),))], dtypes=F, tols=_TOLS, primitive="svd"),
    OpInfo("svd_values", _svd_vals_op, lambda x: np.linalg.svd(x, compute_uv=False), _svd_samples, dtypes=F,
           tols=_TOLS, primitive="svd"),
    OpInfo("lstsq", ops.lstsq, lambda a, b: np.linalg.lstsq(a, b, rcond=None)[0], _lstsq_samples, dtypes=F,
           tols=_TOLS, primitive="pinv"),
    OpInfo("matrix_power", ops.matrix_power, np.linalg.matrix_power, _mpow_samples, dtypes=F, tols=_TOLS,
           primitive="matmul"),
    OpInfo("matrix_exp", ops.matrix_exp, lambda a: scipy.linalg.expm(a), _mexp_samples, dtypes=F, tols=_TOLS),
)
