"""Single-pass C loops for PyNative's heaviest elementwise and row kernels (issue 14).

A NumPy kernel is a chain of whole-array passes: the exact GELU's fast NumPy version makes 27 of
them over each block, half in float64; a C loop reads each input element once, keeps every
temporary in a register and writes the output once. Each function here takes NumPy arrays and
returns the kernel's result, or None when the fast path does not apply - then the caller runs its
plain NumPy version (kept beside the call as the reference; tests/ops/test_native_kernels.py
checks that the two agree and that both match a float64 oracle):

* gelu_erf(x)                  the exact GELU x Phi(x)               (activation._gelu_kernel)
* gelu_erf_grad(x, dout)       dout * (Phi(x) + x phi(x))            (activation._gelu_grad_kernel)
* softmax_rows(x)              softmax over the contiguous last axis (activation._softmax_kernel)
* softmax_grad_rows(y, dout)   y * (dout - sum(dout * y))            (activation._softmax_grad_kernel)
* layer_norm_rows(x2, w, b, eps)              (y, mean, rstd) of (rows, n)   (norm_ops._layer_norm_kernel)
* layer_norm_grad_rows(dy2, x2, w, mean, rstd)  (dx, dw, db)                 (norm_ops._layer_norm_grad_kernel)
* rms_norm_rows(x2, w, eps)                     (y, rstd) of (rows, n)       (norm_ops._rms_norm_kernel)
* rms_norm_grad_rows(dy2, x2, w, drstd, eps)    (dx, dw)                     (norm_ops._rms_norm_grad_kernel)

**When they apply.** float32 or float64 arrays, all of one dtype, C-contiguous (a view with
other strides, a half-precision or mixed-dtype call takes the plain path), and a module that
built: common/native_build.py compiles this source once per machine (cached on disk), with its
flags (-O3 -march=native, no automatic FMA contraction, vectorisation through `#pragma omp simd`
only - one thread). No compiler, or `MINISPORE_NATIVE_KERNELS=0`: None everywhere, said once.

**Accuracy.** The GELU kernels work in double whatever the input: float32 in, double arithmetic,
one rounding to float32 at the end. For float32, Phi(-a) is the rational fit of activation.py
(`_GELU_P`, `_GELU_Q`: relative error 5.2e-9, far below float32's 6e-8) times an inline exp
(below); the forward is within 1 ulp of the float64 reference (measured 0.58 ulp), the backward
within 1 ulp plus 2.6e-9 absolute (the fit's error, seen near gelu'(x) = 0). For float64 it is
libm's erfc and exp (< 1 ulp each, as scipy's). Row sums (softmax, layer norm) accumulate in
double, so they are at least as accurate as NumPy's pairwise float32 sums; elementwise steps are
done in the input dtype in NumPy's order, so results agree with the plain kernels to a few ulp.

**Speed** (393k float32 elements, one thread, noisy shared machine): GELU forward ~0.45 ms
(plain NumPy 2.4-6 ms), backward ~0.5 ms (1.1 ms); softmax over rows of 64 ~0.2 ms (0.35 ms).
On an AVX2-only CPU with gcc 12 (AMD EPYC, heavily loaded, min of 40): GELU 1.0 ms, backward 1.2 ms
- they were 5.3 / 9.3 ms until the loops vectorized there (`no-trapping-math` and the 2^k bit trick
in `_EXP`, below; the same bits come out). RMSNorm (768 x 128): forward 72 us (plain 115 us),
backward 120 us (plain 260 us).
"""
from __future__ import annotations

import numpy as np

from ...common import native_build

# The rational fit of Phi(-a) exp(a^2 / 2) = P(a) / Q(a) (Q monic) - the same numbers as
# activation._GELU_P / _GELU_Q (a test checks they are equal; this module cannot import activation,
# which imports it).
GELU_P = (49.411225388039085, 43.10122450499333, 17.950793957758684, 3.962616590024569, 0.39894775240130886)
GELU_Q = (98.82245027115468, 165.051392683293, 118.18190175712664, 45.97991496474657, 9.933519107557414)
GELU_CAP = 40.0     # |x| beyond which Phi(-|x|) is 0 in float64 (activation._GELU_CAP)


def _c(v: float) -> str:
    return repr(float(v))


# exp(t) for t <= 0 (the float32 GELU kernels' only transcendental), inline so that the loops
# calling it vectorize without a library call. t is clamped to -700 (e^-700 ~ 1e-304 is still a
# normal double; the kernels only reach it for |x| > 37, where Phi(-|x|) is below 1e-300 and the
# float32 result cannot see it); t = k ln2 + r with |r| <= ln2 / 2 (ln2 in two parts, fdlibm's, so
# k ln2 is exact), e^r by its Taylor polynomial of degree 10 (truncation < 3e-13 relative), times 2^k
# built in the exponent field. Relative error ~1e-12 at most: 1/50000 of a float32 ulp.
#
# The polynomials here use explicit fused multiply-adds (MS_FMA): the module is compiled with
# -ffp-contract=off so that code mirroring NumPy rounds as NumPy does, but these loops mirror no
# NumPy expression - they evaluate an approximation whose error bound is stated, and one rounding
# per step instead of two only makes it tighter (and the loops twice as fast).
#
# `no-trapping-math` (for this module's C only): with gcc's default -ftrapping-math a float compare
# may raise an exception, so gcc will not turn `t < -700.0 ? -700.0 : t` (or any `?:` on floats) into
# a vector select, and every loop with one ran scalar (measured on gcc 12 / AVX2: GELU 5x slower).
# The flag changes no result (it only lets the compiler assume FP exception flags are not read).
_EXP = r"""
#pragma GCC optimize ("no-trapping-math")
#if defined(__FMA__) || defined(__aarch64__)
#define MS_FMA(a, b, c) fma(a, b, c)
#else
#define MS_FMA(a, b, c) ((a) * (b) + (c))
#endif
static inline double ms_exp_neg(double t) {
    t = t < -700.0 ? -700.0 : t;
    /* k = round(t / ln2): adding and subtracting 1.5 * 2^52 rounds to an integer (floor() would
       stop the loop vectorizing without -fno-trapping-math) */
    union { int64_t i; double d; } shifted;
    shifted.d = t * 1.4426950408889634 + 6755399441055744.0;
    double kd = shifted.d - 6755399441055744.0;
    double r = MS_FMA(kd, -1.9082149292705877e-10, MS_FMA(kd, -0.6931471803691238, t));
    double p = 1.0 / 3628800.0;
    p = MS_FMA(p, r, 1.0 / 362880.0);
    p = MS_FMA(p, r, 1.0 / 40320.0);
    p = MS_FMA(p, r, 1.0 / 5040.0);
    p = MS_FMA(p, r, 1.0 / 720.0);
    p = MS_FMA(p, r, 1.0 / 120.0);
    p = MS_FMA(p, r, 1.0 / 24.0);
    p = MS_FMA(p, r, 1.0 / 6.0);
    p = MS_FMA(p, r, 0.5);
    p = MS_FMA(p, r, 1.0);
    p = MS_FMA(p, r, 1.0);
    /* 2^k: k + 1023 in the exponent field. k is read from the low bits of the shifted sum (its bit
       pattern is that of 1.5 * 2^52, 0x4338000000000000, plus k) with 64-bit integer adds and shifts:
       fast: AVX2 has no vector double -> int64 conversion, and `(int64_t)kd` made every lane scalar
       (plain version: scale.i = ((int64_t)kd + 1023) << 52, 5x slower there) */
    union { int64_t i; double d; } scale;
    scale.i = (shifted.i - 0x4338000000000000LL + 1023) << 52;
    return p * scale.d;
}
"""
EXP_SOURCE = _EXP      # shared with the other C-loop modules (_native_attention) that need this exp

# Phi(-a) for a >= 0 (NaN stays NaN) by the rational fit, given e = exp(-a^2 / 2) (the backward
# also needs e, for phi): e P(a) / Q(a), Horner's rule (all coefficients positive: stable).
_PHI = f"""
static inline double ms_phi_neg_rational(double a, double e) {{
    double p = MS_FMA(a, {_c(GELU_P[4])}, {_c(GELU_P[3])});
    p = MS_FMA(p, a, {_c(GELU_P[2])});
    p = MS_FMA(p, a, {_c(GELU_P[1])});
    p = MS_FMA(p, a, {_c(GELU_P[0])});
    double q = a + {_c(GELU_Q[4])};
    q = MS_FMA(q, a, {_c(GELU_Q[3])});
    q = MS_FMA(q, a, {_c(GELU_Q[2])});
    q = MS_FMA(q, a, {_c(GELU_Q[1])});
    q = MS_FMA(q, a, {_c(GELU_Q[0])});
    return (e * p) / q;
}}
#define MS_SQRT_HALF {_c(0.5 ** 0.5)}
#define MS_INV_SQRT_2PI {_c(1.0 / (2.0 * 3.141592653589793) ** 0.5)}
#define MS_GELU_CAP {_c(GELU_CAP)}
/* gcc uses 256-bit vectors by default even where the CPU has 512-bit ones; these loops are
   compute-bound, so ask for the full width where AVX-512 exists (measured ~25% faster) */
#if defined(__AVX512F__) && defined(__GNUC__) && !defined(__clang__)
#define MS_WIDE __attribute__((target("prefer-vector-width=512")))
#else
#define MS_WIDE
#endif
"""

# The exact GELU: relu(x) - a Phi(-a), a = min(|x|, 40) (activation.py explains the form: neither
# branch cancels, and +-inf give +inf / 0). `a > CAP ? CAP : a` keeps NaN (fmin would drop it).
# The backward: dout * (Phi(x) + xc phi(xc)), xc = x clamped to +-40, Phi(x) = 1 - Phi(-a) for
# x >= 0 (no cancellation in double: Phi(-a) <= 0.5), Phi(-a) below; phi(xc) shares exp(-a^2/2).
_GELU = r"""
MS_WIDE void ms_gelu_f32(const float *x, float *out, int64_t n) {
    #pragma omp simd
    for (int64_t i = 0; i < n; i++) {
        double d = (double)x[i];
        double a = fabs(d);
        a = a > MS_GELU_CAP ? MS_GELU_CAP : a;
        double e = ms_exp_neg(-0.5 * (a * a));
        double r = (d > 0.0 ? d : 0.0) - a * ms_phi_neg_rational(a, e);
        out[i] = (float)r;
    }
}
MS_WIDE void ms_gelu_f64(const double *x, double *out, int64_t n) {
    #pragma omp simd
    for (int64_t i = 0; i < n; i++) {
        double d = x[i];
        double a = fabs(d);
        a = a > MS_GELU_CAP ? MS_GELU_CAP : a;
        out[i] = (d > 0.0 ? d : 0.0) - a * (0.5 * erfc(a * MS_SQRT_HALF));
    }
}
MS_WIDE void ms_gelu_grad_f32(const float *x, const float *g, float *out, int64_t n) {
    #pragma omp simd
    for (int64_t i = 0; i < n; i++) {
        double d = (double)x[i];
        double a = fabs(d);
        a = a > MS_GELU_CAP ? MS_GELU_CAP : a;
        double e = ms_exp_neg(-0.5 * (a * a));
        double lo = ms_phi_neg_rational(a, e);
        double cdf = d >= 0.0 ? 1.0 - lo : lo;
        double xc = d >= 0.0 ? a : -a;
        double r = (cdf + xc * (e * MS_INV_SQRT_2PI)) * (double)g[i];
        out[i] = (float)r;
    }
}
MS_WIDE void ms_gelu_grad_f64(const double *x, const double *g, double *out, int64_t n) {
    #pragma omp simd
    for (int64_t i = 0; i < n; i++) {
        double d = x[i];
        double a = fabs(d);
        a = a > MS_GELU_CAP ? MS_GELU_CAP : a;
        double xc = d >= 0.0 ? a : -a;
        double cdf = 0.5 * erfc(-d * MS_SQRT_HALF);
        out[i] = (cdf + xc * (exp(-0.5 * (a * a)) * MS_INV_SQRT_2PI)) * g[i];
    }
}
"""

# Softmax over rows of n contiguous elements, as activation._softmax_kernel: shift by the row's
# max (an infinite or NaN max shifts by 0, as `_shifted` does; a NaN anywhere in the row makes the
# whole row NaN either way), exp in the input type, the sum in double, divide. The backward:
# dx = y * (g - <g, y>), the dot product in double.
_SOFTMAX = r"""
#define MS_SOFTMAX(T, S, EXP)                                                                      \
void ms_softmax_##S(const T *x, T *out, int64_t rows, int64_t n) {                               \
    for (int64_t r = 0; r < rows; r++) {                                                          \
        const T *xr = x + r * n;                                                                   \
        T *o = out + r * n;                                                                        \
        T m = xr[0];                                                                               \
        _Pragma("omp simd reduction(max:m)")                                                       \
        for (int64_t i = 1; i < n; i++) m = xr[i] > m ? xr[i] : m;                                 \
        if (!isfinite(m)) m = 0;                                                                   \
        double s = 0.0;                                                                            \
        _Pragma("omp simd reduction(+:s)")                                                         \
        for (int64_t i = 0; i < n; i++) { T e = EXP(xr[i] - m); o[i] = e; s += (double)e; }        \
        T st = (T)s;                                                                               \
        _Pragma("omp simd")                                                                        \
        for (int64_t i = 0; i < n; i++) o[i] = o[i] / st;                                          \
    }                                                                                              \
}                                                                                                  \
void ms_softmax_grad_##S(const T *y, const T *g, T *out, int64_t rows, int64_t n) {              \
    for (int64_t r = 0; r < rows; r++) {                                                          \
        const T *yr = y + r * n, *gr = g + r * n;                                                  \
        T *o = out + r * n;                                                                        \
        double s = 0.0;                                                                            \
        _Pragma("omp simd reduction(+:s)")                                                         \
        for (int64_t i = 0; i < n; i++) s += (double)gr[i] * (double)yr[i];                        \
        T st = (T)s;                                                                               \
        _Pragma("omp simd")                                                                        \
        for (int64_t i = 0; i < n; i++) o[i] = (gr[i] - st) * yr[i];                               \
    }                                                                                              \
}
MS_SOFTMAX(float, f32, expf)
MS_SOFTMAX(double, f64, exp)
"""

# LayerNorm over rows of n, as norm_ops._layer_norm_kernel: mean, then the variance of the
# centred values (two passes: no E[x^2] - E[x]^2 cancellation), both accumulated in double;
# y = (x - mean) * rstd * w + b in the input type, in that order (w, b may be NULL).
# The backward, as norm_ops._layer_norm_grad_kernel (xc = x - mean, g = dy * w):
#   dx = rstd * (g - mean(g)) - xc * (rstd^3 * mean(g * xc)),  dw = sum_rows(dy * xc * rstd),
#   db = sum_rows(dy); the row means and the dw/db column sums (dw64, db64: zeroed double
#   buffers of n) accumulate in double.
_LAYER_NORM = r"""
#define MS_LAYER_NORM(T, S, SQRT)                                                                  \
void ms_layer_norm_##S(const T *x, const T *w, const T *b, T *y, T *mean, T *rstd,               \
                       int64_t rows, int64_t n, double eps) {                                     \
    for (int64_t r = 0; r < rows; r++) {                                                          \
        const T *xr = x + r * n;                                                                   \
        T *yr = y + r * n;                                                                         \
        double s = 0.0;                                                                            \
        _Pragma("omp simd reduction(+:s)")                                                         \
        for (int64_t i = 0; i < n; i++) s += (double)xr[i];                                        \
        T mu = (T)(s / (double)n);                                                                 \
        double v = 0.0;                                                                            \
        _Pragma("omp simd reduction(+:v)")                                                         \
        for (int64_t i = 0; i < n; i++) { T c = xr[i] - mu; v += (double)c * (double)c; }          \
        T rs = (T)(1.0 / sqrt(v / (double)n + eps));                                               \
        mean[r] = mu; rstd[r] = rs;                                                                \
        if (w && b) {                                                                              \
            _Pragma("omp simd")                                                                    \
            for (int64_t i = 0; i < n; i++) yr[i] = ((xr[i] - mu) * rs) * w[i] + b[i];             \
        } else if (w) {                                                                            \
            _Pragma("omp simd")                                                                    \
            for (int64_t i = 0; i < n; i++) yr[i] = ((xr[i] - mu) * rs) * w[i];                    \
        } else if (b) {                                                                            \
            _Pragma("omp simd")                                                                    \
            for (int64_t i = 0; i < n; i++) yr[i] = ((xr[i] - mu) * rs) + b[i];                    \
        } else {                                                                                   \
            _Pragma("omp simd")                                                                    \
            for (int64_t i = 0; i < n; i++) yr[i] = (xr[i] - mu) * rs;                             \
        }                                                                                          \
    }                                                                                              \
}                                                                                                  \
void ms_layer_norm_grad_##S(const T *dy, const T *x, const T *w, const T *mean, const T *rstd,   \
                            T *dx, double *dw64, double *db64, int64_t rows, int64_t n) {         \
    for (int64_t r = 0; r < rows; r++) {                                                          \
        const T *dyr = dy + r * n, *xr = x + r * n;                                                \
        T *dxr = dx + r * n;                                                                       \
        T mu = mean[r], rs = rstd[r];                                                              \
        double s1 = 0.0, s2 = 0.0;                                                                 \
        _Pragma("omp simd reduction(+:s1, s2)")                                                    \
        for (int64_t i = 0; i < n; i++) {                                                          \
            double c = (double)(xr[i] - mu), d = (double)dyr[i];                                   \
            double gi = w ? d * (double)w[i] : d;                                                  \
            s1 += gi; s2 += gi * c;                                                                \
            dw64[i] += d * c * (double)rs;                                                         \
            db64[i] += d;                                                                          \
        }                                                                                          \
        T m1 = (T)(s1 / (double)n);                                                                \
        T k = (T)((double)rs * (double)rs * (double)rs * (s2 / (double)n));                        \
        _Pragma("omp simd")                                                                        \
        for (int64_t i = 0; i < n; i++) {                                                          \
            T gi = w ? dyr[i] * w[i] : dyr[i];                                                     \
            dxr[i] = (gi - m1) * rs - (xr[i] - mu) * k;                                            \
        }                                                                                          \
    }                                                                                              \
}
MS_LAYER_NORM(float, f32, sqrtf)
MS_LAYER_NORM(double, f64, sqrt)
"""

# RMSNorm over rows of n, as norm_ops._rms_norm_kernel: r = 1 / sqrt(mean(x^2) + eps) (the sum of
# squares in double), y = (x * r) * w in the input type. The backward, as _rms_norm_grad_kernel
# (which recomputes r from x: the primitive is not handed the forward's rstd), with g = dy * w:
#   dx = g * r - x * (r^3 * q),  q = <g, x> / n + drstd / n,  dw = sum_rows(dy * x * r)
# (row dots and the dw column sums, dw64: a zeroed double buffer of n, accumulate in double).
_RMS_NORM = r"""
#define MS_RMS_NORM(T, S)                                                                          \
void ms_rms_norm_##S(const T *x, const T *w, T *y, T *rstd, int64_t rows, int64_t n, double eps) {\
    for (int64_t r = 0; r < rows; r++) {                                                          \
        const T *xr = x + r * n;                                                                   \
        T *yr = y + r * n;                                                                         \
        double ss = 0.0;                                                                           \
        _Pragma("omp simd reduction(+:ss)")                                                        \
        for (int64_t i = 0; i < n; i++) ss += (double)xr[i] * (double)xr[i];                       \
        T rs = (T)(1.0 / sqrt(ss / (double)n + eps));                                              \
        rstd[r] = rs;                                                                              \
        _Pragma("omp simd")                                                                        \
        for (int64_t i = 0; i < n; i++) yr[i] = (xr[i] * rs) * w[i];                               \
    }                                                                                              \
}                                                                                                  \
void ms_rms_norm_grad_##S(const T *dy, const T *x, const T *w, const T *drstd, T *dx,             \
                          double *dw64, int64_t rows, int64_t n, double eps) {                    \
    for (int64_t r = 0; r < rows; r++) {                                                          \
        const T *dyr = dy + r * n, *xr = x + r * n;                                                \
        T *dxr = dx + r * n;                                                                       \
        double ss = 0.0, gx = 0.0;                                                                 \
        _Pragma("omp simd reduction(+:ss, gx)")                                                    \
        for (int64_t i = 0; i < n; i++) {                                                          \
            double xi = (double)xr[i];                                                             \
            ss += xi * xi; gx += (double)(dyr[i] * w[i]) * xi;                                     \
        }                                                                                          \
        T rs = (T)(1.0 / sqrt(ss / (double)n + eps));                                              \
        T q = (T)(gx / (double)n + (double)drstd[r] / (double)n);                                  \
        T k = (rs * rs * rs) * q;                                                                  \
        _Pragma("omp simd")                                                                        \
        for (int64_t i = 0; i < n; i++) {                                                          \
            dxr[i] = (dyr[i] * w[i]) * rs - xr[i] * k;                                             \
            dw64[i] += (double)(dyr[i] * xr[i]) * (double)rs;                                      \
        }                                                                                          \
    }                                                                                              \
}
MS_RMS_NORM(float, f32)
MS_RMS_NORM(double, f64)
"""

_CDEFS = []
for _T, _S in (("float", "f32"), ("double", "f64")):
    _CDEFS += [
        f"void ms_gelu_{_S}(const {_T} *, {_T} *, int64_t);",
        f"void ms_gelu_grad_{_S}(const {_T} *, const {_T} *, {_T} *, int64_t);",
        f"void ms_softmax_{_S}(const {_T} *, {_T} *, int64_t, int64_t);",
        f"void ms_softmax_grad_{_S}(const {_T} *, const {_T} *, {_T} *, int64_t, int64_t);",
        f"void ms_layer_norm_{_S}(const {_T} *, const {_T} *, const {_T} *, {_T} *, {_T} *, {_T} *, "
        f"int64_t, int64_t, double);",
        f"void ms_layer_norm_grad_{_S}(const {_T} *, const {_T} *, const {_T} *, const {_T} *, const {_T} *, "
        f"{_T} *, double *, double *, int64_t, int64_t);",
        f"void ms_rms_norm_{_S}(const {_T} *, const {_T} *, {_T} *, {_T} *, int64_t, int64_t, double);",
        f"void ms_rms_norm_grad_{_S}(const {_T} *, const {_T} *, const {_T} *, const {_T} *, {_T} *, double *, "
        f"int64_t, int64_t, double);",
    ]

SOURCE = _EXP + _PHI + _GELU + _SOFTMAX + _LAYER_NORM + _RMS_NORM
# the libm functions the loops call, declared `omp declare simd` where libmvec has them
_VECTOR_MATH = {"exp": 1, "erfc": 1}

LIBRARY = native_build.NativeLibrary("PyNative kernels", SOURCE, _CDEFS, vector_math=_VECTOR_MATH)

_SUFFIX = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64"}
_CTYPE = {np.dtype(np.float32): "float[]", np.dtype(np.float64): "double[]"}


def usable_with(library, *arrays):
    """`library`'s module and the dtype suffix, if every array (None allowed) is a C-contiguous
    float32/float64 array of one dtype and the library builds; else None. Shared by every module
    of C loops for PyNative (this one, _native_batch_norm)."""
    dt = None
    for a in arrays:
        if a is None:
            continue
        if not isinstance(a, np.ndarray) or not a.flags.c_contiguous:
            return None
        if dt is None:
            dt = a.dtype
            if dt not in _SUFFIX:
                return None
        elif a.dtype != dt:
            return None
    if dt is None:
        return None
    mod = library.get()
    return None if mod is None else (mod, _SUFFIX[dt])


def _usable(*arrays):
    return usable_with(LIBRARY, *arrays)


def pointer(mod, a):
    """A cffi pointer to `a`'s data (NULL for None)."""
    return mod.ffi.NULL if a is None else mod.ffi.from_buffer(_CTYPE[a.dtype], a)


def gelu_erf(x):
    """The exact GELU of x (same shape and dtype), or None (plain path)."""
    use = _usable(x)
    if use is None:
        return None
    mod, s = use
    out = np.empty_like(x)
    if x.size:
        getattr(mod.lib, "ms_gelu_" + s)(pointer(mod, x), pointer(mod, out), x.size)
    return out


def gelu_erf_grad(x, dout):
    """dout * gelu'(x) for x and dout of one shape and dtype, or None (plain path)."""
    if x.shape != getattr(dout, "shape", None):
        return None
    use = _usable(x, dout)
    if use is None:
        return None
    mod, s = use
    out = np.empty_like(x)
    if x.size:
        getattr(mod.lib, "ms_gelu_grad_" + s)(pointer(mod, x), pointer(mod, dout), pointer(mod, out), x.size)
    return out


def _rows_of(x):
    n = x.shape[-1]
    return (x.size // n if n else 0), n


def softmax_rows(x):
    """softmax of x over its last axis, or None (plain path; also for 0-d and empty x)."""
    if x.ndim == 0 or x.size == 0:
        return None
    use = _usable(x)
    if use is None:
        return None
    mod, s = use
    out = np.empty_like(x)
    rows, n = _rows_of(x)
    getattr(mod.lib, "ms_softmax_" + s)(pointer(mod, x), pointer(mod, out), rows, n)
    return out


def softmax_grad_rows(y, dout):
    """y * (dout - sum(dout * y)) over the last axis, or None (plain path)."""
    if y.ndim == 0 or y.size == 0 or y.shape != getattr(dout, "shape", None):
        return None
    use = _usable(y, dout)
    if use is None:
        return None
    mod, s = use
    out = np.empty_like(y)
    rows, n = _rows_of(y)
    getattr(mod.lib, "ms_softmax_grad_" + s)(pointer(mod, y), pointer(mod, dout), pointer(mod, out), rows, n)
    return out


def layer_norm_rows(x2, w, b, eps):
    """(y, mean, rstd) of the rows of x2 (rows, n), w and b of shape (n,) or None; mean and rstd
    of shape (rows,); or None (plain path)."""
    if x2.ndim != 2 or x2.size == 0:
        return None
    use = _usable(x2, w, b)
    if use is None:
        return None
    mod, s = use
    rows, n = x2.shape
    y = np.empty_like(x2)
    mean, rstd = np.empty(rows, x2.dtype), np.empty(rows, x2.dtype)
    getattr(mod.lib, "ms_layer_norm_" + s)(pointer(mod, x2), pointer(mod, w), pointer(mod, b), pointer(mod, y),
                                           pointer(mod, mean), pointer(mod, rstd), rows, n, float(eps))
    return y, mean, rstd


def layer_norm_grad_rows(dy2, x2, w, mean, rstd):
    """(dx, dw, db) of LayerNorm over the rows of x2 (rows, n), given the forward's saved mean
    and rstd (shape (rows,)); w of shape (n,) or None; or None (plain path)."""
    if x2.ndim != 2 or x2.size == 0 or dy2.shape != x2.shape:
        return None
    use = _usable(dy2, x2, w, mean, rstd)
    if use is None:
        return None
    mod, s = use
    rows, n = x2.shape
    dx = np.empty_like(x2)
    dw64, db64 = np.zeros(n), np.zeros(n)
    getattr(mod.lib, "ms_layer_norm_grad_" + s)(pointer(mod, dy2), pointer(mod, x2), pointer(mod, w), pointer(mod, mean),
                                                pointer(mod, rstd), pointer(mod, dx), mod.ffi.from_buffer("double[]", dw64),
                                                mod.ffi.from_buffer("double[]", db64), rows, n)
    return dx, dw64.astype(x2.dtype), db64.astype(x2.dtype)


def rms_norm_rows(x2, w, eps):
    """(y, rstd) of RMSNorm over the rows of x2 (rows, n) with weight w (n,); rstd of shape (rows,);
    or None (plain path)."""
    if x2.ndim != 2 or x2.size == 0 or w is None or w.shape != (x2.shape[1],):
        return None
    use = _usable(x2, w)
    if use is None:
        return None
    mod, s = use
    rows, n = x2.shape
    y, rstd = np.empty_like(x2), np.empty(rows, x2.dtype)
    getattr(mod.lib, "ms_rms_norm_" + s)(pointer(mod, x2), pointer(mod, w), pointer(mod, y), pointer(mod, rstd),
                                         rows, n, float(eps))
    return y, rstd


def rms_norm_grad_rows(dy2, x2, w, drstd, eps):
    """(dx, dw) of RMSNorm over the rows of x2 (rows, n), given the cotangents dy2 (rows, n) and
    drstd (rows,) (r is recomputed from x2, as the plain kernel does); or None (plain path)."""
    if x2.ndim != 2 or x2.size == 0 or dy2.shape != x2.shape or w is None or w.shape != (x2.shape[1],) \
            or drstd.shape != (x2.shape[0],):
        return None
    use = _usable(dy2, x2, w, drstd)
    if use is None:
        return None
    mod, s = use
    rows, n = x2.shape
    dx, dw64 = np.empty_like(x2), np.zeros(n)
    getattr(mod.lib, "ms_rms_norm_grad_" + s)(pointer(mod, dy2), pointer(mod, x2), pointer(mod, w), pointer(mod, drstd),
                                              pointer(mod, dx), mod.ffi.from_buffer("double[]", dw64), rows, n,
                                              float(eps))
    return dx, dw64.astype(x2.dtype)


__all__ = ["gelu_erf", "gelu_erf_grad", "softmax_rows", "softmax_grad_rows", "layer_norm_rows",
           "layer_norm_grad_rows", "rms_norm_rows", "rms_norm_grad_rows", "LIBRARY", "SOURCE", "EXP_SOURCE"]
