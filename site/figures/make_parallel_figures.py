"""Draws the pictures of the "Distributed training" page (site/distributed.md) into site/figures/.

    .venv/bin/python site/figures/make_parallel_figures.py      # rewrites the PNGs next to this file
    .venv/bin/python site/figures/make_parallel_figures.py pipeline_schedules.png    # just one

The blocks are not drawn by hand: every piece's position comes from minispore's own slice algebra
(`minispore.parallel.slice_bounds`), so a picture shows what the code does.

* `layouts.png`: the device matrix of `Layout((2, 2), ("dp", "mp"))` and three tensor maps on it
  (rows split, columns split, rows split over both axes). A block held by several ranks (a
  replica) is striped in their colours.
* `redistribution.png`: four ranks before and after each redistribution collective (AllGather,
  AlltoAll, AllReduce, ReduceScatter), with the bytes each rank receives.

and those of "Eight ways to split a model" (site/parallel-strategies.md):

* `pipeline_schedules.png`: GPipe, 1F1B and interleaved 1F1B on 4 stages and 8 micro-batches, the
  very action lists the MPI executor walks (`minispore.nn.pipeline_schedule.make_schedule`),
  replayed with uniform durations by its `simulate` (backward = 2 x forward).
* `multi_copy_gantt.png`: one LLaMA-7B layer under TP 8 + sequence parallel on a simulated
  Ascend 910B, one copy vs two (`minispore.parallel.simulator.simulate_transformer`, its
  `plot_gantt`): the communication row under an idle compute row is exposed.
* `strategy_search.png`: LLaMA-70B on 1,024 H100s, every dp x tp x pp x ZeRO x recompute
  factorization the strategy search plans, MFU against per-rank memory (its own `plot`).
* `memory_per_rank.png`: LLaMA-7B on 8 devices, per-rank bytes of parameters, gradients,
  optimizer state and activations for each strategy, from the parallel DryRun
  (`minispore.llm.parallel_plan.plan_parallel`), nothing built.

The PNGs are committed; the page links them. Re-run this script after changing it (the output does
not depend on the date: matplotlib's metadata stamp is left out).
"""
from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyArrowPatch, Rectangle  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))            # the checkout's minispore, not an installed one
from minispore.parallel import Layout, slice_bounds  # noqa: E402

RANK_COLORS = ["#8ecae6", "#ffb703", "#90be6d", "#f28482"]     # rank 0..3
SUM_COLOR = "#b8b8d1"                                          # a fully reduced value
METADATA = {"Software": None}                                  # byte-stable PNGs


def _block(ax, x, y, w, h, colors, label=None, hatch=None, fontsize=8):
    """A w x h block at (x, y) (y grows downwards), striped vertically in `colors`."""
    for k, color in enumerate(colors):
        ax.add_patch(Rectangle((x + k * w / len(colors), y), w / len(colors), h, facecolor=color,
                               edgecolor="none", hatch=hatch))
    ax.add_patch(Rectangle((x, y), w, h, facecolor="none", edgecolor="black", lw=1))
    if label:
        ax.text(x + w / 2, y + h / 2, label, ha="center", va="center", fontsize=fontsize)


def _frame(ax, title, width, height):
    ax.set_xlim(-0.2, width + 0.2)
    ax.set_ylim(height + 0.2, -0.2)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title(title, fontsize=9)


def draw_tensor(ax, layout: Layout, shape, title):
    """An (rows, cols) tensor cut by `layout`: each block in the colours of the ranks holding it."""
    owners = {}
    for r in range(layout.device_num):
        (r0, r1), (c0, c1) = slice_bounds(layout, shape, r)
        owners.setdefault((r0, r1, c0, c1), []).append(r)
    for (r0, r1, c0, c1), ranks in owners.items():
        label = ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(map(str, ranks))
        _block(ax, c0, r0, c1 - c0, r1 - r0, [RANK_COLORS[r] for r in ranks], label)
    tmap = layout.to_dict()["tensor_map"]
    _frame(ax, f"{title}\ntensor_map {tmap}", shape[1], shape[0])


def draw_device_matrix(ax, layout: Layout):
    rows, cols = layout.device_matrix
    names = layout.alias_name
    for i in range(rows):
        for j in range(cols):
            r = i * cols + j
            _block(ax, j, i, 1, 1, [RANK_COLORS[r]], f"rank {r}\n{names[0]}={i} {names[1]}={j}", fontsize=8)
    ax.annotate("", xy=(cols + 0.05, -0.12), xytext=(-0.05, -0.12),
                arrowprops=dict(arrowstyle="->", lw=1))
    ax.text(cols / 2, -0.22, f'axis "{names[1]}" (tensor-map number 0)', ha="center", va="bottom", fontsize=8)
    ax.annotate("", xy=(-0.12, rows + 0.05), xytext=(-0.12, -0.05),
                arrowprops=dict(arrowstyle="->", lw=1))
    ax.text(-0.22, rows / 2, f'axis "{names[0]}"\n(number 1)', ha="right", va="center", fontsize=8)
    ax.set_xlim(-1.2, cols + 0.2)
    ax.set_ylim(rows + 0.2, -0.6)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title(f"device matrix {layout.device_matrix}, alias_name {layout.alias_name}\n"
                 f"rank = {cols}·{names[0]} + {names[1]}", fontsize=9)


def layouts_figure(path: Path):
    mesh = Layout((2, 2), ("dp", "mp"))
    fig, axes = plt.subplots(1, 4, figsize=(13, 3.6), gridspec_kw={"width_ratios": [1.4, 1, 1, 1]})
    draw_device_matrix(axes[0], mesh)
    draw_tensor(axes[1], mesh("mp", "None"), (4, 2), 'wq (4, 2): layout("mp", "None")')
    draw_tensor(axes[2], mesh("None", "mp"), (2, 4), 'wo (2, 4): layout("None", "mp")')
    draw_tensor(axes[3], mesh(("dp", "mp"), "None"), (4, 2), 'emb (4, 2): layout(("dp", "mp"), "None")')
    fig.tight_layout()
    fig.savefig(path, dpi=110, metadata=METADATA)
    plt.close(fig)


# ------------------------------------------------------------------------------------------------
def _ranks_row(ax, x0, pieces, n=4, size=1.0, gap=0.35):
    """Draw n ranks side by side starting at x0; `pieces[r]` is a list of
    (row0, row1, col0, col1, colors, hatch) inside a size x size tensor frame (in units of 1/n)."""
    for r in range(n):
        x = x0 + r * (size + gap)
        ax.add_patch(Rectangle((x, 0), size, size, facecolor="white", edgecolor="#999999", lw=0.8, ls="--"))
        for (a, b, c, d, colors, hatch) in pieces[r]:
            _block(ax, x + c * size / n, a * size / n, (d - c) * size / n, (b - a) * size / n, colors, hatch=hatch)
        ax.text(x + size / 2, size + 0.15, f"rank {r}", ha="center", va="top", fontsize=8)
    return x0 + n * (size + gap)


def redistribution_figure(path: Path):
    """Before / after of each collective on 4 ranks; a tensor of n bytes is cut into 4 row (or
    column) blocks by Layout((4,), ("mp",)), positions from slice_bounds."""
    n = 4
    line = Layout((n,), ("mp",))
    shape = (n, n)
    rows = {r: slice_bounds(line("mp", "None"), shape, r) for r in range(n)}
    cols = {r: slice_bounds(line("None", "mp"), shape, r) for r in range(n)}

    def piece(bounds, colors, hatch=None):
        (a, b), (c, d) = bounds
        return (a, b, c, d, colors, hatch)

    whole_by_rows = [piece(rows[s], [RANK_COLORS[s]]) for s in range(n)]
    partial = {r: [(0, n, 0, n, [RANK_COLORS[r]], "//")] for r in range(n)}
    cases = [
        ("AllGather", "rows split  ->  whole", {r: [piece(rows[r], [RANK_COLORS[r]])] for r in range(n)},
         {r: whole_by_rows for r in range(n)}, "receives (p-1)/p · n"),
        ("AlltoAll", "rows split  ->  columns split", {r: [piece(rows[r], [RANK_COLORS[r]])] for r in range(n)},
         {r: [(rows[s][0][0], rows[s][0][1], cols[r][1][0], cols[r][1][1], [RANK_COLORS[s]], None)
              for s in range(n)] for r in range(n)}, "receives (p-1)/p² · n"),
        ("AllReduce", "partial sums  ->  whole", partial,
         {r: [(0, n, 0, n, [SUM_COLOR], None)] for r in range(n)}, "sends 2(p-1)/p · n (ring)"),
        ("ReduceScatter", "partial sums  ->  rows split", partial,
         {r: [piece(rows[r], [SUM_COLOR])] for r in range(n)}, "sends (p-1)/p · n (ring)"),
    ]
    fig, axes = plt.subplots(len(cases), 1, figsize=(11, 1.85 * len(cases)))
    for ax, (name, what, before, after, cost) in zip(axes, cases):
        x = _ranks_row(ax, 0, before)
        ax.add_patch(FancyArrowPatch((x + 0.1, 0.5), (x + 1.3, 0.5), arrowstyle="-|>", mutation_scale=15))
        ax.text(x + 0.7, 0.25, name, ha="center", va="bottom", fontsize=10, weight="bold")
        end = _ranks_row(ax, x + 1.6, after)
        ax.text(end + 0.1, 0.5, f"{what}\neach rank {cost}", ha="left", va="center", fontsize=9)
        ax.set_xlim(-0.1, end + 3.3)
        ax.set_ylim(1.45, -0.15)
        ax.set_aspect("equal")
        ax.axis("off")
    fig.text(0.01, 0.005, "colour = the rank a piece came from; hatched = a partial sum (a full-size addend); "
             "grey = the reduced sum.  n = bytes of the whole tensor, p = 4 ranks.", fontsize=8)
    fig.tight_layout(rect=(0, 0.02, 1, 1))
    fig.savefig(path, dpi=110, metadata=METADATA)
    plt.close(fig)


# ------------------------------------------------------------------------------------------------
# "Eight ways to split a model" (site/parallel-strategies.md)
PHASE_COLORS = {"F": "#8ecae6", "B": "#90be6d"}


def pipeline_figure(path: Path, p=4, m=8):
    """Each schedule's action lists (nn/pipeline_schedule.py), replayed by its own `simulate`:
    one row per device, one box per action, labelled with its micro-batch (and chunk)."""
    from minispore.nn.pipeline_schedule import make_schedule, simulate
    cases = [("GPipe", "gpipe", 1), ("1F1B", "1f1b", 1), ("interleaved 1F1B, v = 2", "1f1b", 2)]
    fig, axes = plt.subplots(len(cases), 1, figsize=(12, 1.15 * p * len(cases) / 1.6), sharex=True)
    for ax, (title, scheduler, v) in zip(axes, cases):
        tl = simulate(make_schedule(scheduler, p, m, v), t_f=1.0, t_b=2.0)
        for d, spans in enumerate(tl.spans):
            for a, start, end in spans:
                ax.add_patch(Rectangle((start, d - 0.4), end - start, 0.8, facecolor=PHASE_COLORS[a.kind],
                                       edgecolor="black", lw=0.5, alpha=1.0 if a.chunk < p else 0.6,
                                       hatch=None if a.chunk < p else "//"))
                if end - start >= 0.45:
                    ax.text((start + end) / 2, d, str(a.microbatch), ha="center", va="center", fontsize=6.5)
        ax.set_ylim(p - 0.5, -0.5)
        ax.set_yticks(range(p))
        ax.set_yticklabels([f"stage {d}" for d in range(p)], fontsize=8)
        ax.set_title(f"{title}: bubble {tl.bubble_fraction:.3f} of the ideal step (formula (p-1)/(v m) = "
                     f"{(p - 1) / (v * m):.3f}); peak saved micro-batches per stage {tl.peak_in_flight}",
                     fontsize=9, loc="left")
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
    ends = [simulate(make_schedule(sch, p, m, v), t_f=1.0, t_b=2.0).makespan for _, sch, v in cases]
    axes[-1].set_xlim(0, max(ends) + 0.2)          # shared by the three panels
    axes[-1].set_xlabel("time (a forward of one micro-batch through one stage = 1; a backward = 2)", fontsize=8)
    handles = [Rectangle((0, 0), 1, 1, facecolor=PHASE_COLORS["F"], edgecolor="black", lw=0.5),
               Rectangle((0, 0), 1, 1, facecolor=PHASE_COLORS["B"], edgecolor="black", lw=0.5),
               Rectangle((0, 0), 1, 1, facecolor="white", edgecolor="black", lw=0.5, hatch="//")]
    fig.legend(handles, ["forward (number = micro-batch)", "backward", "second chunk (virtual stage p..2p-1)"],
               loc="lower right", fontsize=8, ncol=3, frameon=False)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    fig.savefig(path, dpi=110, metadata=METADATA)
    plt.close(fig)


def multi_copy_figure(path: Path):
    """The two-stream simulator's schedule of one LLaMA-7B layer (TP 8 + SP, seq 4096, 910B)."""
    from minispore.parallel.simulator import plot_gantt, simulate_transformer
    fig, axes = plt.subplots(2, 1, figsize=(12, 4.4))
    for ax, n in zip(axes, (1, 2)):
        tl = simulate_transformer("llama-7b", copies=n, layers=1, tp=8, seq=4096, device="ascend910b")
        plot_gantt(tl, ax=ax, title=f"llama-7b, 1 layer, TP 8 + SP, seq 4096, simulated Ascend 910B, {n} "
                   f"cop{'y' if n == 1 else 'ies'}: {tl.makespan() * 1e3:.2f} ms, hidden forward "
                   f"{tl.hidden_fraction('forward'):.0%} / backward {tl.hidden_fraction('backward'):.0%}")
    fig.tight_layout()
    fig.savefig(path, dpi=110, metadata=METADATA)
    plt.close(fig)


def memory_figure(path: Path):
    """Per-rank bytes of LLaMA-7B on 8 devices (bf16 compute, fp32 master weights and AdamW), seq 4096."""
    from minispore.llm.config import get_preset
    from minispore.llm.parallel_plan import ParallelStrategy, Precision, plan_parallel
    cfg = get_preset("llama-7b").model
    mixed = Precision(compute_dtype="bfloat16", param_dtype="float32", grad_dtype="float32")
    strategies = [
        ("DP 8", ParallelStrategy(data_parallel=8)),
        ("DP 8\nZeRO level1", ParallelStrategy(data_parallel=8, optimizer_level="level1")),
        ("DP 8\nZeRO level2", ParallelStrategy(data_parallel=8, optimizer_level="level2")),
        ("DP 8\nZeRO level3", ParallelStrategy(data_parallel=8, optimizer_level="level3")),
        ("TP 8", ParallelStrategy(model_parallel=8)),
        ("TP 8 + SP", ParallelStrategy(model_parallel=8, use_seq_parallel=True)),
        ("PP 8, m = 16\n(1F1B, stage 0)", ParallelStrategy(pipeline_stage=8, micro_batch_num=16)),
        ("DP 2 x TP 2 x PP 2\n+ SP, m = 8", ParallelStrategy(data_parallel=2, model_parallel=2, pipeline_stage=2,
                                                           micro_batch_num=8, use_seq_parallel=True)),
    ]
    parts = ("parameters", "gradients", "optimizer", "activations")
    colors = dict(zip(parts, ("#8ecae6", "#ffb703", "#90be6d", "#f28482")))
    fig, ax = plt.subplots(figsize=(12, 4.2))
    for i, (label, st) in enumerate(strategies):
        plan = plan_parallel(cfg, st, batch_size=1, seq_len=4096, precision=mixed, attention="flash")
        mem = plan.memory(plan.peak_memory()[1])
        bottom = 0.0
        for part in parts:
            gib = mem[part] / 2**30
            ax.bar(i, gib, bottom=bottom, color=colors[part], edgecolor="black", lw=0.5,
                   label=part if i == 0 else None)
            bottom += gib
        ax.text(i, bottom + 2, f"{bottom:.0f}", ha="center", va="bottom", fontsize=8)
    ax.axhline(64, color="grey", ls="--", lw=1)
    ax.text(len(strategies) - 0.5, 65, "64 GiB (an Ascend 910B)", ha="right", va="bottom", fontsize=8, color="grey")
    ax.set_xticks(range(len(strategies)))
    ax.set_xticklabels([s[0] for s in strategies], fontsize=8)
    ax.set_ylabel("GiB per rank (the fullest rank)")
    ax.set_title("LLaMA-7B, 8 devices, seq 4096, micro-batch 1, bf16 compute + fp32 weights/grads/AdamW, flash "
                 "attention: the parallel DryRun's per-rank memory", fontsize=9)
    ax.legend(fontsize=8)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    fig.tight_layout()
    fig.savefig(path, dpi=110, metadata=METADATA)
    plt.close(fig)


def strategy_search_figure(path: Path):
    """`minispore dryrun --model llama-70b --world 1024 --search --plot PATH`: every dp x tp x pp x
    ZeRO x recompute factorization of 1,024 H100s, predicted MFU against per-rank memory
    (minispore.llm.strategy_search; the plot is its own `plot` method)."""
    from minispore.llm.moe_plan import dryrun_model
    from minispore.llm.strategy_search import search_strategies
    cfg, moe = dryrun_model("llama-70b")
    search_strategies(cfg, 1024, device="h100", seq_len=4096, moe=moe, model="llama-70b").plot(str(path))


FIGURES = {"layouts.png": layouts_figure, "redistribution.png": redistribution_figure,
           "pipeline_schedules.png": pipeline_figure, "multi_copy_gantt.png": multi_copy_figure,
           "memory_per_rank.png": memory_figure, "strategy_search.png": strategy_search_figure}


def main(argv=None):
    """Draw every figure, or only those named on the command line."""
    names = (argv if argv is not None else sys.argv[1:]) or list(FIGURES)
    for name in names:
        FIGURES[name](HERE / name)
        print("wrote", HERE / name)


if __name__ == "__main__":
    main()
