"""Distributed checkpoints resharded offline: tp2 x dp2 -> tp4 / dp4 / one process and back.

The per-rank files are made by hand here (each rank's piece cut with an independent np.split
oracle), exactly as a real tp2 x dp2 run would save them, and every transform is checked bit for
bit against the pieces the destination strategy should hold. Single process, no MPI.
"""
import json
import os

import numpy as np
import pytest

import minispore as ms
from minispore import nn
from minispore.common.errors import MinisporeRuntimeError, OpValueError
from minispore.parallel import Layout, build_searched_strategy, save_strategy_file, shard_of
from minispore.train.serialization import read_checkpoint_items, save_checkpoint

DP_TP = Layout((2, 2), ("dp", "mp"))          # rank = 2 * dp + mp
TP4 = Layout((4,), ("mp",))
DP4 = Layout((4,), ("dp",))

# (global shape, tp2xdp2 dims, tp4 dims): column-parallel wq, row-parallel wo, a vocab-split
# embedding, a replicated norm
PARAMS = {
    "wq.weight": ((8, 4), ("mp", "None"), ("mp", "None")),
    "wo.weight": ((4, 8), ("None", "mp"), ("None", "mp")),
    "emb.embedding_table": ((16, 4), ("mp", "None"), ("mp", "None")),
    "norm.gamma": ((4,), ("None",), ("None",)),
}


def _strategy(mesh, which, tmp_path, fname):
    if mesh is DP4:                      # pure data parallel: every weight whole on every rank
        layouts = {n: (shape, DP4(*["None"] * len(shape))) for n, (shape, _, _) in PARAMS.items()}
    else:
        layouts = {n: (shape, mesh(*(dims if which == 1 else tp4))) for n, (shape, dims, tp4) in PARAMS.items()}
    return save_strategy_file(str(tmp_path / fname), layouts)


def _full_state(seed=0):
    """Weights, Adam state (moment1/moment2.<name>, beta powers, global_step) and an RNG string."""
    rng = np.random.default_rng(seed)
    state = {}
    for name, (shape, _, _) in PARAMS.items():
        state[name] = rng.standard_normal(shape).astype(np.float32)
        state["moment1." + name] = rng.standard_normal(shape).astype(np.float32)
        state["moment2." + name] = rng.random(shape).astype(np.float32)
    state["beta1_power"] = np.array([0.81], np.float32)
    state["global_step"] = np.array([7], np.int32)
    state["rng_state"] = json.dumps({"bit_generator": "PCG64", "state": {"state": 12345, "inc": 7}})
    return state


def _oracle_piece(full, splits, index):
    """The piece `index` (per dim) of `full` cut into `splits` pieces per dim, with np.split."""
    for d, (s, i) in enumerate(zip(splits, index)):
        full = np.split(full, s, axis=d)[i]
    return np.ascontiguousarray(full)


def _tp2dp2_piece(name, full):
    """Rank r of tp2 x dp2 holds mp piece r % 2 of the dims mapped to 'mp' (independent oracle)."""
    base = name.split(".", 1)[1] if name.startswith("moment") else name
    if base not in PARAMS:
        return {r: full for r in range(4)}
    dims = PARAMS[base][1]
    out = {}
    for r in range(4):
        splits = [2 if d == "mp" else 1 for d in dims]
        index = [r % 2 if d == "mp" else 0 for d in dims]
        out[r] = _oracle_piece(full, splits, index)
    return out


def _save_tp2dp2(tmp_path, state, fmt="ckpt"):
    src = tmp_path / "src"
    per_rank = {r: {} for r in range(4)}
    for name, value in state.items():
        pieces = _tp2dp2_piece(name, value) if not isinstance(value, str) else {r: value for r in range(4)}
        for r in range(4):
            per_rank[r][name] = pieces[r]
    for r in range(4):
        os.makedirs(src / f"rank_{r}")
        save_checkpoint(per_rank[r], str(src / f"rank_{r}" / f"net{r}.{fmt}"), format=fmt)
    return str(src), per_rank


def _load(path):
    return dict(read_checkpoint_items(path, format=path.rsplit(".", 1)[1]))


def _assert_same(a, b):
    assert a.keys() == b.keys()
    for k in a:
        if isinstance(a[k], str):
            assert a[k] == b[k]
        else:
            assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape and a[k].tobytes() == b[k].tobytes(), k


@pytest.fixture
def setup(tmp_path):
    state = _full_state()
    src_dir, per_rank = _save_tp2dp2(tmp_path, state)
    strategies = {"tp2dp2": _strategy(DP_TP, 1, tmp_path, "tp2dp2.json"),
                  "tp4": _strategy(TP4, 4, tmp_path, "tp4.json"),
                  "dp4": _strategy(DP4, 4, tmp_path, "dp4.json")}
    return tmp_path, state, src_dir, per_rank, strategies


# -- the three targets ------------------------------------------------------------------------------
def test_tp2dp2_to_tp4(setup):
    tmp, state, src, _, st = setup
    ms.transform_checkpoints(src, str(tmp / "tp4"), "net", st["tp2dp2"], st["tp4"])
    for r in range(4):
        got = _load(str(tmp / "tp4" / f"rank_{r}" / f"net{r}.ckpt"))
        for name, value in state.items():
            base = name.split(".", 1)[1] if name.startswith("moment") else name
            if isinstance(value, str) or base not in PARAMS:
                expected = value                                # whole entries travel unchanged
            else:
                dims = PARAMS[base][2]
                expected = _oracle_piece(value, [4 if d == "mp" else 1 for d in dims],
                                         [r if d == "mp" else 0 for d in dims])
            if isinstance(expected, str):
                assert got[name] == expected
            else:
                assert got[name].tobytes() == expected.tobytes() and got[name].shape == expected.shape, name


def test_tp2dp2_to_dp4_and_one_process(setup):
    tmp, state, src, _, st = setup
    ms.transform_checkpoints(src, str(tmp / "dp4"), "net", st["tp2dp2"], st["dp4"])
    for r in range(4):
        _assert_same(_load(str(tmp / "dp4" / f"rank_{r}" / f"net{r}.ckpt")), state)
    ms.transform_checkpoints(src, str(tmp / "one"), "net", st["tp2dp2"], None, output_format="safetensors")
    assert os.listdir(tmp / "one") == ["rank_0"]
    _assert_same(_load(str(tmp / "one" / "rank_0" / "net0.safetensors")), state)


@pytest.mark.parametrize("via", ["tp4", "dp4", None])
def test_round_trips_back_to_tp2dp2_bit_exact(setup, via):
    tmp, _, src, per_rank, st = setup
    mid = str(tmp / f"mid_{via}")
    ms.transform_checkpoints(src, mid, "net", st["tp2dp2"], st[via] if via else None)
    back = str(tmp / f"back_{via}")
    ms.transform_checkpoints(mid, back, "net", st[via] if via else None, st["tp2dp2"])
    for r in range(4):
        _assert_same(_load(os.path.join(back, f"rank_{r}", f"net{r}.ckpt")), per_rank[r])


def test_by_rank_matches_the_whole_transform(setup):
    tmp, _, src, _, st = setup
    ms.transform_checkpoints(src, str(tmp / "tp4"), "net", st["tp2dp2"], st["tp4"])
    for r in range(4):
        needed = ms.parallel.rank_list_for_transform(r, st["tp2dp2"], st["tp4"])
        # tp4 rank r needs the mp piece r // 2 of tp2, held by ranks r // 2 and r // 2 + 2, and rank r
        # itself (entries without a layout): rank r is read for the piece when it holds it
        assert needed == [[0], [0, 1], [1, 2], [3]][r]
        files = {k: os.path.join(src, f"rank_{k}", f"net{k}.ckpt") for k in needed}
        out = str(tmp / f"by_rank{r}.ckpt")
        ms.transform_checkpoint_by_rank(r, files, out, st["tp2dp2"], st["tp4"])
        _assert_same(_load(out), _load(str(tmp / "tp4" / f"rank_{r}" / f"net{r}.ckpt")))
    assert ms.parallel.rank_list_for_transform(0, None, st["tp4"]) == [0]
    assert ms.parallel.rank_list_for_transform(0, st["tp2dp2"], None) == [0, 1]


def test_merge_sliced_parameter(setup):
    _, state, _, per_rank, st = setup
    strategy = build_searched_strategy(st["tp2dp2"])
    for name in ("wq.weight", "wo.weight", "norm.gamma"):
        slices = [ms.Parameter(ms.Tensor(per_rank[r][name]), name=name) for r in range(4)]
        merged = ms.merge_sliced_parameter(slices, strategy)
        assert merged.name == name and merged.asnumpy().tobytes() == state[name].tobytes()
    parts = [ms.Parameter(ms.Tensor(np.full((2, 3), r, np.float32)), name="w") for r in range(3)]
    assert np.array_equal(ms.merge_sliced_parameter(parts).asnumpy(),
                          np.repeat(np.arange(3, dtype=np.float32), 2)[:, None] * np.ones((1, 3), np.float32))
    with pytest.raises(OpValueError, match="merge_sliced_parameter.*'v'"):
        ms.merge_sliced_parameter([ms.Parameter(ms.Tensor(np.zeros(2, np.float32)), name="v")] * 4, strategy)
    with pytest.raises(OpValueError, match="merge_sliced_parameter.*one parameter"):
        ms.merge_sliced_parameter([parts[0], ms.Parameter(ms.Tensor(np.zeros((2, 3), np.float32)), name="u")])
    drift = [ms.Parameter(ms.Tensor(per_rank[r]["norm.gamma"] + (r == 3)), name="norm.gamma") for r in range(4)]
    with pytest.raises(OpValueError, match="identical replicas"):
        ms.merge_sliced_parameter(drift, strategy)


# -- loading into a network -------------------------------------------------------------------------
class _Holder(nn.Cell):
    """A Cell whose Parameters carry the checkpoint's names and the given shapes."""

    def __init__(self, shapes):
        super().__init__()
        self.params = ms.ParameterTuple(ms.Parameter(ms.Tensor(np.zeros(s, np.float32)), name=n)
                                        for n, s in shapes.items())

    def construct(self):
        return self.params[0]


def test_load_distributed_checkpoint_single_process_and_per_rank(setup):
    tmp, state, src, _, st = setup
    files = [os.path.join(src, f"rank_{r}", f"net{r}.ckpt") for r in range(4)]
    full_net = _Holder({n: s for n, (s, _, _) in PARAMS.items()})
    ms.load_distributed_checkpoint(full_net, files, None, train_strategy_filename=st["tp2dp2"])
    for p in full_net.params:
        assert p.asnumpy().tobytes() == state[p.name].tobytes()
    # rank 2 of a tp4 inference job
    tp4 = build_searched_strategy(st["tp4"])
    shard_net = _Holder({n: tp4[n].layout and ms.parallel.shard_shape(tp4[n].layout, s)
                         for n, (s, _, _) in PARAMS.items()})
    d = ms.load_distributed_checkpoint(shard_net, files, st["tp4"], st["tp2dp2"], rank_id=2, return_param_dict=True)
    for p in shard_net.params:
        assert p.asnumpy().tobytes() == shard_of(state[p.name], tp4[p.name].layout, 2).tobytes()
    assert d["rng_state"] == state["rng_state"]
    with pytest.raises(OpValueError, match="load_distributed_checkpoint.*4 checkpoint files"):
        ms.load_distributed_checkpoint(full_net, files[:3], None, st["tp2dp2"])
    with pytest.raises(MinisporeRuntimeError, match="load_param_into_net.*shape"):    # pieces into full params
        ms.load_distributed_checkpoint(full_net, files, st["tp4"], st["tp2dp2"], rank_id=0)


def test_unified_safetensors(tmp_path):
    state = _full_state(1)
    src, _ = _save_tp2dp2(tmp_path, state, fmt="safetensors")
    strategy = _strategy(DP_TP, 1, tmp_path, "s.json")
    ms.unified_safetensors(src, strategy, str(tmp_path / "merged"))
    _assert_same(_load(str(tmp_path / "merged" / "model.safetensors")), state)
    assert set(json.loads((tmp_path / "merged" / "param_name_map.json").read_text())) == set(state)
    net = _Holder({n: s for n, (s, _, _) in PARAMS.items()})
    ms.load_distributed_checkpoint(net, None, None, format="safetensors",
                                   unified_safetensors_dir=str(tmp_path / "merged"))
    assert all(p.asnumpy().tobytes() == state[p.name].tobytes() for p in net.params)
    ms.unified_safetensors(src, strategy, str(tmp_path / "half"), split_dst_file=(1, 2),
                           choice_func=lambda n: not n.startswith("moment2"))
    half = _load(str(tmp_path / "half" / "model-1-of-2.safetensors"))
    assert half and all(not n.startswith("moment2") for n in half)


def test_files_saved_without_redundancy(tmp_path):
    """remove_redundancy saves: each piece on one rank only; merging needs merge_with_redundancy=False."""
    state = _full_state(2)
    src, per_rank = _save_tp2dp2(tmp_path, state, fmt="safetensors")
    for r in (2, 3):                  # dp replica 1 drops what dp replica 0 already saved
        p = os.path.join(src, f"rank_{r}", f"net{r}.safetensors")
        os.chmod(p, 0o600)
        save_checkpoint({"global_step": per_rank[r]["global_step"]}, p, format="safetensors")
    strategy = _strategy(DP_TP, 1, tmp_path, "s.json")
    with pytest.raises(OpValueError, match="merge_with_redundancy"):
        ms.unified_safetensors(src, strategy, str(tmp_path / "m"))
    ms.unified_safetensors(src, strategy, str(tmp_path / "m"), merge_with_redundancy=False)
    _assert_same(_load(str(tmp_path / "m" / "model.safetensors")), state)


# -- resume: optimizer and RNG state travel ----------------------------------------------------------
class _Net(nn.Cell):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Dense(4, 8)
        self.fc2 = nn.Dense(8, 2)

    def construct(self, x):
        return self.fc2(ms.ops.relu(self.fc1(x)))


def _step(net, opt):
    """One Adam step on a batch drawn from minispore's global RNG (so the RNG state matters)."""
    from minispore.common.context import rng
    x = ms.Tensor(rng().standard_normal((6, 4)).astype(np.float32))
    y = ms.Tensor(rng().standard_normal((6, 2)).astype(np.float32))

    def loss_fn():
        return ((net(x) - y) ** 2).mean()
    loss, grads = ms.value_and_grad(loss_fn, None, opt.parameters)()
    opt(grads)
    return float(loss.asnumpy())


def _named_state(net, opt):
    out = {}
    for cell in (net, opt):
        for _, p in cell.parameters_and_names():
            out.setdefault(p.name, p.asnumpy().copy())
    out["rng_state"] = json.dumps(ms.get_rng_state())
    return out


def test_resume_after_resharding_gives_the_same_next_loss(tmp_path):
    ms.set_seed(3)
    net, opt = _Net(), None
    opt = nn.Adam(net.trainable_params(), 0.05)
    _step(net, opt)
    state = _named_state(net, opt)
    expected_next = _step(net, opt)             # the uninterrupted run

    # save as tp2 x dp2 would: fc1 column-parallel, fc2 row-parallel, optimizer state alike
    layouts = {"fc1.weight": ((8, 4), DP_TP("mp", "None")), "fc1.bias": ((8,), DP_TP("mp")),
               "fc2.weight": ((2, 8), DP_TP("None", "mp")), "fc2.bias": ((2,), DP_TP("None"))}
    strategy = save_strategy_file(str(tmp_path / "s.json"), layouts)
    src = tmp_path / "src"
    for r in range(4):
        os.makedirs(src / f"rank_{r}")
        items = {}
        for name, value in state.items():
            base = name.split(".", 1)[1] if name.startswith("moment") else name
            items[name] = shard_of(value, layouts[base][1], r) if base in layouts else value
        save_checkpoint(items, str(src / f"rank_{r}" / f"net{r}.ckpt"))
    tp4 = save_strategy_file(str(tmp_path / "tp4.json"),
                             {"fc1.weight": ((8, 4), TP4("mp", "None")), "fc1.bias": ((8,), TP4("mp")),
                              "fc2.weight": ((2, 8), TP4("None", "mp")), "fc2.bias": ((2,), TP4("None"))})
    ms.transform_checkpoints(str(src), str(tmp_path / "tp4"), "net", strategy, tp4)
    ms.transform_checkpoints(str(tmp_path / "tp4"), str(tmp_path / "one"), "net", tp4, None)

    ms.set_seed(99)                             # a fresh process: other weights, other RNG
    net2 = _Net()
    opt2 = nn.Adam(net2.trainable_params(), 0.05)
    files = [str(tmp_path / "one" / "rank_0" / "net0.ckpt")]
    d = ms.load_distributed_checkpoint(net2, files, return_param_dict=True)
    ms.load_distributed_checkpoint(opt2, files)
    ms.set_rng_state(json.loads(d["rng_state"]))
    assert opt2.current_step == opt.current_step - 1
    assert _step(net2, opt2) == expected_next


# -- errors before any write ---------------------------------------------------------------------
def test_missing_rank_and_bad_shapes_write_nothing(setup):
    tmp, _, src, per_rank, st = setup
    import shutil
    shutil.rmtree(os.path.join(src, "rank_1"))
    with pytest.raises(OpValueError, match="transform_checkpoints.*none for ranks \\[1\\]"):
        ms.transform_checkpoints(src, str(tmp / "out1"), "net", st["tp2dp2"], st["tp4"])
    assert not os.path.exists(tmp / "out1")
    # rank 1 back, with a wrongly shaped piece of wq.weight
    os.makedirs(os.path.join(src, "rank_1"))
    bad = dict(per_rank[1])
    bad["wq.weight"] = np.zeros((8, 4), np.float32)
    save_checkpoint(bad, os.path.join(src, "rank_1", "net1.ckpt"))
    with pytest.raises(OpValueError, match="'wq.weight' on rank 1 of shape \\(4, 4\\)"):
        ms.transform_checkpoints(src, str(tmp / "out2"), "net", st["tp2dp2"], st["tp4"])
    assert not os.path.exists(tmp / "out2")
    # replicas that drifted apart (rank 3 is rank 1's dp copy)
    drift = dict(per_rank[1])
    drift["moment1.wo.weight"] = drift["moment1.wo.weight"] + 1
    p = os.path.join(src, "rank_1", "net1.ckpt")
    os.chmod(p, 0o600)
    save_checkpoint(drift, p)
    with pytest.raises(OpValueError, match="identical replicas of 'moment1.wo.weight'"):
        ms.transform_checkpoints(src, str(tmp / "out3"), "net", st["tp2dp2"], st["tp4"])
    assert not os.path.exists(tmp / "out3")


def test_argument_errors(setup, tmp_path):
    tmp, _, src, _, st = setup
    other = save_strategy_file(str(tmp / "other.json"), {"wq.weight": ((16, 4), TP4("mp", "None"))})
    with pytest.raises(OpValueError, match="same global shape for 'wq.weight'"):
        ms.transform_checkpoints(src, str(tmp / "o"), "net", st["tp2dp2"], other)
    with pytest.raises(OpValueError, match="rank_list_for_transform.*\\[0, 4\\)"):
        ms.parallel.rank_list_for_transform(4, st["tp2dp2"], st["tp4"])
    with pytest.raises(OpValueError, match="transform_checkpoint_by_rank.*without ranks"):
        ms.transform_checkpoint_by_rank(1, {0: os.path.join(src, "rank_0", "net0.ckpt")},
                                        str(tmp / "x.ckpt"), st["tp2dp2"], st["tp4"])
    with pytest.raises(OpValueError, match="output_format"):
        ms.transform_checkpoints(src, str(tmp / "o"), "net", st["tp2dp2"], st["tp4"], output_format="npz")
    with pytest.raises(OpValueError, match="src_checkpoints_dir"):
        ms.transform_checkpoints(str(tmp / "nowhere"), str(tmp / "o"), "net", st["tp2dp2"], st["tp4"])
    assert not os.path.exists(tmp / "o")


def test_optimizer_parallel_checkpoint_reshards(tmp_path):
    """ZeRO-style files (each rank holds 1/2 of its model-parallel piece of the weights and of their
    Adam moments) -> one process -> tp4 -> back, bit exact."""
    state = _full_state(4)
    zero = {n: (shape, DP_TP(*dims), 2) for n, (shape, dims, _) in PARAMS.items()}
    zero_file = save_strategy_file(str(tmp_path / "zero.json"), zero)
    layouts = build_searched_strategy(zero_file)
    src = tmp_path / "src"
    per_rank = {}
    for r in range(4):
        items = {}
        for name, value in state.items():
            base = name.split(".", 1)[1] if name.startswith("moment") else name
            items[name] = shard_of(value, layouts[base].layout, r) if base in layouts else value
        per_rank[r] = items
        os.makedirs(src / f"rank_{r}")
        save_checkpoint(items, str(src / f"rank_{r}" / f"net{r}.ckpt"))
    assert per_rank[0]["wq.weight"].shape == (2, 4)            # 8 rows / 2 (mp) / 2 (optimizer shard)
    ms.transform_checkpoints(str(src), str(tmp_path / "one"), "net", zero_file, None)
    _assert_same(_load(str(tmp_path / "one" / "rank_0" / "net0.ckpt")), state)
    tp4 = _strategy(TP4, 4, tmp_path, "tp4.json")
    ms.transform_checkpoints(str(src), str(tmp_path / "tp4"), "net", zero_file, tp4)
    ms.transform_checkpoints(str(tmp_path / "tp4"), str(tmp_path / "back"), "net", tp4, zero_file)
    for r in range(4):
        _assert_same(_load(str(tmp_path / "back" / f"rank_{r}" / f"net{r}.ckpt")), per_rank[r])


# ---------------------------------------------------------------------------------------------------
# the training state a rank saves (weights + optimizer state + RNG) and the strategy of a dp x tp LLaMA
def _trained_pair(seed=0):
    from minispore.mint.optim import AdamW
    ms.set_seed(seed)
    net = nn.Dense(4, 3, dtype=ms.float64)
    opt = AdamW(net.trainable_params(), lr=0.1)
    x = ms.Tensor(np.arange(8.0).reshape(2, 4))
    grads = ms.grad(lambda t: (net(t) ** 2).sum(), None, opt.parameters)(x)
    opt(grads)
    return net, opt


def test_training_state_dict_holds_weights_moments_counter_and_rng():
    from minispore.parallel.checkpoint_transform import training_state_dict
    net, opt = _trained_pair()
    state = training_state_dict(net, opt)
    assert sorted(state) == sorted(["weight", "bias", "exp_avg.weight", "exp_avg.bias", "exp_avg_sq.weight",
                                    "exp_avg_sq.bias", "state_step", "rng_state"])
    assert int(state["state_step"]) == 1 and np.abs(state["exp_avg.weight"]).max() > 0
    assert json.loads(state["rng_state"]) == ms.common.context.get_rng_state()


def test_load_training_state_round_trip_restores_everything(tmp_path):
    from minispore.common import context
    from minispore.parallel.checkpoint_transform import load_training_state, training_state_dict
    net, opt = _trained_pair(seed=0)
    path = str(tmp_path / "state.ckpt")
    save_checkpoint(training_state_dict(net, opt), path)
    expected_draw = context.rng().random(3)             # what the saved RNG produces next
    fresh_net, fresh_opt = _trained_pair(seed=7)         # other weights, moments and RNG
    load_training_state(ms.load_checkpoint(path), fresh_net, fresh_opt)
    for (_, a), (_, b) in zip(net.parameters_and_names(), fresh_net.parameters_and_names()):
        assert a.asnumpy().tobytes() == b.asnumpy().tobytes()
    for name in ("exp_avg", "exp_avg_sq"):
        for a, b in zip(getattr(opt, name), getattr(fresh_opt, name)):
            assert a.asnumpy().tobytes() == b.asnumpy().tobytes()
    assert int(fresh_opt.state_step.asnumpy()) == 1
    assert context.rng().random(3).tolist() == expected_draw.tolist()


def test_load_training_state_refuses_missing_moments_and_changes_nothing(tmp_path):
    from minispore.parallel.checkpoint_transform import load_training_state, training_state_dict
    net, opt = _trained_pair(seed=0)
    state = {k: v for k, v in training_state_dict(net, opt).items() if not k.startswith("exp_avg_sq.")}
    other, other_opt = _trained_pair(seed=3)
    before = other.weight.asnumpy().copy()
    with pytest.raises(OpValueError, match="load_training_state.*exp_avg_sq.bias"):
        load_training_state(state, other, other_opt)
    assert other.weight.asnumpy().tobytes() == before.tobytes()
    state = training_state_dict(net, opt)
    state["rng_state"] = "{not json"
    with pytest.raises(OpValueError, match="load_training_state.*RNG"):
        load_training_state(state, other, other_opt)
    del state["rng_state"]
    with pytest.raises(OpValueError, match="rng_state"):
        load_training_state(state, other, other_opt)
    load_training_state(state, other, other_opt, restore_rng=False)        # the RNG is optional on request
    assert other.weight.asnumpy().tobytes() == net.weight.asnumpy().tobytes()


def test_tensor_parallel_layouts_of_a_llama():
    from minispore.llm import Llama, LlamaConfig
    from minispore.llm.tensor_parallel import tensor_parallel_llama
    from minispore.parallel.strategy_file import tensor_parallel_layouts
    cfg = LlamaConfig(vocab_size=32, dim=16, n_layers=1, n_heads=4, n_kv_heads=4, ffn_dim=32, max_seq_len=8,
                      multiple_of=16, tie_embeddings=False)
    full = Llama(cfg)
    layouts = tensor_parallel_layouts(full, data_parallel=4)           # plain data parallel: all replicated
    assert set(layouts) == {n for n, _ in full.parameters_and_names()}
    shape, layout = layouts["layers.0.attention.wq.weight"]
    assert shape == (16, 16) and layout.device_matrix == (4, 1) and layout.to_dict()["tensor_map"] == (-1, -1)
    tp = tensor_parallel_llama(full)                                   # a world of one: tp = 1
    shape, layout = tensor_parallel_layouts(tp)["layers.0.attention.wo.weight"]
    assert shape == (16, 16) and layout.to_dict()["tensor_map"] == (-1, 0)      # row-parallel: dim 1 over "tp"
    with pytest.raises(OpValueError, match="tensor_parallel_layouts"):
        tensor_parallel_layouts(full, data_parallel=0)
