"""Draws the pictures of the "Distributed training" page (site/distributed.md) into site/figures/.

    .venv/bin/python site/figures/make_parallel_figures.py      # rewrites the PNGs next to this file

The blocks are not drawn by hand: every piece's position comes from minispore's own slice algebra
(`minispore.parallel.slice_bounds`), so a picture shows what the code does.

* `layouts.png`: the device matrix of `Layout((2, 2), ("dp", "mp"))` and three tensor maps on it
  (rows split, columns split, rows split over both axes). A block held by several ranks (a
  replica) is striped in their colours.
* `redistribution.png`: four ranks before and after each redistribution collective (AllGather,
  AlltoAll, AllReduce, ReduceScatter), with the bytes each rank receives.

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


def main():
    layouts_figure(HERE / "layouts.png")
    redistribution_figure(HERE / "redistribution.png")
    print("wrote", HERE / "layouts.png", "and", HERE / "redistribution.png")


if __name__ == "__main__":
    main()
