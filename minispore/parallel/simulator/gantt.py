"""The Gantt chart of a timeline: one row per (rank, stream), one bar per task, coloured by kind.

Reading it: on a row "rank 0 / comm", a bar that has a compute bar of the same rank above it at
the same x is hidden communication; a comm bar over an empty compute row is exposed (the compute
stream waits for it). The title carries the makespan and the hidden fraction.
"""
from __future__ import annotations

from .engine import COMPUTE, is_comm

COLOURS = {
    "gemm": "#4c72b0", "dw": "#8c9fd1", "attention": "#2f4b7c", "vector": "#9aa7b0",
    "forward": "#4c72b0", "backward": "#55a868", "compute": "#4c72b0",
    "all_gather": "#dd8452", "reduce_scatter": "#c44e52", "all_reduce": "#e6a23c", "all_to_all": "#937860",
    "broadcast": "#da8bc3", "send": "#8172b3", "receive": "#8172b3", "p2p": "#8172b3", "comm": "#dd8452",
    "view": "#dddddd",
}


def _row_key(key):
    rank, stream = key
    return (rank, 0 if stream == COMPUTE else 1 if is_comm(stream) else 2, stream)


def plot_gantt(timeline, path=None, *, title=None, ax=None, time_unit="ms", phase=None):
    """Draw `timeline` (a Timeline) as a Gantt chart; save to `path` (PNG) if given. Returns the Figure."""
    try:
        import matplotlib
        if ax is None and path is not None:
            matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
        from matplotlib.patches import Patch
    except ImportError:
        from ...common.errors import MinisporeRuntimeError
        raise MinisporeRuntimeError("the simulator's Gantt chart needs matplotlib: pip install 'minispore[plot]'") \
            from None
    scale = {"s": 1.0, "ms": 1e3, "us": 1e6}[time_unit]
    tasks = timeline.select(phase)
    rows = sorted({(t.rank, t.stream) for t in tasks}, key=_row_key)
    index = {k: i for i, k in enumerate(rows)}
    if ax is None:
        fig, ax = plt.subplots(figsize=(12, 0.55 * len(rows) + 1.6))
    else:
        fig = ax.figure
    t0 = min((t.start for t in tasks), default=0.0)
    by_kind = {}
    for t in tasks:
        by_kind.setdefault(t.kind, []).append(t)
    for kind, ts in by_kind.items():
        for row in {index[(t.rank, t.stream)] for t in ts}:
            bars = [((t.start - t0) * scale, t.duration * scale) for t in ts if index[(t.rank, t.stream)] == row]
            ax.broken_barh(bars, (row - 0.38, 0.76), facecolors=COLOURS.get(kind, "#999999"),
                           edgecolor="white", linewidth=0.3)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([f"rank {r} / {s}" for r, s in rows])
    ax.invert_yaxis()
    ax.set_xlabel(f"time ({time_unit})")
    span = timeline.makespan(phase) * scale
    hidden = timeline.hidden_fraction(phase)
    ax.set_title(title or f"makespan {span:.3f} {time_unit}, communication hidden {hidden:.1%}")
    ax.legend(handles=[Patch(color=COLOURS.get(k, "#999999"), label=k) for k in sorted(by_kind)],
              loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=120)
    return fig


__all__ = ["plot_gantt", "COLOURS"]
