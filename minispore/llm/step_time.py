"""Step time and model FLOPs utilisation of a planned training step: the formulas the parallel
DryRun (parallel_plan.py) turns its FLOPs and collectives into seconds with.

**MFU** (Chowdhery et al. 2022, "PaLM", Appendix B): the fraction of the cluster's peak that the
model's own arithmetic uses,

    MFU = tokens/s x (6 N + 12 L h s) / (devices x peak FLOP/s)

with N the non-embedding parameters (a token's forward is 2N multiply-adds worth of FLOPs, its
backward 4N: Kaplan et al. 2020 §2.1), 12 L h s the attention scores and values (QK^T and PV, the
full s x s square, forward + backward; h = heads x head dim) and s the sequence length.
Recomputation is not counted (that is HFU, hardware FLOPs utilisation). For an MoE model N is the
ACTIVE non-embedding parameters (k of the E experts).

**Exposed tensor-parallel communication under multi-copy.** A TP layer is a chain of k (GEMM ->
dependent collective) pairs; one copy exposes every collective. Split into n copies (MindSpore's fine-grained multi-copy,
`fine_grain_interleave: n`), copy j's collective runs while copy j+1 computes. With per-pair
compute c and communication x (each copy c/n, x/n), one compute and one comm stream, copies issued
round-robin (the closed form in `multi_copy_makespan`, checked by a discrete-event simulation):

    n = 1:               k (c + x)              (all k x exposed)
    x <= (n - 1) c:      k c + x / n            (only the last copy's last collective is exposed)
    otherwise:           k x + c / n            (communication-bound: compute hides behind it)

That chain (`tp_exposed_fraction`) is an idealisation: uniform pairs, nothing left unsplit.
The plan prefers `simulated_tp_exposed_fraction`: the two-stream simulator package
(minispore/parallel/simulator) run on one real dense LLaMA layer with this plan's device and link,
forward and backward, the core attention unsplit and the backward dW GEMMs free to fill the
collectives' gaps - when the package is importable and takes the shape (dense layers; tokens
divisible by tp x copies); otherwise the closed form. Either way: a model, not a measurement.
With ONE copy the plan counts every in-layer TP collective as exposed (the simulator would let
dW hide some of the backward's: the plan is conservative there).
"""
from __future__ import annotations

from ..common.errors import OpValueError

_OP = "step_time"


def model_flops_per_token(n_params: float, n_layers: int, hidden: int, seq_len: int) -> float:
    """PaLM's training FLOPs per token: 6 N + 12 L h s (N: non-embedding, active parameters)."""
    return 6 * n_params + 12 * n_layers * hidden * seq_len


def mfu(tokens_per_s: float, n_params: float, n_layers: int, hidden: int, seq_len: int, devices: int,
        peak_flops: float) -> float:
    """PaLM's model FLOPs utilisation: tokens/s x (6N + 12 L h s) / (devices x peak)."""
    if devices < 1 or peak_flops <= 0:
        raise OpValueError(_OP, "devices >= 1 and peak FLOP/s > 0", f"devices={devices}, peak={peak_flops}")
    return tokens_per_s * model_flops_per_token(n_params, n_layers, hidden, seq_len) / (devices * peak_flops)


def multi_copy_makespan(k: int, c: float, x: float, n: int) -> float:
    """Closed-form makespan of a chain of k (compute c -> comm x) pairs split into n copies (see
    the module docstring)."""
    if k < 1 or n < 1 or c < 0 or x < 0:
        raise OpValueError(_OP, "k >= 1, n >= 1, c >= 0, x >= 0", f"k={k}, n={n}, c={c}, x={x}")
    if n == 1:
        return k * (c + x)
    if x <= (n - 1) * c:
        return k * c + x / n
    return k * x + c / n


def tp_exposed_fraction(k: int, c: float, x: float, n: int) -> tuple:
    """(exposed fraction of the chain's communication, 'closed form'): exposed = makespan - k c,
    over the k x communicated (multi_copy_makespan)."""
    if x <= 0:
        return 0.0, "closed form"
    span = multi_copy_makespan(k, c, x, n)
    exposed = min(max(span - k * c, 0.0), k * x)
    return exposed / (k * x), "closed form"


_SIMULATED: dict = {}


def simulated_tp_exposed_fraction(cfg, tp: int, seq: int, batch: int, copies: int, device, bandwidth: float,
                                  latency_s: float, dtype: str, efficiency: float = 1.0, sp_regather: bool = True):
    """The exposed share of one dense LLaMA layer's TP/SP communication (forward + backward, one
    TP rank, `copies` copies) from the two-stream simulator (minispore/parallel/simulator: its
    transformer_graph, where backward dX GEMMs wait for their collective and dW GEMMs fill the
    gaps), with this plan's device and link; None when the simulator is not importable or cannot
    take this shape (then the caller uses the closed form). Cached per shape."""
    key = (cfg.dim, cfg.n_heads, cfg.n_kv_heads, cfg.hidden_dim, tp, seq, batch, copies,
           getattr(device, "name", None), bandwidth, latency_s, dtype, efficiency, sp_regather)
    if key in _SIMULATED:
        return _SIMULATED[key]
    result = None
    try:
        from ..parallel.simulator import CostModel, LayerSpec, LinkProfile, simulate, transformer_graph
        if (batch * seq) % (tp * copies) == 0:
            spec = LayerSpec("plan", cfg.dim, cfg.n_heads, cfg.n_kv_heads, cfg.hidden_dim, 1, seq, batch, tp)
            cost = CostModel(device, LinkProfile("plan", bandwidth, latency_s), dtype, efficiency)
            timeline = simulate(transformer_graph(spec, cost, copies, sp_regather=sp_regather))
            comm = timeline.comm_time()
            result = timeline.exposed_comm_time() / comm if comm > 0 else 0.0
    except (ImportError, ValueError, TypeError):             # not there, or a shape it does not take
        result = None
    _SIMULATED[key] = result
    return result


def adam_update_seconds(param_bytes: float, grad_bytes: float, optimizer_bytes: float, mem_bw: float) -> float:
    """AdamW's update is memory-bound: read and write the weights, read the gradients, read and
    write m, v (and the master copy): 2 P + G + 2 O bytes through memory."""
    return (2 * param_bytes + grad_bytes + 2 * optimizer_bytes) / mem_bw


def overlap_exposed(comm_s: float, hide_behind_s: float) -> float:
    """Communication that runs on its own stream next to `hide_behind_s` of independent compute:
    what does not fit under it stays exposed."""
    return max(0.0, comm_s - hide_behind_s)


__all__ = ["model_flops_per_token", "mfu", "multi_copy_makespan", "tp_exposed_fraction",
           "simulated_tp_exposed_fraction", "adam_update_seconds",
           "overlap_exposed"]
