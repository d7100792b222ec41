"""A deterministic fuzzer over every public entry point that takes user input (issue 12 §4).

`fuzz_ops(n_calls, seed)` calls public callables with randomly drawn, mostly plausible but often
wrong arguments and sorts each outcome:

* **ok**: the call returned;
* **clean_errors**: it raised a minispore error with minispore's own message ("For 'op',
  expected ..., but got ...", or another minispore message such as MemoryLimitError's);
* **wrapped_numpy**: it raised a minispore error whose text is NumPy's or Python's (the safety
  net in `backend/dispatch.py` that wraps an exception an inference rule let through, or an error
  built from the text of the exception it replaced) - a missing check in some inference rule;
* **raw**: anything else escaped (IndexError, MemoryError, numpy.AxisError ...);
* **hangs**: the call ran past the per-call alarm.

The targets are the functional ops (`minispore.ops`), `mint` and `mint.nn.functional`, every
Tensor method, property and operator, the Tensor constructor, and the class-style primitives of
`minispore.ops.operations` (built with drawn attributes, then called). Functions with side effects
outside their arguments (printing, files, global settings) are listed in `SKIPPED` with the reason.

Arguments are drawn by parameter name (`axis` gets axis-like values, `shape` shape-like ones,
`dtype` dtypes ...) with a share of arbitrary values from the whole pool, so calls get past the
first type check often enough to reach the deeper paths. The pools hold what users actually pass
and what breaks naive code: 0-d and empty tensors, NaN/inf and huge values, bool tensors, NumPy
integer scalars (`np.int64(1)`, what indexing an array gives), integer arrays as shapes and axes,
None, strings, negative and huge ints (as sizes too: an op must refuse a huge size before it
allocates). No tensor the fuzzer builds has more than a few dozen elements.

Everything draws from one seeded `numpy.random.Generator`, so a (seed, n_calls) pair always makes
the same calls; the global random state (`ms.set_seed`'s generator) is restored afterwards.
"""
from __future__ import annotations

import contextlib
import inspect
import os
import signal
import threading
import time
import warnings

import numpy as np

import minispore as ms
from minispore.common import context
from minispore.common import dtype as mstype
from minispore.common.errors import MinisporeError
from minispore.common.tensor import Tensor

# A call taking longer counts as a hang. Generous: an op may legitimately build an output of tens of
# MB from a large size argument, and the machine running the fuzz may be busy.
PER_CALL_TIMEOUT_S = 10.0
# While fuzzing, a request for more than this much memory is refused by `memory_limit.check_fits`
# (the env var it reads); an op that allocates without asking shows up as a raw MemoryError.
FUZZ_MEMORY_LIMIT = "256M"
# ... and quickly: the process's address space is capped this far above what it uses at the start
# (RLIMIT_AS), so an unchecked multi-gigabyte allocation fails at once instead of paging in
# gigabytes (which no per-call alarm can interrupt: the time is spent inside one C call).
FUZZ_ADDRESS_SPACE_HEADROOM = 3 << 30
MAX_EXAMPLES = 20

# Public callables the fuzzer leaves alone, with the reason.
SKIPPED = {
    "ops.print_": "prints its arguments (output, not a computation)",
    "P.Print": "prints its arguments (output, not a computation)",
    "P.Custom": "compiles or imports user code named by its arguments (aot / pyfunc files)",
    "Tensor.__iter__": "a generator: iterating is what the fuzzer does with __getitem__",
    "Tensor.__init__": "fuzzed as the Tensor constructor (target 'Tensor')",
    "Tensor.__reduce__": "pickling protocol, not a user call",
    "Tensor.__deepcopy__": "copy protocol (takes a memo dict), not a user call",
}


# -- value pools ---------------------------------------------------------------------------------
_TENSOR_DTYPES = [np.float32] * 4 + [np.float16, np.float64, ms.bfloat16.np, np.int32, np.int64, np.int64,
                                     np.int8, np.uint8, np.bool_, np.bool_]
_SHAPES = [(), (), (0,), (0, 3), (2, 0, 3), (1,), (3,), (4,), (2, 3), (2, 3), (3, 3), (1, 3), (2, 1),
           (3, 1), (2, 3, 4), (2, 2, 3, 3), (1, 2, 4, 4), (2, 1, 3), (2, 2, 2, 2, 2)]
_HUGE_INTS = [10**12, 2**40, 2**63, -(2**63) - 1, 10**30, np.int64(10**12)]
_INTS = [0, 1, 2, 3, -1, -2, 4, 5, -5, 10**12, 2**31, np.int64(1), np.int64(0), np.int32(2), np.int64(-1),
         np.uint8(3), np.int64(10**12), True, False, 1.0, 2.5, float("nan"), None]
_NUMBERS = [0, 1, -1, 2, 0.5, 1.5, -0.5, 1e-8, 0.0, float("nan"), float("inf"), float("-inf"), 1e300, 1e-300,
            1e38, 10**12, 2**63, True, False, np.int64(1), np.float32(0.5), np.float64("nan"), np.float16("inf"),
            np.bool_(True), 1j, None]
_SHAPE_LIKES = [(), (0,), (1,), (2,), (3,), (6,), (2, 3), (3, 2), (1, 6), (-1,), (-1, 2), (1, -1), (0, 3),
                (1, 1), (1, 2, 3), (2, 3, 1), (2, 2, 2, 2), [2, 3], [6], np.array([2, 3]), np.array([3, 2]),
                np.array([-1]), np.array(2), np.array([6]), (np.int64(2), np.int64(3)), (np.int32(6),),
                (10**12,), (10**6, 10**6), (2**40, 2**40), (2**63,), (1.5, 2), (True, 3), ("a",),
                np.array([2.0, 3.0]), np.array([True, False]), np.zeros((2, 2), np.int64), -5, 0, 1, 2, 3,
                10**12, np.int64(2), None, (2, None), [[2, 3]], (1, 1, 1, 1), (0, 0, 1, 1), (1, 2, 3, 4)]
_AXES = [0, 1, -1, 2, -2, 3, 5, -5, None, (), (0,), (0, 1), (1, 0), (-1,), (0, 0), [0, 1], [-1],
         np.int64(0), np.int64(-1), np.int32(1), np.array([0, 1]), np.array(0), np.array([0.0]), 1.0, True,
         np.bool_(False), 10**12, -(10**12), (10**12,), "0", (0, "a")]
_DTYPES = [ms.float32, ms.float16, ms.float64, ms.bfloat16, ms.int32, ms.int64, ms.int8, ms.uint8, ms.bool_,
           "float32", "int64", np.float32, np.dtype("int64"), "not_a_dtype", float, int, bool, None, 3]
_BOOLS = [True, False, True, False, np.bool_(True), 1, 0, None, "True", 2]
_STRINGS = ["mean", "sum", "none", "", "x", "C", "F", "nearest", "bilinear", "linear", "bicubic", "constant",
            "reflect", "replicate", "circular", "same", "valid", "left", "right", "ij", "xy", "fro", "nuc",
            "ii->i", "ij,jk->ik", "ij->ji", "...", "float32", "reduced", "complete", "BSH", "BNSD", "tanh",
            "batchmean", "NCHW", "NHWC"]
_INDEXES = [0, -1, 1, 5, -7, slice(None), slice(0, 2), slice(None, None, -1), slice(1, None, 0), None,
            Ellipsis, True, False, (0, 1), (slice(None), 0), (Ellipsis, None), (0, 0, 0, 0, 0), [0, 1],
            [True, False], [[0, 1]], np.array([0, 1]), np.array([True, False, True]), np.int64(1), 1.5,
            (None, Ellipsis, None), (Ellipsis, Ellipsis), "a", 10**12, [], ()]
_MISC = [None, object(), Ellipsis, slice(None), [1, [2]], [], [[1, 2], [3, 4]], {"a": 1}, b"x", 1j, "x",
         (1, 2), [1.5, 2.5], (), np.array([1.0, 2.0]), np.array([[1, 2]]), np.array(3.0),
         np.array(["a"]), np.array([1 + 2j]), np.float64(2.0)]

# the non-tensor pools by kind (the hypothesis tests in tests/ops draw from these too)
VALUE_POOLS = {"int": _INTS, "number": _NUMBERS, "shape": _SHAPE_LIKES, "axis": _AXES, "dtype": _DTYPES,
               "bool": _BOOLS, "string": _STRINGS, "index": _INDEXES, "huge": _HUGE_INTS, "misc": _MISC}

# parameter names -> the kind of value drawn for them (anything unlisted goes by its default)
_NAME_KINDS = {
    "axis": "axis", "dim": "axis", "dims": "axis", "axes": "axis", "start_dim": "axis", "end_dim": "axis",
    "dim0": "axis", "dim1": "axis", "dim2": "axis", "source": "axis", "destination": "axis",
    "batch_dims": "int", "axis1": "axis", "axis2": "axis", "start_axis": "axis", "end_axis": "axis",
    "shape": "shape", "size": "shape", "sizes": "shape", "output_size": "shape", "repeats": "shape",
    "multiples": "shape", "reps": "shape", "kernel_size": "shape", "stride": "shape", "strides": "shape",
    "padding": "shape", "dilation": "shape", "new_shape": "shape", "out_shape": "shape", "perm": "shape",
    "input_perm": "shape", "paddings": "shape", "pad": "shape", "split_size_or_sections": "shape",
    "sections": "shape", "indices_or_sections": "shape", "output_padding": "shape", "begin": "shape",
    "end": "number", "shifts": "shape", "scale_factor": "number", "split_size": "shape",
    "dtype": "dtype", "out_dtype": "dtype", "dst_type": "dtype", "type": "dtype",
    "keepdim": "bool", "keepdims": "bool", "keep_dims": "bool", "descending": "bool", "stable": "bool",
    "sorted": "bool", "largest": "bool", "transpose_a": "bool", "transpose_b": "bool", "training": "bool",
    "inplace": "bool", "return_indices": "bool", "ceil_mode": "bool", "count_include_pad": "bool",
    "align_corners": "bool", "right": "bool", "upper": "bool", "unbiased": "bool", "exclusive": "bool",
    "reverse": "bool", "adjoint": "bool", "return_inverse": "bool", "return_counts": "bool",
    "input": "tensor", "x": "tensor", "other": "tensor", "y": "tensor", "tensor": "tensor", "a": "tensor",
    "b": "tensor", "weight": "tensor", "bias": "tensor", "target": "tensor", "logits": "tensor",
    "labels": "tensor", "mask": "tensor", "src": "tensor", "updates": "tensor", "condition": "tensor",
    "query": "tensor", "key": "tensor", "values": "tensor", "mat1": "tensor", "mat2": "tensor",
    "vec": "tensor", "vec1": "tensor", "vec2": "tensor", "input_x": "tensor", "x1": "tensor", "x2": "tensor",
    "index": "index_tensor", "indices": "index_tensor", "input_indices": "index_tensor",
    "reduction": "string", "mode": "string", "padding_mode": "string", "equation": "string",
    "order": "string", "format": "string", "input_layout": "string", "approximate": "string",
    "side": "string", "indexing": "string", "data_format": "string", "pad_mode": "string",
    "p": "number", "eps": "number", "epsilon": "number", "alpha": "number", "beta": "number",
    "gamma": "number", "lambd": "number", "negative_slope": "number", "min": "number", "max": "number",
    "threshold": "number", "momentum": "number", "margin": "number", "scale": "number", "start": "number",
    "step": "number", "fill_value": "number", "lower": "number", "value": "number", "rate": "number",
    "keep_prob": "number", "delta": "number", "weight_decay": "number", "rtol": "number", "atol": "number",
    "nan": "number", "posinf": "number", "neginf": "number", "base": "number", "exponent": "number",
    "num": "int", "steps": "int", "n": "int", "k": "int", "num_classes": "int", "depth": "int",
    "diagonal": "int", "offset": "int", "seed": "int", "seed2": "int", "num_samples": "int",
    "chunks": "int", "groups": "int", "N": "int", "row": "int", "col": "int", "m": "int",
    "num_heads": "int", "head_num": "int", "bins": "int", "minlength": "int", "ddof": "int",
    "correction": "int", "maxlen": "int", "upscale_factor": "int", "downscale_factor": "int",
    "length": "int", "r": "int", "rep": "int", "num_groups": "int", "padding_idx": "int",
    "ignore_index": "int", "num_segments": "int", "ord": "number",
}


class _Draw:
    """Draws argument values from the pools with one seeded generator."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        self.theme_shape, self.theme_dtype = (2, 3), np.float32

    def pick(self, pool):
        return pool[int(self.rng.integers(len(pool)))]

    def new_call(self):
        """Each call has a 'theme' shape and dtype that most of its tensors share, so elementwise
        and binary ops often get compatible operands and reach their kernels."""
        self.theme_shape, self.theme_dtype = self.pick(_SHAPES), self.pick(_TENSOR_DTYPES)

    def array(self, shape=None, dtype=None, small_ints=False):
        r = self.rng
        shape = self.pick(_SHAPES) if shape is None else shape
        dtype = self.pick(_TENSOR_DTYPES) if dtype is None else dtype
        n = int(np.prod(shape))
        mode = r.integers(8)
        if small_ints or mode == 0:
            vals = r.integers(0, 3, n).astype(np.float64)
        elif mode == 1:                                   # NaN / inf sprinkled in
            vals = r.standard_normal(n)
            vals[r.random(n) < 0.4] = self.pick([np.nan, np.inf, -np.inf])
        elif mode == 2:                                   # huge magnitudes (overflow in float16)
            vals = r.choice([1e30, -1e30, 7e4, 3e38, 1e300], n)
        elif mode == 3:
            vals = r.integers(-4, 5, n).astype(np.float64)
        elif mode == 4:
            vals = np.zeros(n)
        else:
            vals = r.standard_normal(n) * 2
        vals = vals.reshape(shape)
        d = np.dtype(dtype)
        if d.kind == "b":
            return vals > 0.5
        if d.kind in "iu":
            info = np.iinfo(d)
            if mode == 2:
                vals = np.where(vals > 0, info.max, info.min)
            return np.clip(np.nan_to_num(vals, nan=0, posinf=info.max, neginf=info.min), info.min, info.max).astype(d)
        with np.errstate(over="ignore", invalid="ignore"):
            return vals.astype(d)

    def tensor(self, small_ints=False):
        r = self.rng
        if r.random() < 0.55:
            arr = self.array(self.theme_shape, self.theme_dtype, small_ints)
        else:
            arr = self.array(small_ints=small_ints)
        t = Tensor(arr)
        if arr.ndim >= 2 and r.random() < 0.1:           # a non-contiguous view
            t = t.swapaxes(0, 1)
        return t

    def index_tensor(self):
        r = self.rng
        shape = self.theme_shape if r.random() < 0.5 else self.pick(_SHAPES)
        dtype = self.pick([np.int64, np.int64, np.int32, np.bool_, np.float32, np.uint8])
        return Tensor(self.array(shape, dtype, small_ints=r.random() < 0.8))

    def tensor_list(self):
        n = int(self.rng.integers(0, 4))
        items = [self.tensor() for _ in range(n)]
        if self.rng.random() < 0.15:
            items.append(self.anything())
        return items if self.rng.random() < 0.5 else tuple(items)

    def anything(self):
        k = self.pick(["tensor", "tensor", "tensor", "int", "number", "shape", "axis", "dtype", "bool", "string",
                       "misc", "index", "huge", "tensors"])
        return self.value(k)

    def value(self, kind):
        r = self.rng
        if r.random() < 0.12 and kind != "any":           # the wrong kind of value, anywhere
            return self.anything()
        if kind == "tensor":
            return self.tensor()
        if kind == "index_tensor":
            return self.index_tensor() if r.random() < 0.85 else self.tensor()
        if kind == "tensors":
            return self.tensor_list()
        if kind == "int":
            return self.pick(_INTS) if r.random() < 0.85 else Tensor(np.int64(self.pick([0, 1, 2, -1])))
        if kind == "number":
            if r.random() < 0.15:
                return Tensor(self.array((), self.pick(_TENSOR_DTYPES)))
            return self.pick(_NUMBERS)
        if kind == "shape":
            return self.pick(_SHAPE_LIKES)
        if kind == "axis":
            return self.pick(_AXES)
        if kind == "dtype":
            return self.pick(_DTYPES)
        if kind == "bool":
            return self.pick(_BOOLS)
        if kind == "string":
            return self.pick(_STRINGS)
        if kind == "index":
            if r.random() < 0.3:
                return self.index_tensor()
            return self.pick(_INDEXES)
        if kind == "huge":
            return self.pick(_HUGE_INTS)
        if kind == "misc":
            return self.pick(_MISC)
        return self.anything()


# -- targets -------------------------------------------------------------------------------------
class _Target:
    """One public callable: how to call it and which arguments its signature takes."""

    __slots__ = ("name", "fn", "params", "varargs", "self_tensor", "kind", "ctor_params", "ctor_varargs")

    def __init__(self, name, fn, kind="function", self_tensor=False):
        self.name, self.fn, self.kind, self.self_tensor = name, fn, kind, self_tensor
        self.params, self.varargs = [], None
        self.ctor_params, self.ctor_varargs = [], None

    def __repr__(self):
        return f"<fuzz target {self.name}>"


def _signature_params(fn, drop_first=False):
    """([(name, kind, default, keyword_only)], varargs_name) of a callable, or None if unknown."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    params, varargs = [], None
    items = list(sig.parameters.values())
    if drop_first and items and items[0].kind in (inspect.Parameter.POSITIONAL_ONLY,
                                                  inspect.Parameter.POSITIONAL_OR_KEYWORD):
        items = items[1:]
    for p in items:
        if p.kind is p.VAR_POSITIONAL:
            varargs = p.name
        elif p.kind is p.VAR_KEYWORD:
            continue
        else:
            params.append((p.name, _kind_of(p.name, p.default), p.default, p.kind is p.KEYWORD_ONLY))
    return params, varargs


def _kind_of(name, default):
    kind = _NAME_KINDS.get(name)
    if kind is not None:
        return kind
    if default is inspect.Parameter.empty:
        return "tensor"
    if isinstance(default, bool):
        return "bool"
    if isinstance(default, int):
        return "int"
    if isinstance(default, float):
        return "number"
    if isinstance(default, str):
        return "string"
    if isinstance(default, (tuple, list)):
        return "shape"
    if isinstance(default, mstype.DType):
        return "dtype"
    return "any"


_OBJECT_DUNDERS = {"__init__", "__new__", "__reduce__", "__deepcopy__", "__copy__", "__iter__", "__hash__",
                   "__module__", "__doc__", "__slots__", "__weakref__", "__array_priority__"}


def _tensor_targets():
    out = []
    names = sorted({n for n in dir(Tensor) if not n.startswith("_")}
                   | {n for n in Tensor.__dict__ if n.startswith("__") and n not in _OBJECT_DUNDERS})
    for name in names:
        raw = inspect.getattr_static(Tensor, name)
        if isinstance(raw, property) or not callable(getattr(Tensor, name)):
            t = _Target(f"Tensor.{name}", name, kind="property", self_tensor=True)
            out.append(t)
            continue
        t = _Target(f"Tensor.{name}", getattr(Tensor, name), kind="method", self_tensor=True)
        sp = _signature_params(t.fn, drop_first=True)
        if sp is None:
            continue
        t.params, t.varargs = sp
        out.append(t)
    return out


def _function_targets(prefix, module, names):
    out = []
    for name in sorted(set(names)):
        fn = getattr(module, name, None)
        if fn is None or not callable(fn) or isinstance(fn, type):
            continue
        t = _Target(f"{prefix}.{name}", fn)
        sp = _signature_params(fn)
        if sp is None:
            continue
        t.params, t.varargs = sp
        out.append(t)
    return out


def _class_targets():
    from minispore.ops import operations as P
    from minispore.ops.operations.base import Primitive as ClassPrimitive
    out = []
    for name in sorted(P.__all__):
        cls = getattr(P, name)
        if not isinstance(cls, type) or cls in (ClassPrimitive,) or name in ("PrimitiveWithInfer",
                                                                             "PrimitiveWithCheck"):
            continue
        t = _Target(f"P.{name}", cls, kind="class")
        init = getattr(cls.__init__, "decorated_func", cls.__init__)
        ctor = _signature_params(init, drop_first=True)
        call = _signature_params(cls.__call__, drop_first=True)
        if ctor is None or call is None:
            continue
        t.ctor_params, t.ctor_varargs = ctor
        t.params, t.varargs = call
        out.append(t)
    return out


def _constructor_targets():
    targets = []
    for name, fn in (("Tensor", Tensor), ("ms.tensor", ms.tensor), ("ms.from_numpy", ms.from_numpy)):
        t = _Target(name, fn)
        t.params, t.varargs = _signature_params(fn.__init__ if fn is Tensor else fn, drop_first=fn is Tensor)
        # the data argument: anything a user may hand over, not only tensors
        t.params = [(n, "data" if n in ("input_data", "array") else k, d, kw) for n, k, d, kw in t.params]
        targets.append(t)
    return targets


def all_targets():
    """Every fuzzed target (see the module docstring), minus SKIPPED, in a fixed order."""
    from minispore import mint, ops
    from minispore.mint.nn import functional as mnf
    targets = (_function_targets("ops", ops, ops.functional.__all__)
               + _function_targets("mint", mint, mint.functional.__all__)
               + _function_targets("mint.nn.functional", mnf, mnf.__all__)
               + _tensor_targets() + _class_targets() + _constructor_targets())
    return [t for t in targets if t.name not in SKIPPED]


# -- drawing one call ----------------------------------------------------------------------------
def _draw_data(d: _Draw):
    """The Tensor constructor's data: arrays, nested lists, scalars, odd objects."""
    r = d.rng
    k = int(r.integers(8))
    if k == 0:
        return d.array()
    if k == 1:
        return d.array().tolist()
    if k == 2:
        return d.pick([[1, 2, 3], [1.5, 2], [[1, 2], [3]], [True, False], [2**64], [2**63], [-(2**63) - 1],
                       [1, 2.5, True], [], [[]], [Tensor(np.float32(1.0)), 2.0], [np.int64(3), 4],
                       [float("nan"), float("inf")], [1j], ["a"], [None], [[1, 2], [3, 4]]])
    if k == 3:
        return d.pick(_NUMBERS + _HUGE_INTS)
    if k == 4:
        return d.tensor()
    if k == 5:
        return d.pick(_MISC)
    if k == 6:
        return None
    return d.pick([np.array([1, 2], np.uint16), np.array([1.0], np.longdouble), np.array([1 + 1j]),
                   np.array(["a", "b"]), np.array([None], object), np.ones((2, 3), np.float32)[:, ::2],
                   np.array(2**70, dtype=object), np.datetime64("2020-01-01")])


def _draw_args(d: _Draw, params, varargs):
    r = d.rng
    positional = [p for p in params if not p[3]]
    required = sum(1 for p in positional if p[2] is inspect.Parameter.empty)
    n_pos = int(r.integers(required, len(positional) + 1))
    args = [_draw_param(d, kind) for _name, kind, _default, _kw in positional[:n_pos]]
    kwargs = {}
    for name, kind, default, kw_only in params:
        if kw_only and (default is inspect.Parameter.empty or r.random() < 0.3):
            kwargs[name] = _draw_param(d, kind)
    for name, kind, default, kw_only in positional[n_pos:]:
        if r.random() < 0.2:
            kwargs[name] = _draw_param(d, kind)
    if varargs is not None and n_pos == len(positional):
        kind = "shape_item" if varargs in ("shape", "size", "sizes", "dims", "axes") else "tensor"
        for _ in range(int(r.integers(0, 4))):
            args.append(d.pick(_INTS) if kind == "shape_item" else d.value("tensor"))
    return args, kwargs


def _draw_param(d, kind):
    if kind == "data":
        return _draw_data(d)
    if kind == "any":
        return d.anything()
    return d.value(kind)


def _describe(v, depth=0):
    if isinstance(v, Tensor):
        try:
            return f"Tensor({v.dtype}, shape={v.shape})"
        except Exception:                 # (a tensor a failing call left half-built)
            return "Tensor(?)"
    if isinstance(v, np.ndarray):
        return f"np.array({v.tolist()!r}, {v.dtype})"[:60] if v.size <= 6 else f"ndarray({v.dtype}, {v.shape})"
    if isinstance(v, np.generic):
        return f"np.{type(v).__name__}({v!r})"
    if isinstance(v, (list, tuple)) and depth < 2:
        inner = ", ".join(_describe(a, depth + 1) for a in v[:6])
        return f"[{inner}]" if isinstance(v, list) else f"({inner}{',' if len(v) == 1 else ''})"
    return repr(v)[:40]


def describe_call(name, args, kwargs, ctor=None):
    parts = [_describe(a) for a in args] + [f"{k}={_describe(v)}" for k, v in kwargs.items()]
    head = name
    if ctor is not None:
        cargs, ckwargs = ctor
        head += "(" + ", ".join([_describe(a) for a in cargs] + [f"{k}={_describe(v)}" for k, v in ckwargs.items()]) + ")"
    return f"{head}({', '.join(parts)})"


# -- classifying outcomes ------------------------------------------------------------------------
# The texts of the executor's safety net (backend/dispatch.py `_wrap_error`) and of the class-style
# base's wrapper for user infer hooks: both pass another exception's message through.
_WRAPPER_MARKERS = ("inputs its shape/dtype inference accepts", "inputs its kernel accepts",
                    "the kernel failed on inputs", "the shape/dtype inference failed on inputs",
                    "inputs its infer_shape/infer_dtype accept")


def classify(err: BaseException) -> str:
    """'clean', 'wrapped_numpy' or 'raw' (see the module docstring)."""
    if not isinstance(err, MinisporeError):
        return "raw"
    msg = str(err)
    if any(m in msg for m in _WRAPPER_MARKERS):
        return "wrapped_numpy"
    inner = err.__cause__ or err.__context__
    if inner is not None and not isinstance(inner, MinisporeError):
        text = str(inner)
        if len(text) >= 12 and text in msg:
            return "wrapped_numpy"
    return "clean"


def _cap_address_space():
    """Lower RLIMIT_AS to the current size + FUZZ_ADDRESS_SPACE_HEADROOM; returns what to restore
    (None when there is nothing to do: no `resource` module, or a tighter limit already set)."""
    try:
        import resource
        with open("/proc/self/status") as f:
            vm = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        cap = vm + FUZZ_ADDRESS_SPACE_HEADROOM
        if hard != resource.RLIM_INFINITY:
            cap = min(cap, hard)
        if soft != resource.RLIM_INFINITY and soft <= cap:
            return None
        resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
        return soft, hard
    except (ImportError, OSError, ValueError, StopIteration):
        return None


def _restore_address_space(saved):
    if saved is not None:
        import resource
        resource.setrlimit(resource.RLIMIT_AS, saved)


class _Hang(BaseException):
    """Raised by the per-call alarm (a BaseException, so an op's `except Exception` cannot eat it)."""


def _on_alarm(signum, frame):
    raise _Hang()


def _prepare(target: _Target, d: _Draw):
    """Draw arguments for `target`; returns (invoke, describe): two thunks, the call and its text."""
    ctor = _draw_args(d, target.ctor_params, target.ctor_varargs) if target.kind == "class" else None
    self_t = d.tensor() if target.self_tensor else None
    args, kwargs = ([], {}) if target.kind == "property" else _draw_args(d, target.params, target.varargs)

    def invoke():
        if target.kind == "class":
            target.fn(*ctor[0], **ctor[1])(*args, **kwargs)
        elif target.kind == "property":
            getattr(self_t, target.fn)
        elif target.self_tensor:
            out = target.fn(self_t, *args, **kwargs)
            if target.name in ("Tensor.__repr__", "Tensor.__str__"):
                str(out)
        else:
            target.fn(*args, **kwargs)

    def describe():
        shown = ([self_t] if self_t is not None else []) + args
        return describe_call(target.name, shown, kwargs, ctor)
    return invoke, describe


def _outcome(invoke, use_alarm):
    """('ok' | 'clean' | 'wrapped_numpy' | 'raw' | 'hangs', the exception or None)."""
    try:
        if use_alarm:
            signal.setitimer(signal.ITIMER_REAL, PER_CALL_TIMEOUT_S)
        try:
            invoke()
        finally:
            if use_alarm:
                signal.setitimer(signal.ITIMER_REAL, 0)
    except _Hang:
        return "hangs", None
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:          # noqa: BLE001  (sorting every exception is the point)
        return classify(e), e
    return "ok", None


@contextlib.contextmanager
def guarded_calls():
    """The conditions fuzzed calls run under, restored afterwards: the per-call alarm's handler
    (yields whether the alarm can be used: only in the main thread), the memory limit and the
    address-space cap (see FUZZ_MEMORY_LIMIT), the global random state, and silenced warnings
    (NaN and overflow warnings are expected here)."""
    use_alarm = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    old_handler = signal.signal(signal.SIGALRM, _on_alarm) if use_alarm else None
    old_limit = os.environ.get("MINISPORE_MEMORY_LIMIT")
    os.environ["MINISPORE_MEMORY_LIMIT"] = FUZZ_MEMORY_LIMIT
    rng_state = context.get_rng_state()
    saved_limit = _cap_address_space()
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            yield use_alarm
    finally:
        if use_alarm:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old_handler)
        if old_limit is None:
            os.environ.pop("MINISPORE_MEMORY_LIMIT", None)
        else:
            os.environ["MINISPORE_MEMORY_LIMIT"] = old_limit
        context.set_rng_state(rng_state)
        _restore_address_space(saved_limit)


def call_outcome(fn, *args, **kwargs):
    """Call `fn(*args, **kwargs)` as the fuzzer does (under `guarded_calls`) and sort the result:
    ('ok' | 'clean' | 'wrapped_numpy' | 'raw' | 'hangs', the exception or None)."""
    with guarded_calls() as use_alarm:
        return _outcome(lambda: fn(*args, **kwargs), use_alarm)


def fuzz_ops(n_calls: int, seed: int = 0, time_limit_s: float | None = None) -> dict:
    """Make `n_calls` fuzzed calls (fewer if `time_limit_s` runs out) and count the outcomes.

    Returns {calls, ok, clean_errors, wrapped_numpy, raw, hangs, examples, failures_by_target,
    targets, skipped}: `examples` describes up to 20 failing calls (target, arguments, exception
    type and message), one per target first; `failures_by_target` counts the wrapped, raw and hung
    calls of each target.
    """
    rng = np.random.default_rng(seed)
    d = _Draw(rng)
    targets = all_targets()
    counts = {"calls": 0, "ok": 0, "clean_errors": 0, "wrapped_numpy": 0, "raw": 0, "hangs": 0}
    examples, seen, by_target = [], set(), {}
    deadline = None if time_limit_s is None else time.monotonic() + time_limit_s
    with guarded_calls() as use_alarm:
        for _ in range(n_calls):
            if deadline is not None and time.monotonic() > deadline:
                break
            target = targets[int(rng.integers(len(targets)))]
            d.new_call()
            counts["calls"] += 1
            invoke, describe = _prepare(target, d)
            outcome, err = _outcome(invoke, use_alarm)
            if outcome == "clean":
                outcome = "clean_errors"
            counts[outcome] += 1
            if outcome in ("wrapped_numpy", "raw", "hangs"):
                by_target[target.name] = by_target.get(target.name, 0) + 1
                key = (target.name, type(err).__name__)
                if key not in seen and len(examples) < MAX_EXAMPLES:
                    seen.add(key)
                    msg = "timed out" if outcome == "hangs" else f"{type(err).__name__}: {err}"
                    examples.append(f"[{outcome}] {describe()} -> {msg[:300]}")
    counts["examples"] = examples
    counts["failures_by_target"] = dict(sorted(by_target.items(), key=lambda kv: -kv[1]))
    counts["targets"] = len(targets)
    counts["skipped"] = dict(SKIPPED)
    return counts


__all__ = ["fuzz_ops", "call_outcome", "VALUE_POOLS", "guarded_calls", "classify", "all_targets", "describe_call", "SKIPPED"]
