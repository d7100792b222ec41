"""Normalization primitives: `layer_norm` and `rms_norm`, each with a fused backward primitive.

Why a fused backward primitive (`layer_norm_grad`, `rms_norm_grad`) instead of a backward rule
written as a dozen minispore ops? Each eager op is a full pass over the activations plus dispatch
overhead; the normalization backward written as ops is ~15 of them, the fused NumPy kernel is ~5
passes and one dispatch. Normalizations sit in every transformer block, so this matters.

The price: the fused backward is itself a primitive, so it needs its own backward rule for
grad-of-grad. Those second-order rules are derived by hand below and written in minispore ops (so
they are differentiable again); the op table checks them against finite differences.

Low-precision inputs (float16, bfloat16) are normalized in float32 and rounded once at the end.
"""
from __future__ import annotations

import numbers

import numpy as np

from ...common import dtype as mstype
from .. import _check as C
from ..primitive import AbstractTensor, defprim
from . import _nn_common as N
from ._nn_common import compute_dtype


def _norm_axes(ndim, k):
    return tuple(range(ndim - k, ndim))


def _row_sums(a2):
    """Sums along the last axis as a matrix-vector product (much faster than a.sum(-1) in NumPy)."""
    return a2 @ np.ones(a2.shape[-1], a2.dtype)


def _rows(x: np.ndarray, k: int):
    """View `x` as (rows, n): the trailing k dims are the normalized ones."""
    n = int(np.prod(x.shape[x.ndim - k:], dtype=np.int64))
    rows = int(np.prod(x.shape[:x.ndim - k], dtype=np.int64))
    return x.reshape(rows, n)


# =================================================================================================
# layer_norm
def _normalized_shape_arg(op, normalized_shape):
    if isinstance(normalized_shape, numbers.Integral) and not isinstance(normalized_shape, bool):
        return (int(normalized_shape),)
    if isinstance(normalized_shape, (tuple, list)) and all(
            isinstance(s, numbers.Integral) and not isinstance(s, bool) for s in normalized_shape):
        return tuple(int(s) for s in normalized_shape)
    raise C.OpTypeError(op, "'normalized_shape' as an int or a tuple/list of ints", repr(normalized_shape))


def _check_affine(op, arg, t, shape):
    if t is None:
        return
    N.floating(op, arg, t)
    if tuple(t.shape) != shape:
        raise C.OpValueError(op, f"'{arg}' of shape normalized_shape={shape}", f"shape {tuple(t.shape)}")


def _layer_norm_infer(x, weight, bias, normalized_shape, eps):
    N.floating("layer_norm", "input", x)
    k = len(normalized_shape)
    if k == 0 or k > len(x.shape) or tuple(x.shape[len(x.shape) - k:]) != normalized_shape:
        raise C.OpValueError("layer_norm", f"an input whose trailing dims equal normalized_shape={normalized_shape}",
                             f"input shape {tuple(x.shape)}")
    _check_affine("layer_norm", "weight", weight, normalized_shape)
    _check_affine("layer_norm", "bias", bias, normalized_shape)
    return AbstractTensor(x.shape, x.dtype)


def _layer_norm_stats(x2, eps):
    """Row mean-centred values and reciprocal std of a (rows, n) array."""
    n = max(x2.shape[1], 1)                     # n = 0 (an empty normalized shape): nothing to do
    xc = x2 - (_row_sums(x2) / n)[:, None]
    var = np.einsum("ij,ij->i", xc, xc)[:, None] / n
    return xc, 1.0 / np.sqrt(var + eps)


def _layer_norm_kernel(x, weight, bias, normalized_shape, eps):
    k = len(normalized_shape)
    x2 = _rows(x, k).astype(compute_dtype(x), copy=False)
    xc, rstd = _layer_norm_stats(x2, eps)
    y = xc
    y *= rstd                                   # xc is a fresh array: normalize in place
    if weight is not None:
        y *= weight.reshape(-1)
    if bias is not None:
        y += bias.reshape(-1)
    return y.reshape(x.shape)


def _layer_norm_grad_infer(dy, x, weight, normalized_shape, eps):
    N.floating("layer_norm_grad", "dy", dy)
    if tuple(dy.shape) != tuple(x.shape):
        raise C.OpValueError("layer_norm_grad", f"'dy' of the input's shape {tuple(x.shape)}", f"{tuple(dy.shape)}")
    _layer_norm_infer(x, weight, None, normalized_shape, eps)
    wdt = weight.dtype if weight is not None else x.dtype
    return (AbstractTensor(x.shape, x.dtype), AbstractTensor(normalized_shape, wdt),
            AbstractTensor(normalized_shape, wdt))


def _layer_norm_grad_kernel(dy, x, weight, normalized_shape, eps):
    """dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = dy * weight (per row).

    Written to allocate only two (rows, n) arrays: fresh large arrays cost page faults, which on a
    small machine take longer than the arithmetic."""
    k = len(normalized_shape)
    cdt = compute_dtype(x)
    x2 = _rows(x, k).astype(cdt, copy=False)
    dy2 = _rows(dy, k).astype(cdt, copy=False)
    xc, rstd = _layer_norm_stats(x2, eps)
    xhat = xc
    xhat *= rstd
    n = max(x2.shape[1], 1)
    dw = np.einsum("ij,ij->j", dy2, xhat)
    db = np.ones(dy2.shape[0], dy2.dtype) @ dy2
    g = dy2 * weight.reshape(-1) if weight is not None else dy2.copy()
    m1 = (_row_sums(g) / n)[:, None]
    m2 = np.einsum("ij,ij->i", g, xhat)[:, None] / n
    xhat *= m2                                  # xhat is not needed any more: reuse its memory
    dx = g
    dx -= m1
    dx -= xhat
    dx *= rstd
    return dx.reshape(x.shape), dw.reshape(normalized_shape), db.reshape(normalized_shape)


def _layer_norm_bprop(inputs, out, dout, normalized_shape, eps):
    x, weight, bias = inputs
    dx, dw, db = _layer_norm_grad(dout, x, weight, normalized_shape=normalized_shape, eps=eps)
    return dx, (dw if weight is not None else None), (db if bias is not None else None)


def _layer_norm_grad_bprop(inputs, out, dout, normalized_shape, eps):
    """Backward of the fused backward (for grad-of-grad), in minispore ops.

    Per row (n normalized elements), with xhat = (x - mean) * rstd and g = dy * w, the first
    backward is  dx = rstd * P(g),  dw = sum_rows(dy * xhat),  db = sum_rows(dy),  where
    P(v) = v - mean(v) - xhat * mean(v * xhat) is self-adjoint. Given cotangents (a, ddw, ddb):

      d dy = w * rstd * P(a) + ddw * xhat + ddb          d w = sum_rows(dy * rstd * P(a))
      d x  = rstd * P(c) - s * rstd**2 * xhat / n,  with
             c = ddw * dy - rstd * (mean(a * xhat) * g + mean(g * xhat) * a)    (d/d xhat)
             s = sum(a * (g - mean(g) - xhat * mean(g * xhat)))                 (d/d rstd)
    using that rstd * P(.) is the backward of xhat and -rstd**2 * xhat / n that of rstd.
    """
    from .elementwise import add, mul, rsqrt, sub
    from .reduction import mean, reduce_sum
    dy, x, weight = inputs
    a, ddw, ddb = dout
    k = len(normalized_shape)
    axes = _norm_axes(len(x.shape), k)
    lead = tuple(range(len(x.shape) - k))
    n = float(max(int(np.prod(normalized_shape)), 1))

    def rmean(v):
        return mean(v, axes, True)

    xc = sub(x, rmean(x))
    rstd = rsqrt(add(rmean(mul(xc, xc)), eps))
    xhat = mul(xc, rstd)

    def proj(v):
        return sub(sub(v, rmean(v)), mul(xhat, rmean(mul(v, xhat))))

    g = mul(dy, weight) if weight is not None else dy
    m2 = rmean(mul(g, xhat))
    ga = mul(rstd, proj(a))                                   # cotangent reaching g
    d_dy = add(add(mul(ga, weight) if weight is not None else ga, mul(ddw, xhat)), ddb)
    d_w = None
    if weight is not None:
        d_w = reduce_sum(mul(dy, ga), lead) if lead else mul(dy, ga)
    s = reduce_sum(mul(a, sub(sub(g, rmean(g)), mul(xhat, m2))), axes, True)
    c = sub(mul(ddw, dy), mul(rstd, add(mul(rmean(mul(a, xhat)), g), mul(m2, a))))
    d_x = sub(mul(rstd, proj(c)), mul(mul(s, mul(rstd, rstd)), mul(xhat, 1.0 / n)))
    return d_dy, d_x, d_w


_layer_norm = defprim("layer_norm", _layer_norm_infer, _layer_norm_kernel, _layer_norm_bprop,
                      doc="normalize over the trailing dims, then scale and shift")
_layer_norm_grad = defprim("layer_norm_grad", _layer_norm_grad_infer, _layer_norm_grad_kernel,
                           _layer_norm_grad_bprop, doc="fused backward of layer_norm: (dx, dweight, dbias)")


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """`ops.layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5)`.

    y = (x - E[x]) / sqrt(Var[x] + eps) * weight + bias over the trailing `normalized_shape` dims
    (biased variance). `weight`/`bias` of shape `normalized_shape`; None means ones / zeros.
    """
    shape = _normalized_shape_arg("layer_norm", normalized_shape)
    eps = C.float_attr("layer_norm", "eps", eps, lo=0.0)
    return _layer_norm(input, weight, bias, normalized_shape=shape, eps=eps)


# =================================================================================================
# rms_norm
def _rstd_dtype(x_dtype):
    """MindSpore's RmsNorm returns rstd as float32; float64 inputs keep float64 (gradient checks)."""
    return mstype.float64 if x_dtype is mstype.float64 else mstype.float32


def _rms_norm_infer(x, gamma, epsilon):
    N.floating("rms_norm", "x", x)
    N.floating("rms_norm", "gamma", gamma)
    if x.dtype is not gamma.dtype:
        raise C.OpTypeError("rms_norm", "'gamma' with the dtype of 'x'", f"{gamma.dtype} and {x.dtype}")
    k = len(gamma.shape)
    if k == 0 or k > len(x.shape) or tuple(x.shape[len(x.shape) - k:]) != tuple(gamma.shape):
        raise C.OpValueError("rms_norm", "'gamma' whose shape equals the trailing dims of 'x'",
                             f"x shape {tuple(x.shape)} and gamma shape {tuple(gamma.shape)}")
    rshape = tuple(x.shape[:len(x.shape) - k]) + (1,) * k
    return AbstractTensor(x.shape, x.dtype), AbstractTensor(rshape, _rstd_dtype(x.dtype))


def _rms_rstd(x2, eps):
    n = max(x2.shape[1], 1)
    return 1.0 / np.sqrt(np.einsum("ij,ij->i", x2, x2)[:, None] / n + eps)


def _rms_norm_kernel(x, gamma, epsilon):
    k = gamma.ndim
    x2 = _rows(x, k).astype(compute_dtype(x), copy=False)
    rstd = _rms_rstd(x2, epsilon)
    y = x2 * rstd
    y *= gamma.reshape(-1)
    rshape = x.shape[:x.ndim - k] + (1,) * k
    return y.reshape(x.shape), rstd.reshape(rshape)


def _rms_norm_grad_infer(dy, drstd, x, gamma, epsilon):
    y_aval, r_aval = _rms_norm_infer(x, gamma, epsilon)
    N.floating("rms_norm_grad", "dy", dy)
    N.floating("rms_norm_grad", "drstd", drstd)
    if tuple(dy.shape) != tuple(x.shape) or tuple(drstd.shape) != r_aval.shape:
        raise C.OpValueError("rms_norm_grad", f"'dy' of shape {tuple(x.shape)} and 'drstd' of shape {r_aval.shape}",
                             f"{tuple(dy.shape)} and {tuple(drstd.shape)}")
    return AbstractTensor(x.shape, x.dtype), AbstractTensor(gamma.shape, gamma.dtype)


def _rms_norm_grad_kernel(dy, drstd, x, gamma, epsilon):
    """dx = r*g - r**3 * x * (mean(g*x) + drstd/n),  dgamma = sum_rows(dy * x * r),  g = dy*gamma."""
    k = gamma.ndim
    cdt = compute_dtype(x)
    x2 = _rows(x, k).astype(cdt, copy=False)
    dy2 = _rows(dy, k).astype(cdt, copy=False)
    n = max(x2.shape[1], 1)
    r = _rms_rstd(x2, epsilon)
    g = dy2 * x2
    dgamma = r[:, 0] @ g                        # sum_rows(dy * x * r)
    np.multiply(dy2, gamma.reshape(-1), out=g)
    q = np.einsum("ij,ij->i", g, x2)[:, None] / n + drstd.reshape(-1, 1).astype(cdt, copy=False) / n
    dx = g
    dx *= r
    dx -= x2 * (r ** 3 * q)
    return dx.reshape(x.shape), dgamma.reshape(gamma.shape)


def _rms_norm_bprop(inputs, out, dout, epsilon):
    x, gamma = inputs
    dy, drstd = dout
    return _rms_norm_grad(dy, drstd, x, gamma, epsilon=epsilon)


def _rms_norm_grad_bprop(inputs, out, dout, epsilon):
    """Backward of the fused backward, in minispore ops.

    Per row, with r = rstd, g = dy * gamma, q = mean(g * x) + drstd / n:
        dx = r * g - r**3 * q * x,     dgamma = sum_rows(b-weighted) dy * x * r.
    With cotangents (a, b), A = <a, g>, B = <a, x>, E = <b, dy * x> (per row), the row's
    contribution is  L = r*A - r**3*q*B + r*E; differentiating in (g, drstd, r, x) and using
    dr/dx = -r**3 * x / n gives the rule below.
    """
    from .elementwise import add, cast, mul, rsqrt, sub
    from .reduction import mean, reduce_sum
    dy, drstd, x, gamma = inputs
    a, b = dout
    k = len(gamma.shape)
    axes = _norm_axes(len(x.shape), k)
    lead = tuple(range(len(x.shape) - k))
    n = float(max(int(np.prod(gamma.shape)), 1))

    def rsum(v):
        return reduce_sum(v, axes, True)

    r = rsqrt(add(mean(mul(x, x), axes, True), epsilon))
    dr = cast(drstd, x.dtype)
    r2 = mul(r, r)
    r3 = mul(r2, r)
    g = mul(dy, gamma)
    q = add(mul(rsum(mul(g, x)), 1.0 / n), mul(dr, 1.0 / n))
    A = rsum(mul(a, g))
    B = rsum(mul(a, x))
    E = rsum(mul(b, mul(dy, x)))
    ga = sub(mul(r, a), mul(mul(r3, B), mul(x, 1.0 / n)))      # cotangent reaching g
    d_dy = add(mul(ga, gamma), mul(mul(b, x), r))
    d_gamma = mul(dy, ga)
    d_gamma = reduce_sum(d_gamma, lead) if lead else d_gamma
    d_drstd = cast(mul(mul(r3, B), -1.0 / n), drstd.dtype)
    d_r = add(sub(A, mul(mul(mul(r2, q), B), 3.0)), E)
    d_x = add(sub(mul(b, mul(dy, r)), add(mul(mul(r3, q), a), mul(mul(r3, B), mul(g, 1.0 / n)))),
              mul(mul(d_r, r3), mul(x, -1.0 / n)))
    return d_dy, d_drstd, d_x, d_gamma


_rms_norm = defprim("rms_norm", _rms_norm_infer, _rms_norm_kernel, _rms_norm_bprop,
                    doc="root-mean-square normalization over gamma's dims: (y, rstd)")
_rms_norm_grad = defprim("rms_norm_grad", _rms_norm_grad_infer, _rms_norm_grad_kernel, _rms_norm_grad_bprop,
                         doc="fused backward of rms_norm: (dx, dgamma)")


def rms_norm(x, gamma, epsilon=1e-6):
    """`ops.rms_norm(x, gamma, epsilon=1e-6)` -> `(y, rstd)`.

    y = x * rsqrt(mean(x**2) + epsilon) * gamma, the mean taken over the trailing `gamma.ndim` dims;
    `rstd` (float32, or float64 for float64 input) has those dims kept as size 1.
    """
    epsilon = C.float_attr("rms_norm", "epsilon", epsilon, lo=0.0, hi=1.0)
    if epsilon == 0.0:
        raise C.OpValueError("rms_norm", "'epsilon' in (0, 1]", "0.0")
    return _rms_norm(x, gamma, epsilon=epsilon)


__all__ = ["layer_norm", "rms_norm"]
