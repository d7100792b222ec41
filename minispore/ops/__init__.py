"""minispore.ops — the functional API, the class-style operators and the primitive registry.

`ops.add(x, y)` (functional) and `ops.Add()(x, y)` (class-style, `ops.operations`, also reachable as
`ops.P`) reach the same registry primitive. `ops.Primitive` is MindSpore's user-facing base class
for class-style operators (`ops.operations.base`); the registry's own class, which defines each op
once, is `minispore.ops.primitive.Primitive`.

`ops.grad`, `ops.value_and_grad`, `ops.GradOperation` ... live in `minispore.autograd` (a higher
layer) and are re-exported here lazily, so `ops` itself never imports autograd.
"""
from . import functional
from .functional import *          # noqa: F401,F403
from .primitive import PRIMITIVES, AbstractTensor, defprim, get_primitive
from . import tensor_methods       # noqa: F401  (attaches operators to Tensor)
from . import operations
from .operations import *          # noqa: F401,F403  (MatMul, ReduceSum, ..., Primitive, Custom)
from .operations import Primitive, PrimitiveWithCheck, PrimitiveWithInfer, prim_attr_register

P = operations                     # `from mindspore.ops import operations as P` / `ops.P.MatMul`

_AUTOGRAD = {"grad", "value_and_grad", "GradOperation", "vjp", "jvp"}
_LATER = {"clip_by_global_norm": "minispore.nn.clip"}


def __getattr__(name):
    import importlib
    if name in _AUTOGRAD:
        return getattr(importlib.import_module("minispore.autograd"), name)
    if name in _LATER:
        return getattr(importlib.import_module(_LATER[name]), name)
    raise AttributeError(f"module 'minispore.ops' has no attribute '{name}'")
