"""The API the ast and bytecode capture modes build on, exercised the way they will use it.

An ast capture meets `if x.sum() > 0: y = x * w else: y = x - 1` and must emit an If node whose
branches are closed subgraphs. With `TraceSession.subgraph`, each branch is traced as ordinary
tensor code; tracers of the enclosing function used inside a branch are lifted into branch params
automatically, and `unify_lifted` gives both branches the same params.
"""
import numpy as np
import pytest

import minispore as ms
from minispore.common import dtype as mstype
from minispore.graph import IF, WHILE, O0Executor, Slot, format_graph, verify
from minispore.graph.capture import CaptureResult
from minispore.graph.trace import TraceSession, unify_lifted
from minispore.ops.primitive import AbstractTensor


def t(a, dtype=np.float32):
    return ms.Tensor(np.asarray(a, dtype=dtype))


W = ms.Parameter(t([2.0, 3.0, 4.0]), name="w")


def build_if_graph():
    """What an ast capture of this function would emit:

        def f(x):
            if x.sum() > 0:
                y = x * w
            else:
                y = x - 1
            return y + 1
    """
    s = TraceSession("f", None)
    x = s.param(AbstractTensor((3,), mstype.float32), "x")
    with s.running():
        cond = x.sum() > 0
        with s.subgraph("f.then") as then_s:
            then_g, _ = then_s.finish(x * W)            # x is lifted, W captured
        with s.subgraph("f.else") as else_s:
            else_g, _ = else_s.finish(x - 1)
        operands = unify_lifted([(then_s, then_g), (else_s, else_g)])
        (y,) = s.emit(IF, [cond] + operands, {"then_graph": then_g, "else_graph": else_g},
                      [AbstractTensor((3,), mstype.float32)])
        graph, _ = s.finish(y + 1)
    return graph


@pytest.mark.parametrize("x", [[1.0, 2.0, 3.0], [-1.0, -2.0, 0.5]])
def test_subgraphs_lift_outer_values_and_run(x):
    g = build_if_graph()
    verify(g)
    x = np.asarray(x, np.float32)
    expected = (x * W.asnumpy() if x.sum() > 0 else x - 1) + 1
    np.testing.assert_allclose(O0Executor(g).run(x)[0], expected, rtol=1e-6)
    text = format_graph(g)
    assert "graph f.then(%0: f32[3]) {\n  %1 = capture Parameter 'w' : f32[3]\n" in text
    assert "graph f.else(%0: f32[3]) {" in text


def test_unify_lifted_gives_branches_the_same_params():
    s = TraceSession("g", None)
    a = s.param(AbstractTensor((2,), mstype.float32))
    b = s.param(AbstractTensor((2,), mstype.float32))
    with s.running():
        with s.subgraph("then") as th:
            tg, _ = th.finish(a * 2)                  # uses a only
        with s.subgraph("else") as el:
            eg, _ = el.finish(b + a)                  # uses b, then a
        operands = unify_lifted([(th, tg), (el, eg)])
    assert [o.id for o in operands] == [a.value.id, b.value.id]
    assert len(tg.params) == len(eg.params) == 2
    verify(tg)
    verify(eg)
    np.testing.assert_allclose(O0Executor(eg).run(np.ones(2, np.float32), np.full(2, 3.0, np.float32))[0], [4, 4])


def test_nested_subgraphs_lift_through_every_level():
    s = TraceSession("outer", None)
    x = s.param(AbstractTensor((2,), mstype.float32))
    with s.running():
        with s.subgraph("mid") as mid:
            with mid.subgraph("inner") as inner:
                ig, _ = inner.finish(x * 3)
            assert inner.lifted[0][0] is mid.lifted[0][1]       # inner's operand is mid's param
            assert mid.lifted[0][0] is x.value


def test_a_while_loop_built_from_traced_bodies():
    """while i < 5: i = i + 1; acc = acc * x   (x lifted, i and acc the carry)."""
    s = TraceSession("power", None)
    x = s.param(AbstractTensor((2,), mstype.float32), "x")
    i64, f2 = AbstractTensor((), mstype.int64), AbstractTensor((2,), mstype.float32)
    with s.running():
        with s.subgraph("power.cond") as cs:
            i, acc = cs.param(i64), cs.param(f2)
            cond_g, _ = cs.finish(i < 5)
        with s.subgraph("power.body") as bs:
            i, acc = bs.param(i64), bs.param(f2)
            body_g, _ = bs.finish((i + 1, acc * x))
        extra = unify_lifted([(cs, cond_g), (bs, body_g)])
        assert extra                                           # x was lifted by the body
        # the lifted x joins the carry (While's body maps carry -> carry): the body passes it on
        body_g.outputs.append(body_g.params[2])
        zero, ones = ms.Tensor(np.asarray(0, np.int64)), t([1.0, 1.0])
        outs = s.emit(WHILE, [zero, ones] + extra, {"cond_graph": cond_g, "body_graph": body_g}, [i64, f2, f2])
        graph, _ = s.finish(outs[1])
    verify(graph)
    np.testing.assert_allclose(O0Executor(graph).run(np.array([2.0, 0.5], np.float32))[0], [32.0, 0.03125])


def test_a_registered_mode_using_the_session_runs_through_jit(monkeypatch):
    from minispore.graph.capture import registry as capture_mod
    monkeypatch.setattr(capture_mod, "_MODES", dict(capture_mod._MODES))

    def toy_ast(req):
        """Understands exactly one function shape: returns the If graph built above."""
        return CaptureResult(graph=build_if_graph(), out_template=Slot(0), mode="ast")
    capture_mod.register_capture_mode("ast", toy_ast)
    f = ms.jit(lambda x: x, capture_mode="ast")
    np.testing.assert_allclose(f(t([1.0, 1.0, 1.0])).asnumpy(), [3.0, 4.0, 5.0])
    np.testing.assert_allclose(f(t([-1.0, -1.0, -1.0])).asnumpy(), [-1.0, -1.0, -1.0])
    # a graph with If is run eagerly under an outer gradient (If has no backward rule yet)
    g = ms.grad(f)(t([1.0, 1.0, 1.0]))
    np.testing.assert_allclose(g.asnumpy(), [1.0, 1.0, 1.0])
