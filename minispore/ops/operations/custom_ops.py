"""`ops.Custom`: a user's Python function as an operator (MindSpore's `func_type="pyfunc"`).

    def add_kernel(x, y):                       # NumPy arrays in, a NumPy array out
        return x + y

    add = ops.Custom(add_kernel, out_shape=lambda x, y: x, out_dtype=lambda x, y: x,
                     func_type="pyfunc", bprop=lambda x, y, out, dout: (dout, dout))
    add(a, b)

`out_shape` / `out_dtype` are the output's shape and dtype, or functions of the inputs' shapes
and dtypes (tuples of them for several outputs). `bprop(*inputs, out, dout)` returns one gradient
per input, written with minispore ops; without it the op is not differentiable. The instance is a
registry-style primitive under the hood (`_registry_prim`), so it runs in PyNative, on the autodiff
tape and as a node of a jit graph, like a built-in op (graphs that contain one are not written to
the compile cache: the function is not in the registry).

MindSpore's other func_types ("aot", "hybrid", "akg", "tbe", ...) compile native kernels for a
device; they are out of scope here and rejected with a clear error.
"""
from __future__ import annotations

from ...common import dtype as mstype
from ...common.errors import OpTypeError, OpValueError
from .. import primitive as _registry
from .base import Primitive

_SUPPORTED = ("pyfunc",)
_NATIVE = ("aot", "hybrid", "akg", "tbe", "aicpu", "julia")


class Custom(Primitive):
    """`Custom(func, out_shape=None, out_dtype=None, func_type='pyfunc', bprop=None, reg_info=None)`."""

    def __init__(self, func, out_shape=None, out_dtype=None, func_type="pyfunc", bprop=None, reg_info=None):
        super().__init__("Custom")
        if not callable(func):
            raise OpTypeError("Custom", "'func' to be a Python function", type(func).__name__)
        if not isinstance(func_type, str):
            raise OpTypeError("Custom", "'func_type' to be a str", type(func_type).__name__)
        if func_type in _NATIVE:
            raise OpValueError("Custom", f"func_type in {list(_SUPPORTED)} (minispore runs NumPy kernels; "
                                         f"compiled device kernels are out of scope)", repr(func_type))
        if func_type not in _SUPPORTED:
            raise OpValueError("Custom", f"func_type in {list(_SUPPORTED)}", repr(func_type))
        if out_shape is None or out_dtype is None:
            raise OpValueError("Custom", "'out_shape' and 'out_dtype' (values or functions) for a pyfunc",
                               f"out_shape={out_shape!r}, out_dtype={out_dtype!r}")
        if not callable(out_dtype) and not isinstance(out_dtype, (mstype.DType, tuple, list)):
            raise OpTypeError("Custom", "'out_dtype' to be a dtype, a tuple of dtypes or a function",
                              type(out_dtype).__name__)
        if not callable(out_shape) and not isinstance(out_shape, (tuple, list)):
            raise OpTypeError("Custom", "'out_shape' to be a shape, a tuple of shapes or a function",
                              type(out_shape).__name__)
        if bprop is not None and not callable(bprop):
            raise OpTypeError("Custom", "'bprop' to be a function (inputs..., out, dout) -> grads", type(bprop).__name__)
        self.func, self.out_shape, self.out_dtype, self.func_type, self.bprop = func, out_shape, out_dtype, func_type, bprop
        self.func_name = getattr(func, "__name__", "func")
        self.add_prim_attr("func_type", func_type)
        self.add_prim_attr("func_name", self.func_name)
        self.init_attrs = {"func": func, "out_shape": out_shape, "out_dtype": out_dtype, "func_type": func_type,
                           "bprop": bprop, "reg_info": reg_info}
        self._registry_prim = _registry.Primitive(f"Custom_{self.func_name}", self._infer, self._kernel,
                                                  self._bprop_rule(), None, getattr(func, "__doc__", "") or "")

    def get_bprop(self):
        return self.bprop

    def infer_shape(self, *shapes):
        return self.out_shape(*shapes) if callable(self.out_shape) else self.out_shape

    def infer_dtype(self, *dtypes):
        return self.out_dtype(*dtypes) if callable(self.out_dtype) else self.out_dtype

    def _kernel(self, *arrays):
        return self.func(*arrays)

    def __call__(self, *inputs):
        return self._registry_prim(*inputs)


__all__ = ["Custom"]
