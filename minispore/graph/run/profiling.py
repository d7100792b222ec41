"""Where graph executors report what they ran while a `minispore.Profiler` is recording.

The Profiler installs a *sink* (`set_profiling_sink`); executors read `profiling_sink()` at every
run and, when one is installed, report each node with
`sink.record(name, category, stream, t0_ns, t1_ns, args)` (times from time.perf_counter_ns).
O0 and O1 report every step on the stream that ran it (multi_stream.py); other executors can
report through the same sink.
"""
from __future__ import annotations


class _Sink:
    active = None


_sink = _Sink()


def profiling_sink():
    """The active event recorder (a Profiler's), or None."""
    return _sink.active


def set_profiling_sink(sink):
    """Install `sink` (or None); returns the previous one. Used by minispore.Profiler."""
    old, _sink.active = _sink.active, sink
    return old


__all__ = ["profiling_sink", "set_profiling_sink"]
