"""Single-pass-per-step C loops for training-mode batch_norm and its backward (issue 14).

The NumPy kernels of norm_ops.py make about five passes over the activation for the forward
(mean, x - mean, variance, scale, shift) and eleven for the backward (the statistics again, the two
gradient sums, four in-place updates of dx): for a ResNet's activations, megabytes each, every pass
is a trip through the caches. Here, per channel of the (N, C, M) view (M = H*W, contiguous):

* forward  `batch_norm_train(x3, w, b, eps)`: pass 1 sums x, pass 2 sums (x - mean)^2 (the same
  two-pass variance as NumPy's, accumulated in double), pass 3 writes y = (x - mean) * rstd * w + b.
  Returns (y, mean, biased variance).
* backward `batch_norm_grad(dy3, x3, w, eps)`: pass 1 the mean, pass 2 the variance and the two
  gradient sums db = sum(dy), s = sum(dy * (x - mean)) together, pass 3 writes
  dx = w * rstd * (dy - db / n - (x - mean) * rstd^2 * s / n). Returns (dx, dw = s * rstd, db).
  (The formula of norm_ops._batch_norm_grad_fast; its NumPy code is the reference.)

When they apply: float32 or float64, all arrays of one dtype and C-contiguous (w and b may be
None), and a module that built through common/native_build.py (cached per machine;
`MINISPORE_NATIVE_KERNELS=0` or no compiler: None, said once). Otherwise each function returns
None and the caller runs its NumPy kernel. Sums accumulate in double, elementwise steps are in the
input dtype. tests/ops/test_fast_conv_bn.py checks both against the NumPy kernels and a float64
formula.
"""
from __future__ import annotations

import numpy as np

from ...common import native_build
from ._native_kernels import pointer, usable_with

_SOURCE = r"""
#define MS_BATCH_NORM(T, S)                                                                        \
void ms_bn_train_##S(const T *x, const T *w, const T *b, T *y, T *mean, T *var,                   \
                     int64_t nb, int64_t c, int64_t m, double eps) {                              \
    double cnt = (double)nb * (double)m;                                                           \
    for (int64_t k = 0; k < c; k++) {                                                              \
        double s = 0.0;                                                                            \
        for (int64_t n = 0; n < nb; n++) {                                                         \
            const T *xr = x + (n * c + k) * m;                                                     \
            _Pragma("omp simd reduction(+:s)")                                                     \
            for (int64_t i = 0; i < m; i++) s += (double)xr[i];                                    \
        }                                                                                          \
        T mu = (T)(s / cnt);                                                                       \
        double v = 0.0;                                                                            \
        for (int64_t n = 0; n < nb; n++) {                                                         \
            const T *xr = x + (n * c + k) * m;                                                     \
            _Pragma("omp simd reduction(+:v)")                                                     \
            for (int64_t i = 0; i < m; i++) { double d = (double)(xr[i] - mu); v += d * d; }       \
        }                                                                                          \
        v /= cnt;                                                                                  \
        T sc = (T)(1.0 / sqrt(v + eps));                                                           \
        if (w) sc = sc * w[k];                                                                     \
        T sh = b ? b[k] : (T)0;                                                                    \
        for (int64_t n = 0; n < nb; n++) {                                                         \
            const T *xr = x + (n * c + k) * m;                                                     \
            T *yr = y + (n * c + k) * m;                                                           \
            _Pragma("omp simd")                                                                    \
            for (int64_t i = 0; i < m; i++) yr[i] = (xr[i] - mu) * sc + sh;                        \
        }                                                                                          \
        mean[k] = mu; var[k] = (T)v;                                                               \
    }                                                                                              \
}                                                                                                  \
void ms_bn_grad_##S(const T *dy, const T *x, const T *w, T *dx, T *dw, T *db,                     \
                    int64_t nb, int64_t c, int64_t m, double eps) {                               \
    double cnt = (double)nb * (double)m;                                                           \
    for (int64_t k = 0; k < c; k++) {                                                              \
        double s = 0.0;                                                                            \
        for (int64_t n = 0; n < nb; n++) {                                                         \
            const T *xr = x + (n * c + k) * m;                                                     \
            _Pragma("omp simd reduction(+:s)")                                                     \
            for (int64_t i = 0; i < m; i++) s += (double)xr[i];                                    \
        }                                                                                          \
        T mu = (T)(s / cnt);                                                                       \
        double v = 0.0, sd = 0.0, sdx = 0.0;                                                       \
        for (int64_t n = 0; n < nb; n++) {                                                         \
            const T *xr = x + (n * c + k) * m, *dyr = dy + (n * c + k) * m;                        \
            _Pragma("omp simd reduction(+:v, sd, sdx)")                                            \
            for (int64_t i = 0; i < m; i++) {                                                      \
                double d = (double)(xr[i] - mu), g = (double)dyr[i];                               \
                v += d * d; sd += g; sdx += g * d;                                                 \
            }                                                                                      \
        }                                                                                          \
        double rstd = 1.0 / sqrt(v / cnt + eps);                                                   \
        T sc = (T)(w ? rstd * (double)w[k] : rstd);                                                \
        T mdb = (T)(sd / cnt);                                                                     \
        T kx = (T)(rstd * rstd * sdx / cnt);                                                       \
        for (int64_t n = 0; n < nb; n++) {                                                         \
            const T *xr = x + (n * c + k) * m, *dyr = dy + (n * c + k) * m;                        \
            T *dxr = dx + (n * c + k) * m;                                                         \
            _Pragma("omp simd")                                                                    \
            for (int64_t i = 0; i < m; i++) dxr[i] = (dyr[i] - mdb - (xr[i] - mu) * kx) * sc;      \
        }                                                                                          \
        dw[k] = (T)(sdx * rstd); db[k] = (T)sd;                                                    \
    }                                                                                              \
}
MS_BATCH_NORM(float, f32)
MS_BATCH_NORM(double, f64)
"""

_CDEFS = []
for _T, _S in (("float", "f32"), ("double", "f64")):
    _CDEFS += [
        f"void ms_bn_train_{_S}(const {_T} *, const {_T} *, const {_T} *, {_T} *, {_T} *, {_T} *, "
        f"int64_t, int64_t, int64_t, double);",
        f"void ms_bn_grad_{_S}(const {_T} *, const {_T} *, const {_T} *, {_T} *, {_T} *, {_T} *, "
        f"int64_t, int64_t, int64_t, double);",
    ]

LIBRARY = native_build.NativeLibrary("batch_norm kernels", _SOURCE, _CDEFS)

def _usable(*arrays):
    return usable_with(LIBRARY, *arrays)


def batch_norm_train(x3, w, b, eps):
    """(y, mean, biased var) of x3 (N, C, M) normalized per channel with its batch statistics;
    w, b of shape (C,) or None; or None (then run the NumPy kernel)."""
    if x3.ndim != 3 or x3.size == 0:
        return None
    use = _usable(x3, w, b)
    if use is None:
        return None
    mod, s = use
    nb, c, m = x3.shape
    y = np.empty_like(x3)
    mean, var = np.empty(c, x3.dtype), np.empty(c, x3.dtype)
    getattr(mod.lib, "ms_bn_train_" + s)(pointer(mod, x3), pointer(mod, w), pointer(mod, b), pointer(mod, y),
                                         pointer(mod, mean), pointer(mod, var), nb, c, m, float(eps))
    return y, mean, var


def batch_norm_grad(dy3, x3, w, eps):
    """(dx, dw, db) of training-mode batch_norm over x3 (N, C, M) for the cotangent dy3; w of shape
    (C,) or None; or None (then run the NumPy kernel)."""
    if x3.ndim != 3 or x3.size == 0 or dy3.shape != x3.shape:
        return None
    use = _usable(dy3, x3, w)
    if use is None:
        return None
    mod, s = use
    nb, c, m = x3.shape
    dx = np.empty_like(x3)
    dw, db = np.empty(c, x3.dtype), np.empty(c, x3.dtype)
    getattr(mod.lib, "ms_bn_grad_" + s)(pointer(mod, dy3), pointer(mod, x3), pointer(mod, w), pointer(mod, dx),
                                        pointer(mod, dw), pointer(mod, db), nb, c, m, float(eps))
    return dx, dw, db


__all__ = ["batch_norm_train", "batch_norm_grad", "LIBRARY"]
