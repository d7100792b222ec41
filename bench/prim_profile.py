"""Where does a minispore step spend its time? Per-primitive kernel and backward-rule timings.

`PrimProfile` temporarily wraps every primitive's kernel (the NumPy work) and backward rule with
timers, so one table shows, per primitive:

* calls and total time inside its kernel (pure NumPy, exclusive: a kernel that runs another
  primitive's kernel is charged only for its own part), and
* calls and total time inside its backward rule (inclusive: a bprop runs other primitives, whose
  kernels are also counted on their own rows).

The step time minus the summed kernel times (and minus the optimizer, timed separately) is the
framework's own Python overhead: inference, wrapping, the tape. Used by bench_train_step.py
(--profile) and bench/suite_profile.py; it changes nothing when not entered.

Phases (for suite_profile.py): every kernel call is also counted under the current `phase`. The
caller sets `prof.phase = "forward"` before a step and `"optimizer"` before the update; while the
profile is entered, `minispore.autograd.tape.backward` is wrapped so that the backward pass
switches the phase to "backward" (and notes when it started, `backward_t0`: the forward phase ends
there). `take_step()` hands over, and clears, the per-(primitive, phase) counts since the last call.
"""
from __future__ import annotations

import time
from collections import defaultdict

from minispore.autograd import tape
from minispore.ops.primitive import PRIMITIVES


class PrimProfile:
    def __init__(self):
        self.kernel_s = defaultdict(float)
        self.kernel_n = defaultdict(int)
        self.bprop_s = defaultdict(float)
        self.bprop_n = defaultdict(int)
        self.phase = "forward"
        self.backward_t0 = None               # perf_counter() when the latest backward pass began
        self.phase_s = defaultdict(float)     # (primitive, phase) -> exclusive kernel seconds
        self.phase_n = defaultdict(int)
        self._nested_s = 0.0                  # kernel time of the calls nested in the running kernel
        self._saved = []
        self._saved_backward = None

    def _timed_kernel(self, fn, name):
        clock = time.perf_counter
        secs, count, psecs, pcount = self.kernel_s, self.kernel_n, self.phase_s, self.phase_n

        def wrapper(*args, **kwargs):
            outer, self._nested_s = self._nested_s, 0.0
            t0 = clock()
            try:
                return fn(*args, **kwargs)
            finally:
                d = clock() - t0
                own = d - self._nested_s
                self._nested_s = outer + d
                key = (name, self.phase)
                secs[name] += own
                count[name] += 1
                psecs[key] += own
                pcount[key] += 1
        return wrapper

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

    def _phase_switching_backward(self, backward):
        def timed_backward(*args, **kwargs):
            if self.phase != "backward":
                self.phase, self.backward_t0 = "backward", time.perf_counter()
            return backward(*args, **kwargs)
        return timed_backward

    def __enter__(self):
        for name, p in PRIMITIVES.items():
            self._saved.append((p, p.kernel, p.bprop))
            p.kernel = self._timed_kernel(p.kernel, name)
            if p.bprop is not None:
                p.bprop = self._timed(p.bprop, name, self.bprop_s, self.bprop_n)
        self._saved_backward = tape.backward
        tape.backward = self._phase_switching_backward(tape.backward)
        return self

    def __exit__(self, *exc):
        for p, kernel, bprop in self._saved:
            p.kernel, p.bprop = kernel, bprop
        self._saved.clear()
        tape.backward = self._saved_backward
        return False

    def take_step(self) -> dict:
        """{(primitive, phase): (seconds, calls)} since the last call; clears them."""
        out = {k: (s, self.phase_n[k]) for k, s in self.phase_s.items()}
        self.phase_s.clear()
        self.phase_n.clear()
        return out

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
