"""Logit processors and the sampler: top-p, top-k, temperature, repetition penalty against
independent references (brute force, and HuggingFace's own processors when installed), the
sampled frequencies, and invalid parameters."""
import numpy as np
import pytest

from minispore.common.errors import OpValueError
from minispore.llm.sampling import (SamplingParams, apply_repetition_penalty, next_token_distribution, sample_next,
                                    top_k_filter, top_p_filter)


def nucleus_brute_force(logits, p):
    """Keep tokens from the most likely down until their probabilities add up to at least p."""
    probs = np.exp(logits - logits.max())
    probs /= probs.sum()
    kept, total = set(), 0.0
    for i in sorted(range(len(logits)), key=lambda i: -logits[i]):
        kept.add(i)
        total += probs[i]
        if total >= p:
            break
    return kept


@pytest.mark.parametrize("p", [0.05, 0.3, 0.5, 0.9, 0.999])
def test_top_p_keeps_the_smallest_nucleus(p):
    rng = np.random.default_rng(int(p * 1000))
    for _ in range(20):
        logits = rng.standard_normal(30) * 2
        kept = set(np.flatnonzero(np.isfinite(top_p_filter(logits, p))))
        assert kept == nucleus_brute_force(logits, p)
    assert top_p_filter(logits, 1.0) is logits


def test_top_k_and_repetition_penalty_by_hand():
    logits = np.array([1.0, 3.0, -2.0, 3.0, 0.5])
    np.testing.assert_array_equal(top_k_filter(logits, 2), [-np.inf, 3.0, -np.inf, 3.0, -np.inf])
    np.testing.assert_array_equal(top_k_filter(logits, 3), [1.0, 3.0, -np.inf, 3.0, -np.inf])
    # positive logits are divided by the penalty, negative ones multiplied; repeats count once
    out = apply_repetition_penalty(logits, [1, 2, 2], 2.0)
    np.testing.assert_array_equal(out, [1.0, 1.5, -4.0, 3.0, 0.5])
    np.testing.assert_array_equal(logits, [1.0, 3.0, -2.0, 3.0, 0.5])           # input untouched


def test_sampled_frequencies_follow_the_processed_distribution():
    logits = np.log(np.array([0.4, 0.3, 0.15, 0.1, 0.05]))
    # temperature 0.5 squares the probabilities (renormalized: 0.561, 0.316, 0.079, ...); top_p=0.8
    # then keeps the first two (the mass before the third, 0.877, is past 0.8)
    sq = np.array([0.4, 0.3, 0.15, 0.1, 0.05]) ** 2
    sq /= sq.sum()
    expect = np.zeros(5)
    expect[:2] = sq[:2] / sq[:2].sum()
    dist = next_token_distribution(logits, temperature=0.5, top_p=0.8)
    np.testing.assert_allclose(dist, expect, atol=1e-12)
    rng = np.random.default_rng(0)
    n = 6000
    draws = np.array([sample_next(logits, 0.5, None, rng, top_p=0.8) for _ in range(n)])
    np.testing.assert_allclose(np.bincount(draws, minlength=5) / n, expect, atol=0.025)
    # the repetition penalty lowers a seen token's share
    pen = next_token_distribution(logits, 1.0, repetition_penalty=3.0, history=[0])
    assert pen[0] < 0.4 * 0.9 and abs(pen.sum() - 1) < 1e-12


def test_greedy_ignores_the_rng_but_not_the_penalty():
    logits = np.array([0.1, 2.0, 1.9])
    rng = np.random.default_rng(0)
    state = rng.bit_generator.state
    assert sample_next(logits, 0.0, None, rng) == 1
    assert sample_next(logits, 0.0, None, rng, repetition_penalty=1.2, history=[1]) == 2
    assert rng.bit_generator.state == state


def test_matches_huggingface_logits_processors():
    torch = pytest.importorskip("torch")
    gen = pytest.importorskip("transformers.generation.logits_process")
    rng = np.random.default_rng(3)
    logits = rng.standard_normal((1, 50)) * 3
    history = rng.integers(0, 50, (1, 12))
    t = torch.tensor(logits)
    ids = torch.tensor(history)
    t = gen.RepetitionPenaltyLogitsProcessor(1.3)(ids, t)
    t = gen.TemperatureLogitsWarper(0.7)(ids, t)
    t = gen.TopKLogitsWarper(20)(ids, t)
    t = gen.TopPLogitsWarper(0.85)(ids, t)
    ref = torch.softmax(t, -1).numpy()[0]
    ours = next_token_distribution(logits[0], 0.7, 20, 0.85, 1.3, history[0])
    np.testing.assert_allclose(ours, ref, atol=1e-12)


@pytest.mark.parametrize("kw, name", [
    (dict(temperature=-1.0), "temperature"), (dict(temperature=float("nan")), "temperature"),
    (dict(top_k=0), "top_k"), (dict(top_k=2.5), "top_k"),
    (dict(top_p=0.0), "top_p"), (dict(top_p=1.5), "top_p"),
    (dict(repetition_penalty=0.0), "repetition_penalty"), (dict(max_new_tokens=-1), "max_new_tokens"),
    (dict(seed=-1), "seed"), (dict(seed=[1, "x"]), "seed"), (dict(stop_token_ids=[-3]), "stop_token_ids"),
    (dict(stop=[""]), "stop"),
])
def test_invalid_sampling_parameters_name_the_parameter(kw, name):
    with pytest.raises(OpValueError, match=f"'{name}'") as e:
        SamplingParams(**kw)
    assert "For 'generate'" in str(e.value)


def test_per_row_seeds():
    p = SamplingParams(seed=10)
    a = [r.random() for r in p.rngs(3)]
    assert a == [np.random.default_rng(10 + i).random() for i in range(3)]
    assert [r.random() for r in SamplingParams(seed=[4, 4]).rngs(2)] == [np.random.default_rng(4).random()] * 2
    with pytest.raises(OpValueError, match="one seed per prompt"):
        SamplingParams(seed=[1, 2]).rngs(3)
