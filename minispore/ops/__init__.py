"""minispore.ops — the functional API and the primitive registry.

`ops.grad`, `ops.value_and_grad`, `ops.GradOperation` ... live in `minispore.autograd` (a higher
layer) and are re-exported here lazily, so `ops` itself never imports autograd.
"""
from . import functional
from .functional import *          # noqa: F401,F403
from .primitive import PRIMITIVES, AbstractTensor, Primitive, defprim, get_primitive
from . import tensor_methods       # noqa: F401  (attaches operators to Tensor)

_AUTOGRAD = {"grad", "value_and_grad", "GradOperation", "vjp", "jvp"}
_LATER = {"clip_by_global_norm": "minispore.nn.clip"}


def __getattr__(name):
    import importlib
    if name in _AUTOGRAD:
        return getattr(importlib.import_module("minispore.autograd"), name)
    if name in _LATER:
        return getattr(importlib.import_module(_LATER[name]), name)
    raise AttributeError(f"module 'minispore.ops' has no attribute '{name}'")
