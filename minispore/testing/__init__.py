"""minispore.testing — the reusable parity kit.

One op table (`OP_DB`, filled by `minispore.testing.opdb`) drives:
(a) forward checks against NumPy float64 references (`check_forward`),
(b) float64 finite-difference gradient checks (`check_grad`),
(c) backend-vs-CPU-reference parity for plugins (`check_backend_parity`, added with the plugin work).
"""
from .opinfo import OP_DB, DEFAULT_TOLS, OpInfo, SampleInput, register
from .checks import check_forward, check_grad, run_op
from .parity import check_backend_parity, parity_tests
from . import opdb  # noqa: F401  (fills OP_DB)

__all__ = ["OP_DB", "OpInfo", "SampleInput", "register", "check_forward", "check_grad", "run_op", "DEFAULT_TOLS",
           "check_backend_parity", "parity_tests"]
