"""Op table: log1p/expm1, trigonometric and hyperbolic functions and inverses, log2/log10/exp2,
trunc/frac, sinc, erfc, and the binary atan2, logaddexp(2), xlogy, hypot, fmod, copysign, xdivy,
lerp, heaviside, isclose. References are NumPy/SciPy float64; domains keep samples where the
function is smooth (|x| < 1 for asin/atanh, x > 1 for acosh, away from fmod's jumps)."""
import numpy as np
import scipy.special

from ... import ops
from ...common import dtype as mstype
from ..opinfo import OpInfo, SampleInput, elementwise_binary_samples, elementwise_unary_samples, rand, register

F16 = (mstype.float16, mstype.bfloat16, mstype.float32, mstype.float64)
F = (mstype.float32, mstype.float64)


def _unary(name, ref, low=-2.0, high=2.0, **kw):
    return OpInfo(name, getattr(ops, name), ref, elementwise_unary_samples(low, high), dtypes=kw.pop("dtypes", F16),
                  **kw)


def _binary(name, ref, low=-2.0, high=2.0, rhs_low=None, rhs_high=None, **kw):
    return OpInfo(name, getattr(ops, name), ref, elementwise_binary_samples(low, high, rhs_low, rhs_high),
                  dtypes=kw.pop("dtypes", F16), **kw)


def _tensor_pair_samples(low=-2.0, high=2.0):
    def samples(rng, dtype):
        yield SampleInput((rand(rng, (3, 4), dtype, low, high), rand(rng, (3, 4), dtype, low, high)))
        yield SampleInput((rand(rng, (2, 3, 4), dtype, low, high), rand(rng, (4,), dtype, low, high)), desc="broadcast")
        yield SampleInput((rand(rng, (), dtype, low, high), rand(rng, (), dtype, low, high)), desc="0-d")
        yield SampleInput((np.array([800.0, -800.0, 0.0], dtype=dtype), np.array([800.0, 3.0, -900.0], dtype=dtype)),
                          desc="extremes (no overflow)", grad_args=())
    return samples


def _fmod_samples(rng, dtype):
    x = rand(rng, (3, 4), dtype, -5, 5)
    y = rand(rng, (3, 4), dtype, 0.7, 1.9) * np.where(rng.random((3, 4)) > 0.5, 1, -1).astype(dtype)
    q = x.astype(np.float64) / y
    x = np.where(np.abs(q - np.round(q)) < 0.05, x + 0.2, x).astype(dtype)     # away from the jumps
    yield SampleInput((x, y))
    yield SampleInput((x, 1.5), desc="python scalar")


def _fmod_int_samples(rng, dtype):
    yield SampleInput((np.arange(-6, 6, dtype=dtype).reshape(3, 4), np.array([4, -4, 3, -3], dtype=dtype)))


def _xlogy_samples(rng, dtype):
    yield SampleInput((rand(rng, (3, 4), dtype), rand(rng, (3, 4), dtype, 0.5, 2.0)))
    yield SampleInput((rand(rng, (2, 3, 4), dtype), rand(rng, (4,), dtype, 0.5, 2.0)), desc="broadcast")
    yield SampleInput((np.array([0.0, 0.0, 1.5], dtype=dtype), np.array([0.0, -1.0, 2.0], dtype=dtype)),
                      desc="x == 0 gives 0", grad_args=())


def _xlogy_ref(x, y):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(x == 0, 0.0, x * np.log(np.where(x == 0, 1.0, y)))


def _xdivy_ref(x, y):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(x == 0, 0.0, x / np.where(x == 0, 1.0, y))


def _xdivy_samples(rng, dtype):
    yield SampleInput((rand(rng, (3, 4), dtype), rand(rng, (3, 4), dtype, 0.5, 2.0)))
    yield SampleInput((np.array([0.0, 0.0, 1.5], dtype=dtype), np.array([0.0, -1.0, 2.0], dtype=dtype)),
                      desc="x == 0 gives 0", grad_args=())


def _copysign_samples(rng, dtype):
    yield SampleInput((rand(rng, (3, 4), dtype, 0.2, 2) * np.sign(rng.standard_normal((3, 4))).astype(dtype),
                       rand(rng, (3, 4), dtype)), grad_args=(0,))
    yield SampleInput((rand(rng, (3, 4), dtype, 0.2, 2), -1.0), desc="python scalar", grad_args=(0,))


def _lerp_samples(rng, dtype):
    yield SampleInput((rand(rng, (3, 4), dtype), rand(rng, (3, 4), dtype), rand(rng, (3, 4), dtype, 0, 1)))
    yield SampleInput((rand(rng, (3, 4), dtype), rand(rng, (4,), dtype), 0.25), desc="float weight, broadcast")


def _heaviside_samples(rng, dtype):
    yield SampleInput((np.array([-1.5, 0.0, 2.0, 0.0], dtype=dtype), np.array([0.5, 0.25, 0.5, 0.75], dtype=dtype)))


def _isclose_samples(rng, dtype):
    a = rand(rng, (8,), dtype)
    b = a.copy()
    b[::2] += 1e-3
    b[1] = np.nan
    a[1] = np.nan
    yield SampleInput((a, b))
    yield SampleInput((a, b), {"rtol": 1e-2, "atol": 1e-2, "equal_nan": True}, desc="loose, equal_nan")
    yield SampleInput((np.array([np.inf, -np.inf, 1.0], dtype=dtype), np.array([np.inf, np.inf, 1.0], dtype=dtype)),
                      desc="infinities")


def _isclose_ref(a, b, rtol=1e-5, atol=1e-8, equal_nan=False):
    return np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)


def _trunc_samples(rng, dtype):
    yield SampleInput((np.array([-2.7, -0.5, 0.0, 0.5, 2.7, 3.0], dtype=dtype),), desc="integers: jumps",
                      grad_args=())
    yield from elementwise_unary_samples(-3, 3)(rng, dtype)


def _int_samples(rng, dtype):
    yield SampleInput((np.arange(-5, 7, dtype=dtype).reshape(3, 4),))


def _sinc_samples(rng, dtype):
    yield from elementwise_unary_samples(-2, 2)(rng, dtype)
    yield SampleInput((np.array([0.0, 1.0, -2.0], dtype=dtype),), desc="zero and integers")


register(
    _unary("log1p", np.log1p, low=-0.5, high=2.0),
    _unary("expm1", np.expm1),
    _unary("tan", np.tan, low=-1.2, high=1.2),
    _unary("asin", np.arcsin, low=-0.9, high=0.9),
    _unary("acos", np.arccos, low=-0.9, high=0.9),
    _unary("atan", np.arctan),
    _unary("sinh", np.sinh),
    _unary("cosh", np.cosh),
    _unary("asinh", np.arcsinh),
    _unary("acosh", np.arccosh, low=1.2, high=3.0),
    _unary("atanh", np.arctanh, low=-0.9, high=0.9),
    _unary("log2", np.log2, low=0.3, high=3.0),
    _unary("log10", np.log10, low=0.3, high=3.0),
    _unary("exp2", np.exp2),
    _unary("erfc", scipy.special.erfc),
    OpInfo("exp2_int", ops.exp2, np.exp2, _int_samples, dtypes=(mstype.int32, mstype.int64), differentiable=False,
           primitive="exp2"),
    OpInfo("sinc", ops.sinc, np.sinc, _sinc_samples, dtypes=F16),
    OpInfo("trunc", ops.trunc, np.trunc, _trunc_samples, dtypes=F16),
    OpInfo("trunc_int", ops.trunc, lambda a: a, _int_samples, dtypes=(mstype.int32,), differentiable=False,
           primitive="trunc"),
    OpInfo("frac", ops.frac, lambda a: a - np.trunc(a), _trunc_samples, dtypes=F16),
    _unary("deg2rad", np.deg2rad, primitive="mul"),
    _unary("rad2deg", np.rad2deg, primitive="mul"),
    _binary("atan2", np.arctan2, rhs_low=0.3, rhs_high=2.0),
    OpInfo("logaddexp", ops.logaddexp, np.logaddexp, _tensor_pair_samples(), dtypes=F16),
    OpInfo("logaddexp2", ops.logaddexp2, np.logaddexp2, _tensor_pair_samples(), dtypes=F16),
    OpInfo("xlogy", ops.xlogy, _xlogy_ref, _xlogy_samples, dtypes=F16),
    OpInfo("xdivy", ops.xdivy, _xdivy_ref, _xdivy_samples, dtypes=F16),
    _binary("hypot", np.hypot, low=0.3, high=2.0),
    OpInfo("fmod", ops.fmod, np.fmod, _fmod_samples, dtypes=F),
    OpInfo("fmod_int", ops.fmod, np.fmod, _fmod_int_samples, dtypes=(mstype.int32, mstype.int64), differentiable=False,
           primitive="fmod"),
    OpInfo("copysign", ops.copysign, np.copysign, _copysign_samples, dtypes=F),
    OpInfo("lerp", ops.lerp, lambda a, b, w: a + w * (b - a), _lerp_samples, dtypes=F16),
    OpInfo("heaviside", ops.heaviside, np.heaviside, _heaviside_samples, dtypes=F, differentiable=False),
    OpInfo("isclose", ops.isclose, _isclose_ref, _isclose_samples, dtypes=F, differentiable=False),
)
