"""Fixtures for the Ascend plugin's tests. They run against the C emulator (built on first use)
unless ASCEND_HOME_PATH points to a CANN install, in which case the same tests run on the NPU."""
import numpy as np
import pytest

pytest.importorskip("minispore_ascend", reason="the Ascend plugin is not installed (pip install -e plugins/ascend)")

import minispore as ms                                   # noqa: E402
from minispore.backend import registry                   # noqa: E402


@pytest.fixture(scope="session")
def ascend():
    return registry.get_backend("Ascend")


@pytest.fixture
def on_ascend(ascend):
    """Run the test with device_target="Ascend", then switch back to the CPU."""
    ms.set_context(device_target="Ascend")
    ascend.reset_fallbacks()
    try:
        yield ascend
    finally:
        ms.set_context(device_target="CPU")


@pytest.fixture
def emulator(ascend):
    if ascend.libs.kind != "emulator":
        pytest.skip("needs the emulator (a rule only the emulator can be asked to show)")
    return ascend.libs.emulator_extras


@pytest.fixture
def slow_launches(emulator):
    """Every queued task sleeps 30 ms before it runs: a missing synchronize reads stale memory."""
    emulator.aclemuSetLaunchDelayUs(30000)
    try:
        yield
    finally:
        emulator.aclemuSetLaunchDelayUs(0)


def rng():
    return np.random.default_rng(0)
