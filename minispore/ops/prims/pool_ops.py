"""2-d max and average pooling (NCHW), with PyTorch's/MindSpore's window and ceil_mode rules.

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
                    doc="2-d max pooling: (output, argmax)")
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


_avg_pool = defprim("avg_pool2d", _avg_pool_infer, _avg_pool_kernel, _avg_pool_bprop, doc="2-d average pooling")
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


__all__ = ["avg_pool2d", "max_pool2d"]
