"""The block manager of a paged KV cache: which physical block holds which tokens of which sequence.

vLLM's idea (Kwon et al., SOSP 2023, "PagedAttention"): instead of reserving one contiguous
max-length region per request, split the KV cache into fixed-size *blocks* of `block_size` token
slots and give each sequence a *block table* — the list of physical block ids holding its logical
blocks 0, 1, 2, ... A new block is taken only when the last one is full, so at most one partly
filled block per sequence is wasted.

This module is pure bookkeeping (no arrays): it hands out block ids and slot numbers, and the
`PagedKVCache` (kv_cache.py) stores the keys/values at those slots. Three more ideas make blocks
shareable between sequences:

* **Reference counts.** A physical block may appear in several block tables (a forked sequence for
  parallel sampling, or a shared prompt prefix). `ref_count` is the number of table entries that
  point at it; it is free exactly when that count is 0.
* **Copy-on-write.** Before a sequence writes a token into a block that someone else also uses,
  the manager gives it a private copy (`Reservation.copies` lists the (source, destination) block
  pairs whose KV the cache must copy first); the other sharers keep the original, unchanged.
* **Prefix caching** by chained block hashes. When a block becomes full *and its KV has been
  computed*, it gets a hash of (the previous block's hash, its token ids). The chain makes one hash
  identify the whole prefix up to that block, not just the block's own tokens. A new request
  walks its prompt block by block; every hash hit is a block whose KV can be reused instead of
  recomputed (its stored token ids are compared too, so a hash collision cannot return wrong KV).
  A freed block keeps its hash on the free list and can be revived until it is reused for other
  tokens (least recently freed first), like vLLM's automatic prefix caching and nano-vllm.

The last block of a prompt is never taken from the cache: at least one prompt token must be
computed, because its logits give the first generated token.

Accounting is exact and checkable: `check()` verifies that every block is either free (ref 0, on
the free list) or used (ref > 0, not on it), and that each used block's count equals the number
of block-table entries that point at it.
"""
from __future__ import annotations

import hashlib
import numbers
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

from ..common.errors import MinisporeRuntimeError, OpTypeError, OpValueError

INT64_MAX = 2 ** 63 - 1       # token ids are hashed (chain_hash) and stored as int64


class OutOfBlocksError(MinisporeRuntimeError):
    """The KV cache has too few free blocks for a request (nothing was changed)."""

    def __init__(self, op: str, needed: int, free: int, num_blocks: int):
        self.op, self.needed, self.free = op, needed, free
        super().__init__(f"For '{op}', the paged KV cache needs {needed} free block(s) but has {free} "
                         f"(of {num_blocks}). Free finished sequences, or make the cache bigger (num_blocks).")


def chain_hash(prev: bytes | None, token_ids) -> bytes:
    """The hash of a full block: blake2b over the previous block's hash and this block's token ids.

    Chaining makes equal hashes mean equal *prefixes*: two blocks with the same tokens at different
    places in their prompts (or after different earlier text) get different hashes.
    """
    h = hashlib.blake2b(digest_size=16)
    h.update(prev if prev is not None else b"\0" * 16)
    h.update(np.asarray(token_ids, dtype=np.int64).tobytes())
    return h.digest()


def _count(v, name: str, op: str) -> int:
    """`v` as a Python int: an integer (Python or NumPy), never a bool or a float (3.0 would be
    stored and break the block arithmetic later, after state had changed)."""
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise OpTypeError(f"BlockManager.{op}", f"'{name}' as an int", f"{v!r} ({type(v).__name__})")
    return int(v)


def _token_list(token_ids, op: str) -> list:
    """Token ids as a list of Python ints, each in [0, 2**63 - 1] (int64, the dtype they are
    hashed with). Validated completely before any caller changes state."""
    where = f"BlockManager.{op}"
    if isinstance(token_ids, (str, bytes)):
        raise OpTypeError(where, "token ids as a sequence or array of ints", repr(token_ids))
    try:
        arr = np.asarray(token_ids)
    except (TypeError, ValueError) as e:                 # ragged nesting, objects NumPy refuses
        raise OpTypeError(where, "token ids as a sequence or array of ints", f"{type(token_ids).__name__} ({e})") from None
    if arr.ndim > 1:
        raise OpValueError(where, "token ids as a 0-d or 1-d sequence", f"shape {arr.shape}")
    if arr.size == 0:                                    # [] is float64 to NumPy: not a dtype error
        return []
    flat = arr.reshape(-1)
    if arr.dtype == object:                              # Python ints too big for int64, or mixed types
        for t in flat:
            if isinstance(t, bool) or not isinstance(t, numbers.Integral):
                raise OpTypeError(where, "integer token ids", f"{t!r} ({type(t).__name__})")
        values = [int(t) for t in flat]
        lo, hi = min(values), max(values)
    elif arr.dtype.kind in "iu":
        values = flat.tolist()
        lo, hi = int(flat.min()), int(flat.max())
    else:
        raise OpTypeError(where, "integer token ids", f"an array of dtype {arr.dtype}")
    if lo < 0 or hi > INT64_MAX:
        raise OpValueError(where, f"token ids in [0, {INT64_MAX}] (int64)", f"{lo if lo < 0 else hi}")
    return values


def _hashable(seq_id, name: str, op: str):
    try:
        hash(seq_id)
    except TypeError:
        raise OpTypeError(f"BlockManager.{op}", f"'{name}' as a hashable sequence id",
                          f"{type(seq_id).__name__}") from None
    return seq_id


@dataclass
class Block:
    """One physical block: how many table entries point at it, and (once full and computed) the
    hash and token ids that make it findable by prefix caching."""

    block_id: int
    ref_count: int = 0
    hash: bytes | None = None
    token_ids: tuple = ()


@dataclass
class Reservation:
    """What the cache must do before the model writes new tokens of a sequence.

    * `slots`: the flat slot (block_id * block_size + offset) of each new token, in order;
    * `copies`: (source, destination) block pairs to copy first (copy-on-write).
    """

    slots: np.ndarray
    copies: list = field(default_factory=list)


@dataclass
class _Seq:
    block_table: list
    token_ids: list
    num_computed: int = 0        # tokens whose KV is written (the rest are reserved slots)


class BlockManager:
    """Allocates fixed-size KV blocks to sequences, with reference counts, copy-on-write and
    prefix caching. Sequences are named by any hashable id."""

    def __init__(self, num_blocks: int, block_size: int, enable_prefix_caching: bool = True):
        for name, v in (("num_blocks", num_blocks), ("block_size", block_size)):
            if not isinstance(v, numbers.Integral) or isinstance(v, bool) or v < 1:
                raise OpValueError("BlockManager", f"'{name}' as a positive int", repr(v))
        self.num_blocks, self.block_size = int(num_blocks), int(block_size)
        self.enable_prefix_caching = bool(enable_prefix_caching)
        self.blocks = [Block(i) for i in range(self.num_blocks)]
        # free blocks in the order they were freed: allocation takes the oldest (front), so a
        # recently freed block — likely the prefix of the next similar request — survives longest
        self.free_block_ids: OrderedDict[int, None] = OrderedDict((i, None) for i in range(self.num_blocks))
        self.used_block_ids: set[int] = set()
        self.hash_to_block: dict[bytes, int] = {}
        self.seqs: dict = {}
        # statistics for benchmarks and the docs: prompt tokens looked up / found in the cache
        self.prefix_queries = self.prefix_hits = 0

    # ---------------------------------------------------------------------------------------
    # queries
    @property
    def num_free_blocks(self) -> int:
        return len(self.free_block_ids)

    @property
    def num_used_blocks(self) -> int:
        return len(self.used_block_ids)

    def usage(self) -> float:
        """Fraction of blocks in use."""
        return self.num_used_blocks / self.num_blocks

    def block_table(self, seq_id) -> list:
        return list(self._seq(seq_id, "block_table").block_table)

    def num_tokens(self, seq_id) -> int:
        return len(self._seq(seq_id, "num_tokens").token_ids)

    def num_computed(self, seq_id) -> int:
        return self._seq(seq_id, "num_computed").num_computed

    def token_ids(self, seq_id) -> list:
        return list(self._seq(seq_id, "token_ids").token_ids)

    def slots(self, seq_id, start: int, stop: int) -> np.ndarray:
        """Flat slot numbers of token positions start..stop-1 of a sequence."""
        seq = self._seq(seq_id, "slots")
        start, stop = _count(start, "start", "slots"), _count(stop, "stop", "slots")
        if not 0 <= start <= stop <= len(seq.token_ids):
            raise OpValueError("BlockManager.slots", f"0 <= start <= stop <= {len(seq.token_ids)}",
                               f"start={start}, stop={stop}")
        pos = np.arange(start, stop)
        table = np.asarray(seq.block_table, dtype=np.int64)
        return table[pos // self.block_size] * self.block_size + pos % self.block_size

    def slot_waste(self) -> tuple[int, int]:
        """(reserved slots not holding a token, slots in used blocks): the internal fragmentation.
        A block shared by several sequences is counted once, at its fullest use."""
        filled = {}
        for seq in self.seqs.values():
            n = len(seq.token_ids)
            for i, b in enumerate(seq.block_table):
                filled[b] = max(filled.get(b, 0), min(self.block_size, n - i * self.block_size))
        total = len(filled) * self.block_size
        return total - sum(filled.values()), total

    def _seq(self, seq_id, op) -> _Seq:
        try:
            return self.seqs[seq_id]
        except (KeyError, TypeError):
            raise OpValueError(f"BlockManager.{op}", f"a sequence id among the {len(self.seqs)} allocated",
                               repr(seq_id)) from None

    # ---------------------------------------------------------------------------------------
    # prefix caching
    def _cached_prefix(self, token_ids) -> list:
        """Block ids whose computed KV equals the first blocks of `token_ids` (chained-hash hits
        whose stored tokens also match). The block holding the last token is never included."""
        if not self.enable_prefix_caching:
            return []
        bs = self.block_size
        hits, prev = [], None
        for i in range((len(token_ids) - 1) // bs):        # full blocks before the last token's block
            chunk = tuple(token_ids[i * bs:(i + 1) * bs])
            prev = chain_hash(prev, chunk)
            b = self.hash_to_block.get(prev)
            if b is None or self.blocks[b].token_ids != chunk:
                break
            hits.append(b)
        return hits

    def can_allocate(self, token_ids) -> bool:
        token_ids = _token_list(token_ids, "can_allocate")
        hits = self._cached_prefix(token_ids)
        return self._blocks_to_take(len(token_ids), hits) <= self.num_free_blocks

    def _blocks_to_take(self, n_tokens, hits) -> int:
        """Free blocks an allocation consumes: the new blocks, plus hits revived from the free list."""
        new = -(-n_tokens // self.block_size) - len(hits)
        return new + sum(1 for b in hits if self.blocks[b].ref_count == 0)

    def _take_free_block(self) -> int:
        b, _ = self.free_block_ids.popitem(last=False)
        blk = self.blocks[b]
        if blk.hash is not None:                  # recycled for other tokens: forget what it held
            if self.hash_to_block.get(blk.hash) == b:
                del self.hash_to_block[blk.hash]
            blk.hash, blk.token_ids = None, ()
        blk.ref_count = 1
        self.used_block_ids.add(b)
        return b

    def _ref(self, b):
        blk = self.blocks[b]
        if blk.ref_count == 0:                    # revive a cached block from the free list
            del self.free_block_ids[b]
            self.used_block_ids.add(b)
        blk.ref_count += 1

    def _unref(self, b):
        blk = self.blocks[b]
        blk.ref_count -= 1
        if blk.ref_count == 0:
            self.used_block_ids.discard(b)
            self.free_block_ids[b] = None         # keeps its hash: may be revived by a later prompt

    # ---------------------------------------------------------------------------------------
    # the operations
    def allocate(self, seq_id, token_ids) -> int:
        """Give a new sequence blocks for its prompt; returns how many leading tokens already have
        their KV in the cache (prefix-cache hits, a multiple of block_size). The model must compute
        the rest. Raises OutOfBlocksError (changing nothing) if the cache is too full."""
        _hashable(seq_id, "seq_id", "allocate")
        token_ids = _token_list(token_ids, "allocate")
        if seq_id in self.seqs:
            raise OpValueError("BlockManager.allocate", "a new sequence id", f"{seq_id!r}, which is allocated")
        if not token_ids:
            raise OpValueError("BlockManager.allocate", "a non-empty prompt", "no tokens")
        hits = self._cached_prefix(token_ids)
        need = self._blocks_to_take(len(token_ids), hits)
        if need > self.num_free_blocks:
            raise OutOfBlocksError("BlockManager.allocate", need, self.num_free_blocks, self.num_blocks)
        for b in hits:
            self._ref(b)
        n_blocks = -(-len(token_ids) // self.block_size)
        table = hits + [self._take_free_block() for _ in range(n_blocks - len(hits))]
        cached = len(hits) * self.block_size
        self.seqs[seq_id] = _Seq(table, token_ids, num_computed=cached)
        self.prefix_queries += len(token_ids)
        self.prefix_hits += cached
        return cached

    def append(self, seq_id, token_ids) -> Reservation:
        """Reserve slots for new tokens at the end of a sequence (a decoded token, or a prompt
        continuation). A shared, partly filled last block is copied first (copy-on-write)."""
        seq = self._seq(seq_id, "append")
        new = _token_list(token_ids, "append")
        n = len(seq.token_ids)
        grow, cow = self._growth(seq, len(new))
        need = grow + int(cow)
        if need > self.num_free_blocks:
            raise OutOfBlocksError("BlockManager.append", need, self.num_free_blocks, self.num_blocks)
        copies = []
        if cow:
            old = seq.block_table[-1]
            fresh = self._take_free_block()
            self._unref(old)
            seq.block_table[-1] = fresh
            copies.append((old, fresh))
        seq.block_table.extend(self._take_free_block() for _ in range(grow))
        seq.token_ids.extend(new)
        return Reservation(self.slots(seq_id, n, n + len(new)), copies)

    def _growth(self, seq, n_new):
        """(new blocks, whether the last block must be copied first) for n_new more tokens."""
        n = len(seq.token_ids)
        grow = -(-(n + n_new) // self.block_size) - len(seq.block_table)
        cow = n_new > 0 and n % self.block_size != 0 and self.blocks[seq.block_table[-1]].ref_count > 1
        return grow, cow

    def blocks_needed(self, seq_id, n_new: int) -> int:
        """Free blocks `append`ing n_new tokens to the sequence would take (copy-on-write included)."""
        seq = self._seq(seq_id, "blocks_needed")
        n_new = _count(n_new, "n_new", "blocks_needed")
        if n_new < 0:
            raise OpValueError("BlockManager.blocks_needed", "'n_new' >= 0", repr(n_new))
        grow, cow = self._growth(seq, n_new)
        return grow + int(cow)

    def reserve_prompt(self, seq_id) -> Reservation:
        """Slots of the prompt tokens `allocate` did not find in the cache (what prefill writes)."""
        seq = self._seq(seq_id, "reserve_prompt")
        return Reservation(self.slots(seq_id, seq.num_computed, len(seq.token_ids)))

    def mark_computed(self, seq_id, num_computed: int):
        """Record that the KV of the first `num_computed` tokens is written. Blocks that are now
        full and computed become findable by prefix caching."""
        seq = self._seq(seq_id, "mark_computed")
        num_computed = _count(num_computed, "num_computed", "mark_computed")
        if not seq.num_computed <= num_computed <= len(seq.token_ids):
            raise OpValueError("BlockManager.mark_computed",
                               f"a count in [{seq.num_computed}, {len(seq.token_ids)}]", repr(num_computed))
        bs = self.block_size
        first_new_full = seq.num_computed // bs
        seq.num_computed = num_computed
        if not self.enable_prefix_caching:
            return
        prev = None
        if first_new_full > 0:
            prev = self.blocks[seq.block_table[first_new_full - 1]].hash
            if prev is None:                      # an earlier block was never hashed: recompute the chain
                first_new_full = 0
        for i in range(first_new_full, num_computed // bs):
            chunk = tuple(seq.token_ids[i * bs:(i + 1) * bs])
            prev = chain_hash(prev, chunk)
            blk = self.blocks[seq.block_table[i]]
            if blk.hash is None:
                blk.hash, blk.token_ids = prev, chunk
            # the first block registered under a hash stays the one found (others are duplicates)
            self.hash_to_block.setdefault(prev, blk.block_id)

    def fork(self, parent_id, child_id):
        """A new sequence sharing all of the parent's blocks (parallel sampling, beam search)."""
        parent = self._seq(parent_id, "fork")
        _hashable(child_id, "child_id", "fork")
        if child_id in self.seqs:
            raise OpValueError("BlockManager.fork", "a new child sequence id", f"{child_id!r}, which is allocated")
        for b in parent.block_table:
            self._ref(b)
        self.seqs[child_id] = _Seq(list(parent.block_table), list(parent.token_ids), parent.num_computed)

    def free(self, seq_id):
        """Release a finished (or preempted) sequence's blocks. The tail is released first, so the
        prompt's first blocks are the last to be recycled (they are the most shareable)."""
        seq = self._seq(seq_id, "free")
        for b in reversed(seq.block_table):
            self._unref(b)
        del self.seqs[seq_id]

    # ---------------------------------------------------------------------------------------
    def check(self):
        """Assert the accounting invariants (tests call this after every operation)."""
        refs = [0] * self.num_blocks
        for seq in self.seqs.values():
            assert len(seq.block_table) == -(-len(seq.token_ids) // self.block_size), "table length"
            for b in seq.block_table:
                refs[b] += 1
        for blk in self.blocks:
            assert blk.ref_count >= 0, f"block {blk.block_id}: negative ref count"
            assert blk.ref_count == refs[blk.block_id], f"block {blk.block_id}: ref count {blk.ref_count}, " \
                                                        f"{refs[blk.block_id]} table entries"
            free, used = blk.block_id in self.free_block_ids, blk.block_id in self.used_block_ids
            assert free != used, f"block {blk.block_id}: free={free}, used={used}"
            assert used == (blk.ref_count > 0), f"block {blk.block_id}: used with ref count {blk.ref_count}"
        assert len(self.free_block_ids) + len(self.used_block_ids) == self.num_blocks
        for h, b in self.hash_to_block.items():
            assert self.blocks[b].hash == h, f"hash table entry of block {b} is stale"


__all__ = ["BlockManager", "Block", "Reservation", "OutOfBlocksError", "chain_hash"]
