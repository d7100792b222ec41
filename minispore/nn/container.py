"""Containers: `SequentialCell` (run children in order), `CellList` (hold children, no construct)
and `CellDict` (hold children by string key, no construct).

Children are registered under their index as a string ("0", "1", ...) or, for a SequentialCell
built from an OrderedDict, under the dict's keys; so parameters are named `layers.0.weight` or
`features.conv.weight`, as in MindSpore.
"""
from __future__ import annotations

from collections import OrderedDict, abc

from ..common.errors import MinisporeError, OpIndexError, OpTypeError, OpValueError, _OpErrorMixin
from .cell import Cell


class _CellDictKeyError(_OpErrorMixin, MinisporeError, KeyError):
    """A bad or missing CellDict key: a KeyError (as MindSpore raises) carrying minispore's
    'For op, expected X, but got Y' message."""

    def __str__(self):              # KeyError's str() would show the repr of the message
        return self.args[0] if self.args else ""


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


class CellDict(Cell):
    """An ordered dict of Cells: `CellDict({'conv': Conv2d(...), 'act': ReLU()})`.

    Keys are strings (no '.', not empty, not an existing attribute of the cell); values are Cells
    but not containers (MindSpore refuses CellDict/CellList/SequentialCell values). A child's
    parameters are named `<key>.<name>` (`<attr>.<key>.<name>` once the dict is an attribute).
    No construct: index it inside a Cell's construct."""

    def __init__(self, *args, **kwargs):
        auto_prefix = kwargs.pop("auto_prefix", True)
        if kwargs:
            raise OpTypeError("CellDict", "only the keyword 'auto_prefix'", f"{sorted(kwargs)}")
        if len(args) > 1:
            raise OpTypeError("CellDict", "at most one dict or iterable of (key, Cell) pairs", f"{len(args)} arguments")
        super().__init__(auto_prefix=auto_prefix)
        if args:
            self.update(args[0])

    def _validate_key(self, key):
        if not isinstance(key, str):
            raise OpTypeError("CellDict", "a string key", type(key).__name__)
        if key == "" or "." in key:
            raise _CellDictKeyError("CellDict", "a non-empty key without '.'", repr(key))
        if key not in self._cells and (key in self.__dict__ or hasattr(type(self), key)):
            raise _CellDictKeyError("CellDict", "a key that is not an attribute of the Cell", repr(key))

    def _validate_cell(self, cell):
        if cell is None:
            raise OpTypeError("CellDict", "a Cell value", "None")
        if not isinstance(cell, Cell):
            raise OpTypeError("CellDict", "a Cell value", type(cell).__name__)
        if isinstance(cell, (CellDict, CellList, SequentialCell)):
            raise OpTypeError("CellDict", "a Cell that is not a CellDict, CellList or SequentialCell",
                              type(cell).__name__)

    def __getitem__(self, key):
        if key not in self._cells:
            raise _CellDictKeyError("CellDict.__getitem__", f"a key in {list(self._cells)}", repr(key))
        return self._cells[key]

    def __setitem__(self, key, cell):
        self._validate_key(key)
        self._validate_cell(cell)
        if self._auto_prefix and not cell.__dict__.get("_attached", False):
            cell.update_parameters_name(_container_prefix(self) + key + ".")
            cell.__dict__["_attached"] = True
        self._cells[key] = cell

    def __delitem__(self, key):
        if key not in self._cells:
            raise _CellDictKeyError("CellDict.__delitem__", f"a key in {list(self._cells)}", repr(key))
        del self._cells[key]

    def __len__(self):
        return len(self._cells)

    def __iter__(self):
        return iter(self._cells)

    def __contains__(self, key):
        return key in self._cells

    def clear(self):
        self._cells.clear()

    def pop(self, key):
        value = self[key]
        del self[key]
        return value

    def keys(self):
        return self._cells.keys()

    def values(self):
        return self._cells.values()

    def items(self):
        return self._cells.items()

    def update(self, cells):
        """Add the (key, Cell) pairs of a mapping or an iterable of pairs, in order."""
        if isinstance(cells, (abc.Mapping, CellDict)):
            for key, cell in cells.items():
                self[key] = cell
            return
        if not isinstance(cells, abc.Iterable):
            raise OpTypeError("CellDict.update", "a mapping or an iterable of (key, Cell) pairs", type(cells).__name__)
        for i, kv in enumerate(cells):
            if not isinstance(kv, abc.Iterable):
                raise OpTypeError("CellDict.update", f"element #{i} to be a (key, Cell) pair", type(kv).__name__)
            kv = tuple(kv)
            if len(kv) != 2:
                raise OpValueError("CellDict.update", f"element #{i} of length 2", f"length {len(kv)}")
            self[kv[0]] = kv[1]

    def construct(self, *inputs):
        raise NotImplementedError("CellDict has no construct; index it inside a Cell's construct")
