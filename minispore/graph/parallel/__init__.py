"""Semi-auto parallel in graph mode (MindSpore's `parallel_mode="semi_auto_parallel"`): turning one
graph with sharding strategies into each rank's graph.

* redistribution.py  the cheapest collectives (all_reduce, reduce_scatter, all_gather, all_to_all,
                     local slices) that move a tensor from one TensorLayout (ops/sharding.py) to
                     another; plans them by bytes, runs them over MPI or simulates every rank
"""
from .redistribution import (RedistStep, apply_redistribution, group_name, groups_for, layout_after,
                             plan_bytes, plan_redistribution, simulate_redistribution)

__all__ = ["RedistStep", "plan_redistribution", "plan_bytes", "layout_after", "groups_for", "group_name",
           "apply_redistribution", "simulate_redistribution"]
