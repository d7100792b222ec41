"""One rank of the optimizer-parallel (ZeRO) tests (tests/parallel/test_zero.py), run under
`mpiexec -n N`. `python zero_worker.py SCENARIO[,SCENARIO...] OUT_DIR` writes OUT_DIR/rank_<r>.json.

Every rank also runs the single-process reference on the whole global batch (the models are
tiny), so each rank compares its ZeRO run with it: the 20 losses (the global loss of a ZeRO step
is the mean of the ranks' local losses) and every parameter after the steps. float64 runs make
"equal" mean ~1e-13 (the only difference is the order of the gradient sum across ranks);
float32 runs are checked at 1e-5.
"""
import contextlib
import json
import os
import sys

import numpy as np

import minispore as ms
from minispore import mint, nn
from minispore.communication import get_group_size, get_rank, init
from minispore.ops.prims import comm as comm_prims

STEPS = 20
LOCAL_BATCH = 4
LEVELS = ("level1", "level2", "level3")


def make_data(n_rows, seed=1):
    g = np.random.default_rng(seed)
    x = g.standard_normal((n_rows, 6))
    w = g.standard_normal((6, 3))
    y = np.tanh(x @ w) + 0.1 * g.standard_normal((n_rows, 3))
    return x, y


def mlp(dtype, opt_out=False):
    ms.set_seed(7)
    net = nn.SequentialCell([nn.Dense(6, 16, dtype=dtype), nn.Tanh(), nn.Dense(16, 15, dtype=dtype), nn.Tanh(),
                             nn.Dense(15, 3, dtype=dtype)])
    if opt_out:
        net[2].weight.parallel_optimizer = False
    return nn.WithLossCell(net, nn.MSELoss())


class TinyLlamaLoss(nn.Cell):
    """A one-layer LLaMA (GQA, RoPE, SwiGLU) returning its mean next-token cross-entropy."""

    def __init__(self, dtype, tie_embeddings=True):
        super().__init__()
        from minispore.llm.config import LlamaConfig
        from minispore.llm.model import Llama
        ms.set_seed(5)
        self.model = Llama(LlamaConfig(vocab_size=16, dim=16, n_layers=1, n_heads=2, n_kv_heads=1,
                                       max_seq_len=8, multiple_of=8, tie_embeddings=tie_embeddings))
        for p in self.model.trainable_params():
            p.set_dtype(dtype)

    def construct(self, tokens, targets):
        return self.model.loss(tokens, targets)


def make_optimizer(kind, params):
    if kind == "adamw":
        return nn.AdamWeightDecay(params, 0.01, weight_decay=0.1)
    if kind == "momentum":
        return nn.Momentum(params, 0.05, 0.9)
    if kind == "mint_adamw":           # what minispore.llm's trainer uses: decay on matrices only
        decay = [p for p in params if p.ndim >= 2]
        rest = [p for p in params if p.ndim < 2]
        return mint.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
                                lr=0.01, betas=(0.9, 0.99))
    raise ValueError(kind)


def context(level, threshold=0, fusion=None):
    ms.reset_auto_parallel_context()
    if level is not None:
        ms.set_auto_parallel_context(parallel_mode="data_parallel", gradients_mean=True,
                                     enable_parallel_optimizer=True,
                                     parallel_optimizer_config={"optimizer_level": level,
                                                                "parallel_optimizer_threshold": threshold})
        if fusion is not None:
            ms.set_auto_parallel_context(comm_fusion=fusion)


def batches(data, n, rank, local):
    """The STEPS batches of this rank (local=True: its LOCAL_BATCH rows of each global batch)."""
    rows = LOCAL_BATCH * n
    total = data[0].shape[0]
    for k in range(STEPS):
        lo = (k * rows) % total
        if local:
            lo += rank * LOCAL_BATCH
            yield tuple(ms.Tensor(a[lo:lo + LOCAL_BATCH]) for a in data)
        else:
            yield tuple(ms.Tensor(a[lo:lo + rows]) for a in data)


def train(make_net, kind, data, n, rank, level, threshold=0, fusion=None):
    """STEPS TrainOneStepCell steps; ZeRO at `level` (None: one process on the global batch)."""
    context(level, threshold, fusion)
    net = make_net()
    params = net.trainable_params()
    step = nn.TrainOneStepCell(net, make_optimizer(kind, params))
    losses = [float(step(*b).asnumpy()) for b in batches(data, n, rank, local=level is not None)]
    zero = step.parallel_optimizer
    if zero is not None:
        zero.gather_parameters()          # level3: the weights are shards between steps
    ms.reset_auto_parallel_context()
    return losses, [p.asnumpy().copy() for p in params], step


def compare(comm, make_net, kind, data, n, rank, level, threshold=0, fusion=None):
    ref_losses, ref_params, ref_step = train(make_net, kind, data, n, rank, None)
    losses, got, step = train(make_net, kind, data, n, rank, level, threshold, fusion)
    global_losses = np.mean(comm.allgather(np.array(losses)), axis=0)
    replicas = comm.allgather(got)
    ref_state = {q.name: q.asnumpy() for _, q in ref_step.optimizer.parameters_and_names()}
    full = step.parallel_optimizer.full_state_dict()
    state_err = max(float(np.max(np.abs(np.asarray(v, np.float64) - ref_state[k]))) for k, v in full.items())
    return {"loss_rel": float(np.max(np.abs(global_losses - ref_losses) / np.abs(ref_losses))),
            "param_err": float(max(np.max(np.abs(a - b)) for a, b in zip(got, ref_params))),
            "replica_err": float(max(np.max(np.abs(a - b)) for r in replicas for a, b in zip(r, got))),
            "state_err": state_err, "state_names": sorted(full) == sorted(ref_state),
            "first_loss": ref_losses[0], "last_loss": ref_losses[-1],
            "sharded": step.parallel_optimizer.sharded_parameters(),
            "memory": step.parallel_optimizer.memory_report()}


def direct_step(comm, n, rank, level, explicit):
    """A hand-written step on the tiny LLaMA: `value_and_grad(model.loss)` (a method: Llama's own
    hook does not run, and hidden_to_logits reads output.weight itself), inside `zero.gathered()`
    when `explicit` (else the embedding's pre-hook starts the step), then the ZeRO update -
    against the same loop on one process on the global batch."""
    from minispore.nn.optim.parallel_optimizer import ParallelOptimizer
    data = llama_data(n)

    def run(zero_level):
        ms.reset_auto_parallel_context()
        model = TinyLlamaLoss(ms.float64, tie_embeddings=False).model   # its own output head
        opt = make_optimizer("mint_adamw", model.trainable_params())
        grad_fn = ms.value_and_grad(model.loss, None, opt.parameters)
        zero = None if zero_level is None else ParallelOptimizer(opt, network=model, level=zero_level, mean=True,
                                                                 threshold=0,
                                                                 degree=n)
        losses, shapes_between = [], None
        for x, y in batches(data, n, rank, local=zero is not None):
            if zero is None:
                loss, grads = grad_fn(x, y)
                opt(grads)
            else:
                with zero.gathered() if explicit else contextlib.nullcontext():
                    loss, grads = grad_fn(x, y)
                zero(grads)
                shapes_between = [list(p.shape) for p in model.trainable_params()]
            losses.append(float(loss.asnumpy()))
        if zero is not None:
            zero.gather_parameters()
        return losses, [p.asnumpy().copy() for p in model.trainable_params()], shapes_between, zero

    ref_losses, ref_params, _, _ = run(None)
    losses, got, between, zero = run(level)
    global_losses = np.mean(comm.allgather(np.array(losses)), axis=0)
    replicas = comm.allgather(got)
    return {"loss_rel": float(np.max(np.abs(global_losses - ref_losses) / np.abs(ref_losses))),
            "param_err": float(max(np.max(np.abs(a - b)) for a, b in zip(got, ref_params))),
            "replica_err": float(max(np.max(np.abs(a - b)) for r in replicas for a, b in zip(r, got))),
            "first_loss": ref_losses[0], "last_loss": ref_losses[-1],
            "shapes_between": between, "full_shapes": [list(p.shape) for p in ref_params],
            "sharded": zero.sharded_parameters()}


def overlap_step(comm, n, rank, level, rescale):
    """Hand-written steps on the float64 MLP with the reduce-scatter buckets started during
    backward (`zero.overlap_backward()`, one bucket per parameter): equal to the same buckets
    reduced after backward, and to one process. `rescale`: the gradients are halved between
    backward and the update, so every bucket started during backward must be redone."""
    from minispore.nn.optim.parallel_optimizer import ParallelOptimizer
    data = make_data(LOCAL_BATCH * n * 5)

    def run(zero_level, overlap):
        ms.reset_auto_parallel_context()
        net = mlp(ms.float64)
        opt = make_optimizer("adamw", net.trainable_params())
        grad_fn = ms.value_and_grad(net, None, opt.parameters)
        zero = None if zero_level is None else ParallelOptimizer(opt, network=net, level=zero_level, mean=True,
                                                                 degree=n, threshold=0, bucket_mb=1e-4)
        started, calls = [], []
        for x, y in batches(data, n, rank, local=zero is not None):
            if zero is None:
                _, grads = grad_fn(x, y)
                opt(tuple(g * 0.5 for g in grads) if rescale else grads)
                continue
            comm_prims.reset_comm_bytes()
            with zero.gathered(), (zero.overlap_backward() if overlap else contextlib.nullcontext()):
                _, grads = grad_fn(x, y)
            started.append(comm_prims.comm_bytes().get("reduce_scatter", {}).get("calls", 0))
            zero(tuple(g * 0.5 for g in grads) if rescale else grads)
            calls.append(comm_prims.comm_bytes()["reduce_scatter"]["calls"])
        if zero is not None:
            zero.gather_parameters()
        return [p.asnumpy().copy() for p in net.trainable_params()], started, calls, zero

    ref, _, _, _ = run(None, False)
    blocking, _, _, _ = run(level, False)
    got, started, calls, zero = run(level, True)
    return {"vs_blocking": float(max(np.max(np.abs(a - b)) for a, b in zip(got, blocking))),
            "param_err": float(max(np.max(np.abs(a - b)) for a, b in zip(got, ref))),
            "buckets": [[s.param.name for s in b] for b in zero.buckets],
            "started_in_backward": started, "calls": calls}


def fused_train_step(comm, n, rank, level):
    """TrainOneStepCell with comm_fusion's "reducescatter" buckets of 1e-4 MB (about one per
    parameter): equal to one process, and how many reduce-scatters had started before the
    ParallelOptimizer's own update began (i.e. during backward), per step."""
    from minispore.nn.optim.parallel_optimizer import ParallelOptimizer
    plain = ParallelOptimizer.construct
    started = []

    def spy(self, grads):
        started.append(comm_prims.comm_bytes().get("reduce_scatter", {}).get("calls", 0))
        comm_prims.reset_comm_bytes()
        return plain(self, grads)

    ParallelOptimizer.construct = spy
    try:
        comm_prims.reset_comm_bytes()
        res = compare(comm, lambda: mlp(ms.float64), "adamw", make_data(LOCAL_BATCH * n * 5), n, rank, level,
                      fusion={"reducescatter": {"mode": "size", "config": 1e-4}})
    finally:
        ParallelOptimizer.construct = plain
    res["started_in_backward"] = started[1:]        # the first step's count includes setup traffic
    return res


def llama_data(n):
    g = np.random.default_rng(4)
    tokens = g.integers(0, 16, (LOCAL_BATCH * n * 5, 9)).astype(np.int32)
    return tokens[:, :-1], tokens[:, 1:]


def memory_and_comm(n, rank, level):
    """fp32 AdamWeightDecay on the MLP: the per-rank memory report and one step's comm bytes."""
    x, y = make_data(LOCAL_BATCH * n * 5)
    data = (x.astype(np.float32), y.astype(np.float32))
    context(level)
    net = mlp(ms.float32)
    params = net.trainable_params()
    numels = [int(p.size) for p in params]          # (level3 stores them sharded once the cell exists)
    step = nn.TrainOneStepCell(net, make_optimizer("adamw", params))
    it = batches(data, n, rank, local=True)
    step(*next(it))
    comm_prims.reset_comm_bytes()
    step(*next(it))
    traffic = comm_prims.comm_bytes()
    report = step.parallel_optimizer.memory_report()
    state_shapes = {q.name: list(q.shape) for _, q in step.optimizer.parameters_and_names()}
    ms.reset_auto_parallel_context()
    return {"memory": report, "comm": traffic, "numels": numels,
            "state_shapes": state_shapes, "param_shapes": [list(p.shape) for p in params]}


def checkpoint_resume(comm, n, rank, level, folder):
    """10 steps, save this rank's checkpoint, 10 more; a fresh run loads it and its 10 steps
    must give exactly the same losses and parameters."""
    x, y = make_data(LOCAL_BATCH * n * 5)
    data = (x, y)
    all_batches = list(batches(data, n, rank, local=True))
    path = os.path.join(folder, f"zero_{level}_rank_{rank}.ckpt")

    def fresh():
        context(level)
        net = mlp(ms.float64)
        return net, nn.TrainOneStepCell(net, make_optimizer("adamw", net.trainable_params()))

    net, step = fresh()
    for b in all_batches[:10]:
        step(*b)
    ms.save_checkpoint(step, path, append_dict=step.parallel_optimizer.checkpoint_info())
    first = [float(step(*b).asnumpy()) for b in all_batches[10:]]
    step.parallel_optimizer.gather_parameters()
    first_params = [p.asnumpy().copy() for p in net.trainable_params()]
    net2, step2 = fresh()
    param_dict = ms.load_checkpoint(path)
    step2.parallel_optimizer.check_checkpoint(param_dict)
    not_loaded = ms.load_param_into_net(step2, param_dict)
    second = [float(step2(*b).asnumpy()) for b in all_batches[10:]]
    step2.parallel_optimizer.gather_parameters()
    second_params = [p.asnumpy().copy() for p in net2.trainable_params()]
    saved_shapes = {k: list(v.shape) for k, v in param_dict.items() if hasattr(v, "shape")}
    ms.reset_auto_parallel_context()
    return {"loss_diff": float(np.max(np.abs(np.array(first) - np.array(second)))),
            "param_diff": float(max(np.max(np.abs(a - b)) for a, b in zip(first_params, second_params))),
            "not_loaded": [list(x) for x in not_loaded] if not_loaded else [], "saved_shapes": saved_shapes,
            "strategy": json.loads(str(param_dict["parallel_optimizer_strategy"]))}


def model_train(comm, n, rank, level):
    """Model.train with ZeRO (it comes in through TrainOneStepCell) against one process."""
    x, y = make_data(LOCAL_BATCH * n * 5)

    def run(zero_level):
        context(zero_level)
        net = mlp(ms.float64)._backbone
        model = ms.Model(net, nn.MSELoss(), make_optimizer("adamw", net.trainable_params()))
        kw = {} if zero_level is None else {"num_shards": n, "shard_id": rank}
        ds = ms.dataset.NumpySlicesDataset((x, y), ["x", "y"], shuffle=False, **kw)
        ds = ds.batch(LOCAL_BATCH if zero_level else LOCAL_BATCH * n, drop_remainder=True)
        model.train(2, ds)
        zero = model.train_network.parallel_optimizer
        kind = type(zero).__name__
        if zero is not None:
            zero.gather_parameters()
        ms.reset_auto_parallel_context()
        return [p.asnumpy().copy() for p in net.trainable_params()], kind
    ref, _ = run(None)
    got, kind = run(level)
    return {"param_err": float(max(np.max(np.abs(a - b)) for a, b in zip(got, ref))), "kind": kind}


def main():
    init()
    rank, n = get_rank(), get_group_size()
    comm = ms.common.process_groups.world().comm
    scenarios = sys.argv[1].split(",")
    out = {"rank": rank, "size": n}
    x, y = make_data(LOCAL_BATCH * n * 5)           # 5 global batches, cycled over the 20 steps
    f64 = (x, y)
    f32 = (x.astype(np.float32), y.astype(np.float32))
    for level in LEVELS:
        if "mlp" in scenarios:
            out[f"mlp_adamw_{level}"] = compare(comm, lambda: mlp(ms.float64), "adamw", f64, n, rank, level)
            out[f"mlp_momentum_{level}"] = compare(comm, lambda: mlp(ms.float64), "momentum", f64, n, rank, level)
        if "mlp32" in scenarios:
            out[f"mlp32_adamw_{level}"] = compare(comm, lambda: mlp(ms.float32), "adamw", f32, n, rank, level)
        if "llama" in scenarios:
            out[f"llama_{level}"] = compare(comm, lambda: TinyLlamaLoss(ms.float64), "mint_adamw", llama_data(n),
                                            n, rank, level)
        if "memory" in scenarios:
            out[f"memory_{level}"] = memory_and_comm(n, rank, level)
        if "optout" in scenarios:
            # fc2.weight opts out; the biases (16*8=128 B, 15*8=120 B, 3*8=24 B) are under 0.2 KB
            out[f"optout_{level}"] = compare(comm, lambda: mlp(ms.float64, opt_out=True), "adamw", f64, n, rank,
                                             level, threshold=0.2)
        if "ckpt" in scenarios:
            folder = sys.argv[2]
            out[f"ckpt_{level}"] = checkpoint_resume(comm, n, rank, level, folder)
        if "model" in scenarios:
            out[f"model_{level}"] = model_train(comm, n, rank, level)
        if "overlap" in scenarios and level != "level1":
            out[f"overlap_{level}"] = overlap_step(comm, n, rank, level, rescale=False)
            out[f"overlap_rescaled_{level}"] = overlap_step(comm, n, rank, level, rescale=True)
        if "fused" in scenarios and level != "level1":
            out[f"fused_{level}"] = fused_train_step(comm, n, rank, level)
        if "direct" in scenarios:
            out[f"direct_{level}"] = direct_step(comm, n, rank, level, explicit=False)
            out[f"direct_gathered_{level}"] = direct_step(comm, n, rank, level, explicit=True)
    if "graph" in scenarios:        # GRAPH_MODE: the ParallelOptimizer runs as a host call after the graph
        ms.set_context(mode=ms.GRAPH_MODE)
        try:
            for level in ("level1", "level2"):
                out[f"graph_{level}"] = compare(comm, lambda: mlp(ms.float64), "adamw", f64, n, rank, level)
        finally:
            ms.set_context(mode=ms.PYNATIVE_MODE)
    with open(os.path.join(sys.argv[2], f"rank_{rank}.json"), "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
