"""The arena: one block of memory; every planned tensor is a NumPy view at its planned offset.

`Arena(nbytes)` allocates one byte buffer (64-byte aligned, so every planned offset - a multiple of
the plan's alignment - is aligned too). `view(offset, shape, dtype)` returns a C-contiguous ndarray
over bytes [offset, offset + nbytes) of it, no copy. The arena *measures* its use: `high_water` is
the largest `offset + block` handed out so far (`block` = the planned size of the buffer, i.e. its
bytes rounded up to the alignment), so after one run of a planned graph it is the peak the plan
predicted - the check that the executor really ran inside the plan.

A sub-arena (`arena.sub(offset, nbytes)`) is a window of a parent arena: a called subgraph runs
inside its caller's workspace that way.
"""
from __future__ import annotations

import numpy as np

from ...common.errors import OpValueError

_ALIGN = 64


class Arena:
    """One preallocated block; planned tensors are views into it (see the module docstring)."""

    __slots__ = ("buffer", "nbytes", "high_water", "_parent", "_base")

    def __init__(self, nbytes: int, *, _window=None):
        nbytes = int(nbytes)
        if nbytes < 0:
            raise OpValueError("Arena", "a size in bytes >= 0", str(nbytes))
        self.nbytes = nbytes
        self.high_water = 0
        if _window is not None:
            parent, base = _window
            self._parent, self._base = parent, base
            self.buffer = parent.buffer[base:base + nbytes]
        else:
            self._parent, self._base = None, 0
            raw = np.empty(nbytes + _ALIGN, dtype=np.uint8)
            shift = (-raw.__array_interface__["data"][0]) % _ALIGN
            self.buffer = raw[shift:shift + nbytes]

    def view(self, offset: int, shape, dtype, block: int | None = None) -> np.ndarray:
        """A C-contiguous `dtype` array of `shape` at byte `offset` (no copy)."""
        dtype = np.dtype(dtype)
        n = dtype.itemsize
        for s in shape:
            n *= s
        top = offset + (n if block is None else max(block, n))
        if offset < 0 or offset + n > self.nbytes:
            raise OpValueError("Arena.view", f"a range inside the arena's {self.nbytes} bytes",
                               f"[{offset}, {offset + n})")
        if top > self.high_water:
            self.high_water = top
            if self._parent is not None:
                self._parent._touch(self._base + top)
        return self.buffer[offset:offset + n].view(dtype).reshape(shape)

    def _touch(self, top):
        if top > self.high_water:
            self.high_water = top
            if self._parent is not None:
                self._parent._touch(self._base + top)

    def sub(self, offset: int, nbytes: int) -> "Arena":
        """A window [offset, offset + nbytes) of this arena, itself an Arena."""
        if offset < 0 or offset + nbytes > self.nbytes:
            raise OpValueError("Arena.sub", f"a window inside the arena's {self.nbytes} bytes",
                               f"[{offset}, {offset + nbytes})")
        return Arena(nbytes, _window=(self, offset))

    def owns(self, a: np.ndarray) -> bool:
        """Does ndarray `a` point into this arena's bytes?"""
        lo = self.buffer.__array_interface__["data"][0]
        p = a.__array_interface__["data"][0]
        return lo <= p < lo + self.nbytes or (a.size == 0 and lo <= p <= lo + self.nbytes)

    def reset_measure(self):
        self.high_water = 0

    def __repr__(self):
        return f"Arena({self.nbytes} bytes, high_water={self.high_water})"


__all__ = ["Arena"]
