"""Data parallelism: the auto-parallel context, nn.DistributedGradReducer (buckets, overlap with
backward), TrainOneStepCell / Model inserting it, dataset sharding, and the tape's gradient-ready hook.

The multi-process tests run tests/parallel/dp_worker.py under `mpiexec -n 2` and `-n 4` (one run
per world size, a few seconds each, through tests/communication/mpi_harness.py); every rank
compares its data-parallel run (a 3-layer MLP, a conv net, a one-layer LLaMA; Momentum and Adam;
TrainOneStepCell, Model.train, sens, GRAPH_MODE) with the single-process run on the same global
batch (see the worker's docstring for why float64).
"""
import sys
from pathlib import Path

import numpy as np
import pytest

import minispore as ms
from minispore import nn
from minispore.autograd import tape
from minispore.common.errors import OpTypeError, OpValueError
from minispore.nn.wrap_grad_reducer import plan_buckets

HERE = Path(__file__).parent
WORKER = HERE / "dp_worker.py"
sys.path.insert(0, str(HERE.parent / "communication"))
from mpi_harness import rank_results, needs_mpi  # noqa: E402  (tests/communication/mpi_harness.py: bounded mpiexec runs)




def run_worker(n, scenarios, out_dir, timeout=90):
    """Run the worker on n ranks (bounded; a hang fails the test); one result dict per rank."""
    return rank_results(WORKER, n, out_dir, (",".join(scenarios), out_dir), timeout)


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    return run_worker(2, ["mlp", "mlp32", "sens", "conv", "llama", "buckets", "model", "sum", "graph"],
                      tmp_path_factory.mktemp("dp2"))


@pytest.fixture(scope="module")
def four_ranks(tmp_path_factory):
    return run_worker(4, ["mlp", "conv", "llama", "buckets", "sum"], tmp_path_factory.mktemp("dp4"))


@pytest.fixture(autouse=True)
def _reset_context():
    ms.reset_auto_parallel_context()
    yield
    ms.reset_auto_parallel_context()


# ---- multi-process: the same numbers as one process on the global batch ----------------------

def _check_equal_to_single_process(results, scenario):
    for r in results:
        res = r[scenario]
        assert res["reducer"] == "DistributedGradReducer"
        assert res["loss_rel"] < 1e-5, res          # 20 losses, relative
        assert res["param_err"] < 1e-5, res         # every parameter after the 20 steps
        assert res["replica_err"] == 0.0, res       # all replicas hold identical parameters
        assert res["last_loss"] < res["first_loss"]     # and the model did learn


@needs_mpi
@pytest.mark.parametrize("scenario", ["mlp", "sens", "conv", "llama", "graph"])
def test_two_ranks_match_single_process(two_ranks, scenario):
    _check_equal_to_single_process(two_ranks, scenario)


@needs_mpi
@pytest.mark.parametrize("scenario", ["mlp", "conv", "llama", "buckets"])
def test_four_ranks_match_single_process(four_ranks, scenario):
    _check_equal_to_single_process(four_ranks, scenario)


@needs_mpi
def test_float32_within_tolerance(two_ranks):
    # float32 only differs by the summation order of the batch mean (~1e-7 measured)
    _check_equal_to_single_process(two_ranks, "mlp32")


@needs_mpi
def test_model_train_inserts_reducer(two_ranks):
    for r in two_ranks:
        assert r["model"]["reducer"] == "DistributedGradReducer"
        assert r["model"]["param_err"] < 1e-5


@needs_mpi
@pytest.mark.parametrize("fixture", ["two_ranks", "four_ranks"])
def test_reducer_sum_mean_and_dtypes(request, fixture):
    for r in request.getfixturevalue(fixture):
        s = r["sum"]
        assert s["sum_err32"] == 0.0 and s["sum_err16"] == 0.0 and s["mean8_err"] == 0.0
        assert s["stale_err"] == 0.0        # a bucket changed after backward is reduced again
        assert s["dtypes"] == ["Float32", "Float16"]


@needs_mpi
@pytest.mark.parametrize("fixture", ["two_ranks", "four_ranks"])
def test_buckets_start_during_backward(request, fixture):
    """With a tiny bucket size every parameter is its own bucket; in the last step's event log the
    first bucket starts before backward reaches the probe between layer 1 and layer 2, and so
    before layer 1's gradients exist. Buckets start in bucket order, each exactly once."""
    for r in request.getfixturevalue(fixture):
        res = r["buckets"]
        assert res["buckets"] == [[5], [4], [3], [2], [1], [0]]     # reverse parameter order
        events = [tuple(e) for e in res["events"]]
        kinds = [k for k, _ in events]
        starts = [i for k, i in events if k == "start"]
        assert starts == list(range(6))
        first_start = events.index(("start", 0))
        probe = kinds.index("probe")
        layer1_ready = min(events.index(("ready", 0)), events.index(("ready", 1)))
        assert first_start < probe < layer1_ready
        assert kinds.index("wait") > max(i for i, k in enumerate(kinds) if k == "start")
        # a bucket starts only after all its gradients are ready
        for b, (p,) in enumerate(res["buckets"]):
            assert events.index(("ready", p)) < events.index(("start", b))


# ---- one process: the reducer, the hook, the context, the dataset ---------------------------

def _mlp():
    ms.set_seed(3)
    return nn.SequentialCell([nn.Dense(4, 8, dtype=ms.float64), nn.Tanh(), nn.Dense(8, 2, dtype=ms.float64)])


def _grads(net):
    g = np.random.default_rng(0)
    x = ms.Tensor(g.standard_normal((6, 4)))
    y = ms.Tensor(g.standard_normal((6, 2)))
    fn = ms.value_and_grad(nn.WithLossCell(net, nn.MSELoss()), None, net.trainable_params())
    return fn(x, y)[1], (x, y)


def test_world_of_one_reducer_is_identity():
    net = _mlp()
    grads, _ = _grads(net)
    out = nn.DistributedGradReducer(net.trainable_params(), mean=True)(grads)
    assert all(a is b for a, b in zip(out, grads))
    # an explicit degree on one rank still divides (MindSpore multiplies by 1/degree)
    halved = nn.DistributedGradReducer(net.trainable_params(), mean=True, degree=2)(grads)
    for h, g in zip(halved, grads):
        np.testing.assert_array_equal(h.asnumpy(), g.asnumpy() / 2)


def test_train_one_step_cell_data_parallel_on_one_rank_equals_stand_alone():
    def run(mode):
        ms.set_auto_parallel_context(parallel_mode=mode, gradients_mean=True)
        net = _mlp()
        step = nn.TrainOneStepCell(nn.WithLossCell(net, nn.MSELoss()), nn.SGD(net.trainable_params(), 0.1))
        _, (x, y) = _grads(_mlp())
        losses = [float(step(x, y).asnumpy()) for _ in range(3)]
        ms.reset_auto_parallel_context()
        return type(step.grad_reducer).__name__, losses
    assert run("stand_alone")[0] == "Identity"
    name, dp = run("data_parallel")
    assert name == "DistributedGradReducer" and dp == run("stand_alone")[1]
    assert run("hybrid_parallel")[0] == "DistributedGradReducer"
    assert run("semi_auto_parallel")[0] == "Identity"


def test_mean_defaults_to_gradients_mean():
    p = [ms.Parameter(ms.Tensor(np.zeros(2)), name="w")]
    assert nn.DistributedGradReducer(p).mean is False
    ms.set_auto_parallel_context(gradients_mean=True)
    r = nn.DistributedGradReducer(p)
    assert r.mean is True and r.degree == 1


def test_reducer_bad_inputs():
    p = [ms.Parameter(ms.Tensor(np.zeros((2, 3))), name="w")]
    cases = [
        (lambda: nn.DistributedGradReducer(p[0]), OpTypeError, "parameters"),
        (lambda: nn.DistributedGradReducer([1.0]), OpTypeError, "Parameters"),
        (lambda: nn.DistributedGradReducer(p, mean="yes"), OpTypeError, "mean"),
        (lambda: nn.DistributedGradReducer(p, degree=0), OpValueError, "degree"),
        (lambda: nn.DistributedGradReducer(p, degree=1.5), OpValueError, "degree"),
        (lambda: nn.DistributedGradReducer(p, fusion_type="x"), OpTypeError, "fusion_type"),
        (lambda: nn.DistributedGradReducer(p, group="no_such_group"), OpValueError, "group"),
        (lambda: nn.DistributedGradReducer(p, degree=2)((ms.Tensor(np.zeros((2, 3))),) * 2), OpValueError,
         "1 gradients"),
        (lambda: nn.DistributedGradReducer(p, degree=2)((ms.Tensor(np.zeros((3, 2))),)), OpValueError, "shape"),
        (lambda: nn.DistributedGradReducer(p, degree=2)(([0.0],)), OpTypeError, "Tensors"),
    ]
    for call, cls, phrase in cases:
        with pytest.raises(cls) as info:
            call()
        msg = str(info.value)
        assert phrase in msg, msg
        assert "DistributedGradReducer" in msg or "communication" in msg, msg


def _params(*shapes, dtype=np.float32):
    return [ms.Parameter(ms.Tensor(np.zeros(s, dtype)), name=f"p{i}") for i, s in enumerate(shapes)]


def test_bucket_plans():
    ps = _params((256, 256), (256,), (256, 10), (10,))        # 256 KB, 1 KB, 10 KB, 40 B
    assert [list(b.params) for b in plan_buckets(ps)] == [[3, 2, 1, 0]]          # auto: 64 MB
    size = {"allreduce": {"mode": "size", "config": 0.05}}                       # 52 KB buckets
    assert [list(b.params) for b in plan_buckets(ps, size)] == [[3, 2, 1], [0]]
    index = {"allreduce": {"mode": "index", "config": [2]}}
    assert [list(b.params) for b in plan_buckets(ps, index)] == [[2, 3], [0, 1]]
    assert [list(b.params) for b in plan_buckets(ps, None, [1, 3])] == [[3], [1, 2], [0]]
    assert [list(b.params) for b in plan_buckets(ps, {"openstate": False})] == [[3], [2], [1], [0]]
    # a bucket never mixes wire dtypes; float16 travels as float32, float64 as itself
    mixed = _params((4,), (4,)) + _params((4,), dtype=np.float64) + _params((4,), dtype=np.float16)
    plans = plan_buckets(mixed)
    assert [list(b.params) for b in plans] == [[3], [2], [1, 0]]
    assert [str(b.dtype) for b in plans] == ["float32", "float64", "float32"]
    assert plans[2].offsets == (0, 4, 8) and plans[2].numel == 8


def test_reducer_reads_comm_fusion_from_context():
    ps = _params((64, 64), (64,), (64, 64), (64,))
    ms.set_auto_parallel_context(comm_fusion={"allreduce": {"mode": "size", "config": 0.02}})
    assert len(nn.DistributedGradReducer(ps).buckets) == 2
    ms.set_auto_parallel_context(all_reduce_fusion_config=[1, 2, 3], comm_fusion={"allreduce": {"mode": "auto"}})
    assert len(nn.DistributedGradReducer(ps).buckets) == 4


# ---- the tape's gradient-ready hook -----------------------------------------------------------

def test_grad_ready_hook_fires_once_per_leaf_when_final_in_reverse_layer_order():
    net = _mlp()
    seen = []
    with tape.register_grad_ready_hook(lambda t, g: seen.append((t.name, g.asnumpy().copy()))):
        grads, _ = _grads(net)
    names = [n for n, _ in seen]
    assert sorted(names) == sorted(p.name for p in net.trainable_params())
    assert names.index("2.weight") < names.index("0.weight") and names.index("2.bias") < names.index("0.bias")
    # what the hook saw is the final gradient
    by_name = dict(seen)
    for p, g in zip(net.trainable_params(), grads):
        np.testing.assert_array_equal(by_name[p.name], g.asnumpy())
    seen.clear()
    _grads(net)                     # removed by the with-block
    assert seen == []


def test_grad_ready_hook_for_a_weight_used_twice_fires_after_both_uses():
    w = ms.Parameter(ms.Tensor(np.array([2.0])), name="w")
    u = ms.Parameter(ms.Tensor(np.array([3.0])), name="u")
    calls = []

    def fn(x):
        h = x * w               # first use of w
        h = h * u
        return (h * w).sum()    # second use: w's gradient is final only after this node's backward

    with tape.register_grad_ready_hook(lambda t, g: calls.append((t.name, float(g.asnumpy()[0])))):
        gw, gu = ms.grad(fn, None, (w, u))(ms.Tensor(np.array([5.0])))
    # d/dw (x*w*u*w) = 2*x*w*u = 60, d/du = x*w*w = 20
    assert dict(calls) == {"w": 60.0, "u": 20.0}
    assert float(gw.asnumpy()[0]) == 60.0 and float(gu.asnumpy()[0]) == 20.0


def test_grad_ready_hook_reports_unused_leaf_as_none_and_ignores_inner_gradients():
    w = ms.Parameter(ms.Tensor(np.array([2.0])), name="w")
    unused = ms.Parameter(ms.Tensor(np.array([1.0])), name="unused")
    calls = []

    def inner(x):
        return (x * w * w).sum()

    def fn(x):
        g = ms.grad(inner, 0)(x)        # a gradient inside the forward pass: not reported
        return (g * w).sum()

    with tape.register_grad_ready_hook(lambda t, g: calls.append((t.name, g))):
        ms.grad(fn, None, (w, unused))(ms.Tensor(np.array([1.0])))
    assert [n for n, _ in calls] == ["w", "unused"]
    assert calls[1][1] is None
    # d/dw (w^2 * w) = 3 w^2 = 12
    assert float(calls[0][1].asnumpy()[0]) == 12.0


# ---- the auto-parallel context ---------------------------------------------------------------

def test_auto_parallel_context_stores_every_key():
    ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.HYBRID_PARALLEL, device_num=8, global_rank=3,
                                 gradients_mean=True, loss_repeated_mean=False, search_mode="sharding_propagation",
                                 enable_parallel_optimizer=True, pipeline_stages=2, full_batch=True,
                                 parallel_optimizer_config={"optimizer_level": "level2",
                                                            "parallel_optimizer_threshold": 32},
                                 strategy_ckpt_config={"save_file": "/tmp/s.json"},
                                 comm_fusion={"allreduce": {"mode": "size", "config": 32}})
    get = ms.get_auto_parallel_context
    assert (get("parallel_mode"), get("device_num"), get("global_rank")) == ("hybrid_parallel", 8, 3)
    assert get("gradients_mean") is True and get("loss_repeated_mean") is False
    assert get("search_mode") == "sharding_propagation" and get("pipeline_stages") == 2
    assert get("full_batch") is True and get("dataset_strategy") == "full_batch"
    assert get("parallel_optimizer_config") == {"optimizer_level": "level2", "parallel_optimizer_threshold": 32}
    assert get("strategy_ckpt_config") == {"load_file": "", "save_file": "/tmp/s.json",
                                           "only_trainable_params": True}
    assert get("comm_fusion") == {"openstate": True, "allreduce": {"mode": "size", "config": 32.0}}
    ms.set_auto_parallel_context(dataset_strategy=((2, 1), (2,)))
    assert get("dataset_strategy") == ((2, 1), (2,)) and get("full_batch") is False
    ms.reset_auto_parallel_context()
    assert get("parallel_mode") == "stand_alone" and get("device_num") == 1 and get("global_rank") == 0
    assert get("comm_fusion")["allreduce"] == {"mode": "auto", "config": None}
    # returned containers are copies: mutating one changes nothing
    get("comm_fusion")["openstate"] = False
    assert get("comm_fusion")["openstate"] is True
    from minispore import context
    assert context.set_auto_parallel_context is ms.set_auto_parallel_context
    assert context.ParallelMode.DATA_PARALLEL == "data_parallel"


@pytest.mark.parametrize("kwargs, cls, phrase", [
    ({"parallel_mode": "everything"}, OpValueError, "parallel_mode"),
    ({"device_num": 0}, OpValueError, "device_num"),
    ({"device_num": 5000}, OpValueError, "device_num"),
    ({"device_num": "2"}, OpTypeError, "device_num"),
    ({"global_rank": -1}, OpValueError, "global_rank"),
    ({"gradients_mean": 1}, OpTypeError, "gradients_mean"),
    ({"search_mode": "greedy"}, OpValueError, "search_mode"),
    ({"comm_fusion": {"allreduce": {"mode": "size", "config": -1}}}, OpValueError, "config"),
    ({"comm_fusion": {"allreduce": {"mode": "bucket"}}}, OpValueError, "mode"),
    ({"comm_fusion": {"allgather": {"mode": "index", "config": [1]}}}, OpValueError, "index"),
    ({"comm_fusion": {"broadcast": {}}}, OpValueError, "comm_fusion"),
    ({"comm_fusion": []}, OpTypeError, "comm_fusion"),
    ({"all_reduce_fusion_config": [3, 2]}, OpValueError, "increasing"),
    ({"all_reduce_fusion_config": "12"}, OpTypeError, "all_reduce_fusion_config"),
    ({"parallel_optimizer_config": {"optimizer_level": "level4"}}, OpValueError, "optimizer_level"),
    ({"parallel_optimizer_config": {"zero": 1}}, OpValueError, "parallel_optimizer_config"),
    ({"strategy_ckpt_config": {"save_file": 3}}, OpTypeError, "save_file"),
    ({"dataset_strategy": ((0, 1),)}, OpValueError, "dataset_strategy"),
    ({"full_batch": True, "dataset_strategy": "data_parallel"}, OpValueError, "agree"),
    ({"pipeline_stages": 0}, OpValueError, "pipeline_stages"),
    ({"no_such_key": 1}, OpValueError, "no_such_key"),
])
def test_auto_parallel_context_bad_values(kwargs, cls, phrase):
    with pytest.raises(cls) as info:
        ms.set_auto_parallel_context(loss_repeated_mean=False, **kwargs)
    assert "set_auto_parallel_context" in str(info.value) and phrase in str(info.value), str(info.value)
    assert ms.get_auto_parallel_context("loss_repeated_mean") is True    # nothing stored on error


# ---- dataset sharding ------------------------------------------------------------------------

def _rows(ds):
    return [int(r[0].asnumpy()) for r in ds.create_tuple_iterator()]


def test_num_shards_gives_each_rank_its_slice_of_the_global_batch():
    data = np.arange(16)
    shards = [_rows(ms.dataset.NumpySlicesDataset(data, ["i"], shuffle=False, num_shards=4, shard_id=r))
              for r in range(4)]
    assert shards[1] == [1, 5, 9, 13]
    # batch k of every shard together (local batch 2) = rows [8k, 8k+8) of the unsharded order
    for k in range(2):
        together = sorted(sum((s[2 * k:2 * k + 2] for s in shards), []))
        assert together == list(range(8 * k, 8 * k + 8))
    ds = ms.dataset.NumpySlicesDataset(data, ["i"], shuffle=False, num_shards=4, shard_id=0).batch(2)
    assert ds.get_dataset_size() == 2


def test_uneven_shards_wrap_around_and_shuffle_agrees_across_ranks():
    data = np.arange(10)
    shards = [_rows(ms.dataset.NumpySlicesDataset(data, ["i"], shuffle=False, num_shards=4, shard_id=r))
              for r in range(4)]
    assert shards == [[0, 4, 8], [1, 5, 9], [2, 6, 0], [3, 7, 1]]      # ceil(10/4) = 3 each
    shuffled = []
    for r in range(2):
        ms.set_seed(5)              # same seed on every rank -> same permutation, disjoint shards
        shuffled.append(_rows(ms.dataset.NumpySlicesDataset(data, ["i"], shuffle=True, num_shards=2, shard_id=r)))
    assert sorted(shuffled[0] + shuffled[1]) == list(range(10))


@pytest.mark.parametrize("kwargs, phrase", [
    ({"num_shards": 2}, "together"),
    ({"shard_id": 0}, "together"),
    ({"num_shards": 0, "shard_id": 0}, "num_shards"),
    ({"num_shards": 2, "shard_id": 2}, "shard_id"),
    ({"num_shards": 2.0, "shard_id": 0}, "num_shards"),
])
def test_shard_arguments_are_checked(kwargs, phrase):
    with pytest.raises((OpValueError, OpTypeError)) as info:
        ms.dataset.NumpySlicesDataset(np.arange(4), ["i"], **kwargs)
    assert "Dataset'" in str(info.value) and phrase in str(info.value), str(info.value)
