"""Graph-to-graph passes over the IR (graph/ir.py). Each pass returns a new, verifiable Graph.

* inline_control_flow.py  constant folding, inlining of If nodes with a constant condition and of
                          Call nodes, dead-code elimination (MindSpore's control-flow inline). The
                          ast capture mode runs it on graphs holding If, While or Call nodes.
* fusion.py               operator fusion (jit_level O1): `fuse(graph)` turns chains of elementwise
                          ops and trailing-axis reductions into nodes with generated C kernels
                          (graph/codegen). Run by graph/run/o1.py, run/o2.py and dryrun(jit_level="O1");
                          imported from its module (it pulls in codegen, which O0 never needs).
* transpose_folding.py    `fold_transposes(graph)` (jit_level O1 and O2: fusion's `prepare` step):
                          `transpose(a @ b)` -> `b^T @ a^T`, the new operand transposes composed
                          with those already there, so GEMMs write results in the layout their
                          readers want (a weight gradient is no longer a transposed view that is
                          copied later).

Adding a pass: ARCHITECTURE.md §7.
"""
from .inline_control_flow import draws_random, fold_constants_and_inline, inline_control_flow, is_random

__all__ = ["inline_control_flow", "fold_constants_and_inline", "draws_random", "is_random"]
