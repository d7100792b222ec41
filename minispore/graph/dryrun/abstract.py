"""Abstract parameters and abstract inputs: describing a model without spending its memory.

DryRun has to build a LLaMA-7B on a laptop: 6.74 billion float32 parameters would be 27 GB. The
trick is that nothing DryRun does reads a parameter's *values* - capture only needs shapes and
dtypes, and the graph holds Parameters by reference. So, under `abstract_parameters()`, every
initializer returns a *zero-stride broadcast view* of a single zero:

    np.broadcast_to(np.zeros((), np.float32), (32000, 4096))    # shape (32000, 4096), 4 bytes of memory

That is a genuine NumPy array (Parameter, Cell, shape checks and `trainable_params()` all work
unchanged) with the right shape and dtype, but it owns one element and is read-only, so code that
tries to *write* initial values into it fails loudly instead of allocating. `is_abstract(array)`
tells such an array apart. (MindSpore reaches the same goal differently: its initializers are
lazy and `MS_SIMULATION_LEVEL` mocks the device allocator.)

Abstract inputs: `dryrun(f, x, ...)` takes for each tensor argument an `AbstractTensor`, a
`(shape, dtype)` pair, or a real Tensor (only its shape and dtype are used). Anything else is a
Python constant passed to `f` as is.
"""
from __future__ import annotations

import contextlib
import numbers

import numpy as np

from ...common import dtype as mstype
from ...common.errors import OpTypeError, OpValueError
from ...common.tensor import Tensor
from ...ops.primitive import AbstractTensor


def abstract_array(shape, dtype) -> np.ndarray:
    """A read-only array of `shape` and `dtype` that occupies one element of memory."""
    d = mstype.as_dtype(dtype)
    return np.broadcast_to(np.zeros((), d.np), tuple(shape))


def is_abstract(arr) -> bool:
    """True for an array made by `abstract_array` (every stride 0, more than one element)."""
    return isinstance(arr, np.ndarray) and arr.size > 1 and all(s == 0 for s in arr.strides)


_float_override = [None]       # the dtype abstract_parameters(dtype=...) gives floating parameters


def _abstract_generate(self, shape, dtype=mstype.float32):
    d = mstype.as_dtype(dtype)
    if _float_override[0] is not None and d.kind == "float":
        d = _float_override[0]
    return abstract_array(shape, d)


def _initializer_classes():
    from ...common.initializer import Initializer
    out, stack = [], [Initializer]
    while stack:
        c = stack.pop()
        out.append(c)
        stack.extend(c.__subclasses__())
    return out


_depth = 0


@contextlib.contextmanager
def abstract_parameters(dtype=None):
    """Build Cells whose parameters take no memory (see the module docstring).

        with abstract_parameters():
            model = Llama(cfg)             # 6.74 B parameters, a few MB of RSS
        report = minispore.dryrun(model, ((1, 2048), ms.int64))

    Inside the block every Initializer (the objects behind `weight_init="normal"`, `Normal(0.02)`,
    `"ones"` ...) returns an abstract array. Parameters built from explicit NumPy data are real.
    `dtype` (e.g. ms.bfloat16) makes every floating-point parameter that dtype: a half-precision
    model without a cast pass.
    """
    global _depth
    saved = {}
    old_override = _float_override[0]
    if dtype is not None:
        _float_override[0] = mstype.as_dtype(dtype)
    if _depth == 0:
        for cls in _initializer_classes():
            if "generate" in cls.__dict__:
                saved[cls] = cls.__dict__["generate"]
                cls.generate = _abstract_generate
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        _float_override[0] = old_override
        for cls, fn in saved.items():
            cls.generate = fn


def _is_shape(s) -> bool:
    return isinstance(s, (tuple, list)) and all(isinstance(d, numbers.Integral) and not isinstance(d, bool)
                                                and d >= 0 for d in s)


def _is_dtype_like(d) -> bool:
    if isinstance(d, mstype.DType):
        return True
    if isinstance(d, str):
        try:
            mstype.as_dtype(d)
            return True
        except (TypeError, ValueError):
            return False
    return False


def as_abstract(x, index=0):
    """An AbstractTensor for a tensor argument of `dryrun`, or None for a Python constant.

    Accepted: AbstractTensor, a `(shape, dtype)` pair, a Tensor (its shape and dtype). A pair that
    looks like a spec but is malformed is an error naming the argument.
    """
    if isinstance(x, AbstractTensor):
        return x
    if isinstance(x, Tensor):
        return AbstractTensor(x.shape, x.dtype)
    if isinstance(x, tuple) and len(x) == 2 and isinstance(x[0], (tuple, list)):
        shape, dt = x
        if not _is_shape(shape):
            raise OpValueError("dryrun", f"argument {index} as (shape, dtype) with a shape of non-negative ints",
                               f"shape {shape!r}")
        if not _is_dtype_like(dt):
            raise OpTypeError("dryrun", f"argument {index} as (shape, dtype) with a minispore dtype",
                              f"dtype {dt!r}")
        return AbstractTensor(tuple(int(d) for d in shape), mstype.as_dtype(dt))
    if isinstance(x, np.ndarray):
        raise OpTypeError("dryrun", f"argument {index} as an AbstractTensor, (shape, dtype) or Tensor",
                          "a NumPy array (wrap it in a Tensor, or pass (shape, dtype))")
    return None


__all__ = ["abstract_parameters", "abstract_array", "is_abstract", "as_abstract"]
