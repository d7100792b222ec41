"""The compile cache: captured graphs stored on disk, so a later process skips capture.

    ms.set_context(enable_compile_cache=True, compile_cache_path="./cache.ms")
    # or, with lower priority (MindSpore's variables): MS_COMPILER_CACHE_ENABLE=1 MS_COMPILER_CACHE_PATH=...

Entries live in `<path>/rank_<RANK_ID>/graph_cache/` (MindSpore's layout; RANK_ID defaults to 0):
`<key>.json` (a header line, then the graph) and, when the graph holds constant tensors,
`<key>.bin` (their raw bytes; dtype, shape and offset of each are in the JSON). The *key* is a
SHA-256 of everything the captured graph depends on that can be known before capturing:

* the minispore, Python and NumPy versions and this file format's version;
* the function: its code (bytecode, constants and names, nested functions included), and the
  same for the functions its globals and closure hold (a `value_and_grad` wrapper -> the loss);
* the call's guards in a *stable* form: tensor shapes and dtypes, Python constants, and for
  objects (a Cell, a config) their class and state - the plain attributes of every sub-cell, the
  names, shapes and dtypes of its parameters - instead of the identities the in-memory cache uses;
* the jit settings (capture mode, jit level, fullgraph, options).

An entry also records the SHA-256 of every source file the graph's nodes came from (the model's
files); a file that changed since makes the entry *stale*.

**Format** (safe, no code): JSON. Primitives are stored by NAME and looked up in the registry;
attributes are encoded explicitly by type (a JSON array is a tuple, `{"l": [...]}` a list, `{"dt": "Float32"}` a dtype,
`{"sl": [0, 4, 1]}` a slice ...) - an attribute of any other type makes the graph uncacheable, it is
never pickled. Captured tensors are stored as *paths* from the call's arguments, globals and
closures (`closure gf -> closure fn -> self -> param layers.0.attention.wq.weight`), resolved
again in the new process, so Parameters are shared as before; constant tensors built during the
capture (RoPE tables, masks) are stored as raw bytes in the .bin file.

**Never trusted**: a load checks the format and versions, the key, the SHA-256 of the payload and
of the .bin, the source files, every primitive name, and that each captured tensor's path leads to
a tensor of the recorded shape and dtype. Any failure - or a JSON error, a truncated file - counts
as *stale* or *corrupt*, is logged on `logging.getLogger("minispore.jit")`, and the function is
captured again and the entry rewritten. A cache directory that cannot be written is reported once
(a RuntimeWarning) and bypassed.

Counters (`stats()`): hits, misses, stores, stale, corrupt, uncacheable, captures (real captures
run by jit while the cache is on) - the tests count captures in a second process with them.
"""
from __future__ import annotations

import dataclasses
import functools
from collections import OrderedDict
import gc
import hashlib
import json
import logging
import math
import operator
import os
import sys
import types
import warnings

import numpy as np

from ..common import context
from ..common.dtype import DType
from ..common.tensor import Parameter, Tensor
from ..ops.primitive import PRIMITIVES, AbstractTensor
from .ir import CALL, HOST_CALL, IF, OPAQUE, WHILE, Graph, Node, Slot, Value

logger = logging.getLogger("minispore.jit")
FORMAT = "minispore-graph-cache/1"
_STRUCTURAL = {op.name: op for op in (IF, WHILE, CALL, HOST_CALL)}
_SCALARS = (bool, int, float, str, bytes, type(None))

_stats = {"hits": 0, "misses": 0, "stores": 0, "stale": 0, "corrupt": 0, "uncacheable": 0, "captures": 0}
_unwritable: set = set()


def stats() -> dict:
    """A copy of the counters (see the module docstring)."""
    return dict(_stats)


def reset_stats():
    for k in _stats:
        _stats[k] = 0


class Uncacheable(Exception):
    """This graph or call cannot be stored safely (an attribute or object the format cannot express)."""


# -- settings -------------------------------------------------------------------------------------------
def enabled() -> bool:
    if context.get_context("enable_compile_cache"):
        return True
    return os.environ.get("MS_COMPILER_CACHE_ENABLE", "0") == "1"


def cache_dir() -> str:
    path = context.get_context("compile_cache_path") or os.environ.get("MS_COMPILER_CACHE_PATH", "") or "cache.ms"
    rank = os.environ.get("RANK_ID", "0")
    return os.path.join(os.fspath(path), f"rank_{rank}", "graph_cache")


# -- stable tokens: what a call depends on, identical across processes ---------------------------------
_code_hashes: dict = {}


def code_hash(code) -> str:
    """SHA-256 of a code object: bytecode, constants (nested code included), names."""
    h = _code_hashes.get(code)
    if h is None:
        m = hashlib.sha256()
        m.update(code.co_code)
        m.update(repr((code.co_name, code.co_names, code.co_varnames, code.co_freevars)).encode())
        for c in code.co_consts:
            m.update(code_hash(c).encode() if isinstance(c, types.CodeType) else repr(c).encode())
        h = _code_hashes[code] = m.hexdigest()
    return h


def _is_cell(x) -> bool:
    return hasattr(x, "cells_and_names") and hasattr(x, "construct")


def _array_token(a):
    a = np.array(a, order="C", copy=False) if not a.flags.c_contiguous else a
    if a.nbytes > (1 << 20):
        return ("ndarray", a.shape, a.dtype.str, "large")
    return ("ndarray", a.shape, a.dtype.str, hashlib.sha256(a.tobytes()).hexdigest())


def stable_token(x, depth: int = 4, seen=None):
    """A JSON-able description of `x` that is the same in every process for the same program."""
    if seen is None:
        seen = set()
    t = type(x)
    if t in _SCALARS:
        return [t.__name__, x if t is not float or math.isfinite(x) else repr(x)] if t is not bytes else \
            ["bytes", x.hex()]
    if isinstance(x, DType):
        return ["dtype", x.name]
    if isinstance(x, Tensor):
        return ["tensor", list(x.shape), x.dtype.name, isinstance(x, Parameter),
                bool(getattr(x, "requires_grad", False))]
    if isinstance(x, np.ndarray):
        return list(_array_token(x))
    if isinstance(x, np.generic):
        return ["npscalar", x.dtype.str, x.item() if not isinstance(x.item(), float) or math.isfinite(x.item())
                else repr(x.item())]
    if isinstance(x, Slot):
        return ["slot", x.index]
    if t is slice:
        return ["slice", stable_token(x.start), stable_token(x.stop), stable_token(x.step)]
    if x is Ellipsis:
        return ["ellipsis"]
    if isinstance(x, types.ModuleType):
        return ["module", x.__name__]
    if isinstance(x, type):
        return ["class", x.__module__, x.__qualname__]
    if id(x) in seen:
        return ["cycle"]
    if depth < 0:
        return ["deep", type(x).__module__, type(x).__qualname__]
    seen = seen | {id(x)}
    if t is tuple or t is list or (isinstance(x, tuple) and hasattr(x, "_fields")):
        return [t.__name__, [stable_token(v, depth - 1, seen) for v in x]]
    if t is dict:
        return ["dict", sorted(([repr(k), stable_token(v, depth - 1, seen)] for k, v in x.items()),
                               key=lambda kv: kv[0])]
    if isinstance(x, types.MethodType):
        return ["method", stable_token(x.__self__, depth, seen), _function_token(x.__func__, depth, seen)]
    if isinstance(x, functools.partial):
        return ["partial", stable_token(x.func, depth - 1, seen), stable_token(list(x.args), depth - 1, seen),
                stable_token(dict(x.keywords), depth - 1, seen)]
    if isinstance(x, types.FunctionType):
        return _function_token(x, depth, seen)
    if isinstance(x, types.BuiltinFunctionType):
        return ["builtin", getattr(x, "__module__", None), x.__qualname__]
    if _is_cell(x):
        return _cell_token(x, depth, seen)
    if dataclasses.is_dataclass(x) or hasattr(x, "__dict__"):
        d = {f.name: getattr(x, f.name) for f in dataclasses.fields(x)} if dataclasses.is_dataclass(x) else vars(x)
        items = []
        for k, v in sorted(d.items()):
            if k.startswith("_") and isinstance(v, (dict, list)):
                continue                   # private caches (filled while tracing) are not state
            items.append([k, stable_token(v, depth - 1, seen)])
        return ["object", t.__module__, t.__qualname__, items]
    if hasattr(x, "__minispore_jit__"):
        return ["jit", stable_token(getattr(x, "fn", None), depth - 1, seen)]
    raise Uncacheable(f"an argument or global of type {t.__module__}.{t.__qualname__}")


def _function_token(f, depth, seen):
    """Name, code hash, closure, defaults and referenced globals of a function. minispore's own
    framework functions (autograd wrappers, jit...) are covered by the version in the key: only
    their closures (which hold the user's function and weights) are described."""
    code = getattr(f, "__code__", None)
    framework = code is not None and _is_framework(code)
    tok = ["function", getattr(f, "__module__", None), getattr(f, "__qualname__", None),
           code_hash(code) if code is not None and not framework else None]
    if depth > 0:
        cells = getattr(f, "__closure__", None) or ()
        names = code.co_freevars if code is not None else ()
        closure = []
        for name, c in zip(names, cells):
            try:
                v = c.cell_contents
            except ValueError:
                continue
            closure.append([name, stable_token(v, depth - 1, seen)])
        tok.append(closure)
        tok.append(stable_token(list(f.__defaults__ or ()), depth - 1, seen))
        if not framework:
            tok.append(_globals_token(f, depth - 1, seen))
    return tok


def _is_framework(code) -> bool:
    from .capture.trace import _is_internal
    return _is_internal(code)


def _globals_token(f, depth, seen):
    code = getattr(f, "__code__", None)
    g = getattr(f, "__globals__", None)
    if code is None or g is None:
        return []
    from .cache import _code_names
    out = []
    for n in sorted(_code_names(code, set())):
        if n in g and not isinstance(g[n], (types.ModuleType, type)):
            v = g[n]
            if isinstance(v, (types.FunctionType, types.BuiltinFunctionType)) or _is_cell(v) \
                    or isinstance(v, (Tensor, DType, np.ndarray)) or type(v) in _SCALARS:
                out.append([n, stable_token(v, depth, seen)])
    return out


def _cell_token(cell, depth, seen):
    """Every sub-cell's class, construct code, plain attributes, dtypes, arrays, dataclass configs,
    tensors and parameters (names, shapes, dtypes), in the cells' own attribute order. A cell met
    again (through another closure) is described once per token: `["same", n]`."""
    k = _cell_memo.get(id(cell))
    if k is not None:
        return ["same", k]
    _cell_memo[id(cell)] = len(_cell_memo)
    parts = []
    stack, visited = [("", cell)], set()
    while stack:
        name, c = stack.pop()
        if id(c) in visited:
            continue
        visited.add(id(c))
        d = c.__dict__
        if d.get("_forward_hooks") or d.get("_forward_pre_hooks"):
            raise Uncacheable(f"cell '{name or type(c).__name__}' has forward hooks (Python functions)")
        tc = type(c)
        lkey = (tc, tuple(d), tuple(map(type, d.values())))
        lay = _cell_layouts.get(lkey)
        if lay is None:
            lay = _cell_layouts[lkey] = _CellLayout(d, tc)
        attrs = [lay.scalar_get(d)]
        for k in lay.other_keys:
            v = d[k]
            if isinstance(v, Tensor):
                attrs.append((k, stable_token(v)))
            elif isinstance(v, DType):
                attrs.append((k, "dtype", v.name))
            elif type(v) is np.ndarray:
                attrs.append((k, _array_token(v)))
            elif depth > 0:
                attrs.append((k, stable_token(v, depth - 1, seen)))
        params = [(k, p._data.shape, p.dtype.name, p.requires_grad)
                  for k, p in d["_params"].items() if p is not None]
        parts.append((name, lay.digest, attrs, params))
        prefix = name + "." if name else ""
        for k, sub in reversed(d["_cells"].items()):
            if sub is not None:
                stack.append((prefix + k, sub))
    return ["cell", parts]


_cell_memo: dict = {}           # id(cell) -> number, during one call_token()
_cell_layouts: dict = {}        # (class, attribute names, attribute types) -> _CellLayout


class _CellLayout:
    """How to describe cells of one layout (class, attribute names and value types): which keys
    hold plain values (read with one C-level itemgetter), which hold tensors, dtypes, arrays or
    dataclass configs; plus the class's identity (module, name, construct's code hash). Built from
    the first such cell; a model's cells share a handful of layouts."""

    __slots__ = ("scalar_keys", "scalar_get", "other_keys", "class_id", "digest")

    def __init__(self, d, cls):
        scalars, others = [], []
        for k, v in d.items():
            tv = type(v)
            if tv in _SCALARS:
                if k not in _VOLATILE:
                    scalars.append(k)
            elif tv is dict or tv is OrderedDict:
                continue
            elif (isinstance(v, (Tensor, DType)) or tv is np.ndarray
                  or (dataclasses.is_dataclass(v) and not isinstance(v, type))):
                others.append(k)
        self.scalar_keys = tuple(scalars)
        getter = operator.itemgetter(*scalars) if scalars else None
        self.scalar_get = (lambda dd: ()) if not scalars else (
            (lambda dd, _g=getter: (_g(dd),)) if len(scalars) == 1 else getter)
        self.other_keys = tuple(others)
        construct = getattr(cls, "construct", None)
        code = getattr(getattr(construct, "fn", construct), "__code__", None)
        self.class_id = (cls.__module__, cls.__qualname__, code_hash(code) if code is not None else "")
        # what the token says about every cell of this layout (class identity and attribute names)
        # in 32 hex digits: the key is a hash of the token's repr, and a long model repeats the
        # same few layouts per layer, so spelling them out each time made the repr the costliest
        # part of computing the key
        self.digest = hashlib.sha256(repr((self.class_id, self.scalar_keys, self.other_keys)).encode()).hexdigest()[:32]
_VOLATILE = frozenset(("_hook_id", "_default_name_id", "_casting"))


def call_token(jf, fn, args, kwargs):
    """The stable description of one compile request (hashed into the key)."""
    _cell_memo.clear()
    try:
        return [FORMAT, _versions(), [jf.capture_mode, jf.jit_level, jf.fullgraph, stable_token(jf.options)],
                stable_token(fn, depth=5), stable_token(list(args), depth=5), stable_token(dict(kwargs), depth=5)]
    finally:
        _cell_memo.clear()


def _versions():
    from .. import __version__
    return [__version__, list(sys.version_info[:3]), np.__version__]


def key_of(token) -> str:
    # tokens are lists of str/int/float/bool/None (dict items already sorted): repr is deterministic
    return hashlib.sha256(repr(token).encode()).hexdigest()


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
    from ..ops.prims._indexspec import IndexInput, Slice
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
        from ..common.dtype import as_dtype
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
    guards = [_encode_guard(g, fn) for g in result.guards]
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
        from ..jit import _HostCellCall
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
    from ..jit import _HostCellCall
    from .capture import CaptureResult
    avals = []
    for a in payload["avals"]:
        if a == "py":
            avals.append(OPAQUE)
        else:
            from ..common.dtype import as_dtype
            avals.append(AbstractTensor(tuple(a[0]), as_dtype(a[1])))
    tensors = []
    for c in payload["captures"]:
        if "path" in c:
            t = resolve(c["path"], fn, args, kwargs)
            if not isinstance(t, Tensor):
                raise ValueError(f"capture path {c['path']} leads to {type(t).__name__}, not a Tensor")
        else:
            from ..common.tensor import _wrap
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
    guards = _decode_guards(payload.get("guards", []))
    top = build(payload["top"])
    out_template = decode(payload["out_template"], sub)
    return CaptureResult(graph=top, out_template=out_template, guards=guards, mode=payload["mode"])


# -- guards a capture mode adds (the ast mode guards the globals its interpreted code read) -------------
class Stale(Exception):
    """The entry was valid when written but no longer matches this program (a global changed)."""


_MISSING_TOKEN = ["missing"]


def _keyed_globals(fn):
    """(id of globals dict, name) of the globals the key itself describes (those of `fn`'s code
    that _globals_token includes): their guard needs no separate check."""
    f = getattr(fn, "__func__", fn)
    code, g = getattr(f, "__code__", None), getattr(f, "__globals__", None)
    if code is None or g is None:
        return set()
    from .cache import _code_names
    out = set()
    for n in _code_names(code, set()):
        v = g.get(n)
        if n in g and not isinstance(v, (types.ModuleType, type)) and (
                isinstance(v, (types.FunctionType, types.BuiltinFunctionType)) or _is_cell(v)
                or isinstance(v, (Tensor, DType, np.ndarray)) or type(v) in _SCALARS):
            out.add((id(g), n))
    return out


def _encode_guard(guard, fn):
    import inspect
    if getattr(guard, "__name__", "") != "globals_read_by_interpreted_code":
        raise Uncacheable(f"a capture guard {getattr(guard, '__qualname__', guard)!r} the cache cannot describe")
    reads = inspect.getclosurevars(guard).nonlocals.get("reads")
    keyed = _keyed_globals(fn)
    out = []
    for g, name, _tok in reads or ():
        module = g.get("__name__")
        if not isinstance(module, str) or getattr(sys.modules.get(module), "__dict__", None) is not g:
            raise Uncacheable(f"a global '{name}' of a namespace that is not an imported module")
        if (id(g), name) in keyed:
            out.append([module, name, "key"])          # already part of the key
        else:
            out.append([module, name, _plain_token(g[name]) if name in g else _MISSING_TOKEN])
    return out


def _plain_token(x):
    """stable_token(x) as JSON gives it back (tuples become lists), for comparing with a stored one."""
    _cell_memo.clear()
    try:
        return json.loads(json.dumps(stable_token(x)))
    finally:
        _cell_memo.clear()


def _decode_guards(encoded):
    from .capture.ast_mode.interpreter import _token
    from .capture.ast_mode.signals import MISSING
    guards = []
    for reads in encoded:
        live = []
        for module, name, tok in reads:
            g = sys.modules[module].__dict__
            now = tok if tok == "key" else _plain_token(g[name]) if name in g else _MISSING_TOKEN
            if now != tok:
                raise Stale(f"global '{module}.{name}' changed")
            live.append((g, name, _token(g.get(name, MISSING))))
        guards.append(_globals_guard(live))
    return guards


def _globals_guard(reads):
    from .capture.ast_mode.interpreter import _token
    from .capture.ast_mode.signals import MISSING

    def globals_read_by_interpreted_code(args, kwargs):
        for g, name, tok in reads:
            if _token(g.get(name, MISSING)) != tok:
                return f"global '{name}' changed"
        return None
    return globals_read_by_interpreted_code


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


# -- files ------------------------------------------------------------------------------------------------
def _file_sha(path) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _atomic_write(path, data: bytes):
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def _warn_unwritable(d, err):
    if d not in _unwritable:
        _unwritable.add(d)
        warnings.warn(f"compile cache: the directory '{d}' cannot be written ({type(err).__name__}: {err}); "
                      f"compiling without the cache", RuntimeWarning, stacklevel=4)


def store(jf, fn, args, kwargs, result, key=None):
    """Write `result` for this call; False (and a log line) when it cannot be stored."""
    d = cache_dir()
    if d in _unwritable:
        return False
    try:
        key = key or key_of(call_token(jf, fn, args, kwargs))
        payload, consts, files = encode_result(result, fn, args, kwargs)
    except Uncacheable as e:
        _stats["uncacheable"] += 1
        logger.info("compile cache: '%s' is not cached: %s", jf.name, e)
        return False
    # constant tensors: one raw binary file, each array's dtype/shape/offset in the payload
    blob, table = bytearray(), []
    for a in consts:
        off = len(blob)
        blob += a.tobytes()
        blob += b"\0" * (-len(blob) % 64)
        table.append([a.dtype.str, list(a.shape), off])
    payload["consts"] = table
    body = json.dumps(payload, separators=(",", ":"), allow_nan=False).encode()
    header = {"format": FORMAT, "versions": _versions(), "key": key, "name": jf.name,
              "sources": {f: _file_sha(f) for f in files},
              "payload_sha256": hashlib.sha256(body).hexdigest(),
              "consts_sha256": hashlib.sha256(blob).hexdigest() if blob else None}
    try:
        os.makedirs(d, exist_ok=True)
        if blob:
            _atomic_write(os.path.join(d, key + ".bin"), bytes(blob))
        # one JSON header line, then the JSON payload (checksummed as bytes)
        _atomic_write(os.path.join(d, key + ".json"), json.dumps(header).encode() + b"\n" + body)
    except OSError as e:
        _warn_unwritable(d, e)
        return False
    _stats["stores"] += 1
    logger.info("compile cache: stored '%s' (%s)", jf.name, key[:12])
    return True


def load(jf, fn, args, kwargs):
    """(CaptureResult or None, key). None on a miss, or on a stale/corrupt entry (counted and logged)."""
    try:
        key = key_of(call_token(jf, fn, args, kwargs))
    except Uncacheable as e:
        _stats["uncacheable"] += 1
        logger.info("compile cache: '%s' is not cached: %s", jf.name, e)
        return None, None
    d = cache_dir()
    path = os.path.join(d, key + ".json")
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except (FileNotFoundError, NotADirectoryError):
        _stats["misses"] += 1          # (a path that is not a directory: store() reports it, once)
        return None, key
    except OSError as e:
        _stats["corrupt"] += 1
        logger.warning("compile cache: cannot read '%s' (%s); recompiling", path, e)
        return None, key
    try:
        head, sep, body = raw.partition(b"\n")
        if not sep:
            raise ValueError("the file is truncated (no payload)")
        header = json.loads(head)
        problem = _check_header(header, key, body)
        if problem:
            _stats["stale"] += 1
            logger.info("compile cache: stale entry for '%s' (%s); recompiling", jf.name, problem)
            return None, key
        blob = b""
        if header.get("consts_sha256"):
            with open(os.path.join(d, key + ".bin"), "rb") as f:
                blob = bytearray(f.read())
            if hashlib.sha256(blob).hexdigest() != header["consts_sha256"]:
                raise ValueError("the constants file does not match its checksum")
        paused = gc.isenabled()
        gc.disable()                   # decoding makes thousands of small objects: no GC passes meanwhile
        try:
            payload = json.loads(body)
            consts = [np.frombuffer(blob, dtype=np.dtype(dt), count=int(np.prod(shape)), offset=off).reshape(shape)
                      for dt, shape, off in payload["consts"]]
            result = decode_result(payload, consts, fn, args, kwargs)
        finally:
            if paused:
                gc.enable()
    except Stale as e:
        _stats["stale"] += 1
        logger.info("compile cache: stale entry for '%s' (%s); recompiling", jf.name, e)
        return None, key
    except Exception as e:             # noqa: BLE001 - any failure means: do not trust it, rebuild
        _stats["corrupt"] += 1
        logger.warning("compile cache: corrupt entry '%s' for '%s' (%s: %s); recompiling",
                       path, jf.name, type(e).__name__, e)
        return None, key
    _stats["hits"] += 1
    logger.info("compile cache: loaded '%s' from %s (capture skipped)", jf.name, path)
    return result, key


def _check_header(header, key, body: bytes):
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        return "unknown format"
    if header.get("versions") != _versions():
        return f"written by versions {header.get('versions')}, running {_versions()}"
    if header.get("key") != key:
        return "key mismatch"
    if hashlib.sha256(body).hexdigest() != header.get("payload_sha256"):
        raise ValueError("the payload does not match its checksum")
    for f, sha in header.get("sources", {}).items():
        try:
            if _file_sha(f) != sha:
                return f"source file '{f}' changed"
        except OSError:
            return f"source file '{f}' is gone"
    return None


def count_capture():
    _stats["captures"] += 1


__all__ = ["enabled", "cache_dir", "load", "store", "stats", "reset_stats", "stable_token", "call_token", "key_of",
           "encode_result", "decode_result", "tensor_paths", "resolve", "Uncacheable", "FORMAT"]
