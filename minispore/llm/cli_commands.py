"""`minispore train` and `minispore generate` (wired into `minispore.cli`).

    minispore train                                   # the shakespeare-char preset: 2000 iterations
    minispore train --max-iters 200 --out out/quick   # a shorter run
    minispore train --resume                          # continue the run in --out from its latest checkpoint
    minispore train --overwrite                       # delete the run in --out and start afresh
    minispore generate --ckpt out/shakespeare-char --prompt "ROMEO:" --max-new-tokens 300
    minispore generate --ckpt out/shakespeare-char --top-p 0.9 --repetition-penalty 1.2 --stop "\n\n" --kv-cache paged

Hyper-parameters default to the preset's (nanoGPT's CPU recipe for `shakespeare-char`); every
flag left out keeps the preset value. `generate` reads the model config and the tokenizer from the
checkpoint itself, so it needs nothing but the directory.

`train` into a directory that already holds a run stops with an error unless `--resume` or
`--overwrite` says what to do with it. Ctrl-C, SIGTERM and SIGHUP save a checkpoint and stop;
the exit status is then 128 + the signal number (130, 143, 129).
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import signal
import sys

from ..common.errors import OpValueError
from .config import PRESETS, get_preset

# flag -> TrainConfig field (None default: keep the preset's value)
_TRAIN_FLAGS = {
    "max_iters": ("--max-iters", int, "number of training iterations"),
    "batch_size": ("--batch-size", int, "sequences per batch"),
    "learning_rate": ("--lr", float, "peak learning rate (after warmup)"),
    "min_lr": ("--min-lr", float, "learning rate at the end of the cosine decay"),
    "warmup_iters": ("--warmup-iters", int, "linear warmup iterations (default: the preset's, at most "
                                            "a tenth of the decay)"),
    "lr_decay_iters": ("--lr-decay-iters", int, "iteration where the cosine reaches --min-lr "
                                                "(default: --max-iters)"),
    "weight_decay": ("--weight-decay", float, "AdamW weight decay (matrices only)"),
    "beta2": ("--beta2", float, "AdamW beta2"),
    "grad_clip": ("--grad-clip", float, "clip gradients to this global norm (0: off)"),
    "eval_interval": ("--eval-interval", int, "evaluate every N iterations"),
    "eval_iters": ("--eval-iters", int, "batches per split in each evaluation"),
    "final_eval_iters": ("--final-eval-iters", int, "batches per split in the final evaluation"),
    "ckpt_interval": ("--ckpt-interval", int, "checkpoint every N iterations"),
    "keep_checkpoints": ("--keep-checkpoints", int, "how many recent checkpoints to keep"),
    "seed": ("--seed", int, "random seed (weights, batches, dropout)"),
}
# flag -> LlamaConfig field
_MODEL_FLAGS = {
    "n_layers": ("--n-layers", int, "transformer blocks"),
    "n_heads": ("--n-heads", int, "attention heads"),
    "n_kv_heads": ("--n-kv-heads", int, "key/value heads (grouped-query attention)"),
    "dim": ("--dim", int, "model width"),
    "max_seq_len": ("--block-size", int, "context length"),
    "dropout": ("--dropout", float, "dropout rate"),
}


def add_train_args(parser: argparse.ArgumentParser):
    parser.add_argument("--preset", default="shakespeare-char", choices=sorted(PRESETS),
                        help="model + hyper-parameter preset (default: shakespeare-char)")
    parser.add_argument("--out", default=None, help="output directory (default: out/<preset>)")
    parser.add_argument("--threads", type=int, default=1,
                        help="BLAS threads for the run (default 1: fastest for small models; 0 = library default)")
    existing = parser.add_mutually_exclusive_group()
    existing.add_argument("--resume", action="store_true", help="continue from the latest checkpoint in --out")
    existing.add_argument("--overwrite", action="store_true",
                          help="delete the run already in --out (checkpoints, metrics.json, loss.png) and start "
                               "afresh; without --resume or --overwrite an existing run is an error")
    parser.add_argument("--optimizer", choices=("adamw", "adamweightdecay"), default=None,
                        help="adamw: mint.optim.AdamW (PyTorch rule, default); adamweightdecay: "
                             "nn.AdamWeightDecay (MindSpore rule, no bias correction)")
    group = parser.add_argument_group("training hyper-parameters (default: the preset's)")
    for field, (flag, typ, help_text) in _TRAIN_FLAGS.items():
        group.add_argument(flag, dest=field, type=typ, default=None, help=help_text)
    group = parser.add_argument_group("model shape (default: the preset's)")
    for field, (flag, typ, help_text) in _MODEL_FLAGS.items():
        group.add_argument(flag, dest="model_" + field, type=typ, default=None, help=help_text)
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--no-plot", action="store_true", help="do not write loss.png")


def configs_from_args(args):
    """(LlamaConfig, TrainConfig) from the preset and the flags given."""
    from ..train.trainer import TrainConfig
    preset = get_preset(args.preset)
    model_over = {f: getattr(args, "model_" + f) for f in _MODEL_FLAGS if getattr(args, "model_" + f) is not None}
    if "n_heads" in model_over and "n_kv_heads" not in model_over:
        model_over["n_kv_heads"] = model_over["n_heads"]
    mc = dataclasses.replace(preset.model, **model_over)

    train_over = {f: getattr(args, f) for f in _TRAIN_FLAGS if getattr(args, f) is not None}
    if "max_iters" in train_over and "lr_decay_iters" not in train_over:
        train_over["lr_decay_iters"] = train_over["max_iters"]       # "train for N iterations" decays over N
    if "warmup_iters" not in train_over:
        decay = train_over.get("lr_decay_iters", preset.train.get("lr_decay_iters", 1))
        train_over["warmup_iters"] = min(preset.train.get("warmup_iters", 0), decay // 10)
    if args.optimizer is not None:
        train_over["optimizer"] = args.optimizer
    train_over["out_dir"] = args.out or f"out/{args.preset}"
    train_over["resume"] = args.resume
    train_over["overwrite"] = getattr(args, "overwrite", False)
    train_over["progress"] = not args.no_progress
    train_over["plot"] = not args.no_plot
    return mc, TrainConfig.from_preset(args.preset, **train_over)


def run_train(args) -> int:
    from ..train.trainer import train
    mc, tc = configs_from_args(args)
    if args.threads > 0:
        # Small models do many small matrix products: one BLAS thread avoids the thread hand-off
        # and the contention that made 2-thread steps 10x slower on a shared 2-core machine.
        from threadpoolctl import threadpool_limits
        with threadpool_limits(limits=args.threads, user_api="blas"):
            return _run_train(args, train, mc, tc)
    return _run_train(args, train, mc, tc)


def _run_train(args, train, mc, tc) -> int:
    print(f"minispore train: {args.preset}, {mc.num_params() / 1e6:.2f}M parameters "
          f"({mc.n_layers} layers, {mc.n_heads} heads, {mc.dim} wide, context {mc.max_seq_len}); "
          f"{tc.max_iters} iterations of {tc.batch_size}x{mc.max_seq_len} tokens -> {tc.out_dir}", file=sys.stderr)
    m = train(mc, tc)
    print(f"iterations      {m['iters']}{' (interrupted)' if m['interrupted'] else ''}\n"
          f"train loss      {m['final_train_loss']:.4f}\n"
          f"val loss        {m['final_val_loss']:.4f}  (best {m['best_val_loss']:.4f})\n"
          f"time            {m['wall_time_s']:.1f} s wall, {m['ms_per_iter']:.1f} ms/iteration, "
          f"{m['tokens_per_s']:,.0f} tokens/s\n"
          f"written         {os.path.join(tc.out_dir, 'metrics.json')}"
          + ("" if args.no_plot else f", {os.path.join(tc.out_dir, 'loss.png')}")
          + f", checkpoints in {tc.out_dir}")
    if m["stop_signal"] is not None:       # the shell's convention for "ended by signal N"
        return 128 + int(signal.Signals[m["stop_signal"]])
    return 130 if m["interrupted"] else 0


# ---------------------------------------------------------------------------------------------
def add_generate_args(parser: argparse.ArgumentParser):
    parser.add_argument("--ckpt", required=True,
                        help="a training output directory (its latest checkpoint) or one ckpt-NNNNNN directory")
    parser.add_argument("--prompt", default="\n", help="text to continue (default: a newline)")
    parser.add_argument("--max-new-tokens", type=int, default=200, help="characters to generate (default 200)")
    parser.add_argument("--temperature", type=float, default=0.8, help="sampling temperature, 0 = greedy (default 0.8)")
    parser.add_argument("--top-k", type=int, default=50, help="sample among the k most likely (0 = all; default 50)")
    parser.add_argument("--top-p", type=float, default=1.0,
                        help="nucleus sampling: keep the most likely tokens up to this probability mass (default 1 = off)")
    parser.add_argument("--repetition-penalty", type=float, default=1.0,
                        help="divide the logits of tokens already in the text by this (default 1 = off)")
    parser.add_argument("--stop", action="append", default=[], metavar="TEXT",
                        help="stop when the generated text contains TEXT (cut before it; \\n and \\t are read as "
                             "newline and tab); repeatable")
    parser.add_argument("--seed", type=int, default=0, help="random seed for sampling (default 0)")
    parser.add_argument("--no-cache", action="store_true", help="recompute the whole context for every token")
    parser.add_argument("--kv-cache", choices=("contiguous", "paged"), default="contiguous",
                        help="KV cache layout (default contiguous; paged: fixed-size blocks and block tables)")
    parser.add_argument("--block-size", type=int, default=16, help="positions per block of the paged cache (default 16)")


def load_for_generation(ckpt):
    """(model, tokenizer) from a checkpoint written by `train`."""
    from ..dataset import CharTokenizer
    from ..train.checkpoint_manager import CheckpointManager, read_state
    from ..train.serialization import CheckpointError
    from .config import LlamaConfig
    from .model import Llama
    state = read_state(ckpt)
    config = state.get("config")
    if not isinstance(config, dict) or not isinstance(config.get("model"), dict) \
            or not isinstance(config.get("tokenizer"), dict):
        raise CheckpointError("generate", state["path"], "was not written by `minispore train` (its config has "
                              "no 'model' and 'tokenizer' entries)")
    model = Llama(LlamaConfig.from_dict(config["model"]))
    tokenizer = CharTokenizer.from_dict(config["tokenizer"])
    CheckpointManager(os.path.dirname(state["path"]), create=False).load(state["path"], model, restore_rng=False)
    model.set_train(False)
    return model, tokenizer


def run_generate(args) -> int:
    from .generate import generate_text
    if args.top_k is not None and args.top_k < 0:
        raise OpValueError("generate", "--top-k >= 0", str(args.top_k))
    model, tokenizer = load_for_generation(args.ckpt)
    text = generate_text(model, tokenizer, args.prompt, max_new_tokens=args.max_new_tokens,
                         temperature=args.temperature, top_k=args.top_k or None, seed=args.seed,
                         use_cache=not args.no_cache, top_p=args.top_p, repetition_penalty=args.repetition_penalty,
                         stop=tuple(s.replace("\\n", "\n").replace("\\t", "\t") for s in args.stop),
                         kv_cache=args.kv_cache, block_size=args.block_size)
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0


__all__ = ["add_train_args", "run_train", "add_generate_args", "run_generate", "configs_from_args",
           "load_for_generation"]
