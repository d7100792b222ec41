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
* `cost`     optional FLOPs/bytes rule for DryRun and benchmarks.

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


class Primitive:
    """One operation. See the module docstring for the contract."""

    __slots__ = ("name", "infer", "impl", "bprop", "cost", "kernel", "doc", "inplace_safe", "__weakref__")

    def __init__(self, name, infer, impl, bprop=None, cost=None, doc=""):
        self.name = name
        self.infer = infer
        self.impl = impl          # CPU reference kernel
        self.bprop = bprop        # None: not differentiable (outputs never carry gradients)
        self.cost = cost
        self.kernel = impl        # the current backend's kernel; rebound by minispore.backend
        self.doc = doc

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


def defprim(name, infer, impl, bprop=None, cost=None, doc=""):
    """Register a primitive. Names are unique: defining one twice is a bug."""
    if name in PRIMITIVES:
        raise RuntimeError(f"primitive '{name}' is defined twice")
    p = Primitive(name, infer, impl, bprop, cost, doc)
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


__all__ = ["Shaped", "AbstractTensor", "interned_aval", "Primitive", "PRIMITIVES", "defprim", "get_primitive", "set_executor",
           "get_executor", "abstract", "mstype"]
