"""Crash-safe file writes: write aside, flush to disk, then rename into place.

A checkpoint is only useful if it is either the complete old file or the complete new file, never
half of each. POSIX gives one operation that is atomic with respect to crashes and concurrent
readers: `rename(2)` (`os.replace`) within one file system. So every write here follows the same
four steps:

1. write the bytes to a temporary name in the *same directory* (a rename across file systems
   would be a copy, which is not atomic);
2. `flush()` Python's buffer and `os.fsync()` the file, so the bytes are on disk before the name
   points at them (otherwise a power cut after the rename can leave a correctly named empty file);
3. `os.replace(tmp, final)`: readers see either the old file or the new one;
4. `fsync` the directory, so the rename itself (a directory entry change) is durable.

MindSpore additionally makes a finished checkpoint read-only (`chmod 0o400`); we do the same, and
because `os.replace` needs write permission on the *directory*, not on the old file, overwriting a
read-only checkpoint still works.
"""
from __future__ import annotations

import errno
import os
import shutil
import stat
import threading

READ_ONLY = stat.S_IRUSR                      # 0o400, what MindSpore leaves on a saved checkpoint

_write_lock = threading.Lock()                # one writer per process at a time (async saves use threads)


def fsync_dir(path: str) -> None:
    """Make a directory's entries (creations, renames, deletions) durable.

    Windows cannot open a directory for fsync; there NTFS journals metadata itself, so we skip it.
    """
    if os.name == "nt":
        return
    fd = os.open(path or ".", os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError as e:
        # some file systems (certain network and FUSE mounts) cannot fsync a directory at all;
        # that is not a failed write, so carry on. Real I/O errors (EIO, ENOSPC...) propagate.
        if e.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP):
            raise
    finally:
        os.close(fd)


def _make_writable(path: str) -> None:
    try:
        os.chmod(path, stat.S_IRUSR | stat.S_IWUSR)
    except FileNotFoundError:
        pass


def remove_file(path: str) -> None:
    """Delete a file even if it is read-only; a missing file is fine."""
    try:
        os.remove(path)
    except FileNotFoundError:
        return
    except PermissionError:                       # Windows refuses to delete read-only files
        _make_writable(path)
        os.remove(path)


def replace(src: str, dst: str) -> None:
    """`os.replace`, also over a read-only destination on Windows (POSIX does not need the chmod)."""
    try:
        os.replace(src, dst)
    except PermissionError:
        if os.name != "nt" or not os.path.exists(dst):
            raise
        _make_writable(dst)
        os.replace(src, dst)


def atomic_write_bytes(path: str, data: bytes, mode: int | None = READ_ONLY) -> None:
    """Write `data` to `path` atomically and durably (see the module docstring).

    The temporary file is `<path>.tmp` in the same directory; it is removed if anything fails, so an
    interrupted write leaves the old `path` (if any) untouched. `mode` is applied before the rename,
    so the final name never exists with looser permissions; `None` keeps the umask default.
    """
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    tmp = path + ".tmp"
    with _write_lock:
        remove_file(tmp)                          # a leftover from an earlier crash
        try:
            with open(tmp, "xb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            if mode is not None:
                os.chmod(tmp, mode)
            replace(tmp, path)
        except BaseException:                     # includes KeyboardInterrupt: never leave the .tmp
            remove_file(tmp)
            raise
        fsync_dir(directory)


def rmtree(path: str) -> None:
    """`shutil.rmtree` that also deletes read-only files (needed on Windows; harmless elsewhere).

    A symlink is removed itself, never followed: deleting a `.trash-*` entry that is a link into
    another directory must not delete what it points to (shutil.rmtree would refuse it instead).
    """
    if os.path.islink(path):
        os.remove(path)
        return

    def _retry(func, p, _exc):
        _make_writable(p)
        func(p)
    try:
        shutil.rmtree(path, onexc=_retry)         # Python >= 3.12
    except TypeError:
        shutil.rmtree(path, onerror=_retry)


__all__ = ["atomic_write_bytes", "fsync_dir", "remove_file", "replace", "rmtree", "READ_ONLY"]
