"""The text form of the IR: one line per node, e.g.

    %5 = matmul(%3, %4) {transpose_b=True} : f32[12,64,384]          # model.py:81

Values are renumbered per graph (params, then captures, then node outputs, in order), so a dump
does not depend on how many graphs were built before. Subgraphs (If/While/Call) are printed after
the graph that uses them and referred to by name (`@f.then_0`). The dump is what
`minispore.graph.dump(fn, *args)` returns and what `MS_DEV_SAVE_GRAPHS=1` (MindSpore's variable)
or `MINISPORE_DUMP_IR=1` prints for every compiled graph.
"""
from __future__ import annotations

import os

from ..ops.primitive import AbstractTensor
from .ir import OPAQUE, Graph, Slot, Value

_SHORT = {"Bool": "b", "UInt8": "u8", "Int8": "i8", "Int16": "i16", "Int32": "i32", "Int64": "i64",
          "Float16": "f16", "BFloat16": "bf16", "Float32": "f32", "Float64": "f64"}


def format_aval(aval) -> str:
    """`f32[4,8]`, `i64[]` for a 0-d tensor, `py` for an opaque Python value."""
    if isinstance(aval, AbstractTensor):
        return f"{_SHORT.get(aval.dtype.name, aval.dtype.name)}[{','.join(str(s) for s in aval.shape)}]"
    if aval is OPAQUE:
        return "py"
    return repr(aval)


def _format_const(c) -> str:
    if isinstance(c, float):
        return repr(c)
    if isinstance(c, (tuple, list)):
        inner = ", ".join(_format_const(x) for x in c)
        return f"({inner}{',' if len(c) == 1 else ''})" if isinstance(c, tuple) else f"[{inner}]"
    if isinstance(c, Graph):
        return f"@{c.name}"
    text = repr(c)
    return text if len(text) <= 40 else text[:37] + "..."


class _Namer:
    def __init__(self):
        self.names: dict[int, str] = {}

    def define(self, v: Value) -> str:
        name = f"%{len(self.names)}"
        self.names[v.id] = name
        return name

    def ref(self, x) -> str:
        if isinstance(x, Value):
            return self.names.get(x.id, f"%?{x.id}")      # %? marks a value not defined in this graph
        return _format_const(x)


def _format_attrs(attrs) -> str:
    shown = {k: v for k, v in attrs.items() if k not in ("fn", "template", "name")}
    if not shown:
        return ""
    return " {" + ", ".join(f"{k}={_format_const(v)}" for k, v in shown.items()) + "}"


def _short_source(node, base=None) -> str:
    if node.source is None:
        return ""
    f, line, _ = node.source
    return f"{os.path.basename(f)}:{line}"


def _layout_texts(graph) -> dict:
    """A semi-auto partitioned graph's layout of each value, as text (graph/parallel/partition.py
    stores it in the graph's notes): {id(value): "<[splits] map[...]>"}, else {}."""
    info = graph.notes.get("semi_auto")
    return info.get("layout_text", {}) if isinstance(info, dict) else {}


def _format_one(graph: Graph, lines: list, width: int):
    n = _Namer()
    lay = _layout_texts(graph)

    def typed(v):
        t = lay.get(id(v))
        return format_aval(v.aval) + (f" <{t}>" if t else "")

    params = ", ".join(f"{n.define(p)}: {typed(p)}" for p in graph.params)
    lines.append(f"graph {graph.name}({params}) {{")
    for v, t in graph.captures:           # tensors read by reference when the graph runs
        label = f" '{v.name}'" if v.name else ""
        lines.append(f"  {n.define(v)} = capture {type(t).__name__}{label} : {typed(v)}")
    for node in graph.nodes:
        ins = ", ".join(n.ref(x) for x in node.inputs)
        outs = [n.define(o) for o in node.outputs]
        lhs = outs[0] if len(outs) == 1 and not node.multi else "(" + ", ".join(outs) + ")"
        types = ", ".join(typed(o) for o in node.outputs)
        if node.multi:
            types = f"({types})"
        name = node.op.name
        if name == "HostCall":
            name = f"HostCall[{node.attrs.get('name', '?')}]"
        text = f"  {lhs} = {name}({ins}){_format_attrs(node.attrs)} : {types}"
        src = _short_source(node)
        if src:
            text = text.ljust(width) + f"  # {src}"
        lines.append(text)
    lines.append("  return " + ", ".join(n.ref(o) for o in graph.outputs))
    lines.append("}")


def format_graph(graph: Graph, width: int = 72) -> str:
    """The graph and all its subgraphs as text (see the module docstring)."""
    lines: list[str] = []
    for i, g in enumerate(graph.all_graphs()):
        if i:
            lines.append("")
        _format_one(g, lines, width)
    return "\n".join(lines)


class GraphText(str):
    """A dump: a `str` whose repr is the text itself, so a notebook cell shows it readably."""

    def __repr__(self):
        return str(self)


def dump_enabled() -> bool:
    """MS_DEV_SAVE_GRAPHS (MindSpore's name) or MINISPORE_DUMP_IR set to a true value, or
    `set_context(save_graphs=True)`."""
    for var in ("MS_DEV_SAVE_GRAPHS", "MINISPORE_DUMP_IR"):
        if os.environ.get(var, "0") not in ("", "0", "false", "False"):
            return True
    from ..common import context
    return bool(context.get_context("save_graphs"))


__all__ = ["format_graph", "format_aval", "GraphText", "dump_enabled", "Slot"]
