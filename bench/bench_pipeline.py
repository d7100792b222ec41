"""Pipeline bubble: the schedule's prediction against the measured wall-clock timeline, 2 ranks.

    .venv/bin/python bench/bench_pipeline.py [--steps 3] [--width 512] [--batch 256]

The script launches itself under the dist extra's `mpiexec -n 2` (`--worker` runs one rank).
An MLP of 4 Dense(width, width) + Tanh layers, float32, cut into 2 stages of 2 layers (for
interleaved 1F1B, v = 2: four virtual stages of one layer, layer k on rank k mod 2), trains
`--steps` steps of nn.PipelineCell for GPipe, 1F1B and interleaved 1F1B with m = 2, 4, 8
micro-batches of the global batch. Each rank records every action's compute span
(`PipelineCell.last_step`). Per rank and step:

    busy     = sum of the rank's F and B compute spans (from its input's arrival to its end)
    measured = (step end - busy) / busy   (idle over compute; the step ends when the later
               rank's last action ends, the starts aligned by a barrier)
    t_f, t_b = the rank's mean F and B durations per action (one chunk of a micro-batch)

and the table shows the closed form (p-1)/(v m) ("bubble"), the discrete-event timer's bubble replayed with
the measured t_f, t_b (nn/pipeline_schedule.py `simulate`, uniform times: the larger of the two
ranks'), and the measured idle fraction of each rank (median over steps), with the peak of saved
micro-batch tapes. The stages are not quite balanced: stage 0's backward computes no gradient
for its input (the data), so rank 0 waits for rank 1 more than the uniform model says.

Report only, and noisy: two ranks share this machine's cores with everything else, the
point-to-point messages cost real time that the closed form ignores, and at these sizes the
per-op Python overhead is a large part of each action. The closed form and the timer are exact
(tests/parallel/test_pipeline_schedule.py); this bench shows how close a real eager run comes.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

SCHEDULES = ("gpipe", "1f1b", "1f1b-v2")        # 1f1b-v2: interleaved 1F1B, 2 chunks per rank
MICRO = (2, 4, 8)


def worker(args):
    import minispore as ms
    from minispore import nn
    from minispore.communication import comm_func, get_rank, init
    init()
    rank = get_rank()
    rows = []
    g = np.random.default_rng(0)
    x = ms.Tensor(g.standard_normal((args.batch, args.width)).astype(np.float32))
    y = ms.Tensor(g.standard_normal((args.batch, args.width)).astype(np.float32))
    for sched in SCHEDULES:
        for m in MICRO:
            ms.reset_auto_parallel_context()
            v = 2 if sched.endswith("-v2") else 1
            ms.set_auto_parallel_context(pipeline_stages=2, pipeline_config={"pipeline_scheduler": sched[:4] if v > 1
                                                                             else sched, "pipeline_interleave": v > 1})
            ms.set_seed(0)
            cells = []
            for k in range(4):
                d = nn.Dense(args.width, args.width)
                d.pipeline_stage = k if v > 1 else k // 2     # interleaved: layer k on rank k mod 2
                cells += [d, nn.Tanh()]
            net = nn.WithLossCell(nn.SequentialCell(cells), nn.MSELoss())
            pipe = nn.PipelineCell(net, m)
            grad_fn = ms.value_and_grad(pipe, None, net.trainable_params())
            grad_fn(x, y)                                    # warm-up (and the shape headers)
            steps = []
            for _ in range(args.steps):
                comm_func.barrier()
                grad_fn(x, y)
                tl = pipe.last_step["timeline"]
                busy = sum(e - s for _, _, _, s, e in tl)
                end = max(e for *_, e in tl)
                tf = [e - s for k, _, _, s, e in tl if k == "F"]
                tb = [e - s for k, _, _, s, e in tl if k == "B"]
                steps.append({"busy": busy, "end": end, "t_f": sum(tf) / len(tf), "t_b": sum(tb) / len(tb),
                              "peak": pipe.last_step["peak_in_flight"]})
            rows.append({"sched": sched, "m": m, "steps": steps,
                         "t_f": statistics.median(s["t_f"] for s in steps),
                         "t_b": statistics.median(s["t_b"] for s in steps), "peak": steps[-1]["peak"]})
    Path(args.out + f".{rank}").write_text(json.dumps(rows))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--worker", action="store_true")
    p.add_argument("--out", default="")
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--width", type=int, default=512)
    p.add_argument("--batch", type=int, default=256)
    args = p.parse_args()
    if args.worker:
        return worker(args)
    from minispore.nn.pipeline_schedule import make_schedule, simulate
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "pipe.json")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PMI_", "OMPI_", "PMIX_"))}
        env.update({"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"})
        cmd = [str(Path(sys.executable).parent / "mpiexec"), "-n", "2", sys.executable, __file__, "--worker",
               "--out", out, "--steps", str(args.steps), "--width", str(args.width), "--batch", str(args.batch)]
        subprocess.run(cmd, check=True, timeout=300, env=env)
        ranks = [json.loads(Path(out + f".{r}").read_text()) for r in range(2)]
    print(f"MLP 4x Dense({args.width},{args.width}) float32, 2 stages, global batch {args.batch}, "
          f"median of {args.steps} steps (noisy: two ranks share the machine's cores)")
    print(f"{'schedule':<8} {'m':>3} {'bubble':>8} {'timer(meas. t)':>15} {'rank0 idle':>11} {'rank1 idle':>11} "
          f"{'t_f ms':>7} {'t_b ms':>7} {'peak tapes':>11}")
    for r0, r1 in zip(*ranks):
        t_f, t_b = max(r0["t_f"], r1["t_f"]), max(r0["t_b"], r1["t_b"])
        v = 2 if r0["sched"].endswith("-v2") else 1
        timer = simulate(make_schedule(r0["sched"][:4] if v > 1 else r0["sched"], 2, r0["m"], v), t_f, t_b)
        timer = timer.bubble_fraction
        # the step ends when the later rank's last action ends (the barrier aligned the starts)
        idle = [statistics.median((max(a["end"], b["end"]) - r["busy"]) / r["busy"]
                                  for a, b, r in zip(r0["steps"], r1["steps"], rank["steps"]))
                for rank in (r0, r1)]
        print(f"{r0['sched']:<8} {r0['m']:>3} {1 / (v * r0['m']):>8.3f} {timer:>15.3f} {idle[0]:>11.3f} "
              f"{idle[1]:>11.3f} {1e3 * t_f:>7.2f} {1e3 * t_b:>7.2f} {r0['peak']:>5}/{r1['peak']:<5}")


if __name__ == "__main__":
    main()
