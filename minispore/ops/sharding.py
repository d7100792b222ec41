"""How a tensor is laid out over devices, and what a primitive's sharding rule answers (semi-auto parallel).

A *device matrix* arranges the devices of one stage as an n-d grid, e.g. (2, 4) for 8 devices;
device (rank) r sits at the row-major coordinates of r in that grid. A tensor's *tensor map* says,
per tensor dimension, which device-matrix axis (or axes) the dimension is split over. As in
MindSpore, axes are numbered FROM THE RIGHT: in a (2, 4) matrix axis 0 has size 4 and axis 1 has
size 2; -1 means "not split"; a tuple splits one dimension over several axes, the first listed
axis being the major one (the block index is c[first] * size(second) + c[second]). An axis the
tensor map does not use replicates the tensor along it. Example: a (8, 6) matrix with map (1, 0)
on a (2, 3) grid is cut into 2 x 3 blocks of (4, 2), device (i, j) holding block (i, j).

`partial` lists device-matrix axes over which the value is a *partial sum*: the devices that differ
only in their coordinates along those axes hold summands, and the tensor is their sum (what a
matrix product leaves when its contracted dimension is split; an AllReduce or a ReduceScatter
settles it). An axis is used at most once in a layout, by one dimension or by `partial`.

A primitive's `sharding` fact (ops/primitive.py) maps its inputs' layouts to its outputs'. The rules
themselves live in ops/sharding_rules.py; this module is only the vocabulary they share with the
compiler pass that reads them (parallel/, graph/), kept minimal and free of MindSpore's alias names
(the user-facing `ms.Layout` converts to `TensorLayout`).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..common.errors import OpValueError

NOT_SPLIT = -1


def _norm_entry(e):
    """A tensor-map entry as -1, an int axis, or a tuple of >= 2 axes (so equal layouts compare equal)."""
    if isinstance(e, (tuple, list)):
        e = tuple(int(a) for a in e if a != NOT_SPLIT)
        if not e:
            return NOT_SPLIT
        return e[0] if len(e) == 1 else e
    return int(e)


@dataclass(frozen=True)
class TensorLayout:
    """`device_matrix` (sizes, left to right), `tensor_map` (per tensor dim: -1, an axis counted from
    the right, or a tuple of them) and `partial` (axes the value is a pending sum over). Frozen and
    hashable; entries are normalized, so two spellings of one layout are equal."""

    device_matrix: tuple
    tensor_map: tuple
    partial: tuple = ()

    def __post_init__(self):
        dm = tuple(int(s) for s in self.device_matrix)
        tm = tuple(_norm_entry(e) for e in self.tensor_map)
        part = tuple(sorted(int(a) for a in self.partial))
        object.__setattr__(self, "device_matrix", dm)
        object.__setattr__(self, "tensor_map", tm)
        object.__setattr__(self, "partial", part)
        if any(s < 1 for s in dm):
            raise OpValueError("TensorLayout", "a device matrix of positive sizes", repr(dm))
        seen = []
        for e in tm:
            seen.extend(e if isinstance(e, tuple) else (() if e == NOT_SPLIT else (e,)))
        seen.extend(part)
        for a in seen:
            if not 0 <= a < len(dm):
                raise OpValueError("TensorLayout", f"device-matrix axes in [0, {len(dm)}) (or -1) for the device "
                                   f"matrix {dm}", f"axis {a} in tensor_map {tm}, partial {part}")
        if len(set(seen)) != len(seen):
            raise OpValueError("TensorLayout", "each device-matrix axis used at most once (by one dim or by partial)",
                               f"tensor_map {tm}, partial {part}")

    # ---- construction
    @classmethod
    def replicated(cls, device_matrix, ndim) -> "TensorLayout":
        return cls(tuple(device_matrix), (NOT_SPLIT,) * ndim)

    def with_map(self, tensor_map, partial=None) -> "TensorLayout":
        """The same device matrix with another tensor map (and partial: kept unless given)."""
        return TensorLayout(self.device_matrix, tuple(tensor_map), self.partial if partial is None else tuple(partial))

    def settled(self) -> "TensorLayout":
        """This layout with the partial sums resolved (what an AllReduce over `partial` gives)."""
        return self if not self.partial else TensorLayout(self.device_matrix, self.tensor_map)

    # ---- reading
    @property
    def ndim(self) -> int:
        return len(self.tensor_map)

    @property
    def device_num(self) -> int:
        n = 1
        for s in self.device_matrix:
            n *= s
        return n

    def axis_size(self, axis) -> int:
        """Size of device-matrix axis `axis` (counted from the right)."""
        return self.device_matrix[len(self.device_matrix) - 1 - axis]

    def axes(self, dim) -> tuple:
        """The device-matrix axes tensor dim `dim` is split over, major first (() when not split)."""
        e = self.tensor_map[dim]
        return e if isinstance(e, tuple) else (() if e == NOT_SPLIT else (e,))

    def used_axes(self) -> frozenset:
        """Axes used by the tensor map or by partial."""
        out = set(self.partial)
        for d in range(self.ndim):
            out.update(self.axes(d))
        return frozenset(out)

    def splits(self, dim) -> int:
        """Into how many blocks dim `dim` is cut."""
        n = 1
        for a in self.axes(dim):
            n *= self.axis_size(a)
        return n

    def split_counts(self) -> tuple:
        """Per dim, the number of blocks (MindSpore's `in_strategy` entry for this tensor)."""
        return tuple(self.splits(d) for d in range(self.ndim))

    def is_replicated(self) -> bool:
        """Every device holds the whole value (no dim split, nothing partial)."""
        return not self.partial and all(e == NOT_SPLIT for e in self.tensor_map)

    def local_shape(self, shape, op="TensorLayout") -> tuple:
        """The shape of one device's block of a tensor of `shape`; `op` names the caller in the error
        raised when the layout does not fit (wrong rank, a dim not divisible by its split count)."""
        shape = tuple(shape)
        if len(shape) != self.ndim:
            raise OpValueError(op, f"a layout with one tensor-map entry per dim of the shape {shape}",
                               f"tensor_map {self.tensor_map}")
        out = []
        for d, s in enumerate(shape):
            k = self.splits(d)
            if s % k:
                raise OpValueError(op, f"dim {d} (size {s}) divisible by its split count {k}",
                                   f"shape {shape} with tensor_map {self.tensor_map} on device matrix "
                                   f"{self.device_matrix}")
            out.append(s // k)
        return tuple(out)

    # ---- devices
    def coords(self, rank) -> tuple:
        """Coordinates of device `rank`, indexed by axis (counted from the right): coords[a]."""
        left = []
        for s in reversed(self.device_matrix):
            left.append(rank % s)
            rank //= s
        return tuple(left)                     # left[0] is the last (rightmost) entry: axis 0

    def block_index(self, rank, dim) -> int:
        """Which block of dim `dim` device `rank` holds."""
        c = self.coords(rank)
        i = 0
        for a in self.axes(dim):
            i = i * self.axis_size(a) + c[a]
        return i

    def __repr__(self):
        p = f", partial={self.partial}" if self.partial else ""
        return f"TensorLayout({self.device_matrix}, {self.tensor_map}{p})"


@dataclass(frozen=True)
class MaskedLookup:
    """The local computation a lookup needs when its table is split along the looked-up axis
    (a vocabulary-parallel embedding): each device holds rows [start, start + n) of the table, so
    it computes `where(valid, op(table, clip(ids - start, 0, n - 1)), 0)` with
    `valid = start <= ids < start + n`; the output is then a partial sum over the table's axes for
    that dim (exactly one device contributes each row). `table` and `indices` are input positions,
    `axis` the table dim; the output rows are masked along the dims that came from `indices`."""

    table: int
    indices: int
    axis: int


@dataclass(frozen=True)
class ShardingResult:
    """What a sharding rule answers.

    * `out_layouts`  one TensorLayout per output (a tuple even for one output);
    * `requires`     None when the op consumes its inputs' layouts as given; otherwise one layout
                     (None for a non-tensor input) per input that the compiler must redistribute
                     to first - `out_layouts` then describe the outputs for those layouts;
    * `scale`        the factor each device's local outputs are multiplied by (a mean over a split
                     dim: the local mean divided by the split count, summed by the AllReduce);
    * `lookup`       a `MaskedLookup` when the local kernel must be the masked lookup it describes;
    * `local_attrs`  attributes the per-device kernel takes instead of the node's (a reshape's
                     target `shape` becomes the local block's shape), else None;
    * `note`         a caveat the pass may report (an exactness assumption), else "".
    """

    out_layouts: tuple
    requires: tuple | None = None
    scale: float = 1.0
    lookup: MaskedLookup | None = None
    local_attrs: dict | None = None
    note: str = ""


__all__ = ["NOT_SPLIT", "TensorLayout", "MaskedLookup", "ShardingResult"]
