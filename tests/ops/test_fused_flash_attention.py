"""FlashAttention: the tiled kernels against naive attention (PyTorch's scaled_dot_product_attention
and autograd as the independent oracle), the memory property (no N x N buffer), dropout that is
replayed rather than stored, Flash-Decoding's split-KV combine, second-order gradients and bad input.

(The op table in minispore/testing/opdb/fused_attention.py checks every sparse mode, layout and
dtype against a NumPy reference; this file checks the algorithmic claims.)
"""
import tracemalloc

import numpy as np
import pytest
import torch

import minispore as ms
from minispore import Tensor, ops
from minispore.autograd import grad
from minispore.common.errors import OpTypeError, OpValueError
from minispore.ops.primitive import get_primitive
from minispore.ops.prims import fused_attention as FA
from minispore.ops.prims import fused_attention_kernels as K

FA_PRIM = get_primitive("flash_attention_score")


def _torch_attention(q, k, v, keep, scale, dropmul=None):
    """q (B, N1, S1, D), k/v (B, N2, S2, D) torch tensors; keep: bool (True = attend), torch's
    convention. GQA by repeat_interleave (HuggingFace repeat_kv)."""
    rep = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
    s = (q @ k.transpose(-1, -2)) * scale
    s = s.masked_fill(~keep, float("-inf"))
    lse = torch.logsumexp(s, -1)
    p = torch.nan_to_num(torch.softmax(s, -1))
    if dropmul is not None:
        p = p * dropmul
    return p @ v, lse


def _inputs(rng, b, n1, n2, s1, s2, d, dtype=np.float64):
    return (rng.standard_normal((b, n1, s1, d)).astype(dtype), rng.standard_normal((b, n2, s2, d)).astype(dtype),
            rng.standard_normal((b, n2, s2, d)).astype(dtype))


def _keep(kind, s1, s2):
    i, j = np.arange(s1)[:, None], np.arange(s2)[None, :]
    return {"full": np.ones((s1, s2), bool), "causal": j <= i, "prefix": j <= i + (s2 - s1)}[kind]


CASES = [  # (name, b, n1, n2, s1, s2, sparse_mode, keep kind)
    ("non-causal", 2, 2, 2, 19, 19, 0, "full"),
    ("causal", 2, 2, 2, 19, 19, 2, "causal"),
    ("causal GQA 4/1", 1, 4, 1, 23, 23, 2, "causal"),
    ("cached prefix (q shorter than kv)", 2, 4, 2, 9, 30, 3, "prefix"),
    ("non-causal GQA, S1 > S2", 1, 6, 2, 17, 5, 0, "full"),
]
BLOCKS = [(1, 1), (4, 5), (8, 8), (16, 7), (64, 64)]     # ragged edges, one-row tiles, one big tile


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("blocks", BLOCKS, ids=[f"{a}x{b}" for a, b in BLOCKS])
def test_forward_lse_and_backward_equal_naive_attention_float64(case, blocks):
    _, b, n1, n2, s1, s2, mode, kind = case
    rng = np.random.default_rng(0)
    q, k, v = _inputs(rng, b, n1, n2, s1, s2, 8)
    scale = 8 ** -0.5
    attrs = dict(input_layout="BNSD", sparse_mode=mode, scalar_value=scale, block_q=blocks[0], block_kv=blocks[1])
    qt, kt, vt = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
    ref, ref_lse = _torch_attention(qt, kt, vt, torch.tensor(_keep(kind, s1, s2)), scale)
    out, lse, _ = FA_PRIM(Tensor(q), Tensor(k), Tensor(v), None, None, None, head_num=n1, keep_prob=1.0,
                          scale_value=scale, pre_tokens=2147483647, next_tokens=2147483647, inner_precise=0,
                          input_layout="BNSD", sparse_mode=mode, prefix=None, block_q=blocks[0], block_kv=blocks[1])
    np.testing.assert_allclose(out.asnumpy(), ref.detach().numpy(), rtol=0, atol=1e-12)
    np.testing.assert_allclose(lse.asnumpy(), ref_lse.detach().numpy(), rtol=0, atol=1e-12)

    w = rng.standard_normal(ref.shape)
    (ref * torch.tensor(w)).sum().backward()
    g = grad(lambda a, b_, c: (ops.flash_attention_score(a, b_, c, n1, **attrs) * Tensor(w)).sum(),
             grad_position=(0, 1, 2))(Tensor(q), Tensor(k), Tensor(v))
    for got, want in zip(g, (qt.grad, kt.grad, vt.grad)):
        np.testing.assert_allclose(got.asnumpy(), want.numpy(), rtol=0, atol=1e-12)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_float32_within_1e_5_of_float64_naive(case):
    _, b, n1, n2, s1, s2, mode, kind = case
    rng = np.random.default_rng(1)
    q, k, v = _inputs(rng, b, n1, n2, s1, s2, 16, np.float32)
    ref, _ = _torch_attention(*(torch.tensor(a.astype(np.float64)) for a in (q, k, v)),
                              torch.tensor(_keep(kind, s1, s2)), 0.25)
    out = ops.flash_attention_score(Tensor(q), Tensor(k), Tensor(v), n1, scalar_value=0.25, input_layout="BNSD",
                                    sparse_mode=mode, block_q=8, block_kv=8)
    assert out.dtype == ms.float32
    np.testing.assert_allclose(out.asnumpy(), ref.numpy(), rtol=1e-5, atol=1e-5)


def _to_layout(x, layout):
    b, n, s, d = x.shape
    return {"BNSD": x, "BSND": x.transpose(0, 2, 1, 3), "BSH": x.transpose(0, 2, 1, 3).reshape(b, s, n * d),
            "SBH": x.transpose(2, 0, 1, 3).reshape(s, b, n * d)}[layout]


@pytest.mark.parametrize("layout", ["BSH", "BSND", "SBH"])
def test_layouts_are_transpositions_of_bnsd(layout):
    rng = np.random.default_rng(2)
    q, k, v = _inputs(rng, 2, 4, 2, 6, 6, 4)
    want = ops.flash_attention_score(Tensor(q), Tensor(k), Tensor(v), 4, sparse_mode=2, input_layout="BNSD").asnumpy()
    got = ops.flash_attention_score(*(Tensor(_to_layout(a, layout)) for a in (q, k, v)), 4, sparse_mode=2,
                                    input_layout=layout)
    assert got.shape == _to_layout(q, layout).shape
    np.testing.assert_array_equal(got.asnumpy(), _to_layout(want, layout))


def test_attn_mask_one_means_discard_and_empty_rows_output_zero_without_nan():
    rng = np.random.default_rng(3)
    q, k, v = _inputs(rng, 1, 2, 2, 5, 6, 4)
    mask = rng.random((5, 6)) < 0.4
    mask[3] = True                                  # row 3 sees no key at all
    out = ops.flash_attention_score(Tensor(q), Tensor(k), Tensor(v), 2, attn_mask=Tensor(mask), input_layout="BNSD",
                                    block_q=2, block_kv=4)
    ref, _ = _torch_attention(*(torch.tensor(a) for a in (q, k, v)), torch.tensor(~mask), 1.0)  # torch: True = keep
    np.testing.assert_allclose(out.asnumpy(), ref.numpy(), atol=1e-12)
    assert np.all(out.asnumpy()[:, :, 3] == 0)
    g = grad(lambda a: ops.flash_attention_score(a, Tensor(k), Tensor(v), 2, attn_mask=Tensor(mask),
                                                 input_layout="BNSD").sum())(Tensor(q))
    assert np.all(np.isfinite(g.asnumpy())) and np.all(g.asnumpy()[:, :, 3] == 0)


def test_causal_skips_hidden_tiles():
    """Tiles strictly above the diagonal are never computed (FlashAttention-2's causal saving)."""
    pat = K.AttentionPattern(1, 64, 64, None, 0, 0)
    tiles = [(r, c) for r in range(0, 64, 16) for c in range(0, 64, 16)]
    kinds = [("skip" if (t := pat.tile(r, r + 16, c, c + 16)) is K.SKIP else "full" if t is None else "partial")
             for r, c in tiles]
    assert kinds.count("skip") == 6 and kinds.count("partial") == 4 and kinds.count("full") == 6


def test_never_materializes_the_score_matrix():
    """Peak traced allocation during the forward and the backward is O(N*D + tile), a few percent
    of the N x N float64 matrix naive attention needs (tracemalloc sees every NumPy buffer)."""
    n, d, blk = 2048, 16, 64
    rng = np.random.default_rng(4)
    q, k, v = _inputs(rng, 1, 1, 1, n, n, d)
    qg = q[:, :, None]
    pat = K.AttentionPattern(1, n, n, None, 0, 0)
    nn_bytes = n * n * 8
    small = (n * d + blk * blk) * 8
    tracemalloc.start()
    try:
        out, lse = K.flash_forward(qg, k, v, 0.25, pat, block_q=blk, block_kv=blk)
        fwd_peak = tracemalloc.get_traced_memory()[1]
        dout = rng.standard_normal(out.shape)
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        K.flash_backward(qg, k, v, out, dout, lse, None, 0.25, pat, block_q=blk, block_kv=blk)
        bwd_peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert fwd_peak < 0.05 * nn_bytes and fwd_peak < 3 * small, (fwd_peak, nn_bytes)
    assert bwd_peak < 0.05 * nn_bytes and bwd_peak < 6 * small, (bwd_peak, nn_bytes)


# -------------------------------------------------------------------------------------------------
# dropout
def _fa_dropout(q, k, v, keep_prob, **kw):
    return ops.flash_attention_score(Tensor(q), Tensor(k), Tensor(v), q.shape[1], keep_prob=keep_prob,
                                     input_layout="BNSD", **kw)


def test_dropout_is_seeded_tiling_independent_and_equals_naive_with_the_regenerated_mask():
    rng = np.random.default_rng(5)
    q, k, v = _inputs(rng, 2, 2, 1, 9, 16, 4)
    ms.set_seed(11)
    a = _fa_dropout(q, k, v, 0.8, block_q=3, block_kv=5).asnumpy()
    ms.set_seed(11)
    seed = FA.draw_dropout_seed()                        # the draw the kernel made
    ms.set_seed(11)
    b = _fa_dropout(q, k, v, 0.8, block_q=16, block_kv=16).asnumpy()
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-13)   # same seed, other tiling: same mask (rounding aside)
    c = _fa_dropout(q, k, v, 0.8).asnumpy()              # next draw: another mask
    assert not np.allclose(a, c)

    mul = K.Dropout(0.8, 2, 9, 16, 2, seed).dense(2, np.float64)[:, :, :, :, :].reshape(2, 2, 9, 16)
    ref, _ = _torch_attention(*(torch.tensor(x) for x in (q, k, v)), torch.ones(9, 16, dtype=torch.bool), 1.0,
                              torch.tensor(mul))
    np.testing.assert_allclose(a, ref.numpy(), atol=1e-12)


def test_dropout_keep_fraction_and_explicit_drop_mask_agree():
    d = K.Dropout(0.7, 4, 64, 64, 1, seed=123)
    keep = d.dense(3, np.float64) > 0
    assert abs(keep.mean() - 0.7) < 0.01                 # 49k Bernoulli(0.7) draws
    rng = np.random.default_rng(6)
    q, k, v = _inputs(rng, 1, 2, 2, 5, 16, 4)
    ms.set_seed(3)
    seeded = _fa_dropout(q, k, v, 0.6).asnumpy()
    ms.set_seed(3)
    seed = FA.draw_dropout_seed()
    packed = K.pack_keep_mask(K.Dropout(0.6, 2, 5, 16, 1, seed).dense(1, np.float64).reshape(1, 2, 5, 16) > 0)
    explicit = _fa_dropout(q, k, v, 0.6, drop_mask=Tensor(packed)).asnumpy()
    np.testing.assert_array_equal(seeded, explicit)


def test_dropout_backward_replays_the_forward_mask():
    rng = np.random.default_rng(7)
    q, k, v = _inputs(rng, 1, 2, 2, 6, 8, 4)
    ms.set_seed(21)
    out, g = ms.value_and_grad(lambda a, b, c: _fa_dropout_t(a, b, c).sum(), grad_position=(0, 1, 2))(
        Tensor(q), Tensor(k), Tensor(v))
    ms.set_seed(21)
    seed = FA.draw_dropout_seed()
    mul = torch.tensor(K.Dropout(0.5, 2, 6, 8, 1, seed).dense(1, np.float64).reshape(1, 2, 6, 8))
    ts = [torch.tensor(a, requires_grad=True) for a in (q, k, v)]
    ref, _ = _torch_attention(*ts, torch.tensor(_keep("causal", 6, 8)), 1.0, mul)
    ref.sum().backward()
    np.testing.assert_allclose(out.asnumpy(), ref.sum().item(), atol=1e-12)
    for got, t in zip(g, ts):
        np.testing.assert_allclose(got.asnumpy(), t.grad.numpy(), atol=1e-12)


def _fa_dropout_t(a, b, c):
    return ops.flash_attention_score(a, b, c, 2, keep_prob=0.5, input_layout="BNSD", sparse_mode=2, block_q=4,
                                     block_kv=3)


# -------------------------------------------------------------------------------------------------
# Flash-Decoding
@pytest.mark.parametrize("splits", [1, 2, 3, 7, 40, 100])
def test_flash_decoding_combine_equals_single_pass(splits):
    rng = np.random.default_rng(8)
    q, k, v = _inputs(rng, 3, 4, 2, 1, 40, 8)
    kv_len = np.array([40, 13, 1])
    pat = K.AttentionPattern(3, 1, 40, kv_len=kv_len)        # shorter sequences: some splits are empty
    qg = q.reshape(3, 2, 2, 1, 8)
    single, single_lse = K.flash_forward(qg, k, v, 0.3, pat, block_q=1, block_kv=1000)
    out, lse = K.split_kv_forward(qg, k, v, 0.3, pat, splits)
    np.testing.assert_allclose(out, single, rtol=0, atol=1e-12)
    np.testing.assert_allclose(lse, single_lse, rtol=0, atol=1e-12)


def test_combine_partials_weights_by_lse():
    """Two halves of the keys, attended separately, merge into attention over all keys."""
    rng = np.random.default_rng(9)
    s = rng.standard_normal(10)
    v = rng.standard_normal((10, 3))
    halves = [slice(0, 4), slice(4, 10)]
    outs = np.stack([np.exp(s[h] - s[h].max()) @ v[h] / np.exp(s[h] - s[h].max()).sum() for h in halves])
    lses = np.array([np.log(np.exp(s[h]).sum()) for h in halves])
    out, lse = K.combine_partials(outs, lses)
    p = np.exp(s) / np.exp(s).sum()
    np.testing.assert_allclose(out, p @ v, atol=1e-15)
    np.testing.assert_allclose(lse, np.log(np.exp(s).sum()), atol=1e-15)
    out, lse = K.combine_partials(np.stack([outs[0], np.zeros(3)]), np.array([lses[0], -np.inf]))  # empty split
    np.testing.assert_allclose(out, outs[0], atol=1e-15)


@pytest.mark.parametrize("splits", [1, 3, 5])
def test_incre_flash_attention_equals_full_attention_on_the_last_row(splits):
    rng = np.random.default_rng(10)
    q, k, v = _inputs(rng, 2, 4, 2, 1, 11, 8)
    out = ops.incre_flash_attention(Tensor(q), [Tensor(k)], [Tensor(v)], num_heads=4, num_key_value_heads=2,
                                    input_layout="BNSD", scale_value=0.35, num_kv_splits=splits)
    ref, _ = _torch_attention(*(torch.tensor(a) for a in (q, k, v)), torch.ones(1, 11, dtype=torch.bool), 0.35)
    np.testing.assert_allclose(out.asnumpy(), ref.numpy(), rtol=0, atol=1e-12)


# -------------------------------------------------------------------------------------------------
def test_second_order_gradients_match_torch_double_backward():
    rng = np.random.default_rng(11)
    q, k, v = _inputs(rng, 1, 2, 1, 3, 5, 2)
    w = rng.standard_normal(q.shape)

    def f(a, b, c):
        return ops.flash_attention_score(a, b, c, 2, scalar_value=0.7, sparse_mode=3, input_layout="BNSD",
                                         block_q=2, block_kv=2)

    def first(a, b, c):
        ga, gb, gc = grad(lambda x, y, z: (f(x, y, z) * Tensor(w)).sum(), grad_position=(0, 1, 2))(a, b, c)
        return (ga * ga).sum() + (gb * gc).sum()

    gg = grad(first, grad_position=(0, 1, 2))(Tensor(q), Tensor(k), Tensor(v))
    ts = [torch.tensor(a, requires_grad=True) for a in (q, k, v)]
    ref, _ = _torch_attention(*ts, torch.tensor(_keep("prefix", 3, 5)), 0.7)
    ga, gb, gc = torch.autograd.grad((ref * torch.tensor(w)).sum(), ts, create_graph=True)
    ((ga * ga).sum() + (gb * gc).sum()).backward()
    for got, t in zip(gg, ts):
        np.testing.assert_allclose(got.asnumpy(), t.grad.numpy(), atol=1e-12)


def test_prompt_flash_attention_equals_flash_attention_score():
    rng = np.random.default_rng(12)
    q, k, v = (_to_layout(a, "BSH") for a in _inputs(rng, 2, 4, 2, 7, 10, 4))
    a = ops.prompt_flash_attention(Tensor(q), Tensor(k), Tensor(v), num_heads=4, num_key_value_heads=2,
                                   scale_value=0.5, sparse_mode=3).asnumpy()
    b = ops.flash_attention_score(Tensor(q), Tensor(k), Tensor(v), 4, scalar_value=0.5, sparse_mode=3).asnumpy()
    np.testing.assert_allclose(a, b, atol=1e-14)


# -------------------------------------------------------------------------------------------------
# bad input
def _bad(exc, fn, *args, **kw):
    with pytest.raises(exc) as e:
        fn(*args, **kw)
    return str(e.value)


def test_bad_input_names_the_op_and_the_problem():
    rng = np.random.default_rng(13)
    q, k, v = (Tensor(a) for a in _inputs(rng, 1, 4, 2, 4, 4, 2))
    fa = ops.flash_attention_score
    msg = _bad(OpValueError, fa, q, k, v, 4, input_layout="TND")
    assert "flash_attention_score" in msg and "TND" in msg
    qh = Tensor(np.zeros((1, 4, 8)))
    assert "head number" in _bad(OpValueError, fa, qh, qh, qh, 3, input_layout="BSH")
    assert "divid" in _bad(OpValueError, fa, q, Tensor(np.zeros((1, 3, 4, 2))), Tensor(np.zeros((1, 3, 4, 2))), 4,
                           input_layout="BNSD")
    assert "sparse_mode=1" in _bad(OpValueError, fa, q, k, v, 4, input_layout="BNSD", sparse_mode=1)
    assert "not implemented" in _bad(OpValueError, fa, q, k, v, 4, input_layout="BNSD", sparse_mode=7)
    assert "keep_prob" in _bad(OpValueError, fa, q, k, v, 4, input_layout="BNSD", keep_prob=0.0)
    assert "drop_mask" in _bad(OpValueError, fa, q, k, v, 4, drop_mask=Tensor(np.zeros((1, 4, 4, 1), np.uint8)),
                               input_layout="BNSD")
    assert "bool, uint8" in _bad(OpTypeError, fa, q, k, v, 4, attn_mask=Tensor(np.zeros((4, 4), np.float32)),
                                 input_layout="BNSD")
    assert "attn_mask" in _bad(OpValueError, fa, q, k, v, 4, attn_mask=Tensor(np.zeros((3, 4), bool)),
                               input_layout="BNSD")
    assert "compressed" in _bad(OpValueError, fa, q, k, v, 4, attn_mask=Tensor(np.zeros((4, 4), bool)),
                                input_layout="BNSD", sparse_mode=2)
    assert "prefix" in _bad(OpValueError, fa, q, k, v, 4, input_layout="BNSD", sparse_mode=5)
    assert "prefix" in _bad(OpValueError, fa, q, k, v, 4, input_layout="BNSD", sparse_mode=5, prefix=[9])
    assert "padding_mask" in _bad(OpValueError, fa, q, k, v, 4, padding_mask=q)
    assert "dtype of 'query'" in _bad(OpTypeError, fa, q, Tensor(np.zeros((1, 2, 4, 2), np.float32)),
                                      Tensor(np.zeros((1, 2, 4, 2), np.float32)), 4, input_layout="BNSD")
    assert "real_shift" in _bad(OpValueError, fa, q, k, v, 4, real_shift=Tensor(np.zeros((1, 4, 4, 3))),
                                input_layout="BNSD")
    assert "block_q" in _bad(OpValueError, fa, q, k, v, 4, input_layout="BNSD", block_q=0)
    msg = _bad(OpValueError, ops.incre_flash_attention, q, k, v, num_heads=4, input_layout="BNSD")
    assert "incre_flash_attention" in msg and "sequence length 1" in msg
    msg = _bad(OpValueError, ops.prompt_flash_attention, q, k, v, num_heads=4, input_layout="BNSD",
               actual_seq_lengths=[5])
    assert "prompt_flash_attention" in msg
    msg = _bad(OpValueError, ops.prompt_flash_attention, q, k, v, num_heads=4, input_layout="BNSD",
               deq_scale1=q)
    assert "deq_scale1" in msg
