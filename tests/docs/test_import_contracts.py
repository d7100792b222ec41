"""The import rules of ARCHITECTURE.md §2, written as import-linter contracts in `.importlinter`.

./run_tests.sh runs `lint-imports` before pytest; the first test runs it again inside pytest, so
a developer who runs only pytest sees a broken layer too. The others check that each contract
catches what it is meant to: it is kept on the real import graph and broken by one injected import
of the kind it forbids (so a contract that silently matched nothing would fail here).
"""
from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

import grimp
import pytest
from importlinter import api
from importlinter.contracts.acyclic_siblings import AcyclicSiblingsContract
from importlinter.contracts.forbidden import ForbiddenContract
from importlinter.contracts.layers import LayersContract

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / ".importlinter"
CONTRACT_TYPES = {cls.type_name: cls for cls in (LayersContract, ForbiddenContract, AcyclicSiblingsContract)}


def test_lint_imports_passes():
    """`lint-imports` (the command ./run_tests.sh runs) keeps every contract."""
    run = subprocess.run([sys.executable, "-c", "from importlinter.cli import lint_imports_command as c; c()",
                          "--no-cache"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-3000:]
    assert "0 broken" in run.stdout


@pytest.fixture(scope="module")
def config():
    return api.read_configuration(str(CONFIG))


@pytest.fixture(scope="module")
def graph(config):
    # the same graph lint-imports builds: minispore and minispore_ascend, no external packages
    return grimp.build_graph(*config["session_options"]["root_packages"], include_external_packages=False,
                             cache_dir=None)


def _check(config, contract_id, graph):
    """Check one contract of .importlinter on `graph` (a copy: checking removes ignored imports)."""
    (options,) = [c for c in config["contracts_options"] if c["id"] == contract_id]
    contract = CONTRACT_TYPES[options["type"]](name=options["name"], session_options=config["session_options"],
                                               contract_options=options)
    return contract.check(copy.deepcopy(graph), verbose=False)


def _with_imports(graph, *edges):
    bad = copy.deepcopy(graph)
    for importer, imported in edges:
        bad.add_import(importer=importer, imported=imported, line_number=1, line_contents="import injected")
    return bad


@pytest.mark.parametrize("contract_id, injected", [
    # a low layer importing a high one (also what a function-level import looks like to grimp)
    ("layers", [("minispore.common.dtype", "minispore.nn.cell")]),
    # the old trainer edge: train must not know about LLaMA
    ("layers", [("minispore.train.serialization", "minispore.llm.model")]),
    # independent siblings in one layer: nn and dataset
    ("layers", [("minispore.dataset.pipeline", "minispore.nn.cell")]),
    # the plugin reaching into graph internals outside the listed KBK exception
    ("plugin-api", [("minispore_ascend.backend", "minispore.graph.ir")]),
    # ... or into the eager executor
    ("plugin-api", [("minispore_ascend.kernels", "minispore.backend.dispatch")]),
    # a cycle between two modules of one package
    ("acyclic", [("minispore.dataset.sampler", "minispore.dataset.pipeline"),
                 ("minispore.dataset.pipeline", "minispore.dataset.sampler")]),
    # ... and between two of minispore.graph's own: the IR does not know its text form
    ("acyclic", [("minispore.graph.ir", "minispore.graph.printer")]),
    # inside graph: what every capture records with never imports a capture mode
    ("graph-layers", [("minispore.graph.trace.session", "minispore.graph.capture.ast_mode.interpreter")]),
    # ... and the kernel builder does not import the compile cache (cache_settings sits below both)
    ("graph-layers", [("minispore.graph.codegen.build", "minispore.graph.compile_cache")]),
    # ... in the places that used to be exempt (issue 13): one import back is enough, since the
    # other direction is real: reduction uses elementwise's ops, registry builds on base, the
    # optimizers are Cells
    ("acyclic", [("minispore.ops.prims.elementwise", "minispore.ops.prims.reduction")]),
    ("acyclic", [("minispore.backend.base", "minispore.backend.registry")]),
    ("acyclic", [("minispore.nn.cell", "minispore.nn.optim.optimizer")]),
])
def test_contract_catches_a_forbidden_import(config, graph, contract_id, injected):
    assert _check(config, contract_id, graph).kept, f"{contract_id} is broken on the real graph"
    assert not _check(config, contract_id, _with_imports(graph, *injected)).kept, \
        f"{contract_id} did not catch {injected}"


def test_every_contract_is_exercised(config):
    """Each contract in .importlinter is one of the types above (a new one needs a case here)."""
    ids = {c["id"] for c in config["contracts_options"]}
    assert ids == {"layers", "graph-layers", "plugin-api", "acyclic"}
    assert {c["type"] for c in config["contracts_options"]} <= set(CONTRACT_TYPES)
