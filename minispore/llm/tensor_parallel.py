"""A LLaMA model split across the ranks of a group, Megatron-style (minispore/parallel/megatron.py).

    init()                                          # under msrun / mpiexec -n 2
    ms.set_seed(0)
    full = Llama(cfg)                               # every rank builds (or loads) the same weights
    model = tensor_parallel_llama(full)             # this rank keeps its slices; `full` is untouched
    loss = model.loss(tokens, targets)              # the same number on every rank, and as one process
    ids = model.generate(prompt, max_new_tokens=8)  # the same tokens as one process

What each rank holds (p = the group size):

    tok_embeddings   VocabParallelEmbedding    vocabulary rows [r V/p, (r+1) V/p) (+1 row on the
                                               first V % p ranks when V does not divide)
    attention.wq     ColumnParallelDense       query heads [r H/p, (r+1) H/p)
    attention.wk/wv  ColumnParallelDense       key/value heads [r Hkv/p, (r+1) Hkv/p)
    attention.wo     RowParallelDense          the matching input block; one all-reduce
    feed_forward.w1/w3  ColumnParallelDense    hidden units [r F/p, (r+1) F/p)
    feed_forward.w2  RowParallelDense          the matching input block; one all-reduce
    norms            replicated (every rank the whole weight, the same gradient)
    output head      the vocabulary split of the embedding (tied) or a ColumnParallelDense

Why heads split cleanly: rows [h*hd, (h+1)*hd) of wq are query head h, and with grouped-query
attention query head h reads key/value head h // (H/Hkv). Rank r's query heads [r H/p, ...) read
exactly the key/value heads [r Hkv/p, ...) it holds, so attention runs per rank with no
communication, on H/p query heads and Hkv/p key/value heads - and each rank's KV cache holds only
those heads: 1/p of the single-process cache.

The layers are subclasses of model.py's Attention / FeedForward / TransformerBlock / Llama that
inherit their `construct` unchanged: only the projections (and the head counts) differ. So the
KV caches, generation (generate.py, contiguous and paged) and `model.generate` run on the sharded
model as they are. Two things change at the ends of the network:

* `hidden_to_logits` all-gathers the vocabulary slices, so generation sees the full logits on
  every rank and every rank samples the same token (greedy: exactly the single-process tokens);
* `loss` never gathers: it uses `vocab_parallel_cross_entropy`, which exchanges three numbers per
  row instead of the (rows, vocab) logits.

Dropout: the ranks draw their masks from the same seeded generator in the same order (every rank
draws equally shaped masks), so the replicated activations stay identical across ranks; the masks
are not the single-process ones, so equality with one process needs `dropout=0`.
"""
from __future__ import annotations

import contextlib
import dataclasses

from .. import nn
from ..common.errors import OpTypeError, OpValueError
from ..common.tensor import Parameter, Tensor
from ..ops import functional as F
from ..parallel.megatron import (ColumnParallelDense, CopyToModelParallelRegion, GatherFromModelParallelRegion,
                                 RowParallelDense, VocabParallelEmbedding, gathered_parameters, group_info,
                                 vocab_parallel_cross_entropy)
from .kv_cache import PagedKVCache
from .model import Attention, FeedForward, Llama, TransformerBlock

_OP = "tensor_parallel_llama"


def check_divisible(cfg, tp: int):
    """Refuse a config whose heads or hidden units do not split into `tp` equal parts, naming the
    field to change (before any weight is sliced). The vocabulary may split unevenly (a character
    model has 65 tokens); it needs at least one row per rank."""
    for field, n in (("n_heads", cfg.n_heads), ("n_kv_heads", cfg.n_kv_heads), ("hidden_dim (ffn_dim)", cfg.hidden_dim)):
        if n % tp:
            raise OpValueError(_OP, f"LlamaConfig.{field} divisible by the tensor-parallel size {tp} (each rank "
                               f"holds 1/{tp} of them)", f"{field.split()[0]}={n}")
    if cfg.vocab_size < tp:
        raise OpValueError(_OP, f"LlamaConfig.vocab_size at least the tensor-parallel size {tp}",
                           f"vocab_size={cfg.vocab_size}")


def _copy_norm(norm: nn.RMSNorm) -> nn.RMSNorm:
    """A replicated RMSNorm with its own copy of the weight (training this model must not change
    the single-process model it came from)."""
    new = nn.RMSNorm(norm.hidden_size, eps=norm.eps, dtype=norm.weight.dtype)
    new.weight = Parameter(Tensor(norm.weight.asnumpy().copy()), name=norm.weight.name,
                           requires_grad=norm.weight.requires_grad)
    return new


class ParallelAttention(Attention):
    """Attention on this rank's query and key/value heads: wq, wk, wv column-parallel (their rows
    are whole heads), wo row-parallel. `construct` is Attention's."""

    def __init__(self, attention: Attention, group=None):
        nn.Cell.__init__(self)
        self.group, tp, _ = group_info(_OP, group)
        for name, n in (("n_heads", attention.n_heads), ("n_kv_heads", attention.n_kv_heads)):
            if n % tp:
                raise OpValueError(_OP, f"{name} divisible by the tensor-parallel size {tp}", f"{name}={n}")
        self.n_heads, self.n_kv_heads = attention.n_heads // tp, attention.n_kv_heads // tp
        self.head_dim, self.n_rep = attention.head_dim, attention.n_rep     # unchanged by the split
        self.attention_fn = attention.attention_fn
        self.wq = ColumnParallelDense(attention.wq, self.group)
        self.wk = ColumnParallelDense(attention.wk, self.group)
        self.wv = ColumnParallelDense(attention.wv, self.group)
        self.wo = RowParallelDense(attention.wo, self.group)
        self.attn_dropout = nn.Dropout(p=attention.attn_dropout.p)
        self.resid_dropout = nn.Dropout(p=attention.resid_dropout.p)


class ParallelFeedForward(FeedForward):
    """SwiGLU on this rank's hidden units: w1 (gate) and w3 (value) column-parallel, w2
    row-parallel; silu(w1 x) * w3 x is elementwise, so it works on the slices."""

    def __init__(self, ff: FeedForward, group=None):
        nn.Cell.__init__(self)
        self.w1 = ColumnParallelDense(ff.w1, group)
        self.w2 = RowParallelDense(ff.w2, group)
        self.w3 = ColumnParallelDense(ff.w3, group)
        self.dropout = nn.Dropout(p=ff.dropout.p)


class ParallelTransformerBlock(TransformerBlock):
    """The pre-norm block with parallel attention and MLP; the norms and residuals are replicated."""

    def __init__(self, block: TransformerBlock, group=None):
        nn.Cell.__init__(self)
        self.attention_norm = _copy_norm(block.attention_norm)
        self.attention = ParallelAttention(block.attention, group)
        self.ffn_norm = _copy_norm(block.ffn_norm)
        self.feed_forward = ParallelFeedForward(block.feed_forward, group)


class TensorParallelLlama(Llama):
    """`Llama` split across the ranks of `group` (None: the world), built from a single-process
    model's weights (see the module docstring). `config` stays the whole model's config (the
    residual stream, the vocabulary of the logits and the context are the whole model's);
    `shard_config` describes what one rank holds (dim, heads and hidden units divided by p) and
    sizes the paged KV cache."""

    def __init__(self, model: Llama, group=None):
        nn.Cell.__init__(self)
        if not isinstance(model, Llama) or isinstance(model, TensorParallelLlama):
            raise OpTypeError(_OP, "a single-process Llama to split", type(model).__name__)
        cfg = model.config
        self.group, self.tp_size, self.tp_rank = group_info(_OP, group)
        check_divisible(cfg, self.tp_size)
        self.config = cfg
        self.shard_config = dataclasses.replace(
            cfg, dim=cfg.dim // self.tp_size, n_heads=cfg.n_heads // self.tp_size,
            n_kv_heads=cfg.n_kv_heads // self.tp_size, ffn_dim=cfg.hidden_dim // self.tp_size)
        self.attention_impl = model.attention_impl
        self.tok_embeddings = VocabParallelEmbedding(model.tok_embeddings, self.group)
        self.dropout = nn.Dropout(p=model.dropout.p)
        self.layers = nn.CellList([ParallelTransformerBlock(b, self.group) for b in model.layers])
        self.norm = _copy_norm(model.norm)
        if not cfg.tie_embeddings:
            # the head's rows are the vocabulary: the same split as the embedding's
            self.output = ColumnParallelDense(model.output, self.group, even_split=False)
        self.copy_to = CopyToModelParallelRegion(self.group)       # f before a tied head's matmul
        self.gather = GatherFromModelParallelRegion(self.group, self.tok_embeddings.split_sizes)
        self._rope64 = model._rope64
        self._consts = {}
        self.hf_config = dict(getattr(model, "hf_config", {}))
        self._local_logits = False

    # the ends of the network ---------------------------------------------------------------------
    def head_weight(self):
        """This rank's (vocab/p, dim) block of the output matrix."""
        return self.tok_embeddings.embedding_table if self.config.tie_embeddings else self.output.weight

    def local_logits(self, h):
        """(N, dim) -> (N, vocab/p): the logits of this rank's vocabulary slice."""
        if self.config.tie_embeddings:
            return F.matmul(self.copy_to(h), F.transpose(self.head_weight(), (1, 0)))
        return self.output(h)                              # ColumnParallelDense: f inside

    def hidden_to_logits(self, h):
        """(N, dim) -> (N, vocab): every rank the full logits (generation samples from them), or,
        inside `loss`, only this rank's slice."""
        local = self.local_logits(h)
        return local if self._local_logits else self.gather(local)

    @contextlib.contextmanager
    def _vocab_slices(self):
        """Within: forward_2d returns this rank's vocabulary slice of the logits."""
        self._local_logits = True
        try:
            yield
        finally:
            self._local_logits = False

    def loss(self, tokens, targets):
        """Mean next-token cross-entropy, as `Llama.loss`, with the vocabulary-parallel loss: no rank
        ever holds the (B*T, vocab) logits."""
        with self._vocab_slices():
            logits = self.forward_2d(tokens)
        return vocab_parallel_cross_entropy(logits, F.reshape(targets, (-1,)), self.group,
                                            vocab_start=self.tok_embeddings.vocab_start)

    # caches, checkpoints ---------------------------------------------------------------------------
    def new_paged_cache(self, num_blocks: int, block_size: int = 16, enable_prefix_caching: bool = True,
                        use_fused_ops=None):
        """A paged KV cache for this rank's key/value heads (n_kv_heads / p of them)."""
        return PagedKVCache(self.shard_config, num_blocks, block_size, enable_prefix_caching, use_fused_ops)

    def gathered_parameters(self) -> dict:
        """{name: full ndarray}: the single-process model's parameters (collective: every rank calls)."""
        return gathered_parameters(self)

    def save_pretrained(self, path):
        raise OpValueError("TensorParallelLlama.save_pretrained", "a single-process Llama (gather the "
                           "weights with gathered_parameters() and load them into Llama(config) to save)",
                           f"a model split over {self.tp_size} ranks")


def tensor_parallel_llama(model: Llama, group=None) -> TensorParallelLlama:
    """The Megatron-style tensor-parallel version of `model` over `group` (None: the world): this
    rank's slices of its weights (copies; `model` is left as it was)."""
    return TensorParallelLlama(model, group)


__all__ = ["TensorParallelLlama", "ParallelAttention", "ParallelFeedForward", "ParallelTransformerBlock",
           "tensor_parallel_llama", "check_divisible"]
