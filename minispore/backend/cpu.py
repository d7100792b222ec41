"""The CPU reference backend: every primitive's own NumPy kernel, host memory as "device" memory.

It implements the whole Backend interface so that code written against it (a graph executor, the
staging helpers, the parity kit) runs unchanged on the CPU: a `HostBuffer` wraps a bytes ndarray,
copies are `np.copyto` on byte views, and streams and events are trivially synchronous (work runs
when it is issued, so every "queue" is always empty).

That memory-and-streams half is `HostBackend`, usable on its own: subclass it, fill `kernels`, and
you have a complete backend whose unimplemented primitives fall back (counted) to the CPU
reference — the smallest possible plugin. `CPUBackend` is `HostBackend` whose kernels are the
primitives' own `impl`s.
"""
from __future__ import annotations

import numpy as np

from ..common.errors import OpValueError
from . import staging
from .base import Backend, DeviceBuffer, DeviceTensor


class HostBuffer(DeviceBuffer):
    """CPU "device" memory: a uint8 ndarray of `nbytes`."""

    __slots__ = ("data",)

    def __init__(self, nbytes: int):
        super().__init__(nbytes)
        self.data = np.empty(self.nbytes, dtype=np.uint8)


class HostStream:
    """A stream whose work has always finished (CPU kernels run when they are called)."""

    __slots__ = ("alive",)

    def __init__(self):
        self.alive = True


class HostEvent:
    """An event that is complete as soon as it is recorded."""

    __slots__ = ("recorded",)

    def __init__(self):
        self.recorded = False


def _bytes_of(array: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(array).reshape(-1).view(np.uint8)


class HostBackend(Backend):
    """Host memory and synchronous streams; kernels from the `kernels`/`device_kernels` tables, the
    rest the counted CPU fallback (Backend's rules). Subclass it for a backend without device memory."""

    name = "Host"

    # -- memory ----------------------------------------------------------------------------------
    def alloc(self, nbytes: int) -> HostBuffer:
        if not isinstance(nbytes, (int, np.integer)) or isinstance(nbytes, bool) or nbytes < 1:
            raise OpValueError("CPUBackend.alloc", "a positive number of bytes", repr(nbytes))
        return HostBuffer(nbytes)

    def free(self, buf: HostBuffer) -> None:
        buf.data = None

    def _range(self, buf, offset, nbytes, what):
        if not isinstance(buf, HostBuffer) or buf.data is None:
            raise OpValueError(what, "a live HostBuffer of the CPU backend", repr(buf))
        if offset < 0 or offset + nbytes > buf.nbytes:
            raise OpValueError(what, f"bytes [{offset}, {offset + nbytes}) inside the {buf.nbytes}-byte buffer",
                               f"offset {offset} + {nbytes} bytes")
        return buf.data[offset:offset + nbytes]

    def copy_h2d(self, dst: HostBuffer, src: np.ndarray, *, offset: int = 0) -> None:
        src_bytes = _bytes_of(src)
        np.copyto(self._range(dst, offset, src_bytes.size, "copy_h2d"), src_bytes)

    def copy_d2h(self, dst: np.ndarray, src: HostBuffer, *, offset: int = 0) -> None:
        if not dst.flags["C_CONTIGUOUS"]:
            raise OpValueError("copy_d2h", "a C-contiguous destination array", "a non-contiguous view")
        np.copyto(dst.reshape(-1).view(np.uint8), self._range(src, offset, dst.nbytes, "copy_d2h"))

    def copy_d2d(self, dst: HostBuffer, src: HostBuffer, nbytes: int, *,
                 dst_offset: int = 0, src_offset: int = 0) -> None:
        np.copyto(self._range(dst, dst_offset, nbytes, "copy_d2d"),
                  self._range(src, src_offset, nbytes, "copy_d2d"))

    def as_array(self, tensor: DeviceTensor) -> np.ndarray:
        """A NumPy view of a DeviceTensor in host memory (only the CPU backend can offer this)."""
        raw = self._range(tensor.buffer, tensor.offset, tensor.nbytes, "as_array")
        return raw.view(tensor.dtype.np).reshape(tensor.shape)

    # -- streams and events: nothing is ever pending ------------------------------------------------
    def create_stream(self):
        return HostStream()

    def destroy_stream(self, stream) -> None:
        stream.alive = False

    def synchronize_stream(self, stream) -> None:
        pass

    def create_event(self):
        return HostEvent()

    def destroy_event(self, event) -> None:
        pass

    def record_event(self, event, stream) -> None:
        event.recorded = True

    def stream_wait_event(self, stream, event) -> None:
        pass

    def synchronize_event(self, event) -> None:
        pass

    def synchronize(self) -> None:
        pass



class CPUBackend(HostBackend):
    """The reference backend. Its eager kernels are the primitives' `impl`s, never a fallback."""

    name = "CPU"

    def implements(self, name: str) -> bool:
        from ..ops.primitive import PRIMITIVES
        return name in PRIMITIVES

    def kernel_for(self, prim):
        return prim.impl

    def device_kernel_for(self, prim):
        return staging.device_kernel_from_host(self, prim.impl)

    def info(self) -> dict:
        from ..ops.primitive import PRIMITIVES
        return {"kernels": len(PRIMITIVES), "device_kernels": 0, "runtime": "NumPy (reference)"}


__all__ = ["HostBackend", "CPUBackend", "HostBuffer"]
