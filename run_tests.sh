#!/usr/bin/env bash
# The test command (README, "Run the tests"):
#   1. create .venv if it is missing (any Python >= 3.10 with venv; set PYTHON=... to pick one),
#   2. install minispore with its test extras (pytest, hypothesis, nbmake, mkdocs, selenium ...),
#      PyTorch 2.13.0 (pinned in the 'torch' extra; used as an oracle by some tests) and the 'dist'
#      extra (mpi4py + the mpich wheel: the multi-process tests run under its mpiexec),
#   3. install Debian's chromium + chromium-driver for the browser test when they are missing and
#      we are root (otherwise that one test is skipped, and this says so),
#   4. check the import layers with `lint-imports` (import-linter; the contracts are in .importlinter),
#   5. run the fast suite: tests/ plus every notebook in tutorials/ (executed by nbmake), on 2
#      workers. Extra arguments go to pytest, e.g. `./run_tests.sh --runslow` or `-k autodiff`.
set -euo pipefail
cd "$(dirname "$0")"

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 10))' \
        || { echo "minispore needs Python >= 3.10 (found: $("$PYTHON" --version 2>&1))" >&2; exit 1; }
    echo "== creating .venv with $("$PYTHON" --version 2>&1)"
    "$PYTHON" -m venv .venv
fi

echo "== installing minispore[test,torch,dist] into .venv"
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test,torch,dist]'
# the Ascend plugin (its own package; its tests in tests/plugins/ascend run on the C emulator of the
# ACL runtime, compiled with gcc on first use, or on a real NPU when ASCEND_HOME_PATH is set)
.venv/bin/python -m pip install --quiet --disable-pip-version-check --no-deps -e plugins/ascend

if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
    :
elif [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "== installing Debian's chromium and chromium-driver (for the browser test)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
else
    echo "== NOTE: chromium/chromedriver are not installed and this is not root with apt-get:" \
         "the browser test will be skipped (install the Debian packages chromium and chromium-driver)"
fi

# the import rules of ARCHITECTURE.md §2 (the contracts in .importlinter): a lower layer importing
# a higher one, the plugin importing minispore internals, or an import cycle fails here, before
# the long test run (tests/docs/test_import_contracts.py runs the same check inside pytest)
echo "== checking import layers (lint-imports)"
.venv/bin/lint-imports --no-cache

echo "== running pytest"
exec .venv/bin/python -m pytest -n 2 --nbmake tests tutorials "$@"
