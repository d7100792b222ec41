"""Matrix functions and decompositions in MindSpore 2.x's names: det, slogdet, logdet, inverse, pinv,
cholesky, cholesky_inverse, cholesky_solve, qr, svd, lstsq, matrix_power and matrix_exp. All work
on the last two dims, with any leading batch dims.

Kernels are NumPy's/SciPy's LAPACK calls (float16 computes in float32). Inputs must be floating, as
MindSpore's CPU kernels require. Backward rules are the standard matrix-calculus formulas, written
with minispore ops (matmul, transpose, inverse, ...), so they differentiate again:

* det:      dA = dout * det(A) * inv(A)^T;  slogdet: dA = dlogabsdet * inv(A)^T (the sign has none)
* inverse:  dA = -inv^T @ dout @ inv^T
* pinv:     Golub and Pereyra's formula for the derivative of a pseudo-inverse (exact where the
            rank does not change)
* cholesky: dA = sym(L^-T Phi(L^T dL) L^-1) (Murray 2016), Phi = lower triangle with half diagonal
* qr:       dA = [dQ + Q sym(triu(M))] R^-T, M = dR R^T - Q^T dQ (tall and square inputs only)
* svd:      the full formula through S, U and V (distinct singular values; for full_matrices the
            extra columns of U/V carry no gradient)
* matrix_exp: the adjoint is the upper-right block of expm([[A^T, G], [0, A^T]])

logdet, cholesky_inverse, cholesky_solve, lstsq and matrix_power are composites of these (their
docstrings say so). Eigen-decompositions (eig, eigvals) return complex tensors in MindSpore and
minispore has no complex dtypes, so they are not provided.
"""
from __future__ import annotations

import numbers

import numpy as np
import scipy.linalg

from ...common import dtype as mstype
from .. import _check as C
from ..primitive import AbstractTensor, defprim
from .activation import upcast_half
from .elementwise import add, div, log, mul, neg, sub
from .linalg import matmul, swap_last
from .shape import reshape
from .shape_extra import concat, tril, triu


def _matrix(op, arg, x, square=True):
    C.tensor(op, arg, x)
    if not x.dtype.is_floating:
        raise C.OpTypeError(op, f"'{arg}' with a floating dtype (Float16, Float32, Float64)", str(x.dtype))
    if len(x.shape) < 2:
        raise C.OpValueError(op, f"'{arg}' with at least 2 dimensions (..., M, N)", f"shape {tuple(x.shape)}")
    if square and x.shape[-1] != x.shape[-2]:
        raise C.OpValueError(op, f"square matrices in '{arg}' (..., N, N)", f"shape {tuple(x.shape)}")
    return tuple(x.shape)


# What LAPACK's refusals mean, in minispore's words: (words in NumPy's message, expected, got)
_LINALG_REFUSALS = (
    ("singular", "invertible (non-singular) matrices", "a singular matrix"),
    ("positive definite", "symmetric positive-definite matrices", "a matrix that is not positive definite"),
    ("converge", "matrices whose decomposition converges", "one whose iteration did not converge"),
)


def _lapack(op, fn, finite_only=False):
    """Run a NumPy/SciPy linear-algebra call; a LinAlgError (a singular or indefinite matrix: a
    property of the values, which inference cannot see) becomes a minispore error naming the op.

    `finite_only` (the SVD-based kernels): refuse NaN/inf entries first. LAPACK's SVD may never
    return on a matrix with inf (dbdsqr loops), and no alarm can interrupt a C call."""
    def kernel(*args, **attrs):
        arrays = [upcast_half(a) if isinstance(a, np.ndarray) else a for a in args]
        if finite_only and not all(np.isfinite(a).all() for a in arrays if isinstance(a, np.ndarray)):
            raise C.OpValueError(op, "finite matrix entries (an SVD of NaN or inf does not converge)",
                                 "NaN or inf entries")
        try:
            return fn(*arrays, **attrs)
        except np.linalg.LinAlgError as e:
            text = str(e).lower()
            expected, got = next(((x, g) for key, x, g in _LINALG_REFUSALS if key in text),
                                 ("a matrix the decomposition applies to", "one LAPACK could not factor"))
            raise C.OpValueError(op, expected, got) from None
    return kernel


def _eye_like(x):
    n = x.shape[-1]
    from ...common.tensor import Tensor
    return Tensor(np.eye(n, dtype=x.dtype.np))


def _expand2(t):
    return reshape(t, tuple(t.shape) + (1, 1))


# ------------------------------------------------------------------------------------------------
# det / slogdet / logdet
def _det_infer(x):
    s = _matrix("det", "input", x)
    return AbstractTensor(s[:-2], x.dtype)


def _det_bprop(inputs, out, dout):
    return (mul(_expand2(mul(dout, out)), swap_last(inverse(inputs[0]))),)


_det = defprim("det", _det_infer, _lapack("det", np.linalg.det), _det_bprop, doc="determinant")


def _slogdet_infer(x):
    s = _matrix("slogdet", "input", x)
    a = AbstractTensor(s[:-2], x.dtype)
    return (a, a)


def _slogdet_kernel(a):
    sign, lad = np.linalg.slogdet(a)
    return np.asarray(sign), np.asarray(lad)


def _slogdet_bprop(inputs, out, dout):
    return (mul(_expand2(dout[1]), swap_last(inverse(inputs[0]))),)


_slogdet = defprim("slogdet", _slogdet_infer, _lapack("slogdet", _slogdet_kernel), _slogdet_bprop,
                   doc="(sign, log |det|)")


def det(input):
    """`ops.det(input)`: the determinant of each (..., N, N) matrix (floating inputs)."""
    return _det(input)


def slogdet(input):
    """`ops.slogdet(input)`: (sign, log|det|) of each square matrix; the log is stable where det
    would under- or overflow. Only log|det| carries a gradient."""
    return _slogdet(input)


def logdet(input):
    """`ops.logdet(input)`: log(det(input)): NaN where the determinant is negative, -inf where it is
    0, as in MindSpore. A composite: log(sign) + log|det| from slogdet."""
    sign, lad = _slogdet(input)
    return add(log(sign), lad)


# ------------------------------------------------------------------------------------------------
# inverse / pinv
def _inverse_infer(x):
    _matrix("inverse", "input", x)
    return AbstractTensor(x.shape, x.dtype)


def _inverse_bprop(inputs, out, dout):
    t = swap_last(out)
    return (neg(matmul(matmul(t, dout), t)),)


_inverse = defprim("inverse", _inverse_infer, _lapack("inverse", np.linalg.inv), _inverse_bprop,
                   doc="matrix inverse")


def inverse(input):
    """`ops.inverse(input)`: the inverse of each square matrix (a singular matrix is an error)."""
    return _inverse(input)


def _pinv_infer(x, atol=None, rtol=None, hermitian=False):
    s = _matrix("pinv", "x", x, square=False)
    for arg, v in (("atol", atol), ("rtol", rtol)):
        if v is not None and (not isinstance(v, numbers.Real) or isinstance(v, bool) or v < 0):
            raise C.OpValueError("pinv", f"'{arg}' a non-negative float or None", repr(v))
    if not isinstance(hermitian, bool):
        raise C.OpTypeError("pinv", "'hermitian' to be a bool", type(hermitian).__name__)
    return AbstractTensor(s[:-2] + (s[-1], s[-2]), x.dtype)


def _pinv_kernel(a, atol=None, rtol=None, hermitian=False):
    # singular values at most max(atol, rtol * largest) are treated as zero (torch/MindSpore rule;
    # with neither given, rtol = eps * max(M, N))
    u, s, vh = np.linalg.svd(a, full_matrices=False)
    if rtol is None:
        rtol = np.finfo(a.dtype).eps * max(a.shape[-2:]) if atol is None else 0.0
    smax = s.max(axis=-1, keepdims=True) if s.shape[-1] else np.zeros(s.shape[:-1] + (1,), a.dtype)
    cutoff = np.maximum(atol or 0.0, rtol * smax)
    with np.errstate(divide="ignore"):
        sinv = np.where(s > cutoff, 1.0 / np.where(s > cutoff, s, 1.0), 0.0)
    return np.swapaxes(vh, -1, -2) @ (sinv[..., :, None] * np.swapaxes(u, -1, -2))


def _pinv_bprop(inputs, out, dout, atol=None, rtol=None, hermitian=False):
    a, p, g = inputs[0], out, dout
    pt = swap_last(p)
    m, n = a.shape[-2], a.shape[-1]
    from ...common.tensor import Tensor
    eye_m, eye_n = Tensor(np.eye(m, dtype=a.dtype.np)), Tensor(np.eye(n, dtype=a.dtype.np))
    gt = swap_last(g)
    # the three terms of d(A+) = -A+ dA A+ + A+ A+^T dA^T (I - A A+) + (I - A+ A) dA^T A+^T A+, transposed
    term1 = neg(matmul(matmul(pt, g), pt))
    term2 = matmul(matmul(sub(eye_m, matmul(a, p)), gt), matmul(p, pt))
    term3 = matmul(matmul(pt, p), matmul(gt, sub(eye_n, matmul(p, a))))
    return (add(add(term1, term2), term3),)


_pinv = defprim("pinv", _pinv_infer, _lapack("pinv", _pinv_kernel, finite_only=True), _pinv_bprop,
                doc="Moore-Penrose pseudo-inverse")


def pinv(x, *, atol=None, rtol=None, hermitian=False):
    """`ops.pinv(x, *, atol=None, rtol=None, hermitian=False)`: the pseudo-inverse of each (..., M, N)
    matrix, through the SVD; singular values <= max(atol, rtol * sigma_max) count as zero (default
    rtol = eps * max(M, N)). `hermitian` is accepted (the SVD route is exact for symmetric input)."""
    return _pinv(x, atol=atol, rtol=rtol, hermitian=hermitian)


# ------------------------------------------------------------------------------------------------
# cholesky and its composites
def _chol_infer(x, upper=False):
    _matrix("cholesky", "input_x", x)
    if not isinstance(upper, bool):
        raise C.OpTypeError("cholesky", "'upper' to be a bool", type(upper).__name__)
    return AbstractTensor(x.shape, x.dtype)


def _chol_kernel(a, upper=False):
    lo = np.linalg.cholesky(a)
    return np.swapaxes(lo, -1, -2).copy() if upper else lo


def _chol_bprop(inputs, out, dout, upper=False):
    lo = swap_last(out) if upper else out
    g = swap_last(dout) if upper else dout
    phi = tril(matmul(swap_last(lo), g))
    eye = _eye_like(lo)
    phi = sub(phi, mul(mul(phi, eye), 0.5))              # halve the diagonal
    linv = inverse(lo)
    ga = matmul(matmul(swap_last(linv), phi), linv)
    return (mul(add(ga, swap_last(ga)), 0.5),)


_cholesky = defprim("cholesky", _chol_infer, _lapack("cholesky", _chol_kernel), _chol_bprop,
                    doc="Cholesky factor of a symmetric positive-definite matrix")


def cholesky(input_x, upper=False):
    """`ops.cholesky(input_x, upper=False)`: L with A = L L^T (lower), or U with A = U^T U when
    upper=True, for symmetric positive-definite A (only its lower triangle is read). A matrix that
    is not positive definite is an OpValueError."""
    return _cholesky(input_x, upper=upper)


def cholesky_inverse(input_x, upper=False):
    """`ops.cholesky_inverse(input_x, upper=False)`: inv(A) from A's Cholesky factor (A = L L^T, or
    U^T U when upper). A composite: inverse of the reassembled matrix."""
    _matrix("cholesky_inverse", "input_x", input_x)
    f = input_x
    a = matmul(swap_last(f), f) if C.bool_attr("cholesky_inverse", "upper", upper) else matmul(f, swap_last(f))
    return inverse(a)


def cholesky_solve(input, input2, upper=False):
    """`ops.cholesky_solve(input, input2, upper=False)`: X with A X = input, where `input2` is A's
    Cholesky factor (lower, or upper when upper=True). A composite: cholesky_inverse(input2) @ input."""
    s2 = _matrix("cholesky_solve", "input2", input2)
    s1 = _matrix("cholesky_solve", "input", input, square=False)
    if s1[-2] != s2[-1]:
        raise C.OpValueError("cholesky_solve", f"'input' with {s2[-1]} rows (the factor's size)", f"shape {s1}")
    if input.dtype is not input2.dtype:
        raise C.OpTypeError("cholesky_solve", "'input' and 'input2' of one dtype", f"{input.dtype} and {input2.dtype}")
    return matmul(cholesky_inverse(input2, upper), input)


# ------------------------------------------------------------------------------------------------
# qr
def _qr_infer(x, mode="reduced"):
    s = _matrix("qr", "input", x, square=False)
    C.one_of("qr", "mode", mode, ("reduced", "complete"), "mode 'reduced' or 'complete'")
    m, n = s[-2], s[-1]
    k = min(m, n) if mode == "reduced" else m
    return (AbstractTensor(s[:-2] + (m, k), x.dtype), AbstractTensor(s[:-2] + (k, n), x.dtype))


def _qr_kernel(a, mode="reduced"):
    q, r = np.linalg.qr(a, mode=mode)
    return q, r


def _qr_bprop(inputs, out, dout, mode="reduced"):
    a = inputs[0]
    m, n = a.shape[-2], a.shape[-1]
    if m < n or (mode == "complete" and m > n):
        raise C.OpValueError("qr", "a tall or square input for the gradient (mode='complete' only when square)",
                             f"shape {tuple(a.shape)}")
    q, r = out
    gq, gr = dout
    # M = gR R^T - Q^T gQ ; take its upper triangle, mirror it, then solve against R^T
    mm = sub(matmul(gr, swap_last(r)), matmul(swap_last(q), gq))
    up = triu(mm)
    eye = _eye_like(r)
    sym = sub(add(up, swap_last(up)), mul(mul(up, eye), 1.0))        # X + X^T with the diagonal once
    b = add(gq, matmul(q, sym))
    return (matmul(b, swap_last(inverse(r))),)


_qr = defprim("qr", _qr_infer, _lapack("qr", _qr_kernel), _qr_bprop, doc="QR decomposition")


def qr(input, mode="reduced"):
    """`ops.qr(input, mode='reduced')`: (Q, R) with input = Q R, Q orthonormal columns, R upper
    triangular (LAPACK's signs). 'reduced': Q (M, K), R (K, N) with K = min(M, N); 'complete': Q
    (M, M), R (M, N). Differentiable for M >= N ('complete' only when square)."""
    return _qr(input, mode=mode)


# ------------------------------------------------------------------------------------------------
# svd
def _svd_infer(x, full_matrices=False, compute_uv=True):
    s = _matrix("svd", "input", x, square=False)
    for arg, v in (("full_matrices", full_matrices), ("compute_uv", compute_uv)):
        if not isinstance(v, bool):
            raise C.OpTypeError("svd", f"'{arg}' to be a bool", type(v).__name__)
    m, n = s[-2], s[-1]
    k = min(m, n)
    sv = AbstractTensor(s[:-2] + (k,), x.dtype)
    if not compute_uv:
        return sv
    mu, nv = (m, n) if full_matrices else (k, k)
    return (sv, AbstractTensor(s[:-2] + (m, mu), x.dtype), AbstractTensor(s[:-2] + (n, nv), x.dtype))


def _svd_kernel(a, full_matrices=False, compute_uv=True):
    if not compute_uv:
        return np.linalg.svd(a, compute_uv=False)
    u, s, vh = np.linalg.svd(a, full_matrices=full_matrices)
    return s, u, np.swapaxes(vh, -1, -2).copy()


def _svd_bprop(inputs, out, dout, full_matrices=False, compute_uv=True):
    from .shape_more import narrow
    a = inputs[0]
    m, n = a.shape[-2], a.shape[-1]
    k = min(m, n)
    if compute_uv:
        s, u, v = out
        gs, gu, gv = dout
    else:
        s, u, v = _svd(a, full_matrices=False, compute_uv=True)
        gs, gu, gv = dout, None, None
    if full_matrices and (m != n):
        u, v = narrow(u, -1, 0, k), narrow(v, -1, 0, k)
        gu = narrow(gu, -1, 0, k) if gu is not None else None
        gv = narrow(gv, -1, 0, k) if gv is not None else None
    ut, vt = swap_last(u), swap_last(v)
    eye = _eye_n(k, a)
    core = mul(reshape(gs, tuple(gs.shape) + (1,)), eye)                           # diag(gS)
    if gu is None and gv is None:
        return (matmul(matmul(u, core), vt),)
    s_row = reshape(s, tuple(s.shape[:-1]) + (1, k))
    s_col = reshape(s, tuple(s.shape[:-1]) + (k, 1))
    e = sub(mul(s_row, s_row), mul(s_col, s_col))                 # E_jk = S_k^2 - S_j^2
    e = add(e, eye)                                                 # 1 on the diagonal
    skew_u = sub(matmul(ut, gu), matmul(swap_last(gu), u))
    skew_v = sub(matmul(vt, gv), matmul(swap_last(gv), v))
    core = add(core, add(mul(div(skew_u, e), s_row), mul(s_col, div(skew_v, e))))
    ga = matmul(matmul(u, core), vt)
    sinv_row = div(1.0, s_row)
    eye_m, eye_n = _eye_n(m, a), _eye_n(n, a)
    ga = add(ga, matmul(mul(matmul(sub(eye_m, matmul(u, ut)), gu), sinv_row), vt))
    ga = add(ga, matmul(mul(u, sinv_row), matmul(swap_last(gv), sub(eye_n, matmul(v, vt)))))
    return (ga,)


def _eye_n(n, like):
    from ...common.tensor import Tensor
    return Tensor(np.eye(n, dtype=like.dtype.np))


_svd = defprim("svd", _svd_infer, _lapack("svd", _svd_kernel, finite_only=True), _svd_bprop, doc="singular value decomposition")


def svd(input, full_matrices=False, compute_uv=True):
    """`ops.svd(input, full_matrices=False, compute_uv=True)`: (s, u, v) with input = u diag(s) v^T
    (note: v, not v^T, as MindSpore returns), singular values descending; only `s` when
    compute_uv=False. Signs of singular vectors are LAPACK's."""
    return _svd(input, full_matrices=full_matrices, compute_uv=compute_uv)


# ------------------------------------------------------------------------------------------------
# lstsq / matrix_power (composites) and matrix_exp
def lstsq(input, A):
    """`ops.lstsq(input, A)`: the least-squares solution X (N, K) of input X ~= A, for input (M, N) and
    A (M, K) (a 1-D A is one column). A composite: pinv(input) @ A (the minimum-norm solution)."""
    s = _matrix("lstsq", "input", input, square=False)
    C.tensor("lstsq", "A", A)
    if len(s) != 2 or len(A.shape) not in (1, 2) or A.shape[0] != s[0]:
        raise C.OpValueError("lstsq", f"a 2-D input and an A with {s[0]} rows", f"shapes {s} and {tuple(A.shape)}")
    if A.dtype is not input.dtype:
        raise C.OpTypeError("lstsq", "'input' and 'A' of one dtype", f"{input.dtype} and {A.dtype}")
    return matmul(pinv(input), A)


def matrix_power(input, n):
    """`ops.matrix_power(input, n)`: input multiplied by itself n times (n = 0: the identity; n < 0:
    powers of the inverse). Integer matrices are allowed for n >= 0. A composite of matmul
    (square-and-multiply) and inverse."""
    C.tensor("matrix_power", "input", input)
    n = C.int_attr("matrix_power", "n", n)
    s = tuple(input.shape)
    if len(s) < 2 or s[-1] != s[-2]:
        raise C.OpValueError("matrix_power", "square matrices (..., N, N)", f"shape {s}")
    if input.dtype is mstype.bool_:
        raise C.OpTypeError("matrix_power", "'input' with a numeric dtype", str(input.dtype))
    if n < 0:
        input = inverse(input)
        n = -n
    if n == 0:
        from .elementwise import zeros_like
        return add(zeros_like(input), _eye_like(input))
    result, base = None, input
    while n:
        if n & 1:
            result = base if result is None else matmul(result, base)
        n >>= 1
        if n:
            base = matmul(base, base)
    return result


def _expm_infer(x):
    _matrix("matrix_exp", "input", x)
    return AbstractTensor(x.shape, x.dtype)


def _expm_kernel(a):
    if a.ndim == 2:
        return scipy.linalg.expm(a)
    flat = a.reshape((-1,) + a.shape[-2:])
    return np.stack([scipy.linalg.expm(m) for m in flat]).reshape(a.shape) if flat.shape[0] else a.copy()


def _expm_bprop(inputs, out, dout):
    # d<G, expm(A)> = <expm([[A^T, G], [0, A^T]])[:n, n:], dA>  (Najfeld and Havel)
    from .elementwise import zeros_like
    from .shape_more import narrow
    a = inputs[0]
    n = a.shape[-1]
    at = swap_last(a)
    top = concat([at, dout], -1)
    bottom = concat([zeros_like(at), at], -1)
    big = matrix_exp(concat([top, bottom], -2))
    return (narrow(narrow(big, -2, 0, n), -1, n, n),)


_matrix_exp = defprim("matrix_exp", _expm_infer, _lapack("matrix_exp", _expm_kernel), _expm_bprop,
                      doc="matrix exponential")


def matrix_exp(input):
    """`ops.matrix_exp(input)`: the matrix exponential sum_k A^k / k! of each square matrix (SciPy's
    Pade approximation). (MindSpore 2.10's CPU build fails on it.)"""
    return _matrix_exp(input)


__all__ = ["det", "slogdet", "logdet", "inverse", "pinv", "cholesky", "cholesky_inverse", "cholesky_solve", "qr",
           "svd", "lstsq", "matrix_power", "matrix_exp"]
