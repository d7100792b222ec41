"""Backend discovery (entry points), lazy loading, selection (set_context and the environment),
and the errors for a missing plugin or a missing native library."""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import minispore as ms
from minispore import cli
from minispore.backend import (BackendUnavailableError, available_backends, current_backend, get_backend,
                               loaded_backends, register_backend, registry)
from minispore.common.errors import OpValueError

from backend_toys import QueueToyBackend, make_queue_toy


class FakeEntryPoint:
    """What importlib.metadata returns for an installed plugin; counts how often it is loaded."""

    def __init__(self, name, target, dist="fake-plugin"):
        self.name, self.value, self._target, self.loads = name, f"{dist.replace('-', '_')}:make", target, 0
        self.dist = type("Dist", (), {"name": dist})()

    def load(self):
        self.loads += 1
        if isinstance(self._target, Exception):
            raise self._target
        return self._target


@pytest.fixture
def entry_points(monkeypatch):
    """Replace the installed `minispore.backends` entry points with a list the test fills."""
    eps = []
    monkeypatch.setattr(registry, "_entry_points", lambda: list(eps))
    return eps


def test_set_context_selects_a_backend_and_rebinds_kernels():
    register_backend("Toy", make_queue_toy(host={"add": lambda a, b: np.add(a, b) + 100}))
    x = ms.Tensor(np.zeros(2, np.float32))
    ms.set_context(device_target="Toy")
    assert current_backend().name == "QueueToy" and ms.get_context("device_target") == "Toy"
    np.testing.assert_array_equal((x + x).asnumpy(), [100, 100])
    ms.set_context(device_target="CPU")
    np.testing.assert_array_equal((x + x).asnumpy(), [0, 0])
    assert current_backend().name == "CPU"


def test_plugins_are_discovered_without_loading_and_loaded_once_when_selected(entry_points):
    ep = FakeEntryPoint("Fake", make_queue_toy(name="Fake"))
    entry_points.append(ep)
    assert available_backends()[0] == "CPU"                            # the reference first
    assert "Fake" in available_backends() and ep.loads == 0           # listing reads metadata only
    assert "Fake" not in loaded_backends()
    ms.set_context(device_target="Fake")
    ms.set_context(device_target="CPU")
    ms.set_context(device_target="Fake")
    assert ep.loads == 1 and current_backend().name == "Fake" and "Fake" in loaded_backends()
    registry._instances.pop("Fake")                                    # forget it for the next tests


def test_a_known_plugin_that_is_not_installed_says_what_to_install(entry_points, monkeypatch):
    monkeypatch.delitem(registry._instances, "Ascend", raising=False)     # as if never installed
    ms.set_context(device_target="CPU")
    with pytest.raises(BackendUnavailableError) as e:
        ms.set_context(device_target="Ascend")
    msg = str(e.value)
    assert "Backend 'Ascend' is not available" in msg and "pip install minispore-ascend" in msg
    assert "pip install -e plugins/ascend" in msg
    assert ms.get_context("device_target") == "CPU" and current_backend().name == "CPU"   # unchanged


def test_an_unknown_backend_name_is_an_op_value_error_listing_the_known_ones(entry_points):
    with pytest.raises(OpValueError, match=r"For 'set_context', expected device_target in \['CPU'"):
        ms.set_context(device_target="Gpu9000")
    with pytest.raises(OpValueError, match="set_context"):
        ms.set_context(device_target=3)


def test_a_plugin_whose_native_library_is_missing_raises_its_own_message(entry_points):
    def factory():
        raise BackendUnavailableError("Fake", "libascendcl.so was not found", hint="source set_env.sh")

    entry_points.append(FakeEntryPoint("Fake", factory))
    with pytest.raises(BackendUnavailableError,
                       match=r"^Backend 'Fake' is not available: libascendcl.so was not found. source set_env.sh$"):
        ms.set_context(device_target="Fake")
    assert current_backend().name == "CPU"
    assert "Fake" not in loaded_backends()                             # a later retry loads it again


def test_a_plugin_that_fails_to_import_is_reported_with_its_distribution(entry_points):
    entry_points.append(FakeEntryPoint("Fake", ImportError("No module named 'fake_plugin._native'")))
    with pytest.raises(BackendUnavailableError) as e:
        get_backend("Fake")
    assert "fake-plugin" in str(e.value) and "No module named 'fake_plugin._native'" in str(e.value)
    assert isinstance(e.value.__cause__, ImportError)


def test_a_factory_that_fails_otherwise_or_returns_a_non_backend_is_reported(entry_points):
    def broken():
        raise OSError("device 7 is busy")

    register_backend("Broken", broken)
    with pytest.raises(BackendUnavailableError, match="Backend 'Broken' is not available: .*OSError: device 7 is busy"):
        get_backend("Broken")
    register_backend("NotABackend", lambda: object())
    with pytest.raises(BackendUnavailableError, match="returned object, not a minispore.backend.Backend"):
        get_backend("NotABackend")


def test_register_backend_rejects_bad_arguments():
    with pytest.raises(OpValueError, match="register_backend"):
        register_backend("", QueueToyBackend)
    with pytest.raises(OpValueError, match="register_backend"):
        register_backend("Toy", "not callable")
    with pytest.raises(OpValueError, match="unregister_backend"):
        registry.unregister_backend("CPU")


def test_minispore_info_lists_each_backend_with_what_its_info_says(entry_points):
    register_backend("Toy", make_queue_toy(host={"add": np.add}))

    def missing():
        raise BackendUnavailableError("Fake", "libascendcl.so was not found")
    entry_points.append(FakeEntryPoint("Fake", missing))
    info = cli.info_dict()
    status = {b["name"]: b["status"] for b in info["backends"]}
    assert status["Toy"].startswith("ok (backend_toys.QueueToyBackend)")
    assert "libascendcl.so was not found" in status["Fake"]
    assert info["backend_info"]["Toy"] == {"kernels": 1, "device_kernels": 0, "runtime": "bytearray pool",
                                           "pool_bytes": 1 << 22}
    assert info["backend_info"]["CPU"]["runtime"] == "NumPy (reference)"
    text = cli._format_info(info)
    assert "runtime: bytearray pool" in text and "Toy: ok" in text


# ---------------------------------------------------------------------------------------------
# selection from the environment, with a real installed entry point (a dist-info on PYTHONPATH)
def _fake_installed_plugin(tmp_path, body):
    (tmp_path / "toyplug.py").write_text(textwrap.dedent(body))
    info = tmp_path / "toyplug-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toyplug\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[minispore.backends]\nToyEnv = toyplug:make\n")


def _run(code, tmp_path, **env):
    full = {**os.environ, "PYTHONPATH": str(tmp_path), **env}
    full.pop("MINISPORE_VALIDATE_WITH_CPU", None)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full, timeout=120)


def test_environment_variable_selects_an_installed_plugin_at_import(tmp_path):
    _fake_installed_plugin(tmp_path, """
        import numpy as np
        from minispore.backend import HostBackend

        class ToyEnv(HostBackend):                   # host memory, own kernels, counted fallbacks
            name = "ToyEnv"

            def __init__(self):
                super().__init__()
                self.kernels = {"add": lambda a, b: np.add(a, b) * 10}

        def make():
            return ToyEnv()
    """)
    code = textwrap.dedent("""
        import json, warnings
        warnings.simplefilter("ignore")
        import numpy as np, minispore as ms
        from minispore.backend import current_backend
        x = ms.Tensor(np.ones(2, np.float32))
        added = (x + x).asnumpy().tolist()
        exp = float(ms.ops.exp(x).asnumpy()[0])
        print(json.dumps([ms.get_context("device_target"), current_backend().name, added, exp,
                          dict(current_backend().fallbacks)]))
    """)
    r = _run(code, tmp_path, MINISPORE_DEVICE_TARGET="ToyEnv")
    assert r.returncode == 0, r.stderr
    target, name, added, exp, fallbacks = json.loads(r.stdout)
    assert (target, name, added, fallbacks) == ("ToyEnv", "ToyEnv", [20.0, 20.0], {"exp": 1})
    assert exp == pytest.approx(np.e, rel=1e-6)
    r = _run(code, tmp_path)                                           # no variable: the CPU default
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)[:3] == ["CPU", "CPU", [2.0, 2.0]]


def test_environment_variable_naming_a_missing_plugin_fails_at_first_use_not_at_import(tmp_path):
    # a typo in the variable must not make `import minispore` (and so `minispore info`) unusable;
    # the error comes when a kernel first needs the backend, and names what was found
    code = textwrap.dedent("""
        import numpy as np, minispore as ms
        from minispore.backend import registry
        print("imported;", registry.environment_error())
        try:
            ms.Tensor(np.ones(2, np.float32)) + 1
        except Exception as e:
            print(type(e).__name__, e)
    """)
    r = _run(code, tmp_path, MINISPORE_DEVICE_TARGET="NoSuchDevice")
    assert r.returncode == 0, r.stderr
    first, second = r.stdout.strip().splitlines()[:2]
    assert first.startswith("imported;") and "MINISPORE_DEVICE_TARGET" in first and "NoSuchDevice" in first
    assert second.startswith("BackendUnavailableError") and "NoSuchDevice" in second and "CPU" in second
