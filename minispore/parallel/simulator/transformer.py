"""The task graph of LLaMA decoder layers under tensor + sequence parallelism, with 1 or more copies.

One rank of a TP group of `t` ranks is simulated (every rank of the group runs the same program,
so the group's schedule is any one rank's). With sequence parallelism (Korthikanti et al. 2022,
§4.2.2) the norms and residual adds work on `s/t` tokens; an **all-gather** over the TP group
collects the full sequence before each column-parallel GEMM (QKV, gate/up) and a
**reduce-scatter** after each row-parallel GEMM (attention output, down) sums the partial products
and hands each rank its `s/t` tokens back. Forward, per layer and per copy:

    norm1 -> AG -> QKV | core attention (all copies together) | out-proj -> RS -> add+norm2 -> AG
          -> gate/up -> SwiGLU -> down -> RS -> add

**Multi-copy** (MindSpore's fine-grained multi-copy, `fine_grain_interleave: 2`; MindFormers'
`LLamaDecodeLayerInterleave`; ARCHITECTURE.md's parallel rows): the tokens are cut into `copies`
slices. Region 1 (norm + QKV) and region 2 (out-proj + FFN) run per copy; the core attention runs
once on the concatenated Q/K/V (it needs every token). The program issues the copies round-robin
at every stage (`for copy: stage(copy)`), so while copy 0's collective runs on the communication
stream, copy 1's GEMM runs on the compute stream - the schedule whose closed form the tests check
(a chain of k (compute c -> comm x) pairs split into n copies takes k c + x/n when x <= (n-1) c).

Backward, per layer (reverse order), with the dependencies autodiff gives:

* a row-parallel GEMM `Z = RS(Y W)` needs `dY = AG(dZ)` first: its dX and its dW wait for that
  all-gather;
* a column-parallel GEMM `Y = AG(X) W` gives `dX = RS(dY W^T)`: the reduce-scatter waits for the
  dX GEMM, and the **dW GEMM does not depend on it** (dW = AG(X)^T dY uses the saved gathered
  input), so dW runs while the reduce-scatter is in flight. This is why the backward hides more
  than the forward even with one copy.

Where the dW GEMMs go in the in-order compute stream is a scheduling choice (`dw`):
``"after_dx"`` queues each dW right after its dX; ``"fill"`` (default; MindSpore's
`matmul_grad_comm_overlap` idea, zero-bubble pipelining's deferred W) keeps the dW GEMMs in a queue
and, after each backward collective is issued, queues dW GEMMs that do not wait for that
collective until their time covers the collective's. `sp_regather=True` re-does the all-gather of
a column-parallel GEMM's input for its dW instead of keeping the gathered tensor (Megatron's choice).

Durations come from a `CostModel` (cost.py). Modelling conventions, stated once: GEMMs
2mkn FLOPs at the matrix peak (roofline with their operand bytes); core attention as FlashAttention
(4 s^2 d FLOPs per head forward, 2.5x that backward for the recomputed scores, halved when causal:
masked tiles are skipped; softmax 5 vector FLOPs per score); norms, residual adds and SwiGLU as
memory-bound vector kernels; RoPE, the embedding and the LM head are left out.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ...common.errors import OpTypeError, OpValueError
from .engine import COMM, COMPUTE, TaskGraph


@dataclass(frozen=True)
class LayerSpec:
    """The shape of a decoder stack and its parallel layout: `hidden` h, `heads` a, `kv_heads`
    (GQA), `ffn` (SwiGLU inner size), `layers`, sequence `seq` and micro-batch `batch`, TP degree
    `tp` (sequence parallel always on), `causal` attention."""

    name: str
    hidden: int
    heads: int
    kv_heads: int
    ffn: int
    layers: int
    seq: int = 4096
    batch: int = 1
    tp: int = 8
    causal: bool = True

    def __post_init__(self):
        for f in ("hidden", "heads", "kv_heads", "ffn", "layers", "seq", "batch", "tp"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise OpValueError("LayerSpec", f"{f} as an int >= 1", repr(v))
        if self.hidden % self.heads:
            raise OpValueError("LayerSpec", f"hidden divisible by heads ({self.heads})", repr(self.hidden))
        if self.heads % self.tp or self.ffn % self.tp:
            raise OpValueError("LayerSpec", f"heads and ffn divisible by tp={self.tp}",
                               f"heads={self.heads}, ffn={self.ffn}")
        if self.kv_heads > self.heads or self.heads % self.kv_heads:
            raise OpValueError("LayerSpec", f"kv_heads dividing heads={self.heads}", repr(self.kv_heads))

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def kv_heads_per_rank(self) -> int:
        """GQA: kv heads split over TP, replicated once there are fewer kv heads than ranks."""
        return max(self.kv_heads // self.tp, 1)


PRESETS = {
    # LLaMA-7B (Touvron et al. 2023, Table 2): h 4096, 32 heads, SwiGLU 11008, 32 layers
    "llama-7b": LayerSpec("llama-7b", 4096, 32, 32, 11008, 32),
    # LLaMA-2-70B (Touvron et al. 2023b): h 8192, 64 heads, 8 kv heads (GQA), SwiGLU 28672, 80 layers
    "llama-70b": LayerSpec("llama-70b", 8192, 64, 8, 28672, 80),
}


def preset(name, **overrides) -> LayerSpec:
    """A preset ('llama-7b', 'llama-70b') with fields replaced (seq=, tp=, layers=, batch=)."""
    if not isinstance(name, str) or name.lower() not in PRESETS:
        raise OpValueError("preset", f"a model among {sorted(PRESETS)}", repr(name))
    return replace(PRESETS[name.lower()], **overrides)


class _Program:
    """Appends tasks in program order; holds the deferred dW GEMMs of the "fill" policy."""

    def __init__(self, graph, rank, dw_policy):
        self.g, self.rank, self.dw_policy = graph, rank, dw_policy
        self.pending = []               # (name, duration, deps, copy) of dW GEMMs not yet queued

    def compute(self, name, duration, deps, kind, copy, phase):
        return self.g.add(name, COMPUTE, duration, deps, rank=self.rank, kind=kind, copy=copy, phase=phase)

    def comm(self, name, duration, deps, kind, copy, phase):
        tid = self.g.add(name, COMM, duration, deps, rank=self.rank, kind=kind, copy=copy, phase=phase)
        if phase == "backward" and self.dw_policy == "fill":
            self._fill(tid, duration)
        return tid

    def dw(self, name, duration, deps, copy):
        if self.dw_policy == "after_dx":
            self.compute(name, duration, deps, "dw", copy, "backward")
        else:
            self.pending.append((name, duration, tuple(deps), copy))

    def _fill(self, comm_id, comm_duration):
        """Queue deferred dW GEMMs that do not wait for `comm_id` until they cover its duration."""
        filled, keep = 0.0, []
        for item in self.pending:
            name, duration, deps, copy = item
            if filled < comm_duration and comm_id not in deps:
                self.compute(name, duration, deps, "dw", copy, "backward")
                filled += duration
            else:
                keep.append(item)
        self.pending = keep

    def flush(self):
        for name, duration, deps, copy in self.pending:
            self.compute(name, duration, deps, "dw", copy, "backward")
        self.pending = []


def chain_graph(k, c, x, copies=1, graph=None, rank=0) -> TaskGraph:
    """The toy region behind the multi-copy closed form: k stages, each a compute of c
    seconds whose result a collective of x seconds sends to the next stage, split into `copies`
    slices (c/n, x/n each) issued round-robin per stage. Makespan (alpha ignored):
    k (c + x) for one copy; k c + x/n if x <= (n-1) c; k x + c/n when communication-bound."""
    for name, v in (("k", k), ("copies", copies)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise OpValueError("chain_graph", f"{name} as an int >= 1", repr(v))
    g = graph if graph is not None else TaskGraph()
    prev = [None] * copies
    for j in range(k):
        comp = [g.add(f"c{j}[{i}]", COMPUTE, c / copies, [prev[i]], rank=rank, kind="gemm", copy=i)
                for i in range(copies)]
        prev = [g.add(f"x{j}[{i}]", COMM, x / copies, [comp[i]], rank=rank, kind="all_gather", copy=i)
                for i in range(copies)]
    return g


def transformer_graph(spec: LayerSpec, cost, copies=1, *, backward=True, dw="fill", sp_regather=False,
                      graph=None, rank=0) -> TaskGraph:
    """The task graph of `spec.layers` decoder layers (forward, then backward if asked) on one TP
    rank, with the tokens split into `copies` slices (see the module docstring)."""
    if not isinstance(spec, LayerSpec):
        raise OpTypeError("transformer_graph", "a LayerSpec (simulator.preset('llama-7b'), ...)",
                          type(spec).__name__)
    if isinstance(copies, bool) or not isinstance(copies, int) or copies < 1:
        raise OpValueError("transformer_graph", "copies as an int >= 1", repr(copies))
    if dw not in ("fill", "after_dx"):
        raise OpValueError("transformer_graph", "dw='fill' or 'after_dx'", repr(dw))
    t = spec.tp
    tokens = spec.batch * spec.seq
    if tokens % (t * copies):
        raise OpValueError("transformer_graph", f"batch*seq divisible by tp*copies = {t * copies}", repr(tokens))
    g = graph if graph is not None else TaskGraph()
    p = _Program(g, rank, dw)
    T = tokens // copies                           # tokens of one copy
    Tl = T // t                                    # ... of which this rank holds under SP
    h, f = spec.hidden, spec.ffn // t
    d = spec.head_dim
    q_cols = spec.heads // t * d
    qkv_cols = q_cols + 2 * spec.kv_heads_per_rank * d
    e = cost.itemsize
    payload = T * h * e                            # an AG's gathered output = an RS's input

    ag = cost.collective("all_gather", payload, t)
    rs = cost.collective("reduce_scatter", payload, t)
    norm = cost.elementwise(Tl * h, 4, 2)          # RMSNorm: read x, write y
    add_norm = cost.elementwise(Tl * h, 5, 4)      # residual add + RMSNorm: read 2, write 2
    add = cost.elementwise(Tl * h, 1, 3)
    swiglu = cost.elementwise(T * f, 4, 3)         # silu(gate) * up: read 2, write 1
    qkv, out = cost.gemm(T, h, qkv_cols), cost.gemm(T, q_cols, h)
    gate_up, down = cost.gemm(T, h, 2 * f), cost.gemm(T, f, h)
    heads_local = spec.heads // t
    causal = 0.5 if spec.causal else 1.0
    scores = causal * spec.batch * heads_local * spec.seq * spec.seq
    attn_bytes = e * tokens * (qkv_cols + q_cols)
    attn_fwd = cost.kernel(matmul_flops=4 * scores * d, vector_flops=5 * scores, bytes_moved=attn_bytes)
    attn_bwd = cost.kernel(matmul_flops=10 * scores * d, vector_flops=10 * scores, bytes_moved=2 * attn_bytes)
    norm_bwd = cost.elementwise(Tl * h, 8, 4)
    swiglu_bwd = cost.elementwise(T * f, 8, 5)
    C = range(copies)

    # ---- forward
    prev = [None] * copies                         # the residual stream's last task, per copy
    fw = "forward"
    for layer in range(spec.layers):
        L = f"L{layer}."
        n1 = [p.compute(f"{L}norm1[{i}]", norm, [prev[i]], "vector", i, fw) for i in C]
        ag1 = [p.comm(f"{L}ag_qkv[{i}]", ag, [n1[i]], "all_gather", i, fw) for i in C]
        q = [p.compute(f"{L}qkv[{i}]", qkv, [ag1[i]], "gemm", i, fw) for i in C]
        at = p.compute(f"{L}attention", attn_fwd, q, "attention", None, fw)
        o = [p.compute(f"{L}out_proj[{i}]", out, [at], "gemm", i, fw) for i in C]
        rs1 = [p.comm(f"{L}rs_out[{i}]", rs, [o[i]], "reduce_scatter", i, fw) for i in C]
        an = [p.compute(f"{L}add_norm2[{i}]", add_norm, [rs1[i], prev[i]], "vector", i, fw) for i in C]
        ag2 = [p.comm(f"{L}ag_ffn[{i}]", ag, [an[i]], "all_gather", i, fw) for i in C]
        dn = []
        for i in C:
            gu = p.compute(f"{L}gate_up[{i}]", gate_up, [ag2[i]], "gemm", i, fw)
            sw = p.compute(f"{L}swiglu[{i}]", swiglu, [gu], "vector", i, fw)
            dn.append(p.compute(f"{L}down[{i}]", down, [sw], "gemm", i, fw))
        rs2 = [p.comm(f"{L}rs_ffn[{i}]", rs, [dn[i]], "reduce_scatter", i, fw) for i in C]
        prev = [p.compute(f"{L}add2[{i}]", add, [rs2[i], an[i]], "vector", i, fw) for i in C]
    if not backward:
        return g

    # ---- backward, last layer first; `grad[i]` is the task that produced the residual gradient
    grad = list(prev)
    bw = "backward"
    for layer in reversed(range(spec.layers)):
        L = f"L{layer}."
        agb2 = [p.comm(f"{L}ag_dffn[{i}]", ag, [grad[i]], "all_gather", i, bw) for i in C]
        rsb2 = []
        for i in C:
            dxd = p.compute(f"{L}down.dx[{i}]", down, [agb2[i]], "gemm", i, bw)
            p.dw(f"{L}down.dw[{i}]", down, [agb2[i]], i)
            swb = p.compute(f"{L}swiglu.bwd[{i}]", swiglu_bwd, [dxd], "vector", i, bw)
            dxg = p.compute(f"{L}gate_up.dx[{i}]", gate_up, [swb], "gemm", i, bw)
            rsb2.append(p.comm(f"{L}rs_dffn[{i}]", rs, [dxg], "reduce_scatter", i, bw))
            dw_deps = [swb]
            if sp_regather:
                dw_deps.append(p.comm(f"{L}ag_ffn.regather[{i}]", ag, [], "all_gather", i, bw))
            p.dw(f"{L}gate_up.dw[{i}]", gate_up, dw_deps, i)
        nb2 = [p.compute(f"{L}norm2.bwd[{i}]", norm_bwd, [rsb2[i], grad[i]], "vector", i, bw) for i in C]
        agb1 = [p.comm(f"{L}ag_dout[{i}]", ag, [nb2[i]], "all_gather", i, bw) for i in C]
        dxo = []
        for i in C:
            dxo.append(p.compute(f"{L}out_proj.dx[{i}]", out, [agb1[i]], "gemm", i, bw))
            p.dw(f"{L}out_proj.dw[{i}]", out, [agb1[i]], i)
        atb = p.compute(f"{L}attention.bwd", attn_bwd, dxo, "attention", None, bw)
        rsb1 = []
        for i in C:
            dxq = p.compute(f"{L}qkv.dx[{i}]", qkv, [atb], "gemm", i, bw)
            rsb1.append(p.comm(f"{L}rs_dqkv[{i}]", rs, [dxq], "reduce_scatter", i, bw))
            dw_deps = [atb]
            if sp_regather:
                dw_deps.append(p.comm(f"{L}ag_qkv.regather[{i}]", ag, [], "all_gather", i, bw))
            p.dw(f"{L}qkv.dw[{i}]", qkv, dw_deps, i)
        grad = [p.compute(f"{L}norm1.bwd[{i}]", norm_bwd, [rsb1[i], nb2[i]], "vector", i, bw) for i in C]
    p.flush()
    return g


__all__ = ["LayerSpec", "PRESETS", "preset", "chain_graph", "transformer_graph"]
