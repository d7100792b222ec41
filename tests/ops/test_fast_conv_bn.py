"""The fast conv2d and batch_norm kernels (issue 14) against independent references.

conv2d: the chunked kernels the primitives run (`_conv2d_fast`, `_backprop_input_fast`,
`_backprop_filter_fast`) against (a) a naive float64 loop over output pixels written here,
(b) the plain whole-batch im2col kernels kept in conv_ops.py, and (c) float64 central finite
differences of the naive reference (the gradients reach the kernels through ms.value_and_grad).
Cases cover strides, asymmetric pads, dilation, groups, 1x1 stride-2, the stride-1 transposed-conv
path of the input gradient and its col2im fallback, and batches that split into several chunks
with a remainder; float32 and float64.

batch_norm: the fused training backward (`_batch_norm_grad_fast`) against the plain shared
normalize backward and against a float64 formula written out here, and the gradients of
ops.batch_norm against finite differences.
"""
import numpy as np
import pytest

import minispore as ms
from minispore import ops
from minispore.ops.prims import conv_ops as CO
from minispore.ops.prims import norm_ops as NO

rng = np.random.default_rng(14)


def naive_conv2d(x, w, stride, pads, dilation, groups):
    """out[n, o, p, q] = sum_{c, i, j} w[o, c, i, j] * xpad[n, g*Cg + c, p*sh + i*dh, q*sw + j*dw],
    one output pixel at a time (float64)."""
    x, w = x.astype(np.float64), w.astype(np.float64)
    pt, pb, pl, pr = pads
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    n, cout, cg, kh, kw = x.shape[0], w.shape[0], w.shape[1], w.shape[2], w.shape[3]
    (sh, sw), (dh, dw) = stride, dilation
    oh = (xp.shape[2] - (kh - 1) * dh - 1) // sh + 1
    ow = (xp.shape[3] - (kw - 1) * dw - 1) // sw + 1
    per_group = cout // groups
    out = np.zeros((n, cout, oh, ow))
    for o in range(cout):
        g = o // per_group
        for p in range(oh):
            for q in range(ow):
                patch = xp[:, g * cg:(g + 1) * cg, p * sh:p * sh + (kh - 1) * dh + 1:dh, q * sw:q * sw + (kw - 1) * dw + 1:dw]
                out[:, o, p, q] = np.einsum("ncij,cij->n", patch, w[o])
    return out


# (x shape, w shape, stride, pads (top, bottom, left, right), dilation, groups)
CASES = [
    ((3, 4, 8, 8), (6, 4, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),      # the hot 3x3 stride-1 pad-1 case
    ((3, 4, 8, 8), (6, 4, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 1),      # 3x3 stride 2 (col2im path)
    ((3, 4, 8, 8), (6, 4, 1, 1), (2, 2), (0, 0, 0, 0), (1, 1), 1),      # 1x1 stride-2 downsample
    ((2, 4, 7, 9), (4, 4, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1),      # 1x1 stride 1, no padding
    ((2, 6, 9, 8), (4, 3, 3, 3), (1, 1), (2, 2, 2, 2), (2, 2), 2),      # dilation and groups
    ((2, 4, 7, 8), (6, 2, 2, 3), (2, 1), (0, 1, 2, 0), (1, 1), 2),      # rect kernel, asymmetric pad
    ((2, 3, 6, 7), (2, 3, 3, 3), (1, 1), (0, 0, 0, 0), (1, 1), 1),      # valid stride 1
    ((2, 3, 6, 6), (2, 3, 3, 3), (1, 1), (3, 0, 0, 3), (1, 1), 1),      # pad wider than kernel - 1: col2im fallback
    ((2, 2, 9, 9), (3, 2, 3, 3), (3, 2), (1, 0, 0, 1), (1, 2), 1),      # floored last window
]


def _ids(case):
    return f"x{case[0]}-w{case[1]}-s{case[2]}-p{case[3]}-d{case[4]}-g{case[5]}"


def _make(case, dtype, n=None):
    xs, ws, stride, pads, dil, groups = case
    if n is not None:
        xs = (n,) + xs[1:]
    x = rng.standard_normal(xs).astype(dtype)
    w = rng.standard_normal(ws).astype(dtype)
    return x, w, stride, pads, dil, groups


@pytest.mark.parametrize("row_windows", [True, False], ids=["row-windows", "windows"])
@pytest.mark.parametrize("chunk_columns", [40, 130])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_fast_conv_kernels_equal_naive_and_plain(case, dtype, chunk_columns, row_windows, monkeypatch):
    # few output positions per chunk: 5 images split into chunks of 1 or 2 (a partial last one) or all
    monkeypatch.setattr(CO, "_CHUNK_COLUMNS", chunk_columns)
    # both im2col layouts for the stride-1 cases (the row windows apply only to stride 1)
    monkeypatch.setattr(CO, "_ROW_WINDOWS_MIN_WIDTH", 1 if row_windows else 10 ** 9)
    x, w, stride, pads, dil, groups = _make(case, dtype, n=5)
    tol = 1e-4 if dtype == np.float32 else 1e-11
    ref = naive_conv2d(x, w, stride, pads, dil, groups)
    y = CO._conv2d_fast(x, w, stride, pads, dil, groups)
    np.testing.assert_allclose(y, ref, rtol=tol, atol=tol)
    np.testing.assert_allclose(y, CO._conv2d_plain(x, w, stride, pads, dil, groups), rtol=tol, atol=tol)
    dy = rng.standard_normal(ref.shape).astype(dtype)
    dx = CO._backprop_input_fast(dy, w, x.shape, stride, pads, dil, groups)
    dw = CO._backprop_filter_fast(dy, x, w.shape, stride, pads, dil, groups)
    assert dx.shape == x.shape and dw.shape == w.shape
    np.testing.assert_allclose(dx, CO._backprop_input_plain(dy, w, x.shape, stride, pads, dil, groups), rtol=tol, atol=tol)
    np.testing.assert_allclose(dw, CO._backprop_filter_plain(dy, x, w.shape, stride, pads, dil, groups),
                               rtol=tol, atol=tol * 10)
    # the adjoint identities <conv(x, w), dy> = <x, dx> = <w, dw>, in float64 from the naive forward
    inner = float(np.sum(ref * dy))
    np.testing.assert_allclose(float(np.sum(x.astype(np.float64) * dx)), inner, rtol=tol * 10)
    np.testing.assert_allclose(float(np.sum(w.astype(np.float64) * dw)), inner, rtol=tol * 10)


def _conv_call(case):
    _, _, stride, pads, dil, groups = case
    return lambda x, w: ops.conv2d(x, w, None, stride, "pad" if any(pads) else "valid", pads if any(pads) else 0,
                                   dil, groups)


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_conv2d_gradients_match_finite_differences_of_naive(case):
    x, w, stride, pads, dil, groups = _make(case, np.float64)
    dy = rng.standard_normal(naive_conv2d(x, w, stride, pads, dil, groups).shape)
    conv = _conv_call(case)
    out, (gx, gw) = ms.value_and_grad(lambda a, b: (conv(a, b) * ms.Tensor(dy)).sum(), (0, 1))(ms.Tensor(x), ms.Tensor(w))
    np.testing.assert_allclose(out.asnumpy(), np.sum(naive_conv2d(x, w, stride, pads, dil, groups) * dy), rtol=1e-12)

    def loss(a, b):
        return np.sum(naive_conv2d(a, b, stride, pads, dil, groups) * dy)

    eps = 1e-6
    for arr, grad, which in ((x, gx.asnumpy(), 0), (w, gw.asnumpy(), 1)):
        for _ in range(3):                                      # random directions
            v = rng.standard_normal(arr.shape)
            args_p = [x, w]
            args_m = [x, w]
            args_p[which] = arr + eps * v
            args_m[which] = arr - eps * v
            fd = (loss(*args_p) - loss(*args_m)) / (2 * eps)
            np.testing.assert_allclose(np.sum(grad * v), fd, rtol=1e-6, atol=1e-8)


def test_conv2d_float32_training_shapes_match_float64():
    """The ResNet hot shapes (a 3x3 stride-1 block conv and the 1x1 stride-2 downsample), batch
    large enough to split into chunks: float32 kernels against the float64 naive result."""
    for case in [((6, 8, 12, 12), (8, 8, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),
                 ((6, 8, 12, 12), (16, 8, 1, 1), (2, 2), (0, 0, 0, 0), (1, 1), 1)]:
        x, w, stride, pads, dil, groups = _make(case, np.float32)
        ref = naive_conv2d(x, w, stride, pads, dil, groups)
        np.testing.assert_allclose(CO._conv2d_fast(x, w, stride, pads, dil, groups), ref, rtol=1e-4, atol=1e-4)
        dy = rng.standard_normal(ref.shape).astype(np.float32)
        dx64 = CO._backprop_input_plain(dy.astype(np.float64), w.astype(np.float64), x.shape, stride, pads, dil, groups)
        dw64 = CO._backprop_filter_plain(dy.astype(np.float64), x.astype(np.float64), w.shape, stride, pads, dil, groups)
        np.testing.assert_allclose(CO._backprop_input_fast(dy, w, x.shape, stride, pads, dil, groups), dx64,
                                   rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(CO._backprop_filter_fast(dy, x, w.shape, stride, pads, dil, groups), dw64,
                                   rtol=1e-4, atol=1e-3)


def test_conv_transpose2d_through_fast_input_gradient():
    """conv_transpose2d is conv2d_backprop_input: stride 1 (the forward-conv path) and stride 2 with
    output_padding (col2im), against the naive forward's adjoint <conv(z, w), x> = <z, convT(x, w)>."""
    for stride, out_pad in ((1, 0), (2, 1)):
        x = rng.standard_normal((2, 4, 5, 5))
        w = rng.standard_normal((4, 3, 3, 3))
        y = ops.conv_transpose2d(ms.Tensor(x), ms.Tensor(w), None, stride, 1, out_pad).asnumpy()
        z = rng.standard_normal(y.shape)
        fwd = naive_conv2d(z, w, (stride, stride), (1, 1, 1, 1), (1, 1), 1)
        assert fwd.shape == x.shape
        np.testing.assert_allclose(np.sum(fwd * x), np.sum(z * y), rtol=1e-10)


# -------------------------------------------------------------------------------------------------
# batch_norm (training mode)
def bn_grad_formula(dy, x, w, eps):
    """float64: dx = w * rstd * (dy - mean(dy) - xhat * mean(dy * xhat)), dw = sum(dy * xhat), db = sum(dy)."""
    dy, x = dy.astype(np.float64), x.astype(np.float64)
    axes = (0,) + tuple(range(2, x.ndim))
    shp = (1, -1) + (1,) * (x.ndim - 2)
    mu = x.mean(axis=axes, keepdims=True)
    rstd = 1.0 / np.sqrt(((x - mu) ** 2).mean(axis=axes, keepdims=True) + eps)
    xhat = (x - mu) * rstd
    wv = np.ones(x.shape[1]) if w is None else w.astype(np.float64)
    dx = wv.reshape(shp) * rstd * (dy - dy.mean(axis=axes, keepdims=True)
                                   - xhat * (dy * xhat).mean(axis=axes, keepdims=True))
    return dx, (dy * xhat).sum(axis=axes), dy.sum(axis=axes)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(8, 3), (4, 3, 5), (6, 4, 5, 5), (2, 3, 2, 3, 2)])
@pytest.mark.parametrize("with_weight", [True, False])
def test_fast_batch_norm_grad_equals_plain_and_formula(shape, dtype, with_weight):
    x = (rng.standard_normal(shape) * 3 + 2).astype(dtype)
    dy = rng.standard_normal(shape).astype(dtype)
    w = rng.uniform(0.5, 1.5, shape[1]).astype(dtype) if with_weight else None
    tol = 2e-4 if dtype == np.float32 else 1e-11
    fast = NO._batch_norm_grad_fast(dy, x, w, 1e-5)
    plain = NO._batch_norm_grad_plain(dy, x, w, 1e-5)
    ref = bn_grad_formula(dy, x, w, 1e-5)
    for f, p, r in zip(fast, plain, ref):
        assert f.shape == r.shape
        np.testing.assert_allclose(f, p, rtol=tol, atol=tol)
        np.testing.assert_allclose(f, r, rtol=tol, atol=tol)


def test_batch_norm_training_gradients_match_finite_differences():
    x = rng.standard_normal((4, 3, 3, 3)) + 1.5
    w = rng.uniform(0.5, 1.5, 3)
    b = rng.standard_normal(3)
    dy = rng.standard_normal(x.shape)

    def fwd(a, wt, bs):
        mu = a.mean(axis=(0, 2, 3), keepdims=True)
        var = a.var(axis=(0, 2, 3), keepdims=True)
        return (a - mu) / np.sqrt(var + 1e-5) * wt.reshape(1, -1, 1, 1) + bs.reshape(1, -1, 1, 1)

    def loss_ms(a, wt, bs):
        y = ops.batch_norm(a, ms.Tensor(np.zeros(3)), ms.Tensor(np.ones(3)), wt, bs, training=True)
        return (y * ms.Tensor(dy)).sum()

    val, grads = ms.value_and_grad(loss_ms, (0, 1, 2))(ms.Tensor(x), ms.Tensor(w), ms.Tensor(b))
    np.testing.assert_allclose(val.asnumpy(), np.sum(fwd(x, w, b) * dy), rtol=1e-12)
    args = [x, w, b]
    eps = 1e-6
    for which, g in enumerate(grads):
        v = rng.standard_normal(args[which].shape)
        plus, minus = list(args), list(args)
        plus[which] = args[which] + eps * v
        minus[which] = args[which] - eps * v
        fd = (np.sum(fwd(*plus) * dy) - np.sum(fwd(*minus) * dy)) / (2 * eps)
        np.testing.assert_allclose(np.sum(g.asnumpy() * v), fd, rtol=1e-6, atol=1e-8)
