"""One rank of the pipeline-parallel tests (tests/parallel/test_pipeline.py), run under
`mpiexec -n N`. `python pipeline_worker.py SCENARIO[,SCENARIO...] OUT_DIR` writes
OUT_DIR/rank_<r>.json.

Every rank also trains the single-process reference on the whole global batch (the models are
tiny): the same model from the same seed, `value_and_grad` of the mean loss, the same optimizer.
Each rank then compares its pipeline run with it: the 20 losses every rank returned, and, after
the steps, every parameter of the stage this rank runs. It also reports the peak number of saved
micro-batch tapes the executor measured, the schedule's prediction of it (nn/pipeline_schedule.py
`simulate`), and the p2p bytes one step sent (comm_bytes()["send"]) next to the count from the
chain's boundaries.

A scenario name is MODEL_SCHEDULE[_dpD]: mlp (float64), mlp32 (float32) or llama (float64, untied
head); gpipe, 1f1b or vpp2 (interleaved 1F1B, v = 2). pipeline_stages = world / D.
"""
import json
import os
import sys

import numpy as np

import minispore as ms
from minispore import nn
from minispore.communication import get_group_size, get_rank, init
from minispore.nn.pipeline_schedule import make_schedule, peak_in_flight_formula, simulate
from minispore.ops.prims import comm as comm_prims
from minispore.parallel.pipeline_llama import LlamaPipelineLoss, assign_llama_stages

STEPS = 20
GLOBAL_BATCH = 16
MICRO = 4
HIDDEN = 16


def mlp(dtype, n_chunks):
    """L = max(4, chunks) Dense layers with Tanh between; Dense k (and the Tanh after it) on chunk
    k * chunks // L, so every chunk boundary carries a (b, HIDDEN) activation."""
    ms.set_seed(7)
    n_layers = max(4, n_chunks)
    dims = [6] + [HIDDEN] * (n_layers - 1) + [3]
    cells = []
    for k in range(n_layers):
        d = nn.Dense(dims[k], dims[k + 1], dtype=dtype)
        d.pipeline_stage = k * n_chunks // n_layers
        cells.append(d)
        if k < n_layers - 1:
            cells.append(nn.Tanh())
    return nn.WithLossCell(nn.SequentialCell(cells), nn.MSELoss())


def mlp_data(step, dtype):
    g = np.random.default_rng(100 + step)
    x = g.standard_normal((GLOBAL_BATCH, 6))
    y = np.tanh(x[:, :3] * 0.7) + 0.1 * g.standard_normal((GLOBAL_BATCH, 3))
    return ms.Tensor(x, dtype=dtype), ms.Tensor(y, dtype=dtype)


def llama(n_chunks):
    from minispore.llm.config import LlamaConfig
    from minispore.llm.model import Llama
    ms.set_seed(5)
    model = Llama(LlamaConfig(vocab_size=16, dim=HIDDEN, n_layers=max(2, n_chunks), n_heads=2, n_kv_heads=1,
                              max_seq_len=8, multiple_of=8, tie_embeddings=False), attention="naive")
    for p in model.trainable_params():
        p.set_dtype(ms.float64)
    assign_llama_stages(model, n_chunks)
    return LlamaPipelineLoss(model)


def llama_data(step, dtype=None):
    g = np.random.default_rng(200)          # one batch every step: the model memorises it
    tokens = g.integers(0, 16, (GLOBAL_BATCH // 2, 8))
    targets = np.roll(tokens, -1, axis=1)
    return ms.Tensor(tokens, dtype=ms.int32), ms.Tensor(targets, dtype=ms.int32)


def optimizer(kind, params):
    # Momentum is linear in the gradient, so the pipeline's different summation order stays at
    # rounding level in the weights (AdamW divides by sqrt(v): near-zero gradients' last bits
    # are amplified, the LLaMA's weights then agree to ~5e-11 after 20 steps, the losses to 1e-15)
    return nn.Momentum(params, 0.1 if kind == "llama" else 0.05, 0.9)


def parse(name, world):
    parts = name.split("_")
    model, sched = parts[0], parts[1]
    dp = int(parts[2][2:]) if len(parts) > 2 else 1
    p = world // dp
    v = 2 if sched == "vpp2" else 1
    return model, ("1f1b" if sched == "vpp2" else sched), v, p, dp


def build(model, n_chunks):
    if model == "llama":
        return llama(n_chunks), llama_data, ms.float64
    dtype = ms.float32 if model == "mlp32" else ms.float64
    return mlp(dtype, n_chunks), mlp_data, dtype


def reference(model, n_chunks):
    """Single-process training on the global batch: the losses and the final parameters."""
    ms.reset_auto_parallel_context()
    net, data, dtype = build(model, n_chunks)
    opt = optimizer(model, net.trainable_params())
    grad_fn = ms.value_and_grad(net, None, opt.parameters)
    losses = []
    for step in range(STEPS):
        loss, grads = grad_fn(*data(step, dtype))
        opt(grads)
        losses.append(float(loss.asnumpy()))
    return losses, {p.name: p.asnumpy().copy() for p in net.trainable_params()}


def boundary_bytes(model, micro_rows, dtype):
    """Bytes of one activation crossing a stage boundary: b x hidden (MLP) or b*seq x dim (LLaMA)."""
    itemsize = np.dtype(dtype.np).itemsize
    if model == "llama":
        return micro_rows * 8 * HIDDEN * itemsize
    return micro_rows * HIDDEN * itemsize


def scenario(name):
    world, rank = get_group_size(), get_rank()
    model, sched, v, p, dp = parse(name, world)
    n_chunks = p * v
    ref_losses, ref_params = reference(model, n_chunks)

    ms.reset_auto_parallel_context()
    ms.set_auto_parallel_context(pipeline_stages=p, pipeline_config={"pipeline_scheduler": sched,
                                                                     "pipeline_interleave": v > 1})
    net, data, dtype = build(model, n_chunks)
    pipe = nn.PipelineCell(net, MICRO)
    opt = optimizer(model, net.trainable_params())
    reducer = nn.PipelineGradReducer(opt.parameters)
    grad_fn = ms.value_and_grad(pipe, None, opt.parameters)
    replica, device = rank % dp, rank // dp
    losses, sent = [], []
    for step in range(STEPS):
        inputs = data(step, dtype)
        rows = inputs[0].shape[0] // dp
        local = tuple(ms.Tensor(x.asnumpy()[replica * rows:(replica + 1) * rows], dtype=x.dtype) for x in inputs)
        comm_prims.reset_comm_bytes()
        loss, grads = grad_fn(*local)
        sent.append(comm_prims.comm_bytes().get("send", {}).get("payload", 0))
        opt(reducer(grads))
        losses.append(float(loss.asnumpy()))
    train_step = pipe.last_step
    # eval: a forward-only call (no gradient taken) returns the same global loss as one process
    eval_loss = float(pipe(*tuple(ms.Tensor(x.asnumpy()[replica * rows:(replica + 1) * rows], dtype=x.dtype)
                                  for x in data(0, dtype))).asnumpy())
    ref_net, _, _ = build(model, n_chunks)
    for prm in ref_net.trainable_params():
        prm.set_data(ms.Tensor(ref_params[prm.name]))
    ref_eval = float(ref_net(*data(0, dtype)).asnumpy())

    mine = pipe.stage_parameters()
    param_err = max(float(np.max(np.abs(prm.asnumpy() - ref_params[prm.name]))) for prm in mine)
    loss_rel = max(abs(a - b) / abs(b) for a, b in zip(losses, ref_losses))
    schedule = make_schedule(sched, p, MICRO, v)
    predicted_peak = simulate(schedule).peak_in_flight[device]
    chunks = [c for c in range(n_chunks) if c % p == device]
    messages = MICRO * (sum(1 for c in chunks if c < n_chunks - 1) + sum(1 for c in chunks if c > 0))
    micro_rows = GLOBAL_BATCH // dp // MICRO if model != "llama" else GLOBAL_BATCH // 2 // dp // MICRO
    return {
        "loss_rel": loss_rel, "param_err": param_err, "n_local_params": len(mine),
        "first_loss": losses[0], "last_loss": losses[-1], "losses": losses,
        "eval_rel": abs(eval_loss - ref_eval) / abs(ref_eval),
        "peak_measured": train_step["peak_in_flight"], "peak_predicted": predicted_peak,
        "peak_formula": peak_in_flight_formula(sched, p, MICRO, device, v),
        "p2p_bytes_steps": sorted(set(sent[1:])), "p2p_bytes_expected": messages * boundary_bytes(model, micro_rows,
                                                                                                   dtype),
        "p2p_counted": train_step["p2p_bytes"], "device": device, "replica": replica, "stages": p, "dp": dp,
        "timeline": train_step["timeline"],
    }


def refusals():
    """The checks that need a real pipeline (pipeline_stages=2 on 2 ranks): each message."""
    from minispore.common.errors import MinisporeError
    out = {}

    def expect(key, fn):
        try:
            fn()
            out[key] = None
        except MinisporeError as e:
            out[key] = f"{type(e).__name__}: {e}"

    ms.reset_auto_parallel_context()
    ms.set_auto_parallel_context(pipeline_stages=2, pipeline_config={"pipeline_interleave": True})
    expect("interleave_m", lambda: nn.PipelineCell(mlp(ms.float64, 4), 3))        # m=3, p=2
    ms.set_auto_parallel_context(pipeline_config={"pipeline_interleave": False})
    expect("stage_range", lambda: nn.PipelineCell(mlp(ms.float64, 4), 4))         # stages 0..3 > p=2
    pipe = nn.PipelineCell(mlp(ms.float64, 2), 4)
    x, y = mlp_data(0, ms.float64)
    expect("split", lambda: pipe(x[:6], y[:6]))                                   # 6 rows, 4 micro-batches
    return out


def main():
    names, out_dir = sys.argv[1].split(","), sys.argv[2]
    init()
    results = {name: (refusals() if name == "refusals" else scenario(name)) for name in names}
    with open(os.path.join(out_dir, f"rank_{get_rank()}.json"), "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main()
