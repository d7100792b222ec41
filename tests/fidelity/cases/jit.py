"""jit (capture_mode="ast", MindSpore's default) on loops with break / continue / early return under
a tensor condition: values and gradients as MindSpore 2.10's jit computes them.

Left out on purpose (see the final report / Differences page): gradients through a `while` loop on
a tensor condition (MindSpore differentiates While loops; minispore's ast mode raises a clear
error); Python-number loop counters in a jitted function's outputs (MindSpore returns a Python int,
minispore a 0-d Int64 tensor); `for ... else:` and `while ... else:` (MindSpore 2.10's jit refuses
them: "The 'for...else...' statement is not supported now"; minispore compiles them with Python's
meaning).
"""
import numpy as np

from msdiff import case, fill_params, rand


def _t(ms, a):
    return ms.Tensor(np.asarray(a, np.float32))


# -- the functions (module level: MindSpore's jit parses their source) -----------------------------------
def for_break(x):
    for _ in range(5):
        x = x + 1
        if x.sum() > 10:
            break
        x = x * 1.5
    return x * 2


def for_continue(x):
    s = x * 0
    for i in range(4):
        if x[i] < 0:
            continue
        s = s + x * i
    return s


def nested_break(x):
    for i in range(3):
        for j in range(3):
            if (x * j).sum() > 6:
                break
            x = x + j
        if x.sum() > 20:
            break
        x = x * 1.5
    return x


def nested_continue(x):
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


def early_return(x):
    for _ in range(4):
        if x.sum() > 8:
            return x * 10
        x = x * 2
    return x - 1


def return_if_else_in_loop(x):
    for i in range(3):
        if x[i] > 0:
            return x * (i + 1)
        else:
            return -x
    return x


def nested_return(x):
    for i in range(3):
        for j in range(3):
            if (x * (i + j)).sum() > 10:
                return x + i * 10 + j
        x = x + 1
    return -x


def multi_carry(x, y):
    a, b = x, y
    for _ in range(4):
        if (a - b).sum() > 3:
            break
        a = a + b
        b = b * 0.5
    return a, b


def while_break(ms, x):
    i = ms.Tensor(0, ms.int32)
    while i < 10:
        x = x * 2
        if x.sum() > 50:
            break
        i = i + 1
    return x, i


def while_continue(ms, x):
    i = ms.Tensor(0, ms.int32)
    s = x * 0
    while i < 6:
        i = i + 1
        if (i % 2) == 0:
            continue
        s = s + x * i.astype(ms.float32)
    return s


def while_return(ms, x):
    i = ms.Tensor(0, ms.int32)
    while i < 5:
        if x.sum() > 30:
            return x, i
        x = x * 2
        i = i + 1
    return x - 1, i


def python_counter_while(x):
    i = 0
    while i < 4:
        if x.sum() > 5:
            break
        x = x * 2
        i += 1
    return x * 1


def _bind(ms, fn):
    """A one-argument function for the loops that need the framework module inside."""
    def f(x):
        return fn(ms, x)
    return f


# -- unrolled for loops ---------------------------------------------------------------------------------
@case("jit/for_break_taken_in_a_middle_iteration")
def _(ms):
    return ms.jit(for_break)(_t(ms, [1.0, 2.0]))


@case("jit/for_break_taken_in_the_first_iteration")
def _(ms):
    return ms.jit(for_break)(_t(ms, [5.0, 6.0]))


@case("jit/for_break_never_taken")
def _(ms):
    return ms.jit(for_break)(_t(ms, [-9.0, -9.0]))


@case("jit/for_continue")
def _(ms):
    return ms.jit(for_continue)(_t(ms, [1.0, -2.0, 3.0, -1.0]))


@case("jit/nested_loops_break")
def _(ms):
    f = ms.jit(nested_break)
    return f(_t(ms, [0.5, 1.0])), f(_t(ms, [3.0, 4.0]))


@case("jit/nested_loops_continue")
def _(ms):
    f = ms.jit(nested_continue)
    return f(_t(ms, [0.5, 1.0])), f(_t(ms, [-1.0, 2.0]))


# -- early return ----------------------------------------------------------------------------------------
@case("jit/early_return_in_a_loop_taken")
def _(ms):
    return ms.jit(early_return)(_t(ms, [1.0, 0.5]))


@case("jit/early_return_in_a_loop_not_taken")
def _(ms):
    return ms.jit(early_return)(_t(ms, [0.01, 0.01]))


@case("jit/return_in_if_and_else_inside_a_loop")
def _(ms):
    f = ms.jit(return_if_else_in_loop)
    return f(_t(ms, [1.0, 2.0, 3.0])), f(_t(ms, [-1.0, 2.0, 3.0]))


@case("jit/return_from_nested_loops")
def _(ms):
    f = ms.jit(nested_return)
    return f(_t(ms, [1.0, 2.0])), f(_t(ms, [-5.0, -5.0]))


@case("jit/loop_carrying_two_values")
def _(ms):
    f = ms.jit(multi_carry)
    return f(_t(ms, [1.0, 2.0]), _t(ms, [0.5, 0.5])), f(_t(ms, [0.0, 0.0]), _t(ms, [1.0, 1.0]))


# -- while on a tensor ------------------------------------------------------------------------------------
@case("jit/while_break_with_an_int32_counter")
def _(ms):
    return ms.jit(_bind(ms, while_break))(_t(ms, [1.0, 2.0]))


@case("jit/while_continue")
def _(ms):
    return ms.jit(_bind(ms, while_continue))(_t(ms, [1.0, 2.0]))


@case("jit/while_early_return")
def _(ms):
    f = ms.jit(_bind(ms, while_return))
    return f(_t(ms, [1.0, 2.0])), f(_t(ms, [40.0, 0.0]))


@case("jit/python_while_with_a_tensor_break")
def _(ms):
    f = ms.jit(python_counter_while)
    return f(_t(ms, [1.0, 1.0])), f(_t(ms, [0.01, 0.0]))


# -- gradients --------------------------------------------------------------------------------------------
def _sum_of(fn):
    def loss(x):
        return fn(x).sum()
    return loss


@case("jit/grad_through_for_break")
def _(ms):
    g = ms.jit(ms.grad(_sum_of(for_break)))
    return g(_t(ms, [1.0, 2.0])), g(_t(ms, [5.0, 6.0])), g(_t(ms, [-9.0, -9.0]))


@case("jit/grad_through_for_continue")
def _(ms):
    return ms.jit(ms.grad(_sum_of(for_continue)))(_t(ms, [1.0, -2.0, 3.0, -1.0]))


@case("jit/grad_through_early_return")
def _(ms):
    g = ms.jit(ms.grad(_sum_of(early_return)))
    return g(_t(ms, [1.0, 0.5])), g(_t(ms, [0.01, 0.01]))


@case("jit/grad_through_nested_break")
def _(ms):
    return ms.jit(ms.grad(_sum_of(nested_break)))(_t(ms, [0.5, 1.0]))


@case("jit/value_and_grad_of_a_loop_carrying_two_values")
def _(ms):
    def loss(x, y):
        a, b = multi_carry(x, y)
        return (a * b).sum()
    return ms.jit(ms.value_and_grad(loss, grad_position=(0, 1)))(_t(ms, [1.0, 2.0]), _t(ms, [0.5, 0.5]))


class _EarlyExitNet:
    """Built per framework: Dense layers in a CellList, run until the activations get large."""

    @staticmethod
    def make(ms):
        nn, ops = ms.nn, ms.ops

        class EarlyExit(nn.Cell):
            def __init__(self):
                super().__init__()
                self.layers = nn.CellList([nn.Dense(3, 3) for _ in range(4)])

            def construct(self, x):
                for layer in self.layers:
                    x = ops.tanh(layer(x)) * 3
                    if ops.abs(x).max() > 2.5:
                        break
                return x.sum()

        return fill_params(ms, EarlyExit(), 3, scale=0.5)     # exits after the third layer


@case("jit/cell_with_an_early_exit_value_and_parameter_grads", rtol=1e-5, atol=1e-6)
def _(ms):
    net = _EarlyExitNet.make(ms)
    x = ms.Tensor(rand(2, 3, seed=4, low=-2.0, high=2.0))
    loss, grads = ms.jit(ms.value_and_grad(net, None, net.trainable_params()))(x)
    return loss, grads, [p.name for p in net.trainable_params()]
