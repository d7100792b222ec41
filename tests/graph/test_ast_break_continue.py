"""capture_mode="ast": break / continue / early return under a tensor condition (issue 11, item 9).

Oracle: the same Python function run eagerly (PyNative), on inputs chosen so that every exit is
taken on some input and not on another; gradients against PyNative's tape. MindSpore 2.10's jit
gives the same values on these functions (tests/fidelity/cases/jit.py holds the differential
cases against its goldens). The rewrite itself (exit flags, guards) is in
minispore/graph/capture/ast_mode/loop_exits.py.
"""
import numpy as np
import pytest

import minispore as ms
from minispore import nn, ops
from minispore.graph import IF, WHILE
from minispore.graph.capture import CaptureRequest
from minispore.graph.capture.ast_mode import AstCaptureError, capture_ast


def t(a, dtype=np.float32):
    return ms.Tensor(np.asarray(a, dtype=dtype))


def as_np(x):
    if isinstance(x, (tuple, list)):
        return [as_np(v) for v in x]
    return x.asnumpy() if isinstance(x, ms.Tensor) else np.asarray(x)


def same_as_pynative(fn, *inputs_list, fullgraph=True):
    """jit(fn) equals fn run eagerly on every argument tuple, with one compilation (the exits are
    decided when the graph runs, not at compile time)."""
    jf = ms.jit(fn, fullgraph=fullgraph)
    for args in inputs_list:
        assert_same(as_np(jf(*args)), as_np(fn(*args)))
    assert jf.cache().compiles == 1
    return jf


def assert_same(got, want):
    if isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want)
        for g, w in zip(got, want):
            assert_same(g, w)
        return
    np.testing.assert_allclose(got, want, rtol=1e-6)
    if isinstance(want, np.ndarray) and want.ndim:
        assert got.dtype == want.dtype


def grads_as_pynative(fn, *inputs_list):
    jg = ms.jit(ms.grad(fn))
    for args in inputs_list:
        np.testing.assert_allclose(jg(*args).asnumpy(), ms.grad(fn)(*args).asnumpy(), rtol=1e-6)


def ops_in(fn, *args):
    req = CaptureRequest(fn, args, {}, fn.__name__, fullgraph=True, options={"inline_control_flow": False})
    graph = capture_ast(req).graph
    return [n.op for g in graph.all_graphs() for n in g.nodes]


# -- unrolled for loops ----------------------------------------------------------------------------------
def for_break(x):
    for _ in range(5):
        x = x + 1
        if x.sum() > 10:
            break
        x = x * 1.5
    return x * 2


def test_break_in_an_unrolled_for_under_a_tensor_condition():
    # breaks in the first iteration, in a middle one, and never
    same_as_pynative(for_break, (t([5.0, 6.0]),), (t([1.0, 2.0]),), (t([-9.0, -9.0]),))
    assert IF in ops_in(for_break, t([1.0, 2.0]))


def for_continue(x):
    s = ops.zeros((), ms.float32)
    for i in range(4):
        if x[i] < 0:
            continue
        s = s + x[i] * i
    return s


def test_continue_in_an_unrolled_for():
    same_as_pynative(for_continue, (t([1.0, -2.0, 3.0, -1.0]),), (t([-1.0, -1.0, -1.0, -1.0]),),
                     (t([1.0, 2.0, 3.0, 4.0]),))


def for_else(x):
    for i in range(3):
        if x[i] > 2:
            x = x * 0.5
            break
        x = x + 1
    else:
        x = -x                   # only when the loop did not break
    return x


def test_for_else_runs_only_on_the_paths_that_did_not_break():
    same_as_pynative(for_else, (t([3.0, 0.0, 0.0]),), (t([0.0, 0.0, 2.5]),), (t([0.0, 0.0, 0.0]),))


def both_branches_exit(x):
    for _ in range(4):
        x = x + 1
        if x.sum() > 0:
            break
        else:
            continue
        x = x * 100              # unreachable on every path
    return x


def test_exits_on_both_branches_are_plain_signals():
    same_as_pynative(both_branches_exit, (t([1.0]),), (t([-2.5]),))


def nested(x):
    for i in range(3):
        for j in range(3):
            if (x * j).sum() > 6:
                break            # leaves the inner loop only
            x = x + j
        if x.sum() > 20:
            break
        x = x * 1.5
    return x


def test_nested_loops_break_leaves_only_the_inner_loop():
    same_as_pynative(nested, (t([0.5, 1.0]),), (t([3.0, 4.0]),), (t([-1.0, -1.0]),))


def nested_continue_outer(x):
    total = x * 0
    for i in range(3):
        for j in range(2):
            if x[j] * i > 1:
                continue
            total = total + x * j
        if total.sum() < 0:
            continue
        total = total + i
    return total


def test_continue_in_nested_loops():
    same_as_pynative(nested_continue_outer, (t([0.5, 1.0]),), (t([-1.0, 2.0]),), (t([-3.0, -3.0]),))


def test_a_loop_of_many_iterations_stays_linear_in_size():
    """Each exit under a tensor condition adds a constant number of If nodes (no exponential
    duplication of the code after it)."""
    def f(x):
        for i in range(6):
            for j in range(6):
                if (x * j).sum() > i:
                    break
                x = x + 0.25
        return x
    n_if = ops_in(f, t([0.1, 0.2])).count(IF)
    assert 36 <= n_if <= 36 * 4
    same_as_pynative(f, (t([0.1, 0.2]),), (t([-1.0, 0.5]),))


# -- early return ---------------------------------------------------------------------------------------
def early_return(x):
    for _ in range(4):
        if x.sum() > 8:
            return x * 10
        x = x * 2
    return x - 1


def test_early_return_inside_a_loop():
    same_as_pynative(early_return, (t([1.0, 0.5]),), (t([9.0, 0.0]),), (t([0.01, 0.01]),))


def return_in_both_branches(x):
    for i in range(3):
        if x[i] > 0:
            return x * i
        else:
            return -x
    return x


def test_return_in_if_and_else_under_a_tensor_condition_inside_a_loop():
    same_as_pynative(return_in_both_branches, (t([1.0, 2.0, 3.0]),), (t([-1.0, 2.0, 3.0]),))


def nested_return(x):
    for i in range(3):
        for j in range(3):
            if (x * (i + j)).sum() > 10:
                return x + i * 10 + j
        x = x + 1
    return -x


def test_return_from_nested_loops():
    same_as_pynative(nested_return, (t([1.0, 2.0]),), (t([4.0, 4.0]),), (t([-5.0, -5.0]),))


def helper_returns_early(x):
    def first_big(v):
        for i in range(v.shape[0]):
            if v[i] > 1:
                return v[i]
        return v[0] * 0
    return first_big(x) + first_big(x * 2)


def test_early_return_in_an_interpreted_inner_function():
    same_as_pynative(helper_returns_early, (t([0.1, 0.7, 3.0]),), (t([0.1, 0.2, 0.3]),))


def return_in_a_loop_inside_a_returning_if(x):
    if x.sum() > 0:                       # (the code after this `if` is moved into its branches)
        for i in range(2):
            if x[i] > 1:
                return x
            x = x + 1
        return -x
    while x.sum() < 0:
        if x.min() < -8:
            return x * 0.5
        x = x * 2 + 3
    return x * 2


def test_exit_flags_inside_the_branches_of_a_returning_tensor_if():
    same_as_pynative(return_in_a_loop_inside_a_returning_if, (t([2.0, 0.0]),), (t([0.5, 0.5]),),
                     (t([-1.0, -1.0]),), (t([-5.0, -3.0]),))


def return_tuple(x, y):
    for _ in range(3):
        if (x - y).sum() > 3:
            return x, y, 1
        x = x + y
        y = y * 0.5
    return x, y, 2


def test_early_return_of_a_tuple_with_python_numbers():
    same_as_pynative(return_tuple, (t([1.0, 2.0]), t([0.5, 0.5])), (t([4.0, 2.0]), t([0.5, 0.5])),
                     (t([0.0, 0.0]), t([0.1, 0.1])))


# -- several carried values ----------------------------------------------------------------------------
def multi_carry(x, y):
    a, b, steps = x, y, 0
    for _ in range(4):
        if (a - b).sum() > 3:
            break
        a = a + b
        b = b * 0.5
        steps += 1
    return a, b, steps


def test_a_loop_that_carries_several_values_and_a_python_counter():
    jf = same_as_pynative(multi_carry, (t([1.0, 2.0]), t([0.5, 0.5])), (t([5.0, 5.0]), t([0.5, 0.5])),
                          (t([0.0, 0.0]), t([1.0, 1.0])))
    # the counter became a graph variable: a 0-d Int64 tensor here (MindSpore returns a Python int)
    assert int(jf(t([1.0, 2.0]), t([0.5, 0.5]))[2]) == 1


# -- tensor while loops ------------------------------------------------------------------------------------
def while_break(x):
    i = ms.Tensor(0, ms.int32)
    while i < 10:
        x = x * 2
        if x.sum() > 50:
            break
        i = i + 1
    return x, i


def while_continue(x):
    i = ms.Tensor(0, ms.int32)
    s = x * 0
    while i < 6:
        i = i + 1
        if (i % 2) == 0:
            continue
        s = s + x * i.astype(ms.float32)
    return s


def while_return(x):
    i = ms.Tensor(0, ms.int32)
    while i < 5:
        if x.sum() > 30:
            return x, i
        x = x * 2
        i = i + 1
    return x - 1, i


def while_else(x):
    while x.sum() < 10:
        if x.max() > 4:
            x = -x
            break
        x = x + 1
    else:
        x = x * 100
    return x


def test_break_continue_return_in_a_tensor_while():
    for fn in (while_break, while_continue, while_return, while_else):
        same_as_pynative(fn, (t([1.0, 2.0]),), (t([30.0, 30.0]),), (t([-0.5, 0.25]),))
    assert WHILE in ops_in(while_break, t([1.0, 2.0]))


def python_counter_while(x):
    i = 0
    while i < 4:                 # a Python condition: unrolled ... until the break flag makes i a tensor
        if x.sum() > 5:
            break
        x = x * 2
        i += 1
    return x, i


def test_a_python_while_becomes_a_while_node_once_a_break_makes_its_counter_data_dependent():
    same_as_pynative(python_counter_while, (t([1.0, 1.0]),), (t([3.0, 3.0]),), (t([0.01, 0.0]),))


# -- a Cell --------------------------------------------------------------------------------------------------
class EarlyExit(nn.Cell):
    """Runs its layers until the activations get large (an 'early exit' network)."""

    def __init__(self):
        super().__init__()
        self.layers = nn.CellList([nn.Dense(3, 3) for _ in range(4)])

    def construct(self, x):
        for layer in self.layers:
            x = ops.tanh(layer(x)) * 3
            if ops.abs(x).max() > 2.5:
                break
        return x.sum()


def test_a_cell_with_an_early_exit_and_its_parameter_gradients():
    net = EarlyExit()
    rng = np.random.default_rng(3)
    for p in sorted(net.get_parameters(), key=lambda p: p.name):
        p.set_data(t(rng.uniform(-0.5, 0.5, size=p.shape)))
    x = t(np.random.default_rng(4).uniform(-2, 2, size=(2, 3)))
    h, depth = x, 0
    for layer in net.layers:                    # the exit is taken after the third layer
        h, depth = ops.tanh(layer(h)) * 3, depth + 1
        if float(ops.abs(h).max()) > 2.5:
            break
    assert depth == 3
    np.testing.assert_allclose(ms.jit(net.construct)(x).asnumpy(), net(x).asnumpy(), rtol=1e-6)
    grad_fn = ms.value_and_grad(net, None, net.trainable_params())
    (want_loss, want_grads), (loss, grads) = grad_fn(x), ms.jit(grad_fn)(x)
    np.testing.assert_allclose(loss.asnumpy(), want_loss.asnumpy(), rtol=1e-6)
    for g, w in zip(grads, want_grads):
        np.testing.assert_allclose(g.asnumpy(), w.asnumpy(), rtol=1e-5, atol=1e-7)


# -- gradients ------------------------------------------------------------------------------------------------
def test_gradients_through_unrolled_loops_with_exits_equal_pynative():
    grads_as_pynative(lambda x: for_break(x).sum(), (t([5.0, 6.0]),), (t([1.0, 2.0]),), (t([-9.0, -9.0]),))
    grads_as_pynative(for_continue, (t([1.0, -2.0, 3.0, -1.0]),))
    grads_as_pynative(lambda x: nested(x).sum(), (t([0.5, 1.0]),), (t([3.0, 4.0]),))
    grads_as_pynative(lambda x: early_return(x).sum(), (t([1.0, 0.5]),), (t([9.0, 0.0]),), (t([0.01, 0.01]),))
    grads_as_pynative(lambda x: nested_return(x).sum(), (t([1.0, 2.0]),), (t([-5.0, -5.0]),))
    grads_as_pynative(lambda x, y: multi_carry(x, y)[0].sum() + multi_carry(x, y)[1].sum(),
                      (t([1.0, 2.0]), t([0.5, 0.5])))


def test_gradient_through_a_tensor_while_with_break_is_a_clear_error():
    """MindSpore 2.10 differentiates While loops; minispore's ast mode does not (yet): a clear error
    naming the loop's line. The forward pass works (test above)."""
    with pytest.raises(AstCaptureError, match="does not differentiate While nodes"):
        ms.jit(ms.grad(lambda x: while_break(x)[0].sum()))(t([1.0, 2.0]))


# -- what cannot compile: clear errors ------------------------------------------------------------------------
def test_return_values_of_different_shapes_are_a_clear_error():
    def f(x):
        for _ in range(2):
            if x.sum() > 0:
                return x[:1]
            x = x + 1
        return x
    with pytest.raises(AstCaptureError, match="the return value to have the same type, shape and dtype"):
        ms.jit(f)(t([1.0, 2.0]))


def test_falling_off_the_end_on_some_paths_is_a_clear_error():
    def f(x):
        for _ in range(2):
            if x.sum() > 0:
                return x
            x = x + 1
    with pytest.raises(AstCaptureError, match="the return value.*None"):
        ms.jit(f)(t([1.0]))


def test_a_variable_first_assigned_after_a_break_is_undefined_after_the_loop():
    def f(x):
        for _ in range(2):
            if x.sum() > 0:
                break
            y = x * 2
            x = x + 1
        return y
    with pytest.raises(AstCaptureError, match="'y', which is assigned on only one path"):
        ms.jit(f)(t([1.0]))


def test_a_loop_variable_changing_shape_across_paths_is_a_clear_error():
    def f(x):
        for _ in range(2):
            if x.sum() > 0:
                break
            x = ops.concat((x, x))
        return x
    with pytest.raises(AstCaptureError, match="variable 'x' to have the same type, shape and dtype"):
        ms.jit(f)(t([1.0]))
