"""Graph mode: compile time per capture mode, and the nanoGPT training step in O0 graph mode.

The model is the LLaMA preset `shakespeare-char` (nanoGPT's shakespeare_char CPU config; see
bench_train_step.py): a step is forward + backward + AdamW on a 12 x 64 batch. Rows:

* PyNative                 - eager, the tape records every op;
* jit O0 (whole step)      - `ms.jit(step)`: forward + backward in ONE graph, the AdamW update a
                             host call inside it; run kernel by kernel by the O0 executor;
* GRAPH_MODE (per cell)    - `set_context(mode=GRAPH_MODE)` with the PyNative-style loop
                             (`value_and_grad(model.loss)` + `opt(grads)`): each top-level Cell call
                             compiles, and its graph is one node on the tape (forward/backward split);
* PyTorch eager            - the same model and weights (bench/torch_models.py), if installed.

All rows start from the same weights; the script checks that they reach the same loss. Timings
alternate step by step in one process (machine-load drift hits all rows alike); the ratio column
(row / PyNative) is the number to read. Target (issue 4): O0 graph no slower than PyNative.

    python bench/bench_graph.py                     # one thread (BLAS limited with threadpoolctl)
    python bench/bench_graph.py --iters 30 --no-torch
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
import warnings

import numpy as np

import minispore as ms
from minispore.graph.capture import registered_capture_modes

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench_train_step as bts          # noqa: E402  (threads(), make_torch_llama, BLAS description)

BATCH = bts.BATCH


def make_step(seed=0):
    """(config, model, step) with a Tensor-returning step, so it can be jitted."""
    cfg, model, _, step = bts.make_minispore(seed, loss_as_float=False)
    return cfg, model, step


class GraphModeStep:
    """The PyNative-style loop run under GRAPH_MODE (the context is switched around each call)."""

    def __init__(self, step, model, mode):
        self.step, self.mode = step, mode
        for _, cell in model.cells_and_names():
            cell.set_jit_config(ms.JitConfig(jit_level="O0", capture_mode=mode))

    def __call__(self, x, y):
        ms.set_context(mode=ms.GRAPH_MODE)
        try:
            return self.step(x, y)
        finally:
            ms.set_context(mode=ms.PYNATIVE_MODE)


def compile_times(x, y, modes, repeats=3):
    """Median capture+verify+plan time of the whole training step and of the forward alone."""
    rows = []
    for mode in modes:
        for what in ("forward (model.loss)", "train step (fwd+bwd+AdamW)"):
            times, nodes = [], 0
            for _ in range(repeats):
                cfg, model, step = make_step()
                fn = ms.jit(model.loss if what.startswith("forward") else step, capture_mode=mode)
                t0 = time.perf_counter()
                entry = fn.compile(x, y)
                times.append(time.perf_counter() - t0)
                nodes = entry.graph.num_nodes() if entry.graph is not None else sum(
                    g.num_nodes() for g in entry.result.graphs)
            rows.append((mode, what, statistics.median(times) * 1e3, nodes))
    return rows


def to_float(loss):
    return float(loss.asnumpy()) if isinstance(loss, ms.Tensor) else float(loss)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--no-torch", action="store_true")
    p.add_argument("--threads", choices=["1", "default"], default="1")
    args = p.parse_args(argv)
    warnings.simplefilter("ignore", RuntimeWarning)          # "ast not available yet: using trace"

    modes = [m for m in ("trace", "ast", "bytecode") if m in registered_capture_modes()]
    batches = bts.make_batches(4, 65, 64, with_torch=False)
    x0, y0 = batches[0]["minispore"]

    steps = {}
    cfg, model, step = make_step()
    steps["PyNative"] = step
    for mode in modes:
        _, _, s = make_step()
        steps[f"jit O0 {mode} (whole step)"] = ms.jit(s, capture_mode=mode, jit_level="O0")
    _, gmodel, gstep = make_step()
    steps["GRAPH_MODE trace (per cell)"] = GraphModeStep(gstep, gmodel, "trace")
    torch = None
    if not args.no_torch:
        try:
            import torch
        except ImportError:
            torch = None
    if torch is not None:
        tstep = bts.make_torch_llama(cfg, model)
        steps["PyTorch eager"] = lambda x, y: tstep(torch.from_numpy(x.asnumpy()), torch.from_numpy(y.asnumpy()))

    print(f"shakespeare-char LLaMA ({model.num_params():,} params), batch {BATCH}x{cfg.max_seq_len}, "
          f"fwd+bwd+AdamW; median of {args.iters} steps after {args.warmup} warm-up")
    print(f"Python {platform.python_version()}, NumPy {np.__version__}"
          + (f", PyTorch {torch.__version__}" if torch else "") + f", {os.cpu_count()} CPUs")
    print(bts.blas_description())

    n_threads = 1 if args.threads == "1" else None
    with bts.threads(n_threads):
        # same weights, same batches: the first losses must agree
        first = {name: to_float(fn(x0, y0)) for name, fn in steps.items()}
        ref = first["PyNative"]
        print("first-step loss: " + ", ".join(f"{k} {v:.6f}" for k, v in first.items()))
        for name, v in first.items():
            tol = 1e-4 if name == "PyTorch eager" else 1e-6
            assert abs(v - ref) <= tol * abs(ref), f"{name}: loss {v} != PyNative {ref}"

        times = {name: [] for name in steps}
        for i in range(args.warmup + args.iters):
            x, y = batches[i % len(batches)]["minispore"]
            for name, fn in steps.items():
                t0 = time.perf_counter()
                fn(x, y)
                if i >= args.warmup:
                    times[name].append(time.perf_counter() - t0)
        ctimes = compile_times(x0, y0, modes)

    med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    base = med["PyNative"]
    print()
    print(f"threads: {args.threads}")
    print("| step | ms/iter | / PyNative |")
    print("|---|---:|---:|")
    for name, m in med.items():
        print(f"| {name} | {m:.1f} | {m / base:.2f}x |")
    print("target (issue 4): O0 graph no slower than PyNative")
    print()
    print("| capture mode | what | compile ms (capture+verify+plan) | graph nodes |")
    print("|---|---|---:|---:|")
    for mode, what, ms_, nodes in ctimes:
        print(f"| {mode} | {what} | {ms_:.1f} | {nodes} |")
    return med, ctimes


if __name__ == "__main__":
    main()
