"""`mindspore.ops.operations` (imported as `P` in the model zoo: `from mindspore.ops import operations
as P`): the class-style operators, `P.MatMul(transpose_b=True)(x, w)`, `P.ReduceSum(keep_dims=True)(x, 1)`.

Read base.py first (what a class-style primitive is, `prim_attr_register`, `shard`, how a user
defines one), then math_ops / array_ops / nn_ops (thin classes over the registry primitives),
other_ops (side effects: Assign, Print), comm_ops (collectives: AllReduce, AllGather ...) and custom_ops (`Custom`, a Python function as an op).
Every class reaches the registry primitive that defines its op; none defines an op again.
"""
from . import array_ops, comm_ops, conv_pool_ops, custom_ops, math_ops, nn_ops, other_ops, random_ops
from .array_ops import *       # noqa: F401,F403
from .comm_ops import *        # noqa: F401,F403
from .conv_pool_ops import *   # noqa: F401,F403
from .base import Primitive, PrimitiveWithCheck, PrimitiveWithInfer, prim_attr_register
from .custom_ops import Custom
from .math_ops import *        # noqa: F401,F403
from .nn_ops import *          # noqa: F401,F403
from .other_ops import *       # noqa: F401,F403
from .random_ops import *      # noqa: F401,F403

__all__ = (["Primitive", "PrimitiveWithInfer", "PrimitiveWithCheck", "prim_attr_register", "Custom"]
           + math_ops.__all__ + array_ops.__all__ + nn_ops.__all__ + other_ops.__all__ + conv_pool_ops.__all__
           + random_ops.__all__ + comm_ops.__all__)
