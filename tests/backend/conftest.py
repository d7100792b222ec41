"""Every backend test leaves the process as it found it: CPU current, validation off, toy
backends unregistered (xdist workers run many test files in one process)."""
import pytest

from minispore.backend import registry, validate


@pytest.fixture(autouse=True)
def _restore_backend_state():
    factories = dict(registry._factories)
    validating = validate.enabled()
    yield
    import minispore as ms
    ms.set_context(device_target="CPU")
    validate.set_validate_with_cpu(validating)
    for name in list(registry._factories):
        if name not in factories:
            registry.unregister_backend(name)
