"""The fused inference and layer ops: paged KV cache (reshape_and_cache's in-place writes,
paged_attention against contiguous attention), add_rms_norm / rotary_position_embedding / swiglu
against their unfused compositions, the quantized matmuls and matmul_allreduce, and bad input.

Oracles: contiguous-cache attention (itself checked against naive attention), minispore's unfused
ops, PyTorch autograd, complex-number rotation for interleaved RoPE, exact integer products.
"""
import tracemalloc

import numpy as np
import pytest
import torch

import minispore as ms
from minispore import Tensor, ops
from minispore.autograd import grad
from minispore.common.errors import MinisporeRuntimeError, OpIndexError, OpTypeError, OpValueError
from minispore.llm.rope import apply_rotary_emb, rope_tables


def _bad(exc, fn, *args, **kw):
    with pytest.raises(exc) as e:
        fn(*args, **kw)
    return str(e.value)


# =================================================================================================
# paged KV cache
class PagedCache:
    """A test-side paged cache: writes ragged sequences with reshape_and_cache through shuffled
    block tables (the blocks of a sequence are deliberately not in order)."""

    def __init__(self, rng, lengths, block_size, n_kv, d, dtype=np.float64):
        self.block_size = block_size
        per_seq = [-(-n // block_size) for n in lengths]
        n_blocks = sum(per_seq) + 3
        order = rng.permutation(n_blocks)
        self.tables = np.full((len(lengths), max(per_seq) + 1), -1, np.int32)
        it = iter(order)
        for b, m in enumerate(per_seq):
            self.tables[b, :m] = [next(it) for _ in range(m)]
        self.key_cache = Tensor(np.zeros((n_blocks, block_size, n_kv, d), dtype))
        self.value_cache = Tensor(np.zeros((n_blocks, block_size, n_kv, d), dtype))

    def slots(self, b, positions):
        return np.array([self.tables[b, p // self.block_size] * self.block_size + p % self.block_size
                         for p in positions], np.int32)


def _contiguous_decode(q, keys, values, lengths, scale):
    """Reference: one query per sequence against its contiguous keys (incre_flash_attention, BNSD)."""
    b, n1, _ = q.shape
    return ops.incre_flash_attention(Tensor(q[:, :, None, :]), Tensor(keys), Tensor(values),
                                     actual_seq_lengths=list(lengths), num_heads=n1, input_layout="BNSD",
                                     scale_value=scale).asnumpy()[:, :, 0, :]


@pytest.mark.parametrize("block_size", [1, 4, 16, 5])
def test_paged_decode_equals_contiguous_attention(block_size):
    rng = np.random.default_rng(0)
    lengths = [13, 1, 32, 7]
    b, n1, n2, d, smax = 4, 4, 2, 8, 32
    keys = rng.standard_normal((b, n2, smax, d))
    values = rng.standard_normal((b, n2, smax, d))
    cache = PagedCache(rng, lengths, block_size, n2, d)
    for i, n in enumerate(lengths):                   # prefill each sequence's tokens into the pool
        out = ops.reshape_and_cache(Tensor(keys[i, :, :n].transpose(1, 0, 2).copy()),
                                    Tensor(values[i, :, :n].transpose(1, 0, 2).copy()),
                                    cache.key_cache, cache.value_cache, Tensor(cache.slots(i, range(n))))
        assert out[0] is cache.key_cache and out[1] is cache.value_cache
    q = rng.standard_normal((b, n1, d))
    got = ops.paged_attention(Tensor(q), cache.key_cache, cache.value_cache, Tensor(cache.tables),
                              Tensor(np.array(lengths, np.int32)), head_num=n1, scale_value=0.3, kv_head_num=n2)
    want = _contiguous_decode(q, keys, values, lengths, 0.3)
    np.testing.assert_allclose(got.asnumpy(), want, rtol=0, atol=1e-12)
    # incre_flash_attention's paged mode reads the same pool
    ifa = ops.incre_flash_attention(Tensor(q.reshape(b, 1, n1 * d)), cache.key_cache.reshape(-1, block_size, n2 * d),
                                    cache.value_cache.reshape(-1, block_size, n2 * d), actual_seq_lengths=lengths,
                                    block_table=Tensor(cache.tables), num_heads=n1, num_key_value_heads=n2,
                                    block_size=block_size, scale_value=0.3)
    np.testing.assert_allclose(ifa.asnumpy().reshape(b, n1, d), want, rtol=0, atol=1e-12)


def test_paged_chunked_prefill_equals_causal_prompt_attention():
    """New tokens of several sequences (q_seq_lens) attend causally to their cached prefix + chunk:
    the rows of a right-down causal prompt attention over the whole sequence."""
    rng = np.random.default_rng(1)
    lengths, new = [10, 6, 9], [4, 6, 1]
    n1, n2, d = 2, 1, 4
    cache = PagedCache(rng, lengths, 3, n2, d)
    keys = [rng.standard_normal((n, n2, d)) for n in lengths]
    values = [rng.standard_normal((n, n2, d)) for n in lengths]
    for i, n in enumerate(lengths):
        ops.reshape_and_cache(Tensor(keys[i]), Tensor(values[i]), cache.key_cache, cache.value_cache,
                              Tensor(cache.slots(i, range(n))))
    qs = [rng.standard_normal((m, n1, d)) for m in new]
    got = ops.paged_attention(Tensor(np.concatenate(qs)), cache.key_cache, cache.value_cache, Tensor(cache.tables),
                              Tensor(np.array(lengths)), q_seq_lens=Tensor(np.array(new)), head_num=n1,
                              scale_value=0.5).asnumpy()
    row = 0
    for i, (n, m) in enumerate(zip(lengths, new)):
        want = ops.prompt_flash_attention(Tensor(qs[i][None]), Tensor(keys[i][None]), Tensor(values[i][None]),
                                          num_heads=n1, num_key_value_heads=n2, scale_value=0.5,
                                          input_layout="BSND", sparse_mode=3).asnumpy()[0]
        np.testing.assert_allclose(got[row:row + m], want, rtol=0, atol=1e-12)
        row += m


def test_paged_int8_cache_dequantizes_per_block():
    rng = np.random.default_rng(2)
    kq = rng.integers(-127, 128, (6, 4, 2 * 3)).astype(np.int8)
    vq = rng.integers(-127, 128, (6, 4, 2 * 3)).astype(np.int8)
    scale = rng.uniform(0.01, 0.02, (2, 6)).astype(np.float32)
    offset = rng.uniform(-2, 2, (2, 6)).astype(np.float32)
    tables = np.array([[3, 0], [5, 1]], np.int32)
    q = rng.standard_normal((2, 2, 3)).astype(np.float32)
    got = ops.paged_attention(Tensor(q), Tensor(kq), Tensor(vq), Tensor(tables), Tensor(np.array([7, 5], np.int32)),
                              Tensor(scale), Tensor(offset), head_num=2)
    kf = ((kq.astype(np.float32) + offset[0]) * scale[0]).reshape(6, 4, 2, 3)
    vf = ((vq.astype(np.float32) + offset[1]) * scale[1]).reshape(6, 4, 2, 3)
    want = ops.paged_attention(Tensor(q), Tensor(kf), Tensor(vf), Tensor(tables), Tensor(np.array([7, 5], np.int32)),
                               head_num=2)
    np.testing.assert_allclose(got.asnumpy(), want.asnumpy(), rtol=1e-6, atol=1e-6)


def test_reshape_and_cache_writes_in_place():
    kc = Tensor(np.zeros((3, 2, 1, 2), np.float32))
    vc = Tensor(np.zeros((3, 2, 1, 2), np.float32))
    view = kc[1]                                          # a view sees the write
    v0 = kc._version
    k = np.arange(6, dtype=np.float32).reshape(3, 1, 2)
    outs = ops.reshape_and_cache(Tensor(k), Tensor(-k), kc, vc, Tensor(np.array([3, -1, 0], np.int32)))
    assert outs[0] is kc and outs[1] is vc and kc._version == v0 + 1
    np.testing.assert_array_equal(kc.asnumpy()[1, 1, 0], k[0, 0])      # slot 3 = block 1, offset 1
    np.testing.assert_array_equal(kc.asnumpy()[0, 0, 0], k[2, 0])
    np.testing.assert_array_equal(view.asnumpy()[1, 0], k[0, 0])
    np.testing.assert_array_equal(vc.asnumpy()[1, 1, 0], -k[0, 0])
    assert np.count_nonzero(kc.asnumpy()) == 3                          # the padding token (-1) wrote nothing
    (only_key,) = ops.reshape_and_cache(Tensor(k), None, kc, None, Tensor(np.array([5, 4, 2], np.int32)))
    assert only_key is kc and np.array_equal(kc.asnumpy()[2, 1, 0], k[0, 0])


def test_paged_bad_input():
    kc = Tensor(np.zeros((4, 2, 1, 2)))
    k = Tensor(np.ones((2, 1, 2)))
    before = kc.asnumpy().copy()
    msg = _bad(OpIndexError, ops.reshape_and_cache, k, k, kc, Tensor(np.zeros((4, 2, 1, 2))),
               Tensor(np.array([1, 8], np.int32)))
    assert "reshape_and_cache" in msg and "slot_mapping" in msg
    np.testing.assert_array_equal(kc.asnumpy(), before)                 # nothing half-written
    assert "dtype" in _bad(OpTypeError, ops.reshape_and_cache, Tensor(np.ones((2, 1, 2), np.float32)), None, kc,
                           None, Tensor(np.array([0, 1])))
    assert "slot_mapping" in _bad(OpValueError, ops.reshape_and_cache, k, None, kc, None,
                                  Tensor(np.array([0, 1, 2])))
    ro_buf = np.zeros((4, 2, 1, 2))
    ro_buf.flags.writeable = False
    ro = ms.from_numpy(ro_buf)                       # shares the read-only buffer (Tensor() would copy it)
    assert "writable" in _bad(OpValueError, ops.reshape_and_cache, k, None, ro, None, Tensor(np.array([0, 1])))
    tracked = Tensor(np.zeros((4, 2, 1, 2)))
    with pytest.raises(MinisporeRuntimeError):
        grad(lambda c: ops.reshape_and_cache(k, None, c, None, Tensor(np.array([0, 1])))[0].sum())(tracked)

    q = Tensor(np.ones((2, 2, 2)))
    pa = ops.paged_attention
    msg = _bad(OpIndexError, pa, q, kc, kc, Tensor(np.array([[0, 9], [1, 2]])), Tensor(np.array([3, 2])), head_num=2)
    assert "paged_attention" in msg and "block_tables[0, 1] = 9" in msg
    msg = _bad(OpValueError, pa, q, kc, kc, Tensor(np.array([[0, 1], [1, 2]])), Tensor(np.array([5, 2])), head_num=2)
    assert "context_lens" in msg
    assert "q_seq_lens" in _bad(OpValueError, pa, q, kc, kc, Tensor(np.array([[0, 1]])), Tensor(np.array([3])),
                                q_seq_lens=Tensor(np.array([3])), head_num=2)
    assert "one query token per sequence" in _bad(OpValueError, pa, q, kc, kc, Tensor(np.array([[0, 1]])),
                                                  Tensor(np.array([3])), head_num=2)
    assert "antiquant_scale" in _bad(OpValueError, pa, q, Tensor(np.zeros((4, 2, 1, 2), np.int8)),
                                     Tensor(np.zeros((4, 2, 1, 2), np.int8)), Tensor(np.array([[0], [1]])),
                                     Tensor(np.array([1, 1])), head_num=2)
    assert "alibi_mask" in _bad(OpValueError, pa, q, kc, kc, Tensor(np.array([[0], [1]])), Tensor(np.array([1, 1])),
                                alibi_mask=q, head_num=2)
    msg = _bad(OpIndexError, ops.incre_flash_attention, Tensor(np.ones((2, 1, 2))), Tensor(np.zeros((4, 2, 2))),
               Tensor(np.zeros((4, 2, 2))), actual_seq_lengths=[3, 1], block_table=Tensor(np.array([[0, -1], [2, 0]])),
               num_heads=1, block_size=2)
    assert "incre_flash_attention" in msg and "block_table" in msg


# =================================================================================================
# add_rms_norm, rotary_position_embedding, swiglu
def test_add_rms_norm_equals_add_then_rms_norm_with_gradients():
    rng = np.random.default_rng(3)
    x1, x2 = (rng.standard_normal((4, 6)).astype(np.float32) for _ in range(2))
    gamma = rng.standard_normal(6).astype(np.float32)
    y, rstd, x = ops.add_rms_norm(Tensor(x1), Tensor(x2), Tensor(gamma), 1e-5)
    y2, rstd2 = ops.rms_norm(Tensor(x1) + Tensor(x2), Tensor(gamma), 1e-5)
    np.testing.assert_allclose(y.asnumpy(), y2.asnumpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(rstd.asnumpy(), rstd2.asnumpy(), rtol=1e-6)
    np.testing.assert_array_equal(x.asnumpy(), x1 + x2)
    w = Tensor(rng.standard_normal((4, 6)).astype(np.float32))

    def fused(a, b, g):
        y_, _, s = ops.add_rms_norm(a, b, g, 1e-5)
        return (y_ * w).sum() + (s * s).sum()

    def unfused(a, b, g):
        s = a + b
        return (ops.rms_norm(s, g, 1e-5)[0] * w).sum() + (s * s).sum()
    args = (Tensor(x1), Tensor(x2), Tensor(gamma))
    for a, b in zip(grad(fused, (0, 1, 2))(*args), grad(unfused, (0, 1, 2))(*args)):
        np.testing.assert_allclose(a.asnumpy(), b.asnumpy(), rtol=1e-5, atol=1e-5)


def test_rope_mode0_equals_llama_rotate_half_and_mode1_the_complex_rotation():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 3, 7, 8)).astype(np.float32)
    cos, sin = rope_tables(8, 7)
    got = ops.rotary_position_embedding(Tensor(x), Tensor(cos[None, None]), Tensor(sin[None, None]), 0)
    want = apply_rotary_emb(Tensor(x), Tensor(cos), Tensor(sin))          # the unfused minispore.llm version
    np.testing.assert_allclose(got.asnumpy(), want.asnumpy(), rtol=1e-6, atol=1e-6)
    # interleaved: the pair (x[2i], x[2i+1]) as a complex number, multiplied by e^{i * angle}
    freqs = 10000.0 ** (-np.arange(0, 8, 2) / 8)
    ang = np.outer(np.arange(7), freqs)
    c, s = np.repeat(np.cos(ang), 2, -1), np.repeat(np.sin(ang), 2, -1)
    got = ops.rotary_position_embedding(Tensor(x.astype(np.float64)), Tensor(c[None, None]), Tensor(s[None, None]), 1)
    z = (x[..., 0::2] + 1j * x[..., 1::2]).astype(np.complex128) * np.exp(1j * ang)
    np.testing.assert_allclose(got.asnumpy(), np.stack([z.real, z.imag], -1).reshape(x.shape), atol=1e-12)


def test_rope_and_swiglu_gradients_match_torch():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 2, 5, 6))
    cos, sin = rng.standard_normal((1, 1, 5, 6)), rng.standard_normal((1, 1, 5, 6))
    w = rng.standard_normal(x.shape)
    g = grad(lambda a, c, s: (ops.rotary_position_embedding(a, c, s, 0) * Tensor(w)).sum(), (0, 1, 2))(
        Tensor(x), Tensor(cos), Tensor(sin))
    ts = [torch.tensor(a, requires_grad=True) for a in (x, cos, sin)]
    rot = torch.cat([-ts[0][..., 3:], ts[0][..., :3]], -1)
    ((ts[0] * ts[1] + rot * ts[2]) * torch.tensor(w)).sum().backward()
    for a, t in zip(g, ts):
        np.testing.assert_allclose(a.asnumpy(), t.grad.numpy(), atol=1e-12)

    h = rng.standard_normal((3, 4, 10))
    wv = rng.standard_normal((3, 2, 10))
    gh = grad(lambda a: (ops.swiglu(a, 1) * Tensor(wv)).sum())(Tensor(h))
    th = torch.tensor(h, requires_grad=True)
    a_, b_ = th.chunk(2, 1)
    (torch.nn.functional.silu(a_) * b_ * torch.tensor(wv)).sum().backward()
    np.testing.assert_allclose(gh.asnumpy(), th.grad.numpy(), atol=1e-12)
    np.testing.assert_allclose(ops.swiglu(Tensor(h), 1).asnumpy(),
                               (torch.nn.functional.silu(a_) * b_).detach().numpy(), atol=1e-12)


def test_layer_ops_bad_input():
    x = Tensor(np.ones((2, 4), np.float32))
    assert "add_rms_norm" in _bad(OpValueError, ops.add_rms_norm, x, Tensor(np.ones((2, 3), np.float32)),
                                  Tensor(np.ones(4, np.float32)))
    assert "gamma" in _bad(OpValueError, ops.add_rms_norm, x, x, Tensor(np.ones(3, np.float32)))
    assert "mode" in _bad(OpValueError, ops.rotary_position_embedding, x, x, x, 2)
    assert "even" in _bad(OpValueError, ops.rotary_position_embedding, Tensor(np.ones((2, 3))),
                          Tensor(np.ones((2, 3))), Tensor(np.ones((2, 3))))
    assert "broadcast" in _bad(OpValueError, ops.rotary_position_embedding, x, Tensor(np.ones((3, 4), np.float32)),
                                   x)
    assert "dtype" in _bad(OpTypeError, ops.rotary_position_embedding, x, Tensor(np.ones((2, 4))), x)
    assert "swiglu" in _bad(OpValueError, ops.swiglu, Tensor(np.ones((2, 3))))
    assert "axis" in _bad(IndexError, ops.swiglu, x, 5)


# =================================================================================================
# quantized matmuls, matmul_allreduce
def test_weight_quant_matmul_never_holds_the_whole_float_weight():
    rng = np.random.default_rng(6)
    k, n = 4096, 256
    w = rng.integers(-127, 128, (k, n)).astype(np.int8)
    scale = rng.uniform(0.001, 0.01, n).astype(np.float32)
    x = rng.standard_normal((2, k)).astype(np.float32)
    xt, wt, st = Tensor(x), Tensor(w), Tensor(scale)
    tracemalloc.start()
    try:
        y = ops.weight_quant_batch_matmul(xt, wt, st)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < k * n * 4 / 8                      # the float32 weight would be k*n*4 bytes
    np.testing.assert_allclose(y.asnumpy(), x.astype(np.float64) @ (w * scale.astype(np.float64)), rtol=1e-4, atol=1e-3)


def test_quant_batch_matmul_accumulates_exactly():
    rng = np.random.default_rng(7)
    a = np.full((2, 8192), 127, np.int8)
    a[1] = -128
    b = rng.integers(-128, 128, (8192, 3)).astype(np.int8)
    y = ops.quant_batch_matmul(Tensor(a), Tensor(b), Tensor(np.ones(1, np.float64)), dtype=ms.float64)
    np.testing.assert_array_equal(y.asnumpy(), (a.astype(np.int64) @ b.astype(np.int64)).astype(np.float64))
    q = ops.quant_batch_matmul(Tensor(a), Tensor(b), Tensor(np.ones(1, np.float32)), dtype=ms.int8)
    assert q.dtype == ms.int8 and set(np.unique(q.asnumpy())) <= {-128, 127}   # saturated


def test_matmul_allreduce_is_matmul_on_one_device():
    rng = np.random.default_rng(8)
    x, w, b = rng.standard_normal((2, 3, 4)), rng.standard_normal((5, 4)), rng.standard_normal(5)
    y = ops.matmul_allreduce(Tensor(x), Tensor(w), bias=Tensor(b), trans_x2=True)
    np.testing.assert_allclose(y.asnumpy(), x @ w.T + b, atol=1e-12)
    g1 = grad(lambda a, c, d: ops.matmul_allreduce(a, c, bias=d, trans_x2=True).sum(), (0, 1, 2))(
        Tensor(x), Tensor(w), Tensor(b))
    g2 = grad(lambda a, c, d: (ops.matmul(a, c.T) + d).sum(), (0, 1, 2))(Tensor(x), Tensor(w), Tensor(b))
    for a, c in zip(g1, g2):
        np.testing.assert_allclose(a.asnumpy(), c.asnumpy(), atol=1e-12)


def test_quant_ops_bad_input():
    x = Tensor(np.ones((2, 4), np.float32))
    w8 = Tensor(np.ones((4, 3), np.int8))
    wq = ops.weight_quant_batch_matmul
    assert "int8" in _bad(OpTypeError, wq, x, Tensor(np.ones((4, 3), np.float32)), Tensor(np.ones(3, np.float32)))
    assert "reduction dim" in _bad(OpValueError, wq, x, Tensor(np.ones((5, 3), np.int8)),
                                   Tensor(np.ones(3, np.float32)))
    assert "antiquant_scale" in _bad(OpValueError, wq, x, w8, Tensor(np.ones(2, np.float32)))
    assert "antiquant_scale" in _bad(OpValueError, wq, x, w8, None)
    qb = ops.quant_batch_matmul
    assert "x1" in _bad(OpTypeError, qb, x, w8, Tensor(np.ones(3, np.float32)))
    assert "offset" in _bad(OpValueError, qb, Tensor(np.ones((2, 4), np.int8)), w8, Tensor(np.ones(3, np.float32)),
                            Tensor(np.ones(3, np.float32)))
    assert "dtype" in _bad(OpTypeError, qb, Tensor(np.ones((2, 4), np.int8)), w8, Tensor(np.ones(3, np.float32)),
                           dtype="float16")
    assert "group" in _bad(OpTypeError, ops.matmul_allreduce, x, Tensor(np.ones((4, 3), np.float32)), group=3)
    assert "reduce_op" in _bad(OpValueError, ops.matmul_allreduce, x, Tensor(np.ones((4, 3), np.float32)),
                               reduce_op="max")
    assert "matmul_allreduce" in _bad(OpValueError, ops.matmul_allreduce, x, Tensor(np.ones((3, 3), np.float32)))
