"""Shadow validation: run the CPU reference next to every device kernel and compare.

tinygrad's VALIDATE_WITH_CPU idea. With `MINISPORE_VALIDATE_WITH_CPU=1` in the environment (read at
import), or `set_validate_with_cpu(True)` / `with validate_with_cpu():` in code, every kernel of a
non-CPU backend is wrapped so that, on each call, the primitive's CPU reference (`impl`) also runs
on copies of the same inputs and the two results are compared. A mismatch raises a
MinisporeRuntimeError naming the op, the backend, the error and the shapes — at the kernel that is
wrong, not twenty layers later where a loss turns into NaN. Fallbacks are not wrapped: they *are*
the CPU reference.

How results are compared (the same rule the parity kit uses, `max_rel_error` and `tolerance`):

* floating outputs: `max |got - ref| / max(|ref|, 1)` — a relative error, measured against at
  least 1 so that values near zero (where rounding noise is large relative to the value, e.g. a
  matmul whose terms cancel) are compared absolutely. It must not exceed the tolerance of the
  coarser of the two dtypes: float64 1e-7, float32 1e-5, float16 1e-3, bfloat16 1.6e-2.
  NaN must match NaN and an infinity the same infinity.
* integer and boolean outputs: exactly equal.

Random primitives draw from the global generator. The wrapper saves its state, runs the backend
kernel, rewinds, runs the reference; if the reference consumed random numbers, the two results
cannot be compared (a device RNG is not NumPy's), so the call is not checked, and the generator is
left where the backend kernel left it — the program's random stream is the same with or without
validation.
"""
from __future__ import annotations

import os
from contextlib import contextmanager

import numpy as np

from ..common import context
from ..common.errors import MinisporeRuntimeError
from .device_memory import DeviceTensor

ENV_VAR = "MINISPORE_VALIDATE_WITH_CPU"
_enabled = os.environ.get(ENV_VAR, "0") not in ("", "0")
# Called after the switch flips. The registry subscribes its `rebind_kernels` (primitives hold
# their wrapped kernels, so they must be looked up again); validate sits below the registry and
# the backends and does not import them.
_on_switch: list = []

# relative tolerance per NumPy dtype name (the table; float64 as PyTorch's assert_close)
RTOL = {"float64": 1e-7, "float32": 1e-5, "float16": 1e-3, "bfloat16": 1.6e-2}


def enabled() -> bool:
    return _enabled


def on_switch(callback):
    """Register `callback()` to run after `set_validate_with_cpu` (a decorator; returns it)."""
    _on_switch.append(callback)
    return callback


def set_validate_with_cpu(flag: bool) -> None:
    """Turn shadow validation on or off (the registry then rebinds the current backend's kernels)."""
    global _enabled
    _enabled = bool(flag)
    for callback in _on_switch:
        callback()


@contextmanager
def validate_with_cpu(flag: bool = True):
    """`with validate_with_cpu(): ...` validates every kernel in the block."""
    old = _enabled
    set_validate_with_cpu(flag)
    try:
        yield
    finally:
        set_validate_with_cpu(old)


# ---------------------------------------------------------------------------------------------
# comparison
def tolerance(np_dtype) -> float:
    """The relative tolerance for results of `np_dtype` (0.0: must be exact)."""
    return RTOL.get(np.dtype(np_dtype).name, 0.0)


def _is_exact(dt) -> bool:
    return np.dtype(dt).name not in RTOL


def max_rel_error(got, ref) -> float:
    """The error measure described in the module docstring (0.0 when equal; inf for a NaN/inf
    mismatch or, for integer/bool results, any difference)."""
    got, ref = np.asarray(got), np.asarray(ref)
    if got.size == 0:
        return 0.0
    if _is_exact(got.dtype) and _is_exact(ref.dtype):
        return 0.0 if np.array_equal(got, ref) else float("inf")
    g = got.astype(np.float64)
    r = ref.astype(np.float64)
    g_fin, r_fin = np.isfinite(g), np.isfinite(r)
    # non-finite values must agree exactly: NaN with NaN, +inf with +inf
    special = ~(g_fin & r_fin)
    if special.any():
        same = (np.isnan(g) & np.isnan(r)) | (g == r)
        if not same[special].all():
            return float("inf")
    both = g_fin & r_fin
    if not both.any():
        return 0.0
    diff = np.abs(g[both] - r[both]) / np.maximum(np.abs(r[both]), 1.0)
    return float(diff.max())


def result_tolerance(got, ref) -> float:
    """Tolerance for comparing `got` with `ref`: that of the coarser of their dtypes."""
    return max(tolerance(np.asarray(got).dtype), tolerance(np.asarray(ref).dtype))


def _outputs(result):
    return tuple(result) if isinstance(result, (tuple, list)) else (result,)


def _shape_of(a):
    return a.shape if isinstance(a, (np.ndarray, np.generic, DeviceTensor)) else type(a).__name__


def compare(op: str, backend: str, got, ref, args=()) -> None:
    """Raise MinisporeRuntimeError if a backend's result differs from the CPU reference's."""
    got, ref = _outputs(got), _outputs(ref)
    shapes = [_shape_of(a) for a in args]
    if len(got) != len(ref):
        raise MinisporeRuntimeError(f"For '{op}', backend '{backend}' returned {len(got)} outputs, the CPU "
                                    f"reference {len(ref)} (inputs: {shapes})")
    for i, (g, r) in enumerate(zip(got, ref)):
        g, r = np.asarray(g), np.asarray(r)
        if g.shape != r.shape:
            raise MinisporeRuntimeError(f"For '{op}', backend '{backend}' returned output {i} of shape "
                                        f"{g.shape}, the CPU reference {r.shape} (inputs: {shapes})")
        err, tol = max_rel_error(g, r), result_tolerance(g, r)
        if err > tol:
            raise MinisporeRuntimeError(
                f"For '{op}', backend '{backend}' differs from the CPU reference: max relative error "
                f"{err:.3g} > {tol:g} in output {i} (shape {g.shape}, {g.dtype}; reference {r.dtype}); "
                f"inputs: {shapes}")


# ---------------------------------------------------------------------------------------------
# the wrappers kernel_for / device_kernel_for apply
def _run_both(run_backend, run_reference):
    """Run the backend, rewind the RNG, run the reference. Returns (got, ref, comparable)."""
    bitgen = context.rng().bit_generator
    before = bitgen.state
    got = run_backend()
    after = bitgen.state
    bitgen.state = before
    try:
        ref = run_reference()
        comparable = bitgen.state == before          # the reference drew no random numbers
    finally:
        bitgen.state = after
    return got, ref, comparable


def shadow_kernel(backend, prim, kernel):
    """Wrap an eager kernel (NumPy in/out) so that every call is checked against `prim.impl`."""
    impl, name = prim.impl, prim.name

    def validated(*args, **attrs):
        ref_args = [a.copy() if isinstance(a, np.ndarray) else a for a in args]   # kernels may write inputs
        got, ref, comparable = _run_both(lambda: kernel(*args, **attrs), lambda: impl(*ref_args, **attrs))
        if comparable:
            compare(name, backend.name, got, ref, args)
        return got

    validated.__name__ = f"validated_{name}"
    validated.__wrapped__ = kernel
    return validated


def shadow_device_kernel(backend, prim, device_kernel):
    """Wrap a device kernel so that every call is checked against `prim.impl` (synchronizes the
    stream around the call, so validation serializes device work: it is a debugging mode)."""
    impl, name = prim.impl, prim.name

    def validated(ins, outs, attrs, stream):
        backend.synchronize_stream(stream)
        host_ins = [backend.to_host(x) if isinstance(x, DeviceTensor) else x for x in ins]

        def run_device():
            device_kernel(ins, outs, attrs, stream)
            backend.synchronize_stream(stream)
            return tuple(backend.to_host(o) for o in outs)

        got, ref, comparable = _run_both(run_device, lambda: impl(*host_ins, **attrs))
        if comparable:
            ref = _outputs(ref)
            ref = tuple(np.asarray(r).astype(o.dtype.np, copy=False) for r, o in zip(ref, outs))
            compare(name, backend.name, got, ref, ins)

    validated.__wrapped__ = device_kernel
    return validated


__all__ = ["ENV_VAR", "RTOL", "enabled", "on_switch", "set_validate_with_cpu", "validate_with_cpu", "tolerance",
           "max_rel_error", "result_tolerance", "compare", "shadow_kernel", "shadow_device_kernel"]
