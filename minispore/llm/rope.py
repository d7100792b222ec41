"""Rotary position embeddings (RoPE), half-split convention (GPT-NeoX, HuggingFace LLaMA).

RoPE encodes position by *rotating* query and key vectors: the pair of features (x_i, x_{i+d/2})
at position p is rotated by the angle p * theta^(-2i/d). Rotating both q and k makes their dot
product depend only on the *distance* between the two positions, which is what attention needs.

"Half-split" means the pairs are (feature i, feature i + d/2) — not the adjacent (2i, 2i+1) pairs
of the original paper and Meta's checkpoints ("interleaved"). With cos/sin tables that repeat
their first half (cos[:, i] == cos[:, i + d/2]), the rotation of every pair at once is

    rope(x) = x * cos + rotate_half(x) * sin,      rotate_half([x1, x2]) = [-x2, x1]

This is MindSpore's `rotary_position_embedding(..., mode=0)`.
"""
from __future__ import annotations

import numpy as np

from ..common.errors import OpValueError
from ..common.memory_limit import check_fits
from ..common.tensor import Tensor
from ..ops import functional as F
from .memory_estimate import rope_bytes


def rope_frequencies(head_dim: int, theta: float = 10000.0) -> np.ndarray:
    """The d/2 rotation speeds theta^(-2i/d), i = 0 .. d/2-1, in float64."""
    if not isinstance(head_dim, (int, np.integer)) or isinstance(head_dim, bool) or head_dim <= 0 or head_dim % 2:
        raise OpValueError("rope_frequencies", "a positive even head_dim", repr(head_dim))
    return theta ** (-np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)


def rope_tables(head_dim: int, seq_len: int, theta: float = 10000.0, dtype=np.float32):
    """cos and sin tables of shape (seq_len, head_dim) for positions 0 .. seq_len-1.

    Computed in float64 and rounded once, so position 10,000 is as accurate as position 1. The
    bytes they take are checked first: a config's `max_position_embeddings: 10**9` with a head
    dimension of 128 means terabytes of tables, refused with a message rather than a MemoryError.
    """
    if not isinstance(seq_len, (int, np.integer)) or isinstance(seq_len, bool) or seq_len <= 0:
        raise OpValueError("rope_tables", "'seq_len' as a positive int", repr(seq_len))
    freqs = rope_frequencies(head_dim, theta)
    itemsize = np.dtype(dtype).itemsize
    check_fits(rope_bytes(head_dim, int(seq_len), itemsize), f"RoPE tables for {int(seq_len):,} positions",
               "Lower max_seq_len (max_position_embeddings).")
    angles = np.outer(np.arange(seq_len, dtype=np.float64), freqs)
    angles = np.concatenate([angles, angles], axis=-1)          # half-split: both halves share angles
    return np.cos(angles).astype(dtype, copy=False), np.sin(angles).astype(dtype, copy=False)


def rotate_half(x: Tensor) -> Tensor:
    """[x1, x2] -> [-x2, x1] on the last axis (x1, x2 are its two halves)."""
    half = x.shape[-1] // 2
    x1, x2 = F.split(x, half, axis=-1)
    return F.concat((F.neg(x2), x1), axis=-1)


def apply_rotary_emb(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate `x` (..., seq, [heads,] head_dim) by the angles in `cos`/`sin` (broadcast against x)."""
    return x * cos + rotate_half(x) * sin


__all__ = ["rope_frequencies", "rope_tables", "rotate_half", "apply_rotary_emb"]
