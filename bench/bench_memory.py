"""Memory planning (SOMAS), lazy_inline and the compile cache, measured (issue 5, items 3, 5, 6).

Sections (each prints one Markdown table; `--section all` runs the three):

  memory    The tiny LLaMA (`shakespeare-char` preset, batch 12) forward + backward, captured as one
            graph: jit(capture_mode="trace") of value_and_grad of the loss. For each placement
            heuristic: the planned arena; beside them the lower bound (max live bytes over the
            schedule), the no-reuse total, and the arena's *measured* peak after a real run in
            arena mode (O0Executor(graph, arena=True)), which must equal the plan.
            Targets: planned peak <= 1.05 x lower bound, >= 40% below no reuse.
  lazy      Compile time (capture + verify + passes + executor) of a training step (value_and_grad
            of the loss) of an n-layer LLaMA, 4 vs 32 layers, with and without @lazy_inline on the
            transformer block, at jit_level O0 and O1 (fusion). Target: 32-layer / 4-layer <= 1.5
            with lazy_inline.
  cache     The compile cache across processes: a child process compiles the tiny LLaMA training
            step with `enable_compile_cache=True` (capture_mode "ast", jit's default, and
            "trace"), a second child loads it. CPU time of `jit.compile` in each (the second must
            skip capture). Target: >= 10x lower in the second process.

Run: `python bench/bench_memory.py [--section memory|lazy|cache|all] [--repeats R]`.
"""
from __future__ import annotations

import argparse
import gc
import json
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import minispore as ms
from minispore.graph import O0Executor, memory
from minispore.llm.config import LlamaConfig, get_preset
from minispore.llm import model as llama_model
from minispore.llm.model import Llama

MB = 1 << 20


class LazyTransformerBlock(llama_model.TransformerBlock):
    """The LLaMA block with MindSpore's `@lazy_inline` on its `__init__`."""

    @ms.lazy_inline
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)


def build_llama(cfg: LlamaConfig, lazy: bool = False):
    """A Llama whose transformer blocks are LazyTransformerBlocks when `lazy`."""
    if not lazy:
        return Llama(cfg)
    saved = llama_model.TransformerBlock
    llama_model.TransformerBlock = LazyTransformerBlock
    try:
        return Llama(cfg)
    finally:
        llama_model.TransformerBlock = saved


def llama_step(cfg: LlamaConfig, batch: int, seed: int = 0, lazy: bool = False):
    """(jitted value_and_grad step, tokens, targets) for a LLaMA of config `cfg`."""
    ms.set_seed(seed)
    net = build_llama(cfg, lazy)
    gf = ms.value_and_grad(net.loss, None, net.trainable_params())

    def step(x, y):
        return gf(x, y)

    rng = np.random.default_rng(seed)
    x = ms.Tensor(rng.integers(0, cfg.vocab_size, (batch, cfg.max_seq_len)).astype(np.int32))
    y = ms.Tensor(rng.integers(0, cfg.vocab_size, (batch, cfg.max_seq_len)).astype(np.int32))
    return ms.jit(step, capture_mode="trace"), x, y


# -- memory ------------------------------------------------------------------------------------------
def section_memory(repeats: int):
    cfg = get_preset("shakespeare-char").model
    jf, x, y = llama_step(cfg, batch=12)
    graph = jf.compile(x, y).graph
    t0 = time.perf_counter()
    p = memory.plan(graph)
    plan_s = time.perf_counter() - t0
    ex = O0Executor(graph, arena=True)
    heap = O0Executor(graph)
    got = ex.run(x._data, y._data)
    want = heap.run(x._data, y._data)
    same = all(np.array_equal(a, b) for a, b in zip(got, want))
    measured = ex.arena.high_water
    t_arena, t_heap = [], []
    for _ in range(repeats):
        t = time.perf_counter()
        ex.run(x._data, y._data)
        t_arena.append(time.perf_counter() - t)
        t = time.perf_counter()
        heap.run(x._data, y._data)
        t_heap.append(time.perf_counter() - t)
    owned = p.owned()
    views = sum(1 for b in p.buffers if b.kind == "view")
    lb = p.lower_bound_bytes

    print("### Memory planning: tiny LLaMA forward + backward (`shakespeare-char`, batch 12)\n")
    print(f"Graph: {len(graph.nodes)} nodes; {len(owned)} planned buffers ({views} views alias them, "
          f"{sum(1 for b in p.buffers if b.kind == 'external_view')} views of parameters are not planned); "
          f"alignment {memory.DEFAULT_ALIGNMENT} B; planning all heuristics took {plan_s * 1e3:.1f} ms.\n")
    print("| heuristic | planned arena (MB) | / lower bound | vs no reuse |")
    print("|---|---:|---:|---:|")
    for h in memory.HEURISTICS:
        peak = p.results[h]
        mark = " **(kept)**" if h == p.heuristic else ""
        print(f"| {h}{mark} | {peak / MB:.3f} | {peak / lb:.4f} | -{(1 - peak / p.no_reuse_bytes) * 100:.1f}% |")
    print()
    print("| quantity | value |")
    print("|---|---:|")
    print(f"| lower bound (max live bytes; \"Used peak, without fragments\") | {lb / MB:.3f} MB |")
    print(f"| planned peak (\"Actual peak, with fragments\") | {p.peak_bytes / MB:.3f} MB |")
    print(f"| no reuse (sum of all buffers) | {p.no_reuse_bytes / MB:.3f} MB |")
    print(f"| fragmentation (peak / lower bound - 1) | {p.fragmentation:.4f} |")
    print(f"| planned peak / lower bound (target <= 1.05) | **{p.peak_bytes / lb:.4f}** |")
    print(f"| saving vs no reuse (target >= 40%) | **{(1 - p.peak_bytes / p.no_reuse_bytes) * 100:.1f}%** |")
    print(f"| arena peak measured in a real run (must equal the plan) | {measured} B "
          f"({'equal' if measured == p.peak_bytes else 'DIFFERENT'}) |")
    print(f"| arena-mode results == default O0 results | {'bit-identical' if same else 'DIFFERENT'} |")
    print(f"| step time, arena mode / default O0 (median of {repeats}) | {statistics.median(t_arena) * 1e3:.1f} ms / "
          f"{statistics.median(t_heap) * 1e3:.1f} ms |")
    print()
    return {"peak": p.peak_bytes, "lb": lb, "no_reuse": p.no_reuse_bytes, "measured": measured}


# -- lazy_inline ----------------------------------------------------------------------------------------
def _compile_seconds(n_layers: int, lazy: bool, jit_level: str, seed: int, capture_mode: str = "trace") -> tuple:
    """CPU time of one `jit.compile` (capture, verify, passes, executor) of a fresh model's step."""
    cfg = LlamaConfig(vocab_size=65, dim=64, n_layers=n_layers, n_heads=4, max_seq_len=32, multiple_of=32)
    ms.set_seed(seed)
    net = build_llama(cfg, lazy)
    gf = ms.value_and_grad(net.loss, None, net.trainable_params())

    def step(x, y):
        return gf(x, y)

    rng = np.random.default_rng(seed)
    x = ms.Tensor(rng.integers(0, 65, (4, 32)).astype(np.int32))
    y = ms.Tensor(rng.integers(0, 65, (4, 32)).astype(np.int32))
    jf = ms.jit(step, capture_mode=capture_mode, jit_level=jit_level)
    gc.collect()
    gc.disable()                    # no collector pauses inside the timing (the same for every row)
    try:
        t = time.process_time()
        entry = jf.compile(x, y)
        _LAST_PHASES.clear()
        _LAST_PHASES.update(entry.phases)
        return time.process_time() - t, len(entry.graph.nodes)
    finally:
        gc.enable()


_LAST_PHASES: dict = {}     # the phases (seconds) of the last `_compile_seconds` (CacheEntry.phases)


def _phase_breakdown(level: str, repeats: int):
    """Per-extra-layer cost of each compile phase, lazy blocks, trace capture (min over repeats)."""
    best: dict = {4: {}, 32: {}}
    for r in range(repeats):
        for n in (4, 32):
            _compile_seconds(n, True, level, r)
            for k, v in _LAST_PHASES.items():
                best[n][k] = min(best[n].get(k, v), v)
    return {k: (best[4][k], best[32][k]) for k in best[32]}


def section_lazy(repeats: int):
    print("### lazy_inline: compile time vs depth (LLaMA training step, dim 64, seq 32)\n")
    print(f"CPU time of `jit.compile` (capture + verify + passes + executor), minimum of {repeats}; "
          "4- and 32-layer models measured alternately.\n")
    print("| capture | jit_level | transformer block | 4 layers | 32 layers | 32 / 4 (target <= 1.5 lazy) "
          "| per extra layer | top-level nodes 4 / 32 |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    rows = []
    # trace: both block kinds; ast (jit's default capture mode): lazy only (its inlined 32-layer
    # compile takes seconds and shows nothing new)
    for capture, level, lazy in [("trace", lv, lz) for lv in ("O0", "O1") for lz in (False, True)] + \
            [("ast", lv, True) for lv in ("O0", "O1")]:
        t4, t32 = [], []
        for r in range(repeats):
            a, n4 = _compile_seconds(4, lazy, level, r, capture)
            b, n32 = _compile_seconds(32, lazy, level, r, capture)
            t4.append(a)
            t32.append(b)
        m4, m32 = min(t4), min(t32)
        name = "@lazy_inline (shared CALL subgraphs)" if lazy else "inlined (default)"
        per_layer = (m32 - m4) / 28
        print(f"| {capture} | {level} | {name} | {m4 * 1e3:.1f} ms | {m32 * 1e3:.1f} ms | **{m32 / m4:.2f}** "
              f"| {per_layer * 1e6:.0f} us | {n4} / {n32} |")
        rows.append((capture, level, lazy, m4, m32))
    print()
    print("Where a lazy layer's compile time goes (CacheEntry.phases, wall time, minimum of "
          f"{repeats}; trace capture; per extra layer = (32 layers - 4 layers) / 28):\n")
    print("| jit_level | phase | 4 layers | 32 layers | per extra layer |")
    print("|---|---|---:|---:|---:|")
    for level in ("O0", "O1"):
        for phase, (a, b) in _phase_breakdown(level, repeats).items():
            print(f"| {level} | {phase} | {a * 1e3:.2f} ms | {b * 1e3:.2f} ms | {(b - a) / 28 * 1e6:.0f} us |")
    print()
    return rows


# -- compile cache -----------------------------------------------------------------------------------
_CHILD = r"""
import gc, json, sys, time
import numpy as np
import minispore as ms
from minispore.graph import compile_cache
from minispore.llm.config import get_preset
from minispore.llm.model import Llama
ms.set_context(enable_compile_cache=True, compile_cache_path={path!r})
ms.set_seed(0)
net = Llama(get_preset("shakespeare-char").model)
grad_fn = ms.value_and_grad(net.loss, None, net.trainable_params())


def train_step(x, y):
    return grad_fn(x, y)


rng = np.random.default_rng(0)
x = ms.Tensor(rng.integers(0, 65, (12, 64)).astype(np.int32))
y = ms.Tensor(rng.integers(0, 65, (12, 64)).astype(np.int32))
jf = ms.jit(train_step, capture_mode={mode!r})
gc.collect()
gc.disable()                       # the same for both processes: no collector pauses inside the timing
t = time.process_time()
jf.compile(x, y)
dt = time.process_time() - t
gc.enable()
loss, grads = jf(x, y)
print(json.dumps({{"compile_s": dt, "stats": compile_cache.stats(), "loss": float(loss.asnumpy())}}))
"""


def _child(path, mode):
    code = _CHILD.format(path=path, mode=mode)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def section_cache(repeats: int):
    print("### Compile cache: the tiny LLaMA training step compiled in two processes\n")
    print("Each row: a fresh cache directory; process 1 compiles (capture, verify, executor) and stores, "
          "process 2 loads the graph (capture skipped) and builds its executor. CPU time of "
          f"`jit.compile`, minimum of {repeats} process pairs.\n")
    print("| capture mode | process 1 (capture + store) | process 2 (load) | ratio (target >= 10) "
          "| captures p1 / p2 | same loss |")
    print("|---|---:|---:|---:|---:|---|")
    out = {}
    for mode in ("ast", "trace"):
        firsts, seconds, same, stats = [], [], True, None
        for _ in range(repeats):
            with tempfile.TemporaryDirectory() as d:
                a = _child(d, mode)
                b = _child(d, mode)
            firsts.append(a["compile_s"])
            seconds.append(b["compile_s"])
            same &= a["loss"] == b["loss"]
            stats = (a["stats"], b["stats"])
        f, s = min(firsts), min(seconds)
        default = " (jit's default)" if mode == "ast" else ""
        print(f"| {mode}{default} | {f * 1e3:.2f} ms | {s * 1e3:.2f} ms | **{f / s:.1f}x** | "
              f"{stats[0]['captures']} / {stats[1]['captures']} | {'yes' if same else 'NO'} |")
        out[mode] = (f, s)
    print()
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--section", default="all", choices=["memory", "lazy", "cache", "all"])
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)
    if args.section in ("memory", "all"):
        section_memory(args.repeats)
    if args.section in ("lazy", "all"):
        section_lazy(args.repeats)
    if args.section in ("cache", "all"):
        section_cache(args.repeats)


if __name__ == "__main__":
    main()
