"""Generation latency and throughput: minispore's KV-cache decoding vs HuggingFace transformers on PyTorch CPU.

Two models, the same weights on both sides (minispore writes a HuggingFace folder with
`save_pretrained`, transformers loads it with `LlamaForCausalLM.from_pretrained`):

* **tiny (trained)**: the `shakespeare-char` preset (0.8M parameters, 4 layers, context 64),
  trained by this script for --tiny-iters iterations with minispore's trainer (default 300,
  about 15 s; or pass --ckpt DIR to use a `minispore train` output instead);
* **~100M (random init)**: vocab 32000, 768 wide, 12 layers, 12 query / 4 key-value heads,
  SwiGLU 2048, tied embeddings, context 512 — 100.1M parameters.

Measured (greedy decoding, stop tokens off so every run produces exactly the requested tokens):

* first-token latency: `generate(max_new_tokens=1)` — prefill of the prompt + the first token;
* per-token latency: (time of `generate(max_new_tokens=N+1)` - first-token time) / N;
* decode throughput at batch 1, 8, 32: B*N / (time of N+1 tokens - time of 1 token), prompts of
  equal length.

minispore runs with its contiguous and its paged KV cache; transformers with its default
(dynamic) cache and eager attention. Runs alternate between the two frameworks (machine-load
drift hits both alike); each number is the median of --repeats runs after one warm-up. Threads:
`torch.set_num_threads(T)` and NumPy's BLAS limited to T with threadpoolctl (--threads, default 1:
on shared 2-core machines the single-threaded numbers are the stable ones).

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python bench/bench_generate.py
    .venv/bin/python bench/bench_generate.py --quick            # smaller, for a smoke run

Prints Markdown tables (site/performance.md, "LLM inference").
"""
from __future__ import annotations

import argparse
import contextlib
import os
import platform
import statistics
import sys
import tempfile
import time

import numpy as np

import minispore as ms
from minispore.llm import Llama, LlamaConfig
from minispore.llm.generate import generate_batch

try:
    import threadpoolctl
except ImportError:
    threadpoolctl = None

BIG = LlamaConfig(vocab_size=32000, dim=768, n_layers=12, n_heads=12, n_kv_heads=4, ffn_dim=2048, max_seq_len=512,
                  tie_embeddings=True)


# ------------------------------------------------------------------------------------------------
# models
def tiny_trained(iters, ckpt):
    """The shakespeare-char model after `iters` training iterations (or loaded from `ckpt`)."""
    from minispore.llm.cli_commands import load_for_generation
    if ckpt is None:
        from minispore.llm.config import get_preset
        from minispore.llm.trainer import TrainConfig, train
        ckpt = tempfile.mkdtemp(prefix="bench_generate_")
        tc = TrainConfig.from_preset("shakespeare-char", max_iters=iters, lr_decay_iters=iters,
                                     warmup_iters=max(1, iters // 10), out_dir=ckpt, progress=False, plot=False,
                                     eval_interval=iters, eval_iters=5, final_eval_iters=20, ckpt_interval=iters)
        t0 = time.perf_counter()
        m = train(get_preset("shakespeare-char").model, tc)
        print(f"trained shakespeare-char for {iters} iterations in {time.perf_counter() - t0:.1f} s: "
              f"val loss {m['final_val_loss']:.3f}", file=sys.stderr)
    model, tokenizer = load_for_generation(ckpt)
    return model, tokenizer


def big_random():
    ms.set_seed(0)
    model = Llama(BIG)
    model.set_train(False)
    return model


def hf_twin(model):
    """The same weights in transformers.LlamaForCausalLM (eager attention, float32)."""
    import transformers
    folder = tempfile.mkdtemp(prefix="bench_generate_hf_")
    model.save_pretrained(folder)
    return transformers.LlamaForCausalLM.from_pretrained(folder, attn_implementation="eager").eval()


# ------------------------------------------------------------------------------------------------
# one timed generation per framework
def run_minispore(model, prompts, n, kv_cache):
    t0 = time.perf_counter()
    res = generate_batch(model, prompts, n, temperature=0.0, kv_cache=kv_cache, block_size=16)
    dt = time.perf_counter() - t0
    assert all(len(r.token_ids) == n for r in res)
    return dt, [r.token_ids for r in res]


def run_hf(hf, prompts, n):
    import torch
    x = torch.tensor(prompts)
    t0 = time.perf_counter()
    with torch.no_grad():
        out = hf.generate(x, attention_mask=torch.ones_like(x), do_sample=False, max_new_tokens=n,
                          min_new_tokens=n, pad_token_id=0, eos_token_id=None)
    dt = time.perf_counter() - t0
    return dt, out[:, x.shape[1]:].tolist()


def measure(runners, prompts, n, repeats):
    """{name: (first-token s, per-token s, tokens)}: medians over repeats, runners interleaved."""
    first = {k: [] for k in runners}
    full = {k: [] for k in runners}
    tokens = {}
    for r in range(repeats + 1):                      # run 0 is the warm-up
        for name, fn in runners.items():
            t1, _ = fn(prompts, 1)
            tn, toks = fn(prompts, n + 1)
            if r:
                first[name].append(t1)
                full[name].append(tn)
            tokens[name] = toks
    out = {}
    for name in runners:
        f, t = statistics.median(first[name]), statistics.median(full[name])
        out[name] = (f, (t - f) / n, tokens[name])
    return out


def agreement(a, b):
    same = sum(x == y for ra, rb in zip(a, b) for x, y in zip(ra, rb))
    return same, sum(len(r) for r in a)


# ------------------------------------------------------------------------------------------------
def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=1, help="torch threads = BLAS threads (default 1)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--tiny-iters", type=int, default=300, help="training iterations of the tiny model")
    ap.add_argument("--ckpt", default=None, help="use this `minispore train` output as the tiny model")
    ap.add_argument("--new-tokens", type=int, default=32, help="decoded tokens per latency run")
    ap.add_argument("--batches", default="1,8,32", help="batch sizes of the throughput table")
    ap.add_argument("--quick", action="store_true", help="tiny-iters 30, repeats 1, batches 1,8, 8 new tokens")
    ap.add_argument("--no-torch", action="store_true", help="minispore only")
    args = ap.parse_args()
    if args.quick:
        args.tiny_iters, args.repeats, args.batches, args.new_tokens = 30, 1, "1,8", 8
    batches = [int(b) for b in args.batches.split(",")]

    with_torch = not args.no_torch
    if with_torch:
        try:
            import torch
            import transformers
            torch.set_num_threads(args.threads)
        except ImportError:
            print("torch/transformers not installed: minispore rows only", file=sys.stderr)
            with_torch = False
    limit = threadpoolctl.threadpool_limits(args.threads, user_api="blas") if threadpoolctl else contextlib.nullcontext()
    with limit:
        blas = threadpoolctl.threadpool_info() if threadpoolctl else []
        blas = ", ".join(f"{i['internal_api']} {i['version']} ({i.get('architecture')}, {i['num_threads']} threads)"
                         for i in blas if i["user_api"] == "blas") or "unknown BLAS"
        print(f"# {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
              f"NumPy {np.__version__} [{blas}]"
              + (f", torch {torch.__version__} ({torch.get_num_threads()} threads), transformers "
                 f"{transformers.__version__}" if with_torch else ""))
        print(f"# greedy, median of {args.repeats} runs after a warm-up; first token = prefill + 1 token\n")

        tiny, tok = tiny_trained(args.tiny_iters, args.ckpt)
        big = big_random()
        rng = np.random.default_rng(0)
        cases = [
            (f"tiny trained ({tiny.num_params() / 1e6:.1f}M, {args.tiny_iters} iters)", tiny,
             [list(tok.encode("ROMEO:\nWhat say"))], min(args.new_tokens, tiny.config.max_seq_len - 20)),
            (f"~100M random ({big.num_params() / 1e6:.1f}M)", big, [rng.integers(0, BIG.vocab_size, 64).tolist()],
             args.new_tokens),
        ]

        print("## Latency (batch 1)\n")
        print("| model | prompt | new | minispore first token ms | minispore ms/token (contiguous) | "
              "minispore ms/token (paged) | transformers first token ms | transformers ms/token | "
              "ms/token ratio | greedy tokens equal |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for label, model, prompts, n in cases:
            runners = {
                "contiguous": lambda p, k, m=model: run_minispore(m, p, k, "contiguous"),
                "paged": lambda p, k, m=model: run_minispore(m, p, k, "paged"),
            }
            if with_torch:
                hf = hf_twin(model)
                runners["hf"] = lambda p, k, h=hf: run_hf(h, p, k)
            r = measure(runners, prompts, n, args.repeats)
            c, p = r["contiguous"], r["paged"]
            row = f"| {label} | {len(prompts[0])} | {n} | {c[0] * 1e3:.1f} | {c[1] * 1e3:.2f} | {p[1] * 1e3:.2f} |"
            if with_torch:
                h = r["hf"]
                same, total = agreement(c[2], h[2])
                row += f" {h[0] * 1e3:.1f} | {h[1] * 1e3:.2f} | **{c[1] / h[1]:.2f}×** | {same}/{total} |"
            else:
                row += " – | – | – | – |"
            print(row, flush=True)

        print("\n## Decode throughput (~100M random, prompt 32, greedy)\n")
        print("| batch | new tokens | minispore contiguous tok/s | minispore paged tok/s | transformers tok/s | "
              "contiguous / transformers |")
        print("|---:|---:|---:|---:|---:|---:|")
        runners = {
            "contiguous": lambda p, k: run_minispore(big, p, k, "contiguous"),
            "paged": lambda p, k: run_minispore(big, p, k, "paged"),
        }
        if with_torch:
            hf = hf_twin(big)
            runners["hf"] = lambda p, k: run_hf(hf, p, k)
        for b in batches:
            prompts = rng.integers(0, BIG.vocab_size, (b, 32)).tolist()
            n = args.new_tokens
            r = measure(runners, prompts, n, args.repeats)
            tps = {k: b / v[1] for k, v in r.items()}
            row = f"| {b} | {n} | {tps['contiguous']:.1f} | {tps['paged']:.1f} |"
            row += f" {tps['hf']:.1f} | **{tps['contiguous'] / tps['hf']:.2f}×** |" if with_torch else " – | – |"
            print(row, flush=True)


if __name__ == "__main__":
    main()
