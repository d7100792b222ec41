"""save_checkpoint / load_checkpoint / load_param_into_net: MindSpore semantics, file formats, and
every way a checkpoint file can be broken (each must give a CheckpointError naming the file).

Oracles: the safetensors package itself (files it writes must load; files we write must parse
with it), the safetensors header read by hand, hand-assembled protobuf bytes for `.ckpt`, and
bit-level comparisons of the stored values.
"""
import json
import os
import pickle
import stat
import warnings

import ml_dtypes
import numpy as np
import pytest
import safetensors.numpy

import minispore as ms
from minispore.common.errors import MinisporeError, MinisporeRuntimeError, OpTypeError, OpValueError
from minispore.train import CheckpointError, load_checkpoint, load_param_into_net, save_checkpoint
from minispore.train import atomic_io, ckpt_codec, serialization

ALL_DTYPES = [np.bool_, np.uint8, np.int8, np.int16, np.int32, np.int64, np.float16,
              ml_dtypes.bfloat16, np.float32, np.float64]
ALL_DTYPES += [getattr(np, n) for n in ("uint16", "uint32", "uint64") if hasattr(ms, n)]   # where minispore has them


class FakeNet:
    """Duck-typed Cell: the checkpoint API only needs `parameters_and_names()`."""

    def __init__(self, **arrays):
        self.params = {n: ms.Parameter(a, name=n) for n, a in arrays.items()}

    def parameters_and_names(self):
        return list(self.params.items())

    def __getitem__(self, name):
        return self.params[name].asnumpy()


def _sample(dtype, shape, seed=0):
    rng = np.random.default_rng(seed)
    if dtype == np.bool_:
        return np.asarray(rng.random(shape) > 0.5)
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        return np.asarray(rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True))
    return np.asarray(rng.standard_normal(shape) * 100, dtype=dtype)


def _same_bits(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def _header(path):
    """The safetensors header, parsed by hand (an oracle independent of the package)."""
    raw = open(path, "rb").read()
    n = int.from_bytes(raw[:8], "little")
    return json.loads(raw[8:8 + n]), raw


# ------------------------------------------------------------------------------------------ round trips
@pytest.mark.parametrize("fmt", ["safetensors", "ckpt"])
def test_round_trip_every_dtype_and_shape_bit_exact(tmp_path, fmt):
    arrays = {}
    for i, dt in enumerate(ALL_DTYPES):
        name = np.dtype(dt).name
        arrays[f"{name}.matrix"] = _sample(dt, (3, 4), seed=i)
        arrays[f"{name}.scalar"] = _sample(dt, (), seed=i + 100)
        arrays[f"{name}.empty"] = _sample(dt, (0, 5), seed=i)
    arrays["f32.special"] = np.array([np.nan, np.inf, -np.inf, -0.0, 1e-45], dtype=np.float32)
    arrays["f32.transposed"] = np.arange(12, dtype=np.float32).reshape(3, 4).T       # non-contiguous
    net = FakeNet(**arrays)
    path = tmp_path / f"all.{fmt}"
    save_checkpoint(net, str(path), format=fmt)
    loaded = load_checkpoint(str(path), format=fmt)
    assert set(loaded) == set(arrays)
    for name, arr in arrays.items():
        p = loaded[name]
        assert isinstance(p, ms.Parameter) and p.name == name
        assert _same_bits(p.asnumpy(), arr), name                 # dtype, exact shape (0-d too), bytes
        assert p.asnumpy().flags.writeable


def test_safetensors_file_layout_follows_mindspore(tmp_path):
    net = FakeNet(**{"fc.weight": np.ones((2, 3), np.float32), "bn.beta": np.zeros(3, np.float16)})
    save_checkpoint(net, str(tmp_path / "m.safetensors"), format="safetensors")
    header, _ = _header(tmp_path / "m.safetensors")
    assert header["__metadata__"] == {"format": "ms"}
    assert header["fc.weight"]["dtype"] == "F32" and header["fc.weight"]["shape"] == [2, 3]
    assert header["bn.beta"]["dtype"] == "F16"
    # the package itself reads what we wrote
    from safetensors import safe_open
    with safe_open(str(tmp_path / "m.safetensors"), framework="np") as f:
        assert f.metadata() == {"format": "ms"}
        assert sorted(f.keys()) == ["bn.beta", "fc.weight"]
        np.testing.assert_array_equal(f.get_tensor("fc.weight"), np.ones((2, 3), np.float32))


def test_bfloat16_is_stored_as_the_top_half_of_float32_bits(tmp_path):
    values = np.array([1.0, -2.5, 3.140625, 65280.0], dtype=np.float32)      # exactly representable in bf16
    save_checkpoint([ms.Parameter(values.astype(ml_dtypes.bfloat16), name="b")], str(tmp_path / "b.safetensors"),
                    format="safetensors")
    header, raw = _header(tmp_path / "b.safetensors")
    assert header["b"]["dtype"] == "BF16"
    n = int.from_bytes(raw[:8], "little")
    begin, end = header["b"]["data_offsets"]
    stored = np.frombuffer(raw[8 + n + begin:8 + n + end], dtype="<u2")
    np.testing.assert_array_equal(stored, (values.view("<u4") >> 16).astype("<u2"))
    back = load_checkpoint(str(tmp_path / "b.safetensors"), format="safetensors")["b"]
    assert back.dtype == ms.bfloat16
    np.testing.assert_array_equal(back.asnumpy().astype(np.float32), values)


def test_files_written_by_the_safetensors_package_load(tmp_path):
    path = str(tmp_path / "hf.safetensors")
    safetensors.numpy.save_file({"a": np.arange(4, dtype=np.int64), "b": np.eye(2, dtype=np.float32)}, path,
                                metadata={"format": "pt"})
    loaded = load_checkpoint(path, format="safetensors")
    np.testing.assert_array_equal(loaded["a"].asnumpy(), np.arange(4))
    assert loaded["b"].dtype == ms.float32


def test_append_dict_types_and_load_param_into_net_return_values(tmp_path):
    """MindSpore's verified example: ints -> Int64, floats -> Float32, str stays str, and the extra
    entries come back in ckpt_not_load, in file order (the default format is ckpt)."""
    net = FakeNet(w=np.arange(6, dtype=np.float32).reshape(2, 3))
    path = str(tmp_path / "x.ckpt")
    save_checkpoint(net, path, append_dict={"epoch_num": 3, "lr": 0.1, "tag": "hello", "ok": True})
    d = load_checkpoint(path)
    assert d["epoch_num"].dtype == ms.int64 and d["epoch_num"].shape == () and int(d["epoch_num"]) == 3
    assert d["lr"].dtype == ms.float32 and float(d["lr"]) == np.float32(0.1)
    assert d["ok"].dtype == ms.bool_ and bool(d["ok"])
    assert d["tag"] == "hello" and isinstance(d["tag"], str)
    net2 = FakeNet(w=np.zeros((2, 3), np.float32))
    assert load_param_into_net(net2, d) == ([], ["epoch_num", "lr", "tag", "ok"])
    np.testing.assert_array_equal(net2["w"], net["w"])


def test_strings_round_trip_in_both_formats(tmp_path):
    texts = {"empty": "", "ascii": "hello", "unicode": "Grüße, 世界 🙂", "quote": 'a"b\\c\n'}
    for fmt in ("safetensors", "ckpt"):
        path = str(tmp_path / f"s.{fmt}")
        save_checkpoint([ms.Parameter(np.zeros(1, np.float32), name="p")], path, append_dict=texts, format=fmt)
        d = load_checkpoint(path, format=fmt)
        assert {k: d[k] for k in texts} == texts


def test_every_save_obj_form_saves_the_same_values(tmp_path):
    a, b = np.arange(3, dtype=np.float32), np.ones((2, 2), np.float64)
    net = FakeNet(a=a, b=b)
    forms = {
        "cell": net,
        "params": [net.params["a"], net.params["b"]],
        "dicts": [{"name": "a", "data": ms.Tensor(a)}, {"name": "b", "data": net.params["b"]}],
        "dict": {"a": net.params["a"], "b": b},
    }
    for label, obj in forms.items():
        path = str(tmp_path / f"{label}.ckpt")
        save_checkpoint(obj, path)
        d = load_checkpoint(path)
        assert list(d) == ["a", "b"], label
        assert _same_bits(d["a"].asnumpy(), a) and _same_bits(d["b"].asnumpy(), b), label
    # the dict load_checkpoint returns (with a str value) can be saved again
    save_checkpoint(load_checkpoint(path) | {"note": "x"}, str(tmp_path / "again.ckpt"))
    assert load_checkpoint(str(tmp_path / "again.ckpt"))["note"] == "x"


def test_shared_parameter_is_saved_once_and_name_clash_is_an_error(tmp_path):
    shared = ms.Parameter(np.ones(2, np.float32), name="emb")

    class Tied:
        def parameters_and_names(self):
            return [("emb", shared), ("head.weight", shared)]

    save_checkpoint(Tied(), str(tmp_path / "t.ckpt"))
    assert list(load_checkpoint(str(tmp_path / "t.ckpt"))) == ["emb"]
    with pytest.raises(OpValueError, match="'emb' twice"):
        save_checkpoint([shared, ms.Parameter(np.zeros(2, np.float32), name="emb")], str(tmp_path / "c"))


def test_choice_func_and_prefix_filters(tmp_path):
    net = FakeNet(**{"conv1.weight": np.ones(1, np.float32), "conv2.weight": np.ones(2, np.float32),
                     "fc.bias": np.ones(3, np.float32)})
    path = str(tmp_path / "f.ckpt")
    save_checkpoint(net, path, choice_func=lambda n: n.startswith("conv"))
    assert list(load_checkpoint(path)) == ["conv1.weight", "conv2.weight"]
    save_checkpoint(net, path)
    assert list(load_checkpoint(path, choice_func=lambda n: n.startswith("fc"))) == ["fc.bias"]
    assert list(load_checkpoint(path, specify_prefix="conv")) == ["conv1.weight", "conv2.weight"]
    assert list(load_checkpoint(path, filter_prefix=("conv1", "fc"))) == ["conv2.weight"]
    # the deprecated prefix arguments override choice_func (MindSpore's documented rule)
    assert list(load_checkpoint(path, specify_prefix="fc", choice_func=lambda n: False)) == ["fc.bias"]
    with pytest.raises(CheckpointError, match="empty parameter dict"):
        load_checkpoint(path, choice_func=lambda n: False)
    with pytest.raises(OpValueError):
        load_checkpoint(path, filter_prefix=[""])


def test_file_name_rules(tmp_path):
    """What real MindSpore 2.10 writes (os.listdir after each save, checked in its venv): the default
    format is ckpt; `.<format>` is appended only when the name does not end with the format string."""
    net = FakeNet(w=np.ones(1, np.float32))
    for name in ["net", "net.ckpt", "netckpt", "net.safetensors", "a.b", "x.CKPT"]:
        save_checkpoint(net, str(tmp_path / name))
    assert sorted(os.listdir(tmp_path)) == ["a.b.ckpt", "net.ckpt", "net.safetensors.ckpt", "netckpt",
                                            "x.CKPT.ckpt"]
    assert list(load_checkpoint(str(tmp_path / "netckpt"))) == ["w"]      # ends with "ckpt": accepted
    other = tmp_path / "st"
    other.mkdir()
    for name in ["s", "s.safetensors", "s.ckpt"]:
        save_checkpoint(net, str(other / name), format="safetensors")
    assert sorted(os.listdir(other)) == ["s.ckpt.safetensors", "s.safetensors"]
    save_checkpoint(net, tmp_path / "path_like.ckpt")                   # os.PathLike works too
    assert list(load_checkpoint(tmp_path / "path_like.ckpt")) == ["w"]
    # a load never guesses: the name must end with the format (MindSpore raises ValueError)
    with pytest.raises(OpValueError, match="ending with 'ckpt'"):
        load_checkpoint(str(other / "s.safetensors"))
    with pytest.raises(OpValueError, match="ending with 'safetensors'"):
        load_checkpoint(str(tmp_path / "net.ckpt"), format="safetensors")
    with pytest.raises(OpValueError, match="format"):
        save_checkpoint(net, str(tmp_path / "m.npz"), format="npz")
    os.mkdir(tmp_path / "d.ckpt")
    with pytest.raises(CheckpointError, match="is a directory"):
        save_checkpoint(net, str(tmp_path / "d.ckpt"))
    with pytest.raises(CheckpointError, match="does not exist"):
        save_checkpoint(net, str(tmp_path / "no" / "such" / "dir.ckpt"))


def test_a_ckpt_file_in_the_safetensors_format_is_refused_clearly(tmp_path):
    """format= says how to parse; bytes of the other format give a CheckpointError, not garbage."""
    net = FakeNet(w=np.arange(3, dtype=np.float32))
    save_checkpoint(net, str(tmp_path / "st.ckpt.safetensors"), format="safetensors")
    os.rename(tmp_path / "st.ckpt.safetensors", tmp_path / "st.ckpt")
    with pytest.raises(CheckpointError, match="st.ckpt"):
        load_checkpoint(str(tmp_path / "st.ckpt"))


# ------------------------------------------------------------------------------------------ atomic writes
def test_saved_file_is_read_only_and_can_be_overwritten(tmp_path):
    path = str(tmp_path / "ro.ckpt")
    save_checkpoint(FakeNet(w=np.zeros(2, np.float32)), path)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o400
    save_checkpoint(FakeNet(w=np.ones(2, np.float32)), path)       # replaces the read-only file
    np.testing.assert_array_equal(load_checkpoint(path)["w"].asnumpy(), np.ones(2))
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o400
    assert sorted(os.listdir(tmp_path)) == ["ro.ckpt"]      # no .tmp left behind


@pytest.mark.parametrize("fail_at", ["write", "fsync", "replace"])
def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path, monkeypatch, fail_at):
    path = str(tmp_path / "a.ckpt")
    save_checkpoint(FakeNet(w=np.zeros(2, np.float32)), path)
    before = open(path, "rb").read()

    def boom(*args, **kwargs):
        raise OSError(28, "No space left on device")

    if fail_at == "replace":
        monkeypatch.setattr(atomic_io.os, "replace", boom)
    elif fail_at == "fsync":
        monkeypatch.setattr(atomic_io.os, "fsync", boom)
    else:                                                          # shadow the builtin open() in atomic_io
        monkeypatch.setattr(atomic_io, "open", boom, raising=False)
    with pytest.raises(CheckpointError, match="could not be written"):
        save_checkpoint(FakeNet(w=np.ones(2, np.float32)), path)
    monkeypatch.undo()
    assert open(path, "rb").read() == before
    assert sorted(os.listdir(tmp_path)) == ["a.ckpt"]


def test_keyboard_interrupt_during_write_removes_the_temporary(tmp_path, monkeypatch):
    path = str(tmp_path / "k.ckpt")

    def interrupted(*a):
        raise KeyboardInterrupt

    monkeypatch.setattr(atomic_io.os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(FakeNet(w=np.ones(2, np.float32)), path)
    assert os.listdir(tmp_path) == []


def test_async_save_snapshots_values_and_reports_failures(tmp_path, monkeypatch):
    net = FakeNet(w=np.zeros(1000, np.float32))
    path = str(tmp_path / "async.ckpt")
    save_checkpoint(net, path, async_save=True)
    net.params["w"].asnumpy()[:] = 7.0                             # training continues and mutates in place
    np.testing.assert_array_equal(load_checkpoint(path)["w"].asnumpy(), np.zeros(1000))   # load waits
    save_checkpoint(net, path, async_save="thread")
    serialization._wait_async_saves()
    np.testing.assert_array_equal(load_checkpoint(path)["w"].asnumpy(), np.full(1000, 7.0))

    def broken(*a, **k):
        raise OSError(5, "I/O error")

    monkeypatch.setattr(serialization, "atomic_write_bytes", broken)
    save_checkpoint(net, str(tmp_path / "fails.ckpt"), async_save=True)
    with pytest.raises(MinisporeRuntimeError, match="asynchronous save_checkpoint failed"):
        serialization._wait_async_saves()
    assert not os.path.exists(tmp_path / "fails.ckpt")
    serialization._wait_async_saves()                              # the error is reported once


# ------------------------------------------------------------------------------------------ crc
def _flip(path, offset, xor=0xFF):
    os.chmod(path, 0o600)
    raw = bytearray(open(path, "rb").read())
    raw[offset] ^= xor
    open(path, "wb").write(bytes(raw))


def test_crc_detects_a_flipped_data_byte(tmp_path):
    path = str(tmp_path / "c.safetensors")
    save_checkpoint(FakeNet(w=np.arange(8, dtype=np.float32)), path, crc_check=True, format="safetensors")
    _flip(path, os.path.getsize(path) - 3)
    with pytest.raises(CheckpointError, match="crc check"):
        load_checkpoint(path, crc_check=True, format="safetensors")
    unchecked = load_checkpoint(path, format="safetensors")["w"].asnumpy()
    assert not np.array_equal(unchecked, np.arange(8))                 # unchecked: wrong values


def test_crc_layout_detects_a_dtype_swap_that_mindspores_crc_misses(tmp_path):
    path = str(tmp_path / "d.safetensors")
    save_checkpoint(FakeNet(w=np.arange(4, dtype=np.float32)), path, crc_check=True, format="safetensors")
    raw = open(path, "rb").read()
    at = raw.index(b'"F32"') + 1
    _flip(path, at, ord("F") ^ ord("I"))                           # "F32" -> "I32": same size, same bytes
    with pytest.raises(CheckpointError, match="crc_layout"):
        load_checkpoint(path, crc_check=True, format="safetensors")


@pytest.mark.parametrize("fmt", ["ckpt", "safetensors"])
def test_crc_check_on_a_file_without_crc_warns(tmp_path, fmt):
    path = str(tmp_path / f"n.{fmt}")
    save_checkpoint(FakeNet(w=np.ones(1, np.float32)), path, format=fmt)
    with pytest.warns(UserWarning, match="does not contain a crc"):
        load_checkpoint(path, crc_check=True, format=fmt)


def test_ckpt_crc_detects_damage(tmp_path):
    path = str(tmp_path / "c.ckpt")
    save_checkpoint(FakeNet(w=np.arange(8, dtype=np.float32)), path, crc_check=True, format="ckpt")
    assert open(path, "rb").read()[-17:-10] == b"crc_num"
    _flip(path, 40)
    with pytest.raises(CheckpointError):
        load_checkpoint(path, crc_check=True, format="ckpt")


# ------------------------------------------------------------------------------------------ hostile files
def _write_raw(tmp_path, data: bytes, name="bad.safetensors"):
    path = str(tmp_path / name)
    with open(path, "wb") as f:
        f.write(data)
    return path


def _safetensors_bytes(header: dict, data: bytes) -> bytes:
    h = json.dumps(header).encode()
    return len(h).to_bytes(8, "little") + h + data


HOSTILE = {
    "empty file": (b"", "too short"),
    "seven bytes": (b"\x01\x00\x00\x00\x00\x00\x00", "too short"),
    "not safetensors": (b"This is a plain text file, not a checkpoint at all." * 3, "header"),
    "huge header length": ((2**63).to_bytes(8, "little") + b"{}", "header"),
    "header not json": (b"\x08\x00\x00\x00\x00\x00\x00\x00{not js}", "not a valid safetensors"),
    "header not utf8": (b"\x04\x00\x00\x00\x00\x00\x00\x00\xff\xfe\xfd\xfc", "not a valid safetensors"),
    "offsets past the end": (_safetensors_bytes({"w": {"dtype": "F32", "shape": [4],
                                                       "data_offsets": [0, 16]}}, b"\0" * 8),
                             "not a valid safetensors"),
    "offsets mismatch shape": (_safetensors_bytes({"w": {"dtype": "F32", "shape": [3],
                                                         "data_offsets": [0, 8]}}, b"\0" * 8),
                               "not a valid safetensors"),
    "overlapping tensors": (_safetensors_bytes({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                                                "b": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}},
                                               b"\0" * 8), "not a valid safetensors"),
    "bogus dtype": (_safetensors_bytes({"w": {"dtype": "X99", "shape": [1], "data_offsets": [0, 4]}}, b"\0" * 4),
                    "not a valid safetensors"),
    "unsupported dtype": (_safetensors_bytes({"w": {"dtype": "F8_E4M3", "shape": [2], "data_offsets": [0, 2]}},
                                             b"\0" * 2), "dtype minispore does not support"),
    "negative shape": (_safetensors_bytes({"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}},
                                          b"\0" * 4), "not a valid safetensors"),
    "giant shape": (_safetensors_bytes({"w": {"dtype": "F64", "shape": [2**40, 2**40],
                                              "data_offsets": [0, 8]}}, b"\0" * 8), "not a valid safetensors"),
    "metadata not strings": (_safetensors_bytes({"__metadata__": {"format": 1}}, b""), "safetensors"),
    "header is a list": (_safetensors_bytes([1, 2, 3], b""), "not a valid safetensors"),
    "header is a nested list": (b"\x80\x00\x00\x00\x00\x00\x00\x00" + b"[" * 64 + b"]" * 64, "not a valid safetensors"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_safetensors_files_raise_checkpoint_error(tmp_path, case):
    data, phrase = HOSTILE[case]
    path = _write_raw(tmp_path, data)
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(path, crc_check=True, format="safetensors")
    msg = str(info.value)
    assert path in msg and phrase in msg and "load_checkpoint" in msg
    assert isinstance(info.value, ValueError) and isinstance(info.value, MinisporeError)


def test_missing_file_and_directory_raise_checkpoint_error(tmp_path):
    with pytest.raises(CheckpointError, match="does not exist"):
        load_checkpoint(str(tmp_path / "nothing.ckpt"))
    os.mkdir(tmp_path / "dir.ckpt")
    with pytest.raises(CheckpointError, match="is a directory"):
        load_checkpoint(str(tmp_path / "dir.ckpt"))
    if os.path.exists("/dev/zero"):                                # an endless "file" is refused, not read
        os.symlink("/dev/zero", tmp_path / "zero.ckpt")
        with pytest.raises(CheckpointError, match="not a regular file"):
            load_checkpoint(str(tmp_path / "zero.ckpt"))


def test_a_pickle_is_never_executed(tmp_path):
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    for fmt in ("safetensors", "ckpt"):
        path = _write_raw(tmp_path, pickle.dumps({"w": Evil()}), name=f"evil.{fmt}")
        with pytest.raises(CheckpointError):
            load_checkpoint(path, format=fmt)
    assert not marker.exists()


def _ld(field, payload: bytes) -> bytes:
    """A short length-delimited protobuf field (payload < 128 bytes), to assemble broken files."""
    return bytes([field << 3 | 2, len(payload)]) + payload


HOSTILE_CKPT = {
    "truncated varint": b"\x0a\xff",
    "length past the end": b"\x0a\x7f\x0a\x01w",
    "value without tag": _ld(1, _ld(2, _ld(2, b"Int64") + _ld(3, b"\0" * 8))),
    "missing content": _ld(1, _ld(1, b"w") + _ld(2, _ld(2, b"Int64"))),
    "content size mismatch": _ld(1, _ld(1, b"w") + _ld(2, b"\x08\x02" + _ld(2, b"Int64") + _ld(3, b"\0"))),
    "unknown dtype": _ld(1, _ld(1, b"w") + _ld(2, _ld(2, b"Bogus") + _ld(3, b"\0"))),
    "unsupported dtype": _ld(1, _ld(1, b"w") + _ld(2, _ld(2, b"Int4") + _ld(3, b"\0\0"))),
    "negative dims": _ld(1, _ld(1, b"w") + _ld(2, b"\x08" + b"\xff" * 9 + b"\x01" + _ld(2, b"Float32")
                                           + _ld(3, b""))),
    "map parameter": _ld(1, _ld(1, b"w") + _ld(3, b"")),
    "invalid wire type": b"\x0f\x00",
    "wrong wire type for tag": _ld(1, b"\x08\x01"),
    "bad utf-32 string": _ld(1, _ld(1, b"s") + _ld(2, b"\x08\x00" + _ld(2, b"str") + _ld(3, b"abc"))),
    "invalid utf-32 code point": _ld(1, _ld(1, b"s") + _ld(2, b"\x08\x00" + _ld(2, b"str")
                                                         + _ld(3, b"\xff\xff\xff\xff"))),
    "tag not utf-8": _ld(1, _ld(1, b"\xff") + _ld(2, _ld(2, b"Int8") + _ld(3, b"\0"))),
}


@pytest.mark.parametrize("case", sorted(HOSTILE_CKPT))
def test_hostile_ckpt_files_raise_checkpoint_error(tmp_path, case):
    path = _write_raw(tmp_path, HOSTILE_CKPT[case], name="bad.ckpt")
    with pytest.raises(CheckpointError, match="bad.ckpt"):
        load_checkpoint(path, format="ckpt")


def _reference_checkpoint(tmp_path, fmt="safetensors"):
    net = FakeNet(**{"emb.weight": np.arange(12, dtype=np.float32).reshape(3, 4) / 7,
                     "norm.weight": np.ones(4, dtype=ml_dtypes.bfloat16),
                     "count": np.array([3, -1], dtype=np.int64)})
    path = str(tmp_path / f"ref.{fmt}")
    save_checkpoint(net, path, append_dict={"tag": "v1", "epoch": 2}, crc_check=True, format=fmt)
    return path, load_checkpoint(path, format=fmt)


def _equal_dicts(a, b):
    if list(a) != list(b):
        return False
    return all(a[k] == b[k] if isinstance(a[k], str) else
               (isinstance(b[k], ms.Parameter) and _same_bits(a[k].asnumpy(), b[k].asnumpy())) for k in a)


def test_fuzz_flipped_and_truncated_safetensors_give_error_or_the_exact_values(tmp_path):
    """With crc_check every single-byte corruption of the header, and a sample of data bytes, either
    raises CheckpointError or loads exactly the original values; truncations always raise."""
    path, original = _reference_checkpoint(tmp_path)
    raw = open(path, "rb").read()
    header_end = 8 + int.from_bytes(raw[:8], "little")
    rng = np.random.default_rng(0)
    positions = list(range(header_end)) + sorted(rng.choice(np.arange(header_end, len(raw)), 20, replace=False))
    bad = _write_raw(tmp_path, b"", name="fuzz.safetensors")
    outcomes = {"error": 0, "same": 0}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for pos in positions:
            for xor in (0x01, int(rng.integers(2, 256))):
                data = bytearray(raw)
                data[pos] ^= xor
                _write_raw(tmp_path, bytes(data), name="fuzz.safetensors")
                try:
                    loaded = load_checkpoint(bad, crc_check=True, format="safetensors")
                except CheckpointError:
                    outcomes["error"] += 1
                    continue
                assert _equal_dicts(loaded, original), (pos, xor)
                outcomes["same"] += 1
        for cut in range(len(raw)):
            _write_raw(tmp_path, raw[:cut], name="fuzz.safetensors")
            with pytest.raises(CheckpointError):
                load_checkpoint(bad, crc_check=True, format="safetensors")
    assert outcomes["error"] > 0 and outcomes["same"] > 0     # both outcomes really happen


@pytest.mark.parametrize("fmt", ["safetensors", "ckpt"])
def test_fuzz_without_crc_never_raises_a_foreign_exception(tmp_path, fmt):
    path, _ = _reference_checkpoint(tmp_path, fmt)
    raw = open(path, "rb").read()
    rng = np.random.default_rng(1)
    bad = str(tmp_path / f"fuzz.{fmt}")
    for trial in range(400):
        data = bytearray(raw)
        kind = trial % 4
        if kind == 0:
            data[int(rng.integers(len(data)))] ^= int(rng.integers(1, 256))
        elif kind == 1:
            data = data[:int(rng.integers(len(data)))]
        elif kind == 2:
            for pos in rng.integers(0, len(data), size=5):
                data[pos] = int(rng.integers(256))
        else:
            pos = int(rng.integers(len(data)))
            data[pos:pos] = rng.integers(0, 256, size=int(rng.integers(1, 9)), dtype=np.uint8).tobytes()
        _write_raw(tmp_path, bytes(data), name=f"fuzz.{fmt}")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                loaded = load_checkpoint(bad, format=fmt)
            except CheckpointError:
                continue
        assert all(isinstance(v, (str, ms.Parameter)) for v in loaded.values())


# ------------------------------------------------------------------------------------------ .ckpt bytes
def test_ckpt_bytes_match_hand_assembled_protobuf(tmp_path):
    """Checkpoint{value{tag="w", tensor{dims=2, tensor_type="Float32", tensor_content=8 bytes}}}
    followed by a second one-parameter message for the Int64 scalar, as MindSpore concatenates them."""
    w = np.array([1.0, 2.0], dtype=np.float32)
    path = str(tmp_path / "h.ckpt")
    save_checkpoint([ms.Parameter(w, name="w")], path, append_dict={"n": 5}, format="ckpt")
    expected = (bytes.fromhex("0a 1a  0a 01") + b"w" + bytes.fromhex("12 15  08 02  12 07") + b"Float32"
                + bytes.fromhex("1a 08") + w.tobytes()
                + bytes.fromhex("0a 16  0a 01") + b"n" + bytes.fromhex("12 11  12 05") + b"Int64"
                + bytes.fromhex("1a 08") + np.int64(5).tobytes())
    assert open(path, "rb").read() == expected


def test_ckpt_multibyte_varints_strings_and_packed_dims():
    content = bytes(range(256)) + bytes(44)                               # 300 bytes
    raw = ckpt_codec.encode([("e", np.frombuffer(content, np.uint8)), ("tag", "hello")])
    assert raw[:3] == bytes.fromhex("0a bf 02")                           # 319-byte Value
    assert raw[3:6] == b"\x0a\x01e" and raw[6:9] == bytes.fromhex("12 b9 02")
    assert raw[9:12] == bytes.fromhex("08 ac 02")                         # dims [300]
    # the string: dims [0], type "str", NumPy's UTF-32 bytes (MindSpore: "hello" -> 20 bytes)
    assert b"\x12\x03str\x1a\x14" + "hello".encode("utf-32-le") in raw
    items = dict(ckpt_codec.decode(raw, "mem"))
    assert items["tag"] == "hello" and items["e"].tobytes() == content
    # a packed `dims` field (wire type 2) is legal protobuf and must parse too
    packed = bytes.fromhex("0a 14 0a 01") + b"p" + bytes.fromhex("12 0f 0a 02 02 01 12 05") + b"UInt8" \
        + bytes.fromhex("1a 02 07 09")
    out = dict(ckpt_codec.decode(packed, "mem"))
    np.testing.assert_array_equal(out["p"], np.array([[7], [9]], np.uint8))


def test_ckpt_large_parameters_are_sliced_and_joined(tmp_path, monkeypatch):
    monkeypatch.setattr(ckpt_codec, "SLICE_SIZE", 1)                     # 1 KB slices
    big = np.arange(1000, dtype=np.float32).reshape(250, 4)             # ~3.9 KB -> 4 slices
    raw = ckpt_codec.encode([("big", big), ("after", np.ones(1, np.int8))])
    assert raw.count(b"\x0a\x03big") == 4
    items = ckpt_codec.decode(raw, "mem")
    assert [n for n, _ in items] == ["big", "after"]
    np.testing.assert_array_equal(items[0][1], big)


# ------------------------------------------------------------------------------------------ load_param_into_net
def test_shape_mismatch_uses_mindspores_wording_and_changes_nothing():
    net = FakeNet(a=np.zeros(2, np.float32), b=np.zeros((2, 3), np.float32))
    d = {"a": ms.Parameter(np.ones(2, np.float32), name="a"), "b": ms.Parameter(np.ones((3, 2), np.float32), name="b")}
    with pytest.raises(RuntimeError) as info:
        load_param_into_net(net, d)
    assert str(info.value).startswith(
        "For 'load_param_into_net', b in the argument 'net' should have the same shape as b in the argument "
        "'parameter_dict'. But got its shape (2, 3) in the argument 'net' and shape (3, 2) in the argument "
        "'parameter_dict'.")
    assert isinstance(info.value, MinisporeRuntimeError)
    np.testing.assert_array_equal(net["a"], np.zeros(2))               # 'a' was not half-loaded


def test_dtype_conversion_rules():
    d = {"w": ms.Parameter(np.array([1.5, 2.5], np.float64), name="w")}
    net = FakeNet(w=np.zeros(2, np.float32))
    assert load_param_into_net(net, d) == ([], [])
    assert net.params["w"].dtype == ms.float32
    np.testing.assert_array_equal(net["w"], [1.5, 2.5])
    with pytest.raises(RuntimeError, match="should have the same type as w"):
        load_param_into_net(FakeNet(w=np.zeros(2, np.float32)), d, strict_load=True)
    with pytest.raises(RuntimeError, match="same type"):
        load_param_into_net(FakeNet(w=np.zeros(2, np.int32)), d)        # float -> int is never converted
    ints = {"i": ms.Parameter(np.array([3, 4], np.int64), name="i")}
    net = FakeNet(i=np.zeros(2, np.int32))
    load_param_into_net(net, ints)
    assert net["i"].dtype == np.int32 and net["i"].tolist() == [3, 4]


def test_missing_names_prefix_fallback_and_copies():
    net = FakeNet(**{"fc.weight": np.zeros(2, np.float32), "fc.bias": np.zeros(1, np.float32),
                     "other": np.zeros(1, np.float32)})
    d = {"backbone.fc.weight": ms.Parameter(np.ones(2, np.float32), name="backbone.fc.weight"),
         "backbone.fc.bias": ms.Parameter(np.full(1, 2.0, np.float32), name="backbone.fc.bias"),
         "unused": ms.Parameter(np.ones(1, np.float32), name="unused")}
    param_not_load, ckpt_not_load = load_param_into_net(net, d)
    assert param_not_load == ["other"] and ckpt_not_load == ["unused"]
    np.testing.assert_array_equal(net["fc.bias"], [2.0])
    d["backbone.fc.weight"].asnumpy()[:] = 9                           # the net holds its own copy
    np.testing.assert_array_equal(net["fc.weight"], [1.0, 1.0])
    # strict_load: no prefix guessing
    net2 = FakeNet(**{"fc.weight": np.zeros(2, np.float32)})
    assert load_param_into_net(net2, d, strict_load=True)[0] == ["fc.weight"]
    # string entries are never loaded into a net
    net3 = FakeNet(tag=np.zeros(1, np.float32))
    assert load_param_into_net(net3, {"tag": "text"}) == ([], ["tag"])


def test_load_checkpoint_with_net_loads_into_it(tmp_path):
    path = str(tmp_path / "n.ckpt")
    save_checkpoint(FakeNet(w=np.arange(3, dtype=np.float32)), path)
    net = FakeNet(w=np.zeros(3, np.float32))
    d = load_checkpoint(path, net=net)
    np.testing.assert_array_equal(net["w"], [0, 1, 2])
    assert d["w"].asnumpy() is not net.params["w"].asnumpy()


def test_bad_arguments_raise_minispore_errors(tmp_path):
    net = FakeNet(w=np.ones(1, np.float32))
    p = str(tmp_path / "b.ckpt")
    cases = [
        (OpTypeError, lambda: save_checkpoint(42, p)),
        (OpTypeError, lambda: save_checkpoint(net, 42)),
        (OpTypeError, lambda: save_checkpoint([1, 2], p)),
        (OpTypeError, lambda: save_checkpoint(net, p, append_dict={"x": [1, 2]})),
        (OpTypeError, lambda: save_checkpoint(net, p, append_dict=[1])),
        (OpValueError, lambda: save_checkpoint(net, p, append_dict={"w": 1})),
        (OpTypeError, lambda: save_checkpoint(net, p, integrated_save="yes")),
        (OpValueError, lambda: save_checkpoint(net, p, async_save="fork")),
        (OpValueError, lambda: save_checkpoint(net, p, enc_key=b"0123456789abcdef")),
        (OpTypeError, lambda: save_checkpoint({"c": np.ones(2, np.complex64)}, p)),
        (OpTypeError, lambda: save_checkpoint({"t": np.ones(2, "m8[s]")}, p)),         # timedelta64
        (OpTypeError, lambda: save_checkpoint(net, p, bogus=1)),
        (OpValueError, lambda: save_checkpoint({"__metadata__": np.ones(1, np.float32)}, p, format="safetensors")),
        (OpValueError, lambda: save_checkpoint(net, p, append_dict={"s": "\ud800"})),
        (OpValueError, lambda: save_checkpoint({"s": "\ud800"}, p, format="safetensors")),
        (OpTypeError, lambda: load_checkpoint(42)),
        (OpValueError, lambda: load_checkpoint(p, dec_key=b"k" * 16)),
        (OpTypeError, lambda: load_checkpoint(p, crc_check="yes")),
        (OpTypeError, lambda: load_checkpoint(p, filter_prefix=3)),
        (OpTypeError, lambda: load_param_into_net(object(), {})),
        (OpTypeError, lambda: load_param_into_net(net, [("w", 1)])),
        (OpTypeError, lambda: load_param_into_net(net, {"w": np.ones(1)})),
        (OpTypeError, lambda: load_param_into_net(net, {}, remove_redundancy=True)),
    ]
    for err, call in cases:
        with pytest.raises(err) as info:
            call()
        assert "For '" in str(info.value)


def test_top_level_names_and_real_cells(tmp_path):
    assert ms.save_checkpoint is save_checkpoint and ms.load_checkpoint is load_checkpoint
    assert ms.load_param_into_net is load_param_into_net
    nn = pytest.importorskip("minispore.nn")
    if not hasattr(nn, "Cell"):
        pytest.skip("minispore.nn.Cell not available yet")

    class Block(nn.Cell):
        def __init__(self, scale):
            super().__init__()
            self.weight = ms.Parameter(np.full((2, 2), scale, np.float32))
            self.bias = ms.Parameter(np.zeros(2, np.float32))

    class Net(nn.Cell):
        def __init__(self, scale):
            super().__init__()
            self.first = Block(scale)
            self.second = Block(scale + 1)

    src, dst = Net(1.0), Net(0.0)
    names = [p.name for _, p in src.parameters_and_names()]
    assert names == ["first.weight", "first.bias", "second.weight", "second.bias"]
    save_checkpoint(src, str(tmp_path / "net.ckpt"))
    assert load_param_into_net(dst, load_checkpoint(str(tmp_path / "net.ckpt"))) == ([], [])
    np.testing.assert_array_equal(dst.second.weight.asnumpy(), np.full((2, 2), 2.0))


# ------------------------------------------------------------------------------------------ protobuf oracle
def _checkpoint_message_class():
    """MindSpore's checkpoint.proto, built at run time with the real protobuf library (an oracle
    independent of our hand-written codec). Skipped when protobuf is not installed."""
    pytest.importorskip("google.protobuf")
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    F = descriptor_pb2.FieldDescriptorProto
    fdp = descriptor_pb2.FileDescriptorProto(name="minispore_test_checkpoint.proto", syntax="proto2")
    tensor = fdp.message_type.add(name="TensorProto")
    tensor.field.add(name="dims", number=1, type=F.TYPE_INT64, label=F.LABEL_REPEATED)
    tensor.field.add(name="tensor_type", number=2, type=F.TYPE_STRING, label=F.LABEL_REQUIRED)
    tensor.field.add(name="tensor_content", number=3, type=F.TYPE_BYTES, label=F.LABEL_REQUIRED)
    maptensor = fdp.message_type.add(name="MapTensorProto")
    maptensor.field.add(name="tensor", number=1, type=F.TYPE_MESSAGE, type_name=".TensorProto",
                        label=F.LABEL_REPEATED)
    ckpt = fdp.message_type.add(name="Checkpoint")
    value = ckpt.nested_type.add(name="Value")
    value.oneof_decl.add(name="value")
    value.field.add(name="tag", number=1, type=F.TYPE_STRING, label=F.LABEL_REQUIRED)
    value.field.add(name="tensor", number=2, type=F.TYPE_MESSAGE, type_name=".TensorProto",
                    label=F.LABEL_OPTIONAL, oneof_index=0)
    value.field.add(name="maptensor", number=3, type=F.TYPE_MESSAGE, type_name=".MapTensorProto",
                    label=F.LABEL_OPTIONAL, oneof_index=0)
    ckpt.field.add(name="value", number=1, type=F.TYPE_MESSAGE, type_name=".Checkpoint.Value",
                   label=F.LABEL_REPEATED)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("Checkpoint"))


def test_ckpt_codec_agrees_with_the_protobuf_library(monkeypatch):
    Checkpoint = _checkpoint_message_class()
    params = [("w", np.arange(6, dtype=np.float32).reshape(2, 3)), ("bf", np.ones(3, ml_dtypes.bfloat16)),
              ("step", np.array(-7, np.int64)), ("big", np.arange(300, dtype=np.int16)), ("tag", "héllo")]
    ours = ckpt_codec.encode(params)
    parsed = Checkpoint()
    parsed.ParseFromString(ours)                               # protobuf reads our bytes
    assert [v.tag for v in parsed.value] == ["w", "bf", "step", "big", "tag"]
    assert list(parsed.value[0].tensor.dims) == [2, 3] and parsed.value[0].tensor.tensor_type == "Float32"
    assert parsed.value[0].tensor.tensor_content == params[0][1].tobytes()
    assert parsed.value[1].tensor.tensor_type == "BFloat16" and list(parsed.value[2].tensor.dims) == []
    assert parsed.value[4].tensor.tensor_type == "str" and list(parsed.value[4].tensor.dims) == [0]

    # MindSpore's writer, with the library: one serialized Checkpoint per parameter, concatenated;
    # byte-identical to ours, and a sliced parameter (same tag twice) is joined back by our reader
    def mindspore_style(name, dims, type_name, content):
        c = Checkpoint()
        v = c.value.add()
        v.tag = name
        v.tensor.dims.extend(dims)
        v.tensor.tensor_type = type_name
        v.tensor.tensor_content = content
        return c.SerializeToString()

    lib = b"".join(mindspore_style(n, list(a.shape), ms.common.dtype.from_numpy_dtype(a.dtype).name, a.tobytes())
                   for n, a in params[:4])
    lib += mindspore_style("tag", [0], "str", "héllo".encode("utf-32-le"))
    assert lib == ours
    big = np.arange(100, dtype=np.float64).reshape(25, 4)
    sliced = b"".join(mindspore_style("big", [25, 4], "Float64", part.tobytes()) for part in np.array_split(big, 3))
    (name, value), = ckpt_codec.decode(sliced, "mem")
    assert name == "big" and _same_bits(value, big)
