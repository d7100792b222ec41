"""Where compiled things are kept on disk: the compile cache's settings, read by two caches.

`set_context(enable_compile_cache=True, compile_cache_path=...)` (or MindSpore's variables
MS_COMPILER_CACHE_ENABLE and MS_COMPILER_CACHE_PATH) turns on the on-disk graph cache
(compile_cache/), kept in `<path>/rank_<RANK_ID>/graph_cache`; the C kernels of fused groups
(codegen/build.py) then go beside it, in `rank_<RANK_ID>/kernel_meta` (MindSpore's layout).
Both read the settings here, below them both, so the kernel builder never imports the graph cache.
"""
from __future__ import annotations

import os

from ..common import context


def compile_cache_enabled() -> bool:
    if context.get_context("enable_compile_cache"):
        return True
    return os.environ.get("MS_COMPILER_CACHE_ENABLE", "0") == "1"


def compile_cache_dir() -> str:
    """`<compile_cache_path>/rank_<RANK_ID>/graph_cache`: the compiled graphs' folder."""
    path = context.get_context("compile_cache_path") or os.environ.get("MS_COMPILER_CACHE_PATH", "") or "cache.ms"
    rank = os.environ.get("RANK_ID", "0")
    return os.path.join(os.fspath(path), f"rank_{rank}", "graph_cache")


def kernel_meta_dir():
    """`<compile_cache_path>/rank_<RANK_ID>/kernel_meta` while the compile cache is on, else None."""
    if not compile_cache_enabled():
        return None
    return os.path.join(os.path.dirname(compile_cache_dir()), "kernel_meta")


__all__ = ["compile_cache_enabled", "compile_cache_dir", "kernel_meta_dir"]
