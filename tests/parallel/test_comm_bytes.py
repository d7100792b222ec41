"""Predicted communication == instrumented communication (issue 15, deliverable 9).

`parallel_plan.minispore_step_comm` predicts, from the config and the strategy alone, what one
rank of minispore's own LLaMA training step sends: {primitive: calls, payload bytes, ring bytes}.
The worker (comm_bytes_worker.py) runs that step under `mpiexec -n 2` and `-n 4` and reads
`ops.prims.comm.comm_bytes()`, which counts every collective the process issued - the TP
all-reduces / all-gathers / reduce-scatters of parallel/megatron.py, the gradient buckets of
nn.DistributedGradReducer, the parallel optimizer's collectives. Every scenario, every rank: the
two dicts are EQUAL (integers; the ring bytes of an all-reduce differ by rank when the buffer does
not split evenly into p chunks, and the prediction knows which rank gets which chunk).

Covered: DP 2/4 (one 64 MB bucket, small buckets with the overlap hook, unfused float32), TP 2/4
(vocabulary split, tied head, uneven vocabulary, vocab_emb_dp), TP + sequence parallel (both
head variants), dp2 x tp2 (with SP; with float32 and small buckets), ZeRO levels 1-3 (with and
without a threshold). Then single-process checks of the predictor itself.
"""
import sys
from pathlib import Path

import pytest

from minispore.common.errors import OpTypeError, OpValueError
from minispore.llm.config import LlamaConfig, get_preset
from minispore.llm.parallel_plan import ParallelStrategy, dp_buckets, minispore_step_comm

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent / "communication"))
sys.path.insert(0, str(HERE))
from mpi_harness import rank_results  # noqa: E402

import resume_worker as rw  # noqa: E402

WORKER = str(HERE / "comm_bytes_worker.py")
ENV = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}     # ranks share 2 cores
TWO = ["tp1dp2", "tp1dp2,bucket=0.004,overlap", "tp1dp2,unfused,float32", "tp2dp1", "tp2dp1,float32,tied",
       "tp2dp1,vocab=33", "tp2dp1,vocab_emb_dp", "tp2dp1,sp", "tp2dp1,sp,vocab_emb_dp", "tp1dp2,zero=level1",
       "tp1dp2,zero=level2,threshold=2", "tp1dp2,zero=level3"]
FOUR = ["tp1dp4", "tp4dp1", "tp4dp1,sp,vocab_emb_dp", "tp2dp2", "tp2dp2,sp", "tp2dp2,float32,bucket=0.002,overlap",
        "tp2dp2,vocab=34,bucket=0.003", "tp1dp4,zero=level1,threshold=2", "tp1dp4,zero=level2", "tp1dp4,zero=level3"]


def run_worker(n, scenarios, out_dir):
    return rank_results(WORKER, n, out_dir, (out_dir, *scenarios), 240, env=ENV)


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    out = {}
    for n, scenarios in ((2, TWO), (4, FOUR)):
        for res in run_worker(n, scenarios, tmp_path_factory.mktemp(f"comm{n}")):
            for scenario, v in res.items():
                out[(scenario, v["rank"])] = v
    return out


def predict(v):
    cfg = rw.config(tie_embeddings=v["tied"], vocab_size=v["vocab"])
    strategy = ParallelStrategy(data_parallel=v["dp"], model_parallel=v["tp"], use_seq_parallel=v["seq_parallel"],
                                vocab_emb_dp=v["vocab_emb_dp"], optimizer_level=v["zero"],
                                parallel_optimizer_threshold=v["zero_threshold"])
    return minispore_step_comm(cfg, strategy, batch_size=v["batch"], seq_len=v["seq"], dtype=v["dtype"],
                               rank=v["rank"], bucket_mb=v["bucket_mb"], fused=v["fused"])


@pytest.mark.parametrize("scenario,n", [(s, 2) for s in TWO] + [(s, 4) for s in FOUR])
def test_predicted_equals_instrumented(measured, scenario, n):
    for r in range(n):
        v = measured[(scenario, r)]
        assert v["comm"], f"{scenario}: rank {r} counted no communication"
        assert predict(v) == v["comm"], (scenario, r)


def test_the_scenarios_exercise_every_collective_kind(measured):
    kinds = set()
    for v in measured.values():
        kinds |= set(v["comm"])
    assert kinds == {"all_reduce", "all_gather", "reduce_scatter"}
    # buckets really split (several all-reduce calls where one bucket would be one call)
    assert measured[("tp1dp2", 0)]["comm"]["all_reduce"]["calls"] == 1
    assert measured[("tp1dp2,bucket=0.004,overlap", 0)]["comm"]["all_reduce"]["calls"] > 3
    # every rank of a 4-rank job counted the same payload (the ring share may differ, see below)
    assert len({measured[("tp2dp2", r)]["comm"]["all_reduce"]["payload"] for r in range(4)}) == 1


# ------------------------------------------------------------------------------------------------
# the predictor alone (no MPI)
TINY = LlamaConfig(vocab_size=32, dim=16, n_layers=2, n_heads=4, n_kv_heads=4, ffn_dim=32, max_seq_len=8,
                   multiple_of=16)


def test_tp_formula_by_hand():
    # N = 2 x 8 tokens, X = 16 x 16 float64 = 2048 B; vocabulary split:
    # all_reduce: embedding 1 + 4 per block x 2 + head 1 = 10 of X, 3 of N = 16 x 8 B
    got = minispore_step_comm(TINY, ParallelStrategy(model_parallel=2, vocab_emb_dp=False), batch_size=2,
                              seq_len=8, dtype="float64")
    assert got == {"all_reduce": {"calls": 13, "payload": 10 * 2048 + 3 * 128, "ring": 10 * 2048 + 3 * 128}}


def test_sequence_parallel_moves_the_bytes_of_tensor_parallel():
    """Ring-wise a reduce-scatter + an all-gather IS an all-reduce: SP's blocks send what TP's do."""
    tp = minispore_step_comm(TINY, ParallelStrategy(model_parallel=4, vocab_emb_dp=True), batch_size=1,
                             seq_len=8, dtype="float32")
    sp = minispore_step_comm(TINY, ParallelStrategy(model_parallel=4, vocab_emb_dp=True, use_seq_parallel=True),
                             batch_size=1, seq_len=8, dtype="float32")
    blocks = sp["all_gather"]["ring"] + sp["reduce_scatter"]["ring"]
    assert blocks == tp["all_reduce"]["ring"]            # 4L X each way (X divisible by 4: even chunks)


def test_ring_bytes_depend_on_the_rank_when_chunks_are_uneven():
    # 1 x 7 tokens: the cross-entropy's 7-element all-reduces cut into chunks 2, 2, 2, 1 over 4 ranks;
    # a ring rank sends every chunk but two, so ranks differ - and the four sum to exactly 2 (p-1) n
    got = [minispore_step_comm(TINY, ParallelStrategy(model_parallel=4, vocab_emb_dp=False), batch_size=1,
                               seq_len=7, dtype="float64", rank=r)["all_reduce"] for r in range(4)]
    ce = [g["ring"] - 10 * 7 * 16 * 8 * 2 * 3 // 4 for g in got]          # minus the even X all-reduces
    assert len(set(ce)) > 1 and sum(ce) == 3 * 2 * 3 * 7 * 8
    assert len({g["payload"] for g in got}) == 1


def test_dp_buckets_follow_the_reducer_rule():
    assert dp_buckets([10, 20, 30]) == [60]
    assert dp_buckets([10, 20, 30], fused=False) == [30, 20, 10]
    mb = 1 / (1 << 20)                                   # 1 byte
    assert dp_buckets([10, 20, 30], bucket_mb=35 * mb) == [30, 30]
    assert dp_buckets([10, 20, 30], bucket_mb=5 * mb) == [30, 20, 10]     # an oversized gradient: its own


def test_any_world_size_without_a_world():
    cfg = get_preset("llama-7b").model
    got = minispore_step_comm(cfg, ParallelStrategy(data_parallel=512, model_parallel=8, use_seq_parallel=True,
                                                    vocab_emb_dp=False),
                              batch_size=1, seq_len=4096, dtype="bfloat16", rank=4095)
    assert set(got) == {"all_reduce", "all_gather", "reduce_scatter"}
    x = 4096 * cfg.dim * 2
    assert got["reduce_scatter"]["payload"] == (4 * cfg.n_layers + 2) * x
    rows = minispore_step_comm(cfg, ParallelStrategy(data_parallel=512, model_parallel=8), batch_size=1,
                               seq_len=4096, dtype="bfloat16", by_purpose=True)
    assert any(g == "dp" for g, *_ in rows) and any(g == "tp" for g, *_ in rows)


@pytest.mark.parametrize("kwargs,exc,fragment", [
    (dict(strategy=ParallelStrategy(pipeline_stage=2)), OpValueError, "pipeline_stage"),
    (dict(strategy=ParallelStrategy(model_parallel=2, data_parallel=2, optimizer_level="level1")), OpValueError,
     "optimizer_level"),
    (dict(strategy=ParallelStrategy(model_parallel=3)), OpValueError, "n_heads"),
    (dict(strategy=ParallelStrategy(model_parallel=2, use_seq_parallel=True), seq_len=7), OpValueError, "seq_len"),
    (dict(rank=4, strategy=ParallelStrategy(data_parallel=4)), OpValueError, "rank"),
    (dict(dtype="int8"), OpValueError, "dtype"),
    (dict(strategy="dp2"), OpTypeError, "ParallelStrategy"),
])
def test_bad_input_names_the_problem(kwargs, exc, fragment):
    args = dict(strategy=ParallelStrategy(), batch_size=1, seq_len=8)
    args.update(kwargs)
    strategy = args.pop("strategy")
    with pytest.raises(exc) as e:
        minispore_step_comm(TINY, strategy, **args)
    assert fragment in str(e.value) and ("minispore_step_comm" in str(e.value) or "parallel_plan" in str(e.value))


def test_dryrun_command_lists_minispore_step(capsys):
    from minispore.cli import main
    assert main(["dryrun", "--model", "llama-7b", "--dp", "4", "--tp", "8", "--seq", "512", "--no-vocab-emb-dp",
                 "--minispore-step", "--rank", "9"]) == 0
    out = capsys.readouterr().out
    assert "minispore's own step, rank 9" in out and "gradient buckets" in out
    want = minispore_step_comm(get_preset("llama-7b").model, ParallelStrategy(data_parallel=4, model_parallel=8,
                                                                              vocab_emb_dp=False),
                               batch_size=1, seq_len=512, dtype="float32", rank=9)
    assert f"payload {want['all_reduce']['payload']:,} B" in out


def test_dryrun_rank_needs_minispore_step(capsys):
    from minispore.cli import main
    assert main(["dryrun", "--model", "llama-7b", "--dp", "2", "--rank", "1"]) != 0
    assert "--rank / --bucket-mb together with --minispore-step" in capsys.readouterr().err
