"""Staging through host memory: adapters between the two kernel tables of a Backend.

minispore's Tensor keeps its storage in a NumPy array, so an eager (PyNative) kernel on a device has
to move data: copy the inputs to the device, launch, wait, copy the results back. Graph executors
keep values on the device instead and call device kernels directly; when a primitive has no device
kernel they need the opposite adapter. Both are written once here, on top of the Backend's memory
and stream methods, so a plugin only implements kernels of the kind that suits it.

The staging order is deliberate: `copy_d2h` behaves like `aclrtMemcpy` and does not wait for work
queued on a stream, so the stream is synchronized before any result is read back. Forgetting that
is the classic device bug: the copy returns whatever the memory held before the kernel ran.
"""
from __future__ import annotations

import numpy as np

from ..common.dtype import from_numpy_dtype
from ..ops.primitive import AbstractTensor
from .device_memory import DeviceTensor


def _abstract(x):
    """What inference needs of an eager kernel argument: AbstractTensor for arrays, else the value."""
    if isinstance(x, np.ndarray):
        return AbstractTensor(x.shape, from_numpy_dtype(x.dtype))
    if isinstance(x, np.generic):
        return AbstractTensor((), from_numpy_dtype(x.dtype))
    return x


def eager_kernel_from_device(backend, prim, device_kernel):
    """An eager kernel (NumPy in/out) that runs `device_kernel` on `backend`'s default stream.

    Output shapes and dtypes come from the primitive's own inference on the argument shapes (the
    eager executor has already validated the call, so this repeats a cheap, successful rule)."""
    infer = prim.infer

    def staged(*args, **attrs):
        avals = infer(*[_abstract(a) for a in args], **attrs)
        multi = type(avals) is tuple
        out_avals = avals if multi else (avals,)
        stream = backend.default_stream
        owned = []
        try:
            ins = []
            for a in args:
                if isinstance(a, (np.ndarray, np.generic)):
                    t = backend.to_device(np.asarray(a))
                    owned.append(t.buffer)
                    ins.append(t)
                else:
                    ins.append(a)
            outs = []
            for av in out_avals:
                nbytes = av.size * av.dtype.np.itemsize
                buf = backend.alloc(max(nbytes, 1))
                owned.append(buf)
                outs.append(DeviceTensor(buf, av.shape, av.dtype))
            device_kernel(ins, outs, attrs, stream)
            backend.synchronize_stream(stream)        # results are read only after the work ran
            results = tuple(backend.to_host(o) for o in outs)
        finally:
            for buf in owned:
                backend.free(buf)
        return results if multi else results[0]

    staged.__name__ = f"staged_{prim.name}"
    staged.__qualname__ = staged.__name__
    staged.device_kernel = device_kernel
    return staged


def device_kernel_from_host(backend, host_kernel):
    """A device kernel that synchronizes `stream`, copies its inputs to the host, runs
    `host_kernel` (NumPy in/out) and copies the results into the preallocated outputs."""

    def staged(ins, outs, attrs, stream):
        backend.synchronize_stream(stream)            # inputs may still be being produced
        args = [backend.to_host(x) if isinstance(x, DeviceTensor) else x for x in ins]
        result = host_kernel(*args, **attrs)
        results = tuple(result) if isinstance(result, (tuple, list)) else (result,)
        if len(results) != len(outs):
            from ..common.errors import MinisporeRuntimeError
            raise MinisporeRuntimeError(f"kernel {getattr(host_kernel, '__name__', host_kernel)} returned "
                                        f"{len(results)} outputs, the node has {len(outs)}")
        for out, r in zip(outs, results):
            arr = np.asarray(r, dtype=out.dtype.np, order="C")   # (ascontiguousarray would make 0-d 1-d)
            if arr.shape != out.shape:
                from ..common.errors import MinisporeRuntimeError
                raise MinisporeRuntimeError(f"kernel {getattr(host_kernel, '__name__', host_kernel)} returned "
                                            f"shape {arr.shape}, the output buffer holds {out.shape}")
            if arr.nbytes:
                backend.copy_h2d(out.buffer, arr, offset=out.offset)

    staged.host_kernel = host_kernel
    return staged


__all__ = ["eager_kernel_from_device", "device_kernel_from_host"]
