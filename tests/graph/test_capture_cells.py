"""How a capture meets jitted functions and Cells without importing minispore.jit (trace/cells.py),
and the explicit table of capture modes (capture/registry.py)."""
import numpy as np
import pytest

import minispore as ms
from minispore import nn, ops
from minispore.graph.capture import registry
from minispore.graph.trace.cells import HostCellCall, cell_body, is_jitted, jitted_target


def t(a):
    return ms.Tensor(np.asarray(a, dtype=np.float32))


def test_a_jitted_callable_is_recognised_by_its_mark_and_names_what_it_compiles():
    def f(x):
        return x + 1

    class Holder:
        @ms.jit
        def g(self, x):
            return x * 2
    h = Holder()
    jf = ms.jit(f)
    assert is_jitted(jf) and jitted_target(jf) == (f, ())
    fn, leading = jitted_target(h.g)                         # bound to an instance: `self` leads
    assert fn is Holder.__dict__["g"].fn and leading == (h,)
    assert not is_jitted(f) and jitted_target(f) is None and jitted_target(3) is None


def test_any_type_carrying_the_mark_is_inlined_by_an_ast_capture():
    calls = []

    class MyJitted:                                          # not minispore.jit's class: only the protocol
        __minispore_jit__ = True

        def capture_target(self):
            return helper, (t([10.0, 20.0]),)

    def helper(bias, x):
        calls.append(type(x).__name__)
        return ops.exp(x) + bias

    inner = MyJitted()

    @ms.jit(capture_mode="ast")
    def outer(x):
        return inner(x) * 3.0

    x = np.array([0.5, -1.0], np.float32)
    np.testing.assert_allclose(outer(t(x)).asnumpy(), (np.exp(x.astype(np.float64)) + [10, 20]) * 3, rtol=1e-6)
    np.testing.assert_allclose(outer(t(x)).asnumpy(), (np.exp(x.astype(np.float64)) + [10, 20]) * 3, rtol=1e-6)
    assert len(calls) == 1                                   # interpreted once, at capture, then cached


@pytest.mark.parametrize("mode", ["trace", "ast", "bytecode"])
def test_a_jitted_function_called_during_a_capture_is_inlined_not_compiled(mode):
    inner = ms.jit(lambda x: ops.sin(x) * 2.0, capture_mode="trace")

    @ms.jit(capture_mode=mode)
    def outer(x):
        return inner(x) + 1.0

    x = np.array([0.25, 1.5, -2.0], np.float32)
    np.testing.assert_allclose(outer(t(x)).asnumpy(), np.sin(x.astype(np.float64)) * 2 + 1, rtol=1e-6)
    assert inner.cache().compiles == 0 and outer.cache().compiles == 1


def test_graph_mode_compiles_a_cell_as_cell_body_and_hosts_optimizers_as_host_cell_calls():
    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.w = ms.Parameter(t([1.0, 2.0]), name="w")

        def construct(self, x):
            return x * self.w

    net = Net()
    ms.set_context(mode=ms.GRAPH_MODE)
    try:
        out = net(t([3.0, 4.0]))
    finally:
        ms.set_context(mode=ms.PYNATIVE_MODE)
    np.testing.assert_allclose(out.asnumpy(), [3.0, 8.0])
    from minispore.jit import cell_graph_function
    assert cell_graph_function(net).fn is cell_body
    host = HostCellCall(net)
    np.testing.assert_allclose(host(t([1.0, 1.0])).asnumpy(), [1.0, 2.0])     # the cell's plain Python call


def test_the_built_in_modes_are_listed_in_the_registry():
    from minispore.graph.capture.ast_mode import capture_ast
    from minispore.graph.capture.bytecode import capture_bytecode
    from minispore.graph.trace import capture_trace
    assert registry._MODES["trace"] is capture_trace and registry._MODES["ast"] is capture_ast
    assert registry._MODES["bytecode"] is capture_bytecode
    with pytest.raises(TypeError, match="expected a callable for 'mine'"):
        registry.register_capture_mode("mine", 3)
