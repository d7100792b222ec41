"""Fused attention ops with MindSpore's names and conventions: `flash_attention_score` (training;
forward and backward), `prompt_flash_attention` (prefill) and `incre_flash_attention` (decode,
Flash-Decoding split-KV, optionally over a paged cache). The NumPy kernels live in
`fused_attention_kernels`; this module validates, converts layouts and wires the autodiff.

Conventions shared by all three (MindSpore 2.3, see reference/mindspore_api.md §4):

* layouts: "BSH" (B, S, N*D), "BNSD", "BSND", "SBH" (S, B, N*D). Keys/values may have fewer heads
  N2 than the queries' N1 (grouped-query attention; N2 must divide N1), never a different D.
* `attn_mask`: bool/uint8 where **1 / True means discard** (the opposite of PyTorch's bool masks).
* `sparse_mode` (i = query row, j = key column, S1/S2 = query/key lengths):
    0  default: no mask unless `attn_mask` is given; then the mask *and* the band
       -pre_tokens <= j - i <= next_tokens apply (band origin at the top-left corner);
    1  all-mask: `attn_mask` required, pre/next_tokens ignored;
    2  left-up causal: j <= i;
    3  right-down causal: j <= i + (S2 - S1)  (queries are the *last* S1 positions: a cached prefix);
    4  band with origin at the bottom-right corner: -pre_tokens <= j - i - (S2 - S1) <= next_tokens;
    5  prefix (flash_attention_score only): right-down causal, plus keys j < prefix[b] always visible.
  Modes 2-5 generate their pattern from the mode (so whole tiles are skipped without reading any
  mask). MindSpore additionally wants the compressed (2048, 2048) mask template for them; minispore
  accepts it (only its shape is checked) or None.
* Rows with no visible key (everything masked) output 0.

Compute precision: float16/bfloat16 inputs are computed in float32 and rounded once; float32 and
float64 are computed in their own precision.
"""
from __future__ import annotations

import numbers

import numpy as np

from ...common import context
from ...common import dtype as mstype
from ...common.tensor import Tensor
from .. import _check as C
from .. import costs
from .. import sharding_rules as SR
from ..primitive import AbstractTensor, defprim
from . import fused_attention_kernels as K

__all__ = ["flash_attention_score", "prompt_flash_attention", "incre_flash_attention"]

LAYOUTS = ("BSH", "BNSD", "BSND", "SBH")
MASK_DTYPES = (mstype.bool_, mstype.uint8, mstype.int8)
COMPRESSED_MASK = (2048, 2048)
DEFAULT_BLOCK_Q = 128          # tile sizes of the training kernel (rows of Q, rows of K/V per tile)
DEFAULT_BLOCK_KV = 128
INFER_BLOCK_KV = 512           # inference kernels: bigger key tiles, fewer Python iterations


def compute_dtype(np_dtype):
    """float32 for half-precision inputs, else the input's own dtype."""
    return np.dtype(np.float32) if np.dtype(np_dtype).itemsize < 4 else np.dtype(np_dtype)


def lse_dtype(dtype):
    """softmax_lse is float32 (MindSpore's softmax_max/sum are fp32); float64 inputs keep float64."""
    return mstype.float64 if dtype is mstype.float64 else mstype.float32


def draw_dropout_seed():
    """The per-call dropout seed: one draw from the global generator (`ms.set_seed` seeds it)."""
    return int(context.rng().integers(0, 2 ** 63 - 1))


# =================================================================================================
# validation shared by the attention ops
def _int(op, arg, v, minimum=None):
    return C.int_attr(op, arg, v, minimum)


def _float(op, arg, v, lo=None, hi=None):
    return C.float_attr(op, arg, v, lo, hi)


def _layout(op, layout):
    if not isinstance(layout, str) or layout not in LAYOUTS:
        extra = " ('TND', packed variable-length sequences, is not supported by minispore)" \
            if layout == "TND" else ""
        raise C.OpValueError(op, f"'input_layout' in {LAYOUTS}{extra}", repr(layout))
    return layout


def _layout_dims(op, arg, x, layout, heads=None, head_dim=None):
    """(B, N, S, D) of a tensor in `layout`; for 3-d layouts N comes from `heads` or `head_dim`."""
    shape = tuple(x.shape)
    want = 3 if layout in ("BSH", "SBH") else 4
    if len(shape) != want:
        raise C.OpValueError(op, f"'{arg}' of rank {want} for input_layout '{layout}'", f"shape {shape}")
    if layout == "BNSD":
        b, n, s, d = shape
    elif layout == "BSND":
        b, s, n, d = shape
    else:
        b, s, h = shape if layout == "BSH" else (shape[1], shape[0], shape[2])
        if heads is not None:
            if h % heads:
                raise C.OpValueError(op, f"the hidden size of '{arg}' divisible by the head number {heads}",
                                     f"shape {shape}")
            n, d = heads, h // heads
        else:
            if head_dim == 0 or h % head_dim:
                raise C.OpValueError(op, f"the hidden size of '{arg}' a multiple of the head dim {head_dim}",
                                     f"shape {shape}")
            n, d = h // head_dim, head_dim
    if heads is not None and n != heads:
        raise C.OpValueError(op, f"'{arg}' with {heads} heads (the head number)", f"shape {shape} ({n} heads)")
    if head_dim is not None and d != head_dim:
        raise C.OpValueError(op, f"'{arg}' with head dim {head_dim} (the query's)", f"shape {shape} (head dim {d})")
    return b, n, s, d


def _qkv_geometry(op, q, k, v, heads, layout, kv_heads=0):
    """Check query/key/value against each other; returns (B, N1, N2, S1, S2, D)."""
    C.floating(op, "query", q)
    for arg, t in (("key", k), ("value", v)):
        C.tensor(op, arg, t)
        if t.dtype is not q.dtype:
            raise C.OpTypeError(op, f"'{arg}' with the dtype of 'query' ({q.dtype})", str(t.dtype))
    if tuple(v.shape) != tuple(k.shape):
        raise C.OpValueError(op, "'value' of the shape of 'key'", f"{tuple(v.shape)} and {tuple(k.shape)}")
    b, n1, s1, d = _layout_dims(op, "query", q, layout, heads=heads)
    b2, n2, s2, _ = _layout_dims(op, "key", k, layout, head_dim=d)
    if b2 != b:
        raise C.OpValueError(op, f"'key' with the query's batch size {b}", f"shape {tuple(k.shape)}")
    if 0 in (b, n1, s1, s2, d):
        # (an empty batch or sequence has no softmax row to normalise; the kernels' layout
        # reshapes could not even infer their sizes)
        raise C.OpValueError(op, "query, key and value without zero-sized dimensions",
                             f"shapes {tuple(q.shape)}, {tuple(k.shape)}")
    if n2 == 0 or n1 % n2:
        raise C.OpValueError(op, f"a key/value head number dividing the query head number {n1}",
                             f"{n2} key/value heads")
    if kv_heads and kv_heads != n2:
        raise C.OpValueError(op, f"key/value tensors with num_key_value_heads={kv_heads} heads",
                             f"{n2} heads (shape {tuple(k.shape)})")
    return b, n1, n2, s1, s2, d


def _bias_check(op, arg, t, q, b, n1, s1, s2):
    """An additive score bias (pse): float of the query's dtype, shape (B or 1, N1 or 1, S1, S2)."""
    if t is None:
        return
    C.floating(op, arg, t)
    if t.dtype is not q.dtype:
        raise C.OpTypeError(op, f"'{arg}' with the dtype of 'query' ({q.dtype})", str(t.dtype))
    sh = tuple(t.shape)
    if len(sh) != 4 or sh[0] not in (1, b) or sh[1] not in (1, n1) or sh[2:] != (s1, s2):
        raise C.OpValueError(op, f"'{arg}' of shape ({b} or 1, {n1} or 1, {s1}, {s2})", f"shape {sh}")


def _mask_dtype(op, arg, m):
    C.tensor(op, arg, m)
    if m.dtype not in MASK_DTYPES:
        raise C.OpTypeError(op, f"'{arg}' of dtype bool, uint8 or int8 (1 = discard)", str(m.dtype))


def _full_mask_check(op, m, b, n1, s1, s2):
    _mask_dtype(op, "attn_mask", m)
    sh = tuple(m.shape)
    ok = (sh == (s1, s2) or (len(sh) == 4 and sh[0] in (1, b) and sh[1] in (1, n1) and sh[2:] == (s1, s2))
          or (len(sh) == 3 and sh[0] in (1, b) and sh[1:] == (s1, s2)))
    if not ok:
        raise C.OpValueError(op, f"'attn_mask' of shape ({b}, {n1} or 1, {s1}, {s2}), ({b}, {s1}, {s2}) or "
                                 f"({s1}, {s2})", f"shape {sh}")


def _sparse_mode(op, mode, allowed):
    m = _int(op, "sparse_mode", mode)
    if m not in allowed:
        raise C.OpValueError(op, f"'sparse_mode' in {tuple(allowed)} (6-8 are not implemented, as in "
                                 "MindSpore)" if m in (6, 7, 8) else f"'sparse_mode' in {tuple(allowed)}", repr(mode))
    return m


def _mask_for_mode(op, attn_mask, mode, b, n1, s1, s2):
    if mode in (0, 1):
        if attn_mask is None:
            if mode == 1:
                raise C.OpValueError(op, "an 'attn_mask' with sparse_mode=1 (all-mask)", "None")
            return
        _full_mask_check(op, attn_mask, b, n1, s1, s2)
    elif attn_mask is not None:
        _mask_dtype(op, "attn_mask", attn_mask)
        if tuple(attn_mask.shape) != COMPRESSED_MASK:
            raise C.OpValueError(op, f"'attn_mask' None or the compressed {COMPRESSED_MASK} template with "
                                     f"sparse_mode={mode} (the pattern comes from the mode)",
                                 f"shape {tuple(attn_mask.shape)}")


# =================================================================================================
# layouts and patterns (NumPy side)
def to_bnsd(x, layout, d):
    """A (B, N, S, D) view of an array in `layout`."""
    if layout == "BNSD":
        return x
    if layout == "BSND":
        return x.transpose(0, 2, 1, 3)
    if layout == "BSH":
        return x.reshape(x.shape[0], x.shape[1], -1, d).transpose(0, 2, 1, 3)
    return x.reshape(x.shape[0], x.shape[1], -1, d).transpose(1, 2, 0, 3)        # SBH


def from_bnsd(x, layout):
    """The inverse of `to_bnsd`, as a contiguous array."""
    b, n, s, d = x.shape
    if layout == "BNSD":
        return np.ascontiguousarray(x)
    if layout == "BSND":
        return np.ascontiguousarray(x.transpose(0, 2, 1, 3))
    if layout == "BSH":
        return np.ascontiguousarray(x.transpose(0, 2, 1, 3)).reshape(b, s, n * d)
    return np.ascontiguousarray(x.transpose(2, 0, 1, 3)).reshape(s, b, n * d)     # SBH


def grouped(x, n2):
    """(B, N1, S, D) -> (B, N2, G, S, D) view: query head h = n2 * G + g uses key/value head n2."""
    b, n1, s, d = x.shape
    return x.reshape(b, n2, n1 // n2, s, d)


def _heads_view(t, n2):
    """A (B|1, N1|1, S1, S2) mask/bias as (B|1, N2|1, G|1, S1, S2) (or a 2-d (S1, S2) one unchanged)."""
    if t.ndim == 2:
        return t
    if t.ndim == 3:                                           # (B, S1, S2): all heads alike
        return t[:, None, None]
    if t.shape[1] == 1:
        return t[:, :, None]
    return t.reshape(t.shape[0], n2, t.shape[1] // n2, t.shape[2], t.shape[3])


def band_for_mode(mode, pre, nxt, s1, s2, has_mask, shift=None):
    """(pre, nxt, shift) of the band a sparse_mode defines (None = unbounded). `shift` overrides
    S2 - S1 for right-down modes (per-batch valid lengths)."""
    down = (s2 - s1) if shift is None else shift
    if mode == 0:
        return (pre, nxt, 0) if has_mask else (None, None, 0)
    if mode == 1:
        return None, None, 0
    if mode == 2:
        return None, 0, 0
    if mode == 3 or mode == 5:
        return None, 0, down
    return pre, nxt, down                                      # mode 4


def make_pattern(mode, pre, nxt, b, n2, s1, s2, attn_mask, prefix=None, q_len=None, kv_len=None):
    """The AttentionPattern of a call (the dense mask is only read for modes 0 and 1)."""
    reads_mask = attn_mask is not None and mode in (0, 1)
    shift = None
    if q_len is not None or kv_len is not None:
        ql = np.full(b, s1, np.int64) if q_len is None else q_len
        kl = np.full(b, s2, np.int64) if kv_len is None else kv_len
        shift = kl - ql
    p_pre, p_nxt, p_shift = band_for_mode(mode, pre, nxt, s1, s2, reads_mask, shift)
    mask = _heads_view(attn_mask, n2) if reads_mask else None
    return K.AttentionPattern(b, s1, s2, p_pre, p_nxt, p_shift, q_len=q_len, kv_len=kv_len,
                              prefix=None if mode != 5 else np.asarray(prefix, np.int64), mask=mask)


def _flash_attention_cost(op, backward=False, heads_attr="head_num", kv_heads_attr=None):
    """FlashAttention's cost rule: QK^T and PV are 2 matmuls of 2*S1*S2*D FLOPs per head; the
    backward pass recomputes QK^T and does dV, dP, dQ, dK: 5 such matmuls, 2.5x the forward (Dao
    2023, FlashAttention-2, section 3.1). The full S1 x S2 is counted even under a causal mask
    (PaLM's convention; a kernel that skips masked tiles does about half). Softmax work (exp, max,
    sum, rescale: ~5 per score, ~8 in backward) runs on the vector unit. Bytes: what the op reads
    and writes - the S1 x S2 scores never reach memory, which is the point of the kernel."""
    def rule(ins, outs, attrs):
        if backward:                     # (dout, dlse, q, k, v, ...): the geometry of q, k, v
            ins = ins[2:]
        kv = attrs.get(kv_heads_attr, 0) if kv_heads_attr else 0
        b, n1, _n2, s1, s2, d = _qkv_geometry(op, ins[0], ins[1], ins[2], attrs[heads_attr], attrs["input_layout"], kv)
        scores = b * n1 * s1 * s2
        mm = (10 if backward else 4) * scores * d
        return {"flops": mm + (8 if backward else 5) * scores, "matmul_flops": mm}
    return costs.matrix_unit(rule)


# =================================================================================================
# flash_attention_score
_FA = "flash_attention_score"


def _fa_check_attrs(head_num, keep_prob, scale_value, pre_tokens, next_tokens, inner_precise, input_layout,
                    sparse_mode, prefix, block_q, block_kv):
    _int(_FA, "head_num", head_num, 1)
    _float(_FA, "keep_prob", keep_prob, 0.0, 1.0)
    if keep_prob == 0.0:
        raise C.OpValueError(_FA, "'keep_prob' in (0, 1]", "0.0")
    _float(_FA, "scalar_value", scale_value)
    _int(_FA, "pre_tokens", pre_tokens)
    _int(_FA, "next_tokens", next_tokens)
    if _int(_FA, "inner_precise", inner_precise) not in (0, 1):
        raise C.OpValueError(_FA, "'inner_precise' in (0, 1)", repr(inner_precise))
    _layout(_FA, input_layout)
    mode = _sparse_mode(_FA, sparse_mode, (0, 1, 2, 3, 4, 5))
    _int(_FA, "block_q", block_q, 1)
    _int(_FA, "block_kv", block_kv, 1)
    if mode == 5 and prefix is None:
        raise C.OpValueError(_FA, "'prefix' (one length per batch) with sparse_mode=5", "None")
    if mode != 5 and prefix is not None:
        raise C.OpValueError(_FA, "'prefix' only with sparse_mode=5", f"prefix with sparse_mode={mode}")
    return mode


def _fa_infer(q, k, v, real_shift, drop_mask, attn_mask, head_num, keep_prob, scale_value, pre_tokens,
              next_tokens, inner_precise, input_layout, sparse_mode, prefix, block_q, block_kv):
    mode = _fa_check_attrs(head_num, keep_prob, scale_value, pre_tokens, next_tokens, inner_precise,
                           input_layout, sparse_mode, prefix, block_q, block_kv)
    b, n1, n2, s1, s2, d = _qkv_geometry(_FA, q, k, v, head_num, input_layout)
    _bias_check(_FA, "real_shift", real_shift, q, b, n1, s1, s2)
    if drop_mask is not None:
        C.tensor(_FA, "drop_mask", drop_mask)
        if keep_prob == 1.0:
            raise C.OpValueError(_FA, "'drop_mask' None when keep_prob=1.0", "a drop_mask")
        if drop_mask.dtype is not mstype.uint8:
            raise C.OpTypeError(_FA, "'drop_mask' of dtype uint8 (bit-packed)", str(drop_mask.dtype))
        if s2 % 8 or tuple(drop_mask.shape) != (b, n1, s1, s2 // 8):
            raise C.OpValueError(_FA, f"'drop_mask' of shape (B, N1, S1, S2 // 8) = ({b}, {n1}, {s1}, {s2 / 8:g}) "
                                      "with S2 a multiple of 8", f"shape {tuple(drop_mask.shape)}")
    _mask_for_mode(_FA, attn_mask, mode, b, n1, s1, s2)
    if mode == 5:
        if len(prefix) != b or any(not 0 <= p <= s2 for p in prefix):
            raise C.OpValueError(_FA, f"'prefix' of {b} lengths in [0, {s2}]", repr(prefix))
    return (AbstractTensor(q.shape, q.dtype), AbstractTensor((b, n1, s1), lse_dtype(q.dtype)),
            AbstractTensor((), mstype.int64))


class _FaCall:
    """Everything a FlashAttention kernel call needs, in the internal (B, N2, G, S, D) layout."""

    def __init__(self, q, k, v, real_shift, drop_mask, attn_mask, seed, head_num, keep_prob, scale_value,
                 pre_tokens, next_tokens, input_layout, sparse_mode, prefix):
        self.layout = input_layout
        self.cdt = compute_dtype(q.dtype)
        d = q.shape[-1] if input_layout in ("BNSD", "BSND") else q.shape[-1] // head_num
        qb = to_bnsd(q, input_layout, d)
        kb = to_bnsd(k, input_layout, d)
        self.b, self.n1, self.s1, self.d = qb.shape
        self.n2, self.s2 = kb.shape[1], kb.shape[2]
        self.groups = self.n1 // self.n2
        self.q = grouped(qb, self.n2).astype(self.cdt, copy=False)
        self.k = kb.astype(self.cdt, copy=False)
        self.v = to_bnsd(v, input_layout, d).astype(self.cdt, copy=False)
        self.scale = scale_value
        self.pse = None if real_shift is None else _heads_view(real_shift.astype(self.cdt, copy=False), self.n2)
        self.pattern = make_pattern(sparse_mode, pre_tokens, next_tokens, self.b, self.n2, self.s1, self.s2,
                                    attn_mask, prefix)
        self.dropout = None
        if keep_prob < 1.0:
            packed = None if drop_mask is None else _heads_view(drop_mask, self.n2)
            self.dropout = K.Dropout(keep_prob, self.n1, self.s1, self.s2, self.groups, seed, packed)

    def internal(self, x):
        """A tensor shaped like the query (in the layout) as (B, N2, G, S1, D)."""
        return grouped(to_bnsd(x, self.layout, self.d), self.n2).astype(self.cdt, copy=False)

    def external(self, x5):
        """(B, N2, G, S, D) or (B, N2, S, D) back to the layout."""
        x4 = x5.reshape(self.b, -1, x5.shape[-2], x5.shape[-1])
        return from_bnsd(x4, self.layout)


def _fa_kernel(q, k, v, real_shift, drop_mask, attn_mask, head_num, keep_prob, scale_value, pre_tokens,
               next_tokens, inner_precise, input_layout, sparse_mode, prefix, block_q, block_kv):
    seed = draw_dropout_seed() if (keep_prob < 1.0 and drop_mask is None) else 0
    call = _FaCall(q, k, v, real_shift, drop_mask, attn_mask, seed, head_num, keep_prob, scale_value,
                   pre_tokens, next_tokens, input_layout, sparse_mode, prefix)
    out, lse = K.flash_forward(call.q, call.k, call.v, call.scale, call.pattern, call.pse, call.dropout,
                               block_q, block_kv)
    return call.external(out), lse.reshape(call.b, call.n1, call.s1), np.asarray(seed, np.int64)


def _fa_bprop(inputs, out, dout, **attrs):
    q, k, v, real_shift, drop_mask, attn_mask = inputs
    grads = _fa_grad(dout[0], dout[1], q, k, v, out[0], out[1], out[2], real_shift, drop_mask, attn_mask,
                     **attrs)
    dpse = grads[3] if real_shift is not None else None
    return grads[0], grads[1], grads[2], dpse, None, None


_flash_attention_score = defprim(
    _FA, _fa_infer, _fa_kernel, _fa_bprop,
    doc="tiled attention with online softmax: (attention_out, softmax_lse, dropout seed)",
    random=True,        # with keep_prob < 1 and no drop_mask the kernel draws its dropout seed
    cost=_flash_attention_cost(_FA),
    sharding=SR.flash_attention)


# ---- the fused backward ----------------------------------------------------------------------------
def _fa_grad_infer(dout, dlse, q, k, v, attention_out, softmax_lse, seed, real_shift, drop_mask, attn_mask,
                   **attrs):
    outs = _fa_infer(q, k, v, real_shift, drop_mask, attn_mask, **attrs)
    op = "flash_attention_score_grad"
    for arg, t, want in (("dout", dout, outs[0]), ("attention_out", attention_out, outs[0]),
                         ("dlse", dlse, outs[1]), ("softmax_lse", softmax_lse, outs[1])):
        C.floating(op, arg, t)
        if tuple(t.shape) != want.shape:
            raise C.OpValueError(op, f"'{arg}' of shape {want.shape}", f"shape {tuple(t.shape)}")
    C.tensor(op, "seed", seed)
    grads = (AbstractTensor(q.shape, q.dtype), AbstractTensor(k.shape, k.dtype), AbstractTensor(v.shape, v.dtype))
    if real_shift is not None:
        grads += (AbstractTensor(real_shift.shape, real_shift.dtype),)
    return grads


def _fa_grad_kernel(dout, dlse, q, k, v, attention_out, softmax_lse, seed, real_shift, drop_mask, attn_mask,
                    head_num, keep_prob, scale_value, pre_tokens, next_tokens, inner_precise, input_layout,
                    sparse_mode, prefix, block_q, block_kv):
    call = _FaCall(q, k, v, real_shift, drop_mask, attn_mask, int(seed), head_num, keep_prob, scale_value,
                   pre_tokens, next_tokens, input_layout, sparse_mode, prefix)
    lse = softmax_lse.reshape(call.b, call.n2, call.groups, call.s1).astype(call.cdt, copy=False)
    dl = dlse.reshape(lse.shape).astype(call.cdt, copy=False)
    dq, dk, dv, dpse = K.flash_backward(call.q, call.k, call.v, call.internal(attention_out), call.internal(dout),
                                        lse, dl, call.scale, call.pattern, call.pse, call.dropout, block_q, block_kv)
    grads = (call.external(dq), call.external(dk), call.external(dv))
    if real_shift is not None:
        grads += (dpse.reshape(real_shift.shape),)
    return grads


def _fa_grad_bprop(inputs, out, dout, **attrs):
    """Second order: the VJP of the backward *formula*, derived by hand and written densely in
    minispore ops (`attention_grad_vjp_in_ops`), so it is differentiable once more. It materializes
    the (S1, S2) probabilities, which is acceptable for grad-of-grad (small problems, rarely used);
    the first-order path stays tiled. (Written out rather than taken with autograd.vjp: ops sit
    below autograd, ARCHITECTURE.md section 2.)"""
    dout_, dlse, q, k, v, o, lse, seed, pse, drop_mask, attn_mask = inputs
    call = _FaCall(q.asnumpy(), k.asnumpy(), v.asnumpy(), None if pse is None else pse.asnumpy(),
                   None if drop_mask is None else drop_mask.asnumpy(),
                   None if attn_mask is None else attn_mask.asnumpy(), int(seed.asnumpy()), attrs["head_num"],
                   attrs["keep_prob"], attrs["scale_value"], attrs["pre_tokens"], attrs["next_tokens"],
                   attrs["input_layout"], attrs["sparse_mode"], attrs["prefix"])
    keep = call.pattern.dense()
    dropmul = None if call.dropout is None else call.dropout.dense(call.b, call.cdt)
    geo = (call.b, call.n1, call.n2, call.s1, call.s2, call.d)
    cot = tuple(dout) if isinstance(dout, (tuple, list)) else (dout,)
    g = attention_grad_vjp_in_ops(cot, dout_, dlse, q, k, v, o, lse, pse, geo, attrs["input_layout"],
                                  attrs["scale_value"], keep, dropmul)
    return (g[0], g[1], g[2], g[3], g[4], g[5], g[6], None, g[7] if pse is not None else None, None, None)


_flash_attention_score_grad = defprim(
    "flash_attention_score_grad", _fa_grad_infer, _fa_grad_kernel, _fa_grad_bprop,
    doc="tiled backward of flash_attention_score (recomputes probabilities from softmax_lse): (dq, dk, dv[, dpse])",
    cost=_flash_attention_cost(_FA, backward=True),
    sharding=SR.flash_attention_grad)


def _fa_grad(dout, dlse, q, k, v, out, lse, seed, real_shift, drop_mask, attn_mask, **attrs):
    return _flash_attention_score_grad(dout, dlse, q, k, v, out, lse, seed, real_shift, drop_mask, attn_mask,
                                       **attrs)


def _ops_to_grouped(x, layout, geo, which):
    """Ops version of to_bnsd + grouped: 'q' -> (B, N2, G, S1, D), 'kv' -> (B, N2, 1, S2, D)."""
    from .shape import reshape, transpose
    b, n1, n2, s1, s2, d = geo
    n, s = (n1, s1) if which == "q" else (n2, s2)
    if layout == "BNSD":
        x4 = x
    elif layout == "BSND":
        x4 = transpose(x, (0, 2, 1, 3))
    elif layout == "BSH":
        x4 = transpose(reshape(x, (b, s, n, d)), (0, 2, 1, 3))
    else:
        x4 = transpose(reshape(x, (s, b, n, d)), (1, 2, 0, 3))
    return reshape(x4, (b, n2, n1 // n2, s, d) if which == "q" else (b, n2, 1, s, d))


def _ops_from_grouped(x5, layout, geo, which):
    from .shape import reshape, transpose
    b, n1, n2, s1, s2, d = geo
    n, s = (n1, s1) if which == "q" else (n2, s2)
    x4 = reshape(x5, (b, n, s, d))
    if layout == "BNSD":
        return x4
    if layout == "BSND":
        return transpose(x4, (0, 2, 1, 3))
    if layout == "BSH":
        return reshape(transpose(x4, (0, 2, 1, 3)), (b, s, n * d))
    return reshape(transpose(x4, (2, 0, 1, 3)), (s, b, n * d))


def attention_grad_vjp_in_ops(cot, dout, dlse, q, k, v, out, lse, pse, geo, layout, scale, keep, dropmul):
    """The VJP of the FlashAttention backward formula, written densely in minispore ops.

    The backward formula (per head group; M the dropout multiplier, 0 off the visible entries):

        S = scale Q K^T + pse     P = exp(S - L) on visible entries     D = rowsum(dO * O) - dL
        dP = (dO V^T) * M     dS = P * (dP - D)
        dQ = scale dS K     dK = scale dS^T Q     dV = (P * M)^T dO     dpse = dS

    Given the cotangents gQ, gK, gV[, gpse] of (dQ, dK, dV[, dpse]) (`cot`), the chain rule run
    backwards through those lines gives the gradients of the formula's inputs
    (dO, dL, Q, K, V, O, L[, pse]):

        gdS = scale (gQ K^T + Q gK^T) + gpse        gP = (dO gV^T) * M + gdS * (dP - D)
        gdP = gdS * P     gD = -rowsum(gdP)         gS = gP * P       gL = -rowsum(gS)
        gdO = (P * M) gV + (gdP * M) V + gD * O     gO = gD * dO      gdL = -gD
        gQ' = scale (dS gK + gS K)    gK' = scale (dS^T gQ + gS^T Q)    gV' = (gdP * M)^T dO
        gpse' = gS

    Keys and values are shared by the G query heads of a group, so their gradients sum over G.
    `keep` / `dropmul` are dense NumPy constants; everything else is a minispore op, so the result
    is differentiable again. The grouped-attention fixture in tests/ops/test_fused_flash_attention.py
    checks it against PyTorch's double backward, the opdb entry against finite differences."""
    from .elementwise import add, exp, mul, neg, sub, sum_to, where
    from .linalg import matmul
    from .reduction import reduce_sum
    from .shape import reshape, transpose
    b, n1, n2, s1, s2, d = geo
    dt = q.dtype

    def t(x):
        return transpose(x, (0, 1, 2, 4, 3))

    qg = _ops_to_grouped(q, layout, geo, "q")
    kg = _ops_to_grouped(k, layout, geo, "kv")
    vg = _ops_to_grouped(v, layout, geo, "kv")
    og = _ops_to_grouped(out, layout, geo, "q")
    dog = _ops_to_grouped(dout, layout, geo, "q")
    L = reshape(lse, (b, n2, n1 // n2, s1, 1))
    dL = reshape(dlse, (b, n2, n1 // n2, s1, 1))
    keep_t = Tensor(np.broadcast_to(keep, (b, n2, n1 // n2, s1, s2)).copy())
    m = None if dropmul is None else Tensor(dropmul.astype(dt.np))
    zero = Tensor(np.zeros((), dt.np))

    # the forward formula's intermediates, recomputed
    s = mul(matmul(qg, t(kg)), scale)
    if pse is not None:
        s = add(s, reshape(pse, _pse5_shape(pse.shape, n2)))
    # exp of visible entries only; L = -inf (an empty row) has no visible entry
    p = where(keep_t, exp(sub(where(keep_t, s, zero), where(keep_t, L, zero))), zero)
    dp = matmul(dog, t(vg))
    pm = p
    if m is not None:
        dp = mul(dp, m)
        pm = mul(p, m)
    delta = sub(reduce_sum(mul(dog, og), -1, True), dL)
    ds = mul(p, sub(dp, delta))

    # the cotangents of (dQ, dK, dV[, dpse]), grouped like the formula's values
    gq = _ops_to_grouped(cot[0], layout, geo, "q")
    gk = _ops_to_grouped(cot[1], layout, geo, "kv")
    gv = _ops_to_grouped(cot[2], layout, geo, "kv")
    # dQ = scale dS K, dK = scale dS^T Q, dpse = dS
    g_ds = mul(add(matmul(gq, t(kg)), matmul(qg, t(gk))), scale)
    if pse is not None:
        g_ds = add(g_ds, reshape(cot[3], _pse5_shape(pse.shape, n2)))
    g_q = mul(matmul(ds, gk), scale)
    g_k = mul(reduce_sum(matmul(t(ds), gq), 2, True), scale)
    # dV = (P M)^T dO
    g_p = matmul(dog, t(gv))
    if m is not None:
        g_p = mul(g_p, m)
    g_do = matmul(pm, gv)
    # dS = P (dP - D)
    g_p = add(g_p, mul(g_ds, sub(dp, delta)))
    g_dp = mul(g_ds, p)
    g_delta = neg(reduce_sum(g_dp, -1, True))
    # D = rowsum(dO O) - dL
    g_do = add(g_do, mul(g_delta, og))
    g_o = mul(g_delta, dog)
    g_dl = neg(g_delta)
    # dP = (dO V^T) M
    g_dpv = g_dp if m is None else mul(g_dp, m)
    g_do = add(g_do, matmul(g_dpv, vg))
    g_v = reduce_sum(matmul(t(g_dpv), dog), 2, True)
    # P = exp(S - L) on visible entries (P is 0 elsewhere, so gS is too)
    g_s = mul(g_p, p)
    g_l = neg(reduce_sum(g_s, -1, True))
    # S = scale Q K^T + pse
    g_q = add(g_q, mul(matmul(g_s, kg), scale))
    g_k = add(g_k, mul(reduce_sum(matmul(t(g_s), qg), 2, True), scale))

    grads = (_ops_from_grouped(g_do, layout, geo, "q"), reshape(g_dl, dlse.shape),
             _ops_from_grouped(g_q, layout, geo, "q"), _ops_from_grouped(g_k, layout, geo, "kv"),
             _ops_from_grouped(g_v, layout, geo, "kv"), _ops_from_grouped(g_o, layout, geo, "q"),
             reshape(g_l, lse.shape))
    if pse is not None:
        grads += (reshape(sum_to(g_s, _pse5_shape(pse.shape, n2)), pse.shape),)
    return grads


def _pse5_shape(shape, n2):
    b, n, s1, s2 = shape
    return (b, 1, 1, s1, s2) if n == 1 else (b, n2, n // n2, s1, s2)


def _int_tuple(op, arg, v):
    """A list/tuple/1-d Tensor of ints as a tuple (None stays None)."""
    if v is None:
        return None
    if isinstance(v, Tensor):
        if v.dtype.kind not in ("int", "uint") or len(v.shape) != 1:
            raise C.OpTypeError(op, f"'{arg}' as a 1-d integer Tensor or a list of ints",
                                f"Tensor(shape={v.shape}, dtype={v.dtype})")
        return tuple(int(x) for x in v.asnumpy())
    if isinstance(v, (list, tuple)) and all(isinstance(x, numbers.Integral) and not isinstance(x, bool) for x in v):
        return tuple(int(x) for x in v)
    raise C.OpTypeError(op, f"'{arg}' as a list/tuple of ints or a 1-d integer Tensor", repr(v)[:80])


def flash_attention_score(query, key, value, head_num, real_shift=None, drop_mask=None, padding_mask=None,
                          attn_mask=None, prefix=None, actual_seq_qlen=None, actual_seq_kvlen=None, keep_prob=1.0,
                          scalar_value=1.0, pre_tokens=2147483647, next_tokens=2147483647, inner_precise=0,
                          input_layout='BSH', sparse_mode=0, *, block_q=DEFAULT_BLOCK_Q, block_kv=DEFAULT_BLOCK_KV):
    """`ops.flash_attention_score(...)`: attention for training, computed the FlashAttention way.

    out = Dropout(Softmax(Mask(scalar_value * query @ key^T + real_shift, attn_mask)), keep_prob) @ value

    * query (B, S1, N1*D) in "BSH" (or "BNSD", "BSND", "SBH"); key/value with N2 heads (N2 | N1: GQA).
    * real_shift: additive bias (B or 1, N1 or 1, S1, S2) (MindSpore's "pse"); differentiable.
    * attn_mask / sparse_mode / pre_tokens / next_tokens / prefix: see the module docstring (1 = discard).
    * keep_prob < 1: dropout on the probabilities. Without `drop_mask` the mask comes from a seed drawn
      from the global generator (`ms.set_seed`), regenerated tile by tile in the backward (never
      stored); `drop_mask` gives it explicitly (uint8 (B, N1, S1, S2 // 8), bit-packed, 1 = keep).
    * padding_mask is reserved in MindSpore (must be None); actual_seq_qlen/kvlen belong to the
      unsupported "TND" layout (must be None).
    * block_q / block_kv (minispore extension): the tile sizes of the kernel. Memory beyond inputs and
      outputs is O(block_q * block_kv * heads + S * D): the S1 x S2 matrix never exists.

    Returns attention_out, same shape and dtype as query. Differentiable in query, key, value and
    real_shift (the backward recomputes probabilities from the saved log-sum-exp).
    """
    if padding_mask is not None:
        raise C.OpValueError(_FA, "'padding_mask' None (reserved in MindSpore)", "a padding_mask")
    if actual_seq_qlen is not None or actual_seq_kvlen is not None:
        raise C.OpValueError(_FA, "'actual_seq_qlen'/'actual_seq_kvlen' None (they belong to the 'TND' layout, "
                                  "which minispore does not support)", "sequence lengths")
    prefix = _int_tuple(_FA, "prefix", prefix)
    return _flash_attention_score(query, key, value, real_shift, drop_mask, attn_mask, head_num=head_num,
                                  keep_prob=keep_prob, scale_value=scalar_value, pre_tokens=pre_tokens,
                                  next_tokens=next_tokens, inner_precise=inner_precise, input_layout=input_layout,
                                  sparse_mode=sparse_mode, prefix=prefix, block_q=block_q, block_kv=block_kv)[0]


# =================================================================================================
# prompt_flash_attention (prefill; inference only)
_PFA = "prompt_flash_attention"


def _lengths_check(op, arg, t, b):
    if t is None:
        return
    C.tensor(op, arg, t)
    if t.dtype.kind not in ("int", "uint") or tuple(t.shape) != (b,):
        raise C.OpValueError(op, f"'{arg}' as {b} integer lengths (one per batch)",
                             f"Tensor(shape={tuple(t.shape)}, dtype={t.dtype})")


def _lengths_values(op, arg, arr, limit):
    if arr is None:
        return None
    a = np.asarray(arr, dtype=np.int64)
    if np.any(a < 0) or np.any(a > limit):
        raise C.OpValueError(op, f"'{arg}' in [0, {limit}]", f"{a.tolist()}")
    return a


def _quant_args_none(op, **kw):
    for name, val in kw.items():
        if val is not None:
            raise C.OpValueError(op, f"'{name}' None (quantized attention inputs/outputs are not supported by "
                                     "minispore)", f"a {type(val).__name__}")


def _pfa_infer(q, k, v, attn_mask, actual_seq_lengths, actual_seq_lengths_kv, pse_shift, num_heads, scale_value,
               pre_tokens, next_tokens, input_layout, num_key_value_heads, sparse_mode, inner_precise):
    op = _PFA
    _int(op, "num_heads", num_heads, 1)
    _float(op, "scale_value", scale_value)
    _int(op, "pre_tokens", pre_tokens)
    _int(op, "next_tokens", next_tokens)
    _int(op, "num_key_value_heads", num_key_value_heads, 0)
    if _int(op, "inner_precise", inner_precise) not in (0, 1, 2, 3):
        raise C.OpValueError(op, "'inner_precise' in (0, 1, 2, 3)", repr(inner_precise))
    _layout(op, input_layout)
    mode = _sparse_mode(op, sparse_mode, (0, 1, 2, 3, 4))
    b, n1, n2, s1, s2, d = _qkv_geometry(op, q, k, v, num_heads, input_layout, num_key_value_heads)
    _mask_for_mode(op, attn_mask, mode, b, n1, s1, s2)
    _bias_check(op, "pse_shift", pse_shift, q, b, n1, s1, s2)
    _lengths_check(op, "actual_seq_lengths", actual_seq_lengths, b)
    _lengths_check(op, "actual_seq_lengths_kv", actual_seq_lengths_kv, b)
    return AbstractTensor(q.shape, q.dtype)


def _pfa_kernel(q, k, v, attn_mask, actual_seq_lengths, actual_seq_lengths_kv, pse_shift, num_heads, scale_value,
                pre_tokens, next_tokens, input_layout, num_key_value_heads, sparse_mode, inner_precise):
    cdt = compute_dtype(q.dtype)
    d = q.shape[-1] if input_layout in ("BNSD", "BSND") else q.shape[-1] // num_heads
    qb, kb, vb = (to_bnsd(x, input_layout, d) for x in (q, k, v))
    b, n1, s1, _ = qb.shape
    n2, s2 = kb.shape[1], kb.shape[2]
    q_len = _lengths_values(_PFA, "actual_seq_lengths", actual_seq_lengths, s1)
    kv_len = _lengths_values(_PFA, "actual_seq_lengths_kv", actual_seq_lengths_kv, s2)
    pattern = make_pattern(sparse_mode, pre_tokens, next_tokens, b, n2, s1, s2, attn_mask,
                           q_len=q_len, kv_len=kv_len)
    pse = None if pse_shift is None else _heads_view(pse_shift.astype(cdt, copy=False), n2)
    out, _ = K.flash_forward(grouped(qb, n2).astype(cdt, copy=False), kb.astype(cdt, copy=False),
                             vb.astype(cdt, copy=False), scale_value, pattern, pse, None,
                             DEFAULT_BLOCK_Q, INFER_BLOCK_KV)
    return from_bnsd(out.reshape(b, n1, s1, -1), input_layout)


_prompt_flash_attention = defprim(_PFA, _pfa_infer, _pfa_kernel, None,
                                  doc="prefill attention (inference): tiled, online softmax",
                                  cost=_flash_attention_cost(_PFA, heads_attr="num_heads",
                                                             kv_heads_attr="num_key_value_heads"))


def _lengths_tensor(op, arg, v):
    """Per-batch lengths given as a list/tuple or Tensor -> an int64 Tensor (or None)."""
    if v is None or isinstance(v, Tensor):
        return v
    lengths = _int_tuple(op, arg, v)
    if not all(-2**63 <= n < 2**63 for n in lengths):
        raise C.OpValueError(op, f"'{arg}' within the Int64 range", repr(v)[:80])
    return Tensor(np.asarray(lengths, dtype=np.int64))


def prompt_flash_attention(query, key, value, attn_mask=None, actual_seq_lengths=None, actual_seq_lengths_kv=None,
                           pse_shift=None, deq_scale1=None, quant_scale1=None, deq_scale2=None, quant_scale2=None,
                           quant_offset2=None, num_heads=1, scale_value=1.0, pre_tokens=2147483647, next_tokens=0,
                           input_layout='BSH', num_key_value_heads=0, sparse_mode=0, inner_precise=1):
    """`ops.prompt_flash_attention(...)`: full (prefill) attention for inference; forward only.

    Same layouts, mask convention (1 = discard) and sparse modes 0-4 as `flash_attention_score`.
    Note MindSpore's defaults: next_tokens=0 makes mode 0 causal *only when attn_mask is given*
    (without a mask, mode 0 ignores pre/next_tokens); for a causal prefill without a mask use
    sparse_mode=2 (left-up) or 3 (right-down, for queries that continue a cached prefix).

    * actual_seq_lengths / actual_seq_lengths_kv: valid query / key lengths per batch (padding
      beyond them is ignored; padded query rows output 0); right-down modes align each batch's
      last valid query with its last valid key.
    * num_key_value_heads: 0 means num_heads; else the key/value head count (GQA).
    * pse_shift: additive bias (B or 1, N or 1, S1, S2).
    * the quantization arguments (deq_scale1 ... quant_offset2) must be None.
    """
    _quant_args_none(_PFA, deq_scale1=deq_scale1, quant_scale1=quant_scale1, deq_scale2=deq_scale2,
                     quant_scale2=quant_scale2, quant_offset2=quant_offset2)
    ql = _lengths_tensor(_PFA, "actual_seq_lengths", actual_seq_lengths)
    kl = _lengths_tensor(_PFA, "actual_seq_lengths_kv", actual_seq_lengths_kv)
    return _prompt_flash_attention(query, key, value, attn_mask, ql, kl, pse_shift, num_heads=num_heads,
                                   scale_value=scale_value, pre_tokens=pre_tokens, next_tokens=next_tokens,
                                   input_layout=input_layout, num_key_value_heads=num_key_value_heads,
                                   sparse_mode=sparse_mode, inner_precise=inner_precise)


# =================================================================================================
# incre_flash_attention (decode; inference only)
_IFA = "incre_flash_attention"


def _ifa_infer(q, k, v, attn_mask, actual_seq_lengths, pse_shift, antiquant_scale, antiquant_offset, block_table,
               num_heads, input_layout, scale_value, num_key_value_heads, block_size, inner_precise, num_kv_splits):
    op = _IFA
    _int(op, "num_heads", num_heads, 1)
    _float(op, "scale_value", scale_value)
    kvh = _int(op, "num_key_value_heads", num_key_value_heads, 0)
    bs = _int(op, "block_size", block_size, 0)
    if _int(op, "inner_precise", inner_precise) not in (0, 1):
        raise C.OpValueError(op, "'inner_precise' in (0, 1)", repr(inner_precise))
    if num_kv_splits is not None:
        _int(op, "num_kv_splits", num_kv_splits, 1)
    C.one_of(op, "input_layout", input_layout, ("BSH", "BNSD"), "'input_layout' in ('BSH', 'BNSD')")
    C.floating(op, "query", q)
    b, n1, s1, d = _layout_dims(op, "query", q, input_layout, heads=num_heads)
    if s1 != 1:
        raise C.OpValueError(op, "a query with sequence length 1 (one new token per sequence)",
                             f"shape {tuple(q.shape)}")
    _lengths_check(op, "actual_seq_lengths", actual_seq_lengths, b)
    if antiquant_scale is None and antiquant_offset is not None:
        raise C.OpValueError(op, "'antiquant_scale' with 'antiquant_offset'", "an offset without a scale")
    if block_table is None:
        if bs:
            raise C.OpValueError(op, "'block_size' 0 without a block_table", repr(block_size))
        if antiquant_scale is not None:
            raise C.OpValueError(op, "'antiquant_scale' only with a paged int8 cache (block_table)", "a scale")
        _, _, n2, _, s2, _ = _qkv_geometry(op, q, k, v, num_heads, input_layout, kvh)
        if attn_mask is not None:
            _mask_dtype(op, "attn_mask", attn_mask)
            sh = tuple(attn_mask.shape)
            if sh not in ((b, s2), (b, 1, s2), (b, 1, 1, s2)):
                raise C.OpValueError(op, f"'attn_mask' of shape ({b}, {s2}), ({b}, 1, {s2}) or ({b}, 1, 1, {s2})",
                                     f"shape {sh}")
        _bias_check(op, "pse_shift", pse_shift, q, b, n1, 1, s2)
        return AbstractTensor(q.shape, q.dtype)
    # paged cache
    if attn_mask is not None or pse_shift is not None:
        raise C.OpValueError(op, "'attn_mask' and 'pse_shift' None with a paged cache (block_table)",
                             "a mask or bias")
    if actual_seq_lengths is None:
        raise C.OpValueError(op, "'actual_seq_lengths' (context lengths) with a block_table", "None")
    C.tensor(op, "block_table", block_table)
    if block_table.dtype.kind not in ("int", "uint") or len(block_table.shape) != 2 or block_table.shape[0] != b:
        raise C.OpValueError(op, f"an integer 'block_table' of shape ({b}, max_blocks_per_seq)",
                             f"Tensor(shape={tuple(block_table.shape)}, dtype={block_table.dtype})")
    n2 = _paged_cache_check(op, q, k, v, n1, d, kvh, bs, antiquant_scale, antiquant_offset)
    if n1 % n2:
        raise C.OpValueError(op, f"a key/value head number dividing {n1}", f"{n2}")
    return AbstractTensor(q.shape, q.dtype)


def _paged_cache_check(op, q, k, v, n1, d, kv_heads, block_size, antiquant_scale, antiquant_offset,
                       names=("key", "value")):
    """Caches (num_blocks, block_size, N2*D) or (num_blocks, block_size, N2, D); returns N2."""
    for arg, t in zip(names, (k, v)):
        C.tensor(op, arg, t)
    if tuple(k.shape) != tuple(v.shape) or k.dtype is not v.dtype:
        raise C.OpValueError(op, f"'{names[1]}' of the shape and dtype of '{names[0]}'",
                             f"{tuple(v.shape)} {v.dtype} and {tuple(k.shape)} {k.dtype}")
    sh = tuple(k.shape)
    if len(sh) == 3 and d and sh[2] % d == 0:
        n2 = sh[2] // d
    elif len(sh) == 4 and sh[3] == d:
        n2 = sh[2]
    else:
        raise C.OpValueError(op, f"'{names[0]}' cache of shape (num_blocks, block_size, N2*{d}) or "
                                 f"(num_blocks, block_size, N2, {d})", f"shape {sh}")
    if n2 == 0 or (kv_heads and n2 != kv_heads):
        raise C.OpValueError(op, f"a cache with {kv_heads or 'a positive number of'} key/value heads", f"shape {sh}")
    if block_size and sh[1] != block_size:
        raise C.OpValueError(op, f"caches with block_size={block_size} slots per block", f"shape {sh}")
    if k.dtype is mstype.int8:
        if antiquant_scale is None:
            raise C.OpValueError(op, "'antiquant_scale' for an int8 cache", "None")
        for arg, t in (("antiquant_scale", antiquant_scale), ("antiquant_offset", antiquant_offset)):
            if t is None:
                continue
            C.floating(op, arg, t)
            if tuple(t.shape) != (2, n2 * d):
                raise C.OpValueError(op, f"'{arg}' of shape (2, {n2 * d}) (row 0 keys, row 1 values)",
                                     f"shape {tuple(t.shape)}")
    elif k.dtype is not q.dtype:
        raise C.OpTypeError(op, f"a cache of the query's dtype ({q.dtype}) or int8", str(k.dtype))
    elif antiquant_scale is not None:
        raise C.OpValueError(op, "'antiquant_scale' only with an int8 cache", f"a {k.dtype} cache")
    return n2


def antiquant_fns(antiquant_scale, antiquant_offset, n2, d, cdt):
    """Dequantizers for gathered int8 cache blocks: x = (x_int8 + offset) * scale, per channel."""
    if antiquant_scale is None:
        return None, None
    sc = antiquant_scale.astype(cdt).reshape(2, n2, d)
    off = (np.zeros_like(sc) if antiquant_offset is None else antiquant_offset.astype(cdt).reshape(2, n2, d))

    def make(row):
        def deq(blocks):                          # (..., N2, D) int8 -> float
            return (blocks.astype(cdt) + off[row]) * sc[row]
        return deq
    return make(0), make(1)


def _ifa_kernel(q, k, v, attn_mask, actual_seq_lengths, pse_shift, antiquant_scale, antiquant_offset, block_table,
                num_heads, input_layout, scale_value, num_key_value_heads, block_size, inner_precise, num_kv_splits):
    cdt = compute_dtype(q.dtype)
    d = q.shape[-1] if input_layout == "BNSD" else q.shape[-1] // num_heads
    qb = to_bnsd(q, input_layout, d)                       # (B, N1, 1, D)
    b, n1 = qb.shape[:2]
    if block_table is not None:                            # paged cache: walk the block table
        kc = k.reshape(k.shape[0], k.shape[1], -1, d)
        vc = v.reshape(kc.shape)
        n2 = kc.shape[2]
        ctx = np.asarray(actual_seq_lengths, np.int64)
        K.check_block_tables(_IFA, block_table, ctx, kc.shape[0], kc.shape[1])
        dk, dv = antiquant_fns(antiquant_scale, antiquant_offset, n2, d, cdt)
        out, _ = K.paged_forward(grouped(qb, n2).astype(cdt, copy=False), (ctx - 1)[:, None], kc, vc,
                                 block_table, ctx, scale_value, dk, dv)
        return from_bnsd(out.reshape(b, n1, 1, d), input_layout)
    kb, vb = to_bnsd(k, input_layout, d), to_bnsd(v, input_layout, d)
    n2, s2 = kb.shape[1], kb.shape[2]
    kv_len = _lengths_values(_IFA, "actual_seq_lengths", actual_seq_lengths, s2)
    mask = None if attn_mask is None else attn_mask.reshape(b, 1, 1, s2)
    pattern = make_pattern(0, K.UNBOUNDED, K.UNBOUNDED, b, n2, 1, s2, mask, kv_len=kv_len)
    pse = None if pse_shift is None else _heads_view(pse_shift.astype(cdt, copy=False), n2)
    splits = num_kv_splits if num_kv_splits is not None else max(1, -(-s2 // INFER_BLOCK_KV))
    out, _ = K.split_kv_forward(grouped(qb, n2).astype(cdt, copy=False), kb.astype(cdt, copy=False),
                                vb.astype(cdt, copy=False), scale_value, pattern, splits, pse, INFER_BLOCK_KV)
    return from_bnsd(out.reshape(b, n1, 1, d), input_layout)


_incre_flash_attention = defprim(_IFA, _ifa_infer, _ifa_kernel, None,
                                 doc="decode attention (inference): Flash-Decoding split-KV, or a paged cache",
                                 cost=costs.matrix_unit(costs.ELEMENTWISE))


def incre_flash_attention(query, key, value, attn_mask=None, actual_seq_lengths=None, pse_shift=None,
                          dequant_scale1=None, quant_scale1=None, dequant_scale2=None, quant_scale2=None,
                          quant_offset2=None, antiquant_scale=None, antiquant_offset=None, block_table=None,
                          num_heads=1, input_layout='BSH', scale_value=1.0, num_key_value_heads=0, block_size=0,
                          inner_precise=1, kv_padding_size=None, *, num_kv_splits=None):
    """`ops.incre_flash_attention(...)`: attention of one new token per sequence (decode); forward only.

    * query (B, 1, N*D) "BSH" or (B, N, 1, D) "BNSD".
    * contiguous cache: key/value (B, S2, N2*D) / (B, N2, S2, D) (a Tensor, or a list/tuple holding one,
      as MindSpore's tensor lists); `actual_seq_lengths` (B,) valid key lengths; `attn_mask` (B, S2),
      (B, 1, S2) or (B, 1, 1, S2) with 1 = discard; `pse_shift` (B or 1, N or 1, 1, S2).
      Computed with Flash-Decoding: the keys are split into `num_kv_splits` chunks (minispore
      extension; default one per 512 keys), each chunk attended independently, and the partial
      outputs combined with weights exp(lse_chunk - lse_total).
    * paged cache: `block_table` (B, max_blocks) int, key/value the caches (num_blocks, block_size,
      N2*D) (or (..., N2, D)), `block_size` their slots per block (0: read it from the caches) and
      `actual_seq_lengths` the context lengths.
      int8 caches are dequantized per gathered block: (x + antiquant_offset) * antiquant_scale, both of
      shape (2, N2*D) (row 0 keys, row 1 values).
    * num_key_value_heads: 0 means num_heads (else GQA). Quantized outputs (dequant_scale1 ...
      quant_offset2) and kv_padding_size are not supported (must be None).
    """
    _quant_args_none(_IFA, dequant_scale1=dequant_scale1, quant_scale1=quant_scale1, dequant_scale2=dequant_scale2,
                     quant_scale2=quant_scale2, quant_offset2=quant_offset2, kv_padding_size=kv_padding_size)
    key, value = _single(_IFA, "key", key), _single(_IFA, "value", value)
    lens = _lengths_tensor(_IFA, "actual_seq_lengths", actual_seq_lengths)
    return _incre_flash_attention(query, key, value, attn_mask, lens, pse_shift, antiquant_scale, antiquant_offset,
                                  block_table, num_heads=num_heads, input_layout=input_layout,
                                  scale_value=scale_value, num_key_value_heads=num_key_value_heads,
                                  block_size=block_size, inner_precise=inner_precise, num_kv_splits=num_kv_splits)


def _single(op, arg, x):
    """MindSpore passes IFA's key/value as tensor lists; minispore takes a Tensor or a 1-element list."""
    if isinstance(x, (list, tuple)):
        if len(x) != 1:
            raise C.OpValueError(op, f"'{arg}' as a Tensor or a list holding one Tensor", f"a list of {len(x)}")
        return x[0]
    return x
