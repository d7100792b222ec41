"""The IR, printer, verifier and O0 executor on hand-built graphs.

Control-flow nodes (If, While, Call) and host calls are built by hand here, exactly as the ast
capture mode will emit them, and each run is checked against NumPy and against `interpret` (the
same graph evaluated op by op in PyNative).
"""
import numpy as np
import pytest

import minispore as ms
from minispore.common import dtype as mstype
from minispore.graph import (CALL, HOST_CALL, IF, OPAQUE, WHILE, GraphBuilder, GraphVerifyError, O0Executor,
                             Slot, Value, format_graph, interpret, verify)
from minispore.graph.ir import Graph, Node
from minispore.ops.primitive import AbstractTensor, Primitive, get_primitive

F32 = mstype.float32
add, mul, sub, relu = (get_primitive(n) for n in ("add", "mul", "sub", "relu"))
less, reduce_sum, greater, gather = (get_primitive(n) for n in ("less", "reduce_sum", "greater", "gather"))


def A(*shape, dtype=F32):
    return AbstractTensor(shape, dtype)


def add_prim(b, prim, inputs, **attrs):
    """Append a primitive node with avals from its own inference rule (what a capture mode does)."""
    args = [x.aval if isinstance(x, Value) else x for x in inputs]
    avals = prim.infer(*args, **attrs)
    node = b.add_node(prim, inputs, attrs, avals)
    return node.outputs if node.multi else node.outputs[0]


def straight_graph():
    b = GraphBuilder("f")
    x, y = b.param(A(2, 3)), b.param(A(2, 3))
    s = add_prim(b, add, [add_prim(b, mul, [x, y]), 1.0])
    return b.finish([add_prim(b, relu, [s])])


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# -- printer -------------------------------------------------------------------------------------
def test_printer_one_line_per_node_with_types():
    text = format_graph(straight_graph())
    assert text.splitlines() == [
        "graph f(%0: f32[2,3], %1: f32[2,3]) {",
        "  %2 = mul(%0, %1) : f32[2,3]",
        "  %3 = add(%2, 1.0) : f32[2,3]",
        "  %4 = relu(%3) : f32[2,3]",
        "  return %4",
        "}"]


def test_printer_shows_attrs_multi_outputs_and_captures():
    w = ms.Parameter(ms.Tensor(np.ones((3,), np.float32)), name="w")
    b = GraphBuilder("g")
    x = b.param(A(2, 3))
    cw = b.capture(w)
    s = add_prim(b, reduce_sum, [add_prim(b, add, [x, cw])], axis=(1,), keep_dims=True)
    out, mask = add_prim(b, get_primitive("dropout"), [s], p=0.5, seed=None)
    text = format_graph(b.finish([out, mask]))
    assert text.splitlines()[1] == "  %1 = capture Parameter 'w' : f32[3]"
    assert "reduce_sum(%2) {axis=(1,), keep_dims=True} : f32[2,1]" in text
    assert "(%4, %5) = dropout(%3) {p=0.5, seed=None} : (f32[2,1], b[2,1])" in text


# -- verifier -------------------------------------------------------------------------------------
def test_verifier_accepts_a_good_graph():
    verify(straight_graph())


def test_verifier_rejects_use_before_definition():
    g = straight_graph()
    g.nodes[0], g.nodes[1] = g.nodes[1], g.nodes[0]
    with pytest.raises(GraphVerifyError, match="before it is defined"):
        verify(g)


def test_verifier_rejects_a_value_defined_twice():
    g = straight_graph()
    g.params.append(g.params[0])
    with pytest.raises(GraphVerifyError, match="defined twice"):
        verify(g)


def test_verifier_rechecks_avals_with_the_inference_rule():
    g = straight_graph()
    g.nodes[0].outputs[0].aval = A(3, 2)                 # a pass "forgot" the shape
    with pytest.raises(GraphVerifyError, match=r"recorded as f32\[3,2\] but inference gives f32\[2,3\]"):
        verify(g)
    g = straight_graph()
    g.nodes[2].outputs[0].aval = A(2, 3, dtype=mstype.float16)
    with pytest.raises(GraphVerifyError, match="inference gives f32"):
        verify(g)


def test_verifier_rejects_inputs_inference_refuses():
    b = GraphBuilder("bad")
    x, y = b.param(A(2, 3)), b.param(A(4, 5))
    node = Node(add, [x, y], {}, (), False)
    node.outputs = (Value(A(2, 3), "node", producer=(node, 0)),)
    b.nodes.append(node)
    with pytest.raises(GraphVerifyError, match="inference rejects"):
        verify(b.finish([node.outputs[0]]))


def test_verifier_rejects_an_undefined_output():
    g = straight_graph()
    g.outputs = [Value(A(2, 3), "param")]
    with pytest.raises(GraphVerifyError, match="not defined in this graph"):
        verify(g)


# -- If / While / Call ------------------------------------------------------------------------
def branch(name, prim, const):
    b = GraphBuilder(name)
    x = b.param(A(2, 3))
    return b.finish([add_prim(b, prim, [x, const])])


def if_graph():
    b = GraphBuilder("choose")
    x = b.param(A(2, 3))
    cond = add_prim(b, greater, [add_prim(b, reduce_sum, [x], axis=(), keep_dims=False), 0.0])
    node = b.add_structural(IF, [cond, x], {"then_graph": branch("choose.then", mul, 2.0),
                                            "else_graph": branch("choose.else", sub, 1.0)}, [A(2, 3)])
    return b.finish([node.outputs[0]])


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_if_runs_the_branch_its_condition_picks(sign):
    g = if_graph()
    verify(g)
    x = np.abs(rand(2, 3)) * sign
    expected = x * 2.0 if x.sum() > 0 else x - 1.0
    out = O0Executor(g).run(x)[0]
    np.testing.assert_allclose(out, expected, rtol=1e-6)
    ref = interpret(g, {g.params[0].id: ms.Tensor(x)})[0]
    np.testing.assert_allclose(ref.asnumpy(), expected, rtol=1e-6)
    text = format_graph(g)
    assert "(%3) = If(%2, %0) {then_graph=@choose.then, else_graph=@choose.else} : (f32[2,3])" in text
    assert "graph choose.then(%0: f32[2,3]) {" in text


def test_if_with_mismatched_branch_is_rejected():
    g = if_graph()
    g.nodes[-1].attrs["else_graph"] = branch("wide", add, 1.0)
    g.nodes[-1].attrs["else_graph"].params[0].aval = A(2, 4)
    with pytest.raises(GraphVerifyError, match=r"If.else_graph 'wide' takes \(f32\[2,4\]\)"):
        verify(g)


def while_graph(limit):
    """(i, acc) -> while i < limit: (i + 1, acc * 2)."""
    i64 = A(dtype=mstype.int64)
    cb = GraphBuilder("loop.cond")
    i, acc = cb.param(i64), cb.param(A(3))
    cond = cb.finish([add_prim(cb, less, [i, limit])])
    bb = GraphBuilder("loop.body")
    i, acc = bb.param(i64), bb.param(A(3))
    body = bb.finish([add_prim(bb, add, [i, 1]), add_prim(bb, mul, [acc, 2.0])])
    b = GraphBuilder("loop")
    i0, a0 = b.param(i64), b.param(A(3))
    node = b.add_structural(WHILE, [i0, a0], {"cond_graph": cond, "body_graph": body}, [i64, A(3)])
    return b.finish(list(node.outputs))


def test_while_loops_until_its_condition_is_false():
    g = while_graph(5)
    verify(g)
    acc = rand(3)
    i_out, acc_out = O0Executor(g).run(np.asarray(1, np.int64), acc)
    assert int(i_out) == 5
    np.testing.assert_allclose(acc_out, acc * 16.0, rtol=1e-6)        # 4 iterations: 1,2,3,4
    ref = interpret(g, {g.params[0].id: ms.Tensor(np.asarray(1, np.int64)), g.params[1].id: ms.Tensor(acc)})
    np.testing.assert_allclose(ref[1].asnumpy(), acc * 16.0, rtol=1e-6)
    i_out, acc_out = O0Executor(g).run(np.asarray(7, np.int64), acc)   # condition false at once
    assert int(i_out) == 7
    np.testing.assert_array_equal(acc_out, acc)


def test_while_body_must_preserve_the_carry():
    g = while_graph(5)
    body = g.nodes[0].attrs["body_graph"]
    body.outputs = body.outputs[:1]
    with pytest.raises(GraphVerifyError, match="While.body_graph 'loop.body' returns"):
        verify(g)


def test_call_runs_the_callee_and_checks_its_signature():
    cb = GraphBuilder("square_plus_one")
    a = cb.param(A(2, 3))
    callee = cb.finish([add_prim(cb, add, [add_prim(cb, mul, [a, a]), 1.0])])
    b = GraphBuilder("main")
    x = b.param(A(2, 3))
    node = b.add_structural(CALL, [x], {"graph": callee}, [A(2, 3)])
    g = b.finish([add_prim(b, add, [node.outputs[0], x])])
    verify(g)
    x = rand(2, 3)
    np.testing.assert_allclose(O0Executor(g).run(x)[0], x * x + 1 + x, rtol=1e-6)
    callee.params[0].aval = A(3, 2)
    with pytest.raises(GraphVerifyError, match="Call.graph 'square_plus_one' takes"):
        verify(g)


def test_subgraphs_are_closed():
    """A subgraph may not use a Value of the enclosing graph: operands must be passed in."""
    b = GraphBuilder("outer")
    x = b.param(A(2, 3))
    sb = GraphBuilder("inner")
    sb.param(A(2, 3))
    inner = sb.finish([add_prim(sb, add, [x, 1.0])])        # uses the outer `x`
    node = b.add_structural(CALL, [x], {"graph": inner}, [A(2, 3)])
    with pytest.raises(GraphVerifyError, match="graph 'inner' is invalid: uses value"):
        verify(b.finish([node.outputs[0]]))


# -- host calls and captures -------------------------------------------------------------------------
def test_host_call_runs_in_program_order_and_captures_are_reloaded():
    """A host call that replaces a Parameter's storage (set_data) is seen by the nodes after it."""
    w = ms.Parameter(ms.Tensor(np.full((3,), 1.0, np.float32)), name="w")
    seen = []

    def bump(t, scale=1.0):
        seen.append(t.asnumpy().copy())
        w.set_data(ms.Tensor(w.asnumpy() + scale))        # new storage, not an in-place write
        return "done"

    b = GraphBuilder("host")
    x = b.param(A(3))
    cw = b.capture(w)
    before = add_prim(b, add, [x, cw])
    node = b.add_structural(HOST_CALL, [before], {"fn": bump, "template": ((Slot(0),), {"scale": 10.0}),
                                                  "name": "bump"}, [OPAQUE])
    after = add_prim(b, add, [x, cw])
    g = b.finish([before, node.outputs[0], after])
    verify(g)
    x = rand(3)
    out_before, token, out_after = O0Executor(g).run(x)
    np.testing.assert_allclose(out_before, x + 1.0, rtol=1e-6)
    np.testing.assert_allclose(seen[0], x + 1.0, rtol=1e-6)
    assert token == "done"
    np.testing.assert_allclose(out_after, x + 11.0, rtol=1e-6)
    assert "  (%3) = HostCall[bump](%2) : (py)" in format_graph(g).splitlines()


def test_host_call_template_must_use_every_input():
    b = GraphBuilder("host")
    x = b.param(A(3))
    b.add_structural(HOST_CALL, [x], {"fn": print, "template": ((), {}), "name": "print"}, [OPAQUE])
    with pytest.raises(GraphVerifyError, match="template uses slots"):
        verify(b.finish([]))


def test_capture_that_changed_shape_is_reported():
    w = ms.Parameter(ms.Tensor(np.ones((3,), np.float32)), name="w")
    b = GraphBuilder("cap")
    x = b.param(A(3))
    g = b.finish([add_prim(b, add, [x, b.capture(w)])])
    w.set_data(ms.Tensor(np.ones((4,), np.float32)), slice_shape=True)
    with pytest.raises(GraphVerifyError, match=r"capture 'w' was f32\[3\] but the tensor is now f32\[4\]"):
        verify(g)


# -- executor: memory, dtypes, errors ---------------------------------------------------------------
def test_buffers_are_freed_after_their_last_use():
    """live values after each step == values defined so far and still needed (an independent
    reference computed from the node list, not from the executor's plan)."""
    b = GraphBuilder("chain")
    x = b.param(A(4))
    a = add_prim(b, add, [x, 1.0])          # 0: x last used at 2
    c = add_prim(b, mul, [a, 2.0])          # 1: a last used at 3
    d = add_prim(b, add, [c, x])            # 2: c last used here
    e = add_prim(b, sub, [d, a])            # 3
    f = add_prim(b, relu, [e])              # 4
    g = b.finish([f, d])                    # d is an output: kept to the end
    ex = O0Executor(g, record_live=True)
    x_arr = rand(4)
    out_f, out_d = ex.run(x_arr)
    np.testing.assert_allclose(out_f, np.maximum((x_arr + 1) * 2 + x_arr - (x_arr + 1), 0), rtol=1e-6)

    uses = {}
    for i, node in enumerate(g.nodes):
        for v in node.inputs:
            if isinstance(v, Value):
                uses.setdefault(v.id, []).append(i)
    outputs = {o.id for o in g.outputs}
    for i, live in enumerate(ex.live_trace):
        defined = [x] + [n.outputs[0] for n in g.nodes[:i + 1]]
        expected = {v.id for v in defined if v.id in outputs or any(u > i for u in uses.get(v.id, []))}
        assert live == expected, f"after step {i}"
    assert ex.live_trace[-1] == {f.id, d.id}


def test_kernel_results_are_cast_to_the_inferred_dtype():
    """A backend kernel may compute in float64; the executor conforms it, as PyNative does."""
    p = Primitive("test_double", lambda x: AbstractTensor(x.shape, x.dtype), lambda a: a.astype(np.float64) * 2)
    b = GraphBuilder("cast")
    x = b.param(A(3))
    g = b.finish([add_prim(b, p, [x])])
    out = O0Executor(g).run(np.ones(3, np.float32))[0]
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, [2, 2, 2])


def test_kernel_failure_at_run_time_names_the_node_and_graph():
    """An index known only at run time is out of range: a minispore error, not a NumPy traceback."""
    b = GraphBuilder("lookup")
    table, idx = b.param(A(4, 2)), b.param(A(3, dtype=mstype.int64))
    g = b.finish([add_prim(b, gather, [table, idx], axis=0, batch_dims=0)])
    out = O0Executor(g).run(rand(4, 2), np.array([0, 3, 1]))
    assert out[0].shape == (3, 2)
    with pytest.raises((ms.OpValueError, IndexError)) as info:
        O0Executor(g).run(rand(4, 2), np.array([0, 9, 1]))
    assert "gather" in str(info.value) and "graph 'lookup'" in str(info.value)


def test_executor_checks_the_number_of_inputs():
    with pytest.raises(ms.MinisporeRuntimeError, match="takes 2 inputs, got 1"):
        O0Executor(straight_graph()).run(rand(2, 3))


def test_graph_helpers():
    g = if_graph()
    assert [x.name for x in g.all_graphs()] == ["choose", "choose.then", "choose.else"]
    assert g.num_nodes() == 5 and g.num_nodes(recursive=False) == 3
    assert isinstance(g, Graph) and "3 nodes" in repr(g)
