"""Reading files that someone else may have written: checkpoints, HF folders, cache entries.

A checkpoint or a downloaded model folder is untrusted input. Three things can go wrong before a
single byte is parsed, and every reader in minispore goes through this module so each is handled
once:

* **not a regular file.** `open()` on a FIFO blocks until a writer appears (forever); a symlink to
  `/dev/zero` or `/dev/urandom` reads until memory runs out; a directory raises a raw
  IsADirectoryError. `open_regular` opens with O_NONBLOCK (so a FIFO cannot block the open), then
  checks the *opened* descriptor with fstat - checking the path first and opening after would let
  the file be swapped in between.
* **larger than it may be.** A reader states how many bytes it accepts (`max_bytes`); the size comes
  from fstat, before reading.
* **JSON that is deep or huge.** `read_json` caps the bytes and the nesting depth (Python's parser
  recurses, so `[[[[...` a few thousand deep is a RecursionError, not a clear message).

All refusals raise `UntrustedFileError`, which names what was being read, the path, what was
expected and what was found.
"""
from __future__ import annotations

import fcntl
import json
import os
import stat

from .errors import MinisporeError

# A config, an index or a checkpoint's state.json is kilobytes; 64 MiB leaves room for a large
# HF weight index (~100k tensor names) and still refuses a file that is really something else.
MAX_JSON_BYTES = 64 * 2**20
# Real configs nest 3-4 levels; 64 is far above any of them and far below Python's recursion limit.
MAX_JSON_DEPTH = 64


class UntrustedFileError(MinisporeError, ValueError):
    """A file is not what its reader expects (kind, size, format); nothing was read into the model."""

    def __init__(self, what: str, path: str, expected: str, got: str):
        self.what, self.path, self.expected, self.got = what, path, expected, got
        super().__init__(f"Reading {what} '{path}': expected {expected}, but got {got}.")


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def _describe(path: str) -> str:
    """What a path is, for an error message ('a FIFO', 'a symlink to /dev/zero (a character device)')."""
    try:
        st = os.stat(path)
    except OSError as e:
        return f"an unreadable path ({e.strerror})"
    kind = "a regular file" if stat.S_ISREG(st.st_mode) else _kind(st.st_mode)
    if os.path.islink(path):
        return f"a symlink to {os.path.realpath(path)} ({kind})"
    return kind


def check_regular_file(path: str, what: str) -> os.stat_result:
    """stat `path` (following symlinks) and refuse anything but a regular file."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise UntrustedFileError(what, path, "an existing file", "nothing at that path") from None
    except OSError as e:
        raise UntrustedFileError(what, path, "a readable file", f"an OS error ({e.strerror})") from None
    if not stat.S_ISREG(st.st_mode):
        raise UntrustedFileError(what, path, "a regular file", _describe(path))
    return st


def is_regular_file(path: str) -> bool:
    """True when `path` exists and is (or links to) a regular file: never opens it."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def open_regular(path: str, what: str, max_bytes: int | None = None):
    """Open `path` for binary reading; refuse non-regular files and files over `max_bytes`.

    Returns `(file, size)`. O_NONBLOCK makes opening a FIFO return at once instead of waiting
    for a writer; the flag is cleared again before returning so reads of the regular file behave
    normally.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise UntrustedFileError(what, path, "an existing file", "nothing at that path") from None
    except IsADirectoryError:
        raise UntrustedFileError(what, path, "a regular file", "a directory") from None
    except OSError as e:
        raise UntrustedFileError(what, path, "a readable file", f"an OS error ({e.strerror})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UntrustedFileError(what, path, "a regular file", _describe(path))
        if max_bytes is not None and st.st_size > max_bytes:
            raise UntrustedFileError(what, path, f"at most {max_bytes:,} bytes",
                                     f"a file of {st.st_size:,} bytes")
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        fcntl.fcntl(fd, fcntl.F_SETFL, flags & ~os.O_NONBLOCK)
        return os.fdopen(fd, "rb"), st.st_size
    except BaseException:
        os.close(fd)
        raise


def read_bytes(path: str, what: str, max_bytes: int | None = None) -> bytes:
    """The whole of a regular file, at most `max_bytes` long."""
    f, size = open_regular(path, what, max_bytes)
    with f:
        # read one byte past the size fstat reported: a file that grew meanwhile is refused
        # rather than read without bound
        data = f.read(size + 1 if max_bytes is None else min(size, max_bytes) + 1)
    if max_bytes is not None and len(data) > max_bytes:
        raise UntrustedFileError(what, path, f"at most {max_bytes:,} bytes", "a file that grew while read")
    return data


def _depth(value, limit: int) -> int:
    """Nesting depth of a parsed JSON value, walked without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, (list, dict)):
            deepest = max(deepest, d)
            if deepest > limit:
                return deepest
            stack.extend((c, d + 1) for c in (v.values() if isinstance(v, dict) else v))
    return deepest


def parse_json(data: bytes | str, what: str, path: str = "<memory>",
               max_depth: int = MAX_JSON_DEPTH):
    """json.loads with minispore errors: bad UTF-8, bad JSON and too-deep nesting are refused."""
    try:
        text = data.decode("utf-8") if isinstance(data, (bytes, bytearray)) else data
        value = json.loads(text)
    except UnicodeDecodeError as e:
        raise UntrustedFileError(what, path, "UTF-8 JSON", f"undecodable bytes at offset {e.start}") from None
    except RecursionError:
        raise UntrustedFileError(what, path, f"JSON nested at most {max_depth} levels",
                                 "nesting too deep to parse") from None
    except ValueError as e:
        raise UntrustedFileError(what, path, "valid JSON", f"a parse error ({e})") from None
    depth = _depth(value, max_depth)
    if depth > max_depth:
        raise UntrustedFileError(what, path, f"JSON nested at most {max_depth} levels",
                                 f"more than {max_depth} levels")
    return value


def read_json(path: str, what: str, max_bytes: int = MAX_JSON_BYTES, max_depth: int = MAX_JSON_DEPTH):
    """Parse a JSON file that may be hostile: regular file, size cap, nesting cap, clear errors."""
    return parse_json(read_bytes(path, what, max_bytes), what, path, max_depth)


def inside(path: str, root: str) -> bool:
    """True when `path`, with every symlink resolved, lies inside directory `root` (resolved too)."""
    real, base = os.path.realpath(path), os.path.realpath(root)
    return real == base or real.startswith(base.rstrip(os.sep) + os.sep)
