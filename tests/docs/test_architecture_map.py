"""ARCHITECTURE.md is accurate to the code.

* §4 (the folder map) lists every folder of the package and of the plugins, and nothing else:
  a new folder, a removed one or a renamed one fails here until the map says so. The top-level
  folders the map names exist, and every tracked top-level folder is named.
* The file names in the map's rows exist in their folder, and every repository path the document
  names (`minispore/graph/run/plan.py`, `ast_mode/source.py` ...) exists.
* §2 is exactly the layer order `.importlinter` enforces.
* §5 and §6 list exactly the files the traced calls cross, as bench/architecture_stats.py measures
  them (sys.setprofile in a fresh interpreter, so no other test's state leaks in).
"""
from __future__ import annotations

import configparser
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "ARCHITECTURE.md"
ROOTS = ("minispore/", "plugins/", "tests/", "tutorials/", "site/", "bench/")
MAPPED_TREES = ("minispore", "plugins")       # mapped folder by folder; other top-level folders by one line
SKIP_DIRS = {"__pycache__", "build", "dist"}
ROW = re.compile(r"^\| `([^`]+/)` \|[^|]*\|(.*)\|\s*$")
STEP = re.compile(r"^\d+\. `([^`]+)`")
TICKED = re.compile(r"`([^`\s]+)`")


@pytest.fixture(scope="module")
def doc() -> str:
    return DOC.read_text(encoding="utf-8")


def _section(doc: str, number: int) -> str:
    m = re.search(rf"^## §{number} .*?(?=^## §|\Z)", doc, re.S | re.M)
    assert m, f"ARCHITECTURE.md has no section §{number}"
    return m.group(0)


def _map_rows(doc: str) -> dict[str, str]:
    rows = {}
    for line in _section(doc, 4).splitlines():
        m = ROW.match(line)
        if m:
            assert m.group(1) not in rows, f"§4 lists {m.group(1)} twice"
            rows[m.group(1)] = m.group(2)
    assert len(rows) > 20, "could not read the folder map (rows look like: | `minispore/ops/` | ops | ... |)"
    return rows


def _holds_a_file(folder: Path) -> bool:
    """A folder counts if a file lives in it or below it (not only caches: __pycache__ etc.)."""
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = [d for d in dirnames if not _skipped(d)]
        if filenames:
            return True
    return False


def _skipped(name: str) -> bool:
    return name in SKIP_DIRS or name.startswith(".") or name.endswith(".egg-info")


def _real_folders() -> set[str]:
    found = set()
    for tree in MAPPED_TREES:
        for dirpath, dirnames, _ in os.walk(REPO / tree):
            dirnames[:] = sorted(d for d in dirnames if not _skipped(d))
            if _holds_a_file(Path(dirpath)):
                found.add(Path(dirpath).relative_to(REPO).as_posix() + "/")
    return found


def test_the_folder_map_lists_every_package_folder_and_no_other(doc):
    listed = {f for f in _map_rows(doc) if f.split("/")[0] in MAPPED_TREES}
    real = _real_folders()
    missing = sorted(real - listed)
    stale = sorted(listed - real)
    assert not missing, f"folders not in ARCHITECTURE.md §4 (add a line each): {missing}"
    assert not stale, f"ARCHITECTURE.md §4 lists folders that do not exist (remove or rename them): {stale}"


def test_the_folder_map_names_the_top_level_folders(doc):
    top = {f for f in _map_rows(doc) if f.count("/") == 1}
    for f in top:
        assert (REPO / f).is_dir(), f"ARCHITECTURE.md §4 lists {f}, which does not exist"
    try:
        tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, timeout=60,
                                 check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: the tracked top-level folders are unknown")
    folders = {p.split("/")[0] + "/" for p in tracked if "/" in p and not p.startswith(".")}
    assert folders - top == set(), f"tracked top-level folders missing from ARCHITECTURE.md §4: {sorted(folders - top)}"


def test_the_files_each_map_row_names_exist_in_its_folder(doc):
    for folder, text in _map_rows(doc).items():
        for name in TICKED.findall(text):
            if not re.fullmatch(r"[\w./-]+\.(py|md|ipynb|c)", name):
                continue
            path = REPO / name if name.startswith(ROOTS) else REPO / folder / name
            assert path.exists(), f"ARCHITECTURE.md §4, row {folder}: {name} does not exist ({path})"


def test_every_repository_path_the_document_names_exists(doc):
    every_file = [p.relative_to(REPO).as_posix() for p in REPO.rglob("*")
                  if not any(_skipped(part) for part in p.relative_to(REPO).parts)]
    checked = 0
    for token in TICKED.findall(doc):
        token = token.rstrip(":,.").removeprefix("./")
        if "/" not in token or not re.fullmatch(r"[\w./<>-]+", token) or "<" in token:
            continue
        checked += 1
        if token.startswith(ROOTS):
            assert (REPO / token).exists(), f"ARCHITECTURE.md names {token}, which does not exist"
        else:       # a path inside the folder being discussed (`ast_mode/source.py`)
            assert any(f == token or f.endswith("/" + token.rstrip("/")) for f in every_file), \
                f"ARCHITECTURE.md names {token}, which matches no file or folder"
    assert checked > 60


def test_the_layer_diagram_is_the_import_linter_order(doc):
    block = re.search(r"```text\n(.*?)```", _section(doc, 2), re.S)
    assert block, "§2 has no ```text block with the layers"
    diagram = [line.strip() for line in block.group(1).splitlines() if line.strip()]
    cfg = configparser.ConfigParser()
    cfg.read(REPO / ".importlinter", encoding="utf-8")
    layers = [line.strip() for line in cfg["importlinter:contract:layers"]["layers"].splitlines() if line.strip()]
    assert diagram == layers, f"ARCHITECTURE.md §2 {diagram} != .importlinter {layers}"


# -- the two traced calls ------------------------------------------------------------------------------
_MEASURE = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("architecture_stats", sys.argv[1])
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
print(json.dumps({"eager": mod.files_crossed(mod._eager_add()), "jit": mod.files_crossed(mod._jit_o0_call())}))
"""


@pytest.fixture(scope="module")
def measured() -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MS_", "MINISPORE_"))}
    run = subprocess.run([sys.executable, "-c", _MEASURE, str(REPO / "bench" / "architecture_stats.py")],
                         cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def _steps(text: str) -> list[str]:
    return [m.group(1) for line in text.splitlines() if (m := STEP.match(line))]


def test_the_path_of_a_plus_b_lists_the_files_it_crosses(doc, measured):
    listed = _steps(_section(doc, 5))
    assert len(listed) == len(set(listed))
    assert set(listed) == set(measured["eager"]), (
        f"ARCHITECTURE.md §5 lists {sorted(listed)}, but `a + b` crosses {measured['eager']} "
        f"(bench/architecture_stats.py): update §5")


def test_the_path_of_a_later_jit_call_lists_the_files_it_crosses(doc, measured):
    later = _section(doc, 6).split("### Every later call", 1)
    assert len(later) == 2, "§6 has no '### Every later call' list"
    listed = _steps(later[1])
    assert len(listed) == len(set(listed))
    assert set(listed) == set(measured["jit"]), (
        f"ARCHITECTURE.md §6 lists {sorted(listed)}, but a later jit call crosses {measured['jit']} "
        f"(bench/architecture_stats.py): update §6")


def test_the_docs_page_is_this_file():
    """site/architecture.md includes ARCHITECTURE.md at build time (pymdownx.snippets), and is in the nav."""
    page = (REPO / "site" / "architecture.md").read_text(encoding="utf-8")
    assert '--8<-- "ARCHITECTURE.md"' in page
    config = (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    assert re.search(r"^  - pymdownx\.snippets:", config, re.M)
    assert re.search(r"^  - .*: architecture\.md$", config, re.M), "architecture.md is not in the mkdocs nav"
