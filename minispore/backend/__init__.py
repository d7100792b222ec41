"""minispore.backend: the Backend interface, the CPU reference backend, plugin discovery and selection.

The plugin contract is documented in `base.py` (its memory handles, DeviceBuffer and DeviceTensor,
live in `device_memory.py`, the bottom of the package); `registry.py` finds and selects backends;
`device_plan.py` is what a backend that runs graphs itself receives (`Backend.graph_executor`);
`staging.py` adapts eager and device kernels to each other; `validate.py` is the shadow
validation against the CPU reference; `dispatch.py` is the eager executor.
"""
from .base import Backend, BackendFallbackWarning, BackendUnavailableError, DeviceBuffer, DeviceTensor
from .cpu import CPUBackend, HostBackend, HostBuffer
from .device_plan import DeviceGraphExecutor, DevicePlan, Launch, PlannedBuffer
from .registry import (available_backends, current_backend, get_backend, loaded_backends, rebind_kernels,
                       register_backend, unregister_backend, use_backend)
from .validate import set_validate_with_cpu, validate_with_cpu

__all__ = ["Backend", "BackendFallbackWarning", "BackendUnavailableError", "DeviceBuffer", "DeviceTensor",
           "CPUBackend", "HostBackend", "HostBuffer", "DevicePlan", "Launch", "PlannedBuffer", "DeviceGraphExecutor",
           "available_backends", "current_backend", "get_backend", "loaded_backends", "rebind_kernels",
           "register_backend", "unregister_backend", "use_backend", "set_validate_with_cpu", "validate_with_cpu"]
