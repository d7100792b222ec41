"""The fast optimizer rules as single-pass C loops (PyTorch's `fused=True`, MindSpore's fused Adam).

`_kernels.py`'s blockwise NumPy kernels still make a dozen ufunc passes over each block; a C loop
reads w, m, v and g once per element and writes them once, which is 3-4x faster again. The C
below is the *same* arithmetic as `_kernels.<rule>_reference`, operation for operation, in the
same dtype: compiled (common/native_build.py's flags) with `-ffp-contract=off` (no fused
multiply-add: NumPy rounds every product, so must we) and without -ffast-math, every `+ - * /`
and `sqrt` is one correctly rounded IEEE operation, exactly what NumPy computes — so the numbers
are bit-identical (tests/nn/test_fast_optim.py checks it). `max` follows np.maximum (NaN wins).

`lib()` builds the module once per machine (cached on disk like every generated kernel) and returns
None when no C compiler is available, or `MINISPORE_NATIVE_OPTIM=0` (this module's switch) or
`MINISPORE_NATIVE_KERNELS=0` (every hand-written C kernel's): `_kernels` then runs its NumPy
loops, which give the same numbers.
"""
from __future__ import annotations

import os
import warnings

import numpy as np

from ...common import native_build

_RULES = r"""
#define MS_MAX(a, b) ((isnan(a) || (a) >= (b)) ? (a) : (b))   /* np.maximum: a NaN wins */

#define MS_OPTIM_KERNELS(T, S, SQRT)                                                               \
void ms_adam_##S(T *w, T *m, T *v, const T *g, T *vh, int64_t n, T b1, T c1, T b2, T c2, T eps,  \
                 T step, T wd, int use_wd, int nesterov) {                                          \
    for (int64_t i = 0; i < n; i++) {                                                             \
        T gi = g[i];                                                                               \
        if (use_wd) gi = gi + w[i] * wd;                                                           \
        T mi = m[i] * b1; mi = mi + gi * c1; m[i] = mi;                                            \
        T vi = v[i] * b2; vi = vi + (gi * gi) * c2; v[i] = vi;                                     \
        if (vh) { T h = vh[i]; h = MS_MAX(h, vi); vh[i] = h; vi = h; }                             \
        T num = nesterov ? (mi * b1 + gi * c1) : mi;                                               \
        w[i] = w[i] - (num * step) / (SQRT(vi) + eps);                                             \
    }                                                                                              \
}                                                                                                  \
void ms_adam_wd_##S(T *w, T *m, T *v, const T *g, int64_t n, T b1, T c1, T b2, T c2, T eps, T lr, \
                    T wd, int use_wd) {                                                            \
    for (int64_t i = 0; i < n; i++) {                                                             \
        T gi = g[i];                                                                               \
        T mi = m[i] * b1; mi = mi + gi * c1; m[i] = mi;                                            \
        T vi = v[i] * b2; vi = vi + (gi * gi) * c2; v[i] = vi;                                     \
        T u = mi / (SQRT(vi) + eps);                                                               \
        if (use_wd) u = u + w[i] * wd;                                                             \
        w[i] = w[i] - u * lr;                                                                      \
    }                                                                                              \
}                                                                                                  \
void ms_torch_adam_##S(T *w, T *m, T *v, const T *g, T *vmax, int64_t n, T b1, T c1, T b2, T c2,  \
                       T eps, T step, T bc2, T shrink, T wd, int mode, int maximize) {             \
    /* mode 0: no decay, 1: decoupled (AdamW, w *= shrink), 2: L2 (g + wd*w) */                   \
    for (int64_t i = 0; i < n; i++) {                                                             \
        T gi = maximize ? -g[i] : g[i];                                                            \
        T wi = w[i];                                                                               \
        if (mode == 1) wi = wi * shrink;                                                           \
        else if (mode == 2) gi = gi + wi * wd;                                                     \
        T mi = m[i] * b1; mi = mi + gi * c1; m[i] = mi;                                            \
        T vi = v[i] * b2; vi = vi + (gi * gi) * c2; v[i] = vi;                                     \
        if (vmax) { T h = vmax[i]; h = MS_MAX(h, vi); vmax[i] = h; vi = h; }                       \
        w[i] = wi - (mi * step) / (SQRT(vi) / bc2 + eps);                                          \
    }                                                                                              \
}                                                                                                  \
void ms_momentum_##S(T *w, T *v, const T *g, int64_t n, T lr, T mom, T wd, int use_wd,           \
                     int nesterov) {                                                              \
    for (int64_t i = 0; i < n; i++) {                                                             \
        T gi = g[i];                                                                               \
        if (use_wd) gi = gi + w[i] * wd;                                                           \
        T vi = v[i] * mom; vi = vi + gi; v[i] = vi;                                                \
        T u = nesterov ? (gi + vi * mom) * lr : vi * lr;                                           \
        w[i] = w[i] - u;                                                                           \
    }                                                                                              \
}                                                                                                  \
void ms_sgd_##S(T *w, T *buf, const T *g, int64_t n, T lr, T mom, T keep, T wd, int use_wd,      \
                int use_mom, int first, int nesterov, int maximize) {                             \
    for (int64_t i = 0; i < n; i++) {                                                             \
        T gi = maximize ? -g[i] : g[i];                                                            \
        if (use_wd) gi = gi + w[i] * wd;                                                           \
        if (use_mom) {                                                                             \
            T b = first ? gi : (buf[i] * mom + gi * keep);                                         \
            buf[i] = b;                                                                            \
            gi = nesterov ? gi + b * mom : b;                                                      \
        }                                                                                          \
        w[i] = w[i] - gi * lr;                                                                     \
    }                                                                                              \
}

MS_OPTIM_KERNELS(float, f32, sqrtf)
MS_OPTIM_KERNELS(double, f64, sqrt)
"""

_CDEFS = []
for _T, _S in (("float", "f32"), ("double", "f64")):
    _CDEFS += [
        f"void ms_adam_{_S}({_T} *, {_T} *, {_T} *, const {_T} *, {_T} *, int64_t, {_T}, {_T}, {_T}, {_T}, {_T}, "
        f"{_T}, {_T}, int, int);",
        f"void ms_adam_wd_{_S}({_T} *, {_T} *, {_T} *, const {_T} *, int64_t, {_T}, {_T}, {_T}, {_T}, {_T}, {_T}, "
        f"{_T}, int);",
        f"void ms_torch_adam_{_S}({_T} *, {_T} *, {_T} *, const {_T} *, {_T} *, int64_t, {_T}, {_T}, {_T}, {_T}, "
        f"{_T}, {_T}, {_T}, {_T}, {_T}, int, int);",
        f"void ms_momentum_{_S}({_T} *, {_T} *, const {_T} *, int64_t, {_T}, {_T}, {_T}, int, int);",
        f"void ms_sgd_{_S}({_T} *, {_T} *, const {_T} *, int64_t, {_T}, {_T}, {_T}, {_T}, int, int, int, int, int);",
    ]

_state = {"tried": False, "mod": None}


def lib():
    """The compiled module (`.lib`, `.ffi`), or None (no compiler, or switched off)."""
    if not _state["tried"]:
        _state["tried"] = True
        if os.environ.get("MINISPORE_NATIVE_OPTIM", "1") != "0" and native_build.native_kernels_enabled():
            try:
                # one cffi module; the cdef lines are passed with the first symbol
                _state["mod"] = native_build.build({"ms_optim_kernels": (_RULES, "\n".join(_CDEFS))})
            except (native_build.NoCompiler, native_build.CompileFailed) as e:
                warnings.warn(f"minispore: optimizers run their NumPy kernels (the C ones do not build: "
                              f"{str(e).splitlines()[0]})", RuntimeWarning, stacklevel=3)
    return _state["mod"]


def suffix(dtype) -> str | None:
    """'f32' / 'f64' for the dtypes the C kernels have, else None."""
    return "f32" if dtype == np.float32 else "f64" if dtype == np.float64 else None


_CTYPE = {np.dtype(np.float32): "float[]", np.dtype(np.float64): "double[]"}


def ptr(mod, a):
    """A C pointer to a contiguous float32/float64 array's data (None -> NULL)."""
    return mod.ffi.NULL if a is None else mod.ffi.from_buffer(_CTYPE[a.dtype], a)


def usable(*arrays) -> bool:
    """All arrays (None allowed) C-contiguous, of one dtype; the first three writable-or-None rule
    is the caller's (w and state are always the computing copies)."""
    dt = None
    for a in arrays:
        if a is None:
            continue
        if not a.flags.c_contiguous:
            return False
        if dt is None:
            dt = a.dtype
        elif a.dtype != dt:
            return False
    return True
