"""Gradient clipping under tensor parallelism (llm/tensor_parallel.py `global_grad_norm`,
`clip_grad_norm`; nn/clip.py `sum_of_squares`).

A per-rank global norm over tensor-parallel shards is not the model's norm: a split parameter's
squares are spread over the tp ranks, a replicated parameter's are on each of them. The
multi-process tests run tests/parallel/tp_clip_worker.py under `mpiexec -n 2` and `-n 4` (one
job per world size: tp2, tp2 with sequence parallelism and tied embeddings, tp2 with a
replicated vocabulary; tp4, dp2 x tp2, dp2 x tp2 with SP and a replicated vocabulary) and check,
on every rank, that the distributed norm equals the single-process model's norm computed in
NumPy float64, and that 10 clipped AdamW steps give the single-process clipped parameters.
"""
import sys
from pathlib import Path

import numpy as np
import pytest

import minispore as ms
from minispore.common.errors import OpValueError
from minispore.llm import Llama, LlamaConfig
from minispore.llm.tensor_parallel import tensor_parallel_llama
from minispore.nn.clip import clip_by_global_norm, sum_of_squares

HERE = Path(__file__).parent
WORKER = HERE / "tp_clip_worker.py"
sys.path.insert(0, str(HERE.parent / "communication"))
from mpi_harness import rank_results, needs_mpi  # noqa: E402

CASES = {2: ["dp1tp2", "dp1tp2_sp_tied", "dp1tp2_embdp"], 4: ["dp1tp4", "dp2tp2", "dp2tp2_sp_embdp"]}
CLIP = 0.05          # tp_clip_worker.CLIP




def run_worker(n, out_dir):
    return rank_results(WORKER, n, out_dir, (",".join(CASES[n]), str(out_dir)), 240)


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    return run_worker(2, tmp_path_factory.mktemp("tpclip2"))


@pytest.fixture(scope="module")
def four_ranks(tmp_path_factory):
    return run_worker(4, tmp_path_factory.mktemp("tpclip4"))


def _all_cases():
    return [(n, case) for n in (2, 4) for case in CASES[n]]


def _rel(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return float(np.max(np.abs(a - b) / np.abs(b)))


@needs_mpi
@pytest.mark.parametrize("n,case", _all_cases())
def test_distributed_norm_is_the_single_process_norm(request, n, case):
    results = request.getfixturevalue("two_ranks" if n == 2 else "four_ranks")
    for r in results:
        res = r[case]
        assert res["dtypes"] == ["Float64"]
        assert _rel(res["norms"][0], res["ref_norms"][0]) < 1e-14       # same weights: only the sum order
        assert _rel(res["norms"], res["ref_norms"]) < 1e-13              # 10 steps of float64 round-off
        assert min(res["ref_norms"]) > 5 * CLIP                          # every step was really clipped
        # the per-rank norm of this rank's gradients is not the model's norm
        assert _rel(res["naive"][0], res["ref_norms"][0]) > 1e-3
        assert any(name.endswith("attention_norm.weight") for name in res["replicated"])
        assert any(name.endswith("wq.weight") for name in res["split"])
        assert ("tok_embeddings.embedding_table" in res["split"]) == ("embdp" not in case)


@needs_mpi
@pytest.mark.parametrize("n,case", _all_cases())
def test_ten_clipped_adamw_steps_equal_the_single_process_run(request, n, case):
    results = request.getfixturevalue("two_ranks" if n == 2 else "four_ranks")
    for r in results:
        assert r[case]["same_names"]
        assert r[case]["param_err"] < 1e-12, r[case]["param_err"]


# ---- one process ---------------------------------------------------------------------------------

def _tiny(tie=False):
    ms.set_seed(3)
    m = Llama(LlamaConfig(vocab_size=12, dim=8, n_layers=1, n_heads=2, n_kv_heads=1, ffn_dim=8, max_seq_len=6,
                          tie_embeddings=tie))
    for p in m.get_parameters():
        p.set_dtype(ms.float64)
    return m


def _grads(model):
    g = np.random.default_rng(0)
    ids = g.integers(0, 12, (2, 7))
    x, y = ms.Tensor(ids[:, :-1].astype(np.int64)), ms.Tensor(ids[:, 1:].astype(np.int64))
    _, grads = ms.value_and_grad(model.loss, None, model.trainable_params())(x, y)
    return grads


@pytest.mark.parametrize("tie", [False, True])
def test_world_of_one_norm_and_clip_are_the_plain_ones(tie):
    model = tensor_parallel_llama(_tiny(tie))
    grads = _grads(model)
    want = np.sqrt(sum(np.sum(g.asnumpy() ** 2) for g in grads))
    norm = model.global_grad_norm(grads)
    assert norm.dtype == ms.float64
    assert abs(float(norm.asnumpy()) - want) <= 1e-14 * want
    clip = 0.1 * want
    got = model.clip_grad_norm(grads, clip, model.trainable_params())
    ref = clip_by_global_norm(grads, clip)
    for a, b in zip(got, ref):
        np.testing.assert_allclose(a.asnumpy(), b.asnumpy(), rtol=1e-14, atol=0)
    np.testing.assert_allclose(got[0].asnumpy(), grads[0].asnumpy() * (clip / want), rtol=1e-13)


def test_sum_of_squares_and_a_float64_use_norm_keep_float64():
    xs = (ms.Tensor(np.array([1.0, 2.0])), ms.Tensor(np.array([[2.0]])))
    s = sum_of_squares(xs)
    assert s.dtype == ms.float64 and float(s.asnumpy()) == 9.0
    assert sum_of_squares(()) is None
    assert sum_of_squares((ms.Tensor(np.array([3.0], np.float16)),)).dtype == ms.float32
    norm = ms.Tensor(np.float64(1.0 + 1e-12))          # not representable in float32
    out = clip_by_global_norm(xs, 1.0, use_norm=norm)
    np.testing.assert_array_equal(out[0].asnumpy(), np.array([1.0, 2.0]) / (1.0 + 1e-12))


def test_bad_gradients_are_refused_by_name():
    model = tensor_parallel_llama(_tiny())
    grads = _grads(model)
    params = model.trainable_params()
    with pytest.raises(OpValueError, match="global_grad_norm"):
        model.global_grad_norm(grads[:-1], params)
    other = _tiny()
    with pytest.raises(OpValueError, match="parameters of this model"):
        model.global_grad_norm(grads, other.trainable_params())
    bad = list(grads)
    bad[0] = ms.Tensor(np.zeros(3))
    with pytest.raises(OpValueError, match="global_grad_norm"):
        model.global_grad_norm(tuple(bad), params)
    with pytest.raises(OpValueError, match="clip_by_global_norm"):
        model.clip_grad_norm(grads, -1.0, params)
