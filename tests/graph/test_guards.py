"""graph/guards: the one walk of a Cell tree, its process-independent rendering, the epoch re-check,
and the single rule every walker takes its definitions from."""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import minispore as ms
from minispore import nn
from minispore.common.state_epoch import EPOCH
from minispore.graph import cache
from minispore.graph.guards import layer_state
from minispore.graph.guards import rule, stable, walk
from minispore.graph.guards.contents import content_token


class Block(nn.Cell):
    def __init__(self, rate=0.1):
        super().__init__()
        self.dense = nn.Dense(4, 3)
        self.drop = nn.Dropout(p=rate)
        self.scale = 2.0
        self.compute_dtype = ms.float32
        self.coeffs = [1.0, 2.0]

    def construct(self, x):
        return self.drop(self.dense(x)) * self.scale


def test_the_walk_lists_what_a_tree_owns_in_order_and_classifies_attributes_once_per_layout():
    b = Block()
    own, sig, untracked = walk.walk(b)
    assert [(name, t) for name, t in own] == [("dense.weight", b.dense.weight), ("dense.bias", b.dense.bias)]
    lay = walk.layout_of(b, b.__dict__)
    assert lay is walk.layout_of(b, b.__dict__)                # built once per (class, names, types)
    assert "scale" in lay.scalar_keys and "training" in lay.scalar_keys
    assert lay.dtype_keys == ("compute_dtype",)
    assert lay.other_keys == ("coeffs",)
    # the shared skip lists: registries, volatile counters and jit's own attributes are not state
    every = set(lay.scalar_keys + lay.dtype_keys + lay.tensor_keys + lay.other_keys)
    assert not every & (rule.CELL_BOOKKEEPING | rule.VOLATILE_ATTRS)
    assert all(rule.is_jit_private(k) for k in lay.jit_keys) and not any(map(rule.is_jit_private, every))
    # the signature: the root's layout and scalar values first, then each sub-cell's name and part
    assert sig[0] is lay
    assert sig[1] == tuple(b.__dict__[k] for k in lay.scalar_keys)
    assert sig[2] == "Float32" and sig[3] == ("list", (1.0, 2.0))
    assert "dense" in sig and "drop" in sig and sig.index("dense") < sig.index("drop")
    assert untracked is False


def test_equal_trees_have_equal_signatures_and_each_change_of_state_shows():
    a, b = Block(), Block()
    sig = walk.walk(a)[1]
    assert walk.walk(b)[1] == sig                          # two layers alike: one shared subgraph
    assert walk.walk(Block(rate=0.5))[1] != sig            # a dropout rate
    b.set_train(True)
    assert walk.walk(b)[1] != sig                          # training
    c = Block()
    c.scale = 3.0
    assert walk.walk(c)[1] != sig                          # a plain attribute
    c = Block()
    c.compute_dtype = ms.float16
    assert walk.walk(c)[1] != sig                          # a dtype attribute, by name
    c = Block()
    c.register_forward_hook(lambda cell, inp, out: out)
    assert walk.walk(c)[1] is None                         # hooks: never shared as one subgraph


def test_one_scalar_definition_for_every_walker():
    assert cache._SCALARS is rule.SCALARS
    from minispore.graph.guards import state
    assert state._SCALARS is rule.SCALARS
    assert complex in rule.SCALARS and complex not in rule.JSON_SCALARS
    assert set(rule.JSON_SCALARS) == set(rule.SCALARS) - {complex}
    assert stable._SCALARS is rule.JSON_SCALARS
    # in memory a complex attribute is compared by value; on disk it is rendered as a value too
    assert content_token(1 + 2j) == (complex, 1 + 2j)
    assert stable.stable_token(1 + 2j) == ["value", "builtins", "complex", "(1+2j)"]


def test_the_layer_check_is_o1_while_the_epoch_stands_still(monkeypatch):
    b = Block()
    check = layer_state.LayerStateCheck("net", layer_state.describe(b))
    walks = []
    real = layer_state.walk
    monkeypatch.setattr(layer_state, "walk", lambda c: walks.append(c) or real(c))
    layer_state.forget()
    for _ in range(100):
        assert not check.failed()
    assert walks == []                                     # no Cell changed: nothing walked
    EPOCH.value += 1                                       # some unrelated Cell changed
    assert not check.failed()
    assert len(walks) == 1                                 # walked once, found equal ...
    assert not check.failed() and len(walks) == 1          # ... and O(1) again
    b.dense.set_train(True)
    assert check.failed()
    assert check.explain() == "net.dense.training changed: False -> True"


def test_the_stable_rendering_sees_list_contents_and_large_arrays():
    a, b = Block(), Block()
    tok = stable.stable_token(a)
    assert stable.stable_token(b) == tok                   # same state: same rendering (not identity)
    b.coeffs[0] = 3.0                                      # a list changed in place
    assert stable.stable_token(b) != tok
    big = np.zeros(1 << 16, np.float32)
    t0 = stable.stable_token(big)
    big[12345] = 1.0                                       # one element of a large array
    assert stable.stable_token(big) != t0
    assert t0[:3] == ["ndarray", [1 << 16], "<f4"]


CHILD = textwrap.dedent('''
    import json, sys
    sys.path.insert(0, sys.argv[1])
    import guard_model as m
    from minispore.graph.compile_cache import key_of
    from minispore.graph.guards.stable import stable_token
    net = m.Net()
    if sys.argv[2] == "changed":
        net.coeffs[1] = 5.0
    print(json.dumps({"cell": key_of(stable_token(net)), "fn": key_of(stable_token(m.forward))}))
''')

MODEL = textwrap.dedent('''
    import numpy as np
    import minispore as ms
    from minispore import nn

    TABLE = {"scale": 2.0, "shift": [1, 2, 3]}
    GRID = np.linspace(0.0, 1.0, 1000, dtype=np.float32)

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.body = nn.SequentialCell([nn.Dense(4, 8), nn.ReLU(), nn.Dense(8, 2)])
            self.coeffs = [0.5, 1.5]
            self.config = {"eps": 1e-5, "mode": "fast"}

        def construct(self, x):
            return self.body(x) * self.coeffs[0]

    net = Net()

    def forward(x):
        return net(x) * TABLE["scale"] + float(GRID[3])
''')


def test_the_disk_rendering_is_the_same_in_two_processes(tmp_path):
    (tmp_path / "guard_model.py").write_text(MODEL)

    def child(seed, variant="same"):
        env = dict(os.environ, PYTHONHASHSEED=str(seed))
        out = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path), variant], capture_output=True,
                             text=True, env=env, timeout=120)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout.strip().splitlines()[-1])

    first, second = child(1), child(2)                     # (different string hashing, too)
    assert first == second
    assert len(first["cell"]) == 64 and first["cell"] != first["fn"]
    changed = child(1, "changed")
    assert changed["cell"] != first["cell"]                # a list attribute's contents are in the key


@pytest.mark.parametrize("name", ["SCALARS", "CELL_REGISTRIES", "VOLATILE_ATTRS"])
def test_the_rule_is_written_next_to_its_definitions(name):
    # the written rule names every shared definition it documents
    assert f"`{name}`" in rule.__doc__
