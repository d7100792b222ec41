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
shape, floating point) before any parameter is assigned, so a bad file leaves the model untouched
and the error names the tensor.
"""
from __future__ import annotations

import json
import os

import numpy as np

from ..common.errors import OpTypeError, OpValueError
from ..common.tensor import Tensor
from .config import LlamaConfig

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"
INDEX_NAME = "model.safetensors.index.json"

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
def config_from_hf(d: dict, path="config.json") -> LlamaConfig:
    """A LlamaConfig from HF's config.json fields; anything minispore's LLaMA cannot run is an
    error naming the field."""
    op = "from_pretrained"
    if not isinstance(d, dict):
        raise OpValueError(op, f"{path} holding a JSON object", type(d).__name__)
    model_type = d.get("model_type", "llama")
    if model_type != "llama":
        raise OpValueError(op, f"'model_type' 'llama' in {path}", repr(model_type))
    for key in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size"):
        if key not in d:
            raise OpValueError(op, f"'{key}' in {path}", "no such field")
    checks = [("hidden_act", "silu"), ("attention_bias", False), ("mlp_bias", False), ("pretraining_tp", 1)]
    for key, want in checks:
        if d.get(key, want) != want:
            raise OpValueError(op, f"'{key}' = {want!r} in {path} (what minispore's LLaMA implements)",
                               repr(d[key]))
    rope = d.get("rope_parameters") or d.get("rope_scaling") or {}
    if not isinstance(rope, dict):
        raise OpValueError(op, f"'rope_parameters' as an object in {path}", repr(rope))
    rope_type = rope.get("rope_type", rope.get("type", "default"))
    if rope_type != "default":
        raise OpValueError(op, f"'rope_type' 'default' in {path} (scaled RoPE is not implemented)", repr(rope_type))
    theta = rope.get("rope_theta", d.get("rope_theta", 10000.0))
    heads = d["num_attention_heads"]
    kv = d.get("num_key_value_heads") or heads
    head_dim = d.get("head_dim")
    if head_dim is not None and head_dim * heads != d["hidden_size"]:
        raise OpValueError(op, f"'head_dim' = hidden_size / num_attention_heads = "
                           f"{d['hidden_size'] // heads} in {path}", repr(head_dim))
    return LlamaConfig(vocab_size=d["vocab_size"], dim=d["hidden_size"], n_layers=d["num_hidden_layers"],
                       n_heads=heads, n_kv_heads=kv, ffn_dim=d["intermediate_size"],
                       max_seq_len=d.get("max_position_embeddings", 2048), norm_eps=d.get("rms_norm_eps", 1e-6),
                       rope_theta=float(theta), tie_embeddings=bool(d.get("tie_word_embeddings", False)),
                       init_std=d.get("initializer_range", 0.02))


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
# weights
def _read_json(path, op):
    from ..train.serialization import CheckpointError
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        raise CheckpointError(op, path, "does not exist") from None
    except (OSError, ValueError) as e:
        raise CheckpointError(op, path, f"is not readable JSON: {e}") from None


def _read_safetensors(path, op) -> dict:
    from ..train.safetensors_codec import decode
    from ..train.serialization import CheckpointError
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        raise CheckpointError(op, path, "does not exist") from None
    except OSError as e:
        raise CheckpointError(op, path, f"cannot be read: {e}") from None
    tensors, _ = decode(raw, path, op=op)
    return tensors


def read_hf_tensors(folder, op="from_pretrained") -> tuple[dict, str]:
    """{HF name: ndarray} from model.safetensors, or from the shards a model.safetensors.index.json
    lists; also returns the file the names came from (for error messages)."""
    from ..train.serialization import CheckpointError
    single, index = os.path.join(folder, WEIGHTS_NAME), os.path.join(folder, INDEX_NAME)
    if os.path.exists(single):
        return _read_safetensors(single, op), single
    if os.path.exists(index):
        weight_map = _read_json(index, op).get("weight_map")
        if not isinstance(weight_map, dict):
            raise CheckpointError(op, index, "has no 'weight_map' object")
        tensors = {}
        for shard in sorted(set(weight_map.values())):
            tensors.update(_read_safetensors(os.path.join(folder, shard), op))
        return tensors, index
    raise CheckpointError(op, single, f"does not exist (nor does {INDEX_NAME}): '{folder}' is not a "
                          "HuggingFace model folder")


def load_hf_weights(model, folder, op="from_pretrained"):
    """Assign the HF tensors in `folder` to `model`'s parameters — all of them, or none."""
    from ..train.serialization import CheckpointError
    tensors, source = read_hf_tensors(folder, op)
    names = hf_to_minispore_names(model.config)
    params = dict(model.parameters_and_names())
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
    for ours, arr in staged.items():                  # everything checked: now assign
        params[ours].set_data(Tensor(arr))


def from_pretrained(cls, folder, dtype=None, attention="auto"):
    """A model built from `folder`'s config.json with its weights (see the module docstring)."""
    op = "from_pretrained"
    if not isinstance(folder, (str, os.PathLike)):
        raise OpTypeError(op, "a folder path", type(folder).__name__)
    folder = os.fspath(folder)
    cfg_path = os.path.join(folder, CONFIG_NAME)
    hf_cfg = _read_json(cfg_path, op)
    model = cls(config_from_hf(hf_cfg, cfg_path), attention=attention)
    if dtype is not None:
        for p in model.get_parameters():
            p.set_dtype(dtype)
    load_hf_weights(model, folder, op)
    model.hf_config = {k: hf_cfg[k] for k in ("bos_token_id", "eos_token_id", "pad_token_id") if k in hf_cfg}
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
