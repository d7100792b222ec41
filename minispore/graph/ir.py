"""The graph IR: SSA values, nodes and graphs (one IR for every capture mode and every later pass).

A `Graph` is a straight list of `Node`s in topological (= execution) order:

    graph f(%0: f32[4,8], %1: f32[8,16]) {
      %2 = capture Parameter 'dense.bias' : f32[16]
      %3 = matmul(%0, %1) : f32[4,16]                        # test.py:12
      %4 = add(%3, %2) : f32[4,16]                           # test.py:13
      return %4
    }

* A `Value` is defined exactly once: as a graph parameter, as a *capture*, or as an output of one
  node. Its `aval` is an `AbstractTensor(shape, dtype)` for tensors (every value knows its shape
  and dtype) or `OPAQUE` for a Python object produced at run time by a host call.
* Node inputs are Values or plain Python constants (ints, floats, None, tuples, dtypes ...).
  Attributes (`attrs`) are the primitive's keyword arguments, exactly as PyNative passes them.
* **Captures** are Tensors the function reads without receiving them as arguments (a Cell's
  Parameters, a closed-over or global Tensor, a constant table built during capture). The graph
  holds a reference to the Tensor object and reads its storage *when the graph runs*, so an
  optimizer that updates a Parameter is seen by the next run, as in PyNative.
* `Node.op` is a `Primitive` from the registry, or one of the structural ops below. Structural
  ops keep their subgraphs in `attrs`; subgraphs are *closed*: they use only their own params and
  captures, never a Value of the enclosing graph (pass it in as an operand instead).

Structural ops (run by run/loop.py and run/o2.py, checked by verify.py):

* `IF`       inputs `(cond, *operands)`; attrs `then_graph`, `else_graph`: both take the operands
             and return values of the node's output avals. `cond` is a one-element tensor (its
             truth value picks the branch) or a Python bool.
* `WHILE`    inputs `(*init)`; attrs `cond_graph` (carry -> one-element tensor) and `body_graph`
             (carry -> carry, same avals). Outputs: the final carry.
* `CALL`     inputs `(*args)`; attr `graph`: the callee. Outputs: the callee's outputs.
* `HOST_CALL` inputs: the Values among the call's arguments; attrs `fn`, `template` (the
             arguments with each Value replaced by a `Slot(i)`), `name`. Runs `fn` eagerly, in
             program order, on concrete Tensors: MindSpore's "JIT Fallback" at run time. Outputs:
             one OPAQUE value (the Python result), unless `out_avals` declares tensor outputs.

Extension points for capture modes (ast, bytecode): build graphs with `GraphBuilder`
(`param`, `capture`, `add_node`, `add_structural`, `finish`), emit subgraphs with a nested builder
(`GraphBuilder(name)` + `finish()`), then hand the Graph to `verify` and an executor.
"""
from __future__ import annotations

import itertools

from ..ops.primitive import AbstractTensor, Primitive, interned_aval

_ids = itertools.count()


class OpaqueAval:
    """The 'type' of a Python object that exists only at run time (a host call's result)."""

    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self):
        return "py"


OPAQUE = OpaqueAval()


class Value:
    """One SSA value. `kind` is 'param', 'capture' or 'node'; `producer` is (node, index) for
    node outputs and the captured Tensor for captures."""

    __slots__ = ("id", "aval", "kind", "producer", "name")

    def __init__(self, aval, kind, producer=None, name=None):
        self.id = next(_ids)                 # unique across graphs; the printer renumbers per graph
        self.aval = aval
        self.kind = kind
        self.producer = producer
        self.name = name

    @property
    def shape(self):
        return self.aval.shape

    @property
    def dtype(self):
        return self.aval.dtype

    def __repr__(self):
        return f"Value(#{self.id}, {self.kind}, {self.aval!r})"


class StructuralOp:
    """A non-primitive op whose meaning lives in the executor: If, While, Call, HostCall."""

    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"StructuralOp({self.name})"


IF = StructuralOp("If")
WHILE = StructuralOp("While")
CALL = StructuralOp("Call")
HOST_CALL = StructuralOp("HostCall")
STRUCTURAL = (IF, WHILE, CALL, HOST_CALL)


class Slot:
    """Marks where the i-th input Value goes back into a host call's argument template."""

    __slots__ = ("index",)

    def __init__(self, index):
        self.index = index

    def __repr__(self):
        return f"Slot({self.index})"


def template_slots(template) -> list:
    """The indices of the Slots in a host call's argument template, in the template's order
    (nested tuples, lists and dict values)."""
    out = []

    def walk(t):
        if isinstance(t, Slot):
            out.append(t.index)
        elif isinstance(t, (tuple, list)):
            for x in t:
                walk(x)
        elif isinstance(t, dict):
            for x in t.values():
                walk(x)
    walk(template)
    return out


class Node:
    """One operation: `outputs = op(*inputs, **attrs)`.

    `multi` says whether the op returns a tuple (a multi-output primitive such as dropout's
    `(output, mask)`, or any structural op): then every output is one element of it.
    `source` is `(filename, lineno, function)` of the user code that created it, for messages.
    """

    __slots__ = ("op", "inputs", "attrs", "outputs", "multi", "source")

    def __init__(self, op, inputs, attrs, outputs, multi, source=None):
        self.op = op
        self.inputs = tuple(inputs)
        self.attrs = attrs
        self.outputs = tuple(outputs)
        self.multi = multi
        self.source = source

    @property
    def name(self):
        return self.op.name

    @property
    def is_primitive(self):
        return isinstance(self.op, Primitive)

    def subgraphs(self):
        """The graphs held in this node's attributes (control flow and calls)."""
        return [v for v in self.attrs.values() if isinstance(v, Graph)]

    def where(self):
        if self.source is None:
            return "<unknown source>"
        f, line, fn = self.source
        return f"{f}:{line} in {fn}"

    def __repr__(self):
        return f"Node({self.op.name}, {len(self.inputs)} inputs, {len(self.outputs)} outputs)"


class Graph:
    """A function in SSA form. See the module docstring.

    `params`: Values bound to the call's tensor arguments, in order.
    `captures`: `(Value, Tensor)` pairs, read by reference at run time.
    `outputs`: a flat list of Values or Python constants.
    `source_fn`: the Python function it was captured from (for messages and dumps).
    """

    def __init__(self, name, params, captures, nodes, outputs, source_fn=None):
        self.name = name
        self.params = list(params)
        self.captures = list(captures)
        self.nodes = list(nodes)
        self.outputs = list(outputs)
        self.source_fn = source_fn
        # facts about how the graph was made that passes may need (e.g. "custom_bprop": the cells
        # with a user-defined bprop it inlined, which graph autodiff must not differentiate op by op)
        self.notes: dict = {}

    @property
    def param_avals(self):
        return [v.aval for v in self.params]

    @property
    def output_avals(self):
        return [o.aval if isinstance(o, Value) else o for o in self.outputs]

    def all_graphs(self):
        """This graph and every subgraph below it, depth first (for dumps and passes). A subgraph
        called from several nodes (a lazy_inline layer) is listed once, so a dump or a pass does not
        repeat it for every layer."""
        out, stack, seen = [], [self], set()
        while stack:
            g = stack.pop()
            if id(g) in seen:
                continue
            seen.add(id(g))
            out.append(g)
            for node in reversed(g.nodes):
                stack.extend(reversed(node.subgraphs()))
        return out

    def num_nodes(self, recursive=True):
        return sum(len(g.nodes) for g in self.all_graphs()) if recursive else len(self.nodes)

    def __repr__(self):
        # (the text form is minispore.graph.printer.format_graph(g): the printer builds on the IR, so
        # the IR cannot call it without an import cycle)
        return f"<Graph {self.name}: {len(self.params)} params, {len(self.captures)} captures, " \
               f"{len(self.nodes)} nodes; format_graph(g) prints them>"


class GraphBuilder:
    """Builds one Graph. Capture modes use it; see the module docstring.

    Captures are de-duplicated by the Tensor's identity, so a Parameter read ten times is one
    capture. The builder keeps each captured Tensor alive (the graph must be able to read it).
    """

    def __init__(self, name, source_fn=None):
        self.name = name
        self.source_fn = source_fn
        self.params: list[Value] = []
        self.captures: list[tuple[Value, object]] = []
        self._capture_ids: dict[int, Value] = {}
        self.nodes: list[Node] = []

    def param(self, aval, name=None) -> Value:
        v = Value(aval, "param", name=name)
        self.params.append(v)
        return v

    def capture(self, tensor, name=None) -> Value:
        v = self._capture_ids.get(id(tensor))
        if v is None:
            if name is None:
                name = getattr(tensor, "name", None) if hasattr(tensor, "requires_grad") else None
            v = Value(interned_aval(tensor.shape, tensor.dtype), "capture", producer=tensor, name=name)
            self._capture_ids[id(tensor)] = v
            self.captures.append((v, tensor))
        return v

    def add_node(self, op, inputs, attrs, avals, source=None) -> Node:
        """Append `op(*inputs, **attrs)`; `avals` is one aval or a tuple (a multi-output op)."""
        multi = type(avals) is tuple
        node = Node(op, inputs, attrs, (), multi, source)
        outs = avals if multi else (avals,)
        node.outputs = tuple(Value(a, "node", producer=(node, i)) for i, a in enumerate(outs))
        self.nodes.append(node)
        return node

    def add_structural(self, op, inputs, attrs, out_avals, source=None) -> Node:
        """Append a structural op (If/While/Call/HostCall); its outputs are always a tuple."""
        return self.add_node(op, inputs, attrs, tuple(out_avals), source)

    def truncate(self, n_nodes: int, n_captures: int):
        """Drop every node after the first `n_nodes` and every capture after the first `n_captures`
        (the bytecode mode rolls an instruction back this way when it turns into a graph break)."""
        del self.nodes[n_nodes:]
        for _, t in self.captures[n_captures:]:
            self._capture_ids.pop(id(t), None)
        del self.captures[n_captures:]

    def finish(self, outputs) -> Graph:
        return Graph(self.name, self.params, self.captures, self.nodes, outputs, self.source_fn)


__all__ = ["Value", "Node", "Graph", "GraphBuilder", "StructuralOp", "IF", "WHILE", "CALL", "HOST_CALL",
           "STRUCTURAL", "Slot", "OPAQUE", "OpaqueAval", "AbstractTensor"]
