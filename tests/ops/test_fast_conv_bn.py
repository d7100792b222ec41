"""The fast conv2d and batch_norm kernels (issue 14) against independent references.

conv2d: the chunked kernels the primitives run (`_conv2d_fast`, `_backprop_input_fast`,
`_backprop_filter_fast`) against (a) a naive float64 loop over output pixels written here,
(b) the plain whole-batch im2col kernels kept in conv_ops.py, and (c) float64 central finite
differences of the naive reference (the gradients reach the kernels through ms.value_and_grad).
Cases cover strides, asymmetric pads, dilation, groups, 1x1 stride-2, the stride-1 transposed-conv
path of the input gradient and its col2im fallback, and batches that split into several chunks
with a remainder; float32 and float64.

batch_norm: the training forward and backward kernels (the C loops of _native_batch_norm where
they build, and the NumPy fast backward `_batch_norm_grad_fast`) against the plain shared
normalize kernels and float64 formulas written out here, and the gradients of ops.batch_norm
against finite differences.
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
    ((2, 3, 9, 10), (4, 3, 3, 2), (1, 1), (2, 1, 1, 2), (2, 3), 1),     # stride 1, dilated rect kernel, ungrouped
    ((1, 3, 5, 7), (2, 3, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),      # batch 1, non-square
    ((2, 5, 7, 6), (3, 5, 3, 3), (2, 2), (1, 1, 1, 1), (2, 1), 1),      # stride 2 with dilation (channels-last col2im)
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


@pytest.mark.parametrize("layout", ["row-windows", "windows", "channels-last", "row-gemms"])
@pytest.mark.parametrize("chunk_columns", [40, 130])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_fast_conv_kernels_equal_naive_and_plain(case, dtype, chunk_columns, layout, monkeypatch):
    # few output positions per chunk: 5 images split into chunks of 1 or 2 (a partial last one) or all
    monkeypatch.setattr(CO, "_CHUNK_COLUMNS", chunk_columns)
    # the same chunking for the channels-last kernels (their chunks are counted in column elements)
    monkeypatch.setattr(CO, "_CHANNELS_LAST_CHUNK", chunk_columns * case[1][1] * case[1][2] * case[1][3])
    # and for the kernel-row GEMMs (whole images per chunk: 1, or 2-3 with a partial last chunk)
    monkeypatch.setattr(CO, "_ROW_GEMMS_CHUNK", 2 * chunk_columns)
    # all three im2col layouts: NCHW row windows (stride 1 only), NCHW windows, and channels-last
    # (ungrouped kernels wider than 1x1 only; the other cases then run an NCHW layout)
    # (the kernel-row GEMMs: stride-1 ungrouped kernels taller than one row; the rest: an NCHW layout)
    monkeypatch.setattr(CO, "_ROW_WINDOWS_MIN_WIDTH", 1 if layout == "row-windows" else 10 ** 9)
    _force_layout(monkeypatch, layout)
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


def _force_layout(monkeypatch, layout):
    """Route every convolution the layout applies to through one family of fast kernels."""
    monkeypatch.setattr(CO, "_CHANNELS_LAST_MIN_RUN", 1 if layout == "channels-last" else 10 ** 9)
    monkeypatch.setattr(CO, "_ROW_GEMMS_MIN_POSITIONS", 1 if layout == "row-gemms" else 10 ** 9)
    monkeypatch.setattr(CO, "_ROW_GEMMS_MIN_DEPTH", 1)


@pytest.mark.parametrize("layout", ["nchw", "channels-last", "row-gemms"])
@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_conv2d_gradients_match_finite_differences_of_naive(case, layout, monkeypatch):
    _force_layout(monkeypatch, layout)
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
                 ((6, 8, 12, 12), (16, 8, 1, 1), (2, 2), (0, 0, 0, 0), (1, 1), 1),
                 # the default routing's other kernels: row GEMMs (16 channels, 32x32), channels-last
                 # stride 1 and 2 (32 channels)
                 ((2, 16, 32, 32), (16, 16, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),
                 ((3, 32, 8, 8), (32, 32, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),
                 ((3, 32, 8, 8), (64, 32, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 1)]:
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
    native = NO._batch_norm_grad_kernel(dy, x, w, 1e-5)       # the primitive's kernel: the C loops where built
    ref = bn_grad_formula(dy, x, w, 1e-5)
    for f, p, c, r in zip(fast, plain, native, ref):
        assert f.shape == r.shape and c.shape == r.shape and c.dtype == dtype
        np.testing.assert_allclose(f, p, rtol=tol, atol=tol)
        np.testing.assert_allclose(f, r, rtol=tol, atol=tol)
        np.testing.assert_allclose(c, r, rtol=tol, atol=tol)


def bn_forward_formula(x, w, b, eps):
    """float64: y = (x - mean) / sqrt(var + eps) * w + b per channel; (y, mean, unbiased var)."""
    x = x.astype(np.float64)
    axes = (0,) + tuple(range(2, x.ndim))
    shp = (1, -1) + (1,) * (x.ndim - 2)
    mu, var = x.mean(axis=axes), x.var(axis=axes)
    y = (x - mu.reshape(shp)) / np.sqrt(var.reshape(shp) + eps)
    if w is not None:
        y = y * w.astype(np.float64).reshape(shp)
    if b is not None:
        y = y + b.astype(np.float64).reshape(shp)
    n = x.size // x.shape[1]
    return y, mu, var * n / (n - 1)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(8, 3), (4, 3, 5), (6, 4, 5, 5), (1, 2, 3, 4), (2, 3, 2, 3, 2)])
@pytest.mark.parametrize("affine", ["both", "weight", "none"])
def test_batch_norm_training_kernel_equals_numpy_and_formula(shape, dtype, affine):
    """The training forward kernel (C loops where built) against the NumPy normalize kernel and a
    float64 formula; the mean is far from zero so a one-pass variance would lose digits."""
    x = (rng.standard_normal(shape) * 0.5 + 40).astype(dtype)
    w = rng.uniform(0.5, 1.5, shape[1]).astype(dtype) if affine != "none" else None
    b = rng.standard_normal(shape[1]).astype(dtype) if affine == "both" else None
    tol = 2e-4 if dtype == np.float32 else 1e-10
    y, mean, var = NO._batch_norm_kernel(x, w, b, None, None, True, 1e-5)
    ry, rmean, rvar = bn_forward_formula(x, w, b, 1e-5)
    assert y.shape == x.shape and y.dtype == dtype and mean.shape == (shape[1],)
    np.testing.assert_allclose(y, ry, rtol=tol, atol=tol)
    np.testing.assert_allclose(mean, rmean, rtol=tol)
    np.testing.assert_allclose(var, rvar, rtol=tol * 10)
    ny, nmean, nvar = NO._normalize_kernel(NO._bn_view(x.shape), x, w, b, 1e-5)
    np.testing.assert_allclose(y, ny, rtol=tol, atol=tol)


def test_native_batch_norm_library_builds_where_a_compiler_exists():
    """Otherwise the tests above would only see the NumPy fallback."""
    from minispore.common import native_build
    from minispore.ops.prims import _native_batch_norm as NB
    if native_build.find_compiler() is None or not native_build.native_kernels_enabled():
        pytest.skip("no C compiler / native kernels switched off: the NumPy kernels run")
    assert NB.LIBRARY.get() is not None
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    assert NB.batch_norm_train(x, None, None, 1e-5) is not None
    assert NB.batch_norm_train(x[:, :, ::2], None, None, 1e-5) is None          # a strided view: NumPy path
    assert NB.batch_norm_grad(x, x.astype(np.float64), None, 1e-5) is None      # mixed dtypes: NumPy path


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


def test_conv_routing_of_the_resnet_shapes():
    """The default routing sends the ResNet's convolutions to the kernels tuned for them (the
    kernels themselves are checked above): row GEMMs for the wide 16-channel 32x32 layers,
    channels-last for the deeper 3x3 layers and every stride-2 3x3 with 32+ input channels, and
    the NCHW kernels for the 3-channel stem, 1x1 and grouped convolutions."""
    assert CO._row_gemms((16, 16, 3, 3), (1, 1), 1, (32, 32))
    assert not CO._row_gemms((16, 3, 3, 3), (1, 1), 1, (32, 32))             # stem: GEMM depth 9
    assert not CO._row_gemms((32, 32, 3, 3), (1, 1), 1, (8, 8))              # small image
    assert not CO._row_gemms((16, 16, 3, 3), (2, 2), 1, (32, 32))            # stride 2
    assert CO._channels_last((64, 32, 3, 3), 1) and CO._channels_last((128, 128, 3, 3), 1)
    assert not CO._channels_last((32, 16, 1, 1), 1)                          # 1x1: NCHW GEMM
    assert not CO._channels_last((64, 32, 3, 3), 2)                          # grouped
