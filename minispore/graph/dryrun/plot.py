"""The memory timeline: bytes alive while each node runs, as a matplotlib figure.

x is the schedule (node index), y the memory in GiB: a flat band for the static part (weights,
optimizer state, inputs, constants) and on top of it the arena's live bytes at each step. In a
training step the curve climbs through the forward pass (activations saved for backward pile up),
peaks early in the backward pass, falls as the backward pass frees them, and the optimizer's
in-place updates release the gradients one by one. Dashed lines mark the device's usable memory
and the planned peak (with fragments).
"""
from __future__ import annotations

from .devices import GiB


def plot_timeline(report, path=None, ax=None):
    """Draw `report`'s timeline; save it to `path` if given. Returns the Figure."""
    try:
        import matplotlib
        if ax is None and path is not None:
            matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
    except ImportError:
        from ...common.errors import MinisporeRuntimeError
        raise MinisporeRuntimeError("DryRun's timeline plot needs matplotlib: pip install 'minispore[plot]'") from None
    if ax is None:
        fig, ax = plt.subplots(figsize=(9, 4))
    else:
        fig = ax.figure
    steps = list(range(len(report.timeline)))
    static = report.static_bytes / GiB
    live = [t / GiB for t in report.timeline]
    ax.fill_between(steps, 0, [static] * len(steps), color="#9aa7c7", step="mid",
                    label=f"static: weights, optimizer state, inputs ({static:.2f} GiB)")
    ax.fill_between(steps, [static] * len(steps), live, color="#e07b39", alpha=0.85, step="mid",
                    label="arena: activations, gradients, temporaries")
    actual = report.actual_peak_bytes / GiB
    ax.axhline(actual, color="#444", ls="--", lw=1, label=f"planned peak {actual:.2f} GiB")
    usable = report.device.usable_bytes / GiB
    if usable < 1.6 * max(actual, 1e-9):
        ax.axhline(usable, color="#c0392b", ls=":", lw=1.5, label=f"{report.device.display_name} usable "
                                                                  f"{usable:.1f} GiB")
    top = max([actual] + ([usable] if usable < 1.6 * max(actual, 1e-9) else [])) * 1.12
    ax.set_ylim(0, top)
    if report.capture.phases is not None:
        fwd, bwd = report.capture.phases
        for x, name in ((0, "forward"), (fwd, "backward"), (bwd, "optimizer")):
            if 0 <= x < len(steps):
                if x:
                    ax.axvline(x, color="#888", lw=0.8)
                ax.text(x, top * 0.985, f" {name} \u2192", fontsize=8, color="#555", va="top")
    ax.set_xlabel("node (schedule order)")
    ax.set_ylabel("live memory (GiB)")
    ax.set_title(f"DryRun memory timeline: {report.name} on {report.device.display_name}", fontsize=10)
    ax.set_xlim(0, max(len(steps) - 1, 1))
    ax.legend(loc="lower left", fontsize=8, framealpha=0.92)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=110)
    return fig


__all__ = ["plot_timeline"]
