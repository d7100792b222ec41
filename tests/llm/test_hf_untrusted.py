"""A HuggingFace folder is untrusted input (hf.py): shard paths stay inside the folder, a tensor
lives in one shard, config fields have the JSON types HF writes, nothing but regular files is
opened, JSON is capped in size and depth, and a load that fails part-way changes no parameter.

Every hostile case here once hung, read without bound, or was silently accepted; each broken file
is now a CheckpointError naming it (untrusted_files' refusal is its __cause__). The FIFO cases
run the load in a thread with a deadline (and unblock it on failure) so a regression fails the
test instead of hanging the suite; the /dev/zero cases run under an address-space cap so a
regression fails with MemoryError instead of exhausting the machine."""
import json
import os
import shutil

import numpy as np
import pytest
import safetensors.numpy

import minispore as ms
from minispore.common.errors import OpValueError
from minispore.common.tensor import Parameter
from minispore.common.untrusted_files import UntrustedFileError
from minispore.llm import Llama, LlamaForCausalLM
from minispore.llm import hf
from minispore.train.serialization import CheckpointError
from hostile_io import address_space_headroom, run_with_deadline

FIXTURE = os.path.join(os.path.dirname(__file__), "..", "fixtures", "hf_llama")
EXPECTED = np.load(os.path.join(FIXTURE, "expected.npz"))


def fixture_tensors():
    return safetensors.numpy.load_file(os.path.join(FIXTURE, "model.safetensors"))


def copy_fixture(folder):
    """config.json + model.safetensors of the HF fixture in `folder`."""
    os.makedirs(folder, exist_ok=True)
    for name in ("config.json", "model.safetensors"):
        shutil.copy(os.path.join(FIXTURE, name), folder)
    return folder


def write_config(folder, **changes):
    with open(os.path.join(FIXTURE, "config.json")) as f:
        cfg = json.load(f)
    cfg.update(changes)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(cfg, f)                 # allow_nan: NaN / Infinity are written as JSON extensions


def sharded_folder(folder, shards, weight_map):
    """A folder with config.json, the index `weight_map`, and `shards` {file name: {tensor: array}}
    written where their names point (relative to the folder, or absolute)."""
    os.makedirs(folder, exist_ok=True)
    shutil.copy(os.path.join(FIXTURE, "config.json"), folder)
    for name, tensors in shards.items():
        path = name if os.path.isabs(name) else os.path.join(folder, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        safetensors.numpy.save_file(tensors, path)
    with open(os.path.join(folder, hf.INDEX_NAME), "w") as f:
        json.dump({"metadata": {}, "weight_map": weight_map}, f)
    return folder


# ------------------------------------------------------------------------------------------------
# the shard index
@pytest.mark.parametrize("where", ["parent", "absolute", "through a subfolder"])
def test_index_shard_paths_outside_the_folder_are_refused(tmp_path, where):
    folder = str(tmp_path / "model")
    outside = str(tmp_path / "outside.safetensors")
    shard = {"parent": "../outside.safetensors", "absolute": outside,
             "through a subfolder": "sub/../../outside.safetensors"}[where]
    t = fixture_tensors()
    sharded_folder(folder, {outside: t}, {k: shard for k in t})
    os.makedirs(os.path.join(folder, "sub"), exist_ok=True)
    with pytest.raises(CheckpointError, match=r"outside the model folder") as e:
        LlamaForCausalLM.from_pretrained(folder)
    assert hf.INDEX_NAME in str(e.value) and repr(shard) in str(e.value)


def test_a_shard_in_a_symlinked_subfolder_that_leaves_the_folder_is_refused(tmp_path):
    folder = str(tmp_path / "model")
    t = fixture_tensors()
    sharded_folder(folder, {str(tmp_path / "elsewhere" / "a.safetensors"): t},
                   {k: "sub/a.safetensors" for k in t})
    os.symlink(str(tmp_path / "elsewhere"), os.path.join(folder, "sub"))
    with pytest.raises(CheckpointError, match="outside the model folder"):
        LlamaForCausalLM.from_pretrained(folder)


def test_shard_files_symlinked_to_blobs_load_as_in_the_hf_cache(tmp_path):
    """The HF hub cache keeps snapshots/<rev>/<file> as symlinks to ../../blobs/<hash>: a symlinked
    *file* named inside the folder is fine (only its name is checked against the folder)."""
    t = fixture_tensors()
    names = sorted(t)
    blobs, folder = tmp_path / "blobs", tmp_path / "snapshots" / "rev"
    blobs.mkdir()
    folder.mkdir(parents=True)
    halves = {"model-00001-of-00002.safetensors": names[:10], "model-00002-of-00002.safetensors": names[10:]}
    for i, (shard, keys) in enumerate(halves.items()):
        safetensors.numpy.save_file({k: t[k] for k in keys}, str(blobs / f"hash{i}"))
        os.symlink(os.path.join("..", "..", "blobs", f"hash{i}"), str(folder / shard))
    os.symlink(os.path.abspath(os.path.join(FIXTURE, "config.json")), str(folder / "config.json"))
    (folder / hf.INDEX_NAME).write_text(json.dumps({"weight_map": {k: s for s, ks in halves.items() for k in ks}}))
    m = LlamaForCausalLM.from_pretrained(str(folder))
    np.testing.assert_allclose(m(ms.Tensor(EXPECTED["input_ids"])).asnumpy(), EXPECTED["logits_f32"], atol=1e-4)


def test_a_tensor_in_two_shards_is_refused(tmp_path):
    t = fixture_tensors()
    dup = "model.layers.0.mlp.up_proj.weight"
    other = {dup: np.zeros_like(t[dup])}                 # the later shard would silently win
    weight_map = {k: "a.safetensors" for k in t}
    weight_map[dup] = "b.safetensors"
    folder = sharded_folder(str(tmp_path), {"a.safetensors": t, "b.safetensors": other}, weight_map)
    with pytest.raises(CheckpointError, match=rf"'{dup}'.*both 'a.safetensors' and 'b.safetensors'"):
        LlamaForCausalLM.from_pretrained(folder)


def test_index_entries_must_match_their_shards(tmp_path):
    t = fixture_tensors()
    names = sorted(t)
    shards = {"a.safetensors": {k: t[k] for k in names[:10]}, "b.safetensors": {k: t[k] for k in names[10:]}}
    weight_map = {k: "a.safetensors" for k in names}                 # b's tensors mapped to a
    folder = sharded_folder(str(tmp_path), shards, weight_map)
    with pytest.raises(CheckpointError, match=rf"maps '{names[10]}' to 'a.safetensors'"):
        LlamaForCausalLM.from_pretrained(folder)


@pytest.mark.parametrize("weight_map, message", [
    ([["model.norm.weight", "a.safetensors"]], "'weight_map' object"),
    ({"model.norm.weight": 3}, "shard file name"),
    ({"model.norm.weight": ""}, "shard file name"),
])
def test_malformed_weight_maps_are_refused(tmp_path, weight_map, message):
    shutil.copy(os.path.join(FIXTURE, "config.json"), tmp_path)
    (tmp_path / hf.INDEX_NAME).write_text(json.dumps({"weight_map": weight_map}))
    with pytest.raises(CheckpointError, match=message):
        LlamaForCausalLM.from_pretrained(tmp_path)


# ------------------------------------------------------------------------------------------------
# config field types: what HF's own writer produces (JSON true/false, integers, finite numbers)
@pytest.mark.parametrize("field, value, expected", [
    ("tie_word_embeddings", "false", "JSON true or false"),
    ("tie_word_embeddings", 0, "JSON true or false"),
    ("vocab_size", "256", "a positive integer"),
    ("hidden_size", 64.0, "a positive integer"),
    ("num_hidden_layers", True, "a positive integer"),
    ("num_key_value_heads", 0, "a positive integer"),
    ("max_position_embeddings", 1e9, "a positive integer"),
    ("rms_norm_eps", float("nan"), "a finite number > 0"),
    ("rope_theta", float("inf"), "a finite number > 0"),
    ("initializer_range", "0.02", "a finite number > 0"),
    ("eos_token_id", "2", "a token id"),
    ("bos_token_id", [1, -3], "a token id"),
    ("attention_bias", "false", "'attention_bias' = False"),
])
def test_config_fields_of_the_wrong_type_are_refused_naming_field_and_file(tmp_path, field, value, expected):
    folder = copy_fixture(str(tmp_path))
    write_config(folder, **{field: value})
    with pytest.raises(OpValueError, match=expected) as e:
        LlamaForCausalLM.from_pretrained(folder)
    assert f"'{field}'" in str(e.value) and os.path.join(folder, "config.json") in str(e.value)


def test_tie_word_embeddings_json_booleans_still_work(tmp_path):
    folder = copy_fixture(str(tmp_path))
    write_config(folder, tie_word_embeddings=False)
    assert not LlamaForCausalLM.from_pretrained(folder).config.tie_embeddings
    t = fixture_tensors()
    del t["lm_head.weight"]
    safetensors.numpy.save_file(t, os.path.join(folder, "model.safetensors"))
    write_config(folder, tie_word_embeddings=True)
    assert LlamaForCausalLM.from_pretrained(folder).config.tie_embeddings


# ------------------------------------------------------------------------------------------------
# all or nothing
def test_a_load_that_fails_while_assigning_leaves_every_parameter_unchanged(monkeypatch):
    ms.set_seed(3)
    m = Llama(LlamaForCausalLM.from_pretrained(FIXTURE).config)
    before = {n: p.asnumpy().copy() for n, p in m.parameters_and_names()}
    real_set_data, calls = Parameter.set_data, []

    def failing_third_assignment(self, data, slice_shape=False):
        calls.append(self.name)
        if len(calls) == 3:                        # e.g. out of memory copying the third tensor
            raise MemoryError("injected")
        return real_set_data(self, data, slice_shape)

    monkeypatch.setattr(Parameter, "set_data", failing_third_assignment)
    with pytest.raises(MemoryError, match="injected"):
        hf.load_hf_weights(m, FIXTURE)
    monkeypatch.undo()
    assert len(calls) >= 3                         # it did fail part-way through the assignment
    for n, p in m.parameters_and_names():
        np.testing.assert_array_equal(p.asnumpy(), before[n], err_msg=n)
    hf.load_hf_weights(m, FIXTURE)                 # and the model still loads afterwards
    np.testing.assert_allclose(m(ms.Tensor(EXPECTED["input_ids"])).asnumpy(), EXPECTED["logits_f32"], atol=1e-4)


# ------------------------------------------------------------------------------------------------
# only regular files are opened
@pytest.mark.parametrize("name", ["config.json", "model.safetensors", "shard"])
def test_a_fifo_is_refused_without_blocking(tmp_path, name):
    if name == "shard":
        t = fixture_tensors()
        folder = sharded_folder(str(tmp_path), {"a.safetensors": t}, {k: "a.safetensors" for k in t})
        path = os.path.join(folder, "a.safetensors")
    else:
        folder = copy_fixture(str(tmp_path))
        path = os.path.join(folder, name)
    os.remove(path)
    os.mkfifo(path)
    result = run_with_deadline(lambda: LlamaForCausalLM.from_pretrained(folder), "from_pretrained with a FIFO", [path],
                               seconds=30.0)
    err = result.get("error")
    assert isinstance(err, CheckpointError), repr(err)
    assert "FIFO" in str(err) and path in str(err)
    if name == "config.json":                      # the refusal of untrusted_files, kept as the cause
        assert isinstance(err.__cause__, UntrustedFileError)


@pytest.mark.parametrize("name", ["config.json", "model.safetensors"])
def test_a_symlink_to_dev_zero_is_refused_before_reading(tmp_path, name):
    folder = copy_fixture(str(tmp_path))
    path = os.path.join(folder, name)
    os.remove(path)
    os.symlink("/dev/zero", path)
    with address_space_headroom(), pytest.raises(CheckpointError, match="character device") as e:
        LlamaForCausalLM.from_pretrained(folder)
    assert "/dev/zero" in str(e.value)


def test_a_directory_where_the_weights_should_be_is_refused(tmp_path):
    folder = copy_fixture(str(tmp_path))
    os.remove(os.path.join(folder, "model.safetensors"))
    os.mkdir(os.path.join(folder, "model.safetensors"))
    with pytest.raises(CheckpointError, match="directory"):
        LlamaForCausalLM.from_pretrained(folder)


# ------------------------------------------------------------------------------------------------
# JSON caps
def test_a_config_nested_too_deep_is_refused(tmp_path):
    folder = copy_fixture(str(tmp_path))
    with open(os.path.join(FIXTURE, "config.json")) as f:
        text = f.read().rstrip().rstrip("}")
    for depth in (100, 100_000):                   # parseable but too deep / deep enough to overflow
        with open(os.path.join(folder, "config.json"), "w") as f:
            f.write(text + ', "x": ' + "[" * depth + "]" * depth + "}")
        with pytest.raises(CheckpointError, match="nested at most"):
            LlamaForCausalLM.from_pretrained(folder)


def test_a_config_too_large_is_refused_before_parsing(tmp_path):
    folder = copy_fixture(str(tmp_path))
    write_config(folder, padding="x" * (hf.MAX_CONFIG_BYTES + 1))          # valid JSON, just too big
    with pytest.raises(CheckpointError, match=f"at most {hf.MAX_CONFIG_BYTES:,} bytes"):
        LlamaForCausalLM.from_pretrained(folder)


def test_an_index_too_large_is_refused(tmp_path, monkeypatch):
    t = fixture_tensors()
    folder = sharded_folder(str(tmp_path), {"a.safetensors": t}, {k: "a.safetensors" for k in t})
    size = os.path.getsize(os.path.join(folder, hf.INDEX_NAME))
    monkeypatch.setattr(hf, "MAX_INDEX_BYTES", size - 1)       # the cap is read at call time
    with pytest.raises(CheckpointError, match=f"at most {size - 1:,} bytes"):
        LlamaForCausalLM.from_pretrained(folder)
    monkeypatch.setattr(hf, "MAX_INDEX_BYTES", size)
    LlamaForCausalLM.from_pretrained(folder)
