"""The compile cache's format: a CaptureResult as JSON and back (safe, no code; the package
docstring describes the format).

Captured tensors are stored as *paths* from the call's arguments, globals and closures
(`tensor_paths`, `resolve`), so the next process shares its Parameters again; constant tensors
built during the capture become raw arrays (stored by files.py in the .bin file); attributes are
encoded explicitly by type (`encode` / `decode`) and a value of any other type raises Uncacheable.
"""
from __future__ import annotations

import functools
import json
import math
import os
import types

import numpy as np

from ...common.dtype import DType
from ...common.tensor import Parameter, Tensor
from ...ops.primitive import PRIMITIVES, AbstractTensor
from ..guards.stable import Uncacheable, _is_cell
from ..ir import CALL, HOST_CALL, IF, OPAQUE, WHILE, Graph, Node, Slot, Value
from .key import decode_guards, encode_guard

_STRUCTURAL = {op.name: op for op in (IF, WHILE, CALL, HOST_CALL)}


# -- capture paths: where a captured tensor lives, in terms the next process can follow ---------------------
def _roots(fn, args, kwargs):
    yield [["fn"]], fn
    for i, a in enumerate(args):
        yield [["arg", i]], a
    for k, v in kwargs.items():
        yield [["kwarg", k]], v


def _children(x):
    """(step, child) pairs to search for tensors below x."""
    if _is_cell(x):
        for name, p in x.parameters_and_names():
            yield ["param", name], p
        for name, c in x.cells_and_names():
            for k, v in c.__dict__.items():
                if isinstance(v, Tensor) or (isinstance(v, (list, tuple)) and v and isinstance(v[0], Tensor)):
                    yield ["attr", f"{name}.{k}" if name else k], v
        return
    if isinstance(x, (list, tuple)):
        for i, v in enumerate(x):
            yield ["item", i], v
    elif isinstance(x, dict):
        for k, v in x.items():
            if isinstance(k, str):
                yield ["key", k], v
    elif isinstance(x, types.MethodType):
        yield ["self"], x.__self__
        yield ["func"], x.__func__
    elif isinstance(x, functools.partial):
        yield ["pfunc"], x.func
        for i, v in enumerate(x.args):
            yield ["parg", i], v
    elif isinstance(x, types.FunctionType):
        code = x.__code__
        for name, c in zip(code.co_freevars, x.__closure__ or ()):
            try:
                yield ["closure", name], c.cell_contents
            except ValueError:
                pass
        g = x.__globals__
        for n in sorted(code.co_names):
            v = g.get(n)
            if v is not None and not isinstance(v, (types.ModuleType, type)) and (
                    isinstance(v, (Tensor, types.FunctionType)) or _is_cell(v)):
                yield ["global", n], v
    elif hasattr(x, "__minispore_jit__") and hasattr(x, "fn"):
        yield ["jitfn"], x.fn


def tensor_paths(fn, args, kwargs, max_depth=8) -> dict:
    """{id(tensor): path} for every tensor reachable from the call (breadth first: shortest paths)."""
    found, seen = {}, set()
    frontier = list(_roots(fn, args, kwargs))
    for _ in range(max_depth):
        nxt = []
        for path, x in frontier:
            if id(x) in seen:
                continue
            seen.add(id(x))
            if isinstance(x, Tensor):
                found.setdefault(id(x), path)
                continue
            for step, child in _children(x):
                nxt.append((path + [step], child))
        frontier = nxt
        if not frontier:
            break
    return found


def _step(x, step):
    kind = step[0]
    if kind == "arg":
        return x[0][step[1]]
    if kind == "kwarg":
        return x[1][step[1]]
    if kind == "param":
        for name, p in x.parameters_and_names():
            if name == step[1]:
                return p
        raise KeyError(step[1])
    if kind == "attr":
        obj, _, attr = step[1].rpartition(".")
        c = x
        for part in obj.split(".") if obj else ():
            c = c._cells[part]
        return c.__dict__[attr]
    if kind == "item":
        return x[step[1]]
    if kind == "key":
        return x[step[1]]
    if kind == "self":
        return x.__self__
    if kind == "func":
        return x.__func__
    if kind == "pfunc":
        return x.func
    if kind == "parg":
        return x.args[step[1]]
    if kind == "closure":
        code = x.__code__
        return x.__closure__[code.co_freevars.index(step[1])].cell_contents
    if kind == "global":
        return x.__globals__[step[1]]
    if kind == "jitfn":
        return x.fn
    raise KeyError(kind)


def resolve(path, fn, args, kwargs):
    head = path[0]
    if head[0] == "fn":
        x = fn
    elif head[0] == "arg":
        x = args[head[1]]
    else:
        x = kwargs[head[1]]
    for step in path[1:]:
        x = _step(x, step)
    return x


# -- encoding values and graphs ---------------------------------------------------------------------------
def _indexspec_types():
    from ...ops.prims._indexspec import IndexInput, Slice
    return {"Slice": Slice, "IndexInput": IndexInput}


def encode(x, graphs):
    """One attribute / template value as JSON (see the module docstring); Graphs by index."""
    t = type(x)
    if x is None or t is bool or t is int or t is str:
        return x
    if t is float:
        return x if math.isfinite(x) else {"f": repr(x)}
    if t is tuple:
        return [encode(v, graphs) for v in x]          # JSON arrays are tuples (the common case)
    if t is list:
        return {"l": [encode(v, graphs) for v in x]}
    if t is dict:
        return {"d": [[encode(k, graphs), encode(v, graphs)] for k, v in x.items()]}
    if isinstance(x, DType):
        return {"dt": x.name}
    if t is Slot:
        return {"slot": x.index}
    if t is slice:
        return {"sl": [encode(x.start, graphs), encode(x.stop, graphs), encode(x.step, graphs)]}
    if x is Ellipsis:
        return {"el": 1}
    if isinstance(x, np.generic):
        v = x.item()
        return {"ng": [x.dtype.str, v if not isinstance(v, float) or math.isfinite(v) else repr(v)]}
    if isinstance(x, np.dtype):
        return {"npdt": x.str}
    if isinstance(x, Graph):
        return {"g": graphs(x)}
    name = t.__name__
    if name in _indexspec_types() and t is _indexspec_types()[name]:
        return {"nt": name, "v": [encode(v, graphs) for v in x]}
    raise Uncacheable(f"an attribute of type {t.__module__}.{t.__qualname__}")


_PLAIN = frozenset((int, float, str, bool, type(None)))


def decode(x, graphs):
    t = type(x)
    if t is list:
        return tuple([v if type(v) in _PLAIN else decode(v, graphs) for v in x])
    if t is not dict:
        return x
    if "l" in x:
        return [decode(v, graphs) for v in x["l"]]
    if "d" in x:
        return {decode(k, graphs): decode(v, graphs) for k, v in x["d"]}
    if "f" in x:
        return float(x["f"])
    if "dt" in x:
        from ...common.dtype import as_dtype
        return as_dtype(x["dt"])
    if "slot" in x:
        return Slot(x["slot"])
    if "sl" in x:
        return slice(*(decode(v, graphs) for v in x["sl"]))
    if "el" in x:
        return Ellipsis
    if "ng" in x:
        dt, v = x["ng"]
        return np.dtype(dt).type(float(v) if isinstance(v, str) else v)
    if "npdt" in x:
        return np.dtype(x["npdt"])
    if "g" in x:
        return graphs[x["g"]]
    if "nt" in x:
        return _indexspec_types()[x["nt"]](*(decode(v, graphs) for v in x["v"]))
    raise ValueError(f"unknown encoded value {x!r}")


def _aval_json(aval):
    if aval is OPAQUE:
        return "py"
    return [list(aval.shape), aval.dtype.name]


def encode_result(result, fn, args, kwargs):
    """(payload dict, constant arrays, source files) for a CaptureResult; raises Uncacheable."""
    if result.runner is not None or result.breaks or result.graph is None:
        raise Uncacheable("a capture with graph breaks")
    guards = [encode_guard(g, fn) for g in result.guards]
    paths = None
    graph_index: dict = {}
    graph_list: list = []
    captures: list = []           # shared table: {"path": [...]} | {"const": k} | {"cell": path}
    cap_index: dict = {}          # id(tensor) -> index in captures
    consts: list = []
    files: set = set()
    avals: list = []
    aval_index: dict = {}

    def aval_ref(a):
        j = json.dumps(_aval_json(a))
        k = aval_index.get(j)
        if k is None:
            k = aval_index[j] = len(avals)
            avals.append(_aval_json(a))
        return k

    def capture_ref(t):
        nonlocal paths
        k = cap_index.get(id(t))
        if k is not None:
            return k
        if paths is None:
            paths = tensor_paths(fn, args, kwargs)
        p = paths.get(id(t))
        if p is not None:
            entry = {"path": p}
        elif isinstance(t, Parameter):
            raise Uncacheable(f"Parameter '{t.name}' is not reachable from the call's arguments, globals or closures")
        else:
            entry = {"const": len(consts)}
            consts.append(np.array(t._data, order="C"))       # (ascontiguousarray would make 0-d 1-d)
        k = cap_index[id(t)] = len(captures)
        captures.append(entry)
        return k

    def host_fn(fnobj):
        from ..trace.cells import HostCellCall as _HostCellCall
        if isinstance(fnobj, _HostCellCall):
            nonlocal paths
            if paths is None:
                paths = tensor_paths(fn, args, kwargs)
            p = _object_path(fnobj.cell, fn, args, kwargs)
            if p is None:
                raise Uncacheable("a host call on a cell that is not reachable from the call")
            return {"hostcell": p}
        raise Uncacheable(f"a host call of {getattr(fnobj, '__qualname__', type(fnobj).__name__)}")

    def gref(g):
        k = graph_index.get(id(g))
        if k is None:
            k = graph_index[id(g)] = len(graph_list)
            graph_list.append(None)
            graph_list[k] = enc_graph(g)
        return k

    src_index: dict = {}
    src_table: list = []

    def src_ref(src):
        if src is None:
            return -1
        k = src_index.get(src)
        if k is None:
            k = src_index[src] = len(src_table)
            src_table.append(list(src))
            files.add(src[0])
        return k

    def enc_graph(g):
        # values are numbered in definition order (params, captures, node outputs): a node's
        # inputs refer to those numbers, and decoding just appends to a list
        ids = {}
        for v in g.params:
            ids[v.id] = len(ids)
        params = [[aval_ref(p.aval), p.name] for p in g.params]
        for v, _t in g.captures:
            ids[v.id] = len(ids)
        caps = [[aval_ref(v.aval), v.name, capture_ref(t)] for v, t in g.captures]
        nodes = []
        for n in g.nodes:
            ins = [ids[x.id] if isinstance(x, Value) else {"c": encode(x, gref)} for x in n.inputs]
            if n.is_primitive:
                op = n.op.name
                if PRIMITIVES.get(op) is not n.op:
                    raise Uncacheable(f"primitive '{op}' is not in the registry (a generated kernel)")
                attrs = {k: encode(v, gref) for k, v in n.attrs.items()}
            else:
                op = "#" + n.op.name
                attrs = {}
                for k, v in n.attrs.items():
                    if n.op is HOST_CALL and k == "fn":
                        attrs[k] = host_fn(v)
                    else:
                        attrs[k] = encode(v, gref)
            for o in n.outputs:
                ids[o.id] = len(ids)
            nodes.append([op, ins, attrs or 0, [aval_ref(o.aval) for o in n.outputs], int(n.multi),
                          src_ref(n.source)])
        outputs = [ids[o.id] if isinstance(o, Value) else {"c": encode(o, gref)} for o in g.outputs]
        return {"name": g.name, "params": params, "captures": caps, "nodes": nodes, "outputs": outputs,
                "notes": encode(dict(g.notes), gref)}

    top = gref(result.graph)
    payload = {"graphs": graph_list, "top": top, "avals": avals, "captures": captures, "sources": src_table,
               "guards": guards,
               "out_template": encode(result.out_template, gref), "mode": result.mode}
    code = getattr(getattr(fn, "__func__", fn), "__code__", None)
    if code is not None:
        files.add(code.co_filename)
    return payload, consts, sorted(f for f in files if os.path.isfile(f))


def _object_path(obj, fn, args, kwargs, max_depth=6):
    seen, frontier = set(), list(_roots(fn, args, kwargs))
    for _ in range(max_depth):
        nxt = []
        for path, x in frontier:
            if x is obj:
                return path
            if id(x) in seen or isinstance(x, Tensor):
                continue
            seen.add(id(x))
            for step, child in _children(x):
                nxt.append((path + [step], child))
            if _is_cell(x):
                for name, c in x.cells_and_names():
                    if name:
                        nxt.append((path + [["cell", name]], c))
        frontier = nxt
    return None


def decode_result(payload, consts, fn, args, kwargs):
    """Rebuild the CaptureResult; raises ValueError/KeyError/... on anything inconsistent."""
    from ..trace.cells import HostCellCall as _HostCellCall
    from ..trace.contract import CaptureResult
    avals = []
    for a in payload["avals"]:
        if a == "py":
            avals.append(OPAQUE)
        else:
            from ...common.dtype import as_dtype
            avals.append(AbstractTensor(tuple(a[0]), as_dtype(a[1])))
    tensors = []
    for c in payload["captures"]:
        if "path" in c:
            t = resolve(c["path"], fn, args, kwargs)
            if not isinstance(t, Tensor):
                raise ValueError(f"capture path {c['path']} leads to {type(t).__name__}, not a Tensor")
        else:
            from ...common.tensor import _wrap
            t = _wrap(consts[c["const"]])
        tensors.append(t)
    graphs: list = [None] * len(payload["graphs"])

    sources = [(f, line, name) for f, line, name in payload["sources"]]
    sub = None

    def build(k):
        if graphs[k] is not None:
            return graphs[k]
        gj = payload["graphs"][k]
        env = []
        params = []
        for a, name in gj["params"]:
            v = Value(avals[a], "param", name=name)
            env.append(v)
            params.append(v)
        caps = []
        for a, name, ti in gj["captures"]:
            t = tensors[ti]
            aval = avals[a]
            if tuple(t.shape) != aval.shape or t.dtype is not aval.dtype:
                raise ValueError(f"captured tensor '{name}' is now {tuple(t.shape)} {t.dtype}, was {aval}")
            v = Value(aval, "capture", producer=t, name=name)
            env.append(v)
            caps.append((v, t))
        nodes = []
        append, extend = nodes.append, env.extend
        for op, ins, attrs, outs, multi, src in gj["nodes"]:
            inputs = tuple([env[x] if type(x) is int else decode(x["c"], sub) for x in ins])
            if op[0] == "#":
                prim = _STRUCTURAL[op[1:]]
                dattrs = {}
                for ak, av in attrs.items():
                    if ak == "fn" and prim is HOST_CALL:
                        dattrs[ak] = _HostCellCall(_resolve_object(av["hostcell"], fn, args, kwargs))
                    else:
                        dattrs[ak] = decode(av, sub)
            else:
                prim = PRIMITIVES[op]
                dattrs = {ak: (av if type(av) in _PLAIN else decode(av, sub)) for ak, av in attrs.items()} \
                    if attrs else {}
            node = Node(prim, inputs, dattrs, (), multi == 1, sources[src] if src >= 0 else None)
            if len(outs) == 1:
                node.outputs = outv = (Value(avals[outs[0]], "node", (node, 0)),)
            else:
                node.outputs = outv = tuple([Value(avals[a], "node", (node, j)) for j, a in enumerate(outs)])
            extend(outv)
            append(node)
        outputs = [env[x] if type(x) is int else decode(x["c"], sub) for x in gj["outputs"]]
        g = Graph(gj["name"], params, caps, nodes, outputs, fn)
        g.notes.update(decode(gj["notes"], sub))
        graphs[k] = g
        return g

    sub = _SubGraphs(build)
    guards = decode_guards(payload.get("guards", []))
    top = build(payload["top"])
    out_template = decode(payload["out_template"], sub)
    return CaptureResult(graph=top, out_template=out_template, guards=guards, mode=payload["mode"])


class _SubGraphs:
    """`graphs[k]` for decode(): builds subgraph k on first use."""

    __slots__ = ("build",)

    def __init__(self, build):
        self.build = build

    def __getitem__(self, k):
        return self.build(k)


def _resolve_object(path, fn, args, kwargs):
    head = path[0]
    x = fn if head[0] == "fn" else args[head[1]] if head[0] == "arg" else kwargs[head[1]]
    for step in path[1:]:
        if step[0] == "cell":
            for name, c in x.cells_and_names():
                if name == step[1]:
                    x = c
                    break
            else:
                raise KeyError(step[1])
        else:
            x = _step(x, step)
    return x


__all__ = ["encode", "decode", "encode_result", "decode_result", "tensor_paths", "resolve"]
