"""Placement heuristics: give each buffer an offset so that buffers alive at the same time never
share a byte, keeping the arena (max offset + size) small.

Every heuristic is the same loop with a different *order* and *fit*:

    for each buffer, in the heuristic's order:
        look at the already-placed buffers whose lifetimes intersect this one's;
        their address ranges, sorted by offset, leave gaps between them;
        put the buffer in a gap it fits in (best fit: the smallest such gap; first fit: the
        lowest one), or above all of them if none fits.

Orders (the names the planner reports):

* `greedy_by_size`      size, largest first (ties: longer lifetime first); best fit. TFLite's
                        "greedy by size, offset calculation" and XLA's spatial ordering.
* `greedy_by_breadth`   TFLite's "greedy by breadth": visit steps from the one with the most live
                        bytes down; at each, place its not-yet-placed buffers, largest first; best
                        fit. Buffers at the busiest step are packed first, where it matters.
* `by_size`             size, largest first; first fit (lowest offset, SOMAS's "smallest").
* `by_size_x_lifetime`  size x lifetime, largest first; best fit (XLA's temporal ordering).
* `in_order`            by start step; first fit: what a first-fit allocator at run time would do.

The placement loop is vectorised with NumPy over the placed buffers (one mask, one sort and one
cumulative maximum per buffer), so thousands of buffers take well under a second.
"""
from __future__ import annotations

import numpy as np

from ...common.errors import OpValueError

HEURISTICS = ("greedy_by_size", "greedy_by_breadth", "by_size", "by_size_x_lifetime", "in_order")


def live_bytes(size, start, end, n_steps):
    """Bytes live at each step 0..n_steps-1 (a difference array over the intervals)."""
    d = np.zeros(n_steps + 1, dtype=np.int64)
    np.add.at(d, start, size)
    np.add.at(d, end + 1, -size)
    return np.cumsum(d[:-1])


def _order(name, size, start, end):
    n = len(size)
    idx = np.arange(n)
    life = end - start + 1
    if name == "greedy_by_size":
        return np.lexsort((idx, start, -life, -size))
    if name == "by_size":
        return np.lexsort((idx, start, -size))
    if name == "by_size_x_lifetime":
        return np.lexsort((idx, -size, -(size * life)))
    if name == "in_order":
        return np.lexsort((idx, -size, start))
    if name == "greedy_by_breadth":
        n_steps = int(end.max()) + 1 if n else 0
        breadth = live_bytes(size, start, end, n_steps)
        # rank of each step when visited from the widest down; a buffer is first met at the
        # best-ranked step inside its interval (a range minimum, via a sparse table)
        rank = np.empty(n_steps, dtype=np.int64)
        rank[np.lexsort((np.arange(n_steps), -breadth))] = np.arange(n_steps)
        first = _range_min(rank, start, end)
        return np.lexsort((idx, -size, first))
    raise OpValueError("memory.place", f"a heuristic among {list(HEURISTICS)}", repr(name))


def _range_min(a, lo, hi):
    """min(a[lo[i]:hi[i]+1]) for every i (sparse table, O(n log n))."""
    table = [a]
    k = 1
    while (1 << k) <= len(a):
        prev = table[-1]
        half = 1 << (k - 1)
        table.append(np.minimum(prev[:-half], prev[half:]))
        k += 1
    length = hi - lo + 1
    j = np.floor(np.log2(np.maximum(length, 1))).astype(np.int64)
    out = np.empty(len(lo), dtype=np.int64)
    for level in np.unique(j):
        m = j == level
        t = table[level]
        out[m] = np.minimum(t[lo[m]], t[hi[m] - (1 << level) + 1])
    return out


def place(name, size, start, end):
    """Offsets (an int64 array) for the buffers `size/start/end` (int64 arrays) by heuristic `name`."""
    size = np.asarray(size, dtype=np.int64)
    start = np.asarray(start, dtype=np.int64)
    end = np.asarray(end, dtype=np.int64)
    n = len(size)
    offsets = np.zeros(n, dtype=np.int64)
    if n == 0:
        return offsets
    best_fit = name != "by_size" and name != "in_order"
    p_start = np.empty(n, dtype=np.int64)
    p_end = np.empty(n, dtype=np.int64)
    p_off = np.empty(n, dtype=np.int64)
    p_top = np.empty(n, dtype=np.int64)
    k = 0
    for i in _order(name, size, start, end):
        sz = size[i]
        if sz == 0:
            continue                          # takes no bytes: offset 0, conflicts with nothing
        s, e = start[i], end[i]
        off = 0
        if k:
            m = (p_start[:k] <= e) & (p_end[:k] >= s)
            if m.any():
                o = p_off[:k][m]
                t = p_top[:k][m]
                srt = np.argsort(o, kind="stable")
                o, t = o[srt], t[srt]
                reach = np.maximum.accumulate(t)
                gap_start = np.empty_like(o)
                gap_start[0] = 0
                gap_start[1:] = reach[:-1]
                gap = o - gap_start
                fits = np.flatnonzero(gap >= sz)
                if len(fits) == 0:
                    off = reach[-1]
                elif best_fit:
                    off = gap_start[fits[np.argmin(gap[fits])]]
                else:
                    off = gap_start[fits[0]]
        offsets[i] = off
        p_start[k], p_end[k], p_off[k], p_top[k] = s, e, off, off + sz
        k += 1
    return offsets


__all__ = ["HEURISTICS", "place", "live_bytes"]
