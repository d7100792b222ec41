"""One rank of the MPI redistribution tests (tests/graph/test_redistribution.py), run under
`mpiexec -n N`: `python redistribution_worker.py OUT_DIR` writes OUT_DIR/rank_<r>.json.

For each scenario of this world size (SCENARIOS[N]: device matrix, global shape, dtype, source and
destination layouts), every rank builds the same integer-valued global array, takes its block of
the source (a partial source: the summands are random integers, the group's first rank holding
the block minus the others' - integers, so the sums are exact in float64 and float32), plans the
redistribution, runs it with `apply_redistribution` over MPI and records its output block, the
plan, and the `comm_bytes()` counters of that run alone. The pytest side checks the blocks against
direct slicing of the global array and the counters against the plan's predicted bytes.

The "grad" scenario runs the plan on a Tensor under `ms.grad`: the gradient flows back through
the collectives' backward rules.
"""
import json
import sys
from pathlib import Path

import numpy as np

import minispore as ms
from minispore.common import process_groups as pg
from minispore.graph.parallel.redistribution import (apply_redistribution, groups_for,
                                                      plan_redistribution)
from minispore.ops.prims.comm import comm_bytes, reset_comm_bytes
from minispore.ops.sharding import TensorLayout, local_block

L = TensorLayout
SCENARIOS = {
    2: [
        ("gather", (2,), (4, 6), "float64", L((2,), (0, -1)), L((2,), (-1, -1))),
        ("all_to_all", (2,), (4, 6), "float64", L((2,), (0, -1)), L((2,), (-1, 0))),
        ("all_reduce", (2,), (4, 6), "float64", L((2,), (-1, -1), (0,)), L((2,), (-1, -1))),
        ("reduce_scatter_dim1", (2,), (4, 6), "float64", L((2,), (-1, -1), (0,)), L((2,), (-1, 0))),
        ("to_partial", (2,), (4, 6), "float64", L((2,), (-1, -1)), L((2,), (-1, -1), (0,))),
        ("float32_gather_dim1", (2,), (4, 6), "float32", L((2,), (-1, 0)), L((2,), (-1, -1))),
        ("scalar_all_reduce", (2,), (), "float64", L((2,), (), (0,)), L((2,), ())),
    ],
    4: [
        ("swap_axes", (2, 2), (4, 8), "float64", L((2, 2), (1, 0)), L((2, 2), (0, 1))),
        ("gather_tuple", (2, 2), (4, 8), "float64", L((2, 2), ((1, 0), -1)), L((2, 2), (-1, -1))),
        ("two_reduce_scatters", (2, 2), (4, 8), "float64", L((2, 2), (-1, -1), (0, 1)), L((2, 2), (1, 0))),
        ("partial_and_split", (2, 2), (4, 8), "float64", L((2, 2), (1, -1), (0,)), L((2, 2), (-1, -1))),
        ("slice_then_gather", (2, 2), (4, 8), "float32", L((2, 2), (1, -1)), L((2, 2), (-1, 0))),
        ("size_one_axis", (2, 1, 2), (4, 8), "float64", L((2, 1, 2), ((2, 1), -1)), L((2, 1, 2), (-1, 0))),
        ("all_to_all_4", (4,), (4, 8), "float64", L((4,), (0, -1)), L((4,), (-1, 0))),
        ("uneven_all_reduce", (4,), (3,), "float64", L((4,), (-1,), (0,)), L((4,), (-1,))),
    ],
}


def global_array(shape, dtype, seed):
    return np.random.default_rng(seed).integers(-9, 10, size=shape).astype(dtype)


def source_block(full, src, rank, seed):
    """This rank's block of `full` under `src`; under a partial layout, its summand."""
    block = local_block(full, src, rank)
    if not src.partial:
        return block.copy()
    group = groups_for(src.device_matrix, src.partial, rank)

    def summand(r):
        return np.random.default_rng(seed * 100 + r).integers(-5, 6, size=block.shape).astype(block.dtype)
    if rank != group[0]:
        return summand(rank)
    return block - sum(summand(r) for r in group[1:])


def run_scenario(name, dm, shape, dtype, src, dst, rank, seed):
    full = global_array(shape, dtype, seed)
    block = source_block(full, src, rank, seed)
    steps = plan_redistribution(shape, np.dtype(dtype).itemsize, src, dst)
    pg.world().comm.Barrier()
    reset_comm_bytes()
    out = apply_redistribution(block, shape, steps, src, rank)
    counters = comm_bytes()
    return {"out": np.asarray(out).tolist(), "dtype": str(np.asarray(out).dtype),
            "steps": [[s.kind, list(s.axes), s.dim, s.dim2, s.bytes_per_rank] for s in steps],
            "counters": counters}


def run_grad(rank):
    """loss_r = sum(C * out_r), out_r = this rank's block after gathering dim 1 (replicated): the
    gathered value feeds every rank's loss, so d(sum_r loss_r)/d(block) = p * C's block."""
    src, dst, shape = L((2,), (-1, 0)), L((2,), (-1, -1)), (2, 4)
    full = global_array(shape, "float64", 7)
    weights = global_array(shape, "float64", 8)
    steps = plan_redistribution(shape, 8, src, dst)

    def loss(x):
        return (apply_redistribution(x, shape, steps, src, rank) * ms.Tensor(weights)).sum()
    grad = ms.grad(loss)(ms.Tensor(local_block(full, src, rank).copy()))
    return {"grad": grad.asnumpy().tolist(), "expected": (2 * local_block(weights, src, rank)).tolist()}


def main():
    out_dir = Path(sys.argv[1])
    world = pg.init_world()
    rank, n = world.rank, world.size
    results = {}
    for seed, (name, dm, shape, dtype, src, dst) in enumerate(SCENARIOS[n]):
        results[name] = run_scenario(name, dm, shape, dtype, src, dst, rank, seed + 1)
    if n == 2:
        results["grad"] = run_grad(rank)
    (out_dir / f"rank_{rank}.json").write_text(json.dumps(results))


if __name__ == "__main__":
    main()
