"""`AscendBackend`: minispore's Backend interface on the ACL runtime (a real NPU or the emulator).

    set_context(device_target="Ascend")          # or MINISPORE_DEVICE_TARGET=Ascend

Memory is `AclBuffer`s from the runtime's caching pool; copies are `aclrtMemcpy` (synchronous for
the host, NOT ordered after queued kernels - the staging code synchronizes first); streams and
events are raw `aclrtStream`/`aclrtEvent` handles. Kernels are device kernels (kernels.py) that
launch aclnn operators; the core derives the eager ones by staging through host memory. Graphs
compiled with `jit` (at O0, and at O1/O2, which run as O0: `graph_executor`) run on the KBK
executor (kbk.py), values staying on the device.

Environment:
  MINISPORE_ASCEND_DEVICE_ID (or ASCEND_DEVICE_ID)   device to use (default 0)
  ASCEND_HOME_PATH                                    a CANN install; else the emulator is used
  MINISPORE_ASCEND_UNSAFE_SKIP_SYNC=1                 fault injection for tests: synchronize_stream
                                                      does nothing (the emulator then returns stale
                                                      data - which is exactly what it must catch)
"""
from __future__ import annotations

import os
import warnings

import numpy as np

from minispore.backend.base import Backend, BackendUnavailableError, DeviceBuffer, DeviceTensor

from .acl import errors
from .acl.loader import load_libraries
from .acl.runtime import D2D, D2H, H2D, MAX_REQUEST, AclRuntime, check_nbytes
from .kernels import build_device_kernels

_LEVEL_WARNED: set = set()          # the jit levels already announced as running like O0

class AclBuffer(DeviceBuffer):
    """`nbytes` of device memory at `ptr` (an opaque device address: never dereference it).

    `freed` is set when the buffer goes back to the pool. The pool keeps the memory allocated (and
    may hand the same address to the next `alloc`), so the runtime - and the emulator - would still
    accept copies through a stale buffer; the flag is what catches a double free or a use after free.
    """

    __slots__ = ("ptr", "freed")

    def __init__(self, ptr: int, nbytes: int):
        super().__init__(nbytes)
        self.ptr = ptr
        self.freed = False

    def __repr__(self):
        state = " (freed)" if self.freed else ""
        return f"<AclBuffer {self.nbytes} bytes at {self.ptr:#x}{state}>"


def _live(buf: AclBuffer, func: str, role: str) -> AclBuffer:
    """`buf`, or the ACL error a real device would give (at best) for memory that is not allocated.
    Buffers without the flag (the KBK arenas: raw aclrtMalloc, checked by the runtime) pass."""
    if getattr(buf, "freed", False):
        code = errors.MEMORY_FREE if func == "aclrtFree" else errors.RT_PARAM_INVALID
        what = "was freed already (double free)" if func == "aclrtFree" else "was freed (use after free)"
        raise errors.AclError(func, code, f"the {role} {buf!r} {what}")
    return buf


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
        nbytes = check_nbytes(nbytes, limit=MAX_REQUEST)   # -1 or 2**64 + 5 never reach ctypes
        return AclBuffer(self.runtime.pool.alloc(nbytes), nbytes)

    def free(self, buf: AclBuffer) -> None:
        self.runtime.pool.free(_live(buf, "aclrtFree", "buffer").ptr)
        buf.freed = True

    def free_after_sync(self, buf: AclBuffer, stream) -> None:
        """Return `buf` once `stream` has been synchronized (queued work may still read it)."""
        self.runtime.pool.free(_live(buf, "aclrtFree", "buffer").ptr, stream, deferred=True)
        buf.freed = True

    def copy_h2d(self, dst: AclBuffer, src: np.ndarray, *, offset: int = 0) -> None:
        _live(dst, "aclrtMemcpy", "destination")
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
        _live(src, "aclrtMemcpy", "source")
        if not dst.flags.c_contiguous:
            tmp = np.empty_like(dst, order="C")
            self.copy_d2h(tmp, src, offset=offset)
            dst[...] = tmp
            return
        if dst.nbytes:
            self.runtime.memcpy(dst.ctypes.data, dst.nbytes, src.ptr + offset, dst.nbytes, D2H)

    def copy_d2d(self, dst: AclBuffer, src: AclBuffer, nbytes: int, *, dst_offset: int = 0, src_offset: int = 0) -> None:
        _live(dst, "aclrtMemcpy", "destination"), _live(src, "aclrtMemcpy", "source")
        if nbytes:
            self.runtime.memcpy(dst.ptr + dst_offset, dst.nbytes - dst_offset, src.ptr + src_offset, nbytes, D2D)

    def copy_d2d_async(self, dst, src, stream) -> None:
        """Device-to-device copy of DeviceTensor `src` into `dst`, ordered on `stream`."""
        _live(dst.buffer, "aclrtMemcpyAsync", "destination"), _live(src.buffer, "aclrtMemcpyAsync", "source")
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
    def graph_executor(self, plan, jit_level: str = "O0"):
        """The executor `jit` uses for a graph on this backend: its DevicePlan kernel by kernel on ACL
        streams (kbk.py), at O0, O1 and O2 alike. O1's operator fusion generates host C kernels and
        O2 one host Python function over a host arena - nothing an NPU can run - so O1 and O2 run
        the captured graph's aclnn kernels as O0 does, and say so once per level. Other (registered)
        levels are the core's: None."""
        if jit_level not in ("O0", "O1", "O2"):
            return None
        if jit_level != "O0" and jit_level not in _LEVEL_WARNED:
            _LEVEL_WARNED.add(jit_level)
            what = "operator fusion generates host C kernels" if jit_level == "O1" else \
                "it generates one host Python function over a host arena"
            warnings.warn(f"Ascend: jit_level '{jit_level}' runs kernel by kernel on the device, as O0 ({what}, "
                          f"which the device cannot run)", UserWarning, stacklevel=4)
        from .kbk import KBKExecutor
        return KBKExecutor(plan, self, jit_level)

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
