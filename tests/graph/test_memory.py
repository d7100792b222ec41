"""SOMAS-style memory planning: lifetimes, heuristics, the verifier, and the numbers a plan reports.

Oracles: hand-computed intervals on hand-built graphs, an independent pairwise overlap check (not
the planner's own `check_plan`), the executor's live trace, and a brute-force optimum on small
random interval sets (first fit over every placement order finds the optimum: compact any optimal
packing downwards in offset order and each buffer lands at its first-fit position or lower).
"""
import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import minispore as ms
from minispore.common import dtype as mstype
from minispore.common.errors import OpTypeError, OpValueError
from minispore.graph import GraphBuilder, Value
from minispore.graph import memory
from minispore.graph.memory import Buffer, PlanError
from minispore.ops.primitive import AbstractTensor, get_primitive

F32 = mstype.float32
add, mul, relu, reshape, transpose, exp = (get_primitive(n) for n in
                                           ("add", "mul", "relu", "reshape", "transpose", "exp"))


def A(*shape, dtype=F32):
    return AbstractTensor(shape, dtype)


def node(b, prim, inputs, **attrs):
    args = [x.aval if isinstance(x, Value) else x for x in inputs]
    n = b.add_node(prim, inputs, attrs, prim.infer(*args, **attrs))
    return n.outputs if n.multi else n.outputs[0]


def buf(vid, size, start, end):
    return Buffer(vid, size, size, start, end)


def pairwise_ok(buffers, offsets):
    """Independent oracle: no two buffers overlap in time and address (plain O(n^2) loops)."""
    owned = [b for b in buffers if b.alias_of is None and b.size_bytes > 0]
    for a, c in itertools.combinations(owned, 2):
        if a.start <= c.end and c.start <= a.end:
            oa, oc = offsets[a.value_id], offsets[c.value_id]
            if oa < oc + c.size_bytes and oc < oa + a.size_bytes:
                return False
    return True


def lower_bound(buffers):
    steps = max(b.end for b in buffers) + 1
    return max(sum(b.size_bytes for b in buffers if b.start <= t <= b.end) for t in range(steps))


def brute_force_optimum(buffers):
    best = None
    for order in itertools.permutations(buffers):
        placed = []
        for b in order:
            off = 0
            moved = True
            while moved:                       # lowest offset clear of every placed conflicting buffer
                moved = False
                for c, oc in placed:
                    if c.start <= b.end and b.start <= c.end and off < oc + c.size_bytes and oc < off + b.size_bytes:
                        off = oc + c.size_bytes
                        moved = True
            placed.append((b, off))
        peak = max(o + b.size_bytes for b, o in placed)
        best = peak if best is None else min(best, peak)
    return best


# -- the planner on interval sets ------------------------------------------------------------------------
def test_xla_heap_simulator_example_lower_bound_and_plan():
    # XLA's NoFragmentationStatsHeap test: A10 (kept), B20 (freed), C30 (freed), D5 -> max live A + C = 40
    bufs = [buf("A", 10, 0, 3), buf("B", 20, 1, 1), buf("C", 30, 2, 2), buf("D", 5, 3, 3)]
    p = memory.plan_buffers(bufs)
    assert p.lower_bound_bytes == 40
    assert p.peak_bytes == 40
    assert p.no_reuse_bytes == 65
    assert p.fragmentation == 0.0
    assert pairwise_ok(bufs, p.offsets)
    assert list(p.live_bytes_per_step()) == [10, 30, 40, 15]


def test_portfolio_keeps_the_best_heuristic_and_reports_all():
    rng = np.random.default_rng(3)
    bufs = []
    for i in range(60):
        s = int(rng.integers(0, 40))
        bufs.append(buf(i, int(rng.integers(1, 50)) * 64, s, s + int(rng.integers(0, 10))))
    p = memory.plan_buffers(bufs)
    assert set(p.results) == set(memory.HEURISTICS)
    assert p.peak_bytes == min(p.results.values()) == p.results[p.heuristic]
    for h in memory.HEURISTICS:
        single = memory.plan_buffers(bufs, heuristics=[h])
        assert single.peak_bytes == p.results[h] >= p.peak_bytes
        assert pairwise_ok(bufs, single.offsets)


def test_check_plan_rejects_overlapping_buffers():
    bufs = [buf("a", 64, 0, 2), buf("b", 64, 2, 3), buf("c", 64, 3, 4)]
    memory.check_offsets(bufs, {"a": 0, "b": 64, "c": 0})          # a and c never live together
    with pytest.raises(PlanError, match="'?b'?.*overlap|overlap"):
        memory.check_offsets(bufs, {"a": 0, "b": 32, "c": 128})    # a, b share step 2 and bytes 32..63


intervals = st.lists(st.tuples(st.integers(1, 40), st.integers(0, 30), st.integers(0, 8)), min_size=1, max_size=40)


@settings(max_examples=60, deadline=None)
@given(intervals)
def test_every_heuristic_gives_a_valid_plan_above_the_lower_bound(spec):
    bufs = [buf(i, size * 16, s, s + d) for i, (size, s, d) in enumerate(spec)]
    lb = lower_bound(bufs)
    for h in memory.HEURISTICS:
        offs = memory.place(h, [b.size_bytes for b in bufs], [b.start for b in bufs], [b.end for b in bufs])
        offsets = {b.value_id: int(o) for b, o in zip(bufs, offs)}
        assert pairwise_ok(bufs, offsets), h
        assert max(offsets[b.value_id] + b.size_bytes for b in bufs) >= lb
    p = memory.plan_buffers(bufs)
    assert p.lower_bound_bytes == lb
    assert p.peak_bytes >= lb
    assert p.no_reuse_bytes == sum(b.size_bytes for b in bufs)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 6), st.integers(0, 5), st.integers(0, 3)), min_size=1, max_size=6))
def test_plans_are_never_better_than_the_brute_force_optimum(spec):
    bufs = [buf(i, size, s, s + d) for i, (size, s, d) in enumerate(spec)]
    opt = brute_force_optimum(bufs)
    p = memory.plan_buffers(bufs)
    assert lower_bound(bufs) <= opt <= p.peak_bytes


def test_optimality_gap_on_a_fixed_suite_is_small():
    rng = np.random.default_rng(0)
    gaps = []
    for _ in range(15):
        bufs = []
        for i in range(6):
            s = int(rng.integers(0, 6))
            bufs.append(buf(i, int(rng.integers(1, 9)), s, s + int(rng.integers(0, 3))))
        gaps.append(memory.plan_buffers(bufs).peak_bytes / brute_force_optimum(bufs) - 1)
    assert max(gaps) <= 0.25 and np.mean(gaps) <= 0.05, gaps


def test_pure_chain_plans_at_the_lower_bound():
    # x -> f1 -> f2 -> ... : each value lives for two steps; two buffers ping-pong
    b = GraphBuilder("chain")
    v = b.param(A(64, 64))
    for i in range(12):
        v = node(b, exp if i % 2 else relu, [v])
    g = b.finish([v])
    p = memory.plan(g)
    assert p.peak_bytes == p.lower_bound_bytes == 2 * 64 * 64 * 4
    assert p.no_reuse_bytes == 12 * 64 * 64 * 4


# -- lifetimes on graphs ----------------------------------------------------------------------------
def test_lifetimes_intervals_views_outputs_and_externals():
    b = GraphBuilder("g")
    x = b.param(A(4, 8))
    a = node(b, exp, [x])                                 # 0: owned, read by the view's users
    r = node(b, reshape, [a], shape=(8, 4))               # 1: view of a
    t = node(b, transpose, [r], perm=(1, 0))              # 2: view of a (strided)
    c = node(b, reshape, [t], shape=(32,))                # 3: NumPy must copy: owned
    u = node(b, relu, [x])                                # 4: never read: lives [4, 4]
    xv = node(b, transpose, [x], perm=(1, 0))             # 5: view of the param: external
    d = node(b, add, [c, 1.0])                            # 6
    e = node(b, mul, [t, 2.0])                            # 7: last read of a, through its view t
    g = b.finish([d, xv, e])
    bufs = {bb.value_id: bb for bb in memory.lifetimes(g, alignment=1)}
    assert (bufs[a.id].start, bufs[a.id].end, bufs[a.id].kind) == (0, 7, "node")
    assert bufs[r.id].alias_of == a.id and bufs[t.id].alias_of == a.id and bufs[t.id].kind == "view"
    assert bufs[c.id].alias_of is None and (bufs[c.id].start, bufs[c.id].end) == (3, 6)
    assert (bufs[u.id].start, bufs[u.id].end) == (4, 4)
    assert bufs[xv.id].kind == "external_view" and bufs[xv.id].alias_of is None
    assert (bufs[d.id].end, bufs[d.id].kind) == (7, "output") and bufs[e.id].end == 7
    assert x.id not in bufs                               # graph inputs are the caller's
    assert bufs[a.id].nbytes == bufs[a.id].size_bytes == 4 * 8 * 4
    p = memory.plan(g)
    assert p.offset(t) == p.offset(a) and p.nbytes(t) == 128


def test_alignment_rounds_sizes_up():
    b = GraphBuilder("g")
    x = b.param(A(3))
    g = b.finish([node(b, exp, [x])])
    (bb,) = memory.lifetimes(g, alignment=64)
    assert bb.nbytes == 12 and bb.size_bytes == 64


def test_hold_until_and_workspaces_extend_conflicts():
    b = GraphBuilder("g")
    x = b.param(A(16))
    a = node(b, exp, [x])
    c = node(b, relu, [a])
    d = node(b, exp, [c])
    g = b.finish([node(b, relu, [d])])
    base = {bb.value_id: bb for bb in memory.lifetimes(g)}
    assert base[a.id].end == 1
    held = {bb.value_id: bb for bb in memory.lifetimes(g, hold_until={a.id: 3}, workspaces={2: 100})}
    assert held[a.id].end == 3
    ws = held[("workspace", 2)]
    assert (ws.start, ws.end, ws.size_bytes, ws.kind) == (2, 2, 128, "workspace")
    p = memory.plan(g, hold_until={a.id: 3}, workspaces={2: 100})
    assert pairwise_ok(p.buffers, p.offsets) and p.peak_bytes >= 2 * 64 + 128


def test_schedule_changes_the_lifetimes():
    b = GraphBuilder("g")
    x = b.param(A(32))
    a = node(b, exp, [x])            # node 0
    c = node(b, relu, [x])           # node 1
    d = node(b, add, [a, c])         # node 2
    g = b.finish([d])
    default = {bb.value_id: bb for bb in memory.lifetimes(g)}
    swapped = {bb.value_id: bb for bb in memory.lifetimes(g, schedule=[1, 0, 2])}
    assert (default[a.id].start, swapped[a.id].start) == (0, 1)
    assert (default[c.id].start, swapped[c.id].start) == (1, 0)
    with pytest.raises(OpValueError, match="memory.lifetimes"):
        memory.lifetimes(g, schedule=[0, 0, 2])


def test_inplace_ops_reuse_their_dead_input():
    from minispore.ops.primitive import Primitive
    name = "_test_memory_inplace_scale"                # not registered: the op table stays as it is
    prim = Primitive(name, lambda x: x, lambda a: np.multiply(a, 2.0, out=a), inplace={0: 0})
    b = GraphBuilder("g")
    x = b.param(A(8))
    a = node(b, exp, [x])
    s = node(b, prim, [a])                 # a dead after this: s takes a's bytes
    k = node(b, exp, [x])
    s2 = node(b, prim, [k])                # k is a graph output: s2 needs its own buffer
    g = b.finish([node(b, add, [s, s2]), k])
    bufs = {bb.value_id: bb for bb in memory.lifetimes(g)}
    assert bufs[s.id].kind == "inplace" and bufs[s.id].alias_of == a.id and bufs[a.id].end == 4
    assert bufs[s2.id].alias_of is None
    ex = ms.graph.O0Executor(g, arena=True)
    xs = np.linspace(-1, 1, 8).astype(np.float32)
    out, _ = ex.run(xs)
    np.testing.assert_allclose(out, 4 * np.exp(xs), rtol=1e-6)
    assert ex.arena.high_water == ex.memory_plan.peak_bytes


def test_bad_input_names_the_function():
    with pytest.raises(OpValueError, match="memory.plan"):
        memory.plan_buffers([buf(0, 8, 0, 0)], heuristics=["best_guess"])
    with pytest.raises(OpTypeError, match="memory.plan"):
        memory.plan_buffers([buf(0, 8, 0, 0)], heuristics="greedy_by_size")
    with pytest.raises(OpValueError, match="memory.plan"):
        memory.plan_buffers([buf(0, 8, 3, 1)])
    with pytest.raises(OpValueError, match="Arena"):
        memory.Arena(-1)
    with pytest.raises(OpValueError, match="Arena.view"):
        memory.Arena(64).view(32, (16,), np.float32)
    with pytest.raises(OpValueError, match="set_context"):
        ms.set_context(memory_optimize_level="O2")
