"""Autoregressive generation: prefill the prompt, then decode one token at a time from the KV cache.

    results = generate_batch(model, [[1, 2, 3], [4, 5]], max_new_tokens=20, temperature=0.8, top_p=0.9)
    results[0].token_ids, results[0].finish_reason          # new ids; "stop" or "length"

Two phases, as in every LLM server:

* **prefill**: the prompt goes through the model in one forward (or in chunks of `prefill_chunk`
  tokens: the same numbers, less memory per step), filling the KV cache; only the last
  position's logits are computed, since only they are needed;
* **decode**: sample a token from the logits, feed it back as a one-token step, repeat. Each
  step costs one position per layer, because the keys and values of everything before are cached.

A batch of ragged prompts runs together. With the contiguous cache (`kv_cache="contiguous"`) the
prompts are left-padded to a common length and the padding is masked out; with the paged cache
(`kv_cache="paged"`) each sequence has its own block table and length, nothing is padded, and
shared prompt prefixes are computed once (prefix caching). Finished sequences leave the batch at
once. Either way every row gets exactly the tokens it would get alone (tests/llm check this).

Sampling (sampling.py): greedy, temperature, top-k, top-p, repetition penalty, per-row seeds;
sequences stop at `max_new_tokens`, at a stop token, at a stop string (with a tokenizer), or when
the context (`max_seq_len`) is full. `context="slide"` (the default of `generate`, as in nanoGPT's
sampler) instead keeps going past the context by re-running the last `max_seq_len` tokens.
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass, field

import numpy as np

from ..common.errors import MinisporeRuntimeError, OpTypeError, OpValueError
from ..common.tensor import Tensor
from .sampling import SamplingParams, check_tokenizer, sample_next


@dataclass
class GenerationResult:
    """One prompt's generation: the new token ids (a stop token is included), why it ended
    ("stop": a stop token or string; "length": max_new_tokens or a full context), the new text
    (cut before a stop string) when a tokenizer was given, and how many prompt tokens the paged
    cache's prefix caching found already computed (vLLM's `num_cached_tokens`)."""

    prompt_ids: list
    token_ids: list = field(default_factory=list)
    finish_reason: str | None = None
    text: str | None = None
    cached_tokens: int = 0


class _Row:
    """A sequence being generated: its result, its RNG, and how far its text was checked."""

    def __init__(self, prompt, rng):
        self.result = GenerationResult(list(prompt))
        self.rng = rng
        self.checked_chars = 0

    @property
    def done(self):
        return self.result.finish_reason is not None

    def all_ids(self):
        return self.result.prompt_ids + self.result.token_ids


# ------------------------------------------------------------------------------------------------
def _as_prompts(prompts, op) -> list:
    """A list of token-id lists from: one list of ints, a list of lists, a 1-D/2-D array or Tensor."""
    if isinstance(prompts, Tensor):
        prompts = prompts.asnumpy()
    if isinstance(prompts, np.ndarray):
        if prompts.ndim not in (1, 2) or prompts.dtype.kind not in "iu":
            raise OpValueError(op, "prompts as integer token ids of shape (seq,) or (batch, seq)",
                               f"{prompts.dtype} of shape {prompts.shape}")
        prompts = [prompts.tolist()] if prompts.ndim == 1 else prompts.tolist()
    if not isinstance(prompts, (list, tuple)):
        raise OpTypeError(op, "prompts as a list of token ids, a list of such lists, or an array",
                          type(prompts).__name__)
    if prompts and all(isinstance(t, numbers.Integral) or (isinstance(t, np.ndarray) and t.ndim == 0)
                       for t in prompts):
        prompts = [prompts]
    out = []
    for i, p in enumerate(prompts):
        p = np.asarray(p)
        if p.ndim != 1 or (p.size and p.dtype.kind not in "iu"):
            raise OpValueError(op, "each prompt as a flat list of int token ids", f"prompt {i}: {p.dtype} {p.shape}")
        out.append([int(t) for t in p])
    if not out:
        raise OpValueError(op, "at least one prompt", "none")
    return out


def _check_prompts(model, prompts, context, op):
    cfg = model.config
    for i, p in enumerate(prompts):
        name = "prompt" if len(prompts) == 1 else f"prompt {i}"
        if not p:
            raise OpValueError(op, "a non-empty prompt", f"{name} with no tokens")
        bad = [t for t in p if not 0 <= t < cfg.vocab_size]
        if bad:
            raise OpValueError(op, f"token ids in [0, {cfg.vocab_size})", f"{bad[:5]} in {name}")
        if context == "error" and len(p) > cfg.max_seq_len:
            raise OpValueError(op, f"a prompt of at most max_seq_len = {cfg.max_seq_len} tokens (or context='slide')",
                               f"{name} of {len(p)} tokens")


def _finish_check(row, token, params, tokenizer, context_full):
    """Append `token` to the row and decide whether the row is finished."""
    res = row.result
    res.token_ids.append(token)
    if token in params.stop_token_ids:
        res.finish_reason = "stop"
    elif params.stop:
        text = tokenizer.decode(res.token_ids)
        longest = max(len(s) for s in params.stop)
        start = max(0, row.checked_chars - longest + 1)          # only new text can complete a stop string
        hits = [i for i in (text.find(s, start) for s in params.stop) if i >= 0]
        row.checked_chars = len(text)
        if hits:
            res.text = text[:min(hits)]
            res.finish_reason = "stop"
    if res.finish_reason is None and (len(res.token_ids) >= params.max_new_tokens or context_full):
        res.finish_reason = "length"


def _check_logits(row, logits):
    """Refuse logits no token can honestly be drawn from: any NaN or +inf, or no finite value.

    A model whose weights (or activations) hold NaN yields NaN logits; `argmax` then returns
    token 0 every step and greedy decoding emits the same character until max_new_tokens, with
    no sign of the cause. One `isfinite` pass over a (vocab,) row per step costs nothing next to
    the forward. -inf alone is allowed: it is how a caller masks tokens out.
    """
    if np.isfinite(logits).all():
        return
    step = len(row.result.token_ids)
    n_nan, n_pinf = int(np.isnan(logits).sum()), int(np.isposinf(logits).sum())
    if n_nan == 0 and n_pinf == 0 and np.isfinite(logits).any():
        return
    what = (f"{n_nan} NaN and {n_pinf} +inf of {logits.size} logits" if n_nan or n_pinf
            else f"all {logits.size} logits -inf")
    raise MinisporeRuntimeError(
        f"For 'generate', the model produced non-finite logits at generation step {step} "
        f"(token {step + 1} after a {len(row.result.prompt_ids)}-token prompt): {what}. The weights or "
        f"activations hold NaN/inf (a diverged training run or a damaged checkpoint?); no token can "
        f"be sampled from them.")


def _sample(row, logits, params):
    _check_logits(row, logits)
    history = row.all_ids() if params.repetition_penalty != 1.0 else None
    return sample_next(logits, params.temperature, params.top_k, row.rng, params.top_p,
                       params.repetition_penalty, history)


def _step(model, tokens, cache):
    """One forward of (B, T) int tokens; the last position's logits of each row, (B, vocab)."""
    return model.forward_2d(Tensor(np.asarray(tokens, dtype=np.int64)), cache, last_only=True).asnumpy()


def _chunks(n, chunk):
    step = n if not chunk else chunk
    return [(i, min(n, i + step)) for i in range(0, n, step)]


# ------------------------------------------------------------------------------------------------
def _run_without_cache(model, rows, params, tokenizer, context):
    """The reference loop: every token re-runs the whole (cropped) context."""
    max_len = model.config.max_seq_len
    for row in rows:
        while not row.done:
            ctx = row.all_ids()[-max_len:]
            logits = _step(model, [ctx], None)[0]
            full = context == "error" and len(row.all_ids()) >= max_len
            _finish_check(row, _sample(row, logits, params), params, tokenizer, full)


def _run_contiguous(model, rows, params, tokenizer, context, chunk):
    max_len = model.config.max_seq_len
    if context == "slide":
        if len(rows) != 1:
            raise OpValueError("generate", "context='slide' with one prompt (a batch stops at the context)",
                               f"{len(rows)} prompts")

    def prefill(prompts):
        lens = [len(p) for p in prompts]
        width = max(lens)
        pad = [width - n for n in lens]
        ids = np.zeros((len(prompts), width), dtype=np.int64)
        for b, p in enumerate(prompts):
            ids[b, pad[b]:] = p
        cache = model.new_cache(capacity=min(max_len, width + params.max_new_tokens), pad=pad)
        for lo, hi in _chunks(width, chunk):
            logits = _step(model, ids[:, lo:hi], cache)
        return cache, logits

    prompts = [r.result.prompt_ids[-max_len:] for r in rows]
    cache, logits = prefill(prompts)
    active = list(range(len(rows)))
    while True:
        pads = cache.pad if cache.pad is not None else np.zeros(len(active), np.int64)
        nxt = []
        for j, b in enumerate(active):
            full = cache.length - int(pads[j]) >= max_len
            _finish_check(rows[b], _sample(rows[b], logits[j], params), params, tokenizer,
                          full and context == "error")
            nxt.append(rows[b].result.token_ids[-1])
        keep = [j for j, b in enumerate(active) if not rows[b].done]
        if not keep:
            return
        if len(keep) < len(active):
            cache.select_rows(keep)
            active = [active[j] for j in keep]
            nxt = [nxt[j] for j in keep]
            if cache.pad is not None:
                cache.trim_left(int(cache.pad.min()))
        if cache.length >= max_len:                               # context == "slide", one row: re-window
            cache, logits = prefill([rows[active[0]].all_ids()[-max_len:]])
        else:
            logits = _step(model, [[t] for t in nxt], cache)


def _run_paged(model, rows, params, tokenizer, context, chunk, block_size, num_blocks):
    max_len = model.config.max_seq_len
    if context == "slide" and len(rows) != 1:
        raise OpValueError("generate", "context='slide' with one prompt (a batch stops at the context)",
                           f"{len(rows)} prompts")
    if num_blocks is None:      # room for every sequence at its longest, plus one copy-on-write block each
        longest = [min(max_len, len(r.result.prompt_ids) + params.max_new_tokens) for r in rows]
        num_blocks = sum(-(-n // block_size) + 1 for n in longest)
    cache = model.new_paged_cache(num_blocks, block_size)
    logits = {}

    def prefill(pending, prompts):
        """Prefill the allocated sequences `pending`; those with equally many tokens left to
        compute (after prefix-cache hits) go through the model together, chunk by chunk."""
        groups = {}
        for b in pending:
            groups.setdefault(len(prompts[b]) - cache.num_computed(b), []).append(b)
        for n, ids in groups.items():
            for lo, hi in _chunks(n, chunk):
                starts = [cache.num_computed(b) for b in ids]
                out = _step(model, [prompts[b][s:s + hi - lo] for b, s in zip(ids, starts)], cache.batch(ids))
            logits.update({b: out[j] for j, b in enumerate(ids)})

    # allocate prompt by prompt; a prompt that may share its first block with one still waiting
    # for its prefill waits until that one is computed, so prefix caching can find it
    prompts = {b: r.result.prompt_ids[-max_len:] for b, r in enumerate(rows)}
    pending = []
    for b, prompt in prompts.items():
        head = prompt[:block_size]
        if len(prompt) > block_size and any(prompts[p][:block_size] == head for p in pending):
            prefill(pending, prompts)
            pending = []
        rows[b].result.cached_tokens = cache.add_sequence(b, prompt)
        pending.append(b)
    prefill(pending, prompts)
    active = list(range(len(rows)))
    while True:
        for b in active:
            full = cache.num_computed(b) >= max_len
            _finish_check(rows[b], _sample(rows[b], logits[b], params), params, tokenizer,
                          full and context == "error")
        for b in active:
            if rows[b].done:
                cache.free(b)
        active = [b for b in active if not rows[b].done]
        if not active:
            return
        if context == "slide" and cache.num_computed(active[0]) >= max_len:
            b = active[0]
            cache.free(b)
            window = {b: rows[b].all_ids()[-max_len:]}
            cache.add_sequence(b, window[b])
            prefill([b], window)
            continue
        out = _step(model, [[rows[b].result.token_ids[-1]] for b in active], cache.batch(active))
        logits = {b: out[j] for j, b in enumerate(active)}


KV_CACHES = ("contiguous", "paged", None)


def generate_batch(model, prompts, max_new_tokens=16, temperature=0.0, top_k=None, top_p=1.0,
                   repetition_penalty=1.0, stop_token_ids=(), stop=(), seed=None, tokenizer=None,
                   kv_cache="contiguous", block_size=16, num_blocks=None, prefill_chunk=None,
                   context="error") -> list:
    """Generate for each prompt (ragged lists of token ids); returns one `GenerationResult` each.

    kv_cache: "contiguous" (left-padded batch), "paged" (block tables, prefix caching) or None
    (recompute the whole context every token: the slow reference). prefill_chunk: feed prompts in
    chunks of this many tokens. context: "error" (a prompt longer than max_seq_len is an error;
    a sequence that fills the context stops with finish_reason "length") or "slide" (one prompt:
    keep generating on the last max_seq_len tokens, nanoGPT-style).
    """
    op = "generate"
    params = SamplingParams(max_new_tokens=max_new_tokens, temperature=temperature, top_k=top_k, top_p=top_p,
                            repetition_penalty=repetition_penalty, stop_token_ids=stop_token_ids, stop=stop,
                            seed=seed, op=op)
    check_tokenizer(tokenizer, op)
    if params.stop and tokenizer is None:
        raise OpValueError(op, "a 'tokenizer' to detect stop strings", f"stop={list(params.stop)} without one")
    if kv_cache not in KV_CACHES:
        raise OpValueError(op, f"'kv_cache' among {list(KV_CACHES)}", repr(kv_cache))
    if context not in ("error", "slide"):
        raise OpValueError(op, "'context' among ['error', 'slide']", repr(context))
    if prefill_chunk is not None and (not isinstance(prefill_chunk, numbers.Integral)
                                      or isinstance(prefill_chunk, bool) or prefill_chunk < 1):
        raise OpValueError(op, "'prefill_chunk' as a positive int or None", repr(prefill_chunk))
    if not isinstance(block_size, numbers.Integral) or isinstance(block_size, bool) or block_size < 1:
        raise OpValueError(op, "'block_size' as a positive int", repr(block_size))
    prompts = _as_prompts(prompts, op)
    _check_prompts(model, prompts, context, op)
    rows = [_Row(p, rng) for p, rng in zip(prompts, params.rngs(len(prompts)))]
    if params.max_new_tokens == 0:
        for r in rows:
            r.result.finish_reason = "length"
    else:
        was_training = model.training
        model.set_train(False)
        try:
            if kv_cache is None:
                _run_without_cache(model, rows, params, tokenizer, context)
            elif kv_cache == "contiguous":
                _run_contiguous(model, rows, params, tokenizer, context, prefill_chunk)
            else:
                _run_paged(model, rows, params, tokenizer, context, prefill_chunk, block_size, num_blocks)
        finally:
            model.set_train(was_training)
    for r in rows:
        if tokenizer is not None and r.result.text is None:
            r.result.text = tokenizer.decode(r.result.token_ids)
    return [r.result for r in rows]


def generate(model, prompt_ids, max_new_tokens=200, temperature=0.8, top_k=50, seed=None, use_cache=True,
             **options):
    """Continue one prompt (a non-empty sequence of token ids) by up to `max_new_tokens` sampled ids.

    Returns the list of new ids (the prompt is not repeated). Past the context length the window
    slides (nanoGPT's sampler) unless `context="error"`. More options (top_p, repetition_penalty,
    stop_token_ids, stop + tokenizer, kv_cache, block_size, prefill_chunk) as in `generate_batch`.
    """
    ids = np.asarray(prompt_ids).reshape(-1).tolist()
    options.setdefault("context", "slide")
    kv_cache = options.pop("kv_cache", "contiguous")
    kv_cache = kv_cache if use_cache else None
    (res,) = generate_batch(model, [ids], max_new_tokens, temperature, top_k, seed=seed, kv_cache=kv_cache,
                            **options)
    return res.token_ids


def generate_text(model, tokenizer, prompt: str, max_new_tokens=200, temperature=0.8, top_k=50, seed=None,
                  use_cache=True, **options) -> str:
    """`prompt` followed by up to `max_new_tokens` sampled characters/tokens, as a string."""
    if not isinstance(prompt, str):
        raise OpTypeError("generate", "the prompt as a str", type(prompt).__name__)
    if not prompt:
        raise OpValueError("generate", "a non-empty prompt", "''")
    vocab = set(tokenizer.chars)
    unknown = sorted({c for c in prompt if c not in vocab})
    if unknown:
        raise OpValueError("generate", f"a prompt made of the {len(vocab)} characters the model was trained on",
                           f"{''.join(unknown)!r}, which the training text never contains")
    options.setdefault("context", "slide")
    kv_cache = options.pop("kv_cache", "contiguous")
    kv_cache = kv_cache if use_cache else None
    (res,) = generate_batch(model, [tokenizer.encode(prompt)], max_new_tokens, temperature, top_k, seed=seed,
                            tokenizer=tokenizer, kv_cache=kv_cache, **options)
    return prompt + res.text


__all__ = ["generate", "generate_batch", "generate_text", "GenerationResult", "sample_next", "SamplingParams"]
