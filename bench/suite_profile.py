"""Where the suite's training steps spend their time: minispore beside PyTorch, by category (issue 14).

    .venv/bin/python bench/suite_profile.py                        # all four models, one thread
    .venv/bin/python bench/suite_profile.py --models gpt,mlp --iters 10 --json out.json
    .venv/bin/python bench/suite_profile.py --quick                # tiny models, 2 steps: does it run?

Options: --models, --iters (profiled steps, default 8), --warmup (default 2), --threads (default 1),
--top (rows of the per-primitive tables, default 12), --no-o1, --quick, --json (default
out/bench_suite_profile.json).

For each of the suite's models (bench/suite.py builds them: the same weights and data in both
frameworks, single-threaded through threadpoolctl and torch.set_num_threads) one training step —
forward, backward, optimizer update — is profiled three ways:

* **minispore PyNative** with bench/prim_profile.py's `PrimProfile`: every primitive's kernel
  timed (exclusive), per phase: forward, backward (from the moment `tape.backward` starts) and
  optimizer (the update call, timed as a whole);
* **minispore jit O1** (`ms.jit(value_and_grad(...), jit_level="O1")`, the optimizer eager, as in
  the suite) with `minispore.Profiler`: the O1 executor reports every graph node (fused C groups
  are named `fused_elementwise_*` / `fused_reduce_*`) and every graph run. NOTE: while a Profiler
  records, O0/O1 run their plan through the stream runner (graph/run/multi_stream.py) instead of
  the plain heap loop, so the executor-overhead row is a little larger than in an unprofiled run;
* **PyTorch eager** with `torch.profiler` (CPU activity): per aten op *self* time, phases marked
  with `record_function`; the optimizer is `opt.step()` as a whole.

Categories (the same for all three; `category()` / `torch_category()` below say which op goes
where): matmul (GEMM), conv, elementwise, normalization, softmax/attention, loss, reduce/index/copy
(reductions, gathers, layout copies, allocation), fused C (O1's generated kernels), host call (O1
graph nodes that call back into Python, e.g. BatchNorm's running statistics), optimizer (the
whole update: kernels plus its Python), framework overhead (= step time minus everything above:
dispatch, inference, the tape / autograd engine, wrapping). The kernel rows are pure kernel time,
so every row of a column adds up to that column's step time exactly.

Which steps: after --warmup steps, --iters profiled steps per row; the reported numbers are the
averages over the middle half of those steps ranked by step time (the median step and its
neighbours; every step when there are fewer than four). An average, unlike a per-row median, adds
up: the rows sum to the step. The header also gives the median step time measured without any
profiler (round-robin, both frameworks), because the timers add to the step (PrimProfile ~0.5 µs
per kernel call, torch.profiler a few µs per aten op).

GFLOP/s: the matmul and conv rows divide the step's analytic FLOPs of that category (suite.py's
counts: no recomputation) by the row's time, against this machine's single-thread sgemm peak
(suite.sgemm_peak). For the LLaMA preset minispore runs attention as one fused flash-attention
kernel while the PyTorch mirror writes it out (batched matmuls + softmax), so there the attention
products' FLOPs sit in minispore's softmax/attention row and in PyTorch's matmul row.
"""
from __future__ import annotations

import argparse
import bisect
import os
import platform
import statistics
import sys
import tempfile
import time
from collections import defaultdict

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import minispore as ms                          # noqa: E402
from minispore.ops.primitive import PRIMITIVES  # noqa: E402
import suite                                    # noqa: E402
from prim_profile import PrimProfile            # noqa: E402

KERNEL_CATEGORIES = ("matmul", "conv", "elementwise", "normalization", "softmax/attention", "loss",
                     "reduce/index/copy", "fused C", "host call")
CATEGORIES = KERNEL_CATEGORIES + ("optimizer", "framework overhead")
COLUMNS = ("minispore PyNative", "minispore jit O1", "PyTorch eager")
FLOP_CATEGORIES = ("matmul", "conv")

# ---------------------------------------------------------------------------------------------
# categories: minispore primitives
_MS_NAMED = {
    "matmul": {"matmul", "bmm", "mm", "dense", "addmm", "einsum", "outer", "matmul_allreduce",
               "quant_batch_matmul", "weight_quant_batch_matmul"},
    "conv": {"conv2d", "conv2d_backprop_input", "conv2d_backprop_filter"},
    "normalization": {"layer_norm", "layer_norm_grad", "batch_norm", "batch_norm_grad", "rms_norm", "rms_norm_grad",
                      "add_rms_norm", "group_norm", "group_norm_grad"},
    "softmax/attention": {"softmax", "softmax_grad", "flash_attention_score", "flash_attention_score_grad",
                          "prompt_flash_attention", "incre_flash_attention", "paged_attention"},
    "loss": {"cross_entropy", "cross_entropy_grad", "nll_loss", "nll_loss_grad", "log_softmax", "log_softmax_grad",
             "binary_cross_entropy"},
    "reduce/index/copy": {"embedding", "embedding_grad", "gather", "gather_grad", "gather_nd", "gather_elements",
                          "gather_elements_grad", "gather_along_axis", "getitem", "getitem_grad", "setitem", "concat",
                          "stack", "split", "transpose", "reshape", "copy", "pad", "pad_grad", "tile", "broadcast_to",
                          "zeros", "ones", "zeros_like", "ones_like", "full", "full_like", "arange", "one_hot",
                          "scatter", "scatter_nd", "scatter_add_along_axis", "tensor_scatter", "index_add",
                          "index_fill", "repeat_interleave", "repeat_interleave_grad", "flip", "roll", "triu", "tril",
                          "argmax", "argmin", "topk", "sort", "cumsum", "logsumexp", "adaptive_avg_pool2d",
                          "adaptive_avg_pool2d_grad", "avg_pool2d", "avg_pool2d_grad", "max_pool2d",
                          "max_pool2d_grad"},
}
_MS_BY_NAME = {n: c for c, names in _MS_NAMED.items() for n in names}


def category(prim_name: str) -> str:
    """The category of a minispore primitive (or graph node) name. Named sets first; then the
    primitive's own facts: a view or a fusion reduction is data movement / a reduction, anything
    else (activations, arithmetic, casts, their gradients) elementwise."""
    if prim_name.startswith("fused_"):
        return "fused C"
    if prim_name == "HostCall":          # a graph node that calls back into Python (BatchNorm's statistics)
        return "host call"
    c = _MS_BY_NAME.get(prim_name)
    if c is not None:
        return c
    p = PRIMITIVES.get(prim_name)
    if prim_name.startswith("reduce_") or (p is not None and (
            p.view is not None or (p.fusion is not None and getattr(p.fusion, "reduce", None)))):
        return "reduce/index/copy"
    return "elementwise"


# categories: PyTorch aten ops (names without the "aten::" prefix)
_TORCH_NAMED = {
    "matmul": {"mm", "addmm", "bmm", "matmul", "linear", "baddbmm", "addbmm", "dot", "mv", "addmv",
               "_addmm_activation"},
    "conv": {"conv2d", "convolution", "_convolution", "mkldnn_convolution", "convolution_backward",
             "_slow_conv2d_forward", "_slow_conv2d_backward", "thnn_conv2d", "_nnpack_spatial_convolution",
             "mkldnn_convolution_backward"},
    "normalization": {"layer_norm", "native_layer_norm", "native_layer_norm_backward", "batch_norm",
                      "_batch_norm_impl_index", "native_batch_norm", "native_batch_norm_backward",
                      "_native_batch_norm_legit", "_native_batch_norm_legit_functional", "_batch_norm_with_update",
                      "batch_norm_backward", "_batch_norm_impl_index_backward", "rms_norm", "_fused_rms_norm",
                      "_fused_rms_norm_backward", "group_norm", "native_group_norm", "native_group_norm_backward"},
    "softmax/attention": {"softmax", "_softmax", "_softmax_backward_data", "_safe_softmax",
                          "scaled_dot_product_attention", "_scaled_dot_product_attention_math",
                          "_scaled_dot_product_flash_attention_for_cpu",
                          "_scaled_dot_product_flash_attention_for_cpu_backward"},
    "loss": {"cross_entropy_loss", "log_softmax", "_log_softmax", "_log_softmax_backward_data", "nll_loss",
             "nll_loss_nd", "nll_loss_forward", "nll_loss_backward", "nll_loss2d_forward", "nll_loss2d_backward"},
    "reduce/index/copy": {"sum", "mean", "amax", "max", "min", "embedding", "embedding_backward",
                          "embedding_dense_backward", "index_select", "index", "index_add_", "index_put_", "gather",
                          "scatter_add_", "copy_", "clone", "contiguous", "cat", "stack", "split", "split_with_sizes",
                          "chunk", "unbind", "narrow", "slice", "select", "view", "_unsafe_view", "reshape", "permute",
                          "transpose", "t", "expand", "as_strided", "unsqueeze", "squeeze", "flatten", "detach",
                          "alias", "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "zero_", "ones",
                          "ones_like", "fill_", "full", "arange", "new_zeros", "new_empty", "new_empty_strided",
                          "to", "_to_copy", "item", "_local_scalar_dense", "resolve_conj", "resolve_neg", "triu",
                          "lift_fresh", "view_as", "expand_as", "unsafe_split", "mean_backward", "sum_backward",
                          "_reshape_alias", "max_pool2d", "max_pool2d_with_indices", "adaptive_avg_pool2d",
                          "_adaptive_avg_pool2d", "_adaptive_avg_pool2d_backward", "avg_pool2d"},
}
_TORCH_BY_NAME = {n: c for c, names in _TORCH_NAMED.items() for n in names}


def torch_category(op_name: str) -> str:
    """The category of an aten op ('aten::addmm'); other aten ops (add, mul, gelu, relu,
    threshold_backward, silu, rsqrt, _foreach_* outside the optimizer ...) are elementwise."""
    return _TORCH_BY_NAME.get(op_name.split("::", 1)[-1], "elementwise")


def category_flops(spec, size, flash_attention: bool) -> dict:
    """The step's analytic matmul/conv FLOPs (suite.py's count) split by the row that does them."""
    total = spec.matmul_flops(size)
    if spec.name == "resnet":
        fc = 3 * 2 * size["batch"] * size["widths"][-1] * 10           # the classifier: forward x3
        return {"conv": total - fc, "matmul": fc}
    if spec.name == "llama" and flash_attention:
        cfg = suite._llama_cfg(size)
        attn = 3 * cfg.n_layers * 2 * 2 * size["batch"] * cfg.max_seq_len ** 2 * cfg.dim
        return {"matmul": total - attn, "softmax/attention": attn}
    return {"matmul": total}


# ---------------------------------------------------------------------------------------------
def central(steps: list, key) -> list:
    """The middle half of `steps` ranked by `key` (every step when there are fewer than four)."""
    ranked = sorted(steps, key=key)
    cut = len(ranked) // 4
    return ranked[cut:len(ranked) - cut] or ranked


def _average(steps: list) -> dict:
    """Average, over the central steps, of the per-step breakdowns: {"step", "categories",
    "phases", "ops" {(name, phase): (ms, calls)}} (everything in ms per step)."""
    mid = central(steps, key=lambda s: s["step"])
    n = len(mid)
    cats = {c: sum(s["categories"].get(c, 0.0) for s in mid) / n for c in CATEGORIES}
    phases = defaultdict(float)
    ops = defaultdict(lambda: [0.0, 0.0])
    for s in mid:
        for k, v in s["phases"].items():
            phases[k] += v / n
        for k, (t, c) in s["ops"].items():
            ops[k][0] += t / n
            ops[k][1] += c / n
    return {"step": sum(s["step"] for s in mid) / n, "categories": cats, "phases": dict(phases),
            "ops": {k: tuple(v) for k, v in ops.items()}, "steps_used": n, "steps": len(steps)}


# ---------------------------------------------------------------------------------------------
# minispore PyNative
def build_pynative(spec, size):
    """suite.build_minispore's PyNative model, with the update kept apart so it can be timed."""
    ms.set_seed(suite.SEED)
    cell, loss_fn, opt = spec.build_minispore(size)
    cell.set_train(True)
    return cell, ms.value_and_grad(loss_fn, None, opt.parameters), opt


def profile_pynative(spec, size, inputs, warmup, iters):
    """Per-step breakdowns of `iters` PyNative steps (after the first step and `warmup` more)."""
    cell, grad_fn, opt = build_pynative(spec, size)
    weights = suite.minispore_params(cell)
    clock = time.perf_counter

    def step(x, y, prof=None):
        if prof is not None:
            prof.phase, prof.backward_t0 = "forward", None
        t0 = clock()
        loss, grads = grad_fn(x, y)
        t1 = clock()
        if prof is not None:
            prof.phase = "optimizer"
        opt(grads)
        t2 = clock()
        loss = float(loss.asnumpy())
        return loss, (t0, t1, t2, clock())

    first_loss, _ = step(*inputs[0])
    steps = []
    with PrimProfile() as prof:
        for i in range(warmup + iters):
            _, (t0, t1, t2, t3) = step(*inputs[(i + 1) % len(inputs)], prof)
            kernels = prof.take_step()
            if i < warmup:
                continue
            tb = prof.backward_t0 if prof.backward_t0 is not None else t1
            cats = defaultdict(float)
            for (name, phase), (s, _n) in kernels.items():
                if phase != "optimizer":
                    cats[category(name)] += s * 1e3
            cats["optimizer"] = (t2 - t1) * 1e3
            total = (t3 - t0) * 1e3
            cats["framework overhead"] = total - sum(cats.values())
            steps.append({"step": total, "categories": dict(cats),
                          "phases": {"forward": (tb - t0) * 1e3, "backward": (t1 - tb) * 1e3,
                                     "optimizer": (t2 - t1) * 1e3},
                          "ops": {k: (s * 1e3, n) for k, (s, n) in kernels.items()}})
    return first_loss, weights, steps


# minispore jit O1
def profile_o1(spec, size, inputs, warmup, iters):
    """Per-step breakdowns of `iters` O1 steps, from minispore.Profiler's graph-node events (the
    step as suite.build_minispore(spec, size, "O1") builds it, with the update timed apart)."""
    cell, grad_fn, opt = build_pynative(spec, size)
    grad_fn = ms.jit(grad_fn, capture_mode="trace", jit_level="O1")
    clock = time.perf_counter_ns

    def step(x, y):
        t0 = clock()
        loss, grads = grad_fn(x, y)
        t1 = clock()
        opt(grads)
        t2 = clock()
        return float(loss.asnumpy()), (t0, t1, t2, clock())

    first_loss, _ = step(*inputs[0])                      # compiles
    marks = []
    with tempfile.TemporaryDirectory() as tmp:
        prof = ms.Profiler(output_path=tmp, start_profile=False)
        prof.start()                                      # warm-up under the profiler too: its first
        for i in range(warmup + iters):                   # step may differ (the executor is wrapped)
            mark = step(*inputs[(i + 1) % len(inputs)])[1]
            if i >= warmup:
                marks.append(mark)
        prof.stop()
        events = sorted(prof.events, key=lambda e: e[3])
    starts = [e[3] for e in events]
    steps = []
    for t0, t1, t2, t3 in marks:
        lo, hi = bisect.bisect_left(starts, t0), bisect.bisect_right(starts, t1)
        cats, ops = defaultdict(float), defaultdict(lambda: [0.0, 0])
        graph_ms = 0.0
        for name, cat, _tid, e0, e1, _args in events[lo:hi]:
            d = (e1 - e0) / 1e6
            if cat == "graph_run":
                graph_ms += d
            elif cat == "graph":
                cats[category(name)] += d
                o = ops[(node_kind(name), "graph")]
                o[0] += d
                o[1] += 1
        total = (t3 - t0) / 1e6
        cats["optimizer"] = (t2 - t1) / 1e6
        cats["framework overhead"] = total - sum(cats.values())   # executor between nodes + the jit call
        steps.append({"step": total, "categories": dict(cats),
                      "phases": {"graph run (forward + backward)": graph_ms,
                                 "jit call outside the graph run": (t1 - t0) / 1e6 - graph_ms,
                                 "optimizer (eager)": (t2 - t1) / 1e6},
                      "ops": {k: tuple(v) for k, v in ops.items()}})
    return first_loss, steps


def node_kind(name: str) -> str:
    """A graph node's kind: its primitive's name; fused groups by kind ('fused_elementwise')."""
    if name.startswith("fused_"):
        return name.split("{", 1)[0].rstrip("0123456789").rstrip("_")
    return name


# PyTorch eager
def profile_torch(spec, size, weights, inputs, warmup, iters):
    """Per-step breakdowns of `iters` PyTorch eager steps from torch.profiler's aten self times."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function
    from suite_torch_models import load_minispore_weights
    torch.manual_seed(suite.SEED)
    model = spec.build_torch(size)
    load_minispore_weights(model, weights)
    model.train()
    opt = spec.torch_optimizer(model.parameters())

    def step(x, y):
        with record_function("suite:step"):
            opt.zero_grad(set_to_none=True)
            with record_function("suite:forward"):
                loss = model(x, y)
            with record_function("suite:backward"):
                loss.backward()
            with record_function("suite:optimizer"):
                opt.step()
            return loss.item()

    first_loss = step(*inputs[0])
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for i in range(warmup + iters):
            step(*inputs[(i + 1) % len(inputs)])
    events = prof.events()
    ranges = defaultdict(list)                       # marker -> sorted [(start, end)] in µs
    for e in events:
        if e.name.startswith("suite:"):
            ranges[e.name[6:]].append((e.time_range.start, e.time_range.end))
    for v in ranges.values():
        v.sort()
    step_ranges = ranges["step"]
    phase_of = {p: ([r[0] for r in ranges[p]], ranges[p]) for p in ("forward", "backward", "optimizer")}

    def locate(t, starts, rs):
        i = bisect.bisect_right(starts, t) - 1
        return i if i >= 0 and t <= rs[i][1] else None

    step_starts = [r[0] for r in step_ranges]
    per_step = [{"ops": defaultdict(lambda: [0.0, 0]), "cats": defaultdict(float)} for _ in step_ranges]
    for e in events:
        if not e.name.startswith("aten::"):
            continue                                 # autograd nodes, annotations: framework time
        t = e.time_range.start
        si = locate(t, step_starts, step_ranges)
        if si is None:
            continue
        phase = next((p for p, (st, rs) in phase_of.items() if locate(t, st, rs) is not None), "step")
        ms_self = e.self_cpu_time_total / 1e3
        o = per_step[si]["ops"][(e.name[6:], phase)]
        o[0] += ms_self
        o[1] += 1
        if phase != "optimizer":
            per_step[si]["cats"][torch_category(e.name)] += ms_self
    steps = []
    for si, (s0, s1) in enumerate(step_ranges):
        if si < warmup:
            continue

        def inside(p):
            return sum(min(b, s1) - max(a, s0) for a, b in ranges[p] if a < s1 and b > s0) / 1e3
        cats = dict(per_step[si]["cats"])
        total = (s1 - s0) / 1e3
        cats["optimizer"] = inside("optimizer")
        cats["framework overhead"] = total - sum(cats.values())
        steps.append({"step": total, "categories": cats,
                      "phases": {p: inside(p) for p in ("forward", "backward", "optimizer")},
                      "ops": {k: tuple(v) for k, v in per_step[si]["ops"].items()}})
    return first_loss, steps


def unprofiled_medians(spec, size, weights, ms_inputs, t_inputs, iters, with_o1):
    """Median step time of each column with no profiler at all, round-robin."""
    cell, grad_fn, opt = build_pynative(spec, size)

    def pynative(x, y):
        loss, grads = grad_fn(x, y)
        opt(grads)
        return float(loss.asnumpy())
    rows = {"minispore PyNative": (pynative, ms_inputs)}
    if with_o1:
        rows["minispore jit O1"] = (suite.build_minispore(spec, size, "O1")[1], ms_inputs)
    if t_inputs is not None:
        rows["PyTorch eager"] = (suite.build_torch(spec, size, weights)[1], t_inputs)
    times = defaultdict(list)
    for i in range(iters + 1):
        for name, (fn, inp) in rows.items():
            t0 = time.perf_counter()
            fn(*inp[i % len(inp)])
            if i:                                    # the first round: warm-up (O1 compiles)
                times[name].append((time.perf_counter() - t0) * 1e3)
    return {k: statistics.median(v) for k, v in times.items()}


# ---------------------------------------------------------------------------------------------
def profile_model(spec, size, iters, warmup, with_o1, with_torch, rng):
    batches = spec.make_batches(size, 4, rng)
    ms_inputs = [(ms.Tensor(x), ms.Tensor(y)) for x, y in batches]
    first, weights, py_steps = profile_pynative(spec, size, ms_inputs, warmup, iters)
    out = {"first_loss": first, "columns": {"minispore PyNative": _average(py_steps)}}
    if with_o1:
        o1_first, o1_steps = profile_o1(spec, size, ms_inputs, warmup, iters)
        if not np.isfinite(o1_first) or suite.rel(o1_first, first) > suite.JIT_TOL:
            raise suite.SuiteError(f"{spec.name}: O1 first loss {o1_first!r} != PyNative's {first!r}")
        out["columns"]["minispore jit O1"] = _average(o1_steps)
    t_inputs = None
    if with_torch:
        import torch
        t_inputs = [(torch.from_numpy(x), torch.from_numpy(y)) for x, y in batches]
        t_first, t_steps = profile_torch(spec, size, weights, t_inputs, warmup, iters)
        if not np.isfinite(t_first) or suite.rel(t_first, first) > suite.TORCH_TOL:
            raise suite.SuiteError(f"{spec.name}: PyTorch first loss {t_first!r} != minispore's {first!r}")
        out["columns"]["PyTorch eager"] = _average(t_steps)
    out["unprofiled_ms"] = unprofiled_medians(spec, size, weights, ms_inputs, t_inputs, max(iters, 3), with_o1)
    out["overhead_without_profiler_ms"] = overhead_without_profiler(out)
    flash = any(k[0].startswith("flash_attention") for k in out["columns"]["minispore PyNative"]["ops"])
    out["flops"] = {"minispore": category_flops(spec, size, flash), "torch": category_flops(spec, size, False)}
    return out


# ---------------------------------------------------------------------------------------------
# printing
def _f(v, spec=".2f"):
    return "–" if v is None else f"{v:{spec}}"


def category_table(m, peak) -> str:
    cols = [c for c in COLUMNS if c in m["columns"]]
    head = "| category | " + " | ".join(f"{c} ms | %" for c in cols)
    ratios = [c for c in cols if c != "PyTorch eager" and "PyTorch eager" in cols]
    head += "".join(f" | {c.replace('minispore ', '')} / PyTorch" for c in ratios)
    head += " | GFLOP/s " + " / ".join(c.replace("minispore ", "") for c in cols) + f" (% of peak {peak:.0f}) |"
    n_cols = 1 + 2 * len(cols) + len(ratios) + 1
    lines = [head, "|---|" + "---:|" * (n_cols - 1)]
    used = [c for c in CATEGORIES if any(m["columns"][col]["categories"].get(c, 0.0) > 0.0005 for col in cols)]
    for cat in used + ["step"]:
        row = [cat if cat != "step" else "**step (profiled)**"]
        vals = {}
        for col in cols:
            a = m["columns"][col]
            v = a["step"] if cat == "step" else a["categories"].get(cat, 0.0)
            vals[col] = v
            row += [f"{v:.2f}", f"{100 * v / a['step']:.0f}%"]
        for col in ratios:
            t = vals["PyTorch eager"]
            row.append(f"{vals[col] / t:.2f}x" if t > 0.005 else "–")
        gf = []
        if cat in FLOP_CATEGORIES or (cat == "softmax/attention" and cat in m["flops"]["minispore"]):
            for col in cols:
                fl = m["flops"]["torch" if col == "PyTorch eager" else "minispore"].get(cat, 0)
                v = vals[col]
                gf.append(f"{fl / (v * 1e-3) / 1e9:.1f} ({100 * fl / (v * 1e-3) / 1e9 / peak:.0f}%)"
                          if fl and v > 0 else "–")
        row.append(" / ".join(gf))
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def overhead_without_profiler(m) -> dict:
    """Per column: the unprofiled median step minus the profiled kernel rows and optimizer — the
    framework overhead with the timers' own cost mostly taken out (the kernel rows still carry a
    little of it, so this errs low)."""
    out = {}
    for col, a in m["columns"].items():
        t = m["unprofiled_ms"].get(col)
        if t is not None:
            out[col] = t - (a["step"] - a["categories"]["framework overhead"])
    return out


def phase_table(m) -> str:
    lines = ["| column | phase | ms/step | % of step |", "|---|---|---:|---:|"]
    for col, a in m["columns"].items():
        for p, v in a["phases"].items():
            lines.append(f"| {col} | {p} | {v:.2f} | {100 * v / a['step']:.0f}% |")
    return "\n".join(lines)


def op_table(a, top, cat_fn, title) -> str:
    """Top ops of one column by total time, with per-phase split."""
    per = defaultdict(lambda: defaultdict(lambda: [0.0, 0.0]))
    for (name, phase), (t, n) in a["ops"].items():
        per[name][phase][0] += t
        per[name][phase][1] += n
    phases = sorted({p for d in per.values() for p in d}, key=["forward", "backward", "optimizer", "graph",
                                                              "step"].index)
    ranked = sorted(per, key=lambda k: -sum(v[0] for v in per[k].values()))
    lines = [f"| {title} | category | " + " | ".join(f"{p} ms (calls)" for p in phases) + " | total ms | % of step |",
             "|---|---|" + "---:|" * (len(phases) + 2)]
    for name in ranked[:top]:
        d = per[name]
        tot = sum(v[0] for v in d.values())
        cells = [f"{d[p][0]:.2f} ({d[p][1]:.0f})" if p in d else "" for p in phases]
        lines.append(f"| {name} | {cat_fn(name)} | " + " | ".join(cells) + f" | {tot:.2f} | "
                     f"{100 * tot / a['step']:.1f}% |")
    rest = ranked[top:]
    if rest:
        tot = sum(v[0] for k in rest for v in per[k].values())
        lines.append(f"| ({len(rest)} more) | | " + " | ".join("" for _ in phases) + f" | {tot:.2f} | "
                     f"{100 * tot / a['step']:.1f}% |")
    return "\n".join(lines)


def print_model(name, m, peak, top):
    title = suite.MODELS[name].title
    un = m["unprofiled_ms"]
    print(f"\n## {title}\n")
    print("step without profiler (median, round-robin): " + ", ".join(f"{k} {v:.1f} ms" for k, v in un.items())
          + "; with profiler: " + ", ".join(f"{k} {a['step']:.1f} ms" for k, a in m["columns"].items())
          + f"; central {m['columns']['minispore PyNative']['steps_used']} of "
            f"{m['columns']['minispore PyNative']['steps']} steps averaged\n")
    print(category_table(m, peak))
    est = overhead_without_profiler(m)
    if est:
        print("\nframework overhead without the profiler's own cost (estimate: unprofiled median step minus the "
              "profiled kernel and optimizer rows): " + ", ".join(f"{k} {v:.2f} ms" for k, v in est.items()))
    print()
    print(phase_table(m))
    cols = m["columns"]
    print()
    print(op_table(cols["minispore PyNative"], top, category, "minispore PyNative primitive (kernel, exclusive)"))
    if "minispore jit O1" in cols:
        print()
        print(op_table(cols["minispore jit O1"], top, category, "minispore O1 graph node kind"))
    if "PyTorch eager" in cols:
        print()
        print(op_table(cols["PyTorch eager"], top, lambda n: torch_category("aten::" + n), "PyTorch aten op (self)"))


def _jsonable(m):
    out = dict(m)
    out["columns"] = {}
    for col, a in m["columns"].items():
        b = dict(a)
        b["ops"] = [{"op": k[0], "phase": k[1], "ms": t, "calls": n} for k, (t, n) in
                    sorted(a["ops"].items(), key=lambda kv: -kv[1][0])]
        out["columns"][col] = b
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="gpt,llama,resnet,mlp", help="comma-separated, from " + ",".join(suite.MODELS))
    p.add_argument("--iters", type=int, default=8, help="profiled steps per column")
    p.add_argument("--warmup", type=int, default=2, help="unprofiled-in-the-result steps before them")
    p.add_argument("--threads", type=int, default=1, help="threads for NumPy's BLAS and PyTorch (default 1)")
    p.add_argument("--top", type=int, default=12, help="rows of the per-op tables")
    p.add_argument("--no-o1", action="store_true", help="leave out the jit O1 column")
    p.add_argument("--no-torch", action="store_true", help="minispore columns only")
    p.add_argument("--quick", action="store_true", help="tiny models (a smoke run)")
    p.add_argument("--json", default=None, help="write the results here (default out/bench_suite_profile.json)")
    args = p.parse_args(argv)
    names = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = [m for m in names if m not in suite.MODELS]
    if unknown:
        p.error(f"unknown models {unknown}; choose from {list(suite.MODELS)}")
    if args.iters < 1 or args.warmup < 0:
        p.error("--iters must be >= 1 and --warmup >= 0")
    torch = None
    if not args.no_torch:
        import torch
    size_name = "tiny" if args.quick else "full"
    load_start = os.getloadavg()
    limiter = suite.set_threads(args.threads)       # noqa: F841  (kept alive for the whole run)
    print(f"# minispore suite profile — {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(f"{suite.cpu_model()}, {os.cpu_count()} CPUs; Python {platform.python_version()}, NumPy {np.__version__}"
          + (f", PyTorch {torch.__version__}" if torch else "") + f"; threads {args.threads}")
    print(suite.blas_description())
    peak = suite.sgemm_peak(1024 if args.quick else 2048, 3 if args.quick else 7)
    print(f"sgemm peak ({args.threads} thread(s), np.matmul float32): {peak:.1f} GFLOP/s; load average at start "
          f"{load_start[0]:.2f}; {args.warmup} warm-up + {args.iters} profiled steps per column", flush=True)
    rng = np.random.default_rng(1234)
    results = {}
    for name in names:
        spec = suite.MODELS[name]
        print(f"profiling {name} ...", flush=True)
        results[name] = profile_model(spec, spec.sizes[size_name], args.iters, args.warmup, not args.no_o1,
                                      torch is not None, rng)
    load_end = os.getloadavg()
    print(f"\nload average {load_start[0]:.2f} at start, {load_end[0]:.2f} at end. Kernel rows are pure kernel "
          "time; 'optimizer' is the whole update; 'framework overhead' is the rest of the step (for O1: the "
          "executor between the graph's nodes plus the jit call around the graph run).")
    for name in names:
        print_model(name, results[name], peak, args.top)
    out = {"date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "command": " ".join([os.path.relpath(sys.executable)] + sys.argv) if argv is None else f"main({argv})",
           "machine": {"cpu": suite.cpu_model(), "cpus": os.cpu_count(), "python": platform.python_version(),
                       "numpy": np.__version__, "torch": torch.__version__ if torch else None,
                       "blas": suite.blas_description()},
           "threads": args.threads, "iters": args.iters, "warmup": args.warmup, "size": size_name,
           "load_average": {"start": list(load_start), "end": list(load_end)}, "sgemm_peak_gflops": peak,
           "categories": list(CATEGORIES), "models": {n: _jsonable(m) for n, m in results.items()}}
    path = args.json or os.path.join(os.path.dirname(HERE), "out", "bench_suite_profile.json")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    import json
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
    print(f"\nJSON: {path}")
    return out


if __name__ == "__main__":
    try:
        main()
    except suite.SuiteError as e:
        print(f"\nPROFILE FAILED: {e}", file=sys.stderr)
        sys.exit(2)
