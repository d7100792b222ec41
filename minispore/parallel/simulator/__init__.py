"""A two-stream simulator: how much tensor-parallel communication a schedule hides behind compute.

Every rank of a device has (at least) two in-order streams, one for kernels and one for
collectives; a kernel that needs a collective's result waits for it (an event), a kernel that does
not runs while the collective is in flight. How much communication is *hidden* that way decides
whether tensor parallelism scales, and it is what MindSpore 2.3's fine-grained multi-copy
parallelism improves (its release notes claim 50%+ hidden in forward, 90% in backward with two
copies). Measuring it needs a cluster; predicting it needs only the schedule and a cost model:

    time of a task       roofline of its FLOPs and bytes on a device profile (kernels), or
                         alpha-beta ring cost (collectives): AG/RS (n-1)alpha + (n-1)/n S beta,
                         all-reduce 2(n-1)alpha + 2(n-1)/n S beta
    start of a task      max(end of the previous task on its stream, ends of its dependencies)
    hidden fraction      sum over collectives of (time the same rank's compute stream is busy
                         during it) / total collective time

Read in this order:

* engine.py       Task, TaskGraph (in-order streams + dependencies), simulate, Timeline (makespan,
                  busy time per stream, hidden fraction, per phase)
* cost.py         CostModel: DryRun's device profiles (graph/dryrun/devices.py) for kernels,
                  LinkProfile (HCCS, NVLink4; fit_alpha_beta for a measured one) for collectives
* transformer.py  LLaMA layers under TP + sequence parallel with 1..n copies: the forward and the
                  backward task graph (dX waits for the collective, dW does not)
* pipeline.py     pipeline schedules (nn/pipeline_schedule.py: GPipe, 1F1B, interleaved) as task graphs,
                  p2p sends on the comm stream
* jit_graph.py    a real captured graph (jit / DryRun) as tasks: collectives on the comm stream
* measured.py     measured MPI timelines: record, replay with their own durations, compare
* gantt.py        the Gantt chart (matplotlib): one row per stream, colour by kind
* report.py       simulate_transformer, hidden_table; cli.py: `python -m minispore.parallel.simulator`

Checked three ways (tests/parallel/test_simulator.py): exactly against closed forms (the multi-copy
chain k c + x/n, the pipeline bubbles (p-1)/m and (p-1)/(v m)); against a timeline measured on
real MPI ranks (replayed with the measured durations); and at scale (LLaMA-7B/70B layers on a
simulated Ascend 910B node: bench/bench_simulator.py).
"""
from .engine import COMM, COMPUTE, POLICIES, Task, TaskGraph, Timeline, is_comm, simulate
from .cost import (DEFAULT_LINK, HCCS, LINKS, NVLINK4, CostModel, LinkProfile, collective_time, fit_alpha_beta,
                   get_link, ring_steps, ring_wire_bytes)
from .transformer import PRESETS, LayerSpec, chain_graph, preset, transformer_graph
from .pipeline import bubble_fraction, pipeline_graph, schedule_orders
from .jit_graph import graph_tasks
from .measured import (TimelineRecorder, host_order_depends, measured_makespan, replay, timeline_from_records,
                       with_unique_names)
from .gantt import plot_gantt
from .report import cost_model, format_table, hidden_table, simulate_transformer

__all__ = ["COMM", "COMPUTE", "POLICIES", "is_comm", "Task", "TaskGraph", "Timeline", "simulate", "DEFAULT_LINK",
           "HCCS", "LINKS", "NVLINK4", "CostModel", "LinkProfile", "collective_time", "fit_alpha_beta", "get_link",
           "ring_steps", "ring_wire_bytes",
           "PRESETS", "LayerSpec", "chain_graph", "preset", "transformer_graph", "bubble_fraction", "schedule_orders",
           "pipeline_graph", "graph_tasks", "TimelineRecorder", "host_order_depends", "with_unique_names",
           "measured_makespan", "replay", "timeline_from_records", "plot_gantt", "cost_model", "format_table",
           "hidden_table", "simulate_transformer"]
