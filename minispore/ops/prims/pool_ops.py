"""2-d max and average pooling (NCHW), with PyTorch's/MindSpore's window and ceil_mode rules;
avg_pool1d on top of them, and the adaptive pools (adaptive_avg_pool2d, adaptive_max_pool2d).

max_pool2d returns the argmax of each window as a second output (a flat index into the H*W plane
of the unpadded input, as `return_indices=True` shows it). Its backward is a scatter of dy onto those
positions (`max_pool2d_grad`), whose adjoint is a gather (`max_pool2d_grad_grad`); the two are each
other's backward rule, so every order of gradient works.

avg_pool2d is linear in its input: its backward (`avg_pool2d_grad`) spreads dy / divisor over each
window, and the backward of that is avg_pool2d again.
"""
from __future__ import annotations

import numpy as np

from ...common import dtype as mstype
from .. import _check as C
from .. import sharding_rules as SR
from ..primitive import AbstractTensor, defprim
from . import _windows as Wn


def _check_pool_input(op, x):
    Wn.check_nchw(op, "input", x)
    if not x.dtype.is_floating:
        raise C.OpTypeError(op, "'input' with a floating dtype", str(x.dtype))


def _check_half_kernel(op, pads, kernel, dilation=(1, 1)):
    """Each padding must be at most half the (effective) kernel, so no window is all padding."""
    k_eff = ((kernel[0] - 1) * dilation[0] + 1, (kernel[1] - 1) * dilation[1] + 1)
    if max(pads[0], pads[1]) > k_eff[0] // 2 or max(pads[2], pads[3]) > k_eff[1] // 2:
        raise C.OpValueError(op, f"padding at most half the kernel size {k_eff}", f"padding {pads}")


def _pool_out_hw(op, x_shape, kernel, stride, pads, dilation, ceil_mode):
    return (Wn.out_size(op, x_shape[2], kernel[0], stride[0], dilation[0], pads[0], pads[1], ceil_mode),
            Wn.out_size(op, x_shape[3], kernel[1], stride[1], dilation[1], pads[2], pads[3], ceil_mode))


# =================================================================================================
# max_pool2d
def _max_pool_infer(x, kernel, stride, pads, dilation, ceil_mode):
    op = "max_pool2d"
    _check_pool_input(op, x)
    _check_half_kernel(op, pads, kernel, dilation)
    oh, ow = _pool_out_hw(op, x.shape, kernel, stride, pads, dilation, ceil_mode)
    shape = tuple(x.shape[:2]) + (oh, ow)
    return AbstractTensor(shape, x.dtype), AbstractTensor(shape, mstype.int64)


def _max_pool_kernel(x, kernel, stride, pads, dilation, ceil_mode):
    n, c, h, w = x.shape
    out_hw = _pool_out_hw("max_pool2d", x.shape, kernel, stride, pads, dilation, ceil_mode)
    # Padding is -inf, so it never wins unless a whole window of real values is -inf (then the
    # argmax may point into the padding; PyTorch would pick the first real -inf).
    xp = Wn.pad_for_windows(x, pads, out_hw, kernel, stride, dilation, -np.inf)
    win = Wn.windows(xp, kernel, stride, dilation, out_hw)
    win = win.reshape(n, c, out_hw[0], out_hw[1], kernel[0] * kernel[1])      # one copy
    arg = win.argmax(axis=-1)                       # first maximum in scan order (NaN wins), as PyTorch
    y = np.take_along_axis(win, arg[..., None], axis=-1)[..., 0]
    # window-local (i, j) -> flat index into the unpadded H*W plane
    rows = np.arange(out_hw[0])[:, None] * stride[0] - pads[0] + (arg // kernel[1]) * dilation[0]
    cols = np.arange(out_hw[1])[None, :] * stride[1] - pads[2] + (arg % kernel[1]) * dilation[1]
    return y, (rows * w + cols).astype(np.int64)


def _max_pool_grad_infer(dy, argmax, x_shape):
    op = "max_pool2d_grad"
    Wn.check_nchw(op, "dout", dy)
    C.integer(op, "argmax", argmax)
    if tuple(argmax.shape) != tuple(dy.shape) or tuple(dy.shape[:2]) != tuple(x_shape[:2]):
        raise C.OpValueError(op, f"'dout' and 'argmax' of one shape (N, C, OH, OW) for input {tuple(x_shape)}",
                             f"{tuple(dy.shape)} and {tuple(argmax.shape)}")
    return AbstractTensor(x_shape, dy.dtype)


def _plane_offsets(n, c, hw):
    return (np.arange(n * c, dtype=np.int64) * hw).reshape(n, c, 1, 1)


def _max_pool_grad_kernel(dy, argmax, x_shape):
    """Scatter-add dy onto the argmax positions (bincount sums positions shared by overlapping windows)."""
    n, c, h, w = x_shape
    flat = (argmax + _plane_offsets(n, c, h * w)).ravel()
    dx = np.bincount(flat, weights=dy.ravel().astype(np.float64, copy=False), minlength=n * c * h * w)
    return dx.reshape(x_shape)


def _max_pool_grad_grad_infer(a, argmax):
    op = "max_pool2d_grad_grad"
    Wn.check_nchw(op, "input", a)
    C.integer(op, "argmax", argmax)
    if len(argmax.shape) != 4 or tuple(argmax.shape[:2]) != tuple(a.shape[:2]):
        raise C.OpValueError(op, "'argmax' of shape (N, C, OH, OW) matching the input's N and C",
                             f"{tuple(argmax.shape)} for input {tuple(a.shape)}")
    return AbstractTensor(argmax.shape, a.dtype)


def _max_pool_grad_grad_kernel(a, argmax):
    """Gather a at the argmax positions: the adjoint of the scatter above."""
    n, c, h, w = a.shape
    return np.take_along_axis(a.reshape(n, c, h * w), argmax.reshape(n, c, -1), axis=-1).reshape(argmax.shape)


def _max_pool_bprop(inputs, out, dout, **attrs):
    return (_max_pool_grad(dout[0], out[1], x_shape=tuple(inputs[0].shape)),)


def _max_pool_grad_bprop(inputs, out, dout, x_shape):
    return _max_pool_grad_grad(dout, inputs[1]), None


def _max_pool_grad_grad_bprop(inputs, out, dout):
    a, argmax = inputs
    return _max_pool_grad(dout, argmax, x_shape=tuple(a.shape)), None


_max_pool = defprim("max_pool2d", _max_pool_infer, _max_pool_kernel, _max_pool_bprop,
                    doc="2-d max pooling: (output, argmax)", sharding=SR.planewise)
_max_pool_grad = defprim("max_pool2d_grad", _max_pool_grad_infer, _max_pool_grad_kernel, _max_pool_grad_bprop,
                         doc="backward of max_pool2d: scatter dy onto the argmax positions")
_max_pool_grad_grad = defprim("max_pool2d_grad_grad", _max_pool_grad_grad_infer, _max_pool_grad_grad_kernel,
                              _max_pool_grad_grad_bprop, doc="gather at the argmax positions (adjoint of the scatter)")


def max_pool2d(x, kernel_size, stride=None, padding=0, dilation=1, return_indices=False, ceil_mode=False):
    """`ops.max_pool2d(x, kernel_size, stride=None, padding=0, dilation=1, return_indices=False, ceil_mode=False)`.

    x (N, C, H, W). stride defaults to kernel_size; padding (an int or (h, w), implicit -inf on both
    sides) at most half the kernel. With return_indices, also returns the argmax (Int64 flat index
    into each H*W plane).
    """
    op = "max_pool2d"
    kernel = Wn.pair(op, "kernel_size", kernel_size)
    stride = kernel if stride is None else Wn.pair(op, "stride", stride)
    ph, pw = Wn.pair(op, "padding", padding, minimum=0)
    dilation = Wn.pair(op, "dilation", dilation)
    if not isinstance(ceil_mode, bool) or not isinstance(return_indices, bool):
        raise C.OpTypeError(op, "'ceil_mode' and 'return_indices' to be bools", f"{ceil_mode!r}, {return_indices!r}")
    y, argmax = _max_pool(x, kernel=kernel, stride=stride, pads=(ph, ph, pw, pw), dilation=dilation,
                          ceil_mode=ceil_mode)
    return (y, argmax) if return_indices else y


# =================================================================================================
# avg_pool2d
def _avg_attrs_check(op, x_shape, kernel, stride, pads, divisor_override):
    _check_half_kernel(op, pads, kernel)
    if divisor_override < 0:
        raise C.OpValueError(op, "'divisor_override' >= 0 (0: not set)", repr(divisor_override))


def _avg_pool_infer(x, kernel, stride, pads, ceil_mode, count_include_pad, divisor_override):
    op = "avg_pool2d"
    _check_pool_input(op, x)
    _avg_attrs_check(op, x.shape, kernel, stride, pads, divisor_override)
    oh, ow = _pool_out_hw(op, x.shape, kernel, stride, pads, (1, 1), ceil_mode)
    return AbstractTensor(tuple(x.shape[:2]) + (oh, ow), x.dtype)


def _divisors(x_shape, out_hw, kernel, stride, pads, count_include_pad, divisor_override):
    """(OH, OW) divisor of each window, PyTorch's rule: with count_include_pad the window is clipped
    to the padded input (not to the ceil_mode extension), without it to the input itself."""
    if divisor_override:
        return float(divisor_override)

    def one_axis(size, out, k, s, lo, hi):
        start = np.arange(out) * s - lo
        end = np.minimum(start + k, size + hi)
        if count_include_pad:
            return end - start
        return np.minimum(end, size) - np.maximum(start, 0)

    dh = one_axis(x_shape[2], out_hw[0], kernel[0], stride[0], pads[0], pads[1])
    dw = one_axis(x_shape[3], out_hw[1], kernel[1], stride[1], pads[2], pads[3])
    return (dh[:, None] * dw[None, :]).astype(np.float64)


def _avg_pool_kernel(x, kernel, stride, pads, ceil_mode, count_include_pad, divisor_override):
    out_hw = _pool_out_hw("avg_pool2d", x.shape, kernel, stride, pads, (1, 1), ceil_mode)
    xp = Wn.pad_for_windows(x, pads, out_hw, kernel, stride, (1, 1), 0)
    sums = Wn.windows(xp, kernel, stride, (1, 1), out_hw).sum(axis=(-2, -1))
    div = _divisors(x.shape, out_hw, kernel, stride, pads, count_include_pad, divisor_override)
    return sums / np.asarray(div, dtype=sums.dtype)


def _avg_pool_grad_infer(dy, x_shape, kernel, stride, pads, ceil_mode, count_include_pad, divisor_override):
    op = "avg_pool2d_grad"
    Wn.check_nchw(op, "dout", dy)
    want = _avg_pool_infer(AbstractTensor(x_shape, dy.dtype), kernel, stride, pads, ceil_mode,
                           count_include_pad, divisor_override)
    if tuple(dy.shape) != want.shape:
        raise C.OpValueError(op, f"'dout' of shape {want.shape}", f"shape {tuple(dy.shape)}")
    return AbstractTensor(x_shape, dy.dtype)


def _avg_pool_grad_kernel(dy, x_shape, kernel, stride, pads, ceil_mode, count_include_pad, divisor_override):
    out_hw = dy.shape[2:]
    div = _divisors(x_shape, out_hw, kernel, stride, pads, count_include_pad, divisor_override)
    g = dy / np.asarray(div, dtype=dy.dtype)
    cols = np.broadcast_to(g[..., None, None], g.shape + tuple(kernel))
    pb = max(pads[1], (out_hw[0] - 1) * stride[0] + kernel[0] - x_shape[2] - pads[0])
    pr = max(pads[3], (out_hw[1] - 1) * stride[1] + kernel[1] - x_shape[3] - pads[2])
    padded = (x_shape[2] + pads[0] + pb, x_shape[3] + pads[2] + pr)
    return Wn.crop(Wn.scatter_windows(cols, padded, stride, (1, 1)), pads, x_shape[2:])


def _avg_pool_bprop(inputs, out, dout, **attrs):
    return (_avg_pool_grad(dout, x_shape=tuple(inputs[0].shape), **attrs),)


def _avg_pool_grad_bprop(inputs, out, dout, x_shape, **attrs):
    return (_avg_pool(dout, **attrs),)          # avg_pool2d and its backward are adjoint linear maps


_avg_pool = defprim("avg_pool2d", _avg_pool_infer, _avg_pool_kernel, _avg_pool_bprop, doc="2-d average pooling",
                    sharding=SR.planewise)
_avg_pool_grad = defprim("avg_pool2d_grad", _avg_pool_grad_infer, _avg_pool_grad_kernel, _avg_pool_grad_bprop,
                         doc="backward of avg_pool2d: dy / divisor spread over each window")


def avg_pool2d(input_x, kernel_size=1, stride=1, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=0):
    """`ops.avg_pool2d(input_x, kernel_size=1, stride=1, padding=0, ceil_mode=False,
    count_include_pad=True, divisor_override=0)`.

    padding: an int or (top, bottom, left, right) zeros, each at most half the kernel.
    divisor_override=0 means "not set": divide by the window size (see count_include_pad).
    """
    op = "avg_pool2d"
    kernel = Wn.pair(op, "kernel_size", kernel_size)
    stride = Wn.pair(op, "stride", stride)
    pads = Wn.pads4(op, padding)
    if not isinstance(ceil_mode, bool) or not isinstance(count_include_pad, bool):
        raise C.OpTypeError(op, "'ceil_mode' and 'count_include_pad' to be bools",
                            f"{ceil_mode!r}, {count_include_pad!r}")
    divisor_override = C.int_attr(op, "divisor_override", 0 if divisor_override is None else divisor_override)
    return _avg_pool(input_x, kernel=kernel, stride=stride, pads=pads, ceil_mode=ceil_mode,
                     count_include_pad=count_include_pad, divisor_override=divisor_override)


def avg_pool1d(input_x, kernel_size=1, stride=1, padding=0, ceil_mode=False, count_include_pad=True):
    """`ops.avg_pool1d(input_x, kernel_size=1, stride=1, padding=0, ceil_mode=False, count_include_pad=True)`.

    input_x (N, C, L); `padding` zeros on both ends (an int or a 1-tuple), at most half the kernel.
    An avg_pool2d over the input viewed as (N, C, 1, L) (the same primitive and gradient).
    """
    from .shape import reshape
    op = "avg_pool1d"
    C.tensor(op, "input_x", input_x)
    if len(input_x.shape) != 3:
        raise C.OpValueError(op, "'input_x' of rank 3 (N, C, L)", f"shape {tuple(input_x.shape)}")
    k = Wn.single(op, "kernel_size", kernel_size, 1)
    st = Wn.single(op, "stride", stride, 1)
    p = Wn.single(op, "padding", padding, 0)
    if not isinstance(ceil_mode, bool) or not isinstance(count_include_pad, bool):
        raise C.OpTypeError(op, "'ceil_mode' and 'count_include_pad' to be bools",
                            f"{ceil_mode!r}, {count_include_pad!r}")
    n, c, length = input_x.shape
    y = _avg_pool(reshape(input_x, (n, c, 1, length)), kernel=(1, k), stride=(1, st), pads=(0, 0, p, p),
                  ceil_mode=ceil_mode, count_include_pad=count_include_pad, divisor_override=0)
    return reshape(y, (n, c, y.shape[3]))


# =================================================================================================
# adaptive pools: output cell i along an axis of length L (out of O) covers the input range
#   [floor(i * L / O), ceil((i + 1) * L / O))
# so the windows tile the input, overlapping by at most one element when O does not divide L.
def adaptive_bounds(size, out):
    i = np.arange(out)
    return (i * size) // out, -((-(i + 1) * size) // out)


def _averaging_matrix(size, out, dtype):
    """(out, size) matrix whose row i averages window i: adaptive average pooling along one axis."""
    start, end = adaptive_bounds(size, out)
    pos = np.arange(size)
    inside = (pos[None, :] >= start[:, None]) & (pos[None, :] < end[:, None])
    return (inside / (end - start)[:, None]).astype(dtype)


def _output_size(op, output_size, hw):
    """An int, or a 2-tuple of ints / None (None keeps that input size) -> (OH, OW)."""
    if Wn._is_int(output_size):
        output_size = (output_size, output_size)
    if not (isinstance(output_size, (tuple, list)) and len(output_size) == 2
            and all(v is None or Wn._is_int(v) for v in output_size)):
        raise C.OpTypeError(op, "'output_size' as an int or a tuple of 2 ints (or None)", repr(output_size))
    out = tuple(int(hw[i]) if v is None else int(v) for i, v in enumerate(output_size))
    if min(out) < 1:
        raise C.OpValueError(op, "'output_size' values >= 1", repr(output_size))
    return out


def _check_adaptive_input(op, x):
    C.tensor(op, "input", x)
    if len(x.shape) not in (3, 4):
        raise C.OpValueError(op, "'input' of rank 3 or 4, (C, H, W) or (N, C, H, W)", f"shape {tuple(x.shape)}")
    if not x.dtype.is_floating:
        raise C.OpTypeError(op, "'input' with a floating dtype", str(x.dtype))


def _adaptive_avg_infer(x, out_hw):
    op = "adaptive_avg_pool2d"
    _check_adaptive_input(op, x)
    return AbstractTensor(tuple(x.shape[:-2]) + tuple(out_hw), x.dtype)


def _adaptive_avg_kernel(x, out_hw):
    h, w = x.shape[-2:]
    C.output_fits("adaptive_avg_pool2d", x.shape[:-2] + tuple(out_hw), x.dtype)
    C.output_fits("adaptive_avg_pool2d", (max(out_hw), max(h, w)), np.float64)   # (the averaging matrices)
    if out_hw == (1, 1):                            # global average pooling (ResNet's head): one reduction
        return x.mean(axis=(-2, -1), keepdims=True, dtype=np.float32 if x.dtype.itemsize < 4 else None)
    cdt = np.float32 if x.dtype.itemsize < 4 else x.dtype
    ph, pw = _averaging_matrix(h, out_hw[0], cdt), _averaging_matrix(w, out_hw[1], cdt)
    return ph @ x.astype(cdt, copy=False) @ pw.T


def _adaptive_avg_grad_infer(dy, x_shape):
    op = "adaptive_avg_pool2d_grad"
    C.tensor(op, "dout", dy)
    if len(dy.shape) != len(x_shape) or tuple(dy.shape[:-2]) != tuple(x_shape[:-2]):
        raise C.OpValueError(op, f"'dout' with the leading dims of the input {tuple(x_shape)}", f"shape {tuple(dy.shape)}")
    return AbstractTensor(x_shape, dy.dtype)


def _adaptive_avg_grad_kernel(dy, x_shape):
    h, w = x_shape[-2:]
    oh, ow = dy.shape[-2:]
    cdt = np.float32 if dy.dtype.itemsize < 4 else dy.dtype
    ph, pw = _averaging_matrix(h, oh, cdt), _averaging_matrix(w, ow, cdt)
    return ph.T @ dy.astype(cdt, copy=False) @ pw


def _adaptive_avg_bprop(inputs, out, dout, out_hw):
    return (_adaptive_avg_grad(dout, x_shape=tuple(inputs[0].shape)),)


def _adaptive_avg_grad_bprop(inputs, out, dout, x_shape):
    return (_adaptive_avg(dout, out_hw=tuple(inputs[0].shape[-2:])),)     # a linear map and its adjoint


_adaptive_avg = defprim("adaptive_avg_pool2d", _adaptive_avg_infer, _adaptive_avg_kernel, _adaptive_avg_bprop,
                        doc="adaptive 2-d average pooling to a given output size", sharding=SR.planewise)
_adaptive_avg_grad = defprim("adaptive_avg_pool2d_grad", _adaptive_avg_grad_infer, _adaptive_avg_grad_kernel,
                             _adaptive_avg_grad_bprop, doc="backward of adaptive_avg_pool2d (its adjoint)")


def adaptive_avg_pool2d(input, output_size):
    """`ops.adaptive_avg_pool2d(input, output_size)`: input (N, C, H, W) or (C, H, W).

    output_size: an int or (OH, OW), where None keeps that input dimension. Output cell i along an
    axis of length L averages the input range [floor(i*L/O), ceil((i+1)*L/O)).
    """
    op = "adaptive_avg_pool2d"
    _check_adaptive_input(op, input)
    return _adaptive_avg(input, out_hw=_output_size(op, output_size, input.shape[-2:]))


def _adaptive_max_infer(x, out_hw):
    op = "adaptive_max_pool2d"
    Wn.check_nchw(op, "input", x)
    if not x.dtype.is_floating:
        raise C.OpTypeError(op, "'input' with a floating dtype", str(x.dtype))
    if x.shape[-2] == 0 or x.shape[-1] == 0:
        raise C.OpValueError(op, "an input with non-empty H and W (a window needs an element to take the max of)",
                             f"shape {tuple(x.shape)}")
    shape = tuple(x.shape[:2]) + tuple(out_hw)
    return AbstractTensor(shape, x.dtype), AbstractTensor(shape, mstype.int64)


def _adaptive_max_kernel(x, out_hw):
    n, c, h, w = x.shape
    oh, ow = out_hw
    C.output_fits("adaptive_max_pool2d", (n, c, oh, ow), np.float64)
    if n * c == 0:                              # no planes: nothing to pool (and no windows to walk)
        return np.empty((n, c, oh, ow), x.dtype), np.empty((n, c, oh, ow), np.int64)
    hs, he = adaptive_bounds(h, oh)
    ws, we = adaptive_bounds(w, ow)
    y = np.empty((n, c, oh, ow), x.dtype)
    idx = np.empty((n, c, oh, ow), np.int64)
    for i in range(oh):                         # one vectorized argmax per output cell
        for j in range(ow):
            win = x[:, :, hs[i]:he[i], ws[j]:we[j]].reshape(n, c, (he[i] - hs[i]) * (we[j] - ws[j]))
            a = win.argmax(axis=-1)
            y[:, :, i, j] = np.take_along_axis(win, a[..., None], axis=-1)[..., 0]
            kw = we[j] - ws[j]
            idx[:, :, i, j] = (hs[i] + a // kw) * w + ws[j] + a % kw
    return y, idx


def _adaptive_max_bprop(inputs, out, dout, out_hw):
    # the same scatter onto the argmax positions as max_pool2d's backward
    return (_max_pool_grad(dout[0], out[1], x_shape=tuple(inputs[0].shape)),)


_adaptive_max = defprim("adaptive_max_pool2d", _adaptive_max_infer, _adaptive_max_kernel, _adaptive_max_bprop,
                        doc="adaptive 2-d max pooling: (output, argmax)", sharding=SR.planewise)


def adaptive_max_pool2d(input, output_size, return_indices=False):
    """`ops.adaptive_max_pool2d(input, output_size, return_indices=False)`: input (N, C, H, W) or
    (C, H, W); windows as adaptive_avg_pool2d's. With return_indices, also the argmax (Int64 flat
    index into each H*W plane)."""
    from .shape import reshape
    op = "adaptive_max_pool2d"
    _check_adaptive_input(op, input)
    if not isinstance(return_indices, bool):
        raise C.OpTypeError(op, "'return_indices' to be a bool", repr(return_indices))
    out_hw = _output_size(op, output_size, input.shape[-2:])
    x = input if len(input.shape) == 4 else reshape(input, (1,) + tuple(input.shape))
    y, idx = _adaptive_max(x, out_hw=out_hw)
    if len(input.shape) == 3:
        y, idx = reshape(y, tuple(y.shape[1:])), reshape(idx, tuple(idx.shape[1:]))
    return (y, idx) if return_indices else y


__all__ = ["adaptive_avg_pool2d", "adaptive_max_pool2d", "avg_pool1d", "avg_pool2d", "max_pool2d"]
