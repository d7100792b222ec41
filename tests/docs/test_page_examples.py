"""Every ```python example on the site (and in README.md) runs.

Per page, the ```python blocks are joined in order and run as one script in a fresh interpreter
(so a page can build on its earlier examples, and pages cannot disturb each other or this test
process). Blocks meant to be read, not run — excerpts of minispore's own source, shell sessions —
are fenced as ```text or ```bash instead.
"""
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGES = sorted((REPO / "site").rglob("*.md")) + [REPO / "README.md"]
FENCE = re.compile(r"^```python[^\n]*\n(.*?)^```", re.S | re.M)


def _examples(page: Path) -> str:
    return "\n\n".join(FENCE.findall(page.read_text(encoding="utf-8")))


PAGES_WITH_CODE = [p for p in PAGES if p.exists() and _examples(p)]


def test_some_pages_have_examples():
    assert len(PAGES_WITH_CODE) >= 5


@pytest.mark.parametrize("page", PAGES_WITH_CODE, ids=[str(p.relative_to(REPO)) for p in PAGES_WITH_CODE])
def test_page_examples_run(page, tmp_path):
    script = tmp_path / (page.stem + "_examples.py")
    script.write_text(_examples(page), encoding="utf-8")
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, (f"the examples on {page.relative_to(REPO)} failed:\n"
                                  f"{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}")
