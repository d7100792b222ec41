"""The compile cache's files: settings, counters, and storing / loading one entry, never trusting it.

`store` writes `<key>.json` (a header line, then the payload of serialize.py) and `<key>.bin`
through a fresh temporary file and a rename; `load` reads them back only as regular files of
bounded size (common/untrusted_files.py) and checks the format, versions, key, checksums, source
files and stored guards before decoding (the package docstring lists every check).
"""
from __future__ import annotations

import contextlib
import gc
import hashlib
import json
import logging
import os
import tempfile
import warnings

import numpy as np

from ...common.untrusted_files import UntrustedFileError, read_bytes
from ..cache_settings import compile_cache_dir, compile_cache_enabled
from ..guards.stable import Uncacheable
from .key import FORMAT, Stale, _versions, call_token, key_of
from .serialize import decode_result, encode_result

logger = logging.getLogger("minispore.jit")

_stats = {"hits": 0, "misses": 0, "stores": 0, "stale": 0, "corrupt": 0, "uncacheable": 0, "captures": 0}
_unwritable: set = set()


def stats() -> dict:
    """A copy of the counters (see the module docstring)."""
    return dict(_stats)


def reset_stats():
    for k in _stats:
        _stats[k] = 0


# -- settings -------------------------------------------------------------------------------------------
# the settings (set_context / MS_COMPILER_CACHE_*), read one layer down: the kernel cache reads them too
enabled, cache_dir = compile_cache_enabled, compile_cache_dir


# -- files ------------------------------------------------------------------------------------------------
# Every file the cache reads is opened with untrusted_files: only a regular file, never more than
# it may hold. An entry that is a FIFO, a device, a directory or a symlink to one - or that is
# larger than any entry - counts as corrupt (logged, captured again): a read never blocks.
MAX_ENTRY_BYTES = 1 << 30            # a <key>.json: a very large model's graph is tens of MB
MAX_SOURCE_BYTES = 64 << 20          # a model source file whose hash an entry records


def _file_sha(path) -> str:
    """SHA-256 of a source file; UntrustedFileError when it is missing, not a regular file or
    too large."""
    return hashlib.sha256(read_bytes(path, "a source file of a compile-cache entry", MAX_SOURCE_BYTES)).hexdigest()


def _atomic_write(path, data: bytes):
    """Write `path` as a whole: a fresh temporary file in the same directory (mkstemp: O_EXCL, so a
    FIFO or a symlink planted under a predictable name is never opened), then a rename."""
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=os.path.basename(path) + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _warn_unwritable(d, err):
    if d not in _unwritable:
        _unwritable.add(d)
        warnings.warn(f"compile cache: the directory '{d}' cannot be written ({type(err).__name__}: {err}); "
                      f"compiling without the cache", RuntimeWarning, stacklevel=4)


def store(jf, fn, args, kwargs, result, key=None):
    """Write `result` for this call; False (and a log line) when it cannot be stored."""
    d = cache_dir()
    if d in _unwritable:
        return False
    try:
        key = key or key_of(call_token(jf, fn, args, kwargs))
        payload, consts, files = encode_result(result, fn, args, kwargs)
    except Uncacheable as e:
        _stats["uncacheable"] += 1
        logger.info("compile cache: '%s' is not cached: %s", jf.name, e)
        return False
    # constant tensors: one raw binary file, each array's dtype/shape/offset in the payload
    blob, table = bytearray(), []
    for a in consts:
        off = len(blob)
        blob += a.tobytes()
        blob += b"\0" * (-len(blob) % 64)
        table.append([a.dtype.str, list(a.shape), off])
    payload["consts"] = table
    body = json.dumps(payload, separators=(",", ":"), allow_nan=False).encode()
    try:
        sources = {f: _file_sha(f) for f in files}
    except UntrustedFileError as e:
        _stats["uncacheable"] += 1
        logger.info("compile cache: '%s' is not cached: %s", jf.name, e)
        return False
    header = {"format": FORMAT, "versions": _versions(), "key": key, "name": jf.name,
              "sources": sources,
              "payload_sha256": hashlib.sha256(body).hexdigest(),
              "consts_sha256": hashlib.sha256(blob).hexdigest() if blob else None,
              "consts_bytes": len(blob)}
    try:
        os.makedirs(d, exist_ok=True)
        if blob:
            _atomic_write(os.path.join(d, key + ".bin"), bytes(blob))
        # one JSON header line, then the JSON payload (checksummed as bytes)
        _atomic_write(os.path.join(d, key + ".json"), json.dumps(header).encode() + b"\n" + body)
    except (IsADirectoryError, NotADirectoryError) as e:
        if os.path.isdir(d):
            # a directory where this one entry's file belongs: this entry is not stored, the rest
            # of the cache still works
            logger.warning("compile cache: cannot store '%s' (%s: %s)", jf.name, type(e).__name__, e)
            return False
        _warn_unwritable(d, e)
        return False
    except OSError as e:
        _warn_unwritable(d, e)
        return False
    _stats["stores"] += 1
    logger.info("compile cache: stored '%s' (%s)", jf.name, key[:12])
    return True


def load(jf, fn, args, kwargs):
    """(CaptureResult or None, key). None on a miss, or on a stale/corrupt entry (counted and logged)."""
    try:
        key = key_of(call_token(jf, fn, args, kwargs))
    except Uncacheable as e:
        _stats["uncacheable"] += 1
        logger.info("compile cache: '%s' is not cached: %s", jf.name, e)
        return None, None
    d = cache_dir()
    path = os.path.join(d, key + ".json")
    if not os.path.lexists(path):
        _stats["misses"] += 1          # (a path that is not a directory: store() reports it, once)
        return None, key
    try:
        raw = read_bytes(path, "a compile-cache entry", MAX_ENTRY_BYTES)
    except UntrustedFileError as e:    # a FIFO, a device, a directory, a dangling link, too large
        if e.got == "nothing at that path" and not os.path.lexists(path):
            _stats["misses"] += 1      # (removed meanwhile)
            return None, key
        _stats["corrupt"] += 1
        logger.warning("compile cache: corrupt entry for '%s': %s; recompiling", jf.name, e)
        return None, key
    try:
        head, sep, body = raw.partition(b"\n")
        if not sep:
            raise ValueError("the file is truncated (no payload)")
        header = json.loads(head)
        problem = _check_header(header, key, body)
        if problem:
            _stats["stale"] += 1
            logger.info("compile cache: stale entry for '%s' (%s); recompiling", jf.name, problem)
            return None, key
        blob = b""
        if header.get("consts_sha256"):
            size = header.get("consts_bytes")
            if type(size) is not int or size < 0:
                raise ValueError("the header does not say how large the constants file is")
            blob = bytearray(read_bytes(os.path.join(d, key + ".bin"), "a compile-cache constants file", size))
            if hashlib.sha256(blob).hexdigest() != header["consts_sha256"]:
                raise ValueError("the constants file does not match its checksum")
        paused = gc.isenabled()
        gc.disable()                   # decoding makes thousands of small objects: no GC passes meanwhile
        try:
            payload = json.loads(body)
            consts = [np.frombuffer(blob, dtype=np.dtype(dt), count=int(np.prod(shape)), offset=off).reshape(shape)
                      for dt, shape, off in payload["consts"]]
            result = decode_result(payload, consts, fn, args, kwargs)
        finally:
            if paused:
                gc.enable()
    except Stale as e:
        _stats["stale"] += 1
        logger.info("compile cache: stale entry for '%s' (%s); recompiling", jf.name, e)
        return None, key
    except Exception as e:             # noqa: BLE001 - any failure means: do not trust it, rebuild
        _stats["corrupt"] += 1
        logger.warning("compile cache: corrupt entry '%s' for '%s' (%s: %s); recompiling",
                       path, jf.name, type(e).__name__, e)
        return None, key
    _stats["hits"] += 1
    logger.info("compile cache: loaded '%s' from %s (capture skipped)", jf.name, path)
    return result, key


def _check_header(header, key, body: bytes):
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        return "unknown format"
    if header.get("versions") != _versions():
        return f"written by versions {header.get('versions')}, running {_versions()}"
    if header.get("key") != key:
        return "key mismatch"
    if hashlib.sha256(body).hexdigest() != header.get("payload_sha256"):
        raise ValueError("the payload does not match its checksum")
    for f, sha in header.get("sources", {}).items():
        try:
            if _file_sha(f) != sha:
                return f"source file '{f}' changed"
        except UntrustedFileError as e:
            return f"source file '{f}' cannot be read as before ({e.got})"
    return None


def count_capture():
    _stats["captures"] += 1


__all__ = ["enabled", "cache_dir", "load", "store", "stats", "reset_stats", "count_capture", "MAX_ENTRY_BYTES",
           "MAX_SOURCE_BYTES"]
