"""MkDocs hooks for the minispore site (listed under `hooks:` in mkdocs.yml).

Two small jobs, both so that the sources can live where a reader expects them:

1. The notebooks live in the top-level `tutorials/` folder (ARCHITECTURE.md's tree), but MkDocs only
   renders files inside `docs_dir` (`site/`). `on_files` adds every `tutorials/*.ipynb` to the
   site's file collection as if it were `site/tutorials/<name>.ipynb`, so mkdocs-jupyter renders it.
   No copy and no symlink: a fresh clone on any OS builds the same site.
2. The API reference should list every module, also the ones added later. An API page may hold
   the marker `<!-- api-modules: minispore.nn -->`; `on_page_markdown` replaces it with one
   mkdocstrings block per public module under that package (files starting with `_` are private).
   For `minispore.ops.prims` the order is `minispore.ops.functional.FAMILIES` (the order the op
   families are taught in); elsewhere it is alphabetical, packages after their modules.
3. The API coverage page (`<!-- api-coverage -->`) is generated from the names introspected from
   the real MindSpore wheel, checked against what minispore has at build time (site/_api_coverage.py).
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

from mkdocs.plugins import event_priority
from mkdocs.structure.files import File

REPO = Path(__file__).resolve().parent.parent
TUTORIALS = REPO / "tutorials"
API_MARKER = re.compile(r"<!--\s*api-modules:\s*([\w.]+)\s*-->")


@event_priority(100)          # before mkdocs-jupyter's on_files, which wraps .ipynb files as pages
def on_files(files, config):
    # src_dir is the repository root, so the page's path ("tutorials/<name>.ipynb") and its source
    # file (<repo>/tutorials/<name>.ipynb) line up.  (File.generated would leave src_dir unset,
    # which mkdocs-jupyter's page wrapper cannot follow.)
    for nb in sorted(TUTORIALS.glob("*.ipynb")):
        files.append(File(f"tutorials/{nb.name}", src_dir=str(REPO), dest_dir=config.site_dir,
                          use_directory_urls=config.use_directory_urls))
    return files


def on_serve(server, config, builder):
    """`mkdocs serve` also rebuilds when a notebook changes."""
    server.watch(str(TUTORIALS))
    return server


def _family_order() -> list[str]:
    """FAMILIES from minispore/ops/functional.py, read without importing minispore."""
    tree = ast.parse((REPO / "minispore" / "ops" / "functional.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "FAMILIES" for t in node.targets):
            return list(ast.literal_eval(node.value))
    return []


def _public_modules(package: str) -> list[str]:
    """Dotted names of the public modules in `package` (recursively), in reading order."""
    folder = REPO.joinpath(*package.split("."))
    names = [p.stem for p in sorted(folder.glob("*.py")) if not p.stem.startswith("_")]
    if package == "minispore.ops.prims":
        order = _family_order()
        names = [f for f in order if f in names] + [f for f in names if f not in order]
    modules = [f"{package}.{n}" for n in names]
    for sub in sorted(folder.iterdir()):
        if sub.is_dir() and not sub.name.startswith("_") and (sub / "__init__.py").exists():
            modules += _public_modules(f"{package}.{sub.name}")
    return modules


def _api_markdown(package: str) -> str:
    return "\n".join(f"::: {m}\n    options:\n      heading_level: 2\n" for m in _public_modules(package))


COVERAGE_MARKER = "<!-- api-coverage -->"


def _coverage_markdown() -> str:
    """The API coverage tables (site/_api_coverage.py; imports minispore to see what it has)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("_api_coverage", REPO / "site" / "_api_coverage.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.render_markdown()


def on_page_markdown(markdown, page, config, files):
    if COVERAGE_MARKER in markdown:
        markdown = markdown.replace(COVERAGE_MARKER, _coverage_markdown())
    return API_MARKER.sub(lambda m: _api_markdown(m.group(1)), markdown)
