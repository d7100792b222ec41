"""One rank of the expert-parallel tests (tests/parallel/test_expert_parallel.py), run under
`mpiexec -n N`: `python moe_worker.py CASE[,CASE...] OUT_DIR` writes OUT_DIR/rank_<r>.json.

A case names a layout, `dp<W>ep<E>[_gather][_f32]`: W data-parallel ranks (W = N) whose MoE
experts are split over groups of E (minispore/parallel/expert_parallel.py), `_gather` without
enable_alltoall (AllGather + slice instead of AlltoAll), `_f32` float32 (else float64, where the
two runs are the same computation and agree to rounding). For each case every rank

* trains the single-process tiny MoE LLaMA on the global batch, routed in W token groups
  (`set_token_groups`: each group is one rank's rows, as the distributed run routes), and the
  expert-parallel model on its rows, 20 AdamW steps each, recording both loss curves (the
  parallel one is the world mean of the ranks' losses) and the dropped assignments of each step
  (the parallel one summed over the world);
* compares the final parameters: the replicated ones directly, the experts gathered over the
  expert-parallel group, and this rank's expert slice;
* counts one step's collectives (comm_bytes(): forward alone, forward + backward, then the
  gradient reducer) and records the capacity, so the test can check the AlltoAll formula.
"""
import json
import sys
from pathlib import Path

import numpy as np

import minispore as ms
from minispore import nn
from minispore.common import process_groups as pg
from minispore.communication import get_group_size, get_rank, init
from minispore.llm import Llama, LlamaConfig
from minispore.llm.config import TransformerOpParallelConfig
from minispore.mint.optim import AdamW
from minispore.ops.prims import comm
from minispore.parallel.expert_parallel import expert_parallel

from sp_worker import batches      # the sequence-parallel tests' noisy counting data (same seed, same rows)

STEPS = 20


def config():
    # 4 experts, top-2, capacity factor 0.75: some assignments are dropped in most steps
    return LlamaConfig(vocab_size=30, dim=16, n_layers=2, n_heads=2, ffn_dim=24, max_seq_len=16, dropout=0.0,
                       tie_embeddings=False, init_std=0.2, num_experts=4, moe_top_k=2, capacity_factor=0.75,
                       aux_loss_coef=0.05, router_z_loss_coef=0.01)


def make_model(c, dtype, seed=0):
    ms.set_seed(seed)
    m = Llama(c)
    if dtype is not None:
        for p in m.get_parameters():
            p.set_dtype(dtype)
    return m


def parse(case):
    parts = case.split("_")
    dp, ep = parts[0][2:].split("ep")
    return dict(dp=int(dp), ep=int(ep), gather="gather" in parts, f32="f32" in parts)


def err(a, b):
    return float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))))


def train_single(model, data):
    opt = AdamW(model.trainable_params(), lr=3e-3, weight_decay=0.1)
    grad_fn = ms.value_and_grad(model.loss, None, opt.parameters)
    losses, dropped = [], []
    for x, y in data:
        loss, grads = grad_fn(x, y)
        dropped.append(nn.moe_statistics(model)["dropped_tokens"])
        opt(grads)
        losses.append(float(loss.asnumpy()))
    return losses, dropped


def train_parallel(model, ep, data):
    opt = AdamW(model.trainable_params(), lr=3e-3, weight_decay=0.1)
    reducer = ep.grad_reducer(opt.parameters)
    grad_fn = ms.value_and_grad(model.loss, None, opt.parameters)
    losses, dropped = [], []
    for x, y in data:
        loss, grads = grad_fn(ep.data_parallel_batch(x), ep.data_parallel_batch(y))
        dropped.append(ep.dropped_tokens())
        opt(reducer(grads))
        losses.append(float(ep.data_parallel_mean(loss).asnumpy()))
    return losses, dropped


def one_step_traffic(model, ep, x, y):
    x, y = ep.data_parallel_batch(x), ep.data_parallel_batch(y)
    params = model.trainable_params()
    reducer = ep.grad_reducer(params)
    comm.reset_comm_bytes()
    model.loss(x, y)
    forward = comm.comm_bytes()
    comm.reset_comm_bytes()
    _, grads = ms.value_and_grad(model.loss, None, params)(x, y)
    step = comm.comm_bytes()
    comm.reset_comm_bytes()
    reducer(grads)
    reduce = comm.comm_bytes()
    comm.reset_comm_bytes()
    return forward, step, reduce


def run_case(case):
    c = parse(case)
    cfg = config()
    dtype = ms.float32 if c["f32"] else ms.float64
    data = batches(cfg, STEPS)
    world = get_group_size()

    ref = make_model(cfg, dtype)
    nn.set_token_groups(ref, world)
    ref_losses, ref_dropped = train_single(ref, data)
    ref_params = {n: p.asnumpy() for n, p in ref.parameters_and_names()}

    model = make_model(cfg, dtype)
    pc = TransformerOpParallelConfig(data_parallel=c["dp"], expert_parallel=c["ep"])
    ep = expert_parallel(model, pc, enable_alltoall=not c["gather"])
    losses, dropped = train_parallel(model, ep, data)

    expert_ids = {id(p) for p in ep.expert_parameters()}
    dense_err = max(err(p.asnumpy(), ref_params[n]) for n, p in model.parameters_and_names() if id(p) not in expert_ids)
    gathered = ep.gathered_expert_weights()
    layer = ep.layers[0]
    lo, hi = layer.expert_start, layer.expert_start + layer.local_experts
    slice_err = max(err(p.asnumpy(), ref_params[p.name][lo:hi]) for p in ep.expert_parameters())
    forward, step, reduce = one_step_traffic(model, ep, *data[0])
    n_dense = sum(p.size for p in model.trainable_params() if id(p) not in expert_ids)
    n_expert = sum(p.size for p in ep.expert_parameters())
    return {
        "losses_single": ref_losses, "losses_parallel": losses,
        "dropped_single": ref_dropped, "dropped_parallel": dropped,
        "dense_err": dense_err, "expert_err": max(err(v, ref_params[k]) for k, v in gathered.items()),
        "slice_err": slice_err, "expert_names": sorted(gathered),
        "experts": [lo, hi], "ep_rank": ep.ep_rank, "ep_group_ranks": list(pg.get(ep.ep_group).ranks),
        "replica_group": ep.replica_group,
        "capacity": [lay.capacity for lay in ep.layers], "n_layers": cfg.n_layers, "num_experts": cfg.num_experts,
        "dim": cfg.dim, "itemsize": 4 if c["f32"] else 8, "n_dense": n_dense, "n_expert": n_expert,
        "forward": forward, "step": step, "reduce": reduce,
    }


def main():
    cases, out_dir = sys.argv[1].split(","), Path(sys.argv[2])
    init()
    rank = get_rank()
    results = {case: run_case(case) for case in cases}
    (out_dir / f"rank_{rank}.json").write_text(json.dumps(results))


if __name__ == "__main__":
    main()
