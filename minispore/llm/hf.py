"""Read and write HuggingFace-format LLaMA folders: `config.json` + `model.safetensors`.

    model = LlamaForCausalLM.from_pretrained("tiny-llama/")      # any HF LlamaForCausalLM folder
    model.save_pretrained("out/")                                # transformers can load this back

Parameter names map one to one (HF on the left, minispore on the right):

    model.embed_tokens.weight                          tok_embeddings.embedding_table
    model.layers.N.input_layernorm.weight              layers.N.attention_norm.weight
    model.layers.N.self_attn.{q,k,v,o}_proj.weight     layers.N.attention.w{q,k,v,o}.weight
    model.layers.N.post_attention_layernorm.weight     layers.N.ffn_norm.weight
    model.layers.N.mlp.gate_proj.weight                layers.N.feed_forward.w1.weight
    model.layers.N.mlp.up_proj.weight                  layers.N.feed_forward.w3.weight
    model.layers.N.mlp.down_proj.weight                layers.N.feed_forward.w2.weight
    model.norm.weight                                  norm.weight
    lm_head.weight                                     output.weight   (absent when tied)

Both store linear weights as (out_features, in_features), and both use the *half-split* rotary
convention (rope.py), so no tensor is transposed or permuted. (Meta's original checkpoints use
interleaved pairs; HF's conversion script permutes the q/k rows once, and HF-native checkpoints
— what this reads — are already in the half-split layout.)

Loading is all-or-nothing: every tensor is read into a fresh dict and checked (present, right
shape, floating point) before any parameter is assigned, and an assignment that fails part-way
is undone (train/serialization.assign_all), so a bad file leaves the model untouched and the
error names the tensor.

A downloaded folder is untrusted input, so before anything is built or read:

* files are opened only if they are regular files (common/untrusted_files: a FIFO would block,
  a link to /dev/zero would read forever), JSON is capped in size and nesting depth; each
  refusal is a CheckpointError naming the file;
* config fields must have the JSON types HF's own writer produces - integers, finite numbers,
  true/false (a string "false" is refused: it is truthy) - and errors name the field and file;
* the memory the config implies (weights, RoPE tables) and the memory reading the weight files
  takes are checked against the limit (common/memory_limit, llm/memory_estimate);
* an index's shard names must be files in the folder (no absolute paths, no `..`), each tensor
  must sit in exactly one shard, and in the shard the index names.
"""
from __future__ import annotations

import json
import math
import os

import numpy as np

from ..common import dtype as mstype
from ..common.errors import OpTypeError, OpValueError
from ..common.memory_limit import check_fits
from ..common.untrusted_files import MAX_JSON_BYTES, UntrustedFileError, check_regular_file, inside, read_json
from ..train.safetensors_codec import CheckpointError, decode
from ..train.serialization import assign_all, read_checkpoint_bytes
from .config import LlamaConfig
from .memory_estimate import check_config

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"
INDEX_NAME = "model.safetensors.index.json"
# read caps (module attributes, read at call time): a LLaMA config.json is ~1 KB (4 MiB leaves room
# for configs that carry label maps); an index lists every tensor name (~100 bytes each), so
# 64 MiB covers far more tensors than any real checkpoint has
MAX_CONFIG_BYTES = 4 * 2**20
MAX_INDEX_BYTES = MAX_JSON_BYTES

_LAYER_NAMES = {
    "input_layernorm.weight": "attention_norm.weight",
    "self_attn.q_proj.weight": "attention.wq.weight",
    "self_attn.k_proj.weight": "attention.wk.weight",
    "self_attn.v_proj.weight": "attention.wv.weight",
    "self_attn.o_proj.weight": "attention.wo.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "feed_forward.w1.weight",
    "mlp.up_proj.weight": "feed_forward.w3.weight",
    "mlp.down_proj.weight": "feed_forward.w2.weight",
}
# buffers some older transformers versions saved; recomputed from the config, never needed
_IGNORED_SUFFIXES = ("rotary_emb.inv_freq",)


def hf_to_minispore_names(cfg: LlamaConfig) -> dict:
    """{HF tensor name: minispore parameter name} for a config."""
    names = {"model.embed_tokens.weight": "tok_embeddings.embedding_table", "model.norm.weight": "norm.weight"}
    for i in range(cfg.n_layers):
        for hf, ours in _LAYER_NAMES.items():
            names[f"model.layers.{i}.{hf}"] = f"layers.{i}.{ours}"
    if not cfg.tie_embeddings:
        names["lm_head.weight"] = "output.weight"
    return names


# ------------------------------------------------------------------------------------------------
# config
_REQUIRED = object()


def _field(d, key, path, default=_REQUIRED):
    if key in d:
        return d[key]
    if default is _REQUIRED:
        raise OpValueError("from_pretrained", f"'{key}' in {path}", "no such field")
    return default


def _positive_int(d, key, path, default=_REQUIRED, allow_null=False):
    """An integer field: JSON integers only (HF writes `2048`, never `2048.0` or `"2048"`)."""
    v = _field(d, key, path, default)
    if v is None and allow_null:
        return None
    if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
        raise OpValueError("from_pretrained", f"'{key}' in {path} as a positive integer", repr(v)[:80])
    return v


def _finite_positive(d, key, path, default):
    """A number field: int or float, finite (Python's JSON reader accepts NaN and Infinity, and
    an integer too big for a float), > 0."""
    v = _field(d, key, path, default)
    try:
        f = float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else math.nan
    except OverflowError:
        f = math.inf
    if not 0 < f < math.inf:
        raise OpValueError("from_pretrained", f"'{key}' in {path} as a finite number > 0", repr(v)[:80])
    return f


def _json_bool(d, key, path, default):
    """A boolean field. HF's writer stores JSON true/false; HF's reader would take a string as is,
    and `"false"` is truthy in Python - the config would mean the opposite of what it says. So
    anything but a real boolean is refused, not guessed at."""
    v = _field(d, key, path, default)
    if not isinstance(v, bool):
        raise OpValueError("from_pretrained", f"'{key}' in {path} as JSON true or false "
                           "(a string or number is not read as a boolean)", repr(v)[:80])
    return v


def _token_ids(d, path) -> dict:
    """bos/eos/pad token ids: null, an integer >= 0, or (eos, in newer configs) a list of them."""
    out = {}
    for key in ("bos_token_id", "eos_token_id", "pad_token_id"):
        if key not in d:
            continue
        v = d[key]
        ids = v if isinstance(v, list) else [v]
        if v is not None and not all(isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in ids):
            raise OpValueError("from_pretrained", f"'{key}' in {path} as a token id (an integer >= 0), "
                               "a list of them, or null", repr(v)[:80])
        out[key] = v
    return out


def config_from_hf(d: dict, path="config.json") -> LlamaConfig:
    """A LlamaConfig from HF's config.json fields; anything minispore's LLaMA cannot run, and any
    field of the wrong JSON type, is an error naming the field and the file."""
    op = "from_pretrained"
    if not isinstance(d, dict):
        raise OpValueError(op, f"{path} holding a JSON object", type(d).__name__)
    model_type = d.get("model_type", "llama")
    if model_type != "llama":
        raise OpValueError(op, f"'model_type' 'llama' in {path}", repr(model_type))
    vocab = _positive_int(d, "vocab_size", path)
    hidden = _positive_int(d, "hidden_size", path)
    layers = _positive_int(d, "num_hidden_layers", path)
    heads = _positive_int(d, "num_attention_heads", path)
    ffn = _positive_int(d, "intermediate_size", path)
    kv = _positive_int(d, "num_key_value_heads", path, None, allow_null=True) or heads
    max_pos = _positive_int(d, "max_position_embeddings", path, 2048)
    checks = [("hidden_act", "silu"), ("attention_bias", False), ("mlp_bias", False), ("pretraining_tp", 1)]
    for key, want in checks:
        got = d.get(key, want)
        if got != want or type(got) is not type(want):         # True == 1 and 1.0 == 1: compare types too
            raise OpValueError(op, f"'{key}' = {want!r} in {path} (what minispore's LLaMA implements)", repr(got))
    rope = d.get("rope_parameters") or d.get("rope_scaling") or {}
    if not isinstance(rope, dict):
        raise OpValueError(op, f"'rope_parameters' as an object in {path}", repr(rope)[:80])
    rope_type = rope.get("rope_type", rope.get("type", "default"))
    if rope_type != "default":
        raise OpValueError(op, f"'rope_type' 'default' in {path} (scaled RoPE is not implemented)", repr(rope_type))
    theta = _finite_positive(d, "rope_theta", path, 10000.0)      # checked even where rope_parameters wins
    if "rope_theta" in rope:
        theta = _finite_positive(rope, "rope_theta", path, None)
    if hidden % heads:
        raise OpValueError(op, f"'hidden_size' divisible by 'num_attention_heads' ({heads}) in {path}", repr(hidden))
    head_dim = _positive_int(d, "head_dim", path, None, allow_null=True)
    if head_dim is not None and head_dim * heads != hidden:
        raise OpValueError(op, f"'head_dim' = hidden_size / num_attention_heads = {hidden // heads} in {path}",
                           repr(head_dim))
    if heads % kv:
        raise OpValueError(op, f"'num_key_value_heads' dividing 'num_attention_heads' ({heads}) in {path}", repr(kv))
    if (hidden // heads) % 2:
        raise OpValueError(op, f"an even head dimension hidden_size / num_attention_heads in {path} "
                           "(rotary embeddings rotate pairs)", repr(hidden // heads))
    _token_ids(d, path)
    return LlamaConfig(vocab_size=vocab, dim=hidden, n_layers=layers, n_heads=heads, n_kv_heads=kv, ffn_dim=ffn,
                       max_seq_len=max_pos, norm_eps=_finite_positive(d, "rms_norm_eps", path, 1e-6),
                       rope_theta=theta, tie_embeddings=_json_bool(d, "tie_word_embeddings", path, False),
                       init_std=_finite_positive(d, "initializer_range", path, 0.02))


def config_to_hf(cfg: LlamaConfig, dtype_name="float32", extra=None) -> dict:
    """HF's config.json for a LlamaConfig (`extra`: fields to keep, e.g. bos/eos token ids)."""
    d = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "vocab_size": cfg.vocab_size, "hidden_size": cfg.dim, "intermediate_size": cfg.hidden_dim,
        "num_hidden_layers": cfg.n_layers, "num_attention_heads": cfg.n_heads,
        "num_key_value_heads": cfg.n_kv_heads, "head_dim": cfg.head_dim, "hidden_act": "silu",
        "max_position_embeddings": cfg.max_seq_len, "rms_norm_eps": cfg.norm_eps,
        "rope_theta": cfg.rope_theta, "rope_parameters": {"rope_type": "default", "rope_theta": cfg.rope_theta},
        "tie_word_embeddings": cfg.tie_embeddings, "initializer_range": cfg.init_std,
        "attention_bias": False, "mlp_bias": False, "attention_dropout": 0.0,
        "torch_dtype": dtype_name, "dtype": dtype_name,
    }
    for k, v in (extra or {}).items():
        d.setdefault(k, v)
    return d


# ------------------------------------------------------------------------------------------------
# reading files: regular files only, sizes known before reading (common/untrusted_files). Every
# refusal is a CheckpointError naming the file - one error class for a broken folder, as for a
# broken checkpoint (train/serialization) - with untrusted_files' refusal as its __cause__.
def _refused(op, path, e: UntrustedFileError) -> CheckpointError:
    if e.got == "nothing at that path":
        return CheckpointError(op, path, "does not exist")
    return CheckpointError(op, path, f"was refused: expected {e.expected}, but got {e.got}")


def _read_json(path, op, what, max_bytes):
    try:
        return read_json(path, what, max_bytes=max_bytes)
    except UntrustedFileError as e:
        raise _refused(op, path, e) from e


def _file_size(path, op) -> int:
    try:
        return check_regular_file(path, "a safetensors weight file").st_size
    except UntrustedFileError as e:
        raise _refused(op, path, e) from e


def _read_safetensors(path, op) -> dict:
    """The tensors of one safetensors file, read by the checkpoint reader (regular file, its
    memory checked, read once) and parsed by the codec (every header number checked)."""
    tensors, _ = decode(read_checkpoint_bytes(op, path, "safetensors weight file"), path, op=op)
    return tensors


def _shard_path(folder, shard, index, op) -> str:
    """Where the index's shard name points, refused unless it names a file in the folder.

    The *name* must stay inside: no absolute path, no `..`, no symlinked subfolder leading out.
    The file itself may be a symlink: the HF hub cache stores snapshots/<rev>/<shard> as links
    to ../../blobs/<hash>; the regular-file check still applies to whatever it points to."""
    parts = shard.replace("\\", "/").split("/")
    path = os.path.join(folder, shard)
    if os.path.isabs(shard) or ".." in parts or not inside(os.path.dirname(path), folder):
        raise CheckpointError(op, index, f"names the shard {shard!r}, which is outside the model folder "
                              f"'{folder}' (shards must be files in the folder)")
    return path


def _weight_files(folder, op):
    """([(file name as the index spells it, path)], the index as a dict or None, the file errors name)."""
    single, index_path = os.path.join(folder, WEIGHTS_NAME), os.path.join(folder, INDEX_NAME)
    if os.path.lexists(single):
        return [(WEIGHTS_NAME, single)], None, single
    if not os.path.lexists(index_path):
        raise CheckpointError(op, single, f"does not exist (nor does {INDEX_NAME}): '{folder}' is not a "
                              "HuggingFace model folder")
    index = _read_json(index_path, op, "a HuggingFace weight index", MAX_INDEX_BYTES)
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict):
        raise CheckpointError(op, index_path, "has no 'weight_map' object")
    for name, shard in weight_map.items():
        if not isinstance(shard, str) or not shard:
            raise CheckpointError(op, index_path, f"maps '{name}' to {shard!r}, not a shard file name")
    shards = sorted(set(weight_map.values()))
    return [(s, _shard_path(folder, s, index_path, op)) for s in shards], weight_map, index_path


def _check_shards(per_shard, weight_map, index_path, op):
    """Each tensor in exactly one shard, and in the shard the index names for it."""
    origin = {}
    for shard, names in per_shard:
        for name in names:
            if name in origin:
                raise CheckpointError(op, index_path, f"lists shards that both store '{name}': both "
                                      f"'{origin[name]}' and '{shard}' (which copy is meant is ambiguous)")
            origin[name] = shard
    for name, shard in weight_map.items():
        if origin.get(name) != shard:
            where = f"'{origin[name]}' stores it" if name in origin else "which does not store it"
            raise CheckpointError(op, index_path, f"maps '{name}' to '{shard}', but {where}")
    unlisted = sorted(n for n in origin if n not in weight_map)
    if unlisted:
        raise CheckpointError(op, index_path, f"does not list {unlisted[:6]}, which '{origin[unlisted[0]]}' stores")


def read_hf_tensors(folder, op="from_pretrained", also_needs=0) -> tuple[dict, str]:
    """{HF name: ndarray} from model.safetensors, or from the shards a model.safetensors.index.json
    lists; also returns the file the names came from (for error messages).

    Before any weight is read: every file is stat'ed (regular files only) and the memory reading
    them takes - each file's bytes, the decoded copy of the biggest, plus `also_needs` (the
    caller's staged copies) - is checked against the limit (common/memory_limit)."""
    files, weight_map, source = _weight_files(folder, op)
    sizes = [_file_size(path, op) for _, path in files]
    # the decoded tensors of every file, plus the biggest file's bytes while it is decoded
    check_fits(sum(sizes) + max(sizes) + also_needs, f"reading the weights in '{folder}'",
               "The checkpoint is bigger than this machine can hold; use a smaller model.")
    tensors, per_shard = {}, []
    for name, path in files:
        part = _read_safetensors(path, op)
        per_shard.append((name, list(part)))
        tensors.update(part)
    if weight_map is not None:
        _check_shards(per_shard, weight_map, source, op)
    return tensors, source


def load_hf_weights(model, folder, op="from_pretrained"):
    """Assign the HF tensors in `folder` to `model`'s parameters — all of them, or none."""
    names = hf_to_minispore_names(model.config)
    params = dict(model.parameters_and_names())
    staged_bytes = sum(params[ours].asnumpy().nbytes for ours in names.values())
    tensors, source = read_hf_tensors(folder, op, also_needs=staged_bytes)
    staged = {}
    for hf_name, ours in names.items():
        p = params[ours]
        if hf_name not in tensors:
            raise CheckpointError(op, source, f"has no tensor '{hf_name}' (needed for minispore's '{ours}', "
                                  f"shape {tuple(p.shape)})")
        arr = tensors[hf_name]
        if tuple(arr.shape) != tuple(p.shape):
            raise CheckpointError(op, source, f"stores '{hf_name}' with shape {tuple(arr.shape)}, but the "
                                  f"config needs {tuple(p.shape)}")
        if arr.dtype.kind != "f" and arr.dtype.name != "bfloat16":
            raise CheckpointError(op, source, f"stores '{hf_name}' as {arr.dtype}, not floating point")
        staged[ours] = np.ascontiguousarray(arr, dtype=p.asnumpy().dtype)
    extra = sorted(n for n in tensors if n not in names and not n.endswith(_IGNORED_SUFFIXES)
                   and not (n == "lm_head.weight" and model.config.tie_embeddings))
    if extra:
        raise CheckpointError(op, source, f"has tensors minispore's LLaMA does not use: {extra[:6]}"
                              + (f" (+{len(extra) - 6} more)" if len(extra) > 6 else ""))
    assign_all(params, staged, op)       # everything checked: now assign (undone if it fails part-way)


def from_pretrained(cls, folder, dtype=None, attention="auto"):
    """A model built from `folder`'s config.json with its weights (see the module docstring)."""
    op = "from_pretrained"
    if not isinstance(folder, (str, os.PathLike)):
        raise OpTypeError(op, "a folder path", type(folder).__name__)
    folder = os.fspath(folder)
    cfg_path = os.path.join(folder, CONFIG_NAME)
    hf_cfg = _read_json(cfg_path, op, "a HuggingFace config", MAX_CONFIG_BYTES)
    cfg = config_from_hf(hf_cfg, cfg_path)
    # the model is built in float32 and then converted: budget the wider of the two
    wide = mstype.float32 if dtype is None or mstype.as_dtype(dtype).itemsize <= 4 else dtype
    check_config(cfg, f"The model of '{cfg_path}' ({cfg.num_params():,} parameters)", dtype=wide,
                 hint="Its size comes from num_hidden_layers, hidden_size, intermediate_size, vocab_size "
                      "and max_position_embeddings.")
    model = cls(cfg, attention=attention)
    if dtype is not None:
        for p in model.get_parameters():
            p.set_dtype(dtype)
    load_hf_weights(model, folder, op)
    model.hf_config = _token_ids(hf_cfg, cfg_path)
    model.set_train(False)
    return model


def save_pretrained(model, folder):
    """Write `model` as a HuggingFace folder: config.json + model.safetensors (HF tensor names)."""
    import safetensors.numpy
    from ..train.atomic_io import atomic_write_bytes
    op = "save_pretrained"
    if not isinstance(folder, (str, os.PathLike)):
        raise OpTypeError(op, "a folder path", type(folder).__name__)
    folder = os.fspath(folder)
    os.makedirs(folder, exist_ok=True)
    params = dict(model.parameters_and_names())
    tensors = {hf: np.ascontiguousarray(params[ours].asnumpy())
               for hf, ours in hf_to_minispore_names(model.config).items()}
    dtype_name = next(iter(tensors.values())).dtype.name
    cfg = config_to_hf(model.config, dtype_name, getattr(model, "hf_config", None))
    atomic_write_bytes(os.path.join(folder, WEIGHTS_NAME),
                       safetensors.numpy.save(tensors, metadata={"format": "pt"}), mode=None)
    atomic_write_bytes(os.path.join(folder, CONFIG_NAME),
                       (json.dumps(cfg, indent=2, sort_keys=True) + "\n").encode("utf-8"), mode=None)


__all__ = ["from_pretrained", "save_pretrained", "load_hf_weights", "config_from_hf", "config_to_hf",
           "hf_to_minispore_names", "read_hf_tensors"]
