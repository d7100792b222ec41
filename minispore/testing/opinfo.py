"""The op table format (after PyTorch's OpInfo): one entry per public op.

An `OpInfo` says how to call the op, what it should compute (a NumPy float64 reference written
independently of the kernel), which dtypes it supports with what tolerances, and which inputs are
differentiable. `sample_inputs(rng, dtype)` yields `SampleInput`s: NumPy arrays in `args` become
Tensors (views stay views, so non-contiguous inputs are exercised), everything else passes as is.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from ..common import dtype as mstype

# default tolerances (rtol, atol) per dtype for forward checks
DEFAULT_TOLS = {
    mstype.float64: (1e-7, 1e-9),
    mstype.float32: (1e-5, 1e-6),
    mstype.float16: (2e-3, 2e-3),
    mstype.bfloat16: (1.6e-2, 1.6e-2),
}


@dataclass
class SampleInput:
    args: tuple
    kwargs: dict = field(default_factory=dict)
    desc: str = ""
    # which positional args to differentiate (None = every float ndarray arg)
    grad_args: Sequence[int] | None = None

    def __repr__(self):
        def show(a):
            if isinstance(a, np.ndarray):
                tag = "" if a.flags["C_CONTIGUOUS"] else ",noncontig"
                return f"arr{a.shape}{tag}"
            return repr(a)
        return (f"SampleInput({', '.join(show(a) for a in self.args)}"
                + (f", {self.kwargs}" if self.kwargs else "") + (f" # {self.desc}" if self.desc else "") + ")")


@dataclass
class OpInfo:
    name: str                                   # public name, e.g. "add"
    op: Callable                                # the minispore function: op(*tensors_and_values, **kwargs)
    ref: Callable                               # NumPy float64 reference with the same signature (on ndarrays)
    sample_inputs: Callable                     # (rng, np_dtype) -> iterable of SampleInput
    dtypes: tuple = (mstype.float32, mstype.float64)
    tols: dict = field(default_factory=dict)    # dtype -> (rtol, atol), overrides DEFAULT_TOLS
    differentiable: bool = True
    grad_tol: tuple = (1e-5, 1e-6)              # (rtol, atol) for float64 finite differences
    grad_output: int | None = None              # for multi-output ops: which output to check
    fd_eps: float = 1e-6
    supports_bad_input: bool = True
    primitive: str | None = None                # primitive name, when it differs from `name`
    skips: dict = field(default_factory=dict)   # backend name -> reason
    notes: str = ""

    def tol(self, dtype):
        return self.tols.get(dtype, DEFAULT_TOLS.get(dtype, (0, 0)))


OP_DB: list[OpInfo] = []


def register(*infos: OpInfo):
    names = {i.name for i in OP_DB}
    for info in infos:
        if info.name in names:
            raise ValueError(f"OpInfo '{info.name}' registered twice")
        OP_DB.append(info)
        names.add(info.name)
    return infos


# ---------------------------------------------------------------------------------------------
# reusable sample makers
def rand(rng, shape, dtype=np.float32, low=-2.0, high=2.0):
    return rng.uniform(low, high, size=shape).astype(dtype)


def positive(rng, shape, dtype=np.float32, low=0.5, high=2.0):
    return rng.uniform(low, high, size=shape).astype(dtype)


def noncontig(arr):
    """A non-contiguous view with the same values as `arr` (a transposed copy transposed back)."""
    if arr.ndim < 2:
        big = np.empty(arr.shape[0] * 2 if arr.ndim else 2, dtype=arr.dtype)
        v = big[::2]
        v[...] = arr
        return v if arr.ndim else arr
    return np.ascontiguousarray(np.swapaxes(arr, -1, -2)).swapaxes(-1, -2)


def elementwise_unary_samples(low=-2.0, high=2.0):
    def samples(rng, dtype):
        yield SampleInput((rand(rng, (), dtype, low, high),), desc="0-d")
        yield SampleInput((rand(rng, (5,), dtype, low, high),))
        yield SampleInput((rand(rng, (3, 4), dtype, low, high),))
        yield SampleInput((noncontig(rand(rng, (4, 3), dtype, low, high)),), desc="non-contiguous")
        yield SampleInput((rand(rng, (2, 0, 3), dtype, low, high),), desc="empty")
    return samples


def elementwise_binary_samples(low=-2.0, high=2.0, rhs_low=None, rhs_high=None):
    rl = low if rhs_low is None else rhs_low
    rh = high if rhs_high is None else rhs_high

    def samples(rng, dtype):
        yield SampleInput((rand(rng, (3, 4), dtype, low, high), rand(rng, (3, 4), dtype, rl, rh)))
        yield SampleInput((rand(rng, (), dtype, low, high), rand(rng, (), dtype, rl, rh)), desc="0-d")
        yield SampleInput((rand(rng, (2, 3, 4), dtype, low, high), rand(rng, (4,), dtype, rl, rh)), desc="broadcast")
        yield SampleInput((rand(rng, (3, 1), dtype, low, high), rand(rng, (1, 4), dtype, rl, rh)), desc="broadcast both")
        yield SampleInput((noncontig(rand(rng, (4, 3), dtype, low, high)), rand(rng, (4, 3), dtype, rl, rh)),
                          desc="non-contiguous")
        yield SampleInput((rand(rng, (3, 4), dtype, low, high), float(rng.uniform(rl, rh))), desc="python scalar")
    return samples
