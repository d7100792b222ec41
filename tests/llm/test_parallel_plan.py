"""The analytic DryRun of a parallel strategy (minispore.llm.parallel_plan) against numbers derived
here by hand from first principles, against the published targets in
shared/reference/parallel_memory.md (ZeRO Fig. 1, Korthikanti Table 2, Megatron's bytes/param), and
against invariants (sharding conserves the total; TP halves the split weights)."""
from __future__ import annotations

import contextlib
import io
import json
import math

import pytest

from minispore.cli import main
from minispore.common.errors import OpTypeError, OpValueError
from minispore.llm.comm_cost import LinkModel, ring_received_bytes, ring_sent_bytes, ring_steps
from minispore.llm.config import LlamaConfig, get_preset
from minispore.llm.parallel_plan import (ParallelStrategy, Precision, korthikanti_layer_bytes, llama_layer_activation_bytes,
                                         llama_parameters, plan_parallel, stage_layer_counts, static_bytes)

GB = 1e9
MB = 1e6


def small_cfg(**kw):
    """4 heads (2 KV heads: GQA), dim 64, ffn 96, 4 layers, vocab 128: every size divides by 2 and 4."""
    fields = dict(vocab_size=128, dim=64, n_layers=4, n_heads=4, n_kv_heads=2, ffn_dim=96, max_seq_len=16,
                  tie_embeddings=False)
    fields.update(kw)
    return LlamaConfig(**fields)


def hand_local_params(cfg, t, vocab_parallel=False):
    """Elements one TP rank holds, written out weight by weight (pp = 1)."""
    h, f, hd = cfg.dim, cfg.hidden_dim, cfg.head_dim
    q, kv = cfg.n_heads * hd, cfg.n_kv_heads * hd
    layer = (q * h) / t + (kv * h) / t + (kv * h) / t + (h * q) / t + 3 * (h * f) / t + h + h   # wq wk wv wo w1 w2 w3, 2 norms
    vocab = cfg.vocab_size * h / (t if vocab_parallel else 1)
    return int(vocab + cfg.n_layers * layer + h + (0 if cfg.tie_embeddings else vocab))


# ------------------------------------------------------------------------------------------------
# ring formulas and the time model
def test_ring_formulas_bytes_each_rank_sends():
    S = 1200
    assert ring_sent_bytes("AllReduce", S, 4) == 2 * 3 / 4 * S == 1800
    assert ring_sent_bytes("AllGather", S, 4) == 900 == ring_sent_bytes("ReduceScatter", S, 4)
    assert ring_sent_bytes("AlltoAll", S, 3) == 800
    assert ring_sent_bytes("Send", S, 2) == S and ring_sent_bytes("Receive", S, 2) == 0
    assert ring_received_bytes("Receive", S, 2) == S and ring_received_bytes("AllReduce", S, 4) == 1800
    assert ring_sent_bytes("AllReduce", S, 1) == 0                          # a group of one sends nothing
    assert (ring_steps("AllReduce", 8), ring_steps("AllGather", 8), ring_steps("Send", 2)) == (14, 7, 1)
    with pytest.raises(OpValueError, match="ring_sent_bytes"):
        ring_sent_bytes("Allreduce", S, 4)


def test_link_model_alpha_beta_time():
    links = LinkModel(intra_node_bw=100e9, inter_node_bw=10e9, latency_s=5e-6, devices_per_node=8)
    # 3 all-reduces of 8 MB in all over 4 ranks inside a node: 3 * 6 steps * 5 us + 1.5 * 8e6 / 100e9
    assert links.time("AllReduce", 8e6, 4, span=4, calls=3) == pytest.approx(3 * 6 * 5e-6 + 12e6 / 100e9)
    # the same over 16 ranks spanning two nodes: the inter-node link sets the pace
    assert links.time("AllGather", 8e6, 16, span=16) == pytest.approx(15 * 5e-6 + 15 / 16 * 8e6 / 10e9)
    assert links.time("Receive", 8e6, 2, span=2) == 0.0
    with pytest.raises(OpValueError, match="LinkModel"):
        LinkModel(intra_node_bw=0)


# ------------------------------------------------------------------------------------------------
# static memory: the ZeRO paper and Megatron's conventions
def test_zero_paper_figure_1_targets():
    """Rajbhandari et al. 2020, Fig. 1: Psi = 7.5B, N_d = 64, fp16 params and grads, K = 12."""
    shapes = [(10_000_000,)] * 750                                          # 7.5e9 parameters
    zero_mp = Precision(compute_dtype="float16", param_dtype="float16", grad_dtype="float16")
    assert zero_mp.optimizer_bytes == 12
    got = [sum(static_bytes(shapes, 64, level, zero_mp).values()) / GB for level in range(4)]
    assert got == pytest.approx([120, 31.4, 16.6, 1.9], abs=0.1)
    # and exactly: 2+2+12 psi; 4 psi + 12 psi/64; 2 psi + 14 psi/64; 16 psi/64
    psi = 7.5e9
    assert got == pytest.approx([16 * psi / GB, (4 + 12 / 64) * psi / GB, (2 + 14 / 64) * psi / GB, 16 / 64 * psi / GB])


def test_megatron_bytes_per_parameter_conventions():
    """theoretical_memory_usage.py: 18 bytes/param (bf16 param, fp32 grad, fp32 master+m+v), and
    6 + 12/d with the distributed optimizer (= ZeRO-1)."""
    megatron = Precision(compute_dtype="bfloat16", param_dtype="bfloat16", grad_dtype="float32")
    shapes = [(4096, 4096)] * 3
    n = 3 * 4096 * 4096
    assert sum(static_bytes(shapes, 1, 0, megatron).values()) == 18 * n
    for d in (2, 8, 64):
        assert sum(static_bytes(shapes, d, 1, megatron).values()) == (6 + 12 / d) * n
    # MindFormers' default: fp32 parameters and gradients, bf16 compute -> 4 + 4 + 8
    assert sum(static_bytes(shapes, 1, 0, Precision(compute_dtype="bfloat16")).values()) == 16 * n


def test_threshold_and_divisibility_keep_small_or_odd_parameters_whole():
    p = Precision()                                                     # fp32: 4 + 4 + 8
    # (15,) is 60 bytes < 64 KB; (30000,) is 120 KB but 30000 % 7 != 0; (7000, 3) shards
    got = static_bytes([(15,), (30000,), (7000, 3)], 7, 3, p, threshold_kb=64)
    whole, sharded = 15 + 30000, 7000 * 3 // 7
    assert got == {"parameters": 4 * (whole + sharded), "gradients": 4 * (whole + sharded),
                   "optimizer": 8 * (whole + sharded)}


def test_llama_parameters_partition_the_model():
    for cfg in (small_cfg(), small_cfg(tie_embeddings=True), get_preset("llama-7b").model,
                get_preset("llama-70b").model):
        for pp in (1, 2, 4):
            params = llama_parameters(cfg, ParallelStrategy(pipeline_stage=pp))
            total = sum(int.__mul__(*q.shape) if len(q.shape) == 2 else q.shape[0] for q in params)
            tied_copy = cfg.vocab_size * cfg.dim if (cfg.tie_embeddings and pp > 1) else 0
            assert total == cfg.num_params() + tied_copy, (cfg, pp)
    assert stage_layer_counts(10, 4) == [3, 3, 2, 2]


def test_tp_halves_the_split_weights_and_keeps_the_norms():
    cfg = small_cfg()
    one = plan_parallel(cfg, ParallelStrategy(model_parallel=1)).memory()["parameters"]
    two = plan_parallel(cfg, ParallelStrategy(model_parallel=2)).memory()["parameters"]
    assert one == 4 * hand_local_params(cfg, 1) == 4 * cfg.num_params()
    assert two == 4 * hand_local_params(cfg, 2)
    norms = (2 * cfg.n_layers + 1) * cfg.dim
    vocab = 2 * cfg.vocab_size * cfg.dim                                    # embedding + head, replicated (vocab_emb_dp)
    assert two - 4 * (norms + vocab) == (one - 4 * (norms + vocab)) / 2
    vp = plan_parallel(cfg, ParallelStrategy(model_parallel=2, vocab_emb_dp=False)).memory()["parameters"]
    assert vp == 4 * hand_local_params(cfg, 2, vocab_parallel=True) == (one - 4 * norms) / 2 + 4 * norms


def test_zero3_shards_sum_to_the_unsharded_model():
    cfg = small_cfg()
    for tp in (1, 2):
        whole = plan_parallel(cfg, ParallelStrategy(model_parallel=tp)).memory()
        for level in (1, 2, 3):
            st = ParallelStrategy(data_parallel=4, model_parallel=tp, optimizer_level=f"level{level}",
                                  parallel_optimizer_threshold=0)
            m = plan_parallel(cfg, st).memory()
            assert 4 * m["optimizer"] == whole["optimizer"]
            assert (4 * m["gradients"] == whole["gradients"]) is (level >= 2)
            assert (4 * m["parameters"] == whole["parameters"]) is (level >= 3)


def test_llama_7b_dp8_tp8_level1_static_memory_by_hand():
    cfg = get_preset("llama-7b").model
    plan = plan_parallel(cfg, ParallelStrategy(data_parallel=8, model_parallel=8, optimizer_level="level1"),
                         compute_dtype="bfloat16")
    h, f, V = 4096, 11008, 32000
    layer_split = (4 * h * h + 3 * h * f) // 8                              # per TP rank, >= 64 KB: sharded
    norms = 2 * 32 + 1                                                      # 16 KB each: below the threshold
    sharded = 2 * V * h + 32 * layer_split                                  # embedding + head (replicated over TP) + layers
    m = plan.memory()
    assert m["parameters"] == m["gradients"] == 4 * (sharded + norms * h)
    assert m["optimizer"] == 8 * (sharded // 8 + norms * h)


# ------------------------------------------------------------------------------------------------
# activations: Korthikanti Table 2, then the LLaMA block counted tensor by tensor
@pytest.mark.parametrize("t, sp, recompute, mb", [
    (1, False, "none", 2868.9), (8, False, "none", 578.8), (8, True, "none", 358.6),
    (8, False, "selective", 327.2), (8, True, "selective", 107.0), (8, False, "full", 50.3)])
def test_korthikanti_table_2_gpt3_175b(t, sp, recompute, mb):
    per_layer = korthikanti_layer_bytes(2048, 1, 12288, 96, t, sp, recompute)
    assert per_layer / MB == pytest.approx(mb, abs=0.05)
    gib = {2868.9: 256.5, 578.8: 51.75, 358.6: 32.06, 327.2: 29.25, 107.0: 9.56, 50.3: 4.50}[mb]
    assert 96 * per_layer / 2**30 == pytest.approx(gib, abs=0.01)


def test_korthikanti_selective_recompute_saves_70_percent_for_gpt3():
    full = korthikanti_layer_bytes(2048, 1, 12288, 96)
    sel = korthikanti_layer_bytes(2048, 1, 12288, 96, recompute="selective")
    assert 1 - sel / full == pytest.approx(1 - 34 / 114)


def _hand_llama_layer(cfg, b, s, t, sp, recompute, attention, e, keep_gathered=False):
    """Name every tensor a LLaMA block saves, with its shape on one TP rank; sum the bytes."""
    h, f, a, hd = cfg.dim, cfg.hidden_dim, cfg.n_heads, cfg.head_dim
    kvh = cfg.n_kv_heads
    s_rep = s // t if sp else s                                             # norm regions: sequence-split under SP
    s_out = s if keep_gathered else s_rep                                   # the norm outputs, all-gathered or not
    if recompute == "full":
        return b * s_rep * h * e
    kv_heads_kept = a if (attention == "naive" and recompute == "none") else kvh      # repeat_kv's copies
    tensors = {
        "attention_norm input": (b, s_rep, h), "attention_norm output": (b, s_out, h),
        "q (rotated)": (b, a // t, s, hd), "k (rotated)": (b, kv_heads_kept // t, s, hd),
        "v": (b, kv_heads_kept // t, s, hd), "attention output (wo input)": (b, s, a // t * hd),
        "ffn_norm input": (b, s_rep, h), "ffn_norm output": (b, s_out, h),
        "w1 out": (b, s, f // t), "w3 out": (b, s, f // t), "silu(w1 out)": (b, s, f // t), "product": (b, s, f // t),
    }
    total = sum(math.prod(shape) * e for shape in tensors.values())
    total += 2 * b * s_rep * 4                                              # the two norms' fp32 1/rms
    if recompute == "none" and attention == "naive":
        total += b * (a // t) * s * s * e                                   # softmax output
    elif recompute == "none":
        total += b * (a // t) * s * hd * e + b * (a // t) * s * 4           # flash output O, fp32 lse
    return total


@pytest.mark.parametrize("t", [1, 2])
@pytest.mark.parametrize("sp", [False, True])
@pytest.mark.parametrize("recompute", ["none", "selective", "full"])
@pytest.mark.parametrize("attention", ["naive", "flash"])
def test_llama_layer_activations_tensor_by_tensor(t, sp, recompute, attention):
    cfg = small_cfg()
    for e in (2, 4):
        got = llama_layer_activation_bytes(cfg, 2, 8, t, sp, recompute, attention, e)
        assert got == _hand_llama_layer(cfg, 2, 8, t, sp, recompute, attention, e)
        kept = llama_layer_activation_bytes(cfg, 2, 8, t, sp, recompute, attention, e, sp_regather=False)
        assert kept == _hand_llama_layer(cfg, 2, 8, t, sp, recompute, attention, e, keep_gathered=True)


@pytest.mark.parametrize("attention", ["naive", "flash"])
@pytest.mark.parametrize("dtype", [None, "bfloat16"])
def test_llama_layer_activations_equal_what_the_autodiff_tape_saves(attention, dtype):
    """Capture real training steps (graph DryRun: inference rules only) of a 1- and a 2-layer
    model; the tensors made in forward and still alive when backward starts, minus the weights
    and gradients, are what the tape saves. Their per-layer difference must equal the formula
    (0-d scalars aside: the flash kernel keeps one)."""
    from minispore.common import dtype as mstype
    from minispore.graph.dryrun import abstract_parameters, dryrun
    from minispore.llm.model import Llama

    def saved(n_layers):
        cfg = small_cfg(n_layers=n_layers)
        with abstract_parameters(dtype=None if dtype is None else mstype.as_dtype(dtype)):
            model = Llama(cfg, attention=attention)
        tokens = ((2, 16), mstype.int64)
        r = dryrun(model.loss, tokens, tokens, train=True, optimizer=None, device="h100")
        fwd_end = r.capture.phases[0]
        grads = {r.plan.alias_of.get(v, v) for v in r.capture.grad_of}
        avals = {o.id: o.aval for node in r.graph.nodes for o in node.outputs}
        return sum(avals[b.value_id].size * avals[b.value_id].dtype.itemsize for b in r.plan.owned()
                   if b.kind != "workspace" and b.value_id not in grads and b.start < fwd_end <= b.end
                   and avals[b.value_id].shape != ())

    per_layer = saved(2) - saved(1)
    assert per_layer == llama_layer_activation_bytes(small_cfg(), 2, 16, attention=attention,
                                                     itemsize=4 if dtype is None else 2)
    # the whole model: the planner's stage also holds the int64 token ids (an input, not made by the tape)
    plan = plan_parallel(small_cfg(n_layers=2), ParallelStrategy(), batch_size=2, seq_len=16, attention=attention,
                         compute_dtype=dtype or "float32")
    assert plan.memory()["activations"] == saved(2) + 2 * 16 * 8


def test_llama_dropout_adds_masks_and_dropped_probabilities():
    cfg, drop = small_cfg(), small_cfg(dropout=0.1)
    b, s = 2, 8
    extra = llama_layer_activation_bytes(drop, b, s, itemsize=2) - llama_layer_activation_bytes(cfg, b, s, itemsize=2)
    # two residual-dropout masks (1 byte each per b*s*h) + the attention-dropout mask (1 byte) and output (2 bytes)
    assert extra == 2 * b * s * 64 + b * 4 * s * s * (1 + 2)


def test_pipeline_first_stage_holds_all_layers_worth_whatever_pp():
    cfg = small_cfg(n_layers=8)
    per_layer = llama_layer_activation_bytes(cfg, 1, 16, itemsize=4)
    ids = 16 * 8                                                            # int64 token ids per micro-batch
    for pp in (1, 2, 4, 8):
        plan = plan_parallel(cfg, ParallelStrategy(pipeline_stage=pp, micro_batch_num=8))
        in_flight = [st.in_flight for st in plan.stages]
        assert in_flight == [min(pp - i, 8) for i in range(pp)]
        if pp > 1:
            assert plan.memory(0)["activations"] == 8 * per_layer + pp * ids
    gpipe_like = plan_parallel(cfg, ParallelStrategy(pipeline_stage=4, micro_batch_num=2))
    assert [st.in_flight for st in gpipe_like.stages] == [2, 2, 2, 1]       # fewer micro-batches than stages


def test_last_stage_keeps_final_norm_and_logits():
    cfg = small_cfg()
    b, s = 2, 16
    one = plan_parallel(cfg, ParallelStrategy(), batch_size=b, seq_len=s)
    per_layer = llama_layer_activation_bytes(cfg, b, s, itemsize=4)
    final_norm = 2 * b * s * 64 * 4 + b * s * 4                             # input, output, fp32 1/rms
    assert one.memory()["activations"] == 4 * per_layer + b * s * 8 + final_norm + b * s * 128 * 4
    vp = plan_parallel(cfg, ParallelStrategy(model_parallel=2, vocab_emb_dp=False), batch_size=b, seq_len=s)
    per_layer2 = llama_layer_activation_bytes(cfg, b, s, tp=2, itemsize=4)
    assert vp.memory()["activations"] == 4 * per_layer2 + b * s * 8 + final_norm + b * s * 64 * 4   # V/t logits


# ------------------------------------------------------------------------------------------------
# communication: hand-counted collectives
def test_tp_dp_collectives_by_hand():
    cfg = small_cfg()
    b, s, m, L = 2, 16, 3, 4
    plan = plan_parallel(cfg, ParallelStrategy(data_parallel=2, model_parallel=2, micro_batch_num=m),
                         batch_size=b, seq_len=s)
    X = b * s * 64 * 4                                                      # one fp32 activation
    comm = plan.comm_bytes(by_group=True)
    assert comm["tp"]["AllReduce"]["calls"] == 4 * L * m                    # 2 fwd + 2 bwd per layer per micro-batch
    assert comm["tp"]["AllReduce"]["payload_bytes"] == 4 * L * m * X
    assert comm["tp"]["AllReduce"]["sent_bytes"] == 4 * L * m * X * 2 * (2 - 1) / 2
    grads = 4 * hand_local_params(cfg, 2)
    assert comm["dp"] == {"AllReduce": {"calls": 3 + 9 * L, "payload_bytes": grads, "sent_bytes": grads,
                                        "received_bytes": grads}}          # embedding, norm, head + 9 per layer; 2(n-1)/n = 1
    assert set(comm) == {"tp", "dp"}
    flat = plan.comm_bytes()
    assert flat["AllReduce"]["payload_bytes"] == 4 * L * m * X + grads


def test_full_recompute_adds_two_forward_all_reduces_per_layer():
    cfg = small_cfg()
    base = plan_parallel(cfg, ParallelStrategy(model_parallel=2)).comm_bytes()["AllReduce"]["calls"]
    full = plan_parallel(cfg, ParallelStrategy(model_parallel=2, recompute="full")).comm_bytes()["AllReduce"]["calls"]
    sel = plan_parallel(cfg, ParallelStrategy(model_parallel=2, recompute="selective")).comm_bytes()["AllReduce"]["calls"]
    assert (base, sel, full) == (4 * 4, 4 * 4, 6 * 4)


def test_sequence_parallel_moves_the_same_volume_as_all_reduce():
    """Korthikanti §4.2.2: 4 AG + 4 RS replace 4 AR per layer, same bytes (a ring all-reduce IS a
    reduce-scatter + an all-gather); the planner adds Megatron's 2 re-gathers for dW."""
    cfg = small_cfg(n_kv_heads=4)
    for t in (2, 4):
        tp = plan_parallel(cfg, ParallelStrategy(model_parallel=t), seq_len=16).comm_bytes(by_group=True)["tp"]
        sp = plan_parallel(cfg, ParallelStrategy(model_parallel=t, use_seq_parallel=True),
                           seq_len=16).comm_bytes(by_group=True)["tp"]
        X = 16 * 64 * 4
        assert sp["AllGather"]["calls"] == 6 * 4 and sp["ReduceScatter"]["calls"] == 4 * 4
        regathers = 2 * 4 * (t - 1) / t * X
        assert sp["AllGather"]["sent_bytes"] + sp["ReduceScatter"]["sent_bytes"] - regathers == \
            pytest.approx(tp["AllReduce"]["sent_bytes"])
        # keeping the gathered GEMM inputs (an autodiff tape): exactly 4 AG + 4 RS, the AR volume
        kept = plan_parallel(cfg, ParallelStrategy(model_parallel=t, use_seq_parallel=True, sp_regather=False),
                             seq_len=16).comm_bytes(by_group=True)["tp"]
        assert kept["AllGather"]["calls"] == kept["ReduceScatter"]["calls"] == 4 * 4
        assert kept["AllGather"]["sent_bytes"] + kept["ReduceScatter"]["sent_bytes"] == \
            pytest.approx(tp["AllReduce"]["sent_bytes"])
        # the replicated norms/embedding/head see s/t tokens: their gradients are all-reduced once
        replicated = (2 * 4 + 1) * 64 + 2 * 128 * 64
        assert sp["AllReduce"] == {"calls": 1, "payload_bytes": 4 * replicated,
                                   "sent_bytes": 2 * (t - 1) / t * 4 * replicated,
                                   "received_bytes": 2 * (t - 1) / t * 4 * replicated}


def test_vocab_parallel_embedding_head_and_cross_entropy():
    cfg = small_cfg()
    b, s, m = 2, 16, 1
    tp = plan_parallel(cfg, ParallelStrategy(model_parallel=2), batch_size=b, seq_len=s).comm_bytes(by_group=True)["tp"]
    vp = plan_parallel(cfg, ParallelStrategy(model_parallel=2, vocab_emb_dp=False), batch_size=b,
                       seq_len=s).comm_bytes(by_group=True)["tp"]
    X = b * s * 64 * 4
    # + embedding output (fwd) + head input gradient (bwd) + 3 cross-entropy reductions of b*s fp32
    assert vp["AllReduce"]["calls"] - tp["AllReduce"]["calls"] == 2 + 3
    assert vp["AllReduce"]["payload_bytes"] - tp["AllReduce"]["payload_bytes"] == 2 * X + 3 * b * s * 4


def test_zero_communication_is_2_2_3_psi():
    """ZeRO §7: DP all-reduce 2 psi, ZeRO-1/2 reduce-scatter + all-gather 2 psi, ZeRO-3 3 psi
    (elements per rank, times (n-1)/n on the ring), one micro-batch, fp32 params and grads."""
    cfg = small_cfg()
    psi_bytes = 4 * cfg.num_params()
    n = 4
    sent = []
    for level in (None, "level1", "level2", "level3"):
        plan = plan_parallel(cfg, ParallelStrategy(data_parallel=n, optimizer_level=level,
                                                   parallel_optimizer_threshold=0))
        dp = plan.comm_bytes(by_group=True)["dp"]
        payload = sum(row["payload_bytes"] for row in dp.values())
        sent.append(sum(row["sent_bytes"] for row in dp.values()))
        assert payload == {None: 1, "level1": 2, "level2": 2, "level3": 3}[level] * psi_bytes
    assert sent == pytest.approx([x * (n - 1) / n * psi_bytes for x in (2, 2, 2, 3)])


def test_zero_levels_per_micro_batch():
    cfg = small_cfg()
    m = 4
    got = {}
    for level in ("level1", "level2", "level3"):
        plan = plan_parallel(cfg, ParallelStrategy(data_parallel=2, micro_batch_num=m, optimizer_level=level,
                                                   parallel_optimizer_threshold=0))
        dp = plan.comm_bytes(by_group=True)["dp"]
        got[level] = (dp["ReduceScatter"]["payload_bytes"], dp["AllGather"]["payload_bytes"])
    psi = 4 * cfg.num_params()
    assert got == {"level1": (psi, psi), "level2": (m * psi, psi), "level3": (m * psi, 2 * m * psi)}


def test_pipeline_sends_and_receives_by_hand():
    cfg = small_cfg()
    b, s, m = 2, 16, 5
    plan = plan_parallel(cfg, ParallelStrategy(pipeline_stage=4, micro_batch_num=m), batch_size=b, seq_len=s)
    X = b * s * 64 * 4
    first, middle, last = (plan.comm_bytes(i)for i in (0, 1, 3))
    assert first == {"Send": {"calls": m, "payload_bytes": m * X, "sent_bytes": m * X, "received_bytes": 0},
                     "Receive": {"calls": m, "payload_bytes": m * X, "sent_bytes": 0, "received_bytes": m * X}}
    assert middle["Send"]["calls"] == middle["Receive"]["calls"] == 2 * m
    assert last["Send"]["payload_bytes"] == m * X
    sp = plan_parallel(cfg, ParallelStrategy(pipeline_stage=2, model_parallel=2, use_seq_parallel=True,
                                             micro_batch_num=m), batch_size=b, seq_len=s)
    assert sp.comm_bytes(0, by_group=True)["pp"]["Send"]["payload_bytes"] == m * X // 2
    tied = plan_parallel(small_cfg(tie_embeddings=True), ParallelStrategy(pipeline_stage=2))
    assert tied.comm_bytes(0, by_group=True)["embedding"]["AllReduce"]["payload_bytes"] == 4 * 128 * 64


def test_one_rank_communicates_nothing_and_ranks_map_to_stages():
    assert plan_parallel(small_cfg(), ParallelStrategy()).comm_bytes() == {}
    plan = plan_parallel(small_cfg(), ParallelStrategy(data_parallel=3, model_parallel=2, pipeline_stage=2))
    assert plan.rank_coordinates(7) == {"tp": 1, "dp": 0, "pp": 1}
    assert plan.stage_of_rank(5).stage == 0 and plan.stage_of_rank(6).stage == 1
    with pytest.raises(OpValueError, match="rank"):
        plan.stage_of_rank(12)
    with pytest.raises(OpValueError, match="pipeline stage in"):
        plan.comm_bytes(2)


def test_thousands_of_devices_plan_instantly():
    plan = plan_parallel(get_preset("llama-70b").model,
                         ParallelStrategy(data_parallel=64, model_parallel=8, pipeline_stage=8, micro_batch_num=32,
                                          use_seq_parallel=True, optimizer_level="level1", recompute="selective"),
                         seq_len=4096, compute_dtype="bfloat16", attention="flash", device="h100")
    assert plan.strategy.world_size == 4096 and len(plan.stages) == 8
    assert 0 < plan.memory(0)["total"] < 80e9
    assert plan.stages[0].times["bubble_s"] == pytest.approx(plan.stages[0].times["compute_s"] * 7 / 32)
    json.dumps(plan.to_dict())                                              # plain data


def test_strategy_from_mindspore_auto_parallel_context():
    from minispore.common.auto_parallel_context import reset_auto_parallel_context, set_auto_parallel_context
    try:
        set_auto_parallel_context(parallel_mode="semi_auto_parallel", device_num=64, pipeline_stages=2,
                                  enable_parallel_optimizer=True,
                                  parallel_optimizer_config={"optimizer_level": "level2",
                                                             "parallel_optimizer_threshold": 24})
        st = ParallelStrategy.from_auto_parallel_context(model_parallel=4, micro_batch_num=8, use_seq_parallel=True)
        assert st == ParallelStrategy(data_parallel=8, model_parallel=4, pipeline_stage=2, micro_batch_num=8,
                                      use_seq_parallel=True, optimizer_level="level2", parallel_optimizer_threshold=24)
        with pytest.raises(OpValueError, match="device_num divisible"):
            ParallelStrategy.from_auto_parallel_context(model_parallel=3)
        set_auto_parallel_context(enable_parallel_optimizer=False)
        assert ParallelStrategy.from_auto_parallel_context(model_parallel=8).optimizer_level is None
    finally:
        reset_auto_parallel_context()


# ------------------------------------------------------------------------------------------------
# bad strategies
@pytest.mark.parametrize("kwargs, strategy, words", [
    ({}, dict(model_parallel=3), ["model_parallel (--tp)", "n_heads"]),
    ({"n_heads": 8, "n_kv_heads": 2, "dim": 64}, dict(model_parallel=4), ["--tp", "n_kv_heads (2)"]),
    ({"ffn_dim": 99}, dict(model_parallel=2), ["--tp", "ffn_dim (99)"]),
    ({"vocab_size": 65}, dict(model_parallel=2, vocab_emb_dp=False), ["--tp", "vocab_size (65)"]),
    ({}, dict(pipeline_stage=5), ["pipeline_stage (--pp)", "n_layers (4)"]),
    ({}, dict(model_parallel=2, use_seq_parallel=True), ["--seq", "divisible"]),
])
def test_bad_strategies_name_the_flag(kwargs, strategy, words):
    seq = 15 if strategy.get("use_seq_parallel") else 16
    with pytest.raises(OpValueError) as e:
        plan_parallel(small_cfg(**kwargs), ParallelStrategy(**strategy), seq_len=seq)
    for w in words:
        assert w in str(e.value)
    assert "parallel_plan" in str(e.value)


def test_bad_strategy_fields_and_world_size():
    for kw, word in ((dict(optimizer_level="level4"), "--zero"), (dict(data_parallel=0), "--dp"),
                     (dict(micro_batch_num=1.5), "--micro-batches"), (dict(recompute="some"), "--recompute"),
                     (dict(parallel_optimizer_threshold=-1), "--zero-threshold")):
        with pytest.raises(OpValueError, match=word):
            ParallelStrategy(**kw)
    with pytest.raises(OpTypeError, match="--seq-parallel"):
        ParallelStrategy(use_seq_parallel="yes")
    with pytest.raises(OpValueError, match=r"world_size \(--world-size\) \(16\), but got 2 x 2 x 1 = 4"):
        plan_parallel(small_cfg(), ParallelStrategy(data_parallel=2, model_parallel=2), world_size=16)
    with pytest.raises(OpValueError, match="--param-dtype"):
        Precision(param_dtype="int8")


# ------------------------------------------------------------------------------------------------
# the command line
def _run(argv):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(argv)
    return rc, out.getvalue()


def test_cli_llama_7b_dp8_tp8_level1(tmp_path):
    report = tmp_path / "plan.json"
    rc, out = _run(["dryrun", "--model", "llama-7b", "--dp", "8", "--tp", "8", "--zero", "level1",
                    "--dtype", "bfloat16", "--json", str(report)])
    assert rc == 0
    assert "llama-7b, 64 ranks (dp=8 tp=8 pp=1" in out and "optimizer_parallel=level1" in out
    for kind in ("AllReduce", "ReduceScatter", "AllGather"):
        assert kind in out
    saved = json.loads(report.read_text())
    expected = plan_parallel(get_preset("llama-7b").model,
                             ParallelStrategy(data_parallel=8, model_parallel=8, optimizer_level="level1"),
                             compute_dtype="bfloat16")
    assert saved["stages"][0]["memory"] == expected.memory()
    assert saved["world_size"] == 64


def test_cli_world_size_derives_dp_and_pipeline_rows():
    rc, out = _run(["dryrun", "--model", "llama-7b", "--world-size", "256", "--tp", "8", "--pp", "4",
                    "--micro-batches", "8", "--seq-parallel", "--recompute", "selective", "--batch-size", "2"])
    assert rc == 0
    assert "256 ranks (dp=8 tp=8 pp=4 micro_batch_num=8 seq_parallel" in out
    assert "stages 1-2" in out and "Send" in out                            # alike middle stages shown once
    rc, out = _run(["dryrun", "--model", "llama-7b", "--tp", "8", "--seq-parallel", "--sp-keep-gathered"])
    assert rc == 0 and "seq_parallel(keeps gathered)" in out and "re-gathers" not in out


def test_cli_bad_strategies_are_one_clear_line(capsys):
    for argv, word in ((["--tp", "3"], "--tp"), (["--dp", "4", "--tp", "8", "--world-size", "64"], "--world-size"),
                       (["--world-size", "60", "--tp", "8"], "--world-size"), (["--tp", "0"], "--tp"),
                       (["--tp", "2", "--plot", "x.png"], "--plot")):
        assert main(["dryrun", "--model", "llama-7b", *argv]) == 1
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and word in err, (argv, err)
    with pytest.raises(SystemExit):
        main(["dryrun", "--zero", "level4"])                                  # argparse: invalid choice
    assert "--zero" in capsys.readouterr().err
