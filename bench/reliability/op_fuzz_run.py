"""The op fuzz (`minispore.testing.op_fuzz.fuzz_ops`) as a report row.

`fuzz_ops` makes deterministic random calls of every public op, Tensor method and primitive and
sorts the outcomes itself (ok, clean errors, minispore errors carrying NumPy's text, raw
exceptions, calls past its per-call alarm). It runs here in child processes, in chunks of calls
with consecutive seeds, so a call that crashes the interpreter or blocks where the alarm cannot
reach costs one chunk (counted as one raw failure or one hang), not the whole report.

The fuzz checks that bad input is refused cleanly, not that results are right (the parity kit,
`tests/ops/test_opdb.py`, compares values with NumPy float64 references): its "wrong results" and
"lost runs" columns are zero by construction.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

from . import outcomes as oc

CHUNK = 500
WRAPPED = "clean errors carrying NumPy's or Python's text (a missing check in an inference rule)"
_SCRIPT = ("import json, sys\n"
           "from minispore.testing.op_fuzz import fuzz_ops\n"
           "r = fuzz_ops(int(sys.argv[1]), seed=int(sys.argv[2]), time_limit_s=float(sys.argv[3]))\n"
           "print('RESULT ' + json.dumps({k: v for k, v in r.items() if k != 'skipped'}))\n")


def _chunk(n: int, seed: int, time_limit_s: float) -> dict:
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    try:
        r = subprocess.run([sys.executable, "-c", _SCRIPT, str(n), str(seed), str(time_limit_s)],
                           capture_output=True, text=True, timeout=time_limit_s + 120, env=env)
    except subprocess.TimeoutExpired:
        return {"hung": True}
    for line in r.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    tail = [line for line in r.stderr.strip().splitlines() if line.strip()][-1:] or ["(no output)"]
    return {"died": r.returncode, "stderr": tail[0][:300]}


def fuzz_op_calls(n_calls: int, seed: int = 0, time_limit_s: float = 900.0, progress=None) -> oc.Family:
    family = oc.Family("op fuzz")
    wrapped, done, targets = 0, 0, None
    chunks = max(1, -(-n_calls // CHUNK))
    for c in range(chunks):
        n = min(CHUNK, n_calls - c * CHUNK)
        got = _chunk(n, seed + c, time_limit_s / chunks)
        if got.get("hung"):
            family.add(oc.HANG, f"the fuzzing process (seed {seed + c}, {n} calls) did not finish")
            continue
        if "died" in got:
            family.add(oc.RAW, f"the fuzzing process (seed {seed + c}) died with status {got['died']}: "
                               f"{got['stderr']}")
            continue
        done += got["calls"]
        targets = got.get("targets", targets)
        family.add(oc.OK, count=got["ok"])
        family.add(oc.CLEAN, count=got["clean_errors"] + got["wrapped_numpy"])
        family.add(oc.RAW, count=got["raw"])
        family.add(oc.HANG, count=got["hangs"])
        wrapped += got["wrapped_numpy"]
        for example in got["examples"]:
            bucket = {"[raw]": oc.RAW, "[hangs]": oc.HANG}.get(example.split(" ", 1)[0])
            if bucket:
                family.add(bucket, example, count=0)
            else:
                family.examples.setdefault(WRAPPED, [])
                if len(family.examples[WRAPPED]) < oc.MAX_EXAMPLES:
                    family.examples[WRAPPED].append(example)
        if progress:
            progress(c + 1, chunks)
    family.notes.append(f"{wrapped:,} of the clean errors carry NumPy's text" if wrapped else
                        "no clean error carries NumPy's text")
    if targets:
        family.notes.append(f"{targets:,} targets; values not checked (the parity kit does)")
    return family


__all__ = ["fuzz_op_calls", "WRAPPED"]
