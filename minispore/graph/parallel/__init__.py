"""Semi-auto parallel in graph mode (MindSpore's `parallel_mode="semi_auto_parallel"`): turning one
graph with sharding strategies into each rank's graph.

* redistribution.py  the cheapest collectives (all_reduce, reduce_scatter, all_gather, all_to_all,
                     local slices) that move a tensor from one TensorLayout (ops/sharding.py) to
                     another; plans them by bytes, runs them over MPI or simulates every rank
* strategies.py      the shard strategies a capture records (Primitive.shard, Cell.shard, ms.shard)
                     and their conversion to TensorLayouts on the stage's device matrix
* propagate.py       sharding propagation: every value's layout, from the primitives' sharding rules
* partition.py       this rank's graph: redistributions as collective nodes, sliced parameters;
                     `plan_semi_auto` (no MPI needed) and jit's hook
"""
from .redistribution import (RedistStep, apply_redistribution, group_name, groups_for, layout_after,
                             plan_bytes, plan_redistribution, simulate_redistribution)
from .strategies import StageDevices, shard, strategy_layouts                 # strategies -> layouts
from .propagate import propagate                                             # a layout per value
from .partition import plan_function, plan_semi_auto, sliced_layout          # this rank's graph

__all__ = ["RedistStep", "plan_redistribution", "plan_bytes", "layout_after", "groups_for", "group_name",
           "apply_redistribution", "simulate_redistribution", "StageDevices", "shard", "strategy_layouts",
           "propagate", "plan_semi_auto", "plan_function", "sliced_layout"]
