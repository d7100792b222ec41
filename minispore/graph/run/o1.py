"""jit_level "O1": the O0 executor (kernel by kernel) on the graph after automatic operator fusion.

    @ms.jit(jit_level="O1")
    def step(x, w): ...

Compiling a graph for O1 first folds transposes into the matrix products around them
(passes/transpose_folding.py: `transpose(a @ b)` becomes `b^T @ a^T`, so a weight gradient comes
out of its GEMM in the weight's layout instead of as a strided view someone copies later), then
runs the fusion pass (passes/fusion.py): chains of elementwise ops and
elementwise ops around trailing-axis reductions become single nodes whose kernels are generated
C, compiled once with cffi and cached on disk (graph/codegen). The fused graph then runs exactly
like O0 - the same plan, the same step loop, the same strategies (heap, arena when
`set_context(memory_optimize_level="O1")` asks for SOMAS planning, several streams, profiling) -
only with fewer, bigger kernels. Without a C compiler fusion is skipped (warned once) and O1
is O0 on the folded graph.

`executor.graph` is the folded and fused graph (print it to see the groups), `executor.source_graph`
the captured one, `executor.fusion` the pass's result (`.fused`: the FusedPrimitives, each with its
`c_source`). With `MS_DEV_SAVE_GRAPHS=1` / `MINISPORE_DUMP_IR=1` the fused graph is printed too.
"""
from __future__ import annotations

import sys

from ..passes.fusion import fuse
from ..passes.transpose_folding import fold_transposes_here
from ..printer import dump_enabled, format_graph
from .executor import O0Executor, arena_requested


class O1Executor(O0Executor):
    """O0 on the fused graph. See the module docstring.

    The plan is built from `fusion.exec_graph` (the fused graph whose Call/If/While nodes still
    name the original subgraphs, planned as their fused versions through `fusion.exec_subgraphs`),
    so a lazy_inline model's many Call nodes cost what they cost at O0. `graph` is the fused
    graph proper (built when first read); it holds the same kernels in the same order, so the
    stream schedule, made from `graph`, indexes the plan's steps. The arena and `record_live` read
    the plan together with the graph's memory plan, so for them the plan is made from `graph`."""

    def __init__(self, graph, record_live: bool = False, arena=None, n_streams=None):
        self.source_graph = graph
        self.fusion = fuse(graph, prepare=fold_transposes_here)
        if arena is None:
            arena = arena_requested()
        if dump_enabled() and self.fusion.fused:
            print(f"# minispore IR of '{graph.name}' after operator fusion (jit_level O1): "
                  f"{len(self.fusion.fused)} fused "
                  f"groups\n{format_graph(self.fusion.graph)}", file=sys.stderr)
        if arena or record_live:
            super().__init__(self.fusion.graph, record_live=record_live, arena=arena, n_streams=n_streams)
        else:
            super().__init__(self.fusion.exec_graph, arena=False, subgraphs=self.fusion.exec_subgraphs,
                             n_streams=n_streams)

    @property
    def graph(self):
        """The fused graph (print it to see the groups)."""
        return self.fusion.graph


__all__ = ["O1Executor"]
