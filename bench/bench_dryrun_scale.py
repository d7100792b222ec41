"""How long the cluster-scale DryRun takes: one plan at 1,024 and 4,096 ranks, and the strategy
search over every (dp, tp, pp, ZeRO, recompute) factorization - plus the search's table.

    .venv/bin/python bench/bench_dryrun_scale.py [--model llama-70b] [--device h100] [--top 15]

Nothing is built or run: the plan is formulas over the config (minispore/llm/parallel_plan.py,
strategy_search.py). The times are wall-clock on this machine (noisy on a shared box: best of
--repeat runs).
"""
from __future__ import annotations

import argparse
import time

from minispore.llm.moe_plan import dryrun_model
from minispore.llm.parallel_plan import ParallelStrategy, Precision, plan_parallel
from minispore.llm.strategy_search import search_strategies

MIXED = Precision(compute_dtype="bfloat16", param_dtype="bfloat16", grad_dtype="float32")


def best_of(fn, repeat):
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="llama-70b")
    ap.add_argument("--device", default="h100")
    ap.add_argument("--seq", type=int, default=4096)
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    cfg, moe = dryrun_model(args.model)

    print(f"{'what':<58} {'ranks':>6} {'seconds':>9}  result")
    for world, strategy in ((1024, ParallelStrategy(data_parallel=16, model_parallel=8, pipeline_stage=8,
                                                    micro_batch_num=32, use_seq_parallel=True, optimizer_level="level1",
                                                    recompute="selective", virtual_pipeline_stages=2,
                                                    fine_grain_interleave=2)),
                            (4096, ParallelStrategy(data_parallel=64, model_parallel=8, pipeline_stage=8,
                                                    micro_batch_num=32, use_seq_parallel=True, optimizer_level="level1",
                                                    recompute="selective"))):
        secs, plan = best_of(lambda: plan_parallel(cfg, strategy, seq_len=args.seq, precision=MIXED, attention="flash",
                                                   device=args.device, moe=moe), args.repeat)
        peak, _ = plan.peak_memory()
        print(f"{'plan ' + strategy.describe()[:53]:<58} {world:>6} {secs:>9.4f}  peak {peak / 2**30:.1f} GiB, "
              f"step {plan.step_time_s:.3f} s, MFU {plan.mfu():.1%}")
    results = {}
    for world in (1024, 4096):
        secs, res = best_of(lambda: search_strategies(cfg, world, device=args.device, seq_len=args.seq, moe=moe,
                                                      model=args.model), args.repeat)
        results[world] = res
        print(f"{'search: every dp x tp x pp x zero x recompute':<58} {world:>6} {secs:>9.4f}  "
              f"{len(res.rows)} planned, {len(res.fitting)} fit")
    for world, res in results.items():
        print()
        print(res.table(args.top))


if __name__ == "__main__":
    main()
