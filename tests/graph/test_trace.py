"""Trace capture: what becomes a graph, what is specialised, and what is refused (with which message)."""
import inspect

import numpy as np
import pytest

import minispore as ms
from minispore import nn, ops
from minispore.graph import CaptureError, Tracer


def t(a, dtype=np.float32):
    return ms.Tensor(np.asarray(a, dtype=dtype))


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def line_of(fn, text):
    """The source line number of the first line of `fn` containing `text`."""
    lines, start = inspect.getsourcelines(fn)
    for i, line in enumerate(lines):
        if text in line:
            return start + i
    raise AssertionError(text)


def jit_trace(fn=None, **kw):
    return ms.jit(fn, capture_mode="trace", **kw) if fn is not None else ms.jit(capture_mode="trace", **kw)


# -- results and the recorded graph --------------------------------------------------------------
def mlp_block(x, w, b):
    h = ops.matmul(x, w) + b
    h = ops.softmax(ops.tanh(h), -1)
    top, idx = ops.topk(h, 2)
    return h.sum(axis=0), top, idx


def test_traced_function_matches_eager_and_numpy():
    x, w, b = rand(4, 5), rand(5, 3, seed=1), rand(3, seed=2)
    eager = mlp_block(t(x), t(w), t(b))
    graph = jit_trace(mlp_block)(t(x), t(w), t(b))
    for e, g in zip(eager, graph):
        assert g.dtype == e.dtype and g.shape == e.shape
        np.testing.assert_allclose(g.asnumpy(), e.asnumpy(), rtol=1e-6)
    h = np.tanh(x @ w + b)
    sm = np.exp(h - h.max(-1, keepdims=True))
    sm /= sm.sum(-1, keepdims=True)
    np.testing.assert_allclose(graph[0].asnumpy(), sm.sum(0), rtol=1e-5)


def test_dump_names_the_user_source_line_of_each_node():
    text = ms.graph.dump(jit_trace(mlp_block), t(rand(4, 5)), t(rand(5, 3)), t(rand(3)))
    lines = text.splitlines()
    assert lines[0] == "graph mlp_block(%0: f32[4,5], %1: f32[5,3], %2: f32[3]) {"
    assert lines[1].startswith("  %3 = matmul(%0, %1) : f32[4,3]")
    assert lines[1].endswith(f"# test_trace.py:{line_of(mlp_block, 'ops.matmul')}")
    assert any("= topk(" in ln and ": (f32[4,2], i32[4,2])" in ln for ln in lines)
    assert lines[-1] == "}"


def test_bad_shapes_are_rejected_at_compile_time_with_the_user_line():
    def f(x, w):
        return ops.matmul(x, w)            # (2, 3) @ (4, 5): the inference rule refuses it
    with pytest.raises(ms.OpValueError) as info:
        jit_trace(f)(t(rand(2, 3)), t(rand(4, 5)))
    assert "'matmul'" in str(info.value)
    assert f"test_trace.py:{line_of(f, 'ops.matmul')} in f" in str(info.value)


# -- what needs data -------------------------------------------------------------------------
def branch_on_value(x):
    y = x * 2
    if y.sum() > 0:                         # a Python branch on a tensor's value
        return y
    return -y


@pytest.mark.parametrize("access", ["bool", "asnumpy", "item", "float", "np.asarray", "tolist"])
def test_reading_a_tracers_value_names_the_function_and_line(access):
    def f(x):
        y = ops.exp(x)
        if access == "bool":
            bool(y.sum() > 0)
        elif access == "asnumpy":
            y.asnumpy()
        elif access == "item":
            y.sum().item()
        elif access == "float":
            float(y.sum())
        elif access == "np.asarray":
            np.asarray(y)
        else:
            y.tolist()
        return y
    with pytest.raises(CaptureError) as info:
        jit_trace(f)(t(rand(3)))
    msg = str(info.value)
    assert "traced by jit(capture_mode='trace') in 'test_reading_a_tracers_value" in msg
    assert "capture_mode='ast'" in msg and "capture_mode='bytecode'" in msg
    assert "test_trace.py:" in msg and " in f)" in msg
    assert isinstance(info.value, TypeError) and isinstance(info.value, ms.MinisporeError)


def test_tensor_valued_branch_points_at_the_if_line():
    with pytest.raises(CaptureError) as info:
        jit_trace(branch_on_value)(t(rand(3)))
    assert f"test_trace.py:{line_of(branch_on_value, 'if y.sum()')} in branch_on_value" in str(info.value)


def test_python_control_flow_on_shapes_is_specialised():
    calls = []

    @jit_trace
    def f(x):
        calls.append(x.shape)
        if x.shape[0] > 2:                 # a Python int: fine, and guarded through the shape
            return x * 10
        return x + 1
    np.testing.assert_allclose(f(t([1.0, 2.0, 3.0])).asnumpy(), [10, 20, 30])
    np.testing.assert_allclose(f(t([1.0, 2.0])).asnumpy(), [2, 3])
    np.testing.assert_allclose(f(t([4.0, 5.0, 6.0])).asnumpy(), [40, 50, 60])
    assert calls == [(3,), (2,)]           # two traces; the third call reused the first graph


# -- captures ---------------------------------------------------------------------------------
def test_closed_over_parameters_are_read_at_run_time():
    """Captured by reference: updates between calls are seen without recompiling."""
    w = ms.Parameter(t([1.0, 2.0]), name="w")
    f = jit_trace(lambda x: x * w)
    np.testing.assert_allclose(f(t([3.0, 3.0])).asnumpy(), [3, 6])
    w.asnumpy()[:] = [5.0, 7.0]                           # in place
    np.testing.assert_allclose(f(t([1.0, 1.0])).asnumpy(), [5, 7])
    w.set_data(t([-1.0, -2.0]))                           # new storage
    np.testing.assert_allclose(f(t([1.0, 1.0])).asnumpy(), [-1, -2])
    assert f.cache().compiles == 1
    graph = f.compile(t([1.0, 1.0])).graph
    assert [v.name for v, _ in graph.captures] == ["w"]


def test_tensors_built_during_the_trace_are_constants():
    def f(x):
        table = ms.Tensor(np.arange(3, dtype=np.float32))     # built once, at trace time
        return x + table
    g = jit_trace(f)
    np.testing.assert_allclose(g(t([1.0, 1.0, 1.0])).asnumpy(), [1, 2, 3])
    np.testing.assert_allclose(g(t([0.0, 0.0, 0.0])).asnumpy(), [0, 1, 2])
    assert len(g.compile(t([0.0, 0.0, 0.0])).graph.captures) == 1


def test_nested_jit_is_inlined_into_one_graph():
    inner = jit_trace(lambda x: ops.exp(x) * 2)

    @jit_trace
    def outer(x):
        return inner(x) + inner(x + 1)
    x = rand(3)
    np.testing.assert_allclose(outer(t(x)).asnumpy(), np.exp(x) * 2 + np.exp(x + 1) * 2, rtol=1e-6)
    graph = outer.compile(t(x)).graph
    assert [n.name for n in graph.nodes].count("exp") == 2
    assert inner.cache().compiles == 0                    # never compiled on its own


# -- outputs -----------------------------------------------------------------------------------------
def test_output_structures_and_constants_round_trip():
    w = ms.Parameter(t([1.0, 2.0]), name="w")

    @jit_trace
    def f(x, n):
        return {"sum": x + n, "pair": (x, w), "n": n, "none": None, "shape": x.shape}
    out = f(t([1.0, 1.0]), 3)
    assert set(out) == {"sum", "pair", "n", "none", "shape"}
    np.testing.assert_allclose(out["sum"].asnumpy(), [4, 4])
    np.testing.assert_allclose(out["pair"][1].asnumpy(), [1, 2])
    assert out["n"] == 3 and out["none"] is None and out["shape"] == (2,)
    assert isinstance(out["pair"][0], ms.Tensor) and not isinstance(out["pair"][0], Tracer)


def test_non_tensor_output_is_refused_with_the_function_name():
    @jit_trace
    def f(x):
        return x + 1, np.zeros(3)
    with pytest.raises(ms.OpTypeError) as info:
        f(t([1.0]))
    assert "jit(test_non_tensor_output_is_refused_with_the_function_name.<locals>.f)" in str(info.value)
    assert "ndarray at output[1]" in str(info.value)


def test_an_escaped_tracer_has_no_data():
    stash = []

    @jit_trace
    def f(x):
        y = x * 2
        stash.append(y)                     # keeps a tracer beyond the trace
        return y
    f(t([1.0]))
    with pytest.raises(CaptureError, match="escaped from the trace of"):
        stash[0].asnumpy()
    with pytest.raises(CaptureError, match="escaped"):
        ops.add(stash[0], 1.0)


def test_tracer_repr_shows_shape_dtype_and_value():
    seen = []

    @jit_trace
    def f(x):
        seen.append(repr(x * 2))
        return x
    f(t(np.ones((2, 3))))
    assert seen[0].startswith("Tracer(shape=[2, 3], dtype=Float32, value=#")


def test_fullgraph_refuses_host_calls():
    net = nn.Dense(3, 2)
    opt = nn.SGD(net.trainable_params(), learning_rate=0.1)
    grad_fn = ms.value_and_grad(lambda x: net(x).sum(), None, opt.parameters)

    def step(x):
        loss, grads = grad_fn(x)
        opt(grads)
        return loss
    with pytest.raises(CaptureError, match="fullgraph=True"):
        jit_trace(step, fullgraph=True)(t(rand(4, 3)))
    loss = jit_trace(step)(t(rand(4, 3)))          # allowed without fullgraph
    assert loss.shape == ()


def test_tensors_inside_containers_and_keywords_become_graph_inputs():
    @jit_trace
    def f(pair, scale, *, bias, config):
        a, b = pair
        return (a * b + bias) * scale * config["k"]
    a, b, bias = rand(3), rand(3, seed=1), rand(3, seed=2)
    out = f((t(a), t(b)), 2.0, bias=t(bias), config={"k": 3})
    np.testing.assert_allclose(out.asnumpy(), (a * b + bias) * 6.0, rtol=1e-6)
    graph = f.compile((t(a), t(b)), 2.0, bias=t(bias), config={"k": 3}).graph
    assert len(graph.params) == 3                      # a, b, bias: containers and keywords flattened
    out = f((t(b), t(a)), 2.0, config={"k": 3}, bias=t(a))     # keyword order does not matter
    np.testing.assert_allclose(out.asnumpy(), (b * a + a) * 6.0, rtol=1e-6)
    assert f.cache().compiles == 1


def test_chained_host_calls_pass_run_time_values():
    # the result of one host call handed to another must be the value computed when the graph
    # runs, not the compile-time placeholder (HostResult)
    from minispore.graph.trace import host_call
    seen = []

    def total(x):
        return float(x.asnumpy().astype(np.float64).sum())

    def scaled(v, k):
        seen.append(type(v))
        return v * k

    @jit_trace
    def f(x):
        s = host_call(total, (x,), {}, "total")
        return host_call(scaled, (s, 10), {}, "scaled")

    a, b = rand(2, 3, seed=1), rand(2, 3, seed=2)
    assert f(t(a)) == pytest.approx(10 * a.astype(np.float64).sum(), rel=1e-6)
    assert f(t(b)) == pytest.approx(10 * b.astype(np.float64).sum(), rel=1e-6)   # same graph, new values
    assert f.cache().compiles == 1
    assert seen == [float, float]
