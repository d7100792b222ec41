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
| x[i] = v into a captured tensor| writes                    | value from the graph: refused; constant: once |
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


def test_mutable_globals_are_guarded_by_identity_only():
    # Only the identity of a mutable object is guarded: changing its contents is not seen.
    # (Keep tensors and numbers in globals, or pass values as arguments.)
    table = [1.0, 2.0]

    @jit_trace
    def f(x):
        return x * table[0]
    f(t([1.0]))
    table[0] = 10.0
    np.testing.assert_allclose(f(t([1.0])).asnumpy(), [1.0])      # still the captured 1.0


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
