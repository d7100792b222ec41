"""Backend discovery and selection.

`set_context(device_target=NAME)` picks a backend. "CPU" is built in; plugins register through the
entry-point group `minispore.backends` (a callable returning a Backend instance). Selecting a
backend rebinds every primitive's `kernel` once, so the eager fast path is a single attribute read.
"""
from __future__ import annotations

from importlib import metadata

from ..common import context
from ..common.errors import OpValueError
from ..ops.primitive import PRIMITIVES
from .base import Backend, CPUBackend

_factories = {"CPU": CPUBackend}
_instances: dict[str, Backend] = {}
_current: list[Backend] = []


def register_backend(name: str, factory):
    """Register a backend factory in-process (plugins normally use the entry-point group)."""
    _factories[name] = factory
    _instances.pop(name, None)


def _entry_points():
    try:
        return list(metadata.entry_points(group="minispore.backends"))
    except Exception:      # a broken installed distribution must not break import
        return []


def available_backends() -> list[str]:
    names = set(_factories)
    names.update(ep.name for ep in _entry_points())
    return sorted(names)


def get_backend(name: str | None = None) -> Backend:
    if name is None:
        return _current[0]
    if name not in _instances:
        factory = _factories.get(name)
        if factory is None:
            for ep in _entry_points():
                if ep.name == name:
                    factory = ep.load()
                    break
        if factory is None:
            raise OpValueError("set_context", f"device_target in {available_backends()}", repr(name))
        _instances[name] = factory()
    return _instances[name]


def current_backend() -> Backend:
    return _current[0]


def rebind_kernels():
    """Point every primitive at the current backend's kernel (call after defining new primitives)."""
    b = _current[0]
    for p in PRIMITIVES.values():
        p.kernel = b.kernel_for(p)


def use_backend(name: str):
    b = get_backend(name)
    _current[:] = [b]
    rebind_kernels()
    return b


@context.on_context_change
def _on_change(key, value):
    if key == "device_target":
        use_backend(value)


_current.append(CPUBackend())
_instances["CPU"] = _current[0]
