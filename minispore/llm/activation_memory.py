"""Activation memory of a pipelined, tensor-parallel Transformer: the published formulas, one place.

What a training rank keeps for its backward pass is (bytes one layer saves per micro-batch) x
(layers on the rank) x (micro-batches whose backward has not run yet). This module holds the
three factors as closed forms, so the parallel DryRun (parallel_plan.py) and its tests check
them against the papers' own numbers:

**Per layer: Korthikanti et al. 2022** ("Reducing Activation Recomputation in Large Transformer
Models", arXiv 2205.05198, §4 and Table 2), a GPT layer (multi-head attention, GeLU MLP of 4h,
dropout, 16-bit activations, 1-byte dropout masks, no flash attention), `s` sequence, `b`
micro-batch, `h` hidden, `a` heads, `t` tensor-parallel ranks:

    no parallelism                  s b h (34 + 5 a s / h)
    tensor parallel (Megatron)      s b h (10 + 24/t + 5 a s / (h t))
    TP + sequence parallel          s b h / t (34 + 5 a s / h)
    TP + selective recompute        s b h (10 + 24/t)
    TP + SP + selective recompute   s b h 34 / t
    full recompute                  2 s b h           (only the layer input)

34 = 11 (attention: QKV input 2, Q and K 4, V 2, out-projection input 2, dropout mask 1) + 19
(MLP: input 2, GeLU input 8, fc2 input 8, mask 1) + 4 (two LayerNorm inputs); 5as/h = the
a*s*s score matrices (softmax output 2, its dropout mask 1, dropout output 2). Under plain TP
the "10" is what stays replicated on every TP rank (the LayerNorm regions); sequence parallel
splits it along s; selective recompute drops the score matrices. For LLaMA blocks (SwiGLU, GQA,
RMSNorm, no dropout, maybe flash attention) parallel_plan.llama_layer_activation_bytes counts the
tensors minispore's tape really keeps instead; MoE blocks: `moe_ffn_activation_bytes` below.

**In flight: the pipeline schedule** (Narayanan et al. 2021, "Efficient Large-Scale Language
Model Training on GPU Clusters Using Megatron-LM", §2.2). 1F1B (PipeDream-flush): stage i runs
p - i - 1 warm-up forwards before its first backward, so it holds min(p - i, m) micro-batches;
stage 0 holds p micro-batches of L/p layers = L layers' worth whatever p is. Interleaved 1F1B
with v chunks ("virtual stages") per device: device i runs 2 (p - i - 1) + (v - 1) p warm-up
chunk-forwards (Megatron's schedules.py), so it holds

    chunks_i = min(2 (p - i - 1) + (v - 1) p + 1, m v)      chunks of L / (p v) layers

and device 0 holds (v + 1) p - 1 chunks = L (1 + (p - 1)/(p v)) layers' worth: Korthikanti §4.3's
interleaving factor `1 + (p - 1)/(p v)`, reached once m v >= (v + 1) p - 1 (fewer micro-batches
cap it at all m v chunks). MindSpore calls the chunks `pipeline_interleave` (MindFormers'
`pp_interleave_num`).

**Bubble** (same section): p - 1 idle slots of (t_f + t_b) per step against m of work for GPipe
and 1F1B, v times smaller slots when interleaved:

    bubble fraction = (p - 1) / (v m)        e.g. p=4, m=8: 0.375; v=2: 0.1875; p=8, m=64: 0.109; v=4: 0.0273
"""
from __future__ import annotations

import math
import numbers

from ..common.errors import OpValueError

_OP = "activation_memory"

# Korthikanti Table 2's six rows: (name, tensor parallel, sequence parallel, recompute)
KORTHIKANTI_VARIANTS = (
    ("no parallelism", False, False, "none"),
    ("tensor parallel", True, False, "none"),
    ("tensor + sequence parallel", True, True, "none"),
    ("tensor parallel + selective recompute", True, False, "selective"),
    ("tensor + sequence parallel + selective recompute", True, True, "selective"),
    ("full recompute", True, False, "full"),
)


def _int(name, v, low=1) -> int:
    if not isinstance(v, numbers.Integral) or isinstance(v, bool) or v < low:
        raise OpValueError(_OP, f"{name} as an int >= {low}", repr(v))
    return int(v)


def korthikanti_layer_bytes(s: int, b: int, h: int, a: int, t: int = 1, seq_parallel: bool = False,
                            recompute: str = "none") -> float:
    """Korthikanti et al. 2022, Table 2: bytes one GPT layer keeps for backward per micro-batch
    (16-bit activations, 1-byte dropout masks, GeLU MLP of 4h, no flash attention)."""
    if recompute not in ("none", "selective", "full"):
        raise OpValueError(_OP, "recompute among ('none', 'selective', 'full')", repr(recompute))
    sbh, core = s * b * h, 5 * a * s * s * b
    if recompute == "full":
        return 2 * sbh
    if recompute == "selective":
        core = 0
    if seq_parallel:
        return (34 * sbh + core) / t
    return 10 * sbh + 24 * sbh / t + core / t


def korthikanti_table(s: int, b: int, h: int, a: int, t: int) -> dict:
    """{variant name: bytes per layer} for Table 2's six rows ('no parallelism' at t = 1)."""
    return {name: korthikanti_layer_bytes(s, b, h, a, t if tp else 1, sp, rc)
            for name, tp, sp, rc in KORTHIKANTI_VARIANTS}


def interleave_factor(p: int, v: int = 1) -> float:
    """Korthikanti §4.3: stage 0 of interleaved 1F1B holds 1 + (p - 1)/(p v) times L layers."""
    p, v = _int("pipeline stages p", p), _int("virtual stages v", v)
    return 1.0 if v == 1 else 1 + (p - 1) / (p * v)


def bubble_fraction(p: int, m: int, v: int = 1) -> float:
    """Pipeline bubble over the ideal time: (p - 1) / (v m) (Narayanan et al. 2021, §2.2)."""
    p, m, v = _int("pipeline stages p", p), _int("micro-batches m", m), _int("virtual stages v", v)
    return (p - 1) / (v * m)


def in_flight_chunks(p: int, m: int, v: int = 1, stage: int = 0) -> int:
    """Model chunks whose activations stage `stage` holds at its peak (see the module docstring):
    1F1B min(p - i, m) micro-batches (v = 1: a chunk is the whole stage); interleaved
    min(2 (p - i - 1) + (v - 1) p + 1, m v)."""
    p, m, v = _int("pipeline stages p", p), _int("micro-batches m", m), _int("virtual stages v", v)
    i = _int("stage", stage, low=0)
    if i >= p:
        raise OpValueError(_OP, f"a stage in [0, {p})", repr(stage))
    if v == 1:
        return min(p - i, m)
    return min(2 * (p - i - 1) + (v - 1) * p + 1, m * v)


def in_flight_layers(n_layers: int, p: int, m: int, v: int = 1, stage: int = 0) -> float:
    """Layers' worth of one micro-batch's activations stage `stage` holds: chunks x L/(p v)."""
    L = _int("n_layers", n_layers)
    return in_flight_chunks(p, m, v, stage) * L / (p * v)


def moe_capacity(tokens: int, num_experts: int, top_k: int, capacity_factor: float | None) -> int:
    """Rows per expert of a fixed-capacity dispatch buffer (GShard / Switch): ceil(cf tokens k / E).
    `capacity_factor=None`: no capacity limit, no padding - exactly tokens * k rows in all, which
    `moe_rows` returns directly."""
    if capacity_factor is None:
        return math.ceil(tokens * top_k / num_experts)
    return math.ceil(capacity_factor * tokens * top_k / num_experts)


def moe_rows(tokens: int, num_experts: int, top_k: int, capacity_factor: float | None) -> int:
    """Token rows one rank dispatches (and, after the AlltoAll, its local experts process):
    capacity x experts, or exactly tokens x top_k without a capacity factor."""
    if capacity_factor is None:
        return tokens * top_k
    return moe_capacity(tokens, num_experts, top_k, capacity_factor) * num_experts


def moe_ffn_activation_bytes(tokens: int, h: int, ffn: int, num_experts: int, top_k: int,
                             capacity_factor: float | None, itemsize: int) -> int:
    """What a top-k MoE feed-forward keeps for backward (replacing the dense SwiGLU's four ffn-wide
    tensors), for `tokens` routed on this rank, R = moe_rows(...) dispatched rows, `ffn` the
    experts' FFN width on this rank (ffn / tp: experts are split like the dense FFN):
    router probabilities (float32, tokens x E) and the top-k gates (float32, tokens x k); the
    dispatched expert inputs (R x h); each expert's SwiGLU w1/w3 outputs, silu and product
    (4 x R x ffn); the expert outputs the combine weights by the gates (R x h)."""
    R = moe_rows(tokens, num_experts, top_k, capacity_factor)
    return tokens * (num_experts + top_k) * 4 + (2 * R * h + 4 * R * ffn) * itemsize


__all__ = ["KORTHIKANTI_VARIANTS", "korthikanti_layer_bytes", "korthikanti_table", "interleave_factor",
           "bubble_fraction", "in_flight_chunks", "in_flight_layers", "moe_capacity", "moe_rows",
           "moe_ffn_activation_bytes"]
