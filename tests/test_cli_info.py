"""The `minispore` command line: `info` end to end (subprocess), and the lazy `train`/`generate`
registration points (in process, with a stand-in command module)."""
import json
import os
import subprocess
import sys
import types

import ml_dtypes
import numpy as np
import pytest

import minispore as ms
from minispore import cli
from minispore.backend import registry
from minispore.common.errors import OpValueError


def _run(*args, exe=None):
    cmd = [exe] if exe else [sys.executable, "-m", "minispore"]
    return subprocess.run(cmd + list(args), capture_output=True, text=True, timeout=120)


def test_python_m_minispore_info_reports_versions_dtypes_backends():
    r = _run("info")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert out.startswith(f"minispore    {ms.__version__}")
    assert f"NumPy        {np.__version__}" in out
    assert f"ml_dtypes    {ml_dtypes.__version__}" in out
    assert f"Python       {sys.version.split()[0]}" in out
    assert "Bool, UInt8, UInt16, UInt32, UInt64, Int8, Int16, Int32, Int64, Float16, BFloat16, Float32, Float64" in out
    assert "CPU (current): ok" in out
    assert "tinyshakespeare.txt (1,115,394 bytes)" in out


def test_info_json_is_machine_readable():
    r = _run("info", "--json")
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    assert info["minispore"] == ms.__version__ and info["numpy"] == np.__version__
    assert info["dtypes"] == ["Bool", "UInt8", "UInt16", "UInt32", "UInt64", "Int8", "Int16", "Int32", "Int64", "Float16", "BFloat16",
                              "Float32", "Float64"]
    assert {"name": "CPU", "current": True} == {k: v for k, v in info["backends"][0].items() if k != "status"}
    assert info["data_bytes"]["tinyshakespeare"] == 1_115_394
    assert info["primitives"] > 50


def test_console_script():
    exe = os.path.join(os.path.dirname(sys.executable), "minispore")
    if not os.path.exists(exe):
        pytest.skip("the console script is not installed next to this interpreter")
    r = _run("info", exe=exe)
    assert r.returncode == 0 and r.stdout.startswith("minispore"), r.stderr
    assert _run("--version", exe=exe).stdout.strip() == f"minispore {ms.__version__}"


def test_usage_errors():
    r = _run()
    assert r.returncode == 2 and "usage: minispore" in r.stderr
    r = _run("frobnicate")
    assert r.returncode == 2 and "invalid choice" in r.stderr
    r = _run("info", "--bogus")
    assert r.returncode == 2


def test_info_does_not_import_the_model_code():
    code = ("import sys, io, contextlib; from minispore.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()): main(['info'])\n"
            "print('minispore.llm' in sys.modules, 'minispore.nn' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.stdout.split() == ["False", "False"], r.stderr


def test_a_broken_plugin_backend_is_reported_not_fatal(monkeypatch):
    def broken_factory():
        raise RuntimeError("no NPU here")

    monkeypatch.setitem(registry._factories, "FAKE_NPU", broken_factory)
    backends = {b["name"]: b for b in cli.info_dict()["backends"]}
    assert backends["FAKE_NPU"]["status"] == "failed to load: RuntimeError: no NPU here"
    assert backends["CPU"]["current"] and not backends["FAKE_NPU"]["current"]


@pytest.fixture
def fake_commands(monkeypatch):
    """A stand-in for minispore.llm.cli_commands, registered under the lazy command names."""
    mod = types.ModuleType("fake_cli_commands")
    calls = []

    def add_train_args(parser):
        parser.add_argument("--max-iters", type=int, default=10)

    def run_train(args):
        calls.append(("train", args.max_iters))
        if args.max_iters < 0:
            raise OpValueError("train", "--max-iters >= 0", str(args.max_iters))
        if args.max_iters == 99:
            raise KeyboardInterrupt
        return 0

    def add_generate_args(parser):
        parser.add_argument("--prompt", required=True)

    def run_generate(args):
        calls.append(("generate", args.prompt))

    for f in (add_train_args, run_train, add_generate_args, run_generate):
        setattr(mod, f.__name__, f)
    monkeypatch.setitem(sys.modules, "fake_cli_commands", mod)
    for name, (_, add, run, help_text) in list(cli.LAZY_COMMANDS.items()):
        monkeypatch.setitem(cli.LAZY_COMMANDS, name, ("fake_cli_commands", add, run, help_text))
    return calls


def test_lazy_commands_dispatch_to_the_registered_module(fake_commands, capsys):
    assert cli.main(["train", "--max-iters", "3"]) == 0
    assert cli.main(["generate", "--prompt", "ROMEO:"]) == 0
    assert fake_commands == [("train", 3), ("generate", "ROMEO:")]
    assert cli.main(["train", "--max-iters", "-1"]) == 1
    assert "minispore train: error: For 'train', expected --max-iters >= 0" in capsys.readouterr().err
    assert cli.main(["train", "--max-iters", "99"]) == 130
    assert "interrupted" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        cli.main(["generate"])                                  # its own required argument
    assert info.value.code == 2


def test_missing_command_module_gives_a_clear_error(monkeypatch, capsys):
    monkeypatch.setitem(cli.LAZY_COMMANDS, "train", ("minispore.no_such_module", "add", "run", "train"))
    assert cli.main(["train"]) == 1
    err = capsys.readouterr().err
    assert "minispore train: error: this command is not available: minispore.no_such_module" in err
