"""The Python state of a cell tree, as one hashable signature (used by lazy_inline and jit guards).

`describe(cell)` walks a cell and its sub-cells once (guards/walk.py: the one walk of a Cell tree,
whose module docstring says what the signature holds) and returns a `LayerState`:

* `own`: [(relative name, Tensor)] the tree owns, depth first;
* `structure`: the walk's signature (None when a cell has hooks or a custom `bprop`);
* `epoch`: the Cell state epoch when it was read (common/state_epoch.py);
* `untracked`: True when part of the state can change without moving the epoch (a plain Python
  object held by a cell, a scalar class attribute of a user class).

lazy_inline needs the signature of every layer when it is called during a capture (two layers with
equal signatures share one subgraph), and jit's state guard needs the same facts before the
capture (a guard is a snapshot of the state a graph was traced with). Both ask `describe`, which
remembers the answer per cell while the epoch does not move: one walk per layer per compile.

`LayerStateCheck` is that snapshot as a guard: while the epoch is unchanged (and nothing in the
tree is untracked) it passes in O(1); otherwise it describes the tree again and compares, and names
the first difference ("layers.3.attention.attn_dropout.training changed: True -> False").
"""
from __future__ import annotations

import itertools

from ...common.state_epoch import EPOCH
from .walk import class_scalar_names, first_difference, walk


class LayerState:
    """`token` stands for `structure` in keys: equal structures get the same small int (hashing a
    ~45-element tuple again at every dictionary lookup would cost more than the lookup)."""

    __slots__ = ("cell", "own", "structure", "epoch", "untracked", "token")

    def __init__(self, cell, own, structure, epoch, untracked):
        self.cell, self.own, self.structure, self.epoch, self.untracked = cell, own, structure, epoch, untracked
        self.token = None if structure is None else _token_of(structure)

    def own_ids(self):
        return tuple([id(t) for _, t in self.own])


_TOKENS: dict = {}      # structure -> its token
_NEXT_TOKEN = itertools.count(1)        # never reused: a token always means one structure


def _token_of(structure):
    token = _TOKENS.get(structure)
    if token is None:
        if len(_TOKENS) > 4096:             # (a long-lived process: keep it bounded)
            _TOKENS.clear()
        token = _TOKENS[structure] = next(_NEXT_TOKEN)
    return token


_memo: dict = {}        # id(cell) -> LayerState, valid while the epoch has not moved


def describe(cell) -> LayerState:
    """The LayerState of `cell` now (remembered while the Cell state epoch does not move)."""
    e = EPOCH.value
    hit = _memo.get(id(cell))
    if hit is not None and hit.epoch == e and hit.cell is cell and not hit.untracked:
        return hit
    own, structure, untracked = walk(cell)
    state = _memo[id(cell)] = LayerState(cell, own, structure, e, untracked)
    return state


def forget():
    """Drop the remembered states (end of a compile: they hold the cells alive)."""
    _memo.clear()


# -- as a guard -----------------------------------------------------------------------------------------
class LayerStateCheck:
    """A jit guard on one cell tree: its structure and the identity of the tensors it owns."""

    __slots__ = ("label", "cell", "structure", "ids", "epoch", "untracked")

    def __init__(self, label, state: LayerState):
        self.label, self.cell = label, state.cell
        self.structure, self.ids = state.structure, state.own_ids()
        self.epoch, self.untracked = state.epoch, state.untracked

    def failed(self):
        e = EPOCH.value
        if e == self.epoch and not self.untracked:
            return False                       # no Cell changed since the snapshot: O(1)
        now = describe(self.cell)
        if now.structure != self.structure or now.own_ids() != self.ids:
            return True
        self.epoch = e                         # unchanged after all: O(1) again until the next change
        return False

    def explain(self, _index=None):
        """The first difference, as a sentence; None when the tree is as in the snapshot."""
        if not self.failed():
            return None
        now = describe(self.cell)
        where = self.label
        if now.structure != self.structure:
            return first_difference(where, self.cell, self.structure, now.structure)
        for i, (name, t) in enumerate(now.own):
            if i >= len(self.ids) or id(t) != self.ids[i]:
                return f"{where}.{name} was replaced by another object"
        return f"{where}: the tensors it owns changed"


__all__ = ["LayerState", "LayerStateCheck", "describe", "forget", "class_scalar_names"]
