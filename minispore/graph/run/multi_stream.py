"""The multi-stream strategy: a plan's steps on several streams at once.

A *stream* is an in-order queue of kernels; on the CPU backend it is a thread (NumPy releases the
GIL inside its kernels, so two threads really compute at once). Which stream runs which step, and
which events it waits for, is the scheduler's decision (graph/streams.py `schedule_streams`).
This module runs a schedule: stream 0 on the calling thread, streams 1.. on pool threads. Each
stream runs its queue through the step loop (loop.py), one step at a time: wait for the step's
events, run it, record its own event if another stream waits for it. During the run NumPy's BLAS
gets cores / streams threads per stream (`blas_limit`), so the streams do not oversubscribe the
cores. Results are bit-for-bit those of one stream with the same BLAS thread count.

Freeing on several streams: a slot read only on one stream is freed by its last reader there (the
step's own `frees`, decided once per schedule); a slot read from SEVERAL streams is freed by
whichever reader finishes last, known only at run time - counted down under a lock. Multi-stream
runs allocate from the heap (the arena plan is for one stream: a multi-stream plan would need
`schedule.memory_constraints()`).

Profiling: while a Profiler runs (profiling.py), every step's start and end (and stream) are
recorded - for one stream too, so a profiled run always goes through this strategy.
"""
from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

from ..streams import blas_limit
from .loop import check_kernels, run_steps
from .plan import rebind


class StreamRun:
    """`plan` on `schedule`'s streams. Built once per stream count (see the module docstring):

    * `steps[i]`: the plan's step i, freeing only the slots every reader of which is on step i's
      stream, step i being the last of them in that stream's order;
    * `shared[i]`: slots read from several streams that step i reads (the last reader to finish
      frees them), `counts`: their number of readers;
    * `signals`: the steps some other stream waits for (only these need an event).
    """

    def __init__(self, plan, schedule):
        self.plan, self.schedule = plan, schedule
        keep = {s for s in plan.out_slots if s is not None}
        captures = {s for s, _ in plan.capture_slots}
        slot_value = plan.slot_value
        readers: dict = {}
        for i, step in enumerate(plan.steps):
            for s in set(step.ins):
                if s in slot_value and s not in keep and s not in captures:
                    readers.setdefault(s, []).append(i)
        qpos = {i: k for q in schedule.queues for k, i in enumerate(q)}
        n = len(plan.steps)
        frees = [[] for _ in range(n)]
        self.shared = [[] for _ in range(n)]
        self.counts = {}
        for s, rs in readers.items():
            if len({schedule.stream_of[r] for r in rs}) == 1:
                frees[max(rs, key=qpos.__getitem__)].append(s)
            else:
                self.counts[s] = len(rs)
                for r in rs:
                    self.shared[r].append(s)
        self.steps = [rebind(step, frees=tuple(f)) for step, f in zip(plan.steps, frees)]
        self.signals = {j for w in schedule.waits for j in w}

    def run(self, arrays, sink=None) -> list:
        plan, sched, steps, shared = self.plan, self.schedule, self.steps, self.shared
        env = plan.new_env(arrays)
        check = check_kernels()
        remaining = dict(self.counts)
        lock = threading.Lock()
        done = {j: threading.Event() for j in self.signals}
        failure = []
        graph_name = plan.graph.name
        waits = sched.waits
        clock = time.perf_counter_ns

        def run_node(i, stream):
            for j in waits[i]:
                done[j].wait()
            if failure:
                raise _Abort()
            t0 = clock() if sink is not None else 0
            run_steps(plan, (steps[i],), env, check)
            if sink is not None:
                sink.record(steps[i].node.op.name, "graph", stream, t0, clock(), {"graph": graph_name, "node": i})
            if shared[i]:
                with lock:              # read from several streams: the last reader to finish frees it
                    for s in shared[i]:
                        c = remaining[s] - 1
                        remaining[s] = c
                        if c == 0:
                            env[s] = None
            ev = done.get(i)
            if ev is not None:
                ev.set()

        def run_stream(stream):
            try:
                for i in sched.queues[stream]:
                    run_node(i, stream)
            except _Abort:
                pass
            except BaseException as e:  # noqa: BLE001 - handed to the caller's thread
                failure.append(e)
                for ev in done.values():  # wake every waiting stream so it can stop
                    ev.set()

        t_run = clock() if sink is not None else 0
        if sched.n_streams > 1:
            with blas_limit(sched.n_streams):
                pool = _workers(sched.n_streams - 1)
                futures = [pool.submit(run_stream, s) for s in range(1, sched.n_streams)]
                run_stream(0)
                for f in futures:
                    f.result()
        else:
            run_stream(0)
        if sink is not None:
            sink.record(graph_name, "graph_run", 0, t_run, clock(), {"streams": sched.n_streams, "nodes": len(steps)})
        if failure:
            raise failure[0]
        return plan.results(env)


class _Abort(Exception):
    """Another stream failed: stop this one."""


_pool_lock = threading.Lock()
_pool: list = [None, 0]          # (ThreadPoolExecutor, its worker count)


def _workers(n):
    """The shared pool of stream threads, grown to `n` workers when a run needs more."""
    with _pool_lock:
        pool, size = _pool
        if pool is None or size < n:
            if pool is not None:
                pool.shutdown(wait=False)
            pool = ThreadPoolExecutor(max_workers=n, thread_name_prefix="minispore-stream")
            _pool[0], _pool[1] = pool, n
        return pool


__all__ = ["StreamRun"]
