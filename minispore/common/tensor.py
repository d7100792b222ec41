"""Tensor and Parameter.

A Tensor is a NumPy array plus two pieces of autodiff bookkeeping:

* `_node`: the tape node that produced it (None unless a gradient is being computed), and
* `_version`: bumped by in-place writes (`__setitem__`), so autodiff can refuse to use a value
  that was overwritten after it was saved.

Operators and most methods (`+`, `@`, `.sum()`, `.reshape()` ...) are attached by
`minispore.ops.tensor_methods`, because they are ops and ops sit one layer above this module.
"""
from __future__ import annotations

import numbers

import numpy as np

from . import dtype as mstype
from .errors import OpIndexError, OpTypeError, OpValueError


_INT64_MIN, _INT64_MAX, _UINT64_MAX = -(1 << 63), (1 << 63) - 1, (1 << 64) - 1


def _check_int_range(lo, hi, d, shown):
    """Python ints stored as integer dtype `d` must fit: MindSpore silently wraps (300 as UInt8
    becomes 44), which hides bugs, so minispore refuses instead (a deliberate difference)."""
    if d.kind in ("int", "uint"):
        info = np.iinfo(d.np)
        if lo < info.min or hi > info.max:
            raise OpValueError("Tensor", f"integers in the range of {d} [{info.min}, {info.max}]", shown)


def _python_int_array(value, dtype):
    """A Python int: Int64 by default, UInt64 if it only fits there (as MindSpore), else an error."""
    if dtype is not None:
        d = mstype.as_dtype(dtype)
        _check_int_range(value, value, d, repr(value))
        return np.asarray(value, dtype=d.np)
    if _INT64_MIN <= value <= _INT64_MAX:
        return np.asarray(value, dtype=np.int64)
    if 0 <= value <= _UINT64_MAX:
        return np.asarray(value, dtype=np.uint64)
    raise OpValueError("Tensor", f"an int in [{_INT64_MIN}, {_UINT64_MAX}] (the Int64/UInt64 range)", repr(value))


def _sequence_array(data, dtype):
    """A (nested) list/tuple of Python numbers or Tensors, with MindSpore's default dtypes."""
    try:
        arr = np.asarray([x.asnumpy() if isinstance(x, Tensor) else x for x in data])
    except ValueError:
        raise OpValueError("Tensor", "a rectangular nested list of numbers (every row of one length)",
                           f"ragged data {str(data)[:60]}") from None
    except OverflowError:
        arr = np.asarray(data, dtype=object)
    if arr.dtype == object:
        raise OpValueError("Tensor", f"numbers; ints in [{_INT64_MIN}, {_UINT64_MAX}]",
                           f"{str(data)[:60]} (not representable as one numeric dtype)")
    if arr.dtype.kind in "iu" and arr.size:
        if dtype is not None:
            _check_int_range(int(arr.min()), int(arr.max()), mstype.as_dtype(dtype), f"{str(data)[:60]}")
        elif arr.dtype != np.uint64:          # ints beyond Int64 made NumPy pick UInt64: keep it
            arr = arr.astype(np.int64)
    elif arr.dtype == np.float64 and dtype is None:
        arr = arr.astype(np.float32)       # Python floats default to float32, as in MindSpore
    return arr


def _shape_arg(shape) -> tuple:
    """The constructor's `shape=` as a tuple of non-negative Python ints. NumPy integers and 1-d
    integer arrays are accepted (as in ops); -1 (MindSpore's dynamic-shape placeholder) is not:
    minispore tensors always hold data, so every size must be known."""
    if isinstance(shape, np.ndarray) and shape.dtype.kind in "iu" and shape.ndim <= 1:
        shape = shape.tolist()
    if isinstance(shape, (numbers.Integral, np.integer)) and not isinstance(shape, (bool, np.bool_)):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)) or not all(
            isinstance(s, (numbers.Integral, np.integer)) and not isinstance(s, (bool, np.bool_)) for s in shape):
        raise OpTypeError("Tensor", "'shape' as a tuple of ints", f"{type(shape).__name__} {shape!r}")
    shape = tuple(int(s) for s in shape)
    if any(s < 0 for s in shape):
        raise OpValueError("Tensor", "'shape' with non-negative sizes (minispore has no dynamic "
                           "shapes, so -1 is not a placeholder here)", repr(shape))
    return shape


def _check_size(shape, dtype):
    """`Tensor(shape=...)` allocates: refuse a shape beyond the memory limit before NumPy tries."""
    from .memory_limit import MemoryLimitError, check_fits
    nbytes = 1
    for s in shape:
        nbytes *= s
    nbytes *= mstype.as_dtype(dtype or mstype.float32).itemsize
    if nbytes > 1 << 26:
        what = f"For 'Tensor', a tensor of shape {tuple(shape)}"
        if nbytes >= 1 << 62:
            raise MemoryLimitError(what, nbytes, 1 << 62, "bytes any array can address")
        check_fits(nbytes, what)


def _to_array(data, dtype, copy=True):
    """Convert user data to an ndarray with MindSpore's default dtype inference.

    A NumPy array is copied (MindSpore's `Tensor(ndarray)` owns its storage, so writing into the
    tensor never changes the caller's array); `copy=False` shares it where the dtype allows
    (`from_numpy`). A Tensor's storage is shared, as MindSpore's `Tensor(tensor)` does.
    """
    if isinstance(data, Tensor):
        arr = data._data
        copy = False
    elif isinstance(data, np.ndarray):
        arr = data
    elif isinstance(data, np.generic):         # NumPy scalars keep their dtype (np.float64 -> Float64)
        arr, copy = np.asarray(data), False
    elif isinstance(data, (bool, np.bool_)):
        arr, copy = np.asarray(data, dtype=np.bool_), False
    elif isinstance(data, numbers.Integral):
        arr, copy = _python_int_array(int(data), dtype), False
    elif isinstance(data, numbers.Real):
        arr, copy = np.asarray(data, dtype=np.float32), False
    elif isinstance(data, (list, tuple)):
        arr, copy = _sequence_array(data, dtype), False
    else:
        raise OpTypeError("Tensor", "a Tensor, ndarray, list, tuple, or Python/NumPy scalar",
                          type(data).__name__)
    if arr.dtype not in mstype._BY_NP:
        if arr.dtype.kind not in "biuf":
            raise OpTypeError("Tensor", "numeric or bool data "
                              f"({', '.join(str(x) for x in mstype.ALL_DTYPES)})", f"numpy dtype {arr.dtype}")
        arr, copy = arr.astype(mstype.float32.np if arr.dtype.kind == "f" else mstype.int64.np), False
    if dtype is not None:
        d = mstype.as_dtype(dtype)
        if arr.dtype != d.np:
            return arr.astype(d.np)               # (astype always makes a new array)
    return np.array(arr, order="C", copy=True) if copy else arr


class Tensor:
    """An n-dimensional array with a minispore dtype.

    `Tensor(input_data=None, dtype=None, shape=None, init=None, const_arg=False, device=None)`
    follows MindSpore: `Tensor([1, 2])` is Int64, `Tensor([1.0])` and `Tensor(1.0)` are Float32,
    `Tensor(np.ones(2))` keeps Float64. A NumPy array is copied (use `ms.from_numpy` to share
    it); a Tensor argument shares its storage. minispore's own code builds result tensors with
    `_wrap` (no copy, no checks), so the copy here never sits on the per-op path.
    """

    __slots__ = ("_data", "_node", "_version", "__weakref__")
    __array_priority__ = 100          # so ndarray + Tensor defers to Tensor.__radd__

    def __init__(self, input_data=None, dtype=None, shape=None, init=None, const_arg=False, device=None):
        if shape is not None:
            shape = _shape_arg(shape)
        if input_data is None:
            if shape is not None:
                _check_size(shape, dtype)
            if init is not None:
                if not hasattr(init, "generate"):
                    raise OpTypeError("Tensor", "'init' as an initializer (minispore.common.initializer, "
                                      "e.g. One(), Normal())", f"{type(init).__name__} {init!r}"[:80])
                # lazy initializer object from minispore.common.initializer
                arr = init.generate(tuple(shape), mstype.as_dtype(dtype or mstype.float32))
            elif shape is not None:
                arr = np.zeros(tuple(shape), dtype=mstype.as_dtype(dtype or mstype.float32).np)
            else:
                raise OpValueError("Tensor", "input_data, or shape (with optional init)", "neither")
        else:
            arr = _to_array(input_data, dtype)
            if shape is not None and tuple(arr.shape) != shape:
                raise OpValueError("Tensor", f"data of shape {tuple(shape)}", f"shape {arr.shape}")
        self._data = arr
        self._node = None
        self._version = 0

    # -- metadata ---------------------------------------------------------------------------
    @property
    def shape(self) -> tuple:
        return self._data.shape

    @property
    def dtype(self) -> mstype.DType:
        return mstype._BY_NP[self._data.dtype]

    @property
    def ndim(self) -> int:
        return self._data.ndim

    @property
    def size(self) -> int:
        return self._data.size

    @property
    def itemsize(self) -> int:
        return self._data.itemsize

    @property
    def nbytes(self) -> int:
        return self._data.nbytes

    @property
    def strides(self) -> tuple:
        return self._data.strides

    def is_contiguous(self) -> bool:
        return self._data.flags["C_CONTIGUOUS"]

    def dim(self) -> int:
        return self._data.ndim

    def numel(self) -> int:
        return self._data.size

    # -- host access ----------------------------------------------------------------------------
    def asnumpy(self) -> np.ndarray:
        """The data as a NumPy array (shares memory, like MindSpore on CPU)."""
        return self._data

    def numpy(self) -> np.ndarray:
        return self._data

    def item(self, index=None):
        if index is None:
            if self._data.size != 1:
                raise OpValueError("Tensor.item", "a tensor with exactly one element",
                                   f"shape {self.shape}")
            return self._data.reshape(()).item()
        # MindSpore 2.3's item(index): a flat int index, or a tuple with one int per dimension
        size, shape = self._data.size, self._data.shape
        if isinstance(index, (numbers.Integral, np.integer)) and not isinstance(index, (bool, np.bool_)):
            if not -size <= index < size:
                raise OpIndexError("Tensor.item", f"a flat index in [{-size}, {size})",
                                   f"{int(index)} for a tensor of shape {shape}")
            return self._data.item(int(index) % size)
        if isinstance(index, tuple) and len(index) == len(shape) and all(
                isinstance(i, (numbers.Integral, np.integer)) and not isinstance(i, (bool, np.bool_))
                for i in index):
            for i, (k, n) in enumerate(zip(index, shape)):
                if not -n <= k < n:
                    raise OpIndexError("Tensor.item", f"index[{i}] in [{-n}, {n})",
                                       f"{int(k)} for a tensor of shape {shape}")
            return self._data.item(tuple(int(k) % n for k, n in zip(index, shape)))
        raise OpTypeError("Tensor.item", f"None, an int, or a tuple of {len(shape)} ints as 'index'",
                          f"{type(index).__name__} {index!r}")

    def tolist(self):
        return self._data.tolist()

    def __array__(self, dtype=None, copy=None):
        if dtype is None:
            return self._data
        if isinstance(dtype, mstype.DType):
            return self._data.astype(dtype.np)
        try:
            dtype = np.dtype(dtype)
        except (TypeError, ValueError):
            raise OpTypeError("Tensor.__array__", "'dtype' as a NumPy or minispore dtype",
                              f"{type(dtype).__name__} {dtype!r}"[:80]) from None
        return self._data.astype(dtype)

    def __len__(self):
        if self._data.ndim == 0:
            raise OpTypeError("len", "a tensor with at least one dimension", "a 0-d tensor")
        return self._data.shape[0]

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    def __bool__(self):
        if self._data.size != 1:
            raise OpValueError("Tensor.__bool__", "a tensor with one element",
                               f"shape {self.shape}; use .any() or .all()")
        return bool(self._data.reshape(()))

    def __float__(self):
        return float(self.item())

    def __int__(self):
        v = self.item()
        if isinstance(v, float) and (v != v or v in (float("inf"), float("-inf"))):
            raise OpValueError("Tensor.__int__", "a finite value (NaN and inf have no integer value)", repr(v))
        return int(v)

    def __index__(self):
        if self.dtype.kind not in ("int", "uint") or self._data.size != 1:
            raise OpTypeError("Tensor.__index__", "a one-element integer tensor",
                              f"{self.dtype} of shape {self.shape}")
        return int(self.item())

    __hash__ = object.__hash__        # __eq__ is elementwise (attached by ops), identity hash stays

    def __repr__(self):
        body = np.array2string(np.asarray(self._data, dtype=np.float32) if self._data.dtype == mstype.bfloat16.np
                               else self._data, separator=", ", prefix="Tensor(")
        return f"Tensor(shape={list(self.shape)}, dtype={self.dtype}, value=\n{body})"

    def __str__(self):
        return self.__repr__()

    def __copy__(self):
        return _wrap(self._data)

    def __deepcopy__(self, memo):
        return _wrap(self._data.copy())

    def __reduce__(self):
        return (Tensor, (self._data,))

    def copy(self) -> "Tensor":
        return _wrap(self._data.copy())

    def init_data(self, slice_index=None, shape=None, opt_shard_group=None) -> "Tensor":
        """MindSpore's lazily initialized tensors materialize here; minispore's `Tensor(shape=...,
        init=...)` already holds its values, so this returns the tensor itself."""
        return self

    def set_dtype(self, dtype):
        self._data = self._data.astype(mstype.as_dtype(dtype).np)
        return self


def tensor(input_data=None, dtype=None, shape=None, init=None, const_arg=False, device=None) -> Tensor:
    """`ms.tensor(...)`: MindSpore 2.x's function spelling of `Tensor(...)` (same arguments, copies
    NumPy input the same way)."""
    return Tensor(input_data, dtype, shape, init, const_arg, device)


def from_numpy(array) -> Tensor:
    """`ms.from_numpy(array)`: a Tensor that SHARES `array`'s memory (writes show on both sides).

    A non-contiguous array is made contiguous first (then it is a copy), as in MindSpore.
    """
    if not isinstance(array, np.ndarray):
        raise OpTypeError("from_numpy", "a NumPy array", type(array).__name__)
    if array.dtype not in mstype._BY_NP:
        raise OpTypeError("from_numpy", "a NumPy array of a dtype minispore supports "
                          f"({', '.join(str(x) for x in mstype.ALL_DTYPES)})", f"numpy dtype {array.dtype}")
    return _wrap(array if array.flags.c_contiguous else np.ascontiguousarray(array))


def _wrap(arr: np.ndarray) -> Tensor:
    """Fast internal constructor: take `arr` as the storage, no checks, no copy."""
    t = Tensor.__new__(Tensor)
    t._data = arr
    t._node = None
    t._version = 0
    return t


class Parameter(Tensor):
    """A named, trainable Tensor held by a Cell.

    `Parameter(default_input, name=None, requires_grad=True, layerwise_parallel=False,
    parallel_optimizer=True)`; repr follows MindSpore:
    `Parameter (name=p, shape=(2, 3), dtype=Float32, requires_grad=True)`.
    """

    __slots__ = ("name", "requires_grad", "layerwise_parallel", "parallel_optimizer", "_cell_named")

    def __init__(self, default_input, name=None, requires_grad=True, layerwise_parallel=False,
                 parallel_optimizer=True, storage_format="", device=None):
        if isinstance(default_input, Tensor):
            arr = default_input._data
        elif hasattr(default_input, "generate_for_parameter"):      # lazy initializer
            arr = default_input.generate_for_parameter()
        else:
            arr = _to_array(default_input, None)
        if arr.dtype == np.float64 and not isinstance(default_input, (Tensor, np.ndarray)):
            arr = arr.astype(np.float32)
        self._data = arr
        self._node = None
        self._version = 0
        self.name = name if name is not None else "Parameter"
        self.requires_grad = bool(requires_grad)
        self.layerwise_parallel = layerwise_parallel
        self.parallel_optimizer = parallel_optimizer
        self._cell_named = name is not None

    def set_data(self, data, slice_shape=False):
        """Replace the value. The shape must match unless `slice_shape=True`."""
        arr = data._data if isinstance(data, Tensor) else _to_array(data, None)
        if not isinstance(arr, np.ndarray):
            # a symbolic value (a tensor being captured into a graph) has no storage to take
            raise OpTypeError("Parameter.set_data", f"concrete data for '{self.name}'",
                              f"a symbolic {type(arr).__name__} (assign parameters outside jit, or return the "
                              "new value from the jitted function)")
        if not slice_shape and tuple(arr.shape) != tuple(self._data.shape):
            raise OpValueError("Parameter.set_data", f"data of shape {self.shape} for '{self.name}'",
                               f"shape {tuple(arr.shape)}")
        if arr.dtype != self._data.dtype:
            arr = arr.astype(self._data.dtype)
        self._data = arr
        self._version += 1
        return self

    def clone(self, init="same"):
        return Parameter(self._data.copy(), name=self.name, requires_grad=self.requires_grad,
                         parallel_optimizer=self.parallel_optimizer)

    @property
    def data(self):
        return self

    def __repr__(self):
        return (f"Parameter (name={self.name}, shape={tuple(self.shape)}, dtype={self.dtype}, "
                f"requires_grad={self.requires_grad})")

    def __reduce__(self):
        return (Parameter, (self._data, self.name, self.requires_grad, self.layerwise_parallel,
                            self.parallel_optimizer))

    def __deepcopy__(self, memo):
        # (parallel_optimizer=False, the ZeRO opt-out of nn/optim/parallel_optimizer.py, survives copies)
        return Parameter(self._data.copy(), name=self.name, requires_grad=self.requires_grad,
                         parallel_optimizer=self.parallel_optimizer)


class ParameterTuple(tuple):
    """A tuple of Parameters (MindSpore keeps this name for optimizer/grad parameter lists)."""
