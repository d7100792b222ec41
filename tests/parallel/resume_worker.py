"""One rank of the resharded-resume tests (tests/parallel/test_resharded_resume.py) and the shared
dp x tp LLaMA training step of the communication-bytes tests (comm_bytes_worker.py).

    mpiexec -n 4 python resume_worker.py train  TP DP STEPS SAVE_AT CKPT_DIR OUT_DIR
    mpiexec -n 4 python resume_worker.py resume TP DP STEPS CKPT_DIR OUT_DIR HOW [sp,vocab_emb_dp]

`train` runs STEPS steps of the LLaMA trainer's step (llm/trainer.py: its AdamW with the decay
groups, its warmup-cosine learning rate written into the param groups before each step) on a
tiny float64 LLaMA as dp x tp on DP*TP ranks - `tensor_parallel_llama(full, parallel_config=
TransformerOpParallelConfig(data_parallel=DP, model_parallel=TP, vocab_emb_dp=False))`, whose TP
groups are TP consecutive ranks, with its `grad_reducer` (the DP mean); the plain Llama with
`nn.DistributedGradReducer` when TP is 1 - and after step SAVE_AT saves
every rank's training state (`training_state_dict`: its weight shards, AdamW's moments and step
counter, the RNG) to CKPT_DIR/rank_<r>/net<r>.ckpt and rank 0 the strategy file
(`tensor_parallel_layouts`). `resume` builds a run of ANOTHER layout (TP, DP: any, including one
process), seeded differently on purpose (what it must not depend on), loads that state resharded
(HOW: "own" = its own files unchanged, "transform" = rank 0 runs ms.transform_checkpoints for every
destination rank, "by_rank" = each rank runs ms.transform_checkpoint_by_rank for itself, "load" =
ms.load_distributed_checkpoint from the source files, "unified" = rank 0 merges the ranks'
safetensors files with ms.unified_safetensors and every rank loads its slices of the merged file
with ms.load_distributed_checkpoint(unified_safetensors_dir=...); "load_without_rng" the same without restoring
the RNG, the control that shows the RNG state matters) and runs STEPS more steps; the optional
last argument resumes with sequence parallel ("sp": the same weight layouts, other collectives)
and/or a replicated embedding and head ("vocab_emb_dp": their vocabulary split, and their AdamW
moments', undone by the transform). Each rank writes
OUT_DIR/rank_<r>.json with its per-step local losses; the global loss of a step is the mean of the
DP ranks' losses (equal local batches).

The batches come from the global RNG (`context.rng()`), the same draw on every rank, each DP rank
taking its rows: so a resumed run only sees the uninterrupted run's batches if the RNG state
travelled with the checkpoint. Dropout is 0 (TP ranks draw masks of their local shapes: a layout
change would change the masks) and gradients are not clipped (a per-rank global norm over TP
shards is not the model's norm).
"""
import json
import os
import sys
from pathlib import Path

import numpy as np

import minispore as ms
from minispore.common import context
from minispore.common.process_groups import HCCL_WORLD_COMM_GROUP as WORLD
from minispore.communication import get_group_size, get_rank, init
from minispore.llm import Llama, LlamaConfig
from minispore.llm.tensor_parallel import tensor_parallel_llama
from minispore.llm.trainer import TrainConfig, build_optimizer, optimizer_step, set_learning_rate

GLOBAL_BATCH = 4
SEQ = 8


def config(**kw):
    base = dict(vocab_size=32, dim=16, n_layers=2, n_heads=4, n_kv_heads=4, ffn_dim=32, max_seq_len=SEQ,
                multiple_of=16, dropout=0.0, tie_embeddings=False, init_std=0.2)
    base.update(kw)
    return LlamaConfig(**base)


def train_config():
    return TrainConfig(out_dir="unused", max_iters=100, learning_rate=2e-2, min_lr=2e-3, warmup_iters=2,
                       lr_decay_iters=12, weight_decay=0.1, grad_clip=0.0, beta1=0.9, beta2=0.99)


class LossCell(ms.nn.Cell):
    """`model.loss` as a Cell call (so forward pre-hooks on the model's cells run)."""

    def __init__(self, model):
        super().__init__(auto_prefix=False)
        self.model = model

    def construct(self, x, y):
        return self.model.loss(x, y)


class Run:
    """The model, optimizer, schedule and gradient communication of one dp x tp rank.

    tp > 1: `tensor_parallel_llama(full, parallel_config=...)` (llm/tensor_parallel.py builds the
    groups: rank = dp_index * tp + tp_index) and its `grad_reducer`; tp = 1, dp > 1: the plain
    Llama with `nn.DistributedGradReducer` over the world, or with `zero` ("level1".."level3")
    the parallel optimizer (nn/optim/parallel_optimizer.py) in place of reducer + optimizer."""

    def __init__(self, tp, dp, cfg=None, dtype=ms.float64, seed=0, overlap=False, seq_parallel=False,
                 vocab_emb_dp=False, zero=None, zero_threshold=0):
        from minispore.llm.config import TransformerOpParallelConfig
        assert get_group_size() == tp * dp, (get_group_size(), tp, dp)
        self.cfg = cfg or config()
        self.tp, self.dp = tp, dp
        self.tp_rank, self.dp_rank = get_rank() % tp, get_rank() // tp
        ms.set_seed(seed)
        full = Llama(self.cfg)
        for p in full.get_parameters():
            p.set_dtype(dtype)
        if tp > 1:
            pc = TransformerOpParallelConfig(data_parallel=dp, model_parallel=tp, use_seq_parallel=seq_parallel,
                                             vocab_emb_dp=vocab_emb_dp)
            self.model = tensor_parallel_llama(full, parallel_config=pc)
        else:
            self.model = full
        self.model.set_train(True)
        self.optimizer, self.schedule = build_optimizer(self.model, train_config())
        self.parallel_optimizer = None
        if tp > 1:
            self.reducer = self.model.grad_reducer(self.optimizer.parameters)
        elif dp > 1 and zero:
            from minispore.nn.optim.parallel_optimizer import ParallelOptimizer
            self.reducer = None
            # level3 gathers parameters in forward pre-hooks, which only a Cell CALL runs: the loss
            # goes through a Cell (LossCell), not the method model.loss
            self.loss_cell = LossCell(self.model)
            self.parallel_optimizer = ParallelOptimizer(self.optimizer, self.loss_cell, level=zero,
                                                        threshold=zero_threshold, mean=True, degree=dp)
        elif dp > 1:
            self.reducer = ms.nn.DistributedGradReducer(self.optimizer.parameters, mean=True, group=WORLD)
        else:
            self.reducer = None
        loss_fn = self.loss_cell if self.parallel_optimizer is not None else self.model.loss
        self.grad_fn = ms.value_and_grad(loss_fn, None, self.optimizer.parameters)
        self.overlap = overlap

    def batch(self):
        """This DP rank's rows of the global batch drawn from the global RNG."""
        ids = context.rng().integers(0, self.cfg.vocab_size, (GLOBAL_BATCH, SEQ + 1))
        rows = GLOBAL_BATCH // self.dp
        mine = ids[self.dp_rank * rows:(self.dp_rank + 1) * rows]
        return ms.Tensor(mine[:, :-1].astype(np.int64)), ms.Tensor(mine[:, 1:].astype(np.int64))

    def step(self) -> float:
        """One step of the LLaMA trainer's loop (no clipping); returns this rank's local loss."""
        set_learning_rate(self.optimizer, self.schedule, optimizer_step(self.optimizer))
        x, y = self.batch()
        hook = getattr(self.reducer, "overlap_backward", None) if self.overlap else None
        if hook is not None:
            with hook():
                loss, grads = self.grad_fn(x, y)
        else:
            loss, grads = self.grad_fn(x, y)
        if self.parallel_optimizer is not None:
            self.parallel_optimizer(grads)              # reduce, update its shards, gather
        else:
            if self.reducer is not None:
                grads = self.reducer(grads)
            self.optimizer(grads)
        return float(loss.asnumpy())

    def strategy(self) -> dict:
        from minispore.parallel.strategy_file import tensor_parallel_layouts
        return tensor_parallel_layouts(self.model, self.dp)


def barrier():
    from minispore.communication.comm_func import barrier as b
    b()


def save(run, ckpt_dir):
    from minispore.parallel.checkpoint_transform import training_state_dict
    from minispore.parallel.strategy_file import save_strategy_file
    r = get_rank()
    os.makedirs(Path(ckpt_dir, f"rank_{r}"), exist_ok=True)
    state = training_state_dict(run.model, run.optimizer)
    ms.save_checkpoint(state, str(Path(ckpt_dir, f"rank_{r}", f"net{r}.ckpt")))
    # the same in MindSpore's other format, which unified_safetensors merges
    ms.save_checkpoint(state, str(Path(ckpt_dir, f"rank_{r}", f"net{r}.safetensors")), format="safetensors")
    if r == 0:
        save_strategy_file(str(Path(ckpt_dir, "strategy.json")), run.strategy())
    barrier()


def load(run, ckpt_dir, how, work_dir):
    """Load the checkpoint in ckpt_dir (saved by `save` under any layout) into `run`."""
    from minispore.parallel.checkpoint_transform import (load_distributed_checkpoint, load_training_state,
                                                         transform_checkpoint_by_rank, transform_checkpoints,
                                                         unified_safetensors)
    from minispore.parallel.strategy_file import device_num_of, layouts_of, save_strategy_file
    r, n = get_rank(), get_group_size()
    src = str(Path(ckpt_dir, "strategy.json"))
    n_src = device_num_of(layouts_of(src))
    dst = str(Path(work_dir, "dst_strategy.json"))
    if r == 0 and n > 1:
        save_strategy_file(dst, run.strategy())           # what compiling the new run records
    barrier()
    dst_strategy = dst if n > 1 else None
    if how == "own":
        param_dict = ms.load_checkpoint(str(Path(ckpt_dir, f"rank_{r}", f"net{r}.ckpt")))
    elif how == "transform":
        if r == 0:
            transform_checkpoints(ckpt_dir, str(Path(work_dir, "resharded")), "net", src, dst_strategy)
        barrier()
        param_dict = ms.load_checkpoint(str(Path(work_dir, "resharded", f"rank_{r}", f"net{r}.ckpt")))
    elif how == "by_rank":
        files = {k: str(Path(ckpt_dir, f"rank_{k}", f"net{k}.ckpt")) for k in range(n_src)}
        mine = str(Path(work_dir, f"mine_{r}.ckpt"))
        transform_checkpoint_by_rank(r, files, mine, src, dst_strategy)
        param_dict = ms.load_checkpoint(mine)
    elif how in ("load", "load_without_rng"):
        files = [str(Path(ckpt_dir, f"rank_{k}", f"net{k}.ckpt")) for k in range(n_src)]
        param_dict = load_distributed_checkpoint(None, files, predict_strategy=dst_strategy,
                                                 train_strategy_filename=src, return_param_dict=True)
    elif how == "unified":
        if r == 0:
            unified_safetensors(ckpt_dir, src, str(Path(work_dir, "unified")))
        barrier()
        param_dict = load_distributed_checkpoint(None, predict_strategy=dst_strategy, format="safetensors",
                                                 unified_safetensors_dir=str(Path(work_dir, "unified")),
                                                 rank_id=r, return_param_dict=True)
    else:
        raise SystemExit(f"unknown HOW {how!r}")
    # "load_without_rng": the same load, the RNG left as this run seeded it (the control case)
    load_training_state(param_dict, run.model, run.optimizer, restore_rng=how != "load_without_rng")


def main():
    init()
    mode, tp, dp = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    r = get_rank()
    if mode == "train":
        steps, save_at, ckpt_dir, out_dir = int(sys.argv[4]), int(sys.argv[5]), sys.argv[6], sys.argv[7]
        run = Run(tp, dp)
        losses = []
        for k in range(steps):
            losses.append(run.step())
            if k + 1 == save_at:
                save(run, ckpt_dir)
        result = {"losses": losses}
    else:
        steps, ckpt_dir, out_dir, how = int(sys.argv[4]), sys.argv[5], sys.argv[6], sys.argv[7]
        options = sys.argv[8].split(",") if len(sys.argv) > 8 and sys.argv[8] else []
        # different weights and RNG: the checkpoint must replace both
        run = Run(tp, dp, seed=12345, seq_parallel="sp" in options, vocab_emb_dp="vocab_emb_dp" in options)
        load(run, ckpt_dir, how, out_dir)
        start = optimizer_step(run.optimizer)
        result = {"start_step": start, "losses": [run.step() for _ in range(steps)]}
    result.update(rank=r, tp=tp, dp=dp, dp_rank=run.dp_rank, tp_rank=run.tp_rank)
    Path(out_dir, f"rank_{r}.json").write_text(json.dumps(result))


if __name__ == "__main__":
    main()
