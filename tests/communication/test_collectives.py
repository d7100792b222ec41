"""The collective primitives (ops/prims/comm.py), their class-style forms (ops.AllReduce ...) and
communication.comm_func.

* Real MPI worlds of 2 and 4 ranks (mpiexec through mpi_harness): collectives_worker.py checks every
  collective's forward and backward against NumPy on the gathered data, in PyNative and under jit
  (ast O0, trace O1, ast O2, jit of grad), async handles, a 2-rank subgroup, send/recv and the
  traffic counters against the cost facts.
* A world of one, in this process: every collective is the identity (a copy), inputs are checked
  before anything communicates (Op*Errors naming the op), and under jit the collectives are graph
  nodes that no pass drops, folds or reorders.
"""
import pathlib
import re

import numpy as np
import pytest

import minispore as ms
from minispore import communication as comm
from minispore import ops
from minispore.common.errors import OpIndexError, OpTypeError, OpValueError
from minispore.communication import comm_func as cf
from minispore.graph.explain import _capture
from minispore.graph.streams import schedule_streams
from minispore.ops.primitive import AbstractTensor, PRIMITIVES, get_primitive
from minispore.ops.prims import comm as prims

from mpi_harness import run_mpi

WORKER = pathlib.Path(__file__).with_name("collectives_worker.py")
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "all_to_all_v", "broadcast", "send",
               "receive")


@pytest.fixture(autouse=True)
def world_of_one():
    comm.release()
    comm.init()
    prims.reset_comm_bytes()
    yield
    comm.release()


def arr(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# ---------------------------------------------------------------------------------------------
# real MPI worlds
@pytest.mark.parametrize("n", [2, 4])
def test_every_collective_forward_and_backward_on_n_ranks(n):
    result = run_mpi(str(WORKER), n, timeout=180, check=True)
    ok = sorted(tuple(int(v) for v in m.groups()) for m in re.finditer(r"OK (\d) (\d+)", result.stdout))
    assert [r for r, _ in ok] == list(range(n)), result.stdout + result.stderr
    assert all(c > 90 for _, c in ok), ok               # every rank ran all its checks


# ---------------------------------------------------------------------------------------------
# a world of one: identities (fresh memory, never the input's buffer)
def test_a_world_of_one_makes_every_collective_the_identity():
    x = ms.Tensor(arr(4, 3))
    results = [ops.AllReduce()(x), ops.AllReduce("max")(x), ops.AllGather()(x), ops.ReduceScatter()(x),
               ops.AlltoAll(1, 0, 1)(x), ops.Broadcast(0)((x,))[0], cf.all_reduce(x)[0],
               cf.all_gather_into_tensor(x)[0], cf.reduce_scatter_tensor(x)[0], cf.broadcast(x, 0),
               cf.all_to_all_single_with_output_shape((4, 3), x)[0]]
    for y in results:
        np.testing.assert_array_equal(y.asnumpy(), x.asnumpy())
        assert not np.shares_memory(y.asnumpy(), x.asnumpy())


def test_gradients_in_a_world_of_one_are_those_of_the_identity():
    x = ms.Tensor(arr(2, 3))
    w = ms.Tensor(arr(2, 3, seed=1))
    for op in (ops.AllReduce(), ops.AllReduce("max"), lambda t: cf.all_reduce(t, op="MAX")[0], ops.AllReduce("min"), ops.AllReduce("prod"),
               ops.AllGather(), ops.ReduceScatter(), ops.AlltoAll(1, 1, 0), lambda t: ops.Broadcast(0)((t,))[0]):
        g = ms.grad(lambda t, op=op: (op(t) * w).sum())(x)
        np.testing.assert_allclose(g.asnumpy(), w.asnumpy(), rtol=1e-6)


def test_async_handles_in_a_world_of_one():
    x = ms.Tensor(arr(4, 2))
    out, handle = cf.all_reduce(x, async_op=True)
    handle.wait()
    assert handle.is_completed()
    np.testing.assert_array_equal(out.asnumpy(), x.asnumpy())
    out = ms.Tensor(np.zeros((4, 2), np.float32))
    h = cf.all_gather_into_tensor(out, x, async_op=True)
    h.wait()
    np.testing.assert_array_equal(out.asnumpy(), x.asnumpy())


def test_half_precision_and_integer_reductions_keep_their_dtype():
    for dt in (ms.float16, ms.bfloat16, ms.int32):
        x = ms.Tensor(np.arange(6).reshape(2, 3), dt)
        y = ops.AllReduce()(x)
        assert y.dtype is dt
        np.testing.assert_array_equal(y.asnumpy().astype(np.float64), np.arange(6).reshape(2, 3))
    b = ms.Tensor(np.array([True, False]))
    np.testing.assert_array_equal(ops.AllGather()(b).asnumpy(), [True, False])   # moved as bytes


# ---------------------------------------------------------------------------------------------
# bad input: Op*Errors that name the op, raised before anything communicates
def _raises(cls, op, fn):
    with pytest.raises(cls) as e:
        fn()
    assert f"For '{op}'" in str(e.value), str(e.value)
    return e.value


def test_bad_inputs_are_rejected_with_errors_naming_the_op():
    x = ms.Tensor(arr(4, 3))
    _raises(OpValueError, "AllReduce", lambda: ops.AllReduce(group="no_such_group"))
    _raises(OpValueError, "AllReduce", lambda: cf.all_reduce(x, group="no_such_group"))
    _raises(OpValueError, "AllReduce", lambda: ops.AllReduce("mean"))
    _raises(OpValueError, "ReduceScatter", lambda: cf.reduce_scatter_tensor(x, op="average"))
    _raises(OpTypeError, "AllReduce", lambda: ops.AllReduce()(ms.Tensor(np.array([True]))))
    _raises(OpTypeError, "AllReduce", lambda: ops.AllReduce()(np.ones(3)))
    _raises(OpValueError, "AllGather", lambda: ops.AllGather()(ms.Tensor(np.float32(1.0))))
    _raises(OpValueError, "AlltoAll", lambda: ops.AlltoAll(2, 0, 1))
    _raises(OpIndexError, "AlltoAll", lambda: prims.all_to_all(x, split_count=1, split_dim=5, concat_dim=0))
    _raises(OpValueError, "Broadcast", lambda: ops.Broadcast(3))
    _raises(OpValueError, "Send", lambda: ops.Send(0, 0)(x))           # to itself: nobody else exists
    _raises(OpValueError, "Receive", lambda: cf.recv(x, src=0))
    _raises(OpTypeError, "all_reduce", lambda: cf.all_reduce(x, async_op="yes"))
    _raises(OpTypeError, "all_reduce", lambda: cf.all_reduce(x.asnumpy()))
    # the in-place form checks the output buffer's dtype and shape
    _raises(OpValueError, "all_gather_into_tensor",
            lambda: cf.all_gather_into_tensor(ms.Tensor(np.zeros((4, 3), np.float64)), x))
    _raises(OpValueError, "all_gather_into_tensor",
            lambda: cf.all_gather_into_tensor(ms.Tensor(np.zeros((8, 3), np.float32)), x))
    _raises(OpValueError, "all_to_all_single_with_output_shape",
            lambda: cf.all_to_all_single_with_output_shape((4, 3), x, input_split_sizes=(3,), output_split_sizes=(4,)))
    _raises(OpValueError, "P2POp", lambda: cf.P2POp("send", x, 0))
    _raises(OpTypeError, "batch_isend_irecv", lambda: cf.batch_isend_irecv([]))
    assert prims.comm_bytes() == {}                     # nothing reached MPI


def test_reduce_scatter_needs_a_first_dimension_divisible_by_the_group_size():
    # a world of one divides everything; the rule itself, on a two-rank group's size:
    pg = prims.pg
    pg._groups["two"] = pg.Group("two", (0, 1), None, 0)        # a fake group of 2 (no communicator)
    try:
        e = _raises(OpValueError, "ReduceScatter", lambda: prims.reduce_scatter(ms.Tensor(arr(3, 2)), group="two"))
        assert "divisible by the group size 2" in str(e)
        assert prims.reduce_scatter.infer(AbstractTensor((4, 2), ms.float32), group="two").shape == (2, 2)
        assert prims.all_gather.infer(AbstractTensor((3, 2), ms.float32), group="two").shape == (6, 2)
        e = _raises(OpValueError, "AlltoAll", lambda: prims.all_to_all(ms.Tensor(arr(3, 2)), split_count=2,
                                                                      split_dim=0, concat_dim=1, group="two"))
        assert "divisible by split_count 2" in str(e)
    finally:
        del pg._groups["two"]


def test_a_process_outside_the_group_is_told_so():
    pg = prims.pg
    pg._groups["others"] = pg.Group("others", (1, 2), None, None)   # a group this process is not in
    try:
        e = _raises(OpValueError, "AllGather", lambda: ops.AllGather(group="others"))
        assert "belongs to" in str(e)
    finally:
        del pg._groups["others"]


# ---------------------------------------------------------------------------------------------
# graphs: collectives are nodes, shown by the IR dump, kept and ordered by every pass
def test_every_collective_primitive_has_the_collective_fact_and_a_cost():
    assert {n for n, p in PRIMITIVES.items() if p.collective} == set(COLLECTIVES)
    for name in COLLECTIVES:
        p = get_primitive(name)
        assert p.cost is not None and not p.random and p.fusion is None


def test_collectives_are_graph_nodes_in_the_ir_dump():
    def step(x):
        y = ops.AllReduce()(x * 2.0)
        z = ops.AllGather()(y)
        return ops.ReduceScatter()(z) + ops.Broadcast(0)((x,))[0]

    x = ms.Tensor(arr(2, 3))
    for mode in ("ast", "bytecode", "trace"):
        text = str(ms.graph.dump(ms.jit(step, capture_mode=mode), x))
        for name in ("all_reduce", "all_gather", "reduce_scatter", "broadcast"):
            assert f"= {name}(" in text, (mode, text)
        assert "op='sum'" in text and "group='hccl_world_group'" in text
        order = [text.index(f"= {n}(") for n in ("all_reduce", "all_gather", "reduce_scatter")]
        assert order == sorted(order)


def _reduce_and_ignore(x):
    ops.AllReduce()(x)                     # every rank must still take part: not dead code
    return x + 0.0


def _step_with_unused_collectives(x):
    _reduce_and_ignore(x)                  # a Call node, and below an If on a constant condition:
    if ops.ones((), ms.float32) > 0:       # the ast mode's control-flow inlining (and its dead-code
        y = x * 2.0                        # elimination) runs on this graph
    else:
        y = x
    ops.AllGather()(x + 1.0)
    return y + 1.0


@pytest.mark.parametrize("level", ["O0", "O1", "O2"])
def test_a_collective_whose_result_is_unused_still_runs_under_every_jit_level(level):
    step = _step_with_unused_collectives

    f = ms.jit(step, jit_level=level)
    x = ms.Tensor(arr(2, 3))
    for _ in range(3):
        np.testing.assert_allclose(f(x).asnumpy(), x.asnumpy() * 2 + 1, rtol=1e-6)
    counted = prims.comm_bytes()
    assert counted["all_reduce"]["calls"] == 3 and counted["all_gather"]["calls"] == 3, counted


def test_o1_fusion_does_not_cross_a_collective_and_constant_folding_skips_it():
    def step(x):
        y = ops.AllReduce()(x * 3.0 + 1.0)              # elementwise chain before ...
        return ops.exp(y) * 0.5 + ops.AllReduce()(ops.ones((2, 3), ms.float32))  # ... after; a constant input

    x = ms.Tensor(arr(2, 3))
    f = ms.jit(step, jit_level="O1")
    want = np.exp(x.asnumpy() * 3 + 1) * 0.5 + 1
    for _ in range(2):
        np.testing.assert_allclose(f(x).asnumpy(), want, rtol=1e-5)
    assert prims.comm_bytes()["all_reduce"]["calls"] == 4      # both, on both calls (none folded)


def test_independent_collectives_keep_program_order_across_streams():
    def step(a, b):
        return ops.AllReduce()(a), ops.AllReduce()(b), ops.AllGather()(a)

    g = _capture(step, (ms.Tensor(arr(2, 3)), ms.Tensor(arr(2, 3))), {}).graphs[0]
    sched = schedule_streams(g, 2)
    idx = [i for i, n in enumerate(g.nodes) if n.is_primitive and n.op.collective]
    assert len(idx) == 3
    for a, b in zip(idx, idx[1:]):
        assert a in sched.deps[b]                                   # chained, whatever the stream
    pos = {n: k for k, n in enumerate(sched.order)}
    assert [pos[i] for i in idx] == sorted(pos[i] for i in idx)


# ---------------------------------------------------------------------------------------------
# costs: ring bytes
@pytest.mark.parametrize("p", [2, 3, 4, 7])
@pytest.mark.parametrize("nelem", [1, 6, 13, 64])
def test_ring_all_reduce_bytes_sum_to_2_p_minus_1_n_over_the_ranks(p, nelem):
    per_rank = [prims.ring_bytes_all_reduce(nelem, 4, p, r) for r in range(p)]
    assert sum(per_rank) == 2 * (p - 1) * nelem * 4
    if nelem % p == 0:
        assert set(per_rank) == {2 * (p - 1) * nelem * 4 // p}      # 2(p-1)/p * n on every rank


def test_the_cost_facts_of_a_world_of_one_move_no_bytes_between_ranks():
    a = AbstractTensor((4, 3), ms.float32)
    c = get_primitive("all_reduce").cost([a], [a], {"op": "sum", "group": "hccl_world_group"})
    assert (c["comm_bytes_total"], c["comm_bytes"], c["bytes_read"], c["bytes_written"]) == (0, 0, 48, 48)


def test_in_place_forms_and_async_calls_inside_jit():
    x = ms.Tensor(arr(4, 2))
    out = ms.Tensor(np.zeros((4, 2), np.float32))
    assert cf.all_to_all_single(out, x) is None
    np.testing.assert_array_equal(out.asnumpy(), x.asnumpy())
    y, h = cf.all_to_all_single((4, 2), x)
    assert h is None
    np.testing.assert_array_equal(y.asnumpy(), x.asnumpy())

    def step(t):
        total, handle = cf.all_reduce(t * 2.0, async_op=True)   # in a graph: the synchronous node
        handle.wait()
        return total + 1.0

    f = ms.jit(step)
    np.testing.assert_allclose(f(x).asnumpy(), x.asnumpy() * 2 + 1, rtol=1e-6)
    assert "= all_reduce(" in str(ms.graph.dump(f, x))
