"""Recovery time after a rank is killed: failure -> first resumed step, with and without the compile cache.

    .venv/bin/python bench/bench_recovery.py                  # 4 ranks, a 12-layer float64 tiny LLaMA
    .venv/bin/python bench/bench_recovery.py --ranks 2 --layers 2

Each run is `msrun --worker_num=N --auto-restart=1 tests/parallel/recovery_worker.py ...`: data-
parallel training that saves a complete checkpoint set every 2 steps; rank 1 of the first start
SIGKILLs itself right after step 5 (the newest complete set is step 4). MPICH's mpiexec kills the
other ranks, msrun names the dead rank and starts the job again; the restarted ranks resume from
step 4's set (`minispore.parallel.recovery.resume_training`) and the first resumed step is step 5.
The jitted gradient step is captured by the first start; with the compile cache
(`recovery.use_compile_cache`) the restarted ranks load it from disk instead of capturing it again.

The columns split the recovery time (wall clock, seconds, the slowest rank of the restarted job):

* detect: the kill -> msrun announces the restart (msrun sees the rank's process end, stops the
  job, names the rank);
* relaunch: -> the restarted worker script starts (mpiexec, N interpreters importing minispore,
  MPI_Init);
* init + load: MPI_Init, building the model, choosing, verifying (sha256 of every file) and
  loading the set;
* first step: the first resumed step, which includes compiling the jitted step (a capture, or a
  compile-cache load) -- compare with a steady step of the first start;
* total: the kill -> the end of the first resumed step.

The hand-written C kernels are off by default (MINISPORE_NATIVE_KERNELS=0, the NumPy kernels):
with the compile cache on, minispore keeps them per rank beside the graphs
(`<cache>/rank_<r>/kernel_meta`), so the first start would build them once per rank, which on 2
cores takes longer than the rest of the benchmark (and the restarted ranks then find them built:
with `--native-kernels` that saving is in the "first step" column too).

Timings on this machine are noisy: 2 cores shared by 4 ranks (and by whatever else runs), so the
absolute numbers mostly measure oversubscription; the difference between the two rows in the
"first step" column is the part the compile cache removes. One run per row: rerun for spread.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORKER = ROOT / "tests" / "parallel" / "recovery_worker.py"
KILL_RANK, KILL_STEP, STEPS = 1, 5, 7


def run(ranks, layers, dim, cache: bool, base: Path, native: bool) -> dict:
    run_dir, out = base / "run", base / "out"
    out.mkdir(parents=True)
    cmd = [sys.executable, "-m", "minispore.communication.launcher", f"--worker_num={ranks}", "--auto-restart=1",
           str(WORKER), str(run_dir), str(out), "--steps", str(STEPS), "--layers", str(layers), "--dim", str(dim),
           "--kill-rank", str(KILL_RANK), "--kill-step", str(KILL_STEP), "--kill-phase", "step"]
    if cache:
        cmd += ["--cache", str(base / "cache")]
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    if not native:
        env["MINISPORE_NATIVE_KERNELS"] = "0"
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, cwd=str(ROOT))
    lines = [(time.time(), line) for line in proc.stderr]          # msrun's messages, time-stamped
    if proc.wait(timeout=600) != 0:
        sys.exit(f"the job failed ({proc.returncode}):\n{''.join(l for _, l in lines)[-3000:]}")
    named = [line.strip() for _, line in lines if "failed: killed by signal" in line]
    restart_msg = next(t for t, line in lines if "restarting the job" in line)
    kill = json.loads((out / "killed.json").read_text())
    first = [json.loads((out / f"attempt0_rank{r}.json").read_text()) for r in range(ranks)]
    again = [json.loads((out / f"attempt1_rank{r}.json").read_text()) for r in range(ranks)]
    resumed_step = again[0]["resumed_from"] + 1
    start = max(a["t_start"] for a in again)
    loaded = max(a["t_loaded"] for a in again)
    first_step = max(a["step_end"][str(resumed_step)] for a in again)
    # a steady step of the first start: between the ends of its steps 3 and 4 (no capture in it)
    steady = max(f["step_end"]["4"] - f["step_end"]["3"] for f in first)
    first_run_step = max(f["step_end"]["1"] - f["t_loaded"] for f in first)
    return {"cache": cache, "detect": restart_msg - kill["time"], "relaunch": start - restart_msg, "load": loaded - start,
            "first_step": first_step - loaded, "total": first_step - kill["time"], "steady": steady,
            "first_run_first_step": first_run_step,
            "compile_first": max(f["compile"]["seconds"] for f in first),
            "compile_again": max(a["compile"]["seconds"] for a in again),
            "how_again": "cache load" if "cache load" in again[0]["compile"] else "capture",
            "phases_again": {k: v for k, v in again[0]["compile"].items() if k != "seconds"},
            "stats": again[0]["cache"], "resumed_from": again[0]["resumed_from"],
            "named": named[0] if named else "(no report)"}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--dim", type=int, default=32)
    parser.add_argument("--native-kernels", action="store_true", help="keep the hand-written C kernels on")
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-recovery-") as tmp:
        for cache in (False, True):
            rows.append(run(args.ranks, args.layers, args.dim, cache, Path(tmp) / ("cache" if cache else "plain"),
                            args.native_kernels))
    print(f"recovery after SIGKILL of rank {KILL_RANK} at step {KILL_STEP}: {args.ranks} ranks, tiny LLaMA "
          f"({args.layers} layers, dim {args.dim}, float64), data parallel; seconds, noisy (2 shared cores)")
    print(f"msrun said: {rows[0]['named']}")
    head = ["compile cache", "detect", "relaunch", "init + load", "first step", "total", "restart's compile",
            "first run's compile", "steady step", "restart's cache counters"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in rows:
        s = r["stats"]
        counters = f"captures {s['captures']}, hits {s['hits']}, stores {s['stores']}"
        print(f"| {'on' if r['cache'] else 'off'} | {r['detect']:.2f} | {r['relaunch']:.2f} | {r['load']:.2f} | "
              f"{r['first_step']:.2f} | "
              f"{r['total']:.2f} | {r['compile_again']:.3f} ({r['how_again']}) | {r['compile_first']:.3f} | "
              f"{r['steady']:.3f} | {counters} |")
    for r in rows:
        phases = ", ".join(f"{k} {v * 1e3:.0f} ms" for k, v in r["phases_again"].items())
        print(f"restart's compile, rank 0, cache {'on' if r['cache'] else 'off'}: {phases}")
    off, on = rows
    print(f"restart's compile of the jitted step: {off['compile_again']:.3f} s captured again, "
          f"{on['compile_again']:.3f} s loaded from the cache (ratio {off['compile_again'] / max(on['compile_again'], 1e-9):.1f}); "
          f"first resumed step {off['first_step']:.2f} s vs {on['first_step']:.2f} s; total recovery {off['total']:.2f} s "
          f"vs {on['total']:.2f} s; both resumed from step {on['resumed_from']}'s set")


if __name__ == "__main__":
    main()
