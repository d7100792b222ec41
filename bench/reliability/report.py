"""The whole reliability report: the three trial families, one table, the failures by category."""
from __future__ import annotations

import os
import sys
import time

from . import mutation_fuzz, op_fuzz_run, signal_trials
from . import outcomes as oc
from .train_runs import reference_run

FAMILIES = ("signals", "checkpoints", "ops")


def _progress(label):
    if not sys.stderr.isatty():
        return None
    start = time.monotonic()

    def show(done, total):
        print(f"\r{label}: {done}/{total} ({time.monotonic() - start:.0f} s)", end="" if done < total else "\n",
              file=sys.stderr, flush=True)
    return show


def run_report(work_dir: str, trials: int = 20, mutants: int = 2000, op_calls: int = 5000, seed: int = 0,
               jobs: int = 1, only=FAMILIES) -> dict:
    """Run the chosen families in `work_dir`; returns {"families", "mutants_by_kind", "seconds",
    "markdown"} (the Markdown is what `bench/bench_reliability.py` prints)."""
    os.makedirs(work_dir, exist_ok=True)
    families, by_kind, seconds = [], None, {}
    if "signals" in only:
        t = time.monotonic()
        families += signal_trials.run_signal_trials(trials, seed, os.path.join(work_dir, "signals"), jobs,
                                                    _progress("kill/signal trials"))
        seconds["signals"] = time.monotonic() - t
    if "checkpoints" in only:
        t = time.monotonic()
        base = os.path.join(work_dir, "signals", f"reference-{signal_trials.MAX_ITERS}")
        if not os.path.exists(os.path.join(base, "latest")):
            reference_run(os.path.join(work_dir, "signals"), signal_trials.MAX_ITERS, signal_trials.RESUME_INTERVAL)
        family, results = mutation_fuzz.fuzz_checkpoints(base, os.path.join(work_dir, "checkpoints"), mutants, seed,
                                                         _progress("checkpoint mutants"))
        families.append(family)
        by_kind = mutation_fuzz.by_kind(results)
        seconds["checkpoints"] = time.monotonic() - t
    if "ops" in only:
        t = time.monotonic()
        families.append(op_fuzz_run.fuzz_op_calls(op_calls, seed, progress=_progress("op fuzz chunks")))
        seconds["ops"] = time.monotonic() - t
    return {"families": families, "mutants_by_kind": by_kind, "seconds": seconds,
            "markdown": markdown(families, by_kind, seconds, work_dir)}


def kind_table(by_kind: dict) -> str:
    cols = [oc.OK, oc.CLEAN, oc.RAW, oc.HANG, oc.WRONG, oc.LOST]
    rows = ["| mutation | mutants | " + " | ".join(oc.COLUMN[c] for c in cols) + " |",
            "|---|" + "---:|" * (len(cols) + 1)]
    for kind, counts in by_kind.items():
        rows.append(f"| {kind} | {sum(counts.values()):,} | " + " | ".join(f"{counts[c]:,}" for c in cols) + " |")
    return "\n".join(rows)


def markdown(families, by_kind, seconds, work_dir) -> str:
    failures = sum(f.failures() for f in families)
    parts = [oc.header(), "", oc.table(families), ""]
    if by_kind:
        parts += ["Checkpoint mutants by kind:", "", kind_table(by_kind), ""]
    parts += ["Failures by category (with examples):", "", oc.failure_listing(families), ""]
    took = ", ".join(f"{k} {v:.0f} s" for k, v in seconds.items())
    verdict = "target met: no raw traceback, hang, wrong result or lost run" if failures == 0 else \
        f"target NOT met: {failures:,} trials failed (raw tracebacks, hangs, wrong results or lost runs)"
    parts += [f"{verdict}. Time: {took}. Work directory (failed trials kept): {work_dir}"]
    return "\n".join(parts)


__all__ = ["run_report", "markdown", "FAMILIES"]
