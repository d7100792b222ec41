"""Automatic operator fusion (jit_level O1): chains of elementwise ops, and elementwise ops feeding
or fed by a reduction over the trailing axes, become ONE node whose kernel is generated C.

    before                                          after
    %3 = mul(%0, %0) : f32[4096,1024]               %3 = fused_reduce_0{mul,reduce_mean,add,rsqrt,
    %4 = reduce_mean(%3) {axis=(1,), ...}                 mul,mul}(%0, %1) : f32[4096,1024]
    %5 = add(%4, 1e-06) : f32[4096,1]
    %6 = rsqrt(%5) : f32[4096,1]
    %7 = mul(%0, %6) : f32[4096,1024]
    %8 = mul(%7, %1) : f32[4096,1024]

NumPy runs each op as its own pass over memory: six passes of 16 MB for that RMSNorm, plus five
temporaries. The fused kernel reads `%0` and `%1` once and writes `%8` once (codegen/c_kernel.py).
This is MindSpore's "graph kernel fusion" (jit_level O1) for a CPU.

**What fuses** is a fact of each primitive (`Primitive.fusion`, a `FusionRule` of ops/c_expr.py;
this pass knows no op by name): primitives with a C expression, on float32/float64 values (bool
for comparison results), and reductions (`reduce_sum/mean/max/min`) over a trailing run of axes.
A group has a *domain* D (the shape of its full-size values) and, if it holds reductions, the
number `k` of trailing axes they reduce. Each member has a role:

* "domain"  its output has shape D (inputs may broadcast into it);
* "reduce"  a reduction of a domain-shaped value over the last k axes (keep_dims or not);
* "row"     an elementwise op on per-row values (`rsqrt(mean + eps)`), computed once per row.

**How groups form** (one pass in schedule order, greedy, like XLA's producer-consumer fusion):
a fusible node joins the group of one of its producers when its role there is valid, it is in
the same *segment* (no host call, control-flow node or random op in between: those keep their
place in program order), it is within `WINDOW` nodes of the group's last member, and joining
creates no cycle. A cycle would arise when another input of the node depends on the group through
a node outside it (`a -> matmul -> b` with a and b fused would have to run both before and after
the matmul); each value carries a bitmask of the groups it depends on, so the test is one AND.
Other producer groups are then merged in when the same conditions hold for them (diamonds:
`exp(x) + x*2`). Ops that only re-read memory (`FusionRule.free`: reshape, broadcast_to, transpose,
copy) never start a group - the value they view is often read by an unfusible node too (a reshape
feeding a mul and a split) - but one whose only reader is a group joins it at the end: the kernel
then reads the viewed buffer by strides, as the op's `Primitive.view` says (a "reinterpret" view
reads the buffer in the output's shape, a "permute" view by permuted strides, a broadcast by zero
strides), with no copy. Groups
with fewer than two ops that do work stay unfused: NumPy runs a single op as fast as a loop.

**After grouping**: each group becomes a `KernelSpec` (c_kernel.py), all kernels of the graph are
compiled as one module (build.py, cached on disk), and the graph is rebuilt: within each segment
nodes and groups are re-sorted topologically (a group runs when all its inputs exist), each group
becomes one node whose op is a `FusedPrimitive` named `fused_elementwise_N{mul,add,exp}` or
`fused_reduce_N{...}`, with one output per member value used outside the group. Subgraphs of
If/While/Call nodes are fused the same way, each once (a lazy_inline layer graph called by every
layer is one subgraph). Nodes whose inputs and subgraphs do not change are kept, shared with the
input graph. The executor plans `FusionResult.exec_graph`, in which Call/If/While nodes keep
naming the original subgraphs (run as the fused ones): a lazy_inline model's top level of Call
nodes then costs no rebuild at all; the fused graph proper (`.graph`) is made when first read.

**Fallbacks**: no C compiler -> the graph is returned unfused (one warning per process); a kernel
that does not compile -> its group stays unfused (one warning naming the groups and the compiler
error). Set `MINISPORE_FUSION=0` to switch fusion off.

Gradients: a graph captured from `value_and_grad` holds the forward and the backward ops; fusion
runs on the whole graph after capture, so backward chains (GELU's and SiLU's derivatives, the
mean-square-error gradient, broadcast-and-multiply) fuse like forward ones.
"""
from __future__ import annotations

import heapq
import os
import warnings

import numpy as np

from ...common.errors import MinisporeRuntimeError
from ...ops import _check as C
from ...ops.primitive import AbstractTensor, Primitive
from ..codegen import build as B
from ..codegen import c_types as T
from ..codegen.c_kernel import InputSpec, KernelSpec, MemberSpec, _Access, declaration, generate
from ..ir import OPAQUE, Graph, Node, Value
from .inline_control_flow import keeps_position

WINDOW = 64            # a node joins a group only if the group's last member is this close before it
# Prepended to every generated kernel: under gcc's default -ftrapping-math a float compare may trap,
# so gcc keeps each `?:` on floats (NaN-propagating max/min, relu, where, clamps) a branch and the
# whole loop runs scalar (gcc 12, AVX2: 4-8x slower). The flag changes no result. (Plain version:
# the kernel source alone; common/native_build.FLAGS would be the place for every module at once.)
_VECTOR_SELECTS = '#pragma GCC optimize ("no-trapping-math")\n'

MIN_WORK = 2           # ops that do work a group needs before it is worth a kernel


# -- which nodes may fuse -----------------------------------------------------------------------------
class _Info:
    """What the pass knows about a fusible node: kind ('ew'/'reduce'), output shape, k for reductions,
    its FusionRule and how it reads its input (`_view_kind`)."""

    __slots__ = ("kind", "shape", "k", "rule", "view")

    def __init__(self, kind, shape, k, rule, view):
        self.kind, self.shape, self.k, self.rule, self.view = kind, shape, k, rule, view


def _view_kind(op):
    """How a member reads its input 0 through a view (`Primitive.view`): "reinterpret" (the buffer in
    the output's shape), "permute" (by permuted strides), "broadcast", or None (elementwise)."""
    view = op.view
    return view.kind if view is not None else None


def _is_scalar_const(x):
    return x is None or isinstance(x, (bool, int, float, np.bool_, np.integer, np.floating))


def classify(node):
    """`_Info` for a node the C code generator can handle, else None."""
    if not node.is_primitive or node.multi or isinstance(node.op, FusedPrimitive):
        return None
    rule = node.op.fusion
    if rule is None:
        return None
    out = node.outputs[0].aval
    if not isinstance(out, AbstractTensor) or out.size == 0 or T.ctype_of(out.dtype) is None:
        return None
    vals = [x for x in node.inputs if isinstance(x, Value)]
    for v in vals:
        if v.aval is OPAQUE or T.ctype_of(v.aval.dtype) is None:
            return None
    if not all(isinstance(x, Value) or _is_scalar_const(x) for x in node.inputs):
        return None
    if rule.reduce is not None:
        if len(node.inputs) != 1 or not vals or node.attrs.get("initial") is not None:
            return None
        x = vals[0].aval
        if not x.dtype.is_floating or out.dtype is not x.dtype or x.ndim == 0:
            return None
        axes = C.axes(node.op.name, node.attrs.get("axis", ()), x.ndim)
        k = len(axes)
        if axes != tuple(range(x.ndim - k, x.ndim)):
            return None                       # only trailing axes: rows x columns
        if int(np.prod(x.shape[x.ndim - k:])) <= 1:
            return None
        return _Info("reduce", out.shape, k, rule, None)
    # (a rule that is not float_only takes any dtype the generator handles, output included)
    if rule.float_only:
        if not out.dtype.is_floating or not all(v.aval.dtype.is_floating for v in vals):
            return None
    if rule.one_tensor and len(vals) != 1:
        return None
    return _Info("ew", out.shape, None, rule, _view_kind(node.op))


def _is_barrier(node) -> bool:
    """Nodes that keep their place in program order (fused groups never span them)."""
    return not node.is_primitive or keeps_position(node.op)


def _reads_none(values, inputs) -> bool:
    """Does no input belong to `values` (a set or dict keyed by Value objects, which hash by
    identity)? One C-level set test for the usual node, whose inputs are all hashable."""
    try:
        return values.isdisjoint(inputs) if isinstance(values, (set, frozenset)) else values.keys().isdisjoint(inputs)
    except TypeError:                   # an unhashable constant input (a list): test the Values only
        return not any(isinstance(x, Value) and x in values for x in inputs)


# -- groups ----------------------------------------------------------------------------------------------
class _Group:
    __slots__ = ("bit", "bits", "members", "domain", "k", "segment", "last", "roles")

    def __init__(self, bit, domain, k, segment):
        self.bit = bit
        self.bits = 1 << bit
        self.members: list[int] = []         # node positions
        self.domain = domain
        self.k = k                           # None until a reduction joins
        self.segment = segment
        self.last = -1
        self.roles: dict[int, str] = {}      # node position -> role


def _role(info, node, domain, k):
    """The node's role in a group with this domain/k, or None."""
    if info.kind == "reduce":
        x = node.inputs[0]
        if x.aval.shape != domain or (k is not None and k != info.k):
            return None
        return "reduce"
    if info.shape == domain:
        return "domain"
    if k is not None:
        kd, nokd = domain[:len(domain) - k] + (1,) * k, domain[:len(domain) - k]
        if info.shape in (kd, nokd):
            return "row"
    return None


def _use_ok(consumer, c_role, c_shape, p_role, p_shape, domain, k):
    """May a member with role c_role read a member value (p_role, p_shape) of the same group?"""
    if c_role == "reduce":
        return p_role == "domain"
    if _view_kind(consumer.op) == "reinterpret":     # a reshape: domain -> domain or row -> row
        return (p_role == "domain") == (c_role == "domain")
    if c_role == "domain":
        if p_role == "domain":
            return True
        return k is not None and p_shape == domain[:len(domain) - k] + (1,) * k
    return p_role in ("row", "reduce") and p_shape == c_shape


class _Grouper:
    """Forms the groups of one graph (see the module docstring)."""

    def __init__(self, graph):
        self.graph = graph
        self.nodes = graph.nodes
        self.groups: list[_Group] = []
        self.group_of: dict[int, _Group] = {}        # node position -> group
        self.producer: dict[int, int] = {}           # value id -> node position (non-barrier nodes)
        self.dep: dict[int, int] = {}                # value id -> bitmask of groups it depends on
        self.infos: dict[int, _Info] = {}
        self.segment_of: dict[int, int] = {}         # node position -> segment (runs between barriers)

    def run(self):
        segment = 0
        for i, node in enumerate(self.nodes):
            if _is_barrier(node):
                # A barrier is a segment of its own and groups never span segments, so nothing
                # needs its outputs' producer or group dependencies: a path from a group through
                # the barrier leads to a later segment, where that group can no longer grow. So a
                # lazy_inline model's Call nodes (tens of values each) cost one test here.
                segment += 1
                continue
            for o in node.outputs:
                self.producer[o.id] = i
            in_dep = 0
            for x in node.inputs:
                if isinstance(x, Value):
                    in_dep |= self.dep.get(x.id, 0)
            info = classify(node)
            g = None
            self.segment_of[i] = segment
            if info is not None:
                self.infos[i] = info
                g = self._place(i, node, info, segment)
            bits = in_dep | (g.bits if g is not None else 0)
            for o in node.outputs:
                self.dep[o.id] = bits
        if self.groups:                 # a view only ever joins an existing group
            self._pull_free_producers()
        return [g for g in self._live_groups() if self._work(g) >= MIN_WORK]

    def _pull_free_producers(self):
        """An ungrouped view op whose every reader is in one group G joins G (in reverse order, so
        a chain of views joins whole): G then reads the view's input directly, by strides. Legal
        by construction: the view precedes its readers and depends on nothing in G (else a reader
        would have failed the cycle test)."""
        # the candidates are known up front (only this loop adds a view to a group, at its own
        # turn): the readers are looked up for their outputs only, so a graph of Call nodes with
        # tens of inputs each (a lazy_inline model) costs one set test per input
        candidates = {self.nodes[i].outputs[0] for i, info in self.infos.items()
                      if info.rule.free and i not in self.group_of}
        if not candidates:
            return
        readers: dict[int, list] = {}
        for i, node in enumerate(self.nodes):
            if _reads_none(candidates, node.inputs):
                continue
            for x in node.inputs:
                if (x.__class__ is Value or isinstance(x, Value)) and x in candidates:
                    readers.setdefault(x.id, []).append(i)
        outputs = {o.id for o in self.graph.outputs if isinstance(o, Value)}
        for i in range(len(self.nodes) - 1, -1, -1):
            info = self.infos.get(i)
            if info is None or not info.rule.free or i in self.group_of:
                continue
            node = self.nodes[i]
            out = node.outputs[0]
            rs = readers.get(out.id, [])
            groups = {id(self.group_of.get(r)) for r in rs}
            g = self.group_of.get(rs[0]) if rs else None
            if g is None or len(groups) != 1 or out.id in outputs or g.segment != self.segment_of[i]:
                continue
            if any(self._member_group(x) is g for x in node.inputs):
                continue                    # it would read a member's value as a view: not per element
            role = _role(info, node, g.domain, g.k)
            if info.view == "permute" and role != "domain":
                continue
            if role is None or any(not _use_ok(self.nodes[r], g.roles[r], self.nodes[r].outputs[0].aval.shape, role,
                                               out.aval.shape, g.domain, g.k) for r in rs):
                continue
            g.members = sorted(g.members + [i])
            g.roles[i] = role
            self.group_of[i] = g

    def _live_groups(self):
        seen, out = set(), []
        for g in self.group_of.values():
            if id(g) not in seen:
                seen.add(id(g))
                out.append(g)
        return out

    def _work(self, g):
        return sum(1 for i in g.members if not self.infos[i].rule.free)

    def _member_group(self, x):
        if not isinstance(x, Value):
            return None
        p = self.producer.get(x.id)
        return self.group_of.get(p) if p is not None else None

    def _uses_ok(self, i, node, role, g, domain, k):
        """Are node i's reads of g's member values valid for `role`?"""
        for x in node.inputs:
            if isinstance(x, Value) and self._member_group(x) is g:
                p = self.producer[x.id]
                if not _use_ok(node, role, node.outputs[0].aval.shape, g.roles[p], x.aval.shape, domain, k):
                    return False
        return True

    def _place(self, i, node, info, segment):
        if info.view == "permute":
            return None        # a transpose: only ever pulled in as a reader of an outside value (see below)
        candidates = []
        for x in node.inputs:
            g = self._member_group(x)
            if g is not None and g not in candidates:
                candidates.append(g)
        target = None
        for g in candidates:
            if g.segment != segment or i - g.last > WINDOW:
                continue
            role = _role(info, node, g.domain, g.k)
            if role is None or not self._uses_ok(i, node, role, g, g.domain, info.k if g.k is None else g.k):
                continue
            if self._no_cycle_node(node, g):
                target = g
                k = info.k if info.kind == "reduce" else g.k
                break
        if target is None:
            if info.rule.free:
                # a view (reshape/broadcast_to/copy) never starts a group: its input is often read by
                # an unfusible node too (a reshape feeding both a mul and a split), and as a member
                # it would tie the group to that node. It joins its consumer's group afterwards
                # (`_pull_free_producers`) when that group is its only reader.
                return None
            domain = node.inputs[0].aval.shape if info.kind == "reduce" else info.shape
            target = _Group(len(self.groups), domain, info.k if info.kind == "reduce" else None, segment)
            self.groups.append(target)
            role = "reduce" if info.kind == "reduce" else "domain"
            k = target.k
        target.k = k
        target.members.append(i)
        target.roles[i] = role
        target.last = i
        self.group_of[i] = target
        for g in candidates:
            if g is not target:
                self._try_merge(target, g)
        return target

    def _no_cycle_node(self, node, g):
        for x in node.inputs:
            if isinstance(x, Value) and self._member_group(x) is not g and self.dep.get(x.id, 0) & g.bits:
                return False
        return True

    def _external_inputs(self, g):
        for p in g.members:
            for x in self.nodes[p].inputs:
                if isinstance(x, Value) and self._member_group(x) is not g:
                    yield x

    def _try_merge(self, g, h):
        """Merge group h into g (both already exist) if that is legal; see the module docstring."""
        if h.segment != g.segment or h.domain != g.domain or (g.k is not None and h.k is not None and g.k != h.k):
            return False
        if max(g.last, h.last) - min(min(g.members), min(h.members)) > 4 * WINDOW:
            return False
        k = g.k if g.k is not None else h.k
        for x in self._external_inputs(h):
            if self._member_group(x) is not g and self.dep.get(x.id, 0) & g.bits:
                return False
        for x in self._external_inputs(g):
            if self._member_group(x) is not h and self.dep.get(x.id, 0) & h.bits:
                return False
        # roles stay valid with the merged k, and cross reads between g and h are valid
        roles = dict(g.roles)
        roles.update(h.roles)
        for p, role in roles.items():
            node = self.nodes[p]
            info = self.infos[p]
            if _role(info, node, g.domain, k) != role and not (role == "domain" and info.shape == g.domain):
                return False
            for x in node.inputs:
                if not isinstance(x, Value):
                    continue
                q = self.producer.get(x.id)
                if q in roles and self.group_of.get(q) is not self.group_of.get(p):
                    if not _use_ok(node, role, node.outputs[0].aval.shape, roles[q], x.aval.shape, g.domain, k):
                        return False
        for p in h.members:
            self.group_of[p] = g
        g.members = sorted(g.members + h.members)
        g.roles = roles
        g.bits |= h.bits
        g.k = k
        g.last = max(g.last, h.last)
        return True


# -- from a group to a kernel spec -------------------------------------------------------------------
def _split_for(domain, inputs):
    """Columns for an elementwise group: the most trailing dims such that every input is either
    contiguous along them or broadcast along all of them (so the inner loop is `x[base + c]` or
    `x[base]`, never a div/mod)."""
    nd = len(domain)
    if nd == 0:
        return 0
    best = 1
    for k in range(1, nd + 1):
        if all(_Access(i.shape, domain, k, i.strides).col != "general" for i in inputs):
            best = k
    return best


def _c_strides(shape):
    out, acc = [], 1
    for s in reversed(shape):
        out.append(acc)
        acc *= s
    return out[::-1]


def _permuted_strides(node, aval):
    """The element strides of `node`'s permuted view of a C-contiguous buffer holding `aval`: the
    op's own `View.take` applied to an array header whose data is never read."""
    item = aval.dtype.np.itemsize
    header = np.lib.stride_tricks.as_strided(np.empty(1, aval.dtype.np), aval.shape,
                                             [s * item for s in _c_strides(aval.shape)])
    view = node.op.view.take(header, tuple(o.aval for o in node.outputs), node.attrs)[0]
    return tuple(s // item for s in view.strides)


class _GroupPlan:
    """A group turned into: member nodes, input Values (with read shapes), output Values, the spec."""

    def __init__(self, index, group, grouper, used_outside):
        nodes = grouper.nodes
        self.positions = sorted(group.members)
        self.nodes = [nodes[p] for p in self.positions]
        member_of = {n.outputs[0].id: j for j, n in enumerate(self.nodes)}
        domain, k = group.domain, group.k
        nd = len(domain)
        inputs, input_key = [], {}
        self.in_values = []
        members = []

        def input_ref(x, consumer_role, consumer_shape, consumer):
            shape, strides, nelems = x.aval.shape, None, None
            view = _view_kind(consumer.op)
            if view == "reinterpret":
                shape = consumer_shape                     # read the buffer as the reshape's result
            elif view == "permute":                        # read the buffer with permuted strides
                shape, strides, nelems = consumer_shape, _permuted_strides(consumer, x.aval), x.aval.size
            if consumer_role == "row" and len(consumer_shape) == nd - k:   # a per-row value without keep_dims
                shape = (1,) * (nd - k - len(shape)) + tuple(shape) + (1,) * k
            key = (x.id, tuple(shape), strides)
            j = input_key.get(key)
            if j is None:
                j = input_key[key] = len(inputs)
                inputs.append(InputSpec(T.ctype_of(x.aval.dtype), tuple(shape), strides, nelems))
                self.in_values.append(x)
            return ("i", j)

        for p, node in zip(self.positions, self.nodes):
            role = group.roles[p]
            out = node.outputs[0]
            ops = []
            for x in node.inputs:
                if isinstance(x, Value):
                    j = member_of.get(x.id)
                    ops.append(("m", j) if j is not None else input_ref(x, role, out.aval.shape, node))
                else:
                    ops.append(("c", x))
            attrs = dict(node.attrs)
            members.append(MemberSpec(node.op.name, T.ctype_of(out.aval.dtype), role, ops, attrs, node.op.fusion))
        self.out_members = [j for j, n in enumerate(self.nodes) if n.outputs[0].id in used_outside]
        self.out_values = [self.nodes[j].outputs[0] for j in self.out_members]
        if k is None:
            k = _split_for(domain, inputs)
        self.has_reduction = group.k is not None
        kind = "reduce" if self.has_reduction else "elementwise"
        self.spec = KernelSpec(f"fused_{kind}_{index}", domain, k, inputs, members, self.out_members)
        self.symbol, self.c_source = generate(self.spec)
        self.name = f"fused_{kind}_{index}{{{','.join(n.op.name for n in self.nodes)}}}"


# -- the fused primitive ---------------------------------------------------------------------------
class FusedPrimitive(Primitive):
    """The op of a fused node: a Primitive (so verify, printers and executors treat it like any
    other) whose kernel is a compiled C function and whose inference re-runs its members' rules.

    `members`: the member ops' names; `nodes`: the original member nodes; `c_source`: the kernel's
    C code; `spec`: its KernelSpec; `impl`: the unfused reference (the members' own kernels)."""

    __slots__ = ("members", "nodes", "in_values", "out_values", "c_source", "spec", "symbol", "module", "_fn")

    def __init__(self, plan: _GroupPlan, module):
        super().__init__(plan.name, self._infer, self._reference, None, None,
                         doc=f"fused kernel of {len(plan.nodes)} ops")
        self.members = [n.op.name for n in plan.nodes]
        self.nodes = plan.nodes
        self.in_values = plan.in_values
        self.out_values = plan.out_values
        self.c_source = plan.c_source
        self.spec = plan.spec
        self.symbol = plan.symbol
        self.module = module
        self._fn = getattr(module.lib, plan.symbol)
        self.kernel = _make_wrapper(self, module)

    @property
    def multi(self):
        return len(self.out_values) > 1

    def _infer(self, *inputs):
        env = {}
        for v, x in zip(self.in_values, inputs):
            env[v.id] = x
        for node in self.nodes:
            args = [env.get(x.id, x.aval) if isinstance(x, Value) else x for x in node.inputs]
            env[node.outputs[0].id] = node.op.infer(*args, **node.attrs)
        outs = tuple(env[v.id] for v in self.out_values)
        return outs if len(outs) > 1 else outs[0]

    def _reference(self, *arrays):
        """The group run unfused, op by op with the members' own kernels (for tests and debugging)."""
        env = {v.id: a for v, a in zip(self.in_values, arrays)}
        for node in self.nodes:
            args = [env[x.id] if isinstance(x, Value) else x for x in node.inputs]
            r = np.asarray(node.op.kernel(*args, **node.attrs))
            aval = node.outputs[0].aval
            env[node.outputs[0].id] = r.astype(aval.dtype.np, copy=False)
        outs = tuple(env[v.id] for v in self.out_values)
        return outs if len(outs) > 1 else outs[0]


_WRAPPER_CODE: dict = {}     # (wrapper source, kernel name) -> its code object


def _make_wrapper(prim: FusedPrimitive, module):
    """A Python function `kernel(*inputs) -> output(s)` calling the C kernel: allocates the outputs,
    passes every buffer as a pointer (cffi's `from_buffer`, ~0.1 us each), and checks each input's
    byte size (a wrong-sized buffer would make C read out of bounds). Non-contiguous inputs (a
    transposed view) and Python scalars are made contiguous arrays of the right dtype first.
    Generated as source so the common case is one flat function with no loops."""
    spec = prim.spec
    n_in = len(spec.inputs)
    ns = {"_fb": module.ffi.from_buffer, "_k": prim._fn, "_empty": np.empty, "_prep": _prepare, "_bad": _bad_input,
          "_prim": prim}
    ins = [f"i{j}" for j in range(n_in)]
    outs = [f"o{k}" for k in range(len(prim.out_values))]
    lines = [f"def {prim.symbol}({', '.join(ins)}):"]
    for k, v in enumerate(prim.out_values):
        ns[f"_S{k}"], ns[f"_D{k}"] = v.aval.shape, v.aval.dtype.np
        lines.append(f"    o{k} = _empty(_S{k}, _D{k})")
    if n_in:
        bufs = ", ".join(f"b{j}" for j in range(n_in))
        lines.append("    try:")
        lines.append(f"        {bufs}, = {', '.join(f'_fb(i{j})' for j in range(n_in))},")
        lines.append("    except (ValueError, TypeError):")
        lines.append(f"        {', '.join(ins)}, = _prep(_prim, ({', '.join(ins)},))")
        lines.append(f"        {bufs}, = {', '.join(f'_fb(i{j})' for j in range(n_in))},")
        for j, i in enumerate(spec.inputs):
            ns[f"_N{j}"] = i.buffer_elems * i.ctype.dtype.itemsize
        checks = " or ".join(f"len(b{j}) != _N{j}" for j in range(n_in))
        lines.append(f"    if {checks}:")
        lines.append(f"        _bad(_prim, ({', '.join(ins)},))")
    args = [f"_fb(o{k})" for k in range(len(outs))] + [f"b{j}" for j in range(n_in)]
    lines.append(f"    _k({', '.join(args)})")
    lines.append(f"    return {outs[0] if len(outs) == 1 else '(' + ', '.join(outs) + ')'}")
    src = "\n".join(lines) + "\n"
    code = _WRAPPER_CODE.get((src, prim.name))
    if code is None:                 # (compiling the source is most of the cost: every O1 compile asks)
        if len(_WRAPPER_CODE) > 4096:
            _WRAPPER_CODE.clear()
        code = _WRAPPER_CODE[src, prim.name] = compile(src, f"<fused kernel {prim.name}>", "exec")
    exec(code, ns)
    fn = ns[prim.symbol]
    fn.source = src
    return fn


def _prepare(prim, arrays):
    out = []
    for a, spec in zip(arrays, prim.spec.inputs):
        a = np.ascontiguousarray(a, dtype=spec.ctype.dtype.np)
        out.append(a)
    return tuple(out)


def _bad_input(prim, arrays):
    got = ", ".join(f"{np.shape(a)} {getattr(a, 'dtype', type(a).__name__)}" for a in arrays)
    want = ", ".join(f"{i.buffer_elems} x {i.ctype.dtype}" for i in prim.spec.inputs)
    raise MinisporeRuntimeError(f"For '{prim.name}', expected inputs of sizes {want}, but got {got}")


# -- the pass -------------------------------------------------------------------------------------------
class FusionResult:
    """`graph`: the fused graph (the input graph itself when nothing fused); `fused`: the
    FusedPrimitives made; `unfused_reason`: why fusion was skipped (no compiler, disabled), or None;
    `failed`: names of groups whose kernel did not compile.

    For the executor, `exec_graph` is `graph` with one difference: its If/While/Call nodes still
    name the ORIGINAL subgraphs, and `exec_subgraphs[id(original)]` is the fused subgraph to run in
    their place. Why two graphs: a lazy_inline model's top level is mostly Call nodes to one shared
    layer graph, which is fused once; but pointing a Call node at the fused callee takes a new node,
    hence (SSA) new output values, hence new nodes for all their readers - the whole top level, tens
    of values per layer, rebuilt at every compile. `exec_graph` shares every node with the input
    graph except the fused groups and their readers, so the O1 executor plans it at about O0's cost
    per layer. `graph` is built from it only when first read (printing the IR, DryRun, O2, the
    arena planner, multi-stream scheduling); it runs the same kernels in the same order."""

    def __init__(self, graph, fused, unfused_reason=None, failed=(), exec_graph=None, exec_subgraphs=None,
                 build=None):
        self._graph = graph
        self._build = build                 # makes `graph` on first use when graph is None
        self.fused = fused
        self.unfused_reason = unfused_reason
        self.failed = list(failed)
        self.exec_graph = exec_graph if exec_graph is not None else graph
        self.exec_subgraphs = dict(exec_subgraphs or {})

    @property
    def graph(self):
        if self._graph is None:
            self._graph, self._build = self._build(), None
        return self._graph

    def __repr__(self):
        return f"<FusionResult {len(self.fused)} fused groups" + \
            (f", unfused: {self.unfused_reason}" if self.unfused_reason else "") + ">"


_warned: set = set()


def _warn_once(key, msg):
    if key not in _warned:
        _warned.add(key)
        warnings.warn(msg, RuntimeWarning, stacklevel=4)


def fusion_enabled() -> bool:
    return os.environ.get("MINISPORE_FUSION", "1") not in ("0", "false", "False", "off")


def find_groups(graph):
    """The `_GroupPlan`s fusion would make for `graph` (no subgraphs, nothing compiled)."""
    grouper = _Grouper(graph)
    groups = grouper.run()
    if not groups:
        return [], grouper
    used_outside = _used_outside(graph, grouper)
    plans = []
    for g in sorted(groups, key=lambda g: min(g.members)):
        if any(o.id in used_outside for p in g.members for o in grouper.nodes[p].outputs):
            plans.append(_GroupPlan(len(plans), g, grouper, used_outside))
        # (a group whose values nobody reads is dead code: left as it was)
    return plans, grouper


def _used_outside(graph, grouper):
    """Ids of the group members' values read by a node of another group (or of no group) or
    returned by the graph (the only values whose use matters: they become fused outputs)."""
    nodes, group_of = graph.nodes, grouper.group_of
    member_value = {o: g for p, g in group_of.items() for o in nodes[p].outputs}    # Value -> its group
    out = {o.id for o in graph.outputs if isinstance(o, Value)}
    for i, node in enumerate(nodes):
        if _reads_none(member_value, node.inputs):
            continue
        g = group_of.get(i)
        for x in node.inputs:
            if isinstance(x, Value):
                h = member_value.get(x)
                if h is not None and h is not g:
                    out.add(x.id)
    return out


def fuse(graph: Graph, prepare=None) -> FusionResult:
    """Fuse `graph` and its subgraphs (see the module docstring and `FusionResult`).

    `prepare(g) -> g2`: a pass run first on each graph's own nodes, once per (sub)graph; g2's
    If/While/Call nodes still name the ORIGINAL subgraphs, which this function then replaces by
    their prepared and fused versions - so a lazy_inline top level whose callee changes is still not
    rebuilt (`FusionResult.exec_graph`). O1 and O2 pass transpose folding
    (transpose_folding.fold_transposes_here); the result's graphs are prepared even when nothing
    fuses (fusion switched off, no C compiler)."""
    graphs = graph.all_graphs()
    own = {id(g): g for g in graphs}               # id(original) -> its prepared graph
    if prepare is not None:
        for g in graphs:
            own[id(g)] = prepare(g)
    prepared = any(own[id(g)] is not g for g in graphs)
    if not fusion_enabled():
        return _unfused(graph, own, prepared, "MINISPORE_FUSION=0")
    all_plans = {}                                  # id(original graph) -> (plans, grouper) of its prepared graph
    for g in graphs:
        all_plans[id(g)] = find_groups(own[id(g)])
    kernels = {}
    for plans, _ in all_plans.values():
        for p in plans:
            kernels[p.symbol] = (_VECTOR_SELECTS + p.c_source, declaration(p.symbol, p.spec))
    if not kernels:
        return _unfused(graph, own, prepared, None)
    try:
        modules, errors = B.build_each(kernels)
    except B.NoCompiler as e:
        _warn_once("nocc", f"jit_level O1/O2: {e}; generated fused kernels cannot be built, so graphs run "
                           f"unfused (kernel by kernel). Install gcc, or point CC at a C compiler.")
        return _unfused(graph, own, prepared, f"no C compiler: {e}")
    failed = []
    if errors:
        names = [p.name for plans, _ in all_plans.values() for p in plans if p.symbol in errors]
        first = next(iter(errors.values())).strip().splitlines()
        detail = "\n".join(first[-12:])
        warnings.warn(f"jit_level O1/O2: {len(names)} fused kernel(s) failed to compile and run unfused: "
                      f"{', '.join(names)}. Compiler output (last lines):\n{detail}", RuntimeWarning, stacklevel=3)
        failed = names
    fused = []
    prims = {}                                      # id(plan) -> its FusedPrimitive (made once)
    memo = {}                                       # id(graph) -> its fused graph

    def prim_of(plan):
        prim = prims.get(id(plan))
        if prim is None:
            prim = prims[id(plan)] = FusedPrimitive(plan, modules[plan.symbol])
            fused.append(prim)
        return prim

    def compiled(g):
        plans, grouper = all_plans[id(g)]
        return [p for p in plans if p.symbol in modules], grouper

    def rewrite(g):
        new = memo.get(id(g))
        if new is None:
            new = memo[id(g)] = _rebuild(own[id(g)], *compiled(g), prim_of, rewrite, origin=g)
        return new

    return _result(graph, own, compiled, rewrite, memo, prim_of, fused, None, failed, all_plans)


def _unfused(graph, own, prepared, reason):
    """The result when nothing fuses: `graph` itself, or its prepared graphs (`fuse`'s `prepare`)."""
    if not prepared:
        return FusionResult(graph, [], reason)
    memo = {}

    def rewrite(g):                                 # (prepared, subgraphs replaced by theirs)
        new = memo.get(id(g))
        if new is None:
            new = memo[id(g)] = _rebuild(own[id(g)], [], None, None, rewrite, origin=g)
        return new
    return _result(graph, own, lambda g: ([], None), rewrite, memo, None, [], reason, [], {})


def _result(graph, own, compiled, rewrite, memo, prim_of, fused, reason, failed, all_plans):
    """The FusionResult of `graph` (`rewrite(g)`: the prepared, fused version of subgraph g)."""
    if len(own) == 1:                               # no subgraphs: the executor's graph is `graph`'s
        return FusionResult(rewrite(graph), fused, reason, failed)
    top_plans, top_grouper = compiled(graph)
    top = own[id(graph)]
    exec_graph = _rebuild(top, top_plans, top_grouper, prim_of, rewrite, keep_subgraphs=True, origin=graph)
    exec_subgraphs = dict(memo)                     # (every subgraph is fused by now)
    for key in [k for k in all_plans if k != id(graph)]:
        del all_plans[key]                          # (what the deferred `graph` needs no longer)
    return FusionResult(None, fused, reason, failed, exec_graph, exec_subgraphs,
                        build=lambda: _rebuild(top, top_plans, top_grouper, prim_of, rewrite, origin=graph))


def _rebuild(graph, plans, grouper, prim_of, rewrite, keep_subgraphs=False, origin=None):
    """`graph` with each plan's members replaced by one fused node (op `prim_of(plan)`) and each
    subgraph of an If/While/Call node replaced by `rewrite(subgraph)` - or, with keep_subgraphs,
    fused but left in place (`FusionResult.exec_graph`). A node whose inputs and subgraphs stay the
    same is kept, shared with `graph` (the IR is never mutated); the others get new nodes with new
    output values. `graph` itself comes back when no node changes. `origin`: the graph `graph` was
    prepared from (`fuse`'s `prepare`), named by the result's `notes["fused_from"]`."""
    nodes = graph.nodes
    vmap = {}                                       # original Value -> its replacement
    new_nodes = []
    changed = False
    for kind, item in _schedule(nodes, plans, grouper):
        if kind == "group":
            plan = item
            node = Node(prim_of(plan), [vmap.get(x, x) for x in plan.in_values], {}, (), len(plan.out_values) > 1,
                        plan.nodes[-1].source)
            node.outputs = tuple(Value(o.aval, "node", producer=(node, k), name=o.name)
                                 for k, o in enumerate(plan.out_values))
            for o, n in zip(plan.out_values, node.outputs):
                vmap[o] = n
            new_nodes.append(node)
            changed = True
            continue
        old = nodes[item]
        attrs = old.attrs
        if attrs:
            new_attrs = None
            for k, v in attrs.items():
                if isinstance(v, Graph):
                    r = rewrite(v)                  # (memoised: a lazy_inline callee is fused once)
                    if r is not v and not keep_subgraphs:
                        if new_attrs is None:
                            new_attrs = dict(attrs)
                        new_attrs[k] = r
            if new_attrs is not None:
                attrs = new_attrs
        if attrs is old.attrs and (not vmap or _reads_none(vmap, old.inputs)):
            new_nodes.append(old)
            continue
        node = Node(old.op, [vmap.get(x, x) if x.__class__ is Value or isinstance(x, Value) else x
                             for x in old.inputs], attrs, (), old.multi, old.source)
        node.outputs = tuple(Value(o.aval, "node", producer=(node, k), name=o.name)
                             for k, o in enumerate(old.outputs))
        for o, n in zip(old.outputs, node.outputs):
            vmap[o] = n
        new_nodes.append(node)
        changed = True
    if not changed:
        return graph
    out = Graph(graph.name, graph.params, graph.captures, new_nodes,
                [vmap.get(o, o) if isinstance(o, Value) else o for o in graph.outputs], graph.source_fn)
    out.notes = dict(graph.notes)
    out.notes["fused_from"] = origin if origin is not None else graph
    return out


def _schedule(nodes, plans, grouper):
    """The rebuilt graph's units in execution order: ("node", position) or ("group", plan).
    Barriers keep their place, so every node stays in its segment (the run of nodes between two
    barriers). A segment holding a group is re-sorted (`_sort_segment`); the others, which in a
    lazy_inline model's top level are nearly all, keep their order as they are."""
    if not plans:
        return [("node", i) for i in range(len(nodes))]
    seg_of = grouper.segment_of                     # (barriers have none: each is its own segment)
    plan_at = {}
    hot = set()
    for plan in plans:
        for p in plan.positions:
            plan_at[p] = plan
        hot.add(seg_of[plan.positions[0]])
    units = []
    i, n = 0, len(nodes)
    while i < n:
        s = seg_of.get(i)
        if s is None or s not in hot:
            units.append(("node", i))
            i += 1
            continue
        j = i
        while j < n and seg_of.get(j) == s:
            j += 1
        units.extend(_sort_segment(nodes, i, j, plan_at, grouper))
        i = j
    return units


def _sort_segment(nodes, lo, hi, plan_at, grouper):
    """Units of the segment nodes[lo:hi] (each group one unit) in a topological order that prefers
    the original one: a group runs when all its inputs exist, and sits where its first member was."""
    unit_of = {}                                    # position -> unit index
    units, first, unit_of_plan = [], [], {}
    for p in range(lo, hi):
        plan = plan_at.get(p)
        if plan is None:
            unit_of[p] = len(units)
            units.append(("node", p))
            first.append(p)
            continue
        u = unit_of_plan.get(id(plan))
        if u is None:                               # (positions ascend: p is its first member)
            u = unit_of_plan[id(plan)] = len(units)
            units.append(("group", plan))
            first.append(p)
        unit_of[p] = u
    deps = [set() for _ in units]
    users = [set() for _ in units]
    producer = grouper.producer
    for p in range(lo, hi):
        u = unit_of[p]
        for x in nodes[p].inputs:
            if isinstance(x, Value):
                q = producer.get(x.id)
                if q is not None and lo <= q < hi and unit_of[q] != u:
                    deps[u].add(unit_of[q])
    for u, ds in enumerate(deps):
        for d in ds:
            users[d].add(u)
    pending = [len(d) for d in deps]
    ready = [(first[u], u) for u in range(len(units)) if pending[u] == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        _, u = heapq.heappop(ready)
        order.append(units[u])
        for v in users[u]:
            pending[v] -= 1
            if pending[v] == 0:
                heapq.heappush(ready, (first[v], v))
    if len(order) != len(units):
        raise MinisporeRuntimeError("fusion made a cycle (a bug in the fusion pass)")
    return order


__all__ = ["fuse", "find_groups", "classify", "FusedPrimitive", "FusionResult", "fusion_enabled", "WINDOW"]
