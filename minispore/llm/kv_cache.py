"""KV caches: keep every layer's keys and values so a new token costs one position, not the whole prefix.

Two layouts, one protocol. The model (`Llama.forward_2d(tokens, cache)`) asks the cache three things:

    positions = cache.begin(batch, seq, max_seq_len, tokens)
        # where the new tokens sit: an int (the same start for every row) or a (batch, seq)
        # array; checks the batch and the context length, reserves room
    out = cache.layers[i].attend(q, k, v, attention_fn)
        # store this layer's new keys/values, attend the queries over everything cached
    cache.end(seq)
        # commit: the new positions now count as cached

so one `Attention` cell serves training (no cache), contiguous decoding and paged decoding.

* `KVCache` (contiguous): per layer one (B, Hkv, capacity, hd) array for keys and one for values;
  new positions are written at the end, and the capacity doubles when full (amortized O(1)
  append, like a Python list). Batches of ragged prompts are *left-padded*: row b starts with
  `pad[b]` filler columns that every query ignores, and its positions count from its first real
  token, so each row computes exactly what it would alone.
* `PagedKVCache`: per layer one (num_blocks, block_size, Hkv, hd) pool for keys and one for values
  (MindSpore's `reshape_and_cache` layout); a `BlockManager` maps each sequence's positions to
  slots (block tables, reference counts, copy-on-write, prefix caching). Sequences of a batch
  keep their own lengths: no padding is ever stored.
"""
from __future__ import annotations

import numbers

import numpy as np

from ..common.errors import OpValueError
from ..common.memory_limit import check_fits
from ..common.tensor import _wrap
from ..ops import functional as F
from .block_manager import BlockManager, OutOfBlocksError
from .memory_estimate import kv_bytes

_KV_HINT = "Use fewer rows or a shorter context (capacity / num_blocks)."
# a Block object and its free-list entry in block_manager.BlockManager: 281 bytes measured
# (tracemalloc of BlockManager(100000, 16)), rounded up
_BLOCK_OBJECT_BYTES = 320


# ------------------------------------------------------------------------------------------------
# contiguous
class LayerKVCache:
    """One layer's keys and values: (B, Hkv, capacity, hd) arrays; columns [0, length) are valid."""

    def __init__(self, owner: "KVCache"):
        self.owner = owner
        self.k = self.v = None                   # ndarrays, allocated on the first write

    def _reserve(self, k):
        b, h, t, d = k.shape
        need = self.owner.length + t
        if self.k is None:
            cap = max(need, self.owner.capacity or 0, 16)
            if self is self.owner.layers[0]:           # budget the whole cache before its first array
                check_fits(kv_bytes(len(self.owner.layers), b, h, cap, d, k.dtype.np.itemsize),
                           f"a KV cache of {cap:,} positions x {b} rows", _KV_HINT)
            self.k = np.zeros((b, h, cap, d), dtype=k.dtype.np)
            self.v = np.zeros_like(self.k)
        elif need > self.k.shape[2]:             # grow geometrically: appends stay amortized O(1)
            cap = max(need, 2 * self.k.shape[2])
            for name in ("k", "v"):
                old = getattr(self, name)
                new = np.zeros(old.shape[:2] + (cap,) + old.shape[3:], dtype=old.dtype)
                new[:, :, :old.shape[2]] = old
                setattr(self, name, new)

    def attend(self, q, k, v, attention_fn):
        """Append k, v (B, Hkv, T, hd) after the cached columns; attend q over all of them."""
        self._reserve(k)
        start, t = self.owner.length, k.shape[2]
        self.k[:, :, start:start + t] = k.asnumpy()
        self.v[:, :, start:start + t] = v.asnumpy()
        keys, values = _wrap(self.k[:, :, :start + t]), _wrap(self.v[:, :, :start + t])
        return attention_fn(q, keys, values, causal=True, discard=self.owner.step_discard)

    def select_rows(self, rows):
        if self.k is not None:
            self.k, self.v = self.k[rows], self.v[rows]


class KVCache:
    """A contiguous KV cache for a batch of sequences that advance together.

    `pad`: optional left-padding per row (ragged prompts padded on the left to a common length):
    row b ignores its first `pad[b]` columns and its positions count from its first real token.
    `capacity`: columns to allocate up front (default: grow as needed).
    """

    def __init__(self, n_layers: int, capacity: int | None = None, pad=None):
        self.layers = [LayerKVCache(self) for _ in range(n_layers)]
        self.length = 0
        self.capacity = capacity
        self.pad = None if pad is None else np.asarray(pad, dtype=np.int64).reshape(-1)
        if self.pad is not None and not self.pad.any():
            self.pad = None
        self.step_discard = None

    @property
    def batch_size(self):
        return None if self.layers[0].k is None else self.layers[0].k.shape[0]

    def begin(self, batch: int, seq: int, max_seq_len: int, tokens=None):
        start = self.length
        if seq == 0 or start + seq > max_seq_len:
            raise OpValueError("Llama", f"1 to {max_seq_len - start} new positions (max_seq_len "
                               f"{max_seq_len}, {start} already cached)", f"{seq}")
        if self.batch_size is not None and batch != self.batch_size:
            raise OpValueError("Llama", f"a batch of {self.batch_size} rows (the cache's batch)", f"{batch}")
        self._check_growth(start + seq)
        if self.pad is None:
            self.step_discard = None
            return start
        if len(self.pad) != batch:
            raise OpValueError("Llama", f"a batch of {len(self.pad)} rows (one per padding length)", f"{batch}")
        cols = np.arange(start, start + seq)
        s = start + seq
        # a filler column is invisible to every query except itself (so filler rows never see
        # an empty key set, which would make their softmax NaN)
        key = np.arange(s)[None, None, :]
        self.step_discard = ((key < self.pad[:, None, None]) & (key != cols[None, :, None]))[:, None]
        return np.maximum(cols[None, :] - self.pad[:, None], 0)

    def _check_growth(self, need: int):
        """Before any layer grows: the grown cache (every layer) plus one layer's old arrays, which
        live until its copy is done, must fit - else nothing changes."""
        k = self.layers[0].k
        if k is None or need <= k.shape[2]:
            return
        b, h, cap, d = k.shape
        new_cap = max(need, 2 * cap)
        grown = kv_bytes(len(self.layers), b, h, new_cap, d, k.itemsize) + kv_bytes(1, b, h, cap, d, k.itemsize)
        check_fits(grown, f"growing a KV cache to {new_cap:,} positions x {b} rows", _KV_HINT)

    def end(self, seq: int):
        self.length += seq
        self.step_discard = None

    def trim_left(self, n: int):
        """Drop the first n columns (filler every remaining row has): positions are unchanged."""
        if n <= 0:
            return
        for layer in self.layers:
            if layer.k is not None:
                layer.k, layer.v = layer.k[:, :, n:], layer.v[:, :, n:]
        self.length -= n
        self.pad = self.pad - n
        if not self.pad.any():
            self.pad = None

    def select_rows(self, rows):
        """Keep only these batch rows (finished sequences leave a batched decode)."""
        rows = np.asarray(rows, dtype=np.int64)
        for layer in self.layers:
            layer.select_rows(rows)
        if self.pad is not None:
            self.pad = self.pad[rows]
            if not self.pad.any():
                self.pad = None


# ------------------------------------------------------------------------------------------------
# paged
class PagedLayer:
    """One layer's key and value block pools: (num_blocks, block_size, Hkv, hd) each."""

    def __init__(self, owner: "PagedKVCache", index: int):
        self.owner, self.index = owner, index

    def attend(self, q, k, v, attention_fn):
        """Write k, v (B, Hkv, T, hd) into their slots; attend q (B, H, T, hd) over each row's blocks."""
        c = self.owner
        step = c._step
        b, hkv, t, hd = k.shape
        if c.k is None:
            c._allocate(k.dtype.np)
        # (B, Hkv, T, hd) -> (B*T, Hkv, hd): token n of the step goes to flat slot step.slots[n]
        k_tok = F.reshape(F.transpose(k, (0, 2, 1, 3)), (b * t, hkv, hd))
        v_tok = F.reshape(F.transpose(v, (0, 2, 1, 3)), (b * t, hkv, hd))
        if c.use_fused_ops:
            return self._fused(q, k_tok, v_tok, step)
        kc, vc = c.k[self.index], c.v[self.index]
        kc.reshape(-1, hkv, hd)[step.slots] = k_tok.asnumpy()
        vc.reshape(-1, hkv, hd)[step.slots] = v_tok.asnumpy()
        # gather each row's blocks (padded to the longest row), then attend with a mask that
        # drops both the future and the padding: key j of row r is visible to query i iff
        # j <= start[r] + i
        keys = kc[step.tables].reshape(b, -1, hkv, hd)[:, :step.max_len]
        values = vc[step.tables].reshape(b, -1, hkv, hd)[:, :step.max_len]
        keys = _wrap(np.ascontiguousarray(np.transpose(keys, (0, 2, 1, 3))))
        values = _wrap(np.ascontiguousarray(np.transpose(values, (0, 2, 1, 3))))
        return attention_fn(q, keys, values, causal=False, discard=step.discard)

    def _fused(self, q, k_tok, v_tok, step):
        """MindSpore's pair of fused ops: `reshape_and_cache` writes the new keys/values into their
        slots (in place), `paged_attention` walks each row's block table with an online softmax."""
        c = self.owner
        b, h, t, hd = q.shape
        kc, vc = c.k_tensors[self.index], c.v_tensors[self.index]
        F.reshape_and_cache(k_tok, v_tok, kc, vc, step.slots_t)
        q_tok = F.reshape(F.transpose(q, (0, 2, 1, 3)), (b * t, h, hd))
        out = F.paged_attention(q_tok, kc, vc, step.tables_t, step.context_lens_t,
                                q_seq_lens=step.q_seq_lens_t if t > 1 else None, head_num=h, scale_value=1.0,
                                kv_head_num=k_tok.shape[1])
        return F.transpose(F.reshape(out, (b, t, h, hd)), (0, 2, 1, 3))


class _PagedStep:
    """The per-forward data of a paged batch: slots to write, padded block tables, the mask (and
    the same as Tensors for the fused ops)."""

    def __init__(self, slots, tables, max_len, discard, ends, seq):
        self.slots, self.tables, self.max_len, self.discard = slots, tables, max_len, discard
        self.slots_t, self.tables_t = _wrap(slots), _wrap(tables)
        self.context_lens_t = _wrap(ends)
        self.q_seq_lens_t = _wrap(np.full(len(ends), seq, dtype=np.int64))


class PagedKVCache:
    """A paged KV cache shared by any number of sequences.

        cache = PagedKVCache(model.config, num_blocks=64, block_size=16)
        cached = cache.add_sequence("a", prompt_ids)      # prefix-cache hits: KV already there
        logits = model(Tensor([prompt_ids[cached:]]), cache.batch(["a"]))   # prefill the rest
        logits = model(Tensor([[next_id]]), cache.batch(["a"]))              # decode one token
        cache.free("a")

    `model(tokens, cache.batch(ids))` continues each listed sequence by its row of `tokens`:
    positions already reserved by `add_sequence` must hold those very tokens; positions past
    them are appended (new blocks, copy-on-write of a shared last block).
    """

    def __init__(self, config, num_blocks: int, block_size: int = 16, enable_prefix_caching: bool = True,
                 use_fused_ops: bool | None = None):
        self.config = config
        # the pools and the block manager's per-block bookkeeping, budgeted before either exists
        # (float32 pools assumed here; `_allocate` checks again with the model's real dtype). Bad
        # counts are left to BlockManager, which refuses them with its own message.
        counts = (num_blocks, block_size)
        if all(isinstance(v, numbers.Integral) and not isinstance(v, bool) and v >= 1 for v in counts):
            n, size = int(num_blocks), int(block_size)
            check_fits(kv_bytes(config.n_layers, n, config.n_kv_heads, size, config.head_dim, 4)
                       + n * _BLOCK_OBJECT_BYTES, f"a paged KV cache of {n:,} blocks x {size} positions", _KV_HINT)
        # None: MindSpore's reshape_and_cache + paged_attention when the fused ops exist; False: the
        # NumPy gather of each row's blocks and the model's attention function (the reference)
        available = hasattr(F, "paged_attention") and hasattr(F, "reshape_and_cache")
        if use_fused_ops and not available:
            raise OpValueError("PagedKVCache", "use_fused_ops=True with ops.paged_attention available",
                               "a minispore without the fused-op family")
        self.use_fused_ops = available if use_fused_ops is None else bool(use_fused_ops)
        self.manager = BlockManager(num_blocks, block_size, enable_prefix_caching)
        self.block_size = int(block_size)
        # the pools take the model's dtype on the first write: (num_blocks, block_size, Hkv, hd)
        self.shape = (int(num_blocks), self.block_size, config.n_kv_heads, config.head_dim)
        self.k = self.v = None                   # per layer ndarrays ...
        self.k_tensors = self.v_tensors = None   # ... and Tensors sharing their memory (for the fused ops)
        self.layers = [PagedLayer(self, i) for i in range(config.n_layers)]
        self._batch_ids = None
        self._step = None

    # sequences ------------------------------------------------------------------------------
    def add_sequence(self, seq_id, prompt_ids) -> int:
        """Reserve blocks for a prompt; returns how many leading tokens are already cached."""
        return self.manager.allocate(seq_id, prompt_ids)

    def fork(self, parent_id, child_id):
        self.manager.fork(parent_id, child_id)

    def free(self, seq_id):
        self.manager.free(seq_id)

    def num_computed(self, seq_id) -> int:
        return self.manager.num_computed(seq_id)

    def batch(self, seq_ids) -> "PagedKVCache":
        """This cache, set to run the listed sequences as the rows of the next forward."""
        ids = list(seq_ids)
        if not ids:
            raise OpValueError("PagedKVCache.batch", "at least one sequence id", "[]")
        for s in ids:
            self.manager._seq(s, "batch")
        if len(set(ids)) != len(ids):
            raise OpValueError("PagedKVCache.batch", "distinct sequence ids", repr(ids))
        self._batch_ids = ids
        return self

    def _allocate(self, np_dtype):
        n, size, h, d = self.shape
        check_fits(kv_bytes(len(self.layers), n, h, size, d, np.dtype(np_dtype).itemsize),
                   f"a paged KV cache of {n:,} blocks x {size} positions", _KV_HINT)
        self.k = [np.zeros(self.shape, dtype=np_dtype) for _ in self.layers]
        self.v = [np.zeros(self.shape, dtype=np_dtype) for _ in self.layers]
        self.k_tensors = [_wrap(a) for a in self.k]
        self.v_tensors = [_wrap(a) for a in self.v]

    def copy_blocks(self, copies):
        if self.k is None:
            return
        for src, dst in copies:
            for layer in range(len(self.k)):
                self.k[layer][dst] = self.k[layer][src]
                self.v[layer][dst] = self.v[layer][src]

    # the model protocol ---------------------------------------------------------------------
    def begin(self, batch: int, seq: int, max_seq_len: int, tokens=None):
        ids = self._batch_ids
        if ids is None:
            raise OpValueError("Llama", "a paged cache prepared with cache.batch(seq_ids)", "no batch")
        if batch != len(ids):
            raise OpValueError("Llama", f"{len(ids)} rows (one per sequence of cache.batch)", f"{batch}")
        m = self.manager
        starts = np.array([m.num_computed(s) for s in ids], dtype=np.int64)
        if seq == 0 or starts.max() + seq > max_seq_len:
            raise OpValueError("Llama", f"1 to {max_seq_len - int(starts.max())} new positions (max_seq_len "
                               f"{max_seq_len}, {int(starts.max())} already cached)", f"{seq}")
        toks = np.zeros((batch, seq), np.int64) if tokens is None else np.asarray(tokens).reshape(batch, seq)
        # check every row before changing anything: a bad row or a full cache leaves all untouched
        overlaps, need = [], 0
        for r, s in enumerate(ids):
            start = int(starts[r])
            # positions reserved by add_sequence must be fed the tokens they were reserved for
            overlap = min(m.num_tokens(s), start + seq) - start
            if tokens is not None and overlap > 0:
                expect = m.token_ids(s)[start:start + overlap]
                if toks[r, :overlap].tolist() != expect:
                    raise OpValueError("Llama", f"sequence {s!r} continued by its reserved prompt tokens "
                                       f"{expect[:8]}", f"{toks[r, :overlap].tolist()[:8]}")
            overlaps.append(overlap)
            need += m.blocks_needed(s, seq - overlap)
        if need > m.num_free_blocks:
            raise OutOfBlocksError("PagedKVCache", need, m.num_free_blocks, m.num_blocks)
        slots = []
        for r, s in enumerate(ids):
            start, overlap = int(starts[r]), overlaps[r]
            if overlap < seq:                     # decoded tokens: new slots (copy-on-write first)
                self.copy_blocks(m.append(s, toks[r, overlap:]).copies)
            slots.append(m.slots(s, start, start + seq))
        ends = starts + seq
        max_len = int(ends.max())
        n_blocks = -(-max_len // self.block_size)
        tables = np.zeros((batch, n_blocks), dtype=np.int64)
        for r, s in enumerate(ids):
            t = m.block_table(s)
            tables[r, :len(t)] = t[:n_blocks]
        key = np.arange(max_len)[None, None, :]
        query_pos = starts[:, None, None] + np.arange(seq)[None, :, None]
        discard = (key > query_pos)[:, None]                    # (B, 1, T, S)
        if not discard.any():
            discard = None
        self._step = _PagedStep(np.concatenate(slots), tables, max_len, discard, ends, seq)
        if np.all(starts == starts[0]):
            return int(starts[0])
        return starts[:, None] + np.arange(seq)[None, :]

    def end(self, seq: int):
        for s in self._batch_ids:
            self.manager.mark_computed(s, self.manager.num_computed(s) + seq)
        self._step = None


__all__ = ["KVCache", "LayerKVCache", "PagedKVCache", "PagedLayer"]
