"""A LLaMA-style decoder-only transformer, written with minispore cells and ops.

    tokens -> tok_embeddings -> [TransformerBlock] x n_layers -> norm -> output head -> logits

    TransformerBlock:  h = x + attention(attention_norm(x))        (pre-norm residual blocks)
                       out = h + feed_forward(ffn_norm(h))

The LLaMA choices, each replacing a GPT-2/nanoGPT one:
* RMSNorm instead of LayerNorm (no centering, no bias);
* rotary position embeddings applied to q and k, instead of a learned position table;
* grouped-query attention: `n_kv_heads` key/value heads, each shared by n_heads/n_kv_heads queries;
* a SwiGLU MLP: w2(silu(w1 x) * w3 x), instead of GELU between two matrices;
* no biases anywhere.

Parameter names follow Meta's LLaMA code with MindSpore's cell names
(`tok_embeddings.embedding_table`, `layers.0.attention.wq.weight`,
`layers.0.feed_forward.w1.weight`, `layers.0.attention_norm.weight`, `norm.weight`,
`output.weight`), so checkpoints read like MindFormers' LLaMA.

Performance notes (this runs eagerly in NumPy, one kernel per op): activations stay 2-D
(batch*seq, features) between attention blocks so every projection is a single matrix product;
attention is two batched matmuls over (batch, heads, seq, head_dim) with no Python loop over
heads; the RoPE tables are computed once, in `Llama.__init__`.
"""
from __future__ import annotations

import math

import numpy as np

from .. import nn
from ..common.errors import OpTypeError, OpValueError
from ..common.initializer import Normal, Zero
from ..common.tensor import Tensor, from_numpy
from ..ops import functional as F
from .attention import get_attention, naive_attention, repeat_kv
from .config import LlamaConfig
from .kv_cache import KVCache, PagedKVCache
from .memory_estimate import check_config
from .rope import apply_rotary_emb, rope_tables

# MindSpore's fused LLM operators (ops/prims/fused*.py), used when present: one kernel (and one
# backward rule) where the composite spelling runs several ops. Same numbers, up to float rounding.
_FUSED_ROPE = getattr(F, "rotary_position_embedding", None)
_FUSED_ADD_RMS_NORM = getattr(F, "add_rms_norm", None)


def _parameters_are_abstract() -> bool:
    """True inside DryRun's `abstract_parameters()`, where initializers return zero-stride views
    that take no memory (graph/dryrun/abstract.py): then only the real arrays are checked."""
    from ..graph.dryrun.abstract import is_abstract
    return is_abstract(Zero().generate((2,)))          # Zero: the probe must not draw random numbers


def rope(x, cos, sin):
    """Rotary embedding of x (B, T, H, hd): `ops.rotary_position_embedding` (mode 0, rotate-half)
    when the fused ops exist, else the composite `x * cos + rotate_half(x) * sin` of rope.py."""
    if _FUSED_ROPE is not None:
        return _FUSED_ROPE(x, cos, sin, 0)
    return apply_rotary_emb(x, cos, sin)


def residual_rms_norm(norm, x, delta):
    """(norm(x + delta), x + delta): `ops.add_rms_norm` (the residual add fused into the norm) when
    the fused ops exist, else an add and the norm cell."""
    if _FUSED_ADD_RMS_NORM is not None:
        y, _, h = _FUSED_ADD_RMS_NORM(x, delta, norm.weight, norm.eps)
        return y, h
    h = x + delta
    return norm(h), h


class Attention(nn.Cell):
    """Causal multi-head attention with rotary embeddings and grouped-query (shared) key/value heads.

    The attention core is `attention_fn` (attention.py: naive or flash); where keys and values
    come from is the cache's business (none in training, a contiguous or paged KV cache when
    generating). The projections and rotations around them are the same in every case.
    """

    def __init__(self, cfg: LlamaConfig, attention_fn=naive_attention):
        super().__init__()
        self.n_heads, self.n_kv_heads, self.head_dim = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
        self.n_rep = cfg.n_heads // cfg.n_kv_heads
        self.attention_fn = attention_fn
        std, proj_std = cfg.init_std, cfg.init_std / math.sqrt(2 * cfg.n_layers)
        q_dim, kv_dim = cfg.n_heads * cfg.head_dim, cfg.n_kv_heads * cfg.head_dim
        self.wq = nn.Dense(cfg.dim, q_dim, weight_init=Normal(std), has_bias=False)
        self.wk = nn.Dense(cfg.dim, kv_dim, weight_init=Normal(std), has_bias=False)
        self.wv = nn.Dense(cfg.dim, kv_dim, weight_init=Normal(std), has_bias=False)
        # the projection back into the residual stream is scaled down by 1/sqrt(2 * n_layers)
        # (GPT-2 / nanoGPT): each of the 2*n_layers residual branches adds variance to the stream
        self.wo = nn.Dense(q_dim, cfg.dim, weight_init=Normal(proj_std), has_bias=False)
        self.attn_dropout = nn.Dropout(p=cfg.dropout)
        self.resid_dropout = nn.Dropout(p=cfg.dropout)

    def construct(self, x, batch, rope_q, rope_k, cache=None):
        """x: (batch*seq, dim) -> (batch*seq, dim).

        rope_q/rope_k: (cos, sin) tables for these positions, shaped (seq, 1, head_dim) (or
        (batch, seq, 1, head_dim) when rows sit at different positions) so they broadcast over
        heads; cache: this layer's part of a KV cache (inference) or None (a causal forward).
        """
        n = x.shape[0]
        seq = n // batch
        # (B*T, H*hd) -> (B, T, H, hd): a free reshape; rotate while the layout is contiguous
        q = F.reshape(self.wq(x), (batch, seq, self.n_heads, self.head_dim))
        k = F.reshape(self.wk(x), (batch, seq, self.n_kv_heads, self.head_dim))
        v = F.reshape(self.wv(x), (batch, seq, self.n_kv_heads, self.head_dim))
        q = rope(q, *rope_q)                      # rope_q also carries the 1/sqrt(head_dim) scale
        k = rope(k, *rope_k)
        # (B, T, H, hd) -> (B, H, T, hd): heads become a batch dimension of the matmuls
        q = F.transpose(q, (0, 2, 1, 3))
        k = F.transpose(k, (0, 2, 1, 3))
        v = F.transpose(v, (0, 2, 1, 3))
        if cache is None:
            out = self.attention_fn(q, k, v, causal=True, discard=None, dropout=self.attn_dropout)
        else:
            out = cache.attend(q, k, v, self.attention_fn)                 # (B, H, T, hd)
        out = F.reshape(F.transpose(out, (0, 2, 1, 3)), (n, self.n_heads * self.head_dim))
        return self.resid_dropout(self.wo(out))


class FeedForward(nn.Cell):
    """SwiGLU MLP: w2(silu(w1 x) * w3 x). w1 is the gate, w3 the value, w2 projects back."""

    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        hidden = cfg.hidden_dim
        std, proj_std = cfg.init_std, cfg.init_std / math.sqrt(2 * cfg.n_layers)
        self.w1 = nn.Dense(cfg.dim, hidden, weight_init=Normal(std), has_bias=False)
        self.w2 = nn.Dense(hidden, cfg.dim, weight_init=Normal(proj_std), has_bias=False)
        self.w3 = nn.Dense(cfg.dim, hidden, weight_init=Normal(std), has_bias=False)
        self.dropout = nn.Dropout(p=cfg.dropout)

    def construct(self, x):
        return self.dropout(self.w2(F.silu(self.w1(x)) * self.w3(x)))


def moe_feed_forward(cfg: LlamaConfig) -> nn.MoE:
    """The FFN of a block when cfg.num_experts > 0: Mixtral-style top-k routing over SwiGLU experts
    (nn/layers/moe.py), initialised like FeedForward; its aux loss joins `Llama.loss`."""
    return nn.MoE(cfg.dim, cfg.hidden_dim, cfg.num_experts, top_k=cfg.moe_top_k, capacity_factor=cfg.capacity_factor,
                  aux_loss_coef=cfg.aux_loss_coef, router_z_loss_coef=cfg.router_z_loss_coef, init_std=cfg.init_std,
                  proj_std=cfg.init_std / math.sqrt(2 * cfg.n_layers), dropout=cfg.dropout)


class TransformerBlock(nn.Cell):
    """Pre-norm block: x + attention(norm(x)), then + feed_forward(norm(.))."""

    def __init__(self, cfg: LlamaConfig, attention_fn=naive_attention):
        super().__init__()
        self.attention_norm = nn.RMSNorm(cfg.dim, eps=cfg.norm_eps)
        self.attention = Attention(cfg, attention_fn)
        self.ffn_norm = nn.RMSNorm(cfg.dim, eps=cfg.norm_eps)
        self.feed_forward = FeedForward(cfg) if not cfg.num_experts else moe_feed_forward(cfg)

    def construct(self, x, batch, rope_q, rope_k, cache=None):
        a = self.attention(self.attention_norm(x), batch, rope_q, rope_k, cache)
        normed, h = residual_rms_norm(self.ffn_norm, x, a)       # h = x + a; normed = ffn_norm(h)
        return h + self.feed_forward(normed)


class Llama(nn.Cell):
    """The LLaMA decoder. `model(tokens)` maps int ids (B, T) to logits (B, T, vocab_size).

    `model(tokens, cache=...)` runs incrementally: each row's tokens continue the sequence the
    cache holds, and the cache grows by T positions (kv_cache.py: `model.new_cache()` for a
    contiguous cache, `PagedKVCache(...).batch(ids)` for a paged one). The same parameters train
    (`model.loss`) and generate (`model.generate`): there is one class, with no conversion step.

    `attention` picks the attention core (attention.py): "naive" (materialize the scores),
    "flash" (tiled `ops.flash_attention_score`), or "auto" (flash when the fused ops exist).
    HuggingFace calls this class `LlamaForCausalLM`; `from_pretrained` / `save_pretrained` read
    and write its folders (hf.py).
    """

    def __init__(self, cfg: LlamaConfig, attention: str = "auto"):
        super().__init__()
        if not isinstance(cfg, LlamaConfig):
            raise OpTypeError("Llama", "a LlamaConfig", type(cfg).__name__)
        # before any array exists: refuse a config whose weights / RoPE tables would not fit
        # (a raw MemoryError after minutes of building is the alternative)
        if _parameters_are_abstract():
            check_config(cfg, f"Llama(config) with abstract parameters (its RoPE tables for {cfg.max_seq_len:,} "
                         "positions and its layers)", parameters=False)
        else:
            check_config(cfg, f"Llama(config) with {cfg.num_params():,} parameters")
        self.config = cfg
        self.attention_impl = attention
        attention_fn = get_attention(attention)
        self.tok_embeddings = nn.Embedding(cfg.vocab_size, cfg.dim, embedding_table=Normal(cfg.init_std))
        self.dropout = nn.Dropout(p=cfg.dropout)
        self.layers = nn.CellList([TransformerBlock(cfg, attention_fn) for _ in range(cfg.n_layers)])
        self.norm = nn.RMSNorm(cfg.dim, eps=cfg.norm_eps)
        if not cfg.tie_embeddings:
            self.output = nn.Dense(cfg.dim, cfg.vocab_size, weight_init=Normal(cfg.init_std), has_bias=False)
        # constant tables, computed once in float64 and cast per dtype on first use
        cos, sin = rope_tables(cfg.head_dim, cfg.max_seq_len, cfg.rope_theta, dtype=np.float64)
        self._rope64 = (cos[:, None, :], sin[:, None, :])         # (T, 1, hd): broadcast over heads
        self._consts = {}
        self.hf_config = {}           # bos/eos/pad token ids of a HuggingFace checkpoint (from_pretrained)

    def set_attention(self, attention: str):
        """Switch every layer's attention core ("naive", "flash", "auto"); weights are untouched."""
        fn = get_attention(attention)
        self.attention_impl = attention
        for layer in self.layers:
            layer.attention.attention_fn = fn

    def _constants(self, np_dtype):
        """(cos, sin, cos_q, sin_q) as arrays of the model's dtype. Attention scores are
        q.k / sqrt(head_dim); folding that scale into q's rotation tables saves a multiply."""
        c = self._consts.get(np_dtype)
        if c is None:
            scale = 1.0 / math.sqrt(self.config.head_dim)
            cos, sin = self._rope64
            c = tuple(a.astype(np_dtype) for a in (cos, sin, cos * scale, sin * scale))
            self._consts[np_dtype] = c
        return c

    def head_weight(self):
        """The (vocab, dim) output matrix: the embedding table when tied."""
        return self.tok_embeddings.embedding_table if self.config.tie_embeddings else self.output.weight

    def hidden_to_logits(self, h):
        """(N, dim) final hidden states -> (N, vocab) logits."""
        return F.matmul(h, F.transpose(self.head_weight(), (1, 0)))

    def _check_tokens(self, tokens):
        if not isinstance(tokens, Tensor):
            raise OpTypeError("Llama", "tokens as an integer Tensor of shape (batch, seq)", type(tokens).__name__)
        if tokens.ndim != 2 or tokens.dtype.kind not in ("int", "uint"):
            raise OpValueError("Llama", "tokens as an integer Tensor of shape (batch, seq)",
                               f"{tokens.dtype} of shape {tuple(tokens.shape)}")

    def forward_2d(self, tokens, cache=None, last_only=False):
        """Logits as a (B*T, vocab) matrix (what the loss wants; `construct` reshapes it).

        `last_only=True` computes the logits of each row's last position only, (B, vocab): all a
        generation step needs (the output head is the biggest matmul of a small model).
        """
        self._check_tokens(tokens)
        batch, seq = tokens.shape
        max_len = self.config.max_seq_len
        if cache is None:
            if seq == 0 or seq > max_len:
                raise OpValueError("Llama", f"1 to {max_len} positions (max_seq_len {max_len})", f"{seq}")
            positions = 0
        else:
            positions = cache.begin(batch, seq, max_len, tokens=tokens.asnumpy())
        h = self.tok_embeddings(tokens)
        cos, sin, cos_q, sin_q = self._constants(h.dtype.np)
        if isinstance(positions, (int, np.integer)):
            pos = slice(int(positions), int(positions) + seq)       # every row at the same positions
        else:
            pos = positions                                          # (B, T): tables become (B, T, 1, hd)
        # read-only views/gathers of the cached tables: from_numpy, not Tensor() (which would copy each step)
        rope_q = (from_numpy(cos_q[pos]), from_numpy(sin_q[pos]))
        rope_k = (from_numpy(cos[pos]), from_numpy(sin[pos]))
        h = F.reshape(self.dropout(h), (batch * seq, self.config.dim))
        for i, layer in enumerate(self.layers):
            h = layer(h, batch, rope_q, rope_k, cache.layers[i] if cache is not None else None)
        if cache is not None:
            cache.end(seq)
        if last_only:
            h = F.reshape(h, (batch, seq, self.config.dim))[:, seq - 1] if seq > 1 else h
        return self.hidden_to_logits(self.norm(h))

    def construct(self, tokens, cache=None):
        logits = self.forward_2d(tokens, cache)
        return F.reshape(logits, tuple(tokens.shape) + (self.config.vocab_size,))

    def loss(self, tokens, targets):
        """Mean next-token cross-entropy of `tokens` (B, T) against `targets` (B, T); with MoE
        layers (num_experts > 0) plus their weighted load-balancing (and z-) losses of this forward."""
        logits = self.forward_2d(tokens)
        loss = F.cross_entropy(logits, F.reshape(targets, (-1,)))
        return (loss + nn.moe_auxiliary_loss(self)) if self.config.num_experts else loss

    def new_cache(self, capacity: int | None = None, pad=None) -> KVCache:
        """A contiguous KV cache (see kv_cache.KVCache for `capacity` and left-padding `pad`)."""
        return KVCache(self.config.n_layers, capacity=capacity, pad=pad)

    def new_paged_cache(self, num_blocks: int, block_size: int = 16, enable_prefix_caching: bool = True,
                        use_fused_ops=None):
        """A paged KV cache of `num_blocks` blocks of `block_size` positions (kv_cache.PagedKVCache)."""
        return PagedKVCache(self.config, num_blocks, block_size, enable_prefix_caching, use_fused_ops)

    def num_params(self) -> int:
        return sum(p.size for p in self.trainable_params())

    # HuggingFace-format weights (hf.py) --------------------------------------------------------
    @classmethod
    def from_pretrained(cls, path, dtype=None, attention: str = "auto") -> "Llama":
        """A model from a HuggingFace LLaMA folder (config.json + model.safetensors), in eval mode.
        `dtype` (e.g. ms.float64) converts the weights; a missing or misshapen tensor is an error
        naming it, raised before any weight is assigned."""
        from .hf import from_pretrained
        return from_pretrained(cls, path, dtype=dtype, attention=attention)

    def save_pretrained(self, path):
        """Write this model as a HuggingFace folder that `transformers` (and `from_pretrained`) reads."""
        from .hf import save_pretrained
        save_pretrained(self, path)

    # generation (generate.py) ------------------------------------------------------------------
    def generate(self, input_ids, max_new_tokens: int = 20, *, attention_mask=None, temperature: float = 0.0,
                 top_k=None, top_p: float = 1.0, repetition_penalty: float = 1.0, stop_token_ids="eos",
                 stop=(), tokenizer=None, seed=None, kv_cache="contiguous", block_size: int = 16,
                 num_blocks=None, prefill_chunk=None, pad_token_id=None):
        """Continue prompts; HuggingFace's `model.generate`, greedy by default (temperature 0).

        * `input_ids`: a (batch, seq) integer Tensor or array — with `attention_mask` (1 = token,
          0 = padding) when its rows are padded — or a list of token-id lists (ragged prompts);
        * returns the same kind: a Tensor/array (batch, seq + n) holding each input row followed
          by its new tokens (rows that stopped early are filled with `pad_token_id`), a list of
          lists (prompt + new tokens), or one list for one flat list of ids;
        * `stop_token_ids`: "eos" (default) stops at the checkpoint's `eos_token_id` when it has
          one (as HF does); or a list of ids; or ();
        * the other options are `generate_batch`'s (generate.py).
        """
        from .generate import _as_prompts, generate_batch
        array_in = isinstance(input_ids, (Tensor, np.ndarray))
        ids = input_ids.asnumpy() if isinstance(input_ids, Tensor) else input_ids
        if array_in and np.ndim(ids) == 1:
            ids = np.asarray(ids)[None]
        if array_in and attention_mask is not None:
            mask = attention_mask.asnumpy() if isinstance(attention_mask, Tensor) else np.asarray(attention_mask)
            if mask.shape != np.shape(ids):
                raise OpValueError("generate", f"'attention_mask' of the shape of input_ids {np.shape(ids)}",
                                   f"shape {mask.shape}")
            prompts = [row[m.astype(bool)].tolist() for row, m in zip(np.asarray(ids), mask)]
        else:
            prompts = _as_prompts(ids, "generate")
        eos = getattr(self, "hf_config", {}).get("eos_token_id")
        if isinstance(stop_token_ids, str) and stop_token_ids == "eos":
            stop_token_ids = () if eos is None else (eos if isinstance(eos, (list, tuple)) else (eos,))
        results = generate_batch(self, prompts, max_new_tokens, temperature, top_k, top_p, repetition_penalty,
                                 stop_token_ids, stop, seed, tokenizer, kv_cache, block_size, num_blocks,
                                 prefill_chunk)
        if not array_in:
            seqs = [r.prompt_ids + r.token_ids for r in results]
            flat = isinstance(input_ids, (list, tuple)) and not any(isinstance(t, (list, tuple, np.ndarray))
                                                                   for t in input_ids)
            return seqs[0] if flat else seqs
        if pad_token_id is None:
            pad_token_id = getattr(self, "hf_config", {}).get("pad_token_id")
            pad_token_id = pad_token_id if pad_token_id is not None else (stop_token_ids[0] if stop_token_ids else 0)
        width = max(len(r.token_ids) for r in results)
        new = np.full((len(results), width), pad_token_id, dtype=np.int64)
        for b, r in enumerate(results):
            new[b, :len(r.token_ids)] = r.token_ids
        out = np.concatenate([np.asarray(ids, dtype=np.int64), new], axis=1)
        return Tensor(out) if isinstance(input_ids, Tensor) else out


# HuggingFace's name for the same class: one model class trains and serves
LlamaForCausalLM = Llama


__all__ = ["Attention", "FeedForward", "TransformerBlock", "Llama", "LlamaForCausalLM", "repeat_kv"]
