"""`dump(fn, *args)` and `explain(fn, *args)`: look at what graph mode makes of a function.

Both capture `fn` for these arguments exactly as `jit` would (a jitted function keeps its own
capture mode and cache; a plain function uses jit's default, capture_mode="ast") without running
the graph.

* `dump` returns the IR text of every graph (printer.py), a `str` that also displays well in a
  notebook.
* `explain` returns an `ExplainOutput`: the graphs, the graph breaks (`GraphBreak(reason, filename,
  lineno)`, only the bytecode mode makes them) and their counts, like `torch._dynamo.explain`.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .capture import CaptureRequest, get_capture_mode
from .printer import GraphText, format_graph
from .verify import verify


def _capture(fn, args, kwargs):
    jitted = getattr(fn, "__minispore_jit__", None)
    if jitted is not None:
        entry = jitted.compile(*args, **kwargs)
        if entry is None:
            raise RuntimeError(f"'{jitted.name}' is past its recompile limit: nothing to show")
        return entry.result
    capture, _ = get_capture_mode("ast")
    name = getattr(fn, "__qualname__", getattr(fn, "__name__", type(fn).__name__))
    result = capture(CaptureRequest(fn, tuple(args), dict(kwargs), name))
    for g in result.graphs:
        verify(g)
    return result


def dump(fn, *args, **kwargs) -> GraphText:
    """The IR text of the graph(s) `fn(*args, **kwargs)` compiles to."""
    result = _capture(fn, args, kwargs)
    return GraphText("\n\n".join(format_graph(g) for g in result.graphs))


@dataclass
class ExplainOutput:
    graphs: list = field(default_factory=list)
    breaks: list = field(default_factory=list)
    mode: str = ""

    @property
    def graph_count(self) -> int:
        return len(self.graphs)

    @property
    def break_count(self) -> int:
        return len(self.breaks)

    @property
    def op_count(self) -> int:
        return sum(g.num_nodes() for g in self.graphs)

    def __str__(self):
        lines = [f"Graph count: {self.graph_count}", f"Graph break count: {self.break_count}",
                 f"Op count: {self.op_count}  (capture_mode={self.mode})"]
        if self.breaks:
            lines.append("Break reasons:")
            lines += [f"  {i + 1}. {b}" for i, b in enumerate(self.breaks)]
        for g in self.graphs:
            lines.append(f"Graph '{g.name}': {len(g.params)} inputs, {len(g.captures)} captures, "
                         f"{g.num_nodes()} nodes")
        return "\n".join(lines)

    __repr__ = __str__


def explain(fn, *args, **kwargs) -> ExplainOutput:
    """Graphs and graph breaks of `fn(*args, **kwargs)` (see the module docstring)."""
    result = _capture(fn, args, kwargs)
    return ExplainOutput(list(result.graphs), list(result.breaks), result.mode)


__all__ = ["dump", "explain", "ExplainOutput"]
