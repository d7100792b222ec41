"""Environment variables read while capturing: recorded, and guarded like any other constant.

    scale = float(os.environ.get("SCALE", "1"))      # inside a jitted function
    return x * scale                                 # the graph holds the number read at capture

A capture runs the function's Python once; whatever it read from `os.environ` is baked into the
graph exactly like a global number. The jit cache keys and guards cannot see those reads in
advance (they are not arguments, globals or attributes), so they are *recorded* while the capture
runs and turned into a guard (`EnvironGuard`, added to `CaptureResult.guards`): a call after the
variable changed captures again, and the on-disk compile cache stores the (name, value) pairs in
the entry and checks them when another process loads it (graph/compile_cache.py).

How reads are seen: for the duration of a capture, `os.environ` is switched to a subclass of its
own class whose `__getitem__` and `__iter__` note what was asked. Every public way of reading it
goes through those two: `os.environ[k]`, `.get`, `os.getenv`, `k in os.environ` (a miss is a read
of "not set"), `.items()`, `.copy()`, iterating (that reads the set of names: the guard then checks
the set of names too). Not seen: `os.environb` and C code calling getenv() directly - the docs say
so; keep such reads out of captured functions. Reads by minispore itself during a capture are
recorded as well: conservative (a variable that changes the framework's behaviour changes the
graph too), and there are few of them.

Nested captures (a mode capturing a subgraph with its own capture call) record into every active
recorder, so the outermost result guards everything its graph depends on.
"""
from __future__ import annotations

import contextlib
import os

_MISSING = None          # what an unset variable is recorded as (JSON: null)

_active: list = []       # the recorders of the captures running now (innermost last)
_saved_class = None      # os.environ's own class while it is switched


class _Recorder:
    __slots__ = ("values", "names_read")

    def __init__(self):
        self.values: dict = {}          # name -> value at its first read (None: not set)
        self.names_read = False         # the set of names was read (iteration, len, copy)


def _note_value(key, value):
    for r in _active:
        if key not in r.values:
            r.values[key] = value


def _make_recording_class(base):
    class RecordingEnviron(base):
        """os.environ while a capture runs: the same object, its reads noted (see the module docstring)."""

        def __getitem__(self, key):
            try:
                value = base.__getitem__(self, key)
            except KeyError:
                if isinstance(key, str):
                    _note_value(key, _MISSING)
                raise
            if isinstance(key, str):
                _note_value(key, value)
            return value

        def __iter__(self):
            for r in _active:
                r.names_read = True
            return base.__iter__(self)

        def __len__(self):
            for r in _active:
                r.names_read = True
            return base.__len__(self)

    RecordingEnviron.__qualname__ = RecordingEnviron.__name__ = base.__name__
    RecordingEnviron.__module__ = base.__module__
    return RecordingEnviron


_recording_classes: dict = {}


@contextlib.contextmanager
def recording():
    """Record the environment variables read inside the block; yields the recorder."""
    global _saved_class
    rec = _Recorder()
    env = os.environ
    if not _active:
        base = type(env)
        cls = _recording_classes.get(base)
        if cls is None:
            cls = _recording_classes[base] = _make_recording_class(base)
        try:
            env.__class__ = cls
            _saved_class = base
        except TypeError:           # an os.environ replaced by something else: nothing to hook
            _saved_class = None
    _active.append(rec)
    try:
        yield rec
    finally:
        _active.remove(rec)
        if not _active and _saved_class is not None:
            env.__class__ = _saved_class
            _saved_class = None


class EnvironGuard:
    """Guard (`CaptureResult.guards`): the environment variables a capture read still have the
    values it saw. `reads` is ((name, value or None), ...) in name order; `names` the sorted names
    of the whole environment when the capture iterated over it, else None."""

    __slots__ = ("reads", "names")

    def __init__(self, reads, names=None):
        self.reads = tuple(sorted(reads))
        self.names = None if names is None else tuple(names)

    @classmethod
    def from_recorder(cls, rec):
        """The guard for what `rec` saw, or None when the capture read nothing."""
        if not rec.values and not rec.names_read:
            return None
        return cls(rec.values.items(), sorted(os.environ) if rec.names_read else None)

    def failure(self):
        """None while every recorded variable is as it was, else what changed (in words)."""
        get = os.environ.get
        for name, was in self.reads:
            now = get(name)
            if now != was:
                return (f"environment variable {name} changed: "
                        f"{'<not set>' if was is None else repr(was)} -> {'<not set>' if now is None else repr(now)}")
        if self.names is not None and tuple(sorted(os.environ)) != self.names:
            return "the set of environment variable names changed (the capture iterated over os.environ)"
        return None

    def __call__(self, args, kwargs):
        return self.failure()

    def __repr__(self):
        return f"EnvironGuard({dict(self.reads)!r})"


def recorded(capture):
    """`capture(req)` with the environment reads it makes added to the result's guards."""
    def capture_recording_environ(req):
        with recording() as rec:
            result = capture(req)
        guard = EnvironGuard.from_recorder(rec)
        if guard is not None and result is not None and hasattr(result, "guards"):
            result.guards.append(guard)
        return result
    capture_recording_environ.__wrapped__ = capture
    return capture_recording_environ


__all__ = ["EnvironGuard", "recording", "recorded"]
