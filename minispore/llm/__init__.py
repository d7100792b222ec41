"""LLaMA-family language models: configs and presets, the model, rotary embeddings, attention
cores, KV caches (contiguous and paged, with a block manager), sampling and generation, and
HuggingFace-format weights.

    from minispore.llm import Llama, LlamaConfig, get_preset, generate_text
    model = Llama(get_preset("shakespeare-char").model)
    model = LlamaForCausalLM.from_pretrained("path/to/hf_folder")     # the same class
    out = model.generate(input_ids, max_new_tokens=32)

Read in this order: config.py (configs and presets), rope.py, attention.py (the swappable attention
core), model.py, kv_cache.py and block_manager.py (contiguous and paged caches), sampling.py,
generate.py, hf.py (HuggingFace folders), memory_estimate.py (bytes from a config), trainer.py (the
training loop), and the CLI commands: cli_commands.py (`minispore train` / `generate`) and
dryrun_command.py (`minispore dryrun`).
"""
from .config import LlamaConfig, Preset, PRESETS, TransformerOpParallelConfig, get_preset
from .rope import apply_rotary_emb, rope_tables, rotate_half
from .attention import flash_attention, get_attention, naive_attention, repeat_kv
from .block_manager import BlockManager, OutOfBlocksError
from .kv_cache import KVCache, LayerKVCache, PagedKVCache
from .model import Attention, FeedForward, Llama, LlamaForCausalLM, TransformerBlock
from .generate import GenerationResult, generate, generate_batch, generate_text
from .sampling import SamplingParams, sample_next

__all__ = ["LlamaConfig", "Preset", "PRESETS", "TransformerOpParallelConfig", "get_preset", "apply_rotary_emb", "rope_tables", "rotate_half",
           "flash_attention", "get_attention", "naive_attention", "repeat_kv", "BlockManager", "OutOfBlocksError",
           "KVCache", "LayerKVCache", "PagedKVCache", "Attention", "FeedForward", "Llama", "LlamaForCausalLM",
           "TransformerBlock",
           "GenerationResult", "generate", "generate_batch", "generate_text", "SamplingParams", "sample_next"]
