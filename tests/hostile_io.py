"""Test helpers for readers of untrusted files: a deadline against hangs, a cap against runaway reads.

Shared by tests/common, tests/train and tests/llm (tests/ is on sys.path through its conftest).
"""
from __future__ import annotations

import contextlib
import os
import resource
import threading

import pytest


def run_with_deadline(fn, what: str, fifos=(), seconds: float = 20.0) -> dict:
    """fn() in a daemon thread; returns {"value": ...} or {"error": exception}.

    A reader that opens a FIFO like a file blocks forever waiting for a writer: if fn is still
    running after `seconds`, each FIFO in `fifos` is opened for writing and closed (so the reader
    sees EOF and the thread ends) and the test fails with "`what` blocked".
    """
    result = {}

    def target():
        try:
            result["value"] = fn()
        except BaseException as e:                      # noqa: BLE001 - handed to the test
            result["error"] = e

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(seconds)
    if t.is_alive():
        for path in fifos:
            with contextlib.suppress(OSError):
                os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
        t.join(10)
        pytest.fail(f"{what} blocked for more than {seconds} s")
    return result


@contextlib.contextmanager
def address_space_headroom(extra=2 * 2**30):
    """Cap this process's address space at its current size + `extra` for the block (soft limit,
    restored afterwards): a reader that reads or allocates without bound fails fast with
    MemoryError instead of taking the machine's memory."""
    with open("/proc/self/status") as f:
        vm = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = vm + extra if hard == resource.RLIM_INFINITY else min(hard, vm + extra)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
