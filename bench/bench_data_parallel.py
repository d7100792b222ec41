"""Data parallelism: how much of the gradient all-reduce hides behind backward, and 1 vs 2 ranks.

    .venv/bin/python bench/bench_data_parallel.py [--steps 4] [--bucket-mb 1] [--batch 32]

The script launches itself under the dist extra's `mpiexec` (`--worker` runs one rank).

1. Overlap (2 ranks). An MLP of 4 Dense(512, 512) layers (4.2 MB of float32 gradients), local
   batch 32. Per step, three variants of `loss, grads = grad_fn(x, y); grads = reducer(grads)`:
   * none:     no reduction (the computation alone);
   * blocking: every bucket all-reduced after backward (the reducer called without the hook);
   * overlap:  `with reducer.overlap_backward()`: each bucket's Iallreduce starts as soon as its
               gradients are final, while the tape computes the earlier layers' gradients.
   "exposed" is the time a step spends inside the reducer call (waiting for communication that
   backward did not hide). hidden fraction = 1 - exposed(overlap) / exposed(blocking); the
   step-time estimate (t_blocking - t_overlap) / (t_blocking - t_none) is printed beside it, and
   the share of the gradient bytes whose all-reduce had completed when backward returned.
   MPICH moves a non-blocking collective only inside MPI calls: by default the reducer's hooks
   poll (`Testall`) once per parameter; the run is repeated with MPICH's own progress thread
   (`MPIR_CVAR_ASYNC_PROGRESS=1`), which needs a spare core per rank to pay off.
2. Throughput: samples/s of a TrainOneStepCell step on the global batch 64 in one process vs
   2 ranks with local batch 32 each (data_parallel, gradients_mean=True).

Every process runs one BLAS thread (one process: one core; two ranks: two).
Report only: on this machine both ranks share two cores with everything else running, so the
ranks compete with each other (and with the progress of the all-reduce) for the CPU; a quiet
machine with a core per rank shows the real figure.
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

LAYERS, WIDTH = 4, 512


def build(ms, nn):
    ms.set_seed(0)
    cells = []
    for _ in range(LAYERS):
        cells += [nn.Dense(WIDTH, WIDTH), nn.ReLU()]
    cells.append(nn.Dense(WIDTH, 10))
    return nn.SequentialCell(cells)


def worker(args):
    LOCAL_BATCH = args.batch
    import minispore as ms
    from minispore import nn
    from minispore.common import process_groups
    from minispore.communication import get_group_size, get_rank, init
    init()
    rank, n = get_rank(), get_group_size()
    comm = process_groups.world().comm
    rng = np.random.default_rng(rank)
    out = {"size": n}

    def batch(b):
        return (ms.Tensor(rng.standard_normal((b, WIDTH)).astype(np.float32)),
                ms.Tensor(rng.standard_normal((b, 10)).astype(np.float32)))

    if n > 1:
        ms.set_auto_parallel_context(comm_fusion={"allreduce": {"mode": "size", "config": args.bucket_mb}})
        net = build(ms, nn)
        loss_net = nn.WithLossCell(net, nn.MSELoss())
        grad_fn = ms.value_and_grad(loss_net, None, net.trainable_params())
        reducer = nn.DistributedGradReducer(net.trainable_params(), mean=True)
        out["buckets"] = len(reducer.buckets)
        x, y = batch(LOCAL_BATCH)
        results = {}
        bucket_bytes = [b.numel * b.dtype.itemsize for b in reducer.buckets]
        done_bytes = []                 # per overlapped step: bytes already all-reduced when backward ends
        for variant in ["none", "blocking", "overlap"] * 2:          # interleaved: fairer under noise
            step_t, exposed_t = [], []
            for i in range(args.steps + 2):
                comm.Barrier()
                t0 = time.perf_counter()
                if variant == "overlap":
                    with reducer.overlap_backward():
                        _, grads = grad_fn(x, y)
                else:
                    _, grads = grad_fn(x, y)
                t1 = time.perf_counter()
                if variant == "overlap" and i >= 2:
                    reqs = reducer._step.requests
                    done_bytes.append(sum(nb for nb, r in zip(bucket_bytes, reqs) if r is not None and r.Test()))
                if variant != "none":
                    reducer(grads)
                t2 = time.perf_counter()
                if i >= 2:
                    step_t.append(t2 - t0)
                    exposed_t.append(t2 - t1)
            r = results.setdefault(variant, {"step": [], "exposed": []})
            r["step"] += step_t
            r["exposed"] += exposed_t
        out["overlap"] = {v: {"step_ms": 1e3 * float(np.median(r["step"])),
                              "exposed_ms": 1e3 * float(np.median(r["exposed"]))} for v, r in results.items()}
        out["done_during_backward"] = float(np.mean(done_bytes)) / sum(bucket_bytes)
        ms.reset_auto_parallel_context()
        if args.no_throughput:
            if rank == 0:
                Path(args.out).write_text(json.dumps(out))
            return

    # throughput: TrainOneStepCell on the global batch of 64 (split across the ranks)
    if n > 1:
        ms.set_auto_parallel_context(parallel_mode="data_parallel", gradients_mean=True,
                                     comm_fusion={"allreduce": {"mode": "size", "config": args.bucket_mb}})
    net = build(ms, nn)
    step = nn.TrainOneStepCell(nn.WithLossCell(net, nn.MSELoss()), nn.SGD(net.trainable_params(), 0.01))
    x, y = batch(LOCAL_BATCH * 2 // n)
    for _ in range(2):
        step(x, y)
    if comm is not None:
        comm.Barrier()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        step(x, y)
    if comm is not None:
        comm.Barrier()
    out["samples_per_s"] = args.steps * LOCAL_BATCH * 2 / (time.perf_counter() - t0)
    if rank == 0:
        Path(args.out).write_text(json.dumps(out))


def launch(n, args, out, extra_env=None, throughput=True):
    mpiexec = Path(sys.executable).parent / "mpiexec"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PMI_", "OMPI_", "PMIX_"))}
    # one BLAS thread per process: OpenBLAS's spinning pool threads of two ranks (or of one process
    # on a busy machine) fight over the cores and swamp every other figure
    threads = "1"
    env.update({"OPENBLAS_NUM_THREADS": threads, "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads})
    env.update(extra_env or {})
    cmd = [str(mpiexec), "-n", str(n), sys.executable, __file__, "--worker", "--out", out,
           "--steps", str(args.steps), "--bucket-mb", str(args.bucket_mb), "--batch", str(args.batch)] + ([] if throughput else ["--no-throughput"])
    subprocess.run(cmd, check=True, timeout=300, env=env)
    return json.loads(Path(out).read_text())


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--worker", action="store_true")
    p.add_argument("--out", default="")
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--bucket-mb", type=float, default=1.0)
    p.add_argument("--batch", type=int, default=32, help="local batch per rank")
    p.add_argument("--no-throughput", action="store_true")
    args = p.parse_args()
    if args.worker:
        return worker(args)
    with tempfile.TemporaryDirectory() as tmp:
        one = launch(1, args, os.path.join(tmp, "one.json"))
        two = launch(2, args, os.path.join(tmp, "two.json"))
        # MPICH's own progress thread moves in-flight collectives while the rank computes
        async_progress = launch(2, args, os.path.join(tmp, "async.json"),
                                {"MPIR_CVAR_ASYNC_PROGRESS": "1"}, throughput=False)
    print(f"MLP {LAYERS}x Dense({WIDTH},{WIDTH}) float32, local batch {args.batch}, "
          f"{two['buckets']} buckets of <= {args.bucket_mb} MB, 2 ranks, median of {2 * args.steps} steps")
    for title, res in (("progress polled in the gradient-ready hooks (default)", two),
                       ("with MPICH's progress thread (MPIR_CVAR_ASYNC_PROGRESS=1)", async_progress)):
        ov = res["overlap"]
        print(f"\n{title}")
        print(f"{'variant':<10} {'step ms':>9} {'exposed comm ms':>16}")
        for v in ("none", "blocking", "overlap"):
            print(f"{v:<10} {ov[v]['step_ms']:>9.2f} {ov[v]['exposed_ms']:>16.2f}")
        hidden = 1 - ov["overlap"]["exposed_ms"] / ov["blocking"]["exposed_ms"]
        comm_cost = ov["blocking"]["step_ms"] - ov["none"]["step_ms"]
        by_step = (ov["blocking"]["step_ms"] - ov["overlap"]["step_ms"]) / comm_cost if comm_cost > 0 else float("nan")
        print(f"hidden fraction of the all-reduce (exposed wait): {hidden:.2f}   (from step times: {by_step:.2f}); "
              f"bytes already reduced when backward ends: {res['done_during_backward']:.0%}")
    print(f"\nthroughput, global batch {2 * args.batch}: 1 process {one['samples_per_s']:.0f} samples/s, "
          f"2 ranks {two['samples_per_s']:.0f} samples/s (two processes share two cores: report only)")


if __name__ == "__main__":
    main()
