"""The attention core of the LLaMA model, as one swappable function.

Everything around attention (projections, rotary embeddings, where keys and values are stored) is
the same whether the model trains, runs a full forward, or decodes from a contiguous or paged KV
cache. What varies is *how* softmax(q kᵀ) v is computed, so that is one function with one contract:

    attention_fn(q, k, v, causal=True, discard=None, dropout=None) -> out

* q: (B, H, T, hd) queries, already multiplied by 1/sqrt(hd) (the model folds the scale into
  the rotary tables); k, v: (B, Hkv, S, hd) with S >= T and Hkv dividing H (grouped-query
  attention: query head h reads key/value head h // (H / Hkv)).
* causal: query i sits at key position S - T + i and sees keys 0 .. S - T + i ("right-down"
  causal, MindSpore's sparse_mode 3). With S == T this is the usual training mask; with S > T the
  first S - T keys are a cached prefix every query sees.
* discard: None, or a boolean NumPy array broadcastable to (B, 1, T, S): True drops that key for
  that query (MindSpore's attn_mask convention: 1 means discard). Padding and ragged batches
  use it.
* dropout: a Dropout cell applied to the probabilities (training), or None.
* out: (B, H, T, hd).

Implementations:

* `naive_attention`: materializes the (B, H, T, S) score matrix; two batched matmuls and a softmax.
* `flash_attention`: `ops.flash_attention_score` (tiled, online softmax, O(T) extra memory; its
  backward recomputes the probabilities), available once the fused-op family is present; a
  one-token decode step, which has no T x S matrix, takes the two-matmul path.

`get_attention(name)` returns one by name; `Llama(cfg, attention="naive")` picks one per model.
"""
from __future__ import annotations

import functools

import numpy as np

from ..common.errors import OpValueError
from ..common.tensor import from_numpy
from ..ops import functional as F


def repeat_kv(x, n_rep: int):
    """(B, Hkv, S, hd) -> (B, Hkv*n_rep, S, hd): each key/value head serves n_rep query heads."""
    if n_rep == 1:
        return x
    b, h, s, d = x.shape
    x = F.broadcast_to(F.expand_dims(x, 2), (b, h, n_rep, s, d))
    return F.reshape(x, (b, h * n_rep, s, d))


@functools.lru_cache(maxsize=64)
def causal_additive_mask(t: int, s: int, np_dtype) -> np.ndarray:
    """(t, s) additive mask: 0 where query i (at key position s - t + i) may look, -inf above."""
    return np.triu(np.full((t, s), -np.inf, dtype=np_dtype), k=s - t + 1)


def causal_discard(t: int, s: int) -> np.ndarray:
    """(t, s) boolean: True where key j is in the future of query i (right-down causal)."""
    return np.arange(s)[None, :] > (s - t + np.arange(t))[:, None]


def additive_mask(t: int, s: int, np_dtype, causal: bool, discard):
    """The (.., t, s) additive mask for the naive path, or None when nothing is masked."""
    mask = causal_additive_mask(t, s, np_dtype) if causal and t > 1 else None
    if discard is None:
        return mask
    base = mask if mask is not None else np.zeros((), np_dtype)
    return np.where(discard, np.asarray(-np.inf, np_dtype), base)


def naive_attention(q, k, v, causal=True, discard=None, dropout=None):
    """softmax(q kᵀ + mask) v with the whole (B, H, T, S) score matrix in memory."""
    t, s = q.shape[2], k.shape[2]
    n_rep = q.shape[1] // k.shape[1]
    k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)
    scores = F.matmul(q, F.transpose(k, (0, 1, 3, 2)))          # (B, H, T, S)
    mask = additive_mask(t, s, q.dtype.np, causal, discard)
    if mask is not None:
        scores = scores + from_numpy(mask)           # (an internal constant: no copy)
    probs = F.softmax(scores, -1)
    if dropout is not None:
        probs = dropout(probs)
    return F.matmul(probs, v)                                    # (B, H, T, hd)


def flash_attention_available() -> bool:
    """Whether the fused-op family with `flash_attention_score` is present."""
    from .. import ops
    return hasattr(ops, "flash_attention_score")


def flash_attention(q, k, v, causal=True, discard=None, dropout=None):
    """`ops.flash_attention_score` in the BNSD layout: the same numbers as `naive_attention`
    without an N x N matrix (the scale is already folded into q, hence a scale of 1). Tiled with
    an online softmax; its backward recomputes the probabilities from the saved log-sum-exp.

    A decode step (one query per row, outside autodiff) has no N x N matrix to avoid: its scores
    are one (B, H, 1, S) row, so it takes the two-matmul path, which is exact, O(S) in memory and
    the fastest in NumPy. (`ops.incre_flash_attention`, MindSpore's decode kernel, splits the keys
    so that an accelerator can work on the chunks in parallel — Flash-Decoding; NumPy cannot, so
    here it would only add the combine step. Paged caches use `ops.paged_attention`.)
    """
    from .. import ops
    from ..common import grad_state
    b, h, t, _ = q.shape
    s = k.shape[2]
    if t == 1 and grad_state.depth == 0:
        return naive_attention(q, k, v, causal, discard)
    mask = None
    if discard is not None:
        mask = np.asarray(discard, dtype=bool)
        if causal and t > 1:
            mask = mask | causal_discard(t, s)
        mask = from_numpy(np.ascontiguousarray(np.broadcast_to(mask, (b, 1, t, s))).astype(np.uint8))
    keep_prob = 1.0
    if dropout is not None and dropout.training and dropout.p > 0:
        keep_prob = 1.0 - dropout.p
    sparse_mode = 0 if mask is not None or not causal or t == 1 else 3
    return ops.flash_attention_score(q, k, v, h, attn_mask=mask, keep_prob=keep_prob, scalar_value=1.0,
                                     input_layout="BNSD", sparse_mode=sparse_mode)


ATTENTION_IMPLS = {"naive": naive_attention, "flash": flash_attention}


def get_attention(name: str):
    """The attention function called `name` ('naive', 'flash'; 'auto' = flash when available)."""
    if name == "auto":
        name = "flash" if flash_attention_available() else "naive"
    if name not in ATTENTION_IMPLS:
        raise OpValueError("Llama", f"attention among {sorted(ATTENTION_IMPLS) + ['auto']}", repr(name))
    if name == "flash" and not flash_attention_available():
        raise OpValueError("Llama", "attention='flash' with ops.flash_attention_score available",
                           "a minispore without the fused-op family")
    return ATTENTION_IMPLS[name]


__all__ = ["naive_attention", "flash_attention", "flash_attention_available", "get_attention", "repeat_kv",
           "ATTENTION_IMPLS", "causal_additive_mask", "causal_discard"]
