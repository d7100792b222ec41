"""Pipeline parallelism (minispore/nn/pipeline.py): nn.PipelineCell over MPI point-to-point.

The multi-process tests run tests/parallel/pipeline_worker.py once under `mpiexec -n 2` and once
under `-n 4` (through tests/communication/mpi_harness.py). Every rank compares its pipeline run
with the single-process run on the same global batch (20 steps: losses within 1e-5 relative,
float64 models 1e-12; the parameters of its stage), its measured peak of saved micro-batch tapes
with the schedule's bound, and one step's p2p bytes with 2 m messages of b*s*h per chunk
boundary. Scenarios: pp2 GPipe / 1F1B / interleaved (v=2) on an MLP, pp2 1F1B in float32, pp2 on
the tiny LLaMA; on 4 ranks pp2 x dp2 (MLP and LLaMA), pp4 1F1B and pp4 interleaved. The
single-process tests cover the world of one (micro-batching equals the whole batch), the chain
rules and the refusals.
"""
import sys
from pathlib import Path

import numpy as np
import pytest

import minispore as ms
from minispore import nn
from minispore.common.errors import OpTypeError, OpValueError
from minispore.nn.pipeline import build_chunks
from minispore.parallel.pipeline_llama import LlamaPipelineLoss, assign_llama_stages, layers_per_stage

HERE = Path(__file__).parent
WORKER = HERE / "pipeline_worker.py"
sys.path.insert(0, str(HERE.parent / "communication"))
from mpi_harness import needs_mpi, rank_results  # noqa: E402

TWO = ["mlp_gpipe", "mlp_1f1b", "mlp_vpp2", "mlp32_1f1b", "llama_1f1b"]
FOUR = ["mlp_1f1b_dp2", "llama_1f1b_dp2", "mlp_1f1b", "mlp_vpp2", "mlp_gpipe_dp2"]


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    out = tmp_path_factory.mktemp("pipe2")
    return rank_results(WORKER, 2, out, (",".join(TWO + ["refusals"]), out), timeout=150)


@pytest.fixture(scope="module")
def four_ranks(tmp_path_factory):
    out = tmp_path_factory.mktemp("pipe4")
    return rank_results(WORKER, 4, out, (",".join(FOUR), out), timeout=240)


@pytest.fixture(autouse=True)
def _reset_context():
    ms.reset_auto_parallel_context()
    yield
    ms.reset_auto_parallel_context()


def _check(results, name):
    for r in results:
        res = r[name]
        tol = 1e-5 if name.startswith("mlp32") else 1e-12
        assert res["loss_rel"] < tol, (name, res["device"], res["loss_rel"])
        assert res["param_err"] < (1e-5 if tol == 1e-5 else 1e-12), (name, res["device"], res["param_err"])
        assert res["n_local_params"] > 0
        assert res["eval_rel"] < tol, (name, res["eval_rel"])
        assert res["last_loss"] < res["first_loss"]
        # the executor's saved tapes at their peak == the schedule's bound
        assert res["peak_measured"] == res["peak_predicted"] == res["peak_formula"], (name, res["device"])
        # p2p: every step after the first (which also sends the shape headers) sends exactly the
        # activations and gradients of this device's chunk boundaries
        assert res["p2p_bytes_steps"] == [res["p2p_bytes_expected"]], (name, res["device"])
        assert res["p2p_counted"] == res["p2p_bytes_expected"]
    # every rank returned the same loss curve
    curves = {tuple(r[name]["losses"]) for r in results}
    assert len(curves) == 1, name


@needs_mpi
@pytest.mark.parametrize("name", TWO)
def test_two_ranks_match_single_process(two_ranks, name):
    _check(two_ranks, name)


@needs_mpi
@pytest.mark.parametrize("name", FOUR)
def test_four_ranks_match_single_process(four_ranks, name):
    _check(four_ranks, name)


@needs_mpi
def test_two_ranks_peaks_follow_the_schedule(two_ranks):
    m = 4
    gp = [r["mlp_gpipe"]["peak_measured"] for r in two_ranks]
    f1 = [r["mlp_1f1b"]["peak_measured"] for r in two_ranks]
    assert gp == [m, m]                      # GPipe keeps every micro-batch
    assert f1 == [2, 1]                      # 1F1B: min(p - i, m)
    # per boundary and micro-batch: one activation forward, one gradient back (2 m per boundary)
    b_h_8 = (16 // m) * 16 * 8
    assert sum(r["mlp_1f1b"]["p2p_bytes_expected"] for r in two_ranks) == 2 * m * b_h_8
    # interleaved p=2, v=2: 3 chunk boundaries, 2 m messages each
    assert sum(r["mlp_vpp2"]["p2p_bytes_expected"] for r in two_ranks) == 3 * 2 * m * b_h_8


@needs_mpi
def test_two_ranks_refuse_bad_pipelines(two_ranks):
    for r in two_ranks:
        msgs = r["refusals"]
        assert msgs["interleave_m"].startswith("OpValueError") and "micro_size a multiple of" in msgs["interleave_m"]
        assert "PipelineCell" in msgs["interleave_m"] and "micro_size=3" in msgs["interleave_m"]
        assert msgs["stage_range"].startswith("OpValueError") and "in [0, 2)" in msgs["stage_range"]
        assert msgs["split"].startswith("OpValueError") and "micro_size=4" in msgs["split"]


@needs_mpi
def test_four_ranks_layout(four_ranks):
    res = [r["mlp_1f1b_dp2"] for r in four_ranks]
    assert [(x["device"], x["replica"]) for x in res] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert [r["mlp_1f1b"]["peak_measured"] for r in four_ranks] == [4, 3, 2, 1]


# ---- one process ------------------------------------------------------------------------------

def _mlp(stages, dtype=ms.float64):
    ms.set_seed(3)
    cells = [nn.Dense(4, 8, dtype=dtype), nn.Tanh(), nn.Dense(8, 8, dtype=dtype), nn.Tanh(),
             nn.Dense(8, 2, dtype=dtype)]
    for c, s in zip(cells[::2], stages):
        if s is not None:
            c.pipeline_stage = s
    return nn.WithLossCell(nn.SequentialCell(cells), nn.MSELoss())


def _data():
    g = np.random.default_rng(0)
    return ms.Tensor(g.standard_normal((8, 4))), ms.Tensor(g.standard_normal((8, 2)))


@pytest.mark.parametrize("sched,interleave", [("gpipe", False), ("1f1b", False), ("1f1b", True)])
def test_world_of_one_equals_the_whole_batch(sched, interleave):
    """One stage: micro-batching is gradient accumulation; with interleave the chunks pass locally."""
    x, y = _data()
    ref = _mlp([0, 0, 0])
    ref_loss, ref_grads = ms.value_and_grad(ref, None, ref.trainable_params())(x, y)
    ms.set_auto_parallel_context(pipeline_stages=1, pipeline_config={"pipeline_scheduler": sched,
                                                                     "pipeline_interleave": interleave})
    net = _mlp([0, 1, 2] if interleave else [0, 0, 0])
    pipe = nn.PipelineCell(net, micro_size=4)
    loss, grads = ms.value_and_grad(pipe, None, net.trainable_params())(x, y)
    assert float(loss.asnumpy()) == pytest.approx(float(ref_loss.asnumpy()), rel=1e-13)
    for g, r in zip(grads, ref_grads):
        np.testing.assert_allclose(g.asnumpy(), r.asnumpy(), rtol=1e-12, atol=1e-14)
    assert pipe.last_step["p2p_bytes"] == 0
    assert pipe.last_step["peak_in_flight"] == (4 if sched == "gpipe" else (3 if interleave else 1))
    # a loss scale (sens) scales every gradient; the reducer divides it back
    reducer = nn.PipelineGradReducer(net.trainable_params(), scale_sense=8.0)
    _, scaled = ms.value_and_grad(pipe, None, net.trainable_params(), sens_param=True)(x, y, ms.Tensor(8.0))
    for g, r in zip(reducer(scaled), ref_grads):
        np.testing.assert_allclose(g.asnumpy(), r.asnumpy(), rtol=1e-12, atol=1e-14)
    # no gradient taken: the forwards only, same loss
    assert float(pipe(x, y).asnumpy()) == pytest.approx(float(ref_loss.asnumpy()), rel=1e-13)


def test_world_of_one_llama_equals_model_loss():
    from minispore.llm.config import LlamaConfig
    from minispore.llm.model import Llama
    ms.set_seed(1)
    model = Llama(LlamaConfig(vocab_size=16, dim=16, n_layers=3, n_heads=2, max_seq_len=8, multiple_of=8,
                              tie_embeddings=False), attention="naive")
    for p in model.trainable_params():
        p.set_dtype(ms.float64)
    g = np.random.default_rng(2)
    tokens = ms.Tensor(g.integers(0, 16, (4, 8)), dtype=ms.int32)
    targets = ms.Tensor(g.integers(0, 16, (4, 8)), dtype=ms.int32)
    net = LlamaPipelineLoss(model)
    params = model.trainable_params()
    ref_loss, ref_grads = ms.value_and_grad(net, None, params)(tokens, targets)
    assert assign_llama_stages(model, 1) == [[0, 1, 2]]
    pipe = nn.PipelineCell(net, micro_size=2)
    loss, grads = ms.value_and_grad(pipe, None, params)(tokens, targets)
    assert float(loss.asnumpy()) == pytest.approx(float(ref_loss.asnumpy()), rel=1e-13)
    for a, b in zip(grads, ref_grads):
        np.testing.assert_allclose(a.asnumpy(), b.asnumpy(), rtol=1e-10, atol=1e-13)


def test_llama_stage_assignment():
    from minispore.llm.config import LlamaConfig
    from minispore.llm.model import Llama
    assert layers_per_stage(5, 2) == [3, 2] and layers_per_stage(4, 4) == [1, 1, 1, 1]
    model = Llama(LlamaConfig(vocab_size=16, dim=16, n_layers=5, n_heads=2, max_seq_len=8, multiple_of=8,
                              tie_embeddings=False))
    assert assign_llama_stages(model, 2) == [[0, 1, 2], [3, 4]]
    assert model.tok_embeddings.pipeline_stage == 0
    assert [layer.pipeline_stage for layer in model.layers] == [0, 0, 0, 1, 1]
    assert model.norm.pipeline_stage == 1 and model.output.pipeline_stage == 1
    chunks = build_chunks(LlamaPipelineLoss(model), 2, False)
    assert [len(c) for c in chunks] == [4, 4]          # embed + 3 layers | 2 layers + norm + head
    with pytest.raises(OpValueError, match="assign_llama_stages"):
        assign_llama_stages(model, 6)
    tied = Llama(LlamaConfig(vocab_size=16, dim=16, n_layers=2, n_heads=2, max_seq_len=8, multiple_of=8))
    with pytest.raises(OpValueError, match="tie_embeddings"):
        assign_llama_stages(tied, 2)


def test_chain_stages_inherit_and_group_into_chunks():
    net = _mlp([0, None, 1])
    chunks = build_chunks(net, 2, False)
    # Dense0 Tanh Dense1 Tanh | Dense2 MSELoss (unset stages run with the cell before them)
    assert [len(c) for c in chunks] == [4, 2]


def test_pipeline_stage_attribute():
    d = nn.Dense(2, 2)
    assert d.pipeline_stage == -1
    d.pipeline_stage = 3
    assert d.pipeline_stage == 3
    with pytest.raises(OpValueError, match="pipeline_stage"):
        d.pipeline_stage = -1
    with pytest.raises(OpTypeError, match="pipeline_stage"):
        d.pipeline_stage = 1.0
    with pytest.raises(OpTypeError, match="pipeline_stage"):
        d.pipeline_stage = True


def test_bad_input():
    x, y = _data()
    ms.set_auto_parallel_context(pipeline_stages=1)
    pipe = nn.PipelineCell(_mlp([0, 0, 0]), micro_size=3)
    with pytest.raises(OpValueError, match="PipelineCell.*micro_size"):
        pipe(x, y)                                      # 8 rows into 3 micro-batches
    with pytest.raises(OpValueError, match="PipelineCell"):
        nn.PipelineCell(_mlp([0, 0, 0]), micro_size=0)
    with pytest.raises(OpTypeError, match="PipelineCell"):
        nn.PipelineCell(_mlp([0, 0, 0]), micro_size=2.0)
    with pytest.raises(OpValueError, match="PipelineCell.*in \\[0, 1\\)"):
        nn.PipelineCell(_mlp([0, 0, 1]), micro_size=2)  # stage 1 with pipeline_stages=1
    with pytest.raises(OpValueError, match="no cells on stage"):
        build_chunks(_mlp([0, 0, 2]), 3, False)         # stage 1 empty
    with pytest.raises(OpValueError, match="non-decreasing"):
        build_chunks(_mlp([1, 0, 1]), 2, False)
    with pytest.raises(OpValueError, match="multiple of pipeline_stages"):
        build_chunks(_mlp([0, 1, 2]), 2, True)          # 3 virtual stages on 2 devices
    with pytest.raises(OpTypeError, match="chain"):
        nn.PipelineCell(nn.Dense(2, 2), micro_size=2)
    with pytest.raises(OpValueError, match="stage_config"):
        nn.PipelineCell(_mlp([0, 0, 0]), micro_size=2, stage_config={"nope": 0})
    ms.set_auto_parallel_context(pipeline_stages=2)
    with pytest.raises(OpValueError, match="dividing the number of processes"):
        nn.PipelineCell(_mlp([0, 0, 1]), micro_size=2)  # one process cannot hold two stages
    ms.set_auto_parallel_context(pipeline_stages=1, pipeline_config={"pipeline_interleave": True,
                                                                     "pipeline_scheduler": "gpipe"})
    with pytest.raises(OpValueError, match="1f1b"):
        nn.PipelineCell(_mlp([0, 0, 0]), micro_size=2)


def test_interleave_needs_micro_batches_in_groups_of_p():
    # the check lives in the schedule too; p = 1 accepts any m, so test the schedule's refusal
    from minispore.nn.pipeline_schedule import interleaved_1f1b
    with pytest.raises(OpValueError, match="multiple of the pipeline stages"):
        interleaved_1f1b(2, 3, 2)


def test_stage_config_sets_stages():
    ms.set_auto_parallel_context(pipeline_stages=1)
    net = _mlp([None, None, None])
    nn.PipelineCell(net, micro_size=2, stage_config={"_backbone.0": 0})
    assert net._backbone[0].pipeline_stage == 0
