"""Fused attention: aclnnFlashAttentionScore and aclnnFlashAttentionScoreGrad (acl_api.md §5.3).

    out = softmax(mask(scale * q @ k^T)) @ v          (attenMask: 1 = masked out)

The fused kernel never materialises the Sq x Skv score matrix: it walks key/value tiles with an
online softmax and saves, per query row, the running max and the sum of exp(x - max) (as float32
[B, N, Sq, 8], the value repeated 8 times). The backward recomputes the probabilities tile by tile
from those two numbers instead of storing them.

Three levels:
* `flash_attention_device(backend, q, k, v, ...)` / `flash_attention_grad_device(...)` take and
  return DeviceTensors and only enqueue work;
* `flash_attention(q, k, v, ...)` / `flash_attention_grad(...)` take NumPy arrays and stage them
  (copy in, launch, synchronize, copy out) on the current Ascend backend;
* `k_flash_attention_score` / `k_flash_attention_score_grad`: the device kernels of minispore's
  primitives `flash_attention_score` and `flash_attention_score_grad` (kernels.py registers them,
  so `ops.flash_attention_score` and its gradient run here in PyNative and in graphs).

Layouts "BNSD", "BSND" and "BSH"; grouped-query attention when k/v have fewer heads than q.

**The primitives on aclnn.** minispore's forward returns (attention_out, softmax_lse, seed) with
lse = max + log(sum) per query row, where aclnn returns the max and the sum [B, N, Sq, 8]; its
backward takes lse (and its cotangent dlse) where aclnn takes max and sum. So:

* forward: aclnnFlashAttentionScore, then lse from max and sum. The aclnn set the plugin binds has
  no Log operator, so this step synchronizes the stream and computes the B*N*Sq numbers on the
  host (the only synchronization inside a graph: one per attention call);
* backward: max = lse and sum = 1 describe the same probabilities, p = exp(s - max) / sum; aclnn has
  no dlse input, so the kernel reads dlse (synchronizing) and runs aclnn only when it is zero -
  always, unless someone differentiates through the lse, which `ops.flash_attention_score` does
  not return - and the counted CPU fallback otherwise.

What aclnn (and the emulator) cannot do is handed to the CPU reference per call, counted in
`backend.fallbacks`: float64, layout "SBH", real_shift (pse), dropout (keep_prob < 1, drop_mask),
sparse modes 4 and 5, an int8 or 3-d attn_mask, empty tensors. Modes 2/3 generate their pattern
from the mode, so their (optional) compressed mask template is not passed on.
"""
from __future__ import annotations

import math

import numpy as np

from minispore.backend.base import DeviceTensor
from minispore.common import dtype as mstype

from .aclnn import AclnnCall
from .fallback import cpu_fallback

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
        _launch_forward(backend, q, k, v, atten_mask, smax, ssum, out, stream, head_num=head_num, layout=layout,
                        scale=scale, sparse_mode=sparse_mode, pre_tokens=pre_tokens, next_tokens=next_tokens)
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


# -- the primitives' device kernels -------------------------------------------------------------------
_ACLNN_DTYPES = ("float16", "bfloat16", "float32")
_MASK_DTYPES = ("bool", "uint8")


def _aclnn_can_run(ins, attrs) -> bool:
    """Does this flash_attention_score(_grad) call fit aclnnFlashAttentionScore(Grad)? (module docstring)"""
    q, k, pse, drop_mask, mask = ins[0], ins[1], ins[3], ins[4], ins[5]
    if q.dtype.np.name not in _ACLNN_DTYPES or not q.size or not k.size:
        return False
    if attrs["input_layout"] not in ("BNSD", "BSND", "BSH") or attrs["sparse_mode"] not in (0, 1, 2, 3):
        return False
    if pse is not None or drop_mask is not None or attrs["keep_prob"] != 1.0 or attrs.get("prefix") is not None:
        return False
    if mask is not None and attrs["sparse_mode"] in (0, 1):
        return mask.dtype.np.name in _MASK_DTYPES and mask.ndim in (2, 4)
    return True


def _fa_args(ins, attrs):
    """(q, k, v, mask, keyword arguments) of the aclnn call for the primitive's inputs and attributes."""
    q, k, v, mask = ins[0], ins[1], ins[2], ins[5]
    if attrs["sparse_mode"] in (2, 3):
        mask = None                              # the pattern comes from the mode
    return q, k, v, mask, dict(head_num=int(attrs["head_num"]), layout=attrs["input_layout"],
                               scale=float(attrs["scale_value"]), sparse_mode=int(attrs["sparse_mode"]),
                               pre_tokens=int(attrs["pre_tokens"]), next_tokens=int(attrs["next_tokens"]))


def k_flash_attention_score(b, ins, outs, attrs, stream):
    """flash_attention_score(q, k, v, real_shift, drop_mask, attn_mask) -> (out, softmax_lse, seed)."""
    if not _aclnn_can_run(ins, attrs):
        return cpu_fallback(b, "flash_attention_score", ins, outs, attrs, stream)
    q, k, v, mask, kw = _fa_args(ins, attrs)
    out, lse, seed = outs
    n, sq, _ = _heads_and_len(q.shape, kw["layout"], kw["head_num"])
    stats = (q.shape[0], n, sq, 8)
    smax, ssum = _new(b, stats, mstype.float32), _new(b, stats, mstype.float32)
    try:
        _launch_forward(b, q, k, v, mask, smax, ssum, out, stream, **kw)
        b.synchronize_stream(stream)            # lse needs the max and sum (no Log in the aclnn set bound)
        mx, total = b.to_host(smax)[..., 0].astype(np.float64), b.to_host(ssum)[..., 0].astype(np.float64)
    finally:
        _release(b, (smax, ssum))
    with np.errstate(divide="ignore"):
        host_lse = np.where(total > 0, mx + np.log(total), -np.inf)          # a row that sees nothing: -inf
    b.copy_h2d(lse.buffer, np.ascontiguousarray(host_lse.reshape(lse.shape), dtype=lse.dtype.np), offset=lse.offset)
    b.copy_h2d(seed.buffer, np.zeros(seed.shape, seed.dtype.np), offset=seed.offset)   # no dropout: seed 0


def k_flash_attention_score_grad(b, ins, outs, attrs, stream):
    """flash_attention_score_grad(dout, dlse, q, k, v, out, lse, seed, real_shift, drop_mask, attn_mask)
    -> (dq, dk, dv)."""
    dout, dlse, q, k, v, out, lse = ins[:7]
    if not _aclnn_can_run([q, k, v, ins[8], ins[9], ins[10]], attrs):
        return cpu_fallback(b, "flash_attention_score_grad", ins, outs, attrs, stream)
    b.synchronize_stream(stream)                # dlse and lse are read on the host
    if np.any(b.to_host(dlse) != 0):
        return cpu_fallback(b, "flash_attention_score_grad", ins, outs, attrs, stream)
    q, k, v, mask, kw = _fa_args([q, k, v, None, None, ins[10]], attrs)
    stats = np.ascontiguousarray(np.broadcast_to(b.to_host(lse).astype(np.float32)[..., None], lse.shape + (8,)))
    smax = b.to_device(stats)                   # max = lse, sum = 1: p = exp(s - lse)
    ssum = b.to_device(np.ones_like(stats))
    dq, dk, dv = outs
    try:
        with AclnnCall(b, "aclnnFlashAttentionScoreGrad") as c:
            c.launch(stream, c.tensor(q), c.tensor(k), c.tensor(v), c.tensor(dout), None, None, None, c.tensor(mask),
                     c.tensor(smax), c.tensor(ssum), None, c.tensor(out), None, kw["scale"], 1.0, kw["pre_tokens"],
                     kw["next_tokens"], kw["head_num"], kw["layout"].encode(), 0, kw["sparse_mode"], c.tensor(dq),
                     c.tensor(dk), c.tensor(dv), None)
    finally:
        b.free_after_sync(smax.buffer, stream)  # the queued kernel still reads them
        b.free_after_sync(ssum.buffer, stream)


def _launch_forward(b, q, k, v, mask, smax, ssum, out, stream, *, head_num, layout, scale, sparse_mode,
                    pre_tokens, next_tokens):
    with AclnnCall(b, "aclnnFlashAttentionScore") as c:
        c.launch(stream, c.tensor(q), c.tensor(k), c.tensor(v), None, None, None, c.tensor(mask), None,
                 scale, 1.0, pre_tokens, next_tokens, head_num, layout.encode(), 0, sparse_mode,
                 c.tensor(smax), c.tensor(ssum), None, c.tensor(out))
