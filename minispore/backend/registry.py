"""Backend discovery, lazy loading and selection.

* **Discovery.** "CPU" is built in. Plugins are found through the entry-point group
  `minispore.backends`: an installed package declares, in its pyproject.toml,

      [project.entry-points."minispore.backends"]
      Ascend = "minispore_ascend:AscendBackend"

  whose target is a *factory*: a callable (usually the Backend subclass) that returns a Backend.
  In-process code (a tutorial, a test) can call `register_backend(name, factory)` instead.
* **Lazy loading.** Finding a plugin reads only installed metadata; its module is imported and
  its factory called the first time the backend is selected (or `get_backend(name)` is asked), so
  an installed plugin costs nothing until used, and a broken one cannot break `import minispore`.
* **Selection.** `set_context(device_target="Ascend")` in code, or the environment variable
  `MINISPORE_DEVICE_TARGET=Ascend`, applied when `import minispore` finishes. (MindSpore has no
  environment variable for this — `device_target` is a context key — so the variable is named after
  the key.) A variable that cannot be applied (a typo such as `Ascned`, a plugin that is not
  installed) must not break `import minispore` — `minispore info` has to work to diagnose it — so
  the error is kept and raised when a backend is first used (the first kernel call), naming the
  variable and the backends found; `set_context(device_target=...)` replaces it. Selecting a backend rebinds every primitive's `kernel` attribute once, to
  `backend.kernel_for(prim)`, so the eager fast path stays a single attribute read.
* **Errors.** Asking for a backend that is not installed raises `BackendUnavailableError` naming
  what to install (`pip install minispore-ascend`, or `pip install -e plugins/ascend` from a
  checkout); a plugin whose import fails, or whose factory raises (its native library is missing),
  raises it too, with the plugin's own reason. An unknown name is an OpValueError listing the known
  ones. A failed selection leaves the previous backend in place.

Primitives defined after a backend was selected (rare: a late-imported op family) get the backend's
kernels by `rebind_kernels()`.
"""
from __future__ import annotations

import difflib
import os
from importlib import metadata

from ..common import context
from ..common.errors import MinisporeError, OpValueError
from ..ops.primitive import PRIMITIVES
from . import validate
from .base import Backend, BackendUnavailableError
from .cpu import CPUBackend

ENTRY_POINT_GROUP = "minispore.backends"
ENV_VAR = "MINISPORE_DEVICE_TARGET"

# Plugins minispore knows by name, so that a missing one gets an install hint instead of
# "unknown backend": device_target -> (distribution, path of the plugin in a minispore checkout).
KNOWN_PLUGINS = {
    "Ascend": ("minispore-ascend", "plugins/ascend"),
}

_factories = {"CPU": CPUBackend}
_instances: dict[str, Backend] = {}
_current: list[Backend] = []
# (target, reason) when MINISPORE_DEVICE_TARGET could not be applied at import; until a backend is
# selected in code, every kernel raises it (see select_from_environment)
_environment_failure: list[tuple[str, str]] = []


def register_backend(name: str, factory) -> None:
    """Register a backend factory in-process (installed plugins use the entry-point group).

    Registering a name again replaces the factory and drops the old instance (if it is the current
    backend, it stays current until the next selection)."""
    if not isinstance(name, str) or not name:
        raise OpValueError("register_backend", "a non-empty backend name", repr(name))
    if not callable(factory):
        raise OpValueError("register_backend", "a callable factory returning a Backend", repr(factory))
    _factories[name] = factory
    _instances.pop(name, None)


def unregister_backend(name: str) -> None:
    """Forget an in-process backend (tests). The CPU backend cannot be removed."""
    if name == "CPU":
        raise OpValueError("unregister_backend", "a plugin backend name", "'CPU'")
    _factories.pop(name, None)
    _instances.pop(name, None)


def _entry_points():
    try:
        return list(metadata.entry_points(group=ENTRY_POINT_GROUP))
    except Exception:      # noqa: BLE001 - a broken installed distribution must not break import
        return []


def available_backends() -> list[str]:
    """Names of every backend that can be asked for: built in, registered, or installed (not
    loaded). The CPU reference comes first, the others in alphabetical order."""
    names = set(_factories)
    names.update(ep.name for ep in _entry_points())
    names.discard("CPU")
    return ["CPU"] + sorted(names)


def loaded_backends() -> list[str]:
    """Names of the backends already instantiated in this process."""
    return sorted(_instances)


def _install_hint(name: str) -> str:
    dist, path = KNOWN_PLUGINS[name]
    return f"Install it with: pip install {dist} (from a minispore checkout: pip install -e {path})"


def _load_factory(name: str):
    factory = _factories.get(name)
    if factory is not None:
        return factory
    for ep in _entry_points():
        if ep.name == name:
            dist = getattr(getattr(ep, "dist", None), "name", None) or ep.value
            try:
                return ep.load()
            except Exception as e:          # noqa: BLE001 - reported with what to do about it
                raise BackendUnavailableError(
                    name, f"its plugin ({dist}, entry point {ep.value}) failed to import: "
                          f"{type(e).__name__}: {e}",
                    hint="reinstall the plugin or run `minispore info` for details") from e
    if name in KNOWN_PLUGINS:
        raise BackendUnavailableError(name, "its plugin is not installed", hint=_install_hint(name))
    raise OpValueError("set_context", f"device_target in {available_backends()} (plugins add names through "
                       f"the '{ENTRY_POINT_GROUP}' entry-point group)", repr(name))


def get_backend(name: str | None = None) -> Backend:
    """The backend called `name` (loading it on first use), or the current one if `name` is None."""
    if name is None:
        return _current[0]
    backend = _instances.get(name)
    if backend is not None:
        return backend
    if not isinstance(name, str):
        raise OpValueError("set_context", "device_target as a string such as 'CPU'", repr(name))
    factory = _load_factory(name)
    try:
        backend = factory()
    except BackendUnavailableError:
        raise                                # the plugin's own, precise message
    except Exception as e:                   # noqa: BLE001 - any other failure is reported clearly
        raise BackendUnavailableError(name, f"its factory {getattr(factory, '__name__', factory)!s} "
                                            f"failed: {type(e).__name__}: {e}") from e
    if not isinstance(backend, Backend):
        raise BackendUnavailableError(name, f"its factory returned {type(backend).__name__}, not a "
                                            "minispore.backend.Backend")
    if not backend.name or backend.name == "base":
        backend.name = name
    _instances[name] = backend
    return backend


def current_backend() -> Backend:
    return _current[0]


@validate.on_switch
def rebind_kernels() -> None:
    """Point every primitive at the current backend's kernel (call after defining new primitives,
    or after changing a backend's kernel tables; shadow validation's switch calls it too)."""
    if _environment_failure:
        for p in PRIMITIVES.values():
            p.kernel = _environment_failure_kernel
        return
    b = _current[0]
    for p in PRIMITIVES.values():
        p.kernel = b.kernel_for(p)


def use_backend(name) -> Backend:
    """Make `name` the current backend (what `set_context(device_target=name)` does). A Backend
    instance is accepted too: the parity kit switches to the backend under test and back this way,
    without touching the context."""
    b = name if isinstance(name, Backend) else get_backend(name)
    _current[:] = [b]
    _environment_failure.clear()          # a backend chosen in code replaces a failed variable
    rebind_kernels()
    return b


@context.on_context_change
def _on_change(key, value):
    if key == "device_target":
        use_backend(value)


def select_from_environment() -> None:
    """Apply MINISPORE_DEVICE_TARGET (called once, at the end of `import minispore`).

    If it cannot be applied, the import still succeeds: the reason is kept (`environment_error()`,
    shown by `minispore info`) and every kernel raises it as a BackendUnavailableError, so the
    first op fails clearly instead of silently running on the CPU."""
    target = os.environ.get(ENV_VAR, "").strip()
    if not target or target == _current[0].name:
        return
    try:
        context.set_context(device_target=target)
    except MinisporeError as e:
        found = available_backends()
        if isinstance(e, BackendUnavailableError):         # a known plugin: missing or broken
            reason = f"{ENV_VAR}={target!r} could not be applied: {e.reason}" + (f". {e.hint}" if e.hint else "")
        else:                                              # not a backend name at all
            close = difflib.get_close_matches(target.lower(), [n.lower() for n in found], n=1, cutoff=0.6)
            guess = next((n for n in found if close and n.lower() == close[0]), None)
            reason = (f"{ENV_VAR}={target!r} names no backend" + (f" (did you mean {guess!r}?)" if guess else ""))
        reason += (f"; the backends found are {', '.join(found)}. Set {ENV_VAR} to one of them, or unset it "
                   f"for the CPU reference")
        _environment_failure[:] = [(target, reason)]
        rebind_kernels()


def environment_error() -> str | None:
    """Why MINISPORE_DEVICE_TARGET could not be applied (None when it was, or is unset)."""
    if not _environment_failure:
        return None
    target, reason = _environment_failure[0]
    return str(BackendUnavailableError(target, reason))


def check_environment() -> None:
    """Raise now what the first kernel would raise while MINISPORE_DEVICE_TARGET cannot be applied
    (nothing otherwise): for a command that wants the error before it starts its work."""
    if _environment_failure:
        _environment_failure_kernel()


def _environment_failure_kernel(*args, **kwargs):
    """Every primitive's kernel while MINISPORE_DEVICE_TARGET names a backend that cannot be used."""
    target, reason = _environment_failure[0]
    raise BackendUnavailableError(target, reason)


_current.append(CPUBackend())
_instances["CPU"] = _current[0]


__all__ = ["ENTRY_POINT_GROUP", "ENV_VAR", "KNOWN_PLUGINS", "register_backend", "unregister_backend",
           "available_backends", "loaded_backends", "get_backend", "current_backend", "rebind_kernels",
           "use_backend", "select_from_environment", "environment_error",
           "check_environment"]
