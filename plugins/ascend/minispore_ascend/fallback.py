"""The CPU reference for one call a device kernel cannot make (counted, like every fallback).

A device kernel that finds it cannot handle a particular call - a dtype, a layout, an option
aclnn lacks - hands that call on instead of failing: the backend's counted fallback
(`Backend.fallback_kernel`: announced once per op, every call counted in `backend.fallbacks`) run
on host copies of the inputs, its results copied into the preallocated outputs. The stream is
synchronized first (the inputs may still be being produced) and the copies are synchronous, so
the outputs are in place when this returns.
"""
from __future__ import annotations

import numpy as np

from minispore.backend.base import DeviceTensor
from minispore.ops.primitive import get_primitive


def cpu_fallback(backend, prim_name: str, ins, outs, attrs, stream) -> None:
    """Run primitive `prim_name`'s counted CPU fallback for one device-kernel call (see above)."""
    host = backend.fallback_kernel(get_primitive(prim_name))
    backend.synchronize_stream(stream)
    args = [backend.to_host(x) if isinstance(x, DeviceTensor) else x for x in ins]
    result = host(*args, **attrs)
    results = tuple(result) if isinstance(result, (tuple, list)) else (result,)
    for out, r in zip(outs, results):
        arr = np.asarray(r, dtype=out.dtype.np, order="C")
        if arr.nbytes:
            backend.copy_h2d(out.buffer, arr, offset=out.offset)
