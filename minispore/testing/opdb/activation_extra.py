"""Op table: hardswish, hardsigmoid, mish, selu, celu, logsigmoid, softsign, tanhshrink, softshrink,
hardshrink, threshold, prelu, glu, softmin. References are written directly from the definitions
in float64; samples stay away from the kinks (finite differences straddling one are no derivative;
the kink values themselves are pinned against MindSpore in tests/ops/test_fidelity_ops.py)."""
import numpy as np
import scipy.special

from ... import ops
from ...common import dtype as mstype
from ..opinfo import OpInfo, SampleInput, noncontig, rand, register

F16 = (mstype.float16, mstype.bfloat16, mstype.float32, mstype.float64)
F = (mstype.float32, mstype.float64)
_ALPHA, _SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946


def _away(arr, points, gap=0.03):
    arr = arr.copy()
    for p in points:
        near = np.abs(arr.astype(np.float64) - p) < gap
        arr[near] = (arr[near].astype(np.float64) + gap * 2).astype(arr.dtype)
    return arr


def _samples(kinks=(), low=-4.0, high=4.0, extremes=()):
    def samples(rng, dtype):
        def r(shape):
            return _away(rand(rng, shape, dtype, low, high), kinks)
        yield SampleInput((r(()),), desc="0-d")
        yield SampleInput((r((3, 4)),))
        yield SampleInput((noncontig(r((4, 3))),), desc="non-contiguous")
        yield SampleInput((r((2, 0, 3)),), desc="empty")
        if extremes:
            yield SampleInput((np.array(extremes, dtype=dtype),), desc="extremes", grad_args=())
    return samples


def _with_kw(kw, kinks, low=-3.0, high=3.0):
    def samples(rng, dtype):
        for s in _samples(kinks, low, high)(rng, dtype):
            s.kwargs = dict(kw)
            yield s
    return samples


def _softplus(x):
    return np.logaddexp(0.0, x)


def _prelu_samples(rng, dtype):
    yield SampleInput((_away(rand(rng, (2, 3, 4), dtype), (0,)), rand(rng, (3,), dtype, 0.05, 0.5)), desc="per channel")
    yield SampleInput((_away(rand(rng, (2, 3), dtype), (0,)), rand(rng, (1,), dtype, 0.05, 0.5)), desc="one slope")
    yield SampleInput((_away(rand(rng, (5,), dtype), (0,)), rand(rng, (1,), dtype, 0.05, 0.5)), desc="1-D input")


def _prelu_ref(x, w):
    wv = w.reshape((1, -1) + (1,) * (x.ndim - 2)) if x.ndim >= 2 and w.size > 1 else w.reshape(())
    return np.where(x > 0, x, wv * x)


def _glu_samples(rng, dtype):
    yield SampleInput((rand(rng, (3, 4), dtype),))
    yield SampleInput((rand(rng, (4, 3), dtype), 0), desc="axis 0")


def _glu_ref(x, axis=-1):
    a, b = np.split(x, 2, axis=axis)
    return a * scipy.special.expit(b)


def _softmin_samples(rng, dtype):
    yield SampleInput((rand(rng, (3, 4), dtype),))
    yield SampleInput((rand(rng, (3, 4), dtype), 0), desc="axis 0")


def _int_samples(rng, dtype):
    yield SampleInput((np.arange(-5, 7, dtype=dtype).reshape(3, 4),))


register(
    OpInfo("hardswish", ops.hardswish, lambda x: x * np.clip(x + 3, 0, 6) / 6, _samples((-3.0, 3.0)), dtypes=F16),
    OpInfo("hardswish_int", ops.hardswish, lambda x: np.trunc(x * np.clip(x + 3, 0, 6) / 6).astype(x.dtype),
           _int_samples, dtypes=(mstype.int32,), differentiable=False, primitive="hardswish"),
    OpInfo("hardsigmoid", ops.hardsigmoid, lambda x: np.clip(x + 3, 0, 6) / 6, _samples((-3.0, 3.0)), dtypes=F16),
    OpInfo("mish", ops.mish, lambda x: x * np.tanh(_softplus(x)), _samples(extremes=(-100.0, 100.0)), dtypes=F16),
    OpInfo("selu", ops.selu, lambda x: _SCALE * np.where(x > 0, x, _ALPHA * np.expm1(np.minimum(x, 0))),
           _samples((0.0,)), dtypes=F16),
    OpInfo("celu", ops.celu, lambda x, alpha=1.0: np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0) / alpha)),
           _with_kw({"alpha": 0.7}, (0.0,)), dtypes=F16),
    OpInfo("logsigmoid", ops.logsigmoid, lambda x: -_softplus(-x), _samples(extremes=(-800.0, 800.0)), dtypes=F16),
    OpInfo("softsign", ops.softsign, lambda x: x / (1 + np.abs(x)), _samples((0.0,)), dtypes=F16),
    OpInfo("tanhshrink", ops.tanhshrink, lambda x: x - np.tanh(x), _samples(), dtypes=F16),
    OpInfo("softshrink", ops.softshrink, lambda x, lambd=0.5: np.sign(x) * np.maximum(np.abs(x) - lambd, 0),
           _with_kw({"lambd": 0.7}, (-0.7, 0.7)), dtypes=F16),
    OpInfo("hardshrink", ops.hardshrink, lambda x, lambd=0.5: np.where(np.abs(x) > lambd, x, 0.0),
           _with_kw({"lambd": 0.7}, (-0.7, 0.7)), dtypes=F16),
    OpInfo("threshold", lambda x: ops.threshold(x, 0.5, -2.0), lambda x: np.where(x > 0.5, x, -2.0),
           _samples((0.5,)), dtypes=F16),
    OpInfo("prelu", ops.prelu, _prelu_ref, _prelu_samples, dtypes=F16),
    OpInfo("glu", ops.glu, _glu_ref, _glu_samples, dtypes=F16, primitive="sigmoid"),
    OpInfo("softmin", ops.softmin, lambda x, axis=-1: scipy.special.softmax(-x, axis=axis), _softmin_samples,
           dtypes=F16, primitive="softmax"),
)
