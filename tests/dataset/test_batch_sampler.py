"""BatchSampler: nanoGPT's random windows, checked against the data itself, and a random stream
that resumes bit for bit from its state_dict."""
import json

import numpy as np
import pytest

import minispore as ms
from minispore.common import context
from minispore.common.errors import OpTypeError, OpValueError
from minispore.dataset import BatchSampler

N, T, B = 200, 16, 8
DATA = np.arange(N, dtype=np.int64)          # token id == position, so a window reveals its offset


def test_windows_are_slices_of_the_data_and_targets_are_shifted_by_one():
    s = BatchSampler(DATA, batch_size=B, block_size=T, seed=0)
    for _ in range(20):
        x, y = s.next_batch()
        assert x.shape == y.shape == (B, T) and x.dtype == y.dtype == np.int64
        assert x.flags.c_contiguous and y.flags.c_contiguous
        for row_x, row_y in zip(x, y):
            off = row_x[0]
            np.testing.assert_array_equal(row_x, DATA[off:off + T])
            np.testing.assert_array_equal(row_y, DATA[off + 1:off + T + 1])


def test_every_offset_and_only_valid_offsets_are_drawn():
    data = np.arange(30, dtype=np.int32)
    s = BatchSampler(data, batch_size=64, block_size=5, seed=1)
    assert s.num_windows == 25
    starts = {int(x[0]) for _ in range(50) for x in s.next_batch()[0]}
    assert starts == set(range(25))          # nanoGPT: randint(len(data) - block_size)


def test_n_batches_straight_equal_half_then_restore_then_half():
    straight = BatchSampler(DATA, B, T, seed=7)
    expected = [straight.next_batch() for _ in range(10)]

    first = BatchSampler(DATA, B, T, seed=7)
    got = [first.next_batch() for _ in range(5)]
    state = json.loads(json.dumps(first.state_dict()))       # what a checkpoint stores
    assert state["batches_drawn"] == 5
    first.next_batch()                                       # the old sampler moves on; irrelevant
    resumed = BatchSampler(DATA, B, T, seed=12345)
    resumed.load_state_dict(state)
    got += [resumed.next_batch() for _ in range(5)]
    for (ex, ey), (gx, gy) in zip(expected, got):
        assert ex.tobytes() == gx.tobytes() and ey.tobytes() == gy.tobytes()
    assert resumed.batches_drawn == 10 and resumed.seed == 7


def test_seeding_and_independence_from_the_global_rng():
    a = BatchSampler(DATA, B, T, seed=3)
    b = BatchSampler(DATA, B, T, seed=3)
    for _ in range(3):
        context.rng().standard_normal(100)                   # other random draws do not interfere
        np.testing.assert_array_equal(a.next_batch()[0], b.next_batch()[0])
    ms.set_seed(11)
    c = BatchSampler(DATA, B, T)
    ms.set_seed(11)
    d = BatchSampler(DATA, B, T)
    assert c.seed == d.seed
    np.testing.assert_array_equal(next(c)[0], next(iter(d))[0])   # also an iterator


def test_load_state_dict_rejects_states_that_would_change_the_stream():
    s = BatchSampler(DATA, B, T, seed=0)
    state = s.state_dict()
    before = s.state_dict()
    other = BatchSampler(DATA[:150], B, T + 1, seed=0)
    with pytest.raises(OpValueError) as info:
        other.load_state_dict(state)
    assert "block_size=16 (this sampler has 17)" in str(info.value) and "data_len=200" in str(info.value)
    for bad in ({**state, "bit_generator": {"bit_generator": "PCG64", "state": "nonsense"}},
                {**state, "batches_drawn": -1}, {**state, "seed": "x"}, "not a dict"):
        with pytest.raises((OpValueError, OpTypeError)):
            s.load_state_dict(bad)
    assert s.state_dict() == before                          # failed loads change nothing


def test_bad_arguments():
    for data, kwargs in [(DATA.reshape(20, 10), {}), (DATA.astype(np.float32), {}), (DATA[:16], {}),
                         ([1, 2, 3], {}), (DATA, {"batch_size": 0}), (DATA, {"block_size": True}),
                         (DATA, {"seed": -1})]:
        args = {"batch_size": B, "block_size": T, "seed": 0, **kwargs}
        with pytest.raises((OpValueError, OpTypeError)) as info:
            BatchSampler(data, **args)
        assert "BatchSampler" in str(info.value)
    s = BatchSampler(ms.Tensor(DATA), B, T, seed=0)          # a Tensor works as data
    assert "tokens=200" in repr(s)
