"""Op table: lgamma, digamma, polygamma, erfinv, Bessel i0/i0e/i1/i1e/j0/j1, igamma/igammac, zeta.
References are SciPy's float64 functions; gradients are checked by finite differences in the
differentiable argument (igamma/igammac/zeta: the second)."""
import numpy as np
import scipy.special as sp

from ... import ops
from ...common import dtype as mstype
from ..opinfo import OpInfo, SampleInput, elementwise_unary_samples, rand, register

F16 = (mstype.float16, mstype.float32, mstype.float64)
_TOLS = {mstype.float16: (4e-3, 4e-3), mstype.float32: (2e-5, 2e-5)}


def _unary(name, ref, low, high, **kw):
    return OpInfo(name, getattr(ops, name), ref, elementwise_unary_samples(low, high), dtypes=F16, tols=_TOLS, **kw)


def _polygamma_samples(rng, dtype):
    for n in (0, 1, 2, 3):
        yield SampleInput((n, rand(rng, (3, 4), dtype, 0.5, 3.0)), desc=f"n={n}")


def _pair_samples(low_a, high_a, low_x, high_x):
    def samples(rng, dtype):
        yield SampleInput((rand(rng, (3, 4), dtype, low_a, high_a), rand(rng, (3, 4), dtype, low_x, high_x)),
                          grad_args=(1,))
        yield SampleInput((rand(rng, (2, 3, 4), dtype, low_a, high_a), rand(rng, (4,), dtype, low_x, high_x)),
                          desc="broadcast", grad_args=(1,))
    return samples


def _lgamma_int_samples(rng, dtype):
    yield SampleInput((np.arange(1, 7, dtype=dtype),))


register(
    _unary("lgamma", sp.gammaln, 0.3, 4.0),
    OpInfo("lgamma_int", ops.lgamma, sp.gammaln, _lgamma_int_samples, dtypes=(mstype.int32,), differentiable=False,
           primitive="lgamma", tols={mstype.int32: (1e-6, 1e-6)}),
    _unary("digamma", sp.digamma, 0.3, 4.0),
    OpInfo("polygamma", ops.polygamma, lambda n, x: sp.polygamma(n, x), _polygamma_samples,
           dtypes=(mstype.float32, mstype.float64), tols={mstype.float32: (1e-4, 1e-4)}, grad_tol=(1e-4, 1e-5)),
    _unary("erfinv", sp.erfinv, -0.9, 0.9),
    _unary("bessel_i0", sp.i0, -3.0, 3.0),
    _unary("i0", sp.i0, -3.0, 3.0, primitive="bessel_i0"),
    _unary("bessel_i0e", sp.i0e, -3.0, 3.0),
    _unary("bessel_i1", sp.i1, -3.0, 3.0),
    _unary("bessel_i1e", sp.i1e, -3.0, 3.0),
    _unary("bessel_j0", sp.j0, -5.0, 5.0),
    _unary("bessel_j1", sp.j1, -5.0, 5.0),
    OpInfo("igamma", ops.igamma, sp.gammainc, _pair_samples(0.5, 3.0, 0.2, 4.0), dtypes=(mstype.float32, mstype.float64),
           tols={mstype.float32: (1e-5, 1e-5)}),
    OpInfo("igammac", ops.igammac, sp.gammaincc, _pair_samples(0.5, 3.0, 0.2, 4.0),
           dtypes=(mstype.float32, mstype.float64), tols={mstype.float32: (1e-5, 1e-5)}),
    OpInfo("zeta", ops.zeta, sp.zeta, _pair_samples(1.5, 4.0, 0.5, 3.0), dtypes=(mstype.float32, mstype.float64),
           tols={mstype.float32: (1e-5, 1e-5)}, grad_tol=(1e-5, 1e-5)),
)
