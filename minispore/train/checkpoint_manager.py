"""Training-state checkpoints that survive crashes, Ctrl-C, config mistakes and tampering.

`save_checkpoint` stores weights. Resuming training *bit for bit* needs more: the optimizer's state
(Adam moments, step counter), the random-number generator, where the data sampler is, and the
config the run was started with. `CheckpointManager` keeps all of it together:

    out/                    the run directory
      ckpt-000250/
        model.safetensors   net + optimizer Parameters under their MindSpore names
                            (`blocks.0.attn.wq.weight`, `adam_m.blocks.0.attn.wq.weight`, `global_step`)
        state.json          step, RNG state, sampler state, config, extra_state, minispore version,
                            the sha256 of model.safetensors, the name/dtype/shape of every tensor,
                            and the sha256 of all of that (`state_sha256`)
      ckpt-000500/
      latest                the text "ckpt-000500": the newest complete checkpoint

Why a save can never leave a broken `latest`:

1. everything is written into a hidden temporary directory `.tmp-ckpt-000500-<pid>/`, each file
   fsync'ed (see `atomic_io`);
2. the directory is renamed to `ckpt-000500/` in one atomic step;
3. only then is `latest` atomically replaced to point at it;
4. only then are checkpoints beyond `keep` deleted (renamed to `.trash-*` first, so a half-deleted
   one is never mistaken for a checkpoint).

A crash at any point leaves `latest` naming a complete checkpoint (the old one or the new one), and
stray `.tmp-*`/`.trash-*` directories that the next save removes. One process writes to a
directory at a time.

The checksum manifest (format_version 2). One chain of sha256 sums covers the whole checkpoint:

* `state.json["model_sha256"]` is the sha256 of the bytes of model.safetensors, and
  `state.json["tensors"]` lists the name, dtype and shape of every tensor in it;
* `state.json["state_sha256"]` is the sha256 of the *canonical form* of every other field of
  state.json: `json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
  allow_nan=True)` encoded as ASCII. So the config (the model's `norm_eps`, `rope_theta`,
  `max_seq_len`, the tokenizer's characters), the RNG and sampler state, the extra state, the
  tensor list and `model_sha256` itself are all covered, and through `model_sha256` the weights.

The checksum sits inside the file it covers, which is why it is taken over the parsed content in
a canonical form rather than over the file's bytes: re-indenting state.json changes nothing, any
changed value (an edit, a flipped bit that still parses) is refused. It detects damage and edits,
not an attacker: whoever can edit the file can recompute the sum. A checkpoint written before the
manifest (format_version 1, no `state_sha256`) still loads, with a warning that its metadata is
unverified (its weights are still checked against its `model_sha256`); a format_version 2 file
without `state_sha256` is refused.

A checkpoint is read as untrusted input:

* a checkpoint directory must resolve inside the run directory that holds it: a `ckpt-NNNNNN`
  symlink to another run is never counted (not as the newest, not for pruning) and is refused when
  named; `state.json` and `model.safetensors` must be regular files inside the checkpoint
  directory;
* every file is opened through `common.untrusted_files` (a FIFO `latest` cannot block, a
  symlink to `/dev/zero` is refused, state.json is size- and depth-capped) and the weights are read
  once, hashed and decoded from that same buffer (`serialization.read_checkpoint_bytes`);
* everything is validated -- checksums, tensor names, dtypes, shapes, the config if given, the
  RNG state -- before anything is modified; then sampler, RNG and Parameters are changed together,
  and if any of that fails half-way, all of them are put back (`serialization.assign_all`).
"""
from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import numbers
import os
import re
import signal
import sys
import threading
import time

import numpy as np

import warnings

from ..common import context, untrusted_files
from ..common.errors import MinisporeError, OpTypeError, OpValueError
from . import safetensors_codec
from .atomic_io import READ_ONLY, atomic_write_bytes, fsync_dir, rmtree
from .serialization import (CheckpointError, _is_cell, assign_validated, read_checkpoint_bytes, save_checkpoint,
                            validate_all)

logger = logging.getLogger("minispore")

MODEL_FILE = "model.safetensors"
STATE_FILE = "state.json"
LATEST_FILE = "latest"
FORMAT_VERSION = 2               # 2: state.json carries state_sha256 (1: model_sha256 only)
MAX_POINTER_BYTES = 256          # `latest` holds a name of about 12 characters
_CKPT_DIR = re.compile(r"^ckpt-(\d+)$")


class ConfigMismatchError(MinisporeError, ValueError):
    """The checkpoint was made with a different config than the one given now."""


# ---------------------------------------------------------------------------------------------
# Config comparison
def _plain(obj, where: str):
    """A JSON-compatible copy of `obj` (dicts with str keys, lists, str, numbers, bool, None).

    Dataclasses become dicts, tuples lists, NumPy scalars and arrays Python numbers and lists.
    Anything else is an error naming where it was found, e.g. "extra_state['history'][3]".
    """
    if obj is None or isinstance(obj, (str, bool)):
        return obj
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, numbers.Integral):
        return int(obj)
    if isinstance(obj, numbers.Real):
        return float(obj)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        obj = dataclasses.asdict(obj)
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            if not isinstance(k, str):
                raise OpTypeError("CheckpointManager", f"string keys in {where}", f"key {k!r}")
            out[k] = _plain(v, f"{where}[{k!r}]")
        return out
    if isinstance(obj, (list, tuple)):
        return [_plain(v, f"{where}[{i}]") for i, v in enumerate(obj)]
    if callable(getattr(obj, "to_dict", None)):
        return _plain(obj.to_dict(), where)
    raise OpTypeError("CheckpointManager", f"JSON-compatible values in {where} (dict, list, str, number, "
                      "bool, None, dataclass)", type(obj).__name__)


def _flatten(d, prefix=""):
    """{"model": {"n_layers": 4}} -> {"model.n_layers": 4}."""
    out = {}
    for k, v in d.items():
        key = prefix + k
        if isinstance(v, dict) and v:
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


_MISSING = object()


def check_config(saved, current, ignore=()) -> None:
    """Raise ConfigMismatchError naming every field where `saved` and `current` differ.

    `saved` and `current` are dicts (nested dicts allowed), dataclasses, or objects with `to_dict()`.
    Nested fields are named by dotted paths (`model.n_layers`). `ignore` lists fields (or dotted
    prefixes) allowed to differ, e.g. `("max_iters", "train.eval_interval")` for a resumed run that
    trains longer. Values are compared after a JSON round trip, so a tuple equals a list.

        ConfigMismatchError: checkpoint was trained with n_layers=4, current config has n_layers=6
    """
    a = _flatten(json.loads(json.dumps(_plain(saved, "saved config"))) or {})
    b = _flatten(json.loads(json.dumps(_plain(current, "current config"))) or {})

    def ignored(key):
        return any(key == p or key.startswith(p + ".") for p in ignore)

    problems = []
    for key in sorted(set(a) | set(b)):
        if ignored(key):
            continue
        va, vb = a.get(key, _MISSING), b.get(key, _MISSING)
        if va == vb and type(va) is type(vb):
            continue
        if va is _MISSING:
            problems.append(f"checkpoint config has no field '{key}', current config has {key}={vb!r}")
        elif vb is _MISSING:
            problems.append(f"checkpoint was trained with {key}={va!r}, current config has no field '{key}'")
        else:
            problems.append(f"checkpoint was trained with {key}={va!r}, current config has {key}={vb!r}")
    if problems:
        raise ConfigMismatchError("; ".join(problems))


# ---------------------------------------------------------------------------------------------
# Ctrl-C safety
@contextlib.contextmanager
def deferred_interrupt(signals=(signal.SIGINT,)):
    """Hold back Ctrl-C (and the other `signals`) until the `with` block has finished.

        with deferred_interrupt():
            manager.save(step, net, optimizer)      # a KeyboardInterrupt arrives after this

    A signal received inside the block is re-delivered (to the handler that was installed before)
    when the block completes, so KeyboardInterrupt is raised right after the save. A *second*
    Ctrl-C inside the block aborts at once (the atomic save protocol still keeps `latest` intact).
    If the block raises, that exception propagates and the deferred signal is dropped (the program
    is stopping anyway). Signal handlers can only be set in the main thread; elsewhere this is a
    no-op.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received = []

    def handler(signum, frame):
        if received:                                  # second press: stop now
            raise KeyboardInterrupt
        received.append(signum)
        print(f"\n{signal.Signals(signum).name} received: finishing the checkpoint first "
              "(press Ctrl-C again to abort immediately)", file=sys.stderr, flush=True)

    previous = {s: signal.signal(s, handler) for s in signals}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h if h is not None else signal.SIG_DFL)
    if received:
        signal.raise_signal(received[0])


# ---------------------------------------------------------------------------------------------
def _named_parameters(net, optimizer):
    """(net entries, optimizer-only entries): lists of (name, Parameter), each Parameter once.

    An optimizer Cell usually also reaches the network's Parameters (it updates them); those are
    counted as the net's, so the optimizer part holds only its own state (moments, step counter).
    """
    seen, by_name = set(), {}

    def collect(cell, what):
        out = []
        if cell is None:
            return out
        if not _is_cell(cell):
            raise OpTypeError("CheckpointManager", f"'{what}' to be a Cell (with parameters_and_names())",
                              type(cell).__name__)
        for _, p in cell.parameters_and_names():
            if id(p) in seen:
                continue
            seen.add(id(p))
            if p.name in by_name:
                raise OpValueError("CheckpointManager", "unique Parameter names across net and optimizer",
                                   f"two different Parameters named '{p.name}'")
            by_name[p.name] = p
            out.append((p.name, p))
        return out

    return collect(net, "net"), collect(optimizer, "optimizer")


def _sha256_of_file(path) -> str:
    """sha256 of a file this process has just written (streamed, never read whole)."""
    h = hashlib.sha256()
    f, _ = untrusted_files.open_regular(path, "the checkpoint being saved")
    with f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def canonical_state_sha256(state: dict) -> str:
    """The `state_sha256` of a state.json: sha256 of the canonical JSON of every other field."""
    body = {k: v for k, v in state.items() if k != "state_sha256"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def _list_names(names, limit=8):
    names = sorted(names)
    more = f" and {len(names) - limit} more" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more


# ---------------------------------------------------------------------------------------------
# Where checkpoints are: inside their run directory, made of regular files
def _run_dir_of(ckpt: str) -> str:
    return os.path.dirname(ckpt.rstrip(os.sep)) or os.curdir


def _is_complete(ckpt: str, run_dir: str) -> bool:
    """A cheap yes/no for listing: `ckpt` resolves inside `run_dir` and holds both files as regular
    files inside it. Opens nothing, so a FIFO or a device there cannot block or be read."""
    if not untrusted_files.inside(ckpt, run_dir):
        return False
    for name in (MODEL_FILE, STATE_FILE):
        path = os.path.join(ckpt, name)
        if not (untrusted_files.is_regular_file(path) and untrusted_files.inside(path, ckpt)):
            return False
    return True


def _looks_like_checkpoint(path: str) -> bool:
    """`path` is meant as one checkpoint directory (it has either file, of whatever kind)."""
    return any(os.path.lexists(os.path.join(path, name)) for name in (MODEL_FILE, STATE_FILE))


def _check_checkpoint_dir(ckpt: str, op: str) -> None:
    """Raise CheckpointError saying exactly why `ckpt` is not a usable checkpoint directory."""
    run_dir = _run_dir_of(ckpt)
    if not untrusted_files.inside(ckpt, run_dir):
        raise CheckpointError(op, ckpt, f"resolves to {os.path.realpath(ckpt)}, outside the run directory "
                              f"'{run_dir}' that holds it: a checkpoint directory linked in from elsewhere "
                              "(another run) is refused; copy it instead")
    for name in (MODEL_FILE, STATE_FILE):
        path = os.path.join(ckpt, name)
        if not os.path.lexists(path):
            raise CheckpointError(op, path, f"is missing: '{ckpt}' is not a complete checkpoint")
        try:
            untrusted_files.check_regular_file(path, name)
        except untrusted_files.UntrustedFileError as e:
            raise CheckpointError(op, path, f"is not a regular file: it is {e.got}") from e
        if not untrusted_files.inside(path, ckpt):
            raise CheckpointError(op, path, f"is a symlink to {os.path.realpath(path)}, outside the checkpoint "
                                  "directory: both files of a checkpoint must lie in it")


def find_checkpoint(path) -> str:
    """Resolve `path` to one checkpoint directory.

    `path` may be a checkpoint directory (`out/ckpt-000500`) or a run directory (`out`, whose
    latest complete checkpoint is used). Raises CheckpointError if there is none, or if the named
    checkpoint directory is unusable (linked in from outside its run directory, a missing file, a
    file that is not a regular file or lies outside it).
    """
    path = os.fspath(path)
    if _looks_like_checkpoint(path):
        _check_checkpoint_dir(path, "load")
        return path
    if os.path.isdir(path):
        found = CheckpointManager(path, create=False).latest()
        if found is not None:
            return found
        raise CheckpointError("load", path, "holds no complete checkpoint (no ckpt-*/ directory with "
                              f"{MODEL_FILE} and {STATE_FILE})")
    raise CheckpointError("load", path, "does not exist")


# ---------------------------------------------------------------------------------------------
# state.json
def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _verify_state_checksum(state: dict, state_path: str) -> None:
    stored = state.get("state_sha256")
    if stored is None:
        if state["format_version"] >= 2:
            raise CheckpointError("load", state_path, f"lacks its 'state_sha256' (format_version "
                                  f"{state['format_version']} requires one): it was edited or damaged")
        warnings.warn(f"The checkpoint state '{state_path}' has no state_sha256 (format_version 1, written "
                      "before checkpoints were checksummed): its config, tokenizer and other metadata "
                      "cannot be verified, only its weights. To protect it, load it and re-save it with "
                      "CheckpointManager.save.", UserWarning, stacklevel=3)
        return
    digest = canonical_state_sha256(state)
    if stored != digest:
        shown = stored[:16] if isinstance(stored, str) else repr(stored)[:16]
        raise CheckpointError("load", state_path, f"does not match its state_sha256 (stored {shown}..., "
                              f"content {digest[:16]}...): it was edited or damaged after it was written. "
                              "A checkpoint's config, tokenizer and metadata cannot be changed by hand; "
                              "train a new run instead")


def _check_names(state: dict, state_path: str) -> None:
    """net_params and optimizer_params: distinct names, each listed in 'tensors' with a dtype and shape."""
    listed = {}
    for key in ("net_params", "optimizer_params"):
        for name in state[key]:
            if not isinstance(name, str):
                raise CheckpointError("load", state_path, f"has a non-string entry {name!r:.40} in '{key}'")
            if name in listed:
                raise CheckpointError("load", state_path, f"lists '{name}' twice (in '{listed[name]}' and '{key}')")
            listed[name] = key
            if name not in state["tensors"]:
                raise CheckpointError("load", state_path, f"'{key}' names '{name}', which is not in its "
                                      "'tensors' (the list of what the weights file holds)")
    for name, info in state["tensors"].items():
        if not (isinstance(info, dict) and isinstance(info.get("dtype"), str) and isinstance(info.get("shape"), list)
                and all(_is_int(d) and d >= 0 for d in info["shape"])):
            raise CheckpointError("load", state_path, f"has an invalid entry for '{name}' in 'tensors' "
                                  "(expected {'dtype': str, 'shape': [non-negative ints]})")


def read_state(path) -> dict:
    """The verified contents of a checkpoint's state.json (`path` as for `find_checkpoint`).

    Useful before building a model: `read_state(ckpt)["config"]` is the config it was trained with.
    The `state_sha256` checksum is verified here (see the module docstring), so a config returned
    by this function is the one that was saved. The returned dict has an extra key "path": the
    checkpoint directory.
    """
    ckpt = find_checkpoint(path)
    state_path = os.path.join(ckpt, STATE_FILE)
    try:
        state = untrusted_files.read_json(state_path, "a checkpoint's state.json")
    except untrusted_files.UntrustedFileError as e:
        if e.expected in ("valid JSON", "UTF-8 JSON"):
            raise CheckpointError("load", state_path, f"is not valid JSON: {e.got}") from e
        raise CheckpointError("load", state_path, f"could not be read: expected {e.expected}, but got {e.got}") from e
    if not isinstance(state, dict):
        raise CheckpointError("load", state_path, "does not hold a JSON object")
    version = state.get("format_version")
    if not _is_int(version):
        raise CheckpointError("load", state_path, "lacks a valid 'format_version' (int expected)")
    if not 1 <= version <= FORMAT_VERSION:
        hint = " (upgrade minispore)" if version > FORMAT_VERSION else ""
        raise CheckpointError("load", state_path, f"has format_version {version}; this minispore reads 1 to "
                              f"{FORMAT_VERSION}{hint}")
    _verify_state_checksum(state, state_path)
    expected = {"step": int, "model_sha256": str, "tensors": dict, "net_params": list, "optimizer_params": list,
                "extra_state": dict}
    for key, typ in expected.items():
        if not isinstance(state.get(key), typ) or isinstance(state.get(key), bool):
            raise CheckpointError("load", state_path, f"lacks a valid '{key}' ({typ.__name__} expected)")
    if state["step"] < 0:
        raise CheckpointError("load", state_path, f"has a negative step ({state['step']}); save writes steps >= 0")
    named = _CKPT_DIR.match(os.path.basename(os.path.normpath(ckpt)))
    if named and int(named.group(1)) != state["step"]:
        # the directory name is what checkpoints()/latest() order by: a state that disagrees would
        # resume at another step than the one it was chosen as
        raise CheckpointError("load", state_path, f"records step {state['step']}, but its directory is named "
                              f"for step {int(named.group(1))}")
    _check_names(state, state_path)
    state["path"] = ckpt
    return state


class CheckpointManager:
    """Save and restore complete training state in `directory`, keeping the newest `keep` checkpoints.

        manager = CheckpointManager("out", keep=3)
        manager.save(step, net, optimizer, {"best_val": 1.9}, config=cfg, sampler=sampler)
        extra = manager.load("latest", net, optimizer, config=cfg, sampler=sampler)
        start_step = extra["step"]

    `keep=None` keeps every checkpoint.
    """

    def __init__(self, directory, keep=3, create=True):
        if keep is not None and (not isinstance(keep, numbers.Integral) or isinstance(keep, bool) or keep < 1):
            raise OpValueError("CheckpointManager", "'keep' as a positive int or None", repr(keep))
        self.directory = os.fspath(directory)
        self.keep = keep
        if create:
            os.makedirs(self.directory, exist_ok=True)

    # -- where things are -----------------------------------------------------------------------
    def path_for(self, step: int) -> str:
        return os.path.join(self.directory, f"ckpt-{step:06d}")

    def checkpoints(self) -> list:
        """[(step, path)] of the complete checkpoints, oldest first.

        Only `ckpt-NNNNNN` directories that resolve inside this directory count, with both files
        regular files inside them: a symlink to another run's checkpoint is neither loaded as the
        newest nor pruned (which would reach into the other run)."""
        out = []
        try:
            names = os.listdir(self.directory)
        except OSError:
            return out
        for name in names:
            m = _CKPT_DIR.match(name)
            path = os.path.join(self.directory, name)
            if m and _is_complete(path, self.directory):
                out.append((int(m.group(1)), path))
        return sorted(out)

    def latest(self) -> str | None:
        """The checkpoint `latest` points to; if that pointer is missing or stale, the newest complete
        checkpoint; None if there is none.

        The pointer is read as untrusted: at most MAX_POINTER_BYTES of a regular file (a FIFO or a
        device is not opened for reading), and only a bare `ckpt-NNNNNN` name that `checkpoints()`
        would count is followed -- never "../" or an absolute path from a file."""
        pointer = os.path.join(self.directory, LATEST_FILE)
        try:
            raw = untrusted_files.read_bytes(pointer, "the 'latest' pointer", MAX_POINTER_BYTES)
            name = raw.decode("utf-8").strip()
        except untrusted_files.UntrustedFileError as e:
            name = None
            if e.got != "nothing at that path":
                logger.warning("'%s' is not a usable pointer (expected %s, but got %s); using the newest "
                               "checkpoint", pointer, e.expected, e.got)
        except UnicodeDecodeError:
            name = None
            logger.warning("'%s' is not UTF-8 text; using the newest checkpoint", pointer)
        if name is not None:
            if _CKPT_DIR.match(name) and _is_complete(os.path.join(self.directory, name), self.directory):
                return os.path.join(self.directory, name)
            logger.warning("'%s' names %r, which is not a complete checkpoint inside '%s'; using the newest one",
                           pointer, name[:80], self.directory)
        found = self.checkpoints()
        return found[-1][1] if found else None

    # -- save -----------------------------------------------------------------------------------
    def save(self, step, net, optimizer=None, extra_state=None, *, config=None, sampler=None) -> str:
        """Write checkpoint `ckpt-<step:06d>` and point `latest` at it; returns its path.

        Args:
            step: the training step (iterations completed), an int >= 0.
            net: the network Cell; its Parameters are saved under their names.
            optimizer: the optimizer Cell (its state Parameters, e.g. `adam_m.*`, `global_step`).
            extra_state: a JSON-compatible dict returned by `load` (e.g. loss history, best val loss).
            config: the run's config (dict / dataclass / `to_dict()` object), compared on load.
            sampler: an object with `state_dict()` (e.g. `minispore.dataset.BatchSampler`).
        The global RNG state (`minispore.common.context.get_rng_state()`) is always saved.
        """
        if not isinstance(step, numbers.Integral) or isinstance(step, bool) or step < 0:
            raise OpValueError("CheckpointManager.save", "'step' as an int >= 0", repr(step))
        step = int(step)
        if not _is_cell(net):
            raise OpTypeError("CheckpointManager.save", "'net' to be a Cell", type(net).__name__)
        extra = _plain(extra_state or {}, "extra_state")
        if not isinstance(extra, dict):
            raise OpTypeError("CheckpointManager.save", "'extra_state' to be a dict", type(extra_state).__name__)
        if extra.get("step", step) != step:
            raise OpValueError("CheckpointManager.save", f"extra_state['step'] absent or equal to step={step}",
                               repr(extra["step"]))
        net_items, opt_items = _named_parameters(net, optimizer)
        from .. import __version__
        state = {
            "format_version": FORMAT_VERSION,
            "step": step,
            "minispore_version": __version__,
            "saved_at_unix": time.time(),
            "rng_state": _plain(context.get_rng_state(), "rng_state"),
            "sampler_state": _plain(sampler.state_dict(), "sampler_state") if sampler is not None else None,
            "config": _plain(config, "config"),
            "extra_state": extra,
            "net_params": [n for n, _ in net_items],
            "optimizer_params": [n for n, _ in opt_items],
        }

        os.makedirs(self.directory, exist_ok=True)
        self._remove_leftovers()
        final = self.path_for(step)
        tmp = os.path.join(self.directory, f".tmp-ckpt-{step:06d}-{os.getpid()}")
        os.mkdir(tmp)
        try:
            model_path = os.path.join(tmp, MODEL_FILE)
            save_checkpoint([{"name": n, "data": p} for n, p in net_items + opt_items], model_path,
                            crc_check=True, format="safetensors")
            state["model_sha256"] = _sha256_of_file(model_path)
            state["tensors"] = {n: {"dtype": str(p.dtype), "shape": list(p.shape)}
                                for n, p in net_items + opt_items}
            # the checksum of exactly what a reader will parse back (a JSON round trip of the state)
            state = json.loads(json.dumps(state, allow_nan=True))
            state["state_sha256"] = canonical_state_sha256(state)
            atomic_write_bytes(os.path.join(tmp, STATE_FILE),
                               json.dumps(state, indent=1, allow_nan=True).encode("utf-8"), mode=READ_ONLY)
            fsync_dir(tmp)
            self._install(tmp, final)
        except BaseException:
            rmtree_quiet(tmp)
            raise
        atomic_write_bytes(os.path.join(self.directory, LATEST_FILE), (os.path.basename(final) + "\n").encode(),
                           mode=None)
        self._prune(keep_also=final)
        return final

    def _install(self, tmp, final):
        """Rename the finished temporary directory to its final name (replacing an older save of the
        same step: that one is moved aside first, because rename cannot replace a non-empty directory)."""
        aside = None
        if os.path.exists(final):
            aside = os.path.join(self.directory, f".trash-{os.path.basename(final)}-{os.getpid()}")
            os.rename(final, aside)
        try:
            os.rename(tmp, final)
        except BaseException:
            if aside is not None:                  # put the old save of this step back
                os.rename(aside, final)
            raise
        fsync_dir(self.directory)
        if aside is not None:
            rmtree_quiet(aside)

    def _prune(self, keep_also):
        if self.keep is None:
            return
        found = self.checkpoints()
        doomed = [p for _, p in found[:-self.keep] if os.path.abspath(p) != os.path.abspath(keep_also)]
        for path in doomed:
            trash = os.path.join(self.directory, f".trash-{os.path.basename(path)}-{os.getpid()}")
            os.rename(path, trash)                 # atomic: never a half-deleted "checkpoint"
            rmtree_quiet(trash)
        if doomed:
            fsync_dir(self.directory)

    def _remove_leftovers(self):
        """Delete `.tmp-*` / `.trash-*` directories left by an interrupted save or prune."""
        for name in os.listdir(self.directory):
            if name.startswith((".tmp-ckpt-", ".trash-ckpt-")):
                rmtree_quiet(os.path.join(self.directory, name))

    # -- load -----------------------------------------------------------------------------------
    def load(self, path="latest", net=None, optimizer=None, *, config=None, sampler=None,
             ignore_config=(), restore_rng=True) -> dict:
        """Restore a checkpoint into `net` / `optimizer` / `sampler` / the global RNG.

        Args:
            path: "latest" (this manager's newest), a step number, a checkpoint directory, or another
                manager directory (its latest checkpoint).
            net, optimizer: Cells whose Parameters are overwritten. Their Parameter names, dtypes and
                shapes must match the checkpoint exactly (no missing, no extra names).
            config: if given, `check_config(saved_config, config, ignore_config)` runs first.
            sampler: an object with `load_state_dict()`; gets the saved sampler state.
            restore_rng: set the global RNG to its saved state (needed for bit-exact resume).

        Returns:
            the `extra_state` dict given to `save`, plus "step". Everything is validated before
            anything is modified, and a failure while modifying (MemoryError, Ctrl-C) puts back what
            was already changed, so on any error the net, optimizer, sampler and RNG are unchanged.
        """
        if path == "latest":
            ckpt = self.latest()
            if ckpt is None:
                raise CheckpointError("CheckpointManager.load", self.directory, "holds no complete checkpoint")
        elif isinstance(path, numbers.Integral) and not isinstance(path, bool):
            ckpt = self.path_for(int(path))
        else:
            ckpt = path
        state = read_state(ckpt)
        ckpt = state["path"]
        if config is not None:
            check_config(state.get("config"), config, ignore=ignore_config)
        if sampler is not None and state.get("sampler_state") is None:
            raise CheckpointError("CheckpointManager.load", ckpt, "has no sampler state to restore")
        values = _read_weights(ckpt, state)

        net_items, opt_items = _named_parameters(net, optimizer)
        problems = []
        if net is not None:
            problems += _compare_names("net", [n for n, _ in net_items], state["net_params"])
        if optimizer is not None:
            problems += _compare_names("optimizer", [n for n, _ in opt_items], state["optimizer_params"])
        for name, param in net_items + opt_items:
            if name in values:
                v = values[name]
                if tuple(v.shape) != tuple(param.shape) or _dtype_name(v) != str(param.dtype):
                    problems.append(f"'{name}' is {_dtype_name(v)}{list(v.shape)} in the checkpoint but "
                                    f"{param.dtype}{list(param.shape)} in the current model")
        if problems:
            raise CheckpointError("CheckpointManager.load", ckpt, "does not fit the current model: " +
                                  "; ".join(problems))
        rng_state = state.get("rng_state")
        if restore_rng:
            try:      # try the state on a scratch generator of the same kind before touching the real one
                type(context.rng().bit_generator)().state = rng_state
            except (TypeError, ValueError, KeyError, AttributeError, OverflowError) as e:
                # (OverflowError: an integer wider than the generator's words, raised by NumPy itself)
                raise CheckpointError("CheckpointManager.load", ckpt, f"has an unusable rng_state: {e}") from None
        pairs = validate_all(dict(net_items + opt_items), {n: values[n] for n, _ in net_items + opt_items},
                             "CheckpointManager.load")

        # ---- everything checked: now modify sampler, RNG and Parameters -- all of them or none
        sampler_before = sampler.state_dict() if sampler is not None else None
        rng_before = context.get_rng_state() if restore_rng else None
        try:
            if sampler is not None:        # (validates its state before changing itself)
                sampler.load_state_dict(state["sampler_state"])
            if restore_rng:
                context.set_rng_state(rng_state)
            assign_validated(pairs)        # (puts every Parameter back itself if it fails)
        except BaseException:
            if restore_rng:
                context.set_rng_state(rng_before)
            if sampler is not None:
                sampler.load_state_dict(sampler_before)
            raise
        extra = dict(state["extra_state"])
        extra["step"] = state["step"]
        return extra


def _read_weights(ckpt: str, state: dict) -> dict:
    """{name: ndarray} of a checkpoint's model file, verified against its state.json.

    The file is read once (`read_checkpoint_bytes`: regular file, memory checked), and the sha256
    is taken of the very buffer that is then decoded, so what is parsed is what was verified.
    """
    op = "CheckpointManager.load"
    model_path = os.path.join(ckpt, MODEL_FILE)
    raw = read_checkpoint_bytes(op, model_path, "weights file", missing="is missing")
    digest = hashlib.sha256(raw).hexdigest()
    if digest != state["model_sha256"]:
        raise CheckpointError(op, model_path, f"does not match the sha256 recorded in {STATE_FILE} (stored "
                              f"{state['model_sha256'][:16]}..., file {digest[:16]}...): it is damaged "
                              "or was replaced")
    values, strings = safetensors_codec.decode(raw, model_path, crc_check=True, op=op)
    del raw                                       # (the arrays own copies)
    if strings:
        raise CheckpointError(op, model_path, f"holds string entries ({_list_names(strings)})")
    manifest = {n: (t["dtype"], t["shape"]) for n, t in state["tensors"].items()}
    stored = {n: (_dtype_name(v), list(v.shape)) for n, v in values.items()}
    if manifest != stored:
        differ = sorted(n for n in set(manifest) | set(stored) if manifest.get(n) != stored.get(n))
        raise CheckpointError(op, ckpt, f"has a {MODEL_FILE} whose tensors differ from the list in {STATE_FILE} "
                              f"({_list_names(differ)})")
    return values


def _dtype_name(arr) -> str:
    from ..common.dtype import from_numpy_dtype
    return str(from_numpy_dtype(arr.dtype))


def _compare_names(what, current, saved):
    problems = []
    missing, unexpected = set(current) - set(saved), set(saved) - set(current)
    if missing:
        problems.append(f"the current {what} has parameters the checkpoint lacks ({_list_names(missing)})")
    if unexpected:
        problems.append(f"the checkpoint has {what} parameters the current {what} lacks "
                        f"({_list_names(unexpected)})")
    return problems


def rmtree_quiet(path):
    try:
        rmtree(path)
    except FileNotFoundError:
        pass
    except OSError as e:                     # leftovers are cleaned by the next save
        logger.warning("could not remove %s: %s", path, e)


__all__ = ["CheckpointManager", "ConfigMismatchError", "check_config", "deferred_interrupt",
           "find_checkpoint", "read_state"]
