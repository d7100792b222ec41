"""Graph-to-graph passes over the IR (graph/ir.py). Each pass returns a new, verifiable Graph.

* inline_control_flow.py  constant folding, inlining of If nodes with a constant condition and of
                          Call nodes, dead-code elimination (MindSpore's control-flow inline).
"""
from .inline_control_flow import draws_random, fold_constants_and_inline, inline_control_flow, is_random

__all__ = ["inline_control_flow", "fold_constants_and_inline", "draws_random", "is_random"]
