"""`python -m minispore.parallel.simulator` (also `minispore simulate`): the hidden-communication table.

    python -m minispore.parallel.simulator --model llama-7b --tp 8 --seq 4096 --copies 1 2 \\
        --device ascend-910b --gantt out.png

prints, per number of copies, the forward and backward makespan of the simulated stack on one
TP rank, its compute and communication time, the exposed communication and the hidden fraction;
`--gantt` saves the chart of a short stack (`--gantt-layers`, 2 by default, one panel per copy
count: a 32-layer chart has bars too thin to read); `--json` writes the rows.
"""
from __future__ import annotations

import argparse
import json
import sys

from ...common.errors import MinisporeError


def add_simulate_args(parser):
    from .transformer import PRESETS
    parser.add_argument("--model", default="llama-7b", choices=sorted(PRESETS), help="LLaMA preset (default llama-7b)")
    parser.add_argument("--tp", type=int, default=8, help="tensor-parallel degree, sequence parallel on (default 8)")
    parser.add_argument("--seq", type=int, default=4096, help="sequence length (default 4096)")
    parser.add_argument("--batch", type=int, default=1, help="micro-batch size (default 1)")
    parser.add_argument("--layers", type=int, default=None, help="decoder layers (default: the preset's)")
    parser.add_argument("--copies", type=int, nargs="+", default=[1, 2], help="copy counts to compare (default 1 2)")
    parser.add_argument("--device", default="ascend910b",
                        help="device profile: ascend910b (ascend-910b), h100, or cpu (then give --link-bw)")
    parser.add_argument("--link", default=None, help="link profile: hccs, nvlink4 (default: the device's)")
    parser.add_argument("--link-bw", type=float, default=None, metavar="GB/s",
                        help="custom link bandwidth, GB/s each way (overrides --link)")
    parser.add_argument("--alpha-us", type=float, default=5.0, help="latency per ring step with --link-bw (us)")
    parser.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float16", "float32"))
    parser.add_argument("--compute-efficiency", type=float, default=1.0, help="fraction of peak FLOP/s (default 1)")
    parser.add_argument("--link-efficiency", type=float, default=1.0, help="fraction of link bandwidth (default 1)")
    parser.add_argument("--dw", default="fill", choices=("fill", "after_dx"),
                        help="where the weight-gradient GEMMs go (default fill: into the collectives' shadow)")
    parser.add_argument("--sp-regather", action="store_true",
                        help="re-gather column-parallel inputs for dW in backward (Megatron) instead of keeping them")
    parser.add_argument("--policy", default="in_order", choices=("in_order", "ready_first"),
                        help="in_order: each stream runs its queue in program order (default); ready_first: a free "
                             "stream starts the first queued task whose inputs are ready (multi_copy.py's scheduler)")
    parser.add_argument("--forward-only", action="store_true", help="no backward")
    parser.add_argument("--gantt", default=None, metavar="PNG", help="save a Gantt chart")
    parser.add_argument("--gantt-layers", type=int, default=2, help="layers drawn in the chart (default 2)")
    parser.add_argument("--json", default=None, metavar="FILE", help="write the table rows as JSON")


def _options(args):
    from .cost import LinkProfile
    link = args.link
    if args.link_bw is not None:
        link = LinkProfile("custom", args.link_bw * 1e9, args.alpha_us * 1e-6, ("given on the command line",))
    return dict(device=args.device, link=link, tp=args.tp, seq=args.seq, batch=args.batch, dtype=args.dtype,
                compute_efficiency=args.compute_efficiency, link_efficiency=args.link_efficiency, dw=args.dw,
                sp_regather=args.sp_regather, backward=not args.forward_only, policy=args.policy)


def run_simulate(args) -> int:
    from .report import cost_model, format_table, simulate_transformer
    opts = _options(args)
    cost = cost_model(opts["device"], opts["link"], dtype=args.dtype, compute_efficiency=args.compute_efficiency,
                      link_efficiency=args.link_efficiency)
    print(f"{args.model}, tp={args.tp} with sequence parallel, seq {args.seq}, batch {args.batch}: "
          f"{cost.describe()}")
    rows, timelines = [], {}
    for n in args.copies:
        tl = simulate_transformer(args.model, copies=n, layers=args.layers, **opts)
        timelines[n] = tl
        for ph in (("forward",) if args.forward_only else ("forward", "backward")):
            rows.append({"model": args.model, "copies": n, "phase": ph, "makespan_ms": tl.makespan(ph) * 1e3,
                         "compute_ms": tl.compute_time(ph) * 1e3, "comm_ms": tl.comm_time(ph) * 1e3,
                         "exposed_ms": tl.exposed_comm_time(ph) * 1e3, "hidden": tl.hidden_fraction(ph)})
    print(format_table(rows))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"model": args.model, "cost_model": cost.describe(), "rows": rows}, f, indent=1)
    if args.gantt:
        _gantt(args, opts)
        print(f"Gantt chart ({args.gantt_layers} layers): {args.gantt}")
    return 0


def _gantt(args, opts):
    import matplotlib
    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    from .gantt import plot_gantt
    from .report import simulate_transformer
    fig, axes = plt.subplots(len(args.copies), 1, figsize=(13, 1.9 * len(args.copies) + 0.6), squeeze=False)
    for ax, n in zip(axes[:, 0], args.copies):
        tl = simulate_transformer(args.model, copies=n, layers=args.gantt_layers, **opts)
        plot_gantt(tl, ax=ax, title=f"{args.model}, {args.gantt_layers} layers, {n} cop{'y' if n == 1 else 'ies'}: "
                   f"step {tl.makespan() * 1e3:.2f} ms, hidden fwd {tl.hidden_fraction('forward'):.0%} / "
                   f"bwd {tl.hidden_fraction('backward'):.0%}")
    fig.tight_layout()
    fig.savefig(args.gantt, dpi=120)
    plt.close(fig)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m minispore.parallel.simulator",
                                     description="Two-stream simulation of TP+SP LLaMA layers with multi-copy.")
    add_simulate_args(parser)
    args = parser.parse_args(argv)
    try:
        return run_simulate(args)
    except MinisporeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


__all__ = ["add_simulate_args", "run_simulate", "main"]
