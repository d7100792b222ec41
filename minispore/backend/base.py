"""The Backend interface a device plugin implements.

A backend is a small object: a name, a table of kernels keyed by primitive name, and how to move
arrays between host and device. Anything it does not implement falls back to the CPU reference
kernel — explicitly: the fallback is counted in `fallbacks` so parity tests and users can see it.
"""
from __future__ import annotations

from collections import Counter


class Backend:
    name = "base"

    def __init__(self):
        self.kernels: dict = {}
        self.fallbacks: Counter = Counter()

    def kernel_for(self, prim):
        """The kernel this backend runs for `prim` (NumPy arrays in/out at the interface)."""
        k = self.kernels.get(prim.name)
        if k is None:
            self.fallbacks[prim.name] += 1
            return prim.impl
        return k

    def synchronize(self):
        """Wait for queued work (a no-op on synchronous backends)."""

    def __repr__(self):
        return f"<Backend {self.name}: {len(self.kernels)} kernels>"


class CPUBackend(Backend):
    """The reference backend: every primitive's own NumPy kernel."""

    name = "CPU"

    def kernel_for(self, prim):
        return prim.impl
