"""The runner: executes a function with graph breaks as graph, eager step, graph, eager step...

    state = the call's arguments                 segment = the entry segment (captured by jit)
    loop:
        run segment.graph on the state's tensors  (O0 executor; a PyNative tape node under grad)
        rebuild the frame at the break from the segment's sources
        if the segment returned: done
        run the break instruction eagerly        (print, .asnumpy(), bool(cond) of a branch...)
        look up the segment that continues from the instruction reached, for this state
            (keyed by the instruction and the state's key; its guards must hold) - capture it
            now if there is none: continuations are captured lazily, when first reached

Continuations therefore exist only for paths that ran: an `if` on a tensor captures the side
taken, and the other side the first time a call takes it; a `while` on a tensor reuses one
segment for its body as long as the loop state keeps its shapes. The jit cache (graph/cache.py)
keys the *entry* segment on the arguments; the runner's own cache keys continuations.

Limits: at most `CONTINUATION_LIMIT` continuations per resume instruction (a loop with a break
inside captures one per iteration, since the loop position is part of the state; a value that
changes on every call and is baked in recaptures on every call); past it the runner warns once and
runs the rest of the function eagerly (the same interpreter, on concrete values). A gradient of a
gradient through the function (`grad_state.depth > 1`) runs it eagerly too, as jit does.

Under an enclosing PyNative gradient (`value_and_grad(jitted_f)`), each segment's graph runs as
one tape node (graph/autodiff.py) and the eager steps record their ops on the tape as usual, so
gradients flow through graph breaks.
"""
from __future__ import annotations

import logging

from ....common import grad_state
from ....common.tensor import _wrap
from ... import autodiff, pytree
from ...ir import OPAQUE, Value
from ...trace.user_code import warn_user
from .frames import Frame, fill_state, fill_value, flatten_state, state_key
from .instructions import Interpreter
from .segments import capture_continuation, capture_continuation_with_frame
from .values import NULL

logger = logging.getLogger("minispore.jit")
CONTINUATION_LIMIT = 64
_FALLBACK = object()


class Runner:
    """`runner(args, kwargs) -> output` for CaptureResult.runner (see the module docstring)."""

    def __init__(self, target, entry, result):
        self.target = target
        self.info = target.info
        self.entry = entry
        self.result = result
        self.cache: dict = {}             # (pc, state key) -> [Segment]
        self.captured: dict = {}          # pc -> number of continuations captured there
        self.limit_warned = False
        self._breaks_seen: set = set()
        self.note(entry)

    def note(self, seg):
        """Add a new segment's graph and break to the CaptureResult (what explain() shows)."""
        if seg.graph is not None:
            self.result.graphs.append(seg.graph)
        if seg.brk is not None:
            k = (seg.brk.filename, seg.brk.lineno, seg.brk.reason)
            if k not in self._breaks_seen:
                self._breaks_seen.add(k)
                self.result.breaks.append(seg.brk.graph_break())

    # -- running ----------------------------------------------------------------------------------
    def __call__(self, args, kwargs):
        if grad_state.depth > 1:
            return self.target.source_fn(*args, **kwargs)
        info = self.info
        leaves, _ = pytree.flatten_call(args, kwargs)
        seg, template = self.entry, None
        while True:
            vals = self._run_segment(seg, leaves)
            if vals is _FALLBACK:
                if seg is self.entry:
                    return self.target.source_fn(*args, **kwargs)
                return Interpreter(info, fill_state(template, leaves, info.free_cells), seg.start).run()
            if seg.returns:
                return fill_value(seg.out_template, vals)
            frame = fill_state(seg.out_template, vals, info.free_cells)
            interp = Interpreter(info, frame, seg.brk.index)           # the eager step
            interp.step()
            if seg.brk.pop_after:
                interp.step()
            pc = interp.pc
            template, leaves = flatten_state(frame, info.cellvars)
            seg = self.continuation(pc, template, leaves)
            if seg is None:
                return Interpreter(info, frame, pc).run()

    def _run_segment(self, seg, leaves):
        outs = ()
        if seg.graph is not None:
            tensors = [leaves[j] for j in seg.param_leaves]
            if grad_state.depth:
                outs = autodiff.run_with_tape(seg, tensors)
                if outs is None:
                    return _FALLBACK
            else:
                raw = seg.executor.run(*[t._data for t in tensors])
                outs = [_wrap(r) if isinstance(o, Value) and o.aval is not OPAQUE else r
                        for o, r in zip(seg.graph.outputs, raw)]
        return [outs[x] if kind == "out" else leaves[x] if kind == "in" else x for kind, x in seg.sources]

    # -- continuations ----------------------------------------------------------------------------------
    def continuation(self, pc, template, leaves):
        """The segment that continues at instruction `pc` for this state (captured if needed), or
        None when this resume point is past its limit (the caller runs the rest eagerly)."""
        key = (pc, state_key(template, leaves))
        entries = self.cache.setdefault(key, [])
        for seg in entries:
            if seg.guards_hold(leaves):
                return seg
        n = self.captured.get(pc, 0)
        if n >= CONTINUATION_LIMIT:
            if not self.limit_warned:
                self.limit_warned = True
                warn_user(f"jit: '{self.target.name}' captured {n} continuations after the graph break at "
                          f"{self.info.filename}:{self.info.lines[pc - 1]}; the rest of the function runs "
                          f"eagerly from there for new states")
            return None
        self.captured[pc] = n + 1
        if entries:
            logger.info("recapturing '%s' after %s:%d: a value the continuation used changed",
                        self.target.name, self.info.filename, self.info.lines[pc])
        seg = capture_continuation(self.target, pc, template, leaves)
        entries.append(seg)
        self.note(seg)
        return seg

    def speculate(self, seg, frame):
        """At compile time, capture what follows `print(...)` breaks (a discarded call result and no
        change of control flow: the state after it is known without running it), so explain()
        shows those graphs before the first call. Any failure just leaves it for run time."""
        for _ in range(16):
            brk = seg.brk
            if brk is None or brk.opname != "CALL" or not brk.pop_after:
                return
            st, argc = frame.stack, brk.argc
            if len(st) < argc + 2 or st[-argc - 2] is not NULL or st[-argc - 1] is not print:
                return
            after = Frame(frame.locals, frame.cells, st[:len(st) - argc - 2], None)
            template, leaves = flatten_state(after, self.info.cellvars)
            if any(type(x).__name__ == "HostResult" for x in leaves):
                return
            pc = brk.index + 2
            try:
                seg, frame = capture_continuation_with_frame(self.target, pc, template, leaves)
            except Exception as e:         # noqa: BLE001 - captured again (and reported) at run time
                logger.debug("speculative capture after %s failed: %s", brk, e)
                return
            self.cache.setdefault((pc, state_key(template, leaves)), []).append(seg)
            self.captured[pc] = self.captured.get(pc, 0) + 1
            self.note(seg)


__all__ = ["Runner", "CONTINUATION_LIMIT"]
