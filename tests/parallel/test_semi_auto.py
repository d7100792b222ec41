"""Semi-auto parallel in graph mode: `parallel_mode="semi_auto_parallel"` + `ops.MatMul().shard(...)`,
on 2 and 4 MPI ranks (tests/parallel/semi_auto_worker.py, one bounded run per world size).

For data parallel ((n, 1), (1, 1)), Megatron column-then-row parallel ((1, 1), (1, n)) /
((1, n), (n, 1)) and, on 4 ranks, 2 x 2 data x model parallel: the jitted forward equals NumPy's
float64 forward, the Megatron forward holds exactly one AllReduce, 20 training steps
(TrainOneStepCell in GRAPH_MODE, SGD and Adam) give the single-process losses within 1e-5
relative, and every parameter, gathered from its shards, equals the single-process one. Also a
vocabulary-parallel lookup (Gather with the table's rows split), the strategy file, and the
one-layer LLaMA of minispore/llm/model.py with Megatron's strategy set given as a parameter_plan
(Cell.shard): two AllReduces per layer forward, training equal to the single process.
"""
import json
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
WORKER = HERE / "semi_auto_worker.py"
sys.path.insert(0, str(HERE.parent / "communication"))
from mpi_harness import rank_results, needs_mpi  # noqa: E402


pytestmark = needs_mpi


def run_worker(n, scenarios, out_dir, timeout=120):
    return rank_results(WORKER, n, out_dir, (",".join(scenarios), out_dir), timeout)


@pytest.fixture(scope="module")
def two(tmp_path_factory):
    out = tmp_path_factory.mktemp("sa2")
    ranks = run_worker(2, ["dp_sgd", "mp_adam", "mpfn_sgd", "embed_adam", "llama_adam", "guard_x", "reshard_x"], out)
    ranks[0]["strategy_file"] = json.loads((out / "strategy.json").read_text())
    return ranks


@pytest.fixture(scope="module")
def four(tmp_path_factory):
    return run_worker(4, ["mp_sgd", "dpmp_adam", "llama_sgd", "reshard_x"], tmp_path_factory.mktemp("sa4"), timeout=240)


# local shapes of (w1 (4, 8), w2 (8, 4), b2 (4,)) per strategy and world size
SHARDS = {
    ("dp", 2): {"net.w1": [4, 8], "net.w2": [8, 4], "net.b2": [4]},
    ("mp", 2): {"net.w1": [4, 4], "net.w2": [4, 4], "net.b2": [4]},
    ("mpfn", 2): {"net.w1": [4, 4], "net.w2": [4, 4], "net.b2": [4]},
    ("mp", 4): {"net.w1": [4, 2], "net.w2": [2, 4], "net.b2": [4]},
    ("dpmp", 4): {"net.w1": [4, 4], "net.w2": [4, 4], "net.b2": [4]},
    ("embed", 2): {"net.table": [8, 4], "net.w": [4, 4]},
}


def _check(ranks, name, n):
    kind = name.split("_")[0]
    for r in ranks:
        res = r[name]
        assert res["forward_err"] < 1e-12
        assert res["loss_rel"] < 1e-5, (res["losses"], res["ref_losses"])
        assert max(res["param_err"].values()) < 1e-5, res["param_err"]
        if (kind, n) in SHARDS:
            assert res["local_shapes"] == SHARDS[(kind, n)]
        if "eval_rel" in res:                                   # a later graph over the shards
            assert res["eval_rel"] < 1e-10
    losses = [r[name]["losses"] for r in ranks]
    assert all(x == losses[0] for x in losses)               # every rank reports the same global loss


def test_data_parallel_two_ranks(two):
    _check(two, "dp_sgd", 2)
    # forward: the output's rows come back whole: one all_gather of a (4, 4) float64 block
    assert two[0]["dp_sgd"]["forward_comms"] == [["all_gather", 128]]


def test_megatron_two_ranks_one_all_reduce(two):
    _check(two, "mp_adam", 2)
    # exactly one AllReduce in the forward: the row-parallel product's (8, 4) float64 partial sum,
    # ring bytes 2 (p - 1) / p * 256
    assert two[1]["mp_adam"]["forward_comms"] == [["all_reduce", 256]]


def test_jitted_step_function_two_ranks(two):
    # value_and_grad + the optimizer inside one jitted function: the same joint graph partitioned
    _check(two, "mpfn_sgd", 2)


def test_differentiating_a_partitioned_graph_from_pynative_is_refused(two):
    msg = two[0]["guard_x"]["message"]
    assert "semi_auto_parallel" in msg and "TrainOneStepCell" in msg


def test_megatron_four_ranks(four):
    _check(four, "mp_sgd", 4)
    assert four[2]["mp_sgd"]["forward_comms"] == [["all_reduce", 384]]


def test_data_and_model_parallel_four_ranks(four):
    _check(four, "dpmp_adam", 4)
    # the (8, 4) output is a partial sum over the model axis and split in rows over the data axis:
    # reduce-scatter over the model pair (4 x 4 block: (2-1)/2 * 128 = 64 B), then one gather of
    # the four (2, 4) row blocks ((4 - 1) * 64 = 192 B)
    assert four[0]["dpmp_adam"]["forward_comms"] == [["reduce_scatter", 64], ["all_gather", 192]]


def test_vocabulary_parallel_lookup_two_ranks(two):
    _check(two, "embed_adam", 2)
    # forward: the masked lookup's (6, 4) float64 partial sum is all-reduced (2 (2-1)/2 * 192 B),
    # then the column-parallel product's (6, 4) blocks are gathered ((2-1) * 192 B)
    assert two[0]["embed_adam"]["forward_comms"] == [["all_reduce", 192], ["all_gather", 192]]
    assert len(set(two[0]["embed_adam"]["losses"])) > 1           # it trained


def test_strategy_file_records_every_parameter(two):
    data = two[0]["strategy_file"]
    layouts = data["parallel_layout_item"]
    assert layouts["net.table"]["dev_matrix"] == [2] and layouts["net.table"]["tensor_map"] == [0, -1]
    assert layouts["net.table"]["tensor_shape"] == [16, 4]
    assert layouts["net.w"]["tensor_map"] == [-1, 0] and layouts["net.w"]["tensor_shape"] == [4, 8]
    strategies = sorted(v["parallel_strategy"] for v in data["parallel_strategy_item"].values())
    assert strategies == [[[1, 1], [1, 2]], [[2, 1], [1]]]


def _llama_shards(n):
    """Megatron's shards of the one-layer LLaMA (dim 16, 4 heads of 4, ffn 32): column-parallel
    weights (out, in) by rows, row-parallel ones by columns, everything else whole."""
    m = "model.layers.0."
    out = {f"{m}attention.{w}.weight": [16 // n, 16] for w in ("wq", "wk", "wv")}
    out[f"{m}attention.wo.weight"] = [16, 16 // n]
    out.update({f"{m}feed_forward.{w}.weight": [32 // n, 16] for w in ("w1", "w3")})
    out[f"{m}feed_forward.w2.weight"] = [16, 32 // n]
    return out


@pytest.mark.parametrize("n", [2, 4])
def test_llama_megatron_strategy_set(n, two, four):
    ranks, name = (two, "llama_adam") if n == 2 else (four, "llama_sgd")
    _check(ranks, name, n)
    shapes = ranks[0][name]["local_shapes"]
    for k, v in _llama_shards(n).items():
        assert shapes[k] == v, k
    assert shapes["model.output.weight"] == [16, 16] and shapes["model.norm.weight"] == [16]
    # forward: exactly Megatron's two AllReduces per layer (after wo and after w2), each of the
    # (16, 16) float64 activations (2048 B): 2 (n-1)/n * 2048
    ring = 2 * (n - 1) * 2048 // n
    assert ranks[0][name]["forward_comms"] == [["all_reduce", ring], ["all_reduce", ring]]


@pytest.mark.parametrize("n", [2, 4])
def test_reshard_all_to_all_then_softmax(n, two, four):
    ranks = two if n == 2 else four
    for r in ranks:
        assert r["reshard_x"]["err"] < 1e-12
    # x (4n, 2n) float64 split by rows: block 8 * 2n * 8 B; ms.reshard to columns is one all_to_all,
    # (n-1)/n of the block; softmax over the rows then runs locally and the (4n, 2) column blocks
    # are gathered at the output, (n-1) * 4n * 2 * 8 B
    block = 4 * 2 * n * 8
    assert ranks[0]["reshard_x"]["comms"] == [["all_to_all", (n - 1) * block // n],
                                             ["all_gather", (n - 1) * 4 * n * 2 * 8]]
    # out_strategy ((n, 1),) on the row-parallel product (4n, 3): the partial sum is reduce-
    # scattered by rows ((n-1)/n of 4n * 3 * 8 B) and the (4, 3) row blocks gathered at the output
    full = 4 * n * 3 * 8
    for r in ranks:
        assert r["reshard_x"]["out_err"] < 1e-12
    assert ranks[0]["reshard_x"]["out_comms"] == [["reduce_scatter", (n - 1) * full // n],
                                                 ["all_gather", (n - 1) * 4 * 3 * 8]]
