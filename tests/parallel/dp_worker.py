"""One rank of the data-parallel tests (tests/parallel/test_data_parallel.py), run under
`mpiexec -n N`. Every rank also runs the single-process reference on the whole global batch (it is
small), so each rank can compare its data-parallel run against it.
`python dp_worker.py SCENARIO[,SCENARIO...] OUT_DIR` writes OUT_DIR/rank_<r>.json per rank; the
pytest side asserts on the numbers.

Why float64: the data-parallel gradient (1/n) * sum_r mean_r(loss) and the single-process
mean(loss) over the same rows are equal in exact arithmetic but sum in different orders; in
float32 that is ~1e-7 relative per step, and over 20 optimizer steps it would blur a real
mistake (a missing 1/n, a wrong slice, a stale bucket) into noise. In float64 the two runs agree
to ~1e-14, so the 1e-5 check means "same numbers" and any bug shows up as a gross mismatch.
"""
import json
import os
import sys

import numpy as np

import minispore as ms
from minispore import nn
from minispore.communication import get_group_size, get_rank, init

STEPS = 20
LOCAL_BATCH = 4


def make_data(n_rows, in_dim, out_dim, seed=1):
    g = np.random.default_rng(seed)
    x = g.standard_normal((n_rows, in_dim))
    w = g.standard_normal((in_dim, out_dim))
    y = np.tanh(x @ w) + 0.1 * g.standard_normal((n_rows, out_dim))
    return x, y


class Probe(nn.Cell):
    """Identity forward; its backward rule records when backward reaches this point (after the
    layers above it, before the layer below it)."""

    def __init__(self, events):
        super().__init__()
        self._events = events

    def construct(self, x):
        return x

    def bprop(self, x, out, dout):
        import time
        self._events.append(("probe", -1, time.perf_counter()))
        return (dout,)


def mlp(dtype, events=None):
    ms.set_seed(7)
    layers = [nn.Dense(6, 16, dtype=dtype), nn.Tanh()]
    if events is not None:
        layers.append(Probe(events))
    layers += [nn.Dense(16, 16, dtype=dtype), nn.Tanh(), nn.Dense(16, 3, dtype=dtype)]
    return nn.SequentialCell(layers)


class ConvNet(nn.Cell):
    def __init__(self, dtype):
        super().__init__()
        ms.set_seed(11)
        self.conv = nn.Conv2d(1, 4, 3, pad_mode="valid", dtype=dtype)
        self.act = nn.ReLU()
        self.flat = nn.Flatten()
        self.fc = nn.Dense(4 * 4 * 4, 3, dtype=dtype)

    def construct(self, x):
        return self.fc(self.flat(self.act(self.conv(x))))


class TinyLlamaLoss(nn.Cell):
    """A one-layer LLaMA (GQA, RoPE, SwiGLU) returning its mean next-token cross-entropy."""

    def __init__(self, dtype):
        super().__init__()
        from minispore.llm.config import LlamaConfig
        from minispore.llm.model import Llama
        ms.set_seed(5)
        self.model = Llama(LlamaConfig(vocab_size=16, dim=16, n_layers=1, n_heads=2, n_kv_heads=1,
                                       max_seq_len=8, multiple_of=8))
        for p in self.model.trainable_params():
            p.set_dtype(dtype)

    def construct(self, tokens, targets):
        return self.model.loss(tokens, targets)


def dataset(x, y, batch, shard):
    kw = {} if shard is None else {"num_shards": shard[1], "shard_id": shard[0]}
    ds = ms.dataset.NumpySlicesDataset((x, y), ["x", "y"], shuffle=False, **kw)
    return ds.batch(batch, drop_remainder=True)


def train(make_net, x, y, batch, shard, dp, sens=None, optimizer="momentum", events=None, loss_fn=True):
    """20 TrainOneStepCell steps; data-parallel if `dp` (the reducer is inserted automatically)."""
    ms.reset_auto_parallel_context()
    if dp:
        ms.set_auto_parallel_context(parallel_mode="data_parallel", gradients_mean=True)
        if events is not None:
            ms.set_auto_parallel_context(comm_fusion={"allreduce": {"mode": "size", "config": 0.0002}})
    net = make_net()
    params = net.trainable_params()
    opt = nn.Momentum(params, 0.05, 0.9) if optimizer == "momentum" else nn.Adam(params, 0.01)
    step = nn.TrainOneStepCell(nn.WithLossCell(net, nn.MSELoss()) if loss_fn else net, opt, sens=sens)
    if dp and events is not None:
        step.grad_reducer.events = events
    losses = []
    for epoch in range(STEPS):
        for bx, by in dataset(x, y, batch, shard).create_tuple_iterator():
            if events is not None:
                events.clear()              # keep the events of the last step only
            losses.append(float(step(bx, by).asnumpy()))
            if len(losses) == STEPS:
                break
        if len(losses) == STEPS:
            break
    reducer = step.grad_reducer
    ms.reset_auto_parallel_context()
    return losses, [p.asnumpy().copy() for p in params], reducer


def compare(comm, make_net, x, y, n, rank, **kw):
    ref_losses, ref_params, _ = train(make_net, x, y, LOCAL_BATCH * n, None, False, **kw)
    dp_losses, dp_params, reducer = train(make_net, x, y, LOCAL_BATCH, (rank, n), True, **kw)
    # the global loss of a DP step is the mean of the ranks' local losses (equal local batches)
    global_losses = np.mean(comm.allgather(np.array(dp_losses)), axis=0)
    loss_rel = float(np.max(np.abs(global_losses - ref_losses) / np.abs(ref_losses)))
    param_err = float(max(np.max(np.abs(a - b)) for a, b in zip(dp_params, ref_params)))
    # every replica holds the same parameters
    replicas = comm.allgather([p for p in dp_params])
    replica_err = float(max(np.max(np.abs(a - b)) for r in replicas for a, b in zip(r, dp_params)))
    return {"loss_rel": loss_rel, "param_err": param_err, "replica_err": replica_err,
            "reducer": type(reducer).__name__,
            "buckets": [list(b.params) for b in getattr(reducer, "buckets", [])],
            "first_loss": float(ref_losses[0]), "last_loss": float(ref_losses[-1])}


def main():
    init()
    rank, n = get_rank(), get_group_size()
    comm = ms.common.process_groups.world().comm
    scenarios = sys.argv[1].split(",")
    out = {"rank": rank, "size": n}
    f64 = ms.float64
    n_rows = LOCAL_BATCH * n * 5                 # 5 global batches per epoch; 20 steps = 4 epochs
    x, y = make_data(n_rows, 6, 3)
    if "mlp" in scenarios:
        out["mlp"] = compare(comm, lambda: mlp(f64), x, y, n, rank)
    if "mlp32" in scenarios:
        out["mlp32"] = compare(comm, lambda: mlp(ms.float32), x.astype(np.float32), y.astype(np.float32),
                               n, rank)
    if "sens" in scenarios:          # sens scales the gradients after backward (no overlap then)
        out["sens"] = compare(comm, lambda: mlp(f64), x, y, n, rank, sens=2.0)
    if "conv" in scenarios:
        g = np.random.default_rng(3)
        xi = g.standard_normal((n_rows, 1, 6, 6))
        yi = g.standard_normal((n_rows, 3))
        out["conv"] = compare(comm, lambda: ConvNet(f64), xi, yi, n, rank, optimizer="adam")
    if "llama" in scenarios:
        g = np.random.default_rng(4)
        tokens = g.integers(0, 16, (n_rows, 9)).astype(np.int32)
        out["llama"] = compare(comm, lambda: TinyLlamaLoss(f64), tokens[:, :-1], tokens[:, 1:], n, rank,
                               optimizer="adam", loss_fn=False)
    if "graph" in scenarios:         # GRAPH_MODE: the reducer runs as a host call after the graph
        ms.set_context(mode=ms.GRAPH_MODE)
        try:
            out["graph"] = compare(comm, lambda: mlp(f64), x, y, n, rank)
        finally:
            ms.set_context(mode=ms.PYNATIVE_MODE)
    if "buckets" in scenarios:
        events = []
        res = compare(comm, lambda: mlp(f64, events), x, y, n, rank, events=events)
        res["events"] = [(k, i) for k, i, _ in events]
        out["buckets"] = res
    if "model" in scenarios:
        out["model"] = model_train(comm, x, y, n, rank)
    if "sum" in scenarios:
        out["sum"] = reducer_sum(comm, rank, n)
    with open(os.path.join(sys.argv[2], f"rank_{rank}.json"), "w") as f:
        json.dump(out, f)


def model_train(comm, x, y, n, rank):
    """Model.train in data-parallel mode (the reducer comes in through TrainOneStepCell) against
    Model.train on one process over the whole batch."""
    def run(dp):
        ms.reset_auto_parallel_context()
        if dp:
            ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.DATA_PARALLEL, gradients_mean=True)
        net = mlp(ms.float64)
        model = ms.Model(net, nn.MSELoss(), nn.Momentum(net.trainable_params(), 0.05, 0.9))
        ds = dataset(x, y, LOCAL_BATCH, (rank, n)) if dp else dataset(x, y, LOCAL_BATCH * n, None)
        model.train(4, ds)
        reducer = type(model.train_network.grad_reducer).__name__
        ms.reset_auto_parallel_context()
        return [p.asnumpy().copy() for p in net.trainable_params()], reducer
    ref, _ = run(False)
    got, reducer = run(True)
    return {"param_err": float(max(np.max(np.abs(a - b)) for a, b in zip(got, ref))), "reducer": reducer}


def reducer_sum(comm, rank, n):
    """mean=False sums; degree=... divides by it; float32 and float16 gradients keep their dtype."""
    p32 = ms.Parameter(ms.Tensor(np.zeros((3, 2), np.float32)), name="a")
    p16 = ms.Parameter(ms.Tensor(np.zeros((5,), np.float16)), name="b")
    g32 = np.arange(6, dtype=np.float32).reshape(3, 2) * (rank + 1)
    g16 = np.full((5,), rank + 0.5, np.float16)
    expected32 = sum(np.arange(6, dtype=np.float64).reshape(3, 2) * (r + 1) for r in range(n))
    expected16 = sum(np.full((5,), r + 0.5) for r in range(n))
    out = nn.DistributedGradReducer([p32, p16], mean=False)((ms.Tensor(g32), ms.Tensor(g16)))
    mean8 = nn.DistributedGradReducer([p32, p16], mean=True, degree=8)((ms.Tensor(g32), ms.Tensor(g16)))
    # gradients changed between backward and the reducer (clipping, scaling): the buckets packed
    # during backward are stale and must be reduced again from what the reducer is given
    w = ms.Parameter(ms.Tensor(np.full((4,), rank + 1.0)), name="w")
    v = ms.Parameter(ms.Tensor(np.full((3,), 2.0 * (rank + 1))), name="v")
    reducer = nn.DistributedGradReducer([w, v], mean=False)
    with reducer.overlap_backward():
        gw, gv = ms.grad(lambda: (w * w).sum() + v.sum(), None, (w, v))()     # 2w and 1
    stale = reducer((gw * 3.0, gv))             # w's bucket was started with 2w, is given 6w
    expected_w = sum(6.0 * (r + 1) for r in range(n))
    return {"stale_err": float(np.max(np.abs(stale[0].asnumpy() - expected_w))
                               + np.max(np.abs(stale[1].asnumpy() - n))),
            "sum_err32": float(np.max(np.abs(out[0].asnumpy() - expected32))),
            "sum_err16": float(np.max(np.abs(out[1].asnumpy().astype(np.float64) - expected16))),
            "dtypes": [str(out[0].dtype), str(out[1].dtype)],
            "mean8_err": float(np.max(np.abs(mean8[0].asnumpy() - expected32 / 8)))}


if __name__ == "__main__":
    main()
