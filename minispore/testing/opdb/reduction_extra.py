"""Op table: amax/amin, max/min (with indices), argmax/argmin, prod, var/std, logsumexp, cumsum/cumprod
(including the exclusive/reverse forms), all/any, norm/vector_norm/matrix_norm.

Samples whose exact ties make a finite difference meaningless for the checked gradient are marked
forward-only (`grad_args=()`); two-way ties are kept for amax/amin, whose even split of the gradient
is exactly what a central difference measures there.
"""
import numpy as np
import scipy.special

from ... import ops
from ...common import dtype as mstype
from ...ops.prims.reduction_extra import cumprod_op, cumsum_op
from ..opinfo import OpInfo, SampleInput, noncontig, rand, register

FLOATS = (mstype.float16, mstype.float32, mstype.float64)
F16 = (mstype.float16, mstype.bfloat16, mstype.float32, mstype.float64)


def _axes(axis):
    return tuple(axis) if isinstance(axis, (list, tuple)) else axis


def _reduce_samples(axis_kw, keep_kw, low=-2.0, high=2.0, zero_d=True):
    def samples(rng, dtype):
        yield SampleInput((rand(rng, (3, 4), dtype, low, high),))
        if zero_d:
            yield SampleInput((rand(rng, (), dtype, low, high),), desc="0-d")
        yield SampleInput((rand(rng, (2, 3, 4), dtype, low, high),), {axis_kw: 1})
        yield SampleInput((rand(rng, (2, 3, 4), dtype, low, high),), {axis_kw: (0, 2), keep_kw: True})
        yield SampleInput((rand(rng, (2, 3, 4), dtype, low, high),), {axis_kw: -1, keep_kw: True})
        yield SampleInput((noncontig(rand(rng, (4, 5), dtype, low, high)),), {axis_kw: 0}, desc="non-contiguous")
    return samples


# ---- amax / amin -------------------------------------------------------------------------------
def _extreme_samples(rng, dtype):
    yield from _reduce_samples("axis", "keepdims")(rng, dtype)
    tie = np.array([[1.0, 3.0, 3.0, -2.0], [0.5, -1.0, 2.0, 2.0]], dtype=dtype)
    yield SampleInput((tie,), {"axis": 1}, desc="two-way ties share the gradient")
    yield SampleInput((-tie,), {"axis": 1}, desc="two-way ties (negated)")
    yield SampleInput((rand(rng, (3, 4), dtype),), {"axis": 1, "initial": 1.0}, desc="initial")
    yield SampleInput((rand(rng, (2, 0, 3), dtype),), {"axis": 1, "initial": -5.0}, desc="empty with initial")


def _ref_extreme(fn):
    def ref(a, axis=None, keepdims=False, initial=None):
        kw = {} if initial is None else {"initial": initial}
        return fn(a, axis=_axes(axis), keepdims=keepdims, **kw)
    return ref


def _masked_samples(initial):
    def samples(rng, dtype):
        mask = rng.random((3, 4)) > 0.4
        yield SampleInput((rand(rng, (3, 4), dtype), mask), {"axis": 1, "initial": initial})
        yield SampleInput((rand(rng, (3, 4), dtype), mask[0]), {"initial": initial}, desc="broadcast mask")
    return samples


def _ref_masked(fn):
    def ref(a, mask, axis=None, initial=None):
        return fn(a, axis=axis, initial=initial, where=np.broadcast_to(mask, a.shape))
    return ref


# ---- max / min with indices --------------------------------------------------------------------
def _with_value_samples(rng, dtype):
    yield SampleInput((rand(rng, (3, 4), dtype),), desc="axis=None")
    yield SampleInput((rand(rng, (3, 4), dtype),), {"axis": 1})
    yield SampleInput((rand(rng, (3, 4), dtype),), {"axis": 0, "keepdims": True})
    yield SampleInput((rand(rng, (2, 3, 4), dtype),), {"axis": -1})
    yield SampleInput((rand(rng, (), dtype),), desc="0-d")
    yield SampleInput((noncontig(rand(rng, (4, 5), dtype)),), {"axis": 0}, desc="non-contiguous")
    tie = np.array([[1.0, 3.0, 3.0, -2.0], [2.0, -1.0, 2.0, 2.0]], dtype=dtype)
    yield SampleInput((tie,), {"axis": 1}, desc="ties: first index", grad_args=())
    yield SampleInput((rand(rng, (3, 4), dtype),), {"axis": 1, "initial": 0.5}, desc="initial")


def _ref_with_value(fn, argfn, bound):
    def ref(a, axis=None, keepdims=False, initial=None):
        if initial is not None:
            a = bound(a, initial)
        if axis is None:
            return fn(a), np.asarray(argfn(a))
        return fn(a, axis=axis, keepdims=keepdims), argfn(a, axis=axis, keepdims=keepdims)
    return ref


# ---- argmax / argmin ---------------------------------------------------------------------------
def _arg_samples(dim_kw, keep_kw):
    def samples(rng, dtype):
        yield SampleInput((rand(rng, (3, 4), dtype),))
        yield SampleInput((rand(rng, (3, 4), dtype),), {dim_kw: 1})
        yield SampleInput((rand(rng, (2, 3, 4), dtype),), {dim_kw: 0, keep_kw: True})
        yield SampleInput((noncontig(rand(rng, (4, 5), dtype)),), {dim_kw: -1}, desc="non-contiguous")
        yield SampleInput((rand(rng, (), dtype),), desc="0-d")
        yield SampleInput((np.array([[2, 7, 7, 1], [0, 0, -3, 0]], dtype=dtype),), {dim_kw: 1}, desc="ties")
    return samples


def _ref_arg(fn, dim_kw, keep_kw):
    def ref(a, **kw):
        dim = kw.get(dim_kw)
        if dim is None:
            return np.asarray(fn(a))
        return fn(a, axis=dim, keepdims=kw.get(keep_kw, False))
    return ref


# ---- prod --------------------------------------------------------------------------------------
def _prod_samples(rng, dtype):
    yield from _reduce_samples("axis", "keep_dims", 0.5, 1.5)(rng, dtype)
    signed = rand(rng, (3, 4), dtype, 0.5, 1.5) * np.where(rng.random((3, 4)) > 0.5, 1, -1).astype(dtype)
    yield SampleInput((signed,), {"axis": 1}, desc="signs")
    zeros = rand(rng, (3, 4), dtype, 0.5, 1.5)
    zeros[0, 1] = 0          # one zero: only that element gets a non-zero gradient in its row
    zeros[1, 0] = zeros[1, 2] = 0   # two zeros: the whole row's gradient is zero
    yield SampleInput((zeros,), {"axis": 1}, desc="zeros: exact gradient")
    yield SampleInput((zeros,), desc="zeros, all axes")


# ---- var / std ---------------------------------------------------------------------------------
def _moment_samples(allow_zero_d_grad):
    def samples(rng, dtype):
        yield SampleInput((rand(rng, (3, 4), dtype),))
        yield SampleInput((rand(rng, (2, 3, 4), dtype),), {"axis": 1})
        yield SampleInput((rand(rng, (2, 3, 4), dtype),), {"axis": (0, 2), "keepdims": True})
        yield SampleInput((rand(rng, (3, 5), dtype),), {"axis": -1, "ddof": 1})
        yield SampleInput((rand(rng, (3, 5), dtype),), {"axis": 0, "ddof": True}, desc="ddof=True")
        yield SampleInput((noncontig(rand(rng, (4, 5), dtype)),), {"axis": 0}, desc="non-contiguous")
        # the variance of one element is 0; std's gradient is 0/0 there (as in PyTorch)
        yield SampleInput((rand(rng, (), dtype),), desc="0-d", grad_args=None if allow_zero_d_grad else ())
    return samples


def _ref_moment(fn):
    def ref(a, axis=None, ddof=0, keepdims=False):
        return fn(a, axis=_axes(axis), ddof=int(ddof), keepdims=keepdims)
    return ref


# ---- logsumexp ---------------------------------------------------------------------------------
def _logsumexp_samples(rng, dtype):
    yield SampleInput((rand(rng, (3, 4), dtype),), {"axis": 1})
    yield SampleInput((rand(rng, (2, 3, 4), dtype),), {"axis": (0, 2), "keep_dims": True})
    yield SampleInput((rand(rng, (2, 3, 4), dtype),), {"axis": -1})
    yield SampleInput((rand(rng, (), dtype),), {"axis": ()}, desc="0-d")
    yield SampleInput((noncontig(rand(rng, (4, 5), dtype)),), {"axis": 0}, desc="non-contiguous")
    # exp(1e4) overflows every float type: the maximum must be factored out first
    yield SampleInput((np.array([[1e4, 9999.0, -1e4], [-1e4, -9999.5, -1e4]], dtype=dtype),), {"axis": 1},
                      desc="large values")
    yield SampleInput((np.array([[-np.inf, -np.inf], [0.0, -np.inf]], dtype=dtype),), {"axis": 1},
                      desc="-inf rows", grad_args=())


def _ref_logsumexp(a, axis, keep_dims=False):
    axis = _axes(axis)
    if axis == ():
        axis = None
    return scipy.special.logsumexp(a, axis=axis, keepdims=keep_dims)


# ---- cumsum / cumprod --------------------------------------------------------------------------
def _cum_samples(axis_kw, low=-2.0, high=2.0):
    def samples(rng, dtype):
        yield SampleInput((rand(rng, (3, 4), dtype, low, high), 1))
        yield SampleInput((rand(rng, (3, 4), dtype, low, high), 0))
        yield SampleInput((rand(rng, (6,), dtype, low, high), -1), desc="1-d")
        yield SampleInput((rand(rng, (2, 3, 4), dtype, low, high), -2))
        yield SampleInput((noncontig(rand(rng, (4, 5), dtype, low, high)), 0), desc="non-contiguous")
        yield SampleInput((rand(rng, (3, 4), dtype, low, high), 1), {"dtype": mstype.float64}, desc="dtype")
    return samples


def _ref_cum(fn):
    def ref(a, axis, dtype=None):
        return fn(a, axis=axis)
    return ref


def _cum_flag_samples(low, high):
    def samples(rng, dtype):
        for exclusive in (False, True):
            for reverse in (False, True):
                yield SampleInput((rand(rng, (3, 5), dtype, low, high), 1),
                                  {"exclusive": exclusive, "reverse": reverse})
        yield SampleInput((rand(rng, (4, 2), dtype, low, high), 0), {"exclusive": True, "reverse": True})
    return samples


def _ref_cum_flags(fn, identity):
    def ref(a, axis, exclusive=False, reverse=False):
        a = np.moveaxis(a, axis, -1)
        if reverse:
            a = a[..., ::-1]
        c = fn(a, axis=-1)
        if exclusive:
            c = np.concatenate([np.full(c[..., :1].shape, identity), c[..., :-1]], axis=-1)
        if reverse:
            c = c[..., ::-1]
        return np.moveaxis(c, -1, axis)
    return ref


def _signed_nonzero(rng, shape, dtype):
    return (rand(rng, shape, dtype, 0.5, 1.5) * np.where(rng.random(shape) > 0.5, 1, -1)).astype(dtype)


def _cumprod_samples(rng, dtype):
    yield SampleInput((_signed_nonzero(rng, (3, 4), dtype), 1))
    yield SampleInput((_signed_nonzero(rng, (3, 4), dtype), 0))
    yield SampleInput((_signed_nonzero(rng, (6,), dtype), -1), desc="1-d")
    yield SampleInput((noncontig(_signed_nonzero(rng, (4, 5), dtype)), 0), desc="non-contiguous")


# ---- all / any ---------------------------------------------------------------------------------
def _logic_samples(rng, dtype):
    b = rng.random((3, 4)) > 0.3
    yield SampleInput((b,))
    yield SampleInput((b,), {"axis": 1})
    yield SampleInput((b,), {"axis": 0, "keep_dims": True})
    yield SampleInput((np.ones((2, 3), dtype=bool),), {"axis": (0, 1)})
    yield SampleInput((np.array(False),), desc="0-d")
    yield SampleInput((np.array([[0.0, 1.5], [2.0, 3.0]]),), {"axis": 1}, desc="numbers: non-zero is True")


# ---- norms -------------------------------------------------------------------------------------
def _norm_samples(rng, dtype):
    yield SampleInput((rand(rng, (3, 4), dtype),), desc="Frobenius of everything")
    yield SampleInput((rand(rng, (2, 3, 4), dtype),), desc="3-d, flattened 2-norm")
    yield SampleInput((rand(rng, (3, 4), dtype),), {"dim": 1}, desc="row 2-norms")
    yield SampleInput((rand(rng, (3, 4), dtype),), {"dim": 0, "keepdim": True})
    yield SampleInput((rand(rng, (2, 3, 4), dtype),), {"dim": (0, 2)}, desc="Frobenius over two axes")
    yield SampleInput((rand(rng, (5,), dtype),), {"ord": 1})
    yield SampleInput((rand(rng, (5,), dtype),), {"ord": float("inf")})
    yield SampleInput((rand(rng, (5,), dtype),), {"ord": -float("inf")})
    yield SampleInput((rand(rng, (3, 5), dtype),), {"ord": 3, "dim": 1})
    yield SampleInput((rand(rng, (3, 5), dtype, 0.5, 2.0),), {"ord": 0.5, "dim": -1})
    yield SampleInput((np.array([0.0, 1.5, 0.0, -2.0], dtype=dtype),), {"ord": 0})
    yield SampleInput((rand(rng, (3, 4), dtype),), {"ord": "fro"})
    yield SampleInput((rand(rng, (3, 4), dtype),), {"ord": 1}, desc="matrix 1-norm")
    yield SampleInput((rand(rng, (3, 4), dtype),), {"ord": -1}, desc="matrix -1-norm")
    yield SampleInput((rand(rng, (3, 4), dtype),), {"ord": float("inf")}, desc="matrix inf-norm")
    yield SampleInput((rand(rng, (2, 3, 4), dtype),), {"ord": -float("inf"), "dim": (2, 0), "keepdim": True})
    yield SampleInput((noncontig(rand(rng, (4, 3), dtype)),), {"dim": 0}, desc="non-contiguous")
    yield SampleInput((np.zeros((2, 3), dtype=dtype),), {"dim": 1}, desc="zero vectors: subgradient 0")


def _ref_norm(a, ord=None, dim=None, keepdim=False):
    if ord is None and dim is None:
        return np.sqrt(np.sum(a * a))
    if isinstance(dim, tuple) and ord is None:
        return np.sqrt(np.sum(a * a, axis=dim, keepdims=keepdim))
    return np.linalg.norm(a, ord=ord, axis=dim, keepdims=keepdim)


def _vector_norm_samples(rng, dtype):
    yield SampleInput((rand(rng, (2, 3, 4), dtype),), desc="everything")
    yield SampleInput((rand(rng, (2, 3, 4), dtype),), {"ord": 4, "axis": (0, 2), "keepdims": True})
    yield SampleInput((rand(rng, (3, 4), dtype),), {"ord": float("inf"), "axis": 1})


def _ref_vector_norm(a, ord=2, axis=None, keepdims=False):
    x = np.abs(a)
    if ord == float("inf"):
        return np.max(x, axis=axis, keepdims=keepdims)
    return np.sum(x ** ord, axis=axis, keepdims=keepdims) ** (1 / ord)


register(
    OpInfo("amax", ops.amax, _ref_extreme(np.amax), _extreme_samples, dtypes=F16),
    OpInfo("amin", ops.amin, _ref_extreme(np.amin), _extreme_samples, dtypes=F16),
    OpInfo("amax_where", lambda x, m, **kw: ops.amax(x, where=m, **kw), _ref_masked(np.amax), _masked_samples(-10.0),
           primitive="reduce_max"),
    OpInfo("amin_where", lambda x, m, **kw: ops.amin(x, where=m, **kw), _ref_masked(np.amin), _masked_samples(10.0),
           primitive="reduce_min"),
    OpInfo("max", ops.max, _ref_with_value(np.max, np.argmax, np.maximum), _with_value_samples, dtypes=F16,
           primitive="argmax_with_value"),
    OpInfo("min", ops.min, _ref_with_value(np.min, np.argmin, np.minimum), _with_value_samples, dtypes=F16,
           primitive="argmin_with_value"),
    OpInfo("argmax", ops.argmax, _ref_arg(np.argmax, "dim", "keepdim"), _arg_samples("dim", "keepdim"),
           dtypes=(mstype.float32, mstype.float64, mstype.int32), differentiable=False),
    OpInfo("argmin", ops.argmin, _ref_arg(np.argmin, "axis", "keepdims"), _arg_samples("axis", "keepdims"),
           dtypes=(mstype.float32, mstype.float64, mstype.int32), differentiable=False),
    OpInfo("prod", ops.prod, lambda a, axis=None, keep_dims=False: np.prod(a, axis=_axes(axis), keepdims=keep_dims),
           _prod_samples, dtypes=FLOATS, primitive="reduce_prod"),
    OpInfo("var", ops.var, _ref_moment(np.var), _moment_samples(True), dtypes=FLOATS, primitive="reduce_var"),
    OpInfo("std", ops.std, _ref_moment(np.std), _moment_samples(False), dtypes=FLOATS, primitive="reduce_std"),
    OpInfo("logsumexp", ops.logsumexp, _ref_logsumexp, _logsumexp_samples, dtypes=F16,
           tols={mstype.bfloat16: (1.6e-2, 5e-2)}),
    OpInfo("cumsum", ops.cumsum, _ref_cum(np.cumsum), _cum_samples("axis"), dtypes=FLOATS,
           tols={mstype.float16: (5e-3, 5e-3)}),
    OpInfo("cumsum_exclusive_reverse", cumsum_op, _ref_cum_flags(np.cumsum, 0.0), _cum_flag_samples(-2, 2),
           primitive="cumsum"),
    OpInfo("cumprod", ops.cumprod, _ref_cum(np.cumprod), _cumprod_samples, dtypes=FLOATS),
    OpInfo("cumprod_exclusive_reverse", cumprod_op, _ref_cum_flags(np.cumprod, 1.0), _cum_flag_samples(0.5, 1.5),
           primitive="cumprod"),
    OpInfo("all", ops.all, lambda a, axis=None, keep_dims=False: np.all(a, axis=_axes(axis), keepdims=keep_dims),
           _logic_samples, dtypes=(mstype.bool_,), differentiable=False, primitive="reduce_all"),
    OpInfo("any", ops.any, lambda a, axis=None, keep_dims=False: np.any(a, axis=_axes(axis), keepdims=keep_dims),
           _logic_samples, dtypes=(mstype.bool_,), differentiable=False, primitive="reduce_any"),
    OpInfo("norm", ops.norm, _ref_norm, _norm_samples, dtypes=FLOATS, primitive="vector_norm",
           tols={mstype.float16: (5e-3, 5e-3)}),
    OpInfo("vector_norm", ops.vector_norm, _ref_vector_norm, _vector_norm_samples),
)
