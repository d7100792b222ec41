"""DryRun for a parallel strategy: per-rank memory and per-step communication of a LLaMA training
job on thousands of devices, computed from the config and the strategy alone (nothing runs).

    from minispore.llm.config import get_preset
    from minispore.llm.parallel_plan import ParallelStrategy, plan_parallel
    plan = plan_parallel(get_preset("llama-7b").model,
                         ParallelStrategy(data_parallel=8, model_parallel=8, optimizer_level="level1"),
                         batch_size=1, seq_len=2048, compute_dtype="bfloat16")
    print(plan.table())
    plan.comm_bytes()            # {"AllReduce": {"calls", "payload_bytes", "sent_bytes", ...}, ...}

    $ minispore dryrun --model llama-7b --dp 8 --tp 8 --zero level1 --dtype bfloat16

    # what minispore's OWN step sends (the counters of ops.prims.comm.comm_bytes(), exactly):
    minispore_step_comm(cfg, ParallelStrategy(data_parallel=2, model_parallel=2), batch_size=2, seq_len=8, rank=1)
    $ minispore dryrun --model llama-7b --dp 8 --tp 8 --minispore-step --rank 9

The plan models Megatron's schedule (what a production engine sends); `minispore_step_comm` (at
the end of this file) models minispore's own implementation, collective by collective, and
tests/parallel/test_comm_bytes.py checks it against the instrumented MPI runs, integer for integer.

The strategy follows MindSpore / MindFormers' names (`parallel_config`): `data_parallel` (dp),
`model_parallel` (tp), `pipeline_stage` (pp) with `micro_batch_num`, `use_seq_parallel`,
`vocab_emb_dp`, and optimizer parallel (`optimizer_level` level1/2/3 with
`parallel_optimizer_threshold` in KB). Ranks are numbered Megatron's way, tensor parallel
fastest: rank = tp_index + tp * (dp_index + dp * pp_index), so a TP group is `tp` consecutive
ranks and a DP group spans `tp * dp` of them (which decides intra- vs inter-node links).

Ranks in one pipeline stage are alike (same shards, same collectives), so the plan has one row
per stage. What each number counts, per rank:

**Parameters / gradients / optimizer state.** Every LLaMA weight is placed on its stage (the
embedding on the first, the final norm and output head on the last, the layers split as evenly
as possible, earlier stages taking the remainder) and sliced Megatron's way under tensor
parallel: wq/wk/wv and w1/w3 column-parallel (their output dimension, i.e. heads and FFN
columns, split), wo and w2 row-parallel (input dimension split), RMSNorm weights replicated; the
embedding table and the head split along the vocabulary unless `vocab_emb_dp`. Bytes per
element: the parameter dtype, the gradient dtype, and AdamW's state = two float32 moments plus
a float32 master copy when the parameters are 16-bit (the ZeRO paper's K = 12; 8 with float32
parameters). Optimizer parallel shards over the DP group, per parameter, along dimension 0 of
its TP slice (as MindSpore does): level1 the optimizer state (ZeRO-1, P_os), level2 also the
gradients (P_os+g), level3 also the parameters (P_os+g+p). A parameter is left whole when its
slice is smaller than `parallel_optimizer_threshold` KB or its dimension 0 does not divide by dp.
(MindSpore's own level1 also stores the weights sliced; here the levels are ZeRO's stages.)

**Activations** (saved for backward, per micro-batch, per layer; Korthikanti et al. 2022,
"Reducing Activation Recomputation in Large Transformer Models", §4, applied to the LLaMA
block, counting what minispore's autodiff tape keeps - tests/llm/test_parallel_plan.py checks
it against the tape of a captured training step): the two RMSNorm inputs and outputs (4 x sbh)
and their float32 1/rms (2 x sb) - replicated across TP, split along the sequence under
sequence parallel; q, k, v and the attention output (s*b*(2 q_dim + 2 kv_dim) / t); the four
SwiGLU tensors of width ffn (w1 and w3 outputs, silu output, their product: 4 x sbf / t); and
the attention core: for naive attention the softmax output a*s*s*b / t (plus the dropout mask
and output when dropout > 0), with k and v kept repeated to every query head (GQA's
repeat_kv copies, q_dim wide); for flash attention
its output O and float32 log-sum-exp (a*s*b / t). Selective recompute drops the core (and
keeps k, v unrepeated); full recompute keeps only the layer input (sbh, / t under SP).
Stage i holds min(pp - i, micro_batch_num) micro-batches in flight (1F1B), so the first stage
holds `L` layers' worth whatever pp is. Extra: int64 token ids on the first stage; on the last,
the final norm's input, 1/rms and output, and the logits the cross-entropy keeps (in the
compute dtype: its backward recomputes the softmax; split along the vocabulary, or along the
sequence under SP; Megatron keeps float32 logits instead, 4sbV). `korthikanti_layer_bytes` is
the paper's GPT formula itself (Table 2), for checking against its published numbers.

**Communication**, each entry (group, collective, calls, payload) - see comm_cost.py for the
payload convention and the ring formulas of bytes sent; X = b*s*h activation elements in the
compute dtype, b the micro-batch size:

* TP, per layer per micro-batch: without SP, an AllReduce of X after the attention and after the
  MLP in forward, and one at each block input in backward (Megatron's g and f: 4), +2 forward
  ones with full recompute. With SP: forward AllGather X before the QKV and before the w1/w3
  GEMMs and ReduceScatter X after wo and w2; backward the conjugates (2 ReduceScatter + 2
  AllGather) plus 2 AllGather re-gathering the sequence-split input for the weight gradients
  (Megatron stores only the shard: that is what makes the SP activation formula hold;
  Korthikanti's "4 all-gathers + 4 reduce-scatters" leaves these two out; `sp_regather=False`
  keeps the gathered norm outputs instead, as an autodiff tape does: 4 + 4, and those two
  tensors at full sequence length); full recompute repeats the forward ones.
* Vocabulary parallel (`vocab_emb_dp=False`): embedding output AllReduce X (ReduceScatter X
  under SP); head input backward AllReduce X (SP: AllGather X forward, ReduceScatter X + the
  re-gather backward); vocab-parallel cross-entropy: 3 AllReduce of b*s float32 (max, sum of
  exponentials, target logit). Replicated embedding/head with SP: each rank sees s/t tokens, so
  their gradients are partial sums, AllReduced over TP once per step; likewise the RMSNorm
  weights under SP.
* DP, once per step (grad dtype): AllReduce of every gradient; with optimizer parallel, for
  sharded parameters, ReduceScatter of the gradient and AllGather of the updated parameter
  (param dtype) - level2 and level3 reduce-scatter after every micro-batch (the gradient shard
  is the only gradient buffer), level3 AllGathers the parameter before its forward and again
  before its backward, in every micro-batch, and needs no gather after the update. Calls are
  counted one per parameter (no bucketing; payload totals do not depend on it).
* PP, per micro-batch: Send of the activation to the next stage and of its gradient to the
  previous one (Receive at the other end), X / t under SP; with tied embeddings on pp > 1, an
  AllReduce of the embedding gradient between the first and the last stage. Interleaved
  (`virtual_pipeline_stages` v > 1: chunk c of p v on device c mod p) every micro-batch crosses
  every chunk boundary: m v messages each way per device boundary (2 m v b s h bytes), less the
  m into the first chunk and out of the last.
* EP (MoE models, moe_plan.py): per MoE layer per micro-batch 2 AlltoAll forward (dispatch,
  combine) and 2 backward, +2 with full recompute, each of R x h (R token rows this rank
  dispatches: b s tokens x top_k, or capacity x experts); the expert weights' gradients over
  the dp / ep ranks holding the same experts (group "edp"). Experts are split by TP like the
  dense FFN (MindFormers), so an MoE layer has the dense layer's TP/SP collectives.

Each collective is on a link class: intra-node when its group lies within `devices_per_node`
consecutive ranks (TP first, then DP, then PP in the rank order), inter-node otherwise
(`comm_by_link`).

**Memory with pipelining** (activation_memory.py): stage i holds `in_flight_chunks(p, m, v, i)`
chunks of L/(p v) layers - min(p - i, m) micro-batches for 1F1B; for interleaved 1F1B stage 0
holds L (1 + (p - 1)/(p v)) layers' worth once m v >= (v + 1) p - 1.

**Time** (step_time.py), per rank of a stage: compute = matmul FLOPs (fwd 2 per MAC, bwd twice
that, + the recomputed forward) at the device's matmul peak for the compute dtype (times an
`efficiency` if given); each collective from comm_cost.LinkModel (alpha-beta, ring, the link
class's bandwidth). What is exposed - assumptions, stated:
* TP/SP collectives inside a layer sit between dependent GEMMs: all exposed with one copy; with
  `fine_grain_interleave` n > 1 the exposed share is the multi-copy chain's (step_time.py: the
  simulator package when importable, else the closed form k c + x/n of n copies of k pairs).
* other per-micro-batch communication (vocabulary-parallel TP, AlltoAll, p2p) is exposed;
* the pipeline stretches the per-micro-batch work (compute + exposed) by 1 + (p - 1)/(v m): the
  bubble (p - 1)/(v m) of Narayanan et al. 2021, §2.2 (`bubble_s` is its compute part);
* gradient reductions (DP, ZeRO-1's reduce-scatter, SP's partial sums) run during the last
  micro-batch's backward, ZeRO-2/3's per-micro-batch reduce-scatters during every backward: only
  what exceeds that compute is exposed; ZeRO-3's gathers are prefetched
  behind the step's compute; ZeRO-1/2's all-gather of the updated weights is exposed;
* the AdamW update is memory-bound (step_time.adam_update_seconds).
step = (compute + exposed per micro-batch) (1 + (p-1)/(v m)) + exposed gradient and gather
time + update; the plan's step time is its slowest stage's, and `mfu()` is PaLM's MFU at it.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field

from ..common.errors import OpTypeError, OpValueError
from .activation_memory import bubble_fraction, in_flight_chunks, korthikanti_layer_bytes, moe_ffn_activation_bytes, \
    moe_rows
from .comm_cost import COLLECTIVES, LinkModel, ring_received_bytes, ring_sent_bytes
from .config import LlamaConfig
from .moe_plan import MoESpec, moe_of, parameter_counts
from .step_time import adam_update_seconds, mfu, model_flops_per_token, overlap_exposed, simulated_tp_exposed_fraction, \
    tp_exposed_fraction

OPTIMIZER_LEVELS = ("level1", "level2", "level3")
RECOMPUTE_MODES = ("none", "selective", "full")
ATTENTION_KINDS = ("naive", "flash")
_ITEMSIZE = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8}
_FLAGS = {"data_parallel": "--dp", "model_parallel": "--tp", "pipeline_stage": "--pp",
          "micro_batch_num": "--micro-batches", "use_seq_parallel": "--seq-parallel",
          "vocab_emb_dp": "--vocab-emb-dp", "optimizer_level": "--zero",
          "parallel_optimizer_threshold": "--zero-threshold", "recompute": "--recompute",
          "world_size": "--world-size", "batch_size": "--batch", "seq_len": "--seq",
          "sp_regather": "--sp-keep-gathered",
          "attention": "--attention", "virtual_pipeline_stages": "--vpp", "expert_parallel": "--ep",
          "fine_grain_interleave": "--multi-copy"}
_OP = "parallel_plan"


def _name(field_name: str) -> str:
    """'model_parallel (--tp)': the library's name and the command line's, so one message serves both."""
    flag = _FLAGS.get(field_name)
    return f"{field_name} ({flag})" if flag else field_name


def _positive(field_name, v) -> int:
    if not isinstance(v, numbers.Integral) or isinstance(v, bool) or v < 1:
        raise OpValueError(_OP, f"{_name(field_name)} as an int >= 1", repr(v))
    return int(v)


# ------------------------------------------------------------------------------------------------
# the strategy and the numerics
@dataclass(frozen=True)
class ParallelStrategy:
    """A MindFormers-style `parallel_config` plus optimizer parallel and recomputation."""

    data_parallel: int = 1
    model_parallel: int = 1
    pipeline_stage: int = 1
    micro_batch_num: int = 1
    use_seq_parallel: bool = False
    vocab_emb_dp: bool = True
    optimizer_level: str | None = None          # None (off), "level1", "level2", "level3"
    parallel_optimizer_threshold: float = 64    # KB: smaller parameters are not sharded
    recompute: str = "none"                     # "none", "selective", "full"
    # under SP, what the backward of a GEMM fed by an all-gather uses: True (Megatron) keeps
    # only the sequence shard and all-gathers it again; False keeps the gathered tensor (what an
    # autodiff tape does: more memory, two fewer all-gathers per layer)
    sp_regather: bool = True
    # issue 16: interleaved 1F1B (MindSpore pipeline_config "pipeline_interleave", MindFormers
    # pp_interleave_num: model chunks per device), expert parallel (MindFormers expert_parallel:
    # ranks the experts are spread over, carved out of data_parallel), fine-grained multi-copy
    # (MindFormers fine_grain_interleave: copies a TP layer is split into, needs sequence parallel)
    virtual_pipeline_stages: int = 1
    expert_parallel: int = 1
    fine_grain_interleave: int = 1

    def __post_init__(self):
        for f in ("data_parallel", "model_parallel", "pipeline_stage", "micro_batch_num", "virtual_pipeline_stages",
                  "expert_parallel", "fine_grain_interleave"):
            object.__setattr__(self, f, _positive(f, getattr(self, f)))
        for f in ("use_seq_parallel", "vocab_emb_dp", "sp_regather"):
            if not isinstance(getattr(self, f), bool):
                raise OpTypeError(_OP, f"{_name(f)} as True or False", repr(getattr(self, f)))
        if self.optimizer_level not in (None,) + OPTIMIZER_LEVELS:
            raise OpValueError(_OP, f"{_name('optimizer_level')} among {OPTIMIZER_LEVELS} (or None: off)",
                               repr(self.optimizer_level))
        th = self.parallel_optimizer_threshold
        if not isinstance(th, numbers.Real) or isinstance(th, bool) or not 0 <= th < math.inf:
            raise OpValueError(_OP, f"{_name('parallel_optimizer_threshold')} as a number of KB >= 0", repr(th))
        if self.recompute not in RECOMPUTE_MODES:
            raise OpValueError(_OP, f"{_name('recompute')} among {RECOMPUTE_MODES}", repr(self.recompute))
        v, p, m = self.virtual_pipeline_stages, self.pipeline_stage, self.micro_batch_num
        if v > 1 and (p == 1 or m % p):
            raise OpValueError(_OP, f"{_name('virtual_pipeline_stages')} > 1 only with {_name('pipeline_stage')} > 1 "
                                    f"and {_name('micro_batch_num')} a multiple of it (Megatron's interleaved 1F1B)",
                               f"virtual_pipeline_stages={v}, pipeline_stage={p}, micro_batch_num={m}")
        if self.data_parallel % self.expert_parallel:
            raise OpValueError(_OP, f"{_name('expert_parallel')} dividing {_name('data_parallel')} "
                                    f"({self.data_parallel}): the expert groups are carved out of data parallel",
                               f"expert_parallel={self.expert_parallel}")
        if self.fine_grain_interleave > 1 and not (self.model_parallel > 1 and self.use_seq_parallel):
            raise OpValueError(_OP, f"{_name('fine_grain_interleave')} > 1 only with {_name('model_parallel')} > 1 "
                                    f"and {_name('use_seq_parallel')} (MindFormers' rule: the copies overlap the "
                                    f"sequence-parallel all-gathers and reduce-scatters)",
                               f"fine_grain_interleave={self.fine_grain_interleave}, model_parallel="
                               f"{self.model_parallel}, use_seq_parallel={self.use_seq_parallel}")

    @classmethod
    def from_auto_parallel_context(cls, model_parallel: int = 1, **parallel_config) -> "ParallelStrategy":
        """The strategy `ms.set_auto_parallel_context(...)` describes: `device_num`,
        `pipeline_stages` and optimizer parallel (`enable_parallel_optimizer` with
        `parallel_optimizer_config`'s level and threshold) come from the context; the model-side
        knobs MindFormers keeps in its `parallel_config` (model_parallel, micro_batch_num,
        use_seq_parallel, vocab_emb_dp, recompute) are passed here. data_parallel is what is left:
        device_num / (model_parallel * pipeline_stages)."""
        from ..common.auto_parallel_context import get_auto_parallel_context as get
        devices, pp = get("device_num"), get("pipeline_stages")
        tp = _positive("model_parallel", model_parallel)
        if devices % (tp * pp):
            raise OpValueError(_OP, f"device_num divisible by {_name('model_parallel')} x pipeline_stages = {tp * pp}",
                               f"device_num={devices}")
        level = threshold = None
        if get("enable_parallel_optimizer"):
            config = get("parallel_optimizer_config") or {}
            level = config.get("optimizer_level", "level1")
            threshold = config.get("parallel_optimizer_threshold")
        extra = {} if threshold is None else {"parallel_optimizer_threshold": threshold}
        return cls(data_parallel=devices // (tp * pp), model_parallel=tp, pipeline_stage=pp,
                   optimizer_level=level, **extra, **parallel_config)

    @property
    def world_size(self) -> int:
        return self.data_parallel * self.model_parallel * self.pipeline_stage

    @property
    def zero_level(self) -> int:
        """0 (off) .. 3."""
        return 0 if self.optimizer_level is None else OPTIMIZER_LEVELS.index(self.optimizer_level) + 1

    def describe(self) -> str:
        s = f"dp={self.data_parallel} tp={self.model_parallel} pp={self.pipeline_stage}"
        if self.pipeline_stage > 1 or self.micro_batch_num > 1:
            s += f" micro_batch_num={self.micro_batch_num}"
        if self.virtual_pipeline_stages > 1:
            s += f" vpp={self.virtual_pipeline_stages}"
        if self.expert_parallel > 1:
            s += f" ep={self.expert_parallel}"
        if self.fine_grain_interleave > 1:
            s += f" multi_copy={self.fine_grain_interleave}"
        if self.use_seq_parallel:
            s += " seq_parallel" + ("" if self.sp_regather else "(keeps gathered)")
        s += " vocab_emb_dp" if self.vocab_emb_dp else " vocab_parallel"
        if self.optimizer_level:
            s += f" optimizer_parallel={self.optimizer_level}(threshold {self.parallel_optimizer_threshold:g} KB)"
        if self.recompute != "none":
            s += f" recompute={self.recompute}"
        return s


def _dtype_name(what, v) -> str:
    name = getattr(v, "name", v)           # a minispore DType or its name
    name = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}.get(name, name)
    if name not in _ITEMSIZE:
        raise OpValueError(_OP, f"{what} among {sorted(_ITEMSIZE)}", repr(v))
    return name


@dataclass(frozen=True)
class Precision:
    """Bytes per element of what a training rank stores.

    * `compute_dtype`: activations and the TP/SP/PP messages.
    * `param_dtype`: the weights the forward reads (and ZeRO gathers); `grad_dtype` (default:
      the parameter dtype) the gradients and the DP reductions.
    * `master_weights` (default: when the parameters are 16-bit): a float32 copy in the optimizer.
      AdamW's two moments are float32. Conventions this reproduces: ZeRO's mixed precision
      (fp16 params, fp16 grads, master: 2 + 2 + 12 = 16 bytes/param), Megatron's (bf16 params,
      fp32 grads: 18), MindFormers' (fp32 params and grads, bf16 compute: 4 + 4 + 8 = 16).
    """

    compute_dtype: str = "float32"
    param_dtype: str = "float32"
    grad_dtype: str | None = None
    master_weights: bool | None = None

    def __post_init__(self):
        object.__setattr__(self, "compute_dtype", _dtype_name("compute dtype (--dtype)", self.compute_dtype))
        object.__setattr__(self, "param_dtype", _dtype_name("parameter dtype (--param-dtype)", self.param_dtype))
        grad = self.param_dtype if self.grad_dtype is None else self.grad_dtype
        object.__setattr__(self, "grad_dtype", _dtype_name("gradient dtype (--grad-dtype)", grad))
        if self.master_weights is None:
            object.__setattr__(self, "master_weights", _ITEMSIZE[self.param_dtype] < 4)
        elif not isinstance(self.master_weights, bool):
            raise OpTypeError(_OP, "master_weights as True, False or None", repr(self.master_weights))

    @property
    def act_bytes(self) -> int:
        return _ITEMSIZE[self.compute_dtype]

    @property
    def param_bytes(self) -> int:
        return _ITEMSIZE[self.param_dtype]

    @property
    def grad_bytes(self) -> int:
        return _ITEMSIZE[self.grad_dtype]

    @property
    def optimizer_bytes(self) -> int:
        """AdamW per parameter: m and v in float32, plus the float32 master copy if any."""
        return 8 + (4 if self.master_weights else 0)


# ------------------------------------------------------------------------------------------------
# parameters and their shards
@dataclass(frozen=True)
class ParamSpec:
    """One weight: global shape (MindSpore's (out, in) for Dense), the axis tensor parallel splits
    (None: replicated), the pipeline stage holding it, and for an MoE expert's weight the expert's
    index (expert parallel places expert e on the ep rank e // (num_experts / ep))."""

    name: str
    shape: tuple
    tp_axis: int | None
    stage: int
    expert: int | None = None

    def local_shape(self, tp: int) -> tuple:
        if self.tp_axis is None or tp == 1:
            return self.shape
        s = list(self.shape)
        s[self.tp_axis] //= tp
        return tuple(s)


def stage_layer_counts(n_layers: int, pp: int) -> list:
    """Layers per pipeline stage, as even as possible, earlier stages taking the remainder."""
    return [n_layers // pp + (1 if i < n_layers % pp else 0) for i in range(pp)]


def llama_parameters(cfg: LlamaConfig, strategy: ParallelStrategy, moe: MoESpec | None = None) -> list:
    """Every weight of `Llama(cfg)` with its TP split axis and its pipeline stage. With an MoE spec
    (default: the config's own, moe_plan.moe_of) each layer's feed-forward is a router (E, h,
    replicated) and E experts' w1, w2, w3, split by TP like the dense ones (MindFormers' expert
    weights: the expert axis over expert_parallel, the FFN axis over model_parallel)."""
    moe = moe_of(cfg) if moe is None else moe
    h, f = cfg.dim, cfg.hidden_dim
    q, kv = cfg.n_heads * cfg.head_dim, cfg.n_kv_heads * cfg.head_dim
    pp = strategy.pipeline_stage
    vocab_axis = None if strategy.vocab_emb_dp else 0
    params = [ParamSpec("tok_embeddings.embedding_table", (cfg.vocab_size, h), vocab_axis, 0)]
    layer = 0
    for stage, count in enumerate(stage_layer_counts(cfg.n_layers, pp)):
        for _ in range(count):
            p = f"layers.{layer}."
            params += [ParamSpec(p + "attention_norm.weight", (h,), None, stage),
                       ParamSpec(p + "attention.wq.weight", (q, h), 0, stage),
                       ParamSpec(p + "attention.wk.weight", (kv, h), 0, stage),
                       ParamSpec(p + "attention.wv.weight", (kv, h), 0, stage),
                       ParamSpec(p + "attention.wo.weight", (h, q), 1, stage),
                       ParamSpec(p + "ffn_norm.weight", (h,), None, stage)]
            if moe is None:
                params += [ParamSpec(p + "feed_forward.w1.weight", (f, h), 0, stage),
                           ParamSpec(p + "feed_forward.w2.weight", (h, f), 1, stage),
                           ParamSpec(p + "feed_forward.w3.weight", (f, h), 0, stage)]
            else:
                params.append(ParamSpec(p + "feed_forward.router.weight", (moe.num_experts, h), None, stage))
                for e in range(moe.num_experts):
                    x = f"{p}feed_forward.experts.{e}."
                    params += [ParamSpec(x + "w1.weight", (f, h), 0, stage, e),
                               ParamSpec(x + "w2.weight", (h, f), 1, stage, e),
                               ParamSpec(x + "w3.weight", (f, h), 0, stage, e)]
            layer += 1
    params.append(ParamSpec("norm.weight", (h,), None, pp - 1))
    if not cfg.tie_embeddings:
        params.append(ParamSpec("output.weight", (cfg.vocab_size, h), vocab_axis, pp - 1))
    elif pp > 1:   # the last stage keeps its own copy of the tied table (Megatron's embedding group)
        params.append(ParamSpec("tok_embeddings.embedding_table (tied copy)", (cfg.vocab_size, h), vocab_axis, pp - 1))
    return params


def zero_sharded(local_shape: tuple, itemsize: int, dp: int, level: int, threshold_kb: float) -> bool:
    """Does optimizer parallel shard this parameter slice over the DP group? (MindSpore: along
    dimension 0, only when it divides by dp, and only slices of at least the threshold.)"""
    if level == 0 or dp == 1:
        return False
    nbytes = math.prod(local_shape) * itemsize
    return nbytes >= threshold_kb * 1024 and local_shape[0] % dp == 0


def static_bytes(local_shapes, dp: int, level: int, precision: Precision, threshold_kb: float = 0) -> dict:
    """{"parameters", "gradients", "optimizer"} bytes one rank stores for the parameter slices
    `local_shapes` (after TP), with ZeRO `level` (0-3) over `dp` ranks."""
    out = {"parameters": 0, "gradients": 0, "optimizer": 0}
    for shape in local_shapes:
        n = math.prod(shape)
        shard = n // dp if zero_sharded(shape, precision.param_bytes, dp, level, threshold_kb) else n
        out["parameters"] += (shard if level >= 3 else n) * precision.param_bytes
        out["gradients"] += (shard if level >= 2 else n) * precision.grad_bytes
        out["optimizer"] += (shard if level >= 1 else n) * precision.optimizer_bytes
    return out


# ------------------------------------------------------------------------------------------------
# activations
def _exact_div(num: int, den: int, what: str) -> int:
    if num % den:
        raise OpValueError(_OP, f"{what} divisible by {den}", str(num))
    return num // den


def llama_layer_activation_bytes(cfg: LlamaConfig, batch_size: int, seq_len: int, tp: int = 1,
                                 seq_parallel: bool = False, recompute: str = "none", attention: str = "naive",
                                 itemsize: int = 2, sp_regather: bool = True) -> int:
    """Bytes one LLaMA block keeps for its backward pass, per micro-batch, on one TP rank (the
    module docstring lists the tensors). `sp_regather=False`: under SP the two norm outputs are
    kept all-gathered (full sequence) instead of as their shard."""
    if recompute not in RECOMPUTE_MODES:
        raise OpValueError(_OP, f"{_name('recompute')} among {RECOMPUTE_MODES}", repr(recompute))
    if attention not in ATTENTION_KINDS:
        raise OpValueError(_OP, f"{_name('attention')} among {ATTENTION_KINDS}", repr(attention))
    b, s, t = batch_size, seq_len, tp
    h, f, a = cfg.dim, cfg.hidden_dim, cfg.n_heads
    q, kv = a * cfg.head_dim, cfg.n_kv_heads * cfg.head_dim
    r = t if seq_parallel else 1                       # the replicated regions split along s under SP
    tokens = b * s
    if recompute == "full":
        return _exact_div(tokens * h * itemsize, r, "the layer input")
    drop = cfg.dropout > 0
    # norm regions (replicated over TP, sequence-split under SP): the two RMSNorm inputs, their
    # float32 1/rms per token, the two residual-dropout masks, and the two norm outputs
    replicated = _exact_div(tokens * h * (2 * itemsize + (2 if drop else 0)) + 2 * tokens * 4, r, "the norm regions")
    gathered = tokens * h * 2 * itemsize                # the two norm outputs, inputs of the QKV / w1,w3 GEMMs
    replicated += _exact_div(gathered, r, "the norm regions") if sp_regather else gathered
    # TP regions: q and k after RoPE, v, the attention output wo reads, the four SwiGLU tensors.
    # The naive core multiplies with k and v repeated to every query head (repeat_kv), and those
    # copies are what it keeps; selective recompute keeps the core's inputs (k, v unrepeated).
    kv_kept = q if (attention == "naive" and recompute == "none") else kv
    sharded = _exact_div(tokens * (2 * q + 2 * kv_kept + 4 * f) * itemsize, t, "the TP regions")
    if recompute == "selective":
        core = 0
    elif attention == "flash":                          # its output O (wo reads a reshaped copy) and the lse
        core = _exact_div(tokens * q * itemsize + a * s * b * 4, t, "the flash attention state")
    else:
        core = _exact_div(a * s * s * b * (itemsize + ((1 + itemsize) if drop else 0)), t, "the attention scores")
    return replicated + sharded + core


# ------------------------------------------------------------------------------------------------
# the plan
@dataclass
class Collective:
    """One kind of collective a rank issues per step: `calls` of them moving `payload_bytes` in
    all (comm_cost's payload convention; calls on different parameters may differ in size).

    `overlap` says what the time model (module docstring, "Time") may hide it behind:
    "tp-layer" the TP/SP collectives inside a layer (exposed, unless multi-copy hides a share),
    "exposed" on the critical path (other per-micro-batch TP, AlltoAll, p2p, after the update),
    "backward" gradient reductions (overlap the last micro-batch's backward; "backward-mb": those
    issued every micro-batch, ZeRO-2/3's reduce-scatters, overlap every backward),
    "compute" ZeRO-3's parameter gathers (prefetched during compute)."""

    group: str          # "tp", "dp", "pp", "embedding", "ep", "edp"
    kind: str           # one of comm_cost.COLLECTIVES
    calls: int
    payload_bytes: int  # summed over the calls
    purpose: str
    n: int = 1          # ranks in the group
    span: int = 1       # consecutive ranks the group spans (intra- or inter-node)
    overlap: str = "exposed"

    @property
    def payload_per_call(self) -> float:
        return self.payload_bytes / self.calls

    @property
    def sent_bytes(self) -> float:
        return ring_sent_bytes(self.kind, self.payload_bytes, self.n)

    @property
    def received_bytes(self) -> float:
        return ring_received_bytes(self.kind, self.payload_bytes, self.n)

    def time(self, links: LinkModel) -> float:
        return links.time(self.kind, self.payload_bytes, self.n, self.span, self.calls)

    def link(self, links: LinkModel) -> str:
        """'intra-node' when the whole group lies within one node of `links.devices_per_node`
        devices, else 'inter-node' (the ring then runs at the slower link's pace)."""
        return "intra-node" if self.span <= links.devices_per_node else "inter-node"


@dataclass
class StagePlan:
    """What every rank of one pipeline stage stores and sends."""

    stage: int
    ranks: range
    layers: int
    in_flight: int
    memory: dict                       # parameters, gradients, optimizer, activations (bytes)
    collectives: list = field(default_factory=list)
    flops: float = 0.0                 # matmul FLOPs per step (with recomputation: hardware FLOPs)
    times: dict = field(default_factory=dict)
    in_flight_chunks: int = 0          # model chunks (L / (p v) layers each) whose activations are held
    activation_layers: float = 0.0     # = in_flight_chunks * layers / v: layers' worth of one micro-batch

    @property
    def total_bytes(self) -> int:
        return sum(self.memory.values())


@dataclass
class ParallelPlan:
    """The result of `plan_parallel`: one StagePlan per pipeline stage, and the views on them
    (`memory`, `comm_bytes`, `comm_by_link`, `step_time_s`, `mfu`, `table`, `to_dict`)."""

    model: str
    cfg: LlamaConfig
    strategy: ParallelStrategy
    precision: Precision
    batch_size: int
    seq_len: int
    attention: str
    links: LinkModel
    device: object
    stages: list
    moe: MoESpec | None = None
    efficiency: float = 1.0
    tp_overlap_source: str = "none"

    @property
    def global_batch(self) -> int:
        return self.batch_size * self.strategy.data_parallel * self.strategy.micro_batch_num

    def stage_of_rank(self, rank: int) -> StagePlan:
        if not isinstance(rank, numbers.Integral) or not 0 <= rank < self.strategy.world_size:
            raise OpValueError(_OP, f"a rank in [0, {self.strategy.world_size})", repr(rank))
        return self.stages[rank // (self.strategy.data_parallel * self.strategy.model_parallel)]

    def rank_coordinates(self, rank: int) -> dict:
        """{'dp', 'tp', 'pp'} indices of a world rank (tensor parallel fastest); with expert
        parallel also 'ep' (the rank's place in its expert group: consecutive DP indices)."""
        self.stage_of_rank(rank)
        t, d = self.strategy.model_parallel, self.strategy.data_parallel
        out = {"tp": rank % t, "dp": (rank // t) % d, "pp": rank // (t * d)}
        if self.strategy.expert_parallel > 1:
            out["ep"] = out["dp"] % self.strategy.expert_parallel
        return out

    def comm_bytes(self, stage: int = 0, by_group: bool = False) -> dict:
        """The per-collective byte table of one rank of `stage` for one step, as plain dicts:
        {collective: {"calls", "payload_bytes", "sent_bytes", "received_bytes"}} - or, with
        `by_group`, {group: {collective: {...}}}. Payload and ring conventions: comm_cost.py."""
        out: dict = {}
        for c in self._stage(stage).collectives:
            table = out.setdefault(c.group, {}) if by_group else out
            row = table.setdefault(c.kind, {"calls": 0, "payload_bytes": 0, "sent_bytes": 0.0, "received_bytes": 0.0})
            row["calls"] += c.calls
            row["payload_bytes"] += c.payload_bytes
            row["sent_bytes"] += c.sent_bytes
            row["received_bytes"] += c.received_bytes
        return out

    def comm_by_link(self, stage: int = 0) -> dict:
        """{'intra-node' | 'inter-node': {collective: {"calls", "sent_bytes", "time_s"}}} of one rank
        of `stage` per step: which link class carries what (LinkModel.devices_per_node decides)."""
        out: dict = {}
        for c in self._stage(stage).collectives:
            row = out.setdefault(c.link(self.links), {}).setdefault(c.kind, {"calls": 0, "sent_bytes": 0.0,
                                                                               "time_s": 0.0})
            row["calls"] += c.calls
            row["sent_bytes"] += c.sent_bytes
            row["time_s"] += c.time(self.links)
        return out

    def memory(self, stage: int = 0) -> dict:
        """{"parameters", "gradients", "optimizer", "activations", "total"} bytes of one rank of `stage`."""
        m = dict(self._stage(stage).memory)
        m["total"] = sum(m.values())
        return m

    def peak_memory(self) -> tuple:
        """(bytes, stage) of the rank that stores the most."""
        st = max(self.stages, key=lambda s: s.total_bytes)
        return st.total_bytes, st.stage

    @property
    def step_time_s(self) -> float:
        """Predicted seconds per step: the slowest stage's (the pipeline flushes every step)."""
        return max(st.times.get("step_s", 0.0) for st in self.stages)

    @property
    def tokens_per_step(self) -> int:
        return self.global_batch * self.seq_len

    def model_flops_per_token(self) -> float:
        """PaLM's 6 N + 12 L h s, N = active non-embedding parameters (step_time.py)."""
        n = parameter_counts(self.cfg, self.moe)["active_non_embedding"]
        return model_flops_per_token(n, self.cfg.n_layers, self.cfg.n_heads * self.cfg.head_dim, self.seq_len)

    def mfu(self) -> float:
        """Model FLOPs utilisation (PaLM, Appendix B) at the predicted step time, against the
        device's peak (not the derated `efficiency`); 0 without a device."""
        if self.device is None or self.step_time_s <= 0:
            return 0.0
        n = parameter_counts(self.cfg, self.moe)["active_non_embedding"]
        return mfu(self.tokens_per_step / self.step_time_s, n, self.cfg.n_layers, self.cfg.n_heads * self.cfg.head_dim,
                   self.seq_len, self.strategy.world_size, self.device.peak_flops("matmul", self.precision.compute_dtype))

    def hfu(self) -> float:
        """Hardware FLOPs utilisation: every matmul FLOP the ranks run (recomputation included)."""
        if self.device is None or self.step_time_s <= 0:
            return 0.0
        per_stage = self.strategy.data_parallel * self.strategy.model_parallel
        total = sum(st.flops for st in self.stages) * per_stage
        return total / (self.step_time_s * self.strategy.world_size
                        * self.device.peak_flops("matmul", self.precision.compute_dtype))

    def _stage(self, stage) -> StagePlan:
        if not isinstance(stage, numbers.Integral) or isinstance(stage, bool) or not 0 <= stage < len(self.stages):
            raise OpValueError(_OP, f"a pipeline stage in [0, {len(self.stages)})", repr(stage))
        return self.stages[stage]

    def to_dict(self) -> dict:
        s = self.strategy
        return {
            "model": self.model, "world_size": s.world_size, "strategy": {
                k: getattr(s, k) for k in ("data_parallel", "model_parallel", "pipeline_stage", "micro_batch_num",
                                           "use_seq_parallel", "vocab_emb_dp", "optimizer_level",
                                           "parallel_optimizer_threshold", "recompute", "sp_regather",
                                           "virtual_pipeline_stages", "expert_parallel", "fine_grain_interleave")},
            "precision": {"compute_dtype": self.precision.compute_dtype, "param_dtype": self.precision.param_dtype,
                          "grad_dtype": self.precision.grad_dtype, "master_weights": self.precision.master_weights},
            "batch_size": self.batch_size, "seq_len": self.seq_len, "global_batch": self.global_batch,
            "attention": self.attention, "links": self.links.describe(),
            "device": getattr(self.device, "name", None), "efficiency": self.efficiency,
            "moe": None if self.moe is None else {"num_experts": self.moe.num_experts, "top_k": self.moe.top_k,
                                                  "capacity_factor": self.moe.capacity_factor},
            "step_time_s": self.step_time_s, "mfu": self.mfu(), "hfu": self.hfu(),
            "tp_overlap_model": self.tp_overlap_source,
            "stages": [{"stage": st.stage, "ranks": [st.ranks.start, st.ranks.stop - 1], "layers": st.layers,
                        "in_flight_micro_batches": st.in_flight, "in_flight_chunks": st.in_flight_chunks,
                        "activation_layers": st.activation_layers, "memory": self.memory(st.stage),
                        "comm": self.comm_bytes(st.stage, by_group=True), "comm_by_link": self.comm_by_link(st.stage),
                        "collectives": [{"group": c.group, "kind": c.kind, "calls": c.calls,
                                         "payload_bytes": c.payload_bytes, "sent_bytes": c.sent_bytes, "n": c.n,
                                         "link": c.link(self.links), "overlap": c.overlap,
                                         "time_s": c.time(self.links), "purpose": c.purpose}
                                        for c in st.collectives],
                        "flops": st.flops, "times": st.times} for st in self.stages],
        }

    def table(self) -> str:
        """The per-rank report: memory per stage, then each stage's collectives and times."""
        s = self.strategy
        moe = "" if self.moe is None else (f"; MoE {self.moe.num_experts} experts, top-{self.moe.top_k}"
                                           + (f", capacity factor {self.moe.capacity_factor:g}"
                                              if self.moe.capacity_factor else ", no capacity limit"))
        lines = [f"Parallel DryRun: {self.model}, {s.world_size:,} ranks ({s.describe()})",
                 f"  micro-batch {self.batch_size} x seq {self.seq_len}, global batch {self.global_batch}; "
                 f"compute {self.precision.compute_dtype}, params {self.precision.param_dtype}, "
                 f"grads {self.precision.grad_dtype}, AdamW state {self.precision.optimizer_bytes} B/param"
                 f"{' (fp32 master + m + v)' if self.precision.master_weights else ' (fp32 m + v)'}; "
                 f"{self.attention} attention{moe}",
                 "",
                 "Memory per rank (GiB; one row per pipeline stage, its ranks are alike):",
                 f"  {'stage':>5} {'ranks':>13} {'layers':>6} {'params':>9} {'grads':>9} {'optim':>9} "
                 f"{'activ':>9} {'total':>9}  in flight"]
        for st in self.stages:
            m = st.memory
            ranks = f"{st.ranks.start}-{st.ranks.stop - 1}"
            held = (f"{st.in_flight} micro-batch{'es' if st.in_flight > 1 else ''}" if s.virtual_pipeline_stages == 1 else
                    f"{st.in_flight_chunks} chunks = {st.activation_layers:g} layers' worth")
            lines.append(f"  {st.stage:>5} {ranks:>13} {st.layers:>6} " + " ".join(
                f"{m[k] / 2**30:>9.2f}" for k in ("parameters", "gradients", "optimizer", "activations"))
                + f" {st.total_bytes / 2**30:>9.2f}  {held}")
        lines.append("  (stored state + activations saved for backward; temporaries, workspaces, ZeRO-3's gather "
                     "buffers and fragmentation are not counted)")
        if self.device is not None:
            peak, where = self.peak_memory()
            usable = self.device.usable_bytes
            lines.append(f"  peak {peak / 2**30:.2f} GiB (stage {where}) of {usable / 2**30:.1f} GiB usable on "
                         f"{self.device.display_name}: {'fits' if peak <= usable else 'DOES NOT FIT'}")
        for group in _alike(self.stages):
            st = group[0]
            which = f"stage {st.stage}" if len(group) == 1 else f"stages {st.stage}-{group[-1].stage}"
            lines += ["", f"Communication per rank of {which}, one step (payload: tensor size per the op; "
                          f"sent: ring algorithm):",
                      f"  {'group':<9} {'collective':<13} {'n':>5} {'calls':>7} {'payload/call':>13} "
                      f"{'payload':>11} {'sent':>11} {'link':>5} {'time ms':>9}  purpose"]
            for c in st.collectives:
                t = c.time(self.links)
                link = "intra" if c.link(self.links) == "intra-node" else "inter"
                lines.append(f"  {c.group:<9} {c.kind:<13} {c.n:>5} {c.calls:>7} {_size(c.payload_per_call):>13} "
                             f"{_size(c.payload_bytes):>11} {_size(c.sent_bytes):>11} {link:>5} {t * 1e3:>9.2f}  "
                             f"{c.purpose}")
            if not st.collectives:
                lines.append("  (none: one rank, nothing to communicate)")
            by_link = self.comm_by_link(st.stage)
            sent = ", ".join(f"{k} {_size(sum(r['sent_bytes'] for r in v.values()))}" for k, v in sorted(by_link.items()))
            tm = st.times
            lines.append(f"  totals: sent {_size(sum(c.sent_bytes for c in st.collectives))}"
                         + (f" ({sent})" if sent else "") + f"; step time ~{tm['step_s'] * 1e3:.1f} ms = compute "
                         f"{tm['compute_s'] * 1e3:.1f} + bubble {tm['bubble_s'] * 1e3:.1f} + exposed communication "
                         f"{tm['exposed_comm_s'] * 1e3:.1f} (of {tm['comm_s'] * 1e3:.1f}) + optimizer "
                         f"{tm['optimizer_s'] * 1e3:.1f}")
            if tm.get("tp_comm_s"):
                lines.append(f"  TP/SP in-layer communication {tm['tp_comm_s'] * 1e3:.1f} ms, "
                             f"{tm['tp_hidden_fraction']:.0%} hidden "
                             + (f"by {s.fine_grain_interleave} copies ({self.tp_overlap_source})"
                                if s.fine_grain_interleave > 1 else "(one copy: none)"))
        dev = getattr(self.device, "display_name", "no device")
        p, v, m = s.pipeline_stage, s.virtual_pipeline_stages, s.micro_batch_num
        lines += ["", f"Pipeline bubble (p - 1)/(v m) = {p - 1}/({v} x {m}) = {bubble_fraction(p, m, v):.4f}"
                  + ("" if v == 1 else f"; interleaving holds 1 + (p-1)/(p v) = {1 + (p - 1) / (p * v):.4f} x L "
                                       f"layers on stage 0 once m v >= (v+1) p - 1")]
        if self.device is not None:
            lines.append(f"Step {self.step_time_s * 1e3:.1f} ms, {self.tokens_per_step / self.step_time_s:,.0f} tokens/s, "
                         f"MFU {self.mfu():.1%} (PaLM: 6N + 12Lhs per token, N = "
                         f"{parameter_counts(self.cfg, self.moe)['active_non_embedding'] / 1e9:.2f}B active "
                         f"non-embedding), HFU {self.hfu():.1%}")
        eff = "" if self.efficiency == 1 else f" x efficiency {self.efficiency:g}"
        if self.device is not None and not getattr(self.device, "calibrated", False):
            eff += " [datasheet peak, not measured" + ("; Huawei publishes no 910B datasheet: unverified]"
                                                       if "910" in self.device.name else "]")
        lines += [f"Time model: compute = matmul FLOPs at the peak of {dev} ({self.precision.compute_dtype}){eff}; "
                  f"{self.links.describe()}; exposed: TP/SP in-layer collectives (minus multi-copy's hidden share), "
                  f"AlltoAll, p2p and post-update gathers; gradient reductions hide behind the last micro-batch's "
                  f"backward, ZeRO-3 gathers behind compute (assumptions, not measurements)."]
        return "\n".join(lines)


def _alike(stages) -> list:
    """Consecutive stages with the same collectives and times, grouped (the middle stages of a
    deep pipeline are all alike: the report shows them once)."""
    groups: list = []
    for st in stages:
        if groups and groups[-1][0].collectives == st.collectives and groups[-1][0].times == st.times:
            groups[-1].append(st)
        else:
            groups.append([st])
    return groups


def _size(n: float) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n:.0f} B"


def _check(cfg: LlamaConfig, s: ParallelStrategy, seq: int, moe: MoESpec | None = None) -> None:
    t = s.model_parallel
    for what, v in (("n_heads", cfg.n_heads), ("n_kv_heads", cfg.n_kv_heads), ("ffn_dim", cfg.hidden_dim)):
        if v % t:
            raise OpValueError(_OP, f"{_name('model_parallel')} dividing {what} ({v})", f"model_parallel={t}")
    if not s.vocab_emb_dp and cfg.vocab_size % t:
        raise OpValueError(_OP, f"{_name('model_parallel')} dividing vocab_size ({cfg.vocab_size}) for the "
                                f"vocabulary-parallel embedding (or vocab_emb_dp=True)", f"model_parallel={t}")
    if s.use_seq_parallel and seq % t:
        raise OpValueError(_OP, f"{_name('seq_len')} divisible by {_name('model_parallel')} = {t} under sequence "
                                f"parallel", f"seq_len={seq}")
    if s.pipeline_stage > cfg.n_layers:
        raise OpValueError(_OP, f"{_name('pipeline_stage')} <= n_layers ({cfg.n_layers})",
                           f"pipeline_stage={s.pipeline_stage}")
    p, v = s.pipeline_stage, s.virtual_pipeline_stages
    if v > 1 and cfg.n_layers % (p * v):
        raise OpValueError(_OP, f"n_layers ({cfg.n_layers}) divisible by {_name('pipeline_stage')} x "
                                f"{_name('virtual_pipeline_stages')} = {p * v} (equal model chunks)",
                           f"pipeline_stage={p}, virtual_pipeline_stages={v}")
    ep = s.expert_parallel
    if moe is None and ep > 1:
        raise OpValueError(_OP, f"{_name('expert_parallel')} > 1 only for an MoE model (--experts, or a model "
                                f"with num_experts)", f"expert_parallel={ep} on a dense model")
    if moe is not None:
        if moe.num_experts % ep:
            raise OpValueError(_OP, f"{_name('expert_parallel')} dividing num_experts ({moe.num_experts})",
                               f"expert_parallel={ep}")


def plan_parallel(cfg: LlamaConfig, strategy: ParallelStrategy, *, batch_size: int = 1, seq_len: int | None = None,
                  precision: Precision | None = None, compute_dtype=None, attention: str = "naive",
                  world_size: int | None = None, links: LinkModel | None = None, device=None,
                  model: str = "llama", moe: MoESpec | None = None, efficiency: float = 1.0) -> ParallelPlan:
    """Per-rank memory, communication and time of one training step (see the module docstring).

    `batch_size` is the micro-batch size per DP rank (MindFormers' batch_size): the global batch
    is batch_size * data_parallel * micro_batch_num. `world_size`, when given, must equal
    dp * tp * pp. `device`: a DeviceProfile or name (graph.dryrun.devices) for the compute time
    (None: no compute time); `efficiency` derates its matmul peak for the compute time (MFU is
    always against the peak). `moe`: an MoESpec (default: the config's own, moe_plan.moe_of).
    Ranks of one stage are alike and stages with the same role and layer count share their
    numbers, so a plan of any world size costs a few stages' worth of arithmetic."""
    if not isinstance(cfg, LlamaConfig):
        raise OpTypeError(_OP, "a LlamaConfig", type(cfg).__name__)
    if not isinstance(strategy, ParallelStrategy):
        raise OpTypeError(_OP, "a ParallelStrategy", type(strategy).__name__)
    b = _positive("batch_size", batch_size)
    seq = cfg.max_seq_len if seq_len is None else _positive("seq_len", seq_len)
    if precision is None:
        precision = Precision() if compute_dtype is None else Precision(compute_dtype=compute_dtype)
    elif compute_dtype is not None:
        raise OpValueError(_OP, "either precision or compute_dtype", "both")
    if attention not in ATTENTION_KINDS:
        raise OpValueError(_OP, f"{_name('attention')} among {ATTENTION_KINDS}", repr(attention))
    if world_size is not None and _positive("world_size", world_size) != strategy.world_size:
        raise OpValueError(_OP, f"{_name('data_parallel')} x {_name('model_parallel')} x {_name('pipeline_stage')} "
                                f"= {_name('world_size')} ({world_size})",
                           f"{strategy.data_parallel} x {strategy.model_parallel} x {strategy.pipeline_stage} = "
                           f"{strategy.world_size}")
    if moe is None:
        moe = moe_of(cfg)
    elif not isinstance(moe, MoESpec):
        raise OpTypeError(_OP, "moe as an MoESpec or None", type(moe).__name__)
    if not isinstance(efficiency, numbers.Real) or isinstance(efficiency, bool) or not 0 < efficiency <= 1:
        raise OpValueError(_OP, "efficiency (--efficiency) in (0, 1]", repr(efficiency))
    _check(cfg, strategy, seq, moe)
    links = links or LinkModel()
    if device is not None:
        from ..graph.dryrun.devices import get_device
        device = get_device(device)
    params = llama_parameters(cfg, strategy, moe)
    by_stage: dict = {}
    for q in params:
        by_stage.setdefault(q.stage, []).append(q)
    ctx = _StageContext(cfg, strategy, precision, b, seq, attention, links, device, moe, float(efficiency))
    stages = [ctx.stage(i, by_stage.get(i, [])) for i in range(strategy.pipeline_stage)]
    return ParallelPlan(model, cfg, strategy, precision, b, seq, attention, links, device, stages, moe,
                        float(efficiency), ctx.tp_overlap_source)


class _StageContext:
    """Plans the stages of one strategy. What a stage stores, sends and computes depends only on
    its role (first, last) and its layer count, so those parts are computed once per kind of
    stage; only the activations (the in-flight count) differ stage by stage."""

    def __init__(self, cfg, s, prec, b, seq, attention, links, device, moe, efficiency):
        self.cfg, self.s, self.prec, self.b, self.seq = cfg, s, prec, b, seq
        self.attention, self.links, self.device, self.moe, self.efficiency = attention, links, device, moe, efficiency
        self.cache: dict = {}
        self.tp_overlap_source = "none"
        t = s.model_parallel
        self.sp = s.use_seq_parallel and t > 1
        e = prec.act_bytes
        dense = llama_layer_activation_bytes(cfg, b, seq, t, self.sp, s.recompute, attention, e, s.sp_regather)
        if moe is not None and s.recompute != "full":
            tokens = b * seq
            dense -= _exact_div(tokens * 4 * cfg.hidden_dim * e, t, "the SwiGLU tensors")
            dense += moe_ffn_activation_bytes(self.moe_tokens, cfg.dim, cfg.hidden_dim // t, moe.num_experts,
                                              moe.top_k, moe.capacity_factor, e)
        self.per_layer = dense

    @property
    def moe_tokens(self) -> int:
        """Tokens one rank routes per micro-batch: all b x s (under SP all-gathered first, as for
        the dense FFN; every TP rank dispatches them to its slice of the experts)."""
        return self.b * self.seq

    def stage(self, i, mine) -> StagePlan:
        s, cfg = self.s, self.cfg
        t, d, p, m, v = (s.model_parallel, s.data_parallel, s.pipeline_stage, s.micro_batch_num,
                         s.virtual_pipeline_stages)
        layers = cfg.n_layers // p if v > 1 else stage_layer_counts(cfg.n_layers, p)[i]
        first, last = i == 0, i == p - 1
        key = (first, last, layers)
        if key not in self.cache:
            self.cache[key] = self._shared(mine, first, last, layers)
        static, cols, flops, times = self.cache[key]
        # activations (see the module docstring and activation_memory.py)
        chunks = in_flight_chunks(p, m, v, i)
        held_layers = chunks * layers / v
        in_flight = min(p - i, m)
        e, tokens, r = self.prec.act_bytes, self.b * self.seq, (t if self.sp else 1)
        act = chunks * (layers // v) * self.per_layer
        ids_in_flight = in_flight if v == 1 else -(-chunks // v)
        if first:
            act += ids_in_flight * (tokens * 8 + (tokens * cfg.dim // r if cfg.dropout > 0 else 0))   # int64 ids, mask
        vocab_split = t > 1 and (not s.vocab_emb_dp or self.sp)          # logits split over TP ranks
        if last:                                        # final norm input, 1/rms and output; the logits
            h = cfg.dim
            head_input_gathered = self.sp and not s.vocab_emb_dp and not s.sp_regather
            act += (tokens * h * e + tokens * 4) // r + tokens * h * e // (1 if head_input_gathered else r)
            act += tokens * cfg.vocab_size * e // (t if vocab_split else 1)
        memory = dict(static)
        memory["activations"] = act
        start = i * t * d
        return StagePlan(i, range(start, start + t * d), layers, in_flight, memory, list(cols), flops, dict(times),
                         chunks, held_layers)

    def _shared(self, mine, first, last, layers):
        s, cfg, prec = self.s, self.cfg, self.prec
        t, d, p, m, v, ep = (s.model_parallel, s.data_parallel, s.pipeline_stage, s.micro_batch_num,
                             s.virtual_pipeline_stages, s.expert_parallel)
        moe, sp = self.moe, self.sp
        h, V = cfg.dim, cfg.vocab_size
        level, threshold = s.zero_level, s.parallel_optimizer_threshold
        dense = [q for q in mine if q.expert is None]
        local_experts = (moe.num_experts // ep) if moe is not None else 0
        experts = [q for q in mine if q.expert is not None and q.expert < local_experts]   # ep rank 0's, all alike
        dense_local = [q.local_shape(t) for q in dense]
        expert_local = [q.local_shape(t) for q in experts]
        static = static_bytes(dense_local, d, level, prec, threshold)
        for k, val in static_bytes(expert_local, d // ep, level, prec, threshold).items():
            static[k] += val

        tokens = self.b * self.seq
        X = tokens * h * prec.act_bytes                                   # one activation tensor, bytes
        cols: list = []
        group_size = {"tp": t, "dp": d, "pp": 2 if p > 1 else 1, "embedding": 2 if p > 1 else 1, "ep": ep,
                      "edp": d // ep}
        group_span = {"tp": t, "dp": t * d, "pp": 2 * t * d, "embedding": p * t * d, "ep": t * ep, "edp": t * d}

        def add(group, kind, calls, payload_per_call, purpose, total=None, overlap="exposed"):
            if calls and group_size[group] > 1:
                total = calls * payload_per_call if total is None else total
                cols.append(Collective(group, kind, calls, total, purpose, group_size[group], group_span[group],
                                       overlap))

        full = s.recompute == "full"
        regather = 2 if s.sp_regather else 0
        lm = layers * m
        regions = 2                                   # attention and MLP (dense or MoE: the same SP pattern)
        if not sp:
            add("tp", "AllReduce", lm * regions * (1 + (1 if full else 0) + 1), X,
                "layers: attention + MLP outputs (fwd" + (", again in recompute" if full else "") + ") and inputs (bwd)",
                overlap="tp-layer")
        else:
            add("tp", "AllGather", lm * regions * (1 + (1 if full else 0) + 1 + regather // 2), X,
                "layers SP: before QKV and w1/w3 (fwd" + (" + recompute" if full else "") +
                "), conjugates of the reduce-scatters" + (" and re-gathers for dW" if regather else "") + " (bwd)",
                overlap="tp-layer")
            add("tp", "ReduceScatter", lm * regions * (1 + (1 if full else 0) + 1), X,
                "layers SP: after wo and w2 (fwd" + (" + recompute" if full else "") + "), conjugates of the "
                "all-gathers (bwd)", overlap="tp-layer")
        if moe is not None:
            R = moe_rows(self.moe_tokens, moe.num_experts, moe.top_k, moe.capacity_factor)
            add("ep", "AlltoAll", lm * (2 + (2 if full else 0) + 2), R * h * prec.act_bytes,
                f"MoE dispatch + combine of {R:,} token rows (fwd" + (" + recompute" if full else "")
                + ") and their conjugates (bwd)")
        if not s.vocab_emb_dp:
            if first:
                add("tp", "ReduceScatter" if sp else "AllReduce", m, X, "vocab-parallel embedding output (fwd)")
                if sp:
                    add("tp", "AllGather", m, X,
                        "vocab-parallel embedding output gradient: the reduce-scatter's conjugate (bwd)")
            if last:
                if sp:
                    add("tp", "AllGather", (1 + regather // 2) * m, X, "vocab-parallel head input (fwd)"
                        + (" and its re-gather for dW (bwd)" if regather else ""))
                    add("tp", "ReduceScatter", m, X, "vocab-parallel head input gradient (bwd)")
                else:
                    add("tp", "AllReduce", m, X, "vocab-parallel head input gradient (bwd)")
                add("tp", "AllReduce", 3 * m, tokens * 4, "vocab-parallel cross-entropy: max, sum exp, target logit (fp32)")
        if sp:                       # weights replicated over TP see s/t tokens: partial gradients
            replicated = sum(math.prod(q.local_shape(t)) for q in dense if q.tp_axis is None)
            if replicated:
                add("tp", "AllReduce", 1, replicated * prec.grad_bytes,
                    "gradients of TP-replicated weights under SP (norms" + (", embedding/head" if s.vocab_emb_dp else "")
                    + (", routers" if moe is not None else "") + ")", overlap="backward")

        # DP / optimizer parallel, per parameter of this stage: dense weights over dp, experts over
        # the dp / ep ranks holding the same experts
        for group, shapes, size in (("dp", dense_local, d), ("edp", expert_local, d // ep)):
            n_plain = plain = n_sh = sharded = 0
            for shape in shapes:
                n = math.prod(shape)
                if zero_sharded(shape, prec.param_bytes, size, level, threshold):
                    n_sh, sharded = n_sh + 1, sharded + n
                else:
                    n_plain, plain = n_plain + 1, plain + n
            what = "expert " if group == "edp" else ""
            if n_plain:
                add(group, "AllReduce", n_plain, None, f"{what}gradients" + (" of unsharded parameters" if level else ""),
                    total=plain * prec.grad_bytes, overlap="backward")
            if n_sh:
                rs_calls = m if level >= 2 else 1
                add(group, "ReduceScatter", n_sh * rs_calls, None,
                    f"{what}gradients of sharded parameters" + (" (every micro-batch)" if rs_calls > 1 else ""),
                    total=sharded * prec.grad_bytes * rs_calls, overlap="backward" if rs_calls == 1 else "backward-mb")
                if level >= 3:
                    add(group, "AllGather", 2 * m * n_sh, None, f"{what}parameters before forward and before backward "
                        "(every micro-batch)", total=2 * m * sharded * prec.param_bytes, overlap="compute")
                else:
                    add(group, "AllGather", n_sh, None, f"updated {what}parameters", total=sharded * prec.param_bytes)

        # pipeline: every micro-batch crosses every chunk boundary (v chunks per device), except
        # into the very first chunk and out of the very last
        Xp = X // (t if sp else 1)
        out_of_last, into_first = (m if last else 0), (m if first else 0)
        add("pp", "Send", m * v - out_of_last, Xp, "activations to the next stage (fwd)")
        add("pp", "Receive", m * v - out_of_last, Xp, "activation gradients from the next stage (bwd)")
        add("pp", "Receive", m * v - into_first, Xp, "activations from the previous stage (fwd)")
        add("pp", "Send", m * v - into_first, Xp, "activation gradients to the previous stage (bwd)")
        if cfg.tie_embeddings and p > 1 and (first or last):
            add("embedding", "AllReduce", 1, V * h // (1 if s.vocab_emb_dp else t) * prec.grad_bytes,
                "tied embedding gradient, first and last stage")

        # compute: matmul FLOPs (forward 2 per multiply-add, backward 2x forward)
        q_dim, kv_dim, f = cfg.n_heads * cfg.head_dim, cfg.n_kv_heads * cfg.head_dim, cfg.hidden_dim
        attn_gemm = 2 * tokens * (2 * h * q_dim + 2 * h * kv_dim) / t
        if moe is None:
            ffn_gemm = 2 * tokens * 3 * h * f / t
        else:
            R = moe_rows(self.moe_tokens, moe.num_experts, moe.top_k, moe.capacity_factor)
            ffn_gemm = 2 * R * 3 * h * f / t + 2 * self.moe_tokens * h * moe.num_experts   # experts + router
        gemm = attn_gemm + ffn_gemm
        core = 4 * self.b * self.seq * self.seq * q_dim / t            # QK^T and PV, the full square
        extra = {"none": 0, "selective": core, "full": gemm + core}[s.recompute]
        vocab_split = t > 1 and (not s.vocab_emb_dp or sp)
        flops = m * layers * (3 * (gemm + core) + extra)
        if last:
            flops += m * 3 * 2 * tokens * h * V / (t if vocab_split else 1)
        times = self._times(cols, flops, static, layers)
        return static, cols, flops, times

    def _times(self, cols, flops, static, layers) -> dict:
        """The step-time model of the module docstring ("Time"), for one rank of a stage."""
        s, links, device = self.s, self.links, self.device
        p, m, v, n_copies = s.pipeline_stage, s.micro_batch_num, s.virtual_pipeline_stages, s.fine_grain_interleave
        if device is not None:
            compute_s = flops / (device.peak_flops("matmul", self.prec.compute_dtype) * self.efficiency)
            mem_bw = device.mem_bw
        else:
            compute_s, mem_bw = 0.0, None
        by = {"tp-layer": 0.0, "exposed": 0.0, "backward": 0.0, "backward-mb": 0.0, "compute": 0.0}
        tp_calls = 0
        for c in cols:
            by[c.overlap] += c.time(links)
            if c.overlap == "tp-layer":
                tp_calls += c.calls
        comm_s = sum(by.values())
        tp_s = by["tp-layer"]
        if tp_s > 0 and n_copies > 1:
            frac = None
            if self.moe is None and device is not None:     # the simulator's dense layer, this device and link
                frac = simulated_tp_exposed_fraction(self.cfg, s.model_parallel, self.seq, self.b, n_copies, device,
                                                     links.bandwidth(s.model_parallel), links.latency_s,
                                                     self.prec.compute_dtype, self.efficiency, s.sp_regather)
            if frac is not None:
                self.tp_overlap_source = "two-stream simulator, one layer"
            else:
                # one chain per layer pass: k = the TP collectives of one layer per micro-batch
                k = max(1, round(tp_calls / max(1, layers * m)))
                frac, self.tp_overlap_source = tp_exposed_fraction(k, compute_s / tp_calls, tp_s / tp_calls, n_copies)
            tp_exposed = frac * tp_s
        else:
            tp_exposed = tp_s
        stretch = 1 + bubble_fraction(p, m, v)             # the pipeline: m + (p-1)/v slots of per-micro-batch work
        pipeline_s = (compute_s + tp_exposed + by["exposed"]) * stretch
        backward_last = compute_s / m * 2 / 3               # backward ~ 2x forward, of one micro-batch
        grad_exposed = (overlap_exposed(by["backward"], backward_last)        # once per step: the last backward
                        + overlap_exposed(by["backward-mb"], compute_s * 2 / 3))   # every micro-batch: all backwards
        gather_exposed = overlap_exposed(by["compute"], compute_s)
        optimizer_s = 0.0 if mem_bw is None else adam_update_seconds(static["parameters"], static["gradients"],
                                                                      static["optimizer"], mem_bw)
        bubble_s = compute_s * (p - 1) / (v * m)
        step_s = pipeline_s + grad_exposed + gather_exposed + optimizer_s
        return {"compute_s": compute_s, "bubble_s": bubble_s, "comm_s": comm_s,
                "exposed_comm_s": step_s - compute_s - bubble_s - optimizer_s, "optimizer_s": optimizer_s,
                "tp_comm_s": tp_s, "tp_exposed_s": tp_exposed,
                "tp_hidden_fraction": 0.0 if tp_s == 0 else 1 - tp_exposed / tp_s, "step_s": step_s}


__all__ = ["ParallelStrategy", "Precision", "ParamSpec", "ParallelPlan", "StagePlan", "Collective",
           "plan_parallel", "llama_parameters", "stage_layer_counts", "zero_sharded", "static_bytes",
           "korthikanti_layer_bytes", "llama_layer_activation_bytes", "OPTIMIZER_LEVELS", "RECOMPUTE_MODES",
           "ATTENTION_KINDS", "COLLECTIVES", "MoESpec"]


# ------------------------------------------------------------------------------------------------
# what minispore's own implementation sends: the numbers ops.prims.comm.comm_bytes() counts
#
# The plan above models Megatron's schedule. minispore's own training step - the explicit TP of
# llm/tensor_parallel.py (with sequence parallel and the vocabulary split or not), data parallel
# with nn.DistributedGradReducer's buckets, optimizer parallel (nn/optim/parallel_optimizer.py) -
# issues a fully known list of collectives, and a running process counts every one of them
# (`comm_bytes()`: calls; payload = the bytes of the buffer handed to MPI; ring = the bytes a
# ring algorithm sends from this rank). `minispore_step_comm` predicts the three numbers per
# primitive for one step of one rank from the config and the strategy alone, for any world size;
# tests/parallel/test_comm_bytes.py runs the step under MPI and asserts equality, integer for
# integer. NOTE the payload convention is the counter's (ops/prims/comm.py), not comm_cost.py's:
# all_gather counts its INPUT (this rank's block), reduce_scatter its input (all p blocks).
_WIRE = {"float16": "float32", "bfloat16": "float32"}       # 16-bit gradients are reduced in fp32


def _ring(prim: str, nelem: int, itemsize: int, p: int, rank: int) -> int:
    """The counter's ring bytes of one call (ops/prims/comm.py's module docstring)."""
    if p == 1:
        return 0
    if prim == "all_reduce":
        from ..ops.prims.comm import ring_bytes_all_reduce     # the counter's own chunking
        return ring_bytes_all_reduce(nelem, itemsize, p, rank)
    if prim == "all_gather":
        return (p - 1) * nelem * itemsize
    if prim == "reduce_scatter":
        return (p - 1) * (nelem * itemsize // p)
    raise OpValueError("minispore_step_comm", "all_reduce, all_gather or reduce_scatter", repr(prim))


def _split_rows(n: int, p: int, r: int) -> int:
    """Rows rank r of p holds when n rows are dealt np.array_split-style (the vocabulary split)."""
    base, extra = divmod(n, p)
    return base + (1 if r < extra else 0)


def trainer_parameter_order(cfg: LlamaConfig) -> list:
    """The LLaMA's ParamSpecs (global shapes, TP axis for the vocabulary-parallel model) in the
    order the LLaMA trainer's AdamW lists them (llm/trainer.py `decay_groups`: the matrices
    first, then the 1-D norm weights, each in model order) - the order the gradient reducers and
    the parallel optimizer walk."""
    params = llama_parameters(cfg, ParallelStrategy(vocab_emb_dp=False))
    return [q for q in params if len(q.shape) >= 2] + [q for q in params if len(q.shape) < 2]


def dp_buckets(nbytes_in_order: list, bucket_mb: float | None = None, fused: bool = True) -> list:
    """Bucket sizes (bytes, in the order they are all-reduced) `nn.DistributedGradReducer` makes
    from gradients of `nbytes_in_order` bytes (one wire dtype): filled in REVERSE parameter order,
    a bucket closed when the next gradient would pass `bucket_mb` MB (None: MindSpore's "auto", 64
    MB); `fused=False` (comm_fusion openstate False): one all-reduce per parameter."""
    if not fused:
        return [int(n) for n in reversed(nbytes_in_order)]
    cap = max(1, int((64 if bucket_mb is None else bucket_mb) * (1 << 20)))
    out, current = [], None
    for n in reversed(nbytes_in_order):
        if current is not None and current + n > cap:
            out.append(current)
            current = None
        current = n if current is None else current + n
    if current is not None:
        out.append(current)
    return out


def minispore_step_comm(cfg: LlamaConfig, strategy: ParallelStrategy, *, batch_size: int, seq_len: int,
                        dtype: str = "float32", rank: int = 0, bucket_mb: float | None = None,
                        fused: bool = True, by_purpose: bool = False):
    """Per-step collectives of ONE rank of minispore's own LLaMA training step, in the convention
    of `ops.prims.comm.comm_bytes()`: {primitive: {"calls", "payload", "ring"}} (bytes).

    The step is the LLaMA trainer's (value_and_grad of `model.loss`, gradient communication, AdamW;
    no clipping). Ranks are numbered tensor parallel fastest (rank = tp_index + tp * dp_index).
    `batch_size` is the per-DP-rank batch, `seq_len` the positions per row, `dtype` the parameters'
    (and so the activations') dtype. Nothing runs: any world size works.

    * model_parallel t > 1: `tensor_parallel_llama(full, parallel_config=...)` with the strategy's
      data_parallel, model_parallel, use_seq_parallel, vocab_emb_dp; its `grad_reducer`.
    * model_parallel 1, data_parallel d > 1: the plain Llama with `nn.DistributedGradReducer`
      (buckets of `bucket_mb` MB, default 64; `fused=False`: one per parameter), or, with
      `optimizer_level`, the parallel optimizer (`ParallelOptimizer`, its threshold the strategy's
      `parallel_optimizer_threshold` KB) in place of the reducer.

    With N = batch_size * seq_len tokens and X = N * dim activation elements (bytes: x itemsize):

    ================================  =========================================================
    TP (no SP), vocabulary split      all_reduce: embedding g 1 X (fwd); per block g after wo, w2
                                      (2 X fwd) and f before wq|wk|wv, w1|w3 (2 X bwd); the
                                      head's f 1 X (bwd); cross-entropy 3 x N (row max, sum exp,
                                      target logit; fwd)
    TP, vocab_emb_dp                  all_reduce: 4 X per block only
    TP + SP, vocabulary split         reduce_scatter X: embedding (fwd), 2 per block (fwd), 2 per
                                      block (bwd of the all-gathers), head input (bwd);
                                      all_gather X/t: the same places' conjugates; all_reduce:
                                      cross-entropy 3 x N, and the partial gradients of the
                                      norms over the tp group (its buckets)
    TP + SP, vocab_emb_dp             per block as above; all_reduce of the (loss sum, count)
                                      pair (2 elements); partial gradients of the norms, the
                                      table and the head over the tp group
    DP (any of the above, d > 1)      all_reduce: one per bucket of this rank's (TP-local)
                                      gradients, in the wire dtype (fp32 for 16-bit)
    ZeRO level1 (t = 1)               all_reduce of every gradient (one per dtype), all_gather of
                                      the updated shards (sum of ceil(numel/d) over the sharded)
    ZeRO level2                       all_reduce of the unsharded gradients, reduce_scatter of
                                      d x that shard sum, all_gather of the shards
    ZeRO level3                       as level2 without the final all_gather; instead one
                                      all_gather of every sharded parameter (one per dtype) at
                                      the start of the step (the first Cell's forward)
    ================================  =========================================================

    `by_purpose=True` returns [(group, primitive, calls, payload, purpose)] rows instead.
    """
    op = "minispore_step_comm"
    if not isinstance(cfg, LlamaConfig):
        raise OpTypeError(op, "a LlamaConfig", type(cfg).__name__)
    if not isinstance(strategy, ParallelStrategy):
        raise OpTypeError(op, "a ParallelStrategy", type(strategy).__name__)
    s = strategy
    t, d = s.model_parallel, s.data_parallel
    unsupported = [(f, v) for f, v, ok in (
        ("pipeline_stage", s.pipeline_stage, s.pipeline_stage == 1),
        ("micro_batch_num", s.micro_batch_num, s.micro_batch_num == 1),
        ("recompute", s.recompute, s.recompute == "none"),
        ("optimizer_level", s.optimizer_level, s.optimizer_level is None or t == 1)) if not ok]
    if unsupported:
        f, v = unsupported[0]
        raise OpValueError(op, f"{_name(f)} at its default (minispore's own step: dp x tp with sequence "
                           "parallel, or ZeRO over data parallel alone; no pipeline, no recomputation)", f"{f}={v!r}")
    b, seq = _positive("batch_size", batch_size), _positive("seq_len", seq_len)
    dtype = _dtype_name("dtype", dtype)
    if not isinstance(rank, numbers.Integral) or isinstance(rank, bool) or not 0 <= rank < t * d:
        raise OpValueError(op, f"a rank in [0, {t * d})", repr(rank))
    for what, v in (("n_heads", cfg.n_heads), ("n_kv_heads", cfg.n_kv_heads), ("ffn_dim", cfg.hidden_dim)):
        if v % t:
            raise OpValueError(op, f"{_name('model_parallel')} dividing {what} ({v})", f"model_parallel={t}")
    sp = s.use_seq_parallel and t > 1
    vocab_split = t > 1 and not s.vocab_emb_dp
    if vocab_split and cfg.vocab_size < t:
        raise OpValueError(op, f"vocab_size ({cfg.vocab_size}) >= {_name('model_parallel')}", f"model_parallel={t}")
    if sp and seq % t:
        raise OpValueError(op, f"{_name('seq_len')} divisible by {_name('model_parallel')} = {t} under sequence "
                           "parallel", f"seq_len={seq}")
    tp_rank, dp_rank = rank % t, rank // t
    e = _ITEMSIZE[dtype]
    wire = _ITEMSIZE[_WIRE.get(dtype, dtype)]
    N, h, L = b * seq, cfg.dim, cfg.n_layers
    X = N * h
    rows = []       # (group, primitive, calls, elements per call, itemsize, group size, group rank, purpose)

    def add(group, prim, calls, nelem, item, purpose):
        size, grank = (t, tp_rank) if group == "tp" else (d, dp_rank)
        if calls and size > 1:
            rows.append((group, prim, calls, nelem, item, size, grank, purpose))

    # the parameters as this rank holds them, in the optimizer's order
    local = []
    for q in trainer_parameter_order(cfg):
        if q.name == "output.weight" and cfg.tie_embeddings:
            continue
        shape = list(q.shape)
        if t > 1 and q.tp_axis is not None:
            vocab = q.name in ("tok_embeddings.embedding_table", "output.weight")
            if vocab and not vocab_split:
                pass                                          # vocab_emb_dp: replicated
            elif vocab:
                shape[0] = _split_rows(shape[0], t, tp_rank)
            else:
                shape[q.tp_axis] //= t
        local.append((q, math.prod(shape)))

    if t > 1 and not sp:
        if vocab_split:
            add("tp", "all_reduce", 1, X, e, "vocab-parallel embedding: g, the sum of the lookups (fwd)")
        add("tp", "all_reduce", 2 * L, X, e, "blocks: g after wo and after w2 (fwd)")
        add("tp", "all_reduce", 2 * L, X, e, "blocks: f before wq|wk|wv and before w1|w3 (bwd)")
        if vocab_split:
            add("tp", "all_reduce", 1, X, e, "vocab-parallel head: f (bwd)")
            add("tp", "all_reduce", 3, N, e, "vocab-parallel cross-entropy: row max, sum exp, target logit (fwd)")
    elif sp:
        chunk = X // t
        if vocab_split:
            add("tp", "reduce_scatter", 1, X, e, "vocab-parallel embedding: g-bar (fwd)")
            add("tp", "all_gather", 1, chunk, e, "vocab-parallel embedding: g-bar's conjugate (bwd)")
        add("tp", "all_gather", 2 * L, chunk, e, "blocks: f-bar before wq|wk|wv and w1|w3 (fwd)")
        add("tp", "reduce_scatter", 2 * L, X, e, "blocks: f-bar's conjugate (bwd)")
        add("tp", "reduce_scatter", 2 * L, X, e, "blocks: g-bar after wo and w2 (fwd)")
        add("tp", "all_gather", 2 * L, chunk, e, "blocks: g-bar's conjugate (bwd)")
        if vocab_split:
            add("tp", "all_gather", 1, chunk, e, "vocab-parallel head: f-bar, the final norm's output (fwd)")
            add("tp", "reduce_scatter", 1, X, e, "vocab-parallel head: f-bar's conjugate (bwd)")
            add("tp", "all_reduce", 3, N, e, "vocab-parallel cross-entropy: row max, sum exp, target logit (fwd)")
        else:
            add("tp", "all_reduce", 1, 2, e, "replicated head: the (loss sum, row count) pair (fwd)")
        partial = [n * wire for q, n in local
                   if q.tp_axis is None or (not vocab_split and q.name in ("tok_embeddings.embedding_table",
                                                                           "output.weight"))]
        for k, nbytes in enumerate(dp_buckets(partial, bucket_mb, fused)):
            add("tp", "all_reduce", 1, nbytes // wire, wire,
                f"SP partial-gradient bucket {k} ({nbytes} B: the TP-replicated weights)")

    level = s.zero_level if t == 1 else 0
    if d > 1 and level == 0:
        for k, nbytes in enumerate(dp_buckets([n * wire for _, n in local], bucket_mb, fused)):
            add("dp", "all_reduce", 1, nbytes // wire, wire,
                f"gradient bucket {k} ({nbytes} B, DistributedGradReducer)")
    elif d > 1:
        limit = s.parallel_optimizer_threshold * 1024
        sharded = {q.name: -(-n // d) for q, n in local if n * e >= limit}
        C = sum(sharded.values())
        replicated = sum(n for q, n in local if q.name not in sharded)
        if level == 1:
            add("dp", "all_reduce", 1, sum(n for _, n in local), e, "ZeRO-1: every gradient (one call per dtype)")
        else:
            if replicated:
                add("dp", "all_reduce", 1, replicated, e, f"ZeRO-{level}: the gradients of unsharded parameters")
            if C:
                add("dp", "reduce_scatter", 1, d * C, e, f"ZeRO-{level}: the sharded gradients, padded to "
                                                           f"{d} x {C} elements")
        if C and level < 3:
            add("dp", "all_gather", 1, C, e, f"ZeRO-{level}: the updated parameter shards ({C} elements)")
        if C and level == 3:
            add("dp", "all_gather", 1, C, e, f"ZeRO-3: every sharded parameter at the start of the step "
                                             f"({C} elements, one call per dtype)")
    if by_purpose:
        return [(g, prim, calls, calls * n * item, why) for g, prim, calls, n, item, _, _, why in rows]
    out: dict = {}
    for _, prim, calls, n, item, p, r, _ in rows:
        row = out.setdefault(prim, {"calls": 0, "payload": 0, "ring": 0})
        row["calls"] += calls
        row["payload"] += calls * n * item
        row["ring"] += calls * _ring(prim, n, item, p, r)
    return out


__all__ += ["minispore_step_comm", "dp_buckets", "trainer_parameter_order"]
