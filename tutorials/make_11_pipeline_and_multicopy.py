"""Writes tutorials/11_pipeline_and_multicopy.ipynb (the cells, without outputs) with nbformat.

    .venv/bin/python tutorials/make_11_pipeline_and_multicopy.py
    .venv/bin/python -m pytest --nbmake --overwrite tutorials/11_pipeline_and_multicopy.ipynb -p no:cacheprovider

The second command executes the notebook and stores its outputs (the site renders the committed
outputs; tests/docs/test_site_build.py checks that they are there). Edit the cells here, not in
the .ipynb, so the notebook stays reviewable as Python.
"""
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).resolve().parent
md, code = new_markdown_cell, new_code_cell

CELLS = [
    md("""# Pipeline parallel and fine-grained multi-copy on 4 ranks

The [Eight ways to split a model](../parallel-strategies.md) page lists what MindSpore 2.3 can cut
a training step into. [Notebook 10](10_distributed_training.ipynb) ran data, tensor, sequence and
optimizer parallelism; this one runs the two that are about **time** rather than bytes:

1. **Pipeline parallel** cuts the *layers* into stages on different ranks, and the batch into
   micro-batches that flow through the stages (`nn.PipelineCell`, MindSpore's name). Here: an
   MLP on 2 stages × 2 data-parallel replicas (4 ranks), with the 1F1B and the interleaved 1F1B
   schedules, against one process.
2. **Fine-grained multi-copy** cuts one tensor-parallel rank's rows into two *copies*, so that one
   copy's all-gather / reduce-scatter travels while the other copy computes (MindFormers'
   `fine_grain_interleave: 2`). Here: a tiny LLaMA with 2 data-parallel × 2 tensor-parallel ranks
   and sequence parallel, with 1 and 2 copies: the same numbers.
3. Then the **Gantt charts**: the schedule the ranks really ran (measured with `perf_counter`),
   and the two-stream simulator's prediction of the same schedule on an Ascend 910B, where two
   copies hide part of the forward's communication and nearly all of the backward's.

The 4 ranks share this machine's CPU cores, so wall times here say little about speed; the
numbers to look at are the losses (equal to one process) and the shape of the schedules."""),
    code("""import json
import os
import runpy
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

import minispore as ms
from minispore.nn.pipeline_schedule import bubble_fraction_formula, make_schedule, simulate

workdir = Path(tempfile.mkdtemp(prefix="minispore-pipeline-"))
(workdir / "out").mkdir()
print(workdir)"""),
    md("""## The pipeline schedules, before any MPI

A schedule is data: for every stage, the ordered list of its actions — F(j) is the forward of
micro-batch j through the stage, B(j) its backward (`minispore/nn/pipeline_schedule.py`). The
MPI executor walks exactly these lists; `simulate` replays them with unit durations, so the bubble
(idle time while the pipeline fills and drains) and the number of micro-batches whose
activations are alive at once can be read off without running anything. With p stages, m
micro-batches and v chunks per stage (interleaving), the bubble is (p-1)/(v·m) of the useful
work (Narayanan et al. 2021); GPipe keeps all m micro-batches' activations, 1F1B only p - i on
stage i."""),
    code("""p, m = 2, 4
for name, scheduler, v in (("GPipe", "gpipe", 1), ("1F1B", "1f1b", 1), ("interleaved 1F1B", "1f1b", 2)):
    schedule = make_schedule(scheduler, p, m, v)
    tl = simulate(schedule, t_f=1.0, t_b=2.0)
    print(f"{name:<17} stage 0 runs {' '.join(f'{a.kind}{a.microbatch}' + (f'.{a.chunk}' if v > 1 else '') for a in schedule[0])}")
    print(f"{'':<17} bubble {tl.bubble_fraction:.3f} (formula {bubble_fraction_formula(p, m, v):.3f}), "
          f"micro-batches in flight per stage {tl.peak_in_flight}")"""),
    md("""## A script for 4 ranks

`train_pp_mc.py` runs what the command line names and writes one JSON file per rank:

* **`pp2dp2`, `vpp2dp2`**: `set_auto_parallel_context(pipeline_stages=2, pipeline_config=...)`;
  `cell.pipeline_stage` places each Dense layer; `nn.PipelineCell(net, micro_size=4)` runs the
  schedule inside the call (`value_and_grad` of it returns this stage's gradients) and
  `nn.PipelineGradReducer` all-reduces them over the stage's data-parallel replicas. World rank r
  is stage r // 2 of replica r % 2; each replica reads half of every global batch of 16. With
  `pipeline_interleave` the four Dense layers are *virtual* stages 0..3, run by rank stage mod 2.
  Every rank returns the global batch's mean loss.
* **`mc`**: the tiny LLaMA under `TransformerOpParallelConfig(data_parallel=2, model_parallel=2,
  use_seq_parallel=True, fine_grain_interleave=C)` for C = 1 and 2 — one step's loss and
  gradients, and 10 AdamW steps — and the timeline of one decoder forward + backward
  (`multi_copy.record_timeline`) with 1 and 2 copies through the same two-stream scheduler.
* **`single`**: both models trained in one process on the whole global batches: the reference.

Everything is float64, so "equal" can mean equal to rounding (~1e-15)."""),
    code('''%%writefile {workdir}/train_pp_mc.py
"""Pipeline and multi-copy runs; every rank writes OUT/<run>_rank<r>.json:
    msrun --worker_num=4 --local_worker_num=4 train_pp_mc.py pp2dp2,vpp2dp2,mc OUT"""
import json
import sys
from pathlib import Path

import numpy as np

import minispore as ms
from minispore import nn
from minispore.communication import get_group_size, get_rank, init

STEPS, GLOBAL_BATCH, MICRO = 10, 16, 4


def mlp(chunks):
    """4 Dense layers (Tanh between); Dense k on (virtual) stage k * chunks // 4."""
    ms.set_seed(7)
    dims, cells = [6, 16, 16, 16, 3], []
    for k in range(4):
        dense = nn.Dense(dims[k], dims[k + 1], dtype=ms.float64)
        dense.pipeline_stage = k * chunks // 4
        cells += [dense] + ([nn.Tanh()] if k < 3 else [])   # a Tanh runs on its Dense's stage
    return nn.WithLossCell(nn.SequentialCell(cells), nn.MSELoss())


def mlp_batch(step):
    g = np.random.default_rng(100 + step)
    x = g.standard_normal((GLOBAL_BATCH, 6))
    return x, np.tanh(0.7 * x[:, :3]) + 0.1 * g.standard_normal((GLOBAL_BATCH, 3))


def train_pipeline(interleave, dp=2):
    p = get_group_size() // dp
    ms.set_auto_parallel_context(pipeline_stages=p, pipeline_config={"pipeline_scheduler": "1f1b",
                                                                     "pipeline_interleave": interleave})
    net = mlp(2 * p if interleave else p)
    pipe = nn.PipelineCell(net, micro_size=MICRO)
    opt = nn.Momentum(net.trainable_params(), 0.05, 0.9)
    reducer = nn.PipelineGradReducer(opt.parameters)        # sums each stage's grads over its replicas
    grad_fn = ms.value_and_grad(pipe, None, opt.parameters)
    rows = slice(get_rank() % dp * GLOBAL_BATCH // dp, (get_rank() % dp + 1) * GLOBAL_BATCH // dp)
    losses = []
    for step in range(STEPS):
        x, y = mlp_batch(step)
        loss, grads = grad_fn(ms.Tensor(x[rows]), ms.Tensor(y[rows]))   # the whole schedule runs here
        opt(reducer(grads))
        losses.append(float(loss.asnumpy()))
    ms.reset_auto_parallel_context()
    last = pipe.last_step
    return {"losses": losses, "timeline": last["timeline"], "peak_in_flight": last["peak_in_flight"],
            "p2p_bytes": last["p2p_bytes"], "stage_params": [q.name for q in pipe.stage_parameters()]}


def train_mlp_single():
    net = mlp(1)
    opt = nn.Momentum(net.trainable_params(), 0.05, 0.9)
    grad_fn = ms.value_and_grad(net, None, opt.parameters)
    losses = []
    for step in range(STEPS):
        loss, grads = grad_fn(*map(ms.Tensor, mlp_batch(step)))
        opt(grads)
        losses.append(float(loss.asnumpy()))
    return losses


# ---- the tiny LLaMA, for multi-copy ---------------------------------------------------------------
def llama_parts():
    from minispore.llm import Llama, LlamaConfig
    cfg = LlamaConfig(vocab_size=32, dim=32, n_layers=2, n_heads=4, n_kv_heads=2, ffn_dim=64, max_seq_len=16,
                      dropout=0.0)

    def build():
        ms.set_seed(0)
        model = Llama(cfg)
        for q in model.get_parameters():
            q.set_dtype(ms.float64)
        return model

    def batches():
        g = np.random.default_rng(5)
        for _ in range(STEPS):
            ids = (g.integers(0, cfg.vocab_size, (8, 1)) + np.arange(17)) % cfg.vocab_size
            ids = np.where(g.random(ids.shape) < 0.1, g.integers(0, cfg.vocab_size, ids.shape), ids)
            yield ms.Tensor(ids[:, :-1]), ms.Tensor(ids[:, 1:])
    return cfg, build, batches


def train_llama(model, batches, parallel):
    from minispore.mint.optim import AdamW
    opt = AdamW(model.trainable_params(), lr=3e-3)
    reducer = model.grad_reducer(opt.parameters) if parallel else None
    grad_fn = ms.value_and_grad(model.loss, None, opt.parameters)
    losses = []
    for x, y in batches():
        if parallel:                              # this replica's half of the batch; replicas' mean loss
            loss, grads = grad_fn(model.data_parallel_batch(x), model.data_parallel_batch(y))
            opt(reducer(grads))
            loss = model.data_parallel_mean(loss)
        else:
            loss, grads = grad_fn(x, y)
            opt(grads)
        losses.append(float(loss.asnumpy()))
    return losses


def multi_copy_run():
    from minispore.common.tensor import from_numpy
    from minispore.llm.config import TransformerOpParallelConfig
    from minispore.llm.tensor_parallel import tensor_parallel_llama
    from minispore.ops import functional as F
    from minispore.parallel import multi_copy
    cfg, build, batches = llama_parts()
    models = {}
    for copies in (1, 2):
        config = TransformerOpParallelConfig(data_parallel=2, model_parallel=2, use_seq_parallel=True,
                                             fine_grain_interleave=copies)
        models[copies] = tensor_parallel_llama(build(), parallel_config=config)
    x, y = next(iter(batches()))
    first = {}
    for copies, model in models.items():          # one step's loss and raw gradients, 1 vs 2 copies
        loss, grads = ms.value_and_grad(model.loss, None, model.trainable_params())(
            model.data_parallel_batch(x), model.data_parallel_batch(y))
        first[copies] = (float(loss.asnumpy()), [g.asnumpy() for g in grads])
    grad_rel = max(float(np.max(np.abs(a - b)) / np.max(np.abs(b))) for a, b in zip(first[2][1], first[1][1]))

    # the timeline of one decoder-stack forward + backward through the two-stream scheduler
    model, batch, seq = models[2], 4, 16          # this rank: 4 sequences x 16 / 2 = 32 rows
    rng = np.random.default_rng(get_rank())
    h = ms.Tensor(rng.standard_normal((batch * seq // 2, cfg.dim)))
    w = ms.Tensor(rng.standard_normal((batch * seq // 2, cfg.dim)))
    cos, sin, cos_q, sin_q = model._constants(np.float64)
    rope_q, rope_k = (from_numpy(cos_q[:seq]), from_numpy(sin_q[:seq])), (from_numpy(cos[:seq]), from_numpy(sin[:seq]))
    timelines, overlap = {}, {}
    for copies in (1, 2):
        decoder = multi_copy.MultiCopyDecoder(model.layers, copies, model.group)
        step = ms.grad(lambda h: F.sum(decoder(h, batch, rope_q, rope_k) * w), 0, decoder.parameters())
        for _ in range(2):                        # the second run is the one kept (the first warms up)
            with multi_copy.record_timeline():
                step(h)
        timelines[copies] = multi_copy.timeline()
        overlap[copies] = {ph: multi_copy.overlap_fraction(timelines[copies], ph)["fraction"]
                           for ph in ("forward", "backward")}
    return {"loss_1": first[1][0], "loss_2": first[2][0], "grad_rel": grad_rel,
            "losses_1": train_llama(models[1], batches, True), "losses_2": train_llama(models[2], batches, True),
            "timeline": timelines, "covered": overlap}


def run(name):
    if name == "pp2dp2":
        return train_pipeline(interleave=False)
    if name == "vpp2dp2":
        return train_pipeline(interleave=True)
    if name == "mc":
        return multi_copy_run()
    if name == "single":                          # one process: the references
        cfg, build, batches = llama_parts()
        return {"mlp": train_mlp_single(), "llama": train_llama(build(), batches, False)}
    raise SystemExit(f"unknown run {name!r}")


if __name__ == "__main__":
    init()                                        # under msrun: rank r of 4; alone: rank 0 of 1
    for name in sys.argv[1].split(","):
        result = run(name)
        Path(sys.argv[2], f"{name}_rank{get_rank()}.json").write_text(json.dumps(result))
        print(f"rank {get_rank()}/{get_group_size()} {name}: done")'''),
    md("""Launch it on 4 ranks with MindSpore's launcher, `msrun` (it starts the ranks with the `dist`
extra's `mpiexec`); then run the same script here, in this process, as a world of one for the
reference (as `python train_pp_mc.py single out` would)."""),
    code("""bin_dir = Path(sys.executable).parent
env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
cmd = [str(bin_dir / "msrun"), "--worker_num=4", "--local_worker_num=4", "train_pp_mc.py", "pp2dp2,vpp2dp2,mc", "out"]
t0 = time.perf_counter()
job = subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True, timeout=300)
print(f"$ msrun {' '.join(cmd[1:])}   -> exit status {job.returncode}, {time.perf_counter() - t0:.0f} s")
print("".join(sorted(job.stdout.splitlines(keepends=True))), job.stderr[-3000:])
assert job.returncode == 0

saved_argv = sys.argv
sys.argv = ["train_pp_mc.py", "single", str(workdir / "out")]
try:
    runpy.run_path(str(workdir / "train_pp_mc.py"), run_name="__main__")
finally:
    sys.argv = saved_argv

out = workdir / "out"
runs = {name: [json.loads((out / f"{name}_rank{r}.json").read_text()) for r in range(4)]
        for name in ("pp2dp2", "vpp2dp2", "mc")}
single = json.loads((out / "single_rank0.json").read_text())"""),
    md("""## Pipeline parallel: the single-process losses

Every rank returns the global batch's mean loss (the last stage computes it, the pipeline sums it
over the world), so all 4 ranks print one curve, and it is the single-process curve: the pipeline
changes *where* each layer runs and the order in which the micro-batches' gradients are added,
not what is computed."""),
    code("""ref = np.array(single["mlp"])
fig, ax = plt.subplots(figsize=(7, 3.2))
ax.plot(np.arange(1, len(ref) + 1), ref, "k-", lw=3, alpha=0.35, label="one process")
for name, marker, label in (("pp2dp2", "o", "pp2 x dp2, 1F1B"), ("vpp2dp2", "x", "pp2 x dp2, interleaved 1F1B (v=2)")):
    curves = {tuple(r["losses"]) for r in runs[name]}
    assert len(curves) == 1, "every rank returns the same loss"
    got = np.array(runs[name][0]["losses"])
    ax.plot(np.arange(1, len(got) + 1), got, marker, mfc="none", label=label)
    worst = np.max(np.abs(got - ref) / ref)
    print(f"{label:<36} max relative difference from one process over {len(ref)} steps: {worst:.1e};  "
          f"saved micro-batches at the peak, per rank: {[r['peak_in_flight'] for r in runs[name]]}")
    assert worst < 1e-12
ax.set_xlabel("step"); ax.set_ylabel("MSE loss"); ax.legend(fontsize=8)
fig.tight_layout()
plt.show()
for r, res in enumerate(runs["pp2dp2"]):
    print(f"rank {r} (stage {r // 2}, replica {r % 2}) holds {res['stage_params']}, sent {res['p2p_bytes']} bytes p2p in the last step")"""),
    md("""Stage 0 of 1F1B holds 2 micro-batches' activations at its peak (p - i = 2), stage 1 one;
interleaving holds more chunk-tapes, each of half a stage. Each rank holds only its stage's
parameters. Across the one stage boundary go 2·m messages per step, each one micro-batch's
(2 rows × 16 float64 numbers = 256 bytes): stage 0 sends the m activations, stage 1 the m
gradients back, 1,024 bytes from each rank.

What the ranks really did — the executor's timeline of the last step (`pipe.last_step`: each
action from the moment its input had arrived to its end). On 2 shared cores the gaps mostly mean
"another rank had the core", but the order is the schedule's, and B(j) on stage 0 always starts
after B(j) on stage 1 ended:"""),
    code("""def draw_pipeline(ax, ranks, title):
    for r, res in enumerate(ranks):
        for kind, mb, chunk, start, end in res["timeline"]:
            ax.barh(r, (end - start) * 1e3, left=start * 1e3, color="#8ecae6" if kind == "F" else "#90be6d",
                    edgecolor="black", lw=0.4, hatch="//" if chunk >= 2 else None)
            ax.text((start + end) / 2 * 1e3, r, f"{kind}{mb}", ha="center", va="center", fontsize=6)
    ax.set_yticks(range(len(ranks)))
    ax.set_yticklabels([f"rank {r}: stage {r // 2}, replica {r % 2}" for r in range(len(ranks))], fontsize=8)
    ax.invert_yaxis(); ax.set_title(title, fontsize=9); ax.set_xlabel("ms since the step began")


fig, axes = plt.subplots(2, 1, figsize=(11, 5))
draw_pipeline(axes[0], runs["pp2dp2"], "1F1B, measured (blue F, green B, the number is the micro-batch)")
draw_pipeline(axes[1], runs["vpp2dp2"], "interleaved 1F1B, measured (hatched: the rank's second chunk)")
fig.tight_layout()
plt.show()"""),
    md("""## Fine-grained multi-copy: the same numbers as one copy

Under tensor + sequence parallelism each layer runs 4 collectives forward and 4 backward, each
between two dependent computations. Two copies of the rows make them independent: while copy 0's
all-gather travels, copy 1's norm runs; in backward the weight-gradient GEMMs fill the gaps.
The arithmetic is the same, only grouped differently:"""),
    code("""mc = runs["mc"]
for r, res in enumerate(mc):
    print(f"rank {r} (replica {r // 2}): loss 1 copy {res['loss_1']:.15f}, 2 copies {res['loss_2']:.15f}; "
          f"largest relative gradient difference {res['grad_rel']:.1e}")
    assert abs(res["loss_2"] - res["loss_1"]) <= 1e-12 * abs(res["loss_1"]) and res["grad_rel"] < 1e-10
l1, l2, ref_llama = (np.array(mc[0]["losses_1"]), np.array(mc[0]["losses_2"]), np.array(single["llama"]))
print("10 AdamW steps, dp2 x tp2 + SP, relative difference from one process:",
      f"1 copy {np.max(np.abs(l1 - ref_llama) / ref_llama):.1e}, 2 copies {np.max(np.abs(l2 - ref_llama) / ref_llama):.1e}")
assert np.max(np.abs(l2 - ref_llama) / ref_llama) < 1e-10"""),
    md("""## The Gantt chart of hidden communication

First what rank 0 really ran: one forward + backward of the 2-layer decoder stack through the
two-stream scheduler of `minispore/parallel/multi_copy.py` (compute tasks on this process, the
collectives posted as MPI non-blocking calls and waited for only when nothing else can run).
A communication bar with a compute bar above it is *covered*. On this machine that is an upper
bound of what is really hidden (MPICH moves a non-blocking collective only inside MPI calls, and
the ranks share cores), so the picture to trust is the structure: with one copy every collective
is waited for right after it is posted; with two, compute runs while it is in flight."""),
    code("""KIND_COLOURS = {"all_gather": "#dd8452", "reduce_scatter": "#c44e52"}


def draw_measured(ax, events, title):
    t0 = min(e["start"] for e in events)
    rows = {"compute": 0, "comm": 1}
    for e in events:
        colour = KIND_COLOURS.get(e.get("op"), "#4c72b0" if e["phase"] == "forward" else "#55a868")
        y = rows[e["stream"]] + (0.18 * (e["copy"] or 0) if e["stream"] == "comm" else 0)
        ax.barh(y, (e["end"] - e["start"]) * 1e3, left=(e["start"] - t0) * 1e3, height=0.35 if e["stream"] == "comm" else 0.7,
                color=colour, edgecolor="white", lw=0.3)
    ax.set_yticks([0, 1]); ax.set_yticklabels(["rank 0 / compute", "rank 0 / comm"], fontsize=8)
    ax.invert_yaxis(); ax.set_title(title, fontsize=9); ax.set_xlabel("ms")


fig, axes = plt.subplots(2, 1, figsize=(11, 4))
for ax, copies in zip(axes, ("1", "2")):
    events = [e for e in mc[0]["timeline"][copies] if e["rank"] == 0]
    cov = mc[0]["covered"][copies]
    draw_measured(ax, events, f"measured, 2-layer tiny LLaMA, tp2 + SP, {copies} cop{'y' if copies == '1' else 'ies'}: "
                  f"covered forward {cov['forward']:.0%} / backward {cov['backward']:.0%} "
                  "(blue forward, green backward compute; orange all-gather, red reduce-scatter)")
fig.tight_layout()
plt.show()"""),
    md("""With 4 ranks on 2 shared cores most of a collective's interval is spent waiting for the
other ranks to get a core, so the covered fractions measured here are small and change from run
to run; what carries over is the order of the work, which is the simulator's input.

At the size the technique is for, the **two-stream simulator** (`minispore.parallel.simulator`)
replays the same kind of schedule with durations from a cost model — roofline kernels on a device
profile, α-β ring collectives on its link — here one LLaMA-7B layer, TP 8 with sequence
parallel, sequence 4096, on a simulated Ascend 910B (datasheet numbers, unverified). No kernel
runs; the whole 32-layer stack takes a few seconds to simulate."""),
    code("""from minispore.parallel import simulator as sim

fig, axes = plt.subplots(2, 1, figsize=(12, 4.4))
for ax, copies in zip(axes, (1, 2)):
    tl = sim.simulate_transformer("llama-7b", copies=copies, layers=1, tp=8, seq=4096, device="ascend910b")
    sim.plot_gantt(tl, ax=ax, title=f"simulated 910B, llama-7b, 1 layer, {copies} cop{'y' if copies == 1 else 'ies'}: "
                   f"{tl.makespan() * 1e3:.2f} ms, hidden forward {tl.hidden_fraction('forward'):.0%} / "
                   f"backward {tl.hidden_fraction('backward'):.0%}")
fig.tight_layout()
plt.show()

rows = sim.hidden_table(["llama-7b"], copies=(1, 2), device="ascend910b", tp=8, seq=4096)
print(sim.format_table(rows))"""),
    md("""The whole 32-layer stack: with one copy, forward hides nothing (every collective sits between
two dependent GEMMs) and backward hides what the weight-gradient GEMMs can cover; two copies hide
part of the forward's communication and nearly all of the backward's. The same table for
LLaMA-70B, and how it moves with derated rates, is `bench/bench_simulator.py`; the command
`python -m minispore.parallel.simulator --model llama-7b --tp 8 --seq 4096 --copies 1 2 --gantt out.png`
prints it and draws the chart.

## What to remember

* **Pipeline parallel** (`cell.pipeline_stage`, `pipeline_stages`, `nn.PipelineCell`,
  `nn.PipelineGradReducer`) moves one activation and one gradient per micro-batch across each
  stage boundary; its costs are the bubble, (p-1)/(v·m), and the in-flight activations, which
  1F1B bounds by p - i micro-batches on stage i.
* **Fine-grained multi-copy** (`fine_grain_interleave: 2`, with TP and sequence parallel) changes
  no number — only the order of work, so that each copy's collectives overlap the other copy's
  compute, and the backward's collectives overlap the weight-gradient GEMMs.
* Both reproduce the single-process losses; the simulator says what they buy on real hardware."""),
]


def main():
    nb = new_notebook(cells=CELLS, metadata={
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"}})
    path = HERE / "11_pipeline_and_multicopy.ipynb"
    nbformat.write(nb, str(path))
    print("wrote", path)


if __name__ == "__main__":
    main()
