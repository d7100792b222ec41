"""The LLaMA model: shapes and names, causality, RoPE against complex rotation, GQA against MHA,
the KV cache, bad input, and (with torch) logits and every parameter gradient against a
hand-written float64 PyTorch LLaMA."""
import numpy as np
import pytest

import minispore as ms
from minispore.common.errors import OpTypeError, OpValueError
from minispore.llm import Llama, LlamaConfig, apply_rotary_emb, get_preset, rope_tables
from minispore.llm.rope import rope_frequencies


def tiny(**kw):
    base = dict(vocab_size=11, dim=16, n_layers=2, n_heads=4, n_kv_heads=2, max_seq_len=8, dropout=0.0,
                multiple_of=8, tie_embeddings=False)
    base.update(kw)
    return LlamaConfig(**base)


def make_model(cfg, seed=0, dtype=None):
    ms.set_seed(seed)
    m = Llama(cfg)
    if dtype is not None:
        for p in m.get_parameters():
            p.set_dtype(dtype)
    # the norms start at exactly 1; make them generic so the test sees their gradients' effect
    rng = np.random.default_rng(seed + 100)
    for name, p in m.parameters_and_names():
        if name.endswith("norm.weight"):
            p.set_data(ms.Tensor((1.0 + 0.1 * rng.standard_normal(p.shape)).astype(p.asnumpy().dtype)))
    return m


def tokens(cfg, batch=2, seq=None, seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(0, cfg.vocab_size, (batch, seq or cfg.max_seq_len)).astype(np.int64)


# ------------------------------------------------------------------------------------------------
def test_parameter_names_shapes_and_count():
    cfg = tiny()
    m = make_model(cfg)
    names = dict((n, tuple(p.shape)) for n, p in m.parameters_and_names())
    hd = cfg.head_dim
    assert names["tok_embeddings.embedding_table"] == (11, 16)
    assert names["layers.0.attention.wq.weight"] == (4 * hd, 16)
    assert names["layers.0.attention.wk.weight"] == (2 * hd, 16)
    assert names["layers.1.attention.wv.weight"] == (2 * hd, 16)
    assert names["layers.1.attention.wo.weight"] == (16, 4 * hd)
    assert names["layers.0.feed_forward.w1.weight"] == (cfg.hidden_dim, 16)
    assert names["layers.0.feed_forward.w2.weight"] == (16, cfg.hidden_dim)
    assert names["layers.0.attention_norm.weight"] == (16,)
    assert names["layers.0.ffn_norm.weight"] == (16,)
    assert names["norm.weight"] == (16,)
    assert names["output.weight"] == (11, 16)
    assert len(names) == 1 + 2 * 9 + 1 + 1
    assert not any("bias" in n for n in names)
    assert m.num_params() == cfg.num_params()
    # the names are the Parameters' own names too (what checkpoints store)
    assert [p.name for p in m.trainable_params()] == list(names)


def test_tied_head_has_no_output_weight_and_uses_the_table():
    cfg = tiny(tie_embeddings=True)
    m = make_model(cfg)
    assert "output.weight" not in dict(m.parameters_and_names())
    assert m.head_weight() is m.tok_embeddings.embedding_table
    assert m.num_params() == cfg.num_params()


def test_hidden_dim_follows_llama_rounding():
    # 2/3 * 4 * 128 = 341 -> next multiple of 32 = 352 (the shakespeare-char preset)
    assert get_preset("shakespeare-char").model.hidden_dim == 352
    assert LlamaConfig(dim=4096, n_heads=32, multiple_of=256).hidden_dim == 11008     # LLaMA-7B
    assert LlamaConfig(dim=64, n_heads=4, ffn_dim=100).hidden_dim == 100


def test_presets():
    p = get_preset("shakespeare-char")
    c = p.model
    assert (c.n_layers, c.n_heads, c.dim, c.max_seq_len, c.vocab_size, c.dropout) == (4, 4, 128, 64, 65, 0.0)
    assert p.train["max_iters"] == 2000 and p.train["batch_size"] == 12 and p.train["learning_rate"] == 1e-3
    s = get_preset("shakespeare-small").model
    assert (s.n_layers, s.n_heads, s.dim, s.max_seq_len) == (6, 6, 384, 256)
    # a copy: changing it does not change the registry
    p.model.dim = 7
    assert get_preset("shakespeare-char").model.dim == 128
    with pytest.raises(OpValueError, match="get_preset"):
        get_preset("shakespeare-huge")


def test_logits_shape_and_initial_loss_near_uniform():
    cfg = get_preset("shakespeare-char").model
    m = make_model(cfg)
    x = tokens(cfg, batch=3)
    logits = m(ms.Tensor(x))
    assert logits.shape == (3, 64, 65) and logits.dtype == ms.float32
    y = tokens(cfg, batch=3, seed=9)
    loss = float(m.loss(ms.Tensor(x), ms.Tensor(y)).item())
    # with 0.02-std weights the model starts close to uniform: loss ~ ln(65) = 4.17 (for unrelated
    # targets: the tied head favours repeating the input token)
    assert abs(loss - np.log(65)) < 0.1


def test_causality_future_tokens_do_not_change_earlier_logits():
    cfg = tiny()
    m = make_model(cfg, dtype=ms.float64)
    x = tokens(cfg, batch=2)
    base = m(ms.Tensor(x)).asnumpy()
    for t in (2, 5, cfg.max_seq_len - 1):
        y = x.copy()
        y[:, t] = (y[:, t] + 1) % cfg.vocab_size
        out = m(ms.Tensor(y)).asnumpy()
        np.testing.assert_allclose(out[:, :t], base[:, :t], rtol=0, atol=1e-12)
        assert np.abs(out[:, t] - base[:, t]).max() > 1e-6          # the changed position does change


def test_dropout_is_active_only_in_training():
    cfg = tiny(dropout=0.3)
    m = make_model(cfg)
    x = ms.Tensor(tokens(cfg))
    m.set_train(False)
    a, b = m(x).asnumpy(), m(x).asnumpy()
    np.testing.assert_array_equal(a, b)
    m.set_train(True)
    c = m(x).asnumpy()
    assert np.abs(c - a).max() > 1e-4


# ------------------------------------------------------------------------------------------------
# rotary embeddings
def rope_complex(x, theta=10000.0):
    """Direct formula: pair (x_i, x_{i+d/2}) is the complex number x_i + j x_{i+d/2}, rotated by
    exp(j * p * theta^(-2i/d)) at position p (axis 1)."""
    d = x.shape[-1]
    z = x[..., : d // 2] + 1j * x[..., d // 2:]
    pos = np.arange(x.shape[1], dtype=np.float64)
    freqs = 1.0 / theta ** (np.arange(d // 2, dtype=np.float64) * 2 / d)
    rot = np.exp(1j * np.outer(pos, freqs))                    # (T, d/2)
    z = z * rot[None, :, None, :]
    return np.concatenate([z.real, z.imag], axis=-1)


@pytest.mark.parametrize("theta", [10000.0, 500.0])
def test_rope_matches_complex_rotation(theta):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 7, 3, 8))                      # (B, T, H, hd)
    cos, sin = rope_tables(8, 7, theta, dtype=np.float64)
    out = apply_rotary_emb(ms.Tensor(x), ms.Tensor(cos[:, None, :]), ms.Tensor(sin[:, None, :])).asnumpy()
    np.testing.assert_allclose(out, rope_complex(x, theta), rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(rope_frequencies(8, theta), theta ** (-np.arange(0, 8, 2) / 8))


def test_rope_scores_depend_only_on_relative_position():
    rng = np.random.default_rng(2)
    q, k = rng.standard_normal(16), rng.standard_normal(16)
    cos, sin = rope_tables(16, 40, dtype=np.float64)

    def at(v, p):
        return apply_rotary_emb(ms.Tensor(v[None]), ms.Tensor(cos[p:p + 1]), ms.Tensor(sin[p:p + 1])).asnumpy()[0]

    s1 = at(q, 10) @ at(k, 7)
    s2 = at(q, 33) @ at(k, 30)
    np.testing.assert_allclose(s1, s2, rtol=1e-12)
    # and rotation keeps the norm
    np.testing.assert_allclose(np.linalg.norm(at(q, 25)), np.linalg.norm(q), rtol=1e-13)


def test_rope_tables_float32_are_accurate_at_large_positions():
    cos, sin = rope_tables(64, 4096)
    c64, s64 = rope_tables(64, 4096, dtype=np.float64)
    assert cos.dtype == np.float32
    np.testing.assert_allclose(cos, c64, atol=1e-7)
    np.testing.assert_allclose(sin, s64, atol=1e-7)


# ------------------------------------------------------------------------------------------------
def test_gqa_equals_mha_with_repeated_kv_weights():
    gqa_cfg = tiny(n_heads=4, n_kv_heads=2)
    mha_cfg = tiny(n_heads=4, n_kv_heads=4)
    gqa = make_model(gqa_cfg, dtype=ms.float64)
    mha = make_model(mha_cfg, seed=5, dtype=ms.float64)
    hd, n_rep = gqa_cfg.head_dim, 2
    g = dict(gqa.parameters_and_names())
    for name, p in mha.parameters_and_names():
        w = g[name].asnumpy()
        if name.endswith(("wk.weight", "wv.weight")):
            # MHA head h uses GQA kv head h // n_rep: repeat each kv head's rows n_rep times
            w = np.repeat(w.reshape(2, hd, -1), n_rep, axis=0).reshape(4 * hd, -1)
        p.set_data(ms.Tensor(w.copy()))
    x = ms.Tensor(tokens(gqa_cfg, batch=3))
    np.testing.assert_allclose(gqa(x).asnumpy(), mha(x).asnumpy(), rtol=1e-12, atol=1e-12)


def test_multi_query_attention_works():
    cfg = tiny(n_heads=4, n_kv_heads=1)
    m = make_model(cfg)
    assert dict(m.parameters_and_names())["layers.0.attention.wk.weight"].shape == (cfg.head_dim, 16)
    assert m(ms.Tensor(tokens(cfg))).shape == (2, 8, 11)


# ------------------------------------------------------------------------------------------------
# KV cache
@pytest.mark.parametrize("kv", [4, 2])
def test_kv_cache_incremental_logits_equal_full_forward(kv):
    cfg = tiny(n_kv_heads=kv)
    m = make_model(cfg, dtype=ms.float64)
    x = tokens(cfg, batch=2)
    full = m(ms.Tensor(x)).asnumpy()
    cache = m.new_cache()
    parts = [m(ms.Tensor(x[:, :3]), cache).asnumpy()]             # prefill 3 positions
    for t in range(3, cfg.max_seq_len):                          # then one at a time
        parts.append(m(ms.Tensor(x[:, t:t + 1]), cache).asnumpy())
    assert cache.length == cfg.max_seq_len
    np.testing.assert_allclose(np.concatenate(parts, axis=1), full, rtol=1e-12, atol=1e-12)
    with pytest.raises(OpValueError, match="already cached"):
        m(ms.Tensor(x[:, :1]), cache)


# ------------------------------------------------------------------------------------------------
# bad input
def test_bad_tokens_are_rejected_with_clear_errors():
    cfg = tiny()
    m = make_model(cfg)
    with pytest.raises(OpValueError, match="Llama"):
        m(ms.Tensor(np.zeros((2, cfg.max_seq_len + 1), np.int64)))          # longer than the context
    with pytest.raises(OpValueError, match="Llama"):
        m(ms.Tensor(np.zeros((2, 3), np.float32)))                           # not integer ids
    with pytest.raises(OpValueError, match="Llama"):
        m(ms.Tensor(np.zeros((6,), np.int64)))                               # no batch dimension
    with pytest.raises(OpTypeError, match="Llama"):
        m(np.zeros((2, 3), np.int64))                                        # not a Tensor
    with pytest.raises(OpTypeError, match="Llama"):
        Llama({"dim": 16})


@pytest.mark.parametrize("kw, word", [
    (dict(dim=30, n_heads=4), "n_heads"),            # not divisible
    (dict(dim=12, n_heads=4), "even"),               # odd head_dim
    (dict(n_heads=4, n_kv_heads=3), "n_kv_heads"),
    (dict(n_heads=2, n_kv_heads=4), "n_kv_heads"),
    (dict(dropout=1.0), "dropout"),
    (dict(n_layers=0), "n_layers"),
    (dict(vocab_size=2.5), "vocab_size"),
    (dict(norm_eps=0.0), "norm_eps"),
])
def test_bad_configs_are_rejected(kw, word):
    with pytest.raises(OpValueError, match=word) as e:
        LlamaConfig(**kw)
    assert "LlamaConfig" in str(e.value)


def test_config_round_trips_through_a_dict():
    cfg = tiny(rope_theta=500.0)
    assert LlamaConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(OpValueError, match="unknown keys"):
        LlamaConfig.from_dict({**cfg.to_dict(), "n_layer": 3})


# ------------------------------------------------------------------------------------------------
# PyTorch float64 reference: an independent, hand-written LLaMA
def torch_llama(torch, params, cfg, x):
    F = torch.nn.functional
    B, T = x.shape
    hd, H, KV = cfg.head_dim, cfg.n_heads, cfg.n_kv_heads

    def rms(v, w):
        return v * torch.rsqrt(v.pow(2).mean(-1, keepdim=True) + cfg.norm_eps) * w

    def rotate_half(v):
        v1, v2 = v[..., : hd // 2], v[..., hd // 2:]
        return torch.cat((-v2, v1), dim=-1)

    inv_freq = 1.0 / (cfg.rope_theta ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv_freq[None, :]
    ang = torch.cat((ang, ang), dim=-1)
    cos, sin = ang.cos(), ang.sin()                                   # (T, hd)
    causal = torch.ones(T, T, dtype=torch.bool).tril()

    h = params["tok_embeddings.embedding_table"][x]
    for i in range(cfg.n_layers):
        p = lambda n: params[f"layers.{i}.{n}"]                       # noqa: E731
        a = rms(h, p("attention_norm.weight"))
        q = (a @ p("attention.wq.weight").T).view(B, T, H, hd).transpose(1, 2)
        k = (a @ p("attention.wk.weight").T).view(B, T, KV, hd).transpose(1, 2)
        v = (a @ p("attention.wv.weight").T).view(B, T, KV, hd).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = k.repeat_interleave(H // KV, dim=1)
        v = v.repeat_interleave(H // KV, dim=1)
        att = (q @ k.transpose(-2, -1)) / hd ** 0.5
        att = att.masked_fill(~causal, float("-inf")).softmax(-1)
        o = (att @ v).transpose(1, 2).reshape(B, T, H * hd)
        h = h + o @ p("attention.wo.weight").T
        f = rms(h, p("ffn_norm.weight"))
        g = F.silu(f @ p("feed_forward.w1.weight").T) * (f @ p("feed_forward.w3.weight").T)
        h = h + g @ p("feed_forward.w2.weight").T
    h = rms(h, params["norm.weight"])
    head = params["tok_embeddings.embedding_table"] if cfg.tie_embeddings else params["output.weight"]
    return h @ head.T


@pytest.mark.torch
@pytest.mark.parametrize("tie, kv", [(False, 2), (True, 4), (True, 1)])
def test_logits_and_all_gradients_match_pytorch_float64(tie, kv):
    torch = pytest.importorskip("torch")
    cfg = tiny(tie_embeddings=tie, n_kv_heads=kv)
    m = make_model(cfg, dtype=ms.float64)
    x = tokens(cfg, batch=3, seed=3)
    y = tokens(cfg, batch=3, seed=4)

    tparams = {n: torch.tensor(p.asnumpy().copy(), requires_grad=True) for n, p in m.parameters_and_names()}
    t_logits = torch_llama(torch, tparams, cfg, torch.tensor(x))
    np.testing.assert_allclose(m(ms.Tensor(x)).asnumpy(), t_logits.detach().numpy(), rtol=1e-10, atol=1e-12)

    t_loss = torch.nn.functional.cross_entropy(t_logits.reshape(-1, cfg.vocab_size), torch.tensor(y).reshape(-1))
    t_loss.backward()
    params = m.trainable_params()
    loss, grads = ms.value_and_grad(m.loss, None, params)(ms.Tensor(x), ms.Tensor(y))
    np.testing.assert_allclose(loss.item(), t_loss.item(), rtol=1e-12)
    assert len(grads) == len(tparams)
    for p, g in zip(params, grads):
        ref = tparams[p.name].grad.numpy()
        assert np.abs(ref).max() > 0, p.name
        np.testing.assert_allclose(g.asnumpy(), ref, rtol=1e-8, atol=1e-12, err_msg=p.name)


# ------------------------------------------------------------------------------------------------
# the attention core is one swappable function
def test_attention_cores_agree_and_can_be_switched():
    from minispore.llm.attention import flash_attention_available
    cfg = tiny()
    m = make_model(cfg, dtype=ms.float64)
    x = ms.Tensor(tokens(cfg))
    m.set_attention("naive")
    naive = m(x).asnumpy()
    assert all(layer.attention.attention_fn.__name__ == "naive_attention" for layer in m.layers)
    if flash_attention_available():
        m.set_attention("flash")
        np.testing.assert_allclose(m(x).asnumpy(), naive, rtol=0, atol=1e-12)
        assert m.attention_impl == "flash"
    with pytest.raises(OpValueError, match="attention among"):
        Llama(cfg, attention="sparse")
