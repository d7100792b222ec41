"""minispore's version, in the lowest layer so that any module can read it.

`minispore.__version__` re-exports it; setup.cfg reads it from here (statically, without importing
minispore); the on-disk compile cache (graph/compile_cache.py) keys its entries on it.
"""
__version__ = "0.1.0"
