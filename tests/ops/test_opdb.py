"""Every op in the table: forward against NumPy float64, float64 finite-difference gradients."""
import numpy as np
import pytest

from minispore.backend import dispatch
from minispore.testing import OP_DB, check_forward, check_grad

FORWARD = [(info, dt) for info in OP_DB for dt in info.dtypes]


@pytest.fixture(autouse=True)
def _check_kernels():
    dispatch.set_check_kernels(True)
    yield
    dispatch.set_check_kernels(False)


@pytest.mark.parametrize("info,dtype", FORWARD, ids=[f"{i.name}-{d}" for i, d in FORWARD])
def test_forward(info, dtype):
    rng = np.random.default_rng(0)
    n = 0
    for sample in info.sample_inputs(rng, dtype.np):
        check_forward(info, sample, dtype)
        n += 1
    assert n > 0


GRAD = [info for info in OP_DB if info.differentiable]


@pytest.mark.parametrize("info", GRAD, ids=[i.name for i in GRAD])
def test_grad_float64(info):
    rng = np.random.default_rng(1)
    for sample in info.sample_inputs(rng, np.float64):
        check_grad(info, sample)
