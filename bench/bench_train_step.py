"""One training step of nanoGPT's shakespeare_char CPU config: minispore PyNative vs PyTorch eager.

The model is minispore's LLaMA preset `shakespeare-char` (4 layers, 4 heads, 128 wide, block 64,
vocab 65; RMSNorm, half-split RoPE, SwiGLU 352 wide, tied head) and its exact PyTorch mirror
(bench/torch_models.py), started from the same weights. A step is forward + backward + AdamW
(lr 1e-3, betas 0.9/0.99, weight decay 0.1) on a batch of 12 x 64 tokens.

Both frameworks run in this one process, alternating step by step (so machine-load drift hits both
alike), first with one thread each (torch.set_num_threads(1); NumPy's BLAS limited to 1 thread
with threadpoolctl), then with each library's default thread count. Reported: median ms/iter over
--iters steps after --warmup steps, and minispore / PyTorch.

    python bench/bench_train_step.py                  # the table
    python bench/bench_train_step.py --profile        # + where minispore's step time goes
    python bench/bench_train_step.py --gpt            # + nanoGPT's GPT in PyTorch (reference row)

On machines where OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE are set (to work around old OpenBLAS bugs)
a current NumPy runs slower kernels; bench/README.md says how the published numbers were run.
"""
from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import os
import platform
import pstats
import statistics
import sys
import time

import numpy as np

import minispore as ms
from minispore import nn
from minispore.llm.config import get_preset
from minispore.llm.model import Llama

try:
    import threadpoolctl
except ImportError:          # optional: without it NumPy's BLAS threads follow OPENBLAS_NUM_THREADS
    threadpoolctl = None

BATCH = 12
HERE = os.path.dirname(os.path.abspath(__file__))


# ---------------------------------------------------------------------------------------------
# minispore
def make_minispore(seed=0, loss_as_float=True):
    """(config, model, optimizer, step): one forward + backward + AdamWeightDecay step of the
    shakespeare-char LLaMA. `loss_as_float=False` keeps the loss a Tensor (needed under jit)."""
    ms.set_seed(seed)
    cfg = get_preset("shakespeare-char").model
    model = Llama(cfg)
    opt = nn.AdamWeightDecay(model.trainable_params(), learning_rate=1e-3, beta1=0.9, beta2=0.99,
                             eps=1e-8, weight_decay=0.1)
    grad_fn = ms.value_and_grad(model.loss, None, opt.parameters)

    def step(x, y):
        loss, grads = grad_fn(x, y)
        opt(grads)
        return float(loss.asnumpy()) if loss_as_float else loss
    return cfg, model, opt, step


# ---------------------------------------------------------------------------------------------
# PyTorch
def make_torch_llama(cfg, ms_model):
    import torch
    sys.path.insert(0, HERE)
    from torch_models import TorchLlama
    model = TorchLlama(cfg.vocab_size, cfg.dim, cfg.n_layers, cfg.n_heads, cfg.hidden_dim, cfg.max_seq_len,
                       cfg.norm_eps, cfg.rope_theta)
    # same initial weights: minispore names map onto the mirror's, embedding_table -> weight
    ms_params = {p.name: p.asnumpy() for p in ms_model.trainable_params()}
    with torch.no_grad():
        for name, p in model.named_parameters():
            src = ms_params[name.replace("tok_embeddings.weight", "tok_embeddings.embedding_table")]
            p.copy_(torch.from_numpy(np.array(src)))
    assert len(ms_params) == len(list(model.parameters()))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.1)

    def step(x, y):
        opt.zero_grad(set_to_none=True)
        loss = model.loss(x, y)
        loss.backward()
        opt.step()
        return loss.item()
    return step


def make_torch_gpt(cfg):
    import torch
    sys.path.insert(0, HERE)
    from torch_models import TorchGPT
    torch.manual_seed(0)
    model = TorchGPT(cfg.vocab_size, cfg.dim, cfg.n_layers, cfg.n_heads, cfg.max_seq_len)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.99), weight_decay=0.1)

    def step(x, y):
        opt.zero_grad(set_to_none=True)
        loss = model.loss(x, y)
        loss.backward()
        opt.step()
        return loss.item()
    return step


# ---------------------------------------------------------------------------------------------
@contextlib.contextmanager
def threads(n):
    """n=1: one thread for NumPy's BLAS and PyTorch; n=None: each library's default."""
    torch = sys.modules.get("torch")
    saved = torch.get_num_threads() if torch else None
    limit = contextlib.nullcontext()
    if n is not None:
        if torch:
            torch.set_num_threads(n)
        if threadpoolctl is not None:
            limit = threadpoolctl.threadpool_limits(limits=n, user_api="blas")
    try:
        with limit:
            yield
    finally:
        if torch:
            torch.set_num_threads(saved)


def blas_description():
    if threadpoolctl is None:
        return (f"NumPy BLAS: threadpoolctl not installed, threads from OPENBLAS_NUM_THREADS="
                f"{os.environ.get('OPENBLAS_NUM_THREADS', '(unset)')}")
    parts = [f"{i.get('internal_api')} {i.get('version')} kernel={i.get('architecture')} "
             f"threads={i.get('num_threads')}" for i in threadpoolctl.threadpool_info() if i.get("user_api") == "blas"]
    return "NumPy BLAS: " + "; ".join(parts)


def time_steps(steps, batches, iters, warmup):
    """Alternate the steps (name -> fn) on the same batches; median seconds per step for each."""
    times = {name: [] for name in steps}
    for i in range(warmup + iters):
        xb = batches[i % len(batches)]
        for name, fn in steps.items():
            x, y = xb[name]
            t0 = time.perf_counter()
            fn(x, y)
            if i >= warmup:
                times[name].append(time.perf_counter() - t0)
    return {name: statistics.median(ts) for name, ts in times.items()}


def make_batches(n, vocab, seq, with_torch):
    rng = np.random.default_rng(1234)
    out = []
    for _ in range(n):
        x = rng.integers(0, vocab, (BATCH, seq)).astype(np.int64)
        y = rng.integers(0, vocab, (BATCH, seq)).astype(np.int64)
        b = {"minispore": (ms.Tensor(x), ms.Tensor(y))}
        if with_torch:
            import torch
            b["torch"] = b["torch-gpt"] = (torch.from_numpy(x), torch.from_numpy(y))
        out.append(b)
    return out


def profile_minispore(step, batches, n):
    """Per-primitive kernel/bprop table and cProfile's top functions for n minispore steps."""
    sys.path.insert(0, HERE)
    from prim_profile import PrimProfile
    x, y = batches[0]["minispore"]
    with PrimProfile() as prof:
        t0 = time.perf_counter()
        for _ in range(n):
            step(x, y)
        wall = time.perf_counter() - t0
    print(f"\n## minispore step profile ({n} steps; timers add ~0.3 µs per call)")
    print(f"wall {wall / n * 1e3:.1f} ms/step, of which kernels {prof.kernel_total_s() / n * 1e3:.1f} ms "
          f"({prof.kernel_calls() / n:.0f} kernel calls/step)\n")
    print(prof.table(n, top=25))
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(n):
        step(x, y)
    pr.disable()
    s = io.StringIO()
    pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(25)
    print("\ncProfile, by own time:\n" + "\n".join(s.getvalue().splitlines()[:45]))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--iters", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--threads", choices=["1", "default", "both"], default="both")
    p.add_argument("--no-torch", action="store_true", help="time minispore only")
    p.add_argument("--gpt", action="store_true", help="also time nanoGPT's GPT in PyTorch")
    p.add_argument("--profile", action="store_true", help="profile the minispore step afterwards")
    args = p.parse_args(argv)

    cfg, ms_model, opt, ms_step = make_minispore()
    try:
        import torch
    except ImportError:
        torch = None
    with_torch = torch is not None and not args.no_torch
    steps = {"minispore": ms_step}
    if with_torch:
        steps["torch"] = make_torch_llama(cfg, ms_model)
        if args.gpt:
            steps["torch-gpt"] = make_torch_gpt(cfg)
    batches = make_batches(4, cfg.vocab_size, cfg.max_seq_len, with_torch)

    print(f"shakespeare-char LLaMA ({ms_model.num_params():,} params), batch {BATCH}x{cfg.max_seq_len}, "
          f"fwd+bwd+AdamW; median of {args.iters} steps after {args.warmup} warm-up")
    print(f"Python {platform.python_version()}, NumPy {np.__version__}"
          + (f", PyTorch {torch.__version__}" if torch else "") + f", {os.cpu_count()} CPUs")
    print(blas_description())
    env = {k: os.environ[k] for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OPENBLAS_NUM_THREADS",
                                      "OMP_NUM_THREADS") if k in os.environ}
    print(f"env: {env or '(no OPENBLAS_*/OMP_* set)'}")
    if with_torch:   # same model, same weights: the first losses agree
        first = {name: steps[name](*batches[0][name]) for name in ("minispore", "torch")}
        print(f"first-step loss: minispore {first['minispore']:.5f}, torch {first['torch']:.5f}")

    settings = {"1": [1], "default": [None], "both": [1, None]}[args.threads]
    rows = []
    for n in settings:
        with threads(n):
            med = time_steps(steps, batches, args.iters, args.warmup)
            label = "1" if n == 1 else f"default (torch {torch.get_num_threads() if torch else '-'}, " \
                                       f"BLAS {threadpoolctl.threadpool_info()[0]['num_threads'] if threadpoolctl else '?'})"
        rows.append((label, med))

    print()
    print("| threads | minispore ms/iter | PyTorch ms/iter | minispore / PyTorch |"
          + (" nanoGPT GPT (PyTorch) ms/iter |" if "torch-gpt" in steps else ""))
    print("|---|---:|---:|---:|" + ("---:|" if "torch-gpt" in steps else ""))
    for label, med in rows:
        m = med["minispore"] * 1e3
        t = med.get("torch")
        line = f"| {label} | {m:.1f} | " + (f"{t * 1e3:.1f} | {m / (t * 1e3):.2f}x |" if t else "- | - |")
        if "torch-gpt" in med:
            line += f" {med['torch-gpt'] * 1e3:.1f} |"
        print(line)
    print("target (issue 2): minispore <= 1.5x PyTorch")

    if args.profile:
        with threads(1):
            profile_minispore(ms_step, batches, 10)
    return rows


if __name__ == "__main__":
    main()
