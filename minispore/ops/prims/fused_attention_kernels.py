"""The NumPy kernels behind the fused attention ops: FlashAttention (tiled forward with online
softmax, tiled backward that recomputes probabilities), Flash-Decoding (split-KV partials combined
by their log-sum-exp) and PagedAttention (the same online softmax walking a block table).

Nothing here knows about Tensors or primitives: arrays in, arrays out. The op modules
(`fused_attention`, `fused_paged`) validate inputs and call these.

**Layout.** Every kernel works on queries shaped `(B, N2, G, S1, D)` and keys/values shaped
`(B, N2, S2, D)`: N2 key/value heads, each shared by G = N1 / N2 query heads (grouped-query
attention; G = 1 is ordinary multi-head attention). Query head h uses key/value head h // G, which
is HuggingFace's `repeat_kv`, but without ever copying the keys G times: NumPy's matmul broadcasts
the key tile over the G axis.

**Never N x N.** The score matrix S = scale * Q K^T (+ bias) is only ever formed one tile at a time,
(Br x Bc) per head. What survives between tiles is O(N): the running row maximum m, the running
row sum l and the unnormalized output accumulator. The backward saves only the per-row
log-sum-exp L = m + log(l) and recomputes each tile's probabilities as P = exp(S - L).

**Masks are structure, not data.** Causal and band masks are a few integers (`AttentionPattern`):
for each tile we decide from arithmetic alone whether it is entirely visible (no mask work at all),
entirely hidden (skipped: no matmul, which is how causal attention does half the work) or
partially visible (a Br x Bc boolean tile is built). Only a user-given dense `attn_mask` is read.

**Dropout without a stored mask.** The dropout decision for score (b, h, i, j) is a pure function of
(seed, b, h, i, j): a counter-based generator (the splitmix64 finalizer over the element's flat
index), the NumPy analogue of the Philox generator real FlashAttention kernels use. The forward and
the backward regenerate exactly the same bits tile by tile, and the tiling does not change them.

Rows with no visible key at all (everything masked) attend to nothing: their output is 0 and their
log-sum-exp is -inf (softmax of an empty set), and they receive no gradient.
"""
from __future__ import annotations

import numpy as np

from ...common.errors import OpIndexError, OpValueError
from . import _native_attention

UNBOUNDED = 2147483647                      # MindSpore's "no limit" for pre_tokens / next_tokens
_NEG_INF = -np.inf
SKIP = object()                             # AttentionPattern.tile: nothing in this tile is visible


# =================================================================================================
# Which (query, key) pairs may attend
class AttentionPattern:
    """The visibility of score (b, i, j): band, prefix, valid lengths, and an optional dense mask.

    A key j is visible from query i of batch b when all of these hold:

    * band:   -pre <= (j - i - shift[b]) <= nxt     (pre/nxt None = unbounded on that side).
              shift = 0 puts the band's origin at the top-left corner, shift = S2 - S1 at the
              bottom-right (a query row of a cached prefix of length S2 - S1 sits at i + shift);
    * or prefix: j < prefix[b]                      (prefix-LM: the first prefix[b] keys are always visible);
    * i < q_len[b] and j < kv_len[b]                (valid lengths of padded batches);
    * not mask[b, h, i, j]                          (dense user mask; True / 1 means *discard*).

    Per-batch values are (B,) int64 arrays (or None); `mask` is an array broadcastable to
    (B, N2, G, S1, S2) (a view of the user's mask, never copied).
    """

    def __init__(self, batch, s1, s2, pre=None, nxt=None, shift=0, q_len=None, kv_len=None,
                 prefix=None, mask=None):
        self.batch, self.s1, self.s2 = batch, s1, s2
        self.pre = None if pre is None or pre >= UNBOUNDED else int(pre)
        self.nxt = None if nxt is None or nxt >= UNBOUNDED else int(nxt)
        self.shift = np.broadcast_to(np.asarray(shift, dtype=np.int64), (batch,))
        self.q_len = None if q_len is None else np.asarray(q_len, dtype=np.int64)
        self.kv_len = None if kv_len is None else np.asarray(kv_len, dtype=np.int64)
        self.prefix = None if prefix is None else np.asarray(prefix, dtype=np.int64)
        self.mask = mask
        # whether any structural term differs between batches (else tiles are computed once, (Br, Bc))
        self._per_batch = (self.q_len is not None or self.kv_len is not None or self.prefix is not None
                           or (batch > 1 and np.any(self.shift != self.shift[0])))
        self._trivial = (self.pre is None and self.nxt is None and self.prefix is None
                         and self.q_len is None and self.kv_len is None)

    def _classify(self, r0, r1, c0, c1):
        """(all visible, none visible) for the structural part of tile rows [r0, r1) x cols [c0, c1),
        from interval arithmetic on the tile's corners (per batch, then over batches)."""
        if self._trivial:
            return True, False
        if not self._per_batch:                  # the common case: plain Python integers, no arrays
            sh = int(self.shift[0]) if self.batch else 0
            lo_rel, hi_rel = c0 - (r1 - 1) - sh, (c1 - 1) - r0 - sh
            all_in = ((self.pre is None or lo_rel >= -self.pre) and (self.nxt is None or hi_rel <= self.nxt))
            none_in = ((self.pre is not None and hi_rel < -self.pre) or (self.nxt is not None and lo_rel > self.nxt))
            return all_in, none_in
        sh = self.shift
        lo_rel = c0 - (r1 - 1) - sh            # smallest j - i - shift in the tile
        hi_rel = (c1 - 1) - r0 - sh            # largest
        all_in = np.ones(self.batch, bool)
        none_in = np.zeros(self.batch, bool)
        if self.pre is not None:
            all_in &= lo_rel >= -self.pre
            none_in |= hi_rel < -self.pre
        if self.nxt is not None:
            all_in &= hi_rel <= self.nxt
            none_in |= lo_rel > self.nxt
        if self.prefix is not None:
            all_in |= c1 <= self.prefix
            none_in &= c0 >= self.prefix
        if self.kv_len is not None:
            all_in &= c1 <= self.kv_len
            none_in |= c0 >= self.kv_len
        if self.q_len is not None:
            all_in &= r1 <= self.q_len
            none_in |= r0 >= self.q_len
        return bool(all_in.all()), bool(none_in.all())

    def _structural(self, r0, r1, c0, c1):
        """The structural visibility of a tile as a bool array (B or 1, 1, 1, Br, Bc)."""
        i = np.arange(r0, r1, dtype=np.int64)[:, None]
        j = np.arange(c0, c1, dtype=np.int64)[None, :]
        if self._per_batch:
            sh = self.shift[:, None, None]
            i, j = i[None], j[None]
        else:
            sh = self.shift[0]
        rel = j - i - sh
        keep = np.ones(rel.shape, bool)
        if self.pre is not None:
            keep &= rel >= -self.pre
        if self.nxt is not None:
            keep &= rel <= self.nxt
        if self.prefix is not None:
            keep |= j < self.prefix[:, None, None]
        if self.kv_len is not None:
            keep &= j < self.kv_len[:, None, None]
        if self.q_len is not None:
            keep &= i < self.q_len[:, None, None]
        if keep.ndim == 2:
            return keep
        return keep[:, None, None]

    def tile(self, r0, r1, c0, c1):
        """SKIP if nothing in the tile is visible, None if everything is, else a bool keep array
        broadcastable to (B, N2, G, Br, Bc)."""
        all_in, none_in = self._classify(r0, r1, c0, c1)
        if none_in:
            return SKIP
        keep = None if all_in else self._structural(r0, r1, c0, c1)
        if self.mask is not None:
            visible = ~self.mask[..., r0:r1, c0:c1].astype(bool, copy=False)
            keep = visible if keep is None else keep & visible
        return keep

    def batches(self, b0, b1):
        """The pattern of batches [b0, b1) (per-batch values and a per-batch mask sliced)."""
        cut = lambda a: None if a is None else a[b0:b1]                      # noqa: E731
        mask = self.mask
        if mask is not None and mask.ndim == 5 and mask.shape[0] > 1:
            mask = mask[b0:b1]
        return AttentionPattern(b1 - b0, self.s1, self.s2, self.pre, self.nxt, self.shift[b0:b1], cut(self.q_len),
                                cut(self.kv_len), cut(self.prefix), mask)

    def dense(self):
        """The whole (B, N2 or 1, G or 1, S1, S2) keep matrix (used only by references and the
        second-order backward, never by the tiled kernels)."""
        keep = self._structural(0, self.s1, 0, self.s2)
        if self.mask is not None:
            keep = keep & ~self.mask.astype(bool)
        return keep


# =================================================================================================
# Counter-based dropout
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


def _splitmix64(counters, seed):
    """splitmix64(seed + (counter + 1) * golden): 64 well-mixed bits per counter (array in, array out)."""
    x = (counters + np.uint64(1)) * _GOLDEN
    x += np.uint64(seed)
    x ^= x >> np.uint64(30)
    x *= _MIX1
    x ^= x >> np.uint64(27)
    x *= _MIX2
    x ^= x >> np.uint64(31)
    return x


class Dropout:
    """The dropout multiplier (keep / keep_prob, or 0) of any score tile, regenerated on demand.

    Either from a seed (counter-based bits of element (b, h, i, j), see the module docstring) or
    from MindSpore's bit-packed `drop_mask` (uint8 (B, N1, S1, S2 // 8); bit j % 8 of byte j // 8,
    least significant first, is 1 where score j is kept).
    """

    def __init__(self, keep_prob, n1, s1, s2, groups, seed=0, packed_mask=None):
        self.keep_prob = float(keep_prob)
        self.scale = 1.0 / self.keep_prob
        self.n1, self.s1, self.s2, self.groups = n1, s1, s2, groups
        self.seed = int(seed) & 0xFFFFFFFFFFFFFFFF
        self.packed = packed_mask                       # (B, N2, G, S1, S2 // 8) view or None
        self._threshold = np.uint64(min(int(self.keep_prob * 2.0 ** 53), 2 ** 53))
        self._bh = None

    def _keep_bits(self, batch, r0, r1, c0, c1):
        if self.packed is not None:
            raw = self.packed[..., r0:r1, c0 // 8:(c1 + 7) // 8]
            bits = np.unpackbits(raw, axis=-1, bitorder="little")
            return bits[..., c0 % 8:c0 % 8 + (c1 - c0)].astype(bool)
        if self._bh is None or self._bh.shape[0] != batch:
            n2 = self.n1 // self.groups
            bh = np.arange(batch * self.n1, dtype=np.uint64).reshape(batch, n2, self.groups, 1, 1)
            self._bh = bh * np.uint64(self.s1) * np.uint64(self.s2)
        i = np.arange(r0, r1, dtype=np.uint64)[:, None] * np.uint64(self.s2)
        j = np.arange(c0, c1, dtype=np.uint64)[None, :]
        bits = _splitmix64(self._bh + (i + j), self.seed)
        return (bits >> np.uint64(11)) < self._threshold

    def multiplier(self, batch, r0, r1, c0, c1, dtype):
        """(B, N2, G, Br, Bc) array: 1 / keep_prob where kept, 0 where dropped."""
        keep = self._keep_bits(batch, r0, r1, c0, c1)
        return keep.astype(dtype) * dtype.type(self.scale)

    def dense(self, batch, dtype):
        """The full multiplier (B, N2, G, S1, S2) — for references and the second-order backward."""
        return self.multiplier(batch, 0, self.s1, 0, self.s2, np.dtype(dtype))


def pack_keep_mask(keep):
    """Bit-pack a bool keep mask (..., S2) into MindSpore's drop_mask layout (..., S2 // 8) uint8."""
    return np.packbits(np.asarray(keep, bool), axis=-1, bitorder="little")


# =================================================================================================
# Online softmax
class OnlineSoftmax:
    """Running state of softmax(S) @ V over column tiles of S: row max m, row sum l, accumulator.

    `update(s, v)` folds in one tile of scores (masked entries already -inf). Rows that have seen
    no visible score keep m = -inf; the `m_safe` guard keeps exp(-inf - (-inf)) = NaN out.
    """

    def __init__(self, rows_shape, dv, dtype):
        self.m = np.full(rows_shape, _NEG_INF, dtype)
        self.l = np.zeros(rows_shape, dtype)
        self.acc = np.zeros(rows_shape + (dv,), dtype)

    def update(self, s, v, dropmul=None):
        m_new = np.maximum(self.m, s.max(axis=-1))
        m_safe = np.where(m_new == _NEG_INF, 0.0, m_new).astype(s.dtype, copy=False)
        s -= m_safe[..., None]
        p = np.exp(s, out=s)                               # the tile's probabilities, unnormalized
        alpha = np.exp(self.m - m_safe)                     # rescales what was accumulated so far
        self.l *= alpha
        self.l += p.sum(axis=-1)
        if dropmul is not None:                             # dropout acts after normalization: l
            p *= dropmul                                    # counts every probability, V only the kept
        self.acc *= alpha[..., None]
        self.acc += p @ v
        self.m = m_new

    def update_fused(self, s, keep, v):
        """`_mask_scores(s, keep)` + `update(s, v)` (no dropout) with the mask, max, exp, sum and
        state rescale in one C pass per row (_native_attention.online_softmax_tile; saves ~8 NumPy
        passes over the tile). False when the C loop does not apply (nothing changed: use the plain
        pair)."""
        alpha = _native_attention.online_softmax_tile(s, keep, self.m, self.l)
        if alpha is None:
            return False
        self.acc *= alpha[..., None]
        self.acc += s @ v
        return True

    def finish(self):
        """(out, lse): out = acc / l (0 for empty rows), lse = m + log(l) (-inf for empty rows)."""
        empty = self.l == 0
        l_safe = np.where(empty, 1.0, self.l).astype(self.l.dtype, copy=False)
        out = self.acc
        out /= l_safe[..., None]
        with np.errstate(divide="ignore"):
            lse = self.m + np.log(self.l)
        lse[empty] = _NEG_INF
        return out, lse


def _mask_scores(s, keep):
    if keep is not None:
        np.copyto(s, _NEG_INF, where=~keep)


# =================================================================================================
# FlashAttention forward / backward
def flash_forward(q, k, v, scale, pattern, pse=None, dropout=None, block_q=128, block_kv=128, kv_range=None):
    """Tiled attention. q (B, N2, G, S1, D), k (B, N2, S2, D), v (B, N2, S2, Dv), all in the compute
    dtype; `pse` None or broadcastable to (B, N2, G, S1, S2); `kv_range` (c_start, c_end) restricts
    the keys (Flash-Decoding splits). Returns out (B, N2, G, S1, Dv) and lse (B, N2, G, S1)."""
    B, N2, G, S1, _ = q.shape
    dv = v.shape[-1]
    c_start, c_end = (0, k.shape[2]) if kv_range is None else kv_range
    out = np.empty((B, N2, G, S1, dv), q.dtype)
    lse = np.empty((B, N2, G, S1), q.dtype)
    step = _batch_step(q, min(block_q, S1) * min(block_kv, c_end - c_start), pse, dropout)
    if step:
        for b0 in range(0, B, step):
            b1 = min(b0 + step, B)
            out[b0:b1], lse[b0:b1] = flash_forward(q[b0:b1], k[b0:b1], v[b0:b1], scale, pattern.batches(b0, b1),
                                                   _batch_rows(pse, b0, b1), None, block_q, block_kv, kv_range)
        return out, lse
    kt = _transposed(k[:, :, c_start:c_end])                 # (B, N2, 1, D, c_end - c_start)
    vv = v[:, :, None]
    for r0 in range(0, S1, block_q):
        r1 = min(r0 + block_q, S1)
        qi = q[..., r0:r1, :] * q.dtype.type(scale)         # scale folded into the (small) Q tile
        state = OnlineSoftmax((B, N2, G, r1 - r0), dv, q.dtype)
        for c0 in range(c_start, c_end, block_kv):
            c1 = min(c0 + block_kv, c_end)
            keep = pattern.tile(r0, r1, c0, c1)
            if keep is SKIP:
                continue                                     # fully masked tile: no work at all
            s = qi @ kt[..., c0 - c_start:c1 - c_start]
            if pse is not None:
                s += pse[..., r0:r1, c0:c1]
            # fast: one C pass (mask + max + exp + sum + rescale); plain: _mask_scores + state.update
            if dropout is None and state.update_fused(s, keep, vv[..., c0:c1, :]):
                continue
            _mask_scores(s, keep)
            dm = None if dropout is None else dropout.multiplier(B, r0, r1, c0, c1, q.dtype)
            state.update(s, vv[..., c0:c1, :], dm)
        out[..., r0:r1, :], lse[..., r0:r1] = state.finish()
    return out, lse


# A score tile spans every batch and head at once: (B, N2, G, Br, Bc). When that is much bigger than
# the CPU's caches (shakespeare-small: 64 x 6 x 128 x 128 float32 = 25 MB per tile, and the backward
# keeps four such arrays live) every pass over it goes to memory. So the kernels walk the batch in
# slices whose tiles stay within this budget. Each slice costs a Python walk of its tiles (~15
# NumPy calls), so the budget is not small: the LLaMA preset's 786 KB tile is not sliced (measured
# one thread: slicing it into 256 KB pieces cost ~0.5 ms a call on a lightly loaded machine; under
# heavy load, with the caches shared, it saved ~3x on the backward).
TILE_BUDGET_BYTES = 1024 * 1024


def _batch_step(q, tile_elems_per_head, pse, dropout):
    """How many batches per slice (None: all at once). Dropout tiles are not sliced: their bits are
    numbered by the batch index (the slices would need an offset)."""
    B, N2, G = q.shape[:3]
    per_batch = N2 * G * tile_elems_per_head * q.dtype.itemsize
    if dropout is not None or B <= 1 or per_batch * B <= TILE_BUDGET_BYTES:
        return None
    return max(1, TILE_BUDGET_BYTES // max(per_batch, 1))


def _batch_rows(x, b0, b1):
    """Batches [b0, b1) of a (B|1, N2|1, G|1, S1, S2) operand (one shared by the batches - batch
    dimension 1, or a 2-d (S1, S2) one - is passed whole)."""
    return x if x is None or x.ndim < 5 or x.shape[0] == 1 else x[b0:b1]


def _transposed(x):
    """x (B, N2, S, D) as a contiguous (B, N2, 1, D, S) copy: NumPy's batched matmul only reaches BLAS
    for operands whose matrices are row-major (a transposed *view* takes a loop 10-100x slower), so
    K^T is laid out once per call (O(S * D), like K itself) and tiles are column slices of it."""
    return np.ascontiguousarray(x.swapaxes(-1, -2))[:, :, None]


def _tile_t(x):
    """A tile's transpose, materialized (tile-sized) so the matmul that follows runs on BLAS."""
    return np.ascontiguousarray(x.swapaxes(-1, -2))


def _sum_to(a, shape):
    """Sum a (B, N2, G, Br, Bc)-shaped tile down to a broadcast operand's tile shape."""
    axes = tuple(i for i, (n, m) in enumerate(zip(a.shape, shape)) if m == 1 and n != 1)
    return a.sum(axis=axes, keepdims=True) if axes else a


def flash_backward(q, k, v, out, dout, lse, dlse, scale, pattern, pse=None, dropout=None,
                   block_q=128, block_kv=128):
    """Gradients of <dout, out> + <dlse, lse> for `flash_forward`, recomputing every probability tile
    from the saved log-sum-exp: P = exp(S - L). With D = rowsum(dout * out) - dlse:

        dV_j += P~^T dO_i     dP = (dO_i V_j^T) * dropmul     dS = P * (dP - D_i)
        dQ_i += scale dS K_j  dK_j += scale dS^T Q_i         dpse = dS

    (P~ = P * dropmul.) Outer loop over key tiles, inner over query tiles (FlashAttention-2 order:
    dK_j, dV_j finish in one pass). Returns dq, dk, dv and dpse (None without pse); dk/dv summed over
    the G query heads sharing each key head."""
    B, N2, G, S1, D = q.shape
    S2, dv = k.shape[2], v.shape[-1]
    dt = q.dtype
    step = _batch_step(q, min(block_q, S1) * min(block_kv, S2), pse, dropout)
    if step:                                                 # batch slices whose tiles fit the cache
        dq, dk, dvv = np.empty(q.shape, dt), np.empty(k.shape, dt), np.empty(v.shape, dt)
        dpse = None if pse is None else np.zeros(pse.shape, dt)
        for b0 in range(0, B, step):
            b1 = min(b0 + step, B)
            g = flash_backward(q[b0:b1], k[b0:b1], v[b0:b1], out[b0:b1], dout[b0:b1], lse[b0:b1],
                               None if dlse is None else dlse[b0:b1], scale, pattern.batches(b0, b1),
                               _batch_rows(pse, b0, b1), None, block_q, block_kv)
            dq[b0:b1], dk[b0:b1], dvv[b0:b1] = g[:3]
            if dpse is not None:
                if pse.ndim < 5 or pse.shape[0] == 1:
                    dpse += g[3]                             # a bias shared by the batches: summed
                else:
                    dpse[b0:b1] = g[3]
        return dq, dk, dvv, dpse
    sc = dt.type(scale)
    delta = np.einsum("...d,...d->...", dout, out)          # (B, N2, G, S1)
    if dlse is not None:
        delta -= dlse
    # rows with no visible key: P must be 0 everywhere (exp(S - inf) = 0), not exp(S + inf)
    lse_safe = np.where(lse == _NEG_INF, np.inf, lse).astype(dt, copy=False)
    dq = np.zeros(q.shape, dt)
    dk = np.zeros(k.shape, dt)
    dvv = np.zeros(v.shape, dt)
    dpse = None if pse is None else np.zeros(pse.shape, dt)
    kt, vt = _transposed(k), _transposed(v)                 # (B, N2, 1, D, S2)
    dq_touched = set()                                       # query blocks whose dq is no longer 0
    for c0 in range(0, S2, block_kv):
        c1 = min(c0 + block_kv, S2)
        kj = k[:, :, None, c0:c1]                            # (B, N2, 1, Bc, D)
        dk_j = np.zeros((B, N2, G, c1 - c0, D), dt)
        dv_j = np.zeros((B, N2, G, c1 - c0, dv), dt)
        first_q = True                                       # dk_j, dv_j still 0 (fused path: write, not add)
        for r0 in range(0, S1, block_q):
            r1 = min(r0 + block_q, S1)
            keep = pattern.tile(r0, r1, c0, c1)
            if keep is SKIP:
                continue
            qi = q[..., r0:r1, :]
            doi = dout[..., r0:r1, :]
            s = (qi * sc) @ kt[..., c0:c1]
            if pse is not None:
                s += pse[..., r0:r1, c0:c1]
            dp = doi @ vt[..., c0:c1]
            if dropout is None and _grad_tile_fused(s, keep, lse_safe[..., r0:r1], delta[..., r0:r1], doi,
                                                    dp, kj, qi, sc, dq[..., r0:r1, :], dk_j, dv_j,
                                                    dpse, r0, r1, c0, c1, first_q, r0 not in dq_touched):
                first_q = False          # fast: one C pass per tile row instead of the NumPy chain below
                dq_touched.add(r0)
                continue
            first_q = False
            dq_touched.add(r0)
            _mask_scores(s, keep)
            s -= lse_safe[..., r0:r1, None]
            p = np.exp(s, out=s)                             # recomputed probabilities of this tile
            if dropout is not None:
                dm = dropout.multiplier(B, r0, r1, c0, c1, dt)
                dv_j += _tile_t(p * dm) @ doi
                dp *= dm
            else:
                dv_j += _tile_t(p) @ doi
            dp -= delta[..., r0:r1, None]
            ds = p
            ds *= dp                                         # dS = P * (dP - D), in place over P
            if dpse is not None:
                dpse[..., r0:r1, c0:c1] = _sum_to(ds, dpse.shape[:-2] + ds.shape[-2:])
            dq[..., r0:r1, :] += (ds @ kj) * sc
            dk_j += _tile_t(ds) @ qi
        dk[:, :, c0:c1] = dk_j.sum(axis=2) * sc
        dvv[:, :, c0:c1] = dv_j.sum(axis=2)
    return dq, dk, dvv, dpse


def _grad_tile_fused(s, keep, lse_i, delta_i, doi, dp, kj, qi, sc, dq_i, dk_j, dv_j, dpse, r0, r1, c0, c1,
                     first_q, first_kv):
    """One tile of `flash_backward` (no dropout) with P = exp(S - L) and dS = P * (dP - D) made by
    one C loop (_native_attention.attention_grad_tile) instead of mask, subtract, exp, subtract and
    multiply in NumPy; the products stay BLAS.
    Updates dq_i, dk_j, dv_j (and dpse) in place; False (nothing changed) when the C loop does not
    apply. dk_j receives dS^T Q unscaled, as in the plain loop (the caller scales it once). While an
    accumulator is still 0 (first_q: dk_j, dv_j; first_kv: dq_i) the product is written into it
    (matmul's out=) instead of being added: saves a temporary and a pass."""
    fused = _native_attention.attention_grad_tile(s, keep, lse_i, delta_i, dp)
    if fused is None:
        return False
    p, ds = fused
    p_t, ds_t = _tile_t(p), _tile_t(ds)
    if dpse is not None:
        dpse[..., r0:r1, c0:c1] = _sum_to(ds, dpse.shape[:-2] + ds.shape[-2:])
    if first_q:
        np.matmul(p_t, doi, out=dv_j)
        np.matmul(ds_t, qi, out=dk_j)
    else:
        dv_j += p_t @ doi
        dk_j += ds_t @ qi
    if first_kv and dq_i.flags.c_contiguous:
        np.matmul(ds, kj, out=dq_i)
        if sc != 1:
            dq_i *= sc
    else:
        dq_tile = ds @ kj
        if sc != 1:
            dq_tile *= sc
        dq_i += dq_tile
    return True


# =================================================================================================
# Flash-Decoding: split the keys, attend to each split, combine by log-sum-exp
def combine_partials(outs, lses):
    """Merge attention over disjoint key sets. outs (P, ..., Dv) are each split's *normalized*
    output, lses (P, ...) each split's log-sum-exp. Weight of split s = exp(lse_s - LSE), where
    LSE = logsumexp_s(lse_s) is the log-sum-exp over all keys; empty splits (lse -inf) weigh 0."""
    m = lses.max(axis=0)
    m_safe = np.where(m == _NEG_INF, 0.0, m)
    w = np.exp(lses - m_safe)                                # (P, ...)
    total = w.sum(axis=0)
    empty = total == 0
    total_safe = np.where(empty, 1.0, total)
    out = np.einsum("p...,p...d->...d", w, outs) / total_safe[..., None]
    with np.errstate(divide="ignore"):
        lse = m_safe + np.log(total)
    lse = np.where(empty, _NEG_INF, lse)
    return out.astype(outs.dtype, copy=False), lse.astype(lses.dtype, copy=False)


def split_kv_forward(q, k, v, scale, pattern, num_splits, pse=None, block_kv=512):
    """Flash-Decoding: split the S2 keys into `num_splits` contiguous chunks, attend to each chunk
    independently (on a GPU: in parallel), then `combine_partials`. Equal to `flash_forward`."""
    S2 = k.shape[2]
    num_splits = max(1, min(int(num_splits), max(S2, 1)))
    bounds = np.linspace(0, S2, num_splits + 1).round().astype(int)
    outs, lses = [], []
    for c0, c1 in zip(bounds[:-1], bounds[1:]):
        o, l = flash_forward(q, k, v, scale, pattern, pse, None, block_q=max(q.shape[3], 1),
                             block_kv=block_kv, kv_range=(int(c0), int(c1)))
        outs.append(o)
        lses.append(l)
    return combine_partials(np.stack(outs), np.stack(lses))


# =================================================================================================
# PagedAttention: the online softmax walks a block table
def check_block_tables(op, block_tables, context_lens, num_blocks, block_size):
    """Every block a sequence needs (ceil(context_len / block_size) of them) must exist."""
    bt = np.asarray(block_tables)
    ctx = np.asarray(context_lens, dtype=np.int64)
    if np.any(ctx < 0):
        raise OpValueError(op, "'context_lens' >= 0", f"{ctx.tolist()}")
    needed = -(-ctx // block_size)
    if np.any(needed > bt.shape[1]):
        b = int(np.argmax(needed > bt.shape[1]))
        raise OpValueError(op, f"'context_lens' <= block_tables.shape[1] * block_size = "
                               f"{bt.shape[1] * block_size}", f"context_lens[{b}] = {int(ctx[b])}")
    used = np.arange(bt.shape[1])[None, :] < needed[:, None]
    bad = used & ((bt < 0) | (bt >= num_blocks))
    if np.any(bad):
        b, j = (int(x) for x in np.argwhere(bad)[0])
        raise OpIndexError(op, f"'block_tables' entries in [0, {num_blocks}) (the cache's blocks) for every "
                               f"block a sequence uses", f"block_tables[{b}, {j}] = {int(bt[b, j])}")


def paged_forward(q, q_pos, key_cache, value_cache, block_tables, context_lens, scale,
                  dequant_k=None, dequant_v=None, tokens_per_step=512):
    """Attention of queries q (B, N2, G, T, D) at absolute positions q_pos (B, T) (-1: padding row)
    over the keys stored in the paged caches (num_blocks, block_size, N2, D).

    Key position p of sequence b lives in block block_tables[b, p // block_size] at offset
    p % block_size; it is visible to query t when p <= q_pos[b, t] (causal; decode has q_pos =
    context_len - 1, so every cached key is visible) and p < context_lens[b]. The walk gathers a few
    blocks at a time (`tokens_per_step` keys) for all sequences at once, so the Python loop is short,
    and dequantizes int8 blocks only as they are gathered (`dequant_k(blocks)` -> float)."""
    B, N2, G, T, _ = q.shape
    block_size = key_cache.shape[1]
    dv = value_cache.shape[-1]
    dt = q.dtype
    ctx = np.asarray(context_lens, dtype=np.int64)
    n_blocks = int(-(-ctx.max() // block_size)) if B else 0
    step = max(1, tokens_per_step // block_size)
    qs = q * dt.type(scale)
    state = OnlineSoftmax((B, N2, G, T), dv, dt)
    bt = np.asarray(block_tables, dtype=np.int64)
    for j0 in range(0, n_blocks, step):
        j1 = min(j0 + step, n_blocks)
        ids = bt[:, j0:j1]
        pos = np.arange(j0 * block_size, j1 * block_size)                    # key positions
        live = pos[None, :] < ctx[:, None]                                     # (B, L)
        ids = np.where(live[:, ::block_size], ids, 0)      # blocks beyond a sequence: read block 0, masked
        kb = key_cache[ids]                                # (B, nb, bs, N2, D): a gathered copy
        vb = value_cache[ids]
        if dequant_k is not None:
            kb, vb = dequant_k(kb), dequant_v(vb)
        L = (j1 - j0) * block_size
        kb = np.ascontiguousarray(kb.reshape(B, L, N2, -1).transpose(0, 2, 3, 1), dtype=dt)[:, :, None]  # (B,N2,1,D,L)
        vb = np.ascontiguousarray(vb.reshape(B, L, N2, dv).transpose(0, 2, 1, 3), dtype=dt)[:, :, None]  # (B,N2,1,L,Dv)
        s = qs @ kb                                                                       # (B,N2,G,T,L)
        keep = (pos[None, None, :] <= q_pos[:, :, None]) & live[:, None, :]               # (B, T, L)
        _mask_scores(s, keep[:, None, None])
        state.update(s, vb)
    return state.finish()
