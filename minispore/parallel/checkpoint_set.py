"""Checkpoint sets: every rank's files of one training step, committed together or not at all.

A distributed job's checkpoint is only usable whole: rank 2's shard of step 600 is worthless next
to rank 0's shard of step 400. A single file can be made crash-safe with one atomic rename
(`train/atomic_io.py`); N files written by N processes cannot. So a set is written in two phases,
the same idea as a database's two-phase commit:

1. **prepare / write** (`CheckpointSetWriter.write_rank_files`): every rank writes its own files,
   each atomically (`save_checkpoint` writes aside, fsyncs, renames): its parameter shards, its
   optimizer state and its RNG (`training_state_dict`), and rank 0 the strategy file;
2. **commit** (`CheckpointSetWriter.commit`): every rank hashes what it wrote (sha256 of the bytes
   on disk) and sends the list to rank 0 (a gather, which is also the barrier: it cannot finish
   before every rank has written); rank 0 then writes the manifest `manifest.json` LAST, atomically:

        run/
          step_00000006/
            rank_0/net0.ckpt          rank_1/net1.ckpt   ...   (one per rank of the job)
            strategy.json             how each parameter was cut (MindSpore's JSON strategy file)
            manifest.json             the commit marker, written after all of the above:
              {"format": "minispore-checkpoint-set", "version": 1, "step": 6, "world_size": 4,
               "ranks": {"0": "rank_0/net0.ckpt", ...}, "strategy": "strategy.json",
               "files": {"rank_0/net0.ckpt": {"sha256": "...", "bytes": 71233}, ...},
               "state": {"sampler": {...}},   # job-wide state, e.g. the data position
               "manifest_sha256": "..."}      # sha256 of the canonical JSON of everything else

A set is **complete** exactly when its manifest exists, is intact (`manifest_sha256`), names a
file for every rank 0..world_size-1, and every file it lists exists inside the set as a regular
file with the recorded size and sha256. `latest_complete_set` walks the sets newest first and
takes the first complete one; every other one is passed over with the reason logged (never
loaded): a set whose job died before the commit has no manifest; a truncated or damaged shard
fails its hash; a manifest edited by hand fails `manifest_sha256`. Because the manifest is
written only after the gather, a job killed at any moment leaves the previous complete set
untouched and chosen: that is the property fault recovery (`parallel/recovery.py`) rests on.

Rewriting a step (a job resumed from an older set reaches the step again) first moves the old set
aside, so a manifest never sits next to files it does not describe; `keep` prunes the oldest
complete sets (and the incomplete ones older than the newest complete one) after a commit.

The per-rank files are MindSpore's layout for distributed checkpoints (`rank_<r>/<prefix><r>.ckpt`
+ a strategy file), so `transform_checkpoints` reshards a set directly for another world size.
MindSpore itself has no such marker: its checkpoints are per-rank files, and its fault-tolerance
(MindIO TTP) restores from a healthy replica; the manifest is what makes "the latest complete
distributed checkpoint" decidable from the files alone.
"""
from __future__ import annotations

import hashlib
import json
import logging
import numbers
import os
import re
import time
from dataclasses import dataclass, field

from ..common import process_groups, untrusted_files
from ..common.errors import OpTypeError, OpValueError
from ..train.atomic_io import atomic_write_bytes, fsync_dir, rmtree
from ..train.safetensors_codec import CheckpointError
from ..train.serialization import save_checkpoint
from .strategy_file import save_strategy_file

logger = logging.getLogger("minispore")

MANIFEST_FILE = "manifest.json"
STRATEGY_FILE = "strategy.json"
FORMAT = "minispore-checkpoint-set"
VERSION = 1
CKPT_PREFIX = "net"                    # rank_<r>/net<r>.ckpt, the name transform_checkpoints writes
MAX_MANIFEST_BYTES = 16 * 2**20
_SET_DIR = re.compile(r"^step_(\d{8})$")


class IncompleteCheckpointSetError(CheckpointError):
    """A checkpoint set that must not be loaded: no manifest, a missing or damaged file, a
    manifest that does not verify. `problem` says which."""

    def __init__(self, op: str, path, problem: str):
        super().__init__(op, path, problem)
        self.args = (f"For '{op}', the checkpoint set '{path}' {problem}",)


@dataclass(frozen=True)
class CheckpointSet:
    """A verified, complete checkpoint set (what `verify_checkpoint_set` returns)."""
    path: str                      # the set's directory
    step: int                      # training steps completed when it was saved
    world_size: int                # ranks of the job that wrote it
    rank_files: tuple              # absolute path of rank r's file, in rank order
    strategy_file: str | None      # absolute path of the strategy file, if the job wrote one
    state: dict = field(default_factory=dict)   # the job-wide state given to commit (data position ...)


# ---------------------------------------------------------------------------------------------
# names and small helpers
def set_dir(run_dir, step: int) -> str:
    """`<run_dir>/step_<step:08d>`: where the set of `step` lives."""
    return os.path.join(os.fspath(run_dir), f"step_{int(step):08d}")


def rank_file_name(rank: int) -> str:
    """The file of `rank` inside a set, relative to it: `rank_<r>/net<r>.ckpt`."""
    return f"rank_{rank}/{CKPT_PREFIX}{rank}.ckpt"


def _check_step(op, step) -> int:
    if isinstance(step, bool) or not isinstance(step, numbers.Integral) or step < 0:
        raise OpValueError(op, "'step' as an int >= 0", repr(step))
    return int(step)


def _check_run_dir(op, run_dir) -> str:
    if not isinstance(run_dir, (str, os.PathLike)):
        raise OpTypeError(op, "'run_dir' to be a path", type(run_dir).__name__)
    return os.fspath(run_dir)


def canonical_sha256(manifest: dict) -> str:
    """sha256 of a manifest's canonical JSON without its own `manifest_sha256` field (sorted
    keys, no spaces, ASCII): re-indenting the file changes nothing, changing any value does."""
    body = {k: v for k, v in manifest.items() if k != "manifest_sha256"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def file_digest(path) -> tuple:
    """(sha256 hex, size in bytes) of a regular file, read in 1 MiB blocks."""
    h = hashlib.sha256()
    f, size = untrusted_files.open_regular(os.fspath(path), "a checkpoint-set file")
    with f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest(), size


def _world():
    """(rank, size, comm or None) of this process's world (one rank, no comm, without MPI)."""
    w = process_groups.world()
    return w.rank, w.size, w.comm


def _gather(obj, comm):
    return [obj] if comm is None else comm.gather(obj, root=0)


def _bcast(obj, comm):
    return obj if comm is None else comm.bcast(obj, root=0)


def _remove_tree(path: str) -> None:
    """Move `path` aside under a hidden name (one rename: never a half-deleted set with its
    manifest still in place), then delete it."""
    if not os.path.lexists(path):
        return
    parent, name = os.path.split(os.path.abspath(path))
    trash = os.path.join(parent, f".trash-{name}-{os.getpid()}-{time.monotonic_ns()}")
    os.rename(path, trash)
    fsync_dir(parent)
    try:
        rmtree(trash)
    except OSError as e:                    # a leftover .trash-* is never read as a set
        logger.warning("could not remove %s: %s", trash, e)


# ---------------------------------------------------------------------------------------------
# writing: two phases
class CheckpointSetWriter:
    """Write the set of one step, in two collective phases (see the module docstring).

        writer = CheckpointSetWriter("run", step=6)          # collective: clears an old step_6
        writer.write_rank_files(training_state_dict(net, opt), strategy=layouts)   # every rank
        path = writer.commit(state={"sampler": sampler.state_dict()}, keep=2)        # collective

    Every rank of the world must make the same calls in the same order. `save_checkpoint_set`
    does all three.
    """

    def __init__(self, run_dir, step):
        op = "CheckpointSetWriter"
        self.run_dir = _check_run_dir(op, run_dir)
        self.step = _check_step(op, step)
        self.path = set_dir(self.run_dir, self.step)
        self.rank, self.world_size, self._comm = _world()
        self._written = []
        self._strategy = None
        if self.rank == 0:
            os.makedirs(self.run_dir, exist_ok=True)
            _remove_tree(self.path)         # an older (complete or not) set of this step
            os.makedirs(self.path)
        if self._comm is not None:
            self._comm.Barrier()            # nobody writes before the old set is gone

    def write_rank_files(self, items: dict, strategy=None) -> str:
        """Write this rank's file (`items`: `{name: ndarray | Tensor | str}`, e.g.
        `training_state_dict(net, optimizer)`) atomically, and on rank 0 the strategy file
        (`strategy`: `{name: (global shape, Layout)}`, or None for an unsharded job). Returns the
        path of this rank's file."""
        op = "CheckpointSetWriter.write_rank_files"
        if not isinstance(items, dict) or not items:
            raise OpTypeError(op, "'items' to be a non-empty dict {name: array | str}", type(items).__name__)
        rel = rank_file_name(self.rank)
        path = os.path.join(self.path, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        save_checkpoint(items, path)                      # atomic: aside, fsync, rename
        self._written.append(rel)
        if self.rank == 0 and strategy is not None:
            save_strategy_file(os.path.join(self.path, STRATEGY_FILE), strategy)
            self._strategy = STRATEGY_FILE
            self._written.append(STRATEGY_FILE)
        return path

    def commit(self, state=None, keep=None) -> str:
        """Hash what every rank wrote, gather the lists on rank 0 and write the manifest there
        (last, atomically); then, with `keep`, prune old sets. Collective. Returns the set's path."""
        op = "CheckpointSetWriter.commit"
        if keep is not None and (isinstance(keep, bool) or not isinstance(keep, numbers.Integral) or keep < 1):
            raise OpValueError(op, "'keep' as None or an int >= 1", repr(keep))
        if not self._written:
            raise OpValueError(op, "write_rank_files before commit", "nothing written by this rank")
        try:
            state = json.loads(json.dumps({} if state is None else state))
        except (TypeError, ValueError) as e:
            raise OpTypeError(op, "'state' to be JSON-compatible (dict, list, str, number, bool, None)",
                              str(e)) from None
        if not isinstance(state, dict):
            raise OpTypeError(op, "'state' to be a dict", type(state).__name__)
        mine = {rel: file_digest(os.path.join(self.path, rel)) for rel in self._written}
        everyone = _gather((self.rank, rank_file_name(self.rank), mine), self._comm)
        ok = True
        if self.rank == 0:
            try:
                write_manifest(self.path, self.step, self.world_size,
                               {r: rel for r, rel, _ in everyone},
                               {rel: d for _, _, files in everyone for rel, d in files.items()},
                               self._strategy, state)
                if keep is not None:
                    prune(self.run_dir, keep)
            except BaseException:
                ok = False
                raise
            finally:
                ok = _bcast(ok, self._comm)           # the others wait for the commit to be durable
        else:
            ok = _bcast(None, self._comm)
            if not ok:
                raise CheckpointError(op, self.path, "was not committed: rank 0 failed to write the manifest")
        return self.path


def write_manifest(path, step, world_size, ranks: dict, files: dict, strategy, state) -> str:
    """Write `path/manifest.json` (atomically; the set's commit marker) for files already on disk.

    `ranks`: {rank: its file relative to the set}; `files`: {relative path: (sha256, bytes)} of
    every file of the set; `strategy`: the strategy file's relative path or None."""
    manifest = {
        "format": FORMAT, "version": VERSION, "step": int(step), "world_size": int(world_size),
        "ranks": {str(r): rel for r, rel in sorted(ranks.items())},
        "strategy": strategy,
        "files": {rel: {"sha256": d[0], "bytes": int(d[1])} for rel, d in sorted(files.items())},
        "state": state, "saved_at_unix": time.time(),
    }
    manifest["manifest_sha256"] = canonical_sha256(manifest)
    target = os.path.join(os.fspath(path), MANIFEST_FILE)
    atomic_write_bytes(target, json.dumps(manifest, indent=1).encode("ascii"), mode=None)
    fsync_dir(os.fspath(path))
    return target


def save_checkpoint_set(run_dir, step, items: dict, strategy=None, state=None, keep=None) -> str:
    """Write and commit the set of `step` (collective; see `CheckpointSetWriter`)."""
    writer = CheckpointSetWriter(run_dir, step)
    writer.write_rank_files(items, strategy)
    return writer.commit(state, keep)


# ---------------------------------------------------------------------------------------------
# reading: verify, list, choose
def _fail(path, problem):
    raise IncompleteCheckpointSetError("verify_checkpoint_set", path, problem)


def _relative_file(path, rel) -> str:
    """The absolute path of a file a manifest names, refused unless it is a plain relative path
    that stays inside the set (no absolute path, no '..', no symlink out)."""
    if not isinstance(rel, str) or not rel or os.path.isabs(rel) or ".." in rel.replace("\\", "/").split("/"):
        _fail(path, f"has a manifest naming {rel!r:.80}, not a relative path inside the set")
    full = os.path.join(path, rel)
    if not untrusted_files.inside(full, path):
        _fail(path, f"has a file '{rel}' that resolves outside the set ({os.path.realpath(full)})")
    return full


def verify_checkpoint_set(path) -> CheckpointSet:
    """Check that the set in directory `path` is complete (module docstring) and return it;
    IncompleteCheckpointSetError says what is wrong otherwise. Every listed file is hashed."""
    path = os.path.abspath(os.fspath(path))
    manifest_path = os.path.join(path, MANIFEST_FILE)
    if not os.path.lexists(manifest_path):
        _fail(path, f"has no {MANIFEST_FILE} (its job stopped before the commit): it is incomplete")
    try:
        manifest = untrusted_files.read_json(manifest_path, "a checkpoint set's manifest", MAX_MANIFEST_BYTES)
    except untrusted_files.UntrustedFileError as e:
        _fail(path, f"has an unreadable {MANIFEST_FILE}: expected {e.expected}, but got {e.got}")
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        _fail(path, f"has a {MANIFEST_FILE} that is not a '{FORMAT}' manifest")
    if manifest.get("version") != VERSION:
        _fail(path, f"has manifest version {manifest.get('version')!r}; this minispore reads {VERSION}")
    if manifest.get("manifest_sha256") != canonical_sha256(manifest):
        _fail(path, f"has a {MANIFEST_FILE} that does not match its manifest_sha256: it was edited or damaged")
    step, world = manifest.get("step"), manifest.get("world_size")
    if not (isinstance(step, int) and not isinstance(step, bool) and step >= 0):
        _fail(path, f"records an invalid step {step!r}")
    named = _SET_DIR.match(os.path.basename(path))
    if named and int(named.group(1)) != step:
        _fail(path, f"records step {step}, but its directory is named for step {int(named.group(1))}")
    if not (isinstance(world, int) and not isinstance(world, bool) and world >= 1):
        _fail(path, f"records an invalid world_size {world!r}")
    ranks, files = manifest.get("ranks"), manifest.get("files")
    if not isinstance(ranks, dict) or not isinstance(files, dict) or not isinstance(manifest.get("state"), dict):
        _fail(path, "has a manifest without 'ranks', 'files' and 'state' objects")
    missing_ranks = [r for r in range(world) if str(r) not in ranks]
    if missing_ranks or len(ranks) != world:
        _fail(path, f"does not name a file for every rank of its world of {world} (missing ranks "
              f"{missing_ranks}, named {sorted(ranks)})")
    strategy = manifest.get("strategy")
    listed = [ranks[str(r)] for r in range(world)] + ([strategy] if strategy is not None else [])
    for rel in listed:
        if rel not in files:
            _fail(path, f"names '{rel}' without its sha256 in 'files'")
    for rel, info in sorted(files.items()):
        full = _relative_file(path, rel)
        if not (isinstance(info, dict) and isinstance(info.get("sha256"), str) and isinstance(info.get("bytes"), int)):
            _fail(path, f"has an invalid entry for '{rel}' in 'files'")
        if not os.path.lexists(full):
            _fail(path, f"lacks '{rel}', which its manifest lists: a shard is missing")
        try:
            digest, size = file_digest(full)
        except untrusted_files.UntrustedFileError as e:
            _fail(path, f"has '{rel}' unreadable: expected {e.expected}, but got {e.got}")
        if size != info["bytes"]:
            _fail(path, f"has '{rel}' of {size} bytes, the manifest recorded {info['bytes']}: it was truncated "
                  "or replaced")
        if digest != info["sha256"]:
            _fail(path, f"has '{rel}' whose sha256 ({digest[:12]}...) differs from the manifest's "
                  f"({info['sha256'][:12]}...): it is damaged")
    return CheckpointSet(path, step, world, tuple(_relative_file(path, ranks[str(r)]) for r in range(world)),
                         None if strategy is None else _relative_file(path, strategy), manifest["state"])


def list_checkpoint_sets(run_dir) -> list:
    """[(step, path)] of every set directory under `run_dir`, complete or not, oldest first."""
    run_dir = _check_run_dir("list_checkpoint_sets", run_dir)
    try:
        names = os.listdir(run_dir)
    except OSError:
        return []
    out = []
    for name in names:
        m = _SET_DIR.match(name)
        path = os.path.join(run_dir, name)
        if m and os.path.isdir(path) and untrusted_files.inside(path, run_dir):
            out.append((int(m.group(1)), path))
    return sorted(out)


def scan_checkpoint_sets(run_dir, max_step=None) -> list:
    """[(step, path, CheckpointSet or the reason it is unusable)], newest first, up to the first
    complete set (older ones are not hashed). `max_step` skips sets of later steps."""
    out = []
    for step, path in reversed(list_checkpoint_sets(run_dir)):
        if max_step is not None and step > max_step:
            continue
        try:
            found = verify_checkpoint_set(path)
        except IncompleteCheckpointSetError as e:
            out.append((step, path, e.problem))
            continue
        out.append((step, path, found))
        break
    return out


def latest_complete_set(run_dir, max_step=None) -> CheckpointSet | None:
    """The newest complete set under `run_dir` (a later incomplete or damaged one is passed over,
    with its reason logged), or None when there is none."""
    for step, path, found in scan_checkpoint_sets(run_dir, max_step):
        if isinstance(found, CheckpointSet):
            return found
        logger.warning("checkpoint set %s (step %d) is skipped: it %s", path, step, found)
    return None


def prune(run_dir, keep: int) -> list:
    """Delete all but the `keep` newest complete sets, and incomplete sets older than the newest
    complete one (sets of later steps are left: a job may be writing them). Returns the removed
    paths. Run by one process (rank 0 after a commit)."""
    if isinstance(keep, bool) or not isinstance(keep, numbers.Integral) or keep < 1:
        raise OpValueError("prune", "'keep' as an int >= 1", repr(keep))
    sets = list_checkpoint_sets(run_dir)
    complete = [(s, p) for s, p in sets if os.path.isfile(os.path.join(p, MANIFEST_FILE))]
    if not complete:
        return []
    newest = complete[-1][0]
    kept = {p for _, p in complete[-keep:]}
    doomed = [p for s, p in sets if s <= newest and p not in kept]
    for p in doomed:
        _remove_tree(p)
    return doomed


__all__ = ["CheckpointSet", "CheckpointSetWriter", "IncompleteCheckpointSetError", "MANIFEST_FILE",
           "STRATEGY_FILE", "canonical_sha256", "file_digest", "latest_complete_set", "list_checkpoint_sets",
           "prune", "rank_file_name", "save_checkpoint_set", "scan_checkpoint_sets", "set_dir",
           "verify_checkpoint_set", "write_manifest"]
