"""Mixture-of-experts models for the parallel DryRun: what an MoE feed-forward adds to a plan.

A Mixtral-style MoE layer replaces the dense SwiGLU feed-forward by `num_experts` SwiGLU experts
and a linear router (h -> E, softmax, top-k): every token runs through `top_k` of them. So the
model holds E feed-forwards' parameters but each token pays for k - Mixtral-8x7B has 46.7B
parameters, 12.9B "active" per token (Jiang et al. 2024, "Mixtral of Experts", §2).

Expert parallel (MindSpore / MindFormers `expert_parallel`, Megatron-core `expert_model_parallel`)
spreads the experts over `ep` ranks carved out of the data-parallel group (`data_parallel % ep ==
0`): each rank holds E/ep experts whole. Tokens go to their experts and back with two AlltoAlls
per MoE layer (dispatch, combine; MindSpore's `enable_alltoall`), and again in backward:

    AlltoAll payload per call = R x h x itemsize,   R = rows dispatched by this rank
    bytes each rank sends     = (ep - 1)/ep x payload       (its own block stays)

with R = tokens x k exactly (no capacity limit), or capacity x E with a capacity factor cf
(capacity = ceil(cf x tokens x k / E), the buffer padded; tokens over capacity are dropped). So
per MoE layer and micro-batch each way (forward: dispatch + combine; backward: their conjugates)
2 x tokens x k x h x itemsize x (ep - 1)/ep. The expert weights' gradients are reduced over the
dp/ep ranks that hold the same experts (the "expert data parallel" group), the other weights over
all dp. With tensor parallel each expert is split like the dense FFN (MindFormers' expert weights:
the expert axis over expert_parallel, the FFN axis over model_parallel), so every TP rank
dispatches all b s tokens (all-gathered first under sequence parallel) to its slice of the experts.

The MoE spec of a config is `moe_of(cfg)`: the LlamaConfig's own fields when the model has them
(`num_experts`, `moe_top_k`, `capacity_factor`: the MoE layer's config), else dense. DryRun-only
geometries too big to build live in `DRYRUN_MODELS` (Mixtral-8x7B).
"""
from __future__ import annotations

import dataclasses
import math
import numbers
from dataclasses import dataclass

from ..common.errors import OpValueError
from .config import LlamaConfig

_OP = "moe_plan"


@dataclass(frozen=True)
class MoESpec:
    """The MoE feed-forward of every layer: `num_experts` SwiGLU experts of the config's ffn width,
    `top_k` per token, an optional `capacity_factor` (None: no capacity limit, nothing dropped)."""

    num_experts: int
    top_k: int = 2
    capacity_factor: float | None = None

    def __post_init__(self):
        for name in ("num_experts", "top_k"):
            v = getattr(self, name)
            if not isinstance(v, numbers.Integral) or isinstance(v, bool) or v < 1:
                raise OpValueError(_OP, f"{name} (--{'experts' if name == 'num_experts' else 'top-k'}) as an int >= 1",
                                   repr(v))
        if self.top_k > self.num_experts:
            raise OpValueError(_OP, f"top_k (--top-k) <= num_experts ({self.num_experts})", f"top_k={self.top_k}")
        cf = self.capacity_factor
        if cf is not None and (not isinstance(cf, numbers.Real) or isinstance(cf, bool) or not 0 < cf < math.inf):
            raise OpValueError(_OP, "capacity_factor (--capacity-factor) as a number > 0 or None", repr(cf))


def moe_of(cfg: LlamaConfig) -> MoESpec | None:
    """The config's MoE spec from its own fields (`num_experts` > 0, `moe_top_k`, `capacity_factor`),
    or None for a dense model."""
    n = getattr(cfg, "num_experts", 0) or 0
    if n <= 0:
        return None
    return MoESpec(int(n), int(getattr(cfg, "moe_top_k", 2) or 2), getattr(cfg, "capacity_factor", None))


def dense_layer_params(cfg: LlamaConfig) -> dict:
    """{'attention', 'ffn', 'norms'} parameters of one dense LLaMA block."""
    h, q, kv = cfg.dim, cfg.n_heads * cfg.head_dim, cfg.n_kv_heads * cfg.head_dim
    return {"attention": 2 * h * q + 2 * h * kv, "ffn": 3 * h * cfg.hidden_dim, "norms": 2 * h}


def parameter_counts(cfg: LlamaConfig, moe: MoESpec | None = None) -> dict:
    """{'total', 'active', 'embedding', 'non_embedding', 'active_non_embedding'}: parameters of the
    model and those one token uses (MoE: k of the E experts; router included)."""
    layer = dense_layer_params(cfg)
    h, V, L = cfg.dim, cfg.vocab_size, cfg.n_layers
    emb = V * h * (1 if cfg.tie_embeddings else 2)
    if moe is None:
        body = active = L * sum(layer.values()) + h
    else:
        shared = layer["attention"] + layer["norms"] + h * moe.num_experts
        body = L * (shared + moe.num_experts * layer["ffn"]) + h
        active = L * (shared + moe.top_k * layer["ffn"]) + h
    return {"total": emb + body, "active": emb + active, "embedding": emb, "non_embedding": body,
            "active_non_embedding": active}


# DryRun-only geometries (too big to build here). Mixtral-8x7B: Jiang et al. 2024, Table 1 -
# dim 4096, 32 layers, 32 heads (head_dim 128), 8 KV heads, ffn 14336, vocab 32000, 8 experts,
# top-2; 46.70B parameters, 12.88B active (parameter_counts reproduces both).
DRYRUN_MODELS = {
    "mixtral-8x7b": (LlamaConfig(vocab_size=32000, dim=4096, n_layers=32, n_heads=32, n_kv_heads=8, ffn_dim=14336,
                                 max_seq_len=4096, norm_eps=1e-5, rope_theta=1e6, tie_embeddings=False),
                     MoESpec(num_experts=8, top_k=2)),
}


def dryrun_model(name: str):
    """(LlamaConfig, MoESpec or None) of a preset (llm.config.PRESETS) or a DRYRUN_MODELS entry."""
    from .config import PRESETS, get_preset
    if name in DRYRUN_MODELS:
        cfg, moe = DRYRUN_MODELS[name]
        return dataclasses.replace(cfg), moe
    if name in PRESETS:
        cfg = get_preset(name).model
        return cfg, moe_of(cfg)
    raise OpValueError("dryrun", f"--model among {sorted(set(PRESETS) | set(DRYRUN_MODELS))}", repr(name))


__all__ = ["MoESpec", "moe_of", "parameter_counts", "dense_layer_params", "DRYRUN_MODELS", "dryrun_model"]
