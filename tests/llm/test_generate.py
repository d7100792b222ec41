"""Sampling and generation: the KV cache gives exactly the tokens of the naive loop (also once the
context window slides), temperature / top-k semantics, seeds, and bad input."""
import numpy as np
import pytest

import minispore as ms
from minispore.common.errors import OpTypeError, OpValueError
from minispore.dataset import CharTokenizer
from minispore.llm import Llama, LlamaConfig, generate, generate_text, sample_next


def model64(**kw):
    base = dict(vocab_size=13, dim=16, n_layers=2, n_heads=4, n_kv_heads=2, max_seq_len=8, multiple_of=8,
                tie_embeddings=False)
    base.update(kw)
    ms.set_seed(3)
    m = Llama(LlamaConfig(**base))
    for p in m.get_parameters():
        p.set_dtype(ms.float64)
        # larger weights than the 0.02 init: a peaked, prompt-dependent next-token distribution
        p.set_data(ms.Tensor(p.asnumpy() * 20 if p.ndim == 2 else p.asnumpy()))
    return m


def naive_generate(model, ids, n, temperature, top_k, seed):
    """The textbook loop: run the full (cropped) context for every new token."""
    rng = np.random.default_rng(seed)
    ids = list(ids)
    out = []
    for _ in range(n):
        ctx = np.asarray([ids[-model.config.max_seq_len:]], dtype=np.int64)
        logits = model(ms.Tensor(ctx)).asnumpy()[0, -1]
        nxt = sample_next(logits, temperature, top_k, rng)
        out.append(nxt)
        ids.append(nxt)
    return out


@pytest.mark.parametrize("temperature, top_k", [(0.0, None), (1.0, None), (0.8, 3)])
def test_cached_generation_equals_the_naive_loop_past_the_context_length(temperature, top_k):
    m = model64()
    prompt = [1, 2, 3]
    n = 20                                       # 3 + 20 > max_seq_len = 8: the window slides
    expected = naive_generate(m, prompt, n, temperature, top_k, seed=7)
    assert generate(m, prompt, n, temperature, top_k, seed=7, use_cache=True) == expected
    assert generate(m, prompt, n, temperature, top_k, seed=7, use_cache=False) == expected
    assert len(set(expected)) > 2                # the test would be vacuous on a constant stream


def test_long_prompt_is_cropped_to_the_context():
    m = model64()
    prompt = list(np.random.default_rng(0).integers(0, 13, 30))
    assert generate(m, prompt, 5, 0.0, None) == naive_generate(m, prompt, 5, 0.0, None, 0)


def test_top_k_one_is_greedy_and_seeds_reproduce():
    m = model64()
    greedy = generate(m, [4], 12, temperature=0.0, top_k=None)
    assert generate(m, [4], 12, temperature=1.5, top_k=1, seed=11) == greedy
    a = generate(m, [4], 12, temperature=1.0, top_k=None, seed=5)
    assert generate(m, [4], 12, temperature=1.0, top_k=None, seed=5) == a
    assert any(generate(m, [4], 12, temperature=1.0, top_k=None, seed=s) != a for s in range(6, 10))


def test_generation_leaves_training_mode_and_global_rng_alone():
    m = model64(dropout=0.2)
    m.set_train(True)
    ms.set_seed(42)
    state = ms.get_rng_state()
    generate(m, [1, 2], 10, seed=1)
    assert m.training
    assert ms.get_rng_state() == state


def test_sample_next_temperature_and_top_k_distribution():
    logits = np.log(np.array([0.5, 0.25, 0.15, 0.1]))
    rng = np.random.default_rng(0)
    n = 8000
    draws = np.array([sample_next(logits, 1.0, None, rng) for _ in range(n)])
    np.testing.assert_allclose(np.bincount(draws, minlength=4) / n, [0.5, 0.25, 0.15, 0.1], atol=0.025)
    # top-2 renormalizes over the two most likely: 2/3, 1/3
    draws = np.array([sample_next(logits, 1.0, 2, rng) for _ in range(n)])
    np.testing.assert_allclose(np.bincount(draws, minlength=4) / n, [2 / 3, 1 / 3, 0, 0], atol=0.025)
    # temperature 0.5 squares the probabilities (then renormalizes)
    p = np.array([0.5, 0.25, 0.15, 0.1]) ** 2
    draws = np.array([sample_next(logits, 0.5, None, rng) for _ in range(n)])
    np.testing.assert_allclose(np.bincount(draws, minlength=4) / n, p / p.sum(), atol=0.025)
    assert sample_next(logits, 0.0, None, rng) == 0


def test_generate_text_with_a_tokenizer():
    tok = CharTokenizer("abcdefghijklm")
    m = model64()
    text = generate_text(m, tok, "cab", max_new_tokens=15, seed=0)
    assert text.startswith("cab") and len(text) == 18 and set(text) <= set(tok.chars)
    with pytest.raises(OpValueError, match="generate") as e:
        generate_text(m, tok, "cat!", 5)
    assert "'!t'" in str(e.value)                 # names the characters the model has never seen
    with pytest.raises(OpValueError, match="non-empty"):
        generate_text(m, tok, "", 5)
    with pytest.raises(OpTypeError, match="generate"):
        generate_text(m, tok, [1, 2], 5)


@pytest.mark.parametrize("kw", [dict(max_new_tokens=-1), dict(temperature=-0.5), dict(top_k=0),
                                dict(seed=-3), dict(max_new_tokens=2.5)])
def test_bad_generation_arguments(kw):
    args = dict(max_new_tokens=3, temperature=0.8, top_k=None, seed=0)
    args.update(kw)
    with pytest.raises(OpValueError, match="generate"):
        generate(model64(), [1], **args)


def test_bad_prompt_ids():
    with pytest.raises(OpValueError, match="non-empty"):
        generate(model64(), [], 3)
    with pytest.raises(OpValueError, match=r"\[0, 13\)"):
        generate(model64(), [1, 13], 3)


# ------------------------------------------------------------------------------------------------
# the batched engine: stops, context, model.generate's input/output forms, bad input
from minispore.llm import generate_batch  # noqa: E402


def test_stop_tokens_end_a_row_and_are_kept():
    m = model64(max_seq_len=32)
    free = generate_batch(m, [[1, 2], [5]], 12)
    stop_at = free[0].token_ids[4]
    first = free[0].token_ids.index(stop_at)
    res = generate_batch(m, [[1, 2], [5]], 12, stop_token_ids=[stop_at])
    assert res[0].token_ids == free[0].token_ids[:first + 1] and res[0].finish_reason == "stop"
    other = free[1].token_ids
    cut = other.index(stop_at) + 1 if stop_at in other else len(other)
    assert res[1].token_ids == other[:cut]
    assert res[1].finish_reason == ("stop" if stop_at in other else "length")


def test_stop_strings_cut_the_text():
    tok = CharTokenizer("abcdefghijklm")
    m = model64(max_seq_len=32)
    free = generate_batch(m, [tok.encode("cab")], 20, tokenizer=tok)[0]
    stop = free.text[5:7]                                  # a 2-character string the text contains
    res = generate_batch(m, [tok.encode("cab")], 20, tokenizer=tok, stop=[stop, "zz"])[0]
    i = free.text.find(stop)
    assert res.finish_reason == "stop" and res.text == free.text[:i]
    assert res.token_ids == free.token_ids[:i + 2]        # up to the token that completed the stop string
    assert generate_text(m, tok, "cab", 20, temperature=0.0, stop=[stop]) == "cab" + free.text[:i]


@pytest.mark.parametrize("kv_cache", ["contiguous", "paged", None])
def test_a_full_context_ends_the_row_with_length(kv_cache):
    m = model64(max_seq_len=8)
    res = generate_batch(m, [[1, 2, 3], [4] * 8], 50, kv_cache=kv_cache)
    assert [len(r.token_ids) for r in res] == [6, 1] and {r.finish_reason for r in res} == {"length"}
    slide = generate(m, [1, 2, 3], 20, temperature=0.0, kv_cache=kv_cache or "contiguous", use_cache=bool(kv_cache))
    assert slide[:6] == res[0].token_ids and len(slide) == 20


def test_model_generate_returns_what_it_was_given():
    m = model64(max_seq_len=32)
    ids = np.array([[0, 0, 3, 4], [5, 6, 7, 8]])
    mask = np.array([[0, 0, 1, 1], [1, 1, 1, 1]])
    out = m.generate(ms.Tensor(ids), 5, attention_mask=ms.Tensor(mask))
    assert isinstance(out, ms.Tensor) and out.shape == (2, 9)
    np.testing.assert_array_equal(out.asnumpy()[:, :4], ids)
    assert out.asnumpy()[0, 4:].tolist() == m.generate([3, 4], 5)[2:]
    assert m.generate([[3, 4], [5, 6, 7, 8]], 5) == [m.generate([3, 4], 5), m.generate([5, 6, 7, 8], 5)]
    # rows that stop early are filled with pad_token_id
    stop = int(out.asnumpy()[1, 4])
    padded = m.generate(ids, 5, attention_mask=mask, stop_token_ids=[stop], pad_token_id=12)
    assert isinstance(padded, np.ndarray)
    for b in range(2):
        new = out.asnumpy()[b, 4:].tolist()
        kept = new[:new.index(stop) + 1] if stop in new else new
        assert padded[b, 4:].tolist()[:len(kept)] == kept
        assert set(padded[b, 4 + len(kept):].tolist()) <= {12}
    # as wide as the longest row
    assert padded[1, 4:].tolist() == [stop] + [12] * (padded.shape[1] - 5)


@pytest.mark.parametrize("kw, match", [
    (dict(prompts=[[1, 2], []]), "prompt 1 with no tokens"),
    (dict(prompts=[[1] * 9]), r"at most max_seq_len = 8 tokens .* prompt of 9 tokens"),
    (dict(prompts=[[1, 99]]), r"token ids in \[0, 13\)"),
    (dict(prompts=[[1.5, 2.0]]), "int token ids"),
    (dict(kv_cache="ring"), "'kv_cache'"),
    (dict(prefill_chunk=0), "'prefill_chunk'"),
    (dict(block_size=0), "'block_size'"),
    (dict(stop=["x"]), "'tokenizer'"),
    (dict(context="wrap"), "'context'"),
    (dict(top_p=2.0), "'top_p'"),
    (dict(prompts=[[1], [2]], context="slide"), "context='slide' with one prompt"),
])
def test_bad_generate_batch_input_names_the_parameter(kw, match):
    args = dict(prompts=[[1, 2]], max_new_tokens=3)
    args.update(kw)
    with pytest.raises(OpValueError, match=match):
        generate_batch(model64(), **args)


def test_bad_model_generate_input():
    m = model64()
    with pytest.raises(OpValueError, match="attention_mask"):
        m.generate(np.ones((2, 3), np.int64), 2, attention_mask=np.ones((2, 4)))
    with pytest.raises(OpTypeError, match="generate"):
        m.generate("hello", 2)
    with pytest.raises(OpTypeError, match="tokenizer"):
        generate_batch(m, [[1]], 2, tokenizer=object())
