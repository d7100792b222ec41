"""Communication bytes per training step: DryRun's prediction beside the instrumented counters.

    .venv/bin/python bench/bench_comm_bytes.py            # DP 2/4, TP 2/4, SP, dp2 x tp2, ZeRO 1-3

For each strategy the tiny float64 LLaMA of tests/parallel/resume_worker.py (vocab 32, dim 16,
2 layers, 4 heads, ffn 32; global batch 4 x 8 tokens) takes one LLaMA-trainer step under the
dist extra's `mpiexec` (tests/parallel/comm_bytes_worker.py) and reports what
`ops.prims.comm.comm_bytes()` counted; `parallel_plan.minispore_step_comm` predicts the same from
the config and strategy alone. The table shows rank 0 (payload: bytes handed to MPI; ring:
bytes a ring algorithm sends from the rank) and, in the last column, on how many ranks the two
dicts were equal as a whole. Every number is an exact integer: the expected ratio is 1.000000.
Timing is not measured here (bench_data_parallel.py does that).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests" / "parallel"
sys.path.insert(0, str(TESTS))

JOBS = {2: ["tp1dp2", "tp2dp1", "tp2dp1,sp", "tp1dp2,zero=level1", "tp1dp2,zero=level2", "tp1dp2,zero=level3"],
        4: ["tp1dp4", "tp4dp1", "tp2dp2", "tp2dp2,sp", "tp4dp1,sp,vocab_emb_dp", "tp1dp4,zero=level2"]}
NAMES = {"tp1dp2": "DP 2", "tp1dp4": "DP 4", "tp2dp1": "TP 2", "tp4dp1": "TP 4", "tp2dp1,sp": "TP 2 + SP",
         "tp2dp2": "dp2 x tp2", "tp2dp2,sp": "dp2 x tp2 + SP", "tp4dp1,sp,vocab_emb_dp": "TP 4 + SP, vocab_emb_dp",
         "tp1dp2,zero=level1": "DP 2 ZeRO-1", "tp1dp2,zero=level2": "DP 2 ZeRO-2",
         "tp1dp2,zero=level3": "DP 2 ZeRO-3", "tp1dp4,zero=level2": "DP 4 ZeRO-2"}


def run(n, scenarios, out_dir):
    mpiexec = Path(sys.executable).parent / "mpiexec"
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    subprocess.run([str(mpiexec), "-n", str(n), sys.executable, str(TESTS / "comm_bytes_worker.py"), out_dir,
                    *scenarios], check=True, timeout=300, env=env, cwd=str(ROOT))
    return [json.loads(Path(out_dir, f"rank_{r}.json").read_text()) for r in range(n)]


def main():
    from test_comm_bytes import predict
    print(__doc__.split("\n\n")[2].replace("\n", " "))
    print()
    head = (f"{'strategy':<26} {'collective':<15} {'calls':>11} {'predicted B':>13} {'instrumented B':>15} "
            f"{'ratio':>9} {'ring pred':>11} {'ring inst':>11} {'ranks equal':>12}")
    print(head)
    print("-" * len(head))
    for n, scenarios in JOBS.items():
        with tempfile.TemporaryDirectory() as out:
            ranks = run(n, scenarios, out)
        for s in scenarios:
            per_rank = [res[s] for res in ranks]
            equal = sum(predict(v) == v["comm"] for v in per_rank)
            v = per_rank[0]
            pred = predict(v)
            for kind in sorted(set(pred) | set(v["comm"])):
                p = pred.get(kind, {"calls": 0, "payload": 0, "ring": 0})
                m = v["comm"].get(kind, {"calls": 0, "payload": 0, "ring": 0})
                ratio = m["payload"] / p["payload"] if p["payload"] else float("nan")
                print(f"{NAMES.get(s, s):<26} {kind:<15} {str(p['calls']) + '/' + str(m['calls']):>11} "
                      f"{p['payload']:>13,} {m['payload']:>15,} {ratio:>9.6f} {p['ring']:>11,} {m['ring']:>11,} "
                      f"{f'{equal}/{n}':>12}")
    print("\ncalls: predicted/instrumented; ring: rank 0's; ranks equal: ranks whose whole predicted dict equals "
          "the counted one")


if __name__ == "__main__":
    main()
