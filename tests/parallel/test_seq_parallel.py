"""Sequence parallelism (Korthikanti et al. 2022) and dp x tp for the Megatron-style LLaMA
(minispore/parallel/megatron.py, minispore/llm/tensor_parallel.py, TransformerOpParallelConfig).

Two MPI jobs run tests/parallel/sp_worker.py (its docstring names the cases): one on 2 ranks, one
on 4. Every case trains 20 AdamW steps and compares with the single-process run on the same
global batch; the communication of one step is checked collective by collective against the
hand-derived Korthikanti counts, and the norm/residual activations on the tape against their
shapes.

Traffic convention (ops/prims/comm.py comm_bytes()): per process, per primitive, `calls`,
`payload` = bytes of the send buffer handed to MPI (all-reduce and reduce-scatter: the whole
input; all-gather: this rank's block) and `ring` = bytes a ring algorithm sends from this rank
(all-reduce 2(p-1)/p n, reduce-scatter (p-1)/p n, all-gather (p-1) n_block). A ring all-reduce
is a reduce-scatter plus an all-gather, so in `ring` bytes sequence parallelism moves exactly
what tensor parallelism does. The gradient reducers (nn.DistributedGradReducer: the SP partial
gradients over tp, the dp mean) run after backward and count their buckets as all_reduce; they
are measured in a window of their own.
"""
import sys
from pathlib import Path

import numpy as np
import pytest

import minispore as ms
from minispore import nn
from minispore.common.errors import OpTypeError, OpValueError
from minispore.llm import Llama, LlamaConfig
from minispore.llm.config import TransformerOpParallelConfig
from minispore.llm.tensor_parallel import (ParallelGradReducer, as_parallel_config, check_divisible,
                                           tensor_parallel_llama)
from minispore.ops import functional as F
from minispore.parallel.megatron import (GatherFromSequenceParallelRegion, ReduceScatterToSequenceParallelRegion,
                                         RowParallelDense, sequence_chunk)

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent / "communication"))
from mpi_harness import rank_results  # noqa: E402

WORKER = HERE / "sp_worker.py"
TWO = ["dp1tp2", "dp1tp2_sp", "dp1tp2_sp_embdp_tied", "dp1tp2_embdp", "dp1tp2_sp_f32", "dp2tp1", "infer"]
FOUR = ["dp1tp4_sp", "dp2tp2", "dp2tp2_sp", "dp2tp2_sp_embdp_tied", "infer"]


def run_worker(n, cases, out_dir, timeout):
    return rank_results(WORKER, n, out_dir, (",".join(cases), str(out_dir)), timeout)


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    return run_worker(2, TWO, tmp_path_factory.mktemp("sp2"), timeout=240)


@pytest.fixture(scope="module")
def four_ranks(tmp_path_factory):
    return run_worker(4, FOUR, tmp_path_factory.mktemp("sp4"), timeout=360)


def parse(case):
    parts = case.split("_")
    dp, tp = parts[0][2:].split("tp")
    return dict(dp=int(dp), tp=int(tp), sp="sp" in parts, embdp="embdp" in parts, f32="f32" in parts)


def cases_of(ranks):
    return [c for c in (TWO if len(ranks) == 2 else FOUR) if c != "infer"]


@pytest.fixture(params=[2, 4], ids=["2ranks", "4ranks"])
def ranks(request):
    return request.getfixturevalue("two_ranks" if request.param == 2 else "four_ranks")


# ------------------------------------------------------------------------------------------------
def test_training_equals_single_process(ranks):
    """20 AdamW steps on the same global batch: losses within 1e-5 relative and gathered parameters
    within 1e-5 (the issue's bar); in float64 the runs are the same computation, so the observed
    ~1e-16 is asserted at 1e-12."""
    for res in ranks:
        for case in cases_of(ranks):
            t, k = res[case], parse(case)
            assert t["same_names"], case
            assert t["loss_rel"] < 1e-5 and t["param_err"] < 1e-5, (case, res["rank"], t["loss_rel"], t["param_err"])
            if not k["f32"]:
                assert t["loss_rel"] < 1e-12 and t["param_err"] < 1e-12, (case, t["loss_rel"], t["param_err"])
            assert t["ref_losses"][-1] < t["ref_losses"][0] - 0.5        # it really trained
    for case in cases_of(ranks):                                          # one loss curve everywhere
        assert len({tuple(r[case]["par_losses"]) for r in ranks}) == 1, case


def test_rank_layout_is_dp_major(four_ranks):
    """rank = dp_index * tp + tp_index: tp groups {0,1} {2,3}, dp groups {0,2} {1,3}."""
    for res in four_ranks:
        g, r = res["dp2tp2_sp"]["groups"], res["rank"]
        assert (g["dp_rank"], g["tp_rank"]) == divmod(r, 2)
        assert g["tp"].endswith(f"tensor_parallel_{r // 2}") and g["dp"].endswith(f"data_parallel_{r % 2}")


def test_shards_and_sequence_partial_parameters(ranks):
    for res in ranks:
        for case in cases_of(ranks):
            t, k = res[case], parse(case)
            shapes, p = t["local_shapes"], k["tp"]
            assert shapes["layers.0.attention.wq.weight"] == [32 // p, 32]           # 8 heads x 4
            assert shapes["layers.0.attention.wk.weight"] == [16 // p, 32]           # GQA: 4 kv heads split too
            assert shapes["layers.1.feed_forward.w2.weight"] == [32, 32 // p]
            table = shapes["tok_embeddings.embedding_table"]
            if k["embdp"]:
                assert table == [30, 32]                                             # replicated
            else:                                                                    # 30 rows, np.array_split
                assert table == [len(np.array_split(np.arange(30), p)[res["rank"] % p]), 32]
            norms = sorted(n for n in shapes if n.endswith("norm.weight"))
            if k["sp"]:
                expected = sorted(norms + (["tok_embeddings.embedding_table"] if k["embdp"] else []))
                assert t["partial_params"] == expected, case
                itemsize = 4 if k["f32"] else 8
                assert t["tp_reducer"] == {"calls": 1, "bytes": itemsize * sum(
                    int(np.prod(shapes[n])) for n in expected)}
            else:
                assert t["partial_params"] == [] and t["tp_reducer"]["calls"] == 0
            if k["dp"] > 1:                      # every local gradient averaged over the replicas
                itemsize = 4 if k["f32"] else 8
                assert t["dp_reducer"]["bytes"] == itemsize * sum(int(np.prod(s)) for s in shapes.values())
            # the reducers' window of comm_bytes(): exactly their buckets, one all_reduce each
            calls = t["tp_reducer"]["calls"] + t["dp_reducer"]["calls"]
            payload = t["tp_reducer"]["bytes"] + t["dp_reducer"]["bytes"]
            got = t["reduce"].get("all_reduce", {"calls": 0, "payload": 0})
            assert (got["calls"], got["payload"]) == (calls, payload) and set(t["reduce"]) <= {"all_reduce"}, case


def expected_traffic(k, L, X, N, f, tie_free=True):
    """{primitive: (calls, payload)} of one forward and of one forward + backward (Korthikanti
    §4.2.2; the ends as in tensor_parallel.py's docstring). X: bytes of one (rows, dim)
    activation of this replica, N rows, f itemsize, p = tp."""
    p = k["tp"]
    if not k["sp"]:
        if k["embdp"]:
            return {"all_reduce": (2 * L, 2 * L * X)}, {"all_reduce": (4 * L, 4 * L * X)}
        # embedding g (fwd), head f (bwd), three (N,) all-reduces of the vocabulary-parallel loss
        return ({"all_reduce": (2 * L + 1 + 3, (2 * L + 1) * X + 3 * N * f)},
                {"all_reduce": (4 * L + 2 + 3, (4 * L + 2) * X + 3 * N * f)})
    if k["embdp"]:
        fwd = {"all_gather": (2 * L, 2 * L * X // p), "reduce_scatter": (2 * L, 2 * L * X),
               "all_reduce": (1, 2 * f)}                                  # the loss's (sum, count)
        step = {"all_gather": (4 * L, 4 * L * X // p), "reduce_scatter": (4 * L, 4 * L * X), "all_reduce": (1, 2 * f)}
        return fwd, step
    # + the embedding's reduce-scatter and the head input's all-gather (and their conjugates)
    fwd = {"all_gather": (2 * L + 1, (2 * L + 1) * X // p), "reduce_scatter": (2 * L + 1, (2 * L + 1) * X),
           "all_reduce": (3, 3 * N * f)}
    step = {"all_gather": (4 * L + 2, (4 * L + 2) * X // p), "reduce_scatter": (4 * L + 2, (4 * L + 2) * X),
            "all_reduce": (3, 3 * N * f)}
    return fwd, step


def test_communication_per_step_equals_the_korthikanti_counts(ranks):
    for res in ranks:
        for case in cases_of(ranks):
            t, k = res[case], parse(case)
            L, X, N, f, p = t["n_layers"], t["X"], t["rows"], t["itemsize"], k["tp"]
            if p == 1:                   # pure data parallel: the one-rank tp group moves nothing
                assert all(v["payload"] == v["ring"] == 0 for v in t["step"].values()), case
                continue
            fwd, step = expected_traffic(k, L, X, N, f)
            for measured, expected in ((t["forward"], fwd), (t["step"], step)):
                got = {name: (v["calls"], v["payload"]) for name, v in measured.items()}
                assert got == expected, (case, got, expected)
            # ring bytes: with SP the layers' all-gathers + reduce-scatters move exactly what TP's
            # all-reduces would, 2(p-1)/p X each: (4L + 2 ends) of them per step (4L with vocab_emb_dp)
            layers_and_ends = 4 * L + (0 if k["embdp"] else 2)
            tp_ring = layers_and_ends * 2 * (p - 1) * X // p
            if k["sp"]:
                s = t["step"]
                assert s["all_gather"]["ring"] + s["reduce_scatter"]["ring"] == tp_ring, case
                assert s["all_gather"]["ring"] == s["reduce_scatter"]["ring"] == tp_ring // 2
            else:
                loss_ring = 0 if k["embdp"] else 3 * 2 * (p - 1) * N * f // p
                assert t["step"]["all_reduce"]["ring"] == tp_ring + loss_ring, case


def test_norm_residual_activations_are_one_tp_th(ranks):
    """The tape's norm nodes hold, per layer, the stream x, both norm outputs, the attention
    branch a, the stream h = x + a (5 tensors of (rows, dim)) and two 1/rms (rows, 1), plus the
    final norm's 2 + 1: measured on the tape, equal to the shapes' count, and 1/tp of the
    tensor-parallel figure under sequence parallelism (rows = this replica's batch*seq / tp)."""
    for res in ranks:
        for case in cases_of(ranks):
            t, k = res[case], parse(case)
            L, f, dim = t["n_layers"], t["itemsize"], 32
            rows = t["rows"] // (k["tp"] if k["sp"] else 1)
            assert t["norm_bytes"]["rows"] == [rows], case
            assert t["norm_bytes"]["bytes"] == ((5 * L + 2) * dim + (2 * L + 1)) * rows * f, case
            assert t["norm_bytes"]["bytes"] * k["dp"] * (k["tp"] if k["sp"] else 1) == t["ref_norm_bytes"]["bytes"]
    two = ranks[0]
    if "dp1tp2" in two:
        assert two["dp1tp2_sp"]["norm_bytes"]["bytes"] * 2 == two["dp1tp2"]["norm_bytes"]["bytes"]


def test_generation_with_a_sequence_parallel_model_gives_the_single_process_tokens(ranks):
    for res in ranks:
        for kv in ("contiguous", "paged"):
            assert res["infer"][kv]["par"] == res["infer"][kv]["ref"], (res["rank"], kv)


# ------------------------------------------------------------------------------------------------
# one process: the world of one, the config, the errors
def tiny(tie=False, **kw):
    base = dict(vocab_size=12, dim=16, n_layers=2, n_heads=4, n_kv_heads=2, ffn_dim=24, max_seq_len=8,
                tie_embeddings=tie)
    base.update(kw)
    return LlamaConfig(**base)


@pytest.mark.parametrize("tie", [False, True])
@pytest.mark.parametrize("vocab_emb_dp", [False, True])
def test_world_of_one_sequence_parallel_is_the_plain_model(tie, vocab_emb_dp):
    ms.set_seed(0)
    model = Llama(tiny(tie))
    for p in model.get_parameters():
        p.set_dtype(ms.float64)
    par = tensor_parallel_llama(model, parallel_config={"use_seq_parallel": True, "vocab_emb_dp": vocab_emb_dp})
    x = ms.Tensor(np.random.default_rng(0).integers(0, 12, (2, 6)).astype(np.int64))
    y = ms.Tensor(np.random.default_rng(1).integers(0, 12, (2, 6)).astype(np.int64))
    a, ga = ms.value_and_grad(model.loss, None, model.trainable_params())(x, y)
    b, gb = ms.value_and_grad(par.loss, None, par.trainable_params())(x, y)
    assert float(b.asnumpy()) == pytest.approx(float(a.asnumpy()), rel=1e-13)
    gb = par.grad_reducer(par.trainable_params())(gb)       # nothing to reduce over one rank
    for g1, g2 in zip(ga, gb):
        np.testing.assert_allclose(g2.asnumpy(), g1.asnumpy(), rtol=1e-11, atol=1e-14)
    np.testing.assert_allclose(par(x).asnumpy(), model(x).asnumpy(), rtol=1e-12)
    assert [p.name for p in par.trainable_params()] == [p.name for p in model.trainable_params()]


def test_sequence_parallel_region_operators_are_identities_on_one_rank():
    x = ms.Tensor(np.arange(24.0).reshape(6, 4))
    g, rs = GatherFromSequenceParallelRegion(), ReduceScatterToSequenceParallelRegion()
    np.testing.assert_array_equal(g(x, 2).asnumpy(), x.asnumpy())
    np.testing.assert_array_equal(rs(x, 3).asnumpy(), x.asnumpy())
    grad = ms.grad(lambda t: F.sum(rs(g(t, 2), 2) * 3.0))(x)
    np.testing.assert_array_equal(grad.asnumpy(), np.full((6, 4), 3.0))
    # a chunk of the positions: [r s/p, (r+1) s/p) along the axis
    ids = ms.Tensor(np.arange(12).reshape(2, 6))
    np.testing.assert_array_equal(sequence_chunk("t", ids, 1, 3, 1).asnumpy(), [[2, 3], [8, 9]])


def test_parallel_config_fields_and_dict_round_trip():
    pc = TransformerOpParallelConfig(data_parallel=2, model_parallel=4, use_seq_parallel=True)
    assert pc.vocab_emb_dp is True and pc.world_size == 8             # MindSpore's default: replicated
    assert TransformerOpParallelConfig.from_dict(pc.to_dict()) == pc
    with pytest.raises(OpValueError, match="TransformerOpParallelConfig.*model_parallel"):
        TransformerOpParallelConfig(model_parallel=0)
    with pytest.raises(OpValueError, match="use_seq_parallel"):
        TransformerOpParallelConfig(use_seq_parallel="false")
    with pytest.raises(OpValueError, match="unknown keys \\['pipeline_segments'\\]"):
        TransformerOpParallelConfig.from_dict({"pipeline_segments": 2})
    with pytest.raises(OpTypeError, match="TransformerOpParallelConfig.from_dict"):
        TransformerOpParallelConfig.from_dict([1])


def test_pipeline_and_layout_errors_name_the_field():
    for field in ("pipeline_stage", "micro_batch_num"):
        with pytest.raises(OpValueError, match=f"tensor_parallel_llama.*parallel_config.{field} = 1.*pipeline"):
            as_parallel_config({field: 2})
    with pytest.raises(OpTypeError, match="parallel_config"):
        as_parallel_config("dp2")
    ms.set_seed(0)
    model = Llama(tiny())
    with pytest.raises(OpValueError, match=r"data_parallel x model_parallel equal to the number of processes \(1\)"):
        tensor_parallel_llama(model, parallel_config=TransformerOpParallelConfig(model_parallel=2))
    with pytest.raises(OpValueError, match="either 'group'"):
        tensor_parallel_llama(model, group="hccl_world_group", parallel_config={})
    with pytest.raises(OpValueError, match="dropout = 0 with use_seq_parallel"):
        tensor_parallel_llama(Llama(tiny(dropout=0.1)), parallel_config={"use_seq_parallel": True})
    # GQA: key/value heads must split over the tensor-parallel ranks, like the query heads
    with pytest.raises(OpValueError, match="n_kv_heads divisible by the tensor-parallel size 4.*n_kv_heads=2"):
        check_divisible(tiny(n_heads=4, n_kv_heads=2), 4)
    check_divisible(tiny(vocab_size=2, n_kv_heads=4), 4, vocab_parallel=False)   # replicated table: any vocabulary


def test_region_and_layer_bad_input_names_the_op():
    x = ms.Tensor(np.ones((6, 4)))
    with pytest.raises(OpValueError, match="GatherFromSequenceParallelRegion.*'batch'"):
        GatherFromSequenceParallelRegion()(x, 4)
    with pytest.raises(OpValueError, match="ReduceScatterToSequenceParallelRegion.*2-D"):
        ReduceScatterToSequenceParallelRegion()(ms.Tensor(np.ones(6)), 1)
    with pytest.raises(OpValueError, match="sequence length divisible by the tensor-parallel size 2"):
        sequence_chunk("TensorParallelLlama.loss", ms.Tensor(np.ones((2, 5))), 1, 2, 0)
    with pytest.raises(OpValueError, match="RowParallelDense.*reduce_output=False"):
        RowParallelDense(nn.Dense(4, 4, has_bias=True), reduce_output=False)
    ms.set_seed(0)
    par = tensor_parallel_llama(Llama(tiny()), parallel_config={"use_seq_parallel": True})
    with pytest.raises(OpValueError, match="data_parallel_batch"):
        par.data_parallel_batch(np.ones((2, 3)))
    with pytest.raises(OpValueError, match="TensorParallelLlama.loss.*targets"):
        par.loss(ms.Tensor(np.zeros((2, 4), np.int64)), ms.Tensor(np.zeros((2, 3), np.int64)))
    with pytest.raises(OpTypeError, match="ParallelGradReducer"):
        ParallelGradReducer(Llama(tiny()), [])
