"""Guards and the compiled-graph cache: when a graph is reused, when it is recompiled, and why."""
import logging

import numpy as np
import pytest

import minispore as ms
from minispore import nn
from minispore.graph import cache as cache_mod


def t(a, dtype=np.float32):
    return ms.Tensor(np.asarray(a, dtype=dtype))


def jit_trace(fn=None, **kw):
    return ms.jit(fn, capture_mode="trace", **kw) if fn is not None else ms.jit(capture_mode="trace", **kw)


@pytest.fixture
def jit_log(caplog):
    caplog.set_level(logging.INFO, logger="minispore.jit")
    return caplog


def reasons(caplog):
    return [r.getMessage() for r in caplog.records if r.name == "minispore.jit"]


def test_same_shapes_reuse_the_graph():
    traces = []

    @jit_trace
    def f(x):
        traces.append(1)
        return x * 2
    for _ in range(3):
        f(t([1.0, 2.0]))
    assert len(traces) == 1 and f.cache().compiles == 1


def test_a_new_shape_recompiles_and_logs_why(jit_log):
    @jit_trace
    def f(x):
        return x.sum(axis=0)
    f(t(np.ones((4, 8))))
    out = f(t(np.ones((5, 8))))
    np.testing.assert_allclose(out.asnumpy(), np.full(8, 5.0))
    assert f.cache().compiles == 2
    msg = reasons(jit_log)[-1]
    assert "recompiling 'test_a_new_shape_recompiles_and_logs_why.<locals>.f'" in msg
    assert "argument tensor 0 shape (4, 8) -> (5, 8)" in msg
    f(t(np.ones((4, 8))))                       # both graphs stay cached
    assert f.cache().compiles == 2


def test_a_new_dtype_recompiles(jit_log):
    f = jit_trace(lambda x: x + 1)
    f(t([1.0]))
    out = f(t([1.0], np.float64))
    assert out.dtype == ms.float64
    assert "argument tensor 0 dtype Float32 -> Float64" in reasons(jit_log)[-1]


def test_python_constant_arguments_are_baked_and_guarded(jit_log):
    @jit_trace
    def scale(x, k, mode="mul"):
        return x * k if mode == "mul" else x + k
    np.testing.assert_allclose(scale(t([2.0]), 3).asnumpy(), [6])
    np.testing.assert_allclose(scale(t([2.0]), 4).asnumpy(), [8])
    assert "argument 1 changed: 3 -> 4" in reasons(jit_log)[-1]
    np.testing.assert_allclose(scale(t([2.0]), 4, mode="add").asnumpy(), [6])
    assert "keyword argument 'mode' changed: <not given> -> 'add'" in reasons(jit_log)[-1]
    np.testing.assert_allclose(scale(t([2.0]), 4.0).asnumpy(), [8])      # 4 and 4.0 are different constants
    assert scale.cache().compiles == 4


SCALE = 2.0


def uses_global(x):
    return x * SCALE


def test_a_changed_global_recompiles(jit_log):
    global SCALE
    f = jit_trace(uses_global)
    try:
        np.testing.assert_allclose(f(t([1.0])).asnumpy(), [2.0])
        SCALE = 5.0
        np.testing.assert_allclose(f(t([1.0])).asnumpy(), [5.0])
        assert "global 'SCALE' changed: 2.0 -> 5.0" in reasons(jit_log)[-1]
    finally:
        SCALE = 2.0


def test_a_rebound_closure_tensor_recompiles(jit_log):
    table = t([1.0, 2.0])
    f = jit_trace(lambda x: x + table)
    np.testing.assert_allclose(f(t([0.0, 0.0])).asnumpy(), [1, 2])
    table = t([10.0, 20.0])                      # noqa: F841 - the closure now holds another tensor
    np.testing.assert_allclose(f(t([0.0, 0.0])).asnumpy(), [10, 20])
    assert "closure 'table' changed" in reasons(jit_log)[-1]


def test_cell_state_is_guarded_train_and_eval_keep_their_graphs(jit_log):
    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.drop = nn.Dropout(p=0.5)

        @ms.jit(capture_mode="trace")
        def construct(self, x):
            return self.drop(x)
    net = Net()
    x = t(np.ones((200,)))
    net.set_train(True)
    y = net(x).asnumpy()
    assert set(np.unique(y)) == {0.0, 2.0}
    net.set_train(False)
    np.testing.assert_array_equal(net(x).asnumpy(), np.ones(200))
    assert "self.drop.training changed: True -> False" in reasons(jit_log)[-1]
    net.set_train(True)
    assert set(np.unique(net(x).asnumpy())) == {0.0, 2.0}
    net.set_train(False)
    net(x)
    assert Net.construct.cache(net).compiles == 2          # toggling reuses both graphs


def test_each_instance_has_its_own_cache():
    class Scale(nn.Cell):
        def __init__(self, k):
            super().__init__()
            self.k = k

        @ms.jit(capture_mode="trace")
        def construct(self, x):
            return x * self.k
    a, b = Scale(2.0), Scale(3.0)
    np.testing.assert_allclose(a(t([1.0])).asnumpy(), [2])
    np.testing.assert_allclose(b(t([1.0])).asnumpy(), [3])
    np.testing.assert_allclose(a(t([1.0])).asnumpy(), [2])
    assert Scale.construct.cache(a).compiles == 1 and Scale.construct.cache(b).compiles == 1
    a.k = 4.0                                               # a scalar attribute read at trace time
    np.testing.assert_allclose(a(t([1.0])).asnumpy(), [4])


def test_a_replaced_parameter_recompiles(jit_log):
    net = nn.Dense(2, 1, has_bias=False)
    f = jit_trace(lambda x: net(x))
    x = t([[1.0, 1.0]])
    before = f(x).asnumpy()
    net.weight = t([[10.0, 10.0]])                  # a Tensor: set_data, same Parameter, new values
    np.testing.assert_allclose(f(x).asnumpy(), [[20.0]])
    assert f.cache().compiles == 1 and before.shape == (1, 1)
    net.weight = ms.Parameter(t([[1.0, 2.0]]), name="weight")      # a Parameter: another object
    np.testing.assert_allclose(f(x).asnumpy(), [[3.0]])
    assert "net.weight was replaced by another object" in reasons(jit_log)[-1]


def test_a_captured_tensor_that_changed_shape_recompiles(jit_log):
    w = ms.Parameter(t([1.0, 2.0]), name="w")
    f = jit_trace(lambda: w * 2)
    np.testing.assert_allclose(f().asnumpy(), [2, 4])
    w.set_data(t([1.0, 2.0, 3.0]), slice_shape=True)
    np.testing.assert_allclose(f().asnumpy(), [2, 4, 6])
    assert "captured tensor 'w' changed to (3,)" in reasons(jit_log)[-1]


def test_the_recompile_limit_warns_once_then_runs_eagerly(monkeypatch):
    monkeypatch.setattr(cache_mod, "RECOMPILE_LIMIT", 3)
    traces = []

    @jit_trace
    def f(x, k):
        traces.append(k)
        return x * k
    for k in range(3):
        f(t([1.0]), k)
    with pytest.warns(RuntimeWarning, match="recompiled 3 times .* running it eagerly"):
        out = f(t([1.0]), 10)
    np.testing.assert_allclose(out.asnumpy(), [10])
    np.testing.assert_allclose(f(t([1.0]), 11).asnumpy(), [11])           # eager: correct, no new warning
    np.testing.assert_allclose(f(t([1.0]), 1).asnumpy(), [1])             # still cached
    assert f.cache().compiles == 3
    assert traces == [0, 1, 2, 10, 11]                                    # 10 and 11 ran as Python


def test_recompile_limit_option():
    f = ms.jit(lambda x, k: x * k, capture_mode="trace", recompile_limit=1)
    f(t([1.0]), 1)
    with pytest.warns(RuntimeWarning, match="running it eagerly"):
        f(t([1.0]), 2)


def test_state_guard_check_is_cheap_to_build_for_a_model():
    """The LLaMA preset's state guard covers every sub-cell's flags (and reports a change by path)."""
    from minispore.llm import Llama, get_preset
    model = Llama(get_preset("shakespeare-char").model)
    guard = cache_mod.StateGuard([("model", model)])
    assert guard.failure() is None
    model.layers[2].attention.attn_dropout.set_train(True)
    assert guard.failure() == "model.layers.2.attention.attn_dropout.training changed: False -> True"


def test_switching_the_backend_recompiles_with_the_new_backends_kernels():
    # Executors bind each primitive's kernel when a graph is compiled, so the backend is a guard:
    # after set_context(device_target=...) the same jitted function runs the new backend's kernels.
    from minispore.backend import registry
    from minispore.backend.cpu import HostBackend

    calls = []

    class CountingBackend(HostBackend):
        name = "CountingExp"

        def __init__(self):
            super().__init__()
            self.kernels["exp"] = lambda a: calls.append(a.shape) or np.exp(a)

    registry.register_backend("CountingExp", CountingBackend)
    f = ms.jit(lambda x: ms.ops.exp(x), capture_mode="trace")
    x = ms.Tensor(np.zeros(3, np.float32))
    try:
        f(x)
        assert calls == []
        ms.set_context(device_target="CountingExp")
        np.testing.assert_allclose(f(x).asnumpy(), np.ones(3))
        assert calls == [(3,)]
    finally:
        ms.set_context(device_target="CPU")
        registry.unregister_backend("CountingExp")


# -- the state guard on a deep model: still every scalar, member and created attribute -------------
def _deep_llama():
    from minispore.llm import Llama
    from minispore.llm.config import LlamaConfig
    return Llama(LlamaConfig(vocab_size=16, dim=16, n_layers=32, n_heads=2, max_seq_len=8, multiple_of=8))


@pytest.fixture(scope="module")
def deep_model():
    return _deep_llama()


def test_state_guard_on_32_layers_names_a_changed_scalar_deep_down(deep_model):
    guard = cache_mod.StateGuard([("model", deep_model)])
    guard.note_capture_writes()
    assert guard.failure() is None
    drop = deep_model.layers[31].feed_forward.dropout
    drop.set_train(True)
    try:
        assert guard.failure() == "model.layers.31.feed_forward.dropout.training changed: False -> True"
    finally:
        drop.set_train(False)
    assert guard.failure() is None                       # back as it was: the guard holds again


def test_state_guard_on_32_layers_names_a_replaced_parameter(deep_model):
    guard = cache_mod.StateGuard([("model", deep_model)])
    wq = deep_model.layers[17].attention.wq
    old = wq.weight
    wq.weight = ms.Parameter(t(np.ones(tuple(old.shape))), name=old.name)
    try:
        assert guard.failure() == "model.layers.17.attention.wq.weight was replaced by another object"
    finally:
        wq.weight = old
    assert guard.failure() is None


def test_state_guard_on_32_layers_names_a_replaced_sub_cell(deep_model):
    guard = cache_mod.StateGuard([("model", deep_model)])
    block = deep_model.layers[9]
    old = block.ffn_norm
    block.ffn_norm = nn.Dropout(p=0.5)
    try:
        assert guard.failure() == "model.layers.9.ffn_norm was replaced by another object"
    finally:
        block.ffn_norm = old
    assert guard.failure() is None


def test_state_guard_names_the_first_change_depth_first(deep_model):
    # several changes at once: the message names the first one met walking the model depth first
    # (sub-cells before their parent's own scalars), whatever order the grouped checks ran in
    guard = cache_mod.StateGuard([("model", deep_model)])
    deep_model.layers[3].attention.attn_dropout.p = 0.25
    deep_model.layers[20].feed_forward.w1.in_channels = 7
    deep_model.layers[2].training = True
    try:
        assert guard.failure() == "model.layers.2.training changed: False -> True"
        deep_model.layers[2].training = False
        assert guard.failure() == "model.layers.3.attention.attn_dropout.p changed: 0.0 -> 0.25"
        deep_model.layers[3].attention.attn_dropout.p = 0.0
        assert guard.failure() == "model.layers.20.feed_forward.w1.in_channels changed: 16 -> 7"
    finally:
        deep_model.layers[2].training = False
        deep_model.layers[3].attention.attn_dropout.p = 0.0
        deep_model.layers[20].feed_forward.w1.in_channels = 16
    assert guard.failure() is None


def test_state_guard_on_32_layers_guards_attributes_the_capture_created(deep_model):
    guard = cache_mod.StateGuard([("model", deep_model)])
    cell = deep_model.layers[25].attention
    object.__setattr__(cell, "calls", 1)                   # as a capture's side effect would
    try:
        guard.note_capture_writes()
        assert guard.failure() == "model.layers.25.attention.calls changed: <not set> -> 1"
    finally:
        del cell.__dict__["calls"]
    assert guard.failure() is None


def test_state_guard_names_a_deleted_attribute():
    class Box:
        pass
    b = Box()
    b.rate, b.name = 0.5, "x"
    guard = cache_mod.StateGuard([("box", b)])
    del b.rate
    assert guard.failure() == "box.rate was deleted"


def test_state_guard_objects_with_the_same_names_but_other_kinds_of_values():
    # objects of one class with the same attribute names share a layout, made from the first;
    # one holding another kind of value under a name (a dict where the first held None, a scalar
    # where it held a function) is classified on its own and still fully guarded
    class Holder:
        def __init__(self, x):
            self.x = x

    class Leaf:
        def __init__(self):
            self.v = 1
    leaf = Leaf()
    a, b = Holder(None), Holder({"child": leaf})
    c, d = Holder(len), Holder(3)
    guard = cache_mod.StateGuard([("a", a), ("b", b), ("c", c), ("d", d)])
    assert guard.failure() is None
    leaf.v = 2
    assert guard.failure() == "b.x.child.v changed: 1 -> 2"
    leaf.v = 1
    d.x = 4
    assert guard.failure() == "d.x changed: 3 -> 4"
    d.x = 3
    b.x["child"] = Leaf()
    assert guard.failure() == "b.x.child was replaced by another object"
    b.x["child"] = leaf
    assert guard.failure() is None


def test_state_guard_dict_attribute_with_scalars_and_members():
    class Config:
        pass
    cell = nn.Dense(2, 2)
    cfg = Config()
    cfg.table = {"k": 2, "m": cell, "f": len}
    guard = cache_mod.StateGuard([("cfg", cfg)])
    cfg.table["f"] = abs                                   # neither a scalar nor an object: not guarded
    assert guard.failure() is None
    cfg.table["k"] = 3
    assert guard.failure() == "cfg.table.k changed: 2 -> 3"
    cfg.table["k"] = 2
    cell.has_bias = False
    assert guard.failure() == "cfg.table.m.has_bias changed: True -> False"
    cell.has_bias = True
    cfg.table["m"] = nn.Dense(2, 2)
    assert guard.failure() == "cfg.table.m was replaced by another object"


def test_state_guard_a_scalar_replaced_by_an_array_fails_without_raising():
    class Box:
        pass
    b = Box()
    b.scale = 2.0
    guard = cache_mod.StateGuard([("box", b)])
    b.scale = np.array([2.0, 2.0])
    assert guard.failure() == "box.scale changed: 2.0 -> array([2., 2.])"
