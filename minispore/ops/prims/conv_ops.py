"""2-d convolution (NCHW) by im2col + matmul, and its two backward primitives; conv1d and
conv_transpose2d on top of them.

Forward: every KH x KW window of the padded input becomes one column (`im2col`, a strided view
copied once into a (Cin*KH*KW, OH*OW) matrix per image and group); the convolution is then one
batched matrix product with the (Cout, Cin*KH*KW) weight matrix.

Backward: the convolution is bilinear in (input, weight), so its backward is two more linear maps,
kept as primitives with MindSpore's names:
  conv2d_backprop_input(dy, w)   = the adjoint in x  (weight^T @ dy, then col2im: scatter the
                                   columns back onto the pixels they were read from),
  conv2d_backprop_filter(dy, x)  = the adjoint in w  (dy @ im2col(x)^T).
Each of the three is the adjoint of another in one argument, so their backward rules are written
with each other: the set is closed under differentiation (grad-of-grad to any order).

Each primitive has two kernels: a plain one (`_*_plain`, whole batch at once: the readable
reference) and the fast one the primitive runs (`_*_fast`: the same products a cache-sized chunk
of images at a time, and the stride-1 input gradient as a convolution); see "Fast kernels" below.
The fast kernels route each convolution to one of three im2col layouts, by shape:
  * kernel-row GEMMs (`_row_gemms`: stride 1, ungrouped, wide images such as a CNN's first
    stages): KW shifted copies of the image instead of KH*KW, and KH GEMMs over views of them;
  * channels-last (`_channels_last`: ungrouped KxK kernels with C_in*KW >= 64, any stride: the
    deeper layers and the stride-2 downsampling convs): NHWC columns, copied in runs of KW*C;
  * NCHW (`_Columns`: everything else: the few-channel stem, 1x1 and grouped convolutions).
Which layout ran never changes the result beyond float rounding; tests/ops/test_fast_conv_bn.py
forces each one on every test case.
"""
from __future__ import annotations

import math

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ...common.grad_state import wants_grad
from .. import _check as C
from .. import costs
from .. import sharding_rules as SR
from ..primitive import AbstractTensor, defprim
from . import _nn_common as N
from ._nn_common import compute_dtype
from . import _windows as Wn


def _geometry(op, x_shape, w_shape, stride, pads, dilation, groups):
    """Check shapes and attributes; return the output shape."""
    n, cin, h, w = x_shape
    cout, cg, kh, kw = w_shape
    if groups < 1 or cin % groups or cout % groups:
        raise C.OpValueError(op, f"'groups' dividing both in_channels ({cin}) and out_channels ({cout})",
                             f"groups={groups}")
    if cg * groups != cin:
        raise C.OpValueError(op, f"weight of shape (C_out, C_in / groups = {cin // groups}, KH, KW)",
                             f"weight shape {tuple(w_shape)} for input shape {tuple(x_shape)}")
    oh = Wn.out_size(op, h, kh, stride[0], dilation[0], pads[0], pads[1])
    ow = Wn.out_size(op, w, kw, stride[1], dilation[1], pads[2], pads[3])
    return (n, cout, oh, ow)


def _check_pair(op, x, w):
    Wn.check_nchw(op, "input", x)
    Wn.check_nchw(op, "weight", w)
    N.floating(op, "input", x)
    if x.dtype is not w.dtype:
        raise C.OpTypeError(op, "'input' and 'weight' of the same dtype", f"{x.dtype} and {w.dtype}")


def _conv2d_infer(x, w, stride, pads, dilation, groups):
    _check_pair("conv2d", x, w)
    return AbstractTensor(_geometry("conv2d", x.shape, w.shape, stride, pads, dilation, groups), x.dtype)


def _im2col(x, w_shape, stride, pads, dilation, groups, out_hw):
    """(N, G, Cg*KH*KW, OH*OW) columns of the padded input (one copy of the window view)."""
    n, cin = x.shape[:2]
    _, cg, kh, kw = w_shape
    xp = Wn.pad_for_windows(x, pads, out_hw, (kh, kw), stride, dilation, 0)
    win = Wn.windows(xp, (kh, kw), stride, dilation, out_hw)                  # (N, Cin, OH, OW, KH, KW)
    win = win.reshape(n, groups, cg, out_hw[0], out_hw[1], kh, kw)
    return win.transpose(0, 1, 2, 5, 6, 3, 4).reshape(n, groups, cg * kh * kw, out_hw[0] * out_hw[1])


def _half_to_float32(*arrays):
    """float16/bfloat16 have no BLAS matmul in NumPy (and accumulate poorly): compute in float32."""
    return tuple(a.astype(compute_dtype(a), copy=False) for a in arrays)


def _conv2d_plain(x, w, stride, pads, dilation, groups):
    x, w = _half_to_float32(x, w)
    n = x.shape[0]
    cout = w.shape[0]
    _, _, oh, ow = _geometry("conv2d", x.shape, w.shape, stride, pads, dilation, groups)
    cols = _im2col(x, w.shape, stride, pads, dilation, groups, (oh, ow))
    wm = w.reshape(groups, cout // groups, -1)                                # (G, Cout/G, Cg*KH*KW)
    return (wm @ cols).reshape(n, cout, oh, ow)                                # (N, G, Cout/G, OH*OW)


def _backprop_input_infer(dy, w, x_shape, stride, pads, dilation, groups):
    op = "conv2d_backprop_input"
    Wn.check_nchw(op, "dout", dy)
    Wn.check_nchw(op, "weight", w)
    want = _geometry(op, x_shape, w.shape, stride, pads, dilation, groups)
    if tuple(dy.shape) != want:
        raise C.OpValueError(op, f"'dout' of shape {want}", f"shape {tuple(dy.shape)}")
    return AbstractTensor(x_shape, dy.dtype)


def _backprop_input_plain(dy, w, x_shape, stride, pads, dilation, groups):
    dy, w = _half_to_float32(dy, w)
    n, cin, h, wd = x_shape
    cout, cg, kh, kw = w.shape
    oh, ow = dy.shape[2:]
    # the padded input the windows scatter into (conv_transpose2d's output comes from stride/padding)
    C.output_fits("conv2d_backprop_input", (n, cin, h + pads[0] + pads[1], wd + pads[2] + pads[3]), dy.dtype)
    wm = w.reshape(groups, cout // groups, cg * kh * kw)
    dcols = wm.transpose(0, 2, 1) @ dy.reshape(n, groups, cout // groups, oh * ow)   # (N, G, Cg*KH*KW, OH*OW)
    dcols = dcols.reshape(n, cin, kh, kw, oh, ow).transpose(0, 1, 4, 5, 2, 3)
    dxp = Wn.scatter_windows(dcols, (h + pads[0] + pads[1], wd + pads[2] + pads[3]), stride, dilation)
    return Wn.crop(dxp, pads, (h, wd))


def _backprop_filter_infer(dy, x, w_shape, stride, pads, dilation, groups):
    op = "conv2d_backprop_filter"
    Wn.check_nchw(op, "dout", dy)
    Wn.check_nchw(op, "input", x)
    want = _geometry(op, x.shape, w_shape, stride, pads, dilation, groups)
    if tuple(dy.shape) != want:
        raise C.OpValueError(op, f"'dout' of shape {want}", f"shape {tuple(dy.shape)}")
    return AbstractTensor(w_shape, dy.dtype)


def _backprop_filter_plain(dy, x, w_shape, stride, pads, dilation, groups):
    dy, x = _half_to_float32(dy, x)
    n = x.shape[0]
    cout = w_shape[0]
    oh, ow = dy.shape[2:]
    cols = _im2col(x, w_shape, stride, pads, dilation, groups, (oh, ow))      # (N, G, Cg*KH*KW, OH*OW)
    dyr = dy.reshape(n, groups, cout // groups, oh * ow)
    return (dyr @ cols.transpose(0, 1, 3, 2)).sum(axis=0).reshape(w_shape)


# -------------------------------------------------------------------------------------------------
# Fast kernels. The plain kernels above build every column of the whole batch at once: for the
# early layers of a CNN that is a (Cin*KH*KW, N*OH*OW) matrix of tens of MB, so the im2col copy and
# the GEMM both run from main memory. The fast kernels below do the same arithmetic a chunk of
# images at a time, sized so one chunk's columns (about _CHUNK_COLUMNS output positions) stay in
# the L2 cache, with buffers reused across chunks. Inside a chunk the columns are laid out
# (Cin, KH, KW, images, OH, OW): every GEMM is then one 2-d product per group with the batch and
# the positions in one long dimension, and both backward GEMMs keep their large operand
# row-major (BLAS reads a transposed small operand, never a transposed large one).
# tests/ops/test_fast_conv_bn.py checks them against the plain kernels and a naive loop.
_CHUNK_COLUMNS = 1024
# Stride-1 convolutions with output rows at least this wide use the "row windows" im2col
# (`_row_windows`); narrower ones pay more for its wasted columns than they save on the copy.
_ROW_WINDOWS_MIN_WIDTH = 8


def _padded_hw(x_hw, kernel, stride, pads, dilation, out_hw):
    """The padded input extent the windows read (padding, plus what a floored last window skips)."""
    return tuple(max(x_hw[a] + pads[2 * a] + pads[2 * a + 1], (out_hw[a] - 1) * stride[a] + (kernel[a] - 1) * dilation[a] + 1)
                 for a in (0, 1))


def _chunks(n, positions):
    """(images per chunk, [(first, last + 1)]) for chunks of about _CHUNK_COLUMNS output positions."""
    nb = max(1, min(n, _CHUNK_COLUMNS // positions))
    return nb, [(i, min(i + nb, n)) for i in range(0, n, nb)]


class _Buffer:
    """One flat scratch array reused by every chunk; `take(shape)` is a C-contiguous view of its head."""

    def __init__(self, size, dtype):
        self.flat = np.empty(size, dtype)

    def take(self, shape):
        return self.flat[:math.prod(shape)].reshape(shape)


class _PaddedChunks:
    """Zero-padded chunks of x (N, C, H, W): the borders of one reused buffer are zeroed once and only
    the interior is written per chunk. Without padding, chunks are plain views of x (unless
    `spare_row`: one more zero row at the bottom, which `_row_windows` reads into)."""

    def __init__(self, x, pads, padded_hw, nb, spare_row=False):
        self.x, self.top, self.left = x, pads[0], pads[2]
        self.plain = tuple(padded_hw) == tuple(x.shape[2:]) and not any(pads) and not spare_row
        # the array the windows are read from: x itself, or the padded buffer of one chunk
        self.source = x if self.plain else np.zeros((nb, x.shape[1], padded_hw[0] + spare_row, padded_hw[1]), x.dtype)

    def load(self, n0, n1):
        """Make images n0:n1 ready in `source`; returns their (first, last + 1) index there."""
        if self.plain:
            return n0, n1
        h, w = self.x.shape[2:]
        self.source[:n1 - n0, :, self.top:self.top + h, self.left:self.left + w] = self.x[n0:n1]
        return 0, n1 - n0


def _window_view(xp, kernel, stride, dilation, out_hw):
    """The (C, KH, KW, images, OH, OW) windows of a padded chunk xp (images, C, Hp, Wp), as a strided
    view (no copy): element [c, i, j, n, oh, ow] = xp[n, c, oh*sh + i*dh, ow*sw + j*dw]."""
    s_n, s_c, s_h, s_w = xp.strides
    return as_strided(xp, (xp.shape[1], kernel[0], kernel[1], xp.shape[0], out_hw[0], out_hw[1]),
                      (s_c, dilation[0] * s_h, dilation[1] * s_w, s_n, stride[0] * s_h, stride[1] * s_w),
                      writeable=False)


def _row_windows(xp, kernel, dilation, oh):
    """Stride 1: the windows as a (C, KH, KW, images, OH*Wp) view in which every row is ONE
    contiguous run of the flattened padded chunk xp (images, C, Hp + 1, Wp): output position
    r*Wp + q of window (i, j) reads xp[n, c, r + i*dh, q + j*dw]. So the im2col copy moves long
    runs instead of OW-long pieces, at the price of computing Wp - OW wasted columns per output
    row (q >= OW wraps into the next row; the spare bottom row keeps the last run inside xp);
    the callers drop or zero them."""
    s_n, s_c, s_h, s_w = xp.strides
    return as_strided(xp, (xp.shape[1], kernel[0], kernel[1], xp.shape[0], oh * xp.shape[3]),
                      (s_c, dilation[0] * s_h, dilation[1] * s_w, s_n, s_w), writeable=False)


class _Columns:
    """The im2col columns of a conv2d's input, one chunk of images at a time: `get(n0, n1)` is a
    (G, Cg*KH*KW, images * OH * q) matrix (rows c, i, j; columns image, output row, q < `q`),
    q = OW, or Wp for the row-window layout (stride 1, wide rows)."""

    def __init__(self, x, kernel, stride, pads, dilation, groups, out_hw):
        n, cin, h, w = x.shape
        padded_hw = _padded_hw((h, w), kernel, stride, pads, dilation, out_hw)
        self.rows = tuple(stride) == (1, 1) and out_hw[1] >= _ROW_WINDOWS_MIN_WIDTH
        self.q = padded_hw[1] if self.rows else out_hw[1]
        self.nb, self.chunks = _chunks(n, out_hw[0] * self.q)
        self.padded = _PaddedChunks(x, pads, padded_hw, self.nb, spare_row=self.rows)
        self.kernel, self.stride, self.dilation, self.out_hw, self.groups = kernel, stride, dilation, out_hw, groups
        self.k = cin // groups * kernel[0] * kernel[1]
        self.buf = _Buffer(cin * kernel[0] * kernel[1] * self.nb * out_hw[0] * self.q, x.dtype)
        # the window view is built once (as_strided is slow to call) over every image of the source;
        # a chunk's windows are a slice of its image axis (axis 3)
        src = self.padded.source
        self.windows = (_row_windows(src, kernel, dilation, out_hw[0]) if self.rows
                        else _window_view(src, kernel, stride, dilation, out_hw))

    def get(self, n0, n1):
        a, b = self.padded.load(n0, n1)
        win = self.windows[:, :, :, a:b]
        cols = self.buf.take(win.shape)
        np.copyto(cols, win)
        return cols.reshape(self.groups, self.k, (n1 - n0) * self.out_hw[0] * self.q)


def _conv2d_fast(x, w, stride, pads, dilation, groups):
    """conv2d: per chunk, columns (G, Cg*KH*KW, images*OH*q) and one GEMM per group."""
    x, w = _half_to_float32(x, w)
    n = x.shape[0]
    cout, cg, kh, kw = w.shape
    oh, ow = _geometry("conv2d", x.shape, w.shape, stride, pads, dilation, groups)[2:]
    if _row_gemms(w.shape, stride, groups, (oh, ow)):
        return _conv2d_row_gemms(x, w, pads, dilation, (oh, ow))
    if _channels_last(w.shape, groups):
        return _conv2d_channels_last(x, w, stride, pads, dilation, (oh, ow))
    cols = _Columns(x, (kh, kw), stride, pads, dilation, groups, (oh, ow))
    q = cols.q
    y_buf = _Buffer(cout * cols.nb * oh * q, x.dtype)
    wm = w.reshape(groups, cout // groups, cg * kh * kw)
    out = np.empty((n, cout, oh, ow), x.dtype)
    for n0, n1 in cols.chunks:
        m = n1 - n0
        y = np.matmul(wm, cols.get(n0, n1), out=y_buf.take((groups, cout // groups, m * oh * q)))
        out[n0:n1] = y.reshape(cout, m, oh, q)[..., :ow].transpose(1, 0, 2, 3)
    return out


def _backprop_filter_fast(dy, x, w_shape, stride, pads, dilation, groups):
    """dW^T (G, Cg*KH*KW, Cout/G) accumulated over chunks as columns @ dy^T (the columns, the large
    operand, row-major); transposed to (Cout, Cg, KH, KW) once at the end."""
    dy, x = _half_to_float32(dy, x)
    n, cout, oh, ow = dy.shape
    _, cg, kh, kw = w_shape
    cog = cout // groups
    if _row_gemms(w_shape, stride, groups, (oh, ow)):
        return _backprop_filter_row_gemms(dy, x, w_shape, pads, dilation)
    if _channels_last(w_shape, groups):
        return _backprop_filter_channels_last(dy, x, w_shape, stride, pads, dilation)
    cols = _Columns(x, (kh, kw), stride, pads, dilation, groups, (oh, ow))
    q = cols.q
    dy_buf = _Buffer(cout * cols.nb * oh * q, x.dtype)
    dwt = np.zeros((groups, cg * kh * kw, cog), x.dtype)
    for n0, n1 in cols.chunks:
        m = n1 - n0
        d = dy_buf.take((cout, m, oh, q))
        d[..., :ow] = dy[n0:n1].transpose(1, 0, 2, 3)
        d[..., ow:] = 0                                  # the row windows' wasted columns add nothing
        dwt += cols.get(n0, n1) @ d.reshape(groups, cog, m * oh * q).transpose(0, 2, 1)
    return np.ascontiguousarray(dwt.transpose(0, 2, 1)).reshape(w_shape)


def _transposed_conv_pads(x_shape, w_shape, dy_hw, stride, pads, dilation):
    """For stride 1, the input gradient is a stride-1 convolution of dy with the flipped,
    channel-transposed weight and padding dilation*(K-1) - pad. Those pads, or None where that
    does not apply (stride > 1, or padding wider than the kernel)."""
    if tuple(stride) != (1, 1):
        return None
    kh, kw = w_shape[2:]
    tp = (dilation[0] * (kh - 1) - pads[0], dilation[0] * (kh - 1) - pads[1],
          dilation[1] * (kw - 1) - pads[2], dilation[1] * (kw - 1) - pads[3])
    fits = (dy_hw[0] + tp[0] + tp[1] - dilation[0] * (kh - 1) == x_shape[2]
            and dy_hw[1] + tp[2] + tp[3] - dilation[1] * (kw - 1) == x_shape[3])
    return tp if min(tp) >= 0 and fits else None


def _backprop_input_fast(dy, w, x_shape, stride, pads, dilation, groups):
    """Stride 1: a forward convolution of dy (`_transposed_conv_pads`), an im2col copy instead of a
    scatter. Unpadded 1x1: one GEMM, written onto the strided pixels. Long window rows: the
    channels-last col2im (`_backprop_input_channels_last`). Otherwise per chunk: columns = W^T @ dy
    (one GEMM per group), then col2im as KH*KW strided adds (within one kernel offset the windows
    never overlap, so `+=` is exact)."""
    dy, w = _half_to_float32(dy, w)
    n, cin, h, wd = x_shape
    cout, cg, kh, kw = w.shape
    oh, ow = dy.shape[2:]
    sh, sw = stride
    dh, dw = dilation
    cog, k, p = cout // groups, cg * kh * kw, oh * ow
    padded_hw = _padded_hw((h, wd), (kh, kw), stride, pads, dilation, (oh, ow))
    C.output_fits("conv2d_backprop_input", (n, cin) + padded_hw, dy.dtype)
    tp = _transposed_conv_pads(x_shape, w.shape, (oh, ow), stride, pads, dilation)
    if tp is not None:
        # w_flip[g*Cg + c, o, i, j] = w[g*Cog + o, c, KH-1-i, KW-1-j]
        w_flip = w.reshape(groups, cog, cg, kh, kw).transpose(0, 2, 1, 3, 4)[:, :, :, ::-1, ::-1]
        w_flip = np.ascontiguousarray(w_flip).reshape(groups * cg, cog, kh, kw)
        return _conv2d_fast(dy, w_flip, (1, 1), tp, dilation, groups)
    if kh == kw == 1 and groups == 1 and not any(pads):
        # a 1x1 (e.g. stride-2 downsample) convolution reads each input pixel at most once: its input
        # gradient is W^T @ dy placed on the strided pixels, zeros elsewhere (no col2im needed)
        dx = np.zeros(x_shape, dy.dtype)
        wt1 = np.ascontiguousarray(w.reshape(cout, cin).T)
        dx[:, :, :(oh - 1) * sh + 1:sh, :(ow - 1) * sw + 1:sw] = (wt1 @ dy.reshape(n, cout, p)).reshape(n, cin, oh, ow)
        return dx
    if _channels_last(w.shape, groups):
        return _backprop_input_channels_last(dy, w, x_shape, stride, pads, dilation)
    nb, chunks = _chunks(n, p)
    wt = np.ascontiguousarray(w.reshape(groups, cog, k).transpose(0, 2, 1))        # (G, Cg*KH*KW, Cog)
    dy_buf, cols_buf = _Buffer(cout * nb * p, dy.dtype), _Buffer(cin * kh * kw * nb * p, dy.dtype)
    acc_buf = _Buffer(cin * nb * padded_hw[0] * padded_hw[1], dy.dtype)
    dx = np.empty(x_shape, dy.dtype)
    pt, pl = pads[0], pads[2]
    for n0, n1 in chunks:
        m = n1 - n0
        d = dy_buf.take((cout, m, oh, ow))
        np.copyto(d, dy[n0:n1].transpose(1, 0, 2, 3))
        cols = np.matmul(wt, d.reshape(groups, cog, m * p), out=cols_buf.take((groups, k, m * p)))
        cols = cols.reshape(cin, kh, kw, m, oh, ow)
        acc = acc_buf.take((cin, m) + padded_hw)
        acc.fill(0)
        for i in range(kh):
            for j in range(kw):
                acc[:, :, i * dh:i * dh + (oh - 1) * sh + 1:sh, j * dw:j * dw + (ow - 1) * sw + 1:sw] += cols[:, i, j]
        dx[n0:n1] = acc[:, :, pt:pt + h, pl:pl + wd].transpose(1, 0, 2, 3)
    return dx


# -------------------------------------------------------------------------------------------------
# Kernel-row GEMMs (stride 1, ungrouped, large images). With one zero-padded image flattened to
# (C, Hp*Wp) rows, output position r*Wp + q of kernel offset (i, j) reads flat position
# (r + i*dh)*Wp + q + j*dw: a shift. So KW shifted copies of the image, R[(c, j), t] = flat[c, t + j*dw]
# (a (C*KW, Hp*Wp) matrix), hold the im2col columns of EVERY kernel row: those of row i are the view
# R[:, i*dh*Wp : i*dh*Wp + OH*Wp] (no copy). The convolution is then KH GEMMs with K = C*KW summed,
# and the im2col copy shrinks from KH*KW to KW copies of the input. As with the row windows, the
# Wp - OW columns per output row that wrap into the next row are computed and dropped (the filter
# gradient zeroes their dy). A chunk is a few whole images (_ROW_GEMMS_CHUNK positions): its
# columns stay in L2.
# Used where an image has at least _ROW_GEMMS_MIN_POSITIONS outputs (the early, wide layers) and a
# window row is long enough for a useful GEMM depth (C*KW >= _ROW_GEMMS_MIN_DEPTH).
# Plain references: `_conv2d_plain`, `_backprop_filter_plain` (the whole-batch im2col GEMM).
_ROW_GEMMS_MIN_POSITIONS = 512
_ROW_GEMMS_MIN_DEPTH = 32
_ROW_GEMMS_CHUNK = 1024              # output rows x Wp per chunk (whole images; at least one)


def _row_gemms(w_shape, stride, groups, out_hw):
    """Use the kernel-row GEMM kernels for this stride-1 convolution?"""
    _, cg, kh, kw = w_shape
    return (groups == 1 and tuple(stride) == (1, 1) and kh > 1 and cg * kw >= _ROW_GEMMS_MIN_DEPTH
            and out_hw[0] * out_hw[1] >= _ROW_GEMMS_MIN_POSITIONS)


class _ShiftedRows:
    """The KW shifted copies of a chunk of zero-padded images: `get(n0, n1)` is R (C*KW, m*Hp*Wp)
    for images n0:n1 (m of them, laid out one after another, (C, m, Hp, Wp) flattened);
    `kernel_row(R, i, m)` its (C*KW, positions(m)) columns for kernel row i (a view). The positions
    run over all m images: image k's output row r, column q is position k*Hp*Wp + r*Wp + q; rows
    r >= OH (reading into the next image) and columns q >= OW are computed and dropped."""

    def __init__(self, x, kernel, pads, dilation, out_hw):
        n, cin, h, w = x.shape
        kh, kw = kernel
        self.x, self.top, self.left, self.dh, self.dw, self.kw = x, pads[0], pads[2], dilation[0], dilation[1], kw
        self.oh = out_hw[0]
        self.hp, self.wp = _padded_hw((h, w), kernel, (1, 1), pads, dilation, out_hw)
        self.image = self.hp * self.wp
        self.nb = max(1, min(n, _ROW_GEMMS_CHUNK // (self.oh * self.wp)))
        self.chunks = [(i, min(i + self.nb, n)) for i in range(0, n, self.nb)]
        # one spare zero row: the shifted copies read up to (KW-1)*dw past the last image's end
        self.padded = np.zeros((cin, self.nb * self.image + self.wp), x.dtype)
        self.images = self.padded[:, :self.nb * self.image].reshape(cin, self.nb, self.hp, self.wp)
        self.rows = np.empty((cin, kw, self.nb * self.image), x.dtype)

    def positions(self, m):
        return (m - 1) * self.image + self.oh * self.wp

    def get(self, n0, n1):
        h, w = self.x.shape[2:]
        m = n1 - n0
        self.images[:, :m, self.top:self.top + h, self.left:self.left + w] = self.x[n0:n1].transpose(1, 0, 2, 3)
        size = m * self.image
        rows = self.rows[:, :, :size]
        for j in range(self.kw):
            rows[:, j] = self.padded[:, j * self.dw:j * self.dw + size]
        return rows.reshape(-1, size)

    def kernel_row(self, r, i, m):
        off = i * self.dh * self.wp
        return r[:, off:off + self.positions(m)]


def _conv2d_row_gemms(x, w, pads, dilation, out_hw):
    """y (C_out, positions) per chunk = sum over kernel rows i of W[:, :, i, :] (C_out, C*KW) @ the
    row's columns. Saves: the KH*KW-fold im2col copy (KW-fold here; `_conv2d_plain` is the reference)."""
    n, cout, kh = x.shape[0], w.shape[0], w.shape[2]
    oh, ow = out_hw
    rows = _ShiftedRows(x, w.shape[2:], pads, dilation, out_hw)
    w_rows = [np.ascontiguousarray(w[:, :, i, :]).reshape(cout, -1) for i in range(kh)]   # columns (c, j)
    y_buf, part_buf = _Buffer(cout * rows.nb * rows.image, x.dtype), _Buffer(cout * rows.nb * rows.image, x.dtype)
    out = np.empty((n, cout, oh, ow), x.dtype)
    isz = x.dtype.itemsize
    for n0, n1 in rows.chunks:
        m = n1 - n0
        r = rows.get(n0, n1)
        # y and part contiguous: NumPy's `+=` on a strided 2-d slice runs ~4x slower than on a contiguous array
        p = rows.positions(m)
        y, part = y_buf.take((cout, p)), part_buf.take((cout, p))
        np.matmul(w_rows[0], rows.kernel_row(r, 0, m), out=y)
        for i in range(1, kh):
            np.matmul(w_rows[i], rows.kernel_row(r, i, m), out=part)
            y += part
        # image k's output row r, column q is position k*Hp*Wp + r*Wp + q (in bounds: p ends at the last row)
        view = as_strided(y, (cout, m, oh, ow), (p * isz, rows.image * isz, rows.wp * isz, isz), writeable=False)
        out[n0:n1] = view.transpose(1, 0, 2, 3)
    return out


def _backprop_filter_row_gemms(dy, x, w_shape, pads, dilation):
    """dW[:, :, i, :] (C_out, C*KW) = sum over chunks of dy (C_out, positions) @ (kernel row i's
    columns)^T, dy zero at the dropped positions. Saves: the KH*KW-fold im2col copy (KW-fold here;
    `_backprop_filter_plain` is the reference)."""
    n, cout, oh, ow = dy.shape
    _, cin, kh, kw = w_shape
    rows = _ShiftedRows(x, (kh, kw), pads, dilation, (oh, ow))
    d = np.zeros((cout, rows.nb, rows.hp, rows.wp), dy.dtype)        # the dropped positions stay 0
    dw = np.zeros((kh, cout, cin * kw), dy.dtype)
    part = np.empty((cout, cin * kw), dy.dtype)
    for n0, n1 in rows.chunks:
        m = n1 - n0
        r = rows.get(n0, n1)
        d[:, :m, :oh, :ow] = dy[n0:n1].transpose(1, 0, 2, 3)
        dd = d.reshape(cout, -1)[:, :rows.positions(m)]
        for i in range(kh):
            np.matmul(dd, rows.kernel_row(r, i, m).T, out=part)
            dw[i] += part
    return np.ascontiguousarray(dw.reshape(kh, cout, cin, kw).transpose(1, 2, 0, 3))


# -------------------------------------------------------------------------------------------------
# Channels-last kernels. In NCHW, the im2col copy of a window moves runs of OW pixels (4 floats for a
# 4x4 feature map) or, at stride 2, single pixels: for the deep, narrow layers of a CNN the copy then
# costs as much as the GEMM. With the padded input laid out (N, H, W, C), one window row (KW pixels x
# C channels) is ONE contiguous run of KW*C values, so the copy moves long runs for any spatial size
# and stride. The kernels below transpose a chunk of images at a time to NHWC, build its
# (images*OH*OW, KH*KW*C) columns and run one 2-d GEMM per chunk, whose result is transposed into
# the NCHW output while it is still in cache. They apply to ungrouped convolutions with a kernel
# wider than 1x1 whose window rows are long (`_channels_last`); the NCHW kernels above keep the
# rest (few channels, where the "row windows" runs of OH*Wp are longer, 1x1 and grouped convs).
# Plain references: `_conv2d_plain`, `_backprop_input_plain`, `_backprop_filter_plain` (the same
# arithmetic, whole batch, NCHW); tests/ops/test_fast_conv_bn.py compares them.
_CHANNELS_LAST_MIN_RUN = 64          # KW * C_in at which the NHWC window rows beat the NCHW im2col
_CHANNELS_LAST_CHUNK = 1 << 18       # column elements per chunk (1 MB of float32: stays in L2)


def _channels_last(w_shape, groups):
    """Use the channels-last kernels for this weight (C_out, C_in/groups, KH, KW)?"""
    _, cg, kh, kw = w_shape
    return groups == 1 and kh * kw > 1 and cg * kw >= _CHANNELS_LAST_MIN_RUN


class _ColumnsNHWC:
    """Channels-last im2col of x (N, C, H, W), a chunk of images at a time: each chunk is copied
    into one reused zero-bordered (images, Hp, Wp, C) buffer (the borders are zeroed once);
    `get(n0, n1)` is the (images * OH * OW, KH*KW*C) column matrix of images n0:n1 (rows: image,
    output row, output column; columns: kernel row i, kernel column j, channel c)."""

    def __init__(self, x, kernel, stride, pads, dilation, out_hw):
        n, cin, h, w = x.shape
        kh, kw = kernel
        ph, pw = _padded_hw((h, w), kernel, stride, pads, dilation, out_hw)
        self.p = out_hw[0] * out_hw[1]
        self.k = kh * kw * cin
        self.nb = max(1, min(n, _CHANNELS_LAST_CHUNK // (self.p * self.k)))
        self.chunks = [(i, min(i + self.nb, n)) for i in range(0, n, self.nb)]
        self.x, self.top, self.left = x, pads[0], pads[2]
        self.padded = np.zeros((self.nb, ph, pw, cin), x.dtype)
        s_n, s_h, s_w, s_c = self.padded.strides
        # [n, oh, ow, i, j, c] = padded[n, oh*sh + i*dh, ow*sw + j*dw, c]: for dw = 1 the (j, c) pair is one run
        self.windows = as_strided(self.padded, (self.nb, out_hw[0], out_hw[1], kh, kw, cin),
                                  (s_n, stride[0] * s_h, stride[1] * s_w, dilation[0] * s_h, dilation[1] * s_w, s_c),
                                  writeable=False)
        self.buf = _Buffer(self.nb * self.p * self.k, x.dtype)

    def get(self, n0, n1):
        m = n1 - n0
        h, w = self.x.shape[2:]
        self.padded[:m, self.top:self.top + h, self.left:self.left + w] = self.x[n0:n1].transpose(0, 2, 3, 1)
        win = self.windows[:m]
        cols = self.buf.take(win.shape)
        np.copyto(cols, win)
        return cols.reshape(m * self.p, self.k)


def _conv2d_channels_last(x, w, stride, pads, dilation, out_hw):
    """y (images*OH*OW, C_out) = columns @ W^T per chunk, transposed into the NCHW output.
    Saves: the short-run NCHW im2col copy (`_conv2d_plain` is the reference)."""
    n, cout = x.shape[0], w.shape[0]
    kh, kw = w.shape[2:]
    oh, ow = out_hw
    cols = _ColumnsNHWC(x, (kh, kw), stride, pads, dilation, out_hw)
    wt = np.ascontiguousarray(w.transpose(2, 3, 1, 0)).reshape(cols.k, cout)        # rows (i, j, c)
    y_buf = _Buffer(cols.nb * cols.p * cout, x.dtype)
    out = np.empty((n, cout, oh, ow), x.dtype)
    for n0, n1 in cols.chunks:
        m = n1 - n0
        y = np.matmul(cols.get(n0, n1), wt, out=y_buf.take((m * cols.p, cout)))
        out[n0:n1] = y.reshape(m, oh, ow, cout).transpose(0, 3, 1, 2)
    return out


def _backprop_filter_channels_last(dy, x, w_shape, stride, pads, dilation):
    """dW (C_out, KH*KW*C) accumulated over chunks as dy^T (C_out, P) @ columns (P, KH*KW*C), the
    columns (the large operand) row-major. Saves: the short-run NCHW im2col copy."""
    n, cout, oh, ow = dy.shape
    _, cin, kh, kw = w_shape
    cols = _ColumnsNHWC(x, (kh, kw), stride, pads, dilation, (oh, ow))
    dyt = dy.transpose(0, 2, 3, 1)                                                 # (N, OH, OW, C_out) view
    d_buf = _Buffer(cols.nb * cols.p * cout, dy.dtype)
    dw = np.zeros((cout, cols.k), dy.dtype)
    part = np.empty_like(dw)
    for n0, n1 in cols.chunks:
        d = d_buf.take((n1 - n0, oh, ow, cout))
        np.copyto(d, dyt[n0:n1])
        np.matmul(d.reshape(-1, cout).T, cols.get(n0, n1), out=part)
        dw += part
    return np.ascontiguousarray(dw.reshape(cout, kh, kw, cin).transpose(0, 3, 1, 2))


def _backprop_input_channels_last(dy, w, x_shape, stride, pads, dilation):
    """Per chunk: columns (P, KH*KW*C) = dy (P, C_out) @ W (C_out, KH*KW*C), then col2im as KH*KW
    strided adds of (images, OH, OW, C) blocks onto the padded NHWC gradient (runs of C values; within
    one kernel offset the windows never overlap, so `+=` is exact). Saves: the NCHW col2im's
    single-pixel strided adds at stride 2 (`_backprop_input_plain` is the reference)."""
    n, cin, h, wd = x_shape
    cout, _, kh, kw = w.shape
    oh, ow = dy.shape[2:]
    (sh, sw), (dh, dw_) = stride, dilation
    ph, pw = _padded_hw((h, wd), (kh, kw), stride, pads, dilation, (oh, ow))
    k, p = kh * kw * cin, oh * ow
    nb = max(1, min(n, _CHANNELS_LAST_CHUNK // (p * k)))
    w2 = np.ascontiguousarray(w.transpose(0, 2, 3, 1)).reshape(cout, k)            # columns (i, j, c)
    dyt = dy.transpose(0, 2, 3, 1)
    d_buf, cols_buf = _Buffer(nb * p * cout, dy.dtype), _Buffer(nb * p * k, dy.dtype)
    acc_buf = _Buffer(nb * ph * pw * cin, dy.dtype)
    dx = np.empty(x_shape, dy.dtype)
    pt, pl = pads[0], pads[2]
    for n0 in range(0, n, nb):
        n1 = min(n0 + nb, n)
        m = n1 - n0
        d = d_buf.take((m, oh, ow, cout))
        np.copyto(d, dyt[n0:n1])
        cols = np.matmul(d.reshape(m * p, cout), w2, out=cols_buf.take((m * p, k))).reshape(m, oh, ow, kh, kw, cin)
        acc = acc_buf.take((m, ph, pw, cin))
        acc.fill(0)
        for i in range(kh):
            for j in range(kw):
                rows = slice(i * dh, i * dh + (oh - 1) * sh + 1, sh)
                acc[:, rows, j * dw_:j * dw_ + (ow - 1) * sw + 1:sw] += cols[:, :, :, i, j]
        dx[n0:n1] = acc[:, pt:pt + h, pl:pl + wd].transpose(0, 3, 1, 2)
    return dx


def _conv2d_bprop(inputs, out, dout, **attrs):
    # A gradient the tape would discard is not computed (grad_state.wants_grad): e.g. the input
    # gradient of a first layer, whose input is data, is skipped (col2im is not free).
    x, w = inputs
    return (_backprop_input(dout, w, x_shape=tuple(x.shape), **attrs) if wants_grad(inputs, 0) else None,
            _backprop_filter(dout, x, w_shape=tuple(w.shape), **attrs) if wants_grad(inputs, 1) else None)


def _backprop_input_bprop(inputs, out, dout, x_shape, **attrs):
    # dx = A_w^T dy is linear in dy and in w: d dy = A_w a = conv2d(a, w); d w = conv2d's weight
    # gradient of <conv2d(a, w), dy>.
    dy, w = inputs
    return (_conv2d(dout, w, **attrs) if wants_grad(inputs, 0) else None,
            _backprop_filter(dy, dout, w_shape=tuple(w.shape), **attrs) if wants_grad(inputs, 1) else None)


def _backprop_filter_bprop(inputs, out, dout, w_shape, **attrs):
    dy, x = inputs
    return (_conv2d(x, dout, **attrs) if wants_grad(inputs, 0) else None,
            _backprop_input(dy, dout, x_shape=tuple(x.shape), **attrs) if wants_grad(inputs, 1) else None)


def _conv2d_flops(ins, outs, attrs):
    """2 * N * Cout * OH * OW * (Cin/groups) * KH * KW: the im2col GEMM's multiply-adds."""
    x, w = ins[0], ins[1]
    n, cout, oh, ow = _geometry("conv2d", x.shape, w.shape, attrs["stride"], attrs["pads"], attrs["dilation"],
                                attrs["groups"])
    _, cg, kh, kw = w.shape
    return {"flops": 2 * n * cout * oh * ow * cg * kh * kw}


def _conv2d_backprop_flops(ins, outs, attrs):
    """The two conv2d gradients are GEMMs of the forward convolution's size:
    2 * N * Cout * OH * OW * (Cin/groups) * KH * KW, with dout (N, Cout, OH, OW) and w (Cout, Cin/g, KH, KW)
    (backprop_input(dout, w): w is input 1; backprop_filter(dout, x): w is the output)."""
    dout, w = ins[0], ins[1]
    if len(getattr(w, "shape", ())) != 4:
        w = outs[0]
    _, cg, kh, kw = w.shape
    return {"flops": 2 * costs.size_of(dout) * cg * kh * kw}


_conv2d_cost = costs.matrix_unit(_conv2d_flops)
_conv2d_backprop_cost = costs.matrix_unit(_conv2d_backprop_flops)


_conv2d = defprim("conv2d", _conv2d_infer, _conv2d_fast, _conv2d_bprop, cost=_conv2d_cost,
                  doc="2-d cross-correlation, NCHW, im2col + matmul", sharding=SR.conv2d)
_backprop_input = defprim("conv2d_backprop_input", _backprop_input_infer, _backprop_input_fast,
                          _backprop_input_bprop, doc="gradient of conv2d w.r.t. its input (col2im)",
                          cost=_conv2d_backprop_cost, sharding=SR.conv2d_backprop_input)
_backprop_filter = defprim("conv2d_backprop_filter", _backprop_filter_infer, _backprop_filter_fast,
                           _backprop_filter_bprop, doc="gradient of conv2d w.r.t. its weight",
                           cost=_conv2d_backprop_cost, sharding=SR.conv2d_backprop_filter)


def _same_pads(size, kernel, stride, dilation):
    """'same': output = ceil(size / stride); the odd pixel of padding goes to the bottom/right."""
    out = -(-size // stride)
    total = max((out - 1) * stride + (kernel - 1) * dilation + 1 - size, 0)
    return total // 2, total - total // 2


def conv2d(input, weight, bias=None, stride=1, pad_mode="valid", padding=0, dilation=1, groups=1):
    """`ops.conv2d(input, weight, bias=None, stride=1, pad_mode="valid", padding=0, dilation=1, groups=1)`.

    input (N, C_in, H, W), weight (C_out, C_in / groups, KH, KW), bias (C_out,).
    pad_mode: "valid" (no padding), "same" (output = ceil(H / stride), extra pixel bottom/right) or
    "pad" (`padding`: an int, (h, w) or (top, bottom, left, right)). As in MindSpore, a nonzero
    `padding` requires pad_mode="pad".
    """
    op = "conv2d"
    Wn.check_nchw(op, "input", input)
    Wn.check_nchw(op, "weight", weight)
    stride = Wn.pair(op, "stride", stride)
    dilation = Wn.pair(op, "dilation", dilation)
    groups = C.int_attr(op, "groups", groups, minimum=1)
    pads = Wn.pads4(op, padding)
    mode = pad_mode.lower() if isinstance(pad_mode, str) else pad_mode
    C.one_of(op, "pad_mode", mode, ("valid", "same", "pad"), "pad_mode in ['valid', 'same', 'pad']")
    if mode != "pad" and any(pads):
        raise C.OpValueError(op, "padding=0 unless pad_mode='pad'", f"padding={padding!r} with pad_mode={pad_mode!r}")
    if mode == "same":
        kh, kw = weight.shape[2:]
        pads = (_same_pads(input.shape[2], kh, stride[0], dilation[0])
                + _same_pads(input.shape[3], kw, stride[1], dilation[1]))
    out = _conv2d(input, weight, stride=stride, pads=pads, dilation=dilation, groups=groups)
    return out if bias is None else _add_bias(op, out, bias, weight.shape[0])


def _add_bias(op, out, bias, channels):
    from .elementwise import add
    from .shape import reshape
    N.tensor(op, "bias", bias)
    if tuple(bias.shape) != (channels,):
        raise C.OpValueError(op, f"'bias' of shape ({channels},)", f"shape {tuple(bias.shape)}")
    return add(out, reshape(bias, (1, channels) + (1,) * (len(out.shape) - 2)))


# =================================================================================================
# conv1d: a conv2d over (N, C, 1, L)
def conv1d(input, weight, bias=None, stride=1, pad_mode="valid", padding=0, dilation=1, groups=1):
    """`ops.conv1d(input, weight, bias=None, stride=1, pad_mode="valid", padding=0, dilation=1, groups=1)`.

    input (N, C_in, L), weight (C_out, C_in / groups, K), bias (C_out,). pad_mode as conv2d's
    ("valid", "same" or "pad" with `padding` zeros on both ends). Computed as a conv2d over the
    input viewed as (N, C_in, 1, L), so it shares conv2d's primitives (and their gradients).
    """
    from .shape import reshape
    op = "conv1d"
    for arg, t in (("input", input), ("weight", weight)):
        N.tensor(op, arg, t)
        if len(t.shape) != 3:
            raise C.OpValueError(op, f"'{arg}' of rank 3", f"shape {tuple(t.shape)}")
    s = Wn.single(op, "stride", stride, 1)
    d = Wn.single(op, "dilation", dilation, 1)
    p = Wn.single(op, "padding", padding, 0)
    n, cin, length = input.shape
    cout, cg, k = weight.shape
    out = conv2d(reshape(input, (n, cin, 1, length)), reshape(weight, (cout, cg, 1, k)), None, (1, s), pad_mode,
                 (0, 0, p, p), (1, d), groups)
    out = reshape(out, (n, cout, out.shape[3]))
    return out if bias is None else _add_bias(op, out, bias, cout)


# =================================================================================================
# conv_transpose2d: the adjoint of conv2d in its input, i.e. the conv2d_backprop_input primitive
def transposed_out_size(size, kernel, stride, dilation, pad_lo, pad_hi, output_padding):
    """Output length of a transposed convolution: (size - 1) * stride - pads + effective kernel + output_padding."""
    return (size - 1) * stride - pad_lo - pad_hi + (kernel - 1) * dilation + 1 + output_padding


def conv_transpose(op, x, w, out_hw, stride, pads, dilation, groups):
    """The transposed convolution of x (N, C_in, H, W) with w (C_in, C_out / groups, KH, KW) to an
    (N, C_out, *out_hw) output: the input gradient of the conv2d that maps such an output back to
    x's shape. Checks the arguments as the op `op`."""
    Wn.check_nchw(op, "input", x)
    Wn.check_nchw(op, "weight", w)
    N.floating(op, "input", x)
    if x.dtype is not w.dtype:
        raise C.OpTypeError(op, "'input' and 'weight' of the same dtype", f"{x.dtype} and {w.dtype}")
    cin, cg = w.shape[0], w.shape[1]
    if x.shape[1] != cin:
        raise C.OpValueError(op, f"input channels (dim 1) equal to weight.shape[0] ({cin})", f"input shape {tuple(x.shape)}")
    if groups < 1 or cin % groups:
        raise C.OpValueError(op, f"'groups' dividing in_channels ({cin})", f"groups={groups}")
    if min(out_hw) < 1:
        raise C.OpValueError(op, "a positive output size", f"output size {tuple(out_hw)} for input {tuple(x.shape)}")
    x_shape = (x.shape[0], cg * groups) + tuple(out_hw)
    return _backprop_input(x, w, x_shape=x_shape, stride=stride, pads=pads, dilation=dilation, groups=groups)


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """`ops.conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1)`.

    input (N, C_in, H, W), weight (C_in, C_out / groups, KH, KW). Output size per axis:
    (H - 1) * stride - 2 * padding + dilation * (K - 1) + output_padding + 1, with
    output_padding < stride. (MindSpore 2.10 has no CPU kernel for this op: these are its
    documented semantics, the same as PyTorch's.)
    """
    op = "conv_transpose2d"
    Wn.check_nchw(op, "input", input)
    Wn.check_nchw(op, "weight", weight)
    stride = Wn.pair(op, "stride", stride)
    dilation = Wn.pair(op, "dilation", dilation)
    ph, pw = Wn.pair(op, "padding", padding, minimum=0)
    oph, opw = Wn.pair(op, "output_padding", output_padding, minimum=0)
    groups = C.int_attr(op, "groups", groups, minimum=1)
    if oph >= stride[0] or opw >= stride[1]:
        raise C.OpValueError(op, f"'output_padding' smaller than 'stride' {stride}", repr(output_padding))
    kh, kw = weight.shape[2:]
    h, w = input.shape[2:]
    out_hw = (transposed_out_size(h, kh, stride[0], dilation[0], ph, ph, oph),
              transposed_out_size(w, kw, stride[1], dilation[1], pw, pw, opw))
    out = conv_transpose(op, input, weight, out_hw, stride, (ph, ph, pw, pw), dilation, groups)
    return out if bias is None else _add_bias(op, out, bias, out.shape[1])


__all__ = ["conv1d", "conv2d", "conv_transpose2d"]
