"""Where does a minispore step spend its time? Per-primitive kernel and backward-rule timings.

`PrimProfile` temporarily wraps every primitive's kernel (the NumPy work) and backward rule with
timers, so one table shows, per primitive:

* calls and total time inside its kernel (pure NumPy, exclusive), and
* calls and total time inside its backward rule (inclusive: a bprop runs other primitives, whose
  kernels are also counted on their own rows).

The step time minus the summed kernel times (and minus the optimizer, timed separately) is the
framework's own Python overhead: inference, wrapping, the tape. Used by bench_train_step.py
(--profile); it changes nothing when not entered.
"""
from __future__ import annotations

import time
from collections import defaultdict

from minispore.ops.primitive import PRIMITIVES


class PrimProfile:
    def __init__(self):
        self.kernel_s = defaultdict(float)
        self.kernel_n = defaultdict(int)
        self.bprop_s = defaultdict(float)
        self.bprop_n = defaultdict(int)
        self._saved = []

    def _timed(self, fn, name, secs, count):
        clock = time.perf_counter

        def wrapper(*args, **kwargs):
            t0 = clock()
            try:
                return fn(*args, **kwargs)
            finally:
                secs[name] += clock() - t0
                count[name] += 1
        return wrapper

    def __enter__(self):
        for name, p in PRIMITIVES.items():
            self._saved.append((p, p.kernel, p.bprop))
            p.kernel = self._timed(p.kernel, name, self.kernel_s, self.kernel_n)
            if p.bprop is not None:
                p.bprop = self._timed(p.bprop, name, self.bprop_s, self.bprop_n)
        return self

    def __exit__(self, *exc):
        for p, kernel, bprop in self._saved:
            p.kernel, p.bprop = kernel, bprop
        self._saved.clear()
        return False

    def table(self, steps: int, top: int = 20) -> str:
        """Markdown table of the `top` primitives by kernel time, per step (ms)."""
        names = sorted(set(self.kernel_s) | set(self.bprop_s), key=lambda n: -self.kernel_s[n])
        lines = ["| primitive | kernel calls/step | kernel ms/step | bprop calls/step | bprop ms/step (incl.) |",
                 "|---|---:|---:|---:|---:|"]
        for n in names[:top]:
            lines.append(f"| {n} | {self.kernel_n[n] / steps:.0f} | {self.kernel_s[n] / steps * 1e3:.2f} | "
                         f"{self.bprop_n[n] / steps:.0f} | {self.bprop_s[n] / steps * 1e3:.2f} |")
        return "\n".join(lines)

    def kernel_total_s(self) -> float:
        return sum(self.kernel_s.values())

    def kernel_calls(self) -> int:
        return sum(self.kernel_n.values())
