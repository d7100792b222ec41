"""Op table: the fused layer ops (add_rms_norm, rotary_position_embedding, swiglu) and the quantized /
communication-fused matmuls (weight_quant_batch_matmul, quant_batch_matmul, matmul_allreduce).

References are the unfused definitions in float64: the residual add then RMSNorm, RoPE through
explicit rotate_half / rotate_interleaved, silu(a) * b from the split halves, the dequantized weight
materialized in full, integer products computed in Python-int-exact int64.

int8 outputs are compared exactly, so their samples are built to avoid rounding ties: integer-valued
activations and power-of-two scales make every pre-rounding value a multiple of 1/8 that is never
exactly half-way between two integers.
"""
import numpy as np

from ... import ops
from ...common import dtype as mstype
from ..opinfo import OpInfo, SampleInput, noncontig, positive, rand, register

F16_32_64 = (mstype.float16, mstype.bfloat16, mstype.float32, mstype.float64)
F32_64 = (mstype.float32, mstype.float64)


# =================================================================================================
# add_rms_norm
def add_rms_norm_ref(x1, x2, gamma, epsilon=1e-6):
    x = x1 + x2
    axes = tuple(range(x.ndim - gamma.ndim, x.ndim))
    rstd = 1.0 / np.sqrt((x * x).mean(axis=axes, keepdims=True) + epsilon)
    return x * rstd * gamma, rstd, x


def _arn_samples(rng, dtype):
    yield SampleInput((rand(rng, (3, 5), dtype), rand(rng, (3, 5), dtype), rand(rng, (5,), dtype)))
    yield SampleInput((rand(rng, (2, 3, 4), dtype), rand(rng, (2, 3, 4), dtype), rand(rng, (3, 4), dtype)),
                      {"epsilon": 1e-3}, desc="2-d gamma")
    yield SampleInput((noncontig(rand(rng, (4, 3), dtype)), rand(rng, (4, 3), dtype), rand(rng, (3,), dtype)),
                      desc="non-contiguous")


# =================================================================================================
# rotary_position_embedding
def rope_ref(x, cos, sin, mode=0):
    d = x.shape[-1]
    if mode == 0:
        rot = np.concatenate([-x[..., d // 2:], x[..., :d // 2]], axis=-1)
    else:
        rot = np.stack([-x[..., 1::2], x[..., 0::2]], axis=-1).reshape(x.shape)
    return x * cos + rot * sin


def _tables(s, d, mode, dtype, theta=10000.0):
    freqs = theta ** (-np.arange(0, d, 2) / d)
    ang = np.outer(np.arange(s), freqs)
    ang = np.concatenate([ang, ang], -1) if mode == 0 else np.repeat(ang, 2, axis=-1)
    return np.cos(ang).astype(dtype), np.sin(ang).astype(dtype)


def _rope_samples(rng, dtype):
    for mode in (0, 1):
        cos, sin = _tables(5, 4, mode, dtype)
        yield SampleInput((rand(rng, (2, 3, 5, 4), dtype), cos[None, None], sin[None, None]), {"mode": mode},
                          desc=f"mode {mode}, (B, N, S, D) with (1, 1, S, D) tables")
    yield SampleInput((rand(rng, (1, 2, 3, 6), dtype), rand(rng, (1, 2, 3, 6), dtype), rand(rng, (1, 2, 3, 6), dtype)),
                      {"mode": 1}, desc="full-shape arbitrary tables (gradients for cos/sin)")
    cos, sin = _tables(3, 4, 0, dtype)
    yield SampleInput((noncontig(rand(rng, (2, 3, 2, 4), dtype).swapaxes(1, 2)), cos[None, None], sin[None, None]),
                      desc="non-contiguous BNSD view of a BSND tensor")


# =================================================================================================
# swiglu
def swiglu_ref(x, dim=-1):
    a, b = np.split(x, 2, axis=dim)
    return a / (1.0 + np.exp(-a)) * b


def _swiglu_samples(rng, dtype):
    yield SampleInput((rand(rng, (3, 8), dtype),))
    yield SampleInput((rand(rng, (4, 2, 3), dtype),), {"dim": 0}, desc="dim 0")
    yield SampleInput((noncontig(rand(rng, (6, 4), dtype)),), {"dim": 1}, desc="non-contiguous")
    yield SampleInput((np.array([[-60.0, -3.0, 0.5, 40.0, 1.0, -2.0, 3.0, 0.25]], dtype),), desc="extreme gates")


# =================================================================================================
# weight_quant_batch_matmul
def wq_ref(x, weight, antiquant_scale, antiquant_offset=None, quant_scale=None, quant_offset=None, bias=None,
           transpose_x=False, transpose_weight=False, antiquant_group_size=0):
    w = (weight.T if transpose_weight else weight).astype(np.float64)
    k = w.shape[0]

    def expand(t):
        if t.ndim == 2 and t.shape[0] > 1:                        # one row per group of input rows
            return np.repeat(t, antiquant_group_size, axis=0)[:k]
        return t.reshape(1, -1)
    if antiquant_offset is not None:
        w = w + expand(antiquant_offset)
    w = w * expand(antiquant_scale)
    xm = np.swapaxes(x, -1, -2) if transpose_x else x
    y = xm @ w
    if bias is not None:
        y = y + bias.reshape(-1)
    if quant_scale is not None:
        y = y * quant_scale.reshape(-1) + (0.0 if quant_offset is None else quant_offset.reshape(-1))
        return np.clip(np.rint(y), -128, 127).astype(np.int8)
    return y


def _int8(rng, shape, lo=-127, hi=128):
    return rng.integers(lo, hi, shape).astype(np.int8)


def _wq_samples(rng, dtype):
    x = rand(rng, (3, 6), dtype)
    yield SampleInput((x, _int8(rng, (6, 4)), rand(rng, (4,), dtype, 0.01, 0.02)), desc="per-channel scale")
    yield SampleInput((rand(rng, (2, 3, 6), dtype), _int8(rng, (4, 6)), rand(rng, (1, 4), dtype, 0.01, 0.02),
                       rand(rng, (1, 4), dtype, -2, 2), None, None, rand(rng, (4,), dtype)),
                      {"transpose_weight": True}, desc="batched x, (n, k) weight, offset, bias")
    yield SampleInput((rand(rng, (6, 3), dtype), _int8(rng, (6, 4)), rand(rng, (1,), dtype, 0.01, 0.02)),
                      {"transpose_x": True}, desc="per-tensor scale, transposed x")
    yield SampleInput((rand(rng, (2, 10), dtype), _int8(rng, (10, 3)), rand(rng, (3, 3), dtype, 0.01, 0.02),
                       rand(rng, (3, 3), dtype, -1, 1)), {"antiquant_group_size": 4},
                      desc="per-group (4 rows) scale/offset, ragged last group")
    # int8 output: integer x, scales 0.5, offsets chosen so y*qs + qo is k/4 + 1/8 (never a .5 tie)
    xi = rng.integers(-3, 4, (2, 6)).astype(dtype)
    yield SampleInput((xi, _int8(rng, (6, 3), -5, 6), np.full((3,), 0.5, dtype), np.full((3,), 2.0, dtype),
                       np.array([0.5], np.float32), np.array([0.125], np.float32)),
                      desc="quantized int8 output (quant_scale / quant_offset)")


# =================================================================================================
# quant_batch_matmul
def qb_ref(x1, x2, scale, offset=None, bias=None, pertokenScaleOptional=None, transpose_x1=False,
           transpose_x2=False, dtype=mstype.float16):
    a = np.swapaxes(x1, -1, -2) if transpose_x1 else x1
    b = np.swapaxes(x2, -1, -2) if transpose_x2 else x2
    acc = a.astype(np.int64) @ b.astype(np.int64)
    if bias is not None:
        acc = acc + bias.astype(np.int64).reshape(-1)
    y = acc * scale.reshape(-1).astype(np.float64)
    if dtype is mstype.int8:
        return np.clip(np.rint(y + (0.0 if offset is None else offset.reshape(-1))), -128, 127).astype(np.int8)
    if pertokenScaleOptional is not None:
        y = y * pertokenScaleOptional.astype(np.float64)[:, None]
    return y


def _qb_samples(rng, dtype):
    out = mstype.float32 if dtype == np.float32 else mstype.float64
    yield SampleInput((_int8(rng, (3, 16)), _int8(rng, (16, 5)), rand(rng, (5,), dtype, 1e-4, 1e-3)), {"dtype": out},
                      desc="per-channel scale")
    yield SampleInput((_int8(rng, (2, 3, 8)), _int8(rng, (5, 8)), rand(rng, (1,), dtype, 1e-4, 1e-3), None,
                       rng.integers(-1000, 1000, (5,)).astype(np.int32), positive(rng, (3,), dtype)),
                      {"transpose_x2": True, "dtype": out}, desc="batched, bias, per-token scale")
    # float16 output: small integers and a power-of-two scale, so the exact result is a float16 number
    yield SampleInput((_int8(rng, (4, 3), -7, 8), _int8(rng, (4, 2), -7, 8), np.full((2,), 2.0 ** -6, dtype)),
                      {"transpose_x1": True, "dtype": mstype.float16}, desc="float16 output")
    # int8 output: scale 1/16 and offset 1/32 + 0.25 keep y off the .5 ties
    yield SampleInput((_int8(rng, (2, 4), -6, 7), _int8(rng, (4, 3), -6, 7), np.full((3,), 0.0625, dtype),
                       np.array([0.28125], dtype)), {"dtype": mstype.int8}, desc="requantized int8 output")


# =================================================================================================
# matmul_allreduce
def mar_ref(input, x2, group="hccl_world_group", reduce_op="sum", bias=None, comm_turn=0, trans_input=False,
            trans_x2=False):
    a = np.swapaxes(input, -1, -2) if trans_input else input
    y = a @ (x2.T if trans_x2 else x2)
    return y if bias is None else y + bias


def _mar_op(x, w, bias=None, **kw):
    return ops.matmul_allreduce(x, w, bias=bias, **kw)


def _mar_ref(x, w, bias=None, **kw):
    return mar_ref(x, w, bias=bias, **kw)


def _mar_samples(rng, dtype):
    yield SampleInput((rand(rng, (3, 4), dtype), rand(rng, (4, 5), dtype)))
    yield SampleInput((rand(rng, (2, 3, 4), dtype), rand(rng, (5, 4), dtype), rand(rng, (5,), dtype)),
                      {"trans_x2": True}, desc="batched, transposed x2, bias")
    yield SampleInput((rand(rng, (4, 3), dtype), noncontig(rand(rng, (4, 2), dtype))), {"trans_input": True},
                      desc="transposed input, non-contiguous x2")


register(
    OpInfo("add_rms_norm", ops.add_rms_norm, add_rms_norm_ref, _arn_samples, dtypes=F16_32_64,
           tols={mstype.float16: (5e-3, 5e-3)}),
    OpInfo("rotary_position_embedding", ops.rotary_position_embedding, rope_ref, _rope_samples, dtypes=F16_32_64),
    OpInfo("swiglu", ops.swiglu, swiglu_ref, _swiglu_samples, dtypes=F16_32_64),
    OpInfo("weight_quant_batch_matmul", ops.weight_quant_batch_matmul, wq_ref, _wq_samples,
           dtypes=(mstype.float16, mstype.float32, mstype.float64), differentiable=False,
           tols={mstype.float16: (5e-3, 5e-3)}),
    OpInfo("quant_batch_matmul", ops.quant_batch_matmul, qb_ref, _qb_samples, dtypes=F32_64, differentiable=False,
           tols={mstype.float32: (1e-6, 1e-6), mstype.float64: (1e-6, 1e-6)}),
    OpInfo("matmul_allreduce", _mar_op, _mar_ref, _mar_samples, dtypes=F16_32_64,
           tols={mstype.float16: (5e-3, 5e-3), mstype.bfloat16: (2e-2, 2e-2)}, primitive="matmul_allreduce"),
)
