"""Quantized and communication-fused matrix products with MindSpore's names:

* `weight_quant_batch_matmul` — weight-only quantization (W8A16 style): int8 weights, float
  activations, y = x @ ((w + antiquant_offset) * antiquant_scale) + bias. The weight is dequantized
  a slice of rows at a time inside the kernel, so no full float copy of it ever exists (the point of
  storing it in int8).
* `quant_batch_matmul` — W8A8: int8 x int8 with exact integer accumulation, then requantized:
  y = (x1 @ x2 + bias) * scale (* per-token scale), as float, or as int8 with an offset.
* `matmul_allreduce` — a matmul whose result is all-reduced over a communication group (MindSpore's
  MC2 fusion overlaps the two). On one device the group has one member and the all-reduce is the
  identity, so this is a matmul (+ bias) with matmul's gradient.
"""
from __future__ import annotations

import numpy as np

from ...common import dtype as mstype
from ...common.grad_state import wants_grad
from .. import _check as C
from ..primitive import AbstractTensor, defprim

__all__ = ["matmul_allreduce", "quant_batch_matmul", "weight_quant_batch_matmul"]

_FLOAT_OUT = (mstype.float16, mstype.bfloat16, mstype.float32, mstype.float64)
DEQUANT_ROWS = 256                     # weight rows dequantized per step in weight_quant_batch_matmul


def _bool(op, arg, v):
    if not isinstance(v, bool):
        raise C.OpTypeError(op, f"'{arg}' to be a bool", repr(v))
    return v


def _mat_dims(op, arg, x, transpose, min_rank=2, max_rank=None):
    """(batch shape, rows, cols) of x as used in the product (after the optional transpose)."""
    n = len(x.shape)
    if n < min_rank or (max_rank is not None and n > max_rank):
        want = f"rank {min_rank}" if max_rank == min_rank else f"rank >= {min_rank}"
        raise C.OpValueError(op, f"'{arg}' of {want}", f"shape {tuple(x.shape)}")
    r, c = x.shape[-2], x.shape[-1]
    return tuple(x.shape[:-2]), (c, r) if transpose else (r, c)


def _channel_vector(op, arg, t, n, dtypes, allow_none=True):
    """A per-tensor (1,) or per-channel (n,) vector."""
    if t is None:
        if allow_none:
            return
        raise C.OpValueError(op, f"'{arg}' (a Tensor)", "None")
    C.tensor(op, arg, t)
    if t.dtype not in dtypes:
        raise C.OpTypeError(op, f"'{arg}' of dtype in {[str(d) for d in dtypes]}", str(t.dtype))
    if tuple(t.shape) not in ((1,), (n,)):
        raise C.OpValueError(op, f"'{arg}' of shape (1,) (per tensor) or ({n},) (per channel)", f"shape {tuple(t.shape)}")


# =================================================================================================
# weight_quant_batch_matmul
_WQ = "weight_quant_batch_matmul"


def _wq_infer(x, weight, antiquant_scale, antiquant_offset, quant_scale, quant_offset, bias, transpose_x,
              transpose_weight, antiquant_group_size):
    _bool(_WQ, "transpose_x", transpose_x)
    _bool(_WQ, "transpose_weight", transpose_weight)
    g = C.int_attr(_WQ, "antiquant_group_size", antiquant_group_size, 0)
    C.floating(_WQ, "x", x)
    C.tensor(_WQ, "weight", weight)
    if weight.dtype is not mstype.int8:
        raise C.OpTypeError(_WQ, "'weight' of dtype int8", str(weight.dtype))
    batch, (m, k) = _mat_dims(_WQ, "x", x, transpose_x)
    _, (k2, n) = _mat_dims(_WQ, "weight", weight, transpose_weight, 2, 2)
    if k != k2:
        raise C.OpValueError(_WQ, f"x's reduction dim ({k}) to equal weight's ({k2})",
                             f"shapes {tuple(x.shape)} and {tuple(weight.shape)}")
    groups = -(-k // g) if g else 0
    allowed = ((1,), (n,), (1, n)) + (((groups, n),) if g else ())
    for arg, t in (("antiquant_scale", antiquant_scale), ("antiquant_offset", antiquant_offset)):
        if t is None:
            if arg == "antiquant_scale":
                raise C.OpValueError(_WQ, "'antiquant_scale' (a Tensor)", "None")
            continue
        C.floating(_WQ, arg, t)
        if t.dtype is not x.dtype:
            raise C.OpTypeError(_WQ, f"'{arg}' with the dtype of 'x' ({x.dtype})", str(t.dtype))
        if tuple(t.shape) not in allowed:
            raise C.OpValueError(_WQ, f"'{arg}' of shape (1,), ({n},), (1, {n})"
                                      + (f" or ({groups}, {n}) (one row per group of {g})" if g else ""),
                                 f"shape {tuple(t.shape)}")
    if bias is not None:
        C.floating(_WQ, "bias", bias)
        if tuple(bias.shape) not in ((n,), (1, n)):
            raise C.OpValueError(_WQ, f"'bias' of shape ({n},)", f"shape {tuple(bias.shape)}")
    out_dtype = x.dtype
    if quant_scale is not None:
        _channel_vector(_WQ, "quant_scale", quant_scale, n, _FLOAT_OUT)
        _channel_vector(_WQ, "quant_offset", quant_offset, n, _FLOAT_OUT)
        out_dtype = mstype.int8
    elif quant_offset is not None:
        raise C.OpValueError(_WQ, "'quant_offset' only with 'quant_scale'", "an offset without a scale")
    return AbstractTensor(batch + (m, n), out_dtype)


def _requant_int8(y, scale, offset):
    """int8 output: saturate(round(y * scale + offset))."""
    y = y * scale.reshape(-1)
    if offset is not None:
        y += offset.reshape(-1)
    return np.clip(np.rint(y), -128, 127).astype(np.int8)


def _wq_kernel(x, weight, antiquant_scale, antiquant_offset, quant_scale, quant_offset, bias, transpose_x,
               transpose_weight, antiquant_group_size):
    cdt = np.float64 if x.dtype == np.float64 else np.float32
    xm = (np.swapaxes(x, -1, -2) if transpose_x else x).astype(cdt, copy=False)
    w = weight.T if transpose_weight else weight                       # (k, n) int8 view
    k, n = w.shape
    g = antiquant_group_size

    def rows_of(t, r0, r1):
        """The scale/offset rows that apply to weight rows r0:r1 (broadcast against (r1 - r0, n))."""
        t = t.astype(cdt, copy=False)
        if t.ndim == 2 and t.shape[0] > 1:                           # per group: repeat each group's row
            return np.repeat(t, g, axis=0)[r0:r1]
        return t.reshape(1, -1)

    y = np.zeros(xm.shape[:-1] + (n,), cdt)
    step = DEQUANT_ROWS if not g else max(g, DEQUANT_ROWS // g * g)
    for r0 in range(0, k, step):
        r1 = min(r0 + step, k)
        wf = w[r0:r1].astype(cdt)                                      # only this slice in float
        if antiquant_offset is not None:
            wf += rows_of(antiquant_offset, r0, r1)
        wf *= rows_of(antiquant_scale, r0, r1)
        y += xm[..., r0:r1] @ wf
        del wf                                                         # freed before the next slice
    if bias is not None:
        y += bias.astype(cdt).reshape(-1)
    if quant_scale is not None:
        return _requant_int8(y, quant_scale, quant_offset)
    return y


_weight_quant_batch_matmul = defprim(_WQ, _wq_infer, _wq_kernel, None,
                                     doc="x @ dequant(int8 weight) (+ bias), dequantized slice by slice")


def weight_quant_batch_matmul(x, weight, antiquant_scale, antiquant_offset=None, quant_scale=None,
                              quant_offset=None, bias=None, transpose_x=False, transpose_weight=False,
                              antiquant_group_size=0):
    """`ops.weight_quant_batch_matmul(...)` (W8A16): y = x @ ((weight + antiquant_offset) * antiquant_scale) + bias.

    * x float (..., m, k) ((..., k, m) with transpose_x); weight int8 (k, n) ((n, k) with transpose_weight).
    * antiquant_scale / antiquant_offset (x's dtype): per tensor (1,), per output channel (n,) or
      (1, n), or per group of `antiquant_group_size` input rows ((ceil(k / group), n)).
    * quant_scale / quant_offset (optional): quantize the output to int8,
      saturate(round(y * quant_scale + quant_offset)), per tensor (1,) or per channel (n,).
    Inference only (not differentiable).
    """
    return _weight_quant_batch_matmul(x, weight, antiquant_scale, antiquant_offset, quant_scale, quant_offset,
                                      bias, transpose_x=transpose_x, transpose_weight=transpose_weight,
                                      antiquant_group_size=antiquant_group_size)


# =================================================================================================
# quant_batch_matmul
_QB = "quant_batch_matmul"


def _qb_infer(x1, x2, scale, offset, bias, pertoken_scale, transpose_x1, transpose_x2, dtype):
    _bool(_QB, "transpose_x1", transpose_x1)
    _bool(_QB, "transpose_x2", transpose_x2)
    if not isinstance(dtype, mstype.DType) or dtype not in _FLOAT_OUT + (mstype.int8,):
        raise C.OpTypeError(_QB, "'dtype' float16, bfloat16, float32, float64 or int8", repr(dtype))
    for arg, t in (("x1", x1), ("x2", x2)):
        C.tensor(_QB, arg, t)
        if t.dtype is not mstype.int8:
            raise C.OpTypeError(_QB, f"'{arg}' of dtype int8", str(t.dtype))
    b1, (m, k) = _mat_dims(_QB, "x1", x1, transpose_x1)
    b2, (k2, n) = _mat_dims(_QB, "x2", x2, transpose_x2)
    if k != k2:
        raise C.OpValueError(_QB, f"x1's reduction dim ({k}) to equal x2's ({k2})",
                             f"shapes {tuple(x1.shape)} and {tuple(x2.shape)}")
    batch = C.broadcast(_QB, b1, b2)
    _channel_vector(_QB, "scale", scale, n, (mstype.float32, mstype.float64), allow_none=False)
    if offset is not None:
        if dtype is not mstype.int8:
            raise C.OpValueError(_QB, "'offset' only with dtype=int8 output", f"dtype={dtype}")
        _channel_vector(_QB, "offset", offset, n, (mstype.float32, mstype.float64))
    if bias is not None:
        C.tensor(_QB, "bias", bias)
        if bias.dtype is not mstype.int32 or tuple(bias.shape) not in ((n,), (1, n)):
            raise C.OpValueError(_QB, f"an int32 'bias' of shape ({n},)",
                                 f"Tensor(shape={tuple(bias.shape)}, dtype={bias.dtype})")
    if pertoken_scale is not None:
        if dtype is mstype.int8:
            raise C.OpValueError(_QB, "'pertokenScaleOptional' only with a float output dtype", "dtype=Int8")
        C.tensor(_QB, "pertokenScaleOptional", pertoken_scale)
        if pertoken_scale.dtype not in (mstype.float32, mstype.float64) or tuple(pertoken_scale.shape) != (m,):
            raise C.OpValueError(_QB, f"a float32 'pertokenScaleOptional' of shape ({m},) (one per row of x1)",
                                 f"Tensor(shape={tuple(pertoken_scale.shape)}, dtype={pertoken_scale.dtype})")
    return AbstractTensor(batch + (m, n), dtype)


def _qb_kernel(x1, x2, scale, offset, bias, pertoken_scale, transpose_x1, transpose_x2, dtype):
    a = np.swapaxes(x1, -1, -2) if transpose_x1 else x1
    b = np.swapaxes(x2, -1, -2) if transpose_x2 else x2
    # int8 x int8 sums are integers below 2**53 for any realistic k: a float64 BLAS product is exact
    acc = np.rint(a.astype(np.float64) @ b.astype(np.float64))
    if bias is not None:
        acc += bias.reshape(-1)
    if dtype is mstype.int8:
        return _requant_int8(acc, scale.astype(np.float64), None if offset is None else offset.astype(np.float64))
    y = acc * scale.astype(np.float64).reshape(-1)
    if pertoken_scale is not None:
        y *= pertoken_scale.astype(np.float64)[:, None]
    return y


_quant_batch_matmul = defprim(_QB, _qb_infer, _qb_kernel, None,
                              doc="int8 x int8 matmul with exact accumulation, then (x + bias) * scale")


def quant_batch_matmul(x1, x2, scale, offset=None, bias=None, pertokenScaleOptional=None, transpose_x1=False,
                       transpose_x2=False, dtype=mstype.float16):
    """`ops.quant_batch_matmul(...)` (W8A8): int8 x1 (..., m, k) @ int8 x2 (..., k, n), accumulated exactly
    in integers, then y = (acc + bias) * scale [* pertokenScaleOptional per row], returned as `dtype`
    (float16 by default). With dtype=int8: saturate(round((acc + bias) * scale + offset)).

    scale / offset: float32, per tensor (1,) or per output channel (n,); bias: int32 (n,);
    pertokenScaleOptional: float32 (m,) (per-token activation scales of dynamic quantization).
    Inference only (not differentiable).
    """
    return _quant_batch_matmul(x1, x2, scale, offset, bias, pertokenScaleOptional, transpose_x1=transpose_x1,
                               transpose_x2=transpose_x2, dtype=dtype)


# =================================================================================================
# matmul_allreduce
_MAR = "matmul_allreduce"


def _mar_infer(x, w, bias, trans_input, trans_x2):
    _bool(_MAR, "trans_input", trans_input)
    _bool(_MAR, "trans_x2", trans_x2)
    C.floating(_MAR, "input", x)
    C.floating(_MAR, "x2", w)
    if x.dtype is not w.dtype:
        raise C.OpTypeError(_MAR, f"'x2' with the dtype of 'input' ({x.dtype})", str(w.dtype))
    batch, (m, k) = _mat_dims(_MAR, "input", x, trans_input)
    _, (k2, n) = _mat_dims(_MAR, "x2", w, trans_x2, 2, 2)
    if k != k2:
        raise C.OpValueError(_MAR, f"input's reduction dim ({k}) to equal x2's ({k2})",
                             f"shapes {tuple(x.shape)} and {tuple(w.shape)}")
    if bias is not None:
        C.floating(_MAR, "bias", bias)
        if bias.dtype is not x.dtype or tuple(bias.shape) != (n,):
            raise C.OpValueError(_MAR, f"a 'bias' of shape ({n},) and dtype {x.dtype}",
                                 f"Tensor(shape={tuple(bias.shape)}, dtype={bias.dtype})")
    return AbstractTensor(batch + (m, n), x.dtype)


def _mar_kernel(x, w, bias, trans_input, trans_x2):
    a = np.swapaxes(x, -1, -2) if trans_input else x
    b = w.T if trans_x2 else w
    if a.dtype.itemsize < 4:                  # float16/bfloat16: accumulate in float32, round once
        a, b = a.astype(np.float32), b.astype(np.float32)
    y = a @ b
    if bias is not None:
        y += bias.astype(y.dtype)
    return y                                   # all-reduce over a one-member group: the identity


def _mar_bprop(inputs, out, dout, trans_input, trans_x2):
    """The all-reduce's transpose is another all-reduce (identity on one device); the rest is matmul's
    rule: dA = dY B^T, dB = sum_batch A^T dY, dbias = sum dY — re-oriented for the transposes."""
    from .elementwise import sum_to
    from .linalg import matmul
    from .reduction import reduce_sum
    from .shape import reshape, transpose
    x, w, bias = inputs
    nd = len(x.shape)
    swap = tuple(range(nd - 2)) + (nd - 1, nd - 2)
    a = transpose(x, swap) if trans_input else x
    b = transpose(w, (1, 0)) if trans_x2 else w
    dx = dw = db = None
    if wants_grad(inputs, 0):
        da = matmul(dout, transpose(b, (1, 0)))
        dx = transpose(da, swap) if trans_input else da
    if wants_grad(inputs, 1):
        k, n = a.shape[-1], dout.shape[-1]
        a2 = reshape(a, (-1, k))
        db_ = matmul(transpose(a2, (1, 0)), reshape(dout, (-1, n)))
        dw = transpose(db_, (1, 0)) if trans_x2 else db_
    if bias is not None and wants_grad(inputs, 2):
        db = sum_to(dout, bias.shape) if nd > 1 else reduce_sum(dout)
    return dx, dw, db


_matmul_allreduce = defprim(_MAR, _mar_infer, _mar_kernel, _mar_bprop,
                            doc="matmul (+ bias) followed by an all-reduce over the group (identity on one device)")


def matmul_allreduce(input, x2, group="hccl_world_group", reduce_op="sum", *, bias=None, comm_turn=0,
                     trans_input=False, trans_x2=False):
    """`matmul_allreduce(input, x2, group, reduce_op='sum', *, bias=None, comm_turn=0, trans_input=False,
    trans_x2=False)`: y = all_reduce(input @ x2 + bias) over `group` (MindSpore's MatMul+AllReduce MC2
    fusion, the tensor-parallel row-split linear layer).

    minispore runs on one device: every group has one member and the all-reduce is the identity, so
    y = input @ x2 + bias. input (..., m, k) float, x2 (k, n) (transposed flags as named), bias (n,).
    Differentiable in input, x2 and bias.
    """
    if not isinstance(group, str) or not group:
        raise C.OpTypeError(_MAR, "'group' as a communication group name (str)", repr(group))
    if not isinstance(reduce_op, str) or reduce_op != "sum":
        raise C.OpValueError(_MAR, "reduce_op 'sum'", repr(reduce_op))
    C.int_attr(_MAR, "comm_turn", comm_turn, 0)
    return _matmul_allreduce(input, x2, bias, trans_input=trans_input, trans_x2=trans_x2)
