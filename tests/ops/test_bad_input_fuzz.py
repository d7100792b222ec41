"""Random bad input to every public op never surfaces a raw NumPy/Python exception.

Hypothesis draws argument lists from a pool of plausible-but-wrong values (mismatched shapes,
odd dtypes, strings, None, nested lists, out-of-range axes). Each call must either succeed or
raise a minispore error with minispore's own message; anything else is a bug in that op's
inference rule or wrapper.

The second test covers every public entry point the seeded fuzzer knows (functional ops, mint,
Tensor methods/operators/constructor, class-style primitives; `minispore.testing.op_fuzz`) with
its value pools: NumPy integer scalars, 0-d and empty tensors, NaN/inf, bool and huge values,
integer arrays as shapes and axes. Hypothesis shrinks a failure to a small reproducer.
"""
import inspect

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import minispore as ms
from minispore import Tensor, ops
from minispore.testing import op_fuzz

# ops whose only job is creating tensors from sizes can legitimately allocate a lot; keep sizes small
BAD_VALUES = [
    None, "x", 1.5, -1, 7, True, (1, 2), [1, [2]], (), object(),
    ms.float32, "float32", 10**12,
]


def _tensor_pool():
    rng = np.random.default_rng(0)
    return [
        ms.Tensor(rng.standard_normal((2, 3)).astype(np.float32)),
        ms.Tensor(rng.standard_normal((4,)).astype(np.float64)),
        ms.Tensor(np.array(3.0, dtype=np.float32)),
        ms.Tensor(np.array([[1, 2], [3, 4]], dtype=np.int64)),
        ms.Tensor(np.array([True, False])),
        ms.Tensor(np.zeros((2, 0, 3), dtype=np.float16)),
        ms.Tensor(rng.standard_normal((2, 3, 4, 5)).astype(np.float32)),
    ]


TENSORS = _tensor_pool()
PUBLIC = sorted(n for n in ops.functional.__all__ if callable(getattr(ops, n)))
# creation ops with huge sizes are excluded from the huge-int value (they would try to allocate)
ALLOCATING = {"zeros", "ones", "full", "arange", "eye", "linspace", "randn", "rand", "randint", "uniform",
              "normal", "standard_normal", "empty", "multinomial"}


def _arity(fn):
    """(required, total) positional parameters: calls with the wrong arity are Python's business."""
    sig = inspect.signature(fn)
    pos = [p for p in sig.parameters.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = len([p for p in pos if p.default is p.empty])
    if any(p.kind == p.VAR_POSITIONAL for p in sig.parameters.values()):
        return max(required, 1), max(len(pos), 3)
    return required, len(pos)


@pytest.mark.parametrize("name", PUBLIC)
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_random_bad_input_gives_minispore_error(name, data):
    fn = getattr(ops, name)
    lo, hi = _arity(fn)
    pool = TENSORS + [v for v in BAD_VALUES if not (name in ALLOCATING and v == 10**12)]
    args = [data.draw(st.sampled_from(pool)) for _ in range(data.draw(st.integers(lo, max(lo, hi))))]
    outcome, err = op_fuzz.call_outcome(fn, *args)
    assert outcome in ("ok", "clean"), f"{name}{tuple(args)!r}: {outcome}: {type(err).__name__}: {err}"


# -- every public entry point, with the fuzzer's pools ---------------------------------------------
def _edge_arrays():
    """Tensors users pass and naive code mishandles (each drawn as a fresh copy)."""
    rng = np.random.default_rng(1)
    special = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e30], np.float32)
    return [
        np.float32(2.5), np.int64(3), np.bool_(True),                      # 0-d
        np.zeros((0,), np.float32), np.zeros((0, 3), np.int64), np.zeros((2, 0, 3), np.float16),
        special, special.reshape(2, 3), np.array([6.5e4, -6.5e4], np.float16),
        np.array([True, False, True]), np.array([[True], [False]]),
        np.array([127, -128, 0], np.int8), np.array([255, 0, 1], np.uint8),
        np.array([2**63 - 1, 0, -1], np.int64), np.array([[0, 1, 2], [2, 1, 0]], np.int32),
        rng.standard_normal((2, 3)).astype(np.float32), rng.standard_normal((2, 2, 3, 3)).astype(np.float32),
        rng.standard_normal((3, 3)).astype(np.float64),
    ]


EDGE_ARRAYS = _edge_arrays()
TARGETS = op_fuzz.all_targets()
_TENSOR_KINDS = ("tensor", "index_tensor", "data", "any")


def _value(kind):
    """A hypothesis strategy for one argument of the fuzzer's `kind` (by parameter name)."""
    tensors = st.sampled_from(EDGE_ARRAYS).map(Tensor)
    anything = st.one_of(tensors, *[st.sampled_from(pool) for pool in op_fuzz.VALUE_POOLS.values()])
    if kind in _TENSOR_KINDS:
        return st.one_of(tensors, tensors, anything)
    if kind == "tensors":
        return st.lists(tensors, max_size=3).map(tuple) | st.lists(anything, max_size=2)
    pool = op_fuzz.VALUE_POOLS.get(kind)
    return anything if pool is None else st.one_of(st.sampled_from(pool), st.sampled_from(pool), anything)


@settings(max_examples=600, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_every_public_entry_point_with_edge_values(data):
    target = data.draw(st.sampled_from(TARGETS), label="target")
    if target.kind == "class":
        ctor = _draw_call(data, target.ctor_params, target.ctor_varargs)
        fn = lambda *a, **k: target.fn(*ctor[0], **ctor[1])(*a, **k)      # noqa: E731
    elif target.kind == "property":
        name = target.fn
        fn = lambda t: getattr(t, name)                                     # noqa: E731
    else:
        fn = target.fn
    args, kwargs = ([], {}) if target.kind == "property" else _draw_call(data, target.params, target.varargs)
    if target.self_tensor:
        args = [data.draw(st.sampled_from(EDGE_ARRAYS).map(Tensor), label="self")] + args
    outcome, err = op_fuzz.call_outcome(fn, *args, **kwargs)
    assert outcome in ("ok", "clean"), (f"{op_fuzz.describe_call(target.name, args, kwargs)}: {outcome}: "
                                        f"{type(err).__name__}: {err}")


def _draw_call(data, params, varargs):
    positional = [p for p in params if not p[3]]
    required = sum(1 for p in positional if p[2] is inspect.Parameter.empty)
    n = data.draw(st.integers(required, len(positional)), label="n_args")
    args = [data.draw(_value(kind), label=name) for name, kind, _default, _kw in positional[:n]]
    kwargs = {name: data.draw(_value(kind), label=name)
              for name, kind, default, kw_only in params if kw_only and default is inspect.Parameter.empty}
    if varargs is not None and n == len(positional):
        args += data.draw(st.lists(_value("tensor"), max_size=2), label="varargs")
    return args, kwargs
