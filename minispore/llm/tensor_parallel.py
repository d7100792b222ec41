"""A LLaMA model split across ranks, Megatron-style (minispore/parallel/megatron.py): tensor
parallel, optionally sequence parallel, inside data parallel.

    init()                                          # under msrun / mpiexec -n 4
    ms.set_seed(0)
    full = Llama(cfg)                               # every rank builds (or loads) the same weights
    pc = TransformerOpParallelConfig(data_parallel=2, model_parallel=2, use_seq_parallel=True,
                                     vocab_emb_dp=False)
    model = tensor_parallel_llama(full, parallel_config=pc)   # this rank keeps its slices
    reducer = model.grad_reducer(opt.parameters)    # SP partial sums over tp, then the dp mean
    x, y = model.data_parallel_batch(x), model.data_parallel_batch(y)   # this replica's rows
    loss, grads = ms.value_and_grad(model.loss, None, opt.parameters)(x, y)
    opt(reducer(grads))                             # or, clipped to the whole model's norm:
    # opt(model.clip_grad_norm(reducer(grads), 1.0, opt.parameters))
    ids = model.generate(prompt, max_new_tokens=8)  # the same tokens as one process

`tensor_parallel_llama(full)` without a config is the pure tensor-parallel model over the world
(or over `group`): model_parallel = the group size, the vocabulary split, no sequence parallelism.

## Ranks and groups

World rank = dp_index * model_parallel + tp_index (Megatron's order, tensor parallel fastest): a
tensor-parallel group is `model_parallel` consecutive ranks (the ones that talk every layer,
placed on the closest links), a data-parallel group takes every model_parallel-th rank. With
dp=2, tp=2: tp groups {0,1} {2,3}, dp groups {0,2} {1,3}. The groups are created on every rank
(process_groups.create is collective over the world) and named after the layout, so building a
second model with the same config reuses them.

## What each rank holds (p = model_parallel)

    tok_embeddings   VocabParallelEmbedding    vocabulary rows [r V/p, (r+1) V/p) (+1 row on the
                                               first V % p ranks when V does not divide);
                     or, vocab_emb_dp=True,    the whole table (replicated, MindSpore's default)
    attention.wq     ColumnParallelDense       query heads [r H/p, (r+1) H/p)
    attention.wk/wv  ColumnParallelDense       key/value heads [r Hkv/p, (r+1) Hkv/p)
    attention.wo     RowParallelDense          the matching input block
    feed_forward.w1/w3  ColumnParallelDense    hidden units [r F/p, (r+1) F/p)
    feed_forward.w2  RowParallelDense          the matching input block
    norms            replicated
    output head      the vocabulary split of the embedding (tied) or a ColumnParallelDense;
                     replicated with vocab_emb_dp=True

Why heads split cleanly: rows [h*hd, (h+1)*hd) of wq are query head h, and with grouped-query
attention query head h reads key/value head h // (H/Hkv). Rank r's query heads [r H/p, ...) read
exactly the key/value heads [r Hkv/p, ...) it holds, so attention runs per rank with no
communication - hence n_heads and n_kv_heads must both divide by p - and each rank's KV cache
holds only those heads: 1/p of the single-process cache.

## The collectives of one block

The block applies each region's entry and exit operator ONCE (Megatron fuses QKV and gate/up
into one GEMM for the same reason): the column-parallel layers are built with copy_input=False
and the row-parallel ones with reduce_output=False.

    tensor parallel:   x -> norm -> f -> [wq wk wv | attention | wo] -> g -> + x -> norm -> f ->
                       [w1 w3 | SwiGLU | w2] -> g -> +          2 all-reduces forward, 2 backward
    + use_seq_parallel: x_r -> norm -> f-bar -> [...] -> g-bar -> + x_r -> norm -> f-bar -> [...]
                       -> g-bar -> +       2 all-gathers + 2 reduce-scatters forward, and backward

With sequence parallelism x_r is this rank's chunk of the positions (batch * s/p rows): the norms
and residual adds work on 1/p of the tokens. The ends: the vocabulary-parallel embedding's
partial lookups are reduce-scattered along the sequence (instead of all-reduced), and the final
norm's output is all-gathered along the sequence before the vocabulary-parallel head (whose
loss needs every position's logits on the ranks that share its vocabulary). With vocab_emb_dp
each rank simply looks up its own positions' ids and computes its positions' logits and loss
terms with the replicated table: the loss is the all-reduced (sum, count) of those terms.

Under sequence parallelism every TP-replicated weight (the norms; the table and head when
vocab_emb_dp) sees only this rank's positions: its gradient is a partial sum. `grad_reducer`
all-reduces those over the tp group once per step (one bucket), as Megatron does. Sequence
parallelism is what `loss` (training) runs; `forward_2d`, `construct` and generation - which
keep no activations for backward and decode one position at a time - run the same weights with
the tensor-parallel collectives, so they work (and give the same numbers) whatever the setting.

The layers are subclasses of model.py's Attention / FeedForward / TransformerBlock / Llama that
inherit `construct` (Attention, FeedForward) unchanged; so the KV caches, generation
(generate.py, contiguous and paged) and `model.generate` run on the sharded model as they are.
At the ends of the network:

* `hidden_to_logits` all-gathers the vocabulary slices, so generation sees the full logits on
  every rank and every rank samples the same token (greedy: exactly the single-process tokens);
* `loss` never gathers the logits: `vocab_parallel_cross_entropy` exchanges three numbers per
  row instead of the (rows, vocab) logits.

Gradient clipping: a rank's `sqrt(sum ||g||^2)` over its own gradients is not the model's norm
(its blocks of the split weights are part of the sum, the replicated weights are on every rank).
`global_grad_norm` sums the squares of the split parameters' blocks over the tp group and counts
the replicated ones once (tp rank 0 only; Megatron's rule), and `clip_grad_norm` clips with it,
so a clipped parallel run is the single-process clipped run (tests/parallel/test_tp_clip.py).

Dropout: the ranks draw their masks from the same seeded generator in the same order (every rank
draws equally shaped masks), so the replicated activations stay identical across ranks (a mask
applied to each rank's partial sum before the reduction is the mask of the sum: it is linear);
the masks are not the single-process ones, so equality with one process needs `dropout=0`.
Sequence parallelism refuses dropout > 0: the ranks' chunks would all draw the same mask
(Megatron forks a per-rank generator for the sequence-parallel region).

Fine-grained multi-copy (`fine_grain_interleave=2` in the config; needs model_parallel > 1 and
use_seq_parallel): `loss` runs the layers through parallel/multi_copy.py's MultiCopyDecoder, which
cuts this rank's sequence-parallel rows into copies and schedules one copy's all-gather /
reduce-scatter (non-blocking) against the other copy's computation, forward and backward. The
numbers are the one-copy run's; the communication calls double, their bytes do not change.
"""
from __future__ import annotations

import contextlib
import dataclasses

import numpy as np

from .. import nn
from ..common import process_groups as pg
from ..common.errors import OpTypeError, OpValueError
from ..common.tensor import Parameter, Tensor, from_numpy
from ..communication import comm_func
from ..nn.clip import clip_by_global_norm, sum_of_squares
from ..ops import functional as F
from ..parallel.megatron import (ColumnParallelDense, CopyToModelParallelRegion, GatherFromModelParallelRegion,
                                 GatherFromSequenceParallelRegion, ReduceFromModelParallelRegion,
                                 ReduceScatterToSequenceParallelRegion, RowParallelDense, VocabParallelEmbedding,
                                 data_parallel_block, gathered_parameters, group_info, sequence_chunk,
                                 vocab_parallel_cross_entropy)
from .config import TransformerOpParallelConfig
from .kv_cache import PagedKVCache
from ..parallel.multi_copy import MultiCopyDecoder, check_fine_grain_interleave
from .model import Attention, FeedForward, Llama, TransformerBlock, residual_rms_norm, rope

_OP = "tensor_parallel_llama"


def check_divisible(cfg, tp: int, vocab_parallel: bool = True):
    """Refuse a config whose heads or hidden units do not split into `tp` equal parts, naming the
    field to change (before any weight is sliced). A split vocabulary may divide unevenly (a
    character model has 65 tokens) but needs at least one row per rank."""
    for field, n in (("n_heads", cfg.n_heads), ("n_kv_heads", cfg.n_kv_heads), ("hidden_dim (ffn_dim)", cfg.hidden_dim)):
        if n % tp:
            raise OpValueError(_OP, f"LlamaConfig.{field} divisible by the tensor-parallel size {tp} (each rank "
                               f"holds 1/{tp} of them)", f"{field.split()[0]}={n}")
    if vocab_parallel and cfg.vocab_size < tp:
        raise OpValueError(_OP, f"LlamaConfig.vocab_size at least the tensor-parallel size {tp}",
                           f"vocab_size={cfg.vocab_size}")


# ------------------------------------------------------------------------------------------------
# the parallel config and its process groups
def as_parallel_config(config) -> TransformerOpParallelConfig:
    """A TransformerOpParallelConfig from itself or a dict (a yaml `parallel_config:` block),
    refusing what this module cannot run yet (pipeline parallelism)."""
    if isinstance(config, dict):
        config = TransformerOpParallelConfig.from_dict(config)
    if not isinstance(config, TransformerOpParallelConfig):
        raise OpTypeError(_OP, "'parallel_config' as a TransformerOpParallelConfig or a dict of its fields",
                          type(config).__name__)
    for name in ("pipeline_stage", "micro_batch_num"):
        if getattr(config, name) != 1:
            raise OpValueError(_OP, f"parallel_config.{name} = 1 (pipeline parallelism is not built yet: "
                               "data_parallel x model_parallel only)", f"{name}={getattr(config, name)}")
    return config


def _group(name, ranks) -> str:
    return pg.ensure(name, ranks, _OP)


def parallel_groups(config: TransformerOpParallelConfig):
    """(tensor-parallel group name, data-parallel group name or None) of THIS rank, creating
    every group of the layout (rank = dp_index * model_parallel + tp_index; see the module
    docstring). A whole-world tp group is the world itself."""
    world = pg.world()
    dp, tp = config.data_parallel, config.model_parallel
    if dp * tp != world.size:
        raise OpValueError(_OP, f"data_parallel x model_parallel equal to the number of processes ({world.size})",
                           f"data_parallel={dp} x model_parallel={tp} = {dp * tp}")
    dp_index, tp_index = divmod(world.rank, tp)
    tag = f"llama_dp{dp}_tp{tp}"
    if dp == 1:
        return pg.HCCL_WORLD_COMM_GROUP, None
    tp_groups = [_group(f"{tag}_tensor_parallel_{d}", [d * tp + t for t in range(tp)]) for d in range(dp)]
    dp_groups = [_group(f"{tag}_data_parallel_{t}", [d * tp + t for d in range(dp)]) for t in range(tp)]
    return tp_groups[dp_index], dp_groups[tp_index]


# ------------------------------------------------------------------------------------------------
# replicated copies (training the parallel model must not change the model it came from)
def _replica(p: Parameter) -> Parameter:
    return Parameter(Tensor(p.asnumpy().copy()), name=p.name, requires_grad=p.requires_grad)


def _copy_norm(norm: nn.RMSNorm) -> nn.RMSNorm:
    new = nn.RMSNorm(norm.hidden_size, eps=norm.eps, dtype=norm.weight.dtype)
    new.weight = _replica(norm.weight)
    return new


def _copy_embedding(emb: nn.Embedding) -> nn.Embedding:
    new = nn.Embedding(emb.vocab_size, emb.embedding_size, embedding_table="zeros", dtype=emb.dtype)
    new.embedding_table = _replica(emb.embedding_table)
    return new


def _copy_dense(dense: nn.Dense) -> nn.Dense:
    new = nn.Dense(dense.in_channels, dense.out_channels, weight_init="zeros", has_bias=dense.has_bias,
                   dtype=dense.weight.dtype)
    new.weight = _replica(dense.weight)
    if dense.has_bias:
        new.bias = _replica(dense.bias)
    new.activation = dense.activation
    return new


# ------------------------------------------------------------------------------------------------
# the layers
class ParallelAttention(Attention):
    """Attention on this rank's query and key/value heads: wq, wk, wv column-parallel (their rows
    are whole heads), wo row-parallel. `construct` is Attention's; it takes the region's input
    (after the block's f or f-bar) and returns wo's PARTIAL product (the block's g or g-bar sums it)."""

    def __init__(self, attention: Attention, group=None):
        nn.Cell.__init__(self)
        self.group, tp, _ = group_info(_OP, group)
        for name, n in (("n_heads", attention.n_heads), ("n_kv_heads", attention.n_kv_heads)):
            if n % tp:
                raise OpValueError(_OP, f"{name} divisible by the tensor-parallel size {tp}", f"{name}={n}")
        self.n_heads, self.n_kv_heads = attention.n_heads // tp, attention.n_kv_heads // tp
        self.head_dim, self.n_rep = attention.head_dim, attention.n_rep     # unchanged by the split
        self.attention_fn = attention.attention_fn
        self.wq = ColumnParallelDense(attention.wq, self.group, copy_input=False)
        self.wk = ColumnParallelDense(attention.wk, self.group, copy_input=False)
        self.wv = ColumnParallelDense(attention.wv, self.group, copy_input=False)
        self.wo = RowParallelDense(attention.wo, self.group, reduce_output=False)
        self.attn_dropout = nn.Dropout(p=attention.attn_dropout.p)
        self.resid_dropout = nn.Dropout(p=attention.resid_dropout.p)

    def core(self, q, k, v, batch, rope_q, rope_k):
        """The part of `construct` between the projections (q, k, v: this rank's heads for all
        batch * seq rows, (batch, position)-ordered) and wo: rotary embeddings, the causal attention
        of each head, the heads joined back into rows. Fine-grained multi-copy
        (parallel/multi_copy.py) runs it ONCE on the copies' joined Q/K/V; the same ops in the
        same order as Attention.construct (training: no cache)."""
        n = q.shape[0]
        seq = n // batch
        q = rope(F.reshape(q, (batch, seq, self.n_heads, self.head_dim)), *rope_q)
        k = rope(F.reshape(k, (batch, seq, self.n_kv_heads, self.head_dim)), *rope_k)
        v = F.reshape(v, (batch, seq, self.n_kv_heads, self.head_dim))
        q, k, v = (F.transpose(t, (0, 2, 1, 3)) for t in (q, k, v))
        out = self.attention_fn(q, k, v, causal=True, discard=None, dropout=self.attn_dropout)
        return F.reshape(F.transpose(out, (0, 2, 1, 3)), (n, self.n_heads * self.head_dim))


class ParallelFeedForward(FeedForward):
    """SwiGLU on this rank's hidden units: w1 (gate) and w3 (value) column-parallel, w2
    row-parallel; silu(w1 x) * w3 x is elementwise, so it works on the slices. Returns w2's
    partial product (the block reduces it)."""

    def __init__(self, ff: FeedForward, group=None):
        nn.Cell.__init__(self)
        self.w1 = ColumnParallelDense(ff.w1, group, copy_input=False)
        self.w2 = RowParallelDense(ff.w2, group, reduce_output=False)
        self.w3 = ColumnParallelDense(ff.w3, group, copy_input=False)
        self.dropout = nn.Dropout(p=ff.dropout.p)


class ParallelTransformerBlock(TransformerBlock):
    """The pre-norm block with parallel attention and MLP, and the regions' operators written out:
    `construct` is tensor parallel (replicated norms and residuals, f / g), and
    `sequence_parallel_forward` splits the norm/residual region along the sequence (f-bar / g-bar)."""

    def __init__(self, block: TransformerBlock, group=None):
        nn.Cell.__init__(self)
        self.attention_norm = _copy_norm(block.attention_norm)
        self.attention = ParallelAttention(block.attention, group)
        self.ffn_norm = _copy_norm(block.ffn_norm)
        self.feed_forward = ParallelFeedForward(block.feed_forward, group)
        self.copy_to = CopyToModelParallelRegion(group)                       # f
        self.reduce = ReduceFromModelParallelRegion(group)                    # g
        self.seq_gather = GatherFromSequenceParallelRegion(group)             # f-bar
        self.seq_reduce_scatter = ReduceScatterToSequenceParallelRegion(group)  # g-bar

    def construct(self, x, batch, rope_q, rope_k, cache=None):
        """x: (batch*seq, dim), replicated on every rank of the group."""
        a = self.reduce(self.attention(self.copy_to(self.attention_norm(x)), batch, rope_q, rope_k, cache))
        normed, h = residual_rms_norm(self.ffn_norm, x, a)       # h = x + a; normed = ffn_norm(h)
        return h + self.reduce(self.feed_forward(self.copy_to(normed)))

    def sequence_parallel_forward(self, x, batch, rope_q, rope_k):
        """x: this rank's chunk of the positions, (batch * seq/p, dim); returns the same chunk of
        the block's output. The norms and the residual adds see only the chunk."""
        full = self.seq_gather(self.attention_norm(x), batch)                 # (batch*seq, dim)
        a = self.seq_reduce_scatter(self.attention(full, batch, rope_q, rope_k), batch)
        normed, h = residual_rms_norm(self.ffn_norm, x, a)
        return h + self.seq_reduce_scatter(self.feed_forward(self.seq_gather(normed, batch)), batch)


class TensorParallelLlama(Llama):
    """`Llama` split across ranks, built from a single-process model's weights (see the module
    docstring). `config` stays the whole model's config (the residual stream, the vocabulary of
    the logits and the context are the whole model's); `shard_config` describes what one rank
    holds (heads and hidden units divided by model_parallel) and sizes the paged KV cache;
    `parallel_config` is the layout (a TransformerOpParallelConfig)."""

    def __init__(self, model: Llama, group=None, parallel_config=None):
        nn.Cell.__init__(self)
        if not isinstance(model, Llama) or isinstance(model, TensorParallelLlama):
            raise OpTypeError(_OP, "a single-process Llama to split", type(model).__name__)
        cfg = model.config
        if parallel_config is None:
            # the pure tensor-parallel model over `group`: its size is model_parallel
            tp_group, dp_group = group, None
            name, size, _ = group_info(_OP, group)
            parallel_config = TransformerOpParallelConfig(model_parallel=size, vocab_emb_dp=False)
        else:
            if group is not None:
                raise OpValueError(_OP, "either 'group' (tensor parallel over it) or 'parallel_config' (whose "
                                   "groups are built here)", f"both (group={group!r})")
            parallel_config = as_parallel_config(parallel_config)
            tp_group, dp_group = parallel_groups(parallel_config)
        self.parallel_config = parallel_config
        self.group, self.tp_size, self.tp_rank = group_info(_OP, tp_group)
        if dp_group is None:
            self.dp_group, self.dp_size, self.dp_rank = None, 1, 0
        else:
            self.dp_group, self.dp_size, self.dp_rank = group_info(_OP, dp_group)
        self.use_seq_parallel = parallel_config.use_seq_parallel
        self.vocab_emb_dp = parallel_config.vocab_emb_dp
        self.fine_grain_interleave = check_fine_grain_interleave(parallel_config, self.tp_size)
        if getattr(cfg, "num_experts", 0):
            # the parallel FFN splits one SwiGLU's columns; experts are split by parallel/expert_parallel.py
            raise OpValueError(_OP, "LlamaConfig.num_experts = 0 for tensor parallelism (MoE models: "
                               "minispore.parallel.expert_parallel)", f"num_experts={cfg.num_experts}")
        check_divisible(cfg, self.tp_size, vocab_parallel=not self.vocab_emb_dp)
        if self.use_seq_parallel and cfg.dropout > 0:
            raise OpValueError(_OP, "LlamaConfig.dropout = 0 with use_seq_parallel (every rank's sequence chunk "
                               "would draw the same dropout mask)", f"dropout={cfg.dropout}")
        self.config = cfg
        self.shard_config = dataclasses.replace(
            cfg, dim=cfg.dim // self.tp_size, n_heads=cfg.n_heads // self.tp_size,
            n_kv_heads=cfg.n_kv_heads // self.tp_size, ffn_dim=cfg.hidden_dim // self.tp_size)
        self.attention_impl = model.attention_impl
        if self.vocab_emb_dp:
            self.tok_embeddings = _copy_embedding(model.tok_embeddings)
        else:
            self.tok_embeddings = VocabParallelEmbedding(model.tok_embeddings, self.group)
        self.dropout = nn.Dropout(p=model.dropout.p)
        self.layers = nn.CellList([ParallelTransformerBlock(b, self.group) for b in model.layers])
        # fine-grained multi-copy: the layers' sequence-parallel forward in copies (a plain object,
        # not a Cell: it reads the layers' own parameters)
        self.multi_copy = (MultiCopyDecoder(self.layers, self.fine_grain_interleave, self.group)
                           if self.fine_grain_interleave > 1 else None)
        self.norm = _copy_norm(model.norm)
        if not cfg.tie_embeddings:
            if self.vocab_emb_dp:
                self.output = _copy_dense(model.output)
            else:   # the head's rows are the vocabulary: the same split as the embedding's; f is ours
                self.output = ColumnParallelDense(model.output, self.group, even_split=False, copy_input=False)
        self.copy_to = CopyToModelParallelRegion(self.group)       # f before the vocabulary-parallel head
        self.reduce = ReduceFromModelParallelRegion(self.group)    # g: the SP loss's (sum, count)
        if not self.vocab_emb_dp:
            self.gather = GatherFromModelParallelRegion(self.group, self.tok_embeddings.split_sizes)
        self.seq_gather = GatherFromSequenceParallelRegion(self.group)
        self.seq_reduce_scatter = ReduceScatterToSequenceParallelRegion(self.group)
        self._rope64 = model._rope64
        self._consts = {}
        self.hf_config = dict(getattr(model, "hf_config", {}))
        self._local_logits = False

    # the ends of the network ---------------------------------------------------------------------
    def head_weight(self):
        """This rank's (vocab/p, dim) block of the output matrix (the whole matrix with vocab_emb_dp)."""
        return self.tok_embeddings.embedding_table if self.config.tie_embeddings else self.output.weight

    def local_logits(self, h, entered=False):
        """(N, dim) -> (N, vocab/p): the logits of this rank's vocabulary slice (all of them with
        vocab_emb_dp). `entered`: h already came through the region's entry operator (the
        sequence all-gather), so no f here."""
        if self.vocab_emb_dp:
            return self.output(h) if not self.config.tie_embeddings else \
                F.matmul(h, F.transpose(self.head_weight(), (1, 0)))
        if not entered:
            h = self.copy_to(h)                               # f: every rank's slice reads all of h
        if self.config.tie_embeddings:
            return F.matmul(h, F.transpose(self.head_weight(), (1, 0)))
        return self.output(h)

    def hidden_to_logits(self, h):
        """(N, dim) -> (N, vocab): every rank the full logits (generation samples from them), or,
        inside `loss`, only this rank's slice."""
        local = self.local_logits(h)
        return local if self._local_logits or self.vocab_emb_dp else self.gather(local)

    @contextlib.contextmanager
    def _vocab_slices(self):
        """Within: forward_2d returns this rank's vocabulary slice of the logits."""
        self._local_logits = True
        try:
            yield
        finally:
            self._local_logits = False

    def loss(self, tokens, targets):
        """Mean next-token cross-entropy over this data-parallel replica's rows, as `Llama.loss`:
        the vocabulary-parallel loss (no rank ever holds the (B*T, vocab) logits), or with
        vocab_emb_dp the plain one; sequence parallel when the config says so."""
        if self.use_seq_parallel:
            return self._sequence_parallel_loss(tokens, targets)
        with self._vocab_slices():
            logits = self.forward_2d(tokens)
        if self.vocab_emb_dp:
            return F.cross_entropy(logits, F.reshape(targets, (-1,)))
        return vocab_parallel_cross_entropy(logits, F.reshape(targets, (-1,)), self.group,
                                            vocab_start=self.tok_embeddings.vocab_start)

    def _sequence_parallel_loss(self, tokens, targets):
        """The loss with the norm/residual regions split along the sequence (module docstring)."""
        op = "TensorParallelLlama.loss"
        self._check_tokens(tokens)
        batch, seq = tokens.shape
        max_len, p, r, dim = self.config.max_seq_len, self.tp_size, self.tp_rank, self.config.dim
        if seq == 0 or seq > max_len:
            raise OpValueError("Llama", f"1 to {max_len} positions (max_seq_len {max_len})", f"{seq}")
        if not isinstance(targets, Tensor) or tuple(targets.shape) != (batch, seq):
            raise OpValueError(op, f"targets of the tokens' shape {(batch, seq)}",
                               f"shape {tuple(getattr(targets, 'shape', ()))}")
        # into the sequence-parallel region: this rank's positions [r s/p, (r+1) s/p)
        if self.vocab_emb_dp:
            h = self.tok_embeddings(sequence_chunk(op, tokens, 1, p, r))          # (B, s/p, dim), local
        else:
            if seq % p:
                sequence_chunk(op, tokens, 1, p, r)                                 # the error
            rows = F.reshape(self.tok_embeddings.local_rows(tokens), (batch * seq, dim))
            h = self.seq_reduce_scatter(rows, batch)                               # g-bar instead of g
        h = F.reshape(self.dropout(h), (-1, dim))
        cos, sin, cos_q, sin_q = self._constants(h.dtype.np)
        rope_q = (from_numpy(cos_q[:seq]), from_numpy(sin_q[:seq]))              # attention sees all positions
        rope_k = (from_numpy(cos[:seq]), from_numpy(sin[:seq]))
        if self.multi_copy is not None:                                            # fine_grain_interleave
            h = self.multi_copy(h, batch, rope_q, rope_k)
        else:
            for layer in self.layers:
                h = layer.sequence_parallel_forward(h, batch, rope_q, rope_k)
        h = self.norm(h)                                                           # still the chunk
        if self.vocab_emb_dp:
            # every rank the whole vocabulary for its own positions: sum the loss terms, count the rows
            t = F.reshape(sequence_chunk(op, targets, 1, p, r), (-1,))
            total = F.cross_entropy(self.local_logits(h), t, reduction="sum")
            count = F.stop_gradient(F.sum(F.cast(t != -100, total.dtype)))
            both = self.reduce(F.stack([total, count]))                            # g: one all-reduce
            return both[0] / both[1]
        # the vocabulary-parallel head needs every position on the ranks sharing the vocabulary
        logits = self.local_logits(self.seq_gather(h, batch), entered=True)        # f-bar replaces f
        return vocab_parallel_cross_entropy(logits, F.reshape(targets, (-1,)), self.group,
                                            vocab_start=self.tok_embeddings.vocab_start)

    # data parallel ---------------------------------------------------------------------------------
    def data_parallel_batch(self, x):
        """This replica's rows of a global batch (axis 0 cut into data_parallel equal blocks, block
        dp_index): what its loss and gradients are computed on."""
        return data_parallel_block("TensorParallelLlama.data_parallel_batch", x, self.dp_size, self.dp_rank)

    def data_parallel_mean(self, value):
        """The mean of a replica-local value (a loss) over the data-parallel group: the global
        batch's value (equal local batches). For reporting; not differentiated."""
        value = value if isinstance(value, Tensor) else Tensor(np.asarray(value, np.float64))
        if self.dp_size == 1:
            return value
        flat = F.reshape(F.stop_gradient(value), (-1,))                 # MPI buffers: at least 1-d
        total = comm_func.all_reduce(flat, "sum", self.dp_group)[0]
        return F.reshape(total, tuple(value.shape)) / self.dp_size

    def sequence_parallel_partial_parameters(self) -> list:
        """The parameters whose gradient from `loss` is a partial sum over this rank's positions:
        under sequence parallelism, every parameter replicated over the tensor-parallel group
        (norms; the table and head with vocab_emb_dp). Empty without sequence parallelism."""
        if not self.use_seq_parallel or self.tp_size == 1:
            return []
        split = self._split_parameter_ids()
        return [p for p in self.trainable_params() if id(p) not in split]

    def _split_parameter_ids(self) -> set:
        """ids of the parameters that are one rank's block of a larger tensor: those a Megatron
        layer lists in its `tensor_parallel_axes` (the others are replicated over the tp group)."""
        split = set()
        for _, cell in self.cells_and_names():
            for attr in getattr(type(cell), "tensor_parallel_axes", {}):
                p = getattr(cell, attr, None)
                if p is not None:
                    split.add(id(p))
        return split

    def grad_reducer(self, parameters):
        """A ParallelGradReducer for `parameters` (usually optimizer.parameters): what to apply to
        value_and_grad(model.loss, ...)'s gradients before the optimizer step."""
        return ParallelGradReducer(self, parameters)

    # gradient clipping -----------------------------------------------------------------------------
    def global_grad_norm(self, grads, parameters=None) -> Tensor:
        """The whole (single-process) model's global L2 norm of `grads`, one per `parameters`
        (default `trainable_params()`), on every rank. Collective over the tensor-parallel group.

        A per-rank `sqrt(sum ||g||^2)` is not that norm: a split parameter's gradient is spread
        over the tp ranks (its squares must be summed over them), while a replicated parameter's
        gradient is the same whole tensor on every tp rank (summing it would count it tp times).
        Megatron's rule: each rank sums the squares of its blocks of the split parameters
        (`tensor_parallel_axes`), only tp rank 0 adds the replicated ones, and one all-reduce (a
        single number) over the tp group gives the squared norm. Pass the gradients AFTER
        `grad_reducer` (sequence-parallel partial sums completed, data-parallel mean taken): they
        are then the same on every data-parallel replica, so the tp group's sum is the model's.
        float64 gradients give a float64 norm (float32 at least)."""
        op = "TensorParallelLlama.global_grad_norm"
        params = self._check_grads(op, grads, parameters)
        split = self._split_parameter_ids()
        mine = [g for p, g in zip(params, grads) if id(p) in split]
        if self.tp_rank == 0:                     # the replicated ones, counted once
            mine += [g for p, g in zip(params, grads) if id(p) not in split]
        local = sum_of_squares(mine)
        if local is None:                         # nothing on this rank: a zero of the norm's dtype
            local = F.zeros((), sum_of_squares([grads[0]]).dtype)
        if self.tp_size > 1:
            local = F.reshape(comm_func.all_reduce(F.reshape(local, (1,)), "sum", self.group)[0], ())
        return F.sqrt(local)

    def clip_grad_norm(self, grads, clip_norm, parameters=None) -> tuple:
        """`nn.clip_by_global_norm` with the whole model's norm (`global_grad_norm`): every rank
        scales its gradients by the same factor clip_norm / max(norm, clip_norm), so the clipped
        run is the single-process clipped run. Collective over the tensor-parallel group; pass
        the gradients after `grad_reducer`."""
        norm = self.global_grad_norm(grads, parameters)
        return clip_by_global_norm(tuple(grads), clip_norm, use_norm=norm)

    def _check_grads(self, op, grads, parameters):
        params = list(self.trainable_params() if parameters is None else parameters)
        if not isinstance(grads, (tuple, list)) or len(grads) != len(params):
            got = f"{len(grads)} gradients" if isinstance(grads, (tuple, list)) else type(grads).__name__
            raise OpValueError(op, f"a tuple of {len(params)} gradients (one per parameter)", got)
        own = {id(p) for _, p in self.parameters_and_names()}
        for i, (p, g) in enumerate(zip(params, grads)):
            if id(p) not in own:
                raise OpValueError(op, "parameters of this model (the optimizer's parameters)",
                                   f"'{getattr(p, 'name', type(p).__name__)}' at position {i}")
            if not isinstance(g, Tensor) or tuple(g.shape) != tuple(p.shape):
                raise OpValueError(op, f"the gradient of '{p.name}' with this rank's shape {tuple(p.shape)}",
                                   f"{type(g).__name__} of shape {tuple(getattr(g, 'shape', ()))}")
        return params

    # caches, checkpoints ---------------------------------------------------------------------------
    def new_paged_cache(self, num_blocks: int, block_size: int = 16, enable_prefix_caching: bool = True,
                        use_fused_ops=None):
        """A paged KV cache for this rank's key/value heads (n_kv_heads / p of them)."""
        return PagedKVCache(self.shard_config, num_blocks, block_size, enable_prefix_caching, use_fused_ops)

    def gathered_parameters(self) -> dict:
        """{name: full ndarray}: the single-process model's parameters (collective over the tp group)."""
        return gathered_parameters(self)

    def save_pretrained(self, path):
        raise OpValueError("TensorParallelLlama.save_pretrained", "a single-process Llama (gather the "
                           "weights with gathered_parameters() and load them into Llama(config) to save)",
                           f"a model split over {self.tp_size} ranks")


class ParallelGradReducer(nn.Cell):
    """The gradient communication of one training step of a TensorParallelLlama, in order:

    1. under sequence parallelism, the partial gradients of the TP-replicated weights summed over
       the tensor-parallel group (`sequence_parallel_partial_parameters`; one bucket);
    2. with data_parallel > 1, every gradient averaged over the data-parallel group (the
       replicas' local batches are equal, so the mean is the global batch's gradient).

    Both are `nn.DistributedGradReducer`s over the model's groups (buckets, as configured by
    comm_fusion). With neither (pure tensor parallel) it returns the gradients unchanged.
    """

    def __init__(self, model: TensorParallelLlama, parameters):
        super().__init__(auto_prefix=False)
        if not isinstance(model, TensorParallelLlama):
            raise OpTypeError("ParallelGradReducer", "a TensorParallelLlama", type(model).__name__)
        params = tuple(parameters)
        partial = {id(p) for p in model.sequence_parallel_partial_parameters()}
        d = self.__dict__                     # plain attributes: not this cell's parameters
        d["_partial_index"] = [i for i, p in enumerate(params) if id(p) in partial]
        d["tp_reducer"] = (nn.DistributedGradReducer([params[i] for i in self._partial_index], mean=False,
                                                     group=model.group)
                           if self._partial_index else None)
        d["dp_reducer"] = (nn.DistributedGradReducer(params, mean=True, group=model.dp_group)
                           if model.dp_size > 1 else None)

    def construct(self, grads):
        grads = tuple(grads)
        if self.tp_reducer is not None:
            summed = self.tp_reducer(tuple(grads[i] for i in self._partial_index))
            grads = list(grads)
            for i, g in zip(self._partial_index, summed):
                grads[i] = g
            grads = tuple(grads)
        if self.dp_reducer is not None:
            grads = self.dp_reducer(grads)
        return grads


def tensor_parallel_llama(model: Llama, group=None, parallel_config=None) -> TensorParallelLlama:
    """The Megatron-style parallel version of `model`: this rank's slices of its weights (copies;
    `model` is left as it was). `parallel_config` (a TransformerOpParallelConfig or a dict of its
    fields) gives data_parallel x model_parallel, use_seq_parallel and vocab_emb_dp; without it,
    tensor parallel over `group` (None: the world) with the vocabulary split."""
    return TensorParallelLlama(model, group, parallel_config)


__all__ = ["TensorParallelLlama", "ParallelAttention", "ParallelFeedForward", "ParallelTransformerBlock",
           "ParallelGradReducer", "tensor_parallel_llama", "check_divisible", "parallel_groups",
           "as_parallel_config"]
