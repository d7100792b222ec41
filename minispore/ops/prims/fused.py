"""The fused-operator family (MindSpore 2.3's LLM operators); this module only gathers them
(`minispore.ops.functional` imports the family by the name `fused`):

* fused_attention  flash_attention_score (training, tiled forward/backward), prompt_flash_attention
                   (prefill), incre_flash_attention (decode: Flash-Decoding, or a paged cache)
* fused_paged      paged_attention, reshape_and_cache (paged KV cache: block tables, slot mapping)
* fused_layers     add_rms_norm, rotary_position_embedding, swiglu
* fused_quant      weight_quant_batch_matmul (W8A16), quant_batch_matmul (W8A8), matmul_allreduce

(`rms_norm` belongs to the nn family.) The attention kernels themselves — online softmax, tiles,
Flash-Decoding combine, the paged walk — are in `fused_attention_kernels`, free of Tensors.
"""
from .fused_attention import flash_attention_score, incre_flash_attention, prompt_flash_attention
from .fused_layers import add_rms_norm, rotary_position_embedding, swiglu
from .fused_paged import paged_attention, reshape_and_cache
from .fused_quant import matmul_allreduce, quant_batch_matmul, weight_quant_batch_matmul

__all__ = ["add_rms_norm", "flash_attention_score", "incre_flash_attention", "matmul_allreduce", "paged_attention",
           "prompt_flash_attention", "quant_batch_matmul", "reshape_and_cache", "rotary_position_embedding",
           "swiglu", "weight_quant_batch_matmul"]
