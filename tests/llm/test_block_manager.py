"""The paged-KV block manager: exact accounting, prefix caching, copy-on-write, all-or-nothing errors.

The property test drives random allocate / append / fork / free sequences against a *shadow KV
store*: every slot holds the token id last written there, so "the KV a sequence reads through its
block table" is checkable — it must always be the sequence's own tokens, whoever shares its blocks.
"""
import numpy as np
import pytest
from hypothesis import HealthCheck, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from minispore.common.errors import OpTypeError, OpValueError
from minispore.llm.block_manager import BlockManager, OutOfBlocksError, chain_hash


def write_computed(bm, store, seq_id, start, copies=()):
    """What the model does after a reservation: copy-on-write copies, then the new tokens' KV."""
    bs = bm.block_size
    for src, dst in copies:
        store[dst * bs:(dst + 1) * bs] = store[src * bs:(src + 1) * bs]
    n = bm.num_tokens(seq_id)
    store[bm.slots(seq_id, start, n)] = bm.token_ids(seq_id)[start:]
    bm.mark_computed(seq_id, n)


def read_back(bm, store, seq_id):
    return store[bm.slots(seq_id, 0, bm.num_computed(seq_id))].tolist()


def snapshot(bm):
    """Everything a caller can observe: blocks, free-list order, the prefix-cache index, every
    sequence (table, tokens, computed count, with the count's exact type) and the statistics."""
    return ([(b.ref_count, b.hash, b.token_ids) for b in bm.blocks], list(bm.free_block_ids),
            sorted(bm.used_block_ids), dict(bm.hash_to_block),
            {k: (list(v.block_table), list(v.token_ids), v.num_computed, type(v.num_computed))
             for k, v in bm.seqs.items()},
            (bm.prefix_queries, bm.prefix_hits))


# Calls every public method must reject, as (name, call(bm, an allocated seq id, a fresh id)).
# Each is wrong in type or range: a float count, a bool, a token id that does not fit int64, a
# negative token, a float or string prompt, an unhashable id, an out-of-range count.
INVALID_CALLS = [
    ("mark_computed float", lambda bm, s, new: bm.mark_computed(s, float(bm.num_tokens(s)))),
    ("mark_computed bool", lambda bm, s, new: bm.mark_computed(s, True)),
    ("mark_computed past the end", lambda bm, s, new: bm.mark_computed(s, bm.num_tokens(s) + 1)),
    ("mark_computed backwards", lambda bm, s, new: bm.mark_computed(s, -1)),
    ("append float tokens", lambda bm, s, new: bm.append(s, [1.5])),
    ("append huge token", lambda bm, s, new: bm.append(s, [1, 2 ** 63])),
    ("append negative token", lambda bm, s, new: bm.append(s, [0, -1])),
    ("append a string", lambda bm, s, new: bm.append(s, "12")),
    ("append ragged", lambda bm, s, new: bm.append(s, [[1], [1, 2]])),
    ("append 2-d", lambda bm, s, new: bm.append(s, np.zeros((2, 2), np.int64))),
    ("append bools", lambda bm, s, new: bm.append(s, np.array([True]))),
    ("allocate uint64 overflow", lambda bm, s, new: bm.allocate(new, np.array([2 ** 64 - 1], np.uint64))),
    ("allocate float prompt", lambda bm, s, new: bm.allocate(new, np.array([1.0, 2.0]))),
    ("allocate None token", lambda bm, s, new: bm.allocate(new, [1, None])),
    ("allocate unhashable id", lambda bm, s, new: bm.allocate([new], [1])),
    ("allocate existing id", lambda bm, s, new: bm.allocate(s, [1])),
    ("can_allocate huge token", lambda bm, s, new: bm.can_allocate([2 ** 70])),
    ("fork unhashable child", lambda bm, s, new: bm.fork(s, {new})),
    ("fork onto itself", lambda bm, s, new: bm.fork(s, s)),
    ("free unknown", lambda bm, s, new: bm.free(new)),
    ("free unhashable", lambda bm, s, new: bm.free([s])),
    ("slots float", lambda bm, s, new: bm.slots(s, 0.0, 1)),
    ("slots reversed", lambda bm, s, new: bm.slots(s, 1, 0)),
    ("blocks_needed negative", lambda bm, s, new: bm.blocks_needed(s, -1)),
    ("blocks_needed float", lambda bm, s, new: bm.blocks_needed(s, 1.0)),
]


class BlockManagerMachine(RuleBasedStateMachine):
    @initialize(num_blocks=st.integers(1, 12), block_size=st.integers(1, 4), caching=st.booleans())
    def setup(self, num_blocks, block_size, caching):
        self.bm = BlockManager(num_blocks, block_size, enable_prefix_caching=caching)
        self.store = np.full(num_blocks * block_size, -1, dtype=np.int64)
        self.next_id = 0

    def new_id(self):
        self.next_id += 1
        return self.next_id

    # a 2-letter alphabet and short prompts make shared prefixes (cache hits) frequent
    @rule(prompt=st.lists(st.integers(0, 1), min_size=1, max_size=10))
    def allocate(self, prompt):
        sid = self.new_id()
        before = snapshot(self.bm)
        if not self.bm.can_allocate(prompt):
            with pytest.raises(OutOfBlocksError, match="BlockManager.allocate"):
                self.bm.allocate(sid, prompt)
            assert snapshot(self.bm) == before                       # nothing changed
            return
        cached = self.bm.allocate(sid, prompt)
        bs = self.bm.block_size
        assert cached % bs == 0 and cached < len(prompt)
        # prefix-cache hits hand back blocks that hold exactly the request's tokens
        assert read_back(self.bm, self.store, sid) == prompt[:cached]
        for i, b in enumerate(self.bm.block_table(sid)[:cached // bs]):
            assert self.bm.blocks[b].token_ids == tuple(prompt[i * bs:(i + 1) * bs])
        write_computed(self.bm, self.store, sid, cached)

    @precondition(lambda self: self.bm.seqs)
    @rule(data=st.data(), tokens=st.lists(st.integers(0, 1), min_size=1, max_size=3))
    def append(self, data, tokens):
        sid = data.draw(st.sampled_from(sorted(self.bm.seqs)))
        others = {s: read_back(self.bm, self.store, s) for s in self.bm.seqs if s != sid}
        before = snapshot(self.bm)
        start = self.bm.num_tokens(sid)
        need, free = self.bm.blocks_needed(sid, len(tokens)), self.bm.num_free_blocks
        try:
            res = self.bm.append(sid, tokens)
        except OutOfBlocksError:
            assert need > free and snapshot(self.bm) == before
            return
        assert len(res.slots) == len(tokens) and free - self.bm.num_free_blocks == need
        write_computed(self.bm, self.store, sid, start, res.copies)
        # copy-on-write: the sequences that shared a block still read their own tokens
        for s, toks in others.items():
            assert read_back(self.bm, self.store, s) == toks

    @precondition(lambda self: self.bm.seqs)
    @rule(data=st.data())
    def fork(self, data):
        parent = data.draw(st.sampled_from(sorted(self.bm.seqs)))
        child = self.new_id()
        self.bm.fork(parent, child)
        assert self.bm.block_table(child) == self.bm.block_table(parent)

    @precondition(lambda self: self.bm.seqs)
    @rule(data=st.data())
    def free(self, data):
        self.bm.free(data.draw(st.sampled_from(sorted(self.bm.seqs))))

    @precondition(lambda self: self.bm.seqs)
    @rule(data=st.data(), bad=st.sampled_from(INVALID_CALLS))
    def invalid_call(self, data, bad):
        """A rejected call raises a minispore error naming the method and changes nothing."""
        sid = data.draw(st.sampled_from(sorted(self.bm.seqs)))
        before = snapshot(self.bm)
        name, call = bad
        with pytest.raises((OpValueError, OpTypeError), match="BlockManager"):
            call(self.bm, sid, self.new_id())
        assert snapshot(self.bm) == before, name

    @rule()
    def free_everything(self):
        for s in list(self.bm.seqs):
            self.bm.free(s)
        # back to the initial accounting: every block free, no references
        assert self.bm.num_free_blocks == self.bm.num_blocks and not self.bm.used_block_ids
        assert all(b.ref_count == 0 for b in self.bm.blocks)

    @invariant()
    def accounting_is_exact(self):
        self.bm.check()      # free xor used; ref count == number of table entries; never negative

    @invariant()
    def every_sequence_reads_its_own_tokens(self):
        for s in self.bm.seqs:
            assert read_back(self.bm, self.store, s) == self.bm.token_ids(s)[:self.bm.num_computed(s)]


BlockManagerMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=40, deadline=None,
                                                 suppress_health_check=[HealthCheck.too_slow])
test_block_manager_properties = BlockManagerMachine.TestCase


# ------------------------------------------------------------------------------------------------
def test_a_shared_prompt_prefix_is_computed_once():
    bm = BlockManager(num_blocks=16, block_size=4)
    system = list(range(100, 112))                                 # 3 full blocks
    assert bm.allocate("a", system + [1, 2]) == 0
    bm.mark_computed("a", 14)
    # same 12-token prefix: 3 blocks found, shared (ref 2), only the tail is new
    assert bm.allocate("b", system + [7, 8, 9]) == 12
    assert bm.block_table("b")[:3] == bm.block_table("a")[:3]
    assert [bm.blocks[b].ref_count for b in bm.block_table("a")] == [2, 2, 2, 1]
    # the block holding the last prompt token is always recomputed (its logits are needed)
    assert bm.allocate("c", system) == 8
    # a different first block breaks the chain, even though later blocks repeat
    assert bm.allocate("d", [0] * 4 + system[4:] + [1]) == 0
    assert bm.prefix_hits == 20 and bm.prefix_queries == 14 + 15 + 12 + 13
    bm.check()


def test_freed_blocks_keep_their_hash_until_reused():
    bm = BlockManager(num_blocks=3, block_size=2)
    bm.allocate("a", [5, 6, 7, 8, 9])
    bm.mark_computed("a", 5)
    bm.free("a")
    assert bm.num_free_blocks == 3
    # revived from the free list: the first two blocks come back with their KV
    assert bm.allocate("b", [5, 6, 7, 8, 1]) == 4
    bm.free("b")
    # other tokens take the blocks over; the stale hashes are dropped
    bm.allocate("c", [1, 1, 2, 2, 3])
    bm.mark_computed("c", 5)
    bm.free("c")
    assert bm.allocate("d", [5, 6, 7, 8, 9]) == 0
    bm.check()


def test_copy_on_write_after_fork():
    bm = BlockManager(num_blocks=4, block_size=4)
    bm.allocate("p", [1, 2, 3, 4, 5, 6])
    bm.mark_computed("p", 6)
    bm.fork("p", "c")
    shared = bm.block_table("p")
    assert [bm.blocks[b].ref_count for b in shared] == [2, 2]
    res = bm.append("c", [9])                                      # writes into the shared partial block
    assert len(res.copies) == 1 and res.copies[0][0] == shared[1]
    assert bm.block_table("c")[0] == shared[0] and bm.block_table("c")[1] != shared[1]
    assert bm.blocks[shared[1]].ref_count == 1
    assert bm.append("p", [8]).copies == []                        # the parent is the only owner now
    bm.check()


def test_out_of_blocks_changes_nothing_and_says_how_many():
    bm = BlockManager(num_blocks=2, block_size=4)
    bm.allocate("a", [1] * 5)
    before = snapshot(bm)
    with pytest.raises(OutOfBlocksError, match=r"needs 1 free block\(s\) but has 0 \(of 2\)"):
        bm.allocate("b", [2])
    with pytest.raises(OutOfBlocksError, match="BlockManager.append"):
        bm.append("a", [1] * 4)
    assert snapshot(bm) == before


def test_chain_hash_depends_on_the_whole_prefix():
    h1 = chain_hash(None, [1, 2])
    assert chain_hash(None, [1, 2]) == h1 and chain_hash(None, [2, 1]) != h1
    assert chain_hash(h1, [3, 4]) != chain_hash(chain_hash(None, [0, 0]), [3, 4])


@pytest.mark.parametrize("call, match", [
    (lambda bm: bm.allocate("a", []), "non-empty"),
    (lambda bm: bm.allocate("x", [1]), "new sequence id"),
    (lambda bm: bm.append("nope", [1]), "sequence id"),
    (lambda bm: bm.free("nope"), "BlockManager.free"),
    (lambda bm: bm.fork("x", "x"), "new child"),
    (lambda bm: bm.mark_computed("x", 9), "mark_computed"),
    (lambda bm: BlockManager(0, 4), "num_blocks"),
    (lambda bm: BlockManager(4, 2.5), "block_size"),
])
def test_bad_input(call, match):
    bm = BlockManager(4, 4)
    bm.allocate("x", [1, 2])
    with pytest.raises(OpValueError, match=match):
        call(bm)


def test_mark_computed_rejects_a_float_count_and_changes_nothing():
    """The issue's example: 3.0 used to be stored as num_computed before the hash loop failed."""
    bm = BlockManager(4, 2)
    bm.allocate("s", [1, 2, 3, 4])
    bm.mark_computed("s", 2)
    before = snapshot(bm)
    with pytest.raises(OpTypeError, match="BlockManager.mark_computed.*'num_computed' as an int.*3.0"):
        bm.mark_computed("s", 3.0)
    assert snapshot(bm) == before and bm.num_computed("s") == 2 and type(bm.num_computed("s")) is int
    bm.mark_computed("s", np.int64(4))                   # NumPy integers are ints
    assert bm.num_computed("s") == 4 and type(bm.num_computed("s")) is int
    bm.check()


@pytest.mark.parametrize("name, call", INVALID_CALLS, ids=[n for n, _ in INVALID_CALLS])
def test_every_rejected_call_leaves_the_state_unchanged(name, call):
    bm = BlockManager(6, 2)
    bm.allocate("a", [1, 2, 3])
    bm.mark_computed("a", 3)
    bm.fork("a", "b")                                     # shared blocks: copy-on-write would be needed
    bm.allocate("c", [1, 2, 9])                           # a prefix-cache hit
    before = snapshot(bm)
    with pytest.raises((OpValueError, OpTypeError), match="For 'BlockManager"):
        call(bm, "b", "fresh")
    assert snapshot(bm) == before
    bm.check()


def test_token_ids_that_fit_int64_are_accepted_from_any_integer_dtype():
    bm = BlockManager(8, 4)
    big = 2 ** 63 - 1
    assert bm.allocate("a", np.array([1, big], dtype=np.uint64)) == 0
    bm.append("a", np.array([7], dtype=np.int32))
    bm.append("a", np.int16(3))                           # a 0-d token
    bm.append("a", [])                                    # nothing to add is fine
    assert bm.token_ids("a") == [1, big, 7, 3] and all(type(t) is int for t in bm.token_ids("a"))
    bm.mark_computed("a", 4)
    assert bm.allocate("b", [1, big, 7, 3, 5]) == 4       # hashed as int64: the prefix is found
