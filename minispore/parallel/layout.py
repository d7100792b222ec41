"""`Layout`: how a tensor is cut across the devices of a device matrix, and the algebra of its slices.

MindSpore describes a sharded tensor with two things (`mindspore.Layout`):

* a **device matrix**: the devices of one pipeline stage arranged as an N-d grid, each axis with an
  alias name, e.g. `Layout((2, 2), ("dp", "mp"))` puts 4 devices in a 2x2 grid;
* a **tensor map**, one entry per tensor dimension, naming the device-matrix axis that dimension is
  split over. Calling the layout with one alias per tensor dim builds it:
  `Layout((2, 2), ("dp", "mp"))("mp", "None")` splits dim 0 over the "mp" axis and keeps dim 1 whole.

MindSpore's convention, kept here bit for bit (`to_dict()` gives MindSpore's dict): the tensor map
stores device-matrix axes **counted from the right** (the last alias is 0), "None" is -1, and a
tuple of aliases splits one dimension over several axes (the first alias is the major one):

    Layout((2, 2, 2), ("dp", "sp", "mp"))("dp", "mp").to_dict()["tensor_map"]    == (2, 0)
    Layout((2, 2, 2), ("dp", "sp", "mp"))(("dp", "mp"), "None").to_dict()["tensor_map"] == ((2, 0), -1)

Ranks: device number `i` of the grid (C order: the last axis varies fastest, as in MindSpore's
`_rank_to_coordinate`) is the process `rank_list[i]` (default `0 .. n-1`). Its coordinate along an
axis picks which piece of each dimension mapped to that axis it holds; axes that map to no
dimension are *repeats*: the devices that differ only along them hold identical copies.

The algebra used by the checkpoint tools (`checkpoint_transform`), all pure NumPy:

    slice_bounds(layout, global_shape, rank)  -> ((start, stop), ...) per dimension
    shard_of(full, layout, rank)              -> the rank's piece of a full array
    assemble({rank: piece}, layout, shape)    -> the full array back (replicas must agree)
    replica_groups(layout)                    -> the sets of ranks holding identical pieces

`Layout.from_strategy((2, 1, 4), device_num)` turns a `Primitive.shard` strategy tuple (per-dim
split counts) into the equivalent layout, the way MindSpore does: device matrix = strategy, with the
leftover factor `device_num / prod(strategy)` as a leading repeat axis.

The interleaved_parallel alias (MindSpore's fine-grained multi-copy: a virtual split *inside* one
device, used by the compute schedule) is accepted and reported by `to_dict`; the slice algebra
refuses it, because it does not say how a device's interleaved pieces are laid out in its memory.
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from ..common.errors import OpTypeError, OpValueError

NONE = "None"                       # the alias that means "this dimension is not split"
INTERLEAVED = "interleaved_parallel"


def _int_tuple(op, what, value) -> tuple:
    if not isinstance(value, tuple):
        raise OpTypeError(op, f"'{what}' to be a tuple of ints", f"{type(value).__name__} {value!r}")
    for v in value:
        if not isinstance(v, numbers.Integral) or isinstance(v, bool):
            raise OpTypeError(op, f"the elements of '{what}' to be int", f"{type(v).__name__} {v!r}")
    return tuple(int(v) for v in value)


class Layout:
    """`mindspore.Layout(device_matrix, alias_name, rank_list=None)`.

    Args:
        device_matrix: tuple of ints >= 1, the shape of the device grid.
        alias_name: tuple of distinct non-empty strings, one per axis ("None" is reserved;
            "interleaved_parallel", if used, must be the last axis).
        rank_list: optional list of the world ranks of the grid's devices in C order
            (default `list(range(prod(device_matrix)))`), e.g. to place a layout on ranks 4-7.

    A fresh Layout has no tensor map; call it with one entry per tensor dimension (an alias,
    "None", or a tuple of those) to get a new Layout with one. The callable layout itself is
    unchanged, so one device matrix serves many tensors.
    """

    def __init__(self, device_matrix, alias_name, rank_list=None):
        op = "Layout"
        device_matrix = _int_tuple(op, "device_matrix", device_matrix)
        if not isinstance(alias_name, tuple):
            raise OpTypeError(op, "'alias_name' to be a tuple of str", f"{type(alias_name).__name__} {alias_name!r}")
        if len(device_matrix) != len(alias_name):
            raise OpValueError(op, "'device_matrix' and 'alias_name' of the same length",
                               f"{len(device_matrix)} axes {device_matrix} and {len(alias_name)} names {alias_name}")
        if not device_matrix:
            raise OpValueError(op, "a device_matrix with at least one axis", "()")
        for size in device_matrix:
            if size < 1:
                raise OpValueError(op, "device_matrix axes of size >= 1", str(device_matrix))
        for name in alias_name:
            if not isinstance(name, str):
                raise OpTypeError(op, "the elements of 'alias_name' to be str", f"{type(name).__name__} {name!r}")
            if not name:
                raise OpValueError(op, "non-empty alias names", repr(alias_name))
            if name == NONE:
                raise OpValueError(op, "alias names other than 'None' ('None' means: not split)", repr(alias_name))
        if len(set(alias_name)) != len(alias_name):
            raise OpValueError(op, "distinct alias names", repr(alias_name))
        if INTERLEAVED in alias_name and alias_name.index(INTERLEAVED) != len(alias_name) - 1:
            raise OpValueError(op, f"'{INTERLEAVED}' as the last alias (it is a virtual split inside a device)",
                               repr(alias_name))
        n_devices = math.prod(device_matrix)
        if rank_list is None:
            ranks = list(range(n_devices))
        else:
            if not isinstance(rank_list, list):
                raise OpTypeError(op, "'rank_list' to be a list of int", f"{type(rank_list).__name__}")
            ranks = list(_int_tuple(op, "rank_list", tuple(rank_list)))
            if len(ranks) != n_devices:
                raise OpValueError(op, f"len(rank_list) equal to the product of device_matrix {device_matrix} "
                                   f"({n_devices})", f"{len(ranks)} ranks {ranks}")
            if len(set(ranks)) != len(ranks) or min(ranks) < 0:
                raise OpValueError(op, "distinct non-negative ranks in 'rank_list'", str(ranks))
        self._device_matrix = device_matrix
        self._alias_name = alias_name
        self._rank_list = ranks
        self._tensor_map = None

    # -- building the tensor map -------------------------------------------------------------------
    def _axis_of(self, alias, used) -> int:
        """The tensor-map number of `alias`: its device-matrix axis counted from the right."""
        op = "Layout"
        if not isinstance(alias, str):
            raise OpTypeError(op, "each tensor dim given as an alias name, 'None' or a tuple of them",
                              f"{type(alias).__name__} {alias!r}")
        if alias == NONE:
            return -1
        if alias not in self._alias_name:
            raise OpValueError(op, f"an alias of {self._alias_name} (or 'None')", repr(alias))
        if alias in used:
            raise OpValueError(op, "each alias used at most once per tensor",
                               f"'{alias}' twice in one layout")
        used.add(alias)
        return len(self._alias_name) - 1 - self._alias_name.index(alias)

    def __call__(self, *tensor_map):
        used, out = set(), []
        for entry in tensor_map:
            if isinstance(entry, tuple):
                if not entry:
                    raise OpValueError("Layout", "a non-empty tuple of aliases for a multi-axis dim", "()")
                out.append(tuple(self._axis_of(a, used) for a in entry))
            else:
                out.append(self._axis_of(entry, used))
        new = Layout.__new__(Layout)
        new._device_matrix, new._alias_name = self._device_matrix, self._alias_name
        new._rank_list = list(self._rank_list)
        new._tensor_map = tuple(out)
        return new

    @classmethod
    def from_tensor_map(cls, device_matrix, tensor_map, rank_list=None, alias_name=None) -> "Layout":
        """A Layout from the numbers a strategy file stores (`dev_matrix`, `tensor_map` counted from
        the right, -1 = not split, a list/tuple for a multi-axis dim). Axes get the aliases
        `alias_name` or generated ones ("d2", "d1", "d0": the tensor-map number of each axis)."""
        op = "Layout.from_tensor_map"
        device_matrix = _int_tuple(op, "device_matrix", tuple(device_matrix))
        if alias_name is None:
            alias_name = tuple(f"d{len(device_matrix) - 1 - i}" for i in range(len(device_matrix)))
        layout = cls(device_matrix, tuple(alias_name), rank_list)
        n = len(device_matrix)

        def alias(k):
            if isinstance(k, bool) or not isinstance(k, numbers.Integral) or not -1 <= k < n:
                raise OpValueError(op, f"tensor_map entries in [-1, {n - 1}] for a {n}-axis device matrix",
                                   f"{k!r} in {tensor_map!r}")
            return NONE if k == -1 else layout._alias_name[n - 1 - int(k)]

        if not isinstance(tensor_map, (list, tuple)):
            raise OpTypeError(op, "'tensor_map' to be a list or tuple", type(tensor_map).__name__)
        return layout(*[tuple(alias(k) for k in e) if isinstance(e, (list, tuple)) else alias(e)
                        for e in tensor_map])

    @classmethod
    def from_strategy(cls, strategy, device_num=None, rank_list=None) -> "Layout":
        """The layout of a `Primitive.shard` strategy tuple such as `(2, 1, 4)` (per-dim split counts).

        As in MindSpore, the device matrix is the strategy itself and dim i maps to axis i; when the
        strategy uses fewer devices than `device_num` the rest is a leading repeat axis ("rep"):
        `from_strategy((2, 1), 8)` is `Layout((4, 2, 1), ("rep", "s0", "s1"))("s0", "s1")`.
        """
        op = "Layout.from_strategy"
        strategy = _int_tuple(op, "strategy", tuple(strategy) if isinstance(strategy, list) else strategy)
        for s in strategy:
            if s < 1:
                raise OpValueError(op, "split counts >= 1", str(strategy))
        used = math.prod(strategy)
        if device_num is None:
            device_num = len(rank_list) if rank_list is not None else used
        if isinstance(device_num, bool) or not isinstance(device_num, numbers.Integral) or device_num < 1:
            raise OpValueError(op, "'device_num' as an int >= 1", repr(device_num))
        if device_num % used:
            raise OpValueError(op, f"a strategy whose product divides device_num={device_num}",
                               f"{strategy} (product {used})")
        names = tuple(f"s{i}" for i in range(len(strategy)))
        repeat = device_num // used
        if repeat > 1 or not strategy:
            layout = cls((repeat,) + strategy, ("rep",) + names, rank_list)
        else:
            layout = cls(strategy, names, rank_list)
        return layout(*names)

    # -- what it is --------------------------------------------------------------------------------
    @property
    def device_matrix(self) -> tuple:
        return self._device_matrix

    @property
    def alias_name(self) -> tuple:
        return self._alias_name

    @property
    def rank_list(self) -> list:
        return list(self._rank_list)

    @property
    def tensor_map(self):
        return self._tensor_map

    def to_dict(self) -> dict:
        """MindSpore's dict: device_matrix, tensor_map, interleaved_parallel, alias_name, rank_list."""
        if self._tensor_map is None:
            raise OpValueError("Layout.to_dict", "a layout with a tensor map (call the Layout with one alias "
                               "per tensor dim first)", "a Layout without one")
        return {"device_matrix": self._device_matrix, "tensor_map": self._tensor_map,
                "interleaved_parallel": INTERLEAVED in self._alias_name,
                "alias_name": self._alias_name, "rank_list": list(self._rank_list)}

    def __repr__(self):
        tm = "" if self._tensor_map is None else f", tensor_map={self._tensor_map}"
        return f"Layout(device_matrix={self._device_matrix}, alias_name={self._alias_name}{tm})"

    def __eq__(self, other):
        return (isinstance(other, Layout) and self._device_matrix == other._device_matrix
                and self._tensor_map == other._tensor_map and self._rank_list == other._rank_list)

    def __hash__(self):
        return hash((self._device_matrix, self._tensor_map, tuple(self._rank_list)))

    @property
    def device_num(self) -> int:
        """Number of ranks the layout spreads over."""
        return len(self._rank_list)

    def _require_map(self, op):
        if self._tensor_map is None:
            raise OpValueError(op, "a layout with a tensor map (call the Layout with one alias per dim)",
                               "a Layout without one")
        return self._tensor_map

    def _require_sliceable(self, op):
        tm = self._require_map(op)
        if INTERLEAVED in self._alias_name:
            raise OpValueError(op, f"a layout without '{INTERLEAVED}' (a virtual split inside one device has no "
                               "per-rank slice)", repr(self))
        return tm

    def _axes_of_dim(self, entry) -> tuple:
        """Device-matrix axis indexes (from the left) a tensor-map entry splits over, major first."""
        nums = entry if isinstance(entry, tuple) else (entry,)
        n = len(self._device_matrix)
        return tuple(n - 1 - k for k in nums if k != -1)

    def dim_splits(self) -> tuple:
        """How many pieces each tensor dim is cut into (the `Primitive.shard` strategy tuple)."""
        tm = self._require_map("Layout.dim_splits")
        return tuple(math.prod(self._device_matrix[a] for a in self._axes_of_dim(e)) for e in tm)


# ---------------------------------------------------------------------------------------------------
# The slice algebra
def _position(op: str, layout: Layout, rank) -> int:
    """Index of `rank` in the grid (C order)."""
    if isinstance(rank, bool) or not isinstance(rank, (numbers.Integral, np.integer)):
        raise OpTypeError(op, "'rank' to be an int", f"{type(rank).__name__} {rank!r}")
    try:
        return layout._rank_list.index(int(rank))
    except ValueError:
        raise OpValueError(op, f"a rank of the layout's rank_list {layout._rank_list}", str(rank)) from None


def _coordinate(layout: Layout, position: int) -> tuple:
    return tuple(int(c) for c in np.unravel_index(position, layout.device_matrix))


def check_shape(op: str, layout: Layout, global_shape, name: str = "tensor") -> tuple:
    """`global_shape` as a tuple, checked against the layout: one tensor-map entry per dim and every
    dim divisible by its number of pieces (MindSpore splits evenly only)."""
    tm = layout._require_sliceable(op)
    if isinstance(global_shape, (list, np.ndarray)):
        global_shape = tuple(int(s) for s in global_shape)
    shape = _int_tuple(op, "global_shape", global_shape)
    if len(shape) != len(tm):
        raise OpValueError(op, f"{name} of rank {len(tm)} (one tensor-map entry per dim, tensor_map={tm})",
                           f"shape {shape}")
    for d, (size, pieces) in enumerate(zip(shape, layout.dim_splits())):
        if size % pieces:
            raise OpValueError(op, f"dim {d} of {name} divisible by its {pieces} pieces (layout {tm} over "
                               f"{layout.device_matrix})", f"shape {shape}")
    return shape


def slice_index(layout: Layout, rank) -> tuple:
    """Which piece of each dim `rank` holds (0-based, per dim)."""
    op = "slice_index"
    tm = layout._require_sliceable(op)
    coord = _coordinate(layout, _position(op, layout, rank))
    dm = layout.device_matrix
    index = []
    for entry in tm:
        i = 0
        for a in layout._axes_of_dim(entry):        # mixed radix, the first alias most significant
            i = i * dm[a] + coord[a]
        index.append(i)
    return tuple(index)


def slice_bounds(layout: Layout, global_shape, rank) -> tuple:
    """((start, stop), ...) per dim of the piece `rank` holds of a tensor of `global_shape`."""
    shape = check_shape("slice_bounds", layout, global_shape)
    return tuple((i * (size // pieces), (i + 1) * (size // pieces))
                 for size, pieces, i in zip(shape, layout.dim_splits(), slice_index(layout, rank)))


def shard_shape(layout: Layout, global_shape) -> tuple:
    """The shape of every rank's piece (all pieces have the same shape: splits are even)."""
    shape = check_shape("shard_shape", layout, global_shape)
    rank0 = layout._rank_list[0]
    return tuple(stop - start for start, stop in slice_bounds(layout, shape, rank0))


def shard_of(full, layout: Layout, rank) -> np.ndarray:
    """The piece of the full array `full` that `rank` holds under `layout` (a C-contiguous copy)."""
    op = "shard_of"
    if not isinstance(full, np.ndarray):
        full = np.asarray(getattr(full, "asnumpy", lambda: full)())
    check_shape(op, layout, full.shape)
    bounds = slice_bounds(layout, full.shape, rank)
    return np.array(full[tuple(slice(a, b) for a, b in bounds)], order="C", copy=True)


def replica_groups(layout: Layout) -> list:
    """Lists of ranks that hold identical pieces (one list per distinct piece, ordered by piece)."""
    layout._require_sliceable("replica_groups")
    groups: dict = {}
    for rank in layout._rank_list:
        groups.setdefault(slice_index(layout, rank), []).append(rank)
    return [groups[k] for k in sorted(groups)]


def _same_bytes(a: np.ndarray, b: np.ndarray) -> bool:
    """Bit equality (NaNs with equal bits agree, +0.0 and -0.0 do not): replicas are copies."""
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def assemble(shards_by_rank: dict, layout: Layout, global_shape, name: str = "tensor") -> np.ndarray:
    """The full array from `{rank: piece}`; the inverse of `shard_of`.

    Every distinct piece must come from at least one rank; where several ranks of one replica group
    are given, their pieces must be bit-identical (a mismatch means the replicas drifted apart, and
    picking one silently would hide it). Ranks outside the layout are an error.
    """
    op = "assemble"
    if not isinstance(shards_by_rank, dict) or not shards_by_rank:
        raise OpTypeError(op, "'shards_by_rank' to be a non-empty dict {rank: ndarray}",
                          type(shards_by_rank).__name__)
    shape = check_shape(op, layout, global_shape, name)
    piece_shape = shard_shape(layout, shape)
    arrays = {}
    for rank, piece in shards_by_rank.items():
        _position(op, layout, rank)                       # a rank of this layout
        arr = piece if isinstance(piece, np.ndarray) else np.asarray(getattr(piece, "asnumpy", lambda: piece)())
        if arr.shape != piece_shape:
            raise OpValueError(op, f"the piece of '{name}' on rank {rank} of shape {piece_shape} (global shape "
                               f"{shape}, layout {layout.tensor_map} over {layout.device_matrix})",
                               f"shape {arr.shape}")
        arrays[int(rank)] = arr
    dtypes = {a.dtype for a in arrays.values()}
    if len(dtypes) != 1:
        raise OpValueError(op, f"one dtype for every piece of '{name}'",
                           ", ".join(f"rank {r}: {a.dtype}" for r, a in sorted(arrays.items())))
    full = np.empty(shape, dtype=dtypes.pop())
    for group in replica_groups(layout):
        given = [r for r in group if r in arrays]
        if not given:
            raise OpValueError(op, f"every piece of '{name}': the piece held by ranks {group}",
                               f"none of them (given ranks {sorted(arrays)})")
        first = arrays[given[0]]
        for r in given[1:]:
            if not _same_bytes(first, arrays[r]):
                raise OpValueError(op, f"identical replicas of '{name}' on ranks {given}",
                                   f"rank {r} differs from rank {given[0]}")
        full[tuple(slice(a, b) for a, b in slice_bounds(layout, shape, given[0]))] = first
    return full
