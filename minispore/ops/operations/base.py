"""MindSpore's class-style operator base: `ops.Primitive`, `ops.PrimitiveWithInfer`, `prim_attr_register`.

In MindSpore an operator can be used two ways: the functional `ops.reduce_sum(x, 1, True)` and
the class `ops.ReduceSum(keep_dims=True)(x, 1)`. The class form is older and fills the model zoo:
its *constructor* takes the attributes (`keep_dims`, `transpose_b`, `axis` ...), the *call* takes
the tensors. In minispore both forms reach the **same** registry primitive (`minispore.ops.primitive`,
the one place an op is defined): a class here only validates its attributes once, at construction,
binds them, and forwards each call. It never defines an op a second time.

What an instance carries, as in MindSpore:

* `name` (the class name), `attrs` (a dict of the constructor arguments and anything added with
  `add_prim_attr`), `init_attrs` (the constructor arguments only);
* `shard(in_strategy, out_strategy)`: a parallel strategy, validated and recorded in `attrs`
  (`in_strategy`, `out_strategy`) and shown in `repr`; checked when called (one tuple of positive
  ints per tensor input, its length equal to that input's rank). It never changes a PyNative
  result: under `semi_auto_parallel` in graph mode, the call goes through `STRATEGY_SCOPE` (set by
  graph/parallel/strategies.py) while a graph is captured, and the compiler pass partitions the
  graph by it.

A user-defined op subclasses `Primitive` (or `PrimitiveWithInfer`) and gives minispore what the
registry needs, under MindSpore's names where MindSpore has them:

    class AddOne(ops.PrimitiveWithInfer):
        @ops.prim_attr_register
        def __init__(self, scale=1.0):          # every argument becomes an attribute
            pass

        def infer_shape(self, x_shape):         # MindSpore's hooks: shapes and dtypes in,
            return x_shape                      #   the output's shape and dtype out
        def infer_dtype(self, x_dtype):
            return x_dtype

        def kernel(self, x):                    # minispore: the NumPy kernel (ndarrays in and out)
            return x * self.scale + 1

        def get_bprop(self):                    # optional, MindSpore's custom-bprop convention
            def bprop(x, out, dout):            #   (inputs..., out, dout) -> one gradient per input
                return (dout * self.scale,)
            return bprop

From these the class builds (once per instance) a registry-style primitive, so the op runs in
PyNative, is recorded on the autodiff tape, and becomes a graph node under `jit` like any built-in
op. A subclass may instead write `construct(self, *inputs)` with minispore ops (a composite: its
gradient follows the ops it calls), or override `__call__` entirely.
"""
from __future__ import annotations

import functools
import inspect
import numbers

import numpy as np

from ...common import dtype as mstype
from ...common.errors import MinisporeRuntimeError, OpTypeError, OpValueError
from ...common.tensor import Tensor
from .. import primitive as _registry
from ..primitive import AbstractTensor


# ------------------------------------------------------------------------------------------------
# attribute validation (constructor arguments), raising errors that name the class
def plain_attr(v):
    """A constructor argument in the plain Python form the calls read: NumPy integer / bool / float
    scalars become int / bool / float, also inside a tuple or list (the container is kept).
    MindSpore accepts NumPy integers wherever it accepts ints; stored as they came, they would do
    NumPy-typed arithmetic in the kernels (`diagonal=np.uint8(3)` wraps around). Anything else,
    arrays included (a user-defined primitive may hold one), is unchanged."""
    t = type(v)
    if t is int or t is bool or t is float or t is str or v is None:
        return v
    if isinstance(v, np.generic):
        if isinstance(v, np.integer):
            return int(v)
        if isinstance(v, np.bool_):
            return bool(v)
        if isinstance(v, np.floating):
            return float(v)
        return v
    if t is tuple or t is list:
        if any(isinstance(a, np.generic) for a in v):
            return t(plain_attr(a) for a in v)
    return v


def check_bool(op, arg, v):
    if not isinstance(v, bool):
        raise OpTypeError(op, f"'{arg}' to be a bool", f"{type(v).__name__} {v!r}")
    return v


def check_int(op, arg, v, minimum=None):
    if not isinstance(v, numbers.Integral) or isinstance(v, bool):
        raise OpTypeError(op, f"'{arg}' to be an int", f"{type(v).__name__} {v!r}")
    if minimum is not None and v < minimum:
        raise OpValueError(op, f"'{arg}' >= {minimum}", repr(v))
    return int(v)


def check_float(op, arg, v, lo=None, hi=None, lo_open=False, hi_open=False):
    if not isinstance(v, numbers.Real) or isinstance(v, bool):
        raise OpTypeError(op, f"'{arg}' to be a float", f"{type(v).__name__} {v!r}")
    if (lo is not None and (v < lo or (lo_open and v == lo))) or \
            (hi is not None and (v > hi or (hi_open and v == hi))):
        raise OpValueError(op, f"'{arg}' in {'(' if lo_open else '['}{lo}, {hi}{')' if hi_open else ']'}", repr(v))
    return float(v)


def check_int_tuple(op, arg, v, allow_int=True):
    """An int or a tuple/list of ints -> tuple of ints."""
    if allow_int and isinstance(v, numbers.Integral) and not isinstance(v, bool):
        return (int(v),)
    if isinstance(v, (tuple, list)) and all(isinstance(a, numbers.Integral) and not isinstance(a, bool) for a in v):
        return tuple(int(a) for a in v)
    raise OpTypeError(op, f"'{arg}' to be {'an int or ' if allow_int else ''}a tuple/list of ints",
                      f"{type(v).__name__} {v!r}")


def check_one_of(op, arg, v, allowed):
    # (the type first: an ndarray answers `in` elementwise, with NumPy's "truth value is ambiguous")
    if not (v is None or isinstance(v, (str, numbers.Number, mstype.DType))) or v not in allowed:
        raise OpValueError(op, f"'{arg}' in {list(allowed)}", repr(v))
    return v


def check_dtype(op, arg, v, allowed=None):
    if not isinstance(v, mstype.DType):
        raise OpTypeError(op, f"'{arg}' to be a mindspore dtype (ms.int32, ...)", f"{type(v).__name__} {v!r}")
    if allowed is not None and v not in allowed:
        raise OpTypeError(op, f"'{arg}' in {[str(d) for d in allowed]}", str(v))
    return v


# ------------------------------------------------------------------------------------------------
# shard strategies
def _check_strategy(op, what, strategy):
    """A strategy is a tuple with one tuple of positive ints per tensor input (or output)."""
    if not isinstance(strategy, tuple):
        raise OpTypeError(op, f"'{what}' to be a tuple of tuples of ints", f"{type(strategy).__name__} {strategy!r}")
    for item in strategy:
        if not isinstance(item, tuple):
            raise OpTypeError(op, f"each entry of '{what}' to be a tuple of ints", f"{type(item).__name__} {item!r}")
        for n in item:
            if not isinstance(n, numbers.Integral) or isinstance(n, bool):
                raise OpTypeError(op, f"the values of '{what}' to be ints", f"{type(n).__name__} {n!r} in {strategy}")
            if n < 1:
                raise OpValueError(op, f"the values of '{what}' to be positive (how many devices split a "
                                       f"dimension)", f"{n} in {strategy}")
    return strategy


def _tensor_inputs(args):
    """The tensor inputs of a call, in order (a Concat's tuple of tensors counts tensor by tensor)."""
    out = []
    for a in args:
        if isinstance(a, (Tensor, AbstractTensor)):
            out.append(a)
        elif isinstance(a, (tuple, list)):
            out.extend(x for x in a if isinstance(x, (Tensor, AbstractTensor)))
    return out


_SHARDED_CLASSES: dict = {}

# set by graph/parallel/strategies.py (ops/ cannot import graph/): `scope(prim, call, args, kwargs)`
# wraps a sharded op's call, so that a capture records which graph values its strategy is about
STRATEGY_SCOPE = [None]


def _sharded_class(cls):
    """The subclass a primitive becomes once `shard` is called: its `__call__` first checks the
    strategy against the inputs. Swapping the class (instead of an `if` in every `__call__`) keeps
    the unsharded call path free of the check."""
    sub = _SHARDED_CLASSES.get(cls)
    if sub is None:
        def __call__(self, *args, **kwargs):
            self._check_strategy_ranks(args)
            scope = STRATEGY_SCOPE[0]
            if scope is not None:
                return scope(self, cls.__call__, args, kwargs)
            return cls.__call__(self, *args, **kwargs)
        sub = type(cls.__name__, (cls,), {"__call__": __call__, "__module__": cls.__module__,
                                          "__qualname__": cls.__qualname__, "_sharded": True})
        _SHARDED_CLASSES[cls] = sub
    return sub


# ------------------------------------------------------------------------------------------------
class Primitive:
    """The base of every class-style operator (MindSpore's `mindspore.ops.Primitive`).

    `Primitive(name)` makes a bare primitive; subclasses usually decorate their `__init__` with
    `prim_attr_register`, which calls this with the class name and records the arguments."""

    _sharded = False
    _repr_ignore = ("input_names", "output_names")

    def __init__(self, name):
        if not isinstance(name, str):
            raise OpTypeError("Primitive", "'name' to be a str", f"{type(name).__name__} {name!r}")
        self.name = name
        self.attrs = {}
        self.init_attrs = {}

    # -- attributes --------------------------------------------------------------------------------
    def add_prim_attr(self, name, value):
        """Set attribute `name` (also readable as `self.<name>`); returns self, as MindSpore."""
        self.__dict__[name] = value
        self.attrs[name] = value
        return self

    def del_prim_attr(self, name):
        if name in self.attrs:
            del self.attrs[name]
            self.__dict__.pop(name, None)
        return self

    def init_prim_io_names(self, inputs, outputs):
        self.add_prim_attr("input_names", list(inputs))
        self.add_prim_attr("output_names", list(outputs))

    def set_device(self, device_target):
        return self.add_prim_attr("primitive_target", device_target)

    def set_stage(self, stage):
        return self.add_prim_attr("stage", check_int(self.name, "stage", stage, minimum=0))

    def recompute(self, mode=True):
        """Recorded for graph mode (minispore's jit does not recompute yet); returns self."""
        return self.add_prim_attr("recompute", check_bool(self.name, "mode", mode))

    def set_prim_instance_name(self, instance_name):
        self.instance_name = instance_name
        return self

    def check_elim(self, *args):
        return (False, None)

    @property
    def update_parameter(self):
        return False

    # -- parallel strategy -------------------------------------------------------------------------
    def shard(self, in_strategy=None, out_strategy=None):
        """Record how each input (and output) is split across devices, e.g. for `MatMul`
        `shard(((2, 1), (1, 4)))`. Validated here; the ranks are checked against the inputs on
        each call. Returns self."""
        if in_strategy is None and out_strategy is None:
            return self
        if in_strategy is None:
            raise OpValueError(self.name, "'in_strategy' when 'out_strategy' is set", "in_strategy=None")
        _check_strategy(self.name, "in_strategy", in_strategy)
        if out_strategy is not None:
            _check_strategy(self.name, "out_strategy", out_strategy)
        self.add_prim_attr("in_strategy", in_strategy)
        if out_strategy is not None:
            self.add_prim_attr("out_strategy", out_strategy)
        if not type(self)._sharded:
            self.__class__ = _sharded_class(type(self))
        return self

    def _check_strategy_ranks(self, args):
        strategy = self.attrs.get("in_strategy")
        if strategy is None:
            return
        tensors = _tensor_inputs(args)
        if len(strategy) != len(tensors):
            raise OpValueError(self.name, f"one in_strategy entry per tensor input ({len(tensors)})",
                               f"{len(strategy)} entries in {strategy}")
        for i, (s, t) in enumerate(zip(strategy, tensors)):
            if len(s) != len(t.shape):
                raise OpValueError(self.name, f"in_strategy[{i}] to have one entry per dimension of input {i} "
                                              f"(rank {len(t.shape)})", f"{s}")

    # -- calling -----------------------------------------------------------------------------------
    def __call__(self, *args):
        """A user-defined op: run its `construct` (minispore ops) or its `kernel` (NumPy, through a
        registry-style primitive built on first use). Built-in classes override this."""
        construct = getattr(type(self), "construct", None)
        if construct is not None:
            self._check_inputs(args)
            return construct(self, *args)
        if getattr(type(self), "kernel", None) is None:
            raise MinisporeRuntimeError(
                f"For '{self.name}', a class-style primitive needs a kernel(self, *arrays) (NumPy), a "
                f"construct(self, *inputs) (minispore ops) or its own __call__; it has none")
        prim = self.__dict__.get("_registry_prim")
        if prim is None:
            prim = self.__dict__["_registry_prim"] = _registry.Primitive(
                self.name, self._infer, self.kernel, self._bprop_rule(), None, type(self).__doc__ or "")
        return prim(*args)

    def _check_inputs(self, args):
        """Before a composite construct runs: let the user's inference rules reject bad input."""
        if type(self).infer_shape is not Primitive.infer_shape or type(self).infer_dtype is not Primitive.infer_dtype:
            self._infer(*args)

    def _infer(self, *inputs):
        """The registry's infer rule, from MindSpore's hooks: `infer_shape(*shapes)` and
        `infer_dtype(*dtypes)` (a non-tensor input is passed as itself to both)."""
        shapes = [list(x.shape) if isinstance(x, (Tensor, AbstractTensor)) else x for x in inputs]
        dtypes = [x.dtype if isinstance(x, (Tensor, AbstractTensor)) else x for x in inputs]
        try:
            shape = self.infer_shape(*shapes)
            dtype = self.infer_dtype(*dtypes)
        except (OpTypeError, OpValueError):
            raise
        except (TypeError, ValueError) as e:       # a user's infer hook raised a plain error
            cls = OpTypeError if isinstance(e, TypeError) else OpValueError
            raise cls(self.name, "inputs its infer_shape/infer_dtype accept", f"{type(e).__name__}: {e}") from e
        return _abstract_out(self.name, shape, dtype)

    def infer_shape(self, *shapes):
        """Default: the output has the first input's shape (override for anything else)."""
        if not shapes:
            raise OpValueError(self.name, "infer_shape to be defined for an op without inputs", "no inputs")
        return shapes[0]

    def infer_dtype(self, *dtypes):
        if not dtypes:
            raise OpValueError(self.name, "infer_dtype to be defined for an op without inputs", "no inputs")
        return dtypes[0]

    def _bprop_rule(self):
        """Adapt MindSpore's custom bprop `(inputs..., out, dout) -> grads` to the registry's
        `bprop(inputs, out, dout)`; None (not differentiable) without `get_bprop`."""
        get = getattr(self, "get_bprop", None)
        user = get() if get is not None else None
        if user is None:
            return None
        name = self.name

        def bprop(inputs, out, dout):
            grads = user(*inputs, out, dout)
            if not isinstance(grads, (tuple, list)):
                grads = (grads,)
            if len(grads) != len(inputs):
                raise OpValueError(name, f"bprop to return {len(inputs)} gradients (one per input)",
                                   f"{len(grads)}")
            return tuple(g if isinstance(g, Tensor) else None for g in grads)
        return bprop

    # -- printing / copying ------------------------------------------------------------------------
    def __repr__(self):
        attr = ", ".join(f"{k}={v}" for k, v in self.attrs.items() if k not in self._repr_ignore)
        return f"Prim[{self.name}]" + (f"<{attr}>" if attr else "")

    def __deepcopy__(self, memo):
        clone = type(self).__new__(type(self))
        clone.__dict__.update({k: v for k, v in self.__dict__.items() if k != "_registry_prim"})
        clone.attrs = dict(self.attrs)
        clone.init_attrs = dict(self.init_attrs)
        return clone


class PrimitiveWithInfer(Primitive):
    """MindSpore's `PrimitiveWithInfer`: a Primitive whose output shape and dtype come from
    `infer_shape` / `infer_dtype` (see the module docstring)."""


class PrimitiveWithCheck(Primitive):
    """MindSpore's `PrimitiveWithCheck`: `check_shape(*shapes)` / `check_dtype(*dtypes)` validate
    the inputs; the output is the first input's shape and dtype unless `infer_shape` / `infer_dtype`
    say otherwise."""

    def _infer(self, *inputs):
        shapes = [list(x.shape) if isinstance(x, (Tensor, AbstractTensor)) else x for x in inputs]
        dtypes = [x.dtype if isinstance(x, (Tensor, AbstractTensor)) else x for x in inputs]
        check_shape = getattr(self, "check_shape", None)
        check_dtype_ = getattr(self, "check_dtype", None)
        if check_shape is not None:
            check_shape(*shapes)
        if check_dtype_ is not None:
            check_dtype_(*dtypes)
        return Primitive._infer(self, *inputs)


def _abstract_out(op, shape, dtype):
    """AbstractTensor(s) from a user's (shape, dtype) answer; a tuple of shapes means several outputs."""
    def one(s, d):
        if not isinstance(s, (tuple, list)) or not all(isinstance(n, numbers.Integral) for n in s):
            raise OpValueError(op, "infer_shape to return a shape (a tuple/list of ints)", repr(s))
        if not isinstance(d, mstype.DType):
            raise OpTypeError(op, "infer_dtype to return a mindspore dtype", repr(d))
        return AbstractTensor(tuple(int(n) for n in s), d)
    if isinstance(shape, (tuple, list)) and shape and all(isinstance(s, (tuple, list)) for s in shape):
        dtypes = dtype if isinstance(dtype, (tuple, list)) else (dtype,) * len(shape)
        if len(dtypes) != len(shape):
            raise OpValueError(op, f"{len(shape)} output dtypes (one per output shape)", repr(dtype))
        return tuple(one(s, d) for s, d in zip(shape, dtypes))
    return one(shape, dtype)


# ------------------------------------------------------------------------------------------------
def prim_attr_register(fn):
    """Decorate a primitive's `__init__`: name the primitive after its class and record every
    constructor argument (defaults included) as an attribute, before the body runs (MindSpore's
    decorator of the same name)."""
    sig = inspect.signature(fn)                  # once, at class definition

    @functools.wraps(fn)
    def deco(self, *args, **kwargs):
        name = getattr(type(self), "substitute_name", type(self).__name__)
        Primitive.__init__(self, name)
        try:
            bound = sig.bind(self, *args, **kwargs)
        except TypeError as e:
            raise OpTypeError(name, f"arguments matching {name}{str(sig).replace('(self, ', '(').replace('(self)', '()')}",
                              str(e)) from None
        bound.apply_defaults()
        for k, v in list(bound.arguments.items())[1:]:
            kind = sig.parameters[k].kind
            if kind is inspect.Parameter.VAR_KEYWORD:
                v = bound.arguments[k] = {kk: plain_attr(vv) for kk, vv in v.items()}
                for kk, vv in v.items():
                    self.add_prim_attr(kk, vv)
                    self.init_attrs[kk] = vv
                continue
            if kind is inspect.Parameter.VAR_POSITIONAL:
                v = bound.arguments[k] = tuple(plain_attr(a) for a in v)
            else:
                v = bound.arguments[k] = plain_attr(v)
            self.add_prim_attr(k, v)
            self.init_attrs[k] = v
        fn(*bound.args, **bound.kwargs)         # the body sees the plain values too
    deco.decorated_func = fn
    return deco


__all__ = ["Primitive", "PrimitiveWithInfer", "PrimitiveWithCheck", "prim_attr_register"]
