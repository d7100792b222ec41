"""`mindspore.context` (`from mindspore import context; context.set_context(mode=context.GRAPH_MODE)`),
the spelling older MindSpore scripts use for what 2.x also exposes at the top level.

The execution context itself lives in `minispore.common.context`; this module re-exports it and
adds MindSpore's *auto-parallel* context: `ParallelMode` and `set/get/reset_auto_parallel_context`
(implemented in minispore.common.auto_parallel_context: `parallel_mode="data_parallel"` makes
TrainOneStepCell and Model all-reduce the gradients across the ranks of an MPI launch).
"""
from __future__ import annotations

# (the auto-parallel context lives in common because nn's training cells read it)
from .common.auto_parallel_context import (ParallelMode, get_auto_parallel_context,
                                           reset_auto_parallel_context, set_auto_parallel_context)
from .common.context import GRAPH_MODE, PYNATIVE_MODE, get_context, set_context


__all__ = ["GRAPH_MODE", "PYNATIVE_MODE", "set_context", "get_context", "ParallelMode",
           "set_auto_parallel_context", "get_auto_parallel_context", "reset_auto_parallel_context"]
