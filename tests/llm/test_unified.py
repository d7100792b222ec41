"""One model class, every way of running it: full forward, contiguous KV cache, paged KV cache,
chunked prefill, batched decoding of ragged prompts, forks with copy-on-write, prefix caching —
all give the logits of the plain full forward (float32, <= 1e-5), and the model still trains."""
import numpy as np
import pytest

import minispore as ms
from minispore.common.errors import OpValueError
from minispore.llm import Llama, LlamaConfig, OutOfBlocksError
from minispore.llm.generate import generate_batch

TOL = dict(rtol=0, atol=1e-5)


def make_model(seed=0, attention="naive", **kw):
    cfg = dict(vocab_size=61, dim=32, n_layers=2, n_heads=4, n_kv_heads=2, max_seq_len=48, multiple_of=8,
               tie_embeddings=False)
    cfg.update(kw)
    ms.set_seed(seed)
    m = Llama(LlamaConfig(**cfg), attention=attention)
    rng = np.random.default_rng(seed)
    for name, p in m.parameters_and_names():
        # larger than the 0.02 init, so attention is far from uniform and positions matter
        scale = 6.0 if p.ndim == 2 else 1.0
        noise = 0.1 * rng.standard_normal(p.shape) if p.ndim == 1 else 0.0
        p.set_data(ms.Tensor((p.asnumpy() * scale + noise).astype(np.float32)))
    m.set_train(False)
    return m


IMPLS = ["naive", "flash"] if hasattr(ms.ops, "flash_attention_score") else ["naive"]
MODELS = {impl: make_model(attention=impl) for impl in IMPLS}      # the same weights


@pytest.fixture(params=IMPLS)
def model(request):
    """The test model with each attention core (naive; flash = MindSpore's fused attention ops)."""
    return MODELS[request.param]


MODEL = MODELS["naive"]
RNG = np.random.default_rng(1)
SEQ = RNG.integers(0, 61, 40).tolist()                  # a prompt of 13 + 27 teacher-forced tokens


def full_logits(model, ids):
    return model(ms.Tensor(np.asarray([ids], np.int64))).asnumpy()[0]


def run_contiguous(model, ids, prompt_len, chunk=None):
    """Prefill ids[:prompt_len] (in chunks), then feed the rest one token at a time."""
    cache = model.new_cache()
    step = chunk or prompt_len
    out = [model(ms.Tensor(np.asarray([ids[i:min(i + step, prompt_len)]], np.int64)), cache).asnumpy()[0]
           for i in range(0, prompt_len, step)]
    out += [model(ms.Tensor(np.asarray([[t]], np.int64)), cache).asnumpy()[0] for t in ids[prompt_len:]]
    return np.concatenate(out)


def run_paged(model, ids, prompt_len, block_size, chunk=None, fused=None, seq_id="s"):
    cache = model.new_paged_cache(num_blocks=64, block_size=block_size, use_fused_ops=fused)
    cached = cache.add_sequence(seq_id, ids[:prompt_len])
    assert cached == 0
    step = chunk or prompt_len
    out = [model(ms.Tensor(np.asarray([ids[i:min(i + step, prompt_len)]], np.int64)), cache.batch([seq_id])).asnumpy()[0]
           for i in range(0, prompt_len, step)]
    out += [model(ms.Tensor(np.asarray([[t]], np.int64)), cache.batch([seq_id])).asnumpy()[0] for t in ids[prompt_len:]]
    return np.concatenate(out)


REF = full_logits(MODEL, SEQ)                            # the naive full forward: every path must give it


def test_incremental_decode_equals_the_full_forward_at_every_position(model):
    np.testing.assert_allclose(run_contiguous(model, SEQ, 13), REF, **TOL)
    # and the reference is not trivial: positions really differ
    assert np.abs(REF[1:] - REF[:-1]).max() > 1.0


FUSED = [False, True] if hasattr(ms.ops, "paged_attention") else [False]


@pytest.mark.parametrize("fused", FUSED)                         # ops.paged_attention, or gather + attention
@pytest.mark.parametrize("block_size", [1, 4, 16, 5])          # 5 divides neither 13 nor 40
def test_paged_cache_equals_the_contiguous_cache(model, block_size, fused):
    np.testing.assert_allclose(run_paged(model, SEQ, 13, block_size, fused=fused), REF, **TOL)


@pytest.mark.parametrize("chunk", [1, 7, 64])
def test_chunked_prefill_equals_unchunked(model, chunk):
    np.testing.assert_allclose(run_contiguous(model, SEQ, 30, chunk), REF, **TOL)
    for fused in FUSED:
        np.testing.assert_allclose(run_paged(model, SEQ, 30, 4, chunk, fused), REF, **TOL)


PROMPTS = [RNG.integers(0, 61, n).tolist() for n in (3, 11, 7, 1)]
FORCED = [RNG.integers(0, 61, 6).tolist() for _ in PROMPTS]       # teacher-forced decode tokens


def test_batched_left_padded_decoding_equals_one_at_a_time(model):
    width = max(map(len, PROMPTS))
    pad = [width - len(p) for p in PROMPTS]
    ids = np.zeros((len(PROMPTS), width), np.int64)
    for b, p in enumerate(PROMPTS):
        ids[b, pad[b]:] = p
    cache = model.new_cache(pad=pad)
    got = [model(ms.Tensor(ids), cache).asnumpy()[:, -1]]
    for t in range(6):
        step = np.asarray([[f[t]] for f in FORCED], np.int64)
        got.append(model(ms.Tensor(step), cache).asnumpy()[:, 0])
    got = np.stack(got, axis=1)                                   # (B, 7, vocab)
    for b, p in enumerate(PROMPTS):
        alone = full_logits(model, p + FORCED[b])[len(p) - 1:]
        np.testing.assert_allclose(got[b], alone, **TOL)


@pytest.mark.parametrize("fused", FUSED)
@pytest.mark.parametrize("block_size", [1, 3, 16])
def test_batched_paged_decoding_equals_one_at_a_time(model, block_size, fused):
    cache = model.new_paged_cache(num_blocks=64, block_size=block_size, use_fused_ops=fused)
    firsts = []
    for b, p in enumerate(PROMPTS):                                # per-sequence prefill
        cache.add_sequence(b, p)
        firsts.append(model(ms.Tensor(np.asarray([p], np.int64)), cache.batch([b])).asnumpy()[0, -1])
    got = [np.stack(firsts)]
    ids = list(range(len(PROMPTS)))
    for t in range(6):                                            # ragged lengths, one decode batch
        step = np.asarray([[f[t]] for f in FORCED], np.int64)
        got.append(model(ms.Tensor(step), cache.batch(ids)).asnumpy()[:, 0])
    got = np.stack(got, axis=1)
    for b, p in enumerate(PROMPTS):
        np.testing.assert_allclose(got[b], full_logits(model, p + FORCED[b])[len(p) - 1:], **TOL)


@pytest.mark.parametrize("kv_cache", ["contiguous", "paged"])
@pytest.mark.parametrize("sampling", [dict(temperature=0.0), dict(temperature=1.0, top_p=0.8, seed=5),
                                      dict(temperature=0.7, top_k=7, repetition_penalty=1.5, seed=2)])
def test_batched_generation_gives_every_prompt_its_own_tokens(model, kv_cache, sampling):
    batched = generate_batch(model, PROMPTS, 20, kv_cache=kv_cache, block_size=4, prefill_chunk=4, **sampling)
    for b, p in enumerate(PROMPTS):
        opts = dict(sampling, seed=sampling["seed"] + b) if "seed" in sampling else sampling
        alone = generate_batch(model, [p], 20, kv_cache=None, **opts)[0]      # no cache at all
        assert batched[b].token_ids == alone.token_ids, b
    assert len({tuple(r.token_ids) for r in batched}) == len(PROMPTS)


def test_prefix_caching_skips_the_shared_prompt_and_keeps_the_logits(model):
    system = SEQ[:24]
    cache = model.new_paged_cache(num_blocks=32, block_size=8)
    user_a, user_b = system + [1, 2, 3, 4, 5], system + [9, 8, 7, 6, 5, 4]
    assert cache.add_sequence("a", user_a) == 0
    model(ms.Tensor(np.asarray([user_a], np.int64)), cache.batch(["a"]))
    cached = cache.add_sequence("b", user_b)
    assert cached == 24                                            # three full blocks found
    logits = model(ms.Tensor(np.asarray([user_b[cached:]], np.int64)), cache.batch(["b"])).asnumpy()[0]
    # only prompt - 24 = 6 tokens computed (<= prompt - 24 + block_size), same logits as from scratch
    assert logits.shape[0] == 6
    np.testing.assert_allclose(logits, full_logits(model, user_b)[24:], **TOL)
    # and the first request is unaffected by the second sharing its blocks
    nxt = model(ms.Tensor(np.asarray([[7]], np.int64)), cache.batch(["a"])).asnumpy()[0, -1]
    np.testing.assert_allclose(nxt, full_logits(model, user_a + [7])[-1], **TOL)


def test_generate_batch_shares_prompt_prefixes_between_requests(model):
    system = SEQ[:20]
    prompts = [system + [1, 2], system + [3], SEQ[:5], system + [4, 5, 6]]
    res = generate_batch(model, prompts, 6, kv_cache="paged", block_size=4)
    assert [r.cached_tokens for r in res] == [0, 20, 4, 20]         # SEQ[:5] shares the first block too
    for r, p in zip(res, prompts):
        assert r.token_ids == generate_batch(model, [p], 6, kv_cache=None)[0].token_ids


def test_forked_sequences_diverge_with_copy_on_write(model):
    cache = model.new_paged_cache(num_blocks=16, block_size=4)
    prompt = SEQ[:10]                                              # the last block is partly filled
    cache.add_sequence("p", prompt)
    model(ms.Tensor(np.asarray([prompt], np.int64)), cache.batch(["p"]))
    cache.fork("p", "c")
    used = cache.manager.num_used_blocks
    out = model(ms.Tensor(np.asarray([[3], [4]], np.int64)), cache.batch(["p", "c"])).asnumpy()[:, 0]
    assert cache.manager.num_used_blocks == used + 1              # one block copied for the child
    np.testing.assert_allclose(out[0], full_logits(model, prompt + [3])[-1], **TOL)
    np.testing.assert_allclose(out[1], full_logits(model, prompt + [4])[-1], **TOL)
    cache.free("p")
    cache.free("c")
    assert cache.manager.num_free_blocks == 16


def test_the_model_that_generated_still_trains_identically():
    """No conversion, no leftover state: after generating (both caches), loss and gradients are
    those of an untouched copy of the model."""
    a, b = make_model(seed=3), make_model(seed=3)
    a.set_train(True)
    generate_batch(a, PROMPTS, 5, kv_cache="paged")
    generate_batch(a, PROMPTS, 5, kv_cache="contiguous")
    assert a.training
    b.set_train(True)
    x = ms.Tensor(RNG.integers(0, 61, (2, 16)))
    y = ms.Tensor(RNG.integers(0, 61, (2, 16)))
    la, ga = ms.value_and_grad(a.loss, None, a.trainable_params())(x, y)
    lb, gb = ms.value_and_grad(b.loss, None, b.trainable_params())(x, y)
    assert la.item() == lb.item()
    for u, v in zip(ga, gb):
        np.testing.assert_array_equal(u.asnumpy(), v.asnumpy())


def test_paged_cache_bad_input():
    cache = MODEL.new_paged_cache(num_blocks=2, block_size=4)
    cache.add_sequence("a", [1, 2, 3])
    with pytest.raises(OpValueError, match="reserved prompt tokens"):
        MODEL(ms.Tensor(np.asarray([[1, 2, 4]], np.int64)), cache.batch(["a"]))
    with pytest.raises(OpValueError, match="one per sequence"):
        MODEL(ms.Tensor(np.asarray([[1, 2, 3]] * 2, np.int64)), cache.batch(["a"]))
    with pytest.raises(OpValueError, match="sequence id"):
        cache.batch(["zzz"])
    with pytest.raises(OpValueError, match="distinct"):
        cache.batch(["a", "a"])
    MODEL(ms.Tensor(np.asarray([[1, 2, 3]], np.int64)), cache.batch(["a"]))
    with pytest.raises(OutOfBlocksError, match=r"needs 2 free block\(s\) but has 1"):
        MODEL(ms.Tensor(np.asarray([[5] * 6], np.int64)), cache.batch(["a"]))
    assert cache.manager.num_tokens("a") == 3                     # nothing was reserved
    with pytest.raises(OpValueError, match="already cached"):
        MODEL(ms.Tensor(np.zeros((1, 48), np.int64)), cache.batch(["a"]))
    contiguous = MODEL.new_cache(pad=[0, 2])
    with pytest.raises(OpValueError, match="one per padding length"):
        MODEL(ms.Tensor(np.zeros((3, 4), np.int64)), contiguous)


@pytest.mark.skipif(not hasattr(ms.ops, "flash_attention_score"), reason="no fused-op family")
def test_fused_ops_change_training_only_by_rounding(monkeypatch):
    """FlashAttention (forward and backward) and the fused RoPE / add+RMSNorm ops train exactly
    like the composite spelling: three AdamW steps, float64 to 1e-10 and float32 to 1e-5."""
    from minispore import nn
    from minispore.llm import model as model_mod

    def three_steps(attention, fused_layers, dtype):
        if not fused_layers:
            monkeypatch.setattr(model_mod, "_FUSED_ROPE", None)
            monkeypatch.setattr(model_mod, "_FUSED_ADD_RMS_NORM", None)
        ms.set_seed(0)
        m = Llama(LlamaConfig(vocab_size=61, dim=32, n_layers=2, n_heads=4, n_kv_heads=2, max_seq_len=24,
                              multiple_of=8), attention=attention)
        for p in m.get_parameters():
            p.set_dtype(dtype)
        opt = nn.AdamWeightDecay(m.trainable_params(), learning_rate=1e-2, weight_decay=0.1)
        grad_fn = ms.value_and_grad(m.loss, None, opt.parameters)
        rng = np.random.default_rng(0)
        losses = []
        for _ in range(3):
            x, y = (ms.Tensor(rng.integers(0, 61, (3, 24))) for _ in range(2))
            loss, grads = grad_fn(x, y)
            opt(grads)
            losses.append(loss.item())
        monkeypatch.undo()
        return losses, [p.asnumpy() for p in m.trainable_params()]

    assert model_mod._FUSED_ROPE is not None and model_mod._FUSED_ADD_RMS_NORM is not None
    for dtype, tol in ((ms.float64, 1e-10), (ms.float32, 1e-5)):
        ref_loss, ref_w = three_steps("naive", False, dtype)
        got_loss, got_w = three_steps("flash", True, dtype)
        np.testing.assert_allclose(got_loss, ref_loss, rtol=tol)
        for a, b in zip(got_w, ref_w):
            np.testing.assert_allclose(a, b, rtol=0, atol=tol * 10)
