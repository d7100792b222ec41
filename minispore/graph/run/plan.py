"""The execution plan: a graph turned, once, into numbered slots and a list of steps.

Running a graph value by value (dicts keyed by Value, shape inference, Tensor objects) would redo
at every run what is the same at every run. So before the first run the graph is *planned*:

* every Value gets a **slot**, an index into one flat list (the run's *environment*): the graph
  params first (slots 0 .. n_params-1, in order), then the captures, then, node by node, each
  constant input and each node output;
* every node becomes a **Step**: the callable to run, the slots it reads and writes, and the slots
  to clear after it (**frees**: a node output after its last reader - after its own step when
  nothing reads it - and a param after its last reader; graph outputs are never freed, captures
  and constants belong to the caller);
* the **template** is the environment a run starts from: None in every value slot and each
  constant already in its own slot, so a run copies one list instead of placing constants.

The plan is plain data (`ExecutionPlan`, `Step`): every way of running a graph reads it - the heap
step loop (loop.py), the arena (arena.py), several streams (multi_stream.py), the generated O2
function (o2.py) - and none recomputes slots or lifetimes. Subgraphs (If/While branches, a Call's
callee) get plans of their own, built with their parent's; one callee called from many places
(lazy_inline's layer graph) is planned once per top-level plan.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass, field
from functools import cached_property
from itertools import repeat

from ...common.errors import MinisporeRuntimeError
from ..ir import CALL, HOST_CALL, IF, OPAQUE, WHILE, Graph, Value

PRIM, IF_STEP, WHILE_STEP, CALL_STEP, HOST_STEP = range(5)     # Step.kind
_KIND = {IF: IF_STEP, WHILE: WHILE_STEP, CALL: CALL_STEP, HOST_CALL: HOST_STEP}
_UNSET = object()
_ID = operator.attrgetter("id")


@dataclass(slots=True, eq=False)
class Step:
    """One node of the plan, with slots instead of Values.

    `kind`: PRIM or IF_STEP / WHILE_STEP / CALL_STEP / HOST_STEP. `fn`: what the step calls - a
    primitive's current backend kernel (`prim.kernel`, looked up when the plan is built), a host
    call's Python function, None for If/While/Call in a plan (a strategy may bind a Call's `fn`:
    the arena runs the callee inside a window of its own arena). `ins`, `outs`: slots read and
    written. `attrs`: the primitive's keyword attributes. `frees`: slots cleared after the step.
    `npdt`: the NumPy dtype of each output (None for an opaque one). `node`: the IR node (op,
    source line, output avals). `sub`: If -> (then plan, else plan), While -> (cond plan, body plan),
    Call -> the callee's plan, HostCall -> its argument template. `place`: a strategy's hook for a
    structural step's results (the arena copies them into their planned buffers); None in a plan.
    """

    kind: int
    fn: object
    ins: tuple
    attrs: dict
    outs: tuple
    frees: tuple
    npdt: tuple
    node: object
    sub: object = None
    place: object = None


def rebind(step: Step, fn=None, frees=None, place=None) -> Step:
    """A copy of `step` with its `fn`, `frees` or `place` replaced (those given): how a strategy
    binds its own steps - the arena's placing kernels, a stream's frees. (`dataclasses.replace`
    does the same several times slower, paid per step of every plan a strategy binds.)"""
    return Step(step.kind, step.fn if fn is None else fn, step.ins, step.attrs, step.outs,
                step.frees if frees is None else frees, step.npdt, step.node, step.sub,
                step.place if place is None else place)


@dataclass(eq=False)
class ExecutionPlan:
    """A graph planned for execution (see the module docstring). Built by `build_plan`.

    `graph`: the graph the steps run. `steps`: one Step per node, in schedule order. `template`:
    the environment a run starts from (None per value slot, constants in theirs). `n_params`: the
    graph params fill slots 0 .. n_params-1. `capture_slots`: (slot, Tensor) per capture, loaded
    from the Tensor when a run starts and after every host call (Python code may have given a
    Parameter new storage). `out_slots`: per graph output its slot, or None for a constant output
    (then `outputs[i]` is the constant). `outputs`: the graph's outputs. `slot_of`: Value -> slot.
    """

    graph: Graph
    steps: list
    template: list
    n_params: int
    capture_slots: list
    out_slots: list
    outputs: list
    slot_of: dict = field(repr=False)

    @cached_property
    def slot_value(self) -> dict:
        """{slot: id of the Value it holds} (live traces, multi-stream frees), made on first use."""
        return dict(zip(self.slot_of.values(), map(_ID, self.slot_of)))

    @property
    def constants(self) -> dict:
        """{slot: constant} for every slot the template fills before a run."""
        value_slots = set(self.slot_of.values())
        return {s: c for s, c in enumerate(self.template) if s not in value_slots}

    # -- what every run does first and last --------------------------------------------------------
    def new_env(self, arrays) -> list:
        """The environment of one run: the template, with `arrays` in the param slots and every
        capture's current array in its slot."""
        if len(arrays) != self.n_params:
            raise MinisporeRuntimeError(f"graph '{self.graph.name}' takes {self.n_params} inputs, "
                                        f"got {len(arrays)}")
        env = self.template[:]
        env[:self.n_params] = arrays
        for s, t in self.capture_slots:
            env[s] = t._data
        return env

    def load_captures(self, env):
        """Reload every capture's array (after a host call: a Parameter may have new storage)."""
        for s, t in self.capture_slots:
            env[s] = t._data

    def results(self, env) -> list:
        """The run's outputs: an array (or host object) per graph output, or the constant itself."""
        return [env[s] if s is not None else c for s, c in zip(self.out_slots, self.outputs)]

    def __repr__(self):
        return f"<ExecutionPlan '{self.graph.name}': {len(self.steps)} steps, {len(self.template)} slots>"


def build_plan(graph: Graph, subgraphs=None) -> ExecutionPlan:
    """Plan `graph` (and, recursively, the subgraphs its nodes name).

    `subgraphs={id(g): g2}` plans g2 wherever a node of `graph` names g: O1 runs the fused callees
    of a graph whose nodes still name the original ones (passes/fusion.py `exec_graph`)."""
    return _build(graph, subgraphs or None, {})


def _build(graph, subgraphs, callees) -> ExecutionPlan:
    # Plan building is paid at every compile, per value of the graph (a lazy_inline model's top
    # level has two wide Call nodes per layer, tens of values each), so every value is touched by
    # as few short loops as possible: pass 1 places inputs and outputs and notes each slot's last
    # reader, `_frees_by_step` buckets the frees. Values are dict keys themselves (hashed by
    # identity), which saves reading every `.id`.
    def sub(g):
        g = subgraphs.get(id(g), g) if subgraphs is not None else g
        return _build(g, None, callees)

    nodes = graph.nodes
    n_p, n_c = len(graph.params), len(graph.captures)
    slot_of: dict = dict(zip(graph.params, range(n_p)))           # Value -> its slot
    capture_slots = []
    s = n_p
    for v, t in graph.captures:
        slot_of[v] = s
        capture_slots.append((s, t))
        s += 1
    template: list = [None] * (n_p + n_c)

    # pass 1: every step, without its frees: input slots (a constant gets its own slot, filled in
    # the template), output slots and dtypes, and the last reader of every slot. (Plain loops: on
    # CPython 3.11 they beat C-level maps for this, short bodies per value.)
    last_use: dict = {}                        # slot -> the last node reading it (nodes come in order)
    npdt_of: dict = {}                         # id(aval) -> its NumPy dtype (graphs share few avals)
    call_npdt: dict = {}                       # id(callee) -> its Call nodes' output dtypes
    steps = []
    for i, node in enumerate(nodes):
        ins = []
        for x in node.inputs:
            # (`type(x) is Value` first: the exact-type test is cheaper; isinstance for subclasses)
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
        # every Call of one callee has outputs of the callee's dtypes (verify checks it): looked up
        # once per callee instead of once per Call
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
            steps.append(Step(PRIM, node.op.kernel, ins, node.attrs, outs, (), npdt, node))
            continue
        kind = _KIND[node.op]
        fn = None
        if kind == CALL_STEP:
            callee = subgraphs.get(id(node.attrs["graph"]), node.attrs["graph"]) if subgraphs is not None \
                else node.attrs["graph"]
            hit = callees.get(id(callee))                 # one plan per callee, shared by its Calls
            if hit is None:
                hit = callees[id(callee)] = (callee, _build(callee, None, callees))
            sub_plan = hit[1]
        elif kind == IF_STEP:
            sub_plan = (sub(node.attrs["then_graph"]), sub(node.attrs["else_graph"]))
        elif kind == WHILE_STEP:
            sub_plan = (sub(node.attrs["cond_graph"]), sub(node.attrs["body_graph"]))
        else:
            fn = node.attrs["fn"]
            sub_plan = node.attrs.get("template")
        steps.append(Step(kind, fn, ins, {}, outs, (), npdt, node, sub_plan))

    graph_outs = graph.outputs
    out_slots = [slot_of[o] if type(o) is Value or isinstance(o, Value) else None for o in graph_outs]
    keep = set(out_slots)
    keep.discard(None)

    # the slots freed after each step: a node output after its last reader (after its own node
    # when nothing reads it), a param after its last reader; graph outputs never
    frees = _frees_by_step(steps, last_use, keep)
    for s, p in enumerate(graph.params):            # (a step frees params after node outputs)
        if slot_of[p] == s and s not in keep and s in last_use:
            frees[last_use[s]] += (s,)
    for step, f in zip(steps, frees):
        step.frees = f
    return ExecutionPlan(graph, steps, template, n_p, capture_slots, out_slots, list(graph_outs), slot_of)


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


__all__ = ["ExecutionPlan", "Step", "build_plan", "rebind", "PRIM", "IF_STEP", "WHILE_STEP", "CALL_STEP", "HOST_STEP"]
