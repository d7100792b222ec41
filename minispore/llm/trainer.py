"""The training loop for the LLaMA models on a character corpus (Tiny Shakespeare by default).

    metrics = train(LlamaConfig(...), TrainConfig(out_dir="out", max_iters=2000))

One iteration is nanoGPT's: draw a random batch of windows, compute the loss and its gradients
(`value_and_grad`), clip the gradients to global norm `grad_clip`, take an AdamW step at the
learning rate of a linear-warmup + cosine-decay schedule.

Around it:
* every `eval_interval` iterations the mean loss of `eval_iters` batches of each split is
  measured (no tape is recorded outside `value_and_grad`, so evaluation is a plain forward pass);
  the batches are the same every time (a sampler with a fixed seed), so the curve is smooth;
* every `ckpt_interval` iterations the full training state is checkpointed: weights, optimizer
  moments and step, the global RNG (dropout), the batch sampler's position, the config and the
  loss history. `resume=True` continues from the latest checkpoint and reproduces a straight run
  bit for bit. A resumed run may train longer (a larger `max_iters`): the learning-rate schedule
  stays the one recorded in the checkpoint (an `lr_decay_iters` left as None means the recorded
  decay length, not the new `max_iters`), so past the decay the rate stays at `min_lr`;
* Ctrl-C (SIGINT), SIGTERM and SIGHUP -- what a terminal, `kill` or a cluster scheduler sends
  before preemption -- finish the current iteration, save a checkpoint and stop (the CLI exits
  with 128 + the signal number). A second signal outside a save stops at once; during a save it
  is held until the save has finished, so `latest` always names a complete checkpoint;
* a directory that already holds a run is never replaced implicitly: `resume=True` continues it,
  `overwrite=True` deletes it first, anything else is an `ExistingRunError`;
* before any work, `out_dir` must be (or become) a directory this process can write to, and the
  memory the run implies (`minispore.llm.memory_estimate`) must fit: a path that is a file, a
  read-only run directory or a batch far too large is an error at once, not after an hour;
* at the end `out_dir/metrics.json` and `out_dir/loss.png` (matplotlib) are written.
"""
from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import json
import math
import numbers
import os
import signal
import stat
import sys
import tempfile
import threading
import time
from dataclasses import dataclass

import numpy as np

from ..common import context
from ..common.errors import (MinisporeError, MinisporeRuntimeError, MissingExtraError, OpTypeError,
                             OpValueError, require)
from ..common.tensor import Tensor
from ..train.checkpoint_manager import CheckpointManager
from ..train.serialization import CheckpointError

OPTIMIZERS = ("adamw", "adamweightdecay")


@dataclass
class TrainConfig:
    """Training hyper-parameters (defaults: nanoGPT's Shakespeare CPU recipe).

    * `optimizer`: "adamw" = `mint.optim.AdamW` (PyTorch's rule, bias-corrected moments: what
      nanoGPT uses), or "adamweightdecay" = `nn.AdamWeightDecay` (MindSpore's rule, no bias
      correction). Weight decay applies to matrices (weights, embeddings) only, not to norms.
    * `lr_decay_iters` (default: `max_iters`) is where the cosine schedule reaches `min_lr`.
    * `final_eval_iters`: batches per split for the last evaluation (the reported losses).
    * `preset`: the name of the preset the values came from (`from_preset` sets it), recorded in
      checkpoints so that `minispore train --resume` can tell a different `--preset` apart.
    """

    out_dir: str = "out/shakespeare-char"
    max_iters: int = 2000
    batch_size: int = 12
    learning_rate: float = 1e-3
    min_lr: float = 1e-4
    warmup_iters: int = 100
    lr_decay_iters: int | None = None
    beta1: float = 0.9
    beta2: float = 0.99
    eps: float = 1e-8
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    optimizer: str = "adamw"
    eval_interval: int = 250
    eval_iters: int = 20
    final_eval_iters: int = 200
    ckpt_interval: int = 250
    keep_checkpoints: int = 3
    seed: int = 1337
    resume: bool = False
    overwrite: bool = False
    progress: bool = True
    log_interval: int = 10
    plot: bool = True
    preset: str | None = None

    def __post_init__(self):
        for name in ("max_iters", "batch_size", "eval_interval", "eval_iters", "final_eval_iters",
                     "ckpt_interval", "keep_checkpoints", "log_interval"):
            _check_int(name, getattr(self, name), 1)
        _check_int("warmup_iters", self.warmup_iters, 0)
        _check_int("seed", self.seed, 0)
        if self.lr_decay_iters is not None:
            _check_int("lr_decay_iters", self.lr_decay_iters, 1)
        if self.decay_iters <= self.warmup_iters:
            raise OpValueError("TrainConfig",
                               f"lr_decay_iters (default max_iters) > warmup_iters ({self.warmup_iters})",
                               f"{self.decay_iters}")
        for name in ("learning_rate", "min_lr", "weight_decay", "grad_clip", "eps"):
            v = getattr(self, name)
            if not isinstance(v, numbers.Real) or isinstance(v, bool) or v < 0:
                raise OpValueError("TrainConfig", f"'{name}' >= 0", repr(v))
        if self.min_lr > self.learning_rate:
            raise OpValueError("TrainConfig", "'min_lr' <= 'learning_rate' (the cosine schedule decays from "
                               "learning_rate down to min_lr)",
                               f"min_lr={self.min_lr!r} above learning_rate={self.learning_rate!r}")
        for name in ("beta1", "beta2"):
            v = getattr(self, name)
            if not isinstance(v, numbers.Real) or not 0.0 <= v < 1.0:
                raise OpValueError("TrainConfig", f"'{name}' in [0, 1)", repr(v))
        if self.optimizer not in OPTIMIZERS:
            raise OpValueError("TrainConfig", f"'optimizer' in {OPTIMIZERS}", repr(self.optimizer))
        if self.resume and self.overwrite:
            raise OpValueError("TrainConfig", "at most one of 'resume' and 'overwrite'",
                               "resume=True, overwrite=True")
        if not isinstance(self.out_dir, (str, os.PathLike)):
            raise OpTypeError("TrainConfig", "'out_dir' as a path", type(self.out_dir).__name__)
        if self.preset is not None and not isinstance(self.preset, str):
            raise OpTypeError("TrainConfig", "'preset' as a preset name or None", type(self.preset).__name__)

    @property
    def decay_iters(self) -> int:
        return self.lr_decay_iters if self.lr_decay_iters is not None else self.max_iters

    def schedule_dict(self) -> dict:
        """The fields a resumed run must share with the original (everything that changes the
        trajectory of the first `max_iters` iterations). Logging, evaluation and checkpoint
        cadence, `max_iters` and `out_dir` may change between runs."""
        keep = ("batch_size", "learning_rate", "min_lr", "warmup_iters", "beta1", "beta2", "eps",
                "weight_decay", "grad_clip", "optimizer", "seed")
        d = {k: getattr(self, k) for k in keep}
        d["lr_decay_iters"] = self.decay_iters
        return d

    # what `run_fields` leaves out: where this invocation writes and how it shows progress
    _PER_INVOCATION = ("out_dir", "resume", "overwrite", "progress", "plot")

    def run_fields(self) -> dict:
        """Every field that describes the run itself (the schedule, `max_iters`, the evaluation and
        checkpoint cadence, `preset`), recorded in each checkpoint so a resumed run can default to
        them (see `recorded_run`)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in self._PER_INVOCATION}

    @classmethod
    def from_preset(cls, name: str, **overrides) -> "TrainConfig":
        """The training hyper-parameters of a preset (see `minispore.llm.config.PRESETS`), with
        `overrides` (None values are ignored, so CLI defaults can be passed straight through)."""
        from .config import get_preset
        fields = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in get_preset(name).train.items() if k in fields}
        values["preset"] = name
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)


def _check_int(name, v, minimum):
    if not isinstance(v, numbers.Integral) or isinstance(v, bool) or v < minimum:
        raise OpValueError("TrainConfig", f"'{name}' as an int >= {minimum}", repr(v))


# ---------------------------------------------------------------------------------------------
# pieces of the loop
def prepare_data(text=None):
    """(tokenizer, train_ids, val_ids) for `text` (default: Tiny Shakespeare), split 90/10."""
    from ..dataset import CharTokenizer, load_tinyshakespeare, train_val_split
    if text is None:
        text = load_tinyshakespeare()
    tokenizer = CharTokenizer.from_text(text)
    train_ids, val_ids = train_val_split(tokenizer.encode(text), 0.9)
    return tokenizer, train_ids, val_ids


def decay_groups(model):
    """AdamW parameter groups as in nanoGPT: decay every matrix (>= 2-D: projections, embeddings),
    never the 1-D norm weights."""
    params = model.trainable_params()
    decay = [p for p in params if p.ndim >= 2]
    no_decay = [p for p in params if p.ndim < 2]
    return decay, no_decay


def build_optimizer(model, tc: TrainConfig):
    """(optimizer, schedule). The schedule is nanoGPT's `get_lr` as `nn.WarmupCosineDecayLR`."""
    from .. import nn
    schedule = nn.WarmupCosineDecayLR(tc.learning_rate, tc.min_lr, tc.warmup_iters, tc.decay_iters)
    decay, no_decay = decay_groups(model)
    groups = [{"params": decay, "weight_decay": tc.weight_decay}]
    if no_decay:
        groups.append({"params": no_decay, "weight_decay": 0.0})
    if tc.optimizer == "adamw":
        from ..mint.optim import AdamW
        # PyTorch-style: the loop writes the schedule's value into param_groups before each step
        opt = AdamW(groups, lr=schedule.value_at(0), betas=(tc.beta1, tc.beta2), eps=tc.eps)
    else:
        # MindSpore-style: the optimizer evaluates the schedule cell at its own global_step
        opt = nn.AdamWeightDecay(groups, learning_rate=schedule, beta1=tc.beta1, beta2=tc.beta2, eps=tc.eps)
    return opt, schedule


def optimizer_step(opt) -> int:
    """Updates the optimizer has applied (its own step counter, saved in checkpoints)."""
    if hasattr(opt, "state_step"):
        return int(opt.state_step.asnumpy())
    return opt.step


def set_learning_rate(opt, schedule, step):
    """Before an update: give a PyTorch-style optimizer the schedule's value (a MindSpore
    optimizer evaluates its schedule cell at its own `global_step`). Returns the lr used."""
    lr = schedule.value_at(step)
    if hasattr(opt, "param_groups"):
        for group in opt.param_groups:
            group["lr"] = lr
    return lr


def estimate_loss(model, data, batch_size, block_size, iters, seed) -> float:
    """Mean loss over `iters` batches of `data`, drawn by a fresh sampler with `seed` (so the same
    batches each call). Dropout is off; no tape is recorded (we are not inside value_and_grad)."""
    from ..dataset import BatchSampler
    sampler = BatchSampler(data, batch_size, block_size, seed=seed)
    was_training = model.training
    model.set_train(False)
    try:
        total = 0.0
        for _ in range(iters):
            x, y = sampler.next_batch()
            total += float(model.loss(Tensor(x), Tensor(y)).item())
        return total / iters
    finally:
        model.set_train(was_training)


# the signals that ask a run to stop and save: Ctrl-C, `kill` / a scheduler's preemption notice,
# and a closed terminal (SIGHUP does not exist on Windows)
STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))


class _StopSignals:
    """Turns the first stop signal (SIGINT, SIGTERM or SIGHUP) into a request to stop after the
    current iteration; `requested` is its number. A second signal raises KeyboardInterrupt at once,
    except inside `saving()`: there every signal is held and replayed when the save has finished,
    so a second signal can never cut a checkpoint short (the save protocol is atomic anyway, but
    the run would then lose the iterations since the previous checkpoint).

    Only the main thread can own signals; elsewhere installing does nothing (Ctrl-C then raises
    KeyboardInterrupt wherever the loop is, and SIGTERM/SIGHUP keep their default action)."""

    def __init__(self):
        self.requested = None
        self._saving = False
        self._held = []
        self._previous = {}

    def _handler(self, signum, frame):
        name = signal.Signals(signum).name
        if self._saving:
            self._held.append(signum)
            print(f"\n{name} received: finishing the checkpoint first", file=sys.stderr, flush=True)
            return
        if self.requested is not None:
            raise KeyboardInterrupt
        self.requested = signum
        again = "press Ctrl-C again" if signum == signal.SIGINT else f"send {name} again"
        print(f"\n{'Ctrl-C' if signum == signal.SIGINT else name}: stopping after this iteration and saving "
              f"a checkpoint ({again} to stop immediately)", file=sys.stderr, flush=True)

    @contextlib.contextmanager
    def saving(self):
        """Hold every stop signal until the block (a checkpoint save) has finished; then handle
        them in order (the first becomes a stop request, a further one raises KeyboardInterrupt).
        If the block raises, its exception wins and the held signals are dropped."""
        self._saving = True
        try:
            yield
        finally:
            self._saving = False
            held, self._held = self._held, []
        for signum in held:
            self._handler(signum, None)

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for s in STOP_SIGNALS:
                self._previous[s] = signal.signal(s, self._handler)
        return self

    def __exit__(self, *exc):
        for s, previous in self._previous.items():
            signal.signal(s, previous if previous is not None else signal.SIG_DFL)
        self._previous = {}
        return False


class ExistingRunError(MinisporeError, FileExistsError):
    """`train` was pointed at a directory that already holds a run and told neither to resume it
    nor to overwrite it. Replacing a run is never implicit: hours of training are one typo away."""

    def __init__(self, out_dir, found):
        self.out_dir, self.found = str(out_dir), list(found)
        super().__init__(f"For 'train', the output directory '{out_dir}' already holds a run "
                         f"({', '.join(found)}); pass --resume (resume=True) to continue it or "
                         f"--overwrite (overwrite=True) to delete it and start afresh, or choose another --out")


_RUN_FILES = ("metrics.json", "loss.png")


class OutputDirError(MinisporeError, OSError):
    """`out_dir` (`--out`) cannot hold the run: it is a file, it cannot be created, or this process
    cannot write there. Raised before any work, instead of at the first checkpoint."""

    def __init__(self, out_dir, problem):
        self.out_dir, self.problem = str(out_dir), problem
        super().__init__(f"For 'train', the output directory (--out) '{out_dir}' {problem}; the checkpoints, "
                         f"metrics.json and loss.png are written there, so choose another --out")


def _what_is(path) -> str:
    """What is at `path`, in words, for an error message ('a regular file of 12 bytes')."""
    link = f"a symlink to {os.path.realpath(path)}, " if os.path.islink(path) else ""
    try:
        st = os.stat(path)
    except OSError as e:
        return f"{link}which cannot be followed ({e.strerror})" if link else f"unreadable ({e.strerror})"
    for test, name in ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket")):
        if test(st.st_mode):
            return link + name
    return f"{link}a regular file of {st.st_size:,} bytes"


def prepare_output_dir(out_dir) -> str:
    """Create `out_dir` if needed and prove this process can write there, by creating and
    removing a probe file: permission bits do not tell (root ignores them; a read-only mount or an
    immutable directory refuses root too). Returns the path as a str; raises OutputDirError."""
    path = os.fspath(out_dir)
    if path == "":
        raise OutputDirError(path, "is empty")
    if os.path.lexists(path) and not os.path.isdir(path):
        raise OutputDirError(path, f"is {_what_is(path)}, not a directory")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        raise OutputDirError(path, f"cannot be created ({e.strerror})") from None
    try:
        fd, probe = tempfile.mkstemp(prefix=".minispore-write-test-", dir=path)
    except OSError as e:
        raise OutputDirError(path, f"is not writable ({e.strerror})") from None
    os.close(fd)
    os.remove(probe)
    return path


def run_config(state: dict, op: str, needs: tuple) -> dict:
    """The config a `minispore train` checkpoint records, checked to hold the dict entries `needs`
    (resuming needs 'model' and 'train', generating 'model' and 'tokenizer')."""
    config = state.get("config")
    if not isinstance(config, dict) or not all(isinstance(config.get(k), dict) for k in needs):
        names = " and ".join(f"'{k}'" for k in needs)
        raise CheckpointError(op, state["path"], f"was not written by `minispore train` (its config has "
                              f"no {names} entries)")
    return config


def recorded_run(out_dir) -> dict | None:
    """What the run in `out_dir` was configured with, from its latest checkpoint, or None when it
    holds no checkpoint: {"step": iterations done, "model": the LlamaConfig dict, "train": the
    TrainConfig fields}. "train" always has the schedule (the fields a resumed run must share,
    `TrainConfig.schedule_dict`); checkpoints written since `run_fields` was recorded also have
    `max_iters`, the evaluation and checkpoint cadence and `preset`."""
    from ..train.checkpoint_manager import read_state
    latest = CheckpointManager(out_dir, create=False).latest()
    if latest is None:
        return None
    state = read_state(latest)
    config = run_config(state, "train --resume", ("model", "train"))
    train_fields = state["extra_state"].get("run")
    train_fields = dict(train_fields) if isinstance(train_fields, dict) else {}
    train_fields.update(config["train"])                  # the compared schedule wins over everything
    return {"step": state["step"], "model": dict(config["model"]), "train": train_fields}


def _resumed_config(tc: TrainConfig, recorded: dict, out_dir: str) -> TrainConfig:
    """The config a resumed run trains with. The schedule is the recorded one: an `lr_decay_iters`
    left as None ("the run's length") means the recorded decay length, so training longer than the
    first run keeps its warmup and cosine and then stays at `min_lr` (what nanoGPT does past
    `lr_decay_iters`) instead of stretching a schedule half of which has already run."""
    if tc.lr_decay_iters is None and "lr_decay_iters" in recorded["train"]:
        tc = dataclasses.replace(tc, lr_decay_iters=recorded["train"]["lr_decay_iters"])
    if tc.max_iters < recorded["step"]:
        raise OpValueError("train --resume", f"max_iters (--max-iters) >= {recorded['step']}, the iterations the "
                           f"checkpoint in '{out_dir}' has already done", str(tc.max_iters))
    return tc


def _earlier_run(manager):
    """What of an earlier run `manager.directory` holds, in words (empty: nothing)."""
    found = []
    n = len(manager.checkpoints())
    if n:
        found.append(f"{n} checkpoint{'s' if n > 1 else ''}")
    elif os.path.lexists(os.path.join(manager.directory, "latest")):
        found.append("a 'latest' pointer")
    if os.path.lexists(os.path.join(manager.directory, "metrics.json")):
        found.append("metrics.json")
    return found


def _remove_earlier_run(manager):
    """`overwrite=True`: delete the checkpoints, `latest` and the outputs of the earlier run
    (mixing two runs' checkpoints would make `latest` and pruning ambiguous). Other files in the
    directory are the user's and stay."""
    import shutil
    old = manager.checkpoints()
    for _, path in old:
        shutil.rmtree(path)
    for name in ("latest",) + _RUN_FILES:
        path = os.path.join(manager.directory, name)
        if os.path.lexists(path):
            os.remove(path)
    return len(old)


# ---------------------------------------------------------------------------------------------
def train(model_config, train_config: TrainConfig, text=None, callback=None) -> dict:
    """Train a `Llama(model_config)` with `train_config`; returns the metrics dict (also written to
    `out_dir/metrics.json`).

    `text`: the corpus (default Tiny Shakespeare). `callback(iteration, loss)`, if given, runs
    after every iteration; returning True stops training there, as Ctrl-C does (checkpoint saved,
    final evaluation, metrics and plot written).
    """
    from .. import value_and_grad
    from .config import LlamaConfig
    from .model import Llama
    from ..nn.clip import clip_by_global_norm
    from ..dataset import BatchSampler

    if not isinstance(model_config, LlamaConfig):
        raise OpTypeError("train", "model_config as a LlamaConfig", type(model_config).__name__)
    if not isinstance(train_config, TrainConfig):
        raise OpTypeError("train", "train_config as a TrainConfig", type(train_config).__name__)
    mc, tc = model_config, train_config
    from .memory_estimate import check_training
    check_training(mc, tc.batch_size, mc.max_seq_len,
                   what=f"Training a {mc.num_params() / 1e6:,.1f}M-parameter model on batches of "
                        f"{tc.batch_size} x {mc.max_seq_len} tokens (batch_size x max_seq_len)")
    out_dir = prepare_output_dir(tc.out_dir)
    if tc.plot and importlib.util.find_spec("matplotlib") is None:     # known now, not after training
        raise MissingExtraError("matplotlib", "plot", "Plotting the loss curves (loss.png; plot=False / --no-plot "
                                "skips it)")
    manager = CheckpointManager(out_dir, keep=tc.keep_checkpoints)
    if tc.resume:
        recorded = recorded_run(out_dir)
        if recorded is None:
            raise CheckpointError("train --resume", out_dir, "holds no checkpoint to resume from")
        tc = _resumed_config(tc, recorded, out_dir)
    else:                               # checked before any work: the earlier run is left untouched
        found = _earlier_run(manager)
        if found and not tc.overwrite:
            raise ExistingRunError(out_dir, found)

    tokenizer, train_ids, val_ids = prepare_data(text)
    if tokenizer.vocab_size != mc.vocab_size:
        raise OpValueError("train", f"model vocab_size equal to the corpus vocabulary ({tokenizer.vocab_size} "
                           "characters)", f"vocab_size={mc.vocab_size}")
    block = mc.max_seq_len
    run_config = {"model": mc.to_dict(), "train": tc.schedule_dict(), "tokenizer": tokenizer.to_dict()}

    context.set_seed(tc.seed)
    model = Llama(mc)
    model.set_train(True)
    optimizer, schedule = build_optimizer(model, tc)
    sampler = BatchSampler(train_ids, tc.batch_size, block, seed=tc.seed)

    history = {"iter": [], "train_loss": [], "lr": []}
    evals = {"iter": [], "train_loss": [], "val_loss": []}
    start, prior_wall, prior_train = 0, 0.0, 0.0
    if tc.resume:
        extra = manager.load("latest", model, optimizer, config=run_config, sampler=sampler)
        start = extra["step"]
        history, evals = extra["history"], extra["evals"]
        prior_wall, prior_train = extra["wall_time_s"], extra["train_time_s"]
        if optimizer_step(optimizer) != start:
            raise MinisporeRuntimeError(f"checkpoint at step {start} holds an optimizer at step "
                                        f"{optimizer_step(optimizer)}")
    elif tc.overwrite and _earlier_run(manager):
        cleared = _remove_earlier_run(manager)
        print(f"--overwrite: deleted the earlier run in {out_dir} ({cleared} checkpoint(s))", file=sys.stderr)

    def loss_fn(x, y):
        return model.loss(x, y)

    grad_fn = value_and_grad(loss_fn, None, optimizer.parameters)
    stop = _StopSignals()         # installed below, for the loop and everything up to the metrics
    tokens_per_iter = tc.batch_size * block

    def save(step):
        extra = {"history": history, "evals": evals, "wall_time_s": prior_wall + (time.perf_counter() - t0),
                 "train_time_s": prior_train + train_time, "run": tc.run_fields()}
        with stop.saving():             # a signal now is handled once the checkpoint is complete
            manager.save(step, model, optimizer, extra, config=run_config, sampler=sampler)

    def evaluate(step, iters):
        tl = estimate_loss(model, train_ids, tc.batch_size, block, iters, seed=tc.seed + 1)
        vl = estimate_loss(model, val_ids, tc.batch_size, block, iters, seed=tc.seed + 2)
        evals["iter"].append(step)
        evals["train_loss"].append(tl)
        evals["val_loss"].append(vl)
        return tl, vl

    with stop:   # SIGINT / SIGTERM / SIGHUP: stop after the iteration, save, report
        t0 = time.perf_counter()
        train_time = 0.0
        it = start
        interrupted = False
        last_saved = start if tc.resume else None
        if it == 0:                   # where the curves start (about ln(vocab_size) for a fresh model)
            tl, vl = evaluate(0, tc.eval_iters)
            print(f"iter 0: train loss {tl:.4f}, val loss {vl:.4f}")
        tqdm = _tqdm(tc.progress)
        bar = tqdm(total=tc.max_iters, initial=start, disable=not tc.progress, unit="it", dynamic_ncols=True,
                   desc="train", file=sys.stderr)
        window_t, window_n = time.perf_counter(), 0
        try:
            while it < tc.max_iters:
                t_step = time.perf_counter()
                lr = set_learning_rate(optimizer, schedule, it)
                x, y = sampler.next_batch()
                loss, grads = grad_fn(Tensor(x), Tensor(y))
                if tc.grad_clip > 0:
                    grads = clip_by_global_norm(grads, tc.grad_clip)
                optimizer(grads)
                loss_value = float(loss.item())
                it += 1
                train_time += time.perf_counter() - t_step
                history["iter"].append(it)
                history["train_loss"].append(loss_value)
                history["lr"].append(lr)
                if not math.isfinite(loss_value):
                    raise MinisporeRuntimeError(f"training diverged: loss is {loss_value} at iteration {it} "
                                                "(lower the learning rate or raise grad clipping)")
                window_n += 1
                bar.update(1)
                if window_n >= tc.log_interval or it == tc.max_iters:
                    now = time.perf_counter()
                    bar.set_postfix(loss=f"{loss_value:.4f}", refresh=False, lr=f"{lr:.2e}",
                                    tok_s=f"{window_n * tokens_per_iter / (now - window_t):,.0f}")
                    window_t, window_n = now, 0
                if it % tc.eval_interval == 0 and it < tc.max_iters:
                    tl, vl = evaluate(it, tc.eval_iters)
                    bar.write(f"iter {it}: train loss {tl:.4f}, val loss {vl:.4f}")
                    window_t = time.perf_counter()
                if it % tc.ckpt_interval == 0:
                    save(it)
                    last_saved = it
                    window_t = time.perf_counter()
                if callback is not None and callback(it, loss_value):
                    interrupted = True
                    break
                if stop.requested:
                    interrupted = True
                    break
        finally:
            # A KeyboardInterrupt raised here (a second stop signal, or Ctrl-C outside the main thread)
            # may have struck in the middle of an update: nothing more is saved, the newest
            # checkpoint on disk is complete (saves are atomic) and `--resume` continues from it.
            bar.close()
        if interrupted:
            if last_saved != it:
                save(it)
                last_saved = it
            print(f"stopped at iteration {it}; checkpoint saved in {out_dir} (continue with --resume)",
                  file=sys.stderr)

        # the reported losses; a run stopped early gets the quick estimate instead of making the user wait
        final_tl, final_vl = evaluate(it, tc.eval_iters if interrupted else tc.final_eval_iters)
        wall = prior_wall + (time.perf_counter() - t0)
        total_train = prior_train + train_time
        if last_saved != it:
            save(it)
        tokens = it * tokens_per_iter
        metrics = {
            "final_train_loss": final_tl,
            "final_val_loss": final_vl,
            "best_val_loss": min(evals["val_loss"]),
            "iters": it,
            "tokens": tokens,
            "wall_time_s": wall,
            "train_time_s": total_train,
            "tokens_per_s": tokens / total_train if total_train > 0 else 0.0,
            "ms_per_iter": 1000.0 * total_train / it if it else 0.0,
            "interrupted": interrupted,
            # which signal stopped the run (None: it finished, or the callback stopped it)
            "stop_signal": signal.Signals(stop.requested).name if interrupted and stop.requested else None,
            "num_params": model.num_params(),
            "config": run_config["model"],
            "train_config": {**dataclasses.asdict(tc), "out_dir": out_dir},
            "eval_history": evals,
            "loss_history": history,
        }
        with open(os.path.join(out_dir, "metrics.json"), "w", encoding="utf-8") as f:
            json.dump(metrics, f, indent=1)
        if tc.plot:
            plot_losses(history, evals, os.path.join(out_dir, "loss.png"))
        return metrics


def _tqdm(progress: bool):
    """tqdm.auto picks the notebook widget when it can; with the bar off, plain tqdm avoids its
    'IProgress not found' warning in notebooks without ipywidgets."""
    if not progress:
        from tqdm import tqdm
        return tqdm
    from tqdm.auto import tqdm
    return tqdm


def plot_losses(history, evals, path):
    """Write the loss curves (per-iteration train loss, smoothed; periodic train/val estimates)."""
    matplotlib = require("matplotlib", "plot", "Plotting the loss curves (loss.png)")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    iters = np.asarray(history["iter"])
    losses = np.asarray(history["train_loss"])
    if len(losses):
        ax.plot(iters, losses, color="tab:blue", alpha=0.25, linewidth=0.8, label="train (per batch)")
        k = max(1, min(50, len(losses) // 10))
        if k > 1:
            smooth = np.convolve(losses, np.ones(k) / k, mode="valid")
            ax.plot(iters[k - 1:], smooth, color="tab:blue", linewidth=1.5, label=f"train ({k}-batch mean)")
    if evals["iter"]:
        ax.plot(evals["iter"], evals["train_loss"], "o-", color="tab:green", markersize=3, label="train (eval)")
        ax.plot(evals["iter"], evals["val_loss"], "o-", color="tab:orange", markersize=3, label="val (eval)")
    ax.set_xlabel("iteration")
    ax.set_ylabel("cross-entropy loss (nats/char)")
    ax.set_title("LLaMA on Tiny Shakespeare")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


__all__ = ["TrainConfig", "train", "ExistingRunError", "OutputDirError", "prepare_output_dir", "recorded_run",
           "STOP_SIGNALS", "build_optimizer", "estimate_loss", "prepare_data", "plot_losses",
           "decay_groups"]
