"""Lifetimes: which bytes each value of a graph needs, from which step to which step.

The planner's input is a list of `Buffer`s. One buffer per tensor a node produces, with

* `start` = the step that writes it, `end` = the last step that reads it (directly or through a
  view), both inclusive: during step `i` the kernel needs its inputs AND its outputs at once;
* graph outputs live to the last step (the caller receives them);
* values never read still occupy their bytes during the step that writes them;
* a *saved activation* (a forward value the backward pass reads) needs no special case: in a
  captured value_and_grad graph it is simply a value whose last reader is a backward node, so its
  interval spans from the forward step to that backward step.

**Views and aliases.** A primitive with a `view` fact (ops/primitive.py: reshape, transpose,
split, basic getitem ...) returns a NumPy view of its input 0 when NumPy can (reshape of a
transposed array cannot: it copies). A view owns no memory: it is an alias of the buffer that owns
the bytes, and every use of the view extends the owner's lifetime. Whether NumPy copies depends on
strides, so we track each value's layout with a *fake* ndarray (right shape and strides, never
read) and ask NumPy itself: the fact's `take(fake, out_avals, attrs)` takes the same view with
non-copying operations only (`fake.reshape(shape, copy=False)` raises exactly when the real kernel
would copy) and returns None where the kernel would copy. Planned buffers
are C-contiguous (executors copy each result into its arena slot); graph params and captures are
assumed C-contiguous (the arena executor makes them so). A view of a param/capture lives in the
caller's memory and is not planned (kind "external_view").

**In-place ops.** A primitive with the fact `inplace={out: in}` (ops/primitive.py) writes output
`out` into input `in`'s bytes. The planner honours it when that input is owned by this graph and
dead after the node (SSA: nothing else may still read the old value); the output then aliases the
input's owner. Otherwise the output gets its own buffer (the executor copies).

**Extra constraints** (SOMAS's "conflicts"): `hold_until={value_id: step}` keeps a buffer alive
until a later step (a buffer read by asynchronous work on another stream stays live until the
event that joins it); `workspaces={node_index: nbytes}` adds scratch memory live only during one
step (a fused kernel's temporaries, a called subgraph's own arena).
"""
from __future__ import annotations

import numpy as np

from ...common.errors import OpValueError
from ..ir import OPAQUE, Value

DEFAULT_ALIGNMENT = 64          # bytes; a cache line (MindSpore's device allocator uses 512)


class Buffer:
    """One tensor's memory need (see the module docstring for the fields)."""

    __slots__ = ("value_id", "nbytes", "size_bytes", "start", "end", "alias_of", "kind", "name", "byte_offset")

    def __init__(self, value_id, nbytes, size_bytes, start, end, alias_of=None, kind="node", name=None,
                 byte_offset=0):
        self.value_id = value_id
        self.nbytes = nbytes
        self.size_bytes = size_bytes
        self.start = start
        self.end = end
        self.alias_of = alias_of
        self.kind = kind
        self.name = name
        self.byte_offset = byte_offset       # for aliases: where the view starts inside its owner

    @property
    def lifetime(self) -> int:
        return self.end - self.start + 1

    def __repr__(self):
        a = f", alias_of={self.alias_of}" if self.alias_of is not None else ""
        return f"Buffer({self.value_id}, {self.size_bytes}B, [{self.start}, {self.end}], {self.kind}{a})"


def align(n: int, alignment: int) -> int:
    return -(-n // alignment) * alignment if alignment > 1 else n


# -- layouts: fake arrays that know shape and strides, never data -------------------------------
_ANCHOR = np.zeros(1, dtype=np.uint8)       # fakes are strided "views" of this one byte; never read


def _fake_contiguous(shape, np_dtype):
    itemsize = np.dtype(np_dtype).itemsize
    strides, acc = [], itemsize
    for s in reversed(shape):
        strides.append(acc)
        acc *= max(s, 1)
    return _strided(shape, tuple(reversed(strides)), np_dtype)


def _strided(shape, strides, np_dtype):
    """An ndarray header with this shape and these strides over the one anchor byte (never read)."""
    interface = {"data": (_ANCHOR.__array_interface__["data"][0], True), "shape": tuple(shape),
                 "strides": tuple(strides), "typestr": np.dtype(np_dtype).str, "version": 3}
    return np.asarray(_Interface(interface, _ANCHOR))


class _Interface:
    __slots__ = ("__array_interface__", "base")

    def __init__(self, interface, base):
        self.__array_interface__ = interface
        self.base = base


def _address(a) -> int:
    return a.__array_interface__["data"][0]


def _view_rule(node, fakes):
    """Fake arrays for the outputs of `node` if its kernel makes views of input 0, else None.

    The primitive's `view.take` mirrors its kernel using only operations that never copy, so the
    fake's data is never read."""
    view = node.op.view
    if view is None:
        return None
    x = node.inputs[0] if node.inputs else None
    if not isinstance(x, Value) or x.id not in fakes:
        return None
    try:
        return view.take(fakes[x.id], tuple(o.aval for o in node.outputs), node.attrs)
    except (ValueError, TypeError, IndexError, KeyError):
        return None                          # NumPy would copy (or the rule does not apply)


# -- the analysis ---------------------------------------------------------------------------------
def _is_tensor(v) -> bool:
    return isinstance(v, Value) and v.aval is not OPAQUE


def lifetimes(graph, schedule=None, alignment: int = DEFAULT_ALIGNMENT, hold_until=None, workspaces=None):
    """The Buffers of `graph` (see the module docstring and memory/__init__.py for the contract)."""
    nodes = graph.nodes
    order = list(range(len(nodes))) if schedule is None else list(schedule)
    if sorted(order) != list(range(len(nodes))):
        raise OpValueError("memory.lifetimes", f"a schedule that is a permutation of the {len(nodes)} node "
                           f"indices of graph '{graph.name}'", repr(order)[:200])
    if not isinstance(alignment, int) or isinstance(alignment, bool) or alignment < 1:
        raise OpValueError("memory.lifetimes", "alignment as a positive int", repr(alignment))
    last = len(order) - 1

    fakes: dict = {}          # value id -> fake ndarray (layout); for planned and external values
    owner: dict = {}          # value id -> id of the buffer that owns its bytes (itself if it owns them)
    external: set = set()     # ids of params/captures and the views of them
    for p in graph.params:
        if _is_tensor(p):
            external.add(p.id)
            fakes[p.id] = _fake_contiguous(p.aval.shape, p.aval.dtype.np)
    for v, _t in graph.captures:
        external.add(v.id)
        fakes[v.id] = _fake_contiguous(v.aval.shape, v.aval.dtype.np)

    bufs: dict = {}           # owner id -> Buffer (owning buffers, in definition order)
    aliases: list = []        # alias Buffers (views, in-place outputs); their ends are fixed at the end
    end: dict = {}            # owner id -> last step that needs it

    def use(v, step):
        if isinstance(v, Value) and v.id in owner:
            o = owner[v.id]
            if end[o] < step:
                end[o] = step

    inplace_of: dict = {}
    for step, ni in enumerate(order):
        node = nodes[ni]
        for x in node.inputs:
            use(x, step)
        views = _view_rule(node, fakes) if node.is_primitive else None
        spec = node.op.inplace if node.is_primitive else None
        for k, o in enumerate(node.outputs):
            if not _is_tensor(o):
                continue
            nb = o.aval.nbytes
            if views is not None and k < len(views):
                x = node.inputs[0]
                fakes[o.id] = views[k]
                if x.id in external:
                    external.add(o.id)
                    aliases.append(Buffer(o.id, nb, 0, step, step, None, "external_view", o.name))
                    continue
                base = owner[x.id]
                owner[o.id] = base
                off = _address(views[k]) - _address(fakes[base]) if views[k].size else 0
                aliases.append(Buffer(o.id, nb, 0, step, step, base, "view", o.name, off))
                continue
            if spec is not None and k in spec:
                x = node.inputs[spec[k]]
                if isinstance(x, Value) and x.id in owner and x.id not in external:
                    fx, fo = fakes[x.id], fakes[owner[x.id]]
                    # only a write over the owner's whole bytes, in the owner's own layout
                    if fx.flags.c_contiguous and _address(fx) == _address(fo) and fx.nbytes == fo.nbytes == nb:
                        inplace_of[o.id] = (x, step)
            owner[o.id] = o.id
            end[o.id] = step
            fakes[o.id] = _fake_contiguous(o.aval.shape, o.aval.dtype.np)
            bufs[o.id] = Buffer(o.id, nb, align(nb, alignment), step, step, None, "node", o.name)
    for o in graph.outputs:
        if isinstance(o, Value) and o.id in owner:
            end[owner[o.id]] = last
            bufs[owner[o.id]].kind = "output" if bufs[owner[o.id]].kind == "node" else bufs[owner[o.id]].kind

    # in-place outputs: merge into the input's owner when that owner is dead after the node
    if inplace_of:
        _merge_inplace(inplace_of, owner, bufs, end, aliases, external, graph)

    for vid, step in (hold_until or {}).items():
        o = owner.get(vid)
        if o is not None and end[o] < step:
            end[o] = step
    out = []
    for o, b in bufs.items():
        b.end = end[o]
        out.append(b)
    for a in aliases:
        if a.alias_of is not None:
            a.alias_of = owner[a.alias_of]
            a.start, a.end = bufs[a.alias_of].start, bufs[a.alias_of].end
        out.append(a)
    pos = {ni: step for step, ni in enumerate(order)}
    for ni, nb in (workspaces or {}).items():
        step = pos[ni]
        out.append(Buffer(("workspace", ni), nb, align(nb, alignment), step, step, None, "workspace"))
    return out


def _merge_inplace(inplace_of, owner, bufs, end, aliases, external, graph):
    outputs = {owner[o.id] for o in graph.outputs if isinstance(o, Value) and o.id in owner}
    for out_id, (x, step) in inplace_of.items():
        base = owner[x.id]
        if end[base] != step or base in outputs:
            continue                         # the old value is still needed: a separate buffer
        b = bufs.pop(out_id)
        end[base] = max(end[base], end.pop(out_id))
        for vid, o in owner.items():
            if o == out_id:
                owner[vid] = base
        aliases.append(Buffer(out_id, b.nbytes, 0, step, step, base, "inplace", b.name))
        if out_id in outputs:
            outputs.add(base)


__all__ = ["Buffer", "lifetimes", "align", "DEFAULT_ALIGNMENT"]
