"""The eager (PyNative) executor: infer, run the backend kernel, wrap, maybe record the tape.

This is the hottest path in minispore; it is written to do as little as possible per op:
inference (which rejects bad input before any kernel runs), one kernel call, one dtype check,
and the tape only when a gradient is being computed.
"""
from __future__ import annotations

import os

import numpy as np

from ..common import grad_state
from ..common.errors import (MinisporeError, MinisporeRuntimeError, OpIndexError, OpTypeError,
                             OpValueError)
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


def _describe(inputs, attrs):
    parts = [f"Tensor(shape={x.shape}, dtype={x.dtype})" if isinstance(x, Tensor) else
             f"{type(x).__name__} {x!r}"[:60] for x in inputs]
    parts += [f"{k}={v!r}"[:60] for k, v in attrs.items()]
    return "(" + ", ".join(parts) + ")"


def _wrap_error(prim, inputs, attrs, err, stage):
    """Turn an unexpected exception from an inference rule or kernel into a minispore error.

    Inference rules are meant to reject bad input with their own precise message; this is the
    safety net that keeps a raw NumPy/Python traceback from ever being the user's message.
    """
    cls = (OpTypeError if isinstance(err, TypeError) else OpIndexError if isinstance(err, IndexError)
           else OpValueError if isinstance(err, ValueError) else None)
    expected = f"inputs its {stage} accepts ({type(err).__name__}: {err})"
    if cls is None:
        return MinisporeRuntimeError(f"For '{prim.name}', the {stage} failed on inputs "
                                     f"{_describe(inputs, attrs)}: {type(err).__name__}: {err}")
    return cls(prim.name, expected, _describe(inputs, attrs))


def _unwrap(x):
    return x._data if isinstance(x, Tensor) else x


# Building a Tensor without running __init__: `_new(Tensor)` is `Tensor.__new__(Tensor)` with the
# attribute lookup done once here (this is common.tensor._wrap, inlined on the hot path).
_new = object.__new__
_ndarray = np.ndarray


def eager_execute(prim, inputs, attrs):
    """Run one primitive eagerly: infer -> kernel -> wrap -> (maybe) record on the tape.

    Per-op cost matters here (an 8x8 add is ~0.25 µs of NumPy and every extra microsecond of
    bookkeeping shows in small models), so the common cases are spelled out instead of going
    through generic helpers: calls without attributes skip `**attrs`, one and two inputs skip the
    unwrapping list, and a single ndarray result already of the inferred dtype is wrapped inline.
    The general path (`_conform`, `_wrap`) handles everything else with identical results.
    """
    try:
        avals = prim.infer(*inputs, **attrs) if attrs else prim.infer(*inputs)
    except MinisporeError:
        raise
    except Exception as e:          # an inference rule let bad input through: still report it clearly
        raise _wrap_error(prim, inputs, attrs, e, "shape/dtype inference") from e
    try:
        n = len(inputs)
        if n == 2:
            x, y = inputs
            a = x._data if isinstance(x, Tensor) else x
            b = y._data if isinstance(y, Tensor) else y
            result = prim.kernel(a, b, **attrs) if attrs else prim.kernel(a, b)
        elif n == 1:
            x = inputs[0]
            a = x._data if isinstance(x, Tensor) else x
            result = prim.kernel(a, **attrs) if attrs else prim.kernel(a)
        else:
            result = prim.kernel(*[_unwrap(x) for x in inputs], **attrs)
    except MinisporeError:
        raise
    except Exception as e:
        raise _wrap_error(prim, inputs, attrs, e, "kernel") from e

    if type(avals) is tuple:
        outs = tuple([_wrap(_conform(r, a, prim)) for r, a in zip(result, avals)])
    elif type(result) is _ndarray and result.dtype is avals.dtype.np and not CHECK_KERNELS:
        # fast path (nearly every op): the kernel already produced the inferred dtype. NumPy's
        # built-in dtypes are singletons, so `is` is an exact test; anything else goes to _conform.
        outs = _new(Tensor)
        outs._data = result
        outs._node = None
        outs._version = 0
    else:
        outs = _wrap(_conform(result, avals, prim))

    # Record only while a gradient's forward pass runs, only for differentiable primitives, and
    # only if some input is tracked (has a tape node) - otherwise nothing could flow back.
    if grad_state.depth and prim.bprop is not None:
        for x in inputs:
            if isinstance(x, Tensor) and x._node is not None:
                grad_state.record(prim, inputs, attrs, outs)
                break
    return outs


primitive.set_executor(eager_execute)
