"""One rank of the fault-recovery tests (tests/parallel/test_fault_recovery.py) and benchmark
(bench/bench_recovery.py): data-parallel training of a tiny float64 LLaMA that saves complete
checkpoint sets, resumes from the newest one, and can kill one of its ranks on purpose.

    mpiexec -n 4 python recovery_worker.py RUN_DIR OUT_DIR [options]
    msrun --worker_num=4 --auto-restart=1 recovery_worker.py RUN_DIR OUT_DIR --kill-rank 2 --kill-step 6

Each start (`recovery.restart_attempt()`: 0, then 1 after msrun's first restart):

1. `recovery.use_compile_cache(--cache)` when given (the jitted gradient step is stored there per
   rank; a restarted rank loads it instead of capturing it);
2. builds the model (seeded), nn.Adam, the data sampler (a `BatchSampler` over a fixed token
   stream: every rank draws the same GLOBAL_BATCH rows and keeps its 1/world share) and the
   strategy (`tensor_parallel_layouts(model, world)`: every parameter replicated over the ranks);
3. `recovery.resume_training(RUN_DIR, ...)`: the newest complete set, resharded if it was written
   by another world size; the sampler continues from the position saved with it;
4. trains to --steps: loss and gradients from `ms.jit(value_and_grad(model.loss))`, the gradient
   mean over the ranks (`nn.DistributedGradReducer`), Adam's update; every --save-every steps a
   checkpoint set (`recovery.save_training_set`, keep=3).

With --kill-rank R --kill-step K, rank R of the FIRST start (attempt 0 only, so the restarted job
does not) SIGKILLs itself at step K: with --kill-phase=save after writing its file of step K's set
and before the commit (that set is left without its manifest: the restart must pass over it),
with --kill-phase=step right after step K's update. It first writes OUT_DIR/killed.json (its rank,
step and the wall time: the start of the recovery-time measurement).

Every rank rewrites OUT_DIR/attempt<a>_rank<r>.json after each step: its local losses by step, the
wall time at each step's end, where it resumed from and which sets it passed over, the compile
cache counters, the compile time of the jitted step by phase (capture or cache load ...), the
phase times (start, init, loaded) and a sha256 of its final training state.
"""
import time

T_START = time.time()

import argparse  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

import minispore as ms  # noqa: E402
from minispore.common.process_groups import HCCL_WORLD_COMM_GROUP as WORLD  # noqa: E402
from minispore.communication import get_group_size, get_rank, init  # noqa: E402
from minispore.dataset.sampler import BatchSampler  # noqa: E402
from minispore.graph import compile_cache  # noqa: E402
from minispore.llm import Llama, LlamaConfig  # noqa: E402
from minispore.parallel import recovery  # noqa: E402
from minispore.parallel.checkpoint_set import CheckpointSetWriter  # noqa: E402
from minispore.parallel.checkpoint_transform import training_state_dict  # noqa: E402
from minispore.parallel.strategy_file import tensor_parallel_layouts  # noqa: E402

GLOBAL_BATCH = 8
SEQ = 8
VOCAB = 32


def parse():
    p = argparse.ArgumentParser()
    p.add_argument("run_dir")
    p.add_argument("out_dir")
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--save-every", type=int, default=2)
    p.add_argument("--kill-rank", type=int, default=-1)
    p.add_argument("--kill-step", type=int, default=0)
    p.add_argument("--kill-phase", choices=("save", "step"), default="save")
    p.add_argument("--cache", default="", help="compile cache folder (empty: no disk cache)")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--dim", type=int, default=16)
    p.add_argument("--max-step", type=int, default=None, help="resume from no set later than this")
    return p.parse_args()


def model_config(args):
    return LlamaConfig(vocab_size=VOCAB, dim=args.dim, n_layers=args.layers, n_heads=4, n_kv_heads=4,
                       ffn_dim=2 * args.dim, max_seq_len=SEQ, multiple_of=16, dropout=0.0,
                       tie_embeddings=False, init_std=0.2)


def state_digest(model, optimizer) -> str:
    """sha256 of every parameter and optimizer-state array (name order), the RNG left out."""
    h = hashlib.sha256()
    items = training_state_dict(model, optimizer, include_rng=False)
    for name in sorted(items):
        h.update(name.encode())
        h.update(np.ascontiguousarray(items[name]).tobytes())
    return h.hexdigest()


def make_step(grad_fn):
    def grad_step(x, y):
        return grad_fn(x, y)
    return grad_step


def die(out_dir, rank, step):
    Path(out_dir, "killed.json").write_text(json.dumps({"rank": rank, "step": step, "time": time.time()}))
    os.kill(os.getpid(), signal.SIGKILL)


def main():
    args = parse()
    init()
    rank, world = get_rank(), get_group_size()
    attempt = recovery.restart_attempt()
    t_init = time.time()
    if args.cache:
        recovery.use_compile_cache(args.cache)
    ms.set_seed(0)
    model = Llama(model_config(args))
    for p in model.get_parameters():
        p.set_dtype(ms.float64)
    model.set_train(True)
    params = model.trainable_params()
    optimizer = ms.nn.Adam(params, learning_rate=1e-2)
    tokens = np.random.default_rng(0).integers(0, VOCAB, 4096)
    sampler = BatchSampler(tokens, GLOBAL_BATCH, SEQ, seed=1234)
    layouts = tensor_parallel_layouts(model, world)            # every parameter replicated
    point = recovery.resume_training(args.run_dir, model, optimizer, strategy=layouts,
                                     max_step=args.max_step)
    start = 0 if point is None else point.step
    if point is not None:
        sampler.load_state_dict(point.state["sampler"])
    t_loaded = time.time()
    reducer = ms.nn.DistributedGradReducer(params, mean=True, group=WORLD) if world > 1 else None
    step_fn = ms.jit(make_step(ms.value_and_grad(model.loss, None, params)), capture_mode="trace")
    rows = GLOBAL_BATCH // world
    out = {"rank": rank, "world": world, "attempt": attempt, "t_start": T_START, "t_init": t_init,
           "t_loaded": t_loaded, "resumed_from": None if point is None else point.step,
           "resharded": None if point is None else point.resharded,
           "skipped": [] if point is None else [list(s) for s in point.skipped],
           "losses": {}, "step_end": {}}
    path = Path(args.out_dir, f"attempt{attempt}_rank{rank}.json")
    armed = attempt == 0 and rank == args.kill_rank
    for step in range(start, args.steps):
        x, y = sampler.next_batch()
        mine = slice(rank * rows, (rank + 1) * rows)
        xs, ys = ms.Tensor(x[mine]), ms.Tensor(y[mine])
        loss, grads = step_fn(xs, ys)
        if "compile" not in out:                          # what the first call's compile spent
            entry = step_fn.compile(xs, ys)
            out["compile"] = {"seconds": entry.compile_seconds, **entry.phases}
        if reducer is not None:
            grads = reducer(grads)
        optimizer(grads)
        done = step + 1
        out["losses"][done] = float(loss.asnumpy())
        out["step_end"][done] = time.time()
        out["cache"] = compile_cache.stats()
        path.write_text(json.dumps(out))
        if armed and done == args.kill_step and args.kill_phase == "step":
            die(args.out_dir, rank, done)
        if done % args.save_every == 0:
            state = {"sampler": sampler.state_dict()}
            if armed and done == args.kill_step:             # die between writing and commit
                writer = CheckpointSetWriter(args.run_dir, done)
                writer.write_rank_files(training_state_dict(model, optimizer), layouts)
                die(args.out_dir, rank, done)
            recovery.save_training_set(args.run_dir, done, model, optimizer, strategy=layouts, state=state,
                                       keep=3)
    out["final_state_sha256"] = state_digest(model, optimizer)
    path.write_text(json.dumps(out))


if __name__ == "__main__":
    main()
