"""The reliability report (issue 12): interrupt training, damage checkpoints, fuzz the ops; count
what went wrong.

    .venv/bin/python bench/bench_reliability.py                 # the full report (about 20 minutes on 2 cores)
    .venv/bin/python bench/bench_reliability.py --quick         # a smoke run (about 2 minutes)
    .venv/bin/python bench/bench_reliability.py --only checkpoints --mutants 500

Three families of trials (bench/reliability/, one module each):

* kill/signal trials (signal_trials.py): `minispore train` killed with SIGKILL inside a checkpoint
  save, stopped with SIGTERM, SIGHUP and Ctrl-C twice; then `latest` must load, `--resume` must
  finish, and its final weights must equal an uninterrupted run's bit for bit (--trials of each);
* the checkpoint mutation fuzz (mutants.py, mutation_fuzz.py, load_worker.py): --mutants damaged
  or hostile copies of a real checkpoint (truncations, bit flips, crafted safetensors headers and
  state.json, FIFOs, symlinks), each loaded through a public path;
* the op fuzz (op_fuzz_run.py): --op-calls calls of `minispore.testing.op_fuzz.fuzz_ops`.

Prints one Markdown table (trials, ok, clean errors, raw tracebacks, hangs, wrong results, lost
runs per family; outcomes.py says how each trial is classified), the mutants by kind, and every
failure category with examples. The target: zero raw tracebacks, hangs, wrong results and lost
runs. Exit status 0 when the target is met, 1 otherwise. The published table is on the docs
site's Reliability page (site/reliability.md).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from bench.reliability.report import FAMILIES, run_report     # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=20, help="trials of each kill/signal kind (default 20)")
    p.add_argument("--mutants", type=int, default=2000, help="mutated checkpoints (default 2000)")
    p.add_argument("--op-calls", type=int, default=5000, help="fuzzed op calls (default 5000)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--jobs", type=int, default=2, help="kill/signal trials run side by side (default 2)")
    p.add_argument("--only", action="append", choices=FAMILIES, help="run only this family (repeatable)")
    p.add_argument("--quick", action="store_true", help="2 trials of each kind, 100 mutants, 500 op calls")
    p.add_argument("--work-dir", default=None, help="where runs and failed mutants go (default: a new temporary "
                                                    "directory, deleted when every trial passed)")
    p.add_argument("--json", default=None, help="also write the counts and examples to this JSON file")
    args = p.parse_args(argv)
    if args.quick:
        args.trials, args.mutants, args.op_calls = 2, 100, 500
    work = args.work_dir or tempfile.mkdtemp(prefix="minispore-reliability-")
    report = run_report(work, trials=args.trials, mutants=args.mutants, op_calls=args.op_calls, seed=args.seed,
                        jobs=args.jobs, only=tuple(args.only or FAMILIES))
    print(report["markdown"])
    failed = sum(f.failures() for f in report["families"])
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"families": [fam.to_dict() for fam in report["families"]],
                       "mutants_by_kind": report["mutants_by_kind"], "seconds": report["seconds"],
                       "work_dir": work}, f, indent=1)
    if not failed and args.work_dir is None:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
