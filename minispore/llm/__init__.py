"""LLaMA-family language models: configs and presets, the model, rotary embeddings, generation.

    from minispore.llm import Llama, LlamaConfig, get_preset, generate_text
    model = Llama(get_preset("shakespeare-char").model)
"""
from .config import LlamaConfig, Preset, PRESETS, get_preset
from .rope import apply_rotary_emb, rope_tables, rotate_half
from .model import Attention, FeedForward, KVCache, Llama, TransformerBlock, repeat_kv
from .generate import generate, generate_text, sample_next

__all__ = ["LlamaConfig", "Preset", "PRESETS", "get_preset", "apply_rotary_emb", "rope_tables", "rotate_half",
           "Attention", "FeedForward", "KVCache", "Llama", "TransformerBlock", "repeat_kv", "generate",
           "generate_text", "sample_next"]
