"""One rank of the fine-grained multi-copy tests (tests/parallel/test_multi_copy.py), run under
`mpiexec -n N`: `python multi_copy_worker.py CASE[,CASE...] OUT_DIR` writes OUT_DIR/rank_<r>.json.

A case names a layout, `dp<D>tp<T>_fgi<C>[_embdp_tied][_odd]`: data_parallel D x model_parallel T
(D*T = N) with use_seq_parallel and fine_grain_interleave = C; `_embdp_tied` a replicated, tied
embedding (else the vocabulary is split and the head untied); `_odd` a batch of 3 sequences of 6
positions, so this rank's rows do not cut into equal copies (else 4 x 8). float64 throughout. Every
rank, for each case:

* the decoder stack alone: the multi-copy stack's output and its gradients (input and every layer
  parameter, for a random cotangent) against the one-copy sequence-parallel layers
  (`sequence_parallel_forward`, the part-A code path) on the same input rows;
* the whole model: `loss` and the raw gradient of every parameter, multi-copy vs one copy;
* one step's collectives (comm_bytes(): calls and payload per primitive) for both;
* 20 AdamW steps against the single-process model on the same global batch (losses, gathered
  parameters);
* the timeline of one training step (multi_copy.record_timeline) and the sequence of collectives
  this rank posted, for the schedule-structure tests.
"""
import json
import sys
from pathlib import Path

import numpy as np

import minispore as ms
from minispore.common.tensor import from_numpy
from minispore.communication import get_group_size, get_rank, init
from minispore.llm import LlamaConfig
from minispore.llm.config import TransformerOpParallelConfig
from minispore.llm.tensor_parallel import tensor_parallel_llama
from minispore.mint.optim import AdamW
from minispore.ops import functional as F
from minispore.ops.prims import comm
from minispore.parallel import multi_copy

from sp_worker import batches          # the sequence-parallel tests' noisy counting data
from tp_clip_worker import make_model  # float64 weights, generic norms (same on every rank)

STEPS = 20


def cfg(tie):
    # 8 query heads, 4 key/value heads (GQA, both divisible by 4), 30 tokens (uneven over 4 ranks)
    return LlamaConfig(vocab_size=30, dim=32, n_layers=2, n_heads=8, n_kv_heads=4, ffn_dim=32, max_seq_len=16,
                       dropout=0.0, tie_embeddings=tie, init_std=0.1)


def parse(case):
    parts = case.split("_")
    dp, tp = parts[0][2:].split("tp")
    return dict(dp=int(dp), tp=int(tp), copies=int(parts[1][3:]), embdp="embdp" in parts, odd="odd" in parts)


def rel_err(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))


def parallel(c, k, copies):
    pc = TransformerOpParallelConfig(data_parallel=k["dp"], model_parallel=k["tp"], use_seq_parallel=True,
                                     vocab_emb_dp=k["embdp"], fine_grain_interleave=copies)
    return tensor_parallel_llama(make_model(c), parallel_config=pc)


def decoder_stack(one, many, batch, seq):
    """The multi-copy stack vs the one-copy layers on the same random rows of this rank's chunk:
    relative errors of the output and of the gradients (input, every layer parameter)."""
    rows = batch * seq // one.tp_size
    rng = np.random.default_rng(11 + one.tp_rank + 10 * one.dp_rank)
    x = ms.Tensor(rng.standard_normal((rows, one.config.dim)))
    w = ms.Tensor(rng.standard_normal((rows, one.config.dim)))
    cos, sin, cos_q, sin_q = one._constants(np.float64)
    rope_q = (from_numpy(cos_q[:seq]), from_numpy(sin_q[:seq]))
    rope_k = (from_numpy(cos[:seq]), from_numpy(sin[:seq]))

    def loop(h):
        for layer in one.layers:
            h = layer.sequence_parallel_forward(h, batch, rope_q, rope_k)
        return h

    def copies(h):
        return many.multi_copy(h, batch, rope_q, rope_k)

    p_one = [p for layer in one.layers for p in layer.trainable_params()]
    p_many = [p for layer in many.layers for p in layer.trainable_params()]
    out_one, out_many = loop(x), copies(x)
    (g_one, pg_one) = ms.grad(lambda h: F.sum(loop(h) * w), 0, p_one)(x)
    (g_many, pg_many) = ms.grad(lambda h: F.sum(copies(h) * w), 0, p_many)(x)
    return {"out": rel_err(out_many.asnumpy(), out_one.asnumpy()),
            "d_input": rel_err(g_many.asnumpy(), g_one.asnumpy()),
            "d_params": {p.name: rel_err(a.asnumpy(), b.asnumpy()) for p, a, b in zip(p_one, pg_many, pg_one)},
            "n_params": len(p_one)}


def one_step_traffic(model, x, y):
    comm.reset_comm_bytes()
    ms.value_and_grad(model.loss, None, model.trainable_params())(x, y)
    out = {k: {"calls": v["calls"], "payload": v["payload"]} for k, v in comm.comm_bytes().items()}
    comm.reset_comm_bytes()
    return out


def train(model, data, dp):
    opt = AdamW(model.trainable_params(), lr=3e-3, weight_decay=0.1)
    reducer = model.grad_reducer(opt.parameters) if dp is not None else None
    grad_fn = ms.value_and_grad(model.loss, None, opt.parameters)
    losses = []
    for x, y in data:
        if dp is None:
            loss, grads = grad_fn(x, y)
            opt(grads)
            losses.append(float(loss.asnumpy()))
        else:
            loss, grads = grad_fn(model.data_parallel_batch(x), model.data_parallel_batch(y))
            opt(reducer(grads))
            losses.append(float(model.data_parallel_mean(loss).asnumpy()))
    return np.array(losses)


def run_case(case, n):
    k = parse(case)
    assert k["dp"] * k["tp"] == n, (case, n)
    c = cfg(k["embdp"])
    batch, seq = (3, 6) if k["odd"] else (4, 8)
    batch *= k["dp"]                                             # the global batch: `batch` rows per replica
    data = batches(c, STEPS, batch, seq)
    one, many = parallel(c, k, 1), parallel(c, k, k["copies"])
    x, y = one.data_parallel_batch(data[0][0]), one.data_parallel_batch(data[0][1])
    stack = decoder_stack(one, many, batch // k["dp"], seq)
    l1, g1 = ms.value_and_grad(one.loss, None, one.trainable_params())(x, y)
    l2, g2 = ms.value_and_grad(many.loss, None, many.trainable_params())(x, y)
    names = [p.name for p in one.trainable_params()]
    traffic = {"one": one_step_traffic(one, x, y), "many": one_step_traffic(many, x, y)}
    with multi_copy.record_timeline():
        ms.value_and_grad(many.loss, None, many.trainable_params())(x, y)
    events = multi_copy.timeline()
    ref = make_model(c)
    ref_losses = train(ref, data, None)
    par_losses = train(many, data, k["dp"])
    full = many.gathered_parameters()
    ref_params = {name: p.asnumpy() for name, p in ref.parameters_and_names()}
    return {
        "stack": stack,
        "loss": rel_err(l2.asnumpy(), l1.asnumpy()),
        "grads": {name: rel_err(a.asnumpy(), b.asnumpy()) for name, a, b in zip(names, g2, g1)},
        "n_grads": len(names),
        "traffic": traffic, "n_layers": c.n_layers, "copies": k["copies"], "vocab_split": not k["embdp"],
        "timeline": events,
        "posted": [[e["phase"], e["name"], e["layer"], e["copy"]] for e in sorted(
            (e for e in events if e["stream"] == "comm"), key=lambda e: e["start"])],
        "overlap": {ph: multi_copy.overlap_fraction(events, ph) for ph in ("forward", "backward")},
        "ref_losses": ref_losses.tolist(), "par_losses": par_losses.tolist(),
        "loss_rel": float(np.max(np.abs(par_losses - ref_losses) / np.abs(ref_losses))),
        "param_err": max(rel_err(full[name], v) for name, v in ref_params.items()),
        "same_names": sorted(full) == sorted(ref_params),
    }


def main():
    init()
    n, r = get_group_size(), get_rank()
    out = {"rank": r, "size": n}
    for case in sys.argv[1].split(","):
        out[case] = run_case(case, n)
    Path(sys.argv[2], f"rank_{r}.json").write_text(json.dumps(out))


if __name__ == "__main__":
    main()
