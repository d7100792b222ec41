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

Two NumPy helpers move between a global value and the devices' blocks - what a test, a
single-process simulation of every rank, or a checkpoint tool needs: `local_block(array, layout,
rank)` cuts one device's block out, `assemble_blocks(blocks_by_rank, layout, shape)` puts the
blocks back together (summing partial ones, checking that replicas agree).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

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

    def block_slices(self, rank, shape, op="TensorLayout") -> tuple:
        """The index (a tuple of slices) of device `rank`'s block in a tensor of global `shape`."""
        local = self.local_shape(shape, op=op)
        c = self.coords(rank)
        out = []
        for d, n in enumerate(local):
            i = 0
            for a in self.axes(d):
                i = i * self.axis_size(a) + c[a]
            out.append(slice(i * n, (i + 1) * n))
        return tuple(out)

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
    `axis` the table dim; the output rows are masked along the dims that came from `indices`.
    `batch_dims` (a gather's) leading dims are shared by table and indices: the looked-up dims sit
    in the output after the table's dims before `axis` (params[:axis] + indices[batch_dims:] + ...)."""

    table: int
    indices: int
    axis: int
    batch_dims: int = 0

    def run(self, kernel, args, attrs, table_layout: TensorLayout, rank: int):
        """Device `rank`'s masked lookup: `kernel(*args, **attrs)` with `args` its local blocks,
        the ids shifted into the local rows of the table and the rows of ids it does not hold
        zeroed. `table_layout` is the table's layout (where this device's rows start)."""
        args = list(args)
        table, ids = np.asarray(args[self.table]), np.asarray(args[self.indices])
        n = table.shape[self.axis]
        start = table_layout.block_index(rank, self.axis) * n
        valid = (ids >= start) & (ids < start + n)
        args[self.indices] = np.where(valid, ids - start, 0).astype(ids.dtype, copy=False)
        out = np.asarray(kernel(*args, **attrs))
        mask = valid.reshape(self.mask_shape(ids.shape, table.ndim))
        return np.where(mask, out, np.zeros((), dtype=out.dtype))

    def mask_shape(self, ids_shape, table_ndim) -> tuple:
        """The shape to reshape the ids' validity mask to so that it broadcasts against the
        output: the ids' batch dims first, size 1 for the table's dims before `axis`, the other ids
        dims, size 1 for the table's dims after `axis` (an embedding: ids.shape + (1,))."""
        ids_shape, b = tuple(ids_shape), self.batch_dims
        return ids_shape[:b] + (1,) * (self.axis - b) + ids_shape[b:] + (1,) * (table_ndim - self.axis - 1)


@dataclass(frozen=True)
class ShardingResult:
    """What a sharding rule answers.

    * `out_layouts`  one TensorLayout per output (a tuple even for one output);
    * `requires`     None when the op consumes its inputs' layouts as given; otherwise one layout
                     (None for a non-tensor input) per input that the compiler must redistribute
                     to first - `out_layouts` then describe the outputs for those layouts;
    * `scale`        the factor each device's local outputs are multiplied by (a mean over a split
                     dim: the local mean divided by the split count, summed by the AllReduce);
    * `lookup`       a `MaskedLookup` when the local kernel must be the masked lookup it describes
                     (`MaskedLookup.run` is that computation in NumPy);
    * `local_attrs`  attributes the per-device kernel takes instead of the node's, merged over them
                     (`{**attrs, **local_attrs}`: a reshape's target `shape` becomes the local
                     block's shape, a flash attention's `head_num` the local head count), else None;
    * `note`         a caveat the pass may report (an exactness assumption), else "".
    """

    out_layouts: tuple
    requires: tuple | None = None
    scale: float = 1.0
    lookup: MaskedLookup | None = None
    local_attrs: dict | None = None
    note: str = ""


# ------------------------------------------------------------------------------------------------
# moving between a global value and the devices' blocks (NumPy; used by tests, simulators, the pass)
def local_block(array, layout: TensorLayout, rank: int) -> np.ndarray:
    """Device `rank`'s block of the global `array` under `layout`: the slice its tensor map gives
    (a view of `array` where NumPy allows). A *partial* layout is sliced as if it were replicated
    along the partial axes - every device of a partial group gets the whole block, not a summand;
    splitting a value into summands is a choice (zeros on all but one device, random parts ...)
    that this function does not make. Raises OpValueError when the layout does not fit."""
    array = np.asarray(array)
    if not 0 <= int(rank) < layout.device_num:
        raise OpValueError("local_block", f"a rank in [0, {layout.device_num}) for the device matrix "
                           f"{layout.device_matrix}", repr(rank))
    return array[layout.block_slices(int(rank), array.shape, op="local_block")]


def assemble_blocks(blocks_by_rank, layout: TensorLayout, shape, *, rtol=1e-5, atol=1e-8) -> np.ndarray:
    """The global value of shape `shape` from every device's block (the inverse of `local_block`).

    `blocks_by_rank` maps each rank of the device matrix to its block (a list indexed by rank also
    works). Blocks of devices that differ only along the `partial` axes are SUMMED (they hold
    summands); devices that differ only along axes the layout does not use are replicas, and
    their assembled values must agree within `rtol`/`atol` (else OpValueError: a replica drifted,
    which in a real run is a bug). Every rank must be present, with a block of the local shape."""
    shape = tuple(int(s) for s in shape)
    n = layout.device_num
    if not isinstance(blocks_by_rank, dict):
        blocks_by_rank = dict(enumerate(blocks_by_rank))
    missing = [r for r in range(n) if r not in blocks_by_rank]
    if missing or len(blocks_by_rank) != n:
        raise OpValueError("assemble_blocks", f"one block for each of the {n} ranks of the device matrix "
                           f"{layout.device_matrix}", f"ranks {sorted(blocks_by_rank)}")
    local = layout.local_shape(shape, op="assemble_blocks")
    blocks = {r: np.asarray(b) for r, b in blocks_by_rank.items()}
    for r, b in blocks.items():
        if b.shape != local:
            raise OpValueError("assemble_blocks", f"blocks of the local shape {local} (global {shape} under "
                               f"{layout})", f"shape {b.shape} from rank {r}")
    dtype = np.result_type(*blocks.values())
    replica_axes = [a for a in range(len(layout.device_matrix)) if a not in layout.used_axes()]
    copies: dict = {}                      # replica coordinates -> that replica's assembled value
    for r in range(n):
        c = layout.coords(r)
        key = tuple(c[a] for a in replica_axes)
        out = copies.get(key)
        if out is None:
            out = copies[key] = np.zeros(shape, dtype=dtype)
        out[layout.block_slices(r, shape, op="assemble_blocks")] += blocks[r]
    values = list(copies.values())
    first = values[0]
    for key, v in zip(list(copies)[1:], values[1:]):
        if not np.allclose(v, first, rtol=rtol, atol=atol, equal_nan=True):
            worst = float(np.max(np.abs(np.asarray(v, dtype=np.float64) - np.asarray(first, dtype=np.float64))))
            raise OpValueError("assemble_blocks", f"replicas along the unused axes {tuple(replica_axes)} that agree "
                               f"(rtol={rtol}, atol={atol})", f"a difference of {worst:g} at replica coordinates {key}")
    return first


__all__ = ["NOT_SPLIT", "TensorLayout", "MaskedLookup", "ShardingResult", "local_block", "assemble_blocks"]
