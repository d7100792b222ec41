"""The LLaMA as a pipeline: which device runs which layers, and the model written as a chain.

`assign_llama_stages(model, stages)` sets `pipeline_stage` on the model's own cells: the token
embedding goes with the first block of layers, the final norm and the output head with the last,
and the n_layers transformer blocks are spread over the `stages` (pipeline stages, or virtual
stages p v for interleaving) as evenly as possible, earlier stages taking the remainder:

    n_layers = 5, stages = 2  ->  layers per stage [3, 2]:  stage 0 = embedding + layers 0-2,
                                                            stage 1 = layers 3-4 + norm + head

`LlamaPipelineLoss(model)` is the Cell nn.PipelineCell splits: called directly it is
`model.loss(tokens, targets)` (the single-process oracle), and `pipeline_segments()` lists the
same computation as a chain of segments, one per stage-carrying cell - embedding (+ dropout,
flattened to (batch*seq, dim)), each TransformerBlock (with the RoPE tables for the
micro-batch's sequence length, which every rank computes itself), and norm + head + mean
cross-entropy. So the activation crossing a stage boundary is the (b*s, h) hidden state:
b·s·h elements per micro-batch, Megatron's p2p volume.

The embedding table is used by the first and the last stage when the head is tied
(`tie_embeddings=True`); that shared parameter would need its gradients summed across the two
devices (MindSpore's `sync_pipeline_shared_parameters`), which is not built: a tied model is
refused when it is split.

This module reads the model by its attributes (tok_embeddings, layers, norm, output, config),
so `parallel` needs no import of `llm`, which sits above it.
"""
from __future__ import annotations

import numbers

from ..common.errors import OpTypeError, OpValueError
from ..common.tensor import from_numpy
from ..nn.cell import Cell
from ..nn.pipeline import PipelineSegment
from ..ops import functional as F

_OP = "assign_llama_stages"


def layers_per_stage(n_layers: int, stages: int) -> list:
    """As even as possible, earlier stages taking the remainder: (5, 2) -> [3, 2]."""
    base, extra = divmod(n_layers, stages)
    return [base + (1 if s < extra else 0) for s in range(stages)]


def _check_model(op, model):
    for name in ("tok_embeddings", "layers", "norm", "config"):
        if not hasattr(model, name):
            raise OpTypeError(op, "a minispore.llm Llama (with tok_embeddings, layers, norm, config)",
                              type(model).__name__)


def assign_llama_stages(model, stages: int):
    """Set pipeline_stage on the embedding, every layer, the norm and the head of `model`;
    returns the list of layer indices per stage."""
    _check_model(_OP, model)
    if not isinstance(stages, numbers.Integral) or isinstance(stages, bool) or stages < 1:
        raise OpValueError(_OP, "'stages' as an int >= 1", repr(stages))
    n = model.config.n_layers
    if stages > n:
        raise OpValueError(_OP, f"at most n_layers={n} stages (each stage needs a layer)", f"stages={stages}")
    if stages > 1 and model.config.tie_embeddings:
        raise OpValueError(_OP, "tie_embeddings=False when the model is split (the tied embedding/head would live "
                                "on the first and the last stage)", "tie_embeddings=True")
    plan, start = [], 0
    for s, k in enumerate(layers_per_stage(n, stages)):
        plan.append(list(range(start, start + k)))
        for i in range(start, start + k):
            model.layers[i].pipeline_stage = s
        start += k
    model.tok_embeddings.pipeline_stage = 0
    model.norm.pipeline_stage = stages - 1
    if not model.config.tie_embeddings:
        model.output.pipeline_stage = stages - 1
    return plan


class LlamaPipelineLoss(Cell):
    """`model.loss(tokens, targets)` as a Cell, with `pipeline_segments()` for nn.PipelineCell."""

    def __init__(self, model):
        super().__init__(auto_prefix=False)
        _check_model("LlamaPipelineLoss", model)
        self.model = model

    def construct(self, tokens, targets):
        return self.model.loss(tokens, targets)

    def pipeline_segments(self):
        model = self.model
        if getattr(model.config, "num_experts", 0):
            # the MoE auxiliary losses of every stage would have to reach the last one
            raise OpValueError("LlamaPipelineLoss", "a dense LLaMA (num_experts=0) to split into pipeline stages",
                               f"num_experts={model.config.num_experts}")
        dim = model.config.dim

        def embed(x, inputs):
            tokens = inputs[0]
            batch, seq = tokens.shape
            h = model.tok_embeddings(tokens)
            return F.reshape(model.dropout(h), (batch * seq, dim))

        def block(layer):
            def run(h, inputs):
                batch, seq = inputs[0].shape
                cos, sin, cos_q, sin_q = model._constants(h.dtype.np)
                rope_q = (from_numpy(cos_q[:seq]), from_numpy(sin_q[:seq]))
                rope_k = (from_numpy(cos[:seq]), from_numpy(sin[:seq]))
                return layer(h, batch, rope_q, rope_k, None)
            return run

        def norm(h, inputs):
            return model.norm(h)

        def head_loss(h, inputs):
            logits = model.hidden_to_logits(h)
            return F.cross_entropy(logits, F.reshape(inputs[1], (-1,)))

        segs = [PipelineSegment(model.tok_embeddings, embed)]
        segs += [PipelineSegment(layer, block(layer)) for layer in model.layers]
        segs.append(PipelineSegment(model.norm, norm))
        head_cell = model.tok_embeddings if model.config.tie_embeddings else model.output
        segs.append(PipelineSegment(head_cell, head_loss))
        return segs


__all__ = ["assign_llama_stages", "layers_per_stage", "LlamaPipelineLoss"]
