"""The primitive registry — the one place an operation is defined (ARCHITECTURE.md §1).

A `Primitive` bundles:

* `name`     MindSpore-style op name ("add", "matmul", "softmax", ...),
* `infer`    shape/dtype inference: `infer(*inputs, **attrs) -> AbstractTensor | tuple[AbstractTensor]`.
             It reads only `.shape` / `.dtype` of its tensor inputs, so it runs unchanged on real
             Tensors (PyNative, to reject bad input *before* any kernel runs), on abstract values
             (graph capture) and in DryRun.
* `impl`     the CPU reference kernel: NumPy arrays in, NumPy array(s) out.
* `bprop`    the backward rule, written with minispore ops so it is itself differentiable:
             `bprop(inputs, out, dout, **attrs) -> tuple` with one gradient (or None) per input.

and everything the rest of the framework needs to know about the op, so that adding an op touches
its definition, its CPU kernel and its op-table entry and nothing else (no module outside the op
families keeps a table of primitive names; tests/ops/test_primitive_facts.py checks it):

* `cost`       `cost(ins, outs, attrs) -> dict`: FLOPs, matrix-unit FLOPs, bytes read and written
               (DryRun's roofline, benchmarks). The constructors are in ops/costs.py. None: one
               FLOP per output element, bytes = tensor inputs + outputs.
* `view`       a `View` when the CPU kernel returns a NumPy *view* of input 0 instead of new memory
               (reshape, transpose, split ...): its kind and how to take the same view (memory
               planning aliases the output onto the input; rematerialization recomputes it). None:
               the output is new memory.
* `fusion`     a `FusionRule` (ops/c_expr.py) when operator fusion (jit_level O1) may inline the op
               into a generated loop: its C expression, or how a reduction accumulates. None: never fused.
* `into`       `into(out, *inputs, **attrs)`: the CPU kernel writing its result into a given
               ndarray `out` (matmul's BLAS call with `out=`), so a whole-graph executor (O2) can
               hand it the planned buffer instead of copying the result there. NumPy ufuncs need
               none (they take `out=` themselves). None: the executor copies.
* `inplace`    `{output index: input index}` when the kernel writes that output into the input's
               bytes (a fused optimizer update); memory planning then gives both one buffer.
* `random`     the kernel draws from the global generator: the op keeps its program position (no
               reordering across streams, no dead-code or common-subexpression removal by value).
* `from_shape` for an op whose output depends only on its input's shape and dtype (`zeros_like`):
               the name of the primitive that makes the same value from a shape (`zeros`).
* `sharding`   `sharding(name, ins, outs, layouts, attrs) -> ShardingResult`: how the op propagates
               tensor layouts in semi-auto parallel: from one `TensorLayout` per tensor input (None
               for the others) to the output layouts, plus the input layouts it requires where it
               cannot consume the given ones (ops/sharding.py; the rules are in ops/sharding_rules.py).
               None: no rule (the distributed engine replicates the op's inputs).
* `collective` the kernel communicates with the other processes of a group (all_reduce, send ...):
               every rank must issue the same collectives in the same order, so like a `random` op
               it keeps its program position (no reordering across streams, no dead-code removal,
               no constant folding, no fusion or recomputation).

Calling a primitive hands it to the current *executor* (an interpreter over primitives, as in
JAX): the eager executor runs kernels, graph capture records nodes. Layers above install the
executor; this module knows nothing about them.
"""
from __future__ import annotations

from ..common import dtype as mstype


class Shaped:
    """`ndim` and `size` from a `shape` tuple (abstract tensors, a tracer's symbolic storage)."""

    __slots__ = ()

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        n = 1
        for s in self.shape:
            n *= s
        return n


class AbstractTensor(Shaped):
    """What inference knows about a tensor: its shape and dtype, no data."""

    __slots__ = ("shape", "dtype")

    def __init__(self, shape, dtype):
        self.shape = tuple(shape)
        self.dtype = dtype

    @property
    def nbytes(self) -> int:
        """Bytes of a dense tensor of this shape and dtype (what a buffer for it holds)."""
        return self.size * self.dtype.np.itemsize

    def __eq__(self, other):
        return isinstance(other, AbstractTensor) and self.shape == other.shape and self.dtype is other.dtype

    def __hash__(self):
        return hash((self.shape, self.dtype.name))

    def __repr__(self):
        return f"AbstractTensor(shape={self.shape}, dtype={self.dtype})"


_INTERNED: dict = {}


def interned_aval(shape, dtype) -> AbstractTensor:
    """One shared AbstractTensor per (shape, dtype) (avals are never mutated). Graph builders use it
    for captures and params, so comparing two graphs' signatures - a lazy_inline layer's CALL
    against its callee, 32 times - mostly meets the same objects (an identity test)."""
    key = (tuple(shape), dtype)
    a = _INTERNED.get(key)
    if a is None:
        if len(_INTERNED) > 65536:          # (shapes seen by a long-lived process: keep it bounded)
            _INTERNED.clear()
        a = _INTERNED[key] = AbstractTensor(key[0], dtype)
    return a


class View:
    """How a kernel's output aliases input 0 (`Primitive.view`).

    `kind` says what the view is, which is what the passes that read it need to know:

    * "reinterpret" the same elements in the same order, another shape (reshape, squeeze ...): free
                    on every device;
    * "broadcast"   input 0 repeated by zero strides (broadcast_to): free on every device;
    * "permute"     the elements reordered by strides (transpose): free for NumPy, a copy on a
                    device unless its consumer takes transposed operands (a GEMM's trans_a/b);
    * "slice"       part of input 0 (split, basic getitem).

    `take(x, outs, attrs)` returns the same view of the ndarray `x` using only operations that never
    copy (memory planning calls it on a header over one fake byte, so it must not read data), as a
    tuple with one array per output, or None where the kernel would copy for these attrs; `outs`
    are the output avals."""

    __slots__ = ("kind", "take")
    KINDS = ("reinterpret", "broadcast", "permute", "slice")

    def __init__(self, kind, take):
        if kind not in self.KINDS:
            raise ValueError(f"View kind must be one of {self.KINDS}, got {kind!r}")
        self.kind, self.take = kind, take

    def __repr__(self):
        return f"View({self.kind})"


class Primitive:
    """One operation. See the module docstring for the contract."""

    __slots__ = ("name", "infer", "impl", "bprop", "cost", "kernel", "doc", "view", "fusion", "into", "inplace",
                 "random", "from_shape", "sharding", "collective", "__weakref__")

    def __init__(self, name, infer, impl, bprop=None, cost=None, doc="", *, view=None, fusion=None, into=None, inplace=None,
                 random=False, from_shape=None, sharding=None, collective=False):
        self.name = name
        self.infer = infer
        self.impl = impl          # CPU reference kernel
        self.bprop = bprop        # None: not differentiable (outputs never carry gradients)
        self.cost = cost
        self.kernel = impl        # the current backend's kernel; rebound by minispore.backend
        self.doc = doc
        self.view = view
        self.fusion = fusion
        self.into = into
        self.inplace = dict(inplace) if inplace else None
        self.random = random
        self.from_shape = from_shape
        self.sharding = sharding
        self.collective = collective

    def __call__(self, *inputs, **attrs):
        return _state.executor(self, inputs, attrs)

    def __repr__(self):
        return f"Primitive({self.name})"


class _ExecState:
    executor = None           # installed by minispore.backend.dispatch (eager) or graph capture


_state = _ExecState()
PRIMITIVES: dict[str, Primitive] = {}


def set_executor(fn):
    """Install `fn(prim, inputs, attrs)` as the interpreter for primitive calls; returns the old one."""
    old = _state.executor
    _state.executor = fn
    return old


def get_executor():
    return _state.executor


def defprim(name, infer, impl, bprop=None, cost=None, doc="", **facts):
    """Register a primitive. Names are unique: defining one twice is a bug. `facts`: the keyword
    facts of `Primitive` (view, fusion, into, inplace, random, from_shape, sharding, collective)."""
    if name in PRIMITIVES:
        raise RuntimeError(f"primitive '{name}' is defined twice")
    p = Primitive(name, infer, impl, bprop, cost, doc, **facts)
    PRIMITIVES[name] = p
    return p


def get_primitive(name: str) -> Primitive:
    return PRIMITIVES[name]


def abstract(x):
    """AbstractTensor of a Tensor/AbstractTensor; Python scalars pass through."""
    if isinstance(x, AbstractTensor):
        return x
    if hasattr(x, "_data"):
        return AbstractTensor(x.shape, x.dtype)
    return x


__all__ = ["Shaped", "AbstractTensor", "View", "interned_aval", "Primitive", "PRIMITIVES", "defprim", "get_primitive", "set_executor",
           "get_executor", "abstract", "mstype"]
