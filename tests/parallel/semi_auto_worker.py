"""One rank of the semi-auto parallel tests (tests/parallel/test_semi_auto.py), run under
`mpiexec -n N`. `python semi_auto_worker.py SCENARIO[,SCENARIO...] OUT_DIR` writes
OUT_DIR/rank_<r>.json; the pytest side asserts on the numbers.

Every rank first runs the single-process reference (stand_alone, PyNative, the whole global batch),
then the same model under `parallel_mode="semi_auto_parallel"` in GRAPH_MODE with shard strategies
on its MatMuls: the compiler pass (graph/parallel/partition.py) partitions the captured training
step (forward, backward and the optimizer's host call), every rank is handed the global batch
(full_batch) and its parameters are its shards. After the steps every parameter's shards are
gathered (MPI allgather of the local blocks, assembled with ops.sharding.assemble_blocks) and
compared with the reference's. Float64, as in dp_worker.py: the two runs sum in different orders,
float64 keeps that far below the 1e-5 check so a real bug is a gross mismatch.
"""
import json
import os
import sys

import numpy as np

import minispore as ms
from minispore import nn, ops
from minispore.common import auto_parallel_context as apc
from minispore.communication import get_group_size, get_rank, init
from minispore.graph.parallel.partition import sliced_layout
from minispore.ops.sharding import assemble_blocks

STEPS = 20
F64 = ms.float64


def strategies(kind, n):
    """(strategy of the first MatMul, of the second) for n ranks."""
    if kind == "dp":
        return ((n, 1), (1, 1)), ((n, 1), (1, 1))
    if kind == "mp":                              # Megatron: column-parallel, then row-parallel
        return ((1, 1), (1, n)), ((1, n), (n, 1))
    if kind == "dpmp":                            # 2 x (n/2): data parallel x Megatron
        d, m = 2, n // 2
        return ((d, 1), (1, m)), ((d, m), (m, 1))
    return None, None


class MLP(nn.Cell):
    def __init__(self, w1, w2, b2, s1=None, s2=None):
        super().__init__()
        self.w1 = ms.Parameter(ms.Tensor(w1.copy(), F64), name="w1")
        self.w2 = ms.Parameter(ms.Tensor(w2.copy(), F64), name="w2")
        self.b2 = ms.Parameter(ms.Tensor(b2.copy(), F64), name="b2")
        self.mm1 = ops.MatMul().shard(s1) if s1 else ops.MatMul()
        self.mm2 = ops.MatMul().shard(s2) if s2 else ops.MatMul()

    def construct(self, x):
        h = ops.relu(self.mm1(x, self.w1))
        return self.mm2(h, self.w2) + self.b2


class MSE(nn.Cell):
    def __init__(self, net):
        super().__init__()
        self.net = net

    def construct(self, x, y):
        d = self.net(x) - y
        return ops.mean(d * d)


class Embed(nn.Cell):
    """A vocabulary-parallel lookup (Gather with the table's rows split: the masked local lookup
    plus an AllReduce), then a column-parallel MatMul."""

    def __init__(self, table, w, n=None):
        super().__init__()
        self.table = ms.Parameter(ms.Tensor(table.copy(), F64), name="table")
        self.w = ms.Parameter(ms.Tensor(w.copy(), F64), name="w")
        self.gather = ops.Gather().shard(((n, 1), (1,))) if n else ops.Gather()
        self.mm = ops.MatMul().shard(((1, 1), (1, n))) if n else ops.MatMul()

    def construct(self, ids):
        return self.mm(ops.tanh(self.gather(self.table, ids, 0)), self.w)


def embed_scenario(comm, optimizer, n, rank, strategy_file):
    g = np.random.default_rng(5)
    table, w = g.standard_normal((16, 4)), g.standard_normal((4, 8)) * 0.5
    ids = g.integers(0, 16, (STEPS, 6)).astype(np.int32)
    ys = g.standard_normal((STEPS, 6, 8))
    apc.set_auto_parallel_context(parallel_mode="stand_alone")
    ms.set_context(mode=ms.PYNATIVE_MODE)
    ref = Embed(table, w)
    ref_losses = train(ref, ids, ys, optimizer, 1, squeeze=True)
    ref_params = {p.name: p.asnumpy() for p in ref.trainable_params()}
    apc.set_auto_parallel_context(parallel_mode="semi_auto_parallel", full_batch=True,
                                  strategy_ckpt_config={"save_file": strategy_file})
    ms.set_context(mode=ms.GRAPH_MODE)
    out = {}
    fwd = ms.jit(Embed(table, w, n), capture_mode="ast")
    y = fwd(ms.Tensor(ids[0])).asnumpy()
    out["forward_err"] = float(np.max(np.abs(y - np.tanh(table[ids[0]]) @ w)))
    out["forward_comms"] = fwd.compile(ms.Tensor(ids[0])).graph.notes["semi_auto_plan"].comm_table()
    net = Embed(table, w, n)
    losses = train(net, ids, ys, optimizer, 1, squeeze=True)
    out["losses"], out["ref_losses"] = losses, ref_losses
    out["loss_rel"] = float(max(abs(a - b) / max(abs(b), 1e-12) for a, b in zip(losses, ref_losses)))
    out["param_err"] = {p.name: float(np.max(np.abs(gathered(comm, p) - ref_params[p.name])))
                        for p in net.trainable_params()}
    out["local_shapes"] = {p.name: list(p.shape) for p in net.trainable_params()}
    ms.set_context(mode=ms.PYNATIVE_MODE)
    apc.set_auto_parallel_context(parallel_mode="stand_alone", strategy_ckpt_config={"save_file": ""})
    return out


class LlamaLoss(nn.Cell):
    """A one-layer LLaMA (RoPE, SwiGLU, untied head) returning its mean next-token cross-entropy;
    with `n`, Megatron's strategy set as a parameter_plan of Cell.shard: column-parallel wq/wk/wv
    and w1/w3 (their (out, in) weights split by rows), row-parallel wo and w2 - the sharding rules
    then carry the heads' split through the reshapes, RoPE and attention by themselves."""

    def __init__(self, n=None):
        super().__init__()
        from minispore.llm.config import LlamaConfig
        from minispore.llm.model import Llama
        ms.set_seed(5)
        self.model = Llama(LlamaConfig(vocab_size=16, dim=16, n_layers=1, n_heads=4, max_seq_len=8,
                                       ffn_dim=32, tie_embeddings=False), attention="naive")
        for p in self.model.trainable_params():
            p.set_dtype(F64)
        if n:
            plan = {}
            for name, _ in self.model.parameters_and_names():
                if any(k in name for k in ("wq.", "wk.", "wv.", "w1.", "w3.")):
                    plan[name] = (n, 1)
                elif any(k in name for k in ("wo.", "w2.")):
                    plan[name] = (1, n)
            self.model.shard(in_strategy=((1, 1),), parameter_plan=plan)

    def construct(self, tokens, targets):
        return self.model.loss(tokens, targets)


def llama_scenario(comm, optimizer, n, rank):
    g = np.random.default_rng(6)
    tokens = g.integers(0, 16, (STEPS, 2, 9)).astype(np.int32)
    apc.set_auto_parallel_context(parallel_mode="stand_alone")
    ms.set_context(mode=ms.PYNATIVE_MODE)

    def run(net):
        opt = nn.SGD(net.trainable_params(), learning_rate=0.5) if optimizer == "sgd" else \
            nn.Adam(net.trainable_params(), learning_rate=0.01)
        step = nn.TrainOneStepCell(net, opt)
        return [float(step(ms.Tensor(t[:, :-1]), ms.Tensor(t[:, 1:])).asnumpy()) for t in tokens]

    ref = LlamaLoss()
    ref_losses = run(ref)
    ref_params = {p.name: p.asnumpy() for p in ref.trainable_params()}
    apc.set_auto_parallel_context(parallel_mode="semi_auto_parallel", full_batch=True)
    ms.set_context(mode=ms.GRAPH_MODE)
    out = {}
    fwd = ms.jit(LlamaLoss(n), capture_mode="ast")
    args = (ms.Tensor(tokens[0][:, :-1]), ms.Tensor(tokens[0][:, 1:]))
    out["forward_err"] = abs(float(fwd(*args).asnumpy()) - ref_losses[0])
    out["forward_comms"] = fwd.compile(*args).graph.notes["semi_auto_plan"].comm_table()
    net = LlamaLoss(n)
    losses = run(net)
    out["losses"], out["ref_losses"] = losses, ref_losses
    out["loss_rel"] = float(max(abs(a - b) / max(abs(b), 1e-12) for a, b in zip(losses, ref_losses)))
    out["param_err"] = {p.name: float(np.max(np.abs(gathered(comm, p) - ref_params[p.name])))
                        for p in net.trainable_params()}
    out["local_shapes"] = {p.name: list(p.shape) for p in net.trainable_params()}
    ms.set_context(mode=ms.PYNATIVE_MODE)
    apc.set_auto_parallel_context(parallel_mode="stand_alone")
    return out


def reshard_scenario(n):
    """ms.reshard from a row split to a column split (an all_to_all), then a softmax over the rows
    (which gathers them back): numbers against NumPy, and the communication table."""
    from minispore.parallel.layout import Layout
    apc.set_auto_parallel_context(parallel_mode="semi_auto_parallel", full_batch=True)
    relu = ops.ReLU().shard(((n, 1),))
    cols = Layout((n,), ("mp",))("None", "mp")

    def f(x):
        return ops.softmax(ops.exp(ms.reshard(relu(x), cols)), 0)
    x = np.random.default_rng(8).standard_normal((4 * n, 2 * n))
    jf = ms.jit(f, capture_mode="trace")
    y = jf(ms.Tensor(x, F64)).asnumpy()
    e = np.exp(np.maximum(x, 0))
    want = np.exp(e - e.max(0)) / np.exp(e - e.max(0)).sum(0)
    comms = jf.compile(ms.Tensor(x, F64)).graph.notes["semi_auto_plan"].comm_table()
    # out_strategy: the row-parallel product's partial sum reduce-scattered by rows, then tanh
    row = ops.MatMul().shard(((1, n), (n, 1)), out_strategy=((n, 1),))
    w = np.random.default_rng(9).standard_normal((2 * n, 3))
    wp = ms.Parameter(ms.Tensor(w, F64), name="w_out_strategy")
    jg = ms.jit(lambda t: ops.tanh(row(t, wp)), capture_mode="trace")
    z = jg(ms.Tensor(x, F64)).asnumpy()
    out_comms = jg.compile(ms.Tensor(x, F64)).graph.notes["semi_auto_plan"].comm_table()
    apc.set_auto_parallel_context(parallel_mode="stand_alone")
    return {"err": float(np.max(np.abs(y - want))), "comms": comms,
            "out_err": float(np.max(np.abs(z - np.tanh(x @ w)))), "out_comms": out_comms}


def guard_scenario():
    """value_and_grad of a partitioned jitted function from PyNative is refused with a clear error."""
    xs, ys, w1, w2, b2 = make()
    apc.set_auto_parallel_context(parallel_mode="semi_auto_parallel", full_batch=True)
    net = MLP(w1, w2, b2, *strategies("mp", get_group_size()))
    f = ms.jit(MSE(net))
    try:
        ms.value_and_grad(f, None, net.trainable_params())(ms.Tensor(xs[:8], F64), ms.Tensor(ys[:8], F64))
        message = ""
    except ms.common.errors.OpValueError as e:
        message = str(e)
    apc.set_auto_parallel_context(parallel_mode="stand_alone")
    return {"message": message}


def numpy_forward(x, w1, w2, b2):
    return np.maximum(x @ w1, 0) @ w2 + b2


def make(seed=0, batch=8, d_in=4, hidden=8, d_out=4):
    g = np.random.default_rng(seed)
    return (g.standard_normal((batch * STEPS, d_in)), g.standard_normal((batch * STEPS, d_out)),
            g.standard_normal((d_in, hidden)) * 0.5, g.standard_normal((hidden, d_out)) * 0.5,
            g.standard_normal((d_out,)) * 0.1)


def train(net, xs, ys, optimizer, batch, squeeze=False, style="cell"):
    """20 steps; style "cell": TrainOneStepCell (compiled by GRAPH_MODE), "function": a jitted
    function calling value_and_grad and the optimizer."""
    opt = nn.SGD(net.trainable_params(), learning_rate=0.05) if optimizer == "sgd" else \
        nn.Adam(net.trainable_params(), learning_rate=0.01)
    if style == "cell":
        step = nn.TrainOneStepCell(MSE(net), opt)
    else:
        grad_fn = ms.value_and_grad(MSE(net), None, opt.parameters)

        @ms.jit
        def step(x, y):
            loss, grads = grad_fn(x, y)
            opt(grads)
            return loss
    losses = []
    for i in range(STEPS):
        if squeeze:                               # one (ids, targets) pair per step
            x, y = ms.Tensor(xs[i]), ms.Tensor(ys[i], F64)
        else:
            x = ms.Tensor(xs[i * batch:(i + 1) * batch], F64)
            y = ms.Tensor(ys[i * batch:(i + 1) * batch], F64)
        losses.append(float(step(x, y).asnumpy()))
    return losses


def gathered(comm, param):
    """The global value of a (possibly sliced) Parameter: every rank's block, assembled."""
    info = sliced_layout(param)
    local = param.asnumpy()
    if info is None:
        return local
    shape, layout = info
    blocks = comm.allgather(local)
    return assemble_blocks(blocks, layout, shape)


def scenario(comm, kind, optimizer, n, rank):
    style = "function" if kind.endswith("fn") else "cell"       # "mpfn": Megatron, a jitted step function
    kind = kind[:-2] if style == "function" else kind
    xs, ys, w1, w2, b2 = make()
    batch = 8
    # the single-process reference
    apc.set_auto_parallel_context(parallel_mode="stand_alone")
    ms.set_context(mode=ms.PYNATIVE_MODE)
    ref = MLP(w1, w2, b2)
    ref_losses = train(ref, xs, ys, optimizer, batch)
    ref_params = {p.name: p.asnumpy() for p in ref.trainable_params()}
    x4, y4 = ms.Tensor(xs[:4], F64), ms.Tensor(ys[:4], F64)
    ref_eval = float(MSE(ref)(x4, y4).asnumpy())
    # semi-auto parallel, GRAPH_MODE
    apc.set_auto_parallel_context(parallel_mode="semi_auto_parallel", full_batch=True)
    ms.set_context(mode=ms.GRAPH_MODE)
    s1, s2 = strategies(kind, n)
    net = MLP(w1, w2, b2, s1, s2)
    out = {}
    # forward alone (a jitted forward, checked against NumPy float64)
    fwd = ms.jit(MLP(w1, w2, b2, s1, s2), capture_mode="ast")
    y = fwd(ms.Tensor(xs[:batch], F64)).asnumpy()
    out["forward_err"] = float(np.max(np.abs(y - numpy_forward(xs[:batch], w1, w2, b2))))
    plan = fwd.compile(ms.Tensor(xs[:batch], F64)).graph.notes["semi_auto_plan"]
    out["forward_comms"] = plan.comm_table()
    losses = train(net, xs, ys, optimizer, batch, style=style)
    out["losses"] = losses
    out["ref_losses"] = ref_losses
    out["loss_rel"] = float(max(abs(a - b) / max(abs(b), 1e-12) for a, b in zip(losses, ref_losses)))
    errs = {}
    for p in net.trainable_params():
        errs[p.name] = float(np.max(np.abs(gathered(comm, p) - ref_params[p.name])))
    out["param_err"] = errs
    out["local_shapes"] = {p.name: list(p.shape) for p in net.trainable_params()}
    # a new graph over the already-sliced parameters, another batch size: captured on global
    # shapes again (partition.global_shapes_during_capture), partitioned, run on the shards
    out["eval_rel"] = abs(float(ms.jit(MSE(net))(x4, y4).asnumpy()) - ref_eval) / ref_eval
    ms.set_context(mode=ms.PYNATIVE_MODE)
    apc.set_auto_parallel_context(parallel_mode="stand_alone")
    return out


def main():
    init()
    rank, n = get_rank(), get_group_size()
    comm = ms.common.process_groups.world().comm
    scenarios = sys.argv[1].split(",")
    out = {"rank": rank, "size": n}
    for name in scenarios:
        kind, optimizer = name.split("_")
        if kind == "reshard":
            out[name] = reshard_scenario(n)
        elif kind == "guard":
            out[name] = guard_scenario()
        elif kind == "llama":
            out[name] = llama_scenario(comm, optimizer, n, rank)
        elif kind == "embed":
            path = os.path.join(sys.argv[2], "strategy.json")
            out[name] = embed_scenario(comm, optimizer, n, rank, path)
        else:
            out[name] = scenario(comm, kind, optimizer, n, rank)
    with open(os.path.join(sys.argv[2], f"rank_{rank}.json"), "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
