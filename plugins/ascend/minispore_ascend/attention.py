"""Fused attention: aclnnFlashAttentionScore and aclnnFlashAttentionScoreGrad (acl_api.md §5.3).

    out = softmax(mask(scale * q @ k^T)) @ v          (attenMask: 1 = masked out)

The fused kernel never materialises the Sq x Skv score matrix: it walks key/value tiles with an
online softmax and saves, per query row, the running max and the sum of exp(x - max) (as float32
[B, N, Sq, 8], the value repeated 8 times). The backward recomputes the probabilities tile by tile
from those two numbers instead of storing them.

Two levels:
* `flash_attention_device(backend, q, k, v, ...)` / `flash_attention_grad_device(...)` take and
  return DeviceTensors and only enqueue work (what a graph executor calls);
* `flash_attention(q, k, v, ...)` / `flash_attention_grad(...)` take NumPy arrays and stage them
  (copy in, launch, synchronize, copy out) on the current Ascend backend.

Layouts "BNSD", "BSND" and "BSH"; grouped-query attention when k/v have fewer heads than q.
"""
from __future__ import annotations

import math

import numpy as np

from minispore.backend.base import DeviceTensor
from minispore.common import dtype as mstype

from .aclnn import AclnnCall

MAX_TOKENS = 2147483647              # torch_npu's default pre/next tokens: no band limit


def _heads_and_len(shape, layout, head_num):
    if layout == "BNSD":
        return shape[1], shape[2], shape[3]
    if layout == "BSND":
        return shape[2], shape[1], shape[3]
    if layout == "BSH":
        return head_num, shape[1], shape[2] // head_num
    raise ValueError(f"layout must be BNSD, BSND or BSH, got {layout!r}")


def _new(backend, shape, dt):
    size = int(np.prod(shape)) * dt.np.itemsize
    return DeviceTensor(backend.alloc(max(size, 1)), shape, dt)


def _release(backend, tensors):
    for t in tensors:
        backend.free(t.buffer)


def flash_attention_device(backend, q, k, v, *, head_num, layout="BNSD", scale=None, atten_mask=None,
                           sparse_mode=0, pre_tokens=MAX_TOKENS, next_tokens=MAX_TOKENS, stream=None):
    """Enqueue the fused forward; returns (out, softmax_max, softmax_sum) DeviceTensors (owned by the caller)."""
    n, sq, d = _heads_and_len(q.shape, layout, head_num)
    scale = 1.0 / math.sqrt(d) if scale is None else float(scale)
    stream = backend.default_stream if stream is None else stream
    stats_shape = (q.shape[0], n, sq, 8)
    out = _new(backend, q.shape, q.dtype)
    smax = _new(backend, stats_shape, mstype.float32)
    ssum = _new(backend, stats_shape, mstype.float32)
    try:
        with AclnnCall(backend, "aclnnFlashAttentionScore") as c:
            c.launch(stream, c.tensor(q), c.tensor(k), c.tensor(v), None, None, None, c.tensor(atten_mask), None,
                     scale, 1.0, pre_tokens, next_tokens, head_num, layout.encode(), 0, sparse_mode,
                     c.tensor(smax), c.tensor(ssum), None, c.tensor(out))
    except BaseException:
        _release(backend, (out, smax, ssum))
        raise
    return out, smax, ssum


def flash_attention_grad_device(backend, q, k, v, dy, out, smax, ssum, *, head_num, layout="BNSD", scale=None,
                                atten_mask=None, sparse_mode=0, pre_tokens=MAX_TOKENS, next_tokens=MAX_TOKENS,
                                stream=None):
    """Enqueue the fused backward; returns (dq, dk, dv) DeviceTensors."""
    n, sq, d = _heads_and_len(q.shape, layout, head_num)
    scale = 1.0 / math.sqrt(d) if scale is None else float(scale)
    stream = backend.default_stream if stream is None else stream
    dq, dk, dv = _new(backend, q.shape, q.dtype), _new(backend, k.shape, k.dtype), _new(backend, v.shape, v.dtype)
    try:
        with AclnnCall(backend, "aclnnFlashAttentionScoreGrad") as c:
            c.launch(stream, c.tensor(q), c.tensor(k), c.tensor(v), c.tensor(dy), None, None, None,
                     c.tensor(atten_mask), c.tensor(smax), c.tensor(ssum), None, c.tensor(out), None, scale, 1.0,
                     pre_tokens, next_tokens, head_num, layout.encode(), 0, sparse_mode, c.tensor(dq), c.tensor(dk),
                     c.tensor(dv), None)
    except BaseException:
        _release(backend, (dq, dk, dv))
        raise
    return dq, dk, dv


def _current_ascend():
    from minispore.backend import registry
    return registry.get_backend("Ascend")


def _staged(backend, arrays, fn):
    """Copy `arrays` (None allowed) in, run `fn(*device_tensors) -> tuple`, sync, copy results out."""
    ins = [None if a is None else backend.to_device(np.asarray(a)) for a in arrays]
    outs = ()
    try:
        outs = fn(*ins)
        backend.synchronize_stream(backend.default_stream)
        return tuple(backend.to_host(o) for o in outs)
    finally:
        for t in list(ins) + list(outs):
            if t is not None:
                backend.free(t.buffer)


def flash_attention(q, k, v, *, head_num=None, layout="BNSD", scale=None, atten_mask=None, sparse_mode=0,
                    pre_tokens=MAX_TOKENS, next_tokens=MAX_TOKENS, backend=None):
    """NumPy in, NumPy out: (attention_out, softmax_max, softmax_sum). `atten_mask`: bool, True = masked."""
    b = backend or _current_ascend()
    head_num = head_num or _heads_and_len(np.shape(q), layout, 1)[0]
    mask = None if atten_mask is None else np.asarray(atten_mask, dtype=np.bool_)
    return _staged(b, [q, k, v, mask], lambda q_, k_, v_, m_: flash_attention_device(
        b, q_, k_, v_, head_num=head_num, layout=layout, scale=scale, atten_mask=m_, sparse_mode=sparse_mode,
        pre_tokens=pre_tokens, next_tokens=next_tokens))


def flash_attention_grad(q, k, v, dy, out, softmax_max, softmax_sum, *, head_num=None, layout="BNSD", scale=None,
                         atten_mask=None, sparse_mode=0, pre_tokens=MAX_TOKENS, next_tokens=MAX_TOKENS, backend=None):
    """NumPy in, NumPy out: (dq, dk, dv)."""
    b = backend or _current_ascend()
    head_num = head_num or _heads_and_len(np.shape(q), layout, 1)[0]
    mask = None if atten_mask is None else np.asarray(atten_mask, dtype=np.bool_)
    return _staged(b, [q, k, v, dy, out, softmax_max, softmax_sum, mask],
                   lambda q_, k_, v_, dy_, o_, mx_, sm_, m_: flash_attention_grad_device(
                       b, q_, k_, v_, dy_, o_, mx_, sm_, head_num=head_num, layout=layout, scale=scale,
                       atten_mask=m_, sparse_mode=sparse_mode, pre_tokens=pre_tokens, next_tokens=next_tokens))
