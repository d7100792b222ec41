"""The Backend interface a device plugin implements (ARCHITECTURE.md §1: a backend supplies a kernel
for a primitive, or falls back to the CPU one explicitly).

A backend is one object, registered under a name ("CPU", "Ascend", "Toy", ...), that offers five
things. Everything below is the contract a plugin relies on; `minispore/backend/cpu.py` is the
reference implementation (its `HostBackend` — host memory, synchronous streams, your kernels — is
the smallest complete backend to subclass) and `tutorials/04_writing_a_backend_plugin.ipynb` a
complete toy plugin with its own device memory and asynchronous streams.

1. **Device memory.**
   `alloc(nbytes) -> DeviceBuffer` returns an opaque handle (a subclass of `DeviceBuffer`; all the
   core reads is `.nbytes`; the Ascend plugin keeps its `aclrtMalloc` pointer on it). The core
   never calls `alloc(0)`: its helpers allocate at least one byte. `free(buf)` returns it.
   Copies, with byte offsets so that one allocation can hold many tensors (an arena laid out by
   a memory plan):

       copy_h2d(dst_buf, src_array, *, offset=0)        host ndarray  -> device bytes
       copy_d2h(dst_array, src_buf, *, offset=0)        device bytes  -> host ndarray (filled in place)
       copy_d2d(dst_buf, src_buf, nbytes, *, dst_offset=0, src_offset=0)

   They follow `aclrtMemcpy`: synchronous for the host (the copy is done when they return) but
   NOT ordered after kernels still queued on a stream. Synchronize the stream that produced the
   data before reading it back; the helpers in `staging.py` do.

   A `DeviceTensor(buffer, shape, dtype, offset=0)` describes one C-contiguous (row-major) tensor
   inside a buffer: `dtype` is a minispore DType, `offset` is in bytes. Device kernels receive them.
   (Both handles are defined in `device_memory.py`, at the bottom of the package, and re-exported
   here.)

2. **Streams and events.** Opaque handles of the backend's choosing (`aclrtStream`/`aclrtEvent`
   pointers for Ascend; plain objects for the synchronous CPU backend):
   `create_stream()`, `destroy_stream(s)`, `synchronize_stream(s)`; `create_event()`,
   `destroy_event(e)`, `record_event(e, s)` (the event completes when the work queued on `s`
   before it has run), `stream_wait_event(s, e)` (work queued on `s` afterwards waits for `e`),
   `synchronize_event(e)`; and `synchronize()` (wait for the whole device). `default_stream` is
   created on first use; override it to return your runtime's own default stream (may be None).

3. **Kernels, two tables keyed by primitive name** (`minispore.ops.primitive.PRIMITIVES`):

   * `kernels[name](*arrays_or_values, **attrs) -> ndarray | tuple` — the eager (PyNative) kernel.
     Same calling convention as the primitive's CPU `impl`: NumPy arrays for tensor inputs (possibly
     non-contiguous views), Python values otherwise, attributes as keyword arguments; the result is
     cast to the inferred dtype by the executor. **Eager mode stages through host memory**: the
     core's Tensor keeps its storage in a NumPy array (that is what makes minispore readable and
     lets autodiff, checkpoints and printing stay backend-agnostic), so an eager device kernel
     copies its inputs in, launches, synchronizes and copies the result out. Device-resident
     execution — values that stay on the device from one kernel to the next — is the job of a
     plugin's graph executor, which uses the second table.
   * `device_kernels[name](ins, outs, attrs, stream) -> None` — the device-resident kernel: `ins`
     holds a `DeviceTensor` for every tensor input and the plain Python value for anything else,
     `outs` one preallocated `DeviceTensor` per output (shapes/dtypes from inference), `attrs` the
     attribute dict; it enqueues work on `stream` and may return before the work is done.

   A plugin fills either table or both. When a primitive has only a device kernel, `kernel_for`
   derives the eager kernel by staging (`staging.eager_kernel_from_device`); when a graph executor
   asks `device_kernel_for` a primitive that has only a host kernel, or none, it gets one that
   synchronizes, copies to the host, runs that kernel, and copies back.

4. **Explicit fallback.** A primitive the backend has no kernel for runs the CPU reference (its
   `impl`) — never silently: the first time each op falls back, a `BackendFallbackWarning` says
   "Ascend has no kernel for 'softplus'; running the CPU reference", and every fallback call is
   counted in `fallbacks` (a `collections.Counter` tests and users can read; `reset_fallbacks()`
   clears it). A kernel that cannot handle one particular call (a dtype, a layout) can hand it on
   with `return self.fallback_kernel(prim)(*args, **attrs)`, which is counted the same way.

5. **`info() -> dict`**: what `minispore info` prints for this backend (extend the base dict with,
   e.g., `"runtime": "emulator"` or `"runtime": "CANN at /usr/local/Ascend/..."`).

6. Optionally, **`graph_executor(plan, jit_level)`**: the executor `jit` should run a compiled
   graph with on this backend, at any jit level, or None (the default) for the core's executor of
   that level, which calls the eager kernels node by node. `plan` is a `DevicePlan`
   (`device_plan.py`): launches over buffers whose offsets, lifetimes, streams and events the core
   has planned (at `device_alignment` bytes), so a device-resident executor only allocates, binds
   and launches - it never reads the graph IR. A backend that does not override it costs nothing.

Selection and loading live in `registry.py` (entry-point group `minispore.backends`,
`set_context(device_target=...)`, env `MINISPORE_DEVICE_TARGET`); shadow validation against the
CPU reference (env `MINISPORE_VALIDATE_WITH_CPU=1`) in `validate.py`, applied by `kernel_for` and
`device_kernel_for`, so a plugin gets it without doing anything. A plugin whose native library is
missing raises `BackendUnavailableError` from its factory, with a message saying what to install.
"""
from __future__ import annotations

import os
import sys
import warnings
from collections import Counter

import numpy as np

from ..common.errors import MinisporeRuntimeError
from . import staging, validate
from .device_memory import DeviceBuffer, DeviceTensor
from .device_plan import DEVICE_ALIGNMENT


_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _user_stacklevel() -> int:
    """The `stacklevel` that makes a warning point at the first caller outside minispore."""
    f, level = sys._getframe(2), 2          # frame 2 = the caller of the function that warns
    while f is not None and os.path.abspath(f.f_code.co_filename).startswith(_PKG_DIR + os.sep):
        f, level = f.f_back, level + 1
    return level if f is not None else 2


class BackendUnavailableError(MinisporeRuntimeError):
    """A backend cannot be used here: its plugin is not installed, or its native library is missing.

    `BackendUnavailableError("Ascend", "libascendcl.so was not found", hint="source set_env.sh")`
    reads "Backend 'Ascend' is not available: libascendcl.so was not found. source set_env.sh".
    """

    def __init__(self, backend: str, reason: str, hint: str = ""):
        self.backend, self.reason, self.hint = backend, reason, hint
        msg = f"Backend '{backend}' is not available: {reason}"
        super().__init__(msg + (f". {hint}" if hint else ""))


class BackendFallbackWarning(UserWarning):
    """A primitive ran the CPU reference because the current backend has no kernel for it."""


class Backend:
    """Base class of every backend. See the module docstring for the contract.

    Subclasses set `name`, fill `self.kernels` / `self.device_kernels` in `__init__` (after calling
    `super().__init__()`), and implement the memory, stream and event methods below.
    """

    name = "base"

    def __init__(self):
        self.kernels: dict = {}              # primitive name -> eager kernel (NumPy in/out)
        self.device_kernels: dict = {}       # primitive name -> kernel(ins, outs, attrs, stream)
        self.fallbacks: Counter = Counter()  # primitive name -> calls that ran the CPU reference
        self._warned: set = set()
        self._fallback_kernels: dict = {}
        self._default_stream = None
        self._has_default_stream = False

    # -- device memory -------------------------------------------------------------------------
    def alloc(self, nbytes: int) -> DeviceBuffer:
        raise NotImplementedError(f"{type(self).__name__}.alloc")

    def free(self, buf: DeviceBuffer) -> None:
        raise NotImplementedError(f"{type(self).__name__}.free")

    def copy_h2d(self, dst: DeviceBuffer, src: np.ndarray, *, offset: int = 0) -> None:
        raise NotImplementedError(f"{type(self).__name__}.copy_h2d")

    def copy_d2h(self, dst: np.ndarray, src: DeviceBuffer, *, offset: int = 0) -> None:
        raise NotImplementedError(f"{type(self).__name__}.copy_d2h")

    def copy_d2d(self, dst: DeviceBuffer, src: DeviceBuffer, nbytes: int, *,
                 dst_offset: int = 0, src_offset: int = 0) -> None:
        raise NotImplementedError(f"{type(self).__name__}.copy_d2d")

    # -- streams and events ----------------------------------------------------------------------
    def create_stream(self):
        raise NotImplementedError(f"{type(self).__name__}.create_stream")

    def destroy_stream(self, stream) -> None:
        raise NotImplementedError(f"{type(self).__name__}.destroy_stream")

    def synchronize_stream(self, stream) -> None:
        raise NotImplementedError(f"{type(self).__name__}.synchronize_stream")

    def create_event(self):
        raise NotImplementedError(f"{type(self).__name__}.create_event")

    def destroy_event(self, event) -> None:
        raise NotImplementedError(f"{type(self).__name__}.destroy_event")

    def record_event(self, event, stream) -> None:
        raise NotImplementedError(f"{type(self).__name__}.record_event")

    def stream_wait_event(self, stream, event) -> None:
        raise NotImplementedError(f"{type(self).__name__}.stream_wait_event")

    def synchronize_event(self, event) -> None:
        raise NotImplementedError(f"{type(self).__name__}.synchronize_event")

    def synchronize(self) -> None:
        """Wait until all work queued on every stream of the device has run."""
        raise NotImplementedError(f"{type(self).__name__}.synchronize")

    @property
    def default_stream(self):
        """The stream eager staging and simple executors use (created on first use)."""
        if not self._has_default_stream:
            self._default_stream = self.create_stream()
            self._has_default_stream = True
        return self._default_stream

    # -- helpers built on the methods above ------------------------------------------------------
    def to_device(self, array: np.ndarray) -> DeviceTensor:
        """Allocate a DeviceTensor and copy `array` into it (a synchronous host copy)."""
        from ..common.dtype import from_numpy_dtype
        array = np.asarray(array)
        data = np.ascontiguousarray(array)        # (makes a 0-d array 1-d: the shape comes from `array`)
        t = DeviceTensor(self.alloc(max(data.nbytes, 1)), array.shape, from_numpy_dtype(array.dtype))
        if data.nbytes:
            self.copy_h2d(t.buffer, data, offset=0)
        return t

    def to_host(self, tensor: DeviceTensor) -> np.ndarray:
        """A new host array with `tensor`'s contents. Synchronize the producing stream first."""
        out = np.empty(tensor.shape, dtype=tensor.dtype.np)
        if out.nbytes:
            self.copy_d2h(out, tensor.buffer, offset=tensor.offset)
        return out

    # -- kernels -----------------------------------------------------------------------------------
    def implements(self, name: str) -> bool:
        """Whether this backend has its own kernel (eager or device) for primitive `name`."""
        return name in self.kernels or name in self.device_kernels

    def kernel_for(self, prim):
        """The eager kernel for `prim`: this backend's, one staged from its device kernel, or the
        counted CPU fallback. Wrapped for shadow validation when that is on."""
        k = self.kernels.get(prim.name)
        if k is None:
            dk = self.device_kernels.get(prim.name)
            if dk is None:
                return self.fallback_kernel(prim)
            k = staging.eager_kernel_from_device(self, prim, dk)
        if validate.enabled():
            k = validate.shadow_kernel(self, prim, k)
        return k

    def device_kernel_for(self, prim):
        """The device-resident kernel for `prim` (for graph executors): this backend's, or one that
        stages its eager kernel (or the counted CPU fallback) through host memory."""
        dk = self.device_kernels.get(prim.name)
        if dk is None:
            host = self.kernels.get(prim.name)
            if host is None:
                host = self.fallback_kernel(prim)
            elif validate.enabled():
                host = validate.shadow_kernel(self, prim, host)
            return staging.device_kernel_from_host(self, host)
        if validate.enabled():
            dk = validate.shadow_device_kernel(self, prim, dk)
        return dk

    def fallback_kernel(self, prim):
        """`prim`'s CPU reference kernel, counted in `fallbacks` and announced once per op."""
        k = self._fallback_kernels.get(prim.name)
        if k is not None:
            return k
        impl, name, counter, warned = prim.impl, prim.name, self.fallbacks, self._warned
        backend_name = self.name

        def fallback(*args, **attrs):
            counter[name] += 1
            if name not in warned:
                warned.add(name)
                warnings.warn(f"{backend_name} has no kernel for '{name}'; running the CPU reference",
                              BackendFallbackWarning, stacklevel=_user_stacklevel())
            return impl(*args, **attrs)

        fallback.__name__ = f"cpu_fallback_{name}"
        fallback.__qualname__ = fallback.__name__
        self._fallback_kernels[name] = fallback
        return fallback

    def reset_fallbacks(self) -> None:
        """Clear the fallback counter and warn again on the next fallback of each op."""
        self.fallbacks.clear()
        self._warned.clear()

    # -- graphs ------------------------------------------------------------------------------------
    device_alignment = DEVICE_ALIGNMENT      # bytes: every offset and size of a DevicePlan for this backend

    def graph_executor(self, plan, jit_level: str = "O0"):
        """An executor (an object with `.run(*arrays) -> list`) for the graph `plan` (a DevicePlan,
        see device_plan.py) stands for, compiled at `jit_level`, or None to use the core's executor
        for the level (which runs the eager kernels, `prim.kernel`, node by node). A plugin
        overrides this with its device-resident executor (binds the plan's buffers, launches
        `device_kernel_for(launch.op)` per launch); O1 and O2 mean host code generation in the
        core, so a device says what it does with them (run as O0, or return None)."""
        return None

    # -- reporting ---------------------------------------------------------------------------------
    def info(self) -> dict:
        """What `minispore info` shows for this backend; plugins extend it (`{**super().info(), ...}`)."""
        return {"kernels": len(self.kernels), "device_kernels": len(self.device_kernels)}

    def __repr__(self):
        return f"<Backend {self.name}: {len(self.kernels)} kernels, {len(self.device_kernels)} device kernels>"


__all__ = ["Backend", "BackendUnavailableError", "BackendFallbackWarning", "DeviceBuffer", "DeviceTensor"]
