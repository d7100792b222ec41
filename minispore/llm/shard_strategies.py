"""Tensor and sequence parallelism for the LLaMA of model.py as *shard strategies* (semi-auto parallel).

MindSpore Transformers does not rewrite a model to parallelize it: every layer has a
`shard(parallel_config)` method that annotates its operators and weights with split strategies
derived from `parallel_config` (dp = data_parallel, mp = model_parallel), and the compiler
(`parallel_mode="semi_auto_parallel"`) partitions the one graph and inserts the communication.
`shard_llama(model, parallel_config)` does that for minispore's `Llama`; the pass in
graph/parallel/ (strategies -> propagate -> partition) does the rest. Compare llm/tensor_parallel.py,
which writes the same Megatron scheme by hand in PyNative (its own column/row-parallel cells and
explicit collectives): the same numbers, the same forward communication (and, without sequence
parallelism, the same backward communication of the blocks), and no model code changed here.

The strategy set, on the device matrix `Layout((dp, mp), ("dp", "mp"))` (tensor parallel fastest:
rank = dp_index * mp + mp_index, as llm/tensor_parallel.py numbers them):

=======================  ======================================  =================================
where                    what is split                           communication the pass inserts
=======================  ======================================  =================================
token ids (the          batch over dp                           none (full_batch: a local slice)
embedding's input)
wq / wk / wv, w1 / w3    weight (out, in) rows over mp           (column parallel) none forward
                         (query and key/value heads, FFN units)
wo, w2                   weight columns over mp                  (row parallel) an all-reduce of
                                                                 the partial sum (forward)
embedding table          vocabulary over mp (vocab_emb_dp=False) an all-reduce of the masked lookup
                         or whole (vocab_emb_dp=True)
output head weight       vocabulary over mp (vocab_emb_dp=False) the logits gathered for the loss
                         or whole (vocab_emb_dp=True)            (with SP: the loss runs on the
                                                                 SP rows, the weight is gathered)
with use_seq_parallel    every block's input rows (the residual  all-gather before wq|wk|wv and
                         stream, B*T) over (dp, mp); the         w1|w3, reduce-scatter after wo
                         attention / FFN outputs (out_strategy)  and w2 instead of all-reduces
                         back to those rows                      (the same ring bytes)
=======================  ======================================  =================================

Everything between the annotated points follows by sharding propagation (ops/sharding_rules.py):
the heads' split travels through the reshapes, RoPE, the transposes and the attention core
(`flash_attention_score`'s rule splits batch and head groups, the naive core's batched matmuls
the same), and the batch split through the whole network. The gradients of the replicated weights
(norms, whole embedding) are reduced by the pass where the optimizer reads them.

Checks done here, before any graph exists: dp * mp must be the device count the semi-auto
context will use (when `device_num` is known), and n_heads, n_kv_heads (grouped-query
attention: every rank needs whole key/value heads), the FFN hidden size, the vocabulary (when it
is split) divisible by mp.

What is not here:

* Megatron's vocabulary-parallel cross-entropy (a row's log-sum-exp from the local vocabulary
  slice and three small all-reduces) needs a loss written from sharded pieces and a "max"
  partial, which layouts do not have; `F.cross_entropy` requires its class dim whole, so with a
  split head the pass gathers the logits (or, with SP, the weight) before the loss.
* The backward under sequence parallelism is correct but not Megatron's: the pass partitions the
  joint (forward + backward) graph, and the backward nodes carry no strategies, so their layouts
  are each rule's local choice (some all-to-alls and weight gathers where Megatron all-gathers
  the activation gradient); about twice Megatron's step bytes on the tests' tiny model.
"""
from __future__ import annotations

from ..common.errors import OpTypeError, OpValueError
from ..parallel.layout import Layout
from .config import LlamaConfig, TransformerOpParallelConfig

NONE = "None"


def _device_layout(pc: TransformerOpParallelConfig) -> Layout:
    """The stage's device matrix: (dp, mp), model parallel fastest."""
    return Layout((pc.data_parallel, pc.model_parallel), ("dp", "mp"))


def _check_config(op, model, pc):
    from .model import Llama
    if not isinstance(model, Llama):
        raise OpTypeError(op, "a minispore.llm Llama", type(model).__name__)
    if not isinstance(pc, TransformerOpParallelConfig):
        raise OpTypeError(op, "a TransformerOpParallelConfig as parallel_config", type(pc).__name__)
    if pc.pipeline_stage != 1 or pc.micro_batch_num != 1:
        raise OpValueError(op, "pipeline_stage 1 and micro_batch_num 1 (pipelines are nn.PipelineCell, "
                           "not shard strategies)",
                           f"pipeline_stage={pc.pipeline_stage}, micro_batch_num={pc.micro_batch_num}")
    if pc.fine_grain_interleave != 1 or pc.expert_parallel != 1:
        # multi-copy is the explicit Megatron model's schedule (parallel/multi_copy.py), expert
        # parallel parallel/expert_parallel.py: neither is expressed as shard strategies here
        raise OpValueError(op, "fine_grain_interleave 1 and expert_parallel 1 (multi-copy: "
                           "llm.tensor_parallel; experts: parallel.expert_parallel)",
                           f"fine_grain_interleave={pc.fine_grain_interleave}, expert_parallel={pc.expert_parallel}")
    cfg: LlamaConfig = model.config
    mp = pc.model_parallel
    sizes = [("n_heads", cfg.n_heads), ("n_kv_heads", cfg.n_kv_heads), ("the FFN hidden size", cfg.hidden_dim)]
    if not pc.vocab_emb_dp:
        sizes.append(("vocab_size", cfg.vocab_size))
    for what, size in sizes:
        if size % mp:
            extra = (" (grouped-query attention: every rank holds whole key/value heads)"
                     if what == "n_kv_heads" else "")
            raise OpValueError(op, f"{what} divisible by model_parallel={mp}{extra}", f"{what}={size}")
    from ..common import auto_parallel_context as apc
    device_num = apc.get_auto_parallel_context("device_num")
    if isinstance(device_num, int) and device_num > 1 and device_num != pc.world_size:
        raise OpValueError(op, f"data_parallel * model_parallel equal to the context's device_num ({device_num})",
                           f"{pc.data_parallel} * {pc.model_parallel} = {pc.world_size}")


def _plan(cell, wanted: dict) -> dict:
    """{the cell's own parameter name: layout} for `wanted` {suffix: layout}."""
    names = [name for name, _ in cell.parameters_and_names()]
    plan = {}
    for suffix, layout in wanted.items():
        hits = [n for n in names if n == suffix or n.endswith("." + suffix)]
        if len(hits) != 1:
            raise OpValueError("shard_llama", f"one parameter named '{suffix}' in {type(cell).__name__}",
                               f"{hits or 'none'} among {names}")
        plan[hits[0]] = layout
    return plan


def _rows(pc, seq_parallel=False):
    """The layout of a (B*T, dim) activation: rows over dp, and with sequence parallelism over
    (dp, mp) (batch-major rows: each rank holds a contiguous run of one row's positions)."""
    return _device_layout(pc)(("dp", "mp") if seq_parallel else "dp", NONE)


def _sp_out(pc):
    """With sequence parallelism a row-parallel output (a partial sum over mp) leaves its cell
    reduce-scattered to the sequence-parallel rows (Megatron's placement), instead of whatever
    its first consumer would ask; without, None (the residual add settles it: an all-reduce)."""
    return (_rows(pc, seq_parallel=True),) if pc.use_seq_parallel else None


def shard_attention(attention, pc: TransformerOpParallelConfig):
    """Megatron's attention split: the (B*T, dim) input consumed with its rows over dp (with
    sequence parallelism this is where the rows are all-gathered over mp), wq/wk/wv column
    parallel (their (out, in) weights' rows - whole query and key/value heads - over mp), wo row
    parallel (its columns over mp: the output is a partial sum the next consumer reduces)."""
    lay = _device_layout(pc)
    plan = {f"{w}.weight": lay("mp", NONE) for w in ("wq", "wk", "wv")}
    plan["wo.weight"] = lay(NONE, "mp")
    return attention.shard(in_strategy=(_rows(pc),), out_strategy=_sp_out(pc), parameter_plan=_plan(attention, plan))


def shard_feed_forward(feed_forward, pc: TransformerOpParallelConfig):
    """SwiGLU's split: input rows over dp (gathered over mp with SP), w1 (gate) and w3 (value)
    column parallel, w2 row parallel."""
    lay = _device_layout(pc)
    plan = {"w1.weight": lay("mp", NONE), "w3.weight": lay("mp", NONE), "w2.weight": lay(NONE, "mp")}
    return feed_forward.shard(in_strategy=(_rows(pc),), out_strategy=_sp_out(pc),
                              parameter_plan=_plan(feed_forward, plan))


def shard_embedding(embedding, pc: TransformerOpParallelConfig):
    """The token embedding: ids (B, T) with the batch over dp; the table split along the
    vocabulary over mp (vocab_emb_dp=False: each rank looks up the ids it holds, a partial sum
    all-reduced - or reduce-scattered to the sequence-parallel rows) or whole (vocab_emb_dp=True)."""
    lay = _device_layout(pc)
    table = lay(NONE if pc.vocab_emb_dp else "mp", NONE)
    return embedding.shard(in_strategy=(lay("dp", NONE),), parameter_plan=_plan(embedding, {"embedding_table": table}))


def shard_head(head, pc: TransformerOpParallelConfig):
    """The untied output head's (vocab, dim) weight split along the vocabulary over mp
    (vocab_emb_dp=False: column parallel, the logits split by vocabulary) or whole. Only the
    weight's plan: `Llama.hidden_to_logits` reads the weight itself (tied or not) rather than
    calling the Dense cell, and its input arrives in whatever layout the final norm left."""
    lay = _device_layout(pc)
    weight = lay(NONE if pc.vocab_emb_dp else "mp", NONE)
    return head.shard(in_strategy=(None,), parameter_plan=_plan(head, {"weight": weight}))


def shard_llama(model, parallel_config: TransformerOpParallelConfig):
    """Annotate `model` (a minispore.llm `Llama`) for semi-auto parallel training, MindSpore
    Transformers' way: `parallel_config` (a TransformerOpParallelConfig: data_parallel,
    model_parallel, use_seq_parallel, vocab_emb_dp) becomes Cell.shard strategies and parameter
    plans (ms.Layout on the (dp, mp) device matrix) on the embedding, every block's attention and
    feed-forward (and, with use_seq_parallel, every block's input), and the head - see the module
    docstring for the table. Nothing of the model's code or numbers changes.

    Run the model under `set_auto_parallel_context(parallel_mode="semi_auto_parallel",
    full_batch=True)` in GRAPH_MODE (e.g. `nn.TrainOneStepCell` of a cell calling `model.loss`)
    on dp * mp processes; every rank is handed the global batch. Returns `model`."""
    op = "shard_llama"
    pc = parallel_config
    _check_config(op, model, pc)
    shard_embedding(model.tok_embeddings, pc)
    for layer in model.layers:
        shard_attention(layer.attention, pc)
        shard_feed_forward(layer.feed_forward, pc)
        if pc.use_seq_parallel:
            # the residual stream enters each block with its rows over (dp, mp): the norms and
            # residual adds run on 1/mp of the positions; the attention / FFN inputs are
            # all-gathered, their row-parallel partial sums reduce-scattered back to these rows
            layer.shard(in_strategy=(_rows(pc, seq_parallel=True),))
    if not model.config.tie_embeddings:
        shard_head(model.output, pc)
    return model


__all__ = ["shard_llama", "shard_attention", "shard_feed_forward", "shard_embedding", "shard_head"]
