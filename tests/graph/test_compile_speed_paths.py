"""The fast paths of graph verification and O1 fusion for lazy_inline-style graphs.

A lazy_inline model's top graph calls the same layer graphs from every layer. `verify` checks each
Call node's signature with one list comparison against the callee's avals (listed once per verify),
and the output/input checks run inline; these tests make sure the shortcuts still catch every
broken invariant in any layer, with the same message as the value-by-value checks, and that each
shared callee is verified (and planned) once; and that the O0 plan (slots, frees, dtypes)
equals a value-by-value reference.
"""
import numpy as np
import pytest

import minispore as ms
from minispore.common import dtype as mstype
from minispore.graph import CALL, GraphBuilder, GraphVerifyError, O0Executor, Value, verify
from minispore.ops.primitive import AbstractTensor, get_primitive

F32, F16 = mstype.float32, mstype.float16
add, mul = get_primitive("add"), get_primitive("mul")


def A(*shape, dtype=F32):
    return AbstractTensor(shape, dtype)


def layer_graph():
    """One 'layer': y = x * w + b (w, b are the layer's weights, passed in as a Call would)."""
    b = GraphBuilder("layer")
    x, w, bias = b.param(A(2, 3)), b.param(A(2, 3)), b.param(A(2, 3))
    h = b.add_node(mul, [x, w], {}, A(2, 3)).outputs[0]
    y = b.add_node(add, [h, bias], {}, A(2, 3)).outputs[0]
    return b.finish([y, h])


def stacked(n_layers, weights=None, bad_layer=None, bad_aval=None, callee=None):
    """A top graph calling `layer` n times, each layer with its own captured weights (fresh avals,
    as captures make them). `bad_layer`: that layer's Call gets `bad_aval` as its first input."""
    layer = callee or layer_graph()
    b = GraphBuilder("top")
    h = b.param(A(2, 3))
    weights = weights or [(ms.Tensor(np.full((2, 3), i, np.float32)), ms.Tensor(np.ones((2, 3), np.float32)))
                          for i in range(n_layers)]
    for i, (w, bias) in enumerate(weights):
        x = h
        if i == bad_layer:
            x = b.param(bad_aval)
        node = b.add_structural(CALL, [x, b.capture(w), b.capture(bias)], {"graph": layer}, [A(2, 3), A(2, 3)])
        h = node.outputs[0]
    return b.finish([h]), layer, weights


def test_many_calls_to_one_callee_verify_and_run():
    g, layer, weights = stacked(20)
    verify(g)
    ex = O0Executor(g)
    subs = {id(s.sub) for s in ex.plan.steps if s.node.op is CALL}
    assert len(subs) == 1                                   # one plan for the shared callee
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    want = x.astype(np.float64)
    for w, bias in weights:
        want = want * w.asnumpy() + bias.asnumpy()
    np.testing.assert_allclose(ex.run(x)[0], want, rtol=1e-6)


@pytest.mark.parametrize("bad_aval, shown", [(A(2, 4), "f32[2,4]"), (A(2, 3, dtype=F16), "f16[2,3]")])
def test_wrong_input_in_layer_17_is_reported(bad_aval, shown):
    g, _, _ = stacked(20, bad_layer=17, bad_aval=bad_aval)
    with pytest.raises(GraphVerifyError) as e:
        verify(g)
    msg = str(e.value)
    assert "graph 'top' is invalid: Call.graph 'layer' takes (f32[2,3], f32[2,3], f32[2,3])" in msg
    assert f"is given ({shown}, f32[2,3], f32[2,3])" in msg


def test_wrong_recorded_output_in_a_late_layer_is_reported():
    g, layer, _ = stacked(20)
    call = [n for n in g.nodes if n.op is CALL][17]
    call.outputs[1].aval = A(3, 2)          # the node claims an output the callee does not return
    with pytest.raises(GraphVerifyError, match=r"Call.graph 'layer' returns \(f32\[2,3\], f32\[2,3\]\), "
                                               r"expected \(f32\[2,3\], f32\[3,2\]\)"):
        verify(g)


def test_output_not_pointing_back_in_a_late_layer_is_reported():
    g, _, _ = stacked(20)
    calls = [n for n in g.nodes if n.op is CALL]
    calls[18].outputs[1].producer = (calls[17], 1)
    with pytest.raises(GraphVerifyError, match="output 1 does not point back to its node"):
        verify(g)


def test_value_defined_twice_by_a_late_call_is_reported():
    g, _, _ = stacked(20)
    calls = [n for n in g.nodes if n.op is CALL]
    node = calls[18]
    dup = Value(A(2, 3), "node", producer=(node, 1))
    dup.id = calls[3].outputs[1].id                 # the id of a value defined 15 layers earlier
    node.outputs = (node.outputs[0], dup)
    with pytest.raises(GraphVerifyError, match=f"value #{dup.id} is defined twice"):
        verify(g)


def test_input_from_a_later_layer_is_reported():
    g, _, _ = stacked(20)
    calls = [n for n in g.nodes if n.op is CALL]
    late = calls[19].outputs[1]
    calls[17].inputs = (late,) + calls[17].inputs[1:]
    with pytest.raises(GraphVerifyError, match=f"uses value #{late.id} before it is defined"):
        verify(g)


def test_a_broken_callee_is_reported_once_shared():
    layer = layer_graph()
    late = layer.nodes[1].outputs[0]
    layer.nodes[0].inputs = (late, layer.params[1])            # mul reads add's result before add runs
    g, _, _ = stacked(5, callee=layer)
    with pytest.raises(GraphVerifyError, match=f"graph 'layer' is invalid: uses value #{late.id} before"):
        verify(g)


def test_constant_input_to_a_call_uses_the_full_check():
    layer = layer_graph()
    b = GraphBuilder("top")
    x = b.param(A(2, 3))
    node = b.add_structural(CALL, [x, 2.0, x], {"graph": layer}, [A(2, 3), A(2, 3)])
    g = b.finish([node.outputs[0]])
    with pytest.raises(GraphVerifyError, match=r"takes \(f32\[2,3\], f32\[2,3\], f32\[2,3\]\) but is given "
                                               r"\(f32\[2,3\], 2.0, f32\[2,3\]\)"):
        verify(g)


def test_capture_resized_after_capture_is_reported_in_a_late_layer():
    g, _, weights = stacked(20)
    weights[17][0]._data = np.ones((3, 2), np.float32)
    with pytest.raises(GraphVerifyError, match=r"was f32\[2,3\] but the tensor is now f32\[3,2\]"):
        verify(g)


def test_each_verify_rereads_the_callee():
    """The callee's avals are listed once per verify, not kept: a callee changed between two
    verifies is seen by the second."""
    g, layer, _ = stacked(4)
    verify(g)
    layer.params[0].aval = A(2, 4)
    with pytest.raises(GraphVerifyError, match=r"Call.graph 'layer' takes \(f32\[2,4\]"):
        verify(g)


def test_node_subclass_of_value_inputs_still_checked():
    class MyValue(Value):
        __slots__ = ()

    g, _, _ = stacked(3)
    call = [n for n in g.nodes if n.op is CALL][2]
    stray = MyValue(A(2, 3), "param")
    call.inputs = (stray,) + call.inputs[1:]
    with pytest.raises(GraphVerifyError, match=f"uses value #{stray.id} before it is defined"):
        verify(g)


def test_o1_fusion_of_many_calls_keeps_results():
    """O1 rebuilds the top graph around fused callees; the barrier shortcuts keep every Call in
    order and the result equals O0's."""
    pytest.importorskip("cffi")

    from minispore.graph.run import O1Executor
    g, _, weights = stacked(12)
    ex1, ex0 = O1Executor(g), O0Executor(g)
    verify(ex1.graph)
    assert [n.op for n in ex1.graph.nodes] == [CALL] * 12
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_allclose(ex1.run(x)[0], ex0.run(x)[0], rtol=1e-6)


# -- the O0 plan: frees, slots and dtypes against a value-by-value reference -------------------------------
def _reference_frees(g):
    """Slots (by value) to free after each node, computed naively: a node output after its last
    reader (its own node when unread), a param after its last reader, graph outputs never; node
    outputs in schedule order first, then params."""
    kept = {id(o) for o in g.outputs if isinstance(o, Value)}
    last = {}
    for i, node in enumerate(g.nodes):
        for x in node.inputs:
            if isinstance(x, Value):
                last[id(x)] = i
    frees = [[] for _ in g.nodes]
    for i, node in enumerate(g.nodes):
        for o in node.outputs:
            if id(o) not in kept:
                frees[last.get(id(o), i)].append(o)
    for p in g.params:
        if id(p) not in kept and id(p) in last:
            frees[last[id(p)]].append(p)
    return frees


def mixed_graph():
    """Wide Calls (captured weights), a constant input, an unread output, a param returned as an
    output and a param read only by the first node."""
    layer = layer_graph()
    b = GraphBuilder("mixed")
    x, y, z = b.param(A(2, 3)), b.param(A(2, 3)), b.param(A(2, 3))
    scaled = b.add_node(mul, [x, 2.0], {}, A(2, 3)).outputs[0]
    b.add_node(add, [scaled, y], {}, A(2, 3))                     # read by nobody
    h = scaled
    for i in range(10):
        w = b.capture(ms.Tensor(np.full((2, 3), i + 1, np.float32)))
        bias = b.capture(ms.Tensor(np.ones((2, 3), np.float32)))
        h = b.add_structural(CALL, [h, w, bias], {"graph": layer}, [A(2, 3), A(2, 3)]).outputs[0]
    return b.finish([h, z, scaled])


@pytest.mark.parametrize("make", [lambda: stacked(20)[0], mixed_graph])
def test_plan_frees_and_slots_match_a_naive_reference(make):
    g = make()
    verify(g)
    ex = O0Executor(g)
    plan = ex.plan
    slot_value = plan.slot_value
    for step, node, want in zip(plan.steps, g.nodes, _reference_frees(g)):
        assert [slot_value[s] for s in step.frees] == [v.id for v in want]
        assert [slot_value[s] for s in step.outs] == [o.id for o in node.outputs]
        assert [slot_value.get(s) for s in step.ins] == [x.id if isinstance(x, Value) else None for x in node.inputs]
        for s, x in zip(step.ins, node.inputs):            # constants sit in the template
            if not isinstance(x, Value):
                assert plan.template[s] == x
        assert step.npdt == tuple(o.aval.dtype.np for o in node.outputs)
    assert [slot_value.get(s) for s in plan.out_slots] == [o.id for o in g.outputs]
    assert [slot_value[s] for s, _ in plan.capture_slots] == [v.id for v, _ in g.captures]


def test_mixed_plan_runs_and_frees_what_the_reference_frees():
    g = mixed_graph()
    ex = O0Executor(g, record_live=True)
    x, y, z = (np.full((2, 3), v, np.float32) for v in (1.0, 2.0, 3.0))
    h, z_out, scaled = ex.run(x, y, z)
    want = x.astype(np.float64) * 2
    for i in range(10):
        want = want * (i + 1) + 1
    np.testing.assert_allclose(h, want, rtol=1e-6)
    np.testing.assert_array_equal(z_out, z)
    np.testing.assert_array_equal(scaled, x * 2)
    # live after each step: params, captures and node outputs so far, less what the reference freed
    defined, freed = {p.id for p in g.params} | {v.id for v, _ in g.captures}, set()
    for node, live, frees in zip(g.nodes, ex.live_trace, _reference_frees(g)):
        defined |= {o.id for o in node.outputs}
        freed |= {v.id for v in frees}
        assert live == defined - freed
