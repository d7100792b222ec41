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

`--resume` continues the run as it was configured: every flag left out keeps the value recorded
in the checkpoint (model shape, hyper-parameters, `--max-iters`, and the values a fresh run derives
from other flags: the warmup and decay lengths from `--max-iters`, `--n-kv-heads` from
`--n-heads`). So `minispore train --resume --max-iters N` extends a run to N iterations with the
schedule it started with (past its decay length the rate stays at `--min-lr`). Model and schedule
flags that disagree with the recording are refused; `--max-iters` and the evaluation/checkpoint
cadence may change.

Before any work, `train` checks what it can: the memory the model and batch imply
(`memory_estimate.check_training`), that `--out` is a directory it can write to, that `--min-lr`
is at most `--lr`.
"""
from __future__ import annotations

import argparse
import codecs
import dataclasses
import os
import signal
import stat
import sys
import threading

from ..common.errors import OpValueError
from .config import PRESETS, LlamaConfig, get_preset

DEFAULT_PRESET = "shakespeare-char"

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
# TrainConfig fields a resumed run may change: how long it trains and how often it evaluates and
# checkpoints. Every other field is the schedule and must match the checkpoint.
_CHANGEABLE_ON_RESUME = ("max_iters", "eval_interval", "eval_iters", "final_eval_iters", "ckpt_interval",
                         "keep_checkpoints")


def path_arg(text: str) -> str:
    """argparse type of a path flag: an empty string (`--out ""`, an unset shell variable) is a
    usage error, never silently "the default"."""
    if text == "":
        raise argparse.ArgumentTypeError("expected a path, got an empty string")
    return text


def non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {value}")
    return value


def add_train_args(parser: argparse.ArgumentParser):
    parser.add_argument("--preset", default=None, choices=sorted(PRESETS),
                        help=f"model + hyper-parameter preset (default: {DEFAULT_PRESET}; with --resume: the run's)")
    parser.add_argument("--out", default=None, type=path_arg, help="output directory (default: out/<preset>)")
    parser.add_argument("--threads", type=non_negative_int, default=1,
                        help="BLAS threads for the run (default 1: fastest for small models; 0 = library default)")
    existing = parser.add_mutually_exclusive_group()
    existing.add_argument("--resume", action="store_true",
                          help="continue the run in --out from its latest checkpoint; flags left out keep the "
                               "run's recorded values, and --max-iters N extends it to N iterations")
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
    """(LlamaConfig, TrainConfig) from the flags given and, for a fresh run, the preset; with
    `--resume`, from the flags given and the values recorded in the run's latest checkpoint."""
    from .trainer import TrainConfig, recorded_run
    out_dir = args.out if args.out is not None else f"out/{args.preset or DEFAULT_PRESET}"
    given_model = {f: getattr(args, "model_" + f) for f in _MODEL_FLAGS if getattr(args, "model_" + f) is not None}
    given_train = {f: getattr(args, f) for f in _TRAIN_FLAGS if getattr(args, f) is not None}
    if args.optimizer is not None:
        given_train["optimizer"] = args.optimizer
    recorded = recorded_run(out_dir) if args.resume else None
    if args.resume and recorded is None:
        from ..train.serialization import CheckpointError
        raise CheckpointError("train --resume", out_dir, "holds no checkpoint to resume from" if os.path.isdir(out_dir)
                              else "does not exist, so there is no run to resume (leave out --resume to start one)")
    if recorded is None:        # a fresh run
        preset = get_preset(args.preset or DEFAULT_PRESET)
        model, train = _fresh_run_values(preset, given_model, given_train)
        mc = dataclasses.replace(preset.model, **model)
        preset_name = args.preset or DEFAULT_PRESET
    else:
        _refuse_changes(args, recorded, given_model, given_train, out_dir)
        preset_name = recorded["train"].get("preset") or args.preset or DEFAULT_PRESET
        preset = get_preset(preset_name)
        mc = LlamaConfig.from_dict({**recorded["model"], **given_model})
        fields = {f.name for f in dataclasses.fields(TrainConfig)}
        train = {**{k: v for k, v in recorded["train"].items() if k in fields}, **given_train}
        if train.get("max_iters", recorded["step"]) < recorded["step"]:
            raise OpValueError("train --resume", f"--max-iters >= {recorded['step']}, the iterations the run in "
                               f"'{out_dir}' has already done", str(train["max_iters"]))
    lr, min_lr = (train.get(k, preset.train.get(k)) for k in ("learning_rate", "min_lr"))
    if lr is not None and min_lr is not None and min_lr > lr:
        raise OpValueError("train", "--min-lr <= --lr (the cosine schedule decays from --lr down to --min-lr)",
                           f"--min-lr {min_lr:g} above --lr {lr:g}")
    train.update(out_dir=out_dir, resume=args.resume, overwrite=getattr(args, "overwrite", False),
                 progress=not args.no_progress, plot=not args.no_plot)
    return mc, TrainConfig.from_preset(preset_name, **train)


def _fresh_run_values(preset, given_model, given_train):
    """(model overrides, train overrides) of a new run: the flags given plus what they imply."""
    model, train = dict(given_model), dict(given_train)
    if "n_heads" in model and "n_kv_heads" not in model:
        model["n_kv_heads"] = model["n_heads"]
    if "max_iters" in train and "lr_decay_iters" not in train:
        train["lr_decay_iters"] = train["max_iters"]       # "train for N iterations" decays over N
    if "warmup_iters" not in train:
        decay = train.get("lr_decay_iters", preset.train.get("lr_decay_iters", 1))
        train["warmup_iters"] = min(preset.train.get("warmup_iters", 0), decay // 10)
    return model, train


def _refuse_changes(args, recorded, given_model, given_train, out_dir):
    """--resume: every model or schedule flag given must agree with the run's recording (the
    iterations already done were trained with it); name each one that does not."""
    from ..train.checkpoint_manager import ConfigMismatchError
    problems = []
    recorded_preset = recorded["train"].get("preset")
    if args.preset is not None and recorded_preset is not None and args.preset != recorded_preset:
        problems.append(f"--preset {args.preset} (the run has preset={recorded_preset!r})")
    for field, value in given_model.items():
        if field in recorded["model"] and recorded["model"][field] != value:
            problems.append(f"{_MODEL_FLAGS[field][0]} {value} (the run has model.{field}={recorded['model'][field]!r})")
    flags = {**{f: spec[0] for f, spec in _TRAIN_FLAGS.items()}, "optimizer": "--optimizer"}
    for field, value in given_train.items():
        if field in _CHANGEABLE_ON_RESUME or field not in recorded["train"]:
            continue
        if recorded["train"][field] != value:
            problems.append(f"{flags[field]} {value} (the run has train.{field}={recorded['train'][field]!r})")
    if problems:
        raise ConfigMismatchError(
            f"For 'train --resume', flags disagree with the run in '{out_dir}': {'; '.join(problems)}. "
            f"A resumed run keeps its model and schedule: leave those flags out, or "
            f"start a new run (--overwrite, or another --out). --max-iters and the evaluation and checkpoint "
            f"flags may change.")


def run_train(args) -> int:
    from ..backend.registry import check_environment
    from .trainer import prepare_output_dir, train
    from .memory_estimate import check_training
    check_environment()                      # a MINISPORE_DEVICE_TARGET typo: say so before any work
    mc, tc = configs_from_args(args)
    # up front, before the banner and before any data is loaded
    check_training(mc, tc.batch_size, mc.max_seq_len,
                   what=f"minispore train --batch-size {tc.batch_size} --block-size {mc.max_seq_len} "
                        f"(a {mc.num_params() / 1e6:,.2f}M-parameter model)")
    prepare_output_dir(tc.out_dir)
    if args.threads > 0:
        # Small models do many small matrix products: one BLAS thread avoids the thread hand-off
        # and the contention that made 2-thread steps 10x slower on a shared 2-core machine.
        from threadpoolctl import threadpool_limits
        with threadpool_limits(limits=args.threads, user_api="blas"):
            return _run_train(args, train, mc, tc)
    return _run_train(args, train, mc, tc)


def _run_train(args, train, mc, tc) -> int:
    print(f"minispore train: {tc.preset}, {mc.num_params() / 1e6:.2f}M parameters "
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
    if m["interrupted"]:
        _exit_on_further_signals()
    if m["stop_signal"] is not None:       # the shell's convention for "ended by signal N"
        return 128 + int(signal.Signals[m["stop_signal"]])
    return 130 if m["interrupted"] else 0


def _exit_on_further_signals():
    """The run was stopped by a signal and its checkpoint is saved: a further Ctrl-C (or SIGTERM)
    while the process winds down means "stop now". Exit at once instead of raising
    KeyboardInterrupt inside the interpreter's shutdown code (atexit handlers), whose traceback
    would look like a crash. Only the command does this: it owns the process, `train()` does not."""
    def exit_now(signum, frame):
        print(f"\n{signal.Signals(signum).name}: stopping now", file=sys.stderr, flush=True)
        os._exit(128 + signum)
    if threading.current_thread() is threading.main_thread():
        for name in ("SIGINT", "SIGTERM", "SIGHUP"):
            if hasattr(signal, name):
                signal.signal(getattr(signal, name), exit_now)


# ---------------------------------------------------------------------------------------------
def add_generate_args(parser: argparse.ArgumentParser):
    parser.add_argument("--ckpt", required=True, type=path_arg,
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
    parser.add_argument("--tp", type=int, default=1, metavar="N",
                        help="tensor parallel: split the model over N processes, Megatron-style (started through "
                             "msrun's launcher; needs the dist extra); the same text as one process (default 1)")
    parser.add_argument("--tp-output", default=None, help=argparse.SUPPRESS)     # rank 0 -> the launching process


_TRAIN_FIRST = ("generate reads the output directory of `minispore train` (or one of its ckpt-NNNNNN "
                "directories), which holds the weights, the model config and the tokenizer; create one with "
                "`minispore train --out DIR`, then pass --ckpt DIR")


def describe_file(path) -> str:
    """What a path that is not a checkpoint directory is, in words: 'a text file of 12 bytes',
    'a safetensors file of 3,312 bytes (weights only)', 'a character device'. Only regular files
    are read (their first bytes): a FIFO or a device would block or never end."""
    try:
        st = os.stat(path)
    except OSError as e:
        return f"a path that cannot be read ({e.strerror})"
    if stat.S_ISDIR(st.st_mode):
        return "a directory"
    if not stat.S_ISREG(st.st_mode):
        for test, name in ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                           (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket")):
            if test(st.st_mode):
                return name
        return "not a regular file"
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError as e:
        return f"a file that cannot be read ({e.strerror})"
    size = f"of {st.st_size:,} bytes"
    # safetensors: an 8-byte little-endian header length, then the JSON header
    if len(head) > 9 and head[8:9] == b"{" and 0 < int.from_bytes(head[:8], "little") < st.st_size:
        return f"a safetensors file {size} (weights only)"
    if str(path).endswith(".ckpt"):
        return f"a MindSpore .ckpt file {size} (weights only)"
    if not head:
        return "an empty file"
    try:      # (incremental: a character cut at the end of the 4096 bytes is not "binary")
        text = codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
    except UnicodeDecodeError:
        text = None
    if text is None or "\x00" in text:
        return f"a binary file {size}"
    if text.lstrip()[:1] in ("{", "["):
        return f"a JSON file {size}"
    return f"a text file {size}"


def _check_checkpoint_path(ckpt):
    """A clear error for a --ckpt that cannot be a training checkpoint, before reading it."""
    from ..train.checkpoint_manager import find_checkpoint
    from ..train.serialization import CheckpointError
    if not os.path.lexists(ckpt):
        raise CheckpointError("generate", ckpt, f"does not exist; {_TRAIN_FIRST}")
    if not os.path.isdir(ckpt):
        raise CheckpointError("generate", ckpt, f"is {describe_file(ckpt)}, not a training checkpoint; {_TRAIN_FIRST}")
    try:
        find_checkpoint(ckpt)
    except CheckpointError:
        raise CheckpointError("generate", ckpt, "is a directory that holds no checkpoint (no ckpt-NNNNNN/ with "
                              f"model.safetensors and state.json); {_TRAIN_FIRST}") from None


def load_for_generation(ckpt):
    """(model, tokenizer) from a checkpoint written by `train`."""
    from ..dataset import CharTokenizer
    from ..train.checkpoint_manager import CheckpointManager, read_state
    from .model import Llama
    from .trainer import run_config
    _check_checkpoint_path(os.fspath(ckpt))
    state = read_state(ckpt)
    config = run_config(state, "generate", ("model", "tokenizer"))
    model = Llama(LlamaConfig.from_dict(config["model"]))
    tokenizer = CharTokenizer.from_dict(config["tokenizer"])
    CheckpointManager(os.path.dirname(state["path"]), create=False).load(state["path"], model, restore_rng=False)
    model.set_train(False)
    return model, tokenizer


def _generate_text(model, tokenizer, args) -> str:
    from .generate import generate_text
    return generate_text(model, tokenizer, args.prompt, max_new_tokens=args.max_new_tokens,
                         temperature=args.temperature, top_k=args.top_k or None, seed=args.seed,
                         use_cache=not args.no_cache, top_p=args.top_p, repetition_penalty=args.repetition_penalty,
                         stop=tuple(s.replace("\\n", "\n").replace("\\t", "\t") for s in args.stop),
                         kv_cache=args.kv_cache, block_size=args.block_size)


def _generate_argv(args, output) -> list:
    """The `generate` command line each rank of a `--tp` job runs: these options, plus where rank 0
    writes the text."""
    argv = ["generate", "--ckpt", os.fspath(args.ckpt), f"--prompt={args.prompt}",
            "--max-new-tokens", str(args.max_new_tokens), "--temperature", repr(args.temperature),
            "--top-k", str(args.top_k), "--top-p", repr(args.top_p),
            "--repetition-penalty", repr(args.repetition_penalty), "--seed", str(args.seed),
            "--kv-cache", args.kv_cache, "--block-size", str(args.block_size), "--tp", str(args.tp),
            "--tp-output", output]
    for text in args.stop:
        argv.append(f"--stop={text}")
    return argv + (["--no-cache"] if args.no_cache else [])


def _launch_tensor_parallel(args) -> int:
    """`generate --tp N` from a shell: run the same command on N ranks through msrun's launcher
    (its failure reporting included), then print the text rank 0 wrote."""
    import tempfile
    from ..communication.launcher import launch
    from ..train.checkpoint_manager import read_state
    from .tensor_parallel import check_divisible
    from .trainer import run_config
    # a config that cannot be split is refused here, before N processes start and fail alike
    _check_checkpoint_path(os.fspath(args.ckpt))
    check_divisible(LlamaConfig.from_dict(run_config(read_state(args.ckpt), "generate", ("model",))["model"]),
                    args.tp)
    with tempfile.TemporaryDirectory(prefix="minispore-tp-") as folder:
        script = os.path.join(folder, "generate_tp.py")        # what every rank runs: the minispore CLI
        with open(script, "w") as f:
            f.write("import sys\nfrom minispore.cli import main\nsys.exit(main())\n")
        output = os.path.join(folder, "text.txt")
        job = argparse.Namespace(worker_num=args.tp, local_worker_num=None, master_addr="127.0.0.1",
                                 master_port=8118, node_rank=-1, log_dir=None, join=True, cluster_time_out=600,
                                 script=script, script_args=_generate_argv(args, output))
        status = launch(job)
        if status != 0:
            return status
        with open(output, encoding="utf-8") as f:
            text = f.read()
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0


def _run_tensor_parallel(args) -> int:
    """One rank of `generate --tp N`: the checkpoint's model split over the world
    (llm/tensor_parallel.py); every rank computes the same tokens, rank 0 writes them."""
    from ..communication import get_group_size, get_rank, init
    from .tensor_parallel import tensor_parallel_llama
    init()
    if get_group_size() != args.tp:
        raise OpValueError("generate", f"--tp {args.tp} equal to the number of processes of the job",
                           f"{get_group_size()} processes")
    model, tokenizer = load_for_generation(args.ckpt)
    model = tensor_parallel_llama(model)
    model.set_train(False)
    text = _generate_text(model, tokenizer, args)
    if get_rank() == 0:
        if args.tp_output:
            with open(args.tp_output, "w", encoding="utf-8") as f:
                f.write(text)
        else:
            sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0


def run_generate(args) -> int:
    from ..backend.registry import check_environment
    from ..common.process_groups import launched_by_mpi
    check_environment()
    if args.top_k is not None and args.top_k < 0:
        raise OpValueError("generate", "--top-k >= 0", str(args.top_k))
    if args.tp < 1:
        raise OpValueError("generate", "--tp >= 1 (the number of processes to split the model over)", str(args.tp))
    if args.tp > 1:
        return _run_tensor_parallel(args) if launched_by_mpi() else _launch_tensor_parallel(args)
    model, tokenizer = load_for_generation(args.ckpt)
    text = _generate_text(model, tokenizer, args)
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0


__all__ = ["add_train_args", "run_train", "add_generate_args", "run_generate", "configs_from_args",
           "load_for_generation", "describe_file", "path_arg", "non_negative_int", "DEFAULT_PRESET"]
