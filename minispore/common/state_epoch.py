"""The Cell state epoch: a counter of changes to Cells' Python state.

Every change made to a Cell through its API adds one: attribute assignment and deletion,
registering a parameter or sub-cell (attribute, container, `insert_*`), `set_train`, `to_float`,
hooks and flags. The registries a Cell keeps its parameters, sub-cells and hooks in are `Registry`
dicts, which count their own writes, so `cell._cells[k] = other` counts as well.

Who uses it: code that keeps a snapshot of cell state records the epoch with it (lazy_inline's
layer signatures, and jit's guards on them). While the epoch is unchanged, the snapshot is still
true and need not be read again: a 32-layer model's state is then checked in O(1) per call instead
of one walk over its ~500 cells. Writes that bypass the API (`cell.__dict__[k] = v`) are not
counted; nor are changes to plain Python objects a cell holds (those snapshots check them fully).
"""
from __future__ import annotations

from collections import OrderedDict


class _Epoch:
    __slots__ = ("value",)

    def __init__(self):
        self.value = 0


EPOCH = _Epoch()


def touch():
    """Record that some Cell's state changed."""
    EPOCH.value += 1


class Registry(OrderedDict):
    """An OrderedDict whose writes count as Cell state changes (a Cell's `_params`, `_cells`,
    `_params_list` and hook dicts). Reads are plain OrderedDict reads."""

    __slots__ = ()

    def __setitem__(self, key, value):
        EPOCH.value += 1
        OrderedDict.__setitem__(self, key, value)

    def __delitem__(self, key):
        EPOCH.value += 1
        OrderedDict.__delitem__(self, key)

    def pop(self, *args):
        EPOCH.value += 1
        return OrderedDict.pop(self, *args)

    def popitem(self, last=True):
        EPOCH.value += 1
        return OrderedDict.popitem(self, last)

    def clear(self):
        EPOCH.value += 1
        OrderedDict.clear(self)

    def update(self, *args, **kwargs):
        EPOCH.value += 1
        OrderedDict.update(self, *args, **kwargs)

    def setdefault(self, key, default=None):
        EPOCH.value += 1
        return OrderedDict.setdefault(self, key, default)

    def move_to_end(self, key, last=True):
        EPOCH.value += 1
        OrderedDict.move_to_end(self, key, last)

    def __reduce__(self):
        # pickled as a Registry again (OrderedDict's own reduce would do too; kept explicit)
        return (type(self), (list(self.items()),))


__all__ = ["EPOCH", "touch", "Registry"]
