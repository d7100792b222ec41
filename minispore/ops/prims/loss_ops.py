"""Loss primitives: `nll_loss` and `cross_entropy` (fused log-softmax), and the element-wise
`binary_cross_entropy` (clamped logarithms with MindSpore's gradient, see its section). The losses
built from a few existing ops (`mse_loss`, `l1_loss`, `kl_div`, the margin losses, ...) are in
composite_losses.py.

One formula covers every option of cross_entropy / nll_loss (PyTorch's and MindSpore's semantics,
which agree). With log-probabilities `logp` (class axis 1, or 0 for a 1-d input) each position m
has a row of coefficients c[m, :] and

    loss_m = -sum_j c[m, j] * logp[m, j]

* class-index targets t:  c[m, j] = ((1 - ls) * w[t_m] * [j == t_m] + ls / C * w[j]) / D
  for positions whose target is not `ignore_index` (ignored rows have c = 0);
* probability targets p:  c[m, j] = w[j] * (p[m, j] * (1 - ls) + ls / C) / D.

`ls` is label_smoothing, `w` the class weights (ones if None), and D the 'mean' denominator: the sum
of w[t_m] over non-ignored positions for index targets (so an all-ignored batch gives 0/0 = nan, as
in PyTorch), the number of positions for probability targets; D = 1 for 'sum' and 'none'.

The loss is linear in logp, so d loss / d logp = -dout * c, and with logp = log_softmax(x) the
fused backward is the familiar  dx = dout * (softmax(x) * sum_j c - c)  ("softmax minus one-hot").

Backward rules and why they are primitives:
* `nll_loss_grad(dout)` = -dout * c is linear in dout; its backward is nll_loss itself (the
  adjoint), so the pair (nll_loss, nll_loss_grad) is closed under differentiation.
* `cross_entropy_grad` recomputes the softmax in one fused kernel (no (N, C) intermediate kept
  alive between forward and backward). It also returns log_softmax(x) as a second output, so its
  own backward (grad-of-grad, written in ops) can use the probabilities without a softmax op.
"""
from __future__ import annotations

import numbers

import numpy as np

from ...common import dtype as mstype
from ...common.errors import OpIndexError
from .. import _check as C
from .. import costs
from .. import sharding_rules as SR
from ..primitive import AbstractTensor, defprim
from . import _nn_common as N
from ._loss_reduction import check_reduction, reduce_loss
from ._nn_common import compute_dtype


# =================================================================================================
# argument checks shared by the inference rules
def _class_dim(shape):
    return 1 if len(shape) >= 2 else 0


def _without_class_dim(shape):
    cd = _class_dim(shape)
    return tuple(shape[:cd]) + tuple(shape[cd + 1:])


def _loss_infer(op, x, target, weight, ignore_index, reduction, label_smoothing, allow_prob):
    """Shared inference for nll_loss / cross_entropy. Returns (output aval, is_prob_target)."""
    N.floating(op, "input", x)
    N.tensor(op, "target", target)
    if len(x.shape) == 0:
        raise C.OpValueError(op, "'input' of shape (C,), (N, C) or (N, C, d1, ...)", "a 0-d tensor")
    check_reduction(op, reduction)
    if not isinstance(ignore_index, numbers.Integral) or isinstance(ignore_index, bool):
        raise C.OpTypeError(op, "'ignore_index' to be an int", repr(ignore_index))
    if not isinstance(label_smoothing, numbers.Real) or isinstance(label_smoothing, bool) \
            or not 0.0 <= label_smoothing <= 1.0:
        raise C.OpValueError(op, "'label_smoothing' as a float in [0.0, 1.0]", repr(label_smoothing))
    n_classes = x.shape[_class_dim(x.shape)]
    if n_classes == 0:
        raise C.OpValueError(op, "'input' with at least one class (C >= 1)", f"shape {tuple(x.shape)}")
    prob = target.dtype.is_floating
    if prob:
        if not allow_prob:
            raise C.OpTypeError(op, "'target' of class indices (an integer dtype)", str(target.dtype))
        if tuple(target.shape) != tuple(x.shape):
            raise C.OpValueError(op, f"probability 'target' of the input's shape {tuple(x.shape)}",
                                 f"shape {tuple(target.shape)}")
    else:
        if target.dtype.kind not in ("int", "uint"):
            raise C.OpTypeError(op, "'target' of class indices (integer dtype) or class probabilities (float)",
                                str(target.dtype))
        want = _without_class_dim(x.shape)
        if tuple(target.shape) != want:
            raise C.OpValueError(op, f"'target' of shape {want} for input of shape {tuple(x.shape)}",
                                 f"shape {tuple(target.shape)}")
    if weight is not None:
        N.floating(op, "weight", weight)
        if tuple(weight.shape) != (n_classes,):
            raise C.OpValueError(op, f"'weight' of shape ({n_classes},) (one per class)", f"shape {tuple(weight.shape)}")
    shape = _without_class_dim(x.shape) if reduction == "none" else ()
    return AbstractTensor(shape, x.dtype), prob


# =================================================================================================
# NumPy helpers: every kernel works on (M, C) rows, class axis last
def _to_rows(a, ndim_x):
    if ndim_x == 1:
        return a.reshape(1, -1)
    if ndim_x == 2:
        return a
    return np.moveaxis(a, 1, -1).reshape(-1, a.shape[1])


def _from_rows(a2, shape):
    if len(shape) <= 2:
        return a2.reshape(shape)
    n_classes = shape[1]
    return np.moveaxis(a2.reshape((shape[0],) + tuple(shape[2:]) + (n_classes,)), -1, 1)


def _row_sums(a2):
    """Sums along the last axis as a BLAS matrix-vector product: for short rows (C = 65) this is
    ~10x faster than `a2.sum(axis=-1)`, whose reduction loop pays a setup cost per row."""
    return a2 @ np.ones(a2.shape[-1], a2.dtype)


def _softmax_parts(x2):
    """(e, s, lse) for the rows of x2 (M, C): e = exp(x2 - shift), s = row sums of e, and
    lse = log-sum-exp of each row. Then log_softmax = x2 - lse and softmax = e / s; callers combine
    these without materializing more (M, C) arrays than they need (each fresh large array costs
    page faults, and broadcasting a per-row value over short rows is a full pass).

    The usual stabilizing shift is the row maximum. Reducing over short rows is slow in NumPy, so
    the shift is the *global* maximum (one fast reduction), with a fallback to row maxima when some
    row's sum gets near underflow (a row far below the global maximum, or a nan/inf input). Both
    shifts give the same result up to the rounding of exp.
    """
    shift = x2.max() if x2.size else x2.dtype.type(0)
    e = np.exp(x2 - shift)
    s = _row_sums(e)
    if s.size and not s.min() > np.finfo(s.dtype).tiny * 2.0 ** 24:
        shift = x2.max(axis=-1, keepdims=True)
        e = np.exp(x2 - shift)
        s = _row_sums(e)
        shift = shift[:, 0]
    with np.errstate(divide="ignore"):
        return e, s, np.log(s) + shift


class _IndexTargets:
    """Class-index targets of one call, flattened to M positions: the pieces of c (module docstring)."""

    def __init__(self, op, target, weight, n_classes, ignore_index, reduction, dtype):
        t = target.reshape(-1)
        self.valid = t != ignore_index
        self.all_valid = bool(self.valid.all())
        ts = t if self.all_valid else np.where(self.valid, t, 0)
        if ts.size and (ts.min() < 0 or ts.max() >= n_classes):
            bad = ts[(ts < 0) | (ts >= n_classes)][0]
            raise OpIndexError(op, f"target class indices in [0, {n_classes}) (or ignore_index={ignore_index})",
                               f"target value {int(bad)}")
        self.ts = ts.astype(np.intp, copy=False)
        self.rows = np.arange(ts.size)
        self.weight = None if weight is None else weight.astype(dtype, copy=False)
        wt = self.weight[self.ts] if weight is not None else np.ones(ts.size, dtype)
        self.wt = wt if self.all_valid else wt * self.valid           # w[t_m], 0 where ignored
        self.denom = self.wt.sum() if reduction == "mean" else np.ones((), dtype)
        self.n_classes = n_classes

    def smooth_row_weights(self, dtype):
        return self.weight if self.weight is not None else np.ones(self.n_classes, dtype)

    def dense_coeffs(self, ls, dtype):
        """c (without the 1/D factor) as a dense (M, C) array."""
        c = np.zeros((self.ts.size, self.n_classes), dtype)
        c[self.rows, self.ts] = (1.0 - ls) * self.wt
        if ls:
            c += (ls / self.n_classes) * self.valid[:, None] * self.smooth_row_weights(dtype)[None, :]
        return c


def _prob_coeffs(target2, weight, ls, n_classes, dtype):
    c = target2.astype(dtype, copy=True)
    if ls:
        c *= 1.0 - ls
        c += ls / n_classes
    if weight is not None:
        c *= weight.astype(dtype, copy=False)
    return c


def _reduce_rows(per, denom, reduction, out_shape):
    if reduction == "none":
        return per.reshape(out_shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(per.sum() / denom) if reduction == "mean" else np.asarray(per.sum())


def _index_loss(picked, rowdot, it, ls, reduction, out_shape):
    """Loss for class-index targets from picked = logp[m, t_m] and rowdot = sum_j w_j logp[m, j]
    (rowdot is only used with label smoothing)."""
    per = (it.wt * picked) * -(1.0 - ls)
    if ls:
        per -= (ls / it.n_classes) * (rowdot if it.all_valid else rowdot * it.valid)
    return _reduce_rows(per, it.denom, reduction, out_shape)


def _weighted_row_sums(a2, it):
    return a2 @ it.weight if it.weight is not None else _row_sums(a2)


def _dout_rows(dout, reduction, dtype):
    """The incoming cotangent per position: (M, 1) for 'none', a scalar otherwise."""
    d = np.asarray(dout, dtype=dtype)
    return d.reshape(-1, 1) if reduction == "none" else d


# =================================================================================================
# nll_loss and its linear backward
def _nll_infer(x, target, weight, ignore_index, reduction, label_smoothing):
    return _loss_infer("nll_loss", x, target, weight, ignore_index, reduction, label_smoothing, False)[0]


def _nll_kernel(logp, target, weight, ignore_index, reduction, label_smoothing):
    dt = compute_dtype(logp)
    logp2 = _to_rows(logp, logp.ndim).astype(dt, copy=False)
    it = _IndexTargets("nll_loss", target, weight, logp2.shape[1], ignore_index, reduction, dt)
    rowdot = _weighted_row_sums(logp2, it) if label_smoothing else None
    return _index_loss(logp2[it.rows, it.ts], rowdot, it, label_smoothing, reduction, target.shape)


def _nll_grad_infer(dout, target, weight, input_shape, ignore_index, reduction, label_smoothing):
    x = AbstractTensor(input_shape, dout.dtype)
    want = _loss_infer("nll_loss_grad", x, target, weight, ignore_index, reduction, label_smoothing, False)[0]
    N.floating("nll_loss_grad", "dout", dout)
    if tuple(dout.shape) != want.shape:
        raise C.OpValueError("nll_loss_grad", f"'dout' of shape {want.shape}", f"shape {tuple(dout.shape)}")
    return AbstractTensor(input_shape, dout.dtype)


def _nll_grad_kernel(dout, target, weight, input_shape, ignore_index, reduction, label_smoothing):
    dt = compute_dtype(dout)
    it = _IndexTargets("nll_loss", target, weight, input_shape[_class_dim(input_shape)], ignore_index, reduction, dt)
    c = it.dense_coeffs(label_smoothing, dt)
    with np.errstate(divide="ignore", invalid="ignore"):
        c *= -_dout_rows(dout, reduction, dt) / it.denom
    return _from_rows(c, input_shape)


def _nll_bprop(inputs, out, dout, ignore_index, reduction, label_smoothing):
    logp, target, weight = inputs
    return (_nll_grad(dout, target, weight, input_shape=tuple(logp.shape), ignore_index=ignore_index,
                      reduction=reduction, label_smoothing=label_smoothing), None, None)


def _nll_grad_bprop(inputs, out, dout, input_shape, ignore_index, reduction, label_smoothing):
    # nll_loss_grad is dout -> -dout * c; its adjoint a -> -sum(a * c) is nll_loss(a).
    _, target, weight = inputs
    return (_nll(dout, target, weight, ignore_index=ignore_index, reduction=reduction,
                 label_smoothing=label_smoothing), None, None)


_nll = defprim("nll_loss", _nll_infer, _nll_kernel, _nll_bprop, doc="negative log-likelihood of log-probabilities",
               cost=costs.per_input_element(1), sharding=SR.cross_entropy)
_nll_grad = defprim("nll_loss_grad", _nll_grad_infer, _nll_grad_kernel, _nll_grad_bprop,
                    doc="backward of nll_loss: -dout * coefficients (linear in dout)", sharding=SR.nll_loss_grad)


# =================================================================================================
# cross_entropy (fused log-softmax) and its fused backward
def _ce_infer(x, target, weight, ignore_index, reduction, label_smoothing):
    return _loss_infer("cross_entropy", x, target, weight, ignore_index, reduction, label_smoothing, True)[0]


def _ce_kernel(x, target, weight, ignore_index, reduction, label_smoothing):
    dt = compute_dtype(x)
    x2 = _to_rows(x, x.ndim).astype(dt, copy=False)
    _, _, lse = _softmax_parts(x2)                        # logp = x2 - lse, never materialized here
    n_classes = x2.shape[1]
    out_shape = _without_class_dim(x.shape)
    ls = label_smoothing
    if mstype._BY_NP[target.dtype].is_floating:          # (BFloat16 is NumPy kind 'V', not 'f')
        c = _prob_coeffs(_to_rows(target, x.ndim), weight, ls, n_classes, dt)
        per = _row_sums(c) * lse - np.einsum("ij,ij->i", c, x2)          # -sum_j c_j * logp_j
        return _reduce_rows(per, x2.shape[0], reduction, out_shape)
    it = _IndexTargets("cross_entropy", target, weight, n_classes, ignore_index, reduction, dt)
    rowdot = None
    if ls:
        wsum = it.weight.sum() if it.weight is not None else n_classes
        rowdot = _weighted_row_sums(x2, it) - wsum * lse
    return _index_loss(x2[it.rows, it.ts] - lse, rowdot, it, ls, reduction, out_shape)


def _ce_grad_infer(dout, x, target, weight, ignore_index, reduction, label_smoothing):
    want, _ = _loss_infer("cross_entropy_grad", x, target, weight, ignore_index, reduction, label_smoothing, True)
    N.floating("cross_entropy_grad", "dout", dout)
    if tuple(dout.shape) != want.shape:
        raise C.OpValueError("cross_entropy_grad", f"'dout' of shape {want.shape}", f"shape {tuple(dout.shape)}")
    return AbstractTensor(x.shape, x.dtype), AbstractTensor(x.shape, x.dtype)


def _ce_grad_kernel(dout, x, target, weight, ignore_index, reduction, label_smoothing):
    """(dx, log_softmax(x)) with dx = dout * (softmax(x) * sum_j c - c)."""
    dt = compute_dtype(x)
    x2 = _to_rows(x, x.ndim).astype(dt, copy=False)
    e, s, lse = _softmax_parts(x2)
    logp2 = x2 - lse[:, None]
    n_classes = x2.shape[1]
    d = _dout_rows(dout, reduction, dt)
    ls = label_smoothing
    if mstype._BY_NP[target.dtype].is_floating:          # (BFloat16 is NumPy kind 'V', not 'f')
        c = _prob_coeffs(_to_rows(target, x.ndim), weight, ls, n_classes, dt)
        if reduction == "mean":
            d = d / x2.shape[0]
        dx = e
        dx *= (_row_sums(c) / s)[:, None]                  # softmax * sum_j c
        dx -= c
        dx *= d
    else:
        it = _IndexTargets("cross_entropy", target, weight, n_classes, ignore_index, reduction, dt)
        with np.errstate(divide="ignore", invalid="ignore"):
            coef = (d / it.denom).reshape(-1)               # dout / D per position (or a scalar)
        row_w = it.smooth_row_weights(dt)
        csum = (1.0 - ls) * it.wt
        if ls:
            csum = csum + (ls / n_classes) * row_w.sum() * it.valid
        dx = e
        dx *= (csum * coef / s)[:, None]                   # softmax * sum_j c, in one pass
        dx[it.rows, it.ts] -= (1.0 - ls) * it.wt * coef     # minus the one-hot part of c
        if ls:
            dx -= ((ls / n_classes) * it.valid * coef)[:, None] * row_w[None, :]
    return _from_rows(dx, x.shape), _from_rows(logp2, x.shape)


def _class_broadcast(t, x_shape):
    """Reshape a per-class vector (C,) so it broadcasts along the class axis of x."""
    from .shape import reshape
    return reshape(t, (x_shape[1],) + (1,) * (len(x_shape) - 2)) if len(x_shape) >= 2 else t


def _per_position(dout, x_shape, reduction):
    """Reshape dout so it broadcasts against x: re-insert the class axis for 'none'."""
    from .shape import reshape
    if reduction != "none":
        return dout
    cd = _class_dim(x_shape)
    return reshape(dout, tuple(x_shape[:cd]) + (1,) + tuple(x_shape[cd + 1:]))


def _positions_scale(x_shape, reduction):
    """1 / D for probability targets: 1 / (number of positions) for 'mean', else 1."""
    if reduction != "mean":
        return 1.0
    n_classes = x_shape[_class_dim(x_shape)]
    return float(n_classes) / float(max(int(np.prod(x_shape)), 1))


def _prob_coeffs_op(target, weight, x_shape, reduction, ls):
    """c for probability targets, in minispore ops (differentiable in the target)."""
    from .elementwise import add, mul
    n_classes = x_shape[_class_dim(x_shape)]
    scale = _positions_scale(x_shape, reduction)
    c = add(mul(target, (1.0 - ls) * scale), ls / n_classes * scale) if ls else mul(target, scale)
    return mul(c, _class_broadcast(weight, x_shape)) if weight is not None else c


def _prob_dc_dt(weight, x_shape, reduction, ls):
    """d c / d target for probability targets: (1 - ls) * w / D (a number when there is no weight)."""
    from .elementwise import mul
    factor = (1.0 - ls) * _positions_scale(x_shape, reduction)
    return mul(_class_broadcast(weight, x_shape), factor) if weight is not None else factor


def _ce_bprop(inputs, out, dout, ignore_index, reduction, label_smoothing):
    from .elementwise import mul
    x, target, weight = inputs
    dx, logp = _ce_grad(dout, x, target, weight, ignore_index=ignore_index, reduction=reduction,
                        label_smoothing=label_smoothing)
    d_target = None
    if target.dtype.is_floating and N.needs_grad(target):
        # loss = -sum(c * logp) with c linear in the target: d target = -dout * logp * dc/dt
        dc_dt = _prob_dc_dt(weight, x.shape, reduction, label_smoothing)
        d_target = mul(mul(_per_position(dout, x.shape, reduction), logp), dc_dt)
        d_target = mul(d_target, -1.0)
    return dx, d_target, None


def _ce_grad_bprop(inputs, out, dout, ignore_index, reduction, label_smoothing):
    """Backward of the fused backward (grad-of-grad), in minispore ops.

    With g = -dout * c (the cotangent of logp) and p = exp(logp), the outputs are dx = g - p * S,
    S = sum_class(g), and logp. Given cotangents (a, b) of (dx, logp):
      cotangent of g:     e = a - sum_class(a * p)
      cotangent of logp:  q = b - a * S * p      (through p = exp(logp))
      d x = q - p * sum_class(q)                 (backward of log_softmax)
      d dout = nll_loss(e) for index targets (the adjoint of g(dout)), -sum(e * c) for probabilities
      d target (probabilities) = -dout * e * dc/dt
    """
    from .elementwise import exp, mul, neg, sub
    from .reduction import reduce_sum
    dout_t, x, target, weight = inputs
    a, b = dout
    logp = out[1]
    xs = tuple(x.shape)
    cd = _class_dim(xs)
    ls = label_smoothing
    p = exp(logp)
    dout_b = _per_position(dout_t, xs, reduction)
    prob = target.dtype.is_floating
    if prob:
        c = _prob_coeffs_op(target, weight, xs, reduction, ls)
        g = mul(neg(dout_b), c)
    else:
        g = _nll_grad(dout_t, target, weight, input_shape=xs, ignore_index=ignore_index, reduction=reduction,
                      label_smoothing=ls)
    S = reduce_sum(g, cd, True)
    e = sub(a, reduce_sum(mul(a, p), cd, True))
    q = sub(b, mul(mul(a, S), p))
    d_x = sub(q, mul(p, reduce_sum(q, cd, True)))
    d_target = None
    if prob:
        ec = neg(mul(e, c))
        d_dout = reduce_sum(ec, cd) if reduction == "none" else reduce_sum(ec)
        if N.needs_grad(target):
            d_target = mul(mul(e, neg(dout_b)), _prob_dc_dt(weight, xs, reduction, ls))
    else:
        d_dout = _nll(e, target, weight, ignore_index=ignore_index, reduction=reduction, label_smoothing=ls)
    return d_dout, d_x, d_target, None


_ce = defprim("cross_entropy", _ce_infer, _ce_kernel, _ce_bprop,
              doc="log-softmax + negative log-likelihood, fused (class indices or probabilities)",
              cost=costs.per_input_element(5), sharding=SR.cross_entropy)
_ce_grad = defprim("cross_entropy_grad", _ce_grad_infer, _ce_grad_kernel, _ce_grad_bprop,
                   doc="fused backward of cross_entropy: (dx, log_softmax(x))", cost=costs.per_input_element(3),
                   sharding=SR.cross_entropy_grad)


def _loss_attrs(op, ignore_index, reduction, label_smoothing):
    check_reduction(op, reduction)
    if not isinstance(ignore_index, numbers.Integral) or isinstance(ignore_index, bool):
        raise C.OpTypeError(op, "'ignore_index' to be an int", repr(ignore_index))
    ls = C.float_attr(op, "label_smoothing", label_smoothing, lo=0.0, hi=1.0)
    return dict(ignore_index=int(ignore_index), reduction=reduction, label_smoothing=ls)


def cross_entropy(input, target, weight=None, ignore_index=-100, reduction='mean', label_smoothing=0.0):
    """`ops.cross_entropy(input, target, weight=None, ignore_index=-100, reduction='mean', label_smoothing=0.0)`.

    `input`: logits of shape (C,), (N, C) or (N, C, d1, ...). `target`: class indices (integer
    dtype, shape without the class axis) or class probabilities (float, input's shape). Follows
    PyTorch/MindSpore exactly for ignore_index, weight, label_smoothing and 'mean'/'sum'/'none'.
    """
    attrs = _loss_attrs("cross_entropy", ignore_index, reduction, label_smoothing)
    return _ce(input, target, weight, **attrs)


def nll_loss(inputs, target, weight=None, ignore_index=-100, reduction='mean', label_smoothing=0.0):
    """`ops.nll_loss(inputs, target, weight=None, ignore_index=-100, reduction='mean', label_smoothing=0.0)`.

    `inputs` are log-probabilities of shape (C,), (N, C) or (N, C, d1, ...); `target` class indices.
    """
    attrs = _loss_attrs("nll_loss", ignore_index, reduction, label_smoothing)
    return _nll(inputs, target, weight, **attrs)


# =================================================================================================
# binary_cross_entropy: element-wise, on probabilities
#
# A primitive rather than a composite because of the clamp. MindSpore's kernel computes
#     loss = -w * (y * log(max(x, eps)) + (1 - y) * log(max(1 - x, eps))),   eps = 1e-12,
# so x = 0 or 1 gives a large finite loss (27.63) instead of inf, and its backward is the analytic
#     d loss / d x = w * (x - y) / max(x * (1 - x), eps)
# everywhere, through the clamp too (a composite's gradient would be 0 where the clamp is active,
# and stall training at saturated probabilities). The primitive is the unreduced loss; the
# reduction is the shared mean/sum of composite_losses.
_BCE_EPS = 1e-12


def _bce_infer(x, y, weight):
    op = "binary_cross_entropy"
    N.floating(op, "logits", x)
    N.floating(op, "labels", y)
    if tuple(y.shape) != tuple(x.shape):
        raise C.OpValueError(op, f"'labels' of the logits' shape {tuple(x.shape)}", f"shape {tuple(y.shape)}")
    if y.dtype != x.dtype:
        raise C.OpTypeError(op, f"'labels' of the logits' dtype ({x.dtype})", str(y.dtype))
    if weight is not None:
        N.floating(op, "weight", weight)
        if C.broadcast(op, tuple(weight.shape), tuple(x.shape)) != tuple(x.shape):
            raise C.OpValueError(op, f"'weight' that broadcasts to the logits' shape {tuple(x.shape)}",
                                 f"shape {tuple(weight.shape)}")
    return AbstractTensor(x.shape, x.dtype)


def _bce_kernel(x, y, weight):
    dt = compute_dtype(x)
    x = x.astype(dt, copy=False)
    if x.size and not (x.min() >= 0.0 and x.max() <= 1.0):        # also catches nan
        bad = x[~((x >= 0.0) & (x <= 1.0))].ravel()[0]
        raise C.OpValueError("binary_cross_entropy", "'logits' (probabilities) in [0, 1]", f"value {bad}")
    y = y.astype(dt, copy=False)
    loss = -(y * np.log(np.maximum(x, _BCE_EPS)) + (1.0 - y) * np.log(np.maximum(1.0 - x, _BCE_EPS)))
    if weight is not None:
        loss *= weight.astype(dt, copy=False)
    return loss


def _bce_bprop(inputs, out, dout):
    from .elementwise import div, log, maximum, mul, sub, sum_to
    x, y, weight = inputs
    g = mul(dout, weight) if weight is not None else dout
    dx = div(mul(g, sub(x, y)), maximum(mul(x, sub(1.0, x)), _BCE_EPS))
    dy = None
    if N.needs_grad(y):
        dy = mul(g, sub(log(maximum(sub(1.0, x), _BCE_EPS)), log(maximum(x, _BCE_EPS))))
    dw = None
    if weight is not None and N.needs_grad(weight):
        dw = sum_to(mul(dout, _bce(x, y, None)), tuple(weight.shape))
    return dx, dy, dw


_bce = defprim("binary_cross_entropy", _bce_infer, _bce_kernel, _bce_bprop,
               doc="element-wise binary cross-entropy of probabilities (clamped logs, MindSpore's gradient)")


def binary_cross_entropy(logits, labels, weight=None, reduction='mean'):
    """`ops.binary_cross_entropy(logits, labels, weight=None, reduction='mean')`.

    `logits` are probabilities in [0, 1] (a value outside raises, as MindSpore's kernel does),
    `labels` targets of the same shape and dtype, `weight` rescales each element (broadcasting to
    the logits' shape). loss = -w * (y * log(x) + (1 - y) * log(1 - x)), logs clamped at 1e-12.
    """
    check_reduction("binary_cross_entropy", reduction)
    return reduce_loss(_bce(logits, labels, weight), reduction)


__all__ = ["binary_cross_entropy", "cross_entropy", "nll_loss"]
