"""The ACL runtime seen from Python: one device, its memory pool, streams and events.

`AclRuntime(libs, device_id)` does the start-up sequence of every ACL program (acl_api.md §1):
`aclInit` (100002 "already initialised" is fine: someone else in the process did it), check the id
against `aclrtGetDeviceCount`, `aclrtSetDevice`. The current device is *per thread* in ACL, so the
runtime remembers its context and re-binds it (`aclrtSetCurrentContext`) on any other thread that
calls in - a worker thread would otherwise get 107002.

`MemoryPool` is a caching allocator over `aclrtMalloc` (the one every framework has: device
allocation is slow and synchronizing on real hardware). Requests are rounded up to 512-byte bins;
freed blocks go to a per-size free list and are reused. Blocks freed while work that may use them
is still queued (an aclnn workspace) are *deferred*: they rejoin the free list only after the stream
is synchronized, because `aclrtFree` - and reuse by a kernel on another stream - does not wait for
queued work. On out-of-memory the pool releases its cache and retries once before raising.
"""
from __future__ import annotations

import ctypes
import numbers
import threading
from collections import defaultdict
from ctypes import byref, c_float, c_int32, c_size_t, c_uint32, c_void_p

from .errors import INVALID_PARAM, MEMORY_FREE, REPEAT_INITIALIZE, AclDeviceError, AclError, AclOutOfMemoryError, make_checker

ACL_MEM_MALLOC_HUGE_FIRST = 0
H2D, D2H, D2D = 1, 2, 3
ACL_EVENT_SYNC, ACL_EVENT_TIME_LINE = 0x1, 0x8
ACL_HBM_MEM = 1
BIN = 512                     # pool granularity (a multiple of ACL's 32-byte alignment)
SIZE_MAX = 2 ** (8 * ctypes.sizeof(c_size_t)) - 1
# the largest request the pool accepts: rounding it up to a whole bin must still fit a size_t
MAX_REQUEST = SIZE_MAX - BIN + 1


def check_nbytes(nbytes, func: str = "aclrtMalloc", limit: int = SIZE_MAX) -> int:
    """`nbytes` as an int in [0, limit], checked in Python BEFORE ctypes sees it: ctypes converts
    -1 to a size_t of 2**64 - 1 and 2**64 + 5 to 5 without complaint, so an unchecked bad size
    would silently allocate the wrong amount."""
    if isinstance(nbytes, bool) or not isinstance(nbytes, numbers.Integral):
        raise AclError(func, INVALID_PARAM, f"the size must be an int number of bytes, got {nbytes!r} "
                                            f"({type(nbytes).__name__})")
    if not 0 <= nbytes <= limit:
        raise AclError(func, INVALID_PARAM, f"the size must be in [0, {limit}] bytes (a size_t), got {int(nbytes)}")
    return int(nbytes)


class AclRuntime:
    """ACL initialised with one device selected. See the module docstring."""

    def __init__(self, libs, device_id: int = 0):
        self.libs = libs
        self.rt = rt = libs.rt
        self.check = make_checker(rt)
        code = rt.aclInit(None)
        if code != REPEAT_INITIALIZE:
            self.check(code, "aclInit")
        n = c_uint32()
        self.check(rt.aclrtGetDeviceCount(byref(n)), "aclrtGetDeviceCount")
        self.device_count = n.value
        if not 0 <= device_id < self.device_count:
            raise AclDeviceError("aclrtSetDevice", 107001,
                                 f"device id {device_id} is out of range: {self.device_count} device(s) visible "
                                 f"(ASCEND_RT_VISIBLE_DEVICES / MINISPORE_ASCEND_DEVICE_ID)")
        self.check(rt.aclrtSetDevice(device_id), "aclrtSetDevice")
        self.device_id = device_id
        ctx = c_void_p()
        self.check(rt.aclrtGetCurrentContext(byref(ctx)), "aclrtGetCurrentContext")
        self.context = ctx.value
        self._bound = threading.local()
        self._bound.ok = True
        self.pool = MemoryPool(self)

    def bind_thread(self):
        """Make this runtime's context current on the calling thread (cheap after the first call)."""
        if not getattr(self._bound, "ok", False):
            self.check(self.rt.aclrtSetCurrentContext(self.context), "aclrtSetCurrentContext")
            self._bound.ok = True

    # -- identity --------------------------------------------------------------------------------------
    def version(self) -> str:
        a, b, c = c_int32(), c_int32(), c_int32()
        self.check(self.rt.aclrtGetVersion(byref(a), byref(b), byref(c)), "aclrtGetVersion")
        return f"{a.value}.{b.value}.{c.value}"

    def soc_name(self) -> str:
        s = self.rt.aclrtGetSocName()
        return s.decode() if s else "unknown"

    def mem_info(self):
        self.bind_thread()
        free, total = c_size_t(), c_size_t()
        self.check(self.rt.aclrtGetMemInfo(ACL_HBM_MEM, byref(free), byref(total)), "aclrtGetMemInfo")
        return free.value, total.value

    # -- raw memory ------------------------------------------------------------------------------------
    def malloc(self, nbytes: int) -> int:
        nbytes = check_nbytes(nbytes)
        self.bind_thread()
        ptr = c_void_p()
        self.check(self.rt.aclrtMalloc(byref(ptr), nbytes, ACL_MEM_MALLOC_HUGE_FIRST), "aclrtMalloc")
        return ptr.value

    def free(self, ptr: int):
        self.check(self.rt.aclrtFree(ptr), "aclrtFree")

    def memcpy(self, dst: int, dst_max: int, src: int, count: int, kind: int):
        self.bind_thread()
        self.check(self.rt.aclrtMemcpy(dst, dst_max, src, count, kind), "aclrtMemcpy")

    def memcpy_async(self, dst: int, dst_max: int, src: int, count: int, kind: int, stream):
        self.bind_thread()
        self.check(self.rt.aclrtMemcpyAsync(dst, dst_max, src, count, kind, stream), "aclrtMemcpyAsync")

    # -- streams and events ----------------------------------------------------------------------------
    def create_stream(self) -> int:
        self.bind_thread()
        s = c_void_p()
        self.check(self.rt.aclrtCreateStream(byref(s)), "aclrtCreateStream")
        return s.value

    def destroy_stream(self, s):
        self.synchronize_stream(s)                      # the docs: synchronize before destroying
        self.check(self.rt.aclrtDestroyStream(s), "aclrtDestroyStream")

    def synchronize_stream(self, s):
        self.bind_thread()
        try:
            self.check(self.rt.aclrtSynchronizeStream(s), "aclrtSynchronizeStream")
        finally:
            self.pool.release_deferred(s)

    def create_event(self) -> int:
        self.bind_thread()
        e = c_void_p()
        self.check(self.rt.aclrtCreateEventWithFlag(byref(e), ACL_EVENT_SYNC | ACL_EVENT_TIME_LINE),
                   "aclrtCreateEventWithFlag")
        return e.value

    def destroy_event(self, e):
        self.check(self.rt.aclrtDestroyEvent(e), "aclrtDestroyEvent")

    def record_event(self, e, s):
        self.bind_thread()
        self.check(self.rt.aclrtRecordEvent(e, s), "aclrtRecordEvent")

    def stream_wait_event(self, s, e):
        self.bind_thread()
        self.check(self.rt.aclrtStreamWaitEvent(s, e), "aclrtStreamWaitEvent")

    def synchronize_event(self, e):
        self.check(self.rt.aclrtSynchronizeEvent(e), "aclrtSynchronizeEvent")

    def elapsed_ms(self, start, end) -> float:
        ms = c_float()
        self.check(self.rt.aclrtEventElapsedTime(byref(ms), start, end), "aclrtEventElapsedTime")
        return ms.value

    def synchronize_device(self):
        self.bind_thread()
        try:
            self.check(self.rt.aclrtSynchronizeDevice(), "aclrtSynchronizeDevice")
        finally:
            self.pool.release_deferred(None, all_streams=True)


class MemoryPool:
    """Caching allocator over aclrtMalloc. See the module docstring."""

    def __init__(self, runtime: AclRuntime):
        self.rt = runtime
        self.free_blocks: dict[int, list[int]] = defaultdict(list)     # bin size -> device pointers
        self.deferred: dict = defaultdict(list)                        # stream -> [(ptr, size)]
        self.size_of: dict[int, int] = {}                              # live pointer -> bin size
        self.in_use = 0               # bytes handed out
        self.cached = 0               # bytes held in free lists
        self.peak_in_use = 0
        self.mallocs = 0              # aclrtMalloc calls (cache misses)
        self._lock = threading.Lock()

    @staticmethod
    def bin_size(nbytes: int) -> int:
        return max(BIN, -(-int(nbytes) // BIN) * BIN)

    def alloc(self, nbytes: int) -> int:
        size = self.bin_size(check_nbytes(nbytes, limit=MAX_REQUEST))
        with self._lock:
            lst = self.free_blocks.get(size)
            if lst:
                ptr = lst.pop()
                self.cached -= size
            else:
                ptr = None
        if ptr is None:
            try:
                ptr = self.rt.malloc(size)
            except AclOutOfMemoryError:
                self.empty_cache()                       # give cached blocks back, try once more
                ptr = self.rt.malloc(size)
            self.mallocs += 1
        with self._lock:
            self.size_of[ptr] = size
            self.in_use += size
            self.peak_in_use = max(self.peak_in_use, self.in_use)
        return ptr

    def free(self, ptr: int, stream=None, deferred: bool = False):
        """Return a block. `deferred=True`: work queued on `stream` may still use it, so it is
        reusable only after that stream is synchronized."""
        with self._lock:
            size = self.size_of.pop(ptr, None)
            if size is None:                             # a double free would corrupt the free lists
                raise AclError("aclrtFree", MEMORY_FREE, f"{ptr!r} is not a live block of the memory pool "
                                                         f"(freed already, or not allocated by it)")
            self.in_use -= size
            if deferred:
                self.deferred[stream].append((ptr, size))
            else:
                self.free_blocks[size].append(ptr)
                self.cached += size

    def release_deferred(self, stream, all_streams: bool = False):
        with self._lock:
            keys = list(self.deferred) if all_streams else [stream]
            for k in keys:
                for ptr, size in self.deferred.pop(k, ()):
                    self.free_blocks[size].append(ptr)
                    self.cached += size

    def empty_cache(self):
        with self._lock:
            blocks = [p for lst in self.free_blocks.values() for p in lst]
            self.free_blocks.clear()
            self.cached = 0
        for ptr in blocks:
            self.rt.free(ptr)

    def stats(self) -> dict:
        return {"in_use": self.in_use, "cached": self.cached, "peak_in_use": self.peak_in_use, "mallocs": self.mallocs}
