"""The differential suite: every case in cases/ runs on minispore and must match what real
MindSpore 2.10 returned for the same code (goldens made by tests/fixtures/mindspore/make_goldens.py;
see msdiff.py for the contract)."""
import json
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import minispore  # noqa: E402
from minispore.common.errors import MinisporeError  # noqa: E402

import msdiff  # noqa: E402

CASES = msdiff.load_cases()


def _goldens():
    meta, arrays = {}, {}
    for area in sorted({c.area for c in CASES.values()}):
        path = msdiff.golden_path(area)
        if not os.path.exists(path):
            continue
        with np.load(path, allow_pickle=False) as z:
            meta.update(json.loads(str(z["__meta__"])))
            arrays.update({k: z[k] for k in z.files if k != "__meta__"})
    return meta, arrays


GOLDEN_META, GOLDEN_ARRAYS = _goldens()


def test_every_case_has_a_golden_and_every_golden_a_case():
    missing = sorted(set(CASES) - set(GOLDEN_META))
    stale = sorted(set(GOLDEN_META) - set(CASES))
    assert not missing, f"cases without a MindSpore golden (run make_goldens.py): {missing[:20]}"
    assert not stale, f"goldens of removed cases (re-run make_goldens.py for their area): {stale[:20]}"


@pytest.mark.parametrize("case_id", sorted(set(CASES) & set(GOLDEN_META)))
def test_matches_mindspore(case_id):
    c, golden = CASES[case_id], GOLDEN_META[case_id]
    minispore.set_context(mode=minispore.PYNATIVE_MODE)
    minispore.set_seed(0)
    if golden["raises"]:
        with pytest.raises(MinisporeError):
            c.fn(minispore)
        return
    arrays = {}
    got = msdiff.to_plain(c.fn(minispore), arrays, case_id)
    problems = msdiff.compare(golden["out"], GOLDEN_ARRAYS, got, arrays, c.rtol, c.atol)
    assert not problems, f"{case_id} differs from MindSpore 2.10:\n  " + "\n  ".join(problems)
