"""The O0 executor's old import path: it lives in graph/run/ (plan, step loop, strategies).

Kept because graph/autodiff.py, graph/dryrun/devices.py and tutorial 05 import
`minispore.graph.executor.O0Executor`; new code imports it from `minispore.graph.run`.
"""
from .run import O0Executor

__all__ = ["O0Executor"]
