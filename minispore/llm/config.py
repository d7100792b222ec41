"""Model configurations for the LLaMA family, and the named presets the CLI trains.

`LlamaConfig` is a plain dataclass so it can be printed, compared, written to JSON next to a
checkpoint and read back (`to_dict` / `from_dict`). A *preset* pairs a model config with the
training hyper-parameters that go with it (the trainer's `TrainConfig` reads those overrides).
"""
from __future__ import annotations

import dataclasses
import math
import numbers
from dataclasses import dataclass, field

from ..common.errors import OpTypeError, OpValueError


@dataclass
class LlamaConfig:
    """Shape and numerics of a LLaMA-style decoder.

    * `n_kv_heads` (default: `n_heads`) < `n_heads` gives grouped-query attention: each key/value
      head is shared by `n_heads // n_kv_heads` query heads.
    * `ffn_dim` (default: derived) is the SwiGLU hidden size. LLaMA derives it from `dim`: take the
      4*dim of a classic MLP, keep 2/3 of it (SwiGLU has three matrices instead of two, so this
      keeps the parameter count), scale by `ffn_dim_multiplier`, round up to `multiple_of`.
    * `max_seq_len` is the context length (nanoGPT calls it `block_size`).
    * `tie_embeddings`: the output head reuses the token embedding table (as nanoGPT does).
    * `num_experts` > 0 makes every block's FFN a mixture of experts (Mixtral-style,
      nn/layers/moe.py): `moe_top_k` SwiGLU experts of width `hidden_dim` per token out of
      `num_experts`, each with `capacity_factor` * tokens * top_k / num_experts slots (the rest is
      dropped); `aux_loss_coef` weights the load-balancing loss and `router_z_loss_coef` the
      router z-loss in `Llama.loss`. 0 (the default) is the dense FFN.
    """

    vocab_size: int = 65
    dim: int = 128
    n_layers: int = 4
    n_heads: int = 4
    n_kv_heads: int | None = None
    ffn_dim: int | None = None
    multiple_of: int = 32
    ffn_dim_multiplier: float | None = None
    max_seq_len: int = 64
    norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    dropout: float = 0.0
    tie_embeddings: bool = True
    init_std: float = 0.02
    num_experts: int = 0
    moe_top_k: int = 2
    capacity_factor: float = 1.25
    aux_loss_coef: float = 0.01
    router_z_loss_coef: float = 0.0

    def __post_init__(self):
        # Every field is type-checked here because configs arrive from JSON files (a checkpoint's
        # config, the CLI's --config): a string "false" is truthy, NaN passes `v <= 0`, and 1e9 is
        # a float. Sizes are *not* limited here - a config is only a description (DryRun analyses
        # 70B ones); the memory a config implies is checked where it is spent (Llama.__init__,
        # memory_estimate.check_config).
        for name in ("vocab_size", "dim", "n_layers", "n_heads", "multiple_of", "max_seq_len"):
            _positive_int(name, getattr(self, name))
        if self.n_kv_heads is None:
            self.n_kv_heads = self.n_heads
        _positive_int("n_kv_heads", self.n_kv_heads)
        if self.ffn_dim is not None:
            _positive_int("ffn_dim", self.ffn_dim)
        if self.ffn_dim_multiplier is not None and not _finite_positive(self.ffn_dim_multiplier):
            raise OpValueError("LlamaConfig", "'ffn_dim_multiplier' as None or a finite number > 0",
                               repr(self.ffn_dim_multiplier))
        if self.dim % self.n_heads:
            raise OpValueError("LlamaConfig", f"'dim' divisible by 'n_heads' ({self.n_heads})", f"dim={self.dim}")
        if self.head_dim % 2:
            raise OpValueError("LlamaConfig", "an even head dimension (rotary embeddings rotate pairs)",
                               f"head_dim={self.head_dim}")
        if self.n_kv_heads > self.n_heads or self.n_heads % self.n_kv_heads:
            raise OpValueError("LlamaConfig", f"'n_kv_heads' dividing 'n_heads' ({self.n_heads})",
                               f"n_kv_heads={self.n_kv_heads}")
        if (not isinstance(self.dropout, numbers.Real) or isinstance(self.dropout, bool)
                or not 0.0 <= self.dropout < 1.0):
            raise OpValueError("LlamaConfig", "'dropout' in [0, 1)", repr(self.dropout))
        for name in ("norm_eps", "rope_theta", "init_std"):
            v = getattr(self, name)
            if not _finite_positive(v):
                raise OpValueError("LlamaConfig", f"'{name}' as a finite number > 0", repr(v))
        if not isinstance(self.tie_embeddings, bool):
            # not bool(v): bool("false") is True, and a config must not mean the opposite of what it says
            raise OpValueError("LlamaConfig", "'tie_embeddings' as True or False", repr(self.tie_embeddings))
        if not isinstance(self.num_experts, numbers.Integral) or isinstance(self.num_experts, bool) \
                or self.num_experts < 0:
            raise OpValueError("LlamaConfig", "'num_experts' as an int >= 0 (0: a dense FFN)", repr(self.num_experts))
        if self.num_experts:
            from ..nn.layers.moe import check_moe_arguments
            check_moe_arguments("LlamaConfig", self.num_experts, self.moe_top_k, self.capacity_factor,
                                self.aux_loss_coef, self.router_z_loss_coef, top_k_name="moe_top_k")

    @property
    def head_dim(self) -> int:
        return self.dim // self.n_heads

    @property
    def block_size(self) -> int:
        """nanoGPT's name for the context length."""
        return self.max_seq_len

    @property
    def hidden_dim(self) -> int:
        """The SwiGLU hidden size: `ffn_dim` if given, else LLaMA's rounding rule."""
        if self.ffn_dim is not None:
            return self.ffn_dim
        hidden = int(2 * (4 * self.dim) / 3)
        if self.ffn_dim_multiplier is not None:
            hidden = int(self.ffn_dim_multiplier * hidden)
        return self.multiple_of * ((hidden + self.multiple_of - 1) // self.multiple_of)

    def num_params(self) -> int:
        """Parameter count (the tied head is counted once)."""
        d, h, kv = self.dim, self.n_heads * self.head_dim, self.n_kv_heads * self.head_dim
        per_layer = d * h + 2 * d * kv + h * d + 3 * d * self.hidden_dim * max(1, self.num_experts) + 2 * d
        per_layer += d * self.num_experts               # the MoE router (none when dense)
        head = 0 if self.tie_embeddings else self.vocab_size * d
        return self.vocab_size * d + self.n_layers * per_layer + d + head

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "LlamaConfig":
        if not isinstance(d, dict):
            raise OpTypeError("LlamaConfig.from_dict", "a dict", type(d).__name__)
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise OpValueError("LlamaConfig.from_dict", f"keys among {sorted(known)}", f"unknown keys {unknown}")
        return cls(**d)


def _positive_int(name, v):
    if not isinstance(v, numbers.Integral) or isinstance(v, bool) or v <= 0:
        raise OpValueError("LlamaConfig", f"'{name}' as a positive int", repr(v))


def _finite_positive(v) -> bool:
    """A real number (not a bool, not a string) in (0, inf): NaN fails `v > 0`."""
    return isinstance(v, numbers.Real) and not isinstance(v, bool) and 0 < v < math.inf


@dataclass
class TransformerOpParallelConfig:
    """How a LLaMA is spread over the ranks: MindSpore / MindFormers' `parallel_config` names.

    * `data_parallel` (dp): replicas of the (tensor-parallel) model, each on 1/dp of the global batch;
    * `model_parallel` (tp): the tensor-parallel group size (Megatron's column/row split: heads,
      key/value heads and FFN units divided by tp);
    * `use_seq_parallel`: the norm and residual regions split along the sequence too
      (Korthikanti et al. 2022): all-gather / reduce-scatter instead of all-reduce;
    * `vocab_emb_dp`: the embedding table (and the output head) replicated over the tp group
      (True, MindSpore's default) instead of split along the vocabulary (False);
    * `pipeline_stage`, `micro_batch_num`: pipeline parallelism, recorded here; the pipeline
      itself is `nn.PipelineCell` with `parallel/pipeline_llama.py`'s stage assignment (the
      tensor-parallel model of llm/tensor_parallel.py accepts only 1: pp x tp is not built).
    * `expert_parallel`: the MoE experts split over groups of this many data-parallel ranks
      (parallel/expert_parallel.py; AlltoAll dispatch and combine); it must divide data_parallel
      (the expert groups are carved out of the data-parallel ranks, as in MindFormers).
    * `fine_grain_interleave`: fine-grained multi-copy parallelism (MindFormers' name): each
      layer's sequence-parallel rows cut into this many copies, so one copy's all-gather /
      reduce-scatter travels while another computes (parallel/multi_copy.py); > 1 needs
      model_parallel > 1 and use_seq_parallel.

    dp * tp * pipeline_stage must equal the number of processes where the config is spent.
    Like LlamaConfig it is a plain, JSON-friendly description: `to_dict` / `from_dict` (a yaml
    `parallel_config:` block reads straight in).
    """

    data_parallel: int = 1
    model_parallel: int = 1
    pipeline_stage: int = 1
    micro_batch_num: int = 1
    use_seq_parallel: bool = False
    vocab_emb_dp: bool = True
    expert_parallel: int = 1
    fine_grain_interleave: int = 1

    def __post_init__(self):
        for name in ("data_parallel", "model_parallel", "pipeline_stage", "micro_batch_num", "fine_grain_interleave"):
            v = getattr(self, name)
            if not isinstance(v, numbers.Integral) or isinstance(v, bool) or v <= 0:
                raise OpValueError("TransformerOpParallelConfig", f"'{name}' as a positive int", repr(v))
        for name in ("use_seq_parallel", "vocab_emb_dp"):
            if not isinstance(getattr(self, name), bool):
                raise OpValueError("TransformerOpParallelConfig", f"'{name}' as True or False",
                                   repr(getattr(self, name)))
        if not isinstance(self.expert_parallel, numbers.Integral) or isinstance(self.expert_parallel, bool) \
                or self.expert_parallel <= 0:
            raise OpValueError("TransformerOpParallelConfig", "'expert_parallel' as a positive int",
                               repr(self.expert_parallel))
        if self.data_parallel % self.expert_parallel:
            raise OpValueError("TransformerOpParallelConfig", f"'expert_parallel' dividing data_parallel "
                               f"({self.data_parallel})", f"expert_parallel={self.expert_parallel}")

    @property
    def world_size(self) -> int:
        return self.data_parallel * self.model_parallel * self.pipeline_stage

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "TransformerOpParallelConfig":
        if not isinstance(d, dict):
            raise OpTypeError("TransformerOpParallelConfig.from_dict", "a dict", type(d).__name__)
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise OpValueError("TransformerOpParallelConfig.from_dict", f"keys among {sorted(known)}",
                               f"unknown keys {unknown}")
        return cls(**d)


@dataclass
class Preset:
    """A named model plus the training hyper-parameters it is meant to be trained with."""

    model: LlamaConfig
    train: dict = field(default_factory=dict)
    description: str = ""


# nanoGPT's CPU recipe for Shakespeare (README "quick start", the --device=cpu command):
# 4 layers, 4 heads, 128 wide, block 64, batch 12, 2000 iterations, lr 1e-3 -> 1e-4, warmup 100,
# beta2 0.99, weight decay 0.1, no dropout. The LLaMA pieces (RMSNorm, RoPE, SwiGLU) replace
# nanoGPT's LayerNorm, learned positions and GELU MLP; the FFN width (352) keeps the parameter
# count of nanoGPT's 4x MLP.
PRESETS = {
    "shakespeare-char": Preset(
        model=LlamaConfig(vocab_size=65, dim=128, n_layers=4, n_heads=4, max_seq_len=64, dropout=0.0,
                          multiple_of=32, tie_embeddings=True),
        train=dict(max_iters=2000, batch_size=12, learning_rate=1e-3, min_lr=1e-4, warmup_iters=100,
                   lr_decay_iters=2000, beta1=0.9, beta2=0.99, weight_decay=0.1, grad_clip=1.0,
                   eval_interval=250, eval_iters=20, final_eval_iters=200, ckpt_interval=250),
        description="nanoGPT's CPU Shakespeare config (0.8M parameters, minutes on a laptop CPU)"),
    # nanoGPT's GPU recipe (config/train_shakespeare_char.py): 6 layers, 6 heads, 384 wide,
    # block 256, batch 64, dropout 0.2, 5000 iterations. About 100x the work of the CPU preset.
    "shakespeare-small": Preset(
        model=LlamaConfig(vocab_size=65, dim=384, n_layers=6, n_heads=6, max_seq_len=256, dropout=0.2,
                          multiple_of=32, tie_embeddings=True),
        train=dict(max_iters=5000, batch_size=64, learning_rate=1e-3, min_lr=1e-4, warmup_iters=100,
                   lr_decay_iters=5000, beta1=0.9, beta2=0.99, weight_decay=0.1, grad_clip=1.0,
                   eval_interval=250, eval_iters=200, final_eval_iters=200, ckpt_interval=500),
        description="nanoGPT's GPU Shakespeare config (10.7M parameters; hours on a CPU)"),
    # Meta's LLaMA geometries (Touvron et al. 2023, "LLaMA: Open and Efficient Foundation Language
    # Models", Table 2; Llama 2 paper Table 1 for 70B's grouped-query attention), for
    # `minispore dryrun`: far too big to train here. Parameter counts: 6,738,415,616 (the "6.7B"
    # of the paper), 13,015,864,320 and 68,976,648,192. The train dict is the paper's AdamW setup.
    "llama-7b": Preset(
        model=LlamaConfig(vocab_size=32000, dim=4096, n_layers=32, n_heads=32, multiple_of=256, max_seq_len=2048,
                          norm_eps=1e-6, tie_embeddings=False),
        train=dict(batch_size=1, learning_rate=3e-4, min_lr=3e-5, beta1=0.9, beta2=0.95, weight_decay=0.1,
                   grad_clip=1.0, warmup_iters=2000),
        description="Meta's LLaMA-7B (6.74B parameters; for dryrun)"),
    "llama-13b": Preset(
        model=LlamaConfig(vocab_size=32000, dim=5120, n_layers=40, n_heads=40, multiple_of=256, max_seq_len=2048,
                          norm_eps=1e-6, tie_embeddings=False),
        train=dict(batch_size=1, learning_rate=3e-4, min_lr=3e-5, beta1=0.9, beta2=0.95, weight_decay=0.1,
                   grad_clip=1.0, warmup_iters=2000),
        description="Meta's LLaMA-13B (13.0B parameters; for dryrun)"),
    "llama-70b": Preset(
        model=LlamaConfig(vocab_size=32000, dim=8192, n_layers=80, n_heads=64, n_kv_heads=8, multiple_of=4096,
                          ffn_dim_multiplier=1.3, max_seq_len=4096, norm_eps=1e-5, tie_embeddings=False),
        train=dict(batch_size=1, learning_rate=1.5e-4, min_lr=1.5e-5, beta1=0.9, beta2=0.95, weight_decay=0.1,
                   grad_clip=1.0, warmup_iters=2000),
        description="Meta's Llama-2-70B (69.0B parameters, grouped-query attention; for dryrun)"),
    # Mixtral's recipe (Jiang et al. 2024, "Mixtral of Experts": 8 SwiGLU experts, top-2, grouped-query
    # attention, rope_theta 1e6, untied head) shrunk to train on a CPU: 4 experts, top-2, with
    # GShard's capacity factor 1.25 and Switch's load-balancing loss weight 0.01.
    "llama-moe-tiny": Preset(
        model=LlamaConfig(vocab_size=65, dim=64, n_layers=2, n_heads=4, n_kv_heads=2, ffn_dim=128, max_seq_len=64,
                          rope_theta=1e6, tie_embeddings=False, num_experts=4, moe_top_k=2, capacity_factor=1.25,
                          aux_loss_coef=0.01),
        train=dict(max_iters=2000, batch_size=12, learning_rate=1e-3, min_lr=1e-4, warmup_iters=100,
                   lr_decay_iters=2000, beta1=0.9, beta2=0.99, weight_decay=0.1, grad_clip=1.0,
                   eval_interval=250, eval_iters=20, final_eval_iters=200, ckpt_interval=250),
        description="a Mixtral-style mixture of experts, tiny (4 experts, top-2; 0.23M parameters, 0.13M per token)"),
}


def get_preset(name: str) -> Preset:
    """A fresh copy of a preset (callers may change it freely)."""
    if name not in PRESETS:
        raise OpValueError("get_preset", f"one of {sorted(PRESETS)}", repr(name))
    p = PRESETS[name]
    return Preset(model=dataclasses.replace(p.model), train=dict(p.train), description=p.description)


__all__ = ["LlamaConfig", "TransformerOpParallelConfig", "Preset", "PRESETS", "get_preset"]
