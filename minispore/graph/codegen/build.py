"""Compile generated C (the O1/O2 fusion pass's kernels) into cached extension modules.

    mod = build({"k_3f2a...": (c_source, cdef_line), ...})      # a KernelModule
    mod.lib.k_3f2a(...)                                         # call a kernel (cffi, API mode)

The machinery - compiler lookup, flags, the content-hashed disk cache and its checks, cffi loading,
`NoCompiler` / `CompileFailed` - is common/native_build.py's (read its docstring), shared with the
optimizers' and the PyNative ops' hand-written C kernels. What is particular to generated kernels
is the preamble: where glibc's vector math library (libmvec) exists, the functions that fused
expressions call (`ops.c_expr.VECTOR_MATH`) are declared `omp declare simd`, so loops calling
exp/tanh/erf vectorize (about 50x faster than scalar libm calls). Without a compiler `build`
raises `NoCompiler` and the fusion pass runs the group unfused, warning once.
"""
from __future__ import annotations

from ...common import native_build as _nb
# (the same names as before the machinery moved down; `_warned` is the warn-once set they share)
from ...common.native_build import (EXT_SUFFIX, FLAGS, STATS, CompileFailed, KernelModule, NoCompiler,  # noqa: F401
                                    _warned, cache_dir, clear_memory_cache, find_compiler, has_libmvec)
from ...ops.c_expr import VECTOR_MATH


def preamble() -> str:
    """The includes and the libmvec declarations of the functions fused expressions call."""
    return _nb.preamble(VECTOR_MATH)


def build(kernels: dict) -> KernelModule:
    """Compile (or load from the cache) one module holding `kernels` (symbol -> (C source, cdef))."""
    return _nb.build(kernels, VECTOR_MATH)


def build_each(kernels: dict):
    """Build `kernels` as one module; if that fails, find the kernels that do not compile by
    splitting the set in halves. Returns `({symbol: KernelModule}, {symbol: error message})`."""
    return _nb.build_each(kernels, VECTOR_MATH)


__all__ = ["build", "build_each", "cache_dir", "find_compiler", "has_libmvec", "preamble", "KernelModule", "NoCompiler",
           "CompileFailed", "STATS", "FLAGS", "EXT_SUFFIX", "clear_memory_cache"]
