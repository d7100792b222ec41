"""Functional ops (`mindspore.ops.*`) as MindSpore 2.10 has them: the math, activation, matrix,
shape, scatter/gather, selection, scan and resize ops added for issue 11, their result dtypes and
keyword forms, gradients at ties and kinks (`ms.grad`), and bad input.

Left out, because MindSpore 2.10's CPU build errors or misbehaves there (see the report for the
Differences page): `isclose` (every call fails inside its kernel), `roll` and
`nonzero(as_tuple=True)` (kernels unregistered), `xlogy(0, 0)` (nan, documented 0), `diff(n=2)`
("n must be 1"), `div(int_tensor, python_int, rounding_mode='floor')` (kernel init fails),
`searchsorted(out_int32=True)`, `einsum`, the gradient of `cummax`, `elu(alpha != 1)`,
`softshrink`/`hardshrink` on Float64 and `relu6` on Float64/ints (rejected), `mint.nn.functional`
hardtanh/relu6/leaky_relu (kernels unregistered), the gradient of `selu` below 0 (negative: a kernel
bug).
"""
import numpy as np

from msdiff import case, rand


def R(ms, *shape, seed=0, low=-1.0, high=1.0, dtype=np.float32):
    return ms.Tensor(rand(*shape, seed=seed, low=low, high=high, dtype=dtype))


def A(ms, values, dtype=np.float32):
    return ms.Tensor(np.array(values, dtype=dtype))


def G(ms, fn, *args, pos=0):
    return ms.grad(fn, grad_position=pos)(*args)


KINKS = [-7.0, -3.0, -1.0, 0.0, 0.5, 1.0, 3.0, 6.0, 7.0]


# -- unary math -----------------------------------------------------------------------------------
for _name, _lo, _hi in [("log1p", -0.5, 2.0), ("expm1", -2, 2), ("tan", -1.2, 1.2), ("asin", -0.9, 0.9),
                        ("acos", -0.9, 0.9), ("atan", -3, 3), ("sinh", -2, 2), ("cosh", -2, 2), ("asinh", -3, 3),
                        ("acosh", 1.1, 3), ("atanh", -0.9, 0.9), ("log2", 0.1, 4), ("log10", 0.1, 4),
                        ("exp2", -3, 3), ("trunc", -3, 3), ("frac", -3, 3), ("erfc", -2, 2), ("sinc", -2, 2)]:
    def _make(name, lo, hi):
        @case(f"functional/{name}_values", rtol=2e-5, atol=1e-6)
        def _(ms):
            return getattr(ms.ops, name)(R(ms, 3, 4, low=lo, high=hi))

    _make(_name, _lo, _hi)


@case("functional/log1p_float64")
def _(ms):
    return ms.ops.log1p(R(ms, 5, dtype=np.float64, low=0, high=1))


@case("functional/expm1_float16", rtol=2e-3, atol=2e-3)
def _(ms):
    return ms.ops.expm1(R(ms, 5, dtype=np.float16))


@case("functional/log1p_int_rejected", raises=True)
def _(ms):
    return ms.ops.log1p(A(ms, [1, 2], np.int32))


@case("functional/tan_int_rejected", raises=True)
def _(ms):
    return ms.ops.tan(A(ms, [1, 2], np.int64))


@case("functional/exp2_int_gives_float32")
def _(ms):
    return ms.ops.exp2(A(ms, [1, 2, 3], np.int32))


@case("functional/trunc_int_keeps_dtype")
def _(ms):
    return ms.ops.trunc(A(ms, [-3, 2], np.int32))


@case("functional/arcsin_alias")
def _(ms):
    return ms.ops.arcsin(A(ms, [0.5, -0.25]))


@case("functional/grad_log1p_tan_asinh", rtol=1e-5)
def _(ms):
    x = R(ms, 4, low=-0.5, high=0.5)
    return G(ms, lambda t: (ms.ops.log1p(t) + ms.ops.tan(t) + ms.ops.asinh(t)).sum(), x)


@case("functional/grad_trunc_frac")
def _(ms):
    x = A(ms, [-1.5, 0.25, 2.75])
    return G(ms, lambda t: (ms.ops.trunc(t) * 3 + ms.ops.frac(t)).sum(), x)


# -- binary math ------------------------------------------------------------------------------------
@case("functional/atan2_values")
def _(ms):
    return ms.ops.atan2(R(ms, 3, 4, seed=1), R(ms, 3, 4, seed=2))


@case("functional/atan2_float_int")
def _(ms):
    return ms.ops.atan2(A(ms, [0.5, -1.0, 2.0]), A(ms, [1, 2, 3], np.int32))


@case("functional/atan2_ints_rejected", raises=True)
def _(ms):
    return ms.ops.atan2(A(ms, [1, 2], np.int32), A(ms, [1, 2], np.int32))


@case("functional/logaddexp_values")
def _(ms):
    return ms.ops.logaddexp(A(ms, [1.0, -800.0, 800.0]), A(ms, [2.0, 3.0, 800.0]))


@case("functional/logaddexp_scalar_rejected", raises=True)
def _(ms):
    return ms.ops.logaddexp(A(ms, [1.0]), 2.0)


@case("functional/logaddexp2_values")
def _(ms):
    return ms.ops.logaddexp2(R(ms, 4, seed=3), R(ms, 4, seed=4))


@case("functional/xlogy_values")
def _(ms):
    return ms.ops.xlogy(A(ms, [0.5, -1.0, 2.0]), A(ms, [1.5, 2.0, 0.5]))


@case("functional/hypot_fmod_copysign")
def _(ms):
    a, b = A(ms, [0.5, -1.0, 2.0, -7.5]), A(ms, [1.5, 2.0, -0.5, 2.0])
    return ms.ops.hypot(a, b), ms.ops.fmod(a, b), ms.ops.copysign(a, b)


@case("functional/fmod_int_keeps_dtype")
def _(ms):
    return ms.ops.fmod(A(ms, [-7, 7, 5], np.int32), A(ms, [2, -2, 3], np.int32))


@case("functional/copysign_ints_give_float32")
def _(ms):
    return ms.ops.copysign(A(ms, [1, 2], np.int32), A(ms, [-1, 2], np.int32))


@case("functional/xdivy_lerp_heaviside")
def _(ms):
    a, b = A(ms, [0.0, -1.0, 2.0]), A(ms, [1.5, 2.0, -0.5])
    return ms.ops.xdivy(a, b), ms.ops.lerp(a, b, 0.25), ms.ops.heaviside(a, A(ms, [0.5, 0.5, 0.5]))


@case("functional/grad_atan2_hypot")
def _(ms):
    a, b = A(ms, [0.5, -1.0, 2.0]), A(ms, [1.5, 2.0, -0.5])
    return G(ms, lambda x, y: (ms.ops.atan2(x, y) + ms.ops.hypot(x, y)).sum(), a, b, pos=(0, 1))


@case("functional/grad_logaddexp_xlogy")
def _(ms):
    a, b = A(ms, [0.5, -1.0, 2.0]), A(ms, [1.5, 2.0, 0.5])
    return G(ms, lambda x, y: (ms.ops.logaddexp(x, y) + ms.ops.xlogy(x, y)).sum(), a, b, pos=(0, 1))


# -- div(rounding_mode) and where with scalars ------------------------------------------------------
@case("functional/div_rounding_modes")
def _(ms):
    a, b = A(ms, [-7.0, -3.5, 3.5, 7.0]), A(ms, [2.0, 2.0, -2.0, -2.0])
    return ms.ops.div(a, b), ms.ops.div(a, b, rounding_mode="floor"), ms.ops.div(a, b, rounding_mode="trunc")


@case("functional/div_int_rounding_keeps_int")
def _(ms):
    a, b = A(ms, [-7, -3, 3, 7], np.int32), A(ms, [2, 2, -2, -2], np.int32)
    return ms.ops.div(a, b), ms.ops.div(a, b, rounding_mode="floor"), ms.ops.div(a, b, rounding_mode="trunc")


@case("functional/div_float_scalar_trunc")
def _(ms):
    return ms.ops.div(A(ms, [-7.0, -3.5, 3.5, 7.0]), 2, rounding_mode="trunc")


@case("functional/div_floor_int64_int32")
def _(ms):
    return ms.ops.div(A(ms, [-7, 7], np.int64), A(ms, [2, 2], np.int32), rounding_mode="floor")


@case("functional/div_bad_rounding_mode", raises=True)
def _(ms):
    return ms.ops.div(A(ms, [1.0]), A(ms, [2.0]), rounding_mode="round")


@case("functional/grad_div_floor_is_zero")
def _(ms):
    a, b = A(ms, [-7.0, 3.5]), A(ms, [2.0, -2.0])
    return G(ms, lambda x, y: ms.ops.div(x, y, rounding_mode="floor").sum(), a, b, pos=(0, 1))


@case("functional/where_scalar_operands")
def _(ms):
    c, x = A(ms, [True, False, True, False], np.bool_), A(ms, [-7.0, -3.5, 3.5, 7.0])
    return ms.ops.where(c, 1.0, x), ms.ops.where(c, x, 0), ms.ops.where(c, 1.0, 0.0), ms.ops.where(c, 1, 0)


@case("functional/where_int_tensor_float_scalar")
def _(ms):
    return ms.ops.where(A(ms, [True, False], np.bool_), A(ms, [3, 4], np.int32), 1.5)


@case("functional/where_float_condition_rejected", raises=True)
def _(ms):
    return ms.ops.where(A(ms, [1.0, 0.0]), A(ms, [1.0, 2.0]), A(ms, [3.0, 4.0]))


@case("functional/grad_where_scalar")
def _(ms):
    x = A(ms, [-7.0, -3.5, 3.5, 7.0])
    return G(ms, lambda t: ms.ops.where(t > 0, 1.0, t * 2).sum(), x)


# -- gradients at ties and kinks -------------------------------------------------------------------
@case("functional/grad_maximum_minimum_ties")
def _(ms):
    x, y = A(ms, [1.0, 2.0, 3.0, 0.0, -1.0]), A(ms, [1.0, 1.0, 3.0, 0.0, 2.0])
    return (G(ms, lambda a, b: ms.ops.maximum(a, b).sum(), x, y, pos=(0, 1)),
            G(ms, lambda a, b: ms.ops.minimum(a, b).sum(), x, y, pos=(0, 1)))


@case("functional/grad_maximum_broadcast_tie")
def _(ms):
    x = A(ms, [1.0, 2.0, 3.0, 0.0, -1.0])
    return G(ms, lambda a, b: ms.ops.maximum(a, b).sum(), x, A(ms, 1.0), pos=(0, 1))


@case("functional/grad_maximum_python_scalar_tie")
def _(ms):
    return G(ms, lambda a: ms.ops.maximum(a, 1.0).sum(), A(ms, [1.0, 2.0, 0.0]))


@case("functional/grad_max_min_all_ties")
def _(ms):
    t = A(ms, [[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]])
    return G(ms, lambda a: ms.ops.max(a)[0], t), G(ms, lambda a: ms.ops.min(a)[0], t)


@case("functional/grad_max_axis_first_index")
def _(ms):
    t = A(ms, [[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]])
    return G(ms, lambda a: ms.ops.max(a, 1)[0].sum(), t)


@case("functional/grad_amax_amin_ties")
def _(ms):
    t = A(ms, [[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]])
    return G(ms, lambda a: ms.ops.amax(a, 1).sum(), t), G(ms, lambda a: ms.ops.amin(a, 1).sum(), t)


for _name in ["relu", "relu6", "hardtanh", "abs", "hardswish", "hardsigmoid", "celu", "mish", "softsign",
              "logsigmoid", "softshrink", "hardshrink", "elu", "sign", "floor", "round"]:
    def _make_kink(name):
        @case(f"functional/grad_{name}_at_kinks", rtol=1e-5, atol=3e-4 if name == "mish" else 1e-6)
        def _(ms):
            return G(ms, lambda a: getattr(ms.ops, name)(a).sum(), A(ms, KINKS))

    _make_kink(_name)


@case("functional/grad_selu_at_zero")
def _(ms):
    # non-negative points only: MindSpore 2.10's CPU SeluGrad returns negative slopes for x < 0
    # (e.g. -0.117 at x = -1, where the derivative is 0.647) — a kernel bug, left out
    return G(ms, lambda a: ms.ops.selu(a).sum(), A(ms, [0.0, 0.5, 1.0, 3.0]))


@case("functional/grad_leaky_relu_at_zero")
def _(ms):
    x = A(ms, KINKS)
    return (G(ms, lambda a: ms.ops.leaky_relu(a, 0.1).sum(), x), G(ms, lambda a: ms.ops.leaky_relu(a, 2.0).sum(), x),
            G(ms, lambda a: ms.ops.leaky_relu(a, -0.5).sum(), x))


@case("functional/grad_hardtanh_bounds")
def _(ms):
    return G(ms, lambda a: ms.ops.hardtanh(a, 0.0, 6.0).sum(), A(ms, KINKS))


@case("functional/grad_clamp_bounds")
def _(ms):
    x = A(ms, KINKS)
    return (G(ms, lambda a: ms.ops.clamp(a, 0.0, 1.0).sum(), x), G(ms, lambda a: ms.ops.clamp(a, min=0.0).sum(), x),
            G(ms, lambda a: ms.ops.clamp(a, max=1.0).sum(), x))


@case("functional/grad_clamp_tensor_bounds")
def _(ms):
    x = A(ms, KINKS)
    lo, hi = ms.Tensor(np.zeros(9, np.float32)), ms.Tensor(np.ones(9, np.float32))
    return G(ms, lambda a, b, c: ms.ops.clamp(a, b, c).sum(), x, lo, hi, pos=(0, 1, 2))


@case("functional/grad_prelu_at_zero")
def _(ms):
    return G(ms, lambda a, w: ms.ops.prelu(a, w).sum(), A(ms, KINKS), A(ms, [0.25]), pos=(0, 1))


# -- activations -----------------------------------------------------------------------------------
@case("functional/activations_values", rtol=1e-5, atol=1e-6)
def _(ms):
    x = A(ms, [-4.0, -3.0, -1.0, 0.0, 1.0, 3.0, 4.0])
    o = ms.ops
    return (o.hardswish(x), o.hardsigmoid(x), o.mish(x), o.selu(x), o.celu(x, 2.0), o.logsigmoid(x), o.softsign(x),
            o.tanhshrink(x), o.softshrink(x, 1.0), o.hardshrink(x), o.threshold(x, 0.5, 9.0))


@case("functional/activations_int_dtypes")
def _(ms):
    i = A(ms, [1, 2, 3], np.int32)
    return ms.ops.hardswish(i), ms.ops.hardsigmoid(i), ms.ops.selu(i)


@case("functional/tanhshrink_int_gives_float32", rtol=1e-5)
def _(ms):
    return ms.ops.tanhshrink(A(ms, [1, 2, 3], np.int32))


@case("functional/mish_int_rejected", raises=True)
def _(ms):
    return ms.ops.mish(A(ms, [1, 2], np.int32))


@case("functional/celu_alpha_zero_rejected", raises=True)
def _(ms):
    return ms.ops.celu(A(ms, [1.0]), 0.0)


@case("functional/softshrink_negative_lambd_rejected", raises=True)
def _(ms):
    return ms.ops.softshrink(A(ms, [1.0]), -1.0)


@case("functional/prelu_per_channel")
def _(ms):
    return ms.ops.prelu(R(ms, 2, 2, 3, 3, seed=5), A(ms, [0.1, 0.2]))


@case("functional/prelu_bad_weight_rejected", raises=True)
def _(ms):
    return ms.ops.prelu(R(ms, 1, 2, 2, 2), A(ms, [0.1, 0.2, 0.3]))


@case("functional/glu_softmin")
def _(ms):
    x = R(ms, 2, 4, seed=6)
    return ms.ops.glu(x), ms.ops.glu(x, 0), ms.ops.softmin(x), ms.ops.softmin(x, 0)


@case("functional/glu_odd_rejected", raises=True)
def _(ms):
    return ms.ops.glu(R(ms, 1, 3))


@case("functional/grad_activations_smooth", rtol=1e-5, atol=1e-6)
def _(ms):
    x = R(ms, 6, seed=7, low=-2.5, high=2.5)
    o = ms.ops
    return G(ms, lambda a: (o.mish(a) + o.logsigmoid(a) + o.softsign(a) + o.tanhshrink(a)).sum() + o.glu(a).sum(), x)


# -- matrix products -------------------------------------------------------------------------------
@case("functional/mm_outer")
def _(ms):
    return ms.ops.mm(R(ms, 2, 3), R(ms, 3, 4, seed=1)), ms.ops.outer(R(ms, 3, seed=2), R(ms, 2, seed=3))


@case("functional/mm_int_keeps_dtype")
def _(ms):
    return ms.ops.mm(A(ms, np.ones((2, 3)), np.int32), A(ms, np.ones((3, 4)), np.int32))


@case("functional/mm_3d_rejected", raises=True)
def _(ms):
    return ms.ops.mm(R(ms, 2, 2, 3), R(ms, 3, 4))


@case("functional/mm_mixed_dtypes_rejected", raises=True)
def _(ms):
    return ms.ops.mm(R(ms, 2, 3), R(ms, 3, 2, dtype=np.float64))


@case("functional/outer_promotes_and_flattens")
def _(ms):
    return ms.ops.outer(A(ms, [1, 2, 3], np.int32), A(ms, [1.0, 2.0])), ms.ops.outer(R(ms, 2, 2), A(ms, [1.0, 2.0]))


@case("functional/addmm_keywords")
def _(ms):
    return ms.ops.addmm(R(ms, 4, seed=1), R(ms, 2, 3, seed=2), R(ms, 3, 4, seed=3), beta=0.5, alpha=2)


@case("functional/addmm_bad_inner_rejected", raises=True)
def _(ms):
    return ms.ops.addmm(R(ms, 4), R(ms, 2, 3), R(ms, 2, 4))


@case("functional/grad_addmm")
def _(ms):
    return G(ms, lambda i, a, b: ms.ops.addmm(i, a, b, beta=0.5, alpha=2.0).sum(), R(ms, 4), R(ms, 2, 3, seed=1),
             R(ms, 3, 4, seed=2), pos=(0, 1, 2))


@case("functional/dense_forms")
def _(ms):
    x, w, b = R(ms, 2, 3), R(ms, 4, 3, seed=1), R(ms, 4, seed=2)
    return (ms.ops.dense(x, w, b), ms.ops.dense(x, w), ms.ops.dense(x, R(ms, 3, seed=3)),
            ms.ops.dense(R(ms, 2, 5, 3, seed=4), w), ms.ops.dense(R(ms, 3, seed=5), w, b))


@case("functional/dense_bad_shapes_rejected", raises=True)
def _(ms):
    return ms.ops.dense(R(ms, 2, 3), R(ms, 4, 2))


@case("functional/grad_dense")
def _(ms):
    return G(ms, lambda x, w, b: (ms.ops.dense(x, w, b) ** 2).sum(), R(ms, 2, 3), R(ms, 4, 3, seed=1), R(ms, 4, seed=2),
             pos=(0, 1, 2))


@case("functional/mv_addmv_addr_baddbmm")
def _(ms):
    o = ms.ops
    return (o.mv(R(ms, 2, 3), R(ms, 3, seed=1)), o.addmv(R(ms, 2, seed=2), R(ms, 2, 3), R(ms, 3, seed=1), beta=2, alpha=0.5),
            o.addr(R(ms, 2, 3, seed=3), R(ms, 2, seed=4), R(ms, 3, seed=5)),
            o.baddbmm(R(ms, 2, 2, 4, seed=6), R(ms, 2, 2, 3, seed=7), R(ms, 2, 3, 4, seed=8), 0.5, 2.0))


@case("functional/kron_cross_trace_diag")
def _(ms):
    o = ms.ops
    return (o.kron(R(ms, 1, 2), R(ms, 2, 1, seed=1)), o.cross(R(ms, 2, 3, seed=2), R(ms, 2, 3, seed=3)),
            o.cross(R(ms, 3, 3, seed=4), R(ms, 3, 3, seed=5), dim=0), o.trace(R(ms, 2, 3, seed=6)),
            o.trace(A(ms, np.arange(6).reshape(2, 3), np.int32)), o.diag(A(ms, [1.0, 2.0])), o.diag(R(ms, 2, 2)))


@case("functional/grad_trace_diag_outer")
def _(ms):
    o = ms.ops
    return (G(ms, lambda x: o.trace(x), R(ms, 2, 3)),
            G(ms, lambda x: (o.diag(x) * A(ms, [[1.0, 2.0], [3.0, 4.0]])).sum(), A(ms, [1.0, 2.0])),
            G(ms, lambda x, y: (o.outer(x, y) ** 2).sum(), R(ms, 3), R(ms, 2, seed=1), pos=(0, 1)))


# -- shape ops -------------------------------------------------------------------------------------
@case("functional/narrow_swapaxes_moveaxis")
def _(ms):
    x = ms.Tensor(np.arange(24, dtype=np.float32).reshape(2, 3, 4))
    o = ms.ops
    return (o.narrow(x, 2, 1, 2), o.narrow(x, -1, 0, 4), o.swapaxes(x, 0, 2), o.swapdims(x, 1, -1),
            o.moveaxis(x, 0, -1), o.movedim(x, (0, 1), (2, 0)), o.t(x[0]))


@case("functional/narrow_length_out_of_range", raises=True)
def _(ms):
    return ms.ops.narrow(R(ms, 3, 4), 1, 3, 2)


@case("functional/narrow_negative_start_rejected", raises=True)
def _(ms):
    return ms.ops.narrow(R(ms, 4), 0, -2, 2)


@case("functional/swapaxes_bad_axis", raises=True)
def _(ms):
    return ms.ops.swapaxes(R(ms, 2, 3, 4), 0, 3)


@case("functional/shape_is_tuple")
def _(ms):
    return ms.ops.shape(R(ms, 2, 3)), ms.ops.shape(A(ms, 1.0))


@case("functional/unbind_unstack")
def _(ms):
    x = ms.Tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    return ms.ops.unbind(x), ms.ops.unbind(x, -1), ms.ops.unstack(x, 1)


@case("functional/meshgrid_xy_ij")
def _(ms):
    a, b, c = A(ms, [1.0, 2.0, 3.0]), A(ms, [4.0, 5.0]), A(ms, [7.0])
    return ms.ops.meshgrid(a, b), ms.ops.meshgrid(a, b, indexing="ij"), ms.ops.meshgrid(b, a, c)


@case("functional/meshgrid_mixed_dtypes_rejected", raises=True)
def _(ms):
    return ms.ops.meshgrid(A(ms, [1, 2], np.int32), A(ms, [4.0, 5.0]))


@case("functional/grad_meshgrid_narrow")
def _(ms):
    a, b = A(ms, [1.0, 2.0, 3.0]), A(ms, [4.0, 5.0])
    w = ms.Tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    return G(ms, lambda x, y: (ms.ops.meshgrid(x, y)[0] * w + ms.ops.narrow(x, 0, 1, 2).sum()).sum(), a, b, pos=(0, 1))


@case("functional/diff_forms")
def _(ms):
    x = A(ms, [1.0, 3.0, 6.0, 10.0])
    return (ms.ops.diff(x), ms.ops.diff(ms.Tensor(np.arange(6, dtype=np.float32).reshape(2, 3)), axis=0),
            ms.ops.diff(x, prepend=A(ms, [0.0])), ms.ops.diff(A(ms, [1, 3, 6], np.int32)))


@case("functional/tril_triu_indices")
def _(ms):
    return ms.ops.tril_indices(3, 3), ms.ops.triu_indices(3, 4, 1)


# -- scatter / gather / selection ------------------------------------------------------------------
@case("functional/scatter_nd_accumulates")
def _(ms):
    idx = A(ms, [[0], [2], [0]], np.int32)
    return (ms.ops.scatter_nd(idx, A(ms, [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]), (4, 2)),
            ms.ops.scatter_nd(A(ms, [[0, 1], [2, 0]], np.int64), A(ms, [1, 2], np.int32), (3, 2)))


@case("functional/scatter_nd_out_of_range", raises=True)
def _(ms):
    return ms.ops.scatter_nd(A(ms, [[5]], np.int32), A(ms, [[1.0, 2.0]]), (4, 2))


@case("functional/tensor_scatter_family")
def _(ms):
    base = ms.Tensor(np.full((4, 2), 2.0, np.float32))
    idx, upd = A(ms, [[0], [2]], np.int32), A(ms, [[1.0, 4.0], [3.0, 0.5]])
    o = ms.ops
    return (o.tensor_scatter_update(base, idx, upd), o.tensor_scatter_add(base, idx, upd),
            o.tensor_scatter_sub(base, idx, upd), o.tensor_scatter_mul(base, idx, upd),
            o.tensor_scatter_div(base, idx, upd), o.tensor_scatter_max(base, idx, upd),
            o.tensor_scatter_min(base, idx, upd))


@case("functional/tensor_scatter_add_repeated")
def _(ms):
    return ms.ops.tensor_scatter_add(ms.Tensor(np.ones((4, 2), np.float32)), A(ms, [[0], [2], [0]], np.int32),
                                     A(ms, [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]))


@case("functional/tensor_scatter_update_out_of_range", raises=True)
def _(ms):
    return ms.ops.tensor_scatter_update(ms.Tensor(np.ones((4, 2), np.float32)), A(ms, [[7]], np.int32), A(ms, [[1.0, 2.0]]))


@case("functional/tensor_scatter_dtype_mismatch", raises=True)
def _(ms):
    return ms.ops.tensor_scatter_add(ms.Tensor(np.ones((4, 2), np.float32)), A(ms, [[1]], np.int32),
                                     A(ms, [[1.0, 2.0]], np.float64))


@case("functional/grad_tensor_scatter_update_add")
def _(ms):
    base, idx, upd = R(ms, 4, 2), A(ms, [[0], [2]], np.int32), R(ms, 2, 2, seed=1)
    w = R(ms, 4, 2, seed=2)
    return (G(ms, lambda b, u: (ms.ops.tensor_scatter_update(b, idx, u) * w).sum(), base, upd, pos=(0, 1)),
            G(ms, lambda b, u: (ms.ops.tensor_scatter_add(b, idx, u) * w).sum(), base, upd, pos=(0, 1)))


@case("functional/gather_nd_forms")
def _(ms):
    x = ms.Tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    return ms.ops.gather_nd(x, A(ms, [[0, 1], [1, 2]], np.int32)), ms.ops.gather_nd(x, A(ms, [[1], [0]], np.int32))


@case("functional/masked_select_forms")
def _(ms):
    x = ms.Tensor(np.array([[3.0, 1.0, 2.0, 1.0], [0.0, 5.0, 5.0, 4.0], [2.0, 2.0, 7.0, 1.0]], np.float32))
    return ms.ops.masked_select(x, x > 2), ms.ops.masked_select(x, A(ms, [True, False, True, False], np.bool_))


@case("functional/grad_masked_select")
def _(ms):
    x = R(ms, 3, 4)
    return G(ms, lambda a: (ms.ops.masked_select(a, a > 0) ** 2).sum(), x)


@case("functional/nonzero_argwhere")
def _(ms):
    x = ms.Tensor(np.array([[0.0, 2.0, 0.0], [1.0, 0.0, 3.0]], np.float32))
    return ms.ops.nonzero(x), ms.ops.nonzero(A(ms, [0, 1, 0, 2], np.int32)), ms.ops.argwhere(x)


@case("functional/unique_first_occurrence_order")
def _(ms):
    return ms.ops.unique(A(ms, [3, 1, 2, 1, 3], np.int32)), ms.ops.unique(A(ms, [[3.0, 1.0], [2.0, 1.0]]))


# -- reductions and scans ----------------------------------------------------------------------------
@case("functional/median_forms")
def _(ms):
    x = ms.Tensor(np.array([[3.0, 1.0, 2.0, 1.0], [0.0, 5.0, 5.0, 4.0], [2.0, 2.0, 7.0, 1.0]], np.float32))
    return (ms.ops.median(x), ms.ops.median(x, axis=0), ms.ops.median(x, 1, True), ms.ops.median(A(ms, 3.0)),
            ms.ops.median(A(ms, [[3, 1, 2], [5, 5, 4]], np.int32)))


@case("functional/median_float16_rejected", raises=True)
def _(ms):
    return ms.ops.median(A(ms, [1.0, 2.0], np.float16))


@case("functional/grad_median")
def _(ms):
    x = ms.Tensor(np.array([[1.0, 1.0], [1.0, 2.0], [1.0, 3.0]], np.float32))
    return G(ms, lambda a: ms.ops.median(a, 0)[0].sum(), x), G(ms, lambda a: ms.ops.median(a)[0].sum(), x)


@case("functional/cummax_cummin")
def _(ms):
    return (ms.ops.cummax(A(ms, [[1.0, 3.0, 2.0, 3.0], [0.0, -1.0, 4.0, 4.0]]), 1),
            ms.ops.cummin(A(ms, [[1.0, 3.0, 0.0, 0.0], [0.0, -1.0, 4.0, -1.0]]), axis=1),
            ms.ops.cummax(A(ms, [1, 3, 2], np.int32), 0))


@case("functional/count_nonzero_nansum")
def _(ms):
    x = ms.Tensor(np.array([[0.0, 2.0, 0.0, 3.0], [1.0, 0.0, 0.0, 5.0]], np.float32))
    return (ms.ops.count_nonzero(x), ms.ops.count_nonzero(x, 1), ms.ops.count_nonzero(x, axis=(0, 1), keep_dims=True),
            ms.ops.count_nonzero(x, 0, dtype=ms.int64), ms.ops.nansum(A(ms, [1.0, np.nan, 2.0])))


@case("functional/searchsorted_bincount")
def _(ms):
    seq, v = A(ms, [1.0, 3.0, 5.0, 7.0]), A(ms, [3.0, 6.0, 9.0])
    return (ms.ops.searchsorted(seq, v), ms.ops.searchsorted(seq, v, right=True), ms.ops.searchsorted(seq, v, side="right"),
            ms.ops.searchsorted(A(ms, [[1.0, 3.0, 5.0], [2.0, 4.0, 6.0]]), A(ms, [[3.0], [3.0]])),
            ms.ops.bincount(A(ms, [0, 1, 1, 3], np.int32)),
            ms.ops.bincount(A(ms, [0, 1, 1, 3], np.int32), A(ms, [0.5, 1.0, 2.0, 3.0]), minlength=6))


# -- interpolate -----------------------------------------------------------------------------------
def _img(ms):
    return ms.Tensor(np.arange(2 * 1 * 3 * 4, dtype=np.float32).reshape(2, 1, 3, 4))


@case("functional/interpolate_nearest")
def _(ms):
    return ms.ops.interpolate(_img(ms), size=(5, 7)), ms.ops.interpolate(_img(ms), size=(2, 3), mode="nearest")


@case("functional/interpolate_bilinear_half_pixel", rtol=1e-5, atol=1e-5)
def _(ms):
    return (ms.ops.interpolate(_img(ms), size=(5, 7), mode="bilinear"),
            ms.ops.interpolate(_img(ms), size=(2, 3), mode="bilinear"),
            ms.ops.interpolate(_img(ms), size=5, mode="bilinear"))


@case("functional/interpolate_bilinear_align_corners", rtol=1e-5, atol=1e-5)
def _(ms):
    return (ms.ops.interpolate(_img(ms), size=(5, 7), mode="bilinear", align_corners=True),
            ms.ops.interpolate(_img(ms), size=(2, 3), mode="bilinear", align_corners=True))


@case("functional/interpolate_downsample", rtol=1e-5, atol=1e-5)
def _(ms):
    x = ms.Tensor(np.arange(36, dtype=np.float32).reshape(1, 1, 6, 6))
    return ms.ops.interpolate(x, size=(4, 3), mode="bilinear"), ms.ops.interpolate(x, size=(4, 3), mode="nearest")


@case("functional/interpolate_scale_factor_recompute", rtol=1e-5, atol=1e-5)
def _(ms):
    x3 = ms.Tensor(np.arange(10, dtype=np.float32).reshape(1, 2, 5))
    return (ms.ops.interpolate(_img(ms), scale_factor=1.7, mode="bilinear", recompute_scale_factor=True),
            ms.ops.interpolate(_img(ms), scale_factor=(1.5, 0.5), mode="nearest", recompute_scale_factor=True),
            ms.ops.interpolate(x3, scale_factor=1.5, mode="linear", recompute_scale_factor=True))


@case("functional/interpolate_linear_3d", rtol=1e-5, atol=1e-5)
def _(ms):
    x3 = ms.Tensor(np.arange(10, dtype=np.float32).reshape(1, 2, 5))
    return (ms.ops.interpolate(x3, size=8), ms.ops.interpolate(x3, size=8, mode="linear"),
            ms.ops.interpolate(x3, size=8, mode="linear", align_corners=True))


@case("functional/interpolate_float64_float16", rtol=1e-3, atol=1e-3)
def _(ms):
    return (ms.ops.interpolate(R(ms, 1, 1, 2, 2, dtype=np.float64), size=(3, 3), mode="bilinear"),
            ms.ops.interpolate(R(ms, 1, 1, 2, 2, dtype=np.float16), size=(3, 3), mode="bilinear"))


@case("functional/grad_interpolate", rtol=1e-5, atol=1e-5)
def _(ms):
    w = R(ms, 2, 1, 5, 7, seed=3)
    f = ms.ops.interpolate
    return (G(ms, lambda a: (f(a, size=(5, 7), mode="bilinear") * w).sum(), _img(ms)),
            G(ms, lambda a: (f(a, size=(5, 7), mode="bilinear", align_corners=True) * w).sum(), _img(ms)),
            G(ms, lambda a: (f(a, size=(5, 7)) * w).sum(), _img(ms)))


@case("functional/interpolate_scale_without_recompute", raises=True)
def _(ms):
    return ms.ops.interpolate(_img(ms), scale_factor=2.0, mode="bilinear")


@case("functional/interpolate_size_and_scale", raises=True)
def _(ms):
    return ms.ops.interpolate(_img(ms), size=(2, 2), scale_factor=2.0)


@case("functional/interpolate_nearest_align_corners", raises=True)
def _(ms):
    return ms.ops.interpolate(_img(ms), size=(5, 7), mode="nearest", align_corners=True)


@case("functional/interpolate_int_rejected", raises=True)
def _(ms):
    return ms.ops.interpolate(ms.Tensor(np.ones((1, 1, 2, 2), np.int32)), size=(3, 3))


@case("functional/interpolate_bilinear_3d_rejected", raises=True)
def _(ms):
    return ms.ops.interpolate(R(ms, 1, 2, 5), size=4, mode="bilinear")
