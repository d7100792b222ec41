"""Fine-grained multi-copy on 2 ranks: wall time per layer, forward and backward, with 1 vs 2 copies,
and the measured fraction of the communication time covered by computation.

    .venv/bin/python bench/bench_multi_copy.py [--steps 6] [--dim 256] [--seq 128] [--batch 2]
                                                [--json PATH] [--async-progress]

The script launches itself under the dist extra's `mpiexec -n 2` (`--worker` runs one rank). Each
rank builds the same tensor-parallel (tp2) + sequence-parallel LLaMA decoder stack (float32,
`--layers` layers of width `--dim`, heads of 32) and runs its forward and backward through
minispore/parallel/multi_copy.py's MultiCopyDecoder with 1 copy (the exposed baseline: every
collective waited right after it is posted) and with 2 copies (one copy's all-gather /
reduce-scatter in flight while the other computes). Per step it records the timeline
(multi_copy.record_timeline) and reports, median over the steps:

* ms per layer, forward and backward: the phase's span (first event start to last event end) / L;
* covered: the share of the collectives' [post, wait return] intervals during which the same rank
  ran a compute task (multi_copy.overlap_fraction), forward and backward;
* exposed ms per layer: wall time with a collective in flight and no compute running (what the
  copies are meant to remove; overlap_fraction's exposed_s).

The last step's timeline of both ranks, for both copy counts, goes to `--json` (the list of event
dicts, plus the configuration), for the two-stream simulator to compare against.

Read the figures as what they are: two ranks share this machine's two cores with everything else
running (noisy), MPICH moves a non-blocking collective only inside MPI calls (the scheduler polls
MPI_Test after every compute task; `--async-progress` sets MPIR_CVAR_ASYNC_PROGRESS=1, MPICH's
progress thread, which needs a spare core per rank), and shared-memory collectives run on the
ranks' own cores. "Covered" is therefore an upper bound of the communication really hidden here;
the wall-time ratio is the honest measure of what was gained on this machine.
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


def worker(args):
    import minispore as ms
    from minispore.common.tensor import from_numpy
    from minispore.communication import get_rank, init
    from minispore.llm import Llama, LlamaConfig
    from minispore.llm.tensor_parallel import tensor_parallel_llama
    from minispore.ops import functional as F
    from minispore.parallel import multi_copy
    init()
    rank = get_rank()
    cfg = LlamaConfig(vocab_size=64, dim=args.dim, n_layers=args.layers, n_heads=args.dim // 32, max_seq_len=args.seq,
                      ffn_dim=int(args.dim * 8 / 3) // 32 * 32, dropout=0.0, tie_embeddings=True)
    ms.set_seed(0)
    par = tensor_parallel_llama(Llama(cfg), parallel_config={"model_parallel": 2, "use_seq_parallel": True})
    rows = args.batch * args.seq // 2
    rng = np.random.default_rng(rank)
    x = ms.Tensor(rng.standard_normal((rows, cfg.dim)).astype(np.float32))
    w = ms.Tensor(rng.standard_normal((rows, cfg.dim)).astype(np.float32))
    cos, sin, cos_q, sin_q = par._constants(np.float32)
    rq = (from_numpy(cos_q[:args.seq]), from_numpy(sin_q[:args.seq]))
    rk = (from_numpy(cos[:args.seq]), from_numpy(sin[:args.seq]))
    results, timelines = {}, {}
    for copies in (1, 2):
        decoder = multi_copy.MultiCopyDecoder(par.layers, copies, par.group)
        params = decoder.parameters()
        step = ms.grad(lambda h: F.sum(decoder(h, args.batch, rq, rk) * w), 0, params)
        per = {"fwd_ms": [], "bwd_ms": [], "fwd_cov": [], "bwd_cov": [], "fwd_exposed_ms": [], "bwd_exposed_ms": []}
        for i in range(args.steps + 2):
            with multi_copy.record_timeline():
                step(x)
            ev = multi_copy.timeline()
            if i < 2:                                   # warm-up
                continue
            for ph, key in (("forward", "fwd"), ("backward", "bwd")):
                mine = [e for e in ev if e["phase"] == ph]
                span = max(e["end"] for e in mine) - min(e["start"] for e in mine)
                ov = multi_copy.overlap_fraction(mine)
                per[f"{key}_ms"].append(1e3 * span / cfg.n_layers)
                per[f"{key}_cov"].append(ov["fraction"])
                per[f"{key}_exposed_ms"].append(1e3 * ov["exposed_s"] / cfg.n_layers)
        results[copies] = {k: float(np.median(v)) for k, v in per.items()}
        timelines[copies] = ev
    Path(args.out, f"rank_{rank}.json").write_text(json.dumps({"results": results, "timeline": timelines}))


def launch(args, out):
    mpiexec = Path(sys.executable).parent / "mpiexec"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PMI_", "OMPI_", "PMIX_"))}
    # one BLAS thread per process: two ranks' spinning OpenBLAS pools would fight over the cores
    env.update({"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"})
    if args.async_progress:
        env["MPIR_CVAR_ASYNC_PROGRESS"] = "1"
    cmd = [str(mpiexec), "-n", "2", sys.executable, __file__, "--worker", "--out", out, "--steps", str(args.steps),
           "--dim", str(args.dim), "--seq", str(args.seq), "--batch", str(args.batch), "--layers", str(args.layers)]
    subprocess.run(cmd, check=True, timeout=300, env=env)
    return [json.loads(Path(out, f"rank_{r}.json").read_text()) for r in range(2)]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--worker", action="store_true")
    p.add_argument("--out", default="")
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--dim", type=int, default=256)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--async-progress", action="store_true")
    p.add_argument("--json", default=str(Path(tempfile.gettempdir()) / "bench_multi_copy_timeline.json"))
    args = p.parse_args()
    if args.worker:
        return worker(args)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        ranks = launch(args, tmp)
    print(f"tp2 + sequence parallel LLaMA decoder, {args.layers} layers, dim {args.dim}, batch {args.batch} x seq "
          f"{args.seq} (this rank: {args.batch * args.seq // 2} rows), float32, 2 ranks, median of {args.steps} steps"
          f"{', MPICH progress thread' if args.async_progress else ''}")
    print(f"{'copies':>6} {'rank':>4} {'fwd ms/layer':>13} {'bwd ms/layer':>13} {'fwd covered':>12} "
          f"{'bwd covered':>12} {'fwd exposed':>12} {'bwd exposed':>12}")
    for copies in ("1", "2"):
        for r, res in enumerate(ranks):
            m = res["results"][copies]
            print(f"{copies:>6} {r:>4} {m['fwd_ms']:>13.2f} {m['bwd_ms']:>13.2f} {m['fwd_cov']:>12.0%} "
                  f"{m['bwd_cov']:>12.0%} {m['fwd_exposed_ms']:>10.2f}ms {m['bwd_exposed_ms']:>10.2f}ms")
    for ph in ("fwd", "bwd"):
        one = np.mean([r["results"]["1"][f"{ph}_ms"] for r in ranks])
        two = np.mean([r["results"]["2"][f"{ph}_ms"] for r in ranks])
        print(f"{ph}: 2 copies / 1 copy wall time per layer = {two / one:.2f}")
    dump = {"config": vars(args), "timeline": {c: [e for r in ranks for e in r["timeline"][c]] for c in ("1", "2")}}
    Path(args.json).write_text(json.dumps(dump))
    print(f"timelines (both ranks, 1 and 2 copies, last step): {args.json}   "
          f"[{time.perf_counter() - t0:.0f} s; two ranks on two shared cores: noisy, report only]")


if __name__ == "__main__":
    main()
