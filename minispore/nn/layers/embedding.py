"""`nn.Embedding`: a lookup table from integer ids to learned vectors.

`Embedding(vocab_size, embedding_size, use_one_hot=False, embedding_table='normal',
dtype=mstype.int32, padding_idx=None)`; the table is the parameter `embedding_table`
(vocab_size, embedding_size). Output shape: ids.shape + (embedding_size,).

As in MindSpore, `padding_idx` only zeroes that row at initialization; the row is still trained.
With `use_one_hot=True` the lookup is a one-hot matrix times the table (the same numbers; a dense
matmul instead of a gather, which some accelerators prefer).
"""
from __future__ import annotations

from ...common import dtype as mstype
from ...common.errors import OpTypeError, OpValueError
from ...common.initializer import initializer
from ...common.tensor import Parameter
from ...ops import functional as F
from .. import _checks
from ..cell import Cell


class Embedding(Cell):
    def __init__(self, vocab_size, embedding_size, use_one_hot=False, embedding_table="normal",
                 dtype=mstype.int32, padding_idx=None):
        super().__init__()
        self.vocab_size = _checks.positive_int("Embedding", "vocab_size", vocab_size)
        self.embedding_size = _checks.positive_int("Embedding", "embedding_size", embedding_size)
        self.use_one_hot = _checks.boolean("Embedding", "use_one_hot", use_one_hot)
        self.dtype = mstype.as_dtype(dtype)
        if self.dtype not in (mstype.int32, mstype.int64):
            raise OpTypeError("Embedding", "dtype int32 or int64 (the dtype of the ids)", str(self.dtype))
        if padding_idx is not None:
            _checks.non_negative_int("Embedding", "padding_idx", padding_idx)
            if padding_idx >= vocab_size:
                raise OpValueError("Embedding", f"padding_idx in [0, {vocab_size})", repr(padding_idx))
        self.padding_idx = padding_idx
        table = initializer(embedding_table, [vocab_size, embedding_size])
        self.embedding_table = Parameter(table, name="embedding_table")
        if padding_idx is not None:
            self.embedding_table._data[padding_idx] = 0

    def construct(self, ids):
        _checks.tensor_input("Embedding", ids, "ids")
        if ids.dtype.kind not in ("int", "uint"):
            raise OpTypeError("Embedding", "integer ids", str(ids.dtype))
        if self.use_one_hot:
            flat = F.reshape(ids, (-1,))
            one_hot = F.one_hot(flat, self.vocab_size, 1.0, 0.0)
            out = F.matmul(F.cast(one_hot, self.embedding_table.dtype), self.embedding_table)
            return F.reshape(out, tuple(ids.shape) + (self.embedding_size,))
        return F.embedding(ids, self.embedding_table)

    def extend_repr(self):
        return (f"vocab_size={self.vocab_size}, embedding_size={self.embedding_size}, "
                f"use_one_hot={self.use_one_hot}, embedding_table={self.embedding_table}, "
                f"dtype={self.dtype}, padding_idx={self.padding_idx}")
