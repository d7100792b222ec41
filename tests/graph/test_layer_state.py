"""layer_state.describe (one signature of a cell tree's Python state) and the Cell state epoch.

Oracles: hand-built cell trees whose differences are known (a flag, a rate, a tuple attribute, a
per-layer function, a replaced Parameter), and the epoch counter itself.
"""
import pickle

import numpy as np
import pytest

import minispore as ms
from minispore import nn
from minispore.common.state_epoch import EPOCH, Registry
from minispore.graph.guards.layer_state import LayerStateCheck, describe, forget


def gelu(x):
    return x


def relu(x):
    return x


class Block(nn.Cell):
    def __init__(self, rate=0.1, kernel=(3, 3), fn=gelu, config=None):
        super().__init__()
        self.dense = nn.Dense(4, 4)
        self.drop = nn.Dropout(p=rate)
        self.kernel = kernel
        self.fn = fn
        if config is not None:
            self.config = config

    def construct(self, x):
        return self.drop(self.fn(self.dense(x)))


class Config:
    def __init__(self):
        self.flag = True


@pytest.fixture(autouse=True)
def _fresh():
    forget()
    yield
    forget()


def test_identical_trees_have_equal_structures_and_distinct_own_tensors():
    a, b = Block(), Block()
    sa, sb = describe(a), describe(b)
    assert sa.structure == sb.structure
    assert [n for n, _ in sa.own] == ["dense.weight", "dense.bias"]
    assert sa.own_ids() != sb.own_ids()
    assert not sa.untracked


@pytest.mark.parametrize("change", [
    lambda b: b.set_train(True),
    lambda b: setattr(b.drop, "p", 0.5),
    lambda b: setattr(b, "kernel", (5, 5)),      # tuples compare by value
    lambda b: setattr(b, "fn", relu),            # functions by identity
    lambda b: b.dense.add_flags(fused=True),
])
def test_a_difference_that_changes_the_trace_changes_the_structure(change):
    a, b = Block(), Block()
    change(b)
    assert describe(a).structure != describe(b).structure


def test_equal_tuples_and_shared_functions_still_compare_equal():
    assert describe(Block(kernel=(3, 3), fn=relu)).structure == describe(Block(kernel=(3, 3), fn=relu)).structure


def test_memo_holds_while_the_epoch_does_not_move():
    b = Block()
    s1 = describe(b)
    assert describe(b) is s1
    b.set_train(True)
    s2 = describe(b)
    assert s2 is not s1 and s2.structure != s1.structure


def test_plain_objects_make_a_tree_untracked_and_are_never_served_from_memo():
    cfg = Config()
    b = Block(config=cfg)
    s1 = describe(b)
    assert s1.untracked
    assert describe(b) is not s1          # re-read every time: the object may change unseen
    assert describe(Block(config=cfg)).structure == s1.structure     # a shared object: equal
    assert describe(Block(config=Config())).structure != s1.structure


def test_hooks_make_the_structure_none():
    b = Block()
    b.dense.register_forward_hook(lambda cell, inputs, out: None)
    assert describe(b).structure is None


def test_check_passes_in_o1_and_names_the_changed_attribute():
    net = nn.SequentialCell([Block() for _ in range(4)])
    check = LayerStateCheck("net", describe(net))
    assert not check.failed()
    net[3].drop.set_train(True)
    assert check.failed()
    assert check.explain() == "net.3.drop.training changed: False -> True"
    net[3].drop.set_train(False)
    assert not check.failed()            # back to the snapshot: passes again (and re-arms)
    assert check.epoch == EPOCH.value


def test_check_reports_a_replaced_parameter_and_a_changed_tuple():
    net = nn.SequentialCell([Block() for _ in range(2)])
    check = LayerStateCheck("net", describe(net))
    net[1].dense.weight = ms.Parameter(ms.Tensor(np.zeros((4, 4), np.float32)), name="w")
    assert check.failed()
    assert check.explain() == "net.1.dense.weight was replaced by another object"
    net2 = nn.SequentialCell([Block() for _ in range(2)])
    check2 = LayerStateCheck("net2", describe(net2))
    net2[0].kernel = (1, 1)
    assert check2.failed()
    assert check2.explain() == "net2.0.kernel changed or was replaced by another object"


def test_untracked_checks_look_at_the_object_every_time():
    cfg = Config()
    b = Block(config=cfg)
    check = LayerStateCheck("b", describe(b))
    assert not check.failed()
    cfg.flag = False                     # the epoch does not move, but identity is all that is guarded
    assert not check.failed()
    b.__dict__["config"] = Config()      # bypasses the Cell API: still seen (untracked is re-read)
    assert check.failed()


# -- the epoch ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("mutate", [
    lambda c: setattr(c, "x", 1),
    lambda c: c.set_train(True),
    lambda c: c.to_float(ms.float16),
    lambda c: c.register_forward_hook(lambda *a: None),
    lambda c: c.insert_child_to_cell("extra", nn.ReLU()),
    lambda c: c._cells.pop("drop"),
    lambda c: c._params.clear(),
    lambda c: c.add_flags(a=1),
])
def test_every_cell_api_write_moves_the_epoch(mutate):
    b = Block()
    before = EPOCH.value
    mutate(b)
    assert EPOCH.value > before


def test_registries_survive_pickling():
    r = Registry(a=1)
    r2 = pickle.loads(pickle.dumps(r))
    assert type(r2) is Registry and dict(r2) == {"a": 1}
    assert type(Block()._params) is Registry


def test_tokens_stand_for_structures_and_are_never_reused(monkeypatch):
    from minispore.graph.guards import layer_state
    a, b, c = Block(), Block(), Block(rate=0.5)
    ta, tb, tc = describe(a).token, describe(b).token, describe(c).token
    assert ta == tb != tc
    monkeypatch.setattr(layer_state, "_TOKENS", {})          # as if the table had been cleared
    forget()
    assert describe(c).token not in (ta, tc)                  # a fresh token, not an old one
