"""Config sizes are checked before anything is allocated (memory_estimate.py), the estimates are
close to what a real training step and a real generation measure, and config fields are typed.

The huge-config cases run with MINISPORE_MEMORY_LIMIT set (so they do not depend on this machine's
memory) and under an address-space cap a little above the process's current size, so a
regression that builds the model anyway fails with a plain MemoryError within seconds instead of
taking the machine's memory; tracemalloc shows the refusal came before any large allocation."""
import contextlib
import json
import math
import os
import shutil
import tracemalloc

import numpy as np
import pytest

import minispore as ms
from minispore import Tensor, value_and_grad
from minispore.common.errors import OpTypeError, OpValueError
from minispore.common.memory_limit import ENV_VAR, MemoryLimitError
from minispore.graph.dryrun import abstract_parameters
from minispore.llm import Llama, LlamaConfig, LlamaForCausalLM, PagedKVCache, get_preset
from minispore.llm import memory_estimate as me
from minispore.llm.rope import rope_tables
from minispore.mint.optim import AdamW
from hostile_io import address_space_headroom

FIXTURE = os.path.join(os.path.dirname(__file__), "..", "fixtures", "hf_llama")
SMALL = 32 * 2**20          # more than any refusal may allocate: config parsing and bookkeeping only


@contextlib.contextmanager
def refused_before_allocating():
    """Expect a MemoryLimitError from the block, raised while it has allocated less than SMALL."""
    tracemalloc.start()
    try:
        with address_space_headroom(), pytest.raises(MemoryLimitError) as e:
            yield e
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < SMALL, f"{peak:,} bytes were allocated before the refusal"
    assert "Nothing was allocated" in str(e.value) and ENV_VAR in str(e.value)


@pytest.fixture
def limit_16g(monkeypatch):
    monkeypatch.setenv(ENV_VAR, "16G")


# ------------------------------------------------------------------------------------------------
# huge configs are refused before the model is built
@pytest.mark.parametrize("changes", [
    {"num_hidden_layers": 1_000_000},
    {"hidden_size": 2**20, "head_dim": None},
    {"vocab_size": 2**34},
    {"intermediate_size": 2**40},
    {"max_position_embeddings": 10**9},
], ids=lambda c: next(iter(c)))
def test_huge_hf_config_values_are_refused_before_allocating(tmp_path, limit_16g, changes):
    shutil.copy(os.path.join(FIXTURE, "model.safetensors"), tmp_path)
    with open(os.path.join(FIXTURE, "config.json")) as f:
        cfg = json.load(f)
    cfg.update(changes)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with refused_before_allocating() as e:
        LlamaForCausalLM.from_pretrained(tmp_path)
    assert str(tmp_path / "config.json") in str(e.value)
    assert e.value.needed > 16 * 2**30 and e.value.limit == 16 * 2**30


@pytest.mark.parametrize("fields", [
    dict(n_layers=10**7),
    dict(dim=2**20, n_heads=2**10),
    dict(vocab_size=2**34),
    dict(max_seq_len=10**9),
    dict(ffn_dim=2**36),
], ids=lambda c: next(iter(c)))
def test_huge_llama_configs_are_refused_by_the_model_constructor(limit_16g, fields):
    cfg = LlamaConfig(**fields)              # a config is only a description (DryRun analyses 70B ones)
    with refused_before_allocating() as e:
        Llama(cfg)
    assert "Llama" in str(e.value)
    assert e.value.needed >= me.parameter_bytes(cfg)


def test_the_limit_follows_the_environment(monkeypatch):
    cfg = LlamaConfig(vocab_size=65, dim=64, n_layers=2, n_heads=4, max_seq_len=32)
    need = me.model_bytes(cfg)
    monkeypatch.setenv(ENV_VAR, str(need // 2))
    with pytest.raises(MemoryLimitError):
        Llama(cfg)
    monkeypatch.setenv(ENV_VAR, str(4 * need))
    assert Llama(cfg).num_params() == cfg.num_params()


def test_dryrun_builds_big_presets_without_weights_but_still_checks_the_rope_tables(monkeypatch):
    monkeypatch.setenv(ENV_VAR, "1G")
    cfg = get_preset("llama-7b").model       # 27 GB of float32 weights: refused when real ...
    with pytest.raises(MemoryLimitError):
        Llama(cfg)
    with abstract_parameters():              # ... fine as zero-stride abstract parameters
        assert Llama(cfg).num_params() == 6_738_415_616
    cfg.max_seq_len = 10**9                  # but the RoPE tables are real arrays
    with abstract_parameters(), refused_before_allocating() as e:
        Llama(cfg)
    assert "RoPE" in str(e.value) or "rope" in str(e.value)


def test_rope_tables_refuse_huge_lengths(limit_16g):
    with refused_before_allocating():
        rope_tables(128, 10**11)


def test_kv_caches_refuse_huge_capacities(limit_16g):
    ms.set_seed(0)
    m = Llama(LlamaConfig(vocab_size=16, dim=16, n_layers=2, n_heads=2, max_seq_len=8))
    cache = m.new_cache(capacity=2**40)
    with refused_before_allocating() as e:
        m(Tensor(np.zeros((1, 2), np.int64)), cache)
    assert "KV cache" in str(e.value)
    with refused_before_allocating() as e:
        PagedKVCache(m.config, num_blocks=10**12, block_size=16)
    assert "paged KV cache" in str(e.value)


def test_a_kv_cache_that_grows_past_the_limit_is_refused_and_keeps_its_contents(monkeypatch):
    ms.set_seed(0)
    m = Llama(LlamaConfig(vocab_size=16, dim=16, n_layers=2, n_heads=2, max_seq_len=4096))
    cache = m.new_cache()
    ids = np.random.default_rng(0).integers(0, 16, (1, 40))
    m(Tensor(ids[:, :20]), cache)
    monkeypatch.setenv(ENV_VAR, str(me.kv_cache_bytes(m.config, 1, 30, ms.float32) + 1))
    k0 = cache.layers[0].k.copy()
    with pytest.raises(MemoryLimitError, match="KV cache"):
        m(Tensor(ids[:, 20:40]), cache)                 # doubling 20 -> 40 columns: over the limit
    assert cache.length == 20
    np.testing.assert_array_equal(cache.layers[0].k, k0)


def test_check_training_and_check_inference_name_the_job(limit_16g):
    cfg = get_preset("shakespeare-char").model
    me.check_training(cfg, 12, 64, "train shakespeare-char")
    me.check_inference(cfg, 1, 64, "generate")
    with pytest.raises(MemoryLimitError, match=r"train shakespeare-char would need .*batch size"):
        me.check_training(cfg, 10**6, 64, "train shakespeare-char")
    with pytest.raises(MemoryLimitError, match=r"^generate would need"):
        me.check_inference(cfg, 10**7, 64, "generate")
    with pytest.raises(MemoryLimitError, match="this model config"):
        me.check_config(LlamaConfig(vocab_size=2**34))


@pytest.mark.parametrize("call, error, message", [
    (lambda: me.training_bytes(LlamaConfig(), 0, 8), OpValueError, "'batch_size' as a positive int"),
    (lambda: me.training_bytes(LlamaConfig(), 2, "8"), OpValueError, "'seq_len' as a positive int"),
    (lambda: me.inference_bytes(LlamaConfig(), True, 8), OpValueError, "'batch_size' as a positive int"),
    (lambda: me.parameter_bytes({"dim": 8}), OpTypeError, "a LlamaConfig"),
    (lambda: me.training_bytes(LlamaConfig(), 1, 8, attention="sparse"), OpValueError, "attention"),
])
def test_estimates_refuse_bad_arguments(call, error, message):
    with pytest.raises(error, match=message):
        call()


# ------------------------------------------------------------------------------------------------
# the estimates against real models
@pytest.mark.parametrize("cfg", [
    LlamaConfig(vocab_size=65, dim=64, n_layers=2, n_heads=4, max_seq_len=32),
    LlamaConfig(vocab_size=300, dim=48, n_layers=3, n_heads=4, n_kv_heads=2, max_seq_len=16,
                ffn_dim_multiplier=1.3, tie_embeddings=False),
    LlamaConfig(vocab_size=40, dim=32, n_layers=1, n_heads=2, ffn_dim=80, tie_embeddings=False),
])
@pytest.mark.parametrize("dtype", [ms.float32, ms.float64])
def test_parameter_bytes_is_exactly_what_the_model_holds(cfg, dtype):
    m = Llama(cfg)
    if dtype is not ms.float32:
        for p in m.get_parameters():
            p.set_dtype(dtype)
    held = sum(p.asnumpy().nbytes for p in m.trainable_params())
    assert me.parameter_bytes(cfg, dtype) == held
    assert me.parameter_bytes(cfg) == cfg.num_params() * 4


def measured_training_peak(cfg, batch, seq, attention):
    """tracemalloc's peak over building the model and optimizer and two real training steps
    (value_and_grad of the loss + an AdamW update), as the trainer runs them."""
    ms.set_seed(0)
    rng = np.random.default_rng(0)
    x = Tensor(rng.integers(0, cfg.vocab_size, (batch, seq)))
    y = Tensor(rng.integers(0, cfg.vocab_size, (batch, seq)))
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        model = Llama(cfg, attention=attention)
        model.set_train(True)
        opt = AdamW(model.trainable_params(), lr=1e-3)
        grad_fn = value_and_grad(lambda a, b: model.loss(a, b), None, opt.parameters)
        for _ in range(2):                       # the second step has the moments already allocated
            loss, grads = grad_fn(x, y)
            opt(grads)
            del loss, grads
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("cfg, batch, seq, attention", [
    (LlamaConfig(vocab_size=65, dim=64, n_layers=2, n_heads=4, max_seq_len=128), 4, 128, "naive"),
    (LlamaConfig(vocab_size=65, dim=64, n_layers=2, n_heads=4, max_seq_len=128), 4, 128, "flash"),
    (LlamaConfig(vocab_size=1000, dim=32, n_layers=2, n_heads=2, max_seq_len=32, tie_embeddings=False),
     4, 32, "auto"),
    (LlamaConfig(vocab_size=65, dim=192, n_layers=1, n_heads=6, n_kv_heads=2, max_seq_len=16), 2, 16, "naive"),
], ids=["attention-bound naive", "attention-bound flash", "vocab-bound", "weight-bound GQA"])
def test_training_bytes_is_within_2x_of_a_measured_training_step(cfg, batch, seq, attention):
    measured = measured_training_peak(cfg, batch, seq, attention)
    estimate = me.training_bytes(cfg, batch, seq, attention=attention)
    assert 0.5 <= estimate / measured <= 2.0, (estimate, measured)
    # and the parts are sized right: weights + grads + moments alone stay below the estimate
    assert estimate > 4 * me.parameter_bytes(cfg)


@pytest.mark.parametrize("attention", ["naive", "flash"])
def test_inference_bytes_is_within_2x_of_a_measured_generation(attention):
    """tracemalloc's peak over building the model and a real `generate` (a 200-token prefill of
    4 rows, then 8 decode steps through a contiguous KV cache)."""
    cfg = LlamaConfig(vocab_size=500, dim=64, n_layers=2, n_heads=4, n_kv_heads=2, max_seq_len=256)
    ms.set_seed(0)
    prompts = np.random.default_rng(0).integers(0, 500, (4, 200))
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        m = Llama(cfg, attention=attention)
        m.set_train(False)
        out = m.generate(ms.Tensor(prompts), max_new_tokens=8, stop_token_ids=())
        measured = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert out.shape == (4, 208)
    estimate = me.inference_bytes(cfg, 4, 208, attention=attention)
    assert 0.5 <= estimate / measured <= 2.0, (estimate, measured)
    assert estimate > me.parameter_bytes(cfg) + me.kv_cache_bytes(cfg, 4, 208, ms.float32)


def test_the_parts_of_the_estimates_add_up():
    cfg = LlamaConfig(vocab_size=100, dim=32, n_layers=2, n_heads=4, n_kv_heads=1, max_seq_len=64)
    # KV cache: keys and values, every layer, every row and position, kv heads x head_dim each
    assert me.kv_cache_bytes(cfg, 3, 50, ms.float32) == 2 * 2 * 3 * 50 * 1 * 8 * 4
    # RoPE tables: what Llama.__init__ keeps (float64 cos/sin + the model dtype's four tables)
    m = Llama(cfg)
    m._constants(np.float32)
    kept = sum(a.nbytes for a in m._rope64) + sum(a.nbytes for a in m._consts[np.float32])
    assert me.rope_table_bytes(cfg) >= kept and me.rope_table_bytes(cfg) < 2 * kept
    t = me.training_bytes(cfg, 2, 64)
    assert t > me.training_bytes(cfg, 1, 64) > me.training_bytes(cfg, 1, 32) > 4 * me.parameter_bytes(cfg)
    assert me.inference_bytes(cfg, 2, 64) < t
    assert math.isclose(me.parameter_bytes(cfg, ms.bfloat16) * 2, me.parameter_bytes(cfg))


# ------------------------------------------------------------------------------------------------
# LlamaConfig field types
@pytest.mark.parametrize("fields, message", [
    (dict(tie_embeddings="false"), "'tie_embeddings' as True or False"),
    (dict(tie_embeddings=1), "'tie_embeddings' as True or False"),
    (dict(norm_eps=float("nan")), "'norm_eps' as a finite number > 0"),
    (dict(rope_theta=float("inf")), "'rope_theta' as a finite number > 0"),
    (dict(init_std="0.02"), "'init_std' as a finite number > 0"),
    (dict(ffn_dim_multiplier=float("inf")), "'ffn_dim_multiplier' as None or a finite number > 0"),
    (dict(ffn_dim_multiplier=0.0), "'ffn_dim_multiplier' as None or a finite number > 0"),
    (dict(dropout=float("nan")), "'dropout' in \\[0, 1\\)"),
    (dict(n_layers=2.0), "'n_layers' as a positive int"),
    (dict(max_seq_len=1e9), "'max_seq_len' as a positive int"),
])
def test_llama_config_refuses_mistyped_fields(fields, message):
    with pytest.raises(OpValueError, match=message):
        LlamaConfig(**fields)


def test_from_dict_refuses_strings_for_booleans():
    d = LlamaConfig().to_dict()
    d["tie_embeddings"] = "false"
    with pytest.raises(OpValueError, match="'tie_embeddings' as True or False"):
        LlamaConfig.from_dict(d)
    d["tie_embeddings"] = False
    assert LlamaConfig.from_dict(d).tie_embeddings is False
