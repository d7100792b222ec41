"""How many bytes a LLaMA config implies, computed from the config alone, before allocating.

A config is a handful of integers (`n_layers`, `dim`, `vocab_size`, `max_seq_len` ...) whose
products are gigabytes. A config.json that says `vocab_size: 2**34` or `num_hidden_layers:
1000000` should be refused in microseconds with a message, not after minutes of building (or
with a raw MemoryError). So every place that turns a config into memory asks this module first:

* `Llama.__init__` / `from_pretrained`: `check_config` (weights, RoPE tables, the Python objects
  of the layers, and the float64 scratch of the initializer);
* the KV caches (kv_cache.py): `kv_bytes` before each allocation or growth;
* the training and generation commands: `check_training` / `check_inference`.

The limit and the refusal are `minispore.common.memory_limit.check_fits` (the one mechanism:
available memory, RLIMIT_AS, or `MINISPORE_MEMORY_LIMIT`).

How the numbers are made (itemsize = bytes per element of the model's dtype, float32 unless
told; n = batch_size * seq_len tokens):

* parameters: exact - `cfg.num_params() * itemsize` (the tied head counted once).
* RoPE tables: the float64 cos/sin the model keeps, the four per-dtype copies it derives (cos,
  sin, and both scaled by 1/sqrt(head_dim)), and the float64 angle scratch of building them.
* objects: each TransformerBlock is ~22 KB of Python objects (cells, Parameters, dicts) besides
  its arrays - measured with tracemalloc; it only matters for very deep, very narrow configs.
* training: parameters + gradients + AdamW's two moments (4x the weights), plus activations.
  The activation estimate counts, per token and layer, the tensors the autodiff tape keeps
  alive until the backward pass: ~16 vectors of width `dim` (norm inputs/outputs, q/k/v before
  and after rotation, attention output, projections, residual sums), 4 of width `ffn_dim`
  (w1, silu, w3, their product), and for naive attention 3 rows of the (heads x seq) score
  matrix (scores, masked scores, probabilities); flash attention keeps only the log-sum-exp.
  Once per step: the logits, their softmax and its gradient (3 x vocab per token), and the
  working set of one layer's backward (3 score rows per token for naive attention, 3 rows of a
  128-wide tile for flash). Checked against tracemalloc's peak over real training steps
  (tests/llm/test_config_limits.py): within 2x, usually within 1.3x, for attention-, vocab- and
  weight-dominated configs.
* inference: parameters + RoPE tables + the KV cache (keys and values, every layer, every row and
  position: exact for a cache allocated at its final capacity, as `generate` does) + the working
  set of the prefill forward (no tape, so about one layer's tensors: ~8 vectors of width dim and
  2 of ffn_dim per token, plus 2 score rows for naive attention; flash attention's tiles are
  small next to these) and the last positions' logits. Checked against tracemalloc's peak over
  a real `generate` (within 2x; about 1.0-1.6x).
"""
from __future__ import annotations

import numbers

from ..common import dtype as mstype
from ..common.errors import OpTypeError, OpValueError
from ..common.memory_limit import check_fits
from .config import LlamaConfig

# tracemalloc of Llama(cfg) minus its arrays, per TransformerBlock (cells, Parameters, Tensors,
# parameter dicts): 22.1 KB measured for both 10 and 200 layers; rounded up
LAYER_OBJECT_BYTES = 24 * 2**10
# the row/column tile of ops.flash_attention_score's training kernel (fused_attention.py)
FLASH_TILE = 128

_CONFIG_HINT = ("Use a smaller config (n_layers, dim, ffn_dim, vocab_size, max_seq_len); to analyse "
                "a big model without its weights, build it under minispore.graph.dryrun.abstract_parameters().")
_TRAIN_HINT = "Lower the batch size or the sequence length, or train a smaller model."
_INFER_HINT = "Generate for fewer prompts at once, with a shorter context, or use a smaller model."


# ------------------------------------------------------------------------------------------------
# arguments
def _config(cfg, op):
    if not isinstance(cfg, LlamaConfig):
        raise OpTypeError(op, "a LlamaConfig", type(cfg).__name__)
    return cfg


def _itemsize(cfg, dtype) -> int:
    """Bytes per element: `dtype` if given, else the config's `dtype` attribute if it has one,
    else float32 (what Llama's parameters are unless converted)."""
    d = dtype if dtype is not None else getattr(cfg, "dtype", None)
    return mstype.float32.itemsize if d is None else mstype.as_dtype(d).itemsize


def _count(op, name, v) -> int:
    if not isinstance(v, numbers.Integral) or isinstance(v, bool) or v <= 0:
        raise OpValueError(op, f"'{name}' as a positive int", repr(v))
    return int(v)


def _uses_flash(attention) -> bool:
    from .attention import flash_attention, get_attention
    return get_attention(attention) is flash_attention


# ------------------------------------------------------------------------------------------------
# the parts
def parameter_bytes(cfg, dtype=None) -> int:
    """Bytes of all parameters at `dtype` (default: the config's, float32)."""
    return _config(cfg, "parameter_bytes").num_params() * _itemsize(cfg, dtype)


def largest_parameter_elements(cfg) -> int:
    """Elements of the biggest single weight (the embedding table or an FFN matrix)."""
    return max(cfg.vocab_size * cfg.dim, cfg.dim * cfg.hidden_dim,
               cfg.dim * max(cfg.n_heads, cfg.n_kv_heads) * cfg.head_dim)


def rope_table_bytes(cfg, dtype=None) -> int:
    """The RoPE tables Llama keeps for `max_seq_len` positions (see the module docstring)."""
    cfg = _config(cfg, "rope_table_bytes")
    return rope_bytes(cfg.head_dim, cfg.max_seq_len, _itemsize(cfg, dtype))


def rope_bytes(head_dim: int, seq_len: int, itemsize: int = 4) -> int:
    """Peak bytes of building the tables (float64 half- and full-width angles, cos, sin) plus the
    four tables at `itemsize` derived from them."""
    return seq_len * head_dim * (4 + 3 * 8 + 4 * itemsize)


def object_bytes(cfg) -> int:
    """Python objects around the arrays (cells, Parameters): LAYER_OBJECT_BYTES per layer."""
    return (_config(cfg, "object_bytes").n_layers + 1) * LAYER_OBJECT_BYTES


def model_bytes(cfg, dtype=None) -> int:
    """A built model: parameters + RoPE tables + the layers' Python objects."""
    return parameter_bytes(cfg, dtype) + rope_table_bytes(cfg, dtype) + object_bytes(cfg)


def kv_bytes(n_layers: int, batch: int, kv_heads: int, positions: int, head_dim: int, itemsize: int) -> int:
    """Keys and values of every layer: 2 x n_layers arrays of (batch, kv_heads, positions, head_dim)."""
    return 2 * n_layers * batch * kv_heads * positions * head_dim * itemsize


def kv_cache_bytes(cfg, batch_size: int, seq_len: int, dtype=None) -> int:
    """A contiguous KV cache holding `seq_len` positions for `batch_size` rows."""
    cfg = _config(cfg, "kv_cache_bytes")
    batch = _count("kv_cache_bytes", "batch_size", batch_size)
    seq = _count("kv_cache_bytes", "seq_len", seq_len)
    return kv_bytes(cfg.n_layers, batch, cfg.n_kv_heads, seq, cfg.head_dim, _itemsize(cfg, dtype))


def activation_bytes(cfg, batch_size: int, seq_len: int, dtype=None, attention="auto") -> int:
    """What one training step keeps for the backward pass, plus its largest transients (see the
    module docstring for the per-token counts)."""
    op = "training_bytes"
    cfg = _config(cfg, op)
    batch, seq = _count(op, "batch_size", batch_size), _count(op, "seq_len", seq_len)
    flash = _uses_flash(attention)
    d, f, heads = cfg.dim, cfg.hidden_dim, cfg.n_heads
    q_dim, kv_dim = heads * cfg.head_dim, cfg.n_kv_heads * cfg.head_dim
    scores = 2 * heads if flash else 3 * heads * seq           # per token: lse, or 3 score rows
    if not flash and cfg.n_kv_heads != heads:
        scores += 2 * q_dim                                      # repeat_kv copies of k and v
    per_layer = 10 * d + 3 * q_dim + 3 * kv_dim + 4 * f + scores
    once = 4 * d + 3 * cfg.vocab_size + 3 * heads * (min(seq, FLASH_TILE) if flash else seq)
    tokens = batch * seq
    mask = 0 if flash else seq * seq                             # naive: the cached causal mask
    return (tokens * (cfg.n_layers * per_layer + once) + mask) * _itemsize(cfg, dtype)


def training_bytes(cfg, batch_size: int, seq_len: int, dtype=None, attention="auto") -> int:
    """Peak bytes of training: the model, gradients, AdamW's two moments, activations, and the
    optimizer's temporaries (a few copies of the largest weight). See the module docstring."""
    cfg = _config(cfg, "training_bytes")
    item = _itemsize(cfg, dtype)
    weights = parameter_bytes(cfg, dtype)
    return (model_bytes(cfg, dtype) + 3 * weights + activation_bytes(cfg, batch_size, seq_len, dtype, attention)
            + 3 * largest_parameter_elements(cfg) * item)


def inference_bytes(cfg, batch_size: int, seq_len: int, dtype=None, attention="auto") -> int:
    """Peak bytes of generating `seq_len` positions (prompt + new tokens) for `batch_size` rows
    through a contiguous KV cache: the model, the cache, and one prefill layer's working set."""
    op = "inference_bytes"
    cfg = _config(cfg, op)
    batch, seq = _count(op, "batch_size", batch_size), _count(op, "seq_len", seq_len)
    item = _itemsize(cfg, dtype)
    scores = 0 if _uses_flash(attention) else 2 * cfg.n_heads * seq
    working = batch * seq * (8 * cfg.dim + 2 * cfg.hidden_dim + scores) + 3 * batch * cfg.vocab_size
    return model_bytes(cfg, dtype) + kv_cache_bytes(cfg, batch, seq, dtype) + working * item


# ------------------------------------------------------------------------------------------------
# the checks (each raises common.memory_limit.MemoryLimitError before anything is allocated)
def check_config(cfg, what: str = "this model config", dtype=None, parameters: bool = True,
                 hint: str = _CONFIG_HINT) -> None:
    """Refuse a config whose model would not fit: weights (+ the initializer's float64 draw of
    the largest one), RoPE tables and the layers' objects. `parameters=False` checks only what
    is allocated even when the weights are abstract (DryRun's `abstract_parameters`)."""
    cfg = _config(cfg, "check_config")
    need = rope_table_bytes(cfg, dtype) + object_bytes(cfg)
    if parameters:
        need += parameter_bytes(cfg, dtype) + 8 * largest_parameter_elements(cfg)
    check_fits(need, what, hint)


def check_training(cfg, batch_size: int, seq_len: int, what: str = "this training run", dtype=None,
                   attention="auto") -> None:
    """Refuse a training job (model + optimizer + activations) that would not fit."""
    check_fits(training_bytes(cfg, batch_size, seq_len, dtype, attention), what, _TRAIN_HINT)


def check_inference(cfg, batch_size: int, seq_len: int, what: str = "this generation", dtype=None,
                    attention="auto") -> None:
    """Refuse a generation job (model + KV cache + working set) that would not fit."""
    check_fits(inference_bytes(cfg, batch_size, seq_len, dtype, attention), what, _INFER_HINT)


__all__ = ["parameter_bytes", "training_bytes", "inference_bytes", "check_config", "check_training",
           "check_inference", "model_bytes", "rope_table_bytes", "rope_bytes", "kv_bytes", "kv_cache_bytes",
           "activation_bytes", "object_bytes", "largest_parameter_elements"]
