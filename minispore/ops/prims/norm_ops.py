"""Normalization primitives: `layer_norm`, `rms_norm`, `batch_norm` and `group_norm`, each with a
fused backward primitive.

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
from .. import costs
from .. import sharding_rules as SR
from ..primitive import AbstractTensor, defprim
from . import _native_kernels
from . import _native_batch_norm
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
    stats = AbstractTensor(_stats_shape(x.shape, k), _rstd_dtype(x.dtype))
    return AbstractTensor(x.shape, x.dtype), stats, stats


def _stats_shape(shape, k):
    """Shape of the saved per-row mean / rstd: the normalized dims kept as size 1 (MindSpore's)."""
    return tuple(shape[:len(shape) - k]) + (1,) * k


def _flat(t):
    return None if t is None else t.reshape(-1)


def _layer_norm_kernel(x, weight, bias, normalized_shape, eps):
    """(y, mean, rstd): the C loop where it applies (_native_kernels.layer_norm_rows: float32/float64,
    one dtype, contiguous; each row read twice for its statistics and once for y, sums in double,
    no per-row NumPy calls), else `_layer_norm_numpy`."""
    k = len(normalized_shape)
    x2 = _rows(x, k).astype(compute_dtype(x), copy=False)
    fast = _native_kernels.layer_norm_rows(x2, _flat(weight), _flat(bias), eps)
    if fast is None:
        return _layer_norm_numpy(x, weight, bias, normalized_shape, eps)
    y, mean, rstd = fast
    sshape = _stats_shape(x.shape, k)
    return y.reshape(x.shape), mean.reshape(sshape), rstd.reshape(sshape)


def _layer_norm_numpy(x, weight, bias, normalized_shape, eps):
    """(y, mean, rstd): y = (x - mean) * rstd * weight + bias per row; mean and rstd are saved for
    the backward (which then need not recompute them).

    Plain version: `mean = x.mean(-1, keepdims=True); rstd = 1 / sqrt(x.var(-1, keepdims=True) + eps);
    y = (x - mean) * rstd * weight + bias`. This one: the mean as a matrix-vector product, the
    variance of the centred values (two-pass: no E[x^2] - E[x]^2 cancellation) as one einsum, and
    every elementwise step in place in the one fresh (rows, n) array."""
    k = len(normalized_shape)
    x2 = _rows(x, k).astype(compute_dtype(x), copy=False)
    n = max(x2.shape[1], 1)                     # n = 0 (an empty normalized shape): nothing to do
    mean = _row_sums(x2) / n
    y = np.subtract(x2, mean[:, None])          # the one fresh array: centred, then normalized in place
    rstd = 1.0 / np.sqrt(np.einsum("ij,ij->i", y, y) / n + eps)
    y *= rstd[:, None]
    if weight is not None:
        y *= weight.reshape(-1)
    if bias is not None:
        y += bias.reshape(-1)
    sshape = _stats_shape(x.shape, k)
    return y.reshape(x.shape), mean.reshape(sshape), rstd.reshape(sshape)


def _layer_norm_grad_infer(dy, x, weight, mean=None, rstd=None, *, normalized_shape, eps):
    N.floating("layer_norm_grad", "dy", dy)
    if tuple(dy.shape) != tuple(x.shape):
        raise C.OpValueError("layer_norm_grad", f"'dy' of the input's shape {tuple(x.shape)}", f"{tuple(dy.shape)}")
    _, stats, _ = _layer_norm_infer(x, weight, None, normalized_shape, eps)
    if (mean is None) != (rstd is None):
        raise C.OpValueError("layer_norm_grad", "both saved statistics 'mean' and 'rstd', or neither",
                             f"mean={'None' if mean is None else 'a tensor'}, rstd={'None' if rstd is None else 'a tensor'}")
    for arg, t in (("mean", mean), ("rstd", rstd)):
        if t is not None:
            N.floating("layer_norm_grad", arg, t)
            if tuple(t.shape) != stats.shape:
                raise C.OpValueError("layer_norm_grad", f"'{arg}' of shape {stats.shape}", f"shape {tuple(t.shape)}")
    wdt = weight.dtype if weight is not None else x.dtype
    return (AbstractTensor(x.shape, x.dtype), AbstractTensor(normalized_shape, wdt),
            AbstractTensor(normalized_shape, wdt))


def _layer_norm_grad_reference(dy, x, weight, eps):
    """The plain backward, for reading (and for the test that the fast kernel equals it); rows of
    n = x.shape[-1] normalized elements, g = dy * weight:

        dx = rstd * (g - mean(g) - xhat * mean(g * xhat)),  dweight = sum_rows(dy * xhat),
        dbias = sum_rows(dy)."""
    mean = x.mean(-1, keepdims=True)
    rstd = 1.0 / np.sqrt(x.var(-1, keepdims=True) + eps)
    xhat = (x - mean) * rstd
    g = dy * weight if weight is not None else dy
    dx = rstd * (g - g.mean(-1, keepdims=True) - xhat * (g * xhat).mean(-1, keepdims=True))
    return dx, (dy * xhat).sum(0), dy.sum(0)


def _layer_norm_grad_kernel(dy, x, weight, mean=None, rstd=None, *, normalized_shape, eps):
    """(dx, dweight, dbias): the C loop where it applies (_native_kernels.layer_norm_grad_rows: the
    saved statistics given, float32/float64, one dtype, contiguous; one pass per row for its two
    sums and the dweight/dbias columns, one for dx, sums in double), else `_layer_norm_grad_numpy`."""
    if mean is not None:
        k = len(normalized_shape)
        cdt = compute_dtype(x)
        x2 = _rows(x, k).astype(cdt, copy=False)
        dy2 = _rows(dy, k).astype(cdt, copy=False)
        fast = _native_kernels.layer_norm_grad_rows(dy2, x2, _flat(weight), _flat(mean), _flat(rstd))
        if fast is not None:
            dx, dw, db = fast
            return dx.reshape(x.shape), dw.reshape(normalized_shape), db.reshape(normalized_shape)
    return _layer_norm_grad_numpy(dy, x, weight, mean, rstd, normalized_shape=normalized_shape, eps=eps)


def _layer_norm_grad_numpy(dy, x, weight, mean=None, rstd=None, *, normalized_shape, eps):
    """`_layer_norm_grad_reference` rearranged so that every reduction is a matrix-vector product
    and only two (rows, n) arrays are allocated (fresh large arrays cost page faults, which on a
    small machine take longer than the arithmetic). With xc = x - mean (so xhat = rstd * xc) and
    P = dy * xc:

        dweight = rstd @ P,  dbias = 1 @ dy,  mean(g) = (dy @ w) / n,  mean(g * xhat) = rstd * (P @ w) / n,
        dx = rstd * (dy * w - mean(g)) - xc * (rstd**3 * mean(g * xc)).

    `mean` / `rstd` are the forward's saved statistics (None: computed here, as the op table's
    direct calls do)."""
    k = len(normalized_shape)
    cdt = compute_dtype(x)
    x2 = _rows(x, k).astype(cdt, copy=False)
    dy2 = _rows(dy, k).astype(cdt, copy=False)
    n = max(x2.shape[1], 1)
    if mean is None:
        mu = _row_sums(x2) / n
        xc = np.subtract(x2, mu[:, None])
        r = 1.0 / np.sqrt(np.einsum("ij,ij->i", xc, xc) / n + eps)
    else:
        xc = np.subtract(x2, mean.reshape(-1, 1).astype(cdt, copy=False))
        r = rstd.reshape(-1).astype(cdt, copy=False)
    w = weight.reshape(-1).astype(cdt, copy=False) if weight is not None else None
    p = np.multiply(dy2, xc)
    dw = r @ p                                  # sum_rows(dy * xhat)
    db = np.ones(dy2.shape[0], cdt) @ dy2       # sum_rows(dy)
    m1 = (dy2 @ w if w is not None else _row_sums(dy2)) / n              # mean(g)
    m2c = (p @ w if w is not None else _row_sums(p)) / n                 # mean(g * xc)
    xc *= (r * r * r * m2c)[:, None]
    dx = p                                      # p is not needed any more: its memory becomes g, then dx
    if w is not None:
        np.multiply(dy2, w, out=dx)
    else:
        np.copyto(dx, dy2)
    dx -= m1[:, None]
    dx *= r[:, None]
    dx -= xc
    return dx.reshape(x.shape), dw.reshape(normalized_shape), db.reshape(normalized_shape)


def _layer_norm_bprop(inputs, out, dout, normalized_shape, eps):
    """The fused backward, handed the saved statistics. mean and rstd are saved values, not results:
    `ops.layer_norm` returns y alone, so their cotangents are zero and are not propagated (as
    MindSpore's LayerNorm bprop, which also reads only dout[0])."""
    x, weight, bias = inputs
    dx, dw, db = _layer_norm_grad(dout[0], x, weight, out[1], out[2], normalized_shape=normalized_shape, eps=eps)
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
    dy, x, weight = inputs[:3]                  # saved mean / rstd (inputs 3, 4) are functions of x:
    a, ddw, ddb = dout                          # the rule below differentiates through them
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
    return (d_dy, d_x, d_w) + (None,) * (len(inputs) - 3)


_layer_norm = defprim("layer_norm", _layer_norm_infer, _layer_norm_kernel, _layer_norm_bprop,
                      doc="normalize over the trailing dims, then scale and shift", cost=costs.per_output_element(7), sharding=SR.layer_norm)
_layer_norm_grad = defprim("layer_norm_grad", _layer_norm_grad_infer, _layer_norm_grad_kernel,
                           _layer_norm_grad_bprop, doc="fused backward of layer_norm: (dx, dweight, dbias)",
                           cost=costs.per_output_element(14), sharding=SR.layer_norm_grad)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """`ops.layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5)`.

    y = (x - E[x]) / sqrt(Var[x] + eps) * weight + bias over the trailing `normalized_shape` dims
    (biased variance). `weight`/`bias` of shape `normalized_shape`; None means ones / zeros.
    """
    shape = _normalized_shape_arg("layer_norm", normalized_shape)
    eps = C.float_attr("layer_norm", "eps", eps, lo=0.0)
    return _layer_norm(input, weight, bias, normalized_shape=shape, eps=eps)[0]


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
    rshape = x.shape[:x.ndim - k] + (1,) * k
    # fast: one C loop per row (_native_kernels.rms_norm_rows: the sum of squares and y in two reads
    # of the row, no NumPy temporaries); plain: the NumPy lines below
    fast = _native_kernels.rms_norm_rows(x2, gamma.reshape(-1), epsilon)
    if fast is not None:
        return fast[0].reshape(x.shape), fast[1].reshape(rshape)
    rstd = _rms_rstd(x2, epsilon)
    y = x2 * rstd
    y *= gamma.reshape(-1)
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
    # fast: one C loop per row (_native_kernels.rms_norm_grad_rows: r, <g, x>, dx and the dgamma sums
    # in two reads of the row, sums in double); plain: the NumPy lines below (~9 passes)
    fast = _native_kernels.rms_norm_grad_rows(dy2, x2, gamma.reshape(-1), drstd.reshape(-1).astype(cdt, copy=False),
                                              epsilon)
    if fast is not None:
        return fast[0].reshape(x.shape), fast[1].reshape(gamma.shape)
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
                    doc="root-mean-square normalization over gamma's dims: (y, rstd)", cost=costs.per_output_element(4), sharding=SR.rms_norm)
_rms_norm_grad = defprim("rms_norm_grad", _rms_norm_grad_infer, _rms_norm_grad_kernel, _rms_norm_grad_bprop,
                         doc="fused backward of rms_norm: (dx, dgamma)", cost=costs.per_output_element(9),
                         sharding=SR.rms_norm_grad)


def rms_norm(x, gamma, epsilon=1e-6):
    """`ops.rms_norm(x, gamma, epsilon=1e-6)` -> `(y, rstd)`.

    y = x * rsqrt(mean(x**2) + epsilon) * gamma, the mean taken over the trailing `gamma.ndim` dims;
    `rstd` (float32, or float64 for float64 input) has those dims kept as size 1.
    """
    epsilon = C.float_attr("rms_norm", "epsilon", epsilon, lo=0.0, hi=1.0)
    if epsilon == 0.0:
        raise C.OpValueError("rms_norm", "'epsilon' in (0, 1]", "0.0")
    return _rms_norm(x, gamma, epsilon=epsilon)


# =================================================================================================
# batch_norm and group_norm: "normalize over some axes of a reshaped view, scale and shift per channel"
#
# Both are written on a view of x in which the statistics axes are explicit:
#   batch_norm  x -> (N, C, M)        statistics over axes (0, 2) (batch and space), one per channel;
#   group_norm  x -> (N, G, C/G, M)   statistics over axes (2, 3) (a group's channels and space).
# The affine parameters are per channel: shape (1, C, 1) resp. (1, G, C/G, 1) in those views.
# With that, the forward, the fused backward and its second-order rule are one set of formulas.
class _NormView:
    """How an op views x: the view's shape, the statistics axes, the parameter shape in the view."""

    __slots__ = ("shape", "axes", "param_shape", "count")

    def __init__(self, shape, axes, param_shape):
        self.shape, self.axes, self.param_shape = shape, axes, param_shape
        n = 1
        for a in axes:
            n *= shape[a]
        self.count = n                     # elements behind each statistic

    @property
    def other_axes(self):
        """The axes a per-channel parameter gradient sums over."""
        return tuple(i for i, s in enumerate(self.param_shape) if s == 1)


def _bn_view(x_shape):
    m = 1
    for s in x_shape[2:]:
        m *= s
    n, c = x_shape[0], x_shape[1]
    return _NormView((n, c, m), (0, 2), (1, c, 1))


def _gn_view(x_shape, groups):
    m = 1
    for s in x_shape[2:]:
        m *= s
    n, c = x_shape[0], x_shape[1]
    return _NormView((n, groups, c // groups, m), (2, 3), (1, groups, c // groups, 1))


def _vsum(a, axes, b=None):
    """sum(a) or sum(a * b) over `axes` of a view, keeping them as size-1 dims.

    Every reduction here includes the view's last (contiguous) axis: one einsum over it first (no
    temporary for the product, and much faster than NumPy's strided multi-axis sum), then a sum of
    the small remainder over the other axes."""
    sub = "abcd"[:a.ndim]
    r = np.einsum(f"{sub},{sub}->{sub[:-1]}", a, b) if b is not None else np.einsum(f"{sub}->{sub[:-1]}", a)
    rest = tuple(ax for ax in axes if ax != a.ndim - 1)
    if rest:
        r = r.sum(axis=rest, keepdims=True)
    return r[..., None]


def _stats(v: _NormView, x):
    """(mean, x - mean, biased variance) over the view's statistics axes (kept as size-1 dims)."""
    mean = _vsum(x, v.axes)
    mean /= v.count
    xc = x - mean
    var = _vsum(xc, v.axes, xc)
    var /= v.count
    return mean, xc, var


def _normalize_kernel(v: _NormView, x, weight, bias, eps):
    """y = (x - mean) * rstd * weight + bias on the view; returns (y, mean, biased var) in the view."""
    cdt = compute_dtype(x)
    xv = x.reshape(v.shape).astype(cdt, copy=False)
    mean, xc, var = _stats(v, xv)
    scale = 1.0 / np.sqrt(var + eps)
    if weight is not None:
        scale = scale * weight.reshape(v.param_shape).astype(cdt, copy=False)
    y = xc
    y *= scale                          # xc is a fresh array: normalize in place
    if bias is not None:
        y += bias.reshape(v.param_shape).astype(cdt, copy=False)
    return y.reshape(x.shape), mean, var


def _normalize_grad_kernel(v: _NormView, dy, x, weight, eps):
    """dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = dy * weight (means over the
    statistics axes), dweight = sum(dy * xhat), dbias = sum(dy) (per channel).

    For batch_norm the weight is constant over the statistics axes, so it factors out and the two
    means are dbias / n and dweight / n: one temporary (xhat) for the whole backward. For group_norm
    the weight varies inside a group and g is formed explicitly."""
    cdt = compute_dtype(x)
    xv = x.reshape(v.shape).astype(cdt, copy=False)
    dyv = dy.reshape(v.shape).astype(cdt, copy=False)
    _, xhat, var = _stats(v, xv)
    rstd = 1.0 / np.sqrt(var + eps)
    xhat *= rstd
    other = v.other_axes
    db = _vsum(dyv, other)
    dw = _vsum(dyv, other, xhat)
    w = weight.reshape(v.param_shape).astype(cdt, copy=False) if weight is not None else None
    if other == v.axes:                 # batch_norm: g = w * dy with w constant per statistic
        g, m1, m2 = dyv, db / v.count, dw / v.count
        scale = rstd if w is None else rstd * w
    else:
        g = dyv if w is None else dyv * w
        m1 = _vsum(g, v.axes) / v.count
        m2 = _vsum(g, v.axes, xhat) / v.count
        scale = rstd
    dx = xhat                           # xhat is needed only for this: build dx in its memory
    dx *= -m2
    dx += g
    dx -= m1
    dx *= scale
    return dx.reshape(x.shape), dw.reshape(-1), db.reshape(-1)


def _normalize_grad_bprop(v: _NormView, inputs, dout, eps):
    """Backward of the fused backward (grad-of-grad), in minispore ops, on the view.

    It is `_layer_norm_grad_bprop`'s rule with the statistics taken over `v.axes` and a
    per-channel weight: with xhat = (x - mean) * rstd, g = dy * w and
    P(u) = u - mean(u) - xhat * mean(u * xhat), the first backward is dx = rstd * P(g),
    dw = sum(dy * xhat), db = sum(dy). Given cotangents (a, ddw, ddb):
      d dy = w * rstd * P(a) + ddw * xhat + ddb,     d w = sum(dy * rstd * P(a)),
      d x  = rstd * P(c) - s * rstd**2 * xhat / n,   with
             c = ddw * dy - rstd * (mean(a * xhat) * g + mean(g * xhat) * a),
             s = sum(a * (g - mean(g) - xhat * mean(g * xhat))).
    """
    from .elementwise import add, mul, rsqrt, sub
    from .reduction import mean, reduce_sum
    from .shape import reshape
    dy, x, weight = inputs
    a, ddw, ddb = dout
    x_shape = tuple(x.shape)
    axes, other, n = v.axes, v.other_axes, float(v.count)
    xv, dyv, av = reshape(x, v.shape), reshape(dy, v.shape), reshape(a, v.shape)
    wv = reshape(weight, v.param_shape) if weight is not None else None
    ddwv, ddbv = reshape(ddw, v.param_shape), reshape(ddb, v.param_shape)

    def smean(u):
        return mean(u, axes, True)

    xc = sub(xv, smean(xv))
    rstd = rsqrt(add(smean(mul(xc, xc)), eps))
    xhat = mul(xc, rstd)

    def proj(u):
        return sub(sub(u, smean(u)), mul(xhat, smean(mul(u, xhat))))

    g = mul(dyv, wv) if wv is not None else dyv
    m2 = smean(mul(g, xhat))
    ga = mul(rstd, proj(av))                                   # cotangent reaching g
    d_dy = add(add(mul(ga, wv) if wv is not None else ga, mul(ddwv, xhat)), ddbv)
    d_w = reshape(reduce_sum(mul(dyv, ga), other), (-1,)) if wv is not None else None
    s = reduce_sum(mul(av, sub(sub(g, smean(g)), mul(xhat, m2))), axes, True)
    c = sub(mul(ddwv, dyv), mul(rstd, add(mul(smean(mul(av, xhat)), g), mul(m2, av))))
    d_x = sub(mul(rstd, proj(c)), mul(mul(s, mul(rstd, rstd)), mul(xhat, 1.0 / n)))
    return reshape(d_dy, x_shape), reshape(d_x, x_shape), d_w


def _check_channel_param(op, arg, t, c):
    if t is None:
        return
    N.floating(op, arg, t)
    if tuple(t.shape) != (c,):
        raise C.OpValueError(op, f"'{arg}' of shape (C,) = ({c},) (C: dim 1 of the input)", f"shape {tuple(t.shape)}")


def _stat_dtype(x_dtype):
    """Statistics are float32 for half-precision inputs (they are computed in float32)."""
    return x_dtype if x_dtype.itemsize >= 4 else mstype.float32


# -------------------------------------------------------------------------------------------------
# batch_norm
def _batch_norm_infer(x, weight, bias, mean, var, training, eps):
    op = "batch_norm"
    N.floating(op, "input_x", x)
    if not 2 <= len(x.shape) <= 5:
        raise C.OpValueError(op, "'input_x' of rank 2 to 5, (N, C, ...)", f"shape {tuple(x.shape)}")
    c = x.shape[1]
    for arg, t in (("weight", weight), ("bias", bias), ("running_mean", mean), ("running_var", var)):
        _check_channel_param(op, arg, t, c)
    if not training:
        if mean is None or var is None:
            raise C.OpValueError(op, "'running_mean' and 'running_var' when training=False", "None")
        return AbstractTensor(x.shape, x.dtype)
    n = x.shape[0]
    for s in x.shape[2:]:
        n *= s
    if n < 2:
        raise C.OpValueError(op, "more than 1 value per channel when training (batch statistics)",
                             f"input shape {tuple(x.shape)}")
    st = AbstractTensor((c,), _stat_dtype(x.dtype))
    return AbstractTensor(x.shape, x.dtype), st, st


def _batch_norm_kernel(x, weight, bias, mean, var, training, eps):
    v = _bn_view(x.shape)
    if not training:
        # y = x * scale + shift with the given statistics: one fused multiply-add per element
        cdt = compute_dtype(x)
        scale = 1.0 / np.sqrt(var.astype(cdt) + eps)
        if weight is not None:
            scale = scale * weight.astype(cdt)
        shift = -mean.astype(cdt) * scale
        if bias is not None:
            shift = shift + bias.astype(cdt)
        y = x.reshape(v.shape).astype(cdt)        # (a copy: the output)
        y *= scale.reshape(v.param_shape)
        y += shift.reshape(v.param_shape)
        return y.reshape(x.shape)
    # the C loops (_native_batch_norm: three passes instead of about five); the NumPy kernel is
    # their reference and the fallback
    native = _native_batch_norm.batch_norm_train(x.reshape(v.shape), weight, bias, eps)
    if native is not None:
        y, bmean, bvar = native
        y = y.reshape(x.shape)
    else:
        y, bmean, bvar = _normalize_kernel(v, x, weight, bias, eps)
    n = v.count
    return y, bmean.reshape(-1), bvar.reshape(-1) * (n / (n - 1))     # unbiased variance for the running stats


def _batch_norm_grad_infer(dy, x, weight, eps):
    op = "batch_norm_grad"
    N.floating(op, "dout", dy)
    if tuple(dy.shape) != tuple(x.shape):
        raise C.OpValueError(op, f"'dout' of the input's shape {tuple(x.shape)}", f"shape {tuple(dy.shape)}")
    _batch_norm_infer(x, weight, None, None, None, True, eps)
    wdt = weight.dtype if weight is not None else x.dtype
    c = (x.shape[1],)
    return AbstractTensor(x.shape, x.dtype), AbstractTensor(c, wdt), AbstractTensor(c, wdt)


def _batch_norm_grad_plain(dy, x, weight, eps):
    """The reference: the shared normalize backward (xhat materialized, then the formula)."""
    return _normalize_grad_kernel(_bn_view(x.shape), dy, x, weight, eps)


def _batch_norm_grad_fast(dy, x, weight, eps):
    """Training-mode batch_norm backward on the (N, C, M) view, one output-sized buffer in all.

    With xc = x - mean, rstd = 1 / sqrt(var + eps), n = N*M values per channel and the per-channel
    sums db = sum(dy), s = sum(dy * xc) (einsum: no product temporary),
        dweight = s * rstd,   dbias = db,
        dx = weight * rstd * (dy - db / n - xc * rstd**2 * s / n)
    (`_batch_norm_grad_plain`'s formula with xhat = xc * rstd folded into the per-channel
    coefficients): xc is built in dx's memory and turned into dx in place, so xhat is never
    formed. tests/ops/test_fast_conv_bn.py checks it against the plain kernel."""
    v = _bn_view(x.shape)
    cdt = compute_dtype(x)
    xv = x.reshape(v.shape).astype(cdt, copy=False)
    dyv = dy.reshape(v.shape).astype(cdt, copy=False)
    n = v.count
    dx = xv - _vsum(xv, v.axes) / n                     # xc, in the buffer that becomes dx
    rstd = 1.0 / np.sqrt(_vsum(dx, v.axes, dx) / n + eps)
    db = _vsum(dyv, v.axes)
    s = _vsum(dyv, v.axes, dx)
    scale = rstd if weight is None else rstd * weight.reshape(v.param_shape).astype(cdt, copy=False)
    dx *= -(rstd * rstd * s / n)
    dx += dyv
    dx -= db / n
    dx *= scale
    return dx.reshape(x.shape), (s * rstd).reshape(-1), db.reshape(-1)


def _batch_norm_grad_kernel(dy, x, weight, eps):
    """The C loops (_native_batch_norm: three passes over x, two over dy, one write) where they apply,
    else `_batch_norm_grad_fast` (their NumPy reference: about eleven passes)."""
    v = _bn_view(x.shape)
    native = _native_batch_norm.batch_norm_grad(dy.reshape(v.shape), x.reshape(v.shape), weight, eps)
    if native is None:
        return _batch_norm_grad_fast(dy, x, weight, eps)
    dx, dw, db = native
    return dx.reshape(x.shape), dw, db


def _batch_norm_bprop(inputs, out, dout, training, eps):
    from .elementwise import add, mul, pow, rsqrt, sub
    from .reduction import reduce_sum
    from .shape import reshape
    x, weight, bias, mean, var = inputs
    if training:
        # (the batch statistics outputs feed only the running averages: no gradient flows from them)
        dy = dout[0]
        dx, dw, db = _batch_norm_grad(dy, x, weight, eps=eps)
        return dx, (dw if weight is not None else None), (db if bias is not None else None), None, None
    # inference: y = (x - mean) * rstd * w + b, an affine map of x with given statistics
    dy = dout
    pshape = (1, x.shape[1]) + (1,) * (len(x.shape) - 2)
    axes = (0,) + tuple(range(2, len(x.shape)))
    rstd = rsqrt(add(var, eps))
    scale = mul(rstd, weight) if weight is not None else rstd
    dx = mul(dy, reshape(scale, pshape)) if N.needs_grad(x) else None
    xc = sub(x, reshape(mean, pshape))
    dw = reduce_sum(mul(dy, mul(xc, reshape(rstd, pshape))), axes) if N.needs_grad(weight) else None
    db = reduce_sum(dy, axes) if N.needs_grad(bias) else None
    dmean = mul(reduce_sum(dy, axes), mul(scale, -1.0)) if N.needs_grad(mean) else None
    dvar = None
    if N.needs_grad(var):
        dvar = mul(reduce_sum(mul(dy, xc), axes), mul(mul(pow(rstd, 3), -0.5), weight if weight is not None else 1.0))
    return dx, dw, db, dmean, dvar


def _batch_norm_grad_bprop(inputs, out, dout, eps):
    return _normalize_grad_bprop(_bn_view(tuple(inputs[1].shape)), inputs, dout, eps)


def _batch_norm_cost(ins, outs, attrs):
    """Per element: normalize and scale-shift (2); training also computes the batch mean and
    variance (+6)."""
    return {"flops": (8 if attrs["training"] else 2) * ins[0].size, **costs.traffic(ins, outs)}


_batch_norm = defprim("batch_norm", _batch_norm_infer, _batch_norm_kernel, _batch_norm_bprop, cost=_batch_norm_cost,
                      doc="per-channel normalization: batch statistics (training, also returned) or given ones")
_batch_norm_grad = defprim("batch_norm_grad", _batch_norm_grad_infer, _batch_norm_grad_kernel,
                           _batch_norm_grad_bprop, doc="fused backward of training-mode batch_norm: (dx, dw, db)")


def update_running_stats(running_mean, running_var, batch_mean, batch_var, factor):
    """running = (1 - factor) * running + factor * batch, written into the running tensors' storage
    (in place, as MindSpore's BatchNorm updates its moving statistics). Eager values only."""
    for run, new in ((running_mean, batch_mean), (running_var, batch_var)):
        a = run._data
        upd = a * (1.0 - factor) + new._data.astype(a.dtype, copy=False) * factor
        if a.flags.writeable:
            np.copyto(a, upd, casting="unsafe")
        else:
            run._data = upd.astype(a.dtype)
        run._version += 1


# Graph capture cannot write a traced value into a tensor: under jit the nn layer installs an
# updater that runs as a host call (at graph run time, on the concrete statistics).
_RUNNING_STATS_UPDATER = [update_running_stats]


def set_running_stats_updater(fn):
    """Install the function that applies running-statistics updates (nn.layers.normalization does)."""
    _RUNNING_STATS_UPDATER[0] = fn


def batch_norm(input_x, running_mean, running_var, weight, bias, training=False, momentum=0.1, eps=1e-5):
    """`ops.batch_norm(input_x, running_mean, running_var, weight, bias, training=False, momentum=0.1, eps=1e-5)`.

    Normalizes each channel (dim 1) of an (N, C, ...) input:
    y = (x - mean) / sqrt(var + eps) * weight + bias. With training=True the batch's statistics
    are used (biased variance) and the running ones are updated in place with the *functional*
    convention  running = (1 - momentum) * running + momentum * batch  (unbiased variance); note
    nn.BatchNorm2d's `momentum=0.9` is the weight of the *old* value instead. With training=False
    the running statistics are used. weight/bias may be None (ones / zeros).
    """
    op = "batch_norm"
    for arg, t in (("input_x", input_x), ("running_mean", running_mean), ("running_var", running_var)):
        N.tensor(op, arg, t)
    if not isinstance(training, bool):
        raise C.OpTypeError(op, "'training' to be a bool", repr(training))
    momentum = C.float_attr(op, "momentum", momentum, lo=0.0, hi=1.0)
    eps = C.float_attr(op, "eps", eps, lo=0.0)
    if not training:
        return _batch_norm(input_x, weight, bias, running_mean, running_var, training=False, eps=eps)
    _batch_norm_infer(input_x, weight, bias, running_mean, running_var, True, eps)   # check the running stats too
    y, bmean, bvar = _batch_norm(input_x, weight, bias, None, None, training=True, eps=eps)
    _RUNNING_STATS_UPDATER[0](running_mean, running_var, bmean, bvar, momentum)
    return y


# -------------------------------------------------------------------------------------------------
# group_norm
def _group_norm_infer(x, weight, bias, num_groups, eps):
    op = "group_norm"
    N.floating(op, "input", x)
    if len(x.shape) < 2:
        raise C.OpValueError(op, "'input' of rank >= 2, (N, C, ...)", f"shape {tuple(x.shape)}")
    c = x.shape[1]
    if c % num_groups:
        raise C.OpValueError(op, f"'num_groups' dividing the channels C = {c}", f"num_groups={num_groups}")
    _check_channel_param(op, "weight", weight, c)
    _check_channel_param(op, "bias", bias, c)
    return AbstractTensor(x.shape, x.dtype)


def _group_norm_kernel(x, weight, bias, num_groups, eps):
    if x.size == 0:                 # nothing to normalize (the group statistics would be num_groups wide)
        return np.empty_like(x)
    v = _gn_view(x.shape, num_groups)
    # the view puts the per-channel parameters in (1, G, C/G, 1): reshape them the same way
    return _normalize_kernel(v, x, weight, bias, eps)[0]


def _group_norm_grad_infer(dy, x, weight, num_groups, eps):
    op = "group_norm_grad"
    N.floating(op, "dout", dy)
    if tuple(dy.shape) != tuple(x.shape):
        raise C.OpValueError(op, f"'dout' of the input's shape {tuple(x.shape)}", f"shape {tuple(dy.shape)}")
    _group_norm_infer(x, weight, None, num_groups, eps)
    wdt = weight.dtype if weight is not None else x.dtype
    c = (x.shape[1],)
    return AbstractTensor(x.shape, x.dtype), AbstractTensor(c, wdt), AbstractTensor(c, wdt)


def _group_norm_grad_kernel(dy, x, weight, num_groups, eps):
    if x.size == 0:
        wdt = weight.dtype if weight is not None else x.dtype
        return np.zeros_like(x), np.zeros(x.shape[1], wdt), np.zeros(x.shape[1], wdt)
    return _normalize_grad_kernel(_gn_view(x.shape, num_groups), dy, x, weight, eps)


def _group_norm_bprop(inputs, out, dout, num_groups, eps):
    x, weight, bias = inputs
    dx, dw, db = _group_norm_grad(dout, x, weight, num_groups=num_groups, eps=eps)
    return dx, (dw if weight is not None else None), (db if bias is not None else None)


def _group_norm_grad_bprop(inputs, out, dout, num_groups, eps):
    return _normalize_grad_bprop(_gn_view(tuple(inputs[1].shape), num_groups), inputs, dout, eps)


_group_norm = defprim("group_norm", _group_norm_infer, _group_norm_kernel, _group_norm_bprop,
                      doc="normalize over groups of channels (and space), then per-channel scale and shift")
_group_norm_grad = defprim("group_norm_grad", _group_norm_grad_infer, _group_norm_grad_kernel,
                           _group_norm_grad_bprop, doc="fused backward of group_norm: (dx, dweight, dbias)")


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """`ops.group_norm(input, num_groups, weight=None, bias=None, eps=1e-5)`.

    Splits the C channels of an (N, C, ...) input into `num_groups` groups and normalizes each
    (sample, group) over its channels and positions (biased variance); then y * weight + bias per
    channel. Instance normalization is num_groups = C; layer normalization over (C, ...) is 1.
    """
    op = "group_norm"
    num_groups = C.int_attr(op, "num_groups", num_groups, minimum=1)
    eps = C.float_attr(op, "eps", eps, lo=0.0)
    return _group_norm(input, weight, bias, num_groups=num_groups, eps=eps)


__all__ = ["batch_norm", "group_norm", "layer_norm", "rms_norm"]
