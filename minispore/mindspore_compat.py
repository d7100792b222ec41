"""Run a MindSpore script, unchanged, on minispore.

    python -m minispore.mindspore_compat train_lenet.py --epochs 1     # the script's own arguments

or, from Python, `minispore.mindspore_compat.install()` before the script's imports. Afterwards
`import mindspore as ms`, `from mindspore import nn, ops`, `import mindspore.dataset as ds` and
`from mindspore.train import Model, LossMonitor` all give minispore's modules: the script's text
stays exactly what MindSpore's tutorials write, which is how the end-to-end fidelity tests run the
same files on both frameworks.

How: a meta-path finder answers every import of `mindspore` or `mindspore.<sub>` with the module
`minispore` or `minispore.<sub>` (the very same module object, so `mindspore.nn is minispore.nn`).
A name minispore lacks fails as an ordinary ImportError naming the minispore module it looked for.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import runpy
import sys

_SOURCE, _TARGET = "mindspore", "minispore"


class _AliasLoader(importlib.abc.Loader):
    """Hands back the already-imported minispore module. The import system stamps the alias's
    spec onto whatever create_module returns; exec_module puts the module's own spec back, or
    `minispore.__spec__` would name 'mindspore' and an alias loader (importlib.resources and
    importlib.util.find_spec('minispore') then break for the rest of the process)."""

    def __init__(self, module):
        self.module = module
        self.own_spec = module.__spec__

    def create_module(self, spec):
        return self.module

    def exec_module(self, module):       # already executed under its minispore name
        module.__spec__ = self.own_spec


class _MindsporeAlias(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if fullname != _SOURCE and not fullname.startswith(_SOURCE + "."):
            return None
        real = _TARGET + fullname[len(_SOURCE):]
        try:
            module = importlib.import_module(real)
        except ModuleNotFoundError as e:
            raise ModuleNotFoundError(f"'{fullname}' is not available in minispore (no module '{real}')",
                                      name=fullname) from e
        spec = importlib.machinery.ModuleSpec(fullname, _AliasLoader(module), is_package=hasattr(module, "__path__"))
        return spec


def install():
    """Make `import mindspore...` import minispore (idempotent)."""
    if not any(isinstance(f, _MindsporeAlias) for f in sys.meta_path):
        sys.meta_path.insert(0, _MindsporeAlias())


def installed() -> bool:
    return any(isinstance(f, _MindsporeAlias) for f in sys.meta_path)


def uninstall():
    """Remove the alias and forget the `mindspore*` names it created (for tests)."""
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _MindsporeAlias)]
    for name in [n for n in sys.modules if n == _SOURCE or n.startswith(_SOURCE + ".")]:
        if getattr(sys.modules[name], "__name__", "").startswith(_TARGET):
            del sys.modules[name]


def run_script(path, argv=()):
    """Run a MindSpore script file on minispore, as `python path argv...` would."""
    install()
    old_argv = sys.argv
    sys.argv = [str(path), *argv]
    try:
        return runpy.run_path(str(path), run_name="__main__")
    finally:
        sys.argv = old_argv


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip().splitlines()[2].strip())
        return 0 if argv else 2
    run_script(argv[0], argv[1:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
