"""The two handles device memory is passed around as: `DeviceBuffer` (an allocation) and
`DeviceTensor` (one tensor inside one).

They are part of the plugin contract (`base.py` documents it and re-exports both, so a plugin
imports them from `minispore.backend` or `minispore.backend.base`). They live in their own module,
below everything else in the package, because the staging adapters (`staging.py`) and shadow
validation (`validate.py`) build on them and `Backend.kernel_for` builds on those two: a separate
bottom module keeps that a straight line, base -> staging/validate -> device_memory.
"""
from __future__ import annotations


class DeviceBuffer:
    """An opaque handle to `nbytes` of device memory. Backends subclass it to keep their pointer."""

    __slots__ = ("nbytes",)

    def __init__(self, nbytes: int):
        self.nbytes = int(nbytes)

    def __repr__(self):
        return f"<{type(self).__name__} {self.nbytes} bytes>"


class DeviceTensor:
    """A C-contiguous tensor at byte `offset` inside a `DeviceBuffer` (what device kernels get)."""

    __slots__ = ("buffer", "shape", "dtype", "offset")

    def __init__(self, buffer: DeviceBuffer, shape, dtype, offset: int = 0):
        self.buffer = buffer
        self.shape = tuple(int(s) for s in shape)
        self.dtype = dtype                    # a minispore DType (its NumPy dtype is dtype.np)
        self.offset = int(offset)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.np.itemsize

    def __repr__(self):
        return (f"DeviceTensor(shape={self.shape}, dtype={self.dtype}, offset={self.offset}, "
                f"buffer={self.buffer!r})")


__all__ = ["DeviceBuffer", "DeviceTensor"]
