"""One rank of the tensor-parallel gradient-clipping tests (tests/parallel/test_tp_clip.py), run
under `mpiexec -n N`: `python tp_clip_worker.py CASE[,CASE...] OUT_DIR` writes OUT_DIR/rank_<r>.json.

A case names a layout as in sp_worker.py: `dp<D>tp<T>[_sp][_embdp][_tied]` (D*T = N; float64).
For each case every rank trains the single-process tiny LLaMA on the global batch for STEPS AdamW
steps clipped by nn.clip_by_global_norm, recording each step's global norm computed here in
NumPy float64 (the oracle, independent of minispore's norm), and the parallel model (each
replica on its rows) clipped by `TensorParallelLlama.clip_grad_norm`, recording each step's
`global_grad_norm` and, for contrast, the naive per-rank norm of this rank's gradients. CLIP is
below every step's norm, so every step is really clipped.
"""
import json
import sys
from pathlib import Path

import numpy as np

import minispore as ms
from minispore.communication import get_group_size, get_rank, init
from minispore.llm import Llama, LlamaConfig
from minispore.llm.config import TransformerOpParallelConfig
from minispore.llm.tensor_parallel import tensor_parallel_llama
from minispore.mint.optim import AdamW
from minispore.nn.clip import clip_by_global_norm

STEPS = 10
CLIP = 0.05


def cfg(tie):
    # 4 query heads, 4 key/value heads and 16 hidden units (divisible by 4); 30 tokens (uneven over 4)
    return LlamaConfig(vocab_size=30, dim=16, n_layers=1, n_heads=4, n_kv_heads=4, ffn_dim=16, max_seq_len=8,
                       dropout=0.0, tie_embeddings=tie, init_std=0.1)


def make_model(c, seed=0):
    ms.set_seed(seed)
    m = Llama(c)
    for p in m.get_parameters():
        p.set_dtype(ms.float64)
    rng = np.random.default_rng(seed + 100)
    for name, p in m.parameters_and_names():      # generic norms, so their gradients matter
        if name.endswith("norm.weight"):
            p.set_data(ms.Tensor(1.0 + 0.1 * rng.standard_normal(p.shape)))
    return m


def batches(c, steps, batch=4, seq=8, seed=5):
    g = np.random.default_rng(seed)
    out = []
    for _ in range(steps):
        start = g.integers(0, c.vocab_size, (batch, 1))
        ids = (start + np.arange(seq + 1)[None]) % c.vocab_size
        ids = np.where(g.random(ids.shape) < 0.1, g.integers(0, c.vocab_size, ids.shape), ids)
        out.append((ms.Tensor(ids[:, :-1].astype(np.int64)), ms.Tensor(ids[:, 1:].astype(np.int64))))
    return out


def parse(case):
    parts = case.split("_")
    dp, tp = parts[0][2:].split("tp")
    return dict(dp=int(dp), tp=int(tp), sp="sp" in parts, embdp="embdp" in parts, tied="tied" in parts)


def numpy_norm(grads):
    return float(np.sqrt(sum(np.sum(np.asarray(g.asnumpy(), np.float64) ** 2) for g in grads)))


def single_process(c, data):
    model = make_model(c)
    opt = AdamW(model.trainable_params(), lr=3e-3, weight_decay=0.1)
    grad_fn = ms.value_and_grad(model.loss, None, opt.parameters)
    norms = []
    for x, y in data:
        _, grads = grad_fn(x, y)
        norms.append(numpy_norm(grads))
        opt(clip_by_global_norm(grads, CLIP))
    return norms, {name: p.asnumpy() for name, p in model.parameters_and_names()}


def parallel(c, k, data):
    pc = TransformerOpParallelConfig(data_parallel=k["dp"], model_parallel=k["tp"], use_seq_parallel=k["sp"],
                                     vocab_emb_dp=k["embdp"])
    model = tensor_parallel_llama(make_model(c), parallel_config=pc)
    opt = AdamW(model.trainable_params(), lr=3e-3, weight_decay=0.1)
    reducer = model.grad_reducer(opt.parameters)
    grad_fn = ms.value_and_grad(model.loss, None, opt.parameters)
    norms, naive, dtypes = [], [], set()
    for x, y in data:
        _, grads = grad_fn(model.data_parallel_batch(x), model.data_parallel_batch(y))
        grads = reducer(grads)
        norm = model.global_grad_norm(grads, opt.parameters)
        dtypes.add(str(norm.dtype))
        norms.append(float(norm.asnumpy()))
        naive.append(numpy_norm(grads))
        opt(model.clip_grad_norm(grads, CLIP, opt.parameters))
    split = model._split_parameter_ids()
    return norms, naive, model.gathered_parameters(), {
        "dtypes": sorted(dtypes),
        "split": sorted(p.name for p in model.trainable_params() if id(p) in split),
        "replicated": sorted(p.name for p in model.trainable_params() if id(p) not in split)}


_REFERENCE = {}


def run_case(case):
    k = parse(case)
    c = cfg(k["tied"])
    data = batches(c, STEPS)
    if k["tied"] not in _REFERENCE:
        _REFERENCE[k["tied"]] = single_process(c, data)
    ref_norms, ref_params = _REFERENCE[k["tied"]]
    norms, naive, full, info = parallel(c, k, data)
    return {"ref_norms": ref_norms, "norms": norms, "naive": naive,
            "param_err": max(float(np.max(np.abs(full[n] - v))) for n, v in ref_params.items()),
            "same_names": sorted(full) == sorted(ref_params), **info}


def main():
    init()
    n, r = get_group_size(), get_rank()
    out = {"rank": r, "size": n}
    for case in sys.argv[1].split(","):
        out[case] = run_case(case)
    Path(sys.argv[2], f"rank_{r}.json").write_text(json.dumps(out))


if __name__ == "__main__":
    main()
