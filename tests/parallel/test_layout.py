"""Layout (MindSpore's tensor_map convention) and the slice algebra, single process.

The oracle for slicing is written independently of layout.py: a naive loop that, for every rank,
computes its device coordinate with divmod (last axis fastest) and cuts each dim with np.split,
the way MindSpore's `_chunk_tensor_by_strategy` + `_get_tensor_slice_index` do it.
"""
import itertools
import json

import numpy as np
import pytest

import minispore as ms
from minispore.common.errors import OpTypeError, OpValueError
from minispore.parallel import (Layout, assemble, build_searched_strategy, build_strategy, replica_groups,
                                save_strategy_file, shard_of, shard_shape, slice_bounds)


# -- MindSpore's documented examples ----------------------------------------------------------------
def test_to_dict_matches_mindspore_example():
    layout = Layout((2, 2, 2), ("dp", "sp", "mp"))
    assert layout("dp", "mp").to_dict() == {
        "device_matrix": (2, 2, 2), "tensor_map": (2, 0), "interleaved_parallel": False,
        "alias_name": ("dp", "sp", "mp"), "rank_list": [0, 1, 2, 3, 4, 5, 6, 7]}


def test_multi_axis_and_none_entries():
    layout = Layout((2, 2, 2), ("dp", "sp", "mp"))
    assert layout(("dp", "mp"), "None").to_dict()["tensor_map"] == ((2, 0), -1)
    assert layout("None", ("sp", "None")).to_dict()["tensor_map"] == (-1, (1, -1))
    assert layout(("dp", "mp"), "sp").dim_splits() == (4, 2)
    inter = Layout((2, 2, 2), ("dp", "sp", "interleaved_parallel"))(("dp", "interleaved_parallel"), "sp")
    assert inter.to_dict()["interleaved_parallel"] is True
    assert inter.to_dict()["tensor_map"] == ((2, 0), 1)


def test_calling_does_not_change_the_device_layout():
    layout = Layout((2, 4), ("dp", "mp"))
    a = layout("mp", "None")
    b = layout("dp", "mp")
    assert a.tensor_map == (0, -1) and b.tensor_map == (1, 0)
    assert layout.tensor_map is None


def test_rank_list_is_kept_and_used():
    layout = Layout((2, 2), ("dp", "mp"), rank_list=[4, 5, 6, 7])("dp", "mp")
    assert layout.to_dict()["rank_list"] == [4, 5, 6, 7]
    assert slice_bounds(layout, (4, 6), 6) == ((2, 4), (0, 3))     # position 2 = coordinate (1, 0)


def test_from_strategy_follows_mindspore():
    lay = Layout.from_strategy((2, 1), 8)
    assert lay.device_matrix == (4, 2, 1) and lay.tensor_map == (1, 0)
    assert lay.dim_splits() == (2, 1)
    assert Layout.from_strategy((2, 4)).tensor_map == (1, 0)
    assert Layout.from_strategy((), 4).dim_splits() == ()


# -- the slice algebra against a naive oracle -------------------------------------------------------
def _oracle_piece(full, device_matrix, tensor_map, position):
    """Independent reference: coordinate by repeated divmod, piece index by mixed radix, np.split."""
    coord, rest = [0] * len(device_matrix), position
    for axis in reversed(range(len(device_matrix))):
        rest, coord[axis] = divmod(rest, device_matrix[axis])
    piece = full
    n = len(device_matrix)
    for dim, entry in enumerate(tensor_map):
        nums = entry if isinstance(entry, tuple) else (entry,)
        count, index = 1, 0
        for k in nums:
            if k == -1:
                continue
            axis = n - 1 - k
            count *= device_matrix[axis]
            index = index * device_matrix[axis] + coord[axis]
        piece = np.split(piece, count, axis=dim)[index]
    return piece


LAYOUTS = [
    ((2, 2), ("dp", "mp"), ("mp", "None")),
    ((2, 2), ("dp", "mp"), ("None", "mp")),
    ((2, 2), ("dp", "mp"), ("dp", "mp")),
    ((2, 2), ("dp", "mp"), ("mp", "dp")),
    ((2, 2), ("dp", "mp"), ("None", "None")),
    ((4,), ("mp",), ("None", "mp")),
    ((2, 2, 2), ("dp", "sp", "mp"), (("dp", "mp"), "sp")),
    ((2, 2, 2), ("dp", "sp", "mp"), (("mp", "dp"), "None")),
    ((2, 3, 2), ("a", "b", "c"), ("b", ("c", "a"))),
    ((8,), ("x",), ("None", "None", "x")),
    ((1, 4), ("dp", "mp"), ("dp", "mp", "None")),
]


@pytest.mark.parametrize("device_matrix,aliases,dims", LAYOUTS)
def test_shard_matches_oracle_and_assembles_bit_exact(device_matrix, aliases, dims):
    layout = Layout(device_matrix, aliases)(*dims)
    splits = layout.dim_splits()
    shape = tuple(s * (2 + i) for i, s in enumerate(splits))
    rng = np.random.default_rng(0)
    full = rng.standard_normal(shape).astype(np.float32)
    full.flat[0] = np.nan                                     # bit-exactness includes NaN payloads
    pieces = {}
    for position, rank in enumerate(layout.rank_list):
        piece = shard_of(full, layout, rank)
        expected = _oracle_piece(full, device_matrix, layout.tensor_map, position)
        assert piece.tobytes() == np.ascontiguousarray(expected).tobytes()
        assert piece.shape == shard_shape(layout, shape)
        pieces[rank] = piece
    back = assemble(pieces, layout, shape)
    assert back.dtype == full.dtype and back.tobytes() == full.tobytes()
    # one replica of each piece is enough
    firsts = {group[0]: pieces[group[0]] for group in replica_groups(layout)}
    assert assemble(firsts, layout, shape).tobytes() == full.tobytes()


def test_replica_groups_hold_identical_pieces():
    layout = Layout((2, 2), ("dp", "mp"))("None", "mp")       # dp axis unused: 2 copies of each piece
    assert replica_groups(layout) == [[0, 2], [1, 3]]
    assert replica_groups(Layout((2, 2), ("dp", "mp"))("dp", "mp")) == [[0], [1], [2], [3]]
    assert replica_groups(Layout((4,), ("x",))("None",)) == [[0, 1, 2, 3]]


def test_zero_dim_and_int_and_bfloat16():
    layout = Layout((2,), ("dp",))()
    scalar = np.array(3, dtype=np.int64)
    assert shard_of(scalar, layout, 1).shape == ()
    assert assemble({0: scalar, 1: scalar}, layout, ()).tobytes() == scalar.tobytes()
    bf16 = ms.Tensor(np.arange(8, dtype=np.float32).reshape(2, 4), ms.bfloat16).asnumpy()
    lay = Layout((2,), ("mp",))("None", "mp")
    assert assemble({r: shard_of(bf16, lay, r) for r in (0, 1)}, lay, (2, 4)).tobytes() == bf16.tobytes()


def test_all_ranks_cover_the_tensor_exactly_once_per_copy():
    for dims in itertools.permutations(["dp", "mp", "None"], 2):
        layout = Layout((2, 2), ("dp", "mp"))(*dims)
        count = np.zeros((4, 4), dtype=int)
        for r in layout.rank_list:
            (a, b), (c, d) = slice_bounds(layout, (4, 4), r)
            count[a:b, c:d] += 1
        copies = 4 // np.prod(layout.dim_splits())
        assert (count == copies).all()


# -- errors ---------------------------------------------------------------------------------------
def test_layout_errors_name_the_op():
    with pytest.raises(OpValueError, match="Layout.*at most once"):
        Layout((2, 2), ("dp", "mp"))("dp", "dp")
    with pytest.raises(OpValueError, match="Layout.*an alias of"):
        Layout((2, 2), ("dp", "mp"))("tp", "None")
    with pytest.raises(OpValueError, match="rank_list"):
        Layout((2, 2), ("dp", "mp"), rank_list=[0, 1, 2])
    with pytest.raises(OpValueError, match="same length"):
        Layout((2, 2), ("dp",))
    with pytest.raises(OpValueError, match="distinct"):
        Layout((2, 2), ("dp", "dp"))
    with pytest.raises(OpValueError, match="'None'"):
        Layout((2,), ("None",))
    with pytest.raises(OpTypeError, match="Layout"):
        Layout([2, 2], ("dp", "mp"))
    with pytest.raises(OpTypeError, match="Layout"):
        Layout((2, 2), ("dp", "mp"))(0, 1)
    with pytest.raises(OpValueError, match="to_dict"):
        Layout((2,), ("dp",)).to_dict()


def test_slicing_errors():
    layout = Layout((2, 2), ("dp", "mp"))("dp", "mp")
    with pytest.raises(OpValueError, match="shard_of.*divisible"):
        shard_of(np.zeros((3, 4)), layout, 0)
    with pytest.raises(OpValueError, match="rank 2"):
        shard_of(np.zeros((4,)), layout, 0)
    with pytest.raises(OpValueError, match="rank_list"):
        shard_of(np.zeros((4, 4)), layout, 4)
    with pytest.raises(OpValueError, match="interleaved"):
        shard_of(np.zeros((4, 4)), Layout((2, 2), ("dp", "interleaved_parallel"))("dp", "interleaved_parallel"), 0)
    full = np.arange(16, dtype=np.float32).reshape(4, 4)
    pieces = {r: shard_of(full, layout, r) for r in range(4)}
    with pytest.raises(OpValueError, match="assemble.*the piece held by ranks \\[3\\]"):
        assemble({r: pieces[r] for r in range(3)}, layout, (4, 4))
    with pytest.raises(OpValueError, match="assemble.*shape"):
        assemble({**pieces, 0: np.zeros((1, 2), np.float32)}, layout, (4, 4))
    rep = Layout((2, 2), ("dp", "mp"))("None", "mp")
    drift = {r: shard_of(full, rep, r) for r in range(4)}
    drift[2] = drift[2].copy()
    drift[2][0, 0] += 1
    with pytest.raises(OpValueError, match="identical replicas.*rank 2 differs from rank 0"):
        assemble(drift, rep, (4, 4))


# -- strategy files -------------------------------------------------------------------------------
def test_strategy_file_round_trip_in_mindspore_json(tmp_path):
    mesh = Layout((2, 2), ("dp", "mp"))
    layouts = {"fc.weight": ((8, 4), mesh("mp", "None")), "fc.bias": ((8,), mesh("mp")),
               "emb": ((8, 4), mesh(("dp", "mp"), "None"))}
    path = save_strategy_file(str(tmp_path / "s.json"), layouts, op_strategies={"MatMul-op0": ((2, 1), (1, 2))})
    raw = json.loads(open(path).read())
    assert raw["current_stage"] == 0
    assert raw["parallel_strategy_item"] == {"MatMul-op0": {"stage": 0, "parallel_strategy": [[2, 1], [1, 2]]}}
    assert raw["parallel_layout_item"]["fc.weight"] == {
        "dev_matrix": [2, 2], "tensor_map": [0, -1], "tensor_shape": [8, 4], "field": 0,
        "opt_weight_shard_step": 0, "opt_weight_shard_size": 0}
    assert raw["parallel_layout_item"]["emb"]["tensor_map"] == [[1, 0], -1]
    back = build_searched_strategy(path)
    assert back["fc.weight"].dev_matrix[0].dim == [2, 2]
    assert back["fc.weight"].tensor_map[0].dim == [0, -1]
    for name, (shape, layout) in layouts.items():
        assert back[name].tensor_shape == shape
        full = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
        for r in range(4):
            assert shard_of(full, back[name].layout, r).tobytes() == shard_of(full, layout, r).tobytes()
    assert build_strategy(layouts)["parallel_layout_item"] == raw["parallel_layout_item"]


def test_strategy_file_errors(tmp_path):
    mesh = Layout((2, 2), ("dp", "mp"))
    with pytest.raises(OpValueError, match="save_strategy_file.*'.json'"):
        save_strategy_file(str(tmp_path / "s.ckpt"), {"w": ((4,), mesh("mp"))})
    with pytest.raises(OpValueError, match="build_strategy.*divisible"):
        build_strategy({"w": ((3,), mesh("mp"))})
    with pytest.raises(OpValueError, match="same number of devices"):
        build_strategy({"w": ((4,), mesh("mp")), "v": ((4,), Layout((2,), ("x",))("x"))})
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"current_stage": 0, "parallel_layout_item": {
        "w": {"dev_matrix": [2, 2], "tensor_map": [2, -1], "tensor_shape": [4, 4]}}}))
    with pytest.raises(OpValueError, match="build_searched_strategy.*'w'"):
        build_searched_strategy(str(bad))
    bad.write_text("{not json")
    with pytest.raises(OpValueError, match="build_searched_strategy"):
        build_searched_strategy(str(bad))
    with pytest.raises(OpValueError, match="build_searched_strategy"):
        build_searched_strategy(str(tmp_path / "missing.json"))
    bad.write_text(json.dumps({"parallel_layout_item": {"w": {
        "dev_matrix": [4, 2], "tensor_map": [0], "tensor_shape": [8], "opt_weight_shard_step": 4,
        "opt_weight_shard_size": 2}}}))
    with pytest.raises(OpValueError, match="build_searched_strategy.*opt_weight_shard_step"):
        build_searched_strategy(str(bad))
    with pytest.raises(OpValueError, match="build_strategy.*copies"):
        build_strategy({"w": ((8, 4), mesh("mp", "None"), 3)})


@pytest.mark.parametrize("opt_size", [2, -1])
def test_optimizer_parallel_layouts_follow_mindspore(tmp_path, opt_size):
    """ZeRO pieces: ranks 0..m-1 hold the m model-parallel pieces, the next m ranks the next
    optimizer-shard slice of each, ... (MindSpore's [repeat, k, *splits] device matrix)."""
    mesh = Layout((4, 2), ("dp", "mp"))                 # 8 ranks: mp pieces of 2, 4 copies each
    path = save_strategy_file(str(tmp_path / "z.json"), {"w": ((16, 6), mesh("mp", "None"), opt_size),
                                                         "b": ((8,), mesh("None"), opt_size)})
    raw = json.loads(open(path).read())["parallel_layout_item"]
    assert (raw["w"]["opt_weight_shard_step"], raw["w"]["opt_weight_shard_size"]) == (2, opt_size)
    strategy = build_searched_strategy(path)
    k = 2 if opt_size == 2 else 4
    full = np.arange(96, dtype=np.float32).reshape(16, 6)
    bias = np.arange(8, dtype=np.float32)
    for rank in range(8):
        mp, shard = rank % 2, (rank // 2) % k            # independent oracle of the rank order
        rows = 16 // 2 // k
        expected = full[mp * 8 + shard * rows: mp * 8 + (shard + 1) * rows]
        assert shard_of(full, strategy["w"].layout, rank).tobytes() == expected.tobytes()
        # the bias is not model-parallel (step 1): all 8 ranks hold copies, so k = 2, or 8 for -1
        k_b = 2 if opt_size == 2 else 8
        b_rows, shard_b = 8 // k_b, rank % k_b
        assert shard_of(bias, strategy["b"].layout, rank).tobytes() == \
            bias[shard_b * b_rows:(shard_b + 1) * b_rows].tobytes()
