"""Op table: addcmul/addcdiv, logit, nan_to_num, float_power, bitwise ops, invert, fmax/fmin,
signbit, isneginf/isposinf, gcd/lcm, logcumsumexp, cosine_similarity, nanmean, trapz, bias_add,
dot/inner/vecdot, clip_by_norm (float64 NumPy references written independently)."""
import numpy as np

from ... import ops
from ...common import dtype as mstype
from ..opinfo import OpInfo, SampleInput, noncontig, rand, register

F = (mstype.float32, mstype.float64)
F16 = (mstype.float16, mstype.float32, mstype.float64)
I = (mstype.int32, mstype.int64)


def _addc_samples(positive_den=False):
    def samples(rng, dtype):
        lo = 0.5 if positive_den else -2.0
        yield SampleInput((rand(rng, (3, 4), dtype), rand(rng, (3, 4), dtype), rand(rng, (3, 4), dtype, lo, 2.0)))
        yield SampleInput((rand(rng, (4,), dtype), rand(rng, (3, 1), dtype), rand(rng, (1, 4), dtype, lo, 2.0), 0.5),
                          desc="broadcast, value")
        yield SampleInput((rand(rng, (), dtype), noncontig(rand(rng, (2, 3), dtype)), rand(rng, (2, 3), dtype, lo, 2.0)),
                          {"value": -2}, desc="0-d input, non-contiguous")
    return samples


def _logit_samples(rng, dtype):
    yield SampleInput((rand(rng, (3, 4), dtype, 0.05, 0.95),))
    yield SampleInput((rand(rng, (3, 4), dtype, 0.2, 0.8),), {"eps": 0.1}, desc="eps inside")
    yield SampleInput((np.array([0.0, 0.05, 0.5, 1.0], dtype=dtype),), {"eps": 0.1}, desc="eps clamps", grad_args=())


def _logit_ref(x, eps=None):
    if eps is not None:
        x = np.clip(x, eps, 1 - eps)
    return np.log(x / (1 - x))


def _n2n_samples(rng, dtype):
    a = rand(rng, (2, 4), dtype)
    a[0, 1], a[1, 2], a[1, 3] = np.nan, np.inf, -np.inf
    yield SampleInput((a,), grad_args=())                  # (dtype-max outputs overflow the FD sum)
    yield SampleInput((a,), {"nan": 1.5, "posinf": 7.0, "neginf": -7.0}, desc="explicit values", grad_args=(0,))


def _n2n_default_ref(dt):
    big = float(np.finfo(dt).max)

    def ref(a, nan=None, posinf=None, neginf=None):
        return np.nan_to_num(a, nan=0.0 if nan is None else nan, posinf=big if posinf is None else posinf,
                             neginf=-big if neginf is None else neginf)
    return ref


_n2n_ref32 = _n2n_default_ref(np.float32)


def _fpow_samples(rng, dtype):
    yield SampleInput((rand(rng, (3, 4), dtype, 0.5, 2.0), rand(rng, (3, 4), dtype)))
    yield SampleInput((rand(rng, (3, 4), dtype, 0.5, 2.0), 2.5), desc="python exponent")
    yield SampleInput((1.5, rand(rng, (4,), dtype)), desc="python base")


def _bit_samples(rng, dtype):
    a = rng.integers(-20, 20, (3, 4)).astype(dtype)
    b = rng.integers(-20, 20, (4,)).astype(dtype)
    yield SampleInput((a, b), desc="broadcast")
    yield SampleInput((a, 6), desc="python int")


def _shift_samples(rng, dtype):
    yield SampleInput((rng.integers(-20, 20, (3, 4)).astype(dtype), rng.integers(0, 5, (3, 4)).astype(dtype)))
    yield SampleInput((rng.integers(0, 20, (5,)).astype(dtype), 2), desc="python int")


def _fmax_samples(rng, dtype):
    a, b = rand(rng, (3, 4), dtype), rand(rng, (3, 4), dtype)
    yield SampleInput((a, b))
    yield SampleInput((rand(rng, (2, 3, 4), dtype), rand(rng, (4,), dtype)), desc="broadcast")
    yield SampleInput((np.array([np.nan, 1.0, np.nan, 2.0], dtype=dtype), np.array([1.0, np.nan, np.nan, 2.0], dtype=dtype)),
                      desc="NaN and tie", grad_args=())


def _gcd_samples(rng, dtype):
    yield SampleInput((rng.integers(-30, 30, (3, 4)).astype(dtype), rng.integers(1, 30, (4,)).astype(dtype)))


def _lcse_samples(rng, dtype):
    yield SampleInput((rand(rng, (3, 4), dtype), 1))
    yield SampleInput((rand(rng, (3, 4), dtype), 0), desc="axis 0")
    yield SampleInput((noncontig(rand(rng, (4, 3), dtype)), -1), desc="non-contiguous")
    yield SampleInput((np.array([500.0, 501.0, -3.0], dtype=np.float64).astype(dtype) if dtype == np.float64
                       else np.array([50.0, 51.0, -3.0], dtype=dtype), 0), desc="large values")


def _lcse_ref(x, axis):
    m = np.max(x, axis=axis, keepdims=True)
    return np.log(np.cumsum(np.exp(x - m), axis=axis)) + m


def _cos_samples(rng, dtype):
    yield SampleInput((rand(rng, (3, 4), dtype), rand(rng, (3, 4), dtype)))
    yield SampleInput((rand(rng, (3, 4), dtype), rand(rng, (1, 4), dtype)), {"dim": 0}, desc="broadcast, dim 0")


def _cos_ref(a, b, dim=1, eps=1e-8):
    num = np.sum(a * b, axis=dim)
    return num / np.sqrt(np.maximum(np.sum(a * a, axis=dim) * np.sum(b * b, axis=dim), eps * eps))


def _nanmean_samples(rng, dtype):
    a = rand(rng, (3, 4), dtype)
    a[0, 1] = a[2, 3] = np.nan
    yield SampleInput((a,), grad_args=())
    yield SampleInput((a, 1, True), desc="axis 1 keepdims", grad_args=())
    yield SampleInput((rand(rng, (3, 4), dtype), 0), desc="no NaN")


def _trapz_samples(rng, dtype):
    yield SampleInput((rand(rng, (3, 5), dtype),))
    yield SampleInput((rand(rng, (3, 5), dtype), np.sort(rand(rng, (5,), dtype))), desc="1-D x")
    yield SampleInput((rand(rng, (4, 3), dtype),), {"dx": 0.5, "dim": 0}, desc="dx, dim 0")
    yield SampleInput((rand(rng, (2, 4), dtype), rand(rng, (2, 4), dtype)), desc="x of y's shape")


def _trapz_ref(y, x=None, dx=1.0, dim=-1):
    return np.trapezoid(y, x=x, dx=dx, axis=dim) if hasattr(np, "trapezoid") else np.trapz(y, x=x, dx=dx, axis=dim)


def _bias_samples(rng, dtype):
    yield SampleInput((rand(rng, (2, 3, 4, 5), dtype), rand(rng, (3,), dtype)))
    yield SampleInput((rand(rng, (4, 3), dtype), rand(rng, (3,), dtype)), desc="2-D")


def _bias_ref(x, b):
    return x + b.reshape((b.shape[0],) + (1,) * (x.ndim - 2))


def _dot_samples(rng, dtype):
    yield SampleInput((rand(rng, (3, 4), dtype), rand(rng, (4, 2), dtype)))
    yield SampleInput((rand(rng, (2, 3, 4), dtype), rand(rng, (5, 4, 2), dtype)), desc="3-D both")


def _inner_samples(rng, dtype):
    yield SampleInput((rand(rng, (3, 4), dtype), rand(rng, (2, 4), dtype)))
    yield SampleInput((rand(rng, (4,), dtype), rand(rng, (2, 3, 4), dtype)), desc="1-D with 3-D")
    yield SampleInput((rand(rng, (), dtype), rand(rng, (2, 3), dtype)), desc="0-d")


def _vecdot_samples(rng, dtype):
    yield SampleInput((rand(rng, (3, 4), dtype), rand(rng, (3, 4), dtype)))
    yield SampleInput((rand(rng, (3, 4), dtype), rand(rng, (1, 4), dtype)), {"axis": 0}, desc="broadcast, axis 0")


def _clipnorm_samples(rng, dtype):
    yield SampleInput((rand(rng, (3, 4), dtype), 1.0))
    yield SampleInput((rand(rng, (3, 4), dtype, 0.0, 0.1), 5.0), desc="no clipping")
    yield SampleInput((rand(rng, (3, 4), dtype), 2.0, 1.0), desc="L1")


def _clipnorm_ref(x, max_norm, norm_type=2.0):
    total = np.sum(np.abs(x) ** norm_type) ** (1.0 / norm_type)
    return x * min(1.0, max_norm / (total + 1e-6))


register(
    OpInfo("addcmul", ops.addcmul, lambda a, b, c, value=1: a + value * b * c, _addc_samples(), dtypes=F16,
           primitive="mul"),
    OpInfo("addcdiv", ops.addcdiv, lambda a, b, c, value=1: a + value * b / c, _addc_samples(True), dtypes=F,
           primitive="div"),
    OpInfo("logit", ops.logit, _logit_ref, _logit_samples, dtypes=F, primitive="log"),
    OpInfo("nan_to_num", ops.nan_to_num, _n2n_ref32, _n2n_samples, dtypes=(mstype.float32,)),
    OpInfo("nan_to_num_f64", ops.nan_to_num, _n2n_default_ref(np.float64), _n2n_samples, dtypes=(mstype.float64,),
           primitive="nan_to_num"),
    OpInfo("float_power", ops.float_power, np.power, _fpow_samples, dtypes=F, primitive="pow"),
    OpInfo("bitwise_and", ops.bitwise_and, np.bitwise_and, _bit_samples, dtypes=I, differentiable=False),
    OpInfo("bitwise_or", ops.bitwise_or, np.bitwise_or, _bit_samples, dtypes=I, differentiable=False),
    OpInfo("bitwise_xor", ops.bitwise_xor, np.bitwise_xor, _bit_samples, dtypes=I, differentiable=False),
    OpInfo("bitwise_left_shift", ops.bitwise_left_shift, np.left_shift, _shift_samples, dtypes=I,
           differentiable=False),
    OpInfo("bitwise_right_shift", ops.bitwise_right_shift, np.right_shift, _shift_samples, dtypes=I,
           differentiable=False),
    OpInfo("invert", ops.invert, np.invert, lambda rng, dt: [SampleInput((rng.integers(-9, 9, (3, 4)).astype(dt),))],
           dtypes=I, differentiable=False),
    OpInfo("fmax", ops.fmax, np.fmax, _fmax_samples, dtypes=F16),
    OpInfo("fmin", ops.fmin, np.fmin, _fmax_samples, dtypes=F16),
    OpInfo("signbit", ops.signbit, lambda a: a < 0,
           lambda rng, dt: [SampleInput((np.array([-2.0, -0.0, 0.0, 3.0, -np.inf], dtype=dt),))],
           dtypes=F, differentiable=False),
    OpInfo("isneginf", ops.isneginf, np.isneginf,
           lambda rng, dt: [SampleInput((np.array([-np.inf, 0.0, np.inf, np.nan], dtype=dt),))], dtypes=F16,
           differentiable=False),
    OpInfo("isposinf", ops.isposinf, np.isposinf,
           lambda rng, dt: [SampleInput((np.array([-np.inf, 0.0, np.inf, np.nan], dtype=dt),))], dtypes=F16,
           differentiable=False),
    OpInfo("gcd", ops.gcd, np.gcd, _gcd_samples, dtypes=I, differentiable=False),
    OpInfo("lcm", ops.lcm, np.lcm, _gcd_samples, dtypes=I, differentiable=False),
    OpInfo("logcumsumexp", ops.logcumsumexp, _lcse_ref, _lcse_samples, dtypes=F16,
           tols={mstype.float16: (2e-3, 2e-3)}),
    OpInfo("cosine_similarity", ops.cosine_similarity, _cos_ref, _cos_samples, dtypes=F, primitive="div"),
    OpInfo("nanmean", ops.nanmean, lambda a, axis=None, keepdims=False: np.nanmean(a, axis=axis, keepdims=keepdims),
           _nanmean_samples, dtypes=F, primitive="div"),
    OpInfo("trapz", ops.trapz, _trapz_ref, _trapz_samples, dtypes=F, primitive="sum"),
    OpInfo("bias_add", ops.bias_add, _bias_ref, _bias_samples, dtypes=F16, primitive="add"),
    OpInfo("dot", ops.dot, np.dot, _dot_samples, dtypes=F, primitive="matmul"),
    OpInfo("inner", ops.inner, np.inner, _inner_samples, dtypes=F, primitive="matmul"),
    OpInfo("vecdot", ops.vecdot, lambda a, b, axis=-1: np.sum(a * b, axis=axis), _vecdot_samples, dtypes=F,
           primitive="sum"),
    OpInfo("clip_by_norm", ops.clip_by_norm, _clipnorm_ref, _clipnorm_samples, dtypes=F, primitive="mul"),
)
