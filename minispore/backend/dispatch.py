"""The eager (PyNative) executor: infer, run the backend kernel, wrap, maybe record the tape.

This is the hottest path in minispore; it is written to do as little as possible per op:
inference (which rejects bad input before any kernel runs), one kernel call, one dtype check,
and the tape only when a gradient is being computed.
"""
from __future__ import annotations

import os

import numpy as np

from ..common import grad_state
from ..common.errors import MinisporeRuntimeError
from ..common.tensor import Tensor, _wrap
from ..ops import primitive

# MINISPORE_CHECK_KERNELS=1 also checks each kernel's output shape against inference (tinygrad's
# SPEC idea); the parity kit turns it on.
CHECK_KERNELS = os.environ.get("MINISPORE_CHECK_KERNELS", "0") == "1"


def set_check_kernels(flag: bool):
    global CHECK_KERNELS
    CHECK_KERNELS = bool(flag)


def _conform(arr, aval, prim):
    """Make a kernel result match its inferred dtype (and, when checking, its shape)."""
    if type(arr) is not np.ndarray:
        arr = np.asarray(arr)
    npdt = aval.dtype.np
    if arr.dtype != npdt:
        arr = arr.astype(npdt)
    if CHECK_KERNELS and arr.shape != aval.shape:
        raise MinisporeRuntimeError(f"kernel for '{prim.name}' returned shape {arr.shape}, "
                                    f"inference said {aval.shape}")
    return arr


def eager_execute(prim, inputs, attrs):
    avals = prim.infer(*inputs, **attrs)
    arrays = [x._data if isinstance(x, Tensor) else x for x in inputs]
    result = prim.kernel(*arrays, **attrs)
    if type(avals) is tuple:
        outs = tuple(_wrap(_conform(r, a, prim)) for r, a in zip(result, avals))
    else:
        outs = _wrap(_conform(result, avals, prim))
    if grad_state.depth and prim.bprop is not None:
        for x in inputs:
            if isinstance(x, Tensor) and x._node is not None:
                grad_state.record(prim, inputs, attrs, outs)
                break
    return outs


primitive.set_executor(eager_execute)
