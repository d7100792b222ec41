"""Checkpoints as untrusted input (issue 12): the checksum manifest over state.json and the weights,
checkpoint directories that resolve outside their run, files that are not regular files, and loads
that either change every Parameter or none.

Oracles: the documented canonical form of state.json, recomputed here with hashlib and json (so a
test can write a *consistent* but hostile state.json), the bytes and values saved before, and
copies of every Parameter taken before a load that must fail.
"""
import hashlib
import json
import os
import shutil
import warnings

import numpy as np
import pytest

import minispore as ms
from minispore.common import context
from minispore.common.errors import OpTypeError, OpValueError
from minispore.common.memory_limit import MemoryLimitError
from minispore.common.tensor import Parameter
from minispore.dataset import BatchSampler, CharTokenizer
from minispore.train import (CheckpointError, CheckpointManager, load_checkpoint, load_param_into_net,
                             save_checkpoint)
from minispore.train import checkpoint_manager as cm
from minispore.train import safetensors_codec, serialization
from hostile_io import run_with_deadline

needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs os.mkfifo")
needs_dev_zero = pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")


class FakeNet:
    """Duck-typed Cell with three Parameters (so a load can fail *between* two of them)."""

    def __init__(self, scale=1.0):
        self.params = [ms.Parameter(np.full((4, 3), scale, np.float32), name="layer.w"),
                       ms.Parameter(np.arange(3, dtype=np.float32) * scale, name="layer.b"),
                       ms.Parameter(np.array(7, np.int32), name="layer.count")]

    def parameters_and_names(self):
        return [(p.name, p) for p in self.params]


def _values(net):
    return {name: p.asnumpy().copy() for name, p in net.parameters_and_names()}


def _assert_unchanged(net, before):
    after = _values(net)
    assert sorted(after) == sorted(before)
    for name, value in before.items():
        assert after[name].dtype == value.dtype and after[name].tobytes() == value.tobytes(), name


def _saved(tmp_path, steps=(1,), name="run", sampler=None):
    """A run directory with one checkpoint per step (weights differ per step)."""
    mgr = CheckpointManager(tmp_path / name, keep=None)
    for step in steps:
        mgr.save(step, FakeNet(scale=float(step)), extra_state={"note": f"step {step}"}, config={"lr": 0.5},
                 sampler=sampler)
    return mgr


def canonical_sha256(state: dict) -> str:
    """The checksum as the checkpoint_manager docstring defines it, computed independently."""
    body = {k: v for k, v in state.items() if k != "state_sha256"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def _rewrite_state(ckpt, edit, reseal=False):
    """Apply `edit(state)` to ckpt/state.json the way a person with an editor would (indent 1);
    `reseal=True` also recomputes state_sha256, giving a consistent file with hostile content."""
    path = os.path.join(ckpt, "state.json")
    state = json.load(open(path))
    edit(state)
    if reseal:
        state["state_sha256"] = canonical_sha256(state)
    os.chmod(path, 0o600)
    with open(path, "w") as f:
        json.dump(state, f, indent=1)


# ------------------------------------------------------------------------------------------ the manifest
def test_state_json_carries_the_canonical_sha256_of_its_own_content(tmp_path):
    mgr = _saved(tmp_path)
    state = json.load(open(os.path.join(mgr.path_for(1), "state.json")))
    assert state["format_version"] == 2
    assert state["state_sha256"] == canonical_sha256(state)
    model = open(os.path.join(mgr.path_for(1), "model.safetensors"), "rb").read()
    assert state["model_sha256"] == hashlib.sha256(model).hexdigest()
    # the checksum covers content, not layout: the same values re-indented still load
    _rewrite_state(mgr.path_for(1), lambda s: None)
    assert cm.read_state(mgr.path_for(1))["step"] == 1


def test_every_single_bit_flip_in_state_json_is_refused_or_changes_nothing(tmp_path):
    mgr = _saved(tmp_path)
    path = os.path.join(mgr.path_for(1), "state.json")
    original = open(path, "rb").read()
    content = json.loads(original)
    os.chmod(path, 0o600)
    fd = os.open(path, os.O_WRONLY)
    refused = 0
    try:
        for i in range(len(original)):                 # byte i gets bit i % 8 flipped, in place
            os.pwrite(fd, bytes([original[i] ^ (1 << (i % 8))]), i)
            try:
                state = cm.read_state(mgr.path_for(1))
            except CheckpointError:
                refused += 1
                continue
            finally:
                os.pwrite(fd, original[i:i + 1], i)
            # accepted only when the flip did not change a single value ("1e-05" -> "1E-05" is one bit)
            del state["path"]
            assert state == content, f"a flip at byte {i} changed the content without an error"
    finally:
        os.close(fd)
    assert refused >= len(original) - 10


@pytest.mark.parametrize("field", ["step", "net_params", "model_sha256", "config", "extra_state"])
def test_an_edited_field_is_refused_before_the_net_changes(tmp_path, field):
    mgr = _saved(tmp_path, steps=(1, 2))
    edits = {"step": lambda s: s.update(step=5), "net_params": lambda s: s["net_params"].reverse(),
             "model_sha256": lambda s: s.update(model_sha256="0" * 64),
             "config": lambda s: s["config"].update(lr=0.05), "extra_state": lambda s: s["extra_state"].clear()}
    _rewrite_state(mgr.path_for(2), edits[field])
    net = FakeNet(scale=-1.0)
    before = _values(net)
    with pytest.raises(CheckpointError, match=r"state\.json.*does not match its state_sha256"):
        mgr.load("latest", net)
    _assert_unchanged(net, before)


def test_a_checkpoint_from_before_the_checksum_loads_with_a_warning(tmp_path):
    mgr = _saved(tmp_path)

    def legacy(state):
        del state["state_sha256"]
        state["format_version"] = 1
    _rewrite_state(mgr.path_for(1), legacy)
    net = FakeNet(scale=-1.0)
    with pytest.warns(UserWarning, match="has no state_sha256.*format_version 1.*re-save"):
        assert mgr.load("latest", net)["step"] == 1
    np.testing.assert_array_equal(net.params[0].asnumpy(), 1.0)
    # its weights are still checked against the model_sha256 it does have
    model = os.path.join(mgr.path_for(1), "model.safetensors")
    os.chmod(model, 0o600)
    raw = bytearray(open(model, "rb").read())
    raw[-1] ^= 1
    open(model, "wb").write(bytes(raw))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(CheckpointError, match="does not match the sha256"):
            mgr.load("latest", FakeNet())


def test_format_2_without_its_checksum_is_refused(tmp_path):
    mgr = _saved(tmp_path)
    _rewrite_state(mgr.path_for(1), lambda s: s.pop("state_sha256"))
    with pytest.raises(CheckpointError, match="lacks its 'state_sha256'"):
        cm.read_state(mgr.path_for(1))
    _rewrite_state(mgr.path_for(1), lambda s: s.update(format_version=0))
    with pytest.raises(CheckpointError, match="format_version 0"):
        cm.read_state(mgr.path_for(1))


# ------------------------------------------------------------------------------------------ the LLaMA run
@pytest.fixture(scope="module")
def llama_run(tmp_path_factory):
    """A run directory written the way `minispore train` writes it (same run_config, optimizer,
    sampler and extra_state shape as minispore/llm/trainer.py), plus greedy text from it."""
    from minispore.llm import Llama, LlamaConfig
    from minispore.llm.cli_commands import load_for_generation
    from minispore.llm.generate import generate_text
    from minispore.llm.trainer import TrainConfig, build_optimizer

    out = tmp_path_factory.mktemp("llama") / "run"
    text = "First Citizen:\nBefore we proceed any further, hear me speak.\n" * 4
    tokenizer = CharTokenizer.from_text(text)
    mc = LlamaConfig(vocab_size=tokenizer.vocab_size, dim=16, n_layers=1, n_heads=2, max_seq_len=16,
                     multiple_of=16, dropout=0.0)
    tc = TrainConfig(out_dir=str(out), max_iters=2, lr_decay_iters=2, warmup_iters=0, batch_size=2)
    ms.set_seed(tc.seed)
    model = Llama(mc)
    optimizer, _ = build_optimizer(model, tc)
    sampler = BatchSampler(tokenizer.encode(text), tc.batch_size, mc.max_seq_len, seed=tc.seed)
    run_config = {"model": mc.to_dict(), "train": tc.schedule_dict(), "tokenizer": tokenizer.to_dict()}
    extra = {"history": {"iter": [1], "train_loss": [4.1], "lr": [1e-3]},
             "evals": {"iter": [], "train_loss": [], "val_loss": []}, "wall_time_s": 0.5, "train_time_s": 0.4}
    CheckpointManager(out, keep=3).save(1, model, optimizer, extra, config=run_config, sampler=sampler)
    net, tok = load_for_generation(str(out))
    greedy = generate_text(net, tok, "First", max_new_tokens=12, temperature=0.0)
    return out, greedy


@pytest.mark.parametrize("edit", ["norm_eps", "rope_theta", "max_seq_len", "tokenizer chars"])
def test_edited_model_config_or_tokenizer_is_refused_by_generate(llama_run, tmp_path, edit):
    from minispore.llm.cli_commands import load_for_generation
    from minispore.llm.generate import generate_text
    out, greedy = llama_run
    run = tmp_path / "run"
    shutil.copytree(out, run)
    net, tok = load_for_generation(str(run))                 # the copy generates what the original did
    assert generate_text(net, tok, "First", max_new_tokens=12, temperature=0.0) == greedy

    def change(state):
        model, chars = state["config"]["model"], state["config"]["tokenizer"]["chars"]
        if edit == "norm_eps":
            model["norm_eps"] = 1e-2
        elif edit == "rope_theta":
            model["rope_theta"] = 500.0
        elif edit == "max_seq_len":
            model["max_seq_len"] = 8
        else:                                                # two characters swap ids
            state["config"]["tokenizer"]["chars"] = chars[1] + chars[0] + chars[2:]
    _rewrite_state(os.path.join(run, "ckpt-000001"), change)
    with pytest.raises(CheckpointError, match=r"state\.json.*does not match its state_sha256.*edited or damaged"):
        load_for_generation(str(run))


# ------------------------------------------------------------------------------------------ where checkpoints are
def test_a_symlinked_checkpoint_of_another_run_is_never_the_newest(tmp_path):
    mgr = _saved(tmp_path, steps=(1, 2))
    other = _saved(tmp_path, steps=(99,), name="other")
    os.symlink(other.path_for(99), mgr.path_for(500))
    assert mgr.latest() == mgr.path_for(2)
    assert [s for s, _ in mgr.checkpoints()] == [1, 2]
    assert cm.find_checkpoint(mgr.directory) == mgr.path_for(2)
    open(os.path.join(mgr.directory, "latest"), "w").write("ckpt-000500\n")
    assert mgr.latest() == mgr.path_for(2)                   # the pointer does not make it count
    net = FakeNet(scale=-1.0)
    before = _values(net)
    with pytest.raises(CheckpointError, match="outside the run directory"):
        mgr.load(500, net)
    with pytest.raises(CheckpointError, match="outside the run directory"):
        cm.read_state(mgr.path_for(500))
    _assert_unchanged(net, before)
    # pruning never reaches through the link into the other run
    pruning = CheckpointManager(mgr.directory, keep=1)
    pruning.save(3, FakeNet(scale=3.0))
    assert [s for s, _ in pruning.checkpoints()] == [3]
    assert os.path.isdir(other.path_for(99)) and other.load("latest", FakeNet())["step"] == 99


def test_a_model_file_linked_from_another_run_is_refused(tmp_path):
    mgr = _saved(tmp_path, steps=(1,))
    other = _saved(tmp_path, steps=(1,), name="other")             # identical bytes: the sha256 agrees
    model = os.path.join(mgr.path_for(1), "model.safetensors")
    os.remove(model)
    os.symlink(os.path.join(other.path_for(1), "model.safetensors"), model)
    with pytest.raises(CheckpointError, match="model.safetensors.*outside the checkpoint directory"):
        mgr.load(1, FakeNet())


@needs_fifo
def test_a_fifo_latest_pointer_does_not_block(tmp_path):
    mgr = _saved(tmp_path, steps=(1, 2))
    pointer = os.path.join(mgr.directory, "latest")
    os.remove(pointer)
    os.mkfifo(pointer)
    r = run_with_deadline(mgr.latest, "reading a FIFO 'latest'", [pointer])
    assert r.get("error") is None and r.get("value") == mgr.path_for(2)


@needs_fifo
@pytest.mark.parametrize("which", ["model.safetensors", "state.json"])
def test_a_fifo_inside_a_checkpoint_is_refused_without_blocking(tmp_path, which):
    mgr = _saved(tmp_path, steps=(1, 2))
    victim = os.path.join(mgr.path_for(2), which)
    os.remove(victim)
    os.mkfifo(victim)
    error = run_with_deadline(lambda: mgr.load(mgr.path_for(2), FakeNet()), f"loading with a FIFO {which}",
                              [victim]).get("error")
    assert isinstance(error, CheckpointError) and which in str(error) and "FIFO" in str(error)
    assert mgr.latest() == mgr.path_for(1)                        # not a checkpoint to resume from


@needs_fifo
@pytest.mark.parametrize("fmt", ["ckpt", "safetensors"])
def test_load_checkpoint_names_a_fifo(tmp_path, fmt):
    path = str(tmp_path / f"net.{fmt}")
    os.mkfifo(path)
    error = run_with_deadline(lambda: load_checkpoint(path, format=fmt), "load_checkpoint of a FIFO",
                              [path]).get("error")
    assert isinstance(error, CheckpointError) and "FIFO" in str(error)


@needs_dev_zero
@pytest.mark.parametrize("which", ["model.safetensors", "state.json", "latest"])
def test_a_symlink_to_dev_zero_is_never_read(tmp_path, which):
    mgr = _saved(tmp_path, steps=(1, 2))
    victim = os.path.join(mgr.directory if which == "latest" else mgr.path_for(2), which)
    os.remove(victim)
    os.symlink("/dev/zero", victim)
    if which == "latest":
        assert mgr.latest() == mgr.path_for(2)
        return
    with pytest.raises(CheckpointError, match=f"{which}.*/dev/zero"):
        mgr.load(mgr.path_for(2), FakeNet())
    assert mgr.latest() == mgr.path_for(1)


def test_a_checkpoint_larger_than_the_memory_limit_is_refused_before_reading(tmp_path, monkeypatch):
    path = str(tmp_path / "big.ckpt")
    save_checkpoint({"w": np.zeros(4096, np.float32)}, path)
    monkeypatch.setenv("MINISPORE_MEMORY_LIMIT", "8K")
    with pytest.raises(MemoryLimitError, match="big.ckpt"):
        load_checkpoint(path)
    monkeypatch.setenv("MINISPORE_MEMORY_LIMIT", "1M")
    assert load_checkpoint(path)["w"].shape == (4096,)


# ------------------------------------------------------------------------------------------ safetensors headers
def _safetensors_bytes(header, data: bytes) -> bytes:
    h = json.dumps(header).encode()
    return len(h).to_bytes(8, "little") + h + data


def test_safetensors_header_cap_and_coverage(tmp_path, monkeypatch):
    good = _safetensors_bytes({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 8)
    tensors, _ = safetensors_codec.decode(good, "mem")
    assert tensors["w"].tolist() == [0.0, 0.0]
    monkeypatch.setattr(safetensors_codec, "MAX_HEADER_BYTES", 32)
    with pytest.raises(CheckpointError, match="header of .* bytes; at most 32"):
        safetensors_codec.decode(good, "mem")
    monkeypatch.undo()
    gap = _safetensors_bytes({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                              "b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}}, b"\0" * 12)
    with pytest.raises(CheckpointError, match="not a valid safetensors file.*'b' starts at byte 8"):
        safetensors_codec.decode(gap, "mem")
    trailing = _safetensors_bytes({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}, b"\0" * 9)
    with pytest.raises(CheckpointError, match="not a valid safetensors file.*cover 4 of the 9"):
        safetensors_codec.decode(trailing, "mem")
    deep = _safetensors_bytes({"__metadata__": {"x": "y"}, "w": {"dtype": "F32", "shape": [[[[[[1]]]]]],
                                                                 "data_offsets": [0, 4]}}, b"\0" * 4)
    with pytest.raises(CheckpointError, match="not a valid safetensors file.*shape"):
        safetensors_codec.decode(deep, "mem")


# ------------------------------------------------------------------------------------------ all or nothing
class _FailOnce:
    """Parameter.set_data that raises `error` on its `n`-th call, then behaves normally again (a
    MemoryError or Ctrl-C arriving in the middle of an assignment loop)."""

    def __init__(self, error, n=2):
        self.error, self.n, self.calls = error, n, 0
        self.real = Parameter.set_data

    def __call__(self, param, *args, **kwargs):
        self.calls += 1
        if self.calls == self.n:
            raise self.error
        return self.real(param, *args, **kwargs)

    def __get__(self, param, owner=None):        # looked up on a Parameter: bind like a method
        return self if param is None else (lambda *args, **kwargs: self(param, *args, **kwargs))


@pytest.mark.parametrize("error", [MemoryError("injected"), KeyboardInterrupt()], ids=["MemoryError", "Ctrl-C"])
def test_a_failure_half_way_through_manager_load_changes_nothing(tmp_path, monkeypatch, error):
    sampler = BatchSampler(np.arange(200) % 11, batch_size=2, block_size=4, seed=3)
    mgr = _saved(tmp_path, steps=(4,), sampler=sampler)
    sampler.next_batch()
    net = FakeNet(scale=-1.0)
    before, rng_before, sampler_before = _values(net), context.get_rng_state(), sampler.state_dict()
    fail = _FailOnce(error)
    monkeypatch.setattr(Parameter, "set_data", fail)
    with pytest.raises(type(error)):
        mgr.load("latest", net, sampler=sampler)
    assert fail.calls >= 2
    monkeypatch.undo()
    _assert_unchanged(net, before)
    assert context.get_rng_state() == rng_before and sampler.state_dict() == sampler_before
    assert mgr.load("latest", net)["step"] == 4                   # and a plain retry works
    np.testing.assert_array_equal(net.params[0].asnumpy(), 4.0)


def test_a_consistent_state_naming_a_tensor_the_weights_lack_changes_nothing(tmp_path):
    """A state.json whose checksum is right but whose net_params name a tensor that neither its
    tensor list nor the model file holds (hand-made, or from a buggy writer): refused before the
    first Parameter is written."""
    class WithoutBias(FakeNet):
        def parameters_and_names(self):
            return [(p.name, p) for p in self.params if p.name != "layer.b"]

    mgr = CheckpointManager(tmp_path / "run")
    mgr.save(1, WithoutBias(scale=2.0))
    _rewrite_state(mgr.path_for(1), lambda s: s["net_params"].append("layer.b"), reseal=True)
    net = FakeNet(scale=-1.0)
    before = _values(net)
    with pytest.raises(CheckpointError, match="net_params.*'layer.b'.*not in its 'tensors'"):
        mgr.load("latest", net)
    _assert_unchanged(net, before)


@pytest.mark.parametrize("error", [MemoryError("injected"), KeyboardInterrupt()], ids=["MemoryError", "Ctrl-C"])
def test_a_failure_half_way_through_load_param_into_net_changes_nothing(monkeypatch, error):
    net = FakeNet(scale=-1.0)
    values = {n: ms.Parameter(v * 0 + 5, name=n) for n, v in _values(FakeNet()).items()}
    before = _values(net)
    fail = _FailOnce(error)
    monkeypatch.setattr(Parameter, "set_data", fail)
    with pytest.raises(type(error)):
        load_param_into_net(net, values)
    assert fail.calls >= 2
    monkeypatch.undo()
    _assert_unchanged(net, before)
    assert load_param_into_net(net, values) == ([], [])
    np.testing.assert_array_equal(net.params[1].asnumpy(), [5, 5, 5])


# ------------------------------------------------------------------------------------------ assign_all
def test_assign_all_checks_every_entry_before_assigning_any():
    net = FakeNet(scale=-1.0)
    params = dict(net.parameters_and_names())
    before = _values(net)
    good_w, good_b = np.ones((4, 3), np.float32), np.ones(3, np.float32)
    cases = [({"layer.w": good_w, "layer.b": np.ones(4, np.float32)}, OpValueError, r"'layer.b'.*\[4\].*\[3\]"),
             ({"layer.w": good_w, "layer.b": np.ones(3, np.float64)}, OpValueError, r"'layer.b'.*Float64.*Float32"),
             ({"layer.w": good_w, "nope": good_b}, OpValueError, r"'nope' names no Parameter"),
             ({"layer.w": good_w, "layer.b": [1.0, 2.0, 3.0]}, OpTypeError, r"ndarray.*'layer.b' is a list")]
    for arrays, cls, pattern in cases:
        with pytest.raises(cls, match=pattern) as info:
            serialization.assign_all(params, arrays, "from_pretrained")
        assert "from_pretrained" in str(info.value)
        _assert_unchanged(net, before)
    with pytest.raises(OpTypeError, match="'where'"):
        serialization.assign_all(params, {}, None)


def test_assign_all_takes_owned_arrays_and_copies_read_only_ones():
    net = FakeNet()
    params = dict(net.parameters_and_names())
    w = np.full((4, 3), 2.0, np.float32)
    b = np.frombuffer(np.array([1, 2, 3], np.float32).tobytes(), np.float32)     # read-only
    assert serialization.assign_all(params, {"layer.w": w, "layer.b": b}, "test") is None
    assert np.shares_memory(net.params[0].asnumpy(), w)           # no copy of an array the caller hands over
    assert net.params[1].asnumpy().flags.writeable and net.params[1].asnumpy().tolist() == [1, 2, 3]
    np.testing.assert_array_equal(net.params[2].asnumpy(), 7)     # not in `arrays`: left alone


def test_assign_all_tied_parameter_needs_one_value():
    shared = ms.Parameter(np.zeros(2, np.float32), name="embed.weight")
    params = {"embed.weight": shared, "lm_head.weight": shared}
    ones, zeros = np.ones(2, np.float32), np.zeros(2, np.float32)
    serialization.assign_all(params, {"embed.weight": ones, "lm_head.weight": ones.copy()}, "t")
    np.testing.assert_array_equal(shared.asnumpy(), [1, 1])
    with pytest.raises(OpValueError, match="same Parameter.*different values"):
        serialization.assign_all(params, {"embed.weight": zeros, "lm_head.weight": ones}, "t")
    np.testing.assert_array_equal(shared.asnumpy(), [1, 1])


def test_assign_all_restores_every_parameter_when_an_assignment_fails(monkeypatch):
    net = FakeNet(scale=-1.0)
    before = _values(net)
    monkeypatch.setattr(Parameter, "set_data", _FailOnce(KeyboardInterrupt(), n=3))
    arrays = {n: np.full_like(v, 9) for n, v in before.items()}
    with pytest.raises(KeyboardInterrupt):
        serialization.assign_all(dict(net.parameters_and_names()), arrays, "test")
    monkeypatch.undo()
    _assert_unchanged(net, before)


def test_real_mindspore_ckpt_loads_through_the_untrusted_reader(tmp_path):
    """A file that is only reachable through a symlink (inside or not) is fine for load_checkpoint:
    the rule about staying inside applies to checkpoint *directories*; what is refused is a file
    that is not a regular file."""
    path = str(tmp_path / "w.ckpt")
    save_checkpoint({"w": np.arange(6, dtype=np.float32).reshape(2, 3)}, path)
    os.symlink(path, tmp_path / "alias.ckpt")
    assert load_checkpoint(str(tmp_path / "alias.ckpt"))["w"].asnumpy().tolist() == [[0, 1, 2], [3, 4, 5]]
    assert serialization.read_checkpoint_items(path)[0][0] == "w"


@pytest.mark.parametrize("fmt", ["ckpt", "safetensors"])
def test_decoded_arrays_own_their_memory_not_the_files_buffer(fmt):
    """The decoders slice the file's buffer without copying it, then copy each tensor out once:
    the arrays must be writable, aligned and independent of the buffer (which is then dropped)."""
    from minispore.train import ckpt_codec
    w = np.arange(12, dtype=np.float32).reshape(3, 4)
    odd = np.array([1, -2, 3], np.int64)                     # after a 3-byte int8 tensor in the file
    tiny = np.array([7, 8, 9], np.int8)
    if fmt == "ckpt":
        buf = bytearray(ckpt_codec.encode([("a", tiny), ("b", odd), ("w", w)]))
        got = dict(ckpt_codec.decode(buf, "mem"))
    else:
        buf = bytearray(safetensors_codec.encode({"a": tiny, "b": odd, "w": w}, {}))
        got, _ = safetensors_codec.decode(buf, "mem")
    buf[:] = b"\xff" * len(buf)                              # scribble over the file's bytes
    for name, expected in (("a", tiny), ("b", odd), ("w", w)):
        arr = got[name]
        assert arr.dtype == expected.dtype and arr.tolist() == expected.tolist(), name
        assert arr.flags.writeable and arr.flags.aligned and arr.flags.owndata, name


# ------------------------------------------------------------------------------------------ found by the reliability report
# Mutants that carry a *valid* checksum (re-signed), so they reach the checks behind it.

@pytest.mark.parametrize("step", [-1, 7])
def test_a_resealed_step_that_is_negative_or_not_the_directorys_is_refused(tmp_path, step):
    mgr = _saved(tmp_path, steps=(1, 2))
    _rewrite_state(mgr.path_for(2), lambda s: s.update(step=step), reseal=True)
    net = FakeNet(scale=-1.0)
    before = _values(net)
    with pytest.raises(CheckpointError, match="negative step" if step < 0 else "named for step 2"):
        mgr.load("latest", net)
    _assert_unchanged(net, before)


def test_a_resealed_rng_state_too_wide_for_the_generator_is_a_clear_error(tmp_path):
    mgr = _saved(tmp_path)
    _rewrite_state(mgr.path_for(1), lambda s: s["rng_state"]["state"].update(state=2**200), reseal=True)
    net = FakeNet(scale=-1.0)
    before, rng_before = _values(net), context.get_rng_state()
    with pytest.raises(CheckpointError, match="unusable rng_state"):
        mgr.load("latest", net)
    _assert_unchanged(net, before)
    assert context.get_rng_state() == rng_before


def test_crc_layout_without_crc_num_is_a_damaged_header_not_an_unchecked_file(tmp_path):
    path = str(tmp_path / "e.safetensors")
    net = FakeNet()
    save_checkpoint(net, path, crc_check=True, format="safetensors")
    raw = bytearray(open(path, "rb").read())
    at = raw.index(b'"crc_num"') + 1
    raw[at] ^= ord("c") ^ ord("b")                      # one bit: "crc_num" -> "brc_num"
    open(path, "wb").write(bytes(raw))
    with pytest.raises(CheckpointError, match="no 'crc_num'; the header is damaged"):
        load_checkpoint(path, crc_check=True, format="safetensors")
