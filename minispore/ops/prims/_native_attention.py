"""C loops for the elementwise part of FlashAttention's tiles (issue 14).

A score tile S (B, N2, G, Br, Bc) of `fused_attention_kernels.flash_forward` / `flash_backward`
goes through a chain of whole-tile NumPy passes between its matmuls: in the forward the mask
(`np.copyto(s, -inf, where=~keep)`), the row max, `np.where`, the subtraction, `np.exp`, the row
sum and the rescale of the running state (about 8 passes); in the backward the mask, `s - lse`,
`exp`, `dp - delta`, `p * dp` (about 6 more). Here each is one C loop per row, with the row still
in L1, and no exp at all outside a causal row's visible run:

* `online_softmax_tile(s, keep, m, l)`   the forward's update of the running row max m and row
  sum l (in place) from one tile of scores; s becomes the tile's unnormalized probabilities
  p = exp(s - m_new) (0 where masked). Returns alpha = exp(m_old - m_new), by which the caller
  rescales its accumulator before adding p @ V (the BLAS product stays in NumPy).
  Plain version: `_mask_scores` + `OnlineSoftmax.update` in fused_attention_kernels.py.
* `attention_grad_tile(s, keep, lse, delta, dp, ds_scale)`  the backward's tile: P = exp(S - L)
  (0 where masked) written over s, dS = P * (dP - D) * ds_scale written over dp. Returns (P, dS).
  Plain version: the body of `flash_backward`'s inner loop.

`keep` is None (every score visible), or a bool array broadcastable to the tile: a (Br, Bc) array
(the structural causal / band tile, shared by every head) is passed as is, anything else is
broadcast and copied once as uint8.

**When they apply**: float32 or float64, s / m / l / lse / delta / dp C-contiguous and of one
dtype, and the module built (common/native_build.py; `MINISPORE_NATIVE_KERNELS=0` or no compiler:
None, and the caller runs its NumPy passes). Dropout tiles always take the plain path.

**Accuracy**: exp is libm's expf / exp (vectorized by glibc's libmvec where it exists; float32
within ~1 ulp, like NumPy's own SIMD expf). Differences are rounded in the input dtype as the
plain code does; the row sum accumulates in double (the plain code's is a float32 pairwise sum).
So fast and plain agree to a few float32 ulp (float64: to a few ulp of float64).
tests/ops/test_native_attention.py checks fast == plain, and both against a float64 reference.
"""
from __future__ import annotations

import numpy as np

from ...common import native_build
from ._native_kernels import pointer, usable_with

# One row of a tile at a time. The visible scores of row i lie in the columns [lo[i], hi[i])
# (lo/hi NULL: the whole row); with `keep` (uint8, NULL: none) they are further those with
# keep != 0. Outside [lo, hi) no exp is computed at all - for a causal tile, half of it.
# The row max keeps NumPy's semantics (a NaN anywhere in the row wins). EXP: libm's expf / exp,
# which glibc's libmvec vectorizes (8 floats or 4 doubles a step).
# `no-trapping-math`: without it gcc keeps every `?:` on floats a branch and no loop vectorizes
# (see _native_kernels._EXP); it changes no result.
_SOURCE = r"""
#pragma GCC optimize ("no-trapping-math")
#define MS_FA_TILES(T, S, EXP)                                                                     \
void ms_fa_softmax_tile_##S(T *s, const int64_t *lo, const int64_t *hi, const uint8_t *keep,      \
                            int64_t keep_stride, T *m, T *l, T *alpha,                             \
                            int64_t nmat, int64_t br, int64_t bc) {                               \
    for (int64_t mat = 0; mat < nmat; mat++) {                                                     \
        for (int64_t i = 0; i < br; i++) {                                                         \
            int64_t r = mat * br + i;                                                              \
            T *row = s + r * bc;                                                                   \
            T tmax = -INFINITY;                                                                    \
            int nan = 0;                                                                           \
            int64_t j0 = lo ? lo[i] : 0, j1 = hi ? hi[i] : bc;                                    \
            const uint8_t *kr = keep ? keep + mat * keep_stride + i * bc : 0;                      \
            if (kr) {                                                                              \
                _Pragma("omp simd reduction(max:tmax) reduction(|:nan)")                           \
                for (int64_t j = j0; j < j1; j++) {                                                \
                    T x = kr[j] ? row[j] : (T)-INFINITY;                                           \
                    nan |= x != x; tmax = x > tmax ? x : tmax;                                     \
                }                                                                                  \
            } else {                                                                               \
                _Pragma("omp simd reduction(max:tmax) reduction(|:nan)")                           \
                for (int64_t j = j0; j < j1; j++) {                                                \
                    T x = row[j];                                                                  \
                    nan |= x != x; tmax = x > tmax ? x : tmax;                                     \
                }                                                                                  \
            }                                                                                      \
            if (nan) tmax = (T)NAN;                                                                \
            T m_old = m[r];                                                                        \
            T m_new = (m_old != m_old || tmax != tmax) ? (T)NAN : (tmax > m_old ? tmax : m_old);   \
            T m_safe = m_new == -INFINITY ? (T)0 : m_new;                                          \
            T hidden = m_safe != m_safe ? (T)NAN : (T)0;     /* exp(-inf - m_safe), as NumPy */    \
            if (kr) {                                                                              \
                _Pragma("omp simd")                                                                \
                for (int64_t j = j0; j < j1; j++) {                                                \
                    T p = EXP(row[j] - m_safe);                                                    \
                    row[j] = kr[j] ? p : hidden;                                                   \
                }                                                                                  \
            } else {                                                                               \
                _Pragma("omp simd")                                                                \
                for (int64_t j = j0; j < j1; j++) row[j] = EXP(row[j] - m_safe);                   \
            }                                                                                      \
            for (int64_t j = 0; j < j0; j++) row[j] = hidden;                                      \
            for (int64_t j = j1 > j0 ? j1 : j0; j < bc; j++) row[j] = hidden;                      \
            /* the row sum over the whole row, in one fixed order: the same bits whichever way   \
               the mask came (a causal run [lo, hi) or a dense mask of the same pattern) */        \
            double sum = 0.0;                                                                      \
            _Pragma("omp simd reduction(+:sum)")                                                   \
            for (int64_t j = 0; j < bc; j++) sum += (double)row[j];                                \
            T a = m_old == -INFINITY ? (T)0 : EXP(m_old - m_safe);                                 \
            l[r] = l[r] * a + (T)sum;                                                              \
            alpha[r] = a;                                                                          \
            m[r] = m_new;                                                                          \
        }                                                                                          \
    }                                                                                              \
}                                                                                                  \
void ms_fa_grad_tile_##S(T *s, const int64_t *lo, const int64_t *hi, const uint8_t *keep,         \
                         int64_t keep_stride, const T *lse, const T *delta, T *dp,                \
                         double ds_scale, int64_t nmat, int64_t br, int64_t bc) {                 \
    T sc = (T)ds_scale;                                                                            \
    for (int64_t mat = 0; mat < nmat; mat++) {                                                     \
        for (int64_t i = 0; i < br; i++) {                                                         \
            int64_t r = mat * br + i;                                                              \
            T *row = s + r * bc, *dpr = dp + r * bc;                                               \
            int64_t j0 = lo ? lo[i] : 0, j1 = hi ? hi[i] : bc;                                    \
            const uint8_t *kr = keep ? keep + mat * keep_stride + i * bc : 0;                      \
            T L = lse[r], D = delta[r];                                                            \
            T hidden = L != L ? (T)NAN : (T)0;               /* exp(-inf - L), as NumPy */         \
            if (kr) {                                                                              \
                _Pragma("omp simd")                                                                \
                for (int64_t j = j0; j < j1; j++) {                                                \
                    T p = EXP(row[j] - L);                                                         \
                    p = kr[j] ? p : hidden;                                                        \
                    row[j] = p; dpr[j] = (p * (dpr[j] - D)) * sc;                                  \
                }                                                                                  \
            } else {                                                                               \
                _Pragma("omp simd")                                                                \
                for (int64_t j = j0; j < j1; j++) {                                                \
                    T p = EXP(row[j] - L);                                                         \
                    row[j] = p; dpr[j] = (p * (dpr[j] - D)) * sc;                                  \
                }                                                                                  \
            }                                                                                      \
            for (int64_t j = 0; j < j0; j++) { row[j] = hidden; dpr[j] = (hidden * (dpr[j] - D)) * sc; } \
            for (int64_t j = j1 > j0 ? j1 : j0; j < bc; j++) {                                    \
                row[j] = hidden; dpr[j] = (hidden * (dpr[j] - D)) * sc;                            \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
}
MS_FA_TILES(float, f32, expf)
MS_FA_TILES(double, f64, exp)
"""

_CDEFS = []
for _T, _S in (("float", "f32"), ("double", "f64")):
    _CDEFS += [
        f"void ms_fa_softmax_tile_{_S}({_T} *, const int64_t *, const int64_t *, const uint8_t *, int64_t, "
        f"{_T} *, {_T} *, {_T} *, int64_t, int64_t, int64_t);",
        f"void ms_fa_grad_tile_{_S}({_T} *, const int64_t *, const int64_t *, const uint8_t *, int64_t, "
        f"const {_T} *, const {_T} *, {_T} *, double, int64_t, int64_t, int64_t);",
    ]

LIBRARY = native_build.NativeLibrary("attention kernels", _SOURCE, _CDEFS, vector_math={"exp": 1})


def _keep_args(mod, keep, shape):
    """The C loops' view of `keep`: (lo, hi, mask, mask stride, arrays to keep alive).

    None: every score visible. A (Br, Bc) tile whose visible columns form one run [lo, hi) per
    row (every causal / band tile) becomes two int64 arrays: the loops then do no work outside the
    run. Anything else is broadcast to the whole tile and copied once as a uint8 mask."""
    null = mod.ffi.NULL
    if keep is None:
        return null, null, null, 0, ()
    br, bc = shape[-2:]
    if keep.shape == (br, bc):
        any_ = keep.any(axis=1)
        lo = np.where(any_, keep.argmax(axis=1), 0)
        hi = np.where(any_, bc - keep[:, ::-1].argmax(axis=1), 0)
        if np.array_equal(keep.sum(axis=1), hi - lo):
            lo, hi = lo.astype(np.int64), hi.astype(np.int64)
            return mod.ffi.from_buffer("int64_t[]", lo), mod.ffi.from_buffer("int64_t[]", hi), null, 0, (lo, hi)
        if keep.flags.c_contiguous:                                # one (Br, Bc) mask for every head
            k8 = keep.view(np.uint8)
            return null, null, mod.ffi.from_buffer("uint8_t[]", k8), 0, (k8,)
    k8 = np.ascontiguousarray(np.broadcast_to(keep, shape)).view(np.uint8)
    return null, null, mod.ffi.from_buffer("uint8_t[]", k8), br * bc, (k8,)


def online_softmax_tile(s, keep, m, l):
    """Fold one score tile s (..., Br, Bc) into the running row max m and sum l (..., Br), in place;
    s becomes exp(s - m_new) (0 where `keep` is False). Returns alpha = exp(m_old - m_new) (..., Br),
    or None (plain path: nothing was changed)."""
    if s.ndim < 2 or s.size == 0 or m.shape != s.shape[:-1] or l.shape != m.shape:
        return None
    if keep is not None and keep.dtype != np.bool_:
        return None
    use = usable_with(LIBRARY, s, m, l)
    if use is None:
        return None
    mod, sfx = use
    br, bc = s.shape[-2:]
    alpha = np.empty_like(m)
    lo, hi, kp, stride, _alive = _keep_args(mod, keep, s.shape)
    getattr(mod.lib, "ms_fa_softmax_tile_" + sfx)(pointer(mod, s), lo, hi, kp, stride, pointer(mod, m), pointer(mod, l),
                                                  pointer(mod, alpha), s.size // (br * bc), br, bc)
    return alpha


def attention_grad_tile(s, keep, lse, delta, dp, ds_scale=1.0):
    """The backward of one tile: s (scores, ..., Br, Bc) becomes P = exp(s - lse) (0 where masked),
    dp becomes dS = P * (dp - delta) * ds_scale, both in place; returns (P, dS) (the arrays s and
    dp), or None (plain path: nothing was changed). lse, delta: (..., Br)."""
    if s.ndim < 2 or s.size == 0 or dp.shape != s.shape or lse.shape != s.shape[:-1] or delta.shape != lse.shape:
        return None
    if keep is not None and keep.dtype != np.bool_:
        return None
    use = usable_with(LIBRARY, s, lse, delta, dp)
    if use is None:
        return None
    mod, sfx = use
    br, bc = s.shape[-2:]
    lo, hi, kp, stride, _alive = _keep_args(mod, keep, s.shape)
    getattr(mod.lib, "ms_fa_grad_tile_" + sfx)(pointer(mod, s), lo, hi, kp, stride, pointer(mod, lse), pointer(mod, delta),
                                               pointer(mod, dp), float(ds_scale), s.size // (br * bc), br, bc)
    return s, dp


__all__ = ["online_softmax_tile", "attention_grad_tile", "LIBRARY"]
