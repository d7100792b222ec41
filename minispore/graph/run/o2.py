"""jit_level "O2": whole-graph sink - the graph becomes ONE generated Python function.

MindSpore's O2 hands the whole graph to the device (GE on Ascend) and drives it with one call per
step. Here the graph (after O1's passes: transpose folding and operator fusion) is turned into
the source code of one Python function that calls every kernel in schedule order, compiled once
with `compile()`:

    def sink_loss_fn(*args):                     # generated; `executor.source` shows all of it
        try:
            if len(args) != 2: _arity(args)
            a0, a1, = args
            c0 = _cap0._data                     # captured Parameters, read when the step runs
            v0 = _k0(c0, perm=(1, 0))  # transpose
            _into1(_b_v1, a0, v0)  # matmul   (its `into` fact: written into its planned buffer)
            v1 = _b_v1
            del v0                               # its last use
            v2 = _b_v2
            v3 = _b_v3
            _f2(_p_v2, _p_v3, _p_v1, _t1)  # fused_elementwise_0{add,gelu,...}: one C call
            ...
            return [v9, v7]                      # outputs: fresh arrays, not arena views
        except Exception as _e:
            raise _located(_e) from _e           # names the failing node's op and source line

The code is generated from the graph's execution plan (plan.py) - its steps, their constants and
their frees (`del` after a value's last use, the slots O0 frees) - but at run time there is no
interpretation left: no environment list, no dispatch on step kinds, no attribute dictionaries
(constants and attributes are literals or bound names).
What remains per node is the kernel call itself - so a graph of hundreds of tiny ops costs little
more than its kernels, and a graph whose every op fuses is a single C call.

**Memory: pre-planned buffers.** Every intermediate the graph produces gets a fixed offset in
one arena, planned once from the schedule by the SOMAS planner (graph/memory): fused C kernels
write straight into their planned buffers (their pointers are taken once, at compile time, so a
call passes ready-made pointers), NumPy ufuncs get theirs with `out=` and kernels with an `into` fact (matmul) write into theirs, other
kernels' results are copied in. Graph outputs are not in the arena: they are returned, so kernels
write them into fresh arrays (a view of an arena tensor that is returned is copied out). Host
calls get copies of arena tensors (Python code may keep a reference).
`O2Executor(graph, arena=False)` keeps values as Python locals instead (NumPy allocates them;
`del` frees each after its last use, the plan's frees) - the benchmark compares the two.

**Structural nodes get generated control flow**, each subgraph becoming a sink function of its
own: If -> `if _truth(c): r = then(...) else: r = else(...)`, While -> a Python `while` over the
cond/body functions, Call -> a call of the callee's function, HostCall -> a call of the host
function on Tensors (JIT Fallback), after which captured tensors are re-read (the host code may
have given a Parameter new storage, e.g. an optimizer's `set_data`). Nothing falls back to O0.

Errors: a failing kernel is reported like O0 reports it (the step loop's `locate_error`: op, user
source line, graph name): the generated code's line numbers map back to nodes.
"""
from __future__ import annotations

import linecache
import math
import sys

import numpy as np

from ...common.errors import MinisporeRuntimeError
from ..ir import CALL, HOST_CALL, IF, OPAQUE, WHILE, Graph, Value
from ..memory.arena import Arena
from ..memory.call_plans import graph_plan
from ..passes.fusion import FusedPrimitive, fuse
from ..passes.transpose_folding import fold_transposes_here
from ..printer import dump_enabled, format_graph
from .loop import conform, host_arguments, host_results, locate_error, truth
from .plan import build_plan

_counter = [0]


def _literal(x):
    """Python source for a constant if it is a plain literal, else None (then it is bound by name)."""
    if x is None or isinstance(x, (bool, int, str)):
        return repr(x)
    if isinstance(x, float):
        return repr(x) if math.isfinite(x) else None
    if isinstance(x, tuple):
        parts = [_literal(v) for v in x]
        if any(p is None for p in parts):
            return None
        return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"
    return None


class _Source:
    """Accumulates the generated function: lines, names bound in its globals, line -> node."""

    def __init__(self):
        self.lines: list[str] = []
        self.ns: dict = {"_nd": np.ndarray, "_truth": truth, "_copyto": np.copyto, "_empty": np.empty,
                         "_cc": np.ascontiguousarray}
        self.line_node: dict[int, int] = {}

    def bind(self, name, obj):
        self.ns[name] = obj
        return name

    def const(self, name, x):
        lit = _literal(x)
        return lit if lit is not None else self.bind(name, x)

    def emit(self, text, node_index=None, indent=1):
        self.lines.append("    " * (indent - 1) + text)
        if node_index is not None:
            self.line_node[len(self.lines) + 1] = node_index      # +1: the def line comes first


class O2Executor:
    """A graph compiled into one Python function. See the module docstring.

    `run(*arrays)` -> list of outputs, as O0Executor. `graph`: the fused graph; `source_graph`:
    the captured one; `plan`: the graph's ExecutionPlan; `source`: the generated code; `fusion`:
    the fusion pass's result. `plan=` (with `fuse_graph=False`): a subgraph's plan, from its
    parent's."""

    def __init__(self, graph: Graph, arena=None, fuse_graph: bool = True, plan=None):
        self.source_graph = graph
        if fuse_graph:
            # the O1 passes: transposes folded into the GEMMs that read them, then operator fusion
            self.fusion = fuse(graph, prepare=fold_transposes_here)
            graph = self.fusion.graph
            if dump_enabled() and self.fusion.fused:
                print(f"# minispore IR of '{graph.name}' after operator fusion (jit_level O2): "
                      f"{len(self.fusion.fused)} fused "
                      f"groups\n{format_graph(graph)}", file=sys.stderr)
        else:
            self.fusion = None
        self.graph = graph
        self.plan = plan if plan is not None else build_plan(graph)
        self.arena_mode = True if arena is None else bool(arena)
        self.memory_plan = None
        self.arena = None
        self._subs: dict = {}               # id(subgraph) -> its O2Executor
        self._planned: set = set()          # local names whose value is always their arena view
        self._out_ids = {o.id for o in graph.outputs if isinstance(o, Value)}
        self._ptrs: dict = {}               # local name -> local holding its C pointer (made once per run)
        self._ptr_spec: dict = {}           # local name -> (shape read, dtype) its pointer was checked for
        self._generate()

    # -- code generation -------------------------------------------------------------------------------
    def _generate(self):
        g, plan = self.graph, self.plan
        _counter[0] += 1
        fname = "sink_" + "".join(ch if ch.isalnum() else "_" for ch in g.name)
        self.filename = f"<minispore O2 {g.name} #{_counter[0]}>"
        src = _Source()
        src.bind("_arity", self._arity_error)
        src.bind("_fix", self._fix)
        n_params = plan.n_params
        names: dict[int, str] = {}          # slot -> local name: a0.. params, c0.. captures, v0.. node outputs
        for i in range(n_params):
            names[i] = f"a{i}"
        src.emit(f"if len(args) != {n_params}: _arity(args)")
        if n_params:
            src.emit(f"{', '.join(names[i] for i in range(n_params))}, = args")
        cap_lines = []
        for k, (s, t) in enumerate(plan.capture_slots):
            names[s] = f"c{k}"
            cap_lines.append(f"c{k} = {src.bind(f'_cap{k}', t)}._data")
        self._cap_lines = cap_lines
        for line in cap_lines:
            src.emit(line)
        mplan = self._plan_memory() if self.arena_mode else None

        n_values = 0
        for i, step in enumerate(plan.steps):
            node = step.node
            for s in step.outs:
                names[s] = f"v{n_values}"
                n_values += 1
            # an input slot without a name holds a constant (the plan's template has it)
            args = [names[s] if s in names else src.const(f"_x{i}_{j}", plan.template[s])
                    for j, s in enumerate(step.ins)]
            outs = [names[s] for s in step.outs]
            if node.is_primitive:
                self._emit_primitive(src, i, node, args, outs, mplan)
            else:
                self._emit_structural(src, i, step, args, outs, mplan)
            dead = [names[s] for s in step.frees]
            dead += [self._ptrs.pop(n) for n in list(dead) if n in self._ptrs]   # a pointer keeps its array alive
            if dead:
                src.emit(f"del {', '.join(dead)}")
        rets = []
        for j, (s, o) in enumerate(zip(plan.out_slots, plan.outputs)):
            if s is not None:
                r = names[s]
                if mplan is not None and o.id in mplan.alias_of:
                    r = f"{r}.copy()"          # a view into the arena, which the next run overwrites
                rets.append(r)
            else:
                rets.append(src.const(f"_out{j}", o))
        src.emit(f"return [{', '.join(rets)}]")
        body = "\n".join(["try:"] + ["    " + ln for ln in src.lines] +
                         ["except Exception as _e:", "    raise _located(_e) from _e"])
        text = f"def {fname}(*args):\n" + "\n".join("    " + ln for ln in body.splitlines()) + "\n"
        src.bind("_located", self._locate)
        # the body sits inside `try:`, one line lower than recorded
        self._line_node = {ln + 1: n for ln, n in src.line_node.items()}
        self.source = text
        linecache.cache[self.filename] = (len(text), None, text.splitlines(True), self.filename)
        code = compile(text, self.filename, "exec")
        exec(code, src.ns)
        self._fn = src.ns[fname]
        self._code = self._fn.__code__
        self.run = self._fn                 # one call per step: the generated function itself

    def _emit_primitive(self, src, i, node, args, outs, plan):
        prim = node.op
        lhs = outs[0] if len(outs) == 1 and not node.multi else ", ".join(outs) + ","
        if isinstance(prim, FusedPrimitive):
            self._emit_fused(src, i, node, args, outs, plan)
            return
        k = src.bind(f"_k{i}", prim.kernel)
        owned = len(outs) == 1 and not node.multi and self._in_arena(node.outputs[0], plan)
        if owned and not node.attrs and (isinstance(prim.kernel, np.ufunc) and prim.kernel.nout == 1
                                         or prim.into is not None and prim.kernel is prim.impl):
            # the kernel writes straight into the planned buffer: a NumPy ufunc, or a kernel with an
            # `into` fact (matmul's BLAS call with out=) - one result copy per node saved
            buf = self._buffer(src, outs[0], node.outputs[0], plan)
            if isinstance(prim.kernel, np.ufunc):
                src.emit(f"{k}({', '.join(args)}, out={buf}, casting='unsafe')  # {prim.name}", i)
            else:
                src.emit(f"{src.bind(f'_into{i}', prim.into)}({buf}, {', '.join(args)})  # {prim.name}", i)
            src.emit(f"{outs[0]} = {buf}", i)
            return
        kw = [f"{a}={src.const(f'_a{i}_{a}', v)}" for a, v in node.attrs.items()]
        src.emit(f"{lhs} = {k}({', '.join(args + kw)})  # {prim.name}", i)
        for j, o in enumerate(node.outputs):
            d = src.bind(f"_d_{outs[j]}", o.aval.dtype.np)
            src.emit(f"if {outs[j]}.__class__ is not _nd or {outs[j]}.dtype is not {d}: "
                     f"{outs[j]} = _fix({outs[j]}, {i}, {j})", i)
        self._emit_store(src, i, node, outs, plan)

    def _in_arena(self, value, plan) -> bool:
        """Does `value` live in the arena? Every planned value except the graph's outputs: those are
        returned to the caller, so they get fresh memory that kernels write into directly (copying
        them out of the arena would cost one more pass over every output)."""
        return plan is not None and value.id in plan.offsets and value.id not in self._out_ids

    def _buffer(self, src, name, value, plan):
        """The name of `value`'s planned arena view (and `_p_<name>`: its C pointer, made once)."""
        view = self.arena.view(plan.offsets[value.id], value.aval.shape, value.aval.dtype.np)
        self._planned.add(name)
        src.bind(f"_p_{name}", _ffi().from_buffer(view))
        return src.bind(f"_b_{name}", view)

    def _emit_fused(self, src, i, node, args, outs, plan):
        """A fused node, inlined: the C kernel called on pointers. Outputs are fresh arrays, or - in
        arena mode - their planned buffers, whose pointers (like those of every input that lives in
        the arena) were taken once, at compile time. Other inputs get `from_buffer` (made contiguous
        first if they are a strided view) and a byte-size check; see fusion._make_wrapper."""
        prim = node.op
        fb = src.bind(f"_fb{i}", prim.module.ffi.from_buffer)      # the kernel's own FFI: the fastest path
        f = src.bind(f"_f{i}", prim._fn)
        in_ptrs, runtime = [], []
        for j, (a, x, spec) in enumerate(zip(args, node.inputs, prim.spec.inputs)):
            if a in self._planned:
                in_ptrs.append(f"_p_{a}")
            elif a in self._ptrs and self._ptr_spec[a] == (spec.shape, spec.ctype.dtype):
                in_ptrs.append(self._ptrs[a])          # taken (and checked) by an earlier kernel this run
            else:
                t = f"_q_{a}"
                runtime.append((t, a, spec))
                in_ptrs.append(t)
        out_ptrs = []
        for name, o in zip(outs, node.outputs):
            if self._in_arena(o, plan):
                buf = self._buffer(src, name, o, plan)
                src.emit(f"{name} = {buf}", i)
                out_ptrs.append(f"_p_{name}")
            else:
                src.emit(f"{name} = _empty({src.bind(f'_s_{name}', o.aval.shape)}, "
                         f"{src.bind(f'_d_{name}', o.aval.dtype.np)})", i)
                out_ptrs.append(f"{fb}({name})")
        if runtime:
            # (a value read by several kernels gets its pointer once: SSA values never change, and
            # params/captures only across a host call, which drops their pointers)
            ts = ", ".join(t for t, _, _ in runtime)
            src.emit("try:", i)
            src.emit(f"{ts}, = {', '.join(f'{fb}({a})' for _, a, _ in runtime)},", i, indent=2)
            src.emit("except (ValueError, TypeError):", i)
            fixed = ", ".join(f"{fb}(_cc({a}, {src.bind(f'_di{i}_{t}', spec.ctype.dtype.np)}))"
                              for t, a, spec in runtime)
            src.emit(f"{ts}, = {fixed},", i, indent=2)
            checks = " or ".join(f"len({t}) != {spec.buffer_elems * spec.ctype.dtype.itemsize}"
                                 for t, _, spec in runtime)
            src.emit(f"if {checks}: {src.bind(f'_bad{i}', _BadInput(prim))}({', '.join(args)})", i)
            for t, a, spec in runtime:
                if a not in self._ptrs:
                    self._ptrs[a] = t
                    self._ptr_spec[a] = (spec.shape, spec.ctype.dtype)
        src.emit(f"{f}({', '.join(out_ptrs + in_ptrs)})  # {prim.name}", i)

    def _emit_store(self, src, i, node, outs, plan):
        """Arena mode: copy a kernel's heap result into its planned buffer (views stay views)."""
        if plan is None:
            return
        for j, o in enumerate(node.outputs):
            if o.aval is OPAQUE or not self._in_arena(o, plan):
                continue
            buf = self._buffer(src, outs[j], o, plan)
            src.emit(f"_copyto({buf}, {outs[j]}, casting='unsafe'); {outs[j]} = {buf}", i)

    def _emit_structural(self, src, i, step, args, outs, plan):
        node = step.node
        op = node.op
        lhs = ", ".join(outs) + ","
        if op is HOST_CALL:
            h = src.bind(f"_h{i}", _HostCall(node, self.arena if plan is not None else None))
            src.emit(f"{lhs} = {h}({', '.join(args)})", i)
            for line in self._cap_lines:        # Python code ran: a Parameter may have new storage
                src.emit(line, i)
            self._ptrs = {n: p for n, p in self._ptrs.items() if not n.startswith("c")}
        elif op is CALL:
            sub = self._sub(step.sub)
            src.emit(f"{lhs} = {src.bind(f'_call{i}', sub.run)}({', '.join(args)})", i)
        elif op is IF:
            t = src.bind(f"_then{i}", self._sub(step.sub[0]).run)
            e = src.bind(f"_else{i}", self._sub(step.sub[1]).run)
            ops = ", ".join(args[1:])
            src.emit(f"{lhs} = {t}({ops}) if _truth({args[0]}) else {e}({ops})", i)
        elif op is WHILE:
            c = src.bind(f"_cond{i}", self._sub(step.sub[0]).run)
            b = src.bind(f"_body{i}", self._sub(step.sub[1]).run)
            src.emit(f"_carry = [{', '.join(args)}]", i)
            src.emit(f"while _truth({c}(*_carry)[0]):", i)
            src.emit(f"_carry = {b}(*_carry)", i, indent=2)
            src.emit(f"{lhs} = _carry", i)
        else:
            raise MinisporeRuntimeError(f"O2: unknown structural op {op!r}")
        for j, o in enumerate(node.outputs):
            if o.aval is not OPAQUE:
                src.emit(f"{outs[j]} = _fix({outs[j]}, {i}, {j})", i)
        self._emit_store(src, i, node, outs, plan)

    def _sub(self, plan):
        """The sink function of a subgraph (already fused with this graph) from its plan, one per
        subgraph: a callee called from many places (lazy_inline's layer) is compiled once."""
        ex = self._subs.get(id(plan.graph))
        if ex is None:
            ex = self._subs[id(plan.graph)] = O2Executor(plan.graph, arena=False, fuse_graph=False, plan=plan)
        return ex

    def _plan_memory(self):
        p = graph_plan(self.graph)
        self.memory_plan = p
        self.arena = Arena(p.peak_bytes)
        return p

    # -- run-time helpers --------------------------------------------------------------------------------
    def _arity_error(self, args):
        raise MinisporeRuntimeError(f"graph '{self.graph.name}' takes {len(self.graph.params)} inputs, "
                                    f"got {len(args)}")

    def _fix(self, r, i, j):
        """A kernel returned another type/dtype than inferred: convert it, as O0 does."""
        node = self.graph.nodes[i]
        return conform(r, node.outputs[j].aval, node, False)

    def _locate(self, e):
        """The error of a failing kernel, named by op, user source line and graph (as O0 says it)."""
        if getattr(e, "_graph_located", False):
            return e
        tb, line = e.__traceback__, None
        while tb is not None:
            if tb.tb_frame.f_code is self._code:
                line = tb.tb_lineno
            tb = tb.tb_next
        idx = self._line_node.get(line)
        if idx is None:
            return e
        return locate_error(self.graph.nodes[idx], self.graph, e)

    def __repr__(self):
        return f"<O2Executor {self.graph.name}: {len(self.graph.nodes)} nodes, {len(self.source.splitlines())} lines>"


class _HostCall:
    """A HostCall node's run-time call: the function on Tensors (JIT Fallback), results as arrays."""

    __slots__ = ("fn", "template", "node", "arena")

    def __init__(self, node, arena=None):
        self.fn, self.template, self.node = node.attrs["fn"], node.attrs.get("template"), node
        self.arena = arena                    # arena mode: the arena is rewritten by the next run

    def __call__(self, *args):
        if self.arena is not None:            # Python code may keep what it is given: no arena views
            args = [a.copy() if isinstance(a, np.ndarray) and self.arena.owns(a) else a for a in args]
        call_args, call_kwargs = host_arguments(self.template, args)
        return host_results(self.node, self.fn(*call_args, **call_kwargs))


_FFI = []


def _ffi():
    """One cffi FFI for `from_buffer` (a `char[]` over an array's bytes converts to any kernel's
    `void *` argument, whichever module the kernel lives in)."""
    if not _FFI:
        import cffi
        _FFI.append(cffi.FFI())
    return _FFI[0]


class _BadInput:
    """Raises the fused kernel's wrong-input-size error (see fusion._bad_input)."""

    __slots__ = ("prim",)

    def __init__(self, prim):
        self.prim = prim

    def __call__(self, *arrays):
        from ..passes.fusion import _bad_input
        _bad_input(self.prim, arrays)


__all__ = ["O2Executor"]
