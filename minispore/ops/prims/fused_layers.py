"""Fused transformer-layer ops with MindSpore's names: `add_rms_norm` (residual add + RMSNorm),
`rotary_position_embedding` (RoPE) and `swiglu` (SiLU-gated linear unit).

Each is one primitive: one NumPy kernel and one dispatch where the unfused version is 3-8 eager
ops, each a full pass over the activations. Backward rules are written in minispore ops (with the
existing fused backward primitives `rms_norm_grad` and `silu_grad`), so grad-of-grad works.
"""
from __future__ import annotations

import numpy as np

from ...common.grad_state import wants_grad
from .. import _check as C
from .. import sharding_rules as SR
from ..primitive import AbstractTensor, defprim, get_primitive
from ._nn_common import compute_dtype
from .norm_ops import _rms_norm_infer, _rms_norm_kernel

__all__ = ["add_rms_norm", "rotary_position_embedding", "swiglu"]


# =================================================================================================
# add_rms_norm
_ARN = "add_rms_norm"


def _arn_infer(x1, x2, gamma, epsilon):
    C.floating(_ARN, "x1", x1)
    C.floating(_ARN, "x2", x2)
    if x1.dtype is not x2.dtype or tuple(x1.shape) != tuple(x2.shape):
        raise C.OpValueError(_ARN, "'x2' of the shape and dtype of 'x1'",
                             f"{tuple(x2.shape)} {x2.dtype} and {tuple(x1.shape)} {x1.dtype}")
    try:
        y, rstd = _rms_norm_infer(x1, gamma, epsilon)
    except C.OpValueError as e:
        raise C.OpValueError(_ARN, e.expected, e.got) from None
    except C.OpTypeError as e:
        raise C.OpTypeError(_ARN, e.expected, e.got) from None
    return y, rstd, AbstractTensor(x1.shape, x1.dtype)


def _arn_kernel(x1, x2, gamma, epsilon):
    x = x1 + x2                                     # the new residual stream, in the input dtype
    y, rstd = _rms_norm_kernel(x, gamma, epsilon)
    return y, rstd, x


def _arn_bprop(inputs, out, dout, epsilon):
    """x = x1 + x2 feeds both the norm and the third output: its gradient is the norm's dx plus
    that output's cotangent, and x1, x2 each receive it whole."""
    from .elementwise import add
    gamma = inputs[2]
    dy, drstd, dx_sum = dout
    dx, dgamma = get_primitive("rms_norm_grad")(dy, drstd, out[2], gamma, epsilon=epsilon)
    d = add(dx, dx_sum)
    return d, d, dgamma


_add_rms_norm = defprim(_ARN, _arn_infer, _arn_kernel, _arn_bprop,
                        doc="residual add then RMSNorm: (y, rstd, x1 + x2)", sharding=SR.add_rms_norm)


def add_rms_norm(x1, x2, gamma, epsilon=1e-6):
    """`ops.add_rms_norm(x1, x2, gamma, epsilon=1e-6)` -> `(y, rstd, x)`.

    x = x1 + x2 (the residual stream of a pre-norm transformer block), y = rms_norm(x, gamma)
    = x * rsqrt(mean(x**2) + epsilon) * gamma over gamma's trailing dims, rstd as in `rms_norm`.
    Fused: one kernel instead of an add and a normalization pass.
    """
    epsilon = C.float_attr(_ARN, "epsilon", epsilon, lo=0.0, hi=1.0)
    if epsilon == 0.0:
        raise C.OpValueError(_ARN, "'epsilon' in (0, 1]", "0.0")
    return _add_rms_norm(x1, x2, gamma, epsilon=epsilon)


# =================================================================================================
# rotary_position_embedding
_ROPE = "rotary_position_embedding"


def _rotate_np(u, mode):
    """R(u): mode 0 (rotate_half) [u1, u2] -> [-u2, u1]; mode 1 (interleaved) (a, b) pairs -> (-b, a)."""
    r = np.empty_like(u)
    if mode == 0:
        h = u.shape[-1] // 2
        np.negative(u[..., h:], out=r[..., :h])
        r[..., h:] = u[..., :h]
    else:
        np.negative(u[..., 1::2], out=r[..., 0::2])
        r[..., 1::2] = u[..., 0::2]
    return r


def _rotate_infer(u, mode):
    return AbstractTensor(u.shape, u.dtype)


def _rotate_bprop(inputs, out, dout, mode):
    # R is a rotation by +90 degrees in every pair: its transpose is the rotation by -90, i.e. -R
    from .elementwise import neg
    return (neg(_rope_rotate(dout, mode=mode)),)


_rope_rotate = defprim("rope_rotate", _rotate_infer, _rotate_np, _rotate_bprop,
                       doc="rotate every feature pair by 90 degrees (the linear part of RoPE)",
                       sharding=SR.rotate_pairs)


def _rope_infer(x, cos, sin, mode):
    C.floating(_ROPE, "x", x)
    m = C.int_attr(_ROPE, "mode", mode)
    if m not in (0, 1):
        raise C.OpValueError(_ROPE, "'mode' 0 (rotate_half) or 1 (rotate_interleaved)", repr(mode))
    if len(x.shape) < 1 or x.shape[-1] % 2:
        raise C.OpValueError(_ROPE, "'x' with an even last dim (the head dim)", f"shape {tuple(x.shape)}")
    for arg, t in (("cos", cos), ("sin", sin)):
        C.floating(_ROPE, arg, t)
        if t.dtype is not x.dtype:
            raise C.OpTypeError(_ROPE, f"'{arg}' with the dtype of 'x' ({x.dtype})", str(t.dtype))
        if len(t.shape) == 0 or len(t.shape) > len(x.shape) or C.broadcast(_ROPE, tuple(x.shape), tuple(t.shape)) != tuple(x.shape) \
                or t.shape[-1] != x.shape[-1]:
            raise C.OpValueError(_ROPE, f"'{arg}' broadcastable to x's shape {tuple(x.shape)} with the full head dim",
                                 f"shape {tuple(t.shape)}")
    return AbstractTensor(x.shape, x.dtype)


def _rope_kernel(x, cos, sin, mode):
    cdt = compute_dtype(x)
    x = x.astype(cdt, copy=False)
    cos, sin = cos.astype(cdt, copy=False), sin.astype(cdt, copy=False)
    out = x * cos
    if mode == 0:
        h = x.shape[-1] // 2
        out[..., :h] -= x[..., h:] * sin[..., :h]
        out[..., h:] += x[..., :h] * sin[..., h:]
    else:
        out[..., 0::2] -= x[..., 1::2] * sin[..., 0::2]
        out[..., 1::2] += x[..., 0::2] * sin[..., 1::2]
    return out


def _rope_bprop(inputs, out, dout, mode):
    """y = x * cos + R(x) * sin  =>  dx = dy * cos - R(dy * sin)  (R^T = -R),
    dcos = sum_to(dy * x),  dsin = sum_to(dy * R(x))."""
    from .elementwise import mul, sub, sum_to
    x, cos, sin = inputs
    dx = sub(mul(dout, cos), _rope_rotate(mul(dout, sin), mode=mode)) if wants_grad(inputs, 0) else None
    dcos = sum_to(mul(dout, x), cos.shape) if wants_grad(inputs, 1) else None
    dsin = sum_to(mul(dout, _rope_rotate(x, mode=mode)), sin.shape) if wants_grad(inputs, 2) else None
    return dx, dcos, dsin


_rotary_position_embedding = defprim(_ROPE, _rope_infer, _rope_kernel, _rope_bprop,
                                     doc="x * cos + rotate(x) * sin (RoPE), half-split or interleaved pairs",
                                     sharding=SR.rotary)


def rotary_position_embedding(x, cos, sin, mode=0):
    """`ops.rotary_position_embedding(x, cos, sin, mode=0)`: rotary position embedding.

    out = x * cos + rotate(x) * sin, on the last (head) dim D (even):

    * mode 0, rotate_half (GPT-NeoX / HuggingFace LLaMA): rotate([x1, x2]) = [-x2, x1] on the two
      halves; tables are usually cat(freqs, freqs).
    * mode 1, rotate_interleaved (GPT-J / Meta's original LLaMA): pairs (x[2i], x[2i+1]) ->
      (-x[2i+1], x[2i]); tables are usually repeat_interleave(freqs, 2).

    cos/sin broadcast against x (MindSpore uses 4-d tensors, e.g. x (B, N, S, D) with tables
    (1, 1, S, D)) and have x's dtype. Differentiable in x, cos and sin.
    """
    return _rotary_position_embedding(x, cos, sin, mode=mode)


# =================================================================================================
# swiglu
_SWIGLU = "swiglu"


def _swiglu_infer(x, dim):
    C.floating(_SWIGLU, "input", x)
    ax = C.axis(_SWIGLU, dim, len(x.shape))
    if len(x.shape) == 0 or x.shape[ax] % 2:
        raise C.OpValueError(_SWIGLU, f"an even size along dim {dim} (split into two halves)",
                             f"shape {tuple(x.shape)}")
    shape = list(x.shape)
    shape[ax] //= 2
    return AbstractTensor(shape, x.dtype)


def _swiglu_kernel(x, dim):
    x = x.astype(compute_dtype(x), copy=False)
    a, b = np.split(x, 2, axis=dim)
    # silu(a) * b with silu(a) = a / (1 + exp(-a)); exp(-a) overflowing to inf gives the right 0
    with np.errstate(over="ignore"):
        out = np.exp(-a)
    out += 1.0
    np.divide(a, out, out=out)
    out *= b
    return out


def _swiglu_bprop(inputs, out, dout, dim):
    """out = silu(a) * b  =>  da = silu'(a) * dout * b  (the fused silu_grad), db = silu(a) * dout."""
    from .activation import silu
    from .elementwise import mul
    from .shape_extra import concat, split
    x = inputs[0]
    half = x.shape[dim] // 2
    a, b = split(x, half, dim)
    da = get_primitive("silu_grad")(a, mul(dout, b))
    db = mul(silu(a), dout)
    return (concat((da, db), dim),)


_swiglu = defprim(_SWIGLU, _swiglu_infer, _swiglu_kernel, _swiglu_bprop,
                  doc="silu(first half) * second half along dim", sharding=SR.gated)


def swiglu(input, dim=-1):
    """`ops.swiglu(input, dim=-1)`: split `input` into halves a, b along `dim` and return
    silu(a) * b (Swish-gated linear unit, the LLaMA MLP activation on a merged gate/up projection);
    the result is half as large along `dim`."""
    return _swiglu(input, dim=dim)
