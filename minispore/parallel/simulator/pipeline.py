"""Pipeline schedules as task graphs: one rank per stage, forwards and backwards of micro-batches.

A schedule is, per device, the order in which it runs its work: the lists of
`minispore.nn.pipeline_schedule` (`make_schedule("1f1b", p, m, v)`: GPipe, 1F1B, Megatron's
interleaved 1F1B), whose items are `Action(kind, microbatch, chunk)` with `chunk` the *virtual
stage* (device `chunk mod p`), or plain tuples ``("F" | "B", mb)`` (virtual stage = the device)
and ``("F" | "B", mb, virtual_stage)``. `pipeline_graph` turns the lists into tasks on each
device's compute stream, with the dependencies the model imposes:

* F(mb) on virtual stage k waits for F(mb) on stage k-1 (its activation arrives by a p2p send);
* B(mb) on stage k waits for B(mb) on stage k+1 (the gradient arrives by a p2p send) and for
  F(mb) on stage k itself (it needs the saved activations).

Each send is a task on the sending device's communication stream (`p2p` seconds, 0 by default):
unlike `nn.pipeline_schedule.simulate`, whose messages only delay their receiver, here a device
sends one message at a time, in its compute order, so slow links also queue.

With uniform times (t_f, t_b per micro-batch for a whole stage, t_f / v per chunk) the ideal work
of a device is m (t_f + t_b) and the bubble fraction `(makespan - work) / work` is (p-1)/m for
GPipe and 1F1B, (p-1)/(v m) interleaved (Narayanan et al. 2021, §2.2): the tests check those
exactly.
"""
from __future__ import annotations

from ...common.errors import OpTypeError, OpValueError
from .engine import COMM, COMPUTE, TaskGraph


def schedule_orders(scheduler, p, m, v=1) -> list:
    """`minispore.nn.pipeline_schedule.make_schedule(scheduler, p, m, v)`: per-device Action lists."""
    from ...nn.pipeline_schedule import make_schedule
    return make_schedule(scheduler, p, m, v)


def _item(op, item, device):
    """(kind, micro-batch, virtual stage) of a schedule item."""
    if hasattr(item, "microbatch"):                     # nn.pipeline_schedule.Action
        kind, mb, stage = item.kind, item.microbatch, item.chunk
    elif isinstance(item, (tuple, list)) and len(item) in (2, 3):
        kind, mb = item[0], item[1]
        stage = item[2] if len(item) == 3 else device
    else:
        raise OpValueError(op, "schedule items Action(kind, microbatch, chunk) or ('F'|'B', mb[, virtual stage])",
                           repr(item))
    if kind not in ("F", "B") or any(isinstance(x, bool) or not isinstance(x, int) for x in (mb, stage)):
        raise OpValueError(op, "items of kind 'F' or 'B' with integer micro-batch and virtual stage", repr(item))
    return kind, mb, stage


def pipeline_graph(orders, t_forward, t_backward, *, p2p=0.0, graph=None) -> TaskGraph:
    """Tasks of the per-device `orders` (see the module docstring). `t_forward` / `t_backward`:
    seconds of one micro-batch through one virtual stage (a number, or a function
    (virtual_stage) -> seconds)."""
    op = "pipeline_graph"
    if not isinstance(orders, (list, tuple)) or not orders:
        raise OpTypeError(op, "a list with one schedule (list of items) per device", type(orders).__name__)
    p = len(orders)
    parsed = [[_item(op, it, r) for it in seq] for r, seq in enumerate(orders)]
    last = max(k for seq in parsed for _, _, k in seq)
    tf = t_forward if callable(t_forward) else (lambda k: t_forward)
    tb = t_backward if callable(t_backward) else (lambda k: t_backward)
    g = graph if graph is not None else TaskGraph()
    where = {}
    for r, seq in enumerate(parsed):
        for kind, mb, k in seq:
            if k % p != r:
                raise OpValueError(op, f"device {r} to run its own virtual stages (stage mod {p} = {r})",
                                   repr((kind, mb, k)))
            if (kind, mb, k) in where:
                raise OpValueError(op, "each (F|B, micro-batch, virtual stage) once", repr((kind, mb, k)))
            phase = "forward" if kind == "F" else "backward"
            where[(kind, mb, k)] = g.add(f"{kind}{mb}" + (f"@{k}" if last >= p else ""), COMPUTE,
                                         tf(k) if kind == "F" else tb(k), rank=r, kind=phase, copy=mb,
                                         phase=phase)
    for mb in sorted({mb for (_, mb, _) in where}):
        for k in range(last + 1):
            for kind in ("F", "B"):
                if (kind, mb, k) not in where:
                    raise OpValueError(op, f"F and B of micro-batch {mb} on every virtual stage 0..{last}",
                                       f"no {kind}{mb} on virtual stage {k}")
    # sends, in each sender's compute order (its communication stream is in order too)
    for r, seq in enumerate(parsed):
        for kind, mb, k in seq:
            me = where[(kind, mb, k)]
            if kind == "B":
                g.add_dependency(me, where[("F", mb, k)])
            target = k + 1 if kind == "F" else k - 1
            if 0 <= target <= last:
                send = g.add(f"send {kind}{mb} {k}->{target}", COMM, p2p, [me], rank=r, kind="p2p", copy=mb,
                             phase="forward" if kind == "F" else "backward")
                g.add_dependency(where[(kind, mb, target)], send)
    return g


def bubble_fraction(timeline, work_per_device) -> float:
    """(makespan - ideal work of one device) / that work (Narayanan et al.'s t_pb / t_id)."""
    return (timeline.makespan() - work_per_device) / work_per_device


__all__ = ["schedule_orders", "pipeline_graph", "bubble_fraction"]
