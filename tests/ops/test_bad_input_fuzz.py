"""Random bad input to every public op never surfaces a raw NumPy/Python exception.

Hypothesis draws argument lists from a pool of plausible-but-wrong values (mismatched shapes,
odd dtypes, strings, None, nested lists, out-of-range axes). Each call must either succeed or
raise a minispore error; anything else is a bug in that op's inference rule or wrapper.
"""
import inspect

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import minispore as ms
from minispore import ops
from minispore.common.errors import MinisporeError

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
    try:
        fn(*args)
    except MinisporeError:
        pass
    except MemoryError:
        pass
