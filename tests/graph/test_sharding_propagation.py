"""The semi-auto parallel pass planned for hypothetical ranks, in one process (no MPI):
`plan_semi_auto(graph, device_num, rank)` (graph/parallel/partition.py).

For six small graphs the inserted communication - (kind, bytes this rank sends) in program order -
equals a table derived by hand below; the bytes are the ring model of redistribution.py /
comm.py (n = bytes of this rank's block before the step, p = group size):
all_reduce 2 (p-1)/p n, all_gather (p-1) n, reduce_scatter (p-1)/p n. Graph outputs come back whole.
Also: strategy -> layout conversion (MindSpore's device matrix with the repeat axis leading),
parameter shapes, backward propagation to parameters under search_mode="sharding_propagation",
the printer's layout annotations, the strategy file and bad strategies.
"""
import json

import numpy as np
import pytest

import minispore as ms
from minispore import ops
from minispore.common.errors import OpValueError
from minispore.graph.parallel.partition import plan_semi_auto, strategy_json
from minispore.graph.parallel.strategies import StageDevices, strategy_layouts
from minispore.graph.printer import format_graph
from minispore.ops.sharding import TensorLayout

F32 = np.float32


def graph_of(fn, *arrays):
    return ms.jit(fn, capture_mode="trace").compile(*[ms.Tensor(a) for a in arrays]).graph


def check_local_avals(graph):
    """Every non-collective node's output avals are what its inference rule gives for the local
    inputs (the collectives' groups exist only in a real MPI world; graph/verify.py checks them
    there, when jit partitions a graph)."""
    for node in graph.nodes:
        if node.is_primitive and not node.op.collective:
            ins = [x.aval if hasattr(x, "aval") else x for x in node.inputs]
            out = node.op.infer(*ins, **node.attrs)
            out = out if isinstance(out, tuple) else (out,)
            assert [tuple(o.shape) for o in out] == [tuple(o.aval.shape) for o in node.outputs], node


def table(graph, n, rank=0, **kw):
    plan = plan_semi_auto(graph, n, rank, **kw)
    check_local_avals(plan.graph)
    return plan, plan.comm_table()


W = ms.Parameter(ms.Tensor(np.ones((4, 8), F32)), name="w")
W2 = ms.Parameter(ms.Tensor(np.ones((8, 4), F32)), name="w2")
TABLE = ms.Parameter(ms.Tensor(np.arange(32, dtype=F32).reshape(8, 4)), name="table")


def test_data_parallel_matmul():
    mm = ops.MatMul().shard(((2, 1), (1, 1)))
    g = graph_of(lambda x: mm(x, W), np.ones((8, 4), F32))
    plan, comms = table(g, 2, rank=1)
    # x is sliced locally (full_batch: no communication), W stays whole, the (4, 8) f32 output
    # block (128 B) is gathered back: (2 - 1) * 128
    assert comms == [("all_gather", 128)]
    assert plan.parameters["w"][2].is_replicated()
    names = [n.name for n in plan.graph.nodes]
    assert names == ["shard_slice", "matmul", "all_gather"]
    # on 4 ranks the same strategy repeats over the 2 leftover devices: block (4, 8) gathered
    # over the 2 ranks of the data axis only
    _, comms4 = table(g, 4, rank=3)
    assert comms4 == [("all_gather", 128)]


def test_megatron_column_then_row():
    col = ops.MatMul().shard(((1, 1), (1, 2)))
    row = ops.MatMul().shard(((1, 2), (2, 1)))
    relu = ops.ReLU()
    g = graph_of(lambda x: row(relu(col(x, W)), W2), np.ones((4, 4), F32))
    plan, comms = table(g, 2)
    # exactly one all_reduce: the (4, 4) f32 partial output, 64 B, 2 (2-1)/2 * 64
    assert comms == [("all_reduce", 64)]
    assert plan.parameters["w"][2] == TensorLayout((2,), (-1, 0))
    assert plan.parameters["w2"][2] == TensorLayout((2,), (0, -1))
    caps = {v.name: tuple(v.aval.shape) for v, _ in plan.graph.captures}
    assert caps == {"w": (4, 4), "w2": (4, 4)}
    # 4 ranks, the same strategy: it repeats over the 2 leftover devices, so the all_reduce runs
    # over pairs (64 B again) and the shards are halves
    plan4, comms4 = table(g, 4, rank=2)
    assert comms4 == [("all_reduce", 64)]
    assert {v.name: tuple(v.aval.shape) for v, _ in plan4.graph.captures} == {"w": (4, 4), "w2": (4, 4)}
    # a 4-way strategy: quarters, one all_reduce of the same 64 B over 4 ranks: 2 * 3/4 * 64 = 96
    col4 = ops.MatMul().shard(((1, 1), (1, 4)))
    row4 = ops.MatMul().shard(((1, 4), (4, 1)))
    g4 = graph_of(lambda x: row4(relu(col4(x, W)), W2), np.ones((4, 4), F32))
    plan4, comms4 = table(g4, 4, rank=2)
    assert comms4 == [("all_reduce", 96)]
    assert {v.name: tuple(v.aval.shape) for v, _ in plan4.graph.captures} == {"w": (4, 2), "w2": (2, 4)}


def test_reduce_over_split_dim():
    relu = ops.ReLU().shard(((2, 1),))
    g = graph_of(lambda x: ops.sum(relu(x), 0), np.ones((8, 6), F32))
    plan, comms = table(g, 2)
    # the sum over the split rows is a partial (6,) f32 = 24 B: all_reduce 2 * 1/2 * 24
    assert comms == [("all_reduce", 24)]
    # the mean scales each rank's local mean by 1/2 before the same all_reduce
    g2 = graph_of(lambda x: ops.mean(relu(x), 0), np.ones((8, 6), F32))
    plan2, comms2 = table(g2, 2)
    assert comms2 == [("all_reduce", 24)]
    assert [n.name for n in plan2.graph.nodes][-2:] == ["mul", "all_reduce"]


def test_reshape_of_split_dims_needs_no_communication():
    relu = ops.ReLU().shard(((2, 1),))
    g = graph_of(lambda x: ops.reshape(relu(x), (2, 4, 6)), np.ones((8, 6), F32))
    plan, comms = table(g, 2)
    # the 2-way row split of (8, 6) lands on the new leading dim of (2, 4, 6): the reshape runs
    # locally ((4, 6) -> (1, 4, 6)); only the whole output is gathered: (1, 4, 6) f32 = 96 B
    assert comms == [("all_gather", 96)]
    reshape = [n for n in plan.graph.nodes if n.name == "reshape"][0]
    assert reshape.attrs["shape"] == (1, 4, 6)


def test_softmax_over_split_axis_forces_all_gather():
    relu = ops.ReLU().shard(((1, 2),))
    g = graph_of(lambda x: ops.softmax(relu(x), -1), np.ones((4, 8), F32))
    plan, comms = table(g, 2)
    # softmax needs whole rows: the (4, 4) f32 block (64 B) is gathered once, (2-1) * 64; the
    # output is then already whole
    assert comms == [("all_gather", 64)]
    names = [n.name for n in plan.graph.nodes]
    assert names.index("all_gather") < names.index("softmax")


def test_embedding_with_vocab_split():
    gather = ops.Gather().shard(((2, 1), (1,)))
    g = graph_of(lambda ids: gather(TABLE, ids, 0), np.array([1, 6, 3], np.int32))
    plan, comms = table(g, 2, rank=1)
    # each rank looks up the rows it holds (masked), the (3, 4) f32 result is a partial sum:
    # all_reduce 2 * 1/2 * 48 B
    assert comms == [("all_reduce", 48)]
    names = [n.name for n in plan.graph.nodes]
    assert "clamp" in names and "gather" in names
    sub = [n for n in plan.graph.nodes if n.name == "sub"][0]
    assert sub.inputs[1] == 4                       # rank 1 holds rows 4..7


def test_strategy_to_layouts_mindspore_device_matrix():
    stage = StageDevices(4)
    assert stage.device_matrix == (2, 2)
    # ((2, 1), (1, 1)) on 4 devices: device matrix [2(repeat), 2, 1, 1]; the data split is the
    # minor stage axis (ranks 0, 2 hold rows 0-3), the repeat the major one
    x, w = strategy_layouts(stage, "MatMul", {}, [(8, 4), (4, 8)], ((2, 1), (1, 1)))
    assert x == TensorLayout((2, 2), (0, -1)) and w.is_replicated()
    assert [x.block_index(r, 0) for r in range(4)] == [0, 1, 0, 1]
    # a split of 4 covers both stage axes, major first
    _, w = strategy_layouts(stage, "MatMul", {}, [(8, 4), (4, 8)], ((1, 1), (1, 4)))
    assert w == TensorLayout((2, 2), (-1, (1, 0)))
    # transpose_b: mat2 is (n, k)
    _, w = strategy_layouts(stage, "MatMul", {"transpose_b": True}, [(8, 4), (8, 4)], ((1, 2), (2, 2)))
    assert w.split_counts() == (2, 2)
    with pytest.raises(OpValueError, match="MatMul"):
        strategy_layouts(stage, "MatMul", {}, [(8, 4), (4, 8)], ((1, 2), (4, 1)))    # k splits disagree
    with pytest.raises(OpValueError, match="MatMul"):
        strategy_layouts(stage, "MatMul", {}, [(8, 4), (4, 8)], ((3, 1), (1, 1)))    # 3 does not divide 4


def test_layout_objects_as_strategies():
    class L:                                         # an ms.Layout-like object (duck-typed)
        device_matrix = (2, 2)
        tensor_map = (1, (0,))

    class R:
        device_matrix = (4,)
        tensor_map = (-1, 0)

    stage = StageDevices(4)
    a, b = strategy_layouts(stage, "MatMul", {}, [(8, 4), (4, 8)], (L(), R()))
    assert a == TensorLayout((2, 2), (1, 0)) and b == TensorLayout((2, 2), (-1, (1, 0)))
    from minispore.parallel.layout import Layout
    lay = Layout((2, 2), ("dp", "mp"))
    x, w = strategy_layouts(stage, "MatMul", {}, [(8, 4), (4, 8)], (lay("dp", "None"), lay("None", "mp")))
    assert x == TensorLayout((2, 2), (1, -1)) and w == TensorLayout((2, 2), (-1, 0))


def test_search_mode_propagates_back_to_parameters():
    mm = ops.MatMul().shard(((1, 1), (1, 2)))
    w = ms.Parameter(ms.Tensor(np.ones((8, 4), F32)), name="wt")
    g = graph_of(lambda x: mm(x, ops.transpose(w, (1, 0))), np.ones((2, 4), F32))
    # plain semi-auto: the parameter stays whole and its transpose is sliced locally
    plan, comms = table(g, 2)
    assert plan.parameters["wt"][2].is_replicated()
    # sharding_propagation: the layout flows back through the transpose, w is stored by rows
    plan, comms = table(g, 2, search_mode="sharding_propagation")
    assert plan.parameters["wt"][2] == TensorLayout((2,), (0, -1))
    assert comms == [("all_gather", 32)]             # the (2, 4) f32 output block, (2-1) * 32
    # no slice before the matmul; the column gather runs on dim 0 (moved there and back)
    assert [n.name for n in plan.graph.nodes] == ["transpose", "matmul", "transpose", "all_gather", "transpose"]


def test_printer_and_strategy_file(tmp_path):
    col = ops.MatMul().shard(((1, 1), (1, 2)))
    g = graph_of(lambda x: col(x, W), np.ones((4, 4), F32))
    plan = plan_semi_auto(g, 2, 0)
    text = format_graph(plan.graph)
    assert "all_gather" in text and "map[-1, 0]" in text
    data = strategy_json(plan)
    assert data["parallel_layout_item"]["w"] == {"dev_matrix": [2], "tensor_map": [-1, 0], "tensor_shape": [4, 8],
                                                 "field": 0, "opt_weight_shard_step": 0, "opt_weight_shard_size": 0}
    from minispore.parallel.strategy_file import load_strategy_file
    from minispore.graph.parallel.partition import save_strategy_file
    path = tmp_path / "s.json"
    save_strategy_file(plan, str(path))
    assert json.loads(path.read_text()) == data
    loaded = load_strategy_file(str(path))
    assert "w" in loaded


def test_op_without_rule_runs_whole():
    relu = ops.ReLU().shard(((2, 1),))
    g = graph_of(lambda x: ops.roll(relu(x), 1, 0), np.ones((8, 2), F32))
    plan, comms = table(g, 2)
    assert comms[0] == ("all_gather", 32)           # gathered before the rule-less op
    assert any("roll" in n for n in plan.notes)


def test_bad_rank():
    g = graph_of(lambda x: x * 2, np.ones((2,), F32))
    with pytest.raises(OpValueError, match="semi_auto_parallel"):
        plan_semi_auto(g, 2, 5)


def test_ms_shard_function_region():
    def body(x):
        return ops.relu(x) * 2
    sharded = ms.shard(body, in_strategy=((2, 1),))
    g = graph_of(lambda x: sharded(x), np.ones((8, 4), F32))
    plan, comms = table(g, 2)
    # x is sliced by rows on entry, relu and the product follow, the (4, 4) f32 block comes back
    assert comms == [("all_gather", 64)]
    assert [n.name for n in plan.graph.nodes][:2] == ["shard_slice", "relu"]
    # outside a capture the wrapper just calls the function
    np.testing.assert_allclose(sharded(ms.Tensor(np.array([-1.0, 2.0], F32))).asnumpy(), [0.0, 4.0])
    with pytest.raises(ms.common.errors.OpTypeError, match="shard"):
        ms.shard(body, in_strategy=[(2, 1)])


def test_cell_shard_with_parameter_plan():
    class Lin(ms.nn.Cell):
        def __init__(self):
            super().__init__()
            self.w = ms.Parameter(ms.Tensor(np.ones((4, 8), F32)), name="w")

        def construct(self, x):
            return ops.matmul(x, self.w)

    net = Lin()
    assert net.shard(in_strategy=((1, 1),), parameter_plan={"w": (1, 2)}) is net
    g = graph_of(net, np.ones((2, 4), F32))
    plan, comms = table(g, 2)
    assert plan.parameters["w"][2] == TensorLayout((2,), (-1, 0))
    assert comms == [("all_gather", 32)]            # the (2, 4) f32 column block, (2-1) * 32 B
    with pytest.raises(OpValueError, match="parameter_plan"):
        Lin().shard(in_strategy=((1, 1),), parameter_plan={"nope": (1, 2)})


def test_reshard_in_graph_and_eagerly():
    from minispore.parallel.layout import Layout
    lay = Layout((2,), ("mp",))("None", "mp")
    x = np.arange(8, dtype=F32).reshape(2, 4)
    # eagerly (and in a world of one) the identity
    np.testing.assert_array_equal(ms.reshard(ms.Tensor(x), lay).asnumpy(), x)
    g = graph_of(lambda t: ops.exp(ms.reshard(t, lay)), x)
    plan, comms = table(g, 2, rank=1)
    names = [n.name for n in plan.graph.nodes]
    assert names[:3] == ["shard_slice", "reshard", "exp"]
    assert comms == [("all_gather", 16)]            # exp ran on (2, 2) blocks; gathered at the end
    with pytest.raises(ms.common.errors.OpTypeError, match="reshard"):
        ms.reshard(ms.Tensor(x), (1, 2))


def test_plan_function_for_any_world_size():
    from minispore.graph.parallel.partition import plan_function
    row = ops.MatMul().shard(((1, 4), (4, 1)))

    def f(x):
        return row(x, W2)
    for rank in range(4):
        plan = plan_function(f, ms.Tensor(np.ones((2, 8), F32)), device_num=4, rank=rank)
        # x is sliced by columns locally, W2 stored by rows, one all_reduce of the (2, 4) output
        assert plan.comm_table() == [("all_reduce", 2 * 3 * 32 // 4)]
        sl = plan.graph.nodes[0]
        assert sl.name == "shard_slice" and sl.attrs["index"] == rank
    assert "partial[" in format_graph(plan.graph)


def test_out_strategy_reduce_scatters_the_partial_product():
    # a row-parallel product's partial (8, 4) output: out_strategy ((2, 1),) asks for it split by
    # rows, so it is reduce-scattered ((2-1)/2 * 128 B) instead of all-reduced, then gathered whole
    # at the output ((2-1) * 64 B)
    row = ops.MatMul().shard(((1, 2), (2, 1)), out_strategy=((2, 1),))
    w = ms.Parameter(ms.Tensor(np.ones((8, 4), F32)), name="w_os")
    g = graph_of(lambda x: row(x, w), np.ones((8, 8), F32))
    plan, comms = table(g, 2)
    assert comms == [("reduce_scatter", 64), ("all_gather", 64)]


def test_stage_device_matrix_and_bad_strategies():
    six = StageDevices(6)
    assert six.device_matrix == (3, 2)
    assert six.axes_for((3, 2)) == [(1,), (0,)] and six.axes_for((6,)) == [(1, 0)]
    with pytest.raises(OpValueError, match="semi_auto_parallel"):
        six.axes_for((2, 3))                         # cannot be laid over (3, 2) in rank order
    with pytest.raises(OpValueError, match="semi_auto_parallel"):
        StageDevices(0)
    with pytest.raises(OpValueError, match="Mul"):   # broadcast dims that disagree
        strategy_layouts(StageDevices(4), "Mul", {}, [(4, 4), (4, 4)], ((2, 1), (4, 1)))
    with pytest.raises(OpValueError, match="MatMul"):
        strategy_layouts(StageDevices(2), "MatMul", {}, [(8, 4), (4, 8)], ((2, 1),))   # one entry short
