"""Toy backends for the backend tests: a complete implementation of the Backend interface whose
device memory is a bytearray pool and whose streams are *deferred* queues — work runs only when
something synchronizes — so code that forgets to synchronize reads stale memory, as on a device.
"""
from __future__ import annotations

import numpy as np

from minispore.backend import Backend, DeviceBuffer, DeviceTensor
from minispore.common.errors import MinisporeRuntimeError

ALIGN = 64


class PoolBuffer(DeviceBuffer):
    __slots__ = ("addr", "live")

    def __init__(self, addr, nbytes):
        super().__init__(nbytes)
        self.addr = addr
        self.live = True


class ToyStream:
    def __init__(self):
        self.queue = []          # closures not run yet
        self.launched = 0        # how many closures ever ran (tests read it)


class ToyEvent:
    def __init__(self):
        self.done = True         # complete before the first record, as ACL's events
        self.stream = None


class QueueToyBackend(Backend):
    """Bytearray-pool memory, deferred streams, kernels given as tables."""

    name = "QueueToy"

    def __init__(self, kernels=None, device_kernels=None, pool_bytes=1 << 22):
        super().__init__()
        self.pool = bytearray(pool_bytes)
        self.memory = np.frombuffer(self.pool, dtype=np.uint8)   # writable: backed by the bytearray
        self.top = 0
        self.free_blocks = []                                    # (addr, nbytes) of freed blocks
        self.kernels = dict(kernels or {})
        self.device_kernels = dict(device_kernels or {})
        self.syncs = 0
        self.live_buffers = 0                                    # allocated and not yet freed

    # memory: first fit in the free list, else bump; 64-byte aligned starts
    def alloc(self, nbytes):
        size = -(-int(nbytes) // ALIGN) * ALIGN
        self.live_buffers += 1
        for i, (addr, n) in enumerate(self.free_blocks):
            if n >= size:
                del self.free_blocks[i]
                return PoolBuffer(addr, nbytes)
        if self.top + size > len(self.pool):
            self.live_buffers -= 1
            raise MinisporeRuntimeError(f"QueueToy: out of device memory ({nbytes} bytes asked)")
        addr, self.top = self.top, self.top + size
        self.pool[addr:addr + size] = b"\xa5" * size            # garbage, as fresh device memory
        return PoolBuffer(addr, nbytes)

    def free(self, buf):
        assert buf.live, "double free"
        buf.live = False
        self.live_buffers -= 1
        self.free_blocks.append((buf.addr, -(-buf.nbytes // ALIGN) * ALIGN))

    def _bytes(self, buf, offset, nbytes):
        assert buf.live, "use after free"
        assert 0 <= offset and offset + nbytes <= buf.nbytes, "out of bounds"
        return self.memory[buf.addr + offset: buf.addr + offset + nbytes]

    def copy_h2d(self, dst, src, *, offset=0):
        raw = np.ascontiguousarray(src).reshape(-1).view(np.uint8)
        self._bytes(dst, offset, raw.size)[:] = raw

    def copy_d2h(self, dst, src, *, offset=0):
        dst.reshape(-1).view(np.uint8)[:] = self._bytes(src, offset, dst.nbytes)

    def copy_d2d(self, dst, src, nbytes, *, dst_offset=0, src_offset=0):
        self._bytes(dst, dst_offset, nbytes)[:] = self._bytes(src, src_offset, nbytes)

    def view(self, t: DeviceTensor) -> np.ndarray:
        """What a kernel 'on the device' sees: a NumPy view into the pool."""
        return self._bytes(t.buffer, t.offset, t.nbytes).view(t.dtype.np).reshape(t.shape)

    # streams: deferred FIFOs
    def create_stream(self):
        return ToyStream()

    def destroy_stream(self, stream):
        self.synchronize_stream(stream)

    def enqueue(self, stream, fn):
        stream.queue.append(fn)

    def synchronize_stream(self, stream):
        self.syncs += 1
        while stream.queue:
            stream.queue.pop(0)()
            stream.launched += 1

    def create_event(self):
        return ToyEvent()

    def destroy_event(self, event):
        pass

    def record_event(self, event, stream):
        event.done, event.stream = False, stream

        def mark():
            event.done = True
        stream.queue.append(mark)

    def synchronize_event(self, event):
        s = event.stream
        while not event.done and s.queue:
            s.queue.pop(0)()
            s.launched += 1

    def stream_wait_event(self, stream, event):
        stream.queue.append(lambda: self.synchronize_event(event))

    def synchronize(self):
        self.synchronize_stream(self.default_stream)

    def info(self):
        return {**super().info(), "runtime": "bytearray pool", "pool_bytes": len(self.pool)}


def device_kernel(backend, fn):
    """A device kernel from a NumPy function: enqueued on the stream, computing into the output
    view. Non-tensor arguments pass through; fn's result is written into the (single) output."""
    def kernel(ins, outs, attrs, stream):
        def run():
            args = [backend.view(x) if isinstance(x, DeviceTensor) else x for x in ins]
            backend.view(outs[0])[...] = fn(*args, **attrs)
        backend.enqueue(stream, run)
    return kernel


def make_queue_toy(host=None, device=None, name="QueueToy"):
    """A factory for register_backend: host = {prim: numpy fn}, device = {prim: numpy fn} (wrapped
    with `device_kernel`)."""
    def factory():
        b = QueueToyBackend(kernels=host)
        b.name = name
        b.device_kernels = {k: device_kernel(b, f) for k, f in (device or {}).items()}
        return b
    return factory
