"""Graph mode semantics: every known difference between PyNative and a jitted function, as a test.

The pattern is tinygrad's `test_jit_footguns.py`: each test shows one behaviour, says why, and
pins it down so that a change is a deliberate decision. These are the lines of the "Graph mode
semantics" docs page:

| behaviour                      | PyNative                  | graph (jit, trace capture)                 |
|--------------------------------|---------------------------|--------------------------------------------|
| Python side effects            | every call                | once, while capturing                      |
| print(tensor)                  | values, every call        | the tracer (shape, dtype), once            |
| Python constants (args/globals)| read every call           | baked in; a change recompiles (guarded)    |
| x[i] = v on a traced value     | writes x's buffer (views) | rebinds x to a new value; views unchanged  |
| x[i] = v into a captured tensor| writes                    | graph value: refused (bytecode: a break, eager); constant: once |
| random ops                     | fresh numbers             | fresh numbers every run, same stream       |
| Parameters / closed-over tensors | current value           | current value (read by reference each run) |
| optimizer update               | NumPy, in place           | a host call, in program order              |
| branch on a tensor's value     | works                     | CaptureError naming the line (use ast/bytecode) |
"""
import logging

import numpy as np
import pytest

from minispore.common.errors import OpTypeError

import minispore as ms
from minispore import nn, ops
from minispore.graph import CaptureError


def t(a, dtype=np.float32):
    return ms.Tensor(np.asarray(a, dtype=dtype))


def jit_trace(fn):
    return ms.jit(fn, capture_mode="trace")


def test_python_side_effects_run_once_at_capture():
    # The function body runs as Python only while it is being captured; afterwards the graph runs.
    # So appending to a list (or writing a global) happens once, not on every call.
    log = []

    @jit_trace
    def f(x):
        log.append("called")
        return x + 1
    for _ in range(3):
        f(t([1.0]))
    assert log == ["called"]
    f(t([1.0, 2.0]))                      # a new shape recompiles: the side effect runs again
    assert log == ["called", "called"]


def test_print_inside_jit_shows_the_tracer_once(capsys):
    # print sees the abstract value (shape and dtype), at capture time only - as in JAX. To see
    # values at run time, return them, or use capture_mode='bytecode' (print is a graph break).
    @jit_trace
    def f(x):
        y = x * 2
        print("y is", y)
        return y
    f(t([1.0, 2.0]))
    f(t([3.0, 4.0]))
    out = capsys.readouterr().out
    assert out.count("y is") == 1
    assert "y is Tracer(shape=[2], dtype=Float32" in out


RATE = 0.5


def scaled(x):
    return x * RATE


def test_python_constants_are_baked_in_and_guarded(caplog):
    # A global Python number is read at capture and becomes a constant of the graph; the cache
    # guards its value, so changing it recompiles (and logs why) instead of silently using 0.5.
    global RATE
    caplog.set_level(logging.INFO, logger="minispore.jit")
    f = jit_trace(scaled)
    try:
        np.testing.assert_allclose(f(t([2.0])).asnumpy(), [1.0])
        assert "mul(%0, 0.5)" in ms.graph.dump(f, t([2.0]))
        RATE = 3.0
        np.testing.assert_allclose(f(t([2.0])).asnumpy(), [6.0])
        assert "global 'RATE' changed: 0.5 -> 3.0" in caplog.records[-1].getMessage()
    finally:
        RATE = 0.5


def test_mutable_containers_are_guarded_by_contents(caplog):
    # A list (dict, tuple, set) the function reads is guarded by what it holds: changing it in
    # place recompiles (graph/cache.py, _ContainerGroup). One the code only appends to
    # (`log.append(...)`) is guarded by identity: its contents cannot have shaped the graph.
    caplog.set_level(logging.INFO, logger="minispore.jit")
    table = [1.0, 2.0]

    @jit_trace
    def f(x):
        return x * table[0]
    np.testing.assert_allclose(f(t([1.0])).asnumpy(), [1.0])
    table[0] = 10.0
    np.testing.assert_allclose(f(t([1.0])).asnumpy(), [10.0])     # recompiled with the new value
    assert "table[0] changed: 1.0 -> 10.0" in caplog.records[-1].getMessage()


def test_setitem_on_a_traced_value_is_functional():
    # `y[0] = 5` inside a graph cannot write a buffer that does not exist yet: it records a
    # setitem node and rebinds the Python name `y` to the new value. Results through `y` equal
    # PyNative's; a view taken *before* the write does not see it (in PyNative it would).
    def f(x):
        y = x * 1.0
        head = y[0:2]                   # a view in PyNative
        y[0] = 5.0
        return y, head
    x = t([1.0, 2.0, 3.0])
    y_e, head_e = f(x)
    y_g, head_g = jit_trace(f)(x)
    np.testing.assert_allclose(y_g.asnumpy(), y_e.asnumpy())
    np.testing.assert_allclose(head_e.asnumpy(), [5.0, 2.0])        # eager: the view sees the write
    np.testing.assert_allclose(head_g.asnumpy(), [1.0, 2.0])        # graph: values are immutable
    assert "setitem" in ms.graph.dump(jit_trace(f), x)


def test_setitem_gradients_follow_pynative():
    def loss(x):
        y = x * 2.0
        y[1] = 0.0
        return (y * y).sum()
    x = t([1.0, 2.0, 3.0])
    np.testing.assert_allclose(jit_trace(ms.grad(loss))(x).asnumpy(), ms.grad(loss)(x).asnumpy())


def test_writing_a_graph_value_into_a_captured_tensor_is_refused():
    # Writing into a tensor that lives outside the graph would need the value *now*; in trace mode
    # that is an error naming the line. (A constant written into it happens once, at capture.)
    buf = t(np.zeros(3))

    @jit_trace
    def f(x):
        buf[0] = x.sum()
        return x
    with pytest.raises(CaptureError, match="test_semantics.py"):
        f(t([1.0, 2.0]))

    counter = t(np.zeros(1))
    traced = [0]

    @jit_trace
    def g(x):
        traced[0] += 1
        counter[0] = float(traced[0])      # a Python constant: written once, while capturing
        return x
    for _ in range(3):
        g(t([1.0]))
    assert counter.asnumpy()[0] == 1.0      # PyNative would have written 3.0


def test_random_ops_draw_fresh_numbers_on_every_run():
    # Random kernels draw when the graph runs, not when it is captured: two calls differ, and the
    # numbers are exactly the ones PyNative draws from the same seed, in the same order.
    def f(x):
        noise = ops.uniform((4,), t(0.0), t(1.0))
        return ops.dropout(x, p=0.5) + noise
    x = t(np.ones(4))
    ms.set_seed(42)
    eager = [f(x).asnumpy() for _ in range(3)]
    ms.set_seed(42)
    g = jit_trace(f)
    graph = [g(x).asnumpy() for _ in range(3)]
    assert not np.array_equal(graph[0], graph[1])
    for e, r in zip(eager, graph):
        np.testing.assert_array_equal(r, e)


def test_parameters_are_read_by_reference():
    # A Cell's Parameters are captures: the graph reads their current storage on every run, so an
    # optimizer step between calls is seen without recompiling.
    net = nn.Dense(2, 1, has_bias=False)
    f = jit_trace(lambda x: net(x))
    x = t([[1.0, 1.0]])
    first = f(x).asnumpy().copy()
    net.weight.set_data(net.weight * 2)
    np.testing.assert_allclose(f(x).asnumpy(), first * 2, rtol=1e-6)
    assert f.cache().compiles == 1


def test_optimizer_runs_as_a_host_call_in_program_order():
    # Optimizers update NumPy arrays in place, which no graph op can express: inside a graph the
    # optimizer call becomes a HostCall node that runs eagerly, after the ops before it. Its Python
    # result is returned as a Python object.
    net = nn.Dense(2, 1, has_bias=False)
    opt = nn.SGD(net.trainable_params(), learning_rate=0.5)
    grad_fn = ms.value_and_grad(lambda x: net(x).sum(), None, opt.parameters)

    @jit_trace
    def step(x):
        loss, grads = grad_fn(x)
        ok = opt(grads)
        return loss, ok
    w0 = net.weight.asnumpy().copy()
    loss, ok = step(t([[1.0, 2.0]]))
    assert ok is True
    np.testing.assert_allclose(net.weight.asnumpy(), w0 - 0.5 * np.array([[1.0, 2.0]]), rtol=1e-6)
    np.testing.assert_allclose(float(loss.asnumpy()), float((w0 @ [1.0, 2.0]).sum()), rtol=1e-6)


def test_branch_on_a_tensor_value_is_an_error_in_trace_mode():
    # JAX's TracerBoolConversionError: the branch would be taken on a value that does not exist yet.
    @jit_trace
    def relu_ish(x):
        if x.sum() > 0:
            return x
        return -x
    with pytest.raises(CaptureError) as info:
        relu_ish(t([1.0]))
    assert "in 'test_branch_on_a_tensor_value_is_an_error_in_trace_mode.<locals>.relu_ish'" in str(info.value)
    assert "test_semantics.py:" in str(info.value) and "in relu_ish)" in str(info.value)
    assert "capture_mode='ast'" in str(info.value)
    # the fix that works in every mode: keep the choice in the graph
    f = jit_trace(lambda x: ops.where(x.sum() > 0, x, -x))
    np.testing.assert_allclose(f(t([-1.0, -2.0])).asnumpy(), [1.0, 2.0])


def test_assigning_a_traced_value_to_a_parameter_is_refused_and_undone():
    # `w.set_data(new)` inside a trace would leave the Parameter holding a tracer (no data).
    # Parameter.set_data refuses symbolic values itself; the trace's own check (which undoes an
    # assignment that bypassed set_data) is the second line of defence. Parameters are updated by
    # optimizers (host calls).
    w = ms.Parameter(t([1.0, 2.0]), name="w")

    @jit_trace
    def f(x):
        w.set_data(w * x)
        return x
    with pytest.raises((CaptureError, OpTypeError), match="symbolic|the assignment was undone"):
        f(t([3.0, 3.0]))
    np.testing.assert_allclose(w.asnumpy(), [1.0, 2.0])


def test_state_changed_by_the_trace_itself_is_not_replayed():
    # A Python attribute written while tracing (a decode position, a step counter) is a side
    # effect that happens once. The state guard is taken *before* the trace, so the next call sees
    # the changed attribute, recompiles, and stays correct (instead of replaying stale positions).
    class Counter:
        def __init__(self):
            self.pos = 0

    c = Counter()

    @jit_trace
    def advance(x, state):
        out = x + state.pos            # reads the position (a Python constant in the graph)
        state.pos += 1                 # Python side effect: runs only while capturing
        return out
    results = [float(advance(t([0.0]), c).asnumpy()[0]) for _ in range(3)]
    assert results == [0.0, 1.0, 2.0] and c.pos == 3
    assert advance.cache().compiles == 3


@pytest.mark.parametrize("mode", ["trace", "ast", "bytecode"])
def test_a_class_attribute_the_capture_shadows_is_guarded(mode):
    # `pos` lives on the class, so before the first capture the instance's __dict__ is empty; the
    # capture reads C.pos (0) and creates the instance attribute. The guard follows what `s.pos`
    # resolves to, so the next call sees 1, recompiles, and the results equal PyNative's.
    class C:
        pos = 0

    def advance(x, s):
        out = x + s.pos
        s.pos += 1
        return out
    eager_state, graph_state = C(), C()
    expected = [float(advance(t([0.0]), eager_state).asnumpy()[0]) for _ in range(3)]
    jf = ms.jit(advance, capture_mode=mode)
    got = [float(jf(t([0.0]), graph_state).asnumpy()[0]) for _ in range(3)]
    assert expected == [0.0, 1.0, 2.0] and got == expected and graph_state.pos == 3
    assert jf.cache().compiles == 3

    # a changed class attribute is seen too
    class D:
        scale = 2.0
    d = D()
    jg = ms.jit(lambda x, o: x * o.scale, capture_mode=mode)
    assert float(jg(t([1.0]), d).asnumpy()[0]) == 2.0
    D.scale = 5.0
    assert float(jg(t([1.0]), d).asnumpy()[0]) == 5.0 and jg.cache().compiles == 2


def test_a_class_attribute_guard_respects_the_recompile_limit():
    class C:
        pos = 0
    s = C()

    @ms.jit(capture_mode="trace", recompile_limit=2)
    def advance(x, state):
        out = x + state.pos
        state.pos += 1
        return out
    with pytest.warns(RuntimeWarning, match="recompiled 2 times"):
        got = [float(advance(t([0.0]), s).asnumpy()[0]) for _ in range(4)]
    assert got == [0.0, 1.0, 2.0, 3.0]          # compiled twice, then eager: still PyNative's values
    assert advance.cache().compiles == 2


def test_a_scalar_attribute_created_by_the_capture_is_guarded():
    # the first capture sees no `calls` attribute (getattr's default) and creates it: the graph
    # baked "not set yet", so the next call, where it is set, must recompile
    class Box:
        pass
    b = Box()

    def count(x, box):
        n = getattr(box, "calls", 1)
        box.calls = n + 1
        return x * n
    jf = jit_trace(count)
    got = [float(jf(t([1.0]), b).asnumpy()[0]) for _ in range(3)]
    assert got == [1.0, 2.0, 3.0] and b.calls == 4
    assert jf.cache().compiles == 3


class _DropNet(nn.Cell):
    def __init__(self):
        super().__init__()
        self.dense = nn.Dense(4, 3)
        self.drop = nn.Dropout(p=0.5)

    def construct(self, x):
        return self.drop(self.dense(x))


_DROP_NET = _DropNet()


def _drop_forward(x):
    return (_DROP_NET(x) ** 2).sum()


_DROP_GRAD = ms.value_and_grad(_drop_forward, None, _DROP_NET.trainable_params())


@pytest.mark.parametrize("mode", ["trace", "ast", "bytecode"])
def test_the_state_of_a_net_behind_a_global_value_and_grad_is_guarded(mode):
    # `step` names only the global `_DROP_GRAD`; the net it differentiates is a global of the
    # function value_and_grad wraps. Its `training` flag must still be guarded: set_train(False)
    # selects a graph without dropout (equal to PyNative's eval values), set_train(True) the first.
    def step(x):
        loss, grads = _DROP_GRAD(x)
        return loss, grads[0]
    jf = ms.jit(step, capture_mode=mode)
    x = t(np.random.default_rng(3).standard_normal((16, 4)))
    ms.set_seed(1)
    _DROP_NET.set_train(True)
    jf(x)
    _DROP_NET.set_train(False)
    try:
        loss, g = jf(x)
        ref_loss, ref_grads = _DROP_GRAD(x)
        np.testing.assert_allclose(loss.asnumpy(), ref_loss.asnumpy(), rtol=1e-6)
        np.testing.assert_allclose(g.asnumpy(), ref_grads[0].asnumpy(), rtol=1e-5, atol=1e-6)
        assert jf.cache().compiles == 2
        _DROP_NET.set_train(True)
        train_loss, _ = jf(x)
        assert jf.cache().compiles == 2                     # the train graph is reused
        assert abs(float(train_loss.asnumpy()) - float(ref_loss.asnumpy())) > 1e-3   # dropout is on
    finally:
        _DROP_NET.set_train(False)


def test_writing_a_graph_value_into_an_outside_tensor_names_the_ast_mode():
    buf = t(np.zeros(3))

    @ms.jit(capture_mode="ast")
    def f(x):
        buf[0] = x.sum()
        return x
    with pytest.raises(CaptureError, match="test_semantics.py") as e:
        f(t([1.0, 2.0]))
    assert "capture_mode='ast'" in str(e.value) and "capture_mode='trace'" not in str(e.value)


def test_writing_a_graph_value_into_an_outside_tensor_breaks_the_graph_in_bytecode_mode():
    # bytecode: the write needs the value now, so it is a graph break: the graph before it runs,
    # the write happens eagerly (on every call, like PyNative), capture resumes after it
    from minispore.graph import explain
    buf = t(np.zeros(3))

    def f(x):
        buf[0] = x.sum()
        return x * 2
    jf = ms.jit(f, capture_mode="bytecode")
    np.testing.assert_allclose(jf(t([1.0, 2.0])).asnumpy(), [2.0, 4.0])
    np.testing.assert_allclose(buf.asnumpy(), [3.0, 0.0, 0.0])
    np.testing.assert_allclose(jf(t([5.0, 6.0])).asnumpy(), [10.0, 12.0])
    np.testing.assert_allclose(buf.asnumpy(), [11.0, 0.0, 0.0])
    assert jf.cache().compiles == 1
    assert len(explain(jf, t([1.0, 2.0])).breaks) >= 1
