"""Graph mode per capture mode: compile time, and the nanoGPT CPU-config training step in O0.

Two tables, one per question:

1. **Compile time per capture mode** (trace, ast, bytecode) for two training steps - forward,
   backward and the optimizer update in one jitted function:
   (a) a small MLP (64 -> 128 -> 10, GELU, cross-entropy, Adam, batch 32);
   (b) the tiny LLaMA preset `shakespeare-char` (4 layers, 128 wide, block 64; AdamW, batch 12).
   "compile" is what `jit` does before the first run: capture, verify, build the O0 executor
   (`JitFunction.compile` on a fresh step and model). *Cold*: the first compile in a fresh
   process (so it includes what a mode does once per function: the ast mode parses the source,
   the bytecode mode checks the instructions); *warm*: a recompile of the same code in the same
   process (what a guard miss costs). The bytecode mode captures code after a graph break lazily,
   when a call first reaches it; these steps have no break, so compile() captures all of them.
2. **The training step in O0 graph mode** beside PyNative and PyTorch eager: the same
   `shakespeare-char` step (nanoGPT's shakespeare_char CPU config), `ms.jit(step, capture_mode=m,
   jit_level="O0")` for each mode, all rows started from the same weights (the script checks that
   the first losses agree: 1e-6 relative between minispore rows, 1e-4 against PyTorch), timed
   alternating step by step in one process so that machine-load drift hits all rows alike.
   Target (issue 4): O0 graph no slower than PyNative.

The model, optimizer and batches come from bench_graph.py and bench_train_step.py (imported, so
the three scripts time the same step).

    python bench/bench_capture_modes.py                      # one thread (BLAS limited by threadpoolctl)
    python bench/bench_capture_modes.py --iters 30 --repeats 5 --no-torch

bench/README.md says how the published numbers were run (the OpenBLAS environment variables).
"""
from __future__ import annotations

import argparse
import datetime
import importlib
import os
import platform
import statistics
import subprocess
import sys
import time
import warnings

import numpy as np

import minispore as ms
from minispore import nn, ops
from minispore.graph.capture import registered_capture_modes

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench_graph as bg                # noqa: E402  (make_step: the shakespeare-char step; to_float)
import bench_train_step as bts          # noqa: E402  (make_batches, threads, make_torch_llama, BLAS info)

MODES = ("trace", "ast", "bytecode")


# -- (a) the small MLP training step ----------------------------------------------------------------
class MLP(nn.Cell):
    def __init__(self, din=64, hidden=128, dout=10):
        super().__init__()
        self.l1 = nn.Dense(din, hidden)
        self.l2 = nn.Dense(hidden, dout)

    def construct(self, x):
        return self.l2(ops.gelu(self.l1(x)))


def make_mlp_step(seed=0):
    """A fresh MLP, Adam and `step(x, y) -> loss` (forward + backward + update)."""
    ms.set_seed(seed)
    net = MLP()
    loss_fn = nn.CrossEntropyLoss()
    opt = nn.Adam(net.trainable_params(), learning_rate=1e-3)
    grad_fn = ms.value_and_grad(lambda x, y: loss_fn(net(x), y), None, opt.parameters)

    def step(x, y):
        loss, grads = grad_fn(x, y)
        opt(grads)
        return loss
    return step


def mlp_batch(seed=0):
    rng = np.random.default_rng(seed)
    return (ms.Tensor(rng.standard_normal((32, 64)).astype(np.float32)),
            ms.Tensor(rng.integers(0, 10, 32).astype(np.int32)))


def llama_step(seed=0):
    return bg.make_step(seed)[2]


# -- compile time -----------------------------------------------------------------------------------
# Part of a first compile is paid once per function and process: the ast mode parses the source
# (cached per code object), the bytecode mode checks the instructions once per code object. A
# *cold* compile - the first call of a jitted function in a fresh process - pays it; a *warm*
# compile - a recompile after a guard miss, or a new JitFunction of the same code - does not.
# Cold compiles therefore run in fresh interpreters (this script with --cold), after one eager
# step there, so that first-use costs that belong to no capture mode (lazy imports, NumPy's first
# calls) are not counted.
WORKLOADS = {
    "mlp": ("MLP step (64-128-10, Adam, batch 32)", make_mlp_step, lambda: mlp_batch()),
    "llama": ("tiny LLaMA step (shakespeare-char, AdamW, batch 12x64)", llama_step,
              lambda: bts.make_batches(1, 65, 64, with_torch=False)[0]["minispore"]),
}


def graph_stats(entry):
    """(graphs, nodes, breaks) of a cache entry: every graph a capture made, all of their nodes."""
    graphs = entry.result.graphs
    return len(graphs), sum(g.num_nodes() for g in graphs), len(entry.result.breaks)


def timed_compile(make, batch, mode):
    """Seconds for `jit(step).compile(*batch)` on a fresh step, and the entry."""
    fn = ms.jit(make(), capture_mode=mode, jit_level="O0")
    t0 = time.perf_counter()
    entry = fn.compile(*batch)
    return time.perf_counter() - t0, entry


def cold_compile_child(workload, mode, threads):
    """--cold: one eager step, then the first compile in this process; prints its ms."""
    _, make, batch = WORKLOADS[workload]
    batch = batch()
    with bts.threads(1 if threads == "1" else None):
        make()(*batch)
        seconds, _ = timed_compile(make, batch, mode)
    print(f"{seconds * 1e3:.3f}")


def cold_compile_ms(workload, mode, repeats, threads):
    times = []
    for _ in range(repeats):
        out = subprocess.run([sys.executable, os.path.abspath(__file__), "--cold", workload, mode,
                              "--threads", threads], capture_output=True, text=True, check=True)
        times.append(float(out.stdout.strip().splitlines()[-1]))
    return statistics.median(times)


def warm_compile_ms(make, batch, mode, repeats):
    timed_compile(make, batch, mode)                   # pays the once-per-code-object part
    runs = [timed_compile(make, batch, mode) for _ in range(repeats)]
    return statistics.median(r[0] for r in runs) * 1e3, graph_stats(runs[-1][1])


def steady_ms(step, batch, iters=10):
    step(*batch)
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        step(*batch)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def compile_table(modes, repeats, threads):
    rows = []
    for key, (what, make, batch) in WORKLOADS.items():
        batch = batch()
        eager = steady_ms(make(), batch)
        cold = {m: cold_compile_ms(key, m, repeats, threads) for m in modes}
        for mode in modes:
            warm, (n_graphs, n_nodes, n_breaks) = warm_compile_ms(make, batch, mode, repeats)
            rows.append((what, mode, cold[mode], cold[mode] / cold[modes[0]], warm, eager,
                         n_graphs, n_nodes, n_breaks))
    return rows


# -- the training step: PyNative, O0 graph per mode, PyTorch ----------------------------------------
def step_table(modes, iters, warmup, with_torch):
    batches = bts.make_batches(4, 65, 64, with_torch=False)
    x0, y0 = batches[0]["minispore"]
    cfg, model, step = bg.make_step()
    steps = {"PyNative": step}
    for mode in modes:
        steps[f"jit O0, capture_mode={mode}"] = ms.jit(bg.make_step()[2], capture_mode=mode, jit_level="O0")
    torch = sys.modules.get("torch") if with_torch else None      # imported by main()
    if torch is not None:
        tstep = bts.make_torch_llama(cfg, model)
        steps[f"PyTorch {torch.__version__} eager"] = \
            lambda x, y: tstep(torch.from_numpy(x.asnumpy()), torch.from_numpy(y.asnumpy()))

    # same weights, same batch: the first losses agree (this also compiles every jit row)
    first = {name: bg.to_float(fn(x0, y0)) for name, fn in steps.items()}
    ref = first["PyNative"]
    for name, v in first.items():
        tol = 1e-4 if name.startswith("PyTorch") else 1e-6
        assert abs(v - ref) <= tol * abs(ref), f"{name}: first loss {v} != PyNative {ref}"

    times = {name: [] for name in steps}
    for i in range(warmup + iters):
        x, y = batches[(i + 1) % len(batches)]["minispore"]
        for name, fn in steps.items():
            t0 = time.perf_counter()
            fn(x, y)
            if i >= warmup:
                times[name].append(time.perf_counter() - t0)
    med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    return cfg, model, first, med, torch


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--iters", type=int, default=20, help="timed training steps per row")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--repeats", type=int, default=5, help="compiles per capture mode and workload")
    p.add_argument("--threads", choices=["1", "default"], default="1")
    p.add_argument("--no-torch", action="store_true")
    p.add_argument("--cold", nargs=2, metavar=("WORKLOAD", "MODE"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.cold:
        return cold_compile_child(*args.cold, args.threads)
    warnings.simplefilter("ignore", RuntimeWarning)       # e.g. "capture_mode='x' is not available yet"

    modes = [m for m in MODES if m in registered_capture_modes()]
    missing = [m for m in MODES if m not in modes]
    if not args.no_torch:
        try:            # before bts.threads(), which limits the threads of an imported torch only
            importlib.import_module("torch")
        except ImportError:
            pass
    with bts.threads(1 if args.threads == "1" else None):
        ctimes = compile_table(modes, args.repeats, args.threads)
        cfg, model, first, med, torch = step_table(modes, args.iters, args.warmup, not args.no_torch)

    print(f"# bench_capture_modes.py, {datetime.date.today().isoformat()}")
    print(f"Python {platform.python_version()}, NumPy {np.__version__}"
          + (f", PyTorch {torch.__version__}" if torch else "") + f", {os.cpu_count()} CPUs, threads: {args.threads}")
    print(bts.blas_description())
    if missing:
        print(f"capture modes not registered in this build (left out): {', '.join(missing)}")
    print()
    print(f"## Compile time per capture mode (median of {args.repeats}; cold: the first compile in a fresh "
          f"process, warm: a recompile of the same code)")
    print()
    print("| training step | capture mode | cold compile ms | cold / trace | warm compile ms | PyNative step ms "
          "| graphs | nodes | graph breaks |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for what, mode, cold, ratio, warm, eager, n_graphs, n_nodes, n_breaks in ctimes:
        print(f"| {what} | {mode} | {cold:.1f} | {ratio:.2f}x | {warm:.1f} | {eager:.1f} | {n_graphs} | "
              f"{n_nodes} | {n_breaks} |")
    print()
    print(f"## Training step, shakespeare-char LLaMA ({model.num_params():,} params), batch "
          f"{bts.BATCH}x{cfg.max_seq_len}, fwd+bwd+AdamW; median of {args.iters} steps after {args.warmup} warm-up")
    print()
    print("first-step loss: " + ", ".join(f"{k} {v:.6f}" for k, v in first.items()))
    print()
    base = med["PyNative"]
    print("| step | ms/iter | / PyNative |")
    print("|---|---:|---:|")
    for name, m in med.items():
        print(f"| {name} | {m:.1f} | {m / base:.2f}x |")
    print("target (issue 4): O0 graph no slower than PyNative")
    return ctimes, med


if __name__ == "__main__":
    main()
