"""One rank of the Megatron-style tensor-parallel tests (tests/parallel/test_megatron_tp.py), run
under `mpiexec -n N`: `python tp_worker.py SCENARIO[,SCENARIO...] OUT_DIR` writes
OUT_DIR/rank_<r>.json. Every rank also runs the single-process reference (the models are tiny),
so each rank compares its slice of the parallel run with the whole single-process run; the
pytest side asserts on the numbers.

Why float64 for the training comparison: a row-parallel layer sums its partial products across
ranks in another order than one GEMM does, so float32 runs differ by ~1e-7 relative per step, and
Adam divides by sqrt(v) (small gradients' rounding is amplified in the update); over 20 steps
that noise would hide a real mistake (a doubled gradient from a wrong backward, a wrong slice)
inside a loose tolerance. In float64 the runs agree to ~1e-13, so "within 1e-5" means "the same
computation". The float32 figures are recorded too (the report quotes them).
"""
import json
import sys
from pathlib import Path

import numpy as np

import minispore as ms
from minispore import nn
from minispore.common.errors import OpValueError
from minispore.communication import get_group_size, get_rank, init
from minispore.llm import Llama, LlamaConfig, generate_batch
from minispore.llm.tensor_parallel import tensor_parallel_llama
from minispore.mint.optim import AdamW
from minispore.ops import functional as F
from minispore.parallel.megatron import (ColumnParallelDense, RowParallelDense, VocabParallelEmbedding,
                                         vocab_parallel_cross_entropy)

STEPS = 20
F64 = ms.float64


def cfg(tie, **kw):
    base = dict(vocab_size=64, dim=64, n_layers=2, n_heads=8, n_kv_heads=4, ffn_dim=96, max_seq_len=16,
                multiple_of=32, dropout=0.0, tie_embeddings=tie, init_std=0.1)
    base.update(kw)
    return LlamaConfig(**base)


def make_model(c, dtype=None, seed=0):
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


def block(a, axis, n, r):
    k = a.shape[axis] // n
    return np.take(a, np.arange(r * k, (r + 1) * k), axis=axis)


def err(a, b):
    return float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))))


# ------------------------------------------------------------------------------------------------
def grads_of(fn, x, params):
    """(value, d/dx, [d/dparam]) of fn(x) (x a Tensor; params a list of Parameters)."""
    value, (gx, gw) = ms.value_and_grad(fn, 0, params)(x)
    return value.asnumpy(), gx.asnumpy(), [g.asnumpy() for g in gw]


def layers(n, r):
    """Each parallel layer alone against the single-process layer it was cut from."""
    rng = np.random.default_rng(3)
    out = {}
    # -- column-parallel, without and with the gather
    for gather in (False, True):
        ms.set_seed(1)
        full = nn.Dense(6, 4 * n, has_bias=True, dtype=F64)
        par = ColumnParallelDense(full, gather_output=gather)
        x = ms.Tensor(rng.standard_normal((3, 5, 6)))
        w = rng.standard_normal((3, 5, 4 * n))
        ref_y, ref_dx, (ref_dw, ref_db) = grads_of(lambda t: F.sum(full(t) * ms.Tensor(w)), x,
                                                   [full.weight, full.bias])
        ref_out = full(x).asnumpy()
        if gather:
            # replicated output: the loss is the same number on every rank
            y, dx, (dw, db) = grads_of(lambda t: F.sum(par(t) * ms.Tensor(w)), x, [par.weight, par.bias])
            fwd = err(par(x).asnumpy(), ref_out)
            loss_err = err(y, ref_y)
        else:
            # each rank's loss is its columns' share; the total is their sum, and f's backward
            # all-reduce makes every rank's dx the total's gradient
            wl = block(w, -1, n, r)
            y, dx, (dw, db) = grads_of(lambda t: F.sum(par(t) * ms.Tensor(wl)), x, [par.weight, par.bias])
            fwd = err(par(x).asnumpy(), block(ref_out, -1, n, r))
            loss_err = 0.0
        out[f"column_gather{int(gather)}"] = {
            "forward": fwd, "loss": loss_err, "dx": err(dx, ref_dx), "dw": err(dw, block(ref_dw, 0, n, r)),
            "db": err(db, block(ref_db, 0, n, r)), "local_shape": list(par.weight.shape)}
    # -- row-parallel, with a sliced input and with the full input
    for parallel_in in (True, False):
        ms.set_seed(2)
        full = nn.Dense(4 * n, 5, has_bias=True, dtype=F64)
        par = RowParallelDense(full, input_is_parallel=parallel_in)
        xf = rng.standard_normal((7, 4 * n))
        w = rng.standard_normal((7, 5))
        ref_y, ref_dx, (ref_dw, ref_db) = grads_of(lambda t: F.sum(full(t) * ms.Tensor(w)), ms.Tensor(xf),
                                                   [full.weight, full.bias])
        x = ms.Tensor(block(xf, -1, n, r) if parallel_in else xf)
        y, dx, (dw, db) = grads_of(lambda t: F.sum(par(t) * ms.Tensor(w)), x, [par.weight, par.bias])
        out[f"row_parallel_in{int(parallel_in)}"] = {
            "forward": err(par(x).asnumpy(), full(ms.Tensor(xf)).asnumpy()), "loss": err(y, ref_y),
            "dx": err(dx, block(ref_dx, -1, n, r) if parallel_in else ref_dx),
            "dw": err(dw, block(ref_dw, 1, n, r)), "db": err(db, ref_db), "local_shape": list(par.weight.shape)}
    # -- column-parallel over out_channels that do not divide (an output head over 65 tokens)
    ms.set_seed(3)
    full = nn.Dense(6, 4 * n + 1, has_bias=True, dtype=F64)
    par = ColumnParallelDense(full, gather_output=True, even_split=False)
    x = ms.Tensor(rng.standard_normal((3, 6)))
    w = rng.standard_normal((3, 4 * n + 1))
    sizes = par.split_sizes
    lo = sum(sizes[:r])
    ref_y, ref_dx, (ref_dw, ref_db) = grads_of(lambda t: F.sum(full(t) * ms.Tensor(w)), x, [full.weight, full.bias])
    y, dx, (dw, db) = grads_of(lambda t: F.sum(par(t) * ms.Tensor(w)), x, [par.weight, par.bias])
    out["column_uneven"] = {"forward": err(par(x).asnumpy(), full(x).asnumpy()), "loss": err(y, ref_y),
                            "dx": err(dx, ref_dx), "dw": err(dw, ref_dw[lo:lo + sizes[r]]),
                            "db": err(db, ref_db[lo:lo + sizes[r]]), "local_shape": list(par.weight.shape),
                            "sizes": sizes}
    # -- vocabulary-parallel embedding: ids from every rank's range, the edges included
    ms.set_seed(4)
    emb = nn.Embedding(4 * n, 5)
    emb.embedding_table.set_dtype(F64)
    par = VocabParallelEmbedding(emb)
    ids = ms.Tensor(np.array([[0, 4 * n - 1, 3, 4], [4, 4, 1, 2 * n]], dtype=np.int64))
    w = ms.Tensor(rng.standard_normal((2, 4, 5)))
    ref_g = ms.grad(lambda t: F.sum(emb(ids) * w), None, [emb.embedding_table])(ids)[0].asnumpy()
    g = ms.grad(lambda t: F.sum(par(ids) * w), None, [par.embedding_table])(ids)[0].asnumpy()
    out["embedding"] = {"forward_bits_equal": bool(np.array_equal(par(ids).asnumpy(), emb(ids).asnumpy())),
                        "dtable": err(g, block(ref_g, 0, n, r)), "local_shape": list(par.embedding_table.shape)}
    # -- vocabulary-parallel cross-entropy (with an ignored row, and a large logit shift)
    logits = rng.standard_normal((6, 4 * n)) * 3 + 50.0
    target = np.array([0, 4 * n - 1, 2, -100, n, 1], dtype=np.int64)
    t = ms.Tensor(target)
    ref_l, ref_g = ms.value_and_grad(lambda z: F.cross_entropy(z, t))(ms.Tensor(logits))
    loc = ms.Tensor(np.ascontiguousarray(block(logits, 1, n, r)))
    l, g = ms.value_and_grad(lambda z: vocab_parallel_cross_entropy(z, t))(loc)
    out["cross_entropy"] = {"loss": err(l.asnumpy(), ref_l.asnumpy()),
                            "dlogits": err(g.asnumpy(), block(ref_g.asnumpy(), 1, n, r))}
    # -- the same two over an uneven vocabulary (4n + 1 rows: rank 0 holds one more)
    ms.set_seed(5)
    emb = nn.Embedding(4 * n + 1, 5)
    emb.embedding_table.set_dtype(F64)
    par = VocabParallelEmbedding(emb)
    ids = ms.Tensor(np.array([[0, 4 * n, 4, 5], [4 * n - 1, 1, 2, 3]], dtype=np.int64))
    w = ms.Tensor(rng.standard_normal((2, 4, 5)))
    ref_g = ms.grad(lambda t: F.sum(emb(ids) * w), None, [emb.embedding_table])(ids)[0].asnumpy()
    g = ms.grad(lambda t: F.sum(par(ids) * w), None, [par.embedding_table])(ids)[0].asnumpy()
    lo, hi = par.vocab_start, par.vocab_end
    logits = rng.standard_normal((6, 4 * n + 1))
    target = np.array([0, 4 * n, 4, 5, 2, 8], dtype=np.int64)    # the same on every rank; 4|5: rank 0's edge
    t = ms.Tensor(target)
    ref_l, ref_gl = ms.value_and_grad(lambda z: F.cross_entropy(z, t))(ms.Tensor(logits))
    l, gl = ms.value_and_grad(lambda z: vocab_parallel_cross_entropy(z, t, vocab_start=lo))(
        ms.Tensor(np.ascontiguousarray(logits[:, lo:hi])))
    out["uneven_vocab"] = {"forward_bits_equal": bool(np.array_equal(par(ids).asnumpy(), emb(ids).asnumpy())),
                           "dtable": err(g, ref_g[lo:hi]), "loss": err(l.asnumpy(), ref_l.asnumpy()),
                           "dlogits": err(gl.asnumpy(), ref_gl.asnumpy()[:, lo:hi]), "rows": hi - lo}
    return out


# ------------------------------------------------------------------------------------------------
def batches(c, steps, batch=4, seq=12, seed=5):
    """Next-token data with structure (a noisy counting sequence) so the loss really moves."""
    g = np.random.default_rng(seed)
    out = []
    for _ in range(steps):
        start = g.integers(0, c.vocab_size, (batch, 1))
        seq_ids = (start + np.arange(seq + 1)[None]) % c.vocab_size
        noise = g.random(seq_ids.shape) < 0.1
        seq_ids = np.where(noise, g.integers(0, c.vocab_size, seq_ids.shape), seq_ids)
        out.append((ms.Tensor(seq_ids[:, :-1].astype(np.int64)), ms.Tensor(seq_ids[:, 1:].astype(np.int64))))
    return out


def train(model, data):
    opt = AdamW(model.trainable_params(), lr=3e-3, weight_decay=0.1)
    grad_fn = ms.value_and_grad(model.loss, None, opt.parameters)
    losses = []
    for x, y in data:
        loss, grads = grad_fn(x, y)
        opt(grads)
        losses.append(float(loss.asnumpy()))
    return np.array(losses)


def training(n, r, tie, dtype, **kw):
    c = cfg(tie, **kw)
    data = batches(c, STEPS)
    ref = make_model(c, dtype)
    tp = tensor_parallel_llama(make_model(c, dtype))
    shapes = {name: list(p.shape) for name, p in tp.parameters_and_names()}
    ref_losses = train(ref, data)
    tp_losses = train(tp, data)
    full = tp.gathered_parameters()
    ref_params = {name: p.asnumpy() for name, p in ref.parameters_and_names()}
    return {"loss_rel": float(np.max(np.abs(tp_losses - ref_losses) / np.abs(ref_losses))),
            "param_err": max(err(full[k], v) for k, v in ref_params.items()),
            "same_names": sorted(full) == sorted(ref_params),
            "first_loss": float(ref_losses[0]), "last_loss": float(ref_losses[-1]),
            "tp_losses": tp_losses.tolist(), "local_shapes": shapes}


# ------------------------------------------------------------------------------------------------
def cache_bytes_contiguous(cache):
    return sum(layer.k.nbytes + layer.v.nbytes for layer in cache.layers)


def inference(n, r, dtype):
    c = cfg(False, vocab_size=65)            # an uneven vocabulary split for the output head
    ref = make_model(c, dtype, seed=7)
    tp = tensor_parallel_llama(make_model(c, dtype, seed=7))
    prompts = [[1, 2, 3, 4, 5, 6], [9, 8], [33, 34, 35]]
    out = {}
    for kv in ("contiguous", "paged", None):
        a = [x.token_ids for x in generate_batch(ref, prompts, 8, kv_cache=kv, block_size=4)]
        b = [x.token_ids for x in generate_batch(tp, prompts, 8, kv_cache=kv, block_size=4)]
        out[f"tokens_{kv}"] = {"ref": a, "tp": b}
    out["model_generate"] = {"ref": ref.generate([5, 6, 7], max_new_tokens=6),
                             "tp": tp.generate([5, 6, 7], max_new_tokens=6)}
    hl = c.n_kv_heads // n
    ids = ms.Tensor(np.array([prompts[0]], dtype=np.int64))
    # contiguous: (B, Hkv/p, capacity, hd) per layer, holding exactly this rank's heads
    full_c, tp_c = ref.new_cache(), tp.new_cache()
    ref.forward_2d(ids, full_c)
    tp.forward_2d(ids, tp_c)
    heads_err = max(max(err(t.k, block(f.k, 1, n, r)), err(t.v, block(f.v, 1, n, r)))
                    for f, t in zip(full_c.layers, tp_c.layers))
    out["contiguous_cache"] = {"full_bytes": cache_bytes_contiguous(full_c), "tp_bytes": cache_bytes_contiguous(tp_c),
                               "heads_err": heads_err, "local_heads": int(tp_c.layers[0].k.shape[1]),
                               "expected_heads": hl}
    # paged: (num_blocks, block_size, Hkv/p, hd) pools per layer; MindSpore's fused
    # reshape_and_cache + paged_attention (the default) and the NumPy gather path
    for key, fused in (("paged_cache", None), ("paged_cache_unfused", False)):
        full_p, tp_p = ref.new_paged_cache(8, 4, use_fused_ops=fused), tp.new_paged_cache(8, 4, use_fused_ops=fused)
        logits = []
        for m, pc in ((ref, full_p), (tp, tp_p)):
            pc.add_sequence("a", prompts[0])
            logits.append(m.forward_2d(ids, pc.batch(["a"]), last_only=True).asnumpy())
        out[key] = {
            "full_bytes": sum(a.nbytes for a in full_p.k + full_p.v),
            "tp_bytes": sum(a.nbytes for a in tp_p.k + tp_p.v),
            "heads_err": max(max(err(t, block(f, 2, n, r)) for f, t in zip(full_p.k, tp_p.k)),
                             max(err(t, block(f, 2, n, r)) for f, t in zip(full_p.v, tp_p.v))),
            "logits_err": err(logits[0], logits[1]), "local_heads": int(tp_p.k[0].shape[2])}
    return out


def errors(n, r):
    """A config whose key/value heads do not split over the ranks is refused, naming the field."""
    try:
        tensor_parallel_llama(make_model(cfg(False, n_heads=4 * n, n_kv_heads=1, dim=8 * n)))
    except OpValueError as e:
        return {"message": str(e)}
    return {"message": None}


def main():
    init()
    n, r = get_group_size(), get_rank()
    scenarios = sys.argv[1].split(",")
    out = {"rank": r, "size": n}
    if "layers" in scenarios:
        out["layers"] = layers(n, r)
    if "train64" in scenarios:
        out["train64"] = training(n, r, tie=False, dtype=F64)
    if "train64_tied" in scenarios:
        # 65 tokens (the Shakespeare characters): an uneven vocabulary split, the tied head on it
        out["train64_tied"] = training(n, r, tie=True, dtype=F64, vocab_size=65)
    if "train32" in scenarios:
        out["train32"] = training(n, r, tie=False, dtype=None)
    if "infer32" in scenarios:
        out["infer32"] = inference(n, r, None)
    if "errors" in scenarios:
        out["errors"] = errors(n, r)
    Path(sys.argv[2], f"rank_{r}.json").write_text(json.dumps(out))


if __name__ == "__main__":
    main()
