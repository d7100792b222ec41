"""Op table: elementwise arithmetic, math, comparison, where, cast."""
import numpy as np
import scipy.special

from ... import ops
from ...common import dtype as mstype
from ..opinfo import (OpInfo, SampleInput, elementwise_binary_samples, elementwise_unary_samples, noncontig,
                      rand, register)

F16 = (mstype.float16, mstype.bfloat16, mstype.float32, mstype.float64)


def _binary(name, ref, low=-2.0, high=2.0, rhs_low=None, rhs_high=None, **kw):
    return OpInfo(name, getattr(ops, name), ref, elementwise_binary_samples(low, high, rhs_low, rhs_high),
                  dtypes=kw.pop("dtypes", F16), **kw)


def _unary(name, ref, low=-2.0, high=2.0, **kw):
    return OpInfo(name, getattr(ops, name), ref, elementwise_unary_samples(low, high),
                  dtypes=kw.pop("dtypes", F16), **kw)


def _cmp_samples(rng, dtype):
    a = np.round(rand(rng, (3, 4), dtype), 0)
    b = np.round(rand(rng, (3, 4), dtype), 0)
    yield SampleInput((a, b))
    yield SampleInput((a, np.round(rand(rng, (4,), dtype), 0)), desc="broadcast")
    yield SampleInput((a, 0.0), desc="python scalar")


def _bool_samples(rng, dtype):
    yield SampleInput((rng.random((3, 4)) > 0.5, rng.random((3, 4)) > 0.5))
    yield SampleInput((rng.random((3, 4)) > 0.5, rng.random((4,)) > 0.5), desc="broadcast")


def _where_samples(rng, dtype):
    c = rng.random((3, 4)) > 0.5
    yield SampleInput((c, rand(rng, (3, 4), dtype), rand(rng, (3, 4), dtype)), grad_args=(1, 2))
    yield SampleInput((c, rand(rng, (4,), dtype), rand(rng, (3, 1), dtype)), desc="broadcast", grad_args=(1, 2))
    yield SampleInput((c, rand(rng, (3, 4), dtype), 0.0), desc="scalar y", grad_args=(1,))
    # large enough for the branch-free bitwise select: an irregular mask, NaN/inf/-0.0 on both
    # sides (their exact bits must come through), a mask larger than the operands, a strided view
    big = rng.random((64, 80)) > 0.5
    x, y = rand(rng, (64, 80), dtype), rand(rng, (64, 80), dtype)
    x[::7, ::3], y[::5, ::2], x[1::9, 1::4], y[2::6, 1::3] = np.nan, -0.0, np.inf, -np.inf
    yield SampleInput((big, x, y), desc="large, irregular mask, special values", grad_args=())
    yield SampleInput((rng.random((3, 64, 80)) > 0.5, rand(rng, (64, 1), dtype), rand(rng, (80,), dtype)),
                      desc="large, mask broadcasts the operands", grad_args=())
    yield SampleInput((big, noncontig(rand(rng, (64, 80), dtype)), rand(rng, (80,), dtype)),
                      desc="large, non-contiguous", grad_args=())


def _int_div_samples(rng, dtype):
    yield SampleInput((np.round(rand(rng, (3, 4), dtype, -9, 9)), np.array([1.5, -2.0, 3.0, -4.0], dtype=dtype)),
                      desc="broadcast, signed divisors")
    yield SampleInput((np.arange(-6, 6).astype(dtype).reshape(3, 4), 4.0), desc="python scalar")


def _special_samples(rng, dtype):
    yield SampleInput((np.array([0.0, -1.5, np.inf, -np.inf, np.nan, 2.0], dtype=dtype),), desc="inf and nan")


def _bool_unary_samples(rng, dtype):
    yield SampleInput((rng.random((3, 4)) > 0.5,))


def _like_samples(rng, dtype):
    yield SampleInput((rand(rng, (3, 4), dtype),))
    yield SampleInput((rand(rng, (), dtype),), desc="0-d")
    yield SampleInput((rand(rng, (2, 3), dtype),), {"dtype": mstype.int32}, desc="dtype override")


def _cast_samples(rng, dtype):
    yield SampleInput((rand(rng, (3, 4), dtype),), {"dtype": mstype.float64})
    yield SampleInput((rand(rng, (3, 4), dtype),), {"dtype": mstype.float32})


def _cast_int_samples(rng, dtype):
    yield SampleInput((np.array([-2.5, -0.5, 0.5, 2.7], dtype=dtype),), {"dtype": mstype.int32}, desc="trunc")


def _pow_samples(rng, dtype):
    yield SampleInput((rand(rng, (3, 4), dtype, 0.5, 2.0), rand(rng, (3, 4), dtype, -1.5, 1.5)))
    yield SampleInput((rand(rng, (3, 4), dtype, 0.5, 2.0), 3.0), desc="scalar exponent")
    yield SampleInput((rand(rng, (3, 4), dtype, -2, 2), 2.0), desc="negative base, int exponent")
    yield SampleInput((rand(rng, (2, 3, 4), dtype, 0.5, 2.0), rand(rng, (4,), dtype, -1, 1)), desc="broadcast")


def _maxmin_samples(rng, dtype):
    # distinct values so the subgradient at ties does not matter
    yield SampleInput((rand(rng, (3, 4), dtype), rand(rng, (3, 4), dtype) + 0.01))
    yield SampleInput((rand(rng, (2, 3, 4), dtype), rand(rng, (4,), dtype) + 0.013), desc="broadcast")


register(
    _binary("add", np.add),
    _binary("sub", np.subtract),
    _binary("mul", np.multiply),
    _binary("div", np.true_divide, rhs_low=0.5, rhs_high=2.0),
    OpInfo("pow", ops.pow, np.power, _pow_samples, dtypes=(mstype.float32, mstype.float64),
           tols={mstype.float32: (1e-5, 1e-5)}),
    OpInfo("maximum", ops.maximum, np.maximum, _maxmin_samples, dtypes=F16),
    OpInfo("minimum", ops.minimum, np.minimum, _maxmin_samples, dtypes=F16),
    _unary("neg", np.negative),
    _unary("abs", np.abs, low=0.1, high=2.0),
    _unary("exp", np.exp),
    _unary("log", np.log, low=0.5, high=3.0),
    _unary("sqrt", np.sqrt, low=0.5, high=3.0),
    _unary("rsqrt", lambda a: 1 / np.sqrt(a), low=0.5, high=3.0),
    _unary("square", np.square),
    _unary("reciprocal", np.reciprocal, low=0.5, high=3.0),
    _unary("sin", np.sin),
    _unary("cos", np.cos),
    _unary("erf", scipy.special.erf),
    _unary("sign", np.sign, differentiable=False, low=0.1, high=2.0),
    _unary("floor", np.floor, differentiable=False),
    _unary("ceil", np.ceil, differentiable=False),
    OpInfo("equal", ops.equal, np.equal, _cmp_samples, differentiable=False),
    OpInfo("not_equal", ops.not_equal, np.not_equal, _cmp_samples, differentiable=False),
    OpInfo("less", ops.less, np.less, _cmp_samples, differentiable=False),
    OpInfo("less_equal", ops.less_equal, np.less_equal, _cmp_samples, differentiable=False),
    OpInfo("greater", ops.greater, np.greater, _cmp_samples, differentiable=False),
    OpInfo("greater_equal", ops.greater_equal, np.greater_equal, _cmp_samples, differentiable=False),
    OpInfo("logical_and", ops.logical_and, np.logical_and, _bool_samples, differentiable=False,
           dtypes=(mstype.bool_,)),
    OpInfo("logical_or", ops.logical_or, np.logical_or, _bool_samples, differentiable=False,
           dtypes=(mstype.bool_,)),
    OpInfo("where", ops.where, np.where, _where_samples, dtypes=F16),
    OpInfo("floor_divide", ops.floor_divide, np.floor_divide, _int_div_samples, differentiable=False,
           primitive="floor_div"),
    OpInfo("remainder", ops.remainder, np.mod, _int_div_samples, differentiable=False, primitive="mod"),
    _unary("round", np.round, differentiable=False),
    _unary("deepcopy", np.copy, primitive="copy"),
    _unary("stop_gradient", lambda a: a, differentiable=False),
    OpInfo("isnan", ops.isnan, np.isnan, _special_samples, differentiable=False),
    OpInfo("isinf", ops.isinf, np.isinf, _special_samples, differentiable=False),
    OpInfo("isfinite", ops.isfinite, np.isfinite, _special_samples, differentiable=False),
    OpInfo("logical_not", ops.logical_not, np.logical_not, _bool_unary_samples, differentiable=False,
           dtypes=(mstype.bool_,)),
    OpInfo("logical_xor", ops.logical_xor, np.logical_xor, _bool_samples, differentiable=False,
           dtypes=(mstype.bool_,)),
    OpInfo("zeros_like", ops.zeros_like, lambda a, dtype=None: np.zeros_like(a, dtype=dtype.np if dtype else None),
           _like_samples, differentiable=False),
    OpInfo("ones_like", ops.ones_like, lambda a, dtype=None: np.ones_like(a, dtype=dtype.np if dtype else None),
           _like_samples, differentiable=False),
    OpInfo("cast", ops.cast, lambda a, dtype: a.astype(dtype.np).astype(np.float64), _cast_samples,
           fd_eps=1e-3, grad_tol=(1e-3, 1e-3)),   # the float32 rounding needs a larger FD step
    OpInfo("cast_float_to_int", ops.cast, lambda a, dtype: np.trunc(a).astype(dtype.np), _cast_int_samples,
           differentiable=False, primitive="cast"),
)
