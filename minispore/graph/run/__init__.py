"""How a compiled graph runs: one plan, one step loop, and the strategies over them.

Read in this order:

* plan.py          ExecutionPlan / Step: the graph turned, once, into slots and steps (inputs,
                   outputs, the slots to free after each step, constants in a template)
* loop.py          the step loop (`run_steps`): kernel, `conform` to the inferred dtype, frees;
                   `locate_error` for failures; `run_plan`, the heap run
* arena.py         the arena strategy: every intermediate at its SOMAS offset (graph/memory)
* multi_stream.py  the multi-stream strategy: a schedule's streams on threads, events between them
                   (the schedule itself: graph/streams.py); also every profiled run
* profiling.py     the sink a running Profiler installs and executors report to
* executor.py      O0Executor: the plan plus the choice of strategy at each run (jit_level "O0")
* o1.py            O1Executor: O0 on the graph after operator fusion (jit_level "O1")
* o2.py            O2Executor: the plan turned into ONE generated Python function (jit_level "O2")
* levels.py        the one table of jit levels: `make_executor(graph, level)`, `register_jit_level`
                   (`minispore.jit` re-exports both)
"""
from .plan import ExecutionPlan, Step, build_plan
from .loop import conform, locate_error, run_plan, run_steps
from .arena import ArenaRun
from .multi_stream import StreamRun
from .profiling import profiling_sink, set_profiling_sink
from .executor import O0Executor, arena_requested
from .o1 import O1Executor
from .o2 import O2Executor
from .levels import make_executor, register_jit_level

__all__ = ["ExecutionPlan", "Step", "build_plan", "run_plan", "run_steps", "conform", "locate_error", "ArenaRun",
           "StreamRun", "profiling_sink", "set_profiling_sink", "O0Executor", "arena_requested", "O1Executor",
           "O2Executor", "make_executor", "register_jit_level"]
