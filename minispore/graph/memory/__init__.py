"""Static memory planning for graphs: MindSpore's SOMAS ("Safe Optimized Memory Allocation Solver").

PyNative (and the default O0 executor) allocate every intermediate on the heap and free it after
its last use. A compiled graph knows its whole schedule in advance, so it can do better: give every
intermediate tensor a fixed *offset* inside ONE preallocated arena, chosen so that two tensors that
are alive at the same time never share bytes, while tensors whose lifetimes do not overlap reuse
the same memory. That is the Dynamic Storage Allocation problem (NP-complete); like SOMAS and XLA,
we run several greedy heuristics and keep the best plan.

Read in this order:

* lifetimes.py   Buffer, lifetimes(graph): which bytes each value needs, from when to when
                 (views alias their owner, in-place outputs reuse a dead input)
* heuristics.py  the placement heuristics (greedy by size / breadth, by size, by size x
                 lifetime, in order) - one vectorised best-/first-fit loop, different orders
* planner.py     MemoryPlan, plan(graph), plan_buffers(buffers), check_plan (the verifier)
* arena.py       Arena: one NumPy byte buffer, typed views at planned offsets, measured peak
* call_plans.py  graph_plan(graph): the plan a graph runs with, a workspace per CALL (memoised)
* remat.py       recompute cheap residuals (views, constants) in a backward graph instead of
                 saving them (used by lazy_inline's forward/backward split)

## The API (stable: the O2 executor and DryRun code against it)

    from minispore.graph import memory

    bufs = memory.lifetimes(graph, schedule=None, alignment=64, hold_until=None, workspaces=None)
    # -> list[Buffer]: one per tensor value the graph produces (graph params and captures are
    #    NOT planned: the caller owns them). Buffer fields:
    #      value_id    ir.Value.id (workspaces: ("workspace", node_index))
    #      nbytes      exact bytes of the tensor (prod(shape) * itemsize)
    #      size_bytes  nbytes rounded up to `alignment` (what the planner places)
    #      start, end  first and last schedule step (inclusive) at which the bytes must exist:
    #                  start = the producing step, end = the last step that reads the value or
    #                  any VIEW of it; graph outputs live to the last step (len(schedule) - 1)
    #      alias_of    None for a buffer that owns memory; for a view (reshape/transpose/
    #                  expand_dims/squeeze/basic getitem that NumPy does without copying) or an
    #                  in-place op's output, the value_id of the owning buffer. Aliases take no
    #                  memory of their own; their uses extend the owner's `end`.
    #      kind        "node" | "output" | "view" | "inplace" | "workspace" | "external_view"
    #                  (a view of a graph param/capture: lives in the caller's memory, unplanned)
    #    `schedule`: the execution order as a list of node indices (default: graph order).
    #    `hold_until`: {value_id: step} keeps a buffer alive at least until `step` (a buffer read
    #                  by asynchronous work on another stream stays live until its join event).
    #    `workspaces`: {node_index: nbytes} scratch memory live only during that step (a fused
    #                  kernel's temporaries, a CALL's callee arena).

    p = memory.plan(graph, heuristics=memory.HEURISTICS, schedule=None, alignment=64,
                    hold_until=None, workspaces=None)
    p = memory.plan_buffers(bufs, heuristics=memory.HEURISTICS)     # any interval set (DryRun, tests)
    # -> MemoryPlan:
    #      offsets            {value_id: byte offset in the arena} for every owning buffer
    #      sizes              {value_id: size_bytes}
    #      alias_of           {view value_id: owning value_id}
    #      buffers            the Buffers planned (owning ones and aliases)
    #      peak_bytes         arena size needed = max(offset + size)   ("Actual peak, with fragments")
    #      lower_bound_bytes  max over steps of the bytes live at that step ("Used peak, without
    #                         fragments"); no plan can be smaller
    #      no_reuse_bytes     sum of all sizes (every buffer its own memory)
    #      fragmentation      peak_bytes / lower_bound_bytes - 1
    #      heuristic          name of the heuristic that won
    #      results            {heuristic name: its peak_bytes} (the whole portfolio)
    #      live_bytes_per_step()  list: bytes live at each step (the memory timeline)
    #      offset(value) / nbytes(value)   offset of a Value or value_id, following aliases
    memory.check_plan(p)          # raises PlanError naming two buffers that overlap in time AND address
    memory.check_offsets(buffers, offsets)         # the same check for any offsets (tests, DryRun)
    memory.HEURISTICS             # ("greedy_by_size", "greedy_by_breadth", "by_size", "by_size_x_lifetime",
                                  #  "in_order")
    memory.place(name, sizes, starts, ends)        # one heuristic on raw int arrays -> offsets
    memory.graph_plan(graph)      # plan() with a workspace per CALL (the callee's own plan), memoised
                                  # per graph: what the arena executor runs with
    (a primitive whose kernel writes an output into an input declares it: defprim(..., inplace={out: in}))

    arena = memory.Arena(p.peak_bytes)
    a = arena.view(offset, shape, dtype)   # a C-contiguous ndarray over arena bytes [offset, offset+nbytes)
    arena.high_water                       # max(offset + nbytes) over all views handed out: the
                                           # measured peak (equals p.peak_bytes after one run)

Executors use it like this (graph/run/arena.py, `O0Executor(graph, arena=True)`, or
`set_context(memory_optimize_level="O1")`): plan once when the plan of steps is built; at run time
each planned output is copied into `arena.view(p.offsets[vid], shape, dtype)` (views are left as
the kernel made them: they already point into their owner's bytes). A CALL node gets a workspace
of its step as big as the callee's own plan, and the callee runs in that window of the arena.
`executor.memory_plan`, `executor.arena` and `executor.arena_run.unplanned_bytes` (bytes a kernel
produced outside the arena because NumPy copied where a view was planned; 0 in practice).

Measured (bench/bench_memory.py, tiny LLaMA forward + backward, batch 12): planned peak = lower
bound (fragmentation 0), 72.9% below no reuse, and the arena's measured peak equals the plan.
"""
from .lifetimes import DEFAULT_ALIGNMENT, Buffer, align, lifetimes
from .heuristics import HEURISTICS, live_bytes, place
from .planner import MemoryPlan, PlanError, check_offsets, check_plan, plan, plan_buffers
from .arena import Arena
from .call_plans import graph_plan

__all__ = ["Buffer", "lifetimes", "align", "DEFAULT_ALIGNMENT", "HEURISTICS",
           "place", "live_bytes", "MemoryPlan", "PlanError", "plan", "plan_buffers", "check_plan",
           "check_offsets", "Arena", "graph_plan"]
