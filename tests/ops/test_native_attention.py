"""FlashAttention's C tile loops (minispore/ops/prims/_native_attention.py) against the plain NumPy
tile code of fused_attention_kernels.py and an independent float64 dense reference.

The public op `ops.flash_attention_score` runs twice on the same inputs: with the C loops, and
with them disabled (the module functions patched to return None, exactly what they do without a
compiler or with MINISPORE_NATIVE_KERNELS=0), so the plain path is the reference of the fast one.
Both are then checked against dense float64 attention written out here: softmax over the visible
scores, its textbook backward.

Tolerances: the C loops compute exp with libm/libmvec (float32: expf, within 1-2 ulp, as NumPy's),
sum rows in double and otherwise round as the plain code does, so fast vs plain differ by a few
float32 ulp of the outputs (atol 2e-6 for values of size ~1), and by ~1e-15 in float64. Against
the float64 reference float32 results are within ~1e-5 (the products round in float32).
"""
import numpy as np
import pytest

import minispore as ms
from minispore import ops
from minispore.common import native_build
from minispore.ops.prims import _native_attention as NA
from minispore.ops.prims import fused_attention as FA
from minispore.ops.prims import fused_attention_kernels as K

HAVE_C = NA.LIBRARY.get() is not None
needs_c = pytest.mark.skipif(not HAVE_C, reason="no C compiler, or MINISPORE_NATIVE_KERNELS=0")


# ---- a float64 dense reference ------------------------------------------------------------------
def _keep(mode, s1, s2, mask=None, pre=None, nxt=None):
    i = np.arange(s1)[:, None]
    j = np.arange(s2)[None, :]
    if mode == 2:
        keep = j <= i
    elif mode == 3:
        keep = j <= i + (s2 - s1)
    elif mode == 4:
        rel = j - i - (s2 - s1)
        keep = (rel >= -pre) & (rel <= nxt)
    else:
        keep = np.ones((s1, s2), bool)
    if mask is not None:
        keep = keep & ~mask.astype(bool)
    return keep


def _reference(q, k, v, dout, keep, scale, pse=None):
    """out and (dq, dk, dv) of softmax(scale q k^T + pse, visible = keep) v, float64, BNSD with
    N1 query heads sharing N2 = k.shape[1] key heads; fully hidden rows output 0."""
    q, k, v, dout = (x.astype(np.float64) for x in (q, k, v, dout))
    g = q.shape[1] // k.shape[1]
    kk, vv = np.repeat(k, g, axis=1), np.repeat(v, g, axis=1)
    s = scale * q @ kk.swapaxes(-1, -2)
    if pse is not None:
        s = s + pse
    keep = np.broadcast_to(keep, s.shape)
    s = np.where(keep, s, -np.inf)
    m = s.max(-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.where(keep, np.exp(s - m), 0.0)
    tot = e.sum(-1, keepdims=True)
    p = e / np.where(tot == 0, 1.0, tot)
    out = p @ vv
    dv = p.swapaxes(-1, -2) @ dout
    dp = dout @ vv.swapaxes(-1, -2)
    ds = p * (dp - (dp * p).sum(-1, keepdims=True))
    dq = scale * ds @ kk
    dk = scale * ds.swapaxes(-1, -2) @ q
    fold = lambda x: x.reshape(x.shape[0], k.shape[1], g, *x.shape[2:]).sum(2)
    return out, (dq, fold(dk), fold(dv))


# ---- running the op with and without the C loops -----------------------------------------------
def _run(fast, monkeypatch, q, k, v, dout, heads, **kw):
    with monkeypatch.context() as mp:
        if not fast:                                          # what the functions do without C
            mp.setattr(NA, "online_softmax_tile", lambda *a, **k: None)
            mp.setattr(NA, "attention_grad_tile", lambda *a, **k: None)
        tq, tk, tv = (ms.Tensor(x) for x in (q, k, v))
        w = ms.Tensor(dout)

        def loss(a, b, c):
            return (ops.flash_attention_score(a, b, c, heads, input_layout="BNSD", **kw) * w).sum()

        out = ops.flash_attention_score(tq, tk, tv, heads, input_layout="BNSD", **kw).asnumpy()
        grads = ms.grad(loss, grad_position=(0, 1, 2))(tq, tk, tv)
        return out, tuple(g.asnumpy() for g in grads)


CASES = {
    # name: (B, N1, N2, S1, S2, D, kwargs, keep-builder args)
    "causal_one_tile": (2, 4, 4, 64, 64, 16, dict(sparse_mode=3), (3,)),
    "causal_tiles_skipped": (2, 2, 2, 40, 40, 8, dict(sparse_mode=2, block_q=16, block_kv=16), (2,)),
    "rightdown_gqa": (1, 4, 2, 24, 40, 8, dict(sparse_mode=3, block_q=8, block_kv=16), (3,)),
    "band": (2, 2, 1, 30, 30, 8, dict(sparse_mode=4, pre_tokens=5, next_tokens=2, block_q=8, block_kv=8),
             (4, None, 5, 2)),
    "no_mask_uneven_tiles": (2, 2, 2, 19, 23, 8, dict(block_q=7, block_kv=9), (0,)),
}


def _inputs(B, N1, N2, S1, S2, D, dtype, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((B, N1, S1, D)).astype(dtype)
    k = rng.standard_normal((B, N2, S2, D)).astype(dtype)
    v = rng.standard_normal((B, N2, S2, D)).astype(dtype)
    dout = rng.standard_normal((B, N1, S1, D)).astype(dtype)
    return q, k, v, dout


def _tol(dtype):
    return (dict(atol=3e-6, rtol=1e-5), dict(atol=3e-5, rtol=1e-4)) if dtype == np.float32 else \
        (dict(atol=1e-13, rtol=1e-12), dict(atol=1e-12, rtol=1e-11))


@needs_c
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", sorted(CASES))
def test_fast_equals_plain_and_reference(case, dtype, monkeypatch):
    B, N1, N2, S1, S2, D, kw, kargs = CASES[case]
    q, k, v, dout = _inputs(B, N1, N2, S1, S2, D, dtype)
    scale = 0.35
    kw = dict(kw, scalar_value=scale)
    fast = _run(True, monkeypatch, q, k, v, dout, N1, **kw)
    plain = _run(False, monkeypatch, q, k, v, dout, N1, **kw)
    mode, mask, pre, nxt = (kargs + (None, None, None))[:4]
    ref_out, ref_grads = _reference(q, k, v, dout, _keep(mode, S1, S2, mask, pre, nxt), scale)
    same, ref = _tol(dtype)
    np.testing.assert_allclose(fast[0], plain[0], **same)
    np.testing.assert_allclose(fast[0], ref_out, **ref)
    np.testing.assert_allclose(plain[0], ref_out, **ref)
    for gf, gp, gr in zip(fast[1], plain[1], ref_grads):
        np.testing.assert_allclose(gf, gp, **same)
        np.testing.assert_allclose(gf, gr, **ref)
        np.testing.assert_allclose(gp, gr, **ref)


@needs_c
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dense_mask_pse_and_empty_rows(dtype, monkeypatch):
    """A user mask (the uint8-mask path of the C loops, per batch) with a fully hidden query row
    (output 0, no gradient) plus an additive bias (real_shift)."""
    B, N, S, D = 2, 2, 12, 8
    q, k, v, dout = _inputs(B, N, N, S, S, D, dtype, seed=1)
    rng = np.random.default_rng(2)
    mask = rng.random((B, 1, S, S)) < 0.3                     # 1 = discard
    mask[0, 0, 3, :] = True                                   # row 3 of batch 0 sees nothing
    pse = rng.standard_normal((B, N, S, S)).astype(dtype)
    kw = dict(attn_mask=ms.Tensor(mask.astype(np.uint8)), real_shift=ms.Tensor(pse), scalar_value=0.5,
              block_q=5, block_kv=4)
    fast = _run(True, monkeypatch, q, k, v, dout, N, **kw)
    plain = _run(False, monkeypatch, q, k, v, dout, N, **kw)
    ref_out, ref_grads = _reference(q, k, v, dout, ~mask, 0.5, pse=pse)
    same, ref = _tol(dtype)
    assert np.all(fast[0][0, :, 3] == 0) and np.all(fast[1][0][0, :, 3] == 0)
    np.testing.assert_allclose(fast[0], plain[0], **same)
    np.testing.assert_allclose(fast[0], ref_out, **ref)
    for gf, gp, gr in zip(fast[1], plain[1], ref_grads):
        np.testing.assert_allclose(gf, gp, **same)
        np.testing.assert_allclose(gf, gr, **ref)


@needs_c
def test_the_c_loops_ran(monkeypatch):
    """A spy: the op's forward and backward go through the C tile functions (not silently plain)."""
    calls = {"fwd": 0, "bwd": 0}
    f0, g0 = NA.online_softmax_tile, NA.attention_grad_tile

    def fwd(*a, **k):
        calls["fwd"] += 1
        return f0(*a, **k)

    def bwd(*a, **k):
        calls["bwd"] += 1
        return g0(*a, **k)
    monkeypatch.setattr(NA, "online_softmax_tile", fwd)
    monkeypatch.setattr(NA, "attention_grad_tile", bwd)
    q, k, v, dout = _inputs(1, 2, 2, 16, 16, 8, np.float32)
    _run(True, monkeypatch, q, k, v, dout, 2, sparse_mode=3, block_q=8, block_kv=8)
    assert calls["fwd"] == 3 * 2 and calls["bwd"] == 3          # 3 of 4 tiles visible (one skipped)


@needs_c
def test_tile_functions_match_numpy_directly():
    """The two C functions alone, on one tile with NaN/inf rows, against the NumPy statements they
    replace (OnlineSoftmax.update after _mask_scores; the backward's exp and dS)."""
    rng = np.random.default_rng(3)
    s = rng.standard_normal((2, 3, 1, 6, 7)).astype(np.float32) * 4
    keep = np.tril(np.ones((6, 7), bool), 1)
    s[0, 0, 0, 2, 1] = np.nan                                  # a NaN score: its whole row is NaN
    st = K.OnlineSoftmax(s.shape[:-1], 4, np.float32)
    st.m[...] = rng.standard_normal(st.m.shape).astype(np.float32)
    st.l[...] = 1.5
    m, l = st.m.copy(), st.l.copy()
    fast_s = s.copy()
    alpha = NA.online_softmax_tile(fast_s, keep, m, l)
    plain_s = s.copy()
    K._mask_scores(plain_s, keep)
    st.update(plain_s, np.zeros((7, 4), np.float32))
    np.testing.assert_allclose(fast_s, plain_s, rtol=3e-7, atol=0, equal_nan=True)
    np.testing.assert_allclose(m, st.m, rtol=0, atol=0, equal_nan=True)
    np.testing.assert_allclose(l, st.l, rtol=1e-6, equal_nan=True)
    assert alpha.shape == m.shape and np.isnan(alpha[0, 0, 0, 2])

    lse = rng.standard_normal(s.shape[:-1]).astype(np.float32) + 3
    lse[1, 2, 0, 4] = np.inf                                   # an empty row's lse_safe: P = 0
    delta = rng.standard_normal(lse.shape).astype(np.float32)
    dp = rng.standard_normal(s.shape).astype(np.float32)
    s2 = rng.standard_normal(s.shape).astype(np.float32)
    fs, fdp = s2.copy(), dp.copy()
    p_out, ds_out = NA.attention_grad_tile(fs, keep, lse, delta, fdp, ds_scale=0.5)
    ps = s2.copy()
    K._mask_scores(ps, keep)
    p = np.exp(ps - lse[..., None])
    ds = p * (dp - delta[..., None]) * np.float32(0.5)
    np.testing.assert_allclose(fs, p, rtol=3e-7, atol=1e-30)
    np.testing.assert_allclose(fdp, ds, rtol=1e-6, atol=1e-30)
    assert p_out is fs and ds_out is fdp                        # in place: P over s, dS over dp
    assert np.all(fs[1, 2, 0, 4] == 0)


@pytest.mark.parametrize("fast", [True, False])
def test_batch_slices_equal_one_pass(fast, monkeypatch):
    """Tiles bigger than TILE_BUDGET_BYTES are walked in batch slices; the slices must give exactly
    the numbers of one pass over the batch: per-batch mask and bias, a bias shared by the batches
    (its gradient summed over the slices), grouped heads, a cotangent of the log-sum-exp."""
    if not fast:
        monkeypatch.setattr(NA, "online_softmax_tile", lambda *a, **k: None)
        monkeypatch.setattr(NA, "attention_grad_tile", lambda *a, **k: None)
    rng = np.random.default_rng(5)
    B, N2, G, S, D = 5, 2, 2, 12, 8
    q = rng.standard_normal((B, N2, G, S, D))
    k, v = rng.standard_normal((B, N2, S, D)), rng.standard_normal((B, N2, S, D))
    dout, dlse = rng.standard_normal(q.shape), rng.standard_normal(q.shape[:-1])
    mask = rng.random((B, 1, 1, S, S)) < 0.2
    for pse in (rng.standard_normal((B, N2, G, S, S)), rng.standard_normal((1, N2, G, S, S))):
        pattern = K.AttentionPattern(B, S, S, nxt=0, mask=mask)

        def both():
            out, lse = K.flash_forward(q, k, v, 0.4, pattern, pse, block_q=8, block_kv=8)
            return (out, lse) + K.flash_backward(q, k, v, out, dout, lse, dlse, 0.4, pattern, pse,
                                                 block_q=8, block_kv=8)
        whole = both()
        monkeypatch.setattr(K, "TILE_BUDGET_BYTES", 2 * N2 * G * 64 * 8)        # 2 batches a slice
        assert K._batch_step(q, 64, pse, None) == 2
        sliced = both()
        monkeypatch.setattr(K, "TILE_BUDGET_BYTES", 256 * 1024)
        for a, b in zip(whole, sliced):
            np.testing.assert_allclose(a, b, rtol=1e-14, atol=1e-14)


def test_plain_path_when_switched_off_or_not_applicable(monkeypatch):
    """Without the module (MINISPORE_NATIVE_KERNELS=0 / no compiler) or for inputs the loops do not
    take (float16, non-contiguous), the functions return None and leave their inputs alone."""
    s = np.ones((2, 3, 4), np.float32)
    m, l = np.full((2, 3), -np.inf, np.float32), np.zeros((2, 3), np.float32)
    assert NA.online_softmax_tile(s.astype(np.float16), None, m.astype(np.float16), l.astype(np.float16)) is None
    assert NA.online_softmax_tile(s.swapaxes(0, 1), None, m.T, l.T) is None
    off = native_build.NativeLibrary("attention kernels (off)", "", [], enabled=lambda: False)
    monkeypatch.setattr(NA, "LIBRARY", off)
    assert NA.online_softmax_tile(s, None, m, l) is None
    assert NA.attention_grad_tile(s, None, m, m, s.copy()) is None
    assert np.all(s == 1) and np.all(l == 0)
