"""Op table: the fused attention ops (flash_attention_score and its fused backward,
prompt_flash_attention, incre_flash_attention, paged_attention, reshape_and_cache).

The references are *naive* attention in float64: the whole (S1, S2) score matrix, a plain softmax,
and masks written out from the definitions of each sparse mode (not from the kernels' tile
classification). Paged references gather each sequence's keys with a Python loop over its block
table. The fused backward is checked against complex-step derivatives of the naive forward
(exact to rounding), and its own finite-difference check verifies the second-order rule.

Samples use small odd sizes with tiny tiles (block_q=3, block_kv=4, ...) so every tile kind occurs:
ragged edges, fully hidden tiles (skipped), fully visible tiles and partially masked ones.
"""
import numpy as np

from ... import ops
from ...common import dtype as mstype
from ...ops.primitive import get_primitive
from ..opinfo import OpInfo, SampleInput, noncontig, rand, register
from .nn_ops import complex_step_vjp

F16_32_64 = (mstype.float16, mstype.bfloat16, mstype.float32, mstype.float64)
F32_64 = (mstype.float32, mstype.float64)
# the task's bar: naive attention within 1e-12 (float64) and 1e-5 (float32)
ATTN_TOLS = {mstype.float64: (0.0, 1e-12), mstype.float32: (1e-5, 1e-5), mstype.float16: (2e-3, 2e-3),
             mstype.bfloat16: (1.6e-2, 1.6e-2)}


# =================================================================================================
# the naive reference
def to_bnsd(x, layout, heads=None, head_dim=None):
    """(B, N, S, D) copy of x in `layout` (3-d layouts split H by heads or head_dim)."""
    if layout == "BNSD":
        return x
    if layout == "BSND":
        return x.transpose(0, 2, 1, 3)
    if layout == "SBH":
        x = x.transpose(1, 0, 2)
    b, s, h = x.shape
    d = head_dim if heads is None else h // heads
    return x.reshape(b, s, h // d, d).transpose(0, 2, 1, 3)


def from_bnsd(x, layout):
    b, n, s, d = x.shape
    if layout == "BNSD":
        return x
    if layout == "BSND":
        return x.transpose(0, 2, 1, 3)
    y = x.transpose(0, 2, 1, 3).reshape(b, s, n * d)
    return y.transpose(1, 0, 2) if layout == "SBH" else y


def naive_attention(q, k, v, keep, scale, pse=None, dropmul=None):
    """q (B, N1, S1, D), k/v (B, N2, S2, D), keep broadcastable to (B, N1, S1, S2).
    Query head h uses key head h // (N1 / N2) (HuggingFace repeat_kv). Returns (out, lse);
    rows with no visible key give out 0 and lse -inf."""
    rep = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, rep, axis=1), np.repeat(v, rep, axis=1)
    s = scale * (q @ k.swapaxes(-1, -2))
    if pse is not None:
        s = s + pse
    keep = np.broadcast_to(keep, s.shape)
    s = np.where(keep, s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.where(keep, np.exp(s - m), 0.0)
    total = e.sum(axis=-1, keepdims=True)
    p = e / np.where(total > 0, total, 1.0)
    with np.errstate(divide="ignore"):
        lse = np.where(total > 0, m + np.log(total), -np.inf)[..., 0]
    if dropmul is not None:
        p = p * dropmul
    return p @ v, lse


def mode_keep(mode, s1, s2, pre=2147483647, nxt=2147483647, attn_mask=None, prefix=None, q_len=None, kv_len=None):
    """The keep matrix (B or 1, N or 1, S1, S2) of a sparse mode, from its definition."""
    i = np.arange(s1)[:, None]
    j = np.arange(s2)[None, :]
    if q_len is None and kv_len is None:
        off = np.array([s2 - s1])
    else:
        off = np.asarray(kv_len) - np.asarray(q_len)
    off = off[:, None, None, None]
    if mode == 0:
        keep = np.ones((1, 1, s1, s2), bool)
        if attn_mask is not None:
            keep = keep & (j - i >= -pre) & (j - i <= nxt)
    elif mode == 1:
        keep = np.ones((1, 1, s1, s2), bool)
    elif mode == 2:
        keep = (j <= i)[None, None]
    elif mode == 3:
        keep = j <= i + off
    elif mode == 4:
        keep = (j - i - off >= -pre) & (j - i - off <= nxt)
    else:                                                       # 5: prefix
        keep = (j <= i + off) | (j < np.asarray(prefix)[:, None, None, None])
    if attn_mask is not None and mode in (0, 1):
        m = attn_mask.astype(bool)
        m = m.reshape((1, 1) + m.shape) if m.ndim == 2 else (m[:, None] if m.ndim == 3 else m)
        keep = keep & ~m
    if q_len is not None:
        keep = keep & (i < np.asarray(q_len)[:, None, None, None])
    if kv_len is not None:
        keep = keep & (j < np.asarray(kv_len)[:, None, None, None])
    return keep


def _dropmul(drop_mask, keep_prob, s2):
    if drop_mask is None:
        return None
    bits = np.unpackbits(drop_mask, axis=-1, bitorder="little")[..., :s2]
    return bits.astype(np.float64) / keep_prob


def flash_ref(query, key, value, head_num, real_shift=None, drop_mask=None, padding_mask=None, attn_mask=None,
              prefix=None, actual_seq_qlen=None, actual_seq_kvlen=None, keep_prob=1.0, scalar_value=1.0,
              pre_tokens=2147483647, next_tokens=2147483647, inner_precise=0, input_layout="BSH", sparse_mode=0,
              block_q=None, block_kv=None, with_lse=False):
    q = to_bnsd(query, input_layout, heads=head_num)
    k = to_bnsd(key, input_layout, head_dim=q.shape[-1])
    v = to_bnsd(value, input_layout, head_dim=q.shape[-1])
    keep = mode_keep(sparse_mode, q.shape[2], k.shape[2], pre_tokens, next_tokens, attn_mask, prefix)
    out, lse = naive_attention(q, k, v, keep, scalar_value, real_shift, _dropmul(drop_mask, keep_prob, k.shape[2]))
    out = from_bnsd(out, input_layout)
    return (out, lse) if with_lse else out


# =================================================================================================
# flash_attention_score
def _qkv(rng, dtype, layout, b, n1, n2, s1, s2, d):
    def make(n, s):
        if layout == "BSH":
            return rand(rng, (b, s, n * d), dtype)
        if layout == "SBH":
            return rand(rng, (s, b, n * d), dtype)
        if layout == "BNSD":
            return rand(rng, (b, n, s, d), dtype)
        return rand(rng, (b, s, n, d), dtype)                 # BSND
    return make(n1, s1), make(n2, s2), make(n2, s2)


def _fa_samples(rng, dtype):
    tiles = {"block_q": 3, "block_kv": 4}
    q, k, v = _qkv(rng, dtype, "BSH", 2, 4, 2, 7, 7, 2)
    yield SampleInput((q, k, v, 4), dict(sparse_mode=2, scalar_value=0.7, **tiles),
                      desc="BSH causal (left-up), GQA 4/2, ragged tiles")
    q, k, v = _qkv(rng, dtype, "BNSD", 1, 2, 2, 5, 9, 3)
    yield SampleInput((q, k, v, 2), dict(sparse_mode=3, input_layout="BNSD", **tiles),
                      desc="cached prefix: right-down causal, S1 < S2")
    q, k, v = _qkv(rng, dtype, "BSH", 2, 2, 1, 6, 6, 2)
    mask = rng.random((2, 1, 6, 6)) < 0.3
    mask[0, 0, 2] = True                                         # one row sees nothing: output 0
    yield SampleInput((q, k, v, 2, None, None, None, mask), dict(pre_tokens=3, next_tokens=1, **tiles),
                      desc="attn_mask (1 = discard) + band, a fully masked row")
    q, k, v = _qkv(rng, dtype, "BNSD", 1, 2, 1, 5, 8, 2)
    yield SampleInput((q, k, v, 2), dict(sparse_mode=4, pre_tokens=2, next_tokens=1, input_layout="BNSD",
                                         block_q=2, block_kv=3), desc="band (right-down origin)")
    q, k, v = _qkv(rng, dtype, "BSND", 2, 2, 1, 4, 6, 2)
    yield SampleInput((q, k, v, 2), dict(sparse_mode=5, prefix=[2, 5], input_layout="BSND", **tiles),
                      desc="prefix mode")
    q, k, v = _qkv(rng, dtype, "SBH", 1, 2, 2, 5, 5, 2)
    pse = rand(rng, (1, 2, 5, 5), dtype, -1, 1)
    yield SampleInput((q, k, v, 2, pse), dict(input_layout="SBH", scalar_value=0.5, **tiles),
                      desc="SBH, real_shift (pse), no mask")
    q, k, v = _qkv(rng, dtype, "BNSD", 1, 2, 1, 3, 8, 2)
    keep = rng.random((1, 2, 3, 8)) < 0.7
    drop = np.packbits(keep, axis=-1, bitorder="little")
    yield SampleInput((q, k, v, 2, None, drop), dict(keep_prob=0.7, input_layout="BNSD", sparse_mode=3, **tiles),
                      desc="dropout with an explicit bit-packed drop_mask")
    q, k, v = _qkv(rng, dtype, "BNSD", 1, 1, 1, 4, 5, 2)
    yield SampleInput((noncontig(q), k, noncontig(v), 1), dict(input_layout="BNSD", sparse_mode=0),
                      desc="non-contiguous, one tile")
    q, k, v = _qkv(rng, dtype, "BSH", 1, 1, 1, 3, 4, 2)
    yield SampleInput((q * 30, k * 30, v, 1), dict(sparse_mode=2, block_q=2, block_kv=2),
                      desc="large scores (online max rescaling)")


def _fa_grad_op(dout, dlse, q, k, v, out, lse, seed, pse, drop_mask, attn_mask, **attrs):
    return get_primitive("flash_attention_score_grad")(dout, dlse, q, k, v, out, lse, seed, pse, drop_mask,
                                                       attn_mask, **attrs)


def _complex_attention(q, k, v, pse, keep, scale, rep, dropmul):
    """Naive attention without max-subtraction or comparisons: complex-analytic in q, k, v, pse."""
    k, v = np.repeat(k, rep, axis=1), np.repeat(v, rep, axis=1)
    s = scale * (q @ k.swapaxes(-1, -2))
    if pse is not None:
        s = s + pse
    e = np.where(keep, np.exp(s), 0.0)
    total = e.sum(axis=-1, keepdims=True)
    p = e / total
    if dropmul is not None:
        p = p * dropmul
    return p @ v, np.log(total[..., 0])


def _fa_grad_ref(dout, dlse, q, k, v, out, lse, seed, pse, drop_mask, attn_mask, head_num, keep_prob, scale_value,
                 pre_tokens, next_tokens, inner_precise, input_layout, sparse_mode, prefix, block_q, block_kv):
    qb = to_bnsd(q, input_layout, heads=head_num)
    d = qb.shape[-1]
    kb, vb = to_bnsd(k, input_layout, head_dim=d), to_bnsd(v, input_layout, head_dim=d)
    keep = np.broadcast_to(mode_keep(sparse_mode, qb.shape[2], kb.shape[2], pre_tokens, next_tokens, attn_mask,
                                     prefix), qb.shape[:3] + (kb.shape[2],))
    dm = _dropmul(drop_mask, keep_prob, kb.shape[2])
    rep = qb.shape[1] // kb.shape[1]
    args = [qb, kb, vb] + ([pse] if pse is not None else [])

    def f(q_, k_, v_, *p_):
        return _complex_attention(q_, k_, v_, p_[0] if p_ else None, keep, scale_value, rep, dm)
    grads = complex_step_vjp(f, args, range(len(args)), (to_bnsd(dout, input_layout, heads=head_num), dlse))
    out_grads = [from_bnsd(grads[0], input_layout), from_bnsd(grads[1], input_layout),
                 from_bnsd(grads[2], input_layout)]
    return tuple(out_grads + grads[3:])


def _fa_grad_attrs(**kw):
    attrs = dict(keep_prob=1.0, scale_value=1.0, pre_tokens=2147483647, next_tokens=2147483647, inner_precise=0,
                 input_layout="BSH", sparse_mode=0, prefix=None, block_q=2, block_kv=3)
    attrs.update(kw)
    return attrs


def _fa_grad_samples(rng, dtype):
    # out / lse must be the forward's (the backward recomputes P from lse): take them from the reference
    q, k, v = _qkv(rng, dtype, "BNSD", 1, 2, 1, 3, 5, 2)
    pse = rand(rng, (1, 2, 3, 5), dtype, -1, 1)
    attrs = _fa_grad_attrs(head_num=2, input_layout="BNSD", sparse_mode=3, scale_value=0.8)
    out, lse = flash_ref(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64), 2,
                         pse.astype(np.float64), input_layout="BNSD", sparse_mode=3, scalar_value=0.8, with_lse=True)
    dout, dlse = rand(rng, out.shape, dtype), rand(rng, lse.shape, dtype)
    seed = np.array(0, np.int64)
    yield SampleInput((dout, dlse, q, k, v, out.astype(dtype), lse.astype(dtype), seed, pse, None, None), attrs,
                      desc="GQA, right-down causal, pse, lse cotangent")
    q, k, v = _qkv(rng, dtype, "BSH", 1, 2, 2, 3, 8, 2)
    keep = rng.random((1, 2, 3, 8)) < 0.75
    drop = np.packbits(keep, axis=-1, bitorder="little")
    mask = rng.random((3, 8)) < 0.2
    mask[:, 0] = False                                             # no empty row (log 0 in the reference)
    attrs = _fa_grad_attrs(head_num=2, keep_prob=0.75)
    out, lse = flash_ref(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64), 2, None, drop,
                         attn_mask=mask, keep_prob=0.75, with_lse=True)
    dout, dlse = rand(rng, out.shape, dtype), np.zeros(lse.shape, dtype)
    yield SampleInput((dout, dlse, q, k, v, out.astype(dtype), lse.astype(dtype), np.array(0, np.int64), None,
                       drop, mask), attrs, desc="BSH, dropout mask, attn_mask")


# =================================================================================================
# prompt_flash_attention
def pfa_ref(query, key, value, attn_mask=None, actual_seq_lengths=None, actual_seq_lengths_kv=None, pse_shift=None,
            deq_scale1=None, quant_scale1=None, deq_scale2=None, quant_scale2=None, quant_offset2=None, num_heads=1,
            scale_value=1.0, pre_tokens=2147483647, next_tokens=0, input_layout="BSH", num_key_value_heads=0,
            sparse_mode=0, inner_precise=1):
    q = to_bnsd(query, input_layout, heads=num_heads)
    k = to_bnsd(key, input_layout, head_dim=q.shape[-1])
    v = to_bnsd(value, input_layout, head_dim=q.shape[-1])
    b, _, s1, _ = q.shape
    s2 = k.shape[2]
    ql = actual_seq_lengths if actual_seq_lengths is not None else (None if actual_seq_lengths_kv is None
                                                                    else np.full(b, s1))
    kl = actual_seq_lengths_kv if actual_seq_lengths_kv is not None else (None if ql is None else np.full(b, s2))
    keep = mode_keep(sparse_mode, s1, s2, pre_tokens, next_tokens, attn_mask, q_len=ql, kv_len=kl)
    return from_bnsd(naive_attention(q, k, v, keep, scale_value, pse_shift)[0], input_layout)


def _pfa_samples(rng, dtype):
    q, k, v = _qkv(rng, dtype, "BSH", 2, 2, 2, 5, 5, 2)
    yield SampleInput((q, k, v), dict(num_heads=2, scale_value=0.7), desc="mode 0 without a mask: full attention")
    mask = np.triu(np.ones((5, 5), bool), 1)
    yield SampleInput((q, k, v, mask), dict(num_heads=2), desc="causal mask (1 = discard), next_tokens=0 band")
    q, k, v = _qkv(rng, dtype, "BNSD", 2, 4, 2, 4, 7, 2)
    yield SampleInput((q, k, v, None, np.array([4, 2]), np.array([7, 5])),
                      dict(num_heads=4, num_key_value_heads=2, input_layout="BNSD", sparse_mode=3),
                      desc="GQA, right-down causal over valid lengths, padded rows")
    pse = rand(rng, (2, 4, 4, 7), dtype, -1, 1)
    yield SampleInput((q, k, v, None, None, None, pse),
                      dict(num_heads=4, input_layout="BNSD", sparse_mode=4, pre_tokens=3, next_tokens=0),
                      desc="band + pse_shift")


# =================================================================================================
# incre_flash_attention
def ifa_ref(query, key, value, attn_mask=None, actual_seq_lengths=None, pse_shift=None, dequant_scale1=None,
            quant_scale1=None, dequant_scale2=None, quant_scale2=None, quant_offset2=None, antiquant_scale=None,
            antiquant_offset=None, block_table=None, num_heads=1, input_layout="BSH", scale_value=1.0,
            num_key_value_heads=0, block_size=0, inner_precise=1, kv_padding_size=None, num_kv_splits=None):
    q = to_bnsd(query, input_layout, heads=num_heads)
    d = q.shape[-1]
    b = q.shape[0]
    if block_table is not None:
        kc = key.reshape(key.shape[0], key.shape[1], -1, d).astype(np.float64)
        vc = value.reshape(kc.shape).astype(np.float64)
        if antiquant_scale is not None:
            sc = antiquant_scale.reshape(2, -1, d)
            off = np.zeros_like(sc) if antiquant_offset is None else antiquant_offset.reshape(2, -1, d)
            kc, vc = (kc + off[0]) * sc[0], (vc + off[1]) * sc[1]
        outs = []
        for i in range(b):
            n = int(actual_seq_lengths[i])
            ks = np.concatenate([kc[block_table[i, j]] for j in range(-(-n // kc.shape[1]))] or
                                [np.zeros((0,) + kc.shape[2:])])[:n]
            vs = np.concatenate([vc[block_table[i, j]] for j in range(-(-n // kc.shape[1]))] or
                                [np.zeros((0,) + kc.shape[2:])])[:n]
            o, _ = naive_attention(q[i:i + 1], ks.transpose(1, 0, 2)[None], vs.transpose(1, 0, 2)[None],
                                   np.ones((1, 1, 1, n), bool), scale_value)
            outs.append(o)
        return from_bnsd(np.concatenate(outs), input_layout)
    k = to_bnsd(key, input_layout, head_dim=d)
    v = to_bnsd(value, input_layout, head_dim=d)
    s2 = k.shape[2]
    keep = np.ones((b, 1, 1, s2), bool)
    if actual_seq_lengths is not None:
        keep &= np.arange(s2)[None, None, None, :] < np.asarray(actual_seq_lengths)[:, None, None, None]
    if attn_mask is not None:
        keep &= ~attn_mask.reshape(b, 1, 1, s2).astype(bool)
    return from_bnsd(naive_attention(q, k, v, keep, scale_value, pse_shift)[0], input_layout)


def _ifa_samples(rng, dtype):
    q = rand(rng, (3, 1, 4 * 2), dtype)
    k, v = rand(rng, (3, 9, 2 * 2), dtype), rand(rng, (3, 9, 2 * 2), dtype)
    for splits in (1, 2, 4):
        yield SampleInput((q, k, v, None, np.array([9, 4, 7])), dict(num_heads=4, num_key_value_heads=2,
                                                                     num_kv_splits=splits),
                          desc=f"Flash-Decoding, {splits} split(s), GQA, valid lengths")
    mask = rng.random((3, 9)) < 0.3
    mask[:, 0] = False
    pse = rand(rng, (1, 4, 1, 9), dtype, -1, 1)
    yield SampleInput((q, k, v, mask, None, pse), dict(num_heads=4, num_kv_splits=3, scale_value=0.5),
                      desc="attn_mask (1 = discard) and pse_shift")
    qb = rand(rng, (2, 2, 1, 3), dtype)
    kb, vb = rand(rng, (2, 2, 6, 3), dtype), rand(rng, (2, 2, 6, 3), dtype)
    yield SampleInput((qb, kb, vb), dict(num_heads=2, input_layout="BNSD"), desc="BNSD")
    # paged cache: 7 blocks of 2 slots, shuffled block tables (-1 past a sequence's end)
    kc, vc = rand(rng, (7, 2, 2 * 3), dtype), rand(rng, (7, 2, 2 * 3), dtype)
    bt = np.array([[5, 0, 3], [6, 2, -1]], np.int32)
    qp = rand(rng, (2, 1, 2 * 3), dtype)
    yield SampleInput((qp, kc, vc, None, np.array([5, 3], np.int32), None, None, None, None, None, None, None, None,
                       bt), dict(num_heads=2, block_size=2), desc="paged cache through a block table")
    kq = rng.integers(-127, 128, (7, 2, 2 * 3)).astype(np.int8)
    vq = rng.integers(-127, 128, (7, 2, 2 * 3)).astype(np.int8)
    scale = rand(rng, (2, 6), dtype, 0.005, 0.02)
    offset = rand(rng, (2, 6), dtype, -3, 3)
    yield SampleInput((qp, kq, vq, None, np.array([6, 1], np.int32), None, None, None, None, None, None, scale,
                       offset, np.array([[1, 4, 0], [3, 6, 2]], np.int32)), dict(num_heads=2, block_size=2),
                      desc="paged int8 cache with antiquant scale/offset")


# =================================================================================================
# paged_attention and reshape_and_cache
def _gather_sequence(cache, table, n):
    bs = cache.shape[1]
    rows = [cache[table[p // bs], p % bs] for p in range(n)]
    return np.stack(rows) if rows else np.zeros((0,) + cache.shape[2:])


def paged_ref(query, key_cache, value_cache, block_tables, context_lens, antiquant_scale=None, antiquant_offset=None,
              attn_mask=None, q_seq_lens=None, alibi_mask=None, head_num=1, scale_value=1.0, kv_head_num=0,
              kv_cache_quant_mode="DEFAULT", mask_mode="MASK_DEFAULT", mla_v_dim=0):
    t = query.shape[0]
    q = query.reshape(t, head_num, -1)
    d = q.shape[-1]
    kc = key_cache.reshape(key_cache.shape[0], key_cache.shape[1], -1, d).astype(np.float64)
    vc = value_cache.reshape(kc.shape).astype(np.float64)
    if antiquant_scale is not None:
        sc = antiquant_scale.reshape(2, -1, d)
        off = np.zeros_like(sc) if antiquant_offset is None else antiquant_offset.reshape(2, -1, d)
        kc, vc = (kc + off[0]) * sc[0], (vc + off[1]) * sc[1]
    b = block_tables.shape[0]
    qlen = np.ones(b, int) if q_seq_lens is None else np.asarray(q_seq_lens)
    out = np.zeros(q.shape)
    row = 0
    for i in range(b):
        n = int(context_lens[i])
        ks = _gather_sequence(kc, block_tables[i], n).transpose(1, 0, 2)[None]     # (1, N2, n, D)
        vs = _gather_sequence(vc, block_tables[i], n).transpose(1, 0, 2)[None]
        for tq in range(int(qlen[i])):
            pos = n - int(qlen[i]) + tq
            keep = (np.arange(n) <= pos)[None, None, None, :]
            o, _ = naive_attention(q[row][None, :, None, :], ks, vs, keep, scale_value)
            out[row] = o[0, :, 0, :]
            row += 1
    return out.reshape(query.shape)


def _paged_samples(rng, dtype):
    kc, vc = rand(rng, (9, 4, 2, 3), dtype), rand(rng, (9, 4, 2, 3), dtype)
    bt = np.array([[8, 1, 3], [0, -1, -1], [4, 2, 7]], np.int32)
    q = rand(rng, (3, 4, 3), dtype)
    yield SampleInput((q, kc, vc, bt, np.array([11, 3, 9], np.int32)), dict(head_num=4, scale_value=0.6),
                      desc="decode, GQA 4/2, ragged contexts, shuffled blocks")
    q2 = rand(rng, (3, 4 * 3), dtype)
    yield SampleInput((q2, kc.reshape(9, 4, 6), vc.reshape(9, 4, 6), bt, np.array([12, 4, 1], np.int32)),
                      dict(head_num=4, kv_head_num=2), desc="(T, N*D) query, (blocks, slots, N2*D) caches, full blocks")
    qc = rand(rng, (7, 4, 3), dtype)
    yield SampleInput((qc, kc, vc, bt, np.array([10, 2, 9], np.int32), None, None, None, np.array([3, 2, 2])),
                      dict(head_num=4), desc="several new tokens per sequence (q_seq_lens): causal chunks")
    kq = rng.integers(-127, 128, (9, 4, 2, 3)).astype(np.int8)
    vq = rng.integers(-127, 128, (9, 4, 2, 3)).astype(np.int8)
    scale = rand(rng, (2, 6), dtype, 0.005, 0.02)
    yield SampleInput((q, kq, vq, bt, np.array([9, 4, 12], np.int32), scale), dict(head_num=4),
                      desc="int8 caches, antiquant scale only")


def _rc_op(key, value, key_cache, value_cache, slot_mapping):
    """reshape_and_cache on copies of the caches: it writes in place, and the sample's arrays must
    stay as they were for the reference (the in-place semantics have tests of their own)."""
    from ...common.tensor import Tensor
    kc = Tensor(key_cache.asnumpy().copy())
    vc = None if value_cache is None else Tensor(value_cache.asnumpy().copy())
    return ops.reshape_and_cache(key, value, kc, vc, slot_mapping)


def rc_ref(key, value, key_cache, value_cache, slot_mapping):
    kc = key_cache.copy()
    vc = None if value_cache is None else value_cache.copy()
    bs = kc.shape[1]
    for t, slot in enumerate(slot_mapping):
        if slot < 0:
            continue
        kc[slot // bs, slot % bs] = key[t].reshape(kc.shape[2:])
        if vc is not None:
            vc[slot // bs, slot % bs] = value[t].reshape(vc.shape[2:])
    return (kc,) if vc is None else (kc, vc)


def _rc_samples(rng, dtype):
    kc, vc = rand(rng, (5, 3, 2, 2), dtype), rand(rng, (5, 3, 2, 2), dtype)
    k, v = rand(rng, (4, 2, 2), dtype), rand(rng, (4, 2, 2), dtype)
    yield SampleInput((k, v, kc, vc, np.array([7, 0, 14, 5], np.int32)), desc="scattered slots")
    yield SampleInput((k.reshape(4, 4), v.reshape(4, 4), kc.reshape(5, 3, 4), vc.reshape(5, 3, 4),
                       np.array([3, -1, 4, 12], np.int64)), desc="(T, N*D) rows, a padding slot (-1)")
    yield SampleInput((k, None, kc, None, np.array([1, 2, 3, 4], np.int32)), desc="key-only cache")


register(
    OpInfo("flash_attention_score", ops.flash_attention_score, flash_ref, _fa_samples, dtypes=F16_32_64,
           tols=ATTN_TOLS, grad_tol=(1e-6, 1e-7)),
    OpInfo("flash_attention_score_grad", _fa_grad_op, _fa_grad_ref, _fa_grad_samples, dtypes=F32_64,
           tols={mstype.float64: (1e-9, 1e-10), mstype.float32: (1e-4, 1e-5)}, grad_tol=(1e-5, 1e-6),
           primitive="flash_attention_score_grad"),
    OpInfo("prompt_flash_attention", ops.prompt_flash_attention, pfa_ref, _pfa_samples, dtypes=F16_32_64,
           tols=ATTN_TOLS, differentiable=False),
    OpInfo("incre_flash_attention", ops.incre_flash_attention, ifa_ref, _ifa_samples, dtypes=F16_32_64,
           tols=ATTN_TOLS, differentiable=False),
    OpInfo("paged_attention", ops.paged_attention, paged_ref, _paged_samples, dtypes=F16_32_64,
           tols=ATTN_TOLS, differentiable=False),
    OpInfo("reshape_and_cache", _rc_op, rc_ref, _rc_samples, dtypes=F16_32_64, differentiable=False,
           primitive="reshape_and_cache"),
)
