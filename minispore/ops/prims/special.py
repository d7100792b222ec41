"""Special functions in MindSpore 2.x's names: lgamma, digamma, polygamma, erfinv, the modified
Bessel functions i0/i0e/i1/i1e (`i0` is `bessel_i0`), the Bessel functions j0/j1, the regularized
incomplete gamma functions igamma/igammac and the Hurwitz zeta function.

Kernels are SciPy's (`scipy.special`), computed in float32 for half-precision inputs and rounded
once. Dtypes are MindSpore 2.10's: floating inputs only (MindSpore's CPU kernels reject integers),
except `lgamma`, which turns integers into Float32.

Backward rules are written with minispore ops, so they differentiate again: digamma' = polygamma(1),
polygamma(n)' = polygamma(n + 1), erfinv' = sqrt(pi)/2 exp(erfinv^2), i0' = i1, i1' = i0 - i1/x,
j0' = -j1, j1' = j0 - j1/x, and the exponentially scaled forms by the product rule. igamma/igammac
are differentiable in `other` (x) only and zeta in `other` (q) only: the derivatives in the shape
parameter have no closed form in these functions (MindSpore returns no gradient there either).
"""
from __future__ import annotations

import math

import numpy as np
import scipy.special as sp

from ...common.tensor import Tensor
from .. import _check as C
from .. import sharding_rules as SR
from ..primitive import AbstractTensor, defprim
from .activation import upcast_half
from .elementwise import (_binary_infer, _grad_for, _unary_infer, _wanted, add, div, equal, exp, log, mul, neg,
                          sign, square, sub, where)


def _quiet(fn):
    def kernel(*arrays):
        with np.errstate(all="ignore"):
            return fn(*[upcast_half(a) if isinstance(a, np.ndarray) else a for a in arrays])
    return kernel


def _unary(name, fn, bprop, doc, int_to_float=False):
    return defprim(name, _unary_infer(name, float_only=True, int_to_float=int_to_float), _quiet(fn), bprop, doc=doc,
                   sharding=SR.pointwise)


def _safe_div_x(num, x, at_zero):
    """num / x, with the limit `at_zero` where x == 0 (i1/x -> 1/2, j1/x -> 1/2)."""
    zero = equal(x, 0)
    safe = where(zero, 1.0, x)
    return where(zero, add(mul(num, 0.0), at_zero), div(num, safe))


# ------------------------------------------------------------------------------------------------
# gamma family
_lgamma = _unary("lgamma", sp.gammaln, lambda i, o, d: (mul(d, digamma(i[0])),),
                 "log |Gamma(x)|", int_to_float=True)
_digamma = _unary("digamma", sp.digamma, lambda i, o, d: (mul(d, polygamma(1, i[0])),), "d/dx log Gamma(x)")


def _polygamma_infer(x, n):
    C.tensor("polygamma", "input", x)
    if x.dtype.kind != "float":
        raise C.OpTypeError("polygamma", "'input' with a floating dtype", str(x.dtype))
    return AbstractTensor(x.shape, x.dtype)


def _polygamma_kernel(a, n):
    with np.errstate(all="ignore"):
        x = upcast_half(a)
        return sp.digamma(x) if n == 0 else sp.polygamma(n, x)


_polygamma = defprim("polygamma", _polygamma_infer, _polygamma_kernel,
                     lambda i, o, d, n: (mul(d, _polygamma(i[0], n=n + 1)),), doc="n-th derivative of digamma",
                     sharding=SR.pointwise)


def lgamma(input):
    """`ops.lgamma(input)`: log |Gamma(input)| (integers give Float32; +inf at the poles)."""
    return _lgamma(input)


def digamma(input):
    """`ops.digamma(input)`: the logarithmic derivative of Gamma, psi(x) (floating inputs)."""
    return _digamma(input)


def polygamma(n, input):
    """`ops.polygamma(n, input)`: the n-th derivative of digamma (n = 0 is digamma itself). `n` is a
    0-d integer Tensor in MindSpore; minispore also accepts a Python int."""
    if isinstance(n, Tensor):
        if n.ndim != 0 or n.dtype.kind not in ("int", "uint"):
            raise C.OpTypeError("polygamma", "'n' as a 0-d integer Tensor", f"{n.dtype} of shape {tuple(n.shape)}")
        n = int(n.asnumpy())
    n = C.int_attr("polygamma", "n", n, 0)
    return _polygamma(input, n=n)


# ------------------------------------------------------------------------------------------------
# erfinv
def _erfinv_bprop(inputs, out, dout):
    return (mul(dout, mul(exp(square(out)), math.sqrt(math.pi) / 2.0)),)


_erfinv = _unary("erfinv", sp.erfinv, _erfinv_bprop, "inverse error function (nan outside [-1, 1])")


def erfinv(input):
    """`ops.erfinv(input)`: the inverse error function on [-1, 1] (+-inf at +-1, NaN outside)."""
    return _erfinv(input)


# ------------------------------------------------------------------------------------------------
# Bessel functions
def _i0_bprop(inputs, out, dout):
    return (mul(dout, bessel_i1(inputs[0])),)


def _i0e_bprop(inputs, out, dout):
    # d/dx [exp(-|x|) I0(x)] = exp(-|x|) I1(x) - sign(x) exp(-|x|) I0(x)
    x = inputs[0]
    return (mul(dout, sub(bessel_i1e(x), mul(sign(x), out))),)


def _i1_bprop(inputs, out, dout):
    x = inputs[0]
    return (mul(dout, sub(bessel_i0(x), _safe_div_x(out, x, 0.5))),)


def _i1e_bprop(inputs, out, dout):
    x = inputs[0]
    return (mul(dout, sub(sub(bessel_i0e(x), _safe_div_x(out, x, 0.5)), mul(sign(x), out))),)


def _j0_bprop(inputs, out, dout):
    return (mul(dout, neg(bessel_j1(inputs[0]))),)


def _j1_bprop(inputs, out, dout):
    x = inputs[0]
    return (mul(dout, sub(bessel_j0(x), _safe_div_x(out, x, 0.5))),)


_bessel_i0 = _unary("bessel_i0", sp.i0, _i0_bprop, "modified Bessel function I0")
_bessel_i0e = _unary("bessel_i0e", sp.i0e, _i0e_bprop, "exp(-|x|) I0(x)")
_bessel_i1 = _unary("bessel_i1", sp.i1, _i1_bprop, "modified Bessel function I1")
_bessel_i1e = _unary("bessel_i1e", sp.i1e, _i1e_bprop, "exp(-|x|) I1(x)")
_bessel_j0 = _unary("bessel_j0", sp.j0, _j0_bprop, "Bessel function of the first kind J0")
_bessel_j1 = _unary("bessel_j1", sp.j1, _j1_bprop, "Bessel function of the first kind J1")


def bessel_i0(x):
    """`ops.bessel_i0(x)`: the modified Bessel function of the first kind, order 0."""
    return _bessel_i0(x)


def i0(input):
    """`ops.i0(input)`: the same as bessel_i0."""
    return _bessel_i0(input)


def bessel_i0e(x):
    """`ops.bessel_i0e(x)`: exp(-|x|) * I0(x), which does not overflow for large |x|."""
    return _bessel_i0e(x)


def bessel_i1(x):
    """`ops.bessel_i1(x)`: the modified Bessel function of the first kind, order 1."""
    return _bessel_i1(x)


def bessel_i1e(x):
    """`ops.bessel_i1e(x)`: exp(-|x|) * I1(x)."""
    return _bessel_i1e(x)


def bessel_j0(x):
    """`ops.bessel_j0(x)`: the Bessel function of the first kind, order 0."""
    return _bessel_j0(x)


def bessel_j1(x):
    """`ops.bessel_j1(x)`: the Bessel function of the first kind, order 1."""
    return _bessel_j1(x)


# ------------------------------------------------------------------------------------------------
# incomplete gamma and Hurwitz zeta
def _float_pair_infer(name):
    base = _binary_infer(name)

    def infer(a, x):
        C.floating(name, "input", a)
        C.floating(name, "other", x)
        if a.dtype is not x.dtype:
            raise C.OpTypeError(name, "'input' and 'other' of the same dtype", f"{a.dtype} and {x.dtype}")
        return base(a, x)
    return infer


def _igamma_grad_x(a, x):
    # d/dx P(a, x) = x^(a-1) exp(-x) / Gamma(a), computed in logs
    return exp(sub(sub(mul(sub(a, 1.0), log(x)), x), lgamma(a)))


def _igamma_bprop(inputs, out, dout):
    a, x = inputs
    gx = _grad_for(x, mul(dout, _igamma_grad_x(a, x))) if _wanted(inputs, 1) else None
    return (None, gx)


def _igammac_bprop(inputs, out, dout):
    a, x = inputs
    gx = _grad_for(x, neg(mul(dout, _igamma_grad_x(a, x)))) if _wanted(inputs, 1) else None
    return (None, gx)


def _zeta_bprop(inputs, out, dout):
    s, q = inputs
    # d/dq sum_k (k + q)^-s = -s * zeta(s + 1, q)
    gq = _grad_for(q, mul(dout, neg(mul(s, zeta(add(s, 1.0), q))))) if _wanted(inputs, 1) else None
    return (None, gq)


_igamma = defprim("igamma", _float_pair_infer("igamma"), _quiet(sp.gammainc), _igamma_bprop,
                  doc="regularized lower incomplete gamma P(a, x)", sharding=SR.elementwise)
_igammac = defprim("igammac", _float_pair_infer("igammac"), _quiet(sp.gammaincc), _igammac_bprop,
                   doc="regularized upper incomplete gamma Q(a, x) = 1 - P(a, x)", sharding=SR.elementwise)
_zeta = defprim("zeta", _float_pair_infer("zeta"), _quiet(sp.zeta), _zeta_bprop, doc="Hurwitz zeta(x, q)",
                sharding=SR.elementwise)


def igamma(input, other):
    """`ops.igamma(input, other)`: the regularized lower incomplete gamma function P(a=input,
    x=other) (broadcasting; one floating dtype). Differentiable in `other` only."""
    return _igamma(input, other)


def igammac(input, other):
    """`ops.igammac(input, other)`: the regularized upper incomplete gamma Q(a, x) = 1 - P(a, x)."""
    return _igammac(input, other)


def zeta(input, other):
    """`ops.zeta(input, other)`: the Hurwitz zeta function sum_k (k + other) ** -input (input > 1).
    Differentiable in `other` only."""
    return _zeta(input, other)


__all__ = ["lgamma", "digamma", "polygamma", "erfinv", "bessel_i0", "i0", "bessel_i0e", "bessel_i1", "bessel_i1e",
           "bessel_j0", "bessel_j1", "igamma", "igammac", "zeta"]
