"""Tensor and sequence parallel LLaMA as shard strategies (minispore/llm/shard_strategies.py):
`shard_llama(model, parallel_config)` annotates the model, the semi-auto pass (graph/parallel/)
partitions it.

* MPI (tests/parallel/semi_auto_llama_worker.py, one run per world size): a 2-layer GQA LLaMA
  (float64, untied head) trains 10 Adam steps in GRAPH_MODE under mp2, mp2 + sequence parallel,
  vocab_emb_dp both ways, and the tied head with SP (2 ranks) and mp4, dp2 x mp2, dp2 x mp2 + SP (4 ranks): losses equal the
  single process within 1e-12, every parameter gathered from its shards equal within 1e-12, the
  shards Megatron's.
* One process (plan_function for rank 0 of a hypothetical world): the communication the pass
  inserts equals Megatron's per layer - two all-reduces of the (tokens, dim) activation forward
  (and two backward); with sequence parallelism an all-gather before the column-parallel pair and
  a reduce-scatter after the row-parallel one instead, the same ring bytes - in the units of the
  PyNative version's own count, llm/parallel_plan.py `minispore_step_comm`.
"""
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import minispore as ms
from minispore import nn
from minispore.common import auto_parallel_context as apc
from minispore.common.errors import OpTypeError, OpValueError
from minispore.graph.parallel import plan_function
from minispore.llm.config import LlamaConfig, TransformerOpParallelConfig
from minispore.llm.model import Llama
from minispore.llm.parallel_plan import ParallelStrategy, minispore_step_comm
from minispore.llm.shard_strategies import shard_llama

HERE = Path(__file__).parent
WORKER = HERE / "semi_auto_llama_worker.py"
sys.path.insert(0, str(HERE.parent / "communication"))
from mpi_harness import rank_results, needs_mpi  # noqa: E402

CONFIG = dict(vocab_size=16, dim=32, n_layers=2, n_heads=8, n_kv_heads=4, max_seq_len=8, ffn_dim=64,
              tie_embeddings=False)
BATCH, SEQ = 2, 8                                # (planning: 16 tokens, so no activation has a weight's shape)
X = BATCH * SEQ * CONFIG["dim"] * 8             # bytes of one (tokens, dim) float64 activation


mpi = needs_mpi


def run_worker(n, cases, out_dir):
    return rank_results(WORKER, n, out_dir, (",".join(cases), out_dir), 240)


TWO = ["mp2_vp", "mp2_vdp", "mp2sp_vp", "mp2sp_vdp", "mp2sp_vp_tied"]
FOUR = ["mp4_vp", "dp2mp2_vp", "dp2mp2sp_vdp"]


@pytest.fixture(scope="module")
def two(tmp_path_factory):
    return run_worker(2, TWO, tmp_path_factory.mktemp("sal2"))


@pytest.fixture(scope="module")
def four(tmp_path_factory):
    return run_worker(4, FOUR, tmp_path_factory.mktemp("sal4"))


def _shards(case):
    """Megatron's local shapes: (out, in) weights, column parallel split by rows, row parallel by
    columns over mp; the table and head split along the vocabulary unless vocab_emb_dp."""
    mp = int(case.split("mp")[1][0])
    vocab = 16 if "_vdp" in case else 16 // mp
    out = {"model.tok_embeddings.embedding_table": [vocab, 32], "model.norm.weight": [32]}
    if not case.endswith("_tied"):
        out["model.output.weight"] = [vocab, 32]
    for i in range(2):
        m = f"model.layers.{i}."
        out[f"{m}attention.wq.weight"] = [32 // mp, 32]              # 8 query heads of 4
        out[f"{m}attention.wk.weight"] = [16 // mp, 32]              # 4 key/value heads of 4
        out[f"{m}attention.wv.weight"] = [16 // mp, 32]
        out[f"{m}attention.wo.weight"] = [32, 32 // mp]
        out[f"{m}feed_forward.w1.weight"] = [64 // mp, 32]
        out[f"{m}feed_forward.w3.weight"] = [64 // mp, 32]
        out[f"{m}feed_forward.w2.weight"] = [32, 64 // mp]
        out[f"{m}attention_norm.weight"] = out[f"{m}ffn_norm.weight"] = [32]
    return out


def _check(ranks, case):
    for r in ranks:
        res = r[case]
        assert res["loss_diff"] < 1e-12, res["losses"]
        assert max(res["param_err"].values()) < 1e-12, res["param_err"]
        assert res["local_shapes"] == _shards(case)
    losses = [r[case]["losses"] for r in ranks]
    assert all(x == losses[0] for x in losses)               # every rank reports the global loss
    assert len(set(np.round(losses[0], 6))) > 1               # it trained


@mpi
@pytest.mark.parametrize("case", TWO)
def test_two_ranks_train_like_one_process(case, two):
    _check(two, case)


@mpi
@pytest.mark.parametrize("case", FOUR)
def test_four_ranks_train_like_one_process(case, four):
    _check(four, case)


# ------------------------------------------------------------------------------------------------
# one process: the communication the pass inserts, for rank 0 of a hypothetical world
class LlamaLoss(nn.Cell):
    def __init__(self, pc, attention="naive", **overrides):
        super().__init__()
        ms.set_seed(5)
        self.model = Llama(LlamaConfig(**{**CONFIG, **overrides}), attention=attention)
        for p in self.model.trainable_params():
            p.set_dtype(ms.float64)
        shard_llama(self.model, pc)

    def construct(self, tokens, targets):
        return self.model.loss(tokens, targets)


@pytest.fixture
def semi_auto():
    apc.set_auto_parallel_context(parallel_mode="semi_auto_parallel", full_batch=True)
    ms.set_context(mode=ms.GRAPH_MODE)
    yield
    ms.set_context(mode=ms.PYNATIVE_MODE)
    apc.set_auto_parallel_context(parallel_mode="stand_alone")


def _tokens():
    t = np.random.default_rng(6).integers(0, 16, (BATCH, SEQ + 1)).astype(np.int32)
    return ms.Tensor(t[:, :-1]), ms.Tensor(t[:, 1:])


def _plan(pc, step=False, attention="naive"):
    net = LlamaLoss(pc, attention)
    fn = nn.TrainOneStepCell(net, nn.Adam(net.trainable_params(), learning_rate=0.01)) if step else net
    return plan_function(fn, *_tokens(), device_num=pc.world_size, rank=0)


def _payload(kind, ring, t):
    """The ring bytes the pass records, in minispore_step_comm's payload convention (the
    collective's input, for all-gather the local block): all-reduce 2 (t-1)/t, reduce-scatter
    (t-1)/t, all-gather (t-1) times the payload."""
    return {"all_reduce": ring * t // (2 * (t - 1)), "reduce_scatter": ring * t // (t - 1),
            "all_gather": ring // (t - 1)}[kind]


def _megatron(pc, marks):
    """{kind: [payload per call]} of minispore_step_comm's rows whose purpose has all `marks`."""
    s = ParallelStrategy(data_parallel=pc.data_parallel, model_parallel=pc.model_parallel,
                         use_seq_parallel=pc.use_seq_parallel, vocab_emb_dp=pc.vocab_emb_dp)
    out = {}
    for _, kind, calls, payload, purpose in minispore_step_comm(LlamaConfig(**CONFIG), s, batch_size=BATCH // pc.data_parallel,
                                                                 seq_len=SEQ, dtype="float64", by_purpose=True):
        if all(m in purpose for m in marks):
            out.setdefault(kind, []).extend([payload // calls] * calls)
    return out


@pytest.mark.parametrize("mp", [2, 4])
def test_tensor_parallel_forward_is_megatrons_two_all_reduces_per_layer(semi_auto, mp):
    pc = TransformerOpParallelConfig(model_parallel=mp, vocab_emb_dp=False)
    ring = 2 * (mp - 1) * X // mp
    # the vocabulary-parallel lookup's partial sum, then per layer after wo and after w2, then the
    # column-parallel head's (tokens, vocab) logits gathered for the loss (which needs every class)
    logits_block = BATCH * SEQ * (16 // mp) * 8
    plan = _plan(pc)
    table = plan.comm_table()
    assert table == [("all_reduce", ring)] * (1 + 2 * 2) + [("all_gather", (mp - 1) * logits_block)]
    assert sorted(plan.comms[-1].shape) == sorted((BATCH * SEQ, 16))        # the logits, not the weight
    # the PyNative Megatron version: the same all-reduces, of the same payload
    blocks = _megatron(pc, ("blocks", "(fwd)"))
    embedding = _megatron(pc, ("embedding", "(fwd)"))
    ours = [_payload(k, b, mp) for k, b in table if k == "all_reduce"]
    assert blocks == {"all_reduce": [X] * 4} and embedding == {"all_reduce": [X]}
    assert ours == embedding["all_reduce"] + blocks["all_reduce"]


def test_vocab_emb_dp_forward_has_only_the_block_all_reduces(semi_auto):
    pc = TransformerOpParallelConfig(model_parallel=2, vocab_emb_dp=True)
    table = _plan(pc).comm_table()
    assert table == [("all_reduce", X)] * 4
    assert _megatron(pc, ("(fwd)",)) == {"all_reduce": [X] * 4}


@pytest.mark.parametrize("vocab_emb_dp", [False, True])
def test_sequence_parallel_forward_all_gathers_and_reduce_scatters(semi_auto, vocab_emb_dp):
    mp = 2
    pc = TransformerOpParallelConfig(model_parallel=mp, use_seq_parallel=True, vocab_emb_dp=vocab_emb_dp)
    plan = _plan(pc)
    table = plan.comm_table()
    rs, ag = ("reduce_scatter", (mp - 1) * X // mp), ("all_gather", (mp - 1) * X // mp)
    per_layer = [ag, rs, ag, rs]             # before wq|wk|wv, after wo, before w1|w3, after w2
    # the split head: the loss runs on the sequence-parallel rows, and the pass gathers the
    # (vocab, dim) weight for them - fewer bytes here than gathering the (tokens, dim) rows
    head = [("all_gather", (mp - 1) * (16 // mp) * 32 * 8)] if not vocab_emb_dp else []
    if not vocab_emb_dp:
        assert sorted(plan.comms[-2].shape) == [16, 32]                    # the weight, not the logits
    embedding = [rs] if not vocab_emb_dp else []     # the lookup's partial sum, scattered by rows
    # the loss: each rank's mean over its rows, a partial sum of one float64
    assert table == embedding + per_layer * 2 + head + [("all_reduce", 8)]
    # same ring bytes per layer as the two all-reduces without SP
    assert sum(b for _, b in per_layer) == 2 * (2 * (mp - 1) * X // mp)
    # the PyNative version's per-block all-gathers (f-bar) and reduce-scatters (g-bar), same payloads
    blocks = _megatron(pc, ("blocks", "(fwd)"))
    ours = Counter((k, _payload(k, b, mp)) for k, b in per_layer * 2)
    assert ours == Counter((k, p) for k, ps in blocks.items() for p in ps)


def test_data_and_tensor_parallel_forward_groups(semi_auto):
    pc = TransformerOpParallelConfig(data_parallel=2, model_parallel=2, vocab_emb_dp=True)
    plan = _plan(pc)
    blocks = [c for c in plan.comms if c.kind == "all_reduce" and c.shape == (BATCH * SEQ, 32)]
    # the block all-reduces run inside rank 0's tensor-parallel pair {0, 1} (model parallel
    # fastest) on its half of the batch; the loss's partial mean over the data-parallel pair {0, 2}
    assert len(blocks) == 4 and {c.group for c in blocks} == {"ranks0_1"}
    assert [_payload("all_reduce", c.bytes, 2) for c in blocks] == _megatron(pc, ("blocks", "(fwd)"))["all_reduce"]
    assert [(c.kind, c.group, c.bytes) for c in plan.comms if c not in blocks] == [("all_reduce", "ranks0_2", 8)]


def test_training_step_backward_is_megatrons_too(semi_auto):
    """The whole step (forward, backward, Adam) planned: the block all-reduces backward (f before
    wq|wk|wv and w1|w3) are Megatron's; the split weights' gradients need no communication."""
    pc = TransformerOpParallelConfig(model_parallel=2, vocab_emb_dp=True)
    table = _plan(pc, step=True).comm_table()
    assert table == [("all_reduce", X)] * 8
    assert len(_megatron(pc, ("blocks",))["all_reduce"]) == 8


def test_flash_attention_splits_heads_without_communication(semi_auto):
    pc = TransformerOpParallelConfig(model_parallel=2, vocab_emb_dp=True)
    assert _plan(pc, attention="flash").comm_table() == [("all_reduce", X)] * 4


def test_bad_configs_are_refused_before_any_graph():
    model = Llama(LlamaConfig(**{**CONFIG, "n_kv_heads": 2}), attention="naive")
    with pytest.raises(OpValueError, match="shard_llama.*n_kv_heads divisible by model_parallel=4"):
        shard_llama(model, TransformerOpParallelConfig(model_parallel=4))
    with pytest.raises(OpValueError, match="shard_llama.*vocab_size divisible"):
        shard_llama(Llama(LlamaConfig(**{**CONFIG, "vocab_size": 18}), attention="naive"),
                    TransformerOpParallelConfig(model_parallel=4, vocab_emb_dp=False))
    with pytest.raises(OpValueError, match="shard_llama.*pipeline_stage 1"):
        shard_llama(model, TransformerOpParallelConfig(pipeline_stage=2))
    with pytest.raises(OpValueError, match="shard_llama.*fine_grain_interleave 1"):
        shard_llama(model, TransformerOpParallelConfig(model_parallel=2, use_seq_parallel=True,
                                                       fine_grain_interleave=2))
    with pytest.raises(OpValueError, match="shard_llama.*expert_parallel 1"):
        shard_llama(model, TransformerOpParallelConfig(data_parallel=2, expert_parallel=2))
    with pytest.raises(OpTypeError, match="shard_llama.*TransformerOpParallelConfig"):
        shard_llama(model, {"model_parallel": 2})
    with pytest.raises(OpTypeError, match="shard_llama.*Llama"):
        shard_llama(nn.Dense(2, 2), TransformerOpParallelConfig(model_parallel=2))
    apc.set_auto_parallel_context(device_num=4)
    try:
        with pytest.raises(OpValueError, match=r"shard_llama.*device_num \(4\).*1 \* 2 = 2"):
            shard_llama(model, TransformerOpParallelConfig(model_parallel=2))
    finally:
        apc.reset_auto_parallel_context()


def test_colliding_matmul_splits_gather_the_smaller_operand():
    """The backward of a sequence-parallel row-parallel linear: dout (tokens split over the axis)
    @ W (its columns split over the same axis). Keeping dout's split would gather the (bigger)
    weight; the rule keeps W's and gathers dout instead. (Its numbers: tests/ops/test_sharding_rules.py
    simulates every rule; the sequence-parallel training runs above use it.)"""
    from minispore.ops import sharding_rules as SR
    from minispore.ops.primitive import AbstractTensor
    from minispore.ops.sharding import TensorLayout
    from minispore.common import dtype as mstype
    dout, w = AbstractTensor((8, 4), mstype.float64), AbstractTensor((4, 16), mstype.float64)
    out = AbstractTensor((8, 16), mstype.float64)
    rows, cols = TensorLayout((2,), (0, -1)), TensorLayout((2,), (-1, 0))
    r = SR.matmul("matmul", (dout, w), (out,), (rows, cols), {})
    assert r.requires == (TensorLayout((2,), (-1, -1)), cols) and r.out_layouts == (cols,)
    # with the weight the smaller one, x keeps leading (the weight is gathered)
    w_small, out_small = AbstractTensor((4, 2), mstype.float64), AbstractTensor((8, 2), mstype.float64)
    r = SR.matmul("matmul", (dout, w_small), (out_small,), (rows, cols), {})
    assert r.requires == (rows, TensorLayout((2,), (-1, -1))) and r.out_layouts == (rows,)
