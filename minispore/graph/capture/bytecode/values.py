"""The values the bytecode interpreter keeps in its locals and on its stack, besides ordinary Python
objects and Tensors (concrete ones, or the trace mode's Tracers while a graph is captured).

* `NULL` is CPython's NULL stack entry (`PUSH_NULL`, `LOAD_GLOBAL` with its low bit set, the
  `(NULL, attr)` pair of a method load); `UNBOUND` stands for a local that has no value.
* `Lazy` is a Python number or NumPy array that an eager step produced (`v = loss.item()`,
  `a = t.asnumpy()`), carried into the next captured segment *without* being baked into it.
  Moving it around (locals, the stack, tuples, `return`) does not look at it, so
  `print(t.item())` or `return t.item()` do not recompile for every new value. When the bytecode
  does look at it (arithmetic, a branch, passing it to a call), a number is specialised on - the
  segment bakes it in and guards its value - and an array makes that instruction a graph break
  (NumPy work on run-time data runs eagerly).
* `SeqIter` is the iterator over a sequence (tuple, list, range, a tensor's rows...) that
  `GET_ITER` makes: its position is plain data (`seq`, `index`), so a loop that is interrupted by a
  graph break can be resumed from a snapshot of the frame. CPython's own iterator objects hide
  their position (and any tensors they hold) from us.
"""
from __future__ import annotations


class _Marker:
    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return self.name

    def __reduce__(self):
        return self.name


NULL = _Marker("NULL")
UNBOUND = _Marker("UNBOUND")


class Lazy:
    """A Python number known at run time, not guarded until used (see the module docstring).

    `slot` is its index among the input leaves of the segment being captured; `value` is the
    number (a real one: continuations are captured just before they run)."""

    __slots__ = ("value", "slot")

    def __init__(self, value, slot):
        self.value, self.slot = value, slot

    def __repr__(self):
        return f"Lazy({self.value!r}, slot={self.slot})"


class SeqIter:
    """An iterator over `seq[index:]` whose position is visible (see the module docstring).

    Over a list it keeps the list itself, so it sees appends made during the loop, exactly like
    CPython's list iterator."""

    __slots__ = ("seq", "index")

    def __init__(self, seq, index=0):
        self.seq, self.index = seq, index

    def __iter__(self):
        return self

    def __next__(self):
        i = self.index
        if i < len(self.seq):
            self.index = i + 1
            return self.seq[i]
        raise StopIteration

    def __length_hint__(self):
        return max(len(self.seq) - self.index, 0)

    def __repr__(self):
        return f"SeqIter({type(self.seq).__name__} of {len(self.seq)}, at {self.index})"


__all__ = ["NULL", "UNBOUND", "Lazy", "SeqIter"]
