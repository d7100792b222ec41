"""Megatron-style tensor parallelism (minispore/parallel/megatron.py, minispore/llm/tensor_parallel.py).

The multi-process tests run tests/parallel/tp_worker.py under `mpiexec -n 2` and `-n 4` (one job
per world size, shared by the tests through a module fixture); every rank compares its part of
the parallel run with the single-process run it also computes (the worker's docstring says why
the training comparison is in float64). The single-process tests check the world-of-one case
(every layer is then the plain layer, bit for bit) and the errors.
"""
import json
import sys
from pathlib import Path

import numpy as np
import pytest

import minispore as ms
from minispore import nn
from minispore.common.errors import OpTypeError, OpValueError
from minispore.llm import Llama, LlamaConfig
from minispore.llm.tensor_parallel import TensorParallelLlama, check_divisible, tensor_parallel_llama
from minispore.ops import functional as F
from minispore.parallel.megatron import (ColumnParallelDense, RowParallelDense, VocabParallelEmbedding,
                                         gathered_parameters, vocab_parallel_cross_entropy)

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent / "communication"))
from mpi_harness import mpiexec_path, run_job, rank_results  # noqa: E402

WORKER = HERE / "tp_worker.py"


def run_worker(n, scenarios, out_dir, timeout=120):
    return rank_results(WORKER, n, out_dir, (",".join(scenarios), str(out_dir)), timeout)


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    return run_worker(2, ["layers", "train64", "train64_tied", "train32", "infer32", "errors"],
                      tmp_path_factory.mktemp("tp2"))


@pytest.fixture(scope="module")
def four_ranks(tmp_path_factory):
    return run_worker(4, ["layers", "train64", "infer32"], tmp_path_factory.mktemp("tp4"))


@pytest.fixture(params=[2, 4], ids=["tp2", "tp4"])
def ranks(request):
    return request.getfixturevalue("two_ranks" if request.param == 2 else "four_ranks")


# ------------------------------------------------------------------------------------------------
# multi-process
def test_each_layer_matches_its_single_process_layer(ranks):
    n = len(ranks)
    for res in ranks:
        layers = res["layers"]
        for name, checks in layers.items():
            for key, value in checks.items():
                if isinstance(value, float):
                    assert value < 1e-12, (res["rank"], name, key, value)
        # each rank holds 1/n of the split dimension
        assert layers["column_gather0"]["local_shape"] == [4, 6]
        assert layers["row_parallel_in1"]["local_shape"] == [5, 4]
        assert layers["embedding"]["local_shape"] == [4, 5]
        assert layers["embedding"]["forward_bits_equal"]          # one non-zero term per id: exact
        assert layers["uneven_vocab"]["forward_bits_equal"]
        # 4n + 1 rows: rank 0 holds one more (np.array_split's rule)
        assert layers["column_uneven"]["sizes"] == [5] + [4] * (n - 1)
        assert layers["column_uneven"]["local_shape"] == [5 if res["rank"] == 0 else 4, 6]
        assert layers["uneven_vocab"]["rows"] == (5 if res["rank"] == 0 else 4)
        assert res["size"] == n


def test_training_equals_single_process(ranks):
    """20 AdamW steps: losses within 1e-5 relative, gathered parameters within 1e-5 (float64: the
    observed figures are ~1e-15)."""
    for res in ranks:
        t = res["train64"]
        assert t["same_names"]
        assert t["loss_rel"] < 1e-5 and t["param_err"] < 1e-5, (res["rank"], t["loss_rel"], t["param_err"])
        assert t["last_loss"] < t["first_loss"] - 0.5          # it really trained
    # every rank saw the same (replicated) loss
    assert len({tuple(r["train64"]["tp_losses"]) for r in ranks}) == 1


def test_training_shards_have_the_expected_shapes(ranks):
    n = len(ranks)
    shapes = ranks[0]["train64"]["local_shapes"]
    assert shapes["tok_embeddings.embedding_table"] == [64 // n, 64]
    assert shapes["layers.0.attention.wq.weight"] == [64 // n, 64]          # 8 heads x 8
    assert shapes["layers.0.attention.wk.weight"] == [32 // n, 64]          # 4 kv heads x 8
    assert shapes["layers.0.attention.wo.weight"] == [64, 64 // n]
    assert shapes["layers.1.feed_forward.w1.weight"] == [96 // n, 64]
    assert shapes["layers.1.feed_forward.w2.weight"] == [64, 96 // n]
    assert shapes["layers.0.attention_norm.weight"] == [64]                # replicated
    assert shapes["output.weight"] == [64 // n, 64]


def test_tied_embeddings_uneven_vocabulary_and_float32(two_ranks):
    for res in two_ranks:
        tied = res["train64_tied"]                 # 65 tokens over 2 ranks: 33 + 32 rows
        assert "output.weight" not in tied["local_shapes"]
        assert tied["local_shapes"]["tok_embeddings.embedding_table"] == [33 - res["rank"], 64]
        assert tied["loss_rel"] < 1e-5 and tied["param_err"] < 1e-5
        # float32: the same computation up to rounding (reduction order differs in row-parallel
        # layers); recorded for the report, checked loosely
        f32 = res["train32"]
        assert f32["loss_rel"] < 1e-5 and f32["param_err"] < 1e-4


def test_generation_tokens_identical_and_kv_cache_sharded(ranks):
    n = len(ranks)
    for res in ranks:
        inf = res["infer32"]
        for key in ("tokens_contiguous", "tokens_paged", "tokens_None", "model_generate"):
            assert inf[key]["tp"] == inf[key]["ref"], (res["rank"], key)
        for key in ("contiguous_cache", "paged_cache", "paged_cache_unfused"):
            c = inf[key]
            assert c["tp_bytes"] * n == c["full_bytes"], (key, c)
            assert c["local_heads"] == 4 // n
            assert c["heads_err"] < 1e-5          # this rank's heads of the single-process cache
            assert c.get("logits_err", 0.0) < 1e-5
    # the ranks' caches hold different heads, the tokens are the same everywhere
    assert len({json.dumps(r["infer32"]["tokens_paged"]["tp"]) for r in ranks}) == 1


def test_indivisible_heads_are_refused_with_the_field_named(two_ranks):
    msg = two_ranks[0]["errors"]["message"]
    assert msg is not None and "tensor_parallel_llama" in msg and "n_kv_heads" in msg and "n_kv_heads=1" in msg


def test_cli_generate_tp2_prints_the_single_process_text(tmp_path, capsys):
    """`minispore generate --tp 2` (launched through msrun's launcher) on a `minispore train`
    checkpoint of the 65-character model: the same sampled text as one process, for both caches."""
    from minispore.cli import main
    mpiexec_path()                                   # skip without the dist extra
    out = tmp_path / "run"
    assert main(["train", "--max-iters", "3", "--out", str(out), "--n-layers", "1", "--dim", "32", "--n-heads", "2",
                 "--block-size", "16", "--batch-size", "2", "--eval-interval", "3", "--eval-iters", "1",
                 "--final-eval-iters", "1", "--no-progress", "--no-plot"]) == 0
    capsys.readouterr()
    for kv in ("contiguous", "paged"):
        argv = ["generate", "--ckpt", str(out), "--prompt", "ROMEO:", "--max-new-tokens", "24", "--seed", "3",
                "--kv-cache", kv]
        assert main(argv) == 0
        single = capsys.readouterr().out
        job = run_job([sys.executable, "-m", "minispore", *argv, "--tp", "2"], timeout=120, check=True)
        assert job.stdout == single and single.startswith("ROMEO:") and len(single) > 24
    # a split that cannot work is refused before any process starts
    assert main(["generate", "--ckpt", str(out), "--tp", "3"]) == 1
    assert "n_heads divisible by the tensor-parallel size 3" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------------
# one process (a world of one: every parallel layer is the plain layer)
def tiny(tie=False):
    return LlamaConfig(vocab_size=12, dim=16, n_layers=1, n_heads=4, n_kv_heads=2, ffn_dim=24, max_seq_len=8,
                       tie_embeddings=tie)


@pytest.mark.parametrize("tie", [False, True])
def test_world_of_one_is_the_plain_model(tie):
    ms.set_seed(0)
    model = Llama(tiny(tie))
    tp = tensor_parallel_llama(model)
    assert isinstance(tp, TensorParallelLlama)
    x = ms.Tensor(np.random.default_rng(0).integers(0, 12, (2, 6)).astype(np.int64))
    np.testing.assert_array_equal(tp(x).asnumpy(), model(x).asnumpy())
    assert float(tp.loss(x, x).asnumpy()) == pytest.approx(float(model.loss(x, x).asnumpy()), rel=1e-6)
    assert [p.name for p in tp.trainable_params()] == [p.name for p in model.trainable_params()]
    full = gathered_parameters(tp)
    for name, p in model.parameters_and_names():
        np.testing.assert_array_equal(full[name], p.asnumpy())
    # the copies are independent: training the parallel model leaves the original alone
    before = model.norm.weight.asnumpy().copy()
    tp.norm.weight.set_data(ms.Tensor(before * 2))
    np.testing.assert_array_equal(model.norm.weight.asnumpy(), before)


def test_vocab_parallel_cross_entropy_alone_matches_cross_entropy():
    rng = np.random.default_rng(1)
    z = ms.Tensor(rng.standard_normal((5, 7)) * 10)
    t = ms.Tensor(np.array([0, 6, -100, 3, 3]))
    a, ga = ms.value_and_grad(lambda v: vocab_parallel_cross_entropy(v, t))(z)
    b, gb = ms.value_and_grad(lambda v: F.cross_entropy(v, t))(z)
    assert float(a.asnumpy()) == pytest.approx(float(b.asnumpy()), rel=1e-12)
    np.testing.assert_allclose(ga.asnumpy(), gb.asnumpy(), atol=1e-14)


def test_check_divisible_names_the_field():
    cfg = LlamaConfig(vocab_size=12, dim=24, n_layers=1, n_heads=6, n_kv_heads=3, ffn_dim=24)
    check_divisible(cfg, 3)
    with pytest.raises(OpValueError, match="n_kv_heads"):
        check_divisible(cfg, 2)
    check_divisible(LlamaConfig(vocab_size=13, dim=16, n_layers=1, n_heads=4, ffn_dim=24), 2)   # uneven: fine
    with pytest.raises(OpValueError, match="vocab_size"):
        check_divisible(LlamaConfig(vocab_size=3, dim=16, n_layers=1, n_heads=4, ffn_dim=24), 4)
    with pytest.raises(OpValueError, match="hidden_dim"):
        check_divisible(LlamaConfig(vocab_size=12, dim=16, n_layers=1, n_heads=4, ffn_dim=25), 2)


def test_bad_input_names_the_op():
    with pytest.raises(OpTypeError, match="ColumnParallelDense"):
        ColumnParallelDense(nn.Embedding(4, 2))
    with pytest.raises(OpTypeError, match="RowParallelDense"):
        RowParallelDense("dense")
    with pytest.raises(OpTypeError, match="VocabParallelEmbedding"):
        VocabParallelEmbedding(nn.Dense(2, 2))
    with pytest.raises(OpTypeError, match="ColumnParallelDense"):
        ColumnParallelDense(nn.Dense(2, 2), group=3)
    with pytest.raises(OpValueError, match="ColumnParallelDense"):
        ColumnParallelDense(nn.Dense(3, 2))(ms.Tensor(np.ones((2, 4), np.float32)))
    with pytest.raises(OpValueError, match="vocab_parallel_cross_entropy"):
        vocab_parallel_cross_entropy(ms.Tensor(np.ones((2, 3))), ms.Tensor(np.array([0, 1, 2])))
    with pytest.raises(OpTypeError, match="tensor_parallel_llama"):
        tensor_parallel_llama(nn.Dense(2, 2))
    ms.set_seed(0)
    tp = tensor_parallel_llama(Llama(tiny()))
    with pytest.raises(OpValueError, match="save_pretrained"):
        tp.save_pretrained("/nonexistent")
