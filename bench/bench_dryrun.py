"""DryRun, multi-stream O0 and the Profiler, measured (issue 5, items 4 and 7).

Sections (each prints one Markdown table; `--section all` runs them all):

  dryrun    DryRun of the LLaMA presets (7B, 13B, 70B; forward and training step) on the table's
            devices: graph size, predicted peak (MindSpore's two lines), FLOPs, predicted step
            time, and what DryRun itself cost (wall time, peak RSS of this process).
            Target: a LLaMA-7B training step dry-runs in < 60 s on 2 cores.
  accuracy  The tiny LLaMA (`shakespeare-char`, batch 12) training step on THIS CPU: DryRun's
            predicted arena peak vs the arena's measured peak when the same graph runs
            (O0Executor(graph, arena=True)), and the predicted step time (calibrated CPU profile)
            vs the measured O0 time of that graph.
  streams   O0 on 1 vs 2 streams (NumPy's BLAS limited to 1 thread, so the streams are the only
            parallelism): a graph of 4 independent matmul chains, and the tiny LLaMA forward +
            backward. Results must be identical; the ratio is the speed-up.
  profiler  Overhead of minispore.Profiler on the tiny LLaMA's PyNative training step.

Run: `python bench/bench_dryrun.py [--section dryrun|accuracy|streams|profiler|all] [--repeats R]`.
"""
from __future__ import annotations

import argparse
import resource
import statistics
import time

import numpy as np

import minispore as ms
from minispore.graph.dryrun import abstract_parameters, cpu_profile, dryrun
from minispore.graph.run import O0Executor
from minispore.graph.ir import GraphBuilder
from minispore.llm.config import get_preset
from minispore.llm.model import Llama
from minispore.ops.primitive import AbstractTensor, get_primitive

GiB = 1 << 30


def _median_time(fn, repeats, warmup=1):
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def _blas_threads(n):
    try:
        from threadpoolctl import threadpool_limits
        return threadpool_limits(limits=n, user_api="blas")
    except ImportError:
        return None


# -- dryrun ------------------------------------------------------------------------------------------
def section_dryrun(args):
    rows = [("llama-7b", 2048, False, "h100", "flash", None), ("llama-7b", 2048, True, "ascend910b", "naive", None),
            ("llama-7b", 2048, True, "ascend910b", "flash", None),
            ("llama-7b", 2048, True, "ascend910b", "flash", ms.bfloat16),
            ("llama-7b", 2048, True, "h100", "flash", None), ("llama-13b", 2048, True, "ascend910b", "flash", None),
            ("llama-70b", 4096, True, "h100", "flash", None)]
    print("| model | step | attention | dtype | device | nodes | params | Used peak | Actual peak | fits | TFLOP "
          "| predicted step | DryRun wall | peak RSS |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, seq, train, device, attention, dtype in rows:
        t0 = time.perf_counter()
        cfg = get_preset(name).model
        with abstract_parameters(dtype=dtype):
            model = Llama(cfg, attention=attention)
        spec = ((1, seq), ms.int64)
        if train:
            r = dryrun(model.loss, spec, spec, train=True, device=device)
        else:
            r = dryrun(model, spec, device=device)
        wall = time.perf_counter() - t0
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        d = r.to_dict()
        print(f"| {name} seq {seq} | {'train' if train else 'forward'} | {attention} | "
              f"{'float32' if dtype is None else 'bfloat16'} | {device} | {d['num_nodes']} | "
              f"{r.num_params / 1e9:.2f} B | {d['used_peak_M']}M | {d['actual_peak_M']}M | "
              f"{'yes' if r.fits else 'no'} | {r.total_flops / 1e12:.1f} | {r.step_time_s * 1e3:.0f} ms | "
              f"{wall:.2f} s | {rss:.0f} MB |")


# -- accuracy ------------------------------------------------------------------------------------------
def section_accuracy(args):
    prof = cpu_profile()
    print(f"CPU profile: {prof.describe()}; launch {prof.launch_s * 1e6:.2f} us/node\n")
    cfg = get_preset("shakespeare-char").model
    ms.set_seed(0)
    model = Llama(cfg)
    spec = ((12, cfg.max_seq_len), ms.int64)
    toks = np.random.default_rng(0).integers(0, cfg.vocab_size, (12, cfg.max_seq_len))
    print("| graph | nodes | predicted arena | measured arena | equal | predicted time | measured O0 time "
          "| measured / predicted |")
    print("|---|---|---|---|---|---|---|---|")
    for label, train, opt in (("forward", False, None), ("forward + backward", True, None),
                              ("forward + backward + AdamW", True, "adamw")):
        with _blas_threads(1) or _null():
            r = dryrun(model.loss, spec, spec, train=train, optimizer=opt, device="cpu", learning_rate=0.0)
            arena_ex = O0Executor(r.graph, arena=True)
            arena_ex.run(toks, toks)
            plain = O0Executor(r.graph)
            t = _median_time(lambda: plain.run(toks, toks), args.repeats, warmup=2)
        print(f"| {label} | {len(r.graph.nodes)} | {r.arena_bytes / 2**20:.2f} MiB | "
              f"{arena_ex.arena.high_water / 2**20:.2f} MiB | {r.arena_bytes == arena_ex.arena.high_water} | "
              f"{r.step_time_s * 1e3:.2f} ms | {t * 1e3:.2f} ms | {t / r.step_time_s:.2f} |")
    print("\n(NumPy's BLAS limited to 1 thread for the DryRun and the measured runs: the CPU profile is "
          "calibrated, and cached, per BLAS thread count)")


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


# -- streams ---------------------------------------------------------------------------------------------
def branches_graph(n_branches=4, depth=3, size=384):
    b = GraphBuilder("branches")
    f32 = ms.float32
    av = AbstractTensor((size, size), f32)
    x = b.param(av)
    mm, add, tanh = get_primitive("matmul"), get_primitive("add"), get_primitive("tanh")
    outs = []
    for k in range(n_branches):
        w = b.param(av)
        v = x
        for _ in range(depth):
            v = b.add_node(mm, (v, w), {}, av).outputs[0]
            v = b.add_node(tanh, (v,), {}, av).outputs[0]
        outs.append(v)
    acc = outs[0]
    for v in outs[1:]:
        acc = b.add_node(add, (acc, v), {}, av).outputs[0]
    return b.finish([acc]), n_branches + 1


def section_streams(args):
    print("| graph | nodes | 1 stream | 2 streams | speed-up (median, quartiles) | events | identical |")
    print("|---|---|---|---|---|---|---|")
    g, n_in = branches_graph()
    rng = np.random.default_rng(0)
    xs = [(rng.standard_normal((384, 384)) / 20).astype(np.float32) for _ in range(n_in)]
    cases = [("4 independent matmul chains (384x384, depth 3)", g, xs)]

    cfg = get_preset("shakespeare-char").model
    ms.set_seed(0)
    model = Llama(cfg)
    weights = model.trainable_params()

    @ms.jit(capture_mode="trace")
    def fwd_bwd(t):
        return ms.value_and_grad(model.loss, None, weights)(t, t)

    t = ms.Tensor(np.random.default_rng(0).integers(0, cfg.vocab_size, (12, cfg.max_seq_len)))
    graph = fwd_bwd.compile(t).graph
    cases.append(("tiny LLaMA forward + backward (batch 12)", graph, [t.asnumpy()]))
    with _blas_threads(1) or _null():
        for label, graph, inputs in cases:
            one, two = O0Executor(graph, n_streams=1), O0Executor(graph, n_streams=2)
            r1, r2 = one.run(*inputs), two.run(*inputs)
            same = all(np.array_equal(a, b) for a, b in zip(r1, r2))
            # interleaved rounds (1 stream, then 2 streams): the machine's load drifts, a ratio
            # taken within one round is fairer than two medians taken minutes apart
            t1s, t2s, ratios = [], [], []
            for _ in range(2):
                one.run(*inputs), two.run(*inputs)
            for _ in range(args.repeats * 3):
                a = _median_time(lambda: one.run(*inputs), 3, warmup=0)
                b = _median_time(lambda: two.run(*inputs), 3, warmup=0)
                t1s.append(a), t2s.append(b), ratios.append(a / b)
            t1, t2, q = statistics.median(t1s), statistics.median(t2s), sorted(ratios)
            print(f"| {label} | {len(graph.nodes)} | {t1 * 1e3:.2f} ms | {t2 * 1e3:.2f} ms | "
                  f"{statistics.median(ratios):.2f}x ({q[len(q) // 4]:.2f}-{q[3 * len(q) // 4]:.2f}) | "
                  f"{two.schedule(2).num_events} | {same} |")


# -- profiler ----------------------------------------------------------------------------------------------
def section_profiler(args):
    import tempfile
    from minispore.mint.optim import AdamW
    cfg = get_preset("shakespeare-char").model
    ms.set_seed(0)
    model = Llama(cfg)
    opt = AdamW(model.trainable_params(), lr=1e-3)
    grad_fn = ms.value_and_grad(model.loss, None, model.trainable_params())
    t = ms.Tensor(np.random.default_rng(0).integers(0, cfg.vocab_size, (12, cfg.max_seq_len)))

    def step():
        loss, grads = grad_fn(t, t)
        opt(grads)

    with _blas_threads(1) or _null():
        base = _median_time(step, args.repeats, warmup=2)
        with tempfile.TemporaryDirectory() as d:
            prof = ms.Profiler(output_path=d)
            prof_t = _median_time(step, args.repeats, warmup=0)
            prof.stop()
            n = len(prof.events)
            t0 = time.perf_counter()
            prof.analyse()
            analyse_s = time.perf_counter() - t0
    print("| PyNative training step (tiny LLaMA, batch 12) | time | events/step |")
    print("|---|---|---|")
    print(f"| without Profiler | {base * 1e3:.2f} ms | - |")
    print(f"| with Profiler | {prof_t * 1e3:.2f} ms ({prof_t / base:.2f}x) | {n // args.repeats} |")
    print(f"\nanalyse() wrote {n} events in {analyse_s * 1e3:.0f} ms. Top ops:\n")
    print(prof.summary(top=8))


SECTIONS = {"dryrun": section_dryrun, "accuracy": section_accuracy, "streams": section_streams,
            "profiler": section_profiler}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--section", default="all", choices=list(SECTIONS) + ["all"])
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    for name, fn in SECTIONS.items():
        if args.section in (name, "all"):
            print(f"\n## {name}\n")
            fn(args)


if __name__ == "__main__":
    main()
