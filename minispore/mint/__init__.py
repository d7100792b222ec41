"""`minispore.mint`: the PyTorch-style API that MindSpore 2.3 added alongside its own: functional
ops (`mint.add`, `mint.sum(dim, keepdim)`, `mint.cat`, ...), `mint.nn` layers and losses (with
`mint.nn.functional`) and `mint.optim` (`SGD`, `Adam`, `AdamW`). Same engine and primitives as
`ops`/`nn`; only names and conventions follow PyTorch (see functional.py's docstring)."""
from . import functional, nn, optim  # noqa: F401
from .functional import *            # noqa: F401,F403
from .functional import __all__ as _functional_all
from ..common.tensor import Tensor

__all__ = ["Tensor", "nn", "optim"] + list(_functional_all)
