"""Random training windows from a long token stream, resumable bit for bit.

nanoGPT's `get_batch`: pick `batch_size` random offsets `i`, take `x = data[i : i+T]` and
`y = data[i+1 : i+T+1]` (each target is the next token). The sampler owns its random generator, so

* it does not disturb (and is not disturbed by) other random draws such as weight init or dropout;
* its position in the random stream is a small JSON-compatible dict (`state_dict()`) that a
  checkpoint stores; `load_state_dict()` continues exactly where it stopped. Sampling N batches
  straight gives the same batches as N/2, save, restore, N/2.
"""
from __future__ import annotations


import numpy as np

from ..common import context
from ..common.errors import OpTypeError, OpValueError
from ..common.tensor import Tensor
from ..ops._check import int_attr



class BatchSampler:
    """Sample (x, y) batches of `block_size` consecutive tokens from a 1-D id array.

        sampler = BatchSampler(train_ids, batch_size=12, block_size=64, seed=1337)
        x, y = sampler.next_batch()          # two int64 ndarrays of shape (12, 64); y = x shifted by one
        state = sampler.state_dict()         # JSON-compatible
        sampler.load_state_dict(state)       # resume the exact random stream

    `seed=None` draws a seed from minispore's global RNG, so `ms.set_seed` makes it reproducible.
    The sampler is also an endless iterator: `for x, y in sampler: ...`.
    """

    def __init__(self, data, batch_size: int, block_size: int, seed=None):
        op = "BatchSampler"
        if isinstance(data, Tensor):
            data = data.asnumpy()
        if not isinstance(data, np.ndarray):
            raise OpTypeError(op, "'data' to be a 1-D ndarray (or Tensor) of token ids", type(data).__name__)
        if data.ndim != 1 or data.dtype.kind not in "iu":
            raise OpValueError(op, "'data' as a 1-D integer array", f"shape {data.shape}, dtype {data.dtype}")
        self.batch_size = int_attr(op, "batch_size", batch_size, 1)
        self.block_size = int_attr(op, "block_size", block_size, 1)
        if len(data) < self.block_size + 1:
            raise OpValueError(op, f"at least block_size + 1 = {self.block_size + 1} tokens of data",
                               f"{len(data)} tokens")
        if seed is None:
            seed = int(context.rng().integers(0, 2**63 - 1))
        self.seed = int_attr(op, "seed", seed, 0)
        self.data = data
        # Row i of this zero-copy view is data[i : i + block_size + 1]: one window with its targets.
        self._windows = np.lib.stride_tricks.sliding_window_view(data, self.block_size + 1)
        self._rng = np.random.default_rng(self.seed)
        self.batches_drawn = 0

    @property
    def num_windows(self) -> int:
        """How many distinct start offsets there are: len(data) - block_size."""
        return len(self._windows)

    def next_batch(self):
        """(x, y): int64 arrays of shape (batch_size, block_size); y is x shifted left by one token
        (y[b, t] is the token that follows x[b, t] in the data)."""
        starts = self._rng.integers(0, self.num_windows, size=self.batch_size)
        rows = self._windows[starts].astype(np.int64)          # (B, T+1), a fresh copy
        self.batches_drawn += 1
        return np.ascontiguousarray(rows[:, :-1]), np.ascontiguousarray(rows[:, 1:])

    def __iter__(self):
        return self

    def __next__(self):
        return self.next_batch()

    def state_dict(self) -> dict:
        """Everything needed to continue the same random stream (JSON-compatible)."""
        return {"seed": self.seed, "batch_size": self.batch_size, "block_size": self.block_size,
                "data_len": int(len(self.data)), "batches_drawn": self.batches_drawn,
                "bit_generator": self._rng.bit_generator.state}

    def load_state_dict(self, state: dict) -> None:
        """Continue from `state`. It must come from a sampler over the same data length with the same
        batch and block size (anything else would silently change the stream, so it is an error)."""
        op = "BatchSampler.load_state_dict"
        if not isinstance(state, dict):
            raise OpTypeError(op, "a dict from state_dict()", type(state).__name__)
        mine = {"batch_size": self.batch_size, "block_size": self.block_size, "data_len": int(len(self.data))}
        diff = [f"{k}={state.get(k)!r} (this sampler has {v})" for k, v in mine.items() if state.get(k) != v]
        if diff:
            raise OpValueError(op, "a state from a sampler with the same batch_size, block_size and data length",
                               "; ".join(diff))
        batches = state.get("batches_drawn")
        if not isinstance(batches, int) or isinstance(batches, bool) or batches < 0:
            raise OpValueError(op, "'batches_drawn' as an int >= 0", repr(batches))
        rng = np.random.default_rng()
        try:
            rng.bit_generator.state = state.get("bit_generator")     # validate on a scratch generator
        except (TypeError, ValueError, KeyError) as e:
            raise OpValueError(op, "a valid 'bit_generator' state (PCG64)", f"{e}") from None
        seed = int_attr(op, "seed", state.get("seed", self.seed), 0)
        self._rng, self.seed, self.batches_drawn = rng, seed, batches

    def __repr__(self):
        return (f"BatchSampler(tokens={len(self.data)}, batch_size={self.batch_size}, "
                f"block_size={self.block_size}, seed={self.seed})")


__all__ = ["BatchSampler"]
