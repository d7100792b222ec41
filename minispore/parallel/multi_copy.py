"""Fine-grained multi-copy parallelism: one Transformer layer's tokens in two copies, so that one
copy's tensor-parallel communication travels while the other copy computes (MindSpore 2.3's
"细粒度多副本并行"; MindFormers' `fine_grain_interleave: 2` and its `LLamaDecodeLayerInterleave`).

Why it is needed. Under tensor + sequence parallelism (megatron.py, Korthikanti et al. 2022) every
layer runs four collectives forward and four backward, and each sits BETWEEN two dependent
computations: the all-gather f-bar must finish before the QKV GEMM can read its input, the
reduce-scatter g-bar before the residual add can. With one copy of the data nothing is left to do
while they travel - all of that communication is exposed. But every computation in a layer except
the core attention works row by row (norms, projections, SwiGLU, residual adds). Cut this rank's
rows into two copies and the copies are independent there: copy 2's GEMMs can run while copy 1's
collective is on the wire.

The split (MindFormers' LLamaDecodeLayerInterleave; here `MultiCopyDecoder`). This rank holds
n = batch * seq/p rows of the residual stream (its sequence chunk). They are cut into copies along
the rows (np.array_split sizes); the copies stay split through the whole stack of layers - from
the attention output projection of one layer to the QKV projection of the next - and are joined
once, at the end:

    region 1, per copy:   u_c = attention_norm(x_c);  U_c = all_gather(u_c);  q_c k_c v_c = U_c W^T
    core attention, ONCE: softmax(Q K^T) V on the copies' Q/K/V joined back into position order
                          (attention mixes rows: every query needs every key)
    region 2, per copy:   a_c = reduce_scatter(o_c Wo^T);  h_c = x_c + a_c;  m_c = ffn_norm(h_c)
                          M_c = all_gather(m_c);  f_c = reduce_scatter(SwiGLU(M_c) W2^T)
                          out_c = h_c + f_c          -> the next layer's x_c

The all-gather of copy c joins every rank's copy-c rows (rank-major); the reduce-scatter gives each
rank back exactly its own copy-c rows, so region 2 needs no reordering. Only the core attention
needs the rows in (batch, position) order: `CopyRows` holds the permutation (a gather) between
the copies' gathered order and that order.

The schedule (`TwoStreamSchedule`). One compute stream (this process) and one communication
stream (MPI non-blocking collectives: comm_func's `async_op=True`, i.e. MPI_Iallgather /
MPI_Ireduce_scatter_block). The work is a list of tasks with dependencies, in priority order:

    * a collective is POSTED as soon as its input is computed (it returns at once);
    * the compute stream runs the first task whose inputs are all available;
    * only when no compute task can run does it WAIT, for the oldest collective in flight.

So after copy 1's norm posts its all-gather, copy 2's norm runs while it travels; copy 1's QKV
runs while copy 2's all-gather travels, and so on (the code and the timeline number the copies
from 0: "copy 1" here is copy 0 there). The decisions depend only on which tasks
finished, never on timing (MPI_Test results are used only to drive MPI's progress), so every rank
posts the same collectives in the same order - which MPI requires - and the schedule is a
deterministic function of the task list. One copy through the same scheduler is the
communication-exposed baseline (each collective is waited for right after it is posted).

Backward is written out by hand (`_MultiCopyBackward`, one node on the autodiff tape, like a
Cell's custom `bprop`), because its order is the point: per copy the gradient of every GEMM
y = x W^T splits into dX = dY W (on the critical path: the next collective needs it) and
dW = dY^T X (needed only at the optimizer step). The task list puts them apart, so after copy 1's
dX GEMMs post its reduce-scatter, copy 2's dX GEMMs and both copies' dW GEMMs run while copy 1's
collective travels - the dW GEMMs depend on no collective at all, which is why backward can hide
more of its communication than forward. The
non-GEMM pieces (norms, SwiGLU, the core attention with its rotary embedding) are differentiated
with `vjp` on their own small tapes, recorded during the forward pass.

Identical numbers. Copies change only WHICH rows a row-wise computation is handed at a time, and
the order in which the weight gradients' row sums are added (sum_c dY_c^T X_c instead of one
dY^T X): float64 results equal the one-copy run to rounding (the tests assert 1e-12 relative for
the outputs and every parameter's gradient, and 20 training steps against one process).

Timeline. `record_timeline()` makes every scheduled task leave an event - compute start/end,
collective post/wait-return per copy, `time.perf_counter` - and `timeline()` returns them:

    {"rank", "stream": "compute" | "comm", "name", "copy" (None: all copies), "start", "end",
     "layer", "phase": "forward" | "backward", and for comm also "op" (all_gather |
     reduce_scatter) and "wait" (when the compute stream started waiting for it)}

`overlap_fraction(events)` is the share of the communication intervals [post, wait return]
covered by compute intervals of the same rank. What it measures: MPICH moves a non-blocking
collective inside MPI calls, and ranks that share cores compete with each other, so "covered by
compute" is an upper bound of the communication really hidden on this machine (the simulator of
issue 16 item 4 predicts the figure for real hardware from the same schedule).

Limits: PyNative training-time forward and backward (`TensorParallelLlama.loss` with
use_seq_parallel; not under `jit`, whose graphs run their collectives synchronously, and not for
generation, which runs the tensor-parallel path); the hand-written backward is not
differentiable again (no gradient of a gradient); the dense SwiGLU FFN only (no MoE); dropout
must be 0 (sequence parallelism already requires it).
"""
from __future__ import annotations

import contextlib
import numbers
import time

import numpy as np

from ..autograd.grad import vjp
from ..common import grad_state
from ..common import process_groups as pg
from ..common.errors import MinisporeRuntimeError, OpValueError
from ..common.tensor import Tensor, _wrap
from ..communication import comm_func
from ..ops import functional as F
from .megatron import group_info, split_sizes

_OP = "fine_grain_interleave"
_FUSED_ADD_RMS_NORM = getattr(F, "add_rms_norm", None)      # as llm/model.py's residual_rms_norm


# -------------------------------------------------------------------------------------------------
# the config rule
def check_fine_grain_interleave(config, tp_size) -> int:
    """The number of copies `config.fine_grain_interleave` asks for, refusing what cannot run:
    more than one copy needs tensor parallelism (model_parallel > 1: there is no communication to
    hide otherwise) with use_seq_parallel (the copies are cut from the sequence-parallel rows;
    MindFormers' check_fine_grain_interleave_valid has the same rule)."""
    n = getattr(config, "fine_grain_interleave", 1)
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
        raise OpValueError(_OP, "'fine_grain_interleave' as a positive int", repr(n))
    if n > 1 and (tp_size < 2 or not config.use_seq_parallel):
        raise OpValueError(_OP, "tensor parallelism (model_parallel > 1) with use_seq_parallel=True for "
                           f"fine_grain_interleave={n} (the copies overlap the sequence-parallel collectives)",
                           f"model_parallel={tp_size}, use_seq_parallel={config.use_seq_parallel}")
    return int(n)


# -------------------------------------------------------------------------------------------------
# the timeline
_events: list = []
_recording = {"on": False}


def timeline() -> list:
    """The events recorded (a copy): one dict per scheduled task (module docstring)."""
    return [dict(e) for e in _events]


def reset_timeline() -> None:
    _events.clear()


@contextlib.contextmanager
def record_timeline(reset=True):
    """Within: every multi-copy schedule records its tasks' events (read them with `timeline()`)."""
    if reset:
        _events.clear()
    before = _recording["on"]
    _recording["on"] = True
    try:
        yield
    finally:
        _recording["on"] = before


def _merged(intervals):
    out = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def overlap_fraction(events, phase=None) -> dict:
    """How much of the communication time is covered by computation, over `events` (a timeline,
    any number of ranks; `phase` "forward"/"backward" or None for both):

        comm_s     sum over collectives of (wait return - post)
        hidden_s   the part of those intervals during which the same rank was running a compute task
        fraction   hidden_s / comm_s (0 when there was no communication)
        exposed_s  wall time during which at least one collective was in flight and no compute task
                   ran (two copies' collectives in flight together count once here): what the
                   communication adds to the step
    """
    if phase not in (None, "forward", "backward"):
        raise OpValueError("overlap_fraction", "phase None, 'forward' or 'backward'", repr(phase))
    chosen = [e for e in events if phase is None or e.get("phase") == phase]
    comm_s = hidden_s = exposed_s = 0.0

    def covered(start, end, busy):
        return sum(max(0.0, min(end, b) - max(start, a)) for a, b in busy)

    for rank in sorted({e["rank"] for e in chosen}):
        mine = [e for e in chosen if e["rank"] == rank]
        busy = _merged([(e["start"], e["end"]) for e in mine if e["stream"] == "compute"])
        comms = [(e["start"], e["end"]) for e in mine if e["stream"] == "comm"]
        for start, end in comms:
            comm_s += end - start
            hidden_s += covered(start, end, busy)
        exposed_s += sum(end - start - covered(start, end, busy) for start, end in _merged(comms))
    return {"comm_s": comm_s, "hidden_s": hidden_s, "fraction": hidden_s / comm_s if comm_s > 0 else 0.0,
            "exposed_s": exposed_s}


# -------------------------------------------------------------------------------------------------
# the two-stream scheduler
class _Task:
    __slots__ = ("stream", "key", "deps", "fn", "op", "out", "handle", "posted")

    def __init__(self, stream, key, deps, fn, op=None):
        self.stream, self.key, self.deps, self.fn, self.op = stream, key, tuple(deps), fn, op


class TwoStreamSchedule:
    """Tasks with dependencies on a compute stream and a communication stream (module docstring).

    A task is named by a key `(name, layer, copy)`; `env` maps the key of every finished task
    (and of every input put there before `run`) to its value. `compute(key, deps, fn)`: `fn(env)`
    returns the value. `comm(key, deps, fn, op)`: `fn(env)` POSTS a collective and returns
    `(tensor, CommHandle)`; the value is the tensor, valid once the handle was waited for.
    Tasks are kept in the order they were added: that order is their priority."""

    def __init__(self, phase):
        self.phase = phase
        self.env: dict = {}
        self._tasks: list = []

    def compute(self, key, deps, fn):
        self._tasks.append(_Task("compute", key, deps, fn))

    def comm(self, key, deps, fn, op):
        self._tasks.append(_Task("comm", key, deps, fn, op))

    def run(self) -> dict:
        env, record = self.env, _recording["on"]
        rank = pg.world().rank if record else None
        now = time.perf_counter
        waiting, flight = list(self._tasks), []
        while waiting or flight:
            # 1. post every collective whose input is ready (priority order: the same on every rank)
            still = []
            for t in waiting:
                if t.stream == "comm" and all(d in env for d in t.deps):
                    t.posted = now()
                    t.out, t.handle = t.fn(env)
                    flight.append(t)
                else:
                    still.append(t)
            waiting = still
            # 2. the first compute task whose inputs are all there
            ready = next((i for i, t in enumerate(waiting) if t.stream == "compute"
                          and all(d in env for d in t.deps)), None)
            if ready is not None:
                t = waiting.pop(ready)
                start = now()
                env[t.key] = t.fn(env)
                end = now()
                if record:
                    self._event(rank, "compute", t.key, start, end)
                for f in flight:               # let MPI progress; what it answers decides nothing
                    f.handle.is_completed()
                continue
            # 3. nothing can compute: wait for the oldest collective in flight
            if not flight:
                raise MinisporeRuntimeError(f"TwoStreamSchedule: tasks {[t.key for t in waiting]} wait for "
                                            "inputs no task produces")
            f = flight.pop(0)
            wait = now()
            f.handle.wait()
            env[f.key] = f.out
            if record:
                self._event(rank, "comm", f.key, f.posted, now(), op=f.op, wait=wait)
        return env

    def _event(self, rank, stream, key, start, end, **extra):
        name, layer, copy = key
        _events.append({"rank": rank, "stream": stream, "name": name, "copy": copy, "start": start, "end": end,
                        "layer": layer, "phase": self.phase, **extra})


# -------------------------------------------------------------------------------------------------
# where the copies' rows are
class CopyRows:
    """The rows of this rank's sequence chunk cut into copies, and where they sit after the
    copies' all-gathers.

    Rank r of p holds n = batch * s/p rows, batch-major: local row i is position
    r*s/p + i % (s/p) of sequence i // (s/p) (the same layout, hence the same permutation, on
    every rank). Copy c is local rows [starts[c], starts[c] + sizes[c]).
    The all-gather of copy c stacks every rank's copy-c rows rank by rank; the copies' gathered
    tensors stacked copy by copy are the "stacked" order. `to_full` reorders stacked rows into the
    (batch, position) order the core attention reads; `to_stacked` is its inverse."""

    def __init__(self, batch, local_rows, tp_size, copies):
        if batch <= 0 or local_rows % batch:
            raise OpValueError(_OP, f"rows ({local_rows}) divisible by the batch ({batch})", f"{local_rows}")
        if local_rows < copies:
            raise OpValueError(_OP, f"at least fine_grain_interleave ({copies}) rows of this rank's sequence chunk "
                               "to cut into copies", f"{local_rows} rows (batch {batch} x {local_rows // batch} "
                               "positions)")
        self.sizes = split_sizes(local_rows, copies)
        self.starts = [sum(self.sizes[:c]) for c in range(copies)]
        chunk = local_rows // batch
        seq = chunk * tp_size
        to_stacked = []                     # stacked row k -> (batch, position) row
        for start, size in zip(self.starts, self.sizes):
            local = np.arange(start, start + size)
            b, j = np.divmod(local, chunk)
            for r in range(tp_size):
                to_stacked.append(b * seq + r * chunk + j)
        to_stacked = np.concatenate(to_stacked).astype(np.int64)
        self.identity = bool(np.array_equal(to_stacked, np.arange(to_stacked.size)))
        self.to_stacked = Tensor(to_stacked)
        self.to_full = Tensor(np.argsort(to_stacked).astype(np.int64))
        self.tp_size = tp_size

    def gathered_rows(self, c):
        return self.sizes[c] * self.tp_size


def _differentiate(save, fn, *inputs):
    """(fn(*inputs), pullback or None): with `save`, fn runs on a small tape of its own (`vjp`),
    whose pullback the hand-written backward calls."""
    if save:
        return vjp(fn, *inputs)
    return fn(*inputs), None


def _t(x):
    return F.transpose(x, (1, 0))


# -------------------------------------------------------------------------------------------------
# the decoder stack in copies
class MultiCopyDecoder:
    """The sequence-parallel forward of a stack of Megatron-style LLaMA blocks (tensor_parallel.py's
    ParallelTransformerBlock: `attention_norm`, `attention` with column-parallel wq/wk/wv, a
    row-parallel wo and `core(q, k, v, batch, rope_q, rope_k)`, `ffn_norm`, `feed_forward` with
    w1/w3 column- and w2 row-parallel) with this rank's rows in `copies` copies, scheduled by
    `TwoStreamSchedule` (module docstring).

        decoder(x, batch, rope_q, rope_k) -> the stack's output rows, (batch * s/p, dim)

    equal to running `block.sequence_parallel_forward` layer after layer. Under a gradient the
    call leaves one node on the tape whose backward is the scheduled hand-written one."""

    def __init__(self, layers, copies, group=None):
        self.layers = list(layers)
        self.copies = int(copies)
        self.group, self.tp_size, self.tp_rank = group_info(_OP, group)

    def parameters(self) -> list:
        """Every parameter the stack reads, in the order the backward returns their gradients."""
        out = []
        for b in self.layers:
            a, f = b.attention, b.feed_forward
            out += [b.attention_norm.weight, a.wq.weight, a.wk.weight, a.wv.weight, a.wo.weight,
                    b.ffn_norm.weight, f.w1.weight, f.w3.weight, f.w2.weight]
        return out

    def __call__(self, x, batch, rope_q, rope_k):
        if not isinstance(x, Tensor) or x.ndim != 2:
            raise OpValueError(_OP, "a 2-D (batch * positions, dim) Tensor", f"shape {tuple(getattr(x, 'shape', ()))}")
        rows = CopyRows(batch, x.shape[0], self.tp_size, self.copies)
        params = self.parameters()
        inputs = (x, *params)
        if grad_state.depth > 0 and any(t._node is not None for t in inputs):
            depth = grad_state.depth
            grad_state.depth = 0               # the forward keeps its own small tapes (vjp)
            try:
                out, env = self._forward(x, batch, rope_q, rope_k, rows, save=True)
            finally:
                grad_state.depth = depth
            out = _wrap(out._data)
            grad_state.record(_MultiCopyBackward(self, env, rows), inputs, {}, out)
            return out
        return self._forward(x, batch, rope_q, rope_k, rows, save=False)[0]

    # forward --------------------------------------------------------------------------------------
    def _forward(self, x, batch, rope_q, rope_k, rows, save):
        s = TwoStreamSchedule("forward")
        env, group, C = s.env, self.group, range(self.copies)
        for c in C:
            env[("residual", -1, c)] = F.narrow(x, 0, rows.starts[c], rows.sizes[c])
        for layer, b in enumerate(self.layers):
            self._forward_layer(s, layer, b, batch, rope_q, rope_k, rows, save, group)
        env = s.run()
        last = len(self.layers) - 1
        out = F.concat([env[("residual", last, c)] for c in C], 0) if self.copies > 1 else env[("residual", last, 0)]
        return out, env

    def _forward_layer(self, s, l, b, batch, rope_q, rope_k, rows, save, group):
        att, ff, C = b.attention, b.feed_forward, range(self.copies)
        eps1, eps2 = b.attention_norm.eps, b.ffn_norm.eps

        def norm1(c):
            def fn(env):
                return _differentiate(save, lambda x, g: F.rms_norm(x, g, eps1)[0],
                                      env[("residual", l - 1, c)], b.attention_norm.weight)
            return fn

        def qkv(c):
            def fn(env):
                u = env[("attention.all_gather", l, c)]
                return F.dense(u, att.wq.weight), F.dense(u, att.wk.weight), F.dense(u, att.wv.weight)
            return fn

        def core(env):
            q, k, v = ([env[("qkv", l, c)][i] for c in C] for i in range(3))
            join = (lambda ts: F.concat(ts, 0)) if self.copies > 1 else (lambda ts: ts[0])

            def attention(q, k, v):
                if not rows.identity:
                    q, k, v = (F.index_select(t, 0, rows.to_full) for t in (q, k, v))
                o = att.core(q, k, v, batch, rope_q, rope_k)
                return o if rows.identity else F.index_select(o, 0, rows.to_stacked)
            return _differentiate(save, attention, join(q), join(k), join(v))

        def wo(c):
            def fn(env):
                o = env[("attention", l, None)][0]
                start = sum(rows.gathered_rows(k) for k in range(c))
                o_c = F.narrow(o, 0, start, rows.gathered_rows(c)) if self.copies > 1 else o
                return F.dense(o_c, att.wo.weight), o_c
            return fn

        def norm2(c):
            def fn(env):
                return _differentiate(save, _residual_norm(eps2), env[("residual", l - 1, c)],
                                      env[("attention.reduce_scatter", l, c)], b.ffn_norm.weight)
            return fn

        def ffn(c):
            def fn(env):
                m = env[("ffn.all_gather", l, c)]
                (s_c, pull) = _differentiate(save, lambda g, v: F.silu(g) * v,
                                             F.dense(m, ff.w1.weight), F.dense(m, ff.w3.weight))
                return F.dense(s_c, ff.w2.weight), s_c, pull
            return fn

        def residual(c):
            def fn(env):
                return env[("ffn_norm", l, c)][0][1] + env[("ffn.reduce_scatter", l, c)]
            return fn

        gather = _post(comm_func.all_gather_into_tensor, group)
        scatter = _post(comm_func.reduce_scatter_tensor, group, "sum")
        for c in C:
            s.compute(("attention_norm", l, c), [("residual", l - 1, c)], norm1(c))
            s.comm(("attention.all_gather", l, c), [("attention_norm", l, c)],
                   gather(lambda env, c=c: env[("attention_norm", l, c)][0]), "all_gather")
        for c in C:
            s.compute(("qkv", l, c), [("attention.all_gather", l, c)], qkv(c))
        s.compute(("attention", l, None), [("qkv", l, c) for c in C], core)
        for c in C:
            s.compute(("wo", l, c), [("attention", l, None)], wo(c))
            s.comm(("attention.reduce_scatter", l, c), [("wo", l, c)],
                   scatter(lambda env, c=c: env[("wo", l, c)][0]), "reduce_scatter")
        for c in C:
            s.compute(("ffn_norm", l, c), [("attention.reduce_scatter", l, c), ("residual", l - 1, c)], norm2(c))
            s.comm(("ffn.all_gather", l, c), [("ffn_norm", l, c)],
                   gather(lambda env, c=c: env[("ffn_norm", l, c)][0][0]), "all_gather")
        for c in C:
            s.compute(("ffn", l, c), [("ffn.all_gather", l, c)], ffn(c))
            s.comm(("ffn.reduce_scatter", l, c), [("ffn", l, c)],
                   scatter(lambda env, c=c: env[("ffn", l, c)][0]), "reduce_scatter")
        for c in C:
            s.compute(("residual", l, c), [("ffn.reduce_scatter", l, c), ("ffn_norm", l, c)], residual(c))

    # backward -------------------------------------------------------------------------------------
    def backward(self, fwd, rows, dout):
        """(d input, d parameters...) of the stack, scheduled (module docstring); `fwd` is the
        forward's environment (its activations and pullbacks)."""
        s = TwoStreamSchedule("backward")
        env, C, L = s.env, range(self.copies), len(self.layers)
        for c in C:
            env[("d_out", L - 1, c)] = F.narrow(dout, 0, rows.starts[c], rows.sizes[c])
        for layer in reversed(range(L)):
            self._backward_layer(s, layer, self.layers[layer], fwd, rows)
        env = s.run()
        dx = [env[("attention_norm.bwd", 0, c)][0] for c in C]
        grads = [F.concat(dx, 0) if self.copies > 1 else dx[0]]
        for l in range(L):
            per_copy = [env[("attention_norm.bwd", l, c)][1] for c in C]
            qkv_dw = [env[("qkv.dw", l, c)] for c in C]
            wo_dw = [env[("wo.dw", l, c)] for c in C]
            norm2 = [env[("ffn_norm.bwd", l, c)][2] for c in C]
            ffn_dw = [env[("ffn.dw", l, c)] for c in C]
            grads += [_sum(per_copy), _sum([w[0] for w in qkv_dw]), _sum([w[1] for w in qkv_dw]),
                      _sum([w[2] for w in qkv_dw]), _sum(wo_dw), _sum(norm2), _sum([w[0] for w in ffn_dw]),
                      _sum([w[1] for w in ffn_dw]), _sum([w[2] for w in ffn_dw])]
        return tuple(grads)

    def _backward_layer(self, s, l, b, fwd, rows):
        att, ff, C, group = b.attention, b.feed_forward, range(self.copies), self.group
        gather = _post(comm_func.all_gather_into_tensor, group)
        scatter = _post(comm_func.reduce_scatter_tensor, group, "sum")

        def ffn_dx(c):       # ds = dy W2; (dg, dv) through SwiGLU; dM = dg W1 + dv W3
            def fn(env):
                dy = env[("ffn.all_gather", l, c)]
                dg, dv = fwd[("ffn", l, c)][2](F.matmul(dy, ff.w2.weight))
                return F.matmul(dg, ff.w1.weight) + F.matmul(dv, ff.w3.weight), dg, dv
            return fn

        def ffn_dw(c):       # dW1 = dg^T M, dW3 = dv^T M, dW2 = dy^T s
            def fn(env):
                _, dg, dv = env[("ffn.dx", l, c)]
                m, dy = fwd[("ffn.all_gather", l, c)], env[("ffn.all_gather", l, c)]
                return F.matmul(_t(dg), m), F.matmul(_t(dv), m), F.matmul(_t(dy), fwd[("ffn", l, c)][1])
            return fn

        def norm2_bwd(c):    # (m, h) = (ffn_norm(x + a), x + a): cotangents (dm, d out)
            def fn(env):
                return fwd[("ffn_norm", l, c)][1]((env[("ffn.reduce_scatter", l, c)], d_out(env, c)))
            return fn

        def wo_dx(c):
            def fn(env):
                return F.matmul(env[("attention.all_gather", l, c)], att.wo.weight)
            return fn

        def wo_dw(c):
            def fn(env):
                return F.matmul(_t(env[("attention.all_gather", l, c)]), fwd[("wo", l, c)][1])
            return fn

        def core_bwd(env):
            do = [env[("wo.dx", l, c)] for c in C]
            dq, dk, dv = fwd[("attention", l, None)][1](F.concat(do, 0) if self.copies > 1 else do[0])
            out, start = {}, 0
            for c in C:
                k = rows.gathered_rows(c)
                out[c] = tuple(F.narrow(t, 0, start, k) if self.copies > 1 else t for t in (dq, dk, dv))
                start += k
            return out

        def qkv_dx(c):
            def fn(env):
                dq, dk, dv = env[("attention.bwd", l, None)][c]
                return (F.matmul(dq, att.wq.weight) + F.matmul(dk, att.wk.weight)) + F.matmul(dv, att.wv.weight)
            return fn

        def qkv_dw(c):
            def fn(env):
                dq, dk, dv = env[("attention.bwd", l, None)][c]
                u = fwd[("attention.all_gather", l, c)]
                return F.matmul(_t(dq), u), F.matmul(_t(dk), u), F.matmul(_t(dv), u)
            return fn

        def norm1_bwd(c):    # d x = (residual path, from ffn_norm's backward) + attention_norm's backward
            def fn(env):
                dx_norm, dgamma = fwd[("attention_norm", l, c)][1](env[("attention.reduce_scatter", l, c)])
                return env[("ffn_norm.bwd", l, c)][0] + dx_norm, dgamma
            return fn

        top = l == len(self.layers) - 1
        # the cotangent of this layer's output copy c: given (top layer) or the layer above's d input
        d_out_key = (lambda c: ("d_out", l, c)) if top else (lambda c: ("attention_norm.bwd", l + 1, c))
        d_out = (lambda env, c: env[d_out_key(c)]) if top else (lambda env, c: env[d_out_key(c)][0])

        for c in C:          # the gradient of the FFN's reduce-scatter is an all-gather
            s.comm(("ffn.all_gather", l, c), [d_out_key(c)], gather(lambda env, c=c: d_out(env, c)), "all_gather")
        for c in C:
            s.compute(("ffn.dx", l, c), [("ffn.all_gather", l, c)], ffn_dx(c))
            s.comm(("ffn.reduce_scatter", l, c), [("ffn.dx", l, c)],
                   scatter(lambda env, c=c: env[("ffn.dx", l, c)][0]), "reduce_scatter")
        for c in C:
            s.compute(("ffn.dw", l, c), [("ffn.dx", l, c)], ffn_dw(c))
        for c in C:
            s.compute(("ffn_norm.bwd", l, c), [("ffn.reduce_scatter", l, c), d_out_key(c)], norm2_bwd(c))
            s.comm(("attention.all_gather", l, c), [("ffn_norm.bwd", l, c)],
                   gather(lambda env, c=c: env[("ffn_norm.bwd", l, c)][1]), "all_gather")
        for c in C:
            s.compute(("wo.dx", l, c), [("attention.all_gather", l, c)], wo_dx(c))
        for c in C:
            s.compute(("wo.dw", l, c), [("attention.all_gather", l, c)], wo_dw(c))
        s.compute(("attention.bwd", l, None), [("wo.dx", l, c) for c in C], core_bwd)
        for c in C:
            s.compute(("qkv.dx", l, c), [("attention.bwd", l, None)], qkv_dx(c))
            s.comm(("attention.reduce_scatter", l, c), [("qkv.dx", l, c)],
                   scatter(lambda env, c=c: env[("qkv.dx", l, c)]), "reduce_scatter")
        for c in C:
            s.compute(("qkv.dw", l, c), [("attention.bwd", l, None)], qkv_dw(c))
        for c in C:
            s.compute(("attention_norm.bwd", l, c), [("attention.reduce_scatter", l, c), ("ffn_norm.bwd", l, c)],
                      norm1_bwd(c))


def _residual_norm(eps):
    """(x, a, gamma) -> (ffn_norm(x + a), x + a): llm/model.py's residual_rms_norm with gamma an
    explicit input (so its gradient comes out of the pullback)."""
    def fn(x, a, gamma):
        if _FUSED_ADD_RMS_NORM is not None:
            y, _, h = _FUSED_ADD_RMS_NORM(x, a, gamma, eps)
            return y, h
        h = x + a
        return F.rms_norm(h, gamma, eps)[0], h
    return fn


def _post(collective, group, *args):
    """A comm task body: `make(select)(env)` posts collective(select(env), *args, group, async)."""
    def make(select):
        def fn(env):
            return collective(select(env), *args, group=group, async_op=True)
        return fn
    return make


def _sum(parts):
    total = parts[0]
    for p in parts[1:]:
        total = total + p
    return total


class _MultiCopyBackward:
    """The tape node's rule for one MultiCopyDecoder call (like nn.Cell's _CellBprop): inputs are
    (x, *decoder.parameters()); backward runs `MultiCopyDecoder.backward` on the saved forward."""

    __slots__ = ("decoder", "env", "rows")
    name = "multi_copy_decoder"

    def __init__(self, decoder, env, rows):
        self.decoder, self.env, self.rows = decoder, env, rows

    def bprop(self, inputs, out, dout):
        if grad_state.depth > 0:
            raise OpValueError(_OP, "a first-order gradient (the multi-copy backward is written by hand and is "
                               "not differentiable again)", "a gradient of a gradient")
        grads = self.decoder.backward(self.env, self.rows, dout)
        self.env = None                         # the activations are no longer needed
        return grads


__all__ = ["MultiCopyDecoder", "TwoStreamSchedule", "CopyRows", "check_fine_grain_interleave", "timeline",
           "reset_timeline", "record_timeline", "overlap_fraction"]
