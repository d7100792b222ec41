"""Optimizer parallel (ZeRO levels 1-3): per-rank memory measured vs the ZeRO formula, the
communication bytes of one step, and step time one process vs 2 ranks.

    .venv/bin/python bench/bench_zero_memory.py [--steps 6] [--width 256] [--batch 32]

The script launches itself under the dist extra's `mpiexec` (`--worker` runs one rank). Model: an
MLP of 3 Dense(width, width) + Dense(width, 10), float32, nn.AdamWeightDecay (2 state buffers per
parameter), data_parallel with gradients_mean=True and the default threshold (64 KB: the biases
stay replicated). Per level:

* memory: `ParallelOptimizer.memory_report()` on each rank (bytes of the arrays the rank keeps:
  parameters, gradients after the reduction, optimizer state) beside `zero_bytes` (the ZeRO table
  with the padding rule chunk = ceil(numel / N)) and beside the paper's unpadded
  4Ψ + 4Ψ + 8Ψ/N, 4Ψ + 12Ψ/N, 16Ψ/N;
* communication: `ops.prims.comm.comm_bytes()` over one step (calls and ring bytes per rank, by
  collective), plain data parallelism (DistributedGradReducer's buckets) included, beside the
  analytic all-reduce ring bytes 2(N-1)/N Ψ b;
* step time: median ms of a TrainOneStepCell step, one process on the global batch vs 2 ranks on
  half of it each. Report only: the two ranks share two cores with everything else on this
  machine; one BLAS thread per process.
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

import numpy as np

LEVELS = ("level1", "level2", "level3")


def build(ms, nn, width):
    ms.set_seed(0)
    cells = []
    for _ in range(3):
        cells += [nn.Dense(width, width), nn.ReLU()]
    cells.append(nn.Dense(width, 10))
    return nn.WithLossCell(nn.SequentialCell(cells), nn.SoftmaxCrossEntropyWithLogits(sparse=True,
                                                                                     reduction="mean"))


def worker(args):
    import minispore as ms
    from minispore import nn
    from minispore.communication import get_group_size, get_rank, init
    from minispore.nn.optim.parallel_optimizer import zero_bytes
    from minispore.ops.prims import comm as comm_prims
    init()
    rank, n = get_rank(), get_group_size()
    mpi = ms.common.process_groups.world().comm
    g = np.random.default_rng(rank)
    batch = args.batch if n > 1 else args.batch * 2
    x = ms.Tensor(g.standard_normal((batch, args.width)).astype(np.float32))
    y = ms.Tensor(g.integers(0, 10, (batch,)).astype(np.int32))
    out = {}
    for level in (None,) + (LEVELS if n > 1 else ()):
        ms.reset_auto_parallel_context()
        if n > 1:
            ms.set_auto_parallel_context(parallel_mode="data_parallel", gradients_mean=True)
        if level is not None:
            ms.set_auto_parallel_context(enable_parallel_optimizer=True,
                                         parallel_optimizer_config={"optimizer_level": level})
        net = build(ms, nn, args.width)
        params = net.trainable_params()
        numels = [int(p.size) for p in params]
        step = nn.TrainOneStepCell(net, nn.AdamWeightDecay(params, 1e-3))
        step(x, y)
        step(x, y)
        comm_prims.reset_comm_bytes()
        step(x, y)
        traffic = comm_prims.comm_bytes()
        times = []
        for _ in range(args.steps):
            if mpi is not None:
                mpi.Barrier()
            t0 = time.perf_counter()
            step(x, y)
            times.append(time.perf_counter() - t0)
        res = {"step_ms": 1e3 * float(np.median(times)), "comm": traffic, "psi": sum(numels)}
        zero = step.parallel_optimizer
        if zero is not None:
            sharded = set(zero.sharded_parameters())
            sh = [m for p, m in zip(params, numels) if p.name in sharded]
            rep = [m for p, m in zip(params, numels) if p.name not in sharded]
            res["memory"] = mpi.gather(zero.memory_report(), root=0) if mpi is not None else [zero.memory_report()]
            res["formula"] = zero_bytes(sh, n, level, itemsize=4, states=2, replicated=rep)
            res["sharded_numel"], res["replicated_numel"] = sum(sh), sum(rep)
        out[level or "dp"] = res
    ms.reset_auto_parallel_context()
    if rank == 0:
        Path(args.out).write_text(json.dumps(out))


def launch(n, args, out):
    mpiexec = Path(sys.executable).parent / "mpiexec"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PMI_", "OMPI_", "PMIX_"))}
    env.update({"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"})
    cmd = [str(mpiexec), "-n", str(n), sys.executable, __file__, "--worker", "--out", out,
           "--steps", str(args.steps), "--width", str(args.width), "--batch", str(args.batch)]
    subprocess.run(cmd, check=True, timeout=300, env=env)
    return json.loads(Path(out).read_text())


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--worker", action="store_true")
    p.add_argument("--out", default="")
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--batch", type=int, default=32, help="local batch per rank (one process: twice it)")
    args = p.parse_args()
    if args.worker:
        return worker(args)
    with tempfile.TemporaryDirectory() as tmp:
        one = launch(1, args, os.path.join(tmp, "one.json"))
        two = launch(2, args, os.path.join(tmp, "two.json"))
    n = 2
    psi = two["dp"]["psi"]
    print(f"MLP 3x Dense({args.width},{args.width}) + Dense({args.width},10), float32, AdamWeightDecay, "
          f"Ψ = {psi} parameters, N = {n} ranks, threshold 64 KB")
    paper = {"level1": (4 * psi, 4 * psi, 8 * psi / n), "level2": (4 * psi, 4 * psi / n, 8 * psi / n),
             "level3": (4 * psi / n, 4 * psi / n, 8 * psi / n)}
    print(f"\nper-rank bytes: measured (rank 0 / rank 1) | formula with padding | paper 4Ψ/4Ψ/8Ψ (unpadded)")
    print(f"{'level':<7} {'category':<16} {'rank 0':>9} {'rank 1':>9} {'formula':>9} {'paper':>11}")
    for level in LEVELS:
        res = two[level]
        for k, cat in enumerate(("parameters", "gradients", "optimizer_state")):
            m = [r[cat] for r in res["memory"]]
            print(f"{level:<7} {cat:<16} {m[0]:>9} {m[1]:>9} {res['formula'][cat]:>9} {paper[level][k]:>11.0f}")
    print(f"\n(sharded Ψ = {two['level1']['sharded_numel']}, replicated Ψ = {two['level1']['replicated_numel']}: "
          f"the biases are under the 64 KB threshold)")
    print("\ncommunication in one step (rank 0, ring bytes per rank, comm.py's counters):")
    ar = 2 * (n - 1) / n * psi * 4
    print(f"  {'(paper)':<7} all_reduce {ar:.0f} B (analytic 2(N-1)/N Ψ b for plain data parallel)")
    for level in ("dp",) + LEVELS:
        parts = ", ".join(f"{name} {t['calls']}x {t['ring']} B" for name, t in sorted(two[level]["comm"].items())
                          if t["calls"])
        total = sum(t["ring"] for t in two[level]["comm"].values())
        print(f"  {level:<7} {parts}  (total {total} B)")
    print(f"\nstep time (median of {args.steps}, ms; noisy: 2 ranks share 2 cores with everything else)")
    print(f"  1 process, global batch {2 * args.batch}: {one['dp']['step_ms']:.2f}")
    for key in ("dp",) + LEVELS:
        print(f"  2 ranks, {key:<7} local batch {args.batch}: {two[key]['step_ms']:.2f}")


if __name__ == "__main__":
    main()
