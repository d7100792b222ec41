"""The O0 executor: run a graph node by node on the current backend ("kernel by kernel").

Compiling a graph for O0 turns it into a *plan*: every Value gets a slot in a flat list (the
"environment"), and every node becomes a step `(kernel, input slots, attrs, output slots, slots
to free)`. Running the plan is then a tight loop with none of PyNative's per-op work: no shape
inference (done once, at capture), no Tensor objects between ops, no autodiff tape.

* **Kernels** are each primitive's *current* backend kernel (`prim.kernel`, rebound by
  `set_context(device_target=...)`), looked up when the plan is built. Results are cast to the
  inferred dtype as in PyNative (`MINISPORE_CHECK_KERNELS=1` also checks shapes).
* **Memory**: the *last use* of every value is computed from the schedule; right after that node
  runs the slot is cleared, so the buffer is freed as soon as nothing needs it (NumPy frees it when
  the last view of it goes too). Graph outputs are kept; captures and constants are never owned.
* **Captures** (Parameters and other tensors read by reference) are loaded into their slots when
  a run starts and reloaded after each host call, the only step that can run Python code which
  rebinds a Tensor's storage (an optimizer's `set_data`).
* **Random** primitives draw from the global generator inside their kernels, i.e. at run time:
  every run of a graph gets fresh numbers, in the same order as PyNative would draw them.
* **Structural ops**: If picks a branch by the condition's value and runs that subgraph; While
  runs cond/body until the condition is false; Call runs the callee; HostCall calls a Python
  function on concrete Tensors (see ir.py). Subgraphs get their own plans, built once.
  `subgraphs={id(g): g2}` runs g2 wherever a node names g (O1: the fused callees, o1.py).

`run(*arrays)` takes one NumPy array per graph param and returns a list with one entry per graph
output: an array, a Python object (host call result), or the constant itself.
`record_live=True` keeps, for tests and the memory passes to come, the set of live value ids
after each step (`self.live_trace`).
"""
from __future__ import annotations

import operator
import os
from itertools import repeat

import numpy as np

from ..common.errors import MinisporeError, MinisporeRuntimeError, OpIndexError, OpTypeError, OpValueError
from ..common.tensor import Tensor, _wrap
from .ir import CALL, HOST_CALL, IF, OPAQUE, WHILE, Graph, Slot, Value

_PRIM, _IF, _WHILE, _CALL, _HOST = range(5)
_KIND = {IF: _IF, WHILE: _WHILE, CALL: _CALL, HOST_CALL: _HOST}
_UNSET = object()
_ID = operator.attrgetter("id")


def _check_kernels():
    return os.environ.get("MINISPORE_CHECK_KERNELS", "0") == "1"


class _Step:
    """One node of the plan (slots instead of Values)."""

    __slots__ = ("kind", "fn", "ins", "attrs", "outs", "frees", "npdt", "node", "sub")

    def __init__(self, kind, fn, ins, attrs, outs, frees, npdt, node, sub=None):
        self.kind, self.fn, self.ins, self.attrs, self.outs = kind, fn, ins, attrs, outs
        self.frees, self.npdt, self.node, self.sub = frees, npdt, node, sub


def _runtime_error(node, graph, err):
    """A kernel failed at run time: say which node, of which graph, from which line."""
    where = f"{node.where()}, graph '{graph.name}'"
    if isinstance(err, MinisporeError):
        if hasattr(err, "op"):
            cls = type(err)
            return cls(err.op, err.expected, err.got, where=where)
        return err
    cls = (OpTypeError if isinstance(err, TypeError) else OpIndexError if isinstance(err, IndexError)
           else OpValueError if isinstance(err, ValueError) else None)
    if cls is None:
        return MinisporeRuntimeError(f"For '{node.op.name}', the kernel failed at run time: "
                                     f"{type(err).__name__}: {err} (at {where})")
    return cls(node.op.name, f"inputs its kernel accepts ({type(err).__name__}: {err})",
               "values that fail at run time", where=where)


def locate_error(node, graph, e):
    """The exception to raise when `node` of `graph` failed with `e`: `e` itself when it already
    says where (an inner graph located it, or it is the user's own exception from a host call,
    which propagates unchanged), else a minispore error naming the op, the source line and the
    graph. Every executor (O0, arena, streams, O2) reports failures through this one function."""
    if getattr(e, "_graph_located", False):
        return e
    err = _runtime_error(node, graph, e)
    err._graph_located = True
    return err


def _conform(arr, aval, node, check):
    if type(arr) is not np.ndarray:
        arr = np.asarray(arr)
    npdt = aval.dtype.np
    if arr.dtype != npdt:
        arr = arr.astype(npdt)
    if check and arr.shape != aval.shape:
        raise MinisporeRuntimeError(f"kernel for '{node.op.name}' returned shape {arr.shape}, "
                                    f"inference said {aval.shape} (at {node.where()})")
    return arr


def _fill_template(template, args):
    if isinstance(template, Slot):
        return args[template.index]
    if isinstance(template, tuple):
        return tuple(_fill_template(t, args) for t in template)
    if isinstance(template, list):
        return [_fill_template(t, args) for t in template]
    if isinstance(template, dict):
        return {k: _fill_template(v, args) for k, v in template.items()}
    return template


def _frees_by_step(steps, last_use, keep):
    """The slots to free after each step: a tuple per step, in schedule order. A node output is
    freed after its last reader (`last_use`: slot -> step index), or after its own step when
    nothing reads it; a slot in `keep` (a graph output) is never freed."""
    n = len(steps)
    free_after = dict(last_use)
    free_after.update(zip(keep, repeat(n)))         # (a kept slot lands past the last step)
    get = free_after.get
    by_step = [[] for _ in range(n + 1)]
    for i, step in enumerate(steps):
        for s in step.outs:
            by_step[get(s, i)].append(s)
    del by_step[n]
    return list(map(tuple, by_step))


_callee_memo = None     # (memory helper) id(callee graph) -> executor, while one top-level plan is built


def _callee_executor(graph):
    """(memory helper) The executor of a CALL's callee, built once per callee graph within one
    top-level executor: lazy_inline calls one layer graph from every layer, and executors keep no
    per-run state, so the calls share it."""
    if _callee_memo is None:
        return O0Executor(graph)
    hit = _callee_memo.get(id(graph))
    if hit is None:
        hit = _callee_memo[id(graph)] = (graph, O0Executor(graph))
    return hit[1]


class O0Executor:
    """Runs one graph kernel by kernel. See the module docstring."""

    def __init__(self, graph: Graph, record_live: bool = False, arena: bool = False, subgraphs=None):
        self._graph = graph
        # {id(subgraph an If/While/Call node names): the graph to run in its place} - O1 runs the
        # fused callees of a graph whose nodes still name the original ones (FusionResult.exec_graph)
        self._subgraphs = subgraphs or None
        self.record_live = record_live
        self.live_trace: list[set] = []
        global _callee_memo
        top = _callee_memo is None                  # (memory helper) share callee executors in one build
        if top:
            _callee_memo = {}
        try:
            self._build()
        finally:
            if top:
                _callee_memo = None
        # (memory helper) arena mode: every intermediate at its planned offset in one arena
        # (graph/memory/arena_exec.py); None keeps the default path below unchanged
        self.arena_state = None
        if arena:
            from .memory.arena_exec import attach_arena
            self.arena_state = attach_arena(self)

    @property
    def graph(self):
        """The graph this executor runs."""
        return self._graph

    def _subgraph(self, g):
        return self._subgraphs.get(id(g), g) if self._subgraphs is not None else g

    @property
    def memory_plan(self):
        """(memory helper) The MemoryPlan this executor runs with (arena mode), else None."""
        return self.arena_state.plan if self.arena_state is not None else None

    @property
    def arena(self):
        """(memory helper) The Arena of arena mode, else None."""
        return self.arena_state.arena if self.arena_state is not None else None

    # -- planning ---------------------------------------------------------------------------------
    def _build(self):
        # Plan building is paid at every compile, per value of the graph (a lazy_inline model's top
        # level has two wide Call nodes per layer, tens of values each), so every value is touched
        # by as few short loops as possible: pass 1 places inputs and outputs and notes each slot's
        # last reader, `_frees_by_step` buckets the frees. Values are dict keys themselves (hashed
        # by identity), which saves reading every `.id`.
        g = self._graph
        nodes = g.nodes
        n_p, n_c = len(g.params), len(g.captures)
        slot_of: dict = dict(zip(g.params, range(n_p)))            # Value -> its slot
        capture_slots = []
        s = n_p
        for v, t in g.captures:
            slot_of[v] = s
            capture_slots.append((s, t))
            s += 1
        self._capture_slots = capture_slots
        template: list = [None] * (n_p + n_c)

        # pass 1: every step, without its frees: input slots (a constant gets its own slot, filled
        # in the template), output slots and dtypes, and the last reader of every slot. (Plain
        # loops: on CPython 3.11 they beat C-level maps for this, short bodies per value.)
        last_use: dict = {}                        # slot -> the last node reading it (nodes come in order)
        npdt_of: dict = {}                         # id(aval) -> its NumPy dtype (graphs share few avals)
        call_npdt: dict = {}                       # id(callee) -> its Call nodes' output dtypes
        steps = []
        for i, node in enumerate(nodes):
            ins = []
            for x in node.inputs:
                if type(x) is Value or isinstance(x, Value):
                    s = slot_of[x]
                    ins.append(s)
                    last_use[s] = i
                else:
                    ins.append(len(template))
                    template.append(x)
            ins = tuple(ins)
            outputs = node.outputs
            start = s = len(template)
            for o in outputs:
                slot_of[o] = s
                s += 1
            outs = tuple(range(start, s))
            template += repeat(None, s - start)
            # every Call of one callee has outputs of the callee's dtypes (verify checks it)
            key = id(node.attrs.get("graph")) if node.op is CALL else None
            npdt = call_npdt.get(key)
            if npdt is None or len(npdt) != len(outs):
                npdt = []
                for o in outputs:
                    a = o.aval
                    dt = npdt_of.get(id(a), _UNSET)
                    if dt is _UNSET:
                        dt = npdt_of[id(a)] = a.dtype.np if a is not OPAQUE else None
                    npdt.append(dt)
                npdt = tuple(npdt)
                if key is not None:
                    call_npdt[key] = npdt
            if node.is_primitive:
                steps.append(_Step(_PRIM, node.op.kernel, ins, node.attrs, outs, (), npdt, node, None))
                continue                            # (the current backend's kernel)
            kind = _KIND[node.op]
            if kind == _CALL:
                fn = None
                sub = _callee_executor(self._subgraph(node.attrs["graph"]))    # (one per callee)
            elif kind == _IF:
                fn = None
                sub = (O0Executor(self._subgraph(node.attrs["then_graph"])),
                       O0Executor(self._subgraph(node.attrs["else_graph"])))
            elif kind == _WHILE:
                fn = None
                sub = (O0Executor(self._subgraph(node.attrs["cond_graph"])),
                       O0Executor(self._subgraph(node.attrs["body_graph"])))
            else:
                fn = node.attrs["fn"]
                sub = node.attrs.get("template")
            steps.append(_Step(kind, fn, ins, {}, outs, (), npdt, node, sub))

        graph_outs = g.outputs
        out_slot_list = [slot_of[o] if type(o) is Value or isinstance(o, Value) else None for o in graph_outs]
        keep = set(out_slot_list)
        keep.discard(None)

        # the slots freed after each step: a node output after its last reader (after its own node
        # when nothing reads it), a param after its last reader; graph outputs never
        frees = _frees_by_step(steps, last_use, keep)
        for s, p in enumerate(g.params):            # (a step frees params after node outputs)
            if slot_of[p] == s and s not in keep and s in last_use:
                frees[last_use[s]] += (s,)
        for step, f in zip(steps, frees):
            step.frees = f
        self._steps = steps
        self._template = template
        self._out_slots = out_slot_list
        self._outputs = list(graph_outs)
        self._slot_of = slot_of
        self._n_params = n_p

    @property
    def _slot_value(self):
        """{slot: id of the Value it holds} (record_live, multi-stream planning), made on first use."""
        sv = self.__dict__.get("_slot_value_map")
        if sv is None:
            sv = self._slot_value_map = dict(zip(self._slot_of.values(), map(_ID, self._slot_of)))
        return sv

    # -- running ------------------------------------------------------------------------------------
    def _load_captures(self, env):
        for s, t in self._capture_slots:
            env[s] = t._data

    def run(self, *arrays):
        if self.arena_state is not None:           # (memory helper) arena mode
            return self.arena_state.run(arrays)
        if len(arrays) != self._n_params:
            raise MinisporeRuntimeError(f"graph '{self._graph.name}' takes {self._n_params} inputs, "
                                        f"got {len(arrays)}")
        env = self._template[:]
        env[:self._n_params] = arrays
        self._load_captures(env)
        check = _check_kernels()
        record = self.record_live
        if record:
            self.live_trace = []
        for step in self._steps:
            try:
                if step.kind == _PRIM:
                    ins, attrs = step.ins, step.attrs
                    n = len(ins)
                    if n == 2:
                        r = step.fn(env[ins[0]], env[ins[1]], **attrs) if attrs else step.fn(env[ins[0]], env[ins[1]])
                    elif n == 1:
                        r = step.fn(env[ins[0]], **attrs) if attrs else step.fn(env[ins[0]])
                    else:
                        r = step.fn(*[env[i] for i in ins], **attrs)
                    outs = step.outs
                    if len(outs) == 1 and not step.node.multi:
                        if type(r) is not np.ndarray or r.dtype is not step.npdt[0] or check:
                            r = _conform(r, step.node.outputs[0].aval, step.node, check)
                        env[outs[0]] = r
                    else:
                        for s, a, o in zip(outs, r, step.node.outputs):
                            env[s] = _conform(a, o.aval, step.node, check)
                else:
                    self._run_structural(step, env)
            except Exception as e:         # noqa: BLE001 - a kernel failed: report it with its line
                err = locate_error(step.node, self._graph, e)
                if err is e:
                    raise
                raise err from e
            for s in step.frees:
                env[s] = None
            if record:
                self.live_trace.append({self._slot_value[i] for i, v in enumerate(env)
                                        if v is not None and i in self._slot_value})
        return [env[s] if s is not None else c for s, c in zip(self._out_slots, self._outputs)]

    def _run_structural(self, step, env):
        kind = step.kind
        args = [env[i] for i in step.ins]
        if kind == _IF:
            cond, operands = args[0], args[1:]
            take = bool(np.asarray(cond).reshape(())) if not isinstance(cond, bool) else cond
            results = (step.sub[0] if take else step.sub[1]).run(*operands)
        elif kind == _WHILE:
            cond_x, body_x = step.sub
            carry = args
            while bool(np.asarray(cond_x.run(*carry)[0]).reshape(())):
                carry = body_x.run(*carry)
            results = carry
        elif kind == _CALL:
            results = step.sub.run(*args)
        else:
            results = self._host_call(step, args)
            self._load_captures(env)             # Python code ran: a Parameter may have new storage
        for s, r, o in zip(step.outs, results, step.node.outputs):
            env[s] = r if o.aval is OPAQUE else _conform(r, o.aval, step.node, False)

    def _host_call(self, step, args):
        """Run the Python function on Tensors made from the current arrays (JIT Fallback)."""
        tensors = [_wrap(a) if isinstance(a, np.ndarray) else a for a in args]
        call_args, call_kwargs = _fill_template(step.sub, tensors)
        try:
            result = step.fn(*call_args, **call_kwargs)
        except Exception as e:             # noqa: BLE001
            # the user's Python raised (a `raise ValueError(...)` in a tensor branch, a failing
            # fallback): it propagates as is, as in PyNative and MindSpore, with a note saying where
            # the graph ran it; enclosing graphs (If/While/Call) pass it on unchanged
            if not getattr(e, "_graph_located", False):
                try:
                    e._graph_located = True
                    e.add_note(f"(raised by Python run from the compiled graph '{self._graph.name}', "
                               f"{step.node.where()})")
                except (AttributeError, TypeError):
                    pass
            raise
        outs = step.node.outputs
        if len(outs) == 1 and outs[0].aval is OPAQUE:
            return (result,)
        results = result if isinstance(result, (tuple, list)) else (result,)
        return tuple(r._data if isinstance(r, Tensor) else r for r in results)


__all__ = ["O0Executor"]
