"""The tutorial site builds with `mkdocs build --strict` and contains what the docs promise.

Notebooks are rendered from their committed outputs (mkdocs.yml: execute: false); nbmake executes
them in the test command, and the checks here make sure the committed copies carry the outputs a
reader must see (no errors, the loss plot).
"""
import json
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((REPO / "tutorials").glob("*.ipynb"))


def test_strict_build_succeeds(built_site):
    assert (built_site / "index.html").is_file()
    # the site goes to the requested folder, not into the sources
    assert not (REPO / "site" / "index.html").exists()


@pytest.mark.parametrize("page", [
    "getting-started", "concepts/tensors", "concepts/primitives", "concepts/autodiff", "concepts/nn",
    "concepts/parity-kit", "train-tiny-llama", "performance", "api/ops", "api/autograd", "api/nn",
])
def test_page_exists(built_site, page):
    assert (built_site / page / "index.html").is_file()


def test_every_notebook_is_a_page(built_site):
    assert NOTEBOOKS, "no notebooks in tutorials/"
    for nb in NOTEBOOKS:
        html = (built_site / "tutorials" / nb.stem / "index.html").read_text(encoding="utf-8")
        assert "jp-Notebook" in html or "jupyter-wrapper" in html, f"{nb.name} not rendered as a notebook"


def test_llama_tutorial_page_embeds_the_loss_plot(built_site):
    html = (built_site / "tutorials" / "02_train_tiny_llama" / "index.html").read_text(encoding="utf-8")
    pngs = re.findall(r'<img[^>]+src="data:image/png;base64,([A-Za-z0-9+/=]{1000,})"', html)
    assert pngs, "the rendered tutorial has no PNG output (commit the notebook with its outputs)"


def test_api_reference_lists_ops_from_every_family(built_site):
    html = (built_site / "api" / "ops" / "index.html").read_text(encoding="utf-8")
    families = sorted(p.stem for p in (REPO / "minispore" / "ops" / "prims").glob("*.py")
                      if not p.stem.startswith("_"))
    for fam in families:
        assert f'id="minispore.ops.prims.{fam}"' in html, f"family {fam} missing from the API page"
    for op in ("add", "matmul", "sum", "reshape"):
        assert re.search(rf'id="minispore\.ops\.prims\.\w+\.{op}"', html), f"ops.{op} missing"


def test_performance_page_has_the_benchmark_sections(built_site):
    html = (built_site / "performance" / "index.html").read_text(encoding="utf-8")
    for section in ("Eager op overhead", "Training step vs PyTorch", "Tiny LLaMA training run"):
        assert section in html


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=[n.stem for n in NOTEBOOKS])
def test_committed_notebook_has_outputs_and_no_errors(nb):
    """The site shows the committed outputs, so they must be complete (refresh them with
    `.venv/bin/pytest --nbmake --overwrite tutorials/`)."""
    cells = json.loads(nb.read_text(encoding="utf-8"))["cells"]
    code = [c for c in cells if c["cell_type"] == "code" and "".join(c["source"]).strip()]
    assert code
    for c in code:
        assert c.get("execution_count") is not None, f"unexecuted cell in {nb.name}: {''.join(c['source'])[:80]}"
        for out in c.get("outputs", []):
            assert out["output_type"] != "error", f"{nb.name} was saved with an error output"
    counts = [c["execution_count"] for c in code]
    assert counts == sorted(counts), f"{nb.name}: cells were run out of order"
