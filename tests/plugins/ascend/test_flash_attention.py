"""aclnnFlashAttentionScore / ...Grad against naive attention in float64 (forward and backward)."""
import math

import numpy as np
import pytest

from minispore_ascend.attention import flash_attention, flash_attention_grad


def naive(q, k, v, mask, scale):
    """BNSD float64 reference; GQA by repeating k/v heads. Returns out, row max, row sum, probs."""
    g = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, g, axis=1), np.repeat(v, g, axis=1)
    s = scale * q @ np.swapaxes(k, -1, -2)
    if mask is not None:
        s = np.where(mask, -np.inf, s)
    m = s.max(-1, keepdims=True)
    e = np.exp(s - m)
    l = e.sum(-1, keepdims=True)
    p = e / l
    return p @ v, m[..., 0], l[..., 0], p, k, v


def naive_grad(q, k, v, mask, scale, dy):
    out, _, _, p, kr, vr = naive(q, k, v, mask, scale)
    dv = np.swapaxes(p, -1, -2) @ dy
    dp = dy @ np.swapaxes(vr, -1, -2)
    ds = p * (dp - (dp * p).sum(-1, keepdims=True))
    dq = scale * ds @ kr
    dk = scale * np.swapaxes(ds, -1, -2) @ q
    g = q.shape[1] // k.shape[1]
    fold = lambda t: t.reshape(t.shape[0], k.shape[1], g, *t.shape[2:]).sum(2)      # GQA: sum shared heads
    return dq, fold(dk), fold(dv)


def rel(a, b):
    return np.abs(a - b).max() / max(np.abs(b).max(), 1.0)


CASES = [  # B, Nq, Nkv, Sq, Skv, D, causal
    (2, 2, 2, 37, 37, 8, True),
    (1, 4, 2, 20, 70, 16, False),        # GQA, Skv spans two 64-row tiles
    (1, 2, 1, 130, 130, 4, True),        # three tiles, multi-query
]


@pytest.mark.parametrize("case", CASES)
def test_forward_and_backward_match_naive_float32(ascend, case):
    B, N, Nk, Sq, Skv, D, causal = case
    r = np.random.default_rng(1)
    q, k, v = (r.standard_normal(s).astype(np.float32) for s in ((B, N, Sq, D), (B, Nk, Skv, D), (B, Nk, Skv, D)))
    mask = np.triu(np.ones((Sq, Skv), bool), 1) if causal else None
    scale = 1 / math.sqrt(D)
    out, smax, ssum = flash_attention(q, k, v, head_num=N, atten_mask=mask, backend=ascend)
    ref, m, l, *_ = naive(*(t.astype(np.float64) for t in (q, k, v)), mask, scale)
    assert rel(out, ref) < 1e-5
    assert smax.shape == (B, N, Sq, 8) and np.allclose(smax, m[..., None], rtol=1e-5)
    assert np.allclose(ssum, l[..., None], rtol=1e-5)
    dy = r.standard_normal(q.shape).astype(np.float32)
    dq, dk, dv = flash_attention_grad(q, k, v, dy, out, smax, ssum, head_num=N, atten_mask=mask, backend=ascend)
    rq, rk, rv = naive_grad(*(t.astype(np.float64) for t in (q, k, v)), mask, scale, dy.astype(np.float64))
    for got, want in ((dq, rq), (dk, rk), (dv, rv)):
        assert got.shape == want.shape and rel(got, want) < 1e-5


def test_backward_matches_finite_differences(ascend):
    r = np.random.default_rng(2)
    q, k, v = (r.standard_normal((1, 1, 5, 3)) for _ in range(3))
    dy = r.standard_normal(q.shape)
    f = lambda qq: float((flash_attention(qq, k, v, backend=ascend)[0] * dy).sum())
    out, smax, ssum = flash_attention(q, k, v, backend=ascend)
    dq = flash_attention_grad(q, k, v, dy, out, smax, ssum, backend=ascend)[0]
    eps, num = 1e-6, np.zeros_like(q)
    for idx in np.ndindex(q.shape):
        qp, qm = q.copy(), q.copy()
        qp[idx] += eps
        qm[idx] -= eps
        num[idx] = (f(qp) - f(qm)) / (2 * eps)
    np.testing.assert_allclose(dq, num, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("dtype,tol", [(np.float16, 1e-3), ("bfloat16", 1.6e-2)])
def test_half_precision_layouts(ascend, dtype, tol):
    from minispore.common import dtype as mstype
    npdt = mstype.bfloat16.np if dtype == "bfloat16" else np.dtype(dtype)
    r = np.random.default_rng(3)
    B, S, N, D = 2, 24, 2, 8
    q, k, v = (r.standard_normal((B, S, N, D)).astype(npdt) for _ in range(3))      # BSND
    out = flash_attention(q, k, v, head_num=N, layout="BSND", sparse_mode=2, atten_mask=None, backend=ascend)[0]
    # sparse_mode 2 (leftUpCausal) is causal by position; compare with an explicit causal mask in float64
    bnsd = lambda t: np.swapaxes(t.astype(np.float64), 1, 2)
    ref = naive(bnsd(q), bnsd(k), bnsd(v), np.triu(np.ones((S, S), bool), 1), 1 / math.sqrt(D))[0]
    assert out.dtype == npdt and rel(bnsd(out), ref) < tol
    h = flash_attention(q.reshape(B, S, N * D), k.reshape(B, S, N * D), v.reshape(B, S, N * D), head_num=N,
                        layout="BSH", backend=ascend)[0]
    ref_full = naive(bnsd(q), bnsd(k), bnsd(v), None, 1 / math.sqrt(D))[0]
    assert rel(bnsd(h.reshape(B, S, N, D)), ref_full) < tol


def test_bad_arguments_are_rejected_in_phase_one(ascend):
    from minispore_ascend.acl.errors import AclnnError
    q = np.zeros((1, 3, 4, 8), np.float32)
    k = np.zeros((1, 2, 4, 8), np.float32)                # 3 query heads, 2 kv heads: not a multiple
    with pytest.raises(AclnnError, match="161002.*multiple of Nkv"):
        flash_attention(q, k, k, head_num=3, backend=ascend)
    t = ascend.to_device(q)                               # a layout outside BNSD/BSND/BSH
    try:
        from minispore_ascend.aclnn import AclnnCall
        with pytest.raises(AclnnError, match="inputLayout must be"):
            with AclnnCall(ascend, "aclnnFlashAttentionScore") as c:
                c.launch(ascend.default_stream, c.tensor(t), c.tensor(t), c.tensor(t), None, None, None, None, None,
                         1.0, 1.0, 1, 1, 3, b"TND", 0, 0, c.tensor(t), c.tensor(t), None, c.tensor(t))
    finally:
        ascend.free(t.buffer)


def test_fused_path_never_holds_the_score_matrix(ascend, emulator):
    """Peak device memory of the fused forward+backward stays below ONE Sq x Skv float32 matrix."""
    S, D = 512, 16
    r = np.random.default_rng(4)
    q, k, v = (r.standard_normal((1, 1, S, D)).astype(np.float32) for _ in range(3))
    pool = ascend.runtime.pool
    in_use = pool.in_use
    ascend.runtime.pool.empty_cache()
    emulator.aclemuResetPeakMemory(ascend.runtime.device_id)
    base = emulator.aclemuGetPeakMemory(ascend.runtime.device_id)
    out, smax, ssum = flash_attention(q, k, v, backend=ascend)
    flash_attention_grad(q, k, v, q, out, smax, ssum, backend=ascend)
    peak = emulator.aclemuGetPeakMemory(ascend.runtime.device_id) - base
    assert peak < S * S * 4, (peak, S * S * 4)
    assert pool.in_use == in_use                        # everything staged was given back
