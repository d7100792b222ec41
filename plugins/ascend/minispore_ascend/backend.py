"""`AscendBackend`: minispore's Backend interface on the ACL runtime (a real NPU or the emulator).

    set_context(device_target="Ascend")          # or MINISPORE_DEVICE_TARGET=Ascend

Memory is `AclBuffer`s from the runtime's caching pool; copies are `aclrtMemcpy` (synchronous for
the host, NOT ordered after queued kernels - the staging code synchronizes first); streams and
events are raw `aclrtStream`/`aclrtEvent` handles. Kernels are device kernels (kernels.py) that
launch aclnn operators; the core derives the eager ones by staging through host memory. Graphs
compiled with `jit` run on the KBK executor (kbk.py), values staying on the device.

Environment:
  MINISPORE_ASCEND_DEVICE_ID (or ASCEND_DEVICE_ID)   device to use (default 0)
  ASCEND_HOME_PATH                                    a CANN install; else the emulator is used
  MINISPORE_ASCEND_UNSAFE_SKIP_SYNC=1                 fault injection for tests: synchronize_stream
                                                      does nothing (the emulator then returns stale
                                                      data - which is exactly what it must catch)
"""
from __future__ import annotations

import os

import numpy as np

from minispore.backend.base import Backend, BackendUnavailableError, DeviceBuffer, DeviceTensor

from .acl import errors
from .acl.loader import load_libraries
from .acl.runtime import D2D, D2H, H2D, AclRuntime
from .kernels import build_device_kernels


class AclBuffer(DeviceBuffer):
    """`nbytes` of device memory at `ptr` (an opaque device address: never dereference it)."""

    __slots__ = ("ptr",)

    def __init__(self, ptr: int, nbytes: int):
        super().__init__(nbytes)
        self.ptr = ptr

    def __repr__(self):
        return f"<AclBuffer {self.nbytes} bytes at {self.ptr:#x}>"


class AscendBackend(Backend):
    """The Ascend plugin's backend. See the module docstring."""

    name = "Ascend"

    def __init__(self, device_id: int | None = None):
        super().__init__()
        if device_id is None:
            device_id = int(os.environ.get("MINISPORE_ASCEND_DEVICE_ID", os.environ.get("ASCEND_DEVICE_ID", "0")))
        try:
            self.libs = load_libraries()
            self.runtime = AclRuntime(self.libs, device_id)
        except errors.AclStubLibraryError as e:
            raise BackendUnavailableError(
                "Ascend", f"the ACL library is a link stub ({e})",
                hint="install the CANN toolkit and source its set_env.sh, or unset ASCEND_HOME_PATH to use the emulator") from e
        self.rt = self.runtime                      # .check() and friends
        self.launches = 0                           # aclnn phase-2 calls made (benchmarks read it)
        self.skip_sync = os.environ.get("MINISPORE_ASCEND_UNSAFE_SKIP_SYNC", "0") == "1"
        self._stream = None
        self._pending_frees: dict = {}
        self.device_kernels.update(build_device_kernels(self))

    # -- memory --------------------------------------------------------------------------------------
    def alloc(self, nbytes: int) -> AclBuffer:
        return AclBuffer(self.runtime.pool.alloc(nbytes), int(nbytes))

    def free(self, buf: AclBuffer) -> None:
        self.runtime.pool.free(buf.ptr)

    def free_after_sync(self, buf: AclBuffer, stream) -> None:
        """Return `buf` once `stream` has been synchronized (queued work may still read it)."""
        self.runtime.pool.free(buf.ptr, stream, deferred=True)

    def copy_h2d(self, dst: AclBuffer, src: np.ndarray, *, offset: int = 0) -> None:
        src = np.ascontiguousarray(src)
        if src.nbytes:
            self.runtime.memcpy(dst.ptr + offset, dst.nbytes - offset, src.ctypes.data, src.nbytes, H2D)

    def to_device(self, array: np.ndarray) -> DeviceTensor:
        """As Backend.to_device, but a 0-d array stays 0-d (np.ascontiguousarray makes it 1-d,
        and aclnn shape checks then reject a () output against a (1,) input)."""
        from minispore.common.dtype import from_numpy_dtype
        array = np.asarray(array)
        data = np.ascontiguousarray(array)
        t = DeviceTensor(self.alloc(max(data.nbytes, 1)), array.shape, from_numpy_dtype(array.dtype))
        if data.nbytes:
            self.copy_h2d(t.buffer, data, offset=0)
        return t

    def copy_d2h(self, dst: np.ndarray, src: AclBuffer, *, offset: int = 0) -> None:
        if not dst.flags.c_contiguous:
            tmp = np.empty_like(dst, order="C")
            self.copy_d2h(tmp, src, offset=offset)
            dst[...] = tmp
            return
        if dst.nbytes:
            self.runtime.memcpy(dst.ctypes.data, dst.nbytes, src.ptr + offset, dst.nbytes, D2H)

    def copy_d2d(self, dst: AclBuffer, src: AclBuffer, nbytes: int, *, dst_offset: int = 0, src_offset: int = 0) -> None:
        if nbytes:
            self.runtime.memcpy(dst.ptr + dst_offset, dst.nbytes - dst_offset, src.ptr + src_offset, nbytes, D2D)

    def copy_d2d_async(self, dst, src, stream) -> None:
        """Device-to-device copy of DeviceTensor `src` into `dst`, ordered on `stream`."""
        self.runtime.memcpy_async(dst.buffer.ptr + dst.offset, dst.buffer.nbytes - dst.offset,
                                  src.buffer.ptr + src.offset, src.nbytes, D2D, stream)

    # -- streams and events ----------------------------------------------------------------------------
    @property
    def default_stream(self):
        if self._stream is None:
            self._stream = self.runtime.create_stream()
        return self._stream

    def create_stream(self):
        return self.runtime.create_stream()

    def destroy_stream(self, stream) -> None:
        self.runtime.destroy_stream(stream)

    def synchronize_stream(self, stream) -> None:
        if self.skip_sync:                 # fault injection (tests): pretend the work is done
            return
        self.runtime.synchronize_stream(stream)

    def create_event(self):
        return self.runtime.create_event()

    def destroy_event(self, event) -> None:
        self.runtime.destroy_event(event)

    def record_event(self, event, stream) -> None:
        self.runtime.record_event(event, stream)

    def stream_wait_event(self, stream, event) -> None:
        self.runtime.stream_wait_event(stream, event)

    def synchronize_event(self, event) -> None:
        self.runtime.synchronize_event(event)

    def synchronize(self) -> None:
        if not self.skip_sync:
            self.runtime.synchronize_device()

    # -- graphs ------------------------------------------------------------------------------------------
    def graph_executor(self, graph):
        """The executor `jit` uses for `graph` on this backend: kernel by kernel on an ACL stream."""
        from .kbk import KBKExecutor
        return KBKExecutor(graph, self)

    # -- reporting -----------------------------------------------------------------------------------------
    def info(self) -> dict:
        free, total = self.runtime.mem_info()
        return {**super().info(),
                "runtime": self.libs.description,
                "device_id": self.runtime.device_id,
                "device_count": self.runtime.device_count,
                "soc": self.runtime.soc_name(),
                "acl_version": self.runtime.version(),
                "device_memory": f"{(total - free) / 2**20:.1f} MiB used of {total / 2**20:.0f} MiB",
                "pool": self.runtime.pool.stats(),
                "missing_aclnn_ops": list(self.libs.missing)}
