"""The two shared guards for untrusted input: regular files only, and the up-front memory check."""
import json
import os

import pytest

from hostile_io import run_with_deadline
from minispore.common import memory_limit, untrusted_files as uf


@pytest.mark.parametrize("reader", [uf.read_bytes, uf.read_json, lambda p, w: uf.open_regular(p, w)[0].close()])
def test_fifo_is_refused_without_blocking(tmp_path, reader):
    fifo = tmp_path / "config.json"
    os.mkfifo(fifo)
    err = run_with_deadline(lambda: reader(str(fifo), "config"), "opening a FIFO", [str(fifo)]).get("error")
    assert isinstance(err, uf.UntrustedFileError) and "FIFO" in str(err)


def test_symlink_to_device_is_refused(tmp_path):
    link = tmp_path / "model.safetensors"
    link.symlink_to("/dev/zero")
    with pytest.raises(uf.UntrustedFileError, match=r"symlink to /dev/zero \(a character device\)"):
        uf.read_bytes(str(link), "weights")
    assert not uf.is_regular_file(str(link))


def test_directory_and_missing_file(tmp_path):
    with pytest.raises(uf.UntrustedFileError, match="a directory"):
        uf.read_json(str(tmp_path), "config")
    with pytest.raises(uf.UntrustedFileError, match="nothing at that path"):
        uf.read_json(str(tmp_path / "absent.json"), "config")
    with pytest.raises(uf.UntrustedFileError, match="a directory"):
        uf.check_regular_file(str(tmp_path), "config")


def test_size_cap_is_checked_before_reading(tmp_path):
    p = tmp_path / "big.json"
    p.write_bytes(b" " * 1000 + b"{}")
    with pytest.raises(uf.UntrustedFileError, match="at most 100 bytes"):
        uf.read_json(str(p), "config", max_bytes=100)
    assert uf.read_json(str(p), "config") == {}


def test_json_nesting_cap_and_bad_json(tmp_path):
    ok = tmp_path / "ok.json"
    ok.write_text(json.dumps({"a": [[1, 2], {"b": 3}]}))
    assert uf.read_json(str(ok), "config") == {"a": [[1, 2], {"b": 3}]}
    for depth in (uf.MAX_JSON_DEPTH + 1, 100_000):     # refused by the walk / by the parser's recursion
        p = tmp_path / f"deep{depth}.json"
        p.write_text("[" * depth + "]" * depth)
        with pytest.raises(uf.UntrustedFileError, match="nested at most"):
            uf.read_json(str(p), "config")
    bad = tmp_path / "bad.json"
    bad.write_bytes(b'{"dim": 64,')
    with pytest.raises(uf.UntrustedFileError, match="valid JSON"):
        uf.read_json(str(bad), "config")
    binary = tmp_path / "bin.json"
    binary.write_bytes(b"\xff\xfe{}")
    with pytest.raises(uf.UntrustedFileError, match="UTF-8"):
        uf.read_json(str(binary), "config")


def test_inside_resolves_symlinks(tmp_path):
    run, other = tmp_path / "run", tmp_path / "other"
    run.mkdir(), other.mkdir()
    (run / "ckpt-000001").symlink_to(other)
    (run / "ckpt-000002").mkdir()
    assert uf.inside(str(run / "ckpt-000002"), str(run))
    assert not uf.inside(str(run / "ckpt-000001"), str(run))
    assert not uf.inside(str(tmp_path / "run2"), str(run))       # a sibling sharing the prefix


def test_memory_limit_override_and_refusal(monkeypatch):
    monkeypatch.setenv(memory_limit.ENV_VAR, "1G")
    assert memory_limit.memory_limit()[0] == 2**30
    memory_limit.check_fits(2**29, "half the limit")
    with pytest.raises(memory_limit.MemoryLimitError, match=r"about 2\.0 GiB, more than the 1\.0 GiB") as e:
        memory_limit.check_fits(2**31, "a model", hint="Lower --batch-size.")
    assert isinstance(e.value, MemoryError) and "Lower --batch-size." in str(e.value)
    monkeypatch.setenv(memory_limit.ENV_VAR, "none")
    memory_limit.check_fits(2**60, "anything")            # the check is off
    monkeypatch.setenv(memory_limit.ENV_VAR, "lots")
    with pytest.raises(Exception, match="MINISPORE_MEMORY_LIMIT must be a byte count"):
        memory_limit.memory_limit()


def test_default_limit_is_the_smaller_of_available_and_rlimit(monkeypatch):
    monkeypatch.delenv(memory_limit.ENV_VAR, raising=False)
    monkeypatch.setattr(memory_limit, "available_bytes", lambda: 8 * 2**30)
    monkeypatch.setattr(memory_limit, "address_space_limit", lambda: 2 * 2**30)
    limit, source = memory_limit.memory_limit()
    assert limit == 2 * 2**30 and "ulimit -v" in source
    monkeypatch.setattr(memory_limit, "address_space_limit", lambda: None)
    assert memory_limit.memory_limit() == (8 * 2**30, "memory this machine has available")
