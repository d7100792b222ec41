"""Choosing the next token from a row of logits: greedy, temperature, top-k, top-p, repetition penalty.

The processors run in HuggingFace's order, on float64 copies of the logits:

1. repetition penalty (Keskar et al. 2019, CTRL): every token already in the sequence (prompt
   included) has its logit divided by `penalty` if positive, multiplied by it if negative — so
   penalty > 1 always makes a repeat less likely;
2. temperature: logits / T. T < 1 sharpens, T > 1 flattens; T = 0 means greedy (argmax);
3. top-k: keep the k largest logits (ties with the k-th are kept too);
4. top-p, "nucleus" (Holtzman et al. 2020): keep the smallest set of most likely tokens whose
   probabilities add up to at least p (the most likely token is always kept);

then softmax and one draw from the sequence's own NumPy generator (`seed`), so a request's
samples never depend on what else runs, and never touch the global minispore RNG.
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass, field

import numpy as np

from ..common.errors import OpTypeError, OpValueError


@dataclass
class SamplingParams:
    """How to pick tokens and when to stop (vLLM's names; HF's `do_sample=False` is temperature 0).

    * `max_new_tokens`: at most this many new tokens;
    * `temperature` (0 = greedy), `top_k` (None = off), `top_p` (1 = off),
      `repetition_penalty` (1 = off);
    * `stop_token_ids`: tokens that end the sequence (included in the output, like an EOS);
    * `stop`: strings that end the sequence (needs a tokenizer; the text is cut before them);
    * `seed`: an int (row b of a batch uses seed + b), a list with one seed per row, or None.
    """

    max_new_tokens: int = 16
    temperature: float = 0.0
    top_k: int | None = None
    top_p: float = 1.0
    repetition_penalty: float = 1.0
    stop_token_ids: tuple = ()
    stop: tuple = ()
    seed: int | list | None = None
    op: str = field(default="generate", repr=False, compare=False)

    def __post_init__(self):
        op = self.op
        if not _is_int(self.max_new_tokens) or self.max_new_tokens < 0:
            raise OpValueError(op, "'max_new_tokens' as a non-negative int", repr(self.max_new_tokens))
        if not _is_real(self.temperature) or not np.isfinite(self.temperature) or self.temperature < 0:
            raise OpValueError(op, "'temperature' >= 0 (0 = greedy)", repr(self.temperature))
        if self.top_k is not None and (not _is_int(self.top_k) or self.top_k < 1):
            raise OpValueError(op, "'top_k' as a positive int or None (None = off)", repr(self.top_k))
        if not _is_real(self.top_p) or not 0 < self.top_p <= 1:
            raise OpValueError(op, "'top_p' in (0, 1]", repr(self.top_p))
        if not _is_real(self.repetition_penalty) or not np.isfinite(self.repetition_penalty) \
                or self.repetition_penalty <= 0:
            raise OpValueError(op, "'repetition_penalty' > 0 (1 = off)", repr(self.repetition_penalty))
        if isinstance(self.stop_token_ids, numbers.Integral):
            self.stop_token_ids = (self.stop_token_ids,)
        if self.stop_token_ids is None:
            self.stop_token_ids = ()
        if not all(_is_int(t) and t >= 0 for t in self.stop_token_ids):
            raise OpValueError(op, "'stop_token_ids' as non-negative ints", repr(self.stop_token_ids))
        self.stop_token_ids = tuple(int(t) for t in self.stop_token_ids)
        if isinstance(self.stop, str):
            self.stop = (self.stop,)
        if self.stop is None:
            self.stop = ()
        if not all(isinstance(s, str) and s for s in self.stop):
            raise OpValueError(op, "'stop' as non-empty strings", repr(self.stop))
        self.stop = tuple(self.stop)
        seeds = self.seed if isinstance(self.seed, (list, tuple)) else [self.seed]
        if not all(s is None or (_is_int(s) and s >= 0) for s in seeds):
            raise OpValueError(op, "'seed' as a non-negative int, a list of them, or None", repr(self.seed))

    @property
    def greedy(self) -> bool:
        return self.temperature == 0 or self.top_k == 1

    def rngs(self, n: int) -> list:
        """One generator per row: seed + row (an int seed), the row's own seed (a list), or fresh."""
        if isinstance(self.seed, (list, tuple)):
            if len(self.seed) != n:
                raise OpValueError(self.op, f"'seed' with one seed per prompt ({n})", f"{len(self.seed)} seeds")
            return [np.random.default_rng(s) for s in self.seed]
        if self.seed is None:
            return [np.random.default_rng() for _ in range(n)]
        return [np.random.default_rng(self.seed + i) for i in range(n)]


def _is_int(v) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _is_real(v) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


# ------------------------------------------------------------------------------------------------
def apply_repetition_penalty(logits: np.ndarray, history, penalty: float) -> np.ndarray:
    """Penalize every token id in `history` (HF's RepetitionPenaltyLogitsProcessor)."""
    if penalty == 1.0 or history is None or len(history) == 0:
        return logits
    ids = np.unique(np.asarray(history, dtype=np.int64))
    seen = logits[ids]
    logits = logits.copy()
    logits[ids] = np.where(seen < 0, seen * penalty, seen / penalty)
    return logits


def top_k_filter(logits: np.ndarray, top_k: int | None) -> np.ndarray:
    """-inf for everything below the k-th largest logit."""
    if not top_k or top_k >= logits.shape[-1]:
        return logits
    kth = np.partition(logits, -top_k)[-top_k]
    return np.where(logits < kth, -np.inf, logits)


def top_p_filter(logits: np.ndarray, top_p: float) -> np.ndarray:
    """-inf for every token outside the nucleus: walking from the most likely token down, keep a
    token while the probability mass *before* it is still below top_p."""
    if top_p >= 1.0:
        return logits
    order = np.argsort(-logits, kind="stable")
    probs = softmax(logits[order])
    before = np.cumsum(probs) - probs
    drop = order[before >= top_p]
    if drop.size == 0:
        return logits
    logits = logits.copy()
    logits[drop] = -np.inf
    return logits


def softmax(logits: np.ndarray) -> np.ndarray:
    z = np.exp(logits - logits.max())
    return z / z.sum()


def next_token_distribution(logits, temperature=1.0, top_k=None, top_p=1.0, repetition_penalty=1.0,
                            history=None) -> np.ndarray:
    """The probabilities the sampler draws from (temperature > 0), after all processors."""
    logits = apply_repetition_penalty(np.asarray(logits, dtype=np.float64), history, repetition_penalty)
    logits = top_p_filter(top_k_filter(logits / temperature, top_k), top_p)
    return softmax(logits)


def sample_next(logits: np.ndarray, temperature: float, top_k: int | None, rng: np.random.Generator,
                top_p: float = 1.0, repetition_penalty: float = 1.0, history=None) -> int:
    """Draw one token id from a row of logits."""
    logits = np.asarray(logits, dtype=np.float64)
    if logits.ndim != 1:
        raise OpValueError("sample_next", "one row of logits (a 1-D array)", f"shape {logits.shape}")
    if temperature == 0 or top_k == 1:
        return int(np.argmax(apply_repetition_penalty(logits, history, repetition_penalty)))
    probs = next_token_distribution(logits, temperature, top_k, top_p, repetition_penalty, history)
    return int(rng.choice(probs.shape[-1], p=probs))


def check_tokenizer(tokenizer, op="generate"):
    if tokenizer is not None and not callable(getattr(tokenizer, "decode", None)):
        raise OpTypeError(op, "'tokenizer' with a decode(ids) -> str method", type(tokenizer).__name__)


__all__ = ["SamplingParams", "sample_next", "next_token_distribution", "apply_repetition_penalty",
           "top_k_filter", "top_p_filter"]
