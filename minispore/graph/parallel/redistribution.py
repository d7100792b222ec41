"""Redistribution: the cheapest collectives that turn a tensor's source layout into a destination layout.

When a value produced under one `TensorLayout` (ops/sharding.py) is consumed under another, every
rank must trade its local block of the source for its block of the destination. MindSpore's
semi-auto parallel calls this *tensor redistribution*; this module plans it (which collectives,
over which device-matrix axes, in which order) and runs a plan, eagerly over MPI or simulated with
every device in one NumPy process.

A layout gives each device-matrix axis one of three roles: it splits a tensor dim (a tuple entry
of the tensor map lists a dim's axes major first), it is a pending sum (`partial`), or it is unused
(the devices along it hold replicas). A *step* changes the role of some axes. These are the steps,
each run over groups of "the ranks that differ only along `axes`":

    step            role change of `axes`                        bytes one rank sends (ring model)
    all_reduce      partial                -> unused             2 (p-1)/p * n
    reduce_scatter  partial                -> split `dim`        (p-1)/p * n
    all_gather      split `dim`            -> unused             (p-1) * n
    all_to_all      split `dim`            -> split `dim2`       (p-1)/p * n
    slice           unused                 -> split `dim`        0  (each rank keeps its piece)
    to_partial      unused                 -> partial            0  (the rank at coordinate 0 of
                                                                     `axes` keeps the value, the
                                                                     others hold zeros)

n is the bytes of one rank's block before the step and p the group size (the product of the axes'
sizes). Only the *minor-most* (last-listed) axes of a dim can be gathered or added: a dim split
over (a, b) is cut into size(a) * size(b) blocks with b varying fastest, so the ranks that differ
along b hold adjacent blocks (gathering them gives one contiguous block), while the ranks that
differ along a hold blocks size(b) apart. Several axes in one step are one collective over the
product group: gathering (a, b) at once costs (p_a p_b - 1) n, the same as gathering b then a,
but it is one call.

**Planning** is a shortest-path search (Dijkstra) over the layouts reachable by those steps, from
the source to the destination, weighted by the bytes each step sends (the block size, and so
every step's bytes, depends only on the layout it starts from). Ties go to fewer steps. So the
plan is never dearer than the naive "gather everything, settle the sums, slice" (which is one of
the paths searched), it slices before it gathers when that shrinks the gathered blocks, settles a
partial sum by a reduce-scatter when the destination splits a dim over that axis (half an
all-reduce), and moves a split between dims by one all-to-all. Axes of size 1 change nothing (a
1-block split, a 1-summand sum) and never appear in a plan; axes unused by both layouts are never
touched (splitting along one and gathering it back always costs more than not: the gather's
extra blocks outweigh what the split saved), and a pending sum is made only over the
destination's partial axes (one made elsewhere must be settled again, where a slice is free);
tests/graph/test_redistribution.py checks that an unrestricted search finds nothing cheaper.
Plans are cached: a compiler pass asks for the same pair many times.

**Bytes** (`RedistStep.bytes_per_rank`) follow `comm_bytes()`'s "ring" counter in
ops/prims/comm.py exactly - the bytes a ring algorithm sends from one rank, for the buffer the
primitive is handed (its own dtype): `apply_redistribution` runs the plan's steps as exactly those
primitives on exactly those buffers, so the plan's bytes of each kind equal what `comm_bytes()`
records per rank (the `calls` count is one per step). The one inexactness: a ring all-reduce cuts
its buffer into p chunks, and when the element count is not a multiple of p the chunks differ by
one element and so do the ranks' bytes; `bytes_per_rank` is then the group's mean, rounded down
(the group's total, 2 (p-1) n, is exact). comm_bytes()' other counter, "payload" (the bytes of the send
buffer handed to MPI, half floats widened to float32 for reductions), is not the model.

    plan_redistribution(shape, itemsize, src, dst) -> (RedistStep, ...)
    layout_after(layout, step)                     -> the layout a step leaves
    groups_for(device_matrix, axes, rank)          -> world ranks of rank's group, in block order
    group_name(device_matrix, axes, rank)          -> that group as a named process group
    apply_redistribution(local, shape, steps, src, rank)      -> this rank's block of dst (MPI)
    simulate_redistribution(blocks_by_rank, shape, steps, src) -> {rank: block of dst} (NumPy)
"""
from __future__ import annotations

import heapq
import itertools
import math
import numbers
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ...common import process_groups as pg
from ...common.errors import OpTypeError, OpValueError
from ...common.tensor import Tensor
from ...ops import functional as F
from ...ops.prims import comm
from ...ops.sharding import NOT_SPLIT, TensorLayout

OP = "redistribution"
KINDS = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all", "slice", "to_partial")
COMMUNICATING = frozenset(("all_reduce", "reduce_scatter", "all_gather", "all_to_all"))


@dataclass(frozen=True)
class RedistStep:
    """One step of a redistribution plan.

    * `kind`            one of KINDS (module docstring: what each does to the layout);
    * `axes`            the device-matrix axes (counted from the right) the step works over, major
                        first: its groups are the ranks that differ only along them, ordered by
                        their coordinates along `axes` read as one mixed-radix number;
    * `dim`             the tensor dim gathered (all_gather), scattered into (reduce_scatter),
                        sliced (slice) or, for all_to_all, gathered; None for all_reduce/to_partial;
    * `dim2`            all_to_all only: the dim that is split;
    * `bytes_per_rank`  the bytes one rank sends, in comm_bytes()' "ring" convention (module
                        docstring), for the plan's shape and itemsize.
    """

    kind: str
    axes: tuple
    dim: int | None
    dim2: int | None = None
    bytes_per_rank: int = 0

    @property
    def communicates(self) -> bool:
        """True for the collectives (all_reduce, reduce_scatter, all_gather, all_to_all)."""
        return self.kind in COMMUNICATING

    def __str__(self):
        where = "" if self.dim is None else f" dim {self.dim}" + ("" if self.dim2 is None else f"->{self.dim2}")
        return f"{self.kind}(axes={self.axes}{where}, {self.bytes_per_rank} B/rank)"


# ------------------------------------------------------------------------------------------------
# the search state: a layout as (per dim: the tuple of its axes, major first; sorted partial axes),
# with the axes of size 1 left out (they change no block)
@lru_cache(maxsize=4096)
def _canonical(layout: TensorLayout) -> TensorLayout:
    """`layout` without its size-1 axes: the same block on every rank, one spelling per layout."""
    big = [a for a in range(len(layout.device_matrix)) if layout.axis_size(a) > 1]
    tm = tuple(tuple(a for a in layout.axes(d) if a in big) or NOT_SPLIT for d in range(layout.ndim))
    return TensorLayout(layout.device_matrix, tm, tuple(a for a in layout.partial if a in big))


def _state(layout: TensorLayout):
    c = _canonical(layout)
    return tuple(c.axes(d) for d in range(c.ndim)), c.partial


def _layout(device_matrix, state) -> TensorLayout:
    tm, partial = state
    return TensorLayout(device_matrix, tuple(axes if axes else NOT_SPLIT for axes in tm), partial)


def _prod(sizes, axes) -> int:
    p = 1
    for a in axes:
        p *= sizes[a]
    return p


def _nelem(shape, sizes, tm) -> int:
    n = 1
    for s, axes in zip(shape, tm):
        n *= s // _prod(sizes, axes)
    return n


def _fits(shape, sizes, d, axes) -> bool:
    return shape[d] % _prod(sizes, axes) == 0


def _subsets(axes):
    """Nonempty subsets of `axes` (sorted tuples)."""
    axes = sorted(axes)
    for k in range(1, len(axes) + 1):
        yield from itertools.combinations(axes, k)


def _orderings(axes):
    """Nonempty ordered selections of `axes` (the order an appended group of axes takes)."""
    for k in range(1, len(axes) + 1):
        yield from itertools.permutations(sorted(axes), k)


def _all_reduce_bytes(nelem, itemsize, p) -> int:
    """A ring all-reduce's bytes per rank: 2 (p-1) n over the group, its mean rounded down (exact
    per rank when p divides the element count; comm.ring_bytes_all_reduce gives each rank's)."""
    return 2 * (p - 1) * nelem * itemsize // p


def _moves(state, shape, itemsize, sizes, active, dst_partial):
    """Every step from `state`: (RedistStep with its bytes, the state it leaves)."""
    tm, partial = state
    nbytes = _nelem(shape, sizes, tm) * itemsize
    used = set(partial).union(*map(set, tm))
    free = [a for a in active if a not in used]
    ndim = len(tm)

    def put(d, axes):
        return tm[:d] + (axes,) + tm[d + 1:]

    for d in range(ndim):                          # all_gather / all_to_all: a minor-most run of axes
        for k in range(1, len(tm[d]) + 1):
            run, rest = tm[d][-k:], tm[d][:-k]
            p = _prod(sizes, run)
            yield RedistStep("all_gather", run, d, None, (p - 1) * nbytes), (put(d, rest), partial)
            for b in range(ndim):
                if b != d and _fits(shape, sizes, b, tm[b] + run):
                    moved = put(d, rest)
                    moved = moved[:b] + (tm[b] + run,) + moved[b + 1:]
                    yield RedistStep("all_to_all", run, d, b, (p - 1) * (nbytes // p)), (moved, partial)
    for axes in _subsets(partial):                 # settle some pending sums everywhere ...
        left = tuple(a for a in partial if a not in axes)
        yield RedistStep("all_reduce", axes, None, None,
                         _all_reduce_bytes(nbytes // itemsize, itemsize, _prod(sizes, axes))), (tm, left)
    for run in _orderings(partial):                # ... or each rank only its piece of one dim
        left = tuple(a for a in partial if a not in run)
        p = _prod(sizes, run)
        for d in range(ndim):
            if _fits(shape, sizes, d, tm[d] + run):
                yield RedistStep("reduce_scatter", run, d, None, (p - 1) * (nbytes // p)), (put(d, tm[d] + run), left)
    for run in _orderings(free):                   # free: split a replicated value further
        for d in range(ndim):
            if _fits(shape, sizes, d, tm[d] + run):
                yield RedistStep("slice", run, d), (put(d, tm[d] + run), partial)
    # free: make a replicated value a pending sum - only over the destination's partial axes (a sum
    # made anywhere else must be settled again, which costs more than slicing instead)
    for axes in _subsets([a for a in free if a in dst_partial]):
        yield RedistStep("to_partial", axes, None), (tm, tuple(sorted(partial + axes)))


def _search(shape, itemsize, src, dst, prune=True):
    """Dijkstra from src's state to dst's over `_moves`; (bytes, steps) is the cost, compared as a
    pair so that among the cheapest plans the shortest wins. `prune=False` lets the search use
    every axis of size > 1 (the tests check that pruning never loses a cheaper plan)."""
    sizes = {a: src.axis_size(a) for a in range(len(src.device_matrix))}
    start, goal = _state(src), _state(dst)
    if prune:
        active = sorted(_canonical(src).used_axes() | _canonical(dst).used_axes())
        dst_partial = set(goal[1])
    else:
        active = sorted(a for a, s in sizes.items() if s > 1)
        dst_partial = set(active)
    best = {start: (0, 0)}
    came_from = {}
    tie = itertools.count()
    heap = [(0, 0, next(tie), start)]
    while heap:
        cost, nsteps, _, state = heapq.heappop(heap)
        if state == goal:
            break
        if best.get(state, (cost, nsteps)) < (cost, nsteps):
            continue                                  # a stale entry: found cheaper since
        for step, nxt in _moves(state, shape, itemsize, sizes, active, dst_partial):
            cand = (cost + step.bytes_per_rank, nsteps + 1)
            if cand < best.get(nxt, (float("inf"), 0)):
                best[nxt] = cand
                came_from[nxt] = (state, step)
                heapq.heappush(heap, (cand[0], cand[1], next(tie), nxt))
    steps = []
    state = goal
    while state != start:
        state, step = came_from[state]
        steps.append(step)
    return tuple(reversed(steps))


# ------------------------------------------------------------------------------------------------
# validation
def _check_shape(shape):
    if not isinstance(shape, (tuple, list)) or not all(
            isinstance(s, numbers.Integral) and not isinstance(s, bool) and s >= 0 for s in shape):
        raise OpValueError(OP, "'shape' to be a tuple of non-negative ints (the global shape)", repr(shape))
    return tuple(int(s) for s in shape)


def _check_layout(what, layout):
    if not isinstance(layout, TensorLayout):
        raise OpTypeError(OP, f"'{what}' to be a TensorLayout (ops/sharding.py)",
                          f"{type(layout).__name__} {layout!r}")


def _check_pair(shape, src, dst):
    _check_layout("src", src)
    _check_layout("dst", dst)
    if src.device_matrix != dst.device_matrix:
        raise OpValueError(OP, f"the source and destination layouts on one device matrix (source: "
                               f"{src.device_matrix})", f"destination device matrix {dst.device_matrix}")
    if src.ndim != dst.ndim or src.ndim != len(shape):
        raise OpValueError(OP, f"source and destination tensor maps with one entry per dim of the shape {shape}",
                           f"src tensor_map {src.tensor_map}, dst tensor_map {dst.tensor_map}")
    src.local_shape(shape, op=OP)
    dst.local_shape(shape, op=OP)


def plan_redistribution(shape, itemsize, src: TensorLayout, dst: TensorLayout) -> tuple:
    """The cheapest sequence of RedistSteps (by bytes per rank, then by count) that turns every
    rank's block of a tensor of global `shape` under `src` into its block under `dst`; () when the
    two layouts give every rank the same block. `itemsize`: the bytes of one element. Raises
    OpValueError when the layouts are on different device matrices, do not match the shape's rank,
    or do not divide the shape."""
    shape = _check_shape(shape)
    if not isinstance(itemsize, numbers.Integral) or isinstance(itemsize, bool) or itemsize < 1:
        raise OpValueError(OP, "'itemsize' to be a positive int (bytes per element)", repr(itemsize))
    _check_pair(shape, src, dst)
    return _plan(shape, int(itemsize), _canonical(src), _canonical(dst))


@lru_cache(maxsize=4096)
def _plan(shape, itemsize, src, dst):
    return _search(shape, itemsize, src, dst)


def plan_bytes(steps) -> int:
    """The bytes one rank sends over a whole plan."""
    return sum(s.bytes_per_rank for s in steps)


def layout_after(layout: TensorLayout, step: RedistStep) -> TensorLayout:
    """The layout `step` leaves when it starts from `layout` (size-1 axes dropped: they change no
    block). Raises OpValueError when the step does not apply (e.g. gathering an axis that is not
    the minor-most split of its dim)."""
    tm, partial = _state(layout)
    big = set(a for a in range(len(layout.device_matrix)) if layout.axis_size(a) > 1)
    axes = tuple(a for a in step.axes if a in big)
    used = set(partial).union(*map(set, tm))

    def bad(expected):
        raise OpValueError(OP, expected, f"{step} on {layout}")

    def put(t, d, entry):
        return t[:d] + (entry,) + t[d + 1:]

    if step.kind in ("all_gather", "all_to_all"):
        if step.dim is None or not 0 <= step.dim < len(tm) or tm[step.dim][len(tm[step.dim]) - len(axes):] != axes:
            bad(f"a {step.kind} of the minor-most axes of a split dim")
        tm = put(tm, step.dim, tm[step.dim][:len(tm[step.dim]) - len(axes)])
        if step.kind == "all_to_all":
            if step.dim2 is None or not 0 <= step.dim2 < len(tm) or step.dim2 == step.dim:
                bad("an all_to_all with dim2 another dim than dim")
            tm = put(tm, step.dim2, tm[step.dim2] + axes)
    elif step.kind in ("all_reduce", "reduce_scatter"):
        if step.kind == "reduce_scatter" and (step.dim is None or not 0 <= step.dim < len(tm)):
            bad("a reduce_scatter into a dim of the tensor")
        if not set(axes) <= set(partial):
            bad(f"a {step.kind} over partial axes")
        partial = tuple(a for a in partial if a not in axes)
        if step.kind == "reduce_scatter":
            tm = put(tm, step.dim, tm[step.dim] + axes)
    elif step.kind in ("slice", "to_partial"):
        if step.kind == "slice" and (step.dim is None or not 0 <= step.dim < len(tm)):
            bad("a slice of a dim of the tensor")
        if used & set(axes):
            bad(f"a {step.kind} over axes the layout does not use")
        if step.kind == "slice":
            tm = put(tm, step.dim, tm[step.dim] + axes)
        else:
            partial = tuple(sorted(partial + axes))
    else:
        bad(f"a step kind in {list(KINDS)}")
    return _layout(layout.device_matrix, (tm, partial))


# ------------------------------------------------------------------------------------------------
# groups
def _check_device_matrix(device_matrix, axes, rank):
    dm = tuple(int(s) for s in device_matrix)
    n = math.prod(dm)
    if any(not 0 <= a < len(dm) for a in axes) or len(set(axes)) != len(axes):
        raise OpValueError(OP, f"distinct device-matrix axes in [0, {len(dm)}) for the device matrix {dm}",
                           repr(tuple(axes)))
    if not isinstance(rank, numbers.Integral) or not 0 <= rank < n:
        raise OpValueError(OP, f"a rank in [0, {n}) for the device matrix {dm}", repr(rank))
    return dm


def groups_for(device_matrix, axes, rank) -> tuple:
    """The ranks of `rank`'s group along `axes`: every rank whose coordinates differ from `rank`'s
    only along `axes`, ordered by their coordinates along `axes` read as one mixed-radix number
    (axes[0] the major digit) - the order in which their blocks sit in the tensor when a dim is
    split over `axes`, so a gather over the group yields the blocks in block order."""
    axes = tuple(int(a) for a in axes)
    dm = _check_device_matrix(device_matrix, axes, rank)
    return _group(dm, axes, int(rank))


@lru_cache(maxsize=None)
def _group(dm, axes, rank):
    size = dm[::-1]                                 # size[a]: axis a, counted from the right
    stride = [1] * len(dm)                          # stride[a]: rank distance of one step along axis a
    for a in range(1, len(dm)):
        stride[a] = stride[a - 1] * size[a - 1]
    base = rank - sum((rank // stride[a]) % size[a] * stride[a] for a in axes)
    return tuple(base + sum(c * stride[a] for c, a in zip(digits, axes))
                 for digits in itertools.product(*(range(size[a]) for a in axes)))


def index_in_group(device_matrix, axes, rank) -> int:
    """`rank`'s position in its group along `axes` (its coordinates along `axes`, mixed radix)."""
    return groups_for(device_matrix, axes, rank).index(int(rank))


def _name(dm, axes, ranks) -> str:
    return (f"parallel_{'x'.join(map(str, dm))}_axes{'_'.join(map(str, axes))}"
            f"_ranks{'_'.join(map(str, ranks))}")


def group_name(device_matrix, axes, rank) -> str:
    """The named process group (common/process_groups.py) of `rank`'s group along `axes`, created
    on first use. Creating a group is collective over the world, so the first call for a
    (device_matrix, axes) pair creates ALL of that partition's groups at once, in rank order of
    their first member: every rank makes the same calls in the same order (no deadlock), provided
    every rank asks for that pair at the same point of the program, as a plan's steps do. The
    device matrix must cover the world exactly (its ranks are world ranks 0 .. n-1)."""
    axes = tuple(int(a) for a in axes)
    dm = _check_device_matrix(device_matrix, axes, rank)
    mine = groups_for(dm, axes, rank)
    world = pg.world()
    n = math.prod(dm)
    if world.size != n:
        raise OpValueError(OP, f"a world of {n} ranks for the device matrix {dm} (its ranks are the world's)",
                           f"a world of {world.size}")
    if n == 1:
        return world.name
    target = _name(dm, axes, mine)
    try:
        pg.get(target)
        return target
    except OpValueError:
        pass
    seen = set()
    for r in range(n):                              # the same order on every rank
        ranks = groups_for(dm, axes, r)
        if ranks in seen:
            continue
        seen.add(ranks)
        name = _name(dm, axes, ranks)
        try:
            pg.get(name)
        except OpValueError:
            pg.create(name, ranks)
    return target


# ------------------------------------------------------------------------------------------------
# running a plan
def _checked(shape, steps, src):
    """`steps` as a tuple, after checking that each applies to the layout the previous one left."""
    steps = tuple(steps)
    for step in steps:
        if not isinstance(step, RedistStep):
            raise OpTypeError(OP, "'steps' to be RedistSteps (from plan_redistribution)",
                              f"{type(step).__name__} {step!r}")
    return _check_steps(shape, steps, src)


@lru_cache(maxsize=4096)
def _check_steps(shape, steps, src):
    layout = _canonical(src)
    for step in steps:
        layout = layout_after(layout, step)
        layout.local_shape(shape, op=OP)
    return steps


def _piece(x, d, p, g, take):
    """Piece g of p along dim d of x (`take(x, index)` does the indexing)."""
    k = x.shape[d] // p
    index = (slice(None),) * d + (slice(g * k, (g + 1) * k),)
    return take(x, index)


def apply_redistribution(local, shape, steps, src: TensorLayout, rank):
    """Run `steps` on this process's block `local` (its block of the global `shape` under `src`)
    with the collective primitives of ops/prims/comm.py over the real MPI world; returns its block
    of the destination layout. Every rank of the device matrix (= the world) must call it with the
    same plan. A Tensor `local` gives a Tensor (the steps are minispore ops, so a gradient flows
    back through them: the collectives' backward rules run the reverse redistribution); an
    ndarray gives an ndarray. `rank` is this process's world rank."""
    shape = _check_shape(shape)
    _check_layout("src", src)
    is_tensor = isinstance(local, Tensor)
    x = local if is_tensor else Tensor(np.asarray(local))
    expected = src.local_shape(shape, op=OP)
    if tuple(x.shape) != expected:
        raise OpValueError(OP, f"a local block of shape {expected} (global {shape} under {src})",
                           f"shape {tuple(x.shape)}")
    dm = src.device_matrix
    if not isinstance(rank, numbers.Integral) or not 0 <= rank < src.device_num:
        raise OpValueError(OP, f"a rank in [0, {src.device_num}) for the device matrix {dm}", repr(rank))
    for step in _checked(shape, steps, src):
        if step.communicates:
            if pg.world().rank != rank:
                raise OpValueError(OP, f"'rank' to be this process's world rank {pg.world().rank}", repr(rank))
            group = group_name(dm, step.axes, rank)
            p = len(groups_for(dm, step.axes, rank))
        g = index_in_group(dm, step.axes, rank)
        if step.kind == "all_reduce":
            if x.ndim == 0:        # comm.py's buffers are >= 1-d (np.ascontiguousarray): send a 0-d value as (1,)
                x = F.reshape(comm.all_reduce(F.reshape(x, (1,)), op="sum", group=group), ())
            else:
                x = comm.all_reduce(x, op="sum", group=group)
        elif step.kind == "all_gather":           # joins along axis 0: bring the dim there and back
            x = F.moveaxis(comm.all_gather(F.moveaxis(x, step.dim, 0), group=group), 0, step.dim)
        elif step.kind == "reduce_scatter":
            x = F.moveaxis(comm.reduce_scatter(F.moveaxis(x, step.dim, 0), op="sum", group=group), 0, step.dim)
        elif step.kind == "all_to_all":
            x = comm.all_to_all(x, split_count=p, split_dim=step.dim2, concat_dim=step.dim, group=group)
        elif step.kind == "slice":
            x = _piece(x, step.dim, len(groups_for(dm, step.axes, rank)), g, lambda t, i: t[i])
        else:                                      # to_partial
            x = x if g == 0 else F.zeros_like(x)
    return x if is_tensor else x.asnumpy()


def _sum(arrays):
    """The elementwise sum of `arrays`, added in group order."""
    total = arrays[0].copy()
    for a in arrays[1:]:
        total += a
    return total


def simulate_redistribution(blocks_by_rank, shape, steps, src: TensorLayout) -> dict:
    """Run `steps` for every rank of the device matrix at once in NumPy: `blocks_by_rank` maps
    each rank (a list indexed by rank works too) to its block under `src`; returns {rank: block of
    the destination}. The same semantics as `apply_redistribution`, with each collective written
    out over its group (sum, concatenation, piece exchange) - for tests and for learning."""
    shape = _check_shape(shape)
    _check_layout("src", src)
    n = src.device_num
    if not isinstance(blocks_by_rank, dict):
        blocks_by_rank = dict(enumerate(blocks_by_rank))
    if sorted(blocks_by_rank) != list(range(n)):
        raise OpValueError(OP, f"one block for each of the {n} ranks of the device matrix {src.device_matrix}",
                           f"ranks {sorted(blocks_by_rank)}")
    expected = src.local_shape(shape, op=OP)
    blocks = {}
    for r, b in blocks_by_rank.items():
        b = np.asarray(b)
        if b.shape != expected:
            raise OpValueError(OP, f"blocks of shape {expected} (global {shape} under {src})",
                               f"shape {b.shape} from rank {r}")
        blocks[r] = b
    dm = src.device_matrix
    for step in _checked(shape, steps, src):
        new = {}
        for r in range(n):
            group = _group(dm, step.axes, r)
            g, p = group.index(r), len(group)
            mine = blocks[r]
            if step.kind == "all_reduce":
                new[r] = _sum([blocks[q] for q in group])
            elif step.kind == "all_gather":
                new[r] = np.concatenate([blocks[q] for q in group], axis=step.dim)
            elif step.kind == "reduce_scatter":
                new[r] = _sum([_piece(blocks[q], step.dim, p, g, np.ndarray.__getitem__) for q in group])
            elif step.kind == "all_to_all":           # from every q: q's piece g of dim2, joined along dim
                new[r] = np.concatenate([_piece(blocks[q], step.dim2, p, g, np.ndarray.__getitem__)
                                         for q in group], axis=step.dim)
            elif step.kind == "slice":
                new[r] = _piece(mine, step.dim, p, g, np.ndarray.__getitem__).copy()
            else:                                      # to_partial
                new[r] = mine.copy() if g == 0 else np.zeros_like(mine)
        blocks = new
    return blocks


__all__ = ["RedistStep", "plan_redistribution", "plan_bytes", "layout_after", "groups_for", "index_in_group",
           "group_name", "apply_redistribution", "simulate_redistribution"]
