"""A time limit for a block of in-process work (SIGALRM), so a hang is counted, not waited out.

`Timeout` derives from BaseException, not Exception: the code under test may catch `Exception`
(and turn it into a clean error), but it must not be able to swallow the harness's own alarm. The
alarm interrupts Python code and blocking system calls (open() of a FIFO, read() of a pipe); it
cannot interrupt one long C call that never returns to the interpreter, which is why the
checkpoint fuzz also runs its loads in a child process with a wall-clock limit.
"""
from __future__ import annotations

import contextlib
import signal
import threading


class Timeout(BaseException):
    """The block ran past its time limit."""


def _raise(signum, frame):
    raise Timeout


@contextlib.contextmanager
def time_limit(seconds: float):
    """Raise `Timeout` in the block after `seconds` (main thread only; elsewhere no limit)."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return
    previous = signal.signal(signal.SIGALRM, _raise)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
