"""One rank of the sequence-parallel / dp x tp tests (tests/parallel/test_seq_parallel.py), run
under `mpiexec -n N`: `python sp_worker.py CASE[,CASE...] OUT_DIR` writes OUT_DIR/rank_<r>.json.

A case names a layout, `dp<D>tp<T>[_sp][_embdp][_tied][_f32]`: data_parallel D x model_parallel T
(D*T = N), `_sp` use_seq_parallel, `_embdp` vocab_emb_dp=True (else the vocabulary is split),
`_tied` tied embeddings, `_f32` float32 (else float64; tp_worker.py says why the exact
comparison is in float64). For each case every rank

* trains the single-process model on the global batch and the parallel one (each replica on its
  rows of the same global batch) for 20 AdamW steps, recording both loss curves (the parallel
  one is the data-parallel mean of the replicas' losses) and the largest difference of the
  gathered parameters from the single-process ones;
* counts one step's collectives (ops/prims/comm.py comm_bytes(): calls, payload and ring bytes
  per primitive): forward alone, forward + backward, then the gradient reducers' all-reduces;
* measures the activations the autodiff tape keeps in the norm/residual region: the tensors
  recorded by the rms_norm / add_rms_norm nodes of one forward (their inputs and outputs, the
  residual stream included: add_rms_norm's inputs are the stream and the branch output).
"""
import json
import sys
from pathlib import Path

import numpy as np

import minispore as ms
from minispore.autograd.tape import Node
from minispore.common.tensor import Parameter, Tensor
from minispore.communication import get_group_size, get_rank, init
from minispore.llm import Llama, LlamaConfig, generate_batch
from minispore.llm.config import TransformerOpParallelConfig
from minispore.llm.tensor_parallel import tensor_parallel_llama
from minispore.mint.optim import AdamW
from minispore.ops.prims import comm

STEPS = 20
NORM_PRIMS = ("rms_norm", "add_rms_norm")


def cfg(tie, **kw):
    # 8 query heads, 4 key/value heads (GQA, both divisible by 4), 30 tokens (uneven over 4 ranks)
    base = dict(vocab_size=30, dim=32, n_layers=2, n_heads=8, n_kv_heads=4, ffn_dim=32, max_seq_len=16,
                dropout=0.0, tie_embeddings=tie, init_std=0.1)
    base.update(kw)
    return LlamaConfig(**base)


def make_model(c, dtype, seed=0):
    """The same weights on every rank (same seed); norms made generic so their gradients matter."""
    ms.set_seed(seed)
    m = Llama(c)
    if dtype is not None:
        for p in m.get_parameters():
            p.set_dtype(dtype)
    rng = np.random.default_rng(seed + 100)
    for name, p in m.parameters_and_names():
        if name.endswith("norm.weight"):
            p.set_data(ms.Tensor((1.0 + 0.1 * rng.standard_normal(p.shape)).astype(p.asnumpy().dtype)))
    return m


def batches(c, steps, batch=4, seq=8, seed=5):
    """Next-token data with structure (a noisy counting sequence) so the loss really moves."""
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
    return dict(dp=int(dp), tp=int(tp), sp="sp" in parts, embdp="embdp" in parts, tied="tied" in parts,
                f32="f32" in parts)


def err(a, b):
    return float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))))


# ------------------------------------------------------------------------------------------------
def train_single(model, data):
    opt = AdamW(model.trainable_params(), lr=3e-3, weight_decay=0.1)
    grad_fn = ms.value_and_grad(model.loss, None, opt.parameters)
    losses = []
    for x, y in data:
        loss, grads = grad_fn(x, y)
        opt(grads)
        losses.append(float(loss.asnumpy()))
    return np.array(losses)


def train_parallel(model, data):
    opt = AdamW(model.trainable_params(), lr=3e-3, weight_decay=0.1)
    reducer = model.grad_reducer(opt.parameters)
    grad_fn = ms.value_and_grad(model.loss, None, opt.parameters)
    losses = []
    for x, y in data:
        loss, grads = grad_fn(model.data_parallel_batch(x), model.data_parallel_batch(y))
        opt(reducer(grads))
        losses.append(float(model.data_parallel_mean(loss).asnumpy()))
    return np.array(losses), reducer


def bucket_bytes(reducer):
    if reducer is None:
        return {"calls": 0, "bytes": 0}
    return {"calls": len(reducer.buckets), "bytes": int(sum(b.numel * b.dtype.itemsize for b in reducer.buckets))}


def one_step_traffic(model, x, y):
    """comm_bytes() of one forward (no gradient), of one forward + backward, and of the gradient
    reducers' all-reduces after it (nn.DistributedGradReducer counts its buckets as all_reduce)."""
    x, y = model.data_parallel_batch(x), model.data_parallel_batch(y)
    params = model.trainable_params()
    reducer = model.grad_reducer(params)
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


def tape_tensors(root):
    """Every node reachable from `root` on the tape, each once (iterative walk)."""
    seen, todo, nodes = set(), [root._node], []
    while todo:
        node = todo.pop()
        if not isinstance(node, Node) or id(node) in seen:
            continue
        seen.add(id(node))
        nodes.append(node)
        for t in node.inputs:
            if isinstance(t, Tensor) and t._node is not None:
                todo.append(t._node)
    return nodes


def norm_region_bytes(model, x, y):
    """Bytes of the distinct activation tensors (not parameters) held by the tape's norm nodes
    during one training step of `model.loss`, and the rows of those tensors."""
    found = {}

    def fn(a, b):
        loss = model.loss(a, b)
        tensors, names = {}, set()
        for node in tape_tensors(loss):
            if node.prim is None or node.prim.name not in NORM_PRIMS:
                continue
            names.add(node.prim.name)
            outs = node.outputs if isinstance(node.outputs, tuple) else (node.outputs,)
            for t in tuple(node.inputs) + outs:
                if isinstance(t, Tensor) and not isinstance(t, Parameter):
                    tensors[id(t)] = t
        found["bytes"] = int(sum(t._data.nbytes for t in tensors.values()))
        found["rows"] = sorted({int(t.shape[0]) for t in tensors.values()})
        found["count"] = len(tensors)
        found["prims"] = sorted(names)
        return loss

    ms.value_and_grad(fn, None, model.trainable_params())(x, y)
    return found


_REFERENCE: dict = {}


def reference(c, dtype, data):
    """The single-process run (losses, parameters, norm-region bytes), computed once per model
    config and dtype: the cases of one job share it."""
    key = (c.tie_embeddings, str(dtype))
    if key not in _REFERENCE:
        ref = make_model(c, dtype)
        norm_bytes = norm_region_bytes(ref, *data[0])
        losses = train_single(ref, data)
        _REFERENCE[key] = (losses, {name: p.asnumpy() for name, p in ref.parameters_and_names()}, norm_bytes)
    return _REFERENCE[key]


def run_case(case, n, r):
    k = parse(case)
    assert k["dp"] * k["tp"] == n, (case, n)
    dtype = None if k["f32"] else ms.float64
    c = cfg(k["tied"])
    data = batches(c, STEPS)
    pc = TransformerOpParallelConfig(data_parallel=k["dp"], model_parallel=k["tp"], use_seq_parallel=k["sp"],
                                     vocab_emb_dp=k["embdp"])
    par = tensor_parallel_llama(make_model(c, dtype), parallel_config=pc)
    shapes = {name: list(p.shape) for name, p in par.parameters_and_names()}
    forward, step, reduce = one_step_traffic(par, *data[0])
    norm_bytes = norm_region_bytes(par, par.data_parallel_batch(data[0][0]), par.data_parallel_batch(data[0][1]))
    ref_losses, ref_params, ref_norm_bytes = reference(c, dtype, data)
    par_losses, reducer = train_parallel(par, data)
    full = par.gathered_parameters()
    itemsize = 4 if k["f32"] else 8
    rows = data[0][0].shape[0] // k["dp"] * data[0][0].shape[1]       # this replica's batch*seq
    return {
        "loss_rel": float(np.max(np.abs(par_losses - ref_losses) / np.abs(ref_losses))),
        "param_err": max(err(full[name], v) for name, v in ref_params.items()),
        "same_names": sorted(full) == sorted(ref_params),
        "ref_losses": ref_losses.tolist(), "par_losses": par_losses.tolist(),
        "local_shapes": shapes, "forward": forward, "step": step, "reduce": reduce,
        "X": rows * c.dim * itemsize, "rows": rows, "itemsize": itemsize, "n_layers": c.n_layers,
        "tp_reducer": bucket_bytes(reducer.tp_reducer), "dp_reducer": bucket_bytes(reducer.dp_reducer),
        "partial_params": sorted(p.name for p in par.sequence_parallel_partial_parameters()),
        "norm_bytes": norm_bytes, "ref_norm_bytes": ref_norm_bytes,
        "groups": {"tp": par.group, "tp_rank": par.tp_rank, "dp": par.dp_group, "dp_rank": par.dp_rank},
    }


def inference(n, r):
    """A model built with use_seq_parallel=True generates with the tensor-parallel collectives:
    the single-process tokens (contiguous and paged caches)."""
    c = cfg(False, vocab_size=31)
    ref = make_model(c, None, seed=7)
    pc = TransformerOpParallelConfig(model_parallel=n, use_seq_parallel=True, vocab_emb_dp=False)
    par = tensor_parallel_llama(make_model(c, None, seed=7), parallel_config=pc)
    prompts = [[1, 2, 3, 4, 5], [9, 8], [20, 21, 22]]
    out = {}
    for kv in ("contiguous", "paged"):
        out[kv] = {"ref": [x.token_ids for x in generate_batch(ref, prompts, 6, kv_cache=kv, block_size=4)],
                   "par": [x.token_ids for x in generate_batch(par, prompts, 6, kv_cache=kv, block_size=4)]}
    return out


def main():
    init()
    n, r = get_group_size(), get_rank()
    out = {"rank": r, "size": n}
    for case in sys.argv[1].split(","):
        out[case] = inference(n, r) if case == "infer" else run_case(case, n, r)
    Path(sys.argv[2], f"rank_{r}.json").write_text(json.dumps(out))


if __name__ == "__main__":
    main()
