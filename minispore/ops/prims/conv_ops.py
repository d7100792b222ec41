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
"""
from __future__ import annotations

from ...common.grad_state import wants_grad
from .. import _check as C
from .. import costs
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


def _conv2d_kernel(x, w, stride, pads, dilation, groups):
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


def _backprop_input_kernel(dy, w, x_shape, stride, pads, dilation, groups):
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


def _backprop_filter_kernel(dy, x, w_shape, stride, pads, dilation, groups):
    dy, x = _half_to_float32(dy, x)
    n = x.shape[0]
    cout = w_shape[0]
    oh, ow = dy.shape[2:]
    cols = _im2col(x, w_shape, stride, pads, dilation, groups, (oh, ow))      # (N, G, Cg*KH*KW, OH*OW)
    dyr = dy.reshape(n, groups, cout // groups, oh * ow)
    return (dyr @ cols.transpose(0, 1, 3, 2)).sum(axis=0).reshape(w_shape)


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


_conv2d = defprim("conv2d", _conv2d_infer, _conv2d_kernel, _conv2d_bprop, cost=_conv2d_cost,
                  doc="2-d cross-correlation, NCHW, im2col + matmul")
_backprop_input = defprim("conv2d_backprop_input", _backprop_input_infer, _backprop_input_kernel,
                          _backprop_input_bprop, doc="gradient of conv2d w.r.t. its input (col2im)",
                          cost=_conv2d_backprop_cost)
_backprop_filter = defprim("conv2d_backprop_filter", _backprop_filter_infer, _backprop_filter_kernel,
                           _backprop_filter_bprop, doc="gradient of conv2d w.r.t. its weight",
                           cost=_conv2d_backprop_cost)


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
