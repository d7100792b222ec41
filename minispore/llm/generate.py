"""Autoregressive text generation: sample one token at a time from the model's next-token
distribution, feed it back, repeat.

Sampling knobs (as in nanoGPT's `sample.py`):
* `temperature` divides the logits: < 1 sharpens the distribution, > 1 flattens it, 0 is greedy;
* `top_k` keeps only the k most likely tokens before sampling;
* `seed` makes the draw reproducible (a private NumPy generator, so sampling never disturbs
  the global minispore RNG that training and dropout use).

With `use_cache=True` the model keeps each layer's keys and values (a KV cache), so a new token
costs one position of compute instead of re-running the whole context. The context is the last
`max_seq_len` tokens, as in nanoGPT; once the text is longer than that, the window slides, every
position shifts, and the window is recomputed from scratch (the cache cannot be reused then).
Either way the logits are exactly those of `model(last max_seq_len tokens)`.
"""
from __future__ import annotations

import numbers

import numpy as np

from ..common.errors import OpTypeError, OpValueError
from ..common.tensor import Tensor


def sample_next(logits: np.ndarray, temperature: float, top_k: int | None, rng: np.random.Generator) -> int:
    """Draw one token id from a row of logits."""
    logits = np.asarray(logits, dtype=np.float64)
    if temperature == 0:
        return int(np.argmax(logits))
    logits = logits / temperature
    if top_k is not None and top_k < logits.shape[-1]:
        kth = np.partition(logits, -top_k)[-top_k]          # the k-th largest value
        logits = np.where(logits < kth, -np.inf, logits)
    logits = logits - logits.max()
    probs = np.exp(logits)
    probs /= probs.sum()
    return int(rng.choice(probs.shape[-1], p=probs))


def _check_args(max_new_tokens, temperature, top_k, seed):
    if not isinstance(max_new_tokens, numbers.Integral) or isinstance(max_new_tokens, bool) or max_new_tokens < 0:
        raise OpValueError("generate", "max_new_tokens as a non-negative int", repr(max_new_tokens))
    if not isinstance(temperature, numbers.Real) or isinstance(temperature, bool) or temperature < 0:
        raise OpValueError("generate", "temperature >= 0 (0 = greedy)", repr(temperature))
    if top_k is not None and (not isinstance(top_k, numbers.Integral) or isinstance(top_k, bool) or top_k < 1):
        raise OpValueError("generate", "top_k as a positive int or None", repr(top_k))
    if seed is not None and (not isinstance(seed, numbers.Integral) or isinstance(seed, bool) or seed < 0):
        raise OpValueError("generate", "seed as a non-negative int or None", repr(seed))


def generate(model, prompt_ids, max_new_tokens=200, temperature=0.8, top_k=50, seed=None, use_cache=True):
    """Continue `prompt_ids` (a non-empty sequence of token ids) by `max_new_tokens` sampled ids.

    Returns the list of new ids (the prompt is not repeated).
    """
    _check_args(max_new_tokens, temperature, top_k, seed)
    ids = [int(i) for i in np.asarray(prompt_ids).reshape(-1)]
    if not ids:
        raise OpValueError("generate", "a non-empty prompt", "no tokens")
    vocab = model.config.vocab_size
    bad = [i for i in ids if not 0 <= i < vocab]
    if bad:
        raise OpValueError("generate", f"token ids in [0, {vocab})", f"{bad[:5]}")
    block = model.config.max_seq_len
    rng = np.random.default_rng(seed)
    was_training = model.training
    model.set_train(False)
    try:
        def run_window():
            cache = model.new_cache() if use_cache else None
            window = ids[-block:]
            return cache, model.forward_2d(Tensor(np.asarray([window], dtype=np.int64)), cache).asnumpy()[-1]

        cache, logits = run_window()
        new = []
        for step in range(max_new_tokens):
            nxt = sample_next(logits, temperature, top_k, rng)
            new.append(nxt)
            ids.append(nxt)
            if step == max_new_tokens - 1:
                break
            if cache is not None and cache.length < block:
                logits = model.forward_2d(Tensor(np.asarray([[nxt]], dtype=np.int64)), cache).asnumpy()[-1]
            else:
                cache, logits = run_window()
        return new
    finally:
        model.set_train(was_training)


def generate_text(model, tokenizer, prompt: str, max_new_tokens=200, temperature=0.8, top_k=50, seed=None,
                  use_cache=True) -> str:
    """`prompt` followed by `max_new_tokens` sampled characters/tokens, as a string."""
    if not isinstance(prompt, str):
        raise OpTypeError("generate", "the prompt as a str", type(prompt).__name__)
    if not prompt:
        raise OpValueError("generate", "a non-empty prompt", "''")
    vocab = set(tokenizer.chars)
    unknown = sorted({c for c in prompt if c not in vocab})
    if unknown:
        raise OpValueError("generate", f"a prompt made of the {len(vocab)} characters the model was trained on",
                           f"{''.join(unknown)!r}, which the training text never contains")
    ids = tokenizer.encode(prompt)
    new = generate(model, ids, max_new_tokens, temperature, top_k, seed, use_cache)
    return prompt + tokenizer.decode(new)


__all__ = ["generate", "generate_text", "sample_next"]
