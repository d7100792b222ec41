"""One call from a model name to the numbers: simulate a LLaMA stack, tabulate hidden communication.

    from minispore.parallel import simulator as sim
    tl = sim.simulate_transformer("llama-7b", device="ascend910b", copies=2, tp=8, seq=4096)
    tl.hidden_fraction("forward"), tl.hidden_fraction("backward"), tl.makespan()
    rows = sim.hidden_table(["llama-7b", "llama-70b"], copies=(1, 2), device="ascend910b")
    print(sim.format_table(rows))
"""
from __future__ import annotations

from dataclasses import replace

from ...common.errors import OpValueError
from ...graph.dryrun.devices import get_device
from .cost import DEFAULT_LINK, CostModel, LinkProfile, get_link
from .engine import simulate
from .transformer import LayerSpec, preset, transformer_graph


def cost_model(device="ascend910b", link=None, *, dtype="bfloat16", compute_efficiency=1.0,
               link_efficiency=1.0) -> CostModel:
    """A CostModel for `device` with its default link (hccs for the 910B, nvlink4 for the H100);
    a CPU has none: pass `link` (a LinkProfile, e.g. from `fit_alpha_beta`)."""
    dev = get_device(device)
    if link is None:
        base = dev.name.split("@")[0]
        if base not in DEFAULT_LINK:
            raise OpValueError("cost_model", f"a link for device {dev.name!r}: link=LinkProfile(...) (fit_alpha_beta), "
                               f"--link-bw GB/s on the command line (default links exist for {sorted(DEFAULT_LINK)})",
                               "no link")
        link = DEFAULT_LINK[base]
    return CostModel(dev, get_link(link) if not isinstance(link, LinkProfile) else link, dtype,
                     compute_efficiency, link_efficiency)


def simulate_transformer(model="llama-7b", *, copies=1, device="ascend910b", link=None, tp=8, seq=4096, batch=1,
                         layers=None, dtype="bfloat16", compute_efficiency=1.0, link_efficiency=1.0, dw="fill",
                         sp_regather=False, backward=True, policy="in_order"):
    """The simulated Timeline of a LLaMA stack's forward (+ backward) on one TP rank; `policy`: how the
    streams pick their next task (engine.simulate: "in_order" or "ready_first")."""
    spec = model if isinstance(model, LayerSpec) else preset(model, tp=tp, seq=seq, batch=batch)
    if layers is not None:
        spec = replace(spec, layers=layers)
    cost = cost_model(device, link, dtype=dtype, compute_efficiency=compute_efficiency,
                      link_efficiency=link_efficiency)
    return simulate(transformer_graph(spec, cost, copies, backward=backward, dw=dw, sp_regather=sp_regather),
                    policy)


def hidden_table(models=("llama-7b", "llama-70b"), copies=(1, 2), **kwargs) -> list:
    """One row per (model, copies, phase): makespan, communication, exposed and hidden share."""
    rows = []
    for m in models:
        for n in copies:
            tl = simulate_transformer(m, copies=n, **kwargs)
            for ph in ("forward", "backward"):
                comm = tl.comm_time(ph)
                rows.append({"model": m if isinstance(m, str) else m.name, "copies": n, "phase": ph,
                             "makespan_ms": tl.makespan(ph) * 1e3, "compute_ms": tl.compute_time(ph) * 1e3,
                             "comm_ms": comm * 1e3, "exposed_ms": tl.exposed_comm_time(ph) * 1e3,
                             "hidden": tl.hidden_fraction(ph)})
    return rows


def format_table(rows) -> str:
    head = (f"{'model':<10} {'phase':<9} {'copies':>6} {'makespan ms':>12} {'compute ms':>11} {'comm ms':>9} "
            f"{'exposed ms':>11} {'hidden':>7}")
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r['model']:<10} {r['phase']:<9} {r['copies']:>6} {r['makespan_ms']:>12.3f} "
                     f"{r['compute_ms']:>11.3f} {r['comm_ms']:>9.3f} {r['exposed_ms']:>11.3f} {r['hidden']:>7.1%}")
    return "\n".join(lines)


__all__ = ["cost_model", "simulate_transformer", "hidden_table", "format_table"]
