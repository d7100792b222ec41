"""Containers: `SequentialCell` (run children in order) and `CellList` (hold children, no construct).

Children are registered under their index as a string ("0", "1", ...) or, for a SequentialCell
built from an OrderedDict, under the dict's keys; so parameters are named `layers.0.weight` or
`features.conv.weight`, as in MindSpore.
"""
from __future__ import annotations

from collections import OrderedDict

from ..common.errors import OpIndexError, OpTypeError
from .cell import Cell


def _check_cell(who, cell):
    if not isinstance(cell, Cell):
        raise OpTypeError(who, "a Cell", type(cell).__name__)
    return cell


def _container_prefix(container) -> str:
    """The name prefix the container's own parameters carry ('blocks.' once it is attached as
    `blocks`), recovered from an existing child, so a cell appended later is named consistently."""
    for key, cell in container._cells.items():
        if cell is None:
            continue
        for name, p in cell.parameters_and_names():
            tail = f"{key}.{name}"
            if p.name.endswith(tail):
                return p.name[: len(p.name) - len(tail)]
            return ""
    return ""


class _IndexedCells(Cell):
    """Shared list behaviour of CellList and SequentialCell."""

    def _add_indexed(self, key, cell):
        if self._auto_prefix and not cell.__dict__.get("_attached", False):
            cell.update_parameters_name(_container_prefix(self) + key + ".")
            cell.__dict__["_attached"] = True
        self._cells[key] = cell

    def _rekey(self, cells):
        self._cells.clear()
        for i, c in enumerate(cells):
            self._cells[str(i)] = c

    def _index(self, who, index):
        n = len(self._cells)
        if not isinstance(index, int) or isinstance(index, bool):
            raise OpTypeError(who, "an int or slice index", type(index).__name__)
        if not -n <= index < n:
            raise OpIndexError(who, f"an index in [{-n}, {n})", str(index))
        return index % n

    def __len__(self):
        return len(self._cells)

    def __iter__(self):
        return iter(self._cells.values())

    def __delitem__(self, index):
        cells = list(self._cells.values())
        if isinstance(index, slice):
            del cells[index]
        else:
            del cells[self._index(f"{type(self).__name__}.__delitem__", index)]
        self._rekey(cells)

    def __setitem__(self, index, cell):
        _check_cell(f"{type(self).__name__}.__setitem__", cell)
        i = self._index(f"{type(self).__name__}.__setitem__", index)
        key = list(self._cells.keys())[i]
        prefix = _container_prefix(self)
        if self._auto_prefix and not cell.__dict__.get("_attached", False):
            cell.update_parameters_name(prefix + key + ".")
            cell.__dict__["_attached"] = True
        self._cells[key] = cell

    def append(self, cell):
        """Add `cell` at the end."""
        _check_cell(f"{type(self).__name__}.append", cell)
        self._add_indexed(str(len(self._cells)), cell)
        return self

    def extend(self, cells):
        for c in cells:
            self.append(c)
        return self

    def insert(self, index, cell):
        """Insert `cell` before position `index` (later cells move up one index)."""
        _check_cell(f"{type(self).__name__}.insert", cell)
        cells = list(self._cells.values())
        n = len(cells)
        index = max(0, min(n, index + n if index < 0 else index))
        prefix = _container_prefix(self)
        cells.insert(index, cell)
        self._rekey(cells)
        if self._auto_prefix and not cell.__dict__.get("_attached", False):
            cell.update_parameters_name(prefix + str(index) + ".")
            cell.__dict__["_attached"] = True
        return self


class CellList(_IndexedCells):
    """A list of Cells: `CellList([Dense(2, 3), ReLU()])`. Iterable, indexable; no construct."""

    def __init__(self, *args, **kwargs):
        auto_prefix = kwargs.pop("auto_prefix", True)
        if kwargs:
            raise OpTypeError("CellList", "only the keyword 'auto_prefix'", f"{sorted(kwargs)}")
        super().__init__(auto_prefix=auto_prefix)
        if len(args) > 1:
            raise OpTypeError("CellList", "one list of Cells", f"{len(args)} arguments")
        if args and args[0] is not None:
            self.extend(args[0])

    def __getitem__(self, index):
        if isinstance(index, slice):
            return CellList(list(self._cells.values())[index], auto_prefix=False)
        return list(self._cells.values())[self._index("CellList.__getitem__", index)]

    def __iadd__(self, cells):
        return self.extend(cells)

    def construct(self, *inputs):
        raise NotImplementedError("CellList has no construct; iterate over it inside a Cell's construct")


class SequentialCell(_IndexedCells):
    """Runs its children one after another: `SequentialCell([Dense(2, 8), ReLU(), Dense(8, 1)])`.

    Accepts a list of Cells, Cells as separate arguments, or an OrderedDict `name -> Cell`.
    """

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for name, cell in args[0].items():
                _check_cell("SequentialCell", cell)
                self.insert_child_to_cell(name, cell)
        elif len(args) == 1 and isinstance(args[0], (list, tuple)):
            self.extend(args[0])
        else:
            self.extend(args)

    def __getitem__(self, index):
        if isinstance(index, slice):
            # a view on the same cells: no renaming of their parameters
            view = SequentialCell()
            view.__dict__["_auto_prefix"] = False
            for key, cell in list(self._cells.items())[index]:
                view._cells[key] = cell
            return view
        return list(self._cells.values())[self._index("SequentialCell.__getitem__", index)]

    def construct(self, input_data):
        for cell in self._cells.values():
            input_data = cell(input_data)
        return input_data
