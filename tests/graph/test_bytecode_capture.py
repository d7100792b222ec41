"""capture_mode="bytecode": the symbolic bytecode interpreter, graph breaks, the runner, guards.

Every behaviour is checked against PyNative (the same function run eagerly) on the same inputs;
explain() is checked for the graphs and breaks it reports, with their lines.
"""
import inspect
import logging
import math
import time
import warnings
from collections import namedtuple

import numpy as np
import pytest

import minispore as ms
from minispore import nn, ops
from minispore.common.errors import OpValueError
from minispore.graph import dump, explain
from minispore.graph.capture import registered_capture_modes
from minispore.graph.capture.bytecode import GraphBreakError, SUPPORTED_VERSIONS
from minispore.graph.capture.bytecode import instructions as bc_instructions
from minispore.graph.capture.bytecode import runner as bc_runner
from minispore.graph.capture.bytecode.frames import Frame, fill_state, flatten_state, state_key
from minispore.graph.capture.bytecode.values import Lazy, SeqIter


def t(a, dtype=np.float32):
    return ms.Tensor(np.asarray(a, dtype=dtype))


def rand(*shape, seed=0):
    return t(np.random.default_rng(seed).standard_normal(shape))


def bc(fn, **kw):
    return ms.jit(fn, capture_mode="bytecode", **kw)


def line_of(fn, text):
    """The file line of the first source line of fn containing `text`."""
    lines, start = inspect.getsourcelines(fn)
    for i, ln in enumerate(lines):
        if text in ln:
            return start + i
    raise AssertionError(f"{text!r} not in {fn.__name__}")


def same(a, b, tol=0.0):
    np.testing.assert_allclose(np.asarray(a.asnumpy() if isinstance(a, ms.Tensor) else a),
                               np.asarray(b.asnumpy() if isinstance(b, ms.Tensor) else b), rtol=tol, atol=tol)


def flat(x):
    """The tensors of a nested tuple/list, in order."""
    if isinstance(x, (tuple, list)):
        return [t for v in x for t in flat(v)]
    return [x]


def runner_of(jf, *args):
    return jf.compile(*args).result.runner


# -- basics -----------------------------------------------------------------------------------------------
def test_registered_and_declares_versions():
    assert "bytecode" in registered_capture_modes()
    assert SUPPORTED_VERSIONS == ((3, 11), (3, 12))
    assert bc_instructions.version_supported()          # the versions CI and developers use


def test_straight_line_code_is_one_ordinary_graph():
    w = rand(4, 3, seed=1)

    def f(x, n):
        y = ops.matmul(x, w)
        for i in range(n):                  # a loop over a Python int is unrolled
            y = y * 0.5 + i
        a, b = ops.split(y, 1, axis=1)[:2]
        return ops.relu(a) - b, y.shape

    x = rand(2, 4)
    jf = bc(f)
    out, shape = jf(x, 3)
    ref, ref_shape = f(x, 3)
    same(out, ref, 1e-6)
    assert shape == ref_shape == (2, 3)
    entry = jf.compile(x, 3)
    assert entry.result.runner is None and entry.result.breaks == []
    assert entry.graph.num_nodes() > 6
    rep = explain(jf, x, 3)
    assert rep.graph_count == 1 and rep.break_count == 0


# -- graph breaks -----------------------------------------------------------------------------------------
def test_print_in_the_middle_runs_eagerly_between_two_graphs(capsys):
    def f(x):
        y = ops.exp(x) * 2
        print("y sum", float(y.sum().asnumpy()))          # MARK print
        return y - 1

    x = rand(3)
    jf = bc(f)
    rep = explain(jf, x)             # before any call: what follows .asnumpy() depends on its value
    assert rep.graph_count == 1 and "asnumpy" in rep.breaks[0].reason
    capsys.readouterr()
    for _ in range(2):
        same(jf(x), f(x), 1e-6)
    rep = explain(jf, x)
    # .asnumpy() and print break; float() of the run-time array runs eagerly too
    assert rep.graph_count == 2 and rep.break_count == 3
    assert all(b.filename == __file__ and b.lineno == line_of(f, "MARK print") for b in rep.breaks)
    assert "NumPy array" in rep.breaks[1].reason and "print" in rep.breaks[2].reason
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == printed[1] == printed[2] == printed[3]   # eager and jitted print the same real value
    assert printed[0].startswith("y sum ") and float(printed[0].split()[-1]) == pytest.approx(
        float(np.exp(x.asnumpy()).sum() * 2), rel=1e-6)


def test_print_alone_is_one_break_and_explain_shows_both_graphs(capsys):
    def f(x):
        y = x * 3
        print("hello")                                      # MARK hello
        return y + 1

    rep = explain(bc(f), rand(2))
    assert rep.graph_count == 2 and rep.break_count == 1
    b = rep.breaks[0]
    assert "print" in b.reason and (b.filename, b.lineno) == (__file__, line_of(f, "MARK hello"))
    assert f"{__file__}:{line_of(f, 'MARK hello')}" in str(rep)
    text = dump(bc(f), rand(2))
    assert text.count("return") == 2


def test_asnumpy_and_item_in_the_middle():
    def f(x):
        a = x.asnumpy()                                     # MARK asnumpy
        v = x.sum().item()
        y = x * float(a.mean()) + v
        return ops.tanh(y), v

    jf = bc(f)
    for seed in range(3):
        x = rand(2, 3, seed=seed)
        out, v = jf(x)
        ref, ref_v = f(x)
        same(out, ref, 1e-6)
        assert v == pytest.approx(ref_v)
    rep = explain(jf, x)
    reasons = [b.reason for b in rep.breaks]
    assert any("asnumpy" in r for r in reasons) and any("item" in r for r in reasons)
    assert rep.breaks[0].lineno == line_of(f, "MARK asnumpy")


def test_python_if_on_a_tensor_both_directions_across_calls():
    def f(x):
        y = x * 2
        if y.sum() > 0:                                     # MARK if
            z = y - 1
        else:
            z = y * y
        return z + 1

    jf = bc(f)
    pos, neg = t([1.0, 2.0]), t([-1.0, -3.0])
    for x in (pos, neg, pos, neg, neg):
        same(jf(x), f(x), 1e-6)
    runner = runner_of(jf, pos)
    assert sum(runner.captured.values()) == 2           # then-side and else-side (each runs to the return)
    rep = explain(jf, pos)
    assert rep.graph_count == 3
    assert rep.break_count == 1 and "branch" in rep.breaks[0].reason
    assert rep.breaks[0].lineno == line_of(f, "MARK if")
    for x in (pos, neg):                                  # cached: nothing new is captured
        jf(x)
    assert sum(runner.captured.values()) == 2


def test_while_loop_with_a_tensor_condition_reuses_one_body_graph():
    def f(x, step):
        n = 0
        while x.sum() > 0:                                  # MARK while
            x = x - step
            n += 1
        return x, n

    jf = bc(f)
    for start in ([3.0, 2.0], [10.0, 1.0], [-1.0, 0.0], [0.5, 0.25]):
        out, n = jf(t(start), 1.0)
        ref, ref_n = f(t(start), 1.0)
        same(out, ref)
        assert n == ref_n
    runner = runner_of(jf, t([1.0, 1.0]), 1.0)
    # the loop counter `n` is a number the body adds to: every iteration count is a new constant,
    # but the tensor work is one body graph per distinct n - bounded, and all results are right
    assert all(b.lineno == line_of(f, "MARK while") for b in explain(jf, t([1.0, 1.0]), 1.0).breaks)
    assert runner.captured


def test_while_loop_without_python_state_captures_a_fixed_number_of_segments():
    def f(x):
        while x.max() > 1:
            x = x * 0.5
        return x

    jf = bc(f)
    for v in (3.0, 100.0, 0.5):
        same(jf(t([v, 1.0])), f(t([v, 1.0])))
    runner = runner_of(jf, t([1.0, 1.0]))
    n = sum(runner.captured.values())
    assert n <= 3           # the body, and the exit (3.12 compiles a second exit test at the loop's end)
    for v in (7.0, 1000.0, 2.0, 0.1):                     # other trip counts reuse the same segments
        same(jf(t([v, 1.0])), f(t([v, 1.0])))
    assert sum(runner.captured.values()) == n


def test_for_loop_with_a_break_inside_resumes_mid_loop(capsys):
    def f(xs):
        acc = xs[0] * 0
        outs = []
        for i, x in enumerate(xs):
            acc = acc + x * (i + 1)
            print("step", i)
            outs.append(acc)
        return acc, outs

    xs = (rand(2, seed=1), rand(2, seed=2), rand(2, seed=3))
    jf = bc(f)
    a, outs = jf(xs)
    ra, routs = f(xs)
    same(a, ra, 1e-6)
    assert len(outs) == 3 and all(isinstance(o, ms.Tensor) for o in outs)
    for o, r in zip(outs, routs):
        same(o, r, 1e-6)
    printed = capsys.readouterr().out.split("\n")
    assert printed[:3] == printed[3:6] == ["step 0", "step 1", "step 2"]


def test_a_nested_function_that_branches_on_a_tensor_breaks_at_its_call():
    def helper(v):
        if v.mean() > 0:                                    # the Tracer refuses: CaptureError
            return v * 10
        return v / 10

    def f(x):
        y = x + 1
        z = helper(y)                                       # MARK call
        return z - 1

    jf = bc(f)
    for x in (t([1.0, 2.0]), t([-5.0, -6.0])):
        same(jf(x), f(x), 1e-6)
    rep = explain(jf, t([1.0, 2.0]))
    assert rep.break_count == 1
    b = rep.breaks[0]
    assert b.lineno == line_of(f, "MARK call") and "helper" in b.reason and "__bool__" in b.reason


def test_library_calls_break_pure_ones_fold():
    def f(x):
        s = math.sqrt(16.0)                                 # pure: evaluated at compile time
        y = x * s
        t0 = time.perf_counter()                            # MARK time
        z = np.float32(2.0) * y
        return z, t0

    jf = bc(f)
    x = rand(3)
    out, t0 = jf(x)
    same(out, f(x)[0])
    out2, t1 = jf(x)
    assert t1 > t0                                       # the clock is read each call, not baked
    rep = explain(jf, x)
    assert [b.lineno for b in rep.breaks] == [line_of(f, "MARK time")]
    assert "time" in rep.breaks[0].reason


def test_tensor_stored_in_an_attribute_or_global_is_concrete_after_the_call():
    class Holder:
        pass

    h = Holder()

    def f(x):
        y = x * 2
        h.last = y                                          # MARK attr
        return y + 1

    x = rand(3)
    out = bc(f)(x)
    assert type(h.last) is ms.Tensor
    same(h.last, x.asnumpy() * 2, 1e-6)
    same(out, x.asnumpy() * 2 + 1, 1e-6)
    assert explain(bc(f), x).breaks[0].lineno == line_of(f, "MARK attr")


def test_set_data_of_a_parameter_with_a_graph_value_runs_eagerly():
    p = ms.Parameter(t([1.0, 2.0]), name="p")

    def f(x):
        y = x * 2
        p.set_data(y)                                       # MARK set_data
        return p + 1

    x = t([3.0, 4.0])
    same(bc(f)(x), [7.0, 9.0])
    same(p, [6.0, 8.0])
    assert type(p._data) is np.ndarray
    assert explain(bc(f), x).breaks[0].lineno == line_of(f, "MARK set_data")


_LAST = None


def _remember(x):
    global _LAST
    y = x + 1
    _LAST = y                                               # MARK global
    return y * 2


def test_tensor_assigned_to_a_global_is_concrete_after_the_call():
    x = rand(3)
    out = bc(_remember)(x)
    assert type(_LAST) is ms.Tensor
    same(_LAST, x.asnumpy() + 1, 1e-6)
    same(out, (x.asnumpy() + 1) * 2, 1e-6)
    rep = explain(bc(_remember), x)
    assert rep.break_count == 1 and rep.breaks[0].lineno == line_of(_remember, "MARK global")


def test_numbers_from_eager_steps_are_not_baked_unless_used():
    def passes_through(x):
        v = x.sum().item()
        print(v)
        return x * 2, v

    jf = bc(passes_through)
    for seed in range(5):
        x = rand(3, seed=seed)
        out, v = jf(x)
        same(out, x.asnumpy() * 2)
        assert v == pytest.approx(float(x.asnumpy().sum()), rel=1e-6)
    assert sum(runner_of(jf, x).captured.values()) == 2  # after .item(), after print: captured once

    def uses_it(x):
        v = x.sum().item()
        return x * v

    ju = bc(uses_it)
    for seed in (0, 1, 0, 1):
        x = rand(3, seed=seed)
        same(ju(x), uses_it(x), 1e-6)
    assert sum(runner_of(ju, x).captured.values()) == 2  # specialised on each distinct value, reused after


def test_continuation_limit_falls_back_to_eager(monkeypatch):
    monkeypatch.setattr(bc_runner, "CONTINUATION_LIMIT", 2)

    def f(x):
        v = x.sum().item()
        return x * v

    jf = bc(f)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for seed in range(5):
            x = rand(3, seed=seed)
            same(jf(x), f(x), 1e-6)
    assert any("continuations" in str(m.message) for m in w)
    assert sum(runner_of(jf, x).captured.values()) == 2


# -- autodiff ----------------------------------------------------------------------------------------------
def test_value_and_grad_through_a_function_with_a_graph_break():
    ms.set_seed(0)
    net = nn.Dense(4, 3)
    x = rand(2, 4)

    def f(x):
        y = net(x)
        print("between graphs")
        return (ops.tanh(y) ** 2).sum()

    jf = bc(f)
    params = net.trainable_params()
    v1, g1 = ms.value_and_grad(f, 0, params)(x)
    v2, g2 = ms.value_and_grad(jf, 0, params)(x)
    same(v1, v2, 1e-6)
    flat1, flat2 = flat(g1), flat(g2)
    assert len(flat1) == len(flat2) == 3                  # d/dx, d/dweight, d/dbias
    for a, b in zip(flat1, flat2):
        assert np.abs(a.asnumpy()).max() > 0
        same(a, b, 1e-6)


def test_grad_inside_the_jitted_function_with_a_break_after_it(capsys):
    ms.set_seed(1)
    net = nn.Dense(4, 2)
    gf = ms.value_and_grad(lambda a: (net(a) ** 2).sum(), None, net.trainable_params())

    def step(x):
        loss, grads = gf(x)
        print("loss", loss.item())
        return loss, grads

    x = rand(3, 4)
    l1, g1 = step(x)
    l2, g2 = bc(step)(x)
    same(l1, l2, 1e-6)
    for a, b in zip(g1, g2):
        same(a, b, 1e-6)
    assert explain(bc(step), x).graph_count >= 1


def test_a_break_inside_the_differentiated_function_runs_that_call_eagerly():
    ms.set_seed(2)
    net = nn.Dense(3, 3)

    def loss_fn(a):
        y = net(a)
        s = y.sum().item()                  # needs a value: the whole gradient call runs eagerly
        return (y * s).sum()

    gf = ms.value_and_grad(loss_fn, None, net.trainable_params())

    def step(x):
        loss, grads = gf(x)
        return loss * 1, grads

    x = rand(2, 3)
    l1, g1 = step(x)
    l2, g2 = bc(step)(x)
    same(l1, l2, 1e-6)
    for a, b in zip(g1, g2):
        same(a, b, 1e-6)
    assert "item" in explain(bc(step), x).breaks[0].reason


# -- cells and graph mode -----------------------------------------------------------------------------------
class _Block(nn.Cell):
    def __init__(self):
        super().__init__()
        self.dense = nn.Dense(4, 4)

    def construct(self, x):
        return self.dense(x)


class _Net(_Block):
    def __init__(self):
        super().__init__()
        self.last = None

    def construct(self, x, scale=1.0):
        y = super().construct(x)                            # zero-argument super()
        if y.mean() > 0:
            y = ops.relu(y) * scale
        else:
            y = ops.sigmoid(y)
        print("net ran")
        return y


def test_calling_a_cell_and_graph_mode_with_a_bytecode_jit_config(capsys):
    ms.set_seed(3)
    net = _Net()
    x = rand(2, 4)
    ref = net(x)
    jitted = bc(net.construct)
    same(jitted(x, 1.0), ref, 1e-6)
    same(jitted(-x * 100, 2.0), net(-x * 100, 2.0), 1e-6)

    net.set_jit_config(ms.JitConfig(jit_level="O0", capture_mode="bytecode"))
    old = ms.get_context("mode")
    ms.set_context(mode=ms.GRAPH_MODE)
    try:
        out = net(x)
        out2 = net(x)
    finally:
        ms.set_context(mode=old)
    same(out, ref, 1e-6)
    same(out2, ref, 1e-6)
    assert capsys.readouterr().out.count("net ran") == 6
    from minispore.jit import cell_graph_function
    entry = cell_graph_function(net).compile(net, x)
    assert entry.result.mode == "bytecode"                 # construct's own bytecode was interpreted
    assert {("branch" in b.reason, "print" in b.reason) for b in entry.result.breaks} == {(True, False),
                                                                                          (False, True)}


# -- guards ---------------------------------------------------------------------------------------------
SCALE = 2.0


def _scaled(x):
    y = x * SCALE
    print("scaled")
    return y + SCALE


def test_guards_shapes_and_globals_recompile(caplog, capsys):
    global SCALE
    jf = bc(_scaled)
    x = rand(3)
    same(jf(x), _scaled(x))
    entry = jf.compile(x)
    guard = entry.result.guards[0]                   # the globals the bytecode read
    assert guard((x,), {}) is None
    SCALE = 5.0
    try:
        assert "SCALE" in guard((x,), {})
        with caplog.at_level(logging.INFO, logger="minispore.jit"):
            same(jf(x), x.asnumpy() * 5 + 5)
        assert jf.cache().compiles == 2
        assert any("SCALE" in r.getMessage() for r in caplog.records)
    finally:
        SCALE = 2.0
    same(jf(rand(4)), _scaled(rand(4)))                  # a new shape: a new entry
    assert jf.cache().compiles == 3


def test_fullgraph_turns_a_break_into_an_error_naming_the_line():
    def f(x):
        y = x + 1
        print(y.shape)                                      # MARK full
        return y

    with pytest.raises(GraphBreakError) as e:
        bc(f, fullgraph=True)(rand(2))
    msg = str(e.value)
    assert f"{__file__}:{line_of(f, 'MARK full')}" in msg and "print" in msg and "fullgraph" in msg

    def g(x):
        if x.sum() > 0:                                     # MARK fullif
            return x
        return -x

    with pytest.raises(GraphBreakError, match="branch") as e:
        bc(g, fullgraph=True)(rand(2))
    assert f":{line_of(g, 'MARK fullif')}" in str(e.value)

    def h(x):                                              # no break: fullgraph is fine
        return ops.relu(x) * 2

    same(bc(h, fullgraph=True)(rand(2)), h(rand(2)))


def test_shape_errors_in_the_interpreted_function_name_its_line():
    def f(x, w):
        y = x + 1
        return ops.matmul(y, w)                             # MARK matmul

    with pytest.raises(OpValueError) as e:
        bc(f)(rand(2, 3), rand(4, 5))
    assert f"{__file__}:{line_of(f, 'MARK matmul')}" in str(e.value)


# -- whole-function fallbacks ------------------------------------------------------------------------------
def test_exception_handling_runs_the_whole_function_eagerly():
    def f(x):
        try:                                                # MARK try
            y = x * 2
        except ValueError:
            y = x
        return y + 1

    x = rand(3)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        same(bc(f)(x), f(x))
    assert any("runs eagerly" in str(m.message) for m in w)
    rep = explain(bc(f), x)
    assert rep.graph_count == 0 and rep.break_count == 1
    assert "try/except" in rep.breaks[0].reason and rep.breaks[0].lineno == line_of(f, "MARK try")
    with pytest.raises(GraphBreakError, match="try/except"):
        bc(f, fullgraph=True)(x)


def test_unsupported_python_version_falls_back_with_a_warning(monkeypatch):
    monkeypatch.setattr(bc_instructions, "PY", (3, 10))

    def f(x):
        return x * 2

    x = rand(2)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        same(bc(f)(x), x.asnumpy() * 2)
    assert any("3.11, 3.12" in str(m.message) for m in w)
    with pytest.raises(GraphBreakError, match="3.11, 3.12"):
        bc(f, fullgraph=True)(x)


# -- the interpreter on a wide mix of Python ------------------------------------------------------------------
Pair = namedtuple("Pair", "a b")


def test_many_python_constructs_survive_a_break_in_the_middle(capsys):
    ms.set_seed(4)
    dense = nn.Dense(4, 4)

    def f(x, *rest, k=1, **kw):
        y = dense(x)
        a, *b = ops.split(y, 1, axis=1)
        parts = [p * i for i, p in enumerate(b)]            # a comprehension (inlined in 3.12)
        d = {"p": parts, "s": a, **kw}
        scale = 3
        g = lambda z: z * scale + math.sqrt(4.0)            # noqa: E731 - a closure over a cell variable
        q = Pair(a=g(d["s"]), b=len(parts))
        print(f"n={q.b} k={k}", d.get("tag"), *rest)        # the break
        s = sum(parts[1:], q.a) if parts and kw else q.a
        cut = y[:, 1:3].sum(axis=1, keepdims=True)
        assert cut.shape == (2, 1), "shape"
        r = s + cut if k is not None else s - cut
        scale = 4                                          # the closure sees the new value
        w = g(r)
        del r
        flags = (q.b > 1) and not (k is None) or False
        out = (w, parts[0] is None or parts[0].mean(), q.b, flags, [i * 2 for i in range(q.b)])
        return out

    x = rand(2, 4)
    got = bc(f)(x, 5, k=3, tag="T")
    ref = f(x, 5, k=3, tag="T")
    same(got[0], ref[0], 1e-5)
    same(got[1], ref[1], 1e-6)
    assert got[2:] == ref[2:]
    assert capsys.readouterr().out.splitlines() == ["n=3 k=3 T 5"] * 2


def test_frame_flattening_round_trip_and_keys():
    x, y = rand(2), rand(3)
    shared = [x, 1.5]
    frame = Frame({"a": x, "n": 7, "lst": shared, "alias": shared, "tup": (y, 2, "s"), "it": SeqIter([x, y], 1)},
                  {}, [3.0, y], None)
    template, leaves = flatten_state(frame, ())
    assert sum(isinstance(v, ms.Tensor) for v in leaves) == 6
    # numbers directly in locals, on the stack or in tuples there are leaves; inside lists they are constants
    assert [v for v in leaves if not isinstance(v, ms.Tensor)] == [7, 2, 3.0]
    rebuilt = fill_state(template, leaves, {})
    assert rebuilt.locals["lst"] is rebuilt.locals["alias"] and rebuilt.locals["lst"] is not shared
    assert rebuilt.locals["tup"][2] == "s" and rebuilt.locals["it"].index == 1
    assert rebuilt.locals["it"].seq[0] is x and rebuilt.stack == [3.0, y]
    # numbers are not in the key, shapes and constants are
    frame2 = Frame({**frame.locals, "n": 8}, {}, [4.0, y], None)
    assert state_key(*flatten_state(frame2, ())) == state_key(template, leaves)
    frame3 = Frame({**frame.locals, "a": rand(5)}, {}, [3.0, y], None)
    assert state_key(*flatten_state(frame3, ())) != state_key(template, leaves)
    frame4 = Frame({**frame.locals, "tup": (y, 2, "other")}, {}, [3.0, y], None)
    assert state_key(*flatten_state(frame4, ())) != state_key(template, leaves)
    assert Lazy(1, 0).value == 1


# -- the tiny LLaMA training step ------------------------------------------------------------------------------
def _llama_losses(mode, with_print=False, steps=3):
    from minispore.llm import Llama, LlamaConfig
    cfg = LlamaConfig(vocab_size=11, dim=16, n_layers=2, n_heads=4, n_kv_heads=2, max_seq_len=8, dropout=0.0,
                      multiple_of=8)
    ms.set_seed(0)
    model = Llama(cfg)
    opt = nn.AdamWeightDecay(model.trainable_params(), learning_rate=1e-2)
    grad_fn = ms.value_and_grad(model.loss, None, opt.parameters)

    def train_step(x, y):
        loss, grads = grad_fn(x, y)
        if with_print:
            print("loss", loss.item())
        opt(grads)
        return loss

    step = ms.jit(train_step, capture_mode=mode) if mode else train_step
    rng = np.random.default_rng(0)
    losses = []
    for _ in range(steps):
        x = ms.Tensor(rng.integers(0, 11, (2, 8)))
        y = ms.Tensor(rng.integers(0, 11, (2, 8)))
        losses.append(step(x, y).item())
    weights = [p.asnumpy().copy() for p in model.trainable_params()]
    return losses, weights, step, (x, y)


@pytest.mark.parametrize("with_print", [False, True])
def test_tiny_llama_training_step_matches_pynative(with_print, capsys):
    ref, ref_w, _, _ = _llama_losses(None, with_print)
    got, got_w, step, xy = _llama_losses("bytecode", with_print)
    np.testing.assert_allclose(got, ref, rtol=1e-6)
    # float32 weights after AdamW steps: Adam divides by sqrt(v), so an element whose gradient is mostly
    # cancellation carries the gradient's last-bit differences into its update, and graph and PyNative
    # may hand BLAS the same product with other operand layouts (rounded differently on some CPUs);
    # hence 1e-6 absolute. The float64 equality is tests/graph/test_suite_models_equal.py
    for a, b in zip(got_w, ref_w):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
    rep = explain(step, *xy)
    if with_print:
        assert rep.graph_count == 2 and {"item", "print"} <= {w for b in rep.breaks for w in ("item", "print")
                                                                if w in b.reason}
    else:
        assert rep.graph_count == 1 and rep.break_count == 0


def test_errors_in_eager_steps_name_the_line_in_the_function():
    def f(x):
        y = x * 2
        if y:                                               # MARK bool: a 3-element tensor has no truth value
            return y
        return -y

    with pytest.raises(OpValueError) as e:
        bc(f)(rand(3))
    assert f"{__file__}:{line_of(f, 'MARK bool')}" in str(e.value) and "Tensor.__bool__" in str(e.value)


class _DoubleGrad(nn.Cell):
    """Identity forward; its own backward rule doubles the gradient (autodiff of its ops would not)."""

    def construct(self, x):
        return x * 1

    def bprop(self, x, out, dout):
        return (dout * 2,)


def test_a_segment_that_autodiff_cannot_split_runs_eagerly_under_grad(capsys):
    cell = _DoubleGrad()

    def f(x):
        y = x * 3
        print("before the custom-bprop cell")
        z = cell(y)                           # in the continuation: its graph carries a custom bprop
        return (z * z).sum()

    x = t([1.0, -2.0])
    v1, g1 = ms.value_and_grad(f)(x)
    v2, g2 = ms.value_and_grad(bc(f))(x)
    same(v1, v2, 1e-6)
    same(g1, g2, 1e-6)
    same(g1, 2 * 2 * 9 * x.asnumpy(), 1e-6)   # d/dx (3x)^2 = 18x, doubled by the custom rule


def test_graph_break_error_is_public_and_the_builder_rolls_back_with_truncate():
    from minispore.graph import GraphBreakError as from_graph
    from minispore.graph import GraphBuilder
    from minispore.jit import GraphBreakError as from_jit
    from minispore.ops.primitive import AbstractTensor
    assert from_jit is GraphBreakError and from_graph is GraphBreakError

    # truncate(n_nodes, n_captures): what a graph break does to the instruction it rolls back
    b = GraphBuilder("g")
    x = b.param(AbstractTensor((2,), ms.float32))
    kept, dropped = ms.Tensor(np.ones(2, np.float32)), ms.Tensor(np.zeros(2, np.float32))
    c0 = b.capture(kept)
    b.add_node("add", [x, c0], {}, AbstractTensor((2,), ms.float32))      # (op names stand in for primitives)
    n_nodes, n_caps = len(b.nodes), len(b.captures)
    c1 = b.capture(dropped)
    b.add_node("mul", [x, c1], {}, AbstractTensor((2,), ms.float32))
    b.truncate(n_nodes, n_caps)
    assert len(b.nodes) == 1 and [t for _, t in b.captures] == [kept]
    assert b.capture(kept) is c0                       # still de-duplicated
    assert b.capture(dropped) is not c1                # forgotten: captured afresh
