"""Where compiled things are kept on disk: the compile cache's settings, read by two caches.

`set_context(enable_compile_cache=True, compile_cache_path=...)` (or MindSpore's variables
MS_COMPILER_CACHE_ENABLE and MS_COMPILER_CACHE_PATH) turns on the on-disk graph cache
(compile_cache/), kept in `<path>/rank_<RANK_ID>/graph_cache`; the C kernels of fused groups
(codegen/build.py) then go beside it, in `rank_<RANK_ID>/kernel_meta` (MindSpore's layout).
Both read the settings here, below them both, so the kernel builder never imports the graph cache.

The settings themselves (is the cache on; its `rank_<RANK_ID>` folder) are read in
common/native_build.py, the one C builder, which sits below ops/ (whose PyNative kernels are
compiled too) and so cannot import graph/; this module keeps graph's names for them and adds
the graph cache's own folder.
"""
from __future__ import annotations

import os

from ..common.native_build import compile_cache_enabled, compile_cache_rank_dir, kernel_meta_dir


def compile_cache_dir() -> str:
    """`<compile_cache_path>/rank_<RANK_ID>/graph_cache`: the compiled graphs' folder."""
    return os.path.join(compile_cache_rank_dir(), "graph_cache")


__all__ = ["compile_cache_enabled", "compile_cache_dir", "kernel_meta_dir"]
