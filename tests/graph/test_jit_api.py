"""The front door: `jit` arguments, JitConfig, GRAPH_MODE cells, extension points, dump/explain."""
import sys

import numpy as np
import pytest

import minispore as ms
from minispore import nn, ops
from minispore.graph.capture import registry as capture_mod
from minispore.graph.run import levels as levels_module
from minispore.graph import CaptureResult, GraphBreak, O0Executor
from minispore.jit import JitFunction, cell_graph_function

jit_module = sys.modules["minispore.jit"]       # `ms.jit` (and `import minispore.jit`) is the function


def t(a, dtype=np.float32):
    return ms.Tensor(np.asarray(a, dtype=dtype))


@pytest.fixture
def fresh_warnings(monkeypatch):
    """Forget which one-time warnings were given, and hide any registered ast/bytecode mode."""
    monkeypatch.setattr(jit_module, "_warned", set())
    monkeypatch.setattr(capture_mod, "_warned_fallback", set())
    monkeypatch.setattr(capture_mod, "_MODES", {"trace": capture_mod._MODES["trace"]})


@pytest.fixture
def graph_mode():
    ms.set_context(mode=ms.GRAPH_MODE)
    yield
    ms.set_context(mode=ms.PYNATIVE_MODE)


# -- arguments ------------------------------------------------------------------------------------
def test_decorator_forms(fresh_warnings):
    @ms.jit
    def a(x):
        return x + 1

    @ms.jit(capture_mode="trace", jit_level="O0")
    def b(x):
        return x + 2
    c = ms.jit(lambda x: x + 3, capture_mode="trace")
    assert isinstance(a, JitFunction) and a.capture_mode == "ast" and a.jit_level == "O0"
    assert b.capture_mode == "trace" and a.__name__ == "a"
    with pytest.warns(RuntimeWarning, match="capture_mode='ast' is not available yet"):
        np.testing.assert_allclose(a(t([1.0])).asnumpy(), [2])
    np.testing.assert_allclose(b(t([1.0])).asnumpy(), [3])
    np.testing.assert_allclose(c(t([1.0])).asnumpy(), [4])
    assert ms.jit(c).fn is c.fn                     # re-jitting unwraps


@pytest.mark.parametrize("kwargs, text", [
    ({"capture_mode": "graph"}, "capture_mode in ['ast', 'bytecode', 'trace']"),
    ({"jit_level": "O3"}, "jit_level in ['O0', 'O1', 'O2']"),
    ({"dynamic": 2}, "dynamic=0"),
    ({"fullgraph": "yes"}, "fullgraph as a bool"),
    ({"backend": "TVM"}, "backend"),
    ({"exec_order": "random"}, "exec_order in ['bfs', 'dfs']"),
    ({"no_such_option": 1}, "options among"),
])
def test_bad_jit_arguments_are_refused(kwargs, text):
    with pytest.raises((ms.OpValueError, ms.OpTypeError)) as info:
        ms.jit(lambda x: x, **kwargs)
    assert "For 'jit'" in str(info.value) and text in str(info.value)


def test_jit_of_a_non_callable_is_refused():
    with pytest.raises(ms.OpTypeError, match="For 'jit', expected a function"):
        ms.jit(3)


def test_unregistered_capture_modes_fall_back_to_trace_and_say_so_once(fresh_warnings):
    f = ms.jit(lambda x: x * 2, capture_mode="bytecode")
    with pytest.warns(RuntimeWarning, match="capture_mode='bytecode' is not available yet.*using capture_mode='trace'"):
        f(t([1.0]))
    g = ms.jit(lambda x: x * 3, capture_mode="bytecode")
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_allclose(g(t([1.0])).asnumpy(), [3])          # no second warning


@pytest.mark.parametrize("level", ["O1", "O2"])
def test_o1_and_o2_have_their_own_executors_and_no_fallback_warning(fresh_warnings, level):
    # O1 (fusion) and O2 (whole-graph sink) are registered levels: no "runs as O0" warning, the
    # compiled function uses the level's executor, and results equal PyNative.
    import warnings
    f = ms.jit(lambda x: ops.exp(x) * 2.0, capture_mode="trace", jit_level=level)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*runs as 'O0'")
        out = f(t([0.0, 1.0]))
    np.testing.assert_allclose(out.asnumpy(), [2.0, 2 * np.e], rtol=1e-6)
    executor = f.compile(t([0.0, 1.0])).executor
    assert type(executor) is not O0Executor        # the level's own executor (O1 may be wrapped by streams)


def test_dynamic_and_ge_backend_are_accepted_with_a_warning(fresh_warnings):
    with pytest.warns(RuntimeWarning, match="dynamic=1 is accepted but shapes are still specialised"):
        ms.jit(lambda x: x, dynamic=1)
    with pytest.warns(RuntimeWarning, match="backend='GE' is deprecated"):
        ms.jit(lambda x: x, backend="GE")


def test_ms_jit_0_runs_everything_eagerly(monkeypatch):
    calls = []

    @ms.jit(capture_mode="trace")
    def f(x):
        calls.append(type(x).__name__)
        return x + 1
    monkeypatch.setenv("MS_JIT", "0")
    f(t([1.0]))
    f(t([1.0]))
    assert calls == ["Tensor", "Tensor"] and f.cache().compiles == 0


def test_dump_environment_variable_prints_each_compiled_graph(monkeypatch, capsys):
    monkeypatch.setenv("MS_DEV_SAVE_GRAPHS", "1")
    f = ms.jit(lambda x: ops.relu(x) * 2, capture_mode="trace")
    f(t([1.0, -1.0]))
    f(t([1.0, -1.0]))
    err = capsys.readouterr().err
    assert err.count("# minispore IR:") == 1
    assert "%1 = relu(%0) : f32[2]" in err and "capture_mode=trace, jit_level=O0" in err
    monkeypatch.delenv("MS_DEV_SAVE_GRAPHS")
    monkeypatch.setenv("MINISPORE_DUMP_IR", "1")
    f(t([1.0, -1.0, 2.0]))
    assert "%1 = relu(%0) : f32[3]" in capsys.readouterr().err


# -- extension points -------------------------------------------------------------------------------
def test_register_capture_mode_is_one_call(monkeypatch):
    """A mode returning a runner and graph breaks (what the bytecode mode will do) is honoured."""
    monkeypatch.setattr(capture_mod, "_MODES", dict(capture_mod._MODES))
    seen = []

    def fake_bytecode(req):
        graph_result = capture_mod._MODES["trace"](req)         # capture the whole thing by tracing

        def runner(args, kwargs):
            seen.append("run")
            return req.fn(*args, **kwargs)
        return CaptureResult(graph=None, graphs=graph_result.graphs, runner=runner, mode="bytecode",
                             breaks=[GraphBreak("print is not supported", "x.py", 3)])
    jit_module.register_capture_mode("bytecode", fake_bytecode)
    f = ms.jit(lambda x: x * 5, capture_mode="bytecode")
    np.testing.assert_allclose(f(t([1.0])).asnumpy(), [5])
    assert seen == ["run"]
    report = ms.graph.explain(f, t([1.0]))
    assert report.graph_count == 1 and report.break_count == 1
    assert "1. x.py:3: print is not supported" in str(report)


def test_register_jit_level_is_one_call(monkeypatch):
    monkeypatch.setattr(levels_module, "_LEVELS", dict(levels_module._LEVELS))
    built = []

    class CountingExecutor(O0Executor):
        def __init__(self, graph):
            built.append(graph.name)
            super().__init__(graph)
    jit_module.register_jit_level("O1", CountingExecutor)
    f = ms.jit(lambda x: x + 1, capture_mode="trace", jit_level="O1")
    np.testing.assert_allclose(f(t([1.0])).asnumpy(), [2])
    assert len(built) == 1


def test_explain_and_dump_for_trace():
    @ms.jit(capture_mode="trace")
    def f(x):
        return ops.exp(x).sum()
    report = ms.graph.explain(f, t([1.0, 2.0]))
    assert report.graph_count == 1 and report.break_count == 0 and report.breaks == []
    assert report.op_count == 2 and report.mode == "trace"
    assert str(report).splitlines()[:3] == ["Graph count: 1", "Graph break count: 0",
                                           "Op count: 2  (capture_mode=trace)"]
    text = ms.graph.dump(f, t([1.0, 2.0]))
    assert repr(text) == str(text) and text.startswith("graph f(%0: f32[2]) {")


def test_dump_of_a_jitted_method():
    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.dense = nn.Dense(3, 2)

        @ms.jit(capture_mode="trace")
        def construct(self, x):
            return ops.relu(self.dense(x))
    net = Net()
    text = ms.graph.dump(net.construct, t(np.ones((4, 3))))
    assert "  %1 = capture Parameter 'dense.weight' : f32[2,3]\n  %2 = capture Parameter 'dense.bias' : f32[2]" in text
    assert "relu(" in text


# -- JitConfig and GRAPH_MODE ---------------------------------------------------------------------
def test_jit_config_fields_and_validation():
    cfg = ms.JitConfig()
    assert cfg.jit_level == "O1" and cfg.exc_mode == "auto" and cfg.jit_syntax_level == ""
    assert cfg.jit_options() == {"capture_mode": "ast", "jit_level": "O1", "fullgraph": False}
    strict = ms.JitConfig(jit_level="O0", jit_syntax_level="STRICT", capture_mode="trace")
    assert strict.jit_options() == {"capture_mode": "trace", "jit_level": "O0", "fullgraph": True}
    assert ms.JitConfig(jit_level="").jit_options()["jit_level"] == "O0"
    for kwargs in ({"jit_level": "O9"}, {"exc_mode": "fast"}, {"jit_syntax_level": "loose"},
                   {"debug_level": "TRACE"}, {"infer_boost": "yes"}, {"capture_mode": "jaxpr"}):
        with pytest.raises(ms.OpValueError, match="For 'JitConfig'"):
            ms.JitConfig(**kwargs)
    with pytest.raises(ms.OpTypeError, match="For 'set_jit_config', expected a JitConfig"):
        nn.Dense(2, 2).set_jit_config({"jit_level": "O0"})


def test_graph_mode_compiles_the_outermost_cell_once(graph_mode):
    class Block(nn.Cell):
        def __init__(self):
            super().__init__()
            self.a = nn.Dense(4, 4)
            self.b = nn.Dense(4, 2)

        def construct(self, x):
            return self.b(ops.relu(self.a(x)))
    ms.set_seed(0)
    net = Block()
    net.set_jit_config(ms.JitConfig(jit_level="O0", capture_mode="trace"))
    x = t(np.random.default_rng(0).standard_normal((3, 4)))
    out = net(x)
    ms.set_context(mode=ms.PYNATIVE_MODE)
    expected = net(x)
    ms.set_context(mode=ms.GRAPH_MODE)
    np.testing.assert_allclose(out.asnumpy(), expected.asnumpy(), rtol=1e-6)
    net(x)
    jf = cell_graph_function(net)
    assert jf.cache().compiles == 1
    assert cell_graph_function(net.a) is None                    # inner cells were inlined
    names = [n.name for n in jf.compile(net, x).graph.nodes]
    assert names.count("matmul") == 2


def test_graph_mode_respects_strict_syntax_level(graph_mode):
    net = nn.Dense(3, 2)
    opt = nn.SGD(net.trainable_params(), learning_rate=0.1)
    train = nn.TrainOneStepCell(nn.WithLossCell(net, nn.MSELoss()), opt)
    train.set_jit_config(ms.JitConfig(jit_level="O0", jit_syntax_level="STRICT", capture_mode="trace"))
    with pytest.raises(ms.graph.CaptureError, match="fullgraph=True"):
        train(t(np.ones((2, 3))), t(np.ones((2, 2))))


def test_jit_of_a_cell_instance_guards_its_state():
    net = nn.Dropout(p=0.5)
    f = ms.jit(net, capture_mode="trace")
    x = t(np.ones((100,)))
    net.set_train(False)
    np.testing.assert_array_equal(f(x).asnumpy(), np.ones(100))
    net.set_train(True)
    assert 0.0 in f(x).asnumpy()


def test_host_cells_run_eagerly_in_graph_mode(graph_mode):
    """An optimizer called directly in GRAPH_MODE is not compiled: it runs its NumPy update."""
    net = nn.Dense(2, 1, has_bias=False)
    opt = nn.SGD(net.trainable_params(), learning_rate=1.0)
    w0 = net.weight.asnumpy().copy()
    opt((t([[1.0, 2.0]]),))
    np.testing.assert_allclose(net.weight.asnumpy(), w0 - [[1.0, 2.0]], rtol=1e-6)
    assert cell_graph_function(opt) is None


def test_a_cell_class_can_opt_in_to_running_on_the_host():
    from minispore.graph import HOST_CALL

    class Counter(ms.nn.Cell):
        jit_host_call = True

        def __init__(self):
            super().__init__()
            self.calls = 0

        def construct(self, x):
            self.calls += 1                  # Python state: runs eagerly, at run time
            return x

    counter = Counter()

    def fn(x):
        return counter(x * 2)               # a host call's result is a Python value of the run

    jf = ms.jit(fn, capture_mode="trace")
    x = ms.Tensor(np.ones(3, np.float32))
    graph = jf.compile(x).graph
    assert any(n.op is HOST_CALL for n in graph.nodes)
    before = counter.calls
    np.testing.assert_allclose(jf(x).asnumpy(), np.full(3, 2.0))
    assert counter.calls == before + 1


def test_compile_entry_reports_where_compile_time_went():
    jf = ms.jit(lambda x: ops.tanh(x) * 2 + 1, capture_mode="trace")
    entry = jf.compile(ms.Tensor(np.ones(3, np.float32)))
    assert list(entry.phases) == ["state guard", "capture", "verify", "passes + executor"]
    assert all(v >= 0 for v in entry.phases.values())
    assert sum(entry.phases.values()) <= entry.compile_seconds
