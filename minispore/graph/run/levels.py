"""The jit levels: one table from a level's name to the executor that runs a graph at it.

    ex = make_executor(graph, "O1")        # what jit does once per compiled graph
    register_jit_level("O1", factory)      # factory(graph) -> an executor with .run(*arrays)

The built-in levels are O0Executor (kernel by kernel), O1Executor (after operator fusion) and
O2Executor (one generated function). Each executor reads the run-time settings itself:
memory_optimize_level picks the arena when it is built, the stream count and the Profiler are
read at every run (executor.py). At every level a device backend may run the graph itself
(`Backend.graph_executor(plan, jit_level)`, given a DevicePlan: device_plan_builder.py). The
table lives here, next to the executors, so that everything in graph/ that compiles a graph
(the bytecode mode's segments, jit) picks executors the same way; `minispore.jit` re-exports
`make_executor` and `register_jit_level`.
"""
from __future__ import annotations

from .device_plan_builder import device_executor
from .executor import O0Executor
from .o1 import O1Executor
from .o2 import O2Executor

_LEVELS = {"O0": O0Executor, "O1": O1Executor, "O2": O2Executor}


def register_jit_level(name: str, factory):
    """Make `jit(jit_level=name)` build its executor with `factory(graph)`."""
    _LEVELS[name] = factory


def make_executor(graph, jit_level: str):
    """The executor of `graph` at `jit_level` (one of JIT_LEVELS, checked by `jit`)."""
    # a device backend may run the graph itself, at any level, values staying on the device: it gets
    # the graph as a DevicePlan (device_plan_builder.py); None: the core's executor for the level
    executor = device_executor(graph, jit_level)
    return executor if executor is not None else _LEVELS[jit_level](graph)


__all__ = ["make_executor", "register_jit_level"]
