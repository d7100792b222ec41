"""Fault recovery: what a training script calls so that a restarted job continues the same run.

    from minispore.parallel import recovery

    recovery.use_compile_cache("cache.ms")                 # restarted ranks load their graphs
    layouts = tensor_parallel_layouts(net, dp)            # how this job cuts its parameters
    point = recovery.resume_training("run", net, optimizer, strategy=layouts)
    start = 0 if point is None else point.step
    if point is not None:
        sampler.load_state_dict(point.state["sampler"])   # the data position travelled too
    for step in range(start, total_steps):
        ...one training step...
        if (step + 1) % save_every == 0:
            recovery.save_training_set("run", step + 1, net, optimizer, strategy=layouts,
                                       state={"sampler": sampler.state_dict()}, keep=2)

and the job is started with `msrun --worker_num=4 --auto-restart 3 train.py` (or
`minispore run -n 4 --auto-restart 3 train.py`). When a rank dies (a SIGKILL, an OOM kill, a
segfault, an exception) MPICH's launcher stops the others and msrun names the failed rank
(communication/launcher.py); msrun then starts the same command again, up to 3 times. The
restarted script runs the lines above again: `resume_training` finds the newest COMPLETE
checkpoint set (parallel/checkpoint_set.py: every rank's shard, the strategy, the optimizer, the
RNG and the step, committed by a manifest written last), loads it, and the loop goes on from that
step. The layering is deliberate: the launcher (communication, a lower layer) only re-runs the
command; which checkpoint to continue from is decided here, from the files.

**Bit-identical resume.** A restarted run repeats the uninterrupted run's arithmetic exactly when
everything the steps read is restored: the parameters, the optimizer's moments and step counter,
the global RNG (dropout masks, random batches) -- all in each rank's `training_state_dict` -- and
the position in the data (the job-wide `state`, e.g. `BatchSampler.state_dict()`), on the same
world size (the same all-reduce grouping). Nothing is recomputed from the step number.

**Another world size** (4 ranks -> 2): the set's strategy file and the new job's `strategy`
differ, so rank 0 reshards the set with `transform_checkpoints` (parallel/checkpoint_transform.py)
into `<run>/.reshard-step_<n>-w<world>/` and every rank loads its new file. Data parallel over
the same global batch then continues the run to rounding (the mean of 2 half-batch gradients
instead of 4 quarter-batch ones: ~1e-16 relative per step).

**Recovery time** = detection (MPICH stops the job as soon as a process dies) + restart
(interpreters, imports, MPI_Init) + loading the set + the first step, which includes compiling a
jitted step. `use_compile_cache` points the on-disk compile cache (graph/compile_cache/,
MindSpore's `enable_compile_cache`) at a per-rank folder so the restarted ranks load the graphs
the first run stored instead of capturing them again; `bench/bench_recovery.py` measures both.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass

from ..common import context, process_groups, untrusted_files
from ..common.errors import OpTypeError, OpValueError
from ..communication.launcher import RESTART_ATTEMPT_VAR
from ..train.serialization import load_checkpoint
from .checkpoint_set import (MANIFEST_FILE, STRATEGY_FILE, CheckpointSet, CheckpointSetWriter, _relative_file,
                             _remove_tree, scan_checkpoint_sets)
from .checkpoint_transform import load_training_state, training_state_dict, transform_checkpoints
from .strategy_file import device_num_of, layouts_of, save_strategy_file


@dataclass(frozen=True)
class ResumePoint:
    """Where `resume_training` continued from."""
    step: int                 # training steps completed in the loaded set: continue with step + 1
    state: dict               # the job-wide state saved with it (e.g. {"sampler": ...})
    path: str                 # the set's directory
    saved_world_size: int     # ranks of the job that wrote it
    resharded: bool           # True when it was resharded for this job (another world or strategy)
    skipped: tuple = ()       # ((step, reason), ...): newer sets passed over, newest first


def restart_attempt() -> int:
    """0 for a job's first run; k for the k-th restart by `msrun --auto-restart` (its
    MINISPORE_RESTART_ATTEMPT). Lets a script tell a restart from a first start."""
    value = os.environ.get(RESTART_ATTEMPT_VAR, "0")
    return int(value) if value.isdigit() else 0


def use_compile_cache(path) -> str:
    """Turn on the on-disk compile cache at `path` (`set_context(enable_compile_cache=True,
    compile_cache_path=path)`) with this rank's own folder `<path>/rank_<r>/`: MindSpore's msrun
    sets RANK_ID for each worker, mpiexec does not, so it is set here (unless already set) from
    the world rank. Returns this rank's folder."""
    if not isinstance(path, (str, os.PathLike)):
        raise OpTypeError("use_compile_cache", "'path' to be a directory path", type(path).__name__)
    os.environ.setdefault("RANK_ID", str(process_groups.world().rank))
    context.set_context(enable_compile_cache=True, compile_cache_path=os.fspath(path))
    return os.path.join(os.fspath(path), f"rank_{os.environ['RANK_ID']}")


def save_training_set(run_dir, step, net, optimizer=None, *, strategy=None, state=None, keep=None,
                      include_rng=True) -> str:
    """Save this job's complete training state at `step` as one checkpoint set (collective:
    every rank calls it): each rank's `training_state_dict(net, optimizer)` (its shards, the
    optimizer's moments and counters, the RNG), rank 0's `strategy` (`{name: (shape, Layout)}`,
    e.g. `tensor_parallel_layouts(net, dp)`; None for an unsharded single-process job), and the
    job-wide `state` (JSON: the data position ...). `keep` prunes older sets. Returns the path."""
    writer = CheckpointSetWriter(run_dir, step)
    writer.write_rank_files(training_state_dict(net, optimizer, include_rng=include_rng), strategy)
    return writer.commit(state, keep)


def _same_strategy(saved_file, strategy) -> bool:
    """Whether the set's strategy file describes the same cut as `strategy` (both None counts)."""
    if saved_file is None or strategy is None:
        return saved_file is None and strategy is None
    saved = layouts_of(saved_file)
    mine = layouts_of(strategy)
    if set(saved) != set(mine):
        return False

    def cut(shape, layout):             # what a strategy file keeps (not the axis aliases)
        return (tuple(shape), tuple(layout.device_matrix), layout.tensor_map, tuple(layout.rank_list))
    return all(cut(*saved[n]) == cut(*mine[n]) for n in saved)


def _choose(run_dir, max_step, comm, rank):
    """(the set to resume from or None, the newer sets passed over). Rank 0 verifies the sets,
    hashing every file once, and tells the others which one; they read its manifest only."""
    choice = found = None
    if rank == 0:
        scan = scan_checkpoint_sets(run_dir, max_step)
        found = next((f for _, _, f in scan if isinstance(f, CheckpointSet)), None)
        skipped = tuple((s, why) for s, _, why in scan if isinstance(why, str))
        choice = (None if found is None else found.path, skipped)
    if comm is not None:
        choice = comm.bcast(choice, root=0)
    path, skipped = choice
    if path is None:
        return None, skipped
    return (found if rank == 0 else _describe(path)), skipped


def _describe(path) -> CheckpointSet:
    """The set at `path` as its manifest describes it, for ranks other than 0 (rank 0 verified it)."""
    m = untrusted_files.read_json(os.path.join(path, MANIFEST_FILE), "a checkpoint set's manifest")
    return CheckpointSet(path, m["step"], m["world_size"],
                         tuple(_relative_file(path, m["ranks"][str(r)]) for r in range(m["world_size"])),
                         None if m["strategy"] is None else _relative_file(path, m["strategy"]), m["state"])


def resume_training(run_dir, net, optimizer=None, *, strategy=None, max_step=None, restore_rng=True,
                    work_dir=None) -> ResumePoint | None:
    """Load the newest complete checkpoint set under `run_dir` into `net` and `optimizer` (and
    the global RNG); None when there is none (a first start: train from step 0). Collective.

    `strategy` is how THIS job cuts its parameters (`{name: (shape, Layout)}`, None for an
    unsharded job). When the set was written by a job of another world size or strategy it is
    resharded first (rank 0 runs `transform_checkpoints` into `work_dir`, which is kept, or by
    default into `<run_dir>/.reshard-step_<n>-w<world>`, which is removed after loading). `max_step` ignores
    sets of later steps. Every net and optimizer Parameter must receive a value
    (`load_training_state`), so a resumed run never silently keeps fresh moments."""
    op = "resume_training"
    if not isinstance(run_dir, (str, os.PathLike)):
        raise OpTypeError(op, "'run_dir' to be a path", type(run_dir).__name__)
    if max_step is not None and (isinstance(max_step, bool) or not isinstance(max_step, int) or max_step < 0):
        raise OpValueError(op, "'max_step' as None or an int >= 0", repr(max_step))
    w = process_groups.world()
    rank, world, comm = w.rank, w.size, w.comm
    chosen, skipped = _choose(os.fspath(run_dir), max_step, comm, rank)
    if chosen is None:
        return None
    n_dst = device_num_of(layouts_of(strategy))
    if strategy is not None and n_dst != world:
        raise OpValueError(op, f"a strategy over this job's {world} ranks", f"one over {n_dst} ranks")
    reshard = chosen.world_size != world or not _same_strategy(chosen.strategy_file, strategy)
    if not reshard:
        param_dict = load_checkpoint(chosen.rank_files[rank])
        load_training_state(param_dict, net, optimizer, restore_rng=restore_rng)
    else:
        work = os.fspath(work_dir) if work_dir is not None else os.path.join(
            os.fspath(run_dir), f".reshard-step_{chosen.step:08d}-w{world}")
        if rank == 0:
            if work_dir is None:
                _remove_tree(work)              # a leftover of an interrupted resume
            os.makedirs(work, exist_ok=True)
            dst_file = None
            if strategy is not None:
                dst_file = save_strategy_file(os.path.join(work, STRATEGY_FILE), strategy)
            transform_checkpoints(chosen.path, work, "net", chosen.strategy_file, dst_file)
        if comm is not None:
            comm.Barrier()
        mine = rank if n_dst > 1 else 0             # an unsharded destination: one file for all
        param_dict = load_checkpoint(os.path.join(work, f"rank_{mine}", f"net{mine}.ckpt"))
        load_training_state(param_dict, net, optimizer, restore_rng=restore_rng)
        if comm is not None:
            comm.Barrier()                          # everyone has read it
        if rank == 0 and work_dir is None:
            _remove_tree(work)
    return ResumePoint(chosen.step, json.loads(json.dumps(chosen.state)), chosen.path, chosen.world_size,
                       reshard, skipped)


__all__ = ["ResumePoint", "restart_attempt", "resume_training", "save_training_set", "use_compile_cache"]
