"""How `x[index]` is described to a primitive: an index *spec* plus index *tensors*.

A Python index can hold things a primitive attribute must not (attributes are plain hashable
values that graph capture can bake into a graph and compare in guards): Tensors, ndarrays, lists,
and — before Python 3.12 — slices, which are not even hashable. So `normalize` splits an index in
two:

* the **spec**, a tuple with one entry per index item: a Python `int`, a `Slice(start, stop, step)`,
  `None` (new axis), `Ellipsis`, or `IndexInput(k)` meaning "the k-th index tensor";
* the **index tensors**: integer Tensors for every advanced (array) index. They are passed to the
  primitive as ordinary extra inputs — `getitem(x, *index_tensors, spec=spec)` — so they stay data,
  not constants, exactly like the tensor inputs of any other op.

Two rewrites make every later step simpler:

* a bool mask is replaced by its `nonzero()` coordinates (one integer index tensor per masked dim),
  which is NumPy's own definition of mask indexing. The number of True values is data, so this
  happens here, eagerly, and the primitive only ever sees integer indices: its output shape then
  follows from input *shapes* alone, as an inference rule requires;
* a 0-d integer Tensor is read as a Python int (NumPy and MindSpore treat it as one).

`result_shape` is NumPy's indexing shape rule written out (it is what `getitem`'s inference rule
runs); `to_numpy` rebuilds the NumPy index from a spec and the index arrays inside a kernel.
"""
from __future__ import annotations

import functools
import numbers
import operator
from typing import NamedTuple

import numpy as np

from ...common.errors import OpIndexError, OpTypeError, OpValueError
from ...common.tensor import Tensor, _wrap
from ..primitive import AbstractTensor


class Slice(NamedTuple):
    """A hashable stand-in for `slice(start, stop, step)` (slices are unhashable before 3.12)."""
    start: int | None
    stop: int | None
    step: int | None


class IndexInput(NamedTuple):
    """'The index tensor passed as extra input number `position`' (an advanced index)."""
    position: int


_INDEX_HELP = "an index of ints, slices, None, Ellipsis, bool masks, or integer Tensors/lists/arrays"


def _slice_bound(op, v):
    if v is None:
        return None
    try:
        return operator.index(v)
    except TypeError:
        raise OpTypeError(op, "slice bounds that are ints or None", f"{type(v).__name__} {v!r}") from None


def _as_slice(op, s):
    start, stop, step = _slice_bound(op, s.start), _slice_bound(op, s.stop), _slice_bound(op, s.step)
    if step == 0:
        raise OpValueError(op, "a non-zero slice step", "step 0")
    return Slice(start, stop, step)


def _array_of(op, e):
    """The ndarray behind an array-like index item (Tensor, ndarray, list, tuple-in-list)."""
    if isinstance(e, Tensor):
        return e._data
    if isinstance(e, np.ndarray):
        return e
    try:
        arr = np.asarray(e)
    except (ValueError, TypeError):
        raise OpIndexError(op, _INDEX_HELP, f"the list {e!r}") from None
    if arr.size == 0 and arr.dtype.kind == "f":       # [] means "no indices", not a float array
        arr = arr.astype(np.int64)
    return arr


def _plain_basic_spec(index: tuple):
    """The spec of a tuple of Python ints, int-bounded slices, None and Ellipsis; None otherwise."""
    spec = []
    for e in index:
        te = type(e)
        if te is int or e is None or e is Ellipsis:
            spec.append(e)
        elif te is slice:
            a, b, c = e.start, e.stop, e.step
            if (a is None or type(a) is int) and (b is None or type(b) is int) and (c is None or type(c) is int) \
                    and c != 0:
                spec.append(Slice(a, b, c))
            else:
                return None
        else:
            return None
    return tuple(spec)


def normalize(op: str, shape: tuple, index) -> tuple[tuple, tuple]:
    """Split `index` (for a tensor of `shape`) into `(spec, index_tensors)`. See the module docstring."""
    # fast paths for the commonest indices: x[i], x[a:b] and tuples of ints/slices/None/...
    t = type(index)
    if t is int:
        return (index,), ()
    if t is slice:
        return (_as_slice(op, index),), ()
    if t is tuple:
        spec = _plain_basic_spec(index)
        if spec is not None:
            return spec, ()
    items = index if t is tuple else (index,)

    # pass 1: classify each item; arrays are kept aside until we know which dims they index
    kinds = []            # (kind, payload) with kind in int/slice/none/ellipsis/array/mask
    for e in items:
        if e is None:
            kinds.append(("none", None))
        elif e is Ellipsis:
            kinds.append(("ellipsis", None))
        elif isinstance(e, slice):
            kinds.append(("slice", _as_slice(op, e)))
        elif isinstance(e, (bool, np.bool_)):
            kinds.append(("bool", bool(e)))
        elif isinstance(e, numbers.Integral):
            kinds.append(("int", int(e)))
        elif isinstance(e, AbstractTensor):            # graph capture: shape and dtype, no data
            if e.dtype.kind in ("int", "uint"):
                kinds.append(("array", e))
            else:
                raise OpIndexError(op, "an integer index tensor (a bool mask needs its data: its number "
                                   "of True values sets the output shape)", f"an abstract {e.dtype} index")
        elif isinstance(e, (Tensor, np.ndarray, list)):
            arr = _array_of(op, e)
            if arr.dtype.kind == "b":
                kinds.append(("bool", bool(arr)) if arr.ndim == 0 else ("mask", arr))
            elif arr.dtype.kind in "iu":
                if arr.ndim == 0:
                    kinds.append(("int", int(arr)))
                else:
                    kinds.append(("array", e if isinstance(e, Tensor) else arr))
            else:
                raise OpIndexError(op, "index tensors of an integer or bool dtype",
                                   f"an index of dtype {getattr(e, 'dtype', arr.dtype)}")
        else:
            raise OpIndexError(op, _INDEX_HELP, f"{type(e).__name__} {e!r}")

    consumed = 0
    for kind, payload in kinds:
        if kind in ("int", "slice", "array"):
            consumed += 1
        elif kind == "mask":
            consumed += payload.ndim
    ndim = len(shape)
    if consumed > ndim:
        raise OpIndexError(op, f"at most {ndim} indices for a tensor of shape {tuple(shape)}",
                           f"{consumed} indices")

    # pass 2: build the spec, expanding masks into nonzero() coordinates
    spec, tensors = [], []
    dim = 0
    for kind, payload in kinds:
        if kind == "int":
            spec.append(payload)
            dim += 1
        elif kind == "slice":
            spec.append(payload)
            dim += 1
        elif kind == "none":
            spec.append(None)
        elif kind == "ellipsis":
            spec.append(Ellipsis)
            dim += ndim - consumed
        elif kind == "bool":
            if not payload:
                raise OpIndexError(op, _INDEX_HELP + " (a scalar False selects nothing; use an empty list)",
                                   "False")
            spec.append(None)            # x[True] adds a new axis of length 1, as in NumPy
        elif kind == "array":
            spec.append(IndexInput(len(tensors)))
            tensors.append(payload if isinstance(payload, (Tensor, AbstractTensor)) else _wrap(payload))
            dim += 1
        else:  # mask
            k = payload.ndim
            if tuple(payload.shape) != tuple(shape[dim:dim + k]):
                raise OpIndexError(op, f"a bool mask of shape {tuple(shape[dim:dim + k])} (the dims it indexes "
                                   f"in a tensor of shape {tuple(shape)})", f"a mask of shape {payload.shape}")
            for coords in np.nonzero(payload):
                spec.append(IndexInput(len(tensors)))
                tensors.append(_wrap(coords))
            dim += k
    return tuple(spec), tuple(tensors)


def _slice_len(s: Slice, size: int) -> int:
    return len(range(*slice(s.start, s.stop, s.step).indices(size)))


def result_shape(op: str, shape: tuple, spec: tuple, index_shapes) -> tuple:
    """The shape of `x[index]` for `x` of `shape` — NumPy's rule, including where the dims of
    advanced (array) indices go: in place of the first one when they are adjacent in the index,
    else in front. When any array index is present, int items count as advanced (0-d) indices."""
    if not index_shapes:
        return _basic_result_shape(op, tuple(shape), spec)
    return _result_shape(op, shape, spec, index_shapes)


@functools.lru_cache(maxsize=4096)
def _basic_result_shape(op, shape, spec):
    """Basic indices repeat (x[0], x[:, :n] in a loop): their shapes are cached. Errors are not."""
    return _result_shape(op, shape, spec, ())


def _result_shape(op, shape, spec, index_shapes):
    ndim = len(shape)
    consumed = n_ellipsis = 0
    has_advanced = False
    for e in spec:
        if e is None:
            continue
        if e is Ellipsis:
            n_ellipsis += 1
            continue
        consumed += 1
        if type(e) is IndexInput:
            has_advanced = True
    if n_ellipsis > 1:
        raise OpIndexError(op, "at most one Ellipsis (...) in an index", f"{n_ellipsis}")
    if consumed > ndim:
        raise OpIndexError(op, f"at most {ndim} indices for a tensor of shape {tuple(shape)}",
                           f"{consumed} indices")
    out = []
    adv_shapes, adv_positions = [], []
    adv_out_at = None
    dim = 0
    for pos, e in enumerate(spec):
        t = type(e)
        if e is None:
            out.append(1)
            continue
        if e is Ellipsis:
            k = ndim - consumed
            out.extend(shape[dim:dim + k])
            dim += k
            continue
        if t is Slice:
            out.append(_slice_len(e, shape[dim]))
        elif t is IndexInput:
            adv_shapes.append(tuple(index_shapes[e.position]))
            adv_positions.append(pos)
            if adv_out_at is None:
                adv_out_at = len(out)
        else:
            size = shape[dim]
            if not -size <= e < size:
                raise OpIndexError(op, f"an index in [{-size}, {size}) for axis {dim} of a tensor of shape "
                                   f"{tuple(shape)}", str(e))
            if has_advanced:
                adv_shapes.append(())
                adv_positions.append(pos)
                if adv_out_at is None:
                    adv_out_at = len(out)
        dim += 1
    out.extend(shape[dim:])
    if adv_positions:
        bshape = _broadcast_index_shapes(op, adv_shapes)
        adjacent = adv_positions[-1] - adv_positions[0] + 1 == len(adv_positions)
        at = adv_out_at if adjacent else 0
        out[at:at] = bshape
    return tuple(out)


def _broadcast_index_shapes(op, shapes):
    nd = max(len(s) for s in shapes)
    out = []
    for i in range(-nd, 0):
        d = 1
        for s in shapes:
            v = s[i] if -i <= len(s) else 1
            if v != 1:
                if d != 1 and v != d:
                    raise OpIndexError(op, "index arrays whose shapes broadcast together",
                                       " and ".join(str(s) for s in shapes))
                d = v
        out.append(d)
    return tuple(out)


@functools.lru_cache(maxsize=1024)
def basic_index(spec: tuple) -> tuple:
    """The NumPy index for a spec without index tensors. A trailing Ellipsis makes NumPy return a
    0-d *view* even when every dim gets an int (x[0, 1] would otherwise be a detached scalar)."""
    idx = tuple(slice(*e) if type(e) is Slice else e for e in spec)
    return idx if Ellipsis in spec else idx + (Ellipsis,)


def to_numpy(spec: tuple, arrays) -> tuple:
    """The NumPy index for a spec, with IndexInput(k) replaced by `arrays[k]`."""
    if not arrays:
        return basic_index(spec)
    return tuple(arrays[e.position] if type(e) is IndexInput else (slice(*e) if type(e) is Slice else e)
                 for e in spec)


def is_basic(spec: tuple) -> bool:
    """True when the spec has no array index: NumPy then returns a view and never repeats an element."""
    for e in spec:
        if type(e) is IndexInput:
            return False
    return True


def value_fits(region: tuple, value_shape: tuple) -> bool:
    """NumPy's assignment rule: `value` broadcasts to `region` (extra leading dims must be 1)."""
    vs = tuple(value_shape)
    while len(vs) > len(region):
        if vs[0] != 1:
            return False
        vs = vs[1:]
    for v, r in zip(reversed(vs), reversed(region)):
        if v != 1 and v != r:
            return False
    return True
