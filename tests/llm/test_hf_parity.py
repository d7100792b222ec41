"""HuggingFace parity: a transformers.LlamaForCausalLM folder (GQA, written by HF's own
save_pretrained; see make_hf_fixtures.py) loads into minispore's model and gives HF's logits, its
incremental decode equals the full forward, and greedy tokens equal HF's `generate`. Plus the
HF-format writer, and the errors for broken folders (nothing is half-loaded)."""
import json
import os
import shutil

import numpy as np
import pytest
import safetensors.numpy

import minispore as ms
from minispore.common.errors import OpValueError
from minispore.llm import Llama, LlamaConfig, LlamaForCausalLM
from minispore.train.serialization import CheckpointError

FIXTURE = os.path.join(os.path.dirname(__file__), "..", "fixtures", "hf_llama")
EXPECTED = np.load(os.path.join(FIXTURE, "expected.npz"))


@pytest.fixture(scope="module")
def model():
    return LlamaForCausalLM.from_pretrained(FIXTURE)


def test_the_config_maps_to_minispore_fields(model):
    c = model.config
    assert (c.vocab_size, c.dim, c.n_layers, c.n_heads, c.n_kv_heads, c.hidden_dim, c.max_seq_len) == \
        (256, 64, 2, 4, 2, 176, 128)
    assert (c.norm_eps, c.rope_theta, c.tie_embeddings) == (1e-6, 10000.0, False)
    assert model.hf_config["eos_token_id"] == 2 and not model.training
    assert LlamaForCausalLM is Llama                     # one class: it trains too


def test_full_sequence_logits_match_transformers(model):
    logits = model(ms.Tensor(EXPECTED["input_ids"]))
    assert logits.shape == (2, 20, 256) and logits.dtype == ms.float32
    ref = EXPECTED["logits_f32"]
    np.testing.assert_allclose(logits.asnumpy(), ref, rtol=0, atol=1e-4)
    assert np.abs(ref).max() > 1.0                       # peaked logits: the comparison is not vacuous


def incremental_logits(model, ids, kind):
    """Prefill 5 tokens, then one token at a time, through a contiguous or a paged cache."""
    if kind == "contiguous":
        cache = model.new_cache()
        run = lambda x: model(ms.Tensor(x), cache).asnumpy()                    # noqa: E731
    else:
        paged = model.new_paged_cache(num_blocks=16, block_size=3)
        paged.add_sequence(0, ids[0, :5])
        paged.add_sequence(1, ids[1, :5])
        run = lambda x: model(ms.Tensor(x), paged.batch([0, 1])).asnumpy()      # noqa: E731
    return np.concatenate([run(ids[:, :5])] + [run(ids[:, t:t + 1]) for t in range(5, 20)], axis=1)


@pytest.mark.parametrize("kind", ["contiguous", "paged"])
def test_incremental_decode_equals_the_full_forward_at_every_position(model, kind):
    ids = EXPECTED["input_ids"]
    # float32: HF's logits at every position (float32 rounding of logits up to ~10 is ~1e-5)
    np.testing.assert_allclose(incremental_logits(model, ids, kind), EXPECTED["logits_f32"], rtol=0, atol=1e-4)
    # float64: the same computation as the full forward, to rounding
    m64 = LlamaForCausalLM.from_pretrained(FIXTURE, dtype=ms.float64)
    np.testing.assert_allclose(incremental_logits(m64, ids, kind), m64(ms.Tensor(ids)).asnumpy(),
                               rtol=0, atol=1e-12)


def test_greedy_32_tokens_equal_transformers_generate(model):
    assert EXPECTED["min_margin"] > 1e-3                 # far above float32 noise: a fair test
    prompt = EXPECTED["prompt"]
    out = model.generate(ms.Tensor(prompt), max_new_tokens=32)
    assert isinstance(out, ms.Tensor) and out.shape == (1, 40)
    np.testing.assert_array_equal(out.asnumpy()[0, :8], prompt[0])
    np.testing.assert_array_equal(out.asnumpy()[0, 8:], EXPECTED["greedy_ids"])
    paged = model.generate(prompt[0].tolist(), max_new_tokens=32, kv_cache="paged", block_size=4)
    assert paged == prompt[0].tolist() + EXPECTED["greedy_ids"].tolist()


@pytest.mark.parametrize("kv_cache", ["contiguous", "paged"])
def test_ragged_batch_greedy_equals_transformers_left_padded_generate(model, kv_cache):
    out = model.generate(EXPECTED["ragged_ids"], 16, attention_mask=EXPECTED["ragged_mask"], kv_cache=kv_cache)
    np.testing.assert_array_equal(out[:, :11], EXPECTED["ragged_ids"])
    np.testing.assert_array_equal(out[:, 11:], EXPECTED["ragged_out"])


def test_save_pretrained_round_trips(model, tmp_path):
    model.save_pretrained(tmp_path)
    again = LlamaForCausalLM.from_pretrained(tmp_path)
    for (n, p), (n2, q) in zip(model.parameters_and_names(), again.parameters_and_names()):
        assert n == n2
        np.testing.assert_array_equal(p.asnumpy(), q.asnumpy())
    cfg = json.loads((tmp_path / "config.json").read_text())
    assert cfg["model_type"] == "llama" and cfg["num_key_value_heads"] == 2 and cfg["eos_token_id"] == 2
    # HF's tensor names, nothing else
    names = set(safetensors.numpy.load_file(str(tmp_path / "model.safetensors")))
    assert names == set(safetensors.numpy.load_file(os.path.join(FIXTURE, "model.safetensors")))


def test_a_tied_minispore_model_round_trips_without_lm_head(tmp_path):
    ms.set_seed(0)
    m = Llama(LlamaConfig(vocab_size=20, dim=16, n_layers=1, n_heads=2, max_seq_len=8, multiple_of=8))
    m.save_pretrained(tmp_path)
    assert "lm_head.weight" not in safetensors.numpy.load_file(str(tmp_path / "model.safetensors"))
    again = Llama.from_pretrained(tmp_path)
    x = ms.Tensor(np.arange(8)[None] % 20)
    np.testing.assert_array_equal(again(x).asnumpy(), m(x).asnumpy())
    assert again.config.tie_embeddings and again.config.hidden_dim == m.config.hidden_dim


# ------------------------------------------------------------------------------------------------
# broken folders: the error names the tensor or field, and nothing is assigned
def broken_copy(tmp_path, edit_tensors=None, edit_config=None):
    folder = tmp_path / "broken"
    shutil.copytree(FIXTURE, folder)
    if edit_tensors:
        t = safetensors.numpy.load_file(str(folder / "model.safetensors"))
        edit_tensors(t)
        safetensors.numpy.save_file(t, str(folder / "model.safetensors"))
    if edit_config:
        c = json.loads((folder / "config.json").read_text())
        edit_config(c)
        (folder / "config.json").write_text(json.dumps(c))
    return folder


@pytest.mark.parametrize("edit, message", [
    (lambda t: t.pop("model.layers.1.mlp.up_proj.weight"), "has no tensor 'model.layers.1.mlp.up_proj.weight'"),
    (lambda t: t.update({"model.layers.0.self_attn.k_proj.weight": np.zeros((64, 64), np.float32)}),
     r"'model.layers.0.self_attn.k_proj.weight' with shape \(64, 64\), but the config needs \(32, 64\)"),
    (lambda t: t.update({"model.layers.0.self_attn.q_proj.bias": np.zeros(64, np.float32)}),
     "does not use: \\['model.layers.0.self_attn.q_proj.bias'\\]"),
    (lambda t: t.update({"model.norm.weight": np.ones(64, np.int32)}), "'model.norm.weight' as int32"),
])
def test_missing_misshapen_or_unknown_tensors_name_the_tensor_and_load_nothing(tmp_path, edit, message):
    from minispore.llm.hf import load_hf_weights
    folder = broken_copy(tmp_path, edit_tensors=edit)
    with pytest.raises(CheckpointError, match=message):
        LlamaForCausalLM.from_pretrained(folder)
    # loading into an existing model: it keeps every weight it had
    ms.set_seed(1)
    m = Llama(LlamaForCausalLM.from_pretrained(FIXTURE).config)
    before = [p.asnumpy().copy() for p in m.get_parameters()]
    with pytest.raises(CheckpointError, match=message):
        load_hf_weights(m, folder)
    for p, b in zip(m.get_parameters(), before):
        np.testing.assert_array_equal(p.asnumpy(), b)


@pytest.mark.parametrize("edit, message", [
    (lambda c: c.update(hidden_act="gelu"), "'hidden_act' = 'silu'"),
    (lambda c: c.update(attention_bias=True), "'attention_bias' = False"),
    (lambda c: c.update(rope_parameters={"rope_type": "llama3", "rope_theta": 5e5}), "'rope_type' 'default'"),
    (lambda c: c.update(head_dim=32), "'head_dim' = hidden_size / num_attention_heads"),
    (lambda c: c.pop("vocab_size"), "'vocab_size' in"),
    (lambda c: c.update(model_type="gpt2"), "'model_type' 'llama'"),
])
def test_unsupported_configs_name_the_field(tmp_path, edit, message):
    with pytest.raises(OpValueError, match=message):
        LlamaForCausalLM.from_pretrained(broken_copy(tmp_path, edit_config=edit))


def test_not_a_model_folder(tmp_path):
    with pytest.raises(CheckpointError, match="config.json' does not exist"):
        LlamaForCausalLM.from_pretrained(tmp_path)
    shutil.copy(os.path.join(FIXTURE, "config.json"), tmp_path)
    with pytest.raises(CheckpointError, match="not a HuggingFace model folder"):
        LlamaForCausalLM.from_pretrained(tmp_path)
    (tmp_path / "model.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json")
    with pytest.raises(CheckpointError, match="model.safetensors"):
        LlamaForCausalLM.from_pretrained(tmp_path)


def test_sharded_folders_load_through_the_index(tmp_path):
    t = safetensors.numpy.load_file(os.path.join(FIXTURE, "model.safetensors"))
    names = sorted(t)
    shards = {"a.safetensors": names[: len(names) // 2], "b.safetensors": names[len(names) // 2:]}
    for shard, keys in shards.items():
        safetensors.numpy.save_file({k: t[k] for k in keys}, str(tmp_path / shard))
    (tmp_path / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {k: s for s, keys in shards.items() for k in keys}}))
    shutil.copy(os.path.join(FIXTURE, "config.json"), tmp_path)
    m = LlamaForCausalLM.from_pretrained(tmp_path)
    np.testing.assert_allclose(m(ms.Tensor(EXPECTED["input_ids"])).asnumpy(), EXPECTED["logits_f32"], atol=1e-4)


def test_live_transformers_reads_what_minispore_writes(tmp_path):
    """With transformers installed (the fixture script's environment), HF loads our folder and
    computes our logits."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    ms.set_seed(4)
    m = Llama(LlamaConfig(vocab_size=40, dim=32, n_layers=2, n_heads=4, n_kv_heads=1, max_seq_len=16, ffn_dim=48,
                          tie_embeddings=False, init_std=0.3))
    m.save_pretrained(tmp_path)
    hf = transformers.LlamaForCausalLM.from_pretrained(str(tmp_path), attn_implementation="eager").eval()
    x = np.random.default_rng(0).integers(0, 40, (2, 16))
    with torch.no_grad():
        ref = hf(torch.tensor(x)).logits.numpy()
    np.testing.assert_allclose(m(ms.Tensor(x)).asnumpy(), ref, rtol=0, atol=1e-4)


def test_bfloat16_checkpoints_load_as_float32(tmp_path):
    import ml_dtypes
    t = safetensors.numpy.load_file(os.path.join(FIXTURE, "model.safetensors"))
    bf16 = {k: v.astype(ml_dtypes.bfloat16) for k, v in t.items()}
    safetensors.numpy.save_file(bf16, str(tmp_path / "model.safetensors"))
    shutil.copy(os.path.join(FIXTURE, "config.json"), tmp_path)
    m = LlamaForCausalLM.from_pretrained(tmp_path)
    w = dict(m.parameters_and_names())["layers.1.attention.wk.weight"]
    assert w.dtype == ms.float32
    np.testing.assert_array_equal(w.asnumpy(), bf16["model.layers.1.self_attn.k_proj.weight"].astype(np.float32))
