"""Random primitives: uniform, standard_normal, normal, randint, rand/randn(_like), multinomial.

Every kernel draws from one NumPy Generator, `minispore.common.context.rng()`, which
`ms.set_seed(s)` reseeds — so one call to set_seed makes a whole program's random numbers (these
ops, initializers, dropout) reproducible, and the generator's state can go into a checkpoint.

The `seed` argument many MindSpore random ops take is honoured as an *op-level* seed: when given,
the op draws from a fresh generator seeded by (seed, global seed) instead of the shared one, so
the same call with the same seeds always returns the same numbers and does not advance the
shared stream.

None of these ops is differentiable (their outputs never carry gradients).
"""
from __future__ import annotations

import numbers

import numpy as np

from ...common import context
from ...common import dtype as mstype
from ...common.tensor import Tensor
from .. import _check as C
from .. import costs
from ..primitive import AbstractTensor, defprim

__all__ = ["uniform", "standard_normal", "normal", "randint", "rand", "randn", "rand_like", "randn_like",
           "multinomial"]

_TENSOR = (Tensor, AbstractTensor)


def _generator(seed):
    if seed is None:
        return context.rng()
    return np.random.default_rng([int(seed), context.get_seed() or 0])


def _seed_arg(op, seed):
    if seed is not None and (not isinstance(seed, numbers.Integral) or isinstance(seed, bool) or seed < 0):
        raise C.OpValueError(op, "'seed' as None or a non-negative int", repr(seed))
    return None if seed is None else int(seed)


def _shape_arg(op, shape):
    if isinstance(shape, Tensor):
        if shape.dtype.kind not in ("int", "uint") or shape.ndim > 1:
            raise C.OpTypeError(op, "a shape as a tuple of ints or a 1-D integer Tensor",
                                f"a {shape.dtype} Tensor of shape {shape.shape}")
        shape = tuple(shape.asnumpy().reshape(-1).tolist())
    shape = C.shape_arg(op, shape)
    if any(s < 0 for s in shape):
        raise C.OpValueError(op, "non-negative sizes", repr(shape))
    return shape


def _as_dtype(op, dtype):
    try:
        return mstype.as_dtype(dtype)
    except TypeError:
        raise C.OpTypeError(op, "'dtype' as a minispore dtype such as ms.float32", repr(dtype)) from None


def _float_dtype(op, dtype, default=mstype.float32):
    d = default if dtype is None else _as_dtype(op, dtype)
    if not d.is_floating:
        raise C.OpTypeError(op, "a floating 'dtype'", str(d))
    return d


def _bounded_dtype(op, arg, v):
    if isinstance(v, _TENSOR):
        return v.shape
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise C.OpTypeError(op, f"'{arg}' as a number or a Tensor", f"{type(v).__name__} {v!r}")
    return ()


def _below_one(u, dtype):
    """Keep U[0, 1) samples below 1 after rounding to a short float (0.9999 rounds to 1 in BFloat16)."""
    out = u.astype(dtype.np)
    if dtype.itemsize < 4:
        out[out >= 1] = np.nextafter(np.array(1, dtype=dtype.np), np.array(0, dtype=dtype.np))
    return out


# ------------------------------------------------------------------------------------------------
# uniform: floats in [minval, maxval), or integers for an integer dtype
def _uniform_infer(minval, maxval, shape, dtype, seed):
    shape = C.broadcast("uniform", tuple(shape), _bounded_dtype("uniform", "minval", minval),
                        _bounded_dtype("uniform", "maxval", maxval))
    return AbstractTensor(shape, dtype)


def _uniform_kernel(minval, maxval, shape, dtype, seed):
    g = _generator(seed)
    lo, hi = np.asarray(minval, dtype=np.float64), np.asarray(maxval, dtype=np.float64)
    shape = C.broadcast("uniform", tuple(shape), lo.shape, hi.shape)     # (what inference said)
    C.output_fits("uniform", shape, dtype)
    if np.isnan(lo).any() or np.isnan(hi).any():
        raise C.OpValueError("uniform", "'minval' and 'maxval' that are numbers, not NaN",
                             f"minval={minval}, maxval={maxval}"[:120])
    with np.errstate(over="ignore", invalid="ignore"):
        span_finite = np.isfinite(hi - lo).all()
    if dtype.is_floating and not span_finite:
        raise C.OpValueError("uniform", "bounds whose range maxval - minval is finite",
                             f"minval={minval}, maxval={maxval}"[:120])
    if not dtype.is_floating and not (np.isfinite(lo).all() and np.isfinite(hi).all()):
        raise C.OpValueError("uniform", "finite bounds for an integer dtype", f"minval={minval}, maxval={maxval}"[:120])
    if np.any(lo > hi) or (not dtype.is_floating and np.any(lo >= hi)):
        raise C.OpValueError("uniform", "minval < maxval", f"minval={minval}, maxval={maxval}")
    if dtype.is_floating:
        if lo.ndim == 0 and hi.ndim == 0 and float(lo) == 0.0 and float(hi) == 1.0:
            return _below_one(g.random(shape, dtype=np.float32 if dtype.itemsize <= 4 else np.float64), dtype)
        return g.uniform(lo, hi, size=shape)
    return g.integers(np.asarray(minval, dtype=np.int64), np.asarray(maxval, dtype=np.int64), size=shape)


_uniform = defprim("uniform", _uniform_infer, _uniform_kernel, doc="uniform samples in [minval, maxval)",
                   random=True, cost=costs.ELEMENTWISE)


def uniform(shape, minval, maxval, seed=None, dtype=mstype.float32):
    """`ops.uniform(shape, minval, maxval, seed=None, dtype=mstype.float32)`: samples in
    [minval, maxval) (numbers or Tensors, broadcast against `shape`); integers for an int dtype."""
    dtype = _as_dtype("uniform", dtype)
    if dtype.kind not in ("float", "int"):
        raise C.OpTypeError("uniform", "a float or int 'dtype'", str(dtype))
    return _uniform(minval, maxval, shape=_shape_arg("uniform", shape), dtype=dtype,
                    seed=_seed_arg("uniform", seed))


def rand(*size, dtype=None, seed=None):
    """`ops.rand(*size, dtype=None, seed=None)`: U[0, 1) samples (Float32 by default)."""
    if len(size) == 1 and isinstance(size[0], (tuple, list, Tensor)):
        size = size[0]
    return _uniform(0.0, 1.0, shape=_shape_arg("rand", size), dtype=_float_dtype("rand", dtype),
                    seed=_seed_arg("rand", seed))


def rand_like(input, seed=None, *, dtype=None):
    """`ops.rand_like(input, seed=None, *, dtype=None)`: U[0, 1) samples shaped like input."""
    C.tensor("rand_like", "input", input)
    default = input.dtype if input.dtype.is_floating else mstype.float32
    return _uniform(0.0, 1.0, shape=tuple(input.shape), dtype=_float_dtype("rand_like", dtype, default),
                    seed=_seed_arg("rand_like", seed))


# ------------------------------------------------------------------------------------------------
# normal
def _normal_infer(mean, stddev, shape, dtype, seed):
    shape = C.broadcast("normal", tuple(shape), _bounded_dtype("normal", "mean", mean),
                        _bounded_dtype("normal", "stddev", stddev))
    return AbstractTensor(shape, dtype)


def _normal_kernel(mean, stddev, shape, dtype, seed):
    g = _generator(seed)
    C.output_fits("normal", C.broadcast("normal", tuple(shape), np.shape(mean), np.shape(stddev)), dtype)
    if np.any(np.asarray(stddev) < 0):
        raise C.OpValueError("normal", "a non-negative 'stddev'", str(stddev))
    z = g.standard_normal(shape, dtype=np.float64 if dtype is mstype.float64 else np.float32)
    if isinstance(mean, (int, float)) and isinstance(stddev, (int, float)) and mean == 0 and stddev == 1:
        return z
    return np.asarray(mean) + np.asarray(stddev) * z


_normal = defprim("normal", _normal_infer, _normal_kernel, doc="normal samples N(mean, stddev^2)", random=True,
                  cost=costs.per_output_element(2))


def standard_normal(shape, seed=None):
    """`ops.standard_normal(shape, seed=None)`: N(0, 1) samples, Float32."""
    return _normal(0.0, 1.0, shape=_shape_arg("standard_normal", shape), dtype=mstype.float32,
                   seed=_seed_arg("standard_normal", seed))


def normal(shape, mean, stddev, seed=None):
    """`ops.normal(shape, mean, stddev, seed=None)`: N(mean, stddev^2) samples (mean and stddev are
    numbers or Tensors broadcast against `shape`), Float32."""
    return _normal(mean, stddev, shape=_shape_arg("normal", shape), dtype=mstype.float32,
                   seed=_seed_arg("normal", seed))


def randn(*size, dtype=None, seed=None):
    """`ops.randn(*size, dtype=None, seed=None)`: N(0, 1) samples (Float32 by default)."""
    if len(size) == 1 and isinstance(size[0], (tuple, list, Tensor)):
        size = size[0]
    return _normal(0.0, 1.0, shape=_shape_arg("randn", size), dtype=_float_dtype("randn", dtype),
                   seed=_seed_arg("randn", seed))


def randn_like(input, seed=None, *, dtype=None):
    """`ops.randn_like(input, seed=None, *, dtype=None)`: N(0, 1) samples shaped like input."""
    C.tensor("randn_like", "input", input)
    default = input.dtype if input.dtype.is_floating else mstype.float32
    return _normal(0.0, 1.0, shape=tuple(input.shape), dtype=_float_dtype("randn_like", dtype, default),
                   seed=_seed_arg("randn_like", seed))


def randint(low, high, size, seed=None, *, dtype=None):
    """`ops.randint(low, high, size, seed=None, *, dtype=None)`: integers in [low, high) (Int64)."""
    for name, v in (("low", low), ("high", high)):
        if not isinstance(v, numbers.Integral) or isinstance(v, bool):
            raise C.OpTypeError("randint", f"'{name}' to be an int", f"{type(v).__name__} {v!r}")
    if low >= high:
        raise C.OpValueError("randint", "low < high", f"low={low}, high={high}")
    d = mstype.int64 if dtype is None else _as_dtype("randint", dtype)
    if d.kind not in ("int", "uint"):
        raise C.OpTypeError("randint", "an integer 'dtype'", str(d))
    return _uniform(int(low), int(high), shape=_shape_arg("randint", size), dtype=d,
                    seed=_seed_arg("randint", seed))


# ------------------------------------------------------------------------------------------------
# multinomial: sample category indices from (unnormalized) probability rows
def _multinomial_infer(x, num_samples, replacement, seed):
    C.floating("multinomial", "input", x)
    if len(x.shape) not in (1, 2):
        raise C.OpValueError("multinomial", "a 1-D or 2-D 'input' of probabilities", f"shape {tuple(x.shape)}")
    n = C.int_attr("multinomial", "num_samples", num_samples, minimum=1)
    if not isinstance(replacement, bool):
        raise C.OpTypeError("multinomial", "'replacement' to be a bool", repr(replacement))
    if not replacement and n > x.shape[-1]:
        raise C.OpValueError("multinomial", f"num_samples <= {x.shape[-1]} categories without replacement",
                             str(n))
    return AbstractTensor(tuple(x.shape[:-1]) + (n,), mstype.int64)


def _multinomial_kernel(x, num_samples, replacement, seed):
    g = _generator(seed)
    C.output_fits("multinomial", x.shape[:-1] + (num_samples,), np.int64)
    p = np.atleast_2d(x).astype(np.float64)
    if not np.all(np.isfinite(p)) or np.any(p < 0):
        raise C.OpValueError("multinomial", "finite, non-negative probabilities", "negative, inf or nan entries")
    rows = p.shape[0]
    if np.any(p.sum(axis=1) <= 0):
        raise C.OpValueError("multinomial", "rows with a positive sum", "a row of zeros")
    if replacement:
        # inverse CDF: category i is drawn when cdf[i-1] <= u < cdf[i]. Dividing by the row's own
        # last cumulative sum makes that entry (and any trailing zero-probability ones) exactly 1.0,
        # so u < 1 can never land on a zero-probability category.
        cs = np.cumsum(p, axis=1)
        cdf = cs / cs[:, -1:]
        u = g.random((rows, num_samples))
        out = np.empty((rows, num_samples), dtype=np.int64)
        for r in range(rows):
            out[r] = np.searchsorted(cdf[r], u[r], side="right")
    else:
        if np.any((p > 0).sum(axis=1) < num_samples):
            raise C.OpValueError("multinomial", f"at least num_samples={num_samples} non-zero categories per row "
                                 "when sampling without replacement", "fewer")
        # Gumbel-top-k: the k largest log(p) + Gumbel noise are a draw without replacement
        with np.errstate(divide="ignore"):
            keys = np.log(p) - np.log(-np.log(g.random(p.shape)))
        out = np.argsort(-keys, axis=1, kind="stable")[:, :num_samples]
    return out.reshape(x.shape[:-1] + (num_samples,))


_multinomial = defprim("multinomial", _multinomial_infer, _multinomial_kernel,
                       doc="sample category indices from probability rows", random=True,
                       cost=costs.per_input_element(3, index=0))


def multinomial(input, num_samples, replacement=True, seed=None):
    """`ops.multinomial(input, num_samples, replacement=True, seed=None)`: for each row of
    non-negative weights (they need not sum to 1), `num_samples` category indices (Int64)."""
    return _multinomial(input, num_samples=C.plain_ints(num_samples), replacement=C.plain_ints(replacement),
                        seed=_seed_arg("multinomial", seed))
