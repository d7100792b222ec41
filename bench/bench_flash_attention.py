"""FlashAttention vs naive attention: peak extra memory and time (issue 7, "Measure").

One head, sequence length N (default 4096), head dim d (default 64), float32 by default. Rows:

  naive (NumPy)            S = Q K^T * scale, softmax, P V — the whole N x N matrix (twice: S and P)
  naive (minispore ops)    the same written as ops.matmul / ops.softmax / ops.matmul, forward and
                           forward+backward (autodiff keeps S and P for the backward)
  flash_attention_score    ops.flash_attention_score: tiled, online softmax; the backward recomputes
                           P tile by tile from the saved log-sum-exp
  PyTorch SDPA             torch.nn.functional.scaled_dot_product_attention (time only: PyTorch's
                           allocator is invisible to tracemalloc)

"Peak extra memory" = tracemalloc's peak during the call, inputs allocated before it started (so
it counts outputs, saved activations, gradients and every temporary). The target: flash's forward
peak <= 5% of one N x N matrix of the dtype (N^2 * itemsize bytes). Times are medians of --repeats
runs (tracemalloc off). Run twice, non-causal and causal (sparse_mode=2 / is_causal).

Threads: one BLAS thread (threadpoolctl) and one PyTorch thread by default (`--threads 0` keeps the
libraries' defaults): on the shared 2-core machines a second thread mostly adds noise.

Run: `python bench/bench_flash_attention.py [--n 4096] [--d 64] [--dtype float32|float64]
[--block-q 128 --block-kv 128] [--repeats 5] [--threads 1] [--sweep] [--no-torch]`.
"""
from __future__ import annotations

import argparse
import gc
import statistics
import time
import tracemalloc

import numpy as np

import minispore as ms
from minispore import Tensor, ops

try:
    import threadpoolctl
except ImportError:                      # then OPENBLAS_NUM_THREADS decides
    threadpoolctl = None
try:
    import torch
except ImportError:
    torch = None

MB = 1 << 20


def naive_numpy(q, k, v, scale, causal):
    s = (q @ k.T) * scale
    if causal:
        s[np.triu_indices(s.shape[0], 1)] = -np.inf
    s -= s.max(axis=-1, keepdims=True)
    p = np.exp(s, out=s)
    p /= p.sum(axis=-1, keepdims=True)
    return p @ v


def naive_ops(q, k, v, scale, causal, mask):
    s = ops.matmul(q, ops.transpose(k, (0, 1, 3, 2))) * scale
    if causal:
        s = ops.masked_fill(s, mask, float("-inf"))
    return ops.matmul(ops.softmax(s, -1), v)


def flash(q, k, v, scale, causal, blocks):
    return ops.flash_attention_score(q, k, v, 1, scalar_value=scale, input_layout="BNSD",
                                     sparse_mode=2 if causal else 0, block_q=blocks[0], block_kv=blocks[1])


def measure(fn, repeats):
    """(peak traced bytes of one call, median seconds over `repeats` untraced calls)."""
    # one untraced call first: the first call of a process also loads the C kernels (cffi's
    # module objects, ~1 MiB of Python allocations), which is not memory the call itself needs
    fn()
    gc.collect()
    tracemalloc.start()
    try:
        out = fn()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    del out
    times = []
    for _ in range(repeats):
        gc.collect()
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
        del out
    return peak, statistics.median(times)


def training_step(attn):
    """forward + backward (gradients of q, k, v) of sum(attn(q, k, v) * w)."""
    def step(q, k, v, w):
        return ms.value_and_grad(lambda a, b, c: (attn(a, b, c) * w).sum(), grad_position=(0, 1, 2))(q, k, v)
    return step


def run(n, d, dtype, blocks, repeats, causal, use_torch):
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((1, 1, n, d)).astype(dtype) for _ in range(3))
    w = rng.standard_normal((1, 1, n, d)).astype(dtype)
    scale = d ** -0.5
    qt, kt, vt, wt = (Tensor(a) for a in (q, k, v, w))
    mask = Tensor(np.triu(np.ones((n, n), bool), 1)) if causal else None      # the naive path's mask
    nn_bytes = n * n * np.dtype(dtype).itemsize

    rows = []
    rows.append(("naive (NumPy)", "forward", *measure(lambda: naive_numpy(q[0, 0], k[0, 0], v[0, 0], scale, causal),
                                                       repeats)))
    rows.append(("naive (minispore ops)", "forward",
                 *measure(lambda: naive_ops(qt, kt, vt, scale, causal, mask), repeats)))
    rows.append(("flash_attention_score", "forward", *measure(lambda: flash(qt, kt, vt, scale, causal, blocks), repeats)))
    naive_step = training_step(lambda a, b, c: naive_ops(a, b, c, scale, causal, mask))
    flash_step = training_step(lambda a, b, c: flash(a, b, c, scale, causal, blocks))
    rows.append(("naive (minispore ops)", "forward+backward", *measure(lambda: naive_step(qt, kt, vt, wt), repeats)))
    rows.append(("flash_attention_score", "forward+backward", *measure(lambda: flash_step(qt, kt, vt, wt), repeats)))

    # the two must agree (float32: 1e-5 relative to the output scale)
    a = flash(qt, kt, vt, scale, causal, blocks).asnumpy()
    b = naive_ops(qt, kt, vt, scale, causal, mask).asnumpy()
    err = float(np.max(np.abs(a - b)))

    torch_row = None
    if use_torch and torch is not None:
        tq, tk, tv = (torch.from_numpy(x) for x in (q, k, v))
        f = torch.nn.functional.scaled_dot_product_attention
        torch_row = ("PyTorch SDPA", "forward", None,
                     measure(lambda: f(tq, tk, tv, is_causal=causal, scale=scale), repeats)[1])

    title = "causal" if causal else "non-causal"
    print(f"\n### {title}: N = {n}, d = {d}, {np.dtype(dtype).name}, tiles {blocks[0]} x {blocks[1]} "
          f"(one N x N matrix = {nn_bytes / MB:.1f} MiB); max |flash - naive| = {err:.1e}\n")
    print("| implementation | pass | peak extra memory | % of one N×N matrix | time | memory vs naive ops | time vs naive ops |")
    print("|---|---|---:|---:|---:|---:|---:|")
    naive_by_pass = {p: (m, t) for name, p, m, t in rows if name == "naive (minispore ops)"}
    for name, pas, peak, t in rows + ([torch_row] if torch_row else []):
        nm, nt = naive_by_pass[pas]
        mem = "—" if peak is None else f"{peak / MB:.2f} MiB"
        pct = "—" if peak is None else f"{100 * peak / nn_bytes:.1f}%"
        mr = "—" if peak is None else f"{peak / nm:.3f}"
        print(f"| {name} | {pas} | {mem} | {pct} | {1e3 * t:.0f} ms | {mr} | {t / nt:.2f} |")
    flash_fwd = rows[2][2]
    verdict = "met" if flash_fwd <= 0.05 * nn_bytes else "MISSED"
    print(f"\nflash forward peak = {100 * flash_fwd / nn_bytes:.2f}% of the N×N matrix (target ≤ 5%: {verdict})")
    return rows


def sweep(n, d, dtype, repeats):
    rng = np.random.default_rng(0)
    qt, kt, vt = (Tensor(rng.standard_normal((1, 1, n, d)).astype(dtype)) for _ in range(3))
    nn_bytes = n * n * np.dtype(dtype).itemsize
    print(f"\n### tile sizes (causal forward, N = {n}, d = {d}, {np.dtype(dtype).name})\n")
    print("| block_q × block_kv | peak extra memory | % of N×N | time |")
    print("|---|---:|---:|---:|")
    for bq, bk in [(32, 32), (64, 64), (128, 128), (256, 256), (512, 512)]:
        peak, t = measure(lambda: flash(qt, kt, vt, d ** -0.5, True, (bq, bk)), repeats)
        print(f"| {bq} × {bk} | {peak / MB:.2f} MiB | {100 * peak / nn_bytes:.2f}% | {1e3 * t:.0f} ms |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    ap.add_argument("--block-q", type=int, default=None)
    ap.add_argument("--block-kv", type=int, default=None)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1, help="BLAS / PyTorch threads (0: library defaults)")
    ap.add_argument("--sweep", action="store_true", help="also time a range of tile sizes")
    ap.add_argument("--no-torch", action="store_true")
    args = ap.parse_args()
    from minispore.ops.prims.fused_attention import DEFAULT_BLOCK_KV, DEFAULT_BLOCK_Q
    blocks = (args.block_q or DEFAULT_BLOCK_Q, args.block_kv or DEFAULT_BLOCK_KV)
    dtype = np.dtype(args.dtype).type
    limit = None
    if args.threads:
        if torch is not None:
            torch.set_num_threads(args.threads)
        if threadpoolctl is not None:
            limit = threadpoolctl.threadpool_limits(limits=args.threads, user_api="blas")
    blas = ([f"{i.get('internal_api')} {i.get('architecture')}, {i.get('num_threads')} thread(s)"
             for i in threadpoolctl.threadpool_info() if i.get("user_api") == "blas"] if threadpoolctl
            else ["threadpoolctl not installed: BLAS threads from OPENBLAS_NUM_THREADS"])
    print(f"NumPy BLAS: {'; '.join(blas)}" + (f"; PyTorch threads: {torch.get_num_threads()}" if torch else ""))
    try:
        for causal in (False, True):
            run(args.n, args.d, dtype, blocks, args.repeats, causal, not args.no_torch)
        if args.sweep:
            sweep(args.n, args.d, dtype, args.repeats)
    finally:
        if limit is not None:
            limit.restore_original_limits()


if __name__ == "__main__":
    main()
