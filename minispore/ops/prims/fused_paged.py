"""Paged KV-cache ops: `reshape_and_cache` (write new tokens' keys/values into cache slots) and
`paged_attention` (attend through a block table), with MindSpore's names and argument order.

A paged cache is one big pool of fixed-size blocks, `(num_blocks, block_size, N2, D)` (or
`(num_blocks, block_size, N2*D)`), shared by every sequence. A sequence owns a list of blocks, its
row of `block_tables`; its key at position p lives in block `block_tables[b, p // block_size]` at
offset `p % block_size`. The flat *slot* of that place is `block_id * block_size + offset`, which is
what `slot_mapping` gives `reshape_and_cache` for each new token. No sequence needs contiguous
memory, so the pool wastes at most one partly-filled block per sequence (vLLM's PagedAttention).

The attention kernel is the FlashAttention online softmax with a block (a few blocks at a time) as
the key tile: see `fused_attention_kernels.paged_forward`.
"""
from __future__ import annotations

import numpy as np

from ...common import dtype as mstype
from ...common import grad_state
from ...common.errors import MinisporeRuntimeError
from ...common.tensor import Tensor
from .. import _check as C
from ..primitive import AbstractTensor, defprim
from . import fused_attention_kernels as K
from .fused_attention import _paged_cache_check, antiquant_fns, compute_dtype

__all__ = ["paged_attention", "reshape_and_cache"]


# =================================================================================================
# reshape_and_cache
_RC = "reshape_and_cache"


def _token_rows(op, arg, x, per_slot):
    """key/value (T, N2, D) or (T, N2*D): T rows of `per_slot` elements."""
    if len(x.shape) not in (2, 3) or int(np.prod(x.shape[1:])) != per_slot:
        raise C.OpValueError(op, f"'{arg}' of shape (num_tokens, N2, D) or (num_tokens, N2*D) with "
                                 f"N2*D = {per_slot} (a cache slot)", f"shape {tuple(x.shape)}")
    return x.shape[0]


def _rc_infer(key, value, key_cache, value_cache, slot_mapping):
    C.tensor(_RC, "key", key)
    C.tensor(_RC, "key_cache", key_cache)
    if len(key_cache.shape) not in (3, 4):
        raise C.OpValueError(_RC, "'key_cache' of shape (num_blocks, block_size, N2, D) or "
                                  "(num_blocks, block_size, N2*D)", f"shape {tuple(key_cache.shape)}")
    per_slot = int(np.prod(key_cache.shape[2:]))
    t = _token_rows(_RC, "key", key, per_slot)
    if key.dtype is not key_cache.dtype:
        raise C.OpTypeError(_RC, f"'key' of the cache's dtype ({key_cache.dtype})", str(key.dtype))
    C.tensor(_RC, "slot_mapping", slot_mapping)
    if slot_mapping.dtype.kind not in ("int", "uint") or tuple(slot_mapping.shape) != (t,):
        raise C.OpValueError(_RC, f"an integer 'slot_mapping' of shape ({t},) (one slot per token)",
                             f"Tensor(shape={tuple(slot_mapping.shape)}, dtype={slot_mapping.dtype})")
    outs = (AbstractTensor(key_cache.shape, key_cache.dtype),)
    if (value is None) != (value_cache is None):
        raise C.OpValueError(_RC, "'value' and 'value_cache' both given or both None",
                             f"value={'a Tensor' if value is not None else None}, "
                             f"value_cache={'a Tensor' if value_cache is not None else None}")
    if value is not None:
        C.tensor(_RC, "value", value)
        C.tensor(_RC, "value_cache", value_cache)
        if tuple(value_cache.shape[:2]) != tuple(key_cache.shape[:2]) or len(value_cache.shape) not in (3, 4):
            raise C.OpValueError(_RC, f"'value_cache' with the key cache's blocks {tuple(key_cache.shape[:2])}",
                                 f"shape {tuple(value_cache.shape)}")
        if _token_rows(_RC, "value", value, int(np.prod(value_cache.shape[2:]))) != t:
            raise C.OpValueError(_RC, f"'value' with {t} tokens (as 'key')", f"shape {tuple(value.shape)}")
        if value.dtype is not value_cache.dtype:
            raise C.OpTypeError(_RC, f"'value' of the cache's dtype ({value_cache.dtype})", str(value.dtype))
        outs += (AbstractTensor(value_cache.shape, value_cache.dtype),)
    return outs


def _write_slots(cache, rows, slots, arg):
    if not cache.flags.writeable:
        raise C.OpValueError(_RC, f"a writable '{arg}'", "a read-only array (copy it first)")
    bs = cache.shape[1]
    live = slots >= 0                                     # slot -1: a padding token, not written
    s = slots[live]
    cache[s // bs, s % bs] = rows[live].reshape((len(s),) + cache.shape[2:])


def _rc_kernel(key, value, key_cache, value_cache, slot_mapping):
    slots = np.asarray(slot_mapping, dtype=np.int64)
    n_slots = key_cache.shape[0] * key_cache.shape[1]
    if np.any(slots >= n_slots) or np.any(slots < -1):
        bad = int(slots[(slots >= n_slots) | (slots < -1)][0])
        raise C.OpIndexError(_RC, f"'slot_mapping' entries in [0, {n_slots}) (num_blocks * block_size), or -1 "
                                  "for a padding token", f"slot {bad}")
    _write_slots(key_cache, key, slots, "key_cache")
    if value is None:
        return (key_cache,)
    _write_slots(value_cache, value, slots, "value_cache")
    return key_cache, value_cache


_reshape_and_cache = defprim(_RC, _rc_infer, _rc_kernel, None,
                             doc="write tokens' keys/values into paged-cache slots, in place")


def reshape_and_cache(key, value=None, key_cache=None, value_cache=None, slot_mapping=None):
    """`ops.reshape_and_cache(key, value, key_cache, value_cache, slot_mapping)`.

    Writes token t's key (and value) into cache slot `slot_mapping[t]` = block_id * block_size +
    offset, **in place**: `key_cache` / `value_cache` themselves change (every view of them sees the
    write, and their version counters are bumped like `x[i] = v`). Tokens with slot -1 (padding) are
    skipped. key/value: (num_tokens, N2, D) or (num_tokens, N2*D), the cache's dtype; caches
    (num_blocks, block_size, N2, D) or (num_blocks, block_size, N2*D). `value`/`value_cache` may both
    be None (a key-only cache).

    Returns `(key_cache, value_cache)` (the same Tensor objects, updated); `(key_cache,)` when
    value is None. Not differentiable: caches hold inference state.
    """
    for arg, t in (("key_cache", key_cache), ("slot_mapping", slot_mapping)):
        if t is None:
            raise C.OpValueError(_RC, f"'{arg}' (a Tensor)", "None")
    for arg, t in (("key_cache", key_cache), ("value_cache", value_cache)):
        if isinstance(t, Tensor) and t._node is not None and grad_state.depth > 0:
            raise MinisporeRuntimeError(f"For '{_RC}', '{arg}' is being differentiated; an in-place cache "
                                        "write cannot be recorded. Caches hold inference state: detach it.")
    outs = _reshape_and_cache(key, value, key_cache, value_cache, slot_mapping)
    eager = isinstance(outs[0], Tensor) and isinstance(key_cache, Tensor) and outs[0]._data is key_cache._data
    if not eager:                                          # graph capture: the op's (symbolic) outputs
        return outs
    key_cache._version += 1
    if value_cache is None:
        return (key_cache,)
    value_cache._version += 1
    return key_cache, value_cache


# =================================================================================================
# paged_attention
_PA = "paged_attention"


def _query_dims(q, head_num):
    """(T, N, D) from a (T, N, D) or (T, N*D) query."""
    if len(q.shape) == 3:
        if q.shape[1] != head_num:
            raise C.OpValueError(_PA, f"'query' (num_tokens, head_num={head_num}, head_dim)", f"shape {tuple(q.shape)}")
        return q.shape
    if len(q.shape) == 2 and q.shape[1] % head_num == 0:
        return q.shape[0], head_num, q.shape[1] // head_num
    raise C.OpValueError(_PA, f"'query' of shape (num_tokens, {head_num}, head_dim) or (num_tokens, {head_num}*head_dim)",
                         f"shape {tuple(q.shape)}")


def _pa_infer(query, key_cache, value_cache, block_tables, context_lens, antiquant_scale, antiquant_offset,
              q_seq_lens, head_num, scale_value, kv_head_num, kv_cache_quant_mode):
    hn = C.int_attr(_PA, "head_num", head_num, 1)
    C.float_attr(_PA, "scale_value", scale_value)
    kvh = C.int_attr(_PA, "kv_head_num", kv_head_num, 0)
    if not isinstance(kv_cache_quant_mode, str) or kv_cache_quant_mode != "DEFAULT":
        raise C.OpValueError(_PA, "kv_cache_quant_mode 'DEFAULT' (per-channel antiquant; 'PERTOKEN' is not "
                                  "supported)", repr(kv_cache_quant_mode))
    C.floating(_PA, "query", query)
    t, n1, d = _query_dims(query, hn)
    n2 = _paged_cache_check(_PA, query, key_cache, value_cache, n1, d, kvh, 0, antiquant_scale, antiquant_offset,
                            names=("key_cache", "value_cache"))
    if n1 % n2:
        raise C.OpValueError(_PA, f"a key/value head number dividing head_num={n1}", f"{n2}")
    for arg, x in (("block_tables", block_tables), ("context_lens", context_lens)):
        C.tensor(_PA, arg, x)
        if x.dtype.kind not in ("int", "uint"):
            raise C.OpTypeError(_PA, f"'{arg}' of an integer dtype", str(x.dtype))
    if len(block_tables.shape) != 2:
        raise C.OpValueError(_PA, "'block_tables' of shape (batch, max_blocks_per_seq)",
                             f"shape {tuple(block_tables.shape)}")
    b = block_tables.shape[0]
    if tuple(context_lens.shape) != (b,):
        raise C.OpValueError(_PA, f"'context_lens' of shape ({b},) (one per block_tables row)",
                             f"shape {tuple(context_lens.shape)}")
    if q_seq_lens is None:
        if t != b:
            raise C.OpValueError(_PA, f"one query token per sequence ({b}) without q_seq_lens",
                                 f"{t} query tokens")
    else:
        C.tensor(_PA, "q_seq_lens", q_seq_lens)
        if q_seq_lens.dtype.kind not in ("int", "uint") or tuple(q_seq_lens.shape) != (b,):
            raise C.OpValueError(_PA, f"integer 'q_seq_lens' of shape ({b},)",
                                 f"Tensor(shape={tuple(q_seq_lens.shape)}, dtype={q_seq_lens.dtype})")
    return AbstractTensor(query.shape, query.dtype)


def _pa_kernel(query, key_cache, value_cache, block_tables, context_lens, antiquant_scale, antiquant_offset,
               q_seq_lens, head_num, scale_value, kv_head_num, kv_cache_quant_mode):
    cdt = compute_dtype(query.dtype)
    t = query.shape[0]
    q3 = query.reshape(t, head_num, -1)
    d = q3.shape[-1]
    kc = key_cache.reshape(key_cache.shape[0], key_cache.shape[1], -1, d)
    vc = value_cache.reshape(kc.shape)
    n2 = kc.shape[2]
    ctx = np.asarray(context_lens, np.int64)
    b = ctx.shape[0]
    K.check_block_tables(_PA, block_tables, ctx, kc.shape[0], kc.shape[1])
    if q_seq_lens is None:
        qlen = np.ones(b, np.int64)
    else:
        qlen = np.asarray(q_seq_lens, np.int64)
        if np.any(qlen < 0) or np.any(qlen > ctx) or int(qlen.sum()) != t:
            raise C.OpValueError(_PA, f"'q_seq_lens' >= 0, each <= its context length, summing to the {t} query "
                                      "tokens", f"q_seq_lens {qlen.tolist()}, context_lens {ctx.tolist()}")
    # pack the ragged query tokens into (B, Tmax) rows; row t of sequence b sits at position
    # ctx - qlen + t (the new tokens are the last qlen of the context): a causal chunk
    tmax = int(qlen.max()) if b else 0
    starts = np.concatenate([[0], np.cumsum(qlen)[:-1]]).astype(np.int64)
    col = np.arange(tmax)[None, :]
    valid = col < qlen[:, None]                                           # (B, Tmax)
    src = np.where(valid, starts[:, None] + col, 0)
    qp = q3[src]                                                          # (B, Tmax, N1, D)
    q_pos = np.where(valid, (ctx - qlen)[:, None] + col, -1)
    q5 = qp.transpose(0, 2, 1, 3).reshape(b, n2, head_num // n2, tmax, d).astype(cdt, copy=False)
    dk, dv = antiquant_fns(antiquant_scale, antiquant_offset, n2, d, cdt)
    out, _ = K.paged_forward(q5, q_pos, kc, vc, block_tables, ctx, scale_value, dk, dv)
    out = out.reshape(b, head_num, tmax, d).transpose(0, 2, 1, 3)          # (B, Tmax, N1, D)
    return out[valid].reshape(query.shape)


_paged_attention = defprim(_PA, _pa_infer, _pa_kernel, None,
                           doc="attention over a paged KV cache through a block table (decode / chunked prefill)")


def paged_attention(query, key_cache, value_cache, block_tables, context_lens, antiquant_scale=None,
                    antiquant_offset=None, attn_mask=None, q_seq_lens=None, alibi_mask=None, head_num=1,
                    scale_value=1.0, kv_head_num=0, kv_cache_quant_mode='DEFAULT', mask_mode='MASK_DEFAULT',
                    mla_v_dim=0):
    """`PagedAttention(head_num, scale_value, kv_head_num, kv_cache_quant_mode, mask_mode, mla_v_dim)(query,
    key_cache, value_cache, block_tables, context_lens, antiquant_scale, antiquant_offset, attn_mask,
    q_seq_lens, alibi_mask)` as one function.

    * query (num_tokens, head_num, D) or (num_tokens, head_num*D); output has the same shape.
    * key_cache / value_cache (num_blocks, block_size, N2, D) or (num_blocks, block_size, N2*D) with
      N2 = kv_head_num (0: head_num) dividing head_num; query head h reads cache head h // (head_num / N2).
    * block_tables (B, max_blocks_per_seq) int: the physical block of each logical block (entries past
      a sequence's last block are never read and may be anything, e.g. -1);
      context_lens (B,) int: tokens cached per sequence (including the new ones, already written with
      `reshape_and_cache`).
    * decode (q_seq_lens None): one query per sequence (num_tokens = B), attending to all
      context_lens[b] keys. Chunked prefill / several new tokens: q_seq_lens (B,) gives each sequence's
      number of new tokens (packed in order in `query`); they are its last q_seq_lens[b] positions and
      attend causally.
    * int8 caches: dequantized per gathered block, (x + antiquant_offset) * antiquant_scale, both
      (2, N2*D) (row 0 keys, row 1 values) — kv_cache_quant_mode 'DEFAULT'.
    * attn_mask / alibi_mask (MindSpore's custom masks), mask_mode other than 'MASK_DEFAULT' and MLA
      (mla_v_dim) are not supported by minispore.
    """
    if attn_mask is not None or alibi_mask is not None:
        raise C.OpValueError(_PA, "'attn_mask' and 'alibi_mask' None (masking is causal from the context lengths; "
                                  "custom masks are not supported by minispore)", "a mask")
    if not isinstance(mask_mode, str) or mask_mode != "MASK_DEFAULT":
        raise C.OpValueError(_PA, "mask_mode 'MASK_DEFAULT'", repr(mask_mode))
    if mla_v_dim != 0:
        raise C.OpValueError(_PA, "mla_v_dim 0 (multi-head latent attention is not supported)", repr(mla_v_dim))
    kvh = kv_head_num
    return _paged_attention(query, key_cache, value_cache, block_tables, context_lens, antiquant_scale,
                            antiquant_offset, q_seq_lens, head_num=head_num, scale_value=scale_value,
                            kv_head_num=kvh, kv_cache_quant_mode=kv_cache_quant_mode)
