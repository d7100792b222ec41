"""Which parallel strategy fits, and how fast: enumerate the factorizations of a world size and
DryRun each one.

For a model, a world of N devices and a global batch, every strategy

    dp x tp x pp = N,   tp | heads, kv heads, ffn (and tp <= devices per node: TP wants the fast
                        links), pp <= layers, (global batch / micro-batch) divisible by dp,
    x ZeRO level (off, level1..3) x recompute (none, selective, full)

is planned by `parallel_plan.plan_parallel` (sequence parallel whenever tp > 1; micro-batches
m = global batch / (dp x micro-batch); the pipeline needs m >= pp to be worth it, fewer are kept
but pay their bubble). Each row reports the per-rank peak memory against the device's usable
memory, the predicted step time and PaLM's MFU (step_time.py). Rows that fit come first, fastest
first - the question a practitioner asks before renting 1024 accelerators ("which strategy fits
and how fast"), answered from formulas in seconds (a plan costs a few stages' worth of arithmetic
whatever N is: its ranks are alike per stage).

    from minispore.llm.strategy_search import search_strategies
    result = search_strategies(get_preset("llama-70b").model, 1024, device="h100", seq_len=4096)
    print(result.table(20)); result.plot("strategies.png")

    $ minispore dryrun --model llama-70b --world 1024 --search --plot strategies.png

The time model is an idealisation (module docstring of parallel_plan.py, "Time"): it ranks
strategies by what it models (arithmetic at peak x efficiency, alpha-beta collectives, the
bubble, what can overlap) - it cannot know kernel efficiencies or congestion.
"""
from __future__ import annotations

import numbers
import time
from dataclasses import dataclass, field

from ..common.errors import OpTypeError, OpValueError
from .comm_cost import LinkModel
from .config import LlamaConfig
from .moe_plan import MoESpec, moe_of
from .parallel_plan import OPTIMIZER_LEVELS, RECOMPUTE_MODES, ParallelStrategy, Precision, plan_parallel

_OP = "search_strategies"


@dataclass
class StrategyRow:
    """One planned strategy: its knobs, peak per-rank memory and predicted speed."""

    dp: int
    tp: int
    pp: int
    zero: str | None
    recompute: str
    micro_batches: int
    seq_parallel: bool
    memory_bytes: int          # the peak rank's stored state + activations
    peak_stage: int
    fits: bool
    step_s: float
    mfu: float
    tokens_per_s: float
    ep: int = 1
    multi_copy: int = 1
    breakdown: dict = field(default_factory=dict)    # the peak rank's memory parts

    def label(self) -> str:
        z = self.zero or "off"
        extra = (f" ep{self.ep}" if self.ep > 1 else "") + (f" mc{self.multi_copy}" if self.multi_copy > 1 else "")
        return f"dp{self.dp} tp{self.tp} pp{self.pp}{extra} zero={z} rc={self.recompute}"


@dataclass
class SearchResult:
    """All planned strategies, sorted: fitting ones first, then by predicted step time."""

    model: str
    world: int
    global_batch: int
    seq_len: int
    device: object
    rows: list
    skipped: dict             # reason -> count of factorizations not planned
    seconds: float            # wall time of the search

    @property
    def fitting(self) -> list:
        return [r for r in self.rows if r.fits]

    @property
    def best(self):
        return self.fitting[0] if self.fitting else None

    def table(self, top: int = 20) -> str:
        usable = self.device.usable_bytes / 2**30
        head = (f"Strategy search: {self.model} on {self.world:,} x {self.device.display_name} "
                f"({usable:.1f} GiB usable), global batch {self.global_batch} x seq {self.seq_len}: "
                f"{len(self.rows)} strategies planned, {len(self.fitting)} fit, in {self.seconds:.2f} s")
        lines = [head, f"  {'#':>3} {'dp':>5} {'tp':>3} {'pp':>3} {'m':>5} {'zero':>6} {'recompute':>9} "
                       f"{'mem GiB':>8} {'fits':>4} {'step s':>9} {'MFU':>6} {'tokens/s':>12}"]
        for k, r in enumerate(self.rows[:top]):
            lines.append(f"  {k + 1:>3} {r.dp:>5} {r.tp:>3} {r.pp:>3} {r.micro_batches:>5} {r.zero or 'off':>6} "
                         f"{r.recompute:>9} {r.memory_bytes / 2**30:>8.1f} {'yes' if r.fits else 'no':>4} "
                         f"{r.step_s:>9.3f} {r.mfu:>6.1%} {r.tokens_per_s:>12,.0f}")
        if len(self.rows) > top:
            lines.append(f"  ... {len(self.rows) - top} more")
        if self.skipped:
            lines.append("  not planned: " + "; ".join(f"{n} {why}" for why, n in sorted(self.skipped.items())))
        b = self.best
        lines.append(f"  best that fits: {b.label()} - {b.step_s:.3f} s/step, MFU {b.mfu:.1%}" if b else
                     "  nothing fits: more devices, ZeRO-3, full recompute or a smaller micro-batch")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {"model": self.model, "world": self.world, "global_batch": self.global_batch, "seq_len": self.seq_len,
                "device": self.device.name, "seconds": self.seconds, "skipped": self.skipped,
                "rows": [{"dp": r.dp, "tp": r.tp, "pp": r.pp, "ep": r.ep, "zero": r.zero, "recompute": r.recompute,
                          "micro_batches": r.micro_batches, "seq_parallel": r.seq_parallel,
                          "multi_copy": r.multi_copy, "memory_bytes": r.memory_bytes, "fits": r.fits,
                          "step_s": r.step_s, "mfu": r.mfu, "tokens_per_s": r.tokens_per_s,
                          "breakdown": r.breakdown} for r in self.rows]}

    def plot(self, path: str, annotate: int = 5) -> str:
        """Per-rank memory (x) against MFU (y), one point per strategy; the device's usable memory
        as a vertical line; the `annotate` best fitting strategies labelled. Saved with matplotlib's
        Agg backend (no display needed)."""
        from ..common.errors import require
        require("matplotlib", "plot", "Plotting the strategy search (--plot)")
        import matplotlib
        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
        colors = {"none": "tab:blue", "selective": "tab:orange", "full": "tab:green"}
        fig, ax = plt.subplots(figsize=(9, 5.5))
        for rc in RECOMPUTE_MODES:
            for fits, marker in ((True, "o"), (False, "x")):
                pts = [r for r in self.rows if r.recompute == rc and r.fits is fits]
                if pts:
                    ax.scatter([r.memory_bytes / 2**30 for r in pts], [100 * r.mfu for r in pts], marker=marker,
                               s=22, alpha=0.75, color=colors[rc],
                               label=f"recompute={rc}" + ("" if fits else " (does not fit)"))
        usable = self.device.usable_bytes / 2**30
        ax.axvline(usable, color="red", linestyle="--", linewidth=1)
        ax.text(usable, ax.get_ylim()[1], f" {usable:.0f} GiB usable", color="red", va="top", fontsize=8)
        best = self.fitting[:annotate]               # numbered on the plot, spelled out in a box
        for k, r in enumerate(best):
            ax.annotate(f"#{k + 1}", (r.memory_bytes / 2**30, 100 * r.mfu), fontsize=7,
                        xytext=(-16 if k % 2 else 5, -10 * (k // 2) - 2), textcoords="offset points",
                        arrowprops={"arrowstyle": "-", "linewidth": 0.5})
        if best:
            ax.text(0.01, 0.99, "fastest that fit:\n" + "\n".join(
                f"#{k + 1} {r.label()}: {r.step_s:.2f} s, {r.mfu:.0%}" for k, r in enumerate(best)),
                transform=ax.transAxes, va="top", ha="left", fontsize=7,
                bbox={"boxstyle": "round", "facecolor": "white", "alpha": 0.85, "linewidth": 0.5})
        ax.set_xscale("log")
        ax.set_xlabel("per-rank memory, GiB (peak stage; log scale)")
        ax.set_ylabel("predicted MFU, %")
        ax.set_title(f"{self.model}: {self.world:,} x {self.device.display_name}, global batch {self.global_batch} "
                     f"x {self.seq_len}")
        ax.legend(fontsize=7, loc="lower right")
        ax.grid(alpha=0.3)
        fig.tight_layout()
        fig.savefig(path, dpi=120)
        plt.close(fig)
        return path


def _divisors(n: int) -> list:
    small = [k for k in range(1, int(n ** 0.5) + 1) if n % k == 0]
    return sorted(set(small + [n // k for k in small]))


def search_strategies(cfg: LlamaConfig, world: int, *, device="h100", seq_len: int | None = None,
                      global_batch: int | None = None, micro_batch: int = 1, precision: Precision | None = None,
                      attention: str = "flash", links: LinkModel | None = None, moe: MoESpec | None = None,
                      ep: int = 1, multi_copy: int = 1, zero_levels=(None,) + OPTIMIZER_LEVELS,
                      recomputes=RECOMPUTE_MODES, max_tp: int | None = None, efficiency: float = 1.0,
                      model: str = "llama", memory_limit: float | None = None) -> SearchResult:
    """Plan every (dp, tp, pp, zero, recompute) factorization of `world` (module docstring).

    `global_batch` (sequences per step; default: `world`) and `micro_batch` set m; `max_tp`
    (default: the links' devices per node) caps tensor parallel; `memory_limit` (bytes; default:
    the device's usable memory) decides "fits"; `ep` / `multi_copy` are applied to every strategy
    they are valid for (ep must divide dp; multi-copy needs tp > 1). Precision default: bf16
    compute and parameters, fp32 gradients (Megatron's 18 bytes/param)."""
    from ..graph.dryrun.devices import get_device
    t0 = time.perf_counter()
    if not isinstance(cfg, LlamaConfig):
        raise OpTypeError(_OP, "a LlamaConfig", type(cfg).__name__)
    for name, v in (("world", world), ("micro_batch", micro_batch), ("ep", ep), ("multi_copy", multi_copy)):
        if not isinstance(v, numbers.Integral) or isinstance(v, bool) or v < 1:
            raise OpValueError(_OP, f"{name} as an int >= 1", repr(v))
    device = get_device(device)
    links = links or LinkModel()
    seq = cfg.max_seq_len if seq_len is None else seq_len
    gb = world if global_batch is None else global_batch
    if not isinstance(gb, numbers.Integral) or isinstance(gb, bool) or gb < 1:
        raise OpValueError(_OP, "global_batch (--global-batch) as an int >= 1", repr(global_batch))
    precision = precision or Precision(compute_dtype="bfloat16", param_dtype="bfloat16", grad_dtype="float32")
    moe = moe_of(cfg) if moe is None else moe
    limit = device.usable_bytes if memory_limit is None else memory_limit
    max_tp = links.devices_per_node if max_tp is None else max_tp
    rows, skipped = [], {}

    def skip(why):
        skipped[why] = skipped.get(why, 0) + 1

    for tp in _divisors(world):
        if tp > max_tp:
            skip(f"tp > {max_tp} (across nodes)")
            continue
        if any(v % tp for v in (cfg.n_heads, cfg.n_kv_heads, cfg.hidden_dim)) or (tp > 1 and seq % tp):
            skip("tp not dividing heads / kv heads / ffn / seq")
            continue
        for pp in _divisors(world // tp):
            if pp > cfg.n_layers:
                skip("pp > layers")
                continue
            dp = world // (tp * pp)
            if gb % (dp * micro_batch):
                skip("global batch not divisible by dp x micro-batch")
                continue
            m = gb // (dp * micro_batch)
            e = ep if (moe is not None and dp % ep == 0 and moe.num_experts % ep == 0) else 1
            mc = multi_copy if tp > 1 else 1
            for zero in zero_levels:
                for rc in recomputes:
                    strategy = ParallelStrategy(data_parallel=dp, model_parallel=tp, pipeline_stage=pp,
                                                micro_batch_num=m, use_seq_parallel=tp > 1, optimizer_level=zero,
                                                recompute=rc, expert_parallel=e, fine_grain_interleave=mc)
                    plan = plan_parallel(cfg, strategy, batch_size=micro_batch, seq_len=seq, precision=precision,
                                         attention=attention, links=links, device=device, model=model, moe=moe,
                                         efficiency=efficiency)
                    peak, where = plan.peak_memory()
                    step = plan.step_time_s
                    rows.append(StrategyRow(dp, tp, pp, zero, rc, m, tp > 1, peak, where, peak <= limit, step,
                                            plan.mfu(), plan.tokens_per_step / step if step else 0.0, e, mc,
                                            plan.memory(where)))
    rows.sort(key=lambda r: (not r.fits, r.step_s, r.memory_bytes))
    return SearchResult(model, world, gb, seq, device, rows, skipped, time.perf_counter() - t0)


__all__ = ["search_strategies", "SearchResult", "StrategyRow"]
